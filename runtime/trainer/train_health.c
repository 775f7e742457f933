/* train_health.c: stragglers and slow pipeline links, found from what every
 * rank measured rather than guessed from a slow step (PTDC_HEALTH).
 *
 * Every rank splits its step time into waiting (the calls that wait for
 * other ranks: collectives, cg_recv, cg_wait, rt_wait, timed through
 * trainer.h's CG_PROF_WAIT and cg_prof_comm hooks) and computing (the rest),
 * and keeps the time its pipeline receives waited per peer pipeline rank.
 * Every PTDC_HEALTH_EVERY steps (default 20) and at the end, one small
 * rt_host_allgather brings every rank's figures to rank 0, which prints
 *   health: steps A-B: step X ms, compute Y ms, wait Z ms (medians over N ranks); ...
 * and one line per rank it finds slow:
 *   straggler: rank R (pp P, dp D) computes X ms per step against a median of
 *              Y ms (Q.QQx) over steps A-B (...)
 *   slow link?: rank R (...) waits X ms per step receiving from rank S (pp P)
 *               against a median of Y ms for the same transfer on ...
 * What can be compared: ranks of one pipeline stage run the same layers on
 * the same shapes, so their compute times should agree; a rank is compared
 * with the median of its stage's other ranks (not with a median including
 * itself: with two ranks a stage's median would be half the straggler's own
 * time). A stage of one rank (no mesh) has no peer running the same
 * layers: the stages' work differs by the plan (the head and the loss on
 * the last), so comparing them would name the plan's imbalance, not a slow
 * rank; the line says so and names nobody.
 * Threshold PTDC_HEALTH_SLOW (default 1.2): ranks of a stage do identical
 * work, so on hosts whose cores or GPUs are the ranks' own, a healthy rank's
 * compute stays close to its peers'; a rank a fifth slower already costs
 * the whole job a fifth, since every collective and receive waits for the
 * slowest rank. Oversubscribed or shared hosts need more: on the 2-core test
 * VM (4 ranks, other jobs, load 5.5), healthy ranks' median compute
 * measured up to 2.72x their stage peer's, so tests/fault/fault_health.sh
 * sets 6.
 * Each rank's compute and receive waits are medians over the window's
 * steps (a rank descheduled for one step is not slow; a straggler is slow
 * in most steps); the step and wait times printed are means.
 * Links: a pipeline receive from a peer stage is comparable with the same
 * receive of the stage's other ranks (each from its own sender): one that
 * waits more than PTDC_HEALTH_SLOW times their median, by more than a tenth
 * of the median step, while its sender is no straggler, names the link
 * between the two. Collectives cannot be attributed this way: a
 * collective's wait is the time until its slowest member arrives, so it
 * measures the others' lateness and the group's slowest link together;
 * stragglers are named, but a slow link inside a collective group is not
 * (a PTDC_TRACE timeline of the group shows it).
 *
 * Cost: two clock reads (clock_gettime, no system call) per waiting call and
 * one rt_host_allgather of a few doubles per rank every PTDC_HEALTH_EVERY
 * steps (measured in docs/runtime.md). On CUDA rt_time synchronises the
 * streams, which would serialise communication with compute, so health is
 * off there unless PTDC_HEALTH=1 asks for it; on CPU it is on unless
 * PTDC_HEALTH=0.
 *
 * Test only: PTDC_HEALTH_TEST_SLOW_RANK=R makes world rank R sleep
 * PTDC_HEALTH_TEST_SLOW_MS milliseconds (default 50) at the start of every
 * step: a deterministic straggler for tests/fault/fault_health.sh. */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* steps, step s, wait s (sums), first step, then medians over the window's
 * steps: receive wait per pp peer, compute. Medians, because a rank
 * descheduled for one step (another job, a page fault storm) is not slow:
 * a straggler or a slow link is slow in most steps. */
enum { REC = 5 + CG_PP, MEDIAN = 4 + CG_PP };

static bool on;
static long every = 20;
static double slow = 1.2;
/* a pipeline receive's excess wait, as a share of the median step, below
 * which it is scheduling noise rather than a link (PTDC_HEALTH_LINK) */
static double link_share = 0.1;
static int test_rank = -1;
static double test_ms = 50;
static long steps_run;   /* steps this process ran (the first is start-up: not counted) */
static double rec[REC];  /* the window's sums */
static double step_wait; /* this step's waits, added to rec after the step */
static double step_recv[CG_PP];
static double *win;      /* the window's compute time per step (every entries) */
static double *win_recv; /* its receive waits per step and peer (every x CG_PP) */

static bool waits(int call)
{
    switch (call) {
    case CG_PF_rt_allreduce: case CG_PF_rt_reduce_scatter: case CG_PF_rt_allgather:
    case CG_PF_rt_alltoall: case CG_PF_rt_allgather_dim: case CG_PF_rt_reduce_scatter_dim:
    case CG_PF_rt_alltoall_dim: case CG_PF_cg_recv: case CG_PF_cg_wait: case CG_PF_rt_wait:
        return true;
    default:
        return false;
    }
}

static double env_num(const char *name, double dflt, double lo)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return dflt;
    char *end;
    double v = strtod(e, &end);
    if (*end || !(v >= lo) || !isfinite(v))
        rt_fatal("%s=%s: expected a number >= %g", name, e, lo);
    return v;
}

void tr_health_init(void)
{
    const char *e = getenv("PTDC_HEALTH");
#ifdef PTDC_CUDA
    on = e && *e && strcmp(e, "0") != 0; /* rt_time synchronises: off unless asked */
#else
    on = !(e && !strcmp(e, "0"));
#endif
    on = on && CG_WORLD > 1; /* one rank: nobody to compare it with */
    every = (long)env_num("PTDC_HEALTH_EVERY", 20, 1);
    slow = env_num("PTDC_HEALTH_SLOW", 1.2, 1);
    link_share = env_num("PTDC_HEALTH_LINK", 0.1, 0);
    test_rank = (int)env_num("PTDC_HEALTH_TEST_SLOW_RANK", -1, -1);
    test_ms = env_num("PTDC_HEALTH_TEST_SLOW_MS", 50, 0);
    if (!on)
        return;
    cg_prof_on |= CG_TIMED_HEALTH;
    win = (double *)malloc(sizeof(double) * (size_t)every);
    win_recv = (double *)malloc(sizeof(double) * (size_t)every * CG_PP);
    if (!win || !win_recv)
        rt_fatal("train: out of host memory for PTDC_HEALTH_EVERY=%ld steps", every);
}

void tr_health_wait(int call, double s)
{
    if (waits(call))
        step_wait += s;
}

void tr_health_recv(int pp_peer, double s)
{
    if (pp_peer >= 0 && pp_peer < CG_PP)
        step_recv[pp_peer] += s;
}

void tr_health_step_begin(void)
{
    step_wait = 0;
    memset(step_recv, 0, sizeof step_recv);
    if (test_rank == tr_world_rank && test_ms > 0) {
        struct timespec ts;
        ts.tv_sec = (time_t)(test_ms / 1000);
        ts.tv_nsec = (long)(fmod(test_ms, 1000) * 1e6);
        nanosleep(&ts, NULL);
    }
}

/* "rank 5 (pp 1, dp 2)": the pipeline rank and the mesh axes of more than one rank. */
static void name_rank(char *out, size_t n, int r)
{
    int mi = r % CG_DEVICES, c[3];
    c[0] = mi / (CG_MESH1 * CG_MESH2);
    c[1] = mi / CG_MESH2 % CG_MESH1;
    c[2] = mi % CG_MESH2;
    const char *axis[3] = {CG_AXIS0, CG_AXIS1, CG_AXIS2};
    int k = snprintf(out, n, "rank %d (pp %d", r, r / CG_DEVICES);
    for (int a = 0; a < CG_NAXES; a++)
        if (tr_mesh_size(a) > 1 && k > 0 && (size_t)k < n)
            k += snprintf(out + k, n - (size_t)k, ", %s %d", axis[a], c[a]);
    if (k > 0 && (size_t)k < n)
        snprintf(out + k, n - (size_t)k, ")");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (n > 0); v is reordered. */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Rank 0: the window's lines from every rank's record (all[r * REC ...]). */
static void analyse(const double *all)
{
    int W = CG_WORLD;
    double *comp = (double *)malloc(sizeof(double) * (size_t)W);
    double *tmp = (double *)malloc(sizeof(double) * (size_t)W);
    bool *strag = (bool *)calloc((size_t)W, sizeof(bool));
    if (!comp || !tmp || !strag)
        rt_fatal("train: out of host memory for the health report");
    double n = all[0];
    long first = (long)all[3], last = first + (long)n - 1;
    for (int r = 0; r < W; r++)
        comp[r] = all[r * REC + MEDIAN];
    for (int r = 0; r < W; r++)
        tmp[r] = all[r * REC + 1] / n;
    double step_med = median(tmp, W);
    for (int r = 0; r < W; r++)
        tmp[r] = all[r * REC + 2] / n;
    double wait_med = median(tmp, W);
    memcpy(tmp, comp, sizeof(double) * (size_t)W);
    double comp_med = median(tmp, W);
    printf("health: steps %ld-%ld: step %.1f ms, compute %.1f ms, wait %.1f ms (medians over %d "
           "ranks)\n", first, last, step_med * 1e3, comp_med * 1e3, wait_med * 1e3, W);
    int named = 0, worst = -1;
    double worst_ratio = 0;
    char who[96], peer[96];
    for (int r = 0; r < W; r++) {
        int k = 0;
        for (int q = 0; q < W; q++) /* the ranks running the same layers */
            if (q != r && q / CG_DEVICES == r / CG_DEVICES)
                tmp[k++] = comp[q];
        if (k == 0)
            continue;
        double ref = median(tmp, k);
        if (ref > 0 && comp[r] / ref > worst_ratio)
            worst_ratio = comp[r] / ref, worst = r;
        if (comp[r] > slow * ref) {
            strag[r] = true;
            named++;
            name_rank(who, sizeof who, r);
            printf("straggler: %s computes %.1f ms per step against a median of %.1f ms (%.2fx) "
                   "over steps %ld-%ld (%s; threshold PTDC_HEALTH_SLOW %.2fx)\n", who,
                   comp[r] * 1e3, ref * 1e3, comp[r] / ref, first, last,
                   "its pipeline stage's other ranks", slow);
        }
    }
    /* Pipeline receives: rank r's from stage p against its stage's others'. */
    for (int r = 0; r < W && CG_DEVICES > 1; r++)
        for (int p = 0; p < CG_PP; p++) {
            int s = p * CG_DEVICES + r % CG_DEVICES, k = 0;
            double w = all[r * REC + 4 + p];
            if (p == r / CG_DEVICES || w <= 0 || strag[s] || strag[r])
                continue;
            for (int q = r / CG_DEVICES * CG_DEVICES; q < (r / CG_DEVICES + 1) * CG_DEVICES; q++)
                if (q != r)
                    tmp[k++] = all[q * REC + 4 + p];
            double ref = median(tmp, k);
            if (w > slow * ref && w - ref > link_share * step_med) {
                named++;
                name_rank(who, sizeof who, r);
                name_rank(peer, sizeof peer, s);
                printf("slow link?: %s waits %.1f ms per step receiving from %s against a median "
                       "of %.1f ms for the same transfer on its stage's other ranks, over steps "
                       "%ld-%ld; the sender is no straggler, so the link between them (or its "
                       "traffic) is suspect\n", who, w * 1e3, peer, ref * 1e3, first, last);
            }
        }
    if (CG_DEVICES == 1)
        printf("health: steps %ld-%ld: one rank per pipeline stage, so no rank runs another's "
               "layers to compare with; no straggler named\n", first, last);
    else if (!named)
        printf("health: steps %ld-%ld: no straggler%s (largest compute ratio %.2fx, rank %d; "
               "threshold PTDC_HEALTH_SLOW %.2fx)\n", first, last,
               CG_PP > 1 ? ", no slow pipeline link" : "", worst_ratio, worst, slow);
    fflush(stdout);
    free(comp);
    free(tmp);
    free(strag);
}

/* Collective: gather the window's sums, report, start a new window. */
static void window_end(void)
{
    int n = (int)rec[0];
    rec[MEDIAN] = median(win, n);
    for (int p = 0; p < CG_PP; p++) {
        for (int i = 0; i < n; i++) /* (win is free now: median reordered it) */
            win[i] = win_recv[i * CG_PP + p];
        rec[4 + p] = median(win, n);
    }
    double *all = (double *)malloc(sizeof(double) * REC * (size_t)CG_WORLD);
    if (!all)
        rt_fatal("train: out of host memory for the health report");
    rt_host_allgather(tr_world, all, rec, sizeof rec);
    if (ROOT)
        analyse(all);
    free(all);
    memset(rec, 0, sizeof rec);
}

void tr_health_step(double seconds)
{
    if (!on)
        return;
    if (++steps_run == 1) /* start-up: first touch, library plans */
        return;
    if (rec[0] == 0)
        rec[3] = (double)tr_step;
    win[(long)rec[0]] = seconds - step_wait;
    rec[0] += 1;
    rec[1] += seconds;
    rec[2] += step_wait;
    for (int p = 0; p < CG_PP; p++)
        win_recv[(long)(rec[0] - 1) * CG_PP + p] = step_recv[p];
    if (tr_step % every == 0)
        window_end();
}

void tr_health_report(void)
{
    if (on && rec[0] > 0) /* every rank ran the same steps: all or none gather */
        window_end();
}
