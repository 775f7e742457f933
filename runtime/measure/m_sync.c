/* m_sync.c: what a synchronising collective costs beyond its transfer on
 * CPU ranks: the wait for the partner that arrives last.
 *
 * The compute rates are each rank's mean over a batch of calls, the slowest
 * rank's (measure.c), so a program that synchronises once a step runs at
 * them. A tensor-parallel program synchronises after every few milliseconds
 * of work, and each time waits for whichever rank is late this time: a
 * shared machine's cores stall and speed up from one millisecond to the
 * next, the more so for memory-bound work (neighbours share the memory
 * bandwidth). Measured in pairs of ranks, alternating, so a slow minute hits
 * both phases: segments of one kind of work (GEMMs, or copies: memory-bound)
 * with nothing between them, then the same segments each followed by a
 * one-element all-reduce in pairs; less the all-reduces alone. The record is
 * the median of the extra time as a fraction of the work:
 *   sync RANKS CPUS KIND SEGMENT_S FRACTION      (KIND: gemm or mem) */
#include "measure.h"

#include <stdlib.h>
#include <string.h>

enum { N = 256 };                       /* GEMMs of 256^3 */
static const size_t COPY = (size_t)8 << 20; /* copies of 8 MiB: beyond the caches */

typedef struct Work {
    bool mem;
    int per;                            /* calls per segment */
    rt_act *a, *b, *c;
    float *src, *dst;
} Work;

static void segment(const Work *w)
{
    for (int i = 0; i < w->per; i++) {
        if (w->mem)
            rt_copy(w->dst, w->src, COPY);
        else
            rt_matmul(w->c, w->a, w->b, N, N, N, false, false, false);
    }
}

/* One phase: `reps` segments, each followed by an all-reduce in pairs when
 * sync; or (work NULL) the all-reduces alone. Time to the last rank's end. */
static double phase(const Work *w, int reps, bool sync, RtComm *pair, float *x)
{
    RtComm *world = rt_comm_world();
    rt_barrier(world);
    double t0 = rt_time();
    for (int i = 0; i < reps; i++) {
        if (w)
            segment(w);
        if (sync)
            rt_allreduce(pair, x, 1, RT_F32);
    }
    rt_barrier(world);
    return rt_time() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void measure(const CalOpts *o, Work *w, RtComm *pair, float *x, int ncpu)
{
    /* Segments of about 4 ms (a tensor-parallel layer's work between two
     * collectives is a few ms on a CPU rank), phases of about 0.1 s; every
     * rank takes rank 0's counts. */
    RtComm *world = rt_comm_world();
    w->per = 1;
    phase(w, 2, true, pair, x); /* first touch, library set-up */
    double one = phase(w, 4, false, pair, x) / 4;
    float *cnt = cal_f32(2, 0.f);
    if (o->rank == 0) {
        int per = (int)(4e-3 / (one > 1e-7 ? one : 1e-7) + 0.5);
        per = per < 1 ? 1 : per > 1000 ? 1000 : per;
        double seg = one * per;
        int reps = (int)(0.1 / (seg > 1e-6 ? seg : 1e-6) + 0.5);
        cnt[0] = (float)per, cnt[1] = (float)(reps < 4 ? 4 : reps > 400 ? 400 : reps);
    }
    float h[2];
    rt_allreduce(world, cnt, 2, RT_F32); /* rank 0's counts (the others add 0) */
    rt_to_host(h, cnt, sizeof h);
    rt_free(cnt);
    w->per = (int)(h[0] + 0.5f);
    int reps = (int)(h[1] + 0.5f);
    enum { S = 15 };
    double f[S], tall = 0;
    double bare = phase(NULL, reps, true, pair, x);
    for (int s = 0; s < S; s++) {
        double a = phase(w, reps, false, pair, x);
        double b = phase(w, reps, true, pair, x);
        double c = phase(NULL, reps, true, pair, x);
        bare = bare < c ? bare : c; /* the all-reduces' own time: their fastest */
        f[s] = (b - a - bare) / a;
        tall += a;
    }
    qsort(f, S, sizeof f[0], cmp_double);
    double seg = tall / S / reps;
    cal_out(o, CAL_FMT_SYNC, o->size, ncpu, w->mem ? "mem" : "gemm", seg, f[S / 2]);
    cal_progress(o, "%d ranks on %d cores, %s segments of %.1f ms, an all-reduce in pairs after each: "
                    "%.1f%% of the work waiting for the partner", o->size, ncpu, w->mem ? "copy" : "GEMM",
                 seg * 1e3, 100 * f[S / 2]);
}

void cal_measure_sync(const CalOpts *o)
{
    if (o->gpu || o->size % 2)
        return;
    int ncpu = cal_cpus();
    RtComm *pair = rt_comm_split(o->rank / 2, o->rank % 2);
    Work w;
    memset(&w, 0, sizeof w);
    w.a = cal_act(N * N, 1.f), w.b = cal_act(N * N, 1.f), w.c = cal_act(N * N, 0.f);
    w.src = cal_f32((int64_t)(COPY / sizeof(float)), 1.f), w.dst = cal_f32((int64_t)(COPY / sizeof(float)), 0.f);
    float *x = cal_f32(1, 0.f);
    measure(o, &w, pair, x, ncpu);
    w.mem = true;
    measure(o, &w, pair, x, ncpu);
    rt_free(w.a), rt_free(w.b), rt_free(w.c), rt_free(w.src), rt_free(w.dst), rt_free(x);
}
