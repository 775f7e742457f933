/* test_fp8.c: FP8 formats, casts and the FP8 GEMM of the CPU backend, the
 * reference the CUDA backend's FP8 path is checked against (tests/gpu).
 *
 *   encoder   hand-computed codes of both formats: max, min normal, min
 *             subnormal, halfway cases (ties to even), saturation of large
 *             values and infinities, NaN, signed zero
 *   codes     all 256 codes: decode then encode gives the code back (NaN
 *             codes give 0x7F, E5M2's infinities saturate to +-max), and
 *             finite values increase with the code
 *   model     1M random floats and every midpoint between neighbouring codes
 *             (and the floats either side) against a double-precision model:
 *             the nearest of the 256 decoded values, ties to the even code
 *   cast      rt_amax and rt_cast_fp8 of a tensor with outliers against the
 *             model; rt_dequant_fp8's error bound; zero and non-finite amax
 *   gemm      rt_matmul_fp8 against a double GEMM of the decoded values
 *             (tight: fp32 summation's bound) and against rt_matmul of the
 *             unquantised inputs (loose: the formats' own error)
 *   refusals  what cuBLASLt cannot run (K or N not multiples of 16, E5M2 x
 *             E5M2) and an unknown format stop with a message */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common.h"
#include "ref.h"
#include "rt.h"

static const char *fmt_name(RtFp8Format f) { return f == RT_FP8_E4M3 ? "E4M3" : "E5M2"; }

static void enc(float x, RtFp8Format f, unsigned want)
{
    unsigned got = rtc_fp8_encode(x, f);
    CHECK(got == want, "%s encode(%a) = 0x%02x, want 0x%02x", fmt_name(f), x, got, want);
}

static void dec(unsigned c, RtFp8Format f, float want)
{
    float got = rtc_fp8_decode((uint8_t)c, f);
    bool ok = isnan(want) ? isnan(got) : (got == want && signbit(got) == signbit(want));
    CHECK(ok, "%s decode(0x%02x) = %a, want %a", fmt_name(f), c, got, want);
}

static void test_encoder_e4m3(void)
{
    const RtFp8Format f = RT_FP8_E4M3;
    CHECK(rt_fp8_max(f) == 448.0f, "E4M3 max");
    enc(448.0f, f, 0x7E);                       /* max: 1.75 * 2^8 */
    enc(-448.0f, f, 0xFE);
    enc(464.0f, f, 0x7E);                       /* halfway to 480 (the NaN code): even is 448 */
    enc(449.0f, f, 0x7E), enc(1e6f, f, 0x7E);   /* saturation */
    enc(FLT_MAX, f, 0x7E), enc(-FLT_MAX, f, 0xFE);
    enc(INFINITY, f, 0x7E), enc(-INFINITY, f, 0xFE);
    enc(NAN, f, 0x7F), enc(-NAN, f, 0x7F);
    enc(0x1p-6f, f, 0x08);                      /* min normal */
    enc(0x1p-9f, f, 0x01);                      /* min subnormal */
    enc(0x7p-9f, f, 0x07);                      /* max subnormal */
    enc(0x1p-10f, f, 0x00);                     /* half the min subnormal: tie to even 0 */
    enc(-0x1p-10f, f, 0x80);
    enc(nextafterf(0x1p-10f, 1.0f), f, 0x01);
    enc(0x3p-10f, f, 0x02);                     /* 1.5 quanta: tie, even is 2 */
    enc(0x5p-10f, f, 0x02);                     /* 2.5 quanta: tie, even is 2 */
    enc(0xFp-10f, f, 0x08);                     /* 7.5 quanta: tie, rounds up into min normal */
    enc(1.0f, f, 0x38);
    enc(1.0625f, f, 0x38);                      /* 1 + half ulp: even is 1.0 */
    enc(nextafterf(1.0625f, 2.0f), f, 0x39);
    enc(1.1875f, f, 0x3A);                      /* between 1.125 and 1.25: even is 1.25 */
    enc(1.9375f, f, 0x40);                      /* 1.875 + half ulp: carries into 2.0 */
    enc(240.0f, f, 0x77), enc(256.0f, f, 0x78);
    enc(0.0f, f, 0x00), enc(-0.0f, f, 0x80);
    enc(1e-40f, f, 0x00), enc(-1e-40f, f, 0x80); /* float subnormals */
    dec(0x7E, f, 448.0f), dec(0xFE, f, -448.0f), dec(0x7F, f, NAN), dec(0xFF, f, NAN);
    dec(0x08, f, 0x1p-6f), dec(0x01, f, 0x1p-9f), dec(0x07, f, 0x7p-9f);
    dec(0x00, f, 0.0f), dec(0x80, f, -0.0f), dec(0x38, f, 1.0f), dec(0x78, f, 256.0f);
}

static void test_encoder_e5m2(void)
{
    const RtFp8Format f = RT_FP8_E5M2;
    CHECK(rt_fp8_max(f) == 57344.0f, "E5M2 max");
    enc(57344.0f, f, 0x7B);                     /* max: 1.75 * 2^15 */
    enc(-57344.0f, f, 0xFB);
    enc(61440.0f, f, 0x7B);                     /* halfway to 2^16 (infinity): saturates */
    enc(60000.0f, f, 0x7B), enc(1e30f, f, 0x7B);
    enc(INFINITY, f, 0x7B), enc(-INFINITY, f, 0xFB); /* the cast saturates infinities */
    enc(NAN, f, 0x7F), enc(-NAN, f, 0x7F);
    enc(0x1p-14f, f, 0x04);                     /* min normal */
    enc(0x1p-16f, f, 0x01);                     /* min subnormal */
    enc(0x3p-16f, f, 0x03);                     /* max subnormal */
    enc(0x1p-17f, f, 0x00), enc(-0x1p-17f, f, 0x80); /* half the min subnormal: tie to 0 */
    enc(0x3p-17f, f, 0x02);                     /* 1.5 quanta: tie, even is 2 */
    enc(0x7p-17f, f, 0x04);                     /* 3.5 quanta: tie, up into min normal */
    enc(1.0f, f, 0x3C);
    enc(1.125f, f, 0x3C);                       /* between 1 and 1.25: even is 1.0 */
    enc(1.375f, f, 0x3E);                       /* between 1.25 and 1.5: even is 1.5 */
    enc(nextafterf(1.125f, 2.0f), f, 0x3D);
    enc(0.0f, f, 0x00), enc(-0.0f, f, 0x80);
    enc(1e-40f, f, 0x00), enc(-1e-40f, f, 0x80);
    dec(0x7B, f, 57344.0f), dec(0xFB, f, -57344.0f);
    dec(0x7C, f, INFINITY), dec(0xFC, f, -INFINITY);
    dec(0x7D, f, NAN), dec(0x7E, f, NAN), dec(0x7F, f, NAN), dec(0xFF, f, NAN);
    dec(0x04, f, 0x1p-14f), dec(0x01, f, 0x1p-16f), dec(0x80, f, -0.0f), dec(0x3C, f, 1.0f);
}

static bool is_nan_code(unsigned c, RtFp8Format f)
{
    return f == RT_FP8_E4M3 ? (c & 0x7F) == 0x7F : (c & 0x7F) > 0x7C;
}

static void test_codes(RtFp8Format f)
{
    unsigned maxc = f == RT_FP8_E4M3 ? 0x7E : 0x7B;
    for (unsigned c = 0; c < 256; c++) {
        float v = rtc_fp8_decode((uint8_t)c, f);
        unsigned back = rtc_fp8_encode(v, f), want = c;
        if (is_nan_code(c, f))
            want = 0x7F;
        else if (isinf(v)) /* E5M2's infinities: the cast saturates */
            want = (c & 0x80) | maxc;
        CHECK(back == want, "%s round trip of 0x%02x (%a) gave 0x%02x", fmt_name(f), c, v, back);
    }
    for (unsigned c = 1; c <= maxc; c++)
        CHECK(rtc_fp8_decode((uint8_t)c, f) > rtc_fp8_decode((uint8_t)(c - 1), f), "%s: 0x%02x not above its predecessor",
              fmt_name(f), c);
}

/* The model: the nearest finite code in double, ties to the even code
 * (the one with a zero last mantissa bit), beyond max saturated, NaN 0x7F. */
static unsigned model_encode(double x, RtFp8Format f)
{
    if (isnan(x))
        return 0x7F;
    unsigned maxc = f == RT_FP8_E4M3 ? 0x7E : 0x7B, sign = signbit(x) ? 0x80 : 0;
    double a = fabs(x);
    unsigned best = 0;
    double bd = INFINITY;
    for (unsigned c = 0; c <= maxc; c++) {
        double d = fabs((double)rtc_fp8_decode((uint8_t)c, f) - a);
        if (d < bd || (d == bd && !(c & 1))) /* c ascends: equal distance is a tie */
            best = c, bd = d;
    }
    return sign | best;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void model_check(float x, RtFp8Format f, int *bad)
{
    unsigned got = rtc_fp8_encode(x, f), want = model_encode(x, f);
    if (got != want && (*bad)++ < 5)
        CHECK(0, "%s encode(%a) = 0x%02x, the model says 0x%02x", fmt_name(f), x, got, want);
}

static void test_model(RtFp8Format f)
{
    int bad = 0;
    /* Floats of every exponent near the format's range (|x| in 2^-20 .. 2^17). */
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)rng_next();
        u = (u & 0x807FFFFFu) | ((uint32_t)(107 + (int)((u >> 23) % 38)) << 23);
        float x;
        memcpy(&x, &u, sizeof x);
        model_check(x, f, &bad);
    }
    /* Every midpoint between neighbouring codes, and the floats either side. */
    unsigned maxc = f == RT_FP8_E4M3 ? 0x7E : 0x7B;
    for (unsigned c = 0; c <= maxc; c++) {
        float lo = rtc_fp8_decode((uint8_t)c, f);
        float hi = c < maxc ? rtc_fp8_decode((uint8_t)(c + 1), f) : 2 * rt_fp8_max(f) - rtc_fp8_decode((uint8_t)(c - 1), f);
        float mid = (float)(((double)lo + hi) / 2); /* exact: a few significant bits */
        for (int s = 0; s < 2; s++) {
            float m = s ? -mid : mid;
            model_check(m, f, &bad), model_check(nextafterf(m, 0.0f), f, &bad);
            model_check(nextafterf(m, s ? -INFINITY : INFINITY), f, &bad);
        }
    }
    CHECK(bad == 0, "%s: %d encodings differ from the model", fmt_name(f), bad);
}

static void test_cast(RtFp8Format f)
{
    const int64_t n = 100003;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    uint8_t *q = malloc((size_t)n);
    /* Normal values with a spread of magnitudes (2^-12 .. 2^3) and one
     * outlier: the small values land in the subnormals after scaling. */
    double amax_ref = 0;
    for (int64_t i = 0; i < n; i++) {
        double u = ref_uniform(-1, 1), e = ref_uniform(-12, 3);
        x[i] = (float)(u * exp2(e));
        amax_ref = fmax(amax_ref, fabs((double)x[i]));
    }
    x[n / 3] = -77.25f;
    amax_ref = 77.25;
    float amax = rt_amax(x, n);
    CHECK(amax == (float)amax_ref, "%s: amax %g, want %g", fmt_name(f), amax, amax_ref);
    float scale = rt_fp8_scale(amax, f);
    CHECK(scale == (float)(rt_fp8_max(f) / amax_ref), "%s: scale %a", fmt_name(f), scale);
    rt_cast_fp8(q, x, n, scale, f);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        /* The fp32 product: a double product of two floats is exact, so
         * rounding it to float is the fp32 multiplication. */
        unsigned want = model_encode((float)((double)x[i] * scale), f);
        if (q[i] != want && bad++ < 5)
            CHECK(0, "%s: cast of x[%lld] = %a: 0x%02x, the model says 0x%02x", fmt_name(f), (long long)i, x[i], q[i],
                  want);
    }
    CHECK(bad == 0, "%s: %d cast codes differ from the model", fmt_name(f), bad);
    CHECK(q[n / 3] == (0x80 | (f == RT_FP8_E4M3 ? 0x7E : 0x7B)), "%s: amax element is 0x%02x, not -max", fmt_name(f),
          q[n / 3]);
    /* Dequantised: within half a quantum of the code's binade (relative
     * 2^-(m+1) for normal codes), absolute half the min subnormal below. */
    float inv = 1.0f / scale;
    rt_dequant_fp8(y, q, n, inv, f);
    double rel = f == RT_FP8_E4M3 ? 0x1p-4 : 0x1p-3, sub = f == RT_FP8_E4M3 ? 0x1p-10 : 0x1p-17;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)y[i] - x[i]), bound = fmax(rel * fabs((double)x[i]), sub / scale) * (1 + 1e-6);
        worst = fmax(worst, err / bound);
    }
    CHECK(worst <= 1.0, "%s: dequantised error %.3f of its bound", fmt_name(f), worst);
    /* Zero tensor: scale 1, codes 0. Non-finite amax: scale 1. */
    memset(x, 0, 64 * sizeof *x);
    CHECK(rt_amax(x, 64) == 0.0f && rt_fp8_scale(0.0f, f) == 1.0f, "%s: zero amax", fmt_name(f));
    rt_cast_fp8(q, x, 64, 1.0f, f);
    int nz = 0;
    for (int i = 0; i < 64; i++)
        nz += q[i] != 0;
    CHECK(nz == 0, "%s: zero tensor cast to nonzero codes", fmt_name(f));
    CHECK(rt_fp8_scale(INFINITY, f) == 1.0f && rt_fp8_scale(NAN, f) == 1.0f, "%s: non-finite amax", fmt_name(f));
    CHECK(rt_fp8_scale(1e-44f, f) == FLT_MAX, "%s: tiny amax", fmt_name(f));
    x[5] = NAN;
    CHECK(isnan(rt_amax(x, 64)), "%s: amax of a NaN tensor", fmt_name(f));
    CHECK(rt_amax(x, 0) == 0.0f, "%s: amax of nothing", fmt_name(f));
    free(x), free(y), free(q);
}

/* One FP8 GEMM: A [M,K] in fa, B [N,K] in fb, values ~ N(0,1)-like with
 * magnitudes spread over 2^-4 .. 2^2. */
static void test_gemm(RtFp8Format fa, RtFp8Format fb, int64_t M, int64_t N, int64_t K, bool accumulate)
{
    float *a = malloc((size_t)(M * K) * sizeof *a), *b = malloc((size_t)(N * K) * sizeof *b);
    float *c = malloc((size_t)(M * N) * sizeof *c), *c32 = malloc((size_t)(M * N) * sizeof *c);
    float *c0 = malloc((size_t)(M * N) * sizeof *c);
    uint8_t *qa = malloc((size_t)(M * K)), *qb = malloc((size_t)(N * K));
    double *ad = malloc((size_t)(M * K) * sizeof *ad), *bd = malloc((size_t)(N * K) * sizeof *bd);
    double *ref = malloc((size_t)(M * N) * sizeof *ref), *mag = malloc((size_t)(M * N) * sizeof *mag);
    for (int64_t i = 0; i < M * K; i++)
        a[i] = (float)(ref_uniform(-1, 1) * exp2(ref_uniform(-4, 2)));
    for (int64_t i = 0; i < N * K; i++)
        b[i] = (float)(ref_uniform(-1, 1) * exp2(ref_uniform(-4, 2)));
    ref_fill(c0, NULL, M * N, -1, 1);
    float sa = rt_fp8_scale(rt_amax(a, M * K), fa), sb = rt_fp8_scale(rt_amax(b, N * K), fb);
    rt_cast_fp8(qa, a, M * K, sa, fa);
    rt_cast_fp8(qb, b, N * K, sb, fb);
    memcpy(c, c0, (size_t)(M * N) * sizeof *c);
    rt_matmul_fp8(c, qa, fa, 1.0f / sa, qb, fb, 1.0f / sb, M, N, K, accumulate);
    /* Double GEMM of the decoded values, and the sum of |products| that
     * bounds fp32 summation's error: |err| <= gamma_K * sum|a b| with
     * gamma_K ~ K * 2^-24, plus the scales' two roundings. */
    for (int64_t i = 0; i < M * K; i++)
        ad[i] = rtc_fp8_decode(qa[i], fa);
    for (int64_t i = 0; i < N * K; i++)
        bd[i] = rtc_fp8_decode(qb[i], fb);
    double s = (double)(1.0f / sa) * (double)(1.0f / sb), worst = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0, m = 0;
            for (int64_t k = 0; k < K; k++)
                acc += ad[i * K + k] * bd[j * K + k], m += fabs(ad[i * K + k] * bd[j * K + k]);
            double want = s * acc + (accumulate ? c0[i * N + j] : 0);
            double bound = (K + 3) * 0x1p-24 * s * m + 0x1p-24 * fabs(want) + 1e-30;
            worst = fmax(worst, fabs(c[i * N + j] - want) / bound);
            ref[i * N + j] = want, mag[i * N + j] = m;
        }
    CHECK(worst <= 1.0, "%s x %s %lldx%lldx%lld: %.3f of fp32 summation's bound from the exact GEMM", fmt_name(fa),
          fmt_name(fb), (long long)M, (long long)N, (long long)K, worst);
    /* Against the unquantised GEMM: each element's rounding is uniform
     * within half an ulp, 2^-(m+1) relative at the binade's bottom: an rms
     * relative error of about 0.026 for E4M3 (m = 3) and 0.051 for E5M2
     * (m = 2) per operand, which add in quadrature over a sum with random
     * signs: 0.036 for E4M3 x E4M3, 0.057 with one E5M2 operand, in the
     * norm of C. The tolerance is 1.5 times that; the largest error
     * against max|C| is reported beside it. */
    memcpy(c32, c0, (size_t)(M * N) * sizeof *c);
    rt_matmul(c32, a, b, M, N, K, false, true, accumulate);
    double num = 0, den = 0, emax = 0, cmax = 0;
    for (int64_t i = 0; i < M * N; i++) {
        double d = (double)c[i] - c32[i], r = (double)c32[i] - (accumulate ? c0[i] : 0);
        num += d * d, den += r * r;
        emax = fmax(emax, fabs(d)), cmax = fmax(cmax, fabs(r));
    }
    double err = sqrt(num / den), tol = 1.5 * ((fa == RT_FP8_E5M2 || fb == RT_FP8_E5M2) ? 0.057 : 0.036);
    printf("fp8 gemm %s x %s %lldx%lldx%lld%s: |fp8 - fp32| / |fp32| = %.4f (tolerance %.3f), "
           "max|fp8 - fp32| / max|fp32| = %.4f\n",
           fmt_name(fa), fmt_name(fb), (long long)M, (long long)N, (long long)K, accumulate ? " +C" : "", err, tol,
           emax / cmax);
    CHECK(err < tol, "fp8 gemm against fp32: %.4f", err);
    free(a), free(b), free(c), free(c32), free(c0), free(qa), free(qb), free(ad), free(bd), free(ref), free(mag);
}

/* What cuBLASLt cannot run is refused on the CPU too (arg: which case). */
static void bad_gemm(void *arg)
{
    static uint8_t a[32 * 32], b[32 * 32];
    float c[32 * 32];
    const char *k = arg;
    if (!strcmp(k, "k"))
        rt_matmul_fp8(c, a, RT_FP8_E4M3, 1, b, RT_FP8_E4M3, 1, 4, 16, 24, false);
    else if (!strcmp(k, "n"))
        rt_matmul_fp8(c, a, RT_FP8_E4M3, 1, b, RT_FP8_E4M3, 1, 4, 8, 32, false);
    else
        rt_matmul_fp8(c, a, RT_FP8_E5M2, 1, b, RT_FP8_E5M2, 1, 4, 16, 32, false);
}

static void bad_format(void *arg)
{
    (void)arg;
    float x[4] = {0};
    uint8_t q[4];
    rt_cast_fp8(q, x, 4, 1.0f, (RtFp8Format)7);
}

static void test_fatal(void)
{
    ref_expect_fatal("fp8 gemm K = 24", bad_gemm, (void *)"k", "multiples of 16");
    ref_expect_fatal("fp8 gemm N = 8", bad_gemm, (void *)"n", "multiples of 16");
    ref_expect_fatal("fp8 gemm E5M2 x E5M2", bad_gemm, (void *)"e5", "E5M2 x E5M2");
    ref_expect_fatal("fp8 cast, format 7", bad_format, NULL, "unknown FP8 format 7");
}

/* rt_cast_fp8_t: the codes of rt_cast_fp8, transposed (rows and columns
 * of unequal, odd counts, so a swapped index cannot pass). */
static void test_cast_t(RtFp8Format f)
{
    const int64_t rows = 37, cols = 53, n = rows * cols;
    float *x = malloc((size_t)n * sizeof *x);
    uint8_t *q = malloc((size_t)n), *qt = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)ref_uniform(-3, 3);
    float scale = rt_fp8_scale(rt_amax(x, n), f);
    rt_cast_fp8(q, x, n, scale, f);
    rt_cast_fp8_t(qt, x, rows, cols, scale, f);
    int bad = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            bad += qt[j * rows + i] != q[i * cols + j];
    CHECK(bad == 0, "%s: %d transposed cast codes differ from the plain cast's", fmt_name(f), bad);
    free(x), free(q), free(qt);
}

int main(void)
{
    ref_seed(20261129);
    test_encoder_e4m3();
    test_encoder_e5m2();
    for (int f = 0; f < 2; f++) {
        test_codes((RtFp8Format)f);
        test_model((RtFp8Format)f);
        test_cast((RtFp8Format)f);
        test_cast_t((RtFp8Format)f);
    }
    test_gemm(RT_FP8_E4M3, RT_FP8_E4M3, 48, 64, 256, false);   /* forward: activations x weights */
    test_gemm(RT_FP8_E5M2, RT_FP8_E4M3, 64, 32, 512, false);   /* backward: gradients x weights */
    test_gemm(RT_FP8_E4M3, RT_FP8_E5M2, 33, 16, 1024, true);   /* odd M, accumulate into C */
    test_fatal();
    return check_status("rt_fp8");
}
