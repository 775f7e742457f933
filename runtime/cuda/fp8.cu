/* fp8.cu: per-tensor FP8 casts (rt_amax, rt_cast_fp8, rt_dequant_fp8); the
 * GEMM is in fp8_matmul.cu.
 *
 * Conversions go through cuda_fp8.h: __nv_cvt_float_to_fp8 with
 * __NV_SATFINITE is round to nearest even, saturating to +-max (infinities
 * too), NaN to 0x7F: on sm_89+ the cvt.rn.satfinite instruction, on sm_80
 * (and in the emulator) the header's software conversion. That rule is the
 * CPU backend's encoder, runtime/common/fp8.c (checked against the
 * software conversion for all 2^32 floats, and on a GPU by tests/gpu).
 * The product x * scale is one fp32 multiplication on both backends
 * (__fmul_rn: never fused with anything). */
#include <cuda_fp8.h>

#include "common/common.h"
#include "cu.h"
#include "cu_dev.cuh"

static __device__ __forceinline__ __nv_fp8_interpretation_t nv_fmt(RtFp8Format f)
{
    return f == RT_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2;
}

/* ------------------------------------------------------------------ amax */
/* max |x| over bf16 bit patterns with the sign cleared: for non-negative
 * values the integer order is the value order, and NaN patterns sort above
 * infinity, so a NaN wins as on the CPU. Exact in any order. */
enum { AMAX_THREADS = 256 };

static __device__ __forceinline__ unsigned block_umax(unsigned v, unsigned *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        unsigned t = __shfl_xor_sync(0xffffffffu, v, o);
        v = t > v ? t : v;
    }
    if (lane == 0) sh[w] = v;
    __syncthreads();
    unsigned t = lane < nw ? sh[lane] : 0u;
    for (int o = 16; o > 0; o >>= 1) {
        unsigned u = __shfl_xor_sync(0xffffffffu, t, o);
        t = u > t ? u : t;
    }
    __syncthreads();
    return t;
}

/* Stage 1: part[block] = the block's max; stage 2 (one block): part[0] =
 * the max of `parts` partials. */
static __global__ void k_amax(unsigned *part, const uint16_t *x, int64_t n)
{
    __shared__ unsigned sh[32];
    unsigned m = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        unsigned a = x[i] & 0x7FFFu;
        m = a > m ? a : m;
    }
    m = block_umax(m, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = m;
}
static __global__ void k_amax_final(unsigned *part, int parts)
{
    __shared__ unsigned sh[32];
    unsigned m = 0;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) m = part[i] > m ? part[i] : m;
    m = block_umax(m, sh);
    if (threadIdx.x == 0) part[0] = m;
}

float rt_amax(const rt_act *src, int64_t n)
{
    rtcu_require_init("rt_amax");
    if (n < 0) rt_fatal("rt_amax: negative size %lld", (long long)n);
    if (n == 0) return 0.0f;
    rtcu_deps({{src, (size_t)n * sizeof(rt_act)}});
    unsigned grid = rtcu_grid(n, AMAX_THREADS);
    unsigned *part = (unsigned *)rtcu_scratch(grid * sizeof(unsigned));
    RTCU_LAUNCH(k_amax, grid, AMAX_THREADS, 0)(part, (const uint16_t *)src, n);
    LAUNCH_CHECK();
    RTCU_LAUNCH(k_amax_final, 1, AMAX_THREADS, 0)(part, (int)grid);
    LAUNCH_CHECK();
    unsigned bits = 0;
    CUDA_SYNC_CHECK(cudaMemcpyAsync(&bits, part, sizeof bits, cudaMemcpyDeviceToHost, rtcu.compute)); /* blocks: pageable */
    CUDA_SYNC_CHECK(cudaStreamSynchronize(rtcu.compute));
    rtcu_check_dev_err();
    /* A bf16 pattern is the top half of the fp32 one. */
    uint32_t u = bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ------------------------------------------------------------ cast, back */
static __global__ void k_cast_fp8(uint8_t *dst, const rt_act *src, int64_t n, float scale, RtFp8Format f)
{
    __nv_fp8_interpretation_t nf = nv_fmt(f);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __nv_cvt_float_to_fp8(__fmul_rn(ld(src + i), scale), __NV_SATFINITE, nf);
}

/* dst [cols, rows] from src [rows, cols]: each thread one element, read
 * along a row of src (coalesced reads; the writes stride, which a cast a
 * few times the GEMM's operand size can afford). */
static __global__ void k_cast_fp8_t(uint8_t *dst, const rt_act *src, int64_t rows, int64_t cols, float scale,
                                    RtFp8Format f)
{
    __nv_fp8_interpretation_t nf = nv_fmt(f);
    int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / cols, c = i % cols;
        dst[c * rows + r] = __nv_cvt_float_to_fp8(__fmul_rn(ld(src + i), scale), __NV_SATFINITE, nf);
    }
}

/* decode (exact through fp16, which holds every FP8 value) times
 * scale_inv in fp32, rounded once to bf16. */
static __global__ void k_dequant_fp8(rt_act *dst, const uint8_t *src, int64_t n, float scale_inv, RtFp8Format f)
{
    __nv_fp8_interpretation_t nf = nv_fmt(f);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = __half2float(__half(__nv_cvt_fp8_to_halfraw(src[i], nf)));
        dst[i] = bf(__fmul_rn(v, scale_inv));
    }
}

void rt_cast_fp8(uint8_t *dst, const rt_act *src, int64_t n, float scale, RtFp8Format f)
{
    rtcu_require_init("rt_cast_fp8");
    rtc_check_fp8_format("rt_cast_fp8", f);
    if (n < 0) rt_fatal("rt_cast_fp8: negative size %lld", (long long)n);
    if (n == 0) return;
    rtcu_deps({{dst, (size_t)n}, {src, (size_t)n * sizeof(rt_act)}});
    RTCU_LAUNCH(k_cast_fp8, rtcu_grid(n, 256), 256, 0)(dst, src, n, scale, f);
    LAUNCH_CHECK();
}

void rt_cast_fp8_t(uint8_t *dst, const rt_act *src, int64_t rows, int64_t cols, float scale, RtFp8Format f)
{
    rtcu_require_init("rt_cast_fp8_t");
    rtc_check_fp8_format("rt_cast_fp8_t", f);
    if (rows < 0 || cols < 0) rt_fatal("rt_cast_fp8_t: negative size %lld x %lld", (long long)rows, (long long)cols);
    int64_t n = rows * cols;
    if (n == 0) return;
    rtcu_deps({{dst, (size_t)n}, {src, (size_t)n * sizeof(rt_act)}});
    RTCU_LAUNCH(k_cast_fp8_t, rtcu_grid(n, 256), 256, 0)(dst, src, rows, cols, scale, f);
    LAUNCH_CHECK();
}

void rt_dequant_fp8(rt_act *dst, const uint8_t *src, int64_t n, float scale_inv, RtFp8Format f)
{
    rtcu_require_init("rt_dequant_fp8");
    rtc_check_fp8_format("rt_dequant_fp8", f);
    if (n < 0) rt_fatal("rt_dequant_fp8: negative size %lld", (long long)n);
    if (n == 0) return;
    rtcu_deps({{dst, (size_t)n * sizeof(rt_act)}, {src, (size_t)n}});
    RTCU_LAUNCH(k_dequant_fp8, rtcu_grid(n, 256), 256, 0)(dst, src, n, scale_inv, f);
    LAUNCH_CHECK();
}
