/* src.h: internals of passes/search/ shared by its files (not an export;
 * the exports are in search.h).
 *
 * Vocabulary:
 *   group     a (dp, tp, micro-batch, sp) choice: one mesh per pipeline rank
 *             and one micro-batch size. Its strategies come from a few
 *             pass_ilp_stage solves (one per kind of piece) and serve every
 *             pipeline degree, schedule, recomputation and ZeRO stage.
 *   variant   one set of strategies of a group: 0 unconstrained, then each
 *             the fastest the ILP finds using less memory than the one
 *             before (the ILP's time/memory frontier, walked while some
 *             candidate that could still win was shaped by memory).
 *   candidate a group plus pp, v, recomputation mode and ZeRO stage; the
 *             partition into stages (search_dp.c) completes it into a plan. */
#ifndef PTDC_SEARCH_H
#define PTDC_SEARCH_H

#include "search/search.h"

#include <stdlib.h>

#define SRC_NRC PLAN_RECOMPUTE_COUNT /* PlanRecompute values */
#define SRC_AUTO (-1)             /* candidate recompute mode: least per stage that fits */
#define SRC_MAXQ 8                /* ILP queries per variant */
/* Each variant after the first uses at least this fraction less memory per
 * layer than the one before: ten times GLPK's integrality tolerance, within
 * which a solve may hand back the previous point (search_ilp.c). */
#define SRC_FRONTIER_STEP 1e-4

/* fmax and fmin as glibc's x86-64 ones compute them (maxsd / minsd: the
 * second operand on a tie, so +0 or -0 as they do; the other operand when
 * one is NaN), inline: the floor's loops paid a library call for each, 3%
 * of planning Qwen3-235B-A22B (docs/planner.md, "Speed"). The same doubles. */
static inline double src_fmax(double a, double b) { return a > b || b != b ? a : b; }
static inline double src_fmin(double a, double b) { return a < b || b != b ? a : b; }

/* Costs of one piece under a variant's strategies, for one micro-batch on one
 * device: node kernels (pass_cost_node), the recomputed forward per policy,
 * resharding as the ILP priced it, saved activations per policy, model states
 * per ZeRO stage. Node kernel times are exactly what pass_predict sums, so
 * fwd + bwd + rec is a lower bound on the piece's share of a rank's time. */
typedef struct SrcPiece {
    double fwd, bwd;              /* kernels */
    double dw;                    /* of bwd: the parameters' weight-gradient GEMMs (a split
                                     schedule's W, as pass_predict prices it) */
    double rec[SRC_NRC];          /* forward again in backward, by policy */
    double rs_f, rs_b;            /* resharding estimate (ILP) */
    double saved[SRC_NRC];        /* bytes kept for backward */
    double states[4];             /* weights + grads + optimizer state, by ZeRO stage */
    double wsaved[2];             /* bytes a split schedule's W slot holds (pass_wslot_add), under
                                     ZeRO 0-1 and 2-3 ([zero >= 2]); 0 where no candidate runs
                                     one under ptdc's programs (Src.wslots) */
    double red[4];                /* s per step, by ZeRO stage, under ptdc's programs: the
                                     data-parallel reduction after the last backward and the
                                     optimizer's kernels, as pass_predict's step end sums them
                                     (0 under a reference stack; cut_bound's tail) */
    double opt[4];
    double rs_lb;                 /* the resharding inside the piece pass_predict charges at
                                     least at these strategies, forward and backward
                                     (src_edge_shares at them alone; cut_bound) */
    double p2p;                   /* s one way (forward; backward the same) of the pipeline
                                     transfers into the piece when it starts a stage, at
                                     least (cut_bound) */
    double ws;                    /* bytes: the largest backward working set of one of its
                                     nodes (pass_predict's transient: a stage holds its
                                     pieces' largest) */
    double ws_mid;                /* of ws, the largest of its nodes that read no activation
                                     from another piece (a layer copied to another place in the
                                     model keeps theirs) */
    double z3buf;                 /* bytes of ZeRO-3's gathered-weight buffers a stage holding
                                     it holds at least (pass_predict's buffers: twice its
                                     weights, or with zero3_pools twice a layer's weights and
                                     gradients, once another piece's) */
} SrcPiece;

typedef struct SrcVariant {
    bool ok;                      /* solved and feasible */
    PlanStrategy *strat;          /* [g->nfwd] */
    SrcPiece *piece;              /* [g->npieces] */
    int nq;
    PassIlpQuery q[SRC_MAXQ];
    const PassIlpResult *r[SRC_MAXQ];
    double *wsmax;                /* per policy, range maxima of the pieces' ws plus what a layer
                                     recomputed holds (+ z3buf under ZeRO-3): search_dp.c,
                                     src_variant_ws; NULL: not made */
    int8_t axis[PLAN_NDIMS];      /* plan_axes of its strategies on the group's mesh: the same for */
    uint8_t nested[PLAN_NDIMS];   /* every plan ranked with it (search_ilp.c, variant_axes) */
} SrcVariant;

typedef struct SrcCand {
    int pp, v;                    /* v = 1: 1F1B or ZB-H1 */
    int sched;                    /* PlanSchedule */
    int rc;                       /* SRC_AUTO or a PlanRecompute for every stage */
    int zero;
    double lb;                    /* step-time lower bound, strategy-free */
    double mem_lb;                /* peak-memory lower bound, strategy-free */
    bool done;                    /* no variant can make it win (pruned strategy-free, or ranked
                                     with a plan memory did not shape) */
    bool limited;                 /* memory shaped its plan with the variant last tried (nothing
                                     fit, recomputation, or a cut other than the fastest) */
    double hope;                  /* a lower bound on its step with any variant, once limited
                                     (search.c, hope_bound; NAN: not yet computed) */
    double hope_fit;              /* the same for the plans that fit, with the strategies no
                                     fitting plan can use left out (src_floor_fit; NAN: not yet) */
    double lb_fit;                /* lb likewise for the plans that fit (src_fit_bound; NAN: not yet) */
} SrcCand;

/* The time/memory trade-off of one node with parameters under one ZeRO
 * stage over the strategies of a group's mesh: its Pareto points, model
 * states ascending and kernels + ZeRO traffic (as in floor_t) descending,
 * so the least time of the strategies within a memory allowance is the last
 * point within it. Kept only where the fastest strategy is not the leanest. */
typedef struct SrcFitNode {
    int piece;                    /* the piece whose floor it is part of (floor_like) */
    int z, n;                     /* ZeRO stage; Pareto points */
    int off;                      /* states at fit_val[off ..], times at fit_val[off + n ..] */
} SrcFitNode;

/* What a pipeline's step bound reads of its pieces' times (search_prune.c,
 * pipe_bound): each a lower bound on a piece's time per micro-batch. */
typedef struct SrcPipeSum {
    double tsum, tmax;            /* summed, the largest */
    double path;                  /* their paths (forwards and B, SrcWork.t_path) summed */
    double beta;                  /* the least ratio of a piece's path to its time (1: none) */
    double first;                 /* the first piece's (rank 0's first chunk holds it) */
    double mid;                   /* the least of a piece between the first and the last (a
                                     middle chunk holds one at least) */
} SrcPipeSum;

typedef struct SrcGroup {
    int dp, tp, b;                /* b: sequences per replica per micro-batch */
    int cp;                       /* context parallelism (a dp x cp x tp mesh when > 1) */
    int fold;                     /* EP below DP (docs/moe.md, parallel folding): the experts
                                     exchanged over `fold` consecutive dp ranks, tp 1, the mesh
                                     dp/fold x fold with every node splitting the batch over
                                     both axes (src_fold_strategy); 1: none */
    bool sp;
    int64_t mb_seqs;
    int m;                        /* micro-batches per step */
    PlanMesh mesh;
    double lb;                    /* least candidate bound */
    int floor_due;                /* refinements of the bounds left: 3 strategy-free (where the
                                     search has a lead class, Src.floor_lead; 2 otherwise), 2
                                     with the lead class's time floor, 1 with the time floor
                                     (src_group_floor, SRC_FLOOR_TIME), 0 with the whole floor:
                                     each made when the group reaches the top of the search's
                                     order (search_order.c); level floor_due - 1 comes next */
    double walk_key;              /* least frontier bound (hope) of its walkable candidates */
    double mem_lb;                /* least candidate memory bound (a first fit's order) */
    double *floor_t;              /* [(row * SRC_NRC + r) * 4 + z], row = src_frow(s, piece): one
                                     row per floor class (its pieces' floors are equal), here and
                                     in the four below; least kernel time under
                                     policy r plus ZeRO z's per-micro-batch traffic
                                     (src_mb_sync) over the allowed strategies, per node,
                                     summed (NULL: not yet; kept for src_floor_pieces, as are
                                     the next two) */
    long floor_id;                /* floor_t's serial (Src.floor_serial; 0: none): the memos of
                                     src_floor_pieces and src_fitmem_bound know a floor by it,
                                     not by its address, which a later floor may reuse */
    double *floor_saved;          /* [rows * SRC_NRC] likewise, saved bytes */
    double *floor_states;         /* [rows * 4] likewise, model states by ZeRO stage */
    double *floor_ws;             /* [rows] the largest over the piece's nodes of each one's least
                                     backward working set over the allowed strategies (its
                                     temporaries and the gradients of its output and inputs, as
                                     pass_predict's transient counts them; src_group_floor) */
    double *floor_fslack;         /* [rows] the largest positive fused_s of each node over its
                                     strategies, summed (the ILP prices every norm fused) */
    double *layer_lb;             /* [npieces] the least time of a layer per micro-batch with its
                                     resharding, by the ILP (search_layerlb.c; 0: none; NULL:
                                     not yet) */
    bool lost_early;              /* search.c early_lost stopped variant 0: no plan of the group
                                     is ranked, no candidate walks */
    bool early_said;              /* src_check: early_lost would have (the group solved whole) */
    int nfit, capfit, nfitval, capfitval;
    SrcFitNode *fit;              /* src_group_floor: the nodes whose fastest strategy is not the
                                     leanest, per ZeRO stage */
    double *fit_val;
    double sum_path[SRC_NRC];     /* SrcWork.t_path summed over pieces, on n devices */
    SrcPipeSum pipe[SRC_NRC][4];  /* src_group_sums: the pieces' bounds summed, by policy and ZeRO
                                     stage */
    double sum_saved[SRC_NRC], sum_saved_min, sum_states[4];
    int ncand, capcand;
    SrcCand *cand;
    int nvar, capvar;
    SrcVariant *var;              /* [nvar]: the frontier walked so far, fastest first */
    double *jump;                 /* [repeats] or NULL: the next variant's budget for each
                                     repeat's layer this much below its last memory (search.c,
                                     walk_jump; 0: SRC_FRONTIER_STEP) */
} SrcGroup;

/* Strategy-free per-piece numbers at one micro-batch size, summed over the
 * piece's nodes on global (unsharded) shapes: the least time any sharding
 * over n devices can take is work/n. */
typedef struct SrcWork {
    int64_t mb_seqs;
    double *t;                    /* [npieces * SRC_NRC] seconds at peak rates */
    double *t_path;               /* [npieces * SRC_NRC] of t, what a split schedule's (ZB-H1's)
                                     forward and B must run in: t but the weight-gradient
                                     GEMMs (a parameter GEMM's backward less its forward's
                                     FLOPs; an MoE node's whole backward) */
    double *saved;                /* [npieces * SRC_NRC] bytes */
    double *wsaved;               /* [npieces] bytes a ZB-H1 W slot holds (pass_wslot_add at the
                                     least rows; 0 unless Src.wslots) */
} SrcWork;

typedef struct Src {
    const PassCostCtx *c;
    const IrGraph *g;
    const PassSearchOpts *o;
    PassIlpCache *cache;
    int gpus, gpn;
    int64_t gb;                   /* global batch */
    double usable;                /* HBM per GPU minus the reserve */
    double eff_max;               /* best fraction of peak any kernel reaches */
    /* the graph's shape */
    int npieces;
    int nlayers;                  /* pieces inside repeats */
    int rep0, rep_first, rep_count; /* the run of layers interleaving needs (-1: none; src_layer_run) */
    int64_t seq;                  /* the sequence length (0: the model has no sequence dim) */
    bool has_attention, has_moe;  /* what context parallelism may split (not MoE, yet) */
    bool wslots;                  /* ZB-H1 may run under ptdc's programs (a static arena): the
                                     stage cuts count its W slots (SrcPiece.wsaved, search_dp.c) */
    long overflows;               /* plans ranked that pass_predict found too big, their cut's
                                     estimate within the limit (PTDC_SEARCH_DEBUG) */
    bool has_scan;                /* a Mamba scan or convolution over seq: no CP (it carries state along seq) */
    double *w, *gr, *op;          /* [npieces] global model-state bytes (ZeRO 0, unsharded) */
    double *xw, *xgr, *xop;       /* [npieces] of those, the experts' (MOE weights: an exchange
                                     split shards them over the data-parallel axis too) */
    int nwork, capwork;
    SrcWork *work;
    int ngroups;
    SrcGroup *groups;
    int *gslot, gslot_cap;        /* enumerate's index of the groups by mesh and micro-batch:
                                     open addressing, group index + 1 (0: empty) */
    bool full_valid;              /* a candidate uses every GPU */
    int *floor_cls, *floor_cnt;   /* [npieces]: floor_like of each piece, and how many pieces
                                     share it (search_prune.c; NULL: not yet) */
    int *floor_row, floor_nrow;   /* [npieces]: each piece's row of a group's floor arrays, one
                                     row per class (src_frow) */
    int floor_lead;               /* the floor class a group's first time floor prices alone
                                     (src_floor_classes; -1: none) */
    bool *rec_node;               /* [nfwd * SRC_NRC] pass_recomputed of each forward node under
                                     each policy (search_prune.c; NULL: not yet) */
    struct SrcFloorBuf *floor_buf; /* src_group_floor's working arrays (NULL: not yet) */
    long floor_serial;            /* the last SrcGroup.floor_id given */
    bool *ws_over;                /* src_node_ws's tensors whose gradients are written over them
                                     (NULL: not yet) */
    struct SrcPieceMemo *piece_memo; /* src_floor_pieces' last answers (NULL: none yet) */
    struct SrcFitMemo *fit_memo;  /* src_fitmem_bound's last answers (NULL: none yet) */
    struct SrcEdgeMemo *edge_memo; /* the floor's edges' least reshard prices (search_edgemin.c;
                                     NULL: none yet) */
    struct SrcStatesMemo *states_memo; /* the floor's node states by strategy and mesh
                                     (search_nodestates.c; NULL: none yet) */
    struct SrcPriceMemo *price_memo; /* the floor's node prices by strategy and the mesh axes it
                                     reads (search_nodeprice.c; NULL: none yet) */
    int *xin, *xin_at;            /* per piece p, xin[xin_at[p] .. xin_at[p + 1]): the
                                     activations its nodes read from earlier pieces, once each
                                     (search_ilp.c, variant_p2p; NULL: not yet) */
    int64_t *divs;                /* the divisors of gb, ascending */
    int ndivs;
    int64_t *mbs;                 /* micro_batches' result */
    long micro_cut;               /* micro-batch sizes cut off by the limits */
    PassSearchStats *st;
    PassMemFloor *mfloor;         /* the layouts' memory floor (search_memfloor.c) where the
                                   count walk passes none (search.c, src_mfloor; NULL: not yet) */
    struct SrcFloorMemo {         /* above_floor's answers by layout, open addressing */
        uint64_t key;             /* (pp, tp, stage, zero) packed, +1; 0: empty */
        bool above;
        PassMemFloorPiece *v;     /* pp 0: the layout's pieces (pass_mem_floor_layout) */
    } *fmemo;
    int fmemo_cap, fmemo_n;
    /* Asked by src_variant after each repeat of a group's variant 0 is
     * solved (NULL: never): true when no plan of the group can win with
     * the layers solved so far (search.c, early_lost), which stops the
     * variant (src_variant false, G->lost_early). */
    bool (*early_lost)(struct Src *s, SrcGroup *G, const SrcVariant *V, const bool *have);
    void *early_ctx;
    bool no_early;                /* PTDC_SEARCH_NO_EARLY: never ask */
} Src;

/* Whether the search checks its exact shortcuts against the long way (the
 * memory-forced bound's cut rows and remembered answers, search_fitmem.c;
 * src_floor_pieces' remembered answers, the time floor's kept node
 * prices and those its twin and kin took, each floor level at least the
 * one before, the saved slots and the pins, search_prune.c; the floor's
 * remembered edges and node states, search_edgemin.c and
 * search_nodestates.c; the stage
 * bisection's skipped cuts, search_dp.c) and dies on any difference:
 * exhaustive searches (the tests), and any search with PTDC_SEARCH_CHECK
 * set in the environment. */
static inline bool src_check(const Src *s)
{
    static int env = -1;
    if (env < 0)
        env = getenv("PTDC_SEARCH_CHECK") != NULL;
    return s->o->exhaustive || env;
}

/* Piece p's row of a group's floor arrays (SrcGroup.floor_t, ...): its
 * floor class's (src_floor_classes, made before any floor). */
static inline int src_frow(const Src *s, int p) { return s->floor_row[p]; }

/* search_prune.c: lower bounds. */
const SrcWork *src_work(Src *s, int64_t mb_seqs);
void src_states(Src *s);
double src_kept_bytes(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m,
                      const PlanStrategy *strat, const int64_t *ds, const IrNode *n, PlanRecompute r);
/* Micro-batches whose activations pipeline rank r holds (pass_predict's
 * accounting), per chunk's share of the rank's saved bytes. */
double src_inflight(int pp, int v, int m, int r);
double src_inflight_lo(int pp, int v, int m, int r);
/* Node n's backward working set under strategy st on mesh m, as
 * pass_predict's transient counts it (its kernels' ws_bytes, its output's
 * gradient and its activation inputs'). */
double src_node_ws(Src *s, const PlanMesh *m, const IrNode *n, const PlanStrategy *st, double ws_bytes,
                   const int64_t *ds);
/* The levels of a group's per-mesh floor, each at least the one before
 * (search_order.c): the whole floor (floor_t and the rest); the time floor
 * (floor_t alone, without the ZeRO stages' traffic per micro-batch, so at
 * most the whole floor's), cheaper; the lead class's rows of that alone
 * (Src.floor_lead; the other rows 0, which the bounds raise to their
 * strategy-free terms), cheaper still. */
enum { SRC_FLOOR_WHOLE, SRC_FLOOR_TIME, SRC_FLOOR_LEAD };
void src_group_floor(Src *s, SrcGroup *G, int level);
/* Frees what src_group_floor keeps between groups (once per search). */
void src_floor_free(Src *s);
void src_group_sums(Src *s, SrcGroup *G);
void src_bound(Src *s, const SrcGroup *G, SrcCand *k);
/* The share of a stage's repeated layers' saved activations that stays on
 * the GPU under activation offloading (stack offload_act_layers, one stage,
 * no recomputation: pass_offload_applies), else 1: the partition's
 * estimate (search_dp.c) scales them by it. */
double src_offload_keep(const Src *s, int pp, int rc);
double src_bound_variant(const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k);
/* The same bound from part of a variant: the pieces with have[p] at V's
 * costs, the others at their strategy-free work and path (SrcWork), which
 * no strategy beats. Every term of pipe_bound grows with the pieces'
 * times and paths, so this is never above src_bound_variant of a variant
 * with V's costs on those pieces, but for one chunk per rank under a split
 * schedule: there beta (the least path over time) may be an unsolved
 * piece's, and the bound is instead never above split_bound's for any cut
 * of such a variant (each piece's path is at least beta times its time as
 * counted here: the fill and drain's derivation holds). search.c
 * early_lost; PTDC_SEARCH_CHECK checks what it concludes. */
double src_bound_solved(Src *s, const SrcGroup *G, const SrcVariant *V, const bool *have, const SrcCand *k);
/* Per-piece costs no strategy of the group's mesh can beat (the bounds'
 * numbers): kernel time, with ZeRO stage zero's per-micro-batch traffic,
 * and recomputation at the floor, the least resharding inside the piece
 * (none across pieces), saved bytes and model
 * states at the floor. out[npieces]. */
void src_floor_pieces(Src *s, const SrcGroup *G, int zero, const double *delta, SrcPiece *out);
/* The same answer where src_floor_pieces keeps it, not copied (the hot
 * bounds read it once): valid until the next call of either. */
const SrcPiece *src_floor_pieces_at(Src *s, const SrcGroup *G, int zero, const double *delta);
/* For the plans of pp pipeline ranks under ZeRO stage zero that fit: some
 * rank holds ceil(c / pp) of the c pieces of each floor class (the layers
 * of a repeat between neighbours alike, one strategy each), so a strategy
 * of a node whose model states, that many times over with the piece's
 * other nodes at their least and the runtime term, exceed the usable HBM
 * is in no such plan. delta[npieces]: what each piece's floor time gains
 * when those strategies are left out; false when some node has none left
 * (no plan of pp ranks under ZeRO zero fits). */
bool src_floor_fit(Src *s, const SrcGroup *G, int pp, int zero, double *delta);
/* What the least time of a piece of floor class cls (floor_like: its
 * representative) gains under ZeRO zero when its model states are at most
 * x bytes (src_floor_fit's per-node Pareto points, the piece's other nodes
 * at their least states); INFINITY when no strategy fits x. */
double src_fit_delta(const Src *s, const SrcGroup *G, int cls, int zero, double x);
/* A lower bound on candidate k's step among its plans that fit: src_bound's
 * time bound over the pieces' floors raised by src_floor_fit (INFINITY:
 * none fits). */
double src_fit_bound(Src *s, const SrcGroup *G, const SrcCand *k);

/* floor_like of every piece into s->floor_cls, and the size of each class
 * into s->floor_cnt (once per search). */
void src_floor_classes(Src *s);


/* search_layerlb.c: the ILP's least time of a middle layer of each repeat
 * per micro-batch, resharding included, into G->layer_lb (from variant 0's
 * queries: once G has it). src_floor_pieces raises the floor to it. */
void src_layer_lb(Src *s, SrcGroup *G);

/* Whether the ILP's prices are pass_predict's (or below) under the stack,
 * format and pins: where src_layer_lb bounds. */
bool src_layer_lb_applies(const Src *s);

/* search_fitmem.c: a lower bound on the step of pipelined candidate k's
 * plans that fit, from the recomputation (or the time) the ranks' memory
 * forces on them: H the pieces' floors (src_floor_pieces, raised by
 * src_floor_fit's delta). 0 where it does not apply (one pipeline rank,
 * --pp-layers, a caching allocator, ranks sharing cores, 1F1B with several
 * pieces before or after the layers); INFINITY when no cut of the floor
 * fits. */
double src_fitmem_bound(Src *s, const SrcGroup *G, const SrcCand *k, const SrcPiece *H);
/* Its answers remembered (src_fitmem_bound), freed with the search's floor
 * (src_floor_free). */
void src_fitmem_free(Src *s);

/* search_edges.c: per strategy of every node of piece p (st[a][0..ns[a]),
 * a the node's place in the piece), its share of the least resharding
 * pass_predict charges on the edges inside the piece (half of each edge's
 * least price given that end's layout), into share[a][0..ns[a]). A sum of
 * per-node minima of kernels plus shares is at most what any choice of
 * strategies costs the piece. */
void src_edge_shares(Src *s, const SrcGroup *G, int p, const int64_t *ds, PlanStrategy *const *st,
                     const int *ns, double *const *share);

/* The resharding shares of src_edge_shares summed over every node of the
 * model at the strategies strat (one micro-batch): at most the resharding
 * pass_predict charges a one-stage plan with those strategies per
 * micro-batch (exhaustive searches check it). NAN when some strategy is
 * not one of the group's mesh. */
double src_edge_floor_at(Src *s, const SrcGroup *G, const PlanStrategy *strat);

/* search_edgemin.c: an edge's least resharding prices (the floor's,
 * search_edges.c): tensor t from its producer's layouts S[0..nI) to a
 * reader's (X[b] forward, Gr[b] its gradient back to S[a] without partial
 * sums), per pair f x (forward + backward price as pass_predict's
 * coll_time), least per producer layout into rowmin[nI] and per reader
 * pair into colmin[nJ]. Remembered for the search, keyed by exactly what
 * the prices read, so floors of other groups whose meshes differ only on
 * axes no pair touches share them. */
void src_edge_mins(Src *s, const PlanMesh *m, int t, const PlanSharding *S, int nI, const PlanSharding *X,
                   const PlanSharding *Gr, int nJ, const int64_t *ds, double f, double *rowmin, double *colmin);
/* Edges asked and answered from memory so far (PTDC_SEARCH_DEBUG). */
void src_edge_memo_counts(const Src *s, long *asked, long *hits);
void src_edge_memo_free(Src *s);

/* search_keytab.c: the memos' table: two-word keys (k[0] != 0) to answers
 * of a fixed width of doubles, kept for the search. */
typedef struct SrcKeyTab {
    uint64_t (*key)[2];           /* [cap] (k[0] 0: an empty slot) */
    uint32_t *at;                 /* [cap] the answer's place in vals */
    size_t cap, n;                /* cap a power of two */
    double *vals;                 /* [n * width] */
    size_t capvals;
    long asked, hits;
} SrcKeyTab;
/* The answer of key k: *found, or a new slot the caller fills before the
 * next call (the same width every call). */
double *src_keytab_slot(SrcKeyTab *T, const uint64_t k[2], int width, bool *found);
void src_keytab_free(SrcKeyTab *T);
/* A strategy as one key word (its three dims and exchange bits). */
uint64_t src_strategy_word(const PlanStrategy *st);

/* search_nodestates.c: node nd's model states (pass_param_bytes) under
 * ZeRO z into v[z], its ZeRO traffic per micro-batch (src_mb_sync) into
 * v[4 + z], and where asked (end) under ptdc's programs its step end, the
 * data-parallel reduction after the last backward into v[8 + z] and the
 * optimizer's kernels into v[12 + z] (SrcPiece.red, .opt; 0 under a
 * reference stack; NAN where not asked and not yet known), strategy st on
 * mesh m, remembered for the search by node, strategy and mesh (all they
 * read but the search's own context). v: SRC_NSTATES. */
enum { SRC_NSTATES = 16 };
/* Does node nd read a parameter (the nodes src_node_states is asked of)? */
bool src_reads_param(const IrGraph *g, const IrNode *nd);
void src_node_states(Src *s, const IrNode *nd, const PlanMesh *m, const PlanStrategy *st, bool end, double *v);
/* The seconds of ZeRO-2/3 data-parallel traffic and kernels per micro-batch
 * that pass_predict adds to node n's stage times under ZeRO stage z with
 * strategy st (0 where it adds none). */
double src_mb_sync(const Src *s, const IrNode *n, const PlanMesh *m, const PlanStrategy *st, int z);
/* Answers asked and given from memory so far (PTDC_SEARCH_DEBUG). */
void src_states_memo_counts(const Src *s, long *asked, long *hits);
void src_states_memo_free(Src *s);

/* search_prune.c: pass_saved_slots of forward node nd under policy r
 * (strategy-free) into x (IR_MAX_IN + IR_MAX_OUT), asked once per search;
 * the count. */
int src_saved_slots(Src *s, const IrNode *nd, int r, int *x);

/* search_nodeprice.c: the slot of node nd's floor price under strategy st
 * in group G (search_prune.c, node_price: SRC_NPRICE numbers), remembered
 * for the search by node, strategy, G's sequences per micro-batch and G's
 * mesh on the axes in `axes` (those the strategy reads: all a price reads
 * but the search's own context). *found: it holds the price; else it is new
 * and the caller fills it before the next call. */
enum { SRC_NPRICE = 4 };
double *src_price_slot(Src *s, const SrcGroup *G, const IrNode *nd, const PlanStrategy *st, unsigned axes,
                       bool *found);
/* Prices asked and given from memory so far (PTDC_SEARCH_DEBUG). */
void src_price_memo_counts(const Src *s, long *asked, long *hits);
void src_price_memo_free(Src *s);

/* search_ilp.c: a group's strategies and per-piece costs. */
bool src_variant(Src *s, SrcGroup *G, int k);
void src_variant_free(SrcVariant *v);

/* search_dp.c: stages of a candidate. Fills stages (pp * v entries) and the
 * estimated per-stage times; false if no partition fits `cap` bytes. When
 * ignore_mem, the time-balanced partition with the least recomputation. */
typedef struct SrcPart {
    int nstages;
    PlanStage stage[1024];
    double mem_peak;              /* estimated, bytes */
} SrcPart;
bool src_partition(const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k,
                   double cap, bool ignore_mem, SrcPart *out);
void src_stage_times(const Src *s, const SrcVariant *V, const Plan *p, double *fwd, double *bwd);
/* V->wsmax from its pieces' ws, saved bytes and z3buf (once, when V is
 * solved). */
void src_variant_ws(const Src *s, SrcVariant *V);
/* 1F1B: the least T such that some cut into k->pp stages fits `cap` with
 * P_r + m t_r <= T for every stage r (t_r its time, P_r the time of the
 * pieces before it at their fastest policy). pass_predict's step is at
 * least that for every cut: stage r cannot start before the first
 * micro-batch's forward reaches it, runs m micro-batches, and the last
 * one's backward still passes the stages before it. INFINITY: no cut fits.
 * ZB-H1 (a split schedule): stage r's end is at least P'_r + k_r t_r +
 * (m - k_r) t'_r, k_r = (m - r - 1)+, t' the path (forwards and B: its
 * weight gradients wait), P' the paths before it (search_prune.c,
 * pipe_bound); with every piece's path at least beta times its time, at
 * least beta P_r + (beta m + (1 - beta) k_r) t_r. 0 when beta is not
 * positive. stop < INFINITY: a caller asking only whether the floor
 * reaches stop; stop itself where no cut fits within it (one greedy cut,
 * not the bisection); with only, 0 where one does (nothing more asked). */
double src_pipe_floor(const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k, double cap,
                      double beta, double stop, bool only);

/* Is policy r one the search weighs: the four it chooses among, or
 * Megatron's module set (recompute.def) --recompute pins? The per-piece
 * costs of the others are left unevaluated (0). */
static inline bool src_rc_on(const Src *s, int r)
{
    return r <= PLAN_RECOMPUTE_FULL || s->o->pins.recompute == r;
}

/* search_pins.c: pinned layouts that cannot work, reported with ir_error. */
bool src_check_pins(Src *s);
/* The layers of each of the pp * v chunks as --pp-layers pins them, into
 * layers[pp * v]: 1 written; 0 not pinned; -1 the pins exclude pp x v (why
 * says so in a sentence naming the flag, when why is not NULL). */
int src_split_pin(const Src *s, int pp, int v, int *layers, char *why, size_t wn);
void src_layer_run(const IrGraph *g, Src *s);
/* The end chunks a split may leave without layers (0, 1 or 2): those
 * --pp-layers gives none, or unpinned, each end with pieces beside the
 * layers (the embedding, the head) to hold alone; the chunks a split may
 * have beyond one per layer. */
int src_split_empty_ends(const Src *s);
/* A lower bound of piece p's model-state bytes per device under ZeRO z on
 * a mesh of n devices with tp on the tensor-parallel axis: ZeRO shards over
 * the data-parallel axis, tensor parallelism splits the rest at most tp
 * ways, and the experts' weights at most n ways (EP over dp, ETP over tp). */
double src_states_lb(const Src *s, int p, int z, double n, double tp);

/* search_experts.c: the expert layouts of a stage mesh.
 * MoE pins (--ep, --etp) on a dp x tp mesh: PassIlpQuery.ep_axes'
 * mask for degree deg (0 when no axis has that size, nor dp x tp), and
 * whether the mesh (sequence parallel or not) can carry both pins at all. */
unsigned src_moe_axes(int dp, int tp, int deg);
bool src_moe_mesh_ok(const Src *s, int dp, int tp, bool sp);

/* EP below DP at tp 1 (a group with fold > 1): the one strategy of node n.
 * Nothing is left to choose there: every node carrying the batch splits it
 * over both dp axes (PLAN_REQ_BATCH at tp 1, nested), and a moe of routed
 * experts exchanges them over the inner one, as the programs run it
 * (tests/codegen tiny-mixtral-fold). So the group needs no ILP. */
PlanStrategy src_fold_strategy(const IrGraph *g, const IrNode *n);
/* The fold degrees a (dp, cp, tp, sp) layout is searched with, into f
 * (1 first when the unfolded layout is allowed); the count. */
int src_folds(const Src *s, int dp, int cp, int tp, bool sp, int *f, int max);

/* search_order.c: the groups best bound first, each group's floor computed
 * when it reaches the top (refine: the floor and the candidates' bounds
 * with it), so that they come out in the order of their exact bounds. */
typedef struct SrcOrder {
    Src *s;
    int (*cmp)(const void *, const void *); /* on SrcGroup: bound, then a fixed order of layouts */
    void (*refine)(Src *, SrcGroup *);     /* the next floor and the bounds with it; floor_due - 1 */
    /* Before a floor is made: can no plan of the group beat thr whatever
     * its floor (its candidates then done)? Such a group is dropped, not
     * refined nor handed out. NULL: none is. */
    bool (*dead)(void *ctx, SrcGroup *G, double thr);
    void *ctx;
    SrcGroup **dropped;           /* the groups dead dropped (src_order_check) */
    int ndropped;
    SrcGroup **heap;
    int n;
    SrcGroup **seen;              /* what src_order_next handed out, in order (src_order_check) */
    int nseen;
    int ndue, nmade[3];           /* groups with a floor to make; floors made by level
                                     (SRC_FLOOR_WHOLE, _TIME, _LEAD) */
    double thr;                   /* the threshold of the last src_order_next */
    bool last_free;               /* the last handed out had its strategy-free bound */
} SrcOrder;
void src_order_init(SrcOrder *q, Src *s, int (*cmp)(const void *, const void *),
                    void (*refine)(Src *, SrcGroup *));
/* The next group in the order of the exact bounds, or one whose
 * strategy-free bound is already no better than thr (every bound left is
 * then at least thr: the caller stops); NULL when none is left. */
SrcGroup *src_order_next(SrcOrder *q, double thr);
/* A group back into the order (the one that stopped the visit, so that the
 * heap holds every group not visited). */
void src_order_push(SrcOrder *q, SrcGroup *G);
void src_order_free(SrcOrder *q);
/* Against the long way (src_check): every group refined, the visit's order
 * and its stop (stopped: the caller stopped at the last group handed out)
 * those of the sorted exact bounds; dies on a difference. The search's
 * counts are kept. */
void src_order_check(SrcOrder *q, bool stopped);

/* search.c */
void src_plan(const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k,
              const SrcPart *part, Plan *p);

#endif
