/* watchdog.cu: turn NCCL failures and hangs into an abort of every rank.
 *
 * A thread polls, every 100 ms, ncclCommGetAsyncError on every communicator
 * (a peer that died, a network error) and the host's current blocking call
 * (rtcu_block_begin/end around stream synchronisation, synchronous copies and
 * NCCL calls). If an error is reported, or the host has waited in one call
 * longer than PTDC_NCCL_TIMEOUT seconds (default 600; 0 disables the
 * timeout), it prints what was waited on, aborts every communicator
 * (ncclCommAbort releases the stuck kernels) and calls MPI_Abort, which
 * makes mpirun kill every rank. Without MPI_THREAD_MULTIPLE it exits the
 * process instead, which mpirun also answers by killing the job.
 *
 * The host only waits at synchronisation points, so a hung collective is
 * caught when the program next needs a result (the loss, a timing, a
 * copy); a step's work enqueued ahead counts towards the timeout, which is
 * why the default is far above any step time. */
#include "cu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { MAX_COMMS = 1024 };

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    pthread_t thread;
    int running, stop;
    double timeout;
    ncclComm_t comms[MAX_COMMS];
    int ncomms;
    int depth;                /* nesting of blocking calls on the host */
    const char *what, *file;  /* the outermost one */
    int line;
    double since;
} wd;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rtcu_block_begin(const char *what, const char *file, int line)
{
    pthread_mutex_lock(&wd_mu);
    if (wd.depth++ == 0) {
        wd.what = what;
        wd.file = file;
        wd.line = line;
        wd.since = now();
    }
    pthread_mutex_unlock(&wd_mu);
}

void rtcu_block_end(void)
{
    pthread_mutex_lock(&wd_mu);
    if (wd.depth > 0) wd.depth--;
    pthread_mutex_unlock(&wd_mu);
}

void rtcu_watchdog_add(ncclComm_t c)
{
    pthread_mutex_lock(&wd_mu);
    if (wd.ncomms == MAX_COMMS) {
        pthread_mutex_unlock(&wd_mu);
        rt_fatal("more than %d communicators", MAX_COMMS);
    }
    wd.comms[wd.ncomms++] = c;
    pthread_mutex_unlock(&wd_mu);
}

/* Called with wd_mu held or from the single aborting thread. */
static void abort_comms_locked(void)
{
    for (int i = 0; i < wd.ncomms; i++) ncclCommAbort(wd.comms[i]); /* best effort */
    wd.ncomms = 0;
}

void rtcu_abort_comms(void)
{
    pthread_mutex_lock(&wd_mu);
    abort_comms_locked();
    pthread_mutex_unlock(&wd_mu);
}

[[noreturn]] static void fire(const char *msg)
{
    fprintf(stderr, "ptdc: rank %d: watchdog: %s; aborting all ranks\n", rtcu.rank, msg);
    fflush(stderr);
    /* Should ncclCommAbort or MPI_Abort themselves hang (a blocking
     * communicator busy in another thread), SIGALRM ends the process and
     * mpirun then kills the job. */
    alarm(30);
    abort_comms_locked();
    if (rtcu.mpi_multiple) MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

static void *loop(void *arg)
{
    (void)arg;
    const struct timespec tick = {0, 100 * 1000 * 1000};
    CUDA_CHECK(cudaSetDevice(rtcu.device)); /* the thread's calls target our GPU */
    for (;;) {
        nanosleep(&tick, NULL);
        pthread_mutex_lock(&wd_mu);
        if (wd.stop) {
            pthread_mutex_unlock(&wd_mu);
            return NULL;
        }
        char msg[512];
        for (int i = 0; i < wd.ncomms; i++) {
            ncclResult_t r = ncclSuccess;
            ncclResult_t q = ncclCommGetAsyncError(wd.comms[i], &r);
            if (q != ncclSuccess) r = q;
            if (r != ncclSuccess && r != ncclInProgress) {
                const char *detail = ncclGetLastError(wd.comms[i]);
                snprintf(msg, sizeof msg, "NCCL asynchronous error: %s%s%s", ncclGetErrorString(r),
                         detail && detail[0] ? ": " : "", detail ? detail : "");
                fire(msg); /* holds the lock until the process ends */
            }
        }
        if (wd.timeout > 0 && wd.depth > 0 && now() - wd.since > wd.timeout) {
            snprintf(msg, sizeof msg,
                     "no progress for %.0f s in %s at %s:%d (a collective or peer that never "
                     "completes; PTDC_NCCL_TIMEOUT=%g)",
                     now() - wd.since, wd.what, wd.file, wd.line, wd.timeout);
            fire(msg);
        }
        pthread_mutex_unlock(&wd_mu);
    }
}

void rtcu_watchdog_start(void)
{
    const char *s = getenv("PTDC_NCCL_TIMEOUT");
    wd.timeout = 600;
    if (s && *s) {
        char *end;
        double t = strtod(s, &end);
        if (*end || t < 0) rt_fatal("PTDC_NCCL_TIMEOUT=%s: expected seconds (0 disables)", s);
        wd.timeout = t;
    }
    wd.stop = 0;
    if (pthread_create(&wd.thread, NULL, loop, NULL) != 0) rt_fatal("cannot start the watchdog");
    wd.running = 1;
}

/* Forget every communicator (before they are destroyed) and end the thread. */
void rtcu_watchdog_stop(void)
{
    if (!wd.running) return;
    pthread_mutex_lock(&wd_mu);
    wd.stop = 1;
    wd.ncomms = 0;
    pthread_mutex_unlock(&wd_mu);
    pthread_join(wd.thread, NULL);
    wd.running = 0;
}

void rtcu_watchdog_forget_comms(void)
{
    pthread_mutex_lock(&wd_mu);
    wd.ncomms = 0;
    pthread_mutex_unlock(&wd_mu);
}
