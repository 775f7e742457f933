/* search_layerlb.c: a lower bound on one layer's time per micro-batch that
 * counts its resharding, from the ILP itself (docs/planner.md, "Why the
 * pruning is sound").
 *
 * The per-mesh floor (search_prune.c) takes each node's least kernel time
 * with a share of each edge's least resharding; neighbours may take their
 * least at strategies that do not agree, so it sees little of what a layer
 * pays to move its tensors between layouts (DeepSeek-V3's MoE layer on
 * dp 32 x tp 8, micro-batch 15: the floor's 11.41 s a micro-batch for the
 * model against the fastest variant's 11.24 s of kernels and 2.07 s of
 * resharding). The ILP prices every strategy and every edge of a layer
 * jointly, and each group's first variant (variant 0) is its optimum for a
 * layer between layers of its kind: the least of num_micro x (forward +
 * backward) + the step's gradient synchronisation over the strategies of
 * the lowered layer, with no memory budget. So, with no solve of its own:
 *
 *   - for any strategies A of that lowered problem (every variant the
 *     frontier walk reaches is one: the same query but for the budget),
 *     num_micro x (f_A + b_A) + sync_A >= the optimum, and sync_A is at most
 *     the sum over the layer's nodes of each one's largest synchronisation
 *     over the mesh's strategies (sync_max: the ILP's list is a subset), so
 *     f_A + b_A >= (optimum - sync_max) / num_micro. The optimum is taken at
 *     GLPK's proven bound (the objective when optimal: passes/ilp, mip_gap
 *     0), so a solve stopped by its time limit still bounds;
 *   - a layer whose neighbour before it is a layer of the same repeat (one
 *     strategy for every layer of a repeat: search_ilp.c, solve_repeat)
 *     costs in pass_predict its kernels, the resharding inside it and the
 *     resharding from the layer before it's output (charged to the reader):
 *     the ILP's layer with its boundary laid out as that output costs the
 *     same (f_A + b_A);
 *   - the ILP prices nodes as pass_cost_node does with every norm fused
 *     (fused_s, of fwd_s: a saving, negative, unless a measured curve says
 *     otherwise; pass_predict adds it back where the layouts keep the norm
 *     alone): the bound takes off, per piece, the largest positive fused_s
 *     of each node over its strategies (SrcGroup.floor_fslack);
 *   - it does not apply where pass_predict prices the resharding below the
 *     ILP: a stack that overlaps tensor-parallel collectives with GEMMs
 *     (tp_overlap), hides a fraction of the resharding (reshard_overlap) or
 *     the expert all-to-all (moe_a2a_overlap); nor to low-precision plans
 *     (which layers stay bf16 depends on their place, the skeleton's middle
 *     layer may not be the model's), pinned recomputation, or folded
 *     groups (no ILP).
 *
 * Exhaustive searches (tests/search, search.bounds) check every ranked
 * plan's ranks against pass_predict's times with these floors. Where the
 * micro-batches are many (DeepSeek-V3 on 2048 GPUs: 240 at micro-batch 1)
 * sync_max / num_micro is small; with few it weakens the bound (solving
 * the layer again without synchronisation would not, at a solve per group:
 * on Mixtral and Qwen3 that cost more solves than it saved). */
#include "search/src.h"

#include <math.h>
#include <stdlib.h>

/* The most gradient synchronisation the ILP can charge the nodes of piece
 * fp of gs per step under query q: each node's largest over every strategy
 * of the mesh (a superset of the ILP's), summed. */
static double sync_max(const Src *s, const IrGraph *gs, const PassIlpQuery *q, int fp)
{
    enum { MAXS = 512 }; /* ilp_lower.c's MAX_STRAT */
    PlanStrategy *st = ir_xmalloc(sizeof(PlanStrategy) * MAXS);
    int64_t *ds = ir_xmalloc(sizeof(int64_t) * (size_t)(gs->ndims + 1));
    ir_dim_sizes(gs, q->mb_seqs, ds);
    double sum = 0;
    for (int n = gs->pieces[fp].first; n < gs->pieces[fp].first + gs->pieces[fp].count; n++) {
        const IrNode *nd = &gs->nodes[n];
        bool params = false;
        for (int j = 0; j < nd->nin; j++)
            params |= nd->in[j] >= 0 && gs->tensors[nd->in[j]].role == IR_PARAM;
        if (!params)
            continue;
        /* the ILP's own list before its filters (ilp_lower.c: the same
         * masks, the same cap) */
        const uint64_t *allow = q->allow[0] || q->allow[1] || q->allow[2] ? q->allow : NULL;
        int ns = plan_strategies(gs, nd, &q->mesh, ds, allow, st, MAXS);
        double mx = 0;
        for (int i = 0; i < ns; i++)
            mx = fmax(mx, pass_param_sync_s(s->c, gs, nd, &q->mesh, &st[i], q->zero, q->num_micro));
        sum += mx;
    }
    free(st);
    free(ds);
    return sum;
}

bool src_layer_lb_applies(const Src *s)
{
    const PassStack *st = &s->c->st;
    return !st->ref_stack && st->tp_overlap == PASS_TP_OVERLAP_NONE && st->reshard_overlap <= 0 &&
           !st->moe_a2a_overlap && s->c->prec == PLAN_PREC_BF16 && s->o->pins.recompute < 0;
}

/* A piece of g in the middle of repeat rep with `count` nodes (its
 * neighbours of the same repeat), or -1. */
static int middle_piece(const IrGraph *g, int rep, int count)
{
    for (int p = 1; p + 1 < g->npieces; p++)
        if (g->pieces[p].rep == rep && g->pieces[p - 1].rep == rep && g->pieces[p + 1].rep == rep &&
            g->pieces[p].count == count)
            return p;
    return -1;
}

void src_layer_lb(Src *s, SrcGroup *G)
{
    if (G->layer_lb || G->nvar < 1 || G->fold > 1 || !G->floor_fslack || !src_layer_lb_applies(s))
        return;
    const IrGraph *g = s->g, *gs = s->o->skeleton ? s->o->skeleton : s->g;
    src_floor_classes(s);
    const SrcVariant *V = &G->var[0];
    G->layer_lb = ir_xcalloc((size_t)s->npieces + 1, sizeof(double));
    for (int i = 0; i < V->nq; i++) {
        const PassIlpQuery *q0 = &V->q[i];
        int fp = q0->first_piece, rep = gs->pieces[fp].rep;
        if (q0->npieces != 1 || q0->budget > 0 || q0->recompute != PLAN_RECOMPUTE_NONE || rep < 0 || fp < 1 ||
            fp + 1 >= gs->npieces || gs->pieces[fp - 1].rep != rep || gs->pieces[fp + 1].rep != rep ||
            q0->num_micro < 1)
            continue;
        int rp = middle_piece(g, rep, gs->pieces[fp].count);
        if (rp < 0)
            continue;
        const PassIlpResult *r = V->r[i];
        if (!r->feasible || !isfinite(r->bound))
            continue;
        double lb = (r->bound - sync_max(s, gs, q0, fp)) / q0->num_micro;
        for (int p = 0; p < s->npieces; p++)
            if (s->floor_cls[p] == s->floor_cls[rp])
                G->layer_lb[p] = fmax(0, lb - G->floor_fslack[src_frow(s, p)]);
    }
}
