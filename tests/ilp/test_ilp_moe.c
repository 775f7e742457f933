/* test_ilp_moe.c: the ILP's expert layouts. Qwen3-30B-A3B's layer (128
 * experts of width 768, top-8) on one node of 8 H100s as dp 4 x tp 2 with
 * sequence parallelism, ZeRO-1, 4 sequences of 4,096 per micro-batch and 64
 * micro-batches, priced by the real cost model, within one layer's share of
 * the GPU's usable memory (48 layers, no pipeline). Unpinned, the ILP
 * exchanges the experts over both axes at once (EP 8 across dp x tp, ETP 1:
 * Megatron-Core's parallel folding), and each single-axis choice the --ep
 * pins leave is worse by the ILP's own measure. Why it pays: memory. The
 * experts are 95% of the parameters; EP 1 or EP 2 over tp leaves 128 or 64
 * on every rank, which does not fit at ZeRO-1. EP 4 over dp fits only with
 * the experts' width split over tp as well (ETP 2: the same bytes as EP 8),
 * which all-reduces every expert's output over tp; the fold's one
 * all-to-all over all 8 ranks stays inside the node (NVLink), and each rank
 * holds 16 whole experts whose gradients need no reduction (expert-DP 1).
 * Without the memory budget EP 2 over tp (tokens gathered) is the fastest:
 * the test would fail, as it should, if memory stopped counting. */
#include "check.h"
#include "frontend.h"
#include "passes.h"

#include <stdlib.h>
#include <string.h>

#ifndef PTDC_SOURCE_DIR
#define PTDC_SOURCE_DIR "."
#endif

static IrArena *arena;
static IrGraph *g;
static PassCluster cl;
static PassCostCtx ctx;
static PlanMesh mesh; /* dp 4 x tp 2 on one node of 8 */
static double budget; /* one layer's share of the usable memory */

static const PassIlpResult *solve(PassIlpCache *cache, unsigned ep_axes, const IrNode **moe,
                                  PlanStrategy *moe_st)
{
    PassIlpQuery q;
    memset(&q, 0, sizeof q);
    q.first_piece = 2; /* a layer in the middle of the model */
    q.npieces = 1;
    q.mesh = mesh;
    q.mb_seqs = 4;
    q.num_micro = 64;
    q.zero = 1;
    q.recompute = PLAN_RECOMPUTE_NONE;
    q.inflight = 1;
    q.budget = budget;
    pass_ilp_pins(g, 0, 1, true, q.allow);
    q.require = PLAN_REQ_BATCH | PLAN_REQ_WEIGHTS | PLAN_REQ_SEQ_NORMS;
    q.ep_axes = ep_axes;
    const PassIlpResult *r = pass_ilp_stage(cache, &ctx, &pass_ilp_costs, g, &q);
    const IrPiece *L = &g->pieces[q.first_piece];
    *moe = NULL;
    for (int j = 0; r->feasible && j < L->count; j++)
        if (plan_routed_expert_dim(g, &g->nodes[L->first + j]) >= 0) {
            *moe = &g->nodes[L->first + j];
            *moe_st = r->strategy[j];
        }
    return r;
}

int main(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/qwen3-30b-a3b.mdl", PTDC_SOURCE_DIR);
    arena = ir_arena_new();
    g = fe_compile_file(arena, path, NULL, 0, 0);
    if (!g)
        ir_die("test: cannot compile %s", path);
    if (!pass_gpu_preset("h100-80gb", &cl.gpu))
        ir_die("test: no h100-80gb preset");
    cl.gpus_per_node = 8;
    cl.ngpus = 8;
    ctx = (PassCostCtx){.cl = &cl, .attention = PLAN_ATTN_FLASH};
    plan_mesh_make(&mesh, 4, 2, 8);
    int nlayers = 0;
    for (int p = 0; p < g->npieces; p++)
        nlayers += g->pieces[p].rep == g->pieces[2].rep;
    budget = pass_usable_bytes(&ctx) / nlayers;
    printf("budget %.3f GiB a layer (%d layers)\n", budget / 1073741824.0, nlayers);

    PassIlpCache *cache = pass_ilp_cache_new();
    const IrNode *moe;
    PlanStrategy st;
    const PassIlpResult *r = solve(cache, 0, &moe, &st);
    CHECK(r->feasible && moe, "no plan, or no moe node in the layer");
    double free_s = r->feasible ? r->step_s : 0;
    if (moe) {
        CHECK(st.xchg == 3u && plan_ep_degree(g, moe, &mesh, &st) == 8,
              "the unpinned ILP's moe splits dims %d, %d (exchange %u), not the experts over dp x tp", st.dim[0],
              st.dim[1], (unsigned)st.xchg);
        printf("unpinned: %.4f s a layer-step, %.3f GiB, moe exchange bits %u (EP %d)\n", free_s,
               r->mem_bytes / 1073741824.0, (unsigned)st.xchg, plan_ep_degree(g, moe, &mesh, &st));
    }
    /* The --ep pins' single-axis layouts (ilp.h: bit 0 none, 2 << a axis a). */
    static const struct {
        unsigned bits;
        const char *what;
    } alt[] = {{1, "EP 1"}, {2, "EP 4 over dp"}, {4, "EP 2 over tp"}};
    for (int i = 0; i < 3; i++) {
        pass_ilp_cache_free(cache); /* (the cache keys on the query's pins too; fresh anyway) */
        cache = pass_ilp_cache_new();
        const PassIlpResult *a = solve(cache, alt[i].bits, &moe, &st);
        CHECK(!a->feasible || a->step_s > free_s * (1 + 1e-6), "%s: %.4f s, not slower than the fold's %.4f s",
              alt[i].what, a->step_s, free_s);
        if (a->feasible)
            printf("%-13s %.4f s a layer-step, %.3f GiB (moe dims %d, %d, exchange bits %u)\n", alt[i].what, a->step_s,
                   a->mem_bytes / 1073741824.0, st.dim[0], st.dim[1], moe ? (unsigned)st.xchg : 0u);
        else
            printf("%-13s does not fit the budget\n", alt[i].what);
    }
    pass_ilp_cache_free(cache);
    ir_graph_free(g);
    ir_arena_free(arena);
    printf("ilp moe: %d failures\n", failures);
    return failures ? 1 : 0;
}
