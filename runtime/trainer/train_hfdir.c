/* train_hfdir.c: a Hugging Face model directory around the weights.
 *
 * Export: `--export-hf DIR` writes config.json, built at compile time from
 * the model's graph (cg_hf_config in model.c) with the export's torch_dtype,
 * and, when --import-hf read a model directory holding a
 * generation_config.json, that file byte for byte (read at import, so the
 * export carries what the run started from). The runtime writes both after
 * the weights, config.json last (rt_st_writer_add_file). A model without a
 * config refuses a directory export before training (cg_hf_refused).
 *
 * Import: transformers saves GPT2LMHeadModel's tensors as
 * transformer.h.0.attn... and loads the original checkpoint's h.0.attn...
 * too, adding or removing the class's base_model_prefix ("transformer",
 * LLaMA's "model"); a tensor is read under either name, never both. */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { TR_MAX_GENERATION_CONFIG = 16 << 20 };

static char *gen;   /* generation_config.json of the import, rank 0 */
static size_t gen_len;
static int have_gen;

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

int tr_hf_is_file(const char *path)
{
    return ends_with(path, ".safetensors");
}

const char *tr_hf_export_refused(const char *path)
{
    return tr_hf_is_file(path) ? NULL : cg_hf_refused;
}

/* The model directory of an --import-hf path: the directory itself, or the
 * one holding a shard index; NULL for a lone .safetensors file. */
static char *model_dir(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        char *d = (char *)malloc(strlen(path) + 1);
        if (d)
            strcpy(d, path);
        return d;
    }
    if (!ends_with(path, ".index.json"))
        return NULL;
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 1;
    char *d = (char *)malloc(n + 1);
    if (d) {
        memcpy(d, slash ? path : ".", n);
        d[n] = 0;
    }
    return d;
}

void tr_hf_keep_generation_config(const char *import_path)
{
    char *dir = model_dir(import_path);
    if (!dir)
        return;
    size_t n = strlen(dir) + 32;
    char *path = (char *)malloc(n);
    if (!path)
        rt_fatal("out of host memory");
    snprintf(path, n, "%s/generation_config.json", dir);
    free(dir);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        free(path);
        return;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_size > TR_MAX_GENERATION_CONFIG)
        rt_fatal("%s: not a generation config to copy into the export (%s)", path,
                 S_ISREG(sb.st_mode) ? "larger than 16 MiB" : "not a regular file");
    FILE *f = fopen(path, "rb");
    gen = (char *)malloc((size_t)sb.st_size + 1);
    gen_len = f && gen ? fread(gen, 1, (size_t)sb.st_size, f) : 0;
    if (!f || !gen || gen_len != (size_t)sb.st_size || ferror(f))
        rt_fatal("%s: cannot read it to copy into the export", path);
    fclose(f);
    have_gen = 1;
    free(path);
}

static const char *torch_dtype(const char *dtype)
{
    return !strcmp(dtype, "BF16") ? "bfloat16" : !strcmp(dtype, "F16") ? "float16" : "float32";
}

/* config.json as transformers' to_json_string writes it (sorted keys,
 * indent 2, a final newline); malloc'd. */
static char *config_json(const char *dtype, size_t *len)
{
    size_t n = 8;
    for (int i = 0; i < cg_hf_nkeys; i++)
        n += strlen(cg_hf_config[i].key) + 16 +
             strlen(cg_hf_config[i].value ? cg_hf_config[i].value : torch_dtype(dtype));
    char *s = (char *)malloc(n), *p = s;
    if (!s)
        rt_fatal("out of host memory");
    p += sprintf(p, "{\n");
    for (int i = 0; i < cg_hf_nkeys; i++) {
        const char *comma = i + 1 < cg_hf_nkeys ? "," : "";
        if (cg_hf_config[i].value)
            p += sprintf(p, "  \"%s\": %s%s\n", cg_hf_config[i].key, cg_hf_config[i].value, comma);
        else
            p += sprintf(p, "  \"%s\": \"%s\"%s\n", cg_hf_config[i].key, torch_dtype(dtype), comma);
    }
    p += sprintf(p, "}\n");
    *len = (size_t)(p - s);
    return s;
}

void tr_hf_add_files(RtStWriter *w, const char *dtype)
{
    char err[1024];
    size_t len;
    char *cfg = config_json(dtype, &len);
    int rc = have_gen ? rt_st_writer_add_file(w, "generation_config.json", gen, gen_len, err,
                                              sizeof err)
                      : 0;
    if (rc == 0)
        rc = rt_st_writer_add_file(w, "config.json", cfg, len, err, sizeof err);
    free(cfg);
    if (rc != 0) {
        rt_st_writer_abort(w);
        rt_fatal("%s", err);
    }
}

const char *tr_hf_import_name(const RtSt *st, const char *name)
{
    char err[1024], alt[1024];
    const char *other = NULL;
    if (cg_hf_prefix) {
        size_t k = strlen(cg_hf_prefix);
        if (!cg_hf_prefixed) {
            snprintf(alt, sizeof alt, "%s.%s", cg_hf_prefix, name);
            other = alt;
        } else if (!strncmp(name, cg_hf_prefix, k) && name[k] == '.') {
            other = name + k + 1; /* the head (lm_head.weight) has no twin */
        }
    }
    const char *got = rt_st_pick(st, name, other, err, sizeof err);
    if (!got)
        rt_fatal("%s", err);
    return got;
}
