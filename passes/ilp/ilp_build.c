/* ilp_build.c: price a lowered stage (IlpSeg) and build its core problem.
 *
 * Node prices (per strategy, times the count of nodes an instance stands for):
 *   FWD  pass_cost_node forward;  BWD  its backward, plus the forward again if
 *   the node is recomputed;  SYNC  pass_param_sync_s;  MEM_PARAM
 *   pass_param_bytes;  MEM_ACT  pass_saved_bytes * inflight.
 * Link prices, for tensor t from source sharding S (the producer's output,
 * or a boundary's) to a reader wanting X and giving back gradient G:
 *   forward   plan_reshard(S -> X)
 *   backward  plan_reshard(G -> S without its partial sums)
 *   recompute the forward reshard again, if the reader is recomputed
 *   redo      if the reader saves t and is not recomputed: the programs
 *             keep t as its producer made it, reduced (cg_analyse.c's
 *             canonical form), and a backward node reading it brings it to
 *             the reader's layout again: the forward reshard's steps after
 *             its reductions (all-gathers, all-to-alls, slices) run again.
 *             An all-gathered copy is not kept (Megatron's sequence
 *             parallelism): memory counts the sharded size at the reader
 *             where the cost model counts the saved tensor; an all-to-all
 *             (context parallelism's heads split, tp's exchanges) keeps the
 *             same bytes and costs its exchange again.
 * Work several readers of one tensor share is done once (IlpUse): one
 * forward reshard per distinct wanted sharding, one backward reshard per
 * distinct gradient sharding (contributions with the same sharding are summed
 * first: q, k and v's partial gradients of the norm's output meet in one
 * reduction). The core prices that with max-groups: for source class I and
 * wanted sharding X, w = price(I, X) times the largest "this reader sits at
 * (I, X)" indicator over the readers. */
#include "ilp/ilp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const IlpInst *leader(const IlpSeg *s, int x) { return &s->inst[s->inst[x].group]; }

int ilp_own(const IlpSeg *s, int x, int gi)
{
    const IlpInst *in = &s->inst[x];
    return in->group == x ? gi : in->gmap[gi];
}

static PlanSharding strat_sharding(const PlanStrategy *st)
{
    return (PlanSharding){{st->dim[0], st->dim[1], st->dim[2]}, 0, 0};
}

PlanSharding ilp_out_sharding(const IlpSeg *s, int x, int out, int k)
{
    const IlpInst *in = &s->inst[x];
    if (in->node < 0)
        return strat_sharding(&in->strat[k]);
    PlanSharding o[IR_MAX_OUT];
    plan_shard_io(s->g, &s->g->nodes[in->node], &in->strat[k], NULL, o);
    return o[out];
}

void ilp_in_sharding(const IlpSeg *s, int x, int slot, int k, PlanSharding *want, PlanSharding *grad)
{
    const IlpInst *in = &s->inst[x];
    if (in->node < 0) {
        *want = *grad = strat_sharding(&in->strat[k]);
        return;
    }
    const IrNode *n = &s->g->nodes[in->node];
    PlanSharding i[IR_MAX_IN];
    plan_shard_io(s->g, n, &in->strat[k], i, NULL);
    *want = i[slot];
    *grad = plan_shard_grad_in(s->g, n, &in->strat[k], slot);
}

/* Seconds of resharding tensor t from `from` to `to`; *redo: the part after
 * its reductions, what the backward runs again for a reader that saves t;
 * *sharded: local elements before the first all-gather (0 if none). */
static double reshard_s(const IlpSeg *s, int t, const PlanSharding *from, const PlanSharding *to,
                        double *redo, int64_t *sharded)
{
    PlanColl st[8];
    int n = plan_reshard(s->g, t, &s->q.mesh, from, to, s->dim_size, st, 8);
    int eb = pass_elem_bytes(s->ctx, s->g->tensors[t].dtype);
    double tot = 0, r = 0;
    int64_t sh = 0;
    for (int i = 0; i < n; i++) {
        double c = s->costs->coll(s->ctx, &s->q.mesh, &st[i], eb);
        tot += c;
        if (pass_redone(s->ctx, st[i].kind))
            r += c;
        if (st[i].kind == PLAN_COLL_ALLGATHER && !sh)
            sh = st[i].numel / s->q.mesh.size[st[i].axis];
    }
    if (redo)
        *redo = r;
    if (sharded)
        *sharded = sh;
    return tot;
}

static void inst_price(const IlpSeg *s, const IlpInst *x, int k, IlpVals *v)
{
    memset(v, 0, sizeof *v);
    if (x->node < 0)
        return;
    const IrGraph *g = s->g;
    const IrNode *n = &g->nodes[x->node];
    const PlanStrategy *st = &x->strat[k];
    const PlanMesh *m = &s->q.mesh;
    PassNodeCost nc;
    memset(&nc, 0, sizeof nc);
    s->costs->node(s->ctx, g, n, m, st, s->dim_size, &nc);
    double c = x->count;
    v->q[ILP_FWD] = c * nc.fwd_s;
    v->q[ILP_BWD] = c * (nc.bwd_s + (x->recompute ? nc.fwd_s : 0));
    v->q[ILP_SYNC] = c * s->costs->param_sync(s->ctx, g, n, m, st, s->q.zero, s->q.num_micro);
    v->q[ILP_MEM_PARAM] = c * s->costs->param_bytes(s->ctx, g, n, m, st, s->q.zero);
    v->q[ILP_MEM_ACT] =
        c * s->costs->saved(s->ctx, g, n, m, st, s->dim_size, s->q.recompute) * s->q.inflight;
}

/* Per link: classes of the source's and the reader's group strategies, and
 * the shardings of each class. */
typedef struct {
    int *cu, *cv;             /* [source group's k], [reader group's k] */
    int nI, nJ;
    PlanSharding *S;          /* [nI] source output sharding */
    PlanSharding *X, *G;      /* [nJ] wanted input sharding, gradient sharding */
    IlpVals *val;             /* [nI * nJ] accumulated prices */
    bool regather;            /* reader saves t for backward and is not recomputed: its
                                 backward reshards t again from the kept copy */
    bool recompute;           /* reader is recomputed */
    bool internal;            /* source and reader are one merge group */
    bool used;                /* a group item refers to it */
} LinkInfo;

static int find_sh(const PlanSharding *v, int n, const PlanSharding *x)
{
    for (int i = 0; i < n; i++)
        if (plan_sharding_eq(&v[i], x))
            return i;
    return -1;
}

static void link_info(const IlpSeg *s, int li, LinkInfo *L, IrArena *A)
{
    const IlpLink *l = &s->link[li];
    const IlpInst *src = &s->inst[l->src], *dst = &s->inst[l->dst];
    int ku = leader(s, l->src)->nstrat, kv = leader(s, l->dst)->nstrat;
    L->cu = ir_alloc(A, (size_t)ku * sizeof *L->cu);
    L->cv = ir_alloc(A, (size_t)kv * sizeof *L->cv);
    L->S = ir_alloc(A, (size_t)ku * sizeof *L->S);
    L->X = ir_alloc(A, (size_t)kv * sizeof *L->X);
    L->G = ir_alloc(A, (size_t)kv * sizeof *L->G);
    L->nI = L->nJ = 0;
    for (int gi = 0; gi < ku; gi++) {
        PlanSharding sh = ilp_out_sharding(s, l->src, l->out, ilp_own(s, l->src, gi));
        int c = find_sh(L->S, L->nI, &sh);
        if (c < 0) {
            c = L->nI++;
            L->S[c] = sh;
        }
        L->cu[gi] = c;
    }
    for (int gj = 0; gj < kv; gj++) {
        PlanSharding x, gr;
        ilp_in_sharding(s, l->dst, l->in, ilp_own(s, l->dst, gj), &x, &gr);
        int c = -1;
        for (int k = 0; k < L->nJ && c < 0; k++)
            if (plan_sharding_eq(&L->X[k], &x) && plan_sharding_eq(&L->G[k], &gr))
                c = k;
        if (c < 0) {
            c = L->nJ++;
            L->X[c] = x;
            L->G[c] = gr;
        }
        L->cv[gj] = c;
    }
    L->val = ir_alloc(A, (size_t)(L->nI * L->nJ) * sizeof *L->val);
    L->recompute = dst->recompute;
    L->regather = dst->node >= 0 && !dst->recompute &&
                  (ir_ops[s->g->nodes[dst->node].op].saves & IR_SAVE_IN(l->in));
    L->internal = src->group == dst->group;
}

static PlanSharding no_partial(PlanSharding x)
{
    x.partial = 0;
    return x;
}

/* A max-group waiting for its edges to exist. */
typedef struct {
    IlpVals w;
    int nitems;
    int *link;
    double **ind;
} Pending;

typedef struct {
    int n, cap;
    Pending *v;
    IrArena *mem;             /* ilp_build's working arrays, freed whole when it is done (a search
                                 builds a problem 250,000 times: a malloc and free per array was
                                 over 1% of it) */
} PendingVec;

static void pend(PendingVec *pv, const IlpSeg *s, LinkInfo *info, const IlpUse *u, int I, double w,
                 int q, int kind, const PlanSharding *want)
{
    /* kind 0: readers wanting `want` (any); 1: those of them recomputed;
     * 2: those of them that reshard again in backward (they save t); 3:
     * readers giving gradient `want`. */
    Pending p = {{{0}}, 0, NULL, NULL};
    p.w.q[q] = w;
    double *ind = NULL; /* the next item's, kept for the next link when it goes unused */
    int ncap = 0;
    for (int k = 0; k < u->nlinks; k++) {
        LinkInfo *L = &info[u->links[k]];
        if ((kind == 1 && !L->recompute) || (kind == 2 && !L->regather))
            continue;
        if (!ind || L->nI * L->nJ > ncap) {
            ncap = L->nI * L->nJ;
            ind = ir_alloc(pv->mem, (size_t)ncap * sizeof *ind);
        }
        bool any = false;
        for (int J = 0; J < L->nJ; J++) {
            const PlanSharding *sh = kind == 3 ? &L->G[J] : &L->X[J];
            if (plan_sharding_eq(sh, want)) {
                ind[I * L->nJ + J] = 1;
                any = true;
            }
        }
        if (!any)
            continue; /* (ind still all zero) */
        if (!p.link) {
            p.link = ir_alloc(pv->mem, (size_t)u->nlinks * sizeof *p.link);
            p.ind = ir_alloc(pv->mem, (size_t)u->nlinks * sizeof *p.ind);
        }
        p.link[p.nitems] = u->links[k];
        p.ind[p.nitems++] = ind;
        ind = NULL;
        L->used = true;
    }
    (void)s;
    if (p.nitems == 0)
        return;
    if (pv->n == pv->cap) {
        pv->cap = pv->cap ? 2 * pv->cap : 64;
        pv->v = ir_xrealloc(pv->v, (size_t)pv->cap * sizeof *pv->v);
    }
    pv->v[pv->n++] = p;
}

/* Price one use: a lone link gets everything on its pair table; shared links
 * get their memory there and the shared work as pending groups. */
static void price_use(const IlpSeg *s, LinkInfo *info, const IlpUse *u, PendingVec *pv)
{
    const IlpLink *l0 = &s->link[u->links[0]];
    int t = l0->tensor;
    double cnt = u->count;
    double eb = pass_elem_bytes(s->ctx, s->g->tensors[t].dtype);
    for (int k = 0; k < u->nlinks; k++) {
        int li = u->links[k];
        LinkInfo *L = &info[li];
        const IlpLink *l = &s->link[li];
        for (int I = 0; I < L->nI; I++) {
            PlanSharding T = no_partial(L->S[I]);
            for (int J = 0; J < L->nJ; J++) {
                IlpVals *v = &L->val[I * L->nJ + J];
                double redo;
                int64_t sharded;
                double f = reshard_s(s, t, &L->S[I], &L->X[J], &redo, &sharded);
                if (l->saver && L->regather && sharded > 0) {
                    /* The saver counted its copy at its own width (a
                     * low-precision GEMM's cast input: the format's). */
                    int dn = s->inst[l->dst].node;
                    double seb = dn >= 0 ? pass_saved_elem_bytes(s->ctx, s->g, &s->g->nodes[dn], l->in) : eb;
                    int64_t full = plan_local_numel(s->g, t, &s->q.mesh, &L->X[J], s->dim_size);
                    v->q[ILP_MEM_ACT] -= cnt * (double)(full - sharded) * seb * s->q.inflight;
                }
                if (u->nlinks > 1)
                    continue;
                double b = reshard_s(s, t, &L->G[J], &T, NULL, NULL);
                v->q[ILP_FWD] += cnt * f;
                v->q[ILP_BWD] += cnt * (b + (L->recompute ? f : 0) + (L->regather ? redo : 0));
            }
        }
    }
    if (u->nlinks == 1)
        return;
    /* Shared: distinct wanted and gradient shardings over the readers. */
    int cap = 0;
    for (int k = 0; k < u->nlinks; k++)
        cap += info[u->links[k]].nJ;
    PlanSharding *xs = ir_xmalloc((size_t)cap * sizeof *xs), *gs = ir_xmalloc((size_t)cap * sizeof *gs);
    int nx = 0, ng = 0;
    for (int k = 0; k < u->nlinks; k++) {
        const LinkInfo *L = &info[u->links[k]];
        for (int J = 0; J < L->nJ; J++) {
            if (find_sh(xs, nx, &L->X[J]) < 0)
                xs[nx++] = L->X[J];
            if (find_sh(gs, ng, &L->G[J]) < 0)
                gs[ng++] = L->G[J];
        }
    }
    const LinkInfo *L0 = &info[u->links[0]];
    for (int I = 0; I < L0->nI; I++) {
        PlanSharding T = no_partial(L0->S[I]);
        for (int x = 0; x < nx; x++) {
            double redo;
            double f = reshard_s(s, t, &L0->S[I], &xs[x], &redo, NULL);
            if (f > 0) {
                pend(pv, s, info, u, I, cnt * f, ILP_FWD, 0, &xs[x]);
                pend(pv, s, info, u, I, cnt * f, ILP_BWD, 1, &xs[x]);
            }
            if (redo > 0)
                pend(pv, s, info, u, I, cnt * redo, ILP_BWD, 2, &xs[x]);
        }
        for (int x = 0; x < ng; x++) {
            double b = reshard_s(s, t, &gs[x], &T, NULL, NULL);
            if (b > 0)
                pend(pv, s, info, u, I, cnt * b, ILP_BWD, 3, &gs[x]);
        }
    }
    free(xs);
    free(gs);
}

static bool all_zero(const IlpVals *v, int n)
{
    for (int i = 0; i < n; i++)
        for (int q = 0; q < ILP_NQ; q++)
            if (v[i].q[q] != 0)
                return false;
    return true;
}

void ilp_build(IlpSeg *s)
{
    IlpProblem *p = s->prob = ilp_new();
    p->obj_w[ILP_FWD] = p->obj_w[ILP_BWD] = s->q.num_micro;
    p->obj_w[ILP_SYNC] = 1;
    p->budget = s->q.budget > 0 ? s->q.budget : INFINITY;

    /* Core nodes: one per merge group, its members' prices summed. */
    s->group_of = ir_xmalloc((size_t)s->ninst * sizeof *s->group_of);
    IrArena *A = ir_arena_new();
    IlpVals **gval = ir_alloc(A, (size_t)s->ninst * sizeof *gval);
    s->ngroups = 0;
    for (int x = 0; x < s->ninst; x++) {
        s->group_of[x] = -1;
        if (s->inst[x].group == x) {
            s->group_of[x] = s->ngroups++;
            gval[x] = ir_alloc(A, (size_t)s->inst[x].nstrat * sizeof **gval);
        }
    }
    for (int x = 0; x < s->ninst; x++) {
        const IlpInst *in = &s->inst[x];
        const IlpInst *ld = leader(s, x);
        IlpVals v;
        for (int gi = 0; gi < ld->nstrat; gi++) {
            inst_price(s, in, ilp_own(s, x, gi), &v);
            for (int q = 0; q < ILP_NQ; q++)
                gval[in->group][gi].q[q] += v.q[q];
        }
    }
    /* Links priced per use. */
    LinkInfo *info = ir_alloc(A, ((size_t)s->nlinks + 1) * sizeof *info);
    for (int li = 0; li < s->nlinks; li++)
        link_info(s, li, &info[li], A);
    PendingVec pv = {0, 0, NULL, A};
    for (int ui = 0; ui < s->nuses; ui++)
        price_use(s, info, &s->use[ui], &pv);
    /* Links inside a merge group price their group's strategies directly. */
    for (int li = 0; li < s->nlinks; li++) {
        LinkInfo *L = &info[li];
        if (!L->internal)
            continue;
        const IlpLink *l = &s->link[li];
        int grp = s->inst[l->src].group;
        for (int gi = 0; gi < s->inst[grp].nstrat; gi++)
            for (int q = 0; q < ILP_NQ; q++)
                gval[grp][gi].q[q] += L->val[L->cu[gi] * L->nJ + L->cv[gi]].q[q];
    }
    for (int x = 0; x < s->ninst; x++)
        if (s->inst[x].group == x)
            ilp_add_node(p, s->inst[x].nstrat, gval[x]);
    /* Edges: links between groups that carry a price or a group's item. */
    for (int li = 0; li < s->nlinks; li++) {
        LinkInfo *L = &info[li];
        IlpLink *l = &s->link[li];
        l->edge = -1;
        if (L->internal || (!L->used && all_zero(L->val, L->nI * L->nJ)))
            continue;
        l->edge = ilp_add_edge(p, s->group_of[s->inst[l->src].group],
                               s->group_of[s->inst[l->dst].group], L->cu, L->cv, L->val);
    }
    for (int i = 0; i < pv.n; i++) {
        Pending *pg = &pv.v[i];
        int gi = ilp_add_group(p, &pg->w);
        for (int k = 0; k < pg->nitems; k++) {
            if (s->link[pg->link[k]].edge < 0)
                ir_die("ilp: group item on a link without an edge");
            ilp_add_item(p, gi, s->link[pg->link[k]].edge, pg->ind[k]);
        }
    }
    free(pv.v);
    ir_arena_free(A);
}
