/* test_piece_memo.c: the ranking's remembered piece costs (PassPieceMemo,
 * passes/cost/piece_memo.c; predict.c, piece_cost) give the predictions
 * costing every piece afresh gives, bit for bit, when consecutive plans
 * differ in one thing a piece's cost reads: the ZeRO stage, the
 * recomputation, where a stage starts, one node's strategy (a norm, the
 * residual add the next layer reads, the head), the mesh, the micro-batch,
 * the attention kernel, the precision, the stack. Each plan is predicted
 * through one memo after the plan it differs from, so a key that misses
 * the difference hands back the earlier plan's costs; each pair is checked
 * to differ without the memo, so that the comparison can fail. LLaMA-2 7B
 * with 8 layers on 16 and 32 GPUs under ptdc's stack, then Megatron's. */
#include "megatron.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

/* Every number of the two predictions that a piece's cost reaches. */
static bool same_prediction(const PassPrediction *a, const PassPrediction *b)
{
    if (a->step_time_s != b->step_time_s || a->peak_mem_bytes != b->peak_mem_bytes || a->npp != b->npp ||
        a->hw_flops != b->hw_flops || a->reshard_s != b->reshard_s || a->p2p_s != b->p2p_s ||
        a->dp_sync_s != b->dp_sync_s)
        return false;
    for (int i = 0; i < a->npp; i++)
        if (memcmp(&a->mem[i], &b->mem[i], sizeof a->mem[i]))
            return false;
    return true;
}

typedef struct Case {
    const char *what;
    Plan p;
    PassCostCtx c;
} Case;

/* A plan owning its arrays, a copy of p. */
static Plan copy_plan(const IrGraph *g, const Plan *p)
{
    Plan q = *p;
    q.stages = malloc(sizeof *q.stages * (size_t)p->nstages);
    memcpy(q.stages, p->stages, sizeof *q.stages * (size_t)p->nstages);
    q.strategy = malloc(sizeof *q.strategy * (size_t)(g->nfwd + 1));
    memcpy(q.strategy, p->strategy, sizeof *q.strategy * (size_t)g->nfwd);
    return q;
}

/* The first forward node of op `op` in piece `piece`, or -1. */
static int node_in(const IrGraph *g, int piece, IrOp op)
{
    const IrPiece *P = &g->pieces[piece];
    for (int id = P->first; id < P->first + P->count; id++)
        if (g->nodes[id].op == op)
            return id;
    return -1;
}

static void run(const IrGraph *g, Case *cs, int n)
{
    PassPieceMemo *memo = pass_piece_memo_new(false);
    PassPrediction prev;
    memset(&prev, 0, sizeof prev);
    for (int i = 0; i < n; i++) {
        PassPrediction fresh, kept;
        PassPredictCut cut = {INFINITY, INFINITY, 0, memo};
        pass_predict(&cs[i].c, g, &cs[i].p, &fresh);
        CHECK(pass_predict_cut(&cs[i].c, g, &cs[i].p, &cut, &kept));
        if (!same_prediction(&fresh, &kept))
            fprintf(stderr, "%s: step %.17g s with the memo, %.17g costed afresh\n", cs[i].what, kept.step_time_s,
                    fresh.step_time_s);
        CHECK(same_prediction(&fresh, &kept));
        /* the change matters: a memo keyed without it would fail above */
        if (i > 0 && same_prediction(&fresh, &prev))
            fprintf(stderr, "%s: predicts what the plan before did\n", cs[i].what);
        CHECK(i == 0 || !same_prediction(&fresh, &prev));
        pass_prediction_free(&prev);
        prev = fresh;
        pass_prediction_free(&kept);
    }
    CHECK(memo->hits > 0); /* (the pieces the changes leave alone) */
    pass_prediction_free(&prev);
    pass_piece_memo_free(memo);
}

static void test_llama(const char *models)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/llama2-7b.mdl", models);
    IrArena *a = ir_arena_new();
    IrGraph *g = mega_compile(a, path, "n_layers=8,seq=1024", 64);
    MegaLayout L = {.tp = 2, .pp = 2, .dp = 4, .v = 1, .micro_batch = 1, .global_batch = 64, .sp = true,
                    .zero = 1, .recompute = PLAN_RECOMPUTE_NONE, .attention = PLAN_ATTN_FLASH,
                    .gpus_per_node = 8};
    Plan base, other;
    if (!mega_plan(g, &L, &base))
        exit(1);
    L.tp = 4; /* another mesh, the same sequences a micro-batch */
    if (!mega_plan(g, &L, &other))
        exit(1);
    PassCluster cl = {.ngpus = 32, .gpus_per_node = 8};
    pass_gpu_preset("h100-80gb", &cl.gpu);
    PassCostCtx c = {.cl = &cl, .attention = PLAN_ATTN_FLASH};
    pass_stack_preset("ptdc", &c.st);
    enum { N = 16 };
    Case cs[N];
    int n = 0;
    cs[n++] = (Case){"the first plan", copy_plan(g, &base), c};
    cs[n] = (Case){"ZeRO 3", copy_plan(g, &base), c};
    cs[n++].p.zero = 3;
    cs[n] = (Case){"full recomputation on stage 1", copy_plan(g, &cs[n - 1].p), c};
    cs[n++].p.stages[1].recompute = PLAN_RECOMPUTE_FULL;
    /* stage 1 starts a layer later: that layer's input no longer crosses */
    cs[n] = (Case){"stage 1 a layer later", copy_plan(g, &cs[n - 1].p), c};
    cs[n].p.stages[0].npieces++, cs[n].p.stages[1].first_piece++, cs[n].p.stages[1].npieces--;
    n++;
    /* layer 5's first norm replicated: its own node */
    int l5 = 1 + 5, l4 = 1 + 4, head = g->npieces - 1;
    cs[n] = (Case){"layer 5's norm replicated", copy_plan(g, &cs[n - 1].p), c};
    cs[n++].p.strategy[node_in(g, l5, IR_OP_RMSNORM)] = (PlanStrategy){PLAN_NO_DIMS, 0};
    /* layer 4's last add (whose sum layer 5 reads) replicated: a producer */
    int add4 = -1;
    for (int id = g->pieces[l4].first; id < g->pieces[l4].first + g->pieces[l4].count; id++)
        if (g->nodes[id].op == IR_OP_ADD)
            add4 = id;
    cs[n] = (Case){"layer 4's last add replicated", copy_plan(g, &cs[n - 1].p), c};
    cs[n++].p.strategy[add4] = (PlanStrategy){PLAN_NO_DIMS, 0};
    cs[n] = (Case){"the head's matmul replicated", copy_plan(g, &cs[n - 1].p), c};
    cs[n++].p.strategy[node_in(g, head, IR_OP_MATMUL)] = (PlanStrategy){PLAN_NO_DIMS, 0};
    cs[n] = (Case){"another mesh", copy_plan(g, &other), c};
    cs[n].p.zero = 3, cs[n].p.stages[1].recompute = PLAN_RECOMPUTE_FULL;
    n++;
    cs[n] = (Case){"a micro-batch of 2", copy_plan(g, &cs[n - 1].p), c};
    cs[n].p.mb_seqs *= 2, cs[n].p.num_micro /= 2;
    n++;
    cs[n] = (Case){"materialised attention", copy_plan(g, &cs[n - 1].p), c};
    cs[n++].p.attention = PLAN_ATTN_MATERIALIZED;
    cs[n] = (Case){"FP8 linear layers", copy_plan(g, &cs[n - 1].p), c};
    cs[n++].p.precision = PLAN_PREC_FP8;
    PassCostCtx cm = c;
    pass_stack_preset("megatron", &cm.st);
    cs[n] = (Case){"Megatron's stack", copy_plan(g, &cs[n - 1].p), cm};
    n++;
    run(g, cs, n);
    for (int i = 0; i < n; i++)
        mega_plan_free(&cs[i].p);
    mega_plan_free(&base);
    mega_plan_free(&other);
    ir_graph_free(g);
    ir_arena_free(a);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_piece_memo MODELS_DIR\n");
        return 2;
    }
    test_llama(argv[1]);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
