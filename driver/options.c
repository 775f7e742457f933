/* options.c: ptdc's command line. Every flag is documented in the help text;
 * a bad value gets one sentence naming the flag and what it accepts. */
#include "driver.h"

#include "ir.h"

#include <errno.h>
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
        "  --json                   print the answer as JSON, also when it is a refusal\n"
        "  --explain                also print the ten best alternatives and why each loses\n"
        "  --target cpu|cuda        backend of the generated programs (default cuda; cpu for a\n"
        "                           CPU cluster file)\n"
        "\n"
        "Model:\n"
        "  --set NAME=VALUE         override a config constant of the model (repeatable)\n"
        "  --global-batch N         sequences per optimizer step (default: the model's global_batch)\n"
        "  --attention KIND         flash (default) or materialized: the attention kernel costed\n"
        "\n"
        "Cluster:\n"
        "  --gpus N                 number of GPUs (default 8)\n"
        "  --gpu NAME               a100-40gb, a100-80gb (default), h100-80gb, h200\n"
        "  --gpus-per-node K        GPUs per node sharing NVLink (default 8)\n"
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
        "  --micro-batch N          sequences per micro-batch on each data-parallel replica\n"
        "  --recompute POLICY       none, selective, ffn or full activation recomputation\n"
        "  --sp on|off              sequence parallelism in the tensor-parallel group\n"
        "  --zero N                 ZeRO stage 0-3 over the data-parallel group\n"
        "  --schedule S             1f1b or interleaved\n"
        "  --virtual-stages V       model chunks per pipeline rank (interleaved schedule)\n"
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

bool drv_parse_options(int argc, char **argv, DrvOptions *o)
{
    memset(o, 0, sizeof *o);
    o->gpus = 8;
    o->gpu = "a100-80gb";
    o->sp = -1;
    o->zero = -1;
    o->attention = "flash";
    o->ilp_time_limit = 10;
    bool ok = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long v;
        /* Flags that take a value accept "--flag VALUE" and "--flag=VALUE". */
        char flag[64];
        const char *val = NULL, *eq = strchr(a, '=');
        if (a[0] == '-' && a[1] == '-' && eq && (size_t)(eq - a) < sizeof flag) {
            memcpy(flag, a, (size_t)(eq - a));
            flag[eq - a] = 0;
            val = eq + 1;
            a = flag;
        }
#define VALUE()                                                                          \
    (val ? val : (i + 1 < argc ? argv[++i]                                               \
                               : (ir_error(IR_NOLOC, "%s expects a value", a), ok = false, (char *)NULL)))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            drv_print_help();
            exit(0);
        } else if (!strcmp(a, "--version")) {
            printf("ptdc %s\n", PTDC_VERSION);
            exit(0);
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if ((o->out_dir = VALUE()) == NULL)
                break;
            /* An empty DIR would put the files at "/plan.txt" (found by tests/fault/mutate.py). */
            if (!o->out_dir[0]) {
                ir_error(IR_NOLOC, "%s expects a directory, got ''", a);
                ok = false;
            }
        } else if (!strcmp(a, "--emit")) {
            const char *s = VALUE();
            if (!s)
                break;
            static const char *const kinds[] = {"summary", "ir", "ir-grad", "plan", "megatron",
                                                "torchtitan", "stack", NULL};
            ok &= one_of(a, s, kinds);
            o->emit = s;
        } else if (!strcmp(a, "--set")) {
            const char *s = VALUE();
            if (!s)
                break;
            const char *e = strchr(s, '=');
            if (!e || e == s || !e[1]) {
                ir_error(IR_NOLOC, "--set expects NAME=VALUE, got '%s'", s);
                ok = false;
                continue;
            }
            o->sets = ir_xrealloc(o->sets, (size_t)(o->nsets + 1) * sizeof *o->sets);
            char *name = ir_xstrdup(s);
            name[e - s] = 0;
            o->sets[o->nsets++] = (DrvSet){name, name + (e - s) + 1};
        } else if (!strcmp(a, "--plan-only")) {
            o->plan_only = true;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--explain")) {
            o->explain = true;
        } else if (!strcmp(a, "--target")) {
            static const char *const t[] = {"cpu", "cuda", NULL};
            if (!(o->target = VALUE()))
                break;
            ok &= one_of(a, o->target, t);
        } else if (!strcmp(a, "--gpus")) {
            const char *s = VALUE();
            if (!s || !(ok &= parse_int(a, s, 1, 1 << 20, &v)))
                continue;
            o->gpus = (int)v;
        } else if (!strcmp(a, "--gpu")) {
            if (!(o->gpu = VALUE()))
                break;
        } else if (!strcmp(a, "--gpus-per-node")) {
            const char *s = VALUE();
            if (!s || !(ok &= parse_int(a, s, 1, 1024, &v)))
                continue;
            o->gpus_per_node = (int)v;
        } else if (!strcmp(a, "--cluster")) {
            if (!(o->cluster_file = VALUE()))
                break;
        } else if (!strcmp(a, "--stack")) {
            if (!(o->stack = VALUE()))
                break;
        } else if (!strcmp(a, "--stack-set")) {
            const char *s = VALUE();
            if (!s)
                break;
            const char *e = strchr(s, '=');
            if (!e || e == s || !e[1]) {
                ir_error(IR_NOLOC, "--stack-set expects KEY=VALUE, got '%s'", s);
                ok = false;
                continue;
            }
            o->stack_sets = ir_xrealloc(o->stack_sets, (size_t)(o->nstack_sets + 1) * sizeof *o->stack_sets);
            char *name = ir_xstrdup(s);
            name[e - s] = 0;
            o->stack_sets[o->nstack_sets++] = (DrvSet){name, name + (e - s) + 1};
        } else if (!strcmp(a, "--tp") || !strcmp(a, "--pp") || !strcmp(a, "--dp") ||
                   !strcmp(a, "--micro-batch") || !strcmp(a, "--virtual-stages")) {
            const char *s = VALUE();
            if (!s || !(ok &= parse_int(a, s, 1, 1 << 20, &v)))
                continue;
            int *dst = !strcmp(a, "--tp") ? &o->tp : !strcmp(a, "--pp") ? &o->pp
                     : !strcmp(a, "--dp") ? &o->dp : !strcmp(a, "--micro-batch") ? &o->micro_batch
                     : &o->virtual_stages;
            *dst = (int)v;
        } else if (!strcmp(a, "--global-batch")) {
            const char *s = VALUE();
            if (!s || !(ok &= parse_int(a, s, 1, (long long)1 << 40, &v)))
                continue;
            o->global_batch = v;
        } else if (!strcmp(a, "--recompute")) {
            static const char *const r[] = {"none", "selective", "ffn", "full", NULL};
            if (!(o->recompute = VALUE()))
                break;
            ok &= one_of(a, o->recompute, r);
        } else if (!strcmp(a, "--sp")) {
            static const char *const r[] = {"on", "off", NULL};
            const char *s = VALUE();
            if (!s)
                break;
            if ((ok &= one_of(a, s, r)))
                o->sp = !strcmp(s, "on");
        } else if (!strcmp(a, "--zero")) {
            const char *s = VALUE();
            if (!s || !(ok &= parse_int(a, s, 0, 3, &v)))
                continue;
            o->zero = (int)v;
        } else if (!strcmp(a, "--schedule")) {
            static const char *const r[] = {"1f1b", "interleaved", NULL};
            if (!(o->schedule = VALUE()))
                break;
            ok &= one_of(a, o->schedule, r);
        } else if (!strcmp(a, "--attention")) {
            static const char *const r[] = {"flash", "materialized", NULL};
            if (!(o->attention = VALUE()))
                break;
            ok &= one_of(a, o->attention, r);
        } else if (!strcmp(a, "--ilp-time-limit")) {
            const char *s = VALUE();
            if (!s)
                break;
            char *end;
            double d = strtod(s, &end);
            if (end == s || *end || !(d > 0 && d <= 3600)) {
                ir_error(IR_NOLOC, "--ilp-time-limit expects seconds in (0, 3600], got '%s'", s);
                ok = false;
                continue;
            }
            o->ilp_time_limit = d;
        } else if (a[0] == '-' && a[1] != 0) {
            ir_error(IR_NOLOC, "unknown option '%s' (see ptdc --help)", argv[i]);
            ok = false;
        } else if (o->model) {
            ir_error(IR_NOLOC, "more than one model file given: '%s' and '%s'", o->model, a);
            ok = false;
        } else {
            o->model = a;
        }
#undef VALUE
        if (val && (!strcmp(a, "--plan-only") || !strcmp(a, "--json") || !strcmp(a, "--explain"))) {
            ir_error(IR_NOLOC, "%s takes no value", a);
            ok = false;
        }
    }
    if (ok && !o->model && !(o->emit && !strcmp(o->emit, "stack"))) {
        ir_error(IR_NOLOC, "no model file given (usage: ptdc MODEL.mdl [options]; see --help)");
        ok = false;
    }
    if (ok && o->virtual_stages > 1 && o->schedule && strcmp(o->schedule, "interleaved") != 0) {
        ir_error(IR_NOLOC, "--virtual-stages %d needs --schedule interleaved", o->virtual_stages);
        ok = false;
    }
    return ok;
}

void drv_free_options(DrvOptions *o)
{
    for (int i = 0; i < o->nsets; i++)
        free((char *)o->sets[i].name);
    free(o->sets);
    for (int i = 0; i < o->nstack_sets; i++)
        free((char *)o->stack_sets[i].name);
    free(o->stack_sets);
}
