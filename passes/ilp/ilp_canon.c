/* ilp_canon.c: one answer among choices of equal prices, whatever path the
 * solver took to its optimum.
 *
 * GLPK's answer depends on its path. Restarted from the root basis of the
 * same problem's previous budget (IlpOpts.warm_basis: the frontier walk asks
 * one layer again and again with less memory), the dual simplex may end on
 * another optimal vertex, and branch and bound then hands back another choice
 * of exactly the same time and memory: on a DeepSeek-V3 MoE layer, which of
 * the shared expert's two projections splits the sequence and which the
 * width, or which of two layouts the SwiGLU between them takes
 * (tests/ilp/test_ilp_warm.c). Downstream that is another plan.
 *
 * A perturbation of the objective (a tiny index-based term) cannot order
 * such ties without reordering distinct prices: the prices are the cost
 * model's doubles, not multiples of a quantum, and GLPK separates nothing
 * finer than its tolerances (1e-7 on reduced costs, 1e-9 on the objective),
 * so a term it would see is larger than real differences of prices (a
 * collective's latency against a step of seconds is 1e-6). So the answer is
 * made canonical after the solve instead: from the solver's choice, move
 * down in the lexicographic order of the strategy indices while every
 * quantity (each time and each memory total, not only the objective) stays
 * within TIE of the solver's: one node to a lower strategy with its
 * neighbours re-laid out (move_near), or two nodes with the same number of
 * strategies exchanging theirs (the mirrored projections above), until no
 * such move is left. Each move lowers the choice in that order, so it ends.
 * Choices of equal prices that these moves connect end on the same one,
 * whichever of them the solver returned; ties that only a move of nodes
 * further apart connects are not merged (none seen: tests/ilp/test_ilp_warm.c
 * and bench/plan-time). The prices are unchanged up to TIE: the answer is
 * still an optimum of the same time and memory. */
#include "ilp/ilp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Relative difference of two totals still taken for a tie: summing the same
 * prices in another order moves a total by a few ulps (1e-15), and a real
 * difference of prices is at least a nanosecond or a byte against seconds
 * and gigabytes (1e-10). */
#define TIE 1e-12

typedef struct {
    IlpLocal *L;
    double tol[ILP_NQ];           /* TIE of each quantity's total */
    bool whole;                   /* every move priced by the whole local sum (ilp_canon_ref) */
} Canon;

static void add(IlpVals *t, const IlpVals *v, double f)
{
    for (int q = 0; q < ILP_NQ; q++)
        t->q[q] += f * v->q[q];
}

static bool tie(const Canon *C, const IlpVals *a, const IlpVals *b)
{
    for (int q = 0; q < ILP_NQ; q++)
        if (!(fabs(a->q[q] - b->q[q]) <= C->tol[q]))
            return false;
    return true;
}

/* Is c below was (the nodes set[0..n) changed) in the lexicographic order? */
static bool lower(const int *c, const int *was, const int *set, int n)
{
    int first = -1;
    for (int s = 0; s < n; s++)
        if (c[set[s]] != was[s] && (first < 0 || set[s] < set[first]))
            first = s;
    return first >= 0 && c[set[first]] < was[first];
}

/* Could the move from was to c of the nodes set[0..n) keep every price?
 * False where a quantity that only node prices carry (IlpLocal.node_only:
 * SYNC and MEM_PARAM on every lowered stage, a weight's sharding) changes
 * beyond TIE. ilp_local_sum adds that quantity's node prices in set order
 * and nothing else but zeros (x + 0 is x), so the sums here are its, bit
 * for bit: a move refused here is one the whole sum would refuse, without
 * reading the edges and groups (62% of the moves tried on DeepSeek-V3 on
 * 2048 A100s). */
static bool may_tie(const Canon *C, const int *c, const int *was, const int *set, int n)
{
    const IlpProblem *p = C->L->p;
    for (int q = 0; q < ILP_NQ && !C->whole; q++) {
        if (!C->L->node_only[q])
            continue;
        double a = 0, b = 0;
        for (int s = 0; s < n; s++) {
            a += p->nodes[set[s]].val[c[set[s]]].q[q];
            b += p->nodes[set[s]].val[was[s]].q[q];
        }
        if (!(fabs(a - b) <= C->tol[q]))
            return false;
    }
    return true;
}

/* Node u to a lower strategy, its neighbours (the other ends of its edges)
 * to any, at equal prices and lower in the order: the first such move, u's
 * strategies from the lowest, its neighbours' in counting order (a
 * residual stream laid out either way round a layer's cycle of adds and
 * boundary moves three nodes at once). A neighbourhood of more than
 * CANON_MAX assignments is tried with u alone moving. True if moved. */
enum { CANON_MAX = 16 };

static bool move_near(Canon *C, int *c, int u)
{
    const IlpProblem *p = C->L->p;
    if (c[u] == 0)
        return false; /* no lower strategy: no move (and no sums to make) */
    int set[64], was[64], n = 0;
    set[n++] = u;
    long combos = 1;
    for (int j = C->L->estart[u]; j < C->L->estart[u + 1] && n < 64; j++) {
        const IlpEdge *e = &p->edges[C->L->edges[j]];
        int v = e->u == u ? e->v : e->u;
        bool seen = false;
        for (int s = 0; s < n; s++)
            seen |= set[s] == v;
        if (!seen && p->nodes[v].k > 1) {
            set[n++] = v;
            combos *= p->nodes[v].k;
        }
    }
    if (combos > CANON_MAX)
        n = 1;
    for (int s = 0; s < n; s++)
        was[s] = c[set[s]];
    IlpVals before = ilp_local_sum(C->L, c, set, n);
    for (int i = 0; i < was[0]; i++) {
        c[u] = i;
        for (int s = 1; s < n; s++)
            c[set[s]] = 0;
        for (;;) {
            if (lower(c, was, set, n) && may_tie(C, c, was, set, n)) {
                IlpVals after = ilp_local_sum(C->L, c, set, n);
                if (tie(C, &after, &before))
                    return true;
            }
            int s = 1; /* the next assignment of the neighbours */
            while (s < n && ++c[set[s]] == p->nodes[set[s]].k)
                c[set[s++]] = 0;
            if (s == n)
                break;
        }
    }
    for (int s = 0; s < n; s++)
        c[set[s]] = was[s];
    return false;
}

/* u < v exchange strategies when that puts the lower index first and keeps
 * every price (two mirrored nodes, not neighbours: the shared expert's
 * projections); true if moved. Cheap test first: the two nodes' own prices. */
static bool swap_two(Canon *C, int *c, int u, int v)
{
    const IlpProblem *p = C->L->p;
    int a = c[u], b = c[v];
    if (p->nodes[u].k != p->nodes[v].k || a <= b)
        return false;
    IlpVals own0 = {{0}}, own1 = {{0}};
    add(&own0, &p->nodes[u].val[a], 1);
    add(&own0, &p->nodes[v].val[b], 1);
    add(&own1, &p->nodes[u].val[b], 1);
    add(&own1, &p->nodes[v].val[a], 1);
    if (!tie(C, &own0, &own1))
        return false;
    int set[2] = {u, v};
    IlpVals before = ilp_local_sum(C->L, c, set, 2);
    c[u] = b, c[v] = a;
    IlpVals after = ilp_local_sum(C->L, c, set, 2);
    if (tie(C, &after, &before))
        return true;
    c[u] = a, c[v] = b;
    return false;
}

static int canon(IlpLocal *L, int *choice, const IlpVals *given, bool whole)
{
    const IlpProblem *p = L->p;
    IlpVals total;
    if (given)
        total = *given;
    else
        ilp_eval(p, choice, &total);
    Canon C;
    C.L = L;
    C.whole = whole;
    for (int q = 0; q < ILP_NQ; q++)
        C.tol[q] = TIE * fabs(total.q[q]);
    int moves = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int u = 0; u < p->nnodes; u++)
            for (int v = u + 1; v < p->nnodes; v++)
                if (swap_two(&C, choice, u, v))
                    moved = true, moves++;
        for (int u = 0; u < p->nnodes; u++)
            if (move_near(&C, choice, u))
                moved = true, moves++;
    }
    return moves;
}

int ilp_canon_local(IlpLocal *L, int *choice, const IlpVals *total) { return canon(L, choice, total, false); }

static int canon_fresh(const IlpProblem *p, int *choice, bool whole)
{
    IlpLocal L;
    ilp_local_init(&L, p);
    int moves = canon(&L, choice, NULL, whole);
    ilp_local_free(&L);
    return moves;
}

int ilp_canon(const IlpProblem *p, int *choice) { return canon_fresh(p, choice, false); }
int ilp_canon_ref(const IlpProblem *p, int *choice) { return canon_fresh(p, choice, true); }
