/* comm_async.c: the non-blocking collectives of the CPU backend.
 *
 * Open MPI's own non-blocking collectives (libnbc) were measured 2.1-2.8x
 * slower than the blocking ones for 1-4 M floats on this machine
 * (docs/runtime.md), and they progress only while some thread is inside
 * MPI. So every rank has one communication thread that makes the blocking
 * calls (MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather) in the
 * order the main thread issued them, while the main thread computes; the
 * main thread's rt_wait sleeps on a condition variable until the call is
 * done. The calls run on each communicator's twin (a duplicate made with
 * it, comm.c), so they never interleave with the main thread's own blocking
 * collectives on the same group, and their order on the twin is the issue
 * order, the same on every member.
 *
 * Open MPI's blocking calls spin while they wait for the other members (on
 * a machine with no spare core, the spinning thread takes the core from
 * the rank's own compute). A quiet request (the chunked tensor-parallel
 * pairs, tp_chunk.c) first waits for every member to issue it with a
 * non-blocking barrier tested every RTCPU_QUIET_US microseconds, asleep in
 * between, so the blocking call that follows only moves the data.
 *
 * Without MPI_THREAD_MULTIPLE there is no thread: the collective runs at
 * once on the issuing thread and its request is complete on return.
 *
 * Stalls: the main thread's rt_wait publishes what it waits for (watch.c)
 * with the collective's number on its communicator; the census counts a
 * member that has issued that collective (c->aseq) as arrived. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"

static struct {
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    RtReq *head, *tail;
    bool stop;
    bool grouping;
} A = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .work = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER};

enum { RTCPU_QUIET_US = 50 };

/* Until every member of m has arrived here, asleep between tests. */
static void arrive_quietly(MPI_Comm m)
{
    MPI_Request b;
    RT_MPI(MPI_Ibarrier(m, &b));
    for (;;) {
        int done = 0;
        RT_MPI(MPI_Test(&b, &done, MPI_STATUS_IGNORE));
        if (done)
            return;
        struct timespec ts = {0, RTCPU_QUIET_US * 1000L};
        nanosleep(&ts, NULL);
    }
}

/* The blocking call a request stands for, on the communicator's twin. */
static void run(RtReq *r)
{
    MPI_Comm m = r->comm->acomm;
    if (r->quiet)
        arrive_quietly(m);
    MPI_Datatype dt = rtcpu_mpi_type(r->t);
    size_t es = rtcpu_type_size(r->t);
    switch (r->op) {
    case RTW_IALLREDUCE: {
        const int64_t chunk = (int64_t)1 << 30; /* MPI counts are ints */
        for (int64_t done = 0; done < r->n; done += chunk) {
            int k = (int)(r->n - done < chunk ? r->n - done : chunk);
            RT_MPI(MPI_Allreduce(MPI_IN_PLACE, (char *)r->out + (size_t)done * es, k, dt, MPI_SUM, m));
        }
        break;
    }
    case RTW_IREDUCE_SCATTER:
        RT_MPI(MPI_Reduce_scatter_block(r->in, r->out, (int)r->n, dt, MPI_SUM, m));
        break;
    case RTW_IALLGATHER: {
        bool in_place = (const char *)r->in == (char *)r->out + (size_t)r->comm->rank * (size_t)r->n * es;
        RT_MPI(MPI_Allgather(in_place ? MPI_IN_PLACE : r->in, (int)r->n, dt, r->out, (int)r->n, dt, m));
        break;
    }
    default: rt_fatal("ptdrt: unknown non-blocking collective %d", r->op);
    }
}

static void *loop(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&A.mu);
        while (!A.head && !A.stop)
            pthread_cond_wait(&A.work, &A.mu);
        RtReq *r = A.head;
        if (!r) { /* stop, and nothing left */
            pthread_mutex_unlock(&A.mu);
            return NULL;
        }
        A.head = r->next;
        if (!A.head)
            A.tail = NULL;
        pthread_mutex_unlock(&A.mu);
        run(r);
        pthread_mutex_lock(&A.mu);
        atomic_store(&r->done, 1);
        pthread_cond_broadcast(&A.done);
        pthread_mutex_unlock(&A.mu);
    }
}

void rtcpu_async_start(bool thread_multiple)
{
    A.stop = false;
    A.head = A.tail = NULL;
    A.running = false;
    if (!thread_multiple)
        return;
    if (pthread_create(&A.thread, NULL, loop, NULL) != 0)
        rt_fatal("ptdrt: cannot start the communication thread");
    A.running = true;
}

void rtcpu_async_stop(void)
{
    if (!A.running)
        return;
    pthread_mutex_lock(&A.mu);
    A.stop = true;
    pthread_cond_signal(&A.work);
    pthread_mutex_unlock(&A.mu);
    pthread_join(A.thread, NULL);
    A.running = false;
}

static RtReq *issue(int op, RtComm *c, void *out, const void *in, int64_t n, RtType t, const char *fn,
                    bool quiet)
{
    if (!c)
        rt_fatal("ptdrt: %s on a NULL communicator (this rank is not a member)", fn);
    if (op != RTW_IALLREDUCE) /* all-reduce is chunked; the others take one int count */
        rtcpu_mpi_count(n, fn);
    else if (n < 0)
        rt_fatal("ptdrt: %s of %lld elements", fn, (long long)n);
    if (c->acomm == MPI_COMM_NULL)
        rt_fatal("ptdrt: %s before rt_init", fn);
    RtReq *r = rtcpu_xmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    r->kind = RTREQ_COLL;
    r->comm = c;
    r->op = op;
    r->peer = -1;
    r->out = out;
    r->in = in;
    r->n = n;
    r->t = t;
    r->quiet = quiet && A.running;
    r->seq = atomic_fetch_add(&c->aseq, 1) + 1;
    if (!A.running) {
        rtcpu_wait_begin_async(op, c, r->seq);
        run(r);
        rtcpu_wait_end();
        atomic_store(&r->done, 1);
        return r;
    }
    pthread_mutex_lock(&A.mu);
    if (A.tail)
        A.tail->next = r;
    else
        A.head = r;
    A.tail = r;
    pthread_cond_signal(&A.work);
    pthread_mutex_unlock(&A.mu);
    return r;
}

RtReq *rt_iallreduce(RtComm *c, void *buf, int64_t n, RtType t)
{
    return issue(RTW_IALLREDUCE, c, buf, buf, n, t, "rt_iallreduce", false);
}

RtReq *rt_ireduce_scatter(RtComm *c, void *out, const void *in, int64_t n_out, RtType t)
{
    return issue(RTW_IREDUCE_SCATTER, c, out, in, n_out, t, "rt_ireduce_scatter", false);
}

RtReq *rtcpu_ireduce_scatter_quiet(RtComm *c, void *out, const void *in, int64_t n_out, RtType t)
{
    return issue(RTW_IREDUCE_SCATTER, c, out, in, n_out, t, "rt_matmul_reduce_scatter", true);
}

RtReq *rt_iallgather(RtComm *c, void *out, const void *in, int64_t n_in, RtType t)
{
    return issue(RTW_IALLGATHER, c, out, in, n_in, t, "rt_iallgather", false);
}

RtReq *rtcpu_iallgather_quiet(RtComm *c, void *out, const void *in, int64_t n_in, RtType t)
{
    return issue(RTW_IALLGATHER, c, out, in, n_in, t, "rt_allgather_matmul", true);
}

void rtcpu_async_wait(RtReq *r)
{
    if (atomic_load(&r->done))
        return;
    rtcpu_wait_begin_async(r->op, r->comm, r->seq);
    pthread_mutex_lock(&A.mu);
    while (!atomic_load(&r->done))
        pthread_cond_wait(&A.done, &A.mu);
    pthread_mutex_unlock(&A.mu);
    rtcpu_wait_end();
}

/* The thread runs a group's collectives one after another, as it runs
 * everything: nothing to fuse on CPU. The calls only check the nesting. */
void rt_group_begin(void)
{
    if (A.grouping)
        rt_fatal("ptdrt: rt_group_begin inside a group");
    A.grouping = true;
}

void rt_group_end(void)
{
    if (!A.grouping)
        rt_fatal("ptdrt: rt_group_end without rt_group_begin");
    A.grouping = false;
}
