/* test_flops.c: the cost model's FLOP and byte accounting against counts made
 * by hand, here, from the model's sizes (nothing below calls passes/cost to
 * decide what a number should be).
 *
 * Model: tiny-llama (models/tiny-llama.mdl): L = 2 layers, D = 64, H = 4
 * query heads and KV = 2 KV heads of Dh = 16, F = 128, V = 256, S = 32,
 * global batch 16 sequences; micro-batches of B = 4 sequences, so T = B S =
 * 128 tokens per micro-batch.
 *
 * FLOPs (per node, one micro-batch, one rank):
 *   matmul [M, K] x [K, N]: 2 M N K forward; backward dA = dC B^T and
 *     dB = A^T dC, 2 M N K each (every matmul here reads an activation and a
 *     weight, both needing gradients);
 *   attention (causal, flash): Q K^T and P V are 2 B H S S Dh each, halved
 *     by the mask: 2 B H S^2 Dh forward; backward recomputes Q K^T and runs
 *     dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q: 5 products of
 *     B H S^2 Dh (halved) = 2.5 x forward;
 *   everything else: 0 (elementwise FLOPs are not counted; the documented
 *     convention, docs/cost-model.md).
 * Bytes (e = the backend's activation width: 2 on a GPU preset, 4 on a CPU
 * device; statistics fp32; token ids int32), per runtime kernel:
 *   embedding    fwd: read T table rows, write T rows (2 e T D) + ids (4 T);
 *                bwd: read dy, read and write T table rows (3 e T D) + ids
 *   rmsnorm      fwd: x in, y out (2 e n) + rstd out (4 per row);
 *                bwd: x, dy in, dx out (3 e n) + rstd in;
 *                right after the residual add whose sum it reads (all but
 *                the first layer's first), one call for both (a, b in, sum,
 *                y out: 4 e n + rstd), the add keeping its own 3 e n: the
 *                norm's forward is e n + rstd
 *   rope         2 e n each way (the backward is the inverse rotation)
 *   silu         fwd 2 e n; bwd x, dy in, dx out: 3 e n
 *   swiglu       fwd gate, up in, out: 3 e n; bwd gate, up, dy in, dgate,
 *                dup out: 5 e n
 *   mul          fwd a, b in, out: 3 e n; bwd one product per operand: 6 e n
 *   add          fwd 3 e n; bwd nothing (the gradient passes through)
 *   matmul       each GEMM reads A, B and writes C: e (MK + KN + MN)
 *   attention    fwd reads q, k, v and writes o: e (2 |q| + 2 |k|);
 *                bwd reads q, k, v, o, dO, writes dq, dk, dv: twice that
 *   cross-entropy fwd: logits read twice... counted as 2 e n + 8 per row
 *                (lse out, target in); bwd logits in, dlogits out: the same
 *   and a tensor read by k nodes gets k gradient contributions summed by
 *   k - 1 additions (3 e n each), charged to the 2nd..kth reader's backward.
 * Then the plan's totals: hardware FLOPs per step = micro-batches x the sum
 * over nodes (plus the layers' forward again under full recomputation), and
 * model FLOPs per step = tokens x (6 N + 12 L H Dh S) (PaLM, N = every
 * parameter), N counted here from the shapes. All must be equal exactly. */
#include "megatron.h"

#include "frontend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

/* Sizes of tiny-llama, written down, and the micro-batch. */
enum { L = 2, D = 64, H = 4, KV = 2, DH = 16, F = 128, V = 256, S = 32, GB = 16, B = 4, T = B * S };

typedef struct {
    char out[64];                 /* the node's first output */
    double ff, fb, bf, bb;        /* flops fwd, bwd; bytes fwd, bwd */
} Want;

static Want want[64];
static int nwant;

static Want *add(const char *out, double ff, double fb, double bf, double bb)
{
    Want *w = &want[nwant++];
    snprintf(w->out, sizeof w->out, "%s", out);
    w->ff = ff, w->fb = fb, w->bf = bf, w->bb = bb;
    return w;
}

/* A matmul [M, K] x [K, N] whose activation operand is the `reader`-th of its
 * tensor's readers (reader >= 2 pays one gradient addition of that tensor). */
static void matmul(const char *out, double e, double M, double K, double N, int reader,
                   double a_numel)
{
    double f = 2 * M * N * K, b = e * (M * K + K * N + M * N);
    add(out, f, 2 * f, b, 2 * b + (reader >= 2 ? 3 * e * a_numel : 0));
}

/* The hand count of every forward node under tensor-parallel degree tp
 * (Megatron: q, k, v, gate, up split their output, o and down their input,
 * the LM head and loss the vocabulary, attention its heads). */
static void count(double e, int tp)
{
    nwant = 0;
    const double n_x = (double)T * D, n_f = (double)T * F / tp;
    add("x", 0, 0, 2 * e * T * D + 4 * T, 3 * e * T * D + 4 * T); /* embedding */
    for (int l = 0; l < L; l++) {
        char p[32], n[64];
        snprintf(p, sizeof p, "layers.%d.", l);
#define N(s) (snprintf(n, sizeof n, "%s%s", p, s), n)
        /* attention block: h read by the q, k, v projections (2 additions);
         * its norm fused with the layer before's last add */
        add(N("h"), 0, 0, (l ? 1 : 2) * e * n_x + 4 * T, 3 * e * n_x + 4 * T);
        matmul(N("matmul"), e, T, D, H * DH / tp, 1, n_x);
        add(N("q"), 0, 0, 2 * e * T * H * DH / tp, 2 * e * T * H * DH / tp);
        matmul(N("matmul.1"), e, T, D, KV * DH / tp, 2, n_x);
        add(N("k"), 0, 0, 2 * e * T * KV * DH / tp, 2 * e * T * KV * DH / tp);
        matmul(N("v"), e, T, D, KV * DH / tp, 3, n_x);
        double fa = 4.0 * B * (H / tp) * S * S * DH / 2;
        double qkvo = 2.0 * T * H * DH / tp + 2.0 * T * KV * DH / tp;
        add(N("a"), fa, 2.5 * fa, e * qkvo, 2 * e * qkvo);
        matmul(N("matmul.2"), e, T, H * DH / tp, D, 1, 0);
        /* the residual: its input is also the norm's, so the add is the 2nd reader */
        add(N("x"), 0, 0, 3 * e * n_x, 3 * e * n_x);
        /* MLP block: h.1 read by gate and up; its norm fused with the add */
        add(N("h.1"), 0, 0, e * n_x + 4 * T, 3 * e * n_x + 4 * T);
        matmul(N("matmul.3"), e, T, D, F / tp, 1, n_x);
        matmul(N("matmul.4"), e, T, D, F / tp, 2, n_x);
        add(N("g"), 0, 0, 3 * e * n_f, 5 * e * n_f);
        matmul(N("matmul.5"), e, T, F / tp, D, 1, 0);
        add(N("x.1"), 0, 0, 3 * e * n_x, 3 * e * n_x);
#undef N
    }
    add("x.1", 0, 0, e * n_x + 4 * T, 3 * e * n_x + 4 * T); /* the final norm, fused */
    matmul("logits", e, T, D, V / tp, 1, n_x);
    double n_l = (double)T * V / tp;
    add("loss", 0, 0, 2 * e * n_l + 8 * T, 2 * e * n_l + 8 * T);
}

static void check_nodes(const IrGraph *g, const PassCostCtx *ctx, const Plan *plan, double e, int tp,
                        double *flops_mb)
{
    int64_t dim[64];
    ir_dim_sizes(g, plan->mb_seqs, dim);
    count(e, tp);
    int matched = 0;
    *flops_mb = 0;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        const char *name = g->tensors[n->out[0]].name;
        PassNodeCost c;
        pass_cost_node(ctx, g, n, &plan->mesh, &plan->strategy[i], dim, &c);
        *flops_mb += c.flops_fwd + c.flops_bwd;
        const Want *w = NULL;
        for (int k = 0; k < nwant && !w; k++)
            if (!strcmp(want[k].out, name))
                w = &want[k];
        if (!w) {
            printf("FAIL e=%g tp%d: node %s (%s) has no hand count\n", e, tp, name, ir_ops[n->op].name);
            failures++;
            continue;
        }
        matched++;
        bool ok = c.flops_fwd == w->ff && c.flops_bwd == w->fb && c.bytes_fwd == w->bf && c.bytes_bwd == w->bb;
        if (!ok)
            failures++;
        printf("  %-18s %-13s flops %10.0f %10.0f (hand %10.0f %10.0f)  bytes %8.0f %8.0f (hand %8.0f %8.0f)%s\n",
               name, ir_ops[n->op].name, c.flops_fwd, c.flops_bwd, w->ff, w->fb, c.bytes_fwd,
               c.bytes_bwd, w->bf, w->bb, ok ? "" : "  FAIL");
    }
    if (matched != nwant) {
        printf("FAIL: %d nodes matched %d hand counts\n", matched, nwant);
        failures++;
    }
}

static void check_eq(const char *what, double got, double hand)
{
    bool ok = got == hand;
    printf("  %-52s %.0f (hand %.0f)%s\n", what, got, hand, ok ? "" : "  FAIL");
    failures += !ok;
}

/* N for tiny-llama, by shape: embedding and LM head V D each; per layer two
 * norm weights D, q and o D H Dh, k and v D KV Dh, gate, up and down D F;
 * the final norm D. */
static double params_llama(void)
{
    double layer = 2.0 * D + 2.0 * D * H * DH + 2.0 * D * KV * DH + 3.0 * D * F;
    return 2.0 * V * D + L * layer + D;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_flops MODELS_DIR\n");
        return 2;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny-llama.mdl", argv[1]);
    IrArena *a = ir_arena_new();
    IrGraph *g = mega_compile(a, path, NULL, 0);
    if (!g || g->global_batch != GB) {
        fprintf(stderr, "cannot compile %s (or its sizes changed: this test's counts are for "
                        "L=2 D=64 H=4 KV=2 F=128 V=256 S=32, 16 sequences)\n", path);
        return 2;
    }
    PassCluster cl;
    memset(&cl, 0, sizeof cl);
    pass_gpu_preset("a100-80gb", &cl.gpu);
    cl.ngpus = 2;
    cl.gpus_per_node = 8;
    PassCostCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.cl = &cl;
    ctx.attention = PLAN_ATTN_FLASH;
    const double tokens = (double)GB * S;
    const double N = params_llama();
    for (int dev = 0; dev < 2; dev++) {
        /* a GPU preset (bf16 activations) and the same device as the CPU
         * backend sees it (fp32 activations) */
        cl.gpu.act_bytes = dev ? 4 : 2;
        for (int tp = 1; tp <= 2; tp *= 2) {
            for (int rc = 0; rc < 2; rc++) {
                MegaLayout ml = {tp, 1, 1, 1, B, GB, false, 0, rc ? PLAN_RECOMPUTE_FULL : PLAN_RECOMPUTE_NONE,
                                 PLAN_ATTN_FLASH, 8};
                Plan plan;
                if (!mega_plan(g, &ml, &plan))
                    return 2;
                printf("act_bytes %d, tp %d, recompute %s:\n", cl.gpu.act_bytes, tp, rc ? "full" : "none");
                double fmb;
                check_nodes(g, &ctx, &plan, cl.gpu.act_bytes, tp, &fmb);
                /* The whole micro-batch by hand: per layer q, o 2 T D (H Dh / tp), k, v
                 * 2 T D (KV Dh / tp), gate, up, down 2 T D F / tp, attention 2 B (H / tp)
                 * S^2 Dh; the head 2 T D V / tp; backward twice the matmuls and 2.5 x attention. */
                double mm_layer = 2.0 * T * D * (2.0 * H * DH + 2.0 * KV * DH + 3.0 * F) / tp;
                double at_layer = 2.0 * B * (H / tp) * S * S * DH;
                double head = 2.0 * T * D * V / tp;
                double fwd = L * (mm_layer + at_layer) + head;
                double bwd = 2 * (L * mm_layer + head) + 2.5 * L * at_layer;
                check_eq("FLOPs per micro-batch, forward + backward", fmb, fwd + bwd);
                PassPrediction pr;
                pass_predict(&ctx, g, &plan, &pr);
                double m = (double)GB / B;
                double rec = rc ? L * (mm_layer + at_layer) : 0;
                check_eq("hardware FLOPs per step (per rank x ranks)", pr.hw_flops, m * tp * (fwd + bwd + rec));
                check_eq("model FLOPs per step, 6 N + 12 L H Dh S per token", pr.model_flops,
                         tokens * (6 * N + 12.0 * L * H * DH * S));
                pass_prediction_free(&pr);
                mega_plan_free(&plan);
            }
        }
    }
    check_eq("parameters of tiny-llama", (double)ir_param_count(g), N);
    check_eq("pass_model_flops_per_token", pass_model_flops_per_token(g), 6 * N + 12.0 * L * H * DH * S);
    ir_graph_free(g);

    /* GPT: the token table is counted once although the LM head reads it
     * again; wpe, biases and both LayerNorm tensors count. */
    snprintf(path, sizeof path, "%s/tiny-gpt.mdl", argv[1]);
    g = mega_compile(a, path, NULL, 0);
    if (!g)
        return 2;
    {
        const double d = 64, f = 256, v = 256, s = 32, l = 2, h = 4, dh = 16;
        double layer = 4 * d /* ln_1, ln_2 */ + 3 * d * d + 3 * d /* q, k, v and biases */ +
                       d * d + d /* c_proj */ + d * f + f + f * d + d /* MLP */;
        double n = v * d + s * d + l * layer + 2 * d;
        check_eq("parameters of tiny-gpt (tied head counted once)", (double)ir_param_count(g), n);
        check_eq("tiny-gpt model FLOPs per token", pass_model_flops_per_token(g), 6 * n + 12 * l * h * dh * s);
    }
    ir_graph_free(g);
    ir_arena_free(a);
    if (failures)
        printf("%d count(s) differ from the hand counts\n", failures);
    else
        printf("every FLOP and byte count equals the hand count\n");
    return failures != 0;
}
