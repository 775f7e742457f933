/* ilp_best.c: the least objective of an IlpProblem without a budget, and
 * whether the choice reaching it is unique, by the elimination of
 * ilp_elim.c keeping per assignment the least and second least sums over
 * distinct choices. Where the fastest choice is unique it is the answer
 * GLPK would give (ilp_solve.c, solve_unique), and GLPK need not run. */
#include "ilp/ilp_elim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* fmin as glibc's (minsd after its NaN test: the other operand where
 * equal), inline: the loop below asks it millions of times per search. */
static inline double lo(double a, double b) { return a < b || b != b ? a : b; }

/* Per strategy xv of the eliminated node, the sum of the combined factors'
 * least points at base[j] + xv xs[j], and of their second with one factor
 * at its second: the least two over xv into *b1, *b2; the xv of *b1. */
static int two_least(const IlpFrontier *F, const Factor *const *fs, int nin, const int *base, const int *xs, int kx,
                     double *b1, double *b2)
{
    int bx = 0;
    *b1 = *b2 = INFINITY;
    for (int xv = 0; xv < kx; xv++) {
        double sum = 0, gap = INFINITY;
        for (int j = 0; j < nin; j++) {
            const Factor *f = fs[j];
            int aj = base[j] + xv * xs[j];
            int off = f->off[aj];
            sum += F->t[off];
            if (f->cnt[aj] > 1)
                gap = lo(gap, F->t[off + 1] - F->t[off]);
        }
        /* This xv's two least: sum, and sum with one factor at its second. */
        if (sum < *b1) {
            *b2 = lo(*b1, sum + gap);
            *b1 = sum;
            bx = xv;
        } else {
            *b2 = lo(*b2, sum);
        }
    }
    return bx;
}

/* Eliminate node x for the least objective alone: per assignment of the
 * rest, the least and the second least sums over distinct choices of the
 * eliminated nodes (points 0 and 1; point 0's derivation is x's strategy).
 * A factor of the problem has one choice per assignment: its one point.
 * The long way (ilp_unique_best_ref): each combined factor's variables
 * looked up in the made factor's scope per assignment. */
static void eliminate_best_slow(IlpFrontier *F, const IlpProblem *p, int x, int s)
{
    int nin, *in = ilp_elim_alloc(F, (size_t)(F->nf + 1) * sizeof *in);
    int vars[2 * MAX_SCOPE + 2], nv;
    ilp_elim_gather(F, x, in, &nin, vars, &nv); /* within MAX_SCOPE: order() */
    F->steps[s] = (Step){x, -1, nin, in};
    int out = ilp_elim_factor(F, p, vars, nv);
    F->f[out].step = s;
    F->steps[s].out = out;
    int kx = x >= 0 ? p->nodes[x].k : 1, vals[2 * MAX_SCOPE + 2];
    /* Per combined factor: its assignment at x's strategy 0 (base[j]) and
     * the step per strategy of x (xs[j]), for this assignment of the rest. */
    int *base = ir_xmalloc((size_t)(nin + 1) * sizeof *base), *xs = ir_xmalloc((size_t)(nin + 1) * sizeof *xs);
    const Factor **fs = ir_xmalloc((size_t)(nin + 1) * sizeof *fs);
    for (int j = 0; j < nin; j++)
        fs[j] = &F->f[in[j]];
    const Factor *o = &F->f[out];
    for (int a = 0; a < o->nassign; a++) {
        for (int v = 0; v < nv; v++)
            vals[v] = a / o->stride[v] % o->k[v];
        for (int j = 0; j < nin; j++) {
            const Factor *f = fs[j];
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
        double b1, b2;
        int bx = two_least(F, fs, nin, base, xs, kx, &b1, &b2);
        int d = ilp_elim_der(F, 1);
        F->dv[d] = bx;
        o = &F->f[out];
        F->f[out].off[a] = ilp_elim_point(F, b1, 0, d);
        ilp_elim_point(F, b2, 0, -1);
        F->f[out].cnt[a] = 2;
    }
    free(base);
    free(xs);
    free(fs);
}

/* eliminate_best_slow with each combined factor's variables looked up in
 * the made factor's scope once, not per assignment (a third of the
 * program's time was the lookups), and each one's assignment at x's
 * strategy 0 (base[j]) carried from one assignment of the rest to the next
 * as the digits count (the last fastest): a digit that steps adds its
 * stride in the factor (coef), one that wraps takes k - 1 of them off. The
 * same integers, so the same sums. */
static bool eliminate_best(IlpFrontier *F, const IlpProblem *p, int x, int s)
{
    if (F->slow) {
        eliminate_best_slow(F, p, x, s);
        return true;
    }
    int nin, *in = ilp_elim_alloc(F, (size_t)(F->nf + 1) * sizeof *in);
    int vars[2 * MAX_SCOPE + 2], nv;
    ilp_elim_gather(F, x, in, &nin, vars, &nv); /* within MAX_SCOPE: order() */
    F->steps[s] = (Step){x, -1, nin, in};
    int out = ilp_elim_factor(F, p, vars, nv);
    F->f[out].step = s;
    F->steps[s].out = out;
    int kx = x >= 0 ? p->nodes[x].k : 1, vals[2 * MAX_SCOPE + 2] = {0};
    /* Per combined factor: its stride per variable of the made factor's
     * scope (coef[j * nv + v], 0: not in it), the step per strategy of x
     * (xs[j]), and its assignment at x's strategy 0 (base[j]). */
    enum { FEW = 16 };
    int few[FEW * (2 + 2 * MAX_SCOPE + 2)];
    const Factor *few_fs[FEW];
    bool big = nin > FEW;
    int *base = big ? ir_xmalloc((size_t)nin * (2 + (size_t)nv) * sizeof *base + 1) : few;
    int *xs = base + nin, *coef = xs + nin;
    const Factor **fs = big ? ir_xmalloc((size_t)nin * sizeof *fs) : few_fs;
    for (int j = 0; j < nin; j++) {
        const Factor *f = fs[j] = &F->f[in[j]];
        xs[j] = 0, base[j] = 0;
        for (int v = 0; v < nv; v++)
            coef[j * nv + v] = 0;
        for (int i = 0; i < f->n; i++) {
            int v = 0;
            while (v < nv && vars[v] != f->var[i])
                v++;
            if (v == nv)
                xs[j] = f->stride[i];
            else
                coef[j * nv + v] = f->stride[i];
        }
    }
    const Factor *o = &F->f[out];
    for (int a = 0; a < o->nassign; a++) {
        double b1, b2;
        int bx = two_least(F, fs, nin, base, xs, kx, &b1, &b2);
        int d = ilp_elim_der(F, 1);
        F->dv[d] = bx;
        F->f[out].off[a] = ilp_elim_point(F, b1, 0, d);
        ilp_elim_point(F, b2, 0, -1);
        F->f[out].cnt[a] = 2;
        for (int v = nv - 1; v >= 0; v--) {
            if (++vals[v] < o->k[v]) {
                for (int j = 0; j < nin; j++)
                    base[j] += coef[j * nv + v];
                break;
            }
            vals[v] = 0;
            for (int j = 0; j < nin; j++)
                base[j] -= (o->k[v] - 1) * coef[j * nv + v];
        }
    }
    if (big) {
        free(base);
        free(fs);
    }
    return true;
}

static bool unique_best(const IlpProblem *p, double margin, int *choice, double *best, double *second,
                        bool slow)
{
    IlpFrontier *F = ilp_elim_run(p, slow, true, eliminate_best);
    bool ok = F != NULL;
    if (ok) {
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
