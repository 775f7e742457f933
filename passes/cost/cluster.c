/* cluster.c: the machine the plan runs on. Looks up the built-in GPU presets
 * (their numbers live in cost_consts.c with every other constant), reads
 * the --cluster file (kvfile.c: `key = value` lines, units in the key names,
 * errors with file:line:col and a caret) and writes it: a preset, a file and
 * what `ptdc calibrate` measures are the same kind of description.
 *
 * Measured tables use dotted keys:
 *   kernel.NAME = BYTES:GB/s ...          a runtime kernel's rate by bytes moved
 *   attention_fwd.D = SEQ:GFLOP/s ...     attention by sequence length at head dim D
 *   attention_bwd.D = SEQ:GFLOP/s ...
 *   coll.KIND.GROUP[.net] = ALPHA_US BUSBW_GBS
 * (docs/cost-model.md, "Cluster file"). */
#include "cost/cost.h"

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

const char *pass_gpu_preset_names(void)
{
    return "a100-40gb, a100-80gb, h100-80gb, h200, h800, b200, b300, gb200, gb300";
}

int pass_cluster_host(const PassCluster *cl) { return cl->gpus_per_node > 0 ? cl->gpus_per_node : 8; }

int pass_cluster_domain_at(const PassCluster *cl, int gpus)
{
    int host = pass_cluster_host(cl), d = cl->nvlink_domain > host ? cl->nvlink_domain : host;
    if (d == host || gpus <= 0)
        return d;
    if (gpus <= d) /* the job fits in one domain */
        return gpus > host ? gpus : host;
    /* the largest multiple of host up to d dividing gpus, or host */
    d -= d % host;
    while (d > host && gpus % d)
        d -= host;
    return d;
}

int pass_cluster_domain(const PassCluster *cl) { return pass_cluster_domain_at(cl, cl->ngpus); }

/* ------------------------------------------------------------ the file */
typedef enum { K_GPU, K_NAME, K_KIND, K_INT, K_NUM, K_CINT } KeyKind;

/* Every scalar key: its unit, the field it sets, the factor from the file's
 * unit to the field's, and the accepted range (in the file's unit). K_CINT
 * fields live in PassCluster, the others in its gpu. */
static const struct Key {
    const char *key;
    KeyKind kind;
    size_t off;
    double scale, lo, hi;
    const char *unit;
} keys[] = {
#define G(f) offsetof(PassGpu, f)
#define C(f) offsetof(PassCluster, f)
#define GB 1e9
    {"gpu", K_GPU, 0, 0, 0, 0, "preset"},
    {"name", K_NAME, G(name), 0, 0, 0, "text"},
    {"device", K_KIND, G(kind), 0, 0, 0, "gpu or cpu"},
    {"gpus", K_CINT, C(ngpus), 1, 1, 1 << 20, "count"},
    {"gpus_per_node", K_CINT, C(gpus_per_node), 1, 1, 1024, "count"},
    {"nvlink_domain", K_CINT, C(nvlink_domain), 1, 1, 1 << 20, "count"},
    {"nodes", K_CINT, C(nodes), 1, 1, 1 << 20, "count"},
    {"peak_tflops", K_NUM, G(peak_flops), 1e12, 1e-6, 1e6, "TFLOP/s"},
    {"peak_fp8_tflops", K_NUM, G(peak_fp8_flops), 1e12, 0, 1e7, "TFLOP/s"},
    {"peak_fp4_tflops", K_NUM, G(peak_fp4_flops), 1e12, 0, 1e7, "TFLOP/s"},
    {"hbm_gib", K_NUM, G(hbm_bytes), 1073741824.0, 1e-3, 1e7, "GiB"},
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
    {"gemm_tile_m", K_NUM, G(gemm_tile_m), 1, 1, 4096, "elements"},
    {"gemm_tile_n", K_NUM, G(gemm_tile_n), 1, 1, 4096, "elements"},
    {"gemm_tile_k", K_NUM, G(gemm_tile_k), 1, 1, 4096, "elements"},
    {"gemm_k_half", K_NUM, G(gemm_k_half), 1, 0, 1e6, "elements"},
    {"gemm_mn_half", K_NUM, G(gemm_mn_half), 1, 0, 1e6, "elements"},
    {"gemm_misalign", K_NUM, G(gemm_misalign), 1, 1e-3, 1, "fraction"},
    {"gemm_overhead_us", K_NUM, G(gemm_overhead_s), 1e-6, 0, 1e6, "us"},
    {"kernel_overhead_us", K_NUM, G(kernel_overhead_s), 1e-6, 0, 1e6, "us"},
    {"act_bytes", K_INT, G(act_bytes), 1, 2, 4, "bytes"},
    {"runtime_mib", K_NUM, G(runtime_bytes), 1048576.0, 0, 1e9, "MiB"},
    {"comm_mib", K_NUM, G(comm_bytes), 1048576.0, 0, 1e9, "MiB"},
    {"cores_per_node", K_INT, G(cores), 1, 1, 1 << 20, "count"},
    {"host_token_ns", K_NUM, G(host_token_s), 1e-9, 0, 1e9, "ns"},
    {"host_grace", K_INT, G(host_grace), 1, 0, 1, "1: Grace host CPU, 0: x86"},
    {"storage_write_gbs", K_NUM, G(storage_write_bw), GB, 0, 1e6, "GB/s"},
    {"host_copy_gbs", K_NUM, G(host_copy_bw), GB, 0, 1e6, "GB/s"},
    {"core_share", K_NUM, G(core_share), 1, 0, 1, "fraction"},
    {"sync_gemm", K_NUM, G(sync_gemm), 1, 0, 1, "fraction"},
    {"sync_mem", K_NUM, G(sync_mem), 1, 0, 1, "fraction"},
    {"sync_gemm_shared", K_NUM, G(sync_gemm_shared), 1, 0, 1, "fraction"},
    {"sync_mem_shared", K_NUM, G(sync_mem_shared), 1, 0, 1, "fraction"},
#undef G
#undef C
#undef GB
};
#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

typedef struct Parse {
    PassCluster *out;
    bool seen[NKEYS];
    bool gpu_key_seen;            /* a value a `gpu` preset would overwrite */
    VEC(char *) tables;           /* table keys seen */
    /* `solo.KEY`: the rates of a CPU rank alone on its node, read into a
     * device of their own and moved to gpu.solo at the end */
    PassCluster solo;
    bool solo_seen[NKEYS], any_solo;
    bool in_solo;                 /* parsing a solo. key */
} Parse;

/* The fields PassRates shares with PassGpu, listed once for both copies. */
#define RATE_SCALARS(X)                                                                       \
    X(peak_flops) X(gemm_eff) X(sms) X(gemm_tile_m) X(gemm_tile_n) X(gemm_tile_k) X(gemm_k_half) \
    X(gemm_mn_half) X(gemm_misalign) X(gemm_overhead_s) X(attn_dims)
#define RATE_ARRAYS(X) X(kern) X(attn_dim) X(attn_fwd) X(attn_bwd)

void pass_rates_get(const PassGpu *g, PassRates *r)
{
    memset(r, 0, sizeof *r);
#define GET(f) r->f = g->f;
#define GET_ARRAY(f) memcpy(r->f, g->f, sizeof r->f);
    RATE_SCALARS(GET) RATE_ARRAYS(GET_ARRAY)
#undef GET
#undef GET_ARRAY
}

void pass_rates_set(PassGpu *g, const PassRates *r)
{
#define SET(f) g->f = r->f;
#define SET_ARRAY(f) memcpy(g->f, r->f, sizeof r->f);
    RATE_SCALARS(SET) RATE_ARRAYS(SET_ARRAY)
#undef SET
#undef SET_ARRAY
}

static const char *coll_key_name[] = {
    [PLAN_COLL_ALLREDUCE] = "allreduce",   [PLAN_COLL_REDUCESCATTER] = "reduce_scatter",
    [PLAN_COLL_ALLGATHER] = "allgather",   [PLAN_COLL_ALLTOALL] = "alltoall",
    [PLAN_COLL_SENDRECV] = "sendrecv",
};

/* "X:Y X:Y ..." with x increasing; y scaled by `scale` (the file's unit to
 * the field's). */
static bool parse_curve(const char *key, const char *val, IrLoc loc, double scale, PassCurve *c)
{
    memset(c, 0, sizeof *c);
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", val);
    for (char *save = NULL, *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        char *colon = strchr(tok, ':'), *e1, *e2;
        double x = colon ? strtod(tok, &e1) : NAN, y = colon ? strtod(colon + 1, &e2) : NAN;
        if (!colon || e1 != colon || *e2 || !isfinite(x) || !isfinite(y) || x <= 0 || y <= 0) {
            ir_error(loc, "'%s': expected SIZE:RATE pairs of positive numbers, got '%s'", key, tok);
            return false;
        }
        if (c->n == PASS_CURVE_MAX) {
            ir_error(loc, "'%s' has more than %d points", key, PASS_CURVE_MAX);
            return false;
        }
        if (c->n > 0 && x <= c->x[c->n - 1]) {
            ir_error(loc, "'%s': sizes must increase (%g after %g)", key, x, c->x[c->n - 1]);
            return false;
        }
        c->x[c->n] = x, c->y[c->n] = y * scale;
        c->n++;
    }
    if (c->n == 0) {
        ir_error(loc, "'%s' needs at least one SIZE:RATE pair", key);
        return false;
    }
    return true;
}

static bool table_key(Parse *P, const char *key, const char *val, IrLoc kloc, IrLoc vloc)
{
    PassGpu *g = &P->out->gpu;
    char full[160];
    snprintf(full, sizeof full, "%s%s", P->in_solo ? "solo." : "", key);
    for (int i = 0; i < P->tables.n; i++)
        if (!strcmp(P->tables.v[i], full)) {
            ir_error(kloc, "'%s' is set twice", full);
            return false;
        }
    vec_push(P->tables, ir_xstrdup(full));
    P->gpu_key_seen = true;
    if (!strncmp(key, "kernel.", 7)) {
        for (int k = 0; k < PASS_NKERN; k++)
            if (!strcmp(key + 7, pass_kernel_names[k]))
                return parse_curve(key, val, vloc, 1e9, &g->kern[k]);
        ir_error(kloc, "unknown kernel '%s' (kernels: rmsnorm_fwd, silu_bwd, adamw, ... as "
                       "`ptdc calibrate` writes them)", key + 7);
        return false;
    }
    if (!strncmp(key, "attention_fwd.", 14) || !strncmp(key, "attention_bwd.", 14)) {
        bool bwd = key[10] == 'b';
        char *e;
        double D = strtod(key + 14, &e);
        if (*e || !(D >= 1 && D <= 4096)) {
            ir_error(kloc, "'%s': expected attention_%s.HEAD_DIM", key, bwd ? "bwd" : "fwd");
            return false;
        }
        int d = -1;
        for (int i = 0; i < g->attn_dims; i++)
            if (g->attn_dim[i] == D)
                d = i;
        if (d < 0) {
            if (g->attn_dims == PASS_ATTN_DIMS) {
                ir_error(kloc, "attention measured at more than %d head dims", PASS_ATTN_DIMS);
                return false;
            }
            d = g->attn_dims++;
            g->attn_dim[d] = D;
        }
        return parse_curve(key, val, vloc, 1e9, bwd ? &g->attn_bwd[d] : &g->attn_fwd[d]);
    }
    if (!strncmp(key, "coll.", 5)) {
        /* coll.KIND.GROUP[.net][.rRANKS_PER_NODE] */
        char kind[32];
        int group = 0, rpn = 0, net = 0;
        const char *rest = key + 5, *dot = strchr(rest, '.');
        int kk = -1;
        if (dot && (size_t)(dot - rest) < sizeof kind) {
            memcpy(kind, rest, (size_t)(dot - rest));
            kind[dot - rest] = 0;
            for (int k = 0; k <= PLAN_COLL_SENDRECV; k++)
                if (coll_key_name[k] && !strcmp(kind, coll_key_name[k]))
                    kk = k;
            char *e;
            group = (int)strtol(dot + 1, &e, 10);
            if (e == dot + 1)
                kk = -1;
            while (kk >= 0 && *e == '.') {
                if (!strncmp(e, ".net", 4) && (e[4] == 0 || e[4] == '.')) {
                    net = 1, e += 4;
                } else if (e[1] == 'r' && e[2] >= '1' && e[2] <= '9') {
                    rpn = (int)strtol(e + 2, &e, 10);
                } else {
                    kk = -1;
                }
            }
            if (kk >= 0 && *e)
                kk = -1;
        }
        if (kk < 0 || group < 2) {
            ir_error(kloc, "'%s': expected coll.KIND.GROUP[.net][.rRANKS] with KIND one of "
                           "allreduce, reduce_scatter, allgather, alltoall, sendrecv",
                     key);
            return false;
        }
        double a, bw;
        char *e1, *e2;
        a = strtod(val, &e1);
        bw = strtod(e1, &e2);
        while (*e2 == ' ' || *e2 == '\t')
            e2++;
        if (e1 == val || e2 == e1 || *e2 || !(a >= 0) || !(bw > 0) || !isfinite(a) || !isfinite(bw)) {
            ir_error(vloc, "'%s' expects ALPHA_US BUSBW_GBS (two numbers), got '%s'", key, val);
            return false;
        }
        if (g->ncoll[kk] == PASS_COLL_FITS) {
            ir_error(kloc, "more than %d group shapes of %s", PASS_COLL_FITS, kind);
            return false;
        }
        g->coll[kk][g->ncoll[kk]++] = (PassCollFit){group, net, rpn, a * 1e-6, bw * 1e9};
        return true;
    }
    ir_error(kloc, "unknown table '%s' (kernel.NAME, attention_fwd.D, attention_bwd.D, "
                   "coll.KIND.GROUP[.net][.rRANKS])",
             key);
    return false;
}

static bool on_key(void *ctx, const char *key, const char *val, IrLoc kloc, IrLoc vloc)
{
    Parse *P = ctx;
    PassCluster *out = P->out;
    if (!strncmp(key, "solo.", 5) && !P->in_solo) {
        /* The same key of the solo rates: parsed into their own device. */
        static const char *const rate_keys[] = {"peak_tflops", "gemm_eff", "sms", "gemm_tile_m",
                                                "gemm_tile_n", "gemm_tile_k", "gemm_k_half", "gemm_mn_half",
                                                "gemm_misalign", "gemm_overhead_us", NULL};
        const char *k = key + 5;
        bool ok = !strncmp(k, "kernel.", 7) || !strncmp(k, "attention_fwd.", 14) ||
                  !strncmp(k, "attention_bwd.", 14);
        for (int i = 0; rate_keys[i] && !ok; i++)
            ok = !strcmp(k, rate_keys[i]);
        if (!ok) {
            ir_error(kloc, "'%s': only compute rates have a solo form (solo.peak_tflops, "
                           "solo.gemm_*, solo.sms, solo.kernel.NAME, solo.attention_fwd.D, ...)", key);
            return false;
        }
        Parse S = *P;
        S.out = &P->solo;
        S.in_solo = true;
        memcpy(S.seen, P->solo_seen, sizeof S.seen);
        bool r = on_key(&S, k, val, kloc, vloc);
        memcpy(P->solo_seen, S.seen, sizeof S.seen);
        P->tables = S.tables; /* table keys seen, both kinds */
        P->any_solo = true;
        return r;
    }
    if (strchr(key, '.'))
        return table_key(P, key, val, kloc, vloc);
    int ki = -1;
    for (int i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].key, key))
            ki = i;
    if (ki < 0) {
        char list[1024];
        size_t n = 0;
        for (int i = 0; i < NKEYS && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", keys[i].key);
        ir_error(kloc, "unknown key '%s' (keys: %s; tables: kernel.NAME, attention_fwd.D, "
                       "attention_bwd.D, coll.KIND.GROUP)", key, list);
        return false;
    }
    const struct Key *k = &keys[ki];
    if (P->seen[ki]) {
        ir_error(kloc, "'%s' is set twice", k->key);
        return false;
    }
    P->seen[ki] = true;
    const char *sp = strpbrk(val, " \t");
    if (k->kind != K_GPU && k->kind != K_NAME && sp) {
        while (*sp == ' ' || *sp == '\t')
            sp++;
        IrLoc at = vloc;
        at.col += (int)(sp - val);
        ir_error(at, "unexpected text after the value of '%s'", k->key);
        return false;
    }
    char *field = (char *)&out->gpu + k->off;
    switch (k->kind) {
    case K_GPU:
        if (P->gpu_key_seen) {
            ir_error(kloc, "'gpu' must come before the GPU values it would overwrite");
            return false;
        }
        if (!pass_gpu_preset(val, &out->gpu)) {
            ir_error(vloc, "unknown GPU '%s' (presets: %s)", val, pass_gpu_preset_names());
            return false;
        }
        return true;
    case K_NAME:
        if (strlen(val) >= sizeof out->gpu.name) {
            ir_error(vloc, "name '%s' is longer than %zu characters", val, sizeof out->gpu.name - 1);
            return false;
        }
        strcpy(out->gpu.name, val);
        P->gpu_key_seen = true;
        return true;
    case K_KIND:
        if (strcmp(val, "gpu") && strcmp(val, "cpu")) {
            ir_error(vloc, "'device' is gpu or cpu, got '%s'", val);
            return false;
        }
        out->gpu.kind = !strcmp(val, "cpu") ? PASS_DEV_CPU : PASS_DEV_GPU;
        P->gpu_key_seen = true;
        return true;
    case K_INT:
    case K_CINT:
    case K_NUM: {
        double d;
        if (!pass_kv_number(k->key, val, vloc, k->lo, k->hi, k->unit, &d))
            return false;
        if (k->kind != K_NUM && d != floor(d)) {
            ir_error(vloc, "'%s' expects a whole number, got '%s'", k->key, val);
            return false;
        }
        if (k->kind == K_CINT) {
            *(int *)((char *)out + k->off) = (int)d;
            return true;
        }
        if (k->kind == K_INT)
            *(int *)field = (int)d;
        else
            *(double *)field = d * k->scale;
        P->gpu_key_seen = true;
        return true;
    }
    }
    return false;
}

static bool finish(Parse *P, const char *path)
{
    PassCluster *out = P->out;
    if (P->any_solo) {
        /* The solo rates: the base ones, with what `solo.` keys set. */
        PassRates *r = &out->gpu.solo;
        pass_rates_get(&out->gpu, r);
        const PassGpu *sg = &P->solo.gpu;
        for (int i = 0; i < NKEYS; i++) {
            if (!P->solo_seen[i])
                continue;
            const char *k = keys[i].key;
            if (!strcmp(k, "peak_tflops")) r->peak_flops = sg->peak_flops;
            else if (!strcmp(k, "gemm_eff")) r->gemm_eff = sg->gemm_eff;
            else if (!strcmp(k, "sms")) r->sms = sg->sms;
            else if (!strcmp(k, "gemm_tile_m")) r->gemm_tile_m = sg->gemm_tile_m;
            else if (!strcmp(k, "gemm_tile_n")) r->gemm_tile_n = sg->gemm_tile_n;
            else if (!strcmp(k, "gemm_tile_k")) r->gemm_tile_k = sg->gemm_tile_k;
            else if (!strcmp(k, "gemm_k_half")) r->gemm_k_half = sg->gemm_k_half;
            else if (!strcmp(k, "gemm_mn_half")) r->gemm_mn_half = sg->gemm_mn_half;
            else if (!strcmp(k, "gemm_misalign")) r->gemm_misalign = sg->gemm_misalign;
            else if (!strcmp(k, "gemm_overhead_us")) r->gemm_overhead_s = sg->gemm_overhead_s;
        }
        for (int k = 0; k < PASS_NKERN; k++)
            if (sg->kern[k].n > 0)
                r->kern[k] = sg->kern[k];
        if (sg->attn_dims > 0) {
            r->attn_dims = sg->attn_dims;
            memcpy(r->attn_dim, sg->attn_dim, sizeof r->attn_dim);
            memcpy(r->attn_fwd, sg->attn_fwd, sizeof r->attn_fwd);
            memcpy(r->attn_bwd, sg->attn_bwd, sizeof r->attn_bwd);
        }
        out->gpu.has_solo = true;
    }
    for (int i = 0; i < P->tables.n; i++)
        free(P->tables.v[i]);
    vec_free(P->tables);
    if (out->gpus_per_node && out->ngpus && out->ngpus > out->gpus_per_node &&
        out->ngpus % out->gpus_per_node) {
        ir_error((IrLoc){path, 1, 1}, "gpus = %d is not a whole number of nodes of %d",
                 out->ngpus, out->gpus_per_node);
        return false;
    }
    int host = out->gpus_per_node ? out->gpus_per_node : out->gpu.host_gpus;
    if (out->nvlink_domain && host && out->nvlink_domain % host) {
        ir_error((IrLoc){path, 1, 1}, "nvlink_domain = %d is not a whole number of hosts of %d GPUs",
                 out->nvlink_domain, host);
        return false;
    }
    if (out->gpu.kind == PASS_DEV_CPU && out->gpu.cores < 1) {
        ir_error((IrLoc){path, 1, 1}, "a cpu device needs cores_per_node");
        return false;
    }
    return true;
}

static void parse_begin(Parse *P, PassCluster *out)
{
    memset(P, 0, sizeof *P);
    memset(out, 0, sizeof *out);
    pass_gpu_preset("a100-80gb", &out->gpu);
    P->out = out;
    pass_gpu_preset("a100-80gb", &P->solo.gpu);
}

bool pass_cluster_parse(const char *path, const char *text, size_t len, PassCluster *out)
{
    Parse P;
    parse_begin(&P, out);
    bool ok = pass_kv_parse(path, text, len, on_key, &P);
    return finish(&P, path) && ok;
}

bool pass_cluster_load(const char *path, PassCluster *out)
{
    Parse P;
    parse_begin(&P, out);
    bool ok = pass_kv_load(path, "cluster", on_key, &P);
    return finish(&P, path) && ok;
}

/* Scale a curve's rates by f. */
static void scale_curve(PassCurve *c, double f)
{
    for (int i = 0; i < c->n; i++)
        c->y[i] *= f;
}

/* w of the way from curve a to curve b, at a's sizes. */
static void blend_curve(PassCurve *a, const PassCurve *b, double w)
{
    if (b->n == 0)
        return;
    if (a->n == 0) {
        *a = *b;
        return;
    }
    for (int i = 0; i < a->n; i++)
        a->y[i] = (1 - w) * a->y[i] + w * pass_curve_at(b, a->x[i]);
}

/* A CPU node's cores are shared by the ranks placed on it: with c cores per
 * rank a rank computes at c times one core's measured rates below one core
 * (time slicing); with all the node's cores (one rank per node) at the rates
 * measured for a rank alone (the `solo.` rates: its GEMM curve over its
 * threads, its threaded kernels and attention), in between at the rates
 * interpolated between the two. Memory is the node's, divided among its
 * ranks. */
static void cpu_share(PassCluster *cl)
{
    PassGpu *g = &cl->gpu;
    double ranks = cl->gpus_per_node > 0 ? cl->gpus_per_node : 1;
    double c = g->cores / ranks;
    if (c < 1) {
        g->peak_flops *= c;
        for (int k = 0; k < PASS_NKERN; k++)
            scale_curve(&g->kern[k], c);
        for (int d = 0; d < g->attn_dims; d++)
            scale_curve(&g->attn_fwd[d], c), scale_curve(&g->attn_bwd[d], c);
    } else if (c > 1 && g->has_solo && g->cores > 1) {
        double w = (c - 1) / (g->cores - 1);
        PassRates base, *s = &g->solo;
        pass_rates_get(g, &base);
        if (w >= 0.5) { /* the GEMM curve's shape: the nearer one's */
            PassRates shape = *s;
            shape.peak_flops = base.peak_flops, shape.gemm_eff = base.gemm_eff;
            memcpy(shape.kern, base.kern, sizeof shape.kern);
            shape.attn_dims = base.attn_dims;
            memcpy(shape.attn_dim, base.attn_dim, sizeof shape.attn_dim);
            memcpy(shape.attn_fwd, base.attn_fwd, sizeof shape.attn_fwd);
            memcpy(shape.attn_bwd, base.attn_bwd, sizeof shape.attn_bwd);
            pass_rates_set(g, &shape);
        }
        g->peak_flops = (1 - w) * base.peak_flops * base.gemm_eff + w * s->peak_flops * s->gemm_eff;
        g->gemm_eff = 1;
        for (int k = 0; k < PASS_NKERN; k++)
            blend_curve(&g->kern[k], &s->kern[k], w);
        for (int d = 0; d < g->attn_dims; d++)
            for (int j = 0; j < s->attn_dims; j++)
                if (s->attn_dim[j] == g->attn_dim[d]) {
                    blend_curve(&g->attn_fwd[d], &s->attn_fwd[j], w);
                    blend_curve(&g->attn_bwd[d], &s->attn_bwd[j], w);
                }
    }
    g->hbm_bytes /= ranks;
}

bool pass_cluster_finish(PassCluster *cl, int gpus, int gpus_per_node, bool whole_nodes)
{
    if (!cl->ngpus)
        cl->ngpus = gpus > 0 ? gpus : 8;
    if (cl->gpu.kind == PASS_DEV_CPU) {
        /* Ranks fill the nodes the file names (one by default). */
        int nodes = cl->nodes > 0 ? cl->nodes : 1;
        if (gpus_per_node > 0)
            nodes = (cl->ngpus + gpus_per_node - 1) / gpus_per_node;
        if (cl->ngpus % nodes) {
            ir_error(IR_NOLOC, "--gpus %d ranks do not fill %d CPU nodes evenly", cl->ngpus, nodes);
            return false;
        }
        cl->nodes = nodes;
        cl->gpus_per_node = cl->nvlink_domain = cl->ngpus / nodes;
        cpu_share(cl);
        return true;
    }
    const PassGpu *g = &cl->gpu;
    if (!cl->gpus_per_node)
        cl->gpus_per_node = gpus_per_node > 0 ? gpus_per_node : g->host_gpus > 0 ? g->host_gpus : 8;
    if (!cl->nvlink_domain) /* the preset's domain if it is whole hosts of this size */
        cl->nvlink_domain = g->domain_gpus > cl->gpus_per_node && g->domain_gpus % cl->gpus_per_node == 0
                                ? g->domain_gpus : cl->gpus_per_node;
    if (cl->nvlink_domain % cl->gpus_per_node) {
        ir_error(IR_NOLOC, "an NVLink domain of %d GPUs is not a whole number of hosts of %d GPUs "
                 "(--gpus-per-node)", cl->nvlink_domain, cl->gpus_per_node);
        return false;
    }
    if (whole_nodes && cl->ngpus > cl->gpus_per_node && cl->ngpus % cl->gpus_per_node) {
        ir_error(IR_NOLOC, "--gpus %d is not a whole number of nodes of %d GPUs (--gpus-per-node)",
                 cl->ngpus, cl->gpus_per_node);
        return false;
    }
    return true;
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
    return pass_cluster_finish(out, gpus, gpus_per_node, true);
}

static void print_curve(FILE *f, const char *key, const PassCurve *c, double scale)
{
    if (c->n <= 0)
        return;
    fprintf(f, "%s =", key);
    for (int i = 0; i < c->n; i++)
        fprintf(f, " %.6g:%.6g", c->x[i], c->y[i] / scale);
    fputc('\n', f);
}

void pass_cluster_print(FILE *f, const PassCluster *cl)
{
    const PassGpu *g = &cl->gpu;
    fprintf(f, "name = %s\n", g->name);
    fprintf(f, "device = %s\n", g->kind == PASS_DEV_CPU ? "cpu" : "gpu");
    if (cl->ngpus)
        fprintf(f, "gpus = %d\n", cl->ngpus);
    if (cl->gpus_per_node && g->kind != PASS_DEV_CPU)
        fprintf(f, "gpus_per_node = %d\n", cl->gpus_per_node);
    if (cl->nvlink_domain && g->kind != PASS_DEV_CPU)
        fprintf(f, "nvlink_domain = %d\n", cl->nvlink_domain);
    if (cl->nodes && g->kind == PASS_DEV_CPU)
        fprintf(f, "nodes = %d\n", cl->nodes);
    for (int i = 0; i < NKEYS; i++) {
        if (keys[i].kind != K_NUM && keys[i].kind != K_INT)
            continue;
        if ((!strcmp(keys[i].key, "core_share") || !strncmp(keys[i].key, "sync_", 5)) &&
            g->kind != PASS_DEV_CPU)
            continue; /* CPU ranks only */
        const char *field = (const char *)g + keys[i].off;
        if (keys[i].kind == K_INT) {
            if (*(const int *)field)
                fprintf(f, "%-19s= %d  # %s\n", keys[i].key, *(const int *)field, keys[i].unit);
        } else if (*(const double *)field != 0 || keys[i].lo == 0) { /* 0 below lo: not set */
            fprintf(f, "%-19s= %.6g  # %s\n", keys[i].key, *(const double *)field / keys[i].scale,
                    keys[i].unit);
        }
    }
    char key[96];
    for (int k = 0; k < PASS_NKERN; k++) {
        snprintf(key, sizeof key, "kernel.%s", pass_kernel_names[k]);
        print_curve(f, key, &g->kern[k], 1e9);
    }
    if (g->has_solo) {
        const PassRates *r = &g->solo;
        fprintf(f, "# one rank alone on its node, with all %d cores:\n", g->cores);
        fprintf(f, "solo.peak_tflops = %.6g\nsolo.gemm_eff = %.6g\nsolo.sms = %d\n",
                r->peak_flops / 1e12, r->gemm_eff, r->sms);
        fprintf(f, "solo.gemm_tile_m = %.6g\nsolo.gemm_tile_n = %.6g\nsolo.gemm_tile_k = %.6g\n",
                r->gemm_tile_m, r->gemm_tile_n, r->gemm_tile_k);
        fprintf(f, "solo.gemm_k_half = %.6g\nsolo.gemm_mn_half = %.6g\nsolo.gemm_misalign = %.6g\n"
                   "solo.gemm_overhead_us = %.6g\n",
                r->gemm_k_half, r->gemm_mn_half, r->gemm_misalign, r->gemm_overhead_s * 1e6);
        for (int k = 0; k < PASS_NKERN; k++) {
            snprintf(key, sizeof key, "solo.kernel.%s", pass_kernel_names[k]);
            print_curve(f, key, &r->kern[k], 1e9);
        }
        for (int d = 0; d < r->attn_dims; d++) {
            snprintf(key, sizeof key, "solo.attention_fwd.%g", r->attn_dim[d]);
            print_curve(f, key, &r->attn_fwd[d], 1e9);
            snprintf(key, sizeof key, "solo.attention_bwd.%g", r->attn_dim[d]);
            print_curve(f, key, &r->attn_bwd[d], 1e9);
        }
    }
    for (int d = 0; d < g->attn_dims; d++) {
        snprintf(key, sizeof key, "attention_fwd.%g", g->attn_dim[d]);
        print_curve(f, key, &g->attn_fwd[d], 1e9);
        snprintf(key, sizeof key, "attention_bwd.%g", g->attn_dim[d]);
        print_curve(f, key, &g->attn_bwd[d], 1e9);
    }
    for (int k = 0; k <= PLAN_COLL_SENDRECV; k++)
        for (int i = 0; i < g->ncoll[k]; i++) {
            const PassCollFit *c = &g->coll[k][i];
            char rpn[32] = "";
            if (c->rpn)
                snprintf(rpn, sizeof rpn, ".r%d", c->rpn);
            fprintf(f, "coll.%s.%d%s%s = %.6g %.6g  # us, GB/s\n", coll_key_name[k], c->group,
                    c->net ? ".net" : "", rpn, c->alpha_s * 1e6, c->busbw * 1e-9);
        }
}
