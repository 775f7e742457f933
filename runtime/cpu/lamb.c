/* lamb.c: LAMB's two passes on one shard (rt.h states the maths). prepare
 * updates the moments and sums ||w||^2 and ||r||^2 in double over blocks of
 * RTCPU_SUM_CHUNK elements added in block order (the same bits on any thread
 * count); apply recomputes r from the same fp32 values with the same
 * expression, so the r it applies is the r whose norm was taken. */
#include <math.h>

#include "cpu.h"
#include "simd.h"

typedef struct {
    float b1, w1, b2, w2, ibc1, ibc2, eps, wd;
} Lamb;

static Lamb lamb_consts(float beta1, float beta2, float eps, float wd, int step, const char *who)
{
    if (step < 1)
        rt_fatal("%s: step %d (steps count from 1)", who, step);
    double bc1 = 1.0 - pow((double)beta1, step), bc2 = 1.0 - pow((double)beta2, step);
    Lamb c = {beta1, 1.0f - beta1, beta2, 1.0f - beta2, (float)(1.0 / bc1), (float)(1.0 / bc2),
              eps, wd};
    return c;
}

/* The update direction of one element; one definition for both passes. */
static inline float lamb_r(float mi, float vi, float w, const Lamb *c)
{
    return (mi * c->ibc1) / (sqrtf(vi * c->ibc2) + c->eps) + c->wd * w;
}

RTCPU_CLONES static void prepare_blk(double *ws, double *rs, const float *master,
                                     const rt_grad *grad, float *m, float *v, int64_t n,
                                     float gs, const Lamb *c)
{
    const Lamb k = *c;
    double sw = 0.0, sr = 0.0;
    RTCPU_PRAGMA(omp simd reduction(+ : sw, sr))
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i] * gs;
        float mi = k.b1 * m[i] + k.w1 * g;
        float vi = k.b2 * v[i] + k.w2 * g * g;
        m[i] = mi;
        v[i] = vi;
        float w = master[i], r = lamb_r(mi, vi, w, &k);
        sw += (double)w * w;
        sr += (double)r * r;
    }
    *ws = sw;
    *rs = sr;
}

void rt_lamb_prepare(float *sums, const float *master, const rt_grad *grad, float *m, float *v,
                     int64_t n, float beta1, float beta2, float eps, float weight_decay,
                     float grad_scale, int step)
{
    Lamb c = lamb_consts(beta1, beta2, eps, weight_decay, step, "rt_lamb_prepare");
    if (n <= 0)
        return;
    int64_t nb = (n + RTCPU_SUM_CHUNK - 1) / RTCPU_SUM_CHUNK;
    double *part = rtcpu_scratch(1, (size_t)nb * 2 * sizeof *part);
    RTCPU_PAR_FOR(n)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * RTCPU_SUM_CHUNK, len = n - lo < RTCPU_SUM_CHUNK ? n - lo : RTCPU_SUM_CHUNK;
        prepare_blk(part + 2 * b, part + 2 * b + 1, master + lo, grad + lo, m + lo, v + lo, len,
                    grad_scale, &c);
    }
    double sw = 0.0, sr = 0.0;
    for (int64_t b = 0; b < nb; b++)
        sw += part[2 * b], sr += part[2 * b + 1];
    sums[0] += (float)sw;
    sums[1] += (float)sr;
}

RTCPU_CLONES static void apply_blk(float *master, rt_act *param, const float *m, const float *v,
                                   int64_t n, float step_size, const Lamb *c)
{
    const Lamb k = *c;
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++) {
        float p = master[i] - step_size * lamb_r(m[i], v[i], master[i], &k);
        master[i] = p;
        param[i] = p;
    }
}

void rt_lamb_apply(float *master, rt_act *param, const float *m, const float *v, int64_t n,
                   float lr, float beta1, float beta2, float eps, float weight_decay, float trust,
                   int step)
{
    Lamb c = lamb_consts(beta1, beta2, eps, weight_decay, step, "rt_lamb_apply");
    /* lr * trust in fp32 once: the per-element product is then one rounding. */
    float step_size = lr * trust;
    enum { BLK = 8192 };
    int64_t nb = (n + BLK - 1) / BLK;
    RTCPU_PAR_FOR(n)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * BLK, len = n - lo < BLK ? n - lo : BLK;
        apply_blk(master + lo, param + lo, m + lo, v + lo, len, step_size, &c);
    }
}
