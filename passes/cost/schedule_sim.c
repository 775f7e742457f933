/* schedule_sim.c: one step of the pipeline schedule (plan/schedule.c's
 * order) simulated event by event with each stage's times: what the cost
 * model and the planner predict a step takes, with and without CPU ranks
 * sharing cores. */
#include "cost/cost.h"

#include <math.h>
#include <stdlib.h>

/* Each rank's operations in order: the micro-batch of each and its chunk
 * and kind in one byte, (chunk << 2) | kind (PlanOpKind: F, B, or a split
 * schedule's W); the stage is chunk * pp + rank. The planner simulates the
 * same few schedules over and over with different stage times: the last
 * few are kept. */
enum { OPMEMO = 4 };
static struct OpMemo {
    PlanSchedule s;
    int pp, v, m;
    long used;                    /* last use, for eviction */
    int *mb;                      /* [pp][plan_schedule_nops] */
    unsigned char *ck;            /* [pp][plan_schedule_nops] */
} opmemo[OPMEMO];
static long opclock;

static const struct OpMemo *rank_ops(PlanSchedule s, int pp, int v, int m)
{
    struct OpMemo *e = &opmemo[0];
    for (int i = 0; i < OPMEMO; i++) {
        if (opmemo[i].mb && opmemo[i].s == s && opmemo[i].pp == pp && opmemo[i].v == v && opmemo[i].m == m) {
            opmemo[i].used = ++opclock;
            return &opmemo[i];
        }
        if (opmemo[i].used < e->used)
            e = &opmemo[i];
    }
    int nops = plan_schedule_nops(s, v, m);
    free(e->mb);
    free(e->ck);
    e->mb = ir_xmalloc(sizeof(int) * (size_t)pp * (size_t)nops);
    e->ck = ir_xmalloc((size_t)pp * (size_t)nops);
    for (int r = 0; r < pp; r++)
        for (int k = 0; k < nops; k++) {
            PlanSchedOp op = plan_schedule_op(s, pp, v, m, r, k);
            e->mb[(size_t)r * nops + k] = op.mb;
            e->ck[(size_t)r * nops + k] = (unsigned char)(op.chunk << 2 | op.bwd);
        }
    e->s = s, e->pp = pp, e->v = v, e->m = m, e->used = ++opclock;
    return e;
}

/* Operation i of rank r (its place in M) as one int: ((mb * ns + st) << 2)
 * | kind, the encoding of pass_schedule_sim_shared's helpers below. */
static int op_code(const struct OpMemo *M, int pp, int r, size_t i)
{
    int st = (M->ck[i] >> 2) * pp + r;
    return ((M->mb[i] * pp * M->v + st) << 2) | (M->ck[i] & 3);
}

/* When operation e (rank_ops' encoding) can start on a rank free from
 * `free`: after the operation it receives from (stage st-1's forward, or
 * stage st+1's backward, of its micro-batch) and that message's copy; -1
 * while that operation has not ended (done[] < 0). A weight gradient (W)
 * receives nothing: its backward ran before it on the same rank. */
static double ready_at(int e, int ns, const double *done, double free, const double *xf, const double *xb)
{
    int bwd = e & 3, id = e >> 2, st = id % ns;
    if (bwd == PLAN_OP_W)
        return free;
    if (!bwd && st > 0)
        return done[(id - 1) * 2] < 0 ? -1 : fmax(free, done[(id - 1) * 2]) + xf[st];
    if (bwd && st < ns - 1)
        return done[(id + 1) * 2 + 1] < 0 ? -1 : fmax(free, done[(id + 1) * 2 + 1]) + xb[st + 1];
    return free;
}

/* The seconds of operation e (rank_ops' encoding). */
static double op_time(int e, int ns, const double *f, const double *b, const double *w)
{
    int st = (e >> 2) % ns;
    return (e & 3) == PLAN_OP_F ? f[st] : (e & 3) == PLAN_OP_B ? b[st] : w[st];
}

/* The end times of every forward and backward, reused between calls (the
 * planner's steps have up to a few hundred thousand): [cap]. */
static double *done_buf;
static size_t done_cap;

double pass_schedule_sim(PlanSchedule s, int pp, int v, int m, const double *f, const double *b, const double *w,
                         const double *xf, const double *xb, double *finish)
{
    int ns = pp * v;
    if (plan_schedule_split(s) && (!w || v != 1))
        ir_die("pass_schedule_sim: %s needs its weight-gradient times and one chunk per rank", plan_schedule_name(s));
    if (pp < 1 || v < 1 || m < 1 || v > PLAN_MAX_CHUNKS)
        ir_die("pass_schedule_sim: pp %d, v %d, m %d", pp, v, m);
    if ((long)ns * m > (1L << 28))
        ir_die("pass_schedule_sim: %d stages x %d micro-batches", ns, m);
    const struct OpMemo *M = rank_ops(s, pp, v, m);
    /* done[(st * m + mb) * 2 + bwd]: when that forward or backward ends;
     * -1: not yet; -2 - r: not yet, and rank r waits for it. By stage, so
     * that each rank reads and writes a few rows in order. */
    size_t nd = (size_t)ns * (size_t)m * 2;
    if (nd > done_cap) {
        free(done_buf);
        done_buf = ir_xmalloc(sizeof(double) * nd);
        done_cap = nd;
    }
    double *done = done_buf;
    for (size_t i = 0; i < nd; i++)
        done[i] = -1;
    int *k = ir_xcalloc((size_t)pp, sizeof(int)), *ready = ir_xmalloc(sizeof(int) * (size_t)pp);
    double *t = ir_xcalloc((size_t)pp, sizeof(double));
    int nops = plan_schedule_nops(s, v, m), top = 0;
    long left = (long)pp * nops;
    /* Each operation starts when its rank is free and the operation it
     * receives from (stage st-1's forward, or stage st+1's backward, of its
     * micro-batch) has ended, plus that message's copy (a blocking
     * receive); a weight gradient (W) receives nothing: its backward ran
     * before it on the same rank. Every end time is a function of the
     * operations before it alone, so any order that runs each operation
     * after those gives the same times: a rank runs until it waits for a
     * message, and the rank that sends it wakes it. */
    for (int r = pp - 1; r >= 0; r--)
        ready[top++] = r;
    while (top > 0) {
        int r = ready[--top], kr = k[r];
        const int *mbs = M->mb + (size_t)r * nops;
        const unsigned char *ck = M->ck + (size_t)r * nops;
        double tr = t[r];
        for (; kr < nops; kr++) {
            int kind = ck[kr] & 3, st = (ck[kr] >> 2) * pp + r, mb = mbs[kr];
            if (kind == PLAN_OP_W) {
                tr = tr + w[st];
                continue;
            }
            double start = tr;
            int dep = kind == PLAN_OP_F ? (st > 0 ? ((st - 1) * m + mb) * 2 : -1)
                                        : (st < ns - 1 ? ((st + 1) * m + mb) * 2 + 1 : -1);
            if (dep >= 0) {
                double d = done[dep];
                if (d < 0) {
                    done[dep] = -2 - r;
                    break;
                }
                start = kind == PLAN_OP_F ? fmax(tr, d) + xf[st] : fmax(tr, d) + xb[st + 1];
            }
            tr = start + (kind == PLAN_OP_F ? f[st] : b[st]);
            int me = (st * m + mb) * 2 + kind;
            double old = done[me];
            done[me] = tr;
            if (old <= -2)
                ready[top++] = (int)(-2 - old);
        }
        left -= kr - k[r];
        t[r] = tr, k[r] = kr;
    }
    if (left > 0)
        ir_die("pass_schedule_sim: the %s schedule deadlocks (pp %d, v %d, m %d)", plan_schedule_name(s), pp, v, m);
    double end = 0;
    for (int r = 0; r < pp; r++) {
        if (finish)
            finish[r] = t[r];
        end = fmax(end, t[r]);
    }
    free(k), free(ready), free(t);
    return end;
}

/* The same schedule with the ranks sharing cores, event by event: between
 * two events (an operation ends, a received message is in) the busy ranks
 * of each group progress at the speed their number allows. A rank is busy
 * from the start of an operation to its end; waiting for a message (and
 * copying it in, xf / xb: a memory copy, counted as waiting) it is not. */
double pass_schedule_sim_shared(PlanSchedule s, int pp, int v, int m, const double *f, const double *b,
                                const double *w, const double *xf, const double *xb, double *finish,
                                const PassShare *sh)
{
    if (!sh || sh->group < 2)
        return pass_schedule_sim(s, pp, v, m, f, b, w, xf, xb, finish);
    int ns = pp * v;
    if (pp < 1 || v < 1 || m < 1 || v > PLAN_MAX_CHUNKS || (long)ns * m > (1L << 28) ||
        (plan_schedule_split(s) && (!w || v != 1)))
        ir_die("pass_schedule_sim_shared: %s, pp %d, v %d, m %d", plan_schedule_name(s), pp, v, m);
    const struct OpMemo *M = rank_ops(s, pp, v, m);
    int nops = plan_schedule_nops(s, v, m), ngroups = (pp + sh->group - 1) / sh->group;
    double *done = ir_xmalloc(sizeof(double) * (size_t)ns * (size_t)m * 2);
    for (long i = 0; i < (long)ns * m * 2; i++)
        done[i] = -1;
    int *k = ir_xcalloc((size_t)pp, sizeof(int)), *busy = ir_xcalloc((size_t)ngroups, sizeof(int));
    double *free_at = ir_xcalloc((size_t)pp, sizeof(double)); /* end of its last operation */
    double *rem = ir_xmalloc(sizeof(double) * (size_t)pp);      /* work left (< 0: idle) */
    double *speed = ir_xmalloc(sizeof(double) * (size_t)(pp + 1));
    for (int r = 0; r < pp; r++)
        rem[r] = -1;
    for (int n = 1; n <= pp; n++)
        speed[n] = pass_share_speed(sh, n);
    double now = 0;
    long left = (long)pp * nops;
    while (left > 0) {
        /* Start what can start; the earliest later start of the others. */
        double next = INFINITY;
        for (int r = 0; r < pp; r++) {
            if (rem[r] >= 0 || k[r] >= nops)
                continue;
            int e = op_code(M, pp, r, (size_t)r * nops + k[r]);
            double ready = ready_at(e, ns, done, free_at[r], xf, xb);
            if (ready < 0)
                continue;
            if (ready <= now)
                rem[r] = op_time(e, ns, f, b, w);
            else
                next = fmin(next, ready);
        }
        for (int q = 0; q < ngroups; q++)
            busy[q] = 0;
        for (int r = 0; r < pp; r++)
            busy[r / sh->group] += rem[r] >= 0;
        for (int r = 0; r < pp; r++)
            if (rem[r] >= 0)
                next = fmin(next, now + rem[r] / speed[busy[r / sh->group]]);
        if (!isfinite(next))
            ir_die("pass_schedule_sim_shared: the schedule deadlocks (pp %d, v %d, m %d)", pp, v, m);
        double dt = next - now, tol = 1e-12 * fmax(1, next);
        for (int r = 0; r < pp; r++) {
            if (rem[r] < 0)
                continue;
            double sp = speed[busy[r / sh->group]];
            if (now + rem[r] / sp <= next + tol) { /* ends now */
                int e = op_code(M, pp, r, (size_t)r * nops + k[r]);
                free_at[r] = next;
                if ((e & 3) != PLAN_OP_W)
                    done[(e >> 2) * 2 + (e & 3)] = next;
                rem[r] = -1;
                k[r]++;
                left--;
            } else {
                rem[r] -= dt * sp;
            }
        }
        now = next;
    }
    double end = 0;
    for (int r = 0; r < pp; r++) {
        if (finish)
            finish[r] = free_at[r];
        end = fmax(end, free_at[r]);
    }
    free(done), free(k), free(busy), free(free_at), free(rem), free(speed);
    return end;
}
