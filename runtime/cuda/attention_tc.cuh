/* attention_tc.cuh: the tensor-core building blocks of attention_fa2.cu:
 * mma.sync m16n8k16 (bf16 in, fp32 accumulate), ldmatrix (.trans), cp.async
 * with commit/wait groups, the shared-memory tile layout and its loader.
 * Under PTDC_CUDA_EMU each instruction is the SIMT emulator's model of it
 * (runtime/cuda/emu), which also counts shared-memory bank conflicts per
 * call site (the `site` strings).
 *
 * Fragment layouts (PTX ISA, "mma.m16n8k16" for .bf16; g = lane / 4,
 * t = lane % 4, each .b32 register two bf16, lower index in the low half):
 *   A 16x16 row-major: a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
 *                      a3 = A[g+8][2t+8..]
 *   B 16x8:            b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
 *   C 16x8 fp32:       c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]
 * Two adjacent C tiles of a row block, packed to bf16, are exactly the A
 * fragment of the next product (P V, dS K, P^T dO, ...): probabilities and
 * their gradients never leave registers.
 *
 * Shared-memory tiles: R rows of D bf16, row pitch D + 8 elements (2D + 16
 * bytes). For the head dims served (64, 80, 96, 128) the pitch is an odd
 * number of 16-byte chunks, so the 8 rows one ldmatrix phase (or one
 * cp.async phase of the loader below) touches at one chunk column fall into
 * 8 different 4-bank groups: every access is conflict-free (checked by the
 * emulator's bank counter, tests/gpu: banks). */
#ifndef PTDC_RUNTIME_CUDA_ATTENTION_TC_CUH
#define PTDC_RUNTIME_CUDA_ATTENTION_TC_CUH

#include "cu_dev.cuh"

namespace fa2 {

__device__ __forceinline__ int imin(int x, int y) { return x < y ? x : y; }
__device__ __forceinline__ int imax(int x, int y) { return x > y ? x : y; }

__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b0, const uint32_t b1)
{
#ifdef PTDC_CUDA_EMU
    const uint32_t b[2] = {b0, b1};
    emu::mma16816(c, a, b);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/* A shared-memory byte address: 32 bits on the device (so constant tile
 * offsets fold into the instructions' immediates), a host pointer under the
 * emulator. */
#ifdef PTDC_CUDA_EMU
typedef char *saddr;
__device__ __forceinline__ saddr sptr(void *p) { return static_cast<char *>(p); }
#else
typedef uint32_t saddr;
__device__ __forceinline__ saddr sptr(void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
#endif

/* ldmatrix .x4: lane l addresses row l % 8 of matrix l / 8. */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], saddr row, const char *site)
{
#ifdef PTDC_CUDA_EMU
    emu::ldmatrix(r, 4, row, false, site);
#else
    (void)site;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(row));
#endif
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], saddr row, const char *site)
{
#ifdef PTDC_CUDA_EMU
    emu::ldmatrix(r, 4, row, true, site);
#else
    (void)site;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(row));
#endif
}

/* 16 bytes global -> shared, the first src_bytes of them read (0 or 16),
 * the rest zero. .cg: through L2 only (tiles are streamed once per block). */
__device__ __forceinline__ void cp_async16(saddr dst, const void *src, int src_bytes, const char *site)
{
#ifdef PTDC_CUDA_EMU
    emu::cp_async(dst, src, 16, src_bytes, site);
#else
    (void)site;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
#endif
}
/* 4 bytes (a per-row statistic). */
__device__ __forceinline__ void cp_async4(saddr dst, const void *src, int src_bytes, const char *site)
{
#ifdef PTDC_CUDA_EMU
    emu::cp_async(dst, src, 4, src_bytes, site);
#else
    (void)site;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit()
{
#ifdef PTDC_CUDA_EMU
    emu::cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
/* Every committed group of this thread has landed (its own copies; other
 * threads' copies are visible after a __syncthreads that follows). */
__device__ __forceinline__ void cp_async_wait_all()
{
#ifdef PTDC_CUDA_EMU
    emu::cp_async_wait(0);
#else
    asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

/* A float2 from shared memory (bank-counted under the emulator). */
__device__ __forceinline__ float2 lds_f2(saddr p, const char *site)
{
#ifdef PTDC_CUDA_EMU
    emu::smem_note(p, 8, false, site);
    return *reinterpret_cast<const float2 *>(p);
#else
    (void)site;
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(p));
    return v;
#endif
}

/* A 32-bit store to shared memory (bank-counted under the emulator). */
__device__ __forceinline__ void sts32(saddr p, uint32_t v, const char *site)
{
#ifdef PTDC_CUDA_EMU
    emu::smem_note(p, 4, true, site);
    *reinterpret_cast<uint32_t *>(p) = v;
#else
    (void)site;
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(p), "r"(v));
#endif
}

/* 2^x: MUFU.EX2 (ex2.approx.ftz: relative error ~2^-22, 2^-inf = 0). */
__device__ __forceinline__ float exp2_fast(float x)
{
#ifdef PTDC_CUDA_EMU
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
#endif
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (lo) at the lower address */
    return *reinterpret_cast<uint32_t *>(&v);
}

/* A fragment (16 x 16, k-step s) from two adjacent fp32 C tiles. */
__device__ __forceinline__ void a_from_c(uint32_t a[4], const float c0[4], const float c1[4])
{
    a[0] = pack_bf16(c0[0], c0[1]);
    a[1] = pack_bf16(c0[2], c0[3]);
    a[2] = pack_bf16(c1[0], c1[1]);
    a[3] = pack_bf16(c1[2], c1[3]);
}

__device__ __forceinline__ float quad_max(float v)
{
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* Byte offsets, within a shared tile of pitch LD elements, of the row this
 * lane addresses for ldmatrix; add 2 (m0 * LD + k0) bytes for the 16x16
 * block at (m0, k0) (a compile-time constant in the unrolled loops).
 *   lane_a:  A 16x16 from a row-major tile: matrices (rows 0-7, cols 0-7),
 *            (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) = a0..a3.
 *   lane_bt: B for two n-tiles where B[k][n] = T[n][k] (T holds the rows of
 *            the right operand's transpose: K for Q K^T); block (n0, k0):
 *            r0, r1 = b0, b1 of n-tile n0, r2, r3 those of n0 + 8.
 *   lane_bn: B for two n-tiles where B[k][n] = T[k][n] (V for P V), with
 *            ldmatrix.trans; block (k0, n0), same register order. */
template <int LD>
__device__ __forceinline__ int lane_a(int lane)
{
    return 2 * (((lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8);
}
template <int LD>
__device__ __forceinline__ int lane_bt(int lane)
{
    return 2 * (((lane & 7) + (lane >> 4) * 8) * LD + ((lane >> 3) & 1) * 8);
}
template <int LD>
__device__ __forceinline__ int lane_bn(int lane)
{
    return 2 * (((lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8);
}
template <int LD>
__device__ __forceinline__ constexpr int at(int r, int c)
{
    return 2 * (r * LD + c);
}

/* Issue the copy of rows [r0, r0 + R) of head `hd` of a [.., S, NH, D] tensor
 * (src points at batch b's first row) into tile T; rows at or past S are
 * zero-filled. 16-byte chunks; eight consecutive threads take one chunk
 * column of eight consecutive rows (one conflict-free shared phase; 64
 * contiguous bytes per row and warp in global memory). NT threads; R * D / 8
 * a multiple of 32 so that every warp copies or none does. */
template <int D, int R, int NT>
__device__ __forceinline__ void load_tile(saddr T, const rt_act *src, int r0, int S, int64_t NH, int64_t hd,
                                          const char *site)
{
    constexpr int CH = D / 8, N = R * CH, LD = D + 8;
    static_assert(N % 32 == 0, "tile chunks must be whole warps");
#pragma unroll
    for (int i = 0; i < (N + NT - 1) / NT; i++) {
        int c = i * NT + (int)threadIdx.x;
        if (N % NT == 0 || c < N) { /* warp-uniform: N and NT are multiples of 32 */
            int r = (c & 7) + (c / (8 * CH)) * 8, ch = (c >> 3) % CH, s = r0 + r;
            bool ok = s < S;
            const rt_act *g = src + ((int64_t)(ok ? s : 0) * NH + hd) * D + ch * 8;
            cp_async16(T + at<LD>(r, ch * 8), g, ok ? 16 : 0, site);
        }
    }
}

} // namespace fa2

#endif
