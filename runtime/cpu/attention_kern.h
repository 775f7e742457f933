/* attention_kern.h: the vector kernels of attention.c, included once per
 * instruction set with
 *   AK_V     lanes of a vector (16: AVX-512, 8: AVX2, 4: SSE2)
 *   AK_SR    query rows of a score tile (AK_SR x 2 vectors of accumulators)
 *   AK_NV    vectors of an output row in accum's tile (4 x AK_NV accumulators)
 *   AK(n)    n with the set's suffix
 * so that each set's register tiles fit its registers (32 zmm, 16 ymm, 16
 * xmm); attention.c picks the set when the program starts. Every tile shape
 * computes the same sums in the same order: the sets differ only in the FMA
 * contraction of their instructions. No include guard: included three times. */

typedef float AK(vec) __attribute__((vector_size(AK_V * 4)));
typedef float AK(vec_u) __attribute__((vector_size(AK_V * 4), aligned(4), may_alias));
#define AK_LD(p) (*(const AK(vec_u) *)(p))
#define AK_ST(p, v) (*(AK(vec_u) *)(p) = (v))

/* s[r][c] = scale sum_d a[r][d] bt[d][c] for the AK_SR rows of a
 * ([AK_SR][dp]) and the 2 AK_V keys from c0; bt is [dp][ldb]. */
RTCPU_INLINE void AK(tile_scores)(float *s, int64_t lds, const float *a, int64_t dp,
                                  const float *bt, int64_t ldb, int64_t c0, float scale)
{
    AK(vec) x[AK_SR][2];
    for (int r = 0; r < AK_SR; r++)
        x[r][0] = x[r][1] = (AK(vec)){0};
    for (int64_t d = 0; d < dp; d++) {
        AK(vec) b0 = AK_LD(bt + d * ldb + c0), b1 = AK_LD(bt + d * ldb + c0 + AK_V);
        for (int r = 0; r < AK_SR; r++) {
            float ar = a[r * dp + d];
            x[r][0] += ar * b0;
            x[r][1] += ar * b1;
        }
    }
    for (int r = 0; r < AK_SR; r++) {
        AK_ST(s + r * lds + c0, x[r][0] * scale);
        AK_ST(s + r * lds + c0 + AK_V, x[r][1] * scale);
    }
}

/* Scores of `rows` (a multiple of AK_SR) packed rows of a against the key
 * tiles [k0, k1) of bt, into s [rows][lds]. */
RTCPU_INLINE void AK(scores)(float *s, int64_t lds, const float *a, int64_t rows, int64_t dp,
                             const float *bt, int64_t ldb, int64_t k0, int64_t k1, float scale)
{
    for (int64_t r = 0; r < rows; r += AK_SR)
        for (int64_t c = k0; c < k1; c += 2 * AK_V)
            AK(tile_scores)(s + r * lds, lds, a + r * dp, dp, bt, ldb, c, scale);
}

/* out[k][0, NV AK_V) += sum_{t in [t0, t1)} w(k, t) src[t][0, NV AK_V) for
 * k < 4, with w(k, t) = coef[k ck + t ct]; t ascending. Out rows are ldo
 * apart, src rows lds apart. P V and dS K (ck = row stride, ct = 1) and
 * dS^T Q, P^T dO (ck = 1, ct = row stride) are all this. */
#define AK_DEFINE_ACCUM(NAME, NV)                                                                  \
    RTCPU_INLINE void NAME(float *out, int64_t ldo, const float *coef, int64_t ck, int64_t ct,     \
                           const float *src, int64_t lds, int64_t t0, int64_t t1)                  \
    {                                                                                              \
        AK(vec) o[4][NV];                                                                          \
        for (int k = 0; k < 4; k++)                                                                \
            for (int i = 0; i < NV; i++)                                                           \
                o[k][i] = AK_LD(out + k * ldo + i * AK_V);                                         \
        for (int64_t t = t0; t < t1; t++) {                                                        \
            AK(vec) v[NV];                                                                         \
            for (int i = 0; i < NV; i++)                                                           \
                v[i] = AK_LD(src + t * lds + i * AK_V);                                            \
            for (int k = 0; k < 4; k++) {                                                          \
                float w = coef[k * ck + t * ct];                                                   \
                for (int i = 0; i < NV; i++)                                                       \
                    o[k][i] += w * v[i];                                                           \
            }                                                                                      \
        }                                                                                          \
        for (int k = 0; k < 4; k++)                                                                \
            for (int i = 0; i < NV; i++)                                                           \
                AK_ST(out + k * ldo + i * AK_V, o[k][i]);                                          \
    }
AK_DEFINE_ACCUM(AK(accum_n), AK_NV)
AK_DEFINE_ACCUM(AK(accum_1), 1)

/* accum over all dp columns (AK_NV vectors at a time, then one) for `rows`
 * output rows (a multiple of 4). */
RTCPU_INLINE void AK(accum)(float *out, int64_t ldo, int64_t rows, const float *coef, int64_t ck,
                            int64_t ct, const float *src, int64_t lds, int64_t dp, int64_t t0,
                            int64_t t1)
{
    for (int64_t k = 0; k < rows; k += 4) {
        int64_t d = 0;
        for (; d + AK_NV * AK_V <= dp; d += AK_NV * AK_V)
            AK(accum_n)(out + k * ldo + d, ldo, coef + k * ck, ck, ct, src + d, lds, t0, t1);
        for (; d < dp; d += AK_V)
            AK(accum_1)(out + k * ldo + d, ldo, coef + k * ck, ck, ct, src + d, lds, t0, t1);
    }
}

/* Forward of query heads [h0, h1) of one (batch, kv head) task, Sq query
 * rows; K^T and V rows are packed in w. */
static void AK(fwd_heads)(rt_act *o, float *lse, const rt_act *q, int64_t b, int64_t h0, int64_t h1,
                          int64_t H, int64_t Sq, const Pos *P, float scale, Scratch *w)
{
    int64_t L = w->ld, D = w->D, Dp = w->Dp;
    int64_t iv[2 * RT_ATTN_MAX_CHUNKS];
    for (int64_t h = h0; h < h1; h++)
        for (int64_t i0 = 0; i0 < Sq; i0 += QB) {
            int64_t nr = Sq - i0 < QB ? Sq - i0 : QB;
            int nrun = key_runs(w, P, i0, i0 + nr);
            const int64_t *run = w->run;
            int64_t row0 = (b * Sq + i0) * H + h; /* (b, i0, h) */
            pack_rows(w->qp, q + row0 * D, H * D, nr, w);
            for (int u = 0; u < nrun; u++)
                AK(scores)(w->sc, L, w->qp, QB, Dp, w->kt, L, run[2 * u], run[2 * u + 1], scale);
            for (int64_t r = 0; r < nr; r++) {
                int niv = row_keys(P, pos_of(P->qpos, P->chunk, i0 + r), iv);
                float *s = w->sc + r * L;
                float m = -INFINITY;
                for (int u = 0; u < niv; u++) {
                    int64_t jlo = iv[2 * u], jhi = iv[2 * u + 1];
                    RTCPU_SIMD_MAX(m)
                    for (int64_t j = jlo; j < jhi; j++)
                        m = s[j] > m ? s[j] : m;
                }
                double sum = 0.0;
                for (int u = 0; u < niv; u++) {
                    int64_t jlo = iv[2 * u], jhi = iv[2 * u + 1];
                    RTCPU_SIMD_SUM(sum)
                    for (int64_t j = jlo; j < jhi; j++) {
                        float p = rtcpu_expf(s[j] - m);
                        s[j] = p;
                        sum += p;
                    }
                }
                mask(s, run, nrun, iv, niv);
                w->sum[r] = sum;
                lse[row0 + r * H] = niv ? m + (float)log(sum) : -INFINITY;
            }
            int64_t rows4 = round_up(nr, 4);
            for (int64_t r = nr; r < rows4; r++) /* padding rows: no weight */
                for (int u = 0; u < nrun; u++)
                    memset(w->sc + r * L + run[2 * u], 0,
                           (size_t)(run[2 * u + 1] - run[2 * u]) * sizeof *w->sc);
            memset(w->acc, 0, (size_t)(rows4 * Dp) * sizeof *w->acc);
            for (int u = 0; u < nrun; u++)
                AK(accum)(w->acc, Dp, rows4, w->sc, L, 1, w->vp, Dp, Dp, run[2 * u], run[2 * u + 1]);
            for (int64_t r = 0; r < nr; r++) {
                /* a row that sees no key: acc is 0, and so is o */
                float inv = w->sum[r] > 0 ? (float)(1.0 / w->sum[r]) : 0.0f;
                rt_act *orow = o + (row0 + r * H) * D;
                const float *a = w->acc + r * Dp;
                RTCPU_SIMD
                for (int64_t d = 0; d < D; d++)
                    orow[d] = a[d] * inv;
            }
        }
}

/* Backward of every query head of the task (b, kv head kh), Sq query rows,
 * into dq and the packed dK, dV of w; K^T, V^T and K rows are packed in w. */
static void AK(bwd_heads)(rt_act *dq, const rt_act *q, const rt_act *o, const float *lse,
                          const rt_act *dout, int64_t b, int64_t kh, int64_t g, int64_t H,
                          int64_t Sq, const Pos *P, float scale, Scratch *w)
{
    int64_t L = w->ld, D = w->D, Dp = w->Dp;
    int64_t iv[2 * RT_ATTN_MAX_CHUNKS];
    for (int64_t h = kh * g; h < (kh + 1) * g; h++)
        for (int64_t i0 = 0; i0 < Sq; i0 += QB) {
            int64_t nr = Sq - i0 < QB ? Sq - i0 : QB;
            int nrun = key_runs(w, P, i0, i0 + nr);
            const int64_t *run = w->run;
            int64_t row0 = (b * Sq + i0) * H + h;
            pack_rows(w->qp, q + row0 * D, H * D, nr, w);
            pack_rows(w->gp, dout + row0 * D, H * D, nr, w);
            /* D_i = dO_i . O_i, summed as the dP tile sums dO_i . V_j: fp32, d
             * ascending, and in the tile's own form (a scalar times a vector
             * added to a vector; lane 0 used), so the compiler contracts it
             * to FMAs exactly where it contracts the tile, at any -O. A row
             * whose output is one value row (a window of 1, a saturated
             * softmax) then gets dS exactly 0, as the exact gradient. */
            for (int64_t r = 0; r < nr; r++) {
                const rt_act *gi = dout + (row0 + r * H) * D, *oi = o + (row0 + r * H) * D;
                AK(vec) di = {0};
                for (int64_t d = 0; d < D; d++)
                    di += gi[d] * (AK(vec)){oi[d]};
                w->rowv[r] = di[0];
            }
            for (int u = 0; u < nrun; u++) {
                AK(scores)(w->sc, L, w->qp, QB, Dp, w->kt, L, run[2 * u], run[2 * u + 1], scale);
                AK(scores)(w->dsc, L, w->gp, QB, Dp, w->vt, L, run[2 * u], run[2 * u + 1], 1.0f);
            }
            int64_t rows4 = round_up(nr, 4);
            for (int64_t r = 0; r < rows4; r++) {
                float *p = w->sc + r * L, *ds = w->dsc + r * L;
                if (r >= nr) { /* padding rows: no weight */
                    for (int u = 0; u < nrun; u++) {
                        size_t n = (size_t)(run[2 * u + 1] - run[2 * u]) * sizeof *p;
                        memset(p + run[2 * u], 0, n);
                        memset(ds + run[2 * u], 0, n);
                    }
                    continue;
                }
                int niv = row_keys(P, pos_of(P->qpos, P->chunk, i0 + r), iv);
                float l = lse[row0 + r * H], di = w->rowv[r];
                for (int u = 0; u < niv; u++) {
                    int64_t jlo = iv[2 * u], jhi = iv[2 * u + 1];
                    RTCPU_SIMD
                    for (int64_t j = jlo; j < jhi; j++) {
                        float pj = rtcpu_expf(p[j] - l);
                        p[j] = pj;
                        ds[j] = pj * (ds[j] - di) * scale;
                    }
                }
                mask(p, run, nrun, iv, niv);
                mask(ds, run, nrun, iv, niv);
            }
            /* dq rows of the block = dS K (0 for a row that sees no key) */
            memset(w->acc, 0, (size_t)(rows4 * Dp) * sizeof *w->acc);
            for (int u = 0; u < nrun; u++)
                AK(accum)(w->acc, Dp, rows4, w->dsc, L, 1, w->kp, Dp, Dp, run[2 * u], run[2 * u + 1]);
            for (int64_t r = 0; r < nr; r++)
                memcpy(dq + (row0 + r * H) * D, w->acc + r * Dp, (size_t)D * sizeof *dq);
            /* dk += dS^T Q, dv += P^T dO over the block's rows, in order */
            for (int u = 0; u < nrun; u++) {
                int64_t k0 = run[2 * u], k1 = run[2 * u + 1];
                AK(accum)(w->dkp + k0 * Dp, Dp, k1 - k0, w->dsc + k0, 1, L, w->qp, Dp, Dp, 0, nr);
                AK(accum)(w->dvp + k0 * Dp, Dp, k1 - k0, w->sc + k0, 1, L, w->gp, Dp, Dp, 0, nr);
            }
        }
}

#undef AK_LD
#undef AK_ST
