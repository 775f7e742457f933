/* search_edges.c: the resharding inside a piece, as shares of its nodes'
 * strategies, for the per-mesh floor (search_prune.c, src_group_floor).
 *
 * pass_predict charges every edge into a node (tensor t from its producer
 * into input i) the collectives plan_reshard finds from the producer's
 * layout of t to the one the node reads, forward, and from the node's
 * gradient layout back to the producer's without partial sums, backward
 * (predict.c, edge_in); a later reader wanting a layout an earlier reader
 * of the stage already paid for pays nothing, so the k readers of t in one
 * stage pay one reshard per distinct layout, at least the costliest
 * reader's, which is at least the mean: each reader's edge counts 1/k of
 * its least price over the pairs of layouts the producer's and the
 * reader's strategies give (forward and backward alike). Only edges whose
 * producer is in the same piece are counted (its readers there share its
 * stage): pass_predict charges an edge to the reader's piece, and the floor
 * must bound each piece (the partition sums pieces into ranks).
 *
 * A sum of per-node minima stays a bound when each edge's price is split
 * between its endpoints: with A a plan's strategies,
 *   sum_n kern(A_n) + sum_e edge_e(A) >= sum_n [kern(A_n) + sum_{e at n} e's
 *   half of min over the other end's layouts]
 *   >= sum_n min_s [kern(s) + the same for s].
 * So node n's share for strategy s is, per edge it reads, half the least
 * price given s's input layout, and per edge it produces, half the least
 * price given s's output layout. */
#include "search/src.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The share of the resharding pass_predict leaves on the stage times: a
 * tensor-parallel overlap hides part of a transfer (edge_overlap: the
 * exposed part plus the overlap slowdown times the rest, at least
 * min(1, slowdown) of it), reshard_overlap a fraction of what is left, and
 * the expert all-to-all overlap may hide a layer's whole pre-dispatch part,
 * its resharding included (a2a_pair): nothing is counted then. */
static double edge_factor(const Src *s)
{
    const PassStack *st = &s->c->st;
    if (st->moe_a2a_overlap)
        return 0;
    double f = 1 - st->reshard_overlap;
    if (st->tp_overlap != PASS_TP_OVERLAP_NONE)
        f *= fmin(1, pass_overlap_slowdown(&s->c->cl->gpu));
    return fmax(0, f);
}

/* The readers of t in piece P (t's producer is in P). */
static int readers(const IrGraph *g, const IrPiece *P, int t)
{
    int k = 0;
    for (int j = g->tensors[t].producer + 1; j < P->first + P->count; j++) {
        bool r = false;
        for (int i = 0; i < g->nodes[j].nin; i++)
            r |= g->nodes[j].in[i] == t;
        k += r;
    }
    return k;
}

/* The class of x among v[0..*n) (added when new). */
static int sh_class(PlanSharding *v, int *n, const PlanSharding *x)
{
    for (int i = 0; i < *n; i++)
        if (plan_sharding_eq(&v[i], x))
            return i;
    v[*n] = *x;
    return (*n)++;
}

/* The edge of t into reader c's input slot: per producer strategy and per
 * reader strategy, half the least price given its end's layout. */
static void edge_shares(Src *s, const SrcGroup *G, const int64_t *ds, int t, const IrNode *pn,
                        const PlanStrategy *pst, int pns, double *pshare, const IrNode *c, int slot,
                        const PlanStrategy *cst, int cns, double *cshare, double f)
{
    const IrGraph *g = s->g;
    int out = 0;
    while (out < pn->nout && pn->out[out] != t)
        out++;
    if (out == pn->nout)
        return;
    int *cu = ir_xmalloc(sizeof(int) * (size_t)(pns + cns));
    int *cv = cu + pns;
    PlanSharding *S = ir_xmalloc(sizeof(PlanSharding) * (size_t)(pns + 2 * cns));
    PlanSharding *X = S + pns, *Gr = X + cns;
    int nI = 0, nJ = 0;
    for (int k = 0; k < pns; k++) {
        PlanSharding o[IR_MAX_OUT];
        plan_shard_io(g, pn, &pst[k], NULL, o);
        cu[k] = sh_class(S, &nI, &o[out]);
    }
    for (int k = 0; k < cns; k++) {
        PlanSharding in[IR_MAX_IN];
        plan_shard_io(g, c, &cst[k], in, NULL);
        PlanSharding gr = plan_shard_grad_in(g, c, &cst[k], slot);
        int j = 0;
        while (j < nJ && !(plan_sharding_eq(&X[j], &in[slot]) && plan_sharding_eq(&Gr[j], &gr)))
            j++;
        if (j == nJ)
            X[nJ] = in[slot], Gr[nJ++] = gr;
        cv[k] = j;
    }
    double *rowmin = ir_xmalloc(sizeof(double) * (size_t)(nI + nJ)), *colmin = rowmin + nI;
    src_edge_mins(s, &G->mesh, t, S, nI, X, Gr, nJ, ds, f, rowmin, colmin);
    /* The split: in proportion to what each end's strategies see on
     * average (a producer whose every layout some reader takes for free
     * gives the whole edge to the reader). It depends on the prices only,
     * never on a plan's choice, so the sum of minima stays a bound. */
    double mp = 0, mc = 0;
    for (int k = 0; k < pns; k++)
        mp += rowmin[cu[k]] / pns;
    for (int k = 0; k < cns; k++)
        mc += colmin[cv[k]] / cns;
    double alpha = mp + mc > 0 ? mp / (mp + mc) : 0.5;
    for (int k = 0; k < pns; k++)
        pshare[k] += alpha * rowmin[cu[k]];
    for (int k = 0; k < cns; k++)
        cshare[k] += (1 - alpha) * colmin[cv[k]];
    free(rowmin);
    free(S);
    free(cu);
}

void src_edge_shares(Src *s, const SrcGroup *G, int p, const int64_t *ds, PlanStrategy *const *st,
                     const int *ns, double *const *share)
{
    const IrGraph *g = s->g;
    const IrPiece *P = &g->pieces[p];
    for (int a = 0; a < P->count; a++)
        memset(share[a], 0, sizeof(double) * (size_t)(ns[a] > 0 ? ns[a] : 1));
    double f = edge_factor(s);
    if (f <= 0)
        return;
    for (int a = 0; a < P->count; a++) {
        const IrNode *n = &g->nodes[P->first + a];
        for (int i = 0; i < n->nin; i++) {
            int t = n->in[i];
            if (t < 0 || g->tensors[t].role == IR_PARAM || g->tensors[t].role == IR_INPUT)
                continue;
            bool dup = false; /* pass_predict charges a repeated input once */
            for (int e = 0; e < i; e++)
                dup |= n->in[e] == t;
            int pid = g->tensors[t].producer;
            if (dup || pid < P->first || pid >= n->id)
                continue;
            int k = readers(g, P, t);
            int b = pid - P->first;
            if (ns[a] < 1 || ns[b] < 1)
                continue;
            edge_shares(s, G, ds, t, &g->nodes[pid], st[b], ns[b], share[b], n, i, st[a], ns[a], share[a], f / k);
        }
    }
}
