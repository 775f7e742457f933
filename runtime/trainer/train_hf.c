/* train_hf.c: the weights in and out: initial values (seeded, or imported
 * from a Hugging Face safetensors file, each rank reading its own block) and
 * the export of the trained weights under Hugging Face names, gathered from
 * every rank. A parameter's block is its part of the global tensor; HF
 * stores 2-D (or 1-D) views of it. What a model directory holds besides the
 * weights (config.json, generation_config.json), and the names a tensor may
 * have in a checkpoint, are train_hfdir.c's. */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t shard_offset(const CgParam *p)
{
    return p->zshard ? (int64_t)rt_comm_rank(g_comm[p->pmask]) * p->shard : 0;
}

/* The 2-D (or 1-D) view Hugging Face stores: dims [0, hf_split) are rows;
 * hf_split -1: the parameter's own shape (GPT-OSS's stacked experts). */
static int view(const CgParam *p, int64_t *vg)
{
    if (!p->hf_name || p->hf_split < 0) {
        for (int i = 0; i < p->rank; i++)
            vg[i] = p->global[i];
        return p->rank;
    }
    int64_t rows = 1, cols = 1;
    for (int i = 0; i < p->rank; i++)
        *(i < p->hf_split ? &rows : &cols) *= p->global[i];
    if (p->hf_split == 0) {
        vg[0] = cols;
        return 1;
    }
    vg[0] = rows;
    vg[1] = cols;
    return 2;
}

/* Dims [lo, hi) of a block, flattened row-major: a contiguous range when
 * the dims before its first split dim have size 1 and those after it are
 * whole. */
static int flat_range(const CgParam *p, int lo, int hi, const int64_t *off, const int64_t *loc,
                      int64_t *voff, int64_t *vloc)
{
    int64_t o = 0, n = 1, before = 1;
    int first = -1;
    for (int i = lo; i < hi; i++) {
        if (loc[i] < p->global[i]) {
            if (first >= 0)
                return 0;
            first = i;
        } else if (first >= 0 && loc[i] != p->global[i]) {
            return 0;
        }
        if (first < 0)
            before *= p->global[i];
        o = o * p->global[i] + off[i];
        n *= loc[i];
    }
    if (first >= 0 && before != 1)
        return 0;
    *voff = o;
    *vloc = n;
    return 1;
}

static void block_view(const CgParam *p, const int64_t *off, const int64_t *loc, int vr,
                       int64_t *voff, int64_t *vloc, int *ok)
{
    if (!p->hf_name || p->hf_split < 0) {
        memcpy(voff, off, sizeof(int64_t) * (size_t)p->rank);
        memcpy(vloc, loc, sizeof(int64_t) * (size_t)p->rank);
        *ok = 1;
        return;
    }
    int split = vr == 1 ? 0 : p->hf_split;
    *ok = 1;
    if (vr == 2)
        *ok = flat_range(p, 0, split, off, loc, &voff[0], &vloc[0]);
    if (*ok)
        *ok = flat_range(p, split, p->rank, off, loc, &voff[vr - 1], &vloc[vr - 1]);
}

/* Copy block (off, loc) of a full row-major tensor. */
static void extract(const CgParam *p, const float *full, const int64_t *off, const int64_t *loc,
                    float *dst)
{
    int64_t idx[CG_MAX_RANK] = {0}, n = 1;
    for (int i = 0; i < p->rank; i++)
        n *= loc[i];
    for (int64_t k = 0; k < n; k++) {
        int64_t fi = 0;
        for (int d = 0; d < p->rank; d++)
            fi = fi * p->global[d] + off[d] + idx[d];
        dst[k] = full[fi];
        for (int d = p->rank - 1; d >= 0; d--) {
            if (++idx[d] < loc[d])
                break;
            idx[d] = 0;
        }
    }
}

/* Stacked experts: an hf name with "{expert}" (Mixtral's
 * ...experts.{expert}.w1.weight) names one tensor per index of the
 * parameter's first dim, each holding that expert's slice ([d_model,
 * d_expert] of [n_experts, d_model, d_expert]; `transposed` applies to each
 * slice). */
static int stacked(const CgParam *p)
{
    return p->hf_name && strstr(p->hf_name, "{expert}") != NULL;
}

/* Expert e of a stacked parameter as a parameter of its own: its name (in
 * buf), its dims after the first, its HF view's rows one dim fewer. */
static CgParam expert_slice(const CgParam *p, int64_t e, char *buf, size_t n)
{
    const char *mark = strstr(p->hf_name, "{expert}");
    snprintf(buf, n, "%.*s%lld%s", (int)(mark - p->hf_name), p->hf_name, (long long)e,
             mark + strlen("{expert}"));
    CgParam x = *p;
    x.hf_name = buf;
    x.rank = p->rank - 1;
    for (int i = 0; i < x.rank; i++) {
        x.global[i] = p->global[i + 1];
        x.split_axes[i] = p->split_axes[i + 1];
    }
    x.hf_split = p->hf_split > 1 ? p->hf_split - 1 : 0;
    return x;
}

static void import_block(RtSt *st, const CgParam *p, const int64_t *off, const int64_t *loc,
                         float *dst)
{
    if (stacked(p)) { /* the experts this rank holds, each from its own tensor */
        char buf[1024];
        int64_t inner = 1;
        for (int i = 1; i < p->rank; i++)
            inner *= loc[i];
        for (int64_t e = 0; e < loc[0]; e++) {
            CgParam x = expert_slice(p, off[0] + e, buf, sizeof buf);
            import_block(st, &x, off + 1, loc + 1, dst + e * inner);
        }
        return;
    }
    char err[1024];
    int64_t vg[CG_MAX_RANK], voff[CG_MAX_RANK], vloc[CG_MAX_RANK];
    int vr = view(p, vg), ok;
    const char *name = p->hf_name ? tr_hf_import_name(st, p->hf_name) : p->name;
    int tr = p->hf_name ? p->hf_transposed : 0, part = p->hf_name ? p->hf_part : 0;
    int parts = !p->hf_name ? 1 : p->hf_interleaved ? RT_ST_INTERLEAVED(p->hf_nparts) : p->hf_nparts;
    block_view(p, off, loc, vr, voff, vloc, &ok);
    if (ok) {
        if (rt_st_read(st, name, tr != 0, part, parts, vr, vg, voff, vloc, dst, err, sizeof err))
            rt_fatal("%s", err);
        return;
    }
    int64_t n = 1, zero[CG_MAX_RANK] = {0};
    for (int i = 0; i < p->rank; i++)
        n *= p->global[i];
    float *full = (float *)malloc((size_t)n * sizeof(float));
    if (!full)
        rt_fatal("out of host memory importing %s", p->name);
    if (rt_st_read(st, name, tr != 0, part, parts, vr, vg, zero, vg, full, err, sizeof err))
        rt_fatal("%s", err);
    extract(p, full, off, loc, dst);
    free(full);
}

/* Parameter and fp32 master from host values of this rank's block. */
static void set_param(CgParam *p, const float *host)
{
    int64_t pad = tr_padded(p), off = shard_offset(p);
    float *h = (float *)calloc((size_t)pad, sizeof(float));
    if (!h)
        rt_fatal("out of host memory for %s", p->name);
    memcpy(h, host, (size_t)p->numel * sizeof(float));
    if (p->zshard && CG_ZERO == 3)
        rt_act_from_f32(p->param, h + off, p->shard);
    else
        rt_act_from_f32(p->param, h, pad);
    if (!CG_MASTER_ALIAS) /* else the master is the block just written */
        rt_to_device(p->master, h + off, (size_t)p->shard * sizeof(float));
    free(h);
}

/* What this rank imports, as tr_load_group compares it: each parameter's
 * name and block (data-parallel replicas import the same). */
static uint64_t blocks_hash(void)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < tr_prog->nparams; i++) {
        const CgParam *p = &tr_prog->params[i];
        int64_t off[CG_MAX_RANK], loc[CG_MAX_RANK];
        tr_block(p, off, loc);
        h = tr_load_hash(h, p->name, strlen(p->name) + 1);
        h = tr_load_hash(h, &p->rank, sizeof p->rank);
        h = tr_load_hash(h, off, sizeof(int64_t) * (size_t)p->rank);
        h = tr_load_hash(h, loc, sizeof(int64_t) * (size_t)p->rank);
    }
    return h;
}

void tr_init_params(void)
{
    RtSt *st = NULL;
    char err[1024];
    int64_t bad = 0, received = 0, *load = NULL;
    double t0 = rt_time();
    if (tr_fl.import_hf && !(st = rt_st_open(tr_fl.import_hf, err, sizeof err)))
        rt_fatal("%s", err);
    if (st && ROOT && tr_fl.export_hf && !tr_hf_is_file(tr_fl.export_hf))
        tr_hf_keep_generation_config(tr_fl.import_hf);
    /* Replicas import together: each block read by the member that has read
     * the fewest bytes so far (every member computes the same), then
     * broadcast to the others. */
    RtComm *group = st ? tr_load_group(blocks_hash()) : NULL;
    int gsize = group ? rt_comm_size(group) : 1, gme = group ? rt_comm_rank(group) : 0;
    if (st && !(load = (int64_t *)calloc((size_t)gsize, sizeof *load)))
        rt_fatal("out of host memory");
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        int64_t off[CG_MAX_RANK], loc[CG_MAX_RANK];
        tr_block(p, off, loc);
        float *host = (float *)malloc((size_t)p->numel * sizeof(float));
        if (!host)
            rt_fatal("out of host memory for %s", p->name);
        if (st) {
            int reader = 0;
            for (int m = 1; m < gsize; m++)
                reader = load[m] < load[reader] ? m : reader;
            load[reader] += p->numel;
            /* A reader's failure is rt_fatal: it ends every rank, none waits. */
            if (gme == reader)
                import_block(st, p, off, loc, host);
            if (gsize > 1) {
                rt_host_bcast(group, host, (size_t)p->numel * sizeof(float), reader);
                received += gme == reader ? 0 : p->numel * (int64_t)sizeof(float);
            }
            for (int64_t e = 0; e < p->numel && !bad; e++)
                if (!isfinite(host[e])) {
                    bad = 1;
                    rt_log("train: --import-hf %s: tensor '%s' holds %s (element %lld of this "
                           "rank's block); every step from non-finite weights would be skipped",
                           tr_fl.import_hf, p->hf_name ? tr_hf_import_name(st, p->hf_name)
                                                       : p->name,
                           isnan(host[e]) ? "NaN" : "an infinity", (long long)e);
                }
        } else
            rt_init_param(host, rt_hash(p->name) + tr_fl.seed * 0x9E3779B97F4A7C15ull, p->init,
                          p->std, p->rank, p->global, off, loc);
        set_param(p, host);
        free(host);
    }
    if (st) {
        tr_load_report("--import-hf", rt_st_bytes_read(st), -1, received, gsize, rt_time() - t0);
        rt_st_close(st);
    }
    free(load);
    if (rt_host_max(tr_world, bad)) {
        rt_finalize();
        exit(1);
    }
}

static int64_t global_numel(const CgParam *p)
{
    int64_t n = 1;
    for (int i = 0; i < p->rank; i++)
        n *= p->global[i];
    return n;
}

/* The whole of p on every rank of its pipeline rank, in buf, from src: this
 * rank's local tensor, or (sharded) its ZeRO shard of it. Its elements are
 * w rt_act wide (1: weights; GW: fp32 gradients, moved as the bytes they
 * are: gathers do no arithmetic, and each element stays whole in the
 * innermost dim). */
void tr_gather_full(const CgParam *p, const void *src, int w, int sharded, rt_act *buf,
                    rt_act *tmp, rt_act *scratch)
{
    int64_t off[CG_MAX_RANK], loc[CG_MAX_RANK];
    tr_block(p, off, loc);
    if (sharded)
        rt_allgather(g_comm[p->pmask], buf, src, p->shard * w, RT_ACT);
    else
        rt_copy(buf, src, (size_t)(p->numel * w) * sizeof(rt_act));
    /* A dim split over several axes (nested in axis order) is gathered in
     * one go over their group, whose ranks are ordered outer-major. */
    for (int d = 0; d < p->rank; d++) {
        int m = p->split_axes[d] & ((1 << CG_NAXES) - 1);
        if (!m)
            continue;
        int64_t outer = 1, inner = w, ways = 1;
        for (int i = 0; i < d; i++)
            outer *= loc[i];
        for (int i = d + 1; i < p->rank; i++)
            inner *= loc[i];
        for (int a = 0; a < CG_NAXES; a++)
            ways *= m >> a & 1 ? tr_mesh_size(a) : 1;
        rt_allgather_dim(g_comm[m], tmp, buf, outer, loc[d], inner, scratch);
        loc[d] *= ways;
        rt_copy(buf, tmp, (size_t)(outer * loc[d] * inner) * sizeof(rt_act));
    }
}

/* fp32 gradient elements per rt_act (2 on CUDA's bf16, 1 on CPU). */
enum { GW = sizeof(rt_grad) / sizeof(rt_act) };
typedef char tr_grad_whole_acts[sizeof(rt_grad) % sizeof(rt_act) == 0 ? 1 : -1];

/* What tr_write_hf writes of p: its weights (whole locally, or the ZeRO-3
 * shard) or its reduced fp32 gradient (the ZeRO shard under ZeRO >= 1). */
static const void *hf_source(const CgParam *p, int grads, int *sharded)
{
    if (!grads) {
        *sharded = p->zshard && CG_ZERO == 3;
        return p->param;
    }
    *sharded = p->zshard;
    return p->zshard && CG_ZERO == 1 ? p->grad_shard : p->grad;
}

void tr_write_hf(const char *path, int grads, const char *dtype)
{
    char err[1024];
    int64_t most = 1;
    int ntensors = 0;
    RtStTensor *decl = NULL;
    for (int r = 0; r < CG_PP; r++)
        for (int i = 0; i < cg_ranks[r].nparams; i++) {
            const CgParam *p = &cg_ranks[r].params[i];
            if (!p->primary)
                continue;
            if (global_numel(p) > most)
                most = global_numel(p);
            int nx = stacked(p) ? (int)p->global[0] : 1;
            for (int e = 0; e < nx; e++) {
                char buf[1024];
                CgParam x = stacked(p) ? expert_slice(p, e, buf, sizeof buf) : *p;
                const char *name = x.hf_name ? x.hf_name : x.name;
                int dup = 0;
                for (int k = 0; k < ntensors; k++)
                    dup |= !strcmp(decl[k].name, name);
                if (dup)
                    continue;
                decl = (RtStTensor *)realloc(decl, sizeof *decl * (size_t)(ntensors + 1));
                RtStTensor *t = &decl[ntensors++];
                memset(t, 0, sizeof *t);
                char *own = (char *)malloc(strlen(name) + 1); /* outlives buf */
                if (!own)
                    rt_fatal("out of host memory");
                t->name = strcpy(own, name);
                int64_t vg[CG_MAX_RANK];
                t->ndim = view(&x, vg);
                for (int d = 0; d < t->ndim; d++)
                    t->shape[d] = x.hf_name && x.hf_transposed && t->ndim == 2 ? vg[1 - d] : vg[d];
                if (x.hf_name)
                    t->shape[t->ndim - 1] *= x.hf_nparts;
            }
        }
    RtStWriter *w = NULL;
    bool one_file = tr_hf_is_file(path);
    if (ROOT && !(w = one_file ? rt_st_writer_open(path, decl, ntensors, dtype, err, sizeof err)
                               : rt_st_writer_open_dir(path, decl, ntensors, dtype,
                                                       tr_fl.shard_bytes, err, sizeof err)))
        rt_fatal("%s", err);
    for (int i = 0; i < tr_prog->nparams; i++) /* a ZeRO shard gathers its padding too */
        if (tr_padded(&tr_prog->params[i]) > most)
            most = tr_padded(&tr_prog->params[i]);
    int ew = grads ? GW : 1; /* rt_act per element */
    int64_t span = most * ew; /* rt_act elements of one buffer */
    rt_act *buf = (rt_act *)rt_alloc((size_t)(3 * span) * sizeof(rt_act));
    float *host = (float *)malloc((size_t)most * sizeof(float));
    for (int r = 0; r < CG_PP; r++)
        for (int i = 0; i < cg_ranks[r].nparams; i++) {
            const CgParam *p = &cg_ranks[r].params[i];
            if (!p->primary)
                continue;
            int64_t n = global_numel(p);
            bool mine = r == tr_pp_rank, sender = mine && tr_mesh_index == 0;
            if (mine) {
                int sharded;
                const void *src = hf_source(p, grads, &sharded);
                tr_gather_full(p, src, ew, sharded, buf, buf + span, buf + 2 * span);
            }
            if (sender && !ROOT)
                rt_wait(rt_isend(tr_world, buf, n * ew, RT_ACT, 0, 7));
            if (!ROOT)
                continue;
            if (!mine)
                rt_wait(rt_irecv(tr_world, buf, n * ew, RT_ACT, r * CG_DEVICES, 7));
            if (grads)
                rt_to_host(host, buf, (size_t)n * sizeof(rt_grad));
            else
                rt_act_to_f32(host, buf, n);
            int nx = stacked(p) ? (int)p->global[0] : 1;
            for (int e = 0; e < nx; e++) { /* each expert its own tensor */
                char buf[1024];
                CgParam x = stacked(p) ? expert_slice(p, e, buf, sizeof buf) : *p;
                int64_t vg[CG_MAX_RANK], zero[CG_MAX_RANK] = {0};
                int vr = view(&x, vg);
                if (rt_st_writer_put(w, x.hf_name ? x.hf_name : x.name,
                                     x.hf_name && x.hf_transposed, x.hf_name ? x.hf_part : 0,
                                     !x.hf_name ? 1 : x.hf_interleaved ? RT_ST_INTERLEAVED(x.hf_nparts) : x.hf_nparts,
                                     vr, vg, zero, vg,
                                     host + (int64_t)e * (n / nx), err, sizeof err)) {
                    rt_st_writer_abort(w);
                    rt_fatal("%s", err);
                }
            }
        }
    if (ROOT && !one_file && !grads) /* config.json and the import's generation_config.json */
        tr_hf_add_files(w, dtype);
    if (ROOT && rt_st_writer_close(w, err, sizeof err))
        rt_fatal("%s", err);
    rt_free(buf);
    free(host);
    for (int k = 0; k < ntensors; k++)
        free((char *)decl[k].name);
    free(decl);
    rt_barrier(tr_world);
}

void tr_export_hf(const char *path)
{
    tr_write_hf(path, 0, tr_fl.export_dtype);
    if (ROOT)
        printf("exported weights to %s\n", path);
}
