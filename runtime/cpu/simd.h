/* simd.h: what the CPU kernels share to use the machine's vector units and
 * cores deterministically.
 *
 * Instruction sets. The library is built once and may run on other x86-64
 * machines than the one that built it (a shared build tree on a cluster), so
 * it is compiled for the baseline ISA and the hot loops are cloned for
 * x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512): RTCPU_CLONES asks gcc for
 * the clones and an ifunc resolver that picks one when the program starts.
 * A clone computes exactly what its loop says, but the clones may round
 * differently from each other (vector widths change the order of the lanes
 * of a sum; FMA contraction is allowed in runtime/cpu), so results are
 * bitwise reproducible per machine, not across instruction sets.
 *
 * Vectors. Loops are plain C that gcc vectorises for each clone; the few
 * register tiles that need explicit vectors (attention) are compiled once
 * per instruction set instead (attention_kern.h), because a 16-float vector
 * is one AVX-512 register but two AVX2 or four SSE registers, and tiles
 * sized for one set spill in the others.
 *
 * Threads. rtcpu_threads() is the team size of this rank (threads.c);
 * RTCPU_PAR_FOR runs a loop on it when the work is large enough. Every
 * parallel loop here gives each output element to exactly one iteration,
 * and every sum over iterations is taken over a fixed partition (RTCPU_CHUNK
 * rows or elements, whatever the thread count) combined in a fixed order,
 * so results do not depend on the number of threads. */
#ifndef PTDRT_CPU_SIMD_H
#define PTDRT_CPU_SIMD_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define RTCPU_X86_GCC 1
#define RTCPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RTCPU_X86_GCC 0
#define RTCPU_CLONES
#endif

#define RTCPU_INLINE static inline __attribute__((always_inline))

#ifdef _OPENMP
#define RTCPU_PRAGMA(x) _Pragma(#x)
#else
#define RTCPU_PRAGMA(x)
#endif
/* A loop whose iterations run on the rank's threads when `work` (about the
 * number of elements touched) is worth the start of a parallel region. */
#define RTCPU_PAR_MIN 32768
#define RTCPU_PAR_FOR(work) RTCPU_PRAGMA(omp parallel for schedule(static) if ((work) >= RTCPU_PAR_MIN))
/* A vectorised loop; `#pragma omp simd` also lets gcc vectorise reductions
 * (in a fixed lane order per clone). */
#define RTCPU_SIMD RTCPU_PRAGMA(omp simd)
#define RTCPU_SIMD_SUM(v) RTCPU_PRAGMA(omp simd reduction(+ : v))
#define RTCPU_SIMD_MAX(v) RTCPU_PRAGMA(omp simd reduction(max : v))

/* Rows per partial sum in reductions over rows (norm weight gradients,
 * rt_reduce_rows) and elements per partial sum in rt_sumsq. */
#define RTCPU_CHUNK 64
#define RTCPU_SUM_CHUNK 16384

int rtcpu_threads(void); /* threads of this rank's team (1 without OpenMP) */

RTCPU_INLINE float rtcpu_f32_of(int32_t i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

RTCPU_INLINE int32_t rtcpu_i32_of(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i;
}

/* e^x in fp32, branch-free so that loops calling it vectorise. x = n ln2 + r
 * with |r| <= ln2/2 (n rounded by the 1.5 2^23 trick; ln2 split in two so
 * n ln2_hi is exact), e^r by Cephes expf's polynomial, then 2^n applied in
 * two halves so every n from -150 to 128 stays a normal exponent. Measured
 * over [-110, 90]: within 0.7 ulp of e^x where that is a normal float;
 * underflows to 0 and overflows to inf like expf; NaN stays NaN (the clamps
 * compare false). */
RTCPU_INLINE float rtcpu_expf(float x)
{
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    float t = x * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    int32_t ni = rtcpu_i32_of(t) - 0x4B400000;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t n1 = ni / 2, n2 = ni - n1;
    /* Unsigned shifts: a NaN input gives a negative exponent here (the
     * result is NaN through p anyway), and shifting a negative int is UB. */
    return p * rtcpu_f32_of((int32_t)((uint32_t)(n1 + 127) << 23)) *
           rtcpu_f32_of((int32_t)((uint32_t)(n2 + 127) << 23));
}

/* 1 / (1 + e^-x) */
RTCPU_INLINE float rtcpu_sigmoidf(float x)
{
    return 1.0f / (1.0f + rtcpu_expf(-x));
}

#endif
