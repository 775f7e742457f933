/* attention_sink.c: attention sinks on the CPU (the arithmetic and why:
 * runtime/common/attention_sink.h). Runs after any forward attention kernel
 * (plain, v-head, context-parallel) on its o and lse, and before the
 * matching backward, which then reads o' and lse'. */
#include "common/attention_sink.h"
#include "cpu.h"

void rt_attention_sink_fwd(rt_act *o, float *lse, const rt_act *sinks, int64_t rows, int64_t H, int64_t Dv)
{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < H; h++) {
            float l = lse[r * H + h], l2 = rt_sink_lse(l, (float)sinks[h]), c = rt_sink_scale(l, l2);
            rt_act *x = o + (r * H + h) * Dv;
            for (int64_t d = 0; d < Dv; d++)
                x[d] = x[d] * c;
            lse[r * H + h] = l2;
        }
}

void rt_attention_sink_bwd(rt_grad *dsinks, const rt_act *o, const float *lse, const rt_act *dout,
                           const rt_act *sinks, int64_t rows, int64_t H, int64_t Dv)
{
#pragma omp parallel for schedule(static)
    for (int64_t h = 0; h < H; h++) {
        double acc = 0;
        for (int64_t r = 0; r < rows; r++) {
            const rt_act *x = o + (r * H + h) * Dv, *dx = dout + (r * H + h) * Dv;
            double dot = 0;
            for (int64_t d = 0; d < Dv; d++)
                dot += (double)dx[d] * (double)x[d];
            acc += (double)rt_sink_prob((float)sinks[h], lse[r * H + h]) * dot;
        }
        dsinks[h] = (float)((double)dsinks[h] - acc);
    }
}
