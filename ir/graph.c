/* graph.c: building the IR graph and simple queries over it. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

const IrOpInfo ir_ops[IR_NUM_OPS] = {
#define OP(ID, name, nin, nout, flags, saves) [IR_OP_##ID] = {name, nin, nout, flags, saves},
#include "ops.def"
#undef OP
};

const IrMoeActInfo ir_moe_acts[IR_NMOE_ACTS] = {
#define MOE_ACT(ID, name, gated, clamped) [IR_MOE_##ID] = {name, gated, clamped},
#include "moe_acts.def"
#undef MOE_ACT
};

int ir_moe_arity(int act, bool bias)
{
    bool gated = act >= 0 && act < IR_NMOE_ACTS ? ir_moe_acts[act].gated : true;
    return 2 + (gated ? 3 : 2) + (bias ? (gated ? 2 : 1) : 0);
}

IrMoeSlots ir_moe_slots(const IrNode *n)
{
    int act = n->attr.moe_act, nfwd = n->op == IR_OP_MOE_BWD ? n->nin - 1 : n->nin;
    bool gated = ir_moe_acts[act].gated, bias = nfwd == ir_moe_arity(act, true);
    IrMoeSlots s = {-1, -1, -1, -1, -1, -1};
    int i = 2;
    if (gated)
        s.w_gate = i++;
    s.w_up = i++;
    s.w_down = i++;
    if (bias && gated)
        s.b_gate = i++;
    if (bias)
        s.b_up = i++;
    if (n->op == IR_OP_MOE_BWD)
        s.dy = i;
    return s;
}

bool ir_op_arity_ok(int op, int nin, int nout, const IrAttrs *at)
{
    const IrOpInfo *o = &ir_ops[op];
    if (o->flags & IR_OPF_EXPERTS) {
        int act = at ? at->moe_act : 0;
        if (act < 0 || act >= IR_NMOE_ACTS)
            return false;
        bool bwd = o->flags & IR_OPF_BWD;
        int f = bwd ? nin - 1 : nin;
        if (f != ir_moe_arity(act, false) && f != ir_moe_arity(act, true))
            return false;
        return nout == (bwd ? f : 1);
    }
    if (nin == o->nin && nout == o->nout)
        return true;
    if (!(o->flags & IR_OPF_OPT_LAST) || nin != o->nin - 1)
        return false;
    return nout == ((o->flags & IR_OPF_BWD) ? o->nout - 1 : o->nout);
}

int ir_op_lookup(const char *name)
{
    for (int i = 0; i < IR_NUM_OPS; i++)
        if ((ir_ops[i].flags & IR_OPF_FWD) && strcmp(ir_ops[i].name, name) == 0)
            return i;
    return -1;
}

int ir_dtype_bytes(IrDtype t) { return t == IR_BF16 ? 2 : 4; }

const char *ir_dtype_name(IrDtype t)
{
    switch (t) {
    case IR_F32: return "f32";
    case IR_BF16: return "bf16";
    case IR_I32: return "i32";
    }
    return "?";
}

/* Arrays grow on the heap (ir_graph_free releases them) so a 100-layer model
 * does not leave dead copies in the arena. */
#define GROW(arr, n, cap)                                                          \
    do {                                                                           \
        if ((n) == (cap)) {                                                        \
            (cap) = (cap) ? 2 * (cap) : 64;                                        \
            (arr) = ir_xrealloc((arr), (size_t)(cap) * sizeof *(arr));             \
        }                                                                          \
    } while (0)

IrGraph *ir_graph_new(IrArena *a, const char *name, const char *path)
{
    IrGraph *g = ir_alloc(a, sizeof *g);
    g->arena = a;
    g->name = ir_strdup(a, name ? name : "model");
    g->path = path ? ir_strdup(a, path) : NULL;
    g->loss = -1;
    g->seq_dim = -1;
    g->cur_layer = -1;
    g->cur_rep = -1;
    g->cur_stmt = -1;
    g->batch_dim = ir_dim_add(g, "batch", 0, IR_NOLOC);
    return g;
}

void ir_graph_free(IrGraph *g)
{
    if (!g)
        return;
    free(g->dims);
    free(g->tensors);
    free(g->nodes);
    free(g->pieces);
    free(g->consts);
    ir_map_free(&g->names);
}

int ir_dim_find(const IrGraph *g, const char *name)
{
    for (int i = 0; i < g->ndims; i++)
        if (strcmp(g->dims[i].name, name) == 0)
            return i;
    return -1;
}

int ir_dim_add(IrGraph *g, const char *name, int64_t size, IrLoc loc)
{
    int d = ir_dim_find(g, name);
    if (d >= 0)
        return d;
    GROW(g->dims, g->ndims, g->capdims);
    g->dims[g->ndims] = (IrDim){ir_strdup(g->arena, name), size, loc};
    return g->ndims++;
}

int ir_tensor_find(const IrGraph *g, const char *name)
{
    int id;
    return ir_map_get(&g->names, name, &id) ? id : -1;
}

static bool name_taken(const IrGraph *g, const char *name)
{
    int id;
    return ir_map_get(&g->names, name, &id) && id >= 0; /* -1: released by a rename or rollback */
}

static const char *unique_name(IrGraph *g, const char *base)
{
    const char *name;
    if (g->cur_layer >= 0)
        name = g->cur_stmt > 0 ? ir_sprintf(g->arena, "layers%d.%d.%s", g->cur_stmt, g->cur_layer, base)
                              : ir_sprintf(g->arena, "layers.%d.%s", g->cur_layer, base);
    else
        name = ir_strdup(g->arena, base);
    if (!name_taken(g, name))
        return name;
    for (int k = 1;; k++) {
        const char *n2 = ir_sprintf(g->arena, "%s.%d", name, k);
        if (!name_taken(g, n2))
            return n2;
    }
}

int ir_tensor_add(IrGraph *g, const char *base, IrDtype dt, IrRole role, int rank,
                  const int *dims, IrLoc loc)
{
    if (rank < 0 || rank > IR_MAX_RANK)
        ir_die("tensor '%s' of rank %d", base, rank);
    GROW(g->tensors, g->ntensors, g->captensors);
    IrTensor *t = &g->tensors[g->ntensors];
    memset(t, 0, sizeof *t);
    t->id = g->ntensors;
    t->base = ir_strdup(g->arena, base);
    t->name = unique_name(g, base);
    t->dtype = dt;
    t->role = role;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dim[i] = dims[i];
    t->producer = -1;
    t->piece = g->npieces - 1;
    t->layer = g->cur_layer;
    t->loc = loc;
    t->grad_of = -1;
    t->hf_nparts = 1;
    ir_map_put(&g->names, t->name, t->id);
    return g->ntensors++;
}

void ir_tensor_rename(IrGraph *g, int t, const char *base)
{
    IrTensor *x = &g->tensors[t];
    ir_map_put(&g->names, x->name, -1);
    int saved_layer = g->cur_layer, saved_rep = g->cur_rep, saved_stmt = g->cur_stmt;
    g->cur_layer = x->layer;
    g->cur_rep = x->piece >= 0 ? g->pieces[x->piece].rep : -1;
    g->cur_stmt = x->piece >= 0 ? g->pieces[x->piece].stmt : -1;
    x->base = ir_strdup(g->arena, base);
    x->name = unique_name(g, base);
    g->cur_layer = saved_layer;
    g->cur_rep = saved_rep;
    g->cur_stmt = saved_stmt;
    ir_map_put(&g->names, x->name, t);
}

void ir_piece_begin(IrGraph *g, const char *name, int layer, int rep)
{
    GROW(g->pieces, g->npieces, g->cappieces);
    g->pieces[g->npieces] = (IrPiece){ir_strdup(g->arena, name), g->nnodes, 0, layer, rep, rep};
    g->npieces++;
    g->cur_layer = layer;
    g->cur_rep = rep;
    g->cur_stmt = rep;
}

void ir_piece_kind(IrGraph *g, int rep, int stmt)
{
    if (g->npieces < 1 || g->pieces[g->npieces - 1].count)
        ir_die("ir_piece_kind after the piece's first operator");
    g->pieces[g->npieces - 1].rep = g->cur_rep = rep;
    g->pieces[g->npieces - 1].stmt = g->cur_stmt = stmt;
}

static IrNode *new_node(IrGraph *g, IrOp op, const int *in, int nin, const IrAttrs *attr, IrLoc loc)
{
    if (nin > IR_MAX_IN)
        ir_die("node %s with %d inputs", ir_ops[op].name, nin);
    GROW(g->nodes, g->nnodes, g->capnodes);
    IrNode *n = &g->nodes[g->nnodes];
    memset(n, 0, sizeof *n);
    n->id = g->nnodes;
    n->op = op;
    n->nin = nin;
    for (int i = 0; i < nin; i++)
        n->in[i] = in[i];
    if (attr)
        n->attr = *attr;
    n->piece = g->npieces - 1;
    n->layer = g->cur_layer;
    n->block = g->cur_block;
    n->fwd = -1;
    n->loc = loc;
    if (n->piece >= 0) {
        IrPiece *p = &g->pieces[n->piece];
        n->tmpl = g->nnodes - p->first;
        p->count = g->nnodes + 1 - p->first;
    }
    return n;
}

int ir_node_add_raw(IrGraph *g, IrOp op, const int *in, int nin, const int *out, int nout,
                    const IrAttrs *attr, IrLoc loc)
{
    if (nout > IR_MAX_OUT)
        ir_die("node %s with %d outputs", ir_ops[op].name, nout);
    IrNode *n = new_node(g, op, in, nin, attr, loc);
    n->nout = nout;
    for (int i = 0; i < nout; i++) {
        n->out[i] = out[i];
        g->tensors[out[i]].producer = n->id;
    }
    g->nnodes++;
    if (ir_ops[op].flags & IR_OPF_FWD)
        g->nfwd = g->nnodes;
    return n->id;
}

void ir_const_add(IrGraph *g, const char *name, bool is_int, int64_t i, double f, IrLoc loc)
{
    /* Grow by doubling: the capacity is the next power of two, so no field is
     * needed; one realloc per constant made 600,000 constants quadratic. */
    int n = g->nconsts;
    if (n == 0 || (n >= 8 && (n & (n - 1)) == 0))
        g->consts = ir_xrealloc(g->consts, (size_t)(n < 8 ? 8 : 2 * n) * sizeof *g->consts);
    g->consts[g->nconsts++] = (IrConst){ir_strdup(g->arena, name), is_int, i, f, loc};
}

const IrConst *ir_const_find(const IrGraph *g, const char *name)
{
    for (int i = 0; i < g->nconsts; i++)
        if (strcmp(g->consts[i].name, name) == 0)
            return &g->consts[i];
    return NULL;
}

void ir_dim_sizes(const IrGraph *g, int64_t batch, int64_t *dim_size)
{
    for (int d = 0; d < g->ndims; d++)
        dim_size[d] = g->dims[d].size;
    dim_size[g->batch_dim] = batch;
}

int64_t ir_numel(const IrGraph *g, int t, const int64_t *dim_size)
{
    const IrTensor *x = &g->tensors[t];
    int64_t n = 1;
    for (int i = 0; i < x->rank; i++)
        n *= dim_size[x->dim[i]];
    return n;
}

int64_t ir_bytes(const IrGraph *g, int t, const int64_t *dim_size)
{
    return ir_numel(g, t, dim_size) * ir_dtype_bytes(g->tensors[t].dtype);
}

int ir_tensor_dim_pos(const IrGraph *g, int t, int dim)
{
    const IrTensor *x = &g->tensors[t];
    for (int i = 0; i < x->rank; i++)
        if (x->dim[i] == dim)
            return i;
    return -1;
}

bool ir_tensor_has_dim(const IrGraph *g, int t, int dim) { return ir_tensor_dim_pos(g, t, dim) >= 0; }

bool ir_node_has_dim(const IrGraph *g, const IrNode *n, int dim)
{
    for (int i = 0; i < n->nin; i++)
        if (ir_tensor_has_dim(g, n->in[i], dim))
            return true;
    for (int i = 0; i < n->nout; i++)
        if (ir_tensor_has_dim(g, n->out[i], dim))
            return true;
    return false;
}

int64_t ir_param_count(const IrGraph *g)
{
    /* Params never carry the batch dim, so plain dim sizes suffice. */
    int64_t n = 0;
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        if (x->role != IR_PARAM)
            continue;
        int64_t k = 1;
        for (int i = 0; i < x->rank; i++)
            k *= g->dims[x->dim[i]].size;
        n += k;
    }
    return n;
}

/* Parameters one token uses: an MoE layer's expert weights and biases (the
 * moe node's inputs from 2 on, and a weight multiplying the gates, stacked
 * along the expert dim) count topk / n_experts of
 * their size (n_experts the gates' last dim), topk from the route node that
 * makes the gates; everything else
 * whole, each tensor once (a tied weight, or experts read by two moe nodes,
 * as ir_param_count). Equal to ir_param_count for a dense model. */
int64_t ir_active_param_count(const IrGraph *g)
{
    int64_t n = ir_param_count(g);
    bool *seen = ir_xcalloc((size_t)g->ntensors + 1, 1);
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *nd = &g->nodes[i];
        /* the experts' weights and biases, and a weight the gates multiply
         * (GPT-OSS's down bias, matmul(gates, e_down_b): row e used with
         * expert e's gate) */
        bool gmat = nd->op == IR_OP_MATMUL && g->tensors[nd->in[0]].producer >= 0 &&
                    g->nodes[g->tensors[nd->in[0]].producer].op == IR_OP_ROUTE;
        if (nd->op != IR_OP_MOE && !gmat)
            continue;
        const IrTensor *gates = &g->tensors[nd->in[gmat ? 0 : 1]];
        if (gates->producer < 0 || g->nodes[gates->producer].op != IR_OP_ROUTE)
            continue; /* gates from elsewhere: no top-k known, counted whole */
        int64_t k = g->nodes[gates->producer].attr.route.topk;
        for (int j = gmat ? 1 : 2; j < nd->nin; j++) {
            const IrTensor *x = &g->tensors[nd->in[j]];
            if (x->role != IR_PARAM || seen[x->id] || x->rank < 1 ||
                x->dim[0] != gates->dim[gates->rank - 1])
                continue;
            seen[x->id] = true;
            int64_t e = g->dims[gates->dim[gates->rank - 1]].size, size = 1; /* experts */
            for (int d = 0; d < x->rank; d++)
                size *= g->dims[x->dim[d]].size;
            n -= size - size / e * (k < e ? k : e);
        }
    }
    free(seen);
    return n;
}

int64_t ir_matmul_param_count(const IrGraph *g)
{
    bool *seen = ir_xcalloc((size_t)g->ntensors + 1, 1);
    int64_t n = 0;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *nd = &g->nodes[i];
        if (nd->op != IR_OP_MATMUL)
            continue;
        for (int k = 0; k < nd->nin; k++) {
            const IrTensor *x = &g->tensors[nd->in[k]];
            if (x->role != IR_PARAM || seen[x->id])
                continue;
            seen[x->id] = true;
            int64_t e = 1;
            for (int j = 0; j < x->rank; j++)
                e *= g->dims[x->dim[j]].size;
            n += e;
        }
    }
    free(seen);
    return n;
}

int ir_consumers(const IrGraph *g, int t, int *out, int max)
{
    int k = 0;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        for (int j = 0; j < n->nin; j++)
            if (n->in[j] == t) {
                if (k < max)
                    out[k] = i;
                k++;
                break;
            }
    }
    return k;
}

/* ir_grad_in_place's test of t, given that `users` forward nodes read it and
 * `user` is one of them. */
static bool grad_in_place_given(const IrGraph *g, int t, int users, int user)
{
    const IrTensor *x = &g->tensors[t];
    if (x->role != IR_ACT || x->producer < 0 || x->producer >= g->nfwd || users != 1)
        return false;
    const IrNode *n = &g->nodes[user];
    if (!(ir_ops[n->op].flags & IR_OPF_GRAD_IN_PLACE) || n->in[0] != t)
        return false;
    for (int i = 1; i < n->nin; i++)
        if (n->in[i] == t)
            return false;
    /* A producer that keeps its output (softmax) reads it in its backward,
     * after the gradient has overwritten it. */
    const IrNode *p = &g->nodes[x->producer];
    for (int j = 0; j < p->nout; j++)
        if (p->out[j] == t && (ir_ops[p->op].saves & IR_SAVE_OUT(j)))
            return false;
    return true;
}

bool ir_grad_in_place(const IrGraph *g, int t)
{
    int user = -1, users = ir_consumers(g, t, &user, 1);
    return grad_in_place_given(g, t, users, user);
}

void ir_grad_in_place_all(const IrGraph *g, bool *over)
{
    int *users = ir_xcalloc((size_t)g->ntensors + 1, sizeof(int));
    int *user = ir_xcalloc((size_t)g->ntensors + 1, sizeof(int));
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        for (int j = 0; j < n->nin; j++) {
            int t = n->in[j], k = 0;
            while (k < j && n->in[k] != t) /* a node reading t twice is one consumer (ir_consumers) */
                k++;
            if (k == j && users[t]++ == 0)
                user[t] = i;
        }
    }
    for (int t = 0; t < g->ntensors; t++)
        over[t] = grad_in_place_given(g, t, users[t], user[t]);
    free(users);
    free(user);
}

const char *ir_shape_str(const IrGraph *g, int t, char *buf, size_t n)
{
    const IrTensor *x = &g->tensors[t];
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < x->rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", g->dims[x->dim[i]].name);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}
