/* test_schedule.c: the pipeline schedule is well formed (every micro-batch of
 * every chunk goes forward once, then backward once), the slot counts and
 * activation peaks computed from its prefix equal those of the whole
 * schedule, and 1F1B holds min(m, pp - r) micro-batches on rank r. The
 * event simulation of a step (pass_schedule_sim) against timelines worked
 * out by hand, and against the classic (m + p - 1) t of equal stages; with
 * ranks sharing cores (pass_schedule_sim_shared): by hand, equal to the
 * plain one when nothing is gained or everyone is always busy, and never
 * below the planner's bound (pass_share_bound). */
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
/* The schedule of v chunks per rank without a split backward. */
#define S(v) ((v) > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B)
#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "check failed: %s: ", #cond);                                 \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

static void test_sim(void)
{
    /* One rank: m x (f + b). */
    double f1[] = {1}, b1[] = {2}, z[16] = {0};
    CHECK(fabs(pass_schedule_sim(S(1), 1, 1, 3, f1, b1, NULL, z, z, NULL) - 9) < 1e-12, "one rank");
    /* pp 2, m 2, equal stages: r0 F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9];
     * r1 F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]. */
    double f2[] = {1, 1}, b2[] = {2, 2}, fin[2];
    CHECK(fabs(pass_schedule_sim(S(1), 2, 1, 2, f2, b2, NULL, z, z, fin) - 9) < 1e-12, "pp 2 equal");
    CHECK(fabs(fin[0] - 9) < 1e-12 && fabs(fin[1] - 7) < 1e-12, "finish %g %g", fin[0], fin[1]);
    /* The busiest rank first: r0 F0 [0,2] F1 [2,4] B0 [4,6] B1 [6,8]; r1 F0
     * [2,2.5] B0 [2.5,3] F1 [4,4.5] B1 [4.5,5]. 8, not 1F1B's formula 9. */
    double f3[] = {2, 0.5}, b3[] = {2, 0.5};
    CHECK(fabs(pass_schedule_sim(S(1), 2, 1, 2, f3, b3, NULL, z, z, NULL) - 8) < 1e-12, "pp 2 unequal");
    /* Transfers of 0.25 both ways on the same: r1 F0 [2.25,2.75] B0
     * [2.75,3.25]; r0 B0 waits to 3.5 but is busy to 4: [4.25,6.25] (the
     * receiver copies after both are there); r1 F1 [4.25,4.75] B1
     * [4.75,5.25]; r0 B1 [6.25 + 0.25, 8.5]. */
    double x3[] = {0, 0.25};
    CHECK(fabs(pass_schedule_sim(S(1), 2, 1, 2, f3, b3, NULL, x3, x3, NULL) - 8.5) < 1e-12, "pp 2 transfers");
    /* Equal stages, 1F1B: (m + p - 1) (f + b). */
    for (int pp = 1; pp <= 6; pp++)
        for (int m = 1; m <= 9; m++) {
            double f[8], b[8];
            for (int i = 0; i < pp; i++)
                f[i] = 1, b[i] = 2;
            double t = pass_schedule_sim(S(1), pp, 1, m, f, b, NULL, z, z, NULL);
            CHECK(fabs(t - (m + pp - 1) * 3.0) < 1e-9, "pp %d m %d: %g", pp, m, t);
        }
    /* Interleaved, equal chunks of t / v: Megatron's (m + (p - 1) / v) t. */
    for (int pp = 2; pp <= 4; pp++)
        for (int v = 2; v <= 3; v++)
            for (int k = 1; k <= 3; k++) {
                int m = k * pp, ns = pp * v;
                double f[16], b[16], zz[16] = {0};
                for (int i = 0; i < ns; i++)
                    f[i] = 1.0 / v, b[i] = 2.0 / v;
                double t = pass_schedule_sim(S(v), pp, v, m, f, b, NULL, zz, zz, NULL);
                CHECK(fabs(t - (m + (pp - 1.0) / v) * 3.0) < 1e-9, "interleaved pp %d v %d m %d: %g",
                      pp, v, m, t);
            }
}

/* The same schedule executed by a second, plain implementation: repeatedly
 * run any rank whose next operation has its input, until all are done. */
static double reference_sim(PlanSchedule sc, int pp, int v, int m, const double *f, const double *b,
                            const double *w, const double *xf, const double *xb)
{
    int ns = pp * v, nops = plan_schedule_nops(sc, v, m);
    double *df = calloc((size_t)ns * m, sizeof *df), *db = calloc((size_t)ns * m, sizeof *db);
    char *hf = calloc((size_t)ns * m, 1), *hb = calloc((size_t)ns * m, 1);
    int k[64] = {0};
    double t[64] = {0}, end = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < pp; r++) {
            if (k[r] == nops)
                continue;
            PlanSchedOp op = plan_schedule_op(sc, pp, v, m, r, k[r]);
            int st = op.chunk * pp + r, i = st * m + op.mb;
            if (op.bwd == PLAN_OP_W && hb[i]) {
                t[r] += w[st];
            } else if (op.bwd == PLAN_OP_W) {
                continue;
            } else if (!op.bwd && (st == 0 || hf[i - m])) {
                t[r] = (st ? fmax(t[r], df[i - m]) + xf[st] : t[r]) + f[st];
                df[i] = t[r], hf[i] = 1;
            } else if (op.bwd && hf[i] && (st == ns - 1 || hb[i + m])) {
                t[r] = (st < ns - 1 ? fmax(t[r], db[i + m]) + xb[st + 1] : t[r]) + b[st];
                db[i] = t[r], hb[i] = 1;
            } else {
                continue;
            }
            k[r]++;
            moved = true;
        }
    }
    for (int r = 0; r < pp; r++)
        end = fmax(end, t[r]);
    free(df), free(db), free(hf), free(hb);
    return end;
}

/* Long schedules with uneven stages and transfers: the planner's fast
 * simulation equals the plain one (v = 0: ZB-H1, its backward split). */
static void test_sim_long(void)
{
    unsigned seed = 1;
    for (int pp = 2; pp <= 6; pp++)
        for (int vv = 0; vv <= 2; vv++)
            for (int trial = 0; trial < 4; trial++) {
                int v = vv ? vv : 1, m = v == 1 ? 6 * pp + 11 + trial * 7 : pp * (7 + trial * 3);
                PlanSchedule sc = vv ? S(v) : PLAN_SCHED_ZB_H1;
                if (!vv && trial == 3)
                    m = pp - 1; /* fewer micro-batches than ranks */
                double f[16], b[16], w[16], xf[16], xb[16];
                for (int i = 0; i < pp * v; i++) {
                    seed = seed * 1103515245u + 12345u;
                    f[i] = 1 + (seed >> 16) % 100 / 50.0;
                    b[i] = 2 * f[i] + (seed >> 8) % 7 / 10.0;
                    w[i] = b[i] * ((seed >> 12) % 5 + 2) / 10.0;
                    xf[i] = xb[i] = (seed >> 4) % 5 / 20.0;
                }
                double got = pass_schedule_sim(sc, pp, v, m, f, b, w, xf, xb, NULL);
                double want = reference_sim(sc, pp, v, m, f, b, w, xf, xb);
                /* The same sums in the same order, whatever order the
                 * simulation visits the operations in: the same bits (the
                 * planner's choices between plans depend on them). */
                CHECK(got == want, "%s pp %d v %d m %d: %.17g, whole run %.17g", plan_schedule_name(sc), pp, v, m,
                      got, want);
                PassShare none = {pp, 1, 1, 1.0 / pp, 0};
                got = pass_schedule_sim_shared(sc, pp, v, m, f, b, w, xf, xb, NULL, &none);
                CHECK(fabs(got - want) < 1e-9 * want, "%s pp %d m %d shared, no gain: %.9g, whole run %.9g",
                      plan_schedule_name(sc), pp, m, got, want);
            }
}

/* ZB-H1 against timelines by hand and the paper's bubble. */
static void test_zb_h1(void)
{
    double z[16] = {0};
    /* pp 2, m 2, F 1, B 0.5, W 0.5. Rank 1 defers one W: F0 [1,2] B0
     * [2,2.5] F1 [2.5,3.5] B1 [3.5,4] W0 [4,4.5] W1 [4.5,5]; rank 0: F0
     * [0,1] F1 [1,2] B0 [2.5,3] W0 [3,3.5] B1 [4,4.5] W1 [4.5,5]. 1F1B with
     * B + W as one backward: 6. */
    double f[] = {1, 1}, b[] = {0.5, 0.5}, w[] = {0.5, 0.5}, bw[] = {1, 1}, fin[2];
    double t = pass_schedule_sim(PLAN_SCHED_ZB_H1, 2, 1, 2, f, b, w, z, z, fin);
    CHECK(fabs(t - 5) < 1e-12 && fabs(fin[0] - 5) < 1e-12 && fabs(fin[1] - 5) < 1e-12, "zb-h1 pp 2 m 2: %g", t);
    CHECK(fabs(pass_schedule_sim(PLAN_SCHED_1F1B, 2, 1, 2, f, bw, NULL, z, z, NULL) - 6) < 1e-12, "1f1b pp 2 m 2");
    /* Equal stages with T_F = T_B = T_W (the paper's section 3.1): 1F1B's
     * bubble (p - 1)(T_F + T_B + T_W) shrinks to (p - 1)(T_F + T_B - T_W),
     * once the pipeline fills (m >= p). */
    for (int pp = 2; pp <= 8; pp++)
        for (int m = pp; m <= 3 * pp; m += pp / 2 + 1) {
            double one[16];
            for (int i = 0; i < pp; i++)
                one[i] = 1;
            double zb = pass_schedule_sim(PLAN_SCHED_ZB_H1, pp, 1, m, one, one, one, z, z, NULL);
            CHECK(fabs(zb - (3.0 * m + (pp - 1))) < 1e-9, "zb-h1 pp %d m %d: %g, want %d", pp, m, zb,
                  3 * m + pp - 1);
        }
}

/* Ranks sharing cores. Two pipeline ranks of one process each on one core
 * (rates at half a core, c = 0.5). */
static void test_sim_shared(void)
{
    double f[] = {1, 1}, b[] = {1, 1}, z[16] = {0};
    PassShare ps = {2, 1, 1, 0.5, 1.0};
    /* m 1: nothing overlaps, each operation alone at a whole core (twice
     * its rate): F0 [0, .5] F1 [.5, 1] B1 [1, 1.5] B0 [1.5, 2]. */
    double fin[2];
    double t = pass_schedule_sim_shared(S(1), 2, 1, 1, f, b, NULL, z, z, fin, &ps);
    CHECK(fabs(t - 2) < 1e-12 && fabs(fin[1] - 1.5) < 1e-12, "shared, m 1: %g (rank 1 %g), want 2", t, fin[1]);
    CHECK(fabs(pass_schedule_sim(S(1), 2, 1, 1, f, b, NULL, z, z, NULL) - 4) < 1e-12, "time slices, m 1");
    /* Half the gain: alone at 1 + 0.5 (2 - 1) = 1.5 times the rate. */
    PassShare half = ps;
    half.gain = 0.5;
    t = pass_schedule_sim_shared(S(1), 2, 1, 1, f, b, NULL, z, z, NULL, &half);
    CHECK(fabs(t - 4 / 1.5) < 1e-12, "shared half gain, m 1: %g, want %g", t, 4 / 1.5);
    /* m 2: r0 F0 alone [0, .5]; r0 F1 and r1 F0 together (rate 1) [.5, 1.5];
     * r1 B0 alone [1.5, 2] (r0 waits for it); r0 B0 and r1 F1 [2, 3]; r1 B1
     * alone [3, 3.5]; r0 B1 alone [3.5, 4]. Time slices: 6. */
    t = pass_schedule_sim_shared(S(1), 2, 1, 2, f, b, NULL, z, z, NULL, &ps);
    CHECK(fabs(t - 4) < 1e-12, "shared, m 2: %g, want 4", t);
    /* No gain, or a group of one: the plain simulation. */
    unsigned seed = 7;
    for (int pp = 2; pp <= 5; pp++)
        for (int v = 1; v <= 2; v++) {
            int m = v == 1 ? 3 * pp + 1 : 2 * pp;
            double F[16], B[16], X[16];
            for (int i = 0; i < pp * v; i++) {
                seed = seed * 1103515245u + 12345u;
                F[i] = 1 + (seed >> 16) % 100 / 50.0;
                B[i] = 2 * F[i] + (seed >> 8) % 7 / 10.0;
                X[i] = (seed >> 4) % 5 / 20.0;
            }
            double plain = pass_schedule_sim(S(v), pp, v, m, F, B, NULL, X, X, NULL);
            PassShare none = {pp, 1, 1, 1.0 / pp, 0};
            double got = pass_schedule_sim_shared(S(v), pp, v, m, F, B, NULL, X, X, NULL, &none);
            CHECK(fabs(got - plain) < 1e-9 * plain, "pp %d v %d: gain 0 %.9g, plain %.9g", pp, v, got, plain);
            PassShare full = {pp, 1, 1, 1.0 / pp, 1};
            got = pass_schedule_sim_shared(S(v), pp, v, m, F, B, NULL, X, X, NULL, &full);
            double tsum = 0, tmax = 0, rank[16] = {0};
            for (int i = 0; i < pp * v; i++)
                rank[i % pp] += F[i] + B[i], tsum += F[i] + B[i];
            for (int r = 0; r < pp; r++)
                tmax = fmax(tmax, rank[r]);
            double lb = pass_share_bound(&full, pp, tsum, tmax, m);
            CHECK(got <= plain + 1e-9 && got >= lb - 1e-9, "pp %d v %d: shared %.9g, plain %.9g, bound %.9g", pp,
                  v, got, plain, lb);
        }
}

/* Which pipeline ranks share a node's cores (pass_share). */
static void test_share_groups(void)
{
    PassCluster cl;
    memset(&cl, 0, sizeof cl);
    cl.gpu.kind = PASS_DEV_CPU;
    cl.gpu.cores = 2;
    cl.gpu.core_share = 1;
    cl.gpus_per_node = 4; /* 4 ranks on one 2-core node */
    PassShare sh;
    CHECK(pass_share(&cl, 2, 2, &sh) && sh.group == 2 && sh.procs == 2 && sh.c == 0.5, "pp2 x dp2: group %d",
          sh.group);
    CHECK(pass_share(&cl, 4, 1, &sh) && sh.group == 4 && sh.procs == 1, "pp4: group %d", sh.group);
    CHECK(!pass_share(&cl, 1, 4, &sh), "dp4: no pipeline, nothing to share");
    cl.gpus_per_node = 2; /* 8 ranks on 4 nodes: a stage of 2 fills a node */
    CHECK(!pass_share(&cl, 4, 2, &sh), "a stage per node of as many ranks as cores: no sharing");
    cl.gpu.cores = 1;
    CHECK(!pass_share(&cl, 4, 2, &sh), "a stage per node: its ranks share, but not with another stage's");
    cl.gpu.cores = 2, cl.gpus_per_node = 4; /* 8 ranks on 2 nodes, pp 4 of 2 */
    CHECK(pass_share(&cl, 4, 2, &sh) && sh.group == 2, "two stages per node: group %d", sh.group);
    cl.gpu.core_share = 0;
    CHECK(!pass_share(&cl, 4, 2, &sh), "nothing gained: time slices");
    cl.gpu.core_share = 1, cl.gpu.kind = PASS_DEV_GPU;
    CHECK(!pass_share(&cl, 4, 2, &sh), "GPUs do not share");
}

int main(void)
{
    int cases = 0;
    test_share_groups();
    test_sim();
    test_sim_long();
    test_sim_shared();
    test_zb_h1();
    /* v = 0: ZB-H1 (one chunk, its backward split in B and W). */
    for (int pp = 1; pp <= 8; pp++)
        for (int vv = 0; vv <= 4; vv++)
            for (int mult = 1; mult <= 6; mult++) {
                int v = vv ? vv : 1;
                PlanSchedule sc = vv ? S(v) : PLAN_SCHED_ZB_H1;
                bool split = plan_schedule_split(sc);
                if (v > 1 && pp == 1)
                    continue;
                int m = v == 1 ? mult + pp / 2 : mult * pp; /* interleaving: m a multiple of pp */
                for (int r = 0; r < pp; r++) {
                    int n = plan_schedule_nops(sc, v, m), fb = 0, wpend = 0, wmax = 0;
                    int *state = calloc((size_t)(m * v), sizeof *state);
                    int live[PLAN_MAX_CHUNKS] = {0}, slots[PLAN_MAX_CHUNKS] = {0};
                    double saved[PLAN_MAX_CHUNKS], wsaved[PLAN_MAX_CHUNKS], sum = 0, peak = 0;
                    for (int j = 0; j < v; j++)
                        saved[j] = 1 + 0.37 * j, wsaved[j] = 0.6 + 0.1 * j;
                    for (int k = 0; k < n; k++) {
                        PlanSchedOp op = plan_schedule_op(sc, pp, v, m, r, k);
                        CHECK(op.chunk >= 0 && op.chunk < v && op.mb >= 0 && op.mb < m,
                              "pp %d v %d m %d rank %d op %d", pp, v, m, r, k);
                        int *s = &state[op.mb * v + op.chunk];
                        CHECK(*s == op.bwd, "%s pp %d v %d m %d rank %d: op %d out of order",
                              plan_schedule_name(sc), pp, v, m, r, k);
                        *s += 1;
                        if (op.bwd == PLAN_OP_W) {
                            wpend--, sum -= wsaved[op.chunk];
                            continue;
                        }
                        /* A split schedule's forwards and backwards are 1F1B's, in order. */
                        if (split) {
                            PlanSchedOp o1 = plan_schedule_op(PLAN_SCHED_1F1B, pp, 1, m, r, fb++);
                            CHECK(o1.bwd == op.bwd && o1.mb == op.mb, "zb-h1 pp %d m %d rank %d: op %d is not 1F1B's",
                                  pp, m, r, k);
                        }
                        if (op.bwd && split)
                            wmax = wpend + 1 > wmax ? wpend + 1 : wmax, wpend++, sum += wsaved[op.chunk];
                        live[op.chunk] += op.bwd ? -1 : 1;
                        sum += (op.bwd ? -1 : 1) * saved[op.chunk];
                        if (live[op.chunk] > slots[op.chunk])
                            slots[op.chunk] = live[op.chunk];
                        peak = fmax(peak, sum);
                    }
                    for (int i = 0; i < m * v; i++)
                        CHECK(state[i] == (split ? 3 : 2), "pp %d v %d m %d rank %d: item %d ran %d times", pp,
                              v, m, r, i, state[i]);
                    free(state);
                    /* ZB-H1's W slots are the most W pending at once; a rank's
                     * slots hold at most pp + 1 micro-batches from forward to W
                     * (1F1B's most, and the W inputs of the B just run). */
                    if (split) {
                        int ws = plan_schedule_wslots(sc, pp, m, r);
                        CHECK(wmax == ws && ws <= r + 1, "zb-h1 pp %d m %d rank %d: %d W pending, %d slots", pp,
                              m, r, wmax, ws);
                        CHECK(slots[0] + ws <= pp + 1, "zb-h1 pp %d m %d rank %d: %d + %d in flight", pp, m, r,
                              slots[0], ws);
                    }
                    int got[PLAN_MAX_CHUNKS], again[PLAN_MAX_CHUNKS];
                    plan_schedule_slots(pp, v, m, r, got);
                    plan_schedule_slots(pp, v, m, r, again); /* from the memo now */
                    CHECK(!memcmp(got, again, sizeof *got * (size_t)v), "pp %d v %d m %d rank %d: the memo "
                          "answers differently", pp, v, m, r);
                    double stat = 0;
                    for (int j = 0; j < v; j++) {
                        CHECK(got[j] == slots[j], "pp %d v %d m %d rank %d chunk %d: %d slots, "
                              "the whole schedule needs %d", pp, v, m, r, j, got[j], slots[j]);
                        stat += slots[j] * saved[j];
                    }
                    if (v == 1)
                        CHECK(slots[0] == (m < pp - r ? m : pp - r), "1F1B rank %d holds %d", r,
                              slots[0]);
                    double a = plan_schedule_acts(sc, pp, v, m, r, saved, wsaved, false);
                    double d = plan_schedule_acts(sc, pp, v, m, r, saved, wsaved, true);
                    stat += plan_schedule_wslots(sc, pp, m, r) * wsaved[0];
                    CHECK(fabs(a - stat) < 1e-9, "static acts %g vs %g", a, stat);
                    CHECK(fabs(d - peak) < 1e-9, "dynamic acts %g vs %g (pp %d v %d m %d rank %d)",
                          d, peak, pp, v, m, r);
                    CHECK(d <= a + 1e-9, "a peak above the sum of the maxima");
                    cases++;
                }
            }
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("schedule: %d rank schedules checked\n", cases);
    return 0;
}
