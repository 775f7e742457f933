/* ilp_problem.c: the generic core of the sharding ILP: building a problem of
 * nodes (one strategy each), edges priced per pair of strategy classes and
 * max-groups, and evaluating one choice per node. ilp_eval is the definition
 * the solver (ilp_solve.c) must reproduce: the brute-force tests compare it. */
#include "ilp/ilp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GROW(arr, n, cap)                                                          \
    do {                                                                           \
        if ((n) == (cap)) {                                                        \
            (cap) = (cap) ? 2 * (cap) : 16;                                        \
            (arr) = ir_xrealloc((arr), (size_t)(cap) * sizeof *(arr));             \
        }                                                                          \
    } while (0)

IlpProblem *ilp_new(void)
{
    IlpProblem *p = ir_xcalloc(1, sizeof *p);
    p->obj_w[ILP_FWD] = p->obj_w[ILP_BWD] = p->obj_w[ILP_SYNC] = 1;
    p->mem_w[ILP_MEM_PARAM] = p->mem_w[ILP_MEM_ACT] = 1;
    p->budget = INFINITY;
    return p;
}

/* n bytes of p's arena holding src's copy. */
static void *keep(IlpProblem *p, const void *src, size_t n)
{
    if (!p->mem)
        p->mem = ir_arena_new();
    void *d = ir_alloc(p->mem, n);
    memcpy(d, src, n);
    return d;
}

void ilp_free(IlpProblem *p)
{
    if (!p)
        return;
    ir_arena_free(p->mem);
    for (int i = 0; i < p->ngroups; i++)
        free(p->groups[i].items);
    free(p->nodes);
    free(p->edges);
    free(p->groups);
    free(p);
}

int ilp_add_node(IlpProblem *p, int k, const IlpVals *val)
{
    if (k < 1)
        ir_die("ilp: node with %d strategies", k);
    GROW(p->nodes, p->nnodes, p->capn);
    IlpNode *n = &p->nodes[p->nnodes];
    n->k = k;
    n->val = keep(p, val, (size_t)k * sizeof *n->val);
    return p->nnodes++;
}

/* Number of classes of a class map, checking every class in [0, n) is used. */
static int nclasses(const int *c, int k)
{
    int n = 0;
    for (int i = 0; i < k; i++) {
        if (c[i] < 0)
            ir_die("ilp: negative class");
        if (c[i] + 1 > n)
            n = c[i] + 1;
    }
    char room[256]; /* (every edge of a search is checked: no allocation for the usual few classes) */
    char *used = n <= (int)sizeof room ? room : ir_xmalloc((size_t)n);
    memset(used, 0, (size_t)n);
    for (int i = 0; i < k; i++)
        used[c[i]] = 1;
    for (int i = 0; i < n; i++)
        if (!used[i])
            ir_die("ilp: class %d of %d unused", i, n);
    if (used != room)
        free(used);
    return n;
}

int ilp_add_edge(IlpProblem *p, int u, int v, const int *cu, const int *cv, const IlpVals *val)
{
    if (u < 0 || u >= p->nnodes || v < 0 || v >= p->nnodes || u == v)
        ir_die("ilp: edge %d -> %d", u, v);
    GROW(p->edges, p->nedges, p->cape);
    IlpEdge *e = &p->edges[p->nedges];
    e->u = u;
    e->v = v;
    int ku = p->nodes[u].k, kv = p->nodes[v].k;
    e->nI = nclasses(cu, ku);
    e->nJ = nclasses(cv, kv);
    e->cu = keep(p, cu, (size_t)ku * sizeof *e->cu);
    e->cv = keep(p, cv, (size_t)kv * sizeof *e->cv);
    e->val = keep(p, val, (size_t)e->nI * (size_t)e->nJ * sizeof *e->val);
    return p->nedges++;
}

int ilp_add_group(IlpProblem *p, const IlpVals *w)
{
    double m = 0;
    for (int q = 0; q < ILP_NQ; q++) {
        if (w->q[q] < 0 && p->obj_w[q] != 0)
            ir_die("ilp: group with a negative price");
        m += p->mem_w[q] * w->q[q];
    }
    /* A group's variable is only pushed down by the objective: if it could
     * lower memory the solver would inflate it. */
    if (m < 0)
        ir_die("ilp: group that lowers memory");
    GROW(p->groups, p->ngroups, p->capg);
    IlpGroup *gr = &p->groups[p->ngroups];
    memset(gr, 0, sizeof *gr);
    gr->w = *w;
    return p->ngroups++;
}

void ilp_add_item(IlpProblem *p, int group, int edge, const double *ind)
{
    if (group < 0 || group >= p->ngroups || edge < 0 || edge >= p->nedges)
        ir_die("ilp: item %d of group %d", edge, group);
    IlpGroup *gr = &p->groups[group];
    const IlpEdge *e = &p->edges[edge];
    size_t n = (size_t)e->nI * (size_t)e->nJ;
    for (size_t i = 0; i < n; i++)
        if (!(ind[i] >= 0))
            ir_die("ilp: negative item value");
    GROW(gr->items, gr->nitems, gr->cap);
    IlpItem *it = &gr->items[gr->nitems++];
    it->edge = edge;
    it->ind = keep(p, ind, n * sizeof *it->ind);
}

static void add_vals(IlpVals *t, const IlpVals *v, double f)
{
    for (int q = 0; q < ILP_NQ; q++)
        t->q[q] += f * v->q[q];
}

double ilp_memory(const IlpProblem *p, const IlpVals *total)
{
    double m = 0;
    for (int q = 0; q < ILP_NQ; q++)
        m += p->mem_w[q] * total->q[q];
    return m;
}

double ilp_eval(const IlpProblem *p, const int *choice, IlpVals *total)
{
    IlpVals t = {{0}};
    for (int u = 0; u < p->nnodes; u++) {
        if (choice[u] < 0 || choice[u] >= p->nodes[u].k)
            ir_die("ilp_eval: node %d choice %d of %d", u, choice[u], p->nodes[u].k);
        add_vals(&t, &p->nodes[u].val[choice[u]], 1);
    }
    for (int i = 0; i < p->nedges; i++) {
        const IlpEdge *e = &p->edges[i];
        add_vals(&t, &e->val[e->cu[choice[e->u]] * e->nJ + e->cv[choice[e->v]]], 1);
    }
    for (int i = 0; i < p->ngroups; i++) {
        const IlpGroup *gr = &p->groups[i];
        double mx = 0;
        for (int k = 0; k < gr->nitems; k++) {
            const IlpEdge *e = &p->edges[gr->items[k].edge];
            double v = gr->items[k].ind[e->cu[choice[e->u]] * e->nJ + e->cv[choice[e->v]]];
            if (v > mx)
                mx = v;
        }
        add_vals(&t, &gr->w, mx);
    }
    if (total)
        *total = t;
    double obj = 0;
    for (int q = 0; q < ILP_NQ; q++)
        obj += p->obj_w[q] * t.q[q];
    return obj;
}

const char *ilp_status_name(IlpStatus s)
{
    switch (s) {
    case ILP_OPTIMAL: return "optimal";
    case ILP_FEASIBLE: return "feasible (time limit)";
    case ILP_INFEASIBLE: return "infeasible";
    case ILP_UNKNOWN: return "unknown (time limit)";
    }
    return "?";
}
