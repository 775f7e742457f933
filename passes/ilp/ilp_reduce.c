/* ilp_reduce.c: exact shrinking of a core problem before GLPK sees it.
 *
 * Strategy i of node u is dominated by strategy d when swapping i for d in
 * any choice can neither raise the objective nor the memory: d's node price
 * and memory are no larger, and on every edge at u, against every class of
 * the other end, d's class prices no more, takes no more memory, and weighs
 * no more in any group item. Group weights are non-negative and a group
 * takes the largest of its items, so the swap lowers or keeps every term.
 * Dropping i therefore keeps an optimal choice; of two equal strategies the
 * later goes. Dropping strategies can make others dominated (fewer classes
 * to compare against), so it repeats until nothing changes. */
#include "ilp/ilp.h"

#include <stdlib.h>
#include <string.h>

static double dot(const double *w, const IlpVals *v)
{
    double s = 0;
    for (int q = 0; q < ILP_NQ; q++)
        s += w[q] * v->q[q];
    return s;
}

/* Edge e's class pair (I, J) seen from one end: `side` 0 is u (row I). */
static int pair(const IlpEdge *e, int side, int mine, int other)
{
    return side == 0 ? mine * e->nJ + other : other * e->nJ + mine;
}

typedef struct {
    int n, *edge, *side;     /* edges at a node and which end it is */
} Inc;

/* Does class cd of node u's end of edge e weakly beat class ci against every
 * live class of the other end? */
static bool class_beats(const IlpProblem *p, const IlpEdge *e, int side, int cd, int ci,
                        const char *live_other, int **items, const int *nitems, int ei)
{
    int nother = side == 0 ? e->nJ : e->nI;
    for (int o = 0; o < nother; o++) {
        if (!live_other[o])
            continue;
        const IlpVals *vd = &e->val[pair(e, side, cd, o)], *vi = &e->val[pair(e, side, ci, o)];
        if (dot(p->obj_w, vd) > dot(p->obj_w, vi) || dot(p->mem_w, vd) > dot(p->mem_w, vi))
            return false;
        for (int k = 0; k < nitems[ei]; k++) {
            const IlpGroup *gr = &p->groups[items[ei][2 * k]];
            const double *ind = gr->items[items[ei][2 * k + 1]].ind;
            if (ind[pair(e, side, cd, o)] > ind[pair(e, side, ci, o)])
                return false;
        }
    }
    return true;
}

int ilp_dominance(const IlpProblem *p, int **dom)
{
    /* Incidence lists and, per edge, the group items on it, each counted
     * first and laid out in one block (a search reduces thousands of
     * problems: growing every list by one was a million reallocs). */
    Inc *inc = ir_xcalloc((size_t)p->nnodes + 1, sizeof *inc);
    int *nitems = ir_xcalloc((size_t)p->nedges + 1, sizeof *nitems);
    long ni = 0;
    for (int i = 0; i < p->nedges; i++)
        inc[p->edges[i].u].n++, inc[p->edges[i].v].n++;
    for (int g = 0; g < p->ngroups; g++)
        for (int k = 0; k < p->groups[g].nitems; k++)
            nitems[p->groups[g].items[k].edge]++, ni++;
    int *incb = ir_xmalloc(sizeof(int) * (4 * (size_t)p->nedges + 1));
    for (int u = 0, at = 0; u < p->nnodes; u++) {
        inc[u].edge = incb + at, at += inc[u].n;
        inc[u].side = incb + at, at += inc[u].n;
        inc[u].n = 0;
    }
    for (int i = 0; i < p->nedges; i++)
        for (int side = 0; side < 2; side++) {
            Inc *x = &inc[side == 0 ? p->edges[i].u : p->edges[i].v];
            x->edge[x->n] = i;
            x->side[x->n++] = side;
        }
    int **items = ir_xcalloc((size_t)p->nedges + 1, sizeof *items);
    int *itemb = ir_xmalloc(sizeof(int) * (2 * (size_t)ni + 1));
    for (int e = 0, at = 0; e < p->nedges; e++)
        items[e] = itemb + at, at += 2 * nitems[e], nitems[e] = 0;
    for (int g = 0; g < p->ngroups; g++)
        for (int k = 0; k < p->groups[g].nitems; k++) {
            int e = p->groups[g].items[k].edge;
            items[e][2 * nitems[e]] = g;
            items[e][2 * nitems[e] + 1] = k;
            nitems[e]++;
        }
    /* Live classes of each edge end, from the live strategies. */
    char **lc[2];
    size_t nc = 0;
    for (int i = 0; i < p->nedges; i++)
        nc += (size_t)p->edges[i].nI + (size_t)p->edges[i].nJ;
    char *lcb = ir_xcalloc(nc + 1, 1);
    for (int side = 0; side < 2; side++)
        lc[side] = ir_xcalloc((size_t)p->nedges + 1, sizeof *lc[side]);
    for (int i = 0, at = 0; i < p->nedges; i++) {
        lc[0][i] = lcb + at, at += p->edges[i].nI;
        lc[1][i] = lcb + at, at += p->edges[i].nJ;
    }
    int removed = 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < p->nedges; i++) {
            const IlpEdge *e = &p->edges[i];
            memset(lc[0][i], 0, (size_t)e->nI);
            memset(lc[1][i], 0, (size_t)e->nJ);
            for (int a = 0; a < p->nodes[e->u].k; a++)
                lc[0][i][e->cu[a]] |= dom[e->u][a] < 0;
            for (int b = 0; b < p->nodes[e->v].k; b++)
                lc[1][i][e->cv[b]] |= dom[e->v][b] < 0;
        }
        for (int u = 0; u < p->nnodes; u++) {
            const IlpNode *n = &p->nodes[u];
            for (int si = 0; si < n->k; si++) {
                if (dom[u][si] >= 0)
                    continue;
                for (int d = 0; d < n->k; d++) {
                    if (d == si || dom[u][d] >= 0)
                        continue;
                    const IlpVals *vd = &n->val[d], *vi = &n->val[si];
                    double od = dot(p->obj_w, vd), oi = dot(p->obj_w, vi);
                    double md = dot(p->mem_w, vd), mi = dot(p->mem_w, vi);
                    if (od > oi || md > mi)
                        continue;
                    bool equal = od == oi && md == mi;
                    bool ok = true;
                    for (int k = 0; k < inc[u].n && ok; k++) {
                        int ei = inc[u].edge[k], side = inc[u].side[k];
                        const IlpEdge *e = &p->edges[ei];
                        int cd = side == 0 ? e->cu[d] : e->cv[d];
                        int ci = side == 0 ? e->cu[si] : e->cv[si];
                        if (cd == ci)
                            continue;
                        equal = false;
                        ok = class_beats(p, e, side, cd, ci, lc[1 - side][ei], items, nitems, ei);
                    }
                    /* Of two interchangeable strategies keep the first. */
                    if (ok && (!equal || d < si)) {
                        dom[u][si] = d;
                        removed++;
                        changed = true;
                        break;
                    }
                }
            }
        }
    }
    free(incb);
    free(itemb);
    free(lcb);
    free(inc);
    free(items);
    free(nitems);
    free(lc[0]);
    free(lc[1]);
    return removed;
}

IlpProblem *ilp_restrict(const IlpProblem *p, int *const *dom, int **map)
{
    IlpProblem *r = ilp_new();
    memcpy(r->obj_w, p->obj_w, sizeof r->obj_w);
    memcpy(r->mem_w, p->mem_w, sizeof r->mem_w);
    r->budget = p->budget;
    /* scratch for the largest node and edge (a reduced edge's classes are
     * at most the original's), made once */
    size_t maxk = 1, maxc = 1, maxv = 1;
    for (int u = 0; u < p->nnodes; u++)
        maxk = (size_t)p->nodes[u].k > maxk ? (size_t)p->nodes[u].k : maxk;
    for (int i = 0; i < p->nedges; i++) {
        const IlpEdge *e = &p->edges[i];
        size_t c = (size_t)(e->nI > e->nJ ? e->nI : e->nJ), v = (size_t)e->nI * (size_t)e->nJ;
        maxc = c > maxc ? c : maxc;
        maxv = v > maxv ? v : maxv;
    }
    IlpVals *buf = ir_xmalloc((maxk > maxv ? maxk : maxv) * sizeof *buf);
    int *cu = ir_xmalloc(maxk * sizeof *cu), *cv = ir_xmalloc(maxk * sizeof *cv);
    int *ren[2] = {ir_xmalloc(maxc * sizeof *ren[0]), ir_xmalloc(maxc * sizeof *ren[1])};
    for (int u = 0; u < p->nnodes; u++) {
        const IlpNode *n = &p->nodes[u];
        map[u] = ir_xmalloc((size_t)n->k * sizeof **map);
        int k = 0;
        for (int i = 0; i < n->k; i++)
            if (dom[u][i] < 0) {
                map[u][k] = i;
                buf[k++] = n->val[i];
            }
        if (k == 0)
            ir_die("ilp_restrict: node %d keeps no strategy", u);
        ilp_add_node(r, k, buf);
    }
    int *eidx = ir_xmalloc((size_t)(p->nedges + 1) * sizeof *eidx);
    for (int i = 0; i < p->nedges; i++) {
        const IlpEdge *e = &p->edges[i];
        int ku = r->nodes[e->u].k, kv = r->nodes[e->v].k;
        for (int c = 0; c < e->nI; c++)
            ren[0][c] = -1;
        for (int c = 0; c < e->nJ; c++)
            ren[1][c] = -1;
        int nI = 0, nJ = 0;
        for (int a = 0; a < ku; a++) {
            int c = e->cu[map[e->u][a]];
            if (ren[0][c] < 0)
                ren[0][c] = nI++;
            cu[a] = ren[0][c];
        }
        for (int b = 0; b < kv; b++) {
            int c = e->cv[map[e->v][b]];
            if (ren[1][c] < 0)
                ren[1][c] = nJ++;
            cv[b] = ren[1][c];
        }
        for (int I = 0; I < e->nI; I++)
            for (int J = 0; J < e->nJ; J++)
                if (ren[0][I] >= 0 && ren[1][J] >= 0)
                    buf[ren[0][I] * nJ + ren[1][J]] = e->val[I * e->nJ + J];
        eidx[i] = ilp_add_edge(r, e->u, e->v, cu, cv, buf);
    }
    double *ind = ir_xmalloc(maxv * sizeof *ind);
    for (int g = 0; g < p->ngroups; g++) {
        const IlpGroup *gr = &p->groups[g];
        int rg = ilp_add_group(r, &gr->w);
        for (int k = 0; k < gr->nitems; k++) {
            const IlpEdge *e = &p->edges[gr->items[k].edge];
            const IlpEdge *re = &r->edges[eidx[gr->items[k].edge]];
            /* Map each reduced class back through a live strategy. */
            for (int a = 0; a < r->nodes[e->u].k; a++)
                for (int b = 0; b < r->nodes[e->v].k; b++) {
                    int I = e->cu[map[e->u][a]], J = e->cv[map[e->v][b]];
                    ind[re->cu[a] * re->nJ + re->cv[b]] = gr->items[k].ind[I * e->nJ + J];
                }
            ilp_add_item(r, rg, eidx[gr->items[k].edge], ind);
        }
    }
    free(ind);
    free(eidx);
    free(buf);
    free(cu);
    free(cv);
    free(ren[0]);
    free(ren[1]);
    return r;
}
