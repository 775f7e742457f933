/* megatron.h: TEST-ONLY helper. Builds Megatron-style plans from the named
 * dims of a LLaMA/GPT graph, standing in for the ILP until it exists: the
 * product never uses it. Column-parallel QKV and gate/up (split the heads /
 * d_ff dims), row-parallel out and down (split the contracted dim),
 * vocabulary-parallel embedding, LM head and loss; with sequence parallelism
 * norms and residuals split the sequence; data parallelism splits the batch
 * on the other axis. Pipeline stages take equal runs of layers, the
 * embedding on the first and the head on the last. */
#ifndef PTDC_TESTS_COST_MEGATRON_H
#define PTDC_TESTS_COST_MEGATRON_H

#include "passes.h"

typedef struct MegaLayout {
    int tp, pp, dp, v;            /* v: model chunks per pipeline rank (1 = plain 1F1B) */
    int micro_batch;              /* sequences per data-parallel replica per micro-batch */
    int64_t global_batch;         /* sequences per step */
    bool sp;
    int zero;
    PlanRecompute recompute;
    PlanAttention attention;
    int gpus_per_node;
} MegaLayout;

/* Fill plan (heap arrays; mega_plan_free). False with a message on stderr if
 * the layout does not divide the model. */
bool mega_plan(const IrGraph *g, const MegaLayout *L, Plan *plan);
void mega_plan_free(Plan *plan);

/* Compile a model file with --set overrides "a=1,b=2" (NULL for none). */
IrGraph *mega_compile(IrArena *a, const char *path, const char *sets, int64_t global_batch);

#endif
