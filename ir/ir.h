/* ir.h: exports of the ir/ layer, the bottom of ptdc.
 *
 * The IR is a graph of operators over tensors whose dimensions are *named*
 * (batch, seq, d_model, n_heads, ...). Every later pass reasons in those
 * names: the sharding passes split a named dim over a mesh axis, the cost
 * model multiplies named sizes, codegen prints them in shape comments.
 *
 * The graph is fully unrolled: `repeat n_layers { ... }` becomes n_layers
 * copies of the body, each a *piece* (the unit the pipeline pass cuts at).
 * Node `tmpl` numbers make copy i's node k correspond to copy j's node k, so
 * passes can solve one layer and reuse the answer for every layer.
 *
 * This header also holds the utilities every layer uses: the arena, growable
 * vectors, and diagnostics (user errors with file:line:col and a caret).
 */
#ifndef PTDC_IR_H
#define PTDC_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PTDC_VERSION "0.1.0"

/* ------------------------------------------------------------------ arena.c */
/* One arena per compilation: everything the IR and the passes allocate lives
 * here and is freed at once. Allocation failure is fatal (xmalloc style). */
typedef struct IrArena IrArena;

IrArena *ir_arena_new(void);
void ir_arena_free(IrArena *a);
void *ir_alloc(IrArena *a, size_t n);                 /* zeroed, 16-aligned */
char *ir_strdup(IrArena *a, const char *s);
char *ir_strndup(IrArena *a, const char *s, size_t n);
char *ir_sprintf(IrArena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
size_t ir_arena_bytes(const IrArena *a);              /* bytes handed out */

/* Heap helpers for buffers that outlive or escape an arena; die on failure. */
void *ir_xmalloc(size_t n);
void *ir_xcalloc(size_t n, size_t size);
void *ir_xrealloc(void *p, size_t n);
char *ir_xstrdup(const char *s);

/* Internal invariant broken: print "ptdc: internal error: ..." and abort.
 * Never for user mistakes (those go through ir_error and exit 1). */
_Noreturn void ir_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Growable vector on the heap: VEC(int) v = {0}; vec_push(v, 3); vec_free(v). */
#define VEC(T) struct { T *v; int n, cap; }
#define vec_push(vec, x)                                                           \
    do {                                                                           \
        if ((vec).n == (vec).cap) {                                                \
            (vec).cap = (vec).cap ? 2 * (vec).cap : 8;                             \
            (vec).v = ir_xrealloc((vec).v, (size_t)(vec).cap * sizeof *(vec).v);   \
        }                                                                          \
        (vec).v[(vec).n++] = (x);                                                  \
    } while (0)
#define vec_free(vec) (free((vec).v), (vec).v = NULL, (vec).n = (vec).cap = 0)

/* String-keyed map (open addressing, heap backed): names to small ints. */
typedef struct IrMap {
    const char **keys;
    int *vals;
    int n, cap;
} IrMap;
void ir_map_put(IrMap *m, const char *key, int val); /* key is not copied */
bool ir_map_get(const IrMap *m, const char *key, int *val);
void ir_map_free(IrMap *m);

/* --------------------------------------------------------------------- fs.c */
/* mkdir -p; reports a failure with ir_error. */
bool ir_mkdirs(const char *dir);
/* mkdir -p of the directory that will hold `path`. */
bool ir_mkdirs_parent(const char *path);
/* An output directory written whole or not at all (-o DIR). Its files are
 * written into `tmp`, which lies on the file system where they will end up:
 * inside DIR when DIR exists (it may be a mount point), else next to it
 * ("DIR.tmp-PID", renamed to DIR at the end). begin creates DIR's parents
 * and tmp; commit moves `names` into DIR and removes tmp; abort removes
 * both. Each reports failures with ir_error and frees o's strings. */
typedef struct IrOutDir {
    char *dir;    /* DIR, without trailing slashes */
    char *tmp;    /* where to write the files */
    bool inside;  /* tmp is DIR/.ptdc-tmp-PID */
} IrOutDir;
bool ir_outdir_begin(IrOutDir *o, const char *dir);
bool ir_outdir_commit(IrOutDir *o, const char *const *names, int n);
void ir_outdir_abort(IrOutDir *o, const char *const *names, int n);
/* Whether ptdc may write `names` into DIR (issue 36): DIR missing, or
 * holding ptdc's marker (.ptdc-output, ir_outdir_mark), or none of them;
 * and none of them is one of `inputs` (the same file). Says why not. */
bool ir_outdir_check(const char *dir, const char *const *names, int n, const char *const *inputs,
                     int ninputs);
/* Marks DIR as ptdc's output, before its files land (under DIR's lock);
 * *had says whether it was marked already. ir_outdir_unmark takes a new
 * mark back when the write fails, so a failure leaves nothing. */
bool ir_outdir_mark(const char *dir, bool *had);
void ir_outdir_unmark(const char *dir);
/* Holds DIR (which exists) against other ptdc processes writing it, until
 * ir_outdir_unlock: a second one waits, then replaces the files whole. */
int ir_outdir_lock(const char *dir);
void ir_outdir_unlock(int fd);

/* ------------------------------------------------------------------- diag.c */
/* A position in a source file. file is NULL for things without a source
 * (command-line flags, generated nodes). Lines and columns start at 1. */
typedef struct IrLoc {
    const char *file;
    int line, col;
} IrLoc;

#define IR_NOLOC ((IrLoc){NULL, 0, 0})

/* Register a source text so diagnostics can quote the offending line. The text
 * must outlive diagnostics (the frontend keeps files in the arena). */
void ir_source_add(const char *path, const char *text, size_t len);

/* "file:line:col: error: msg", the source line, a caret under col. Without a
 * location: "ptdc: error: msg". Counts errors; stops printing after 50. */
void ir_error(IrLoc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ir_verror(IrLoc loc, const char *fmt, va_list ap);
void ir_warning(IrLoc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ir_note(IrLoc loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ir_error_count(void);
/* Forget sources and counts (the fuzzer and tests compile many times). */
void ir_diag_reset(void);
/* Where diagnostics go; stderr by default (NULL). Returns the stream they
 * went to before, so a caller can silence them and put them back. */
FILE *ir_diag_set_stream(FILE *f);

/* (fs.c) Open an existing file to read (model, cluster file): anything but
 * a regular file (a FIFO, a device, a directory) is refused with an error
 * at `from` naming `what` (e.g. "cluster file"; NULL: none) and the path,
 * without blocking on it. */
FILE *ir_open_regular(const char *path, const char *what, IrLoc from);

/* ------------------------------------------------------------------- the IR */
#define IR_MAX_RANK 6   /* dims per tensor */
#define IR_MAX_IN 8     /* MOE_BWD reads h, gates, three weights, two biases and dy */
#define IR_MAX_OUT 7    /* MOE_BWD writes the gradients of its seven inputs */

typedef enum {
#define OP(ID, name, nin, nout, flags, saves) IR_OP_##ID,
#include "ops.def"
#undef OP
    IR_NUM_OPS
} IrOp;

enum {
    IR_OPF_FWD = 1 << 0,      /* written by users in .mdl */
    IR_OPF_BWD = 1 << 1,      /* created by autodiff */
    IR_OPF_ELEMWISE = 1 << 2, /* pointwise over its output */
    IR_OPF_LINEAR = 1 << 3,   /* partial-sum inputs give a partial-sum output */
    IR_OPF_GRAD_IN_PLACE = 1 << 4, /* backward may write input 0's gradient over input 0 */
    IR_OPF_GRAD_SUM = 1 << 5, /* backward adds its inputs' gradients into their running sums */
    IR_OPF_OPT_LAST = 1 << 6, /* its last input may be absent (nin - 1 inputs); a BWD op's last
                                 output, that input's gradient, goes with it (ir_op_arity_ok) */
    IR_OPF_EXPERTS = 1 << 7,  /* inputs 2.. are experts' weights then biases, as many as the
                                 act's row of moe_acts.def says (ir_moe_arity); nin is the most.
                                 A BWD op reads dy after them and writes one gradient each */
};

/* Whether a node of op with attributes at (NULL: the defaults) may have
 * nin inputs and nout outputs: the table's, one of each fewer under
 * IR_OPF_OPT_LAST (outputs only for BWD ops), or the act's under
 * IR_OPF_EXPERTS. */
struct IrAttrs;
bool ir_op_arity_ok(int op, int nin, int nout, const struct IrAttrs *at);

/* The experts' activations of `moe` (ir/moe_acts.def). */
typedef enum {
#define MOE_ACT(ID, name, gated, clamped) IR_MOE_##ID,
#include "moe_acts.def"
#undef MOE_ACT
    IR_NMOE_ACTS
} IrMoeAct;
typedef struct IrMoeActInfo {
    const char *name;
    bool gated;   /* a gate projection besides the up one (three weights, else two) */
    bool clamped; /* the pre-activations clamped before the nonlinearity */
} IrMoeActInfo;
extern const IrMoeActInfo ir_moe_acts[IR_NMOE_ACTS];
/* A moe node's forward inputs (h, gates, then the weights, then the
 * biases when bias): 2 + 3 or 2 + 2 weights, plus 2 or 1 biases. */
int ir_moe_arity(int act, bool bias);
/* Where each of a MOE or MOE_BWD node's expert tensors is among its inputs
 * (its gradient: the same index among MOE_BWD's outputs), -1 when absent. */
typedef struct IrMoeSlots {
    int w_gate, w_up, w_down; /* [expert, d_model, d_expert] x2, [expert, d_expert, d_model] */
    int b_gate, b_up;         /* [expert, d_expert] */
    int dy;                   /* MOE_BWD: the incoming gradient; MOE: -1 */
} IrMoeSlots;
struct IrNode;
IrMoeSlots ir_moe_slots(const struct IrNode *n);

/* Input i's bit is 1 << i (up to IR_MAX_IN), output j's 1 << (8 + j). */
enum {
    IR_SAVE_IN0 = 1 << 0, IR_SAVE_IN1 = 1 << 1, IR_SAVE_IN2 = 1 << 2,
    IR_SAVE_IN3 = 1 << 3, IR_SAVE_IN4 = 1 << 4,
    IR_SAVE_OUT0 = 1 << 8, IR_SAVE_OUT1 = 1 << 9, IR_SAVE_OUT2 = 1 << 10,
};
#define IR_SAVE_IN(i) (1 << (i))
#define IR_SAVE_OUT(i) (1 << (8 + (i)))

typedef struct IrOpInfo {
    const char *name;
    int nin, nout;
    unsigned flags;
    unsigned saves;
} IrOpInfo;

extern const IrOpInfo ir_ops[IR_NUM_OPS];
/* Operator by its .mdl name, or -1. */
int ir_op_lookup(const char *name);

typedef enum {
    IR_F32,  /* 4 bytes */
    IR_BF16, /* 2 bytes: the training dtype of weights and activations */
    IR_I32,  /* 4 bytes: token ids */
} IrDtype;

int ir_dtype_bytes(IrDtype t);
const char *ir_dtype_name(IrDtype t);

typedef enum {
    IR_INPUT, /* fed by the data loader each micro-batch */
    IR_PARAM, /* trained weight */
    IR_ACT,   /* forward activation (including saved statistics) */
    IR_LOSS,  /* the scalar the program minimises */
    IR_GRAD,  /* gradient of another tensor, made by autodiff */
} IrRole;

typedef enum {
    IR_INIT_NONE,
    IR_INIT_NORMAL, /* N(0, init_std^2) */
    IR_INIT_ZEROS,
    IR_INIT_ONES,
} IrInit;

/* A named dimension. Sizes are global (unsharded). The batch dim is special:
 * its size is chosen by the planner (the micro-batch), so its size here is 0
 * and passes supply sizes through an int64_t dim_size[] vector. */
typedef struct IrDim {
    const char *name;
    int64_t size;
    IrLoc loc;
} IrDim;

typedef struct IrTensor {
    int id;
    const char *name;    /* unique in the graph: "layers.3.wq", "layers.3.h" */
    const char *base;    /* name in the source: "wq", "h" */
    IrDtype dtype;
    IrRole role;
    int rank;            /* 0 for the scalar loss */
    int dim[IR_MAX_RANK];
    int producer;        /* node id, -1 for inputs and params */
    int piece, layer;    /* where it was declared (see IrNode) */
    IrLoc loc;
    /* parameters */
    IrInit init;
    double init_std;
    const char *hf_name; /* Hugging Face name, "{layer}" already substituted; NULL if none */
    bool hf_transposed;  /* HF stores it [out, in]: transpose when exchanging */
    int hf_part, hf_nparts; /* this param is part hf_part of hf_nparts along HF's last dim (GPT-2 c_attn) */
    bool hf_interleaved;    /* ... the parts alternating element by element (GPT-OSS's gate_up_proj) */
    /* gradients */
    int grad_of;         /* for IR_GRAD: the tensor it is the gradient of, else -1 */
} IrTensor;

/* ROPE frequency scaling (Hugging Face's rope_scaling). LLAMA3 is LLaMA-3.1's:
 * wavelengths longer than original_max_position / low_freq_factor are divided
 * by factor, shorter than original_max_position / high_freq_factor kept, and
 * those between interpolated (docs/language.md). */
typedef enum {
    IR_ROPE_PLAIN,  /* theta^(-2j/dim) unchanged */
    IR_ROPE_LLAMA3, /* rope_type "llama3" */
} IrRopeKind;

typedef struct IrRopeScaling {
    IrRopeKind kind;
    double factor, low_freq_factor, high_freq_factor;
    int64_t original_max_position;
} IrRopeScaling;

/* ROUTE's score function (docs/moe.md). */
typedef enum { IR_SCORE_SOFTMAX, IR_SCORE_SIGMOID } IrRouteScore;

/* ROUTE's attributes (docs/moe.md has the math). 0 means absent for scale
 * (1), groups and group_topk (no group limit), capacity (dropless), aux and
 * zloss (off). */
typedef struct IrRoute {
    int64_t topk;
    int score;           /* IrRouteScore */
    bool norm;           /* normalise the chosen weights to sum 1 */
    double scale;
    int64_t groups, group_topk;
    double capacity, aux, zloss;
} IrRoute;

/* Operator attributes; which fields an op uses is stated in ops.def comments
 * and checked by the verifier. */
typedef struct IrAttrs {
    double eps;          /* RMSNORM, LAYERNORM */
    int64_t group_dims;  /* RMSNORM: the weight's leading dims that index groups, each
                            normalised apart with weights of its own (Mamba-2's gated
                            norm, RMSNormGated group_size); 0: none */
    double theta;        /* ROPE base */
    IrRopeScaling rope;  /* ROPE scaling (kind IR_ROPE_PLAIN: none) */
    bool causal;         /* ATTENTION */
    int64_t window;      /* ATTENTION: sliding window, causal only: query i sees keys
                            j <= i with i - j < window; 0 = no window */
    int64_t at;          /* SLICE: offset of the slice in x's last dim */
    int dim[2];          /* ROPE: [0] position dim, [1] rotated dim; SOFTMAX: [0];
                            SLICE, CONCAT: [0] the result's last dim.
                            -1 asks for the default (ROPE: the graph's seq dim and
                            x's last dim; SOFTMAX: the last dim). */
    int ncontract;       /* MATMUL: contracted dims, shared by both inputs */
    int contract[IR_MAX_RANK];
    IrRoute route;       /* ROUTE */
    int moe_act;         /* MOE, MOE_BWD: IrMoeAct (0: swiglu) */
    int64_t shift;       /* SHIFT: positions along seq (by) */
    int shift_tail;      /* SHIFT: the last `shift` positions' value, 0 none (-1), 1 zero */
    double loss_weight;  /* CROSS_ENTROPY (and its BWD): the loss's weight in the objective;
                            0 stands for the default 1 (ir_loss_weight) */
} IrAttrs;

/* A cross-entropy's weight in the objective (attribute `weight`, default 1). */
static inline double ir_loss_weight(const IrAttrs *a) { return a->loss_weight > 0 ? a->loss_weight : 1.0; }

/* The attributes one by one (ir/attrs.def): IR_ATTR_<ID>, and for each the
 * op carrying it, its .mdl name, kind and flags. */
typedef enum {
#define ATTR(ID, op, name, kind, flags, field) IR_ATTR_##ID,
#include "attrs.def"
#undef ATTR
    IR_NATTRS
} IrAttrId;

typedef enum { IR_AK_NUM, IR_AK_BOOL, IR_AK_DIM, IR_AK_COUNT, IR_AK_WORD } IrAttrKind;
enum {
    IR_ATTRF_MDL = 1 << 0,   /* written in .mdl; else the shape rule sets it */
    IR_ATTRF_OMIT0 = 1 << 1, /* 0 means absent: not printed */
};

struct IrGraph;

typedef struct IrAttrInfo {
    IrOp op;
    const char *name;
    IrAttrKind kind;
    unsigned flags;
} IrAttrInfo;

extern const IrAttrInfo ir_attrs[IR_NATTRS];
/* An attribute's value as a number (a DIM its dim id, a BOOL 0/1, a WORD
 * its enum value), and setting one from such a number. */
double ir_attr_get(const IrAttrs *a, IrAttrId id);
void ir_attr_set(IrAttrs *a, IrAttrId id, double v);
/* The keywords of an IR_AK_WORD attribute (NULL-terminated; index = value),
 * or NULL for other kinds. */
const char *const *ir_attr_words(IrAttrId id);
/* Its value as --emit ir prints it ("1e-05", "seq", "true", "llama3") into
 * buf; the graph names DIM values. */
const char *ir_attr_str(const struct IrGraph *g, const IrAttrs *a, IrAttrId id, char *buf, size_t n);

typedef struct IrNode {
    int id;
    IrOp op;
    int nin, nout;
    int in[IR_MAX_IN];   /* tensor ids */
    int out[IR_MAX_OUT];
    IrAttrs attr;
    int piece;           /* index into IrGraph.pieces */
    int layer;           /* repeat iteration, -1 outside a repeat */
    int tmpl;            /* position within its piece: equal for corresponding nodes of every layer */
    const char *block;   /* enclosing `block NAME { }` ("attn", "mlp") or NULL */
    int fwd;             /* backward nodes: the forward node they differentiate; else -1 */
    IrLoc loc;
} IrNode;

/* A piece is a contiguous run of forward nodes: the code before the first
 * repeat, one iteration of a repeat, the code after. Pipeline stages are
 * contiguous runs of pieces. */
typedef struct IrPiece {
    const char *name;    /* "embedding", "layer 7", "head" */
    int first, count;    /* forward nodes [first, first + count) */
    int layer;           /* repeat iteration or -1 */
    int rep;             /* which kind of layer (0, 1, ...) or -1: pieces of one rep are
                          * alike (the same operators); a repeat is one rep, a pattern
                          * repeat one per block (docs/language.md) */
    int stmt;            /* which repeat statement (0, 1, ...) or -1; layer counts within it */
} IrPiece;

/* A config constant after overrides, kept for printing and codegen. */
typedef struct IrConst {
    const char *name;
    bool is_int;
    int64_t i;
    double f;
    IrLoc loc;
} IrConst;

typedef struct IrGraph {
    IrArena *arena;
    const char *name;    /* model name */
    const char *path;    /* file it came from */
    IrConst *consts; int nconsts;
    IrDim *dims; int ndims, capdims;
    IrTensor *tensors; int ntensors, captensors;
    IrNode *nodes; int nnodes, capnodes;
    IrPiece *pieces; int npieces, cappieces;
    int batch_dim;       /* id of the built-in batch dim */
    int seq_dim;         /* second dim of the first input: the sequence */
    int loss;            /* tensor id of the loss, -1 until set */
    int nfwd;            /* nodes [0, nfwd) are forward; autodiff appends after */
    int64_t global_batch;/* sequences per optimizer step (config global_batch) */
    /* builder cursor: where ir_node_add puts new nodes */
    int cur_layer, cur_rep, cur_stmt;
    const char *cur_block;
    IrMap names;         /* tensor name -> id (freed by ir_graph_free) */
} IrGraph;

/* ---------------------------------------------------------------- graph.c */
IrGraph *ir_graph_new(IrArena *a, const char *name, const char *path);
/* Free the graph's heap parts (its arena is the caller's). */
void ir_graph_free(IrGraph *g);
int ir_tensor_find(const IrGraph *g, const char *name); /* by unique name, or -1 */
/* Give a tensor the source name it is bound to ("h"); keeps names unique. */
void ir_tensor_rename(IrGraph *g, int t, const char *base);
/* Add a dim or return the existing one of that name (sizes must agree; the
 * caller reports a mismatch). */
int ir_dim_add(IrGraph *g, const char *name, int64_t size, IrLoc loc);
int ir_dim_find(const IrGraph *g, const char *name);
int ir_tensor_add(IrGraph *g, const char *base, IrDtype dt, IrRole role, int rank,
                  const int *dims, IrLoc loc);
/* Start a new piece for the nodes that follow. layer/rep as in IrPiece. */
void ir_piece_begin(IrGraph *g, const char *name, int layer, int rep);
/* The piece just begun is a layer of kind `rep` of repeat statement `stmt`
 * (a pattern repeat: one kind per block; ir_piece_begin makes them equal). */
void ir_piece_kind(IrGraph *g, int rep, int stmt);
/* Add a node whose output tensors already exist (autodiff, tests; ir_node_add
 * adds one with none, then runs its shape rule). */
int ir_node_add_raw(IrGraph *g, IrOp op, const int *in, int nin, const int *out, int nout,
                    const IrAttrs *attr, IrLoc loc);
void ir_const_add(IrGraph *g, const char *name, bool is_int, int64_t i, double f, IrLoc loc);
const IrConst *ir_const_find(const IrGraph *g, const char *name);

/* (shape.c) CONCAT's broadcast: how many leading dims of a its b lacks
 * (a run starting at *pos, a's position), or -1 when b is not a less a run. */
int ir_concat_bcast(const IrGraph *g, const IrNode *n, int *pos);
/* (shape.c) SSD's groups: how many of x's head dims B and C carry (node n
 * an ssd or ssd_bwd: B is input 3 of both). */
int ir_ssd_groups(const IrGraph *g, const IrNode *n);

/* Element counts and sizes. dim_size[d] gives each dim's size (use
 * ir_dim_sizes to fill it with the batch dim set to `batch`). */
void ir_dim_sizes(const IrGraph *g, int64_t batch, int64_t *dim_size);
int64_t ir_numel(const IrGraph *g, int t, const int64_t *dim_size);
int64_t ir_bytes(const IrGraph *g, int t, const int64_t *dim_size);
bool ir_tensor_has_dim(const IrGraph *g, int t, int dim);
/* Whether some input or output of node n carries dim (its loop runs over it). */
bool ir_node_has_dim(const IrGraph *g, const IrNode *n, int dim);
int ir_tensor_dim_pos(const IrGraph *g, int t, int dim); /* position or -1 */
/* Trained parameters (tied weights counted once). */
int64_t ir_param_count(const IrGraph *g);
/* Parameters a token uses: MoE experts count topk / n_experts (graph.c). */
int64_t ir_active_param_count(const IrGraph *g);
/* Parameters of MATMUL nodes (PaLM's N excludes embedding gathers); used for MFU. */
int64_t ir_matmul_param_count(const IrGraph *g);
/* Nodes consuming tensor t (forward graph), written to out (up to max); returns count. */
int ir_consumers(const IrGraph *g, int t, int *out, int max);
/* Whether t's gradient is written over t itself (the loss gradient over the
 * logits): t is an activation read by one forward node only, as input 0 of
 * an IR_OPF_GRAD_IN_PLACE op, and its producer's backward does not read it.
 * Codegen and the memory model both follow this. */
bool ir_grad_in_place(const IrGraph *g, int t);
/* ir_grad_in_place of every tensor into over[0..ntensors), in one pass over
 * the graph (the memory model asks for all of them on every candidate). */
void ir_grad_in_place_all(const IrGraph *g, bool *over);
/* "[batch, seq, d_model]" into buf. */
const char *ir_shape_str(const IrGraph *g, int t, char *buf, size_t n);

/* ---------------------------------------------------------------- shape.c */
/* The shape rule of each op (ir_shape_<ID>): checks inputs, fills attr fields it
 * derives (MATMUL's contracted dims), creates outputs. Called by ir_node_add. */
bool ir_shape_infer(IrGraph *g, IrNode *n);
/* Add a node; its outputs are created by the op's shape rule. On a
 * user error (dims that do not fit the op) it reports at loc and returns -1. */
int ir_node_add(IrGraph *g, IrOp op, const int *in, int nin, const IrAttrs *attr, IrLoc loc);

/* --------------------------------------------------------------- verify.c */
/* Check every invariant of the graph; print each violation to stderr prefixed
 * with the pass it follows. Returns true if the graph is well formed. */
bool ir_verify(const IrGraph *g, const char *after);

/* ---------------------------------------------------------------- print.c */
/* Stable text form (golden-tested): constants, dims, params, then nodes piece by piece. */
void ir_print(FILE *f, const IrGraph *g);
/* Short summary: model, dims, parameter count by piece kind, node counts. */
void ir_print_summary(FILE *f, const IrGraph *g);
/* 6738415616 -> "6,738,415,616" */
const char *ir_fmt_count(int64_t n, char *buf, size_t len);

#endif
