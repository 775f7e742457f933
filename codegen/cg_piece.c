/* cg_piece.c: one struct and one forward/backward pair per kind of piece.
 * A piece function runs its piece's statements of the op over a struct of
 * buffer pointers; pieces whose statements are equal (cg_stmt_eq, buffers
 * compared by name, sizes by dims and value) and whose structs and locals
 * are alike (the layers of a model, whatever stage they sit in) share one
 * struct type and one pair of functions, as in hand-written trainers:
 *     static void layer_forward(Layer *b) { ... rt_matmul(b->q, b->h, b->wq, ...); ... }
 * Struct fields hold what outlives the function (parameters, gradients,
 * activations kept for backward, values passed between pieces); temporaries
 * of one function are locals in the workspace. Sizes print as the kind's
 * constants (cg_text.c). */
#include "cg_print.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *cg_ctype(int t) { return t == CG_ACT ? "rt_act" : t == CG_F32 ? "float" : "int32_t"; }
static const char *wsname(int t) { return t == CG_ACT ? "g_ws_act" : t == CG_F32 ? "g_ws_f32" : "g_ws_i32"; }

/* ----------------------------------------------------------- growing text */
typedef struct Str {
    char *s;
    size_t n, cap;
} Str;

__attribute__((format(printf, 2, 3))) static void sp(Str *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (b->s && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)k + 1) * 2;
        b->s = ir_xrealloc(b->s, b->cap);
        if (b->n == 0)
            b->s[0] = 0;
    }
}

/* ------------------------------------------------------------- naming */

/* The name of tensor t's buffers inside piece p: values made in another
 * piece read as "in_<source name>", so every layer names its input alike. */
static const char *stem(Cg *c, int t, int piece)
{
    const IrTensor *x = &c->g->tensors[t];
    if (x->role == IR_GRAD && x->grad_of >= 0)
        return cg_fmt(c, "d_%s", stem(c, x->grad_of, piece));
    if (piece >= 0 && x->role != IR_PARAM && x->role != IR_INPUT && x->piece != piece)
        return cg_ident(c, cg_fmt(c, "in_%s", x->base));
    return cg_ident(c, cg_short_name(c, t));
}

const char *cg_buf_name(Cg *c, const CgBuf *b, int piece)
{
    if (b->tensor < 0)
        return cg_ident(c, b->name);
    return cg_ident(c, cg_fmt(c, "%s%s%s", b->pre, stem(c, b->tensor, piece), b->suf));
}

const char *cg_uniq(Cg *c, Names *ns, int buf, const char *want)
{
    if (ns->of[buf] >= 0)
        return ns->name.v[ns->of[buf]];
    const char *n = want;
    for (int k = 2;; k++) {
        bool used = false;
        for (int i = 0; i < ns->name.n && !used; i++)
            used = !strcmp(ns->name.v[i], n);
        if (!used)
            break;
        n = cg_fmt(c, "%s_%d", want, k);
    }
    ns->of[buf] = ns->name.n;
    vec_push(ns->name, n);
    return n;
}

void cg_names_init(Cg *c, Names *ns, int nbufs)
{
    ns->of = ir_alloc(c->arena, sizeof(int) * (size_t)(nbufs + 1));
    for (int i = 0; i < nbufs; i++)
        ns->of[i] = -1;
    ns->name.n = 0;
    ns->name.v = NULL;
    ns->name.cap = 0;
}

/* ------------------------------------------------------------- pieces */

static bool is_local(const CgBuf *b, int piece)
{
    return b->kind == CG_B_TEMP && b->home == CG_HOME_LOCAL && b->piece == piece;
}

typedef struct PCtx {
    Cg *c;
    Piece *pc;
    Names *locals;
} PCtx;

static void collect_field(void *vctx, int id)
{
    PCtx *x = vctx;
    CgBuf *b = x->pc->r->bufs.v[id];
    if (is_local(b, x->pc->piece))
        return;
    for (int i = 0; i < x->pc->fields.n; i++)
        if (x->pc->fields.v[i] == id)
            return;
    vec_push(x->pc->fields, id);
}

static void name_local(void *vctx, int id)
{
    PCtx *x = vctx;
    CgBuf *b = x->pc->r->bufs.v[id];
    if (is_local(b, x->pc->piece))
        cg_uniq(x->c, x->locals, id, cg_buf_name(x->c, b, x->pc->piece));
}

/* A W slot's field points at its first copy; B and W take the copy of
 * their micro-batch, g_wslot_<type> elements on (set by the stage function). */
const char *cg_wslot_var(int t)
{
    return t == CG_ACT ? "g_wslot_act" : t == CG_F32 ? "g_wslot_f32" : "g_wslot_i32";
}

const char *cg_wslot_ref(Cg *c, const CgBuf *b, const char *field)
{
    return cg_fmt(c, "(%s + %s)", field, cg_wslot_var(b->type));
}

static const char *name_in_fn(void *vctx, int id)
{
    PCtx *x = vctx;
    const CgBuf *b = x->pc->r->bufs.v[id];
    Names *ns = is_local(b, x->pc->piece) ? x->locals : &x->pc->fnames;
    if (ns->of[id] < 0)
        ir_die("codegen: buffer %d unnamed in piece %d", id, x->pc->piece);
    const char *n = ns->name.v[ns->of[id]];
    if (ns == x->locals)
        return n;
    n = cg_fmt(x->c, "b->%s", n);
    return b->kind == CG_B_WSLOT ? cg_wslot_ref(x->c, b, n) : n;
}

static int field_group(const CgBuf *b)
{
    switch (b->kind) {
    case CG_B_PARAM: return 0;
    case CG_B_GRAD: return 1;
    case CG_B_SLOT: return 2;
    case CG_B_WSLOT: return 3;
    default: return 4;
    }
}

/* Fields (grouped: parameters, gradients, kept activations, shared
 * temporaries) and locals, named in the order the statements use them. */
void cg_build_piece(Cg *c, CgRankProg *r, int chunk, Piece *pc)
{
    pc->r = r;
    for (int o = 0; o < CG_NOPKINDS; o++)
        pc->ops[o] = CG_OP(r, chunk, o);
    PCtx x = {c, pc, NULL};
    for (int o = 0; o < CG_NOPKINDS; o++)
        for (int i = 0; i < pc->ops[o]->st.n; i++)
            if (pc->ops[o]->st.v[i].piece == pc->piece)
                cg_stmt_bufs(&pc->ops[o]->st.v[i], collect_field, &x);
    for (int i = 1; i < pc->fields.n; i++)
        for (int j = i; j > 0 && field_group(r->bufs.v[pc->fields.v[j]]) <
                                     field_group(r->bufs.v[pc->fields.v[j - 1]]); j--) {
            int t = pc->fields.v[j];
            pc->fields.v[j] = pc->fields.v[j - 1];
            pc->fields.v[j - 1] = t;
        }
    cg_names_init(c, &pc->fnames, r->bufs.n);
    for (int i = 0; i < pc->fields.n; i++) {
        CgBuf *b = r->bufs.v[pc->fields.v[i]];
        cg_uniq(c, &pc->fnames, b->id, cg_buf_name(c, b, pc->piece));
    }
    for (int o = 0; o < CG_NOPKINDS; o++) {
        cg_names_init(c, &pc->locals[o], r->bufs.n);
        x.locals = &pc->locals[o];
        for (int i = 0; i < pc->ops[o]->st.n; i++)
            if (pc->ops[o]->st.v[i].piece == pc->piece)
                cg_stmt_bufs(&pc->ops[o]->st.v[i], name_local, &x);
    }
}

/* --------------------------------------------------------- piece kinds */

typedef struct Same {
    const Piece *a, *b;
    int o;
} Same;

static const char *name_of(const Names *ns, int id) { return ns->name.v[ns->of[id]]; }

/* Buffers x of piece a and y of piece b print alike in function o. */
static bool same_buf(void *vctx, int x, int y)
{
    Same *s = vctx;
    bool lx = is_local(s->a->r->bufs.v[x], s->a->piece), ly = is_local(s->b->r->bufs.v[y], s->b->piece);
    if (lx != ly)
        return false;
    const Names *nx = lx ? &s->a->locals[s->o] : &s->a->fnames;
    const Names *ny = ly ? &s->b->locals[s->o] : &s->b->fnames;
    return !strcmp(name_of(nx, x), name_of(ny, y));
}

static bool buf_alike(const CgBuf *x, const CgBuf *y)
{
    return x->type == y->type && !strcmp(x->comment, y->comment) && x->stride == y->stride;
}

/* The locals of a piece's function o, in buffer order (their declarations'). */
static int locals_of(const Piece *p, int o, int *ids)
{
    int n = 0;
    for (int i = 0; i < p->r->bufs.n; i++)
        if (p->locals[o].of[i] >= 0)
            ids[n++] = i;
    return n;
}

static bool piece_eq(Cg *c, const Piece *a, const Piece *b)
{
    if (a->fields.n != b->fields.n)
        return false;
    for (int i = 0; i < a->fields.n; i++) {
        const CgBuf *x = a->r->bufs.v[a->fields.v[i]], *y = b->r->bufs.v[b->fields.v[i]];
        if (field_group(x) != field_group(y) || !buf_alike(x, y) ||
            strcmp(name_of(&a->fnames, x->id), name_of(&b->fnames, y->id)))
            return false;
    }
    int *la = ir_alloc(c->arena, sizeof(int) * (size_t)(a->r->bufs.n + 1));
    int *lb = ir_alloc(c->arena, sizeof(int) * (size_t)(b->r->bufs.n + 1));
    for (int o = 0; o < CG_NOPKINDS; o++) {
        int na = locals_of(a, o, la), nb = locals_of(b, o, lb);
        if (na != nb)
            return false;
        for (int i = 0; i < na; i++) {
            const CgBuf *x = a->r->bufs.v[la[i]], *y = b->r->bufs.v[lb[i]];
            if (!buf_alike(x, y) || x->offset != y->offset ||
                strcmp(name_of(&a->locals[o], la[i]), name_of(&b->locals[o], lb[i])))
                return false;
        }
        Same s = {a, b, o};
        const CgOp *oa = a->ops[o], *ob = b->ops[o];
        int i = 0, j = 0;
        for (;;) {
            while (i < oa->st.n && oa->st.v[i].piece != a->piece)
                i++;
            while (j < ob->st.n && ob->st.v[j].piece != b->piece)
                j++;
            if (i == oa->st.n || j == ob->st.n) {
                if (i != oa->st.n || j != ob->st.n)
                    return false;
                break;
            }
            if (!cg_stmt_eq(&oa->st.v[i++], &ob->st.v[j++], same_buf, &s))
                return false;
        }
    }
    return true;
}

/* The body of piece pc's function o: locals, then its statements. */
static char *piece_fn(Cg *c, Piece *pc, int o, CgConsts *k)
{
    PCtx x = {c, pc, &pc->locals[o]};
    Str body = {0};
    sp(&body, "%s", "");
    CgRankProg *r = pc->r;
    for (int i = 0; i < r->bufs.n; i++) {
        CgBuf *b = r->bufs.v[i];
        if (pc->locals[o].of[i] < 0)
            continue;
        sp(&body, "    %s *%s = %s + %lld; /* %s */\n", cg_ctype(b->type),
           pc->locals[o].name.v[pc->locals[o].of[i]], wsname(b->type), (long long)b->offset, b->comment);
    }
    if (pc->locals[o].name.n)
        sp(&body, "\n");
    const CgOp *op = pc->ops[o];
    for (int i = 0; i < op->st.n; i++)
        if (op->st.v[i].piece == pc->piece)
            sp(&body, "    %s\n", cg_stmt_text(c, &op->st.v[i], k, name_in_fn, &x));
    char *s = ir_strdup(c->arena, body.s);
    free(body.s);
    return s;
}

static const char *kind_base(Cg *c, int piece)
{
    const char *n = c->g->pieces[piece].name;
    char buf[128];
    size_t k = 0;
    for (const char *p = n; *p && k + 1 < sizeof buf; p++)
        if (isalpha((unsigned char)*p) || *p == '_')
            buf[k++] = (char)tolower((unsigned char)*p);
    buf[k] = 0;
    return cg_ident(c, k ? buf : "piece");
}

int cg_find_kind(Out *o, Piece *pc)
{
    Cg *c = o->c;
    for (int i = 0; i < o->kinds.n; i++)
        if (piece_eq(c, o->kinds.v[i].first, pc))
            return i;
    const char *base = kind_base(c, pc->piece), *fn = base;
    for (int k = 2;; k++) {
        bool used = false;
        for (int i = 0; i < o->kinds.n; i++)
            used |= !strcmp(o->kinds.v[i].fn, fn);
        if (!used)
            break;
        fn = cg_fmt(c, "%s%d", base, k);
    }
    Kind kd;
    memset(&kd, 0, sizeof kd);
    char *type = (char *)cg_fmt(c, "%s", fn), *up = (char *)cg_fmt(c, "%s_", fn);
    type[0] = (char)toupper((unsigned char)type[0]);
    for (char *p = up; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    kd.type = type;
    kd.fn = fn;
    kd.first = pc;
    kd.consts.prefix = up;
    kd.fwd = piece_fn(c, pc, 0, &kd.consts);
    kd.bwd = piece_fn(c, pc, 1, &kd.consts);
    if (plan_schedule_split(c->p->schedule))
        kd.wgrad = piece_fn(c, pc, PLAN_OP_W, &kd.consts);
    vec_push(o->kinds, kd);
    return o->kinds.n - 1;
}

void cg_print_kind(Out *o, const Kind *k)
{
    static const char *const heads[] = {"parameters", "parameter gradients",
                                        "kept for the backward pass (one per micro-batch in flight)",
                                        "kept for the weight gradients (one per micro-batch whose W waits, "
                                        "at g_wslot_<type>)",
                                        "passed between pieces within one pass"};
    FILE *f = o->f;
    const Piece *pc = k->first;
    fprintf(f, "/* %s: %s */\n", k->type, o->c->g->pieces[pc->piece].name);
    cg_consts_print(&k->consts, f);
    fprintf(f, "typedef struct %s {\n", k->type);
    int group = -1;
    for (int i = 0; i < pc->fields.n; i++) {
        CgBuf *b = pc->r->bufs.v[pc->fields.v[i]];
        if (field_group(b) != group) {
            group = field_group(b);
            fprintf(f, "    /* %s */\n", heads[group]);
        }
        fprintf(f, "    %s *%s; /* %s */\n", cg_ctype(b->type), pc->fnames.name.v[pc->fnames.of[b->id]],
                b->comment);
    }
    fprintf(f, "} %s;\n\n", k->type);
    fprintf(f, "static void %s_forward(%s *b)\n{\n%s}\n\n", k->fn, k->type, k->fwd);
    fprintf(f, "static void %s_backward(%s *b)\n{\n%s}\n\n", k->fn, k->type, k->bwd);
    if (k->wgrad)
        fprintf(f, "static void %s_wgrad(%s *b)\n{\n%s%s}\n\n", k->fn, k->type,
                *k->wgrad ? "" : "    (void)b;\n", k->wgrad);
}
