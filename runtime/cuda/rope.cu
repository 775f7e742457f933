/* rope.cu: rotary embedding (rotate-half form of HF LLaMA), forward and its
 * transpose (inverse = true, the backward), with or without LLaMA-3.1's
 * frequency scaling.
 *
 * A thread per rotated pair (j, j + dim/2) of a row; the angle is computed as
 * HF does in fp32: inv_freq = 1 / theta^(2j/dim), scaled as HF's
 * _compute_llama3_parameters when asked (the same formula as the CPU
 * backend, runtime/cpu/rope.c, there in double), a = position * inv_freq,
 * then sincosf (full-range accurate, no fast-math). Reading and writing a
 * pair in the same thread makes y == x (in place) safe. Memory-bound; the
 * sincos costs ~40 instructions per pair, hidden behind the loads on A100 and
 * H100 (expect ~70% of HBM bandwidth). */
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
            yr[j] = bf(a * c - b * s);
            yr[j + half] = bf(b * c + a * s);
        }
    }
}

static void launch(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
                   int64_t pos_offset, float theta, RopeScale sc, bool inverse)
{
    int64_t nrows = outer * seq * inner;
    if (nrows <= 0 || dim <= 0) return;
    size_t b = (size_t)(nrows * dim) * sizeof(rt_act);
    rtcu_deps({{y, b}, {x, b}});
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
