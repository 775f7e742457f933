/* attention_sink.cu: attention sinks on CUDA, the CPU backend's arithmetic
 * (runtime/common/attention_sink.h, shared by both). The forward rescales
 * each (row, head) of o in place and replaces its lse; the backward's
 * dsinks[h] is one block per head, its threads striding over the rows in
 * double and summing in a fixed tree: deterministic, no atomics. */
#include "common/attention_sink.h"
#include "cu_dev.cuh"

namespace {

__global__ void k_sink_fwd(rt_act *o, float *lse, const rt_act *sinks, int64_t rows, int64_t H, int64_t Dv)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * H; i += stride) {
        int64_t h = i % H;
        float l = lse[i], l2 = rt_sink_lse(l, ld(sinks + h)), c = rt_sink_scale(l, l2);
        for (int64_t d = 0; d < Dv; d++)
            o[i * Dv + d] = bf(ld(o + i * Dv + d) * c);
        lse[i] = l2;
    }
}

constexpr int kSinkThreads = 256;

__global__ void k_sink_bwd(rt_grad *dsinks, const rt_act *o, const float *lse, const rt_act *dout,
                           const rt_act *sinks, int64_t rows, int64_t H, int64_t Dv)
{
    __shared__ double part[kSinkThreads];
    int64_t h = blockIdx.x;
    float s = ld(sinks + h);
    double acc = 0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        const rt_act *x = o + (r * H + h) * Dv, *dx = dout + (r * H + h) * Dv;
        double dot = 0;
        for (int64_t d = 0; d < Dv; d++)
            dot += (double)ld(dx + d) * (double)ld(x + d);
        acc += (double)rt_sink_prob(s, lse[r * H + h]) * dot;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = kSinkThreads / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        dsinks[h] = (float)((double)dsinks[h] - part[0]);
}

} // namespace

void rt_attention_sink_fwd(rt_act *o, float *lse, const rt_act *sinks, int64_t rows, int64_t H,
                           int64_t Dv)
{
    rtcu_require_init("rt_attention_sink_fwd");
    if (rows <= 0 || H <= 0)
        return;
    rtcu_deps({{o, (size_t)(rows * H * Dv) * sizeof(rt_act)}, {lse, (size_t)(rows * H) * sizeof(float)},
               {sinks, (size_t)H * sizeof(rt_act)}});
    const int T = 256;
    RTCU_LAUNCH(k_sink_fwd, rtcu_grid(rows * H, T), T, 0)(o, lse, sinks, rows, H, Dv);
    LAUNCH_CHECK();
}

void rt_attention_sink_bwd(rt_grad *dsinks, const rt_act *o, const float *lse, const rt_act *dout,
                           const rt_act *sinks, int64_t rows, int64_t H, int64_t Dv)
{
    rtcu_require_init("rt_attention_sink_bwd");
    if (rows <= 0 || H <= 0)
        return;
    size_t act = (size_t)(rows * H * Dv) * sizeof(rt_act);
    rtcu_deps({{dsinks, (size_t)H * sizeof(rt_grad)}, {o, act}, {lse, (size_t)(rows * H) * sizeof(float)},
               {dout, act}, {sinks, (size_t)H * sizeof(rt_act)}});
    RTCU_LAUNCH(k_sink_bwd, dim3((unsigned)H), kSinkThreads, 0)(dsinks, o, lse, dout, sinks, rows, H, Dv);
    LAUNCH_CHECK();
}
