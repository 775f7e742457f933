/* wslot.c: what a split schedule's (ZB-H1's) W slot holds for one node per
 * micro-batch, from the backward (B) to the weight gradients (W): read by
 * pass_predict's memory and by the search's stage cuts (search_dp.c), so
 * that a cut the partition finds fits as pass_predict counts it. */
#include "cost/cost.h"

/* The bytes n's weight-gradient GEMMs read (docs/moe.md, ZB-H1): its input
 * and its output's gradient as the GEMM reads them (B copies them after its
 * gathers: under sequence parallelism whole over the sequence, not split as
 * the norm made them), the input once per piece however many GEMMs read it
 * (q, k, v); an MoE node's experts, the routed rows' inputs, output
 * gradients, activation and first GEMMs' gradients (plan_moe_wslot_numel):
 * in a static arena (ptdc's programs, rt_moe_act_bwd_b's W slot) for the
 * rows its W slot is sized for (plan_moe_wslot_rows at `factor`,
 * pass_moe_wslot_factor), under a caching allocator the busiest rank's
 * rows. Added to *acc term by term (pass_predict's sums, bit for bit);
 * *rows and *worst (each may be NULL): an MoE node's slot rows and the
 * dropless worst case under ptdc's programs (0 otherwise), for the
 * overflow's share of W. */
bool pass_wslot_holds(const IrGraph *g, const IrNode *n)
{
    return n->op == IR_OP_MOE || (n->op == IR_OP_MATMUL && g->tensors[n->in[1]].role == IR_PARAM);
}

void pass_wslot_add(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                    const PlanStrategy *s, const PlanSharding *in, const PlanSharding *out, const int64_t *ds,
                    double factor, double *acc, int64_t *rows, int64_t *worst)
{
    if (rows)
        *rows = 0;
    if (worst)
        *worst = 0;
    if (!pass_wslot_holds(g, n))
        return;
    if (n->op == IR_OP_MOE) {
        int64_t local[256];
        plan_local_sizes(g, n, m, s, ds, local);
        double D, F, R = pass_moe_rows(c, g, n, m, s, local, &D, &F);
        const IrTensor *wg = &g->tensors[n->in[2]];
        int64_t El = local[wg->dim[0]];
        int64_t tokens = plan_local_numel(g, n->in[0], m, &in[0], ds) / local[wg->dim[1]];
        if (!c->st.ref_stack) {
            int ep = plan_ep_degree(g, n, m, s);
            int64_t r = plan_moe_wslot_rows(g, n, tokens, ep, El, factor);
            R = (double)r;
            if (rows)
                *rows = r;
            if (worst)
                *worst = plan_moe_wslot_rows(g, n, tokens, ep, El, 0);
        }
        *acc += (double)plan_moe_wslot_numel(n, 1, (int64_t)D, (int64_t)F) * R *
                pass_elem_bytes(c, g->tensors[n->in[0]].dtype);
        return;
    }
    int y = n->out[0];
    *acc += (double)plan_local_numel(g, y, m, &out[0], ds) * pass_elem_bytes(c, g->tensors[y].dtype);
    for (int id = g->pieces[n->piece].first; id < n->id; id++) {
        const IrNode *o = &g->nodes[id];
        if (o->op == IR_OP_MATMUL && o->in[0] == n->in[0] && g->tensors[o->in[1]].role == IR_PARAM)
            return;
    }
    *acc += (double)plan_local_numel(g, n->in[0], m, &in[0], ds) * pass_saved_elem_bytes(c, g, n, 0);
}
