/* attention_fa2.cu: tensor-core attention in the FlashAttention-2 scheme for
 * head dims 64, 80, 96 and 128 (bf16 in, fp32 accumulate and statistics);
 * attention.cu dispatches here and falls back to its CUDA-core kernels for
 * other head dims or misaligned buffers. Building blocks and fragment
 * layouts: attention_tc.cuh.
 *
 * Masks, on positions (attention_pos.cuh: rows in chunks of consecutive
 * positions; rt_attention_fwd/bwd are one chunk at 0, row i at i): a key
 * at p' is visible to a query at p iff p' <= p when causal, and p - p' <
 * window when window > 0 (Hugging Face Mistral's sliding window). Key tiles
 * that are masked for every query of a tile (above the diagonal, before the
 * window, chunks that cannot meet) are skipped on both sides of the band;
 * the element mask is evaluated only on tiles that cross an edge (by index
 * with a shift when both tiles lie in one chunk, by position otherwise).
 *
 * Softmax in base 2: scores are kept unscaled, the row maximum m too, and
 * p = 2^(s * c - m * c) with c = scale * log2(e) folded into one FFMA before
 * MUFU.EX2; lse = (m c + log2 l) ln 2 (natural log, as rt.h defines it).
 *
 * Forward (k_fwd): a block of 4 warps owns 128 queries, 32 per warp (two
 * 16-row m-tiles, so every K and V fragment loaded from shared memory feeds
 * two mma). Tiles of 64 keys (32 above D = 64, for registers) of K and V
 * stream through shared memory with cp.async in FlashAttention-2's order:
 * V of tile j loads while S = Q K^T and the softmax run, K of tile j+1
 * while O += P V runs. The probabilities go from the S accumulators
 * straight into the A fragments of P V.
 *
 * Backward, after Delta = rowsum(dO * O) (attention.cu):
 *   k_dkv: a block of 8 warps owns 128 keys, 16 per warp, and loops over the
 *     query heads of its kv group and 64-query tiles (32 above D = 80; double-buffered
 *     cp.async): S^T = K Q^T and dP^T = V dO^T (keys as rows, so P^T and
 *     dS^T = P^T (dP^T - Delta) are already A fragments), dV += P^T dO,
 *     dK += dS^T Q; each dK, dV element is summed by one thread in a fixed
 *     order.
 *   By default (FlashAttention-2's scheme, 5 GEMM-shaped products) the same
 *     kernel also adds dQ: each warp stores its dS^T (bf16, the operand dK
 *     used) in shared memory, and after a barrier the 8 warps share the
 *     query tile's dS K over the block's 128 keys (16 x 32 output blocks,
 *     ldmatrix.trans of dS^T as the A operand) and add it into an fp32 dQ
 *     buffer with atomics (red.global.add.f32); k_dq_cast scales it and
 *     rounds to bf16. The order of those additions varies from run to run,
 *     so dQ is not bitwise reproducible (dK, dV are).
 *   Deterministic (PTDC_ATTENTION_DETERMINISTIC=1): k_dkv without dQ, then
 *     k_dq: a block of 8 warps owns 128 queries, 16 per warp (Q and dO
 *     fragments held in registers), and loops over 64-key tiles
 *     (double-buffered): S = Q K^T, dP = dO V^T, dQ += dS K. S and dP are
 *     computed twice (7 products): the price of bitwise reproducible
 *     gradients without an fp32 dQ buffer per key block.
 * P and dS are rounded to bf16 as GEMM operands, as in FlashAttention-2. */
#include "attention_pos.cuh"
#include "attention_tc.cuh"

namespace {

using namespace fa2;

constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

struct Args {
    rt_act *o, *dq, *dk, *dv;
    float *lse_out, *dq_acc; /* dq_acc: fp32 [B, Sq, H, D] dQ / scale, zeroed (the atomic backward) */
    const rt_act *q, *k, *v, *dout;
    const float *lse, *delta;
    int Sq, Sk, window; /* query and key rows; window: 0 = none */
    int64_t H, KVH;
    bool causal;
    float scale, c; /* c = scale * log2(e) */
    RtcuAttnPos p;  /* the rows' positions (attention_pos.cuh) */
};

/* A query tile [q0, q0 + nq) against a key tile [k0, k0 + nk) (both
 * clipped to the rows there are): `any` pair visible, else the tile is
 * skipped; `full`: every pair, no element mask; `contig`: each inside one
 * chunk, so position(qi) - position(kj) = qi - kj + sh. */
struct Tile {
    bool any, full, contig;
    int sh;
};
/* The query tile's side of it, computed once per query tile. */
struct QSide {
    int q0, qe, qmin, qmax;
    bool one;
};
__device__ __forceinline__ QSide qside(int q0, int nq, const Args &a)
{
    QSide q;
    q.q0 = q0, q.qe = imin(q0 + nq, a.Sq);
    apos::range(a.p.qpos, a.p.chunk, q0, q.qe, q.qmin, q.qmax);
    q.one = apos::one_chunk(a.p.chunk, q0, q.qe);
    return q;
}
__device__ __forceinline__ Tile tile(const QSide &q, int nq, int k0, int nk, const Args &a)
{
    int ke = imin(k0 + nk, a.Sk), kmin, kmax;
    apos::range(a.p.kpos, a.p.chunk, k0, ke, kmin, kmax);
    Tile t;
    t.any = apos::may_see(q.qmin, q.qmax, kmin, kmax, a.causal, a.window);
    t.full = q.q0 + nq <= a.Sq && k0 + nk <= a.Sk && apos::all_seen(q.qmin, q.qmax, kmin, kmax, a.causal, a.window);
    t.contig = q.one && apos::one_chunk(a.p.chunk, k0, ke);
    t.sh = t.contig ? apos::shift(a.p, q.q0, k0) : 0;
    return t;
}
/* Query qi sees key kj (the element mask of a tile that is not full). */
__device__ __forceinline__ bool visible(int qi, int kj, const Args &a, const Tile &t)
{
    if (qi >= a.Sq || kj >= a.Sk) return false;
    if (t.contig) return apos::sees(qi + t.sh, kj, a.causal, a.window);
    return apos::sees(apos::pos_of(a.p.qpos, a.p.chunk, qi), apos::pos_of(a.p.kpos, a.p.chunk, kj), a.causal,
                      a.window);
}
/* Some query of the query tile sees some key of key tile kt (BN keys). */
template <int BN>
__device__ __forceinline__ bool key_tile_any(const QSide &q, int kt, const Args &a)
{
    int ke = imin(kt * BN + BN, a.Sk), kmin, kmax;
    apos::range(a.p.kpos, a.p.chunk, kt * BN, ke, kmin, kmax);
    return apos::may_see(q.qmin, q.qmax, kmin, kmax, a.causal, a.window);
}
/* The key tiles [kt0, kt1) between the first and the last one the query
 * tile sees (kt0 == kt1: none); next_key_tile steps over the ones between
 * that it does not see (all are seen with one chunk a side). */
template <int BN>
__device__ __forceinline__ void key_tiles(const QSide &q, const Args &a, int &kt0, int &kt1)
{
    const int n = (a.Sk + BN - 1) / BN;
    kt0 = 0, kt1 = n;
    while (kt0 < n && !key_tile_any<BN>(q, kt0, a)) kt0++;
    while (kt1 > kt0 && !key_tile_any<BN>(q, kt1 - 1, a)) kt1--;
}
template <int BN>
__device__ __forceinline__ int next_key_tile(const QSide &q, int kt, int kt1, const Args &a)
{
    for (kt++; kt < kt1 && !key_tile_any<BN>(q, kt, a); kt++) {}
    return kt;
}
/* Some query of query tile qt (BQ rows) sees some key of [k0, ke). */
template <int BQ>
__device__ __forceinline__ bool query_tile_any(int qt, int kmin, int kmax, const Args &a)
{
    int qmin, qmax;
    apos::range(a.p.qpos, a.p.chunk, qt * BQ, imin(qt * BQ + BQ, a.Sq), qmin, qmax);
    return apos::may_see(qmin, qmax, kmin, kmax, a.causal, a.window);
}

/* ------------------------------------------------------------- forward */
template <int D>
struct FwdCfg {
    static constexpr int NW = 4, MT = 2, BM = 16 * MT * NW, BN = D <= 64 ? 64 : 32, LD = D + 8;
    static constexpr bool QREG = D <= 64; /* Q fragments in registers (else reread per tile) */
    static constexpr size_t smem = (size_t)(BM + 2 * BN) * LD * sizeof(rt_act);
};

template <int D>
__global__ void __launch_bounds__(FwdCfg<D>::NW * 32, 2) k_fwd(const Args a)
{
    using C = FwdCfg<D>;
    constexpr int NT = C::NW * 32, MT = C::MT, BM = C::BM, BN = C::BN, LD = C::LD, KS = D / 16, ND = D / 8,
                  NN = BN / 8;
    constexpr bool QREG = C::QREG;
    RTCU_DYN_SMEM(unsigned char, smem);
    const saddr Qs = sptr(smem), Ks = Qs + at<LD>(BM, 0), Vs = Ks + at<LD>(BN, 0);
    const int Sq = a.Sq, Sk = a.Sk;
    const int qt = a.causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x; /* long rows first */
    const int64_t h = blockIdx.y, b = blockIdx.z, kvh = h / (a.H / a.KVH);
    const int w = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int q0 = qt * BM, wr = w * 16 * MT; /* this warp's first row in the tile */
    /* this lane's ldmatrix row addresses in the Q, K and V tiles */
    const saddr qrow = Qs + lane_a<LD>(lane) + at<LD>(wr, 0), krow = Ks + lane_bt<LD>(lane), vrow = Vs + lane_bn<LD>(lane);
    const rt_act *qg = a.q + b * Sq * a.H * D, *kg = a.k + b * Sk * a.KVH * D, *vg = a.v + b * Sk * a.KVH * D;
    const QSide qs = qside(q0, BM, a);
    int kt0, kt1;
    key_tiles<BN>(qs, a, kt0, kt1);

    load_tile<D, BM, NT>(Qs, qg, q0, Sq, a.H, h, "fwd: Q tile, cp.async");
    if (kt0 < kt1) load_tile<D, BN, NT>(Ks, kg, kt0 * BN, Sk, a.KVH, kvh, "fwd: K tile, cp.async");
    cp_async_commit();

    uint32_t qf[QREG ? MT : 1][QREG ? KS : 1][4];
    if (QREG) {
        cp_async_wait_all();
        __syncthreads();
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int kk = 0; kk < KS; kk++)
                ldsm_x4(qf[QREG ? mt : 0][QREG ? kk : 0], qrow + at<LD>(16 * mt, 16 * kk), "fwd: Q frag, ldmatrix");
    }
    float o[MT][ND][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int n = 0; n < ND; n++) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.0f;
    }
    const float c = a.c;

    for (int kt = kt0, kn; kt < kt1; kt = kn) {
        kn = next_key_tile<BN>(qs, kt, kt1, a); /* skips tiles no query of the block sees */
        cp_async_wait_all(); /* K of this tile (and Q) */
        __syncthreads();     /* ... for every thread; and all are done with V of the last tile */
        load_tile<D, BN, NT>(Vs, vg, kt * BN, Sk, a.KVH, kvh, "fwd: V tile, cp.async");
        cp_async_commit();

        float s[MT][NN][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int n = 0; n < NN; n++) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            uint32_t qa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if (QREG) {
#pragma unroll
                    for (int i = 0; i < 4; i++) qa[mt][i] = qf[QREG ? mt : 0][QREG ? kk : 0][i];
                } else {
                    ldsm_x4(qa[mt], qrow + at<LD>(16 * mt, 16 * kk), "fwd: Q frag, ldmatrix");
                }
            }
#pragma unroll
            for (int np = 0; np < NN / 2; np++) {
                uint32_t kf[4];
                ldsm_x4(kf, krow + at<LD>(16 * np, 16 * kk), "fwd: K frag, ldmatrix");
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma16816(s[mt][2 * np], qa[mt], kf[0], kf[1]);
                    mma16816(s[mt][2 * np + 1], qa[mt], kf[2], kf[3]);
                }
            }
        }
        const Tile tl = tile(qs, BM, kt * BN, BN, a);
        if (!tl.full) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < NN; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (!visible(q0 + wr + 16 * mt + g + 8 * (e >> 1), kt * BN + 8 * n + 2 * t + (e & 1), a, tl))
                            s[mt][n][e] = -INFINITY;
        }
        /* Online softmax: rescale what is accumulated to the new row max. */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                float mx = m[mt][hr];
#pragma unroll
                for (int n = 0; n < NN; n++) mx = fmaxf(mx, fmaxf(s[mt][n][2 * hr], s[mt][n][2 * hr + 1]));
                mx = quad_max(mx);
                float base = mx == -INFINITY ? 0.0f : mx * c; /* a row with nothing visible yet */
                float alpha = exp2_fast(m[mt][hr] * c - base);
                m[mt][hr] = mx;
                float sum = 0.0f;
#pragma unroll
                for (int n = 0; n < NN; n++) {
                    float p0 = exp2_fast(fmaf(s[mt][n][2 * hr], c, -base));
                    float p1 = exp2_fast(fmaf(s[mt][n][2 * hr + 1], c, -base));
                    s[mt][n][2 * hr] = p0;
                    s[mt][n][2 * hr + 1] = p1;
                    sum += p0 + p1;
                }
                l[mt][hr] = l[mt][hr] * alpha + sum;
#pragma unroll
                for (int n = 0; n < ND; n++) {
                    o[mt][n][2 * hr] *= alpha;
                    o[mt][n][2 * hr + 1] *= alpha;
                }
            }

        cp_async_wait_all(); /* V of this tile */
        __syncthreads();     /* ... for every thread; and all are done with K */
        if (kn < kt1) {
            load_tile<D, BN, NT>(Ks, kg, kn * BN, Sk, a.KVH, kvh, "fwd: K tile, cp.async");
            cp_async_commit();
        }
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t pa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) a_from_c(pa[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
            for (int np = 0; np < ND / 2; np++) {
                uint32_t vf[4];
                ldsm_x4_t(vf, vrow + at<LD>(16 * kk, 16 * np), "fwd: V frag, ldmatrix.trans");
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma16816(o[mt][2 * np], pa[mt], vf[0], vf[1]);
                    mma16816(o[mt][2 * np + 1], pa[mt], vf[2], vf[3]);
                }
            }
        }
    }

#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float sum = quad_sum(l[mt][hr]);
            int row = q0 + wr + 16 * mt + g + 8 * hr;
            if (row >= Sq) continue;
            float inv = sum > 0.0f ? 1.0f / sum : 0.0f; /* a row that sees no key: o = 0, lse = -inf */
            rt_act *orow = a.o + ((b * Sq + row) * a.H + h) * D;
#pragma unroll
            for (int n = 0; n < ND; n++)
                *reinterpret_cast<uint32_t *>(orow + 8 * n + 2 * t) =
                    pack_bf16(o[mt][n][2 * hr] * inv, o[mt][n][2 * hr + 1] * inv);
            if (t == 0) a.lse_out[(b * Sq + row) * a.H + h] = (m[mt][hr] * c + log2f(sum)) * LN2;
        }
}

/* ------------------------------------------------------------------ dQ */
template <int D>
struct DqCfg {
    static constexpr int NW = 8, BM = 16 * NW, BN = 64, LD = D + 8;
    static constexpr size_t smem = (size_t)(2 * BM + 4 * BN) * LD * sizeof(rt_act);
};

template <int D>
__global__ void __launch_bounds__(DqCfg<D>::NW * 32, 1) k_dq(const Args a)
{
    using C = DqCfg<D>;
    constexpr int NT = C::NW * 32, BM = C::BM, BN = C::BN, LD = C::LD, KS = D / 16, ND = D / 8, NN = BN / 8;
    RTCU_DYN_SMEM(unsigned char, smem);
    const saddr Qs = sptr(smem), Os = Qs + at<LD>(BM, 0), Kb = Os + at<LD>(BM, 0), Vb = Kb + at<LD>(2 * BN, 0);
    const int Sq = a.Sq, Sk = a.Sk;
    const int qt = a.causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
    const int64_t h = blockIdx.y, b = blockIdx.z, kvh = h / (a.H / a.KVH);
    const int w = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int q0 = qt * BM, wr = 16 * w;
    const rt_act *kg = a.k + b * Sk * a.KVH * D, *vg = a.v + b * Sk * a.KVH * D;
    const QSide qs = qside(q0, BM, a);
    int kt0, kt1;
    key_tiles<BN>(qs, a, kt0, kt1);

    load_tile<D, BM, NT>(Qs, a.q + b * Sq * a.H * D, q0, Sq, a.H, h, "dq: Q tile, cp.async");
    load_tile<D, BM, NT>(Os, a.dout + b * Sq * a.H * D, q0, Sq, a.H, h, "dq: dO tile, cp.async");
    if (kt0 < kt1) {
        load_tile<D, BN, NT>(Kb, kg, kt0 * BN, Sk, a.KVH, kvh, "dq: K tile, cp.async");
        load_tile<D, BN, NT>(Vb, vg, kt0 * BN, Sk, a.KVH, kvh, "dq: V tile, cp.async");
    }
    cp_async_commit();

    float L[2], Dl[2]; /* this lane's rows g and g + 8: lse in base 2, Delta */
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        int row = q0 + wr + g + 8 * hr;
        L[hr] = row < Sq ? a.lse[(b * Sq + row) * a.H + h] * LOG2E : 0.0f;
        Dl[hr] = row < Sq ? a.delta[(b * Sq + row) * a.H + h] : 0.0f;
    }
    cp_async_wait_all();
    __syncthreads();
    uint32_t qf[KS][4], df[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        ldsm_x4(qf[kk], Qs + lane_a<LD>(lane) + at<LD>(wr, 16 * kk), "dq: Q frag, ldmatrix");
        ldsm_x4(df[kk], Os + lane_a<LD>(lane) + at<LD>(wr, 16 * kk), "dq: dO frag, ldmatrix");
    }
    float acc[ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    const float c = a.c;

    for (int kt = kt0, kn, step = 0; kt < kt1; kt = kn, step++) {
        kn = next_key_tile<BN>(qs, kt, kt1, a); /* skips tiles no query of the block sees */
        const int buf = step & 1;
        const saddr Kt = Kb + buf * at<LD>(BN, 0) + lane_bt<LD>(lane), Vt = Vb + buf * at<LD>(BN, 0) + lane_bt<LD>(lane),
                    Kn = Kb + buf * at<LD>(BN, 0) + lane_bn<LD>(lane);
        cp_async_wait_all();
        __syncthreads(); /* tile kt landed for all; all are done with the other buffer */
        if (kn < kt1) {
            load_tile<D, BN, NT>(Kb + (buf ^ 1) * at<LD>(BN, 0), kg, kn * BN, Sk, a.KVH, kvh, "dq: K tile, cp.async");
            load_tile<D, BN, NT>(Vb + (buf ^ 1) * at<LD>(BN, 0), vg, kn * BN, Sk, a.KVH, kvh, "dq: V tile, cp.async");
            cp_async_commit();
        }
        float s[NN][4], dp[NN][4];
#pragma unroll
        for (int n = 0; n < NN; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++)
#pragma unroll
            for (int np = 0; np < NN / 2; np++) {
                uint32_t kf[4], vf[4];
                ldsm_x4(kf, Kt + at<LD>(16 * np, 16 * kk), "dq: K frag, ldmatrix");
                mma16816(s[2 * np], qf[kk], kf[0], kf[1]);
                mma16816(s[2 * np + 1], qf[kk], kf[2], kf[3]);
                ldsm_x4(vf, Vt + at<LD>(16 * np, 16 * kk), "dq: V frag, ldmatrix");
                mma16816(dp[2 * np], df[kk], vf[0], vf[1]);
                mma16816(dp[2 * np + 1], df[kk], vf[2], vf[3]);
            }
        const Tile tl = tile(qs, BM, kt * BN, BN, a);
#pragma unroll
        for (int n = 0; n < NN; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int hr = e >> 1;
                float p = exp2_fast(fmaf(s[n][e], c, -L[hr]));
                if (!tl.full && !visible(q0 + wr + g + 8 * hr, kt * BN + 8 * n + 2 * t + (e & 1), a, tl)) p = 0.0f;
                s[n][e] = p * (dp[n][e] - Dl[hr]); /* dS */
            }
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t da[4];
            a_from_c(da, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int np = 0; np < ND / 2; np++) {
                uint32_t kf[4];
                ldsm_x4_t(kf, Kn + at<LD>(16 * kk, 16 * np), "dq: K frag, ldmatrix.trans");
                mma16816(acc[2 * np], da, kf[0], kf[1]);
                mma16816(acc[2 * np + 1], da, kf[2], kf[3]);
            }
        }
    }
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        int row = q0 + wr + g + 8 * hr;
        if (row >= Sq) continue;
        rt_act *drow = a.dq + ((b * Sq + row) * a.H + h) * D;
#pragma unroll
        for (int n = 0; n < ND; n++)
            *reinterpret_cast<uint32_t *>(drow + 8 * n + 2 * t) =
                pack_bf16(acc[n][2 * hr] * a.scale, acc[n][2 * hr + 1] * a.scale);
    }
}

/* --------------------------------------------------------------- dK, dV */
template <int D, bool DQ>
struct DkvCfg {
    static constexpr int NW = 8, BN = 16 * NW, BQ = D <= 80 ? 64 : 32, LD = D + 8;
    /* dS^T tile [BN keys][BQ queries], pitch BQ + 8: an odd number of 16-byte
     * chunks (9 or 5), so its ldmatrix phases are conflict-free too. */
    static constexpr int LS = BQ + 8;
    static constexpr bool KVREG = D <= 64; /* K and V fragments in registers */
    static constexpr size_t smem = (size_t)(2 * BN + 4 * BQ) * LD * sizeof(rt_act) + 4 * BQ * sizeof(float) +
                                   (DQ ? (size_t)BN * LS * sizeof(rt_act) : 0);
};

template <int D, bool DQ>
__global__ void __launch_bounds__(DkvCfg<D, DQ>::NW * 32, 1) k_dkv(const Args a)
{
    using C = DkvCfg<D, DQ>;
    constexpr int NT = C::NW * 32, BN = C::BN, BQ = C::BQ, LD = C::LD, LS = C::LS, KS = D / 16, ND = D / 8,
                  NQ = BQ / 8;
    constexpr bool KVREG = C::KVREG;
    static_assert(2 * BQ <= NT, "one thread per statistic");
    RTCU_DYN_SMEM(unsigned char, smem);
    const saddr Ks = sptr(smem), Vs = Ks + at<LD>(BN, 0), Qb = Vs + at<LD>(BN, 0), Ob = Qb + at<LD>(2 * BQ, 0),
                Lb = Ob + at<LD>(2 * BQ, 0), Db = Lb + 2 * BQ * 4, /* lse, Delta: [2][BQ] fp32 each */
        Ss = Db + 2 * BQ * 4;                                    /* dS^T (DQ only) */
    const int Sq = a.Sq, Sk = a.Sk;
    const int64_t kvh = blockIdx.y, b = blockIdx.z, G = a.H / a.KVH;
    const int w = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int k0 = (int)blockIdx.x * BN, wr = 16 * w;
    /* The query tiles [qt0, qt1) between the first and the last that see a
     * key of the block; steps go over (query head, tile) and skip the tiles
     * between that see none (all are seen with one chunk a side). */
    int kmin, kmax;
    apos::range(a.p.kpos, a.p.chunk, k0, imin(k0 + BN, Sk), kmin, kmax);
    const int nqt = (Sq + BQ - 1) / BQ;
    int qt0 = 0, qt1 = nqt;
    while (qt0 < nqt && !query_tile_any<BQ>(qt0, kmin, kmax, a)) qt0++;
    while (qt1 > qt0 && !query_tile_any<BQ>(qt1 - 1, kmin, kmax, a)) qt1--;
    const int nq = qt1 - qt0, total = (int)G * nq;
    auto next_step = [&](int i) {
        for (i++; i < total && !query_tile_any<BQ>(qt0 + i % nq, kmin, kmax, a); i++) {}
        return i;
    };

    /* Q, dO, lse and Delta of step i (query head kvh * G + i / nq, tile
     * qt0 + i % nq) into buffer `buf`. */
    auto load_step = [&](int i, int buf) {
        int64_t h = kvh * G + i / nq;
        int q0 = (qt0 + i % nq) * BQ;
        load_tile<D, BQ, NT>(Qb + buf * at<LD>(BQ, 0), a.q + b * Sq * a.H * D, q0, Sq, a.H, h, "dkv: Q tile, cp.async");
        load_tile<D, BQ, NT>(Ob + buf * at<LD>(BQ, 0), a.dout + b * Sq * a.H * D, q0, Sq, a.H, h,
                             "dkv: dO tile, cp.async");
        int x = (int)threadIdx.x;
        if (x < 2 * BQ) { /* whole warps: BQ is a multiple of 32 */
            int qi = q0 + x % BQ;
            bool ok = qi < Sq;
            const float *src = (x < BQ ? a.lse : a.delta) + (b * Sq + (ok ? qi : 0)) * a.H + h;
            cp_async4((x < BQ ? Lb : Db) + 4 * (buf * BQ + x % BQ), src, ok ? 4 : 0, "dkv: lse, Delta, cp.async");
        }
    };
    load_tile<D, BN, NT>(Ks, a.k + b * Sk * a.KVH * D, k0, Sk, a.KVH, kvh, "dkv: K tile, cp.async");
    load_tile<D, BN, NT>(Vs, a.v + b * Sk * a.KVH * D, k0, Sk, a.KVH, kvh, "dkv: V tile, cp.async");
    if (total > 0) load_step(0, 0);
    cp_async_commit();

    uint32_t kf[KVREG ? KS : 1][4], vf[KVREG ? KS : 1][4];
    if (KVREG) {
        cp_async_wait_all();
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            ldsm_x4(kf[KVREG ? kk : 0], Ks + lane_a<LD>(lane) + at<LD>(wr, 16 * kk), "dkv: K frag, ldmatrix");
            ldsm_x4(vf[KVREG ? kk : 0], Vs + lane_a<LD>(lane) + at<LD>(wr, 16 * kk), "dkv: V frag, ldmatrix");
        }
    }
    float dk[ND][4], dv[ND][4];
#pragma unroll
    for (int n = 0; n < ND; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;
    const float c = a.c;

    for (int i = 0, inext, step = 0; i < total; i = inext, step++) {
        inext = next_step(i);
        const int buf = step & 1, q0 = (qt0 + i % nq) * BQ;
        const int64_t h = kvh * G + i / nq;
        const saddr Qt = Qb + buf * at<LD>(BQ, 0) + lane_bt<LD>(lane), Ot = Ob + buf * at<LD>(BQ, 0) + lane_bt<LD>(lane),
                    Qn = Qb + buf * at<LD>(BQ, 0) + lane_bn<LD>(lane), On = Ob + buf * at<LD>(BQ, 0) + lane_bn<LD>(lane);
        const saddr Ls = Lb + 4 * buf * BQ + 8 * t, Ds = Db + 4 * buf * BQ + 8 * t; /* this lane's columns */
        cp_async_wait_all();
        __syncthreads(); /* step i landed for all; all are done with the other buffer */
        if (inext < total) {
            load_step(inext, buf ^ 1);
            cp_async_commit();
        }
        float st[NQ][4], dpt[NQ][4]; /* S^T, dP^T: this warp's 16 keys x BQ queries */
#pragma unroll
        for (int n = 0; n < NQ; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) st[n][e] = dpt[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            uint32_t ka[4], va[4];
            if (KVREG) {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    ka[j] = kf[KVREG ? kk : 0][j];
                    va[j] = vf[KVREG ? kk : 0][j];
                }
            } else {
                ldsm_x4(ka, Ks + lane_a<LD>(lane) + at<LD>(wr, 16 * kk), "dkv: K frag, ldmatrix");
                ldsm_x4(va, Vs + lane_a<LD>(lane) + at<LD>(wr, 16 * kk), "dkv: V frag, ldmatrix");
            }
#pragma unroll
            for (int np = 0; np < NQ / 2; np++) {
                uint32_t qf[4], of[4];
                ldsm_x4(qf, Qt + at<LD>(16 * np, 16 * kk), "dkv: Q frag, ldmatrix");
                mma16816(st[2 * np], ka, qf[0], qf[1]);
                mma16816(st[2 * np + 1], ka, qf[2], qf[3]);
                ldsm_x4(of, Ot + at<LD>(16 * np, 16 * kk), "dkv: dO frag, ldmatrix");
                mma16816(dpt[2 * np], va, of[0], of[1]);
                mma16816(dpt[2 * np + 1], va, of[2], of[3]);
            }
        }
        const Tile tl = tile(qside(q0, BQ, a), BQ, k0, BN, a);
#pragma unroll
        for (int n = 0; n < NQ; n++) {
            float2 L = lds_f2(Ls + 32 * n, "dkv: lse, lds.64");
            float2 Dd = lds_f2(Ds + 32 * n, "dkv: Delta, lds.64");
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float Le = (e & 1) ? L.y : L.x, De = (e & 1) ? Dd.y : Dd.x;
                float p = exp2_fast(fmaf(st[n][e], c, -Le * LOG2E));
                if (!tl.full) {
                    int qi = q0 + 8 * n + 2 * t + (e & 1);
                    if (!visible(qi, k0 + wr + g + 8 * (e >> 1), a, tl)) p = 0.0f;
                }
                st[n][e] = p;                    /* P^T */
                dpt[n][e] = p * (dpt[n][e] - De); /* dS^T */
            }
        }
#pragma unroll
        for (int kk = 0; kk < BQ / 16; kk++) {
            uint32_t pa[4], da[4];
            a_from_c(pa, st[2 * kk], st[2 * kk + 1]);
            a_from_c(da, dpt[2 * kk], dpt[2 * kk + 1]);
            if (DQ) { /* da's words are dS^T at rows g, g + 8 (keys), columns 2t, 2t + 8 (queries) */
                const saddr p = Ss + at<LS>(wr + g, 16 * kk + 2 * t);
                sts32(p, da[0], "dkv: dS^T store, 4 B");
                sts32(p + at<LS>(8, 0), da[1], "dkv: dS^T store, 4 B");
                sts32(p + at<LS>(0, 8), da[2], "dkv: dS^T store, 4 B");
                sts32(p + at<LS>(8, 8), da[3], "dkv: dS^T store, 4 B");
            }
#pragma unroll
            for (int np = 0; np < ND / 2; np++) {
                uint32_t of[4], qf[4];
                ldsm_x4_t(of, On + at<LD>(16 * kk, 16 * np), "dkv: dO frag, ldmatrix.trans");
                mma16816(dv[2 * np], pa, of[0], of[1]);
                mma16816(dv[2 * np + 1], pa, of[2], of[3]);
                ldsm_x4_t(qf, Qn + at<LD>(16 * kk, 16 * np), "dkv: Q frag, ldmatrix.trans");
                mma16816(dk[2 * np], da, qf[0], qf[1]);
                mma16816(dk[2 * np + 1], da, qf[2], qf[3]);
            }
        }
        if (DQ) {
            /* dQ[q0 .., h] += dS K over this block's keys, in output
             * blocks of 16 queries x 32 head-dim columns (16 x 16 when
             * D / 16 is odd) shared by the warps: one A fragment of dS (from
             * dS^T with ldmatrix.trans) serves the block's n-tiles, 3
             * ldmatrix.x4 per 4 mma where 16 x 16 blocks take 2 per 2. The
             * next step writes Ss only after its first barrier, which every
             * warp reaches after this. */
            __syncthreads();
            constexpr int NP = D / 16, NPW = NP % 2 ? 1 : 2, NG = NP / NPW, ITEMS = (BQ / 16) * NG;
            for (int it = w; it < ITEMS; it += C::NW) {
                const int m = it / NG, np0 = (it % NG) * NPW;
                float acc[2 * NPW][4];
#pragma unroll
                for (int j = 0; j < 2 * NPW; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
                for (int kk = 0; kk < BN / 16; kk++) {
                    uint32_t af[4];
                    ldsm_x4_t(af, Ss + lane_bt<LS>(lane) + at<LS>(16 * kk, 16 * m), "dkv: dS frag (dQ), ldmatrix.trans");
#pragma unroll
                    for (int j = 0; j < NPW; j++) {
                        uint32_t bf[4];
                        ldsm_x4_t(bf, Ks + lane_bn<LD>(lane) + at<LD>(16 * kk, 16 * (np0 + j)),
                                  "dkv: K frag (dQ), ldmatrix.trans");
                        mma16816(acc[2 * j], af, bf[0], bf[1]);
                        mma16816(acc[2 * j + 1], af, bf[2], bf[3]);
                    }
                }
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int row = q0 + 16 * m + g + 8 * hr;
                    if (row >= Sq) continue;
                    float *d = a.dq_acc + ((b * Sq + row) * a.H + h) * D + 16 * np0 + 2 * t;
#pragma unroll
                    for (int j = 0; j < 2 * NPW; j++) {
                        atomicAdd(d + 8 * j, acc[j][2 * hr]);
                        atomicAdd(d + 8 * j + 1, acc[j][2 * hr + 1]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        int row = k0 + wr + g + 8 * hr;
        if (row >= Sk) continue;
        int64_t off = ((b * Sk + row) * a.KVH + kvh) * D;
#pragma unroll
        for (int n = 0; n < ND; n++) {
            *reinterpret_cast<uint32_t *>(a.dk + off + 8 * n + 2 * t) =
                pack_bf16(dk[n][2 * hr] * a.scale, dk[n][2 * hr + 1] * a.scale);
            *reinterpret_cast<uint32_t *>(a.dv + off + 8 * n + 2 * t) = pack_bf16(dv[n][2 * hr], dv[n][2 * hr + 1]);
        }
    }
}

template <class K>
void smem_optin(K kern, size_t bytes)
{
    CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void *>(kern), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)bytes));
}

template <int D>
void fwd(const Args &a, int64_t B)
{
    using C = FwdCfg<D>;
    smem_optin(k_fwd<D>, C::smem);
    dim3 grid((unsigned)rtcu_cdiv(a.Sq, C::BM), (unsigned)a.H, (unsigned)B);
    RTCU_LAUNCH(k_fwd<D>, grid, C::NW * 32, C::smem)(a);
    LAUNCH_CHECK();
}

/* dq = bf16(acc * scale), eight elements a thread (n8 = elements / 8). */
__global__ void k_dq_cast(rt_act *dq, const float *acc, int64_t n8, float scale)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (int64_t)gridDim.x * blockDim.x) {
        const float4 *s = reinterpret_cast<const float4 *>(acc) + 2 * i;
        float4 x = s[0], y = s[1];
        float f[8] = {x.x * scale, x.y * scale, x.z * scale, x.w * scale, y.x * scale, y.y * scale, y.z * scale,
                      y.w * scale};
        bf8_store(dq + 8 * i, f);
    }
}

template <int D>
void bwd(const Args &a, int64_t B)
{
    /* Sk = 0: no dK/dV kernel (dQ is 0); Sq = 0: no dQ kernel (dK, dV are 0, written by k_dkv). */
    dim3 kgrid((unsigned)rtcu_cdiv(a.Sk, DkvCfg<D, true>::BN), (unsigned)a.KVH, (unsigned)B);
    if (a.dq_acc) {
        using K = DkvCfg<D, true>;
        const int64_t n = B * a.Sq * a.H * D;
        if (n > 0) CUDA_CHECK(cudaMemsetAsync(a.dq_acc, 0, (size_t)n * sizeof(float), rtcu.compute));
        auto kern = k_dkv<D, true>; /* (a template's comma inside a macro argument) */
        smem_optin(kern, K::smem);
        if (a.Sk > 0) {
            RTCU_LAUNCH(kern, kgrid, K::NW * 32, K::smem)(a);
            LAUNCH_CHECK();
        }
        const int64_t n8 = n / 8; /* D is a multiple of 16 */
        if (n8 > 0) {
            RTCU_LAUNCH(k_dq_cast, rtcu_grid(n8, 256), 256, 0)(a.dq, a.dq_acc, n8, a.scale);
            LAUNCH_CHECK();
        }
        return;
    }
    using Q = DqCfg<D>;
    using K = DkvCfg<D, false>;
    auto kern = k_dkv<D, false>;
    smem_optin(kern, K::smem);
    smem_optin(k_dq<D>, Q::smem);
    if (a.Sk > 0) {
        RTCU_LAUNCH(kern, kgrid, K::NW * 32, K::smem)(a);
        LAUNCH_CHECK();
    }
    if (a.Sq > 0) {
        RTCU_LAUNCH(k_dq<D>, dim3((unsigned)rtcu_cdiv(a.Sq, Q::BM), (unsigned)a.H, (unsigned)B), Q::NW * 32,
                    Q::smem)(a);
        LAUNCH_CHECK();
    }
}

Args make_args(int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D, bool causal, int64_t window,
               const RtcuAttnPos &pos)
{
    Args a{};
    a.Sq = (int)Sq;
    a.Sk = (int)Sk;
    a.window = (int)window; /* attention.cu: 0, or within int */
    a.p = pos;
    a.H = H;
    a.KVH = KVH;
    a.causal = causal;
    a.scale = 1.0f / sqrtf((float)D);
    a.c = a.scale * LOG2E;
    return a;
}

} // namespace

bool rtcu_attention_fa2_dim(int64_t D) { return D == 64 || D == 80 || D == 96 || D == 128; }

void rtcu_attention_fa2_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t B,
                            int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D, bool causal, int64_t window,
                            const RtcuAttnPos &pos)
{
    Args a = make_args(Sq, Sk, H, KVH, D, causal, window, pos);
    a.o = o;
    a.lse_out = lse;
    a.q = q;
    a.k = k;
    a.v = v;
    switch (D) {
    case 64: fwd<64>(a, B); break;
    case 80: fwd<80>(a, B); break;
    case 96: fwd<96>(a, B); break;
    case 128: fwd<128>(a, B); break;
    default: rt_fatal("rtcu_attention_fa2_fwd: head dim %lld", (long long)D);
    }
}

void rtcu_attention_fa2_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v,
                            const float *lse, const float *delta, const rt_act *dout, int64_t B, int64_t Sq, int64_t Sk,
                            int64_t H, int64_t KVH, int64_t D, bool causal, int64_t window, const RtcuAttnPos &pos,
                            float *dq_acc)
{
    Args a = make_args(Sq, Sk, H, KVH, D, causal, window, pos);
    a.dq_acc = dq_acc;
    a.dq = dq;
    a.dk = dk;
    a.dv = dv;
    a.q = q;
    a.k = k;
    a.v = v;
    a.lse = lse;
    a.delta = delta;
    a.dout = dout;
    switch (D) {
    case 64: bwd<64>(a, B); break;
    case 80: bwd<80>(a, B); break;
    case 96: bwd<96>(a, B); break;
    case 128: bwd<128>(a, B); break;
    default: rt_fatal("rtcu_attention_fa2_bwd: head dim %lld", (long long)D);
    }
}
