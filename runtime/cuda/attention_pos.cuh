/* attention_pos.cuh: where attention's rows sit, for the kernels of
 * attention.cu and attention_fa2.cu (rt_attention_pos_fwd/bwd: context
 * parallelism). Row i of a side is at position pos[i / chunk] + i % chunk;
 * rt_attention_fwd/bwd are one chunk of S rows at 0 each side. The chunk
 * table travels by value in the kernels' argument struct (the host arrays
 * are copied into it: no memcpy, nothing to free).
 *
 * Masks on positions: a causal query at p sees a key at p' iff p' <= p and,
 * with window > 0, p - p' < window; full attention sees every key.
 * Tiles: a key tile is skipped for a query tile when no position pair of the
 * two can meet (`may_see` on their smallest and largest positions); the
 * element mask is skipped when every pair is visible (`all_seen`); within
 * one chunk positions are consecutive, so a tile pair inside one chunk each
 * masks by index with a shift (`shift`), others compute each position. */
#ifndef PTDC_RUNTIME_CUDA_ATTENTION_POS_CUH
#define PTDC_RUNTIME_CUDA_ATTENTION_POS_CUH

#include "cu_dev.cuh"

struct RtcuAttnPos {
    int chunk;                                           /* rows per chunk, both sides */
    int qpos[RT_ATTN_MAX_CHUNKS], kpos[RT_ATTN_MAX_CHUNKS]; /* each chunk's first position */
};

namespace apos {

__device__ __forceinline__ int pos_of(const int *pos, int chunk, int i) { return pos[i / chunk] + i % chunk; }

/* The smallest and largest position of rows [r0, r1) (r0 < r1). */
__device__ __forceinline__ void range(const int *pos, int chunk, int r0, int r1, int &mn, int &mx)
{
    int c = r0 / chunk, e = (r1 - 1) / chunk;
    mn = pos[c] + r0 - c * chunk;
    mx = pos[e] + r1 - 1 - e * chunk;
    for (int x = c; x < e; x++) { /* tiles across chunks (rare when chunks are long) */
        int lo = pos[x + 1], hi = pos[x] + chunk - 1;
        mn = lo < mn ? lo : mn;
        mx = hi > mx ? hi : mx;
    }
}

/* A query at position qp sees a key at kp. */
__device__ __forceinline__ bool sees(int qp, int kp, bool causal, int window)
{
    return !causal || (kp <= qp && (window == 0 || qp - kp < window));
}

/* Some pair of [qmin, qmax] x [kmin, kmax] is visible. */
__device__ __forceinline__ bool may_see(int qmin, int qmax, int kmin, int kmax, bool causal, int window)
{
    return !causal || (kmin <= qmax && (window == 0 || qmin - kmax < window));
}

/* Every pair is visible. */
__device__ __forceinline__ bool all_seen(int qmin, int qmax, int kmin, int kmax, bool causal, int window)
{
    return !causal || (kmax <= qmin && (window == 0 || qmax - kmin < window));
}

/* Rows [r0, r1) lie in one chunk. */
__device__ __forceinline__ bool one_chunk(int chunk, int r0, int r1) { return r0 / chunk == (r1 - 1) / chunk; }

/* For query rows [q0, ..) and key rows [k0, ..) each inside one chunk:
 * position(qi) - position(kj) = qi - kj + shift. */
__device__ __forceinline__ int shift(const RtcuAttnPos &p, int q0, int k0)
{
    return pos_of(p.qpos, p.chunk, q0) - q0 - (pos_of(p.kpos, p.chunk, k0) - k0);
}

} // namespace apos

#endif
