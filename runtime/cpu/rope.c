/* rope.c: rotary embedding, HF LLaMA rotate-half form. Angles are computed in
 * double (pos * theta^(-2j/dim)) and rounded once, more accurate than HF's
 * fp32 inv_freq products at long positions. y may alias x. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

void rt_rope(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
             int64_t pos_offset, float theta, bool inverse)
{
    if (dim % 2)
        rt_fatal("rt_rope: head dim %lld is odd", (long long)dim);
    int64_t half = dim / 2;
    float *cs = rtcpu_xmalloc((size_t)dim * sizeof *cs), *sn = cs + half;
    double *freq = rtcpu_xmalloc((size_t)(half ? half : 1) * sizeof *freq);
    for (int64_t j = 0; j < half; j++)
        freq[j] = pow((double)theta, -2.0 * (double)j / (double)dim);
    float sign = inverse ? -1.0f : 1.0f; /* the transpose rotates by -a */
    for (int64_t s = 0; s < seq; s++) {
        double pos = (double)(pos_offset + s);
        for (int64_t j = 0; j < half; j++) {
            double a = pos * freq[j];
            cs[j] = (float)cos(a);
            sn[j] = sign * (float)sin(a);
        }
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t base = ((o * seq + s) * inner + i) * dim;
                const rt_act *xr = x + base;
                rt_act *yr = y + base;
                for (int64_t j = 0; j < half; j++) {
                    float lo = xr[j], hi = xr[j + half];
                    yr[j] = lo * cs[j] - hi * sn[j];
                    yr[j + half] = hi * cs[j] + lo * sn[j];
                }
            }
    }
    free(freq);
    free(cs);
}
