/* attention.c: scaled dot-product attention with grouped-query heads, causal
 * masks and sliding windows, blocked for the vector units and threaded.
 *
 * Layout of the work. The forward's tasks are (batch, query head), the
 * backward's (batch, kv head). A task packs its kv head's K and V (K and V
 * transposed for the score tiles, rows padded to Dp = D rounded up to 16
 * floats), then runs its query heads over blocks of QB query rows. For a
 * block, scores against tiles of KB keys go to a QB x S scratch (nothing
 * S x S), but only the tiles some row of the block can see: with a causal
 * mask the tiles after the block's last row are never computed, with a
 * window the tiles before its first row's window are skipped too. Inside the
 * computed tiles, masked scores get probability 0.
 *
 * The forward is the two-pass softmax of each row (max, then exponentials
 * summed in double), o = P V / sum, lse = max + log(sum). The backward
 * recomputes P = exp(s - lse) per block, dP = dO V^T, dS = P (dP - D_i)
 * scale with D_i = dO_i . O_i, dQ = dS K, dK += dS^T Q, dV += P^T dO.
 *
 * Instruction sets. The register tiles are written once
 * (attention_kern.h) and compiled for AVX-512, AVX2 and SSE2 with tile
 * shapes that fit each set's registers; the widest the CPU runs is picked
 * at the first call.
 *
 * Determinism. A backward task owns its rows of dk and dv (every query head
 * of the group reads one kv head), so they accumulate in a fixed order
 * (query head, then query row, ascending) and tasks run on any thread:
 * results do not depend on the thread count. The dot products sum over d in
 * order in each lane. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "simd.h"

enum {
    KB = 32, /* keys per tile (masking and skipping granularity) */
    QB = 16, /* query rows per block */
    DV = 16, /* head dims are padded to a multiple of this (the widest vector) */
};

static int64_t group(int64_t H, int64_t KVH, const char *what)
{
    if (KVH < 1 || H % KVH)
        rt_fatal("%s: %lld query heads do not group onto %lld kv heads", what, (long long)H,
                 (long long)KVH);
    return H / KVH;
}

static void check_window(int64_t window, bool causal, const char *what)
{
    if (window < 0)
        rt_fatal("%s: window %lld is negative", what, (long long)window);
    if (window > 0 && !causal)
        rt_fatal("%s: a sliding window (%lld) needs causal attention", what, (long long)window);
}

static int64_t round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

/* Per-thread scratch (rtcpu_scratch slot 0), floats. */
typedef struct {
    int64_t S, Sp, D, Dp;
    int64_t ld;        /* row length of kt, vt, sc, dsc: Sp + 16 */
    float *kt, *vt;    /* [Dp][ld] K^T, V^T of the task's kv head */
    float *kp, *vp;    /* [Sp][Dp] K, V rows */
    float *dkp, *dvp;  /* [Sp][Dp] dK, dV of the task (backward) */
    float *qp, *gp;    /* [QB][Dp] the block's Q and dO rows */
    float *acc;        /* [QB][Dp] o or dq of the block */
    float *sc, *dsc;   /* [QB][ld] scores / P, and dP / dS */
    double *sum;       /* [QB] */
    float *rowv;       /* [QB] lse or D_i */
} Scratch;

static void scratch_init(Scratch *w, int64_t S, int64_t D, bool bwd)
{
    memset(w, 0, sizeof *w);
    w->S = S, w->D = D, w->Sp = round_up(S, KB), w->Dp = round_up(D, DV);
    /* Rows of a power-of-two length would map onto few L1 sets (the score
     * tiles read 64 rows of kt at once): 16 floats more make it odd. */
    w->ld = w->Sp + 16;
    size_t st = (size_t)(w->ld * w->Dp), sd = (size_t)(w->Sp * w->Dp);
    size_t qd = (size_t)(QB * w->Dp), qs = (size_t)(QB * w->ld);
    size_t n = st + sd + (bwd ? st + 3 * sd : 0) + 3 * qd + 2 * qs + 3 * QB;
    double *sum = rtcpu_scratch(0, n * sizeof(float));
    float *p = (float *)(sum + QB);
    w->sum = sum;
    w->kt = p, p += st;
    w->vp = p, p += sd;
    if (bwd) {
        w->vt = p, p += st;
        w->kp = p, p += sd;
        w->dkp = p, p += sd;
        w->dvp = p, p += sd;
    }
    w->qp = p, p += qd;
    w->gp = p, p += qd;
    w->acc = p, p += qd;
    w->sc = p, p += qs;
    w->dsc = p, p += qs;
    w->rowv = p;
}

/* Rows [0, S) of x (row stride ld, D used) into t [Dp][w->ld] transposed
 * and/or r [Sp][Dp]; padding up to Sp and Dp zero. */
static void pack_kv(float *t, float *r, const rt_act *x, int64_t ld, const Scratch *w)
{
    int64_t S = w->S, Sp = w->Sp, D = w->D, Dp = w->Dp, lt = w->ld;
    if (t) { /* blocks of 16 rows: 16 contiguous stores per d, reads in L1 */
        for (int64_t j0 = 0; j0 < S; j0 += 16) {
            int64_t nj = S - j0 < 16 ? S - j0 : 16;
            for (int64_t d = 0; d < D; d++)
                for (int64_t j = 0; j < nj; j++)
                    t[d * lt + j0 + j] = x[(j0 + j) * ld + d];
        }
        for (int64_t d = 0; d < Dp; d++)
            memset(t + d * lt + (d < D ? S : 0), 0, (size_t)(d < D ? Sp - S : Sp) * sizeof *t);
    }
    if (r) {
        for (int64_t j = 0; j < S; j++) {
            memcpy(r + j * Dp, x + j * ld, (size_t)D * sizeof *r);
            memset(r + j * Dp + D, 0, (size_t)(Dp - D) * sizeof *r);
        }
        memset(r + S * Dp, 0, (size_t)((Sp - S) * Dp) * sizeof *r);
    }
}

/* nr rows of x (stride ld) into p [QB][Dp], the rest zero. */
static void pack_rows(float *p, const rt_act *x, int64_t ld, int64_t nr, const Scratch *w)
{
    int64_t D = w->D, Dp = w->Dp;
    for (int64_t r = 0; r < nr; r++) {
        memcpy(p + r * Dp, x + r * ld, (size_t)D * sizeof *p);
        memset(p + r * Dp + D, 0, (size_t)(Dp - D) * sizeof *p);
    }
    memset(p + nr * Dp, 0, (size_t)((QB - nr) * Dp) * sizeof *p);
}

/* The key tiles [*k0, *k1) some row of [i0, i1) sees. */
static void key_tiles(int64_t i0, int64_t i1, int64_t S, bool causal, int64_t window, int64_t *k0,
                      int64_t *k1)
{
    int64_t lo = window > 0 && i0 - window + 1 > 0 ? i0 - window + 1 : 0;
    *k0 = lo / KB * KB;
    *k1 = round_up(causal ? i1 : S, KB);
}

/* Row i's visible keys [key_lo, key_hi). */
static inline int64_t key_lo(int64_t i, int64_t window)
{
    return window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
}

static inline int64_t key_hi(int64_t i, int64_t S, bool causal)
{
    return causal ? i + 1 : S;
}

/* Zero the masked parts [k0, jlo) and [jhi, k1) of a computed row. */
static inline void mask(float *row, int64_t k0, int64_t jlo, int64_t jhi, int64_t k1)
{
    memset(row + k0, 0, (size_t)(jlo - k0) * sizeof *row);
    memset(row + jhi, 0, (size_t)(k1 - jhi) * sizeof *row);
}

/* The vector kernels, once per instruction set (attention_kern.h). */
#define AK(n) n##_base
#define AK_V 4
#define AK_SR 4
#define AK_NV 2
#include "attention_kern.h"
#undef AK
#undef AK_V
#undef AK_SR
#undef AK_NV
#if RTCPU_X86_GCC
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#define AK(n) n##_v3
#define AK_V 8
#define AK_SR 4
#define AK_NV 2
#include "attention_kern.h"
#undef AK
#undef AK_V
#undef AK_SR
#undef AK_NV
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#define AK(n) n##_v4
#define AK_V 16
#define AK_SR 8
#define AK_NV 4
#include "attention_kern.h"
#undef AK
#undef AK_V
#undef AK_SR
#undef AK_NV
#pragma GCC pop_options
#endif

typedef void FwdHeads(rt_act *, float *, const rt_act *, int64_t, int64_t, int64_t, int64_t, bool,
                      int64_t, float, Scratch *);
typedef void BwdHeads(rt_act *, const rt_act *, const rt_act *, const float *, const rt_act *,
                      int64_t, int64_t, int64_t, int64_t, bool, int64_t, float, Scratch *);

/* The widest set this CPU runs (checked once; like an ifunc resolver).
 * PTDRT_ISA=sse2|avx2 caps it, so tests run every set on one machine. */
static int isa(void)
{
#if RTCPU_X86_GCC
    static int level = -1;
    if (level < 0) {
        __builtin_cpu_init();
        level = __builtin_cpu_supports("x86-64-v4") ? 4 : __builtin_cpu_supports("x86-64-v3") ? 3 : 0;
        const char *cap = getenv("PTDRT_ISA");
        if (cap && !strcmp(cap, "sse2"))
            level = 0;
        else if (cap && !strcmp(cap, "avx2") && level > 3)
            level = 3;
    }
    return level;
#else
    return 0;
#endif
}

static FwdHeads *fwd_heads(void)
{
#if RTCPU_X86_GCC
    if (isa() == 4)
        return fwd_heads_v4;
    if (isa() == 3)
        return fwd_heads_v3;
#endif
    return fwd_heads_base;
}

static BwdHeads *bwd_heads(void)
{
#if RTCPU_X86_GCC
    if (isa() == 4)
        return bwd_heads_v4;
    if (isa() == 3)
        return bwd_heads_v3;
#endif
    return bwd_heads_base;
}

void rt_attention_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                      int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                      int64_t window)
{
    int64_t g = group(H, KVH, "rt_attention_fwd");
    check_window(window, causal, "rt_attention_fwd");
    if (B <= 0 || S <= 0 || H <= 0 || D <= 0)
        return;
    float scale = (float)(1.0 / sqrt((double)D));
    FwdHeads *run = fwd_heads();
    int64_t ntask = B * H; /* (b, h): K and V packed for each query head */
    RTCPU_PRAGMA(omp parallel if (B * H * S * S * D >= RTCPU_PAR_MIN))
    {
        Scratch w;
        scratch_init(&w, S, D, false);
        RTCPU_PRAGMA(omp for schedule(dynamic, 1))
        for (int64_t t = 0; t < ntask; t++) {
            int64_t b = t / H, h = t % H, kh = h / g;
            pack_kv(w.kt, NULL, k + (b * S * KVH + kh) * D, KVH * D, &w);
            pack_kv(NULL, w.vp, v + (b * S * KVH + kh) * D, KVH * D, &w);
            run(o, lse, q, b, h, h + 1, H, causal, window, scale, &w);
        }
    }
}

void rt_attention_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                      const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                      int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                      int64_t window)
{
    int64_t g = group(H, KVH, "rt_attention_bwd");
    check_window(window, causal, "rt_attention_bwd");
    if (B <= 0 || S <= 0 || H <= 0 || D <= 0)
        return;
    float scale = (float)(1.0 / sqrt((double)D));
    BwdHeads *run = bwd_heads();
    int64_t ntask = B * KVH; /* (b, kv head): owns its rows of dk and dv */
    RTCPU_PRAGMA(omp parallel if (B * H * S * S * D >= RTCPU_PAR_MIN))
    {
        Scratch w;
        scratch_init(&w, S, D, true);
        RTCPU_PRAGMA(omp for schedule(dynamic, 1))
        for (int64_t t = 0; t < ntask; t++) {
            int64_t b = t / KVH, kh = t % KVH;
            const rt_act *kb = k + (b * S * KVH + kh) * D, *vb = v + (b * S * KVH + kh) * D;
            pack_kv(w.kt, w.kp, kb, KVH * D, &w);
            pack_kv(w.vt, NULL, vb, KVH * D, &w);
            memset(w.dkp, 0, (size_t)(w.Sp * w.Dp) * sizeof *w.dkp);
            memset(w.dvp, 0, (size_t)(w.Sp * w.Dp) * sizeof *w.dvp);
            run(dq, q, o, lse, dout, b, kh, g, H, causal, window, scale, &w);
            for (int64_t j = 0; j < S; j++) {
                memcpy(dk + ((b * S + j) * KVH + kh) * D, w.dkp + j * w.Dp, (size_t)D * sizeof *dk);
                memcpy(dv + ((b * S + j) * KVH + kh) * D, w.dvp + j * w.Dp, (size_t)D * sizeof *dv);
            }
        }
    }
}
