/* ilp_local.c: the terms of ilp_eval that a few nodes enter (their prices,
 * their edges', the max-groups with an item on those edges), so that a
 * move of those nodes is priced without summing the whole problem again
 * (ilp_canon.c, ilp_repair.c). A move of the nodes changes no other term,
 * so the difference of two local sums is the difference of the totals. */
#include "ilp/ilp.h"

#include <stdlib.h>
#include <string.h>

void ilp_local_init(IlpLocal *L, const IlpProblem *p)
{
    memset(L, 0, sizeof *L);
    L->p = p;
    L->estart = ir_xcalloc((size_t)p->nnodes + 2, sizeof *L->estart);
    for (int i = 0; i < p->nedges; i++) {
        L->estart[p->edges[i].u + 1]++;
        if (p->edges[i].v != p->edges[i].u)
            L->estart[p->edges[i].v + 1]++;
    }
    for (int u = 0; u < p->nnodes; u++)
        L->estart[u + 1] += L->estart[u];
    L->edges = ir_xmalloc((size_t)(L->estart[p->nnodes] + 1) * sizeof *L->edges);
    int *fill = ir_xcalloc((size_t)p->nnodes + 1, sizeof *fill);
    for (int i = 0; i < p->nedges; i++) {
        int u = p->edges[i].u, v = p->edges[i].v;
        L->edges[L->estart[u] + fill[u]++] = i;
        if (v != u)
            L->edges[L->estart[v] + fill[v]++] = i;
    }
    free(fill);
    for (int q = 0; q < ILP_NQ; q++) {
        bool only = true;
        for (int i = 0; i < p->nedges && only; i++)
            for (int k = 0; k < p->edges[i].nI * p->edges[i].nJ; k++)
                only &= p->edges[i].val[k].q[q] == 0;
        for (int g = 0; g < p->ngroups && only; g++)
            only &= p->groups[g].w.q[q] == 0;
        L->node_only[q] = only;
    }
    /* Per edge, the groups with an item on it (a group once per edge). */
    L->gstart = ir_xcalloc((size_t)p->nedges + 2, sizeof *L->gstart);
    int nitems = 0;
    for (int g = 0; g < p->ngroups; g++)
        nitems += p->groups[g].nitems;
    L->groups = ir_xmalloc((size_t)(nitems + 1) * sizeof *L->groups);
    L->mark = ir_xcalloc((size_t)(p->nedges + p->ngroups) + 1, sizeof *L->mark);
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        for (int i = 0; i < p->nedges; i++) {
            if (pass)
                n = L->gstart[i];
            for (int g = 0; g < p->ngroups; g++)
                for (int k = 0; k < p->groups[g].nitems; k++)
                    if (p->groups[g].items[k].edge == i) {
                        if (pass)
                            L->groups[n] = g;
                        n++;
                        break;
                    }
            if (!pass)
                L->gstart[i + 1] = n;
        }
    }
}

void ilp_local_free(IlpLocal *L)
{
    free(L->estart);
    free(L->edges);
    free(L->gstart);
    free(L->groups);
    free(L->mark);
    memset(L, 0, sizeof *L);
}

static void add(IlpVals *t, const IlpVals *v, double f)
{
    for (int q = 0; q < ILP_NQ; q++)
        t->q[q] += f * v->q[q];
}

IlpVals ilp_local_sum(IlpLocal *L, const int *c, const int *set, int n)
{
    const IlpProblem *p = L->p;
    IlpVals t = {{0}};
    L->stamp++;
    for (int s = 0; s < n; s++) {
        int x = set[s];
        add(&t, &p->nodes[x].val[c[x]], 1);
        for (int j = L->estart[x]; j < L->estart[x + 1]; j++) {
            int i = L->edges[j];
            if (L->mark[i] == L->stamp)
                continue;
            L->mark[i] = L->stamp;
            const IlpEdge *e = &p->edges[i];
            add(&t, &e->val[e->cu[c[e->u]] * e->nJ + e->cv[c[e->v]]], 1);
            for (int h = L->gstart[i]; h < L->gstart[i + 1]; h++) {
                int g = L->groups[h];
                if (L->mark[p->nedges + g] == L->stamp)
                    continue;
                L->mark[p->nedges + g] = L->stamp;
                const IlpGroup *gr = &p->groups[g];
                double mx = 0;
                for (int k = 0; k < gr->nitems; k++) {
                    const IlpEdge *f = &p->edges[gr->items[k].edge];
                    double x = gr->items[k].ind[f->cu[c[f->u]] * f->nJ + f->cv[c[f->v]]];
                    mx = x > mx ? x : mx;
                }
                add(&t, &gr->w, mx);
            }
        }
    }
    return t;
}
