/* emu_sched.h: streams, events and the adversarial scheduler of the
 * emulator (emu_sched.cpp); used by emu.h (kernel launches), emu_api.cpp
 * (copies, memsets, cuBLAS), emu_lt.cpp and emu_nccl.cpp.
 *
 * Work issued on a stream is queued there and runs only when the host
 * synchronises (a stream, an event, the device, a synchronous copy) and
 * the scheduler gets to it. Among the heads of all stream queues that may
 * legally run (earlier work of their stream done, waited events complete,
 * the legacy default stream's implicit ordering with blocking streams), the
 * scheduler picks one at random: seeded by PTDC_EMU_SEED (default: the
 * time), the seed printed once on stderr so a failing order can be
 * replayed (exactly for local work; with NCCL operations in flight the
 * candidates also depend on when MPI completes them). Asynchronous operations (NCCL over non-blocking MPI) start when
 * picked and occupy their stream until MPI reports them complete. When
 * nothing can progress for PTDC_EMU_DEADLOCK_S seconds (default 60) the
 * rank aborts with "deadlock: rank r waits on ..." naming every blocked
 * head. Not thread-safe: only the thread that issues work may drive it. */
#ifndef PTDC_RUNTIME_CUDA_EMU_SCHED_H
#define PTDC_RUNTIME_CUDA_EMU_SCHED_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <utility>
#include <vector>

namespace emu {

struct Stream;
/* Done when stream's completed count reaches seq. */
typedef std::pair<Stream *, uint64_t> Dep;

/* A step that takes time: ready() may it start (polled; may make MPI
 * progress), start() once, done() polled until true. describe() says what
 * it is or waits for, for a deadlock report. */
struct Async {
    virtual ~Async() {}
    virtual bool ready() { return true; }
    virtual void start() = 0;
    virtual bool done() = 0;
    virtual void describe(char *buf, size_t len, bool started) = 0;
};

/* Queue fn on s (NULL, cudaStreamLegacy, cudaStreamPerThread: the legacy
 * default stream). what: a static name for reports. Returns the op's seq. */
uint64_t submit(cudaStream_t s, const char *what, std::function<void()> fn);
/* Queue an asynchronous op (the scheduler owns and deletes it), after the
 * extra dependencies deps. */
uint64_t submit_async(cudaStream_t s, Async *a, const std::vector<Dep> &deps);
/* Queue a wait for d on s (an internal event). */
void submit_wait(cudaStream_t s, Dep d);
/* What completes when everything queued on s so far has. */
Dep tail(cudaStream_t s);
Stream *stream_of(cudaStream_t s);
/* Run the scheduler until d is done / until everything is. */
void drain_dep(Dep d, const char *why);
void drain_all(const char *why);
/* Reseed the scheduler (emu_nccl.cpp: rank 0's seed, once MPI is up). */
void sched_seed(uint64_t base, int rank);
uint64_t sched_seed_base(void);
/* Print one line and end every rank (MPI_Abort when MPI is up). */
[[noreturn]] void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int my_rank(void);

} // namespace emu

#endif
