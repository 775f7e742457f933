/* test_frame_search.c: the framework search's pruning loses nothing. For
 * models and GPU counts under the megatron and fsdp stacks (with the
 * emitters' layout rules), rep_framework_search must find the same best
 * plan (layout and step time) as the same search with o.exhaustive, which
 * evaluates every micro-batch with every recomputation policy; and that
 * plan must be at least as fast as every fitting layout of the exhaustive
 * run it kept; and its memos change no plan it keeps (memo_same).
 * usage: test_frame_search MODELS_DIR */
#include "passes.h"
#include "report.h"

#include "frontend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void one(const char *models, const char *model, const char *sets, int gpus, const char *gpu,
                const char *stack)
{
    char path[1024], buf[256], lay[256], lay2[256], why[512];
    snprintf(path, sizeof path, "%s/%s", models, model);
    IrArena *arena = ir_arena_new();
    FeSet fs[4];
    int nfs = 0;
    if (sets) {
        snprintf(buf, sizeof buf, "%s", sets);
        for (char *t = strtok(buf, ","); t && nfs < 4; t = strtok(NULL, ",")) {
            char *eq = strchr(t, '=');
            *eq = 0;
            fs[nfs].name = ir_strdup(arena, t);
            fs[nfs].value = ir_strdup(arena, eq + 1);
            nfs++;
        }
    }
    IrGraph *g = fe_compile_file(arena, path, fs, nfs, 0);
    if (!g)
        exit(1);
    PassCluster cl = {.ngpus = gpus, .gpus_per_node = 8};
    pass_gpu_preset(gpu, &cl.gpu);
    PassCostCtx c = {.cl = &cl, .attention = PLAN_ATTN_FLASH};
    pass_stack_preset(stack, &c.st);
    RepFrameLayoutFn *ok = !strcmp(stack, "megatron") ? rep_megatron_layout : rep_torchtitan_layout;
    PassSearchOpts o = {.gpus = gpus, .keep = 64};
    o.pins.recompute = o.pins.sp = o.pins.zero = o.pins.schedule = -1;
    PassSearchResult fast, all;
    rep_framework_search(&c, g, &o, ok, &fast, why, sizeof why);
    o.exhaustive = true;
    rep_framework_search(&c, g, &o, ok, &all, why, sizeof why);
    bool good = fast.found == all.found;
    if (good && fast.found) {
        good = fast.alt[0].pred.step_time_s == all.alt[0].pred.step_time_s;
        for (int i = 0; i < all.nalt; i++)
            good &= fast.alt[0].pred.step_time_s <= all.alt[i].pred.step_time_s;
    }
    printf("%s %s%s%s on %d %s, %s: %s %.4f s (%ld evaluated) vs every layout %s %.4f s (%ld)\n",
           good ? "ok  " : "FAIL", model, sets ? " " : "", sets ? sets : "", gpus, gpu, stack,
           fast.found ? plan_layout_str(&fast.alt[0].layout, lay, sizeof lay) : "none",
           fast.found ? fast.alt[0].pred.step_time_s : 0, fast.stats.evaluated,
           all.found ? plan_layout_str(&all.alt[0].layout, lay2, sizeof lay2) : "none",
           all.found ? all.alt[0].pred.step_time_s : 0, all.stats.evaluated);
    failures += !good;
    pass_search_result_free(&fast);
    pass_search_result_free(&all);
    ir_graph_free(g);
    ir_arena_free(arena);
}

/* The search's memos (PassMemo: the graph's facts; RepFrameMemo: each
 * mesh's strategies) change nothing: the 64 best plans, their layouts,
 * strategies and predictions equal those of the same search with both off
 * (PTDC_NO_MEMO). In MXFP8 with the end layers bf16 and the logits'
 * gradient over them (what the memos keep), on uneven splits (7 layers). */
static void memo_same(const char *models)
{
    char path[1024], why[512];
    snprintf(path, sizeof path, "%s/qwen3-30b-a3b.mdl", models);
    IrArena *arena = ir_arena_new();
    FeSet fs[1] = {{"n_layers", "7"}};
    IrGraph *g = fe_compile_file(arena, path, fs, 1, 0);
    if (!g)
        exit(1);
    PassCluster cl = {.ngpus = 16, .gpus_per_node = 8};
    pass_gpu_preset("b200", &cl.gpu);
    PassCostCtx c = {.cl = &cl, .attention = PLAN_ATTN_FLASH, .prec = PLAN_PREC_MXFP8};
    pass_stack_preset("megatron", &c.st);
    c.st.grad_in_place = true;
    c.st.lp_bf16_first = c.st.lp_bf16_last = 1;
    PassSearchOpts o = {.gpus = 16, .keep = 64};
    o.pins.recompute = o.pins.sp = o.pins.zero = o.pins.schedule = -1;
    PassSearchResult with, without;
    rep_framework_search(&c, g, &o, rep_megatron_layout, &with, why, sizeof why);
    setenv("PTDC_NO_MEMO", "1", 1);
    rep_framework_search(&c, g, &o, rep_megatron_layout, &without, why, sizeof why);
    unsetenv("PTDC_NO_MEMO");
    int differ = with.nalt != without.nalt || with.stats.evaluated != without.stats.evaluated;
    for (int i = 0; i < with.nalt && i < without.nalt; i++) {
        const PassSearchAlt *a = &with.alt[i], *b = &without.alt[i];
        differ += a->pred.step_time_s != b->pred.step_time_s || a->pred.peak_mem_bytes != b->pred.peak_mem_bytes ||
                  a->pred.model_flops != b->pred.model_flops || memcmp(&a->layout, &b->layout, sizeof a->layout) ||
                  memcmp(a->plan.axis, b->plan.axis, sizeof a->plan.axis) ||
                  memcmp(a->plan.nested, b->plan.nested, sizeof a->plan.nested) ||
                  memcmp(a->plan.strategy, b->plan.strategy, sizeof *a->plan.strategy * (size_t)g->nfwd);
    }
    printf("%s memos: %d plans (%ld evaluated) with, %d (%ld) without, %d differ\n", differ ? "FAIL" : "ok  ",
           with.nalt, with.stats.evaluated, without.nalt, without.stats.evaluated, differ);
    failures += differ != 0 || with.nalt == 0;
    pass_search_result_free(&with);
    pass_search_result_free(&without);
    ir_graph_free(g);
    ir_arena_free(arena);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_frame_search MODELS_DIR\n");
        return 2;
    }
    const char *m = argv[1];
    one(m, "llama2-7b.mdl", "n_layers=8", 16, "a100-80gb", "megatron");
    one(m, "llama2-7b.mdl", "n_layers=8", 16, "a100-80gb", "fsdp");
    one(m, "llama3-70b.mdl", "n_layers=16", 32, "h100-80gb", "megatron");
    /* 14 layers + the embedding and the loss: 16 chunks, the splits of
     * --account-for-embedding/loss-in-pipeline-split (frame_search.c) */
    one(m, "llama3-70b.mdl", "n_layers=14", 32, "h100-80gb", "megatron");
    one(m, "gpt3-13b.mdl", "n_layers=8", 16, "a100-40gb", "megatron");
    one(m, "llama3-8b.mdl", "n_layers=8", 8, "a100-40gb", "fsdp");
    one(m, "tiny-llama.mdl", NULL, 8, "a100-80gb", "megatron");
    /* Memory-bound: recomputation and small micro-batches decide. */
    one(m, "llama2-13b.mdl", "seq=8192", 16, "a100-40gb", "megatron");
    one(m, "llama2-13b.mdl", "seq=8192", 16, "a100-40gb", "fsdp");
    /* Experts: EP over every degree Megatron-Core folds (below DP, across
     * dp x tp) beside the whole axes, each pruned as the dense layouts are. */
    one(m, "qwen3-30b-a3b.mdl", "n_layers=4", 16, "h100-80gb", "megatron");
    memo_same(m);
    printf("%s\n", failures ? "FAIL" : "ok");
    return failures != 0;
}
