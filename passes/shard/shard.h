/* shard.h: exports of passes/shard/ (shard.c): the sharding algebra. Meshes,
 * strategies and shardings, which strategies an operator admits, what each
 * implies for its inputs, outputs and gradients, and the collectives that
 * reshard a tensor. Needs only the IR; everything else in passes/ and
 * codegen/ builds on it.
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
#ifndef PTDC_PASS_SHARD_H
#define PTDC_PASS_SHARD_H

#include "ir.h"

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

/* `from` after the reductions pass_reshard towards `to` starts with (all-reduce,
 * reduce-scatter): the layout a generated program keeps a tensor in (its
 * canonical form, reduced towards its first consumer: codegen/cg_plan.c),
 * which the memory model counts too. */
PassSharding pass_reshard_reduced(const IrGraph *g, int t, const PassMesh *m, PassSharding from,
                                  const PassSharding *to, const int64_t *dim_size);

bool pass_sharding_eq(const PassSharding *a, const PassSharding *b);
/* "wq[d_model, n_heads/tp, head_dim]" using axis names (e.g. {"dp","tp"}). */
const char *pass_sharding_str(const IrGraph *g, int t, const PassSharding *sh,
                              const char *const *axis_names, char *buf, size_t n);

#endif
