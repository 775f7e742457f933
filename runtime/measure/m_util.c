/* m_util.c: what every part of ptdc-measure shares: timing (the median of
 * samples, the slowest rank's), cache eviction, buffers with deterministic
 * contents, the CPUs the ranks run on, and output. The bottom of the
 * program: it calls only the runtime (measure.h lists the layers). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity */
#endif
#include "measure.h"

#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static float *g_tbuf; /* backend float for the max over ranks */

void cal_util_init(void)
{
    g_tbuf = cal_f32(1, 0);
}

void cal_out(const CalOpts *o, const char *fmt, ...)
{
    if (o->rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

void cal_progress(const CalOpts *o, const char *fmt, ...)
{
    if (o->rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("calibrate: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

static double slowest(RtComm *comm, double t)
{
    if (!comm || rt_comm_size(comm) == 1)
        return t;
    float v = (float)t;
    rt_to_device(g_tbuf, &v, sizeof v);
    rt_allreduce_max(comm, g_tbuf, 1);
    rt_to_host(&v, g_tbuf, sizeof v);
    return v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cal_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[n / 2];
}

double cal_time(const CalOpts *o, RtComm *comm, CalFn f, void *arg)
{
    enum { SAMPLES = 5 };
    int samples = o->quick ? 3 : SAMPLES;
    /* Warm up (first touch, library plans), then size the batches on the
     * slowest rank so every rank makes the same number of calls. */
    if (comm)
        rt_barrier(comm);
    f(arg);
    double t0 = rt_time();
    f(arg);
    double one = slowest(comm, rt_time() - t0);
    double per = o->budget_s / samples;
    long k = one > 0 ? (long)(per / one) : 1000;
    if (k < 1)
        k = 1;
    if (k > 100000)
        k = 100000;
    double t[SAMPLES];
    for (int s = 0; s < samples; s++) {
        if (comm)
            rt_barrier(comm);
        double a = rt_time();
        for (long i = 0; i < k; i++)
            f(arg);
        t[s] = slowest(comm, (rt_time() - a) / (double)k);
    }
    return cal_median(t, samples);
}

double cal_time_cold(const CalOpts *o, RtComm *comm, CalFn f, CalFn evict, void *arg)
{
    enum { MAXS = 41 };
    f(arg); /* first touch, library plans */
    evict(arg);
    if (comm)
        rt_barrier(comm);
    double t0 = rt_time();
    f(arg);
    double one = slowest(comm, rt_time() - t0);
    /* As many single calls as the budget holds (their flushes not counted),
     * at least 5 for a median; every rank the same count. */
    int n = one > 0 ? (int)(o->budget_s / one) : MAXS;
    n = n < 5 ? 5 : n > MAXS ? MAXS : n;
    if (o->quick && n > 9)
        n = 9;
    double t[MAXS];
    for (int s = 0; s < n; s++) {
        evict(arg);
        if (comm)
            rt_barrier(comm);
        double a = rt_time();
        f(arg);
        t[s] = slowest(comm, rt_time() - a);
    }
    return cal_median(t, n);
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h> /* _mm_clflush, _mm_clflushopt, _mm_mfence */

/* CLFLUSHOPT (CPUID.7.0:EBX bit 23) flushes without serialising each line:
 * 64 MiB in 2.6 ms on the 2-core VM where CLFLUSH took 148 ms (a reload
 * after either is as slow: both leave the lines in memory). */
__attribute__((target("clflushopt"))) static void flush_opt(const char *c, size_t n)
{
    for (size_t i = 0; i < n; i += 64)
        _mm_clflushopt((void *)(c + i));
    _mm_clflushopt((void *)(c + n - 1));
}

void cal_evict(const void *p, size_t n)
{
    static int opt = -1;
    if (opt < 0) {
        unsigned a, b, c, d;
        opt = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 23 & 1);
    }
    const char *c = (const char *)p;
    if (!n)
        return;
    if (opt) {
        flush_opt(c, n);
    } else {
        for (size_t i = 0; i < n; i += 64)
            _mm_clflush(c + i);
        _mm_clflush(c + n - 1);
    }
    _mm_mfence(); /* orders both kinds of flush before the timed call */
}
#else
/* No flush instruction to call: stream through twice the last-level
 * cache (or 256 MiB when the C library does not say its size). */
void cal_evict(const void *p, size_t n)
{
    (void)p, (void)n;
    static char *junk;
    static size_t size;
    if (!junk) {
        long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
        size = llc > 0 ? 2 * (size_t)llc : (size_t)256 << 20;
        if (!(junk = malloc(size)))
            rt_fatal("ptdc-measure: out of host memory");
    }
    for (size_t i = 0; i < size; i += 64)
        junk[i]++;
}
#endif

/* A fixed pattern in [-scale, scale): reproducible, no denormals, and not
 * constant (no kernel may take a shortcut on it). */
static float pattern(int64_t i, float scale)
{
    uint32_t h = (uint32_t)i * 2654435761u;
    h ^= h >> 15;
    return scale * ((float)(h & 0xffff) / 32768.0f - 1.0f);
}

rt_act *cal_act(int64_t n, float scale)
{
    rt_act *d = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act));
    float *h = (float *)malloc((size_t)n * sizeof(float));
    if (!h)
        rt_fatal("ptdc-measure: out of host memory");
    for (int64_t i = 0; i < n; i++)
        h[i] = pattern(i, scale);
    rt_act_from_f32(d, h, n);
    free(h);
    return d;
}

float *cal_f32(int64_t n, float value)
{
    float *d = (float *)rt_alloc((size_t)n * sizeof(float));
    float *h = (float *)malloc((size_t)n * sizeof(float));
    if (!h)
        rt_fatal("ptdc-measure: out of host memory");
    for (int64_t i = 0; i < n; i++)
        h[i] = value;
    rt_to_device(d, h, (size_t)n * sizeof(float));
    free(h);
    return d;
}

int32_t *cal_ids(int64_t n, int64_t modulo)
{
    int32_t *d = (int32_t *)rt_alloc((size_t)n * sizeof(int32_t));
    int32_t *h = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    if (!h)
        rt_fatal("ptdc-measure: out of host memory");
    for (int64_t i = 0; i < n; i++)
        h[i] = (int32_t)(((uint64_t)i * 2654435761u) % (uint64_t)modulo);
    rt_to_device(d, h, (size_t)n * sizeof(int32_t));
    free(h);
    return d;
}

/* The CPUs the ranks run on together: the union of their affinity masks.
 * A rank's own mask is not it: launched one per core and bound, each rank
 * sees one CPU, and two of them would look like two ranks sharing one. */
int cal_cpus(void)
{
    enum { MAXCPU = 1024 };
    cpu_set_t s;
    CPU_ZERO(&s);
    if (sched_getaffinity(0, sizeof s, &s) != 0 || CPU_COUNT(&s) == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long i = 0; i < n && i < MAXCPU; i++)
            CPU_SET((int)i, &s);
    }
    float *on = cal_f32(MAXCPU, 0.f);
    for (int i = 0; i < MAXCPU && i < CPU_SETSIZE; i++)
        on[i] = CPU_ISSET(i, &s) ? 1.f : 0.f;
    rt_allreduce_max(rt_comm_world(), on, MAXCPU);
    int n = 0;
    for (int i = 0; i < MAXCPU; i++)
        n += on[i] > 0.5f;
    rt_free(on);
    return n > 0 ? n : 1;
}
