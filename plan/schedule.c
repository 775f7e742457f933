/* schedule.c: the pipeline schedule, once. Codegen runs it, the cost model
 * counts the activations it keeps alive, the planner bounds with it.
 *
 * 1F1B (v = 1): pipeline rank r runs min(pp - r - 1, m) warm-up forwards,
 * then alternates one forward and one backward, then drains the backwards.
 * Interleaved 1F1B (Megatron-LM's, v chunks per rank, m a multiple of pp):
 * forwards walk the chunks in groups of pp micro-batches, backwards walk
 * them in reverse, with (pp - r - 1) * 2 + (v - 1) * pp warm-up forwards. */
#include "plan.h"

#include <math.h>
#include <stdlib.h>

static int warmup(int pp, int v, int m, int rank)
{
    int total = m * v;
    int w = v == 1 ? pp - rank - 1 : (pp - rank - 1) * 2 + (v - 1) * pp;
    return w < total ? w : total;
}

/* The k-th forward (or backward) of the rank among its m * v. */
static PlanSchedOp nth(int pp, int v, int k, bool bwd)
{
    if (v == 1)
        return (PlanSchedOp){bwd, 0, k};
    int group = pp * v, chunk = (k % group) / pp;
    return (PlanSchedOp){bwd, bwd ? v - 1 - chunk : chunk, (k / group) * pp + k % pp};
}

PlanSchedOp plan_schedule_op(int pp, int v, int m, int rank, int k)
{
    int total = m * v, warm = warmup(pp, v, m, rank);
    if (k < warm)
        return nth(pp, v, k, false);
    int steady = 2 * (total - warm);
    if (k < warm + steady) {
        int i = (k - warm) / 2;
        return (k - warm) % 2 == 0 ? nth(pp, v, warm + i, false) : nth(pp, v, i, true);
    }
    return nth(pp, v, total - warm + (k - warm - steady), true);
}

/* Past the warm-up, the steady phase repeats every 2 * pp * v operations and
 * the drain only frees slots: the maxima are reached within this prefix
 * (tests/ir/test_schedule.c checks it against the whole schedule). */
static int horizon(int pp, int v, int m, int rank)
{
    long h = (long)warmup(pp, v, m, rank) + 4L * pp * v + 2;
    return h < 2L * m * v ? (int)h : 2 * m * v;
}

static void walk(int pp, int v, int m, int rank, int nops, int *slots, const double *saved,
                 double *peak_sum)
{
    int live[PLAN_MAX_CHUNKS] = {0};
    double sum = 0;
    for (int j = 0; j < v; j++)
        slots[j] = 0;
    *peak_sum = 0;
    for (int k = 0; k < nops; k++) {
        PlanSchedOp op = plan_schedule_op(pp, v, m, rank, k);
        int d = op.bwd ? -1 : 1;
        live[op.chunk] += d;
        sum += d * (saved ? saved[op.chunk] : 1);
        if (live[op.chunk] > slots[op.chunk])
            slots[op.chunk] = live[op.chunk];
        *peak_sum = fmax(*peak_sum, sum);
    }
}

/* The planner asks for the same few schedules thousands of times: a small
 * direct-mapped memo of a pure function. */
typedef struct {
    int pp, v, m, rank;
    int slots[PLAN_MAX_CHUNKS];
} Memo;
static Memo memo[1024];

void plan_schedule_slots(int pp, int v, int m, int rank, int *slots)
{
    if (v < 1 || v > PLAN_MAX_CHUNKS)
        ir_die("plan_schedule_slots: %d chunks per rank (at most %d)", v, PLAN_MAX_CHUNKS);
    if (v == 1) {
        slots[0] = m < pp - rank ? m : pp - rank;
        return;
    }
    unsigned h = (((unsigned)pp * 131u + (unsigned)v) * 131u + (unsigned)m) * 131u + (unsigned)rank;
    Memo *e = &memo[h % (sizeof memo / sizeof memo[0])];
    if (e->pp != pp || e->v != v || e->m != m || e->rank != rank) {
        double peak;
        walk(pp, v, m, rank, horizon(pp, v, m, rank), e->slots, NULL, &peak);
        e->pp = pp, e->v = v, e->m = m, e->rank = rank;
    }
    for (int j = 0; j < v; j++)
        slots[j] = e->slots[j];
}

double plan_schedule_acts(int pp, int v, int m, int rank, const double *saved, bool dynamic)
{
    if (v < 1 || v > PLAN_MAX_CHUNKS)
        ir_die("plan_schedule_acts: %d chunks per rank (at most %d)", v, PLAN_MAX_CHUNKS);
    if (v == 1) /* every rank's maximum, held at once either way */
        return fmin(m, pp - rank) * saved[0];
    int slots[PLAN_MAX_CHUNKS];
    if (dynamic) {
        double peak;
        walk(pp, v, m, rank, horizon(pp, v, m, rank), slots, saved, &peak);
        return peak;
    }
    plan_schedule_slots(pp, v, m, rank, slots);
    double bytes = 0;
    for (int j = 0; j < v; j++)
        bytes += slots[j] * saved[j];
    return bytes;
}
