/* fp8.c: FP8 with per-tensor current scaling on the CPU, the reference of
 * the CUDA backend's FP8 path: the same codes from the same fp32 products
 * (runtime/common/fp8.c encodes them), and a GEMM of the exactly decoded
 * values through rt_matmul (OpenBLAS sgemm, fp32 accumulation). */
#include <math.h>
#include <stdlib.h>

#include "common/common.h"
#include "cpu.h"
#include "simd.h"

float rt_amax(const rt_act *src, int64_t n)
{
    /* Max is exact and order-free, so the threads' split changes nothing;
     * a NaN is tracked apart (max would drop it) and wins. */
    float m = 0.0f;
    int nan = 0;
    RTCPU_PRAGMA(omp parallel for schedule(static) reduction(max : m) reduction(| : nan) if (n >= RTCPU_PAR_MIN))
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(src[i]);
        nan |= a != a;
        m = a > m ? a : m;
    }
    return nan ? NAN : m;
}

void rt_cast_fp8(uint8_t *dst, const rt_act *src, int64_t n, float scale, RtFp8Format f)
{
    rtc_check_fp8_format("rt_cast_fp8", f);
    RTCPU_PAR_FOR(n)
    for (int64_t i = 0; i < n; i++)
        dst[i] = rtc_fp8_encode(src[i] * scale, f);
}

void rt_cast_fp8_t(uint8_t *dst, const rt_act *src, int64_t rows, int64_t cols, float scale,
                   RtFp8Format f)
{
    rtc_check_fp8_format("rt_cast_fp8_t", f);
    if (rows < 0 || cols < 0)
        rt_fatal("rt_cast_fp8_t: negative size %lld x %lld", (long long)rows, (long long)cols);
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < rows; i++)
            dst[j * rows + i] = rtc_fp8_encode(src[i * cols + j] * scale, f);
}

void rt_dequant_fp8(rt_act *dst, const uint8_t *src, int64_t n, float scale_inv, RtFp8Format f)
{
    rtc_check_fp8_format("rt_dequant_fp8", f);
    RTCPU_PAR_FOR(n)
    for (int64_t i = 0; i < n; i++)
        dst[i] = rtc_fp8_decode(src[i], f) * scale_inv;
}

void rt_matmul_fp8(rt_act *c, const uint8_t *a, RtFp8Format fa, float a_scale_inv, const uint8_t *b,
                   RtFp8Format fb, float b_scale_inv, int64_t M, int64_t N, int64_t K, bool accumulate)
{
    rtc_check_matmul_fp8("rt_matmul_fp8", fa, fb, M, N, K);
    if (M == 0 || N == 0)
        return;
    /* Decoded values are exact in fp32, and so is each product (at most
     * 4 x 4 significant bits): only the sum rounds, as on the GPU. The
     * scales multiply the sum afterwards, as cuBLASLt applies them. */
    float *ad = rtc_xmalloc((size_t)(M * K + N * K + M * N) * sizeof(float));
    float *bd = ad + M * K, *t = bd + N * K;
    rt_dequant_fp8(ad, a, M * K, 1.0f, fa);
    rt_dequant_fp8(bd, b, N * K, 1.0f, fb);
    rt_matmul(t, ad, bd, M, N, K, false, true, false);
    float s = a_scale_inv * b_scale_inv;
    RTCPU_PAR_FOR(M * N)
    for (int64_t i = 0; i < M * N; i++)
        c[i] = accumulate ? c[i] + s * t[i] : s * t[i];
    free(ad);
}
