/* train_prof.c: PTDC_PROFILE=1: seconds per step in each runtime call (the
 * calls trainer.h lists), over the steps after the first two (start-up:
 * first touch, library plans), on this rank and the slowest one. The lines
 * are for people and for bench/predict-vs-run, which sets them beside the
 * cost model's prediction:
 *   profile: steps FIRST..LAST (N)
 *   profile: NAME CALLS_PER_STEP SECONDS_PER_STEP_RANK0 SECONDS_PER_STEP_MAX
 * with NAME "step" for the whole step and "other" for what no listed call
 * took (the trainer's own host work); then the process's peak resident
 * memory (getrusage: the arena, the runtime, MPI and BLAS buffers):
 *   profile: peak_rss_bytes RANK0 MAX */
#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int cg_prof_on;
static double acc[CG_PF_N];
static long ncalls[CG_PF_N];
static double step_s;
static long nsteps;
static int64_t first_step;
enum { WARMUP = 2 };

static const char *const names[CG_PF_N] = {
#define CG_PF_NAME(f) #f,
    CG_PROFILED(CG_PF_NAME)
#undef CG_PF_NAME
};

void cg_prof_add(int call, double t0)
{
    double t1 = rt_time();
    if (cg_prof_on & CG_TIMED_HEALTH) /* (the waits; collectives' come through cg_prof_comm) */
        tr_health_wait(call, t1 - t0);
    if (cg_prof_on & CG_TIMED_TRACE) /* (PTDC_TRACE's steps) */
        tr_trace_call(call, t0, t1);
    if (!(cg_prof_on & CG_TIMED_PROFILE))
        return;
    acc[call] += t1 - t0;
    ncalls[call]++;
}

void tr_prof_init(void)
{
    const char *e = getenv("PTDC_PROFILE");
    cg_prof_on = e && strcmp(e, "0") != 0 ? CG_TIMED_PROFILE : 0;
}

void tr_prof_step(double seconds)
{
    if (!(cg_prof_on & CG_TIMED_PROFILE))
        return;
    if (tr_step <= WARMUP) { /* the window starts after the warm-up steps */
        memset(acc, 0, sizeof acc);
        memset(ncalls, 0, sizeof ncalls);
        first_step = tr_step + 1;
        return;
    }
    step_s += seconds;
    nsteps++;
}

void tr_prof_report(void)
{
    if (!(cg_prof_on & CG_TIMED_PROFILE))
        return;
    if (nsteps == 0) /* nothing after the warm-up: the memory only */
        step_s = 0, memset(acc, 0, sizeof acc), memset(ncalls, 0, sizeof ncalls), nsteps = 1;
    /* Per step, then the slowest rank's through a max-reduction. */
    int n = CG_PF_N + 3;
    struct rusage ru;
    double rss = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss * 1024.0 : 0;
    float *host = (float *)malloc(sizeof(float) * (size_t)n);
    float *dev = (float *)rt_alloc(sizeof(float) * (size_t)n);
    double other = step_s;
    for (int i = 0; i < CG_PF_N; i++) {
        host[i] = (float)(acc[i] / (double)nsteps);
        other -= acc[i];
    }
    host[CG_PF_N] = (float)(step_s / (double)nsteps);
    host[CG_PF_N + 1] = (float)(other / (double)nsteps);
    host[CG_PF_N + 2] = (float)rss;
    float *mine = (float *)malloc(sizeof(float) * (size_t)n);
    memcpy(mine, host, sizeof(float) * (size_t)n);
    rt_to_device(dev, host, sizeof(float) * (size_t)n);
    rt_allreduce_max(tr_world, dev, n);
    rt_to_host(host, dev, sizeof(float) * (size_t)n);
    if (ROOT) {
        printf("profile: steps %lld..%lld (%ld)\n", (long long)first_step,
               (long long)(first_step + nsteps - 1), nsteps);
        printf("profile: %-22s %8s %12s %12s\n", "call", "calls", "s/step", "max s/step");
        printf("profile: %-22s %8d %12.6f %12.6f\n", "step", 1, mine[CG_PF_N], host[CG_PF_N]);
        for (int i = 0; i < CG_PF_N; i++)
            if (host[i] > 0)
                printf("profile: %-22s %8.1f %12.6f %12.6f\n", names[i],
                       (double)ncalls[i] / (double)nsteps, mine[i], host[i]);
        printf("profile: %-22s %8s %12.6f %12.6f\n", "other", "-", mine[CG_PF_N + 1],
               host[CG_PF_N + 1]);
        printf("profile: peak_rss_bytes %.0f %.0f\n", (double)mine[CG_PF_N + 2],
               (double)host[CG_PF_N + 2]);
        fflush(stdout);
    }
    rt_free(dev);
    free(host);
    free(mine);
}
