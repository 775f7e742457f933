/* ilp_elim.h: what the two elimination programs over an IlpProblem share
 * (ilp_elim.c): the problem as factors over a few nodes each, the order
 * that eliminates its nodes, and the points the eliminations make. The
 * programs: the whole time/memory frontier (ilp_pareto.c) and the least
 * objective with its runner-up (ilp_best.c). Internal to passes/ilp. */
#ifndef PTDC_PASS_ILP_ELIM_H
#define PTDC_PASS_ILP_ELIM_H

#include "ilp/ilp.h"

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

/* A frontier, or the least-objective program's state (ilp_best.c). */
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
    IrArena *mem;                 /* the factors' off and cnt, the steps' in (freed whole) */
    bool slow;                    /* made the long way (ilp_frontier_ref): the matrix order,
                                     every group item read per assignment, qsort */
    bool merge;                   /* leaf factors of one scope summed into one (the least
                                     objective program's: ilp_elim.c, price_factors) */
};

/* n zeroed bytes of F's arena, freed with F. */
void *ilp_elim_alloc(IlpFrontier *F, size_t n);
/* A point (objective t, memory m, derivation der into dv; -1: none); its index. */
int ilp_elim_point(IlpFrontier *F, double t, double m, int der);
/* n derivation numbers reserved; the first's index. */
int ilp_elim_der(IlpFrontier *F, int n);
/* A factor over the sorted distinct nodes vars[0..n), its points to come; its index. */
int ilp_elim_factor(IlpFrontier *F, const IlpProblem *p, const int *vars, int n);
/* The problem's prices as factors of one point per assignment, and the
 * order of elimination into ord (F->slow: the long way); false where a
 * group or a neighbourhood is too wide for the programs (GLPK answers). */
bool ilp_elim_start(IlpFrontier *F, const IlpProblem *p, int *ord);
/* Every node of p eliminated in ilp_elim_start's order by step (s: the
 * step's number, x: its node, -1 for the last, which takes the factors of
 * no variable; false: give up), then the root: F, or NULL where the order
 * or a step gave up (GLPK answers). F->slow: the long way; merge: F->merge. */
IlpFrontier *ilp_elim_run(const IlpProblem *p, bool slow, bool merge,
                          bool (*step)(IlpFrontier *F, const IlpProblem *p, int x, int s));
/* Step s's inputs: every unused factor holding node x (x < 0: those of no
 * variable), marked used, into in (*nin of them), the other variables they
 * hold, sorted, into vars (*nv); false past MAX_SCOPE variables. */
bool ilp_elim_gather(IlpFrontier *F, int x, int *in, int *nin, int *vars, int *nv);

#endif
