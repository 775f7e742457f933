/* harness.h: helpers of the GPU test harness (tests/gpu/harness*.cu).
 *
 * Inputs are random, rounded to bf16, and given identically to the CUDA
 * backend (rt_*) and to the CPU backend (cpu_rt_*, fp32). An output passes
 * when max|gpu - cpu| / max|cpu| is under the tolerance: 1e-5 where the CUDA
 * path computes and stores fp32 (statistics, loss, optimizer state), 1e-2
 * where it stores bf16. Non-finite values fail. */
#ifndef PTDC_TESTS_GPU_HARNESS_H
#define PTDC_TESTS_GPU_HARNESS_H

#include "rt.h"

#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <vector>

constexpr double TOL_F32 = 1e-5, TOL_BF16 = 1e-2;

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint64_t next()
    {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uni() { return (float)((next() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; } /* [-1, 1) */
    int64_t below(int64_t n) { return (int64_t)(next() % (uint64_t)n); }
};

static inline float bfr(float x) { return __bfloat162float(__float2bfloat16(x)); }

/* n values uniform in [-scale, scale), rounded to bf16. */
static inline std::vector<float> randv(Rng &r, int64_t n, float scale = 1.0f)
{
    std::vector<float> v((size_t)n);
    for (auto &x : v) x = bfr(scale * r.uni());
    return v;
}

/* Device buffers from host vectors, and back. */
static inline rt_act *dact(const std::vector<float> &h)
{
    rt_act *d = (rt_act *)rt_alloc((h.size() ? h.size() : 1) * sizeof(rt_act));
    rt_act_from_f32(d, h.data(), (int64_t)h.size());
    return d;
}
static inline float *df32(const std::vector<float> &h)
{
    float *d = (float *)rt_alloc((h.size() ? h.size() : 1) * sizeof(float));
    rt_to_device(d, h.data(), h.size() * sizeof(float));
    return d;
}
static inline int32_t *di32(const std::vector<int32_t> &h)
{
    int32_t *d = (int32_t *)rt_alloc((h.size() ? h.size() : 1) * sizeof(int32_t));
    rt_to_device(d, h.data(), h.size() * sizeof(int32_t));
    return d;
}
static inline std::vector<float> hact(const rt_act *d, int64_t n)
{
    std::vector<float> h((size_t)n);
    rt_act_to_f32(h.data(), d, n);
    return h;
}
static inline std::vector<float> hf32(const float *d, int64_t n)
{
    std::vector<float> h((size_t)n);
    rt_to_host(h.data(), d, (size_t)n * sizeof(float));
    return h;
}

/* harness.cu */
extern int g_failures;
extern bool g_print; /* this rank prints */
double rel_err(const std::vector<float> &got, const std::vector<float> &ref);
void report(const char *name, const std::vector<float> &got, const std::vector<float> &ref, double tol);
void report_bool(const char *name, bool ok, const char *detail);

/* harness_attn.cu: attention (kernels mode), fallback warnings, bank table. */
void run_attention_tests(Rng &r);
void run_attention_pos_tests(Rng &r);
int run_fallback_tests(uint64_t seed);
int run_bank_tests(uint64_t seed);

/* harness_fp8.cu: casts, amax and the FP8 GEMM (kernels mode). */
void run_fp8_tests(Rng &r);

/* harness_comm.cu: collectives on >= 2 GPUs (run under mpirun). */
int run_comm_tests(uint64_t seed);
int run_hang_test(void);
/* harness_order.cu: issue 34's ordering and threading hazards. */
int run_wd_race_test(void);
int run_pp_profile_test(uint64_t seed);
int run_alloc_order_test(uint64_t seed);
int run_mismatch_test(bool timed);
int run_emu_streams_test(void);

#endif
