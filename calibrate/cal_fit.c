/* cal_fit.c: the cost model's device parameters from measured records.
 *
 * Every fit evaluates the cost model's own formulas (pass_gemm_time,
 * pass_kernel_bytes, the attention FLOP count, the collective's bus factor),
 * so what is fitted is exactly what the planner will compute with:
 *   GEMM        the efficiency curve of cost_gemm.c (tile sizes, K slice,
 *               K pipeline fill, misalignment, per-call overhead, rate), by
 *               least squares on log time;
 *   kernels     each runtime kernel's rate in the model's bytes per second,
 *               as a curve over the bytes it moves (caches show as a rate
 *               that falls with size; per-call overhead as a floor);
 *   attention   FLOP/s by head dim and sequence length, forward and backward;
 *   collectives alpha + c(n) S / busbw per kind and group size, by weighted
 *               least squares (relative errors);
 *   CPU         how much faster a rank runs with the node to itself;
 *   memory      a rank's resident bytes after start-up and per communicator. */
#include "calibrate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void quality(CalQuality *q, const double *pred, const double *meas, int n)
{
    double *e = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    q->n = n;
    q->max_err = 0;
    for (int i = 0; i < n; i++) {
        e[i] = fabs(pred[i] / meas[i] - 1);
        q->max_err = fmax(q->max_err, e[i]);
    }
    q->median_err = median(e, n);
    free(e);
}

/* ----------------------------------------------------------------- GEMM */
typedef struct GemmFit {
    PassGpu gpu;
    const CalGemm *pt;
    int n;
} GemmFit;

static double gemm_loss(GemmFit *f)
{
    double s = 0;
    for (int i = 0; i < f->n; i++) {
        const CalGemm *g = &f->pt[i];
        double t = pass_gemm_time(&f->gpu, g->M, g->N, g->K, 1);
        double d = log(t / g->s);
        s += d * d;
    }
    return s;
}

/* Minimise over the continuous parameters (log rate, k_half, mn_half,
 * misalign, overhead) by coordinate search with shrinking steps: a smooth,
 * cheap, five-parameter problem that needs nothing cleverer. */
static double gemm_refine(GemmFit *f)
{
    enum { NP = 5 };
    double *par[NP] = {&f->gpu.peak_flops, &f->gpu.gemm_k_half, &f->gpu.gemm_mn_half, &f->gpu.gemm_misalign,
                       &f->gpu.gemm_overhead_s};
    double lo[NP] = {1e6, 0, 0, 0.1, 0}, hi[NP] = {1e17, 4096, 4096, 1, 1e-2};
    bool logscale[NP] = {true, false, false, false, false};
    double step[NP] = {0.5, 64, 32, 0.2, 2e-6};
    double best = gemm_loss(f);
    for (int it = 0; it < 60; it++) {
        bool moved = false;
        for (int p = 0; p < NP; p++)
            for (int dir = -1; dir <= 1; dir += 2) {
                double old = *par[p];
                double v = logscale[p] ? old * exp(dir * step[p]) : old + dir * step[p];
                if (v < lo[p] || v > hi[p])
                    continue;
                *par[p] = v;
                double l = gemm_loss(f);
                if (l < best) {
                    best = l;
                    moved = true;
                } else {
                    *par[p] = old;
                }
            }
        if (!moved)
            for (int p = 0; p < NP; p++)
                step[p] *= 0.5;
    }
    return best;
}

static bool fit_gemm(const CalRecords *r, PassGpu *gpu, CalQuality *q)
{
    int n = (int)r->gemm.n;
    if (n < 8) {
        ir_error(IR_NOLOC, "calibration: %d GEMM measurements are too few to fit (need 8)", n);
        return false;
    }
    static const double tiles[] = {1, 4, 8, 16, 32, 64, 128, 256};
    static const double ktiles[] = {1, 8, 16, 32, 64};
    GemmFit f = {*gpu, r->gemm.v, n};
    /* Start the rate at the fastest measured GEMM. */
    double top = 0;
    for (int i = 0; i < n; i++)
        top = fmax(top, 2 * f.pt[i].M * f.pt[i].N * f.pt[i].K / f.pt[i].s);
    PassGpu best = *gpu;
    double best_loss = INFINITY;
    for (size_t a = 0; a < sizeof tiles / sizeof tiles[0]; a++)
        for (size_t b = 0; b < sizeof tiles / sizeof tiles[0]; b++)
            for (size_t c = 0; c < sizeof ktiles / sizeof ktiles[0]; c++) {
                f.gpu = *gpu;
                f.gpu.gemm_eff = 1; /* the fitted rate is the sustained peak */
                f.gpu.peak_flops = top;
                f.gpu.gemm_tile_m = tiles[a];
                f.gpu.gemm_tile_n = tiles[b];
                f.gpu.gemm_tile_k = ktiles[c];
                f.gpu.gemm_k_half = 32;
                f.gpu.gemm_mn_half = 0;
                f.gpu.gemm_misalign = 1;
                f.gpu.gemm_overhead_s = 1e-6;
                double l = gemm_refine(&f);
                if (l < best_loss - 1e-12) {
                    best_loss = l;
                    best = f.gpu;
                }
            }
    *gpu = best;
    double *pred = ir_xmalloc(sizeof(double) * (size_t)n), *meas = ir_xmalloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) {
        pred[i] = pass_gemm_time(gpu, f.pt[i].M, f.pt[i].N, f.pt[i].K, 1);
        meas[i] = f.pt[i].s;
    }
    quality(q, pred, meas, n);
    free(pred);
    free(meas);
    return true;
}

/* -------------------------------------------------------------- kernels */
static bool fit_kernels(const CalRecords *r, PassGpu *gpu, CalQuality *q)
{
    int n = (int)r->kern.n;
    double *pred = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    double *meas = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    int np = 0;
    for (int k = 0; k < PASS_NKERN; k++) {
        PassCurve *c = &gpu->kern[k];
        memset(c, 0, sizeof *c);
        for (int i = 0; i < n; i++) {
            const CalKern *m = &r->kern.v[i];
            if (strcmp(m->name, pass_kernel_names[k]) != 0)
                continue;
            if (c->n == PASS_CURVE_MAX) {
                ir_error(IR_NOLOC, "calibration: more than %d sizes of kernel %s", PASS_CURVE_MAX,
                         m->name);
                free(pred), free(meas);
                return false;
            }
            double b = pass_kernel_bytes((PassKernel)k, m->rows, m->cols, r->act_bytes);
            /* Insert in order of bytes. */
            int j = c->n++;
            while (j > 0 && c->x[j - 1] > b) {
                c->x[j] = c->x[j - 1], c->y[j] = c->y[j - 1];
                j--;
            }
            c->x[j] = b, c->y[j] = b / m->s;
        }
        for (int i = 0; i < n; i++) {
            const CalKern *m = &r->kern.v[i];
            if (strcmp(m->name, pass_kernel_names[k]) != 0)
                continue;
            pred[np] = pass_kernel_time(gpu, (PassKernel)k, m->rows, m->cols);
            meas[np++] = m->s;
        }
    }
    quality(q, pred, meas, np);
    free(pred), free(meas);
    return true;
}

/* ------------------------------------------------------------ attention */
static double attn_flops(const CalAttn *a)
{
    double f = 4 * a->B * a->H * a->S * a->S * a->D * (a->causal ? 0.5 : 1);
    return a->bwd ? f * pass_cost_consts.flash_bwd_ratio : f;
}

static bool fit_attention(const CalRecords *r, PassGpu *gpu, CalQuality *q)
{
    int n = (int)r->attn.n;
    gpu->attn_dims = 0;
    for (int i = 0; i < n; i++) {
        const CalAttn *a = &r->attn.v[i];
        int d = -1;
        for (int j = 0; j < gpu->attn_dims; j++)
            if (gpu->attn_dim[j] == a->D)
                d = j;
        if (d < 0) {
            if (gpu->attn_dims == PASS_ATTN_DIMS) {
                ir_error(IR_NOLOC, "calibration: attention measured at more than %d head dims",
                         PASS_ATTN_DIMS);
                return false;
            }
            d = gpu->attn_dims++;
            gpu->attn_dim[d] = a->D;
            memset(&gpu->attn_fwd[d], 0, sizeof gpu->attn_fwd[d]);
            memset(&gpu->attn_bwd[d], 0, sizeof gpu->attn_bwd[d]);
        }
        PassCurve *c = a->bwd ? &gpu->attn_bwd[d] : &gpu->attn_fwd[d];
        if (c->n == PASS_CURVE_MAX) {
            ir_error(IR_NOLOC, "calibration: attention measured at more than %d lengths",
                     PASS_CURVE_MAX);
            return false;
        }
        int j = c->n++;
        while (j > 0 && c->x[j - 1] > a->S) {
            c->x[j] = c->x[j - 1], c->y[j] = c->y[j - 1];
            j--;
        }
        c->x[j] = a->S, c->y[j] = attn_flops(a) / a->s;
    }
    double *pred = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    double *meas = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        const CalAttn *a = &r->attn.v[i];
        double rate = pass_attn_rate(gpu, a->bwd, a->D, a->S);
        pred[i] = attn_flops(a) / rate;
        meas[i] = a->s;
    }
    quality(q, pred, meas, n);
    free(pred), free(meas);
    return true;
}

/* ----------------------------------------------------------- collectives */
/* t = alpha + beta S minimising sum ((t_i - t)/t_i)^2: weighted least
 * squares with weights 1/t_i^2, alpha and beta kept >= 0. */
static void line_fit(const double *S, const double *t, int n, double *alpha, double *beta)
{
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double w = 1 / (t[i] * t[i]);
        sw += w, sx += w * S[i], sy += w * t[i], sxx += w * S[i] * S[i], sxy += w * S[i] * t[i];
    }
    double det = sw * sxx - sx * sx;
    double b = det != 0 ? (sw * sxy - sx * sy) / det : 0;
    double a = (sy - b * sx) / sw;
    if (b <= 0) { /* no measurable bandwidth term: all latency */
        b = 1e-15;
        a = sy / sw;
    }
    if (a < 0) { /* latency below zero: refit the slope through the origin */
        a = 0;
        b = sxy / sxx;
    }
    *alpha = a, *beta = b;
}

static double bus_factor(int kind, double n)
{
    switch (kind) {
    case CAL_ALLREDUCE: return 2 * (n - 1) / n;
    case CAL_SENDRECV: return 1;
    default: return (n - 1) / n;
    }
}

static const PlanCollKind coll_kind[CAL_NCOLL] = {
    [CAL_ALLREDUCE] = PLAN_COLL_ALLREDUCE, [CAL_REDUCESCATTER] = PLAN_COLL_REDUCESCATTER,
    [CAL_ALLGATHER] = PLAN_COLL_ALLGATHER, [CAL_ALLTOALL] = PLAN_COLL_ALLTOALL,
    [CAL_SENDRECV] = PLAN_COLL_SENDRECV,
};

static bool fit_coll(const CalRecords *r, PassGpu *gpu, CalQuality *q)
{
    int n = (int)r->coll.n;
    double *S = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    double *t = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    double *pred = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    double *meas = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    int np = 0;
    bool *used = ir_xcalloc((size_t)(n + 1), sizeof(bool));
    for (int i = 0; i < n; i++) {
        if (used[i])
            continue;
        const CalColl *c0 = &r->coll.v[i];
        int k = 0;
        for (int j = i; j < n; j++) {
            const CalColl *c = &r->coll.v[j];
            if (c->kind == c0->kind && c->group == c0->group && c->nodes == c0->nodes &&
                c->rpn == c0->rpn) {
                used[j] = true;
                S[k] = c->bytes, t[k] = c->s;
                k++;
            }
        }
        int pk = coll_kind[c0->kind];
        if (gpu->ncoll[pk] == PASS_COLL_FITS) {
            ir_error(IR_NOLOC, "calibration: more than %d group shapes of %s", PASS_COLL_FITS,
                     cal_coll_names[c0->kind]);
            free(S), free(t), free(pred), free(meas), free(used);
            return false;
        }
        double alpha, beta;
        line_fit(S, t, k, &alpha, &beta);
        PassCollFit *f = &gpu->coll[pk][gpu->ncoll[pk]++];
        f->group = c0->group;
        /* Across hosts is across the network, but for hosts of one NVLink
         * domain (NVL72 trays: the few a calibration runs on sit in one rack). */
        f->net = c0->nodes > 1 && !(gpu->kind == PASS_DEV_GPU && gpu->domain_gpus > 0 &&
                                   c0->nodes * gpu->host_gpus <= gpu->domain_gpus);
        f->rpn = c0->rpn;
        f->alpha_s = alpha;
        f->busbw = bus_factor(c0->kind, c0->group) / beta;
        for (int j = 0; j < k; j++) {
            pred[np] = alpha + beta * S[j];
            meas[np++] = t[j];
        }
    }
    quality(q, pred, meas, np);
    free(S), free(t), free(pred), free(meas), free(used);
    return true;
}

/* ---------------------------------------------------- a rank on its own */
/* A CPU rank alone on its node, with all its cores: the same fits on the
 * solo records, its GEMMs spread over `cores` threads. */
static bool fit_solo(const CalRecords *solo, int cores, PassGpu *gpu, CalQuality *q)
{
    PassGpu g = *gpu;
    g.sms = cores;
    CalQuality qk, qa;
    if (!fit_gemm(solo, &g, q) || !fit_kernels(solo, &g, &qk) || !fit_attention(solo, &g, &qa))
        return false;
    pass_rates_get(&g, &gpu->solo);
    gpu->has_solo = true;
    return true;
}

bool cal_fit(const CalInput *in, PassCluster *out, CalReport *rep)
{
    memset(rep, 0, sizeof *rep);
    const CalRecords *r = in->full;
    PassGpu *gpu = &out->gpu;
    bool cpu = !strcmp(r->backend, "cpu");
    gpu->kind = cpu ? PASS_DEV_CPU : PASS_DEV_GPU;
    gpu->act_bytes = r->act_bytes;
    double datasheet_peak = gpu->peak_flops;
    if (!fit_gemm(r, gpu, &rep->gemm) || !fit_kernels(r, gpu, &rep->kern) ||
        !fit_attention(r, gpu, &rep->attn))
        return false;
    if (!cpu) {
        /* A GPU keeps its datasheet peak (MFU's denominator); the fit says
         * what fraction of it large GEMMs sustain. */
        gpu->gemm_eff = fmin(1, gpu->peak_flops / datasheet_peak);
        gpu->peak_flops = datasheet_peak;
        /* Hosts and NVLink domain: not measurable from a few ranks; the
         * system the preset describes (NVL72: hosts of 4, a domain of 72),
         * set so that the file keeps them (a file has no preset's defaults). */
        if (gpu->domain_gpus > 0)
            out->gpus_per_node = gpu->host_gpus, out->nvlink_domain = gpu->domain_gpus;
    } else {
        /* A CPU's peak is what its cores sustain on large GEMMs (one rank per
         * core, all busy); its memory rate is the fastest any kernel moved
         * bytes (a bound the planner's pruning relies on, caches included). */
        double top = 0;
        for (int k = 0; k < PASS_NKERN; k++)
            for (int i = 0; i < gpu->kern[k].n; i++)
                top = fmax(top, gpu->kern[k].y[i]);
        if (top > 0)
            gpu->hbm_bw = top, gpu->hbm_eff = 1;
        gpu->sms = 1;
        snprintf(gpu->name, sizeof gpu->name, "%.24s-cpu", r->host);
    }
    memset(gpu->ncoll, 0, sizeof gpu->ncoll);
    for (int i = 0; i < 2; i++) {
        CalQuality q;
        if (in->comm[i] && in->comm[i]->coll.n > 0) {
            if (!fit_coll(in->comm[i], gpu, &q))
                return false;
            if (q.n > 0) { /* the two runs' errors together */
                rep->coll.median_err = rep->coll.n ? fmax(rep->coll.median_err, q.median_err) : q.median_err;
                rep->coll.max_err = fmax(rep->coll.max_err, q.max_err);
                rep->coll.n += q.n;
            }
        }
    }
    if (cpu) {
        gpu->cores = in->cores;
        gpu->core_share = 0;
        /* The share a waiting rank leaves that the busy ones gain: 0 as the
         * time slices (C / R of a core each) assume, 1 processor sharing
         * (the busy split the cores). Half the ranks busy, R = 2C: t_half /
         * t_all = 1 - gain (1 - C / R). */
        const CalRecords *sr = in->comm[1];
        if (sr && sr->share_ranks > sr->share_cpus) {
            double c = (double)sr->share_cpus / sr->share_ranks;
            double gain = (1 - sr->share_half_s / sr->share_all_s) / (1 - c);
            gpu->core_share = fmin(1, fmax(0, gain));
        }
        /* The wait at a collective in pairs: one rank per core, and more
         * ranks than cores (a measured fraction below 0 is noise: none). */
        gpu->sync_gemm = gpu->sync_mem = gpu->sync_gemm_shared = gpu->sync_mem_shared = 0;
        for (int i = 0; i < 2; i++) {
            const CalRecords *r = in->comm[i];
            if (!r || !r->has_sync)
                continue;
            bool shared = r->ranks > in->cores;
            *(shared ? &gpu->sync_gemm_shared : &gpu->sync_gemm) = fmin(1, fmax(0, r->sync[0]));
            *(shared ? &gpu->sync_mem_shared : &gpu->sync_mem) = fmin(1, fmax(0, r->sync[1]));
        }
        gpu->has_solo = false;
        if (in->solo && !fit_solo(in->solo, in->cores, gpu, &rep->solo))
            return false;
    }
    if (in->memory) {
        gpu->runtime_bytes = in->memory->mem_base;
        gpu->comm_bytes = in->memory->mem_comm;
        if (in->memory->host_seq > 0) /* tokens and targets: two loads per sequence */
            gpu->host_token_s = in->memory->host_seq_s / (2 * in->memory->host_seq);
    }
    return true;
}

void cal_print_summary(FILE *f, const CalInput *in, const PassCluster *cl, const CalReport *rep)
{
    const PassGpu *g = &cl->gpu;
    fprintf(f, "\ncalibration of %s (%s backend, %d rank%s measured together)\n", in->full->host,
            in->full->backend, in->full->ranks, in->full->ranks == 1 ? "" : "s");
    fprintf(f, "  %-12s %5s  %11s  %9s  %s\n", "part", "points", "median err", "max err", "fitted");
    fprintf(f, "  %-12s %5d  %10.1f%%  %8.1f%%  %.1f GFLOP/s sustained, tiles %gx%gx%g, "
               "K half-rate %.0f, M/N half-rate %.0f, misaligned x%.2f, %.1f us per call\n",
            "GEMM", rep->gemm.n, 100 * rep->gemm.median_err, 100 * rep->gemm.max_err,
            g->peak_flops * g->gemm_eff * 1e-9, g->gemm_tile_m, g->gemm_tile_n, g->gemm_tile_k,
            g->gemm_k_half, g->gemm_mn_half, g->gemm_misalign, g->gemm_overhead_s * 1e6);
    fprintf(f, "  %-12s %5d  %10.1f%%  %8.1f%%  rate by bytes moved, per runtime kernel\n",
            "kernels", rep->kern.n, 100 * rep->kern.median_err, 100 * rep->kern.max_err);
    fprintf(f, "  %-12s %5d  %10.1f%%  %8.1f%%  FLOP/s by head dim and length\n", "attention",
            rep->attn.n, 100 * rep->attn.median_err, 100 * rep->attn.max_err);
    if (rep->coll.n)
        fprintf(f, "  %-12s %5d  %10.1f%%  %8.1f%%  latency + size / bus bandwidth per kind and group\n",
                "collectives", rep->coll.n, 100 * rep->coll.median_err, 100 * rep->coll.max_err);
    for (int d = 0; d < g->attn_dims; d++) {
        const PassCurve *a = &g->attn_fwd[d], *b = &g->attn_bwd[d];
        fprintf(f, "  attention D=%-4g fwd %.2f-%.2f, bwd %.2f-%.2f GFLOP/s over S %g-%g\n",
                g->attn_dim[d], a->n ? a->y[0] * 1e-9 : 0, a->n ? a->y[a->n - 1] * 1e-9 : 0,
                b->n ? b->y[0] * 1e-9 : 0, b->n ? b->y[b->n - 1] * 1e-9 : 0, a->n ? a->x[0] : 0,
                a->n ? a->x[a->n - 1] : 0);
    }
    for (int k = 0; k < CAL_NCOLL; k++)
        for (int i = 0; i < g->ncoll[coll_kind[k]]; i++) {
            const PassCollFit *c = &g->coll[coll_kind[k]][i];
            fprintf(f, "  %-15s group %-3d%s %8.1f us + %7.2f GB/s bus bandwidth (%d ranks per node)\n",
                    cal_coll_names[k], c->group, c->net ? " (across nodes)" : "",
                    c->alpha_s * 1e6, c->busbw * 1e-9, c->rpn);
        }
    if (g->kind == PASS_DEV_CPU && g->has_solo) {
        /* How much a rank gains with the node to itself, at mid sizes. */
        const PassRates *s = &g->solo;
        double kb = 4e6, ka = 0, kn = 0;
        for (int k = 0; k < PASS_NKERN; k++)
            if (g->kern[k].n && s->kern[k].n) {
                ka += pass_curve_at(&s->kern[k], kb) / pass_curve_at(&g->kern[k], kb);
                kn++;
            }
        fprintf(f, "  one rank alone with %d cores: GEMM %.1f GFLOP/s (%.2fx), kernels %.2fx at 4 MB "
                   "(fit: median %.1f%%, max %.1f%% over %d GEMMs)\n",
                in->cores, s->peak_flops * s->gemm_eff * 1e-9,
                s->peak_flops * s->gemm_eff / (g->peak_flops * g->gemm_eff), kn ? ka / kn : 1,
                100 * rep->solo.median_err, 100 * rep->solo.max_err, rep->solo.n);
    }
    const CalRecords *sr = in->comm[1];
    if (g->kind == PASS_DEV_CPU && sr && sr->share_ranks)
        fprintf(f, "  %d ranks on %d cores: all computing %.1f ms, half %.1f ms while the others wait: "
                   "core_share %.2f (0: time slices, 1: the busy ranks take the waiting ones' share)\n",
                sr->share_ranks, sr->share_cpus, sr->share_all_s * 1e3, sr->share_half_s * 1e3,
                g->core_share);
    if (g->kind == PASS_DEV_CPU && (g->sync_gemm > 0 || g->sync_mem > 0 || g->sync_gemm_shared > 0 ||
                                    g->sync_mem_shared > 0))
        fprintf(f, "  collectives in pairs: waiting for the later rank %.1f%% of the GEMM and %.1f%% of the "
                   "other work between two (%.1f%% and %.1f%% with more ranks than cores)\n",
                100 * g->sync_gemm, 100 * g->sync_mem, 100 * g->sync_gemm_shared, 100 * g->sync_mem_shared);
    if (in->memory)
        fprintf(f, "  memory: %.1f MiB per rank after start-up, %.1f MiB per communicator\n",
                g->runtime_bytes / 1048576.0, g->comm_bytes / 1048576.0);
}
