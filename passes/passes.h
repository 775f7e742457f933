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

/* ==================================================== cluster.c (issue 3) */
typedef struct PassGpu {
    char name[32];
    double peak_flops;            /* dense bf16 tensor-core FLOP/s */
    double hbm_bytes;             /* memory capacity */
    double hbm_bw;                /* bytes/s */
    double nvlink_bw;             /* per GPU, one direction, bytes/s (datasheet) */
    double nic_bw;                /* per GPU NIC, one direction, bytes/s (datasheet) */
    double busbw_nvlink;          /* measured NCCL bus bandwidth inside a node, bytes/s */
    double busbw_ib;              /* measured NCCL bus bandwidth across nodes, bytes/s */
    double alpha_nvlink, alpha_ib;/* per-collective latency, s */
} PassGpu;

typedef struct PassCluster {
    PassGpu gpu;
    int ngpus, gpus_per_node;
} PassCluster;

/* A built-in GPU (a100-40gb, a100-80gb, h100-80gb, h200); false if unknown. */
bool pass_gpu_preset(const char *name, PassGpu *out);
/* Read a --cluster description; errors reported with file:line:col. */
bool pass_cluster_load(const char *path, PassCluster *out);

/* ================================================= cost*.c, mem*.c (issue 3) */
typedef struct PassCostCtx {
    const PassCluster *cl;
    PassAttention attention;
} PassCostCtx;

/* Cost of one forward node on one rank for one micro-batch under a strategy:
 * its forward and backward kernels (including in-op collectives such as the
 * vocabulary-parallel cross-entropy's), from local shapes. Resharding on its
 * edges and parameter synchronisation are costed separately. */
typedef struct PassNodeCost {
    double fwd_s, bwd_s;
    double flops_fwd, flops_bwd;  /* local FLOPs */
} PassNodeCost;

void pass_cost_node(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                    const PassStrategy *s, const int64_t *dim_size, PassNodeCost *out);
/* Seconds for one collective step (pass_reshard's output) of elements of elem_bytes. */
double pass_cost_coll(const PassCostCtx *c, const PassMesh *m, const PassColl *k, int elem_bytes);
/* Bytes forward node n keeps alive for its backward on one rank for one
 * micro-batch under recomputation policy r (activations only: parameters
 * are counted by pass_param_bytes). */
double pass_saved_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                        const PassStrategy *s, const int64_t *dim_size, PassRecompute r);
/* Model-state bytes on one rank of the parameters node n owns (those it is
 * the first consumer of): bf16 weights and grads, fp32 master and moments,
 * sharded over the parameter's data-parallel axes per the ZeRO stage. */
double pass_param_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                        const PassStrategy *s, int zero);
/* Seconds per optimizer step to synchronise those parameters' gradients (and
 * gather ZeRO-3 parameters, per micro-batch count num_micro). */
double pass_param_sync_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PassMesh *m,
                         const PassStrategy *s, int zero, int num_micro);

/* ============================================================ ilp*.c (issue 4) */

/* ========================================================= search*.c (issue 5) */

/* ========================================================== autodiff.c (issue 6) */

#endif
