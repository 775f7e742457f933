/* autodiff.c: reverse-mode differentiation of the forward graph.
 *
 * Forward nodes are visited last to first. When a node is reached every
 * consumer of its output has been visited, so the output's gradient is
 * complete: its contributions (one per consumer) are summed with ADDs and the
 * node's rule, pass_grad_<ID>, adds the nodes that turn that gradient into
 * contributions to its inputs. Parameters are finished last (a tied table has
 * contributions from the embedding and the LM head).
 *
 * The graph's builder (ir_node_add_raw) assumes forward construction: it
 * extends the last piece and moves nfwd for forward ops. add() undoes both and
 * files each backward node under its forward node's piece instead. */
#include "autodiff.h"

#include <stdlib.h>
#include <string.h>

typedef VEC(int) IntVec;

typedef struct Ad {
    IrGraph *g;
    int nfwd, ntensors0, last_count;
    bool *needs;          /* [ntensors0] on a path from a parameter */
    IntVec *contrib;      /* [ntensors0] gradient contributions so far */
    int *ntmpl;           /* [npieces] backward nodes filed under each piece */
} Ad;

static IrTensor *T(Ad *ad, int t) { return &ad->g->tensors[t]; }

/* A new tensor with t's dims, named in t's layer ("layers.3.d_h"). */
static int like(Ad *ad, int t, const char *prefix, IrRole role)
{
    IrGraph *g = ad->g;
    IrTensor x = *T(ad, t);
    int layer = g->cur_layer, rep = g->cur_rep;
    g->cur_layer = x.layer;
    g->cur_rep = x.piece >= 0 ? g->pieces[x.piece].rep : -1;
    char base[512];
    snprintf(base, sizeof base, "%s%s", prefix, x.base);
    int id = ir_tensor_add(g, base, x.dtype, role, x.rank, x.dim, x.loc);
    g->cur_layer = layer;
    g->cur_rep = rep;
    T(ad, id)->piece = x.piece;
    T(ad, id)->grad_of = role == IR_GRAD ? t : -1;
    return id;
}

static int grad_tensor(Ad *ad, int t) { return like(ad, t, "d_", IR_GRAD); }

static void contribute(Ad *ad, int t, int c) { vec_push(ad->contrib[t], c); }

/* Append a backward node differentiating forward node fwd. */
static int add(Ad *ad, int fwd, IrOp op, const int *in, int nin, const int *out, int nout,
               const IrAttrs *attr)
{
    IrGraph *g = ad->g;
    IrLoc loc = g->nodes[fwd].loc;
    int id = ir_node_add_raw(g, op, in, nin, out, nout, attr, loc);
    g->nfwd = ad->nfwd;
    g->pieces[g->npieces - 1].count = ad->last_count;
    IrNode *n = &g->nodes[id];
    const IrNode *f = &g->nodes[fwd];
    n->fwd = fwd;
    n->piece = f->piece;
    n->layer = f->layer;
    n->block = f->block;
    n->tmpl = ad->ntmpl[f->piece]++;
    return id;
}

static int add1(Ad *ad, int fwd, IrOp op, const int *in, int nin, int out, const IrAttrs *attr)
{
    return add(ad, fwd, op, in, nin, &out, 1, attr);
}

/* The complete gradient of t: its only contribution, or their sum. The sums
 * are filed under node `fwd` (t's producer, or a parameter's first consumer). */
static int finish(Ad *ad, int t, int fwd)
{
    IntVec *c = &ad->contrib[t];
    if (c->n == 0)
        return -1;
    int acc = c->v[0];
    for (int i = 1; i < c->n; i++) {
        int out = grad_tensor(ad, t);
        add1(ad, fwd, IR_OP_ADD, (int[]){acc, c->v[i]}, 2, out, NULL);
        acc = out;
    }
    return acc;
}

static bool same_dims(Ad *ad, int a, int b)
{
    const IrTensor *x = T(ad, a), *y = T(ad, b);
    return x->rank == y->rank && memcmp(x->dim, y->dim, sizeof(int) * (size_t)x->rank) == 0;
}

/* MATMUL attributes for a backward product: the contracted dims are those the
 * operands share, in the first operand's order (as ir_shape_MATMUL does). */
static IrAttrs contract_attrs(Ad *ad, int a, int b)
{
    IrAttrs at;
    memset(&at, 0, sizeof at);
    const IrTensor *x = T(ad, a);
    for (int i = 0; i < x->rank; i++)
        if (ir_tensor_has_dim(ad->g, b, x->dim[i]))
            at.contract[at.ncontract++] = x->dim[i];
    return at;
}

/* Are t's contracted dims (attr of its MATMUL) at its start? */
static bool contracted_first(Ad *ad, int t, const IrAttrs *at)
{
    return at->ncontract > 0 && T(ad, t)->dim[0] == at->contract[0];
}

/* ---------------------------------------------------------------- the rules */
typedef void GradRule(Ad *ad, int node, int dy);

#define IN(i) (ad->g->nodes[node].in[i])
#define OUT(i) (ad->g->nodes[node].out[i])
#define NEEDS(t) (ad->needs[t])

static void pass_grad_EMBEDDING(Ad *ad, int node, int dy)
{
    if (!NEEDS(IN(1)))
        return;
    int dt = grad_tensor(ad, IN(1));
    add1(ad, node, IR_OP_EMBEDDING_BWD, (int[]){IN(0), dy}, 2, dt, NULL);
    contribute(ad, IN(1), dt);
}

/* C = A B contracting K: A is [M, K] or [K, M], B is [K, N] or [N, K], C is
 * [M, N]. dA = dC B^T and dB = A^T dC, each a MATMUL whose operand order
 * makes its result come out in the operand's own dim order. */
static void pass_grad_MATMUL(Ad *ad, int node, int dy)
{
    IrAttrs at = ad->g->nodes[node].attr;
    int a = IN(0), b = IN(1);
    if (NEEDS(a)) {
        int da = grad_tensor(ad, a);
        /* [M, K] = dC[M, N] . B (contract N); [K, M] = B . dC (contract N). */
        int x = contracted_first(ad, a, &at) ? b : dy, y = x == b ? dy : b;
        IrAttrs c = contract_attrs(ad, x, y);
        add1(ad, node, IR_OP_MATMUL, (int[]){x, y}, 2, da, &c);
        contribute(ad, a, da);
    }
    if (NEEDS(b)) {
        int db = grad_tensor(ad, b);
        /* [K, N] = A . dC (contract M); [N, K] = dC . A (contract M). */
        int x = contracted_first(ad, b, &at) ? a : dy, y = x == a ? dy : a;
        IrAttrs c = contract_attrs(ad, x, y);
        add1(ad, node, IR_OP_MATMUL, (int[]){x, y}, 2, db, &c);
        contribute(ad, b, db);
    }
}

static void pass_grad_RMSNORM(Ad *ad, int node, int dy)
{
    int dx = grad_tensor(ad, IN(0)), dw = grad_tensor(ad, IN(1));
    add(ad, node, IR_OP_RMSNORM_BWD, (int[]){IN(0), IN(1), OUT(1), dy}, 4, (int[]){dx, dw}, 2, NULL);
    if (NEEDS(IN(0)))
        contribute(ad, IN(0), dx);
    if (NEEDS(IN(1)))
        contribute(ad, IN(1), dw);
}

static void pass_grad_LAYERNORM(Ad *ad, int node, int dy)
{
    int dx = grad_tensor(ad, IN(0)), dw = grad_tensor(ad, IN(1)), db = grad_tensor(ad, IN(2));
    add(ad, node, IR_OP_LAYERNORM_BWD, (int[]){IN(0), IN(1), OUT(1), OUT(2), dy}, 5,
        (int[]){dx, dw, db}, 3, NULL);
    for (int i = 0; i < 3; i++)
        if (NEEDS(IN(i)))
            contribute(ad, IN(i), (int[]){dx, dw, db}[i]);
}

static void pass_grad_ROPE(Ad *ad, int node, int dy)
{
    if (!NEEDS(IN(0)))
        return;
    int dx = grad_tensor(ad, IN(0));
    IrAttrs at = ad->g->nodes[node].attr;
    add1(ad, node, IR_OP_ROPE_BWD, &dy, 1, dx, &at);
    contribute(ad, IN(0), dx);
}

/* With sinks (input 3) the backward also reads them and makes their
 * gradient: dsink_h = -sum over h's rows of p_sink * (do . o), p_sink =
 * exp(sink_h - lse) the sink's share of the row (o and lse are the sinks'
 * own, so q, k and v's gradients are the plain kernel's). */
static void pass_grad_ATTENTION(Ad *ad, int node, int dy)
{
    int nin = ad->g->nodes[node].nin, d[4] = {-1, -1, -1, -1};
    for (int i = 0; i < nin; i++)
        d[i] = grad_tensor(ad, IN(i));
    IrAttrs at = ad->g->nodes[node].attr;
    int in[7] = {IN(0), IN(1), IN(2), OUT(0), OUT(1), dy, nin == 4 ? IN(3) : -1};
    add(ad, node, IR_OP_ATTENTION_BWD, in, nin == 4 ? 7 : 6, d, nin, &at);
    for (int i = 0; i < nin; i++)
        if (NEEDS(IN(i)))
            contribute(ad, IN(i), d[i]);
}

/* A pointwise op's backward reads dy and what it saves: its input (silu,
 * gelu) or its output (sigmoid). */
static void unary(Ad *ad, int node, int dy, IrOp op, int saved)
{
    if (!NEEDS(IN(0)))
        return;
    int dx = grad_tensor(ad, IN(0));
    add1(ad, node, op, (int[]){saved, dy}, 2, dx, NULL);
    contribute(ad, IN(0), dx);
}

static void pass_grad_SILU(Ad *ad, int node, int dy) { unary(ad, node, dy, IR_OP_SILU_BWD, IN(0)); }
static void pass_grad_GELU(Ad *ad, int node, int dy) { unary(ad, node, dy, IR_OP_GELU_BWD, IN(0)); }

/* swiglu(a, b) = silu(a) b: one backward node makes both gradients. */
static void pass_grad_SWIGLU(Ad *ad, int node, int dy)
{
    if (!NEEDS(IN(0)) && !NEEDS(IN(1)))
        return;
    int d[2] = {grad_tensor(ad, IN(0)), grad_tensor(ad, IN(1))};
    add(ad, node, IR_OP_SWIGLU_BWD, (int[]){IN(0), IN(1), dy}, 3, d, 2, NULL);
    for (int i = 0; i < 2; i++)
        if (NEEDS(IN(i)))
            contribute(ad, IN(i), d[i]);
}

/* Each operand gets dy summed over the dims it was broadcast along; with
 * none (the operand has the output's dims) REDUCE_SUM is the identity, which
 * codegen turns into a shared buffer. */
static void pass_grad_ADD(Ad *ad, int node, int dy)
{
    for (int i = 0; i < 2; i++) {
        int x = IN(i);
        if (!NEEDS(x))
            continue;
        int dx = grad_tensor(ad, x);
        add1(ad, node, IR_OP_REDUCE_SUM, &dy, 1, dx, NULL);
        contribute(ad, x, dx);
    }
}

/* d(a*b)/da = dy * b, reduced over the dims a was broadcast along. */
static void pass_grad_MUL(Ad *ad, int node, int dy)
{
    int y = OUT(0);
    for (int i = 0; i < 2; i++) {
        int x = IN(i), other = IN(1 - i);
        if (!NEEDS(x))
            continue;
        int dx = grad_tensor(ad, x);
        if (same_dims(ad, x, y)) {
            add1(ad, node, IR_OP_MUL, (int[]){dy, other}, 2, dx, NULL);
        } else {
            int tmp = like(ad, y, "d_", IR_ACT); /* dy * other before the reduction */
            add1(ad, node, IR_OP_MUL, (int[]){dy, other}, 2, tmp, NULL);
            add1(ad, node, IR_OP_REDUCE_SUM, &tmp, 1, dx, NULL);
        }
        contribute(ad, x, dx);
    }
}

static void pass_grad_SOFTMAX(Ad *ad, int node, int dy)
{
    if (!NEEDS(IN(0)))
        return;
    int dx = grad_tensor(ad, IN(0));
    IrAttrs at = ad->g->nodes[node].attr;
    add1(ad, node, IR_OP_SOFTMAX_BWD, (int[]){OUT(0), dy}, 2, dx, &at);
    contribute(ad, IN(0), dx);
}

static void pass_grad_CROSS_ENTROPY(Ad *ad, int node, int dy)
{
    if (!NEEDS(IN(0)))
        return;
    int dx = grad_tensor(ad, IN(0));
    add1(ad, node, IR_OP_CROSS_ENTROPY_BWD, (int[]){IN(0), IN(1), OUT(1), dy}, 4, dx, NULL);
    contribute(ad, IN(0), dx);
}

static void pass_grad_SIGMOID(Ad *ad, int node, int dy) { unary(ad, node, dy, IR_OP_SIGMOID_BWD, OUT(0)); }

/* The router's backward recomputes the choice from the logits and reads the
 * gates for the kept ones; the load-balancing and z-loss gradients enter
 * here (docs/moe.md), so it runs even where dgates alone would vanish. */
static void pass_grad_ROUTE(Ad *ad, int node, int dy)
{
    if (!NEEDS(IN(0)))
        return;
    int dx = grad_tensor(ad, IN(0));
    IrAttrs at = ad->g->nodes[node].attr;
    add1(ad, node, IR_OP_ROUTE_BWD, (int[]){IN(0), OUT(0), dy}, 3, dx, &at);
    contribute(ad, IN(0), dx);
}

/* One backward node makes every gradient (dh, dgates, and the experts'
 * weights and biases, as many as the act's row of ir/moe_acts.def has), as
 * the runtime's rt_moe_bwd does in one exchange; it carries the act. */
static void pass_grad_MOE(Ad *ad, int node, int dy)
{
    int nin = ad->g->nodes[node].nin;
    bool any = false;
    for (int i = 0; i < nin; i++)
        any |= NEEDS(IN(i));
    if (!any)
        return;
    int d[IR_MAX_OUT], in[IR_MAX_IN];
    for (int i = 0; i < nin; i++) {
        d[i] = grad_tensor(ad, IN(i));
        in[i] = IN(i);
    }
    in[nin] = dy;
    IrAttrs at = ad->g->nodes[node].attr;
    add(ad, node, IR_OP_MOE_BWD, in, nin + 1, d, nin, &at);
    for (int i = 0; i < nin; i++)
        if (NEEDS(IN(i)))
            contribute(ad, IN(i), d[i]);
}

/* slice's gradient is dy in its place of x's last dim, zero elsewhere (two
 * slices of one x, as MLA's, contribute two such, summed as any). */
static void pass_grad_SLICE(Ad *ad, int node, int dy)
{
    if (!NEEDS(IN(0)))
        return;
    int dx = grad_tensor(ad, IN(0));
    IrAttrs at = ad->g->nodes[node].attr;
    add1(ad, node, IR_OP_SLICE_BWD, &dy, 1, dx, &at);
    contribute(ad, IN(0), dx);
}

/* concat's: dy's two pieces, b's summed over the dims it was broadcast
 * along, in one node (one pass over dy). */
static void pass_grad_CONCAT(Ad *ad, int node, int dy)
{
    if (!NEEDS(IN(0)) && !NEEDS(IN(1)))
        return;
    int d[2] = {grad_tensor(ad, IN(0)), grad_tensor(ad, IN(1))};
    IrAttrs at = ad->g->nodes[node].attr;
    add(ad, node, IR_OP_CONCAT_BWD, &dy, 1, d, 2, &at);
    for (int i = 0; i < 2; i++)
        if (NEEDS(IN(i)))
            contribute(ad, IN(i), d[i]);
}

/* Mamba-2 (docs/hybrid.md). softplus reads its input, as silu does. */
static void pass_grad_SOFTPLUS(Ad *ad, int node, int dy) { unary(ad, node, dy, IR_OP_SOFTPLUS_BWD, IN(0)); }
/* squared ReLU: dx = 2 max(x, 0) dy, from its input */
static void pass_grad_RELU2(Ad *ad, int node, int dy) { unary(ad, node, dy, IR_OP_RELU2_BWD, IN(0)); }

/* conv1d's backward: the transposed (anti-causal) convolution of dy for dx,
 * dy against x for the weight and dy's sum for the bias, in one node. */
static void pass_grad_CONV1D(Ad *ad, int node, int dy)
{
    if (!NEEDS(IN(0)) && !NEEDS(IN(1)) && !NEEDS(IN(2)))
        return;
    int d[3];
    for (int i = 0; i < 3; i++)
        d[i] = grad_tensor(ad, IN(i));
    add(ad, node, IR_OP_CONV1D_BWD, (int[]){IN(0), IN(1), dy}, 3, d, 3, NULL);
    for (int i = 0; i < 3; i++)
        if (NEEDS(IN(i)))
            contribute(ad, IN(i), d[i]);
}

/* ssd's backward is the scan run in reverse (the state's gradient carried
 * from the last step to the first), making all six gradients in one node
 * from the inputs alone. */
static void pass_grad_SSD(Ad *ad, int node, int dy)
{
    bool any = false;
    for (int i = 0; i < 6; i++)
        any |= NEEDS(IN(i));
    if (!any)
        return;
    int d[6];
    for (int i = 0; i < 6; i++)
        d[i] = grad_tensor(ad, IN(i));
    add(ad, node, IR_OP_SSD_BWD, (int[]){IN(0), IN(1), IN(2), IN(3), IN(4), IN(5), dy}, 7, d, 6, NULL);
    for (int i = 0; i < 6; i++)
        if (NEEDS(IN(i)))
            contribute(ad, IN(i), d[i]);
}

/* shift reads integers from the data: nothing upstream has a gradient, so
 * pass_autodiff never hands it one (ad.needs skips i32 inputs). */
static void pass_grad_SHIFT(Ad *ad, int node, int dy)
{
    (void)ad, (void)dy;
    ir_die("autodiff: shift node %d was given a gradient", node);
}

#undef IN
#undef OUT
#undef NEEDS

/* Backward ops are never differentiated; reaching one of these is a bug. */
#define NO_RULE(ID)                                                                         \
    static void pass_grad_##ID(Ad *ad, int node, int dy)                                    \
    {                                                                                       \
        (void)ad, (void)dy;                                                                 \
        ir_die("autodiff: node %d is a backward op (%s)", node, ir_ops[IR_OP_##ID].name);   \
    }
NO_RULE(EMBEDDING_BWD)
NO_RULE(RMSNORM_BWD)
NO_RULE(LAYERNORM_BWD)
NO_RULE(ROPE_BWD)
NO_RULE(ATTENTION_BWD)
NO_RULE(SILU_BWD)
NO_RULE(GELU_BWD)
NO_RULE(SWIGLU_BWD)
NO_RULE(SOFTMAX_BWD)
NO_RULE(CROSS_ENTROPY_BWD)
NO_RULE(SIGMOID_BWD)
NO_RULE(ROUTE_BWD)
NO_RULE(MOE_BWD)
NO_RULE(SLICE_BWD)
NO_RULE(CONCAT_BWD)
NO_RULE(SOFTPLUS_BWD)
NO_RULE(CONV1D_BWD)
NO_RULE(SSD_BWD)
NO_RULE(RELU2_BWD)
NO_RULE(REDUCE_SUM)
#undef NO_RULE

static GradRule *const rules[IR_NUM_OPS] = {
#define OP(ID, name, nin, nout, flags, saves) [IR_OP_##ID] = pass_grad_##ID,
#include "ops.def"
#undef OP
};

/* ------------------------------------------------------------------ checks */

/* Is t a forward value (made by the forward pass, or a parameter or input)? */
static bool forward_value(const IrGraph *g, int t)
{
    const IrTensor *x = &g->tensors[t];
    if (x->role == IR_GRAD)
        return false;
    return x->producer < g->nfwd;
}

/* A backward node may read a forward value only if its forward node saves it. */
static void check_saves(const IrGraph *g, const IrNode *b)
{
    const IrNode *f = &g->nodes[b->fwd];
    unsigned saves = ir_ops[f->op].saves;
    for (int k = 0; k < b->nin; k++) {
        int t = b->in[k];
        if (!forward_value(g, t))
            continue;
        bool ok = false;
        for (int i = 0; i < f->nin; i++)
            ok |= f->in[i] == t && (saves & IR_SAVE_IN(i));
        for (int j = 0; j < f->nout; j++)
            ok |= f->out[j] == t && (saves & IR_SAVE_OUT(j));
        if (!ok)
            ir_die("autodiff: %s (backward of node %d, %s) reads '%s', which ops.def does not save",
                   ir_ops[b->op].name, f->id, ir_ops[f->op].name, g->tensors[t].name);
    }
}

/* Statistics (rstd, mean, lse) feed only the backward pass. */
static bool check_statistics(const IrGraph *g)
{
    bool ok = true;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++) {
            const IrTensor *x = &g->tensors[n->in[k]];
            if (x->producer < 0 || x->role != IR_ACT)
                continue;
            const IrNode *p = &g->nodes[x->producer];
            if (p->out[0] == x->id)
                continue;
            ir_error(n->loc, "%s reads '%s', a statistic of %s that ptdc does not differentiate",
                     ir_ops[n->op].name, x->base, ir_ops[p->op].name);
            ok = false;
        }
    }
    return ok;
}

/* ----------------------------------------------------------------- the pass */

bool pass_autodiff(IrGraph *g)
{
    if (g->nnodes != g->nfwd)
        ir_die("pass_autodiff: the graph already has %d backward nodes", g->nnodes - g->nfwd);
    if (g->loss < 0 || g->npieces == 0)
        ir_die("pass_autodiff: no loss");
    if (!check_statistics(g))
        return false;
    Ad ad = {.g = g, .nfwd = g->nfwd, .ntensors0 = g->ntensors};
    ad.last_count = g->pieces[g->npieces - 1].count;
    ad.needs = ir_xcalloc((size_t)g->ntensors, sizeof *ad.needs);
    ad.contrib = ir_xcalloc((size_t)g->ntensors, sizeof *ad.contrib);
    ad.ntmpl = ir_xcalloc((size_t)g->npieces, sizeof *ad.ntmpl);

    /* Which values depend on a parameter (only those have gradients). */
    for (int t = 0; t < g->ntensors; t++)
        ad.needs[t] = g->tensors[t].role == IR_PARAM;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->nin; k++)
            any |= ad.needs[n->in[k]] && g->tensors[n->in[k]].dtype != IR_I32;
        ad.needs[n->out[0]] = any;
    }

    for (int i = g->nfwd - 1; i >= 0; i--) {
        int dy, y = g->nodes[i].out[0]; /* adding nodes moves g->nodes: no pointer into it */
        if (g->tensors[y].role == IR_LOSS) {
            /* The seed d loss / d loss = 1: a scalar gradient nothing computes
             * (one per cross-entropy; its weight scales it in codegen). */
            dy = grad_tensor(&ad, y);
        } else {
            dy = finish(&ad, y, i);
        }
        if (dy < 0)
            continue;
        rules[g->nodes[i].op](&ad, i, dy);
    }
    /* Parameters: sum contributions of tied uses (filed under the first consumer). */
    for (int t = 0; t < ad.ntensors0; t++) {
        if (g->tensors[t].role != IR_PARAM || ad.contrib[t].n < 2)
            continue;
        int first;
        ir_consumers(g, t, &first, 1);
        finish(&ad, t, first);
    }
    for (int i = ad.nfwd; i < g->nnodes; i++)
        check_saves(g, &g->nodes[i]);

    for (int t = 0; t < ad.ntensors0; t++)
        vec_free(ad.contrib[t]);
    free(ad.contrib);
    free(ad.needs);
    free(ad.ntmpl);
    return true;
}

bool pass_is_grad_sum(const IrGraph *g, const IrNode *n)
{
    return n->id >= g->nfwd && n->op == IR_OP_ADD && g->tensors[n->out[0]].role == IR_GRAD;
}

int pass_grad_final(const IrGraph *g, int t)
{
    /* The gradient of t that no gradient sum reads. */
    int found = -1;
    for (int u = 0; u < g->ntensors; u++) {
        const IrTensor *x = &g->tensors[u];
        if (x->role != IR_GRAD || x->grad_of != t)
            continue;
        bool summed = false;
        for (int i = g->nfwd; i < g->nnodes && !summed; i++) {
            const IrNode *n = &g->nodes[i];
            if (pass_is_grad_sum(g, n))
                summed = n->in[0] == u || n->in[1] == u;
        }
        if (!summed)
            found = u;
    }
    return found;
}
