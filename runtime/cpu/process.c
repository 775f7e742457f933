/* process.c: start-up, errors, timing and memory of the CPU backend. */
#include <cblas.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "cpu.h"

static bool mpi_up; /* between rt_init and rt_finalize */

void rtcpu_mpi_check(int code, const char *what, const char *file, int line)
{
    if (code == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error code %d", code);
    rt_fatal("%s:%d: MPI: %s (in %s)", file, line, msg, what);
}

void rt_init(int *argc, char ***argv)
{
    int inited = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&inited);
    /* MPI_THREAD_MULTIPLE lets the watchdog thread ask other ranks where
     * they are when a wait stalls (watch.c); measured to cost well under a
     * microsecond per collective. */
    if (!inited && MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "ptdrt: MPI_Init failed\n");
        exit(1);
    }
    if (inited)
        MPI_Query_thread(&provided);
    mpi_up = true;
    rtcpu_watch_start(provided >= MPI_THREAD_MULTIPLE);
    /* Report errors instead of MPI's default abort, so each names its call;
     * communicators split from the world inherit this. */
    RT_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    /* The non-blocking collectives' thread and the world's twin (comm_async.c). */
    rtcpu_comm_twin(rt_comm_world());
    rtcpu_async_start(provided >= MPI_THREAD_MULTIPLE);
    /* One BLAS thread per rank unless the user says otherwise: ranks already
     * fill the cores, and oversubscribed BLAS threads only contend. */
    if (!getenv("OPENBLAS_NUM_THREADS") && !getenv("OMP_NUM_THREADS"))
        openblas_set_num_threads(1);
}

void rt_finalize(void)
{
    if (!mpi_up)
        return;
    /* A watched barrier first: a stalled peer is named here instead of
     * hanging MPI_Finalize. */
    rt_barrier(rt_comm_world());
    rtcpu_async_stop();
    rtcpu_watch_stop();
    rtcpu_comm_free_all();
    RT_MPI(MPI_Finalize());
    mpi_up = false;
}

int rt_world_rank(void)
{
    int r = 0;
    if (mpi_up)
        RT_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    return r;
}

int rt_world_size(void)
{
    int n = 1;
    if (mpi_up)
        RT_MPI(MPI_Comm_size(MPI_COMM_WORLD, &n));
    return n;
}

void rt_fatal(const char *fmt, ...)
{
    char prefix[32] = "";
    if (mpi_up && rt_world_size() > 1)
        snprintf(prefix, sizeof prefix, "[rank %d] ", rt_world_rank());
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    rtc_vwrite_line(2, prefix, fmt, ap); /* one write(): lines of ranks never run together */
    va_end(ap);
    if (mpi_up)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

double rt_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void *rtcpu_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        rt_fatal("ptdrt: out of host memory allocating %zu bytes", bytes);
    return p;
}

/* 64-byte aligned (cache lines, AVX-512 loads) and zeroed, so a program that
 * reads a buffer before writing it is at least deterministic. */
void *rt_alloc(size_t bytes)
{
    size_t n = (bytes + 63) / 64 * 64;
    if (n == 0)
        n = 64;
    void *p = aligned_alloc(64, n);
    if (!p)
        rt_fatal("ptdrt: out of memory allocating %zu bytes", bytes);
    memset(p, 0, n);
    return p;
}

void rt_free(void *p)
{
    free(p);
}

void rt_zero(void *dst, size_t bytes)
{
    if (bytes)
        memset(dst, 0, bytes);
}

void rt_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src)
        memmove(dst, src, bytes);
}

void rt_to_device(void *dst, const void *host_src, size_t bytes)
{
    rt_copy(dst, host_src, bytes);
}

void rt_to_host(void *host_dst, const void *src, size_t bytes)
{
    rt_copy(host_dst, src, bytes);
}

void *rt_host_alloc(size_t bytes)
{
    return rtcpu_xmalloc(bytes);
}

void rt_host_free(void *p)
{
    free(p);
}

RtReq *rt_to_device_async(void *dst, const void *host_src, size_t bytes)
{
    rt_copy(dst, host_src, bytes);
    RtReq *r = rtcpu_xmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    r->kind = RTREQ_DONE;
    return r;
}

void rt_act_from_f32(rt_act *dst, const float *host_src, int64_t n)
{
    rt_copy(dst, host_src, (size_t)n * sizeof *dst);
}

void rt_act_to_f32(float *host_dst, const rt_act *src, int64_t n)
{
    rt_copy(host_dst, src, (size_t)n * sizeof *src);
}
