/* measure.c: ptdc-measure's entry point, timing and buffers.
 *
 *   ptdc-measure --part compute|comm|memory [--quick] [--budget SECONDS]
 *
 * `ptdc calibrate` launches it (mpirun/srun) once per part and machine
 * configuration; docs/cost-model.md lists the records it prints. */
#include "measure.h"

#ifdef PTDC_CUDA
#include <cuda_runtime.h>
#endif
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static float *g_tbuf; /* backend float for the max over ranks */

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

static void usage(void)
{
    fprintf(stderr, "usage: ptdc-measure --part compute|comm|memory [--quick] [--budget SECONDS]\n"
                    "Times libptdrt's kernels and collectives and prints calibration records;\n"
                    "`ptdc calibrate` runs it and fits the cost model to them.\n");
}

enum { NO_DEVICE = 3 }; /* exit status `ptdc calibrate` recognises */

int main(int argc, char **argv)
{
#ifdef PTDC_CUDA
    /* Say plainly that there is nothing to measure, before MPI and NCCL. */
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        fprintf(stderr, "ptdc-measure: no CUDA GPU on this machine (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no device visible");
        return NO_DEVICE;
    }
    if (argc == 2 && !strcmp(argv[1], "--devices")) { /* for `ptdc calibrate`'s default --ranks */
        printf("%d\n", ndev);
        return 0;
    }
#endif
    rt_init(&argc, &argv);
    CalOpts o;
    memset(&o, 0, sizeof o);
    o.rank = rt_world_rank();
    o.size = rt_world_size();
    o.budget_s = 0.05;
#ifdef PTDC_CUDA
    o.gpu = 1;
#endif
    const char *part = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--part") && i + 1 < argc) {
            part = argv[++i];
        } else if (!strcmp(argv[i], "--quick")) {
            o.quick = 1;
        } else if (!strcmp(argv[i], "--budget") && i + 1 < argc) {
            o.budget_s = atof(argv[++i]);
            if (!(o.budget_s > 0 && o.budget_s < 10))
                rt_fatal("ptdc-measure: --budget must be between 0 and 10 seconds");
        } else if (!strcmp(argv[i], "--help")) {
            if (o.rank == 0)
                usage();
            rt_finalize();
            return 0;
        } else {
            if (o.rank == 0)
                usage();
            rt_fatal("ptdc-measure: unknown argument '%s'", argv[i]);
        }
    }
    if (!part)
        rt_fatal("ptdc-measure: --part compute|comm|memory is required");
    g_tbuf = cal_f32(1, 0);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
#ifdef PTDC_CUDA
    const char *backend = "cuda";
#else
    const char *backend = "cpu";
#endif
    cal_out(&o, "meta backend %s ranks %d act_bytes %d host %s part %s", backend, o.size,
            (int)sizeof(rt_act), host, part);
    if (!strcmp(part, "compute")) {
        cal_measure_gemm(&o);
        cal_measure_kernels(&o);
        cal_measure_attention(&o);
    } else if (!strcmp(part, "comm")) {
        cal_measure_comm(&o);
        cal_measure_share(&o);
        cal_measure_sync(&o);
    } else if (!strcmp(part, "memory")) {
        cal_measure_memory(&o);
    } else {
        rt_fatal("ptdc-measure: unknown part '%s' (compute, comm or memory)", part);
    }
    cal_out(&o, "end");
    rt_finalize();
    return 0;
}
