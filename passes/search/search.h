/* search.h: exports of passes/search/: the inter-operator search over
 * pipeline degree, stages, meshes, micro-batch, schedule, recomputation and
 * ZeRO (search.c and its helpers; internals in src.h), the model skeleton the ILP solves run on
 * (search_skel.c), and what it says when nothing fits (search_nofit.c).
 * Strategies come from the ILP; every number from pass_predict. */
#ifndef PTDC_PASS_SEARCH_H
#define PTDC_PASS_SEARCH_H

#include "ilp/ilp.h"

/* The inter-operator search (docs/planner.md): the pipeline degree and stage
 * boundaries, each pipeline rank's (dp x tp) mesh with the strategies of
 * pass_ilp_stage, the micro-batch, the schedule, recomputation per stage and
 * the ZeRO stage. Candidates are explored with the ILP's costs and lower
 * bounds (branch and bound), then ranked by pass_predict, which every number
 * reported comes from. Requires a verified forward graph. */

/* Limits of the search: micro-batches per step (plan.h's PLAN_MAX_MICRO)
 * and sequences per micro-batch and replica (--micro-batch's range).
 * Layouts beyond them are not enumerated; see PassSearchResult.micro_cut. */
#define PASS_SEARCH_MAX_MB (1 << 20)

/* What the user fixed; everything else is searched. */
typedef struct PassSearchPins {
    int tp, pp, dp;               /* 0: searched */
    int cp;                       /* context parallelism; 0: searched */
    int micro_batch;              /* sequences per data-parallel replica per micro-batch; 0: searched */
    int recompute;                /* -1: searched per stage; else the PlanRecompute of every stage */
    int sp;                       /* -1: searched; 0 off; 1 on */
    int zero;                     /* -1: searched; else 0-3 */
    int schedule;                 /* -1: searched; else a PlanSchedule */
    int v;                        /* 0: searched; else model chunks per pipeline rank */
    int precision;                /* -1: searched (--precision auto, pass_search_precisions);
                                     else the PlanPrecision the context's prec must be */
} PassSearchPins;

/* Only the alternatives that differ from a reference layout this way
 * (--explain's runners-up); all zero: any. */
typedef struct PassSearchFilter {
    int tp_above, pp_above, mb_above; /* tp, pp, micro-batch strictly above these */
    bool recompute_on;            /* some stage recomputes */
} PassSearchFilter;

typedef struct PassSearchOpts {
    PassSearchPins pins;
    int ep, etp;                  /* MoE pins (--ep, --etp): 0 searched; else the experts split
                                     ep ways over a whole mesh axis (1: not at all), each
                                     expert's width etp ways */
    /* --pp-layers: the layers of each model chunk (pipeline stage under 1F1B)
     * in model order, pp_nlayers of them; or, Megatron's way, pp_first and
     * pp_last, the layers of the first and last pipeline ranks (0: not
     * given), the others split evenly. The pieces before the layers
     * (embedding) join the first chunk, those after them (head) the last. */
    int pp_nlayers;
    const int *pp_layers;         /* [pp_nlayers], owned by the caller */
    int pp_first, pp_last;
    int gpus;                     /* GPUs available; 0: c->cl->ngpus */
    int64_t global_batch;         /* sequences per step; 0: g->global_batch */
    double ilp_time_limit_s;      /* per ILP solve; 0: 10 s */
    int keep;                     /* alternatives to keep, best first (0: 1); pruning is against
                                     the keep-th best, so they are the true best by pass_predict */
    bool first_fit;               /* stop at the first plan that fits, and evaluate none that
                                     does not (pass_search_min_gpus) */
    const struct PassMemFloor *floor; /* with first_fit: rank no candidate whose layout's floor
                                     (pass_mem_floor_zero) is above the usable HBM; NULL: all */
    double beat_s;                /* only plans faster than this are wanted (another format's
                                     best, pass_search_precisions): a pruning threshold from the
                                     start; nothing faster found is not "nothing fits" */
    bool exhaustive;              /* tests: prune nothing by step time, and die if a bound is
                                     ever above what pass_predict says (checks the pruning) */
    const IrGraph *skeleton;      /* pass_search_skeleton(g) for the ILP solves (same answers,
                                     much faster lowering on deep models); NULL: g itself */
    PassSearchFilter filter;
} PassSearchOpts;

/* The model with at most three iterations of each repeat, for the ILP
 * (search_skel.c): NULL when g has no more. Heap arrays, arena a for the
 * rest; pass_search_skeleton_free releases the arrays. */
IrGraph *pass_search_skeleton(IrArena *a, const IrGraph *g);
void pass_search_skeleton_free(IrGraph *s);

void pass_search_pins_none(PassSearchPins *p);
/* The layers of each of pp x v chunks as o's --pp-layers pins them, into
 * layers[pp * v]: true; false when not pinned or not for pp x v. */
bool pass_search_split_pin(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o, int pp, int v,
                           int *layers);
/* Are tp, pp, micro-batch, recompute, sp, ZeRO and the schedule (and v, if
 * interleaved) all pinned: the "evaluate a layout by hand" case? */
bool pass_search_pinned_fully(const PassSearchPins *p);

/* A plan's layout in the usual words, derived from its strategies: an axis
 * whose nodes split the batch is data parallel, one splitting other dims is
 * tensor parallel, and a sequence split on it is sequence parallelism. */
/* One evaluated plan. Owns plan.stages, plan.strategy and pred.mem. */
typedef struct PassSearchAlt {
    PlanLayout layout;
    Plan plan;
    PassPrediction pred;
    double *stage_fwd_s, *stage_bwd_s; /* [plan.nstages] one micro-batch, from the ILP costs
                                          (pass_predict reports only the slowest rank) */
    const IrGraph *ilp_graph;     /* the graph those solves ran on (g or the skeleton) */
    int nilp;                     /* the ILP solves its strategies come from (owned by the cache) */
    PassIlpQuery ilp_q[8];
    const PassIlpResult *ilp_r[8];
} PassSearchAlt;

typedef struct PassSearchStats {
    long groups, groups_solved;   /* (dp, tp, micro-batch, sp) meshes; those given to the ILP */
    long candidates;              /* layouts enumerated (pp, v, schedule, recompute, ZeRO) */
    long pruned_time, pruned_mem; /* dropped by a step-time / memory lower bound */
    long evaluated;               /* ranked with pass_predict */
    int ilp_solves, ilp_hits;
    double seconds;
} PassSearchStats;

typedef struct PassSearchResult {
    bool found;                   /* alt[0] is the best plan that fits */
    int nalt;                     /* fitting plans kept, best first */
    PassSearchAlt *alt;
    bool have_closest;            /* !found: the candidate closest to fitting, evaluated */
    PassSearchAlt closest;
    bool no_layout;               /* no layout satisfies the pins and divisibility at all */
    bool micro_cut;               /* some layouts were left out for the micro-batch limits */
    int gpus;                     /* GPUs available */
    int64_t global_batch;         /* sequences per step */
    bool full_valid;              /* some enumerated layout uses every GPU */
    bool full_ranked;             /* a plan using every GPU fits and was ranked: */
    double best_full_step_s;      /* the best such step time */
    PassSearchStats stats;
    /* pass_search_precisions: the best step time each format reached (0:
     * not tried, the GPU lacks it, nothing fitted in it, or nothing beat a
     * faster format's plan, searched before it). */
    double prec_step[PLAN_NPREC];
    unsigned prec_tried;          /* bit p: format p searched */
} PassSearchResult;

/* Search (search.c). Reports pinned layouts that cannot work (TP not
 * dividing the heads, more stages than pieces, ...) with ir_error and
 * returns false; otherwise true, with out->found false when nothing fits.
 * cache: the ILP cache (ctx must stay at one address while it lives). */
bool pass_search(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                 PassIlpCache *cache, PassSearchResult *out);
void pass_search_result_free(PassSearchResult *r);
/* --precision auto (search_prec.c): pass_search once per format the GPU
 * runs (pass_prec_peak > 0), fastest rate first, each later one looking
 * only for plans faster than the best so far, each priced under ctxs[p] (c
 * with prec p; the caller's storage, which must live as long as cache: the
 * ILP cache keys on the context's address), keeping the result whose best
 * plan is fastest; *chosen: the context it was priced under. Nothing
 * fitting in any: the bf16 search's answer. */
bool pass_search_precisions(const PassCostCtx *c, PassCostCtx ctxs[PLAN_NPREC], const IrGraph *g,
                            const PassSearchOpts *o, PassIlpCache *cache, PassSearchResult *out,
                            const PassCostCtx **chosen);
void pass_search_alt_free(PassSearchAlt *a);
/* The smallest GPU count in [from, limit] on which some plan fits (0: none),
 * with the first plan found to fit there in *first, not the best one
 * (search_nofit.c). Only counts some layout uses whole are searched, and at
 * most 64 of them (the first 32 in order, then counts a quarter apart):
 * *skipped is the count from which some were skipped (0: none was, the
 * answer is the smallest). */
int pass_search_min_gpus(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                         PassIlpCache *cache, int from, int limit, PassSearchAlt *first,
                         int *skipped);
/* A floor of the memory per GPU of any layout (search_memfloor.c): the
 * model states its fullest pipeline rank must hold under the cheapest ZeRO
 * stage the stack runs (with ZeRO-3's gather buffers), spread over its
 * stage's GPUs as far as its mesh's axes divide each parameter's dims, one
 * micro-batch of the least activations any recomputation keeps, and the
 * runtime and communicators every rank of it has. */
typedef struct PassMemFloor {
    double *sum;                  /* [npieces + 1] sum[j]: the j largest pieces' states, unsharded */
    int npieces;
    int nparam;                   /* the parameters, one by one: */
    struct PassMemFloorParam {
        int piece;                /* of the node that owns it */
        double w, gr, op;         /* unsharded weights, gradients, optimizer state */
        bool expert;              /* owned by an expert node (its mesh's dp axis may split it) */
        bool xdim;                /* carries an expert dim (the dp axis may split that) */
        int rank;
        int64_t size[IR_MAX_RANK]; /* its dims' sizes */
    } *param;                     /* [nparam] */
    double *act;                  /* [npieces] the least bytes any recomputation policy keeps
                                     per sequence of a micro-batch, unsharded (0 where a stack
                                     may offload them) */
    bool zero[4];                 /* the ZeRO stages the stack runs (0 always) */
    bool cp;                      /* may context parallelism split a parameter (its
                                     position table): then one data-parallel axis may */
    double zero3_buf;             /* ZeRO-3's gather buffers in gathered pieces: 2, or 1
                                     under Megatron-FSDP's pools (the stack's zero3_pools) */
    double runtime;               /* a rank's CUDA context and workspaces, and the world's
                                     communicator */
    double comm;                  /* one more communicator (the pipeline's, a mesh axis') */
} PassMemFloor;
void pass_mem_floor_init(PassMemFloor *f, const PassCostCtx *c, const IrGraph *g);
void pass_mem_floor_free(PassMemFloor *f);
/* The states some rank of pp must hold, unsharded (bytes). */
double pass_mem_floor_rank(const PassMemFloor *f, int pp);
/* A lower floor of the same plans whatever their tensor parallelism: the
 * states some rank holds spread evenly over the stage's GPUs, the runtime
 * and the communicators of the world, the pipeline and one mesh axis. */
double pass_mem_floor_even(const PassMemFloor *f, int pp, int stage);
/* Bytes per GPU that the fullest GPU of any plan with pp pipeline ranks of
 * `stage` GPUs each, tp of them the tensor-parallel axis (with context
 * parallelism: tp x cp, the mesh less its data-parallel axis), needs at
 * least (pass_predict's peak_mem_bytes). */
double pass_mem_floor(const PassMemFloor *f, int pp, int tp, int stage);
/* The same for the plans of that layout under ZeRO stage zero. */
double pass_mem_floor_zero(const PassMemFloor *f, int pp, int tp, int stage, int zero);
/* pass_mem_floor_zero in two halves, the first shared by every pp: each
 * piece's states per GPU (with a micro-batch's least activations) and
 * gathered weights on `stage` GPUs, tp of them the tensor axis, under ZeRO
 * zero, largest states first, into v[npieces]; then the floor with pp
 * pipeline ranks. */
typedef struct PassMemFloorPiece {
    double s, fw;
} PassMemFloorPiece;
void pass_mem_floor_layout(const PassMemFloor *f, int tp, int stage, int zero, PassMemFloorPiece *v);
double pass_mem_floor_pp(const PassMemFloor *f, const PassMemFloorPiece *v, int pp, int tp, int stage, int zero);
/* After pass_search found nothing: say why on stderr (ir_error): the item
 * that overflows on the fullest GPU and by how much, then what would fit
 * (relaxing the pins, or the smallest GPU count). Returns nothing; the
 * caller exits with status 1 (search_nofit.c). */
void pass_search_explain_nofit(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                               PassIlpCache *cache, const PassSearchResult *r);
/* Its first sentences: the rank of a that overflows, by how much, its largest
 * item (ir_error), then its breakdown (ir_note). pinned: a is the user's
 * layout; else the leanest of a search on `gpus` GPUs. */
void pass_search_explain_overflow(const PassCostCtx *c, const IrGraph *g, const PassSearchAlt *a,
                                  bool pinned, int gpus);
/* When the chosen plan leaves GPUs idle: a sentence saying how many and why,
 * into buf; false when it uses them all (search_nofit.c). */

/* The checks pass_search makes of the pins before searching (search_pins.c):
 * a pinned layout that cannot work is reported with ir_error (one sentence)
 * and false is returned. For callers that build the plan themselves (a
 * framework's plan for a fully pinned layout, driver/). */
bool pass_search_check_pins(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o);

#endif
