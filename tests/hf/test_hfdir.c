/* test_hfdir.c: the runtime's rules for Hugging Face model directories that
 * the export and import rely on (runtime/common/safetensors_shard.c,
 * safetensors_index.c):
 *   - config.json and generation_config.json are written with the weights,
 *     byte for byte, and config.json is the mark of a complete export: an
 *     export that fails after moving a shard into place leaves no
 *     config.json (the earlier export's is removed first), and one of these
 *     files an earlier export left that this one does not write is removed;
 *   - a file writer, a name of another kind, a file added twice: refused;
 *   - rt_st_pick finds a tensor under its name or its base_model_prefix
 *     twin, and refuses one under both or neither, naming both and the file.
 * Usage: test_hfdir WORK */
#include "rt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fails;
#define CHECK(c, ...)                                                                         \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fprintf(stderr, "test_hfdir:%d: ", __LINE__);                                     \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            fails++;                                                                          \
        }                                                                                     \
    } while (0)

static char work[4096];

static const char *at(const char *dir, const char *name)
{
    static char buf[4][8192];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s/%s", work, dir, name);
    return buf[k];
}

static bool exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static void put_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "test_hfdir: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

/* The whole file, NUL-terminated, or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = NULL;
    size_t n = 0, cap = 0;
    for (int c; (c = fgetc(f)) != EOF;) {
        if (n + 2 > cap)
            s = realloc(s, cap = cap ? 2 * cap : 256);
        s[n++] = (char)c;
    }
    fclose(f);
    if (!s)
        s = calloc(1, 1);
    s[n] = 0;
    return s;
}

static bool same(const char *path, const char *text)
{
    char *s = slurp(path);
    bool ok = s && strcmp(s, text) == 0;
    free(s);
    return ok;
}

/* Two tensors of 4 floats: one shard each at a limit of 16 bytes. */
static const RtStTensor two[2] = {{"a", 1, {4}}, {"b", 1, {4}}};

static RtStWriter *open_dir(const char *dir, char *err, size_t n)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", work, dir);
    return rt_st_writer_open_dir(path, two, 2, "F32", 16, err, n);
}

/* Put every element of "a" and, when whole_b, of "b" (else half of it). */
static void put(RtStWriter *w, bool whole_b)
{
    char err[512];
    float x[4] = {1, 2, 3, 4};
    int64_t g[1] = {4}, o[1] = {0}, l[1] = {4}, half[1] = {2};
    CHECK(!rt_st_writer_put(w, "a", false, 0, 1, 1, g, o, l, x, err, sizeof err), "%s", err);
    CHECK(!rt_st_writer_put(w, "b", false, 0, 1, 1, g, o, whole_b ? l : half, x, err,
                            sizeof err), "%s", err);
}

static const char cfg1[] = "{\n  \"model_type\": \"llama\"\n}\n";
static const char cfg2[] = "{\n  \"model_type\": \"gpt2\"\n}\n";
static const char gen[] = "{\"bos_token_id\": 1}"; /* no newline: copied as is */

static void written_with_the_weights(void)
{
    char err[512];
    RtStWriter *w = open_dir("d", err, sizeof err);
    CHECK(w, "open: %s", err);
    if (!w)
        return;
    /* Added in the other order: config.json is still written last. */
    CHECK(!rt_st_writer_add_file(w, "config.json", cfg1, strlen(cfg1), err, sizeof err), "%s",
          err);
    CHECK(!rt_st_writer_add_file(w, "generation_config.json", gen, strlen(gen), err, sizeof err),
          "%s", err);
    CHECK(rt_st_writer_add_file(w, "config.json", cfg1, strlen(cfg1), err, sizeof err) &&
              strstr(err, "config.json") && strstr(err, "twice"),
          "config.json added twice: '%s'", err);
    CHECK(rt_st_writer_add_file(w, "tokenizer.json", "{}", 2, err, sizeof err) &&
              strstr(err, "tokenizer.json"),
          "another file accepted: '%s'", err);
    CHECK(rt_st_writer_add_file(w, "../config.json", "{}", 2, err, sizeof err),
          "a path accepted");
    put(w, true);
    CHECK(!rt_st_writer_close(w, err, sizeof err), "close: %s", err);
    CHECK(same(at("d", "config.json"), cfg1), "config.json differs");
    CHECK(same(at("d", "generation_config.json"), gen), "generation_config.json differs");
    CHECK(exists(at("d", "model.safetensors.index.json")), "no index");
    RtSt *st = rt_st_open(at("d", "config.json") + 0, err, sizeof err);
    CHECK(!st, "a config.json opened as weights");
    char dir[8192];
    snprintf(dir, sizeof dir, "%s/d", work);
    st = rt_st_open(dir, err, sizeof err);
    CHECK(st && rt_st_count(st) == 2, "the directory does not read back: %s", err);
    rt_st_close(st);
}

static void stale_files_removed(void)
{
    char err[512];
    /* An export without generation_config.json over one with it. */
    RtStWriter *w = open_dir("d", err, sizeof err);
    CHECK(w, "open: %s", err);
    if (!w)
        return;
    CHECK(!rt_st_writer_add_file(w, "config.json", cfg2, strlen(cfg2), err, sizeof err), "%s",
          err);
    put(w, true);
    CHECK(!rt_st_writer_close(w, err, sizeof err), "close: %s", err);
    CHECK(same(at("d", "config.json"), cfg2), "config.json not replaced");
    CHECK(!exists(at("d", "generation_config.json")),
          "the earlier export's generation_config.json was left");
    /* Neither file: both go (they would describe other weights). */
    w = open_dir("d", err, sizeof err);
    put(w, true);
    CHECK(!rt_st_writer_close(w, err, sizeof err), "close: %s", err);
    CHECK(!exists(at("d", "config.json")), "the earlier export's config.json was left");
}

static void failed_export_is_not_complete(void)
{
    char err[512];
    put_text(at("d", "config.json"), cfg1);
    put_text(at("d", "generation_config.json"), gen);
    RtStWriter *w = open_dir("d", err, sizeof err);
    CHECK(w, "open: %s", err);
    if (!w)
        return;
    CHECK(!rt_st_writer_add_file(w, "config.json", cfg2, strlen(cfg2), err, sizeof err), "%s",
          err);
    /* Half of "b": shard 1 ("a") is renamed into place, then shard 2 fails. */
    put(w, false);
    CHECK(rt_st_writer_close(w, err, sizeof err) && strstr(err, "'b'"),
          "an incomplete export closed: '%s'", err);
    CHECK(exists(at("d", "model-00001-of-00002.safetensors")), "shard 1 was not moved in");
    CHECK(!exists(at("d", "config.json")),
          "a failed export left a config.json beside its first shard");
}

static void file_writer_has_no_files(void)
{
    char err[512], path[8192];
    snprintf(path, sizeof path, "%s/one.safetensors", work);
    RtStWriter *w = rt_st_writer_open(path, two, 2, "F32", err, sizeof err);
    CHECK(w, "open: %s", err);
    if (!w)
        return;
    CHECK(rt_st_writer_add_file(w, "config.json", cfg1, strlen(cfg1), err, sizeof err) &&
              strstr(err, "directory"),
          "config.json beside a single file: '%s'", err);
    rt_st_writer_abort(w);
}

/* A file with tensors named names[0..n). */
static void tensors_file(const char *name, const char *const *names, int n)
{
    char err[512], path[8192];
    snprintf(path, sizeof path, "%s/%s", work, name);
    RtStTensor t[4];
    for (int i = 0; i < n; i++)
        t[i] = (RtStTensor){names[i], 1, {4}};
    RtStWriter *w = rt_st_writer_open(path, t, n, "F32", err, sizeof err);
    float x[4] = {0};
    int64_t g[1] = {4}, o[1] = {0};
    for (int i = 0; w && i < n; i++)
        rt_st_writer_put(w, names[i], false, 0, 1, 1, g, o, g, x, err, sizeof err);
    CHECK(w && !rt_st_writer_close(w, err, sizeof err), "%s: %s", path, err);
}

static void pick(void)
{
    char err[512], path[8192];
    const char *plain[] = {"h.0.w", "wte.weight"};
    const char *prefixed[] = {"transformer.h.0.w", "transformer.wte.weight"};
    const char *both[] = {"transformer.wte.weight", "wte.weight"};
    tensors_file("plain.safetensors", plain, 2);
    tensors_file("prefixed.safetensors", prefixed, 2);
    tensors_file("both.safetensors", both, 2);
    snprintf(path, sizeof path, "%s/plain.safetensors", work);
    RtSt *st = rt_st_open(path, err, sizeof err);
    const char *got = st ? rt_st_pick(st, "h.0.w", "transformer.h.0.w", err, sizeof err) : NULL;
    CHECK(got && !strcmp(got, "h.0.w"), "plain name not picked: %s", err);
    got = st ? rt_st_pick(st, "h.0.w", NULL, err, sizeof err) : NULL;
    CHECK(got && !strcmp(got, "h.0.w"), "a name without twin not picked: %s", err);
    got = st ? rt_st_pick(st, "ln_f.weight", "transformer.ln_f.weight", err, sizeof err) : "x";
    CHECK(!got && strstr(err, "'ln_f.weight'") && strstr(err, "'transformer.ln_f.weight'") &&
              strstr(err, "plain.safetensors"),
          "a tensor under neither name: '%s'", err);
    rt_st_close(st);
    snprintf(path, sizeof path, "%s/prefixed.safetensors", work);
    st = rt_st_open(path, err, sizeof err);
    got = st ? rt_st_pick(st, "h.0.w", "transformer.h.0.w", err, sizeof err) : NULL;
    CHECK(got && !strcmp(got, "transformer.h.0.w"), "prefixed name not picked: %s", err);
    rt_st_close(st);
    snprintf(path, sizeof path, "%s/both.safetensors", work);
    st = rt_st_open(path, err, sizeof err);
    got = st ? rt_st_pick(st, "wte.weight", "transformer.wte.weight", err, sizeof err) : "x";
    CHECK(!got && strstr(err, "'wte.weight'") && strstr(err, "'transformer.wte.weight'") &&
              strstr(err, "both.safetensors") && strstr(err, "both"),
          "a tensor under both names: '%s'", err);
    rt_st_close(st);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_hfdir WORK\n");
        return 2;
    }
    snprintf(work, sizeof work, "%s", argv[1]);
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", work, work);
    if (system(cmd) != 0)
        return 2;
    written_with_the_weights();
    stale_files_removed();
    failed_export_is_not_complete();
    file_writer_has_no_files();
    pick();
    if (fails)
        fprintf(stderr, "test_hfdir: %d failures\n", fails);
    else
        printf("ok hfdir\n");
    return fails != 0;
}
