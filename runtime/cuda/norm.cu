/* norm.cu: RMSNorm and LayerNorm, forward and backward.
 *
 * Forward: a block per row; fixed-tree block reductions in fp32 (LayerNorm
 * computes the mean first, then the biased variance of x - mean); the
 * statistics (rstd, mean) are written in fp32; y rounded once to bf16.
 * Backward: a block per group of consecutive rows (rtcu_row_groups); for each
 * row the block reduces the row's dot products, writes dx, and adds the row's
 * weight-gradient terms into its own fp32 partial row (no other block touches
 * it); rtcu_colsum_final then adds the groups in a fixed order into dw (and
 * db), fp32 gradients (rt_grad). Deterministic, no atomics. All passes are memory-bound (x and dy read
 * twice, the second time from L1/L2): expect ~60-80% of HBM bandwidth.
 * RMSNorm has a second pair of kernels with 16-byte accesses for widths that
 * are multiples of 8 (every model's d_model): the scalar ones measured
 * 1.1 TB/s forward and 0.7 TB/s backward on an H100 (docs/cuda.md).
 *
 * A NULL w means ones, a NULL b zeros; a NULL dw or db is not computed. A
 * non-NULL dres (which may be dx) is added into dx in the same pass: the
 * residual stream's other gradient, one read instead of an rt_add's three
 * accesses (docs/codegen.md). */
#include "cu_dev.cuh"

static int norm_threads(int64_t cols)
{
    int64_t w = rtcu_cdiv(cols, 32);
    return 32 * (int)(w < 8 ? (w < 1 ? 1 : w) : 8);
}

static __device__ __forceinline__ float wv(const rt_act *w, int64_t j) { return w ? ld(w + j) : 1.0f; }

/* Element j of a forward norm's input: x[j], or with ADD (the residual add
 * fused in front) the sum x[j] + x1[j], rounded to bf16 as rt_add stores it
 * and written to sum[j]. */
template <bool ADD>
static __device__ __forceinline__ float ld_in(const rt_act *x, const rt_act *x1, rt_act *sum, int64_t j)
{
    float v = ld(x + j);
    if (ADD) {
        rt_act h = bf(v + ld(x1 + j));
        sum[j] = h;
        v = ld(&h);
    }
    return v;
}

/* ------------------------------------------------------------- RMSNorm */
/* ADD: rt_add_rmsnorm_fwd, the residual add fused in front: the first pass
 * makes the sum of x and b (rounded to bf16, as rt_add stores it), writes it
 * and reduces its squares; the second reads it back from L1/L2 (each thread
 * its own columns), so HBM sees x and b read once and sum and y written
 * once, and the results are bitwise rt_add's then the plain kernel's. */
template <bool ADD>
static __global__ void k_rms_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t cols,
                                 float eps, const rt_act *b, rt_act *sum)
{
    __shared__ float sh[32];
    int64_t off = (int64_t)blockIdx.x * cols;
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = ld_in<ADD>(x, b, sum, off + j);
        ss += v * v;
    }
    if (ADD) x = sum;
    ss = block_sum(ss, sh);
    float r = 1.0f / sqrtf(ss / (float)cols + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[off + j] = bf(wv(w, j) * (ld(x + off + j) * r)); /* HF: w * (x * rstd) */
}

/* The same with 16-byte accesses, eight consecutive columns per thread
 * (cols % 8 == 0, every buffer 16-byte aligned): one load instruction where
 * the kernel above issues eight. The sum of squares runs in another order,
 * the same every run. */
static __device__ __forceinline__ void wv8(float *f, const rt_act *w, int64_t j)
{
    if (w)
        bf8_load(f, w + j);
    else
        for (int i = 0; i < 8; i++) f[i] = 1.0f;
}

template <bool ADD>
static __global__ void k_rms_fwd8(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t cols,
                                  float eps, const rt_act *b, rt_act *sum)
{
    __shared__ float sh[32];
    int64_t off = (int64_t)blockIdx.x * cols;
    float ss = 0.0f, v[8], u[8], wf[8], o[8];
    for (int64_t j = 8 * (int64_t)threadIdx.x; j < cols; j += 8 * (int64_t)blockDim.x) {
        bf8_load(v, x + off + j);
        if (ADD) {
            bf8_load(u, b + off + j);
            for (int i = 0; i < 8; i++) v[i] = __bfloat162float(bf(v[i] + u[i]));
            bf8_store(sum + off + j, v); /* exact: v holds bf16 values */
        }
        for (int i = 0; i < 8; i++) ss += v[i] * v[i];
    }
    if (ADD) x = sum;
    ss = block_sum(ss, sh);
    float r = 1.0f / sqrtf(ss / (float)cols + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
    for (int64_t j = 8 * (int64_t)threadIdx.x; j < cols; j += 8 * (int64_t)blockDim.x) {
        bf8_load(v, x + off + j);
        wv8(wf, w, j);
        for (int i = 0; i < 8; i++) o[i] = wf[i] * (v[i] * r);
        bf8_store(y + off + j, o);
    }
}

/* dx = r (w dy - x r^2 mean(w dy x)) [+ dres];  dw_j += dy_j x_j r */
static __global__ void k_rms_bwd(rt_act *dx, float *pdw, const rt_act *x, const rt_act *w, const float *rstd,
                                 const rt_act *dy, const rt_act *dres, int64_t rows, int64_t cols,
                                 int64_t chunk)
{
    __shared__ float sh[32];
    int64_t g = blockIdx.x, r0 = g * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float *pd = pdw ? pdw + g * cols : NULL;
    if (pd)
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) pd[j] = 0.0f;
    for (int64_t row = r0; row < r1; row++) {
        int64_t off = row * cols;
        float r = rstd[row];
        float dot = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            dot += wv(w, j) * ld(dy + off + j) * ld(x + off + j);
        dot = block_sum(dot, sh);
        float c = dot * r * r / (float)cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float xv = ld(x + off + j), g_ = ld(dy + off + j);
            if (pd) pd[j] += g_ * xv * r;
            /* dres read before dx is written: it may be dx itself. */
            if (dx) dx[off + j] = bf(r * (wv(w, j) * g_ - xv * c) + (dres ? ld(dres + off + j) : 0.0f));
        }
    }
}

/* The backward with 16-byte accesses (as k_rms_fwd8): a thread owns eight
 * consecutive columns of its group's partial row, the same ones every row. */
static __global__ void k_rms_bwd8(rt_act *dx, float *pdw, const rt_act *x, const rt_act *w, const float *rstd,
                                  const rt_act *dy, const rt_act *dres, int64_t rows, int64_t cols,
                                  int64_t chunk)
{
    __shared__ float sh[32];
    int64_t g = blockIdx.x, r0 = g * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float *pd = pdw ? pdw + g * cols : NULL;
    int64_t j0 = 8 * (int64_t)threadIdx.x, js = 8 * (int64_t)blockDim.x;
    if (pd)
        for (int64_t j = j0; j < cols; j += js)
            for (int i = 0; i < 8; i++) pd[j + i] = 0.0f;
    float xv[8], gv[8], wf[8], o[8], rv[8];
    for (int64_t row = r0; row < r1; row++) {
        int64_t off = row * cols;
        float r = rstd[row];
        float dot = 0.0f;
        for (int64_t j = j0; j < cols; j += js) {
            bf8_load(xv, x + off + j);
            bf8_load(gv, dy + off + j);
            wv8(wf, w, j);
            for (int i = 0; i < 8; i++) dot += wf[i] * gv[i] * xv[i];
        }
        dot = block_sum(dot, sh);
        float c = dot * r * r / (float)cols;
        for (int64_t j = j0; j < cols; j += js) {
            bf8_load(xv, x + off + j);
            bf8_load(gv, dy + off + j);
            wv8(wf, w, j);
            if (dres)
                bf8_load(rv, dres + off + j);
            for (int i = 0; i < 8; i++) {
                if (pd) pd[j + i] += gv[i] * xv[i] * r;
                o[i] = r * (wf[i] * gv[i] - xv[i] * c) + (dres ? rv[i] : 0.0f);
            }
            if (dx) bf8_store(dx + off + j, o);
        }
    }
}

/* Threads for the 16-byte kernels: one per eight columns, 32 to 256. */
static int norm_threads8(int64_t cols) { return norm_threads(cols / 8); }
static bool norm_vec(int64_t cols, const void *a, const void *b, const void *c, const void *w)
{
    return cols % 8 == 0 && rtcu_aligned16(a, b, c) && rtcu_aligned16(w);
}

void rt_rmsnorm_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t rows, int64_t cols,
                    float eps)
{
    rtcu_require_init("rt_rmsnorm_fwd");
    if (rows <= 0 || cols <= 0) return;
    size_t b = (size_t)(rows * cols) * sizeof(rt_act);
    rtcu_deps({{y, b}, {rstd, (size_t)rows * 4}, {x, b}, {w, (size_t)cols * sizeof(rt_act)}});
    rtcu_check_grid("rt_rmsnorm_fwd", rows, 1, 1);
    if (norm_vec(cols, y, x, nullptr, w))
        RTCU_LAUNCH(k_rms_fwd8<false>, (unsigned)rows, norm_threads8(cols), 0)(y, rstd, x, w, cols, eps, nullptr,
                                                                               nullptr);
    else
        RTCU_LAUNCH(k_rms_fwd<false>, (unsigned)rows, norm_threads(cols), 0)(y, rstd, x, w, cols, eps, nullptr,
                                                                             nullptr);
    LAUNCH_CHECK();
}

void rt_add_rmsnorm_fwd(rt_act *sum, rt_act *y, float *rstd, const rt_act *a, const rt_act *b,
                        const rt_act *w, int64_t rows, int64_t cols, float eps)
{
    rtcu_require_init("rt_add_rmsnorm_fwd");
    if (rows <= 0 || cols <= 0) return;
    size_t n = (size_t)(rows * cols) * sizeof(rt_act);
    rtcu_deps({{sum, n}, {y, n}, {rstd, (size_t)rows * 4}, {a, n}, {b, n}, {w, (size_t)cols * sizeof(rt_act)}});
    rtcu_check_grid("rt_add_rmsnorm_fwd", rows, 1, 1);
    if (norm_vec(cols, sum, y, a, w) && rtcu_aligned16(b))
        RTCU_LAUNCH(k_rms_fwd8<true>, (unsigned)rows, norm_threads8(cols), 0)(y, rstd, a, w, cols, eps, b, sum);
    else
        RTCU_LAUNCH(k_rms_fwd<true>, (unsigned)rows, norm_threads(cols), 0)(y, rstd, a, w, cols, eps, b, sum);
    LAUNCH_CHECK();
}

void rt_rmsnorm_bwd(rt_act *dx, rt_grad *dw, const rt_act *x, const rt_act *w, const float *rstd,
                    const rt_act *dy, const rt_act *dres, int64_t rows, int64_t cols)
{
    rtcu_require_init("rt_rmsnorm_bwd");
    if (rows <= 0 || cols <= 0) return;
    size_t b = (size_t)(rows * cols) * sizeof(rt_act), bw = (size_t)cols * sizeof(rt_act);
    rtcu_deps({{dx, b}, {dw, (size_t)cols * sizeof(rt_grad)}, {x, b}, {w, bw}, {rstd, (size_t)rows * 4}, {dy, b},
               {dres, b}});
    int64_t groups, chunk;
    rtcu_row_groups(rows, cols, &groups, &chunk);
    float *pdw = dw ? (float *)rtcu_scratch((size_t)(groups * cols) * sizeof(float)) : NULL;
    if (norm_vec(cols, dx, x, dy, w) && rtcu_aligned16(dres))
        RTCU_LAUNCH(k_rms_bwd8, (unsigned)groups, norm_threads8(cols), 0)(dx, pdw, x, w, rstd, dy, dres, rows,
                                                                              cols, chunk);
    else
        RTCU_LAUNCH(k_rms_bwd, (unsigned)groups, norm_threads(cols), 0)(dx, pdw, x, w, rstd, dy, dres, rows,
                                                                         cols, chunk);
    LAUNCH_CHECK();
    if (dw) rtcu_colsum_final(dw, pdw, groups, cols, true);
}

/* Grouped RMSNorm (rt_rmsnorm_group_*): a block per (row, group), its own
 * weight row; dw by one thread per (group, column) summing the rows in
 * order (strided reads: the gated norm of Mamba-2 is one small norm a layer). */
static __global__ void k_rms_group_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t groups,
                                       int64_t cols, float eps)
{
    __shared__ float sh[32];
    int64_t off = (int64_t)blockIdx.x * cols;
    const rt_act *wr = w + ((int64_t)blockIdx.x % groups) * cols;
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = ld(x + off + j);
        ss += v * v;
    }
    ss = block_sum(ss, sh);
    float r = 1.0f / sqrtf(ss / (float)cols + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[off + j] = bf(ld(wr + j) * (ld(x + off + j) * r));
}

static __global__ void k_rms_group_bwd(rt_act *dx, const rt_act *x, const rt_act *w, const float *rstd,
                                       const rt_act *dy, const rt_act *dres, int64_t groups, int64_t cols)
{
    __shared__ float sh[32];
    int64_t row = blockIdx.x, off = row * cols;
    const rt_act *wr = w + (row % groups) * cols;
    float r = rstd[row], dot = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += ld(wr + j) * ld(dy + off + j) * ld(x + off + j);
    dot = block_sum(dot, sh);
    float c = dot * r * r / (float)cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float xv = ld(x + off + j), g_ = ld(dy + off + j);
        dx[off + j] = bf(r * (ld(wr + j) * g_ - xv * c) + (dres ? ld(dres + off + j) : 0.0f));
    }
}

static __global__ void k_rms_group_dw(rt_grad *dw, const rt_act *x, const float *rstd, const rt_act *dy, int64_t rows,
                                      int64_t groups, int64_t cols)
{
    int64_t gj = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (gj >= groups * cols) return;
    int64_t g = gj / cols, j = gj % cols;
    float acc = 0.0f;
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = (r * groups + g) * cols + j;
        acc += ld(dy + o) * ld(x + o) * rstd[r * groups + g];
    }
    dw[gj] += acc;
}

void rt_rmsnorm_group_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t rows, int64_t groups,
                          int64_t cols, float eps)
{
    rtcu_require_init("rt_rmsnorm_group_fwd");
    int64_t R = rows * groups;
    if (R <= 0 || cols <= 0) return;
    size_t b = (size_t)(R * cols) * sizeof(rt_act);
    rtcu_deps({{y, b}, {rstd, (size_t)R * 4}, {x, b}, {w, (size_t)(groups * cols) * sizeof(rt_act)}});
    rtcu_check_grid("rt_rmsnorm_group_fwd", R, 1, 1);
    RTCU_LAUNCH(k_rms_group_fwd, (unsigned)R, norm_threads(cols), 0)(y, rstd, x, w, groups, cols, eps);
    LAUNCH_CHECK();
}

void rt_rmsnorm_group_bwd(rt_act *dx, rt_grad *dw, const rt_act *x, const rt_act *w, const float *rstd,
                          const rt_act *dy, const rt_act *dres, int64_t rows, int64_t groups, int64_t cols)
{
    rtcu_require_init("rt_rmsnorm_group_bwd");
    int64_t R = rows * groups;
    if (R <= 0 || cols <= 0) return;
    size_t b = (size_t)(R * cols) * sizeof(rt_act), bw = (size_t)(groups * cols);
    rtcu_deps({{dx, b}, {dw, bw * sizeof(rt_grad)}, {x, b}, {w, bw * sizeof(rt_act)}, {rstd, (size_t)R * 4},
               {dy, b}, {dres, b}});
    rtcu_check_grid("rt_rmsnorm_group_bwd", R, 1, 1);
    if (dw) { /* before dx is written: dx may alias dy in the caller's plan */
        RTCU_LAUNCH(k_rms_group_dw, rtcu_grid(groups * cols, 256), 256, 0)(dw, x, rstd, dy, rows, groups, cols);
        LAUNCH_CHECK();
    }
    if (dx) {
        RTCU_LAUNCH(k_rms_group_bwd, (unsigned)R, norm_threads(cols), 0)(dx, x, w, rstd, dy, dres, groups, cols);
        LAUNCH_CHECK();
    }
}

/* ----------------------------------------------------------- LayerNorm */
/* ADD: rt_add_layernorm_fwd, as k_rms_fwd's: the first pass makes and
 * writes the sum of x and x1, the later ones read it back. */
template <bool ADD>
static __global__ void k_ln_fwd(rt_act *y, float *mean, float *rstd, const rt_act *x, const rt_act *w,
                                const rt_act *b, int64_t cols, float eps, const rt_act *x1, rt_act *sum)
{
    __shared__ float sh[32];
    int64_t off = (int64_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += ld_in<ADD>(x, x1, sum, off + j);
    if (ADD) x = sum;
    float mu = block_sum(s, sh) / (float)cols;
    float v = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float d = ld(x + off + j) - mu;
        v += d * d;
    }
    float r = 1.0f / sqrtf(block_sum(v, sh) / (float)cols + eps);
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = mu;
        rstd[blockIdx.x] = r;
    }
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        y[off + j] = bf((ld(x + off + j) - mu) * r * wv(w, j) + (b ? ld(b + j) : 0.0f));
}

/* xh = (x - mean) r, g = dy w: dx = r (g - mean(g) - xh mean(g xh)) [+ dres];
 * dw_j += dy_j xh_j, db_j += dy_j. */
static __global__ void k_ln_bwd(rt_act *dx, float *pdw, float *pdb, const rt_act *x, const rt_act *w,
                                const float *mean, const float *rstd, const rt_act *dy, const rt_act *dres,
                                int64_t rows, int64_t cols, int64_t chunk)
{
    __shared__ float sh[32];
    int64_t g = blockIdx.x, r0 = g * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float *pw = pdw ? pdw + g * cols : NULL, *pb = pdb ? pdb + g * cols : NULL;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        if (pw) pw[j] = 0.0f;
        if (pb) pb[j] = 0.0f;
    }
    for (int64_t row = r0; row < r1; row++) {
        int64_t off = row * cols;
        float mu = mean[row], r = rstd[row];
        float sg = 0.0f, sgx = 0.0f;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float gj = ld(dy + off + j) * wv(w, j), xh = (ld(x + off + j) - mu) * r;
            sg += gj;
            sgx += gj * xh;
        }
        sg = block_sum(sg, sh) / (float)cols;
        sgx = block_sum(sgx, sh) / (float)cols;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            float d = ld(dy + off + j), xh = (ld(x + off + j) - mu) * r;
            if (pw) pw[j] += d * xh;
            if (pb) pb[j] += d;
            if (dx) dx[off + j] = bf(r * (d * wv(w, j) - sg - xh * sgx) + (dres ? ld(dres + off + j) : 0.0f));
        }
    }
}

void rt_layernorm_fwd(rt_act *y, float *mean, float *rstd, const rt_act *x, const rt_act *w, const rt_act *b,
                      int64_t rows, int64_t cols, float eps)
{
    rtcu_require_init("rt_layernorm_fwd");
    if (rows <= 0 || cols <= 0) return;
    size_t bx = (size_t)(rows * cols) * sizeof(rt_act), bw = (size_t)cols * sizeof(rt_act);
    rtcu_deps({{y, bx}, {mean, (size_t)rows * 4}, {rstd, (size_t)rows * 4}, {x, bx}, {w, bw}, {b, bw}});
    rtcu_check_grid("rt_layernorm_fwd", rows, 1, 1);
    RTCU_LAUNCH(k_ln_fwd<false>, (unsigned)rows, norm_threads(cols), 0)(y, mean, rstd, x, w, b, cols, eps, nullptr,
                                                                        nullptr);
    LAUNCH_CHECK();
}

void rt_add_layernorm_fwd(rt_act *sum, rt_act *y, float *mean, float *rstd, const rt_act *x0, const rt_act *x1,
                          const rt_act *w, const rt_act *b, int64_t rows, int64_t cols, float eps)
{
    rtcu_require_init("rt_add_layernorm_fwd");
    if (rows <= 0 || cols <= 0) return;
    size_t bx = (size_t)(rows * cols) * sizeof(rt_act), bw = (size_t)cols * sizeof(rt_act);
    rtcu_deps({{sum, bx}, {y, bx}, {mean, (size_t)rows * 4}, {rstd, (size_t)rows * 4}, {x0, bx}, {x1, bx},
               {w, bw}, {b, bw}});
    rtcu_check_grid("rt_add_layernorm_fwd", rows, 1, 1);
    RTCU_LAUNCH(k_ln_fwd<true>, (unsigned)rows, norm_threads(cols), 0)(y, mean, rstd, x0, w, b, cols, eps, x1, sum);
    LAUNCH_CHECK();
}

void rt_layernorm_bwd(rt_act *dx, rt_grad *dw, rt_grad *db, const rt_act *x, const rt_act *w, const float *mean,
                      const float *rstd, const rt_act *dy, const rt_act *dres, int64_t rows, int64_t cols)
{
    rtcu_require_init("rt_layernorm_bwd");
    if (rows <= 0 || cols <= 0) return;
    size_t bx = (size_t)(rows * cols) * sizeof(rt_act), bw = (size_t)cols * sizeof(rt_act);
    size_t bg = (size_t)cols * sizeof(rt_grad);
    rtcu_deps({{dx, bx}, {dw, bg}, {db, bg}, {x, bx}, {w, bw}, {mean, (size_t)rows * 4}, {rstd, (size_t)rows * 4}, {dy, bx},
               {dres, bx}});
    int64_t groups, chunk;
    rtcu_row_groups(rows, cols, &groups, &chunk);
    size_t pbytes = (size_t)(groups * cols) * sizeof(float);
    float *p = (dw || db) ? (float *)rtcu_scratch(2 * pbytes) : NULL;
    float *pdw = dw ? p : NULL, *pdb = db ? p + groups * cols : NULL;
    RTCU_LAUNCH(k_ln_bwd, (unsigned)groups, norm_threads(cols), 0)(dx, pdw, pdb, x, w, mean, rstd, dy, dres,
                                                                        rows, cols, chunk);
    LAUNCH_CHECK();
    if (dw) rtcu_colsum_final(dw, pdw, groups, cols, true);
    if (db) rtcu_colsum_final(db, pdb, groups, cols, true);
}
