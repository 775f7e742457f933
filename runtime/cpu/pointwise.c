/* pointwise.c: activations, broadcast add/mul, row reduction, softmax. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

void rt_silu_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
}

/* d/dx x s(x) = s (1 + x (1 - s)) */
void rt_silu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float s = 1.0f / (1.0f + expf(-x[i]));
        dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
    }
}

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* GPT-2 gelu_new: 0.5 x (1 + tanh(k (x + c x^3))) */
void rt_gelu_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + GELU_C * v * v * v)));
    }
}

void rt_gelu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
        float du = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
}

static void check_bcast(int64_t n, int64_t nb, const char *what)
{
    if (nb < 1 || n % nb)
        rt_fatal("%s: %lld elements do not repeat a broadcast operand of %lld", what,
                 (long long)n, (long long)nb);
}

void rt_add(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb)
{
    if (n == 0)
        return;
    check_bcast(n, nb, "rt_add");
    for (int64_t r = 0; r < n; r += nb)
        for (int64_t j = 0; j < nb; j++)
            out[r + j] = a[r + j] + b[j];
}

void rt_mul(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb)
{
    if (n == 0)
        return;
    check_bcast(n, nb, "rt_mul");
    for (int64_t r = 0; r < n; r += nb)
        for (int64_t j = 0; j < nb; j++)
            out[r + j] = a[r + j] * b[j];
}

/* Column sums in double, rows in order. */
void rt_reduce_rows(rt_act *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate)
{
    double *acc = rtcpu_xmalloc((size_t)(cols ? cols : 1) * sizeof *acc);
    for (int64_t j = 0; j < cols; j++)
        acc[j] = 0.0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            acc[j] += in[i * cols + j];
    for (int64_t j = 0; j < cols; j++)
        out[j] = (float)(accumulate ? acc[j] + out[j] : acc[j]);
    free(acc);
}

/* On CPU gradients and activations are both float. */
void rt_reduce_rows_grad(rt_grad *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate)
{
    rt_reduce_rows(out, in, rows, cols, accumulate);
}

void rt_grad_add(rt_grad *acc, const rt_act *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] += x[i];
}

void rt_grad_sum(rt_grad *acc, const rt_grad *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] += x[i];
}

void rt_softmax_fwd(rt_act *y, const rt_act *x, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *xr = x + r * cols;
        rt_act *yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t j = 0; j < cols; j++)
            m = xr[j] > m ? xr[j] : m;
        double sum = 0.0;
        for (int64_t j = 0; j < cols; j++) {
            yr[j] = expf(xr[j] - m);
            sum += yr[j];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < cols; j++)
            yr[j] *= inv;
    }
}

/* dx = y (dy - sum(dy y)) */
void rt_softmax_bwd(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *yr = y + r * cols, *gr = dy + r * cols;
        double s = 0.0;
        for (int64_t j = 0; j < cols; j++)
            s += (double)gr[j] * yr[j];
        float sf = (float)s;
        rt_act *dxr = dx + r * cols;
        for (int64_t j = 0; j < cols; j++)
            dxr[j] = yr[j] * (gr[j] - sf);
    }
}
