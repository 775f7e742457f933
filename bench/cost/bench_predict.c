/* bench_predict.c: how long pass_predict takes to evaluate one complete
 * plan (the search calls it for every candidate): LLaMA-2 13B (40 layers)
 * and GPT-3 175B (96 layers) under several layouts. Prints microseconds per
 * evaluation; exits 1 if any exceeds the budget given as argv[2] (default
 * 1000 us), so `ctest -L bench` can hold the line.
 *   usage: bench_predict MODELS_DIR [BUDGET_US] */
#include "../bench.h"
#include "megatron.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_predict MODELS_DIR [BUDGET_US]\n");
        return 2;
    }
    double budget = argc > 2 ? atof(argv[2]) : 1000;
    struct {
        const char *file, *sets;
        int64_t gb;
        MegaLayout L;
    } cases[] = {
        {"llama2-13b.mdl", "seq=2048,vocab=128000", 2048,
         {.tp = 1, .pp = 1, .dp = 64, .micro_batch = 1, .zero = 1}},
        {"llama2-13b.mdl", "seq=2048,vocab=128000", 2048,
         {.tp = 2, .pp = 2, .dp = 16, .micro_batch = 2, .sp = true, .zero = 1,
          .recompute = PLAN_RECOMPUTE_FULL}},
        {"llama2-13b.mdl", "seq=2048,vocab=128000", 2048,
         {.tp = 4, .pp = 4, .dp = 4, .v = 2, .micro_batch = 1, .sp = true, .zero = 1}},
        {"gpt3-175b.mdl", NULL, 1536,
         {.tp = 8, .pp = 8, .dp = 16, .v = 3, .micro_batch = 1, .sp = true, .zero = 1,
          .recompute = PLAN_RECOMPUTE_SELECTIVE}},
        {"gpt3-175b.mdl", NULL, 1536,
         {.tp = 8, .pp = 16, .dp = 8, .micro_batch = 1, .sp = false, .zero = 0,
          .recompute = PLAN_RECOMPUTE_FULL, .attention = PLAN_ATTN_MATERIALIZED}},
    };
    PassCluster cl = {.gpus_per_node = 8};
    pass_gpu_preset("a100-80gb", &cl.gpu);
    int over = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", argv[1], cases[i].file);
        IrArena *a = ir_arena_new();
        IrGraph *g = mega_compile(a, path, cases[i].sets, cases[i].gb);
        if (!g)
            return 1;
        MegaLayout L = cases[i].L;
        L.global_batch = cases[i].gb;
        L.gpus_per_node = 8;
        Plan p;
        if (!mega_plan(g, &L, &p))
            return 1;
        cl.ngpus = L.tp * L.pp * L.dp;
        PassCostCtx c = {.cl = &cl, .attention = L.attention};
        PassPrediction r;
        /* Warm up, then time enough evaluations for a stable mean. */
        pass_predict(&c, g, &p, &r);
        pass_prediction_free(&r);
        int n = 0;
        double t0 = wall(), t = 0;
        while ((t = wall() - t0) < 0.3 || n < 20) {
            pass_predict(&c, g, &p, &r);
            pass_prediction_free(&r);
            n++;
        }
        double us = t / n * 1e6;
        over += us > budget;
        printf("%-16s tp %d pp %2d dp %2d v %d mb %d %-9s %5d nodes: %8.1f us per plan%s\n",
               cases[i].file, L.tp, L.pp, L.dp, L.v > 0 ? L.v : 1, L.micro_batch,
               plan_recompute_name(L.recompute), g->nfwd, us, us > budget ? "  OVER BUDGET" : "");
        mega_plan_free(&p);
        ir_graph_free(g);
        ir_arena_free(a);
    }
    return over != 0;
}
