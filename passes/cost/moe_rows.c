/* moe_rows.c: the rows an MoE layer's experts process on one rank
 * (docs/moe.md), which its time (cost_ops.c) and its memory (mem_saved.c)
 * both follow: a file of its own so neither calls the other. */
#include "cost/cost.h"

#include <math.h>

/* The experts (docs/moe.md). T tokens reach n (gathered over a plain
 * expert split's axis); each chose k of the E experts, El of which are held
 * here. Balanced, R = T k El X / E rows reach this rank, X the exchange
 * group (the group's tokens choose this rank's experts); the busiest rank
 * gets R x imbalance (the stack's moe_imbalance, at most every row of the
 * group once per local expert it could choose, T X min(k, El)), and the
 * step waits for it. Each expert's M = R / El rows run as one GEMM of a
 * grouped call (pass_gemm_time with batch = El: the experts' tiles share
 * the waves; few rows per expert make short, inefficient GEMMs).
 *
 * Forward: gather the rows by expert (a copy of R x D), gate and up, swiglu,
 * down, scatter and weight-sum back to the tokens (a copy). Backward
 * (ptdc's rt_moe_bwd) gathers h's rows again, recomputes gate, up and the
 * swiglu, then dact = dy Wd^T, dWd, swiglu's backward, dh = dgate Wg^T +
 * dup Wu^T, dWg and dWu, gathers dy's rows and scatters dh's. A stack that
 * keeps the rows (moe_saves_rows: Megatron) skips the recompute and the
 * second gather of h.
 *
 * An exchange sends each routed row to its expert's rank and the results
 * back (an all-to-all of T k rows x D each way, the busiest rank's share
 * scaled by the imbalance), and each side sorts what it received by expert
 * (one more copy of the rows): forward dispatch and combine; backward dy's
 * dispatch and dh's combine, and under recompute h's dispatch again.
 *
 * Workspace while it runs (ws_bytes, the backward's: the larger): the
 * received rows of h and dy (2 R D), gate and up (2 R F), their gradients
 * (2 R F) and dact (R F); an ungated expert (relu2, ir/moe_acts.def) has
 * no gate GEMM: up, its gradient and dact (3 R F). */
double pass_moe_rows(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                     const PlanStrategy *s, const int64_t *local, double *d_model, double *d_expert)
{
    const IrTensor *wg = &g->tensors[n->in[2]];
    const IrTensor *h = &g->tensors[n->in[0]];
    double T = 1;
    for (int i = 0; i < h->rank; i++)
        T *= (double)local[h->dim[i]];
    T /= (double)local[wg->dim[1]];
    double El = (double)local[wg->dim[0]], E = (double)g->dims[wg->dim[0]].size;
    double k = (double)plan_route_topk(g, n), X = 1;
    for (int ax = 0; ax < m->naxes; ax++)
        if (s->xchg & (1u << ax))
            X *= m->size[ax];
    double imb = c->st.moe_imbalance > 1 ? c->st.moe_imbalance : 1;
    double R = T * k * El * X / E;
    if (El < E && imb > 1)
        R = fmin(R * imb, T * X * fmin(k, El));
    if (d_model)
        *d_model = (double)g->dims[wg->dim[1]].size;
    if (d_expert)
        *d_expert = (double)local[wg->dim[2]];
    return R;
}

double pass_moe_wslot_factor_zero(const PassCostCtx *c, int zero)
{
    if (c->st.moe_wslot_worst || zero >= 2)
        return 0;
    return c->st.moe_imbalance > 1 ? c->st.moe_imbalance : 1;
}

double pass_moe_wslot_factor(const PassCostCtx *c, const Plan *p) { return pass_moe_wslot_factor_zero(c, p->zero); }

double pass_moe_wslot_overflow(const PassCostCtx *c, int64_t rows, int64_t worst)
{
    const double euler_gamma = 0.57721566490153286;
    if (rows >= worst || c->st.moe_imbalance <= 1)
        return 0;
    return 1 - exp(-exp(-euler_gamma));
}
