/* attention.c: scaled dot-product attention with grouped-query heads, causal
 * masks and sliding windows, blocked for the vector units and threaded.
 *
 * Layout of the work. The forward's tasks are (batch, query head), the
 * backward's (batch, kv head). A task packs its kv head's K and V (K and V
 * transposed for the score tiles, rows padded to Dp = D rounded up to 16
 * floats), then runs its query heads over blocks of QB query rows. For a
 * block, scores against tiles of KB keys go to a QB x Sk scratch (nothing
 * Sq x Sk), but only the tiles some row of the block can see: with a causal
 * mask the tiles after the block's last row are never computed, with a
 * window the tiles before its first row's window are skipped too. Inside the
 * computed tiles, masked scores get probability 0.
 *
 * Positions. Every row sits at a position (rt_attention_pos_fwd: chunks of
 * consecutive positions, for context parallelism; rt_attention_fwd is the
 * one-chunk case, row i at position i). A key tile is computed for a block
 * iff the positions can meet: its smallest key position is at most the
 * block's largest query position and (window) its largest is within the
 * window of the block's smallest; computed tiles form runs. Each row's
 * visible keys are one interval per key chunk (adjacent ones merged: a
 * single interval with one chunk), so the softmax loops and the masks run
 * over intervals, exactly whatever the chunk size against the tiles; a
 * tile that straddles chunks is only computed more often than needed.
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

/* Where the rows sit: row i of a side at pos[i / chunk] + i % chunk; and
 * the mask on positions. */
typedef struct {
    int64_t chunk, nkc;         /* rows per chunk, key chunks */
    const int64_t *qpos, *kpos; /* each chunk's first position */
    bool causal;
    int64_t window;
} Pos;

static inline int64_t pos_of(const int64_t *pos, int64_t chunk, int64_t i)
{
    return pos[i / chunk] + i % chunk;
}

/* The smallest and largest position of rows [r0, r1) (r0 < r1). */
static void pos_range(const int64_t *pos, int64_t chunk, int64_t r0, int64_t r1, int64_t *mn,
                      int64_t *mx)
{
    *mn = INT64_MAX, *mx = INT64_MIN;
    for (int64_t c = r0 / chunk; c * chunk < r1; c++) {
        int64_t a = c * chunk > r0 ? c * chunk : r0, e = (c + 1) * chunk < r1 ? (c + 1) * chunk : r1;
        int64_t lo = pos[c] + a - c * chunk, hi = pos[c] + e - 1 - c * chunk;
        *mn = lo < *mn ? lo : *mn;
        *mx = hi > *mx ? hi : *mx;
    }
}

/* Some query at a position in [qmin, qmax] may see some key in [kmin, kmax]. */
static inline bool may_see(const Pos *P, int64_t qmin, int64_t qmax, int64_t kmin, int64_t kmax)
{
    return !P->causal || (kmin <= qmax && (P->window == 0 || qmin - kmax < P->window));
}

/* The keys a query at position p sees, as ascending disjoint intervals
 * [iv[2n], iv[2n + 1]) (one per key chunk at most, adjacent ones merged);
 * returns their number. */
static int row_keys(const Pos *P, int64_t p, int64_t *iv)
{
    int n = 0;
    int64_t C = P->chunk;
    for (int64_t c = 0; c < P->nkc; c++) {
        int64_t lo = 0, hi = C;
        if (P->causal) { /* key offsets t with t <= d (and d - t < window) */
            int64_t d = p - P->kpos[c];
            hi = d + 1 < C ? d + 1 : C;
            if (P->window > 0 && d - P->window + 1 > 0)
                lo = d - P->window + 1;
        }
        if (lo >= hi)
            continue;
        if (n && iv[2 * n - 1] == c * C + lo)
            iv[2 * n - 1] = c * C + hi;
        else
            iv[2 * n] = c * C + lo, iv[2 * n + 1] = c * C + hi, n++;
    }
    return n;
}

/* Per-thread scratch (rtcpu_scratch slot 0), floats. */
typedef struct {
    int64_t S, Sp, D, Dp; /* S: key rows */
    int64_t *kmin, *kmax; /* [Sp / KB] the key positions of each tile */
    int64_t *run;         /* [2 Sp / KB] the block's computed key runs */
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
    size_t nt = (size_t)(w->Sp / KB);
    size_t n = st + sd + (bwd ? st + 3 * sd : 0) + 3 * qd + 2 * qs + 3 * QB + 8 * nt;
    double *sum = rtcpu_scratch(0, n * sizeof(float));
    w->sum = sum;
    w->kmin = (int64_t *)(sum + QB);
    w->kmax = w->kmin + nt;
    w->run = w->kmax + nt;
    float *p = (float *)(w->run + 2 * nt);
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

/* Each key tile's smallest and largest position (the padding past S
 * excluded). */
static void tile_pos(Scratch *w, const Pos *P)
{
    for (int64_t t = 0; t < w->Sp / KB; t++) {
        int64_t e = (t + 1) * KB < w->S ? (t + 1) * KB : w->S;
        pos_range(P->kpos, P->chunk, t * KB, e, &w->kmin[t], &w->kmax[t]);
    }
}

/* The runs of key tiles some row of the query block [i0, i1) may see, as
 * key ranges [run[2n], run[2n + 1]) into w->run; returns their number. */
static int key_runs(Scratch *w, const Pos *P, int64_t i0, int64_t i1)
{
    int64_t qmin, qmax;
    pos_range(P->qpos, P->chunk, i0, i1, &qmin, &qmax);
    int n = 0;
    int64_t *run = w->run;
    for (int64_t t = 0; t < w->Sp / KB; t++) {
        if (!may_see(P, qmin, qmax, w->kmin[t], w->kmax[t]))
            continue;
        if (n && run[2 * n - 1] == t * KB)
            run[2 * n - 1] += KB;
        else
            run[2 * n] = t * KB, run[2 * n + 1] = t * KB + KB, n++;
    }
    return n;
}

/* Zero what the runs computed of a row outside its visible intervals
 * (which lie inside the runs). */
static void mask(float *row, const int64_t *run, int nrun, const int64_t *iv, int niv)
{
    int k = 0;
    for (int r = 0; r < nrun; r++) {
        int64_t a = run[2 * r], e = run[2 * r + 1];
        for (; k < niv && iv[2 * k] < e; k++) {
            memset(row + a, 0, (size_t)(iv[2 * k] - a) * sizeof *row);
            a = iv[2 * k + 1];
        }
        memset(row + a, 0, (size_t)(e - a) * sizeof *row);
    }
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

typedef void FwdHeads(rt_act *, float *, const rt_act *, int64_t, int64_t, int64_t, int64_t, int64_t,
                      const Pos *, float, Scratch *);
typedef void BwdHeads(rt_act *, const rt_act *, const rt_act *, const float *, const rt_act *,
                      int64_t, int64_t, int64_t, int64_t, int64_t, const Pos *, float, Scratch *);

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

/* The chunking of rt_attention_pos_fwd/bwd, checked. */
static Pos make_pos(const char *what, int64_t Sq, int64_t Sk, bool causal, int64_t window,
                    int64_t chunk, const int64_t *qpos, const int64_t *kpos)
{
    if (Sq < 0 || Sk < 0)
        rt_fatal("%s: negative lengths Sq=%lld Sk=%lld", what, (long long)Sq, (long long)Sk);
    if (chunk < 1 || Sq % chunk || Sk % chunk)
        rt_fatal("%s: chunk %lld does not divide Sq=%lld and Sk=%lld", what, (long long)chunk,
                 (long long)Sq, (long long)Sk);
    if (Sq / chunk > RT_ATTN_MAX_CHUNKS || Sk / chunk > RT_ATTN_MAX_CHUNKS)
        rt_fatal("%s: %lld query and %lld key chunks (at most %d each)", what,
                 (long long)(Sq / chunk), (long long)(Sk / chunk), RT_ATTN_MAX_CHUNKS);
    if ((Sq && !qpos) || (Sk && !kpos))
        rt_fatal("%s: no chunk positions", what);
    return (Pos){chunk, Sk / chunk, qpos, kpos, causal, window};
}

static void fwd(const char *what, rt_act *o, float *lse, const rt_act *q, const rt_act *k,
                const rt_act *v, int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH,
                int64_t D, const Pos *P)
{
    int64_t g = group(H, KVH, what);
    check_window(P->window, P->causal, what);
    if (B <= 0 || Sq <= 0 || H <= 0 || D <= 0)
        return;
    float scale = (float)(1.0 / sqrt((double)D));
    FwdHeads *run = fwd_heads();
    int64_t ntask = B * H; /* (b, h): K and V packed for each query head */
    RTCPU_PRAGMA(omp parallel if (B * H * Sq * Sk * D >= RTCPU_PAR_MIN))
    {
        Scratch w;
        scratch_init(&w, Sk, D, false);
        tile_pos(&w, P);
        RTCPU_PRAGMA(omp for schedule(dynamic, 1))
        for (int64_t t = 0; t < ntask; t++) {
            int64_t b = t / H, h = t % H, kh = h / g;
            pack_kv(w.kt, NULL, k + (b * Sk * KVH + kh) * D, KVH * D, &w);
            pack_kv(NULL, w.vp, v + (b * Sk * KVH + kh) * D, KVH * D, &w);
            run(o, lse, q, b, h, h + 1, H, Sq, P, scale, &w);
        }
    }
}

static void bwd(const char *what, rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q,
                const rt_act *k, const rt_act *v, const rt_act *o, const float *lse,
                const rt_act *dout, int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH,
                int64_t D, const Pos *P)
{
    int64_t g = group(H, KVH, what);
    check_window(P->window, P->causal, what);
    if (B <= 0 || H <= 0 || D <= 0 || (Sq <= 0 && Sk <= 0))
        return;
    float scale = (float)(1.0 / sqrt((double)D));
    BwdHeads *run = bwd_heads();
    int64_t ntask = B * KVH; /* (b, kv head): owns its rows of dk and dv */
    RTCPU_PRAGMA(omp parallel if (B * H * Sq * Sk * D >= RTCPU_PAR_MIN))
    {
        Scratch w;
        scratch_init(&w, Sk, D, true);
        tile_pos(&w, P);
        RTCPU_PRAGMA(omp for schedule(dynamic, 1))
        for (int64_t t = 0; t < ntask; t++) {
            int64_t b = t / KVH, kh = t % KVH;
            const rt_act *kb = k + (b * Sk * KVH + kh) * D, *vb = v + (b * Sk * KVH + kh) * D;
            pack_kv(w.kt, w.kp, kb, KVH * D, &w);
            pack_kv(w.vt, NULL, vb, KVH * D, &w);
            memset(w.dkp, 0, (size_t)(w.Sp * w.Dp) * sizeof *w.dkp);
            memset(w.dvp, 0, (size_t)(w.Sp * w.Dp) * sizeof *w.dvp);
            run(dq, q, o, lse, dout, b, kh, g, H, Sq, P, scale, &w);
            for (int64_t j = 0; j < Sk; j++) {
                memcpy(dk + ((b * Sk + j) * KVH + kh) * D, w.dkp + j * w.Dp, (size_t)D * sizeof *dk);
                memcpy(dv + ((b * Sk + j) * KVH + kh) * D, w.dvp + j * w.Dp, (size_t)D * sizeof *dv);
            }
        }
    }
}

/* rt_attention_fwd/bwd: one chunk of S rows each side, at position 0. */
static const int64_t pos0[1] = {0};

void rt_attention_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                      int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                      int64_t window)
{
    Pos P = {S > 0 ? S : 1, 1, pos0, pos0, causal, window};
    fwd("rt_attention_fwd", o, lse, q, k, v, B, S, S, H, KVH, D, &P);
}

void rt_attention_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                      const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                      int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                      int64_t window)
{
    Pos P = {S > 0 ? S : 1, 1, pos0, pos0, causal, window};
    bwd("rt_attention_bwd", dq, dk, dv, q, k, v, o, lse, dout, B, S, S, H, KVH, D, &P);
}

void rt_attention_pos_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                          int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                          bool causal, int64_t window, int64_t chunk, const int64_t *qpos,
                          const int64_t *kpos)
{
    const char *what = "rt_attention_pos_fwd";
    Pos P = make_pos(what, Sq, Sk, causal, window, chunk, qpos, kpos);
    fwd(what, o, lse, q, k, v, B, Sq, Sk, H, KVH, D, &P);
}

void rt_attention_pos_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                          const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                          int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                          bool causal, int64_t window, int64_t chunk, const int64_t *qpos,
                          const int64_t *kpos)
{
    const char *what = "rt_attention_pos_bwd";
    Pos P = make_pos(what, Sq, Sk, causal, window, chunk, qpos, kpos);
    bwd(what, dq, dk, dv, q, k, v, o, lse, dout, B, Sq, Sk, H, KVH, D, &P);
}
