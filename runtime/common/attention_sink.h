/* attention_sink.h: the attention-sink arithmetic of one softmax row, shared
 * by the CPU kernel (runtime/cpu/attention_sink.c) and the CUDA one
 * (runtime/cuda/attention_sink.cu), so both backends compute the same
 * floats in the same order.
 *
 * A sink (GPT-OSS) is a learned logit s per head that joins each row's
 * softmax denominator and takes no value: with the row's scores x_j,
 *   o' = sum_j e^{x_j} v_j / (e^s + sum_j e^{x_j}),  lse' = log(e^s + sum_j e^{x_j}).
 * The plain kernel's o and lse (lse = log sum_j e^{x_j}) give them per row:
 *   lse' = logaddexp(lse, s),  o' = o e^{lse - lse'}.
 * A row that sees no key (lse = -inf under context parallelism) gets
 * lse' = s and o' = 0. With o' and lse' saved, the plain backward is exact for
 * q, k and v (it rebuilds P = e^{x - lse'} and D = dO . O'), and
 *   d s = -sum over the head's rows of e^{s - lse'} (dO . O').
 * Both kernels accumulate that sum per head in double, rows in order. */
#ifndef PTDC_ATTENTION_SINK_H
#define PTDC_ATTENTION_SINK_H

#include <math.h>

#ifdef __CUDACC__
#define RT_SINK_FN static __host__ __device__ inline
#else
#define RT_SINK_FN static inline
#endif

/* lse' = log(e^lse + e^s), without overflow; lse may be -inf */
RT_SINK_FN float rt_sink_lse(float lse, float s)
{
    float hi = lse > s ? lse : s, lo = lse > s ? s : lse;
    return isinf(lo) ? hi : hi + log1pf(expf(lo - hi));
}

/* the factor o' = o x rt_sink_scale(lse, lse'): the row's share without the sink */
RT_SINK_FN float rt_sink_scale(float lse, float lse2) { return isinf(lse) ? 0.0f : expf(lse - lse2); }

/* the sink's probability in the row, e^{s - lse'} */
RT_SINK_FN float rt_sink_prob(float s, float lse2) { return expf(s - lse2); }

#endif
