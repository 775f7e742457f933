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
    int micro_batch;          /* sequences per data-parallel replica per micro-batch */
    int64_t global_batch;     /* sequences per step (default: the model's global_batch) */
    const char *recompute;    /* none|selective|ffn|full */
    int sp;                   /* -1 unset, 0 off, 1 on */
    int zero;                 /* -1 unset, else 0..3 */
    const char *schedule;     /* 1f1b|interleaved */
    int virtual_stages;       /* --virtual-stages V (interleaved) */
    const char *attention;    /* flash|materialized */
    /* codegen */
    const char *target;       /* cpu|cuda (NULL: cuda, or cpu for a CPU cluster) */
    /* limits */
    double ilp_time_limit;    /* seconds per ILP solve */
} DrvOptions;

/* Parse argv; on a bad flag print one sentence naming it and return false. */
bool drv_parse_options(int argc, char **argv, DrvOptions *o);
void drv_print_help(void);
void drv_free_options(DrvOptions *o);

/* `ptdc import-hf DIR_OR_CONFIG [-o MODEL.mdl]` (import_hf.c); argv[0] is "import-hf". */
int drv_import_hf(int argc, char **argv);

#endif
