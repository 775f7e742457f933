/* cluster.c: the machine the plan runs on. Looks up the built-in GPU presets
 * (their numbers live in cost_consts.c with every other constant) and reads
 * the --cluster file: `key = value` lines, `#` comments, units in the key
 * names, errors with file:line:col and a caret. */
#include "cost/cost.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

bool pass_gpu_preset(const char *name, PassGpu *out)
{
    for (int i = 0; i < pass_ngpu_presets; i++)
        if (strcmp(pass_gpu_presets[i].name, name) == 0) {
            *out = pass_gpu_presets[i];
            return true;
        }
    return false;
}

const char *pass_gpu_preset_names(void) { return "a100-40gb, a100-80gb, h100-80gb, h200"; }

/* ------------------------------------------------------------ the file */
typedef enum { K_GPU, K_NAME, K_INT, K_NUM } KeyKind;

/* Every key: its unit, the field it sets, the factor from the file's unit to
 * the field's, and the accepted range (in the file's unit). */
static const struct Key {
    const char *key;
    KeyKind kind;
    size_t off;
    double scale, lo, hi;
    const char *unit;
} keys[] = {
#define G(f) offsetof(PassCluster, gpu.f)
#define GB 1e9
    {"gpu", K_GPU, 0, 0, 0, 0, "preset"},
    {"name", K_NAME, G(name), 0, 0, 0, "text"},
    {"gpus", K_INT, offsetof(PassCluster, ngpus), 1, 1, 1 << 20, "count"},
    {"gpus_per_node", K_INT, offsetof(PassCluster, gpus_per_node), 1, 1, 1024, "count"},
    {"peak_tflops", K_NUM, G(peak_flops), 1e12, 1e-3, 1e6, "TFLOP/s"},
    {"hbm_gib", K_NUM, G(hbm_bytes), 1073741824.0, 1e-3, 1e6, "GiB"},
    {"hbm_bw_gbs", K_NUM, G(hbm_bw), GB, 1e-3, 1e6, "GB/s"},
    {"nvlink_bw_gbs", K_NUM, G(nvlink_bw), GB, 1e-3, 1e6, "GB/s"},
    {"nic_bw_gbits", K_NUM, G(nic_bw), GB / 8, 1e-3, 1e6, "Gbit/s"},
    {"busbw_nvlink_gbs", K_NUM, G(busbw_nvlink), GB, 1e-3, 1e6, "GB/s"},
    {"busbw_ib_gbs", K_NUM, G(busbw_ib), GB, 1e-3, 1e6, "GB/s"},
    {"alpha_nvlink_us", K_NUM, G(alpha_nvlink), 1e-6, 0, 1e6, "us"},
    {"alpha_ib_us", K_NUM, G(alpha_ib), 1e-6, 0, 1e6, "us"},
    {"sms", K_INT, G(sms), 1, 1, 100000, "count"},
    {"gemm_eff", K_NUM, G(gemm_eff), 1, 1e-3, 1, "fraction"},
    {"hbm_eff", K_NUM, G(hbm_eff), 1, 1e-3, 1, "fraction"},
#undef G
#undef GB
};
#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

static IrLoc at(const char *path, int line, const char *line_start, const char *p)
{
    return (IrLoc){path, line, (int)(p - line_start) + 1};
}

static bool parse_line(const char *path, int line, const char *ls, const char *p, const char *end,
                       PassCluster *out, bool *seen, bool *gpu_key_seen)
{
    const char *k0 = p;
    while (p < end && (isalnum((unsigned char)*p) || *p == '_'))
        p++;
    if (p == k0) {
        ir_error(at(path, line, ls, p), "expected a key (`name = value`), found '%c'", *p);
        return false;
    }
    int ki = -1;
    for (int i = 0; i < NKEYS; i++)
        if (strlen(keys[i].key) == (size_t)(p - k0) && !memcmp(keys[i].key, k0, (size_t)(p - k0)))
            ki = i;
    if (ki < 0) {
        char list[512];
        size_t n = 0;
        for (int i = 0; i < NKEYS && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", keys[i].key);
        ir_error(at(path, line, ls, k0), "unknown key '%.*s' (keys: %s)", (int)(p - k0), k0, list);
        return false;
    }
    const struct Key *k = &keys[ki];
    if (seen[ki]) {
        ir_error(at(path, line, ls, k0), "'%s' is set twice", k->key);
        return false;
    }
    seen[ki] = true;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p != '=') {
        ir_error(at(path, line, ls, p), "expected '=' after '%s'", k->key);
        return false;
    }
    p++;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    const char *v0 = p;
    while (p < end && !isspace((unsigned char)*p) && *p != '#')
        p++;
    const char *v1 = p;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    if (p < end && *p != '#') {
        ir_error(at(path, line, ls, p), "unexpected text after the value of '%s'", k->key);
        return false;
    }
    if (v0 == v1) {
        ir_error(at(path, line, ls, v0), "'%s' needs a value (%s)", k->key, k->unit);
        return false;
    }
    char val[128];
    if ((size_t)(v1 - v0) >= sizeof val) {
        ir_error(at(path, line, ls, v0), "value of '%s' is too long", k->key);
        return false;
    }
    memcpy(val, v0, (size_t)(v1 - v0));
    val[v1 - v0] = 0;
    IrLoc vloc = at(path, line, ls, v0);
    switch (k->kind) {
    case K_GPU:
        if (*gpu_key_seen) {
            ir_error(at(path, line, ls, k0),
                     "'gpu' must come before the GPU values it would overwrite");
            return false;
        }
        if (!pass_gpu_preset(val, &out->gpu)) {
            ir_error(vloc, "unknown GPU '%s' (presets: %s)", val, pass_gpu_preset_names());
            return false;
        }
        return true;
    case K_NAME:
        if ((size_t)(v1 - v0) >= sizeof out->gpu.name) {
            ir_error(vloc, "name '%s' is longer than %zu characters", val, sizeof out->gpu.name - 1);
            return false;
        }
        memcpy(out->gpu.name, val, (size_t)(v1 - v0) + 1);
        *gpu_key_seen = true;
        return true;
    case K_INT:
    case K_NUM: {
        char *e;
        errno = 0;
        double d = strtod(val, &e);
        if (e == val || *e || errno || !isfinite(d)) {
            ir_error(vloc, "'%s' expects a number (%s), got '%s'", k->key, k->unit, val);
            return false;
        }
        if (k->kind == K_INT && d != floor(d)) {
            ir_error(vloc, "'%s' expects a whole number, got '%s'", k->key, val);
            return false;
        }
        if (d < k->lo || d > k->hi || (k->lo == 0 && d < 0)) {
            ir_error(vloc, "'%s' = %s is out of range [%g, %g] %s", k->key, val, k->lo, k->hi,
                     k->unit);
            return false;
        }
        char *field = (char *)out + k->off;
        if (k->kind == K_INT)
            *(int *)field = (int)d;
        else
            *(double *)field = d * k->scale;
        if (k->off != offsetof(PassCluster, ngpus) && k->off != offsetof(PassCluster, gpus_per_node))
            *gpu_key_seen = true;
        return true;
    }
    }
    return false;
}

bool pass_cluster_parse(const char *path, const char *text, size_t len, PassCluster *out)
{
    memset(out, 0, sizeof *out);
    pass_gpu_preset("a100-80gb", &out->gpu);
    ir_source_add(path, text, len);
    bool seen[NKEYS] = {0}, gpu_key_seen = false, ok = true;
    const char *p = text, *end = text + len;
    for (int line = 1; p < end; line++) {
        const char *ls = p, *le = memchr(p, '\n', (size_t)(end - p));
        if (!le)
            le = end;
        for (const char *q = ls; q < le; q++)
            if ((unsigned char)*q < 32 && *q != '\t' && *q != '\r') {
                ir_error(at(path, line, ls, q), "control character in the cluster file");
                return false;
            }
        const char *q = ls;
        while (q < le && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < le && *q != '#')
            ok &= parse_line(path, line, ls, q, le, out, seen, &gpu_key_seen);
        p = le < end ? le + 1 : end;
    }
    if (ok && out->gpus_per_node && out->ngpus && out->ngpus > out->gpus_per_node &&
        out->ngpus % out->gpus_per_node) {
        ir_error((IrLoc){path, 1, 1}, "gpus = %d is not a whole number of nodes of %d",
                 out->ngpus, out->gpus_per_node);
        ok = false;
    }
    return ok;
}

bool pass_cluster_load(const char *path, PassCluster *out)
{
    /* The text and path stay alive for diagnostics quoting them later. */
    static VEC(char *) kept;
    FILE *f = fopen(path, "rb");
    if (!f) {
        ir_error(IR_NOLOC, "cannot open cluster file '%s': %s", path, strerror(errno));
        return false;
    }
    size_t cap = 4096, n = 0;
    char *buf = ir_xmalloc(cap);
    for (size_t r; (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            if (cap >= (1u << 24)) {
                fclose(f);
                free(buf);
                ir_error(IR_NOLOC, "cluster file '%s' is larger than 16 MiB", path);
                return false;
            }
            buf = ir_xrealloc(buf, cap *= 2);
        }
    }
    fclose(f);
    if (memchr(buf, 0, n)) {
        free(buf);
        ir_error(IR_NOLOC, "cluster file '%s' is not text (contains a NUL byte)", path);
        return false;
    }
    char *p = ir_xstrdup(path);
    vec_push(kept, buf);
    vec_push(kept, p);
    return pass_cluster_parse(p, buf, n, out);
}

bool pass_cluster_setup(PassCluster *out, const char *file, const char *gpu, int gpus,
                        int gpus_per_node)
{
    memset(out, 0, sizeof *out);
    if (file) {
        if (!pass_cluster_load(file, out))
            return false;
    } else if (!pass_gpu_preset(gpu ? gpu : "a100-80gb", &out->gpu)) {
        ir_error(IR_NOLOC, "--gpu: unknown GPU '%s' (presets: %s, or describe it with --cluster FILE)",
                 gpu, pass_gpu_preset_names());
        return false;
    }
    if (!out->ngpus)
        out->ngpus = gpus > 0 ? gpus : 8;
    if (!out->gpus_per_node)
        out->gpus_per_node = gpus_per_node > 0 ? gpus_per_node : 8;
    if (out->ngpus > out->gpus_per_node && out->ngpus % out->gpus_per_node) {
        ir_error(IR_NOLOC, "--gpus %d is not a whole number of nodes of %d GPUs (--gpus-per-node)",
                 out->ngpus, out->gpus_per_node);
        return false;
    }
    return true;
}

void pass_cluster_print(FILE *f, const PassCluster *cl)
{
    const PassGpu *g = &cl->gpu;
    fprintf(f, "name = %s\n", g->name);
    if (cl->ngpus)
        fprintf(f, "gpus = %d\n", cl->ngpus);
    if (cl->gpus_per_node)
        fprintf(f, "gpus_per_node = %d\n", cl->gpus_per_node);
    for (int i = 0; i < NKEYS; i++) {
        if (keys[i].kind != K_NUM && strcmp(keys[i].key, "sms") != 0)
            continue;
        const char *field = (const char *)cl + keys[i].off;
        if (keys[i].kind == K_INT)
            fprintf(f, "%-17s= %d  # %s\n", keys[i].key, *(const int *)field, keys[i].unit);
        else
            fprintf(f, "%-17s= %.6g  # %s\n", keys[i].key, *(const double *)field / keys[i].scale,
                    keys[i].unit);
    }
}
