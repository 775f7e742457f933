/* ilp.h: exports of passes/ilp/: intra-operator auto-sharding of one
 * pipeline stage as an integer linear program (GLPK), priced by the cost
 * model. The search and the driver call pass_ilp_stage. */
#ifndef PTDC_PASS_ILP_H
#define PTDC_PASS_ILP_H

#include "cost/cost.h"

/* Intra-operator auto-sharding as an integer linear program solved with GLPK
 * (docs/sharding.md). Two layers:
 *   - a generic core (ilp_problem.c, ilp_solve.c) that knows nothing of the
 *     IR: nodes choosing one strategy each, edges priced per pair of choices,
 *     max-groups, one memory constraint;
 *   - the lowering of a pipeline stage onto it (ilp_lower.c, ilp_merge.c,
 *     ilp_stage.c, ilp_print.c): strategies from plan_strategies, prices from
 *     the cost model, one copy of each distinct repeated layer.
 * The entry point for the pipeline search and the driver is pass_ilp_stage. */

/* Every price in the core carries these quantities; the objective and the
 * memory constraint are fixed linear combinations of them (IlpProblem.obj_w,
 * mem_w). The lowering fills them with seconds per micro-batch (FWD, BWD),
 * seconds per step (SYNC) and bytes per device (MEM_*). */
enum { ILP_FWD, ILP_BWD, ILP_SYNC, ILP_MEM_PARAM, ILP_MEM_ACT, ILP_NQ };

typedef struct IlpVals {
    double q[ILP_NQ];
} IlpVals;

typedef struct IlpNode {
    int k;                        /* strategies: exactly one is chosen */
    IlpVals *val;                 /* [k] */
} IlpNode;

/* A price on the pair (choice of u, choice of v). Choices are grouped into
 * classes that price alike: cu[i] is the class of u's strategy i (nI classes),
 * cv[j] that of v's (nJ); val[I * nJ + J] the price of the class pair. */
typedef struct IlpEdge {
    int u, v;
    int nI, nJ;
    int *cu, *cv;                 /* [nodes[u].k], [nodes[v].k] */
    IlpVals *val;                 /* [nI * nJ] */
} IlpEdge;

/* A max-group prices w times the largest of its items, an item being a
 * non-negative number per class pair of one edge: max over items of
 * ind[I * nJ + J] at the chosen classes. Used for work that several edges
 * share and that is done once (one reduction of a summed gradient, one
 * all-gather read by three matmuls). w must not lower memory. */
typedef struct IlpItem {
    int edge;
    double *ind;                  /* [nI * nJ] of that edge, >= 0 */
} IlpItem;

typedef struct IlpGroup {
    IlpVals w;
    int nitems, cap;
    IlpItem *items;
} IlpGroup;

typedef struct IlpProblem {
    int nnodes, nedges, ngroups;
    int capn, cape, capg;
    IlpNode *nodes;
    IlpEdge *edges;
    IlpGroup *groups;
    double obj_w[ILP_NQ];         /* objective = sum obj_w[q] * total q (default FWD=BWD=SYNC=1) */
    double mem_w[ILP_NQ];         /* memory = sum mem_w[q] * total q (default MEM_*=1) */
    double budget;                /* memory <= budget; INFINITY: no constraint */
    IrArena *mem;                 /* the nodes', edges' and items' arrays (ilp_free frees it
                                     whole: problems are built, reduced and dropped by the
                                     thousand in a search) */
} IlpProblem;

IlpProblem *ilp_new(void);
void ilp_free(IlpProblem *p);
/* Add a node with k strategies priced val[k]; returns its index. */
int ilp_add_node(IlpProblem *p, int k, const IlpVals *val);
/* Add an edge u -> v; classes as in IlpEdge (nI = max cu + 1, nJ = max cv + 1,
 * every class used), val[nI * nJ] copied. Returns its index. */
int ilp_add_edge(IlpProblem *p, int u, int v, const int *cu, const int *cv, const IlpVals *val);
int ilp_add_group(IlpProblem *p, const IlpVals *w);
void ilp_add_item(IlpProblem *p, int group, int edge, const double *ind);
/* The quantities of one choice per node (totals, may be NULL) and its
 * objective. The definition the solver is tested against: node prices plus
 * edge prices plus, per group, w times the largest item. */
double ilp_eval(const IlpProblem *p, const int *choice, IlpVals *total);
double ilp_memory(const IlpProblem *p, const IlpVals *total);
/* ilp_repair.c: from choice `from`, a choice within p's budget by greedy
 * switches (least price per byte saved), or NULL: none found or no budget.
 * Heap; free it. A start for ilp_solve (IlpOpts.start). */
int *ilp_repair(const IlpProblem *p, const int *from);
/* ilp_local.c: the terms of ilp_eval that the nodes set[0..n) enter under
 * choice c (their prices, their edges', the groups with an item on those
 * edges): a move of only those nodes changes the totals by the change of
 * this sum. Adjacency kept for the moves (node u's edges:
 * edges[estart[u] .. estart[u + 1])). */
typedef struct IlpLocal {
    const IlpProblem *p;
    int *estart, *edges;          /* node u's edges */
    int *gstart, *groups;         /* edge i's groups (each once): groups[gstart[i] .. gstart[i + 1]) */
    int *mark;                    /* [nedges + ngroups]: stamp of the last sum that took it */
    int stamp;
    bool node_only[ILP_NQ];       /* quantity q is priced by nodes alone (every edge's and
                                     group's q is 0): its local sum is its nodes' prices */
} IlpLocal;
void ilp_local_init(IlpLocal *L, const IlpProblem *p);
void ilp_local_free(IlpLocal *L);
IlpVals ilp_local_sum(IlpLocal *L, const int *c, const int *set, int n);
/* ilp_canon.c: choice moved, in place, to the least (by its strategy
 * indices, lexicographically) of the choices of equal prices (every time
 * and memory total) that moving one node down or exchanging two nodes'
 * strategies reaches; returns the moves made. ilp_solve ends a budgeted
 * solve with it, so that its answer does not depend on the solver's path
 * among ties (an unbudgeted solve has one path: from the slack basis). */
int ilp_canon(const IlpProblem *p, int *choice);
/* The same on L's problem with L's adjacency (kept between the budgets of
 * one problem: IlpWarm) and the choice's totals by ilp_eval (NULL: summed
 * here), which its tolerances are relative to. */
int ilp_canon_local(IlpLocal *L, int *choice, const IlpVals *total);
/* ilp_canon with every move priced by the whole local sum (no may_tie):
 * the reference PTDC_SEARCH_CHECK and tests/ilp compare it with. */
int ilp_canon_ref(const IlpProblem *p, int *choice);

/* ilp_pareto.c: the whole time/memory frontier of p by one dynamic
 * program over an elimination order of its nodes (ilp_elim.c; bucket
 * elimination with
 * a Pareto set of (objective, memory) per assignment), or NULL where an
 * elimination's neighbourhood is too large for it (GLPK then). Every
 * budget's optimum is then a lookup: ilp_frontier_choice writes the
 * fastest choice within `budget` (its objective and memory as the program
 * summed them into *t, *m; NULL: not wanted) and returns true, or false:
 * nothing fits. */
typedef struct IlpFrontier IlpFrontier;
IlpFrontier *ilp_frontier(const IlpProblem *p);
void ilp_frontier_free(IlpFrontier *f);
int ilp_frontier_points(const IlpFrontier *f);
bool ilp_frontier_choice(const IlpFrontier *f, double budget, int *choice, double *t, double *m);
/* Per point i of the frontier (by increasing memory): its memory as the
 * program summed it, (*m)[i], and its choice's totals by ilp_eval on p (the
 * problem f was made of), (*tot)[i]; returns how many (heap; free both). */
int ilp_frontier_totals(const IlpFrontier *f, const IlpProblem *p, double **m, IlpVals **tot);
/* ilp_best.c: the least objective of p (its budget ignored) by the same elimination,
 * keeping the least and the second least over distinct choices: when the
 * second exceeds the least by more than `margin` of it, the fastest choice
 * is unique and written to choice (true); else false (ties, or too wide).
 * *best, *second: the two (NULL: not wanted). */
bool ilp_unique_best(const IlpProblem *p, double margin, int *choice, double *best, double *second);
/* The two programs the long way (the matrix order of elimination, every
 * group item read per assignment, qsort's Pareto sets, the scope looked up
 * per assignment): what PTDC_SEARCH_CHECK and tests/ilp compare the
 * shortcuts with. ilp_frontier_same: the same points, bit for bit, each
 * read back to the same choice. */
IlpFrontier *ilp_frontier_ref(const IlpProblem *p);
bool ilp_unique_best_ref(const IlpProblem *p, double margin, int *choice, double *best, double *second);
bool ilp_frontier_same(const IlpFrontier *a, const IlpFrontier *b);

typedef enum {
    ILP_OPTIMAL,                  /* proven optimal (gap 0 up to GLPK's tolerances) */
    ILP_FEASIBLE,                 /* time limit: a choice within the budget, not proven optimal */
    ILP_INFEASIBLE,               /* proven: nothing fits the budget */
    ILP_UNKNOWN,                  /* time limit before any choice was found */
} IlpStatus;

/* What one solve of a problem leaves for the next solve of the same problem
 * under another budget (the frontier walk asks a layer again and again with
 * less memory): the dominance reduction (which no budget enters), GLPK's
 * model (its memory row reset to the budget) and the root LP's optimal
 * basis. ilp_solve uses it only for the problem it was first used with (by
 * address) and rebuilds it otherwise. The kept model alone leaves GLPK's
 * path as it was (same LP, same slack start); restarting the dual simplex
 * from the kept basis (IlpOpts.warm_basis; a lower budget leaves it dual
 * feasible, a few pivots from the new optimum) may end on another optimal
 * vertex, and so GLPK on another choice of equal time and memory, which
 * ilp_canon then moves to the same answer. */
typedef struct IlpWarm IlpWarm;
IlpWarm *ilp_warm_new(void);
void ilp_warm_free(IlpWarm *w);
/* Of the points of p's frontier as w keeps it for p's solves (reduced and
 * made now if not yet; under check, against the long way's) with memory in
 * [mlo, mhi], the least total q (an ILP_* index; q < 0: the memory), from
 * the points' totals made once (ilp_frontier_totals); INFINITY where there
 * is none; NAN where the program finds no frontier (too wide: GLPK answers
 * p). */
double ilp_warm_least(IlpWarm *w, const IlpProblem *p, bool check, int q, double mlo, double mhi);

typedef struct IlpOpts {
    double time_limit_s;          /* 0: 10 s */
    double tol_obj;               /* GLPK's mip tol_obj; 0: 1e-9 */
    bool no_reduce;               /* skip dominance pruning (tests, measurements) */
    bool presolve;                /* glp_intopt with its presolver solves the root LP
                                     (default: dual simplex first; same answers, faster) */
    const int *start;             /* a choice per node to start from (a previous plan), or NULL:
                                     handed to GLPK as its first incumbent if it fits */
    IlpWarm *warm;                /* kept between solves of one problem, or NULL: from scratch
                                     (not with presolve) */
    bool warm_basis;              /* with warm: the root LP from the kept basis */
    bool no_canon;                /* GLPK's choice as it is, not ilp_canon's (tests) */
    bool frontier;                /* with warm and a budget: the answer from the frontier of
                                     the reduced problem (ilp_pareto.c), made at its first
                                     budget and kept in warm; GLPK only where it has none.
                                     Without a budget: the fastest choice by elimination
                                     where it is unique (ilp_unique_best), which GLPK's
                                     optimum then is; GLPK where it is not */
    const int *repair_from;       /* a previous answer: where GLPK runs under a budget and no
                                     start is given, it starts from this made to fit
                                     (ilp_repair) */
    bool check;                   /* with frontier: GLPK solves too, and a different answer
                                     dies (PTDC_SEARCH_CHECK, the exhaustive searches); so
                                     does a frontier, fastest choice or canonical answer that
                                     differs from the one made the long way (the *_ref) */
} IlpOpts;

typedef struct IlpSolution {
    IlpStatus status;
    int *choice;                  /* [nnodes] (heap; ilp_solution_free), when a choice exists */
    double objective;             /* ilp_eval of choice */
    double glpk_obj;              /* GLPK's glp_mip_obj_val: equals objective up to tolerances */
    double bound;                 /* best bound on the optimum GLPK proved */
    double gap;                   /* (objective - bound) / max(|objective|, 1e-30) */
    IlpVals total;                /* quantities of choice */
    int nvars, nbin, nrows;       /* size of the model handed to GLPK */
    int pruned;                   /* strategies dominance pruning removed */
    int nodes;                    /* branch-and-bound nodes GLPK created (1: the root LP
                                     was integral; 0: no branch and bound ran) */
    bool warm;                    /* solved on an earlier solve's model (IlpOpts.warm) */
    int canon_moves;              /* ilp_canon's moves from GLPK's choice to the answer */
    int frontier_points;          /* answered from the kept frontier of this many points
                                     (IlpOpts.frontier); 0: not */
    bool unique;                  /* answered as the unique fastest choice (IlpOpts.frontier,
                                     no budget) */
    double solve_s;               /* wall time of pruning, building and solving */
} IlpSolution;

IlpStatus ilp_solve(const IlpProblem *p, const IlpOpts *o, IlpSolution *s);
void ilp_solution_free(IlpSolution *s);
const char *ilp_status_name(IlpStatus s);

/* Exact shrinking before the solve (ilp_reduce.c). ilp_dominance sets
 * dom[u][i] (all -1 on entry) to a strategy of u that dominates i (no worse
 * in any price, memory or group term, so some optimum avoids i; follow the
 * chain to a live one) and returns how many it dropped; ilp_restrict builds
 * the problem of the live strategies (dom < 0), map[u][k] = the original
 * index of its strategy k (heap, caller frees). */
int ilp_dominance(const IlpProblem *p, int **dom);
IlpProblem *ilp_restrict(const IlpProblem *p, int *const *dom, int **map);

/* --- lowering a pipeline stage (ilp_lower.c, ilp_merge.c, ilp_stage.c) */

/* The cost-model functions the lowering prices with: pass_ilp_costs (the cost
 * model of cost.h, ilp_costs.c) or a test's synthetic ones. */
typedef struct PassIlpCosts {
    void (*node)(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                 const PlanStrategy *s, const int64_t *dim_size, PassNodeCost *out);
    double (*coll)(const PassCostCtx *c, const PlanMesh *m, const PlanColl *k, int elem_bytes);
    double (*saved)(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                    const PlanStrategy *s, const int64_t *dim_size, PlanRecompute r);
    /* Does saved() of n count its input `slot` under r? (Where a re-gathered
     * input is kept: the cost model counts a tensor at its first keeper only,
     * which may be its producer, attention keeping its output.) */
    bool (*keeps_input)(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                        const int64_t *dim_size, int slot, PlanRecompute r);
    double (*param_bytes)(const PassCostCtx *c, const IrGraph *g, const IrNode *n,
                          const PlanMesh *m, const PlanStrategy *s, int zero);
    double (*param_sync)(const PassCostCtx *c, const IrGraph *g, const IrNode *n,
                         const PlanMesh *m, const PlanStrategy *s, int zero, int num_micro);
} PassIlpCosts;

extern const PassIlpCosts pass_ilp_costs;

/* PassIlpQuery.ep_axes: one exchange over several mesh axes (their product
 * group: Megatron-Core's parallel folding across dp x tp, ETP 1). */
#define PASS_ILP_EP_ACROSS (2u << PLAN_MAX_AXES)

/* What to solve: one pipeline stage (a contiguous run of pieces) on its mesh. */
typedef struct PassIlpQuery {
    int first_piece, npieces;     /* the stage */
    PlanMesh mesh;
    int64_t mb_seqs;              /* sequences per micro-batch over the whole mesh: the batch
                                     dim's size (a batch split over dp ways gives mb_seqs/dp) */
    int num_micro;                /* micro-batches per step */
    int zero;                     /* ZeRO stage 0-3 */
    PlanRecompute recompute;
    double inflight;              /* micro-batches whose activations the stage holds at once */
    double budget;                /* bytes per device for parameters, gradients, optimizer
                                     state and activations; 0: unlimited */
    uint64_t allow[PLAN_MAX_AXES];/* pins: bit d set = dim d may split over axis a. Both 0:
                                     anything (e.g. --tp 2 --sp off: axis 0 only batch,
                                     axis 1 all but batch and seq) */
    unsigned require;             /* PASS_REQ_* every strategy must meet (plan_strategies_require) */
    /* MOE nodes' strategies (--ep, --etp): bit 0 none, bit 1 + a mesh axis a,
     * for the axis splitting the experts (ep) and their width (etp);
     * PASS_ILP_EP_ACROSS: the experts exchanged over several axes at once
     * (EP across dp x tp); 0: any. */
    unsigned ep_axes, etp_axes;
    unsigned cp_axes;             /* bit a: ATTENTION may split its query sequence over axis a
                                     (context parallelism: keys and values gathered); 0: nowhere */
    bool fix_boundary;            /* layer boundaries carry `boundary` (a pipeline neighbour
                                     fixed it); false: the ILP chooses */
    PlanSharding boundary;
    bool no_merge;                /* keep elementwise ops separate (tests, measurements) */
    double time_limit_s;          /* per solve; 0: 10 s */
} PassIlpQuery;

/* One collective of the chosen plan, as the stage runs it. */
typedef struct PassIlpColl {
    int tensor;                   /* a tensor it moves (for repeated layers: the first layer's) */
    int consumer;                 /* forward node reading it (-1: a layer boundary) */
    bool bwd;                     /* false: forward pass; true: backward (gradient) */
    bool regather;                /* backward resharding again of an input kept as made
                                     (an all-gather of one kept sharded, an all-to-all) */
    PlanColl coll;
    double seconds;               /* one execution */
    int count;                    /* executions per micro-batch on this stage */
} PassIlpColl;

typedef struct PassIlpResult {
    bool feasible;                /* a plan within the budget was found */
    IlpStatus status;
    int first_node, nnodes;       /* the stage's forward nodes */
    PlanStrategy *strategy;       /* [nnodes], strategy[i] for node first_node + i */
    bool has_boundary;
    PlanSharding boundary;        /* the sharding layer boundaries carry */
    const char *axis_name[PLAN_MAX_AXES]; /* "dp" (batch split on it), "tp", or "-" (unused) */
    double fwd_s, bwd_s;          /* one micro-batch through the stage: compute + resharding
                                     (bwd includes recomputation and re-reshards) */
    double sync_s;                /* per step: gradient synchronisation, ZeRO gathers */
    double step_s;                /* the objective: num_micro * (fwd_s + bwd_s) + sync_s */
    double param_bytes, act_bytes, mem_bytes; /* per device; mem = param + act */
    int ncoll;
    PassIlpColl *coll;
    /* the model and its solve */
    int ninst, ninst_merged;      /* operators in the ILP before and after merging */
    int nvars, nbin, nrows;       /* GLPK's model (0 when the frontier answered) */
    int frontier_points;          /* the stage's time/memory frontier that answered; 0: not */
    bool unique;                  /* the unique fastest choice by elimination answered */
    double solve_s, gap, bound;
    double build_s;               /* lowering time */
} PassIlpResult;

/* Results cached by query (pieces are matched by kind: a stage of layers
 * 3..10 reuses the answer for layers 11..18). Owns every result it returns. */
typedef struct PassIlpCache PassIlpCache;
PassIlpCache *pass_ilp_cache_new(void);
void pass_ilp_cache_free(PassIlpCache *c);
int pass_ilp_cache_hits(const PassIlpCache *c);   /* queries answered from the cache */
int pass_ilp_cache_solves(const PassIlpCache *c); /* queries that ran the solver */
int pass_ilp_cache_relowered(const PassIlpCache *c); /* of those, solved on a stage lowered
                                                       for a query differing only in budget */
int pass_ilp_cache_warm(const PassIlpCache *c);   /* of those, solved on the GLPK model of an
                                                     earlier budget (IlpWarm) */
int pass_ilp_cache_canon(const PassIlpCache *c);  /* of those, answered with another choice of
                                                     equal prices than GLPK's (ilp_canon) */
int pass_ilp_cache_frontier(const PassIlpCache *c); /* of those, answered from a stage's kept
                                                       frontier (PASS_ILP_FRONTIER) */
int pass_ilp_cache_unique(const PassIlpCache *c); /* of those, answered as the unique fastest
                                                     choice (PASS_ILP_FRONTIER, no budget) */
/* Solve with GLPK beside every frontier or unique answer and die on a
 * different one, and make every frontier, unique answer and canonical
 * answer again the long way (ilp_frontier_ref, ilp_unique_best_ref,
 * ilp_canon_ref) and die on any difference (the search's PTDC_SEARCH_CHECK). */
void pass_ilp_cache_check(PassIlpCache *c, bool on);
/* What a query differing from a recent one only in its budget reuses
 * (IlpWarm): nothing (PASS_ILP_COLD: tests compare against it), the
 * reduction and GLPK model (PASS_ILP_KEEP_MODEL), those and the root basis
 * (PASS_ILP_WARM_BASIS: the root LP in a third of the time on DeepSeek-V3's
 * frontier walks), or those and the stage's whole time/memory frontier,
 * made at its first budget, which answers every budget after it without
 * GLPK (PASS_ILP_FRONTIER, the default; ilp_pareto.c). All four give the
 * same answers: the optimum, moved by ilp_canon to one choice among those of
 * equal prices (tests/ilp/test_ilp_warm.c). Before the first query. */
enum { PASS_ILP_COLD, PASS_ILP_KEEP_MODEL, PASS_ILP_WARM_BASIS, PASS_ILP_FRONTIER };
void pass_ilp_cache_reuse(PassIlpCache *c, int reuse);

/* THE entry point, for the pipeline search and the driver. Chooses the
 * strategy of every forward node of one pipeline stage (pieces
 * q->first_piece .. + q->npieces) on q->mesh, minimising the stage's time per
 * optimizer step within q->budget:
 *   step   = num_micro * (fwd + bwd [+ recompute] of every op, pass_cost_node,
 *            + every resharding collective, forward and backward)
 *          + gradient synchronisation (pass_param_sync_s);
 *   memory = parameter state (pass_param_bytes)
 *          + saved activations (pass_saved_bytes) * inflight <= budget.
 * The layers of a repeat share one strategy (each distinct piece kind is
 * solved once, weighted by how often it occurs) and one boundary sharding:
 * a layer's output is resharded to it, the next layer reads from it. The
 * result is owned by `cache` (required) and stays valid until it is freed;
 * asking again with an equal query (or a stage of the same piece kinds)
 * returns it without solving. costs: &pass_ilp_costs (the cost model) or a
 * test's; ctx is passed to them only and is part of the cache key by address,
 * so a caller that changes *ctx needs a new cache. Dies
 * (ir_die) on a malformed query; an impossible budget is a result with
 * feasible == false. */
const PassIlpResult *pass_ilp_stage(PassIlpCache *cache, const PassCostCtx *ctx,
                                    const PassIlpCosts *costs, const IrGraph *g,
                                    const PassIlpQuery *q);
/* Of the points of q's stage's time/memory frontier (the one its budgeted
 * solves are answered from: lowered and made now where the cache keeps
 * none) with memory in [mlo, mhi], the least total `what` (an ILP_* index:
 * ILP_MEM_PARAM, the model states under q's ZeRO stage; -1: the memory),
 * INFINITY where there is none; NAN where the stage has no frontier (too
 * wide for the program: GLPK answers it) or the cache is not in
 * PASS_ILP_FRONTIER mode. */
double pass_ilp_stage_least(PassIlpCache *cache, const PassCostCtx *ctx, const PassIlpCosts *costs,
                            const IrGraph *g, const PassIlpQuery *q, int what, double mlo, double mhi);
/* Readable account: each operator's sharding (x[batch/dp, seq/sp, d_model]),
 * the collectives with sizes and times, objective, memory, ILP size, gap. */
void pass_ilp_print(FILE *f, const IrGraph *g, const PassIlpQuery *q, const PassIlpResult *r);
/* The allow masks of the usual pins: axis dp_axis splits only the batch,
 * axis tp_axis anything but the batch (and the sequence unless sp); -1 for
 * an axis without a pin (anything). E.g. --tp 2 --sp off on a (dp x 2) mesh:
 * pass_ilp_pins(g, 0, 1, false, q.allow). */
void pass_ilp_pins(const IrGraph *g, int dp_axis, int tp_axis, bool sp, uint64_t *allow);
/* ... and with a context-parallel axis (-1: none), which splits only the
 * sequence. */
void pass_ilp_pins_cp(const IrGraph *g, int dp_axis, int cp_axis, int tp_axis, bool sp,
                      uint64_t *allow);

/* --- the lowered stage behind pass_ilp_stage (tests and the printer read it) */
typedef struct IlpInst {
    int node;                     /* representative forward node; -1: a boundary */
    int tensor;                   /* the tensor a boundary lays out; nodes: -1 */
    int count;                    /* forward nodes (boundaries: layer crossings) it stands for */
    int nstrat;
    PlanStrategy *strat;          /* boundary: dim[a] = the tensor dim split over axis a */
    bool recompute;               /* its forward runs again during backward */
    int group;                    /* the instance leading its merge group (itself if none) */
    int *gmap;                    /* [leader's nstrat]: own strategy under each group strategy */
} IlpInst;

/* Output `out` of instance src read as input `in` of instance dst. */
typedef struct IlpLink {
    int src, out, dst, in;
    int tensor;                   /* a physical tensor it carries (the first seen) */
    int count;                    /* physical reads it stands for */
    bool saver;                   /* dst's forward is where the cost model counts this
                                     tensor as saved for backward */
    int edge;                     /* core edge; -1 inside a merge group */
} IlpLink;

/* The reads of one physical tensor from one source (its producer or a
 * boundary): work they share is done once (ilp_build.c). */
typedef struct IlpUse {
    int nlinks;
    int *links;
    int count;                    /* physical tensors read by exactly these links */
} IlpUse;

typedef struct IlpSeg {
    const IrGraph *g;
    PassIlpQuery q;
    const PassCostCtx *ctx;
    const PassIlpCosts *costs;
    int64_t *dim_size;            /* [g->ndims], batch = q.mb_seqs */
    int first_node, end_node;     /* forward nodes of the stage */
    int ninst, nlinks, nuses;
    int capi, capl, capu;
    IlpInst *inst;
    IlpLink *link;
    IlpUse *use;
    int *inst_of;                 /* [end_node - first_node]: each node's instance */
    int ngroups;                  /* merge groups = core nodes */
    int *group_of;                /* [ninst]: core node of each group leader, else -1 */
    IlpProblem *prob;
} IlpSeg;

IlpSeg *ilp_lower(const PassCostCtx *ctx, const PassIlpCosts *costs, const IrGraph *g,
                  const PassIlpQuery *q);                 /* ilp_lower.c */
/* Every tensor t's forward consumers as ir_consumers lists them (node order,
 * a node reading t in two slots once): clist[cstart[t] .. cstart[t + 1]),
 * by one pass over the nodes (ilp_lower.c; heap, caller frees both). */
void ilp_consumers(const IrGraph *g, int **cstart, int **clist);
void ilp_seg_free(IlpSeg *s);
void ilp_merge(IlpSeg *s);                                /* ilp_merge.c */
void ilp_build(IlpSeg *s);                                /* ilp_build.c: s->prob */
/* Helpers over a lowered stage (ilp_build.c): instance x's own strategy under
 * strategy gi of its merge group; the sharding of output `out` of instance x
 * under its strategy k; the sharding reader x wants for input `slot` and the
 * one its gradient comes back in. */
int ilp_own(const IlpSeg *s, int x, int gi);
PlanSharding ilp_out_sharding(const IlpSeg *s, int x, int out, int k);
void ilp_in_sharding(const IlpSeg *s, int x, int slot, int k, PlanSharding *want,
                     PlanSharding *grad);
/* Fill r from a solution of s->prob (ilp_extract.c); r is zeroed first. */
void ilp_extract(const IlpSeg *s, const IlpSolution *sol, PassIlpResult *r);
void pass_ilp_result_free(PassIlpResult *r);

#endif
