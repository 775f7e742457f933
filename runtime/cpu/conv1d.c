/* conv1d.c: Mamba's causal depthwise convolution over the sequence
 * (rt.h). Channels are independent, so the rank's threads split them;
 * each channel's weight and bias gradients are summed by one thread over
 * (sequence, position) in a fixed order, in double (deterministic). */
#include "cpu.h"
#include "simd.h"

void rt_conv1d_fwd(rt_act *y, const rt_act *x, const rt_act *w, const rt_act *b, int64_t batch, int64_t seq,
                   int64_t ch, int64_t k)
{
    RTCPU_PAR_FOR(batch * seq * ch * k)
    for (int64_t c = 0; c < ch; c++)
        for (int64_t s = 0; s < batch; s++)
            for (int64_t t = 0; t < seq; t++) {
                const rt_act *xs = x + s * seq * ch + c;
                float acc = b[c];
                for (int64_t j = 0; j < k; j++) {
                    int64_t u = t - k + 1 + j;
                    if (u >= 0)
                        acc += w[c * k + j] * xs[u * ch];
                }
                y[(s * seq + t) * ch + c] = acc;
            }
}

void rt_conv1d_bwd(rt_act *dx, rt_grad *dw, rt_grad *db, const rt_act *x, const rt_act *w, const rt_act *dy,
                   int64_t batch, int64_t seq, int64_t ch, int64_t k)
{
    if (k > 64)
        rt_fatal("rt_conv1d_bwd: a kernel of %lld taps (at most 64)", (long long)k);
    RTCPU_PAR_FOR(batch * seq * ch * k)
    for (int64_t c = 0; c < ch; c++) {
        double gb = 0, gw[64] = {0};
        for (int64_t s = 0; s < batch; s++) {
            const rt_act *xs = x + s * seq * ch + c, *gs = dy + s * seq * ch + c;
            for (int64_t t = 0; t < seq; t++) {
                /* dx[t] = sum_j w[j] dy[t + k - 1 - j] */
                float acc = 0;
                for (int64_t j = 0; j < k; j++) {
                    int64_t u = t + k - 1 - j;
                    if (u < seq)
                        acc += w[c * k + j] * gs[u * ch];
                }
                dx[(s * seq + t) * ch + c] = acc;
                gb += gs[t * ch];
                for (int64_t j = 0; j < k; j++) {
                    int64_t u = t - k + 1 + j;
                    if (u >= 0)
                        gw[j] += (double)gs[t * ch] * xs[u * ch];
                }
            }
        }
        db[c] = (float)((double)db[c] + gb);
        for (int64_t j = 0; j < k; j++)
            dw[c * k + j] = (float)((double)dw[c * k + j] + gw[j]);
    }
}
