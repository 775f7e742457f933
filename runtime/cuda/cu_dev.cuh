/* cu_dev.cuh: device helpers shared by the kernels: bf16 conversion, 16-byte
 * vector access, warp and block reductions in a fixed order (so every
 * reduction is deterministic: the same tree on every run). */
#ifndef PTDC_RUNTIME_CUDA_CU_DEV_CUH
#define PTDC_RUNTIME_CUDA_CU_DEV_CUH

#include "cu.h"

#include <cuda_bf16.h>
#include <math.h>

static __device__ __forceinline__ float ld(const rt_act *p) { return __bfloat162float(*p); }
static __device__ __forceinline__ rt_act bf(float x) { return __float2bfloat16(x); } /* RNE */
/* Element access for kernels templated on bf16 activations or fp32
 * gradients (rt_grad). */
static __device__ __forceinline__ float ld(const float *p) { return *p; }
static __device__ __forceinline__ void st(rt_act *p, float x) { *p = bf(x); }
static __device__ __forceinline__ void st(float *p, float x) { *p = x; }

/* Eight bf16 in 16 bytes. */
struct alignas(16) Bf8 {
    __nv_bfloat162 h[4];
};
static __device__ __forceinline__ void bf8_load(float *f, const rt_act *p)
{
    Bf8 v = *reinterpret_cast<const Bf8 *>(p);
    for (int i = 0; i < 4; i++) {
        float2 t = __bfloat1622float2(v.h[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}
static __device__ __forceinline__ void bf8_store(rt_act *p, const float *f)
{
    Bf8 v;
    for (int i = 0; i < 4; i++) v.h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    *reinterpret_cast<Bf8 *>(p) = v;
}
/* True when all pointers are 16-byte aligned (vector path usable). */
static inline bool rtcu_aligned16(const void *a, const void *b = nullptr, const void *c = nullptr)
{
    return ((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 16 == 0;
}

static __device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Block-wide sum, result in every thread. blockDim.x a multiple of 32,
 * at most 1024; `sh` holds 32 floats. Ends with a barrier so `sh` may be
 * reused right after. */
static __device__ __forceinline__ float block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float t = lane < nw ? sh[lane] : 0.0f;
    t = warp_sum(t);
    __syncthreads();
    return t;
}
static __device__ __forceinline__ float block_max(float v, float *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float t = lane < nw ? sh[lane] : -INFINITY;
    t = warp_max(t);
    __syncthreads();
    return t;
}
static __device__ __forceinline__ double warp_sum_d(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ double block_sum_d(double v, double *sh)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum_d(v);
    if (lane == 0) sh[w] = v;
    __syncthreads();
    double t = lane < nw ? sh[lane] : 0.0;
    t = warp_sum_d(t);
    __syncthreads();
    return t;
}

#endif
