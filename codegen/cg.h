/* cg.h: internals of codegen/ shared by its files (not an export; see
 * codegen.h). The flow, for each pipeline rank:
 *   cg_analyse.c what the plan implies for every tensor: shardings, stages,
 *                which activations are kept for backward, recomputation,
 *                pipeline boundaries, how each parameter is stored and reduced
 *   cg_sched.c   the micro-batch schedule (1F1B, interleaved), buffer slots,
 *                and a check that the send/receive pattern cannot deadlock
 *                (host-blocking MPI, and CUDA's per-direction streams)
 *   cg_lower.c   each stage chunk's forward and backward as a list of typed
 *                statements (cg_call.c: calls of the CG_CALLS table over
 *                buffer ids and named sizes), with cg_reshard.c, cg_fwd.c,
 *                cg_bwd.c, cg_grad.c (cg_low.h); kernels from cg_kernel.c,
 *                collectives from plan_reshard; the rank's buffers in cg_buf.c
 *   cg_bucket.c  gradient buckets: which parameters are reduced together, in
 *                the order the backward completes them
 *   cg_names.c   tensor names as C identifiers (used by cg_lower.c and cg_print.c)
 *   cg_mem.c     the static memory plan: offsets of every buffer
 *   cg_print.c   model.h and model.c, with cg_piece.c and cg_stage.c
 *                (cg_print.h); statements as C by cg_text.c
 *   cg_hf.c      the model's Hugging Face config.json (for --export-hf DIR),
 *                decided from the graph; cg_hf_check.c proves it exact
 *   cg_emit.c    the directory: sources, trainer, Makefile, run.sh
 * Generator memory comes from one arena (Cg.arena) freed at the end. */
#ifndef PTDC_CG_H
#define PTDC_CG_H

#include "codegen.h"

#include <stdio.h>

/* The contract with the trainer (runtime/trainer/model_abi.h): CgType's
 * arenas, CG_MEM_* rows, CgParam and CgRank, whose fields cg_print.c prints. */
#include "model_abi.h"

/* ----------------------------------------------------------- buffers */
/* The element type of parameter gradients (accumulators, ZeRO-1 shards, the
 * per-micro-batch gradients ZeRO-2/3 reduce-scatter, kernels' weight
 * gradients): fp32 on every target (rt.h's rt_grad, reduced as RT_F32).
 * Codegen decides it here only; the memory plan follows. */
#define CG_GRAD CG_F32
/* Groups of pipeline ranks sharing a parameter (tied embeddings: one). */
#define CG_MAX_TIED 32
/* "sizeof(rt_act)", "sizeof(float)" or "sizeof(int32_t)". */
const char *cg_sizeof(CgType t);

typedef enum {
    CG_B_PARAM, /* a parameter's storage (persistent) */
    CG_B_GRAD,  /* a parameter's gradient accumulator (persistent) */
    CG_B_SLOT,  /* kept across ops: one copy per micro-batch slot of its chunk */
    CG_B_TEMP,  /* lives inside one op (a chunk's forward or backward) */
    CG_B_WSLOT, /* a split schedule's (ZB-H1's) weight-gradient input, copied by the
                   backward (B; an MoE layer's rt_moe_act_bwd_b makes its rows there)
                   and read by the deferred weight gradients (W): one copy
                   per micro-batch whose W waits (CgRankProg.nwslots), the chunk's W
                   buffers of one micro-batch a block (wblock) at g_wslot_<type> */
} CgBufKind;

/* Where a temporary lands once liveness is known. */
typedef enum { CG_HOME_NONE, CG_HOME_IFACE, CG_HOME_LOCAL } CgHome;

typedef struct CgBuf {
    int id;
    CgBufKind kind;
    CgType type;
    int64_t numel;
    int tensor;          /* IR tensor it holds, -1 for none */
    const char *pre;     /* its C name is pre + the tensor's name + suf ("d_" "x" "_acc") */
    const char *suf;
    const char *name;    /* the name of a buffer without a tensor */
    const char *comment; /* shape and role, for the field or local's comment */
    int chunk;           /* CG_B_SLOT: local chunk index */
    /* liveness (temps): op index and statement range, the piece using it */
    int op, first, last;
    int piece;           /* the only piece referencing it, -1 several/chunk level */
    CgHome home;
    /* memory plan (elements of its type) */
    int64_t offset;      /* persistent: from its type's arena base; iface/local: in the region */
    int64_t stride;      /* CG_B_SLOT, CG_B_WSLOT: elements between slot copies */
} CgBuf;

/* ------------------------------------------------------ typed statements */
/* The runtime and trainer calls generated code makes, one row each: the
 * function and what each argument is (cg_call checks every call against its
 * row; the printer prints from it):
 *   b  a buffer (or NULL, g_loss, a float scalar)   L  buffers (a batch's operands)
 *   n  an element count                             y  a byte count
 *   f  a flag (bool)                                x  a float constant
 *   c  a communicator, g_comm[mask]                 o  this rank's offset along a dim
 *   t  an element type (RT_ACT, RT_F32)             m  ranks along a mesh axis
 *   a  a mesh coordinate, g_coord[axis]            i  a named integer (a pipeline peer)
 *   e  any other symbol (g_scratch, mb, a request, a message tag)
 *   N  element counts, one per GEMM of a list (a chunked gather's GEMMs)
 * A new call (an all-to-all dispatch, a ring exchange, an FP8 scale) is one
 * row here plus the lowering that makes it. */
#define CG_CALLS(X)                                                                         \
    X(MATMUL, "rt_matmul", "bbbnnnfff")                                                     \
    X(MATMUL_GRAD, "rt_matmul_grad", "bbbnnnfff")                                           \
    X(MATMUL_BATCH, "rt_matmul_batch", "LLLnnnfff")                                         \
    X(MATMUL_GRAD_BATCH, "rt_matmul_grad_batch", "LLLnnnfff")                               \
    X(MATMUL_FP8, "cg_matmul_fp8", "bbbnnnfffeecc")                                        \
    X(MATMUL_FP8_GRAD, "cg_matmul_fp8_grad", "bbbnnnfffeecc")                               \
    X(EMBEDDING_FWD, "rt_embedding_fwd", "bbbnnon")                                         \
    X(EMBEDDING_BWD, "rt_embedding_bwd", "bbbnnon")                                         \
    X(RMSNORM_FWD, "rt_rmsnorm_fwd", "bbbbnnx")                                             \
    X(ADD_RMSNORM_FWD, "rt_add_rmsnorm_fwd", "bbbbbbnnx")                                   \
    X(RMSNORM_BWD, "rt_rmsnorm_bwd", "bbbbbbbnn")                                           \
    X(RMSNORM_GROUP_FWD, "rt_rmsnorm_group_fwd", "bbbbnnnx")                                \
    X(RMSNORM_GROUP_BWD, "rt_rmsnorm_group_bwd", "bbbbbbbnnn")                              \
    X(LAYERNORM_FWD, "rt_layernorm_fwd", "bbbbbbnnx")                                       \
    X(ADD_LAYERNORM_FWD, "rt_add_layernorm_fwd", "bbbbbbbbnnx")                             \
    X(LAYERNORM_BWD, "rt_layernorm_bwd", "bbbbbbbbbnn")                                     \
    X(ROPE, "rt_rope", "bbnnnnoxf")                                                         \
    X(ROPE_LLAMA3, "rt_rope_llama3", "bbnnnnoxxxxxf")                                       \
    X(ROPE_CP, "cg_rope", "bbnnnnoxf")                                                      \
    X(ROPE_LLAMA3_CP, "cg_rope_llama3", "bbnnnnoxxxxxf")                                    \
    X(ATTENTION_FWD, "rt_attention_fwd", "bbbbbnnnnnfn")                                    \
    X(ATTENTION_BWD, "rt_attention_bwd", "bbbbbbbbbnnnnnfn")                                \
    X(ATTENTION_SINK_FWD, "rt_attention_sink_fwd", "bbbnnn")                                \
    X(ATTENTION_SINK_BWD, "rt_attention_sink_bwd", "bbbbbnnn")                              \
    X(ATTENTION_V_FWD, "rt_attention_v_fwd", "bbbbbnnnnnnfn")                               \
    X(ATTENTION_V_BWD, "rt_attention_v_bwd", "bbbbbbbbbnnnnnnfn")                           \
    X(ATTENTION_CP_FWD, "cg_attention_cp_fwd", "bbbbbnnnnnnfnma")                           \
    X(ATTENTION_CP_BWD, "cg_attention_cp_bwd", "bbbbbbbbbnnnnnnfnma")                       \
    X(ATTENTION_RING_FWD, "cg_attention_ring_fwd", "bbbbbnnnnnfnma")                         \
    X(ATTENTION_RING_BWD, "cg_attention_ring_bwd", "bbbbbbbbbnnnnnfnma")                     \
    X(ATTENTION_A2A_FWD, "cg_attention_a2a_fwd", "bbbbbnnnnnfn")                            \
    X(ATTENTION_A2A_BWD, "cg_attention_a2a_bwd", "bbbbbbbbbnnnnnfn")                        \
    X(SILU_FWD, "rt_silu_fwd", "bbn")                                                       \
    X(SILU_BWD, "rt_silu_bwd", "bbbn")                                                      \
    X(GELU_FWD, "rt_gelu_fwd", "bbn")                                                       \
    X(GELU_BWD, "rt_gelu_bwd", "bbbn")                                                      \
    X(SWIGLU_FWD, "rt_swiglu_fwd", "bbbn")                                                  \
    X(SWIGLU_BWD, "rt_swiglu_bwd", "bbbbbn")                                                \
    X(ADD, "rt_add", "bbbnn")                                                               \
    X(MUL, "rt_mul", "bbbnn")                                                               \
    X(SOFTMAX_FWD, "rt_softmax_fwd", "bbnn")                                                \
    X(SOFTMAX_BWD, "rt_softmax_bwd", "bbbnn")                                               \
    X(CROSS_ENTROPY_FWD, "rt_cross_entropy_fwd", "bbbbnnonxc")                               \
    X(CROSS_ENTROPY_BWD, "rt_cross_entropy_bwd", "bbbbbnnon")                               \
    X(SLICE_FWD, "rt_slice_fwd", "bbnnnn")                                                  \
    X(SLICE_BWD, "rt_slice_bwd", "bbnnnn")                                                  \
    X(CONCAT_FWD, "rt_concat_fwd", "bbbnnnnn")                                              \
    X(CONCAT_BWD, "rt_concat_bwd", "bbbnnnnn")                                              \
    X(SIGMOID_FWD, "rt_sigmoid_fwd", "bbn")                                                 \
    X(SOFTPLUS_FWD, "rt_softplus_fwd", "bbn")                                               \
    X(SOFTPLUS_BWD, "rt_softplus_bwd", "bbbn")                                              \
    X(RELU2_FWD, "rt_relu2_fwd", "bbn")                                                     \
    X(RELU2_BWD, "rt_relu2_bwd", "bbbn")                                                    \
    X(CONV1D_FWD, "rt_conv1d_fwd", "bbbbnnnn")                                              \
    X(CONV1D_BWD, "rt_conv1d_bwd", "bbbbbbnnnn")                                            \
    X(SSD_FWD, "rt_ssd_fwd", "bbbbbbbnnnnnn")                                               \
    X(SSD_BWD, "rt_ssd_bwd", "bbbbbbbbbbbbbnnnnnn")                                         \
    X(SIGMOID_BWD, "rt_sigmoid_bwd", "bbbn")                                                \
    X(ROUTE_FWD, "rt_route_fwd", "bbnnnebxn")                                               \
    X(ROUTE_BWD, "rt_route_bwd", "bbbbnnnen")                                               \
    X(MOE_FWD, "rt_moe_fwd", "cbbbbbbnnnnn")                                                \
    X(MOE_BWD, "rt_moe_bwd", "cbbbbbbbbbbbnnnnn")                                           \
    X(MOE_ACT_FWD, "rt_moe_act_fwd", "cbbbbbbbbennnnn")                                     \
    X(MOE_ACT_BWD, "rt_moe_act_bwd", "cbbbbbbbbbbbbbbbennnnn")                              \
    X(MOE_ACT_BWD_B, "rt_moe_act_bwd_b", "cbbbbbbbbnbbbbbbbbennnnn")                        \
    X(MOE_ACT_BWD_W, "rt_moe_act_bwd_w", "bbbbbbnennn")                                     \
    X(REDUCE_ROWS, "rt_reduce_rows", "bbnnf")                                               \
    X(REDUCE_ROWS_GRAD, "rt_reduce_rows_grad", "bbnnf")                                     \
    X(COPY, "rt_copy", "bby")                                                               \
    X(ZERO, "rt_zero", "by")                                                                \
    X(GRAD_ADD, "rt_grad_add", "bbn")                                                       \
    X(GRAD_SUM, "rt_grad_sum", "bbn")                                                       \
    X(ALLREDUCE, "rt_allreduce", "cbnt")                                                    \
    X(ALLGATHER, "rt_allgather", "cbbnt")                                                   \
    X(REDUCE_SCATTER, "rt_reduce_scatter", "cbbnt")                                         \
    X(REDUCE_SCATTER_DIM, "rt_reduce_scatter_dim", "cbbnnne")                               \
    X(ALLGATHER_DIM, "rt_allgather_dim", "cbbnnne")                                         \
    X(ALLTOALL_DIM, "rt_alltoall_dim", "cbbnnnnnfe")                                        \
    X(SLICE_DIM, "rt_slice_dim", "bbnnnma")                                                 \
    X(ALLGATHER_MATMUL, "rt_allgather_matmul", "cbbnnneLLNff")                              \
    X(MATMUL_REDUCE_SCATTER, "rt_matmul_reduce_scatter", "cbbbbnnnnffie")                   \
    X(GRAD_READY, "cg_grad_ready", "b")                                                     \
    X(WAIT, "cg_wait", "e")                                                                 \
    X(RECV, "cg_recv", "bntie")                                                             \
    X(SEND, "cg_send", "ebntie")                                                            \
    X(LOAD, "cg_load", "beeononii")

typedef enum {
#define CG_CALL_ENUM(id, fn, sig) CG_CALL_##id,
    CG_CALLS(CG_CALL_ENUM)
#undef CG_CALL_ENUM
    CG_NCALLS /* a statement that is a comment */
} CgCallee;

extern const char *const cg_call_name[CG_NCALLS], *const cg_call_sig[CG_NCALLS];

/* A count: the product of some dims' local sizes (printed as the piece's
 * named constants, "LAYER_BATCH_LOCAL * LAYER_SEQ"), or one named scalar. */
typedef struct CgSize {
    int64_t v;
    int nf;                       /* factors */
    int16_t dim[IR_MAX_RANK];     /* IR dims */
    int64_t local[IR_MAX_RANK];   /* their local sizes */
    const char *name;             /* nf == 0: the scalar's name ("WQ_SHARD"); NULL: v is 1 */
    const char *what;             /* the scalar's comment */
    const char *unit;             /* a byte count: "sizeof(rt_act)" */
} CgSize;

typedef enum {
    CG_A_BUF,   /* buffer `buf`, at rank-in-g_comm[comm] x size elements when comm != 0 */
    CG_A_BUFS,  /* bufs[0..nbufs) */
    CG_A_SIZES, /* sizes[0..nbufs) */
    CG_A_SIZE,  /* size (an element or byte count) */
    CG_A_INT,   /* size.name = size.v: a named integer that is no size */
    CG_A_BOOL,
    CG_A_FLT,   /* sym: a float literal ("1e-05f") */
    CG_A_COMM,  /* g_comm[buf]; 0: NULL */
    CG_A_COORD, /* (int64_t)g_coord[buf] * size; buf -1: 0. comm: the axes (bits) splitting
                   the same dim inside buf's (a nested split; buf the outermost in the
                   sharding's order, PlanSharding.hi_outer): the coordinate is then
                   buf's, and the inner axis's in turn, outer-major */
    CG_A_MESH,  /* CG_MESH<buf> */
    CG_A_AXIS,  /* g_coord[buf] */
    CG_A_SYM,   /* sym, as is */
} CgArgKind;

typedef struct CgArg {
    CgArgKind kind;
    int buf;
    int comm;
    bool b;
    const char *sym;
    int nbufs;
    const int *bufs;
    const CgSize *sizes;          /* CG_A_SIZES, nbufs of them */
    CgSize size;
} CgArg;

/* One statement: a call (run only where the mesh coordinates of `guard`'s
 * axes are 0), or a comment. */
typedef struct CgStmt {
    int piece;          /* IR piece whose function holds it; -1: the stage function */
    CgCallee fn;
    uint8_t guard;
    int nargs;
    CgArg *args;
    const char *comment; /* fn == CG_NCALLS */
} CgStmt;

typedef struct CgOp {
    int chunk, stage;
    int bwd;            /* PlanOpKind: forward, backward (B), weight gradients (W) */
    VEC(CgStmt) st;
} CgOp;

/* A chunk's ops: forward, backward and (split schedules; else empty) its
 * deferred weight gradients, CG_OP(r, j, PLAN_OP_W). */
#define CG_NOPKINDS 3
#define CG_OP(r, j, kind) (&(r)->ops[CG_NOPKINDS * (j) + (kind)])
#define CG_NOPS(r) (CG_NOPKINDS * (r)->nchunks)

/* A received or sent boundary tensor of a chunk, or a request field. */
typedef struct CgIo {
    int tensor;
    int buf;             /* CG_B_SLOT buffer sent from / received into */
    const char *req;     /* request field name for sends ("req_x"), NULL for receives */
} CgIo;

/* ----------------------------------------------------- per-parameter plan */
typedef struct CgParamPlan {
    int tensor;
    PlanSharding store;  /* storage: dims of its first consumer's need, never partial */
    uint8_t pmask;       /* axes its gradient is partial over, reduced once per step */
    bool zshard;         /* ZeRO >= 1 and pmask != 0: optimizer state flat-sharded over pmask */
    int64_t numel;       /* local elements in `store` */
    int64_t shard;       /* elements per flat shard (numel padded to a multiple of the group) */
    int64_t padded;      /* shard * group size (numel when not sharded) */
    int group;           /* ranks in the pmask group */
    uint64_t ppmask;     /* pipeline ranks holding it (bit per pp rank, PLAN_MAX_PP) */
    int primary;         /* the first of them */
    int tied;            /* tied group index (several pp ranks), else -1 */
    int hf_split;        /* HF view: dims [0, hf_split) are its first dim (2-D), 0: 1-D,
                            -1: its own shape (stacked experts under one name) */
} CgParamPlan;

/* ----------------------------------------------------------- a rank */
typedef struct CgRankProg {
    int pp_rank;
    int nchunks;
    int stage[16];                    /* global stage of local chunk j */
    int nslots[16];
    int nwslots[16];                  /* split schedules: most micro-batches whose W waits
                                         (weight-gradient inputs held), from the schedule */
    int64_t wblock[16][CG_NTYPES];    /* elements of one W slot of a chunk, per arena (cg_mem.c) */
    CgOp *ops;                        /* [CG_NOPS]: CG_OP(r, j, kind) */
    VEC(CgBuf *) bufs;
    VEC(CgIo) recv_act[16], send_act[16], recv_grad[16], send_grad[16];
    /* parameters held here (index into Cg.params) and their buffers */
    VEC(int) params;
    int *pbuf, *gbuf, *gsbuf;         /* [Cg.nparams]: storage, accumulator, ZeRO-1 shard (-1) */
    int64_t *opt_off;                 /* [3 * Cg.nparams]: fp32 master, m, v (F32 offsets) */
    /* the schedule */
    int nsched;
    struct CgSchedOp { int bwd, chunk, mb; } *sched;
    /* gradient buckets (cg_bucket.c) */
    VEC(int) ready[16];               /* per chunk: parameters whose gradient its backward
                                         completes (cg_grad_ready), in that order */
    VEC(int) wready[16];              /* the same of its weight gradients (W, split schedules) */
    VEC(int) bucket_params;           /* parameters (Cg.params indices), bucket after bucket */
    VEC(int) bucket_start;            /* first of each bucket in bucket_params, then the end */
    int *pbucket;                     /* [Cg.nparams] bucket of each parameter, -1: none */
    int *pready;                      /* [Cg.nparams] cg_grad_ready calls per step (chunks) */
    /* memory plan totals (elements), by category x type */
    int64_t mem[CG_MEM_N][CG_NTYPES];
    int64_t total[CG_NTYPES];
    int64_t iface_base[CG_NTYPES], ws_base[CG_NTYPES], ws_size[CG_NTYPES];
    int64_t scratch_base, scratch_size, loss_off;
} CgRankProg;

/* ------------------------------------------------------- Hugging Face */
enum { CG_HF_MAX_KEYS = 32 };
#define CG_HF_FILE "hf_config.json" /* beside the program: its export's config.json */
typedef struct CgHf {
    const char *arch;    /* "LlamaForCausalLM", ...; NULL: the model states none */
    const char *why;     /* then why, a clause */
    int nkeys;           /* config.json's keys, sorted; values as JSON text, NULL: the */
    const char *key[CG_HF_MAX_KEYS], *value[CG_HF_MAX_KEYS]; /* export's torch_dtype */
    const char *prefix;  /* the architecture's base_model_prefix */
    bool prefixed;       /* the model's hf names carry it */
} CgHf;

/* ------------------------------------------------------------- context */
typedef struct Cg {
    const IrGraph *g;
    const Plan *p;
    const CgOptions *o;
    IrArena *arena;
    PlanMesh mesh;
    int naxes;
    const char *axis_name[PLAN_MAX_AXES];
    int64_t *dim;                     /* global sizes; batch = the micro-batch (mb_seqs) */
    int64_t total_rows;               /* tokens per optimizer step */
    int64_t vocab;                    /* the cross-entropy's classes */
    /* stages */
    int *piece_stage;                 /* [npieces] */
    int *node_stage;                  /* [nnodes] (backward: their forward's) */
    PlanRecompute *piece_recompute;
    /* forward tensors */
    PlanSharding *prod;               /* [ntensors] as produced (outputs of forward nodes) */
    PlanSharding *canon;              /* [ntensors] after the reductions of the first consumer */
    int *last_stage;                  /* [ntensors] last stage with a forward consumer, -1 */
    bool *recomputed;                 /* [nnodes] forward node in its piece's recompute set */
    bool *saved;                      /* [ntensors] kept per micro-batch (canonical form) */
    bool *is_root;                    /* [ntensors] input of a recompute set from outside it */
    /* gradients */
    bool *has_grad;                   /* [ntensors] activation whose gradient is read */
    PlanSharding *gsh;                /* [ntensors] sharding of the complete gradient */
    int seed;                         /* the loss's gradient tensor */
    int tokens, targets;              /* the two inputs */
    /* parameters */
    int nparams;
    CgParamPlan *params;
    int *param_index;                 /* [ntensors] index into params or -1 */
    int ntied;
    uint64_t tied_mask[CG_MAX_TIED];
    /* loss */
    int loss_stage;
    uint8_t loss_count_mask;          /* axes along which the loss is replicated */
    /* ranks */
    CgRankProg *ranks;                /* [pp] */
    CgHf hf;                          /* cg_hf.c */
} Cg;

/* cg_analyse.c */
bool cg_analyse(Cg *c);
/* A tensor the program reads from the data (an input, or a shift of one);
 * cg_data_root: which input, and the shift's `by` and `tail` (0 for an input). */
bool cg_is_data(const Cg *c, int t);
int cg_data_root(const Cg *c, int t, int64_t *shift, int *tail);
PlanSharding cg_need(const Cg *c, const IrNode *n, int i);     /* input i's sharding */
PlanSharding cg_made(const Cg *c, const IrNode *n, int j);     /* output j's sharding */
const PlanStrategy *cg_strategy(const Cg *c, const IrNode *n);
int64_t cg_numel(const Cg *c, int t, const PlanSharding *sh);
void cg_local_dims(const Cg *c, int t, const PlanSharding *sh, int64_t *local);
const char *cg_shape(const Cg *c, int t, const PlanSharding *sh);
int cg_chunk_of_stage(const Cg *c, int stage);                 /* local chunk index */
int cg_stage_pp(const Cg *c, int stage);

/* cg_sched.c */
void cg_schedule(Cg *c, CgRankProg *r);
void cg_check_deadlock(Cg *c);

/* cg_bucket.c: the gradient buckets of a lowered rank */
void cg_buckets(Cg *c, CgRankProg *r);
int64_t cg_bucket_elems(const Cg *c); /* target size of a bucket */

/* cg_mem.c: do fp32 masters alias the parameters (the CPU target, whose
 * weights are fp32)? The cost model's ptdc stack says the same
 * (master_aliases). */
bool cg_master_aliases(const Cg *c);

/* cg_lower.c */
void cg_lower(Cg *c, CgRankProg *r);
/* cg_buf.c */
int cg_buf_new(Cg *c, CgRankProg *r, CgBufKind kind, CgType type, int64_t numel, int tensor,
               const char *pre, const char *suf, const char *comment);

/* cg_call.c: statements, their arguments and sizes */
#define CG_ARGS(...) ((const CgArg[]){__VA_ARGS__}), (int)(sizeof((const CgArg[]){__VA_ARGS__}) / sizeof(CgArg))
void cg_call(Cg *c, CgOp *op, int piece, uint8_t guard, CgCallee fn, const CgArg *args, int nargs);
void cg_comment(Cg *c, CgOp *op, int piece, const char *text);
CgArg cg_a_buf(int buf);
CgArg cg_a_buf_at(int buf, int comm, CgSize at);  /* buf + rank in g_comm[comm] * at */
CgArg cg_a_bufs(Cg *c, const int *bufs, int n);
CgArg cg_a_size(CgSize s);
CgArg cg_a_bytes(CgSize s, CgType t);             /* s * sizeof(t) */
CgArg cg_a_int(const char *name, int64_t v, const char *what);
CgArg cg_a_bool(bool b);
CgArg cg_a_flt(Cg *c, double v);
CgArg cg_a_comm(int mask);
CgArg cg_a_coord(int axis, CgSize s);             /* axis -1: 0 */
/* This rank's offset along dim d of local size s, d split over the axes
 * of sh (nested: outer-major in sh's order), 0 where none splits it. */
CgArg cg_a_coord_of(const PlanSharding *sh, int d, CgSize s);
CgArg cg_a_mesh(int axis);
CgArg cg_a_axis(int axis);
CgArg cg_a_sym(const char *text);
/* Sizes: dims [from, to) of tensor t, local sizes by dim id (local_of) or
 * under sharding sh; the numel of t under sh; a named scalar; a / b (b's
 * dims taken out of a's: rows = numel / cols). */
CgSize cg_sz_dims(const Cg *c, int t, const int64_t *local_of, int from, int to);
CgSize cg_sz_sh(const Cg *c, int t, const PlanSharding *sh, int from, int to);
CgSize cg_sz_numel(const Cg *c, int t, const PlanSharding *sh);
CgSize cg_sz_named(const char *name, int64_t v, const char *what);
CgSize cg_sz_div(CgSize a, CgSize b);
/* cg_tpchunk.c: under the plan's tp_overlap, op's gathers and the GEMMs
 * reading them, and forward GEMMs and the reduce-scatters of their
 * products, fused into chunked calls. */
void cg_tp_chunk(Cg *c, CgRankProg *r, CgOp *op);
/* f(ctx, id) for every buffer a statement names, in printed order. */
void cg_stmt_bufs(const CgStmt *s, void (*f)(void *, int), void *ctx);
/* Whether two statements print alike once their buffers are named by
 * same(ctx, a, b). */
bool cg_stmt_eq(const CgStmt *a, const CgStmt *b, bool (*same)(void *, int, int), void *ctx);

/* cg_text.c: the named constants of one function group (a piece kind, a
 * stage): printing a statement names its sizes there. */
typedef struct CgConst {
    const char *name, *what;
    int64_t v;
    int order;                             /* printed by it: a dim's id, scalars last */
} CgConst;
typedef struct CgConsts {
    const char *prefix;                    /* "LAYER_" */
    VEC(CgConst) v;
} CgConsts;
char *cg_stmt_text(Cg *c, const CgStmt *s, CgConsts *k, const char *(*bufname)(void *, int), void *ctx);
void cg_consts_print(const CgConsts *k, FILE *f);

/* cg_kernel.c: the kernel call of one node, given its buffers. */
typedef struct CgArgs {
    CgArg in[IR_MAX_IN];         /* buffers, or a float constant (the seed, 1.0f) */
    CgArg out[IR_MAX_OUT];       /* buffers, or g_loss */
    bool accumulate;             /* MATMUL / REDUCE_SUM: add into the output */
    bool grad_out;               /* MATMUL / REDUCE_SUM: the output is an rt_grad buffer */
    bool has_addend, has_sum;
    bool recompute;              /* a rerun in backward (ROUTE: its regularisers' value counted
                                    once, by the forward pass) */
    CgArg addend;                /* RMSNORM_BWD / LAYERNORM_BWD: dres, added into dx */
    CgArg sum_of[2];             /* RMSNORM, LAYERNORM: the residual add's operands; the same
                                    call writes their sum into in[0] first
                                    (rt_add_rmsnorm_fwd, rt_add_layernorm_fwd) */
    int wpart;                   /* MOE_BWD under ZB-H1: 0 whole, 1 its B (rt_moe_act_bwd_b),
                                    2 its W (rt_moe_act_bwd_w) */
    CgArg wslot;                 /* wpart: the W slot (cg_moe_wslot's elements) */
} CgArgs;
void cg_kernel(Cg *c, CgOp *op, int piece, const IrNode *n, const CgArgs *a);
void cg_kernel_batch(Cg *c, CgOp *op, int piece, const IrNode *const *n, const CgArgs *a, int count);
bool cg_kernel_accumulates(const IrNode *n, int j); /* output j always accumulates (dw, db, dtable): an rt_grad */
/* Whether MATMUL n (forward or backward) runs in FP8: its forward GEMM is
 * one plan_gemm_precision puts in the plan's FP8 format (the cost model's
 * rule). Such GEMMs run one call each (cg_matmul_fp8), never batched. */
bool cg_gemm_fp8(const Cg *c, const IrNode *n);
int cg_route_index(const IrGraph *g, const IrNode *n);
/* The elements of MOE_BWD n's W slot under ZB-H1 (plan_moe_wslot_numel). */
int64_t cg_moe_wslot(Cg *c, CgOp *op, int piece, const IrNode *n); /* the row of cg_routes[] (model.c) a route or its backward passes */

/* cg_mem.c */
void cg_memplan(Cg *c, CgRankProg *r);

/* cg_print.c */
bool cg_print_model(Cg *c, FILE *h, FILE *f);

/* cg_hf.c: decide c->hf from the graph, write DIR/hf_config.json when the
 * model states a config (checked exact by cg_hf_check), else say why in a
 * note; false only when the file cannot be written. */
bool cg_hf_config(Cg *c, const char *dir);
const char *cg_hf_json(Cg *c, const char *torch_dtype); /* config.json's text */
void cg_hf_print(const Cg *c, FILE *f);                  /* model.c's tables */
/* cg_hf_check.c: why `ptdc import-hf` of the config at path is not this
 * model, or NULL. */
const char *cg_hf_check(Cg *c, const char *path);

/* cg_emit.c: the fixed trainer sources (embedded at build time by
 * embed.cmake): names and contents, NULL-terminated, in the same order */
extern const char *const cg_trainer_names[], *const cg_trainer_texts[];

/* helpers (cg_analyse.c) */
const char *cg_fmt(Cg *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cg_names.c: names in generated code */
const char *cg_ident(Cg *c, const char *s); /* a C identifier from a tensor name */
const char *cg_short_name(const Cg *c, int t); /* without its layer: "layers.3.x.1" -> "x.1" */

#endif
