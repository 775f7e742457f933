/* test_ilp_core.c: the generic ILP core (ilp_problem.c, ilp_solve.c) against
 * brute force. Random problems: random node prices, edges with random class
 * maps and prices, max-groups, memory budgets from loose to impossible. For
 * each, every combination of choices is enumerated with ilp_eval; the
 * solver's choice must reach the same objective (1e-9 relative), respect the
 * budget, and report infeasibility exactly when nothing fits. */
#include "check.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



static void rand_vals(IlpVals *v, bool mem)
{
    memset(v, 0, sizeof *v);
    /* Some prices zero: ties and degenerate structure are common in practice. */
    v->q[ILP_FWD] = irand(4) ? urand() : 0;
    v->q[ILP_BWD] = irand(3) ? urand() : 0;
    v->q[ILP_SYNC] = irand(5) ? 0 : urand();
    if (mem) {
        v->q[ILP_MEM_PARAM] = urand() * 100;
        v->q[ILP_MEM_ACT] = irand(2) ? urand() * 50 : 0;
    }
}

/* A random class map of k strategies into at most k classes, all used. */
static int rand_classes(int k, int *c)
{
    int n = 1 + irand(k);
    for (int i = 0; i < k; i++)
        c[i] = i < n ? i : irand(n);
    for (int i = k - 1; i > 0; i--) {
        int j = irand(i + 1), t = c[i];
        c[i] = c[j];
        c[j] = t;
    }
    return n;
}

static IlpProblem *rand_problem(void)
{
    IlpProblem *p = ilp_new();
    p->obj_w[ILP_FWD] = 1 + irand(4);
    p->obj_w[ILP_BWD] = p->obj_w[ILP_FWD];
    int nn = 1 + irand(6);
    for (int u = 0; u < nn; u++) {
        int k = 1 + irand(nn > 4 ? 4 : 6);
        IlpVals v[8];
        for (int i = 0; i < k; i++)
            rand_vals(&v[i], true);
        ilp_add_node(p, k, v);
    }
    int ne = nn > 1 ? irand(2 * nn) : 0;
    for (int i = 0; i < ne; i++) {
        int u = irand(nn), v = irand(nn);
        if (u == v)
            continue;
        int cu[8], cv[8];
        int nI = rand_classes(p->nodes[u].k, cu), nJ = rand_classes(p->nodes[v].k, cv);
        IlpVals val[64];
        for (int k = 0; k < nI * nJ; k++)
            rand_vals(&val[k], irand(3) == 0);
        ilp_add_edge(p, u, v, cu, cv, val);
    }
    int ng = p->nedges ? irand(4) : 0;
    for (int gi = 0; gi < ng; gi++) {
        IlpVals w = {{0}};
        w.q[irand(2) ? ILP_FWD : ILP_BWD] = urand();
        if (irand(4) == 0)
            w.q[ILP_MEM_ACT] = urand() * 20;
        int g = ilp_add_group(p, &w);
        int ni = 1 + irand(3);
        for (int k = 0; k < ni; k++) {
            int e = irand(p->nedges);
            const IlpEdge *ed = &p->edges[e];
            double ind[64];
            for (int j = 0; j < ed->nI * ed->nJ; j++)
                ind[j] = irand(2) ? (irand(2) ? 1 : urand()) : 0;
            ilp_add_item(p, g, e, ind);
        }
    }
    return p;
}

/* Brute force: the best objective within the budget, or INFINITY. Also the
 * smallest distance of any combination's memory to the budget (to avoid
 * budgets sitting on a combination, where tolerances decide). */
static double brute(const IlpProblem *p, double *closest)
{
    int n = p->nnodes, c[16] = {0};
    double best = INFINITY;
    *closest = INFINITY;
    for (;;) {
        IlpVals t;
        double obj = ilp_eval(p, c, &t), mem = ilp_memory(p, &t);
        if (isfinite(p->budget) && fabs(mem - p->budget) < *closest)
            *closest = fabs(mem - p->budget);
        if (mem <= p->budget && obj < best)
            best = obj;
        int i = 0;
        while (i < n && ++c[i] == p->nodes[i].k)
            c[i++] = 0;
        if (i == n)
            break;
    }
    return best;
}

/* Memory of the combination with the least memory, and with the most. */
static void mem_range(const IlpProblem *p, double *lo, double *hi)
{
    int n = p->nnodes, c[16] = {0};
    *lo = INFINITY;
    *hi = -INFINITY;
    for (;;) {
        IlpVals t;
        ilp_eval(p, c, &t);
        double mem = ilp_memory(p, &t);
        *lo = fmin(*lo, mem);
        *hi = fmax(*hi, mem);
        int i = 0;
        while (i < n && ++c[i] == p->nodes[i].k)
            c[i++] = 0;
        if (i == n)
            break;
    }
}

int main(int argc, char **argv)
{
    ilp_seed(88172645463325252ull);
    int ncases = argc > 1 ? atoi(argv[1]) : 600;
    int nopt = 0, ninf = 0, nzero_gap = 0, npruned = 0;
    for (int tc = 0; tc < ncases; tc++) {
        IlpProblem *p = rand_problem();
        double lo, hi;
        mem_range(p, &lo, &hi);
        /* Budgets: none, loose, between the extremes, impossible. */
        switch (tc % 4) {
        case 0: p->budget = INFINITY; break;
        case 1: p->budget = hi * 1.01 + 1; break;
        case 2: p->budget = lo + (hi - lo) * urand(); break;
        case 3: p->budget = lo * (0.5 + 0.4 * urand()); break;
        }
        double closest;
        double best = brute(p, &closest);
        if (isfinite(p->budget) && closest < 1e-6 * fmax(1, p->budget)) {
            ilp_free(p);
            continue; /* the budget sits on a combination: tolerance decides */
        }
        IlpSolution s;
        /* With and without dominance pruning, by the dual simplex root or
         * glp_intopt's presolver: every path must agree with brute force. */
        IlpOpts o = {.time_limit_s = 20, .no_reduce = tc % 8 >= 4, .presolve = tc % 16 >= 8};
        int start[16];
        if (tc % 3 == 0) { /* a random starting plan, fitting or not, changes nothing */
            for (int u = 0; u < p->nnodes; u++)
                start[u] = irand(p->nodes[u].k);
            o.start = start;
        }
        IlpStatus st = ilp_solve(p, &o, &s);
        npruned += s.pruned;
        if (!isfinite(best)) {
            CHECK(st == ILP_INFEASIBLE, "case %d: brute force finds nothing within %g, solver says %s",
                  tc, p->budget, ilp_status_name(st));
            ninf++;
        } else {
            CHECK(st == ILP_OPTIMAL, "case %d: status %s", tc, ilp_status_name(st));
            if (st == ILP_OPTIMAL) {
                nopt++;
                double mem = ilp_memory(p, &s.total);
                CHECK(fabs(s.objective - best) <= 1e-9 * fmax(1, fabs(best)),
                      "case %d: solver %.17g, brute force %.17g", tc, s.objective, best);
                CHECK(mem <= p->budget * (1 + 1e-9) + 1e-9, "case %d: memory %g over budget %g", tc,
                      mem, p->budget);
                CHECK(fabs(s.glpk_obj - s.objective) <= 1e-6 * fmax(1, fabs(best)),
                      "case %d: GLPK's objective %.17g, evaluated %.17g", tc, s.glpk_obj, s.objective);
                CHECK(s.gap == 0 && s.bound == s.objective, "case %d: gap %g", tc, s.gap);
                nzero_gap += s.gap == 0;
                CHECK(s.nvars > 0 && s.nrows > 0, "case %d: size %d x %d", tc, s.nvars, s.nrows);
            }
        }
        ilp_solution_free(&s);
        ilp_free(p);
    }
    printf("ilp core: %d optimal, %d infeasible, %d strategies pruned; %d failures\n", nopt, ninf,
           npruned, failures);
    CHECK(nopt > ncases / 3 && ninf > ncases / 10, "too few cases of each kind");
    CHECK(npruned > ncases / 10, "dominance pruning never fired");
    return failures ? 1 : 0;
}
