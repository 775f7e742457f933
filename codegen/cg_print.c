/* cg_print.c: model.h and model.c, the generated half of a training program.
 *
 * model.c holds one struct and forward/backward pair per kind of piece
 * (cg_piece.c), the stages (cg_stage.c), and per pipeline rank the tables
 * printed here: its schedule, parameters, gradient buckets and the bind
 * function that points every field into the rank's arena (cg_mem.c). */
#include "cg_print.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *arena(int t) { return t == CG_ACT ? "A" : t == CG_F32 ? "F" : "I"; }

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
               "parts, rank, global dims,\n * splitting axes per dim (bit a: axis a, nested in axis order), HF row dims, init, std, decay, "
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
        fprintf(f, "%d, %d, %d, %d, %d, {", x->hf_transposed, x->hf_part, x->hf_nparts, x->hf_interleaved,
                x->rank);
        for (int d = 0; d < CG_MAX_RANK; d++)
            fprintf(f, "%s%lld", d ? ", " : "", d < x->rank ? (long long)c->g->dims[x->dim[d]].size : 0LL);
        fprintf(f, "}, {");
        for (int d = 0; d < CG_MAX_RANK; d++) {
            int axes = 0; /* nested in axis order (cg_analyse keeps parameters so) */
            for (int a = 0; a < c->naxes && d < x->rank; a++)
                if (pp->store.dim[a] == x->dim[d])
                    axes |= 1 << a;
            fprintf(f, "%s%d", d ? ", " : "", axes);
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
    fprintf(f, plan_schedule_split(o->c->p->schedule)
                   ? "/* Pipeline rank %d: (0 forward, 1 backward B, 2 weight gradients W; chunk, "
                     "micro-batch) in order. */\n"
                   : "/* Pipeline rank %d: (backward?, chunk, micro-batch) in order. */\n", r->pp_rank);
    fprintf(f, "static const CgSchedOp sched_pp%d[%d] = {", r->pp_rank, r->nsched);
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
        fprintf(f, "%s%s", j ? ", " : "",
                plan_schedule_split(c->p->schedule) ? cg_fmt(c, "stage%d_wgrad", r->stage[j]) : "NULL");
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
    const Plan *p = c->p;
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

/* The distinct routers' attributes (docs/moe.md), which rt_route_fwd and
 * rt_route_bwd take as &cg_routes[i] (cg_route_index). */
static void print_routes(Cg *c, FILE *f)
{
    const IrGraph *g = c->g;
    int n = 0;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *r = &g->nodes[i];
        if (r->op != IR_OP_ROUTE || cg_route_index(g, r) != n)
            continue;
        const IrRoute *a = &r->attr.route;
        fprintf(f, "%s{%lld, %d, %lld, %lld, %d, %s, %s, %s, %s}", n ? ",\n    " :
                "/* topk, sigmoid, groups, group_topk, norm, scale, capacity, aux, zloss */\n"
                "static const RtRoute cg_routes[] = {\n    ",
                (long long)a->topk, a->score == IR_SCORE_SIGMOID, (long long)a->groups,
                (long long)a->group_topk, a->norm ? 1 : 0, cg_a_flt(c, a->scale > 0 ? a->scale : 1.0).sym,
                cg_a_flt(c, a->capacity).sym, cg_a_flt(c, a->aux).sym, cg_a_flt(c, a->zloss).sym);
        n++;
    }
    if (n)
        fprintf(f, "\n};\n\n");
}

static void print_header(Cg *c, FILE *h)
{
    const Plan *p = c->p;
    const IrGraph *g = c->g;
    int devices = plan_mesh_devices(&p->mesh);
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
    /* The third axis (context parallelism's dp x cp x tp mesh); size 1 and
     * unused on smaller meshes. */
    fprintf(h, "#define CG_MESH2 %d\n#define CG_AXIS2 \"%s\"\n", c->naxes > 2 ? p->mesh.size[2] : 1,
            c->naxes > 2 ? c->axis_name[2] : "unused");
    /* Context parallelism: the sequence's rows are in the load-balanced
     * order across the program when CG_CP_BALANCED (plan/context.c). */
    int cp = plan_degree(p, PLAN_DIM_CP);
    fprintf(h, "#define CG_CP %d        /* context-parallel ranks */\n#define CG_CP_BALANCED %d\n", cp,
            cp > 1 && plan_cp_balanced(g));
    fprintf(h, "#define CG_CP_AXIS %d   /* their mesh axis (-1: none) */\n", cp > 1 ? p->axis[PLAN_DIM_CP] : -1);
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
    /* A third axis (dp x cp x tp) shows only where there is one. */
    const char *mesh2 = c->naxes > 2 ? cg_fmt(c, "x%d", p->mesh.size[2]) : "";
    fprintf(h, "#define CG_PLAN \"%s: pp %d x v %d, mesh %dx%d%s, %d micro-batches of %lld, ZeRO-%d, %s\"\n",
            g->name, p->pp, p->v, p->mesh.size[0], p->mesh.size[1], mesh2, p->num_micro,
            (long long)p->mb_seqs, p->zero, plan_schedule_title(p->schedule));
    fprintf(h, "#define CG_PLAN_HASH \"%016llx\"\n", (unsigned long long)plan_hash(c));
    fprintf(h, "\n/* Every GEMM goes through the trainer, which times it when PTDC_TIME_GEMM is set. */\n"
               "#define rt_matmul(...) cg_matmul(__VA_ARGS__)\n"
               "#define rt_matmul_grad(...) cg_matmul_grad(__VA_ARGS__)\n"
               "#define rt_matmul_batch(...) cg_matmul_batch(__VA_ARGS__)\n"
               "#define rt_matmul_grad_batch(...) cg_matmul_grad_batch(__VA_ARGS__)\n");
    fprintf(h, "\n/* Call arguments model.c names: the size of no dims (a call working along\n"
               " * a tensor's first or last dim), a batch's GEMM count, the tag of boundary\n"
               " * tensor i after stage s (or its gradient). */\n"
               "#define CG_NO_DIMS 1\n"
               "#define CG_COUNT(a) ((int)(sizeof(a) / sizeof *(a)))\n"
               "#define CG_TAG(s, i, grad) (((s) * 64 + (i)) * 2 + (grad))\n");
    fprintf(h, "\n#endif\n");
}

bool cg_print_model(Cg *c, FILE *h, FILE *f)
{
    print_header(c, h);
    const Plan *p = c->p;
    Out o = {c, f, {0}};
    fprintf(f, "/* model.c: %s (%s), generated by ptdc %s. Do not edit.\n *\n", c->g->name,
            c->g->path ? c->g->path : "?", PTDC_VERSION);
    if (c->naxes > 2) /* dp x cp x tp */
        fprintf(f, " * Plan: %d pipeline rank(s)%s x a %d x %d x %d mesh (axis 0 \"%s\", axis 1 \"%s\",\n"
                   " * axis 2 \"%s\"),\n",
                p->pp, p->v > 1 ? cg_fmt(c, " with %d chunks each", p->v) : "", p->mesh.size[0],
                p->mesh.size[1], p->mesh.size[2], c->axis_name[0], c->axis_name[1], c->axis_name[2]);
    else
        fprintf(f, " * Plan: %d pipeline rank(s)%s x a %d x %d mesh (axis 0 \"%s\", axis 1 \"%s\"),\n",
                p->pp, p->v > 1 ? cg_fmt(c, " with %d chunks each", p->v) : "", p->mesh.size[0],
                p->mesh.size[1], c->axis_name[0], c->axis_name[1]);
    fprintf(f, " * %d micro-batches of %lld sequences per step, ZeRO-%d, %s schedule.\n", p->num_micro,
            (long long)p->mb_seqs, p->zero, plan_schedule_title(p->schedule));
    fprintf(f, " * Sizes are local to one rank: \"/tp\" marks a dim split over that mesh axis,\n"
               " * \"partial over tp\" a tensor holding partial sums over it. */\n");
    fprintf(f, "#include \"trainer.h\"\n\n");
    /* Per arena with W slots: where the copies of the micro-batch whose
     * backward (B) or weight gradients (W) run begin (cg_stage.c sets it). */
    for (int t = 0; t < CG_NTYPES; t++) {
        bool used = false;
        for (int rk = 0; rk < p->pp; rk++)
            for (int j = 0; j < c->ranks[rk].nchunks; j++)
                used |= c->ranks[rk].wblock[j][t] > 0;
        if (used)
            fprintf(f, "static int64_t %s; /* elements from each W slot field to this micro-batch's copy */\n",
                    cg_wslot_var(t));
    }
    print_routes(c, f);
    /* Pieces, per rank and chunk; kinds shared across ranks. */
    StagePrint **stages = ir_alloc(c->arena, sizeof *stages * (size_t)p->pp);
    for (int rk = 0; rk < p->pp; rk++) {
        CgRankProg *r = &c->ranks[rk];
        stages[rk] = ir_alloc(c->arena, sizeof **stages * (size_t)r->nchunks);
        for (int j = 0; j < r->nchunks; j++) {
            StagePrint *st = &stages[rk][j];
            const PlanStage *ps = &p->stages[r->stage[j]];
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
                cg_build_piece(c, r, j, pc);
                pc->kind = cg_find_kind(&o, pc);
            }
        }
    }
    fprintf(f, "/* ------------------------------------------------------------------ pieces */\n\n");
    for (int i = 0; i < o.kinds.n; i++)
        cg_print_kind(&o, &o.kinds.v[i]);
    fprintf(f, "/* ------------------------------------------------------------------ stages */\n\n");
    for (int rk = 0; rk < p->pp; rk++) {
        CgRankProg *r = &c->ranks[rk];
        for (int j = 0; j < r->nchunks; j++) {
            StagePrint *st = &stages[rk][j];
            cg_stage_runs(&o, st);
            cg_print_stage(&o, r, st);
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
                for (int q = 0; q < CG_NOPKINDS; q++)
                    vec_free(st->pieces[k].locals[q].name);
            }
        }
    for (int i = 0; i < o.kinds.n; i++)
        vec_free(o.kinds.v[i].consts.v);
    vec_free(o.kinds);
    return !ferror(f) && !ferror(h);
}
