/* model_abi.h: the contract between the two halves of a training program,
 * written once: what a generated model (model.h, model.c, printed as text by
 * ptdc's codegen) gives the fixed trainer (trainer.h, train_*.c).
 *
 * Both sides compile against this header. The trainer includes it through
 * trainer.h, after rt.h and before model.h; ptdc's codegen includes it
 * through codegen/cg.h, without the runtime, so the enums, structs and field
 * order it prints are the ones declared here: codegen/cg_print.c checks the
 * order of the fields it prints positionally with _Static_assert, so a
 * change here breaks ptdc's build rather than the programs it generates.
 * Standalone: it includes neither rt.h nor model.h. Common subset of C11 and
 * C++ (nvcc compiles model.c and the trainer as CUDA C++).
 *
 * model.h must define (cg_print.c, print_header; trainer.h checks each):
 *   CFG_<NAME>       each model constant after overrides, as the .mdl names it
 *   CG_MODEL         the model's name (a string)
 *   CG_WORLD         ranks: CG_PP x CG_DEVICES
 *   CG_PP            pipeline ranks
 *   CG_DEVICES       ranks per pipeline rank: the mesh, CG_MESH0 x CG_MESH1 x CG_MESH2
 *   CG_NAXES         mesh axes used (1 or 2)
 *   CG_MESH0, CG_MESH1, CG_MESH2   the mesh's sizes (axis 2 the innermost; 1 past CG_NAXES)
 *   CG_AXIS0, CG_AXIS1, CG_AXIS2   their roles, as strings ("dp", "cp", "tp")
 *   CG_CP            context-parallel ranks (1: none)
 *   CG_CP_BALANCED   1: the sequence's rows are in the load-balanced order (docs/context.md)
 *   CG_CP_AXIS       the context-parallel mesh axis, -1 without
 *   CG_NUM_MICRO     micro-batches per step
 *   CG_MB_SEQS       sequences per micro-batch, whole mesh
 *   CG_GLOBAL_BATCH  sequences per step
 *   CG_SEQ           tokens per sequence
 *   CG_VOCAB         the cross-entropy's classes
 *   CG_ZERO          ZeRO stage (0 to 3)
 *   CG_NTIED         tied groups (cg_tied_mask's length)
 *   CG_MASTER_ALIAS  1: the fp32 masters are the parameters' own blocks
 *   CG_LOSS_PP       the pipeline rank computing the loss
 *   CG_LOSS_MASK     mesh axes (bit a) along which the loss is replicated
 *   CG_PLAN          the plan in words (a string)
 *   CG_PLAN_HASH     a fingerprint of the checkpoint layout (16 hex digits)
 * and route rt_matmul, rt_matmul_grad, rt_matmul_batch, rt_matmul_grad_batch
 * to the trainer's cg_matmul* (trainer.h), which time them on request.
 *
 * model.c must define (cg_print.c, cg_hf.c), besides the stage functions and
 * tables its CgRank entries point to:
 *   const CgRank cg_ranks[CG_PP];                 every pipeline rank's program
 *   const unsigned long long cg_tied_mask[];      CG_NTIED entries (one 0 when none)
 *   const CgHfKey cg_hf_config[]; const int cg_hf_nkeys;
 *   const char *const cg_hf_refused, *const cg_hf_prefix; const int cg_hf_prefixed;
 * What model.c calls in return (g_comm, cg_recv, cg_grad_ready, ...) is the
 * trainer's side, declared in trainer.h. */
#ifndef PTDC_MODEL_ABI_H
#define PTDC_MODEL_ABI_H

#include <stdint.h>

#ifndef PTDC_RT_H
/* Without the runtime (ptdc's codegen, which needs the names and the order
 * of the fields, never their values): opaque element types. The trainer
 * includes rt.h first and gets the runtime's. */
typedef struct CgOpaqueAct rt_act;
typedef float rt_grad;
#endif

enum { CG_MAX_RANK = 6, CG_MAX_CHUNKS = 16 };
typedef enum { CG_ACT, CG_F32, CG_I32, CG_NTYPES } CgType; /* arenas: rt_act, float, int32_t */
enum { CG_MEM_PARAM, CG_MEM_GRAD, CG_MEM_OPT, CG_MEM_ACT, CG_MEM_WS, CG_MEM_N }; /* plan rows */
enum { CG_TOKENS, CG_TARGETS };                                                 /* inputs */

/* One trained parameter as one pipeline rank holds it. Sizes are local: dim
 * i is split over the mesh axes in the mask split_axes[i] (bit a: axis a),
 * divided by their sizes' product, nested in axis order (the lower axis
 * outer: the experts over dp x tp, EP rank = dp rank x tp + tp rank).
 * model.c prints the fields up to nready; the bind function sets the rest. */
typedef struct CgParam {
    const char *name;         /* IR name, e.g. "layers.0.wq" */
    const char *hf_name;      /* Hugging Face tensor, NULL: exported under `name` */
    int hf_transposed, hf_part, hf_nparts;
    int hf_interleaved;       /* the parts alternate along HF's last dim (GPT-OSS's gate_up_proj) */
    int rank;
    int64_t global[CG_MAX_RANK];
    int split_axes[CG_MAX_RANK];
    int hf_split;             /* HF 2-D view: dims [0, hf_split) form its rows (0: 1-D; -1:
                                 its own shape, GPT-OSS's stacked experts) */
    int init;                 /* RT_INIT_* */
    double std;
    int decay;                /* AdamW weight decay applies (matrices) */
    int64_t numel;            /* local elements */
    int pmask;                /* mesh axes (bit a) its gradient is summed over each step */
    int zshard;               /* optimizer state (ZeRO >= 1) flat-sharded over pmask */
    int64_t shard;            /* elements per shard (numel when not sharded) */
    int norm_mask;            /* axes along which the reduced gradient is replicated */
    int tied;                 /* tied group (the same weight on several pipeline ranks), -1 */
    int primary;              /* this copy counts in the norm, exports and checkpoints */
    int bucket;               /* gradient bucket (reduced once complete), -1: at the step's end */
    int nready;               /* cg_grad_ready calls per step completing it (its chunks) */
    /* bound by the model's bind function */
    rt_act *param;            /* full local tensor (ZeRO-1/2: padded to whole shards), or the
                                 ZeRO-3 shard */
    rt_grad *grad;            /* fp32 accumulator: full, or the shard under ZeRO-2/3 */
    rt_grad *grad_shard;      /* ZeRO-1: reduce-scatter target, else NULL */
    float *master, *m, *v;    /* fp32 master weights and AdamW moments (shard under ZeRO) */
} CgParam;

/* One step of a pipeline rank's schedule. (No struct tag: codegen's own
 * schedule entries are `struct CgSchedOp`, codegen/cg.h.) bwd: 0 forward,
 * 1 backward, 2 a split schedule's (ZB-H1's) deferred weight gradients. */
typedef struct {
    int8_t bwd, chunk;
    int16_t mb;
} CgSchedOp;
enum { CG_OP_FWD, CG_OP_BWD, CG_OP_WGRAD };

/* Everything one pipeline rank runs. */
typedef struct CgRank {
    int nchunks;
    void (*forward[CG_MAX_CHUNKS])(int mb, int slot);
    void (*backward[CG_MAX_CHUNKS])(int mb, int slot);
    void (*wgrad[CG_MAX_CHUNKS])(int mb, int slot);   /* split schedules (ZB-H1), else NULL */
    int nslots[CG_MAX_CHUNKS];
    const CgSchedOp *sched;
    int nsched;
    CgParam *params;
    int nparams;
    const int *bucket_params;           /* gradient buckets: indices into params, bucket after */
    const int *bucket_start;            /* bucket; bucket b is [start[b], start[b + 1]) */
    int nbuckets;
    void (*bind)(rt_act *A, float *F, int32_t *I);
    void (*wait_sends)(void);
    int64_t total[CG_NTYPES];           /* arena sizes in elements */
    int64_t mem[CG_MEM_N][CG_NTYPES];   /* the plan by category (elements) */
} CgRank;

/* The model's Hugging Face config.json for --export-hf DIR (codegen/cg_hf.c
 * decides it from the graph at compile time): cg_hf_nkeys keys, sorted, each
 * value JSON text, NULL for torch_dtype (the export's). A model ptdc cannot
 * state exactly as a Hugging Face architecture has none, and cg_hf_refused
 * says why. An imported tensor may carry the architecture's base_model_prefix
 * or not (cg_hf_prefix, NULL: none; cg_hf_prefixed: the hf names here do). */
typedef struct CgHfKey {
    const char *key, *value;
} CgHfKey;

/* model.c's definitions, declared for the program (after rt.h; ptdc's
 * codegen prints them, and has a function of its own named cg_hf_config). */
#ifdef PTDC_RT_H
extern const CgRank cg_ranks[];                 /* [CG_PP] */
extern const unsigned long long cg_tied_mask[]; /* pipeline ranks of each tied group (bit per rank) */
extern const CgHfKey cg_hf_config[];
extern const int cg_hf_nkeys;
extern const char *const cg_hf_refused;
extern const char *const cg_hf_prefix;
extern const int cg_hf_prefixed;
#endif

#endif
