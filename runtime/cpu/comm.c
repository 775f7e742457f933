/* comm.c: process groups, collectives and point-to-point over MPI. Every call
 * is checked (RT_MPI); element counts beyond INT_MAX are refused with a
 * message rather than truncated, except for all-reduce, which is chunked. */
#include <limits.h>
#include <stdlib.h>

#include "cpu.h"

static RtComm world;
static RtComm *made; /* split communicators, freed by rt_finalize */

struct RtReq {
    MPI_Request req;
};

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
    }
    return &world;
}

RtComm *rt_comm_split(int color, int key)
{
    rt_comm_world();
    MPI_Comm nc;
    RT_MPI(MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key, &nc));
    if (nc == MPI_COMM_NULL)
        return NULL;
    RtComm *c = rtcpu_xmalloc(sizeof *c);
    c->comm = nc;
    RT_MPI(MPI_Comm_rank(nc, &c->rank));
    RT_MPI(MPI_Comm_size(nc, &c->size));
    c->next = made;
    made = c;
    return c;
}

void rtcpu_comm_free_all(void)
{
    while (made) {
        RtComm *c = made;
        made = c->next;
        RT_MPI(MPI_Comm_free(&c->comm));
        free(c);
    }
    world.size = 0;
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
    RT_MPI(MPI_Barrier(check(c, "rt_barrier")->comm));
}

/* All-reduce in chunks of at most 2^30 elements (MPI counts are ints). */
static void allreduce(RtComm *c, void *buf, int64_t n, RtType t, MPI_Op op)
{
    const int64_t chunk = (int64_t)1 << 30;
    char *p = buf;
    for (int64_t done = 0; done < n; done += chunk) {
        int k = (int)(n - done < chunk ? n - done : chunk);
        RT_MPI(MPI_Allreduce(MPI_IN_PLACE, p + (size_t)done * rtcpu_type_size(t), k, rtcpu_mpi_type(t),
                             op, c->comm));
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
    RT_MPI(MPI_Reduce_scatter_block(in, out, rtcpu_mpi_count(n_out, "rt_reduce_scatter"),
                                    rtcpu_mpi_type(t), MPI_SUM, c->comm));
}

void rt_allgather(RtComm *c, void *out, const void *in, int64_t n_in, RtType t)
{
    check(c, "rt_allgather");
    int k = rtcpu_mpi_count(n_in, "rt_allgather");
    RT_MPI(MPI_Allgather(in, k, rtcpu_mpi_type(t), out, k, rtcpu_mpi_type(t), c->comm));
}

void rt_alltoall(RtComm *c, void *out, const void *in, int64_t n_per_rank, RtType t)
{
    check(c, "rt_alltoall");
    int k = rtcpu_mpi_count(n_per_rank, "rt_alltoall");
    RT_MPI(MPI_Alltoall(in, k, rtcpu_mpi_type(t), out, k, rtcpu_mpi_type(t), c->comm));
}

void rt_bcast(RtComm *c, void *buf, int64_t n, RtType t, int root)
{
    check(c, "rt_bcast");
    RT_MPI(MPI_Bcast(buf, rtcpu_mpi_count(n, "rt_bcast"), rtcpu_mpi_type(t), root, c->comm));
}

RtReq *rt_isend(RtComm *c, const void *buf, int64_t n, RtType t, int peer, int tag)
{
    check(c, "rt_isend");
    RtReq *r = rtcpu_xmalloc(sizeof *r);
    RT_MPI(MPI_Isend(buf, rtcpu_mpi_count(n, "rt_isend"), rtcpu_mpi_type(t), peer, tag, c->comm,
                     &r->req));
    return r;
}

RtReq *rt_irecv(RtComm *c, void *buf, int64_t n, RtType t, int peer, int tag)
{
    check(c, "rt_irecv");
    RtReq *r = rtcpu_xmalloc(sizeof *r);
    RT_MPI(MPI_Irecv(buf, rtcpu_mpi_count(n, "rt_irecv"), rtcpu_mpi_type(t), peer, tag, c->comm,
                     &r->req));
    return r;
}

void rt_wait(RtReq *r)
{
    RT_MPI(MPI_Wait(&r->req, MPI_STATUS_IGNORE));
    free(r);
}
