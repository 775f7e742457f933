/* ilp_pareto.c: the whole time/memory frontier of an IlpProblem by one
 * dynamic program, so that the frontier walk's budgets (search_ilp.c asks
 * one layer again and again, each time just below the last answer's memory)
 * are answered by a lookup instead of a branch and bound each.
 *
 * Why it is exact. Over the problem's factors and order of elimination
 * (ilp_elim.c), each node's factors combine into one over its neighbours
 * that holds, for every assignment of them, the Pareto set of (objective,
 * memory) over the eliminated node's strategies and everything eliminated
 * before: a pair is dropped only when another is no worse in both, which
 * no budget can prefer. The last factor is the frontier; a budget's
 * optimum is its fastest point within the budget, and the choice behind it
 * is read back through the eliminations in reverse.
 *
 * A problem whose neighbourhoods or sets grow past the limits (ilp_elim.h)
 * has no frontier (NULL) and is solved by GLPK, as before. */
#include "ilp/ilp_elim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Candidate points while a factor is made: objective, memory and, per
 * point, `width` indices (the point taken from each combined factor). */
typedef struct {
    int n, cap, width;
    double *t, *m;
    int *idx;                     /* [cap * width] */
    int *perm;
    int *tmp;                     /* [cap / 2 + 1]: sort_perm's */
    int *run;                     /* [cap + 1]: sort_perm's */
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
    c->run = ir_xrealloc(c->run, (size_t)(c->cap + 1) * sizeof *c->run);
}

static void cand_free(Cand *c)
{
    free(c->t);
    free(c->m);
    free(c->idx);
    free(c->perm);
    free(c->tmp);
    free(c->run);
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

/* perm[0, h) and perm[h, n), each sorted by `before`, merged in place
 * through tmp, which takes the shorter of the two. */
static void merge_two(const Cand *c, int *perm, int *tmp, int h, int n)
{
    if (!before(c, perm[h], perm[h - 1]))
        return; /* in order already */
    if (h <= n - h) {
        memcpy(tmp, perm, (size_t)h * sizeof *tmp);
        int i = 0, j = h, k = 0;
        while (i < h && j < n)
            perm[k++] = before(c, perm[j], tmp[i]) ? perm[j++] : tmp[i++];
        while (i < h)
            perm[k++] = tmp[i++];
    } else { /* from the ends, the second half in tmp */
        int b = n - h, i = h - 1, j = b - 1, k = n - 1;
        memcpy(tmp, perm + h, (size_t)b * sizeof *tmp);
        while (i >= 0 && j >= 0)
            perm[k--] = before(c, tmp[j], perm[i]) ? perm[i--] : tmp[j--];
        while (j >= 0)
            perm[k--] = tmp[j--];
    }
}

/* perm[0 .. n) sorted by `before`: a natural merge sort, the runs already
 * in order merged pairwise (run[]: their starts). The candidates are made
 * as a Pareto set (increasing memory) plus each point of a factor's, or as
 * one Pareto set after another: runs, so log(runs) passes rather than
 * log(n). by_mem is a total order on finite prices, so this is the
 * permutation qsort makes, without a call through a pointer per
 * comparison (sorting was a quarter of the frontier program's time). */
static void sort_perm(const Cand *c, int *perm, int *tmp, int *run, int n)
{
    if (n < 2)
        return;
    int nr = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || before(c, perm[i], perm[i - 1]))
            run[nr++] = i;
    run[nr] = n;
    while (nr > 1) {
        int w = 0;
        for (int r = 0; r < nr; r += 2) {
            if (r + 1 < nr)
                merge_two(c, perm + run[r], tmp, run[r + 1] - run[r], run[r + 2] - run[r]);
            run[w++] = run[r];
        }
        run[w] = n;
        nr = w;
    }
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
        sort_perm(c, c->perm, c->tmp, c->run, c->n);
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

/* Eliminate node x (-1: combine what is left, factors of no variable):
 * every unused factor holding it into one over the rest of their
 * variables, step s. False past MAX_POINTS. */
static bool eliminate(IlpFrontier *F, const IlpProblem *p, int x, int s)
{
    Cand all_ = {0}, *all = &all_;
    int nin, *in = ilp_elim_alloc(F, (size_t)(F->nf + 1) * sizeof *in);
    int vars[2 * MAX_SCOPE + 2], nv;
    bool ok = ilp_elim_gather(F, x, in, &nin, vars, &nv);
    Step *st = &F->steps[s];
    *st = (Step){x, -1, nin, in};
    if (!ok)
        return false;
    int out = ilp_elim_factor(F, p, vars, nv);
    Factor *o = &F->f[out];
    o->step = s;
    st->out = out;
    /* combine_one's candidates carry 2 numbers, a link and a point;
     * combine_one_slow's every point so far. */
    int nw = F->slow ? nin : 2;
    Combine C = {F, nin, NULL, NULL, {0, 0, nin, NULL, NULL, NULL, NULL, NULL, NULL},
                 {0, 0, nw, NULL, NULL, NULL, NULL, NULL, NULL}, NULL, 0, NULL};
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
            int j = all->perm[i], d = ilp_elim_der(F, nin + 1);
            memcpy(&F->dv[d], &all->idx[j * (nin + 1)], (size_t)(nin + 1) * sizeof *F->dv);
            ilp_elim_point(F, all->t[j], all->m[j], d);
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

IlpFrontier *ilp_frontier(const IlpProblem *p) { return ilp_elim_run(p, false, false, eliminate); }
IlpFrontier *ilp_frontier_ref(const IlpProblem *p) { return ilp_elim_run(p, true, false, eliminate); }

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

int ilp_frontier_totals(const IlpFrontier *F, const IlpProblem *p, double **m, IlpVals **tot)
{
    const Factor *r = &F->f[F->root];
    int n = r->cnt[0];
    int *choice = ir_xmalloc((size_t)(F->nnodes + 1) * sizeof *choice);
    *m = ir_xmalloc(sizeof **m * (size_t)(n + 1));
    *tot = ir_xmalloc(sizeof **tot * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        (*m)[i] = F->m[r->off[0] + i];
        read_back(F, i, choice);
        ilp_eval(p, choice, &(*tot)[i]);
    }
    free(choice);
    return n;
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
