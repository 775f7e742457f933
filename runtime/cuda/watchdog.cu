/* watchdog.cu: turn NCCL failures and hangs into an abort of every rank.
 *
 * A thread polls, every 100 ms, ncclCommGetAsyncError on every communicator
 * (a peer that died, a network error) and the host's current blocking call
 * (rtcu_block_begin/end around stream synchronisation, synchronous copies and
 * NCCL calls). If an error is reported, or the host has waited in one call
 * longer than the timeout (rt_set_timeout; default PTDC_TIMEOUT, else
 * PTDC_NCCL_TIMEOUT, else 600 s; 0 disables it), it prints what was waited on in
 * one line (one write(), so lines of ranks never run together), aborts every communicator
 * (ncclCommAbort releases the stuck kernels) and calls MPI_Abort, which
 * makes mpirun kill every rank. Without MPI_THREAD_MULTIPLE it exits the
 * process instead, which mpirun also answers by killing the job.
 *
 * Every tick it also checks that the rank's launcher (mpirun, orted, srun's
 * step daemon) is alive (runtime/common/launcher.c) and ends the rank at
 * once when it is not, so a killed mpirun leaves no rank training on.
 *
 * Unlike the CPU backend (runtime/cpu/watch.c) it does not ask the other
 * ranks where they are: NCCL runs a collective as device kernels, and the
 * host only waits at synchronisation points, so a hung collective is
 * caught when the program next needs a result (the loss, a timing, a
 * copy); a step's work enqueued ahead counts towards the timeout, which is
 * why the default is far above any step time. */
#include "cu.h"
#include "common/common.h"

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
    char prefix[48];
    snprintf(prefix, sizeof prefix, "ptdc: rank %d: watchdog: ", rtcu.rank);
    fflush(stdout);
    rtc_write_line(2, prefix, "%s; aborting all ranks", msg);
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
        if (rtc_launcher_gone(msg, sizeof msg)) {
            char prefix[48];
            snprintf(prefix, sizeof prefix, "ptdc: rank %d: ", rtcu.rank);
            rtc_write_line(2, prefix, "%s; exiting", msg);
            _exit(1); /* no MPI_Abort: the runtime that would carry it is gone */
        }
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
                     "completes; timeout %g s)",
                     now() - wd.since, wd.what, wd.file, wd.line, wd.timeout);
            fire(msg);
        }
        pthread_mutex_unlock(&wd_mu);
    }
}

static double env_seconds(const char *name, double dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    double t = strtod(s, &end);
    if (*end || !(t >= 0)) rt_fatal("%s=%s: expected seconds (0 disables the timeout)", name, s);
    return t;
}

void rt_set_timeout(double seconds)
{
    if (!(seconds >= 0)) rt_fatal("rt_set_timeout: %g is not a number of seconds (0: no timeout)", seconds);
    pthread_mutex_lock(&wd_mu);
    wd.timeout = seconds > 1e300 ? 0 : seconds;
    pthread_mutex_unlock(&wd_mu);
}

double rt_timeout(void)
{
    pthread_mutex_lock(&wd_mu);
    double t = wd.timeout;
    pthread_mutex_unlock(&wd_mu);
    return t;
}

void rtcu_watchdog_start(void)
{
    wd.timeout = env_seconds("PTDC_TIMEOUT", env_seconds("PTDC_NCCL_TIMEOUT", 600));
    rtc_launcher_init();
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
