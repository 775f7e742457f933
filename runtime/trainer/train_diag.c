/* train_diag.c: --diagnose, a short self-test before training: what every
 * rank measures of its own GEMM rate, each of its groups' all-reduce and its
 * pipeline receive, set beside the other ranks' and the plan's assumption,
 * so that a slow device or link is found before it slows a long run.
 *
 *   GEMM        DIAG_N^3 (rt_matmul, the activations' type), DIAG_GEMM_REPS timed calls
 *               after one warm-up: FLOP/s per rank. The plan's assumption is
 *               plan.json's cluster.peak_flops (next to the program); only
 *               rank 0 reads it, as text (the one number, no JSON parser in
 *               the trainer).
 *   all-reduce  DIAG_BYTES of fp32 over each distinct group of the mesh
 *               (g_comm) and the world: bus bandwidth 2 (n - 1) / n x bytes /
 *               time, the figure NCCL's tests print.
 *   pipeline    DIAG_BYTES from each stage to the next, one pair of stages at
 *               a time (the world synchronised before each), timed on the
 *               receiver.
 * A rank falls short when its figure is below the median of the ranks
 * measuring the same thing divided by PTDC_HEALTH_SLOW (default 1.2, the
 * straggler threshold, train_health.c). plan.json holds no link
 * bandwidths (the cluster's are in the planner's hardware table), so links
 * are compared with the other ranks' only.
 * Every rank runs the same collectives in the same order; the calls go
 * around trainer.h's timing hooks (parenthesised names): they are not part
 * of a step. */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef PTDC_CUDA
enum { DIAG_N = 4096, DIAG_FLOATS = 16 << 20 }; /* 64 MiB */
#else
enum { DIAG_N = 256, DIAG_FLOATS = 1 << 20 };   /* 4 MiB; a GEMM ~0.3 ms on one core */
#endif
/* DIAG_GEMM_REPS: short GEMMs, many (a rank descheduled once must not look slow) */
enum { DIAG_REPS = 5, DIAG_GEMM_REPS = 20, DIAG_NG = 9, DIAG_REC = DIAG_NG + 2, DIAG_TAG = 30000 };
/* record: [0] GEMM FLOP/s, [1 + g] bus bandwidth of group g (g < DIAG_NG - 1
 * the masks, DIAG_NG - 1 the world; 0: none), [DIAG_NG + 1] receive bandwidth from
 * the previous stage (0: none) */

/* Test only: PTDC_HEALTH_TEST_SLOW_RANK's GEMMs made TEST_SLOWER times
 * slower by sleeping after each for (TEST_SLOWER - 1) times its own
 * duration: a slow device whatever the host's load (a fixed sleep would
 * be a smaller factor on a loaded host, where GEMMs take longer). */
enum { TEST_SLOWER = 60 };
static void test_sleep(double gemm_s)
{
    const char *r = getenv("PTDC_HEALTH_TEST_SLOW_RANK");
    if (!r || atoi(r) != tr_world_rank)
        return;
    double s = (TEST_SLOWER - 1) * gemm_s;
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)(fmod(s, 1) * 1e9);
    nanosleep(&ts, NULL);
}

static double gemm_rate(void)
{
    size_t bytes = sizeof(rt_act) * (size_t)DIAG_N * DIAG_N;
    rt_act *a = (rt_act *)rt_alloc(bytes), *b = (rt_act *)rt_alloc(bytes),
           *c = (rt_act *)rt_alloc(bytes);
    (rt_matmul)(c, a, b, DIAG_N, DIAG_N, DIAG_N, false, false, false);
    double t0 = rt_time();
    for (int i = 0; i < DIAG_GEMM_REPS; i++) {
        double t1 = rt_time();
        (rt_matmul)(c, a, b, DIAG_N, DIAG_N, DIAG_N, false, false, false);
        test_sleep(rt_time() - t1);
    }
    double t = rt_time() - t0;
    rt_free(a);
    rt_free(b);
    rt_free(c);
    return 2.0 * DIAG_N * (double)DIAG_N * DIAG_N * DIAG_GEMM_REPS / t;
}

/* The mesh axes of more than one rank in mask m: groups of masks with the
 * same such axes have the same members (measured once, named by them). */
static int live_axes(int m)
{
    int live = 0;
    for (int a = 0; a < CG_NAXES; a++)
        if ((m >> a & 1) && tr_mesh_size(a) > 1)
            live |= 1 << a;
    return live;
}

static double allreduce_bw(RtComm *c, float *buf)
{
    int n = rt_comm_size(c);
    (rt_allreduce)(c, buf, DIAG_FLOATS, RT_F32);
    double t0 = rt_time();
    for (int i = 0; i < DIAG_REPS; i++)
        (rt_allreduce)(c, buf, DIAG_FLOATS, RT_F32);
    double t = rt_time() - t0;
    return 2.0 * (n - 1) / n * 4.0 * DIAG_FLOATS * DIAG_REPS / t;
}

/* The plan's peak FLOP/s per device, and the device's name, from plan.json. */
static double plan_peak(const char *argv0, char *gpu, size_t n)
{
    char path[4096];
    const char *slash = strrchr(argv0, '/');
    snprintf(path, sizeof path, "%.*splan.json", slash ? (int)(slash - argv0 + 1) : 0, argv0);
    snprintf(gpu, n, "?");
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    static char text[1 << 16]; /* "cluster" comes early in plan.json */
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = 0;
    const char *g = strstr(text, "\"gpu\": \"");
    if (g)
        snprintf(gpu, n, "%.*s", (int)strcspn(g + 8, "\""), g + 8);
    const char *p = strstr(text, "\"peak_flops\": ");
    return p ? strtod(p + 14, NULL) : 0;
}

static int diag_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Rank 0: one metric (column k of the records; ranks with 0 do not
 * measure it): its median and the ranks below median / slow. */
static int report(const double *all, int k, const char *what, double unit, const char *units,
                  double slow)
{
    double v[CG_WORLD];
    int n = 0, bad = 0;
    for (int r = 0; r < CG_WORLD; r++)
        if (all[r * DIAG_REC + k] > 0)
            v[n++] = all[r * DIAG_REC + k];
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, diag_cmp_double);
    double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    printf("diagnose: %s: median %.2f %s over %d ranks (%.2f-%.2f)\n", what, med / unit, units,
           n, v[0] / unit, v[n - 1] / unit);
    for (int r = 0; r < CG_WORLD; r++) {
        double x = all[r * DIAG_REC + k];
        if (x > 0 && x * slow < med) {
            printf("diagnose: falls short: rank %d (pp %d, mesh index %d): %s %.2f %s against a "
                   "median of %.2f (%.2fx slower; threshold PTDC_HEALTH_SLOW %.2fx)\n",
                   r, r / CG_DEVICES, r % CG_DEVICES, what, x / unit, units, med / unit, med / x,
                   slow);
            bad++;
        }
    }
    return bad;
}

void tr_diagnose(const char *argv0)
{
    const char *e = getenv("PTDC_HEALTH_SLOW");
    double slow = e && atof(e) >= 1 ? atof(e) : 1.2;
    double rec[DIAG_REC];
    memset(rec, 0, sizeof rec);
    rec[0] = gemm_rate();
    float *buf = (float *)rt_alloc(sizeof(float) * (size_t)DIAG_FLOATS);
    for (int m = 1; m < DIAG_NG; m++) {
        RtComm *c = m < DIAG_NG - 1 ? g_comm[m] : tr_world;
        bool seen = !c || rt_comm_size(c) < 2 || (m < DIAG_NG - 1 && live_axes(m) != m);
        for (int j = 1; j < m && !seen; j++) /* (the world may be a mesh group) */
            seen = g_comm[j] == c && live_axes(j) == j;
        if (!seen)
            rec[m] = allreduce_bw(c, buf);
    }
    for (int p = 0; p + 1 < CG_PP; p++) {
        (rt_allreduce)(tr_world, buf, 1, RT_F32); /* the pair starts together */
        if (tr_pp_rank == p) {
            RtReq *req = NULL;
            for (int i = 0; i <= DIAG_REPS; i++)
                cg_send(&req, buf, DIAG_FLOATS, RT_F32, p + 1, DIAG_TAG);
            (cg_wait)(&req);
        } else if (tr_pp_rank == p + 1) {
            (cg_recv)(buf, DIAG_FLOATS, RT_F32, p, DIAG_TAG); /* warm-up */
            double t0 = rt_time();
            for (int i = 0; i < DIAG_REPS; i++)
                (cg_recv)(buf, DIAG_FLOATS, RT_F32, p, DIAG_TAG);
            rec[DIAG_NG + 1] = 4.0 * DIAG_FLOATS * DIAG_REPS / (rt_time() - t0);
        }
    }
    rt_free(buf);
    double *all = (double *)malloc(sizeof(double) * DIAG_REC * CG_WORLD);
    if (!all)
        rt_fatal("train: out of host memory for --diagnose");
    rt_host_allgather(tr_world, all, rec, sizeof rec);
    if (ROOT) {
        char gpu[64], what[128];
        double peak = plan_peak(argv0, gpu, sizeof gpu);
        snprintf(what, sizeof what, "GEMM %dx%dx%d", DIAG_N, DIAG_N, DIAG_N);
        int bad = report(all, 0, what, 1e9, "GFLOP/s", slow);
        if (peak > 0) {
            double v[CG_WORLD];
            for (int r = 0; r < CG_WORLD; r++)
                v[r] = all[r * DIAG_REC];
            qsort(v, CG_WORLD, sizeof *v, diag_cmp_double);
            printf("diagnose: the plan assumed %s at %.1f TFLOP/s peak (plan.json); the median "
                   "rank reaches %.3f%% of it\n", gpu, peak / 1e12,
                   100 * v[CG_WORLD / 2] / peak);
        }
        for (int m = 1; m < DIAG_NG; m++) {
            if (m < DIAG_NG - 1) {
                const char *axis[3] = {CG_AXIS0, CG_AXIS1, CG_AXIS2};
                int k = snprintf(what, sizeof what, "all-reduce %d MiB, bus bandwidth, %s groups",
                                 (int)(4.0 * DIAG_FLOATS / (1 << 20)), CG_PP > 1 ? "stage" : "mesh");
                for (int a = 0; a < CG_NAXES && k > 0 && (size_t)k < sizeof what; a++)
                    if (m >> a & 1)
                        k += snprintf(what + k, sizeof what - (size_t)k, " %s", axis[a]);
            } else {
                snprintf(what, sizeof what, "all-reduce %d MiB, bus bandwidth, the world",
                         (int)(4.0 * DIAG_FLOATS / (1 << 20)));
            }
            bad += report(all, m, what, 1e9, "GB/s", slow);
        }
        snprintf(what, sizeof what, "pipeline receive %d MiB from the previous stage",
                 (int)(4.0 * DIAG_FLOATS / (1 << 20)));
        bad += report(all, DIAG_NG + 1, what, 1e9, "GB/s", slow);
        printf("diagnose: %d figure(s) fall short; link bandwidths are compared between ranks "
               "only (plan.json does not record the ones the plan assumed)\n", bad);
        fflush(stdout);
    }
    free(all);
}
