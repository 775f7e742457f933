/* cg.h: internals of codegen/ shared by its files (not an export; see
 * codegen.h). The flow, for each pipeline rank:
 *   cg_plan.c    what the plan implies for every tensor: shardings, stages,
 *                which activations are kept for backward, recomputation,
 *                pipeline boundaries, how each parameter is stored and reduced
 *   cg_sched.c   the micro-batch schedule (1F1B, interleaved), buffer slots,
 *                and a check that the send/receive pattern cannot deadlock
 *                (host-blocking MPI, and CUDA's per-direction streams)
 *   cg_lower.c   each stage chunk's forward and backward as a list of C
 *                statements over named buffers (kernels from cg_kernel.c,
 *                collectives from pass_reshard)
 *   cg_bucket.c  gradient buckets: which parameters are reduced together, in
 *                the order the backward completes them
 *   cg_names.c   tensor names as C identifiers (used by cg_lower.c and cg_print.c)
 *   cg_mem.c     the static memory plan: offsets of every buffer
 *   cg_print.c   model.h and model.c
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
    int64_t stride;      /* CG_B_SLOT: elements between slot copies */
} CgBuf;

/* One C statement. Buffers appear in `text` as $<id>; cg_print resolves them
 * to a struct field or a local. */
typedef struct CgStmt {
    int piece; /* IR piece whose function holds it; -1: the stage function */
    char *text;
} CgStmt;

typedef struct CgOp {
    int chunk, stage;
    bool bwd;
    VEC(CgStmt) st;
} CgOp;

/* A received or sent boundary tensor of a chunk, or a request field. */
typedef struct CgIo {
    int tensor;
    int buf;             /* CG_B_SLOT buffer sent from / received into */
    const char *req;     /* request field name for sends ("req_x"), NULL for receives */
} CgIo;

/* ----------------------------------------------------- per-parameter plan */
typedef struct CgParamPlan {
    int tensor;
    PassSharding store;  /* storage: dims of its first consumer's need, never partial */
    uint8_t pmask;       /* axes its gradient is partial over, reduced once per step */
    bool zshard;         /* ZeRO >= 1 and pmask != 0: optimizer state flat-sharded over pmask */
    int64_t numel;       /* local elements in `store` */
    int64_t shard;       /* elements per flat shard (numel padded to a multiple of the group) */
    int64_t padded;      /* shard * group size (numel when not sharded) */
    int group;           /* ranks in the pmask group */
    uint64_t ppmask;     /* pipeline ranks holding it (bit per pp rank, PASS_MAX_PP) */
    int primary;         /* the first of them */
    int tied;            /* tied group index (several pp ranks), else -1 */
    int hf_split;        /* HF view: dims [0, hf_split) are its first dim (2-D), 0: 1-D */
} CgParamPlan;

/* ----------------------------------------------------------- a rank */
typedef struct CgRankProg {
    int pp_rank;
    int nchunks;
    int stage[16];                    /* global stage of local chunk j */
    int nslots[16];
    CgOp *ops;                        /* [2 * nchunks]: forward j at 2j, backward at 2j+1 */
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
    const PassPlan *p;
    const CgOptions *o;
    IrArena *arena;
    PassMesh mesh;
    int naxes;
    const char *axis_name[PASS_MAX_AXES];
    int64_t *dim;                     /* global sizes; batch = the micro-batch (mb_seqs) */
    int64_t total_rows;               /* tokens per optimizer step */
    int64_t vocab;                    /* the cross-entropy's classes */
    /* stages */
    int *piece_stage;                 /* [npieces] */
    int *node_stage;                  /* [nnodes] (backward: their forward's) */
    PassRecompute *piece_recompute;
    /* forward tensors */
    PassSharding *prod;               /* [ntensors] as produced (outputs of forward nodes) */
    PassSharding *canon;              /* [ntensors] after the reductions of the first consumer */
    int *last_stage;                  /* [ntensors] last stage with a forward consumer, -1 */
    bool *recomputed;                 /* [nnodes] forward node in its piece's recompute set */
    bool *saved;                      /* [ntensors] kept per micro-batch (canonical form) */
    bool *is_root;                    /* [ntensors] input of a recompute set from outside it */
    /* gradients */
    bool *has_grad;                   /* [ntensors] activation whose gradient is read */
    PassSharding *gsh;                /* [ntensors] sharding of the complete gradient */
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

/* cg_plan.c */
bool cg_analyse(Cg *c);
PassSharding cg_need(const Cg *c, const IrNode *n, int i);     /* input i's sharding */
PassSharding cg_made(const Cg *c, const IrNode *n, int j);     /* output j's sharding */
const PassStrategy *cg_strategy(const Cg *c, const IrNode *n);
int64_t cg_numel(const Cg *c, int t, const PassSharding *sh);
void cg_local_dims(const Cg *c, int t, const PassSharding *sh, int64_t *local);
const char *cg_shape(const Cg *c, int t, const PassSharding *sh);
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
int cg_buf_new(Cg *c, CgRankProg *r, CgBufKind kind, CgType type, int64_t numel, int tensor,
               const char *pre, const char *suf, const char *comment);
void cg_stmt(Cg *c, CgOp *op, int piece, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* cg_kernel.c: the kernel call of one node, given its buffers as "$id" strings. */
typedef struct CgArgs {
    const char *in[IR_MAX_IN];   /* "$12", or a literal such as "1.0f" */
    const char *out[IR_MAX_OUT];
    bool accumulate;             /* MATMUL / REDUCE_SUM: add into the output */
    bool grad_out;               /* MATMUL / REDUCE_SUM: the output is an rt_grad buffer */
    const char *addend;          /* RMSNORM_BWD / LAYERNORM_BWD: dres, added into dx; NULL */
    const char *sum_of[2];       /* RMSNORM, LAYERNORM: the residual add's operands; the same
                                    call writes their sum into in[0] first
                                    (rt_add_rmsnorm_fwd, rt_add_layernorm_fwd); NULL */
} CgArgs;
char *cg_kernel(Cg *c, const IrNode *n, const CgArgs *a);
char *cg_kernel_batch(Cg *c, const IrNode *const *n, const CgArgs *a, int count);
bool cg_kernel_accumulates(const IrNode *n, int j); /* output j always accumulates (dw, db, dtable): an rt_grad */

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

/* helpers (cg_plan.c) */
const char *cg_fmt(Cg *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cg_names.c: names in generated code */
const char *cg_ident(Cg *c, const char *s); /* a C identifier from a tensor name */
const char *cg_short_name(const Cg *c, int t); /* without its layer: "layers.3.x.1" -> "x.1" */

#endif
