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
 * half the heads and (one group, read whole) all of C B^T.
 *
 * Under the megatron stack (ssm_fused: mamba_ssm's
 * mamba_split_conv1d_scan_combined as Megatron's MambaMixer calls it,
 * passes/cost/cost_ssm.c) each kernel's HBM bytes and dot FLOPs are checked
 * against a count written here from the kernel's loads and stores in
 * mamba_ssm (ops/triton/ssd_*.py), tensor by tensor; the ops the fused
 * kernels absorb (silu after conv1d, softplus, the dt_bias add, the z gate)
 * must cost nothing and conv1d's backward must run its forward again; the
 * scan keeps what mamba_ssm saves (in_proj's output and the ungated y). */
#include "megatron.h"

#include "frontend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

enum { H = 4, P = 8, N = 16, S = 32, BT = 4, GB = 16, Q = 32, CHUNKS = 1 };

static bool check_one(const char *what, double got, double want)
{
    bool ok = fabs(got - want) <= 1e-9 * fabs(want);
    printf("  %-56s %14.0f  want %14.0f  %s\n", what, got, want, ok ? "ok" : "FAIL");
    return ok;
}

static void check_eq(const char *what, double got, double want) { failures += !check_one(what, got, want); }

/* One kernel's hand count: bytes as a sum of tensors (elements x element
 * bytes), FLOPs of its dots. */
typedef struct Want {
    const char *name;
    double bytes, flops;
} Want;

static int check_fused(const IrGraph *g)
{
    int bad = 0;
    printf("megatron stack (ssm_fused), tp 1:\n");
    /* Per micro-batch: T tokens; x, z, y, dy: X elements; B or C: BN; dt
     * and its fp32 companions: Hd; the chunk states: S (N x P a chunk and
     * head); C B^T: CB (Q x Q a chunk and group, fp32). bf16 = 2 bytes,
     * fp32 = 4. One chunk (S = Q = 32). */
    const double T = BT * S, X = T * H * P, BN = T * N, Hd = T * H, St = BT * CHUNKS * H * P * N,
                 CB = BT * CHUNKS * Q * Q, b2 = 2, b4 = 4;
    const double zx = 2 * X + 2 * BN + Hd; /* in_proj's z, x, B, C, dt */
    const double dotS = 2.0 * BT * CHUNKS * H * P * N * Q;      /* a state-sized dot: P x N over Q */
    const double dotCB = 2.0 * BT * CHUNKS * Q * Q * N;         /* C B^T over N, one group */
    const double dotQQ = 2.0 * BT * CHUNKS * H * Q * Q * P / 2; /* a causal Q x Q x P product */
    const Want want[] = {
        {"zxBCdt [s,b]->[b,s] copy", b2 * zx * 2, 0},
        {"_chunk_cumsum_fwd", b2 * Hd /* dt */ + b4 * Hd /* dt out */ + b4 * Hd /* dA_cumsum */, 0},
        {"_chunk_state_fwd", b2 * X /* x */ + b2 * BN /* B */ + 2 * b4 * Hd /* dt, dA_cs */ + b4 * St /* states */, dotS},
        {"_state_passing_fwd", b4 * St /* in */ + b2 * St /* out, params' type */, 0},
        {"_bmm_chunk_fwd", 2 * b2 * BN /* C, B */ + b4 * CB, dotCB},
        {"_chunk_scan_fwd", b4 * CB + b2 * X /* x */ + b2 * X /* z */ + 2 * b4 * Hd + b2 * BN /* C */ +
                                b2 * St /* states */ + b2 * X /* out */ + b2 * X /* out_x */,
         dotS /* C S_in */ + dotQQ},
        {"y [b,s]->[s,b] copy", 2 * b2 * X, 0},
        {"dzxBCdt [b,s]->[s,b] copy", b2 * zx * 2, 0},
        {"_chunk_cumsum_fwd (again)", b2 * Hd + 2 * b4 * Hd, 0},
        {"_bmm_chunk_fwd (again)", 2 * b2 * BN + b4 * CB, dotCB},
        {"_chunk_state_fwd (again)", b2 * X + b2 * BN + 2 * b4 * Hd + b4 * St, dotS},
        {"_state_passing_fwd (again, fp32)", 2 * b4 * St, 0},
        {"_chunk_scan_bwd_dz", b2 * X * 4 /* x, z, out_x, dout */ + b2 * X * 2 /* dz, dout_x */, 0},
        {"_chunk_scan_bwd_dstates", b2 * BN /* C */ + b2 * X /* dout */ + b4 * Hd /* dA_cs */ + b4 * St /* dstates */,
         dotS},
        {"_state_passing_bwd", b4 * St * 2 /* states, dstates */ + b2 * St * 2 /* both out */, 0},
        {"_chunk_scan_chunk_state_bwd_dx", b2 * X /* x */ + 2 * b4 * Hd + b2 * BN /* B */ + b4 * CB + b2 * X /* dout */ +
                                               b2 * St /* dstates */ + b2 * X /* dx */ + b4 * Hd /* ddt */,
         dotS + dotQQ},
        {"_chunk_state_bwd_db", b2 * X + b2 * St + b2 * BN + 2 * b4 * Hd + b4 * BN /* dB fp32 */ + b4 * Hd /* ddA */,
         dotS},
        {"dB.sum over splits", 2 * b4 * BN, 0},
        {"ddA_next cumsum", 2 * b4 * Hd, 0},
        {"_chunk_scan_bwd_dC", b2 * St + b2 * X + b2 * BN + b4 * Hd + b4 * BN /* dC fp32 */ + b4 * Hd /* ddA_prev */,
         dotS},
        {"dC.sum over splits", 2 * b4 * BN, 0},
        {"_chunk_scan_bwd_dcb", b2 * X * 2 /* x, dout */ + 2 * b4 * Hd + b4 * CB /* dCB */, dotQQ},
        {"_bmm_chunk_bwd (dB)", b2 * BN /* C */ + b4 * CB + b4 * BN /* residual */ + b2 * BN /* dB */, dotCB},
        {"_bmm_chunk_bwd (dC)", b2 * BN + b4 * CB + b4 * BN + b2 * BN, dotCB},
        {"_chunk_scan_bwd_ddAcs_stable", b2 * X * 2 + 2 * b4 * Hd + b4 * CB + b4 * Hd, dotQQ},
        {"ddA flip/cumsum/flip/add (torch)", (2 + 2 + 2) * b4 * Hd /* flip, cumsum, flip: in and out */ +
                                                (3 + 3) * b4 * Hd /* ddA_next + ddA_prev, ddA += */,
         0},
        {"_chunk_cumsum_bwd", b4 * Hd * 2 /* ddA, ddt */ + b2 * Hd * 2 /* dt in, ddt out */, 0},
    };
    const int nwant = (int)(sizeof want / sizeof want[0]);
    PassSsdShape sh = {BT, S, H, P, 1, N, 128, 2};
    PassSsdKernel k[PASS_SSD_MAX_KERNELS];
    int nk = pass_ssd_kernels(&sh, k);
    double fb = 0, bb = 0, ff = 0, fbw = 0;
    for (int i = 0; i < nwant; i++) {
        int j = 0;
        while (j < nk && strcmp(k[j].name, want[i].name) != 0)
            j++;
        if (j == nk) {
            printf("  FAIL: no kernel %s\n", want[i].name);
            bad++;
            continue;
        }
        char what[96];
        snprintf(what, sizeof what, "%s bytes", want[i].name);
        bad += !check_one(what, k[j].bytes, want[i].bytes);
        snprintf(what, sizeof what, "%s FLOPs", want[i].name);
        bad += !check_one(what, k[j].flops, want[i].flops);
        *(k[j].bwd ? &bb : &fb) += k[j].bytes;
        *(k[j].bwd ? &fbw : &ff) += k[j].flops;
    }
    if (nk != nwant) {
        printf("  FAIL: %d kernels priced, want %d\n", nk, nwant);
        bad++;
    }
    /* The node as the megatron stack prices it: the rows' sums, each row at
     * least its traffic at the HBM rate; the fused-away ops free. */
    PassCluster cl;
    memset(&cl, 0, sizeof cl);
    pass_gpu_preset("h100-80gb", &cl.gpu);
    cl.ngpus = 1;
    cl.gpus_per_node = 8;
    PassCostCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.cl = &cl;
    ctx.attention = PLAN_ATTN_FLASH;
    pass_stack_preset("megatron", &ctx.st);
    MegaLayout ml = {1, 1, 1, 1, BT, GB, false, 0, PLAN_RECOMPUTE_NONE, PLAN_ATTN_FLASH, 8};
    Plan plan;
    if (!mega_plan((IrGraph *)g, &ml, &plan))
        return bad + 1;
    int64_t dim[64];
    ir_dim_sizes(g, plan.mb_seqs, dim);
    int nfree = 0;
    double kept = 0;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        PassNodeCost c;
        pass_cost_node(&ctx, g, n, &plan.mesh, &plan.strategy[i], dim, &c);
        if (n->op == IR_OP_CONV1D || n->op == IR_OP_SSD || pass_ssm_fused_away(g, n))
            kept += pass_saved_bytes(&ctx, g, n, &plan.mesh, &plan.strategy[i], dim, PLAN_RECOMPUTE_NONE);
        if (n->op == IR_OP_SSD) {
            bad += !check_one("ssd forward bytes (the rows')", c.bytes_fwd, fb);
            bad += !check_one("ssd backward bytes (the rows')", c.bytes_bwd, bb);
            bad += !check_one("ssd forward FLOPs (the rows')", c.flops_fwd, ff);
            bad += !check_one("ssd backward FLOPs (the rows')", c.flops_bwd, fbw);
            double floor = (fb + bb) / (cl.gpu.hbm_bw * cl.gpu.hbm_eff);
            if (!(c.fwd_s + c.bwd_s >= floor)) {
                printf("  FAIL: ssd %.3g s under its traffic's %.3g s\n", c.fwd_s + c.bwd_s, floor);
                bad++;
            }
        } else if (pass_ssm_fused_away(g, n)) {
            nfree++;
            if (c.fwd_s + c.bwd_s + c.bytes_fwd + c.bytes_bwd != 0) {
                printf("  FAIL: %s runs inside mamba_ssm's kernels but costs %g s\n", ir_ops[n->op].name,
                       c.fwd_s + c.bwd_s);
                bad++;
            }
        } else if (n->op == IR_OP_CONV1D) {
            /* causal_conv1d: x in, y out forward; backward the forward again,
             * then x and dy in, dx out; the weight (K taps a channel) and
             * bias read each time, dw written in fp32 twice over. */
            const IrTensor *w = &g->tensors[n->in[1]];
            double wn = 1;
            for (int d = 0; d < w->rank; d++)
                wn *= (double)dim[w->dim[d]];
            double xe = BT * S * wn / (double)dim[w->dim[w->rank - 1]]; /* tokens x channels */
            bad += !check_one("conv1d forward bytes", c.bytes_fwd, b2 * (2 * xe + wn));
            bad += !check_one("conv1d backward bytes", c.bytes_bwd, b2 * (2 * xe + wn) + b2 * (3 * xe + wn) + 8 * wn);
        }
    }
    /* Kept for backward, per layer: what mamba_split_conv1d_scan_combined
     * saves, in_proj's x, B, C (conv1d's inputs), dt and z (zxBCdt) and the
     * ungated y (out_x), bf16; not the convolved x, B, C nor softplus(dt). */
    bad += !check_one("Mamba scan's kept bytes (2 layers)", kept, 2 * b2 * T * ((H * P + 2 * N) + H + H * P + H * P));
    /* Per Mamba layer: 3 silu (x, B, C), softplus, dt's bias add, the gate. */
    if (nfree != 2 * 6) {
        printf("  FAIL: %d ops priced inside mamba_ssm's kernels, want 6 a layer (2 layers)\n", nfree);
        bad++;
    }
    mega_plan_free(&plan);
    return bad;
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
    failures += check_fused(g);
    if (nssd != 4) {
        printf("FAIL: %d ssd nodes priced, want 2 per tp\n", nssd);
        failures++;
    }
    ir_graph_free(g);
    ir_arena_free(a);
    printf("%s\n", failures ? "FAIL" : "ok");
    return failures != 0;
}
