/* watchdog.cu: turn NCCL failures and hangs into an abort of every rank.
 *
 * A thread polls, every 100 ms, ncclCommGetAsyncError on every communicator
 * (a peer that died, a network error; only when no NCCL call of the main
 * thread is under way, rtcu_nccl_mu: one thread per communicator) and the host's current blocking call
 * (rtcu_block_begin/end around stream synchronisation, synchronous copies and
 * the polling of non-blocking NCCL calls, published without a lock). If an error is reported, or the host has waited in one call
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

#include <atomic>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { MAX_COMMS = 1024 };

std::recursive_mutex rtcu_nccl_mu;

/* wd_mu guards the communicator list and the timeout (changed at start-up
 * and in rt_set_timeout), never the blocking-call state below. */
static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    pthread_t thread;
    int running, stop;
    double timeout;
    ncclComm_t comms[MAX_COMMS];
    int ncomms;
} wd;

/* The main thread's current blocking call: one writer (the main thread),
 * published through a seqlock the watchdog reads, so timing a call costs a
 * few stores and no lock. */
static std::atomic<unsigned> blk_gen;
static std::atomic<int> blk_depth;
static std::atomic<const char *> blk_what, blk_file;
static std::atomic<int> blk_line;
static std::atomic<double> blk_since;
static std::atomic<bool> aborting;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rtcu_block_begin(const char *what, const char *file, int line)
{
    int d = blk_depth.load(std::memory_order_relaxed);
    if (d == 0) { /* the outermost call names the wait */
        unsigned g = blk_gen.load(std::memory_order_relaxed);
        blk_gen.store(g + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        blk_what.store(what, std::memory_order_relaxed);
        blk_file.store(file, std::memory_order_relaxed);
        blk_line.store(line, std::memory_order_relaxed);
        blk_since.store(now(), std::memory_order_relaxed);
        blk_depth.store(1, std::memory_order_relaxed);
        blk_gen.store(g + 2, std::memory_order_release);
    } else {
        blk_depth.store(d + 1, std::memory_order_relaxed);
    }
}

void rtcu_block_end(void)
{
    int d = blk_depth.load(std::memory_order_relaxed);
    if (d > 0) blk_depth.store(d - 1, std::memory_order_release);
}

typedef struct {
    int depth, line;
    const char *what, *file;
    double since;
} Blk;

static Blk blk_snapshot(void)
{
    Blk b;
    for (;;) {
        unsigned g = blk_gen.load(std::memory_order_acquire);
        if (g & 1) continue;
        b.depth = blk_depth.load(std::memory_order_acquire);
        b.what = blk_what.load(std::memory_order_relaxed);
        b.file = blk_file.load(std::memory_order_relaxed);
        b.line = blk_line.load(std::memory_order_relaxed);
        b.since = blk_since.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (blk_gen.load(std::memory_order_relaxed) == g) return b;
    }
}

bool rtcu_aborting(void) { return aborting.load(std::memory_order_acquire); }

void rtcu_park(void)
{
    for (;;) pause(); /* the watchdog ends the process */
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

/* Called with wd_mu held. The communicators are non-blocking, so
 * ncclCommAbort from this thread is safe while the main thread polls one
 * (it stops touching them once `aborting` is set, rtcu_park). */
static void abort_comms_locked(void)
{
    for (int i = 0; i < wd.ncomms; i++) ncclCommAbort(wd.comms[i]); /* best effort */
    wd.ncomms = 0;
}

/* rt_set_where: the program's words on where it is, printed when this
 * rank's watchdog fires (CUDA has no census of the other ranks: each rank's
 * own watchdog fires on its own stall). */
static std::atomic<RtWhereFn> where_fn{nullptr};

void rt_set_where(RtWhereFn fn) { where_fn.store(fn); }

[[noreturn]] static void fire(const char *msg)
{
    char prefix[48];
    snprintf(prefix, sizeof prefix, "ptdc: rank %d: watchdog: ", rtcu.rank);
    fflush(stdout);
    RtWhereFn fn = where_fn.load();
    if (fn) {
        char w[256] = "";
        fn(w, sizeof w);
        w[sizeof w - 1] = 0;
        rtc_write_line(2, prefix, "where at the stall: %s", w);
    }
    rtc_write_line(2, prefix, "%s; aborting all ranks", msg);
    /* Should ncclCommAbort or MPI_Abort themselves hang, SIGALRM ends the
     * process and mpirun then kills the job. */
    alarm(30);
    aborting.store(true, std::memory_order_release);
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
        /* Only while no NCCL call of the main thread is under way (cu.h,
         * rtcu_nccl_mu): NCCL allows one thread per communicator. A tick
         * that finds it taken skips the poll; the timeout below still runs. */
        if (rtcu_nccl_mu.try_lock()) {
            for (int i = 0; i < wd.ncomms; i++) {
                ncclResult_t r = ncclSuccess;
                ncclResult_t q = ncclCommGetAsyncError(wd.comms[i], &r);
                if (q != ncclSuccess) r = q;
                if (r != ncclSuccess && r != ncclInProgress) {
                    const char *detail = ncclGetLastError(wd.comms[i]);
                    snprintf(msg, sizeof msg, "NCCL asynchronous error: %s%s%s", ncclGetErrorString(r),
                             detail && detail[0] ? ": " : "", detail ? detail : "");
                    fire(msg); /* holds the locks until the process ends */
                }
            }
            rtcu_nccl_mu.unlock();
        }
        Blk b = blk_snapshot();
        if (wd.timeout > 0 && b.depth > 0 && now() - b.since > wd.timeout) {
            snprintf(msg, sizeof msg,
                     "no progress for %.0f s in %s at %s:%d (a collective or peer that never "
                     "completes; timeout %g s)",
                     now() - b.since, b.what, b.file, b.line, wd.timeout);
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
