/* main.c: ptdc's pipeline, a straight sequence of passes:
 *   frontend (parse, check, lower) -> ir_verify -> search -> autodiff ->
 *   ir_verify -> codegen (C sources, Makefile, run.sh in DIR) -> plan files
 * (under a framework stack a pinned layout is the framework's plan, and
 * --emit megatron|torchtitan prints its configuration: frame.c). Each
 * stage reports user errors itself; any error exits with its status
 * (driver.h: 1 invalid, 2 does not fit, 3 cannot be expressed) before an
 * output file is written, and with --json as a JSON answer (answer.c). The plan files are rendered in memory
 * and moved into DIR only once all of them are complete. */
#include "calibrate.h"
#include "codegen.h"
#include "driver.h"
#include "frontend.h"
#include "ir.h"
#include "passes.h"
#include "report.h"

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

/* --stack NAME (or the one --emit implies), then each --stack-set on top of
 * it; the stack must run on the cluster's devices. */
static bool make_stack(const DrvOptions *o, const char *name, const PassCluster *cl, PassStack *st)
{
    if (!pass_stack_setup(st, name))
        return false;
    for (int i = 0; i < o->nstack_sets; i++) {
        char line[512];
        int n = snprintf(line, sizeof line, "%s = %s\n", o->stack_sets[i].name, o->stack_sets[i].value);
        if (n < 0 || (size_t)n >= sizeof line || !pass_stack_apply("--stack-set", line, (size_t)n, st))
            return false;
    }
    /* --tp-overlap pins what ptdc's programs do, so their stack prices it. */
    if (o->tp_overlap >= 0 && st->ref_stack) {
        ir_error(IR_NOLOC, "--tp-overlap chunks ptdc's own programs, and the %s stack runs another "
                 "framework's (its key tp_overlap says how: --stack-set tp_overlap=...)", st->name);
        return false;
    }
    if (o->tp_overlap >= 0)
        st->tp_overlap = o->tp_overlap ? PASS_TP_OVERLAP_CHUNKED : PASS_TP_OVERLAP_NONE;
    if (cl && st->backends && !(st->backends >> cl->gpu.kind & 1)) {
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
    p->cp = o->cp;
    p->micro_batch = o->micro_batch;
    if (o->recompute)
        for (int r = PLAN_RECOMPUTE_NONE; r < PLAN_RECOMPUTE_COUNT; r++)
            if (!strcmp(o->recompute, plan_recompute_name((PlanRecompute)r)))
                p->recompute = r;
    p->sp = o->sp;
    p->zero = o->zero;
    /* --precision auto searches the formats; a named one is the context's
     * (plan()); none: bf16. */
    if (o->precision)
        p->precision = !strcmp(o->precision, "auto") ? -1 : plan_precision_parse(o->precision);
    if (o->schedule)
        p->schedule = plan_schedule_parse(o->schedule);
    if (o->virtual_stages > 1) {
        p->v = o->virtual_stages;
        p->schedule = PLAN_SCHED_INTERLEAVED;
    } else if (o->virtual_stages == 1) {
        p->schedule = PLAN_SCHED_1F1B;
    }
    /* A layout pinned in every other part is evaluated as given: without
     * --cp, no context parallelism. */
    if (!p->cp && pass_search_pinned_fully(p))
        p->cp = 1;
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
static bool emit_programs(const DrvOptions *o, IrGraph *g, const Plan *p)
{
    if (!pass_autodiff(g))
        return false;
    if (!ir_verify(g, "autodiff"))
        ir_die("autodiff produced an invalid graph for %s", o->model);
    CgOptions co;
    cg_options_default(&co, o->target && !strcmp(o->target, "cpu") ? CG_TARGET_CPU : CG_TARGET_CUDA);
    return cg_emit(g, p, &co, o->out_dir);
}

/* ---------------------------------------------------------------- modes */

/* What one run of ptdc does, decided once (decide_mode) and run by the
 * table `modes`. --explain adds the alternatives to any mode that searches
 * (plan, layout, plan files, programs); alone it is the explain mode. */
typedef enum {
    MODE_CALIBRATE,   /* ptdc calibrate ...: measure the machine (calibrate/) */
    MODE_IMPORT_HF,   /* ptdc import-hf ...: a Hugging Face config as a .mdl */
    MODE_STACK,       /* --emit stack: the stack as a file; no model */
    MODE_SUMMARY,     /* the model's summary: no output asked for, or --emit summary */
    MODE_IR,          /* --emit ir: the operator graph */
    MODE_IR_GRAD,     /* --emit ir-grad: with the backward graph */
    MODE_FRAMEWORK,   /* --emit megatron|torchtitan: the framework's configuration */
    MODE_PLAN,        /* --emit plan, or --plan-only / --json without -o: the plan on stdout */
    MODE_LAYOUT,      /* as MODE_PLAN for a fully pinned layout: its prediction */
    MODE_EXPLAIN,     /* --explain alone: the ten best plans and why others lose */
    MODE_PLAN_FILES,  /* -o DIR --plan-only: plan.txt, plan.json, plan.svg */
    MODE_PROGRAMS,    /* -o DIR: the plan files and every rank's program */
    MODE_COUNT
} Mode;

/* The one place the mode is decided, from the parsed options (the
 * subcommands by their first word, before: main). The order is the
 * precedence: --emit's choice first, then -o DIR, then printing. */
static Mode decide_mode(const DrvOptions *o)
{
    const char *e = o->emit;
    if (e && !strcmp(e, "stack"))
        return MODE_STACK;
    if (e && !strcmp(e, "ir"))
        return MODE_IR;
    if (e && !strcmp(e, "ir-grad"))
        return MODE_IR_GRAD;
    if (e && (!strcmp(e, "megatron") || !strcmp(e, "torchtitan")))
        return MODE_FRAMEWORK;
    if (e && !strcmp(e, "plan"))
        return MODE_PLAN;
    if (!(o->out_dir || o->plan_only || o->explain || (o->json && !e) || o->trace_plan))
        return MODE_SUMMARY; /* --emit summary, or nothing that needs a plan */
    if (o->out_dir)
        return o->plan_only ? MODE_PLAN_FILES : MODE_PROGRAMS;
    if (o->plan_only || o->json || (o->trace_plan && !o->explain)) {
        PassSearchPins p;
        make_pins(o, &p);
        return pass_search_pinned_fully(&p) ? MODE_LAYOUT : MODE_PLAN;
    }
    return MODE_EXPLAIN;
}

/* What -o DIR may receive: the plan files, and the programs' unless
 * --plan-only (issue 36: never a user's own Makefile, never an input). */
static bool out_dir_ok(const DrvOptions *o)
{
    const char *names[80] = {"plan.txt", "plan.json", "plan.svg"};
    int n = 3;
    for (const char *const *c = o->plan_only ? NULL : cg_output_names(); c && *c && n < 80; c++)
        names[n++] = *c;
    struct stat st;
    char config[4096];
    const char *inputs[2] = {o->model, NULL};
    if (stat(o->model, &st) == 0 && S_ISDIR(st.st_mode)) { /* a Hugging Face directory */
        snprintf(config, sizeof config, "%s/config.json", o->model);
        inputs[1] = config;
    }
    return ir_outdir_check(o->out_dir, names, n, inputs, 2);
}

/* The plan files of r, and the programs unless --plan-only, into DIR:
 * all written or none, under DIR's lock, DIR marked as ptdc's first. */
static int write_locked(const DrvOptions *o, IrGraph *g, const PassCostCtx *ctx,
                        const PassSearchResult *r);

static int write_dir(const DrvOptions *o, IrGraph *g, const PassCostCtx *ctx, const PassSearchResult *r)
{
    if (!ir_mkdirs(o->out_dir))
        return DRV_INVALID;
    int lock = ir_outdir_lock(o->out_dir);
    if (lock < 0)
        return DRV_INVALID;
    /* Again under the lock: another process may have written DIR since.
     * DIR is marked as ptdc's before any file lands, so another ptdc's
     * early check (before its search, without the lock) never finds our
     * files in an unmarked DIR and takes them for a user's. */
    bool had = false;
    int rc = out_dir_ok(o) && ir_outdir_mark(o->out_dir, &had) ? write_locked(o, g, ctx, r) : DRV_INVALID;
    if (rc != DRV_OK && !had)
        ir_outdir_unmark(o->out_dir);
    ir_outdir_unlock(lock);
    return rc;
}

static int write_locked(const DrvOptions *o, IrGraph *g, const PassCostCtx *ctx, const PassSearchResult *r)
{
    OutFile files[3];
    render(&files[0], "plan.txt", rep_plan_print_text, g, ctx, r);
    render(&files[1], "plan.json", rep_plan_print_json, g, ctx, r);
    render(&files[2], "plan.svg", rep_plan_print_svg, g, ctx, r);
    /* Programs first: cg_emit writes DIR whole or not at all, so a
     * failure leaves no plan files behind either. */
    bool ok = o->plan_only || emit_programs(o, g, &r->alt[0].plan);
    ok = ok && write_all(o->out_dir, files, 3);
    for (int i = 0; i < 3; i++)
        free(files[i].text);
    if (!ok)
        return DRV_INVALID;
    char lay[256];
    fprintf(stderr, "ptdc: wrote %s/plan.txt, plan.json, plan.svg: %s, step %.3f s, MFU %.1f%%\n",
            o->out_dir, plan_layout_str(&r->alt[0].layout, lay, sizeof lay),
            r->alt[0].pred.step_time_s, 100 * r->alt[0].pred.mfu);
    return DRV_OK;
}

/* -o DIR's programs compute bf16 and fp8 only (cg_precision_runs): a plan in
 * another format gets the plan files or a framework's flags instead, refused
 * before DIR is touched. */
static bool programs_refused(const DrvOptions *o, PlanPrecision p)
{
    if (!o->out_dir || o->plan_only || cg_precision_runs(p))
        return false;
    const char *n = plan_precision_name(p);
    bool chose = o->precision && !strcmp(o->precision, "auto");
    ir_error(IR_NOLOC, "--precision %s%s: -o DIR writes ptdc's programs, which compute bf16 and fp8 only, "
             "not %s (use --plan-only for the %s plan files, --emit megatron for Megatron-LM's flags, "
             "or --precision fp8 for a program)", chose ? "auto chose " : "", n, n, n);
    return true;
}

/* --trace-plan FILE: the predicted timeline (report/plan_trace.c). */
static bool write_trace_plan(const char *path, const IrGraph *g, const PassCostCtx *ctx,
                             const PassSearchResult *r)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        ir_error(IR_NOLOC, "--trace-plan: cannot write '%s': %s", path, strerror(errno));
        return false;
    }
    rep_plan_print_trace(f, g, ctx, r);
    if (fclose(f) != 0) {
        ir_error(IR_NOLOC, "--trace-plan: cannot write '%s': %s", path, strerror(errno));
        return false;
    }
    fprintf(stderr, "ptdc: wrote %s: the predicted step as a trace (ui.perfetto.dev)\n", path);
    return true;
}

/* The search's answer in the mode's form: printed, with the alternatives
 * (--explain), written to DIR, or as a framework's configuration. */
static int answer(Mode mode, const DrvOptions *o, IrGraph *g, const PassCostCtx *ctx, const PassSearchOpts *so,
                  PassIlpCache *cache, PassSearchResult *r)
{
    switch (mode) {
    case MODE_FRAMEWORK:
        return drv_emit_framework(o, g, ctx, r);
    case MODE_PLAN:
        (o->json ? rep_plan_print_json : rep_plan_print_text)(stdout, g, ctx, r);
        drv_answered = o->json;
        break;
    case MODE_LAYOUT: /* evaluating a layout by hand */
        if (o->json)
            drv_answer_json(g, ctx, &r->alt[0], "fits", DRV_OK, NULL, NULL);
        else
            pass_prediction_print_text(stdout, g, &r->alt[0].plan, ctx, &r->alt[0].pred);
        drv_answered = o->json;
        break;
    default:
        break;
    }
    if (o->explain) /* with --json stdout holds the one JSON object and nothing else */
        rep_plan_explain(o->json ? stderr : stdout, ctx, g, so, cache, r);
    if (mode == MODE_PROGRAMS && programs_refused(o, r->alt[0].plan.precision)) /* auto's choice */
        return DRV_INVALID;
    int rc = mode == MODE_PLAN_FILES || mode == MODE_PROGRAMS ? write_dir(o, g, ctx, r) : DRV_OK;
    /* after DIR: FILE may lie in it */
    if (rc == DRV_OK && o->trace_plan && !write_trace_plan(o->trace_plan, g, ctx, r))
        rc = DRV_INVALID;
    return rc;
}

/* The cluster, the stack and the requests that cannot work on them,
 * refused before searching (and --emit megatron|torchtitan's model, which
 * the framework must be able to build). fw: the framework of --emit, or
 * NULL. */
static int plan_setup(const DrvOptions *o, IrGraph *g, const char *fw, PassCluster *cl, PassCostCtx *ctx)
{
    if (!make_cluster(o, cl))
        return DRV_INVALID;
    memset(ctx, 0, sizeof *ctx);
    ctx->cl = cl;
    ctx->save_every = o->save_every;
    ctx->lamb = o->optimizer && !strcmp(o->optimizer, "lamb");
    /* --emit megatron|torchtitan: the flags of a framework, so the plan is
     * priced for it: the stack it implies, or a framework stack given. */
    if (!make_stack(o, fw && !o->stack ? (!strcmp(fw, "megatron") ? "megatron" : "fsdp") : o->stack, cl,
                    &ctx->st))
        return DRV_INVALID;
    if (fw && !ctx->st.ref_stack) {
        ir_error(IR_NOLOC, "--emit %s prints %s's configuration, but the plan is priced for the %s "
                 "stack, which runs ptdc's programs (use --stack %s, or a stack file with "
                 "dynamic_memory = yes)", fw, !strcmp(fw, "megatron") ? "Megatron-LM" : "torchtitan",
                 ctx->st.name, !strcmp(fw, "megatron") ? "megatron" : "fsdp");
        return DRV_INVALID;
    }
    if (fw) { /* a model the framework cannot build is refused before searching */
        RepArch arch;
        char why[512];
        if (!(!strcmp(fw, "megatron") ? rep_megatron_model : rep_torchtitan_model)(g, &arch, why, sizeof why)) {
            ir_error(IR_NOLOC, "--emit %s: %s", fw, why);
            if (o->json)
                drv_answer_json(g, ctx, NULL, "cannot_express", DRV_INEXPRESSIBLE, fw, NULL);
            return DRV_INEXPRESSIBLE;
        }
    }
    if (fw && (o->out_dir || o->explain)) {
        ir_error(IR_NOLOC, "--emit %s prints the framework's configuration on stdout and does not "
                 "combine with %s", fw, o->out_dir ? "-o DIR" : "--explain");
        return DRV_INVALID;
    }
    if (o->out_dir && !o->plan_only && strcmp(ctx->st.name, "ptdc") != 0) {
        ir_error(IR_NOLOC, "-o DIR emits ptdc's programs, but the plan is for the %s stack "
                 "(use --plan-only, or --emit megatron|torchtitan for its flags)", ctx->st.name);
        return DRV_INVALID;
    }
    int prec = o->precision ? plan_precision_parse(o->precision) : PLAN_PREC_BF16;
    if (prec >= 0 && programs_refused(o, (PlanPrecision)prec)) /* before searching */
        return DRV_INVALID;
    /* ptdc's programs run the schedules cg_schedule_runs says (1F1B,
     * interleaved and ZB-H1). Under its own stack the search offers only
     * those, so the plan --plan-only shows is the plan -o writes and ZB-H1
     * is chosen wherever it is predicted fastest; a schedule they did not
     * run would be priced only when pinned, and -o would refuse it before
     * DIR is touched. */
    int sc = o->schedule ? plan_schedule_parse(o->schedule) : -1;
    if (o->out_dir && !o->plan_only) {
        if (sc >= 0 && !cg_schedule_runs((PlanSchedule)sc)) {
            ir_error(IR_NOLOC, "--schedule %s: -o DIR writes ptdc's programs, which do not run %s (use "
                     "--plan-only for its plan files)", o->schedule, plan_schedule_title((PlanSchedule)sc));
            return DRV_INVALID;
        }
    }
    if (sc < 0 && !ctx->st.ref_stack) {
        unsigned runs = 0;
        for (int s = 0; s < PLAN_NSCHED; s++)
            if (cg_schedule_runs((PlanSchedule)s) && pass_stack_has_schedule(&ctx->st, s))
                runs |= 1u << s;
        ctx->st.schedules = runs;
    }
    /* Activation offloading (stack offload_act_layers) is a framework's:
     * ptdc's programs keep every activation on the device; its copies are
     * priced at the cluster's host link; Megatron offloads fewer layers than
     * the model has (TransformerConfig). */
    int off = ctx->st.offload_act_layers, layers = 0;
    for (int i = 0; i < g->npieces; i++)
        layers += g->pieces[i].rep >= 0;
    if (off > 0 && (!ctx->st.ref_stack || cl->gpu.host_copy_bw <= 0 || off >= layers)) {
        if (!ctx->st.ref_stack)
            ir_error(IR_NOLOC, "--stack-set offload_act_layers=%d: the %s stack's programs keep every "
                     "activation on the GPU; activation offloading is a framework's (--stack megatron)",
                     off, ctx->st.name);
        else if (cl->gpu.host_copy_bw <= 0)
            ir_error(IR_NOLOC, "--stack-set offload_act_layers=%d: the cluster (%s) has no host_copy_gbs "
                     "to price the copies to host memory (set it in a --cluster file)", off, cl->gpu.name);
        else
            ir_error(IR_NOLOC, "--stack-set offload_act_layers=%d: %s has %d layers, and Megatron-LM "
                     "offloads fewer than all of them (--cpu-offloading-num-layers)", off, g->name, layers);
        return DRV_INVALID;
    }
    /* The expert all-to-all overlap (stack moe_a2a_overlap) is Megatron's
     * schedule: ptdc's programs run each micro-batch's forward and backward
     * apart, their exchanges waited for. */
    if (ctx->st.moe_a2a_overlap && !ctx->st.ref_stack) {
        ir_error(IR_NOLOC, "--stack-set moe_a2a_overlap=yes: the %s stack's programs wait for each expert "
                 "all-to-all; the overlap with another micro-batch is a framework's (--stack megatron)",
                 ctx->st.name);
        return DRV_INVALID;
    }
    /* The flex dispatcher (stack moe_dispatcher) is DeepEP's or HybridEP's
     * kernels under Megatron: ptdc's programs exchange rows by all-to-all. */
    if (ctx->st.moe_dispatcher != PASS_DISPATCH_ALLTOALL && !ctx->st.ref_stack) {
        ir_error(IR_NOLOC, "--stack-set moe_dispatcher=flex: the %s stack's programs exchange the routed "
                 "rows by all-to-all; DeepEP's and HybridEP's flex dispatcher is a framework's (--stack megatron)",
                 ctx->st.name);
        return DRV_INVALID;
    }
    if (cl->gpu.kind == PASS_DEV_CPU && o->target && strcmp(o->target, "cpu") != 0) {
        ir_error(IR_NOLOC, "--target %s: the cluster file describes CPU ranks, whose programs are "
                 "CPU programs (--target cpu)", o->target);
        return DRV_INVALID;
    }
    return DRV_OK;
}

/* The modes that search: the search's plan (or a framework's, for a layout
 * pinned under a framework stack), answered in the mode's form. Returns an
 * exit status (driver.h). */
static int plan(Mode mode, const DrvOptions *o, IrGraph *g)
{
    const char *fw = mode == MODE_FRAMEWORK ? o->emit : NULL;
    PassCluster cl;
    PassCostCtx ctx;
    int rc = plan_setup(o, g, fw, &cl, &ctx);
    if (rc != DRV_OK)
        return rc;
    DrvOptions oo = *o; /* a CPU cluster's programs are CPU programs */
    if (!oo.target)
        oo.target = cl.gpu.kind == PASS_DEV_CPU ? "cpu" : "cuda";
    o = &oo;
    ctx.attention = o->attention && !strcmp(o->attention, "materialized") ? PLAN_ATTN_MATERIALIZED
                                                                          : PLAN_ATTN_FLASH;
    PassSearchOpts so;
    memset(&so, 0, sizeof so);
    make_pins(o, &so.pins);
    bool prec_auto = so.pins.precision < 0;
    ctx.prec = prec_auto ? PLAN_PREC_BF16 : (PlanPrecision)so.pins.precision;
    so.ep = o->ep;
    so.etp = o->etp;
    so.pp_nlayers = o->pp_nlayers;
    so.pp_layers = o->pp_layers;
    so.pp_first = o->pp_first;
    so.pp_last = o->pp_last;
    so.gpus = cl.ngpus;
    so.global_batch = g->global_batch;
    so.ilp_time_limit_s = o->ilp_time_limit;
    so.keep = o->explain ? 10 : 1;
    /* A framework chooses no strategies and no stage boundaries: a fully
     * pinned layout is its plan, without a search. */
    bool framework_plan = ctx.st.ref_stack && pass_search_pinned_fully(&so.pins);
    if (framework_plan && o->explain) {
        ir_error(IR_NOLOC, "--explain compares the search's plans, and under the %s stack a fully "
                 "pinned layout is evaluated as the framework lays it out, without a search (leave "
                 "out a layout flag to search)", ctx.st.name);
        return DRV_INVALID;
    }
    IrGraph *skel = NULL;
    PassIlpCache *cache = NULL;
    PassSearchResult r;
    memset(&r, 0, sizeof r);
    /* --precision auto: one context per format, living as long as the
     * cache (pass_search_precisions); the chosen one answers. */
    PassCostCtx pctx[PLAN_NPREC];
    const PassCostCtx *c = &ctx;
    if (prec_auto && (framework_plan || fw)) {
        if (fw)
            ir_error(IR_NOLOC, "--precision auto searches ptdc's plans, and --emit %s searches the "
                     "framework's layouts: name the format (--precision bf16|fp8|mxfp8|nvfp4)", fw);
        else
            ir_error(IR_NOLOC, "--precision auto searches ptdc's plans, and under the %s stack a fully "
                     "pinned layout is evaluated as the framework lays it out: name the format "
                     "(--precision bf16|fp8|mxfp8|nvfp4)", ctx.st.name);
        rc = DRV_INVALID;
    } else if (framework_plan) {
        rc = drv_framework_layout(o, g, &ctx, &so, &r);
    } else if (fw) { /* the framework's own space, not ptdc's strategies and stages */
        rc = drv_framework_search(o, g, &ctx, &so, &r);
    } else {
        skel = pass_search_skeleton(g->arena, g);
        so.skeleton = skel;
        cache = pass_ilp_cache_new();
        bool ok = prec_auto ? pass_search_precisions(&ctx, pctx, g, &so, cache, &r, &c)
                            : pass_search(&ctx, g, &so, cache, &r);
        if (prec_auto && ok)
            so.pins.precision = c->prec;
        if (!ok) {
            rc = DRV_INVALID;
        } else if (!r.found) {
            pass_search_explain_nofit(c, g, &so, cache, &r);
            rc = r.no_layout ? DRV_INVALID : DRV_NOFIT;
            if (o->json && rc == DRV_NOFIT)
                drv_answer_json(g, c, r.have_closest ? &r.closest : NULL, "does_not_fit", rc, NULL, NULL);
        }
    }
    /* The programs chunk what the stack prices chunked: sequence
     * parallelism's gathers and reduce-scatters (cg_tpchunk.c); and size
     * ZB-H1's MoE W slots as it counts them (pass_moe_wslot_factor). */
    for (int k = 0; rc == DRV_OK && k < r.nalt; k++) {
        r.alt[k].plan.tp_overlap = c->st.tp_overlap == PASS_TP_OVERLAP_CHUNKED && r.alt[k].layout.sp &&
                                   r.alt[k].layout.tp > 1;
        r.alt[k].plan.moe_wslot = pass_moe_wslot_factor(c, &r.alt[k].plan);
    }
    if (rc == DRV_OK) {
        char note[512];
        if (rep_search_idle_note(&r, pass_cluster_domain(&cl), note, sizeof note))
            ir_note(IR_NOLOC, "%s", note);
        rc = answer(mode, o, g, c, &so, cache, &r);
    }
    pass_search_result_free(&r);
    if (cache)
        pass_ilp_cache_free(cache);
    if (skel)
        pass_search_skeleton_free(skel);
    return rc;
}

static int run_stack(Mode mode, const DrvOptions *o, IrGraph *g)
{
    (void)mode, (void)g;
    PassStack st;
    if (!make_stack(o, o->stack, NULL, &st))
        return DRV_INVALID;
    pass_stack_print(stdout, &st);
    return DRV_OK;
}

static int run_summary(Mode mode, const DrvOptions *o, IrGraph *g)
{
    (void)mode, (void)o;
    ir_print_summary(stdout, g);
    return DRV_OK;
}

static int run_ir(Mode mode, const DrvOptions *o, IrGraph *g)
{
    if (mode == MODE_IR_GRAD) {
        if (!pass_autodiff(g))
            return DRV_INVALID;
        if (!ir_verify(g, "autodiff"))
            ir_die("autodiff produced an invalid graph for %s", o->model);
    }
    ir_print(stdout, g);
    return DRV_OK;
}

/* Every mode's function: a subcommand (by its first word, with its own
 * command line) or a run over the parsed options, after the model is
 * compiled where the mode needs one. */
static const struct {
    const char *word;                                  /* the subcommand */
    int (*sub)(int argc, char **argv);                 /* its main */
    bool model;                                        /* the model is compiled first */
    int (*run)(Mode mode, const DrvOptions *o, IrGraph *g);
} modes[MODE_COUNT] = {
    [MODE_CALIBRATE] = {"calibrate", cal_main, false, NULL},
    [MODE_IMPORT_HF] = {"import-hf", drv_import_hf, false, NULL},
    [MODE_STACK] = {NULL, NULL, false, run_stack},
    [MODE_SUMMARY] = {NULL, NULL, true, run_summary},
    [MODE_IR] = {NULL, NULL, true, run_ir},
    [MODE_IR_GRAD] = {NULL, NULL, true, run_ir},
    [MODE_FRAMEWORK] = {NULL, NULL, true, plan},
    [MODE_PLAN] = {NULL, NULL, true, plan},
    [MODE_LAYOUT] = {NULL, NULL, true, plan},
    [MODE_EXPLAIN] = {NULL, NULL, true, plan},
    [MODE_PLAN_FILES] = {NULL, NULL, true, plan},
    [MODE_PROGRAMS] = {NULL, NULL, true, plan},
};

/* The model through the frontend and the IR verifier (NULL: errors said). */
static IrGraph *compile_model(const DrvOptions *o, IrArena *arena)
{
    FeSet *sets = ir_alloc(arena, sizeof(FeSet) * (size_t)(o->nsets + 1));
    for (int i = 0; i < o->nsets; i++)
        sets[i] = (FeSet){o->sets[i].name, o->sets[i].value};
    IrGraph *g = fe_compile_file(arena, o->model, sets, o->nsets, o->global_batch);
    if (g && !ir_verify(g, "frontend"))
        ir_die("the frontend produced an invalid graph for %s", o->model);
    return g;
}

int main(int argc, char **argv)
{
    drv_heap_init();
    for (int m = 0; m < MODE_COUNT; m++)
        if (modes[m].word && argc > 1 && !strcmp(argv[1], modes[m].word))
            return modes[m].sub(argc - 1, argv + 1);
    /* --json before anything is parsed: a bad flag gets a JSON answer too. */
    bool json = false;
    for (int i = 1; i < argc; i++)
        json |= !strcmp(argv[i], "--json");
    if (json)
        drv_capture_begin();
    DrvOptions o;
    IrArena *arena = NULL;
    IrGraph *g = NULL;
    int rc = DRV_INVALID;
    if (drv_parse_options(argc, argv, &o)) {
        Mode mode = decide_mode(&o);
        /* -o DIR checked before any work: a refusal costs no search. */
        bool out_ok = (mode != MODE_PLAN_FILES && mode != MODE_PROGRAMS) || out_dir_ok(&o);
        if (!out_ok)
            mode = MODE_COUNT;
        else if (modes[mode].model) {
            arena = ir_arena_new();
            g = compile_model(&o, arena);
        }
        if (mode < MODE_COUNT && (g || !modes[mode].model))
            rc = modes[mode].run(mode, &o, g);
    }
    if (json && rc != DRV_OK && !drv_answered)
        drv_error_json(rc);
    if (json)
        drv_capture_end();
    if (g)
        ir_graph_free(g);
    if (arena)
        ir_arena_free(arena);
    drv_free_options(&o);
    return rc;
}
