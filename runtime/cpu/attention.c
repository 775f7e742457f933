/* attention.c: scaled dot-product attention with grouped-query heads, causal
 * masks and sliding windows, blocked for the vector units and threaded.
 *
 * Layout of the work. A task is one (batch, kv head): it packs that head's K
 * and V once (transposed, and as rows padded to Dp = D rounded up to 16
 * floats), then runs every query head of its group over blocks of QB query
 * rows. For a block, scores against tiles of KB keys go to a QB x S scratch
 * (nothing S x S), but only the tiles some row of the block can see: with a
 * causal mask the tiles after the block's last row are never computed, with
 * a window the tiles before its first row's window are skipped too. Inside
 * the computed tiles, masked scores get probability 0.
 *
 * The forward is the two-pass softmax of each row (max, then exponentials
 * summed in double), o = P V / sum, lse = max + log(sum). The backward
 * recomputes P = exp(s - lse) per block, dP = dO V^T, dS = P (dP - D_i)
 * scale with D_i = dO_i . O_i, dQ = dS K, dK += dS^T Q, dV += P^T dO.
 *
 * Determinism. A task owns its rows of dk and dv (every query head of the
 * group reads one kv head), so they accumulate in a fixed order (query head,
 * then query row, ascending) and tasks run on any thread: results do not
 * depend on the thread count. The dot products sum over d in order in each
 * lane. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "simd.h"

enum {
    KB = 32, /* keys per score tile: two vectors */
    QB = 16, /* query rows per block: four groups of four */
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

/* s[r][c] = scale sum_d a[r][d] bt[d][c] for the 4 rows of a ([4][dp]) and
 * the KB keys from c0; bt is [dp][ldb]. */
RTCPU_INLINE void tile_scores(float *s, int64_t lds, const float *a, int64_t dp, const float *bt,
                              int64_t ldb, int64_t c0, float scale)
{
    RtV x00 = {0}, x01 = {0}, x10 = {0}, x11 = {0}, x20 = {0}, x21 = {0}, x30 = {0}, x31 = {0};
    const float *a0 = a, *a1 = a + dp, *a2 = a + 2 * dp, *a3 = a + 3 * dp;
    for (int64_t d = 0; d < dp; d++) {
        RtV b0 = RTV_LD(bt + d * ldb + c0), b1 = RTV_LD(bt + d * ldb + c0 + RTV_N);
        x00 += a0[d] * b0, x01 += a0[d] * b1;
        x10 += a1[d] * b0, x11 += a1[d] * b1;
        x20 += a2[d] * b0, x21 += a2[d] * b1;
        x30 += a3[d] * b0, x31 += a3[d] * b1;
    }
    float *s0 = s + c0, *s1 = s0 + lds, *s2 = s1 + lds, *s3 = s2 + lds;
    RTV_ST(s0, x00 * scale), RTV_ST(s0 + RTV_N, x01 * scale);
    RTV_ST(s1, x10 * scale), RTV_ST(s1 + RTV_N, x11 * scale);
    RTV_ST(s2, x20 * scale), RTV_ST(s2 + RTV_N, x21 * scale);
    RTV_ST(s3, x30 * scale), RTV_ST(s3 + RTV_N, x31 * scale);
}

/* Scores of `rows` (a multiple of 4) packed rows of a against key tiles
 * [k0, k1) of bt, into s [rows][lds]. */
RTCPU_INLINE void scores(float *s, int64_t lds, const float *a, int64_t rows, int64_t dp,
                         const float *bt, int64_t ldb, int64_t k0, int64_t k1, float scale)
{
    for (int64_t r = 0; r < rows; r += 4)
        for (int64_t c = k0; c < k1; c += KB)
            tile_scores(s + r * lds, lds, a + r * dp, dp, bt, ldb, c, scale);
}

/* out[k][0, 16 NV) += sum_{t in [t0, t1)} w(k, t) src[t][0, 16 NV) for k < 4,
 * with w(k, t) = coef[k ck + t ct]; t ascending. Out rows are ldo apart,
 * src rows lds apart. The four products P V, dS K (ck = row stride, ct = 1)
 * and dS^T Q, P^T dO (ck = 1, ct = row stride) are all this. */
#define DEFINE_ACCUM(NAME, NV)                                                                     \
    RTCPU_INLINE void NAME(float *out, int64_t ldo, const float *coef, int64_t ck, int64_t ct,     \
                           const float *src, int64_t lds, int64_t t0, int64_t t1)                  \
    {                                                                                              \
        RtV o[4][NV];                                                                              \
        for (int k = 0; k < 4; k++)                                                                \
            for (int i = 0; i < NV; i++)                                                           \
                o[k][i] = RTV_LD(out + k * ldo + i * RTV_N);                                       \
        for (int64_t t = t0; t < t1; t++) {                                                        \
            RtV v[NV];                                                                             \
            for (int i = 0; i < NV; i++)                                                           \
                v[i] = RTV_LD(src + t * lds + i * RTV_N);                                          \
            for (int k = 0; k < 4; k++) {                                                          \
                float w = coef[k * ck + t * ct];                                                   \
                for (int i = 0; i < NV; i++)                                                       \
                    o[k][i] += w * v[i];                                                           \
            }                                                                                      \
        }                                                                                          \
        for (int k = 0; k < 4; k++)                                                                \
            for (int i = 0; i < NV; i++)                                                           \
                RTV_ST(out + k * ldo + i * RTV_N, o[k][i]);                                        \
    }
DEFINE_ACCUM(accum4, 4)
DEFINE_ACCUM(accum1, 1)

/* accum over all dp columns (four vectors at a time, then one) for `rows`
 * output rows (a multiple of 4). */
RTCPU_INLINE void accum(float *out, int64_t ldo, int64_t rows, const float *coef, int64_t ck,
                        int64_t ct, const float *src, int64_t lds, int64_t dp, int64_t t0,
                        int64_t t1)
{
    for (int64_t k = 0; k < rows; k += 4) {
        int64_t d = 0;
        for (; d + 4 * RTV_N <= dp; d += 4 * RTV_N)
            accum4(out + k * ldo + d, ldo, coef + k * ck, ck, ct, src + d, lds, t0, t1);
        for (; d < dp; d += RTV_N)
            accum1(out + k * ldo + d, ldo, coef + k * ck, ck, ct, src + d, lds, t0, t1);
    }
}

/* Per-thread scratch (floats). */
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
    w->S = S, w->D = D, w->Sp = round_up(S, KB), w->Dp = round_up(D, RTV_N);
    /* Rows of a power-of-two length would map onto few L1 sets (the score
     * tiles read 64 rows of kt at once): 16 floats more make it odd. */
    w->ld = w->Sp + 16;
    size_t sd = (size_t)(w->ld * w->Dp), qd = (size_t)(QB * w->Dp), qs = (size_t)(QB * w->ld);
    size_t n = 2 * sd + (bwd ? 4 * sd : 0) + 3 * qd + 2 * qs + QB;
    float *p = rtcpu_xmalloc(n * sizeof *p);
    w->kt = p, p += sd;
    w->vp = p, p += sd;
    if (bwd) {
        w->vt = p, p += sd;
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
    w->sum = rtcpu_xmalloc(QB * sizeof *w->sum);
}

static void scratch_free(Scratch *w)
{
    free(w->kt);
    free(w->sum);
}

/* rows [0, S) of x (row stride ld, D used) into t [Dp][w->ld] transposed
 * and/or r [Sp][Dp], zero-padded. */
static void pack_kv(float *t, float *r, const rt_act *x, int64_t ld, const Scratch *w)
{
    int64_t S = w->S, Sp = w->Sp, D = w->D, Dp = w->Dp, lt = w->ld;
    if (t) { /* blocks of 16 rows: 16 contiguous stores per d, reads in L1 */
        memset(t, 0, (size_t)(Dp * lt) * sizeof *t);
        for (int64_t j0 = 0; j0 < S; j0 += 16) {
            int64_t nj = S - j0 < 16 ? S - j0 : 16;
            for (int64_t d = 0; d < D; d++)
                for (int64_t j = 0; j < nj; j++)
                    t[d * lt + j0 + j] = x[(j0 + j) * ld + d];
        }
    }
    if (r) {
        memset(r, 0, (size_t)(Sp * Dp) * sizeof *r);
        for (int64_t j = 0; j < S; j++)
            memcpy(r + j * Dp, x + j * ld, (size_t)D * sizeof *r);
    }
}

/* nr rows of x (stride ld) into p [QB][Dp], the rest zero. */
static void pack_rows(float *p, const rt_act *x, int64_t ld, int64_t nr, const Scratch *w)
{
    memset(p, 0, (size_t)(QB * w->Dp) * sizeof *p);
    for (int64_t r = 0; r < nr; r++)
        memcpy(p + r * w->Dp, x + r * ld, (size_t)w->D * sizeof *p);
}

/* The key tiles [*k0, *k1) some row of [i0, i1) sees, and row i's visible
 * keys [jlo(i), jhi(i)). */
static void key_tiles(int64_t i0, int64_t i1, int64_t S, bool causal, int64_t window, int64_t *k0,
                      int64_t *k1)
{
    int64_t lo = window > 0 && i0 - window + 1 > 0 ? i0 - window + 1 : 0;
    *k0 = lo / KB * KB;
    *k1 = round_up(causal ? i1 : S, KB);
}

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

/* Forward of the task (b, kv head kh): query heads [h0, h1) of its group. */
RTCPU_CLONES static void fwd_task(rt_act *o, float *lse, const rt_act *q, const rt_act *k,
                                  const rt_act *v, int64_t b, int64_t kh, int64_t h0, int64_t h1,
                                  int64_t H, int64_t KVH, bool causal, int64_t window,
                                  float scale, Scratch *w)
{
    int64_t S = w->S, L = w->ld, D = w->D, Dp = w->Dp;
    pack_kv(w->kt, NULL, k + (b * S * KVH + kh) * D, KVH * D, w);
    pack_kv(NULL, w->vp, v + (b * S * KVH + kh) * D, KVH * D, w);
    for (int64_t h = h0; h < h1; h++)
        for (int64_t i0 = 0; i0 < S; i0 += QB) {
            int64_t nr = S - i0 < QB ? S - i0 : QB, k0, k1;
            key_tiles(i0, i0 + nr, S, causal, window, &k0, &k1);
            int64_t row0 = (b * S + i0) * H + h; /* (b, i0, h) */
            pack_rows(w->qp, q + row0 * D, H * D, nr, w);
            int64_t rows4 = round_up(nr, 4);
            scores(w->sc, L, w->qp, rows4, Dp, w->kt, L, k0, k1, scale);
            for (int64_t r = 0; r < nr; r++) {
                int64_t i = i0 + r, jlo = key_lo(i, window), jhi = key_hi(i, S, causal);
                float *s = w->sc + r * L;
                float m = -INFINITY;
                RTCPU_SIMD_MAX(m)
                for (int64_t j = jlo; j < jhi; j++)
                    m = s[j] > m ? s[j] : m;
                double sum = 0.0;
                RTCPU_SIMD_SUM(sum)
                for (int64_t j = jlo; j < jhi; j++) {
                    float p = rtcpu_expf(s[j] - m);
                    s[j] = p;
                    sum += p;
                }
                mask(s, k0, jlo, jhi, k1);
                w->sum[r] = sum;
                lse[row0 + r * H] = m + (float)log(sum);
            }
            for (int64_t r = nr; r < rows4; r++) /* padding rows: no weight */
                memset(w->sc + r * L + k0, 0, (size_t)(k1 - k0) * sizeof *w->sc);
            memset(w->acc, 0, (size_t)(QB * Dp) * sizeof *w->acc);
            accum(w->acc, Dp, rows4, w->sc, L, 1, w->vp, Dp, Dp, k0, k1);
            for (int64_t r = 0; r < nr; r++) {
                float inv = (float)(1.0 / w->sum[r]);
                rt_act *orow = o + (row0 + r * H) * D;
                const float *a = w->acc + r * Dp;
                RTCPU_SIMD
                for (int64_t d = 0; d < D; d++)
                    orow[d] = a[d] * inv;
            }
        }
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
    int64_t ntask = B * H; /* (b, h): K and V packed once per query head */
    RTCPU_PRAGMA(omp parallel if (B * H * S * S * D >= RTCPU_PAR_MIN))
    {
        Scratch w;
        scratch_init(&w, S, D, false);
        RTCPU_PRAGMA(omp for schedule(dynamic, 1))
        for (int64_t t = 0; t < ntask; t++) {
            int64_t b = t / H, h = t % H;
            fwd_task(o, lse, q, k, v, b, h / g, h, h + 1, H, KVH, causal, window, scale, &w);
        }
        scratch_free(&w);
    }
}

/* Backward of the task (b, kv head kh): every query head of its group, then
 * its rows of dk and dv. */
RTCPU_CLONES static void bwd_task(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q,
                                  const rt_act *k, const rt_act *v, const rt_act *o,
                                  const float *lse, const rt_act *dout, int64_t b, int64_t kh,
                                  int64_t g, int64_t H, int64_t KVH, bool causal, int64_t window,
                                  float scale, Scratch *w)
{
    int64_t S = w->S, Sp = w->Sp, L = w->ld, D = w->D, Dp = w->Dp;
    const rt_act *kb = k + (b * S * KVH + kh) * D, *vb = v + (b * S * KVH + kh) * D;
    pack_kv(w->kt, w->kp, kb, KVH * D, w);
    pack_kv(w->vt, NULL, vb, KVH * D, w);
    memset(w->dkp, 0, (size_t)(Sp * Dp) * sizeof *w->dkp);
    memset(w->dvp, 0, (size_t)(Sp * Dp) * sizeof *w->dvp);
    for (int64_t h = kh * g; h < (kh + 1) * g; h++)
        for (int64_t i0 = 0; i0 < S; i0 += QB) {
            int64_t nr = S - i0 < QB ? S - i0 : QB, k0, k1;
            key_tiles(i0, i0 + nr, S, causal, window, &k0, &k1);
            int64_t row0 = (b * S + i0) * H + h;
            pack_rows(w->qp, q + row0 * D, H * D, nr, w);
            pack_rows(w->gp, dout + row0 * D, H * D, nr, w);
            for (int64_t r = 0; r < nr; r++) { /* D_i = dO_i . O_i */
                const rt_act *gi = dout + (row0 + r * H) * D, *oi = o + (row0 + r * H) * D;
                double di = 0.0;
                RTCPU_SIMD_SUM(di)
                for (int64_t d = 0; d < D; d++)
                    di += (double)gi[d] * oi[d];
                w->rowv[r] = (float)di;
            }
            int64_t rows4 = round_up(nr, 4);
            scores(w->sc, L, w->qp, rows4, Dp, w->kt, L, k0, k1, scale);
            scores(w->dsc, L, w->gp, rows4, Dp, w->vt, L, k0, k1, 1.0f);
            for (int64_t r = 0; r < rows4; r++) {
                float *p = w->sc + r * L, *ds = w->dsc + r * L;
                if (r >= nr) { /* padding rows: no weight */
                    memset(p + k0, 0, (size_t)(k1 - k0) * sizeof *p);
                    memset(ds + k0, 0, (size_t)(k1 - k0) * sizeof *ds);
                    continue;
                }
                int64_t i = i0 + r, jlo = key_lo(i, window), jhi = key_hi(i, S, causal);
                float l = lse[row0 + r * H], di = w->rowv[r];
                RTCPU_SIMD
                for (int64_t j = jlo; j < jhi; j++) {
                    float pj = rtcpu_expf(p[j] - l);
                    p[j] = pj;
                    ds[j] = pj * (ds[j] - di) * scale;
                }
                mask(p, k0, jlo, jhi, k1);
                mask(ds, k0, jlo, jhi, k1);
            }
            /* dq rows of the block = dS K */
            memset(w->acc, 0, (size_t)(QB * Dp) * sizeof *w->acc);
            accum(w->acc, Dp, rows4, w->dsc, L, 1, w->kp, Dp, Dp, k0, k1);
            for (int64_t r = 0; r < nr; r++)
                memcpy(dq + (row0 + r * H) * D, w->acc + r * Dp, (size_t)D * sizeof *dq);
            /* dk += dS^T Q, dv += P^T dO over the block's rows, in order */
            accum(w->dkp + k0 * Dp, Dp, k1 - k0, w->dsc + k0, 1, L, w->qp, Dp, Dp, 0, nr);
            accum(w->dvp + k0 * Dp, Dp, k1 - k0, w->sc + k0, 1, L, w->gp, Dp, Dp, 0, nr);
        }
    for (int64_t j = 0; j < S; j++) {
        memcpy(dk + ((b * S + j) * KVH + kh) * D, w->dkp + j * Dp, (size_t)D * sizeof *dk);
        memcpy(dv + ((b * S + j) * KVH + kh) * D, w->dvp + j * Dp, (size_t)D * sizeof *dv);
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
    int64_t ntask = B * KVH;
    RTCPU_PRAGMA(omp parallel if (B * H * S * S * D >= RTCPU_PAR_MIN))
    {
        Scratch w;
        scratch_init(&w, S, D, true);
        RTCPU_PRAGMA(omp for schedule(dynamic, 1))
        for (int64_t t = 0; t < ntask; t++)
            bwd_task(dq, dk, dv, q, k, v, o, lse, dout, t / KVH, t % KVH, g, H, KVH, causal,
                     window, scale, &w);
        scratch_free(&w);
    }
}
