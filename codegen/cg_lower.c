/* cg_lower.c: one pipeline rank's work as statements over buffers.
 *
 * Each local chunk (stage) gets two ops, its forward and its backward for one
 * micro-batch. Lowering walks the IR in order and keeps, per op, which
 * buffer holds which tensor in which sharding (Low.av), so every edge gets the
 * collectives pass_reshard prescribes exactly once, and conversions are
 * reused until the op ends.
 *
 * Forward: receive the boundary activations, load the inputs, run each node
 * (outputs canonicalised where made, see cg_plan.c), send the boundary.
 * Backward: receive the boundary gradients, per piece recompute what the
 * policy dropped, run each backward node. Gradient contributions to one
 * activation are summed per sharding class (partial sums add before they are
 * reduced, so q, k and v's contributions to their input cost one all-reduce)
 * and completed after the last one: the class sums reduced to the complete
 * gradient's sharding and added, with the gradient received from the next
 * stage. Parameter gradients accumulate straight into their accumulator when
 * the kernel makes them in its sharding (GEMM with beta = 1, dw += ...), over
 * every micro-batch; under ZeRO-2/3 into a full temporary reduce-scattered
 * into the shard after the op's last contribution. */
#include "cg.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct Avail {
    int t;
    PassSharding sh;
    int buf;
    bool priv; /* the op may overwrite it (nothing else reads this form) */
} Avail;

typedef struct Class {
    PassSharding sh;
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

typedef struct Low {
    Cg *c;
    CgRankProg *r;
    CgOp *op;
    int opi, chunk, stage, piece;
    VEC(Avail) av;
    GradState *gs;       /* [ntensors] */
    int *zgrad;          /* [nparams] ZeRO-2/3 full temporary of this op, -1 */
    int *plast;          /* [nparams] node of the op's last contribution, -1 */
    bool *batched;       /* [nnodes] lowered already, in a sibling's rt_matmul_batch */
    int *dw_of;          /* [nfwd] backward node making the weight gradient of a MATMUL, -1 */
    VEC(struct Pend) pend; /* weight-gradient GEMMs waiting for their batch */
} Low;

/* A weight-gradient GEMM lowered but not yet issued (dw_batch). */
typedef struct Pend {
    const IrNode *b;
    CgArgs a;
} Pend;

/* Per chunk: the slot buffers shared by its forward and backward. */
typedef struct ChunkBufs {
    VEC(Avail) slots;
} ChunkBufs;

static const IrGraph *G(const Low *L) { return L->c->g; }
static const IrTensor *TT(const Low *L, int t) { return &L->c->g->tensors[t]; }
static const char *B(const Low *L, int buf) { return cg_fmt(L->c, "$%d", buf); }

static CgType tensor_type(const Cg *c, int t)
{
    const IrTensor *x = &c->g->tensors[t];
    if (x->dtype == IR_I32)
        return CG_I32;
    if (x->role == IR_LOSS)
        return CG_F32;
    if (x->producer >= 0 && x->producer < c->g->nfwd && c->g->nodes[x->producer].out[0] != t)
        return CG_F32; /* rstd, mean, lse: fp32 statistics */
    return CG_ACT;
}


int cg_buf_new(Cg *c, CgRankProg *r, CgBufKind kind, CgType type, int64_t numel, int tensor,
               const char *pre, const char *suf, const char *comment)
{
    CgBuf *b = ir_alloc(c->arena, sizeof *b);
    b->id = r->bufs.n;
    b->kind = kind;
    b->type = type;
    b->numel = numel;
    b->tensor = tensor;
    b->pre = pre;
    b->suf = suf;
    b->name = tensor >= 0 ? cg_fmt(c, "%s%s%s", pre, cg_short_name(c, tensor), suf) : suf;
    b->comment = comment;
    b->op = b->first = b->last = -1;
    b->piece = -1;
    vec_push(r->bufs, b);
    return b->id;
}

void cg_stmt(Cg *c, CgOp *op, int piece, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    vec_push(op->st, ((CgStmt){piece, ir_strdup(c->arena, buf)}));
}

#define EMIT(L, ...) cg_stmt((L)->c, (L)->op, (L)->piece, __VA_ARGS__)

static int temp_of(Low *L, CgType type, int t, const PassSharding *sh, const char *pre,
                   const char *suf, const char *what)
{
    Cg *c = L->c;
    const char *comment = cg_fmt(c, "%s%s%s", cg_shape(c, t, sh), what ? ": " : "", what ? what : "");
    return cg_buf_new(c, L->r, CG_B_TEMP, type, cg_numel(c, t, sh), t, pre, suf, comment);
}

static int temp(Low *L, int t, const PassSharding *sh, const char *pre, const char *suf,
                const char *what)
{
    return temp_of(L, tensor_type(L->c, t), t, sh, pre, suf, what);
}

static Avail *find(Low *L, int t, const PassSharding *sh)
{
    for (int i = L->av.n - 1; i >= 0; i--)
        if (L->av.v[i].t == t && pass_sharding_eq(&L->av.v[i].sh, sh))
            return &L->av.v[i];
    return NULL;
}

static void put(Low *L, int t, PassSharding sh, int buf, bool priv)
{
    Avail *a = find(L, t, &sh);
    if (a) {
        a->buf = buf;
        a->priv = priv;
        return;
    }
    vec_push(L->av, ((Avail){t, sh, buf, priv}));
}

/* ------------------------------------------------------------ resharding */

/* Local sizes of t's dims under sh, as outer x d x inner around dim pos. */
static void around(const Low *L, int t, const PassSharding *sh, int pos, int64_t *outer,
                   int64_t *d, int64_t *inner)
{
    int64_t local[IR_MAX_RANK];
    cg_local_dims(L->c, t, sh, local);
    *outer = *inner = 1;
    for (int i = 0; i < TT(L, t)->rank; i++) {
        if (i < pos)
            *outer *= local[i];
        else if (i > pos)
            *inner *= local[i];
    }
    *d = local[pos];
}

static void need_scratch(Low *L, int64_t n)
{
    if (n > L->r->scratch_size)
        L->r->scratch_size = n;
}

/* Bring buffer src (tensor t in sharding `from`) to sharding `to`, with the
 * collectives pass_reshard prescribes. priv: src may be overwritten. dest:
 * the buffer to end in, or -1. Returns the buffer holding the result. */
static int reshard(Low *L, int t, const char *pre, int src, PassSharding from, PassSharding to,
                   bool priv, int dest)
{
    Cg *c = L->c;
    PassColl steps[8];
    int n = pass_reshard(c->g, t, &c->mesh, &from, &to, c->dim, steps, 8);
    if (n == 0) {
        if (dest >= 0 && dest != src) {
            EMIT(L, "rt_copy(%s, %s, %lld * sizeof(rt_act));", B(L, dest), B(L, src),
                 (long long)cg_numel(c, t, &to));
            return dest;
        }
        return src;
    }
    if (tensor_type(c, t) != CG_ACT)
        ir_die("codegen: '%s' (%s) would need a collective", TT(L, t)->name,
               ir_dtype_name(TT(L, t)->dtype));
    int cur = src;
    PassSharding sh = from;
    for (int k = 0; k < n; k++) {
        PassColl *s = &steps[k];
        bool last = k == n - 1;
        int a = s->axis, pos = s->dim >= 0 ? ir_tensor_dim_pos(c->g, t, s->dim) : -1;
        const char *comm = cg_fmt(c, "g_comm[%d]", 1 << a);
        const char *ax = c->axis_name[a];
        PassSharding next = sh;
        int out;
        int64_t outer, d, inner;
        switch (s->kind) {
        case PASS_COLL_ALLREDUCE:
            next.partial &= (uint8_t)~(1u << a);
            if (!priv || (last && dest >= 0)) {
                out = last && dest >= 0 ? dest : temp(L, t, &next, pre, "_ar", cg_fmt(c, "summed over %s", ax));
                EMIT(L, "rt_copy(%s, %s, %lld * sizeof(rt_act));", B(L, out), B(L, cur),
                     (long long)cg_numel(c, t, &sh));
                cur = out;
            }
            EMIT(L, "rt_allreduce(%s, %s, %lld, RT_ACT);", comm, B(L, cur),
                 (long long)cg_numel(c, t, &sh));
            break;
        case PASS_COLL_REDUCESCATTER:
            next.partial &= (uint8_t)~(1u << a);
            next.dim[a] = (int16_t)s->dim;
            out = last && dest >= 0 ? dest : temp(L, t, &next, pre, "_rs", cg_fmt(c, "reduce-scattered over %s", ax));
            around(L, t, &next, pos, &outer, &d, &inner);
            need_scratch(L, cg_numel(c, t, &sh));
            EMIT(L, "rt_reduce_scatter_dim(%s, %s, %s, %lld, %lld, %lld, g_scratch);", comm,
                 B(L, out), B(L, cur), (long long)outer, (long long)d, (long long)inner);
            cur = out;
            break;
        case PASS_COLL_ALLGATHER:
            next.dim[a] = -1;
            out = last && dest >= 0 ? dest : temp(L, t, &next, pre, "_ag", cg_fmt(c, "gathered over %s", ax));
            around(L, t, &sh, pos, &outer, &d, &inner);
            need_scratch(L, cg_numel(c, t, &next));
            EMIT(L, "rt_allgather_dim(%s, %s, %s, %lld, %lld, %lld, g_scratch);", comm, B(L, out),
                 B(L, cur), (long long)outer, (long long)d, (long long)inner);
            cur = out;
            break;
        case PASS_COLL_ALLTOALL: {
            next.dim[a] = (int16_t)s->dim2;
            out = last && dest >= 0 ? dest : temp(L, t, &next, pre, "_a2a", cg_fmt(c, "all-to-all over %s", ax));
            int p1 = pos, p2 = ir_tensor_dim_pos(c->g, t, s->dim2);
            bool to_second = p1 < p2;
            if (!to_second) {
                int x = p1;
                p1 = p2, p2 = x;
            }
            PassSharding whole = sh; /* sizes as if axis a split neither dim */
            whole.dim[a] = -1;
            int64_t local[IR_MAX_RANK], o = 1, mid = 1, in = 1;
            cg_local_dims(c, t, &whole, local);
            for (int i = 0; i < TT(L, t)->rank; i++) {
                if (i < p1)
                    o *= local[i];
                else if (i > p1 && i < p2)
                    mid *= local[i];
                else if (i > p2)
                    in *= local[i];
            }
            need_scratch(L, cg_numel(c, t, &sh));
            EMIT(L, "rt_alltoall_dim(%s, %s, %s, %lld, %lld, %lld, %lld, %lld, %s, g_scratch);",
                 comm, B(L, out), B(L, cur), (long long)o, (long long)local[p1], (long long)mid,
                 (long long)local[p2], (long long)in, to_second ? "true" : "false");
            cur = out;
            break;
        }
        case PASS_COLL_SLICE:
            next.dim[a] = (int16_t)s->dim;
            out = last && dest >= 0 ? dest : temp(L, t, &next, pre, "_sl", cg_fmt(c, "sliced over %s", ax));
            around(L, t, &next, pos, &outer, &d, &inner);
            EMIT(L, "rt_slice_dim(%s, %s, %lld, %lld, %lld, %d, g_coord[%d]);", B(L, out),
                 B(L, cur), (long long)outer, (long long)d, (long long)inner, c->mesh.size[a], a);
            cur = out;
            break;
        default: ir_die("codegen: collective %s in a reshard", pass_coll_name(s->kind));
        }
        sh = next;
        priv = true;
    }
    return cur;
}

/* ---------------------------------------------------------------- values */

static const CgParamPlan *param_plan(const Low *L, int t)
{
    int k = L->c->param_index[t];
    return k >= 0 ? &L->c->params[k] : NULL;
}

/* The buffer holding forward value t (parameter, input or activation) in
 * sharding `need`, converting from its canonical form if needed. */
static int get(Low *L, int t, PassSharding need)
{
    Cg *c = L->c;
    Avail *a = find(L, t, &need);
    if (a)
        return a->buf;
    const IrTensor *x = TT(L, t);
    PassSharding from;
    int src;
    if (x->role == IR_PARAM) {
        const CgParamPlan *pp = param_plan(L, t);
        from = pp->store;
        Avail *s = find(L, t, &from);
        if (s) {
            src = s->buf;
        } else {
            /* ZeRO-3: gather the shards before use (again in backward). */
            int k = c->param_index[t];
            src = temp(L, t, &from, "", "_full", cg_fmt(c, "gathered ZeRO-3 shards"));
            L->r->bufs.v[src]->numel = pp->padded;
            EMIT(L, "rt_allgather(g_comm[%d], %s, %s, %lld, RT_ACT);", pp->pmask, B(L, src),
                 B(L, L->r->pbuf[k]), (long long)pp->shard);
            put(L, t, from, src, false);
        }
    } else {
        from = c->canon[t];
        Avail *s = find(L, t, &from);
        if (!s)
            ir_die("codegen: '%s' is not available in stage %d's %s", x->name, L->stage,
                   L->op->bwd ? "backward" : "forward");
        src = s->buf;
    }
    int b = reshard(L, t, "", src, from, need, false, -1);
    put(L, t, need, b, false);
    return b;
}

/* ------------------------------------------------------------- forward */

/* Forward node n's output buffers: canon (where its consumers find each
 * output) and made (where the kernel writes it: partial sums first). */
typedef struct Outs {
    int canon[IR_MAX_OUT], made[IR_MAX_OUT];
} Outs;

static void outs_alloc(Low *L, const IrNode *n, bool recompute, ChunkBufs *cb, CgArgs *a, Outs *o)
{
    Cg *c = L->c;
    for (int j = 0; j < n->nout; j++) {
        int t = n->out[j];
        o->canon[j] = o->made[j] = -1;
        if (t == G(L)->loss) {
            a->out[j] = "g_loss";
            continue;
        }
        PassSharding ps = c->prod[t], cs = c->canon[t];
        Avail *slot = NULL;
        if (!recompute && c->saved[t])
            for (int i = 0; i < cb->slots.n && !slot; i++)
                if (cb->slots.v[i].t == t)
                    slot = &cb->slots.v[i];
        o->canon[j] = slot ? slot->buf : temp(L, t, &cs, "", "", recompute ? "recomputed" : NULL);
        o->made[j] = pass_sharding_eq(&ps, &cs) ? o->canon[j] : temp(L, t, &ps, "", "_p", "partial sums");
        a->out[j] = B(L, o->made[j]);
    }
}

/* After the kernel: partial sums reduced into place, outputs available. */
static void outs_finish(Low *L, const IrNode *n, const Outs *o)
{
    Cg *c = L->c;
    for (int j = 0; j < n->nout; j++) {
        if (o->canon[j] < 0)
            continue;
        int t = n->out[j];
        if (o->made[j] != o->canon[j])
            reshard(L, t, "", o->made[j], c->prod[t], c->canon[t], true, o->canon[j]);
        put(L, t, c->canon[t], o->canon[j], false);
    }
}

/* Run forward node n. recompute: outputs go to temporaries (the backward
 * pass re-running what the policy did not keep). */
static void lower_fwd(Low *L, const IrNode *n, bool recompute, ChunkBufs *cb)
{
    Cg *c = L->c;
    CgArgs a;
    memset(&a, 0, sizeof a);
    for (int k = 0; k < n->nin; k++)
        a.in[k] = B(L, get(L, n->in[k], cg_need(c, n, k)));
    Outs o;
    outs_alloc(L, n, recompute, cb, &a, &o);
    EMIT(L, "%s", cg_kernel(c, n, &a));
    outs_finish(L, n, &o);
}

/* A residual add and the RMSNorm after it that reads its sum
 * (pass_add_norm_pair: the cost model prices the pair as this one call), as
 * one rt_add_rmsnorm_fwd, when the sum is made complete (no partial sums)
 * in the layout the norm reads it in, so nothing runs between the two.
 * Whether it lowered both. Any get() of the operands emits under L->piece,
 * the norm's: a pair spanning pieces runs in the second. */
static bool lower_add_norm(Low *L, const IrNode *add, const IrNode *norm, bool recompute, ChunkBufs *cb)
{
    Cg *c = L->c;
    if (norm->id != add->id + 1 || !pass_add_norm_fused(G(L), norm, c->p->strategy))
        return false;
    /* The cost model's rule says the sum is complete where it is made, in
     * the layout the operands and the norm take: nothing between the two. */
    int t = add->out[0];
    PassSharding need = cg_need(c, norm, 0);
    if (!pass_sharding_eq(&c->prod[t], &c->canon[t]) || !pass_sharding_eq(&need, &c->canon[t]))
        ir_die("codegen: '%s' is not made where the norm reads it", TT(L, t)->name);
    CgArgs aa, an;
    memset(&aa, 0, sizeof aa);
    memset(&an, 0, sizeof an);
    for (int k = 0; k < add->nin; k++)
        aa.in[k] = B(L, get(L, add->in[k], cg_need(c, add, k)));
    for (int k = 1; k < norm->nin; k++) /* weight (and bias) */
        an.in[k] = B(L, get(L, norm->in[k], cg_need(c, norm, k)));
    Outs oa, on;
    outs_alloc(L, add, recompute, cb, &aa, &oa);
    outs_alloc(L, norm, recompute, cb, &an, &on);
    an.in[0] = aa.out[0];
    an.sum_of[0] = aa.in[0];
    an.sum_of[1] = aa.in[1];
    EMIT(L, "%s", cg_kernel(c, norm, &an));
    outs_finish(L, add, &oa);
    outs_finish(L, norm, &on);
    return true;
}

/* n and its sibling GEMMs (pass_gemm_batch: q, k and v from one input;
 * gate and up) as one rt_matmul_batch, issued at the first of them (their
 * inputs, the shared activation and parameters, are all there); the later
 * ones are marked and skipped. rerun (recompute: by node id - first) limits
 * the batch to the nodes re-run. Whether it lowered n. */
static bool lower_gemm_batch(Low *L, const IrNode *n, bool recompute, ChunkBufs *cb,
                             const bool *rerun, int first)
{
    Cg *c = L->c;
    int ids[PASS_GEMM_BATCH_MAX];
    int k = pass_gemm_batch(G(L), n, c->p->strategy, ids), cnt = 0;
    const IrNode *m[PASS_GEMM_BATCH_MAX];
    for (int i = 0; i < k; i++)
        if (!L->batched[ids[i]] && (!rerun || rerun[ids[i] - first]))
            m[cnt++] = &G(L)->nodes[ids[i]];
    if (cnt < 2 || m[0] != n)
        return false;
    CgArgs a[PASS_GEMM_BATCH_MAX];
    Outs o[PASS_GEMM_BATCH_MAX];
    memset(a, 0, sizeof a);
    for (int i = 0; i < cnt; i++)
        for (int j = 0; j < m[i]->nin; j++)
            a[i].in[j] = B(L, get(L, m[i]->in[j], cg_need(c, m[i], j)));
    for (int i = 0; i < cnt; i++)
        outs_alloc(L, m[i], recompute, cb, &a[i], &o[i]);
    EMIT(L, "%s", cg_kernel_batch(c, m, a, cnt));
    for (int i = 0; i < cnt; i++) {
        outs_finish(L, m[i], &o[i]);
        L->batched[m[i]->id] = true;
    }
    return true;
}

/* ------------------------------------------------------------ gradients */

static bool grad_of_param(const Low *L, int v)
{
    const IrTensor *x = TT(L, v);
    return x->role == IR_GRAD && TT(L, x->grad_of)->role == IR_PARAM && param_plan(L, x->grad_of);
}

static bool grad_of_act(const Low *L, int v)
{
    const IrTensor *x = TT(L, v);
    return x->role == IR_GRAD && x->producer >= 0 && L->c->has_grad[x->grad_of];
}

/* The buffer a parameter's gradient accumulates into during this op. */
static int param_accumulator(Low *L, int t)
{
    Cg *c = L->c;
    int k = c->param_index[t];
    const CgParamPlan *pp = &c->params[k];
    if (!(pp->zshard && c->p->zero >= 2))
        return L->r->gbuf[k];
    if (L->zgrad[k] < 0) {
        PassSharding g = pp->store;
        g.partial = pp->pmask;
        L->zgrad[k] = temp_of(L, CG_GRAD, t, &g, "d_", "", "gradient of this micro-batch, before reduce-scatter");
        L->r->bufs.v[L->zgrad[k]]->numel = pp->padded;
        EMIT(L, "rt_zero(%s, %lld * %s);", B(L, L->zgrad[k]), (long long)pp->padded, cg_sizeof(CG_GRAD));
    }
    return L->zgrad[k];
}

/* Add contribution buf (sharding sh) to parameter t's gradient: made in
 * rt_act (a GEMM or column sum that needs resharding first, in bf16), or
 * in rt_grad by a kernel that only writes gradients (norm, embedding). */
static void param_contribution(Low *L, int t, int buf, PassSharding sh)
{
    Cg *c = L->c;
    const CgParamPlan *pp = param_plan(L, t);
    PassSharding want = pp->store;
    want.partial = sh.partial & pp->pmask;
    bool f32 = L->r->bufs.v[buf]->type == CG_GRAD;
    if (f32 && pass_reshard(c->g, t, &c->mesh, &sh, &want, c->dim, NULL, 0) > 0)
        ir_die("codegen: the fp32 gradient contribution to '%s' would need a collective",
               TT(L, t)->name);
    int b = reshard(L, t, "d_", buf, sh, want, true, -1);
    /* Axes the accumulator is partial over but this contribution is not:
     * every rank there holds the whole value, so one of them adds it. */
    char cond[128] = "";
    size_t k = 0;
    for (int a = 0; a < c->naxes; a++)
        if ((pp->pmask >> a & 1) && !(sh.partial >> a & 1))
            k += (size_t)snprintf(cond + k, sizeof cond - k, "%sg_coord[%d] == 0", k ? " && " : "", a);
    int acc = param_accumulator(L, t);
    int64_t n = pp->numel;
    const char *fn = f32 ? "rt_grad_sum" : "rt_grad_add";
    if (k)
        EMIT(L, "if (%s) %s(%s, %s, %lld);", cond, fn, B(L, acc), B(L, b), (long long)n);
    else
        EMIT(L, "%s(%s, %s, %lld);", fn, B(L, acc), B(L, b), (long long)n);
}

/* After the op's last contribution to parameter k. ZeRO-2/3 keep only this
 * rank's shard: the shard accumulated so far is added into this rank's block
 * of the micro-batch's gradient, whose reduce-scatter (fp32) then lands in
 * the accumulator itself. Otherwise, when the gradient is reduced over the
 * mesh at the end of the step, the trainer hears that it is complete for
 * this op (cg_grad_ready: after the last micro-batch its bucket's reduction
 * starts, overlapping the rest of the backward). */
static void param_done(Low *L, int k)
{
    Cg *c = L->c;
    const CgParamPlan *pp = &c->params[k];
    int acc = L->r->gbuf[k];
    if (L->zgrad[k] < 0) {
        if (pp->pmask && pp->tied < 0) {
            EMIT(L, "cg_grad_ready(%s);", B(L, acc));
            vec_push(L->r->ready[L->chunk], k);
        }
        return;
    }
    EMIT(L, "rt_grad_sum(%s + (int64_t)rt_comm_rank(g_comm[%d]) * %lld, %s, %lld);",
         B(L, L->zgrad[k]), pp->pmask, (long long)pp->shard, B(L, acc), (long long)pp->shard);
    EMIT(L, "rt_reduce_scatter(g_comm[%d], %s, %s, %lld, RT_F32);", pp->pmask, B(L, acc),
         B(L, L->zgrad[k]), (long long)pp->shard);
}

/* The running sum of t's gradient contributions in layout sh, NULL. */
static Class *act_class(Low *L, int t, const PassSharding *sh)
{
    GradState *g = &L->gs[t];
    for (int i = 0; i < g->cls.n; i++)
        if (pass_sharding_eq(&g->cls.v[i].sh, sh))
            return &g->cls.v[i];
    return NULL;
}

/* Whether backward node b adds its output j into the sum k of the
 * contributions made so far itself, instead of writing a temporary an rt_add
 * then adds (IR_OPF_GRAD_SUM on its forward op; the cost model's
 * grad_sum_cost follows the same rule): a GEMM with beta = 1 into a sum this
 * op owns, a norm's backward reading the sum as dres (into it if owned, else
 * into a new sum). */
static bool sums_in_kernel(Low *L, const IrNode *b, int j, const Class *k)
{
    if (!k || b->fwd < 0 || !(ir_ops[G(L)->nodes[b->fwd].op].flags & IR_OPF_GRAD_SUM) ||
        L->r->bufs.v[k->buf]->type != tensor_type(L->c, b->out[j]))
        return false;
    if (b->op == IR_OP_MATMUL)
        return k->priv;
    return j == 0 && (b->op == IR_OP_RMSNORM_BWD || b->op == IR_OP_LAYERNORM_BWD);
}

static void act_contribution(Low *L, int t, int buf, PassSharding sh, bool priv)
{
    GradState *g = &L->gs[t];
    for (int i = 0; i < g->cls.n; i++) {
        Class *k = &g->cls.v[i];
        if (!pass_sharding_eq(&k->sh, &sh))
            continue;
        int64_t n = cg_numel(L->c, t, &sh);
        if (!k->priv) {
            int acc = temp(L, t, &sh, "d_", "_acc", "sum of gradient contributions");
            EMIT(L, "rt_add(%s, %s, %s, %lld, %lld);", B(L, acc), B(L, k->buf), B(L, buf),
                 (long long)n, (long long)n);
            k->buf = acc;
            k->priv = true;
        } else {
            EMIT(L, "rt_add(%s, %s, %s, %lld, %lld);", B(L, k->buf), B(L, k->buf), B(L, buf),
                 (long long)n, (long long)n);
        }
        return;
    }
    vec_push(g->cls, ((Class){sh, buf, priv}));
}

/* The complete gradient of t on this stage: class sums reduced to gsh[t],
 * plus what the next stage sent; into the send buffer if it goes on. */
static void finish_grad(Low *L, int t)
{
    Cg *c = L->c;
    GradState *g = &L->gs[t];
    PassSharding want = c->gsh[t];
    int64_t n = cg_numel(c, t, &want);
    int terms[64], nt = 0;
    if (g->cls.n == 1 && g->recv < 0 && g->send >= 0) {
        g->final = reshard(L, t, "d_", g->cls.v[0].buf, g->cls.v[0].sh, want, g->cls.v[0].priv, g->send);
        return;
    }
    bool owned = g->cls.n != 1 || g->recv >= 0 || g->cls.v[0].priv;
    for (int i = 0; i < g->cls.n && nt < 63; i++)
        terms[nt++] = reshard(L, t, "d_", g->cls.v[i].buf, g->cls.v[i].sh, want, g->cls.v[i].priv, -1);
    if (g->recv >= 0)
        terms[nt++] = g->recv;
    int out = g->send;
    if (nt == 0) {
        if (out < 0)
            out = temp(L, t, &want, "d_", "", "gradient (nothing contributes)");
        EMIT(L, "rt_zero(%s, %lld * sizeof(rt_act));", B(L, out), (long long)n);
    } else if (nt == 1) {
        if (out >= 0)
            EMIT(L, "rt_copy(%s, %s, %lld * sizeof(rt_act));", B(L, out), B(L, terms[0]), (long long)n);
        else
            out = terms[0];
    } else {
        if (out < 0) {
            out = temp(L, t, &want, "d_", "", "gradient");
        }
        EMIT(L, "rt_add(%s, %s, %s, %lld, %lld);", B(L, out), B(L, terms[0]), B(L, terms[1]),
             (long long)n, (long long)n);
        for (int i = 2; i < nt; i++)
            EMIT(L, "rt_add(%s, %s, %s, %lld, %lld);", B(L, out), B(L, out), B(L, terms[i]),
                 (long long)n, (long long)n);
    }
    g->final = out;
    if (owned && out != g->send && out != g->recv) {
        /* Whatever made it, the complete gradient of t is called d_<t>. */
        CgBuf *b = L->r->bufs.v[out];
        b->tensor = t;
        b->pre = "d_";
        b->suf = "";
        b->comment = cg_fmt(c, "%s: gradient", cg_shape(c, t, &want));
    }
}

/* ------------------------------------------------------------- backward */

static bool identity_reduce(const Low *L, const IrNode *b)
{
    return b->op == IR_OP_REDUCE_SUM && TT(L, b->in[0])->rank == TT(L, b->out[0])->rank;
}

/* The buffer of backward input u in sharding need. */
static int bwd_input(Low *L, int u, PassSharding need)
{
    Cg *c = L->c;
    const IrTensor *x = TT(L, u);
    if (x->role == IR_GRAD) {
        GradState *g = &L->gs[x->grad_of];
        if (g->final < 0)
            ir_die("codegen: gradient of '%s' read before it is complete", TT(L, x->grad_of)->name);
        int b = reshard(L, x->grad_of, "d_", g->final, c->gsh[x->grad_of], need, false, -1);
        return b;
    }
    if (x->producer >= G(L)->nfwd) { /* a backward intermediate (MUL's broadcast rule) */
        PassSharding made = c->prod[u];
        Avail *a = find(L, u, &made);
        if (!a)
            ir_die("codegen: '%s' read before it is made", x->name);
        return reshard(L, u, "", a->buf, made, need, false, -1);
    }
    return get(L, u, need);
}

/* Whether backward node b writes its first output over input 0's buffer
 * inb: the forward op allows it, the graph lets it (nothing reads the input
 * afterwards), and the buffer has the gradient's layout and type. */
static bool grad_over_input(Low *L, const IrNode *b, int inb)
{
    Cg *c = L->c;
    const IrGraph *g = G(L);
    int t = b->in[0], v = b->out[0];
    if (inb < 0 || b->fwd < 0 || !(ir_ops[g->nodes[b->fwd].op].flags & IR_OPF_GRAD_IN_PLACE))
        return false;
    if (!grad_of_act(L, v) || TT(L, v)->grad_of != t || !ir_grad_in_place(g, t))
        return false;
    PassSharding need = cg_need(c, b, 0), made = cg_made(c, b, 0);
    return pass_sharding_eq(&need, &made) && L->r->bufs.v[inb]->type == tensor_type(c, v);
}

/* After backward node b's kernel: gradients it completed. */
static void bwd_done(Low *L, const IrNode *b)
{
    for (int j = 0; j < b->nout; j++) {
        const IrTensor *x = TT(L, b->out[j]);
        if (x->role != IR_GRAD)
            continue;
        if (grad_of_act(L, b->out[j]) && L->gs[x->grad_of].last == b->id)
            finish_grad(L, x->grad_of);
        int k = L->c->param_index[x->grad_of];
        if (k >= 0 && L->plast[k] == b->id)
            param_done(L, k);
    }
}

/* Whether backward node b is a MATMUL adding its weight's gradient straight
 * into the accumulator (made in the accumulator's layout: lower_bwd's
 * `direct`), so nothing but bwd_done follows its GEMM. */
static bool dw_direct(const Low *L, const IrNode *b)
{
    int v = b->out[0];
    if (b->op != IR_OP_MATMUL || !grad_of_param(L, v))
        return false;
    const CgParamPlan *pp = param_plan(L, TT(L, v)->grad_of);
    PassSharding made = cg_made(L->c, b, 0), want = pp->store;
    want.partial = pp->pmask;
    return pass_sharding_eq(&made, &want);
}

/* The weight gradients of GEMMs the forward batched (lower_gemm_batch) as
 * one rt_matmul_grad_batch, issued at the last of them in backward order
 * (q's, after v's and k's): the earlier ones wait in L->pend, their inputs
 * (the layer's input, the outputs' gradients) kept live by the later
 * reference. Only where every one adds straight into its accumulator, so
 * their bookkeeping (bwd_done: ZeRO-2's reduce-scatter, the bucket's
 * readiness) moves with them. Whether b was taken (queued or issued). */
static bool dw_batch(Low *L, const IrNode *b, const CgArgs *a, bool direct)
{
    const IrGraph *g = G(L);
    if (!direct || b->fwd < 0 || b->op != IR_OP_MATMUL || L->dw_of[b->fwd] != b->id)
        return false;
    int ids[PASS_GEMM_BATCH_MAX];
    int k = pass_gemm_batch(g, &g->nodes[b->fwd], L->c->p->strategy, ids), last = -1;
    if (k < 2)
        return false;
    for (int i = 0; i < k; i++) {
        int d = L->dw_of[ids[i]];
        if (d < 0 || L->c->node_stage[d] != L->stage || !dw_direct(L, &g->nodes[d]))
            return false;
        last = d > last ? d : last;
    }
    vec_push(L->pend, ((Pend){b, *a}));
    if (b->id != last)
        return true;
    const IrNode *m[PASS_GEMM_BATCH_MAX];
    CgArgs args[PASS_GEMM_BATCH_MAX];
    for (int i = 0; i < k; i++) { /* in the forward's order */
        int j = 0;
        while (j < L->pend.n && L->pend.v[j].b->id != L->dw_of[ids[i]])
            j++;
        if (j == L->pend.n)
            ir_die("codegen: weight gradient of node %d not queued for its batch", ids[i]);
        m[i] = L->pend.v[j].b;
        args[i] = L->pend.v[j].a;
        L->pend.v[j] = L->pend.v[--L->pend.n];
    }
    EMIT(L, "%s", cg_kernel_batch(L->c, m, args, k));
    for (int i = 0; i < k; i++)
        bwd_done(L, m[i]);
    return true;
}

static void lower_bwd(Low *L, const IrNode *b)
{
    Cg *c = L->c;
    if (pass_is_grad_sum(G(L), b))
        return; /* contributions are summed per stage by act_contribution */
    int v0 = b->out[0];
    if (identity_reduce(L, b) && !grad_of_param(L, v0)) {
        /* REDUCE_SUM over nothing: the same buffer. */
        PassSharding need = cg_need(c, b, 0), made = cg_made(c, b, 0);
        int buf = bwd_input(L, b->in[0], need);
        if (grad_of_act(L, v0))
            act_contribution(L, TT(L, v0)->grad_of, buf, made, false);
        else
            put(L, v0, made, buf, false);
        goto done;
    }
    CgArgs a;
    memset(&a, 0, sizeof a);
    int inb[IR_MAX_IN];
    for (int k = 0; k < b->nin; k++) {
        inb[k] = b->in[k] == c->seed ? -1 : bwd_input(L, b->in[k], cg_need(c, b, k));
        a.in[k] = inb[k] < 0 ? "1.0f" : B(L, inb[k]);
    }
    int out[IR_MAX_OUT];
    bool direct[IR_MAX_OUT], over[IR_MAX_OUT], summed[IR_MAX_OUT];
    for (int j = 0; j < b->nout; j++) {
        int v = b->out[j];
        PassSharding made = cg_made(c, b, j);
        direct[j] = over[j] = summed[j] = false;
        Class *k = grad_of_act(L, v) ? act_class(L, TT(L, v)->grad_of, &made) : NULL;
        if (sums_in_kernel(L, b, j, k)) {
            /* Into the sum of the contributions made so far. */
            summed[j] = true;
            if (b->op == IR_OP_MATMUL) {
                out[j] = k->buf;
                a.accumulate = true;
            } else {
                a.addend = B(L, k->buf);
                out[j] = k->priv ? k->buf
                                 : temp(L, TT(L, v)->grad_of, &made, "d_", "_acc",
                                        "sum of gradient contributions");
                k->buf = out[j];
                k->priv = true;
            }
        } else if (j == 0 && grad_over_input(L, b, inb[0])) {
            /* The gradient over the forward tensor it differentiates
             * (ir_grad_in_place): the logits are dead once dlogits exists. */
            out[j] = inb[0];
            over[j] = true;
        } else if (grad_of_param(L, v)) {
            const CgParamPlan *pp = param_plan(L, TT(L, v)->grad_of);
            bool native = cg_kernel_accumulates(b, j) || b->op == IR_OP_MATMUL ||
                          b->op == IR_OP_REDUCE_SUM;
            PassSharding want = pp->store;
            want.partial = pp->pmask;
            if (native && pass_sharding_eq(&made, &want)) {
                out[j] = param_accumulator(L, TT(L, v)->grad_of);
                direct[j] = true;
                a.accumulate = true;
                a.grad_out = true;
            } else if (cg_kernel_accumulates(b, j)) { /* these kernels write rt_grad */
                out[j] = temp_of(L, CG_GRAD, v, &made, "", "", "gradient contribution");
                EMIT(L, "rt_zero(%s, %lld * %s);", B(L, out[j]), (long long)cg_numel(c, v, &made),
                     cg_sizeof(CG_GRAD));
            } else {
                out[j] = temp(L, v, &made, "", "", "gradient contribution");
            }
        } else {
            out[j] = temp(L, v, &made, "", "", grad_of_act(L, v) ? NULL : "unused");
            if (cg_kernel_accumulates(b, j))
                EMIT(L, "rt_zero(%s, %lld * sizeof(rt_act));", B(L, out[j]),
                     (long long)cg_numel(c, v, &made));
        }
        a.out[j] = B(L, out[j]);
    }
    if (over[0])
        EMIT(L, "/* the gradient of %s written over it: nothing reads %s after this */",
             TT(L, b->in[0])->name, TT(L, b->in[0])->name);
    if (dw_batch(L, b, &a, direct[0]))
        return; /* issued with its batch, bookkeeping included */
    EMIT(L, "%s", cg_kernel(c, b, &a));
    for (int j = 0; j < b->nout; j++) {
        int v = b->out[j];
        PassSharding made = cg_made(c, b, j);
        if (grad_of_param(L, v)) {
            if (!direct[j])
                param_contribution(L, TT(L, v)->grad_of, out[j], made);
        } else if (grad_of_act(L, v) && !summed[j]) {
            /* Over the input: not this op's own buffer, so never summed into or renamed. */
            act_contribution(L, TT(L, v)->grad_of, out[j], made, !over[j]);
        } else if (TT(L, v)->role != IR_GRAD) {
            put(L, v, made, out[j], true);
        }
    }
done:
    bwd_done(L, b);
}

/* Forward nodes of piece p the backward must re-run: producers of values
 * its backward nodes read that were not kept, and what those need. */
static void recompute(Low *L, int p, ChunkBufs *cb)
{
    Cg *c = L->c;
    const IrGraph *g = G(L);
    bool *need = ir_alloc(c->arena, (size_t)g->ntensors);
    bool any = false;
    for (int i = g->nfwd; i < g->nnodes; i++) {
        const IrNode *b = &g->nodes[i];
        if (g->nodes[b->fwd].piece != p)
            continue;
        for (int k = 0; k < b->nin; k++) {
            int t = b->in[k], q = g->tensors[t].producer;
            if (g->tensors[t].role != IR_GRAD && q >= 0 && q < g->nfwd && c->recomputed[q] &&
                g->nodes[q].piece == p && !c->saved[t])
                need[t] = any = true;
        }
    }
    if (!any)
        return;
    const IrPiece *pc = &g->pieces[p];
    for (int i = pc->first + pc->count - 1; i >= pc->first; i--) {
        const IrNode *n = &g->nodes[i];
        bool want = false;
        for (int j = 0; j < n->nout; j++)
            want |= need[n->out[j]];
        if (!want)
            continue;
        for (int k = 0; k < n->nin; k++) {
            int t = n->in[k], q = g->tensors[t].producer;
            if (q >= 0 && c->recomputed[q] && g->nodes[q].piece == p && !c->saved[t])
                need[t] = true;
        }
    }
    EMIT(L, "/* recompute what the forward pass did not keep */");
    bool *want = ir_alloc(c->arena, (size_t)pc->count);
    for (int i = 0; i < pc->count; i++) {
        const IrNode *n = &g->nodes[pc->first + i];
        for (int j = 0; j < n->nout; j++)
            want[i] |= need[n->out[j]];
    }
    for (int i = 0; i < pc->count; i++) {
        const IrNode *n = &g->nodes[pc->first + i];
        if (!want[i])
            continue;
        if (i + 1 < pc->count && want[i + 1] && lower_add_norm(L, n, n + 1, true, cb)) {
            i++;
            continue;
        }
        if (L->batched[n->id] || lower_gemm_batch(L, n, true, cb, want, pc->first))
            continue;
        lower_fwd(L, n, true, cb);
    }
}

/* ------------------------------------------------------------- the ops */

static void low_begin(Low *L, Cg *c, CgRankProg *r, int chunk, bool bwd)
{
    memset(L, 0, sizeof *L);
    L->c = c;
    L->r = r;
    L->chunk = chunk;
    L->stage = r->stage[chunk];
    L->opi = 2 * chunk + bwd;
    L->op = &r->ops[L->opi];
    L->op->chunk = chunk;
    L->op->stage = L->stage;
    L->op->bwd = bwd;
    L->piece = -1;
    L->gs = ir_alloc(c->arena, sizeof *L->gs * (size_t)c->g->ntensors);
    for (int t = 0; t < c->g->ntensors; t++)
        L->gs[t].recv = L->gs[t].send = L->gs[t].final = L->gs[t].last = -1;
    L->zgrad = ir_alloc(c->arena, sizeof(int) * (size_t)(c->nparams + 1));
    L->plast = ir_alloc(c->arena, sizeof(int) * (size_t)(c->nparams + 1));
    for (int k = 0; k < c->nparams; k++)
        L->zgrad[k] = L->plast[k] = -1;
    L->batched = ir_alloc(c->arena, (size_t)c->g->nnodes + 1);
    memset(L->batched, 0, (size_t)c->g->nnodes + 1);
    L->dw_of = ir_alloc(c->arena, sizeof(int) * (size_t)(c->g->nfwd + 1));
    for (int i = 0; i < c->g->nfwd; i++)
        L->dw_of[i] = -1;
    for (int i = c->g->nfwd; i < c->g->nnodes; i++) {
        const IrNode *b = &c->g->nodes[i];
        if (b->op == IR_OP_MATMUL && b->fwd >= 0 && TT(L, b->out[0])->role == IR_GRAD &&
            TT(L, b->out[0])->grad_of == c->g->nodes[b->fwd].in[1])
            L->dw_of[b->fwd] = i;
    }
}

/* Parameters, kept activations, received activations and inputs. */
static void low_avail(Low *L, ChunkBufs *cb)
{
    Cg *c = L->c;
    for (int i = 0; i < cb->slots.n; i++)
        put(L, cb->slots.v[i].t, cb->slots.v[i].sh, cb->slots.v[i].buf, false);
    for (int i = 0; i < L->r->params.n; i++) {
        int k = L->r->params.v[i];
        const CgParamPlan *pp = &c->params[k];
        if (!(pp->zshard && c->p->zero == 3))
            put(L, pp->tensor, pp->store, L->r->pbuf[k], false);
    }
}

static int tag(int stage, int idx, bool grad)
{
    if (idx >= 64)
        ir_die("codegen: more than 64 tensors cross one pipeline boundary");
    return (stage * 64 + idx) * 2 + grad;
}

static void lower_forward(Cg *c, CgRankProg *r, int j, ChunkBufs *cb)
{
    Low L;
    low_begin(&L, c, r, j, false);
    low_avail(&L, cb);
    const PassStage *st = &c->p->stages[L.stage];
    int prev = L.stage > 0 ? cg_stage_pp(c, L.stage - 1) : -1;
    int next = L.stage + 1 < c->p->nstages ? cg_stage_pp(c, L.stage + 1) : -1;
    for (int i = 0; i < r->send_act[j].n; i++)
        EMIT(&L, "cg_wait(&s->%s);", r->send_act[j].v[i].req);
    for (int i = 0; i < r->recv_act[j].n; i++) {
        CgIo *io = &r->recv_act[j].v[i];
        EMIT(&L, "cg_recv(%s, %lld, RT_ACT, %d, %d);", B(&L, io->buf),
             (long long)cg_numel(c, io->tensor, &c->canon[io->tensor]), prev,
             tag(L.stage - 1, i, false));
    }
    /* Inputs: each rank reads its block of the micro-batch. */
    for (int i = 0; i < cb->slots.n; i++) {
        Avail *a = &cb->slots.v[i];
        if (a->t != c->tokens && a->t != c->targets)
            continue;
        int64_t loc[2];
        cg_local_dims(c, a->t, &a->sh, loc);
        const char *off[2];
        for (int d = 0; d < 2; d++) {
            off[d] = "0";
            for (int ax = 0; ax < c->naxes; ax++)
                if (a->sh.dim[ax] == TT(&L, a->t)->dim[d])
                    off[d] = cg_fmt(c, "(int64_t)g_coord[%d] * %lld", ax, (long long)loc[d]);
        }
        EMIT(&L, "cg_load(%s, %s, mb, %s, %lld, %s, %lld);", B(&L, a->buf),
             a->t == c->tokens ? "CG_TOKENS" : "CG_TARGETS", off[0], (long long)loc[0], off[1],
             (long long)loc[1]);
    }
    /* The stage's nodes in order; a fused pair may span two pieces (a
     * layer's last add, the next one's first norm): its call belongs to the
     * norm's piece. */
    const IrPiece *first = &c->g->pieces[st->first_piece], *last = first + st->npieces - 1;
    for (int i = first->first; i < last->first + last->count; i++) {
        const IrNode *n = &c->g->nodes[i];
        if (i + 1 < last->first + last->count) {
            L.piece = n[1].piece;
            if (lower_add_norm(&L, n, n + 1, false, cb)) {
                i++;
                continue;
            }
        }
        L.piece = n->piece;
        if (L.batched[n->id] || lower_gemm_batch(&L, n, false, cb, NULL, 0))
            continue;
        lower_fwd(&L, n, false, cb);
    }
    L.piece = -1;
    for (int i = 0; i < r->send_act[j].n; i++) {
        CgIo *io = &r->send_act[j].v[i];
        EMIT(&L, "cg_send(&s->%s, %s, %lld, RT_ACT, %d, %d);", io->req, B(&L, io->buf),
             (long long)cg_numel(c, io->tensor, &c->canon[io->tensor]), next,
             tag(L.stage, i, false));
    }
    vec_free(L.av);
}

static void lower_backward(Cg *c, CgRankProg *r, int j, ChunkBufs *cb)
{
    Low L;
    low_begin(&L, c, r, j, true);
    low_avail(&L, cb);
    const IrGraph *g = c->g;
    int s = L.stage;
    int prev = s > 0 ? cg_stage_pp(c, s - 1) : -1;
    int next = s + 1 < c->p->nstages ? cg_stage_pp(c, s + 1) : -1;
    /* Last contribution of each gradient in this stage. */
    for (int i = g->nfwd; i < g->nnodes; i++) {
        const IrNode *b = &g->nodes[i];
        if (c->node_stage[i] != s || pass_is_grad_sum(g, b))
            continue;
        for (int k = 0; k < b->nout; k++) {
            const IrTensor *x = &g->tensors[b->out[k]];
            if (x->role != IR_GRAD)
                continue;
            if (grad_of_act(&L, x->id))
                L.gs[x->grad_of].last = i;
            if (c->param_index[x->grad_of] >= 0)
                L.plast[c->param_index[x->grad_of]] = i;
        }
    }
    for (int i = 0; i < r->send_grad[j].n; i++) {
        CgIo *io = &r->send_grad[j].v[i];
        EMIT(&L, "cg_wait(&s->%s);", io->req);
        L.gs[io->tensor].send = io->buf;
    }
    for (int i = 0; i < r->recv_grad[j].n; i++) {
        CgIo *io = &r->recv_grad[j].v[i];
        int t = io->tensor;
        int buf = temp(&L, t, &c->gsh[t], "d_", "_next", "gradient from the next stage");
        EMIT(&L, "cg_recv(%s, %lld, RT_ACT, %d, %d);", B(&L, buf),
             (long long)cg_numel(c, t, &c->gsh[t]), next, tag(s, i, true));
        L.gs[t].recv = buf;
        if (L.gs[t].last < 0)
            finish_grad(&L, t); /* nothing here adds to it */
    }
    /* Gradients this stage sends but nothing here contributes to. */
    for (int i = 0; i < r->send_grad[j].n; i++) {
        int t = r->send_grad[j].v[i].tensor;
        if (L.gs[t].last < 0 && L.gs[t].final < 0)
            finish_grad(&L, t);
    }
    for (int i = g->nfwd; i < g->nnodes; i++) {
        const IrNode *b = &g->nodes[i];
        if (c->node_stage[i] != s || pass_is_grad_sum(g, b))
            continue;
        int p = g->nodes[b->fwd].piece;
        if (p != L.piece) {
            L.piece = p;
            recompute(&L, p, cb);
        }
        lower_bwd(&L, b);
    }
    L.piece = -1;
    for (int i = 0; i < r->send_grad[j].n; i++) {
        CgIo *io = &r->send_grad[j].v[i];
        if (L.gs[io->tensor].final != io->buf)
            ir_die("codegen: gradient of '%s' is not in its send buffer", g->tensors[io->tensor].name);
        EMIT(&L, "cg_send(&s->%s, %s, %lld, RT_ACT, %d, %d);", io->req, B(&L, io->buf),
             (long long)cg_numel(c, io->tensor, &c->gsh[io->tensor]), prev,
             tag(s - 1, i, true));
    }
    if (L.pend.n)
        ir_die("codegen: %d weight-gradient GEMMs left without their batch", L.pend.n);
    vec_free(L.pend);
    vec_free(L.av);
    for (int t = 0; t < g->ntensors; t++)
        vec_free(L.gs[t].cls);
}

/* A request field of chunk j's struct, unique in it. */
static const char *request_name(Cg *c, CgRankProg *r, int j, const char *pre, int t)
{
    const char *base = cg_fmt(c, "%s%s", pre, cg_ident(c, cg_short_name(c, t))), *name = base;
    for (int k = 2;; k++) {
        bool used = false;
        for (int i = 0; i < r->send_act[j].n; i++)
            used |= !strcmp(r->send_act[j].v[i].req, name);
        for (int i = 0; i < r->send_grad[j].n; i++)
            used |= !strcmp(r->send_grad[j].v[i].req, name);
        if (!used)
            return name;
        name = cg_fmt(c, "%s_%d", base, k);
    }
}

/* Slot buffers of chunk j: received and kept activations, inputs, and the
 * boundary lists. */
static void chunk_slots(Cg *c, CgRankProg *r, int j, ChunkBufs *cb)
{
    const IrGraph *g = c->g;
    int s = r->stage[j];
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        if (x->producer < 0 || x->producer >= g->nfwd || t == g->loss)
            continue;
        int ps = c->node_stage[x->producer];
        const char *req = NULL;
        bool recv = ps < s && c->last_stage[t] >= s;
        bool kept = ps == s && c->saved[t];
        if (!recv && !kept)
            continue;
        int buf = cg_buf_new(c, r, CG_B_SLOT, tensor_type(c, t), cg_numel(c, t, &c->canon[t]), t,
                             "", "", cg_fmt(c, "%s%s", cg_shape(c, t, &c->canon[t]),
                                            recv ? ": received from the previous stage" : ""));
        r->bufs.v[buf]->chunk = j;
        vec_push(cb->slots, ((Avail){t, c->canon[t], buf, false}));
        if (recv)
            vec_push(r->recv_act[j], ((CgIo){t, buf, NULL}));
        if (c->last_stage[t] > s) {
            req = request_name(c, r, j, "req_", t);
            vec_push(r->send_act[j], ((CgIo){t, buf, req}));
        }
        if (recv && c->has_grad[t]) {
            int gb = cg_buf_new(c, r, CG_B_SLOT, CG_ACT, cg_numel(c, t, &c->gsh[t]), t, "d_",
                                "_send", cg_fmt(c, "%s: gradient for the previous stage",
                                                cg_shape(c, t, &c->gsh[t])));
            r->bufs.v[gb]->chunk = j;
            const char *greq = request_name(c, r, j, "req_d_", t); /* before vec_push grows n */
            vec_push(r->send_grad[j], ((CgIo){t, gb, greq}));
        }
        if (c->last_stage[t] > s && c->has_grad[t])
            vec_push(r->recv_grad[j], ((CgIo){t, -1, NULL}));
    }
    /* Inputs, in every sharding this stage's nodes read them. */
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (c->node_stage[i] != s)
            continue;
        for (int k = 0; k < n->nin; k++) {
            int t = n->in[k];
            if (g->tensors[t].role != IR_INPUT)
                continue;
            PassSharding sh = cg_need(c, n, k);
            bool have = false;
            for (int m = 0; m < cb->slots.n; m++)
                have |= cb->slots.v[m].t == t && pass_sharding_eq(&cb->slots.v[m].sh, &sh);
            if (have)
                continue;
            int buf = cg_buf_new(c, r, CG_B_SLOT, CG_I32, cg_numel(c, t, &sh), t, "", "",
                                 cg_shape(c, t, &sh));
            r->bufs.v[buf]->chunk = j;
            vec_push(cb->slots, ((Avail){t, sh, buf, false}));
        }
    }
}

/* Storage, gradient accumulator and optimizer state of every parameter this
 * pipeline rank holds. */
static void param_bufs(Cg *c, CgRankProg *r)
{
    int np = c->nparams;
    r->pbuf = ir_alloc(c->arena, sizeof(int) * (size_t)(np + 1));
    r->gbuf = ir_alloc(c->arena, sizeof(int) * (size_t)(np + 1));
    r->gsbuf = ir_alloc(c->arena, sizeof(int) * (size_t)(np + 1));
    for (int k = 0; k < np; k++) {
        const CgParamPlan *pp = &c->params[k];
        r->pbuf[k] = r->gbuf[k] = r->gsbuf[k] = -1;
        if (!(pp->ppmask >> r->pp_rank & 1))
            continue;
        vec_push(r->params, k);
        int t = pp->tensor;
        const char *shape = cg_shape(c, t, &pp->store);
        bool z3 = pp->zshard && c->p->zero == 3, z2 = pp->zshard && c->p->zero >= 2;
        r->pbuf[k] = cg_buf_new(c, r, CG_B_PARAM, CG_ACT, z3 ? pp->shard : pp->padded, t, "", "",
                                z3 ? cg_fmt(c, "%s, ZeRO-3 shard of %lld", shape, (long long)pp->shard)
                                   : shape);
        r->gbuf[k] = cg_buf_new(c, r, CG_B_GRAD, CG_GRAD, z2 ? pp->shard : pp->padded, t, "d_", "",
                                z2 ? cg_fmt(c, "gradient, shard of %lld", (long long)pp->shard)
                                   : cg_fmt(c, "%s%s: gradient", shape,
                                            pp->pmask ? " summed per step" : ""));
        if (pp->zshard && c->p->zero == 1)
            r->gsbuf[k] = cg_buf_new(c, r, CG_B_GRAD, CG_GRAD, pp->shard, t, "d_", "_shard",
                                     "reduce-scattered gradient");
    }
}

void cg_lower(Cg *c, CgRankProg *r)
{
    param_bufs(c, r);
    r->ops = ir_alloc(c->arena, sizeof *r->ops * (size_t)(2 * r->nchunks));
    ChunkBufs *cb = ir_alloc(c->arena, sizeof *cb * (size_t)r->nchunks);
    for (int j = 0; j < r->nchunks; j++)
        chunk_slots(c, r, j, &cb[j]);
    for (int j = 0; j < r->nchunks; j++) {
        lower_forward(c, r, j, &cb[j]);
        lower_backward(c, r, j, &cb[j]);
    }
    for (int j = 0; j < r->nchunks; j++)
        vec_free(cb[j].slots);
}
