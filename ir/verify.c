/* verify.c: the IR's invariants, checked after the frontend and after every
 * pass that rewrites the graph. A failure is a compiler bug, reported with
 * the pass that broke it. */
#include "ir.h"

#include <string.h>

static int nbad;
static const char *pass;

__attribute__((format(printf, 1, 2))) static void bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ptdc: IR verifier (after %s): ", pass);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    nbad++;
}

static bool valid_tensor(const IrGraph *g, int t) { return t >= 0 && t < g->ntensors; }

static void check_dims(const IrGraph *g)
{
    for (int d = 0; d < g->ndims; d++) {
        if (d != g->batch_dim && g->dims[d].size <= 0)
            bad("dim '%s' has size %lld", g->dims[d].name, (long long)g->dims[d].size);
        for (int e = 0; e < d; e++)
            if (strcmp(g->dims[d].name, g->dims[e].name) == 0)
                bad("dim '%s' declared twice", g->dims[d].name);
    }
    if (g->batch_dim < 0 || g->batch_dim >= g->ndims)
        bad("no batch dim");
}

static void check_tensor(const IrGraph *g, int t)
{
    const IrTensor *x = &g->tensors[t];
    if (x->id != t)
        bad("tensor %d has id %d", t, x->id);
    if (x->rank < 0 || x->rank > IR_MAX_RANK) {
        bad("tensor '%s' has rank %d", x->name, x->rank);
        return;
    }
    for (int i = 0; i < x->rank; i++) {
        if (x->dim[i] < 0 || x->dim[i] >= g->ndims) {
            bad("tensor '%s' dim %d is %d", x->name, i, x->dim[i]);
            return;
        }
        for (int j = 0; j < i; j++)
            if (x->dim[i] == x->dim[j])
                bad("tensor '%s' repeats dim '%s'", x->name, g->dims[x->dim[i]].name);
    }
    if (ir_tensor_find(g, x->name) != t)
        bad("tensor name '%s' does not map back to it", x->name);
    switch (x->role) {
    case IR_PARAM:
        if (x->producer != -1)
            bad("param '%s' has a producer", x->name);
        if (ir_tensor_has_dim(g, t, g->batch_dim))
            bad("param '%s' has the batch dim", x->name);
        if (x->init == IR_INIT_NONE)
            bad("param '%s' has no initialiser", x->name);
        if (x->init == IR_INIT_NORMAL && !(x->init_std > 0))
            bad("param '%s' has std %g", x->name, x->init_std);
        if (x->hf_nparts < 1 || x->hf_part < 0 || x->hf_part >= x->hf_nparts)
            bad("param '%s' has HF part %d of %d", x->name, x->hf_part, x->hf_nparts);
        break;
    case IR_INPUT:
        if (x->producer != -1)
            bad("input '%s' has a producer", x->name);
        break;
    case IR_ACT:
    case IR_LOSS:
    case IR_GRAD:
        if (x->role == IR_GRAD && x->producer == -1 && x->grad_of >= 0 && x->grad_of < g->ntensors &&
            g->tensors[x->grad_of].role == IR_LOSS && x->rank == 0)
            break; /* autodiff's seed d loss / d loss: a constant, nothing computes it */
        if (x->producer < 0 || x->producer >= g->nnodes) {
            bad("tensor '%s' has no producer", x->name);
            break;
        }
        {
            const IrNode *n = &g->nodes[x->producer];
            bool found = false;
            for (int i = 0; i < n->nout; i++)
                found |= n->out[i] == t;
            if (!found)
                bad("tensor '%s' names producer %d which does not output it", x->name, n->id);
        }
        if (x->role == IR_GRAD) {
            if (!valid_tensor(g, x->grad_of))
                bad("gradient '%s' of nothing", x->name);
            else {
                const IrTensor *o = &g->tensors[x->grad_of];
                if (o->rank != x->rank || memcmp(o->dim, x->dim, sizeof(int) * (size_t)x->rank) != 0)
                    bad("gradient '%s' does not have the dims of '%s'", x->name, o->name);
            }
        }
        break;
    }
}

static void check_node(const IrGraph *g, int i)
{
    const IrNode *n = &g->nodes[i];
    if (n->id != i)
        bad("node %d has id %d", i, n->id);
    if ((unsigned)n->op >= IR_NUM_OPS) {
        bad("node %d has op %d", i, (int)n->op);
        return;
    }
    const IrOpInfo *op = &ir_ops[n->op];
    if (!ir_op_arity_ok(n->op, n->nin, n->nout, &n->attr))
        bad("node %d (%s) has %d inputs and %d outputs, the table says %d and %d", i, op->name,
            n->nin, n->nout, op->nin, op->nout);
    bool is_fwd = (op->flags & IR_OPF_FWD) != 0;
    /* Backward nodes may also use forward ops: MATMUL's backward is two
     * MATMULs, and gradient contributions are summed with ADD. */
    if (i < g->nfwd && !is_fwd)
        bad("node %d (%s) is on the wrong side of the forward/backward boundary %d", i, op->name,
            g->nfwd);
    if (i >= g->nfwd && (n->fwd < 0 || n->fwd >= g->nfwd))
        bad("backward node %d (%s) differentiates no forward node", i, op->name);
    for (int k = 0; k < n->nin && k < IR_MAX_IN; k++) {
        int t = n->in[k];
        if (!valid_tensor(g, t)) {
            bad("node %d (%s) input %d is tensor %d", i, op->name, k, t);
            continue;
        }
        int p = g->tensors[t].producer;
        if (p >= i)
            bad("node %d (%s) reads '%s' before node %d makes it", i, op->name, g->tensors[t].name, p);
    }
    for (int k = 0; k < n->nout && k < IR_MAX_OUT; k++) {
        int t = n->out[k];
        if (!valid_tensor(g, t))
            bad("node %d (%s) output %d is tensor %d", i, op->name, k, t);
        else if (g->tensors[t].producer != i)
            bad("node %d (%s) output '%s' names producer %d", i, op->name, g->tensors[t].name,
                g->tensors[t].producer);
    }
    if (is_fwd && (n->piece < 0 || n->piece >= g->npieces))
        bad("forward node %d (%s) is in no piece", i, op->name);
    if (n->op == IR_OP_MATMUL && n->nin == 2) {
        if (n->attr.ncontract <= 0)
            bad("matmul %d contracts nothing", i);
        for (int c = 0; c < n->attr.ncontract; c++)
            if (!ir_tensor_has_dim(g, n->in[0], n->attr.contract[c]) ||
                !ir_tensor_has_dim(g, n->in[1], n->attr.contract[c]))
                bad("matmul %d contracts a dim missing from an input", i);
    }
    if ((n->op == IR_OP_RMSNORM || n->op == IR_OP_LAYERNORM) && !(n->attr.eps > 0))
        bad("%s %d has eps %g", op->name, i, n->attr.eps);
    if ((n->op == IR_OP_ATTENTION || n->op == IR_OP_ATTENTION_BWD) &&
        (n->attr.window < 0 || (n->attr.window > 0 && !n->attr.causal)))
        bad("%s %d has window %lld (causal %d)", op->name, i, (long long)n->attr.window,
            n->attr.causal);
    if ((n->op == IR_OP_ROPE || n->op == IR_OP_ROPE_BWD) && n->attr.rope.kind == IR_ROPE_LLAMA3 &&
        !(n->attr.rope.factor > 0 && n->attr.rope.high_freq_factor > n->attr.rope.low_freq_factor &&
          n->attr.rope.low_freq_factor > 0 && n->attr.rope.original_max_position > 0))
        bad("%s %d has invalid llama3 scaling", op->name, i);
    if (n->op == IR_OP_ROUTE || n->op == IR_OP_ROUTE_BWD) {
        const IrRoute *r = &n->attr.route;
        if (r->topk < 1 || r->scale < 0 || r->capacity < 0 || r->aux < 0 || r->zloss < 0 ||
            (r->score != IR_SCORE_SOFTMAX && r->score != IR_SCORE_SIGMOID) ||
            (r->groups > 0) != (r->group_topk > 0))
            bad("%s %d has invalid routing attributes", op->name, i);
    }
}

static void check_pieces(const IrGraph *g)
{
    int next = 0;
    for (int p = 0; p < g->npieces; p++) {
        const IrPiece *pc = &g->pieces[p];
        if (pc->first != next)
            bad("piece %d (%s) starts at node %d, expected %d", p, pc->name, pc->first, next);
        for (int i = pc->first; i < pc->first + pc->count && i < g->nnodes; i++) {
            if (g->nodes[i].piece != p)
                bad("node %d is in piece %d but claims %d", i, p, g->nodes[i].piece);
            if (g->nodes[i].tmpl != i - pc->first)
                bad("node %d has template index %d, expected %d", i, g->nodes[i].tmpl, i - pc->first);
        }
        next = pc->first + pc->count;
        /* A repeat statement's layers are consecutive pieces, layer k the
         * k-th, each node of a piece in its layer (plan/precision.c counts
         * a statement's last layers by it). */
        const IrPiece *prev = p > 0 ? &g->pieces[p - 1] : NULL;
        bool cont = prev && pc->stmt >= 0 && prev->stmt == pc->stmt;
        if (pc->stmt >= 0 && pc->layer != (cont ? prev->layer + 1 : 0))
            bad("piece %d (%s) of repeat statement %d is layer %d, expected %d", p, pc->name, pc->stmt,
                pc->layer, cont ? prev->layer + 1 : 0);
        for (int q = 0; q < p && pc->stmt >= 0 && !cont; q++)
            if (g->pieces[q].stmt == pc->stmt)
                bad("repeat statement %d's pieces are not consecutive (piece %d, then %d)", pc->stmt, q, p);
        for (int i = pc->first; i < pc->first + pc->count && i < g->nnodes; i++)
            if (g->nodes[i].layer != pc->layer)
                bad("node %d is in layer %d but its piece %d in layer %d", i, g->nodes[i].layer, p, pc->layer);
    }
    if (next != g->nfwd)
        bad("pieces cover nodes [0, %d) but there are %d forward nodes", next, g->nfwd);
}

bool ir_verify(const IrGraph *g, const char *after)
{
    nbad = 0;
    pass = after ? after : "?";
    check_dims(g);
    for (int t = 0; t < g->ntensors; t++)
        check_tensor(g, t);
    for (int i = 0; i < g->nnodes; i++)
        check_node(g, i);
    check_pieces(g);
    int nloss = 0;
    for (int t = 0; t < g->ntensors; t++)
        nloss += g->tensors[t].role == IR_LOSS;
    if (nloss < 1)
        bad("no loss tensor");
    else if (!valid_tensor(g, g->loss) || g->tensors[g->loss].role != IR_LOSS)
        bad("graph loss is not the loss tensor");
    if (g->seq_dim < 0 || g->seq_dim >= g->ndims)
        bad("no sequence dim");
    if (g->global_batch <= 0)
        bad("global batch %lld", (long long)g->global_batch);
    return nbad == 0;
}
