/* cluster.h: the machine a plan runs on (passes/cost/): devices and their
 * measured or datasheet rates (cluster.c presets, `--cluster` files and what
 * `ptdc calibrate` writes), kernels by kind, collective fits, and the
 * `key = value` file syntax (kvfile.c) those files and stacks share. */
#ifndef PTDC_PASS_CLUSTER_H
#define PTDC_PASS_CLUSTER_H

#include "plan.h"

#include <stdio.h>

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
    double peak_fp8_flops;        /* dense FP8 (and MXFP8) tensor-core FLOP/s; 0: no FP8 */
    double peak_fp4_flops;        /* dense NVFP4 tensor-core FLOP/s; 0: no FP4 */
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
    /* The system the GPU is sold in, a cluster's defaults: GPUs per host and
     * per NVLink domain (0: 8 per host, the domain the host; NVL72: 4, 72). */
    int host_gpus, domain_gpus;
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
    int ncoll[PLAN_COLL_SENDRECV + 1];
    PassCollFit coll[PLAN_COLL_SENDRECV + 1][PASS_COLL_FITS]; /* by PlanCollKind */
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
    int host_grace;               /* 1: the host CPU is an Arm Grace (GB200, GB300 NVL72
                                     trays), 0: x86; picks the stack's host_op_s */
    /* Checkpoints (ckpt_cost.c; 0: not given, not priced): the rate one rank
     * writes its checkpoint file at, fsync included, while every rank writes
     * (a property of the site's storage, which no preset knows), and the
     * rate of the copy of its state into host staging (page-locked
     * device-to-host on a GPU, memcpy on a CPU). Bytes per second. */
    double storage_write_bw, host_copy_bw;
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

/* A "node" is a host (processes: ranks per host, launchers, CPU cores); an
 * NVLink domain is the GPUs that reach each other over NVLink (links:
 * collectives, send/recv, where TP, CP and EP groups may go). The two are the
 * same on an 8-GPU HGX host; a GB200/GB300 NVL72 rack joins 18 hosts of 4
 * into one domain of 72. */
typedef struct PassCluster {
    PassGpu gpu;
    int ngpus, gpus_per_node;     /* gpus_per_node: GPUs per host */
    int nvlink_domain;            /* GPUs per NVLink domain, whole hosts (0: one host) */
    int nodes;                    /* CPU clusters: the nodes ranks are spread over (0: one) */
} PassCluster;

/* GPUs per host (8 when not set). */
int pass_cluster_host(const PassCluster *cl);
/* The NVLink domain a plan is priced and placed with: nvlink_domain (or the
 * host), cut to the largest whole number of hosts that divides the job's GPUs
 * (64 GPUs on NVL72 racks: one domain of 64; 128: two of 64), since the mesh
 * models equal domains. */
int pass_cluster_domain(const PassCluster *cl);
/* The same for a job of `gpus` GPUs (a search over fewer GPUs than the
 * cluster's; gpus <= 0: the domain uncut). */
int pass_cluster_domain_at(const PassCluster *cl, int gpus);

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
/* A built-in GPU (a100-40gb, ..., h800, b200, b300, gb200, gb300); false if unknown. */
bool pass_gpu_preset(const char *name, PassGpu *out);
/* "a100-40gb, a100-80gb, ...": every preset's name, for messages. */
const char *pass_gpu_preset_names(void);
/* Read a --cluster description (format: docs/cost-model.md, "Cluster file");
 * errors reported with file:line:col and a caret, false on any. Keys the file
 * does not set keep their preset value; ngpus, gpus_per_node and nvlink_domain
 * are 0 when the file does not set them (the caller applies --gpus /
 * --gpus-per-node and the preset's host and domain). */
bool pass_cluster_load(const char *path, PassCluster *out);
/* The same from text in memory named `path` (tests, fuzzing). */
bool pass_cluster_parse(const char *path, const char *text, size_t len, PassCluster *out);
/* The cluster the driver's flags describe: --cluster FILE if given (its
 * values win), else the --gpu preset; gpus and gpus_per_node fill what the
 * file leaves unset. Errors (unknown GPU, GPUs not whole nodes) are reported
 * as sentences naming the flag; false on any. */
bool pass_cluster_setup(PassCluster *out, const char *file, const char *gpu, int gpus,
                        int gpus_per_node);
/* Apply --gpus / --gpus-per-node to what a file or preset left unset (then
 * the preset's host size, else 8; the domain: the preset's when it is whole
 * hosts, else the host), and
 * for a CPU device share each node's cores and memory among the ranks on it
 * (so the device describes one rank). whole_nodes: refuse GPU counts that
 * are not whole nodes. False after reporting an impossible count. */
bool pass_cluster_finish(PassCluster *cl, int gpus, int gpus_per_node, bool whole_nodes);
/* Every field set, one per line with units, in the file format (tables
 * included): what `ptdc calibrate` writes. */
void pass_cluster_print(FILE *f, const PassCluster *cl);

#endif
