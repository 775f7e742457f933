/* cg_gen.c: test tool. cg_gen MODEL.mdl LAYOUT DIR [--set NAME=VALUE ...]
 * [--precision bf16|fp8] [--bf16-layers FIRST,LAST]
 * compiles a model, plans it, differentiates it and writes the training
 * program to DIR with cg_emit. The plan: the test-only Megatron builder for
 * LAYOUT (layout.h), or with LAYOUT "search-..." the planner itself
 * (pass_search on an A100 cluster of the layout's size, every choice pinned
 * as the driver pins them; an "l..." item is --pp-layers), so its ILP
 * strategies and pinned splits are tested too. With
 * --plan-set NAME=VALUE the planner sees the model at other sizes (the same
 * graph: nodes and dims alike, only sizes differ), and its plan runs at the
 * model's own: realistic strategies on a model a CPU trains in seconds.
 * Gradient buckets of 16384 elements (CG_BUCKET_ELEMS to change; 0: the
 * target's), so the tiny models' steps reduce several buckets while their
 * backward runs. */
#include "codegen.h"
#include "frontend.h"
#include "layout.h"
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool search_plan(const IrGraph *g, const Layout *l, PassSearchResult *r)
{
    static PassCluster cl;
    memset(&cl, 0, sizeof cl);
    pass_gpu_preset("a100-80gb", &cl.gpu);
    cl.ngpus = l->dp * l->cp * l->tp * l->pp;
    cl.gpus_per_node = 8;
    static PassCostCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.cl = &cl;
    ctx.attention = PLAN_ATTN_FLASH;
    PassSearchOpts so;
    memset(&so, 0, sizeof so);
    pass_search_pins_none(&so.pins);
    so.pins.tp = l->tp;
    so.pins.pp = l->pp;
    so.pins.dp = l->dp;
    so.pins.cp = l->cp;
    so.pins.micro_batch = (int)(g->global_batch / l->micro / l->dp);
    so.pins.recompute = (int)l->recompute;
    so.pins.sp = l->sp;
    so.pins.zero = l->zero;
    so.pins.schedule = l->v > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B;
    so.pins.v = l->v;
    so.ep = l->ep_fold; /* epN: --ep N, EP below DP (0: the search chooses) */
    so.pp_layers = l->layers; /* --pp-layers */
    so.pp_nlayers = l->nlayers;
    so.gpus = cl.ngpus;
    so.global_batch = g->global_batch;
    IrGraph *skel = pass_search_skeleton(g->arena, g); /* as the driver plans */
    so.skeleton = skel;
    PassIlpCache *cache = pass_ilp_cache_new();
    bool ok = pass_search(&ctx, g, &so, cache, r) && r->found;
    if (!ok)
        fprintf(stderr, "cg_gen: the planner found no plan for this layout\n");
    pass_ilp_cache_free(cache);
    pass_search_skeleton_free(skel);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: cg_gen MODEL.mdl LAYOUT DIR [--set NAME=VALUE ...] [--cuda] [--precision P] [--bf16-layers F,L]\n");
        return 2;
    }
    FeSet sets[16], psets[32];
    int nsets = 0, npsets = 0;
    CgTarget target = CG_TARGET_CPU;
    int prec = PLAN_PREC_BF16, bf16_first = 0, bf16_last = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--cuda")) {
            target = CG_TARGET_CUDA;
            continue;
        }
        if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
            if ((prec = plan_precision_parse(argv[++i])) < 0)
                return 2;
            continue;
        }
        if (!strcmp(argv[i], "--bf16-layers") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d,%d", &bf16_first, &bf16_last) != 2)
                return 2;
            continue;
        }
        bool plan_set = !strcmp(argv[i], "--plan-set");
        if ((!plan_set && strcmp(argv[i], "--set")) || i + 1 >= argc || nsets == 16 || npsets == 16) {
            fprintf(stderr, "cg_gen: bad argument '%s'\n", argv[i]);
            return 2;
        }
        char *eq = strchr(argv[++i], '=');
        if (!eq)
            return 2;
        *eq = 0;
        if (plan_set)
            psets[npsets++] = (FeSet){argv[i], eq + 1};
        else
            sets[nsets++] = (FeSet){argv[i], eq + 1};
    }
    Layout l;
    bool search = !strncmp(argv[2], "search-", 7);
    if (!layout_parse(search ? argv[2] + 7 : argv[2], &l))
        return 2;
    IrArena *a = ir_arena_new();
    int rc = 1;
    IrGraph *g = fe_compile_file(a, argv[1], sets, nsets, 0), *pg = NULL;
    if (!g)
        goto out;
    if (!ir_verify(g, "frontend"))
        goto out;
    Plan plan;
    PassSearchResult r;
    memset(&r, 0, sizeof r);
    pg = g; /* the graph the planner sees */
    if (npsets) {
        for (int i = 0; i < nsets; i++)
            psets[npsets++] = sets[i];
        pg = fe_compile_file(a, argv[1], psets, npsets, 0);
        if (!pg || pg->nfwd != g->nfwd || pg->ndims != g->ndims || pg->npieces != g->npieces) {
            fprintf(stderr, "cg_gen: --plan-set must keep the graph's structure\n");
            goto out;
        }
    }
    if (search) {
        if (!search_plan(pg, &l, &r))
            goto out;
        plan = r.alt[0].plan;
        plan.moe_wslot = l.wslot_pct / 100.0; /* "wsN", as layout_plan */
    } else if (!layout_plan(g, &l, &plan)) {
        goto out;
    }
    /* The linear layers' format, as the driver's search records it
     * (--precision, the stack's lp_bf16_first_layers and _last_layers). */
    plan.precision = (PlanPrecision)prec;
    plan.lp_bf16_first = bf16_first;
    plan.lp_bf16_last = bf16_last;
    if (getenv("CG_GEN_PLAN"))
        for (int i = 0; i < g->nfwd; i++) {
            const IrNode *n = &g->nodes[i];
            fprintf(stderr, "node %3d %-14s %-24s", i, ir_ops[n->op].name, g->tensors[n->out[0]].name);
            for (int a = 0; a < plan.mesh.naxes; a++)
                fprintf(stderr, " axis%d:%s%s", a, plan.strategy[i].dim[a] >= 0 ? g->dims[plan.strategy[i].dim[a]].name : "-",
                        plan.strategy[i].xchg >> a & 1 ? "+experts" : "");
            fprintf(stderr, "\n");
        }
    /* Autodiff after planning, as the driver does: the plan's strategies are
     * per forward node, which backward nodes follow. */
    if (!pass_autodiff(g) || !ir_verify(g, "autodiff"))
        goto out;
    CgOptions o;
    cg_options_default(&o, target);
    /* Several gradient buckets per step even for the tiny models (about
     * 110K elements), issued while the backward runs; CG_BUCKET_ELEMS=0
     * gives the target's own size. */
    const char *be = getenv("CG_BUCKET_ELEMS");
    o.bucket_elems = be ? atoll(be) : 16384;
    if (cg_emit(g, &plan, &o, argv[3]))
        rc = 0;
    if (search)
        pass_search_result_free(&r);
out:
    if (pg && pg != g)
        ir_graph_free(pg);
    if (g)
        ir_graph_free(g);
    ir_arena_free(a);
    return rc;
}
