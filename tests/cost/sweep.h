/* sweep.h: TEST-ONLY evaluation of the reference tables through the cost
 * model, shared by the calibration test and the report generator. */
#ifndef PTDC_TESTS_COST_SWEEP_H
#define PTDC_TESTS_COST_SWEEP_H

#include "passes.h"

/* One run of the LLaMA-13B layout sweep and the model's verdict on it. */
typedef struct SweepRow {
    int tp, pp, dp, mb;
    PlanRecompute recompute;
    PassAttnKernel kernel;
    const char *attn;             /* the table's attention_impl */
    bool rms_kernel;
    bool ok;                      /* measured status */
    double mfu, step_s;           /* measured (ok rows) */
    PassPrediction pred;
} SweepRow;

/* The assumptions about the Aleph Alpha stack (docs/cost-model.md). */
typedef struct SweepStack {
    bool sp;
    int zero;
    int grad_bytes;
    bool loss_fp32;
    double alloc_reserve;
    double frag_act;
    bool grad_accum_unfused;
    bool swiglu_unfused;
    bool attn_dropout;
} SweepStack;

extern const SweepStack sweep_stack;

/* Run every row of layouts_llama13b_seq2048_64xA100.csv (in ref_dir) on
 * models/llama2-13b.mdl (in model_dir) with vocab 128000 and seq 2048.
 * Returns the row count; *rows is heap (sweep_free). */
int sweep_run(const char *ref_dir, const char *model_dir, const SweepStack *st, SweepRow **rows);
void sweep_free(SweepRow *rows, int n);

/* Run a shell command line (the sweep through ptdc's command line): its
 * stdout (heap, NUL-terminated; NULL if it could not start) and its exit
 * status in *status (-1 when it did not exit). */
char *sweep_capture(const char *cmd, int *status);

/* Spearman rank correlation (average ranks for ties). */
double spearman(const double *x, const double *y, int n);

#endif
