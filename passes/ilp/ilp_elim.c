/* ilp_elim.c: an IlpProblem as a sum of factors over a few nodes each, and
 * the order in which to eliminate its nodes, for the two dynamic programs
 * over it (ilp_pareto.c: the whole time/memory frontier; ilp_best.c: the
 * least objective and its runner-up).
 *
 * The memory is a sum of node and edge prices; the objective that plus,
 * per max-group, w times the largest of its items, each item a function of
 * one edge's two ends. So every term is a function of a few nodes (a
 * factor: a node, an edge's two ends, a group's nodes), and the problem is
 * a sum of factors over a sparse graph: a layer's operators, its residual
 * stream and the boundary that closes the layer's cycle. The order of
 * least fill over that graph keeps each elimination's neighbourhood small:
 * at most 4 nodes on DeepSeek-V3's layers (25-31 nodes of 2-5 strategies
 * after the dominance reduction, 117 groups, each over the reads of one
 * tensor: a star of its producer and readers). A problem whose groups or
 * neighbourhoods exceed the limits (ilp_elim.h) has no program: GLPK
 * answers it.
 *
 * F->slow makes the factors and the order the long way (every group item
 * read per assignment, the order by an adjacency matrix): ilp_frontier_ref
 * and ilp_unique_best_ref, which PTDC_SEARCH_CHECK and tests/ilp compare
 * the shortcuts with. */
#include "ilp/ilp_elim.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *ilp_elim_alloc(IlpFrontier *F, size_t n)
{
    if (!F->mem)
        F->mem = ir_arena_new();
    return ir_alloc(F->mem, n);
}

/* The largest point and derivation arrays freed so far, for the next run
 * to start with: a search runs thousands of eliminations (DeepSeek-V3 on
 * 2048 B200s: 1,619), each of which grew these from nothing by doubling,
 * 17,000 copies in all, 1.2% of the search's instructions. ptdc plans on
 * one thread. */
static struct {
    double *t, *m;
    int *der, capp;
    int *dv, capd;
} spare;

static void take_spare(IlpFrontier *F)
{
    F->t = spare.t, F->m = spare.m, F->der = spare.der, F->capp = spare.capp;
    F->dv = spare.dv, F->capd = spare.capd;
    memset(&spare, 0, sizeof spare);
}

static void keep_spare(IlpFrontier *F)
{
    if (F->capp >= spare.capp) {
        free(spare.t), free(spare.m), free(spare.der);
        spare.t = F->t, spare.m = F->m, spare.der = F->der, spare.capp = F->capp;
    } else {
        free(F->t), free(F->m), free(F->der);
    }
    if (F->capd >= spare.capd) {
        free(spare.dv);
        spare.dv = F->dv, spare.capd = F->capd;
    } else {
        free(F->dv);
    }
}

/* Room for n more points: at least double, so that points added one at a
 * time cost a copy each only now and then. */
static void reserve_points(IlpFrontier *F, long n)
{
    if (F->np + n <= F->capp)
        return;
    long cap = F->capp ? 2 * (long)F->capp : 1024;
    cap = cap > F->np + n ? cap : F->np + n;
    if (cap > INT32_MAX)
        ir_die("ilp: %ld frontier points", cap);
    F->capp = (int)cap;
    F->t = ir_xrealloc(F->t, (size_t)F->capp * sizeof *F->t);
    F->m = ir_xrealloc(F->m, (size_t)F->capp * sizeof *F->m);
    F->der = ir_xrealloc(F->der, (size_t)F->capp * sizeof *F->der);
}

int ilp_elim_point(IlpFrontier *F, double t, double m, int der)
{
    if (F->np == F->capp)
        reserve_points(F, 1);
    F->t[F->np] = t;
    F->m[F->np] = m;
    F->der[F->np] = der;
    return F->np++;
}

int ilp_elim_der(IlpFrontier *F, int n)
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
int ilp_elim_factor(IlpFrontier *F, const IlpProblem *p, const int *vars, int n)
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
    f->off = ilp_elim_alloc(F, (size_t)f->nassign * sizeof *f->off);
    f->cnt = ilp_elim_alloc(F, (size_t)f->nassign * sizeof *f->cnt);
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

/* Scratch for group_points, kept from one group to the next (ptdc plans
 * on one thread: `spare` above): 233,000 groups a search, each of which
 * had two mallocs of its own. */
static struct {
    double *tab;
    int cap;
} gscratch;

/* Group gr's factor f (over its items' nodes): per assignment, wo and wm
 * times the largest item. Each item's values are first laid out by its two
 * ends' digits (tab, lo end's digit major), read without the edge's class
 * maps. The assignments are counted through as digits (the last node
 * fastest, as f's strides number them): the largest item over the first
 * n - 1 digits is kept per depth (the later position of an item's two
 * ends): best[d + 1] the largest of the items of depth at most d, so that
 * when digits d.. change only the items of depth d or more are read again;
 * the items of the last depth are read in a run over the last digit, from
 * the row their other end's digit picks. A maximum is exact in any order
 * (the items are >= 0 and the first is compared with +0), so the points
 * are those of reading every item per assignment (the F->slow loop). */
static void group_points(IlpFrontier *F, const IlpProblem *p, const IlpGroup *gr, Factor *f,
                         double wo, double wm, bool add)
{
    enum { MAXI = 64 };
    int n = f->n, ni = gr->nitems;
    if (ni > MAXI || n < 2) { /* never seen: a group's items are a few edges */
        for (int a = 0; a < f->nassign; a++) {
            double mx = 0;
            for (int k = 0; k < ni; k++) {
                const IlpEdge *e = &p->edges[gr->items[k].edge];
                int du = 0, dv = 0;
                for (int i = 0; i < n; i++) {
                    if (f->var[i] == e->u)
                        du = a / f->stride[i] % f->k[i];
                    if (f->var[i] == e->v)
                        dv = a / f->stride[i] % f->k[i];
                }
                double v = gr->items[k].ind[e->cu[du] * e->nJ + e->cv[dv]];
                mx = v > mx ? v : mx;
            }
            if (add) {
                F->t[f->off[a]] += wo * mx;
                F->m[f->off[a]] += wm * mx;
            } else {
                f->off[a] = ilp_elim_point(F, wo * mx, wm * mx, -1);
                f->cnt[a] = 1;
            }
        }
        return;
    }
    int lo[MAXI], hi[MAXI], off[MAXI], by[MAXI], start[MAX_SCOPE + 1] = {0}, need = 0;
    for (int k = 0; k < ni; k++) {
        const IlpEdge *e = &p->edges[gr->items[k].edge];
        int pu = 0, pv = 0;
        while (f->var[pu] != e->u)
            pu++;
        while (f->var[pv] != e->v)
            pv++;
        lo[k] = pu < pv ? pu : pv, hi[k] = pu < pv ? pv : pu;
        off[k] = need;
        need += f->k[lo[k]] * f->k[hi[k]];
        start[hi[k] + 1]++;
    }
    if (need > gscratch.cap) {
        gscratch.cap = need > 2 * gscratch.cap ? need : 2 * gscratch.cap;
        free(gscratch.tab);
        gscratch.tab = ir_xmalloc((size_t)gscratch.cap * sizeof *gscratch.tab);
    }
    double *tab = gscratch.tab;
    for (int k = 0; k < ni; k++) {
        const IlpEdge *e = &p->edges[gr->items[k].edge];
        const double *ind = gr->items[k].ind;
        int kl = f->k[lo[k]], kh = f->k[hi[k]];
        bool u_lo = f->var[lo[k]] == e->u;
        for (int x = 0; x < kl; x++)
            for (int y = 0; y < kh; y++)
                tab[off[k] + x * kh + y] = u_lo ? ind[e->cu[x] * e->nJ + e->cv[y]] : ind[e->cu[y] * e->nJ + e->cv[x]];
    }
    for (int d = 0; d < n; d++)
        start[d + 1] += start[d];
    int fill[MAX_SCOPE] = {0};
    for (int k = 0; k < ni; k++)
        by[start[hi[k]] + fill[hi[k]]++] = k;
    /* the items of the last depth: their rows per assignment of the rest */
    int last = n - 1, kz = f->k[last], nz = start[n] - start[last];
    const double *row[MAXI];
    int digit[MAX_SCOPE] = {0}, from = 0;
    double best[MAX_SCOPE + 1] = {0};
    for (int a0 = 0; a0 < f->nassign; a0 += kz) {
        for (int d = from; d < last; d++) {
            double mx = best[d];
            for (int j = start[d]; j < start[d + 1]; j++) {
                int k = by[j];
                double v = tab[off[k] + digit[lo[k]] * f->k[hi[k]] + digit[hi[k]]];
                mx = v > mx ? v : mx;
            }
            best[d + 1] = mx;
        }
        for (int j = 0; j < nz; j++) {
            int k = by[start[last] + j];
            row[j] = tab + off[k] + digit[lo[k]] * kz;
        }
        for (int z = 0; z < kz; z++) {
            double mx = best[last];
            for (int j = 0; j < nz; j++) {
                double v = row[j][z];
                mx = v > mx ? v : mx;
            }
            int a = a0 + z;
            if (add) { /* into the first factor of its scope (price_factors, F->merge) */
                F->t[f->off[a]] += wo * mx;
                F->m[f->off[a]] += wm * mx;
            } else {
                f->off[a] = ilp_elim_point(F, wo * mx, wm * mx, -1);
                f->cnt[a] = 1;
            }
        }
        for (from = last - 1; from >= 0 && ++digit[from] == f->k[from]; from--)
            digit[from] = 0;
        if (from < 0)
            from = 0;
    }
}

/* With F->merge, each leaf factor summed into the first of the same scope
 * (a group's points added to it as they are made), itself left out (marked
 * used: ilp_elim_gather passes it over): most of a layer's groups are a
 * star's three nodes or an edge's two, so that each elimination combined
 * a dozen factors where it now combines a few (2,256 problems of 25-31
 * nodes, 32-40 edges and about 117 groups planning DeepSeek-V3 on 2048
 * GB300s: 93% of the groups' scopes were another factor's). A sum is the
 * same sum in another order: the least objective program's answer is
 * unique within a margin far above the rounding, but the frontier's points
 * would not be the same bits, so only it merges. The scopes seen, open
 * addressing: the factor of each, -1 empty. */
enum { SCOPES = 1024 };

static int *scope_slot(int *slot, const IlpFrontier *F, const int *vars, int n)
{
    uint32_t h = (uint32_t)n;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint32_t)vars[i]) * 0x9e3779b1u;
    int j = (int)(h >> 22) & (SCOPES - 1);
    while (slot[j] >= 0 &&
           !(F->f[slot[j]].n == n && memcmp(F->f[slot[j]].var, vars, sizeof(int) * (size_t)n) == 0))
        j = (j + 1) & (SCOPES - 1);
    return &slot[j];
}

/* Factor fi, just made, into the first of its scope (merge: one there). */
static void merge_into(IlpFrontier *F, int *slot, int fi)
{
    Factor *f = &F->f[fi];
    int *sl = scope_slot(slot, F, f->var, f->n);
    if (*sl < 0) {
        *sl = fi;
        return;
    }
    const Factor *to = &F->f[*sl];
    for (int a = 0; a < f->nassign; a++) {
        F->t[to->off[a]] += F->t[f->off[a]];
        F->m[to->off[a]] += F->m[f->off[a]];
    }
    f->used = true;
}

/* The problem's prices as factors of one point per assignment: each node,
 * each edge (its two ends), each group priced at all (the nodes of its
 * items' edges). False when a group spans more than MAX_SCOPE nodes. */
static bool price_factors(IlpFrontier *F, const IlpProblem *p)
{
    int slot[SCOPES];
    bool merge = F->merge && p->nnodes + p->nedges + p->ngroups <= SCOPES / 2;
    for (int i = 0; merge && i < SCOPES; i++)
        slot[i] = -1;
    /* room for the nodes' and edges' points at once, the groups' below
     * once each one's size is known */
    long pts = 0;
    for (int u = 0; u < p->nnodes; u++)
        pts += p->nodes[u].k;
    for (int i = 0; i < p->nedges; i++)
        pts += (long)p->nodes[p->edges[i].u].k * p->nodes[p->edges[i].v].k;
    reserve_points(F, pts);
    for (int u = 0; u < p->nnodes; u++) {
        int fi = ilp_elim_factor(F, p, &u, 1);
        Factor *f = &F->f[fi];
        for (int i = 0; i < p->nodes[u].k; i++) {
            f->off[i] = ilp_elim_point(F, dot(p->obj_w, &p->nodes[u].val[i]),
                                  dot(p->mem_w, &p->nodes[u].val[i]), -1);
            f->cnt[i] = 1;
        }
        if (merge)
            merge_into(F, slot, fi);
    }
    for (int i = 0; i < p->nedges; i++) {
        const IlpEdge *e = &p->edges[i];
        int vars[2] = {e->u < e->v ? e->u : e->v, e->u < e->v ? e->v : e->u};
        int fi = ilp_elim_factor(F, p, vars, 2);
        Factor *f = &F->f[fi];
        for (int a = 0; a < f->nassign; a++) {
            int cu = value_of(f, a, e->u), cv = value_of(f, a, e->v);
            const IlpVals *v = &e->val[e->cu[cu] * e->nJ + e->cv[cv]];
            f->off[a] = ilp_elim_point(F, dot(p->obj_w, v), dot(p->mem_w, v), -1);
            f->cnt[a] = 1;
        }
        if (merge)
            merge_into(F, slot, fi);
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
        int *sl = merge ? scope_slot(slot, F, vars, n) : NULL;
        bool add = sl && *sl >= 0;
        int fi = add ? *sl : ilp_elim_factor(F, p, vars, n);
        if (sl && !add)
            *sl = fi;
        Factor *f = &F->f[fi];
        if (!add)
            reserve_points(F, na);
        if (!F->slow) {
            group_points(F, p, gr, f, wo, wm, add);
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
            if (add) {
                F->t[f->off[a]] += wo * mx;
                F->m[f->off[a]] += wm * mx;
                continue;
            }
            f->off[a] = ilp_elim_point(F, wo * mx, wm * mx, -1);
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
/* __builtin_popcountll is a libgcc call without -mpopcnt (the build
 * targets baseline x86-64): 3.8 million calls planning DeepSeek-V3 on 2048
 * GB300s. The same count, inline. */
static inline int pop64(uint64_t x)
{
    x -= x >> 1 & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + (x >> 2 & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)(x * 0x0101010101010101ull >> 56);
}

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
            int deg = pop64(nb), fill = 0;
            for (uint64_t as = nb; as; as &= as - 1) {
                int a = __builtin_ctzll(as);
                uint64_t above = a < 63 ? ~((2ull << a) - 1) : 0;
                fill += pop64(nb & above & ~adj[a]);
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
        ok = na <= MAX_BAG && pop64(nb) <= MAX_SCOPE;
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

bool ilp_elim_start(IlpFrontier *F, const IlpProblem *p, int *ord)
{
    return price_factors(F, p) && order(F, p, ord);
}

IlpFrontier *ilp_elim_run(const IlpProblem *p, bool slow, bool merge,
                          bool (*step)(IlpFrontier *F, const IlpProblem *p, int x, int s))
{
    IlpFrontier *F = ir_xcalloc(1, sizeof *F);
    take_spare(F);
    F->nnodes = p->nnodes;
    F->slow = slow;
    F->merge = merge;
    F->steps = ir_xcalloc((size_t)p->nnodes + 1, sizeof *F->steps);
    int *ord = ir_xmalloc((size_t)(p->nnodes + 1) * sizeof *ord);
    bool ok = ilp_elim_start(F, p, ord);
    for (int s = 0; s <= p->nnodes && ok; s++) {
        ok = step(F, p, s < p->nnodes ? ord[s] : -1, s);
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

/* Step s's inputs: every unused factor holding node x (x < 0: those of
 * no variable), marked used, into in (*nin of them), and the other
 * variables they hold, sorted, into vars (*nv). False, and stopped, past
 * MAX_SCOPE variables (order() keeps its eliminations within it). */
bool ilp_elim_gather(IlpFrontier *F, int x, int *in, int *nin, int *vars, int *nv)
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

void ilp_frontier_free(IlpFrontier *F)
{
    if (!F)
        return;
    ir_arena_free(F->mem);
    free(F->f);
    free(F->steps);
    keep_spare(F);
    free(F);
}
