/* a2a_overlap.c: Megatron-Core's expert all-to-all overlap (stack key
 * moe_a2a_overlap; Megatron --overlap-moe-expert-parallel-comm
 * --delay-wgrad-compute; docs/moe.md, "Expert all-to-all overlap").
 *
 * In the 1F1B steady state Megatron runs the forward of micro-batch i+1
 * and the backward of micro-batch i as one step (pipeline_parallel/
 * combined_1f1b.py), layer by layer: forward layer j beside backward layer
 * L-1-j (models/common/model_chunk_schedule_plan.py). Each layer is four
 * nodes, pre-dispatch compute (attention, norm, router, dispatcher
 * preprocessing), the dispatch all-to-all, the experts, the combine
 * all-to-all; the all-to-alls run on a communication stream, the rest on
 * the compute stream, in TransformerLayerSchedulePlan.run's order:
 *
 *   comm:  combine_bwd | dispatch_fwd, dispatch_bwd    | combine_fwd
 *   comp:  pre_fwd     | mlp_bwd (dx), mlp_dw, mlp_fwd | pre_bwd
 *
 * each node starting when its stream is free and its input is ready (the
 * data dependencies below). The expert weight gradients (mlp_dw) run after
 * the dispatch backward is issued (delay_wgrad_compute), so that
 * all-to-all can hide under them. The next layer's pair starts when both
 * of this one's last nodes end (its pre_fwd reads combine_fwd's output, its
 * combine_bwd pre_bwd's), so a micro-batch's pair is the sum of its
 * layers'. */
#include "cost/cost.h"

#include <math.h>

double pass_a2a_pair_s(const PassA2aLayer *l, double *hidden)
{
    /* Backward all-to-alls beyond the two (a recomputed dispatch) run
     * before the experts' backward, with the combine's gradient. */
    int nb = l->n_b > 1 ? l->n_b : 1;
    double pre_f = l->pre_f;                         /* comp, from 0 */
    double cb = (nb - 1) * l->a2a_b;                 /* comm, from 0 */
    double dx = fmax(pre_f, cb) + l->mlp_dx;         /* needs the combine's gradient */
    double df = fmax(pre_f, cb) + l->a2a_f;          /* needs pre_fwd's rows */
    double dw = dx + l->mlp_dw;
    double db = fmax(df, dx) + l->a2a_b;             /* needs the experts' dx */
    double mf = fmax(dw, df) + l->mlp_f;             /* needs the dispatched rows */
    double cf = fmax(db, mf) + l->a2a_f;             /* needs the experts' output */
    double pb = fmax(mf, db) + l->pre_b;             /* needs the dispatch's gradient */
    double end = fmax(pb, cf);
    double comp = l->pre_f + l->mlp_dx + l->mlp_dw + l->mlp_f + l->pre_b;
    double a2a = 2 * l->a2a_f + nb * l->a2a_b;
    if (hidden)
        *hidden = fmax(0, a2a - (end - comp));
    return end;
}

bool pass_a2a_overlap_applies(const PassCostCtx *c, const IrGraph *g, const Plan *plan)
{
    if (!c->st.moe_a2a_overlap || !c->st.ref_stack)
        return false;
    int v = plan->v > 0 ? plan->v : 1;
    if (plan->pp > 1 && v < 2) /* virtual_pipeline_model_parallel_size must be set */
        return false;
    if (plan->zero >= 3 && v > 1) /* combined_1f1b.py: no Megatron-FSDP when interleaved */
        return false;
    for (int st = 0; st < plan->nstages; st++)
        if (plan->stages[st].recompute == PLAN_RECOMPUTE_FULL || /* recompute_granularity != full */
            plan->stages[st].recompute == PLAN_RECOMPUTE_FFN ||  /* "moe" not in recompute_modules: */
            (plan_recompute_modules(plan->stages[st].recompute) & (1u << PLAN_RC_MODULE_MOE))) /* ffn emits it */
            return false;
    /* expert_model_parallel_size > 1 with the alltoall dispatcher: some
     * MoE node exchanges its rows over a mesh axis of more than one rank. */
    for (int id = 0; id < g->nfwd; id++) {
        const PlanStrategy *s = &plan->strategy[id];
        if (g->nodes[id].op != IR_OP_MOE)
            continue;
        for (int ax = 0; ax < plan->mesh.naxes; ax++)
            if ((s->xchg & (1u << ax)) && plan->mesh.size[ax] > 1)
                return true;
    }
    return false;
}

double pass_a2a_unpaired(int pp, int v, int m, int rank)
{
    if (m < 1)
        return 1;
    if (pp <= 1) /* the first forward and the last backward run alone */
        return 1.0 / m;
    if (v < 2)
        return 1;
    /* Interleaved warm-up with microbatch groups of pp, plus the one extra
     * forward the overlap schedules; as many backwards cool down. */
    double total = (double)m * v;
    double warm = (double)(pp - rank - 1) * 2 + (double)(v - 1) * pp + 1;
    return fmin(1, warm / total);
}
