/* optimizer.cu: sum of squares (global gradient norm) and AdamW.
 *
 * rt_sumsq: a fixed grid (a function of n only) of grid-stride threads
 * accumulates x^2 in double, block trees give one double per block, and one
 * block adds those in a fixed tree into *out. Deterministic; memory-bound
 * (~85% of HBM bandwidth; fp64 adds are far below the FP64 rate).
 *
 * rt_adamw: one fused element-wise pass (fp32 maths on the fp32 master and
 * moments, fp32 gradient in, bf16 parameter out rounded to nearest even):
 * 30 bytes moved per parameter, memory-bound (~85% of HBM bandwidth). */
#include "cu_dev.cuh"

#include <math.h>

enum { SUMSQ_T = 256, SUMSQ_MAXB = 1024 };

static __global__ void k_sumsq_partial(double *part, const rt_grad *x, int64_t n)
{
    __shared__ double sh[32];
    double acc = 0.0;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double v = (double)ld(x + i);
        acc += v * v;
    }
    acc = block_sum_d(acc, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

static __global__ void k_sumsq_final(float *out, const double *part, int nb)
{
    __shared__ double sh[32];
    double acc = 0.0;
    for (int i = threadIdx.x; i < nb; i += blockDim.x) acc += part[i];
    acc = block_sum_d(acc, sh);
    if (threadIdx.x == 0) *out += (float)acc;
}

void rt_sumsq(float *out, const rt_grad *x, int64_t n)
{
    rtcu_require_init("rt_sumsq");
    if (n <= 0) return;
    rtcu_deps({{out, (size_t)4}, {x, (size_t)n * sizeof(rt_grad)}});
    int64_t nb = rtcu_cdiv(n, SUMSQ_T * 8);
    if (nb > SUMSQ_MAXB) nb = SUMSQ_MAXB;
    double *part = (double *)rtcu_scratch((size_t)nb * sizeof(double));
    RTCU_LAUNCH(k_sumsq_partial, (unsigned)nb, SUMSQ_T, 0)(part, x, n);
    LAUNCH_CHECK();
    RTCU_LAUNCH(k_sumsq_final, 1, 1024, 0)(out, part, (int)nb);
    LAUNCH_CHECK();
}

/* As torch.optim.AdamW (foreach=False) computes it: decay first, m by lerp,
 * step size lr / (1 - b1^t), denominator sqrt(v) / sqrt(1 - b2^t) + eps. */
static __global__ void k_adamw(float *master, rt_act *param, const rt_grad *grad, float *m, float *v, int64_t n,
                               float b2, float eps, float decay, float gs, float w1, float w2, float step_size,
                               float bc2_sqrt)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float g = ld(grad + i) * gs;
        float p = master[i] * decay;
        float mi = m[i] + w1 * (g - m[i]);
        float vi = v[i] * b2 + w2 * g * g;
        m[i] = mi;
        v[i] = vi;
        p -= step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
        master[i] = p;
        param[i] = bf(p);
    }
}

void rt_adamw(float *master, rt_act *param, const rt_grad *grad, float *m, float *v, int64_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, float grad_scale, int step)
{
    rtcu_require_init("rt_adamw");
    if (step < 1) rt_fatal("rt_adamw: step %d (steps count from 1)", step);
    if (n <= 0) return;
    size_t fb = (size_t)n * 4, hb = (size_t)n * sizeof(rt_act);
    if ((char *)param < (char *)master + fb && (char *)master < (char *)param + hb)
        rt_fatal("rt_adamw: param (bf16) and master (fp32) must not overlap on CUDA");
    rtcu_deps({{master, fb}, {param, hb}, {grad, fb}, {m, fb}, {v, fb}});
    double bc1 = 1.0 - pow((double)beta1, step), bc2 = 1.0 - pow((double)beta2, step);
    float step_size = (float)((double)lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float decay = 1.0f - lr * weight_decay;
    RTCU_LAUNCH(k_adamw, rtcu_grid(n, 256), 256, 0)(master, param, grad, m, v, n, beta2, eps, decay, grad_scale,
                                                         1.0f - beta1, 1.0f - beta2, step_size, bc2_sqrt);
    LAUNCH_CHECK();
}
