/* attention.cu: causal / full / sliding-window scaled dot-product attention
 * with grouped-query heads, flash-style: nothing S x S is ever stored. The
 * entry points (rt_attention_fwd/bwd) dispatch to the tensor-core kernels
 * (attention_fa2.cu) and fall back to the CUDA-core kernels here for head
 * dims those do not serve or buffers not 16-byte aligned, saying so once on
 * stderr per reason.
 *
 * Layout: q, o, dq [B, Sq, H, D]; k, v, dk, dv [B, Sk, KVH, D]; lse [B, Sq, H].
 * Query head h reads kv head h / (H / KVH). Rows sit at positions
 * (attention_pos.cuh; rt_attention_fwd/bwd: one chunk at 0 each side, Sq =
 * Sk = S, row i at i; rt_attention_pos_*: chunks, context parallelism). A
 * key at p' is visible to a query at p iff p' <= p when causal and
 * p - p' < window when window > 0 (causal only); a query that sees no key
 * gets o = 0 and lse = -inf.
 *
 * Generic kernels (any D <= 256), fp32 maths on CUDA cores:
 *   A block of 256 threads owns 32 rows (queries in forward and dQ, keys in
 *   dK/dV); each row belongs to a group of 8 lanes, lane l holding dims
 *   l, l + 8, ... (NT = ceil(D/8) rounded to a power of two, in registers).
 *   The other operand streams through shared memory in tiles of 32 rows,
 *   converted to fp32 once; a dot product is 8 partial sums plus 3 shuffles.
 * Forward: online softmax per query row (running max m, sum l, rescaled
 *   accumulator), writes o = acc / l and lse = m + log l.
 * Backward: Delta = rowsum(dO * O); then two kernels that each recompute
 *   P = exp(scale q.k - lse) tile by tile: dQ (parallel over query tiles,
 *   looping over key tiles) and dK/dV (parallel over key tiles, looping over
 *   the query heads of the group and the query tiles). Each output element is
 *   owned by one thread and summed in a fixed order: deterministic without
 *   atomics, at the price of computing S and dP twice (backward FLOPs ~3.5x
 *   forward instead of FlashAttention-2's 2.5x).
 * Blocks skip tiles no position pair of which is visible (above the
 * diagonal, before the window); the key (query) positions of a streamed
 * tile are staged in shared memory beside it for the element mask.
 *
 * Efficiency: CUDA-core fp32, not tensor cores: ~40-60% of the FP32 FMA peak
 * (A100 19.5, H100 SXM 67 TFLOP/s), i.e. roughly an order of magnitude below
 * FlashAttention-2 on tensor cores (docs/cuda.md). They serve head dims the
 * tensor-core kernels (D in {64, 80, 96, 128}, 16-byte aligned buffers) do
 * not, and PTDC_ATTENTION=generic forces them. */
#include "attention_pos.cuh"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utility>

namespace {

using namespace apos;

constexpr int TILE = 32;   /* rows per block and per streamed tile */
constexpr int THREADS = 256;

/* The mask on positions, with the chunk table (attention_pos.cuh). */
struct Mask {
    RtcuAttnPos p;
    bool causal;
    int window; /* 0: none */
};

/* Some query of rows [q0, q0 + TILE) may see some key of [k0, k0 + TILE). */
__device__ __forceinline__ bool tile_seen(const Mask &m, int64_t q0, int64_t Sq, int64_t k0, int64_t Sk)
{
    int qmin, qmax, kmin, kmax;
    range(m.p.qpos, m.p.chunk, (int)q0, (int)(q0 + TILE < Sq ? q0 + TILE : Sq), qmin, qmax);
    range(m.p.kpos, m.p.chunk, (int)k0, (int)(k0 + TILE < Sk ? k0 + TILE : Sk), kmin, kmax);
    return may_see(qmin, qmax, kmin, kmax, m.causal, m.window);
}

__device__ __forceinline__ float group_sum8(float v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    return v;
}

/* Stage rows [r0, r0 + TILE) of a [B, S, NH, D] tensor (head `hd`) into a
 * [TILE][DP] fp32 tile; rows past S and dims past D are zero. */
template <int DP>
__device__ __forceinline__ void stage(float *dst, const rt_act *src, int64_t b, int64_t r0, int64_t S, int64_t NH,
                                      int64_t hd, int64_t D)
{
    for (int idx = threadIdx.x; idx < TILE * DP; idx += THREADS) {
        int r = idx / DP, d = idx % DP;
        int64_t s = r0 + r;
        dst[idx] = s < S && d < D ? ld(src + ((b * S + s) * NH + hd) * D + d) : 0.0f;
    }
}

/* The positions of rows [r0, r0 + TILE) (rows past S: any). */
__device__ __forceinline__ void stage_pos(int *dst, const int *pos, int chunk, int64_t r0, int64_t S)
{
    if (threadIdx.x < TILE) {
        int64_t s = r0 + threadIdx.x;
        dst[threadIdx.x] = s < S ? pos_of(pos, chunk, (int)s) : 0;
    }
}

template <int NT>
__global__ void __launch_bounds__(THREADS)
k_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t Sq, int64_t Sk, int64_t H,
      int64_t KVH, int64_t D, const Mask mk, float scale)
{
    constexpr int DP = 8 * NT;
    RTCU_DYN_SMEM(float, sm);
    float *Ks = sm, *Vs = sm + TILE * DP;
    int *Kp = (int *)(Vs + TILE * DP);
    int64_t qt = mk.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x; /* long rows first */
    int64_t h = blockIdx.y, b = blockIdx.z, kvh = h / (H / KVH);
    int lane = threadIdx.x & 31, l8 = lane & 7, row = (threadIdx.x >> 5) * 4 + (lane >> 3);
    int64_t qi = qt * TILE + row;
    bool qok = qi < Sq;
    int64_t qoff = ((b * Sq + (qok ? qi : 0)) * H + h) * D;
    int qp = pos_of(mk.p.qpos, mk.p.chunk, qok ? (int)qi : 0);
    float qr[NT], acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int d = l8 + 8 * t;
        qr[t] = qok && d < D ? ld(q + qoff + d) : 0.0f;
        acc[t] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int64_t nkt = (Sk + TILE - 1) / TILE;
    for (int64_t kt = 0; kt < nkt; kt++) {
        if (!tile_seen(mk, qt * TILE, Sq, kt * TILE, Sk)) continue; /* the same for the whole block */
        __syncthreads(); /* previous tile fully consumed */
        stage<DP>(Ks, k, b, kt * TILE, Sk, KVH, kvh, D);
        stage<DP>(Vs, v, b, kt * TILE, Sk, KVH, kvh, D);
        stage_pos(Kp, mk.p.kpos, mk.p.chunk, kt * TILE, Sk);
        __syncthreads();
        float s[TILE], mt = -INFINITY;
#pragma unroll
        for (int j = 0; j < TILE; j++) {
            float p = 0.0f;
#pragma unroll
            for (int t = 0; t < NT; t++) p += qr[t] * Ks[j * DP + l8 + 8 * t];
            p = group_sum8(p);
            int64_t kj = kt * TILE + j;
            s[j] = kj < Sk && sees(qp, Kp[j], mk.causal, mk.window) ? p * scale : -INFINITY;
            mt = fmaxf(mt, s[j]);
        }
        float mn = fmaxf(m, mt);
        float alpha = m == -INFINITY ? 0.0f : expf(m - mn);
        l *= alpha;
#pragma unroll
        for (int t = 0; t < NT; t++) acc[t] *= alpha;
#pragma unroll
        for (int j = 0; j < TILE; j++) {
            float p = s[j] == -INFINITY ? 0.0f : expf(s[j] - mn);
            l += p;
#pragma unroll
            for (int t = 0; t < NT; t++) acc[t] += p * Vs[j * DP + l8 + 8 * t];
        }
        m = mn;
    }
    if (qok) { /* a row that sees no key: o = 0, lse = -inf */
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int d = l8 + 8 * t;
            if (d < D) o[qoff + d] = bf(acc[t] * inv);
        }
        if (l8 == 0) lse[(b * Sq + qi) * H + h] = l > 0.0f ? m + logf(l) : -INFINITY;
    }
}

/* delta[row] = sum_d dout * o, a warp per (b, s, h) row. */
__global__ void k_delta(float *delta, const rt_act *o, const rt_act *dout, int64_t rows, int64_t D)
{
    int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (w >= rows) return; /* whole warps exit together */
    float s = 0.0f;
    for (int64_t d = lane; d < D; d += 32) s += ld(o + w * D + d) * ld(dout + w * D + d);
    s = warp_sum(s);
    if (lane == 0) delta[w] = s;
}

template <int NT>
__global__ void __launch_bounds__(THREADS)
k_dq(rt_act *dq, const rt_act *q, const rt_act *k, const rt_act *v, const float *lse, const float *delta,
     const rt_act *dout, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D, const Mask mk, float scale)
{
    constexpr int DP = 8 * NT;
    RTCU_DYN_SMEM(float, sm);
    float *Ks = sm, *Vs = sm + TILE * DP;
    int *Kp = (int *)(Vs + TILE * DP);
    int64_t qt = mk.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    int64_t h = blockIdx.y, b = blockIdx.z, kvh = h / (H / KVH);
    int lane = threadIdx.x & 31, l8 = lane & 7, row = (threadIdx.x >> 5) * 4 + (lane >> 3);
    int64_t qi = qt * TILE + row;
    bool qok = qi < Sq;
    int64_t qoff = ((b * Sq + (qok ? qi : 0)) * H + h) * D, srow = (b * Sq + (qok ? qi : 0)) * H + h;
    int qp = pos_of(mk.p.qpos, mk.p.chunk, qok ? (int)qi : 0);
    float qr[NT], dor[NT], acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int d = l8 + 8 * t;
        qr[t] = qok && d < D ? ld(q + qoff + d) : 0.0f;
        dor[t] = qok && d < D ? ld(dout + qoff + d) : 0.0f;
        acc[t] = 0.0f;
    }
    float L = qok ? lse[srow] : 0.0f, Dl = qok ? delta[srow] : 0.0f;
    int64_t nkt = (Sk + TILE - 1) / TILE;
    for (int64_t kt = 0; kt < nkt; kt++) {
        if (!tile_seen(mk, qt * TILE, Sq, kt * TILE, Sk)) continue;
        __syncthreads();
        stage<DP>(Ks, k, b, kt * TILE, Sk, KVH, kvh, D);
        stage<DP>(Vs, v, b, kt * TILE, Sk, KVH, kvh, D);
        stage_pos(Kp, mk.p.kpos, mk.p.chunk, kt * TILE, Sk);
        __syncthreads();
#pragma unroll 4
        for (int j = 0; j < TILE; j++) {
            float sp = 0.0f, dp = 0.0f;
#pragma unroll
            for (int t = 0; t < NT; t++) {
                sp += qr[t] * Ks[j * DP + l8 + 8 * t];
                dp += dor[t] * Vs[j * DP + l8 + 8 * t];
            }
            sp = group_sum8(sp);
            dp = group_sum8(dp);
            int64_t kj = kt * TILE + j;
            float p = qok && kj < Sk && sees(qp, Kp[j], mk.causal, mk.window) ? expf(sp * scale - L) : 0.0f;
            float ds = p * (dp - Dl);
#pragma unroll
            for (int t = 0; t < NT; t++) acc[t] += ds * Ks[j * DP + l8 + 8 * t];
        }
    }
    if (qok) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int d = l8 + 8 * t;
            if (d < D) dq[qoff + d] = bf(acc[t] * scale);
        }
    }
}

template <int NT>
__global__ void __launch_bounds__(THREADS)
k_dkv(rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v, const float *lse,
      const float *delta, const rt_act *dout, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
      const Mask mk, float scale)
{
    constexpr int DP = 8 * NT;
    RTCU_DYN_SMEM(float, sm);
    float *Qs = sm, *Os = sm + TILE * DP, *Ls = sm + 2 * TILE * DP, *Ds = Ls + TILE;
    int *Qp = (int *)(Ds + TILE);
    int64_t kt = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z, G = H / KVH;
    int lane = threadIdx.x & 31, l8 = lane & 7, row = (threadIdx.x >> 5) * 4 + (lane >> 3);
    int64_t kj = kt * TILE + row;
    bool kok = kj < Sk;
    int64_t koff = ((b * Sk + (kok ? kj : 0)) * KVH + kvh) * D;
    int kp = pos_of(mk.p.kpos, mk.p.chunk, kok ? (int)kj : 0);
    float kr[NT], vr[NT], dka[NT], dva[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) {
        int d = l8 + 8 * t;
        kr[t] = kok && d < D ? ld(k + koff + d) : 0.0f;
        vr[t] = kok && d < D ? ld(v + koff + d) : 0.0f;
        dka[t] = dva[t] = 0.0f;
    }
    int64_t nqt = (Sq + TILE - 1) / TILE;
    for (int64_t hh = 0; hh < G; hh++) {
        int64_t h = kvh * G + hh;
        for (int64_t qt = 0; qt < nqt; qt++) {
            if (!tile_seen(mk, qt * TILE, Sq, kt * TILE, Sk)) continue;
            __syncthreads();
            stage<DP>(Qs, q, b, qt * TILE, Sq, H, h, D);
            stage<DP>(Os, dout, b, qt * TILE, Sq, H, h, D);
            if (threadIdx.x < TILE) {
                int64_t qi = qt * TILE + threadIdx.x;
                Ls[threadIdx.x] = qi < Sq ? lse[(b * Sq + qi) * H + h] : 0.0f;
                Ds[threadIdx.x] = qi < Sq ? delta[(b * Sq + qi) * H + h] : 0.0f;
            }
            stage_pos(Qp, mk.p.qpos, mk.p.chunk, qt * TILE, Sq);
            __syncthreads();
#pragma unroll 4
            for (int i = 0; i < TILE; i++) {
                float sp = 0.0f, dp = 0.0f;
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    sp += kr[t] * Qs[i * DP + l8 + 8 * t];
                    dp += vr[t] * Os[i * DP + l8 + 8 * t];
                }
                sp = group_sum8(sp);
                dp = group_sum8(dp);
                int64_t qi = qt * TILE + i;
                float p = kok && qi < Sq && sees(Qp[i], kp, mk.causal, mk.window) ? expf(sp * scale - Ls[i]) : 0.0f;
                float ds = p * (dp - Ds[i]);
#pragma unroll
                for (int t = 0; t < NT; t++) {
                    dva[t] += p * Os[i * DP + l8 + 8 * t];
                    dka[t] += ds * Qs[i * DP + l8 + 8 * t];
                }
            }
        }
    }
    if (kok) {
#pragma unroll
        for (int t = 0; t < NT; t++) {
            int d = l8 + 8 * t;
            if (d < D) {
                dk[koff + d] = bf(dka[t] * scale);
                dv[koff + d] = bf(dva[t]);
            }
        }
    }
}

/* Dynamic shared memory above 48 KiB needs an opt-in per kernel. */
template <class K>
void smem_optin(K kern, size_t bytes)
{
    if (bytes > 48 * 1024) CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(kern), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <int NT>
void run_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t B, int64_t Sq,
             int64_t Sk, int64_t H, int64_t KVH, int64_t D, const Mask &mk, float scale)
{
    size_t smem = 2 * TILE * 8 * NT * sizeof(float) + TILE * sizeof(int);
    smem_optin(k_fwd<NT>, smem);
    dim3 grid((unsigned)((Sq + TILE - 1) / TILE), (unsigned)H, (unsigned)B);
    RTCU_LAUNCH(k_fwd<NT>, grid, THREADS, smem)(o, lse, q, k, v, Sq, Sk, H, KVH, D, mk, scale);
    LAUNCH_CHECK();
}

template <int NT>
void run_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v, const float *lse,
             const float *delta, const rt_act *dout, int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH,
             int64_t D, const Mask &mk, float scale)
{
    size_t smem = 2 * TILE * 8 * NT * sizeof(float) + TILE * sizeof(int);
    size_t smem_kv = smem + 2 * TILE * sizeof(float);
    smem_optin(k_dq<NT>, smem);
    smem_optin(k_dkv<NT>, smem_kv);
    if (Sq > 0) {
        RTCU_LAUNCH(k_dq<NT>, dim3((unsigned)((Sq + TILE - 1) / TILE), (unsigned)H, (unsigned)B), THREADS,
                    smem)(dq, q, k, v, lse, delta, dout, Sq, Sk, H, KVH, D, mk, scale);
        LAUNCH_CHECK();
    }
    if (Sk > 0) {
        RTCU_LAUNCH(k_dkv<NT>, dim3((unsigned)((Sk + TILE - 1) / TILE), (unsigned)KVH, (unsigned)B), THREADS,
                    smem_kv)(dk, dv, q, k, v, lse, delta, dout, Sq, Sk, H, KVH, D, mk, scale);
        LAUNCH_CHECK();
    }
}

void check_shape(const char *fn, int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D, bool causal,
                 int64_t window)
{
    if (B < 0 || Sq < 0 || Sk < 0 || H <= 0 || KVH <= 0 || D <= 0 || H % KVH)
        rt_fatal("%s: bad shape B=%lld Sq=%lld Sk=%lld H=%lld KVH=%lld D=%lld", fn, (long long)B, (long long)Sq,
                 (long long)Sk, (long long)H, (long long)KVH, (long long)D);
    if (D > 256) rt_fatal("%s: head dim %lld > 256 is not supported", fn, (long long)D);
    if (Sq > INT32_MAX / 2 || Sk > INT32_MAX / 2)
        rt_fatal("%s: sequence length %lld is too long", fn, (long long)(Sq > Sk ? Sq : Sk));
    if (window < 0) rt_fatal("%s: window %lld is negative (0 means no window)", fn, (long long)window);
    if (window > 0 && !causal)
        rt_fatal("%s: a sliding window (%lld) needs causal attention", fn, (long long)window);
    rtcu_check_grid(fn, (Sq + TILE - 1) / TILE, H, B);
    rtcu_check_grid(fn, (Sk + TILE - 1) / TILE, KVH, B);
}

/* The chunk table of rt_attention_pos_*, checked, in the kernels' form.
 * Positions must keep every row's position and window arithmetic in int. */
RtcuAttnPos make_pos(const char *fn, int64_t Sq, int64_t Sk, int64_t chunk, const int64_t *qpos, const int64_t *kpos)
{
    if (chunk < 1 || Sq % chunk || Sk % chunk)
        rt_fatal("%s: chunk %lld does not divide Sq=%lld and Sk=%lld", fn, (long long)chunk, (long long)Sq,
                 (long long)Sk);
    if (Sq / chunk > RT_ATTN_MAX_CHUNKS || Sk / chunk > RT_ATTN_MAX_CHUNKS)
        rt_fatal("%s: %lld query and %lld key chunks (at most %d each)", fn, (long long)(Sq / chunk),
                 (long long)(Sk / chunk), RT_ATTN_MAX_CHUNKS);
    if ((Sq && !qpos) || (Sk && !kpos)) rt_fatal("%s: no chunk positions", fn);
    RtcuAttnPos p{};
    p.chunk = (int)chunk;
    const int64_t lim = INT32_MAX / 4;
    for (int side = 0; side < 2; side++) {
        const int64_t *src = side ? kpos : qpos;
        int *dst = side ? p.kpos : p.qpos;
        for (int64_t c = 0; c < (side ? Sk : Sq) / chunk; c++) {
            if (src[c] < -lim || src[c] + chunk > lim)
                rt_fatal("%s: position %lld out of range (|position| < %lld)", fn, (long long)src[c], (long long)lim);
            dst[c] = (int)src[c];
        }
    }
    return p;
}

/* -1: not decided yet (PTDC_ATTENTION=generic forces the CUDA-core path). */
int force_generic = -1;

/* Why the tensor-core kernels cannot run: one flag per reason, so each is
 * reported once per process. */
enum { WHY_DIM, WHY_ALIGN, WHY_ENV, WHY_N };
bool warned[WHY_N];

void warn_once(int why, const char *fn, const char *reason)
{
    if (warned[why]) return;
    warned[why] = true;
    fprintf(stderr,
            "ptdc: warning: %s: %s; using the CUDA-core attention kernels (an order of magnitude slower than "
            "tensor cores; said once)\n",
            fn, reason);
    fflush(stderr);
}

/* The tensor-core kernels take this call, or the reason they cannot is
 * reported (once). ptrs: every buffer they would read or write. */
bool use_fa2(const char *fn, int64_t D, std::initializer_list<std::pair<const char *, const void *>> ptrs)
{
    if (force_generic < 0) {
        const char *e = getenv("PTDC_ATTENTION");
        force_generic = e && !strcmp(e, "generic");
        if (force_generic) warn_once(WHY_ENV, fn, "PTDC_ATTENTION=generic is set");
    }
    if (force_generic) return false;
    char why[160];
    if (!rtcu_attention_fa2_dim(D)) {
        snprintf(why, sizeof why, "head dim %lld has no tensor-core kernel (64, 80, 96 and 128 have)", (long long)D);
        warn_once(WHY_DIM, fn, why);
        return false;
    }
    for (auto &p : ptrs)
        if ((uintptr_t)p.second % 16) {
            snprintf(why, sizeof why, "buffer %s (%p) is not 16-byte aligned", p.first, p.second);
            warn_once(WHY_ALIGN, fn, why);
            return false;
        }
    return true;
}

/* -1: not decided yet (PTDC_ATTENTION_DETERMINISTIC=1 asks for the
 * two-kernel backward whose dQ is bitwise reproducible). */
int deterministic = -1;

bool want_deterministic()
{
    if (deterministic < 0) {
        const char *e = getenv("PTDC_ATTENTION_DETERMINISTIC");
        deterministic = e && *e && strcmp(e, "0") != 0;
    }
    return deterministic != 0;
}

} // namespace

extern "C" void rtcu_attention_force_generic(int on) { force_generic = on; }
extern "C" void rtcu_attention_deterministic(int on) { deterministic = on; }

namespace {

void attn_fwd(const char *fn, rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t B,
              int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D, bool causal, int64_t window,
              const RtcuAttnPos &pos)
{
    if (B == 0 || Sq == 0) return;
    size_t es = sizeof(rt_act), qb = (size_t)(B * Sq * H * D) * es, kb = (size_t)(B * Sk * KVH * D) * es;
    rtcu_deps({{o, qb}, {lse, (size_t)(B * Sq * H) * 4}, {q, qb}, {k, kb}, {v, kb}});
    Mask mk{pos, causal, (int)window};
    if (use_fa2(fn, D, {{"o", o}, {"q", q}, {"k", k}, {"v", v}})) {
        rtcu_attention_fa2_fwd(o, lse, q, k, v, B, Sq, Sk, H, KVH, D, causal, window, pos);
        return;
    }
    float scale = 1.0f / sqrtf((float)D);
    if (D <= 16)
        run_fwd<2>(o, lse, q, k, v, B, Sq, Sk, H, KVH, D, mk, scale);
    else if (D <= 32)
        run_fwd<4>(o, lse, q, k, v, B, Sq, Sk, H, KVH, D, mk, scale);
    else if (D <= 64)
        run_fwd<8>(o, lse, q, k, v, B, Sq, Sk, H, KVH, D, mk, scale);
    else if (D <= 128)
        run_fwd<16>(o, lse, q, k, v, B, Sq, Sk, H, KVH, D, mk, scale);
    else
        run_fwd<32>(o, lse, q, k, v, B, Sq, Sk, H, KVH, D, mk, scale);
}

void attn_bwd(const char *fn, rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v,
              const rt_act *o, const float *lse, const rt_act *dout, int64_t B, int64_t Sq, int64_t Sk, int64_t H,
              int64_t KVH, int64_t D, bool causal, int64_t window, const RtcuAttnPos &pos)
{
    if (B == 0 || (Sq == 0 && Sk == 0)) return;
    size_t es = sizeof(rt_act), qb = (size_t)(B * Sq * H * D) * es, kb = (size_t)(B * Sk * KVH * D) * es;
    rtcu_deps({{dq, qb}, {dk, kb}, {dv, kb}, {q, qb}, {k, kb}, {v, kb}, {o, qb}, {dout, qb}});
    rtcu_deps({{lse, (size_t)(B * Sq * H) * 4}});
    int64_t rows = B * Sq * H;
    bool fa2 = use_fa2(fn, D, {{"dq", dq}, {"dk", dk}, {"dv", dv}, {"q", q}, {"k", k}, {"v", v}, {"dout", dout}});
    /* Scratch: Delta, then (the atomic backward) dQ in fp32, 256-byte aligned. */
    size_t dbytes = ((size_t)rows * sizeof(float) + 255) / 256 * 256;
    bool atomic_dq = fa2 && !want_deterministic();
    char *sc = (char *)rtcu_scratch(dbytes + (atomic_dq ? (size_t)(rows * D) * sizeof(float) : 0));
    float *delta = (float *)sc;
    if (rows > 0) {
        RTCU_LAUNCH(k_delta, (unsigned)rtcu_cdiv(rows * 32, 256), 256, 0)(delta, o, dout, rows, D);
        LAUNCH_CHECK();
    }
    if (fa2) {
        rtcu_attention_fa2_bwd(dq, dk, dv, q, k, v, lse, delta, dout, B, Sq, Sk, H, KVH, D, causal, window, pos,
                               atomic_dq ? (float *)(sc + dbytes) : nullptr);
        return;
    }
    Mask mk{pos, causal, (int)window};
    float scale = 1.0f / sqrtf((float)D);
    if (D <= 16)
        run_bwd<2>(dq, dk, dv, q, k, v, lse, delta, dout, B, Sq, Sk, H, KVH, D, mk, scale);
    else if (D <= 32)
        run_bwd<4>(dq, dk, dv, q, k, v, lse, delta, dout, B, Sq, Sk, H, KVH, D, mk, scale);
    else if (D <= 64)
        run_bwd<8>(dq, dk, dv, q, k, v, lse, delta, dout, B, Sq, Sk, H, KVH, D, mk, scale);
    else if (D <= 128)
        run_bwd<16>(dq, dk, dv, q, k, v, lse, delta, dout, B, Sq, Sk, H, KVH, D, mk, scale);
    else
        run_bwd<32>(dq, dk, dv, q, k, v, lse, delta, dout, B, Sq, Sk, H, KVH, D, mk, scale);
}

/* rt_attention_fwd/bwd: one chunk of S rows at position 0 each side; a
 * window of S or more is no window. */
RtcuAttnPos one_chunk(int64_t S, int64_t &window)
{
    if (window >= S) window = 0;
    RtcuAttnPos p{};
    p.chunk = S > 0 ? (int)S : 1;
    return p;
}

} // namespace

void rt_attention_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t B, int64_t S,
                      int64_t H, int64_t KVH, int64_t D, bool causal, int64_t window)
{
    rtcu_require_init("rt_attention_fwd");
    check_shape("rt_attention_fwd", B, S, S, H, KVH, D, causal, window);
    RtcuAttnPos p = one_chunk(S, window);
    attn_fwd("rt_attention_fwd", o, lse, q, k, v, B, S, S, H, KVH, D, causal, window, p);
}

void rt_attention_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v,
                      const rt_act *o, const float *lse, const rt_act *dout, int64_t B, int64_t S, int64_t H,
                      int64_t KVH, int64_t D, bool causal, int64_t window)
{
    rtcu_require_init("rt_attention_bwd");
    check_shape("rt_attention_bwd", B, S, S, H, KVH, D, causal, window);
    RtcuAttnPos p = one_chunk(S, window);
    attn_bwd("rt_attention_bwd", dq, dk, dv, q, k, v, o, lse, dout, B, S, S, H, KVH, D, causal, window, p);
}

void rt_attention_pos_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t B,
                          int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D, bool causal, int64_t window,
                          int64_t chunk, const int64_t *qpos, const int64_t *kpos)
{
    const char *fn = "rt_attention_pos_fwd";
    rtcu_require_init(fn);
    check_shape(fn, B, Sq, Sk, H, KVH, D, causal, window);
    RtcuAttnPos p = make_pos(fn, Sq, Sk, chunk, qpos, kpos);
    if (window > INT32_MAX / 4) window = 0; /* wider than any two positions apart */
    attn_fwd(fn, o, lse, q, k, v, B, Sq, Sk, H, KVH, D, causal, window, p);
}

void rt_attention_pos_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v,
                          const rt_act *o, const float *lse, const rt_act *dout, int64_t B, int64_t Sq, int64_t Sk,
                          int64_t H, int64_t KVH, int64_t D, bool causal, int64_t window, int64_t chunk,
                          const int64_t *qpos, const int64_t *kpos)
{
    const char *fn = "rt_attention_pos_bwd";
    rtcu_require_init(fn);
    check_shape(fn, B, Sq, Sk, H, KVH, D, causal, window);
    RtcuAttnPos p = make_pos(fn, Sq, Sk, chunk, qpos, kpos);
    if (window > INT32_MAX / 4) window = 0;
    attn_bwd(fn, dq, dk, dv, q, k, v, o, lse, dout, B, Sq, Sk, H, KVH, D, causal, window, p);
}
