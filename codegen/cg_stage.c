/* cg_stage.c: a stage's struct (one per micro-batch slot) and its forward
 * and backward functions (and a split schedule's weight gradients, wgrad): the stage's own statements (waits, receives,
 * loads, sends) around calls of its pieces' functions, a run of pieces of
 * one kind as a loop over an array field. Sizes print as the stage's
 * constants (STAGE1_...). */
#include "cg_print.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Runs of consecutive pieces of one kind, each an array field named after
 * its kind. */
void cg_stage_runs(Out *o, StagePrint *st)
{
    for (int k = 0; k < st->npieces;) {
        int m = k + 1;
        while (m < st->npieces && st->pieces[m].kind == st->pieces[k].kind)
            m++;
        const char *base = o->kinds.v[st->pieces[k].kind].fn, *field = base;
        for (int q = 2;; q++) {
            bool used = false;
            for (int x = 0; x < st->nruns; x++)
                used |= !strcmp(st->runs[x].field, field);
            if (!used)
                break;
            field = cg_fmt(o->c, "%s%d", base, q);
        }
        if (st->nruns == 256)
            ir_die("codegen: more than 256 runs of pieces in one stage");
        st->runs[st->nruns++] = (Run){st->pieces[k].kind, k, m - k, field};
        k = m;
    }
}

typedef struct SCtx {
    Cg *c;
    CgRankProg *r;
    StagePrint *st;
} SCtx;

static const char *stage_ref(void *vctx, int id)
{
    SCtx *x = vctx;
    const CgBuf *b = x->r->bufs.v[id];
    const char *f = cg_fmt(x->c, "s->%s", cg_uniq(x->c, &x->st->fields, id, cg_buf_name(x->c, b, -1)));
    return b->kind == CG_B_WSLOT ? cg_wslot_ref(x->c, b, f) : f;
}

static void collect_stage(void *vctx, int id)
{
    StagePrint *st = vctx;
    for (int i = 0; i < st->bufs.n; i++)
        if (st->bufs.v[i] == id)
            return;
    vec_push(st->bufs, id);
}

static const char *const op_fn[CG_NOPKINDS] = {"forward", "backward", "wgrad"};

static void print_stage_fn(Out *o, CgRankProg *r, StagePrint *st, int kind, CgConsts *k, FILE *f)
{
    Cg *c = o->c;
    CgOp *op = CG_OP(r, st->chunk, kind);
    SCtx x = {c, r, st};
    bool bwd = kind != PLAN_OP_F;
    const char *fn = op_fn[kind];
    fprintf(f, "static void stage%d_%s(int mb, int slot)\n{\n    Stage%d *s = &stage%d[slot];\n"
               "    (void)mb;\n", st->stage, fn, st->stage, st->stage);
    /* A split schedule's B and W take micro-batch mb's copies in the W slots
     * (cg_sched.c: slot mb mod the most W waiting; cg_mem.c: a block each). */
    for (int t = 0; bwd && t < CG_NTYPES; t++)
        if (r->wblock[st->chunk][t])
            fprintf(f, "    %s = (int64_t)(mb %% %d) * %lld; /* W slot */\n", cg_wslot_var(t),
                    r->nwslots[st->chunk], (long long)r->wblock[st->chunk][t]);
    int i = 0;
    /* The stage's own statements come before and after the pieces'. */
    for (; i < op->st.n && op->st.v[i].piece < 0; i++)
        fprintf(f, "    %s\n", cg_stmt_text(c, &op->st.v[i], k, stage_ref, &x));
    int seen_pieces = 0;
    for (int q = 0; q < st->nruns; q++) {
        Run *ru = &st->runs[bwd ? st->nruns - 1 - q : q];
        const Kind *kd = &o->kinds.v[ru->kind];
        if (ru->count == 1)
            fprintf(f, "    %s_%s(&s->%s);\n", kd->fn, fn, ru->field);
        else if (!bwd)
            fprintf(f, "    for (int l = 0; l < %d; l++)\n        %s_forward(&s->%s[l]);\n",
                    ru->count, kd->fn, ru->field);
        else
            fprintf(f, "    for (int l = %d; l >= 0; l--)\n        %s_%s(&s->%s[l]);\n",
                    ru->count - 1, kd->fn, fn, ru->field);
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
        ir_die("codegen: stage %d's %s interleaves pieces", st->stage, fn);
    for (; i < op->st.n; i++) {
        if (op->st.v[i].piece >= 0)
            ir_die("codegen: stage %d's %s has piece statements after its tail", st->stage, fn);
        fprintf(f, "    %s\n", cg_stmt_text(c, &op->st.v[i], k, stage_ref, &x));
    }
    fprintf(f, "}\n\n");
}

void cg_print_stage(Out *o, CgRankProg *r, StagePrint *st)
{
    Cg *c = o->c;
    FILE *f = o->f;
    const PlanStage *ps = &c->p->stages[st->stage];
    /* Chunk-level fields, named in struct order before the functions use them. */
    cg_names_init(c, &st->fields, r->bufs.n);
    for (int b = 0; b < CG_NOPKINDS; b++) {
        CgOp *op = CG_OP(r, st->chunk, b);
        for (int i = 0; i < op->st.n; i++)
            if (op->st.v[i].piece < 0)
                cg_stmt_bufs(&op->st.v[i], collect_stage, st);
    }
    for (int i = 0; i < st->bufs.n; i++) {
        CgBuf *b = r->bufs.v[st->bufs.v[i]];
        cg_uniq(c, &st->fields, b->id, cg_buf_name(c, b, -1));
    }
    /* The functions first, so the constants they name come before them. */
    CgConsts k;
    memset(&k, 0, sizeof k);
    k.prefix = cg_fmt(c, "STAGE%d_", st->stage);
    char *fns = NULL;
    size_t nfns = 0;
    FILE *mf = open_memstream(&fns, &nfns);
    if (!mf)
        ir_die("codegen: out of memory");
    print_stage_fn(o, r, st, PLAN_OP_F, &k, mf);
    print_stage_fn(o, r, st, PLAN_OP_B, &k, mf);
    if (plan_schedule_split(c->p->schedule))
        print_stage_fn(o, r, st, PLAN_OP_W, &k, mf);
    fclose(mf);
    fprintf(f, "/* Stage %d (pipeline rank %d, chunk %d): pieces %d..%d (%s .. %s), recompute %s */\n",
            st->stage, r->pp_rank, st->chunk, ps->first_piece, ps->first_piece + ps->npieces - 1,
            c->g->pieces[ps->first_piece].name, c->g->pieces[ps->first_piece + ps->npieces - 1].name,
            plan_recompute_name(ps->recompute));
    cg_consts_print(&k, f);
    fprintf(f, "typedef struct Stage%d {\n", st->stage);
    for (int i = 0; i < st->bufs.n; i++) {
        CgBuf *b = r->bufs.v[st->bufs.v[i]];
        fprintf(f, "    %s *%s; /* %s */\n", cg_ctype(b->type), st->fields.name.v[st->fields.of[b->id]],
                b->comment);
    }
    CgIo *lists[2] = {r->send_act[st->chunk].v, r->send_grad[st->chunk].v};
    int nl[2] = {r->send_act[st->chunk].n, r->send_grad[st->chunk].n};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < nl[l]; i++)
            fprintf(f, "    RtReq *%s; /* send in flight from this slot */\n", lists[l][i].req);
    for (int q = 0; q < st->nruns; q++) {
        Run *ru = &st->runs[q];
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
    fputs(fns, f);
    free(fns);
    vec_free(k.v);
}
