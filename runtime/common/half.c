/* half.c: bf16 and fp16 conversions for safetensors import and export, by
 * bit manipulation (exact, no dependence on compiler half types). */
#include <string.h>

#include "common.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float rtc_bf16_to_f32(uint16_t h)
{
    return from_bits((uint32_t)h << 16);
}

uint16_t rtc_f32_to_bf16(float f)
{
    uint32_t u = to_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep it quiet and NaN */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float rtc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    if (exp == 0x1F) /* inf or NaN */
        return from_bits(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return from_bits(sign);
        /* subnormal: man * 2^-24, exact in fp32 */
        float v = (float)man * from_bits(0x33800000u);
        return sign ? -v : v;
    }
    return from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t rtc_f32_to_f16(float f)
{
    uint32_t u = to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
    if (a >= 0x477FF000u) /* rounds to 65520 or more: infinity */
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x38800000u) {
        /* fp16 subnormal (or zero): a multiple of 2^-24, rounded to nearest
         * even. Below 2^-25 everything rounds to zero. */
        if (a < 0x33000000u)
            return sign;
        uint32_t man = (a & 0x7FFFFFu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); /* 14 (2^-15) .. 24 (2^-25) */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias the exponent (127 -> 15), round the 13 dropped bits */
    uint32_t r = a - 0x38000000u;
    r += 0xFFFu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}
