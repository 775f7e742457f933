/* driver.h: exports of driver/: the ptdc command line and the pipeline of
 * passes it runs (main.c), in the order frontend -> IR verify -> plan ->
 * codegen. */
#ifndef PTDC_DRIVER_H
#define PTDC_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct DrvSet {
    const char *name, *value; /* --set NAME=VALUE */
} DrvSet;

/* Every flag ptdc accepts; 0 / NULL / -1 mean "not given: search or default". */
typedef struct DrvOptions {
    const char *model;        /* MODEL.mdl */
    const char *out_dir;      /* -o DIR */
    const char *emit;         /* --emit summary|ir|ir-grad|plan */
    const char *trace_plan;   /* --trace-plan FILE: the predicted timeline (report/plan_trace.c) */
    DrvSet *sets;
    int nsets;
    bool plan_only, json, explain;
    /* cluster */
    int gpus;                 /* --gpus N (default 8) */
    const char *gpu;          /* --gpu NAME (default a100-80gb) */
    int gpus_per_node;        /* --gpus-per-node K (0: not given; GPUs default to 8) */
    const char *cluster_file; /* --cluster FILE */
    /* the software stack the plan is for */
    const char *stack;        /* --stack NAME|FILE (default ptdc) */
    DrvSet *stack_sets;       /* --stack-set KEY=VALUE */
    int nstack_sets;
    /* layout pins */
    int tp, pp, dp;
    int ep, etp;              /* MoE: expert (tensor) parallel degrees; 0 searched */
    int cp;                   /* context-parallel degree; 0 searched */
    int micro_batch;          /* sequences per data-parallel replica per micro-batch */
    int64_t global_batch;     /* sequences per step (default: the model's global_batch) */
    const char *recompute;    /* none|selective|ffn|full */
    int sp;                   /* -1 unset, 0 off, 1 on */
    int tp_overlap;           /* --tp-overlap: -1 unset, 0 off, 1 on (the ptdc stack's tp_overlap
                                 chunked: docs/codegen.md, "Chunked tensor parallelism") */
    int zero;                 /* -1 unset, else 0..3 */
    const char *schedule;     /* 1f1b|interleaved|zb-h1 (plan.h PLAN_SCHEDULES) */
    int virtual_stages;       /* --virtual-stages V (interleaved) */
    int pp_nlayers;           /* --pp-layers L0,L1,...: layers per model chunk */
    int *pp_layers;           /* [pp_nlayers], heap */
    int pp_first, pp_last;    /* --pp-layers first=F,last=Z (0: not given) */
    const char *attention;    /* flash|materialized */
    const char *precision;    /* bf16|fp8|mxfp8|nvfp4|auto (NULL: bf16) */
    int save_every;           /* --save-every N: the checkpoint interval plan.txt prices (0: none) */
    const char *optimizer;    /* adamw|lamb (NULL: adamw): the optimizer step priced */
    /* codegen */
    const char *target;       /* cpu|cuda (NULL: cuda, or cpu for a CPU cluster) */
    /* limits */
    double ilp_time_limit;    /* seconds per ILP solve */
} DrvOptions;

/* Exit statuses (ptdc --help, README, docs/planner.md). */
enum {
    DRV_OK = 0,
    DRV_INVALID = 1,       /* a bad flag, model or stack file; a layout that cannot work */
    DRV_NOFIT = 2,         /* the layout (or every layout) does not fit in memory */
    DRV_INEXPRESSIBLE = 3, /* --emit's framework cannot express the plan */
};

/* Parse argv; on a bad flag print one sentence naming it and return false. */
bool drv_parse_options(int argc, char **argv, DrvOptions *o);
/* heap.c: grow the heap once for the search and advise it for huge pages. */
void drv_heap_init(void);
void drv_print_help(void);
void drv_free_options(DrvOptions *o);

/* `ptdc import-hf DIR_OR_CONFIG [-o MODEL.mdl]` (import_hf.c); argv[0] is "import-hf". */
int drv_import_hf(int argc, char **argv);

/* answer.c: --json answers. While capturing, diagnostics go to a buffer
 * (drv_capture_end prints it on stderr); drv_messages reads it back. */
#define DRV_MAX_MSGS 32
typedef struct DrvMsgs {
    char *buf;
    const char *line[DRV_MAX_MSGS]; /* every diagnostic as printed */
    int nlines;
    const char *err[DRV_MAX_MSGS], *note[DRV_MAX_MSGS]; /* their messages */
    int nerr, nnote;
} DrvMsgs;
void drv_capture_begin(void);
void drv_capture_end(void);
void drv_messages(DrvMsgs *m);
void drv_messages_free(DrvMsgs *m);
/* Set once a JSON answer is on stdout (main prints an error object otherwise). */
extern bool drv_answered;
struct IrGraph;
struct PassCostCtx;
struct PassSearchAlt;
struct PassSearchOpts;
struct PassSearchResult;
/* The answer for one layout (a may be NULL), its reason and notes from the
 * diagnostics so far. */
void drv_answer_json(const struct IrGraph *g, const struct PassCostCtx *c, const struct PassSearchAlt *a,
                     const char *status, int rc, const char *emit_name, const char *emit_text);
/* {"status": "error", "exit_status": rc, "error": first error, "diagnostics": [...]} */
void drv_error_json(int rc);

/* frame.c: plans under a framework stack (PassStack.ref_stack). A fully
 * pinned layout as the framework lays it out: into r (found) and DRV_OK,
 * or DRV_INVALID / DRV_NOFIT after saying why (and the JSON answer). */
int drv_framework_layout(const DrvOptions *o, const struct IrGraph *g, const struct PassCostCtx *c,
                         const struct PassSearchOpts *so, struct PassSearchResult *r);
/* --emit megatron|torchtitan without a fully pinned layout: the
 * framework's own space searched (rep_framework_search) for the fastest
 * plan that fits and that it can express: into r (found) and DRV_OK, or
 * DRV_INEXPRESSIBLE / DRV_NOFIT after saying why (and the JSON answer). */
int drv_framework_search(const DrvOptions *o, const struct IrGraph *g, const struct PassCostCtx *c,
                         const struct PassSearchOpts *so, struct PassSearchResult *r);
/* --emit megatron|torchtitan for r->alt[0], a framework's plan. Prints the
 * flags (or the JSON answer). */
int drv_emit_framework(const DrvOptions *o, const struct IrGraph *g, const struct PassCostCtx *c,
                       const struct PassSearchResult *r);

#endif
