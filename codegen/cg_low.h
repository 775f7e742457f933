/* cg_low.h: lowering's state, shared by its files (private to them):
 *   cg_lower.c    the ops of a rank: slots, boundaries, forward and backward walks
 *   cg_reshard.c  buffers of values in a sharding, and the collectives between
 *   cg_fwd.c      forward nodes: plain, add+norm fused, sibling GEMMs batched;
 *                 recomputation
 *   cg_grad.c     gradient contributions: summed per sharding class, completed,
 *                 accumulated into parameters
 *   cg_bwd.c      backward nodes, weight-gradient GEMMs batched */
#ifndef PTDC_CG_LOW_H
#define PTDC_CG_LOW_H

#include "cg.h"

/* Tensor t in sharding sh is in buffer buf; priv: the op may overwrite it
 * (nothing else reads this form). */
typedef struct Avail {
    int t;
    PlanSharding sh;
    int buf;
    bool priv;
} Avail;

/* The running sum of an activation's gradient contributions in one sharding. */
typedef struct Class {
    PlanSharding sh;
    int buf;
    bool priv;
} Class;

typedef struct GradState {
    VEC(Class) cls;
    int recv;   /* gradient received from the next stage, -1 */
    int send;   /* slot buffer the complete gradient is sent from, -1 */
    int final;  /* complete gradient (gsh), -1 until finished */
    int last;   /* backward node making the op's last contribution, -1 */
} GradState;

/* A weight-gradient GEMM lowered but not yet issued (cg_dw_batch). */
typedef struct Pend {
    const IrNode *b;
    CgArgs a;
} Pend;

typedef struct Low {
    Cg *c;
    CgRankProg *r;
    CgOp *op;
    int opi, chunk, stage, piece;
    VEC(Avail) av;       /* which buffer holds which tensor in which sharding */
    GradState *gs;       /* [ntensors] */
    int *zgrad;          /* [nparams] ZeRO-2/3 full temporary of this op, -1 */
    int *plast;          /* [nparams] node of the op's last contribution, -1 */
    bool *batched;       /* [nnodes] lowered already, in a sibling's rt_matmul_batch */
    int *dw_of;          /* [nfwd] backward node making the weight gradient of a MATMUL, -1 */
    VEC(Pend) pend;      /* weight-gradient GEMMs waiting for their batch */
    /* A split schedule's backward (cg_bwd.c): the chunk's W op, NULL when the
     * schedule is not split; which parameters' gradients W makes (every
     * contribution of this op a deferrable GEMM); the W slots B copied
     * buffers into (pairs: source buffer, its copy). */
    CgOp *wop;
    bool *wdefer;        /* [nparams] */
    VEC(int) wcopy;
} Low;

/* Per chunk: the slot buffers shared by its forward and backward. */
typedef struct ChunkBufs {
    VEC(Avail) slots;
} ChunkBufs;

/* A call of the op being lowered, in its current piece. */
#define LOW_CALL(L, fn, ...) cg_call((L)->c, (L)->op, (L)->piece, 0, CG_CALL_##fn, CG_ARGS(__VA_ARGS__))
#define BUF(b) cg_a_buf(b)
#define SZ(s) cg_a_size(s)

static inline const IrTensor *low_t(const Low *L, int t) { return &L->c->g->tensors[t]; }

/* cg_reshard.c */
CgType cg_tensor_type(const Cg *c, int t);
int cg_temp_of(Low *L, CgType type, int t, const PlanSharding *sh, const char *pre, const char *suf,
               const char *what);
int cg_temp(Low *L, int t, const PlanSharding *sh, const char *pre, const char *suf, const char *what);
Avail *cg_find(Low *L, int t, const PlanSharding *sh);
void cg_put(Low *L, int t, PlanSharding sh, int buf, bool priv);
int cg_reshard(Low *L, int t, const char *pre, int src, PlanSharding from, PlanSharding to, bool priv,
               int dest);
const CgParamPlan *cg_param_plan(const Low *L, int t);
int cg_get(Low *L, int t, PlanSharding need);
CgSize cg_param_size(const Cg *c, int k, const char *what); /* named sizes of parameter k */

/* cg_fwd.c */
void cg_lower_fwd(Low *L, const IrNode *n, bool recompute, ChunkBufs *cb);
bool cg_lower_add_norm(Low *L, const IrNode *add, const IrNode *norm, bool recompute, ChunkBufs *cb);
bool cg_lower_gemm_batch(Low *L, const IrNode *n, bool recompute, ChunkBufs *cb, const bool *rerun,
                         int first);
void cg_recompute(Low *L, int p, ChunkBufs *cb);

/* cg_grad.c */
bool cg_grad_of_param(const Low *L, int v);
bool cg_grad_of_act(const Low *L, int v);
int cg_param_accumulator(Low *L, int t);
void cg_param_contribution(Low *L, int t, int buf, PlanSharding sh);
Class *cg_act_class(Low *L, int t, const PlanSharding *sh);
bool cg_sums_in_kernel(Low *L, const IrNode *b, int j, const Class *k);
void cg_act_contribution(Low *L, int t, int buf, PlanSharding sh, bool priv);
void cg_finish_grad(Low *L, int t);
void cg_bwd_done(Low *L, const IrNode *b);
void cg_bwd_done_of(Low *L, const IrNode *b, int what); /* 1 activations' gradients, 2 parameters' */

/* cg_bwd.c */
void cg_lower_bwd(Low *L, const IrNode *b);
/* Under a split schedule, which parameters' gradients this backward op
 * leaves to W (L->wdefer): every contribution a weight-gradient GEMM (an
 * MoE layer's experts': all of them, in its accumulators' layout). */
void cg_wdefer(Low *L);

#endif
