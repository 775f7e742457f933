/* cg_text.c: a typed statement as C. Sizes print as named constants of the
 * function group holding the statement (a piece kind, a stage), so a call
 * reads like a hand-written one:
 *     rt_matmul(q, h, b->wq, LAYER_BATCH_LOCAL * LAYER_SEQ, LAYER_N_HEADS_LOCAL * LAYER_HEAD_DIM, ...)
 * with each constant defined once per group (cg_consts_print):
 *     static const int64_t LAYER_N_HEADS_LOCAL = 2; (n_heads / 2)
 * A dim's constant is its IR name, with _LOCAL where this rank holds a part
 * of it. */
#include "cg.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

enum { SCALARS = 1 << 20 }; /* constants that are no dim's size come last */

/* The group's name for value v wanted as `base`: base itself, or base2,
 * base3 ... when base already names another value. */
static const char *konst(Cg *c, CgConsts *k, const char *base, int64_t v, const char *what, int order)
{
    for (int n = 1;; n++) {
        const char *name = n == 1 ? base : cg_fmt(c, "%s%d", base, n);
        int i = 0;
        while (i < k->v.n && strcmp(k->v.v[i].name, name))
            i++;
        if (i == k->v.n)
            vec_push(k->v, ((CgConst){name, what, v, order}));
        else if (k->v.v[i].v != v)
            continue;
        return cg_fmt(c, "%s%s", k->prefix, name);
    }
}

static const char *upper(Cg *c, const char *s)
{
    char *u = (char *)cg_fmt(c, "%s", s);
    for (char *p = u; *p; p++)
        *p = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
    return u;
}

static const char *size_text(Cg *c, const CgSize *s, CgConsts *k)
{
    const char *e;
    if (s->nf == 0 && !s->name) {
        if (s->v != 1)
            ir_die("codegen: a size of %lld with no name", (long long)s->v);
        e = "CG_NO_DIMS";
    } else if (s->nf == 0) {
        e = konst(c, k, s->name, s->v, s->what, SCALARS);
    } else {
        e = "";
        for (int i = 0; i < s->nf; i++) {
            const char *dn = c->g->dims[s->dim[i]].name;
            int64_t whole = c->dim[s->dim[i]], part = s->local[i];
            bool split = part != whole;
            const char *name = cg_fmt(c, "%s%s", upper(c, dn), split ? "_LOCAL" : "");
            const char *what = split && part && whole % part == 0
                                   ? cg_fmt(c, "%s / %lld", dn, (long long)(whole / part))
                               : split ? cg_fmt(c, "%s, this rank's part", dn)
                                       : dn;
            e = cg_fmt(c, "%s%s%s", e, i ? " * " : "", konst(c, k, name, part, what, s->dim[i]));
        }
    }
    return s->unit ? cg_fmt(c, "%s * %s", e, s->unit) : e;
}

static const char *arg_text(Cg *c, const CgArg *a, CgConsts *k, const char *(*bufname)(void *, int),
                            void *ctx)
{
    switch (a->kind) {
    case CG_A_BUF:
        if (!a->comm)
            return bufname(ctx, a->buf);
        return cg_fmt(c, "%s + (int64_t)rt_comm_rank(g_comm[%d]) * %s", bufname(ctx, a->buf), a->comm,
                      size_text(c, &a->size, k));
    case CG_A_SIZE: return size_text(c, &a->size, k);
    case CG_A_INT: return konst(c, k, a->size.name, a->size.v, a->size.what, SCALARS);
    case CG_A_BOOL: return a->b ? "true" : "false";
    case CG_A_FLT:
    case CG_A_SYM: return a->sym;
    case CG_A_COMM: return a->buf ? cg_fmt(c, "g_comm[%d]", a->buf) : "NULL";
    case CG_A_COORD: {
        if (a->buf < 0)
            return "0";
        const char *x = cg_fmt(c, "(int64_t)g_coord[%d]", a->buf);
        for (int ax = 0; ax < PLAN_MAX_AXES; ax++) /* two levels at most: one inner axis */
            if (ax != a->buf && (a->comm >> ax & 1))
                x = cg_fmt(c, "(%s * CG_MESH%d + g_coord[%d])", x, ax, ax);
        return cg_fmt(c, "%s * %s", x, size_text(c, &a->size, k));
    }
    case CG_A_MESH: return cg_fmt(c, "CG_MESH%d", a->buf);
    case CG_A_AXIS: return cg_fmt(c, "g_coord[%d]", a->buf);
    case CG_A_BUFS:
    case CG_A_SIZES: break;
    }
    ir_die("codegen: argument kind %d printed alone", (int)a->kind);
}

/* A batch of GEMMs: its operand lists are arrays local to a block (C and
 * C++ both take them). */
static const char *batch_text(Cg *c, const CgStmt *s, CgConsts *k,
                              const char *(*bufname)(void *, int), void *ctx)
{
    const char *list[3];
    for (int l = 0; l < 3; l++) {
        const CgArg *a = &s->args[l];
        list[l] = "";
        for (int i = 0; i < a->nbufs; i++)
            list[l] = cg_fmt(c, "%s%s%s", list[l], i ? ", " : "", bufname(ctx, a->bufs[i]));
    }
    bool g = s->fn == CG_CALL_MATMUL_GRAD_BATCH;
    const char *e = cg_fmt(c, "{ %s *c_[] = {%s}; const rt_act *a_[] = {%s}; const rt_act *b_[] = {%s}; "
                           "%s(CG_COUNT(c_), c_, a_, b_", g ? "rt_grad" : "rt_act", list[0], list[1],
                           list[2], cg_call_name[s->fn]);
    for (int i = 3; i < s->nargs; i++)
        e = cg_fmt(c, "%s, %s", e, arg_text(c, &s->args[i], k, bufname, ctx));
    return cg_fmt(c, "%s); }", e);
}

/* A gather chunked with its GEMMs: the outputs, weights and widths as
 * arrays local to a block, like a batch. */
static const char *agmm_text(Cg *c, const CgStmt *s, CgConsts *k, const char *(*bufname)(void *, int),
                             void *ctx)
{
    const char *list[3] = {"", "", ""};
    for (int l = 0; l < 3; l++) {
        const CgArg *a = &s->args[7 + l];
        for (int i = 0; i < a->nbufs; i++)
            list[l] = cg_fmt(c, "%s%s%s", list[l], i ? ", " : "",
                             l < 2 ? bufname(ctx, a->bufs[i]) : size_text(c, &a->sizes[i], k));
    }
    const char *e = cg_fmt(c, "{ rt_act *c_[] = {%s}; const rt_act *b_[] = {%s}; const int64_t n_[] = {%s}; %s(",
                           list[0], list[1], list[2], cg_call_name[s->fn]);
    for (int i = 0; i < 7; i++)
        e = cg_fmt(c, "%s%s, ", e, arg_text(c, &s->args[i], k, bufname, ctx));
    e = cg_fmt(c, "%sCG_COUNT(c_), c_, b_, n_", e);
    for (int i = 10; i < s->nargs; i++)
        e = cg_fmt(c, "%s, %s", e, arg_text(c, &s->args[i], k, bufname, ctx));
    return cg_fmt(c, "%s); }", e);
}

char *cg_stmt_text(Cg *c, const CgStmt *s, CgConsts *k, const char *(*bufname)(void *, int), void *ctx)
{
    if (s->fn == CG_NCALLS)
        return (char *)cg_fmt(c, "/* %s */", s->comment);
    if (s->fn == CG_CALL_MATMUL_BATCH || s->fn == CG_CALL_MATMUL_GRAD_BATCH)
        return (char *)batch_text(c, s, k, bufname, ctx);
    if (s->fn == CG_CALL_ALLGATHER_MATMUL)
        return (char *)agmm_text(c, s, k, bufname, ctx);
    const char *e = cg_fmt(c, "%s(", cg_call_name[s->fn]);
    for (int i = 0; i < s->nargs; i++)
        e = cg_fmt(c, "%s%s%s", e, i ? ", " : "", arg_text(c, &s->args[i], k, bufname, ctx));
    e = cg_fmt(c, "%s);", e);
    if (s->guard) {
        const char *cond = "";
        for (int a = 0; a < PLAN_MAX_AXES; a++)
            if (s->guard >> a & 1)
                cond = cg_fmt(c, "%s%sg_coord[%d] == 0", cond, *cond ? " && " : "", a);
        e = cg_fmt(c, "if (%s) %s", cond, e);
    }
    return (char *)e;
}

/* In the IR's dim order (batch, seq, d_model, ...), then the scalars. */
void cg_consts_print(const CgConsts *k, FILE *f)
{
    const CgConst **v = ir_xrealloc(NULL, sizeof *v * (size_t)(k->v.n + 1));
    for (int i = 0; i < k->v.n; i++) {
        int j = i;
        for (; j > 0 && v[j - 1]->order > k->v.v[i].order; j--)
            v[j] = v[j - 1];
        v[j] = &k->v.v[i];
    }
    for (int i = 0; i < k->v.n; i++) {
        const CgConst *x = v[i];
        fprintf(f, "static const int64_t %s%s = %lld;", k->prefix, x->name, (long long)x->v);
        if (x->what)
            fprintf(f, " /* %s */", x->what);
        fprintf(f, "\n");
    }
    if (k->v.n)
        fprintf(f, "\n");
    free(v);
}
