/* attention_ring.c: ring attention for context parallelism
 * (rt_attention_ring_fwd/bwd, Megatron's --cp-comm-type p2p), written once
 * for both backends on top of rt.h: point-to-point transfers, attention over
 * chunked positions (rt_attention_pos_fwd/bwd) per block, and the backends'
 * merge and fp32 sums (rt_attention_merge, rt_grad_add, rt_add_f32).
 *
 * The ring. Rank r of the cp ranks of c owns block r: its K and V rows, at
 * the positions of its chunks. At step t = 0 .. cp-1 it holds block
 * b = r - t (mod cp), received from r - 1, and computes its queries against
 * it; the transfer of the next block (r sends b to r + 1, receives b - 1 from
 * r - 1) is posted before that compute, into the other of two buffers.
 *
 * What travels where is a function of the positions alone, the same on
 * every rank: rank q needs block b iff some query chunk of q may see some
 * key chunk of b (the masks on positions). Block b travels as far as the
 * last rank that needs it (last[b] hops) and no further; a rank holding a
 * block it does not need forwards it without computing.
 *
 * The forward merges each computed block's (o_b, lse_b) into an fp32
 * running output by log-sum-exp (rt_attention_merge); the first block is
 * computed straight into o and lse, the last merge writes o.
 *
 * The backward computes each block with the whole attention's o and lse,
 * so each block's dq, dk, dv are exact shares. dq sums its blocks in fp32.
 * Block b's dk, dv accumulator (fp32) starts at the first rank after b that
 * needs b (first[b] hops), goes round the ring with the block (a rank not
 * needing it passes it on), and returns home to b after step cp - 1, where
 * b's own share (computed at step 0 into dk, dv) is added last. Every sum
 * runs in ring order: the bits do not depend on timing.
 *
 * Only neighbours talk (r to r + 1), and each pair posts its messages in the
 * same order on both ends (per step: K, V, then the dk, dv accumulator), as
 * NCCL's in-order matching on a rt_comm_split_p2p communicator needs; tags
 * (step and kind) make the same order explicit for MPI. */
#include <math.h>
#include <string.h>

#include "common.h"

enum {
    RING_MAX = 1024,  /* cp ranks at most */
    RING_TAG = 4096,  /* tags RING_TAG + 4 step + kind */
    RING_ALIGN = 256, /* scratch regions (the tensor-core kernels want 16 bytes) */
};
enum { TAG_K, TAG_V, TAG_DK, TAG_DV };

static int tag(int step, int kind)
{
    return RING_TAG + 4 * step + kind;
}

static size_t align_up(size_t x)
{
    return (x + RING_ALIGN - 1) / RING_ALIGN * RING_ALIGN;
}

/* The scratch layout: two K/V slots, then either the forward's fp32 output
 * and block lse, or the backward's block dk, dv, two fp32 dk/dv slots and
 * the fp32 dq. Offsets in bytes. */
typedef struct {
    size_t kv;          /* one K (or V) block, rt_act */
    size_t f32kv;       /* one dk (or dv) accumulator, fp32 */
    size_t acc, lse_b;  /* forward, after the slots */
    size_t dkv_b, dacc, dq; /* backward, after the slots */
    size_t fwd, bwd;    /* total bytes of each direction */
} Layout;

static Layout layout(int64_t B, int64_t Sq, int64_t H, int64_t KVH, int64_t D)
{
    Layout L;
    size_t e = (size_t)(B * Sq * KVH * D), qn = (size_t)(B * Sq * H * D), rows = (size_t)(B * Sq * H);
    L.kv = align_up(e * rtc_act_bytes());
    L.f32kv = align_up(e * sizeof(float));
    size_t slots = 4 * L.kv;
    L.acc = slots;
    L.lse_b = L.acc + align_up(qn * sizeof(float));
    L.fwd = L.lse_b + align_up(rows * sizeof(float));
    L.dkv_b = slots;
    L.dacc = L.dkv_b + 2 * L.kv;
    L.dq = L.dacc + 4 * L.f32kv;
    L.bwd = L.dq + align_up(qn * sizeof(float));
    return L;
}

size_t rt_attention_ring_scratch(int64_t B, int64_t Sq, int64_t H, int64_t KVH, int64_t D)
{
    if (B < 0 || Sq < 0 || H < 0 || KVH < 0 || D < 0)
        rt_fatal("rt_attention_ring_scratch: negative sizes B=%lld Sq=%lld H=%lld KVH=%lld D=%lld",
                 (long long)B, (long long)Sq, (long long)H, (long long)KVH, (long long)D);
    Layout L = layout(B, Sq, H, KVH, D);
    return L.fwd > L.bwd ? L.fwd : L.bwd;
}

/* Who needs which block, and how far each travels. */
typedef struct {
    int cp, me, next, prev;
    int last[RING_MAX];  /* block b's last holder is rank b + last[b] (0: it stays home) */
    int first[RING_MAX]; /* the first t > 0 with rank b + t needing b; 0: none (no accumulator) */
    bool mine[RING_MAX]; /* this rank computes block b (its own always) */
} Ring;

/* Some query of rank qr may see some key of rank kr. */
static bool sees(int qr, int kr, int n, int64_t chunk, const int64_t *pos, bool causal,
                 int64_t window)
{
    if (!causal)
        return true;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int64_t qmin = pos[qr * n + i], qmax = qmin + chunk - 1;
            int64_t kmin = pos[kr * n + j], kmax = kmin + chunk - 1;
            if (kmin <= qmax && (window == 0 || qmin - kmax < window))
                return true;
        }
    return false;
}

/* Check the arguments (rt_fatal naming fn) and plan the ring; false when
 * there is nothing to compute (an empty tensor on every rank). */
static bool plan(Ring *R, const char *fn, RtComm *c, int64_t B, int64_t Sq, int64_t H,
                 int64_t KVH, int64_t D, bool causal, int64_t window, int64_t chunk, int nchunks,
                 const int64_t *pos, const void *scratch)
{
    if (!c)
        rt_fatal("%s: NULL communicator (this rank is not a member)", fn);
    if (nchunks != 1 && nchunks != 2)
        rt_fatal("%s: %d chunks per rank (1 or 2)", fn, nchunks);
    if (chunk < 1 || Sq != chunk * nchunks)
        rt_fatal("%s: %lld rows are not %d chunks of %lld", fn, (long long)Sq, nchunks,
                 (long long)chunk);
    if (B < 0 || H < 0 || KVH < 0 || D < 0)
        rt_fatal("%s: negative sizes B=%lld H=%lld KVH=%lld D=%lld", fn, (long long)B,
                 (long long)H, (long long)KVH, (long long)D);
    if (window < 0 || (window > 0 && !causal))
        rt_fatal("%s: window %lld (a window is positive and needs causal attention)", fn,
                 (long long)window);
    if (!pos)
        rt_fatal("%s: no chunk positions", fn);
    R->cp = rt_comm_size(c), R->me = rt_comm_rank(c);
    if (R->cp > RING_MAX)
        rt_fatal("%s: %d ranks (at most %d)", fn, R->cp, RING_MAX);
    int cp = R->cp;
    R->next = (R->me + 1) % cp, R->prev = (R->me + cp - 1) % cp;
    for (int b = 0; b < cp; b++) {
        R->last[b] = 0, R->first[b] = 0;
        for (int t = 1; t < cp; t++)
            if (sees((b + t) % cp, b, nchunks, chunk, pos, causal, window)) {
                R->last[b] = t;
                if (!R->first[b])
                    R->first[b] = t;
            }
        R->mine[b] = b == R->me || sees(R->me, b, nchunks, chunk, pos, causal, window);
    }
    if (B == 0 || H == 0 || D == 0)
        return false;
    if (!scratch)
        rt_fatal("%s: no scratch", fn);
    return true;
}

/* The block this rank holds at step t. */
static int block_at(const Ring *R, int t)
{
    return (R->me - t + R->cp) % R->cp;
}

/* Blocks this rank computes, and the step of the last. */
static int computed(const Ring *R, int *last_step)
{
    int n = 0;
    for (int t = 0; t < R->cp; t++) {
        int b = block_at(R, t);
        if (t <= R->last[b] && R->mine[b])
            n++, *last_step = t;
    }
    return n;
}

static void wait2(RtReq **a, RtReq **b)
{
    if (*a)
        rt_wait(*a);
    if (*b)
        rt_wait(*b);
    *a = *b = NULL;
}

/* Step t of the K/V blocks' walk, the same in both directions: take the
 * block held now (b; it arrived in slot t % 2), pass it on while a later
 * rank still needs it, and post the receive of the next one (bn). The last
 * step's sends read the slot the next block arrives in: they are waited for
 * first. */
static void kv_step(RtComm *c, const Ring *R, int t, int b, int bn, rt_act *slot[2][2], int64_t e,
                    const rt_act **ck, const rt_act **cv, RtReq **sk, RtReq **sv, RtReq **rk,
                    RtReq **rv)
{
    bool held = t <= R->last[b];
    if (t > 0 && held) {
        wait2(rk, rv);
        *ck = slot[t % 2][0], *cv = slot[t % 2][1];
    }
    wait2(sk, sv);
    if (held && t < R->last[b]) {
        *sk = rt_isend(c, *ck, e, RT_ACT, R->next, tag(t, TAG_K));
        *sv = rt_isend(c, *cv, e, RT_ACT, R->next, tag(t, TAG_V));
    }
    if (t + 1 < R->cp && t + 1 <= R->last[bn]) {
        *rk = rt_irecv(c, slot[(t + 1) % 2][0], e, RT_ACT, R->prev, tag(t, TAG_K));
        *rv = rt_irecv(c, slot[(t + 1) % 2][1], e, RT_ACT, R->prev, tag(t, TAG_V));
    }
}

void rt_attention_ring_fwd(RtComm *c, rt_act *o, float *lse, const rt_act *q, const rt_act *k,
                           const rt_act *v, int64_t B, int64_t Sq, int64_t H, int64_t KVH,
                           int64_t D, bool causal, int64_t window, int64_t chunk, int nchunks,
                           const int64_t *pos, void *scratch)
{
    Ring R;
    if (!plan(&R, "rt_attention_ring_fwd", c, B, Sq, H, KVH, D, causal, window, chunk, nchunks,
              pos, scratch))
        return;
    Layout L = layout(B, Sq, H, KVH, D);
    char *s = scratch;
    rt_act *slot[2][2] = {{(rt_act *)s, (rt_act *)(s + L.kv)},
                          {(rt_act *)(s + 2 * L.kv), (rt_act *)(s + 3 * L.kv)}};
    float *acc = (float *)(s + L.acc), *lse_b = (float *)(s + L.lse_b);
    int64_t e = B * Sq * KVH * D, qn = B * Sq * H * D, rows = B * Sq * H;
    const int64_t *qpos = pos + R.me * nchunks;
    int last_step = 0, ncomp = computed(&R, &last_step), done = 0;
    const rt_act *ck = k, *cv = v;
    RtReq *sk = NULL, *sv = NULL, *rk = NULL, *rv = NULL;
    for (int t = 0; t < R.cp; t++) {
        int b = block_at(&R, t), bn = (b + R.cp - 1) % R.cp;
        bool held = t <= R.last[b];
        kv_step(c, &R, t, b, bn, slot, e, &ck, &cv, &sk, &sv, &rk, &rv);
        if (!held || !R.mine[b])
            continue;
        const int64_t *kpos = pos + b * nchunks;
        if (done == 0) {
            rt_attention_pos_fwd(o, lse, q, ck, cv, B, Sq, Sq, H, KVH, D, causal, window, chunk,
                                 qpos, kpos);
            if (ncomp > 1) {
                rt_zero(acc, (size_t)qn * sizeof *acc);
                rt_grad_add(acc, o, qn);
            }
        } else {
            rt_attention_pos_fwd(o, lse_b, q, ck, cv, B, Sq, Sq, H, KVH, D, causal, window, chunk,
                                 qpos, kpos);
            rt_attention_merge(acc, lse, o, lse_b, t == last_step ? o : NULL, rows, D);
        }
        done++;
    }
    wait2(&sk, &sv);
    wait2(&rk, &rv); /* none left: every posted block is held at a later step */
}

void rt_attention_ring_bwd(RtComm *c, rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q,
                           const rt_act *k, const rt_act *v, const rt_act *o, const float *lse,
                           const rt_act *dout, int64_t B, int64_t Sq, int64_t H, int64_t KVH,
                           int64_t D, bool causal, int64_t window, int64_t chunk, int nchunks,
                           const int64_t *pos, void *scratch)
{
    Ring R;
    if (!plan(&R, "rt_attention_ring_bwd", c, B, Sq, H, KVH, D, causal, window, chunk, nchunks,
              pos, scratch))
        return;
    Layout L = layout(B, Sq, H, KVH, D);
    char *s = scratch;
    rt_act *slot[2][2] = {{(rt_act *)s, (rt_act *)(s + L.kv)},
                          {(rt_act *)(s + 2 * L.kv), (rt_act *)(s + 3 * L.kv)}};
    rt_act *dk_b = (rt_act *)(s + L.dkv_b), *dv_b = (rt_act *)(s + L.dkv_b + L.kv);
    float *dacc[2][2] = {{(float *)(s + L.dacc), (float *)(s + L.dacc + L.f32kv)},
                         {(float *)(s + L.dacc + 2 * L.f32kv), (float *)(s + L.dacc + 3 * L.f32kv)}};
    float *dqacc = (float *)(s + L.dq);
    int64_t e = B * Sq * KVH * D, qn = B * Sq * H * D;
    const int64_t *qpos = pos + R.me * nchunks;
    int last_step = 0, ncomp = computed(&R, &last_step), done = 0;
    const rt_act *ck = k, *cv = v;
    RtReq *sk = NULL, *sv = NULL, *rk = NULL, *rv = NULL; /* K, V in flight */
    RtReq *sdk = NULL, *sdv = NULL, *rdk = NULL, *rdv = NULL; /* dk, dv accumulators */
    for (int t = 0; t < R.cp; t++) {
        int b = block_at(&R, t), bn = (b + R.cp - 1) % R.cp;
        bool held = t <= R.last[b], compute = held && R.mine[b];
        bool acc_here = t > 0 && R.first[b] && t >= R.first[b];
        kv_step(c, &R, t, b, bn, slot, e, &ck, &cv, &sk, &sv, &rk, &rv);
        /* The accumulator of the block held next step (at t = cp - 1: this
         * rank's own, coming home) lands in the other slot, which the last
         * step's accumulator left from. */
        float **in = dacc[(t + 1) % 2], **cur = dacc[t % 2];
        RtReq *pk = rdk, *pv = rdv; /* this step's, posted last step */
        rdk = rdv = NULL;
        wait2(&sdk, &sdv);
        if (R.first[bn] && t + 1 > R.first[bn]) {
            rdk = rt_irecv(c, in[0], e, RT_F32, R.prev, tag(t, TAG_DK));
            rdv = rt_irecv(c, in[1], e, RT_F32, R.prev, tag(t, TAG_DV));
        }
        if (compute) {
            const int64_t *kpos = pos + b * nchunks;
            rt_act *dkx = t == 0 ? dk : dk_b, *dvx = t == 0 ? dv : dv_b;
            rt_attention_pos_bwd(dq, dkx, dvx, q, ck, cv, o, lse, dout, B, Sq, Sq, H, KVH, D, causal,
                                 window, chunk, qpos, kpos);
            if (ncomp > 1 && t == last_step)
                rt_add_f32(dq, dq, dqacc, qn);
            else if (ncomp > 1) {
                if (done == 0)
                    rt_zero(dqacc, (size_t)qn * sizeof *dqacc);
                rt_grad_add(dqacc, dq, qn);
            }
            done++;
        }
        if (!acc_here) {
            wait2(&pk, &pv);
            continue;
        }
        if (t == R.first[b]) { /* the accumulator starts here (compute is true) */
            rt_zero(cur[0], (size_t)e * sizeof(float));
            rt_zero(cur[1], (size_t)e * sizeof(float));
        } else
            wait2(&pk, &pv);
        if (compute) {
            rt_grad_add(cur[0], dk_b, e);
            rt_grad_add(cur[1], dv_b, e);
        }
        sdk = rt_isend(c, cur[0], e, RT_F32, R.next, tag(t, TAG_DK));
        sdv = rt_isend(c, cur[1], e, RT_F32, R.next, tag(t, TAG_DV));
    }
    wait2(&sk, &sv);
    wait2(&rk, &rv);
    wait2(&sdk, &sdv);
    if (rdk) { /* this rank's own accumulator, home after step cp - 1 */
        wait2(&rdk, &rdv);
        rt_add_f32(dk, dk, dacc[R.cp % 2][0], e);
        rt_add_f32(dv, dv, dacc[R.cp % 2][1], e);
    }
}
