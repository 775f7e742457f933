/* test_ilp_core.c: the generic ILP core (ilp_problem.c, ilp_solve.c) against
 * brute force. Random problems: random node prices, edges with random class
 * maps and prices, max-groups, memory budgets from loose to impossible. For
 * each, every combination of choices is enumerated with ilp_eval; the
 * solver's choice must reach the same objective (1e-9 relative), respect the
 * budget, and report infeasibility exactly when nothing fits. The start the
 * frontier walk gives GLPK (ilp_repair) must fit and be no slower than the
 * fastest choice that fits within two nodes of the last point; ilp_canon
 * must keep every price, only move down, and give one answer for two
 * mirrored nodes whichever way round they were chosen. */
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

/* Changes from c to d, and d's objective if it fits p's budget (cap as
 * ilp_repair's), else INFINITY. */
static int distance(const IlpProblem *p, const int *c, const int *d)
{
    int n = 0;
    for (int u = 0; u < p->nnodes; u++)
        n += c[u] != d[u];
    return n;
}

static double fits(const IlpProblem *p, const int *c)
{
    IlpVals t;
    double o = ilp_eval(p, c, &t);
    return ilp_memory(p, &t) <= p->budget * (1 - 1e-9) ? o : INFINITY;
}

/* ilp_repair from a random last point under a budget below its memory:
 * the start fits and is at least as fast as every choice that fits within
 * two nodes of that point (brute force). How many cases had one. */
static int check_repair(IlpProblem *p, int tc)
{
    int from[16], c[16] = {0};
    for (int u = 0; u < p->nnodes; u++)
        from[u] = irand(p->nodes[u].k);
    IlpVals t;
    ilp_eval(p, from, &t);
    double keep = p->budget;
    p->budget = ilp_memory(p, &t) * (0.5 + 0.5 * urand());
    double near = INFINITY;
    for (;;) {
        if (distance(p, from, c) <= 2)
            near = fmin(near, fits(p, c));
        int i = 0;
        while (i < p->nnodes && ++c[i] == p->nodes[i].k)
            c[i++] = 0;
        if (i == p->nnodes)
            break;
    }
    int *start = ilp_repair(p, from);
    if (start) {
        double o = fits(p, start);
        CHECK(isfinite(o), "case %d: ilp_repair's start does not fit %g", tc, p->budget);
        CHECK(o <= near + 1e-9 * fmax(1, fabs(near)),
              "case %d: ilp_repair's start %.17g, %.17g within two nodes of the last point", tc, o, near);
    } else {
        CHECK(!isfinite(near), "case %d: no start, %.17g within two nodes of the last point", tc, near);
    }
    free(start);
    p->budget = keep;
    return isfinite(near);
}

/* SYNC and MEM_PARAM of p priced by its nodes alone, as the lowering
 * prices them (gradient synchronisation and model states are a node's):
 * ilp_canon then refuses most moves by those node prices (may_tie). */
static void node_only(IlpProblem *p)
{
    for (int i = 0; i < p->nedges; i++)
        for (int k = 0; k < p->edges[i].nI * p->edges[i].nJ; k++)
            p->edges[i].val[k].q[ILP_SYNC] = p->edges[i].val[k].q[ILP_MEM_PARAM] = 0;
    for (int g = 0; g < p->ngroups; g++)
        p->groups[g].w.q[ILP_SYNC] = p->groups[g].w.q[ILP_MEM_PARAM] = 0;
}

/* ilp_canon against ilp_canon_ref (every move priced by the whole local
 * sum): the same answer by the same moves. How many moves. */
static int check_canon_ref(const IlpProblem *p, const int *c, int tc)
{
    int d[16], e[16];
    memcpy(d, c, (size_t)p->nnodes * sizeof *d);
    memcpy(e, c, (size_t)p->nnodes * sizeof *e);
    int a = ilp_canon(p, d), b = ilp_canon_ref(p, e);
    CHECK(a == b && memcmp(d, e, (size_t)p->nnodes * sizeof *d) == 0,
          "case %d: ilp_canon made %d moves, ilp_canon_ref %d, to another choice", tc, a, b);
    return b;
}

/* ilp_canon on every choice of p: the same prices, lower or equal in the
 * order of strategy indices, a fixed point; ilp_canon_ref's answer, on p
 * and on p with SYNC and MEM_PARAM made node prices (p is changed). */
static void check_canon_all(IlpProblem *p, int tc)
{
    int c[16] = {0}, d[16];
    for (;;) {
        IlpVals a, b;
        ilp_eval(p, c, &a);
        memcpy(d, c, sizeof c);
        ilp_canon(p, d);
        ilp_eval(p, d, &b);
        for (int q = 0; q < ILP_NQ; q++)
            CHECK(fabs(a.q[q] - b.q[q]) <= 1e-11 * fabs(a.q[q]), "case %d: ilp_canon moved quantity %d: %.17g -> %.17g",
                  tc, q, a.q[q], b.q[q]);
        int u = 0;
        while (u < p->nnodes && c[u] == d[u])
            u++;
        CHECK(u == p->nnodes || d[u] < c[u], "case %d: ilp_canon moved node %d up", tc, u);
        int e[16];
        memcpy(e, d, sizeof d);
        CHECK(ilp_canon(p, e) == 0, "case %d: ilp_canon's answer is not its own", tc);
        check_canon_ref(p, c, tc);
        int i = 0;
        while (i < p->nnodes && ++c[i] == p->nodes[i].k)
            c[i++] = 0;
        if (i == p->nnodes)
            break;
    }
    node_only(p);
    for (;;) {
        check_canon_ref(p, c, tc);
        int i = 0;
        while (i < p->nnodes && ++c[i] == p->nodes[i].k)
            c[i++] = 0;
        if (i == p->nnodes)
            break;
    }
}

/* Two mirrored nodes (the same prices, the same edges to a third) chosen
 * either way round: ilp_canon gives one answer. How many pairs differed. */
static int check_canon_mirror(int *moved)
{
    IlpProblem *p = ilp_new();
    int k = 2 + irand(3);
    IlpVals v[8], x[8];
    for (int i = 0; i < k; i++)
        rand_vals(&v[i], true);
    for (int i = 0; i < 3; i++)
        rand_vals(&x[i], true);
    ilp_add_node(p, 3, x);
    ilp_add_node(p, k, v);
    ilp_add_node(p, k, v);
    int cu[8], cv[8];
    int nI = rand_classes(k, cu), nJ = rand_classes(3, cv);
    IlpVals val[64];
    for (int i = 0; i < nI * nJ; i++)
        rand_vals(&val[i], irand(3) == 0);
    ilp_add_edge(p, 1, 0, cu, cv, val);
    ilp_add_edge(p, 2, 0, cu, cv, val);
    if (irand(2))
        node_only(p);
    int differed = 0;
    for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++)
            for (int c0 = 0; c0 < 3; c0++) {
                int s[3] = {c0, a, b}, t[3] = {c0, b, a};
                *moved += check_canon_ref(p, s, -1) + check_canon_ref(p, t, -1);
                ilp_canon(p, s);
                ilp_canon(p, t);
                differed += a != b;
                CHECK(memcmp(s, t, sizeof s) == 0, "mirrored nodes: (%d %d %d) and (%d %d %d) -> (%d %d %d), (%d %d %d)",
                      c0, a, b, c0, b, a, s[0], s[1], s[2], t[0], t[1], t[2]);
            }
    ilp_free(p);
    return differed;
}

/* A node with twin strategies (0 and the last: the same prices, the same
 * class on each of its edges) between two others, SYNC zero everywhere and
 * SYNC and MEM_PARAM node prices: every choice taking the last twin ties
 * with the one taking strategy 0, which ilp_canon must move to (one node
 * down, its neighbours re-laid out: move_near), as ilp_canon_ref does; a
 * quantity that sums to zero has no tolerance, so may_tie must let exact
 * equality through. How many choices moved. */
static int check_canon_twin(void)
{
    IlpProblem *p = ilp_new();
    int k = 2 + irand(3);
    IlpVals v[8];
    for (int u = 0; u < 3; u++) {
        int ku = u == 1 ? k : 2 + irand(2);
        for (int i = 0; i < ku; i++) {
            rand_vals(&v[i], true);
            v[i].q[ILP_SYNC] = 0;
        }
        if (u == 1)
            v[k - 1] = v[0];
        ilp_add_node(p, ku, v);
    }
    for (int side = 0; side < 2; side++) {
        int other = side ? 2 : 0, cu[8], cv[8];
        int nI = rand_classes(k - 1, cu), nJ = rand_classes(p->nodes[other].k, cv);
        cu[k - 1] = cu[0];
        IlpVals val[64];
        for (int i = 0; i < nI * nJ; i++)
            rand_vals(&val[i], irand(3) == 0);
        ilp_add_edge(p, 1, other, cu, cv, val);
    }
    node_only(p);
    int moved = 0;
    for (int a = 0; a < p->nodes[0].k; a++)
        for (int b = 0; b < p->nodes[2].k; b++) {
            int c[3] = {a, k - 1, b};
            moved += check_canon_ref(p, c, -2) > 0;
            ilp_canon(p, c);
            CHECK(c[1] < k - 1, "twin strategies: node 1 kept the last twin (%d %d %d)", c[0], c[1], c[2]);
        }
    ilp_free(p);
    return moved;
}

int main(int argc, char **argv)
{
    ilp_seed(88172645463325252ull);
    int ncases = argc > 1 ? atoi(argv[1]) : 600;
    int nopt = 0, ninf = 0, nzero_gap = 0, npruned = 0, nrepair = 0;
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
        nrepair += check_repair(p, tc);
        if (tc % 4 == 0)
            check_canon_all(p, tc);
        ilp_free(p);
    }
    int mirrored = 0, moved = 0;
    for (int i = 0; i < 20; i++)
        mirrored += check_canon_mirror(&moved);
    int twins = 0;
    for (int i = 0; i < 20; i++)
        twins += check_canon_twin();
    printf("ilp core: %d optimal, %d infeasible, %d strategies pruned; %d starts against a fitting "
           "choice near the last point, %d mirrored choices (%d moves of ilp_canon_ref), %d twins moved; %d "
           "failures\n", nopt, ninf, npruned, nrepair, mirrored, moved, twins, failures);
    CHECK(nrepair > ncases / 4, "too few starts checked");
    CHECK(moved > 0 && twins > 0, "ilp_canon_ref moved no mirrored choice or twin");
    CHECK(nopt > ncases / 3 && ninf > ncases / 10, "too few cases of each kind");
    CHECK(npruned > ncases / 10, "dominance pruning never fired");
    return failures ? 1 : 0;
}
