/* test_ilp_pareto.c: the time/memory frontier by dynamic program
 * (ilp_pareto.c), which answers the frontier walk's budgets in place of
 * GLPK (PASS_ILP_FRONTIER), against brute force and against GLPK.
 *
 * The least objective alone by the same elimination (ilp_unique_best,
 * which answers unbudgeted solves where the fastest choice is unique): the
 * least and second least against brute force, the choice the argmin, and
 * on the real layers GLPK's choice.
 *
 * Random problems (up to 8 nodes of up to 4 strategies, edges with random
 * class maps, max-groups over the reads of one node's output and over
 * random edges, some with a memory weight): at a budget between every two
 * neighbouring memories any choice has, below the least and above the
 * largest (up to 40 of them), the frontier's choice must be the brute-force optimum (1e-12
 * relative), fit, and carry the objective and memory ilp_eval gives it; it
 * must find nothing exactly where brute force finds nothing.
 *
 * Real layers priced by the real cost model (a DeepSeek-V3 MoE layer on
 * 16 x 4 A100s, a LLaMA-3 8B layer on 8 x 8 H100s with and without
 * recomputation): their lowered problems, unreduced, at a budget between
 * every two neighbouring points of the frontier and above the largest: GLPK
 * (the default path without the frontier) must find the same optimum (its
 * tolerance, 1e-9) and nothing below the least point. */
#include "check.h"
#include "frontend.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PTDC_SOURCE_DIR
#define PTDC_SOURCE_DIR "."
#endif

static void rand_vals(IlpVals *v, bool mem)
{
    memset(v, 0, sizeof *v);
    v->q[ILP_FWD] = irand(4) ? urand() : 0;
    v->q[ILP_BWD] = irand(3) ? urand() : 0;
    v->q[ILP_SYNC] = irand(5) ? 0 : urand();
    if (mem) {
        v->q[ILP_MEM_PARAM] = irand(4) ? urand() * 100 : 0;
        v->q[ILP_MEM_ACT] = irand(2) ? urand() * 50 : 0;
    }
}

static void rand_edge(IlpProblem *p, int u, int v)
{
    int cu[8], cv[8], ku = p->nodes[u].k, kv = p->nodes[v].k;
    int nI = 1 + irand(ku), nJ = 1 + irand(kv);
    for (int i = 0; i < ku; i++)
        cu[i] = i < nI ? i : irand(nI);
    for (int j = 0; j < kv; j++)
        cv[j] = j < nJ ? j : irand(nJ);
    IlpVals val[64];
    for (int k = 0; k < nI * nJ; k++)
        rand_vals(&val[k], irand(3) == 0);
    ilp_add_edge(p, u, v, cu, cv, val);
}

/* A chain with skips (a layer's residual stream) and random extra edges;
 * groups over the edges out of one node (one tensor's readers) and over
 * random edges. */
static IlpProblem *rand_problem(int maxn)
{
    IlpProblem *p = ilp_new();
    p->obj_w[ILP_FWD] = 1 + irand(4);
    p->obj_w[ILP_BWD] = p->obj_w[ILP_FWD];
    int nn = 1 + irand(maxn);
    for (int u = 0; u < nn; u++) {
        int k = 1 + irand(4);
        IlpVals v[8];
        for (int i = 0; i < k; i++)
            rand_vals(&v[i], true);
        ilp_add_node(p, k, v);
    }
    for (int u = 0; u + 1 < nn; u++) {
        rand_edge(p, u, u + 1);
        if (u + 2 < nn && irand(2))
            rand_edge(p, u, u + 2);
    }
    for (int i = irand(3); i > 0 && nn > 1; i--) {
        int u = irand(nn), v = irand(nn);
        if (u != v)
            rand_edge(p, u, v);
    }
    for (int gi = p->nedges ? irand(5) : 0; gi > 0; gi--) {
        IlpVals w = {{0}};
        w.q[irand(2) ? ILP_FWD : ILP_BWD] = urand();
        if (irand(4) == 0)
            w.q[ILP_MEM_ACT] = urand() * 20;
        int g = ilp_add_group(p, &w);
        int src = p->edges[irand(p->nedges)].u;
        for (int e = 0; e < p->nedges; e++) {
            bool star = p->edges[e].u == src;
            if (!(gi % 2 ? star : irand(3) == 0))
                continue;
            const IlpEdge *ed = &p->edges[e];
            double ind[64];
            for (int j = 0; j < ed->nI * ed->nJ; j++)
                ind[j] = irand(2) ? (irand(2) ? 1 : urand()) : 0;
            ilp_add_item(p, g, e, ind);
        }
    }
    return p;
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every choice's memory, sorted; returns how many. */
static int memories(const IlpProblem *p, double *mem)
{
    int n = p->nnodes, c[16] = {0}, nm = 0;
    for (;;) {
        IlpVals t;
        ilp_eval(p, c, &t);
        mem[nm++] = ilp_memory(p, &t);
        int i = 0;
        while (i < n && ++c[i] == p->nodes[i].k)
            c[i++] = 0;
        if (i == n)
            break;
    }
    qsort(mem, (size_t)nm, sizeof *mem, by_double);
    return nm;
}

static double brute(const IlpProblem *p, double budget)
{
    int n = p->nnodes, c[16] = {0};
    double best = INFINITY;
    for (;;) {
        IlpVals t;
        double obj = ilp_eval(p, c, &t);
        if (ilp_memory(p, &t) <= budget && obj < best)
            best = obj;
        int i = 0;
        while (i < n && ++c[i] == p->nodes[i].k)
            c[i++] = 0;
        if (i == n)
            break;
    }
    return best;
}

static bool near(double a, double b, double rel) { return fabs(a - b) <= rel * fmax(1, fmax(fabs(a), fabs(b))); }

/* The frontier's answer at `budget` against brute force; true if one fits. */
static bool check_budget(const IlpProblem *p, const IlpFrontier *F, double budget, int tc)
{
    int choice[16];
    double t, m;
    bool found = ilp_frontier_choice(F, budget, choice, &t, &m);
    double best = brute(p, budget);
    CHECK(found == isfinite(best), "case %d, budget %.17g: frontier %s, brute force %.17g", tc, budget,
          found ? "finds a choice" : "finds none", best);
    if (!found || !isfinite(best))
        return found;
    IlpVals tot;
    double obj = ilp_eval(p, choice, &tot), mem = ilp_memory(p, &tot);
    CHECK(near(obj, best, 1e-12), "case %d, budget %.17g: frontier's choice %.17g, brute force %.17g", tc,
          budget, obj, best);
    CHECK(mem <= budget, "case %d: memory %.17g over the budget %.17g", tc, mem, budget);
    CHECK(near(t, obj, 1e-12) && near(m, mem, 1e-12),
          "case %d: the program summed %.17g, %.17g; ilp_eval %.17g, %.17g", tc, t, m, obj, mem);
    return true;
}

/* ilp_unique_best against brute force: the least and second least
 * objective over all choices (ties counted twice), and whether the least
 * is unique beyond `margin`; its choice must be the brute-force argmin. */
static bool check_unique(const IlpProblem *p, int tc)
{
    int n = p->nnodes, c[16] = {0}, arg[16], got[16];
    double b1 = INFINITY, b2 = INFINITY;
    for (;;) {
        double obj = ilp_eval(p, c, NULL);
        if (obj < b1) {
            b2 = b1;
            b1 = obj;
            memcpy(arg, c, sizeof arg);
        } else if (obj < b2) {
            b2 = obj;
        }
        int i = 0;
        while (i < n && ++c[i] == p->nodes[i].k)
            c[i++] = 0;
        if (i == n)
            break;
    }
    double margin = 1e-6, d1, d2;
    bool uq = ilp_unique_best(p, margin, got, &d1, &d2);
    CHECK(near(d1, b1, 1e-12) && (isinf(b2) ? isinf(d2) : near(d2, b2, 1e-12)),
          "case %d: least two %.17g, %.17g; brute force %.17g, %.17g", tc, d1, d2, b1, b2);
    bool want = b2 - b1 > margin * fmax(fabs(b1), 1e-300);
    if (fabs(b2 - b1 - margin * fabs(b1)) > 1e-12 * fmax(1, fabs(b1))) /* not on the margin */
        CHECK(uq == want, "case %d: unique %d, brute force %.17g, %.17g", tc, uq, b1, b2);
    if (uq)
        CHECK(memcmp(got, arg, (size_t)n * sizeof *got) == 0, "case %d: not the fastest choice", tc);
    return uq;
}

/* The frontier and the fastest choice against the same programs made the
 * long way (ilp_frontier_ref, ilp_unique_best_ref: the matrix order of
 * elimination, every group item read per assignment, qsort): the same
 * points bit for bit, read back to the same choices, and the same least
 * two objectives and choice. */
static void check_ref(const IlpProblem *p, const IlpFrontier *F, int tc)
{
    IlpFrontier *R = ilp_frontier_ref(p);
    CHECK(!F == !R && (!F || ilp_frontier_same(F, R)), "case %d: the frontier differs from ilp_frontier_ref's",
          tc);
    ilp_frontier_free(R);
    int n = p->nnodes, *a = ir_xmalloc((size_t)(n + 1) * sizeof *a), *b = ir_xmalloc((size_t)(n + 1) * sizeof *b);
    double a1 = 0, a2 = 0, b1 = 0, b2 = 0;
    bool ua = ilp_unique_best(p, 1e-6, a, &a1, &a2), ub = ilp_unique_best_ref(p, 1e-6, b, &b1, &b2);
    CHECK(ua == ub && !memcmp(&a1, &b1, sizeof a1) && !memcmp(&a2, &b2, sizeof a2) &&
          (!ua || !memcmp(a, b, (size_t)n * sizeof *a)),
          "case %d: the fastest choice differs from ilp_unique_best_ref's (%.17g, %.17g against %.17g, %.17g)", tc,
          a1, a2, b1, b2);
    free(a);
    free(b);
}

/* Problems of up to 60 nodes (too many for brute force, as many as a
 * layer's after merging): the programs against the long way only. */
static void wide_problems(int ncases)
{
    int made = 0;
    for (int tc = 0; tc < ncases; tc++) {
        IlpProblem *p = rand_problem(60);
        IlpFrontier *F = ilp_frontier(p);
        made += F != NULL;
        check_ref(p, F, tc);
        ilp_frontier_free(F);
        ilp_free(p);
    }
    printf("wide problems: %d, %d with a frontier, each the same as made the long way\n", ncases, made);
    CHECK(made > ncases / 2, "too few wide problems with a frontier: %d of %d", made, ncases);
}

static int random_problems(int ncases)
{
    int unique = 0;
    int budgets = 0, fitted = 0;
    static double mem[1 << 16];
    for (int tc = 0; tc < ncases; tc++) {
        IlpProblem *p = rand_problem(8);
        unique += check_unique(p, tc);
        IlpFrontier *F = ilp_frontier(p);
        CHECK(F != NULL, "case %d: no frontier for %d nodes", tc, p->nnodes);
        check_ref(p, F, tc);
        if (F) {
            int nm = memories(p, mem), stride = nm / 40 + 1; /* at most ~40 budgets */
            for (int i = 0; i <= nm; i = i < nm && i + stride > nm ? nm : i + stride) {
                double b = i == 0 ? mem[0] - 1 - fabs(mem[0]) * 1e-6
                           : i == nm ? mem[nm - 1] * (1 + 1e-9) + 1
                                     : (mem[i - 1] + mem[i]) / 2;
                if (i > 0 && i < nm && !(mem[i] - mem[i - 1] > 1e-9 * fmax(1, mem[i])))
                    continue; /* no budget between these two without rounding deciding */
                fitted += check_budget(p, F, b, tc);
                budgets++;
            }
        }
        ilp_frontier_free(F);
        ilp_free(p);
    }
    printf("random problems: %d, %d budgets (%d with a choice that fits); the fastest choice unique "
           "in %d\n", ncases, budgets, fitted, unique);
    CHECK(unique > ncases / 4 && unique < ncases, "unique fastest choices in %d of %d", unique, ncases);
    CHECK(fitted > budgets / 2 && fitted < budgets, "too few budgets of each kind: %d of %d", fitted, budgets);
    return budgets;
}

typedef struct {
    const char *model, *gpu;
    FeSet set;
    int piece, dp, tp;
    int64_t mb_seqs;
    int num_micro;
    PlanRecompute recompute;
} Case;

/* One real layer's problem (as pass_ilp_stage lowers it): the frontier
 * against GLPK between its points. Returns the frontier's points. */
static int real_layer(const Case *c)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", PTDC_SOURCE_DIR, c->model);
    IrArena *arena = ir_arena_new();
    IrGraph *g = fe_compile_file(arena, path, &c->set, c->set.name ? 1 : 0, 0);
    if (!g)
        ir_die("test: cannot compile %s", path);
    PassCluster cl;
    memset(&cl, 0, sizeof cl);
    if (!pass_gpu_preset(c->gpu, &cl.gpu))
        ir_die("test: no %s preset", c->gpu);
    cl.gpus_per_node = 8;
    cl.ngpus = c->dp * c->tp;
    PassCostCtx ctx = {.cl = &cl, .attention = PLAN_ATTN_FLASH};
    PassIlpQuery q;
    memset(&q, 0, sizeof q);
    q.first_piece = c->piece;
    q.npieces = 1;
    plan_mesh_make(&q.mesh, c->dp, c->tp, 8);
    q.mb_seqs = c->mb_seqs;
    q.num_micro = c->num_micro;
    q.zero = 1;
    q.recompute = c->recompute;
    q.inflight = 1;
    pass_ilp_pins(g, 0, 1, true, q.allow);
    q.require = PLAN_REQ_BATCH;
    IlpSeg *s = ilp_lower(&ctx, &pass_ilp_costs, g, &q);
    ilp_merge(s);
    ilp_build(s);
    IlpProblem *p = s->prob;
    IlpFrontier *F = ilp_frontier(p);
    CHECK(F != NULL, "%s: no frontier", c->model);
    int n = F ? ilp_frontier_points(F) : 0;
    double *pm = ir_xmalloc((size_t)(n + 1) * sizeof *pm);
    /* The points' memories: each point's choice read back at a budget of
     * its own memory (the fastest within it is that point). */
    int *choice = ir_xmalloc((size_t)(p->nnodes + 1) * sizeof *choice);
    double t, m = INFINITY;
    for (int i = n - 1; i >= 0; i--) {
        CHECK(ilp_frontier_choice(F, m, choice, &t, &m), "%s: point %d not found", c->model, i);
        pm[i] = m;
        m = nextafter(m, -INFINITY);
    }
    CHECK(!ilp_frontier_choice(F, m, choice, NULL, NULL), "%s: a point below the least", c->model);
    check_ref(p, F, -1);
    int moved = 0, *d = ir_xmalloc((size_t)(p->nnodes + 1) * sizeof *d);
    for (int i = 0; i < n; i++) { /* ilp_canon at every point, against every move priced whole */
        ilp_frontier_choice(F, pm[i], choice, NULL, NULL);
        memcpy(d, choice, (size_t)p->nnodes * sizeof *d);
        int a = ilp_canon(p, choice), b = ilp_canon_ref(p, d);
        CHECK(a == b && !memcmp(choice, d, (size_t)p->nnodes * sizeof *d),
              "%s: point %d: ilp_canon %d moves, ilp_canon_ref %d, to another choice", c->model, i, a, b);
        moved += b;
    }
    free(d);
    /* Without a budget: the unique fastest choice is GLPK's. */
    p->budget = INFINITY;
    IlpSolution g0;
    ilp_solve(p, &(IlpOpts){.time_limit_s = 60}, &g0);
    bool uq = ilp_unique_best(p, 1e-5, choice, NULL, NULL);
    CHECK(uq && g0.choice && memcmp(choice, g0.choice, (size_t)p->nnodes * sizeof *choice) == 0,
          "%s: the unique fastest choice (%d) is not GLPK's", c->model, uq);
    ilp_solution_free(&g0);
    for (int i = 0; i <= n; i++) {
        double b = i == 0 ? pm[0] * 0.99 : i == n ? pm[n - 1] * 1.01 : (pm[i - 1] + pm[i]) / 2;
        p->budget = b;
        IlpSolution sol;
        IlpStatus st = ilp_solve(p, &(IlpOpts){.time_limit_s = 60}, &sol);
        bool found = ilp_frontier_choice(F, b, choice, &t, &m);
        CHECK(found == (st == ILP_OPTIMAL), "%s, budget %.6g GiB: frontier %d, GLPK %s", c->model,
              b / 1073741824.0, found, ilp_status_name(st));
        if (found && st == ILP_OPTIMAL) {
            IlpVals tot;
            double obj = ilp_eval(p, choice, &tot);
            CHECK(near(obj, sol.objective, 1e-9), "%s, budget %.6g GiB: frontier %.12g, GLPK %.12g", c->model,
                  b / 1073741824.0, obj, sol.objective);
            CHECK(ilp_memory(p, &tot) <= b, "%s: the frontier's choice over the budget", c->model);
        }
        ilp_solution_free(&sol);
    }
    printf("%s, recompute %s: %d nodes, %d frontier points, each between them the same as GLPK's; the "
           "long way's points, and ilp_canon_ref's answers (%d moves)\n", c->model,
           plan_recompute_name(c->recompute), p->nnodes, n, moved);
    free(choice);
    free(pm);
    ilp_frontier_free(F);
    ilp_seg_free(s);
    ir_graph_free(g);
    ir_arena_free(arena);
    return n;
}

int main(int argc, char **argv)
{
    ilp_seed(0x9e3779b97f4a7c15ull);
    random_problems(argc > 1 ? atoi(argv[1]) : 300);
    wide_problems(argc > 1 ? atoi(argv[1]) / 3 : 100);
    const Case cases[] = {
        {"deepseek-v3.mdl", "a100-80gb", {"n_layers", "6"}, 5, 16, 4, 16, 30, PLAN_RECOMPUTE_NONE},
        {"llama3-8b.mdl", "h100-80gb", {NULL, NULL}, 2, 8, 8, 8, 16, PLAN_RECOMPUTE_NONE},
        {"llama3-8b.mdl", "h100-80gb", {NULL, NULL}, 2, 8, 8, 8, 16, PLAN_RECOMPUTE_FFN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(real_layer(&cases[i]) >= 5, "%s: too few frontier points", cases[i].model);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures != 0;
}
