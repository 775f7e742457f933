/* route.cu: the router of a mixture-of-experts layer (docs/moe.md, `route`)
 * on the GPU, the CPU backend's math (runtime/cpu/route.c) in fp32 over
 * bf16 logits and gates.
 *
 * One thread routes one token: a row has at most RT_ROUTE_MAX_EXPERTS
 * scores and k <= RT_ROUTE_MAX_TOPK picks, so the selection is a few
 * hundred compares in the thread's local memory and needs no cooperation.
 * Capacity (a ranking among the tokens of a sequence that chose an expert)
 * is a second kernel with one block per (sequence, expert); it ranks the
 * fp32 weights, written to a temporary by the first kernel, so its ties are
 * those of the math and not of bf16 rounding. The backward recomputes the
 * selection from the logits; with load balancing on, a first kernel writes
 * every token's top-k and each block counts its sequence's choices from
 * them (a loop per expert, no atomics). The regularisers' value is a
 * block per sequence (thread e counts expert e and sums its p over the
 * sequence) and one thread summing the sequences in order. */
#include "common/common.h"
#include "cu_dev.cuh"

#include <math.h>

#include <vector>

namespace {

struct Tok {
    float s[RT_ROUTE_MAX_EXPERTS];
    int pick[RT_ROUTE_MAX_TOPK];
    float w[RT_ROUTE_MAX_TOPK];
    float chosen_sum;
};

/* Step 1: the scores of one token. */
__device__ void scores(float *s, const rt_act *z, int E, const RtRoute r)
{
    if (r.sigmoid) {
        for (int e = 0; e < E; e++) s[e] = 1.0f / (1.0f + expf(-ld(z + e)));
    } else {
        float m = -INFINITY, sum = 0;
        for (int e = 0; e < E; e++) m = fmaxf(m, ld(z + e));
        for (int e = 0; e < E; e++) sum += s[e] = expf(ld(z + e) - m);
        for (int e = 0; e < E; e++) s[e] /= sum;
    }
}

/* Step 4 for the chosen experts t.pick, from the scores t.s. */
__device__ void weights(Tok &t, const RtRoute r)
{
    t.chosen_sum = 0;
    for (int i = 0; i < r.topk; i++) t.chosen_sum += t.s[t.pick[i]];
    for (int i = 0; i < r.topk; i++) {
        float w = t.s[t.pick[i]];
        if (r.norm) w /= t.chosen_sum;
        t.w[i] = w * r.scale;
    }
}

/* Steps 1-4 of docs/moe.md for one token (route.c's route_token). */
__device__ void route_token(Tok &t, const rt_act *z, int E, const RtRoute r)
{
    scores(t.s, z, E, r);
    /* candidate mask, one bit per expert */
    unsigned cand[RT_ROUTE_MAX_EXPERTS / 32];
    for (int i = 0; i < RT_ROUTE_MAX_EXPERTS / 32; i++) cand[i] = ~0u;
    if (r.groups > 1) {
        int G = r.groups, per = E / G;
        unsigned keep[RT_ROUTE_MAX_EXPERTS / 32] = {0};
        float gs[RT_ROUTE_MAX_EXPERTS];
        for (int g = 0; g < G; g++) {
            float a = -INFINITY, b = -INFINITY;
            for (int e = g * per; e < (g + 1) * per; e++) {
                float v = t.s[e];
                if (v > a) {
                    b = a;
                    a = v;
                } else if (v > b) {
                    b = v;
                }
            }
            gs[g] = r.sigmoid && per > 1 ? a + b : a;
        }
        for (int i = 0; i < r.group_topk; i++) {
            int best = -1;
            for (int g = 0; g < G; g++)
                if (!(keep[g >> 5] >> (g & 31) & 1) && (best < 0 || gs[g] > gs[best])) best = g;
            keep[best >> 5] |= 1u << (best & 31);
        }
        for (int e = 0; e < E; e++)
            if (!(keep[(e / per) >> 5] >> ((e / per) & 31) & 1)) cand[e >> 5] &= ~(1u << (e & 31));
    }
    for (int i = 0; i < r.topk; i++) {
        int best = -1;
        for (int e = 0; e < E; e++) /* strict >: ties to the lower index */
            if ((cand[e >> 5] >> (e & 31) & 1) && (best < 0 || t.s[e] > t.s[best])) best = e;
        cand[best >> 5] &= ~(1u << (best & 31));
        t.pick[i] = best;
    }
    weights(t, r);
}

/* Step 1 and 4 again from other logits, the picks kept (a replayed call of
 * rt_route_freeze: the recorded choice, today's weights). */
__device__ void reweigh(Tok &t, const rt_act *z, int E, const RtRoute r)
{
    scores(t.s, z, E, r);
    weights(t, r);
}

/* Gates of every token chosen from `sel` (the logits, or a replayed call's
 * recorded copy) and weighed from the logits; with capacity, the fp32
 * weights into wout (the choice's, which rank the drops) and wval (the
 * gates' values, when they differ). */
__global__ void route_fwd_kernel(rt_act *gates, float *wout, float *wval, const rt_act *logits,
                                 const rt_act *sel, int64_t tokens, int E, const RtRoute r)
{
    Tok t;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < tokens;
         i += (int64_t)gridDim.x * blockDim.x) {
        route_token(t, sel + i * E, E, r);
        if (wout) {
            for (int e = 0; e < E; e++) wout[i * E + e] = 0;
            for (int k = 0; k < r.topk; k++) wout[i * E + t.pick[k]] = t.w[k];
        }
        if (sel != logits) reweigh(t, logits + i * E, E, r);
        if (wval) {
            for (int e = 0; e < E; e++) wval[i * E + e] = 0;
            for (int k = 0; k < r.topk; k++) wval[i * E + t.pick[k]] = t.w[k];
        } else if (!wout) {
            for (int e = 0; e < E; e++) gates[i * E + e] = bf(0);
            for (int k = 0; k < r.topk; k++) gates[i * E + t.pick[k]] = bf(t.w[k]);
        }
    }
}

/* Step 5: block (sequence q, expert e) keeps the cap largest weights of
 * column e, ties to the earlier position (a rank by counting; the weights
 * of chosen experts are > 0 and the others exactly 0). */
__global__ void capacity_kernel(rt_act *gates, const float *w, const float *wval, int64_t S, int E, int64_t cap)
{
    int64_t q = blockIdx.y;
    int e = blockIdx.x;
    const float *col = w + q * S * E + e, *val = (wval ? wval : w) + q * S * E + e;
    for (int64_t t = threadIdx.x; t < S; t += blockDim.x) {
        float v = col[t * E];
        bool keep = false;
        if (v != 0) {
            int64_t ahead = 0;
            for (int64_t u = 0; u < S && ahead < cap; u++) {
                float o = col[u * E];
                ahead += o != 0 && (o > v || (o == v && u < t));
            }
            keep = ahead < cap;
        }
        gates[(q * S + t) * E + e] = bf(keep ? val[t * E] : 0.0f);
    }
}

/* Every token's top-k (before capacity drops), for the load-balancing counts. */
__global__ void route_pick_kernel(int *picks, const rt_act *logits, int64_t tokens, int E, const RtRoute r)
{
    Tok t;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < tokens;
         i += (int64_t)gridDim.x * blockDim.x) {
        route_token(t, logits + i * E, E, r);
        for (int k = 0; k < r.topk; k++) picks[i * r.topk + k] = t.pick[k];
    }
}

/* The regularisers' value of sequence blockIdx.x (docs/moe.md) into
 * vals[q]: norm[t] first gets each token's logsumexp and (sigmoid) its sum
 * of scores; thread e then counts expert e among the sequence's picks
 * (before drops) and sums p[t, e]; thread 0 adds the terms in order. */
__global__ void route_value_kernel(float *vals, float *lse, float *ssum, const rt_act *logits, const int *picks,
                                   int64_t S, int E, const RtRoute r, double nglob)
{
    __shared__ double fp[RT_ROUTE_MAX_EXPERTS];
    __shared__ double zpart[256];
    int64_t q = blockIdx.x;
    const rt_act *zq = logits + q * S * E;
    double zs = 0;
    for (int64_t t = threadIdx.x; t < S; t += blockDim.x) {
        const rt_act *z = zq + t * E;
        float m = -INFINITY, sum = 0, sg = 0;
        for (int e = 0; e < E; e++) m = fmaxf(m, ld(z + e));
        for (int e = 0; e < E; e++) sum += expf(ld(z + e) - m);
        for (int e = 0; e < E && r.sigmoid; e++) sg += 1.0f / (1.0f + expf(-ld(z + e)));
        float l = m + logf(sum);
        lse[q * S + t] = l;
        ssum[q * S + t] = sg;
        zs += (double)l * l;
    }
    zpart[threadIdx.x] = zs;
    __syncthreads();
    if (r.aux > 0 && picks) {
        const int *pq = picks + q * S * r.topk;
        for (int e = threadIdx.x; e < E; e += blockDim.x) {
            double cnt = 0, P = 0;
            for (int64_t i = 0; i < S * r.topk; i++) cnt += pq[i] == e;
            for (int64_t t = 0; t < S; t++) {
                float z = ld(zq + t * E + e);
                P += r.sigmoid ? 1.0 / (1.0 + exp(-(double)z)) / ssum[q * S + t] : exp((double)z - lse[q * S + t]);
            }
            fp[e] = (double)E / ((double)r.topk * S) * cnt * (P / (double)S);
        }
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    double v = 0;
    if (r.aux > 0 && picks) {
        double aux = 0;
        for (int e = 0; e < E; e++) aux += fp[e];
        v += (double)r.aux * aux / nglob;
    }
    if (r.zloss > 0) {
        double z = 0;
        for (int i = 0; i < (int)blockDim.x; i++) z += zpart[i];
        v += (double)r.zloss * z / (nglob * (double)S);
    }
    vals[q] = (float)v;
}

/* *objective += weight x the sequences' values, in order (one thread). */
__global__ void route_sum_kernel(float *objective, const float *vals, int64_t seqs, float weight)
{
    double v = 0;
    for (int64_t q = 0; q < seqs; q++) v += vals[q];
    *objective += (float)((double)weight * v);
}

/* The backward for the tokens of block (chunk, sequence blockIdx.y). With
 * aux on, a[] (shared) first gets alpha f_e / (S N_seq), thread e counting
 * expert e's choices among the sequence's picks (no atomics). */
__global__ void route_bwd_kernel(rt_act *dlogits, const rt_act *logits, const rt_act *gates, const rt_act *dgates,
                                 const int *picks, int64_t S, int E, const RtRoute r, double nglob)
{
    __shared__ float a[RT_ROUTE_MAX_EXPERTS];
    int64_t q = blockIdx.y, base = q * S * E;
    Tok t;
    if (picks) {
        const int *pq = picks + q * S * r.topk;
        for (int e = threadIdx.x; e < E; e += blockDim.x) {
            int64_t cnt = 0;
            for (int64_t i = 0; i < S * r.topk; i++) cnt += pq[i] == e;
            a[e] = (float)((double)r.aux * ((double)E / ((double)r.topk * S) * (double)cnt) / ((double)S * nglob));
        }
        __syncthreads();
    }
    float zcoef = r.zloss > 0 ? (float)((double)r.zloss / (nglob * (double)S)) : 0.0f;
    int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (p >= S) return;
    const rt_act *z = logits + base + p * E, *g = gates + base + p * E, *dg = dgates + base + p * E;
    rt_act *dz = dlogits + base + p * E;
    route_token(t, z, E, r);
    float ds[RT_ROUTE_MAX_EXPERTS];
    for (int e = 0; e < E; e++) ds[e] = 0;
    float dot = 0;
    for (int k = 0; k < r.topk; k++) {
        int e = t.pick[k];
        if (ld(g + e) != 0) dot += ld(dg + e) * t.s[e];
    }
    for (int k = 0; k < r.topk; k++) {
        int e = t.pick[k];
        float d = ld(g + e) != 0 ? ld(dg + e) : 0.0f;
        ds[e] = r.norm ? r.scale * (d / t.chosen_sum - dot / (t.chosen_sum * t.chosen_sum)) : r.scale * d;
    }
    if (picks) {
        if (r.sigmoid) { /* p = s / sum s */
            float sum = 0, ap = 0;
            for (int e = 0; e < E; e++) sum += t.s[e];
            for (int e = 0; e < E; e++) ap += a[e] * t.s[e] / sum;
            for (int e = 0; e < E; e++) ds[e] += (a[e] - ap) / sum;
        } else {
            for (int e = 0; e < E; e++) ds[e] += a[e];
        }
    }
    float sds = 0;
    if (!r.sigmoid)
        for (int e = 0; e < E; e++) sds += ds[e] * t.s[e];
    float lse = 0;
    if (zcoef != 0) {
        float m = -INFINITY, sum = 0;
        for (int e = 0; e < E; e++) m = fmaxf(m, ld(z + e));
        for (int e = 0; e < E; e++) sum += expf(ld(z + e) - m);
        lse = m + logf(sum);
    }
    for (int e = 0; e < E; e++) {
        float s = t.s[e];
        float d = r.sigmoid ? ds[e] * s * (1 - s) : s * (ds[e] - sds);
        if (zcoef != 0) d += zcoef * 2 * lse * expf(ld(z + e) - lse);
        dz[e] = bf(d);
    }
}

void check_route(const char *fn, int64_t seqs, int64_t seq_len, int64_t E, const RtRoute *r)
{
    rtcu_require_init(fn);
    rtc_check_route(fn, seqs, seq_len, E, r);
}

} // namespace

/* The selection held fixed for gradient checks (rt_route_freeze): device
 * copies of each call's logits since RT_ROUTE_RECORD, in call order. */
static struct {
    int mode, next;
    std::vector<rt_act *> copy;
    std::vector<int64_t> numel;
} frozen;

void rt_route_freeze(int mode)
{
    rtcu_require_init("rt_route_freeze");
    if (mode != RT_ROUTE_REPLAY) {
        CUDA_CHECK(cudaStreamSynchronize(rtcu.compute));
        for (rt_act *p : frozen.copy) CUDA_CHECK(cudaFree(p));
        frozen.copy.clear();
        frozen.numel.clear();
    }
    frozen.mode = mode;
    frozen.next = 0;
}

static const rt_act *selection_logits(const rt_act *logits, int64_t n)
{
    if (frozen.mode == RT_ROUTE_RECORD) {
        rt_act *p = NULL;
        CUDA_CHECK(cudaMalloc((void **)&p, (size_t)n * sizeof(rt_act)));
        CUDA_CHECK(cudaMemcpyAsync(p, logits, (size_t)n * sizeof(rt_act), cudaMemcpyDeviceToDevice, rtcu.compute));
        frozen.copy.push_back(p);
        frozen.numel.push_back(n);
        return logits;
    }
    if (frozen.mode != RT_ROUTE_REPLAY) return logits;
    if (frozen.next >= (int)frozen.copy.size() || frozen.numel[frozen.next] != n)
        rt_fatal("rt_route_fwd: replaying call %d of %d recorded, with %lld logits: the forward differs from the "
                 "recorded one", frozen.next + 1, (int)frozen.copy.size(), (long long)n);
    return frozen.copy[frozen.next++];
}

void rt_route_fwd(rt_act *gates, const rt_act *logits, int64_t seqs, int64_t seq_len, int64_t n_experts,
                  const RtRoute *r, float *objective, float weight, int64_t global_seqs)
{
    check_route("rt_route_fwd", seqs, seq_len, n_experts, r);
    bool reg = (r->aux > 0 || r->zloss > 0) && objective; /* NULL: a recomputation */
    if (reg && global_seqs < 1)
        rt_fatal("rt_route_fwd: the regularisers average over the global batch's sequences, got %lld",
                 (long long)global_seqs);
    int64_t tokens = seqs * seq_len, n = tokens * n_experts;
    if (tokens == 0) return;
    size_t bytes = (size_t)n * sizeof(rt_act);
    if (objective)
        rtcu_deps({{gates, bytes}, {logits, bytes}, {objective, sizeof(float)}});
    else
        rtcu_deps({{gates, bytes}, {logits, bytes}});
    const rt_act *sel = selection_logits(logits, n);
    int64_t cap = rtc_route_capacity(r, seq_len, n_experts);
    float *w = NULL, *wv = NULL;
    if (cap < seq_len * r->topk) {
        CUDA_CHECK(cudaMallocAsync((void **)&w, (size_t)n * sizeof(float), rtcu.compute));
        if (sel != logits) CUDA_CHECK(cudaMallocAsync((void **)&wv, (size_t)n * sizeof(float), rtcu.compute));
    }
    RTCU_LAUNCH(route_fwd_kernel, rtcu_grid(tokens, 128), 128, 0)(gates, w, wv, logits, sel, tokens,
                                                                   (int)n_experts, *r);
    LAUNCH_CHECK();
    if (w) {
        rtcu_check_grid("rt_route_fwd", n_experts, seqs, 1);
        RTCU_LAUNCH(capacity_kernel, dim3((unsigned)n_experts, (unsigned)seqs), 256, 0)(gates, w, wv, seq_len,
                                                                                         (int)n_experts, cap);
        LAUNCH_CHECK();
        CUDA_CHECK(cudaFreeAsync(w, rtcu.compute));
        if (wv) CUDA_CHECK(cudaFreeAsync(wv, rtcu.compute));
    }
    if (!reg) return;
    /* The regularisers' value: the picks (before drops) of the choice made. */
    int *picks = NULL;
    float *vals = NULL, *lse = NULL, *ssum = NULL;
    if (r->aux > 0) {
        CUDA_CHECK(cudaMallocAsync((void **)&picks, (size_t)(tokens * r->topk) * sizeof(int), rtcu.compute));
        RTCU_LAUNCH(route_pick_kernel, rtcu_grid(tokens, 128), 128, 0)(picks, sel, tokens, (int)n_experts, *r);
        LAUNCH_CHECK();
    }
    CUDA_CHECK(cudaMallocAsync((void **)&vals, (size_t)seqs * sizeof(float), rtcu.compute));
    CUDA_CHECK(cudaMallocAsync((void **)&lse, (size_t)tokens * sizeof(float), rtcu.compute));
    CUDA_CHECK(cudaMallocAsync((void **)&ssum, (size_t)tokens * sizeof(float), rtcu.compute));
    rtcu_check_grid("rt_route_fwd", seqs, 1, 1);
    RTCU_LAUNCH(route_value_kernel, dim3((unsigned)seqs), 256, 0)(vals, lse, ssum, logits, picks, seq_len,
                                                                  (int)n_experts, *r, (double)global_seqs);
    LAUNCH_CHECK();
    RTCU_LAUNCH(route_sum_kernel, 1, 1, 0)(objective, vals, seqs, weight);
    LAUNCH_CHECK();
    if (picks) CUDA_CHECK(cudaFreeAsync(picks, rtcu.compute));
    CUDA_CHECK(cudaFreeAsync(vals, rtcu.compute));
    CUDA_CHECK(cudaFreeAsync(lse, rtcu.compute));
    CUDA_CHECK(cudaFreeAsync(ssum, rtcu.compute));
}

void rt_route_bwd(rt_act *dlogits, const rt_act *logits, const rt_act *gates, const rt_act *dgates, int64_t seqs,
                  int64_t seq_len, int64_t n_experts, const RtRoute *r, int64_t global_seqs)
{
    check_route("rt_route_bwd", seqs, seq_len, n_experts, r);
    if ((r->aux > 0 || r->zloss > 0) && global_seqs < 1)
        rt_fatal("rt_route_bwd: global_seqs = %lld, but the regularisers average over the global batch",
                 (long long)global_seqs);
    if (seqs == 0 || seq_len == 0) return;
    size_t bytes = (size_t)(seqs * seq_len * n_experts) * sizeof(rt_act);
    rtcu_deps({{dlogits, bytes}, {logits, bytes}, {gates, bytes}, {dgates, bytes}});
    int64_t tokens = seqs * seq_len, chunks = rtcu_cdiv(seq_len, 128);
    int *picks = NULL;
    if (r->aux > 0) {
        CUDA_CHECK(cudaMallocAsync((void **)&picks, (size_t)(tokens * r->topk) * sizeof(int), rtcu.compute));
        RTCU_LAUNCH(route_pick_kernel, rtcu_grid(tokens, 128), 128, 0)(picks, logits, tokens, (int)n_experts, *r);
        LAUNCH_CHECK();
    }
    rtcu_check_grid("rt_route_bwd", chunks, seqs, 1);
    RTCU_LAUNCH(route_bwd_kernel, dim3((unsigned)chunks, (unsigned)seqs), 128, 0)(
        dlogits, logits, gates, dgates, picks, seq_len, (int)n_experts, *r,
        (double)(global_seqs > 0 ? global_seqs : 1));
    LAUNCH_CHECK();
    if (picks) CUDA_CHECK(cudaFreeAsync(picks, rtcu.compute));
}
