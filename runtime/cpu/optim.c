/* optim.c: gradient sum of squares and AdamW, as torch.optim.AdamW
 * (foreach=False) computes them: decay first, m by lerp, bias corrections in
 * double, denominator sqrt(v) / sqrt(1 - b2^t) + eps. Both run blocks on the
 * rank's threads, each a vectorised loop (simd.h). */
#include <math.h>

#include "cpu.h"
#include "simd.h"

RTCPU_CLONES static double sumsq_blk(const rt_act *x, int64_t n)
{
    double s = 0.0;
    RTCPU_SIMD_SUM(s)
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

/* In double: blocks of RTCPU_SUM_CHUNK elements, added in block order
 * whatever the thread count. */
void rt_sumsq(float *out, const rt_grad *x, int64_t n)
{
    int64_t nb = (n + RTCPU_SUM_CHUNK - 1) / RTCPU_SUM_CHUNK;
    if (nb <= 1) {
        *out += (float)(n > 0 ? sumsq_blk(x, n) : 0.0);
        return;
    }
    double *part = rtcpu_scratch(1, (size_t)nb * sizeof *part);
    RTCPU_PAR_FOR(n)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * RTCPU_SUM_CHUNK, len = n - lo < RTCPU_SUM_CHUNK ? n - lo : RTCPU_SUM_CHUNK;
        part[b] = sumsq_blk(x + lo, len);
    }
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++)
        s += part[b];
    *out += (float)s;
}

typedef struct {
    float step_size, bc2_sqrt, decay, w1, w2, beta2, eps, grad_scale;
} Adam;

RTCPU_CLONES static void adamw_blk(float *master, rt_act *param, const rt_act *grad, float *m,
                                   float *v, int64_t n, const Adam *a)
{
    const float step_size = a->step_size, bc2_sqrt = a->bc2_sqrt, decay = a->decay, w1 = a->w1,
                w2 = a->w2, beta2 = a->beta2, eps = a->eps, gs = a->grad_scale;
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i] * gs;
        float p = master[i] * decay;
        float mi = m[i] + w1 * (g - m[i]); /* torch lerp_(g, 1 - beta1) */
        float vi = v[i] * beta2 + w2 * g * g;
        m[i] = mi;
        v[i] = vi;
        p -= step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
        master[i] = p;
        param[i] = p;
    }
}

void rt_adamw(float *master, rt_act *param, const rt_grad *grad, float *m, float *v, int64_t n,
              float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
              int step)
{
    if (step < 1)
        rt_fatal("rt_adamw: step %d (steps count from 1)", step);
    double bc1 = 1.0 - pow((double)beta1, step), bc2 = 1.0 - pow((double)beta2, step);
    Adam a = {(float)((double)lr / bc1), (float)sqrt(bc2), 1.0f - lr * weight_decay,
              1.0f - beta1, 1.0f - beta2, beta2, eps, grad_scale};
    enum { BLK = 8192 };
    int64_t nb = (n + BLK - 1) / BLK;
    RTCPU_PAR_FOR(n)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * BLK, len = n - lo < BLK ? n - lo : BLK;
        adamw_blk(master + lo, param + lo, grad + lo, m + lo, v + lo, len, &a);
    }
}
