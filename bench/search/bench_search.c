/* bench_search.c: how long the planner takes, median of N runs (default 5),
 * each with a fresh ILP cache as in one `ptdc MODEL --gpus N --plan-only`:
 *   LLaMA-2 70B on 1024 A100-80GB (target: under 5 s)
 *   LLaMA-2 7B on 64 A100-80GB (target: under 1 s)
 * plus the Megatron SC21 1T model on 3072 GPUs for scale. Prints the wall
 * and CPU time of the search (the frontend's few ms are excluded; the
 * command-line numbers in docs/planner.md include them), the plan, and the
 * search's own counts.
 *
 * usage: bench_search [RUNS] */
#include "../bench.h"
#include "frontend.h"
#include "passes.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void run(const char *model, const FeSet *sets, int nsets, int64_t gb, int gpus, int runs)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", PTDC_SOURCE_DIR, model);
    IrArena *a = ir_arena_new();
    IrGraph *g = fe_compile_file(a, path, sets, nsets, gb);
    if (!g) {
        fprintf(stderr, "cannot compile %s\n", path);
        exit(1);
    }
    IrGraph *sk = pass_search_skeleton(a, g);
    PassCluster cl = {.ngpus = gpus, .gpus_per_node = 8};
    pass_gpu_preset("a100-80gb", &cl.gpu);
    PassCostCtx c = {.cl = &cl};
    PassSearchOpts o;
    memset(&o, 0, sizeof o);
    pass_search_pins_none(&o.pins);
    o.gpus = gpus;
    o.keep = 1;
    o.skeleton = sk;
    double *w = malloc(sizeof(double) * (size_t)runs), *u = malloc(sizeof(double) * (size_t)runs);
    PassSearchResult r;
    for (int i = 0; i < runs; i++) {
        PassIlpCache *cache = pass_ilp_cache_new();
        double w0 = wall(), u0 = cpu();
        if (!pass_search(&c, g, &o, cache, &r) || !r.found) {
            fprintf(stderr, "%s on %d: no plan\n", model, gpus);
            exit(1);
        }
        w[i] = wall() - w0, u[i] = cpu() - u0;
        if (i + 1 < runs)
            pass_search_result_free(&r);
        pass_ilp_cache_free(cache);
    }
    qsort(w, (size_t)runs, sizeof *w, cmp);
    qsort(u, (size_t)runs, sizeof *u, cmp);
    char lay[256];
    printf("%-16s %5d GPUs: median %.3f s wall (min %.3f, max %.3f), %.3f s CPU; %ld layouts, "
           "%ld ranked, %ld of %ld meshes solved, %d ILP solves\n", model, gpus, w[runs / 2], w[0],
           w[runs - 1], u[runs / 2], r.stats.candidates, r.stats.evaluated, r.stats.groups_solved,
           r.stats.groups, r.stats.ilp_solves);
    printf("    plan: %s, step %.3f s, MFU %.1f%%\n", plan_layout_str(&r.alt[0].layout, lay, sizeof lay),
           r.alt[0].pred.step_time_s, 100 * r.alt[0].pred.mfu);
    pass_search_result_free(&r);
    free(w);
    free(u);
    pass_search_skeleton_free(sk);
    ir_graph_free(g);
    ir_arena_free(a);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1)
        runs = 1;
    run("llama2-70b.mdl", NULL, 0, 0, 1024, runs);
    run("llama2-7b.mdl", NULL, 0, 0, 64, runs);
    FeSet t1[] = {{"n_layers", "128"}, {"d_model", "25600"}, {"n_heads", "160"}};
    run("gpt.mdl", t1, 3, 3072, 3072, runs);
    return 0;
}
