/* plan.h: exports of plan/, the contract between the planner and the
 * programs: what a parallel plan is, which the search produces, the cost
 * model prices, codegen executes and the reports print. Builds on the IR
 * only; codegen includes this (and autodiff), never the search or the cost
 * model.
 *   dims.def     the parallel dimensions (dp, tp), each on a mesh axis
 *   shard.c      the sharding algebra: meshes, strategies, shardings, which
 *                strategies an operator admits, what each implies for its
 *                inputs, outputs and gradients, the collectives that reshard
 *   the plan     Plan: stages, strategies, micro-batches, ZeRO, schedule
 *   schedule.c   the micro-batch order of every pipeline rank
 *   rules.c      which nodes a recomputation policy reruns
 *   fusion.c     which nodes run as one kernel (add + norm; batched GEMMs)
 *   layout.c     the mesh axis of each parallel dimension, the micro-batch's
 *                two units, a plan in the usual words (dp, tp, pp, sp, ...)
 *   verify.c     the plan's verifier
 *
 * Vocabulary used throughout:
 *   mesh      the logical device grid of one pipeline stage: 1-D or 2-D
 *             (axis 0 outer, axis 1 inner; inner-axis neighbours are
 *             consecutive ranks, so a group along axis 1 stays inside a node
 *             whenever it fits).
 *   strategy  for one forward node, which of its loop dims is split over each
 *             mesh axis (or none). Loop dims = every dim of the op's inputs and
 *             outputs. A split dim the output lacks leaves a partial sum.
 *   sharding  how one tensor is laid out: the dim split over each axis, and
 *             the axes over which its values are partial sums. A dim split
 *             over two axes (the sequence over cp and tp: plan_seq_nested;
 *             attention's heads over tp and cp in the all-to-all form) is
 *             nested, the outer axis's shards split again by the inner
 *             one; the lower axis is the outer one unless the sharding's
 *             order says otherwise (PlanSharding.hi_outer).
 *   backward nodes use the strategy of the forward node they differentiate.
 */
#ifndef PTDC_PLAN_H
#define PTDC_PLAN_H

#include "ir.h"

/* ================================================= the sharding algebra */
#define PLAN_MAX_AXES 3
/* Every axis unsplit: the initialiser of a replicated strategy or sharding. */
#define PLAN_NO_DIMS {-1, -1, -1}

/* The parallel dimensions (dims.def): PLAN_DIM_DP, PLAN_DIM_TP, ... */
typedef enum {
#define PLAN_DIM(id, name, what) PLAN_DIM_##id,
#include "dims.def"
#undef PLAN_DIM
    PLAN_NDIMS
} PlanDim;
const char *plan_dim_name(PlanDim d); /* "dp", "tp" */

typedef struct PlanMesh {
    int naxes;                    /* 1, 2 or 3 */
    int size[PLAN_MAX_AXES];      /* devices along each axis */
    int nodes[PLAN_MAX_AXES];     /* nodes one group along this axis spans (1 = NVLink only) */
    int per_node[PLAN_MAX_AXES];  /* members of one such group that share a node */
} PlanMesh;

typedef struct PlanStrategy {
    int16_t dim[PLAN_MAX_AXES];   /* loop dim split over axis a, or -1 */
    uint16_t xchg;                /* bit a: an exchange split (docs/moe.md): MOE's expert
                                     dim is split over axis a as well as the token dim
                                     dim[a]; rows travel to their expert's rank and back
                                     inside the op (expert parallelism). On ATTENTION
                                     split on its queries' sequence over axis a: the ring
                                     (plan_cp_ring); split on its heads over the cp axis:
                                     the all-to-all form (plan_cp_a2a, docs/context.md) */
} PlanStrategy;

typedef struct PlanSharding {
    int16_t dim[PLAN_MAX_AXES];   /* this tensor's dim split over axis a, or -1 (replicated) */
    uint8_t partial;              /* bit a set: values are partial sums over axis a */
    uint8_t hi_outer;             /* the nesting order of a dim split over several axes: bit a
                                     set: axis a is outside the lower axes splitting the same
                                     dim (their pieces are pieces of axis a's shard), clear:
                                     inside them. 0, the default, nests in axis order (cp
                                     outer, tp inner: the sequence). The all-to-all form of
                                     context parallelism beside tp sets it: tp's heads block t
                                     dealt out over cp, head block t x cp + c (docs/context.md).
                                     Set only on an axis sharing its dim with a lower one
                                     (canonical, so plan_sharding_eq compares layouts) */
} PlanSharding;

typedef enum {
    PLAN_COLL_NONE,
    PLAN_COLL_ALLREDUCE,      /* partial -> replicated */
    PLAN_COLL_REDUCESCATTER,  /* partial -> split on dim */
    PLAN_COLL_ALLGATHER,      /* split on dim -> replicated */
    PLAN_COLL_ALLTOALL,       /* split on dim -> split on dim2 */
    PLAN_COLL_SLICE,          /* replicated -> split on dim (local copy, no traffic) */
    PLAN_COLL_SENDRECV,       /* pipeline point-to-point */
} PlanCollKind;

/* One step of a resharding, on one mesh axis. `numel` is the number of
 * elements of the full buffer the collective moves, counted per rank the
 * nccl-tests way: all-reduce: the local tensor; reduce-scatter: the input;
 * all-gather: the output; all-to-all: the local tensor. */
typedef struct PlanColl {
    PlanCollKind kind;
    int axis;
    int dim, dim2;
    int64_t numel;
} PlanColl;

const char *plan_coll_name(PlanCollKind k);
/* Does a step of kind k sum partial values (all-reduce, reduce-scatter)? A
 * generated program keeps a tensor reduced (its canonical form), so a reader's
 * other steps are what its backward runs again from the kept copy. */
bool plan_coll_reduces(PlanCollKind k);

/* A stage of `devices` ranks viewed as a (d0 x d1) logical mesh (d1 = 1 gives
 * a 1-D mesh of d0), with nodes of gpus_per_node consecutive ranks. The
 * search and the frameworks make (dp x tp) meshes, or with context
 * parallelism (dp x cp x tp) ones (_dims: cp = 1 gives plan_mesh_make's, tp =
 * 1 a (dp x cp) mesh); which axis serves which parallel dimension is what the
 * plan records (Plan.axis). An axis's groups are its size ranks, the product
 * of the inner axes' sizes apart. */
void plan_mesh_make(PlanMesh *m, int d0, int d1, int gpus_per_node);
void plan_mesh_make_dims(PlanMesh *m, int dp, int cp, int tp, int gpus_per_node);
/* The mesh axes of the usual layout of dp x cp x tp made by _dims: dp's is 0,
 * cp's 1 (when cp > 1), tp's the next (when tp > 1); -1 where absent. */
void plan_mesh_dims_axes(int cp, int tp, int *dp_axis, int *cp_axis, int *tp_axis);
int plan_mesh_devices(const PlanMesh *m);

/* May loop dim `d` of forward node n be split at all (the op's sharding
 * rule)? E.g. never the dims RMSNORM normalises over or ATTENTION's seq. */
bool plan_dim_splittable(const IrGraph *g, const IrNode *n, int d);

/* May node n (NULL: a boundary tensor) split dim d over mesh axis `outer`
 * and, nested inside it, over `inner`? Only the sequence, over a dp x cp x
 * tp mesh's cp and tp axes (sequence parallelism inside context
 * parallelism), in ops that treat rows alike; shard.c has the layout. */
bool plan_seq_nested(const IrGraph *g, const IrNode *n, const PlanMesh *m, int d, int outer, int inner);
/* ... the batch over mesh axes 0 and 1 (dp as dp_outer x dp_inner: the
 * experts exchanged over dp_inner, parallel folding's EP below DP,
 * docs/moe.md)? Any node: sequences are independent rows everywhere, and no
 * parameter carries the batch. Not offered to the search's ILP (its masks
 * keep the batch on the dp axis); framework plans and tests build it. */
bool plan_batch_nested(const IrGraph *g, const IrNode *n, const PlanMesh *m, int d, int outer, int inner);

/* Valid strategies of a forward node on a mesh (divisibility checked against
 * dim_size; `allow[a]` is a bitmask of dims that may be split over axis a,
 * ~0 for any). Replicated-everywhere is always first. Returns the count. */
int plan_strategies(const IrGraph *g, const IrNode *n, const PlanMesh *m, const int64_t *dim_size,
                    const uint64_t *allow, PlanStrategy *out, int max);

/* Requirements a layout places on every node's strategy, with axis 0 the
 * data-parallel axis and the tensor-parallel one next: axis 1, or with
 * PLAN_REQ_CP (a dp x cp x tp mesh, plan_mesh_make_dims) axis 2, axis 1
 * being context parallel. A mesh axis nothing is split over is only idle
 * GPUs in disguise (the search weighs using fewer GPUs on its own), and a
 * pinned --tp, --cp or --sp on must really shard. */
enum {
    PLAN_REQ_BATCH = 1 << 0,     /* nodes carrying the batch dim split it over axis 0 */
    PLAN_REQ_WEIGHTS = 1 << 1,   /* matmuls and embeddings split a dim of their weight over the tp axis */
    PLAN_REQ_SEQ_NORMS = 1 << 2, /* norms split the sequence over the tp axis (sequence parallelism) */
    PLAN_REQ_CP = 1 << 3,        /* nodes carrying the sequence split it over axis 1 */
};
/* Keep the strategies of node n (or, n NULL, of boundary tensor t) that meet
 * `req`; a requirement no strategy can meet is dropped for that node rather
 * than leaving it none. Returns the new count. */
int plan_strategies_require(const IrGraph *g, const IrNode *n, int t, unsigned req,
                            PlanStrategy *s, int k);

/* The shardings a node under strategy s needs for its inputs and makes for
 * its outputs (forward nodes; backward nodes pass their forward's strategy). */
void plan_shard_io(const IrGraph *g, const IrNode *n, const PlanStrategy *s, PlanSharding *in,
                   PlanSharding *out);
/* The sharding of the gradient of input i as n's backward produces it: split
 * like the input, partial over axes whose dim the input lacks. */
PlanSharding plan_shard_grad_in(const IrGraph *g, const IrNode *n, const PlanStrategy *s, int i);
/* Sharding of tensor t that a strategy implies (dims only, no partial). */
PlanSharding plan_shard_of(const IrGraph *g, int t, const PlanStrategy *s);
/* Context parallelism: is d the query sequence of ATTENTION node n (or of
 * its backward's forward)? Split over an axis, the node reads k and v whole
 * there (they are gathered first) and its backward's dk, dv are partial sums
 * over it. _axis: the axis splitting it under s, or -1. */
bool plan_cp_split(const IrGraph *g, const IrNode *n, int d);
int plan_cp_axis(const IrGraph *g, const IrNode *n, const PlanStrategy *s);
/* ... the ring form: s's exchange bit on that axis (PlanStrategy.xchg) keeps
 * k and v split like q, their blocks travelling the CP ranks inside the op,
 * and dk, dv complete on their owners (Megatron's p2p CP). */
bool plan_cp_ring(const IrGraph *g, const IrNode *n, const PlanStrategy *s);
/* ... the all-to-all (Ulysses) form: attention splits its heads over the cp
 * axis (the exchange bit on the axis splitting the heads marks it), so q, k,
 * v arrive by all-to-all as the whole sequence (in the program's CP row
 * order) of heads / cp heads and o leaves the same way; the axis, or -1.
 * plan_cp_axis returns it too. */
int plan_cp_a2a(const IrGraph *g, const IrNode *n, const PlanStrategy *s);
/* (context.c, docs/context.md) Context parallelism's split of the sequence.
 * _balanced: does g use the load-balanced split (two chunks per rank,
 * mirrored), or, having a parameter along the sequence, the contiguous one?
 * _chunks: where CP rank r of cp holds its queries in a sequence of S
 * positions: `chunk` consecutive positions starting at each pos[i] (at most
 * PLAN_MAX_CP_CHUNKS), the count returned. _pairs: the query-key pairs its
 * attention scores (causal: keys at or before the query, within `window`
 * when > 0; the count the kernels' tile skipping follows), _max over the
 * ranks: what the slowest rank does. cp = 1 gives the whole sequence's. */
#define PLAN_MAX_CP_CHUNKS 2
#define PLAN_MAX_CP 32 /* the programs' limit: 2 cp chunks of keys (runtime/rt.h) */
bool plan_cp_balanced(const IrGraph *g);
int plan_cp_chunks(int64_t S, int cp, int r, bool balanced, int64_t *chunk, int64_t *pos);
double plan_cp_pairs(int64_t S, int cp, int r, bool balanced, bool causal, int64_t window);
double plan_cp_pairs_max(int64_t S, int cp, bool balanced, bool causal, int64_t window);
/* MOE: the expert dim, which an exchange split (PlanStrategy.xchg) splits;
 * -1 for other ops. The top-k of the route making its gates (rules.c). */
int plan_expert_dim(const IrGraph *g, const IrNode *n);
/* The same for a MOE of several experts, -1 for a one-expert MOE too: that
 * is a shared expert (Qwen2-MoE's gated one), a dense MLP every token uses,
 * split by tensor parallelism as Megatron splits it, never by EP or ETP. */
int plan_routed_expert_dim(const IrGraph *g, const IrNode *n);
int plan_route_topk(const IrGraph *g, const IrNode *moe);
/* ZB-H1's W slot of a MOE (rt.h rt_moe_act_bwd_b; docs/codegen.md,
 * "Pipelines"; docs/moe.md), which codegen sizes and the cost model counts:
 * rows routed to one rank's e_local experts, and its elements rows x
 * (2 d_model + (2 + gated) d_expert) (the rows, their output gradients, the
 * activation's outputs and the first GEMMs' gradients). factor > 0: the
 * expected rows, the exchange group's tokens (tokens on each of its ep
 * ranks) x top-k x e_local / E, times factor (Plan.moe_wslot: the stack's
 * moe_imbalance), rounded up; a micro-batch routing more rows to the rank
 * runs its experts' weight gradients in B. factor 0, or every expert's row
 * chosen anyway: the dropless worst case, every token of the group choosing
 * min(top-k, e_local) of them (gates from no route, a shared expert's,
 * choose all), which no routing overflows. Never more than that. */
int64_t plan_moe_wslot_rows(const IrGraph *g, const IrNode *moe, int64_t tokens, int ep, int64_t e_local,
                            double factor);
int64_t plan_moe_wslot_numel(const IrNode *moe, int64_t rows, int64_t d_model, int64_t d_expert);
/* The mesh axes carrying an exchange split of n under s (bit a), and the
 * product of their sizes: n's expert-parallel degree. */
int plan_ep_degree(const IrGraph *g, const IrNode *n, const PlanMesh *m, const PlanStrategy *s);

/* Local (per-rank) size of every dim inside node n under strategy s (for
 * ATTENTION the kv-heads dim shrinks with the heads dim). */
void plan_local_sizes(const IrGraph *g, const IrNode *n, const PlanMesh *m, const PlanStrategy *s,
                      const int64_t *dim_size, int64_t *local);
int64_t plan_local_numel(const IrGraph *g, int t, const PlanMesh *m, const PlanSharding *sh,
                         const int64_t *dim_size);

/* Collectives turning `from` into `to` for tensor t, in execution order
 * (reductions first, then gathers, all-to-alls, slices). Returns the count. */
int plan_reshard(const IrGraph *g, int t, const PlanMesh *m, const PlanSharding *from,
                 const PlanSharding *to, const int64_t *dim_size, PlanColl *steps, int max);

/* `from` after the reductions plan_reshard towards `to` starts with (all-reduce,
 * reduce-scatter): the layout a generated program keeps a tensor in (its
 * canonical form, reduced towards its first consumer: codegen/cg_analyse.c),
 * which the memory model counts too. */
PlanSharding plan_reshard_reduced(const IrGraph *g, int t, const PlanMesh *m, PlanSharding from,
                                  const PlanSharding *to, const int64_t *dim_size);

bool plan_sharding_eq(const PlanSharding *a, const PlanSharding *b);
/* Nesting (PlanSharding.hi_outer): does axis b hold the outer pieces of the
 * dim both it and axis a split in sh (a != b)? */
bool plan_axis_outside(const PlanSharding *sh, int b, int a);
/* The sharding after one step of a reshard: a split the step makes is the
 * innermost of its dim (plan_reshard splits or unsplits a dim only at its
 * innermost level), an all-reduce only drops the partial bit. */
PlanSharding plan_sharding_after(const PlanSharding *sh, const PlanColl *step);
/* A strategy's loop dims as a sharding (no partial sums), with the order
 * its nested splits take: an exchange axis (the all-to-all's) nests inside
 * the other axis splitting its dim. */
PlanSharding plan_shard_loop(const PlanStrategy *s);
/* "wq[d_model, n_heads/tp, head_dim]" using axis names (e.g. {"dp","tp"}). */
const char *plan_sharding_str(const IrGraph *g, int t, const PlanSharding *sh,
                              const char *const *axis_names, char *buf, size_t n);


/* ============================================================ the plan */
typedef enum {
    PLAN_RECOMPUTE_NONE,      /* keep every activation backward reads */
    PLAN_RECOMPUTE_SELECTIVE, /* recompute core attention (a no-op saving with flash attention) */
    PLAN_RECOMPUTE_FFN,       /* recompute `block mlp`: keep only its input */
    PLAN_RECOMPUTE_FULL,      /* keep each layer's input; recompute the layer in backward */
    /* Megatron's --recompute-modules sets (recompute.def); only pinned
     * (--recompute), never searched. */
#define RC_SET(e, name, mods) PLAN_RECOMPUTE_##e,
#include "recompute.def"
    PLAN_RECOMPUTE_COUNT
} PlanRecompute;

/* Megatron's recompute modules (recompute.def rows). */
typedef enum {
#define RC_MODULE(e, name, strict) PLAN_RC_MODULE_##e,
#include "recompute.def"
    PLAN_RC_MODULE_COUNT
} PlanRcModule;
const char *plan_rc_module_name(PlanRcModule m);
/* The modules policy r reruns (0: r is none of recompute.def's sets). */
unsigned plan_recompute_modules(PlanRecompute r);
/* Does n rerun part of itself under r (not its whole node: moe_act's
 * activation inside the MoE node)? */
bool plan_recomputes_part(const IrGraph *g, const IrNode *n, PlanRecompute r);
/* The first module of r that reruns no node of g where Megatron refuses
 * that (recompute.def's strict: mla_up_proj without MLA, moe_act without
 * experts), or -1. */
int plan_recompute_unused(const IrGraph *g, PlanRecompute r);

/* The pipeline schedules (schedule.c), one row each: X(id, name (--schedule,
 * plan.json, stack files), title (plan.txt, the programs), chunks (0: one model
 * chunk per pipeline rank; 1: v > 1 chunks, interleaved), split (1: the
 * backward runs as two operations, B the input gradients and W the weight
 * gradients, W deferred)).
 *   1F1B         PipeDream-Flush, Megatron's default
 *   interleaved  Megatron's interleaved 1F1B (Narayanan et al. 2021)
 *   zb-h1        zero bubble ZB-H1 (Qi et al., ICLR 2024): 1F1B's forwards and
 *                input-gradient backwards, each weight gradient deferred to fill
 *                the drain's bubble, 1F1B's peak activations (plus what the
 *                pending weight gradients read) */
#define PLAN_SCHEDULES(X)                                                                      \
    X(1F1B, "1f1b", "1F1B", 0, 0)                                                              \
    X(INTERLEAVED, "interleaved", "interleaved 1F1B", 1, 0)                                    \
    X(ZB_H1, "zb-h1", "ZB-H1", 0, 1)
typedef enum {
#define X(id, name, title, chunks, split) PLAN_SCHED_##id,
    PLAN_SCHEDULES(X)
#undef X
    PLAN_NSCHED
} PlanSchedule;
const char *plan_schedule_name(PlanSchedule s);  /* "1f1b", "interleaved", "zb-h1" */
const char *plan_schedule_title(PlanSchedule s); /* "1F1B", "interleaved 1F1B", "ZB-H1" */
int plan_schedule_parse(const char *name);       /* the schedule named so, or -1 */
bool plan_schedule_chunked(PlanSchedule s);      /* runs v > 1 chunks per rank */
bool plan_schedule_split(PlanSchedule s);        /* runs the backward as B and W */

/* The format a plan's linear layers (GEMMs) run in (issue 33): BF16, or a
 * low-precision one whose inputs are cast with scales (per tensor for FP8,
 * per 32-element block for MXFP8, per 16-element block and per tensor for
 * NVFP4). Which GEMMs stay in BF16 is the stack's (docs/precision.md).
 * X(id, name, bits of an element) */
#define PLAN_PRECISIONS(X)                                                                     \
    X(BF16, "bf16", 16)                                                                        \
    X(FP8, "fp8", 8)                                                                           \
    X(MXFP8, "mxfp8", 8)                                                                       \
    X(NVFP4, "nvfp4", 4)
typedef enum {
#define X(id, name, bits) PLAN_PREC_##id,
    PLAN_PRECISIONS(X)
#undef X
    PLAN_NPREC
} PlanPrecision;
const char *plan_precision_name(PlanPrecision p);
int plan_precision_bits(PlanPrecision p);
/* The precision named s, or -1. */
int plan_precision_parse(const char *s);
/* The one rule for which GEMMs run in a plan's low-precision format, read by
 * the cost model (pass_prec_of: what it prices) and codegen (what the
 * programs run), so plan and program agree: a forward MATMUL reading a
 * parameter as its second operand inside the repeated layers, outside the
 * first `bf16_first` and last `bf16_last` of them (the stack keys
 * lp_bf16_first_layers, lp_bf16_last_layers), runs in `prec`; the embedding,
 * the head, attention's core, a MoE router's scores and everything else in
 * BF16. */
PlanPrecision plan_gemm_precision(const IrGraph *g, const IrNode *n, PlanPrecision prec, int bf16_first,
                                  int bf16_last);
/* The same rule for an MoE node's expert GEMMs (grouped), for stacks whose
 * experts run in the low precision (the stack key lp_experts: Megatron's
 * TEGroupedMLP; ptdc's programs run experts in bf16 and never ask). */
PlanPrecision plan_expert_precision(const IrGraph *g, const IrNode *n, PlanPrecision prec, int bf16_first,
                                    int bf16_last);
/* Under per-tensor scaling the scale of each operand of such a GEMM comes
 * from the amax of the whole tensor the GEMM computes with (one data-parallel
 * replica's micro-batch), whatever the sharding: the mesh axes over which that
 * amax is max-reduced (bit a), those splitting the operand at GEMM n (forward
 * node, strategy s) along any dim but the batch (tensor, sequence and
 * context parallel shards; a data-parallel replica's rows are its own).
 * which: 0 the input (in[0]), 1 the weight (in[1]), 2 the output (its
 * gradient is the backward GEMMs' operand). */
int plan_amax_axes(const IrGraph *g, const IrNode *n, const PlanStrategy *s, int which);
typedef enum { PLAN_ATTN_FLASH, PLAN_ATTN_MATERIALIZED } PlanAttention;

const char *plan_recompute_name(PlanRecompute r); /* "none", "full", ... (rules.c) */

typedef struct PlanStage {
    int first_piece, npieces;     /* the pieces this model chunk runs */
    int pp_rank;                  /* pipeline rank running it: chunk c runs on c % pp */
    PlanRecompute recompute;
} PlanStage;

typedef struct Plan {
    PlanMesh mesh;                /* logical mesh of each pipeline rank's devices */
    int pp;                       /* pipeline ranks */
    int v;                        /* model chunks per pipeline rank (1: plain 1F1B) */
    int nstages;                  /* pp * v */
    PlanStage *stages;            /* nstages, in model order */
    PlanStrategy *strategy;       /* one per forward node (g->nfwd) */
    int num_micro;                /* micro-batches per step */
    int64_t mb_seqs;              /* sequences per micro-batch over the whole mesh
                                     (= global_batch / num_micro): the IR's batch dim. A
                                     data-parallel replica holds plan_micro_batch(p)
                                     of them, the unit of --micro-batch and the frameworks */
    int zero;                     /* ZeRO stage over each parameter's data-parallel axes */
    PlanSchedule schedule;
    PlanAttention attention;
    PlanPrecision precision;      /* the linear layers' format (BF16 = 0, the default) */
    int lp_bf16_first, lp_bf16_last; /* repeated layers at each end whose linears stay BF16
                                     (the stack's keys; plan_gemm_precision) */
    int8_t axis[PLAN_NDIMS];      /* the mesh axis each parallel dimension runs along, or
                                     -1; set once by whoever completes the plan
                                     (plan_axes), read by everyone after */
    uint8_t nested[PLAN_NDIMS];   /* bit a: the dimension runs along axis a as well, inside
                                     axis[d]'s groups (Megatron-Core's parallel folding, in
                                     framework plans: dp over dp_outer x dp_inner with the
                                     experts exchanged over dp_inner; EP over dp x tp) */
    bool axes_set;
    double moe_wslot;             /* ZB-H1's MoE W slots (plan_moe_wslot_rows): rows over a rank's
                                     expected routed rows (the ptdc stack's moe_imbalance; below 1
                                     only in tests, to force overflow); 0: the dropless worst case
                                     (the stack's moe_wslot worst; ZeRO-2/3 always) */
    bool tp_overlap;              /* with sequence parallelism, each gather before a GEMM and
                                     reduce-scatter after one chunked with it (--tp-overlap:
                                     the ptdc stack's tp_overlap chunked; docs/codegen.md) */
} Plan;
/* Pieces a row-parallel GEMM runs in under tp_overlap, each one's
 * reduce-scatter beside the next (the programs and the cost model). */
#define PLAN_TP_RS_SPLITS 4

/* The plan's verifier (verify.c): false, after reporting each violation with
 * ir_error ("plan: ..."), unless the programs can execute p for g. */
bool plan_verify(const IrGraph *g, const Plan *p);

/* ===================================================== the schedule */
/* The micro-batch schedule of one pipeline rank: 1F1B (v = 1) or Megatron's
 * interleaved 1F1B (v chunks per rank), in schedule.c. Codegen executes it,
 * the cost model simulates it (passes/cost/schedule_sim.c) and counts the
 * activations it keeps alive. A plan holds at most PLAN_MAX_CHUNKS chunks
 * per rank (the cost model's tables); ptdc's programs at most
 * PLAN_PROG_MAX_CHUNKS (runtime/trainer/model_abi.h's CG_MAX_CHUNKS, which
 * codegen/cg_abi.c checks agrees), and the searches enumerate no more. A
 * framework stack only prices its plan, so a pinned layout may use up to
 * PLAN_MAX_CHUNKS there (Megatron-Bridge ran Qwen3-30B-A3B at 24 virtual
 * stages: tests/cost/bridge_moe.py). */
#define PLAN_MAX_CHUNKS 64
#define PLAN_PROG_MAX_CHUNKS 16
/* Codegen's limits on a pipeline: a parameter's pipeline ranks are one
 * 64-bit mask, and its message tags (stage x 128) stay inside the 32767 MPI
 * guarantees. The search keeps to them. */
#define PLAN_MAX_PP 64
#define PLAN_MAX_STAGES 256
/* Micro-batches per step: the generated program's schedule tables number
 * them in 16 bits, and the schedule simulation's cost grows with them. */
#define PLAN_MAX_MICRO 32767

typedef enum {
    PLAN_OP_F,                    /* a forward */
    PLAN_OP_B,                    /* a backward: all of it, or under a split schedule the
                                     input gradients (and whatever is not a weight's gradient) */
    PLAN_OP_W                     /* a split schedule's weight gradients of a micro-batch */
} PlanOpKind;

typedef struct PlanSchedOp {
    int bwd;                      /* PlanOpKind: 0 forward, 1 backward (B), 2 weight gradients (W) */
    int chunk;                    /* the rank's model chunk (0 .. v-1) */
    int mb;                       /* micro-batch */
} PlanSchedOp;

/* Operations per rank per step: 2 m v, or 3 m v for a split schedule. */
int plan_schedule_nops(PlanSchedule s, int v, int m);
/* Operation k (0 <= k < plan_schedule_nops) of pipeline rank `rank`. */
PlanSchedOp plan_schedule_op(PlanSchedule s, int pp, int v, int m, int rank, int k);
/* slots[j]: the most micro-batches chunk j holds between forward and
 * backward (B): what a static arena allocates for it. The same for ZB-H1 as
 * for 1F1B (ZB-H1 runs 1F1B's forwards and backwards in 1F1B's order). */
void plan_schedule_slots(int pp, int v, int m, int rank, int *slots);
/* The most micro-batches whose backward (B) has run and whose weight
 * gradients (W) wait, at once (ZB-H1 rank r: min(r + 1, m), the one just
 * past its B included): 0 unless the schedule is split. */
int plan_schedule_wslots(PlanSchedule s, int pp, int m, int rank);
/* Activation bytes the rank holds given each chunk's bytes per micro-batch
 * (saved[v]) from its forward to its backward, and (wsaved[v], NULL: none)
 * from its backward to its weight gradients (the inputs of the weight-gradient
 * GEMMs: a split schedule's pending W): sum over chunks of slots x saved +
 * wslots x wsaved (a static arena: ptdc), or, if dynamic, the peak over the
 * schedule of the bytes alive at once (a caching allocator: the reference
 * stacks). Equal when v == 1 and the schedule is not split. */
double plan_schedule_acts(PlanSchedule s, int pp, int v, int m, int rank, const double *saved,
                          const double *wsaved, bool dynamic);

/* ============================================================ rules.c */
/* One predicate decides recomputation for the search, the cost model and
 * codegen: does stage policy r rerun forward node n in backward? Embedding
 * and head never; FULL the whole layer; FFN the `block mlp` nodes; SELECTIVE
 * core attention, which only a materialised attention kernel saves anything
 * by (`materialized`: the cost model's kernel choice; programs run flash). */
bool plan_recomputed(const IrGraph *g, const IrNode *n, PlanRecompute r, bool materialized);
bool plan_is_mlp(const IrNode *n); /* n belongs to a `block mlp` or `block moe` */

/* =========================================================== fusion.c */
/* Does forward norm n run fused with the residual add right before it, as
 * one rt_add_rmsnorm_fwd or rt_add_layernorm_fwd? From the graph alone
 * (_pair): the node before n is an add without a broadcast operand whose sum
 * n reads. The pair may span two pieces (a layer's last add, the next
 * layer's first norm): a pipeline cut between them runs the norm alone. */
bool plan_add_norm_pair(const IrGraph *g, const IrNode *n);
/* ... and does the plan's `strategy` (one per node) let it (_fused): the add
 * makes its sum complete (no partial sums) in the layout the norm reads it
 * in, from operands in that layout, so nothing runs between the two. */
bool plan_add_norm_fused(const IrGraph *g, const IrNode *n, const PlanStrategy *strategy);
/* Forward GEMMs that ptdc's programs run as one rt_matmul_batch (q, k, v;
 * gate and up; their weight gradients likewise): n's group in node order,
 * n included, written to out (PLAN_GEMM_BATCH_MAX entries; NULL: count
 * only); 1 for n alone or not such a GEMM. _siblings from the graph alone,
 * _batch under a plan's strategies (one per node): members whose weights,
 * outputs and input are laid out alike. */
#define PLAN_GEMM_BATCH_MAX 4 /* runtime/rt.h: RT_MATMUL_BATCH_MAX */
int plan_gemm_siblings(const IrGraph *g, const IrNode *n, int *out);
int plan_gemm_batch(const IrGraph *g, const IrNode *n, const PlanStrategy *strategy, int *out);

/* =========================================================== layout.c */
/* Record which mesh axis each parallel dimension runs along, from what the
 * strategies do (not from what the producer meant): the axis where nodes
 * split the batch is dp, one where attention splits its queries' sequence
 * cp, the other one where nodes split another dim tp; an
 * axis nothing is split over serves none (its devices replicate). Whoever
 * completes a plan (the search, a framework's layout, a test) calls it once. */
void plan_axes(const IrGraph *g, Plan *p);
/* Ranks along parallel dimension d (1 where the plan has no axis for it):
 * the product over axis[d] and its nested axes. */
int plan_degree(const Plan *p, PlanDim d);

/* The micro-batch has two units: sequences per data-parallel replica (the
 * unit of --micro-batch, Megatron-LM and torchtitan) and sequences over the
 * whole mesh (Plan.mb_seqs, the IR's batch dim, CG_MB_SEQS). These are
 * the only conversions. */
int64_t plan_micro_batch(const Plan *p);            /* per replica */
int64_t plan_mb_seqs(int64_t micro_batch, int dp);          /* whole mesh */

/* A plan's layout in the usual words. */
typedef struct PlanLayout {
    int gpus;                     /* dp * cp * tp * pp * replicated */
    int dp, tp, pp, v;
    int dp_axis, tp_axis;         /* mesh axis of each, or -1 */
    int cp, cp_axis;              /* context parallelism: the sequence split cp ways over
                                     cp_axis (-1: none), attention gathering k and v */
    bool cp_balanced;             /* ... in the load-balanced split (plan_cp_balanced) */
    bool cp_ring;                 /* ... some attention passing k, v round the ring instead */
    bool cp_a2a;                  /* ... some attention splitting its heads (all-to-all) */
    int replicated;               /* devices along mesh axes nothing is split over (1: none) */
    bool sp;                      /* the norms split the sequence over the tp axis */
    /* Mixture of experts (moe: the model has MOE nodes): the experts split
     * ep ways (over ep_axis, by exchange or over gathered tokens), each
     * expert's width etp ways; expert data parallelism edp = the stage's
     * devices / (ep etp), the ranks holding the same expert shard. */
    bool moe, ep_exchange;
    int ep, etp, edp;
    int ep_axis, etp_axis;        /* mesh axis of each, or -1 */
    uint8_t dp_axes, ep_axes;     /* every mesh axis dp and ep run along (bit a; Plan.nested):
                                     several under parallel folding, 0 in a bare layout */
    int zero;
    int64_t micro_batch;          /* sequences per data-parallel replica per micro-batch */
    int num_micro;
    PlanSchedule schedule;
    unsigned recompute;           /* bit r: some stage uses PlanRecompute r */
} PlanLayout;
void plan_layout(const IrGraph *g, const Plan *p, PlanLayout *out);
/* "none", "full", or "mixed" when stages differ. */
const char *plan_layout_recompute_name(const PlanLayout *l);
/* "dp 16 x tp 8 x pp 4, sp, zero 1, micro-batch 1 x 16, 1f1b, recompute none". */
const char *plan_layout_str(const PlanLayout *l, char *buf, size_t n);
/* Of a model with experts: "ep 8 (folded over tp, all-to-all), etp 1, expert-dp 8"
 * (plan_layout_str appends it). */
const char *plan_layout_experts_str(const PlanLayout *l, char *buf, size_t n);
/* The same as ptdc flags: "--tp 8 --pp 4 --dp 16 --micro-batch 1 ...". */
const char *plan_layout_flags(const PlanLayout *l, char *buf, size_t n);

#endif
