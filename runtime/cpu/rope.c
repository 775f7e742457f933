/* rope.c: rotary embedding, HF LLaMA rotate-half form. Frequencies and angles
 * are computed in double (pos * theta^(-2j/dim), LLaMA-3.1's scaling applied
 * to the frequency) and rounded once, more accurate than HF's fp32 inv_freq
 * products at long positions. y may alias x. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"
#include "simd.h"

/* Positions [s0, s1): angles, then every (outer, inner) row at them. */
RTCPU_CLONES static void rope_rows(rt_act *y, const rt_act *x, int64_t s0, int64_t s1,
                                   int64_t outer, int64_t seq, int64_t inner, int64_t dim,
                                   int64_t pos_offset, const double *freq, float sign, float *cs)
{
    int64_t half = dim / 2;
    float *sn = cs + half;
    for (int64_t s = s0; s < s1; s++) {
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
                RTCPU_SIMD
                for (int64_t j = 0; j < half; j++) {
                    float lo = xr[j], hi = xr[j + half];
                    yr[j] = lo * cs[j] - hi * sn[j];
                    yr[j + half] = hi * cs[j] + lo * sn[j];
                }
            }
    }
}

/* Rotate by pos * freq[j]; freq holds dim/2 frequencies. Blocks of
 * positions run in parallel, each computing its own angles. */
static void rope_apply(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner,
                       int64_t dim, int64_t pos_offset, const double *freq, bool inverse)
{
    float sign = inverse ? -1.0f : 1.0f; /* the transpose rotates by -a */
    enum { POS = 16 }; /* positions per parallel block */
    int64_t nb = (seq + POS - 1) / POS;
    RTCPU_PAR_FOR(outer * seq * inner * dim)
    for (int64_t b = 0; b < nb; b++) {
        float *cs = rtcpu_xmalloc((size_t)(dim ? dim : 1) * sizeof *cs);
        int64_t s1 = (b + 1) * POS < seq ? (b + 1) * POS : seq;
        rope_rows(y, x, b * POS, s1, outer, seq, inner, dim, pos_offset, freq, sign, cs);
        free(cs);
    }
}

static double *plain_freqs(int64_t dim, float theta)
{
    if (dim % 2)
        rt_fatal("rt_rope: head dim %lld is odd", (long long)dim);
    int64_t half = dim / 2;
    double *freq = rtcpu_xmalloc((size_t)(half ? half : 1) * sizeof *freq);
    for (int64_t j = 0; j < half; j++)
        freq[j] = pow((double)theta, -2.0 * (double)j / (double)dim);
    return freq;
}

void rt_rope(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
             int64_t pos_offset, float theta, bool inverse)
{
    double *freq = plain_freqs(dim, theta);
    rope_apply(y, x, outer, seq, inner, dim, pos_offset, freq, inverse);
    free(freq);
}

void rt_rope_llama3(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner,
                    int64_t dim, int64_t pos_offset, float theta, float factor,
                    float low_freq_factor, float high_freq_factor, float original_max_position,
                    bool inverse)
{
    if (!(factor > 0 && low_freq_factor > 0 && high_freq_factor > low_freq_factor &&
          original_max_position > 0))
        rt_fatal("rt_rope_llama3: invalid scaling (factor %g, low_freq_factor %g, "
                 "high_freq_factor %g, original_max_position %g)", factor, low_freq_factor,
                 high_freq_factor, original_max_position);
    double *freq = plain_freqs(dim, theta);
    double old = original_max_position, lo = low_freq_factor, hi = high_freq_factor;
    double lo_wavelen = old / lo, hi_wavelen = old / hi;
    for (int64_t j = 0; j < dim / 2; j++) {
        double f = freq[j], wavelen = 6.283185307179586477 / f; /* 2 pi / f */
        if (wavelen > lo_wavelen) {
            freq[j] = f / factor;
        } else if (!(wavelen < hi_wavelen)) { /* between: interpolate */
            double s = (old / wavelen - lo) / (hi - lo);
            freq[j] = (1 - s) * f / factor + s * f;
        }
    }
    rope_apply(y, x, outer, seq, inner, dim, pos_offset, freq, inverse);
    free(freq);
}
