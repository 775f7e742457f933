/* attention.c: scaled dot-product attention with grouped-query heads, one
 * query row at a time: scores for that row live in an S-sized scratch, and
 * the backward recomputes the probabilities from lse, so nothing S x S is
 * kept. Loops run in a fixed order (batch, head, query, key), so the
 * accumulation of dk and dv over query heads and rows is deterministic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* Eight partial sums combined in a fixed tree: deterministic, and a shape
 * the compiler vectorizes (a single running sum cannot be reordered). */
static float dot(const rt_act *a, const rt_act *b, int64_t n)
{
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += a[i + k] * b[i + k];
    float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++)
        t += a[i] * b[i];
    return t;
}

static int64_t group(int64_t H, int64_t KVH, const char *what)
{
    if (KVH < 1 || H % KVH)
        rt_fatal("%s: %lld query heads do not group onto %lld kv heads", what, (long long)H,
                 (long long)KVH);
    return H / KVH;
}

/* A sliding window (causal only): query i sees keys (i - window, i]. */
static void check_window(bool causal, int64_t window, const char *what)
{
    if (window < 0 || (window > 0 && !causal))
        rt_fatal("%s: window %lld needs causal attention", what, (long long)window);
}

static int64_t first_key(int64_t i, int64_t window)
{
    return window > 0 && i >= window ? i - window + 1 : 0;
}

void rt_attention_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                      int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                      int64_t window)
{
    int64_t g = group(H, KVH, "rt_attention_fwd");
    check_window(causal, window, "rt_attention_fwd");
    float scale = (float)(1.0 / sqrt((double)D));
    float *p = rtcpu_xmalloc((size_t)(S ? S : 1) * sizeof *p);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / g;
            for (int64_t i = 0; i < S; i++) {
                const rt_act *qi = q + ((b * S + i) * H + h) * D;
                int64_t nj = causal ? i + 1 : S, j0 = first_key(i, window);
                float m = -INFINITY;
                for (int64_t j = j0; j < nj; j++) {
                    p[j] = scale * dot(qi, k + ((b * S + j) * KVH + kh) * D, D);
                    m = p[j] > m ? p[j] : m;
                }
                double sum = 0.0;
                for (int64_t j = j0; j < nj; j++) {
                    p[j] = expf(p[j] - m);
                    sum += p[j];
                }
                rt_act *oi = o + ((b * S + i) * H + h) * D;
                memset(oi, 0, (size_t)D * sizeof *oi);
                for (int64_t j = j0; j < nj; j++) {
                    const rt_act *vj = v + ((b * S + j) * KVH + kh) * D;
                    for (int64_t d = 0; d < D; d++)
                        oi[d] += p[j] * vj[d];
                }
                float inv = (float)(1.0 / sum);
                for (int64_t d = 0; d < D; d++)
                    oi[d] *= inv;
                lse[(b * S + i) * H + h] = m + (float)log(sum);
            }
        }
    free(p);
}

/* Per query row i: p_j = exp(s_j - lse_i), dp_j = do_i . v_j,
 * ds_j = p_j (dp_j - do_i . o_i); dq_i = scale sum_j ds_j k_j,
 * dk_j += scale ds_j q_i, dv_j += p_j do_i. */
void rt_attention_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                      const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                      int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                      int64_t window)
{
    int64_t g = group(H, KVH, "rt_attention_bwd");
    check_window(causal, window, "rt_attention_bwd");
    float scale = (float)(1.0 / sqrt((double)D));
    size_t kv_bytes = (size_t)(B * S * KVH * D) * sizeof *dk;
    memset(dk, 0, kv_bytes);
    memset(dv, 0, kv_bytes);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / g;
            for (int64_t i = 0; i < S; i++) {
                int64_t row = (b * S + i) * H + h;
                const rt_act *qi = q + row * D, *oi = o + row * D, *gi = dout + row * D;
                rt_act *dqi = dq + row * D;
                int64_t nj = causal ? i + 1 : S;
                float l = lse[row], di = dot(gi, oi, D);
                memset(dqi, 0, (size_t)D * sizeof *dqi);
                for (int64_t j = first_key(i, window); j < nj; j++) {
                    int64_t kv = ((b * S + j) * KVH + kh) * D;
                    float pj = expf(scale * dot(qi, k + kv, D) - l);
                    float ds = pj * (dot(gi, v + kv, D) - di) * scale;
                    const rt_act *kj = k + kv;
                    rt_act *dkj = dk + kv, *dvj = dv + kv;
                    for (int64_t d = 0; d < D; d++) {
                        dqi[d] += ds * kj[d];
                        dkj[d] += ds * qi[d];
                        dvj[d] += pj * gi[d];
                    }
                }
            }
        }
}
