/* bridge.c: TEST-ONLY: the memory of Megatron-Bridge's tuned dense layouts
 * (megatron_bridge_perf.csv) in BF16, as a sanity check of the megatron
 * stack's memory model (bridge.h). */
#include "bridge.h"

#include "megatron.h"
#include "refcsv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The dense models of the table and ptdc's files of them. */
static const struct {
    const char *model, *mdl;
} models_of[] = {
    {"LLAMA3_8B", "llama3-8b.mdl"}, {"LLAMA3_70B", "llama3-70b.mdl"}, {"LLAMA3.1_405B", "llama3-405b.mdl"},
};

static bool empty_or(const char *s, const char *v) { return !*s || !strcmp(s, v); }

int bridge_bf16(const char *ref, const char *models, BridgeRow **out)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/megatron_bridge_perf.csv", ref);
    RefCsv *c = ref_load(path);
    BridgeRow *R = NULL;
    int n = 0;
    for (int r = 0; r < c->nrows; r++) {
        /* Dense rows on a GPU ptdc has a preset of, without context
         * parallelism or Megatron-FSDP (which ptdc cannot express). */
        const char *mdl = NULL;
        for (size_t i = 0; i < sizeof models_of / sizeof models_of[0]; i++)
            if (!strcmp(ref_get(c, r, "model"), models_of[i].model))
                mdl = models_of[i].mdl;
        if (strcmp(ref_get(c, r, "arch"), "dense") || strcmp(ref_get(c, r, "gpu"), "H100") || !mdl ||
            !empty_or(ref_get(c, r, "cp"), "1") || !empty_or(ref_get(c, r, "fsdp"), "0"))
            continue;
        int tp = atoi(ref_get(c, r, "tp")), pp = atoi(ref_get(c, r, "pp"));
        int v = *ref_get(c, r, "vp") ? atoi(ref_get(c, r, "vp")) : 1;
        int gpus = atoi(ref_get(c, r, "n_gpus")), mb = atoi(ref_get(c, r, "micro_batch"));
        int64_t gb = atoll(ref_get(c, r, "global_batch"));
        char sets[64];
        snprintf(sets, sizeof sets, "seq=%s", ref_get(c, r, "seq_len"));
        snprintf(path, sizeof path, "%s/%s", models, mdl);
        IrArena *a = ir_arena_new();
        IrGraph *g = mega_compile(a, path, sets, gb);
        if (!g) {
            fprintf(stderr, "cannot compile %s\n", path);
            exit(1);
        }
        MegaLayout L = {.tp = tp, .pp = pp, .dp = gpus / (tp * pp), .v = v, .micro_batch = mb,
                        .global_batch = gb, .sp = tp > 1, .zero = 1, .recompute = PLAN_RECOMPUTE_NONE,
                        .attention = PLAN_ATTN_FLASH, .gpus_per_node = 8};
        Plan plan;
        if (!mega_plan(g, &L, &plan))
            exit(1);
        PassCluster cl = {.ngpus = gpus, .gpus_per_node = 8};
        pass_gpu_preset("h100-80gb", &cl.gpu);
        /* The megatron preset with what the performance recipes set
         * (Megatron-Bridge src/megatron/bridge/perf_recipes/_common.py
         * _benchmark_common and the H100 llama recipes): gradients reduced
         * in bf16 (grad_reduce_in_fp32 False), Transformer Engine's fused
         * cross-entropy (cross_entropy_fusion_impl "te": the loss writes its
         * gradient over the logits, no fp32 copy kept), and
         * PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the caching
         * allocator maps pages into one growing segment: no fragmentation
         * term). */
        PassCostCtx cc = {.cl = &cl, .attention = L.attention};
        pass_stack_preset("megatron", &cc.st);
        cc.st.grad_bytes = 2;
        cc.st.loss_fp32 = false;
        cc.st.grad_in_place = true;
        cc.st.frag_act = 0;
        R = realloc(R, sizeof *R * (size_t)(n + 1));
        BridgeRow *w = &R[n++];
        memset(w, 0, sizeof *w);
        snprintf(w->label, sizeof w->label, "%s %s %dx%s t%d p%d v%d d%d mb%d gb%lld",
                 ref_get(c, r, "release"), ref_get(c, r, "model"), gpus, ref_get(c, r, "gpu"), tp, pp,
                 v, L.dp, mb, (long long)gb);
        snprintf(w->precision, sizeof w->precision, "%s", ref_get(c, r, "precision"));
        w->tokens_per_gpu = ref_num(c, r, "tokens_per_s_per_gpu");
        w->gpus = gpus;
        pass_predict(&cc, g, &plan, &w->pred);
        mega_plan_free(&plan);
        ir_graph_free(g);
        ir_arena_free(a);
    }
    ref_free(c);
    *out = R;
    return n;
}

void bridge_free(BridgeRow *rows, int n)
{
    for (int i = 0; i < n; i++)
        pass_prediction_free(&rows[i].pred);
    free(rows);
}
