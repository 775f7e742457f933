/* emu_sched.cpp: streams, events and the adversarial scheduler (see
 * emu_sched.h), and the CUDA runtime calls about streams and events.
 *
 * Ordering rules, as CUDA's: work on one stream runs in issue order; a
 * cudaStreamWaitEvent makes later work of its stream wait for what the
 * event recorded; the legacy default stream (stream 0, and the synchronous
 * cudaMemset / cudaMemcpy) waits for all earlier work of every blocking
 * stream and blocking streams wait for it, but streams created
 * cudaStreamNonBlocking (every stream the runtime makes) are not ordered
 * with it at all. */
#include "emu_sched.h"

#include <cuda_runtime.h>
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <deque>
#include <random>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <time.h>
#include <unistd.h>

namespace emu {

struct Op {
    uint64_t seq;
    std::vector<Dep> deps;
    std::function<void()> fn; /* a plain op runs at once */
    Async *a;                 /* or an asynchronous one */
    bool started;
    const char *what;
};

struct Stream {
    int id;
    bool blocking, legacy, dead;
    std::deque<Op *> q;
    uint64_t enq, done;
};

static std::vector<Stream *> streams;
static std::mt19937_64 rng;
static uint64_t seed_base;
static bool seeded;

int my_rank(void)
{
    int init = 0, fin = 0, r = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

void die(const char *fmt, ...)
{
    char line[4096];
    int n = snprintf(line, sizeof line, "emu: rank %d: ", my_rank());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    if (len + 1 < sizeof line) line[len++] = '\n';
    fflush(stdout);
    if (write(2, line, len) < 0) {} /* one write: lines of ranks never mix */
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

void sched_seed(uint64_t base, int rank)
{
    seed_base = base;
    rng.seed(base * 1000003u + (uint64_t)rank);
    seeded = true;
}
uint64_t sched_seed_base(void) { return seed_base; }

static void ensure_init(void)
{
    if (!streams.empty()) return;
    Stream *l = new Stream{0, true, true, false, {}, 0, 0};
    streams.push_back(l);
    if (!seeded) {
        const char *e = getenv("PTDC_EMU_SEED");
        sched_seed(e && *e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL), 0);
    }
}

Stream *stream_of(cudaStream_t s)
{
    ensure_init();
    if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread) return streams[0];
    return (Stream *)s;
}

static Op *push(Stream *st, const char *what, const std::vector<Dep> &extra)
{
    if (st->dead) die("work queued on a destroyed stream (%s)", what);
    Op *op = new Op{++st->enq, extra, nullptr, nullptr, false, what};
    /* The legacy stream and blocking streams order with each other. */
    for (Stream *o : streams) {
        if (o == st || o->enq == o->done) continue;
        if ((st->legacy && o->blocking) || (o->legacy && st->blocking)) op->deps.push_back({o, o->enq});
    }
    st->q.push_back(op);
    return op;
}

uint64_t submit(cudaStream_t s, const char *what, std::function<void()> fn)
{
    Op *op = push(stream_of(s), what, {});
    op->fn = std::move(fn);
    return op->seq;
}

uint64_t submit_async(cudaStream_t s, Async *a, const std::vector<Dep> &deps)
{
    Op *op = push(stream_of(s), "async", deps);
    op->a = a;
    return op->seq;
}

void submit_wait(cudaStream_t s, Dep d)
{
    if (!d.first || d.first->done >= d.second) return;
    push(stream_of(s), "cudaStreamWaitEvent", {d});
}

Dep tail(cudaStream_t s)
{
    Stream *st = stream_of(s);
    return {st, st->enq};
}

static bool dep_done(const Dep &d) { return !d.first || d.first->done >= d.second; }

static bool deps_done(const Op *op)
{
    for (const Dep &d : op->deps)
        if (!dep_done(d)) return false;
    return true;
}

static void complete(Stream *st)
{
    Op *op = st->q.front();
    st->q.pop_front();
    st->done = op->seq;
    delete op->a;
    delete op;
}

/* One step: every started operation polled, then one of the heads that may
 * run picked at random and run (or started). False: nothing moved. */
static bool step(void)
{
    bool moved = false;
    for (Stream *st : streams)
        if (!st->q.empty() && st->q.front()->started && st->q.front()->a->done()) {
            complete(st);
            moved = true;
        }
    std::vector<Stream *> can;
    for (Stream *st : streams) {
        if (st->q.empty()) continue;
        Op *h = st->q.front();
        if (!h->started && deps_done(h) && (!h->a || h->a->ready())) can.push_back(st);
    }
    if (can.empty()) return moved;
    Stream *st = can[(size_t)(rng() % can.size())];
    Op *h = st->q.front();
    if (h->a) {
        h->started = true;
        h->a->start();
        if (h->a->done()) complete(st);
    } else {
        std::function<void()> fn = std::move(h->fn);
        complete(st); /* first: fn may not re-enter the queue, but keep it consistent */
        if (fn) fn(); /* a wait has nothing to run */
    }
    return true;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

[[noreturn]] static void deadlock(const char *why)
{
    std::string all;
    char b[512];
    for (Stream *st : streams) {
        if (st->q.empty()) continue;
        Op *h = st->q.front();
        if (h->a) {
            h->a->describe(b, sizeof b, h->started);
        } else {
            snprintf(b, sizeof b, "%s", h->what);
        }
        all += "; stream ";
        all += std::to_string(st->id);
        all += ": ";
        all += b;
        for (const Dep &d : h->deps)
            if (!dep_done(d)) all += " (after stream " + std::to_string(d.first->id) + " op #" + std::to_string(d.second) + ")";
    }
    die("deadlock: rank %d waits on %s, and nothing it waits for can progress%s", my_rank(), why, all.c_str());
}

static void drain(const std::function<bool()> &finished, const char *why)
{
    static double limit = -1;
    if (limit < 0) {
        const char *e = getenv("PTDC_EMU_DEADLOCK_S");
        limit = e && *e ? atof(e) : 60.0;
    }
    double idle = 0;
    while (!finished()) {
        if (step()) {
            idle = 0;
            continue;
        }
        if (idle == 0) idle = now();
        else if (now() - idle > limit) deadlock(why);
        usleep(50);
    }
}

void drain_dep(Dep d, const char *why)
{
    ensure_init();
    drain([&] { return dep_done(d); }, why);
}

void drain_all(const char *why)
{
    ensure_init();
    drain(
        [] {
            for (Stream *st : streams)
                if (!st->q.empty()) return false;
            return true;
        },
        why);
}

} // namespace emu

using namespace emu;

struct EmuEvent {
    Dep d;
};

extern "C" {

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int)
{
    ensure_init();
    Stream *st = new Stream{(int)streams.size(), !(flags & cudaStreamNonBlocking), false, false, {}, 0, 0};
    streams.push_back(st);
    *s = (cudaStream_t)st;
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    return cudaStreamCreateWithPriority(s, flags, 0);
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithPriority(s, 0, 0); }
/* Its work completes first (CUDA lets it finish); the object stays, marked
 * dead, so pending dependencies on it stay valid. */
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    Stream *st = stream_of(s);
    drain_dep(tail(s), "cudaStreamDestroy");
    st->dead = true;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    drain_dep(tail(s), "cudaStreamSynchronize");
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void)
{
    drain_all("cudaDeviceSynchronize");
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int)
{
    *e = (cudaEvent_t) new EmuEvent{{nullptr, 0}};
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete (EmuEvent *)e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    ((EmuEvent *)e)->d = tail(s);
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int)
{
    submit_wait(s, ((EmuEvent *)e)->d);
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    drain_dep(((EmuEvent *)e)->d, "cudaEventSynchronize");
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    const Dep &d = ((EmuEvent *)e)->d;
    return !d.first || d.first->done >= d.second ? cudaSuccess : cudaErrorNotReady;
}

} /* extern "C" */
