/* attention_bench.cu: attention TFLOP/s of the CUDA backend (rt_attention_fwd
 * and rt_attention_bwd, as a generated program calls them) by head dim and
 * sequence length, against the FLOP convention of docs/cost-model.md:
 * 4 B H S^2 D forward, halved when causal; backward 2.5 x forward (5
 * matmuls of forward's 2; the kernels' extra recomputation is not counted).
 *
 *   ptdc_attn_bench [--full] [--smoke]
 *     default  causal, D 64 and 128, S 512 ... 8192, 16384 tokens per call
 *              (batch = 16384 / S), heads x D = 2048 (FlashAttention-2's
 *              benchmark shapes)
 *     --full   also non-causal rows
 *     --smoke  one tiny shape, one iteration (the emulator runs this in CI)
 *
 * Run on a GPU node with bench/gpu/attention.sh. The peak used for "% peak"
 * is the datasheet dense bf16 rate of the device found (A100 312, H100 PCIe
 * 756, H100 SXM / H200 989 TFLOP/s), or PTDC_PEAK_TFLOPS when set. Times
 * are wall time between synchronisations (rt_time) over several calls. */
#include "bench_gpu.h"
#include "rt.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

static double peak_tflops(char *name, size_t n)
{
    snprintf(name, n, "SIMT emulator (not a GPU)");
    double peak = 0;
#ifndef PTDC_CUDA_EMU
    int dev = 0;
    cudaDeviceProp p;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess) {
        snprintf(name, n, "%s", p.name);
        if (strstr(p.name, "A100"))
            peak = 312;
        else if (strstr(p.name, "H100") && strstr(p.name, "PCIe"))
            peak = 756;
        else if (strstr(p.name, "H100") || strstr(p.name, "H200"))
            peak = 989;
    }
#endif
    const char *e = getenv("PTDC_PEAK_TFLOPS");
    if (e && atof(e) > 0) peak = atof(e);
    return peak;
}

struct Shape {
    int64_t B, S, H, D;
    bool causal;
};

static void run(const Shape &s, double peak, bool smoke)
{
    const int64_t nq = s.B * s.S * s.H * s.D, nl = s.B * s.S * s.H;
    std::vector<float> h((size_t)nq);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (auto &v : h) { /* uniform in [-1, 1): scores of a realistic spread */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    rt_act *q = (rt_act *)rt_alloc((size_t)nq * 2), *k = (rt_act *)rt_alloc((size_t)nq * 2);
    rt_act *v = (rt_act *)rt_alloc((size_t)nq * 2), *o = (rt_act *)rt_alloc((size_t)nq * 2);
    rt_act *dout = (rt_act *)rt_alloc((size_t)nq * 2), *dq = (rt_act *)rt_alloc((size_t)nq * 2);
    rt_act *dk = (rt_act *)rt_alloc((size_t)nq * 2), *dv = (rt_act *)rt_alloc((size_t)nq * 2);
    float *lse = (float *)rt_alloc((size_t)nl * 4);
    rt_act_from_f32(q, h.data(), nq), rt_act_from_f32(k, h.data(), nq), rt_act_from_f32(v, h.data(), nq);
    rt_act_from_f32(dout, h.data(), nq);
    double tf = bench_time_calls([&] { rt_attention_fwd(o, lse, q, k, v, s.B, s.S, s.H, s.H, s.D, s.causal, 0); }, smoke, 100);
    double tb = bench_time_calls(
        [&] { rt_attention_bwd(dq, dk, dv, q, k, v, o, lse, dout, s.B, s.S, s.H, s.H, s.D, s.causal, 0); }, smoke, 100);
    double f = 4.0 * (double)s.B * (double)s.H * (double)s.S * (double)s.S * (double)s.D * (s.causal ? 0.5 : 1.0);
    double ff = tf > 0 ? f / tf * 1e-12 : 0, fb = tb > 0 ? 2.5 * f / tb * 1e-12 : 0;
    printf("%4lld %6lld %5lld %5lld %-6s | %8.3f %8.1f %6.1f%% | %8.3f %8.1f %6.1f%%\n", (long long)s.D,
           (long long)s.S, (long long)s.B, (long long)s.H, s.causal ? "causal" : "full", tf * 1e3, ff,
           peak > 0 ? 100 * ff / peak : 0.0, tb * 1e3, fb, peak > 0 ? 100 * fb / peak : 0.0);
    fflush(stdout);
    rt_free(q), rt_free(k), rt_free(v), rt_free(o), rt_free(dout), rt_free(dq), rt_free(dk), rt_free(dv);
    rt_free(lse);
}

int main(int argc, char **argv)
{
    bool full = false, smoke = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--full"))
            full = true;
        else if (!strcmp(argv[i], "--smoke"))
            smoke = true;
        else {
            fprintf(stderr, "ptdc_attn_bench: unknown option '%s' (options: --full, --smoke)\n", argv[i]);
            return 2;
        }
    }
    rt_init(&argc, &argv);
    char name[256];
    double peak = peak_tflops(name, sizeof name);
    printf("device: %s\n", name);
    if (peak > 0)
        printf("peak: %.0f TFLOP/s (dense bf16)\n", peak);
    else
        printf("peak: unknown (set PTDC_PEAK_TFLOPS for the %% columns)\n");
    printf("FLOPs: 4 B H S^2 D forward (halved when causal), backward 2.5x forward (docs/cost-model.md)\n");
    printf("%4s %6s %5s %5s %-6s | %8s %8s %7s | %8s %8s %7s\n", "D", "S", "batch", "heads", "mask", "fwd ms",
           "TFLOP/s", "peak", "bwd ms", "TFLOP/s", "peak");
    if (smoke) {
        run({1, 128, 2, 64, true}, peak, true);
    } else {
        for (int causal = 1; causal >= (full ? 0 : 1); causal--)
            for (int64_t D : {64, 128})
                for (int64_t S : {512, 1024, 2048, 4096, 8192}) run({16384 / S, S, 2048 / D, D, causal == 1}, peak, false);
    }
    rt_finalize();
    return 0;
}
