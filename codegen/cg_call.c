/* cg_call.c: typed statements. Lowering builds each call from the table of
 * runtime calls (CG_CALLS in cg.h) and typed arguments: buffers by id, sizes
 * as products of the dims' local sizes, flags, communicators. The memory
 * planner reads the buffers a statement names (cg_stmt_bufs), the printer
 * prints it (cg_text.c), and pieces whose statements are equal
 * (cg_stmt_eq) share one function. */
#include "cg.h"

#include <string.h>

const char *cg_sizeof(CgType t)
{
    return t == CG_ACT ? "sizeof(rt_act)" : t == CG_F32 ? "sizeof(float)" : "sizeof(int32_t)";
}

#define CG_CALL_NAME(id, fn, sig) fn,
#define CG_CALL_SIG(id, fn, sig) sig,
const char *const cg_call_name[CG_NCALLS] = {CG_CALLS(CG_CALL_NAME)};
const char *const cg_call_sig[CG_NCALLS] = {CG_CALLS(CG_CALL_SIG)};

/* Whether argument a may stand where signature letter k says. */
static bool fits(char k, const CgArg *a)
{
    switch (k) {
    case 'b': return a->kind == CG_A_BUF || a->kind == CG_A_SYM || a->kind == CG_A_FLT;
    case 'L': return a->kind == CG_A_BUFS;
    case 'N': return a->kind == CG_A_SIZES;
    case 'n': return a->kind == CG_A_SIZE && !a->size.unit;
    case 'y': return a->kind == CG_A_SIZE && a->size.unit;
    case 'f': return a->kind == CG_A_BOOL;
    case 'x': return a->kind == CG_A_FLT;
    case 'c': return a->kind == CG_A_COMM;
    case 'o': return a->kind == CG_A_COORD;
    case 'm': return a->kind == CG_A_MESH;
    case 'a': return a->kind == CG_A_AXIS;
    case 'i': return a->kind == CG_A_INT;
    case 't':
    case 'e': return a->kind == CG_A_SYM;
    default: return false;
    }
}

void cg_call(Cg *c, CgOp *op, int piece, uint8_t guard, CgCallee fn, const CgArg *args, int nargs)
{
    const char *sig = cg_call_sig[fn];
    if ((int)strlen(sig) != nargs)
        ir_die("codegen: %s called with %d arguments, not %d", cg_call_name[fn], nargs, (int)strlen(sig));
    for (int i = 0; i < nargs; i++)
        if (!fits(sig[i], &args[i]))
            ir_die("codegen: argument %d of %s is not of kind '%c'", i + 1, cg_call_name[fn], sig[i]);
    CgArg *a = ir_alloc(c->arena, sizeof *a * (size_t)nargs);
    memcpy(a, args, sizeof *a * (size_t)nargs);
    vec_push(op->st, ((CgStmt){piece, fn, guard, nargs, a, NULL}));
}

void cg_comment(Cg *c, CgOp *op, int piece, const char *text)
{
    vec_push(op->st, ((CgStmt){piece, CG_NCALLS, 0, 0, NULL, ir_strdup(c->arena, text)}));
}

/* ------------------------------------------------------------- arguments */

static CgArg arg(CgArgKind k)
{
    CgArg a;
    memset(&a, 0, sizeof a);
    a.kind = k;
    return a;
}

CgArg cg_a_buf(int buf)
{
    CgArg a = arg(CG_A_BUF);
    a.buf = buf;
    return a;
}

CgArg cg_a_buf_at(int buf, int comm, CgSize at)
{
    CgArg a = cg_a_buf(buf);
    a.comm = comm;
    a.size = at;
    return a;
}

CgArg cg_a_bufs(Cg *c, const int *bufs, int n)
{
    CgArg a = arg(CG_A_BUFS);
    int *v = ir_alloc(c->arena, sizeof(int) * (size_t)n);
    memcpy(v, bufs, sizeof(int) * (size_t)n);
    a.bufs = v;
    a.nbufs = n;
    return a;
}

CgArg cg_a_size(CgSize s)
{
    CgArg a = arg(CG_A_SIZE);
    a.size = s;
    return a;
}

CgArg cg_a_bytes(CgSize s, CgType t)
{
    s.unit = cg_sizeof(t);
    return cg_a_size(s);
}

CgArg cg_a_int(const char *name, int64_t v, const char *what)
{
    CgArg a = arg(CG_A_INT);
    a.size = cg_sz_named(name, v, what);
    return a;
}

CgArg cg_a_bool(bool b)
{
    CgArg a = arg(CG_A_BOOL);
    a.b = b;
    return a;
}

/* A float literal C accepts: 1e-05f, 10000.0f. */
CgArg cg_a_flt(Cg *c, double v)
{
    CgArg a = arg(CG_A_FLT);
    const char *s = cg_fmt(c, "%.9g", v);
    a.sym = cg_fmt(c, "%s%sf", s, strpbrk(s, ".eEn") ? "" : ".0");
    return a;
}

CgArg cg_a_comm(int mask)
{
    CgArg a = arg(CG_A_COMM);
    a.buf = mask;
    return a;
}

CgArg cg_a_coord(int axis, CgSize s)
{
    CgArg a = arg(CG_A_COORD);
    a.buf = axis;
    a.size = s;
    return a;
}

CgArg cg_a_coord_of(const PlanSharding *sh, int d, CgSize s)
{
    CgArg a = cg_a_coord(-1, s);
    for (int ax = 0; ax < PLAN_MAX_AXES && d >= 0; ax++)
        if (sh->dim[ax] == d) {
            if (a.buf < 0 || plan_axis_outside(sh, ax, a.buf)) { /* buf: the outermost */
                if (a.buf >= 0)
                    a.comm |= 1 << a.buf;
                a.buf = ax;
            } else {
                a.comm |= 1 << ax;
            }
        }
    return a;
}

CgArg cg_a_mesh(int axis)
{
    CgArg a = arg(CG_A_MESH);
    a.buf = axis;
    return a;
}

CgArg cg_a_axis(int axis)
{
    CgArg a = arg(CG_A_AXIS);
    a.buf = axis;
    return a;
}

CgArg cg_a_sym(const char *text)
{
    CgArg a = arg(CG_A_SYM);
    a.sym = text;
    return a;
}

/* ----------------------------------------------------------------- sizes */

static CgSize one(void)
{
    CgSize s;
    memset(&s, 0, sizeof s);
    s.v = 1;
    return s;
}

CgSize cg_sz_dims(const Cg *c, int t, const int64_t *local_of, int from, int to)
{
    const IrTensor *x = &c->g->tensors[t];
    CgSize s = one();
    for (int i = from; i < to; i++) {
        s.dim[s.nf] = (int16_t)x->dim[i];
        s.local[s.nf++] = local_of[x->dim[i]];
        s.v *= local_of[x->dim[i]];
    }
    return s;
}

CgSize cg_sz_sh(const Cg *c, int t, const PlanSharding *sh, int from, int to)
{
    int64_t local[IR_MAX_RANK];
    const IrTensor *x = &c->g->tensors[t];
    cg_local_dims(c, t, sh, local);
    CgSize s = one();
    for (int i = from; i < to; i++) {
        s.dim[s.nf] = (int16_t)x->dim[i];
        s.local[s.nf++] = local[i];
        s.v *= local[i];
    }
    return s;
}

CgSize cg_sz_numel(const Cg *c, int t, const PlanSharding *sh)
{
    CgSize s = cg_sz_sh(c, t, sh, 0, c->g->tensors[t].rank);
    if (s.v != cg_numel(c, t, sh))
        ir_die("codegen: the size of '%s' is not its dims' product", c->g->tensors[t].name);
    return s;
}

CgSize cg_sz_named(const char *name, int64_t v, const char *what)
{
    CgSize s = one();
    s.v = v;
    s.name = name;
    s.what = what;
    return s;
}

CgSize cg_sz_div(CgSize a, CgSize b)
{
    if (a.name || b.name || b.v == 0 || a.v % b.v)
        ir_die("codegen: a size divided by one it is no multiple of");
    CgSize q = one();
    bool used[IR_MAX_RANK] = {false};
    for (int i = 0; i < a.nf; i++) {
        bool drop = false;
        for (int j = 0; j < b.nf && !drop; j++)
            if (!used[j] && b.dim[j] == a.dim[i] && b.local[j] == a.local[i])
                drop = used[j] = true;
        if (!drop) {
            q.dim[q.nf] = a.dim[i];
            q.local[q.nf++] = a.local[i];
            q.v *= a.local[i];
        }
    }
    if (q.v != a.v / b.v)
        ir_die("codegen: a size whose dims do not divide");
    return q;
}

/* ------------------------------------------------------------ statements */

void cg_stmt_bufs(const CgStmt *s, void (*f)(void *, int), void *ctx)
{
    for (int i = 0; i < s->nargs; i++) {
        const CgArg *a = &s->args[i];
        if (a->kind == CG_A_BUF)
            f(ctx, a->buf);
        else if (a->kind == CG_A_BUFS)
            for (int k = 0; k < a->nbufs; k++)
                f(ctx, a->bufs[k]);
    }
}

static bool size_eq(const CgSize *a, const CgSize *b)
{
    if (a->v != b->v || a->nf != b->nf || (a->name == NULL) != (b->name == NULL) ||
        (a->unit == NULL) != (b->unit == NULL) || (a->name && strcmp(a->name, b->name)) ||
        (a->unit && strcmp(a->unit, b->unit)))
        return false;
    for (int i = 0; i < a->nf; i++)
        if (a->dim[i] != b->dim[i] || a->local[i] != b->local[i])
            return false;
    return true;
}

static bool arg_eq(const CgArg *a, const CgArg *b, bool (*same)(void *, int, int), void *ctx)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case CG_A_BUF:
        return same(ctx, a->buf, b->buf) && a->comm == b->comm &&
               (!a->comm || size_eq(&a->size, &b->size));
    case CG_A_BUFS:
        if (a->nbufs != b->nbufs)
            return false;
        for (int k = 0; k < a->nbufs; k++)
            if (!same(ctx, a->bufs[k], b->bufs[k]))
                return false;
        return true;
    case CG_A_SIZES:
        if (a->nbufs != b->nbufs)
            return false;
        for (int k = 0; k < a->nbufs; k++)
            if (!size_eq(&a->sizes[k], &b->sizes[k]))
                return false;
        return true;
    case CG_A_SIZE:
    case CG_A_INT: return size_eq(&a->size, &b->size);
    case CG_A_BOOL: return a->b == b->b;
    case CG_A_FLT:
    case CG_A_SYM: return !strcmp(a->sym, b->sym);
    case CG_A_COORD: return a->buf == b->buf && a->comm == b->comm && (a->buf < 0 || size_eq(&a->size, &b->size));
    case CG_A_COMM:
    case CG_A_MESH:
    case CG_A_AXIS: return a->buf == b->buf;
    }
    return false;
}

bool cg_stmt_eq(const CgStmt *a, const CgStmt *b, bool (*same)(void *, int, int), void *ctx)
{
    if (a->fn != b->fn || a->guard != b->guard || a->nargs != b->nargs)
        return false;
    if (a->fn == CG_NCALLS)
        return !strcmp(a->comment, b->comment);
    for (int i = 0; i < a->nargs; i++)
        if (!arg_eq(&a->args[i], &b->args[i], same, ctx))
            return false;
    return true;
}
