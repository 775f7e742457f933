/* cg_fwd.c: forward nodes. A node's inputs are fetched in the sharding its
 * strategy needs (cg_get), its outputs made where the kernel makes them
 * (partial sums first) and reduced to their canonical form, where consumers
 * find them. Two fusions the cost model prices: a residual add and the norm
 * of its sum as one call, sibling GEMMs as one batch. The backward's
 * recomputation re-runs forward nodes into temporaries. */
#include "cg_low.h"

#include <string.h>

/* Forward node n's output buffers: canon (where its consumers find each
 * output) and made (where the kernel writes it: partial sums first). */
typedef struct Outs {
    int canon[IR_MAX_OUT], made[IR_MAX_OUT];
} Outs;

static void outs_alloc(Low *L, const IrNode *n, bool recompute, ChunkBufs *cb, CgArgs *a, Outs *o)
{
    Cg *c = L->c;
    for (int j = 0; j < n->nout; j++) {
        int t = n->out[j];
        o->canon[j] = o->made[j] = -1;
        if (c->g->tensors[t].role == IR_LOSS) {
            a->out[j] = cg_a_sym("g_loss");
            continue;
        }
        PlanSharding ps = c->prod[t], cs = c->canon[t];
        Avail *slot = NULL;
        if (!recompute && c->saved[t])
            for (int i = 0; i < cb->slots.n && !slot; i++)
                if (cb->slots.v[i].t == t)
                    slot = &cb->slots.v[i];
        o->canon[j] = slot ? slot->buf : cg_temp(L, t, &cs, "", "", recompute ? "recomputed" : NULL);
        o->made[j] = plan_sharding_eq(&ps, &cs) ? o->canon[j] : cg_temp(L, t, &ps, "", "_p", "partial sums");
        a->out[j] = BUF(o->made[j]);
    }
}

/* After the kernel: partial sums reduced into place, outputs available. */
static void outs_finish(Low *L, const IrNode *n, const Outs *o)
{
    Cg *c = L->c;
    for (int j = 0; j < n->nout; j++) {
        if (o->canon[j] < 0)
            continue;
        int t = n->out[j];
        if (o->made[j] != o->canon[j])
            cg_reshard(L, t, "", o->made[j], c->prod[t], c->canon[t], true, o->canon[j]);
        cg_put(L, t, c->canon[t], o->canon[j], false);
    }
}

static CgArgs args0(void)
{
    CgArgs a;
    memset(&a, 0, sizeof a);
    return a;
}

/* Run forward node n. recompute: outputs go to temporaries (the backward
 * pass re-running what the policy did not keep). */
void cg_lower_fwd(Low *L, const IrNode *n, bool recompute, ChunkBufs *cb)
{
    Cg *c = L->c;
    if (n->op == IR_OP_SHIFT) /* read from the data with the inputs (lower_forward) */
        return;
    CgArgs a = args0();
    for (int k = 0; k < n->nin; k++)
        a.in[k] = BUF(cg_get(L, n->in[k], cg_need(c, n, k)));
    Outs o;
    outs_alloc(L, n, recompute, cb, &a, &o);
    a.recompute = recompute;
    cg_kernel(c, L->op, L->piece, n, &a);
    outs_finish(L, n, &o);
}

/* A residual add and the RMSNorm after it that reads its sum
 * (plan_add_norm_pair: the cost model prices the pair as this one call), as
 * one rt_add_rmsnorm_fwd, when the sum is made complete (no partial sums)
 * in the layout the norm reads it in, so nothing runs between the two.
 * Whether it lowered both. Any cg_get() of the operands emits under
 * L->piece, the norm's: a pair spanning pieces runs in the second. */
bool cg_lower_add_norm(Low *L, const IrNode *add, const IrNode *norm, bool recompute, ChunkBufs *cb)
{
    Cg *c = L->c;
    if (norm->id != add->id + 1 || !plan_add_norm_fused(c->g, norm, c->p->strategy))
        return false;
    /* The cost model's rule says the sum is complete where it is made, in
     * the layout the operands and the norm take: nothing between the two. */
    int t = add->out[0];
    PlanSharding need = cg_need(c, norm, 0);
    if (!plan_sharding_eq(&c->prod[t], &c->canon[t]) || !plan_sharding_eq(&need, &c->canon[t]))
        ir_die("codegen: '%s' is not made where the norm reads it", low_t(L, t)->name);
    CgArgs aa = args0(), an = args0();
    for (int k = 0; k < add->nin; k++)
        aa.in[k] = BUF(cg_get(L, add->in[k], cg_need(c, add, k)));
    for (int k = 1; k < norm->nin; k++) /* weight (and bias) */
        an.in[k] = BUF(cg_get(L, norm->in[k], cg_need(c, norm, k)));
    Outs oa, on;
    outs_alloc(L, add, recompute, cb, &aa, &oa);
    outs_alloc(L, norm, recompute, cb, &an, &on);
    an.in[0] = aa.out[0];
    an.has_sum = true;
    an.sum_of[0] = aa.in[0];
    an.sum_of[1] = aa.in[1];
    cg_kernel(c, L->op, L->piece, norm, &an);
    outs_finish(L, add, &oa);
    outs_finish(L, norm, &on);
    return true;
}

/* n and its sibling GEMMs (plan_gemm_batch: q, k and v from one input;
 * gate and up) as one rt_matmul_batch, issued at the first of them (their
 * inputs, the shared activation and parameters, are all there); the later
 * ones are marked and skipped. rerun (recompute: by node id - first) limits
 * the batch to the nodes re-run. Whether it lowered n. */
bool cg_lower_gemm_batch(Low *L, const IrNode *n, bool recompute, ChunkBufs *cb, const bool *rerun,
                         int first)
{
    Cg *c = L->c;
    int ids[PLAN_GEMM_BATCH_MAX];
    if (cg_gemm_fp8(c, n))
        return false;
    int k = plan_gemm_batch(c->g, n, c->p->strategy, ids), cnt = 0;
    const IrNode *m[PLAN_GEMM_BATCH_MAX];
    for (int i = 0; i < k; i++)
        if (!L->batched[ids[i]] && (!rerun || rerun[ids[i] - first]))
            m[cnt++] = &c->g->nodes[ids[i]];
    if (cnt < 2 || m[0] != n)
        return false;
    CgArgs a[PLAN_GEMM_BATCH_MAX];
    Outs o[PLAN_GEMM_BATCH_MAX];
    for (int i = 0; i < cnt; i++) {
        a[i] = args0();
        for (int j = 0; j < m[i]->nin; j++)
            a[i].in[j] = BUF(cg_get(L, m[i]->in[j], cg_need(c, m[i], j)));
    }
    for (int i = 0; i < cnt; i++)
        outs_alloc(L, m[i], recompute, cb, &a[i], &o[i]);
    cg_kernel_batch(c, L->op, L->piece, m, a, cnt);
    for (int i = 0; i < cnt; i++) {
        outs_finish(L, m[i], &o[i]);
        L->batched[m[i]->id] = true;
    }
    return true;
}

/* Forward nodes of piece p the backward must re-run: producers of values
 * its backward nodes read that were not kept, and what those need. */
void cg_recompute(Low *L, int p, ChunkBufs *cb)
{
    Cg *c = L->c;
    const IrGraph *g = c->g;
    bool *need = ir_alloc(c->arena, (size_t)g->ntensors);
    bool any = false;
    for (int i = g->nfwd; i < g->nnodes; i++) {
        const IrNode *b = &g->nodes[i];
        if (g->nodes[b->fwd].piece != p)
            continue;
        for (int k = 0; k < b->nin; k++) {
            int t = b->in[k], q = g->tensors[t].producer;
            if (g->tensors[t].role != IR_GRAD && q >= 0 && q < g->nfwd && c->recomputed[q] &&
                g->nodes[q].piece == p && !c->saved[t])
                need[t] = any = true;
        }
    }
    if (!any)
        return;
    const IrPiece *pc = &g->pieces[p];
    for (int i = pc->first + pc->count - 1; i >= pc->first; i--) {
        const IrNode *n = &g->nodes[i];
        bool want = false;
        for (int j = 0; j < n->nout; j++)
            want |= need[n->out[j]];
        if (!want)
            continue;
        for (int k = 0; k < n->nin; k++) {
            int t = n->in[k], q = g->tensors[t].producer;
            if (q >= 0 && c->recomputed[q] && g->nodes[q].piece == p && !c->saved[t])
                need[t] = true;
        }
    }
    cg_comment(c, L->op, L->piece, "recompute what the forward pass did not keep");
    bool *want = ir_alloc(c->arena, (size_t)pc->count);
    for (int i = 0; i < pc->count; i++) {
        const IrNode *n = &g->nodes[pc->first + i];
        for (int j = 0; j < n->nout; j++)
            want[i] |= need[n->out[j]];
    }
    for (int i = 0; i < pc->count; i++) {
        const IrNode *n = &g->nodes[pc->first + i];
        if (!want[i])
            continue;
        if (i + 1 < pc->count && want[i + 1] && cg_lower_add_norm(L, n, n + 1, true, cb)) {
            i++;
            continue;
        }
        if (L->batched[n->id] || cg_lower_gemm_batch(L, n, true, cb, want, pc->first))
            continue;
        cg_lower_fwd(L, n, true, cb);
    }
}
