/* comm.cu: communicators, collectives and point-to-point over NCCL.
 *
 * Streams. Every communicator issues on its own stream (a stream per NCCL
 * communicator), so data-parallel, tensor-parallel and pipeline traffic
 * (different communicators in the trainer) never queue behind each other,
 * and none of them behind compute. Before an operation is enqueued its
 * stream waits on an event recorded on compute (it reads what every earlier
 * kernel wrote, and overwrites nothing an earlier kernel still reads) and on
 * the pending operations of other streams that touch the same bytes. After
 * it, an event is recorded on its stream and queued with the byte ranges it
 * touches. Compute does not wait right away: every kernel entry point calls
 * rtcu_deps with its buffers, and only when one overlaps a pending operation
 * does compute wait on that operation's event (and thereby on the older ones
 * of the same stream). Requests (non-blocking collectives, point-to-point,
 * copies) carry their event: rt_wait makes compute wait on it, the host
 * never (except for a host staging buffer, rt_to_device_async).
 *
 * Communicators are non-blocking NCCL communicators (config.blocking = 0):
 * calls return at once, possibly ncclInProgress, and the runtime polls
 * ncclCommGetAsyncError until the call has settled, timed by the watchdog,
 * which can then abort them safely from its own thread. No communicator is
 * made twice: a split whose group equals an existing communicator's (the
 * world's, most often) shares its NCCL communicator and stream, and a group
 * of one rank has none (its collectives are local copies).
 *
 * Element counts: every NCCL call takes element counts of the NCCL datatype
 * (never bytes); byte counts appear only in the dependency ranges. */
#include "cu.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- events */
/* Pooled events with a reference count: a pending entry and a request may
 * hold the same event, which returns to the pool when both let it go (a
 * recycled event re-recorded elsewhere would make rt_wait wait for the
 * wrong operation). */
struct RtcuEv {
    cudaEvent_t e;
    int refs;
    RtcuEv *next_free;
};
static RtcuEv *ev_free;

static RtcuEv *ev_get(void)
{
    RtcuEv *v = ev_free;
    if (v) {
        ev_free = v->next_free;
    } else {
        v = (RtcuEv *)calloc(1, sizeof *v);
        if (!v) rt_fatal("out of host memory");
        CUDA_CHECK(cudaEventCreateWithFlags(&v->e, cudaEventDisableTiming));
    }
    v->refs = 1;
    return v;
}

static void ev_put(RtcuEv *v)
{
    if (v && --v->refs == 0) {
        v->next_free = ev_free;
        ev_free = v;
    }
}

static void ev_destroy_all(void)
{
    while (ev_free) {
        RtcuEv *v = ev_free;
        ev_free = v->next_free;
        CUDA_CHECK(cudaEventDestroy(v->e));
        free(v);
    }
}

/* ------------------------------------------------- pending operations */
enum { QCAP = 1024 };

typedef struct {
    RtcuEv *ev;
    cudaStream_t stream;
    const char *lo[2], *hi[2];
    int send; /* a point-to-point send (rtcu_sync_except_sends leaves it) */
} Pending;

static struct {
    Pending p[QCAP]; /* in issue order; ev == NULL: done (compute waited) */
    int n;
    cudaEvent_t compute_ev;
    int have_event;
} q;

static bool overlap(const char *alo, const char *ahi, const char *blo, const char *bhi)
{
    return alo < bhi && blo < ahi;
}

static bool touches(const Pending *e, const char *lo, const char *hi)
{
    for (int k = 0; k < 2; k++)
        if (e->lo[k] && overlap(lo, hi, e->lo[k], e->hi[k])) return true;
    return false;
}

/* Compute waits for entry i and thereby for every older entry of its stream. */
static void wait_entry(int i)
{
    cudaStream_t s = q.p[i].stream;
    CUDA_CHECK(cudaStreamWaitEvent(rtcu.compute, q.p[i].ev->e, 0));
    for (int k = 0; k <= i; k++)
        if (q.p[k].ev && q.p[k].stream == s) {
            ev_put(q.p[k].ev);
            q.p[k].ev = NULL;
        }
}

static void compact(void)
{
    int m = 0;
    for (int k = 0; k < q.n; k++)
        if (q.p[k].ev) q.p[m++] = q.p[k];
    q.n = m;
}

void rtcu_deps(std::initializer_list<RtcuRange> ranges)
{
    if (q.n == 0) return;
    for (const RtcuRange &x : ranges) {
        if (!x.p || !x.bytes) continue;
        const char *lo = (const char *)x.p, *hi = lo + x.bytes;
        for (int i = q.n - 1; i >= 0; i--) /* newest first: one wait covers its stream's older ones */
            if (q.p[i].ev && touches(&q.p[i], lo, hi)) wait_entry(i);
    }
    while (q.n > 0 && !q.p[q.n - 1].ev) q.n--;
}

void rtcu_join_comm(void)
{
    for (int i = q.n - 1; i >= 0; i--)
        if (q.p[i].ev) wait_entry(i);
    q.n = 0;
}

void rtcu_sync(void)
{
    rtcu_check_poll(true);
    rtcu_join_comm();
    CUDA_SYNC_CHECK(cudaStreamSynchronize(rtcu.compute));
    rtcu_check_dev_err();
}

void rtcu_sync_except_sends(void)
{
    rtcu_check_poll(true);
    for (int i = q.n - 1; i >= 0; i--) /* a wait covers its stream's older entries, sends included */
        if (q.p[i].ev && !q.p[i].send) wait_entry(i);
    compact();
    CUDA_SYNC_CHECK(cudaStreamSynchronize(rtcu.compute));
    rtcu_check_dev_err();
}

/* Stream s is about to run an operation on these ranges: it waits for
 * compute so far and for the pending operations of other streams that touch
 * them (a reduction over the tied copies, then over the data-parallel
 * group, on the same gradient). */
static void stream_after(cudaStream_t s, const void *p1, size_t b1, const void *p2, size_t b2)
{
    if (!q.have_event) {
        CUDA_CHECK(cudaEventCreateWithFlags(&q.compute_ev, cudaEventDisableTiming));
        q.have_event = 1;
    }
    CUDA_CHECK(cudaEventRecord(q.compute_ev, rtcu.compute));
    CUDA_CHECK(cudaStreamWaitEvent(s, q.compute_ev, 0));
    const void *ps[2] = {p1, p2};
    size_t bs[2] = {b1, b2};
    for (int k = 0; k < 2; k++) {
        if (!ps[k] || !bs[k]) continue;
        const char *lo = (const char *)ps[k], *hi = lo + bs[k];
        for (int i = 0; i < q.n; i++)
            if (q.p[i].ev && q.p[i].stream != s && touches(&q.p[i], lo, hi))
                CUDA_CHECK(cudaStreamWaitEvent(s, q.p[i].ev->e, 0));
    }
}

/* Queue the operation just enqueued on s; returns its event (one reference
 * for the caller, who must ev_put it or hand it to a request). */
static RtcuEv *pend(cudaStream_t s, const void *p1, size_t b1, const void *p2, size_t b2)
{
    if (q.n == QCAP) compact();
    if (q.n == QCAP) { /* bound the queue: compute waits for the oldest */
        wait_entry(0);
        compact();
    }
    RtcuEv *v = ev_get();
    CUDA_CHECK(cudaEventRecord(v->e, s));
    Pending *e = &q.p[q.n++];
    e->ev = v;
    v->refs++;
    e->stream = s;
    e->lo[0] = p1 && b1 ? (const char *)p1 : NULL;
    e->hi[0] = e->lo[0] ? (const char *)p1 + b1 : NULL;
    e->lo[1] = p2 && b2 ? (const char *)p2 : NULL;
    e->hi[1] = e->lo[1] ? (const char *)p2 + b2 : NULL;
    e->send = 0;
    return v;
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

/* ------------------------------------------- non-blocking NCCL calls */
/* Wait until a call on non-blocking communicator c has settled (it returned
 * ncclInProgress), then check its result. The host polls: the watchdog
 * times the wait and may abort the communicator meanwhile (rtcu_aborting
 * then stops the polling). */
void rtcu_nccl_settle(ncclComm_t c, ncclResult_t r, const char *call, const char *file, int line)
{
    if (r == ncclInProgress && c) {
        rtcu_block_begin(call, file, line);
        do {
            if (rtcu_aborting()) rtcu_park();
            sched_yield();
            ncclResult_t g = RTCU_NCCL(ncclCommGetAsyncError(c, &r));
            if (g != ncclSuccess) r = g;
        } while (r == ncclInProgress);
        rtcu_block_end();
    }
    if (r != ncclSuccess) rtcu_fail(file, line, "NCCL", ncclGetErrorString(r), call);
}

ncclConfig_t rtcu_nccl_config(void)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    return cfg;
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

static cudaStream_t new_stream(void)
{
    /* Lower number = higher priority: communication kernels get the SMs
     * they need as soon as their inputs are ready. */
    int lo = 0, hi = 0;
    cudaStream_t s;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi));
    return s;
}

void rtcu_comm_own(RtComm *c, ncclComm_t nc)
{
    c->nccl = nc;
    c->stream = new_stream();
    c->owner = 1;
    rtcu_watchdog_add(nc);
    rtcu_check_own(c);
}

/* A split of the world communicator (collective over the world: every rank
 * calls it, with NCCL_SPLIT_NOCOLOR when it wants none). */
static ncclComm_t nccl_split(int color, int key)
{
    ncclComm_t nc = NULL;
    ncclConfig_t cfg = rtcu_nccl_config();
    ncclResult_t r = RTCU_NCCL(ncclCommSplit(rtcu.world->nccl, color, key, &nc, &cfg));
    rtcu_nccl_settle(nc ? nc : rtcu.world->nccl, r, "ncclCommSplit", __FILE__, __LINE__);
    return nc;
}

static RtComm *new_comm(MPI_Comm m)
{
    RtComm *c = (RtComm *)calloc(1, sizeof *c);
    if (!c) rt_fatal("out of host memory");
    c->mpi = m;
    MPI_Comm_rank(m, &c->rank);
    MPI_Comm_size(m, &c->size);
    return c;
}

static void check_ranks(const RtComm *c, ncclComm_t nc)
{
    int nr = -1, ns = -1;
    NCCL_CHECK(ncclCommUserRank(nc, &nr));
    NCCL_CHECK(ncclCommCount(nc, &ns));
    if (nr != c->rank || ns != c->size) /* both order by (key, world rank) */
        rt_fatal("rt_comm_split: NCCL rank %d/%d differs from MPI rank %d/%d", nr, ns, c->rank, c->size);
}

RtComm *rt_comm_split(int color, int key)
{
    rtcu_require_init("rt_comm_split");
    MPI_Comm m;
    MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key, &m);
    RtComm *c = m == MPI_COMM_NULL ? NULL : new_comm(m);
    /* The same group in the same order as a communicator made before? Every
     * member finds the same one (all made the same splits), so the decision
     * is the group's. */
    RtComm *same = NULL;
    for (int i = 0; c && c->size > 1 && i < n_all && !same; i++) {
        int res = MPI_UNEQUAL;
        MPI_Comm_compare(m, all_comms[i]->mpi, &res);
        if ((res == MPI_IDENT || res == MPI_CONGRUENT) && all_comms[i]->nccl) same = all_comms[i];
    }
    int need = c && c->size > 1 && !same, any = 0;
    MPI_Allreduce(&need, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    ncclComm_t nc = any ? nccl_split(need ? color : NCCL_SPLIT_NOCOLOR, key) : NULL;
    if (!c) return NULL;
    if (need) {
        check_ranks(c, nc);
        rtcu_comm_own(c, nc);
    } else if (same) {
        c->nccl = same->nccl; /* shared: same NCCL communicator, same stream */
        c->stream = same->stream;
        c->fp = same->fp;
    }
    rtcu_comm_remember(c);
    return c;
}

/* Four NCCL communicators over the group, one per direction of rank order
 * and parity of the sending rank (messages from a lower rank to a higher
 * one on channels 0 and 1), each with its own stream: a send blocks only
 * its channel's stream until matched, and a rank sends only on the
 * channels of its own parity, so a receive from a neighbour never waits
 * behind this rank's send to the other neighbour (codegen/cg_sched.c). */
RtComm *rt_comm_split_p2p(int color, int key)
{
    rtcu_require_init("rt_comm_split_p2p");
    MPI_Comm m;
    MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key, &m);
    RtComm *c = m == MPI_COMM_NULL ? NULL : new_comm(m);
    int need = c && c->size > 1, any = 0;
    MPI_Allreduce(&need, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    for (int k = 0; any && k < 4; k++) {
        ncclComm_t nc = nccl_split(need ? color : NCCL_SPLIT_NOCOLOR, key);
        if (!need) continue;
        check_ranks(c, nc);
        c->chan[k] = nc;
        c->chan_stream[k] = new_stream();
        rtcu_watchdog_add(nc);
    }
    if (!c) return NULL;
    c->p2p = 1;
    rtcu_comm_remember(c);
    return c;
}

int rt_comm_rank(const RtComm *c) { return c->rank; }
int rt_comm_size(const RtComm *c) { return c->size; }

static void destroy_nccl(ncclComm_t nc)
{
    ncclResult_t r = RTCU_NCCL(ncclCommFinalize(nc));
    rtcu_nccl_settle(nc, r, "ncclCommFinalize", __FILE__, __LINE__);
    NCCL_CHECK(ncclCommDestroy(nc));
}

void rtcu_comm_destroy_all(void)
{
    rtcu_watchdog_forget_comms();
    for (int i = 0; i < n_all; i++) {
        RtComm *c = all_comms[i];
        if (c->owner) {
            rtcu_check_free(c);
            destroy_nccl(c->nccl);
            CUDA_CHECK(cudaStreamDestroy(c->stream));
        }
        for (int k = 0; k < 4; k++)
            if (c->chan[k]) {
                destroy_nccl(c->chan[k]);
                CUDA_CHECK(cudaStreamDestroy(c->chan_stream[k]));
            }
        if (c->mpi != MPI_COMM_WORLD) MPI_Comm_free(&c->mpi);
        free(c);
    }
    n_all = 0;
    rtcu.world = NULL;
    for (int k = 0; k < q.n; k++) ev_put(q.p[k].ev);
    q.n = 0;
    ev_destroy_all();
    if (q.have_event) {
        CUDA_CHECK(cudaEventDestroy(q.compute_ev));
        q.have_event = 0;
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

/* A request: its completion event, or a deferred point-to-point transfer. */
struct RtReq {
    int deferred; /* rt_isend/rt_irecv on a plain communicator: issued at the first rt_wait */
    int launched;
    int grouped;  /* issued inside an open group: its event comes at rt_group_end */
    int host;     /* rt_to_device_async: the host waits too (its staging buffer) */
    int send;     /* a send on a point-to-point channel: compute need not wait (below) */
    RtcuEv *ev;   /* completion; NULL: nothing to wait for */
};

/* ------------------------------------------------------------- groups */
/* Inside rt_group_begin/end, collectives are only enqueued by NCCL at
 * ncclGroupEnd: their completion events are recorded after it. */
enum { MAX_GROUP = 4096 };
static struct {
    int open;
    int n;
    struct {
        cudaStream_t s;
        ncclComm_t nc;
        const void *p1, *p2;
        size_t b1, b2;
        RtReq *req;
    } op[MAX_GROUP];
} grp;

void rt_group_begin(void)
{
    rtcu_require_init("rt_group_begin");
    if (grp.open) rt_fatal("rt_group_begin inside a group");
    grp.open = 1;
    grp.n = 0;
    NCCL_CHECK(ncclGroupStart());
}

void rt_group_end(void)
{
    if (!grp.open) rt_fatal("rt_group_end without rt_group_begin");
    grp.open = 0;
    ncclResult_t r = RTCU_NCCL(ncclGroupEnd());
    if (r == ncclInProgress) { /* non-blocking: each communicator of the group settles */
        for (int i = 0; i < grp.n; i++) {
            ncclResult_t st = ncclInProgress;
            rtcu_nccl_settle(grp.op[i].nc, st, "ncclGroupEnd", __FILE__, __LINE__);
        }
    } else if (r != ncclSuccess) {
        rtcu_fail(__FILE__, __LINE__, "NCCL", ncclGetErrorString(r), "ncclGroupEnd");
    }
    for (int i = 0; i < grp.n; i++) {
        RtcuEv *v = pend(grp.op[i].s, grp.op[i].p1, grp.op[i].b1, grp.op[i].p2, grp.op[i].b2);
        if (grp.op[i].req) {
            grp.op[i].req->ev = v;
            grp.op[i].req->grouped = 0;
        } else {
            ev_put(v);
        }
    }
    grp.n = 0;
}

/* ---------------------------------------------------------- collectives */
static void check_comm(const RtComm *c, const char *fn)
{
    rtcu_require_init(fn);
    if (!c) rt_fatal("%s: NULL communicator (this rank is not a member)", fn);
    if (c->p2p) rt_fatal("%s on a point-to-point communicator (rt_comm_split_p2p)", fn);
}

/* A local device copy on compute, ordered after pending operations on src/dst. */
static void local_copy(void *dst, const void *src, size_t bytes)
{
    if (dst == src || bytes == 0) return;
    rtcu_deps({{dst, bytes}, {src, bytes}});
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, rtcu.compute));
}

static RtReq *new_req(void)
{
    RtReq *r = (RtReq *)calloc(1, sizeof *r);
    if (!r) rt_fatal("out of host memory");
    return r;
}

/* Enqueue one NCCL operation on c's stream. `issue` makes the NCCL call;
 * ranges are what it reads and writes. Returns its event (a reference for
 * the caller) or, inside a group, NULL (the event comes at rt_group_end and
 * goes to req). */
template <class F>
static RtcuEv *enqueue(const RtComm *c, RtReq *req, const char *call, const void *p1, size_t b1, const void *p2,
                       size_t b2, F issue)
{
    stream_after(c->stream, p1, b1, p2, b2);
    rtcu_check_call(c, call, b1, b2);
    ncclResult_t r = RTCU_NCCL(issue(c->stream));
    if (grp.open) {
        if (r != ncclSuccess && r != ncclInProgress) rtcu_fail(__FILE__, __LINE__, "NCCL", ncclGetErrorString(r), call);
        if (grp.n == MAX_GROUP) rt_fatal("more than %d collectives in one group", MAX_GROUP);
        grp.op[grp.n++] = {c->stream, c->nccl, p1, p2, b1, b2, req};
        if (req) req->grouped = 1;
        return NULL;
    }
    rtcu_nccl_settle(c->nccl, r, call, __FILE__, __LINE__);
    return pend(c->stream, p1, b1, p2, b2);
}

static void done(RtcuEv *v)
{
    if (v) ev_put(v);
}

void rt_allreduce(RtComm *c, void *buf, int64_t n, RtType t)
{
    check_comm(c, "rt_allreduce");
    if (n <= 0 || c->size == 1) return;
    size_t b = (size_t)n * rtcu_type_size(t);
    done(enqueue(c, NULL, "ncclAllReduce", buf, b, NULL, 0, [&](cudaStream_t s) {
        return ncclAllReduce(buf, buf, (size_t)n, rtcu_nccl_type(t), ncclSum, c->nccl, s);
    }));
}

void rt_allreduce_max(RtComm *c, float *buf, int64_t n)
{
    check_comm(c, "rt_allreduce_max");
    if (n <= 0 || c->size == 1) return;
    done(enqueue(c, NULL, "ncclAllReduce (max)", buf, (size_t)n * 4, NULL, 0, [&](cudaStream_t s) {
        return ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, ncclMax, c->nccl, s);
    }));
}

static RtcuEv *reduce_scatter(RtComm *c, RtReq *req, void *out, const void *in, int64_t n_out, RtType t)
{
    size_t es = rtcu_type_size(t);
    return enqueue(c, req, "ncclReduceScatter", out, (size_t)n_out * es, in, (size_t)n_out * es * c->size,
                   [&](cudaStream_t s) {
                       return ncclReduceScatter(in, out, (size_t)n_out, rtcu_nccl_type(t), ncclSum, c->nccl, s);
                   });
}

void rt_reduce_scatter(RtComm *c, void *out, const void *in, int64_t n_out, RtType t)
{
    check_comm(c, "rt_reduce_scatter");
    if (n_out <= 0) return;
    if (c->size == 1) return local_copy(out, in, (size_t)n_out * rtcu_type_size(t));
    done(reduce_scatter(c, NULL, out, in, n_out, t));
}

static RtcuEv *allgather(RtComm *c, RtReq *req, void *out, const void *in, int64_t n_in, RtType t)
{
    size_t es = rtcu_type_size(t);
    /* In place (in == out + rank * n_in) is NCCL's own in-place all-gather. */
    return enqueue(c, req, "ncclAllGather", out, (size_t)n_in * es * c->size, in, (size_t)n_in * es,
                   [&](cudaStream_t s) {
                       return ncclAllGather(in, out, (size_t)n_in, rtcu_nccl_type(t), c->nccl, s);
                   });
}

void rt_allgather(RtComm *c, void *out, const void *in, int64_t n_in, RtType t)
{
    check_comm(c, "rt_allgather");
    if (n_in <= 0) return;
    if (c->size == 1) return local_copy(out, in, (size_t)n_in * rtcu_type_size(t));
    done(allgather(c, NULL, out, in, n_in, t));
}

void rt_alltoall(RtComm *c, void *out, const void *in, int64_t n_per_rank, RtType t)
{
    check_comm(c, "rt_alltoall");
    size_t es = rtcu_type_size(t), blk = (size_t)n_per_rank * es, all = blk * c->size;
    if (n_per_rank <= 0) return;
    if ((const char *)in < (char *)out + all && (char *)out < (const char *)in + all)
        rt_fatal("rt_alltoall: in and out overlap");
    if (c->size == 1) return local_copy(out, in, all);
    if (grp.open) rt_fatal("rt_alltoall inside rt_group_begin/end");
    ncclDataType_t nt = rtcu_nccl_type(t);
    /* Grouped send/recv: portable to every NCCL >= 2.7 (ncclAlltoAll is 2.28+). */
    done(enqueue(c, NULL, "ncclGroupEnd (alltoall)", out, all, in, all, [&](cudaStream_t s) {
        NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < c->size; r++) {
            NCCL_CHECK(ncclSend((const char *)in + r * blk, (size_t)n_per_rank, nt, r, c->nccl, s));
            NCCL_CHECK(ncclRecv((char *)out + r * blk, (size_t)n_per_rank, nt, r, c->nccl, s));
        }
        return ncclGroupEnd();
    }));
}

void rt_bcast(RtComm *c, void *buf, int64_t n, RtType t, int root)
{
    check_comm(c, "rt_bcast");
    if (root < 0 || root >= c->size) rt_fatal("rt_bcast: root %d outside a group of %d", root, c->size);
    if (n <= 0 || c->size == 1) return;
    done(enqueue(c, NULL, "ncclBroadcast", buf, (size_t)n * rtcu_type_size(t), NULL, 0, [&](cudaStream_t s) {
        return ncclBroadcast(buf, buf, (size_t)n, rtcu_nccl_type(t), root, c->nccl, s);
    }));
}

/* ------------------------------------------- non-blocking collectives */
/* The same calls on the communicator's stream; the request holds the
 * completion event. A group of one rank completes at once (a local copy on
 * compute, ordered like any kernel). */
RtReq *rt_iallreduce(RtComm *c, void *buf, int64_t n, RtType t)
{
    check_comm(c, "rt_iallreduce");
    RtReq *r = new_req();
    if (n <= 0 || c->size == 1) return r;
    size_t b = (size_t)n * rtcu_type_size(t);
    r->ev = enqueue(c, r, "ncclAllReduce", buf, b, NULL, 0, [&](cudaStream_t s) {
        return ncclAllReduce(buf, buf, (size_t)n, rtcu_nccl_type(t), ncclSum, c->nccl, s);
    });
    return r;
}

RtReq *rt_ireduce_scatter(RtComm *c, void *out, const void *in, int64_t n_out, RtType t)
{
    check_comm(c, "rt_ireduce_scatter");
    RtReq *r = new_req();
    if (n_out <= 0) return r;
    if (c->size == 1) {
        local_copy(out, in, (size_t)n_out * rtcu_type_size(t));
        return r;
    }
    r->ev = reduce_scatter(c, r, out, in, n_out, t);
    return r;
}

RtReq *rt_iallgather(RtComm *c, void *out, const void *in, int64_t n_in, RtType t)
{
    check_comm(c, "rt_iallgather");
    RtReq *r = new_req();
    if (n_in <= 0) return r;
    if (c->size == 1) {
        local_copy(out, in, (size_t)n_in * rtcu_type_size(t));
        return r;
    }
    r->ev = allgather(c, r, out, in, n_in, t);
    return r;
}

/* ------------------------------------------------------- point to point */
/* On a plain communicator NCCL sends and receives on one stream block it
 * until matched, so a send and a receive posted one after the other could
 * deadlock two ranks that both send first. Such requests are queued on the
 * host and issued together in one ncclGroupStart/End at the first rt_wait,
 * which MPI semantics allow (a send buffer may not change, nor a receive
 * buffer be read, before its wait). On a rt_comm_split_p2p communicator each
 * is issued at once on the channel of its direction. NCCL matches messages
 * between two ranks in posting order; tags are only checked to be
 * non-negative. */
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
    rtcu_require_init(fn);
    if (!c) rt_fatal("%s: NULL communicator (this rank is not a member)", fn);
    if (peer < 0 || peer >= c->size) rt_fatal("%s: peer %d outside a group of %d", fn, peer, c->size);
    if (peer == c->rank && (c->p2p || !c->nccl))
        rt_fatal("%s: peer %d is this rank (not on this communicator)", fn, peer);
    if (tag < 0) rt_fatal("%s: negative tag %d", fn, tag);
    if (n < 0) rt_fatal("%s: negative count %lld", fn, (long long)n);
    RtReq *r = new_req();
    if (c->p2p) {
        if (n == 0) return r;
        /* Up the rank order on 0, 1, down on 2, 3, by the sender's parity. */
        int from = send ? c->rank : peer, to = send ? peer : c->rank;
        int k = (from < to ? 0 : 2) + (from & 1);
        cudaStream_t s = c->chan_stream[k];
        size_t b = (size_t)n * rtcu_type_size(t);
        stream_after(s, buf, b, NULL, 0);
        ncclResult_t res = RTCU_NCCL(send ? ncclSend(buf, (size_t)n, rtcu_nccl_type(t), peer, c->chan[k], s)
                                          : ncclRecv(buf, (size_t)n, rtcu_nccl_type(t), peer, c->chan[k], s));
        rtcu_nccl_settle(c->chan[k], res, send ? "ncclSend" : "ncclRecv", __FILE__, __LINE__);
        r->ev = pend(s, buf, b, NULL, 0);
        if (send) {
            q.p[q.n - 1].send = 1;
            r->send = 1;
        }
        return r;
    }
    if (n_p2p == MAX_P2P) rt_fatal("%s: more than %d requests posted without rt_wait", fn, MAX_P2P);
    r->deferred = 1;
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
    if (grp.open) rt_fatal("rt_wait of a point-to-point request inside rt_group_begin/end");
    /* One group per stream is all NCCL allows in one ncclGroupEnd here: the
     * requests of each communicator go out in posting order. */
    for (int i = 0; i < n_p2p; i++) {
        P2p *p = &p2p[i];
        if (p->n > 0) stream_after(p->c->stream, p->buf, (size_t)p->n * rtcu_type_size(p->t), NULL, 0);
    }
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < n_p2p; i++) {
        P2p *p = &p2p[i];
        if (p->n == 0) continue;
        if (p->send)
            NCCL_CHECK(ncclSend(p->buf, (size_t)p->n, rtcu_nccl_type(p->t), p->peer, p->c->nccl, p->c->stream));
        else
            NCCL_CHECK(ncclRecv(p->buf, (size_t)p->n, rtcu_nccl_type(p->t), p->peer, p->c->nccl, p->c->stream));
    }
    ncclResult_t r = RTCU_NCCL(ncclGroupEnd());
    for (int i = 0; i < n_p2p && r == ncclInProgress; i++)
        if (p2p[i].n > 0) rtcu_nccl_settle(p2p[i].c->nccl, ncclInProgress, "ncclGroupEnd (p2p)", __FILE__, __LINE__);
    if (r != ncclSuccess && r != ncclInProgress) rtcu_fail(__FILE__, __LINE__, "NCCL", ncclGetErrorString(r), "ncclGroupEnd");
    for (int i = 0; i < n_p2p; i++) {
        P2p *p = &p2p[i];
        if (p->n > 0) ev_put(pend(p->c->stream, p->buf, (size_t)p->n * rtcu_type_size(p->t), NULL, 0));
        p->req->launched = 1;
    }
    n_p2p = 0;
}

void rt_wait(RtReq *r)
{
    rtcu_require_init("rt_wait");
    if (!r) rt_fatal("rt_wait: NULL request");
    if (r->deferred) {
        /* Issued, and tracked by range: kernels touching its buffer wait. */
        if (!r->launched) flush_p2p();
        free(r);
        return;
    }
    if (r->grouped) rt_fatal("rt_wait of a request of a group still open (rt_group_end first)");
    /* A completed send only frees its buffer for reuse, and whatever
     * reuses it waits by range (rtcu_deps): compute does not wait for the
     * send itself, so no later host wait (rt_time) depends on a receive
     * the peer has yet to post. */
    if (r->ev) {
        if (!r->send) CUDA_CHECK(cudaStreamWaitEvent(rtcu.compute, r->ev->e, 0));
        if (r->host) CUDA_SYNC_CHECK(cudaEventSynchronize(r->ev->e));
        ev_put(r->ev);
    }
    free(r);
}

/* --------------------------------------------------------- host copies */
RtReq *rt_to_device_async(void *dst, const void *host_src, size_t bytes)
{
    rtcu_require_init("rt_to_device_async");
    RtReq *r = new_req();
    if (bytes == 0) return r;
    rtcu_deps({{dst, bytes}});
    CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, rtcu.compute));
    r->ev = ev_get();
    CUDA_CHECK(cudaEventRecord(r->ev->e, rtcu.compute));
    r->host = 1; /* the copy is on compute already: rt_wait only frees the host buffer */
    return r;
}
