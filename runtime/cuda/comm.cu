/* comm.cu: communicators, collectives and point-to-point over NCCL.
 *
 * Stream protocol. Collectives run on rtcu.comm. Before one is enqueued, comm
 * waits on an event recorded on compute, so it reads what every earlier
 * kernel wrote. After it, an event is recorded on comm and queued with the
 * byte ranges the collective touches. Compute does not wait right away:
 * each kernel entry point calls rtcu_deps with its buffers, and only when
 * one overlaps a pending collective does compute wait on that collective's
 * event (and, comm being in order, on everything queued before it). So a
 * data-parallel gradient all-reduce issued during backward proceeds while
 * the next layers' backward kernels run, and the optimizer, which reads the
 * gradient, waits for it. Host-synchronous calls (copies to the host,
 * rt_time, rt_barrier) join everything.
 *
 * Element counts: every NCCL call takes element counts of the NCCL datatype
 * (never bytes); byte counts appear only in the dependency ranges. */
#include "cu.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------- pending collectives */
enum { QCAP = 1024 };

typedef struct {
    const char *lo[2], *hi[2];
} Ranges;

static struct {
    cudaEvent_t ev[QCAP];
    Ranges r[QCAP];
    int head, len; /* ring of issued, not yet waited-for collectives */
    cudaEvent_t compute_ev;
    int have_events;
} q;

static void ensure_events(void)
{
    if (q.have_events) return;
    for (int i = 0; i < QCAP; i++) CUDA_CHECK(cudaEventCreateWithFlags(&q.ev[i], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&q.compute_ev, cudaEventDisableTiming));
    q.have_events = 1;
}

static bool overlap(const char *alo, const char *ahi, const char *blo, const char *bhi)
{
    return alo < bhi && blo < ahi;
}

/* Compute waits for entry i (i-th oldest) and thereby all older ones. */
static void wait_upto(int i)
{
    CUDA_CHECK(cudaStreamWaitEvent(rtcu.compute, q.ev[(q.head + i) % QCAP], 0));
    q.head = (q.head + i + 1) % QCAP;
    q.len -= i + 1;
}

void rtcu_deps(std::initializer_list<RtcuRange> ranges)
{
    if (q.len == 0) return;
    for (int i = q.len - 1; i >= 0; i--) { /* newest first: one wait covers the older ones */
        const Ranges *r = &q.r[(q.head + i) % QCAP];
        for (const RtcuRange &x : ranges) {
            if (!x.p || !x.bytes) continue;
            const char *lo = (const char *)x.p, *hi = lo + x.bytes;
            for (int k = 0; k < 2; k++)
                if (r->lo[k] && overlap(lo, hi, r->lo[k], r->hi[k])) {
                    wait_upto(i);
                    return;
                }
        }
    }
}

void rtcu_join_comm(void)
{
    if (q.len > 0) wait_upto(q.len - 1);
}

void rtcu_sync(void)
{
    rtcu_join_comm();
    CUDA_SYNC_CHECK(cudaStreamSynchronize(rtcu.compute));
    rtcu_check_dev_err();
}

void rtcu_comm_after_compute(void)
{
    ensure_events();
    CUDA_CHECK(cudaEventRecord(q.compute_ev, rtcu.compute));
    CUDA_CHECK(cudaStreamWaitEvent(rtcu.comm, q.compute_ev, 0));
}

void rtcu_comm_done(const char *what, const void *p1, size_t b1, const void *p2, size_t b2)
{
    (void)what;
    ensure_events();
    if (q.len == QCAP) wait_upto(0); /* bound the queue: compute waits for the oldest */
    int i = (q.head + q.len) % QCAP;
    CUDA_CHECK(cudaEventRecord(q.ev[i], rtcu.comm));
    Ranges *r = &q.r[i];
    r->lo[0] = p1 && b1 ? (const char *)p1 : NULL;
    r->hi[0] = r->lo[0] ? (const char *)p1 + b1 : NULL;
    r->lo[1] = p2 && b2 ? (const char *)p2 : NULL;
    r->hi[1] = r->lo[1] ? (const char *)p2 + b2 : NULL;
    q.len++;
}

size_t rtcu_type_size(RtType t)
{
    switch (t) {
    case RT_ACT: return sizeof(rt_act);
    case RT_F32: return 4;
    case RT_I32: return 4;
    }
    rt_fatal("unknown RtType %d", (int)t);
}

ncclDataType_t rtcu_nccl_type(RtType t)
{
    switch (t) {
    case RT_ACT: return ncclBfloat16;
    case RT_F32: return ncclFloat32;
    case RT_I32: return ncclInt32;
    }
    rt_fatal("unknown RtType %d", (int)t);
}

/* ------------------------------------------------------ communicators */
enum { MAX_COMMS = 1024 };
static RtComm *all_comms[MAX_COMMS];
static int n_all;

void rtcu_comm_remember(RtComm *c)
{
    if (n_all == MAX_COMMS) rt_fatal("more than %d communicators", MAX_COMMS);
    all_comms[n_all++] = c;
}

RtComm *rt_comm_world(void)
{
    rtcu_require_init("rt_comm_world");
    return rtcu.world;
}

RtComm *rt_comm_split(int color, int key)
{
    rtcu_require_init("rt_comm_split");
    MPI_Comm m;
    MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key, &m);
    ncclComm_t nc = NULL;
    NCCL_CHECK(ncclCommSplit(rtcu.world->nccl, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &nc, NULL));
    if (color < 0) return NULL;
    RtComm *c = (RtComm *)calloc(1, sizeof *c);
    if (!c) rt_fatal("out of host memory");
    c->nccl = nc;
    c->mpi = m;
    MPI_Comm_rank(m, &c->rank);
    MPI_Comm_size(m, &c->size);
    int nr = -1, ns = -1;
    NCCL_CHECK(ncclCommUserRank(nc, &nr));
    NCCL_CHECK(ncclCommCount(nc, &ns));
    if (nr != c->rank || ns != c->size) /* both order by (key, world rank) */
        rt_fatal("rt_comm_split: NCCL rank %d/%d differs from MPI rank %d/%d", nr, ns, c->rank,
                 c->size);
    rtcu_comm_remember(c);
    rtcu_watchdog_add(nc);
    return c;
}

int rt_comm_rank(const RtComm *c) { return c->rank; }
int rt_comm_size(const RtComm *c) { return c->size; }

void rtcu_comm_destroy_all(void)
{
    rtcu_watchdog_forget_comms();
    for (int i = 0; i < n_all; i++) NCCL_CHECK(ncclCommFinalize(all_comms[i]->nccl));
    for (int i = 0; i < n_all; i++) {
        NCCL_CHECK(ncclCommDestroy(all_comms[i]->nccl));
        if (all_comms[i]->mpi != MPI_COMM_WORLD) MPI_Comm_free(&all_comms[i]->mpi);
        free(all_comms[i]);
    }
    n_all = 0;
    rtcu.world = NULL;
    if (q.have_events) {
        for (int i = 0; i < QCAP; i++) CUDA_CHECK(cudaEventDestroy(q.ev[i]));
        CUDA_CHECK(cudaEventDestroy(q.compute_ev));
        q.have_events = 0;
        q.len = q.head = 0;
    }
}

void rt_barrier(RtComm *c)
{
    rtcu_require_init("rt_barrier");
    if (!c) rt_fatal("rt_barrier: NULL communicator (this rank is not a member)");
    rtcu_sync();
    rtcu_block_begin("MPI_Barrier", __FILE__, __LINE__);
    MPI_Barrier(c->mpi);
    rtcu_block_end();
}

/* ---------------------------------------------------------- collectives */
static void check_comm(const RtComm *c, const char *fn)
{
    rtcu_require_init(fn);
    if (!c) rt_fatal("%s: NULL communicator (this rank is not a member)", fn);
}

/* A local device copy on compute, ordered after pending collectives on src/dst. */
static void local_copy(void *dst, const void *src, size_t bytes)
{
    if (dst == src || bytes == 0) return;
    rtcu_deps({{dst, bytes}, {src, bytes}});
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, rtcu.compute));
}

void rt_allreduce(RtComm *c, void *buf, int64_t n, RtType t)
{
    check_comm(c, "rt_allreduce");
    if (n <= 0 || c->size == 1) return;
    rtcu_comm_after_compute();
    NCCL_CHECK(ncclAllReduce(buf, buf, (size_t)n, rtcu_nccl_type(t), ncclSum, c->nccl, rtcu.comm));
    rtcu_comm_done("allreduce", buf, (size_t)n * rtcu_type_size(t), NULL, 0);
}

void rt_allreduce_max(RtComm *c, float *buf, int64_t n)
{
    check_comm(c, "rt_allreduce_max");
    if (n <= 0 || c->size == 1) return;
    rtcu_comm_after_compute();
    NCCL_CHECK(ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, ncclMax, c->nccl, rtcu.comm));
    rtcu_comm_done("allreduce_max", buf, (size_t)n * 4, NULL, 0);
}

void rt_reduce_scatter(RtComm *c, void *out, const void *in, int64_t n_out, RtType t)
{
    check_comm(c, "rt_reduce_scatter");
    size_t es = rtcu_type_size(t);
    if (n_out <= 0) return;
    if (c->size == 1) {
        local_copy(out, in, (size_t)n_out * es);
        return;
    }
    rtcu_comm_after_compute();
    NCCL_CHECK(ncclReduceScatter(in, out, (size_t)n_out, rtcu_nccl_type(t), ncclSum, c->nccl,
                                 rtcu.comm));
    rtcu_comm_done("reduce_scatter", out, (size_t)n_out * es, in, (size_t)n_out * es * c->size);
}

void rt_allgather(RtComm *c, void *out, const void *in, int64_t n_in, RtType t)
{
    check_comm(c, "rt_allgather");
    size_t es = rtcu_type_size(t);
    if (n_in <= 0) return;
    if (c->size == 1) {
        local_copy(out, in, (size_t)n_in * es);
        return;
    }
    rtcu_comm_after_compute();
    NCCL_CHECK(ncclAllGather(in, out, (size_t)n_in, rtcu_nccl_type(t), c->nccl, rtcu.comm));
    rtcu_comm_done("allgather", out, (size_t)n_in * es * c->size, in, (size_t)n_in * es);
}

void rt_alltoall(RtComm *c, void *out, const void *in, int64_t n_per_rank, RtType t)
{
    check_comm(c, "rt_alltoall");
    size_t es = rtcu_type_size(t), blk = (size_t)n_per_rank * es, all = blk * c->size;
    if (n_per_rank <= 0) return;
    if ((const char *)in < (char *)out + all && (char *)out < (const char *)in + all)
        rt_fatal("rt_alltoall: in and out overlap");
    if (c->size == 1) {
        local_copy(out, in, all);
        return;
    }
    ncclDataType_t nt = rtcu_nccl_type(t);
    rtcu_comm_after_compute();
    /* Grouped send/recv: portable to every NCCL >= 2.7 (ncclAlltoAll is 2.28+). */
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < c->size; r++) {
        NCCL_CHECK(ncclSend((const char *)in + r * blk, (size_t)n_per_rank, nt, r, c->nccl, rtcu.comm));
        NCCL_CHECK(ncclRecv((char *)out + r * blk, (size_t)n_per_rank, nt, r, c->nccl, rtcu.comm));
    }
    NCCL_CHECK(ncclGroupEnd());
    rtcu_comm_done("alltoall", out, all, in, all);
}

void rt_bcast(RtComm *c, void *buf, int64_t n, RtType t, int root)
{
    check_comm(c, "rt_bcast");
    if (root < 0 || root >= c->size) rt_fatal("rt_bcast: root %d outside a group of %d", root, c->size);
    if (n <= 0 || c->size == 1) return;
    rtcu_comm_after_compute();
    NCCL_CHECK(ncclBroadcast(buf, buf, (size_t)n, rtcu_nccl_type(t), root, c->nccl, rtcu.comm));
    rtcu_comm_done("bcast", buf, (size_t)n * rtcu_type_size(t), NULL, 0);
}

/* ------------------------------------------------------- point to point */
/* NCCL sends and receives block the GPU until matched, so a send and a
 * receive posted one after the other could deadlock two ranks that both
 * send first. Requests are therefore queued on the host and issued together
 * in one ncclGroupStart/End at the first rt_wait, which MPI semantics allow
 * (a send buffer may not change, nor a receive buffer be read, before its
 * wait). NCCL matches messages between two ranks in posting order; tags are
 * only checked to be non-negative. */
struct RtReq {
    int launched;
};

typedef struct {
    RtReq *req;
    RtComm *c;
    void *buf;
    int64_t n;
    RtType t;
    int peer, send;
} P2p;

enum { MAX_P2P = 4096 };
static P2p p2p[MAX_P2P];
static int n_p2p;

static RtReq *post(RtComm *c, void *buf, int64_t n, RtType t, int peer, int tag, int send)
{
    const char *fn = send ? "rt_isend" : "rt_irecv";
    check_comm(c, fn);
    if (peer < 0 || peer >= c->size) rt_fatal("%s: peer %d outside a group of %d", fn, peer, c->size);
    if (tag < 0) rt_fatal("%s: negative tag %d", fn, tag);
    if (n < 0) rt_fatal("%s: negative count %lld", fn, (long long)n);
    if (n_p2p == MAX_P2P) rt_fatal("%s: more than %d requests posted without rt_wait", fn, MAX_P2P);
    RtReq *r = (RtReq *)calloc(1, sizeof *r);
    if (!r) rt_fatal("out of host memory");
    p2p[n_p2p++] = (P2p){r, c, buf, n, t, peer, send};
    return r;
}

RtReq *rt_isend(RtComm *c, const void *buf, int64_t n, RtType t, int peer, int tag)
{
    return post(c, (void *)buf, n, t, peer, tag, 1);
}

RtReq *rt_irecv(RtComm *c, void *buf, int64_t n, RtType t, int peer, int tag)
{
    return post(c, buf, n, t, peer, tag, 0);
}

static void flush_p2p(void)
{
    if (n_p2p == 0) return;
    rtcu_comm_after_compute();
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < n_p2p; i++) {
        P2p *p = &p2p[i];
        if (p->n == 0) continue;
        if (p->send)
            NCCL_CHECK(ncclSend(p->buf, (size_t)p->n, rtcu_nccl_type(p->t), p->peer, p->c->nccl, rtcu.comm));
        else
            NCCL_CHECK(ncclRecv(p->buf, (size_t)p->n, rtcu_nccl_type(p->t), p->peer, p->c->nccl, rtcu.comm));
    }
    NCCL_CHECK(ncclGroupEnd());
    for (int i = 0; i < n_p2p; i++) {
        P2p *p = &p2p[i];
        rtcu_comm_done(p->send ? "send" : "recv", p->buf, (size_t)p->n * rtcu_type_size(p->t), NULL, 0);
        p->req->launched = 1;
    }
    n_p2p = 0;
}

void rt_wait(RtReq *r)
{
    rtcu_require_init("rt_wait");
    if (!r) rt_fatal("rt_wait: NULL request");
    if (!r->launched) flush_p2p();
    free(r);
}
