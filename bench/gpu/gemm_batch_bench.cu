/* gemm_batch_bench.cu: sibling GEMMs as one rt_matmul_batch (or
 * rt_matmul_grad_batch) against the same GEMMs as separate calls, at the
 * shapes ptdc's programs batch (docs/codegen.md): q, k, v and gate, up of
 * LLaMA-2 7B under data parallelism, the kv projections of LLaMA-2 70B
 * under tensor parallelism 8, forward and weight gradient. The cost model
 * prices a batch of c as one GEMM call whose waves hold all c GEMMs' tiles
 * (pass_gemm_time with batch = c); this measures what that saves.
 *
 *   ptdc_gemm_bench [--smoke]
 *     --smoke  one tiny shape, one call each, and the batch checked equal to
 *              the separate calls (the emulator runs this in CI)
 *
 * Run on a GPU node with bench/gpu/gemm.sh. Times are wall time between
 * synchronisations (rt_time) over enough calls for ~0.3 s. */
#include "bench_gpu.h"
#include "rt.h"

#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

struct Shape {
    const char *name;
    int64_t M, N, K;
    int count;
    bool grad; /* a weight gradient: A transposed ([K, M] activations), fp32 C accumulated */
};

static void fill(rt_act *p, int64_t n, uint64_t seed)
{
    std::vector<float> h((size_t)n);
    uint64_t x = seed;
    for (auto &v : h) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5);
    }
    rt_act_from_f32(p, h.data(), n);
}

/* Whether the batch wrote what the separate calls wrote, bit for bit. */
static bool same(const void *a, const void *b, size_t bytes)
{
    std::vector<unsigned char> x(bytes), y(bytes);
    rt_to_host(x.data(), a, bytes);
    rt_to_host(y.data(), b, bytes);
    return memcmp(x.data(), y.data(), bytes) == 0;
}

static bool run(const Shape &s, bool smoke)
{
    const int c = s.count;
    const int64_t M = s.M, N = s.N, K = s.K;
    rt_act *a = (rt_act *)rt_alloc((size_t)(M * K) * sizeof(rt_act));
    fill(a, M * K, 0x9E3779B97F4A7C15ull);
    rt_act *b[RT_MATMUL_BATCH_MAX];
    void *c1[RT_MATMUL_BATCH_MAX], *cb[RT_MATMUL_BATCH_MAX];
    const size_t es = s.grad ? sizeof(rt_grad) : sizeof(rt_act), cs = (size_t)(M * N) * es;
    for (int i = 0; i < c; i++) {
        b[i] = (rt_act *)rt_alloc((size_t)(K * N) * sizeof(rt_act));
        fill(b[i], K * N, 0x2545F4914F6CDD1Dull + (uint64_t)i);
        c1[i] = rt_alloc(cs);
        cb[i] = rt_alloc(cs);
        rt_zero(c1[i], cs);
        rt_zero(cb[i], cs);
    }
    const rt_act *as[RT_MATMUL_BATCH_MAX], *bs[RT_MATMUL_BATCH_MAX];
    for (int i = 0; i < c; i++) as[i] = a, bs[i] = b[i];
    /* Forward: C = A B ([M, K] x [K, N]); a weight gradient: C += A^T B with
     * A the layer input stored [K, M] (tokens x features) and B the output
     * gradient [K, N], as the generated backward calls it. */
    const bool ta = s.grad, acc = s.grad;
    double t1 = bench_time_calls([&] {
        for (int i = 0; i < c; i++) {
            if (s.grad)
                rt_matmul_grad((rt_grad *)c1[i], a, b[i], M, N, K, ta, false, acc);
            else
                rt_matmul((rt_act *)c1[i], a, b[i], M, N, K, ta, false, acc);
        }
    }, smoke, 200);
    double tb = bench_time_calls([&] {
        if (s.grad)
            rt_matmul_grad_batch(c, (rt_grad *const *)cb, as, bs, M, N, K, ta, false, acc);
        else
            rt_matmul_batch(c, (rt_act *const *)cb, as, bs, M, N, K, ta, false, acc);
    }, smoke, 200);
    bool ok = true;
    if (smoke)
        for (int i = 0; i < c; i++) ok &= same(c1[i], cb[i], cs);
    double f = 2.0 * (double)M * (double)N * (double)K * c;
    printf("%-22s %6lld %6lld %6lld %2d | %9.3f %8.1f | %9.3f %8.1f | %5.2fx%s\n", s.name, (long long)M,
           (long long)N, (long long)K, c, t1 * 1e3, t1 > 0 ? f / t1 * 1e-12 : 0.0, tb * 1e3,
           tb > 0 ? f / tb * 1e-12 : 0.0, tb > 0 ? t1 / tb : 0.0, ok ? "" : "  MISMATCH");
    fflush(stdout);
    rt_free(a);
    for (int i = 0; i < c; i++) rt_free(b[i]), rt_free(c1[i]), rt_free(cb[i]);
    return ok;
}

int main(int argc, char **argv)
{
    bool smoke = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--smoke"))
            smoke = true;
        else {
            fprintf(stderr, "ptdc_gemm_bench: unknown option '%s' (options: --smoke)\n", argv[i]);
            return 2;
        }
    }
    rt_init(&argc, &argv);
    printf("%-22s %6s %6s %6s %2s | %9s %8s | %9s %8s | %s\n", "GEMMs", "M", "N", "K", "c", "apart ms",
           "TFLOP/s", "batch ms", "TFLOP/s", "speed-up");
    bool ok = true;
    if (smoke) {
        ok &= run({"smoke fwd", 64, 32, 48, 3, false}, true);
        ok &= run({"smoke weight grad", 48, 32, 64, 2, true}, true);
    } else {
        /* LLaMA-2 7B, dp 64, micro-batch 2 x 4096 tokens. */
        ok &= run({"7B q,k,v", 8192, 4096, 4096, 3, false}, false);
        ok &= run({"7B q,k,v weight grad", 4096, 4096, 8192, 3, true}, false);
        ok &= run({"7B gate,up", 8192, 11008, 4096, 2, false}, false);
        ok &= run({"7B gate,up weight grad", 4096, 11008, 8192, 2, true}, false);
        /* LLaMA-2 70B, tp 8: 8 kv heads of 128, one per rank; 4096 tokens. */
        ok &= run({"70B/tp8 k,v", 4096, 128, 8192, 2, false}, false);
        ok &= run({"70B/tp8 k,v weight grad", 8192, 128, 4096, 2, true}, false);
        ok &= run({"70B/tp8 gate,up", 4096, 3584, 8192, 2, false}, false);
    }
    rt_finalize();
    return ok ? 0 : 1;
}
