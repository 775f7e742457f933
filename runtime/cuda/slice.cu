/* slice.cu: pieces of the last dim and their joining (rt_slice_fwd/bwd,
 * rt_concat_fwd/bwd; runtime/rt.h), the CPU backend's semantics. One grid-
 * stride pass over the output's elements, each written by one thread; the
 * broadcast sum of concat's backward adds the copies in a fixed order in
 * fp32 (deterministic) and rounds once. Pure moves otherwise: bf16 in, the
 * same bf16 out. */
#include "cu_dev.cuh"

namespace {

__global__ void k_slice_fwd(rt_act *y, const rt_act *x, int64_t rows, int64_t cols, int64_t n, int64_t at)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x, total = rows * n;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride)
        y[e] = x[(e / n) * cols + at + e % n];
}

__global__ void k_slice_bwd(rt_act *dx, const rt_act *dy, int64_t rows, int64_t cols, int64_t n, int64_t at)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x, total = rows * cols;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        int64_t r = e / cols, j = e % cols;
        dx[e] = j >= at && j < at + n ? dy[r * n + j - at] : bf(0.0f);
    }
}

__global__ void k_concat_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t outer, int64_t bcast,
                             int64_t inner, int64_t na, int64_t nb)
{
    int64_t w = na + nb, stride = (int64_t)gridDim.x * blockDim.x, total = outer * bcast * inner * w;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        int64_t r = e / w, j = e % w;
        int64_t o = r / (bcast * inner), i = r % inner;
        y[e] = j < na ? a[r * na + j] : b[(o * inner + i) * nb + j - na];
    }
}

__global__ void k_concat_bwd_a(rt_act *da, const rt_act *dy, int64_t rows, int64_t na, int64_t w)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x, total = rows * na;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride)
        da[e] = dy[(e / na) * w + e % na];
}

__global__ void k_concat_bwd_b(rt_act *db, const rt_act *dy, int64_t outer, int64_t bcast, int64_t inner,
                               int64_t na, int64_t nb)
{
    int64_t w = na + nb, stride = (int64_t)gridDim.x * blockDim.x, total = outer * inner * nb;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        int64_t ob = e / nb, j = e % nb, o = ob / inner, i = ob % inner;
        float s = 0.0f;
        for (int64_t c = 0; c < bcast; c++)
            s += ld(dy + ((o * bcast + c) * inner + i) * w + na + j);
        db[e] = bf(s);
    }
}

} // namespace

void rt_slice_fwd(rt_act *y, const rt_act *x, int64_t rows, int64_t cols, int64_t n, int64_t at)
{
    rtcu_require_init("rt_slice_fwd");
    if (rows <= 0 || n <= 0) return;
    if (at < 0 || at + n > cols)
        rt_fatal("rt_slice_fwd: %lld elements at %lld do not fit in %lld", (long long)n, (long long)at,
                 (long long)cols);
    size_t es = sizeof(rt_act);
    rtcu_deps({{y, (size_t)(rows * n) * es}, {x, (size_t)(rows * cols) * es}});
    const int T = 256;
    RTCU_LAUNCH(k_slice_fwd, rtcu_grid(rows * n, T), T, 0)(y, x, rows, cols, n, at);
    LAUNCH_CHECK();
}

void rt_slice_bwd(rt_act *dx, const rt_act *dy, int64_t rows, int64_t cols, int64_t n, int64_t at)
{
    rtcu_require_init("rt_slice_bwd");
    if (rows <= 0 || cols <= 0) return;
    if (at < 0 || at + n > cols)
        rt_fatal("rt_slice_bwd: %lld elements at %lld do not fit in %lld", (long long)n, (long long)at,
                 (long long)cols);
    size_t es = sizeof(rt_act);
    rtcu_deps({{dx, (size_t)(rows * cols) * es}, {dy, (size_t)(rows * n) * es}});
    const int T = 256;
    RTCU_LAUNCH(k_slice_bwd, rtcu_grid(rows * cols, T), T, 0)(dx, dy, rows, cols, n, at);
    LAUNCH_CHECK();
}

void rt_concat_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t outer, int64_t bcast,
                   int64_t inner, int64_t na, int64_t nb)
{
    rtcu_require_init("rt_concat_fwd");
    int64_t rows = outer * bcast * inner;
    if (rows <= 0) return;
    size_t es = sizeof(rt_act);
    rtcu_deps({{y, (size_t)(rows * (na + nb)) * es}, {a, (size_t)(rows * na) * es},
               {b, (size_t)(outer * inner * nb) * es}});
    const int T = 256;
    RTCU_LAUNCH(k_concat_fwd, rtcu_grid(rows * (na + nb), T), T, 0)(y, a, b, outer, bcast, inner, na, nb);
    LAUNCH_CHECK();
}

void rt_concat_bwd(rt_act *da, rt_act *db, const rt_act *dy, int64_t outer, int64_t bcast,
                   int64_t inner, int64_t na, int64_t nb)
{
    rtcu_require_init("rt_concat_bwd");
    int64_t rows = outer * bcast * inner;
    if (rows <= 0) return;
    size_t es = sizeof(rt_act);
    rtcu_deps({{da, (size_t)(rows * na) * es}, {db, (size_t)(outer * inner * nb) * es},
               {dy, (size_t)(rows * (na + nb)) * es}});
    const int T = 256;
    RTCU_LAUNCH(k_concat_bwd_a, rtcu_grid(rows * na, T), T, 0)(da, dy, rows, na, na + nb);
    LAUNCH_CHECK();
    RTCU_LAUNCH(k_concat_bwd_b, rtcu_grid(outer * inner * nb, T), T, 0)(db, dy, outer, bcast, inner, na, nb);
    LAUNCH_CHECK();
}
