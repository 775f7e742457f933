/* reduce.cu: deterministic column sums (rt_reduce_rows, rt_reduce_rows_grad
 * and the weight gradients of the norms, into bf16 or fp32) and row softmax.
 *
 * Column sums, two stages: (1) a thread per (column, row group) sums its
 * group's rows in order (coalesced: consecutive threads, consecutive
 * columns); (2) per column, 8 lanes each sum every 8th group in order and a
 * fixed tree adds the 8. No atomics, so the result is bitwise reproducible.
 * Memory-bound: one read of the input plus groups * cols * 8 bytes of
 * partials (at most 16 MiB, usually L2-resident).
 *
 * Softmax: a block per row, three passes over the row (max, sum of
 * exponentials, output; the later passes hit L1/L2), block reductions in a
 * fixed tree. Memory-bound. */
#include "cu_dev.cuh"

void rtcu_row_groups(int64_t rows, int64_t cols, int64_t *groups, int64_t *chunk)
{
    if (rows <= 0) {
        *groups = 0;
        *chunk = 1;
        return;
    }
    int64_t g = rows < 512 ? rows : 512;
    int64_t cap = ((int64_t)4 << 20) / (cols > 0 ? cols : 1); /* partials <= 16 MiB */
    if (cap < 1) cap = 1;
    if (g > cap) g = cap;
    int64_t c = rtcu_cdiv(rows, g);
    *chunk = c;
    *groups = rtcu_cdiv(rows, c);
}

static __global__ void k_colsum_partial(float *partial, const rt_act *in, int64_t rows, int64_t cols,
                                        int64_t chunk)
{
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, g = blockIdx.y;
    if (j >= cols) return;
    int64_t r1 = (g + 1) * chunk < rows ? (g + 1) * chunk : rows;
    float s = 0.0f;
    for (int64_t r = g * chunk; r < r1; r++) s += ld(in + r * cols + j);
    partial[g * cols + j] = s;
}

template <class T>
static __global__ void k_colsum_final(T *out, const float *partial, int64_t groups, int64_t cols,
                                      bool accumulate)
{
    __shared__ float sh[8][33];
    int tx = threadIdx.x, ty = threadIdx.y;
    int64_t j = (int64_t)blockIdx.x * 32 + tx;
    float s = 0.0f;
    if (j < cols)
        for (int64_t g = ty; g < groups; g += 8) s += partial[g * cols + j];
    sh[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && j < cols) {
        float t = ((sh[0][tx] + sh[1][tx]) + (sh[2][tx] + sh[3][tx])) +
                  ((sh[4][tx] + sh[5][tx]) + (sh[6][tx] + sh[7][tx]));
        if (accumulate) t += ld(out + j);
        st(out + j, t);
    }
}

template <class T>
static void colsum_final(T *out, const float *partial, int64_t groups, int64_t cols, bool accumulate)
{
    if (cols <= 0) return;
    rtcu_check_grid("column sum", rtcu_cdiv(cols, 32), 1, 1);
    RTCU_LAUNCH(k_colsum_final<T>, (unsigned)rtcu_cdiv(cols, 32), dim3(32, 8), 0)(out, partial, groups, cols,
                                                                                        accumulate);
    LAUNCH_CHECK();
}
void rtcu_colsum_final(rt_act *out, const float *partial, int64_t groups, int64_t cols, bool accumulate)
{
    colsum_final(out, partial, groups, cols, accumulate);
}
void rtcu_colsum_final(rt_grad *out, const float *partial, int64_t groups, int64_t cols, bool accumulate)
{
    colsum_final(out, partial, groups, cols, accumulate);
}

/* Column sums into bf16 (an activation's broadcast operand) or fp32 (a
 * parameter's gradient, rt_reduce_rows_grad). */
template <class T>
static void reduce_rows(const char *fn, T *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate)
{
    rtcu_require_init(fn);
    if (cols <= 0) return;
    if (rows < 0) rt_fatal("%s: negative rows", fn);
    size_t es = sizeof(rt_act);
    rtcu_deps({{out, (size_t)cols * sizeof(T)}, {in, (size_t)(rows * cols) * es}});
    int64_t groups, chunk;
    rtcu_row_groups(rows, cols, &groups, &chunk);
    float *partial = (float *)rtcu_scratch((size_t)((groups > 0 ? groups : 1) * cols) * sizeof(float));
    if (groups > 0) {
        rtcu_check_grid(fn, rtcu_cdiv(cols, 256), groups, 1);
        RTCU_LAUNCH(k_colsum_partial, dim3((unsigned)rtcu_cdiv(cols, 256), (unsigned)groups), 256, 0)(
            partial, in, rows, cols, chunk);
        LAUNCH_CHECK();
    }
    rtcu_colsum_final(out, partial, groups, cols, accumulate);
}

void rt_reduce_rows(rt_act *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate)
{
    reduce_rows("rt_reduce_rows", out, in, rows, cols, accumulate);
}

void rt_reduce_rows_grad(rt_grad *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate)
{
    reduce_rows("rt_reduce_rows_grad", out, in, rows, cols, accumulate);
}

/* ------------------------------------------------------------- softmax */
static int row_threads(int64_t cols)
{
    int64_t w = rtcu_cdiv(cols, 32);
    return 32 * (int)(w < 8 ? (w < 1 ? 1 : w) : 8);
}

static __global__ void k_softmax_fwd(rt_act *y, const rt_act *x, int64_t cols)
{
    __shared__ float sh[32];
    const rt_act *xr = x + (int64_t)blockIdx.x * cols;
    rt_act *yr = y + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, ld(xr + j));
    m = block_max(m, sh);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(ld(xr + j) - m);
    s = block_sum(s, sh);
    float inv = 1.0f / s;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = bf(expf(ld(xr + j) - m) * inv);
}

static __global__ void k_softmax_bwd(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t cols)
{
    __shared__ float sh[32];
    int64_t off = (int64_t)blockIdx.x * cols;
    float d = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) d += ld(y + off + j) * ld(dy + off + j);
    d = block_sum(d, sh);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        dx[off + j] = bf(ld(y + off + j) * (ld(dy + off + j) - d));
}

void rt_softmax_fwd(rt_act *y, const rt_act *x, int64_t rows, int64_t cols)
{
    rtcu_require_init("rt_softmax_fwd");
    if (rows <= 0 || cols <= 0) return;
    size_t b = (size_t)(rows * cols) * sizeof(rt_act);
    rtcu_deps({{y, b}, {x, b}});
    rtcu_check_grid("rt_softmax_fwd", rows, 1, 1);
    RTCU_LAUNCH(k_softmax_fwd, (unsigned)rows, row_threads(cols), 0)(y, x, cols);
    LAUNCH_CHECK();
}

void rt_softmax_bwd(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t rows, int64_t cols)
{
    rtcu_require_init("rt_softmax_bwd");
    if (rows <= 0 || cols <= 0) return;
    size_t b = (size_t)(rows * cols) * sizeof(rt_act);
    rtcu_deps({{dx, b}, {y, b}, {dy, b}});
    rtcu_check_grid("rt_softmax_bwd", rows, 1, 1);
    RTCU_LAUNCH(k_softmax_bwd, (unsigned)rows, row_threads(cols), 0)(dx, y, dy, cols);
    LAUNCH_CHECK();
}
