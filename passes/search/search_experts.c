/* search_experts.c: the expert layouts a stage mesh can hold: the axes a
 * pinned --ep / --etp degree names (src_moe_axes, src_moe_mesh_ok: one
 * axis, or across dp x tp), and the
 * degrees of EP below DP that ptdc's own programs run (src_folds) with the
 * one strategy each node of such a layout takes (src_fold_strategy). Its own
 * file so that the ILP side (search_ilp.c) and the bounds (search_prune.c)
 * both read it without calling each other. */
#include "search/src.h"

unsigned src_moe_axes(int dp, int tp, int deg)
{
    if (deg <= 0)
        return 0;
    if (deg == 1)
        return 1;
    return (dp == deg ? 2u : 0) | (tp == deg ? 4u : 0) |
           (dp > 1 && tp > 1 && dp * tp == deg ? PASS_ILP_EP_ACROSS : 0);
}

PlanStrategy src_fold_strategy(const IrGraph *g, const IrNode *n)
{
    PlanStrategy st = {PLAN_NO_DIMS, 0};
    if (ir_node_has_dim(g, n, g->batch_dim))
        st.dim[0] = st.dim[1] = (int16_t)g->batch_dim;
    if (plan_routed_expert_dim(g, n) >= 0)
        st.xchg = 1u << 1;
    return st;
}

int src_folds(const Src *s, int dp, int cp, int tp, bool sp, int *f, int max)
{
    const IrGraph *g = s->g;
    const PassSearchOpts *o = s->o;
    int k = 0;
    if (src_moe_mesh_ok(s, dp, tp, sp) && k < max)
        f[k++] = 1;
    /* EP below DP: ptdc's own programs (a framework stack's search is
     * report/frame_search.c), tp 1 (EP below DP beside tp needs a third
     * mesh axis, dp_outer x dp_inner x tp, which the programs do not
     * build; EP across all of dp x tp is the ILP's choice on the unfolded
     * mesh), no cp (experts do not combine with it), unpinned or --ep the
     * degree. */
    if (s->c->st.ref_stack || !s->has_moe || tp != 1 || cp != 1 || sp || (o->etp > 1) ||
        (o->ep > 0 && (o->ep == 1 || o->ep >= dp || dp % o->ep)))
        return k;
    for (int x = 2; x < dp && k < max; x++) {
        if (dp % x || (o->ep > 0 && x != o->ep))
            continue;
        bool ok = true; /* routed experts (not only a shared one), every expert dim divided */
        int routed = 0;
        for (int i = 0; i < g->nfwd && ok; i++) {
            int e = plan_routed_expert_dim(g, &g->nodes[i]);
            ok = e < 0 || g->dims[e].size % x == 0;
            routed += e >= 0;
        }
        if (ok && routed)
            f[k++] = x;
    }
    return k;
}

bool src_moe_mesh_ok(const Src *s, int dp, int tp, bool sp)
{
    /* ETP over tp only: the dp axis splits the batch, and only an exchange
     * puts a second dim (the experts) on one axis. EP across dp x tp
     * exchanges the sequence over tp: only a sequence-parallel layout
     * splits it there (pass_ilp_pins), as Megatron-Core asks of EP with
     * tp > 1. */
    unsigned e = src_moe_axes(dp, tp, s->o->ep), t = src_moe_axes(dp, tp, s->o->etp) & 4u;
    if (!sp)
        e &= ~PASS_ILP_EP_ACROSS;
    if ((s->o->ep > 1 && !e) || (s->o->etp > 1 && !t))
        return false;
    /* Both split: over different axes. */
    return !(s->o->ep > 1 && s->o->etp > 1) || ((e & 2) && (t & 4)) || ((e & 4) && (t & 2));
}
