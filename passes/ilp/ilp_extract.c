/* ilp_extract.c: a solved stage as a PassIlpResult: the strategy of every
 * forward node, the boundary sharding, times and memory from the solution's
 * quantities, axis names, and the collectives the plan runs, listed the way
 * ilp_build.c priced them (one forward reshard per distinct wanted sharding
 * of a tensor, one backward reshard per distinct gradient sharding). */
#include "ilp/ilp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n, cap;
    PassIlpColl *v;
} Colls;

static void add_steps(const IlpSeg *s, Colls *c, int t, int consumer, const PlanSharding *from,
                      const PlanSharding *to, bool bwd, bool redo, int count)
{
    PlanColl st[8];
    int n = plan_reshard(s->g, t, &s->q.mesh, from, to, s->dim_size, st, 8);
    int eb = pass_elem_bytes(s->ctx, s->g->tensors[t].dtype);
    for (int i = 0; i < n; i++) {
        if (redo && !pass_redone(s->ctx, st[i].kind))
            continue; /* the kept copy is reduced already (or kept exchanged) */
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 32;
            c->v = ir_xrealloc(c->v, (size_t)c->cap * sizeof *c->v);
        }
        c->v[c->n++] = (PassIlpColl){t, consumer, bwd, redo, st[i],
                                     s->costs->coll(s->ctx, &s->q.mesh, &st[i], eb), count};
    }
}

static int chosen(const IlpSeg *s, const IlpSolution *sol, int x)
{
    return ilp_own(s, x, sol->choice[s->group_of[s->inst[x].group]]);
}

/* The collectives of one use under the solution. */
static void use_colls(const IlpSeg *s, const IlpSolution *sol, const IlpUse *u, Colls *c)
{
    const IlpLink *l0 = &s->link[u->links[0]];
    int t = l0->tensor;
    PlanSharding S = ilp_out_sharding(s, l0->src, l0->out, chosen(s, sol, l0->src));
    PlanSharding T = S;
    T.partial = 0;
    PlanSharding seen_x[16], seen_g[16];
    int nx = 0, ng = 0;
    for (int k = 0; k < u->nlinks; k++) {
        const IlpLink *l = &s->link[u->links[k]];
        const IlpInst *dst = &s->inst[l->dst];
        PlanSharding X, G;
        ilp_in_sharding(s, l->dst, l->in, chosen(s, sol, l->dst), &X, &G);
        int consumer = dst->node;
        bool new_x = true, new_g = true;
        for (int i = 0; i < nx; i++)
            new_x &= !plan_sharding_eq(&seen_x[i], &X);
        for (int i = 0; i < ng; i++)
            new_g &= !plan_sharding_eq(&seen_g[i], &G);
        /* Forward: once per wanted sharding; again in backward if recomputed
         * or saved (each once per sharding as well: ilp_build.c). */
        if (new_x && nx < 16) {
            seen_x[nx++] = X;
            add_steps(s, c, t, consumer, &S, &X, false, false, u->count);
        }
        if (new_g && ng < 16) {
            seen_g[ng++] = G;
            add_steps(s, c, t, consumer, &G, &T, true, false, u->count);
        }
    }
    /* Recompute, and the saving readers' resharding from the kept copy: once
     * per wanted sharding among the readers that need them. */
    for (int pass = 0; pass < 2; pass++) {
        PlanSharding done[16];
        int nd = 0;
        for (int k = 0; k < u->nlinks; k++) {
            const IlpLink *l = &s->link[u->links[k]];
            const IlpInst *dst = &s->inst[l->dst];
            bool need = pass == 0 ? dst->recompute
                                  : dst->node >= 0 && !dst->recompute &&
                                        (ir_ops[s->g->nodes[dst->node].op].saves & IR_SAVE_IN(l->in));
            if (!need)
                continue;
            PlanSharding X, G;
            ilp_in_sharding(s, l->dst, l->in, chosen(s, sol, l->dst), &X, &G);
            bool fresh = true;
            for (int i = 0; i < nd; i++)
                fresh &= !plan_sharding_eq(&done[i], &X);
            if (!fresh || nd == 16)
                continue;
            done[nd++] = X;
            add_steps(s, c, t, dst->node, &S, &X, true, pass == 1, u->count);
        }
    }
}

void ilp_extract(const IlpSeg *s, const IlpSolution *sol, PassIlpResult *r)
{
    const IrGraph *g = s->g;
    memset(r, 0, sizeof *r);
    r->status = sol->status;
    r->feasible = sol->choice != NULL;
    r->first_node = s->first_node;
    r->nnodes = s->end_node - s->first_node;
    r->strategy = ir_xmalloc((size_t)r->nnodes * sizeof *r->strategy);
    r->ninst = s->ninst;
    r->ninst_merged = s->ngroups;
    r->nvars = sol->nvars;
    r->nbin = sol->nbin;
    r->nrows = sol->nrows;
    r->frontier_points = sol->frontier_points;
    r->unique = sol->unique;
    r->solve_s = sol->solve_s;
    r->gap = sol->gap;
    r->bound = sol->bound;
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        r->axis_name[a] = "-";
    if (!r->feasible) {
        for (int i = 0; i < r->nnodes; i++)
            r->strategy[i] = (PlanStrategy){PLAN_NO_DIMS, 0};
        r->step_s = r->fwd_s = r->bwd_s = r->mem_bytes = INFINITY;
        return;
    }
    for (int i = 0; i < r->nnodes; i++) {
        int x = s->inst_of[i];
        r->strategy[i] = s->inst[x].strat[chosen(s, sol, x)];
    }
    /* The boundary layers meet at: the busiest one. */
    int best = -1;
    for (int x = 0; x < s->ninst; x++)
        if (s->inst[x].node < 0 && (best < 0 || s->inst[x].count > s->inst[best].count))
            best = x;
    if (best >= 0) {
        const PlanStrategy *st = &s->inst[best].strat[chosen(s, sol, best)];
        r->has_boundary = true;
        r->boundary = (PlanSharding){{st->dim[0], st->dim[1], st->dim[2]}, 0, 0};
    }
    r->fwd_s = sol->total.q[ILP_FWD];
    r->bwd_s = sol->total.q[ILP_BWD];
    r->sync_s = sol->total.q[ILP_SYNC];
    r->step_s = sol->objective;
    r->param_bytes = sol->total.q[ILP_MEM_PARAM];
    r->act_bytes = sol->total.q[ILP_MEM_ACT];
    r->mem_bytes = r->param_bytes + r->act_bytes;
    /* Axis names: "dp" where most operators split the batch, "cp" where
     * attention splits its queries' sequence (context parallelism, as
     * plan_axes names it), else "tp". */
    for (int a = 0; a < s->q.mesh.naxes; a++) {
        if (s->q.mesh.size[a] <= 1)
            continue;
        int batch = 0, total = 0;
        bool cp = false;
        for (int i = 0; i < r->nnodes; i++) {
            total++;
            batch += r->strategy[i].dim[a] == g->batch_dim;
            cp |= plan_cp_axis(g, &g->nodes[r->first_node + i], &r->strategy[i]) == a;
        }
        r->axis_name[a] = 2 * batch > total ? "dp" : cp ? "cp" : "tp";
    }
    Colls c = {0, 0, NULL};
    for (int u = 0; u < s->nuses; u++)
        use_colls(s, sol, &s->use[u], &c);
    r->coll = c.v;
    r->ncoll = c.n;
}

void pass_ilp_result_free(PassIlpResult *r)
{
    if (!r)
        return;
    free(r->strategy);
    free(r->coll);
    r->strategy = NULL;
    r->coll = NULL;
}
