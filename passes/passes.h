/* passes.h: exports of the passes/ layer: sharding algebra, cluster, cost and
 * memory model, intra-op ILP, inter-op search, autodiff. Each section names
 * the file that owns it and states what it requires.
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
 *             the axes over which its values are partial sums.
 *   backward nodes use the strategy of the forward node they differentiate.
 */
#ifndef PTDC_PASSES_H
#define PTDC_PASSES_H

#include "ir.h"

/* ======================================================== shard.c: sharding */
#define PASS_MAX_AXES 2

typedef struct PassMesh {
    int naxes;                    /* 1 or 2 */
    int size[PASS_MAX_AXES];      /* devices along each axis */
    int nodes[PASS_MAX_AXES];     /* nodes one group along this axis spans (1 = NVLink only) */
    int per_node[PASS_MAX_AXES];  /* members of one such group that share a node */
} PassMesh;

typedef struct PassStrategy {
    int16_t dim[PASS_MAX_AXES];   /* loop dim split over axis a, or -1 */
} PassStrategy;

typedef struct PassSharding {
    int16_t dim[PASS_MAX_AXES];   /* this tensor's dim split over axis a, or -1 (replicated) */
    uint8_t partial;              /* bit a set: values are partial sums over axis a */
} PassSharding;

typedef enum {
    PASS_COLL_NONE,
    PASS_COLL_ALLREDUCE,      /* partial -> replicated */
    PASS_COLL_REDUCESCATTER,  /* partial -> split on dim */
    PASS_COLL_ALLGATHER,      /* split on dim -> replicated */
    PASS_COLL_ALLTOALL,       /* split on dim -> split on dim2 */
    PASS_COLL_SLICE,          /* replicated -> split on dim (local copy, no traffic) */
    PASS_COLL_SENDRECV,       /* pipeline point-to-point */
} PassCollKind;

/* One step of a resharding, on one mesh axis. `numel` is the number of
 * elements of the full buffer the collective moves, counted per rank the
 * nccl-tests way: all-reduce: the local tensor; reduce-scatter: the input;
 * all-gather: the output; all-to-all: the local tensor. */
typedef struct PassColl {
    PassCollKind kind;
    int axis;
    int dim, dim2;
    int64_t numel;
} PassColl;

const char *pass_coll_name(PassCollKind k);

/* A stage of `devices` ranks viewed as a (d0 x d1) logical mesh (d1 = 1 gives
 * a 1-D mesh of d0), with nodes of gpus_per_node consecutive ranks. */
void pass_mesh_make(PassMesh *m, int d0, int d1, int gpus_per_node);
int pass_mesh_devices(const PassMesh *m);

/* May loop dim `d` of forward node n be split at all (the op's sharding
 * rule)? E.g. never the dims RMSNORM normalises over or ATTENTION's seq. */
bool pass_dim_splittable(const IrGraph *g, const IrNode *n, int d);

/* Valid strategies of a forward node on a mesh (divisibility checked against
 * dim_size; `allow[a]` is a bitmask of dims that may be split over axis a,
 * ~0 for any). Replicated-everywhere is always first. Returns the count. */
int pass_strategies(const IrGraph *g, const IrNode *n, const PassMesh *m, const int64_t *dim_size,
                    const uint64_t *allow, PassStrategy *out, int max);

/* Requirements a layout places on every node's strategy, with axis 0 the
 * data-parallel axis and axis 1 the tensor-parallel one. A mesh axis nothing
 * is split over is only idle GPUs in disguise (the search weighs using fewer
 * GPUs on its own), and a pinned --tp or --sp on must really shard. */
enum {
    PASS_REQ_BATCH = 1 << 0,     /* nodes carrying the batch dim split it over axis 0 */
    PASS_REQ_WEIGHTS = 1 << 1,   /* matmuls and embeddings split a dim of their weight over axis 1 */
    PASS_REQ_SEQ_NORMS = 1 << 2, /* norms split the sequence over axis 1 (sequence parallelism) */
};
/* Keep the strategies of node n (or, n NULL, of boundary tensor t) that meet
 * `req`; a requirement no strategy can meet is dropped for that node rather
 * than leaving it none. Returns the new count. */
int pass_strategies_require(const IrGraph *g, const IrNode *n, int t, unsigned req,
                            PassStrategy *s, int k);

/* The shardings a node under strategy s needs for its inputs and makes for
 * its outputs (forward nodes; backward nodes pass their forward's strategy). */
void pass_shard_io(const IrGraph *g, const IrNode *n, const PassStrategy *s, PassSharding *in,
                   PassSharding *out);
/* The sharding of the gradient of input i as n's backward produces it: split
 * like the input, partial over axes whose dim the input lacks. */
PassSharding pass_shard_grad_in(const IrGraph *g, const IrNode *n, const PassStrategy *s, int i);
/* Sharding of tensor t that a strategy implies (dims only, no partial). */
PassSharding pass_shard_of(const IrGraph *g, int t, const PassStrategy *s);

/* Local (per-rank) size of every dim inside node n under strategy s (for
 * ATTENTION the kv-heads dim shrinks with the heads dim). */
void pass_local_sizes(const IrGraph *g, const IrNode *n, const PassMesh *m, const PassStrategy *s,
                      const int64_t *dim_size, int64_t *local);
int64_t pass_local_numel(const IrGraph *g, int t, const PassMesh *m, const PassSharding *sh,
                         const int64_t *dim_size);

/* Collectives turning `from` into `to` for tensor t, in execution order
 * (reductions first, then gathers, all-to-alls, slices). Returns the count. */
int pass_reshard(const IrGraph *g, int t, const PassMesh *m, const PassSharding *from,
                 const PassSharding *to, const int64_t *dim_size, PassColl *steps, int max);

bool pass_sharding_eq(const PassSharding *a, const PassSharding *b);
/* "wq[d_model, n_heads/tp, head_dim]" using axis names (e.g. {"dp","tp"}). */
const char *pass_sharding_str(const IrGraph *g, int t, const PassSharding *sh,
                              const char *const *axis_names, char *buf, size_t n);

/* ============================================================ the plan */
/* A complete parallel training plan: what the search (issue 5) produces, the
 * cost model (issue 3) evaluates, and codegen (issue 6) executes. Ranks:
 * global rank = pp_rank * devices + i0 * size[1] + i1, where (i0, i1) is the
 * rank's mesh coordinate; so axis 1 neighbours are consecutive ranks. */
typedef enum {
    PASS_RECOMPUTE_NONE,      /* keep every activation backward reads */
    PASS_RECOMPUTE_SELECTIVE, /* recompute core attention (a no-op saving with flash attention) */
    PASS_RECOMPUTE_FFN,       /* recompute `block mlp`: keep only its input */
    PASS_RECOMPUTE_FULL,      /* keep each layer's input; recompute the layer in backward */
} PassRecompute;

typedef enum { PASS_SCHED_1F1B, PASS_SCHED_INTERLEAVED } PassSchedule;
typedef enum { PASS_ATTN_FLASH, PASS_ATTN_MATERIALIZED } PassAttention;

const char *pass_recompute_name(PassRecompute r);

typedef struct PassStage {
    int first_piece, npieces;     /* the pieces this model chunk runs */
    int pp_rank;                  /* pipeline rank running it: chunk c runs on c % pp */
    PassRecompute recompute;
} PassStage;

typedef struct PassPlan {
    PassMesh mesh;                /* logical mesh of each pipeline rank's devices */
    int pp;                       /* pipeline ranks */
    int v;                        /* model chunks per pipeline rank (1: plain 1F1B) */
    int nstages;                  /* pp * v */
    PassStage *stages;            /* nstages, in model order */
    PassStrategy *strategy;       /* one per forward node (g->nfwd) */
    int num_micro;                /* micro-batches per step */
    int64_t mb_seqs;              /* sequences per micro-batch over the whole mesh
                                     (= global_batch / num_micro; a data-parallel replica
                                     holds mb_seqs / dp of them) */
    int zero;                     /* ZeRO stage over each parameter's data-parallel axes */
    PassSchedule schedule;
    PassAttention attention;
} PassPlan;

/* ========================================================= schedule.c */
/* The micro-batch schedule of one pipeline rank: 1F1B (v = 1) or Megatron's
 * interleaved 1F1B (v chunks per rank). Codegen executes it, the cost model
 * and the planner count the activations it keeps alive. */
#define PASS_MAX_CHUNKS 16

typedef struct PassSchedOp {
    int bwd;                      /* 0: forward, 1: backward */
    int chunk;                    /* the rank's model chunk (0 .. v-1) */
    int mb;                       /* micro-batch */
} PassSchedOp;

/* Operation k (0 <= k < 2 m v) of pipeline rank `rank`. */
PassSchedOp pass_schedule_op(int pp, int v, int m, int rank, int k);
/* slots[j]: the most micro-batches chunk j holds between forward and
 * backward: what a static arena allocates for it. */
void pass_schedule_slots(int pp, int v, int m, int rank, int *slots);
/* Activation bytes the rank holds given each chunk's bytes per micro-batch
 * (saved[v]): sum over chunks of slots x saved (a static arena: ptdc), or, if
 * dynamic, the peak over the schedule of the bytes alive at once (a caching
 * allocator: the reference stacks). Equal when v == 1. */
double pass_schedule_acts(int pp, int v, int m, int rank, const double *saved, bool dynamic);

/* ==================================================== cluster.c (issue 3) */
/* One GPU type. Datasheet numbers and measured ones (NCCL bus bandwidths in
 * the nccl-tests convention, GEMM efficiency) with their sources are listed in
 * docs/cost-model.md. */
typedef struct PassGpu {
    char name[32];
    double peak_flops;            /* dense bf16 tensor-core FLOP/s */
    double hbm_bytes;             /* memory capacity */
    double hbm_bw;                /* bytes/s */
    double nvlink_bw;             /* per GPU, one direction, bytes/s (datasheet) */
    double nic_bw;                /* per GPU NIC, one direction, bytes/s (datasheet) */
    double busbw_nvlink;          /* measured NCCL bus bandwidth inside a node, bytes/s */
    double busbw_ib;              /* measured NCCL bus bandwidth across nodes per GPU NIC
                                     (a group with k members per node gets k times this,
                                     at most busbw_nvlink), bytes/s */
    double alpha_nvlink, alpha_ib;/* latency of one ring step over NVLink / over the network, s
                                     (a collective adds pass_cost_consts.coll_base_s) */
    int sms;                      /* streaming multiprocessors (GEMM wave quantisation) */
    double gemm_eff;              /* fraction of peak_flops a large, well-shaped bf16 GEMM
                                     sustains inside a training step (measured) */
    double hbm_eff;               /* fraction of hbm_bw a streaming kernel sustains */
} PassGpu;

typedef struct PassCluster {
    PassGpu gpu;
    int ngpus, gpus_per_node;
} PassCluster;

/* The presets (cost_consts.c). */
extern const PassGpu pass_gpu_presets[];
extern const int pass_ngpu_presets;
/* A built-in GPU (a100-40gb, a100-80gb, h100-80gb, h200); false if unknown. */
bool pass_gpu_preset(const char *name, PassGpu *out);
/* "a100-40gb, a100-80gb, h100-80gb, h200": for messages. */
const char *pass_gpu_preset_names(void);
/* Read a --cluster description (format: docs/cost-model.md, "Cluster file");
 * errors reported with file:line:col and a caret, false on any. Keys the file
 * does not set keep their preset value; ngpus and gpus_per_node are 0 when the
 * file does not set them (the caller applies --gpus / --gpus-per-node). */
bool pass_cluster_load(const char *path, PassCluster *out);
/* The same from text in memory named `path` (tests, fuzzing). */
bool pass_cluster_parse(const char *path, const char *text, size_t len, PassCluster *out);
/* The cluster the driver's flags describe: --cluster FILE if given (its
 * values win), else the --gpu preset; gpus and gpus_per_node fill what the
 * file leaves unset. Errors (unknown GPU, GPUs not whole nodes) are reported
 * as sentences naming the flag; false on any. */
bool pass_cluster_setup(PassCluster *out, const char *file, const char *gpu, int gpus,
                        int gpus_per_node);
/* One line per field with units, as the cluster file format writes them. */
void pass_cluster_print(FILE *f, const PassCluster *cl);

/* ================================================= cost*.c, mem*.c (issue 3) */
/* Every efficiency and overhead constant of the model in one table
 * (cost_consts.c, each with its source; docs/cost-model.md lists them). The
 * GPU-specific ones (gemm_eff, hbm_eff, bandwidths) are in the presets. */
typedef struct PassCostConsts {
    double gemm_tile_m, gemm_tile_n;  /* output tile of a tensor-core GEMM (wave quantisation) */
    double gemm_tile_k;               /* K is padded to this */
    double gemm_k_half;               /* K at which prologue/epilogue halve efficiency: K/(K+k_half) */
    double gemm_misalign;             /* efficiency factor when a dim is not a multiple of 8 */
    double flash2_fwd, flash2_bwd;    /* FlashAttention-2 efficiency relative to gemm_eff */
    double flash1_fwd, flash1_bwd;    /* FlashAttention-1 likewise */
    double flash_bwd_ratio;           /* backward / forward FLOPs of a flash kernel (recomputes S) */
    double kernel_overhead_s;         /* launch and tail per kernel */
    double coll_base_s;               /* fixed latency of one collective (launch, setup) */
    double overlap_slowdown;          /* compute lost per second of overlapped NCCL traffic */
    double cuda_ctx_bytes;            /* CUDA context and kernel images per process */
    double nccl_comm_bytes;           /* NCCL buffers per communicator */
    double workspace_bytes;           /* cuBLAS and attention workspaces */
    double dp_bucket_elems;           /* gradient bucket: the last one cannot overlap backward */
    double opt_bytes_per_elem;        /* AdamW step traffic per parameter element of the shard */
} PassCostConsts;
extern const PassCostConsts pass_cost_consts;

/* Time of one GEMM C[M,N] = A[M,K] B[K,N] (bf16, fp32 accumulate), repeated
 * `batch` times, on one GPU: shape-dependent efficiency, roofline against
 * HBM, launch overhead (cost_gemm.c). */
double pass_gemm_time(const PassGpu *gpu, double M, double N, double K, double batch);
/* Efficiency (fraction of peak) pass_gemm_time assumes for that shape. */
double pass_gemm_eff(const PassGpu *gpu, double M, double N, double K, double batch);
/* Time of a memory-bound kernel (or `kernels` of them) moving `bytes`. */
double pass_mem_time(const PassGpu *gpu, double bytes, int kernels);

/* The kernel that runs attention. AUTO is what ptdc's runtime runs: a
 * flash-style kernel for PASS_ATTN_FLASH; PASS_ATTN_MATERIALIZED is costed as
 * FUSED_SOFTMAX. The others describe other stacks (calibration). */
typedef enum {
    PASS_KERNEL_AUTO,
    PASS_KERNEL_FLASH2,           /* FlashAttention-2 class */
    PASS_KERNEL_FLASH1,           /* FlashAttention-1: same memory, slower */
    PASS_KERNEL_FUSED_SOFTMAX,    /* S x S scores in bf16, one fused scale-mask-softmax kernel */
    PASS_KERNEL_EAGER,            /* S x S, unfused framework ops, softmax in fp32 */
} PassAttnKernel;

/* What the cost model needs besides the graph and the plan. Fields after
 * `attention` describe the implementation being modelled; all zero means
 * ptdc's own generated runtime (the kernels and saves of ops.def, bf16
 * gradients, a static memory arena). */
typedef struct PassCostCtx {
    const PassCluster *cl;
    PassAttention attention;
    PassAttnKernel attn_kernel;
    bool norm_unfused;            /* norms as unfused framework ops: they also save an fp32
                                     copy of the input and the normalised value, and cost
                                     several memory passes */
    bool loss_fp32;               /* the loss upcasts the logits to fp32 and saves its fp32
                                     softmax (Megatron's vocabulary-parallel cross-entropy) */
    int grad_bytes;               /* gradient element bytes (accumulation, reduction); 0 = 2 */
    bool grad_accum_unfused;      /* each micro-batch's weight gradient is written to a
                                     temporary and added to the accumulated one by a separate
                                     kernel (framework autograd) instead of inside the GEMM */
    bool attn_dropout;            /* a materialised attention keeps a dropout mask and output
                                     (Megatron's path keeps them even at p = 0) */
    double alloc_reserve;         /* fraction of HBM kept free for model error (and, for a
                                     caching allocator, its fixed overhead); 0 = PASS_MEM_RESERVE */
    double reshard_overlap;       /* fraction of resharding collectives hidden behind the GEMMs
                                     next to them (Megatron-Core/TE --tp-comm-overlap); 0 = none,
                                     as in ptdc's runtime */
    bool ref_stack;               /* price memory as a reference stack (Megatron/PyTorch) holds
                                     it, not as ptdc's generated programs do: activations peak
                                     at the bytes alive at once (caching allocator) rather than
                                     each chunk's slots of a static arena; ZeRO-1 reduce-scatters
                                     in place; no pipeline send/gradient slot copies */
    double frag_act;              /* caching-allocator fragmentation as a fraction of the bytes
                                     allocated and freed every micro-batch (activations,
                                     temporaries); 0 for ptdc's static arena */
} PassCostCtx;

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
} PassNodeCost;

void pass_cost_node(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                    const PassStrategy *s, const int64_t *dim_size, PassNodeCost *out);
/* Seconds for one collective step (pass_reshard's output) of elements of
 * elem_bytes on mesh axis k->axis: alpha-beta with nccl-tests bus-bandwidth
 * factors, NVLink inside a node, the members' NICs across nodes. A
 * PASS_COLL_SENDRECV step is a pipeline transfer of k->numel elements per
 * rank to the next stage's ranks (k->axis ignored). */
double pass_cost_coll(const PassCostCtx *c, const PassMesh *m, const PassColl *k, int elem_bytes);
/* Bytes forward node n keeps alive for its backward on one rank for one
 * micro-batch under recomputation policy r (activations only: parameters
 * are counted by pass_param_bytes). A tensor several nodes save is counted
 * once, at the first of them in forward order. FULL keeps only each layer's
 * inputs (counted at their first consumer in the layer); FFN keeps only the
 * input of `block mlp`; pieces outside repeats are never recomputed. The
 * working set of the layer being recomputed is a per-stage term (pass_predict). */
double pass_saved_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                        const PassStrategy *s, const int64_t *dim_size, PassRecompute r);
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
int pass_saved_list(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                    const PassStrategy *s, const int64_t *dim_size, PassRecompute r,
                    PassSaved *items, int max);
/* Does forward node n run again during backward under policy r? Pieces
 * outside repeats never do; FFN reruns `block mlp`; SELECTIVE reruns core
 * attention where it is materialised (a flash kernel recomputes inside its
 * own backward, priced by pass_cost_node). c NULL: flash attention. */
bool pass_recomputed(const PassCostCtx *c, const IrGraph *g, const IrNode *n, PassRecompute r);
/* Model-state bytes on one rank of the parameters node n owns (those it is
 * the first consumer of): bf16 weights and grads, fp32 master and moments,
 * sharded over the parameter's data-parallel axes (those over which its
 * gradient is partial, pass_shard_grad_in) per the ZeRO stage: 1 shards the
 * optimizer state, 2 also the gradients, 3 also the weights. */
double pass_param_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                        const PassStrategy *s, int zero);
/* The same, itemised: weights, gradients, optimizer state (master + moments). */
void pass_param_bytes3(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                       const PassStrategy *s, int zero, double *weights, double *grads, double *optim);
/* The same for one parameter t that n reads, whether or not n owns it: a
 * pipeline stage holds its own copy of a parameter an earlier stage owns (a
 * tied embedding read again by the LM head). */
void pass_param_bytes_of(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                         const PassStrategy *s, int zero, int t, double *weights, double *grads,
                         double *optim);
/* Is n the first forward node reading parameter t (the one that owns it)? */
bool pass_param_owned(const IrGraph *g, const IrNode *n, int t);
/* Seconds per optimizer step to synchronise those parameters' gradients (and
 * gather ZeRO-3 parameters, per micro-batch count num_micro): ZeRO 0 an
 * all-reduce, 1 a reduce-scatter and a parameter all-gather per step, 2 a
 * reduce-scatter per micro-batch and an all-gather per step, 3 per
 * micro-batch two all-gathers (forward, backward) and a reduce-scatter. The
 * total link time; how much of it overlaps compute is pass_predict's. */
double pass_param_sync_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                         const PassStrategy *s, int zero, int num_micro);

/* ================================================ predict*.c (issue 3) */
/* One pipeline rank: its time per micro-batch and its memory in bytes. */
typedef struct PassRankMem {
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
    double model_flops;            /* per step, PaLM convention: tokens * (6N + 12 L H Q T) */
    double hw_flops;               /* per step, executed (recompute included) */
    double peak_mem_bytes, capacity_bytes, margin_bytes; /* margin = usable - peak */
    bool fits;
    int peak_rank;                 /* pipeline rank with the largest memory */
    int npp;                       /* entries of mem */
    PassRankMem *mem;              /* per pipeline rank (heap; pass_prediction_free) */
} PassPrediction;

/* Fraction of HBM ptdc keeps free when ctx->alloc_reserve is 0: the runtime's
 * static arena has no fragmentation, so this covers the memory model's error
 * (docs/cost-model.md derives it from the reference runs). */
#define PASS_MEM_RESERVE 0.03

/* Evaluate a complete plan: step time, throughput, MFU/HFU, per-rank memory
 * and whether it fits. Requires plan->strategy for every forward node and
 * plan->stages covering every piece once; plan->attention overrides
 * c->attention. Well under a millisecond for a 100-layer model (layers with
 * equal strategies and surroundings are costed once; bench/cost). */
void pass_predict(const PassCostCtx *c, const IrGraph *g, const PassPlan *plan, PassPrediction *out);
/* The runtime term of a rank's memory (PassRankMem.runtime): CUDA context,
 * NCCL communicators, library workspaces, for a pipeline rank on mesh m. */
double pass_runtime_bytes(const PassMesh *m, int pp);
void pass_prediction_free(PassPrediction *p);
/* PaLM model FLOPs per token: 6 N + 12 L H Q T, N = every trained parameter
 * (the reference tables' convention), L H Q T from the attention nodes. */
double pass_model_flops_per_token(const IrGraph *g);
/* Renderings for --plan-only (text) and --json. The JSON object has
 * "predicted": {step_time_s, tokens_per_s, mfu, hfu, peak_mem_bytes,
 * capacity_bytes, margin_bytes, fits, ..., "memory": [per rank breakdown]}. */
void pass_prediction_print_text(FILE *f, const IrGraph *g, const PassPlan *plan,
                                const PassCostCtx *c, const PassPrediction *p);
void pass_prediction_print_json(FILE *f, const IrGraph *g, const PassPlan *plan,
                                const PassCostCtx *c, const PassPrediction *p);

/* ============================================================ ilp*.c (issue 4) */
/* Intra-operator auto-sharding as an integer linear program solved with GLPK
 * (docs/sharding.md). Two layers:
 *   - a generic core (ilp_problem.c, ilp_solve.c) that knows nothing of the
 *     IR: nodes choosing one strategy each, edges priced per pair of choices,
 *     max-groups, one memory constraint;
 *   - the lowering of a pipeline stage onto it (ilp_lower.c, ilp_merge.c,
 *     ilp_stage.c, ilp_print.c): strategies from pass_strategies, prices from
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

typedef enum {
    ILP_OPTIMAL,                  /* proven optimal (gap 0 up to GLPK's tolerances) */
    ILP_FEASIBLE,                 /* time limit: a choice within the budget, not proven optimal */
    ILP_INFEASIBLE,               /* proven: nothing fits the budget */
    ILP_UNKNOWN,                  /* time limit before any choice was found */
} IlpStatus;

typedef struct IlpOpts {
    double time_limit_s;          /* 0: 10 s */
    double tol_obj;               /* GLPK's mip tol_obj; 0: 1e-9 */
    bool no_reduce;               /* skip dominance pruning (tests, measurements) */
    bool presolve;                /* glp_intopt with its presolver solves the root LP
                                     (default: dual simplex first; same answers, faster) */
    const int *start;             /* a choice per node to start from (a previous plan), or NULL:
                                     handed to GLPK as its first incumbent if it fits */
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
 * model of passes.h, ilp_costs.c) or a test's synthetic ones. */
typedef struct PassIlpCosts {
    void (*node)(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                 const PassStrategy *s, const int64_t *dim_size, PassNodeCost *out);
    double (*coll)(const PassCostCtx *c, const PassMesh *m, const PassColl *k, int elem_bytes);
    double (*saved)(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                    const PassStrategy *s, const int64_t *dim_size, PassRecompute r);
    double (*param_bytes)(const PassCostCtx *c, const IrGraph *g, const IrNode *n,
                          const PassMesh *m, const PassStrategy *s, int zero);
    double (*param_sync)(const PassCostCtx *c, const IrGraph *g, const IrNode *n,
                         const PassMesh *m, const PassStrategy *s, int zero, int num_micro);
} PassIlpCosts;

extern const PassIlpCosts pass_ilp_costs;

/* What to solve: one pipeline stage (a contiguous run of pieces) on its mesh. */
typedef struct PassIlpQuery {
    int first_piece, npieces;     /* the stage */
    PassMesh mesh;
    int64_t mb_seqs;              /* sequences per micro-batch over the whole mesh: the batch
                                     dim's size (a batch split over dp ways gives mb_seqs/dp) */
    int num_micro;                /* micro-batches per step */
    int zero;                     /* ZeRO stage 0-3 */
    PassRecompute recompute;
    double inflight;              /* micro-batches whose activations the stage holds at once */
    double budget;                /* bytes per device for parameters, gradients, optimizer
                                     state and activations; 0: unlimited */
    uint64_t allow[PASS_MAX_AXES];/* pins: bit d set = dim d may split over axis a. Both 0:
                                     anything (e.g. --tp 2 --sp off: axis 0 only batch,
                                     axis 1 all but batch and seq) */
    unsigned require;             /* PASS_REQ_* every strategy must meet (pass_strategies_require) */
    bool fix_boundary;            /* layer boundaries carry `boundary` (a pipeline neighbour
                                     fixed it); false: the ILP chooses */
    PassSharding boundary;
    bool no_merge;                /* keep elementwise ops separate (tests, measurements) */
    double time_limit_s;          /* per solve; 0: 10 s */
} PassIlpQuery;

/* One collective of the chosen plan, as the stage runs it. */
typedef struct PassIlpColl {
    int tensor;                   /* a tensor it moves (for repeated layers: the first layer's) */
    int consumer;                 /* forward node reading it (-1: a layer boundary) */
    bool bwd;                     /* false: forward pass; true: backward (gradient) */
    bool regather;                /* backward all-gather of an input kept sharded */
    PassColl coll;
    double seconds;               /* one execution */
    int count;                    /* executions per micro-batch on this stage */
} PassIlpColl;

typedef struct PassIlpResult {
    bool feasible;                /* a plan within the budget was found */
    IlpStatus status;
    int first_node, nnodes;       /* the stage's forward nodes */
    PassStrategy *strategy;       /* [nnodes], strategy[i] for node first_node + i */
    bool has_boundary;
    PassSharding boundary;        /* the sharding layer boundaries carry */
    const char *axis_name[PASS_MAX_AXES]; /* "dp" (batch split on it), "tp", or "-" (unused) */
    double fwd_s, bwd_s;          /* one micro-batch through the stage: compute + resharding
                                     (bwd includes recomputation and re-gathers) */
    double sync_s;                /* per step: gradient synchronisation, ZeRO gathers */
    double step_s;                /* the objective: num_micro * (fwd_s + bwd_s) + sync_s */
    double param_bytes, act_bytes, mem_bytes; /* per device; mem = param + act */
    int ncoll;
    PassIlpColl *coll;
    /* the model and its solve */
    int ninst, ninst_merged;      /* operators in the ILP before and after merging */
    int nvars, nbin, nrows;
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
/* Readable account: each operator's sharding (x[batch/dp, seq/sp, d_model]),
 * the collectives with sizes and times, objective, memory, ILP size, gap. */
void pass_ilp_print(FILE *f, const IrGraph *g, const PassIlpQuery *q, const PassIlpResult *r);
/* The allow masks of the usual pins: axis dp_axis splits only the batch,
 * axis tp_axis anything but the batch (and the sequence unless sp); -1 for
 * an axis without a pin (anything). E.g. --tp 2 --sp off on a (dp x 2) mesh:
 * pass_ilp_pins(g, 0, 1, false, q.allow). */
void pass_ilp_pins(const IrGraph *g, int dp_axis, int tp_axis, bool sp, uint64_t *allow);

/* --- the lowered stage behind pass_ilp_stage (tests and the printer read it) */
typedef struct IlpInst {
    int node;                     /* representative forward node; -1: a boundary */
    int tensor;                   /* the tensor a boundary lays out; nodes: -1 */
    int count;                    /* forward nodes (boundaries: layer crossings) it stands for */
    int nstrat;
    PassStrategy *strat;          /* boundary: dim[a] = the tensor dim split over axis a */
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
void ilp_seg_free(IlpSeg *s);
void ilp_merge(IlpSeg *s);                                /* ilp_merge.c */
void ilp_build(IlpSeg *s);                                /* ilp_build.c: s->prob */
/* Helpers over a lowered stage (ilp_build.c): instance x's own strategy under
 * strategy gi of its merge group; the sharding of output `out` of instance x
 * under its strategy k; the sharding reader x wants for input `slot` and the
 * one its gradient comes back in. */
int ilp_own(const IlpSeg *s, int x, int gi);
PassSharding ilp_out_sharding(const IlpSeg *s, int x, int out, int k);
void ilp_in_sharding(const IlpSeg *s, int x, int slot, int k, PassSharding *want,
                     PassSharding *grad);
/* Fill r from a solution of s->prob (ilp_extract.c); r is zeroed first. */
void ilp_extract(const IlpSeg *s, const IlpSolution *sol, PassIlpResult *r);
void pass_ilp_result_free(PassIlpResult *r);

/* ========================================================= search*.c (issue 5) */
/* The inter-operator search (docs/planner.md): the pipeline degree and stage
 * boundaries, each pipeline rank's (dp x tp) mesh with the strategies of
 * pass_ilp_stage, the micro-batch, the schedule, recomputation per stage and
 * the ZeRO stage. Candidates are explored with the ILP's costs and lower
 * bounds (branch and bound), then ranked by pass_predict, which every number
 * reported comes from. Requires a verified forward graph. */

/* What the user fixed; everything else is searched. */
typedef struct PassSearchPins {
    int tp, pp, dp;               /* 0: searched */
    int micro_batch;              /* sequences per data-parallel replica per micro-batch; 0: searched */
    int recompute;                /* -1: searched per stage; else the PassRecompute of every stage */
    int sp;                       /* -1: searched; 0 off; 1 on */
    int zero;                     /* -1: searched; else 0-3 */
    int schedule;                 /* -1: searched; else a PassSchedule */
    int v;                        /* 0: searched; else model chunks per pipeline rank */
} PassSearchPins;

/* Only the alternatives that differ from a reference layout this way
 * (--explain's runners-up); all zero: any. */
typedef struct PassSearchFilter {
    int tp_above, pp_above, mb_above; /* tp, pp, micro-batch strictly above these */
    bool recompute_on;            /* some stage recomputes */
} PassSearchFilter;

typedef struct PassSearchOpts {
    PassSearchPins pins;
    int gpus;                     /* GPUs available; 0: c->cl->ngpus */
    int64_t global_batch;         /* sequences per step; 0: g->global_batch */
    double ilp_time_limit_s;      /* per ILP solve; 0: 10 s */
    int keep;                     /* alternatives to keep, best first (0: 1); pruning is against
                                     the keep-th best, so they are the true best by pass_predict */
    bool first_fit;               /* stop at the first plan that fits (pass_search_min_gpus) */
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
/* Are tp, pp, micro-batch, recompute, sp, ZeRO and the schedule (and v, if
 * interleaved) all pinned: the "evaluate a layout by hand" case? */
bool pass_search_pinned_fully(const PassSearchPins *p);

/* A plan's layout in the usual words, derived from its strategies: an axis
 * whose nodes split the batch is data parallel, one splitting other dims is
 * tensor parallel, and a sequence split on it is sequence parallelism. */
typedef struct PassLayout {
    int gpus;                     /* dp * tp * pp * replicated */
    int dp, tp, pp, v;
    int dp_axis, tp_axis;         /* mesh axis of each, or -1 */
    int replicated;               /* devices along mesh axes nothing is split over (1: none) */
    bool sp;
    int zero;
    int64_t micro_batch;          /* sequences per data-parallel replica per micro-batch */
    int num_micro;
    PassSchedule schedule;
    unsigned recompute;           /* bit r: some stage uses PassRecompute r */
} PassLayout;
void pass_plan_layout(const IrGraph *g, const PassPlan *p, PassLayout *out);
/* "none", "full", or "mixed" when stages differ. */
const char *pass_layout_recompute_name(const PassLayout *l);
/* "dp 16 x tp 8 x pp 4, sp, zero 1, micro-batch 1 x 16, 1f1b, recompute none". */
const char *pass_layout_str(const PassLayout *l, char *buf, size_t n);
/* The same as ptdc flags: "--tp 8 --pp 4 --dp 16 --micro-batch 1 ...". */
const char *pass_layout_flags(const PassLayout *l, char *buf, size_t n);

/* One evaluated plan. Owns plan.stages, plan.strategy and pred.mem. */
typedef struct PassSearchAlt {
    PassLayout layout;
    PassPlan plan;
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
    int gpus;                     /* GPUs available */
    int64_t global_batch;         /* sequences per step */
    bool full_valid;              /* some enumerated layout uses every GPU */
    bool full_ranked;             /* a plan using every GPU fits and was ranked: */
    double best_full_step_s;      /* the best such step time */
    PassSearchStats stats;
} PassSearchResult;

/* Search (search.c). Reports pinned layouts that cannot work (TP not
 * dividing the heads, more stages than pieces, ...) with ir_error and
 * returns false; otherwise true, with out->found false when nothing fits.
 * cache: the ILP cache (ctx must stay at one address while it lives). */
bool pass_search(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                 PassIlpCache *cache, PassSearchResult *out);
void pass_search_result_free(PassSearchResult *r);
void pass_search_alt_free(PassSearchAlt *a);
/* The smallest GPU count in [from, limit] on which some plan fits (0: none),
 * with that plan in *best (search_pins.c). */
int pass_search_min_gpus(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                         PassIlpCache *cache, int from, int limit, PassSearchAlt *best);
/* After pass_search found nothing: say why on stderr (ir_error): the item
 * that overflows on the fullest GPU and by how much, then what would fit
 * (relaxing the pins, or the smallest GPU count). Returns nothing; the
 * caller exits with status 1 (search_pins.c). */
void pass_search_explain_nofit(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                               PassIlpCache *cache, const PassSearchResult *r);
/* When the chosen plan leaves GPUs idle: a sentence saying how many and why,
 * into buf; false when it uses them all (search_pins.c). */
bool pass_search_idle_note(const PassSearchResult *r, int gpus_per_node, char *buf, size_t n);

/* Outputs (plan_txt.c, plan_json.c, plan_svg.c, plan_explain.c). The text is
 * plan.txt (and --emit plan); the JSON plan.json; the SVG plan.svg. */
void pass_plan_print_text(FILE *f, const IrGraph *g, const PassCostCtx *c,
                          const PassSearchResult *r);
void pass_plan_print_json(FILE *f, const IrGraph *g, const PassCostCtx *c,
                          const PassSearchResult *r);
void pass_plan_print_svg(FILE *f, const IrGraph *g, const PassCostCtx *c,
                         const PassSearchResult *r);
/* --explain: the ten best alternatives and, for the runner-up of each kind
 * (more TP, more PP, recomputation on, bigger micro-batch), which time
 * terms make it slower; runs the restricted searches it needs. */
void pass_plan_explain(FILE *f, const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                       PassIlpCache *cache, const PassSearchResult *r);

/* ========================================================== autodiff.c (issue 6) */
/* Append the backward graph after g->nfwd: for every forward node on a path
 * from a parameter to the loss, the nodes that compute its inputs' gradients.
 * Rules (pass_grad_<ID> in autodiff.c): ops.def's backward ops; MATMUL's
 * backward is two MATMULs and MUL's two MULs; ADD's is a REDUCE_SUM per
 * operand (an identity when the operand has the output's dims, a sum over the
 * broadcast dims otherwise); a tensor read by several nodes gets one gradient
 * contribution from each, summed by a chain of ADDs. Gradient tensors have
 * role IR_GRAD and grad_of set (intermediates of MUL's broadcast rule are
 * IR_ACT); the loss's gradient is the seed: an IR_GRAD scalar with no
 * producer, whose value is 1. Backward nodes carry fwd and their forward
 * node's piece, layer and block; tmpl numbers them within their piece.
 * A backward node reads only the forward tensors ops.def's saves mask of its
 * forward node allows (checked: a violation is an internal error).
 * Requires a verified forward-only graph. Returns false after reporting a user
 * error (a statistic such as rstd or lse used as a value by a forward node).
 * `--emit ir-grad` is pass_autodiff, ir_verify(g, "autodiff"), ir_print. */
bool pass_autodiff(IrGraph *g);
/* The gradient of tensor t that t's producer's backward reads (for a
 * parameter: the sum of its contributions), or -1 if t has none. */
int pass_grad_final(const IrGraph *g, int t);
/* Is backward node n one of the ADDs summing contributions to one gradient? */
bool pass_is_grad_sum(const IrGraph *g, const IrNode *n);

#endif
