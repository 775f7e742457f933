/* test_stshard.c: Hugging Face model directories (issue 14). The sharded
 * writer lays tensors out as huggingface_hub's split_torch_state_dict_into_shards
 * does (order kept, a tensor over the limit alone, the index as json.dumps
 * with indent 2 and sorted keys); F32, BF16 and F16 round trips through the
 * directory, its index and a transposed put; stale shards of an earlier
 * export removed; malformed indexes refused with a message naming the key;
 * fp32 -> fp16 rounding at its edges. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common.h"
#include "ref.h"
#include "rt.h"

static char dir[] = "/tmp/ptdrt-shard-XXXXXX";

static const char *path_in(const char *sub, const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s%s%s", dir, sub, *name ? "/" : "", name);
    return buf[k];
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void spit(const char *p, const char *text)
{
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
}

static void test_f16_rounding(void)
{
    printf("fp32 -> fp16\n");
    static const struct {
        float f;
        uint16_t h;
    } cases[] = {
        {1.0f, 0x3C00},
        {-2.0f, 0xC000},
        {65504.0f, 0x7BFF},               /* largest finite */
        {65519.0f, 0x7BFF},               /* below the halfway point to 65536 */
        {65520.0f, 0x7C00},               /* tie to even: infinity */
        {1e9f, 0x7C00},
        {INFINITY, 0x7C00},
        {-INFINITY, 0xFC00},
        {1.0f + 0x1p-11f, 0x3C00},        /* tie: to even, 1 */
        {1.0f + 3 * 0x1p-11f, 0x3C02},    /* tie: to even, 1 + 2^-9 */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},
        {0x1p-14f, 0x0400},               /* smallest normal */
        {0x1p-24f, 0x0001},               /* smallest subnormal */
        {0x1p-25f, 0x0000},               /* tie: to even, 0 */
        {0x1.8p-25f, 0x0001},             /* above the tie */
        {3 * 0x1p-25f, 0x0002},           /* 1.5 x 2^-24: tie to even, 2 x 2^-24 */
        {0x1.ffcp-15f, 0x0400},           /* halfway above the largest subnormal: to normal */
        {-0.0f, 0x8000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = rtc_f32_to_f16(cases[i].f);
        CHECK(h == cases[i].h, "f16(%a) = 0x%04x, expected 0x%04x", cases[i].f, h, cases[i].h);
    }
    uint16_t n = rtc_f32_to_f16(NAN);
    CHECK((n & 0x7C00) == 0x7C00 && (n & 0x3FF), "f16(NaN) = 0x%04x is not a NaN", n);
    /* every fp16 value converts back to itself */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++)
        if ((h & 0x7C00) != 0x7C00 || !(h & 0x3FF))
            bad += rtc_f32_to_f16(rtc_f16_to_f32((uint16_t)h)) != h;
    CHECK(bad == 0, "%d fp16 values do not round trip", bad);
}

enum { NT = 5 };
static RtStTensor decl[NT] = {
    {"embed", 2, {8, 16}},        /* 128 elements */
    {"layers.0.w", 2, {16, 16}},  /* 256 */
    {"layers.0.b", 1, {16}},      /* 16 */
    {"big", 2, {40, 16}},         /* 640 */
    {"norm", 1, {16}},            /* 16 */
};
static float val[NT][640];

static int64_t numel(const RtStTensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

/* The value a dtype stores for v. */
static float stored(const char *dtype, float v)
{
    if (!strcmp(dtype, "BF16"))
        return rtc_bf16_to_f32(rtc_f32_to_bf16(v));
    if (!strcmp(dtype, "F16"))
        return rtc_f16_to_f32(rtc_f32_to_f16(v));
    return v;
}

/* Export decl into DIR with a 1200-byte limit; layers.0.w is put transposed
 * (its file tensor [16, 16] holds the transpose of val). */
static bool export_dir(const char *d, const char *dtype, int64_t limit)
{
    char err[512] = "";
    RtStWriter *w = rt_st_writer_open_dir(d, decl, NT, dtype, limit, err, sizeof err);
    CHECK(w != NULL, "open_dir %s: %s", dtype, err);
    if (!w)
        return false;
    int64_t z[2] = {0, 0};
    for (int i = NT - 1; i >= 0; i--) { /* any order */
        bool tr = i == 1;
        CHECK(rt_st_writer_put(w, decl[i].name, tr, 0, 1, decl[i].ndim, decl[i].shape, z,
                               decl[i].shape, val[i], err, sizeof err) == 0,
              "put %s: %s", decl[i].name, err);
    }
    bool ok = rt_st_writer_close(w, err, sizeof err) == 0;
    CHECK(ok, "close %s: %s", dtype, err);
    return ok;
}

static void check_read(const char *path, const char *dtype)
{
    char err[512] = "";
    RtSt *st = rt_st_open(path, err, sizeof err);
    CHECK(st != NULL, "open %s: %s", path, err);
    if (!st)
        return;
    CHECK(rt_st_count(st) == NT, "%d tensors, expected %d", rt_st_count(st), NT);
    CHECK(!strcmp(rt_st_name(st, 0), "big") && !strcmp(rt_st_name(st, 4), "norm"),
          "names not sorted across shards");
    int64_t z[2] = {0, 0};
    for (int i = 0; i < NT; i++) {
        float got[640];
        const char *dt = "";
        int k = rt_st_find(st, decl[i].name, NULL, NULL, &dt);
        CHECK(k >= 0 && !strcmp(rt_st_name(st, k), decl[i].name) && !strcmp(dt, dtype),
              "find %s: index %d, dtype %s", decl[i].name, k, dt);
        bool tr = i == 1;
        CHECK(rt_st_read(st, decl[i].name, tr, 0, 1, decl[i].ndim, decl[i].shape, z,
                         decl[i].shape, got, err, sizeof err) == 0,
              "read %s: %s", decl[i].name, err);
        bool same = true;
        for (int64_t e = 0; e < numel(&decl[i]); e++)
            same &= got[e] == stored(dtype, val[i][e]);
        CHECK(same, "%s %s: values differ after the round trip", dtype, decl[i].name);
    }
    rt_st_close(st);
}

static void test_layout(void)
{
    printf("sharded directory layout\n");
    for (int i = 0; i < NT; i++)
        ref_fill(val[i], NULL, numel(&decl[i]), -3, 3);
    val[0][0] = 1.0f + 0x1p-11f; /* rounds in BF16 and F16 */
    /* F32 with 1200 bytes a shard: embed (512) opens shard 1; w (1024) does
     * not fit, so it opens the next; b joins it; big (2560) is over the limit
     * and is appended alone at once (shard 2); norm joins w's, which closes
     * last (shard 3). */
    const char *d = path_in("f32", "");
    if (!export_dir(d, "F32", 1200))
        return;
    const char *want =
        "{\n"
        "  \"metadata\": {\n"
        "    \"total_size\": 4224\n"
        "  },\n"
        "  \"weight_map\": {\n"
        "    \"big\": \"model-00002-of-00003.safetensors\",\n"
        "    \"embed\": \"model-00001-of-00003.safetensors\",\n"
        "    \"layers.0.b\": \"model-00003-of-00003.safetensors\",\n"
        "    \"layers.0.w\": \"model-00003-of-00003.safetensors\",\n"
        "    \"norm\": \"model-00003-of-00003.safetensors\"\n"
        "  }\n"
        "}\n";
    char *index = slurp(path_in("f32", "model.safetensors.index.json"));
    CHECK(index && !strcmp(index, want), "F32 index:\n%s", index ? index : "(missing)");
    CHECK(!exists(path_in("f32", "model.safetensors")), "a single file beside the shards");
    check_read(d, "F32");
    check_read(path_in("f32", "model.safetensors.index.json"), "F32");
    char err[512];
    RtSt *st = rt_st_open(d, err, sizeof err);
    CHECK(st && rt_st_metadata(st, "total_size") && !strcmp(rt_st_metadata(st, "total_size"), "4224"),
          "total_size metadata");
    rt_st_close(st);

    /* BF16 halves every tensor: embed, w and b share shard 2 with norm; big
     * (1280) is alone in shard 1. */
    d = path_in("bf16", "");
    if (export_dir(d, "BF16", 1200)) {
        index = slurp(path_in("bf16", "model.safetensors.index.json"));
        CHECK(index && strstr(index, "\"big\": \"model-00001-of-00002.safetensors\"") &&
                  strstr(index, "\"norm\": \"model-00002-of-00002.safetensors\"") &&
                  strstr(index, "\"total_size\": 2112\n"),
              "BF16 index:\n%s", index ? index : "(missing)");
        check_read(d, "BF16");
    }
    d = path_in("f16", "");
    if (export_dir(d, "F16", 1 << 20)) { /* all in one: model.safetensors, no index */
        CHECK(exists(path_in("f16", "model.safetensors")) &&
                  !exists(path_in("f16", "model.safetensors.index.json")),
              "one shard is written as model.safetensors alone");
        check_read(d, "F16");
    }

    /* Re-exporting into the F32 directory as one file removes the shards and
     * the index, and nothing else. */
    spit(path_in("f32", "README.md"), "keep me\n");
    spit(path_in("f32", "model-00009-of-00009.safetensors.bak"), "keep me too\n");
    if (export_dir(path_in("f32", ""), "F32", 1 << 20)) {
        CHECK(exists(path_in("f32", "model.safetensors")) &&
                  !exists(path_in("f32", "model.safetensors.index.json")) &&
                  !exists(path_in("f32", "model-00001-of-00003.safetensors")) &&
                  !exists(path_in("f32", "model-00003-of-00003.safetensors")) &&
                  exists(path_in("f32", "README.md")) &&
                  exists(path_in("f32", "model-00009-of-00009.safetensors.bak")),
              "stale shards of the earlier export were not removed (or others were)");
        check_read(path_in("f32", ""), "F32");
    }
    /* and back to shards: the single file goes */
    if (export_dir(path_in("f32", ""), "F32", 1200))
        CHECK(!exists(path_in("f32", "model.safetensors")), "a stale model.safetensors stayed");
}

/* Malformed indexes, each refused with a message naming what is wrong. */
static void test_bad_index(void)
{
    printf("malformed indexes\n");
    /* a valid two-shard directory to corrupt */
    const char *d = path_in("bad", "");
    /* a (16 bytes) fills shard 1 of 24 bytes; b (16) opens shard 2, c (8) joins it */
    RtStTensor t[3] = {{"a", 1, {4}}, {"b", 1, {4}}, {"c", 1, {2}}};
    char err[512] = "";
    RtStWriter *w = rt_st_writer_open_dir(d, t, 3, "F32", 24, err, sizeof err);
    CHECK(w != NULL, "%s", err);
    if (!w)
        return;
    float v[4] = {1, 2, 3, 4};
    int64_t g[1] = {4}, z[1] = {0};
    rt_st_writer_put(w, "a", false, 0, 1, 1, g, z, g, v, err, sizeof err);
    rt_st_writer_put(w, "b", false, 0, 1, 1, g, z, g, v, err, sizeof err);
    int64_t g2[1] = {2};
    rt_st_writer_put(w, "c", false, 0, 1, 1, g2, z, g2, v, err, sizeof err);
    CHECK(rt_st_writer_close(w, err, sizeof err) == 0, "%s", err);
    const char *a = "model-00001-of-00002.safetensors", *b = "model-00002-of-00002.safetensors";
    char good[512];
    snprintf(good, sizeof good, "{\"metadata\": {\"total_size\": 40}, \"weight_map\": "
             "{\"a\": \"%s\", \"b\": \"%s\", \"c\": \"%s\"}}", a, b, b);
    char *text = slurp(path_in("bad", "model.safetensors.index.json"));
    CHECK(text && strstr(text, a) && strstr(text, b), "two shards expected:\n%s", text);
    static const struct {
        const char *fmt; /* %s: shard a, then b */
        const char *expect;
    } cases[] = {
        {"{\"weight_map\": {\"a\": \"%s\", \"b\": \"%s\", \"c\": \"%s\"}, \"extra\": 1}",
         "unknown key 'extra'"},
        {"{\"metadata\": {}}", "\"weight_map\" is missing"},
        {"{\"weight_map\": {\"a\": \"../%s\", \"b\": \"%s\", \"c\": \"%s\"}}",
         "must name a shard file"},
        {"{\"weight_map\": {\"a\": \"%s\", \"b\": \"%s\", \"c\": \"%s\", \"d\": \"%s\"}}",
         "puts 'd' in"},
        {"{\"weight_map\": {\"a\": \"%s\", \"b\": \"%s\"}}", "holds tensor 'c', which the weight_map does not list"},
        {"{\"weight_map\": {\"a\": \"%s\", \"b\": \"%s\", \"c\": \"%s\"}, \"metadata\": "
         "{\"total_size\": \"x\"}}", "total_size"},
        {"{\"weight_map\": {\"a\": \"%s\", \"b\": \"%s\"}", "malformed shard index"},
        {"{\"weight_map\": {\"a\": \"%s\", \"b\": \"absent.safetensors\"}}", "cannot open"},
        {"{\"weight_map\": {\"a\": \"%s\", \"b\": \"%s\", \"c\": \"%s\"}, \"metadata\": 3}",
         "\"metadata\" is not an object"},
    };
    const char *ip = path_in("bad", "model.safetensors.index.json");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[512];
        snprintf(buf, sizeof buf, cases[i].fmt, a, b, b, b);
        spit(ip, buf);
        RtSt *st = rt_st_open(d, err, sizeof err);
        CHECK(st == NULL, "case %zu accepted: %s", i, buf);
        rt_st_close(st);
        printf("  refused: %s\n", err);
        CHECK(strstr(err, cases[i].expect), "case %zu: no '%s' in: %s", i, cases[i].expect, err);
    }
    spit(ip, good);
    RtSt *st = rt_st_open(d, err, sizeof err);
    CHECK(st != NULL, "the restored index is refused: %s", err);
    rt_st_close(st);
    mkdir(path_in("empty", ""), 0755);
    CHECK(rt_st_open(path_in("empty", ""), err, sizeof err) == NULL && strstr(err, "neither"),
          "an empty directory: %s", err);
    CHECK(rt_st_writer_open_dir(path_in("x", ""), t, 2, "F64", 16, err, sizeof err) == NULL &&
              strstr(err, "F64"),
          "dtype F64: %s", err);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    ref_seed(14);
    test_f16_rounding();
    test_layout();
    test_bad_index();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_status("rt_stshard");
}
