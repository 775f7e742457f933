/* main.c: ptdc's pipeline, a straight sequence of passes:
 *   frontend (parse, check, lower) -> ir_verify -> search -> autodiff ->
 *   ir_verify -> codegen (C sources, Makefile, run.sh in DIR) -> plan files
 * Each stage reports user errors itself; any error exits with status 1
 * before an output file is written. The plan files are rendered in memory
 * and moved into DIR only once all of them are complete. */
#include "calibrate.h"
#include "codegen.h"
#include "driver.h"
#include "frontend.h"
#include "ir.h"
#include "passes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- cluster */

/* The --cluster file's values win (docs/cost-model.md); --gpus and
 * --gpus-per-node fill what it leaves unset. Unlike pass_cluster_setup, a
 * GPU count that is not whole nodes is accepted: the search leaves the GPUs
 * no layout can use idle and says so. */
static bool make_cluster(const DrvOptions *o, PassCluster *cl)
{
    memset(cl, 0, sizeof *cl);
    if (o->cluster_file) {
        if (!pass_cluster_load(o->cluster_file, cl))
            return false;
    } else if (!pass_gpu_preset(o->gpu, &cl->gpu)) {
        ir_error(IR_NOLOC, "--gpu: unknown GPU '%s' (presets: %s, or describe it with --cluster FILE)",
                 o->gpu, pass_gpu_preset_names());
        return false;
    }
    return pass_cluster_finish(cl, o->gpus, o->gpus_per_node, false);
}

/* --stack, then each --stack-set on top of it; the stack must run on the
 * cluster's devices. */
static bool make_stack(const DrvOptions *o, const PassCluster *cl, PassStack *st)
{
    if (!pass_stack_setup(st, o->stack))
        return false;
    for (int i = 0; i < o->nstack_sets; i++) {
        char line[512];
        int n = snprintf(line, sizeof line, "%s = %s\n", o->stack_sets[i].name, o->stack_sets[i].value);
        if (n < 0 || (size_t)n >= sizeof line || !pass_stack_apply("--stack-set", line, (size_t)n, st))
            return false;
    }
    if (st->backends && !(st->backends >> cl->gpu.kind & 1)) {
        ir_error(IR_NOLOC, "--stack %s runs on %s, but the cluster's devices are %s", st->name,
                 st->backends >> PASS_DEV_GPU & 1 ? "GPUs" : "CPUs",
                 cl->gpu.kind == PASS_DEV_CPU ? "CPUs" : "GPUs");
        return false;
    }
    return true;
}

static void make_pins(const DrvOptions *o, PassSearchPins *p)
{
    pass_search_pins_none(p);
    p->tp = o->tp;
    p->pp = o->pp;
    p->dp = o->dp;
    p->micro_batch = o->micro_batch;
    if (o->recompute)
        for (int r = PASS_RECOMPUTE_NONE; r <= PASS_RECOMPUTE_FULL; r++)
            if (!strcmp(o->recompute, pass_recompute_name((PassRecompute)r)))
                p->recompute = r;
    p->sp = o->sp;
    p->zero = o->zero;
    if (o->schedule)
        p->schedule = !strcmp(o->schedule, "interleaved") ? PASS_SCHED_INTERLEAVED : PASS_SCHED_1F1B;
    if (o->virtual_stages > 1) {
        p->v = o->virtual_stages;
        p->schedule = PASS_SCHED_INTERLEAVED;
    } else if (o->virtual_stages == 1) {
        p->schedule = PASS_SCHED_1F1B;
    }
}

/* ------------------------------------------------------- output files */

typedef struct {
    const char *name;             /* plan.txt */
    char *text;
    size_t len;
} OutFile;

/* Write every file to a temporary name in dir, then rename them all: a
 * failure leaves no plan file behind (and no temporaries). */
static bool write_all(const char *dir, OutFile *files, int n)
{
    if (!ir_mkdirs(dir))
        return false;
    char **tmp = ir_xcalloc((size_t)n, sizeof *tmp);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) {
        size_t len = strlen(dir) + strlen(files[i].name) + 64;
        tmp[i] = ir_xmalloc(len);
        snprintf(tmp[i], len, "%s/.%s.tmp.%ld", dir, files[i].name, (long)getpid());
        FILE *f = fopen(tmp[i], "w");
        if (!f || fwrite(files[i].text, 1, files[i].len, f) != files[i].len || fflush(f) != 0) {
            ir_error(IR_NOLOC, "cannot write '%s': %s", tmp[i], strerror(errno));
            ok = false;
        }
        if (f && fclose(f) != 0 && ok) {
            ir_error(IR_NOLOC, "cannot write '%s': %s", tmp[i], strerror(errno));
            ok = false;
        }
    }
    for (int i = 0; i < n && ok; i++) {
        size_t len = strlen(dir) + strlen(files[i].name) + 2;
        char *dst = ir_xmalloc(len);
        snprintf(dst, len, "%s/%s", dir, files[i].name);
        if (rename(tmp[i], dst) != 0) {
            ir_error(IR_NOLOC, "cannot write '%s': %s", dst, strerror(errno));
            ok = false;
        }
        free(dst);
    }
    for (int i = 0; i < n; i++) {
        if (tmp[i] && !ok)
            unlink(tmp[i]);
        free(tmp[i]);
    }
    free(tmp);
    return ok;
}

typedef void (*Render)(FILE *, const IrGraph *, const PassCostCtx *, const PassSearchResult *);

static void render(OutFile *f, const char *name, Render fn, const IrGraph *g, const PassCostCtx *c,
                   const PassSearchResult *r)
{
    f->name = name;
    FILE *m = open_memstream(&f->text, &f->len);
    if (!m)
        ir_die("open_memstream: %s", strerror(errno));
    fn(m, g, c, r);
    fclose(m);
}

/* --------------------------------------------------------------- plan */

/* Autodiff, then the per-rank programs of the chosen plan into DIR. */
static bool emit_programs(const DrvOptions *o, IrGraph *g, const PassPlan *p)
{
    if (!pass_autodiff(g))
        return false;
    if (!ir_verify(g, "autodiff"))
        ir_die("autodiff produced an invalid graph for %s", o->model);
    CgOptions co;
    cg_options_default(&co, o->target && !strcmp(o->target, "cpu") ? CG_TARGET_CPU : CG_TARGET_CUDA);
    return cg_emit(g, p, &co, o->out_dir);
}

static int plan(const DrvOptions *o, IrGraph *g)
{
    PassCluster cl;
    if (!make_cluster(o, &cl))
        return 1;
    PassCostCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.cl = &cl;
    if (!make_stack(o, &cl, &ctx.st))
        return 1;
    if (o->out_dir && !o->plan_only && strcmp(ctx.st.name, "ptdc") != 0) {
        ir_error(IR_NOLOC, "-o DIR emits ptdc's programs, but the plan is for the %s stack "
                 "(use --plan-only, or --emit megatron|torchtitan for its flags)", ctx.st.name);
        return 1;
    }
    if (cl.gpu.kind == PASS_DEV_CPU && o->target && strcmp(o->target, "cpu") != 0) {
        ir_error(IR_NOLOC, "--target %s: the cluster file describes CPU ranks, whose programs are "
                 "CPU programs (--target cpu)", o->target);
        return 1;
    }
    DrvOptions oo = *o; /* a CPU cluster's programs are CPU programs */
    if (!oo.target)
        oo.target = cl.gpu.kind == PASS_DEV_CPU ? "cpu" : "cuda";
    o = &oo;
    ctx.attention = o->attention && !strcmp(o->attention, "materialized") ? PASS_ATTN_MATERIALIZED
                                                                          : PASS_ATTN_FLASH;
    PassSearchOpts so;
    memset(&so, 0, sizeof so);
    make_pins(o, &so.pins);
    so.gpus = cl.ngpus;
    so.global_batch = g->global_batch;
    so.ilp_time_limit_s = o->ilp_time_limit;
    so.keep = o->explain ? 10 : 1;
    IrGraph *skel = pass_search_skeleton(g->arena, g);
    so.skeleton = skel;
    PassIlpCache *cache = pass_ilp_cache_new();
    PassSearchResult r;
    int rc = 1;
    if (!pass_search(&ctx, g, &so, cache, &r))
        goto out_cache;
    if (!r.found) {
        pass_search_explain_nofit(&ctx, g, &so, cache, &r);
        goto out;
    }
    char note[512];
    if (pass_search_idle_note(&r, cl.gpus_per_node, note, sizeof note))
        ir_note(IR_NOLOC, "%s", note);
    bool pinned = pass_search_pinned_fully(&so.pins);
    bool emit_plan = o->emit && !strcmp(o->emit, "plan");
    if (emit_plan || ((o->plan_only || o->json) && !o->out_dir)) {
        const PassSearchAlt *a = &r.alt[0];
        if (pinned && !emit_plan) /* evaluating a layout by hand */
            (o->json ? pass_prediction_print_json : pass_prediction_print_text)(stdout, g, &a->plan,
                                                                              &ctx, &a->pred);
        else
            (o->json ? pass_plan_print_json : pass_plan_print_text)(stdout, g, &ctx, &r);
    }
    if (o->explain)
        pass_plan_explain(stdout, &ctx, g, &so, cache, &r);
    if (o->out_dir && !emit_plan) {
        OutFile files[3];
        render(&files[0], "plan.txt", pass_plan_print_text, g, &ctx, &r);
        render(&files[1], "plan.json", pass_plan_print_json, g, &ctx, &r);
        render(&files[2], "plan.svg", pass_plan_print_svg, g, &ctx, &r);
        /* Programs first: cg_emit writes DIR whole or not at all, so a
         * failure leaves no plan files behind either. */
        bool ok = o->plan_only || emit_programs(o, g, &r.alt[0].plan);
        ok = ok && write_all(o->out_dir, files, 3);
        for (int i = 0; i < 3; i++)
            free(files[i].text);
        if (!ok)
            goto out;
        char lay[256];
        fprintf(stderr, "ptdc: wrote %s/plan.txt, plan.json, plan.svg: %s, step %.3f s, MFU %.1f%%\n",
                o->out_dir, pass_layout_str(&r.alt[0].layout, lay, sizeof lay),
                r.alt[0].pred.step_time_s, 100 * r.alt[0].pred.mfu);
    }
    rc = 0;
out:
    pass_search_result_free(&r);
out_cache:
    pass_ilp_cache_free(cache);
    pass_search_skeleton_free(skel);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "calibrate"))
        return cal_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "import-hf"))
        return drv_import_hf(argc - 1, argv + 1);
    DrvOptions o;
    if (!drv_parse_options(argc, argv, &o)) {
        drv_free_options(&o);
        return 1;
    }
    IrArena *arena = ir_arena_new();
    FeSet *sets = ir_alloc(arena, sizeof(FeSet) * (size_t)(o.nsets + 1));
    for (int i = 0; i < o.nsets; i++)
        sets[i] = (FeSet){o.sets[i].name, o.sets[i].value};
    int rc = 1;
    IrGraph *g = fe_compile_file(arena, o.model, sets, o.nsets, o.global_batch);
    if (!g)
        goto out;
    if (!ir_verify(g, "frontend"))
        ir_die("the frontend produced an invalid graph for %s", o.model);
    bool planning = o.out_dir || o.plan_only || o.explain || (o.json && !o.emit) ||
                    (o.emit && !strcmp(o.emit, "plan"));
    if (o.emit && !strcmp(o.emit, "ir")) {
        ir_print(stdout, g);
    } else if (o.emit && !strcmp(o.emit, "ir-grad")) {
        if (!pass_autodiff(g))
            goto out;
        if (!ir_verify(g, "autodiff"))
            ir_die("autodiff produced an invalid graph for %s", o.model);
        ir_print(stdout, g);
    } else if (planning) {
        if (plan(&o, g) != 0)
            goto out;
    } else {
        ir_print_summary(stdout, g);
    }
    rc = 0;
out:
    if (g)
        ir_graph_free(g);
    ir_arena_free(arena);
    drv_free_options(&o);
    return rc;
}
