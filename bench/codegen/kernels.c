/* kernels.c: time the CPU runtime's non-GEMM kernels (and a batched GEMM
 * against its separate calls) at the shapes of the benchmark models
 * (bench/codegen/run.sh), one line per kernel: the fastest of REPS calls
 * (the best estimate of the uncontended time on a shared machine) in
 * milliseconds, and the rate in elements (or GFLOP) per second.
 *   bench_kernels [small|gpt2] [REPS] [NAME]   (NAME: only kernels whose name has it)
 * Threads: OMP_NUM_THREADS (rt_init is not called, so the whole machine by
 * default). BENCH_CPU=1 times with the process's CPU time instead of the
 * wall clock: on a busy machine, single-threaded runs then count only their
 * own cycles. Built against an older runtime whose attention takes no window
 * (-DBENCH_NO_WINDOW), the same file measures the kernels before a change. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench.h"
#include "rt.h"

#ifdef BENCH_NO_WINDOW
#define WINDOW
#else
#define WINDOW , 0
#endif

static float *fill(int64_t n, float lo, float hi)
{
    float *p = malloc((size_t)n * sizeof *p);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
    return p;
}

static int reps = 5;
static double (*clk)(void) = wall; /* cpu with BENCH_CPU=1: single-threaded runs on a busy machine */
static const char *only; /* run the kernels whose name contains this */

#define TIME(name, work, unit, call)                                                               \
    do {                                                                                           \
        if (only && !strstr(name, only))                                                           \
            break;                                                                                 \
        double best = 1e30;                                                                        \
        for (int r_ = 0; r_ < reps; r_++) {                                                        \
            double t0_ = clk();                                                                    \
            call;                                                                                  \
            double t_ = clk() - t0_;                                                               \
            best = t_ < best ? t_ : best;                                                          \
        }                                                                                          \
        printf("%-22s %9.3f ms %10.2f %s\n", name, best * 1e3, (work) / best / 1e9, unit);         \
    } while (0)

int main(int argc, char **argv)
{
    bool gpt2 = argc > 1 && !strcmp(argv[1], "gpt2");
    if (argc > 2)
        reps = atoi(argv[2]);
    if (argc > 3)
        only = argv[3];
    if (getenv("BENCH_CPU") && atoi(getenv("BENCH_CPU")))
        clk = cpu;
    /* small: d384 L4 seq256 batch 8, vocab 8192; gpt2: d768 seq1024 batch 4, vocab 50304 */
    int64_t B = gpt2 ? 4 : 8, S = gpt2 ? 1024 : 256, C = gpt2 ? 768 : 384, H = C / 64, D = 64;
    int64_t V = gpt2 ? 50304 : 8192, F = 4 * C, R = B * S;
    printf("shape %s: tokens %lld, d_model %lld, heads %lld x %lld, d_ff %lld, vocab %lld\n",
           gpt2 ? "gpt2" : "small", (long long)R, (long long)C, (long long)H, (long long)D,
           (long long)F, (long long)V);
    float *x = fill(R * F, -3, 3), *g = fill(R * F, -1, 1), *y = fill(R * F, 0, 1);
    float *w = fill(F, 0.5f, 1.5f), *b = fill(F, -1, 1), *dw = fill(F, 0, 0), *db = fill(F, 0, 0);
    float *m1 = fill(R, 0, 0), *r1 = fill(R, 0, 0);
    int64_t nl = R * F;
    TIME("gelu_fwd", nl, "Gelem/s", rt_gelu_fwd(y, x, nl));
    TIME("gelu_bwd", nl, "Gelem/s", rt_gelu_bwd(y, x, g, nl));
    TIME("silu_fwd", nl, "Gelem/s", rt_silu_fwd(y, x, nl));
    /* SwiGLU fused against the silu + mul it replaced, and its backward
     * against mul (db = dy silu(a)), mul (dy b), silu_bwd; g doubles as up
     * and dy, y as the kept silu(a), y2 is the second output. */
    float *y2 = fill(R * F, 0, 1);
    TIME("swiglu_fwd", nl, "Gelem/s", rt_swiglu_fwd(y, x, g, nl));
    TIME("silu_fwd+mul", nl, "Gelem/s", (rt_silu_fwd(y, x, nl), rt_mul(y, y, g, nl, nl)));
    TIME("swiglu_bwd", nl, "Gelem/s", rt_swiglu_bwd(y, y2, x, g, g, nl));
    TIME("mul+mul+silu_bwd", nl, "Gelem/s",
         (rt_mul(y2, g, y, nl, nl), rt_mul(y, g, g, nl, nl), rt_silu_bwd(y, x, y, nl)));
    free(y2);
    TIME("add_bias", nl, "Gelem/s", rt_add(y, x, b, nl, F));
    TIME("reduce_rows", nl, "Gelem/s", rt_reduce_rows(dw, g, R, F, false));
    TIME("layernorm_fwd", R * C, "Gelem/s", rt_layernorm_fwd(y, m1, r1, x, w, b, R, C, 1e-5f));
    TIME("layernorm_bwd", R * C, "Gelem/s", rt_layernorm_bwd(y, dw, db, x, w, m1, r1, g, NULL, R, C));
    TIME("rmsnorm_fwd", R * C, "Gelem/s", rt_rmsnorm_fwd(y, r1, x, w, R, C, 1e-5f));
    TIME("rmsnorm_bwd", R * C, "Gelem/s", rt_rmsnorm_bwd(y, dw, x, w, r1, g, NULL, R, C));
    /* The residual add fused into the norm against the two calls. */
    float *sum = fill(R * C, 0, 0);
    TIME("add_rmsnorm_fwd", R * C, "Gelem/s", rt_add_rmsnorm_fwd(sum, y, r1, x, g, w, R, C, 1e-5f));
    TIME("add+rmsnorm_fwd", R * C, "Gelem/s",
         (rt_add(sum, x, g, R * C, R * C), rt_rmsnorm_fwd(y, r1, sum, w, R, C, 1e-5f)));
    free(sum);
    /* q, k and v from one input: three GEMMs batched against three calls (on
     * CPU the batch runs those calls, so the two should time alike). */
    float *wqkv = fill(3 * C * C, -1, 1), *qkv = fill(3 * R * C, 0, 0);
    {
        float *c_[] = {qkv, qkv + R * C, qkv + 2 * R * C};
        const float *a_[] = {x, x, x}, *b_[] = {wqkv, wqkv + C * C, wqkv + 2 * C * C};
        double fl = 3 * 2.0 * R * C * C;
        TIME("matmul_batch", fl, "GFLOP/s",
             rt_matmul_batch(3, c_, a_, b_, R, C, C, false, false, false));
        TIME("matmul x3", fl, "GFLOP/s",
             for (int i = 0; i < 3; i++) rt_matmul(c_[i], a_[i], b_[i], R, C, C, false, false, false));
    }
    free(wqkv), free(qkv);
    TIME("softmax_fwd", R * S, "Gelem/s", rt_softmax_fwd(y, x, R, S));
    free(x), free(g), free(y);
    x = fill(R * V, -4, 4), y = fill(R * V, 0, 0);
    int32_t *tg = malloc((size_t)R * sizeof *tg);
    for (int64_t i = 0; i < R; i++)
        tg[i] = (int32_t)((i * 7919) % V);
    float loss = 0;
    TIME("cross_entropy_fwd", R * V, "Gelem/s",
         rt_cross_entropy_fwd(&loss, r1, x, tg, R, V, 0, R, 1.0f, NULL));
    TIME("cross_entropy_bwd", R * V, "Gelem/s",
         rt_cross_entropy_bwd(y, x, tg, r1, 1.0f, R, V, 0, R));
    free(x), free(y);
    int64_t nq = B * S * H * D;
    float *q = fill(nq, -1, 1), *k = fill(nq, -1, 1), *v = fill(nq, -1, 1), *o = fill(nq, 0, 0);
    float *go = fill(nq, -1, 1), *dq = fill(nq, 0, 0), *dk = fill(nq, 0, 0), *dv = fill(nq, 0, 0);
    float *lse = fill(B * S * H, 0, 0);
    /* causal: S^2/2 score and S^2/2 value products of D multiply-adds */
    double af = 2.0 * B * H * S * (S + 1) / 2.0 * D * 2.0;
    TIME("attention_fwd", af, "GFLOP/s",
         rt_attention_fwd(o, lse, q, k, v, B, S, H, H, D, true WINDOW));
    TIME("attention_bwd", 2.5 * af, "GFLOP/s",
         rt_attention_bwd(dq, dk, dv, q, k, v, o, lse, go, B, S, H, H, D, true WINDOW));
    int64_t np = 12 * C * C + V * C;
    float *p = fill(np, -1, 1), *gr = fill(np, -1, 1), *mm = fill(np, 0, 0), *vv = fill(np, 0, 0);
    TIME("adamw (12 d^2 + V d)", np, "Gelem/s",
         rt_adamw(p, p, gr, mm, vv, np, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1));
    float ss = 0;
    TIME("sumsq", np, "Gelem/s", rt_sumsq(&ss, gr, np));
    int64_t shape[2] = {np / C, C}, zero[2] = {0, 0};
    TIME("init_param (normal)", np, "Gelem/s",
         rt_init_param(p, rt_hash("w"), RT_INIT_NORMAL, 0.02, 2, shape, zero, shape));
    return 0;
}
