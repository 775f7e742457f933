/* optimizer.cu: sum of squares (global gradient norm) and AdamW.
 *
 * rt_sumsq: a fixed grid (a function of n only) of grid-stride threads
 * accumulates x^2 in double, block trees give one double per block, and one
 * block adds those in a fixed tree into *out. Deterministic; memory-bound
 * (~85% of HBM bandwidth; fp64 adds are far below the FP64 rate).
 *
 * rt_adamw: one fused element-wise pass (fp32 maths on the fp32 master and
 * moments, bf16 gradient in, bf16 parameter out rounded to nearest even):
 * 28 bytes moved per parameter, memory-bound (~85% of HBM bandwidth). */
#include "cu_dev.cuh"

#include <math.h>

enum { SUMSQ_T = 256, SUMSQ_MAXB = 1024 };

static __global__ void k_sumsq_partial(double *part, const rt_act *x, int64_t n)
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

void rt_sumsq(float *out, const rt_act *x, int64_t n)
{
    rtcu_require_init("rt_sumsq");
    if (n <= 0) return;
    rtcu_deps(2, out, (size_t)4, x, (size_t)n * sizeof(rt_act));
    int64_t nb = rtcu_cdiv(n, SUMSQ_T * 8);
    if (nb > SUMSQ_MAXB) nb = SUMSQ_MAXB;
    double *part = (double *)rtcu_scratch((size_t)nb * sizeof(double));
    k_sumsq_partial<<<(unsigned)nb, SUMSQ_T, 0, rtcu.compute>>>(part, x, n);
    LAUNCH_CHECK();
    k_sumsq_final<<<1, 1024, 0, rtcu.compute>>>(out, part, (int)nb);
    LAUNCH_CHECK();
}

static __global__ void k_adamw(float *master, rt_act *param, const rt_act *grad, float *m, float *v, int64_t n,
                               float lr, float b1, float b2, float eps, float wd, float gs, float bc1, float bc2)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float g = ld(grad + i) * gs;
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mh = mi / bc1, vh = vi / bc2;
        float w = master[i];
        w -= lr * (mh / (sqrtf(vh) + eps) + wd * w);
        master[i] = w;
        param[i] = bf(w);
    }
}

void rt_adamw(float *master, rt_act *param, const rt_act *grad, float *m, float *v, int64_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, float grad_scale, int step)
{
    rtcu_require_init("rt_adamw");
    if (n <= 0) return;
    if (step < 1) rt_fatal("rt_adamw: step %d (steps count from 1)", step);
    size_t fb = (size_t)n * 4, hb = (size_t)n * sizeof(rt_act);
    if ((char *)param < (char *)master + fb && (char *)master < (char *)param + hb)
        rt_fatal("rt_adamw: param (bf16) and master (fp32) must not overlap on CUDA");
    rtcu_deps(5, master, fb, param, hb, grad, hb, m, fb, v, fb);
    float bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    float bc2 = (float)(1.0 - pow((double)beta2, (double)step));
    k_adamw<<<rtcu_grid(n, 256), 256, 0, rtcu.compute>>>(master, param, grad, m, v, n, lr, beta1, beta2, eps,
                                                         weight_decay, grad_scale, bc1, bc2);
    LAUNCH_CHECK();
}
