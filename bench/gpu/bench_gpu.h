/* bench_gpu.h: what the bench/gpu programs share. */
#ifndef PTDC_BENCH_GPU_H
#define PTDC_BENCH_GPU_H

#include "rt.h"

/* Seconds per call: a warm-up call, then enough calls for ~0.3 s (3 to
 * max_calls), wall time between synchronisations (rt_time). smoke: the
 * warm-up call only (0). */
template <class F>
static double bench_time_calls(F call, bool smoke, int max_calls)
{
    call();
    if (smoke) return 0;
    double t0 = rt_time();
    call();
    double one = rt_time() - t0;
    int n = one > 0 ? (int)(0.3 / one) : max_calls;
    n = n < 3 ? 3 : n > max_calls ? max_calls : n;
    t0 = rt_time();
    for (int i = 0; i < n; i++) call();
    return (rt_time() - t0) / n;
}

#endif
