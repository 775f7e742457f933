/* optim.c: gradient sum of squares and AdamW, as torch.optim.AdamW
 * (foreach=False) computes them: decay first, m by lerp, bias corrections in
 * double, denominator sqrt(v) / sqrt(1 - b2^t) + eps. */
#include <math.h>

#include "cpu.h"

void rt_sumsq(float *out, const rt_grad *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    *out += (float)s;
}

void rt_adamw(float *master, rt_act *param, const rt_grad *grad, float *m, float *v, int64_t n,
              float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
              int step)
{
    if (step < 1)
        rt_fatal("rt_adamw: step %d (steps count from 1)", step);
    double bc1 = 1.0 - pow((double)beta1, step), bc2 = 1.0 - pow((double)beta2, step);
    float step_size = (float)((double)lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    float decay = 1.0f - lr * weight_decay, w1 = 1.0f - beta1, w2 = 1.0f - beta2;
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i] * grad_scale;
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
