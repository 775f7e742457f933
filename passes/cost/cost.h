/* cost.h: exports of passes/cost/: the machine (cluster.h) and software
 * (stack.h) a plan runs on, the cost and memory model (cost_*.c, mem_*.c),
 * the pipeline schedule simulated (schedule_sim.c, share.c, sync.c) and the
 * whole-plan prediction every reported number comes from (predict.c,
 * predict_out.c). Builds on the plan contract (plan.h) only. */
#ifndef PTDC_PASS_COST_H
#define PTDC_PASS_COST_H

#include "cost/cluster.h"
#include "cost/stack.h"

/* ====================================================== schedule_sim.c */
/* One step of the schedule as ptdc's programs run it, event by event:
 * every rank walks its operations in order; a forward of stage st waits for
 * stage st-1's forward of that micro-batch, a backward for stage st+1's
 * backward; receives block (the receiver copies the message once both sides
 * are there, xf[st] into stage st forward, xb[st] out of stage st backward),
 * sends do not. f[st], b[st]: one micro-batch through stage st (stage st runs
 * on rank st % pp as its chunk st / pp). Under a split schedule (ZB-H1) b[st]
 * is the backward's input-gradient part (B) and w[st] its weight gradients
 * (W), which wait for nothing but the rank (NULL for the other schedules, whose
 * b is the whole backward). finish[r] (may be NULL): when rank r ends its last
 * operation (its last W: the data-parallel reduction starts after it). Returns
 * the latest of them. */
double pass_schedule_sim(PlanSchedule s, int pp, int v, int m, const double *f, const double *b, const double *w,
                         const double *xf, const double *xb, double *finish);

/* CPU ranks sharing a node's cores (more ranks than cores). The cluster's
 * rates are then each rank's time slice (cores / ranks of one core's rate,
 * cluster.c), right while every rank computes; but a pipeline rank waiting
 * for a message sleeps, and the node's other ranks take its share (processor
 * sharing: the busy processes split the cores, none faster than one core).
 * Pipeline ranks are laid out in consecutive blocks of `group` per node
 * (the pipeline is the outermost mesh axis), each with `procs` processes
 * (its tensor- and data-parallel ranks) on the node. */
struct PassCluster;
typedef struct PassShare {
    int group;                    /* pipeline ranks sharing a node (1: none share) */
    double procs, cores;          /* processes of each on the node; the node's cores */
    double c;                     /* cores per process the rates assume (< 1) */
    double gain;                  /* how much of a waiting one's share the busy gain
                                     (PassGpu.core_share, measured) */
} PassShare;
/* The sharing of a plan with pp pipeline ranks of stage_ranks processes;
 * false (and nothing to do) unless ranks of different pipeline ranks share
 * cores. */
bool pass_share(const struct PassCluster *cl, int pp, int stage_ranks, PassShare *sh);
/* Progress per second of a busy pipeline rank, in seconds of its rates,
 * when `busy` pipeline ranks of its group compute: 1 + gain (ps - 1), ps
 * the processor-sharing speed, min(1, cores / (busy procs)) / c. */
double pass_share_speed(const PassShare *sh, int busy);
/* A lower bound on the step of pp ranks whose micro-batch times sum to tsum
 * (the slowest tmax), m micro-batches, when they share cores as sh says. */
double pass_share_bound(const PassShare *sh, int pp, double tsum, double tmax, double m);
/* pass_schedule_sim with the ranks sharing cores (sh; NULL: as above): the
 * operations of the busy ranks progress at pass_share_speed. */
double pass_schedule_sim_shared(PlanSchedule s, int pp, int v, int m, const double *f, const double *b,
                                const double *w, const double *xf, const double *xb, double *finish,
                                const PassShare *sh);

/* ============================================================ sync.c */
/* CPU ranks: the seconds a group of `group` ranks meeting at collectives
 * waits for its latest member, over compute-bound (GEMM, attention) and
 * other work of compute_s and other_s between them; 0 on GPUs. */
double pass_sync_wait(const struct PassCluster *cl, int group, double compute_s, double other_s);

/* ================================================= cost*.c, mem*.c (issue 3) */
/* Every efficiency and overhead constant of the model that is not a
 * property of one device, in one table (cost_consts.c, each with its
 * source; docs/cost-model.md lists them). The device-specific ones (GEMM
 * curve, bandwidths, overheads) are in the presets and cluster files. */
typedef struct PassCostConsts {
    double flash2_fwd, flash2_bwd;    /* FlashAttention-2 efficiency relative to gemm_eff */
    double flash1_fwd, flash1_bwd;    /* FlashAttention-1 likewise */
    double flash_bwd_ratio;           /* backward / forward FLOPs of a flash kernel (recomputes S) */
    double coll_base_s;               /* fixed latency of one collective (launch, setup) */
    double overlap_slowdown;          /* compute lost per second of overlapped NCCL traffic */
    int tp_rs_splits;                 /* pieces a row-parallel GEMM is split into to pipeline its
                                         reduce-scatter (tp_overlap userbuffers) */
    int tp_ub_buffers;                /* userbuffers of a gathered activation's size that
                                         tp_overlap userbuffers allocates */
    double cuda_ctx_bytes;            /* CUDA context and kernel images per process */
    double nccl_comm_bytes;           /* NCCL buffers per communicator */
    double workspace_bytes;           /* cuBLAS and attention workspaces */
    double opt_bytes_per_elem;        /* AdamW step traffic per parameter element of the shard */
} PassCostConsts;
extern const PassCostConsts pass_cost_consts;

/* A transfer run beside a GEMM (overlap.c): the seconds of `comm` left
 * exposed next to `gemm` seconds of GEMM split into `chunks` pieces. */
typedef enum {
    PASS_OVERLAP_RING,            /* an all-gather consumed piece by piece as it arrives */
    PASS_OVERLAP_PIPELINE,        /* a reduce-scatter of each output piece as it is made */
    PASS_OVERLAP_BULK,            /* beside a GEMM that does not depend on it */
    PASS_OVERLAP_OWN,             /* a whole all-gather beside the GEMM's rows of the rank's own
                                     block (1/chunks of it): ptdc's chunked programs */
} PassOverlapKind;
double pass_overlap_exposed(PassOverlapKind kind, double comm, double gemm, int chunks);

/* Time of one GEMM C[M,N] = A[M,K] B[K,N] (the backend's activation type,
 * fp32 accumulate), repeated `batch` times, on one device: shape-dependent
 * efficiency, roofline against memory, per-call overhead (cost_gemm.c). */
double pass_gemm_time(const PassGpu *gpu, double M, double N, double K, double batch);
/* The same at tensor-core rate `peak` with operands of in_bytes per element
 * (the result in the activation type): a faster format keeps the curve. */
double pass_gemm_time_at(const PassGpu *gpu, double M, double N, double K, double batch,
                         double peak, double in_bytes);
/* Efficiency (fraction of peak) pass_gemm_time assumes for that shape. */
double pass_gemm_eff(const PassGpu *gpu, double M, double N, double K, double batch);
/* Time of a memory-bound kernel (or `kernels` of them) moving `bytes`. */
double pass_mem_time(const PassGpu *gpu, double bytes, int kernels);

/* Mamba-2's scan as Megatron-Core runs it (stack key ssm_fused, cost_ssm.c):
 * one row per kernel of mamba_ssm's mamba_split_conv1d_scan_combined and the
 * layout copies around it, with its HBM bytes and the FLOPs of its dots. */
typedef struct PassSsdShape {
    double batch, seq;            /* local sequences a micro-batch, their length */
    double heads, hdim, groups, state; /* local heads of hdim, groups of B and C, d_state */
    double chunk;                 /* mamba_ssm's chunk_size (Megatron's MambaMixer: 128) */
    double e;                     /* activation element bytes */
} PassSsdShape;
typedef struct PassSsdKernel {
    const char *name;
    bool bwd;                     /* runs in backward (recomputations included) */
    int kernels;                  /* launches (torch ops: several) */
    double bytes, flops;          /* HBM traffic; tensor-core FLOPs of its dots */
    int ndots;
    double dot[2][4];             /* each dot: M, N, K, products (batch x computed share) */
} PassSsdKernel;
#define PASS_SSD_MAX_KERNELS 32
/* Fills k (PASS_SSD_MAX_KERNELS rows); returns the count. */
int pass_ssd_kernels(const PassSsdShape *s, PassSsdKernel *k);
/* Whether node n runs inside mamba_ssm's fused kernels under ssm_fused, so
 * it costs nothing of its own: the silu after a conv1d feeding ssd
 * (causal_conv1d's activation), softplus of ssd's dt and the dt_bias add
 * before it (_chunk_cumsum), swiglu(z, ssd(...)) (_chunk_scan's gate). */
bool pass_ssm_fused_away(const IrGraph *g, const IrNode *n);

/* What the cost model needs besides the graph and the plan: the cluster,
 * the attention kind the plan asks for, and the stack that runs it. */
typedef struct PassCostCtx {
    const PassCluster *cl;
    PlanAttention attention;
    PassStack st;
    /* The strategy of every node of the plan being priced, or NULL: which
     * GEMMs run batched (plan_gemm_batch) then follows from the graph alone,
     * the most the layouts allow (the ILP's per-node costs: a lower bound). */
    const PlanStrategy *plan;
    /* The format the plan's linear layers run in (pass_predict takes the
     * plan's); which of them do is the stack's (cost_prec.c). */
    PlanPrecision prec;
    /* --save-every: the checkpoint interval in steps plan.txt prices (0: none;
     * ckpt_cost.c). Not part of the search: a save does not change the plan. */
    int save_every;
    /* --optimizer lamb: the program runs LAMB (its trainer's --optimizer, a
     * run-time flag): each step's optimizer makes a second pass over the
     * shard (mem_param.c). */
    bool lamb;
    /* What pass_predict asks of the graph on every call, kept for a search
     * pricing many plans of one graph (pass_memo_new), or NULL: found afresh. */
    struct PassMemo *memo;
} PassCostCtx;

/* ============================================================== memo.c */
/* Pure functions of one graph that every pass_predict asks, each filled on
 * first use by the file that computes it and read back after: a framework
 * search prices tens of thousands of plans of one model (docs/planner.md,
 * "Speed"). A context whose memo was made for another graph ignores it. */
typedef struct PassMemo {
    const IrGraph *g;             /* the graph these are of */
    bool *over;                   /* ir_grad_in_place_all (predict.c), NULL before */
    double flops_per_token;       /* pass_model_flops_per_token (predict.c), < 0 before */
    int8_t *prec;                 /* pass_prec_of by forward node (cost_prec.c) for prec_key */
    int prec_key[4];              /* the context's prec, lp_bf16_first, lp_bf16_last, lp_experts */
    int *sx, *sx_at;              /* the inputs stage_extras may count, by piece: piece q's
                                     pairs sx[2 e], sx[2 e + 1] for e from sx_at[q] to
                                     sx_at[q + 1] - 1 (predict.c, stage_inputs), NULL before */
    int *ext, *ext_at;            /* the producers before each piece of its nodes' inputs:
                                     piece q's ext[ext_at[q]] to ext[ext_at[q + 1] - 1]
                                     (predict.c, same_piece), NULL before */
    int8_t cp_balanced;           /* plan_cp_balanced (cost_ops.c, attention): 1 yes, -1 no, 0 before */
    int *owner;                   /* by tensor: the first node from its piece's start reading it, -1
                                     none (mem_param.c, pass_param_owned), NULL before */
} PassMemo;
PassMemo *pass_memo_new(const IrGraph *g);
void pass_memo_free(PassMemo *m);

/* ========================================================= piece_memo.c */
/* One piece's costs for one micro-batch (predict.c, cost_piece) from earlier
 * plans a search ranks: the plans of one mesh share the strategies of most
 * pieces, and a piece (a layer with the same recomputation, ZeRO stage,
 * strategies and neighbours in its stage) is costed with the same inputs
 * again and again (docs/planner.md, "The ranking's piece costs"). Whatever
 * cost_piece reads is in the key or the memo's context: the cost context
 * (cluster, stack, optimizer, graph: another drops every entry), the plan's
 * context (mesh, micro-batch, attention kernel, precision: PassPieceCtx,
 * numbered), and per piece its stage's recomputation, the ZeRO stage, the
 * schedule's split, the all-to-all overlap, which pieces around it share
 * its stage and the strategies of the nodes it reads (predict.c,
 * piece_reach, decides which). */
typedef struct PassPieceKey {
    int ctx;                      /* the plan's context (PassPieceMemo.ctxs) */
    int piece;
    int from, to;                 /* the pieces cost_piece asks the stage of (PassPieceMemo.reach)
                                     clipped to the piece's own stage: which of them share it */
    int recompute;                /* the stage's PlanRecompute */
    int zero;                     /* the plan's ZeRO stage */
    int split;                    /* the schedule splits weight gradients (plan_schedule_split),
                                     where cost_piece reads it: an MoE node's W slot under ptdc's
                                     stack (0 elsewhere) */
    int a2a;                      /* the expert all-to-all overlap runs (pass_a2a_overlap_applies) */
} PassPieceKey;
typedef struct PassPieceCtx {
    PlanMesh mesh;
    int64_t mb_seqs;
    PlanAttention attention;
    PlanPrecision prec;
} PassPieceCtx;
typedef struct PassPieceMemo {
    bool check;                   /* every hit costed again and compared bit for bit, dying on
                                     a difference (the search's PTDC_SEARCH_CHECK) */
    long hits, misses;            /* counts, for PTDC_SEARCH_DEBUG */
    /* of the graph, by piece (predict.c fills them; NULL before): reach[2 q], [2 q + 1]
     * the lowest and highest piece cost_piece(q) asks the stage of, nodes[2 q], [2 q + 1]
     * the first and the end of the forward nodes whose strategies it reads */
    int *reach, *nodes;
    bool *moe;                    /* [npieces]: the piece has an MoE node (node_wsaved reads the
                                     schedule's split for it) */
    bool off;                     /* the graph's pieces are not in node order: no memo */
    struct PassMemo *facts;       /* the graph's facts (PassMemo) for a cost context without */
    /* the cost context */
    bool valid;
    const IrGraph *g;
    const PassCluster *cl;
    PassStack st;
    bool lamb;
    int save_every;
    const struct PassMemo *memo;
    /* the plans' contexts seen, the current one's number */
    int nctx, capctx, cur;
    PassPieceCtx *ctxs;
    /* the entries: keys, the strategies in their key (from strat, by strat_at), their
     * values (vsize bytes each) and an open-addressed index of entry + 1 (0: empty) */
    size_t vsize;
    int n, cap, nslot;
    PassPieceKey *keys;
    unsigned *hash;
    size_t *strat_at, nstrat, capstrat;
    PlanStrategy *strat;
    unsigned char *vals;
    int *slot;
} PassPieceMemo;
PassPieceMemo *pass_piece_memo_new(bool check);
void pass_piece_memo_free(PassPieceMemo *m);
/* The contexts of plan under c (c as pass_predict_cut prices it: the plan's
 * attention, precision and strategies) made current: every entry is
 * dropped if the cost context is another, the plan's numbered anew unless
 * seen before. */
void pass_piece_memo_begin(PassPieceMemo *m, const PassCostCtx *c, const IrGraph *g, const Plan *plan);
/* The graph's facts (PassMemo) kept beside the pieces' costs, for a search
 * whose cost context keeps none: made for g on first use. */
struct PassMemo *pass_piece_memo_facts(PassPieceMemo *m, const IrGraph *g);
/* The value stored under k and the ns strategies s, or NULL. */
const void *pass_piece_memo_find(PassPieceMemo *m, const PassPieceKey *k, const PlanStrategy *s, int ns);
/* Store vsize bytes under k and s (not there yet). */
void pass_piece_memo_add(PassPieceMemo *m, const PassPieceKey *k, const PlanStrategy *s, int ns, const void *val,
                         size_t vsize);

/* ========================================================= cost_prec.c */
/* A format's dense tensor-core rate on gpu (FLOP/s); 0: the GPU has none
 * (docs/precision.md). */
double pass_prec_peak(const PassGpu *gpu, PlanPrecision p);
/* The formats gpu runs, "bf16, fp8" into buf. */
const char *pass_prec_names(const PassGpu *gpu, char *buf, size_t n);
/* Bytes of one element of format p, its block scales included. */
double pass_prec_elem_bytes(PlanPrecision p);
/* The rows one group of a grouped GEMM in format p runs for `rows` rows:
 * rounded up to the format's multiple (cost_prec.c: the padding a quantised
 * expert's rows get), unchanged in bf16. */
double pass_prec_group_rows(PlanPrecision p, double rows);
/* The format forward node n's GEMMs run in under c: c->prec for the linear
 * layers (a matmul reading a weight inside the repeated layers) but those
 * the stack keeps in bf16 (the first and last lp_bf16_* layers), bf16 for
 * everything else (embedding, head, attention's core). */
PlanPrecision pass_prec_of(const PassCostCtx *c, const IrGraph *g, const IrNode *n);
/* A GEMM as pass_gemm_time, its operands in format p: FLOPs at p's peak
 * times the same efficiency curve, the operands streamed at p's width (the
 * output bf16). */
double pass_gemm_time_prec(const PassGpu *gpu, double M, double N, double K, double batch,
                           PlanPrecision p);
/* Seconds to quantise numel bf16 elements into format p, written in
 * `orient` orientations (2: with the transpose, one read): a memory-bound
 * kernel (read 2 B, write the format's bytes and block scales), plus a read
 * pass for the tensor's amax where its scale is the tensor's own (current
 * per-tensor scaling; NVFP4's second-level scale). */
double pass_prec_cast_s(const PassCostCtx *c, double numel, PlanPrecision p, int orient);
/* The same for an activation or a gradient; wgrad: the weight gradient reads
 * it too (NVFP4's Hadamard transform, the stack's nvfp4_rht). */
double pass_prec_cast_act_s(const PassCostCtx *c, double numel, PlanPrecision p, int orient, bool wgrad);
/* The same for a tensor quantised as `groups` splits, each its own tensor
 * (Transformer Engine's split_quantize of the experts' rows): where each
 * split is a call of its own (pass_prec_split_calls), its own kernels. */
double pass_prec_cast_split_s(const PassCostCtx *c, double numel, PlanPrecision p, int orient, bool wgrad,
                              double groups);
/* The quantise calls (each its own kernels, and a host op) Transformer
 * Engine makes for a tensor of `splits` splits in format p (1: one call, the
 * splits fused or grouped); wgrad as above. */
double pass_prec_split_calls(const PassCostCtx *c, PlanPrecision p, bool wgrad, double splits);
/* The orientations of a tensor in format p kept when want are read: 1 for
 * per-tensor FP8 on a GPU whose FP8 GEMM takes any layout (Blackwell). */
int pass_prec_orientations(const PassGpu *gpu, PlanPrecision p, int want);

/* Bytes of one element of dtype t as the modelled backend stores it:
 * bf16 tensors are fp32 on the CPU backend. */
int pass_elem_bytes(const PassCostCtx *c, IrDtype t);

/* Cost of one forward node on one rank for one micro-batch under a strategy:
 * its forward and backward kernels (including in-op collectives such as the
 * vocabulary-parallel cross-entropy's), from local shapes. Resharding on its
 * edges and parameter synchronisation are costed separately. */
typedef struct PassNodeCost {
    double fwd_s, bwd_s;
    double flops_fwd, flops_bwd;  /* local FLOPs */
    double bytes_fwd, bytes_bwd;  /* local HBM traffic */
    double ws_bytes;              /* temporaries its kernels hold while running, beyond
                                     inputs, outputs and gradients (S x S buffers, fp32 copies) */
    double gemm_s, attn_s;        /* of fwd_s + bwd_s: in GEMMs, in a flash attention kernel */
    double cast_s;                /* of fwd_s + bwd_s: quantising a low-precision GEMM's inputs
                                     and reducing their amax (cost_prec.c) */
    double a2a_s;                 /* of fwd_s + bwd_s: an MoE layer's all-to-all exchange of
                                     routed rows (dispatch and combine) */
    double a2a_fwd_s;             /* of a2a_s: the forward's (dispatch and combine) */
    double moe_dw_s;              /* of bwd_s: an MoE layer's expert weight-gradient GEMMs
                                     (what delay_wgrad_compute runs apart; a2a_overlap.c) */
    double gemm_fwd_s, gemm_dx_s, gemm_dw_s; /* a matmul's of gemm_s: its forward GEMM, its
                                     input's gradient, its weight's gradient */
    double act_fwd_s;             /* of fwd_s: an MoE node's expert activation (moe_act reruns it) */
    double fused_s;               /* of fwd_s: what running as one kernel with the node before
                                     it saves (plan_add_norm_pair; negative unless a measured
                                     curve says otherwise), which a recomputation of this node
                                     alone does not get */
} PassNodeCost;

void pass_cost_node(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                    const PlanStrategy *s, const int64_t *dim_size, PassNodeCost *out);
/* MOE node n: the routed rows its experts compute on the busiest rank
 * (docs/cost-model.md, mixture of experts: tokens x top-k x local experts /
 * experts, times the exchange group, times the stack's moe_imbalance where
 * the experts are split), from its local sizes; *d_model, *d_expert (may be
 * NULL): the row width in and the local expert width. */
double pass_moe_rows(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                     const PlanStrategy *s, const int64_t *local, double *d_model, double *d_expert);
/* ZB-H1's MoE W slots (plan_moe_wslot_rows, docs/moe.md): the factor over
 * a rank's expected routed rows they hold under stack c for plan p (0: the
 * dropless worst case: the stack's moe_wslot_worst, or ZeRO-2/3, whose
 * experts' gradient accumulator is W's per-micro-batch temporary, which an
 * overflowing B cannot add into), what Plan.moe_wslot carries to codegen;
 * and the expected fraction of micro-batches whose routed rows overflow a
 * slot of `rows` (of `worst`, the dropless worst case), their experts'
 * weight gradients run in B: none when the slot holds the worst case or
 * routing is force-balanced (moe_imbalance 1); else the busiest of the
 * ranks sharing the experts, a maximum of many loads, follows a Gumbel law
 * whose mean the slot holds (moe_imbalance is the busiest rank's expected
 * rows over the mean), exceeded with probability 1 - exp(-exp(-gamma)) =
 * 0.430, and the exchange waits for that rank. */
double pass_moe_wslot_factor(const PassCostCtx *c, const Plan *p);
/* The same for a plan under ZeRO stage `zero` (all the factor reads of it). */
double pass_moe_wslot_factor_zero(const PassCostCtx *c, int zero);
double pass_moe_wslot_overflow(const PassCostCtx *c, int64_t rows, int64_t worst);
/* wslot.c: whether node n holds anything in a split schedule's W slot (the
 * experts and the GEMMs reading a parameter); its bytes there per
 * micro-batch under strategy s (in, out: plan_shard_io's), its MoE rows at
 * `factor` (pass_moe_wslot_factor), added to *acc as pass_predict sums
 * them; *rows, *worst (NULL: not wanted) an MoE node's slot rows and the
 * dropless worst case under ptdc's programs (0 otherwise). */
bool pass_wslot_holds(const IrGraph *g, const IrNode *n);
void pass_wslot_add(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                    const PlanStrategy *s, const PlanSharding *in, const PlanSharding *out, const int64_t *ds,
                    double factor, double *acc, int64_t *rows, int64_t *worst);
/* Which nodes run fused (plan.h: plan_add_norm_pair, plan_gemm_batch) is
 * priced so: a fused add + norm as one call (unless the stack sets
 * add_norm_unfused; a pipeline cut between the two runs the norm alone,
 * which pass_predict charges and the search's piece costs do not: one
 * norm's saving per stage, a lower bound still), each batched GEMM as its
 * share of the batched call (pass_gemm_time with batch = the group). */
/* The forward seconds recomputing n under r costs: fwd_s, less the fusion
 * saving unless the add before it, in its piece, is recomputed with it. */
double pass_rec_fwd_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, PlanRecompute r,
                      const PassNodeCost *nc);
/* Seconds for one collective step (plan_reshard's output) of elements of
 * elem_bytes on mesh axis k->axis: alpha-beta with nccl-tests bus-bandwidth
 * factors, NVLink inside a node, the members' NICs across nodes. A
 * PLAN_COLL_SENDRECV step is a pipeline transfer of k->numel elements per
 * rank to the next stage's ranks (k->axis ignored). */
double pass_cost_coll(const PassCostCtx *c, const PlanMesh *m, const PlanColl *k, int elem_bytes);
/* One collective of `kind` over the group of every mesh axis in `axes`
 * (bit a), `numel` counted as PlanColl's: one ring (or exchange) over the
 * product of the sizes, whose members on one node are the product of each
 * axis's (a gradient's data-parallel group, the experts' exchange group). */
double pass_cost_coll_axes(const PassCostCtx *c, const PlanMesh *m, PlanCollKind kind, unsigned axes,
                           double numel, int elem_bytes);
/* One MoE dispatch or combine over the exchange group of `axes`: T tokens a
 * rank, each to k of the group's experts (El a rank), rows of D elements of
 * elem_bytes, the busiest rank imb times the mean, moved as the stack's
 * moe_dispatcher moves them (cost_coll.c). */
double pass_cost_a2a_moe(const PassCostCtx *c, const PlanMesh *m, unsigned axes, double T, double k,
                         double El, double D, double imb, int elem_bytes);
/* The chance that k distinct experts drawn uniformly from E miss all of
 * `held` given ones (force-balanced routing). */
double pass_a2a_miss(double E, double held, double k);
/* Bytes forward node n keeps alive for its backward on one rank for one
 * micro-batch under recomputation policy r (activations only: parameters
 * are counted by pass_param_bytes). A tensor several nodes save is counted
 * once, at the first of them in forward order. FULL keeps only each layer's
 * inputs (counted at their first consumer in the layer); FFN keeps only the
 * input of `block mlp`; pieces outside repeats are never recomputed. The
 * working set of the layer being recomputed is a per-stage term (pass_predict). */
double pass_saved_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                        const PlanStrategy *s, const int64_t *dim_size, PlanRecompute r);
/* The same, itemised: each kept tensor (tensor -1 for kept values that are
 * not IR tensors: S x S probabilities, unfused-norm copies) with its slot
 * (inputs 0.., then outputs) and bytes in the layout n reads or writes it.
 * pass_predict keeps an input that was all-gathered for n in the producer's
 * smaller layout and re-gathers it in backward (Megatron's sequence
 * parallelism), which per-node counts cannot see. Returns the count. */
typedef struct PassSaved {
    int tensor, slot;
    double bytes;
} PassSaved;
int pass_saved_list(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                    const PlanStrategy *s, const int64_t *dim_size, PlanRecompute r,
                    PassSaved *items, int max);
/* pass_saved_list in two steps, for callers that ask for many strategies
 * of one node: the slots whose tensors n keeps under r, in its order
 * (strategy-free: the graph, the policy and the stack decide them; at most
 * nin + nout), then the items from those slots and n's layouts under s
 * (plan_shard_io's in and out). */
int pass_saved_slots(const PassCostCtx *c, const IrGraph *g, const IrNode *n, PlanRecompute r, int *slots);
int pass_saved_list_at(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                       const PlanStrategy *s, const PlanSharding *in, const PlanSharding *out,
                       const int64_t *dim_size, PlanRecompute r, const int *slots, int nslots,
                       PassSaved *items, int max);
/* Bytes per element of the copy of input `slot` that n keeps for its
 * backward: a low-precision GEMM's cast input at its format's width, else
 * the tensor's type as the backend stores it. */
double pass_saved_elem_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, int slot);
/* One past the last forward node the cost model looks in for readers of
 * activation t: the end of the piece after its producer's. */
int pass_readers_end(const IrGraph *g, int t);
/* The layout a generated program keeps tensor t in: its producer's, reduced
 * towards its first forward consumer (codegen/cg_analyse.c's canonical form, one
 * kept copy whatever layout its keepers read), looked for in t's piece and the
 * next. strat: every node's strategy. */
PlanSharding pass_kept_sharding(const IrGraph *g, const PlanMesh *m, const PlanStrategy *strat,
                                const int64_t *dim_size, int t);
/* Does a reader's backward run resharding step kind k again, from the copy of
 * its input the program keeps (its producer's, reduced)? Not the reductions;
 * all-gathers always (the shard is kept); all-to-alls and slices unless the
 * stack keeps the exchanged copy (keeps_exchanged). */
bool pass_redone(const PassCostCtx *c, PlanCollKind k);
/* pass_saved_bytes in those layouts, as pass_predict counts activations: an
 * input all-gathered for n is kept smaller and gathered again in backward
 * (*regather_s, when not NULL: the time of the steps n's backward runs again
 * to read its kept inputs, pass_redone), one sliced for n (sequence
 * parallelism's norms reading a replicated residual) is kept whole. lower_bound:
 * nothing counted larger than n reads it (the search, whose strategies of
 * later nodes are not all chosen yet, needs a lower bound of pass_predict). */
double pass_kept_bytes(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m,
                       const PlanStrategy *strat, const int64_t *dim_size, const IrNode *n,
                       PlanRecompute r, bool lower_bound, double *regather_s);
/* pass_kept_bytes with lower_bound for every policy r with on[r] into
 * out[r] (0 for the others), the same numbers: the node's layouts and each
 * saved tensor's kept layout found once for all the policies. */
void pass_kept_bytes_each(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m,
                          const PlanStrategy *strat, const int64_t *dim_size, const IrNode *n,
                          const bool *on, double *out);
/* ... with each policy's saved slots given (pass_saved_slots of n under r:
 * slots[r * (IR_MAX_IN + IR_MAX_OUT) ..], nslots[r] of them; read for the
 * policies on alone): strategy-free, so a search asks them once. */
void pass_kept_bytes_each_at(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m,
                             const PlanStrategy *strat, const int64_t *dim_size, const IrNode *n,
                             const bool *on, const int *slots, const int *nslots, double *out);
/* Does forward node n run again during backward under policy r? Pieces
 * outside repeats never do; FFN reruns `block mlp`; SELECTIVE reruns core
 * attention where it is materialised (a flash kernel recomputes inside its
 * own backward, priced by pass_cost_node). c NULL: flash attention. The
 * rule is plan.h's plan_recomputed; this gives it the cost model's
 * attention kernel. */
bool pass_recomputed(const PassCostCtx *c, const IrGraph *g, const IrNode *n, PlanRecompute r);
/* Does attention node n (forward, or its backward) run as Transformer
 * Engine's UnfusedDotProductAttention with sinks? The stack names a
 * materialised kernel (attention_kernel fused_softmax, Megatron's
 * --attention-backend unfused, or eager) and n has a sinks input: TE's
 * fused masked softmax cannot take the S x (Sk + 1) scores, so the softmax
 * runs as torch ops in fp32 whichever was named (cost_ops.c prices it,
 * pass_saved_list keeps its fp32 output). ptdc's own kernels (AUTO) never. */
bool pass_attn_te_sinks(const PassCostCtx *c, const IrNode *n);
/* Model-state bytes on one rank of the parameters node n owns (those it is
 * the first consumer of): bf16 weights and grads, fp32 master and moments,
 * sharded over the parameter's data-parallel axes (those over which its
 * gradient is partial, plan_shard_grad_in) per the ZeRO stage: 1 shards the
 * optimizer state, 2 also the gradients, 3 also the weights. */
double pass_param_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                        const PlanStrategy *s, int zero);
/* The same, itemised: weights, gradients, optimizer state (master + moments). */
void pass_param_bytes3(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                       const PlanStrategy *s, int zero, double *weights, double *grads, double *optim);
/* The same for one parameter t that n reads, whether or not n owns it: a
 * pipeline stage holds its own copy of a parameter an earlier stage owns (a
 * tied embedding read again by the LM head). */
void pass_param_bytes_of(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                         const PlanStrategy *s, int zero, int t, double *weights, double *grads,
                         double *optim);
/* Is n the first forward node reading parameter t (the one that owns it)? */
bool pass_param_owned(const IrGraph *g, const IrNode *n, int t);
/* Seconds per optimizer step to synchronise those parameters' gradients (and
 * gather ZeRO-3 parameters, per micro-batch count num_micro): ZeRO 0 an
 * all-reduce, 1 a reduce-scatter and a parameter all-gather per step, 2 a
 * reduce-scatter per micro-batch and an all-gather per step, 3 per
 * micro-batch two all-gathers (forward, backward) and a reduce-scatter. The
 * total link time; how much of it overlaps compute is pass_predict's. */
/* The all-gather of updated weights after the optimizer (ZeRO-1/2), s per step. */
double pass_param_gather_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                           const PlanStrategy *s, int zero);
double pass_param_sync_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                         const PlanStrategy *s, int zero, int num_micro);
/* The latency part of the per-step collectives pass_param_sync_s prices one
 * per parameter tensor: *red_s of the reduction (ZeRO 0 all-reduce, 1
 * reduce-scatter), *gather_s of ZeRO-1/2's all-gather, summed over the
 * parameters n owns; returns how many are synchronised. A stack that
 * reduces in buckets pays it once per bucket (pass_predict). */
int pass_param_sync_lat(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                        const PlanStrategy *s, int zero, double *red_s, double *gather_s);
/* Bytes of optimizer state per parameter element (fp32 master and moments). */
int pass_optim_bytes(const PassCostCtx *c);
/* ptdc's programs, per parameter n owns: the kernels run once per step
 * (zeroing the gradient, its share of the gradient norm, AdamW on the
 * shard), and, under ZeRO 2 and 3, per micro-batch (zeroing the full
 * gradient it reduce-scatters, adding its shard). Seconds on one rank. */
double pass_param_step_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                         const PlanStrategy *s, int zero);
double pass_param_mb_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                       const PlanStrategy *s, int zero);

/* ============================================================ host.c */
/* The host's work for one micro-batch of a piece (or a rank's sum of
 * them): seconds of dispatching and launching forward and backward
 * (recomputation in backward), and the device-to-host syncs among them. */
typedef struct PassHostCost {
    double fwd_s, bwd_s;
    double syncs_f, syncs_b;
    /* The forward in launch order (host.c, "the stretches"): the max-plus
     * map of (host clock, GPU clock) through its launches, GPU work and
     * syncs, walked with the nodes' GPU seconds gpu_f; ord_n: the pieces
     * composed into it (0: none, the map unset). */
    double ord_f[2][2];
    double gpu_f;
    int ord_n;
} PassHostCost;
/* Host seconds per framework op on the cluster's host under c's stack (0:
 * not modelled, a CPU device, or a full-step CUDA graph). */
double pass_host_op_s(const PassCostCtx *c);
/* Piece `piece` under recomputation r on mesh m (c->plan: the strategies,
 * for an MoE layer's local experts): its ops as the stack runs them, with
 * colls[2 i], colls[2 i + 1] the collectives launched on the input edges of
 * its i-th node forward and backward (captured CUDA graphs one launch
 * each), times pass_host_op_s; ncs[i] (NULL: none) the i-th node's GPU
 * seconds, which the forward's order is walked with; a2a: the layers run as
 * the expert all-to-all overlap's schedule nodes (pass_a2a_overlap_applies),
 * a call each. */
void pass_host_piece(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m, int piece, PlanRecompute r,
                     bool a2a, const double *colls, const PassNodeCost *ncs, PassHostCost *h);
void pass_host_add(PassHostCost *sum, const PassHostCost *h);
/* One micro-batch's GPU seconds *gf (forward) and *gb (backward) of a
 * rank whose host syncs (h): the forward as its launches, GPU work and
 * syncs order it (after a sync the GPU waits for each launch until the
 * host is ahead again), the backward max(host, GPU). */
void pass_host_bound(const PassCostCtx *c, const PassHostCost *h, double *gf, double *gb);

/* ================================================ predict*.c (issue 3) */
/* One pipeline rank: its time per micro-batch and its memory in bytes. */
typedef struct PassRankMem {
    double dw_s;                   /* of bwd_s: the weight-gradient GEMMs, a split schedule's W */
    double fwd_s, bwd_s;           /* per micro-batch over its chunks (bwd includes recompute,
                                      resharding and pipeline transfers) */
    double weights, grads, optim;  /* model states (pass_param_bytes3) */
    double acts;                   /* activations kept for backward, all in-flight micro-batches */
    double inflight;               /* micro-batches in flight (chunk-micro-batches if interleaved) */
    double recompute_ws;           /* one layer's activations while it is recomputed (full) */
    double transient;              /* peak backward gradient buffers and loss temporaries */
    double buffers;                /* communication buffers, ZeRO-3 gathered weights */
    double runtime;                /* CUDA context, NCCL communicators, library workspaces */
    double frag;                   /* caching-allocator fragmentation (ctx frag_act; 0 for ptdc) */
    double total;
} PassRankMem;

typedef struct PassPrediction {
    double step_time_s, tokens_per_s, mfu, hfu;
    double pipeline_s;             /* compute + resharding + p2p under the schedule, with bubble */
    double bubble_s;               /* pipeline fill and drain */
    double stage_fwd_s, stage_bwd_s; /* slowest pipeline rank, one micro-batch (bwd includes recompute) */
    double recompute_s;            /* recomputation per step on the slowest rank */
    double reshard_s;              /* resharding collectives per step on the slowest rank */
    double p2p_s;                  /* pipeline transfers per step on the slowest rank */
    double dp_sync_s, dp_exposed_s;/* gradient/ZeRO traffic per step, and the part not hidden */
    double optimizer_s;
    /* The slowest rank's step taken apart like a profile of the program
     * (PTDC_PROFILE): GEMMs, attention, the other kernels, host token loads;
     * compute per step without recomputation or communication. */
    double gemm_s, attn_s, kernels_s, host_s;
    double cast_s;                 /* of kernels_s: low-precision casts and amax reductions */
    double a2a_s;                  /* of the pipeline: MoE all-to-all dispatch and combine per
                                      step on the slowest rank (inside the kernels' time) */
    double host_wait_s;            /* of the pipeline: the slowest rank's GPU waiting for its
                                      host per step (host.c) */
    bool a2a_overlap;              /* the expert all-to-all runs beside another micro-batch's
                                      compute (stack moe_a2a_overlap, where
                                      pass_a2a_overlap_applies) */
    double a2a_hidden_s;           /* of a2a_s: the part hidden so, per step on the slowest
                                      rank (a2a_s - a2a_hidden_s is exposed) */
    double model_flops;            /* per step, PaLM convention: tokens * (6N + 12 L H Q T) */
    double hw_flops;               /* per step, executed (recompute included) */
    /* activation offloading (stack offload_act_layers, where pass_offload_applies):
     * layers offloaded, bytes over the host link per step (both ways), the
     * copies' seconds and the part of them that stalls compute */
    int offload_layers;
    double offload_bytes, offload_copy_s, offload_s;
    double peak_mem_bytes, capacity_bytes, margin_bytes; /* margin = usable - peak */
    bool fits;
    int peak_rank;                 /* pipeline rank with the largest memory */
    int npp;                       /* entries of mem */
    PassRankMem *mem;              /* per pipeline rank (heap; pass_prediction_free) */
} PassPrediction;

/* =========================================================== offload.c */
/* Activation offloading (stack offload_act_layers; Megatron
 * --cpu-offloading-num-layers): N of a rank's L layers, each f seconds of
 * forward, b of backward and copy seconds to move its saved activations one
 * way over the host link, replayed as Transformer Engine schedules the
 * copies. fwd_s, bwd_s: the compute streams' waits per micro-batch;
 * resident: the most layers' activations on the GPU at once (L when N is 0
 * or not below L: nothing offloaded). */
typedef struct PassOffload {
    double fwd_s, bwd_s, copy_s;
    int resident;
} PassOffload;
void pass_offload(int L, int N, double f, double b, double copy, PassOffload *out);
/* Does the plan offload activations: the stack asks for it (a framework
 * stack, dynamic_memory = yes), the cluster has host_copy_gbs, and the
 * layout is one Megatron offloads in (TransformerConfig: no pipeline, no
 * recomputation)? Other plans run, and are priced, without it. */
bool pass_offload_applies(const PassCostCtx *c, const Plan *plan);

/* ======================================================= a2a_overlap.c */
/* Megatron-Core's expert all-to-all overlap (--overlap-moe-expert-parallel-comm
 * with --delay-wgrad-compute; stack moe_a2a_overlap): in the 1F1B steady
 * state the forward of one micro-batch and the backward of another run
 * layer by layer as one step, each all-to-all on a communication stream
 * beside the other micro-batch's compute. One MoE layer of that pair, per
 * micro-batch (seconds): pre_f, pre_b the forward and backward of what runs
 * before the dispatch (attention, norms, router; backward with its weight
 * gradients), mlp_f the experts' forward, mlp_dx and mlp_dw their backward's
 * data and weight gradients, a2a_f, a2a_b one forward and one backward
 * all-to-all (dispatch and combine take one each; n_b: the backward's
 * count). */
typedef struct PassA2aLayer {
    double pre_f, pre_b, mlp_f, mlp_dx, mlp_dw, a2a_f, a2a_b;
    int n_b;
} PassA2aLayer;
/* The pair's seconds on the two streams (model_chunk_schedule_plan.py,
 * TransformerLayerSchedulePlan.run); *hidden: the all-to-all seconds that
 * ran beside compute. */
double pass_a2a_pair_s(const PassA2aLayer *l, double *hidden);
/* Does the plan run it: the stack asks (moe_a2a_overlap, a framework stack),
 * an MoE layer exchanges its rows by all-to-all (EP > 1), the pipeline is
 * one stage or interleaved, no stage recomputes whole layers, and ZeRO-3
 * (Megatron-FSDP) only without a pipeline (transformer_config.py
 * __post_init__, combined_1f1b.py)? */
bool pass_a2a_overlap_applies(const PassCostCtx *c, const IrGraph *g, const Plan *plan);
/* Of m micro-batches through v chunks on pipeline rank `rank` of pp, the
 * share run outside the overlapped steady state: the warm-up forwards (one
 * more than without the overlap) and the cool-down backwards
 * (schedules.py, get_pp_rank_microbatches). */
double pass_a2a_unpaired(int pp, int v, int m, int rank);

/* ========================================================= ckpt_cost.c */
/* What a checkpoint save blocks the step loop for, per save (seconds; < 0:
 * not priced, the cluster lacks storage_write_gbs or host_copy_gbs). */
typedef struct PassCkptCost {
    double total_bytes;   /* one checkpoint: 12 bytes per parameter */
    double rank_bytes;    /* the busiest rank's share */
    double write_s;       /* that share at storage_write_gbs: the synchronous save's
                             blocked time, the asynchronous one's background write */
    double sync_s, async_s; /* blocked per save (async: the copy to host staging) */
    double wait_s;        /* async: what the next save waits when the write outlasts
                             the c->save_every steps between saves */
} PassCkptCost;
/* devices: the devices of one pipeline rank (its stage's state is split
 * evenly over them). */
void pass_ckpt_cost(const PassCostCtx *c, const IrGraph *g, const PassPrediction *pr,
                    int devices, PassCkptCost *out);

/* Fraction of HBM ptdc keeps free when ctx->alloc_reserve is 0: the runtime's
 * static arena has no fragmentation, so this covers the memory model's error
 * (docs/cost-model.md derives it from the reference runs). */
#define PASS_MEM_RESERVE 0.03

/* Evaluate a complete plan: step time, throughput, MFU/HFU, per-rank memory
 * and whether it fits. Requires plan->strategy for every forward node and
 * plan->stages covering every piece once; plan->attention overrides
 * c->attention. Well under a millisecond for a 100-layer model (layers with
 * equal strategies and surroundings are costed once; bench/cost). */
void pass_predict(const PassCostCtx *c, const IrGraph *g, const Plan *plan, PassPrediction *out);
/* A search ranks many plans that lose: pass_predict but for the schedule's
 * simulation (most of its time on deep pipelines), which is skipped when a
 * floor of the step time from the stages' times is above the caller's cut
 * (`fits`, or `nofit` for a plan that does not fit): false then, and out
 * has pass_predict's memory (mem, peak_mem_bytes, margin_bytes, fits) and
 * step_time_s the floor, nothing else. True: out is pass_predict's.
 * cut->floor: that floor, times 1 - PASS_PREDICT_CUT_TOL (the summation
 * orders differ), never above pass_predict's step time; 0 where none is
 * made (reference stacks, ranks sharing cores). */
typedef struct PassPredictCut {
    double fits, nofit;            /* in: skip above these */
    double floor;                  /* out */
    struct PassPieceMemo *pieces;  /* in: the pieces' costs of earlier plans (piece_memo.c), or
                                      NULL: every piece costed afresh */
} PassPredictCut;
#define PASS_PREDICT_CUT_TOL 1e-9
bool pass_predict_cut(const PassCostCtx *c, const IrGraph *g, const Plan *plan, PassPredictCut *cut,
                      PassPrediction *out);
/* The runtime term of a rank's memory (PassRankMem.runtime): CUDA context,
 * NCCL communicators, library workspaces (or, for a measured device, its
 * start-up and per-communicator bytes), for a pipeline rank on mesh m. */
double pass_runtime_bytes(const PassCostCtx *c, const PlanMesh *m, int pp);
/* The memory a plan may fill: HBM less the stack's reserve, the larger of
 * alloc_reserve x HBM and alloc_reserve_bytes (PASS_MEM_RESERVE x HBM when
 * neither is set). */
double pass_usable_bytes(const PassCostCtx *c);
void pass_prediction_free(PassPrediction *p);
/* PaLM model FLOPs per token: 6 N + 12 L H Q T, N = every trained parameter
 * a token uses (the reference tables' convention; of an MoE layer's experts
 * only its top-k: N is pass_active_params), L H Q T from the attention nodes. */
double pass_model_flops_per_token(const IrGraph *g);
/* Parameters one token's forward reads: all of them but the experts a
 * token's router does not choose (an expert weight counts k / n_experts). */
double pass_active_params(const IrGraph *g);
/* Renderings for --plan-only (text) and --json. The JSON object has
 * "predicted": {step_time_s, tokens_per_s, mfu, hfu, peak_mem_bytes,
 * capacity_bytes, margin_bytes, fits, ..., "memory": [per rank breakdown]}. */
void pass_prediction_print_text(FILE *f, const IrGraph *g, const Plan *plan,
                                const PassCostCtx *c, const PassPrediction *p);
void pass_prediction_print_json(FILE *f, const IrGraph *g, const Plan *plan,
                                const PassCostCtx *c, const PassPrediction *p);

#endif
