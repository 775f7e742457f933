/* cost_kern.c: the runtime's memory-bound kernels and its attention kernel,
 * one call at a time, and the curves measured rates are kept in.
 *
 * pass_kernel_bytes is the one count of each kernel's traffic: the cost of
 * an operator (cost_ops.c) sums the calls codegen makes for it, and
 * calibration divides the same count by the measured time, so a measured
 * device reproduces its measurements exactly at the measured sizes and
 * interpolates between them. Statistics (rstd, mean, lse) are fp32. */
#include "cost/cost.h"

#include <math.h>

const char *const pass_kernel_names[PASS_NKERN] = {
#define X(id, name) name,
    PASS_KERNELS(X)
#undef X
};

double pass_curve_at(const PassCurve *c, double x)
{
    if (c->n <= 0)
        return 0;
    if (x <= c->x[0])
        return c->y[0];
    for (int i = 1; i < c->n; i++)
        if (x <= c->x[i]) {
            double f = log(x / c->x[i - 1]) / log(c->x[i] / c->x[i - 1]);
            return c->y[i - 1] + f * (c->y[i] - c->y[i - 1]);
        }
    return c->y[c->n - 1];
}

double pass_kernel_bytes(PassKernel k, double rows, double cols, int eb)
{
    double n = rows * cols, e = eb;
    switch (k) {
    case PASS_K_RMSNORM_FWD: return 2 * e * n + 4 * rows;      /* x in, y out, rstd out */
    case PASS_K_RMSNORM_BWD: return 3 * e * n + 4 * rows;      /* x, dy in, dx out, rstd in */
    case PASS_K_ADD_RMSNORM_FWD: return 4 * e * n + 4 * rows;  /* a, b in, sum, y, rstd out */
    case PASS_K_LAYERNORM_FWD: return 2 * e * n + 8 * rows;
    case PASS_K_LAYERNORM_BWD: return 3 * e * n + 8 * rows;
    case PASS_K_ADD_LAYERNORM_FWD: return 4 * e * n + 8 * rows;
    case PASS_K_SILU_FWD:
    case PASS_K_GELU_FWD: return 2 * e * n;
    case PASS_K_SILU_BWD:
    case PASS_K_GELU_BWD: return 3 * e * n;                    /* x, dy in, dx out */
    case PASS_K_SWIGLU_FWD: return 3 * e * n;                  /* gate, up in, y out */
    case PASS_K_SWIGLU_BWD: return 5 * e * n;                  /* gate, up, dy in, dgate, dup out */
    case PASS_K_ADD:
    case PASS_K_MUL: return 3 * e * n;
    case PASS_K_ADD_BCAST: return 2 * e * n + e * cols;
    case PASS_K_REDUCE_ROWS: return e * n + e * cols;
    case PASS_K_SOFTMAX_FWD: return 2 * e * n;
    case PASS_K_SOFTMAX_BWD: return 3 * e * n;
    case PASS_K_ROPE: return 2 * e * n;
    case PASS_K_EMBEDDING_FWD: return 2 * e * n + 4 * rows;    /* rows = tokens, cols = dim */
    case PASS_K_EMBEDDING_BWD: return 3 * e * n + 4 * rows;    /* dy in, table rows read+written */
    case PASS_K_CROSS_ENTROPY_FWD: return 2 * e * n + 8 * rows; /* logits read twice, lse out */
    case PASS_K_CROSS_ENTROPY_BWD: return 2 * e * n + 8 * rows; /* logits in, dlogits out */
    /* grad and weight in the backend's type; master, m, v fp32, read and written */
    case PASS_K_ADAMW: return (2 * e + 24) * n;
    case PASS_K_SUMSQ: return e * n;
    case PASS_K_COPY: return 2 * e * n;
    case PASS_K_ZERO: return e * n;
    case PASS_NKERN: break;
    }
    return 0;
}

double pass_kernel_time(const PassGpu *gpu, PassKernel k, double rows, double cols)
{
    if (rows <= 0 || cols <= 0)
        return 0;
    int eb = gpu->act_bytes > 0 ? gpu->act_bytes : 2;
    double b = pass_kernel_bytes(k, rows, cols, eb);
    const PassCurve *c = &gpu->kern[k];
    if (c->n <= 0)
        return pass_mem_time(gpu, b, 1);
    /* Below the smallest measured call, the per-call overhead dominates:
     * take that call's time as the floor. */
    if (b <= c->x[0])
        return c->x[0] / c->y[0];
    return b / pass_curve_at(c, b);
}

double pass_attn_rate(const PassGpu *gpu, int bwd, double D, double S)
{
    int n = gpu->attn_dims;
    if (n <= 0)
        return 0;
    const PassCurve *cv = bwd ? gpu->attn_bwd : gpu->attn_fwd;
    /* Bracketing measured head dims, linear in D between them. */
    int lo = -1, hi = -1;
    for (int i = 0; i < n; i++) {
        if (gpu->attn_dim[i] <= D && (lo < 0 || gpu->attn_dim[i] > gpu->attn_dim[lo]))
            lo = i;
        if (gpu->attn_dim[i] >= D && (hi < 0 || gpu->attn_dim[i] < gpu->attn_dim[hi]))
            hi = i;
    }
    if (lo < 0)
        return pass_curve_at(&cv[hi], S);
    if (hi < 0 || hi == lo)
        return pass_curve_at(&cv[lo], S);
    double f = (D - gpu->attn_dim[lo]) / (gpu->attn_dim[hi] - gpu->attn_dim[lo]);
    return (1 - f) * pass_curve_at(&cv[lo], S) + f * pass_curve_at(&cv[hi], S);
}
