/* cost.h: exports of passes/cost/: the plan a search produces (PassPlan,
 * recomputation, schedule), the micro-batch schedule (schedule.c), the
 * cluster (cluster.c, cost_consts.c), the cost and memory model (cost_*.c,
 * mem_*.c) and the whole-plan prediction every reported number comes from
 * (predict.c, predict_out.c). Builds on the sharding algebra only. */
#ifndef PTDC_PASS_COST_H
#define PTDC_PASS_COST_H

#include "shard/shard.h"

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

const char *pass_recompute_name(PassRecompute r); /* "none", "full", ... (mem_saved.c) */

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
/* Codegen's limits on a pipeline: a parameter's pipeline ranks are one
 * 64-bit mask, and its message tags (stage x 128) stay inside the 32767 MPI
 * guarantees. The search keeps to them. */
#define PASS_MAX_PP 64
#define PASS_MAX_STAGES 256

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
/* One step of the schedule as ptdc's programs run it, event by event:
 * every rank walks its operations in order; a forward of stage st waits for
 * stage st-1's forward of that micro-batch, a backward for stage st+1's
 * backward; receives block (the receiver copies the message once both sides
 * are there, xf[st] into stage st forward, xb[st] out of stage st backward),
 * sends do not. f[st], b[st]: one micro-batch through stage st (stage st runs
 * on rank st % pp as its chunk st / pp). finish[r] (may be NULL): when rank r
 * ends its last operation. Returns the latest of them. */
double pass_schedule_sim(int pp, int v, int m, const double *f, const double *b, const double *xf,
                         const double *xb, double *finish);

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
double pass_schedule_sim_shared(int pp, int v, int m, const double *f, const double *b, const double *xf,
                                const double *xb, double *finish, const PassShare *sh);

/* ============================================================ sync.c */
/* CPU ranks: the seconds a group of `group` ranks meeting at collectives
 * waits for its latest member, over compute-bound (GEMM, attention) and
 * other work of compute_s and other_s between them; 0 on GPUs. */
double pass_sync_wait(const struct PassCluster *cl, int group, double compute_s, double other_s);

/* ==================================================== cluster.c (issue 3) */
/* A curve y(x) from measured points: linear in log x between them, the end
 * values beyond them (cost_curve.c). Rates that depend on size (caches,
 * per-call overhead, sequence length) are curves of this kind. */
#define PASS_CURVE_MAX 12
typedef struct PassCurve {
    int n;                        /* points (0: none measured) */
    double x[PASS_CURVE_MAX], y[PASS_CURVE_MAX]; /* x increasing */
} PassCurve;
double pass_curve_at(const PassCurve *c, double x);

/* The runtime's memory-bound kernels, one per rt_ call the generated
 * programs make (codegen/cg_kernel.c), priced one call at a time:
 * pass_kernel_bytes is the traffic the model counts for a call over
 * rows x cols elements; a measured device divides it by the kernel's
 * measured rate at that size (PassGpu.kern), a datasheet device by its
 * streaming bandwidth. */
#define PASS_KERNELS(X)                                                                       \
    X(RMSNORM_FWD, "rmsnorm_fwd")                                                             \
    X(RMSNORM_BWD, "rmsnorm_bwd")                                                             \
    X(ADD_RMSNORM_FWD, "add_rmsnorm_fwd")                                                     \
    X(LAYERNORM_FWD, "layernorm_fwd")                                                         \
    X(LAYERNORM_BWD, "layernorm_bwd")                                                         \
    X(ADD_LAYERNORM_FWD, "add_layernorm_fwd")                                                 \
    X(SILU_FWD, "silu_fwd")                                                                   \
    X(SILU_BWD, "silu_bwd")                                                                   \
    X(GELU_FWD, "gelu_fwd")                                                                   \
    X(GELU_BWD, "gelu_bwd")                                                                   \
    X(SWIGLU_FWD, "swiglu_fwd")                                                               \
    X(SWIGLU_BWD, "swiglu_bwd")                                                               \
    X(ADD, "add")                                                                             \
    X(ADD_BCAST, "add_bcast")                                                                 \
    X(MUL, "mul")                                                                             \
    X(REDUCE_ROWS, "reduce_rows")                                                             \
    X(SOFTMAX_FWD, "softmax_fwd")                                                             \
    X(SOFTMAX_BWD, "softmax_bwd")                                                             \
    X(ROPE, "rope")                                                                           \
    X(EMBEDDING_FWD, "embedding_fwd")                                                         \
    X(EMBEDDING_BWD, "embedding_bwd")                                                         \
    X(CROSS_ENTROPY_FWD, "cross_entropy_fwd")                                                 \
    X(CROSS_ENTROPY_BWD, "cross_entropy_bwd")                                                 \
    X(ADAMW, "adamw")                                                                         \
    X(SUMSQ, "sumsq")                                                                         \
    X(COPY, "copy")                                                                           \
    X(ZERO, "zero")
typedef enum {
#define X(id, name) PASS_K_##id,
    PASS_KERNELS(X)
#undef X
    PASS_NKERN
} PassKernel;
extern const char *const pass_kernel_names[PASS_NKERN];

typedef enum { PASS_DEV_GPU, PASS_DEV_CPU } PassDevKind;

/* A measured collective: t = alpha + c(n) S / busbw for groups of `group`
 * ranks (c the nccl-tests bus factor of its kind), inside a node or across
 * nodes (one member per node), measured with `rpn` ranks on each node
 * (CPU ranks sharing cores slow each other's collectives: a plan takes the
 * fit measured with its own ranks per node, or the nearest). */
#define PASS_COLL_FITS 16
typedef struct PassCollFit {
    int group;
    int net;                      /* 1: the group spans nodes */
    int rpn;                      /* ranks per node while measured (0: not known) */
    double alpha_s, busbw;
} PassCollFit;

#define PASS_ATTN_DIMS 4

/* A device's compute rates: its GEMM curve, kernel curves and attention
 * rates (the corresponding PassGpu fields, below). */
typedef struct PassRates {
    double peak_flops, gemm_eff;
    int sms;
    double gemm_tile_m, gemm_tile_n, gemm_tile_k, gemm_k_half, gemm_mn_half, gemm_misalign, gemm_overhead_s;
    PassCurve kern[PASS_NKERN];
    int attn_dims;
    double attn_dim[PASS_ATTN_DIMS];
    PassCurve attn_fwd[PASS_ATTN_DIMS], attn_bwd[PASS_ATTN_DIMS];
} PassRates;

/* One device type: a GPU, or the CPU cores a rank of the CPU backend runs
 * on. Datasheet numbers and measured ones (NCCL bus bandwidths in the
 * nccl-tests convention, GEMM efficiency) with their sources are listed in
 * docs/cost-model.md; `ptdc calibrate` measures every field below `sms`
 * through libptdrt (an empty curve or table means: not measured, use the
 * datasheet model). */
typedef struct PassGpu {
    char name[32];
    PassDevKind kind;
    double peak_flops;            /* dense bf16 tensor-core FLOP/s (CPU: the sustained fp32
                                     GEMM rate one core measured, gemm_eff = 1) */
    double hbm_bytes;             /* memory capacity (CPU: per rank, RAM / ranks) */
    double hbm_bw;                /* bytes/s */
    double nvlink_bw;             /* per GPU, one direction, bytes/s (datasheet) */
    double nic_bw;                /* per GPU NIC, one direction, bytes/s (datasheet) */
    double busbw_nvlink;          /* measured NCCL bus bandwidth inside a node, bytes/s */
    double busbw_ib;              /* measured NCCL bus bandwidth across nodes per GPU NIC
                                     (a group with k members per node gets k times this,
                                     at most busbw_nvlink), bytes/s */
    double alpha_nvlink, alpha_ib;/* latency of one ring step over NVLink / over the network, s
                                     (a collective adds pass_cost_consts.coll_base_s) */
    int sms;                      /* streaming multiprocessors (GEMM wave quantisation; CPU:
                                     the threads one rank's GEMM runs on) */
    double gemm_eff;              /* fraction of peak_flops a large, well-shaped GEMM
                                     sustains inside a training step (measured) */
    double hbm_eff;               /* fraction of hbm_bw a streaming kernel sustains */
    /* The GEMM efficiency curve (cost_gemm.c). */
    double gemm_tile_m, gemm_tile_n;  /* output tile (wave quantisation, padding) */
    double gemm_tile_k;               /* K is padded to this */
    double gemm_k_half;               /* K at which the K pipeline runs at half rate: K/(K+k_half) */
    double gemm_mn_half;              /* M (and N) at which packing the other operand halves the
                                         rate: M/(M+mn_half) N/(N+mn_half); a CPU BLAS packs B
                                         once per call, a cost per element of M x N work that only
                                         a tall output amortises (0: none, the GPU presets) */
    double gemm_misalign;             /* efficiency factor when a dim is not a multiple of 8 */
    double gemm_overhead_s;           /* per call: launch, tail, packing */
    double kernel_overhead_s;         /* per memory-bound kernel without a measured curve */
    /* Measured rates (ptdc calibrate). */
    int act_bytes;                /* bytes of an activation or weight element in the backend
                                     ptdc's programs use: 2 (bf16, CUDA), 4 (fp32, CPU) */
    PassCurve kern[PASS_NKERN];   /* model bytes per second by model bytes, per kernel */
    int attn_dims;                /* head dims attention was measured at */
    double attn_dim[PASS_ATTN_DIMS];
    PassCurve attn_fwd[PASS_ATTN_DIMS], attn_bwd[PASS_ATTN_DIMS]; /* FLOP/s by sequence length */
    int ncoll[PASS_COLL_SENDRECV + 1];
    PassCollFit coll[PASS_COLL_SENDRECV + 1][PASS_COLL_FITS]; /* by PassCollKind */
    /* Memory a rank needs besides the arena (0: the CUDA defaults of
     * pass_cost_consts): after start-up, and per communicator. */
    double runtime_bytes, comm_bytes;
    /* CPU nodes: cores per node, and the compute rates measured for one rank
     * alone on the node with all its cores (`solo.` keys; has_solo false: not
     * measured). The fields above are those of one rank per core. */
    int cores;
    bool has_solo;
    PassRates solo;
    double host_token_s;          /* host work per token loaded for a micro-batch */
    double core_share;            /* CPU ranks sharing cores: the fraction of a waiting rank's
                                     share the busy ones gain (0: time slices, 1: processor
                                     sharing; share.c) */
    /* CPU ranks: a synchronising collective's wait for the partner that
     * arrives last, as a fraction of the GEMM and of the other (memory-bound)
     * work between two collectives, for one rank per core and for more
     * ranks than cores; measured in pairs (runtime/measure/m_sync.c, sync.c). */
    double sync_gemm, sync_mem, sync_gemm_shared, sync_mem_shared;
} PassGpu;

/* The compute rates of a device, as a unit (cluster.c): what one rank of a
 * CPU node runs at depends on how many share the node. */
void pass_rates_get(const PassGpu *g, PassRates *r);
void pass_rates_set(PassGpu *g, const PassRates *r);

/* Time of one call of memory-bound kernel k over rows x cols elements on
 * this device (cost_gemm.c). */
double pass_kernel_bytes(PassKernel k, double rows, double cols, int act_bytes);
double pass_kernel_time(const PassGpu *gpu, PassKernel k, double rows, double cols);
/* FLOP/s of the device's attention kernel at head dim D and sequence S
 * (model FLOPs, causal halved), forward or backward; 0 when not measured. */
double pass_attn_rate(const PassGpu *gpu, int bwd, double D, double S);

typedef struct PassCluster {
    PassGpu gpu;
    int ngpus, gpus_per_node;
    int nodes;                    /* CPU clusters: the nodes ranks are spread over (0: one) */
} PassCluster;

/* kvfile.c: `key = value` lines, `#` comments, as cluster and stack files
 * write them. fn gets each key and its value (to the comment, trimmed) with
 * their locations and reports its own errors; false stops nothing (every
 * line is checked) but makes the parse fail. */
typedef bool (*PassKvFn)(void *ctx, const char *key, const char *val, IrLoc kloc, IrLoc vloc);
bool pass_kv_parse(const char *path, const char *text, size_t len, PassKvFn fn, void *ctx);
/* The same from a regular file (a FIFO, a directory or a binary file is
 * refused with a sentence naming `what` and the path). */
bool pass_kv_load(const char *path, const char *what, PassKvFn fn, void *ctx);
/* A number in [lo, hi], or an error naming the key and unit. */
bool pass_kv_number(const char *key, const char *val, IrLoc loc, double lo, double hi,
                    const char *unit, double *out);

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
/* Apply --gpus / --gpus-per-node to what a file or preset left unset, and
 * for a CPU device share each node's cores and memory among the ranks on it
 * (so the device describes one rank). whole_nodes: refuse GPU counts that
 * are not whole nodes. False after reporting an impossible count. */
bool pass_cluster_finish(PassCluster *cl, int gpus, int gpus_per_node, bool whole_nodes);
/* Every field set, one per line with units, in the file format (tables
 * included): what `ptdc calibrate` writes. */
void pass_cluster_print(FILE *f, const PassCluster *cl);

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
} PassOverlapKind;
double pass_overlap_exposed(PassOverlapKind kind, double comm, double gemm, int chunks);

/* Time of one GEMM C[M,N] = A[M,K] B[K,N] (the backend's activation type,
 * fp32 accumulate), repeated `batch` times, on one device: shape-dependent
 * efficiency, roofline against memory, per-call overhead (cost_gemm.c). */
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

/* Which tensor-parallel collectives run beside a GEMM (with sequence
 * parallelism: the all-gathers and reduce-scatters on either side of the
 * column- and row-parallel GEMMs; all-reduces never do). */
typedef enum {
    PASS_TP_OVERLAP_NONE,         /* each waited for where it is issued */
    PASS_TP_OVERLAP_BACKWARD,     /* backward only: the input's re-gather beside the gradient
                                     GEMM, the input gradient's reduce-scatter beside the
                                     weight-gradient GEMM (Megatron's and Transformer
                                     Engine's linear layers, asynchronous) */
    PASS_TP_OVERLAP_UB,           /* also forward and the row-parallel gradient's gather:
                                     Transformer Engine's userbuffers pipeline the GEMM in
                                     chunks with the transfer (Megatron --tp-comm-overlap) */
} PassTpOverlap;

/* Where ZeRO-1/2's all-gather of the updated weights runs. */
typedef enum {
    PASS_GATHER_OPTIMIZER,        /* beside the optimizer's kernels of the later parameters
                                     (ptdc's programs) */
    PASS_GATHER_FORWARD,          /* in the next step's first forward, bucket by bucket, each
                                     bucket's gather beside the compute of the one before
                                     (Megatron --overlap-param-gather; FSDP's pre-forward
                                     unshard) */
    PASS_GATHER_BLOCKING,         /* after the optimizer, waited for */
} PassParamGather;

/* The software a plan runs on (stack.c; docs/stacks.md): ptdc's generated
 * programs (the preset "ptdc", all defaults) or a framework people already
 * run ("megatron", "fsdp"), read from --stack NAME|FILE. The fields below
 * `name` say how it computes, overlaps and holds memory; the masks what it
 * offers, which the search honours. Every preset field carries its source in
 * stack.c. */
typedef struct PassStack {
    char name[32];
    /* kernels */
    PassAttnKernel attn_kernel;   /* AUTO: ptdc's own flash kernel (measured, or FA2 class) */
    bool norm_unfused;            /* norms as unfused framework ops: they also save an fp32
                                     copy of the input and the normalised value, and cost
                                     several memory passes */
    bool add_norm_unfused;        /* the residual add and the norm reading its sum run as two
                                     kernels (ptdc: one, rt_add_rmsnorm_fwd or
                                     rt_add_layernorm_fwd, one read of the sum fewer) */
    bool gemm_unbatched;          /* sibling GEMMs (q, k, v; gate, up) run as separate calls
                                     (ptdc: one batched call, pass_gemm_batch; Megatron: one
                                     GEMM over the concatenated weights) */
    bool swiglu_unfused;          /* SwiGLU as eager framework ops, silu(gate) * up: autograd
                                     also saves silu(gate), and its kernels move 5 + 9
                                     elements per output where the fused ones move 3 + 5 */
    bool loss_fp32;               /* the loss upcasts the logits to fp32 and saves its fp32
                                     softmax (Megatron's vocabulary-parallel cross-entropy) */
    int grad_bytes;               /* gradient element bytes (accumulation, reduction);
                                     0: the backend's activation width */
    bool grad_accum_unfused;      /* each micro-batch's weight gradient is written to a
                                     temporary and added to the accumulated one by a separate
                                     kernel (framework autograd) instead of inside the GEMM */
    bool attn_dropout;            /* a materialised attention keeps a dropout mask and output
                                     (Megatron's path keeps them even at p = 0) */
    /* communication */
    bool dp_overlap;              /* gradient reduction (and ZeRO gathers) run asynchronously
                                     beside backward; false: after it, blocking */
    double dp_bucket_elems;       /* gradients reduced in buckets of this many elements;
                                     0: the backend's (pass_stack_bucket_elems) */
    bool zero3_prefetch;          /* ZeRO-3 gathers run ahead, hidden behind compute */
    bool pp_overlap;              /* an interleaved schedule's pipeline transfers run beside
                                     the chunks' compute (a framework's; ptdc's programs wait
                                     for each receive) */
    PassTpOverlap tp_overlap;     /* tensor-parallel collectives beside their GEMMs */
    PassParamGather param_gather; /* where ZeRO-1/2's weight all-gather runs */
    double reshard_overlap;       /* fraction of the resharding collectives tp_overlap leaves
                                     exposed that is hidden nonetheless (a user's estimate;
                                     the presets have 0) */
    /* memory */
    bool ref_stack;               /* memory as a caching-allocator framework holds it, not as
                                     ptdc's programs do: activations peak at the bytes alive at
                                     once rather than each chunk's slots of a static arena;
                                     ZeRO-1 reduce-scatters in place; no pipeline send/gradient
                                     slot copies */
    double frag_act;              /* caching-allocator fragmentation as a fraction of the bytes
                                     allocated and freed every micro-batch; 0: static arena */
    double alloc_reserve;         /* fraction of memory kept free for model error (and a
                                     caching allocator's overhead); 0 = PASS_MEM_RESERVE */
    bool master_aliases;          /* the fp32 master weights are the weights (an fp32 backend
                                     that keeps no second copy) */
    bool grad_in_place;           /* the loss writes dlogits over the logits it keeps
                                     (ir_grad_in_place): no second logits-sized buffer */
    bool grad_sum_in_kernel;      /* a GEMM (beta = 1) or a norm's backward (dres) adds its
                                     gradient contribution into the sum of the others, no
                                     rt_add (IR_OPF_GRAD_SUM) */
    /* what it offers */
    unsigned zero_stages;         /* bit z: ZeRO stage z (0: all) */
    unsigned recompute;           /* bit PassRecompute r: that policy (0: all) */
    unsigned schedules;           /* bit PassSchedule s: that schedule (0: all) */
    bool no_sp;                   /* no sequence parallelism */
    unsigned backends;            /* bit PassDevKind: devices it runs on (0: all) */
} PassStack;

/* The built-in stacks: "ptdc", "megatron", "fsdp" (stack.c). */
bool pass_stack_preset(const char *name, PassStack *out);
const char *pass_stack_preset_names(void);
/* Read a --stack file (format: docs/stacks.md): `key = value` lines like a
 * cluster file; `stack = NAME` first starts from a preset. Errors with
 * file:line:col and a caret; false on any. */
bool pass_stack_load(const char *path, PassStack *out);
bool pass_stack_parse(const char *path, const char *text, size_t len, PassStack *out);
/* The same keys applied on top of *st (--stack-set). */
bool pass_stack_apply(const char *path, const char *text, size_t len, PassStack *st);
/* --stack NAME|FILE (NULL: ptdc): a preset name, else a file. */
bool pass_stack_setup(PassStack *out, const char *name_or_file);
/* The file form, every key, with the preset's sources as comments. */
void pass_stack_print(FILE *f, const PassStack *st);
/* Does the stack offer ZeRO stage z, recomputation r, schedule s? */
bool pass_stack_has_zero(const PassStack *st, int z);
/* The gradient bucket a stack reduces at once on this device: its own
 * setting, else the size ptdc's programs use (codegen/cg_bucket.c). */
double pass_stack_bucket_elems(const PassStack *st, const PassGpu *gpu);
/* Compute time lost per second of collective overlapped with it: a GPU's
 * copy engines and SMs barely notice NCCL; a CPU rank's communication
 * thread copies with the cores the kernels use, so nothing is gained. */
double pass_overlap_slowdown(const PassGpu *gpu);
bool pass_stack_has_recompute(const PassStack *st, int r);
bool pass_stack_has_schedule(const PassStack *st, int s);

/* What the cost model needs besides the graph and the plan: the cluster,
 * the attention kind the plan asks for, and the stack that runs it. */
typedef struct PassCostCtx {
    const PassCluster *cl;
    PassAttention attention;
    PassStack st;
    /* The strategy of every node of the plan being priced, or NULL: which
     * GEMMs run batched (pass_gemm_batch) then follows from the graph alone,
     * the most the layouts allow (the ILP's per-node costs: a lower bound). */
    const PassStrategy *plan;
} PassCostCtx;

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
    double gemm_fwd_s, gemm_dx_s, gemm_dw_s; /* a matmul's of gemm_s: its forward GEMM, its
                                     input's gradient, its weight's gradient */
    double fused_s;               /* of fwd_s: what running as one kernel with the node before
                                     it saves (pass_add_norm_pair; negative unless a measured
                                     curve says otherwise), which a recomputation of this node
                                     alone does not get */
} PassNodeCost;

void pass_cost_node(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                    const PassStrategy *s, const int64_t *dim_size, PassNodeCost *out);
/* Is n a norm (RMSNorm, LayerNorm) that ptdc's programs run together with
 * the residual add right before it, as one rt_add_rmsnorm_fwd or
 * rt_add_layernorm_fwd (codegen/cg_lower.c)? From the
 * graph alone: the node before n is an add without a broadcast operand whose
 * sum n reads. Priced so when the stack does not set add_norm_unfused; the
 * pair may span two pieces (a layer's last add, the next layer's first
 * norm): a pipeline cut between them runs the norm alone, which
 * pass_predict charges and the search's piece costs do not (one norm's
 * saving per stage, a lower bound still). */
bool pass_add_norm_pair(const IrGraph *g, const IrNode *n);
/* ... and does the plan's `strategy` (one per node) let it: the add makes its
 * sum complete (no partial sums) in the layout the norm reads it in, from
 * operands in that layout, so nothing runs between the two. Where it does
 * not (a residual added replicated, the norm reading a sequence slice), the
 * norm runs alone; the ILP prices each node alone and keeps the pair fused. */
bool pass_add_norm_fused(const IrGraph *g, const IrNode *n, const PassStrategy *strategy);
/* Forward GEMMs that ptdc's programs run as one rt_matmul_batch (q, k, v;
 * gate and up; their weight gradients likewise): n's group in node order,
 * n included, written to out (PASS_GEMM_BATCH_MAX entries; NULL: count
 * only); 1 for n alone or not such a GEMM. _siblings from the graph alone,
 * _batch under a plan's strategies (one per node): members whose weights,
 * outputs and input are laid out alike (passes/cost/gemm_batch.c). */
#define PASS_GEMM_BATCH_MAX 4 /* runtime/rt.h: RT_MATMUL_BATCH_MAX */
int pass_gemm_siblings(const IrGraph *g, const IrNode *n, int *out);
int pass_gemm_batch(const IrGraph *g, const IrNode *n, const PassStrategy *strategy, int *out);
/* The forward seconds recomputing n under r costs: fwd_s, less the fusion
 * saving unless the add before it, in its piece, is recomputed with it. */
double pass_rec_fwd_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, PassRecompute r,
                      const PassNodeCost *nc);
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
/* One past the last forward node the cost model looks in for readers of
 * activation t: the end of the piece after its producer's. */
int pass_readers_end(const IrGraph *g, int t);
/* The layout a generated program keeps tensor t in: its producer's, reduced
 * towards its first forward consumer (codegen/cg_plan.c's canonical form, one
 * kept copy whatever layout its keepers read), looked for in t's piece and the
 * next. strat: every node's strategy. */
PassSharding pass_kept_sharding(const IrGraph *g, const PassMesh *m, const PassStrategy *strat,
                                const int64_t *dim_size, int t);
/* pass_saved_bytes in those layouts, as pass_predict counts activations: an
 * input all-gathered for n is kept smaller and gathered again in backward
 * (*regather_s, when not NULL: that time), one sliced for n (sequence
 * parallelism's norms reading a replicated residual) is kept whole. lower_bound:
 * nothing counted larger than n reads it (the search, whose strategies of
 * later nodes are not all chosen yet, needs a lower bound of pass_predict). */
double pass_kept_bytes(const PassCostCtx *c, const IrGraph *g, const PassMesh *m,
                       const PassStrategy *strat, const int64_t *dim_size, const IrNode *n,
                       PassRecompute r, bool lower_bound, double *regather_s);
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
/* The all-gather of updated weights after the optimizer (ZeRO-1/2), s per step. */
double pass_param_gather_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                           const PassStrategy *s, int zero);
double pass_param_sync_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                         const PassStrategy *s, int zero, int num_micro);
/* The latency part of the per-step collectives pass_param_sync_s prices one
 * per parameter tensor: *red_s of the reduction (ZeRO 0 all-reduce, 1
 * reduce-scatter), *gather_s of ZeRO-1/2's all-gather, summed over the
 * parameters n owns; returns how many are synchronised. A stack that
 * reduces in buckets pays it once per bucket (pass_predict). */
int pass_param_sync_lat(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                        const PassStrategy *s, int zero, double *red_s, double *gather_s);
/* Bytes of optimizer state per parameter element (fp32 master and moments). */
int pass_optim_bytes(const PassCostCtx *c);
/* ptdc's programs, per parameter n owns: the kernels run once per step
 * (zeroing the gradient, its share of the gradient norm, AdamW on the
 * shard), and, under ZeRO 2 and 3, per micro-batch (zeroing the full
 * gradient it reduce-scatters, adding its shard). Seconds on one rank. */
double pass_param_step_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                         const PassStrategy *s, int zero);
double pass_param_mb_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                       const PassStrategy *s, int zero);

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
    /* The slowest rank's step taken apart like a profile of the program
     * (PTDC_PROFILE): GEMMs, attention, the other kernels, host token loads;
     * compute per step without recomputation or communication. */
    double gemm_s, attn_s, kernels_s, host_s;
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
 * NCCL communicators, library workspaces (or, for a measured device, its
 * start-up and per-communicator bytes), for a pipeline rank on mesh m. */
double pass_runtime_bytes(const PassCostCtx *c, const PassMesh *m, int pp);
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

#endif
