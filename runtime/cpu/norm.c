/* norm.c: RMSNorm (HF LlamaRMSNorm) and LayerNorm (torch, biased variance).
 *
 * Rows run on the rank's threads, each a vectorised loop; row statistics are
 * summed in double. Parameter gradients (dw, db) are sums over rows: each
 * chunk of RTCPU_CHUNK rows sums its rows in order into its own fp32 partial,
 * and the partials are added in chunk order (in double) onto dw, so the
 * result does not depend on the thread count. */
#include <math.h>

#include "cpu.h"
#include "simd.h"

RTCPU_CLONES static void rms_fwd_row(rt_act *y, float *rstd, const rt_act *x, const rt_act *w,
                                     int64_t cols, float eps)
{
    double ss = 0.0;
    RTCPU_SIMD_SUM(ss)
    for (int64_t j = 0; j < cols; j++)
        ss += (double)x[j] * x[j];
    float s = (float)(1.0 / sqrt(ss / (double)cols + (double)eps));
    *rstd = s;
    RTCPU_SIMD
    for (int64_t j = 0; j < cols; j++)
        y[j] = w[j] * (x[j] * s); /* HF: weight * (x * rsqrt(var + eps)) */
}

void rt_rmsnorm_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t rows,
                    int64_t cols, float eps)
{
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t r = 0; r < rows; r++)
        rms_fwd_row(y + r * cols, rstd + r, x + r * cols, w, cols, eps);
}

/* The add as rt_add does it (fp32), then the norm over the row just made,
 * still in cache. */
RTCPU_CLONES static void add_row(rt_act *s, const rt_act *a, const rt_act *b, int64_t cols)
{
    RTCPU_SIMD
    for (int64_t j = 0; j < cols; j++)
        s[j] = a[j] + b[j];
}

void rt_add_rmsnorm_fwd(rt_act *sum, rt_act *y, float *rstd, const rt_act *a, const rt_act *b,
                        const rt_act *w, int64_t rows, int64_t cols, float eps)
{
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r * cols;
        add_row(sum + o, a + o, b + o, cols);
        rms_fwd_row(y + o, rstd + r, sum + o, w, cols, eps);
    }
}

/* With xhat = x rstd and g = dy w:  dx = rstd (g - xhat mean(g xhat)),
 * dw += sum over rows of dy xhat. One chunk of rows: dx, and its dw partial. */
RTCPU_CLONES static void rms_bwd_chunk(rt_act *dx, float *dwp, const rt_act *x, const rt_act *w,
                                       const float *rstd, const rt_act *dy, const rt_act *dres,
                                       int64_t rows, int64_t cols)
{
    for (int64_t j = 0; j < cols; j++)
        dwp[j] = 0.0f;
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *xr = x + r * cols, *gr = dy + r * cols;
        float s = rstd[r];
        double dot = 0.0;
        RTCPU_SIMD_SUM(dot)
        for (int64_t j = 0; j < cols; j++)
            dot += (double)gr[j] * w[j] * xr[j];
        float c = (float)(dot * s * s / (double)cols); /* xhat mean(g xhat) = x c */
        rt_act *dxr = dx + r * cols;
        if (dres) { /* the same value, then the residual's term: as a separate rt_add */
            const rt_act *rr = dres + r * cols;
            RTCPU_SIMD
            for (int64_t j = 0; j < cols; j++) {
                float g = gr[j];
                dwp[j] += g * (xr[j] * s);
                dxr[j] = rr[j] + s * (g * w[j] - xr[j] * c);
            }
            continue;
        }
        RTCPU_SIMD
        for (int64_t j = 0; j < cols; j++) {
            float g = gr[j];
            dwp[j] += g * (xr[j] * s);
            dxr[j] = s * (g * w[j] - xr[j] * c);
        }
    }
}

/* dw[j] += the partials part[c][j], c in order. */
static void add_partials(rt_act *dw, const float *part, int64_t nc, int64_t cols)
{
    for (int64_t j = 0; j < cols; j++) {
        double s = 0.0;
        for (int64_t c = 0; c < nc; c++)
            s += part[c * cols + j];
        dw[j] = (float)((double)dw[j] + s);
    }
}

void rt_rmsnorm_bwd(rt_act *dx, rt_grad *dw, const rt_act *x, const rt_act *w, const float *rstd,
                    const rt_act *dy, const rt_act *dres, int64_t rows, int64_t cols)
{
    int64_t nc = (rows + RTCPU_CHUNK - 1) / RTCPU_CHUNK;
    float *part = rtcpu_scratch(1, (size_t)(nc ? nc : 1) * (size_t)cols * sizeof *part);
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t c = 0; c < nc; c++) {
        int64_t r0 = c * RTCPU_CHUNK, nr = rows - r0 < RTCPU_CHUNK ? rows - r0 : RTCPU_CHUNK;
        int64_t o = r0 * cols;
        rms_bwd_chunk(dx + o, part + c * cols, x + o, w, rstd + r0, dy + o, dres ? dres + o : NULL, nr,
                      cols);
    }
    add_partials(dw, part, nc, cols);
}

void rt_rmsnorm_group_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t rows,
                          int64_t groups, int64_t cols, float eps)
{
    RTCPU_PAR_FOR(rows * groups * cols)
    for (int64_t r = 0; r < rows * groups; r++)
        rms_fwd_row(y + r * cols, rstd + r, x + r * cols, w + (r % groups) * cols, cols, eps);
}

/* dw one (group, column) at a time over the rows in order (the same sum
 * whatever the thread count); then dx row by row, each group's row against
 * its weights, as rms_bwd_chunk. */
void rt_rmsnorm_group_bwd(rt_act *dx, rt_grad *dw, const rt_act *x, const rt_act *w, const float *rstd,
                          const rt_act *dy, const rt_act *dres, int64_t rows, int64_t groups, int64_t cols)
{
    int64_t R = rows * groups;
    if (dw) { /* first: dx may be dy's buffer */
        RTCPU_PAR_FOR(R * cols)
        for (int64_t gj = 0; gj < groups * cols; gj++) {
            int64_t g = gj / cols, j = gj % cols;
            double acc = 0.0;
            for (int64_t r = 0; r < rows; r++) {
                int64_t o = (r * groups + g) * cols + j;
                acc += (double)(dy[o] * (x[o] * rstd[r * groups + g]));
            }
            dw[gj] = (float)((double)dw[gj] + acc);
        }
    }
    RTCPU_PAR_FOR(R * cols)
    for (int64_t r = 0; r < R; r++) {
        const rt_act *xr = x + r * cols, *gr = dy + r * cols, *wr = w + (r % groups) * cols;
        float s = rstd[r];
        double dot = 0.0;
        for (int64_t j = 0; j < cols; j++)
            dot += (double)gr[j] * wr[j] * xr[j];
        float c = (float)(dot * s * s / (double)cols);
        rt_act *dxr = dx + r * cols;
        for (int64_t j = 0; j < cols; j++)
            dxr[j] = (dres ? dres[r * cols + j] : 0.0f) + s * (gr[j] * wr[j] - xr[j] * c);
    }
}

RTCPU_CLONES static void ln_fwd_row(rt_act *y, float *mean, float *rstd, const rt_act *x,
                                    const rt_act *w, const rt_act *b, int64_t cols, float eps)
{
    double sum = 0.0;
    RTCPU_SIMD_SUM(sum)
    for (int64_t j = 0; j < cols; j++)
        sum += x[j];
    double mu = sum / (double)cols, var = 0.0;
    RTCPU_SIMD_SUM(var)
    for (int64_t j = 0; j < cols; j++) {
        double d = x[j] - mu;
        var += d * d;
    }
    float m = (float)mu, s = (float)(1.0 / sqrt(var / (double)cols + (double)eps));
    *mean = m;
    *rstd = s;
    RTCPU_SIMD
    for (int64_t j = 0; j < cols; j++)
        y[j] = (x[j] - m) * s * w[j] + b[j];
}

void rt_layernorm_fwd(rt_act *y, float *mean, float *rstd, const rt_act *x, const rt_act *w,
                      const rt_act *b, int64_t rows, int64_t cols, float eps)
{
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t r = 0; r < rows; r++)
        ln_fwd_row(y + r * cols, mean + r, rstd + r, x + r * cols, w, b, cols, eps);
}

void rt_add_layernorm_fwd(rt_act *sum, rt_act *y, float *mean, float *rstd, const rt_act *x0,
                          const rt_act *x1, const rt_act *w, const rt_act *b, int64_t rows,
                          int64_t cols, float eps)
{
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r * cols;
        add_row(sum + o, x0 + o, x1 + o, cols);
        ln_fwd_row(y + o, mean + r, rstd + r, sum + o, w, b, cols, eps);
    }
}

/* With xhat = (x - mean) rstd and g = dy w:
 * dx = rstd (g - mean(g) - xhat mean(g xhat)), dw += dy xhat, db += dy. */
RTCPU_CLONES static void ln_bwd_chunk(rt_act *dx, float *dwp, float *dbp, const rt_act *x,
                                      const rt_act *w, const float *mean, const float *rstd,
                                      const rt_act *dy, const rt_act *dres, int64_t rows,
                                      int64_t cols)
{
    for (int64_t j = 0; j < cols; j++)
        dwp[j] = dbp[j] = 0.0f;
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *xr = x + r * cols, *gr = dy + r * cols;
        float m = mean[r], s = rstd[r];
        double sg = 0.0, sgx = 0.0;
        RTCPU_PRAGMA(omp simd reduction(+ : sg, sgx))
        for (int64_t j = 0; j < cols; j++) {
            double g = (double)gr[j] * w[j];
            sg += g;
            sgx += g * ((double)(xr[j] - m) * s);
        }
        float mg = (float)(sg / (double)cols), mgx = (float)(sgx / (double)cols);
        rt_act *dxr = dx + r * cols;
        if (dres) {
            const rt_act *rr = dres + r * cols;
            RTCPU_SIMD
            for (int64_t j = 0; j < cols; j++) {
                float g = gr[j], xh = (xr[j] - m) * s;
                dwp[j] += g * xh;
                dbp[j] += g;
                dxr[j] = rr[j] + s * (g * w[j] - mg - xh * mgx);
            }
            continue;
        }
        RTCPU_SIMD
        for (int64_t j = 0; j < cols; j++) {
            float g = gr[j], xh = (xr[j] - m) * s;
            dwp[j] += g * xh;
            dbp[j] += g;
            dxr[j] = s * (g * w[j] - mg - xh * mgx);
        }
    }
}

void rt_layernorm_bwd(rt_act *dx, rt_grad *dw, rt_grad *db, const rt_act *x, const rt_act *w,
                      const float *mean, const float *rstd, const rt_act *dy, const rt_act *dres,
                      int64_t rows, int64_t cols)
{
    int64_t nc = (rows + RTCPU_CHUNK - 1) / RTCPU_CHUNK;
    float *part = rtcpu_scratch(1, 2 * (size_t)(nc ? nc : 1) * (size_t)cols * sizeof *part);
    float *dbpart = part + nc * cols;
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t c = 0; c < nc; c++) {
        int64_t r0 = c * RTCPU_CHUNK, nr = rows - r0 < RTCPU_CHUNK ? rows - r0 : RTCPU_CHUNK;
        int64_t o = r0 * cols;
        ln_bwd_chunk(dx + o, part + c * cols, dbpart + c * cols, x + o, w, mean + r0, rstd + r0,
                     dy + o, dres ? dres + o : NULL, nr, cols);
    }
    add_partials(dw, part, nc, cols);
    add_partials(db, dbpart, nc, cols);
}
