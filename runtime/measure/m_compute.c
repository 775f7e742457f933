/* m_compute.c: the runtime's kernels on one rank, every rank of the launch
 * running them at once (so ranks sharing a node share its cores and memory
 * bandwidth as a plan's ranks would).
 *
 * Records (sizes in elements; seconds per call):
 *   gemm M N K TA TB SECONDS          rt_matmul, C[M,N] = op(A) op(B)
 *   kern NAME ROWS COLS SECONDS       a memory-bound kernel on ROWS x COLS
 *   attn fwd|bwd B S H KVH D CAUSAL SECONDS
 * Shapes cover what the cost model prices: transformer GEMMs from 64 to
 * 2048 wide, small and large K, dims that are not multiples of 8, the
 * transposes backward uses; kernels from cache-resident to DRAM-sized. */
#include "measure.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ gemm */
typedef struct {
    rt_act *a, *b, *c;
    int64_t pool; /* elements of each of a, b, c */
    int64_t M, N, K;
    bool ta, tb;
    int64_t call;
} GemmArg;

/* The operand of n elements for the call-th call: consecutive calls read and
 * write other addresses of a pool twice the largest operand, 64-element
 * aligned. In a training step one input of a GEMM was just written by the
 * kernel before it (an activation, an incoming gradient: in cache) and the
 * other comes from memory (the layer's weights, or an activation saved in
 * the forward pass), and the output is a buffer not touched since the last
 * step; so A stays put and B and C move. Repeating one GEMM on the same
 * buffers, as this did before, made small GEMMs (1024 x 64..256 x 128..256)
 * 10-30% faster than moving all three on this project's 2-core VM
 * (docs/cost-model.md). */
static rt_act *rotate(rt_act *base, int64_t pool, int64_t n, int64_t call)
{
    int64_t step = (n + 63) / 64 * 64, span = pool - step;
    if (span <= 0)
        return base;
    return base + (call * step) % span / 64 * 64;
}

static void run_gemm(void *p)
{
    GemmArg *g = (GemmArg *)p;
    int64_t call = g->call++;
    rt_matmul(rotate(g->c, g->pool, g->M * g->N, call), g->a, rotate(g->b, g->pool, g->K * g->N, call), g->M,
              g->N, g->K, g->ta, g->tb, false);
}

void cal_measure_gemm(const CalOpts *o)
{
    /* A core and a GPU saturate three decades apart: each backend gets the
     * grid that spans its own curve (to the plateau, where the fit's
     * sustained rate is read), with the same probes at its scale. */
    static const int64_t grid_cpu[] = {128, 512, 2048}, kgrid_cpu[] = {64, 256, 1024};
    static const int64_t grid_gpu[] = {512, 2048, 8192}, kgrid_gpu[] = {256, 1024, 4096};
    const int64_t *grid = o->gpu ? grid_gpu : grid_cpu, *kgrid = o->gpu ? kgrid_gpu : kgrid_cpu;
    /* M N K ta tb: small K, large K (weight gradients contract over tokens),
     * misaligned dims, and the transposes of dA = dC B^T and dB = A^T dC. */
    static const int64_t extra_cpu[][5] = {
        {1024, 1024, 16, 0, 0},  {1024, 1024, 32, 0, 0},  {256, 256, 4096, 0, 0},
        {512, 512, 8192, 1, 0},  {1000, 1000, 1000, 0, 0}, {510, 770, 250, 0, 0},
        {2047, 511, 255, 0, 0},  {512, 512, 512, 0, 1},   {512, 512, 512, 1, 0},
        {2048, 512, 256, 0, 1},  {256, 2048, 2048, 1, 0}, {64, 64, 64, 0, 0},
        {32, 32, 32, 0, 0},      {4096, 256, 256, 0, 0},  {256, 4096, 256, 0, 1},
    };
    static const int64_t extra_gpu[][5] = {
        {8192, 8192, 16, 0, 0},    {8192, 8192, 64, 0, 0},    {1024, 1024, 16384, 0, 0},
        {2048, 2048, 32768, 1, 0}, {4000, 4000, 4000, 0, 0},  {2046, 3070, 1002, 0, 0},
        {8191, 2047, 1023, 0, 0},  {4096, 4096, 4096, 0, 1},  {4096, 4096, 4096, 1, 0},
        {8192, 2048, 1024, 0, 1},  {1024, 8192, 8192, 1, 0},  {256, 256, 256, 0, 0},
        {128, 128, 128, 0, 0},     {16384, 1024, 1024, 0, 0}, {1024, 16384, 1024, 0, 1},
    };
    const int64_t(*extra)[5] = o->gpu ? extra_gpu : extra_cpu; /* both 15 probes */
    size_t nextra = sizeof extra_cpu / sizeof extra_cpu[0];
    /* The largest operand or result of any point. */
    int64_t maxe = grid[2] * (grid[2] > kgrid[2] ? grid[2] : kgrid[2]);
    for (size_t e = 0; e < nextra; e++)
        for (int x = 0; x < 3; x++)
            for (int y = x + 1; y < 3; y++)
                if (extra[e][x] * extra[e][y] > maxe)
                    maxe = extra[e][x] * extra[e][y];
    /* --quick skips the odd points and the largest ones. */
    const int64_t qcap = o->gpu ? (int64_t)1 << 36 : (int64_t)1 << 30;
    int64_t pool = 2 * maxe;
    rt_act *a = cal_act(pool, 0.5f), *b = cal_act(pool, 0.5f), *c = cal_act(pool, 0.f);
    /* The points, then three passes over them (the second in reverse
     * order), each point's time the median of its three: the VM had windows
     * of five consecutive points at half the rate, which a median of passes
     * seconds apart drops, where the fastest of them would predict the
     * machine at its best rather than as the programs will find it. */
    GemmArg pts[27 + 15];
    int np = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                if (!(o->quick && ((i + j + k) % 2 || grid[i] * grid[j] * kgrid[k] > qcap)))
                    pts[np++] = (GemmArg){a, b, c, pool, grid[i], grid[j], kgrid[k], false, false, 0};
    for (size_t e = 0; e < nextra; e++)
        if (!(o->quick && (e % 2 || extra[e][0] * extra[e][1] * extra[e][2] > qcap)))
            pts[np++] = (GemmArg){a,           b,           c,           pool, extra[e][0],
                                  extra[e][1], extra[e][2], extra[e][3] != 0, extra[e][4] != 0, 0};
    enum { PASSES = 3 };
    double ts[27 + 15][PASSES], best[27 + 15];
    for (int pass = 0; pass < PASSES; pass++)
        for (int q = 0; q < np; q++) {
            int i = pass % 2 ? np - 1 - q : q;
            GemmArg *g = &pts[i];
            double t = ts[i][pass] = cal_time(o, rt_comm_world(), run_gemm, g);
            cal_progress(o, "gemm %2d/%d  %5lld x %5lld x %5lld%s%s  %8.2f GFLOP/s", pass * np + q + 1,
                         PASSES * np, (long long)g->M, (long long)g->N, (long long)g->K, g->ta ? " A^T" : "",
                         g->tb ? " B^T" : "", 2.0 * (double)g->M * (double)g->N * (double)g->K / t * 1e-9);
        }
    for (int i = 0; i < np; i++)
        best[i] = cal_median(ts[i], PASSES);
    for (int i = 0; i < np; i++)
        cal_out(o, CAL_FMT_GEMM, (long long)pts[i].M, (long long)pts[i].N,
                (long long)pts[i].K, (int)pts[i].ta, (int)pts[i].tb, best[i]);
    rt_free(a);
    rt_free(b);
    rt_free(c);
}

/* --------------------------------------------------------------- kernels */
/* Name (as the record prints it) and the width of a row: the norm's hidden
 * size, the vocabulary, the rotary dim. */
#define CAL_KERNELS(X)                                                                        \
    X(RMSNORM_FWD, "rmsnorm_fwd", 512)                                                        \
    X(RMSNORM_BWD, "rmsnorm_bwd", 512)                                                        \
    X(ADD_RMSNORM_FWD, "add_rmsnorm_fwd", 512)                                                \
    X(LAYERNORM_FWD, "layernorm_fwd", 512)                                                    \
    X(LAYERNORM_BWD, "layernorm_bwd", 512)                                                    \
    X(ADD_LAYERNORM_FWD, "add_layernorm_fwd", 512)                                            \
    X(SILU_FWD, "silu_fwd", 512)                                                              \
    X(SILU_BWD, "silu_bwd", 512)                                                              \
    X(GELU_FWD, "gelu_fwd", 512)                                                              \
    X(GELU_BWD, "gelu_bwd", 512)                                                              \
    X(SWIGLU_FWD, "swiglu_fwd", 512)                                                          \
    X(SWIGLU_BWD, "swiglu_bwd", 512)                                                          \
    X(ADD, "add", 512)                                                                        \
    X(ADD_BCAST, "add_bcast", 512)                                                            \
    X(MUL, "mul", 512)                                                                        \
    X(REDUCE_ROWS, "reduce_rows", 512)                                                        \
    X(SOFTMAX_FWD, "softmax_fwd", 512)                                                        \
    X(SOFTMAX_BWD, "softmax_bwd", 512)                                                        \
    X(ROPE, "rope", 64)                                                                       \
    X(EMBEDDING_FWD, "embedding_fwd", 512)                                                    \
    X(EMBEDDING_BWD, "embedding_bwd", 512)                                                    \
    X(CROSS_ENTROPY_FWD, "cross_entropy_fwd", 4096)                                           \
    X(CROSS_ENTROPY_BWD, "cross_entropy_bwd", 4096)                                           \
    X(ADAMW, "adamw", 512)                                                                    \
    X(SUMSQ, "sumsq", 512)                                                                    \
    X(COPY, "copy", 512)                                                                      \
    X(ZERO, "zero", 512)

enum {
#define X(id, name, cols) K_##id,
    CAL_KERNELS(X)
#undef X
    K_COUNT
};
static const char *const kname[K_COUNT] = {
#define X(id, name, cols) name,
    CAL_KERNELS(X)
#undef X
};
static const int64_t kcols[K_COUNT] = {
#define X(id, name, cols) cols,
    CAL_KERNELS(X)
#undef X
};

enum { EMB_ROWS = 4096 }; /* the embedding table's rows (its vocabulary) */

typedef struct {
    int id;
    int64_t rows, cols;
    rt_act *x, *y, *w, *b, *dy, *dx, *dw, *db;
    rt_grad *gw, *gb, *g; /* parameter gradients are fp32 (rt_grad) */
    float *f1, *f2, *f3, *loss;
    int32_t *ids;
} KernArg;

static void run_kernel(void *p)
{
    KernArg *k = (KernArg *)p;
    int64_t r = k->rows, c = k->cols, n = r * c;
    switch (k->id) {
    case K_RMSNORM_FWD: rt_rmsnorm_fwd(k->y, k->f1, k->x, k->w, r, c, 1e-5f); break;
    case K_RMSNORM_BWD: rt_rmsnorm_bwd(k->dx, k->gw, k->x, k->w, k->f1, k->dy, NULL, r, c); break;
    case K_ADD_RMSNORM_FWD: rt_add_rmsnorm_fwd(k->dx, k->y, k->f1, k->x, k->dy, k->w, r, c, 1e-5f); break;
    case K_LAYERNORM_FWD: rt_layernorm_fwd(k->y, k->f2, k->f1, k->x, k->w, k->b, r, c, 1e-5f); break;
    case K_ADD_LAYERNORM_FWD:
        rt_add_layernorm_fwd(k->dx, k->y, k->f2, k->f1, k->x, k->dy, k->w, k->b, r, c, 1e-5f);
        break;
    case K_LAYERNORM_BWD:
        rt_layernorm_bwd(k->dx, k->gw, k->gb, k->x, k->w, k->f2, k->f1, k->dy, NULL, r, c);
        break;
    case K_SILU_FWD: rt_silu_fwd(k->y, k->x, n); break;
    case K_SILU_BWD: rt_silu_bwd(k->dx, k->x, k->dy, n); break;
    case K_GELU_FWD: rt_gelu_fwd(k->y, k->x, n); break;
    case K_GELU_BWD: rt_gelu_bwd(k->dx, k->x, k->dy, n); break;
    case K_SWIGLU_FWD: rt_swiglu_fwd(k->y, k->x, k->w, n); break;
    case K_SWIGLU_BWD: rt_swiglu_bwd(k->dx, k->dw, k->x, k->w, k->dy, n); break;
    case K_ADD: rt_add(k->y, k->x, k->dy, n, n); break;
    case K_ADD_BCAST: rt_add(k->y, k->x, k->w, n, c); break;
    case K_MUL: rt_mul(k->y, k->x, k->dy, n, n); break;
    case K_REDUCE_ROWS: rt_reduce_rows(k->dw, k->dy, r, c, true); break;
    case K_SOFTMAX_FWD: rt_softmax_fwd(k->y, k->x, r, c); break;
    case K_SOFTMAX_BWD: rt_softmax_bwd(k->dx, k->y, k->dy, r, c); break;
    case K_ROPE:
        /* Rows as a training step has them: 32 (4 sequences x 8 heads) at
         * each position, which share its angles (computed once per position
         * and pair); one row per position measured the trigonometry, 10x
         * slower per byte than the programs' calls on the 2-core VM. */
        if (r >= 32 && r % 32 == 0)
            rt_rope(k->y, k->x, 4, r / 32, 8, c, 0, 10000.f, false);
        else
            rt_rope(k->y, k->x, 1, r, 1, c, 0, 10000.f, false);
        break;
    case K_EMBEDDING_FWD: rt_embedding_fwd(k->y, k->ids, k->w, r, EMB_ROWS, 0, c); break;
    case K_EMBEDDING_BWD: rt_embedding_bwd(k->gw, k->ids, k->dy, r, EMB_ROWS, 0, c); break;
    case K_CROSS_ENTROPY_FWD:
        rt_cross_entropy_fwd(k->loss, k->f1, k->x, k->ids, r, c, 0, r, 1.0f, NULL);
        break;
    case K_CROSS_ENTROPY_BWD:
        rt_cross_entropy_bwd(k->dx, k->x, k->ids, k->f1, 1.0f, r, c, 0, r);
        break;
    case K_ADAMW:
        rt_adamw(k->f2, k->y, k->g, k->f1, k->f3, n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 3);
        break;
    case K_SUMSQ: rt_sumsq(k->loss, k->g, n); break;
    case K_COPY: rt_copy(k->y, k->x, (size_t)n * sizeof(rt_act)); break;
    case K_ZERO: rt_zero(k->y, (size_t)n * sizeof(rt_act)); break;
    default: rt_fatal("ptdc-measure: kernel %d", k->id);
    }
}

void cal_measure_kernels(const CalOpts *o)
{
    /* Total elements from L1/L2-resident to well beyond the last-level
     * cache: the model interpolates the rate by bytes moved. */
    static const int64_t sizes_cpu[] = {1 << 12, 1 << 15, 1 << 18, 1 << 21, 1 << 23};
    static const int64_t sizes_gpu[] = {1 << 15, 1 << 18, 1 << 21, 1 << 24, 1 << 26};
    const int64_t *sizes = o->gpu ? sizes_gpu : sizes_cpu;
    enum { NSIZES = 5 };
    int64_t maxn = sizes[NSIZES - 1];
    KernArg k;
    memset(&k, 0, sizeof k);
    k.x = cal_act(maxn, 1.f);
    k.y = cal_act(maxn, 1.f);
    k.dy = cal_act(maxn, 0.1f);
    k.dx = cal_act(maxn, 0.f);
    k.w = cal_act(maxn, 1.f); /* also the embedding table */
    k.b = cal_act(4096, 0.f);
    k.dw = cal_act(maxn, 0.f);
    k.db = cal_act(4096, 0.f);
    k.gw = cal_f32(maxn, 0.f);
    k.gb = cal_f32(4096, 0.f);
    k.g = cal_f32(maxn, 0.1f);
    k.f1 = cal_f32(maxn, 0.5f);  /* rstd / lse / AdamW m */
    k.f2 = cal_f32(maxn, 0.f);   /* mean / master */
    k.f3 = cal_f32(maxn, 1e-4f); /* AdamW v */
    k.loss = cal_f32(1, 0.f);
    k.ids = cal_ids(maxn, EMB_ROWS);
    for (int i = 0; i < K_COUNT; i++) {
        for (int s = 0; s < NSIZES; s++) {
            if (o->quick && s % 2)
                continue;
            k.id = i;
            k.cols = kcols[i];
            k.rows = sizes[s] / k.cols;
            if (k.rows < 1)
                continue;
            if (i == K_CROSS_ENTROPY_BWD) /* lse of these rows */
                rt_cross_entropy_fwd(k.loss, k.f1, k.x, k.ids, k.rows, k.cols, 0, k.rows, 1.0f, NULL);
            double t = cal_time(o, rt_comm_world(), run_kernel, &k);
            cal_out(o, CAL_FMT_KERN, kname[i], (long long)k.rows, (long long)k.cols, t);
            if (s == 3)
                cal_progress(o, "kernel %2d/%d  %-18s %8.2f Melem/s", i + 1, K_COUNT, kname[i],
                             (double)k.rows * (double)k.cols / t * 1e-6);
        }
    }
    rt_free(k.x), rt_free(k.y), rt_free(k.dy), rt_free(k.dx), rt_free(k.w), rt_free(k.b);
    rt_free(k.dw), rt_free(k.db), rt_free(k.f1), rt_free(k.f2), rt_free(k.f3), rt_free(k.loss);
    rt_free(k.ids), rt_free(k.gw), rt_free(k.gb), rt_free(k.g);
}

/* -------------------------------------------------------------- attention */
typedef struct {
    rt_act *q, *k, *v, *o, *dq, *dk, *dv, *dout;
    float *lse;
    int64_t B, S, H, KVH, D;
    bool causal, bwd;
} AttnArg;

static void run_attn(void *p)
{
    AttnArg *a = (AttnArg *)p;
    if (a->bwd)
        rt_attention_bwd(a->dq, a->dk, a->dv, a->q, a->k, a->v, a->o, a->lse, a->dout, a->B,
                         a->S, a->H, a->KVH, a->D, a->causal, 0);
    else
        rt_attention_fwd(a->o, a->lse, a->q, a->k, a->v, a->B, a->S, a->H, a->KVH, a->D,
                         a->causal, 0);
}

void cal_measure_attention(const CalOpts *o)
{
    static const int64_t dims[] = {32, 64, 128};
    static const int64_t seqs_cpu[] = {64, 128, 256, 512, 1024};
    static const int64_t seqs_gpu[] = {512, 1024, 2048, 4096, 8192};
    const int64_t *seqs = o->gpu ? seqs_gpu : seqs_cpu;
    /* CPU: about 2^20 score elements per head group, heads filling the rest.
     * GPU: FlashAttention-2's benchmark shapes, 16384 tokens per call and
     * heads x D = 2048, so the grid fills the device as in training. */
    int64_t maxe = o->gpu ? (int64_t)16384 * 2048 : (int64_t)1 << 22;
    AttnArg a;
    memset(&a, 0, sizeof a);
    a.q = cal_act(maxe, 1.f), a.k = cal_act(maxe, 1.f), a.v = cal_act(maxe, 1.f);
    a.o = cal_act(maxe, 0.f), a.dq = cal_act(maxe, 0.f), a.dk = cal_act(maxe, 0.f);
    a.dv = cal_act(maxe, 0.f), a.dout = cal_act(maxe, 0.1f);
    a.lse = cal_f32(maxe, 0.f);
    int n = 0;
    for (int di = 0; di < 3; di++)
        for (int si = 0; si < 5; si++) {
            if (o->quick && (si % 2 || di == 0))
                continue;
            a.B = 1, a.D = dims[di], a.S = seqs[si];
            a.H = ((int64_t)1 << 20) / (a.S * a.S);
            if (o->gpu)
                a.B = 16384 / a.S, a.H = 2048 / a.D;
            if (a.H < 2)
                a.H = 2;
            if (a.B * a.H * a.S * a.D > maxe)
                a.H = maxe / (a.B * a.S * a.D);
            a.KVH = a.H / 2; /* grouped-query, as LLaMA-2 70B and LLaMA-3 */
            a.causal = true;
            for (int bwd = 0; bwd < 2; bwd++) {
                a.bwd = bwd; /* backward reads o and lse from the forward timed just before */
                double t = cal_time(o, rt_comm_world(), run_attn, &a);
                cal_out(o, CAL_FMT_ATTN, bwd ? "bwd" : "fwd",
                        (long long)a.B, (long long)a.S, (long long)a.H, (long long)a.KVH,
                        (long long)a.D, (int)a.causal, t);
                double flops = 2.0 * (double)a.B * (double)a.H * (double)a.S * (double)a.S *
                               (double)a.D * (bwd ? 2.5 : 1);
                cal_progress(o, "attention %2d  %s D=%-3lld S=%-5lld %8.2f GFLOP/s", ++n,
                             bwd ? "bwd" : "fwd", (long long)a.D, (long long)a.S,
                             flops / t * 1e-9);
            }
        }
    rt_free(a.q), rt_free(a.k), rt_free(a.v), rt_free(a.o), rt_free(a.dq), rt_free(a.dk);
    rt_free(a.dv), rt_free(a.dout), rt_free(a.lse);
}
