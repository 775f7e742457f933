/* shape.c: the shape rule of every operator in ops.def, and ir_node_add,
 * which builds a node with them. A rule checks its inputs' named dims,
 * derives attributes (MATMUL's contracted dims), and creates the outputs.
 * User mistakes are reported at the node's location. Builds on graph.c
 * (tensors, raw nodes), which does not call back. */
#include "ir.h"

#include <string.h>

typedef bool ShapeRule(IrGraph *g, IrNode *n);

#define T(i) (&g->tensors[n->in[i]])

static const char *shp(IrGraph *g, const IrTensor *t)
{
    char buf[512];
    return ir_strdup(g->arena, ir_shape_str(g, t->id, buf, sizeof buf));
}

static const char *dimname(IrGraph *g, int d) { return g->dims[d].name; }

/* Create output i with the given dims. Adding a tensor may move the tensor
 * array, so dims are copied first and input pointers must not be used after. */
static int out(IrGraph *g, IrNode *n, int i, const char *base, IrDtype dt, IrRole role, int rank,
               const int *dims)
{
    int copy[IR_MAX_RANK] = {0};
    memcpy(copy, dims, sizeof(int) * (size_t)rank);
    int t = ir_tensor_add(g, base, dt, role, rank, copy, n->loc);
    n->out[i] = t;
    n->nout = i + 1 > n->nout ? i + 1 : n->nout;
    return t;
}

static bool has(const IrTensor *t, int d)
{
    for (int i = 0; i < t->rank; i++)
        if (t->dim[i] == d)
            return true;
    return false;
}

static bool is_float(const IrTensor *t) { return t->dtype != IR_I32; }

static bool need_float(IrGraph *g, IrNode *n, int i)
{
    if (is_float(T(i)))
        return true;
    ir_error(n->loc, "%s: input %d ('%s') is %s; it needs a floating-point tensor",
             ir_ops[n->op].name, i + 1, T(i)->base, ir_dtype_name(T(i)->dtype));
    return false;
}

/* Is s (rank ks) the tail of t's dims? */
static bool is_suffix(const IrTensor *t, const IrTensor *s)
{
    if (s->rank > t->rank)
        return false;
    for (int i = 0; i < s->rank; i++)
        if (t->dim[t->rank - s->rank + i] != s->dim[i])
            return false;
    return true;
}

static bool shape_EMBEDDING(IrGraph *g, IrNode *n)
{
    const IrTensor *tok = T(0), *tab = T(1);
    if (tok->dtype != IR_I32) {
        ir_error(n->loc, "embedding: the first argument ('%s') must be i32 token ids, not %s",
                 tok->base, ir_dtype_name(tok->dtype));
        return false;
    }
    if (tab->rank < 2 || !is_float(tab)) {
        ir_error(n->loc, "embedding: the table ('%s' %s) must be a float tensor [vocab, ...]",
                 tab->base, shp(g, tab));
        return false;
    }
    if (tok->rank + tab->rank - 1 > IR_MAX_RANK) {
        ir_error(n->loc, "embedding: result would have more than %d dims", IR_MAX_RANK);
        return false;
    }
    for (int i = 1; i < tab->rank; i++)
        if (has(tok, tab->dim[i])) {
            ir_error(n->loc, "embedding: dim '%s' appears in both the ids %s and the table %s",
                     dimname(g, tab->dim[i]), shp(g, tok), shp(g, tab));
            return false;
        }
    int dims[IR_MAX_RANK], r = 0;
    for (int i = 0; i < tok->rank; i++)
        dims[r++] = tok->dim[i];
    for (int i = 1; i < tab->rank; i++)
        dims[r++] = tab->dim[i];
    out(g, n, 0, "embedding", tab->dtype, IR_ACT, r, dims);
    return true;
}

/* Where the contracted dims sit in an operand: at its start or its end, in the
 * same order in both operands, so every matmul is one GEMM (with transposes). */
static int block_pos(const IrTensor *t, const int *c, int nc)
{
    bool front = true, back = true;
    for (int i = 0; i < nc; i++) {
        if (t->dim[i] != c[i])
            front = false;
        if (t->dim[t->rank - nc + i] != c[i])
            back = false;
    }
    return front ? 0 : back ? 1 : -1;
}

static bool shape_MATMUL(IrGraph *g, IrNode *n)
{
    const IrTensor *a = T(0), *b = T(1);
    if (!need_float(g, n, 0) || !need_float(g, n, 1))
        return false;
    int c[IR_MAX_RANK], nc = 0;
    for (int i = 0; i < a->rank; i++)
        if (has(b, a->dim[i]))
            c[nc++] = a->dim[i];
    if (nc == 0) {
        ir_error(n->loc,
                 "matmul: '%s' %s and '%s' %s share no dimension to contract; a matmul "
                 "contracts the dims its operands have in common",
                 a->base, shp(g, a), b->base, shp(g, b));
        return false;
    }
    if (nc == a->rank || nc == b->rank) {
        ir_error(n->loc, "matmul: every dim of '%s' %s is contracted with '%s' %s; nothing is left "
                 "to form the result", nc == a->rank ? a->base : b->base,
                 shp(g, nc == a->rank ? a : b), nc == a->rank ? b->base : a->base,
                 shp(g, nc == a->rank ? b : a));
        return false;
    }
    if (block_pos(a, c, nc) < 0 || block_pos(b, c, nc) < 0) {
        char cs[256];
        size_t k = 0;
        for (int i = 0; i < nc && k < sizeof cs; i++)
            k += (size_t)snprintf(cs + k, sizeof cs - k, "%s%s", i ? ", " : "", dimname(g, c[i]));
        ir_error(n->loc,
                 "matmul: the contracted dims [%s] must come first or last, in the same order, "
                 "in both '%s' %s and '%s' %s",
                 cs, a->base, shp(g, a), b->base, shp(g, b));
        return false;
    }
    int dims[2 * IR_MAX_RANK], r = 0;
    for (int i = 0; i < a->rank; i++)
        if (!has(b, a->dim[i]))
            dims[r++] = a->dim[i];
    for (int i = 0; i < b->rank; i++)
        if (!has(a, b->dim[i]))
            dims[r++] = b->dim[i];
    if (r > IR_MAX_RANK) {
        ir_error(n->loc, "matmul: result would have %d dims (at most %d)", r, IR_MAX_RANK);
        return false;
    }
    n->attr.ncontract = nc;
    memcpy(n->attr.contract, c, sizeof(int) * (size_t)nc);
    out(g, n, 0, "matmul", a->dtype, IR_ACT, r, dims);
    return true;
}

/* Dims of x without the trailing dims normalised over. */
static int row_dims(const IrTensor *x, int nnorm, int *dims)
{
    for (int i = 0; i < x->rank - nnorm; i++)
        dims[i] = x->dim[i];
    return x->rank - nnorm;
}

static bool check_norm(IrGraph *g, IrNode *n, const char *op)
{
    const IrTensor *x = T(0), *w = T(1);
    if (!need_float(g, n, 0) || !need_float(g, n, 1))
        return false;
    if (w->rank == 0 || !is_suffix(x, w) || w->rank == x->rank) {
        ir_error(n->loc,
                 "%s: the weight '%s' %s must name the last dims of '%s' %s (the dims "
                 "normalised over)", op, w->base, shp(g, w), x->base, shp(g, x));
        return false;
    }
    if (n->attr.eps <= 0) {
        ir_error(n->loc, "%s: eps must be positive, got %g", op, n->attr.eps);
        return false;
    }
    return true;
}

static bool shape_RMSNORM(IrGraph *g, IrNode *n)
{
    if (!check_norm(g, n, "rmsnorm"))
        return false;
    const IrTensor *x = T(0), *w = T(1);
    if (n->attr.group_dims < 0 || n->attr.group_dims >= w->rank) {
        ir_error(n->loc, "rmsnorm: group_dims = %lld leaves none of the weight '%s' %s to normalise "
                 "over (it counts the weight's leading dims that index groups)",
                 (long long)n->attr.group_dims, w->base, shp(g, w));
        return false;
    }
    /* one statistic a row and group: the group dims are row dims */
    int dims[IR_MAX_RANK], r = row_dims(x, w->rank - (int)n->attr.group_dims, dims);
    IrDtype dt = x->dtype;
    out(g, n, 0, "rmsnorm", dt, IR_ACT, x->rank, x->dim);
    out(g, n, 1, "rstd", IR_F32, IR_ACT, r, dims);
    return true;
}

static bool shape_LAYERNORM(IrGraph *g, IrNode *n)
{
    if (!check_norm(g, n, "layernorm"))
        return false;
    const IrTensor *w = T(1), *b = T(2);
    if (b->rank != w->rank || memcmp(b->dim, w->dim, sizeof(int) * (size_t)w->rank) != 0) {
        ir_error(n->loc, "layernorm: bias '%s' %s must have the weight's dims %s", b->base,
                 shp(g, b), shp(g, w));
        return false;
    }
    const IrTensor *x = T(0);
    int dims[IR_MAX_RANK], r = row_dims(x, w->rank, dims);
    IrDtype dt = x->dtype;
    out(g, n, 0, "layernorm", dt, IR_ACT, x->rank, x->dim);
    out(g, n, 1, "mean", IR_F32, IR_ACT, r, dims);
    out(g, n, 2, "rstd", IR_F32, IR_ACT, r, dims);
    return true;
}

static bool shape_ROPE(IrGraph *g, IrNode *n)
{
    const IrTensor *x = T(0);
    if (!need_float(g, n, 0))
        return false;
    if (x->rank < 2) {
        ir_error(n->loc, "rope: '%s' %s needs a position dim and a rotated dim", x->base, shp(g, x));
        return false;
    }
    if (n->attr.dim[0] < 0)
        n->attr.dim[0] = g->seq_dim;
    if (n->attr.dim[1] < 0)
        n->attr.dim[1] = x->dim[x->rank - 1];
    int pos = n->attr.dim[0], rot = n->attr.dim[1];
    if (pos < 0 || !has(x, pos) || pos == g->batch_dim) {
        ir_error(n->loc, "rope: '%s' %s has no sequence dim%s%s%s; name it with pos = DIM", x->base,
                 shp(g, x), pos >= 0 ? " '" : "", pos >= 0 ? dimname(g, pos) : "", pos >= 0 ? "'" : "");
        return false;
    }
    if (rot != x->dim[x->rank - 1] || rot == pos) {
        ir_error(n->loc, "rope: the rotated dim '%s' must be the last dim of '%s' %s", dimname(g, rot),
                 x->base, shp(g, x));
        return false;
    }
    if (g->dims[rot].size % 2 != 0) {
        ir_error(n->loc, "rope: rotated dim '%s' has odd size %lld; rotary pairs need an even size",
                 dimname(g, rot), (long long)g->dims[rot].size);
        return false;
    }
    if (n->attr.theta <= 0) {
        ir_error(n->loc, "rope: theta must be positive, got %g", n->attr.theta);
        return false;
    }
    const IrRopeScaling *rs = &n->attr.rope;
    /* LLaMA-3.1's scaling divides by factor and by low_freq_factor (wavelength
     * limits original_max_position / low_freq_factor, as Hugging Face's). */
    if (rs->kind == IR_ROPE_LLAMA3 && !(rs->factor > 0 && rs->low_freq_factor > 0)) {
        ir_error(n->loc, "rope: factor and low_freq_factor must be positive, got %g and %g",
                 rs->factor, rs->low_freq_factor);
        return false;
    }
    if (rs->kind == IR_ROPE_LLAMA3 && !(rs->original_max_position > 0)) {
        ir_error(n->loc, "rope: original_max_position must be positive, got %lld",
                 (long long)rs->original_max_position);
        return false;
    }
    if (rs->kind == IR_ROPE_LLAMA3 && !(rs->high_freq_factor > rs->low_freq_factor)) {
        /* The interpolation divides by their difference (as Hugging Face's). */
        ir_error(n->loc, "rope: high_freq_factor %g must be greater than low_freq_factor %g",
                 rs->high_freq_factor, rs->low_freq_factor);
        return false;
    }
    out(g, n, 0, "rope", x->dtype, IR_ACT, x->rank, x->dim);
    return true;
}

static bool shape_ATTENTION(IrGraph *g, IrNode *n)
{
    const IrTensor *q = T(0), *k = T(1), *v = T(2);
    for (int i = 0; i < 3; i++)
        if (!need_float(g, n, i))
            return false;
    if (q->rank != 4 || k->rank != 4 || v->rank != 4) {
        ir_error(n->loc, "attention: q, k and v must be [batch, seq, heads, head_dim]; got %s, %s, %s",
                 shp(g, q), shp(g, k), shp(g, v));
        return false;
    }
    /* v's head size may differ from k's (multi-head latent attention: q and
     * k 192 wide, v 128); the output has v's. */
    if (memcmp(k->dim, v->dim, sizeof(int) * 3) != 0) {
        ir_error(n->loc, "attention: k %s and v %s must have the same batch, seq and head dims",
                 shp(g, k), shp(g, v));
        return false;
    }
    if (v->dim[3] != k->dim[3] && (ir_tensor_has_dim(g, q->id, v->dim[3]) ||
                                   g->dims[v->dim[3]].size == g->dims[k->dim[3]].size)) {
        ir_error(n->loc, "attention: v's head dim '%s' must be k's ('%s') or a dim of another size",
                 dimname(g, v->dim[3]), dimname(g, k->dim[3]));
        return false;
    }
    if (k->dim[0] != q->dim[0] || k->dim[1] != q->dim[1] || k->dim[3] != q->dim[3]) {
        ir_error(n->loc,
                 "attention: k %s must share q's batch, seq and head_dim dims (q is %s)", shp(g, k),
                 shp(g, q));
        return false;
    }
    int64_t h = g->dims[q->dim[2]].size, kvh = g->dims[k->dim[2]].size;
    if (kvh <= 0 || h % kvh != 0) {
        ir_error(n->loc,
                 "attention: %lld query heads ('%s') are not a multiple of %lld key/value heads "
                 "('%s'); grouped-query attention shares each KV head among a whole number of query heads",
                 (long long)h, dimname(g, q->dim[2]), (long long)kvh, dimname(g, k->dim[2]));
        return false;
    }
    if (q->dim[2] != k->dim[2] && h == kvh) {
        /* Two names for one size would let the planner split them differently. */
        ir_error(n->loc, "attention: q heads '%s' and kv heads '%s' have the same size %lld; use one dim",
                 dimname(g, q->dim[2]), dimname(g, k->dim[2]), (long long)h);
        return false;
    }
    if (n->nin == 4) { /* sinks: one logit per query head */
        const IrTensor *s = T(3);
        if (!need_float(g, n, 3))
            return false;
        if (s->rank != 1 || s->dim[0] != q->dim[2]) {
            ir_error(n->loc, "attention: sinks %s must be one logit per query head, [%s]", shp(g, s),
                     dimname(g, q->dim[2]));
            return false;
        }
    }
    if (n->attr.window < 0 || (n->attr.window > 0 && !n->attr.causal)) {
        ir_error(n->loc, "attention: a sliding window (window = %lld) needs causal = true",
                 (long long)n->attr.window);
        return false;
    }
    int lse[3] = {q->dim[0], q->dim[1], q->dim[2]}, o[4] = {q->dim[0], q->dim[1], q->dim[2], v->dim[3]};
    out(g, n, 0, "attention", q->dtype, IR_ACT, 4, o);
    out(g, n, 1, "lse", IR_F32, IR_ACT, 3, lse);
    return true;
}

static bool unary(IrGraph *g, IrNode *n, const char *name)
{
    if (!need_float(g, n, 0))
        return false;
    out(g, n, 0, name, T(0)->dtype, IR_ACT, T(0)->rank, T(0)->dim);
    return true;
}

static bool shape_SILU(IrGraph *g, IrNode *n) { return unary(g, n, "silu"); }
static bool shape_GELU(IrGraph *g, IrNode *n) { return unary(g, n, "gelu"); }

/* swiglu(gate, up): the same dims in both (no broadcast: one fused pass). */
static bool shape_SWIGLU(IrGraph *g, IrNode *n)
{
    if (!need_float(g, n, 0) || !need_float(g, n, 1))
        return false;
    const IrTensor *a = T(0), *b = T(1);
    if (a->rank != b->rank || memcmp(a->dim, b->dim, sizeof(int) * (size_t)a->rank) != 0) {
        ir_error(n->loc, "swiglu: gate '%s' %s and up '%s' %s must have the same dims", a->base,
                 shp(g, a), b->base, shp(g, b));
        return false;
    }
    out(g, n, 0, "swiglu", a->dtype, IR_ACT, a->rank, a->dim);
    return true;
}

/* Elementwise binary ops broadcast by name: the smaller operand's dims must be
 * the tail of the larger's (a bias [d_ff] on [batch, seq, d_ff]). */
static bool binary(IrGraph *g, IrNode *n, const char *name, const char *sym)
{
    if (!need_float(g, n, 0) || !need_float(g, n, 1))
        return false;
    const IrTensor *a = T(0), *b = T(1);
    const IrTensor *big = a->rank >= b->rank ? a : b, *small = big == a ? b : a;
    if (!is_suffix(big, small)) {
        ir_error(n->loc,
                 "cannot %s '%s' %s and '%s' %s: dims must match, or one operand's dims must be "
                 "the last dims of the other (broadcast)", sym, a->base, shp(g, a), b->base, shp(g, b));
        return false;
    }
    out(g, n, 0, name, big->dtype, IR_ACT, big->rank, big->dim);
    return true;
}

static bool shape_ADD(IrGraph *g, IrNode *n) { return binary(g, n, "add", "add"); }
static bool shape_MUL(IrGraph *g, IrNode *n) { return binary(g, n, "mul", "multiply"); }

static bool shape_SOFTMAX(IrGraph *g, IrNode *n)
{
    const IrTensor *x = T(0);
    if (!need_float(g, n, 0))
        return false;
    if (x->rank == 0) {
        ir_error(n->loc, "softmax: '%s' is a scalar", x->base);
        return false;
    }
    if (n->attr.dim[0] < 0)
        n->attr.dim[0] = x->dim[x->rank - 1];
    if (n->attr.dim[0] != x->dim[x->rank - 1]) {
        ir_error(n->loc, "softmax: dim '%s' must be the last dim of '%s' %s",
                 dimname(g, n->attr.dim[0]), x->base, shp(g, x));
        return false;
    }
    out(g, n, 0, "softmax", x->dtype, IR_ACT, x->rank, x->dim);
    return true;
}

static bool shape_CROSS_ENTROPY(IrGraph *g, IrNode *n)
{
    const IrTensor *lg = T(0), *tg = T(1);
    if (!need_float(g, n, 0))
        return false;
    if (tg->dtype != IR_I32) {
        ir_error(n->loc, "cross_entropy: targets '%s' must be i32 token ids, not %s", tg->base,
                 ir_dtype_name(tg->dtype));
        return false;
    }
    if (lg->rank != tg->rank + 1 || memcmp(lg->dim, tg->dim, sizeof(int) * (size_t)tg->rank) != 0) {
        ir_error(n->loc,
                 "cross_entropy: logits '%s' %s must be the targets' dims %s plus a last "
                 "vocabulary dim", lg->base, shp(g, lg), shp(g, tg));
        return false;
    }
    int dims[IR_MAX_RANK], r = tg->rank;
    memcpy(dims, tg->dim, sizeof(int) * (size_t)r);
    out(g, n, 0, "loss", IR_F32, IR_LOSS, 0, dims);
    out(g, n, 1, "lse", IR_F32, IR_ACT, r, dims);
    return true;
}

/* shift(x, by = K): a model input read K positions later (ops.def). Only an
 * input: the program reads it from the data, which every rank has. */
static bool shape_SHIFT(IrGraph *g, IrNode *n)
{
    const IrTensor *x = T(0);
    if (x->role != IR_INPUT || x->dtype != IR_I32 || x->rank != 2 || x->dim[0] != g->batch_dim ||
        x->dim[1] != g->seq_dim) {
        ir_error(n->loc, "shift: the argument ('%s' %s) must be a model input i32[batch, seq] "
                 "(the token ids or the targets), which the program reads from the data further along",
                 x->base, shp(g, x));
        return false;
    }
    int64_t S = g->dims[g->seq_dim].size;
    if (n->attr.shift < 1 || n->attr.shift >= S) {
        ir_error(n->loc, "shift: by = %lld must be from 1 to seq - 1 = %lld", (long long)n->attr.shift,
                 (long long)(S - 1));
        return false;
    }
    out(g, n, 0, "shift", IR_I32, IR_ACT, x->rank, x->dim);
    return true;
}

static bool shape_SIGMOID(IrGraph *g, IrNode *n) { return unary(g, n, "sigmoid"); }

/* route(logits): gates over the last (expert) dim, the top-k nonzero. The
 * counts must make a choice possible: k experts among the groups kept. */
static bool shape_ROUTE(IrGraph *g, IrNode *n)
{
    const IrTensor *x = T(0);
    const IrRoute *r = &n->attr.route;
    if (!need_float(g, n, 0))
        return false;
    if (x->rank < 2) {
        ir_error(n->loc, "route: logits '%s' %s need a leading token dim and a last expert dim",
                 x->base, shp(g, x));
        return false;
    }
    int64_t E = g->dims[x->dim[x->rank - 1]].size;
    const char *ename = dimname(g, x->dim[x->rank - 1]);
    if (r->topk < 1 || r->topk > E) {
        ir_error(n->loc, "route: topk = %lld must be between 1 and the %lld experts of '%s'",
                 (long long)r->topk, (long long)E, ename);
        return false;
    }
    if ((r->groups > 0) != (r->group_topk > 0)) {
        ir_error(n->loc, "route: groups and group_topk come together (group-limited routing)");
        return false;
    }
    if (r->groups > 0) {
        if (E % r->groups != 0 || r->group_topk > r->groups) {
            ir_error(n->loc, "route: %lld groups must divide the %lld experts and group_topk = %lld "
                     "cannot exceed them", (long long)r->groups, (long long)E,
                     (long long)r->group_topk);
            return false;
        }
        if (r->topk > r->group_topk * (E / r->groups)) {
            ir_error(n->loc, "route: topk = %lld is more than the %lld experts of the %lld groups "
                     "kept", (long long)r->topk, (long long)(r->group_topk * (E / r->groups)),
                     (long long)r->group_topk);
            return false;
        }
    }
    out(g, n, 0, "gates", x->dtype, IR_ACT, x->rank, x->dim);
    return true;
}

/* moe(h, gates, [e_gate,] e_up, e_down[, [e_gate_b,] e_up_b]) (the act's
 * row of moe_acts.def says which): h [..., d_model], gates the same leading
 * dims and [expert]; e_gate, e_up [expert, d_model, d_expert]; e_down
 * [expert, d_expert, d_model]; the biases [expert, d_expert]. y has h's
 * dims. */
static bool shape_MOE(IrGraph *g, IrNode *n)
{
    for (int i = 0; i < n->nin; i++)
        if (!need_float(g, n, i))
            return false;
    IrMoeSlots s = ir_moe_slots(n);
    if (s.b_up >= 0 && T(s.b_up)->rank != 2) { /* a weight too many, most likely */
        const IrMoeActInfo *a = &ir_moe_acts[n->attr.moe_act];
        ir_error(n->loc, "moe with act = %s reads (h, gates, %se_up, e_down[, %se_up_b]): its last "
                 "argument '%s' %s stands where the up bias [expert, d_expert] goes", a->name,
                 a->gated ? "e_gate, " : "", a->gated ? "e_gate_b, " : "", T(s.b_up)->base,
                 shp(g, T(s.b_up)));
        return false;
    }
    const IrTensor *h = T(0), *gt = T(1), *wu = T(s.w_up), *wd = T(s.w_down);
    const IrTensor *w0 = T(2); /* the first projection: e_gate, or e_up without a gate */
    if (h->rank < 2 || gt->rank != h->rank ||
        memcmp(h->dim, gt->dim, sizeof(int) * (size_t)(h->rank - 1)) != 0) {
        ir_error(n->loc, "moe: gates '%s' %s must have the dims of the input '%s' %s with the "
                 "expert dim last", gt->base, shp(g, gt), h->base, shp(g, h));
        return false;
    }
    if (gt->producer < 0 || g->nodes[gt->producer].op != IR_OP_ROUTE) {
        ir_error(n->loc, "moe: the gates '%s' must be made by route(...): a zero gate means "
                 "\"not routed\" (docs/moe.md)", gt->base);
        return false;
    }
    int E = gt->dim[gt->rank - 1], D = h->dim[h->rank - 1];
    if (w0->rank != 3 || w0->dim[0] != E || w0->dim[1] != D) {
        ir_error(n->loc, "moe: the experts' %s weight '%s' %s must be [%s, %s, d_expert]",
                 s.w_gate >= 0 ? "gate" : "up", w0->base, shp(g, w0), dimname(g, E), dimname(g, D));
        return false;
    }
    int F = w0->dim[2];
    if (F == D || F == E) {
        ir_error(n->loc, "moe: the experts' width in '%s' %s needs a dim of its own", w0->base,
                 shp(g, w0));
        return false;
    }
    if (wu->rank != 3 || memcmp(wu->dim, w0->dim, sizeof(int) * 3) != 0) {
        ir_error(n->loc, "moe: the experts' up weight '%s' %s must be [%s, %s, %s] like '%s'",
                 wu->base, shp(g, wu), dimname(g, E), dimname(g, D), dimname(g, F), w0->base);
        return false;
    }
    if (wd->rank != 3 || wd->dim[0] != E || wd->dim[1] != F || wd->dim[2] != D) {
        ir_error(n->loc, "moe: the experts' down weight '%s' %s must be [%s, %s, %s]", wd->base,
                 shp(g, wd), dimname(g, E), dimname(g, F), dimname(g, D));
        return false;
    }
    int bias[2] = {s.b_gate, s.b_up};
    for (int k = 0; k < 2; k++) {
        if (bias[k] < 0)
            continue;
        const IrTensor *b = T(bias[k]);
        if (b->rank != 2 || b->dim[0] != E || b->dim[1] != F) {
            ir_error(n->loc, "moe: the experts' %s bias '%s' %s must be [%s, %s]", k ? "up" : "gate",
                     b->base, shp(g, b), dimname(g, E), dimname(g, F));
            return false;
        }
    }
    for (int i = 0; i < h->rank - 1; i++)
        if (h->dim[i] == E || h->dim[i] == F) {
            ir_error(n->loc, "moe: the input '%s' %s cannot carry the expert dims", h->base,
                     shp(g, h));
            return false;
        }
    out(g, n, 0, "moe", h->dtype, IR_ACT, h->rank, h->dim);
    return true;
}

/* slice(x, dim = D, at = N): elements N .. N + |D| - 1 of x's last dim, as
 * a new last dim D (a dim of its own: the planner must not split it as x's). */
static bool shape_SLICE(IrGraph *g, IrNode *n)
{
    const IrTensor *x = T(0);
    int d = n->attr.dim[0];
    if (!need_float(g, n, 0))
        return false;
    if (d < 0) {
        ir_error(n->loc, "slice: name the result's last dim with dim = DIM");
        return false;
    }
    if (x->rank < 1 || has(x, d) || d == g->batch_dim) {
        ir_error(n->loc, "slice: the result's dim '%s' must be a dim '%s' %s does not have",
                 dimname(g, d), x->base, shp(g, x));
        return false;
    }
    int64_t from = g->dims[x->dim[x->rank - 1]].size;
    if (n->attr.at < 0 || n->attr.at + g->dims[d].size > from) {
        ir_error(n->loc, "slice: %lld elements at %lld do not fit in the last dim '%s' of '%s' (%lld)",
                 (long long)g->dims[d].size, (long long)n->attr.at, dimname(g, x->dim[x->rank - 1]),
                 x->base, (long long)from);
        return false;
    }
    int dims[IR_MAX_RANK];
    memcpy(dims, x->dim, sizeof(int) * (size_t)x->rank);
    dims[x->rank - 1] = d;
    out(g, n, 0, "slice", x->dtype, IR_ACT, x->rank, dims);
    return true;
}

int ir_concat_bcast(const IrGraph *g, const IrNode *n, int *pos)
{
    const IrTensor *a = &g->tensors[n->in[0]], *b = &g->tensors[n->in[1]];
    int k = a->rank - b->rank, p = 0;
    if (k < 0)
        return -1;
    while (p < b->rank - 1 && a->dim[p] == b->dim[p])
        p++;
    for (int i = p; i < b->rank - 1; i++)
        if (a->dim[i + k] != b->dim[i])
            return -1;
    if (pos)
        *pos = p;
    return k;
}

/* concat(a, b, dim = D): a's last dim then b's, as a new last dim D of the
 * summed size; b has a's other dims, or them less a run of consecutive ones,
 * along which it is broadcast. */
static bool shape_CONCAT(IrGraph *g, IrNode *n)
{
    if (!need_float(g, n, 0) || !need_float(g, n, 1))
        return false;
    const IrTensor *a = T(0), *b = T(1);
    int d = n->attr.dim[0];
    if (d < 0) {
        ir_error(n->loc, "concat: name the result's last dim with dim = DIM");
        return false;
    }
    if (a->rank < 1 || b->rank < 1 || ir_concat_bcast(g, n, NULL) < 0) {
        ir_error(n->loc, "concat: '%s' %s must have the dims of '%s' %s but the last, or them less "
                 "consecutive dims it is broadcast along", b->base, shp(g, b), a->base, shp(g, a));
        return false;
    }
    if (has(a, d) || has(b, d)) {
        ir_error(n->loc, "concat: the result's dim '%s' must be a new dim", dimname(g, d));
        return false;
    }
    int64_t sa = g->dims[a->dim[a->rank - 1]].size, sb = g->dims[b->dim[b->rank - 1]].size;
    if (g->dims[d].size != sa + sb) {
        ir_error(n->loc, "concat: dim '%s' is %lld, not %lld + %lld (the last dims of '%s' and '%s')",
                 dimname(g, d), (long long)g->dims[d].size, (long long)sa, (long long)sb, a->base, b->base);
        return false;
    }
    int dims[IR_MAX_RANK];
    memcpy(dims, a->dim, sizeof(int) * (size_t)a->rank);
    dims[a->rank - 1] = d;
    out(g, n, 0, "concat", a->dtype, IR_ACT, a->rank, dims);
    return true;
}

/* ---------------------------------------------------------------- Mamba-2 */
static bool shape_SOFTPLUS(IrGraph *g, IrNode *n) { return unary(g, n, "softplus"); }
static bool shape_RELU2(IrGraph *g, IrNode *n) { return unary(g, n, "relu2"); }

/* Are t's dims [from, to) the dims d[0 .. to - from)? */
static bool dims_are(const IrTensor *t, int from, int to, const int *d)
{
    return to <= t->rank && (to == from || memcmp(t->dim + from, d, sizeof(int) * (size_t)(to - from)) == 0);
}

static bool batch_seq(IrGraph *g, const IrTensor *t)
{
    return t->rank >= 2 && t->dim[0] == g->batch_dim && t->dim[1] == g->seq_dim;
}

/* conv1d(x, w, b): a causal depthwise convolution over seq, as Mamba's
 * conv1d (torch Conv1d with groups = channels, padding K - 1, the first
 * seq outputs kept): y[t, c] = b[c] + sum_j w[c, j] x[t - K + 1 + j, c].
 * x is [batch, seq, C...], w [C..., K] with K a dim of its own (the
 * kernel width), b [C...]. */
static bool shape_CONV1D(IrGraph *g, IrNode *n)
{
    for (int i = 0; i < 3; i++)
        if (!need_float(g, n, i))
            return false;
    const IrTensor *x = T(0), *w = T(1), *b = T(2);
    if (x->rank < 3 || !batch_seq(g, x)) {
        ir_error(n->loc, "conv1d: '%s' %s must be [batch, seq, channels...]", x->base, shp(g, x));
        return false;
    }
    int nc = x->rank - 2;
    if (w->rank != nc + 1 || !dims_are(w, 0, nc, x->dim + 2) || has(x, w->dim[nc])) {
        ir_error(n->loc, "conv1d: the weight '%s' %s must be x's channels then a kernel dim of its own",
                 w->base, shp(g, w));
        return false;
    }
    if (b->rank != nc || !dims_are(b, 0, nc, x->dim + 2)) {
        ir_error(n->loc, "conv1d: the bias '%s' %s must have x's channel dims", b->base, shp(g, b));
        return false;
    }
    out(g, n, 0, "conv1d", x->dtype, IR_ACT, x->rank, x->dim);
    return true;
}

int ir_ssd_groups(const IrGraph *g, const IrNode *n)
{
    return g->tensors[n->in[3]].rank - 3;
}

/* ssd(x, dt, A_log, B, C, D): Mamba-2's selective state-space scan, per
 * head h with state S_h [N, P] from zero (Dao and Gu 2024, "Transformers
 * are SSMs", the SSD recurrence):
 *   S_t = exp(dt_t A) S_{t-1} + dt_t B_t x_t^T,   y_t = S_t^T C_t + D x_t
 * with A = -exp(A_log). x is [batch, seq, H..., P] (the heads, then the
 * head dim), dt [batch, seq, H...] (already softplus'd), A_log and D [H...],
 * B and C [batch, seq, G..., N] with G... a leading run of the head dims
 * (the groups: each group's B and C shared by the heads under it; none: one
 * for all) and N the state dim. y has x's dims. */
static bool shape_SSD(IrGraph *g, IrNode *n)
{
    for (int i = 0; i < 6; i++)
        if (!need_float(g, n, i))
            return false;
    const IrTensor *x = T(0), *dt = T(1), *A = T(2), *B = T(3), *C = T(4), *D = T(5);
    if (x->rank < 4 || !batch_seq(g, x)) {
        ir_error(n->loc, "ssd: '%s' %s must be [batch, seq, heads..., head_dim]", x->base, shp(g, x));
        return false;
    }
    int nh = x->rank - 3;
    if (dt->rank != x->rank - 1 || !dims_are(dt, 0, dt->rank, x->dim)) {
        ir_error(n->loc, "ssd: dt '%s' %s must have x's dims but the last (head_dim)", dt->base, shp(g, dt));
        return false;
    }
    const IrTensor *hp[2] = {A, D};
    for (int i = 0; i < 2; i++)
        if (hp[i]->rank != nh || !dims_are(hp[i], 0, nh, x->dim + 2)) {
            ir_error(n->loc, "ssd: '%s' %s must be x's head dims", hp[i]->base, shp(g, hp[i]));
            return false;
        }
    int ng = B->rank - 3;
    if (B->rank < 3 || ng > nh || !batch_seq(g, B) || !dims_are(B, 2, 2 + ng, x->dim + 2) ||
        has(x, B->dim[B->rank - 1])) {
        ir_error(n->loc, "ssd: B '%s' %s must be [batch, seq, groups..., state] with the groups a leading "
                 "run of x's head dims and a state dim of its own", B->base, shp(g, B));
        return false;
    }
    if (C->rank != B->rank || !dims_are(C, 0, C->rank, B->dim)) {
        ir_error(n->loc, "ssd: C '%s' %s must have B's dims %s", C->base, shp(g, C), shp(g, B));
        return false;
    }
    out(g, n, 0, "ssd", x->dtype, IR_ACT, x->rank, x->dim);
    return true;
}

/* Backward ops are created by autodiff with ir_node_add_raw, which knows
 * their shapes from the forward tensors; reaching a rule here is a bug. */
#define BWD_RULE(ID)                                                                          \
    static bool shape_##ID(IrGraph *g, IrNode *n)                                             \
    {                                                                                         \
        (void)g;                                                                              \
        ir_die("%s has no shape rule: backward nodes are built with ir_node_add_raw",        \
               ir_ops[n->op].name);                                                           \
    }
BWD_RULE(EMBEDDING_BWD)
BWD_RULE(RMSNORM_BWD)
BWD_RULE(LAYERNORM_BWD)
BWD_RULE(ROPE_BWD)
BWD_RULE(ATTENTION_BWD)
BWD_RULE(SILU_BWD)
BWD_RULE(GELU_BWD)
BWD_RULE(SWIGLU_BWD)
BWD_RULE(SOFTMAX_BWD)
BWD_RULE(CROSS_ENTROPY_BWD)
BWD_RULE(SIGMOID_BWD)
BWD_RULE(ROUTE_BWD)
BWD_RULE(MOE_BWD)
BWD_RULE(SLICE_BWD)
BWD_RULE(CONCAT_BWD)
BWD_RULE(SOFTPLUS_BWD)
BWD_RULE(CONV1D_BWD)
BWD_RULE(SSD_BWD)
BWD_RULE(RELU2_BWD)
BWD_RULE(REDUCE_SUM)

static ShapeRule *const rules[IR_NUM_OPS] = {
#define OP(ID, name, nin, nout, flags, saves) [IR_OP_##ID] = shape_##ID,
#include "ops.def"
#undef OP
};

bool ir_shape_infer(IrGraph *g, IrNode *n)
{
    n->nout = 0;
    return rules[n->op](g, n);
}

/* A node over ir_node_add_raw with the outputs its shape rule creates. */
int ir_node_add(IrGraph *g, IrOp op, const int *in, int nin, const IrAttrs *attr, IrLoc loc)
{
    if (!ir_op_arity_ok(op, nin, ir_ops[op].nout, attr))
        ir_die("ir_node_add: %s takes %d inputs, got %d", ir_ops[op].name, ir_ops[op].nin, nin);
    int ntensors = g->ntensors, nfwd = g->nfwd;
    int id = ir_node_add_raw(g, op, in, nin, NULL, 0, attr, loc); /* may move g->nodes */
    IrNode *n = &g->nodes[id];
    if (!ir_shape_infer(g, n)) {
        /* Roll back so the graph stays well formed after a user error. */
        g->nnodes--;
        g->nfwd = nfwd;
        for (int t = g->ntensors - 1; t >= ntensors; t--)
            ir_map_put(&g->names, g->tensors[t].name, -1);
        g->ntensors = ntensors;
        if (n->piece >= 0)
            g->pieces[n->piece].count = g->nnodes - g->pieces[n->piece].first;
        return -1;
    }
    n = &g->nodes[g->nnodes - 1]; /* shape rules may grow the tensor array, never nodes */
    for (int i = 0; i < n->nout; i++)
        g->tensors[n->out[i]].producer = n->id;
    return n->id;
}
