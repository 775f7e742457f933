/* consts.c: config constants. Definitions are collected file by file in
 * dependency order (an importing file's entries override), then --set
 * overrides; only then is anything evaluated, lazily and memoised, so
 * `head_dim = d_model / n_heads` follows a later override of d_model.
 *
 * Arithmetic (docs/language.md): integers are int64 and never wrap (overflow
 * is an error at the operator); `/` is exact (an integer when it divides
 * evenly); `//` and `%` floor like Python; floats must stay finite. */
#include "fe.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FE_MAX_EVAL_DEPTH 4000 /* nested evaluations (operators and constant references) */

enum { UNEVALUATED, EVALUATING, DONE };

typedef struct Const {
    const char *name;
    const FeExpr *e;       /* current definition; NULL when --set gave a literal */
    IrLoc loc;             /* of the current definition */
    const FeFile *file;    /* that defines it first */
    int state;
    FeValue v;
} Const;

struct FeConsts {
    IrArena *tmp;
    VEC(Const) v;
    IrMap index;           /* name -> index in v */
    VEC(const char *) names;
    VEC(int) evaluating;   /* constants being evaluated, outermost first (to name a cycle) */
    int depth;
    int layer;             /* the repeat index an attribute sees as `layer`; -1 outside (fe_eval_at_layer) */
};

static const FeValue BAD = {false, false, 0, 0, NULL};

static FeValue ival(int64_t i) { return (FeValue){true, true, i, 0, NULL}; }
static FeValue fval(double f) { return (FeValue){true, false, 0, f, NULL}; }
static FeValue sval(const char *s) { return (FeValue){true, false, 0, 0, s}; }
static double num(FeValue v) { return v.is_int ? (double)v.i : v.f; }

/* A value as a message shows it: "3", "0.5", "2.0" (a float stays
 * recognisably a float), "(-8)" as an operand. */
static const char *show(FeConsts *c, FeValue v)
{
    const char *s = v.is_int ? ir_sprintf(c->tmp, "%lld", (long long)v.i) : ir_sprintf(c->tmp, "%g", v.f);
    if (!v.is_int && !strpbrk(s, ".eni"))
        s = ir_sprintf(c->tmp, "%s.0", s);
    return s[0] == '-' ? ir_sprintf(c->tmp, "(%s)", s) : s;
}

static int find(const FeConsts *c, const char *name)
{
    int i;
    return ir_map_get(&c->index, name, &i) ? i : -1;
}

static const char *file_list(IrArena *a, const FeFile *f)
{
    if (f->nimports == 1)
        return ir_sprintf(a, "%s", f->imports[0].path);
    return "the imported files";
}

FeConsts *fe_consts_new(IrArena *tmp, const FeProgram *prog, const FeSet *sets, int nsets, bool *ok)
{
    FeConsts *c = ir_alloc(tmp, sizeof *c);
    c->tmp = tmp;
    c->layer = -1;
    *ok = true;
    for (int fi = 0; fi < prog->nfiles; fi++) {
        const FeFile *f = prog->files[fi];
        IrMap here = {0}; /* names this file's config sets: one entry each */
        for (int k = 0; k < f->nconfig; k++) {
            const FeConfigEntry *en = &f->config[k];
            int prev;
            if (ir_map_get(&here, en->name, &prev)) {
                ir_error(en->loc, "'%s' is set twice in this config (first at line %d)", en->name,
                         f->config[prev].loc.line);
                *ok = false;
                continue;
            }
            ir_map_put(&here, en->name, k);
            if (strcmp(en->name, "batch") == 0) {
                ir_error(en->loc, "'batch' is built in (the micro-batch the planner chooses); it "
                         "cannot be a constant");
                *ok = false;
                continue;
            }
            int i = find(c, en->name);
            if (f->nimports > 0 && i < 0) {
                /* A size file only overrides: a typo must not create a constant. */
                const char *dym = fe_did_you_mean(tmp, en->name, c->names.v, c->names.n);
                ir_error(en->loc, "'%s' is not a constant of %s%s", en->name, file_list(tmp, f), dym);
                *ok = false;
                continue;
            }
            if (f->nimports == 0 && i >= 0) {
                ir_error(en->loc, "constant '%s' is already defined in %s", en->name,
                         c->v.v[i].file->path);
                *ok = false;
                continue;
            }
            if (i < 0) {
                i = c->v.n;
                vec_push(c->v, ((Const){.name = en->name, .file = f}));
                vec_push(c->names, en->name);
                ir_map_put(&c->index, en->name, i);
            }
            c->v.v[i].e = en->e;
            c->v.v[i].loc = en->loc;
        }
        ir_map_free(&here);
    }
    for (int k = 0; k < nsets; k++) {
        const FeSet *s = &sets[k];
        int i = find(c, s->name);
        if (i < 0) {
            const char *dym = fe_did_you_mean(tmp, s->name, c->names.v, c->names.n);
            ir_error(IR_NOLOC, "--set %s=%s: the model has no constant '%s'%s", s->name, s->value,
                     s->name, dym);
            *ok = false;
            continue;
        }
        Const *k2 = &c->v.v[i];
        if (k2->e && k2->e->kind == FE_E_STR) {
            /* A layer pattern takes the text as it is. */
            k2->e = NULL;
            k2->v = sval(s->value);
            k2->state = DONE;
            continue;
        }
        /* A number, nothing else: an integer if it reads as one. */
        char *end;
        errno = 0;
        long long iv = strtoll(s->value, &end, 10);
        FeValue v;
        if (s->value[0] && !*end && errno == 0 && !strchr(" \t\n", s->value[0])) {
            v = ival(iv);
        } else {
            errno = 0;
            double fv = strtod(s->value, &end);
            bool number = s->value[0] && !*end && !strchr(" \t\n", s->value[0]) && isfinite(fv) &&
                          !strpbrk(s->value, "xXnNiI"); /* no hex floats, nan or inf */
            if (!number) {
                ir_error(IR_NOLOC, "--set %s=%s: '%s' is not a number", s->name, s->value, s->value);
                *ok = false;
                continue;
            }
            if (errno == ERANGE && fv != 0) {
                ir_error(IR_NOLOC, "--set %s=%s: the number is out of range", s->name, s->value);
                *ok = false;
                continue;
            }
            v = fval(fv);
        }
        k2->e = NULL;
        k2->v = v;
        k2->state = DONE;
    }
    return c;
}

void fe_consts_free(FeConsts *c)
{
    if (!c)
        return;
    vec_free(c->v);
    vec_free(c->names);
    vec_free(c->evaluating);
    ir_map_free(&c->index);
}

bool fe_const_exists(FeConsts *c, const char *name) { return find(c, name) >= 0; }

const char *const *fe_const_names(FeConsts *c, int *n)
{
    *n = c->names.n;
    return c->names.v;
}

static FeValue eval(FeConsts *c, const FeExpr *e);
static FeValue number(FeConsts *c, const FeExpr *e);

static FeValue value_of(FeConsts *c, int i, IrLoc ref)
{
    Const *k = &c->v.v[i];
    if (k->state == DONE)
        return k->v;
    if (k->state == EVALUATING) {
        /* Name the cycle from where it starts: a -> b -> a. */
        int from = 0;
        for (int j = 0; j < c->evaluating.n; j++)
            if (c->evaluating.v[j] == i)
                from = j;
        char chain[1024];
        size_t n = 0;
        for (int j = from; j < c->evaluating.n && n < sizeof chain; j++)
            n += (size_t)snprintf(chain + n, sizeof chain - n, "%s -> ",
                                  c->v.v[c->evaluating.v[j]].name);
        if (n < sizeof chain)
            snprintf(chain + n, sizeof chain - n, "%s", k->name);
        ir_error(ref, "constant '%s' depends on itself: %s", k->name, chain);
        return BAD;
    }
    k->state = EVALUATING;
    vec_push(c->evaluating, i);
    FeValue v = eval(c, k->e);
    c->evaluating.n--;
    k = &c->v.v[i];
    k->v = v;
    k->state = DONE;
    return v;
}

FeValue fe_const_value(FeConsts *c, const char *name, bool *exists)
{
    int i = find(c, name);
    *exists = i >= 0;
    if (i < 0)
        return BAD;
    FeValue v = value_of(c, i, c->v.v[i].loc);
    if (v.ok && v.s) {
        ir_error(c->v.v[i].loc, "'%s' is a string (a layer pattern), not a number: only a repeat "
                 "takes one", name);
        return BAD;
    }
    return v;
}

const char *fe_const_alias(FeConsts *c, const char *name)
{
    for (int hops = 0; hops <= c->v.n; hops++) {
        int i = find(c, name);
        if (i < 0 || !c->v.v[i].e || c->v.v[i].e->kind != FE_E_NAME || find(c, c->v.v[i].e->name) < 0)
            return name;
        name = c->v.v[i].e->name;
    }
    return name; /* a cycle: evaluation reports it */
}

static FeValue overflow(FeConsts *c, IrLoc loc, FeValue a, const char *op, FeValue b)
{
    ir_error(loc, "integer overflow: %s %s %s does not fit in 64 bits", show(c, a), op, show(c, b));
    return BAD;
}

static FeValue finite(FeConsts *c, IrLoc loc, double r, FeValue a, const char *op, FeValue b)
{
    if (isnan(r)) {
        ir_error(loc, "%s %s %s is not a real number", show(c, a), op, show(c, b));
        return BAD;
    }
    if (isinf(r)) {
        ir_error(loc, "%s %s %s overflows a float", show(c, a), op, show(c, b));
        return BAD;
    }
    return fval(r);
}

/* a ** b for integers, b >= 0, by squaring; false on overflow. */
static bool ipow(int64_t a, int64_t b, int64_t *r)
{
    int64_t acc = 1, base = a;
    while (b > 0) {
        if ((b & 1) && __builtin_mul_overflow(acc, base, &acc))
            return false;
        b >>= 1;
        if (b > 0 && __builtin_mul_overflow(base, base, &base))
            return false;
    }
    *r = acc;
    return true;
}

static FeValue binop(FeConsts *c, const FeExpr *e, FeValue a, FeValue b)
{
    IrLoc at = e->loc;
    const char *sym = e->op == FE_OP_IDIV ? "//" : e->op == FE_OP_POW ? "**"
                    : ir_sprintf(c->tmp, "%c", e->op);
    bool ints = a.is_int && b.is_int;
    int64_t r;
    double x = num(a), y = num(b);
    switch (e->op) {
    case '+':
        if (!ints)
            return finite(c, at, x + y, a, sym, b);
        return __builtin_add_overflow(a.i, b.i, &r) ? overflow(c, at, a, sym, b) : ival(r);
    case '-':
        if (!ints)
            return finite(c, at, x - y, a, sym, b);
        return __builtin_sub_overflow(a.i, b.i, &r) ? overflow(c, at, a, sym, b) : ival(r);
    case '*':
        if (!ints)
            return finite(c, at, x * y, a, sym, b);
        return __builtin_mul_overflow(a.i, b.i, &r) ? overflow(c, at, a, sym, b) : ival(r);
    case '/':
    case FE_OP_IDIV:
    case '%':
        if (y == 0) {
            ir_error(at, "%s by zero: %s %s %s",
                     e->op == '%' ? "modulo" : "division", show(c, a), sym, show(c, b));
            return BAD;
        }
        if (!ints) {
            double q = x / y;
            if (e->op == '/')
                return finite(c, at, q, a, sym, b);
            if (e->op == FE_OP_IDIV)
                return finite(c, at, floor(q), a, sym, b);
            double m = fmod(x, y);
            if (m != 0 && (m < 0) != (y < 0))
                m += y;
            return finite(c, at, m, a, sym, b);
        }
        if (a.i == INT64_MIN && b.i == -1) {
            if (e->op == '%')
                return ival(0);
            return overflow(c, at, a, sym, b);
        }
        if (e->op == '/')
            return a.i % b.i == 0 ? ival(a.i / b.i) : fval((double)a.i / (double)b.i);
        {
            int64_t q = a.i / b.i, m = a.i % b.i;
            if (m != 0 && (m < 0) != (b.i < 0)) {
                q -= 1;
                m += b.i;
            }
            return ival(e->op == '%' ? m : q);
        }
    case FE_OP_POW:
        if (ints && b.i >= 0)
            return ipow(a.i, b.i, &r) ? ival(r) : overflow(c, at, a, sym, b);
        if (x == 0 && y < 0) {
            ir_error(at, "division by zero: %s %s %s", show(c, a), sym, show(c, b));
            return BAD;
        }
        return finite(c, at, pow(x, y), a, sym, b);
    }
    ir_die("constant operator %d", e->op);
}

static const char *const functions[] = {"sqrt", "min", "max", "ceil", "floor"};
enum { NFUNCTIONS = sizeof functions / sizeof functions[0] };

static FeValue to_int(FeConsts *c, IrLoc at, const char *fn, double r)
{
    if (!(r >= -9.2e18 && r <= 9.2e18)) {
        ir_error(at, "%s(%g) does not fit in a 64-bit integer", fn, r);
        return BAD;
    }
    (void)c;
    return ival((int64_t)r);
}

static FeValue call(FeConsts *c, const FeExpr *e)
{
    int fn = -1;
    for (int k = 0; k < NFUNCTIONS; k++)
        if (strcmp(e->name, functions[k]) == 0)
            fn = k;
    if (fn < 0) {
        ir_error(e->loc, "unknown function '%s' in a constant expression%s", e->name,
                 fe_did_you_mean(c->tmp, e->name, functions, NFUNCTIONS));
        return BAD;
    }
    int want = fn == 1 || fn == 2 ? 2 : 1;
    if (e->nargs != want) {
        ir_error(e->loc, "%s takes %d argument%s, got %d", e->name, want, want == 1 ? "" : "s",
                 e->nargs);
        return BAD;
    }
    FeValue a = number(c, e->args[0].e);
    FeValue b = want == 2 ? number(c, e->args[1].e) : a;
    if (!a.ok || !b.ok)
        return BAD;
    switch (fn) {
    case 0:
        if (num(a) < 0) {
            ir_error(e->loc, "sqrt of a negative number (%g)", num(a));
            return BAD;
        }
        return fval(sqrt(num(a)));
    case 1:
    case 2: {
        bool less = num(a) < num(b) || (a.is_int && b.is_int && a.i < b.i);
        FeValue pick = (fn == 1) == less ? a : b;
        if (a.is_int && b.is_int)
            return pick;
        return fval(num(pick));
    }
    case 3:
        return a.is_int ? a : to_int(c, e->loc, "ceil", ceil(a.f));
    default:
        return a.is_int ? a : to_int(c, e->loc, "floor", floor(a.f));
    }
}

static FeValue eval_inner(FeConsts *c, const FeExpr *e)
{
    switch (e->kind) {
    case FE_E_INT:
        return ival(e->i);
    case FE_E_FLOAT:
        return fval(e->f);
    case FE_E_STR:
        return sval(e->name);
    case FE_E_BOOL:
        ir_error(e->loc, "'%s' is not a number", e->i ? "true" : "false");
        return BAD;
    case FE_E_NAME: {
        int i = find(c, e->name);
        if (i >= 0)
            return value_of(c, i, e->loc);
        if (c->layer >= 0 && strcmp(e->name, "layer") == 0)
            return ival(c->layer);
        if (strcmp(e->name, "layer") == 0)
            ir_error(e->loc, "'layer' is the index of a repeat's iteration: only an attribute of a call "
                     "inside a repeat may use it");
        else if (strcmp(e->name, "batch") == 0)
            ir_error(e->loc, "'batch' has no fixed size (the planner chooses it); it cannot be used "
                     "in a constant expression");
        else
            ir_error(e->loc, "unknown constant '%s'%s", e->name,
                     fe_did_you_mean(c->tmp, e->name, c->names.v, c->names.n));
        return BAD;
    }
    case FE_E_NEG: {
        FeValue a = number(c, e->l);
        if (!a.ok)
            return BAD;
        if (!a.is_int)
            return fval(-a.f);
        if (a.i == INT64_MIN) {
            ir_error(e->loc, "integer overflow: -%s does not fit in 64 bits", show(c, a));
            return BAD;
        }
        return ival(-a.i);
    }
    case FE_E_BIN: {
        FeValue a = number(c, e->l);
        FeValue b = number(c, e->r);
        if (!a.ok || !b.ok)
            return BAD;
        return binop(c, e, a, b);
    }
    case FE_E_CALL:
        return call(c, e);
    }
    ir_die("constant expression kind %d", e->kind);
}

static FeValue eval(FeConsts *c, const FeExpr *e)
{
    if (c->depth >= FE_MAX_EVAL_DEPTH) {
        ir_error(e->loc, "constants are defined through more than %d nested steps here",
                 FE_MAX_EVAL_DEPTH);
        return BAD;
    }
    c->depth++;
    FeValue v = eval_inner(c, e);
    c->depth--;
    return v;
}

/* eval where a number must come: a string (a layer pattern) is an error. */
static FeValue number(FeConsts *c, const FeExpr *e)
{
    FeValue v = eval(c, e);
    if (v.ok && v.s) {
        ir_error(e->loc, "\"%s\" is a string (a layer pattern), not a number: only a repeat "
                 "takes one", v.s);
        return BAD;
    }
    return v;
}

FeValue fe_eval(FeConsts *c, const FeExpr *e) { return number(c, e); }

FeValue fe_eval_repeat(FeConsts *c, const FeExpr *e) { return eval(c, e); }

FeValue fe_eval_at_layer(FeConsts *c, const FeExpr *e, int layer)
{
    c->layer = layer;
    FeValue v = number(c, e);
    c->layer = -1;
    return v;
}

bool fe_consts_to_graph(FeConsts *c, IrGraph *g)
{
    int before = ir_error_count();
    for (int i = 0; i < c->v.n; i++) {
        FeValue v = value_of(c, i, c->v.v[i].loc);
        const Const *k = &c->v.v[i];
        if (v.ok && g && !v.s) /* a pattern is the graph's pieces, not a constant */
            ir_const_add(g, k->name, v.is_int, v.i, v.f, k->loc);
    }
    return ir_error_count() == before;
}
