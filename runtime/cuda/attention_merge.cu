/* attention_merge.cu: the CUDA backend's two reductions of ring attention
 * (runtime/common/attention_ring.c), the same formulas as
 * runtime/cpu/attention_merge.c:
 *   rt_attention_merge  a warp per row: every lane reads the row's lse and
 *                       lse_b, computes l = logaddexp, the two weights, and
 *                       merges its columns (fp32 running output, bf16 block
 *                       output); lane 0 writes lse after the warp has read it;
 *   rt_add_f32          one grid-stride pass, fp32 sum, one rounding.
 * Memory-bound (the merge reads 4 + 2 bytes and writes 4, or 6 with the
 * bf16 output, per element): small next to the block's attention. */
#include "common/common.h"
#include "cu_dev.cuh"

extern "C" size_t rtc_act_bytes(void) { return sizeof(rt_act); }

namespace {

constexpr int kMergeThreads = 256; /* 8 rows (warps) per block */

__global__ void k_merge(float *acc, float *lse, const rt_act *ob, const float *lseb, rt_act *out,
                        int64_t rows, int64_t D)
{
    int64_t r = (int64_t)blockIdx.x * (kMergeThreads / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return; /* whole warps leave together */
    float lb = lseb[r], la = lse[r];
    float *a = acc + r * D;
    if (lb != -INFINITY) {
        float m = la > lb ? la : lb, l = m + log1pf(expf(-fabsf(la - lb)));
        float wa = expf(la - l), wb = expf(lb - l);
        const rt_act *o = ob + r * D;
        for (int64_t d = lane; d < D; d += 32) a[d] = a[d] * wa + ld(o + d) * wb;
        __syncwarp();
        if (lane == 0) lse[r] = l;
    }
    if (out)
        for (int64_t d = lane; d < D; d += 32) st(out + r * D + d, a[d]);
}

__global__ void k_add_f32(rt_act *out, const rt_act *x, const float *acc, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        st(out + i, ld(x + i) + acc[i]);
}

} // namespace

void rt_attention_merge(float *acc, float *lse, const rt_act *o_b, const float *lse_b, rt_act *out,
                        int64_t rows, int64_t D)
{
    rtcu_require_init("rt_attention_merge");
    if (rows < 0 || D < 0)
        rt_fatal("rt_attention_merge: negative sizes rows=%lld D=%lld", (long long)rows, (long long)D);
    if (rows == 0 || D == 0) return;
    size_t n = (size_t)(rows * D);
    rtcu_deps({{acc, n * sizeof(float)},
               {lse, (size_t)rows * sizeof(float)},
               {o_b, n * sizeof(rt_act)},
               {lse_b, (size_t)rows * sizeof(float)},
               {out, out ? n * sizeof(rt_act) : (size_t)0}});
    int64_t blocks = (rows + kMergeThreads / 32 - 1) / (kMergeThreads / 32);
    RTCU_LAUNCH(k_merge, (unsigned)blocks, kMergeThreads, 0)(acc, lse, o_b, lse_b, out, rows, D);
    LAUNCH_CHECK();
}

void rt_add_f32(rt_act *out, const rt_act *x, const float *acc, int64_t n)
{
    rtcu_require_init("rt_add_f32");
    if (n <= 0) return;
    rtcu_deps({{out, (size_t)n * sizeof(rt_act)}, {x, (size_t)n * sizeof(rt_act)}, {acc, (size_t)n * sizeof(float)}});
    RTCU_LAUNCH(k_add_f32, rtcu_grid(n, 256), 256, 0)(out, x, acc, n);
    LAUNCH_CHECK();
}
