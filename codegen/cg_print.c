/* cg_print.c: model.h and model.c, the generated half of a training program.
 *
 * A pipeline stage's forward and backward are printed as one function per
 * piece (the embedding, each layer, the head) over a struct of buffer
 * pointers, and a stage function that receives, loads inputs, calls the
 * pieces and sends. Pieces whose code comes out identical (the layers of a
 * model, whatever stage they sit in) share one struct type and one pair of
 * functions, as in hand-written trainers:
 *     static void layer_forward(Layer *b) { ... rt_matmul(b->q, b->h, b->wq, ...); ... }
 * Struct fields hold what outlives the function (parameters, gradients,
 * activations kept for backward, values passed between pieces); temporaries
 * of one function are locals in the workspace. The bind function of each
 * pipeline rank points every field into the rank's arena (cg_mem.c). */
#include "cg.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *ctype(int t) { return t == CG_ACT ? "rt_act" : t == CG_F32 ? "float" : "int32_t"; }
static const char *wsname(int t) { return t == CG_ACT ? "g_ws_act" : t == CG_F32 ? "g_ws_f32" : "g_ws_i32"; }
static const char *arena(int t) { return t == CG_ACT ? "A" : t == CG_F32 ? "F" : "I"; }

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

static const char *buf_name(Cg *c, const CgBuf *b, int piece)
{
    if (b->tensor < 0)
        return cg_ident(c, b->name);
    return cg_ident(c, cg_fmt(c, "%s%s%s", b->pre, stem(c, b->tensor, piece), b->suf));
}

typedef struct Names {
    int *of;          /* buffer id -> index into name, or -1 */
    VEC(const char *) name;
} Names;

static const char *uniq(Cg *c, Names *ns, int buf, const char *want)
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

static void names_init(Cg *c, Names *ns, int nbufs)
{
    ns->of = ir_alloc(c->arena, sizeof(int) * (size_t)(nbufs + 1));
    for (int i = 0; i < nbufs; i++)
        ns->of[i] = -1;
    ns->name.n = 0;
    ns->name.v = NULL;
    ns->name.cap = 0;
}

/* Calls f for each $id of text in order. */
static void each_ref(const char *text, void (*f)(void *, int), void *ctx)
{
    for (const char *p = text; (p = strchr(p, '$'));) {
        p++;
        int id = 0;
        while (*p >= '0' && *p <= '9')
            id = id * 10 + (*p++ - '0');
        f(ctx, id);
    }
}

/* text with each $id replaced by resolve(id). */
static char *resolve(Cg *c, const char *text, const char *(*name)(void *, int), void *ctx)
{
    Str out = {0};
    sp(&out, "%s", "");
    for (const char *p = text; *p;) {
        if (*p != '$') {
            sp(&out, "%c", *p++);
            continue;
        }
        p++;
        int id = 0;
        while (*p >= '0' && *p <= '9')
            id = id * 10 + (*p++ - '0');
        sp(&out, "%s", name(ctx, id));
    }
    char *r = ir_strdup(c->arena, out.s);
    free(out.s);
    return r;
}

/* ------------------------------------------------------------- pieces */

typedef struct Piece {
    int piece;
    int rank, chunk;
    VEC(int) fields;           /* buffer ids, in struct order */
    Names fnames;
    char *struct_body, *fwd, *bwd;
    int kind;
} Piece;

typedef struct Kind {
    const char *type, *fn;
    char *key;
    Piece *first;
} Kind;

typedef struct PrintCtx {
    Cg *c;
    CgRankProg *r;
    Piece *pc;
    Names *locals;
    const char *self; /* "b" in piece functions, "s" in stage functions */
    Names *fields;
} PrintCtx;

static bool is_local(const CgBuf *b, int piece)
{
    return b->kind == CG_B_TEMP && b->home == CG_HOME_LOCAL && b->piece == piece;
}

static void collect_field(void *vctx, int id)
{
    PrintCtx *x = vctx;
    CgBuf *b = x->r->bufs.v[id];
    if (is_local(b, x->pc->piece))
        return;
    for (int i = 0; i < x->pc->fields.n; i++)
        if (x->pc->fields.v[i] == id)
            return;
    vec_push(x->pc->fields, id);
}

static const char *name_in_fn(void *vctx, int id)
{
    PrintCtx *x = vctx;
    CgBuf *b = x->r->bufs.v[id];
    int piece = x->pc ? x->pc->piece : -1;
    if (x->pc && is_local(b, piece))
        return uniq(x->c, x->locals, id, buf_name(x->c, b, piece));
    return cg_fmt(x->c, "%s->%s", x->self, uniq(x->c, x->fields, id, buf_name(x->c, b, piece)));
}

static int field_group(const CgBuf *b)
{
    switch (b->kind) {
    case CG_B_PARAM: return 0;
    case CG_B_GRAD: return 1;
    case CG_B_SLOT: return 2;
    default: return 3;
    }
}

/* The body of one piece function over the op's statements of that piece. */
static char *piece_fn(Cg *c, CgRankProg *r, Piece *pc, CgOp *op)
{
    Names locals;
    names_init(c, &locals, r->bufs.n);
    PrintCtx x = {c, r, pc, &locals, "b", &pc->fnames};
    Str body = {0};
    sp(&body, "%s", "");
    VEC(const char *) lines = {0};
    for (int i = 0; i < op->st.n; i++)
        if (op->st.v[i].piece == pc->piece)
            vec_push(lines, resolve(c, op->st.v[i].text, name_in_fn, &x));
    /* Locals: the workspace buffers of this function, at their planned offsets. */
    for (int i = 0; i < r->bufs.n; i++) {
        CgBuf *b = r->bufs.v[i];
        if (locals.of[i] < 0)
            continue;
        sp(&body, "    %s *%s = %s + %lld; /* %s */\n", ctype(b->type), locals.name.v[locals.of[i]],
           wsname(b->type), (long long)b->offset, b->comment);
    }
    if (locals.name.n)
        sp(&body, "\n");
    for (int i = 0; i < lines.n; i++)
        sp(&body, "    %s\n", lines.v[i]);
    vec_free(lines);
    vec_free(locals.name);
    char *s = ir_strdup(c->arena, body.s);
    free(body.s);
    return s;
}

static void build_piece(Cg *c, CgRankProg *r, int chunk, Piece *pc)
{
    CgOp *ops[2] = {&r->ops[2 * chunk], &r->ops[2 * chunk + 1]};
    PrintCtx x = {c, r, pc, NULL, "b", NULL};
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < ops[o]->st.n; i++)
            if (ops[o]->st.v[i].piece == pc->piece)
                each_ref(ops[o]->st.v[i].text, collect_field, &x);
    /* Fields grouped: parameters, gradients, kept activations, shared temporaries. */
    for (int i = 1; i < pc->fields.n; i++)
        for (int j = i; j > 0 && field_group(r->bufs.v[pc->fields.v[j]]) <
                                     field_group(r->bufs.v[pc->fields.v[j - 1]]); j--) {
            int t = pc->fields.v[j];
            pc->fields.v[j] = pc->fields.v[j - 1];
            pc->fields.v[j - 1] = t;
        }
    names_init(c, &pc->fnames, r->bufs.n);
    for (int i = 0; i < pc->fields.n; i++) {
        CgBuf *b = r->bufs.v[pc->fields.v[i]];
        uniq(c, &pc->fnames, b->id, buf_name(c, b, pc->piece));
    }
    pc->fwd = piece_fn(c, r, pc, ops[0]);
    pc->bwd = piece_fn(c, r, pc, ops[1]);
    static const char *const heads[] = {"parameters", "parameter gradients",
                                        "kept for the backward pass (one per micro-batch in flight)",
                                        "passed between pieces within one pass"};
    Str st = {0};
    sp(&st, "%s", "");
    int group = -1;
    for (int i = 0; i < pc->fields.n; i++) {
        CgBuf *b = r->bufs.v[pc->fields.v[i]];
        if (field_group(b) != group) {
            group = field_group(b);
            sp(&st, "    /* %s */\n", heads[group]);
        }
        sp(&st, "    %s *%s; /* %s */\n", ctype(b->type), pc->fnames.name.v[pc->fnames.of[b->id]],
           b->comment);
    }
    pc->struct_body = ir_strdup(c->arena, st.s);
    free(st.s);
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

/* --------------------------------------------------------------- output */

typedef struct Out {
    Cg *c;
    FILE *f;
    VEC(Kind) kinds;
    Piece **pieces; /* [rank][chunk][k] flattened per rank below */
} Out;

static int find_kind(Out *o, Piece *pc)
{
    Cg *c = o->c;
    const char *base = kind_base(c, pc->piece);
    char *key = (char *)cg_fmt(c, "%s", ""); /* placeholder, replaced below */
    size_t n = strlen(pc->struct_body) + strlen(pc->fwd) + strlen(pc->bwd) + 4;
    key = ir_alloc(c->arena, n);
    snprintf(key, n, "%s\x01%s\x01%s", pc->struct_body, pc->fwd, pc->bwd);
    for (int i = 0; i < o->kinds.n; i++)
        if (!strcmp(o->kinds.v[i].key, key))
            return i;
    const char *fn = base;
    for (int k = 2;; k++) {
        bool used = false;
        for (int i = 0; i < o->kinds.n; i++)
            used |= !strcmp(o->kinds.v[i].fn, fn);
        if (!used)
            break;
        fn = cg_fmt(c, "%s%d", base, k);
    }
    char *type = (char *)cg_fmt(c, "%s", fn);
    type[0] = (char)toupper((unsigned char)type[0]);
    vec_push(o->kinds, ((Kind){type, fn, key, pc}));
    return o->kinds.n - 1;
}

static void print_kind(Out *o, const Kind *k)
{
    FILE *f = o->f;
    const Piece *pc = k->first;
    fprintf(f, "/* %s: %s */\ntypedef struct %s {\n%s} %s;\n\n", k->type,
            o->c->g->pieces[pc->piece].name, k->type, pc->struct_body, k->type);
    fprintf(f, "static void %s_forward(%s *b)\n{\n%s}\n\n", k->fn, k->type, pc->fwd);
    fprintf(f, "static void %s_backward(%s *b)\n{\n%s}\n\n", k->fn, k->type, pc->bwd);
}

/* Runs of consecutive pieces of one kind in a stage become one array field. */
typedef struct Run {
    int kind, first, count; /* pieces [first, first + count) of the stage */
    const char *field;
} Run;

typedef struct StagePrint {
    int rank, chunk, stage;
    Piece *pieces;
    int npieces;
    Run runs[256];
    int nruns;
    Names fields;
    VEC(int) bufs; /* chunk-level fields */
} StagePrint;

static const char *stage_ref(void *vctx, int id)
{
    PrintCtx *x = vctx;
    return cg_fmt(x->c, "s->%s", uniq(x->c, x->fields, id, buf_name(x->c, x->r->bufs.v[id], -1)));
}

static void collect_stage(void *vctx, int id)
{
    StagePrint *sp_ = vctx;
    for (int i = 0; i < sp_->bufs.n; i++)
        if (sp_->bufs.v[i] == id)
            return;
    vec_push(sp_->bufs, id);
}

static void print_stage_fn(Out *o, CgRankProg *r, StagePrint *st, bool bwd)
{
    Cg *c = o->c;
    FILE *f = o->f;
    CgOp *op = &r->ops[2 * st->chunk + bwd];
    PrintCtx x = {c, r, NULL, NULL, "s", &st->fields};
    fprintf(f, "static void stage%d_%s(int mb, int slot)\n{\n    Stage%d *s = &stage%d[slot];\n"
               "    (void)mb;\n", st->stage, bwd ? "backward" : "forward", st->stage, st->stage);
    int i = 0;
    /* The stage's own statements come before and after the pieces'. */
    for (; i < op->st.n && op->st.v[i].piece < 0; i++)
        fprintf(f, "    %s\n", resolve(c, op->st.v[i].text, stage_ref, &x));
    int seen_pieces = 0;
    for (int k = 0; k < st->nruns; k++) {
        int kk = bwd ? st->nruns - 1 - k : k;
        Run *ru = &st->runs[kk];
        const Kind *kd = &o->kinds.v[ru->kind];
        if (ru->count == 1)
            fprintf(f, "    %s_%s(&s->%s);\n", kd->fn, bwd ? "backward" : "forward", ru->field);
        else if (!bwd)
            fprintf(f, "    for (int l = 0; l < %d; l++)\n        %s_forward(&s->%s[l]);\n",
                    ru->count, kd->fn, ru->field);
        else
            fprintf(f, "    for (int l = %d; l >= 0; l--)\n        %s_backward(&s->%s[l]);\n",
                    ru->count - 1, kd->fn, ru->field);
        seen_pieces += ru->count;
    }
    /* Skip the pieces' statements (checked contiguous), then the stage's tail. */
    int cur = -1, changes = 0;
    for (; i < op->st.n && op->st.v[i].piece >= 0; i++)
        if (op->st.v[i].piece != cur) {
            cur = op->st.v[i].piece;
            changes++;
        }
    if (changes > seen_pieces)
        ir_die("codegen: stage %d's %s interleaves pieces", st->stage, bwd ? "backward" : "forward");
    for (; i < op->st.n; i++) {
        if (op->st.v[i].piece >= 0)
            ir_die("codegen: stage %d's %s has piece statements after its tail", st->stage,
                   bwd ? "backward" : "forward");
        fprintf(f, "    %s\n", resolve(c, op->st.v[i].text, stage_ref, &x));
    }
    fprintf(f, "}\n\n");
}

static void print_stage(Out *o, CgRankProg *r, StagePrint *st)
{
    Cg *c = o->c;
    FILE *f = o->f;
    const PassStage *ps = &c->p->stages[st->stage];
    /* Chunk-level fields. */
    names_init(c, &st->fields, r->bufs.n);
    for (int b = 0; b < 2; b++) {
        CgOp *op = &r->ops[2 * st->chunk + b];
        for (int i = 0; i < op->st.n; i++)
            if (op->st.v[i].piece < 0)
                each_ref(op->st.v[i].text, collect_stage, st);
    }
    fprintf(f, "/* Stage %d (pipeline rank %d, chunk %d): pieces %d..%d (%s .. %s), recompute %s */\n",
            st->stage, r->pp_rank, st->chunk, ps->first_piece, ps->first_piece + ps->npieces - 1,
            c->g->pieces[ps->first_piece].name, c->g->pieces[ps->first_piece + ps->npieces - 1].name,
            pass_recompute_name(ps->recompute));
    fprintf(f, "typedef struct Stage%d {\n", st->stage);
    for (int i = 0; i < st->bufs.n; i++) {
        CgBuf *b = r->bufs.v[st->bufs.v[i]];
        fprintf(f, "    %s *%s; /* %s */\n", ctype(b->type),
                uniq(c, &st->fields, b->id, buf_name(c, b, -1)), b->comment);
    }
    CgIo *lists[2] = {r->send_act[st->chunk].v, r->send_grad[st->chunk].v};
    int nl[2] = {r->send_act[st->chunk].n, r->send_grad[st->chunk].n};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < nl[l]; i++)
            fprintf(f, "    RtReq *%s; /* send in flight from this slot */\n", lists[l][i].req);
    for (int k = 0; k < st->nruns; k++) {
        Run *ru = &st->runs[k];
        const Kind *kd = &o->kinds.v[ru->kind];
        int p0 = st->pieces[ru->first].piece;
        if (ru->count == 1)
            fprintf(f, "    %s %s; /* %s */\n", kd->type, ru->field, c->g->pieces[p0].name);
        else
            fprintf(f, "    %s %s[%d]; /* %s .. %s */\n", kd->type, ru->field, ru->count,
                    c->g->pieces[p0].name, c->g->pieces[p0 + ru->count - 1].name);
    }
    fprintf(f, "} Stage%d;\n\nstatic Stage%d stage%d[%d]; /* one per micro-batch slot */\n\n",
            st->stage, st->stage, st->stage, r->nslots[st->chunk]);
    print_stage_fn(o, r, st, false);
    print_stage_fn(o, r, st, true);
}

/* "A + 123" or "A + 123 + k * 456" for buffer b in slot k. */
static const char *where(Cg *c, CgRankProg *r, const CgBuf *b)
{
    int64_t off = b->offset;
    if (b->kind == CG_B_TEMP)
        off += b->home == CG_HOME_IFACE ? r->iface_base[b->type] : r->ws_base[b->type];
    if (b->kind == CG_B_SLOT)
        return cg_fmt(c, "%s + %lld + (int64_t)k * %lld", arena(b->type), (long long)off,
                      (long long)b->stride);
    return cg_fmt(c, "%s + %lld", arena(b->type), (long long)off);
}

static void print_bind(Out *o, CgRankProg *r, StagePrint *stages, int nst)
{
    Cg *c = o->c;
    FILE *f = o->f;
    fprintf(f, "static void bind_pp%d(rt_act *A, float *F, int32_t *I)\n{\n    (void)A, (void)F, (void)I;\n",
            r->pp_rank);
    for (int j = 0; j < nst; j++) {
        StagePrint *st = &stages[j];
        fprintf(f, "    for (int k = 0; k < %d; k++) {\n        Stage%d *s = &stage%d[k];\n",
                r->nslots[st->chunk], st->stage, st->stage);
        for (int i = 0; i < st->bufs.n; i++) {
            CgBuf *b = r->bufs.v[st->bufs.v[i]];
            fprintf(f, "        s->%s = %s;\n", st->fields.name.v[st->fields.of[b->id]], where(c, r, b));
        }
        for (int k = 0; k < st->nruns; k++) {
            Run *ru = &st->runs[k];
            for (int m = 0; m < ru->count; m++) {
                Piece *pc = &st->pieces[ru->first + m];
                const char *inst = ru->count == 1 ? ru->field : cg_fmt(c, "%s[%d]", ru->field, m);
                for (int i = 0; i < pc->fields.n; i++) {
                    CgBuf *b = r->bufs.v[pc->fields.v[i]];
                    fprintf(f, "        s->%s.%s = %s;\n", inst,
                            pc->fnames.name.v[pc->fnames.of[b->id]], where(c, r, b));
                }
            }
        }
        fprintf(f, "    }\n");
    }
    fprintf(f, "    g_ws_act = A + %lld;\n    g_ws_f32 = F + %lld;\n    g_ws_i32 = I + %lld;\n",
            (long long)r->ws_base[CG_ACT], (long long)r->ws_base[CG_F32], (long long)r->ws_base[CG_I32]);
    fprintf(f, "    g_scratch = A + %lld;\n    g_loss = F + %lld;\n", (long long)r->scratch_base,
            (long long)r->loss_off);
    for (int i = 0; i < r->params.n; i++) {
        int k = r->params.v[i];
        fprintf(f, "    params_pp%d[%d].param = %s;\n", r->pp_rank, i, where(c, r, r->bufs.v[r->pbuf[k]]));
        fprintf(f, "    params_pp%d[%d].grad = %s;\n", r->pp_rank, i, where(c, r, r->bufs.v[r->gbuf[k]]));
        if (r->gsbuf[k] >= 0)
            fprintf(f, "    params_pp%d[%d].grad_shard = %s;\n", r->pp_rank, i,
                    where(c, r, r->bufs.v[r->gsbuf[k]]));
        static const char *const opt[3] = {"master", "m", "v"};
        for (int m = 0; m < 3; m++)
            if (r->opt_off[3 * k + m] >= 0)
                fprintf(f, "    params_pp%d[%d].%s = F + %lld;\n", r->pp_rank, i, opt[m],
                        (long long)r->opt_off[3 * k + m]);
    }
    fprintf(f, "}\n\n");
}

static void print_params(Out *o, CgRankProg *r)
{
    Cg *c = o->c;
    FILE *f = o->f;
    fprintf(f, "/* Parameters held by pipeline rank %d: name, Hugging Face name, transposed, part, "
               "parts, rank, global dims,\n * splitting axis per dim, HF row dims, init, std, decay, "
               "local numel, reduced over axes, ZeRO-sharded, shard,\n * replicated axes, tied group, "
               "primary copy, gradient bucket, cg_grad_ready calls per step. */\n"
               "static CgParam params_pp%d[] = {\n", r->pp_rank, r->pp_rank);
    for (int i = 0; i < r->params.n; i++) {
        const CgParamPlan *pp = &c->params[r->params.v[i]];
        const IrTensor *x = &c->g->tensors[pp->tensor];
        fprintf(f, "    {\"%s\", ", x->name);
        if (x->hf_name)
            fprintf(f, "\"%s\", ", x->hf_name);
        else
            fprintf(f, "NULL, ");
        fprintf(f, "%d, %d, %d, %d, {", x->hf_transposed, x->hf_part, x->hf_nparts, x->rank);
        for (int d = 0; d < CG_MAX_RANK; d++)
            fprintf(f, "%s%lld", d ? ", " : "", d < x->rank ? (long long)c->g->dims[x->dim[d]].size : 0LL);
        fprintf(f, "}, {");
        for (int d = 0; d < CG_MAX_RANK; d++) {
            int ax = -1;
            for (int a = 0; a < c->naxes && d < x->rank; a++)
                if (pp->store.dim[a] == x->dim[d])
                    ax = a;
            fprintf(f, "%s%d", d ? ", " : "", ax);
        }
        int norm_mask = 0;
        for (int a = 0; a < c->naxes; a++)
            if (pp->store.dim[a] < 0 && !(pp->zshard && (pp->pmask >> a & 1)))
                norm_mask |= 1 << a;
        static const char *const init[] = {"0", "RT_INIT_NORMAL", "RT_INIT_ZEROS", "RT_INIT_ONES"};
        int k = r->params.v[i];
        fprintf(f, "}, %d, %s, %.9g, %d, %lld, %d, %d, %lld, %d, %d, %d, %d, %d, 0, 0, 0, 0, 0, 0},\n",
                pp->hf_split, init[x->init], x->init_std, x->rank >= 2, (long long)pp->numel, pp->pmask,
                pp->zshard, (long long)pp->shard, norm_mask, pp->tied, pp->primary == r->pp_rank,
                r->pbucket[k], r->pready[k]);
    }
    if (!r->params.n)
        fprintf(f, "    {0}\n");
    fprintf(f, "};\n\n");
}

/* The buckets as indices into params_ppN (cg_bucket.c). */
static void print_buckets(Out *o, CgRankProg *r)
{
    FILE *f = o->f;
    int *local = ir_alloc(o->c->arena, sizeof(int) * (size_t)(o->c->nparams + 1));
    for (int i = 0; i < r->params.n; i++)
        local[r->params.v[i]] = i;
    int nb = r->bucket_start.n ? r->bucket_start.n - 1 : 0;
    fprintf(f, "/* Gradient buckets of pipeline rank %d (%d, about %lld elements each): reduced as soon "
               "as the last\n * micro-batch's backward completes them, in this order (indices into "
               "params_pp%d). */\n", r->pp_rank, nb, (long long)cg_bucket_elems(o->c), r->pp_rank);
    fprintf(f, "static const int bucket_params_pp%d[] = {", r->pp_rank);
    for (int i = 0; i < r->bucket_params.n; i++)
        fprintf(f, "%s%d", i ? ", " : "", local[r->bucket_params.v[i]]);
    fprintf(f, "%s};\nstatic const int bucket_start_pp%d[] = {", r->bucket_params.n ? "" : "0", r->pp_rank);
    for (int i = 0; i < r->bucket_start.n; i++)
        fprintf(f, "%s%d", i ? ", " : "", r->bucket_start.v[i]);
    fprintf(f, "%s};\n\n", r->bucket_start.n ? "" : "0");
}

static void print_rank(Out *o, CgRankProg *r, StagePrint *stages, int nst)
{
    FILE *f = o->f;
    fprintf(f, "static void wait_sends_pp%d(void)\n{\n", r->pp_rank);
    for (int j = 0; j < nst; j++) {
        StagePrint *st = &stages[j];
        CgIo *lists[2] = {r->send_act[st->chunk].v, r->send_grad[st->chunk].v};
        int nl[2] = {r->send_act[st->chunk].n, r->send_grad[st->chunk].n};
        if (!nl[0] && !nl[1])
            continue;
        fprintf(f, "    for (int k = 0; k < %d; k++) {\n", r->nslots[st->chunk]);
        for (int l = 0; l < 2; l++)
            for (int i = 0; i < nl[l]; i++)
                fprintf(f, "        cg_wait(&stage%d[k].%s);\n", st->stage, lists[l][i].req);
        fprintf(f, "    }\n");
    }
    fprintf(f, "}\n\n");
    fprintf(f, "/* Pipeline rank %d: (backward?, chunk, micro-batch) in order. */\n"
               "static const CgSchedOp sched_pp%d[%d] = {", r->pp_rank, r->pp_rank, r->nsched);
    for (int k = 0; k < r->nsched; k++)
        fprintf(f, "%s{%d, %d, %d}", !k ? "\n    " : k % 8 ? ", " : ",\n    ", r->sched[k].bwd, r->sched[k].chunk,
                r->sched[k].mb);
    fprintf(f, "};\n\n");
    print_params(o, r);
    print_buckets(o, r);
    print_bind(o, r, stages, nst);
}

static void print_rank_entry(Out *o, CgRankProg *r)
{
    Cg *c = o->c;
    FILE *f = o->f;
    fprintf(f, "    {%d, {", r->nchunks);
    for (int j = 0; j < r->nchunks; j++)
        fprintf(f, "%sstage%d_forward", j ? ", " : "", r->stage[j]);
    fprintf(f, "}, {");
    for (int j = 0; j < r->nchunks; j++)
        fprintf(f, "%sstage%d_backward", j ? ", " : "", r->stage[j]);
    fprintf(f, "}, {");
    for (int j = 0; j < r->nchunks; j++)
        fprintf(f, "%s%d", j ? ", " : "", r->nslots[j]);
    fprintf(f, "},\n     sched_pp%d, %d, params_pp%d, %d, bucket_params_pp%d, bucket_start_pp%d, %d,\n"
               "     bind_pp%d, wait_sends_pp%d,\n     {%lld, %lld, %lld},\n     {",
            r->pp_rank, r->nsched, r->pp_rank, r->params.n, r->pp_rank, r->pp_rank,
            r->bucket_start.n ? r->bucket_start.n - 1 : 0, r->pp_rank, r->pp_rank,
            (long long)r->total[CG_ACT], (long long)r->total[CG_F32], (long long)r->total[CG_I32]);
    for (int m = 0; m < CG_MEM_N; m++)
        fprintf(f, "%s{%lld, %lld, %lld}", m ? ", " : "", (long long)r->mem[m][CG_ACT],
                (long long)r->mem[m][CG_F32], (long long)r->mem[m][CG_I32]);
    fprintf(f, "}},\n");
    (void)c;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* A fingerprint of everything a checkpoint's layout depends on. */
static uint64_t plan_hash(const Cg *c)
{
    const PassPlan *p = c->p;
    uint64_t h = 1469598103934665603ull;
    int head[6] = {p->pp, p->v, p->num_micro, p->zero, (int)p->schedule, c->naxes};
    h = fnv(h, head, sizeof head);
    h = fnv(h, p->mesh.size, sizeof p->mesh.size);
    h = fnv(h, &p->mb_seqs, sizeof p->mb_seqs);
    for (int s = 0; s < p->nstages; s++) {
        int st[4] = {p->stages[s].first_piece, p->stages[s].npieces, p->stages[s].pp_rank,
                     (int)p->stages[s].recompute};
        h = fnv(h, st, sizeof st);
    }
    for (int i = 0; i < c->g->nfwd; i++)
        h = fnv(h, p->strategy[i].dim, sizeof p->strategy[i].dim);
    for (int k = 0; k < c->nparams; k++) {
        const IrTensor *x = &c->g->tensors[c->params[k].tensor];
        h = fnv(h, x->name, strlen(x->name));
        h = fnv(h, &c->params[k].numel, sizeof c->params[k].numel);
    }
    return h;
}

static void print_header(Cg *c, FILE *h)
{
    const PassPlan *p = c->p;
    const IrGraph *g = c->g;
    int devices = pass_mesh_devices(&p->mesh);
    fprintf(h, "/* model.h: constants of the generated model and plan (ptdc %s). */\n", PTDC_VERSION);
    fprintf(h, "#ifndef PTDC_MODEL_H\n#define PTDC_MODEL_H\n\n");
    /* Config: the model's constants after overrides, as the .mdl names them. */
    fprintf(h, "/* Config of %s (%s) */\n", g->name, g->path ? g->path : "?");
    for (int i = 0; i < g->nconsts; i++) {
        const IrConst *k = &g->consts[i];
        const char *id = cg_ident(c, k->name);
        char up[256];
        size_t n = 0;
        for (const char *q = id; *q && n + 1 < sizeof up; q++)
            up[n++] = (char)toupper((unsigned char)*q);
        up[n] = 0;
        if (k->is_int)
            fprintf(h, "#define CFG_%s %lldLL\n", up, (long long)k->i);
        else
            fprintf(h, "#define CFG_%s %.17g\n", up, k->f);
    }
    fprintf(h, "\n/* The plan */\n");
    fprintf(h, "#define CG_MODEL \"%s\"\n", g->name);
    fprintf(h, "#define CG_WORLD %d     /* ranks */\n", devices * p->pp);
    fprintf(h, "#define CG_PP %d        /* pipeline ranks */\n", p->pp);
    fprintf(h, "#define CG_DEVICES %d   /* ranks per pipeline rank: the mesh */\n", devices);
    fprintf(h, "#define CG_NAXES %d\n#define CG_MESH0 %d\n#define CG_MESH1 %d\n", c->naxes,
            p->mesh.size[0], p->mesh.size[1]);
    fprintf(h, "#define CG_AXIS0 \"%s\"\n#define CG_AXIS1 \"%s\"\n", c->axis_name[0], c->axis_name[1]);
    fprintf(h, "#define CG_NUM_MICRO %d\n#define CG_MB_SEQS %lld  /* sequences per micro-batch, whole mesh */\n",
            p->num_micro, (long long)p->mb_seqs);
    fprintf(h, "#define CG_GLOBAL_BATCH %lld\n#define CG_SEQ %lld\n#define CG_VOCAB %lld\n",
            (long long)g->global_batch, (long long)g->dims[g->seq_dim].size,
            (long long)c->vocab);
    fprintf(h, "#define CG_ZERO %d\n#define CG_NTIED %d\n", p->zero, c->ntied);
    fprintf(h, "#define CG_MASTER_ALIAS %d /* fp32 masters are the parameters' own blocks */\n",
            cg_master_aliases(c));
    fprintf(h, "#define CG_LOSS_PP %d      /* pipeline rank computing the loss */\n",
            cg_stage_pp(c, c->loss_stage));
    fprintf(h, "#define CG_LOSS_MASK %d    /* mesh axes along which the loss is replicated */\n",
            c->loss_count_mask);
    fprintf(h, "#define CG_PLAN \"%s: pp %d x v %d, mesh %dx%d, %d micro-batches of %lld, ZeRO-%d, %s\"\n",
            g->name, p->pp, p->v, p->mesh.size[0], p->mesh.size[1], p->num_micro,
            (long long)p->mb_seqs, p->zero, p->schedule == PASS_SCHED_1F1B ? "1F1B" : "interleaved 1F1B");
    fprintf(h, "#define CG_PLAN_HASH \"%016llx\"\n", (unsigned long long)plan_hash(c));
    fprintf(h, "\n/* Every GEMM goes through the trainer, which times it when PTDC_TIME_GEMM is set. */\n"
               "#define rt_matmul(...) cg_matmul(__VA_ARGS__)\n"
               "#define rt_matmul_grad(...) cg_matmul_grad(__VA_ARGS__)\n"
               "#define rt_matmul_batch(...) cg_matmul_batch(__VA_ARGS__)\n"
               "#define rt_matmul_grad_batch(...) cg_matmul_grad_batch(__VA_ARGS__)\n");
    fprintf(h, "\n#endif\n");
}

bool cg_print_model(Cg *c, FILE *h, FILE *f)
{
    print_header(c, h);
    const PassPlan *p = c->p;
    Out o = {c, f, {0}, NULL};
    fprintf(f, "/* model.c: %s (%s), generated by ptdc %s. Do not edit.\n *\n", c->g->name,
            c->g->path ? c->g->path : "?", PTDC_VERSION);
    fprintf(f, " * Plan: %d pipeline rank(s)%s x a %d x %d mesh (axis 0 \"%s\", axis 1 \"%s\"),\n",
            p->pp, p->v > 1 ? cg_fmt(c, " with %d chunks each", p->v) : "", p->mesh.size[0],
            p->mesh.size[1], c->axis_name[0], c->axis_name[1]);
    fprintf(f, " * %d micro-batches of %lld sequences per step, ZeRO-%d, %s schedule.\n", p->num_micro,
            (long long)p->mb_seqs, p->zero, p->schedule == PASS_SCHED_1F1B ? "1F1B" : "interleaved 1F1B");
    fprintf(f, " * Sizes are local to one rank: \"/tp\" marks a dim split over that mesh axis,\n"
               " * \"partial over tp\" a tensor holding partial sums over it. */\n");
    fprintf(f, "#include \"trainer.h\"\n\n");
    /* Pieces, per rank and chunk; kinds shared across ranks. */
    StagePrint **stages = ir_alloc(c->arena, sizeof *stages * (size_t)p->pp);
    for (int rk = 0; rk < p->pp; rk++) {
        CgRankProg *r = &c->ranks[rk];
        stages[rk] = ir_alloc(c->arena, sizeof **stages * (size_t)r->nchunks);
        for (int j = 0; j < r->nchunks; j++) {
            StagePrint *st = &stages[rk][j];
            const PassStage *ps = &p->stages[r->stage[j]];
            st->rank = rk;
            st->chunk = j;
            st->stage = r->stage[j];
            st->npieces = ps->npieces;
            st->pieces = ir_alloc(c->arena, sizeof *st->pieces * (size_t)ps->npieces);
            for (int k = 0; k < ps->npieces; k++) {
                Piece *pc = &st->pieces[k];
                pc->piece = ps->first_piece + k;
                pc->rank = rk;
                pc->chunk = j;
                build_piece(c, r, j, pc);
                pc->kind = find_kind(&o, pc);
            }
        }
    }
    fprintf(f, "/* ------------------------------------------------------------------ pieces */\n\n");
    for (int i = 0; i < o.kinds.n; i++)
        print_kind(&o, &o.kinds.v[i]);
    fprintf(f, "/* ------------------------------------------------------------------ stages */\n\n");
    for (int rk = 0; rk < p->pp; rk++) {
        CgRankProg *r = &c->ranks[rk];
        for (int j = 0; j < r->nchunks; j++) {
            StagePrint *st = &stages[rk][j];
            for (int k = 0; k < st->npieces;) {
                int m = k + 1;
                while (m < st->npieces && st->pieces[m].kind == st->pieces[k].kind)
                    m++;
                const char *base = o.kinds.v[st->pieces[k].kind].fn, *field = base;
                for (int q = 2;; q++) {
                    bool used = false;
                    for (int x = 0; x < st->nruns; x++)
                        used |= !strcmp(st->runs[x].field, field);
                    if (!used)
                        break;
                    field = cg_fmt(c, "%s%d", base, q);
                }
                if (st->nruns == 256)
                    ir_die("codegen: more than 256 runs of pieces in one stage");
                st->runs[st->nruns++] = (Run){st->pieces[k].kind, k, m - k, field};
                k = m;
            }
            print_stage(&o, r, st);
        }
    }
    fprintf(f, "/* ------------------------------------------------------- pipeline ranks */\n\n");
    for (int rk = 0; rk < p->pp; rk++)
        print_rank(&o, &c->ranks[rk], stages[rk], c->ranks[rk].nchunks);
    fprintf(f, "const CgRank cg_ranks[CG_PP] = {\n");
    for (int rk = 0; rk < p->pp; rk++)
        print_rank_entry(&o, &c->ranks[rk]);
    fprintf(f, "};\n\nconst unsigned long long cg_tied_mask[] = {");
    for (int i = 0; i < c->ntied; i++)
        fprintf(f, "%s%#llxull", i ? ", " : "", (unsigned long long)c->tied_mask[i]);
    fprintf(f, "%s};\n", c->ntied ? "" : "0");
    cg_hf_print(c, f);
    /* Free what the builders kept on the heap. */
    for (int rk = 0; rk < p->pp; rk++)
        for (int j = 0; j < c->ranks[rk].nchunks; j++) {
            StagePrint *st = &stages[rk][j];
            vec_free(st->bufs);
            vec_free(st->fields.name);
            for (int k = 0; k < st->npieces; k++) {
                vec_free(st->pieces[k].fields);
                vec_free(st->pieces[k].fnames.name);
            }
        }
    vec_free(o.kinds);
    return !ferror(f) && !ferror(h);
}
