/* fp8.c: the OCP FP8 formats (E4M3, E5M2) by bit manipulation, exact and
 * independent of compiler types: the CPU backend's casts and GEMM use it,
 * and it is the rule the CUDA backend's conversions (cuda_fp8.h) follow.
 *
 * Encoding: round to nearest, ties to even, in the format's own precision
 * (subnormals included), then saturate: a magnitude that rounds past the
 * largest finite value, and an infinity, become +-max (TE's casts and
 * cvt.rn.satfinite); NaN becomes 0x7F in both formats (cuda_fp8.h's
 * canonical NaN); the sign of zero is kept. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "common.h"

/* Mantissa bits, exponent bias and largest finite code of a format. */
static unsigned mbits_of(RtFp8Format f) { return f == RT_FP8_E4M3 ? 3u : 2u; }
static int bias_of(RtFp8Format f) { return f == RT_FP8_E4M3 ? 7 : 15; }
static uint32_t maxcode_of(RtFp8Format f) { return f == RT_FP8_E4M3 ? 0x7Eu : 0x7Bu; }

float rt_fp8_max(RtFp8Format f)
{
    return f == RT_FP8_E4M3 ? 448.0f : 57344.0f;
}

uint8_t rtc_fp8_encode(float x, RtFp8Format f)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return 0x7F;
    unsigned mb = mbits_of(f);
    int emin = 1 - bias_of(f);
    /* x = m * 2^(e - 23) with a 24-bit significand m; float subnormals
     * (e = -127 here) lie far below half the smallest FP8 subnormal and
     * round to zero through the shift bound below. */
    int e = (int)(a >> 23) - 127;
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    /* Bits to drop: down to mb fraction bits, more below the normal range
     * (the quantum stays 2^(emin - mb) there). */
    int shift = 23 - (int)mb + (e < emin ? emin - e : 0);
    if (shift > 24) /* m < 2^24 <= half the quantum: rounds to zero */
        return (uint8_t)sign;
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    /* q counts quanta: below the normal range it is the code itself; above
     * it q = 2^mb + fraction, and a carry out of the fraction moves into the
     * exponent field by the same addition. */
    uint32_t code = e < emin ? q : ((uint32_t)(e + bias_of(f)) << mb) + q - (1u << mb);
    if (code > maxcode_of(f))
        code = maxcode_of(f);
    return (uint8_t)(sign | code);
}

float rtc_fp8_decode(uint8_t c, RtFp8Format f)
{
    unsigned mb = mbits_of(f);
    uint32_t mag = c & 0x7Fu, exp = mag >> mb, frac = mag & ((1u << mb) - 1u);
    float v;
    if (f == RT_FP8_E4M3 && mag == 0x7Fu)
        return NAN;
    if (f == RT_FP8_E5M2 && exp == 31u) {
        if (frac)
            return NAN;
        v = INFINITY;
    } else if (exp == 0) { /* subnormal: frac * 2^(emin - mb), exact */
        v = ldexpf((float)frac, 1 - bias_of(f) - (int)mb);
    } else {
        v = ldexpf((float)((1u << mb) | frac), (int)exp - bias_of(f) - (int)mb);
    }
    return (c & 0x80u) ? -v : v;
}

float rt_fp8_scale(float amax, RtFp8Format f)
{
    /* A zero, infinite or NaN amax carries no range information: leave the
     * values unscaled (the cast saturates or keeps NaN). */
    if (!(amax > 0.0f) || amax > FLT_MAX)
        return 1.0f;
    float s = rt_fp8_max(f) / amax;
    return s > FLT_MAX ? FLT_MAX : s;
}

void rtc_check_fp8_format(const char *fn, RtFp8Format f)
{
    if (f != RT_FP8_E4M3 && f != RT_FP8_E5M2)
        rt_fatal("%s: unknown FP8 format %d", fn, (int)f);
}

void rtc_check_matmul_fp8(const char *fn, RtFp8Format fa, RtFp8Format fb, int64_t M, int64_t N, int64_t K)
{
    rtc_check_fp8_format(fn, fa);
    rtc_check_fp8_format(fn, fb);
    if (fa == RT_FP8_E5M2 && fb == RT_FP8_E5M2)
        rt_fatal("%s: E5M2 x E5M2 is not an FP8 GEMM cuBLASLt runs (one operand must be E4M3)", fn);
    if (M < 0 || N < 0 || K < 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
        rt_fatal("%s: sizes M=%lld N=%lld K=%lld out of range", fn, (long long)M, (long long)N, (long long)K);
    if (K % 16 || N % 16)
        rt_fatal("%s: K=%lld and N=%lld must be multiples of 16 (cuBLASLt's FP8 leading dimensions)", fn,
                 (long long)K, (long long)N);
}
