/* train_ckpt_async.c: a save as the step loop sees it (docs/runtime.md,
 * "Asynchronous saves").
 *
 * Asynchronous (the default): at the step boundary every rank copies the
 * share of the state it saves (train_ckpt.c's blobs: fp32 masters and AdamW
 * moments; step, data position and lineage are in the meta) into one host
 * staging buffer (rt_host_alloc: page-locked on CUDA, so the device-to-host
 * copy runs at full rate), hands it to a writer thread and trains on. The
 * writer writes the rank file by the synchronous path's own code
 * (rt_ckpt_write_host: temporary name, fsync, rename; the same bytes) and
 * calls nothing else: no MPI, no backend call, so MPI's thread level and the
 * CUDA streams never matter. The collective half of a save (gathering the
 * ranks' records, rank 0's manifest, pruning) stays on the main thread: at
 * every step boundary while a save is in flight the ranks agree whether all
 * writers have finished (one host all-reduce of a flag) and, once they have,
 * commit it. Until then the step is not loadable and the previous one stays
 * the newest: a kill at any point leaves what a kill of a synchronous save
 * leaves.
 *
 * One writer at a time: a save requested while one is in flight first waits
 * for it (and says how long), so the staging buffer is never written while
 * it is being read and two saves never write at once. The end of training
 * and a graceful stop wait for the writer too (tr_save_finish).
 *
 * Synchronous (--save-sync): tr_save_checkpoint, the whole save inside the
 * step boundary.
 *
 * PTDC_CKPT_WRITE_DELAY_MS (tests only): the writer sleeps this long after
 * writing its rank file, before it reports the file done, so that a test can
 * act while a save is in flight (tests/fault/fault_ckpt_async*.sh). */
#include "train.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
    bool pending;           /* a save's writer started and not yet committed */
    pthread_t thread;
    int done;               /* set by the writer when its file is written (or failed); done_mu */
    /* Read by the writer while pending; the main thread leaves them alone. */
    char *dir;
    RtCkptMeta meta;
    TrBlobs blobs;          /* data pointing into stage */
    long delay_ms;
    /* Written by the writer, read after the join. */
    RtCkptRecord rec;
    int rc;
    char err[2048];
    double write_s;
    /* Main thread only. */
    unsigned char *stage;
    size_t stage_bytes;
    double checks_s;        /* the step loop's time for this save: the caller's checks, */
    double staged_s;        /* the copy into the stage, */
    double committing_s;    /* and, at later step boundaries, asking whether the writers
                               are done, waiting for them (a save asked for meanwhile, or
                               the end) and committing */
} W;
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;

/* Wall-clock seconds, monotonic, without rt_time's stream synchronisation
 * (the writer thread must make no backend call). */
static double mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *writer(void *arg)
{
    (void)arg;
    double t0 = mono();
    W.rc = rt_ckpt_write_host(W.dir, &W.meta, W.blobs.b, W.blobs.n, &W.rec, W.err, sizeof W.err);
    if (W.delay_ms > 0) {
        struct timespec d = {(time_t)(W.delay_ms / 1000), (long)(W.delay_ms % 1000) * 1000000L};
        while (nanosleep(&d, &d) != 0 && errno == EINTR) {
        }
    }
    W.write_s = mono() - t0;
    pthread_mutex_lock(&done_mu);
    W.done = 1;
    pthread_mutex_unlock(&done_mu);
    return NULL;
}

static int writer_done(void)
{
    pthread_mutex_lock(&done_mu);
    int d = W.done;
    pthread_mutex_unlock(&done_mu);
    return d;
}

static void saved_line(int64_t step, const char *dir, const char *how)
{
    if (ROOT) {
        printf("saved checkpoint of step %lld to %s/step-%09lld (%s)\n", (long long)step, dir,
               (long long)step, how);
        fflush(stdout);
    }
}

/* Collective, with a save in flight on every rank: join this rank's writer
 * and commit the step. 0, or -1 (said why) when it was not committed. */
static int commit_pending(void)
{
    double t0 = rt_time();
    int joined = pthread_join(W.thread, NULL);
    if (joined != 0)
        rt_fatal("cannot join the checkpoint writer: %s", strerror(joined));
    if (W.rc != 0)
        rt_log("error: %s", W.err);
    int rc = tr_ckpt_commit(W.dir, &W.meta, &W.rec);
    W.committing_s += rt_time() - t0;
    if (rc == 0) {
        char how[320];
        snprintf(how, sizeof how, "asynchronous: the step loop was blocked %.1f ms: checks %.1f, "
                 "copying %.1f MB to host staging %.1f, waiting for the writers and committing "
                 "%.1f; written in the background in %.1f ms",
                 (W.checks_s + W.staged_s + W.committing_s) * 1e3, W.checks_s * 1e3,
                 (double)W.stage_bytes / 1e6, W.staged_s * 1e3, W.committing_s * 1e3,
                 W.write_s * 1e3);
        saved_line(W.meta.step, W.dir, how);
    }
    tr_ckpt_blobs_free(&W.blobs);
    free(W.dir);
    W.dir = NULL;
    W.pending = false;
    W.done = 0;
    return rc;
}

int tr_save_poll(bool wait)
{
    if (!W.pending)
        return 0;
    if (!wait) {
        /* Every rank's writer finished: the smallest flag is 1. */
        double t0 = rt_time();
        int64_t all = -rt_host_max(tr_world, -(int64_t)writer_done());
        W.committing_s += rt_time() - t0;
        if (!all)
            return 0;
    }
    return commit_pending();
}

/* This rank's share of the state into the stage (grown as needed), and the
 * blobs pointed at it. */
static void stage_blobs(TrBlobs *B)
{
    size_t need = 0;
    for (int i = 0; i < B->n; i++)
        need += (size_t)B->b[i].bytes;
    if (need > W.stage_bytes || !W.stage) {
        rt_host_free(W.stage);
        W.stage = (unsigned char *)rt_host_alloc(need);
        W.stage_bytes = need;
    }
    size_t off = 0;
    for (int i = 0; i < B->n; i++) {
        rt_to_host(W.stage + off, B->b[i].data, (size_t)B->b[i].bytes);
        B->b[i].data = W.stage + off;
        off += (size_t)B->b[i].bytes;
    }
}

int tr_save(const char *dir, double checks_s)
{
    if (tr_fl.save_sync) {
        double t0 = rt_time();
        int rc = tr_save_checkpoint(dir);
        if (rc == 0) {
            double t = rt_time() - t0;
            char how[160];
            snprintf(how, sizeof how, "synchronous: the step loop was blocked %.1f ms: checks "
                     "%.1f, writing and committing %.1f", (checks_s + t) * 1e3, checks_s * 1e3,
                     t * 1e3);
            saved_line(tr_step, dir, how);
        }
        return rc;
    }
    double t0 = rt_time();
    if (W.pending) {
        int64_t prev = W.meta.step;
        int rc = tr_save_poll(true);
        if (ROOT) {
            printf("checkpoint of step %lld: waited %.3f s for the checkpoint of step %lld to be "
                   "written first (one save is written at a time)\n", (long long)tr_step,
                   rt_time() - t0, (long long)prev);
            fflush(stdout);
        }
        if (rc != 0)
            return rc;
    }
    double t1 = rt_time();
    tr_ckpt_meta(&W.meta);
    W.blobs = tr_ckpt_blobs();
    stage_blobs(&W.blobs);
    W.dir = (char *)malloc(strlen(dir) + 1);
    if (!W.dir)
        rt_fatal("out of host memory");
    strcpy(W.dir, dir);
    const char *d = getenv("PTDC_CKPT_WRITE_DELAY_MS");
    W.delay_ms = d ? atol(d) : 0;
    W.done = 0;
    int e = pthread_create(&W.thread, NULL, writer, NULL);
    if (e != 0)
        rt_fatal("cannot start the checkpoint writer: %s", strerror(e));
    W.pending = true;
    double t2 = rt_time();
    /* The wait for the previous save was that save's blocked time (its line
     * says so); this one's starts with the checks and the copy. */
    W.checks_s = checks_s;
    W.staged_s = t2 - t1;
    W.committing_s = 0;
    return 0;
}

int tr_save_finish(void)
{
    int rc = tr_save_poll(true);
    rt_host_free(W.stage);
    W.stage = NULL;
    W.stage_bytes = 0;
    return rc;
}
