/* comm.c: process groups, collectives and point-to-point over MPI. Every call
 * is checked (RT_MPI); element counts beyond INT_MAX are refused with a
 * message rather than truncated, except for all-reduce, which is chunked.
 * Every blocking call is watched (RT_MPI_WAIT, watch.c): one that outlasts
 * the timeout aborts all ranks, naming those that did not arrive. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"

static RtComm world;
/* Split communicators, newest first, freed by rt_finalize. The watchdog
 * thread walks the list (rtcpu_comm_by_id): a communicator is complete
 * before it is published, and links never change until rt_finalize. */
static _Atomic(RtComm *) made;

static int next_id = 1; /* ids of split communicators, in creation order */

/* World ranks of c's members, by rank in c. */
static int *world_ranks(MPI_Comm comm, int size)
{
    MPI_Group g, w;
    int *mine = rtcpu_xmalloc((size_t)size * sizeof *mine);
    int *out = rtcpu_xmalloc((size_t)size * sizeof *out);
    for (int i = 0; i < size; i++)
        mine[i] = i;
    RT_MPI(MPI_Comm_group(comm, &g));
    RT_MPI(MPI_Comm_group(MPI_COMM_WORLD, &w));
    RT_MPI(MPI_Group_translate_ranks(g, size, mine, w, out));
    RT_MPI(MPI_Group_free(&g));
    RT_MPI(MPI_Group_free(&w));
    free(mine);
    return out;
}

MPI_Datatype rtcpu_mpi_type(RtType t)
{
    switch (t) {
    case RT_ACT:
    case RT_F32:
        return MPI_FLOAT;
    case RT_I32:
        return MPI_INT32_T;
    }
    rt_fatal("ptdrt: unknown RtType %d", (int)t);
}

size_t rtcpu_type_size(RtType t)
{
    switch (t) {
    case RT_ACT:
        return sizeof(rt_act);
    case RT_F32:
        return sizeof(float);
    case RT_I32:
        return sizeof(int32_t);
    }
    rt_fatal("ptdrt: unknown RtType %d", (int)t);
}

int rtcpu_mpi_count(int64_t n, const char *what)
{
    if (n < 0 || n > INT_MAX)
        rt_fatal("ptdrt: %s of %lld elements: MPI counts must lie in [0, %d]", what, (long long)n,
                 INT_MAX);
    return (int)n;
}

static RtComm *check(RtComm *c, const char *what)
{
    if (!c)
        rt_fatal("ptdrt: %s on a NULL communicator (this rank is not a member)", what);
    return c;
}

RtComm *rt_comm_world(void)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        rt_fatal("ptdrt: rt_comm_world before rt_init");
    if (world.size == 0) {
        world.comm = MPI_COMM_WORLD;
        RT_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world.rank));
        RT_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world.size));
        world.id = 0;
        world.acomm = MPI_COMM_NULL; /* rtcpu_comm_twin, from rt_init */
        world.wranks = world_ranks(MPI_COMM_WORLD, world.size);
    }
    return &world;
}

void rtcpu_comm_twin(RtComm *c)
{
    RT_MPI(MPI_Comm_dup(c->comm, &c->acomm));
    RT_MPI(MPI_Comm_set_errhandler(c->acomm, MPI_ERRORS_RETURN));
}

RtComm *rtcpu_comm_by_id(int id)
{
    if (id == 0)
        return world.size ? &world : NULL;
    for (RtComm *c = atomic_load_explicit(&made, memory_order_acquire); c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

RtComm *rt_comm_split(int color, int key)
{
    RtComm *w = rt_comm_world();
    MPI_Comm nc;
    int id = next_id++; /* every rank splits, so every rank counts alike */
    RT_MPI_WAIT(RTW_SPLIT, w, -1, 0,
                MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key, &nc));
    if (nc == MPI_COMM_NULL)
        return NULL;
    RtComm *c = rtcpu_xmalloc(sizeof *c);
    memset(c, 0, sizeof *c);
    c->comm = nc;
    c->id = id;
    RT_MPI(MPI_Comm_rank(nc, &c->rank));
    RT_MPI(MPI_Comm_size(nc, &c->size));
    c->wranks = world_ranks(nc, c->size);
    /* Non-blocking collectives run on a duplicate, so they never interleave
     * with the main thread's blocking ones on this group. */
    RT_MPI_WAIT(RTW_SPLIT, c, -1, 0, MPI_Comm_dup(nc, &c->acomm));
    c->next = atomic_load_explicit(&made, memory_order_relaxed);
    atomic_store_explicit(&made, c, memory_order_release);
    return c;
}

/* MPI's point-to-point never needs per-direction channels: its sends and
 * receives progress in any order. */
RtComm *rt_comm_split_p2p(int color, int key) { return rt_comm_split(color, key); }

void rtcpu_comm_free_all(void)
{
    RtComm *c = atomic_load(&made);
    atomic_store(&made, NULL);
    while (c) {
        RtComm *next = c->next;
        RT_MPI(MPI_Comm_free(&c->comm));
        RT_MPI(MPI_Comm_free(&c->acomm));
        free(c->wranks);
        free(c);
        c = next;
    }
    if (world.acomm != MPI_COMM_NULL)
        RT_MPI(MPI_Comm_free(&world.acomm));
    free(world.wranks);
    memset(&world, 0, sizeof world);
    next_id = 1;
}

int rt_comm_rank(const RtComm *c)
{
    return check((RtComm *)c, "rt_comm_rank")->rank;
}

int rt_comm_size(const RtComm *c)
{
    return check((RtComm *)c, "rt_comm_size")->size;
}

void rt_barrier(RtComm *c)
{
    check(c, "rt_barrier");
    RT_MPI_WAIT(RTW_BARRIER, c, -1, 0, MPI_Barrier(c->comm));
}

/* All-reduce in chunks of at most 2^30 elements (MPI counts are ints). */
static void allreduce(RtComm *c, void *buf, int64_t n, RtType t, MPI_Op op)
{
    const int64_t chunk = (int64_t)1 << 30;
    char *p = buf;
    for (int64_t done = 0; done < n; done += chunk) {
        int k = (int)(n - done < chunk ? n - done : chunk);
        RT_MPI_WAIT(RTW_ALLREDUCE, c, -1, 0,
                    MPI_Allreduce(MPI_IN_PLACE, p + (size_t)done * rtcpu_type_size(t), k,
                                  rtcpu_mpi_type(t), op, c->comm));
    }
}

void rt_allreduce(RtComm *c, void *buf, int64_t n, RtType t)
{
    allreduce(check(c, "rt_allreduce"), buf, n, t, MPI_SUM);
}

void rt_allreduce_max(RtComm *c, float *buf, int64_t n)
{
    allreduce(check(c, "rt_allreduce_max"), buf, n, RT_F32, MPI_MAX);
}

void rt_reduce_scatter(RtComm *c, void *out, const void *in, int64_t n_out, RtType t)
{
    check(c, "rt_reduce_scatter");
    int k = rtcpu_mpi_count(n_out, "rt_reduce_scatter");
    RT_MPI_WAIT(RTW_REDUCE_SCATTER, c, -1, 0,
                MPI_Reduce_scatter_block(in, out, k, rtcpu_mpi_type(t), MPI_SUM, c->comm));
}

void rt_allgather(RtComm *c, void *out, const void *in, int64_t n_in, RtType t)
{
    check(c, "rt_allgather");
    int k = rtcpu_mpi_count(n_in, "rt_allgather");
    /* In place when in is this rank's block of out (MPI forbids the alias). */
    bool in_place = (const char *)in == (char *)out + (size_t)c->rank * (size_t)k * rtcpu_type_size(t);
    RT_MPI_WAIT(RTW_ALLGATHER, c, -1, 0,
                MPI_Allgather(in_place ? MPI_IN_PLACE : in, k, rtcpu_mpi_type(t), out, k,
                              rtcpu_mpi_type(t), c->comm));
}

void rt_alltoall(RtComm *c, void *out, const void *in, int64_t n_per_rank, RtType t)
{
    check(c, "rt_alltoall");
    int k = rtcpu_mpi_count(n_per_rank, "rt_alltoall");
    RT_MPI_WAIT(RTW_ALLTOALL, c, -1, 0,
                MPI_Alltoall(in, k, rtcpu_mpi_type(t), out, k, rtcpu_mpi_type(t), c->comm));
}

void rt_bcast(RtComm *c, void *buf, int64_t n, RtType t, int root)
{
    check(c, "rt_bcast");
    int k = rtcpu_mpi_count(n, "rt_bcast");
    RT_MPI_WAIT(RTW_BCAST, c, -1, 0, MPI_Bcast(buf, k, rtcpu_mpi_type(t), root, c->comm));
}

RtReq *rt_isend(RtComm *c, const void *buf, int64_t n, RtType t, int peer, int tag)
{
    check(c, "rt_isend");
    RtReq *r = rtcpu_xmalloc(sizeof *r);
    *r = (RtReq){.kind = RTREQ_P2P, .comm = c, .op = RTW_WAIT_SEND, .peer = peer, .tag = tag};
    RT_MPI(MPI_Isend(buf, rtcpu_mpi_count(n, "rt_isend"), rtcpu_mpi_type(t), peer, tag, c->comm,
                     &r->req));
    return r;
}

RtReq *rt_irecv(RtComm *c, void *buf, int64_t n, RtType t, int peer, int tag)
{
    check(c, "rt_irecv");
    RtReq *r = rtcpu_xmalloc(sizeof *r);
    *r = (RtReq){.kind = RTREQ_P2P, .comm = c, .op = RTW_WAIT_RECV, .peer = peer, .tag = tag};
    RT_MPI(MPI_Irecv(buf, rtcpu_mpi_count(n, "rt_irecv"), rtcpu_mpi_type(t), peer, tag, c->comm,
                     &r->req));
    return r;
}

/* A transfer's wait polls and sleeps rather than blocking in MPI_Wait, which
 * spins (yielding when the node is oversubscribed) and so keeps a waiting
 * rank on its core: with more ranks than cores, a pipeline rank waiting for
 * its neighbour took most of its share from the ranks it shares cores with
 * (`ptdc calibrate` measured them gaining 26% of it). A message in flight
 * arrives within the first 50 us of spinning; after that the rank tests
 * every 50 us and sleeps between, and after a millisecond every 250 us (a
 * wake-up preempts the rank computing on that core, and a wait that long is
 * a neighbour's compute: a quarter-millisecond late is small against it). */
static int test_wait(MPI_Request *req)
{
    int flag = 0, rc;
    double t0 = rt_time(), waited = 0;
    const struct timespec nap = {0, 50000}, doze = {0, 250000};
    while ((rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !flag)
        if ((waited = rt_time() - t0) > 50e-6)
            nanosleep(waited > 1e-3 ? &doze : &nap, NULL);
    return rc;
}

void rt_wait(RtReq *r)
{
    if (!r)
        rt_fatal("rt_wait: NULL request");
    if (r->kind == RTREQ_COLL) {
        rtcpu_async_wait(r);
        free(r);
        return;
    }
    if (r->kind == RTREQ_DONE) {
        free(r);
        return;
    }
    int peer = r->peer >= 0 && r->peer < r->comm->size ? r->comm->wranks[r->peer] : -1;
    RT_MPI_WAIT(r->op, r->comm, peer, r->tag, test_wait(&r->req));
    free(r);
}

void rt_host_allgather(RtComm *c, void *out, const void *in, size_t bytes)
{
    check(c, "rt_host_allgather");
    int k = rtcpu_mpi_count((int64_t)bytes, "rt_host_allgather");
    RT_MPI_WAIT(RTW_HOST, c, -1, 0, MPI_Allgather(in, k, MPI_BYTE, out, k, MPI_BYTE, c->comm));
}

void rt_host_bcast(RtComm *c, void *buf, size_t bytes, int root)
{
    check(c, "rt_host_bcast");
    /* In pieces of at most 1 GiB: MPI counts are int. */
    for (size_t at = 0; at < bytes;) {
        size_t k = bytes - at < ((size_t)1 << 30) ? bytes - at : (size_t)1 << 30;
        RT_MPI_WAIT(RTW_HOST, c, -1, 0, MPI_Bcast((char *)buf + at, (int)k, MPI_BYTE, root, c->comm));
        at += k;
    }
}

int64_t rt_host_max(RtComm *c, int64_t value)
{
    check(c, "rt_host_max");
    RT_MPI_WAIT(RTW_HOST, c, -1, 0,
                MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_MAX, c->comm));
    return value;
}
