/* attention_merge.c: the CPU backend's two reductions of ring attention
 * (runtime/common/attention_ring.c): the log-sum-exp merge of one block's
 * partial output into the running one, and the last add of a sum kept in
 * fp32. Same formulas as runtime/cuda/attention_merge.cu; each output
 * element is computed by one thread, so results do not depend on the thread
 * count. */
#include <math.h>

#include "common/common.h"
#include "cpu.h"
#include "simd.h"

size_t rtc_act_bytes(void)
{
    return sizeof(rt_act);
}

void rt_attention_merge(float *acc, float *lse, const rt_act *o_b, const float *lse_b,
                        rt_act *out, int64_t rows, int64_t D)
{
    if (rows < 0 || D < 0)
        rt_fatal("rt_attention_merge: negative sizes rows=%lld D=%lld", (long long)rows,
                 (long long)D);
    RTCPU_PAR_FOR(rows * D)
    for (int64_t r = 0; r < rows; r++) {
        float lb = lse_b[r], la = lse[r];
        float *a = acc + r * D;
        if (lb != -INFINITY) {
            /* l = logaddexp(la, lb); la may be -inf (then l = lb, wa = 0) */
            float m = la > lb ? la : lb, l = m + log1pf(expf(-fabsf(la - lb)));
            float wa = expf(la - l), wb = expf(lb - l);
            const rt_act *ob = o_b + r * D;
            for (int64_t d = 0; d < D; d++)
                a[d] = a[d] * wa + ob[d] * wb;
            lse[r] = l;
        }
        if (out)
            for (int64_t d = 0; d < D; d++)
                out[r * D + d] = a[d];
    }
}

void rt_add_f32(rt_act *out, const rt_act *x, const float *acc, int64_t n)
{
    RTCPU_PAR_FOR(n)
    for (int64_t i = 0; i < n; i++)
        out[i] = x[i] + acc[i];
}
