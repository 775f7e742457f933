/* lamb.cu: LAMB's two passes on one shard, the same fp32 expressions as
 * runtime/cpu/lamb.c (rt.h states the maths).
 *
 * rt_lamb_prepare: one grid-stride pass updates m and v and accumulates
 * ||w||^2 and ||r||^2 in double; a fixed grid (a function of n only), block
 * trees and one final block make the sums deterministic, as rt_sumsq's.
 * rt_lamb_apply: one element-wise pass that recomputes r from m, v and the
 * master (no n-element buffer for r; the extra reads cost what a buffer's
 * write and read would) and writes the fp32 master and the bf16 parameter. */
#include "cu_dev.cuh"

#include <math.h>

enum { LAMB_T = 256, LAMB_MAXB = 1024 };

struct LambK {
    float b1, w1, b2, w2, ibc1, ibc2, eps, wd;
};

static LambK lamb_consts(float beta1, float beta2, float eps, float wd, int step, const char *who)
{
    if (step < 1) rt_fatal("%s: step %d (steps count from 1)", who, step);
    double bc1 = 1.0 - pow((double)beta1, step), bc2 = 1.0 - pow((double)beta2, step);
    LambK c = {beta1, 1.0f - beta1, beta2, 1.0f - beta2, (float)(1.0 / bc1), (float)(1.0 / bc2), eps, wd};
    return c;
}

static __device__ __forceinline__ float lamb_r(float mi, float vi, float w, const LambK &c)
{
    return (mi * c.ibc1) / (sqrtf(vi * c.ibc2) + c.eps) + c.wd * w;
}

static __global__ void k_lamb_prepare(double *part, const float *master, const rt_grad *grad, float *m, float *v,
                                      int64_t n, float gs, LambK c)
{
    __shared__ double sh[32];
    double sw = 0.0, sr = 0.0;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float g = ld(grad + i) * gs;
        float mi = c.b1 * m[i] + c.w1 * g;
        float vi = c.b2 * v[i] + c.w2 * g * g;
        m[i] = mi;
        v[i] = vi;
        float w = master[i], r = lamb_r(mi, vi, w, c);
        sw += (double)w * w;
        sr += (double)r * r;
    }
    sw = block_sum_d(sw, sh);
    sr = block_sum_d(sr, sh);
    if (threadIdx.x == 0) part[2 * blockIdx.x] = sw, part[2 * blockIdx.x + 1] = sr;
}

static __global__ void k_lamb_final(float *sums, const double *part, int nb)
{
    __shared__ double sh[32];
    double sw = 0.0, sr = 0.0;
    for (int i = threadIdx.x; i < nb; i += blockDim.x) sw += part[2 * i], sr += part[2 * i + 1];
    sw = block_sum_d(sw, sh);
    sr = block_sum_d(sr, sh);
    if (threadIdx.x == 0) sums[0] += (float)sw, sums[1] += (float)sr;
}

void rt_lamb_prepare(float *sums, const float *master, const rt_grad *grad, float *m, float *v, int64_t n,
                     float beta1, float beta2, float eps, float weight_decay, float grad_scale, int step)
{
    rtcu_require_init("rt_lamb_prepare");
    LambK c = lamb_consts(beta1, beta2, eps, weight_decay, step, "rt_lamb_prepare");
    if (n <= 0) return;
    size_t fb = (size_t)n * 4;
    rtcu_deps({{sums, (size_t)8}, {master, fb}, {grad, fb}, {m, fb}, {v, fb}});
    int64_t nb = rtcu_cdiv(n, LAMB_T * 8);
    if (nb > LAMB_MAXB) nb = LAMB_MAXB;
    double *part = (double *)rtcu_scratch((size_t)nb * 2 * sizeof(double));
    RTCU_LAUNCH(k_lamb_prepare, (unsigned)nb, LAMB_T, 0)(part, master, grad, m, v, n, grad_scale, c);
    LAUNCH_CHECK();
    RTCU_LAUNCH(k_lamb_final, 1, 1024, 0)(sums, part, (int)nb);
    LAUNCH_CHECK();
}

static __global__ void k_lamb_apply(float *master, rt_act *param, const float *m, const float *v, int64_t n,
                                    float step_size, LambK c)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float w = master[i];
        float p = w - step_size * lamb_r(m[i], v[i], w, c);
        master[i] = p;
        param[i] = bf(p);
    }
}

void rt_lamb_apply(float *master, rt_act *param, const float *m, const float *v, int64_t n, float lr, float beta1,
                   float beta2, float eps, float weight_decay, float trust, int step)
{
    rtcu_require_init("rt_lamb_apply");
    LambK c = lamb_consts(beta1, beta2, eps, weight_decay, step, "rt_lamb_apply");
    if (n <= 0) return;
    size_t fb = (size_t)n * 4, hb = (size_t)n * sizeof(rt_act);
    if ((char *)param < (char *)master + fb && (char *)master < (char *)param + hb)
        rt_fatal("rt_lamb_apply: param (bf16) and master (fp32) must not overlap on CUDA");
    rtcu_deps({{master, fb}, {param, hb}, {m, fb}, {v, fb}});
    float step_size = lr * trust; /* as the CPU backend: one fp32 product */
    RTCU_LAUNCH(k_lamb_apply, rtcu_grid(n, 256), 256, 0)(master, param, m, v, n, step_size, c);
    LAUNCH_CHECK();
}
