/* lower.c: the model body to the IR. Statements run in order against an
 * environment of bound names; `repeat` runs its body once per iteration, each
 * iteration a piece of its own (docs/design.md, "The IR"). Operators go
 * through ir_node_add, whose shape rules (ir/shape.c) check named dims and
 * report mismatches at the operator.
 *
 * Pieces: the statements before the first repeat form piece "embedding" (or
 * "pre" when they embed nothing), each iteration "layer N" ("layer R.N" for
 * the R-th repeat, R > 0), statements between two repeats "between", and
 * those after the last "head".
 *
 * After an error a name is bound to POISON, so its later uses stay quiet
 * instead of repeating the error as "unknown name". */
#include "fe.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

enum { POISON = -2 };

typedef struct Lower {
    IrGraph *g;
    FeConsts *c;
    IrArena *tmp;
    IrMap env;                 /* bound name -> tensor id or POISON */
    VEC(const char *) names;   /* bound names, for suggestions */
    long steps;
    bool stop;                 /* a limit was hit: lower nothing more */
    bool have_input;           /* the first input is declared (and sets the sequence dim) */
    bool any_input;            /* an input statement was seen, even a failed one */
    bool in_repeat;
    bool in_pattern;           /* lowering a pattern repeat's block: its letters are in place */
    int64_t nparams;           /* parameter elements so far */
    int loss_node;
    IrLoc loss_loc;
} Lower;

static const char *op_names[IR_NUM_OPS];
static int nop_names;

static void init_op_names(void)
{
    nop_names = 0;
    for (int i = 0; i < IR_NUM_OPS; i++)
        if (ir_ops[i].flags & IR_OPF_FWD)
            op_names[nop_names++] = ir_ops[i].name;
}

static void bind(Lower *lw, const char *name, int t)
{
    int old;
    if (!ir_map_get(&lw->env, name, &old))
        vec_push(lw->names, name);
    ir_map_put(&lw->env, name, t);
}

static bool lookup(Lower *lw, const char *name, int *t) { return ir_map_get(&lw->env, name, t); }

static bool limit_hit(Lower *lw, IrLoc loc)
{
    if (lw->stop)
        return true;
    if (++lw->steps > FE_MAX_STEPS) {
        ir_error(loc, "the model unrolls to more than %d statements and operators", FE_MAX_STEPS);
        lw->stop = true;
    } else if (lw->g->nnodes > FE_MAX_NODES) {
        ir_error(loc, "the model unrolls to more than %d operators", FE_MAX_NODES);
        lw->stop = true;
    }
    return lw->stop;
}

/* ------------------------------------------------------------- dimensions */

/* The dim named by a constant (or batch); -1 after reporting why not. */
static int dim_of(Lower *lw, const char *name, IrLoc loc)
{
    IrGraph *g = lw->g;
    if (strcmp(name, "batch") == 0)
        return g->batch_dim;
    if (!fe_const_exists(lw->c, name)) {
        int n;
        const char *const *cands = fe_const_names(lw->c, &n);
        const char *s = fe_suggest(name, cands, n);
        if (!s && fe_suggest(name, (const char *const[]){"batch"}, 1))
            s = "batch";
        ir_error(loc, "unknown dimension '%s'%s%s%s", name, s ? "; did you mean '" : "", s ? s : "",
                 s ? "'?" : "");
        return -1;
    }
    const char *real = fe_const_alias(lw->c, name);
    bool exists;
    FeValue v = fe_const_value(lw->c, real, &exists);
    if (!v.ok)
        return -1; /* reported where the constant is defined */
    if (!v.is_int) {
        ir_error(loc, "dim '%s' is %g, not an integer", name, v.f);
        return -1;
    }
    if (v.i <= 0) {
        ir_error(loc, "dim '%s' is %lld; a dimension must be a positive integer", name,
                 (long long)v.i);
        return -1;
    }
    return ir_dim_add(g, real, v.i, loc);
}

/* A written type to dim ids; false after reporting. */
static bool resolve_type(Lower *lw, const FeType *ty, int *dims)
{
    if (ty->ndims > IR_MAX_RANK) {
        ir_error(ty->dims[IR_MAX_RANK].loc, "a tensor has at most %d dims", IR_MAX_RANK);
        return false;
    }
    bool ok = true;
    for (int i = 0; i < ty->ndims; i++) {
        dims[i] = dim_of(lw, ty->dims[i].name, ty->dims[i].loc);
        if (dims[i] < 0) {
            ok = false;
            continue;
        }
        for (int j = 0; j < i; j++)
            if (dims[j] == dims[i]) {
                const char *n = lw->g->dims[dims[i]].name;
                if (strcmp(n, ty->dims[i].name) == 0)
                    ir_error(ty->dims[i].loc, "dimension '%s' appears twice in one type", n);
                else
                    ir_error(ty->dims[i].loc, "dimension '%s' is '%s' (an alias), which this type "
                             "already has", ty->dims[i].name, n);
                ok = false;
            }
    }
    return ok;
}

/* Sizes stay far from int64 overflow: every later pass multiplies element
 * counts by the batch, bytes and device counts. False after reporting. */
static bool size_ok(Lower *lw, const char *what, const int *dims, int rank, IrLoc loc)
{
    const IrGraph *g = lw->g;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == g->batch_dim)
            continue;
        if (__builtin_mul_overflow(n, g->dims[dims[i]].size, &n) || n > FE_MAX_NUMEL) {
            ir_error(loc, "%s has more than 2^48 elements (not counting batch)", what);
            return false;
        }
    }
    return true;
}

static const char *type_str(Lower *lw, IrDtype dt, const int *dims, int rank)
{
    char buf[512];
    size_t k = (size_t)snprintf(buf, sizeof buf, "%s[", ir_dtype_name(dt));
    for (int i = 0; i < rank && k < sizeof buf; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? ", " : "", lw->g->dims[dims[i]].name);
    if (k < sizeof buf)
        snprintf(buf + k, sizeof buf - k, "]");
    return ir_strdup(lw->tmp, buf);
}

/* ------------------------------------------------------------ expressions */

static int lower_expr(Lower *lw, const FeExpr *e);

/* The attributes a .mdl call may give: the rows of ir/attrs.def flagged
 * IR_ATTRF_MDL (the others are set by the shape rule). */
static int mdl_attr(IrOp op, const char *name)
{
    for (int k = 0; k < IR_NATTRS; k++)
        if (ir_attrs[k].op == op && (ir_attrs[k].flags & IR_ATTRF_MDL) && strcmp(ir_attrs[k].name, name) == 0)
            return k;
    return -1;
}

/* Defaults: eps 1e-5, theta 10000, causal, and the dims -1 (the shape rule
 * picks them: rope the sequence dim and the last dim, softmax the last). */
static IrAttrs default_attrs(void)
{
    IrAttrs a;
    memset(&a, 0, sizeof a);
    a.eps = 1e-5;
    a.theta = 10000;
    a.causal = true;
    a.dim[0] = a.dim[1] = -1;
    return a;
}

static bool set_attr(Lower *lw, IrOp op, const FeArg *arg, IrAttrs *at)
{
    const char *opname = ir_ops[op].name;
    int which = mdl_attr(op, arg->name);
    const char *mine[IR_NATTRS];
    int nmine = 0;
    for (int i = 0; i < IR_NATTRS; i++)
        if (ir_attrs[i].op == op && (ir_attrs[i].flags & IR_ATTRF_MDL))
            mine[nmine++] = ir_attrs[i].name;
    if (which < 0) {
        if (nmine == 0)
            ir_error(arg->loc, "%s takes no attributes, but '%s' is given", opname, arg->name);
        else
            ir_error(arg->loc, "%s has no attribute '%s'%s", opname, arg->name,
                     fe_did_you_mean(lw->tmp, arg->name, mine, nmine));
        return false;
    }
    const FeExpr *v = arg->e;
    switch (ir_attrs[which].kind) {
    case IR_AK_BOOL:
        if (v->kind != FE_E_BOOL) {
            ir_error(v->loc, "%s: %s is true or false", opname, arg->name);
            return false;
        }
        ir_attr_set(at, (IrAttrId)which, v->i != 0);
        return true;
    case IR_AK_WORD: {
        /* A keyword of the attribute's own list (attrs.def WORDS); the
         * first is the default, which rope's scaling leaves unwritten. */
        const char *const *w = ir_attr_words((IrAttrId)which);
        int first = op == IR_OP_ROPE ? 1 : 0, nw = 0;
        char list[160] = "";
        for (int k = first; w[k]; k++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s", l ? ", " : "", w[k]);
        }
        if (v->kind != FE_E_NAME) {
            ir_error(v->loc, "%s: %s is one of: %s", opname, arg->name, list);
            return false;
        }
        while (w[nw] && strcmp(w[nw], v->name) != 0)
            nw++;
        if (!w[nw] || nw < first) {
            ir_error(v->loc, "%s: %s '%s' is not implemented (ptdc implements %s)", opname,
                     arg->name, v->name, list);
            return false;
        }
        ir_attr_set(at, (IrAttrId)which, nw);
        return true;
    }
    case IR_AK_COUNT: {
        if (v->kind == FE_E_BOOL) {
            ir_error(v->loc, "%s: %s is an integer, not %s", opname, arg->name, v->i ? "true" : "false");
            return false;
        }
        FeValue x = fe_eval_at_layer(lw->c, v, lw->g->cur_layer);
        if (!x.ok)
            return false;
        /* 0 means something for a window (none) and a slice's offset (the start) */
        bool window = strcmp(arg->name, "window") == 0, offset = op == IR_OP_SLICE;
        if (!x.is_int || x.i < (window || offset ? 0 : 1)) {
            if (x.is_int)
                ir_error(v->loc, "%s: %s must be %s, got %lld", opname, arg->name,
                         window ? "a number of positions >= 0 (0: no window)"
                         : offset ? "an offset >= 0" : "a positive integer",
                         (long long)x.i);
            else
                ir_error(v->loc, "%s: %s must be an integer, got %g", opname, arg->name, x.f);
            return false;
        }
        ir_attr_set(at, (IrAttrId)which, (double)x.i);
        return true;
    }
    case IR_AK_DIM: {
        if (v->kind != FE_E_NAME) {
            ir_error(v->loc, "%s: %s names a dimension", opname, arg->name);
            return false;
        }
        int d = dim_of(lw, v->name, v->loc);
        if (d < 0)
            return false;
        ir_attr_set(at, (IrAttrId)which, d);
        return true;
    }
    default: {
        if (v->kind == FE_E_BOOL) {
            ir_error(v->loc, "%s: %s is a number, not %s", opname, arg->name, v->i ? "true" : "false");
            return false;
        }
        FeValue x = fe_eval_at_layer(lw->c, v, lw->g->cur_layer);
        if (!x.ok)
            return false;
        double f = x.is_int ? (double)x.i : x.f;
        /* 0 where 0 means absent (route's aux = 0: off, capacity = 0: dropless) */
        bool zero_ok = (ir_attrs[which].flags & IR_ATTRF_OMIT0) != 0;
        if (!(f > 0 || (zero_ok && f == 0)) || !isfinite(f)) {
            ir_error(v->loc, "%s: %s must be a positive number%s, got %g", opname, arg->name,
                     zero_ok ? " or 0 (none)" : "", f);
            return false;
        }
        ir_attr_set(at, (IrAttrId)which, f);
        return true;
    }
    }
}

/* rope's scaling attributes come together: `scaling = llama3` needs its
 * parameters (the other rope rows that are absent at 0; no default is
 * guessed), and none of them means anything without it. seen[] is by
 * attribute id. False after reporting. */
static bool rope_scaling_complete(const FeExpr *e, const bool *seen, const IrAttrs *at)
{
    bool scaling = at->rope.kind != IR_ROPE_PLAIN, ok = true;
    char missing[160] = "";
    for (int k = 0; k < IR_NATTRS; k++) {
        const IrAttrInfo *r = &ir_attrs[k];
        if (r->op != IR_OP_ROPE || !(r->flags & IR_ATTRF_OMIT0) || r->kind == IR_AK_WORD)
            continue;
        if (seen[k] && !scaling) {
            for (int i = 0; i < e->nargs; i++)
                if (e->args[i].name && strcmp(e->args[i].name, r->name) == 0)
                    ir_error(e->args[i].loc, "rope: %s applies only with scaling = llama3", r->name);
            ok = false;
        } else if (!seen[k] && scaling) {
            size_t n = strlen(missing);
            snprintf(missing + n, sizeof missing - n, "%s%s", n ? ", " : "", r->name);
        }
    }
    if (missing[0]) {
        ir_error(e->loc, "rope: scaling = llama3 needs %s (config.json's rope_scaling gives "
                 "them)", missing);
        ok = false;
    }
    return ok;
}

/* An error for a name that is not a bound tensor, saying what it is instead. */
static void unknown_name(Lower *lw, const FeExpr *e)
{
    if (ir_op_lookup(e->name) >= 0)
        ir_error(e->loc, "'%s' is an operator; call it: %s(...)", e->name, e->name);
    else if (fe_const_exists(lw->c, e->name))
        ir_error(e->loc, "'%s' is a config constant, not a tensor", e->name);
    else
        ir_error(e->loc, "unknown name '%s'%s", e->name,
                 fe_did_you_mean(lw->tmp, e->name, lw->names.v, lw->names.n));
}

static int add_node(Lower *lw, IrOp op, const int *in, int nin, const IrAttrs *at, IrLoc loc)
{
    IrAttrs a = at ? *at : default_attrs();
    int n = ir_node_add(lw->g, op, in, nin, &a, loc);
    if (n < 0)
        return POISON;
    limit_hit(lw, loc);
    const IrNode *nd = &lw->g->nodes[n];
    for (int i = 0; i < nd->nout; i++) {
        const IrTensor *t = &lw->g->tensors[nd->out[i]];
        const char *what = ir_sprintf(lw->tmp, "the %s result %s", ir_ops[op].name,
                                      type_str(lw, t->dtype, t->dim, t->rank));
        if (!size_ok(lw, what, t->dim, t->rank, loc))
            return POISON;
    }
    return nd->out[0];
}

static int lower_call(Lower *lw, const FeExpr *e)
{
    int op = ir_op_lookup(e->name);
    if (op < 0) {
        if (fe_const_exists(lw->c, e->name) || lookup(lw, e->name, &(int){0}))
            ir_error(e->loc, "'%s' is not an operator", e->name);
        else
            ir_error(e->loc, "unknown operator '%s'%s", e->name,
                     fe_did_you_mean(lw->tmp, e->name, op_names, nop_names));
        return POISON;
    }
    int in[IR_MAX_IN], nin = 0;
    bool ok = true;
    IrAttrs at = default_attrs();
    bool seen[IR_NATTRS] = {0};
    for (int i = 0; i < e->nargs; i++) {
        const FeArg *a = &e->args[i];
        if (!a->name) {
            int t = lower_expr(lw, a->e);
            if (t < 0)
                ok = false;
            if (nin < IR_MAX_IN)
                in[nin] = t;
            nin++;
            continue;
        }
        int k = mdl_attr((IrOp)op, a->name);
        if (k >= 0 && seen[k]) {
            ir_error(a->loc, "%s: attribute '%s' is given twice", e->name, a->name);
            ok = false;
            continue;
        }
        if (k >= 0)
            seen[k] = true;
        ok &= set_attr(lw, (IrOp)op, a, &at);
    }
    if (ok && (ir_ops[op].flags & IR_OPF_EXPERTS) && !ir_op_arity_ok(op, nin, ir_ops[op].nout, &at)) {
        bool gated = ir_moe_acts[at.moe_act].gated;
        ir_error(e->loc, "%s with act = %s takes %d or %d tensor arguments (h, gates, %se_up, e_down, "
                 "then %se_up_b, the biases inside the activation), got %d", e->name,
                 ir_moe_acts[at.moe_act].name, ir_moe_arity(at.moe_act, false),
                 ir_moe_arity(at.moe_act, true), gated ? "e_gate, " : "", gated ? "e_gate_b, " : "", nin);
        return POISON;
    }
    if (!ir_op_arity_ok(op, nin, ir_ops[op].nout, &at)) {
        bool opt = ir_ops[op].flags & IR_OPF_OPT_LAST;
        ir_error(e->loc, "%s takes %s%d tensor argument%s, got %d", e->name,
                 opt ? ir_sprintf(lw->tmp, "%d or ", ir_ops[op].nin - 1) : "", ir_ops[op].nin,
                 ir_ops[op].nin == 1 ? "" : "s", nin);
        return POISON;
    }
    if (ok && op == IR_OP_ROPE) /* after a bad attribute, the set would be incomplete anyway */
        ok = rope_scaling_complete(e, seen, &at);
    if (!ok)
        return POISON;
    if (op == IR_OP_CROSS_ENTROPY && lw->loss_node < 0 && at.loss_weight != 0) {
        /* the objective's unit: the model's own loss (its logits are "the
         * logits": --dump-first-step, the frameworks) counts once */
        ir_error(e->loc, "cross_entropy: the model's first loss takes no weight (it is the objective's "
                 "unit); later ones, multi-token prediction's, do");
        return POISON;
    }
    if (op == IR_OP_CROSS_ENTROPY && lw->loss_node >= 0) {
        int pr = lw->g->tensors[in[1]].producer;
        if (pr < 0 || lw->g->nodes[pr].op != IR_OP_SHIFT || lw->g->tensors[lw->g->nodes[pr].in[0]].role != IR_INPUT) {
            ir_error(e->loc, "a second cross_entropy scores the targets shifted further on (shift(targets, by = "
                     "K): multi-token prediction); the model's loss is computed at line %d", lw->loss_loc.line);
            return POISON;
        }
    }
    int t = add_node(lw, (IrOp)op, in, nin, &at, e->loc);
    /* Later cross-entropies (multi-token prediction) add to the objective,
     * each times its weight; the first stays the graph's loss. */
    if (t >= 0 && op == IR_OP_CROSS_ENTROPY && lw->loss_node < 0) {
        lw->loss_node = lw->g->tensors[t].producer;
        lw->loss_loc = e->loc;
        lw->g->loss = t;
    }
    return t;
}

/* The tensor an expression computes, or POISON after an error. */
static int lower_expr(Lower *lw, const FeExpr *e)
{
    if (lw->stop)
        return POISON;
    switch (e->kind) {
    case FE_E_NAME: {
        int t;
        if (lookup(lw, e->name, &t))
            return t;
        unknown_name(lw, e);
        return POISON;
    }
    case FE_E_BIN: {
        int l = lower_expr(lw, e->l);
        int r = lower_expr(lw, e->r);
        if (l < 0 || r < 0)
            return POISON;
        int in[2] = {l, r};
        return add_node(lw, e->op == '+' ? IR_OP_ADD : IR_OP_MUL, in, 2, NULL, e->loc);
    }
    case FE_E_CALL:
        return lower_call(lw, e);
    case FE_E_INT:
    case FE_E_FLOAT:
    case FE_E_BOOL:
    case FE_E_NEG:
    case FE_E_STR:
        break;
    }
    ir_die("tensor expression kind %d", e->kind); /* the grammar admits no others */
}

/* ------------------------------------------------------------- statements */

/* A name that a statement binds must not shadow a config constant: the two
 * would be told apart only by where they are used. */
static bool bindable(Lower *lw, const char *name, IrLoc loc)
{
    if (fe_const_exists(lw->c, name)) {
        ir_error(loc, "'%s' is a config constant; a tensor cannot take its name", name);
        return false;
    }
    return true;
}

/* A second `param w` or `input x` in the same scope is a mistake, not a rebinding. */
static bool redeclared(Lower *lw, const FeStmt *s)
{
    int t;
    if (!lookup(lw, s->name, &t) || t < 0)
        return false;
    const IrTensor *x = &lw->g->tensors[t];
    if (x->role != IR_PARAM && x->role != IR_INPUT)
        return false;
    int rep = x->piece >= 0 ? lw->g->pieces[x->piece].rep : -1;
    if (x->layer != lw->g->cur_layer || rep != lw->g->cur_rep)
        return false;
    ir_error(s->loc, "'%s' is already declared at line %d", s->name, x->loc.line);
    return true;
}

static void lower_input(Lower *lw, const FeStmt *s)
{
    IrGraph *g = lw->g;
    int dims[IR_MAX_RANK];
    lw->any_input = true;
    if (lw->in_repeat) {
        ir_error(s->loc, "inputs are declared outside repeat");
        bind(lw, s->name, POISON);
        return;
    }
    if (!bindable(lw, s->name, s->loc) || redeclared(lw, s) || !resolve_type(lw, s->type, dims)) {
        bind(lw, s->name, POISON);
        return;
    }
    if (!s->type->has_dtype) {
        ir_error(s->type->loc, "input '%s' must state its dtype: i32[...], bf16[...] or f32[...]",
                 s->name);
        bind(lw, s->name, POISON);
        return;
    }
    if (!lw->have_input) {
        /* The model's sequence dim is the second dim of its first input. */
        if (s->type->ndims < 2) {
            ir_error(s->type->loc, "the first input '%s' needs a second dim: the sequence, as in "
                     "[batch, seq]", s->name);
            bind(lw, s->name, POISON);
            return;
        }
        g->seq_dim = dims[1];
        lw->have_input = true;
    }
    if (!size_ok(lw, ir_sprintf(lw->tmp, "input '%s'", s->name), dims, s->type->ndims, s->loc)) {
        bind(lw, s->name, POISON);
        return;
    }
    int t = ir_tensor_add(g, s->name, s->type->dtype, IR_INPUT, s->type->ndims, dims, s->loc);
    bind(lw, s->name, t);
}

/* One {...} of an hf name (not {expert}): a sum of products of `layer`
 * (the iteration of the enclosing repeat), integer constants and integers,
 * as `{layer}`, `{layer + first_dense}` or `{2 * layer + 1}`: the index of
 * the Hugging Face layer when a model's layers are written as two repeats
 * (dense, then MoE) or a repeat holds two of them. *v its value. */
static bool hf_index(Lower *lw, const FeStmt *s, const char *p, size_t len, int64_t *v)
{
    int64_t sum = 0, prod = 1;
    bool want_term = true;
    const char *end = p + len;
    while (p < end) {
        if (*p == ' ') {
            p++;
            continue;
        }
        if (!want_term && (*p == '+' || *p == '*')) {
            if (*p == '+') {
                sum += prod; /* each term at most 2^40, at most 4096 of them */
                prod = 1;
            }
            want_term = true;
            p++;
            continue;
        }
        int64_t t;
        const char *q = p;
        if (want_term && *p >= '0' && *p <= '9') {
            t = 0;
            while (q < end && *q >= '0' && *q <= '9' && t < ((int64_t)1 << 40))
                t = t * 10 + (*q++ - '0');
        } else if (want_term && (*p == '_' || isalpha((unsigned char)*p))) {
            while (q < end && (*q == '_' || isalnum((unsigned char)*q)))
                q++;
            char *name = ir_sprintf(lw->tmp, "%.*s", (int)(q - p), p);
            if (!strcmp(name, "layer")) {
                if (lw->g->cur_layer < 0) {
                    ir_error(s->hf_loc, "'{layer}' in the hf name of '%s', which is outside "
                             "repeat", s->name);
                    return false;
                }
                t = lw->g->cur_layer;
            } else {
                bool exists = false;
                FeValue c = fe_const_value(lw->c, name, &exists);
                if (!exists || !c.ok || !c.is_int || c.i < 0 || c.i > ((int64_t)1 << 40)) {
                    ir_error(s->hf_loc, "'%s' in the hf name of '%s' is %s", name, s->name,
                             !exists ? "not a constant (an index is `layer`, integer constants "
                                       "and integers joined by + and *)"
                                     : "not a non-negative integer constant");
                    return false;
                }
                t = c.i;
            }
        } else {
            ir_error(s->hf_loc, "'{%.*s}' in the hf name of '%s' is not an index (`{layer}`, "
                     "`{layer + first_dense}`, `{2 * layer + 1}` or `{expert}`)", (int)len,
                     end - len, s->name);
            return false;
        }
        if (t != 0 && prod > (((int64_t)1 << 40) / t)) {
            ir_error(s->hf_loc, "an index in the hf name of '%s' is too large", s->name);
            return false;
        }
        prod *= t;
        p = q;
        want_term = false;
    }
    if (want_term) {
        ir_error(s->hf_loc, "'{%.*s}' in the hf name of '%s' is not an index (`{layer}`, "
                 "`{layer + first_dense}`, `{2 * layer + 1}` or `{expert}`)", (int)len,
                 end - len, s->name);
        return false;
    }
    *v = sum + prod;
    return true;
}

/* hf "model.layers.{layer}.mlp.up_proj.weight" with the layer index put in
 * (hf_index: `{layer + K}` and the like too); `{expert}` stays, for the
 * programs to put in each expert's index along the parameter's first dim
 * (*experts set). */
static const char *hf_name(Lower *lw, const FeStmt *s, bool *experts)
{
    const char *p = s->hf;
    size_t cap = strlen(p) + 64, n = 0;
    char *out = ir_alloc(lw->tmp, cap);
    *experts = false;
    while (*p) {
        if (*p != '{') {
            if (*p == '}') {
                ir_error(s->hf_loc, "unmatched '}' in the hf name of '%s'", s->name);
                return NULL;
            }
            out[n++] = *p++;
            continue;
        }
        const char *close = strchr(p, '}');
        if (!close) {
            ir_error(s->hf_loc, "unclosed '{' in the hf name of '%s'", s->name);
            return NULL;
        }
        size_t len = (size_t)(close - p - 1);
        char idx[32];
        if (len == 6 && !strncmp(p + 1, "expert", 6)) {
            if (*experts) {
                ir_error(s->hf_loc, "'{expert}' twice in the hf name of '%s'", s->name);
                return NULL;
            }
            *experts = true;
            snprintf(idx, sizeof idx, "{expert}");
        } else {
            int64_t v;
            if (!hf_index(lw, s, p + 1, len, &v))
                return NULL;
            snprintf(idx, sizeof idx, "%lld", (long long)v);
        }
        if (n + strlen(idx) + strlen(close) + 1 > cap) {
            cap = (n + strlen(idx) + strlen(close) + 1) * 2;
            char *bigger = ir_alloc(lw->tmp, cap);
            memcpy(bigger, out, n);
            out = bigger;
        }
        memcpy(out + n, idx, strlen(idx));
        n += strlen(idx);
        p = close + 1;
    }
    out[n] = 0;
    return ir_strdup(lw->g->arena, out);
}

static void lower_param(Lower *lw, const FeStmt *s)
{
    IrGraph *g = lw->g;
    int dims[IR_MAX_RANK];
    if (!bindable(lw, s->name, s->loc) || redeclared(lw, s) || !resolve_type(lw, s->type, dims)) {
        bind(lw, s->name, POISON);
        return;
    }
    bool ok = true;
    if (s->type->has_dtype && s->type->dtype == IR_I32) {
        ir_error(s->type->loc, "parameter '%s' must be f32 or bf16, not i32", s->name);
        ok = false;
    }
    for (int i = 0; i < s->type->ndims; i++)
        if (dims[i] == g->batch_dim) {
            ir_error(s->type->dims[i].loc, "parameter '%s' cannot have the batch dim: parameters "
                     "are shared by every sequence", s->name);
            ok = false;
        }
    double std = 0;
    if (s->init == FE_INIT_NORMAL) {
        FeValue v = fe_eval(lw->c, s->std);
        std = v.is_int ? (double)v.i : v.f;
        if (!v.ok)
            ok = false;
        else if (!(std > 0) || !isfinite(std)) {
            ir_error(s->std->loc, "normal() needs a positive standard deviation, got %g", std);
            ok = false;
        }
    }
    const char *hf = NULL;
    if (s->hf) {
        bool experts = false;
        hf = hf_name(lw, s, &experts);
        ok &= hf != NULL;
        if (experts && (s->type->ndims < 2 || s->hf_nparts > 1)) {
            ir_error(s->hf_loc, "'{expert}' in the hf name of '%s' needs %s", s->name,
                     s->hf_nparts > 1 ? "a whole tensor per expert, not a part"
                                      : "a parameter whose first dim counts the experts and "
                                        "has at least one dim more (each expert's tensor)");
            ok = false;
        }
        if (s->hf_nparts < 1 || s->hf_part < 0 || s->hf_part >= s->hf_nparts) {
            ir_error(s->part_loc, "part %lld of %lld: parts count from 0, so the part must be "
                     "from 0 to %lld", (long long)s->hf_part, (long long)s->hf_nparts,
                     (long long)(s->hf_nparts - 1));
            ok = false;
        } else if (s->hf_nparts > 1024) {
            ir_error(s->part_loc, "a tensor is split into at most 1024 parts");
            ok = false;
        }
    }
    if (ok && size_ok(lw, ir_sprintf(lw->tmp, "parameter '%s'", s->name), dims, s->type->ndims,
                      s->loc)) {
        int64_t n = 1;
        for (int i = 0; i < s->type->ndims; i++)
            n *= g->dims[dims[i]].size; /* at most 2^48: checked */
        lw->nparams += n;
        if (lw->nparams > FE_MAX_PARAMS) {
            ir_error(s->loc, "the model has more than 2^52 parameters with '%s'", s->name);
            lw->stop = true;
            ok = false;
        }
    } else {
        ok = false;
    }
    if (!ok) {
        bind(lw, s->name, POISON);
        return;
    }
    IrDtype dt = s->type->has_dtype ? s->type->dtype : IR_BF16;
    int t = ir_tensor_add(g, s->name, dt, IR_PARAM, s->type->ndims, dims, s->loc);
    IrTensor *x = &g->tensors[t];
    x->init = s->init == FE_INIT_NORMAL ? IR_INIT_NORMAL
            : s->init == FE_INIT_ZEROS ? IR_INIT_ZEROS : IR_INIT_ONES;
    x->init_std = std;
    x->hf_name = hf;
    x->hf_transposed = s->hf_transposed;
    x->hf_part = (int)s->hf_part;
    x->hf_nparts = (int)s->hf_nparts;
    x->hf_interleaved = s->hf_interleaved && s->hf_nparts > 1;
    bind(lw, s->name, t);
}

static void lower_bind(Lower *lw, const FeStmt *s)
{
    IrGraph *g = lw->g;
    int ntensors = g->ntensors;
    if (!bindable(lw, s->name, s->loc)) {
        bind(lw, s->name, POISON);
        return;
    }
    int t = lower_expr(lw, s->value);
    if (t < 0) {
        bind(lw, s->name, POISON);
        return;
    }
    if (s->type) {
        int dims[IR_MAX_RANK];
        if (!resolve_type(lw, s->type, dims)) {
            bind(lw, s->name, POISON);
            return;
        }
        const IrTensor *x = &g->tensors[t];
        bool same = x->rank == s->type->ndims &&
                    memcmp(x->dim, dims, sizeof(int) * (size_t)x->rank) == 0 &&
                    (!s->type->has_dtype || s->type->dtype == x->dtype);
        if (!same) {
            IrDtype want = s->type->has_dtype ? s->type->dtype : x->dtype;
            ir_error(s->type->loc, "'%s' is %s, not %s as declared", s->name,
                     type_str(lw, x->dtype, x->dim, x->rank),
                     type_str(lw, want, dims, s->type->ndims));
            bind(lw, s->name, POISON);
            return;
        }
    }
    /* A result made by this statement takes the bound name ("layers.3.h"). */
    if (t >= ntensors)
        ir_tensor_rename(g, t, s->name);
    bind(lw, s->name, t);
}

static void lower_body(Lower *lw, const FeBody *b);

static void lower_stmt(Lower *lw, const FeStmt *s)
{
    if (limit_hit(lw, s->loc))
        return;
    switch (s->kind) {
    case FE_S_INPUT:
        lower_input(lw, s);
        break;
    case FE_S_PARAM:
        lower_param(lw, s);
        break;
    case FE_S_BIND:
        lower_bind(lw, s);
        break;
    case FE_S_BLOCK: {
        if (s->letters && !lw->in_pattern) {
            ir_error(s->letters_loc, "block '%s' \"%s\": letters name the layers of a pattern "
                     "repeat (repeat \"M*E\" { block mamba \"M\" { ... } ... }); this block is "
                     "not directly in one", s->name, s->letters);
            break;
        }
        const char *outer = lw->g->cur_block;
        lw->g->cur_block = ir_strdup(lw->g->arena, s->name);
        lower_body(lw, &s->body);
        lw->g->cur_block = outer;
        break;
    }
    case FE_S_IF: {
        /* The body only when the count is positive (multi-token prediction
         * switched by mtp_depth); its names stay visible after, as a
         * block's. Every use of them outside is then switched too. */
        FeValue v = fe_eval_at_layer(lw->c, s->value, lw->g->cur_layer);
        if (!v.ok)
            break;
        if (!v.is_int) { /* a depth's second module: `if mtp_depth - 1 { ... }` */
            ir_error(s->value->loc, "if: the condition must be an integer (the body when it is > 0), "
                     "got %g", v.f);
            break;
        }
        if (v.i > 0)
            lower_body(lw, &s->body);
        break;
    }
    case FE_S_REPEAT:
        /* Top-level repeats are handled by lower_model: each iteration is a piece. */
        ir_error(s->loc, "repeat must be at the top level of the model body%s",
                 lw->in_repeat ? " (repeats do not nest)" : ", not inside a block");
        break;
    }
}

static void lower_body(Lower *lw, const FeBody *b)
{
    for (int i = 0; i < b->n && !lw->stop; i++)
        lower_stmt(lw, b->v[i]);
}

/* The iteration count of a repeat; 1 after an error so its body is still
 * checked once. */
static int64_t repeat_count(const FeStmt *s, FeValue v)
{
    if (!v.ok)
        return 1;
    if (!v.is_int) {
        ir_error(s->value->loc, "repeat count %g is not an integer", v.f);
        return 1;
    }
    if (v.i < 1) {
        ir_error(s->value->loc, "repeat count is %lld; it must be at least 1", (long long)v.i);
        return 1;
    }
    if (v.i > FE_MAX_REPEAT) {
        ir_error(s->value->loc, "repeat count %lld is over the limit of %d", (long long)v.i,
                 FE_MAX_REPEAT);
        return 1;
    }
    return v.i;
}

/* A pattern repeat, `repeat "MEM*E" { block mamba "M" {...} ... }`
 * (Megatron's --hybrid-override-pattern): one layer per letter, layer k the
 * block whose letters hold pattern[k]. Each block is a kind of layer of its
 * own (a rep: pieces of one rep are alike, which the search prices once);
 * all are layers of one repeat statement, numbered 0.. along the pattern, so
 * `{layer}` in an hf name is the index Megatron and Hugging Face give it.
 * Fills which[c] with the block index of letter c; false after reporting. */
static bool pattern_blocks(const FeStmt *s, const char *pat, int which[256])
{
    for (int c = 0; c < 256; c++)
        which[c] = -1;
    bool ok = true;
    const FeBody *b = &s->body;
    for (int i = 0; i < b->n; i++) {
        const FeStmt *x = b->v[i];
        if (x->kind != FE_S_BLOCK || !x->letters) {
            ir_error(x->loc, "a pattern repeat's body is blocks, each with the letters of the "
                     "layers it is (block mamba \"M\" { ... })");
            ok = false;
            continue;
        }
        if (!x->letters[0]) {
            ir_error(x->letters_loc, "block '%s' has no letters", x->name);
            ok = false;
        }
        for (const unsigned char *l = (const unsigned char *)x->letters; *l; l++) {
            if (*l <= ' ' || *l >= 127) {
                ir_error(x->letters_loc, "block '%s': a pattern letter is a printable character, "
                         "not byte %d", x->name, *l);
                ok = false;
            } else if (which[*l] >= 0 && which[*l] != i) {
                ir_error(x->letters_loc, "letter '%c' belongs to two blocks, '%s' and '%s'", *l,
                         b->v[which[*l]]->name, x->name);
                ok = false;
            } else {
                which[*l] = i;
            }
        }
    }
    if (!ok)
        return false;
    size_t n = strlen(pat);
    if (n == 0) {
        ir_error(s->value->loc, "the layer pattern is empty");
        return false;
    }
    if (n > FE_MAX_REPEAT) {
        ir_error(s->value->loc, "the layer pattern has %zu layers, over the limit of %d", n,
                 FE_MAX_REPEAT);
        return false;
    }
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)pat[k];
        if (which[c] < 0) {
            char known[256];
            size_t m = 0;
            for (int i = 0; i < b->n && m + 1 < sizeof known; i++)
                m += (size_t)snprintf(known + m, sizeof known - m, "%s\"%s\"", i ? ", " : "",
                                      b->v[i]->letters);
            ir_error(s->value->loc, "layer %zu of the pattern is '%c', which no block of the repeat "
                     "is (its blocks are %s)", k, c >= ' ' && c < 127 ? c : '?', known);
            return false;
        }
    }
    return true;
}

/* Lowers pattern `pat` of repeat s as the statement's layers; *nrep is the
 * first free rep, advanced by the number of blocks. */
static void lower_pattern(Lower *lw, const FeStmt *s, const char *pat, int stmt, int *nrep)
{
    IrGraph *g = lw->g;
    int which[256];
    if (!pattern_blocks(s, pat, which))
        return;
    int base = *nrep, errors = ir_error_count();
    lw->in_repeat = lw->in_pattern = true;
    for (size_t k = 0; pat[k] && !lw->stop && ir_error_count() == errors; k++) {
        const FeStmt *blk = s->body.v[which[(unsigned char)pat[k]]];
        const char *name = stmt == 0 ? ir_sprintf(lw->tmp, "layer %zu", k)
                                     : ir_sprintf(lw->tmp, "layer %d.%zu", stmt, k);
        ir_piece_begin(g, name, (int)k, stmt);
        ir_piece_kind(g, base + which[(unsigned char)pat[k]], stmt);
        lower_stmt(lw, blk);
    }
    lw->in_repeat = lw->in_pattern = false;
    *nrep = base + s->body.n;
}

static void lower_model(Lower *lw, const FeFile *f)
{
    IrGraph *g = lw->g;
    const FeBody *b = &f->model;
    int last_rep = -1, nrep = 0, nstmt = 0;
    for (int i = 0; i < b->n; i++)
        if (b->v[i]->kind == FE_S_REPEAT)
            last_rep = i;
    for (int i = 0; i < b->n && !lw->stop;) {
        const FeStmt *s = b->v[i];
        if (s->kind == FE_S_REPEAT) {
            FeValue pv = fe_eval_repeat(lw->c, s->value);
            bool lettered = s->body.n > 0 && s->body.v[0]->kind == FE_S_BLOCK && s->body.v[0]->letters;
            if ((pv.ok && pv.s) || (!pv.ok && lettered)) {
                /* a pattern; or, after its error, what was meant to be one */
                if (pv.ok)
                    lower_pattern(lw, s, pv.s, nstmt, &nrep);
                nstmt++;
                i++;
                continue;
            }
            int64_t n = repeat_count(s, pv);
            lw->in_repeat = true;
            int errors = ir_error_count();
            /* Every iteration lowers the same statements: once one has
             * failed, the others would only repeat its errors. */
            int before = g->nnodes;
            for (int64_t k = 0; k < n && !lw->stop && ir_error_count() == errors; k++) {
                const char *name = nstmt == 0 ? ir_sprintf(lw->tmp, "layer %lld", (long long)k)
                                              : ir_sprintf(lw->tmp, "layer %d.%lld", nstmt, (long long)k);
                ir_piece_begin(g, name, (int)k, nstmt);
                ir_piece_kind(g, nrep, nstmt);
                lower_body(lw, &s->body);
                /* Every iteration adds as many operators as the first: refuse
                 * a count that cannot fit now, not after unrolling to it. */
                int64_t per = g->nnodes - before;
                if (k == 0 && n > 1 && before + per * n > FE_MAX_NODES) {
                    ir_error(s->value->loc,
                             "the model unrolls to more than %d operators (%lld repeats of %lld)",
                             FE_MAX_NODES, (long long)n, (long long)per);
                    lw->stop = true;
                }
            }
            lw->in_repeat = false;
            nrep++;
            nstmt++;
            i++;
            continue;
        }
        /* A run of statements up to the next repeat is one piece. */
        int j = i;
        while (j < b->n && b->v[j]->kind != FE_S_REPEAT)
            j++;
        const char *name = nstmt == 0 ? "pre" : i > last_rep ? "head" : "between";
        ir_piece_begin(g, name, -1, -1);
        int p = g->npieces - 1;
        for (; i < j && !lw->stop; i++)
            lower_stmt(lw, b->v[i]);
        i = j;
        if (nrep == 0)
            for (int k = g->pieces[p].first; k < g->pieces[p].first + g->pieces[p].count; k++)
                if (g->nodes[k].op == IR_OP_EMBEDDING)
                    g->pieces[p].name = ir_strdup(g->arena, "embedding");
    }
}

bool fe_lower(IrGraph *g, FeConsts *c, const FeFile *f, IrArena *tmp)
{
    init_op_names();
    Lower lw = {.g = g, .c = c, .tmp = tmp, .loss_node = -1};
    int before = ir_error_count();
    lower_model(&lw, f);
    /* What is missing is reported only if nothing went wrong before: a failed
     * statement may be the one that would have provided it. */
    if (!lw.stop && !lw.any_input)
        ir_error(f->model_loc, "model '%s' has no input; declare its tokens: input tokens : "
                 "i32[batch, seq]", f->model_name);
    else if (!lw.stop && lw.loss_node < 0 && ir_error_count() == 0)
        ir_error(f->model_loc, "model '%s' computes no loss: call cross_entropy(logits, "
                 "targets) once", f->model_name);
    vec_free(lw.names);
    ir_map_free(&lw.env);
    return ir_error_count() == before;
}
