/* bridge.h: TEST-ONLY: Megatron-Bridge's tuned dense layouts
 * (tests/cost/ref/megatron_bridge_perf.csv) that ptdc can express (an H100,
 * no context parallelism, no Megatron-FSDP), evaluated in BF16 under the
 * megatron stack with the settings the performance recipes give. The runs
 * were FP8, so their step times do not check ptdc's BF16 ones; their memory
 * is a sanity check: FP8 keeps FP8 copies of the weights beside the BF16
 * ones, and Transformer Engine keeps some GEMM inputs for backward in FP8
 * (smaller), so the BF16 layout should need about what the run had, no more
 * than the GPU holds. */
#ifndef PTDC_TESTS_COST_BRIDGE_H
#define PTDC_TESTS_COST_BRIDGE_H

#include "passes.h"

typedef struct BridgeRow {
    char label[160];
    char precision[16];           /* as the run was measured */
    int gpus;
    double tokens_per_gpu;        /* measured, tokens/s per GPU (at that precision) */
    PassPrediction pred;          /* BF16 */
} BridgeRow;

/* The rows (heap; bridge_free). */
int bridge_bf16(const char *ref_dir, const char *model_dir, BridgeRow **rows);
void bridge_free(BridgeRow *rows, int n);

#endif
