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

/* Node layouts per strategy (plan_shard_io), made once per node of the
 * piece when first asked: a node's layouts served every edge it is an end
 * of, each made again (two in three plan_shard_io calls of the floor).
 * Packed (nin inputs, then nout outputs a strategy) to stay in cache. */
typedef struct NodeIo {
    PlanSharding *io;             /* [ns * (nin + nout)] */
    bool made;
} NodeIo;

static const PlanSharding *node_io(const IrGraph *g, const IrNode *n, const PlanStrategy *st, int ns, NodeIo *x)
{
    if (!x->made) {
        size_t w = (size_t)(n->nin + n->nout);
        for (int k = 0; k < ns; k++)
            plan_shard_io(g, n, &st[k], &x->io[k * w], &x->io[k * w + (size_t)n->nin]);
        x->made = true;
    }
    return x->io;
}

/* Working arrays of one edge, for strategies up to m a side. */
typedef struct EdgeBuf {
    int *cu, *cv;                 /* [m] each */
    PlanSharding *S, *X, *Gr;     /* [m] each */
    double *rowmin, *colmin;      /* [m] each */
} EdgeBuf;

/* The edge of t into reader c's input slot: per producer strategy and per
 * reader strategy, half the least price given its end's layout (pio and
 * cio: the ends' layouts per strategy, node_io). */
static void edge_shares(Src *s, const SrcGroup *G, const int64_t *ds, int t, const IrNode *pn,
                        const PlanSharding *pio, int pns, double *pshare, const IrNode *c, int slot,
                        const PlanStrategy *cst, const PlanSharding *cio, int cns, double *cshare, double f,
                        const EdgeBuf *E)
{
    const IrGraph *g = s->g;
    int out = 0;
    while (out < pn->nout && pn->out[out] != t)
        out++;
    if (out == pn->nout)
        return;
    int *cu = E->cu, *cv = E->cv;
    PlanSharding *S = E->S, *X = E->X, *Gr = E->Gr;
    int nI = 0, nJ = 0;
    size_t pw = (size_t)(pn->nin + pn->nout), cw = (size_t)(c->nin + c->nout);
    for (int k = 0; k < pns; k++)
        cu[k] = sh_class(S, &nI, &pio[k * pw + (size_t)pn->nin + (size_t)out]);
    for (int k = 0; k < cns; k++) {
        const PlanSharding *in = &cio[k * cw];
        PlanSharding gr = plan_shard_grad_in(g, c, &cst[k], slot);
        int j = 0;
        while (j < nJ && !(plan_sharding_eq(&X[j], &in[slot]) && plan_sharding_eq(&Gr[j], &gr)))
            j++;
        if (j == nJ)
            X[nJ] = in[slot], Gr[nJ++] = gr;
        cv[k] = j;
    }
    double *rowmin = E->rowmin, *colmin = E->colmin;
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
    /* one block for the nodes' layouts and an edge's working arrays */
    size_t nio = 0;
    int m = 1;
    for (int a = 0; a < P->count; a++) {
        const IrNode *n = &g->nodes[P->first + a];
        nio += (size_t)(ns[a] > 0 ? ns[a] : 0) * (size_t)(n->nin + n->nout);
        m = ns[a] > m ? ns[a] : m;
    }
    NodeIo *io = ir_xcalloc((size_t)P->count + 1, sizeof *io);
    char *blk = ir_xmalloc(sizeof(PlanSharding) * (nio + 3 * (size_t)m) + sizeof(int) * 2 * (size_t)m +
                           sizeof(double) * 2 * (size_t)m);
    PlanSharding *sh = (PlanSharding *)blk;
    EdgeBuf E;
    E.rowmin = (double *)(blk + sizeof(PlanSharding) * (nio + 3 * (size_t)m));
    E.colmin = E.rowmin + m;
    E.cu = (int *)(E.colmin + m);
    E.cv = E.cu + m;
    for (int a = 0; a < P->count; a++) {
        const IrNode *n = &g->nodes[P->first + a];
        io[a].io = sh;
        sh += (size_t)(ns[a] > 0 ? ns[a] : 0) * (size_t)(n->nin + n->nout);
    }
    E.S = sh, E.X = sh + m, E.Gr = sh + 2 * m;
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
            const PlanSharding *pio = node_io(g, &g->nodes[pid], st[b], ns[b], &io[b]);
            const PlanSharding *cio = node_io(g, n, st[a], ns[a], &io[a]);
            edge_shares(s, G, ds, t, &g->nodes[pid], pio, ns[b], share[b], n, i, st[a], cio, ns[a], share[a], f / k,
                        &E);
        }
    }
    free(blk);
    free(io);
}
