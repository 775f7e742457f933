/* norm.c: RMSNorm (HF LlamaRMSNorm) and LayerNorm (torch, biased variance).
 * Row statistics are summed in double, in column order; parameter gradients
 * accumulate row by row in row order, so results are deterministic. */
#include <math.h>

#include "cpu.h"

void rt_rmsnorm_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t rows,
                    int64_t cols, float eps)
{
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *xr = x + r * cols;
        double ss = 0.0;
        for (int64_t j = 0; j < cols; j++)
            ss += (double)xr[j] * xr[j];
        float s = (float)(1.0 / sqrt(ss / (double)cols + (double)eps));
        rstd[r] = s;
        rt_act *yr = y + r * cols;
        for (int64_t j = 0; j < cols; j++)
            yr[j] = w[j] * (xr[j] * s); /* HF: weight * (x * rsqrt(var + eps)) */
    }
}

/* With xhat = x rstd and g = dy w:  dx = rstd (g - xhat mean(g xhat)),
 * dw += sum over rows of dy xhat. */
void rt_rmsnorm_bwd(rt_act *dx, rt_grad *dw, const rt_act *x, const rt_act *w, const float *rstd,
                    const rt_act *dy, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *xr = x + r * cols, *gr = dy + r * cols;
        float s = rstd[r];
        double dot = 0.0;
        for (int64_t j = 0; j < cols; j++)
            dot += (double)gr[j] * w[j] * xr[j];
        float c = (float)(dot * s * s / (double)cols); /* xhat mean(g xhat) = x c */
        rt_act *dxr = dx + r * cols;
        for (int64_t j = 0; j < cols; j++) {
            float xh = xr[j] * s;
            dw[j] += gr[j] * xh;
            dxr[j] = s * (gr[j] * w[j] - xr[j] * c);
        }
    }
}

void rt_layernorm_fwd(rt_act *y, float *mean, float *rstd, const rt_act *x, const rt_act *w,
                      const rt_act *b, int64_t rows, int64_t cols, float eps)
{
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *xr = x + r * cols;
        double sum = 0.0;
        for (int64_t j = 0; j < cols; j++)
            sum += xr[j];
        double mu = sum / (double)cols, var = 0.0;
        for (int64_t j = 0; j < cols; j++) {
            double d = xr[j] - mu;
            var += d * d;
        }
        float m = (float)mu, s = (float)(1.0 / sqrt(var / (double)cols + (double)eps));
        mean[r] = m;
        rstd[r] = s;
        rt_act *yr = y + r * cols;
        for (int64_t j = 0; j < cols; j++)
            yr[j] = (xr[j] - m) * s * w[j] + b[j];
    }
}

/* With xhat = (x - mean) rstd and g = dy w:
 * dx = rstd (g - mean(g) - xhat mean(g xhat)), dw += dy xhat, db += dy. */
void rt_layernorm_bwd(rt_act *dx, rt_grad *dw, rt_grad *db, const rt_act *x, const rt_act *w,
                      const float *mean, const float *rstd, const rt_act *dy, int64_t rows,
                      int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *xr = x + r * cols, *gr = dy + r * cols;
        float m = mean[r], s = rstd[r];
        double sg = 0.0, sgx = 0.0;
        for (int64_t j = 0; j < cols; j++) {
            double g = (double)gr[j] * w[j];
            sg += g;
            sgx += g * ((double)(xr[j] - m) * s);
        }
        float mg = (float)(sg / (double)cols), mgx = (float)(sgx / (double)cols);
        rt_act *dxr = dx + r * cols;
        for (int64_t j = 0; j < cols; j++) {
            float xh = (xr[j] - m) * s;
            dw[j] += gr[j] * xh;
            db[j] += gr[j];
            dxr[j] = s * (gr[j] * w[j] - mg - xh * mgx);
        }
    }
}
