/* options.c: ptdc's command line. Every flag is documented in the help text;
 * a bad value gets one sentence naming the flag and what it accepts. */
#include "driver.h"

#include "ir.h"
#include "plan.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void drv_print_help(void)
{
    printf(
        "usage: ptdc MODEL.mdl [options]\n"
        "       ptdc import-hf DIR_OR_CONFIG [-o MODEL.mdl]\n"
        "       ptdc [--stack NAME|FILE] [--stack-set KEY=VALUE ...] --emit stack\n"
        "\n"
        "Compile a model written in the .mdl language into a distributed training plan and\n"
        "per-rank programs. MODEL may also be a Hugging Face config.json or its directory\n"
        "(compiled as the .mdl that import-hf writes).\n"
        "\n"
        "Output:\n"
        "  -o, --output DIR         write plan.txt, plan.json, plan.svg and the rank programs to DIR\n"
        "  --emit WHAT              print WHAT to stdout and stop: summary (parameter count),\n"
        "                           ir (the operator graph), ir-grad (with the backward graph),\n"
        "                           plan (the chosen plan, as in plan.txt), megatron (Megatron-LM\n"
        "                           flags for the plan; implies --stack megatron), torchtitan (a\n"
        "                           torchtitan job file; implies --stack fsdp), stack (the --stack\n"
        "                           as a stack file, every key; no model needed); see docs/stacks.md\n"
        "  --plan-only              stop after the plan: no programs are generated\n"
        "  --trace-plan FILE        also write the plan's predicted step as a Chrome trace (JSON\n"
        "                           for ui.perfetto.dev, chrome://tracing), like the one its\n"
        "                           programs write under PTDC_TRACE=FILE (docs/trace.md)\n"
        "  --json                   print the answer as JSON, also when it is a refusal\n"
        "  --explain                also print the ten best alternatives and why each loses\n"
        "  --target cpu|cuda        backend of the generated programs (default cuda; cpu for a\n"
        "                           CPU cluster file)\n"
        "\n"
        "Model:\n"
        "  --set NAME=VALUE         override a config constant of the model (repeatable)\n"
        "  --global-batch N         sequences per optimizer step (default: the model's global_batch)\n"
        "  --save-every N           the run checkpoints every N steps: plan.txt prices the time a\n"
        "                           save blocks the step loop, synchronous and asynchronous, from\n"
        "                           the cluster's storage_write_gbs and host_copy_gbs\n"
        "  --optimizer NAME         adamw (default) or lamb: the optimizer step the plan prices\n"
        "                           (LAMB: a second pass over the shard); run the program with\n"
        "                           the same run.sh --optimizer\n"
        "  --attention KIND         flash (default) or materialized: the attention kernel costed\n"
        "  --precision P            bf16 (default), fp8, mxfp8, nvfp4 or auto: the format of the\n"
        "                           linear layers (auto: every format the GPU runs is searched,\n"
        "                           the fastest plan that fits wins; docs/precision.md)\n"
        "\n"
        "Cluster:\n"
        "  --gpus N                 number of GPUs (default 8)\n"
        "  --gpu NAME               a100-40gb, a100-80gb (default), h100-80gb, h200, h800, b200,\n"
        "                           b300, gb200, gb300 (NVL72: hosts of 4 in NVLink domains of 72)\n"
        "  --gpus-per-node K        GPUs per host (default: the preset's, else 8; the NVLink\n"
        "                           domain is the host unless the preset or --cluster says more)\n"
        "  --cluster FILE           a custom cluster description (see docs/cost-model.md), e.g. one\n"
        "                           written by `ptdc calibrate` (run `ptdc calibrate --help`)\n"
        "\n"
        "Stack (the software that runs the plan; see docs/stacks.md):\n"
        "  --stack NAME|FILE        ptdc (default: the programs ptdc emits), megatron, fsdp, or a\n"
        "                           stack file\n"
        "  --stack-set KEY=VALUE    override one key of the stack (repeatable)\n"
        "                           Under megatron, fsdp (a stack with dynamic_memory = yes) a layout\n"
        "                           with every layout flag is evaluated as that framework lays it\n"
        "                           out: its tensor parallelism, layers split evenly over stages\n"
        "\n"
        "Layout (each pins that part of the plan; the rest is searched):\n"
        "  --tp N                   tensor-parallel degree\n"
        "  --pp N                   pipeline stages\n"
        "  --dp N                   data-parallel degree\n"
        "  --cp N                   context-parallel degree: the sequence split N ways, attention\n"
        "                           gathering keys and values, passing them round a ring or\n"
        "                           splitting its heads by all-to-all, as the search chooses\n"
        "                           (1: none)\n"
        "  --ep N                   expert-parallel degree (MoE): 1, or the dp or tp degree\n"
        "                           (the experts fold over a whole mesh axis), dp x tp (one\n"
        "                           exchange over both, with --sp on), or at tp 1 a\n"
        "                           divisor of dp below it (EP below DP: N consecutive dp\n"
        "                           ranks exchange the experts); under --stack\n"
        "                           megatron also Megatron-Core's parallel folding: ep / tp\n"
        "                           consecutive dp ranks with their tp ranks (ETP 1: EP below\n"
        "                           DP, or across dp x tp), or ep consecutive dp ranks (ETP tp)\n"
        "  --etp N                  expert tensor-parallel degree (MoE): each expert's width\n"
        "                           split N ways; 1, or the size of the axis EP does not use\n"
        "  --micro-batch N          sequences per micro-batch on each data-parallel replica\n"
        "  --recompute POLICY       none, selective, ffn or full activation recomputation, or\n"
        "                           Megatron's modules as its recipes list them: mla_up_proj,\n"
        "                           mla_up_proj,mlp or mla_up_proj,moe_act (--stack megatron)\n"
        "  --sp on|off              sequence parallelism in the tensor-parallel group\n"
        "  --tp-overlap on|off      with --sp on, chunk each tensor-parallel gather and reduce-scatter\n"
        "                           with its GEMMs in the programs, priced so (default off)\n"
        "  --zero N                 ZeRO stage 0-3 over the data-parallel group\n"
        "  --schedule S             1f1b, interleaved or zb-h1 (zero bubble)\n"
        "  --virtual-stages V       model chunks per pipeline rank (interleaved schedule)\n"
        "  --pp-layers L0,L1,...    layers of each model chunk in model order (pp x v of them;\n"
        "                           the embedding joins the first, the head the last; 0 at\n"
        "                           either end: that chunk holds the embedding/head alone), or\n"
        "                           first=N,last=N: the first and last pipeline ranks' layers,\n"
        "                           the others even (Megatron's --decoder-first/last-...)\n"
        "\n"
        "Search:\n"
        "  --ilp-time-limit SECONDS time limit of one intra-operator ILP solve (default 10)\n"
        "\n"
        "  -h, --help               this text\n"
        "  --version                print the version\n"
        "\n"
        "Exit status: 0 done; 1 invalid request (a flag, the model, a layout that cannot work);\n"
        "2 the layout or model does not fit in memory; 3 --emit's framework cannot express the plan.\n");
}

/* A decimal integer in [lo, hi] and nothing else: no spaces, no '+', no hex
 * or exponent. Digits accumulate in 64 bits with an overflow check, so no
 * value wraps or truncates before the range check names the flag. */
static bool parse_int(const char *flag, const char *s, long long lo, long long hi, long long *out)
{
    const char *p = s;
    bool neg = *p == '-';
    p += neg;
    int64_t v = 0;
    bool ok = *p != 0;
    for (; ok && *p; p++)
        ok = *p >= '0' && *p <= '9' && !__builtin_mul_overflow(v, 10, &v) &&
             !__builtin_add_overflow(v, *p - '0', &v);
    if (neg)
        v = -v;
    if (!ok || v < lo || v > hi) {
        ir_error(IR_NOLOC, "%s expects an integer from %lld to %lld, got '%s'", flag, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

static bool one_of(const char *flag, const char *s, const char *const *choices)
{
    for (int i = 0; choices[i]; i++)
        if (strcmp(s, choices[i]) == 0)
            return true;
    char buf[256];
    size_t k = 0;
    for (int i = 0; choices[i] && k < sizeof buf; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? ", " : "", choices[i]);
    ir_error(IR_NOLOC, "%s expects one of %s, got '%s'", flag, buf, s);
    return false;
}

/* NAME=VALUE (--set) or KEY=VALUE (--stack-set) appended to a list. */
static bool add_pair(const char *flag, const char *word, const char *s, DrvSet **list, int *n)
{
    const char *e = strchr(s, '=');
    if (!e || e == s || !e[1]) {
        ir_error(IR_NOLOC, "%s expects %s, got '%s'", flag, word, s);
        return false;
    }
    *list = ir_xrealloc(*list, (size_t)(*n + 1) * sizeof **list);
    char *name = ir_xstrdup(s);
    name[e - s] = 0;
    (*list)[(*n)++] = (DrvSet){name, name + (e - s) + 1};
    return true;
}

/* -h, --help and --version print and end the process where they are read:
 * a later flag is not looked at. */
static bool opt_help(DrvOptions *o, const char *flag, const char *val)
{
    (void)o, (void)flag, (void)val;
    drv_print_help();
    exit(0);
}

static bool opt_version(DrvOptions *o, const char *flag, const char *val)
{
    (void)o, (void)flag, (void)val;
    printf("ptdc %s\n", PTDC_VERSION);
    exit(0);
}

/* An empty DIR would put the files at "/plan.txt" (found by tests/fault/mutate.py). */
static bool opt_output(DrvOptions *o, const char *flag, const char *val)
{
    o->out_dir = val;
    if (!val[0]) {
        ir_error(IR_NOLOC, "%s expects a directory, got ''", flag);
        return false;
    }
    return true;
}

static bool opt_set(DrvOptions *o, const char *flag, const char *val)
{
    return add_pair(flag, "NAME=VALUE", val, &o->sets, &o->nsets);
}

static bool opt_stack_set(DrvOptions *o, const char *flag, const char *val)
{
    return add_pair(flag, "KEY=VALUE", val, &o->stack_sets, &o->nstack_sets);
}

static bool opt_tp_overlap(DrvOptions *o, const char *flag, const char *val)
{
    static const char *const r[] = {"on", "off", NULL};
    if (!one_of(flag, val, r))
        return false;
    o->tp_overlap = !strcmp(val, "on");
    return true;
}

static bool opt_sp(DrvOptions *o, const char *flag, const char *val)
{
    static const char *const r[] = {"on", "off", NULL};
    if (!one_of(flag, val, r))
        return false;
    o->sp = !strcmp(val, "on");
    return true;
}

/* --pp-layers 3,4,4,3 (layers per model chunk, model order) or Megatron's
 * first=F,last=Z (layers of the first and last pipeline ranks). A count may
 * be 0 (the first chunk then holds the embedding alone, the last the head
 * alone: Megatron's account_for_*_in_pipeline_split); search_pins.c refuses
 * it anywhere but at the ends. */
static bool opt_pp_layers(DrvOptions *o, const char *flag, const char *val)
{
    free(o->pp_layers);
    o->pp_layers = NULL;
    o->pp_nlayers = o->pp_first = o->pp_last = 0;
    bool named = !strncmp(val, "first=", 6) || !strncmp(val, "last=", 5);
    for (const char *p = val;;) {
        int *slot = NULL;
        if (named) {
            if (!strncmp(p, "first=", 6) && !o->pp_first)
                slot = &o->pp_first, p += 6;
            else if (!strncmp(p, "last=", 5) && !o->pp_last)
                slot = &o->pp_last, p += 5;
        }
        char *end;
        errno = 0;
        long n = p[0] >= '0' && p[0] <= '9' ? strtol(p, &end, 10) : -1;
        if ((named && !slot) || n < 0 || (slot && n < 1) || n > 1000000 || errno || (*end && *end != ',') ||
            (!named && o->pp_nlayers >= PLAN_MAX_STAGES)) {
            ir_error(IR_NOLOC, "%s expects the layers of each model chunk in model order (3,4,4,3; 0,4,4,0 leaves the "
                     "embedding and the head alone in the end chunks), or "
                     "first=N and/or last=N for the first and last pipeline ranks (Megatron's "
                     "--decoder-first/last-pipeline-num-layers, each at least 1); got '%s'", flag, val);
            return false;
        }
        if (slot) {
            *slot = (int)n;
        } else {
            o->pp_layers = ir_xrealloc(o->pp_layers, sizeof(int) * (size_t)(o->pp_nlayers + 1));
            o->pp_layers[o->pp_nlayers++] = (int)n;
        }
        if (!*end)
            return true;
        p = end + 1;
    }
}

static bool opt_ilp_time_limit(DrvOptions *o, const char *flag, const char *val)
{
    (void)flag;
    char *end;
    double d = strtod(val, &end);
    if (end == val || *end || !(d > 0 && d <= 3600)) {
        ir_error(IR_NOLOC, "--ilp-time-limit expects seconds in (0, 3600], got '%s'", val);
        return false;
    }
    o->ilp_time_limit = d;
    return true;
}

/* How a flag is read and where its value goes. */
typedef enum {
    OPT_SWITCH,                   /* no value: sets a bool */
    OPT_ACTION,                   /* no value: fn runs */
    OPT_STRING,                   /* a value, kept as given */
    OPT_CHOICE,                   /* one of choices, kept as given */
    OPT_INT,                      /* an integer in [lo, hi], into an int */
    OPT_INT64,                    /* an integer in [lo, hi], into an int64_t */
    OPT_CALL,                     /* a value, read by fn */
} OptKind;

typedef struct OptRow {
    const char *name, *alias;     /* "--output", "-o" */
    OptKind kind;
    size_t off;                   /* the DrvOptions field (SWITCH, STRING, CHOICE, INT, INT64) */
    long long lo, hi;             /* INT, INT64 */
    const char *const *choices;   /* CHOICE */
    bool (*fn)(DrvOptions *o, const char *flag, const char *val); /* ACTION, CALL: false on a bad value */
} OptRow;

static const char *const emit_kinds[] = {"summary", "ir", "ir-grad", "plan", "megatron", "torchtitan", "stack", NULL};
static const char *const targets[] = {"cpu", "cuda", NULL};
static const char *const recomputes[] = {"none", "selective", "ffn", "full",
#define RC_SET(e, name, mods) name,
#include "recompute.def"
                                         NULL};
static const char *const schedules[] = {
#define X(id, name, title, chunks, split) name,
    PLAN_SCHEDULES(X)
#undef X
    NULL};
static const char *const attentions[] = {"flash", "materialized", NULL};
/* PLAN_PRECISIONS' names, then auto. */
static const char *const precisions[] = {"bf16", "fp8", "mxfp8", "nvfp4", "auto", NULL};
static const char *const optimizers[] = {"adamw", "lamb", NULL};

#define F(field) offsetof(DrvOptions, field)
/* Every flag ptdc accepts (drv_print_help documents them). */
static const OptRow opts[] = {
    {"--help", "-h", OPT_ACTION, 0, 0, 0, NULL, opt_help},
    {"--version", NULL, OPT_ACTION, 0, 0, 0, NULL, opt_version},
    {"--output", "-o", OPT_CALL, 0, 0, 0, NULL, opt_output},
    {"--emit", NULL, OPT_CHOICE, F(emit), 0, 0, emit_kinds, NULL},
    {"--set", NULL, OPT_CALL, 0, 0, 0, NULL, opt_set},
    {"--plan-only", NULL, OPT_SWITCH, F(plan_only), 0, 0, NULL, NULL},
    {"--trace-plan", NULL, OPT_STRING, F(trace_plan), 0, 0, NULL, NULL},
    {"--json", NULL, OPT_SWITCH, F(json), 0, 0, NULL, NULL},
    {"--explain", NULL, OPT_SWITCH, F(explain), 0, 0, NULL, NULL},
    {"--target", NULL, OPT_CHOICE, F(target), 0, 0, targets, NULL},
    {"--gpus", NULL, OPT_INT, F(gpus), 1, 1 << 20, NULL, NULL},
    {"--gpu", NULL, OPT_STRING, F(gpu), 0, 0, NULL, NULL},
    {"--gpus-per-node", NULL, OPT_INT, F(gpus_per_node), 1, 1024, NULL, NULL},
    {"--cluster", NULL, OPT_STRING, F(cluster_file), 0, 0, NULL, NULL},
    {"--stack", NULL, OPT_STRING, F(stack), 0, 0, NULL, NULL},
    {"--stack-set", NULL, OPT_CALL, 0, 0, 0, NULL, opt_stack_set},
    {"--tp", NULL, OPT_INT, F(tp), 1, 1 << 20, NULL, NULL},
    {"--pp", NULL, OPT_INT, F(pp), 1, 1 << 20, NULL, NULL},
    {"--dp", NULL, OPT_INT, F(dp), 1, 1 << 20, NULL, NULL},
    {"--cp", NULL, OPT_INT, F(cp), 1, 1 << 20, NULL, NULL},
    {"--ep", NULL, OPT_INT, F(ep), 1, 1 << 20, NULL, NULL},
    {"--etp", NULL, OPT_INT, F(etp), 1, 1 << 20, NULL, NULL},
    {"--micro-batch", NULL, OPT_INT, F(micro_batch), 1, 1 << 20, NULL, NULL},
    {"--virtual-stages", NULL, OPT_INT, F(virtual_stages), 1, 1 << 20, NULL, NULL},
    {"--pp-layers", NULL, OPT_CALL, 0, 0, 0, NULL, opt_pp_layers},
    {"--global-batch", NULL, OPT_INT64, F(global_batch), 1, (long long)1 << 40, NULL, NULL},
    {"--save-every", NULL, OPT_INT, F(save_every), 1, 1 << 30, NULL, NULL},
    {"--optimizer", NULL, OPT_CHOICE, F(optimizer), 0, 0, optimizers, NULL},
    {"--recompute", NULL, OPT_CHOICE, F(recompute), 0, 0, recomputes, NULL},
    {"--sp", NULL, OPT_CALL, 0, 0, 0, NULL, opt_sp},
    {"--tp-overlap", NULL, OPT_CALL, 0, 0, 0, NULL, opt_tp_overlap},
    {"--zero", NULL, OPT_INT, F(zero), 0, 3, NULL, NULL},
    {"--schedule", NULL, OPT_CHOICE, F(schedule), 0, 0, schedules, NULL},
    {"--attention", NULL, OPT_CHOICE, F(attention), 0, 0, attentions, NULL},
    {"--precision", NULL, OPT_CHOICE, F(precision), 0, 0, precisions, NULL},
    {"--ilp-time-limit", NULL, OPT_CALL, 0, 0, 0, NULL, opt_ilp_time_limit},
};
#undef F

static const OptRow *find_opt(const char *a)
{
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        if (!strcmp(a, opts[i].name) || (opts[i].alias && !strcmp(a, opts[i].alias)))
            return &opts[i];
    return NULL;
}

/* Flag r's value val (flag: as typed) into o by the row; false after
 * saying why when it is bad. */
static bool read_value(const OptRow *r, const char *flag, const char *val, DrvOptions *o)
{
    char *field = (char *)o + r->off;
    long long v;
    switch (r->kind) {
    case OPT_STRING:
        *(const char **)field = val;
        return true;
    case OPT_CHOICE:
        *(const char **)field = val;
        return one_of(flag, val, r->choices);
    case OPT_INT:
        if (!parse_int(flag, val, r->lo, r->hi, &v))
            return false;
        *(int *)field = (int)v;
        return true;
    case OPT_INT64:
        if (!parse_int(flag, val, r->lo, r->hi, &v))
            return false;
        *(int64_t *)field = v;
        return true;
    case OPT_CALL:
        return r->fn(o, flag, val);
    case OPT_SWITCH:
    case OPT_ACTION:
        break;
    }
    ir_die("options: %s takes no value", flag);
}

/* The defaults of every flag not given (DrvOptions). */
static void option_defaults(DrvOptions *o)
{
    memset(o, 0, sizeof *o);
    o->gpus = 8;
    o->gpu = "a100-80gb";
    o->sp = -1;
    o->tp_overlap = -1;
    o->zero = -1;
    o->attention = "flash";
    o->ilp_time_limit = 10;
}

/* What the flags together must satisfy, checked once all are read. */
static bool check_options(const DrvOptions *o)
{
    if (!o->model && !(o->emit && !strcmp(o->emit, "stack"))) {
        ir_error(IR_NOLOC, "no model file given (usage: ptdc MODEL.mdl [options]; see --help)");
        return false;
    }
    if (o->virtual_stages > 1 && o->schedule && strcmp(o->schedule, "interleaved") != 0) {
        ir_error(IR_NOLOC, "--virtual-stages %d needs --schedule interleaved", o->virtual_stages);
        return false;
    }
    /* The chunks are sequence parallelism's gathers and reduce-scatters. */
    if (o->tp_overlap == 1 && (o->sp == 0 || o->tp == 1)) {
        ir_error(IR_NOLOC, "--tp-overlap on chunks the tensor-parallel gathers and reduce-scatters of "
                 "sequence parallelism, but %s", o->sp == 0 ? "--sp is off" : "--tp is 1");
        return false;
    }
    return true;
}

/* Each argument by the table: a flag ("--flag VALUE" or "--flag=VALUE"),
 * else the model. Every bad flag is said before returning false. */
bool drv_parse_options(int argc, char **argv, DrvOptions *o)
{
    option_defaults(o);
    bool ok = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char flag[64];
        const char *val = NULL, *eq = strchr(a, '=');
        if (a[0] == '-' && a[1] == '-' && eq && (size_t)(eq - a) < sizeof flag) {
            memcpy(flag, a, (size_t)(eq - a));
            flag[eq - a] = 0;
            val = eq + 1;
            a = flag;
        }
        const OptRow *r = find_opt(a);
        if (!r && a[0] == '-' && a[1] != 0) {
            ir_error(IR_NOLOC, "unknown option '%s' (see ptdc --help)", argv[i]);
            ok = false;
        } else if (!r && o->model) {
            ir_error(IR_NOLOC, "more than one model file given: '%s' and '%s'", o->model, a);
            ok = false;
        } else if (!r) {
            o->model = a;
        } else if (r->kind == OPT_SWITCH || r->kind == OPT_ACTION) {
            if (r->kind == OPT_SWITCH)
                *(bool *)((char *)o + r->off) = true;
            else
                ok &= r->fn(o, a, NULL);
            if (val) {
                ir_error(IR_NOLOC, "%s takes no value", a);
                ok = false;
            }
        } else {
            if (!val && i + 1 < argc)
                val = argv[++i];
            if (!val) {
                ir_error(IR_NOLOC, "%s expects a value", a);
                ok = false;
                break;
            }
            ok &= read_value(r, a, val, o);
        }
    }
    return ok && check_options(o);
}

void drv_free_options(DrvOptions *o)
{
    for (int i = 0; i < o->nsets; i++)
        free((char *)o->sets[i].name);
    free(o->sets);
    for (int i = 0; i < o->nstack_sets; i++)
        free((char *)o->stack_sets[i].name);
    free(o->stack_sets);
    free(o->pp_layers);
}
