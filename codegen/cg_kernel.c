/* cg_kernel.c: the runtime call computing one node on one rank. Sizes are
 * the node's local sizes under its strategy (pass_local_sizes: a split dim
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
    const PassStrategy *s;
    int64_t local[64];
} K;

static const IrTensor *T(const K *k, int t) { return &k->c->g->tensors[t]; }

static int64_t lnumel(const K *k, int t)
{
    int64_t n = 1;
    for (int i = 0; i < T(k, t)->rank; i++)
        n *= k->local[T(k, t)->dim[i]];
    return n;
}

/* Product of local sizes of t's dims [from, to). */
static int64_t lspan(const K *k, int t, int from, int to)
{
    int64_t n = 1;
    for (int i = from; i < to; i++)
        n *= k->local[T(k, t)->dim[i]];
    return n;
}

/* "g_coord[a] * size" when dim d is split over axis a, else "0". */
static const char *offset_of(const K *k, int d, int64_t size)
{
    for (int a = 0; a < k->c->naxes; a++)
        if (k->s->dim[a] == d)
            return cg_fmt(k->c, "(int64_t)g_coord[%d] * %lld", a, (long long)size);
    return "0";
}

static const char *comm_of(const K *k, int d)
{
    for (int a = 0; a < k->c->naxes; a++)
        if (k->s->dim[a] == d)
            return cg_fmt(k->c, "g_comm[%d]", 1 << a);
    return "NULL";
}

static const char *b(bool v) { return v ? "true" : "false"; }

/* A float literal C accepts: 1e-05f, 10000.0f. */
static const char *flt(Cg *c, double v)
{
    const char *s = cg_fmt(c, "%.9g", v);
    return cg_fmt(c, "%s%sf", s, strpbrk(s, ".eEn") ? "" : ".0");
}

const char *cg_sizeof(CgType t)
{
    return t == CG_ACT ? "sizeof(rt_act)" : t == CG_F32 ? "sizeof(float)" : "sizeof(int32_t)";
}

bool cg_kernel_accumulates(const IrNode *n, int j)
{
    switch (n->op) {
    case IR_OP_EMBEDDING_BWD: return true;
    case IR_OP_RMSNORM_BWD: return j == 1;
    case IR_OP_LAYERNORM_BWD: return j >= 1;
    default: return false;
    }
}

/* A MATMUL's GEMM: sizes and transposes from its local shapes. */
typedef struct Gemm {
    int64_t M, N, K;
    bool ta, tb;
} Gemm;

static Gemm gemm_of(const K *k)
{
    const IrNode *n = k->n;
    int x = n->in[0], y = n->in[1];
    const IrAttrs *at = &n->attr;
    Gemm m = {.K = 1};
    for (int i = 0; i < at->ncontract; i++)
        m.K *= k->local[at->contract[i]];
    m.M = lnumel(k, x) / m.K;
    m.N = lnumel(k, y) / m.K;
    m.ta = T(k, x)->dim[0] == at->contract[0];
    m.tb = T(k, y)->dim[0] != at->contract[0];
    return m;
}

static char *matmul(K *k, const CgArgs *a)
{
    Gemm m = gemm_of(k);
    return (char *)cg_fmt(k->c, "%s(%s, %s, %s, %lld, %lld, %lld, %s, %s, %s);",
                          a->grad_out ? "rt_matmul_grad" : "rt_matmul", a->out[0],
                          a->in[0], a->in[1], (long long)m.M, (long long)m.N, (long long)m.K,
                          b(m.ta), b(m.tb), b(a->accumulate));
}

static char *rope(K *k, const CgArgs *a, bool inverse)
{
    int x = k->n->in[0];
    int pos = k->n->attr.dim[0], rot = k->n->attr.dim[1];
    int p = ir_tensor_dim_pos(k->c->g, x, pos), r = T(k, x)->rank;
    if (p < 0 || T(k, x)->dim[r - 1] != rot)
        ir_die("codegen: rope node %d has no position dim or does not rotate its last dim", k->n->id);
    int64_t outer = lspan(k, x, 0, p), seq = k->local[pos], inner = lspan(k, x, p + 1, r - 1);
    const IrRopeScaling *rs = &k->n->attr.rope;
    if (rs->kind == IR_ROPE_LLAMA3)
        return (char *)cg_fmt(k->c, "rt_rope_llama3(%s, %s, %lld, %lld, %lld, %lld, %s, %s, %s, %s, "
                              "%s, %s, %s);", a->out[0], a->in[0], (long long)outer, (long long)seq,
                              (long long)inner, (long long)k->local[rot], offset_of(k, pos, seq),
                              flt(k->c, k->n->attr.theta), flt(k->c, rs->factor),
                              flt(k->c, rs->low_freq_factor), flt(k->c, rs->high_freq_factor),
                              flt(k->c, (double)rs->original_max_position), b(inverse));
    return (char *)cg_fmt(k->c, "rt_rope(%s, %s, %lld, %lld, %lld, %lld, %s, %s, %s);", a->out[0],
                          a->in[0], (long long)outer, (long long)seq, (long long)inner,
                          (long long)k->local[rot], offset_of(k, pos, seq), flt(k->c, k->n->attr.theta),
                          b(inverse));
}

/* Attention sizes B, S, H, KVH, D from q [B, S, H, D] and k [B, S, KVH, D]. */
static const char *attn_sizes(K *k)
{
    const IrTensor *q = T(k, k->f->in[0]), *kk = T(k, k->f->in[1]);
    return cg_fmt(k->c, "%lld, %lld, %lld, %lld, %lld, %s, %lld", (long long)k->local[q->dim[0]],
                  (long long)k->local[q->dim[1]], (long long)k->local[q->dim[2]],
                  (long long)k->local[kk->dim[2]], (long long)k->local[q->dim[3]],
                  b(k->f->attr.causal), (long long)k->f->attr.window);
}

/* Elementwise binary: the larger operand first, the broadcast one second. */
static char *binary(K *k, const CgArgs *a, const char *fn)
{
    int x = k->n->in[0], y = k->n->in[1];
    const char *ax = a->in[0], *ay = a->in[1];
    if (T(k, x)->rank < T(k, y)->rank) {
        int t = x;
        x = y, y = t;
        const char *s = ax;
        ax = ay, ay = s;
    }
    return (char *)cg_fmt(k->c, "%s(%s, %s, %s, %lld, %lld);", fn, a->out[0], ax, ay,
                          (long long)lnumel(k, x), (long long)lnumel(k, y));
}

/* Rows and columns of a norm: the weight's dims are the columns. */
static void norm_shape(K *k, int64_t *rows, int64_t *cols)
{
    *cols = lnumel(k, k->f->in[1]);
    *rows = lnumel(k, k->f->in[0]) / *cols;
}

static void vocab_shape(K *k, int logits, int64_t *vl, int *vd)
{
    const IrTensor *l = T(k, logits);
    *vd = l->dim[l->rank - 1];
    *vl = k->local[*vd];
}

/* Node n on this rank: its forward node, strategy and local dim sizes. */
static K k_of(Cg *c, const IrNode *n)
{
    K k = {.c = c, .n = n, .f = n->fwd >= 0 ? &c->g->nodes[n->fwd] : n, .s = cg_strategy(c, n)};
    if (c->g->ndims > 64)
        ir_die("codegen: more than 64 dims");
    pass_local_sizes(c->g, n, &c->mesh, k.s, c->dim, k.local);
    return k;
}

char *cg_kernel(Cg *c, const IrNode *n, const CgArgs *a)
{
    K k = k_of(c, n);
    int64_t rows, cols, vl;
    int vd;
    switch (n->op) {
    case IR_OP_EMBEDDING: {
        int ids = n->in[0], tab = n->in[1], v = T(&k, tab)->dim[0];
        int64_t vlocal = k.local[v];
        return (char *)cg_fmt(c, "rt_embedding_fwd(%s, %s, %s, %lld, %lld, %s, %lld);", a->out[0],
                              a->in[0], a->in[1], (long long)lnumel(&k, ids), (long long)vlocal,
                              offset_of(&k, v, vlocal), (long long)(lnumel(&k, tab) / vlocal));
    }
    case IR_OP_EMBEDDING_BWD: {
        int ids = n->in[0], tab = k.f->in[1], v = T(&k, tab)->dim[0];
        int64_t vlocal = k.local[v];
        return (char *)cg_fmt(c, "rt_embedding_bwd(%s, %s, %s, %lld, %lld, %s, %lld);", a->out[0],
                              a->in[0], a->in[1], (long long)lnumel(&k, ids), (long long)vlocal,
                              offset_of(&k, v, vlocal), (long long)(lnumel(&k, tab) / vlocal));
    }
    case IR_OP_MATMUL: return matmul(&k, a);
    case IR_OP_RMSNORM:
        norm_shape(&k, &rows, &cols);
        if (a->sum_of[0])
            return (char *)cg_fmt(c, "rt_add_rmsnorm_fwd(%s, %s, %s, %s, %s, %s, %lld, %lld, %s);",
                                  a->in[0], a->out[0], a->out[1], a->sum_of[0], a->sum_of[1], a->in[1],
                                  (long long)rows, (long long)cols, flt(c, n->attr.eps));
        return (char *)cg_fmt(c, "rt_rmsnorm_fwd(%s, %s, %s, %s, %lld, %lld, %s);", a->out[0],
                              a->out[1], a->in[0], a->in[1], (long long)rows, (long long)cols,
                              flt(c, n->attr.eps));
    case IR_OP_RMSNORM_BWD:
        norm_shape(&k, &rows, &cols);
        return (char *)cg_fmt(c, "rt_rmsnorm_bwd(%s, %s, %s, %s, %s, %s, %s, %lld, %lld);", a->out[0],
                              a->out[1], a->in[0], a->in[1], a->in[2], a->in[3],
                              a->addend ? a->addend : "NULL", (long long)rows, (long long)cols);
    case IR_OP_LAYERNORM:
        norm_shape(&k, &rows, &cols);
        if (a->sum_of[0])
            return (char *)cg_fmt(c, "rt_add_layernorm_fwd(%s, %s, %s, %s, %s, %s, %s, %s, %lld, %lld, %s);",
                                  a->in[0], a->out[0], a->out[1], a->out[2], a->sum_of[0], a->sum_of[1],
                                  a->in[1], a->in[2], (long long)rows, (long long)cols, flt(c, n->attr.eps));
        return (char *)cg_fmt(c, "rt_layernorm_fwd(%s, %s, %s, %s, %s, %s, %lld, %lld, %s);",
                              a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2],
                              (long long)rows, (long long)cols, flt(c, n->attr.eps));
    case IR_OP_LAYERNORM_BWD:
        norm_shape(&k, &rows, &cols);
        return (char *)cg_fmt(c, "rt_layernorm_bwd(%s, %s, %s, %s, %s, %s, %s, %s, %s, %lld, %lld);",
                              a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2],
                              a->in[3], a->in[4], a->addend ? a->addend : "NULL", (long long)rows,
                              (long long)cols);
    case IR_OP_ROPE: return rope(&k, a, false);
    case IR_OP_ROPE_BWD: return rope(&k, a, true);
    case IR_OP_ATTENTION:
        return (char *)cg_fmt(c, "rt_attention_fwd(%s, %s, %s, %s, %s, %s);", a->out[0], a->out[1],
                              a->in[0], a->in[1], a->in[2], attn_sizes(&k));
    case IR_OP_ATTENTION_BWD:
        return (char *)cg_fmt(c, "rt_attention_bwd(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s);",
                              a->out[0], a->out[1], a->out[2], a->in[0], a->in[1], a->in[2],
                              a->in[3], a->in[4], a->in[5], attn_sizes(&k));
    case IR_OP_SILU:
    case IR_OP_GELU:
        return (char *)cg_fmt(c, "rt_%s_fwd(%s, %s, %lld);", n->op == IR_OP_SILU ? "silu" : "gelu",
                              a->out[0], a->in[0], (long long)lnumel(&k, n->out[0]));
    case IR_OP_SILU_BWD:
    case IR_OP_GELU_BWD:
        return (char *)cg_fmt(c, "rt_%s_bwd(%s, %s, %s, %lld);",
                              n->op == IR_OP_SILU_BWD ? "silu" : "gelu", a->out[0], a->in[0],
                              a->in[1], (long long)lnumel(&k, n->out[0]));
    case IR_OP_SWIGLU:
        return (char *)cg_fmt(c, "rt_swiglu_fwd(%s, %s, %s, %lld);", a->out[0], a->in[0], a->in[1],
                              (long long)lnumel(&k, n->out[0]));
    case IR_OP_SWIGLU_BWD:
        return (char *)cg_fmt(c, "rt_swiglu_bwd(%s, %s, %s, %s, %s, %lld);", a->out[0], a->out[1], a->in[0],
                              a->in[1], a->in[2], (long long)lnumel(&k, n->in[2]));
    case IR_OP_ADD: return binary(&k, a, "rt_add");
    case IR_OP_MUL: return binary(&k, a, "rt_mul");
    case IR_OP_SOFTMAX:
    case IR_OP_SOFTMAX_BWD: {
        int x = n->in[n->op == IR_OP_SOFTMAX ? 0 : 1];
        cols = k.local[T(&k, x)->dim[T(&k, x)->rank - 1]];
        rows = lnumel(&k, x) / cols;
        if (n->op == IR_OP_SOFTMAX)
            return (char *)cg_fmt(c, "rt_softmax_fwd(%s, %s, %lld, %lld);", a->out[0], a->in[0],
                                  (long long)rows, (long long)cols);
        return (char *)cg_fmt(c, "rt_softmax_bwd(%s, %s, %s, %lld, %lld);", a->out[0], a->in[0],
                              a->in[1], (long long)rows, (long long)cols);
    }
    case IR_OP_CROSS_ENTROPY:
        vocab_shape(&k, n->in[0], &vl, &vd);
        return (char *)cg_fmt(c, "rt_cross_entropy_fwd(g_loss, %s, %s, %s, %lld, %lld, %s, %lld, %s);",
                              a->out[1], a->in[0], a->in[1], (long long)lnumel(&k, n->in[1]),
                              (long long)vl, offset_of(&k, vd, vl), (long long)c->total_rows,
                              comm_of(&k, vd));
    case IR_OP_CROSS_ENTROPY_BWD:
        vocab_shape(&k, n->in[0], &vl, &vd);
        return (char *)cg_fmt(c, "rt_cross_entropy_bwd(%s, %s, %s, %s, %s, %lld, %lld, %s, %lld);",
                              a->out[0], a->in[0], a->in[1], a->in[2], a->in[3],
                              (long long)lnumel(&k, n->in[1]), (long long)vl, offset_of(&k, vd, vl),
                              (long long)c->total_rows);
    case IR_OP_REDUCE_SUM:
        cols = lnumel(&k, n->out[0]);
        return (char *)cg_fmt(c, "%s(%s, %s, %lld, %lld, %s);",
                              a->grad_out ? "rt_reduce_rows_grad" : "rt_reduce_rows", a->out[0], a->in[0],
                              (long long)(lnumel(&k, n->in[0]) / cols), (long long)cols,
                              b(a->accumulate));
    case IR_NUM_OPS: break;
    }
    ir_die("codegen: no kernel for op %d", (int)n->op);
}

/* GEMMs of one shape as one rt_matmul_batch (rt_matmul_grad_batch): n[i]
 * with a[i], each MATMUL whose rt_matmul the call replaces. Sibling GEMMs
 * (pass_gemm_batch) have one shape; anything else is a codegen bug. The
 * pointer arrays are locals of a block, which C and C++ both take. */
char *cg_kernel_batch(Cg *c, const IrNode *const *n, const CgArgs *a, int count)
{
    if (count < 2 || count > PASS_GEMM_BATCH_MAX)
        ir_die("codegen: a batch of %d GEMMs", count);
    Gemm m0 = {0};
    const char *cs = "", *as = "", *bs = "";
    for (int i = 0; i < count; i++) {
        if (n[i]->op != IR_OP_MATMUL)
            ir_die("codegen: node %d batched as a GEMM", n[i]->id);
        K k = k_of(c, n[i]);
        Gemm m = gemm_of(&k);
        if (i == 0)
            m0 = m;
        else if (m.M != m0.M || m.N != m0.N || m.K != m0.K || m.ta != m0.ta || m.tb != m0.tb ||
                 a[i].accumulate != a[0].accumulate || a[i].grad_out != a[0].grad_out)
            ir_die("codegen: GEMMs of nodes %d and %d batched with different shapes", n[0]->id,
                   n[i]->id);
        const char *sep = i ? ", " : "";
        cs = cg_fmt(c, "%s%s%s", cs, sep, a[i].out[0]);
        as = cg_fmt(c, "%s%s%s", as, sep, a[i].in[0]);
        bs = cg_fmt(c, "%s%s%s", bs, sep, a[i].in[1]);
    }
    bool g = a[0].grad_out;
    return (char *)cg_fmt(c,
                          "{ %s *c_[] = {%s}; const rt_act *a_[] = {%s}; const rt_act *b_[] = {%s}; "
                          "%s(%d, c_, a_, b_, %lld, %lld, %lld, %s, %s, %s); }",
                          g ? "rt_grad" : "rt_act", cs, as, bs,
                          g ? "rt_matmul_grad_batch" : "rt_matmul_batch", count, (long long)m0.M,
                          (long long)m0.N, (long long)m0.K, b(m0.ta), b(m0.tb), b(a[0].accumulate));
}
