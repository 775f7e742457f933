/* train_cp.c: context-parallel attention (docs/context.md), what generated
 * code calls where attention splits its queries' sequence over a mesh axis.
 * The keys and values arrive gathered (all Sk = cp x Sq of them, in CP rank
 * order); this rank's Sq queries are its part of the sequence. Where each
 * part sits is the plan's statement (plan/context.c: plan_cp_chunks, what
 * the cost model prices); this is the programs' copy, which the CP
 * equivalence tests (tests/codegen: every rank's loss and gradients equal
 * one rank's) prove. Rank r of cp holds positions [r Sq, (r + 1) Sq): its
 * queries are one chunk there, the keys cp chunks in order. */
#include "train.h"

static int64_t positions(int64_t Sq, int cp, int r, int64_t *qpos, int64_t *kpos)
{
    if (cp < 1 || cp > RT_ATTN_MAX_CHUNKS || r < 0 || r >= cp)
        rt_fatal("context parallelism: rank %d of %d (at most %d ranks)", r, cp, RT_ATTN_MAX_CHUNKS);
    qpos[0] = r * Sq;
    for (int j = 0; j < cp; j++)
        kpos[j] = j * Sq;
    return Sq;
}

void cg_attention_cp_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                         int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                         bool causal, int64_t window, int cp, int r)
{
    int64_t qpos[1], kpos[RT_ATTN_MAX_CHUNKS];
    if (Sk != Sq * cp)
        rt_fatal("context parallelism: %lld keys are not %d x %lld queries", (long long)Sk, cp,
                 (long long)Sq);
    int64_t chunk = positions(Sq, cp, r, qpos, kpos);
    rt_attention_pos_fwd(o, lse, q, k, v, B, Sq, Sk, H, KVH, D, causal, window, chunk, qpos, kpos);
}

void cg_attention_cp_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                         const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                         int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                         bool causal, int64_t window, int cp, int r)
{
    int64_t qpos[1], kpos[RT_ATTN_MAX_CHUNKS];
    if (Sk != Sq * cp)
        rt_fatal("context parallelism: %lld keys are not %d x %lld queries", (long long)Sk, cp,
                 (long long)Sq);
    int64_t chunk = positions(Sq, cp, r, qpos, kpos);
    rt_attention_pos_bwd(dq, dk, dv, q, k, v, o, lse, dout, B, Sq, Sk, H, KVH, D, causal, window,
                         chunk, qpos, kpos);
}
