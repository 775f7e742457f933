/* fp8_convert.cpp: the CPU backend's FP8 encoder and decoder
 * (runtime/common/fp8.c) against cuda_fp8.h's own conversions as the host
 * compiles them, which is the code sm_80 runs on the device (the header's
 * software path; sm_89+ use cvt.rn.satfinite, which the harness checks on
 * a GPU). Every non-negative float, both formats, code for code (about 30 s);
 * negative floats every 61st pattern (the sign is one bit on both sides);
 * all 256 decodings. No GPU needed: test gpu.fp8_convert. */
#include <cuda_fp8.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

static bool same_value(float a, float b)
{
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

int main()
{
    long bad = 0;
    for (int f = 0; f < 2; f++) {
        RtFp8Format rf = f ? RT_FP8_E5M2 : RT_FP8_E4M3;
        __nv_fp8_interpretation_t nf = f ? __NV_E5M2 : __NV_E4M3;
        long n = 0, diff = 0;
        for (uint64_t u = 0; u < (1ull << 32); u += u < 0x80000000ull ? 1 : 61, n++) {
            uint32_t b = (uint32_t)u;
            float x;
            memcpy(&x, &b, sizeof x);
            unsigned mine = rtc_fp8_encode(x, rf), nv = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, nf);
            if (mine != nv && diff++ < 5)
                printf("%s encode(%a) [%08x]: 0x%02x, cuda_fp8.h 0x%02x\n", f ? "e5m2" : "e4m3", x, b, mine, nv);
        }
        for (unsigned c = 0; c < 256; c++) {
            float mine = rtc_fp8_decode((uint8_t)c, rf);
            float nv = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, nf)));
            if (!same_value(mine, nv) && diff++ < 10)
                printf("%s decode(0x%02x): %a, cuda_fp8.h %a\n", f ? "e5m2" : "e4m3", c, mine, nv);
        }
        printf("%s: %ld floats and 256 codes, %ld differences\n", f ? "e5m2" : "e4m3", n, diff);
        bad += diff;
    }
    return bad ? 1 : 0;
}
