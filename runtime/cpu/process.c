/* process.c: start-up, errors and timing of the CPU backend (memory: memory.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && argv)
        rtcpu_library_env(*argv); /* may start the program again (threads.c) */
    if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "ptdrt: MPI_Init failed\n");
        exit(1);
    }
    mpi_up = true;
    /* Report errors instead of MPI's default abort, so each names its call;
     * communicators split from the world inherit this. */
    RT_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    rtcpu_threads_init(); /* threads per rank: its cores / the ranks sharing them */
}

void rt_finalize(void)
{
    if (!mpi_up)
        return;
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
    va_list ap;
    va_start(ap, fmt);
    if (mpi_up && rt_world_size() > 1)
        fprintf(stderr, "[rank %d] ", rt_world_rank());
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
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
