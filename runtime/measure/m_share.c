/* m_share.c: how much of a waiting rank's core the ranks sharing it gain
 * (CPU ranks, more ranks than cores). A pipeline rank waiting for a message
 * sleeps in rt_wait; the cost model's rates for R ranks on C cores are each
 * rank's time slice (C / R of a core), and whether the busy ranks take over
 * a sleeping one's share (processor sharing) depends on the scheduler, so it
 * is measured: all ranks compute the same GEMMs (t_all), then only the even
 * ranks do while each odd rank waits in rt_wait for a message from its even
 * neighbour, sent when that one is done (t_half, the slowest rank's time).
 * Processor sharing gives t_half = t_all (C / R) / min(1, 2C / R) (with
 * R = 2C: C workers on C cores, t_all / 2); time slicing with no gain, t_all.
 *
 * Then all ranks again, each GEMM followed by a one-element all-reduce in
 * pairs (what a blocking collective between two ranks sharing cores costs
 * beyond its time slices; reported, not used by the model: 18-19 us on the
 * 2-core VM of docs/cost-model.md).
 *
 * Records (medians of 9 samples):
 *   share RANKS CPUS T_ALL T_HALF
 *   share_sync RANKS CPUS GEMMS T_ALL T_SYNC */
#include "measure.h"

enum { N = 256 }; /* GEMMs of 256 x 256 x 256: a few ms on one core */

static double phase(const CalOpts *o, bool all, int reps, rt_act *a, rt_act *b, rt_act *c, float *flag)
{
    RtComm *w = rt_comm_world();
    bool worker = o->rank % 2 == 0;
    rt_barrier(w);
    double t0 = rt_time();
    if (all || worker)
        for (int i = 0; i < reps; i++)
            rt_matmul(c, a, b, N, N, N, false, false, false);
    if (!all) {
        if (worker)
            rt_wait(rt_isend(w, flag, 1, RT_F32, o->rank + 1, 77));
        else
            rt_wait(rt_irecv(w, flag, 1, RT_F32, o->rank - 1, 77));
    }
    rt_barrier(w);
    return rt_time() - t0;
}

/* All ranks compute, each GEMM followed by a one-element all-reduce in
 * pairs of consecutive ranks (a tensor-parallel group's blocking
 * collective between two layers' work). */
static double phase_sync(int reps, RtComm *pair, rt_act *a, rt_act *b, rt_act *c, float *x)
{
    RtComm *w = rt_comm_world();
    rt_barrier(w);
    double t0 = rt_time();
    for (int i = 0; i < reps; i++) {
        rt_matmul(c, a, b, N, N, N, false, false, false);
        rt_allreduce(pair, x, 1, RT_F32);
    }
    rt_barrier(w);
    return rt_time() - t0;
}

void cal_measure_share(const CalOpts *o)
{
    if (o->gpu || o->size % 2)
        return;
    int nc = cal_cpus(); /* every rank: a collective */
    if (o->size <= nc)
        return; /* only a launch with more CPU ranks than cores */
    rt_act *a = cal_act(N * N, 1.f), *b = cal_act(N * N, 1.f), *c = cal_act(N * N, 0.f);
    float *flag = cal_f32(1, 0.f);
    /* Size the work so all ranks at once take about 0.1 s (every rank uses
     * rank 0's count: the phases must match). */
    int reps = 2;
    float r = 0;
    if (o->rank == 0) {
        double t = phase(o, true, reps, a, b, c, flag);
        r = (float)(reps * 0.1 / (t > 1e-6 ? t : 1e-6));
    } else {
        phase(o, true, reps, a, b, c, flag);
    }
    float *rb = cal_f32(1, r);
    rt_allreduce(rt_comm_world(), rb, 1, RT_F32); /* rank 0's count (the others add 0) */
    reps = (int)(rb[0] + 0.5f);
    reps = reps < 2 ? 2 : reps > 2000 ? 2000 : reps;
    enum { S = 9 }; /* alternating, so a slow minute of a shared machine hits both */
    double ta[S], th[S];
    for (int i = 0; i < S; i++) {
        ta[i] = phase(o, true, reps, a, b, c, flag);
        th[i] = phase(o, false, reps, a, b, c, flag);
    }
    RtComm *pair = rt_comm_split(o->rank / 2, o->rank % 2);
    double ts[S];
    for (int i = 0; i < S; i++)
        ts[i] = phase_sync(reps, pair, a, b, c, flag);
    double all = cal_median(ta, S), half = cal_median(th, S), sync = cal_median(ts, S);
    cal_out(o, CAL_FMT_SHARE, o->size, nc, all, half);
    cal_out(o, CAL_FMT_SHARE_SYNC, o->size, nc, reps, all, sync);
    cal_progress(o, "%d ranks on %d cores: %d GEMMs %.1f ms, with an all-reduce in pairs after each %.1f ms: "
                    "%.0f us per collective", o->size, nc, reps, all * 1e3, sync * 1e3, (sync - all) / reps * 1e6);
    double cshare = (double)nc / o->size, gain = (1 - half / all) / (1 - cshare);
    cal_progress(o, "%d ranks on %d cores: all computing %.1f ms, half %.1f ms: the busy ranks gain "
                    "%.0f%% of the waiting ones' share", o->size, nc, all * 1e3, half * 1e3, 100 * gain);
    rt_free(a), rt_free(b), rt_free(c), rt_free(flag), rt_free(rb);
}
