/* cross_entropy.cu: softmax cross-entropy over a (possibly vocabulary-
 * sharded) logits tensor.
 *
 * Forward, one pass over the logits: a block per row keeps, per thread, an
 * online (max, sum of exp(x - max)) pair over its columns and combines the
 * pairs in a fixed tree; it also reads the target's logit if that column is
 * here. With a vocabulary communicator the row statistics are combined
 * across ranks: all-reduce max of the maxima M, rescale each rank's sum to M,
 * then one all-reduce sum of [sums, target logits, owners] (3 * rows floats)
 * over NCCL. A final single-block kernel writes lse = M + log(sum) and adds
 * sum_rows(lse - target logit) / total_rows to *loss (double accumulation,
 * fixed order). Memory-bound: one read of the logits (~80% of HBM
 * bandwidth); the collectives move 16 * rows bytes.
 *
 * Targets outside the vocabulary: the kernel does not know its size, but
 * exactly one rank must own each target column (the CPU backend's rule); a
 * summed owner count other than 1 is reported through the device error word
 * and aborts at the next synchronisation.
 *
 * Backward: dlogits = (exp(x - lse) - onehot) * dloss / total_rows, one pass
 * (in place allowed).
 *
 * A target of -1 is no target (the tail of multi-token prediction's shifted
 * targets, rt.h): the row adds nothing to the loss and its gradient is 0.
 *
 * When the local vocabulary is a multiple of 8 and the buffers 16-byte
 * aligned (VEC), each thread moves 8 logits per 16-byte access (the scalar
 * 2-byte loads were issue 15's item 5); forward folds its 8 into one
 * (max, sum) pair first, so the sum's rounding order differs from the
 * scalar kernel's (both are checked against the CPU backend). */
#include "cu_dev.cuh"

static __device__ __forceinline__ void combine(float &m, float &s, float m2, float s2)
{
    if (m2 == -INFINITY) return;
    if (m == -INFINITY) {
        m = m2;
        s = s2;
        return;
    }
    float M = fmaxf(m, m2);
    s = s * expf(m - M) + s2 * expf(m2 - M);
    m = M;
}

/* stats: mloc[rows], mg[rows], then s, tgt, own [rows] each, adjacent. */
template <bool VEC>
static __global__ void k_ce_stats(float *mloc, float *mg, float *s_out, float *tgt, float *own,
                                  const rt_act *logits, const int32_t *targets, int64_t vl, int64_t off)
{
    __shared__ float shm[32], shs[32];
    int64_t r = blockIdx.x;
    const rt_act *x = logits + r * vl;
    float m = -INFINITY, s = 0.0f;
    if (VEC) {
        for (int64_t j = threadIdx.x; j < vl / 8; j += blockDim.x) {
            float v[8], mv = -INFINITY, sv = 0.0f;
            bf8_load(v, x + 8 * j);
            for (int k = 0; k < 8; k++) mv = fmaxf(mv, v[k]);
            for (int k = 0; k < 8; k++) sv += expf(v[k] - mv);
            combine(m, s, mv, sv);
        }
    } else {
        for (int64_t j = threadIdx.x; j < vl; j += blockDim.x) {
            float v = ld(x + j);
            if (v > m) {
                s = s * expf(m - v) + 1.0f; /* exp(-inf) = 0 on the first element */
                m = v;
            } else {
                s += expf(v - m);
            }
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        combine(m, s, m2, s2);
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) {
        shm[w] = m;
        shs[w] = s;
    }
    __syncthreads();
    if (w == 0) {
        m = lane < nw ? shm[lane] : -INFINITY;
        s = lane < nw ? shs[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            combine(m, s, m2, s2);
        }
        if (lane == 0) {
            int64_t t = targets[r], c = t - off;
            bool mine = t >= 0 && c >= 0 && c < vl;
            mloc[r] = m;
            mg[r] = m;
            s_out[r] = s;
            tgt[r] = mine ? ld(x + c) : 0.0f;
            own[r] = mine ? 1.0f : 0.0f;
        }
    }
}

/* Rescale each rank's sum to the global maximum. */
static __global__ void k_ce_rescale(float *s, const float *mloc, const float *mg, int64_t rows)
{
    for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x)
        s[r] = mloc[r] == -INFINITY ? 0.0f : s[r] * expf(mloc[r] - mg[r]);
}

static __global__ void k_ce_final(float *loss, float *lse, const float *mg, const float *s, const float *tgt,
                                  const float *own, const int32_t *targets, int64_t rows, int64_t total_rows,
                                  float weight, RtcuDevErr *err)
{
    __shared__ double sh[32];
    double acc = 0.0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        float l = mg[r] + logf(s[r]);
        lse[r] = l;
        if (targets[r] == -1) continue; /* no target */
        if (own[r] != 1.0f) rtcu_report(err, RTCU_ERR_TARGET, targets[r], r);
        acc += (double)(l - tgt[r]);
    }
    acc = block_sum_d(acc, sh);
    if (threadIdx.x == 0) *loss += (float)(weight * (acc / (double)total_rows));
}

void rt_cross_entropy_fwd(float *loss, float *lse, const rt_act *logits, const int32_t *targets, int64_t rows,
                          int64_t vocab_local, int64_t vocab_offset, int64_t total_rows, float weight,
                          RtComm *vocab_comm)
{
    rtcu_require_init("rt_cross_entropy_fwd");
    if (rows <= 0) return;
    if (vocab_local <= 0 || total_rows <= 0)
        rt_fatal("rt_cross_entropy_fwd: vocab_local %lld, total_rows %lld", (long long)vocab_local,
                 (long long)total_rows);
    rtcu_deps({{loss, (size_t)4}, {lse, (size_t)rows * 4}, {logits, (size_t)(rows * vocab_local) * sizeof(rt_act)}, {targets, (size_t)rows * 4}});
    rtcu_check_grid("rt_cross_entropy_fwd", rows, 1, 1);
    size_t fb = (size_t)rows * sizeof(float);
    float *st = (float *)rtcu_scratch(5 * fb);
    float *mloc = st, *mg = st + rows, *s = st + 2 * rows, *tgt = st + 3 * rows, *own = st + 4 * rows;
    bool vec = vocab_local % 8 == 0 && rtcu_aligned16(logits);
    int64_t per = vec ? vocab_local / 8 : vocab_local; /* what the threads of a row share */
    int T = per >= 1024 ? 512 : 32 * (int)rtcu_cdiv(per < 512 ? per : 512, 32);
    if (vec)
        RTCU_LAUNCH(k_ce_stats<true>, (unsigned)rows, T, 0)(mloc, mg, s, tgt, own, logits, targets,
                                                             vocab_local, vocab_offset);
    else
        RTCU_LAUNCH(k_ce_stats<false>, (unsigned)rows, T, 0)(mloc, mg, s, tgt, own, logits, targets,
                                                              vocab_local, vocab_offset);
    LAUNCH_CHECK();
    if (vocab_comm && vocab_comm->size > 1) {
        rt_allreduce_max(vocab_comm, mg, rows);
        rtcu_deps({{mg, fb}});
        RTCU_LAUNCH(k_ce_rescale, rtcu_grid(rows, 256), 256, 0)(s, mloc, mg, rows);
        LAUNCH_CHECK();
        rt_allreduce(vocab_comm, s, 3 * rows, RT_F32); /* sums, target logits, owners */
        rtcu_deps({{s, 3 * fb}});
    }
    RTCU_LAUNCH(k_ce_final, 1, 1024, 0)(loss, lse, mg, s, tgt, own, targets, rows, total_rows,
                                                weight, rtcu.dev_err);
    LAUNCH_CHECK();
}

template <bool VEC>
static __global__ void k_ce_bwd(rt_act *dl, const rt_act *logits, const int32_t *targets, const float *lse,
                                float scale, int64_t vl, int64_t off, RtcuDevErr *err)
{
    int64_t r = blockIdx.x;
    int64_t t = targets[r], c = t - off;
    if (t < -1 && threadIdx.x == 0) rtcu_report(err, RTCU_ERR_TARGET, t, r);
    if (t == -1) scale = 0.0f, c = -1; /* no target: no gradient */
    float l = lse[r];
    const rt_act *x = logits + r * vl;
    rt_act *d = dl + r * vl;
    if (VEC) {
        for (int64_t j = threadIdx.x; j < vl / 8; j += blockDim.x) {
            float v[8];
            bf8_load(v, x + 8 * j);
            for (int k = 0; k < 8; k++) v[k] = (expf(v[k] - l) - (8 * j + k == c ? 1.0f : 0.0f)) * scale;
            bf8_store(d + 8 * j, v);
        }
    } else {
        for (int64_t j = threadIdx.x; j < vl; j += blockDim.x) {
            float p = expf(ld(x + j) - l);
            d[j] = bf((p - (j == c ? 1.0f : 0.0f)) * scale);
        }
    }
}

void rt_cross_entropy_bwd(rt_act *dlogits, const rt_act *logits, const int32_t *targets, const float *lse,
                          float dloss, int64_t rows, int64_t vocab_local, int64_t vocab_offset, int64_t total_rows)
{
    rtcu_require_init("rt_cross_entropy_bwd");
    if (rows <= 0 || vocab_local <= 0) return;
    if (total_rows <= 0) rt_fatal("rt_cross_entropy_bwd: total_rows %lld", (long long)total_rows);
    size_t b = (size_t)(rows * vocab_local) * sizeof(rt_act);
    rtcu_deps({{dlogits, b}, {logits, b}, {targets, (size_t)rows * 4}, {lse, (size_t)rows * 4}});
    rtcu_check_grid("rt_cross_entropy_bwd", rows, 1, 1);
    bool vec = vocab_local % 8 == 0 && rtcu_aligned16(logits, dlogits);
    int64_t per = vec ? vocab_local / 8 : vocab_local;
    int T = per >= 256 ? 256 : 32 * (int)rtcu_cdiv(per, 32);
    float scale = dloss / (float)total_rows;
    if (vec)
        RTCU_LAUNCH(k_ce_bwd<true>, (unsigned)rows, T, 0)(dlogits, logits, targets, lse, scale, vocab_local,
                                                           vocab_offset, rtcu.dev_err);
    else
        RTCU_LAUNCH(k_ce_bwd<false>, (unsigned)rows, T, 0)(dlogits, logits, targets, lse, scale, vocab_local,
                                                            vocab_offset, rtcu.dev_err);
    LAUNCH_CHECK();
}
