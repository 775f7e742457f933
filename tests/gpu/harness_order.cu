/* harness_order.cu: ordering and threading of the multi-rank runtime (issue
 * 34), one mode per hazard, under mpirun with 2 or more ranks. Meant for the
 * emulator (tests/gpu/run.sh --emu), whose scheduler runs stream work in a
 * random legal order, whose large sends complete only when their receive
 * runs, and which aborts when two threads are inside one communicator; on
 * GPUs they run too, with real NCCL's timing instead.
 *
 *   wd-race      NCCL calls for a few seconds while the watchdog polls the
 *                same communicators (bug 1)
 *   pp-profile   a pipeline ring of large sends with PTDC_PROFILE's rt_time()
 *                between a send and the next receive (bug 2)
 *   alloc-order  fresh rt_alloc buffers written at once by compute and by a
 *                collective (bug 3)
 *   mismatch     ranks issue different collectives in the same slot: must
 *                abort naming both (the emulator's fingerprint check)
 *   mismatch-time  the same, then rt_time(): with PTDC_NCCL_CHECK=1 the
 *                runtime's own check (comm_check.cu) must abort first
 *   emu-streams  the emulator's own ordering rules (one rank) */
#include "cpu_rt.h"
#include "harness.h"

#include <math.h>
#include <string.h>

static float oval(uint64_t seed, int r, int64_t i)
{
    Rng g(seed * 2654435761u + (uint64_t)r * 40503u + (uint64_t)i * 7919u);
    return bfr(g.uni());
}

/* Bug 1: the watchdog thread calls ncclCommGetAsyncError on every
 * communicator every 100 ms while the main thread settles its own calls on
 * the same communicators with the same function: two threads inside one
 * non-blocking communicator, which NCCL forbids (the call completes and
 * frees in-progress jobs). 600 collectives keep the main thread inside the
 * world communicator for seconds: many watchdog ticks. */
int run_wd_race_test(void)
{
    RtComm *w = rt_comm_world();
    const int64_t n = 64;
    float *d = df32(std::vector<float>((size_t)n, 1.0f));
    for (int i = 0; i < 600; i++) rt_allreduce_max(w, d, n);
    report("600 allreduce_max while the watchdog polls", hf32(d, n), std::vector<float>((size_t)n, 1.0f), 1e-7);
    rt_free(d);
    return g_failures;
}

/* Bug 2: with PTDC_PROFILE=1 the trainer times each call with rt_time()
 * (trainer.h, CG_PROF). In a pipeline a stage posts a send (cg_send:
 * rt_isend, after waiting for the previous send's request), then the hook's
 * rt_time() runs before cg_recv posts the receive of its neighbour's
 * message. A message NCCL cannot buffer completes only when the receive is
 * posted; if rt_time waits for pending sends every stage waits there for a
 * receive nobody has posted. A ring over all ranks (every stage both sends
 * and receives, as in 1F1B's steady state), two micro-batches of 256 KiB. */
int run_pp_profile_test(uint64_t seed)
{
    RtComm *pc = rt_comm_split_p2p(0, rt_world_rank());
    const int P = rt_comm_size(pc), me = rt_comm_rank(pc), next = (me + 1) % P, prev = (me + P - 1) % P;
    const int64_t n = 65536;
    RtReq *send = NULL;
    float *act[2], *in[2];
    char name[96];
    for (int mb = 0; mb < 2; mb++) {
        std::vector<float> mine((size_t)n), want((size_t)n);
        for (int64_t i = 0; i < n; i++) {
            mine[(size_t)i] = oval(seed + (uint64_t)mb, me, i);
            want[(size_t)i] = oval(seed + (uint64_t)mb, prev, i);
        }
        act[mb] = df32(mine);
        in[mb] = (float *)rt_alloc((size_t)n * 4);
        if (send) rt_wait(send); /* cg_send */
        send = rt_isend(pc, act[mb], n, RT_F32, next, mb);
        double t0 = rt_time(); /* CG_PROF(cg_recv): before */
        rt_wait(rt_irecv(pc, in[mb], n, RT_F32, prev, mb));
        double dt = rt_time() - t0; /* CG_PROF: after */
        snprintf(name, sizeof name, "profiled pipeline ring, micro-batch %d", mb);
        report(name, hf32(in[mb], n), want, 1e-7);
        (void)dt;
    }
    rt_wait(send);
    for (int mb = 0; mb < 2; mb++) rt_free(act[mb]), rt_free(in[mb]);
    return g_failures;
}

/* Bug 3: rt_alloc zeroes with cudaMemset, on the legacy default stream, which
 * the runtime's streams (created cudaStreamNonBlocking) are not ordered
 * with: the zeroing may land after the first writes to the buffer. Fresh
 * buffers written at once by a copy on compute and by an all-gather on the
 * communicator's stream (the HF export's pattern), each read back. 24
 * rounds: the scheduler runs the zeroing at a random point among the ready
 * work, so an unordered memset is caught with near certainty. */
int run_alloc_order_test(uint64_t seed)
{
    RtComm *w = rt_comm_world();
    const int P = rt_comm_size(w), me = rt_comm_rank(w);
    const int64_t n = 257;
    int bad_copy = 0, bad_gather = 0;
    for (int round = 0; round < 24; round++) {
        std::vector<float> mine((size_t)n), all((size_t)(n * P));
        for (int64_t i = 0; i < n; i++) mine[(size_t)i] = oval(seed + (uint64_t)round, me, i);
        for (int r = 0; r < P; r++)
            for (int64_t i = 0; i < n; i++) all[(size_t)(r * n + i)] = oval(seed + (uint64_t)round, r, i);
        float *a = (float *)rt_alloc((size_t)n * 4);
        rt_to_device(a, mine.data(), (size_t)n * 4);
        float *g = (float *)rt_alloc((size_t)(n * P) * 4);
        rt_allgather(w, g, a, n, RT_F32);
        std::vector<float> ga = hf32(g, n * P), aa = hf32(a, n);
        bad_copy += memcmp(aa.data(), mine.data(), (size_t)n * 4) != 0;
        bad_gather += memcmp(ga.data(), all.data(), (size_t)(n * P) * 4) != 0;
        rt_free(a), rt_free(g);
    }
    char detail[96];
    snprintf(detail, sizeof detail, "%d of 24 wrong", bad_copy);
    report_bool("fresh buffer written by a copy", bad_copy == 0, detail);
    snprintf(detail, sizeof detail, "%d of 24 wrong", bad_gather);
    report_bool("fresh buffer written by an all-gather", bad_gather == 0, detail);
    return g_failures;
}

/* Rank 0 all-reduces where the others all-gather: on GPUs a hang or
 * garbage; the emulator must abort naming both calls. Returning is a
 * failure. */
int run_mismatch_test(bool timed)
{
    RtComm *w = rt_comm_world();
    const int P = rt_comm_size(w);
    float *d = df32(std::vector<float>((size_t)(8 * P), 1.0f));
    if (rt_comm_rank(w) == 0)
        rt_allreduce(w, d, 8, RT_F32);
    else
        rt_allgather(w, d, d + 8 * rt_comm_rank(w), 8, RT_F32);
    if (timed)
        rt_time();
    else
        hf32(d, 8);
    fprintf(stderr, "mismatch: rank %d returned; the collectives were not checked\n", rt_comm_rank(w));
    return 1;
}

#ifdef PTDC_CUDA_EMU
/* The emulator's own ordering rules (emulator only: on a GPU the unordered
 * case depends on timing). 64 rounds of: the legacy stream sets a fresh
 * buffer to 1, a blocking stream and a non-blocking one each copy it out,
 * then the non-blocking one writes 2 into a second buffer and records an
 * event the blocking one waits for before copying that. The blocking
 * stream's copies must always see 1 and 2; the non-blocking stream's copy
 * must see the memset in some rounds and miss it in others (the scheduler
 * reorders what is not ordered). */
int run_emu_streams_test(void)
{
    cudaStream_t b, nb;
    cudaEvent_t ev;
    cudaStreamCreateWithFlags(&b, cudaStreamDefault);
    cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    int blocking_ok = 1, event_ok = 1, saw_before = 0, saw_after = 0;
    for (int round = 0; round < 64; round++) {
        unsigned char *buf, *buf2, *outb, *outn, *out2;
        cudaMalloc((void **)&buf, 64), cudaMalloc((void **)&buf2, 64);
        cudaMalloc((void **)&outb, 64), cudaMalloc((void **)&outn, 64), cudaMalloc((void **)&out2, 64);
        cudaMemset(buf, 1, 64);
        cudaMemcpyAsync(outb, buf, 64, cudaMemcpyDeviceToDevice, b);
        cudaMemcpyAsync(outn, buf, 64, cudaMemcpyDeviceToDevice, nb);
        cudaMemsetAsync(buf2, 2, 64, nb);
        cudaEventRecord(ev, nb);
        cudaStreamWaitEvent(b, ev, 0);
        cudaMemcpyAsync(out2, buf2, 64, cudaMemcpyDeviceToDevice, b);
        cudaDeviceSynchronize();
        blocking_ok &= outb[0] == 1 && outb[63] == 1;
        event_ok &= out2[0] == 2 && out2[63] == 2;
        saw_after += outn[0] == 1;
        saw_before += outn[0] != 1;
        cudaFree(buf), cudaFree(buf2), cudaFree(outb), cudaFree(outn), cudaFree(out2);
    }
    cudaEventDestroy(ev);
    cudaStreamDestroy(b), cudaStreamDestroy(nb);
    char detail[96];
    report_bool("blocking stream after the legacy stream", blocking_ok, "64 rounds");
    report_bool("cudaStreamWaitEvent orders two streams", event_ok, "64 rounds");
    snprintf(detail, sizeof detail, "memset seen %d, missed %d of 64", saw_after, saw_before);
    report_bool("non-blocking stream not ordered with legacy", saw_after > 0 && saw_before > 0, detail);
    return g_failures;
}
#else
int run_emu_streams_test(void)
{
    if (g_print) printf("SKIPPED: the stream-order self-test runs under the emulator only\n");
    return 0;
}
#endif
