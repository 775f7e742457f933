/* harness_fp8.cu: the FP8 path (fp8.cu, fp8_matmul.cu) against the CPU
 * backend. Casts and amax are exact on both backends, so they must agree
 * bit for bit: every bf16 bit pattern cast at several scales (ties, the
 * subnormals, saturation, infinities and NaN among them), which checks the
 * device's conversion (cvt.rn.satfinite on sm_89+, cuda_fp8.h's software
 * path on sm_80 and in the emulator) against runtime/common/fp8.c. The
 * GEMM differs from the CPU's only in summation order and its bf16 output:
 * TOL_BF16. FP8 GEMMs need sm_89+: on an older GPU that case is skipped
 * (rt_matmul_fp8 stops there by design). */
#include "cpu_rt.h"
#include "harness.h"

#include <math.h>
#include <string.h>

#include <cuda_runtime.h>

static const char *fname(RtFp8Format f) { return f == RT_FP8_E4M3 ? "e4m3" : "e5m2"; }

static std::vector<uint8_t> hu8(const uint8_t *d, int64_t n)
{
    std::vector<uint8_t> h((size_t)n);
    rt_to_host(h.data(), d, (size_t)n);
    return h;
}

/* Every bf16 pattern, cast on both backends at one scale: codes equal. */
static void t_cast_all(RtFp8Format f, float scale)
{
    const int64_t n = 65536;
    std::vector<float> x((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)i << 16;
        memcpy(&x[(size_t)i], &u, 4);
    }
    rt_act *dx = dact(x);
    uint8_t *dq = (uint8_t *)rt_alloc((size_t)n);
    rt_cast_fp8(dq, dx, n, scale, f);
    std::vector<uint8_t> got = hu8(dq, n), want((size_t)n);
    cpu_rt_cast_fp8(want.data(), x.data(), n, scale, (CpuRtFp8Format)f);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (got[(size_t)i] != want[(size_t)i] && bad++ == 0) first = i;
    char name[64], detail[96];
    snprintf(name, sizeof name, "cast_fp8 %s all bf16 x %g", fname(f), scale);
    if (bad)
        snprintf(detail, sizeof detail, "%lld differ (0x%04llx: %02x vs %02x)", (long long)bad, (long long)first,
                 got[(size_t)first], want[(size_t)first]);
    else
        snprintf(detail, sizeof detail, "65536 codes bitwise");
    report_bool(name, bad == 0, detail);
    rt_free(dx), rt_free(dq);
}

/* amax, the scale, the cast and the dequantisation of one random tensor. */
static void t_cast_tensor(Rng &r, RtFp8Format f)
{
    const int64_t n = 300007;
    std::vector<float> x((size_t)n);
    for (auto &v : x) v = bfr(r.uni() * exp2f(-12.0f + 15.0f * (r.uni() + 1.0f) / 2.0f));
    x[(size_t)(n / 2)] = -77.0f;
    rt_act *dx = dact(x);
    float amax = rt_amax(dx, n), camax = cpu_rt_amax(x.data(), n);
    char name[64], detail[96];
    snprintf(name, sizeof name, "amax %s tensor", fname(f));
    snprintf(detail, sizeof detail, "%g vs %g", amax, camax);
    report_bool(name, amax == camax, detail);
    float scale = rt_fp8_scale(amax, f);
    uint8_t *dq = (uint8_t *)rt_alloc((size_t)n);
    rt_cast_fp8(dq, dx, n, scale, f);
    std::vector<uint8_t> got = hu8(dq, n), want((size_t)n);
    cpu_rt_cast_fp8(want.data(), x.data(), n, scale, (CpuRtFp8Format)f);
    snprintf(name, sizeof name, "cast_fp8 %s tensor", fname(f));
    report_bool(name, got == want, "codes bitwise");
    /* Back: the CPU's fp32 value rounded to bf16 once is the GPU's. */
    rt_act *dy = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act));
    rt_dequant_fp8(dy, dq, n, 1.0f / scale, f);
    std::vector<float> y = hact(dy, n), cy((size_t)n);
    cpu_rt_dequant_fp8(cy.data(), want.data(), n, 1.0f / scale, (CpuRtFp8Format)f);
    bool same = true;
    for (int64_t i = 0; i < n; i++) same &= y[(size_t)i] == bfr(cy[(size_t)i]);
    snprintf(name, sizeof name, "dequant_fp8 %s tensor", fname(f));
    report_bool(name, same, "bf16 of the CPU value");
    /* A NaN wins. */
    x[7] = NAN;
    rt_act *dn = dact(x);
    snprintf(name, sizeof name, "amax %s with a NaN", fname(f));
    report_bool(name, std::isnan(rt_amax(dn, n)) && std::isnan(cpu_rt_amax(x.data(), n)), "NaN on both");
    rt_free(dx), rt_free(dq), rt_free(dy), rt_free(dn);
}

/* The transposed cast (an operand whose K runs down its columns): the
 * device's codes equal the CPU backend's, and both equal the plain cast's
 * codes transposed. */
static void t_cast_t(Rng &r, RtFp8Format f)
{
    const int64_t rows = 67, cols = 129, n = rows * cols;
    std::vector<float> x((size_t)n);
    for (auto &v : x) v = bfr(r.uni() * 5.0f);
    rt_act *dx = dact(x);
    float scale = rt_fp8_scale(cpu_rt_amax(x.data(), n), f);
    uint8_t *dq = (uint8_t *)rt_alloc((size_t)n);
    rt_cast_fp8_t(dq, dx, rows, cols, scale, f);
    std::vector<uint8_t> got = hu8(dq, n), want((size_t)n), plain((size_t)n);
    cpu_rt_cast_fp8_t(want.data(), x.data(), rows, cols, scale, (CpuRtFp8Format)f);
    cpu_rt_cast_fp8(plain.data(), x.data(), n, scale, (CpuRtFp8Format)f);
    bool tr = true;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) tr &= want[(size_t)(j * rows + i)] == plain[(size_t)(i * cols + j)];
    char name[64];
    snprintf(name, sizeof name, "cast_fp8_t %s %lldx%lld", fname(f), (long long)rows, (long long)cols);
    report_bool(name, got == want && tr, "codes bitwise, the plain cast's transposed");
    rt_free(dx), rt_free(dq);
}

static void t_matmul_fp8(Rng &r, RtFp8Format fa, RtFp8Format fb, int64_t M, int64_t N, int64_t K, bool acc)
{
    std::vector<float> a = randv(r, M * K, 2.0f), b = randv(r, N * K, 0.5f), c0 = randv(r, M * N);
    float sa = cpu_rt_fp8_scale(cpu_rt_amax(a.data(), M * K), (CpuRtFp8Format)fa);
    float sb = cpu_rt_fp8_scale(cpu_rt_amax(b.data(), N * K), (CpuRtFp8Format)fb);
    std::vector<uint8_t> qa((size_t)(M * K)), qb((size_t)(N * K));
    cpu_rt_cast_fp8(qa.data(), a.data(), M * K, sa, (CpuRtFp8Format)fa);
    cpu_rt_cast_fp8(qb.data(), b.data(), N * K, sb, (CpuRtFp8Format)fb);
    uint8_t *dqa = (uint8_t *)rt_alloc(qa.size()), *dqb = (uint8_t *)rt_alloc(qb.size());
    rt_to_device(dqa, qa.data(), qa.size());
    rt_to_device(dqb, qb.data(), qb.size());
    rt_act *dc = dact(c0);
    rt_matmul_fp8(dc, dqa, fa, 1.0f / sa, dqb, fb, 1.0f / sb, M, N, K, acc);
    std::vector<float> c = c0;
    cpu_rt_matmul_fp8(c.data(), qa.data(), (CpuRtFp8Format)fa, 1.0f / sa, qb.data(), (CpuRtFp8Format)fb, 1.0f / sb, M,
                      N, K, acc);
    char name[80];
    snprintf(name, sizeof name, "matmul_fp8 %s x %s %lldx%lldx%lld%s", fname(fa), fname(fb), (long long)M,
             (long long)N, (long long)K, acc ? " +C" : "");
    report(name, hact(dc, M * N), c, TOL_BF16);
    rt_free(dqa), rt_free(dqb), rt_free(dc);
}

void run_fp8_tests(Rng &r)
{
    for (int f = 0; f < 2; f++) {
        /* 1: the patterns themselves; the others put fp32 products (not
         * bf16 values) at every rounding position, and 2^-20 and 2^20 push
         * everything into the subnormals or past max. */
        for (float s : {1.0f, 3.0f, 0.7f, 448.0f / 77.0f, 0x1p-20f, 0x1p20f}) t_cast_all((RtFp8Format)f, s);
        t_cast_tensor(r, (RtFp8Format)f);
        t_cast_t(r, (RtFp8Format)f);
    }
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    if (major * 10 + minor < 89) {
        if (g_print) printf("%-40s SKIPPED: sm_%d%d has no FP8 tensor cores\n", "matmul_fp8", major, minor);
        return;
    }
#ifdef PTDC_CUDA_EMU
    const int64_t M = 48, N = 32, K = 64; /* the stand-in GEMM is a plain loop */
#else
    const int64_t M = 512, N = 384, K = 1024;
#endif
    t_matmul_fp8(r, RT_FP8_E4M3, RT_FP8_E4M3, M, N, K, false);
    t_matmul_fp8(r, RT_FP8_E5M2, RT_FP8_E4M3, M, N, K, false);
    t_matmul_fp8(r, RT_FP8_E4M3, RT_FP8_E5M2, M + 3, N, K, true);
}
