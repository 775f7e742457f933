/* cg_hf_check.c: is the config.json cg_hf.c wrote exactly this model? It is
 * read back as `ptdc import-hf` reads it (frontend: config.json -> .mdl ->
 * IR), and that graph must be this one up to the names of dimensions: the
 * same forward operators in the same order with the same attributes, each
 * input the same parameter (by Hugging Face name, layout and shape), input
 * or output of the same operator, every shape the same sizes. Whatever
 * import-hf would rebuild differently (a norm's eps, a rope scaling, a
 * window, a missing bias, a parallel block, a tied head, another activation)
 * is found here, so a config is stated only when loading it gives back the
 * model that was trained. */
#include "cg.h"

#include "frontend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Cmp {
    const IrGraph *g, *h; /* this model, the imported one */
    int *map;             /* g's dim -> h's dim, -1 unset */
    int *g_in, *h_in;     /* input ordinal of each input tensor */
} Cmp;

static bool same_dim(Cmp *m, int a, int b)
{
    if ((a == m->g->batch_dim) != (b == m->h->batch_dim))
        return false;
    if (a != m->g->batch_dim && m->g->dims[a].size != m->h->dims[b].size)
        return false;
    if (m->map[a] < 0)
        m->map[a] = b;
    return m->map[a] == b;
}

static bool same_shape(Cmp *m, int ta, int tb)
{
    const IrTensor *a = &m->g->tensors[ta], *b = &m->h->tensors[tb];
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (!same_dim(m, a->dim[i], b->dim[i]))
            return false;
    return true;
}

static int slot(const IrGraph *g, int t)
{
    const IrNode *n = &g->nodes[g->tensors[t].producer];
    for (int j = 0; j < n->nout; j++)
        if (n->out[j] == t)
            return j;
    return -1;
}

static bool same_input(Cmp *m, int ta, int tb)
{
    const IrTensor *a = &m->g->tensors[ta], *b = &m->h->tensors[tb];
    if (a->role != b->role || !same_shape(m, ta, tb))
        return false;
    switch (a->role) {
    case IR_PARAM:
        return a->hf_name && b->hf_name && !strcmp(a->hf_name, b->hf_name) &&
               a->hf_transposed == b->hf_transposed && a->hf_part == b->hf_part &&
               a->hf_nparts == b->hf_nparts && a->hf_interleaved == b->hf_interleaved;
    case IR_INPUT:
        return m->g_in[ta] == m->h_in[tb];
    default:
        return a->producer >= 0 && a->producer == b->producer && slot(m->g, ta) == slot(m->h, tb);
    }
}

static bool same_attrs(Cmp *m, const IrNode *a, const IrNode *b)
{
    const IrAttrs *x = &a->attr, *y = &b->attr;
    switch (a->op) {
    case IR_OP_RMSNORM:
    case IR_OP_LAYERNORM:
        return x->eps == y->eps;
    case IR_OP_ROPE:
        return x->theta == y->theta && x->rope.kind == y->rope.kind &&
               x->rope.factor == y->rope.factor &&
               x->rope.low_freq_factor == y->rope.low_freq_factor &&
               x->rope.high_freq_factor == y->rope.high_freq_factor &&
               x->rope.original_max_position == y->rope.original_max_position &&
               same_dim(m, x->dim[0], y->dim[0]) && same_dim(m, x->dim[1], y->dim[1]);
    case IR_OP_ATTENTION:
        return x->causal == y->causal && x->window == y->window;
    case IR_OP_ROUTE: {
        const IrRoute *p = &x->route, *q = &y->route;
        return p->topk == q->topk && p->score == q->score && p->norm == q->norm &&
               (p->scale ? p->scale : 1) == (q->scale ? q->scale : 1) &&
               p->groups == q->groups && p->group_topk == q->group_topk &&
               p->capacity == q->capacity && p->aux == q->aux && p->zloss == q->zloss;
    }
    case IR_OP_SOFTMAX:
        return same_dim(m, x->dim[0], y->dim[0]);
    case IR_OP_MATMUL:
        if (x->ncontract != y->ncontract)
            return false;
        for (int k = 0; k < x->ncontract; k++)
            if (!same_dim(m, x->contract[k], y->contract[k]))
                return false;
        return true;
    default:
        return true;
    }
}

static int *input_ordinals(Cg *c, const IrGraph *g)
{
    int *o = ir_alloc(c->arena, sizeof *o * (size_t)(g->ntensors ? g->ntensors : 1));
    for (int t = 0, k = 0; t < g->ntensors; t++)
        o[t] = g->tensors[t].role == IR_INPUT ? k++ : -1;
    return o;
}

static int count_params(const IrGraph *g)
{
    int n = 0;
    for (int t = 0; t < g->ntensors; t++)
        n += g->tensors[t].role == IR_PARAM;
    return n;
}

/* Why g and h differ, or NULL. */
static const char *compare(Cg *c, const IrGraph *h, const char *arch)
{
    const IrGraph *g = c->g;
    if (g->nfwd != h->nfwd)
        return cg_fmt(c, "it has %d operators where %s has %d", g->nfwd, arch, h->nfwd);
    if (count_params(g) != count_params(h))
        return cg_fmt(c, "it has %d parameters where %s has %d", count_params(g), arch,
                      count_params(h));
    Cmp m = {g, h, ir_alloc(c->arena, sizeof(int) * (size_t)g->ndims), input_ordinals(c, g),
             input_ordinals(c, h)};
    for (int d = 0; d < g->ndims; d++)
        m.map[d] = -1;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *a = &g->nodes[i], *b = &h->nodes[i];
        const char *what = NULL;
        if (a->op != b->op || a->nin != b->nin || a->nout != b->nout)
            what = cg_fmt(c, "%s has %s there", arch, ir_ops[b->op].name);
        else if (!same_attrs(&m, a, b))
            what = "its attributes differ";
        for (int j = 0; !what && j < a->nin; j++)
            if (!same_input(&m, a->in[j], b->in[j]))
                what = cg_fmt(c, "its input %d (%s) is not %s's", j + 1,
                              g->tensors[a->in[j]].name, arch);
        for (int j = 0; !what && j < a->nout; j++)
            if (!same_shape(&m, a->out[j], b->out[j]))
                what = cg_fmt(c, "its result %d has another shape", j + 1);
        if (what)
            return cg_fmt(c, "operator %d, %s at %s:%d, differs (%s)", i + 1, ir_ops[a->op].name,
                          a->loc.file ? a->loc.file : "?", a->loc.line, what);
    }
    if (g->loss < 0 || h->loss < 0 || g->tensors[g->loss].producer != h->tensors[h->loss].producer)
        return cg_fmt(c, "its loss is not %s's", arch);
    return NULL;
}

/* The first line of a diagnostic text. */
static const char *first_line(Cg *c, const char *s)
{
    if (!s || !*s)
        return "no reason given";
    const char *nl = strchr(s, '\n');
    return cg_fmt(c, "%.*s", (int)(nl ? nl - s : (long)strlen(s)), s);
}

const char *cg_hf_check(Cg *c, const char *path)
{
    /* The import's diagnostics are a reason here, not the user's errors. */
    char *diag = NULL;
    size_t len = 0;
    FILE *cap = open_memstream(&diag, &len);
    if (!cap)
        ir_die("codegen: out of memory");
    FILE *prev = ir_diag_set_stream(cap);
    IrArena *a = ir_arena_new();
    const char *why = NULL;
    size_t n;
    char *text = fe_hf_import(a, path, &n);
    IrGraph *h = text ? fe_compile_source(a, "hf_config.mdl", text, n, NULL, 0, 0) : NULL;
    fflush(cap);
    if (!text)
        why = cg_fmt(c, "import-hf refuses its config (%s)", first_line(c, diag));
    else if (!h)
        why = cg_fmt(c, "the model import-hf makes of its config does not compile (%s)",
                     first_line(c, diag));
    else
        why = compare(c, h, c->hf.arch);
    ir_diag_set_stream(prev == stderr ? NULL : prev);
    fclose(cap);
    free(diag);
    ir_graph_free(h);
    /* The import registered its text for quoting; it goes with its arena. */
    ir_diag_reset();
    ir_arena_free(a);
    return why;
}
