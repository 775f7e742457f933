/* test_prec.c: the low-precision formats in the cost model (cost_prec.c,
 * docs/precision.md) against formulas written here: a large GEMM in FP8
 * approaches the peak ratio (the efficiency curve is the format's too), a
 * small one gains less, the casts are memory-bound kernels of the bytes
 * the formats say, the stack's bf16 layers stay bf16, the weight copies are
 * memory, and the whole plan's step falls. */
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
#define NEAR(a, b, rel) (fabs((a) - (b)) <= (rel) * fabs(b) + 1e-12)

static void test_peaks(void)
{
    PassGpu a, h;
    pass_gpu_preset("a100-80gb", &a);
    pass_gpu_preset("h100-80gb", &h);
    CHECK(pass_prec_peak(&a, PLAN_PREC_BF16) == 312e12 && pass_prec_peak(&a, PLAN_PREC_FP8) == 0);
    CHECK(pass_prec_peak(&h, PLAN_PREC_FP8) == 1979e12);
    /* MXFP8 and NVFP4 need a Blackwell-class GPU (an FP4 rate). */
    CHECK(pass_prec_peak(&h, PLAN_PREC_MXFP8) == 0 && pass_prec_peak(&h, PLAN_PREC_NVFP4) == 0);
    PassGpu b = h;
    b.peak_fp8_flops = 4.5e15, b.peak_fp4_flops = 9e15;
    CHECK(pass_prec_peak(&b, PLAN_PREC_MXFP8) == 4.5e15 && pass_prec_peak(&b, PLAN_PREC_NVFP4) == 9e15);
    char buf[64];
    CHECK(!strcmp(pass_prec_names(&h, buf, sizeof buf), "bf16, fp8"));
    CHECK(!strcmp(pass_prec_names(&b, buf, sizeof buf), "bf16, fp8, mxfp8, nvfp4"));
    /* Bytes per element with block scales: MXFP8 one E8M0 per 32, NVFP4 one E4M3 per 16. */
    CHECK(pass_prec_elem_bytes(PLAN_PREC_FP8) == 1 && NEAR(pass_prec_elem_bytes(PLAN_PREC_MXFP8), 1 + 1 / 32.0, 1e-12));
    CHECK(NEAR(pass_prec_elem_bytes(PLAN_PREC_NVFP4), 0.5 + 1 / 16.0, 1e-12));
}

static void test_gemm(void)
{
    PassGpu h;
    pass_gpu_preset("h100-80gb", &h);
    /* A large GEMM: compute-bound at both rates, the same shape efficiency,
     * so the ratio is the peaks' (2) but for the per-call overhead. */
    double M = 16384, N = 8192, K = 8192;
    double tb = pass_gemm_time(&h, M, N, K, 1), t8 = pass_gemm_time_prec(&h, M, N, K, 1, PLAN_PREC_FP8);
    double eff = pass_gemm_eff(&h, M, N, K, 1);
    CHECK(NEAR(t8, 2 * M * N * K / (1979e12 * eff) + h.gemm_overhead_s, 1e-12));
    CHECK(tb / t8 > 1.95 && tb / t8 <= 1979.0 / 989.0);
    /* A small one gains less: the overhead and the memory floor stay. */
    double sm = 256, sn = 1024, sk = 1024;
    double sb = pass_gemm_time(&h, sm, sn, sk, 1), s8 = pass_gemm_time_prec(&h, sm, sn, sk, 1, PLAN_PREC_FP8);
    CHECK(sb / s8 < tb / t8 - 0.1);
    CHECK(pass_gemm_time_prec(&h, M, N, K, 1, PLAN_PREC_BF16) == tb);
}

static void test_casts(void)
{
    PassCluster cl = {.ngpus = 8, .gpus_per_node = 8};
    pass_gpu_preset("h100-80gb", &cl.gpu);
    PassCostCtx c = {.cl = &cl};
    pass_stack_preset("megatron", &c.st);
    double n = 1 << 24, bw = cl.gpu.hbm_bw * cl.gpu.hbm_eff, k = cl.gpu.kernel_overhead_s;
    /* Delayed scaling: read bf16, write FP8 in two orientations. */
    CHECK(NEAR(pass_prec_cast_s(&c, n, PLAN_PREC_FP8, 2), n * (2 + 2) / bw + k, 1e-12));
    /* Current scaling: an amax pass (one more read) before the cast. */
    c.st.lp_scaling = PASS_SCALING_CURRENT;
    CHECK(NEAR(pass_prec_cast_s(&c, n, PLAN_PREC_FP8, 1), n * (2 + 1 + 2) / bw + 2 * k, 1e-12));
    /* MXFP8: block scales written beside, amax per block inside the cast. */
    CHECK(NEAR(pass_prec_cast_s(&c, n, PLAN_PREC_MXFP8, 1), n * (2 + 1 + 1 / 32.0) / bw + k, 1e-12));
    CHECK(pass_prec_cast_s(&c, n, PLAN_PREC_BF16, 1) == 0);
    /* Blackwell's FP8 GEMMs take any layout (Transformer Engine's
     * is_non_tn_fp8_gemm_supported): one per-tensor FP8 copy serves both
     * orientations; MX and NVFP4 block scales run along K, so they keep two. */
    CHECK(pass_prec_orientations(&cl.gpu, PLAN_PREC_FP8, 2) == 2);
    PassCluster bl = {.ngpus = 8, .gpus_per_node = 8};
    pass_gpu_preset("b200", &bl.gpu);
    PassCostCtx cb = {.cl = &bl};
    pass_stack_preset("megatron", &cb.st);
    double bwb = bl.gpu.hbm_bw * bl.gpu.hbm_eff, kb = bl.gpu.kernel_overhead_s;
    CHECK(pass_prec_orientations(&bl.gpu, PLAN_PREC_FP8, 2) == 1);
    CHECK(pass_prec_orientations(&bl.gpu, PLAN_PREC_MXFP8, 2) == 2);
    CHECK(pass_prec_orientations(&bl.gpu, PLAN_PREC_NVFP4, 2) == 2);
    CHECK(NEAR(pass_prec_cast_s(&cb, n, PLAN_PREC_FP8, 2), n * (2 + 1) / bwb + kb, 1e-12));
    CHECK(NEAR(pass_prec_cast_s(&cb, n, PLAN_PREC_MXFP8, 2), n * (2 + 2 * (1 + 1 / 32.0)) / bwb + kb, 1e-12));
    /* NVFP4 under Megatron (nvfp4_rht): the per-tensor amax pass, and for
     * what the weight gradient reads, the Hadamard transform's cast reads
     * the input once more; the weight (not a wgrad operand) does not. */
    double e4 = 0.5 + 1 / 16.0;
    CHECK(cb.st.nvfp4_rht);
    CHECK(NEAR(pass_prec_cast_act_s(&cb, n, PLAN_PREC_NVFP4, 2, false), n * (2 + 2 * e4 + 2) / bwb + 2 * kb, 1e-12));
    CHECK(NEAR(pass_prec_cast_act_s(&cb, n, PLAN_PREC_NVFP4, 2, true), n * (2 + 2 * e4 + 2 + 2) / bwb + 3 * kb, 1e-12));
    CHECK(pass_prec_cast_act_s(&cb, n, PLAN_PREC_NVFP4, 1, true) == pass_prec_cast_s(&cb, n, PLAN_PREC_NVFP4, 1));
    cb.st.nvfp4_rht = false;
    CHECK(pass_prec_cast_act_s(&cb, n, PLAN_PREC_NVFP4, 2, true) == pass_prec_cast_s(&cb, n, PLAN_PREC_NVFP4, 2));
}

/* LLaMA-2 7B at tp 2, pp 1 on 8 H100s: the matmul nodes' casts, which
 * layers run FP8, the weight copies, the step. */
static void test_plan(const char *models)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/llama2-7b.mdl", models);
    IrArena *a = ir_arena_new();
    IrGraph *g = mega_compile(a, path, "seq=4096", 64);
    MegaLayout L = {.tp = 2, .pp = 1, .dp = 4, .v = 1, .micro_batch = 1, .global_batch = 64, .sp = true,
                    .zero = 1, .recompute = PLAN_RECOMPUTE_NONE, .attention = PLAN_ATTN_FLASH,
                    .gpus_per_node = 8};
    Plan p;
    if (!mega_plan(g, &L, &p))
        exit(1);
    PassCluster cl = {.ngpus = 8, .gpus_per_node = 8};
    pass_gpu_preset("h100-80gb", &cl.gpu);
    PassCostCtx c = {.cl = &cl, .attention = PLAN_ATTN_FLASH};
    pass_stack_preset("megatron", &c.st);
    PassCostCtx c8 = c;
    c8.prec = PLAN_PREC_FP8;
    int64_t ds[256];
    ir_dim_sizes(g, p.mb_seqs, ds);
    int nlp = 0, nmm = 0, first = -1, last = -1;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op != IR_OP_MATMUL)
            continue;
        nmm++;
        PassNodeCost b, f;
        pass_cost_node(&c, g, n, &p.mesh, &p.strategy[i], ds, &b);
        pass_cost_node(&c8, g, n, &p.mesh, &p.strategy[i], ds, &f);
        if (pass_prec_of(&c8, g, n) == PLAN_PREC_FP8) {
            nlp++;
            first = first < 0 ? n->layer : first, last = n->layer;
            /* Casts are counted, in the node's time, and the GEMMs are faster. */
            CHECK(f.cast_s > 0 && f.gemm_s < 0.6 * b.gemm_s);
            CHECK(NEAR(f.fwd_s + f.bwd_s, f.gemm_s + f.cast_s + (b.fwd_s + b.bwd_s - b.gemm_s), 1e-9));
            /* The amax groups (plan_amax_axes): the weight's over tensor
             * parallelism, and exactly one of the input (row-parallel: K
             * split) and the output's gradient (column-parallel: N split);
             * under sequence parallelism the input is gathered first. A
             * data-parallel replica's scale is its own: never over dp. */
            int tp = 1 << p.axis[PLAN_DIM_TP], dp = 1 << p.axis[PLAN_DIM_DP];
            int ax = plan_amax_axes(g, n, &p.strategy[i], 0), bx = plan_amax_axes(g, n, &p.strategy[i], 1),
                cx = plan_amax_axes(g, n, &p.strategy[i], 2);
            CHECK((bx & tp) && !!(ax & tp) + !!(cx & tp) == 1 && !((ax | bx | cx) & dp));
        } else {
            /* The head (outside the layers) stays bf16. */
            CHECK(n->layer < 0 && f.cast_s == 0 && f.gemm_s == b.gemm_s);
        }
    }
    CHECK(nlp == 32 * 7 && nmm == nlp + 1 && first == 0 && last == 31);
    /* --first-last-layers-bf16 with its default counts: layers 0 and 31 stay bf16. */
    PassCostCtx c8f = c8;
    c8f.st.lp_bf16_first = c8f.st.lp_bf16_last = 1;
    int kept = 0;
    for (int i = 0; i < g->nfwd; i++)
        kept += g->nodes[i].op == IR_OP_MATMUL && g->nodes[i].layer >= 0 &&
                pass_prec_of(&c8f, g, &g->nodes[i]) == PLAN_PREC_BF16;
    CHECK(kept == 2 * 7);
    /* Exactly the layers below `first` and the last `last` of the 32, for
     * counts at, across and beyond the ends (plan_gemm_precision finds the
     * last layers from the pieces after a node's, not by counting). */
    static const int ends[][2] = {{0, 0}, {0, 1}, {2, 3}, {0, 31}, {5, 32}, {0, 40}, {33, 0}};
    for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++) {
        PassCostCtx ce = c8;
        ce.st.lp_bf16_first = ends[e][0], ce.st.lp_bf16_last = ends[e][1];
        int wrong = 0;
        for (int i = 0; i < g->nfwd; i++) {
            const IrNode *n = &g->nodes[i];
            if (n->op != IR_OP_MATMUL || n->layer < 0)
                continue;
            bool want = n->layer < ends[e][0] || n->layer >= 32 - ends[e][1];
            wrong += (pass_prec_of(&ce, g, n) == PLAN_PREC_BF16) != want;
        }
        CHECK(wrong == 0);
    }
    /* With a memo (PassMemo: what a framework search keeps of the graph
     * across candidates) every precision and every prediction is the one
     * found afresh, bit for bit, as the context's format and bf16 layers
     * change under one memo. */
    PassMemo *memo = pass_memo_new(g);
    for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++)
        for (int fmt = 0; fmt < 2; fmt++) {
            PassCostCtx ce = fmt ? c8 : c, cm;
            ce.st.lp_bf16_first = ends[e][0], ce.st.lp_bf16_last = ends[e][1];
            ce.st.grad_in_place = e % 2; /* the logits' gradient over them, from the memo */
            cm = ce;
            cm.memo = memo;
            int wrong = 0;
            for (int i = 0; i < g->nfwd; i++)
                wrong += pass_prec_of(&cm, g, &g->nodes[i]) != pass_prec_of(&ce, g, &g->nodes[i]);
            CHECK(wrong == 0);
            Plan q = p;
            q.precision = fmt ? PLAN_PREC_FP8 : PLAN_PREC_BF16;
            PassPrediction a0, a1;
            pass_predict(&ce, g, &q, &a0);
            pass_predict(&cm, g, &q, &a1);
            CHECK(a0.npp == a1.npp && !memcmp(a0.mem, a1.mem, sizeof *a0.mem * (size_t)a0.npp));
            PassRankMem *m0 = a0.mem, *m1 = a1.mem;
            a0.mem = a1.mem = NULL;
            CHECK(!memcmp(&a0, &a1, sizeof a0));
            a0.mem = m0, a1.mem = m1;
            pass_prediction_free(&a0);
            pass_prediction_free(&a1);
        }
    pass_memo_free(memo);
    /* The step: faster in FP8, slower again with the end layers in bf16;
     * the weights grow by the two FP8 orientations of the layers' linears. */
    PassPrediction pb, pf, pff;
    pass_predict(&c, g, &p, &pb);
    p.precision = PLAN_PREC_FP8;
    pass_predict(&c, g, &p, &pf);
    pass_predict(&c8f, g, &p, &pff);
    CHECK(pf.step_time_s < 0.85 * pb.step_time_s && pff.step_time_s > pf.step_time_s);
    CHECK(pf.cast_s > 0 && pb.cast_s == 0);
    double lin = 0; /* linear weights of the layers per rank (tp 2) */
    for (int i = 0; i < g->nfwd; i++)
        if (g->nodes[i].op == IR_OP_MATMUL && g->nodes[i].layer >= 0)
            lin += (double)ir_numel(g, g->nodes[i].in[1], ds) / 2;
    CHECK(NEAR(pf.mem[0].weights - pb.mem[0].weights, 2 * lin, 0.02));
    /* fp8_param_gather: the bf16 copy goes (one FP8 orientation replaces it). */
    PassCostCtx cg = c;
    cg.st.fp8_param_gather = true;
    PassPrediction pg;
    pass_predict(&cg, g, &p, &pg);
    CHECK(NEAR(pg.mem[0].weights - pb.mem[0].weights, 0.0, 0.02 * pb.mem[0].weights + 1));
    printf("llama2-7b tp2 dp4 on 8 H100 (megatron): bf16 %.3f s, fp8 %.3f s (casts %.3f s), "
           "fp8 with layers 0 and 31 bf16 %.3f s\n", pb.step_time_s, pf.step_time_s, pf.cast_s, pff.step_time_s);
    pass_prediction_free(&pb);
    pass_prediction_free(&pf);
    pass_prediction_free(&pff);
    pass_prediction_free(&pg);
    mega_plan_free(&p);
    ir_graph_free(g);
    ir_arena_free(a);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_cost_prec MODELS_DIR\n");
        return 2;
    }
    test_peaks();
    test_gemm();
    test_casts();
    test_plan(argv[1]);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
