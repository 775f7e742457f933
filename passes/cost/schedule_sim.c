/* schedule_sim.c: one step of the pipeline schedule (plan/schedule.c's
 * order) simulated event by event with each stage's times: what the cost
 * model and the planner predict a step takes, with and without CPU ranks
 * sharing cores. */
#include "cost/cost.h"

#include <math.h>
#include <stdlib.h>

/* Each rank's operations as (stage, micro-batch, kind) in one int:
 * ((mb * ns + st) << 2) | kind (PlanOpKind: F, B, or a split schedule's W).
 * The planner simulates the same few schedules over and over with different
 * stage times: the last few are kept. */
enum { OPMEMO = 4 };
static struct OpMemo {
    PlanSchedule s;
    int pp, v, m;
    long used;                    /* last use, for eviction */
    int *ops;                     /* [pp][plan_schedule_nops] */
} opmemo[OPMEMO];
static long opclock;

static const int *rank_ops(PlanSchedule s, int pp, int v, int m)
{
    struct OpMemo *e = &opmemo[0];
    for (int i = 0; i < OPMEMO; i++) {
        if (opmemo[i].ops && opmemo[i].s == s && opmemo[i].pp == pp && opmemo[i].v == v && opmemo[i].m == m) {
            opmemo[i].used = ++opclock;
            return opmemo[i].ops;
        }
        if (opmemo[i].used < e->used)
            e = &opmemo[i];
    }
    int nops = plan_schedule_nops(s, v, m), ns = pp * v;
    free(e->ops);
    e->ops = ir_xmalloc(sizeof(int) * (size_t)pp * (size_t)nops);
    for (int r = 0; r < pp; r++)
        for (int k = 0; k < nops; k++) {
            PlanSchedOp op = plan_schedule_op(s, pp, v, m, r, k);
            e->ops[(size_t)r * nops + k] = ((op.mb * ns + op.chunk * pp + r) << 2) | op.bwd;
        }
    e->s = s, e->pp = pp, e->v = v, e->m = m, e->used = ++opclock;
    return e->ops;
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
    const int *ops = rank_ops(s, pp, v, m);
    /* done[(mb * ns + st) * 2 + bwd]: when that forward or backward ends
     * (< 0: not yet). */
    double *done = ir_xmalloc(sizeof(double) * (size_t)ns * (size_t)m * 2);
    for (long i = 0; i < (long)ns * m * 2; i++)
        done[i] = -1;
    int *k = ir_xcalloc((size_t)pp, sizeof(int));
    double *t = ir_xcalloc((size_t)pp, sizeof(double));
    int nops = plan_schedule_nops(s, v, m);
    long left = (long)pp * nops;
    for (int pass = 0; left > 0; pass++) {
        long progress = 0;
        /* Alternate directions: forwards flow to higher ranks, backwards to
         * lower ones, so each pass carries one of them along the pipe. */
        for (int q = 0; q < pp; q++) {
            int r = pass % 2 ? pp - 1 - q : q;
            const int *o = ops + (size_t)r * nops;
            for (; k[r] < nops; k[r]++) {
                int e = o[k[r]], kind = e & 3, id = e >> 2;
                /* A blocking receive: the receiver copies once both are there. */
                double start = ready_at(e, ns, done, t[r], xf, xb);
                if (start < 0)
                    break;
                t[r] = start + op_time(e, ns, f, b, w);
                if (kind != PLAN_OP_W)
                    done[id * 2 + kind] = t[r];
                progress++;
                left--;
            }
        }
        if (!progress)
            ir_die("pass_schedule_sim: the %s schedule deadlocks (pp %d, v %d, m %d)", plan_schedule_name(s), pp, v,
                   m);
    }
    double end = 0;
    for (int r = 0; r < pp; r++) {
        if (finish)
            finish[r] = t[r];
        end = fmax(end, t[r]);
    }
    free(done), free(k), free(t);
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
    const int *ops = rank_ops(s, pp, v, m);
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
            int e = ops[(size_t)r * nops + k[r]];
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
                int e = ops[(size_t)r * nops + k[r]];
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
