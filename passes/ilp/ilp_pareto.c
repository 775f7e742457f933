/* ilp_pareto.c: the whole time/memory frontier of an IlpProblem by one
 * dynamic program, so that the frontier walk's budgets (search_ilp.c asks
 * one layer again and again, each time just below the last answer's memory)
 * are answered by a lookup instead of a branch and bound each.
 *
 * Why it is exact and cheap here. The memory is a sum of node and edge
 * prices; the objective is that plus, per max-group, w times the largest of
 * its items, each item a function of one edge's two ends. So every term is a
 * function of a few nodes (a factor: a node, an edge's two ends, a group's
 * nodes), and the problem is a sum of factors over a sparse graph: a layer's
 * operators, its residual stream and the boundary that closes the layer's
 * cycle. Eliminating the nodes one at a time (bucket elimination), each
 * node's factors combine into one over its neighbours that holds, for every
 * assignment of them, the Pareto set of (objective, memory) over the
 * eliminated node's strategies and everything eliminated before: a pair is
 * dropped only when another is no worse in both, which no budget can
 * prefer. The last factor is the frontier; a budget's optimum is its
 * fastest point within the budget, and the choice behind it is read back
 * through the eliminations in reverse. Measured on DeepSeek-V3's layers (25-31
 * nodes of 2-5 strategies after the dominance reduction, 117 groups, each
 * over the reads of one tensor: a star of its producer and readers), the
 * elimination order of least fill has neighbourhoods of at most 4 nodes.
 *
 * A problem whose neighbourhoods or sets grow past the limits below has no
 * frontier (NULL) and is solved by GLPK, as before.
 *
 * Without a budget only the least objective matters, and the same
 * elimination keeping the least and second least sum per assignment
 * (ilp_unique_best) tells whether the fastest choice is unique: then it is
 * the answer GLPK would give, and GLPK need not run. */
#include "ilp/ilp.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Limits past which the program is not worth it (GLPK answers instead):
 * assignments of one eliminated node and its neighbours, and points kept
 * in all factors together. */
enum { MAX_BAG = 1 << 16, MAX_POINTS = 1 << 22, MAX_SCOPE = 12 };

typedef struct {
    int n;                        /* variables in scope */
    int var[MAX_SCOPE];
    int k[MAX_SCOPE];             /* their strategies */
    int stride[MAX_SCOPE];        /* mixed radix: the last variable varies fastest */
    int nassign;
    int *off, *cnt;               /* per assignment: its points pts[off .. off + cnt) */
    int step;                     /* the elimination that made it; -1: a price of the problem */
    bool used;                    /* combined into a later factor */
} Factor;

typedef struct {
    int x;                        /* the node eliminated; -1: the last, constant factors */
    int out;                      /* the factor made */
    int nin, *in;                 /* the factors combined */
} Step;

struct IlpFrontier {
    int nnodes;
    int nf, capf;
    Factor *f;
    int nsteps;
    Step *steps;
    int np, capp;                 /* points: objective, memory, derivation (into der; -1: none) */
    double *t, *m;
    int *der;
    int nd, capd;                 /* derivations: the eliminated node's strategy, then the point
                                     taken from each combined factor (index within its assignment) */
    int *dv;
    int root;                     /* the final factor */
    bool slow;                    /* made the long way (ilp_frontier_ref): the matrix order,
                                     every group item read per assignment, qsort */
};

static int new_point(IlpFrontier *F, double t, double m, int der)
{
    if (F->np == F->capp) {
        F->capp = F->capp ? 2 * F->capp : 1024;
        F->t = ir_xrealloc(F->t, (size_t)F->capp * sizeof *F->t);
        F->m = ir_xrealloc(F->m, (size_t)F->capp * sizeof *F->m);
        F->der = ir_xrealloc(F->der, (size_t)F->capp * sizeof *F->der);
    }
    F->t[F->np] = t;
    F->m[F->np] = m;
    F->der[F->np] = der;
    return F->np++;
}

static int new_der(IlpFrontier *F, int n)
{
    if (F->nd + n > F->capd) {
        while (F->nd + n > F->capd)
            F->capd = F->capd ? 2 * F->capd : 4096;
        F->dv = ir_xrealloc(F->dv, (size_t)F->capd * sizeof *F->dv);
    }
    int d = F->nd;
    F->nd += n;
    return d;
}

/* A factor over the sorted distinct nodes vars[0..n), its points to come. */
static int new_factor(IlpFrontier *F, const IlpProblem *p, const int *vars, int n)
{
    if (F->nf == F->capf) {
        F->capf = F->capf ? 2 * F->capf : 64;
        F->f = ir_xrealloc(F->f, (size_t)F->capf * sizeof *F->f);
    }
    Factor *f = &F->f[F->nf];
    memset(f, 0, sizeof *f);
    f->n = n;
    f->nassign = 1;
    for (int i = n - 1; i >= 0; i--) {
        f->var[i] = vars[i];
        f->k[i] = p->nodes[vars[i]].k;
        f->stride[i] = f->nassign;
        f->nassign *= p->nodes[vars[i]].k;
    }
    f->off = ir_xmalloc((size_t)f->nassign * sizeof *f->off);
    f->cnt = ir_xcalloc((size_t)f->nassign, sizeof *f->cnt);
    f->step = -1;
    return F->nf++;
}

static double dot(const double *w, const IlpVals *v)
{
    double s = 0;
    for (int q = 0; q < ILP_NQ; q++)
        s += w[q] * v->q[q];
    return s;
}

/* The strategy of node `var` in assignment a of f. */
static int value_of(const Factor *f, int a, int var)
{
    for (int i = 0; i < f->n; i++)
        if (f->var[i] == var)
            return a / f->stride[i] % f->k[i];
    ir_die("ilp_pareto: node %d not in the factor", var);
}

static int add_sorted(int *vars, int n, int v)
{
    int i = 0;
    while (i < n && vars[i] < v)
        i++;
    if (i < n && vars[i] == v)
        return n;
    memmove(vars + i + 1, vars + i, (size_t)(n - i) * sizeof *vars);
    vars[i] = v;
    return n + 1;
}

/* Group gr's factor f (over its items' nodes): per assignment, wo and wm
 * times the largest item. The assignments are counted through as digits
 * (the last node fastest, as f's strides number them), and an item reads
 * its two ends' digits by position, the values value_of would find. The
 * largest item is kept per depth (the later position of an item's two
 * ends): best[d + 1] the largest of the items of depth at most d, so that
 * when digits d.. change only the items of depth d or more are read again.
 * A maximum is exact in any order, so the points are those of reading
 * every item per assignment; a star of a producer and four readers (items
 * of four depths, up to 1,024 assignments) reads about one item per
 * assignment instead of all of them. */
static void group_points(IlpFrontier *F, const IlpProblem *p, const IlpGroup *gr, Factor *f,
                         double wo, double wm)
{
    int n = f->n, *pos = ir_xmalloc((size_t)(2 * gr->nitems + 1) * sizeof *pos);
    int *by = ir_xmalloc((size_t)(gr->nitems + 1) * sizeof *by), start[MAX_SCOPE + 1] = {0};
    for (int k = 0; k < gr->nitems; k++) {
        const IlpEdge *e = &p->edges[gr->items[k].edge];
        for (int side = 0; side < 2; side++) {
            int v = side ? e->v : e->u, i = 0;
            while (f->var[i] != v)
                i++;
            pos[2 * k + side] = i;
        }
        int d = pos[2 * k] > pos[2 * k + 1] ? pos[2 * k] : pos[2 * k + 1];
        start[d + 1]++;
    }
    for (int d = 0; d < n; d++)
        start[d + 1] += start[d];
    int fill[MAX_SCOPE] = {0};
    for (int k = 0; k < gr->nitems; k++) {
        int d = pos[2 * k] > pos[2 * k + 1] ? pos[2 * k] : pos[2 * k + 1];
        by[start[d] + fill[d]++] = k;
    }
    int digit[MAX_SCOPE] = {0}, from = 0;
    double best[MAX_SCOPE + 1] = {0};
    for (int a = 0; a < f->nassign; a++) {
        for (int d = from; d < n; d++) {
            double mx = best[d];
            for (int j = start[d]; j < start[d + 1]; j++) {
                int k = by[j];
                const IlpEdge *e = &p->edges[gr->items[k].edge];
                double v = gr->items[k].ind[e->cu[digit[pos[2 * k]]] * e->nJ + e->cv[digit[pos[2 * k + 1]]]];
                mx = v > mx ? v : mx;
            }
            best[d + 1] = mx;
        }
        f->off[a] = new_point(F, wo * best[n], wm * best[n], -1);
        f->cnt[a] = 1;
        for (from = n - 1; from >= 0 && ++digit[from] == f->k[from]; from--)
            digit[from] = 0;
    }
    free(pos);
    free(by);
}

/* The problem's prices as factors of one point per assignment: each node,
 * each edge (its two ends), each group priced at all (the nodes of its
 * items' edges). False when a group spans more than MAX_SCOPE nodes. */
static bool price_factors(IlpFrontier *F, const IlpProblem *p)
{
    for (int u = 0; u < p->nnodes; u++) {
        int fi = new_factor(F, p, &u, 1);
        Factor *f = &F->f[fi];
        for (int i = 0; i < p->nodes[u].k; i++) {
            f->off[i] = new_point(F, dot(p->obj_w, &p->nodes[u].val[i]),
                                  dot(p->mem_w, &p->nodes[u].val[i]), -1);
            f->cnt[i] = 1;
        }
    }
    for (int i = 0; i < p->nedges; i++) {
        const IlpEdge *e = &p->edges[i];
        int vars[2] = {e->u < e->v ? e->u : e->v, e->u < e->v ? e->v : e->u};
        int fi = new_factor(F, p, vars, 2);
        Factor *f = &F->f[fi];
        for (int a = 0; a < f->nassign; a++) {
            int cu = value_of(f, a, e->u), cv = value_of(f, a, e->v);
            const IlpVals *v = &e->val[e->cu[cu] * e->nJ + e->cv[cv]];
            f->off[a] = new_point(F, dot(p->obj_w, v), dot(p->mem_w, v), -1);
            f->cnt[a] = 1;
        }
    }
    for (int g = 0; g < p->ngroups; g++) {
        const IlpGroup *gr = &p->groups[g];
        double wo = dot(p->obj_w, &gr->w), wm = dot(p->mem_w, &gr->w);
        if (gr->nitems == 0 || (wo == 0 && wm == 0))
            continue;
        int vars[MAX_SCOPE + 2], n = 0;
        for (int k = 0; k < gr->nitems; k++) {
            const IlpEdge *e = &p->edges[gr->items[k].edge];
            n = add_sorted(vars, n, e->u);
            if (n > MAX_SCOPE)
                return false;
            n = add_sorted(vars, n, e->v);
            if (n > MAX_SCOPE)
                return false;
        }
        long na = 1;
        for (int i = 0; i < n && na <= MAX_BAG; i++)
            na *= p->nodes[vars[i]].k;
        if (na > MAX_BAG)
            return false;
        int fi = new_factor(F, p, vars, n);
        Factor *f = &F->f[fi];
        if (!F->slow) {
            group_points(F, p, gr, f, wo, wm);
            continue;
        }
        for (int a = 0; a < f->nassign; a++) {
            double mx = 0;
            for (int k = 0; k < gr->nitems; k++) {
                const IlpEdge *e = &p->edges[gr->items[k].edge];
                double v = gr->items[k].ind[e->cu[value_of(f, a, e->u)] * e->nJ +
                                            e->cv[value_of(f, a, e->v)]];
                mx = v > mx ? v : mx;
            }
            f->off[a] = new_point(F, wo * mx, wm * mx, -1);
            f->cnt[a] = 1;
        }
    }
    return true;
}

/* The order of elimination: each time the node whose elimination adds the
 * fewest edges between its neighbours (then the fewest neighbours, then the
 * lowest index), on the graph of the factors' scopes. False when one
 * neighbourhood has more than MAX_BAG assignments or MAX_SCOPE nodes. */
static bool order_matrix(const IlpFrontier *F, const IlpProblem *p, int *ord)
{
    int n = p->nnodes;
    char *adj = ir_xcalloc((size_t)n * (size_t)n + 1, 1), *gone = ir_xcalloc((size_t)n + 1, 1);
    for (int fi = 0; fi < F->nf; fi++) {
        const Factor *f = &F->f[fi];
        for (int i = 0; i < f->n; i++)
            for (int j = 0; j < f->n; j++)
                if (i != j)
                    adj[f->var[i] * n + f->var[j]] = 1;
    }
    bool ok = true;
    for (int s = 0; s < n && ok; s++) {
        int best = -1, bfill = 0, bdeg = 0;
        for (int x = 0; x < n; x++) {
            if (gone[x])
                continue;
            int deg = 0, fill = 0;
            for (int a = 0; a < n; a++) {
                if (gone[a] || !adj[x * n + a])
                    continue;
                deg++;
                for (int b = a + 1; b < n; b++)
                    fill += !gone[b] && adj[x * n + b] && !adj[a * n + b];
            }
            if (best < 0 || fill < bfill || (fill == bfill && deg < bdeg))
                best = x, bfill = fill, bdeg = deg;
        }
        long na = p->nodes[best].k;
        int deg = 0;
        for (int a = 0; a < n; a++)
            if (!gone[a] && adj[best * n + a]) {
                na *= p->nodes[a].k;
                deg++;
                for (int b = 0; b < n; b++)
                    if (b != a && !gone[b] && adj[best * n + b])
                        adj[a * n + b] = 1;
            }
        ok = na <= MAX_BAG && deg <= MAX_SCOPE;
        gone[best] = 1;
        ord[s] = best;
    }
    free(adj);
    free(gone);
    return ok;
}


/* order_matrix for problems of at most 64 nodes, each node's neighbours a
 * bit mask: a node's fill is, per neighbour a, the neighbours above a that
 * a is not adjacent to, a population count; the same counts, compared in
 * the same order, so the same order (tests/ilp/test_ilp_pareto.c compares
 * the two). The matrix version's scans were a third of the program's time
 * on DeepSeek-V3's layers (1,762 orders of 25-31 nodes on 2048 A100s). */
static bool order_bits(const IlpFrontier *F, const IlpProblem *p, int *ord)
{
    int n = p->nnodes;
    uint64_t adj[64] = {0}, live = n == 64 ? ~0ull : (1ull << n) - 1;
    for (int fi = 0; fi < F->nf; fi++) {
        const Factor *f = &F->f[fi];
        uint64_t scope = 0;
        for (int i = 0; i < f->n; i++)
            scope |= 1ull << f->var[i];
        for (int i = 0; i < f->n; i++)
            adj[f->var[i]] |= scope & ~(1ull << f->var[i]);
    }
    bool ok = true;
    for (int s = 0; s < n && ok; s++) {
        int best = -1, bfill = 0, bdeg = 0;
        for (uint64_t xs = live; xs; xs &= xs - 1) {
            int x = __builtin_ctzll(xs);
            uint64_t nb = adj[x] & live;
            int deg = __builtin_popcountll(nb), fill = 0;
            for (uint64_t as = nb; as; as &= as - 1) {
                int a = __builtin_ctzll(as);
                uint64_t above = a < 63 ? ~((2ull << a) - 1) : 0;
                fill += __builtin_popcountll(nb & above & ~adj[a]);
            }
            if (best < 0 || fill < bfill || (fill == bfill && deg < bdeg))
                best = x, bfill = fill, bdeg = deg;
        }
        uint64_t nb = adj[best] & live;
        long na = p->nodes[best].k;
        for (uint64_t as = nb; as; as &= as - 1) {
            int a = __builtin_ctzll(as);
            na *= p->nodes[a].k;
            adj[a] |= nb & ~(1ull << a);
        }
        ok = na <= MAX_BAG && __builtin_popcountll(nb) <= MAX_SCOPE;
        live &= ~(1ull << best);
        ord[s] = best;
    }
    return ok;
}

/* The order of elimination (order_matrix; by bit masks where the nodes fit
 * in 64 bits, the same order). */
static bool order(const IlpFrontier *F, const IlpProblem *p, int *ord)
{
    return p->nnodes <= 64 && !F->slow ? order_bits(F, p, ord) : order_matrix(F, p, ord);
}

/* Candidate points while a factor is made: objective, memory and, per
 * point, `width` indices (the point taken from each combined factor). */
typedef struct {
    int n, cap, width;
    double *t, *m;
    int *idx;                     /* [cap * width] */
    int *perm;
    int *tmp;                     /* [cap / 2 + 1]: sort_perm's */
} Cand;

static void cand_reserve(Cand *c, int n)
{
    if (n <= c->cap)
        return;
    while (c->cap < n)
        c->cap = c->cap ? 2 * c->cap : 256;
    c->t = ir_xrealloc(c->t, (size_t)c->cap * sizeof *c->t);
    c->m = ir_xrealloc(c->m, (size_t)c->cap * sizeof *c->m);
    c->idx = ir_xrealloc(c->idx, (size_t)c->cap * (size_t)(c->width + 1) * sizeof *c->idx);
    c->perm = ir_xrealloc(c->perm, (size_t)c->cap * sizeof *c->perm);
    c->tmp = ir_xrealloc(c->tmp, (size_t)(c->cap / 2 + 1) * sizeof *c->tmp);
}

static void cand_free(Cand *c)
{
    free(c->t);
    free(c->m);
    free(c->idx);
    free(c->perm);
    free(c->tmp);
}

static const Cand *sort_cand; /* qsort's comparator reads it */

static int by_mem(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    const Cand *c = sort_cand;
    if (c->m[i] != c->m[j])
        return c->m[i] < c->m[j] ? -1 : 1;
    if (c->t[i] != c->t[j])
        return c->t[i] < c->t[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* by_mem(i, j) < 0, inline. */
static bool before(const Cand *c, int i, int j)
{
    if (c->m[i] != c->m[j])
        return c->m[i] < c->m[j];
    if (c->t[i] != c->t[j])
        return c->t[i] < c->t[j];
    return i < j;
}

/* perm[0 .. n) sorted by `before` (a merge sort through tmp, runs already
 * in order left as they are): by_mem is a total order on finite prices, so
 * this is the permutation qsort makes, without a call through a pointer per
 * comparison (sorting was a quarter of the frontier program's time). */
static void sort_perm(const Cand *c, int *perm, int *tmp, int n)
{
    if (n < 2)
        return;
    int h = n / 2;
    sort_perm(c, perm, tmp, h);
    sort_perm(c, perm + h, tmp, n - h);
    if (!before(c, perm[h], perm[h - 1]))
        return; /* the halves are in order already */
    memcpy(tmp, perm, (size_t)h * sizeof *tmp);
    int i = 0, j = h, k = 0;
    while (i < h && j < n)
        perm[k++] = before(c, perm[j], tmp[i]) ? perm[j++] : tmp[i++];
    while (i < h)
        perm[k++] = tmp[i++];
}

/* The candidates that no other is at least as good as in both objective
 * and memory (of equal pairs the first made), in c->perm[0 .. return),
 * by increasing memory and so decreasing objective. slow: sorted by qsort
 * (ilp_frontier_ref). */
static int pareto(Cand *c, bool slow)
{
    for (int i = 0; i < c->n; i++)
        c->perm[i] = i;
    if (c->n > 1 && slow) {
        sort_cand = c;
        qsort(c->perm, (size_t)c->n, sizeof *c->perm, by_mem);
    } else if (c->n > 1) {
        sort_perm(c, c->perm, c->tmp, c->n);
    }
    int k = 0;
    double best = INFINITY;
    for (int i = 0; i < c->n; i++) {
        int j = c->perm[i];
        if (c->t[j] < best) {
            best = c->t[j];
            c->perm[k++] = j;
        }
    }
    return k;
}

/* What one elimination combines: the factors, and where each of their
 * variables' strategies comes from (a position in the made factor's
 * scope, or -1: the eliminated node). */
typedef struct {
    const IlpFrontier *F;
    int nin;
    const Factor **in;
    int (*src)[MAX_SCOPE];
    Cand cur, next;
    int *lev, caplev;             /* combine_one: per factor j combined, each kept candidate's
                                     (candidate before it, point of factor j), from levoff[j] */
    int *levoff;                  /* [nin + 1] */
} Combine;

/* The Pareto set of the combined factors' sums at one assignment of the
 * made factor's scope (vals) with the eliminated node at xv, in C->cur
 * (pruned after each factor added), each candidate's points of the
 * factors in cur->idx. The long way (ilp_frontier_ref): those points
 * copied along with every candidate of every factor added. */
static void combine_one_slow(Combine *C, const int *vals, int xv)
{
    const IlpFrontier *F = C->F;
    int w = C->nin;
    Cand *cur = &C->cur, *next = &C->next;
    cand_reserve(cur, 1);
    cur->t[0] = cur->m[0] = 0;
    cur->n = 1;
    for (int j = 0; j < w; j++) {
        const Factor *f = C->in[j];
        int a = 0;
        for (int i = 0; i < f->n; i++)
            a += (C->src[j][i] < 0 ? xv : vals[C->src[j][i]]) * f->stride[i];
        int off = f->off[a], cnt = f->cnt[a];
        next->n = 0;
        cand_reserve(next, cur->n * cnt);
        for (int i = 0; i < cur->n; i++)
            for (int k = 0; k < cnt; k++) {
                int d = next->n++;
                next->t[d] = cur->t[i] + F->t[off + k];
                next->m[d] = cur->m[i] + F->m[off + k];
                memcpy(&next->idx[d * w], &cur->idx[i * w], (size_t)j * sizeof *next->idx);
                next->idx[d * w + j] = k;
            }
        int keep = cnt > 1 || cur->n > 1 ? pareto(next, F->slow) : next->n;
        cand_reserve(cur, keep);
        for (int i = 0; i < keep; i++) {
            int s = cnt > 1 || cur->n > 1 ? next->perm[i] : i;
            cur->t[i] = next->t[s];
            cur->m[i] = next->m[s];
            memcpy(&cur->idx[i * w], &next->idx[s * w], (size_t)(j + 1) * sizeof *cur->idx);
        }
        cur->n = keep;
    }
}

/* combine_one_slow with each candidate's points kept as a link to the
 * candidate it extends and its point of the factor added (next->idx: 2 a
 * candidate), those of the kept ones per factor in C->lev, and the points
 * read back along the links for the final ones only: the same sums in the
 * same order, the same Pareto sets, the same points in cur->idx (copying
 * every candidate's points at every factor was a third of the program). */
static void combine_one(Combine *C, const int *vals, int xv)
{
    const IlpFrontier *F = C->F;
    int w = C->nin;
    Cand *cur = &C->cur, *next = &C->next;
    cand_reserve(cur, 1);
    cur->t[0] = cur->m[0] = 0;
    cur->n = 1;
    C->levoff[0] = 0;
    for (int j = 0; j < w; j++) {
        const Factor *f = C->in[j];
        int a = 0;
        for (int i = 0; i < f->n; i++)
            a += (C->src[j][i] < 0 ? xv : vals[C->src[j][i]]) * f->stride[i];
        int off = f->off[a], cnt = f->cnt[a];
        next->n = 0;
        cand_reserve(next, cur->n * cnt);
        for (int i = 0; i < cur->n; i++)
            for (int k = 0; k < cnt; k++) {
                int d = next->n++;
                next->t[d] = cur->t[i] + F->t[off + k];
                next->m[d] = cur->m[i] + F->m[off + k];
                next->idx[2 * d] = i;
                next->idx[2 * d + 1] = k;
            }
        bool pruned = cnt > 1 || cur->n > 1;
        int keep = pruned ? pareto(next, false) : next->n;
        cand_reserve(cur, keep);
        int lo = C->levoff[j];
        if (lo + 2 * keep > C->caplev) {
            C->caplev = 2 * (lo + 2 * keep);
            C->lev = ir_xrealloc(C->lev, (size_t)C->caplev * sizeof *C->lev);
        }
        for (int i = 0; i < keep; i++) {
            int s = pruned ? next->perm[i] : i;
            cur->t[i] = next->t[s];
            cur->m[i] = next->m[s];
            C->lev[lo + 2 * i] = next->idx[2 * s];
            C->lev[lo + 2 * i + 1] = next->idx[2 * s + 1];
        }
        C->levoff[j + 1] = lo + 2 * keep;
        cur->n = keep;
    }
    for (int i = 0; i < cur->n; i++)
        for (int j = w - 1, x = i; j >= 0; j--) {
            cur->idx[i * w + j] = C->lev[C->levoff[j] + 2 * x + 1];
            x = C->lev[C->levoff[j] + 2 * x];
        }
}

/* Step s's inputs: every unused factor holding node x (x < 0: those of
 * no variable), marked used, into in (*nin of them), and the other
 * variables they hold, sorted, into vars (*nv). False, and stopped, past
 * MAX_SCOPE variables (order() keeps its eliminations within it). */
static bool gather(IlpFrontier *F, int x, int *in, int *nin, int *vars, int *nv)
{
    bool ok = true;
    *nin = *nv = 0;
    for (int fi = 0; fi < F->nf && ok; fi++) {
        Factor *f = &F->f[fi];
        bool has = false;
        for (int i = 0; i < f->n; i++)
            has |= f->var[i] == x;
        if (f->used || (x >= 0 ? !has : f->n > 0))
            continue;
        in[(*nin)++] = fi;
        f->used = true;
        for (int i = 0; i < f->n && ok; i++)
            if (f->var[i] != x) {
                *nv = add_sorted(vars, *nv, f->var[i]);
                ok = *nv <= MAX_SCOPE;
            }
    }
    return ok;
}

/* Eliminate node x (-1: combine what is left, factors of no variable):
 * every unused factor holding it into one over the rest of their
 * variables, step s. False past MAX_POINTS. */
static bool eliminate(IlpFrontier *F, const IlpProblem *p, int x, int s)
{
    Cand all_ = {0}, *all = &all_;
    int nin, *in = ir_xmalloc((size_t)(F->nf + 1) * sizeof *in);
    int vars[2 * MAX_SCOPE + 2], nv;
    bool ok = gather(F, x, in, &nin, vars, &nv);
    Step *st = &F->steps[s];
    *st = (Step){x, -1, nin, in};
    if (!ok)
        return false;
    int out = new_factor(F, p, vars, nv);
    Factor *o = &F->f[out];
    o->step = s;
    st->out = out;
    /* combine_one's candidates carry 2 numbers, a link and a point;
     * combine_one_slow's every point so far. */
    int nw = F->slow ? nin : 2;
    Combine C = {F, nin, NULL, NULL, {0, 0, nin, NULL, NULL, NULL, NULL, NULL},
                 {0, 0, nw, NULL, NULL, NULL, NULL, NULL}, NULL, 0, NULL};
    C.levoff = ir_xmalloc((size_t)(nin + 1) * sizeof *C.levoff);
    C.in = ir_xmalloc((size_t)(nin + 1) * sizeof *C.in);
    C.src = ir_xmalloc((size_t)(nin + 1) * sizeof *C.src);
    for (int j = 0; j < nin; j++) {
        const Factor *f = C.in[j] = &F->f[in[j]];
        for (int i = 0; i < f->n; i++) {
            C.src[j][i] = -1;
            for (int v = 0; v < nv; v++)
                if (vars[v] == f->var[i])
                    C.src[j][i] = v;
        }
    }
    int kx = x >= 0 ? p->nodes[x].k : 1, vals[2 * MAX_SCOPE + 2];
    all->width = nin + 1;
    for (int a = 0; a < o->nassign && ok; a++) {
        for (int v = 0; v < nv; v++)
            vals[v] = a / o->stride[v] % o->k[v];
        all->n = 0;
        for (int xv = 0; xv < kx; xv++) {
            if (F->slow)
                combine_one_slow(&C, vals, xv);
            else
                combine_one(&C, vals, xv);
            cand_reserve(all, all->n + C.cur.n);
            for (int i = 0; i < C.cur.n; i++) {
                int d = all->n++;
                all->t[d] = C.cur.t[i];
                all->m[d] = C.cur.m[i];
                all->idx[d * (nin + 1)] = xv;
                memcpy(&all->idx[d * (nin + 1) + 1], &C.cur.idx[i * nin], (size_t)nin * sizeof *all->idx);
            }
        }
        int keep = pareto(all, F->slow);
        o = &F->f[out];
        o->off[a] = F->np;
        o->cnt[a] = keep;
        for (int i = 0; i < keep; i++) {
            int j = all->perm[i], d = new_der(F, nin + 1);
            memcpy(&F->dv[d], &all->idx[j * (nin + 1)], (size_t)(nin + 1) * sizeof *F->dv);
            new_point(F, all->t[j], all->m[j], d);
        }
        ok = F->np <= MAX_POINTS;
    }
    free(C.in);
    free(C.src);
    free(C.lev);
    free(C.levoff);
    cand_free(all);
    cand_free(&C.cur);
    cand_free(&C.next);
    return ok;
}

void ilp_frontier_free(IlpFrontier *F)
{
    if (!F)
        return;
    for (int i = 0; i < F->nf; i++) {
        free(F->f[i].off);
        free(F->f[i].cnt);
    }
    for (int s = 0; s < F->nsteps; s++)
        free(F->steps[s].in);
    free(F->f);
    free(F->steps);
    free(F->t);
    free(F->m);
    free(F->der);
    free(F->dv);
    free(F);
}

static IlpFrontier *frontier(const IlpProblem *p, bool slow)
{
    IlpFrontier *F = ir_xcalloc(1, sizeof *F);
    F->nnodes = p->nnodes;
    F->slow = slow;
    F->steps = ir_xcalloc((size_t)p->nnodes + 1, sizeof *F->steps);
    int *ord = ir_xmalloc((size_t)(p->nnodes + 1) * sizeof *ord);
    bool ok = price_factors(F, p) && order(F, p, ord);
    for (int s = 0; s <= p->nnodes && ok; s++) {
        ok = eliminate(F, p, s < p->nnodes ? ord[s] : -1, s);
        F->nsteps = s + 1;
    }
    free(ord);
    if (!ok) {
        ilp_frontier_free(F);
        return NULL;
    }
    F->root = F->steps[p->nnodes].out;
    return F;
}

IlpFrontier *ilp_frontier(const IlpProblem *p) { return frontier(p, false); }
IlpFrontier *ilp_frontier_ref(const IlpProblem *p) { return frontier(p, true); }

int ilp_frontier_points(const IlpFrontier *F)
{
    return F->f[F->root].cnt[0];
}

/* The choice behind point i of the frontier, read back through the
 * eliminations in reverse: each made factor's point names the eliminated
 * node's strategy and the point it took from each factor it combined. */
static void read_back(const IlpFrontier *F, int i, int *choice)
{
    int *sel = ir_xmalloc((size_t)(F->nf + 1) * sizeof *sel);
    for (int fi = 0; fi < F->nf; fi++)
        sel[fi] = -1;
    for (int u = 0; u < F->nnodes; u++)
        choice[u] = -1;
    sel[F->root] = i;
    for (int s = F->nsteps - 1; s >= 0; s--) {
        const Step *st = &F->steps[s];
        const Factor *o = &F->f[st->out];
        int a = 0;
        for (int v = 0; v < o->n; v++)
            a += choice[o->var[v]] * o->stride[v];
        if (sel[st->out] < 0 || sel[st->out] >= o->cnt[a])
            ir_die("ilp_pareto: no point to read back at step %d", s);
        const int *d = &F->dv[F->der[o->off[a] + sel[st->out]]];
        if (st->x >= 0)
            choice[st->x] = d[0];
        for (int j = 0; j < st->nin; j++)
            sel[st->in[j]] = d[1 + j];
    }
    free(sel);
}

bool ilp_frontier_same(const IlpFrontier *a, const IlpFrontier *b)
{
    const Factor *ra = &a->f[a->root], *rb = &b->f[b->root];
    if (a->nnodes != b->nnodes || ra->cnt[0] != rb->cnt[0])
        return false;
    int *ca = ir_xmalloc((size_t)(a->nnodes + 1) * sizeof *ca);
    int *cb = ir_xmalloc((size_t)(a->nnodes + 1) * sizeof *cb);
    bool same = true;
    for (int i = 0; i < ra->cnt[0] && same; i++) {
        double ta = a->t[ra->off[0] + i], tb = b->t[rb->off[0] + i];
        double ma = a->m[ra->off[0] + i], mb = b->m[rb->off[0] + i];
        read_back(a, i, ca);
        read_back(b, i, cb);
        same = !memcmp(&ta, &tb, sizeof ta) && !memcmp(&ma, &mb, sizeof ma) &&
               !memcmp(ca, cb, (size_t)a->nnodes * sizeof *ca);
    }
    free(ca);
    free(cb);
    return same;
}

bool ilp_frontier_choice(const IlpFrontier *F, double budget, int *choice, double *t, double *m)
{
    const Factor *r = &F->f[F->root];
    int best = -1;
    for (int i = 0; i < r->cnt[0]; i++) /* increasing memory, decreasing objective */
        if (F->m[r->off[0] + i] <= budget)
            best = i;
    if (best < 0)
        return false;
    if (t)
        *t = F->t[r->off[0] + best];
    if (m)
        *m = F->m[r->off[0] + best];
    read_back(F, best, choice);
    return true;
}

/* Eliminate node x for the least objective alone: per assignment of the
 * rest, the least and the second least sums over distinct choices of the
 * eliminated nodes (points 0 and 1; point 0's derivation is x's strategy).
 * A factor of the problem has one choice per assignment: its one point.
 * The long way (ilp_unique_best_ref): each combined factor's variables
 * looked up in the made factor's scope per assignment. */
static void eliminate_best_slow(IlpFrontier *F, const IlpProblem *p, int x, int s)
{
    int nin, *in = ir_xmalloc((size_t)(F->nf + 1) * sizeof *in);
    int vars[2 * MAX_SCOPE + 2], nv;
    gather(F, x, in, &nin, vars, &nv); /* within MAX_SCOPE: order() */
    F->steps[s] = (Step){x, -1, nin, in};
    int out = new_factor(F, p, vars, nv);
    F->f[out].step = s;
    F->steps[s].out = out;
    int kx = x >= 0 ? p->nodes[x].k : 1, vals[2 * MAX_SCOPE + 2];
    /* Per combined factor: its assignment at x's strategy 0 (base[j]) and
     * the step per strategy of x (xs[j]), for this assignment of the rest. */
    int *base = ir_xmalloc((size_t)(nin + 1) * sizeof *base), *xs = ir_xmalloc((size_t)(nin + 1) * sizeof *xs);
    const Factor *o = &F->f[out];
    for (int a = 0; a < o->nassign; a++) {
        for (int v = 0; v < nv; v++)
            vals[v] = a / o->stride[v] % o->k[v];
        for (int j = 0; j < nin; j++) {
            const Factor *f = &F->f[in[j]];
            base[j] = xs[j] = 0;
            for (int i = 0; i < f->n; i++) {
                int v = 0;
                while (v < nv && vars[v] != f->var[i])
                    v++;
                if (v < nv)
                    base[j] += vals[v] * f->stride[i];
                else
                    xs[j] = f->stride[i];
            }
        }
        double b1 = INFINITY, b2 = INFINITY;
        int bx = 0;
        for (int xv = 0; xv < kx; xv++) {
            double sum = 0, gap = INFINITY;
            for (int j = 0; j < nin; j++) {
                const Factor *f = &F->f[in[j]];
                int aj = base[j] + xv * xs[j];
                int off = f->off[aj];
                sum += F->t[off];
                if (f->cnt[aj] > 1)
                    gap = fmin(gap, F->t[off + 1] - F->t[off]);
            }
            /* This xv's two least: sum, and sum with one factor at its second. */
            if (sum < b1) {
                b2 = fmin(b1, sum + gap);
                b1 = sum;
                bx = xv;
            } else {
                b2 = fmin(b2, sum);
            }
        }
        int d = new_der(F, 1);
        F->dv[d] = bx;
        o = &F->f[out];
        F->f[out].off[a] = new_point(F, b1, 0, d);
        new_point(F, b2, 0, -1);
        F->f[out].cnt[a] = 2;
    }
    free(base);
    free(xs);
}

/* eliminate_best_slow with each combined factor's variables looked up in
 * the made factor's scope once (pos), not per assignment: the same
 * indices, so the same sums (a third of the program's time was the
 * lookups). */
static void eliminate_best(IlpFrontier *F, const IlpProblem *p, int x, int s)
{
    if (F->slow) {
        eliminate_best_slow(F, p, x, s);
        return;
    }
    int nin, *in = ir_xmalloc((size_t)(F->nf + 1) * sizeof *in);
    int vars[2 * MAX_SCOPE + 2], nv;
    gather(F, x, in, &nin, vars, &nv); /* within MAX_SCOPE: order() */
    F->steps[s] = (Step){x, -1, nin, in};
    int out = new_factor(F, p, vars, nv);
    F->f[out].step = s;
    F->steps[s].out = out;
    int kx = x >= 0 ? p->nodes[x].k : 1, vals[2 * MAX_SCOPE + 2];
    /* Per combined factor: its variables' places in the made factor's
     * scope (pos[j][i], -1: x), the step per strategy of x (xs[j]), and per
     * assignment of the rest its assignment at x's strategy 0 (base[j]). */
    int *base = ir_xmalloc((size_t)(nin + 1) * sizeof *base), *xs = ir_xmalloc((size_t)(nin + 1) * sizeof *xs);
    int (*pos)[MAX_SCOPE] = ir_xmalloc((size_t)(nin + 1) * sizeof *pos);
    const Factor **fs = ir_xmalloc((size_t)(nin + 1) * sizeof *fs);
    for (int j = 0; j < nin; j++) {
        const Factor *f = fs[j] = &F->f[in[j]];
        xs[j] = 0;
        for (int i = 0; i < f->n; i++) {
            int v = 0;
            while (v < nv && vars[v] != f->var[i])
                v++;
            pos[j][i] = v < nv ? v : -1;
            if (v == nv)
                xs[j] = f->stride[i];
        }
    }
    const Factor *o = &F->f[out];
    for (int a = 0; a < o->nassign; a++) {
        for (int v = 0; v < nv; v++)
            vals[v] = a / o->stride[v] % o->k[v];
        for (int j = 0; j < nin; j++) {
            base[j] = 0;
            for (int i = 0; i < fs[j]->n; i++)
                if (pos[j][i] >= 0)
                    base[j] += vals[pos[j][i]] * fs[j]->stride[i];
        }
        double b1 = INFINITY, b2 = INFINITY;
        int bx = 0;
        for (int xv = 0; xv < kx; xv++) {
            double sum = 0, gap = INFINITY;
            for (int j = 0; j < nin; j++) {
                const Factor *f = fs[j];
                int aj = base[j] + xv * xs[j];
                int off = f->off[aj];
                sum += F->t[off];
                if (f->cnt[aj] > 1)
                    gap = fmin(gap, F->t[off + 1] - F->t[off]);
            }
            /* This xv's two least: sum, and sum with one factor at its second. */
            if (sum < b1) {
                b2 = fmin(b1, sum + gap);
                b1 = sum;
                bx = xv;
            } else {
                b2 = fmin(b2, sum);
            }
        }
        int d = new_der(F, 1);
        F->dv[d] = bx;
        F->f[out].off[a] = new_point(F, b1, 0, d);
        new_point(F, b2, 0, -1);
        F->f[out].cnt[a] = 2;
    }
    free(base);
    free(xs);
    free(pos);
    free(fs);
}

static bool unique_best(const IlpProblem *p, double margin, int *choice, double *best, double *second,
                        bool slow)
{
    IlpFrontier *F = ir_xcalloc(1, sizeof *F);
    F->nnodes = p->nnodes;
    F->slow = slow;
    F->steps = ir_xcalloc((size_t)p->nnodes + 1, sizeof *F->steps);
    int *ord = ir_xmalloc((size_t)(p->nnodes + 1) * sizeof *ord);
    bool ok = price_factors(F, p) && order(F, p, ord);
    for (int s = 0; s <= p->nnodes && ok; s++) {
        eliminate_best(F, p, s < p->nnodes ? ord[s] : -1, s);
        F->nsteps = s + 1;
    }
    free(ord);
    if (ok) {
        F->root = F->steps[p->nnodes].out;
        const Factor *r = &F->f[F->root];
        double b1 = F->t[r->off[0]], b2 = F->t[r->off[0] + 1];
        if (best)
            *best = b1;
        if (second)
            *second = b2;
        ok = b2 - b1 > margin * fmax(fabs(b1), 1e-300);
        if (ok) {
            for (int u = 0; u < p->nnodes; u++)
                choice[u] = -1;
            for (int s = F->nsteps - 1; s >= 0; s--) {
                const Step *st = &F->steps[s];
                const Factor *o = &F->f[st->out];
                int a = 0;
                for (int v = 0; v < o->n; v++)
                    a += choice[o->var[v]] * o->stride[v];
                if (st->x >= 0)
                    choice[st->x] = F->dv[F->der[o->off[a]]];
            }
        }
    }
    ilp_frontier_free(F);
    return ok;
}

bool ilp_unique_best(const IlpProblem *p, double margin, int *choice, double *best, double *second)
{
    return unique_best(p, margin, choice, best, second, false);
}

bool ilp_unique_best_ref(const IlpProblem *p, double margin, int *choice, double *best, double *second)
{
    return unique_best(p, margin, choice, best, second, true);
}
