/* test_ilp_warm.c: what the frontier walk keeps between budgets (IlpWarm,
 * issue 31) against solves from scratch. A layer's time/memory frontier is
 * walked as the search walks it (each point the fastest under a budget just
 * below the last one's memory) on a cache that solves every point from
 * scratch (PASS_ILP_COLD) and on caches that keep the reduction and GLPK's
 * model (PASS_ILP_KEEP_MODEL) and also the root basis (PASS_ILP_WARM_BASIS,
 * the default). Every point must agree with the cold one: feasibility, time
 * and memory to the last bit, and the strategy of every operator. From
 * another root basis GLPK may end on another choice of exactly the same
 * prices (on the DeepSeek-V3 layer: which shared-expert projection splits
 * the sequence, which layout the SwiGLU takes); ilp_canon (ilp_canon.c)
 * makes the answer the same whichever GLPK found, and the test prints how
 * many answers it moved. Real layers, priced by the real cost model: a
 * DeepSeek-V3 MoE layer (its MLA attention, 256 experts) on 16 x 4 A100s
 * and a LLaMA-3 8B layer on 8 x 8 H100s, with and without recomputation. */
#include "check.h"
#include "frontend.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PTDC_SOURCE_DIR
#define PTDC_SOURCE_DIR "."
#endif

typedef struct {
    const char *model, *gpu;
    FeSet set;                    /* a smaller model of the same layers (fewer of them) */
    int piece, dp, tp;            /* a layer between layers of its kind, on a dp x tp mesh */
    int64_t mb_seqs;
    int num_micro;
    PlanRecompute recompute;
} Case;

/* Walk c's frontier on `cache` (at most `max` points); per point its result
 * into r[]. Returns the points walked (the last infeasible one included). */
static int walk(const Case *c, const IrGraph *g, const PassCostCtx *ctx, PassIlpCache *cache,
                const PassIlpResult **r, int max)
{
    PassIlpQuery q;
    memset(&q, 0, sizeof q);
    q.first_piece = c->piece;
    q.npieces = 1;
    plan_mesh_make(&q.mesh, c->dp, c->tp, 8);
    q.mb_seqs = c->mb_seqs;
    q.num_micro = c->num_micro;
    q.zero = 1;
    q.recompute = c->recompute;
    q.inflight = 1;
    pass_ilp_pins(g, 0, 1, true, q.allow);
    q.require = PLAN_REQ_BATCH;
    int n = 0;
    while (n < max) {
        r[n] = pass_ilp_stage(cache, ctx, &pass_ilp_costs, g, &q);
        if (!r[n++]->feasible)
            break;
        q.budget = r[n - 1]->mem_bytes * (1 - 1e-4); /* SRC_FRONTIER_STEP */
    }
    return n;
}

static bool same_strategy(const PlanStrategy *a, const PlanStrategy *b)
{
    return memcmp(a->dim, b->dim, sizeof a->dim) == 0 && a->xchg == b->xchg;
}

/* The walk on a `reuse` cache against the cold walk rc[nc]; returns the
 * points whose strategies differ. */
static int compare(const Case *c, const IrGraph *g, const PassCostCtx *ctx, int reuse,
                   const PassIlpResult **rc, int nc)
{
    enum { MAX = 40 };
    const PassIlpResult *rw[MAX];
    PassIlpCache *cache = pass_ilp_cache_new();
    pass_ilp_cache_reuse(cache, reuse);
    int nw = walk(c, g, ctx, cache, rw, MAX), ties = 0;
    const char *rcn = plan_recompute_name(c->recompute);
    CHECK(nw == nc, "%s, recompute %s, reuse %d: %d points, %d cold", c->model, rcn, reuse, nw, nc);
    const IrPiece *L = &g->pieces[c->piece];
    for (int i = 0; i < nw && i < nc; i++) {
        const PassIlpResult *a = rw[i], *b = rc[i];
        CHECK(a->feasible == b->feasible, "%s, reuse %d, point %d: feasible %d, %d cold", c->model,
              reuse, i, a->feasible, b->feasible);
        if (!a->feasible || !b->feasible)
            continue;
        CHECK(a->step_s == b->step_s && a->mem_bytes == b->mem_bytes,
              "%s, recompute %s, reuse %d, point %d: %.9g s %.9g GiB, cold %.9g s %.9g GiB", c->model,
              rcn, reuse, i, a->step_s, a->mem_bytes / 1073741824.0, b->step_s,
              b->mem_bytes / 1073741824.0);
        int differ = 0;
        for (int j = 0; j < L->count; j++)
            differ += !same_strategy(&a->strategy[j], &b->strategy[j]);
        ties += differ > 0;
    }
    /* Every point after the first was solved on the kept model; with the
     * frontier, every one under a budget was answered from it. */
    int ws = pass_ilp_cache_warm(cache), fs = pass_ilp_cache_frontier(cache);
    CHECK(ws == nw - 1, "%s, reuse %d: %d solves on a kept model in %d points", c->model, reuse, ws, nw);
    CHECK(fs == (reuse == PASS_ILP_FRONTIER ? nw - 1 : 0), "%s, reuse %d: %d answers from a frontier in %d points",
          c->model, reuse, fs, nw);
    pass_ilp_cache_free(cache);
    return ties;
}

static void warm_against_cold(const Case *c)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", PTDC_SOURCE_DIR, c->model);
    IrArena *arena = ir_arena_new();
    IrGraph *g = fe_compile_file(arena, path, &c->set, c->set.name ? 1 : 0, 0);
    if (!g)
        ir_die("test: cannot compile %s", path);
    PassCluster cl;
    memset(&cl, 0, sizeof cl);
    if (!pass_gpu_preset(c->gpu, &cl.gpu))
        ir_die("test: no %s preset", c->gpu);
    cl.gpus_per_node = 8;
    cl.ngpus = c->dp * c->tp;
    PassCostCtx ctx = {.cl = &cl, .attention = PLAN_ATTN_FLASH};
    enum { MAX = 40 };
    const PassIlpResult *rc[MAX];
    PassIlpCache *cold = pass_ilp_cache_new();
    pass_ilp_cache_reuse(cold, PASS_ILP_COLD);
    int nc = walk(c, g, &ctx, cold, rc, MAX);
    const char *rcn = plan_recompute_name(c->recompute);
    CHECK(nc >= 5, "%s, recompute %s: only %d frontier points", c->model, rcn, nc);
    CHECK(pass_ilp_cache_warm(cold) == 0, "the cold cache reused %d models", pass_ilp_cache_warm(cold));
    int kept = compare(c, g, &ctx, PASS_ILP_KEEP_MODEL, rc, nc);
    CHECK(kept == 0, "%s, recompute %s: the kept model changed the strategies at %d points", c->model,
          rcn, kept);
    int ties = compare(c, g, &ctx, PASS_ILP_WARM_BASIS, rc, nc);
    CHECK(ties == 0, "%s, recompute %s: the kept basis changed the strategies at %d points", c->model,
          rcn, ties);
    int front = compare(c, g, &ctx, PASS_ILP_FRONTIER, rc, nc);
    CHECK(front == 0, "%s, recompute %s: the frontier changed the strategies at %d points", c->model,
          rcn, front);
    printf("%s, recompute %s: %d frontier points, the same with the kept model and basis and "
           "from the kept frontier; "
           "%d answers of the cold walk moved among ties (ilp_canon)\n",
           c->model, rcn, nc, pass_ilp_cache_canon(cold));
    pass_ilp_cache_free(cold);
    ir_graph_free(g);
    ir_arena_free(arena);
}

int main(void)
{
    /* DeepSeek-V3 with 3 dense and 3 MoE layers: piece 5 is the middle
     * MoE layer (0 the embedding). */
    const Case cases[] = {
        {"deepseek-v3.mdl", "a100-80gb", {"n_layers", "6"}, 5, 16, 4, 16, 30, PLAN_RECOMPUTE_NONE},
        {"llama3-8b.mdl", "h100-80gb", {NULL, NULL}, 2, 8, 8, 8, 16, PLAN_RECOMPUTE_NONE},
        {"llama3-8b.mdl", "h100-80gb", {NULL, NULL}, 2, 8, 8, 8, 16, PLAN_RECOMPUTE_FFN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        warm_against_cold(&cases[i]);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures != 0;
}
