/* test_ssd_cost.c: the cost model's FLOPs of Mamba-2's scan (passes/cost/
 * cost_ops.c pass_opcost_SSD) against counts made by hand, here, from
 * tiny-hybrid's sizes (nothing below calls passes/cost to decide what a
 * number should be), and conv1d and softplus counted as memory-bound (no
 * FLOPs).
 *
 * Model: tiny-hybrid (models/tiny-hybrid.mdl): H = 4 Mamba heads of P = 8, a
 * state of N = 16, one group of B and C, S = 32; micro-batches of Bt = 4
 * sequences. mamba_ssm's chunked SSD with chunks of Q = min(S, 128) = 32,
 * so one chunk: per chunk and head the GEMMs C B^T (Q x Q over N, per group),
 * (C B^T) x (Q x P over Q), the chunk state B^T x (N x P over Q) and C S_in
 * (Q x P over N), 2 M N K each; backward two GEMMs per forward GEMM plus the
 * chunk states recomputed. With the heads split over tp = 2 each rank runs
 * half the heads and (one group, read whole) all of C B^T. */
#include "megatron.h"

#include "frontend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

enum { H = 4, P = 8, N = 16, S = 32, BT = 4, GB = 16, Q = 32, CHUNKS = 1 };

static void check_eq(const char *what, double got, double want)
{
    bool ok = fabs(got - want) <= 1e-9 * fabs(want);
    printf("  %-56s %14.0f  want %14.0f  %s\n", what, got, want, ok ? "ok" : "FAIL");
    failures += !ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_ssd_cost MODELS_DIR\n");
        return 2;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/tiny-hybrid.mdl", argv[1]);
    IrArena *a = ir_arena_new();
    IrGraph *g = mega_compile(a, path, NULL, 0);
    if (!g || g->global_batch != GB) {
        fprintf(stderr, "cannot compile %s (or its sizes changed: the counts are for H=4 P=8 N=16 S=32)\n", path);
        return 2;
    }
    PassCluster cl;
    memset(&cl, 0, sizeof cl);
    pass_gpu_preset("h100-80gb", &cl.gpu);
    cl.ngpus = 2;
    cl.gpus_per_node = 8;
    PassCostCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.cl = &cl;
    ctx.attention = PLAN_ATTN_FLASH;
    int heads = ir_dim_find(g, "m_heads"), nssd = 0;
    for (int tp = 1; tp <= 2; tp *= 2) {
        MegaLayout ml = {tp, 1, 1, 1, BT, GB, false, 0, PLAN_RECOMPUTE_NONE, PLAN_ATTN_FLASH, 8};
        Plan plan;
        if (!mega_plan(g, &ml, &plan))
            return 2;
        int64_t dim[64];
        ir_dim_sizes(g, plan.mb_seqs, dim);
        double h = (double)H / tp;
        double cb = 2.0 * Q * Q * N * BT * CHUNKS;                  /* C B^T, one group */
        double per_head = 2.0 * Q * P * Q + 2.0 * N * P * Q + 2.0 * Q * P * N;
        double fwd = cb + per_head * BT * h * CHUNKS;
        double bwd = 2 * fwd + 2.0 * N * P * Q * BT * h * CHUNKS; /* + the states recomputed */
        printf("tp %d:\n", tp);
        for (int i = 0; i < g->nfwd; i++) {
            const IrNode *n = &g->nodes[i];
            PlanStrategy s = plan.strategy[i];
            if (n->op == IR_OP_SSD && tp > 1)
                s.dim[1] = (int16_t)heads; /* the heads over tp, B and C read whole */
            PassNodeCost c;
            pass_cost_node(&ctx, g, n, &plan.mesh, &s, dim, &c);
            if (n->op == IR_OP_SSD) {
                nssd++;
                check_eq("ssd forward FLOPs", c.flops_fwd, fwd);
                check_eq("ssd backward FLOPs", c.flops_bwd, bwd);
            } else if (n->op == IR_OP_CONV1D || n->op == IR_OP_SOFTPLUS) {
                check_eq(n->op == IR_OP_CONV1D ? "conv1d FLOPs (memory-bound)" : "softplus FLOPs (memory-bound)",
                         c.flops_fwd + c.flops_bwd, 0);
                if (!(c.bytes_fwd > 0 && c.fwd_s > 0 && c.bwd_s > 0)) {
                    printf("  FAIL: %s has no bytes or time\n", ir_ops[n->op].name);
                    failures++;
                }
            }
        }
        mega_plan_free(&plan);
    }
    /* Model FLOPs a token (MFU): 6 N, attention's 6 H (Dh + Dv) S per
     * attention layer, and Megatron's 3 x 7 d_inner N per scan. */
    {
        const double d = 64, v = 256, hp = H * P, ah = 4, kv = 2, dh = 16;
        double mamba = d /* norm */ + 2 * d * hp /* z, x */ + 2 * d * N /* B, C */ + d * H /* dt */ +
                       hp * 4 + hp /* conv x */ + 2 * (N * 4 + N) /* conv B, C */ + 3 * H /* dt_bias, A_log, D */ +
                       hp /* gated norm */ + hp * d /* out */;
        double attn = d + d * ah * dh + 2 * d * kv * dh + ah * dh * d;
        double params = v * d + 2 * (mamba + attn) + d + d * v;
        check_eq("parameters of tiny-hybrid", (double)ir_param_count(g), params);
        check_eq("model FLOPs a token", pass_model_flops_per_token(g),
                 6 * params + 2 * 6 * ah * (dh + dh) * S + 2 * 21 * hp * N);
    }
    if (nssd != 4) {
        printf("FAIL: %d ssd nodes priced, want 2 per tp\n", nssd);
        failures++;
    }
    ir_graph_free(g);
    ir_arena_free(a);
    printf("%s\n", failures ? "FAIL" : "ok");
    return failures != 0;
}
