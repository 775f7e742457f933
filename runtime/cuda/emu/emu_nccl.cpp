/* emu_nccl.cpp: NCCL over MPI for the emulator, with NCCL's semantics and
 * the rules NCCL leaves undefined made into aborts.
 *
 * Semantics: element counts; bf16 sums rounded per reduction step; every
 * call is an operation queued on its stream (emu_sched.h) that starts, as
 * a non-blocking MPI call, when the scheduler picks it and occupies the
 * stream until MPI completes it; the calls of one communicator start in
 * issue order (NCCL serialises them); point-to-point matches in posting
 * order per pair; a group (ncclGroupStart/End) starts all its calls
 * together, on the stream of its first call, which waits for the other
 * streams of the group and which they then wait for (as NCCL joins them).
 * A send of at least PTDC_EMU_RENDEZVOUS bytes (default 65536) completes
 * only once the matching receive has started (MPI_Issend): NCCL cannot
 * buffer a large message, so a program whose sends must complete before
 * their receives are posted deadlocks here as it would on GPUs, and the
 * scheduler's deadlock report names the send. Communicators created with
 * config.blocking = 0 return ncclInProgress from their calls, settled by
 * ncclCommGetAsyncError a couple of polls later. Outputs that are not also
 * inputs (receives, all-gathers not in place, reduce-scatters, a
 * broadcast's non-roots) are filled with 0xff (NaN) when the call starts,
 * so a read the streams do not order after its completion sees NaN.
 *
 * Rules, each an abort naming what broke it:
 * - one host thread inside a communicator at a time: every call on a
 *   communicator marks it busy; a second thread entering meanwhile aborts
 *   with both calls named. ncclCommGetAsyncError holds the communicator
 *   for a millisecond, so a thread polling it concurrently with another
 *   (the watchdog against the main thread) is caught within a few polls.
 *   ncclCommAbort is exempt (NCCL's way to end a hang from another thread).
 * - the same collective sequence on every rank of a communicator: each
 *   collective's fingerprint (call, count, type, operation, root) is
 *   all-gathered (non-blocking, on a shadow MPI communicator) when the call
 *   is made, and checked before the collective may start: "rank r call #k
 *   X vs rank s call #k Y". A rank that never makes call #k leaves the
 *   others waiting, which the deadlock report names.
 *
 * Injected errors (PTDC_EMU_NCCL_FAIL=R:K): world rank R's K-th NCCL
 * operation (counted over all its communicators from 1) fails as a dead
 * peer or a broken link would make it: it never completes, its peers wait
 * in it, and from then on ncclCommGetAsyncError of its communicator
 * reports ncclRemoteError, with ncclGetLastError naming the operation. The
 * runtime's watchdog must turn that into an abort of every rank. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "emu_sched.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <string>
#include <vector>

enum Kind { K_ALLREDUCE, K_REDUCESCATTER, K_ALLGATHER, K_BCAST, K_SEND, K_RECV };
static const char *const kind_name[] = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast",
                                        "ncclSend",      "ncclRecv"};

struct ncclComm {
    MPI_Comm data, fp, ctl; /* started calls; fingerprints; splits */
    int rank, size, id;
    bool nonblocking;
    int polls;               /* ncclInProgress answers left */
    uint64_t issued, started; /* calls in issue order */
    uint64_t ncoll;          /* collectives issued: the fingerprint slot */
    std::vector<int> world;  /* world rank of each member */
    std::atomic<int> busy;
    std::atomic<const char *> busy_call;
    std::atomic<int> failed; /* an injected error (ncclResult_t), 0 while none */
    char fail_text[200];
};

/* PTDC_EMU_NCCL_FAIL=R:K: is the k-th operation this rank starts the one
 * to fail? */
static bool inject_here(long k)
{
    static long rank = -2, at = 0;
    if (rank == -2) {
        rank = -1;
        const char *e = getenv("PTDC_EMU_NCCL_FAIL");
        if (e && *e && sscanf(e, "%ld:%ld", &rank, &at) != 2)
            emu::die("PTDC_EMU_NCCL_FAIL=%s: expected RANK:K (world rank, its K-th NCCL operation from 1)", e);
    }
    return rank >= 0 && rank == emu::my_rank() && k == at;
}

static int n_comms;
static bool seed_shared;

/* ------------------------------------------------- one thread at a time */
struct Inside {
    ncclComm *c;
    Inside(ncclComm *cc, const char *call) : c(cc)
    {
        if (!c) return;
        int z = 0;
        if (!c->busy.compare_exchange_strong(z, 1)) {
            const char *other = c->busy_call.load();
            emu::die("two host threads inside NCCL communicator %d at once: %s (another thread, still inside) and "
                     "%s (thread %lu); NCCL allows one thread per communicator at a time",
                     c->id, other ? other : "?", call, (unsigned long)pthread_self());
        }
        c->busy_call.store(call);
    }
    ~Inside()
    {
        if (c) c->busy.store(0);
    }
};

/* -------------------------------------------------------------- types */
static MPI_Datatype mpi_type(ncclDataType_t t)
{
    switch (t) {
    case ncclBfloat16: case ncclFloat16: return MPI_UINT16_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclInt8: return MPI_INT8_T;
    default: return MPI_UINT8_T;
    }
}

static size_t type_size(ncclDataType_t t)
{
    int es = 0;
    MPI_Type_size(mpi_type(t), &es);
    return (size_t)es;
}

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *)
{
    const __nv_bfloat16 *a = (const __nv_bfloat16 *)in;
    __nv_bfloat16 *b = (__nv_bfloat16 *)inout;
    for (int i = 0; i < *len; i++) b[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

static MPI_Op mpi_op(ncclRedOp_t op, ncclDataType_t t)
{
    static MPI_Op bf_sum = MPI_OP_NULL;
    if (t == ncclBfloat16) {
        if (op != ncclSum) emu::die("only sums of bf16 are emulated");
        if (bf_sum == MPI_OP_NULL) MPI_Op_create(bf16_sum, 1, &bf_sum);
        return bf_sum;
    }
    switch (op) {
    case ncclSum: return MPI_SUM;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    case ncclProd: return MPI_PROD;
    default: emu::die("unsupported NCCL reduction %d", (int)op);
    }
}

/* ------------------------------------------------------- fingerprints */
struct Fp {
    int32_t kind, type, op, root;
    int64_t count, slot;
};
struct FpState {
    Fp mine;
    std::vector<Fp> all;
    MPI_Request req;
    bool done;
};

static const char *type_name(int t)
{
    switch (t) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    default: return "another type";
    }
}

static const char *op_name(int op)
{
    switch (op) {
    case ncclSum: return ", sum";
    case ncclProd: return ", prod";
    case ncclMax: return ", max";
    case ncclMin: return ", min";
    case -1: return "";
    default: return ", another reduction";
    }
}

static std::string fp_text(const Fp &f)
{
    char b[160], root[32] = "";
    if (f.kind < 0 || f.kind > K_RECV) return "an unknown call";
    if (f.root >= 0) snprintf(root, sizeof root, ", root %d", f.root);
    snprintf(b, sizeof b, "%s(count %lld, %s%s%s)", kind_name[f.kind], (long long)f.count, type_name(f.type),
             op_name(f.op), root);
    return b;
}

/* ---------------------------------------------------------- operations */
struct Part {
    Kind kind;
    const void *s;
    void *r;
    size_t n;
    ncclDataType_t t;
    ncclRedOp_t op;
    int peer; /* root, or the peer of a send or receive */
    ncclComm *c;
    uint64_t index;
    FpState *fs;
    MPI_Request req;
    std::vector<char> tmp; /* an overlapping send buffer, taken at start */
};

static size_t rendezvous_bytes(void)
{
    static long v = -1;
    if (v < 0) {
        const char *e = getenv("PTDC_EMU_RENDEZVOUS");
        v = e && *e ? atol(e) : 65536;
    }
    return (size_t)v;
}

struct NcclOp : emu::Async {
    std::vector<Part> parts;
    bool failed = false; /* injected: never completes */
    ~NcclOp()
    {
        for (Part &p : parts) delete p.fs;
    }
    /* Fingerprints all in and equal, and every communicator's earlier
     * calls started. */
    bool ready() override
    {
        bool ok = true;
        for (Part &p : parts) {
            if (!p.fs || p.fs->done) continue;
            int flag = 0;
            MPI_Test(&p.fs->req, &flag, MPI_STATUS_IGNORE);
            if (!flag) {
                ok = false;
                continue;
            }
            p.fs->done = true;
            for (int r = 0; r < p.c->size; r++)
                if (memcmp(&p.fs->all[(size_t)r], &p.fs->mine, sizeof(Fp)) != 0)
                    emu::die("NCCL calls differ on communicator %d: rank %d call #%lld %s vs rank %d call #%lld %s",
                             p.c->id, p.c->world[(size_t)p.c->rank], (long long)p.fs->mine.slot,
                             fp_text(p.fs->mine).c_str(), p.c->world[(size_t)r], (long long)p.fs->all[(size_t)r].slot,
                             fp_text(p.fs->all[(size_t)r]).c_str());
        }
        if (!ok) return false;
        std::map<ncclComm *, uint64_t> next;
        for (Part &p : parts) {
            if (!next.count(p.c)) next[p.c] = p.c->started;
            if (next[p.c] != p.index) return false;
            next[p.c]++;
        }
        return true;
    }
    void start() override
    {
        static long n_started;
        if (inject_here(++n_started)) {
            failed = true;
            for (Part &p : parts) {
                p.c->started++;
                snprintf(p.c->fail_text, sizeof p.c->fail_text,
                         "emu: injected at rank %d's NCCL operation #%ld (%s of %zu elements on communicator %d), "
                         "which never completes", emu::my_rank(), n_started, kind_name[p.kind], p.n, p.c->id);
                p.c->failed.store((int)ncclRemoteError);
            }
            fprintf(stderr, "%s\n", parts[0].c->fail_text);
            return;
        }
        for (Part &p : parts) {
            ncclComm *c = p.c;
            c->started++;
            MPI_Datatype mt = mpi_type(p.t);
            size_t es = type_size(p.t);
            int n = (int)p.n;
            switch (p.kind) {
            case K_ALLREDUCE:
                MPI_Iallreduce(p.s == p.r ? MPI_IN_PLACE : p.s, p.r, n, mt, mpi_op(p.op, p.t), c->data, &p.req);
                break;
            case K_REDUCESCATTER: {
                const char *s = (const char *)p.s, *r = (const char *)p.r;
                size_t in = p.n * es * (size_t)c->size;
                if (r < s + in && s < r + p.n * es) { /* in place: MPI may not alias */
                    p.tmp.assign(s, s + in);
                    s = p.tmp.data();
                }
                memset(p.r, 0xff, p.n * es); /* poisoned until complete */
                MPI_Ireduce_scatter_block(s, p.r, n, mt, mpi_op(p.op, p.t), c->data, &p.req);
                break;
            }
            case K_ALLGATHER: {
                bool in_place = (const char *)p.s == (char *)p.r + (size_t)c->rank * p.n * es; /* NCCL's form */
                if (!in_place) memset(p.r, 0xff, p.n * es * (size_t)c->size); /* poisoned until complete */
                MPI_Iallgather(in_place ? MPI_IN_PLACE : p.s, n, mt, p.r, n, mt, c->data, &p.req);
                break;
            }
            case K_BCAST:
                if (c->rank == p.peer && p.s != p.r) memmove(p.r, p.s, p.n * es);
                if (c->rank != p.peer) memset(p.r, 0xff, p.n * es); /* poisoned until complete */
                MPI_Ibcast(p.r, n, mt, p.peer, c->data, &p.req);
                break;
            case K_SEND:
                if (p.n * es >= rendezvous_bytes())
                    MPI_Issend(p.s, n, mt, p.peer, 0, c->data, &p.req);
                else
                    MPI_Isend(p.s, n, mt, p.peer, 0, c->data, &p.req);
                break;
            case K_RECV:
                memset(p.r, 0xff, p.n * es); /* poisoned until complete */
                MPI_Irecv(p.r, n, mt, p.peer, 0, c->data, &p.req);
                break;
            }
        }
    }
    bool done() override
    {
        if (failed) return false;
        for (Part &p : parts) {
            if (p.req == MPI_REQUEST_NULL) continue;
            int flag = 0;
            MPI_Test(&p.req, &flag, MPI_STATUS_IGNORE);
            if (!flag) return false;
        }
        return true;
    }
    void describe(char *b, size_t len, bool started) override
    {
        for (Part &p : parts) {
            ncclComm *c = p.c;
            size_t bytes = p.n * type_size(p.t);
            int pw = p.peer >= 0 && p.peer < c->size ? c->world[(size_t)p.peer] : p.peer;
            if (!started && p.fs && !p.fs->done) {
                snprintf(b, len, "%s (call #%lld on communicator %d): not every rank has issued it", kind_name[p.kind],
                         (long long)p.fs->mine.slot, c->id);
                return;
            }
            if (!started && c->started != p.index) {
                snprintf(b, len, "%s on communicator %d: behind its earlier calls", kind_name[p.kind], c->id);
                return;
            }
            if (!started || p.req == MPI_REQUEST_NULL) continue;
            if (p.kind == K_SEND)
                snprintf(b, len, "ncclSend of %zu bytes to rank %d on communicator %d (%s)", bytes, pw, c->id,
                         bytes >= rendezvous_bytes() ? "rendezvous: done only when that rank's ncclRecv runs"
                                                      : "buffered");
            else if (p.kind == K_RECV)
                snprintf(b, len, "ncclRecv of %zu bytes from rank %d on communicator %d (its ncclSend has not run)",
                         bytes, pw, c->id);
            else
                snprintf(b, len, "%s of %zu elements on communicator %d (not every rank has started it)",
                         kind_name[p.kind], p.n, c->id);
            return;
        }
        snprintf(b, len, "NCCL operations");
    }
};

/* ------------------------------------------------------------- issuing */
static int group_depth;
static std::vector<std::pair<cudaStream_t, Part>> grouped;

static void enqueue(std::vector<std::pair<cudaStream_t, Part>> &ps)
{
    std::vector<cudaStream_t> ss;
    for (auto &x : ps) {
        bool seen = false;
        for (cudaStream_t s : ss) seen |= s == x.first;
        if (!seen) ss.push_back(x.first);
    }
    std::vector<emu::Dep> deps;
    for (size_t i = 1; i < ss.size(); i++) deps.push_back(emu::tail(ss[i]));
    NcclOp *op = new NcclOp;
    for (auto &x : ps) op->parts.push_back(x.second);
    uint64_t seq = emu::submit_async(ss[0], op, deps);
    for (size_t i = 1; i < ss.size(); i++) emu::submit_wait(ss[i], {emu::stream_of(ss[0]), seq});
}

static ncclResult_t issue(Kind k, const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, int peer,
                          ncclComm *c, cudaStream_t st)
{
    if (!c) return ncclInvalidArgument;
    Inside in(c, kind_name[k]);
    if ((k == K_SEND || k == K_RECV || k == K_BCAST) && (peer < 0 || peer >= c->size)) return ncclInvalidArgument;
    Part p{k, s, r, n, t, op, peer, c, c->issued++, nullptr, MPI_REQUEST_NULL, {}};
    if (k != K_SEND && k != K_RECV) {
        p.fs = new FpState;
        p.fs->mine = Fp{(int32_t)k, (int32_t)t, k == K_ALLREDUCE || k == K_REDUCESCATTER ? (int32_t)op : -1,
                        k == K_BCAST ? peer : -1, (int64_t)n, (int64_t)c->ncoll++};
        p.fs->all.resize((size_t)c->size);
        p.fs->done = false;
        MPI_Iallgather(&p.fs->mine, (int)sizeof(Fp), MPI_BYTE, p.fs->all.data(), (int)sizeof(Fp), MPI_BYTE, c->fp,
                       &p.fs->req);
    }
    if (group_depth) {
        grouped.push_back({st, p});
        return ncclSuccess;
    }
    std::vector<std::pair<cudaStream_t, Part>> one = {{st, p}};
    enqueue(one);
    if (!c->nonblocking) return ncclSuccess;
    c->polls = 2;
    return ncclInProgress;
}

/* --------------------------------------------------------------- calls */
static ncclComm *make_comm(MPI_Comm data, bool nonblocking)
{
    ncclComm *x = new ncclComm;
    x->data = data;
    MPI_Comm_dup(data, &x->fp);
    MPI_Comm_dup(data, &x->ctl);
    MPI_Comm_rank(data, &x->rank);
    MPI_Comm_size(data, &x->size);
    x->id = n_comms++;
    x->nonblocking = nonblocking;
    x->polls = nonblocking ? 2 : 0; /* creation itself is in progress */
    x->issued = x->started = x->ncoll = 0;
    x->world.resize((size_t)x->size);
    int wr = emu::my_rank();
    MPI_Allgather(&wr, 1, MPI_INT, x->world.data(), 1, MPI_INT, x->ctl);
    x->busy.store(0);
    x->busy_call.store(nullptr);
    x->failed.store(0);
    x->fail_text[0] = 0;
    return x;
}

extern "C" {

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInProgress: return "operation in progress";
    case ncclInvalidArgument: return "invalid argument (emulated NCCL)";
    case ncclInvalidUsage: return "invalid usage (emulated NCCL)";
    case ncclRemoteError: return "remote process exited or there was a network error (emulated NCCL)";
    default: return "emulated NCCL error";
    }
}
const char *ncclGetLastError(ncclComm_t c) { return c && c->failed.load() ? c->fail_text : ""; }
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    return ncclSuccess;
}
/* The first communicator also fixes the scheduler's seed: rank 0's, so one
 * printed number replays every rank. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *c, int nranks, ncclUniqueId, int rank, ncclConfig_t *cfg)
{
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    ncclComm *x = make_comm(d, cfg && cfg->blocking == 0);
    if (x->size != nranks || x->rank != rank) return ncclInvalidUsage;
    if (!seed_shared) {
        unsigned long long s = emu::sched_seed_base();
        MPI_Bcast(&s, 1, MPI_UNSIGNED_LONG_LONG, 0, x->ctl);
        emu::sched_seed(s, rank);
        if (rank == 0)
            fprintf(stderr, "emu: scheduler seed %llu (PTDC_EMU_SEED=%llu replays this interleaving)\n", s, s);
        seed_shared = true;
    }
    *c = x;
    return x->nonblocking ? ncclInProgress : ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t *c, int nranks, ncclUniqueId id, int rank)
{
    return ncclCommInitRankConfig(c, nranks, id, rank, NULL);
}
ncclResult_t ncclCommSplit(ncclComm_t p, int color, int key, ncclComm_t *out, ncclConfig_t *cfg)
{
    Inside in(p, "ncclCommSplit");
    MPI_Comm m;
    MPI_Comm_split(p->ctl, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &m);
    *out = NULL;
    if (m != MPI_COMM_NULL) *out = make_comm(m, cfg ? cfg->blocking == 0 : p->nonblocking);
    if (!p->nonblocking) return ncclSuccess;
    p->polls = 2;
    return ncclInProgress;
}
ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r)
{
    Inside in(c, "ncclCommUserRank");
    *r = c->rank;
    return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t c, int *n)
{
    Inside in(c, "ncclCommCount");
    *n = c->size;
    return ncclSuccess;
}
/* Holds the communicator a millisecond (see the top of the file). */
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r)
{
    Inside in(c, "ncclCommGetAsyncError");
    usleep(1000);
    *r = ncclSuccess;
    if (c->failed.load()) {
        *r = (ncclResult_t)c->failed.load();
        return ncclSuccess;
    }
    if (c->polls > 0) {
        c->polls--;
        *r = ncclInProgress;
    }
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t) { return ncclSuccess; }
/* Flushes the communicator's calls (everything queued, here). */
ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    {
        Inside in(c, "ncclCommFinalize");
        if (c->nonblocking) c->polls = 2;
    }
    emu::drain_all("ncclCommFinalize");
    return c->nonblocking ? ncclInProgress : ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    {
        Inside in(c, "ncclCommDestroy");
        if (c->issued != c->started) emu::die("ncclCommDestroy of communicator %d with calls not yet run", c->id);
    }
    MPI_Comm_free(&c->data);
    MPI_Comm_free(&c->fp);
    MPI_Comm_free(&c->ctl);
    delete c;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t st)
{
    return issue(K_ALLREDUCE, s, r, n, t, op, -1, c, st);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t st)
{
    return issue(K_REDUCESCATTER, s, r, n, t, op, -1, c, st);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t st)
{
    return issue(K_ALLGATHER, s, r, n, t, ncclSum, -1, c, st);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t st)
{
    return issue(K_BCAST, s, r, n, t, ncclSum, root, c, st);
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st)
{
    return issue(K_SEND, s, NULL, n, t, ncclSum, peer, c, st);
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st)
{
    return issue(K_RECV, NULL, r, n, t, ncclSum, peer, c, st);
}

ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0) return ncclInvalidUsage;
    if (--group_depth > 0 || grouped.empty()) return ncclSuccess;
    std::vector<std::pair<cudaStream_t, Part>> ps;
    ps.swap(grouped);
    bool nb = false;
    for (auto &x : ps) {
        Inside in(x.second.c, "ncclGroupEnd");
        if (x.second.c->nonblocking) {
            x.second.c->polls = 2;
            nb = true;
        }
    }
    enqueue(ps);
    return nb ? ncclInProgress : ncclSuccess;
}

} /* extern "C" */
