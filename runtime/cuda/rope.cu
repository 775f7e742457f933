/* rope.cu: rotary embedding (rotate-half form of HF LLaMA), forward and its
 * transpose (inverse = true, the backward), with or without LLaMA-3.1's
 * frequency scaling.
 *
 * A thread per rotated pair (j, j + dim/2) of a row; the angle is computed as
 * HF does in fp32: inv_freq = 1 / theta^(2j/dim), scaled as HF's
 * _compute_llama3_parameters when asked (the same formula as the CPU
 * backend, runtime/cpu/rope.c, there in double), a = position * inv_freq,
 * then sincosf (full-range accurate, no fast-math). Reading and writing a
 * pair in the same thread makes y == x (in place) safe.
 *
 * Two kernels, the same arithmetic (the products rounded before the sum, so
 * no compiler contraction can make them differ): k_rope8 (head dims that are multiples of
 * 16 up to 512, 16-byte aligned buffers: every LLaMA) gives a thread eight
 * consecutive pairs, loaded and stored as 16-byte vectors from both halves,
 * and computes their eight frequencies once rather than per row; k_rope,
 * a thread per pair with 2-byte accesses, takes everything else. Measured
 * on an H100 before k_rope8 (docs/cuda.md): the scalar kernel moved ~0.7 TB/s,
 * a fifth of the HBM's, 5% of a 1.1B model's step. */
#include "cu_dev.cuh"

/* LLaMA-3.1 scaling; factor == 0 means none. */
struct RopeScale {
    float factor, low, high, old;
};

static __device__ __forceinline__ float scaled_freq(float inv, RopeScale sc)
{
    if (sc.factor == 0.0f) return inv;
    float wavelen = 6.28318530717958647692f / inv; /* 2 pi / inv */
    if (wavelen > sc.old / sc.low) return inv / sc.factor;
    if (wavelen < sc.old / sc.high) return inv;
    float s = (sc.old / wavelen - sc.low) / (sc.high - sc.low);
    return (1.0f - s) * inv / sc.factor + s * inv;
}

static __global__ void k_rope(rt_act *y, const rt_act *x, int64_t nrows, int64_t seq, int64_t inner,
                              int64_t dim, int64_t pos_offset, float theta, RopeScale sc, bool inverse)
{
    int64_t half = dim / 2;
    for (int64_t row = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; row < nrows;
         row += (int64_t)gridDim.x * blockDim.y) {
        int64_t pos = pos_offset + (row / inner) % seq;
        const rt_act *xr = x + row * dim;
        rt_act *yr = y + row * dim;
        for (int64_t j = threadIdx.x; j < half; j += blockDim.x) {
            float inv = scaled_freq(1.0f / powf(theta, (float)(2 * j) / (float)dim), sc);
            float s, c;
            sincosf((float)pos * inv, &s, &c);
            float a = ld(xr + j), b = ld(xr + j + half);
            if (inverse) s = -s;
            yr[j] = bf(__fmul_rn(a, c) - __fmul_rn(b, s));
            yr[j + half] = bf(__fmul_rn(b, c) + __fmul_rn(a, s));
        }
    }
}

static __global__ void k_rope8(rt_act *y, const rt_act *x, int64_t nrows, int64_t seq, int64_t inner,
                               int64_t dim, int64_t pos_offset, float theta, RopeScale sc, bool inverse)
{
    int64_t half = dim / 2, j0 = (int64_t)threadIdx.x * 8;
    float inv[8];
    for (int v = 0; v < 8; v++)
        inv[v] = scaled_freq(1.0f / powf(theta, (float)(2 * (j0 + v)) / (float)dim), sc);
    for (int64_t row = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; row < nrows;
         row += (int64_t)gridDim.x * blockDim.y) {
        int64_t pos = pos_offset + (row / inner) % seq;
        float a[8], b[8], ya[8], yb[8];
        bf8_load(a, x + row * dim + j0);
        bf8_load(b, x + row * dim + j0 + half);
        for (int v = 0; v < 8; v++) {
            float s, c;
            sincosf((float)pos * inv[v], &s, &c);
            if (inverse) s = -s;
            ya[v] = __fmul_rn(a[v], c) - __fmul_rn(b[v], s);
            yb[v] = __fmul_rn(b[v], c) + __fmul_rn(a[v], s);
        }
        bf8_store(y + row * dim + j0, ya);
        bf8_store(y + row * dim + j0 + half, yb);
    }
}

static void launch(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
                   int64_t pos_offset, float theta, RopeScale sc, bool inverse)
{
    int64_t nrows = outer * seq * inner;
    if (nrows <= 0 || dim <= 0) return;
    size_t b = (size_t)(nrows * dim) * sizeof(rt_act);
    rtcu_deps({{y, b}, {x, b}});
    int64_t groups = dim / 16; /* eight pairs each */
    if (dim % 16 == 0 && groups <= 32 && rtcu_aligned16(x, y)) {
        dim3 block8((unsigned)groups, (unsigned)(256 / groups));
        RTCU_LAUNCH(k_rope8, rtcu_grid(nrows, 256 / groups), block8, 0)(y, x, nrows, seq, inner, dim, pos_offset,
                                                                        theta, sc, inverse);
        LAUNCH_CHECK();
        return;
    }
    dim3 block(32, 8);
    RTCU_LAUNCH(k_rope, rtcu_grid(nrows, 8), block, 0)(y, x, nrows, seq, inner, dim, pos_offset, theta, sc,
                                                            inverse);
    LAUNCH_CHECK();
}

void rt_rope(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
             int64_t pos_offset, float theta, bool inverse)
{
    rtcu_require_init("rt_rope");
    if (dim % 2) rt_fatal("rt_rope: odd head dim %lld", (long long)dim);
    launch(y, x, outer, seq, inner, dim, pos_offset, theta, RopeScale{0.0f, 0.0f, 0.0f, 0.0f}, inverse);
}

void rt_rope_llama3(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
                    int64_t pos_offset, float theta, float factor, float low_freq_factor,
                    float high_freq_factor, float original_max_position, bool inverse)
{
    rtcu_require_init("rt_rope_llama3");
    if (dim % 2) rt_fatal("rt_rope_llama3: odd head dim %lld", (long long)dim);
    if (!(factor > 0 && low_freq_factor > 0 && high_freq_factor > low_freq_factor && original_max_position > 0))
        rt_fatal("rt_rope_llama3: invalid scaling (factor %g, low_freq_factor %g, high_freq_factor %g, "
                 "original_max_position %g)",
                 factor, low_freq_factor, high_freq_factor, original_max_position);
    launch(y, x, outer, seq, inner, dim, pos_offset, theta,
           RopeScale{factor, low_freq_factor, high_freq_factor, original_max_position}, inverse);
}
