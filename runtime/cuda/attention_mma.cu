/* attention_mma.cu: tensor-core attention (mma.sync m16n8k16, bf16 in, fp32
 * accumulate) for head dims 32, 64, 96 and 128, in the FlashAttention-2
 * scheme; attention.cu falls back to its CUDA-core kernels otherwise.
 *
 * Fragment layouts (PTX ISA, "mma.m16n8k16" for .bf16; g = lane / 4,
 * t = lane % 4, each .b32 register holding two bf16, lower index in the low
 * half):
 *   A 16x16 row-major: a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
 *                      a3 = A[g+8][2t+8..]
 *   B 16x8 "col":      b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
 *   C 16x8 fp32:       c0 = C[g][2t], c1 = C[g][2t+1], c2 = C[g+8][2t], c3 = C[g+8][2t+1]
 * So B is read from a matrix Y stored n-major (Y[n][k] = B[k][n]) as two
 * 32-bit loads, and two adjacent C tiles of one row block are, packed to
 * bf16, exactly the A fragment of the next product (P V, dS K, ...): the
 * probabilities never leave registers.
 *
 * Shared-memory rows are padded by 8 elements so the 8 x 4 lanes of a
 * fragment load hit 32 distinct banks.
 *
 * Forward (64 queries per block, 16 per warp; 64-key tiles): S = Q K^T,
 * online softmax in registers (row max over the 4 lanes of a row), O += P V.
 * Backward, deterministic: dQ (64 queries per block, 64-key tiles:
 * S = Q K^T, dP = dO V^T, dS = P (dP - Delta), dQ += dS K) and dK/dV (64 keys
 * per block, 16 per warp, 32-query tiles, all query heads of the kv group:
 * S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q). P and dS are
 * rounded to bf16 as GEMM operands, as in FlashAttention-2. */
#include "cu_dev.cuh"

namespace {

constexpr int NTHR = 128; /* 4 warps */

__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2])
{
#ifdef PTDC_CUDA_EMU
    emu::mma16816(c, a, b);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (lo) at the lower address */
    return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ uint32_t ld32(const rt_act *p) { return *reinterpret_cast<const uint32_t *>(p); }

/* A fragment of rows [m0, m0+16), cols [k0, k0+16) of row-major X (ld elements). */
__device__ __forceinline__ void frag_a(uint32_t a[4], const rt_act *X, int ld, int m0, int k0, int g, int t)
{
    a[0] = ld32(X + (m0 + g) * ld + k0 + 2 * t);
    a[1] = ld32(X + (m0 + g + 8) * ld + k0 + 2 * t);
    a[2] = ld32(X + (m0 + g) * ld + k0 + 8 + 2 * t);
    a[3] = ld32(X + (m0 + g + 8) * ld + k0 + 8 + 2 * t);
}

/* B fragment B[k0..k0+16)[n0..n0+8) where B[k][n] = Y[n][k], Y row-major (ld). */
__device__ __forceinline__ void frag_b(uint32_t b[2], const rt_act *Y, int ld, int n0, int k0, int g, int t)
{
    b[0] = ld32(Y + (n0 + g) * ld + k0 + 2 * t);
    b[1] = ld32(Y + (n0 + g) * ld + k0 + 8 + 2 * t);
}

/* A fragment (16 x 16, k-step kk) from two adjacent fp32 C tiles. */
__device__ __forceinline__ void frag_from_c(uint32_t a[4], const float c0[4], const float c1[4])
{
    a[0] = pack2(c0[0], c0[1]);
    a[1] = pack2(c0[2], c0[3]);
    a[2] = pack2(c1[0], c1[1]);
    a[3] = pack2(c1[2], c1[3]);
}

/* Stage rows [r0, r0 + ROWS) of head hd of a [B, S, NH, D] tensor: row-major
 * into rm[ROWS][LR] and/or transposed into tr[D][LT]; rows past S are zero.
 * 16-byte global loads (D % 8 == 0 and 16-byte aligned bases, checked by the
 * dispatcher). */
template <int D, int ROWS>
__device__ __forceinline__ void stage(rt_act *rm, int LR, rt_act *tr, int LT, const rt_act *src, int64_t b,
                                      int64_t r0, int64_t S, int64_t NH, int64_t hd)
{
    constexpr int V8 = D / 8;
    for (int idx = threadIdx.x; idx < ROWS * V8; idx += NTHR) {
        int r = idx / V8, c8 = (idx % V8) * 8;
        int64_t s = r0 + r;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (s < S) v = *reinterpret_cast<const uint4 *>(src + ((b * S + s) * NH + hd) * D + c8);
        if (rm) *reinterpret_cast<uint4 *>(rm + r * LR + c8) = v;
        if (tr) {
            const rt_act *e = reinterpret_cast<const rt_act *>(&v);
#pragma unroll
            for (int i = 0; i < 8; i++) tr[(c8 + i) * LT + r] = e[i];
        }
    }
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

/* ------------------------------------------------------------ forward */
template <int D>
__global__ void __launch_bounds__(NTHR)
k_fwd_mma(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t S, int64_t H,
          int64_t KVH, bool causal, float scale)
{
    constexpr int BM = 64, BN = 64, LK = D + 8, LT = BN + 8, KS = D / 16, ND = D / 8;
    RTCU_DYN_SMEM(unsigned char, smem);
    rt_act *Qs = reinterpret_cast<rt_act *>(smem), *Ks = Qs + BM * LK, *Vt = Ks + BN * LK;
    int64_t qt = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x; /* long rows first */
    int64_t h = blockIdx.y, b = blockIdx.z, kvh = h / (H / KVH);
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int64_t q0 = qt * BM + 16 * w + g, q1 = q0 + 8; /* this lane's two query rows */

    stage<D, BM>(Qs, LK, nullptr, 0, q, b, qt * BM, S, H, h);
    __syncthreads();
    uint32_t qf[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++) frag_a(qf[kk], Qs, LK, 16 * w, 16 * kk, g, t);

    float oacc[ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    int64_t nkt = (S + BN - 1) / BN, kend = causal ? (qt + 1 < nkt ? qt + 1 : nkt) : nkt;
    for (int64_t kt = 0; kt < kend; kt++) {
        __syncthreads();
        stage<D, BN>(Ks, LK, nullptr, 0, k, b, kt * BN, S, KVH, kvh);
        stage<D, BN>(nullptr, 0, Vt, LT, v, b, kt * BN, S, KVH, kvh);
        __syncthreads();
        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++)
#pragma unroll
            for (int n = 0; n < 8; n++) {
                uint32_t bf_[2];
                frag_b(bf_, Ks, LK, 8 * n, 16 * kk, g, t);
                mma16816(s[n], qf[kk], bf_);
            }
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int64_t key = kt * BN + 8 * n + 2 * t + (e & 1), qq = e < 2 ? q0 : q1;
                float x = key < S && (!causal || key <= qq) ? s[n][e] * scale : -INFINITY;
                s[n][e] = x;
                if (e < 2)
                    mx0 = fmaxf(mx0, x);
                else
                    mx1 = fmaxf(mx1, x);
            }
        mx0 = quad_max(mx0);
        mx1 = quad_max(mx1);
        float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
        float a0 = m0 == -INFINITY ? 0.0f : expf(m0 - n0), a1 = m1 == -INFINITY ? 0.0f : expf(m1 - n1);
        l0 *= a0;
        l1 *= a1;
#pragma unroll
        for (int n = 0; n < ND; n++) {
            oacc[n][0] *= a0;
            oacc[n][1] *= a0;
            oacc[n][2] *= a1;
            oacc[n][3] *= a1;
        }
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float mm = e < 2 ? n0 : n1;
                float p = s[n][e] == -INFINITY ? 0.0f : expf(s[n][e] - mm);
                s[n][e] = p;
                if (e < 2)
                    l0 += p;
                else
                    l1 += p;
            }
        m0 = n0;
        m1 = n1;
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t pa[4];
            frag_from_c(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int n = 0; n < ND; n++) {
                uint32_t bf_[2];
                frag_b(bf_, Vt, LT, 8 * n, 16 * kk, g, t);
                mma16816(oacc[n], pa, bf_);
            }
        }
    }
    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    float i0 = 1.0f / l0, i1 = 1.0f / l1;
#pragma unroll
    for (int n = 0; n < ND; n++) {
        if (q0 < S)
            *reinterpret_cast<uint32_t *>(o + ((b * S + q0) * H + h) * D + 8 * n + 2 * t) =
                pack2(oacc[n][0] * i0, oacc[n][1] * i0);
        if (q1 < S)
            *reinterpret_cast<uint32_t *>(o + ((b * S + q1) * H + h) * D + 8 * n + 2 * t) =
                pack2(oacc[n][2] * i1, oacc[n][3] * i1);
    }
    if (t == 0) {
        if (q0 < S) lse[(b * S + q0) * H + h] = m0 + logf(l0);
        if (q1 < S) lse[(b * S + q1) * H + h] = m1 + logf(l1);
    }
}

/* ------------------------------------------------------------------ dQ */
template <int D>
__global__ void __launch_bounds__(NTHR)
k_dq_mma(rt_act *dq, const rt_act *q, const rt_act *k, const rt_act *v, const float *lse, const float *delta,
         const rt_act *dout, int64_t S, int64_t H, int64_t KVH, bool causal, float scale)
{
    constexpr int BM = 64, BN = 64, LK = D + 8, LT = BN + 8, KS = D / 16, ND = D / 8;
    RTCU_DYN_SMEM(unsigned char, smem);
    rt_act *Qs = reinterpret_cast<rt_act *>(smem), *Os = Qs + BM * LK, *Ks = Os + BM * LK, *Vs = Ks + BN * LK,
           *Kt = Vs + BN * LK;
    int64_t qt = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    int64_t h = blockIdx.y, b = blockIdx.z, kvh = h / (H / KVH);
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int64_t q0 = qt * BM + 16 * w + g, q1 = q0 + 8;
    float L0 = q0 < S ? lse[(b * S + q0) * H + h] : 0.0f, L1 = q1 < S ? lse[(b * S + q1) * H + h] : 0.0f;
    float D0 = q0 < S ? delta[(b * S + q0) * H + h] : 0.0f, D1 = q1 < S ? delta[(b * S + q1) * H + h] : 0.0f;

    stage<D, BM>(Qs, LK, nullptr, 0, q, b, qt * BM, S, H, h);
    stage<D, BM>(Os, LK, nullptr, 0, dout, b, qt * BM, S, H, h);
    float acc[ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    int64_t nkt = (S + BN - 1) / BN, kend = causal ? (qt + 1 < nkt ? qt + 1 : nkt) : nkt;
    for (int64_t kt = 0; kt < kend; kt++) {
        __syncthreads();
        stage<D, BN>(Ks, LK, Kt, LT, k, b, kt * BN, S, KVH, kvh);
        stage<D, BN>(Vs, LK, nullptr, 0, v, b, kt * BN, S, KVH, kvh);
        __syncthreads();
        float s[8][4], dp[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            uint32_t qa[4], oa[4];
            frag_a(qa, Qs, LK, 16 * w, 16 * kk, g, t);
            frag_a(oa, Os, LK, 16 * w, 16 * kk, g, t);
#pragma unroll
            for (int n = 0; n < 8; n++) {
                uint32_t bk[2], bv[2];
                frag_b(bk, Ks, LK, 8 * n, 16 * kk, g, t);
                frag_b(bv, Vs, LK, 8 * n, 16 * kk, g, t);
                mma16816(s[n], qa, bk);
                mma16816(dp[n], oa, bv);
            }
        }
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int64_t key = kt * BN + 8 * n + 2 * t + (e & 1), qq = e < 2 ? q0 : q1;
                bool ok = qq < S && key < S && (!causal || key <= qq);
                float p = ok ? expf(s[n][e] * scale - (e < 2 ? L0 : L1)) : 0.0f;
                s[n][e] = p * (dp[n][e] - (e < 2 ? D0 : D1)); /* dS */
            }
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t da[4];
            frag_from_c(da, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int n = 0; n < ND; n++) {
                uint32_t bk[2];
                frag_b(bk, Kt, LT, 8 * n, 16 * kk, g, t);
                mma16816(acc[n], da, bk);
            }
        }
    }
#pragma unroll
    for (int n = 0; n < ND; n++) {
        if (q0 < S)
            *reinterpret_cast<uint32_t *>(dq + ((b * S + q0) * H + h) * D + 8 * n + 2 * t) =
                pack2(acc[n][0] * scale, acc[n][1] * scale);
        if (q1 < S)
            *reinterpret_cast<uint32_t *>(dq + ((b * S + q1) * H + h) * D + 8 * n + 2 * t) =
                pack2(acc[n][2] * scale, acc[n][3] * scale);
    }
}

/* --------------------------------------------------------------- dK, dV */
template <int D>
__global__ void __launch_bounds__(NTHR)
k_dkv_mma(rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v, const float *lse,
          const float *delta, const rt_act *dout, int64_t S, int64_t H, int64_t KVH, bool causal, float scale)
{
    constexpr int BK = 64, BQ = 32, LK = D + 8, LQ = BQ + 8, KS = D / 16, ND = D / 8;
    RTCU_DYN_SMEM(unsigned char, smem);
    rt_act *Ks = reinterpret_cast<rt_act *>(smem), *Vs = Ks + BK * LK, *Qs = Vs + BK * LK, *Os = Qs + BQ * LK,
           *Qt = Os + BQ * LK, *Ot = Qt + D * LQ;
    float *Ls = reinterpret_cast<float *>(Ot + D * LQ), *Ds = Ls + BQ;
    int64_t kt = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z, G = H / KVH;
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int64_t k0 = kt * BK + 16 * w + g, k1 = k0 + 8; /* this lane's two key rows */

    stage<D, BK>(Ks, LK, nullptr, 0, k, b, kt * BK, S, KVH, kvh);
    stage<D, BK>(Vs, LK, nullptr, 0, v, b, kt * BK, S, KVH, kvh);
    float dka[ND][4], dva[ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dka[n][e] = dva[n][e] = 0.0f;
    int64_t nqt = (S + BQ - 1) / BQ, qbeg = causal ? kt * BK / BQ : 0;
    for (int64_t hh = 0; hh < G; hh++) {
        int64_t h = kvh * G + hh;
        for (int64_t qt = qbeg; qt < nqt; qt++) {
            __syncthreads();
            stage<D, BQ>(Qs, LK, Qt, LQ, q, b, qt * BQ, S, H, h);
            stage<D, BQ>(Os, LK, Ot, LQ, dout, b, qt * BQ, S, H, h);
            if (threadIdx.x < BQ) {
                int64_t qi = qt * BQ + threadIdx.x;
                Ls[threadIdx.x] = qi < S ? lse[(b * S + qi) * H + h] : 0.0f;
                Ds[threadIdx.x] = qi < S ? delta[(b * S + qi) * H + h] : 0.0f;
            }
            __syncthreads();
            float s[4][4], dp[4][4]; /* S^T, dP^T: 16 keys x 32 queries per warp */
#pragma unroll
            for (int n = 0; n < 4; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t ka[4], va[4];
                frag_a(ka, Ks, LK, 16 * w, 16 * kk, g, t);
                frag_a(va, Vs, LK, 16 * w, 16 * kk, g, t);
#pragma unroll
                for (int n = 0; n < 4; n++) {
                    uint32_t bq[2], bo[2];
                    frag_b(bq, Qs, LK, 8 * n, 16 * kk, g, t);
                    frag_b(bo, Os, LK, 8 * n, 16 * kk, g, t);
                    mma16816(s[n], ka, bq);
                    mma16816(dp[n], va, bo);
                }
            }
#pragma unroll
            for (int n = 0; n < 4; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int c = 8 * n + 2 * t + (e & 1);
                    int64_t qi = qt * BQ + c, key = e < 2 ? k0 : k1;
                    bool ok = key < S && qi < S && (!causal || key <= qi);
                    float p = ok ? expf(s[n][e] * scale - Ls[c]) : 0.0f;
                    s[n][e] = p;                        /* P^T */
                    dp[n][e] = p * (dp[n][e] - Ds[c]);  /* dS^T */
                }
#pragma unroll
            for (int kk = 0; kk < BQ / 16; kk++) {
                uint32_t pa[4], da[4];
                frag_from_c(pa, s[2 * kk], s[2 * kk + 1]);
                frag_from_c(da, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
                for (int n = 0; n < ND; n++) {
                    uint32_t bo[2], bq[2];
                    frag_b(bo, Ot, LQ, 8 * n, 16 * kk, g, t);
                    frag_b(bq, Qt, LQ, 8 * n, 16 * kk, g, t);
                    mma16816(dva[n], pa, bo);
                    mma16816(dka[n], da, bq);
                }
            }
        }
    }
#pragma unroll
    for (int n = 0; n < ND; n++) {
        if (k0 < S) {
            int64_t off = ((b * S + k0) * KVH + kvh) * D + 8 * n + 2 * t;
            *reinterpret_cast<uint32_t *>(dk + off) = pack2(dka[n][0] * scale, dka[n][1] * scale);
            *reinterpret_cast<uint32_t *>(dv + off) = pack2(dva[n][0], dva[n][1]);
        }
        if (k1 < S) {
            int64_t off = ((b * S + k1) * KVH + kvh) * D + 8 * n + 2 * t;
            *reinterpret_cast<uint32_t *>(dk + off) = pack2(dka[n][2] * scale, dka[n][3] * scale);
            *reinterpret_cast<uint32_t *>(dv + off) = pack2(dva[n][2], dva[n][3]);
        }
    }
}

template <class K>
void optin(K kern, size_t bytes)
{
    CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(kern), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <int D>
void fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t B, int64_t S, int64_t H,
         int64_t KVH, bool causal, float scale)
{
    size_t smem = (size_t)(2 * 64 * (D + 8) + D * (64 + 8)) * sizeof(rt_act);
    optin(k_fwd_mma<D>, smem);
    dim3 grid((unsigned)((S + 63) / 64), (unsigned)H, (unsigned)B);
    RTCU_LAUNCH(k_fwd_mma<D>, grid, NTHR, smem)(o, lse, q, k, v, S, H, KVH, causal, scale);
    LAUNCH_CHECK();
}

template <int D>
void bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v, const float *lse,
         const float *delta, const rt_act *dout, int64_t B, int64_t S, int64_t H, int64_t KVH, bool causal,
         float scale)
{
    size_t sq = (size_t)(4 * 64 * (D + 8) + D * (64 + 8)) * sizeof(rt_act);
    size_t skv = (size_t)(2 * 64 * (D + 8) + 2 * 32 * (D + 8) + 2 * D * (32 + 8)) * sizeof(rt_act) + 2 * 32 * sizeof(float);
    optin(k_dq_mma<D>, sq);
    optin(k_dkv_mma<D>, skv);
    unsigned nq = (unsigned)((S + 63) / 64), nk = (unsigned)((S + 63) / 64);
    RTCU_LAUNCH(k_dq_mma<D>, dim3(nq, (unsigned)H, (unsigned)B), NTHR, sq)(dq, q, k, v, lse, delta, dout, S, H,
                                                                                KVH, causal, scale);
    LAUNCH_CHECK();
    RTCU_LAUNCH(k_dkv_mma<D>, dim3(nk, (unsigned)KVH, (unsigned)B), NTHR, skv)(dk, dv, q, k, v, lse, delta,
                                                                                    dout, S, H, KVH, causal, scale);
    LAUNCH_CHECK();
}

} // namespace

bool rtcu_attention_mma_ok(int64_t D, const void *p1, const void *p2, const void *p3, const void *p4,
                           const void *p5, const void *p6)
{
    if (D != 32 && D != 64 && D != 96 && D != 128) return false;
    return ((uintptr_t)p1 | (uintptr_t)p2 | (uintptr_t)p3 | (uintptr_t)p4 | (uintptr_t)p5 | (uintptr_t)p6) % 16 == 0;
}

void rtcu_attention_mma_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t B,
                            int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal, float scale)
{
    switch (D) {
    case 32: fwd<32>(o, lse, q, k, v, B, S, H, KVH, causal, scale); break;
    case 64: fwd<64>(o, lse, q, k, v, B, S, H, KVH, causal, scale); break;
    case 96: fwd<96>(o, lse, q, k, v, B, S, H, KVH, causal, scale); break;
    case 128: fwd<128>(o, lse, q, k, v, B, S, H, KVH, causal, scale); break;
    default: rt_fatal("rtcu_attention_mma_fwd: head dim %lld", (long long)D);
    }
}

void rtcu_attention_mma_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v,
                            const float *lse, const float *delta, const rt_act *dout, int64_t B, int64_t S, int64_t H,
                            int64_t KVH, int64_t D, bool causal, float scale)
{
    switch (D) {
    case 32: bwd<32>(dq, dk, dv, q, k, v, lse, delta, dout, B, S, H, KVH, causal, scale); break;
    case 64: bwd<64>(dq, dk, dv, q, k, v, lse, delta, dout, B, S, H, KVH, causal, scale); break;
    case 96: bwd<96>(dq, dk, dv, q, k, v, lse, delta, dout, B, S, H, KVH, causal, scale); break;
    case 128: bwd<128>(dq, dk, dv, q, k, v, lse, delta, dout, B, S, H, KVH, causal, scale); break;
    default: rt_fatal("rtcu_attention_mma_bwd: head dim %lld", (long long)D);
    }
}
