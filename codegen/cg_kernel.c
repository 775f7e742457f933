/* cg_kernel.c: the runtime call computing one node on one rank, as a typed
 * statement (cg_call, a row of CG_CALLS). Sizes are products of the node's
 * local dim sizes under its strategy (plan_local_sizes: a split dim
 * shrinks, attention's kv heads with its heads); offsets of a split vocabulary
 * or sequence come from the rank's mesh coordinate, g_coord[axis]. Every
 * tensor is row-major in its IR dim order, so a MATMUL is one GEMM whose
 * transposes say whether each operand's contracted dims come first or last. */
#include "cg.h"

#include <string.h>

typedef struct K {
    Cg *c;
    const IrNode *n;
    const IrNode *f;       /* forward node (n itself for forward nodes) */
    const PlanStrategy *s;
    int64_t local[64];
    CgOp *op;              /* where the call goes */
    int piece;
} K;

static const IrTensor *T(const K *k, int t) { return &k->c->g->tensors[t]; }

/* Sizes: t's dims [from, to) under the node's local sizes, all of t's. */
static CgSize span(const K *k, int t, int from, int to) { return cg_sz_dims(k->c, t, k->local, from, to); }
static CgSize numel(const K *k, int t) { return span(k, t, 0, T(k, t)->rank); }
static CgSize dim1(const K *k, int d)
{
    CgSize s = cg_sz_named(NULL, 1, NULL);
    s.nf = 1;
    s.dim[0] = (int16_t)d;
    s.local[0] = s.v = k->local[d];
    return s;
}

/* This rank's offset along dim d (of local size `size`): g_coord[a] * size
 * when d is split over axis a (outer-major over a nested split), else 0. */
static CgArg offset_of(const K *k, int d, CgSize size)
{
    PlanSharding sh = plan_shard_loop(k->s);
    return cg_a_coord_of(&sh, d, size);
}

static CgArg comm_of(const K *k, int d)
{
    for (int a = 0; a < k->c->naxes; a++)
        if (k->s->dim[a] == d)
            return cg_a_comm(1 << a);
    return cg_a_comm(0);
}

#define ARGS CG_ARGS
#define CALL(fn, ...) cg_call(k->c, k->op, k->piece, 0, CG_CALL_##fn, ARGS(__VA_ARGS__))
#define BOOL(v) cg_a_bool(v)
#define SZ(v) cg_a_size(v)
#define FLT(v) cg_a_flt(k->c, v)

bool cg_kernel_accumulates(const IrNode *n, int j)
{
    switch (n->op) {
    case IR_OP_EMBEDDING_BWD: return true;
    case IR_OP_RMSNORM_BWD: return j == 1;
    case IR_OP_LAYERNORM_BWD: return j >= 1;
    case IR_OP_MOE_BWD: return j >= 2; /* the experts' weights */
    case IR_OP_ATTENTION_BWD: return j == 3; /* the sinks (rt_attention_sink_bwd) */
    case IR_OP_CONV1D_BWD: return j >= 1; /* the weight and bias */
    case IR_OP_SSD_BWD: return j == 2 || j == 5; /* A_log and D */
    default: return false;
    }
}

/* A MATMUL's GEMM: sizes and transposes from its local shapes. */
typedef struct Gemm {
    CgSize M, N, K;
    bool ta, tb;
} Gemm;

static Gemm gemm_of(const K *k)
{
    const IrNode *n = k->n;
    int x = n->in[0], y = n->in[1];
    const IrAttrs *at = &n->attr;
    Gemm m;
    m.K = cg_sz_named(NULL, 1, NULL);
    for (int i = 0; i < at->ncontract; i++) {
        m.K.dim[m.K.nf] = (int16_t)at->contract[i];
        m.K.local[m.K.nf++] = k->local[at->contract[i]];
        m.K.v *= k->local[at->contract[i]];
    }
    m.M = cg_sz_div(numel(k, x), m.K);
    m.N = cg_sz_div(numel(k, y), m.K);
    m.ta = T(k, x)->dim[0] == at->contract[0];
    m.tb = T(k, y)->dim[0] != at->contract[0];
    return m;
}

bool cg_gemm_fp8(const Cg *c, const IrNode *n)
{
    const IrNode *f = n->fwd >= 0 ? &c->g->nodes[n->fwd] : n;
    return n->op == IR_OP_MATMUL &&
           plan_gemm_precision(c->g, f, c->p->precision, c->p->lp_bf16_first, c->p->lp_bf16_last) ==
               PLAN_PREC_FP8;
}

/* An FP8 GEMM (docs/precision.md, "What the programs compute"): each
 * operand cast with its own per-tensor scale, E4M3 for the forward's input
 * and weight, E5M2 for the output's gradient (Transformer Engine's hybrid
 * recipe), its amax max-reduced over the axes that split that tensor
 * (plan_amax_axes, which the cost model prices). A backward GEMM's operands
 * are the forward's input or weight, or the gradient of its output. */
static void matmul_fp8(K *k, const CgArgs *a, Gemm m)
{
    const IrNode *n = k->n, *f = k->f;
    int role[2];
    for (int i = 0; i < 2; i++)
        role[i] = n == f ? i : n->in[i] == f->in[0] ? 0 : n->in[i] == f->in[1] ? 1 : 2;
    if (n != f && (role[0] == 2) == (role[1] == 2))
        ir_die("codegen: FP8 backward GEMM %d reads no single output gradient", n->id);
    const PlanStrategy *s = &k->c->p->strategy[f->id];
    CgArg fmt[2], comm[2];
    for (int i = 0; i < 2; i++) {
        fmt[i] = cg_a_sym(role[i] == 2 ? "RT_FP8_E5M2" : "RT_FP8_E4M3");
        comm[i] = cg_a_comm(plan_amax_axes(k->c->g, f, s, role[i]) & ((1 << k->c->naxes) - 1));
    }
    cg_call(k->c, k->op, k->piece, 0, a->grad_out ? CG_CALL_MATMUL_FP8_GRAD : CG_CALL_MATMUL_FP8,
            ARGS(a->out[0], a->in[0], a->in[1], SZ(m.M), SZ(m.N), SZ(m.K), BOOL(m.ta), BOOL(m.tb),
                 BOOL(a->accumulate), fmt[0], fmt[1], comm[0], comm[1]));
}

static void matmul(K *k, const CgArgs *a)
{
    Gemm m = gemm_of(k);
    if (cg_gemm_fp8(k->c, k->n)) {
        matmul_fp8(k, a, m);
        return;
    }
    cg_call(k->c, k->op, k->piece, 0, a->grad_out ? CG_CALL_MATMUL_GRAD : CG_CALL_MATMUL,
            ARGS(a->out[0], a->in[0], a->in[1], SZ(m.M), SZ(m.N), SZ(m.K), BOOL(m.ta), BOOL(m.tb),
                 BOOL(a->accumulate)));
}

static void rope(K *k, const CgArgs *a, bool inverse)
{
    int x = k->n->in[0];
    int pos = k->n->attr.dim[0], rot = k->n->attr.dim[1];
    int p = ir_tensor_dim_pos(k->c->g, x, pos), r = T(k, x)->rank;
    if (p < 0 || T(k, x)->dim[r - 1] != rot)
        ir_die("codegen: rope node %d has no position dim or does not rotate its last dim", k->n->id);
    CgSize outer = span(k, x, 0, p), seq = dim1(k, pos), inner = span(k, x, p + 1, r - 1);
    const IrRopeScaling *rs = &k->n->attr.rope;
    /* Context parallelism's load-balanced order: rows are not positions. */
    bool cp = plan_degree(k->c->p, PLAN_DIM_CP) > 1 && plan_cp_balanced(k->c->g);
    if (rs->kind == IR_ROPE_LLAMA3)
        cg_call(k->c, k->op, k->piece, 0, cp ? CG_CALL_ROPE_LLAMA3_CP : CG_CALL_ROPE_LLAMA3, ARGS( a->out[0], a->in[0], SZ(outer), SZ(seq), SZ(inner), SZ(dim1(k, rot)),
             offset_of(k, pos, seq), FLT(k->n->attr.theta), FLT(rs->factor), FLT(rs->low_freq_factor),
             FLT(rs->high_freq_factor), FLT((double)rs->original_max_position), BOOL(inverse)));
    else
        cg_call(k->c, k->op, k->piece, 0, cp ? CG_CALL_ROPE_CP : CG_CALL_ROPE, ARGS( a->out[0], a->in[0], SZ(outer), SZ(seq), SZ(inner), SZ(dim1(k, rot)),
             offset_of(k, pos, seq), FLT(k->n->attr.theta), BOOL(inverse)));
}

/* Attention sizes B, S, H, KVH, D from q [B, S, H, D] and k [B, S, KVH, D];
 * causal, window. */
#define ATTN_SIZES(k, q, kk)                                                                      \
    SZ(dim1(k, q->dim[0])), SZ(dim1(k, q->dim[1])), SZ(dim1(k, q->dim[2])), SZ(dim1(k, kk->dim[2])), \
        SZ(dim1(k, q->dim[3])), BOOL(k->f->attr.causal),                                           \
        SZ(cg_sz_named("WINDOW", k->f->attr.window, "attention window, 0: none"))

/* Context parallelism (docs/context.md): this rank's queries against the
 * gathered keys, sizes B, Sq (local), Sk (whole), H, KVH, D; causal, window;
 * the CP ranks and this rank's place among them (the trainer knows where
 * its chunks sit). */
static CgSize whole(const K *k, int d)
{
    CgSize s = dim1(k, d);
    s.local[0] = s.v = k->c->dim[d];
    return s;
}
#define ATTN_CP_SIZES(k, q, kk, a)                                                                  \
    SZ(dim1(k, q->dim[0])), SZ(dim1(k, q->dim[1])), SZ(whole(k, q->dim[1])), SZ(dim1(k, q->dim[2])), \
        SZ(dim1(k, kk->dim[2])), SZ(dim1(k, q->dim[3])), BOOL(k->f->attr.causal),                   \
        SZ(cg_sz_named("WINDOW", k->f->attr.window, "attention window, 0: none")), cg_a_mesh(a),     \
        cg_a_axis(a)

/* Elementwise binary: the larger operand first, the broadcast one second. */
static void binary(K *k, const CgArgs *a, CgCallee fn)
{
    int x = k->n->in[0], y = k->n->in[1];
    CgArg ax = a->in[0], ay = a->in[1];
    if (T(k, x)->rank < T(k, y)->rank) {
        int t = x;
        x = y, y = t;
        CgArg s = ax;
        ax = ay, ay = s;
    }
    cg_call(k->c, k->op, k->piece, 0, fn, ARGS(a->out[0], ax, ay, SZ(numel(k, x)), SZ(numel(k, y))));
}

/* One attention kernel (forward or backward) of the variant the plan asks
 * for: the all-to-all or ring context parallelism, the all-gather one, v's
 * own head size, or the plain kernel. */
static void attention_kernel(K *k, const CgArgs *a)
{
    const IrNode *n = k->n;
    const IrTensor *q = T(k, k->f->in[0]), *kv = T(k, k->f->in[1]);
    int cpa;
    if (plan_cp_a2a(k->c->g, k->f, k->s) >= 0) {
        /* All-to-all: the whole sequence of this rank's heads, its rows
         * at the program's chunk positions (docs/context.md). */
        if (n->op == IR_OP_ATTENTION)
            CALL(ATTENTION_A2A_FWD, a->out[0], a->out[1], a->in[0], a->in[1], a->in[2],
                 ATTN_SIZES(k, q, kv));
        else
            CALL(ATTENTION_A2A_BWD, a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2],
                 a->in[3], a->in[4], a->in[5], ATTN_SIZES(k, q, kv));
        return;
    }
    if ((cpa = plan_cp_axis(k->c->g, k->f, k->s)) >= 0 && plan_cp_ring(k->c->g, k->f, k->s)) {
        /* The ring: k and v this rank's rows, like q (docs/context.md). */
        if (n->op == IR_OP_ATTENTION)
            CALL(ATTENTION_RING_FWD, a->out[0], a->out[1], a->in[0], a->in[1], a->in[2],
                 ATTN_SIZES(k, q, kv), cg_a_mesh(cpa), cg_a_axis(cpa));
        else
            CALL(ATTENTION_RING_BWD, a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2],
                 a->in[3], a->in[4], a->in[5], ATTN_SIZES(k, q, kv), cg_a_mesh(cpa), cg_a_axis(cpa));
        return;
    }
    if (cpa >= 0) {
        if (n->op == IR_OP_ATTENTION)
            CALL(ATTENTION_CP_FWD, a->out[0], a->out[1], a->in[0], a->in[1], a->in[2],
                 ATTN_CP_SIZES(k, q, kv, cpa));
        else
            CALL(ATTENTION_CP_BWD, a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2],
                 a->in[3], a->in[4], a->in[5], ATTN_CP_SIZES(k, q, kv, cpa));
        return;
    }
    if (T(k, k->f->in[2])->dim[3] != kv->dim[3]) {
        /* v's own head size (multi-head latent attention; cg_supported
         * refuses it with context parallelism) */
        CgSize dv = dim1(k, T(k, k->f->in[2])->dim[3]);
        if (n->op == IR_OP_ATTENTION)
            CALL(ATTENTION_V_FWD, a->out[0], a->out[1], a->in[0], a->in[1], a->in[2], SZ(dim1(k, q->dim[0])),
                 SZ(dim1(k, q->dim[1])), SZ(dim1(k, q->dim[2])), SZ(dim1(k, kv->dim[2])), SZ(dim1(k, q->dim[3])),
                 SZ(dv), BOOL(k->f->attr.causal),
                 SZ(cg_sz_named("WINDOW", k->f->attr.window, "attention window, 0: none")));
        else
            CALL(ATTENTION_V_BWD, a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2], a->in[3],
                 a->in[4], a->in[5], SZ(dim1(k, q->dim[0])), SZ(dim1(k, q->dim[1])), SZ(dim1(k, q->dim[2])),
                 SZ(dim1(k, kv->dim[2])), SZ(dim1(k, q->dim[3])), SZ(dv), BOOL(k->f->attr.causal),
                 SZ(cg_sz_named("WINDOW", k->f->attr.window, "attention window, 0: none")));
        return;
    }
    if (n->op == IR_OP_ATTENTION)
        CALL(ATTENTION_FWD, a->out[0], a->out[1], a->in[0], a->in[1], a->in[2], ATTN_SIZES(k, q, kv));
    else
        CALL(ATTENTION_BWD, a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2], a->in[3],
             a->in[4], a->in[5], ATTN_SIZES(k, q, kv));
}

/* Rows and columns of a norm: the weight's dims are the columns. */
static void norm_shape(K *k, CgSize *rows, CgSize *cols)
{
    *cols = numel(k, k->f->in[1]);
    *rows = cg_sz_div(numel(k, k->f->in[0]), *cols);
}

/* A grouped rmsnorm (group_dims): rows, this rank's groups (the weight's
 * leading dims) and the columns normalised together. */
static void group_norm_shape(K *k, CgSize *rows, CgSize *groups, CgSize *cols)
{
    int w = k->f->in[1], gd = (int)k->f->attr.group_dims;
    *rows = cg_sz_div(numel(k, k->f->in[0]), numel(k, w));
    *groups = span(k, w, 0, gd);
    *cols = span(k, w, gd, T(k, w)->rank);
}

/* Node n on this rank: its forward node, strategy and local dim sizes. */
static K k_of(Cg *c, CgOp *op, int piece, const IrNode *n)
{
    K k = {.c = c, .n = n, .f = n->fwd >= 0 ? &c->g->nodes[n->fwd] : n, .s = cg_strategy(c, n),
           .op = op, .piece = piece};
    if (c->g->ndims > 64)
        ir_die("codegen: more than 64 dims");
    plan_local_sizes(c->g, n, &c->mesh, k.s, c->dim, k.local);
    return k;
}

static CgArg or_null(bool has, CgArg a) { return has ? a : cg_a_sym("NULL"); }

static void embedding(K *k, const CgArgs *a, CgCallee fn)
{
    int ids = k->n->in[0], tab = k->f->in[1], v = T(k, tab)->dim[0];
    CgSize vl = dim1(k, v);
    cg_call(k->c, k->op, k->piece, 0, fn,
            ARGS(a->out[0], a->in[0], a->in[1], SZ(numel(k, ids)), SZ(vl), offset_of(k, v, vl),
                 SZ(cg_sz_div(numel(k, tab), vl))));
}

static void cross_entropy(K *k, const CgArgs *a)
{
    const IrTensor *l = T(k, k->n->in[0]);
    int vd = l->dim[l->rank - 1];
    CgSize vl = dim1(k, vd), rows = numel(k, k->n->in[1]);
    CgSize total = cg_sz_named("STEP_TOKENS", k->c->total_rows, "tokens per optimizer step");
    /* Shifted targets (multi-token prediction) have no target in the last
     * `by` positions of each sequence: the mean is over the others, as
     * Megatron's MTP loss divides by the rolled loss mask's sum. */
    const IrNode *fwd = k->n->op == IR_OP_CROSS_ENTROPY ? k->n : &k->c->g->nodes[k->n->fwd];
    const IrTensor *tg = T(k, fwd->in[1]);
    if (tg->producer >= 0 && k->c->g->nodes[tg->producer].op == IR_OP_SHIFT) {
        int64_t by = k->c->g->nodes[tg->producer].attr.shift, S = k->c->g->dims[k->c->g->seq_dim].size;
        total = cg_sz_named(cg_fmt(k->c, "STEP_TARGETS_%lld", (long long)by), k->c->g->global_batch * (S - by),
                            "targets per optimizer step after the shift");
    }
    double w = ir_loss_weight(&fwd->attr);
    if (k->n->op == IR_OP_CROSS_ENTROPY)
        CALL(CROSS_ENTROPY_FWD, cg_a_sym("g_loss"), a->out[1], a->in[0], a->in[1], SZ(rows), SZ(vl),
             offset_of(k, vd, vl), SZ(total), FLT(w), comm_of(k, vd));
    else /* the seed d loss / d loss is the loss's weight (cg_bwd.c) */
        CALL(CROSS_ENTROPY_BWD, a->out[0], a->in[0], a->in[1], a->in[2], a->in[3], SZ(rows), SZ(vl),
             offset_of(k, vd, vl), SZ(total));
}

/* Equal routing attributes, field by field (the struct has padding). */
static bool route_eq(const IrRoute *a, const IrRoute *b)
{
    return a->topk == b->topk && a->score == b->score && a->norm == b->norm && a->scale == b->scale &&
           a->groups == b->groups && a->group_topk == b->group_topk && a->capacity == b->capacity &&
           a->aux == b->aux && a->zloss == b->zloss;
}

int cg_route_index(const IrGraph *g, const IrNode *n)
{
    const IrNode *f = n->fwd >= 0 ? &g->nodes[n->fwd] : n;
    int k = 0;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *r = &g->nodes[i];
        if (r->op != IR_OP_ROUTE)
            continue;
        if (route_eq(&r->attr.route, &f->attr.route))
            return k;
        bool first = true; /* count distinct routes only */
        for (int j = 0; j < i && first; j++)
            first = !(g->nodes[j].op == IR_OP_ROUTE && route_eq(&g->nodes[j].attr.route, &r->attr.route));
        k += first;
    }
    ir_die("codegen: route node %d not found", f->id);
}

/* route: rows grouped by sequence (capacity and aux count per sequence). */
static void route(K *k, const CgArgs *a)
{
    const IrGraph *g = k->c->g;
    int x = k->f->in[0];
    const IrTensor *t = T(k, x);
    CgSize E = dim1(k, t->dim[t->rank - 1]);
    CgSize S = ir_tensor_has_dim(g, x, g->seq_dim) ? dim1(k, g->seq_dim) : cg_sz_named(NULL, 1, NULL);
    CgSize seqs = cg_sz_div(cg_sz_div(numel(k, x), E), S);
    CgArg r = cg_a_sym(cg_fmt(k->c, "&cg_routes[%d]", cg_route_index(g, k->n)));
    int64_t seq = g->dims[g->seq_dim].size;
    CgSize gs = cg_sz_named("STEP_SEQS", k->c->total_rows / (seq > 0 ? seq : 1),
                            "sequences per optimizer step");
    if (k->n->op == IR_OP_ROUTE) {
        /* The regularisers' value joins the objective in g_loss[2], which
         * the trainer sums over the world: a copy on r ranks of a mesh axis
         * the route does not split adds 1/r of it. */
        int copies = 1;
        for (int ax = 0; ax < k->c->naxes; ax++)
            if (k->s->dim[ax] < 0)
                copies *= k->c->mesh.size[ax];
        if (a->recompute) /* the forward pass counted them */
            CALL(ROUTE_FWD, a->out[0], a->in[0], SZ(seqs), SZ(S), SZ(E), r, cg_a_sym("NULL"), FLT(0),
                 SZ(gs));
        else
            CALL(ROUTE_FWD, a->out[0], a->in[0], SZ(seqs), SZ(S), SZ(E), r, cg_a_sym("g_loss + 2"),
                 FLT(1.0 / copies), SZ(gs));
        return;
    }
    CALL(ROUTE_BWD, a->out[0], a->in[0], a->in[1], a->in[2], SZ(seqs), SZ(S), SZ(E), r, SZ(gs));
}

/* moe: the exchange axes' communicator (NULL without), token rows, and the
 * gates' columns: every expert's under an exchange, the local ones else. */
/* The runtime's RtMoeAct constants are named after the rows of
 * ir/moe_acts.def: RT_MOE_<ID>. */
static const char *const moe_act_id[IR_NMOE_ACTS] = {
#define MOE_ACT(ID, name, gated, clamped) [IR_MOE_##ID] = #ID,
#include "moe_acts.def"
#undef MOE_ACT
};

/* The routed rows ZB-H1's W slot of k's MOE holds (plan_moe_wslot_rows):
 * the expected rows times the plan's moe_wslot, or the dropless worst case
 * (moe_wslot 0, and ZeRO-2/3: B cannot add an overflowing micro-batch's
 * weight gradients into W's temporary accumulator, so none may overflow). */
static CgSize wslot_rows(K *k, CgSize tok, int ep, CgSize El)
{
    const Plan *p = k->c->p;
    double f = p->zero >= 2 ? 0 : p->moe_wslot;
    return cg_sz_named("MOE_W_ROWS", plan_moe_wslot_rows(k->c->g, k->f, tok.v, ep, El.v, f),
                       f > 0 ? "routed rows a W slot holds (expected rows x the plan's moe_wslot; more run "
                               "their weight gradients in B)"
                             : "most routed rows a W slot holds (tokens x ep x min(topk, local experts))");
}

int64_t cg_moe_wslot(Cg *c, CgOp *op, int piece, const IrNode *n)
{
    K kk = k_of(c, op, piece, n), *k = &kk;
    const IrTensor *h = T(k, k->f->in[0]), *wg = T(k, k->f->in[2]);
    CgSize D = dim1(k, h->dim[h->rank - 1]), El = dim1(k, wg->dim[0]), F = dim1(k, wg->dim[2]);
    CgSize tok = cg_sz_div(numel(k, k->f->in[0]), D);
    CgSize rows = wslot_rows(k, tok, plan_ep_degree(c->g, k->f, &c->mesh, k->s), El);
    return plan_moe_wslot_numel(k->f, rows.v, D.v, F.v);
}

static void moe(K *k, const CgArgs *a)
{
    const IrGraph *g = k->c->g;
    const IrTensor *h = T(k, k->f->in[0]), *wg = T(k, k->f->in[2]);
    CgSize D = dim1(k, h->dim[h->rank - 1]), El = dim1(k, wg->dim[0]), F = dim1(k, wg->dim[2]);
    CgSize tok = cg_sz_div(numel(k, k->f->in[0]), D);
    int mask = 0, ep = plan_ep_degree(g, k->f, &k->c->mesh, k->s);
    for (int ax = 0; ax < k->c->naxes; ax++)
        if (k->s->xchg >> ax & 1)
            mask |= 1 << ax;
    CgSize cols = El;
    if (ep > 1) {
        cols = cg_sz_named(NULL, El.v * ep, NULL);
        cols.nf = 1;
        cols.dim[0] = (int16_t)wg->dim[0];
        cols.local[0] = El.v * ep;
    }
    IrMoeSlots sl = ir_moe_slots(k->n);
    if (k->n->attr.moe_act == IR_MOE_SWIGLU && sl.b_up < 0 && !a->wpart) { /* the SwiGLU call of every model before acts */
        if (k->n->op == IR_OP_MOE)
            CALL(MOE_FWD, cg_a_comm(mask), a->out[0], a->in[0], a->in[1], a->in[2], a->in[3], a->in[4],
                 SZ(tok), SZ(D), SZ(cols), SZ(El), SZ(F));
        else
            CALL(MOE_BWD, cg_a_comm(mask), a->out[0], a->out[1], a->out[2], a->out[3], a->out[4],
                 a->in[0], a->in[1], a->in[2], a->in[3], a->in[4], a->in[5], SZ(tok), SZ(D), SZ(cols),
                 SZ(El), SZ(F));
        return;
    }
    /* any act of ir/moe_acts.def: RT_MOE_<ID>, absent weights and biases NULL */
    CgArg act = cg_a_sym(cg_fmt(k->c, "RT_MOE_%s", moe_act_id[k->n->attr.moe_act]));
#define IN_(i) or_null((i) >= 0, a->in[(i) < 0 ? 0 : (i)])
#define OUT_(i) or_null((i) >= 0, a->out[(i) < 0 ? 0 : (i)])
    /* B gets the experts' gradient accumulators, for a micro-batch that
     * overflows its W slot; not under ZeRO-2/3 (W's temporary: wslot_rows). */
#define BOUT_(i) or_null((i) >= 0 && k->c->p->zero < 2, a->out[(i) < 0 ? 0 : (i)])
    if (a->wpart == 1)
        CALL(MOE_ACT_BWD_B, cg_a_comm(mask), a->out[0], a->out[1], BOUT_(sl.w_gate), BOUT_(sl.w_up),
             BOUT_(sl.w_down), BOUT_(sl.b_gate), BOUT_(sl.b_up), a->wslot, SZ(wslot_rows(k, tok, ep, El)),
             a->in[0], a->in[1], IN_(sl.w_gate), a->in[sl.w_up], a->in[sl.w_down], IN_(sl.b_gate), IN_(sl.b_up),
             a->in[sl.dy], act, SZ(tok), SZ(D), SZ(cols), SZ(El), SZ(F));
#undef BOUT_
    else if (a->wpart == 2)
        CALL(MOE_ACT_BWD_W, OUT_(sl.w_gate), a->out[sl.w_up], a->out[sl.w_down], OUT_(sl.b_gate), OUT_(sl.b_up),
             a->wslot, SZ(wslot_rows(k, tok, ep, El)), act, SZ(D), SZ(El), SZ(F));
    else if (k->n->op == IR_OP_MOE)
        CALL(MOE_ACT_FWD, cg_a_comm(mask), a->out[0], a->in[0], a->in[1], IN_(sl.w_gate), a->in[sl.w_up],
             a->in[sl.w_down], IN_(sl.b_gate), IN_(sl.b_up), act, SZ(tok), SZ(D), SZ(cols), SZ(El), SZ(F));
    else
        CALL(MOE_ACT_BWD, cg_a_comm(mask), a->out[0], a->out[1], OUT_(sl.w_gate), a->out[sl.w_up],
             a->out[sl.w_down], OUT_(sl.b_gate), OUT_(sl.b_up), a->in[0], a->in[1], IN_(sl.w_gate),
             a->in[sl.w_up], a->in[sl.w_down], IN_(sl.b_gate), IN_(sl.b_up), a->in[sl.dy], act, SZ(tok),
             SZ(D), SZ(cols), SZ(El), SZ(F));
#undef IN_
#undef OUT_
}

void cg_kernel(Cg *c, CgOp *op, int piece, const IrNode *n, const CgArgs *a)
{
    K kk = k_of(c, op, piece, n), *k = &kk;
    CgSize rows, cols;
    switch (n->op) {
    case IR_OP_EMBEDDING: embedding(k, a, CG_CALL_EMBEDDING_FWD); return;
    case IR_OP_EMBEDDING_BWD: embedding(k, a, CG_CALL_EMBEDDING_BWD); return;
    case IR_OP_MATMUL: matmul(k, a); return;
    case IR_OP_RMSNORM:
        if (n->attr.group_dims) {
            CgSize groups;
            group_norm_shape(k, &rows, &groups, &cols);
            CALL(RMSNORM_GROUP_FWD, a->out[0], a->out[1], a->in[0], a->in[1], SZ(rows), SZ(groups), SZ(cols),
                 FLT(n->attr.eps));
            return;
        }
        norm_shape(k, &rows, &cols);
        if (a->has_sum)
            CALL(ADD_RMSNORM_FWD, a->in[0], a->out[0], a->out[1], a->sum_of[0], a->sum_of[1], a->in[1],
                 SZ(rows), SZ(cols), FLT(n->attr.eps));
        else
            CALL(RMSNORM_FWD, a->out[0], a->out[1], a->in[0], a->in[1], SZ(rows), SZ(cols), FLT(n->attr.eps));
        return;
    case IR_OP_RMSNORM_BWD:
        if (k->f->attr.group_dims) {
            CgSize groups;
            group_norm_shape(k, &rows, &groups, &cols);
            CALL(RMSNORM_GROUP_BWD, a->out[0], a->out[1], a->in[0], a->in[1], a->in[2], a->in[3],
                 or_null(a->has_addend, a->addend), SZ(rows), SZ(groups), SZ(cols));
            return;
        }
        norm_shape(k, &rows, &cols);
        CALL(RMSNORM_BWD, a->out[0], a->out[1], a->in[0], a->in[1], a->in[2], a->in[3],
             or_null(a->has_addend, a->addend), SZ(rows), SZ(cols));
        return;
    case IR_OP_LAYERNORM:
        norm_shape(k, &rows, &cols);
        if (a->has_sum)
            CALL(ADD_LAYERNORM_FWD, a->in[0], a->out[0], a->out[1], a->out[2], a->sum_of[0], a->sum_of[1],
                 a->in[1], a->in[2], SZ(rows), SZ(cols), FLT(n->attr.eps));
        else
            CALL(LAYERNORM_FWD, a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2], SZ(rows),
                 SZ(cols), FLT(n->attr.eps));
        return;
    case IR_OP_LAYERNORM_BWD:
        norm_shape(k, &rows, &cols);
        CALL(LAYERNORM_BWD, a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2], a->in[3],
             a->in[4], or_null(a->has_addend, a->addend), SZ(rows), SZ(cols));
        return;
    case IR_OP_ROPE: rope(k, a, false); return;
    case IR_OP_ROPE_BWD: rope(k, a, true); return;
    case IR_OP_ATTENTION:
    case IR_OP_ATTENTION_BWD: {
        /* Sinks (GPT-OSS, rt.h): the forward kernel's o and lse rescaled after it, their
         * gradient from those before the backward, which reads them as saved. */
        bool sinks = k->f->nin == 4, bwd = n->op == IR_OP_ATTENTION_BWD;
        const IrTensor *tq = T(k, k->f->in[0]);
        CgSize rows = span(k, tq->id, 0, 2), heads = dim1(k, tq->dim[2]), dv = dim1(k, T(k, k->f->in[2])->dim[3]);
        if (sinks && bwd)
            CALL(ATTENTION_SINK_BWD, a->out[3], a->in[3], a->in[4], a->in[5], a->in[6], SZ(rows), SZ(heads), SZ(dv));
        attention_kernel(k, a);
        if (sinks && !bwd)
            CALL(ATTENTION_SINK_FWD, a->out[0], a->out[1], a->in[3], SZ(rows), SZ(heads), SZ(dv));
        return;
    }
    case IR_OP_SILU: CALL(SILU_FWD, a->out[0], a->in[0], SZ(numel(k, n->out[0]))); return;
    case IR_OP_GELU: CALL(GELU_FWD, a->out[0], a->in[0], SZ(numel(k, n->out[0]))); return;
    case IR_OP_SILU_BWD: CALL(SILU_BWD, a->out[0], a->in[0], a->in[1], SZ(numel(k, n->out[0]))); return;
    case IR_OP_GELU_BWD: CALL(GELU_BWD, a->out[0], a->in[0], a->in[1], SZ(numel(k, n->out[0]))); return;
    case IR_OP_SWIGLU: CALL(SWIGLU_FWD, a->out[0], a->in[0], a->in[1], SZ(numel(k, n->out[0]))); return;
    case IR_OP_SWIGLU_BWD:
        CALL(SWIGLU_BWD, a->out[0], a->out[1], a->in[0], a->in[1], a->in[2], SZ(numel(k, n->in[2])));
        return;
    case IR_OP_ADD: binary(k, a, CG_CALL_ADD); return;
    case IR_OP_MUL: binary(k, a, CG_CALL_MUL); return;
    case IR_OP_SOFTMAX:
    case IR_OP_SOFTMAX_BWD: {
        int x = n->in[n->op == IR_OP_SOFTMAX ? 0 : 1];
        cols = dim1(k, T(k, x)->dim[T(k, x)->rank - 1]);
        rows = cg_sz_div(numel(k, x), cols);
        if (n->op == IR_OP_SOFTMAX)
            CALL(SOFTMAX_FWD, a->out[0], a->in[0], SZ(rows), SZ(cols));
        else
            CALL(SOFTMAX_BWD, a->out[0], a->in[0], a->in[1], SZ(rows), SZ(cols));
        return;
    }
    case IR_OP_CROSS_ENTROPY:
    case IR_OP_CROSS_ENTROPY_BWD: cross_entropy(k, a); return;
    case IR_OP_SIGMOID: CALL(SIGMOID_FWD, a->out[0], a->in[0], SZ(numel(k, n->out[0]))); return;
    case IR_OP_SIGMOID_BWD:
        CALL(SIGMOID_BWD, a->out[0], a->in[0], a->in[1], SZ(numel(k, n->out[0])));
        return;
    case IR_OP_ROUTE:
    case IR_OP_ROUTE_BWD: route(k, a); return;
    case IR_OP_MOE:
    case IR_OP_MOE_BWD: moe(k, a); return;
    case IR_OP_SHIFT: /* read from the data (cg_lower.c), never a kernel */
        ir_die("codegen: a shift reached the kernels");
    case IR_OP_REDUCE_SUM:
        cols = numel(k, n->out[0]);
        cg_call(c, op, piece, 0, a->grad_out ? CG_CALL_REDUCE_ROWS_GRAD : CG_CALL_REDUCE_ROWS,
                ARGS(a->out[0], a->in[0], SZ(cg_sz_div(numel(k, n->in[0]), cols)), SZ(cols),
                     BOOL(a->accumulate)));
        return;
    case IR_OP_SLICE:
    case IR_OP_SLICE_BWD: {
        /* the last dims, local: x's (cut) and the piece's, never split */
        const IrTensor *x = T(k, k->f->in[0]);
        rows = span(k, x->id, 0, x->rank - 1);
        cols = dim1(k, x->dim[x->rank - 1]);
        CgSize piece = dim1(k, k->f->attr.dim[0]), at =
            cg_sz_named("SLICE_AT", k->f->attr.at, "a slice's offset in its last dim");
        if (n->op == IR_OP_SLICE)
            CALL(SLICE_FWD, a->out[0], a->in[0], SZ(rows), SZ(cols), SZ(piece), SZ(at));
        else
            CALL(SLICE_BWD, a->out[0], a->in[0], SZ(rows), SZ(cols), SZ(piece), SZ(at));
        return;
    }
    case IR_OP_CONCAT:
    case IR_OP_CONCAT_BWD: {
        /* a's rows as outer x bcast x inner, b lacking the bcast run */
        const IrTensor *ta = T(k, k->f->in[0]), *tb = T(k, k->f->in[1]);
        int pos = 0, nbc = ir_concat_bcast(k->c->g, k->f, &pos);
        CgSize outer = span(k, ta->id, 0, pos), bc = span(k, ta->id, pos, pos + nbc);
        CgSize inner = span(k, ta->id, pos + nbc, ta->rank - 1);
        CgSize na = dim1(k, ta->dim[ta->rank - 1]), nb = dim1(k, tb->dim[tb->rank - 1]);
        if (n->op == IR_OP_CONCAT)
            CALL(CONCAT_FWD, a->out[0], a->in[0], a->in[1], SZ(outer), SZ(bc), SZ(inner), SZ(na), SZ(nb));
        else
            CALL(CONCAT_BWD, a->out[0], a->out[1], a->in[0], SZ(outer), SZ(bc), SZ(inner), SZ(na), SZ(nb));
        return;
    }
    case IR_OP_SOFTPLUS: CALL(SOFTPLUS_FWD, a->out[0], a->in[0], SZ(numel(k, n->out[0]))); return;
    case IR_OP_RELU2: CALL(RELU2_FWD, a->out[0], a->in[0], SZ(numel(k, n->out[0]))); return;
    case IR_OP_RELU2_BWD: CALL(RELU2_BWD, a->out[0], a->in[0], a->in[1], SZ(numel(k, n->out[0]))); return;
    case IR_OP_SOFTPLUS_BWD:
        CALL(SOFTPLUS_BWD, a->out[0], a->in[0], a->in[1], SZ(numel(k, n->out[0])));
        return;
    case IR_OP_CONV1D:
    case IR_OP_CONV1D_BWD: {
        /* x [batch, seq, channels...] local (seq never split), w [channels..., K] */
        const IrTensor *x = T(k, k->f->in[0]), *w = T(k, k->f->in[1]);
        CgSize b = dim1(k, x->dim[0]), s = dim1(k, x->dim[1]), ch = span(k, x->id, 2, x->rank);
        CgSize kw = dim1(k, w->dim[w->rank - 1]);
        if (n->op == IR_OP_CONV1D)
            CALL(CONV1D_FWD, a->out[0], a->in[0], a->in[1], a->in[2], SZ(b), SZ(s), SZ(ch), SZ(kw));
        else
            CALL(CONV1D_BWD, a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2], SZ(b), SZ(s),
                 SZ(ch), SZ(kw));
        return;
    }
    case IR_OP_SSD:
    case IR_OP_SSD_BWD: {
        /* x [batch, seq, heads..., P], B [batch, seq, groups..., N]: the
         * local heads and groups (a split of either shrinks both counts
         * alike, so each local head keeps its group) */
        const IrTensor *x = T(k, k->f->in[0]), *B = T(k, k->f->in[3]);
        CgSize b = dim1(k, x->dim[0]), s = dim1(k, x->dim[1]), h = span(k, x->id, 2, x->rank - 1);
        CgSize grp = span(k, B->id, 2, B->rank - 1), p = dim1(k, x->dim[x->rank - 1]);
        CgSize st = dim1(k, B->dim[B->rank - 1]);
        if (n->op == IR_OP_SSD)
            CALL(SSD_FWD, a->out[0], a->in[0], a->in[1], a->in[2], a->in[3], a->in[4], a->in[5], SZ(b), SZ(s),
                 SZ(h), SZ(grp), SZ(p), SZ(st));
        else
            CALL(SSD_BWD, a->out[0], a->out[1], a->out[2], a->out[3], a->out[4], a->out[5], a->in[0], a->in[1],
                 a->in[2], a->in[3], a->in[4], a->in[5], a->in[6], SZ(b), SZ(s), SZ(h), SZ(grp), SZ(p), SZ(st));
        return;
    }
    case IR_NUM_OPS: break;
    }
    ir_die("codegen: no kernel for op %d", (int)n->op);
}

/* GEMMs of one shape as one rt_matmul_batch (rt_matmul_grad_batch): n[i]
 * with a[i], each MATMUL whose rt_matmul the call replaces. Sibling GEMMs
 * (plan_gemm_batch) have one shape; anything else is a codegen bug. */
void cg_kernel_batch(Cg *c, CgOp *op, int piece, const IrNode *const *n, const CgArgs *a, int count)
{
    if (count < 2 || count > PLAN_GEMM_BATCH_MAX)
        ir_die("codegen: a batch of %d GEMMs", count);
    Gemm m0;
    memset(&m0, 0, sizeof m0);
    int cs[PLAN_GEMM_BATCH_MAX], as[PLAN_GEMM_BATCH_MAX], bs[PLAN_GEMM_BATCH_MAX];
    for (int i = 0; i < count; i++) {
        if (n[i]->op != IR_OP_MATMUL)
            ir_die("codegen: node %d batched as a GEMM", n[i]->id);
        K k = k_of(c, op, piece, n[i]);
        Gemm m = gemm_of(&k);
        if (i == 0)
            m0 = m;
        else if (m.M.v != m0.M.v || m.N.v != m0.N.v || m.K.v != m0.K.v || m.ta != m0.ta ||
                 m.tb != m0.tb || a[i].accumulate != a[0].accumulate || a[i].grad_out != a[0].grad_out)
            ir_die("codegen: GEMMs of nodes %d and %d batched with different shapes", n[0]->id,
                   n[i]->id);
        if (a[i].out[0].kind != CG_A_BUF || a[i].in[0].kind != CG_A_BUF || a[i].in[1].kind != CG_A_BUF)
            ir_die("codegen: a batched GEMM of node %d not over buffers", n[i]->id);
        cs[i] = a[i].out[0].buf;
        as[i] = a[i].in[0].buf;
        bs[i] = a[i].in[1].buf;
    }
    cg_call(c, op, piece, 0, a[0].grad_out ? CG_CALL_MATMUL_GRAD_BATCH : CG_CALL_MATMUL_BATCH,
            ARGS(cg_a_bufs(c, cs, count), cg_a_bufs(c, as, count), cg_a_bufs(c, bs, count), SZ(m0.M),
                 SZ(m0.N), SZ(m0.K), BOOL(m0.ta), BOOL(m0.tb), BOOL(a[0].accumulate)));
}
