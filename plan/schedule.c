/* schedule.c: the pipeline schedule, once. Codegen runs it, the cost model
 * counts the activations it keeps alive, the planner bounds with it.
 *
 * 1F1B (v = 1): pipeline rank r runs min(pp - r - 1, m) warm-up forwards,
 * then alternates one forward and one backward, then drains the backwards.
 * Interleaved 1F1B (Megatron-LM's, v chunks per rank, m a multiple of pp):
 * forwards walk the chunks in groups of pp micro-batches, backwards walk
 * them in reverse, with (pp - r - 1) * 2 + (v - 1) * pp warm-up forwards.
 * ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section
 * 3.1; v = 1): 1F1B's forwards and backwards in 1F1B's order, the backward
 * (B) computing only what flows back (the input gradients), each micro-batch's
 * weight gradients (W) run after the backward of the micro-batch r later:
 * rank r defers r of them, so the last rank, idle in 1F1B's drain while the
 * backwards travel down, spends it on its weight gradients, and every rank
 * holds at most pp micro-batches between forward and W, 1F1B's most. */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static const struct {
    const char *name, *title;
    bool chunks, split;
} rows[] = {
#define X(id, name, title, chunks, split) {name, title, chunks, split},
    PLAN_SCHEDULES(X)
#undef X
};

const char *plan_schedule_name(PlanSchedule s) { return s >= 0 && s < PLAN_NSCHED ? rows[s].name : "?"; }
const char *plan_schedule_title(PlanSchedule s) { return s >= 0 && s < PLAN_NSCHED ? rows[s].title : "?"; }
bool plan_schedule_chunked(PlanSchedule s) { return s >= 0 && s < PLAN_NSCHED && rows[s].chunks; }
bool plan_schedule_split(PlanSchedule s) { return s >= 0 && s < PLAN_NSCHED && rows[s].split; }

int plan_schedule_parse(const char *name)
{
    for (int s = 0; s < PLAN_NSCHED; s++)
        if (!strcmp(name, rows[s].name))
            return s;
    return -1;
}

int plan_schedule_nops(PlanSchedule s, int v, int m) { return (plan_schedule_split(s) ? 3 : 2) * m * v; }

/* ZB-H1's W deferral of rank `rank`: its weight gradients run d backwards late. */
static int zb_defer(int m, int rank) { return rank < m ? rank : m; }

/* ZB-H1, rank r: w = min(pp - r - 1, m) forwards, then for each micro-batch
 * i in order the group [F(w + i) while there is one] B(i) [W(i - d) once
 * i >= d], then the last d weight gradients. Group i holds 1 + [i < m - w] +
 * [i >= d] operations; the group of operation k by bisection. */
static PlanSchedOp zb_h1_op(int pp, int m, int rank, int k)
{
    int w = warmup(pp, 1, m, rank), d = zb_defer(m, rank);
    if (k < w)
        return (PlanSchedOp){PLAN_OP_F, 0, k};
    k -= w;
#define BEFORE(i) ((long)(i) + ((i) < m - w ? (i) : m - w) + ((i) > d ? (i) - d : 0))
    if (k >= BEFORE(m))
        return (PlanSchedOp){PLAN_OP_W, 0, m - d + (int)(k - BEFORE(m))};
    int lo = 0, hi = m - 1; /* the last group starting at or before k */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (BEFORE(mid) <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    int i = lo, at = (int)(k - BEFORE(i));
#undef BEFORE
    if (i < m - w && at-- == 0)
        return (PlanSchedOp){PLAN_OP_F, 0, w + i};
    if (at == 0)
        return (PlanSchedOp){PLAN_OP_B, 0, i};
    return (PlanSchedOp){PLAN_OP_W, 0, i - d};
}

/* Right after B(i), W(i - d) .. W(i) wait: d + 1 of them (all m when the
 * deferral reaches past the last backward). A static arena holds that many
 * copies of W's inputs: codegen's W slots (cg_sched.c checks the order
 * never needs more). */
int plan_schedule_wslots(PlanSchedule s, int pp, int m, int rank)
{
    (void)pp;
    int d = zb_defer(m, rank);
    return plan_schedule_split(s) ? (d + 1 < m ? d + 1 : m) : 0;
}

PlanSchedOp plan_schedule_op(PlanSchedule s, int pp, int v, int m, int rank, int k)
{
    if (plan_schedule_split(s))
        return zb_h1_op(pp, m, rank, k);
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

/* Past the warm-up, the steady phase repeats every 2 * pp * v operations
 * (ZB-H1's every 3, once its deferral is reached, within 3 pp) and the
 * drain only frees slots: the maxima are reached within this prefix
 * (tests/plan/test_schedule.c checks it against the whole schedule). */
static int horizon(PlanSchedule s, int pp, int v, int m, int rank)
{
    int n = plan_schedule_nops(s, v, m);
    long h = (long)warmup(pp, v, m, rank) + (plan_schedule_split(s) ? 6L : 4L) * pp * v + 2;
    return h < n ? (int)h : n;
}

/* Slots and the peak of the bytes alive: a micro-batch's saved bytes from
 * its forward to its backward, then (split schedules) its wsaved bytes to
 * its weight gradients. */
static void walk(PlanSchedule s, int pp, int v, int m, int rank, int nops, int *slots, const double *saved,
                 const double *wsaved, double *peak_sum)
{
    int live[PLAN_MAX_CHUNKS] = {0};
    double sum = 0;
    for (int j = 0; j < v; j++)
        slots[j] = 0;
    *peak_sum = 0;
    bool split = plan_schedule_split(s);
    for (int k = 0; k < nops; k++) {
        PlanSchedOp op = plan_schedule_op(s, pp, v, m, rank, k);
        double ws = split && wsaved ? wsaved[op.chunk] : 0;
        if (op.bwd == PLAN_OP_W) {
            sum -= ws;
            continue;
        }
        int d = op.bwd ? -1 : 1;
        live[op.chunk] += d;
        sum += d * (saved ? saved[op.chunk] : 1) + (op.bwd ? ws : 0);
        if (live[op.chunk] > slots[op.chunk])
            slots[op.chunk] = live[op.chunk];
        *peak_sum = fmax(*peak_sum, sum);
    }
}

/* The planner asks for the same schedules hundreds of thousands of times
 * (DeepSeek-V3 on 256 H800s: 364k asks, 8.7k distinct; a 1024-entry
 * direct-mapped memo missed 80k of them, 5% of the search's instructions):
 * an exact memo of a pure function, an open-addressing table of keys with
 * each key's v slots in one pool, both grown as needed. */
typedef struct {
    uint64_t key;                 /* 0: empty */
    int at;                       /* its slots: pool[at .. at + v) */
} Memo;
static Memo *memo;
static int memo_n, memo_cap, *pool, pool_n, pool_cap;

static Memo *memo_slot(uint64_t key)
{
    size_t mask = (size_t)memo_cap - 1, h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & mask;
    while (memo[h].key && memo[h].key != key)
        h = (h + 1) & mask;
    return &memo[h];
}

static void memo_grow(void)
{
    Memo *old = memo;
    int cap = memo_cap;
    memo_cap = cap ? 2 * cap : 1024;
    memo = ir_xcalloc((size_t)memo_cap, sizeof *memo);
    for (int i = 0; i < cap; i++)
        if (old[i].key)
            *memo_slot(old[i].key) = old[i];
    free(old);
}

void plan_schedule_slots(int pp, int v, int m, int rank, int *slots)
{
    if (v < 1 || v > PLAN_MAX_CHUNKS)
        ir_die("plan_schedule_slots: %d chunks per rank (at most %d)", v, PLAN_MAX_CHUNKS);
    if (v == 1) {
        slots[0] = m < pp - rank ? m : pp - rank;
        return;
    }
    double peak;
    /* The key: v (< 2^7) in bits 57.., m in 27..56, pp^2 + rank (one number
     * per pair, rank < pp) below; never 0 (v >= 2). Schedules too large
     * for it are walked every time. */
    if (pp >= 1 << 13 || m >= 1 << 30 || rank < 0 || rank >= pp) {
        walk(PLAN_SCHED_INTERLEAVED, pp, v, m, rank, horizon(PLAN_SCHED_INTERLEAVED, pp, v, m, rank), slots,
             NULL, NULL, &peak);
        return;
    }
    uint64_t key = (uint64_t)v << 57 | (uint64_t)m << 27 | ((uint64_t)pp * (uint64_t)pp + (uint64_t)rank);
    if (2 * (memo_n + 1) > memo_cap)
        memo_grow();
    Memo *e = memo_slot(key);
    if (!e->key) {
        if (pool_n + v > pool_cap) {
            pool_cap = pool_cap ? 2 * pool_cap : 4096;
            while (pool_n + v > pool_cap)
                pool_cap *= 2;
            pool = ir_xrealloc(pool, sizeof *pool * (size_t)pool_cap);
        }
        walk(PLAN_SCHED_INTERLEAVED, pp, v, m, rank, horizon(PLAN_SCHED_INTERLEAVED, pp, v, m, rank),
             &pool[pool_n], NULL, NULL, &peak);
        e->key = key, e->at = pool_n;
        pool_n += v;
        memo_n++;
    }
    memcpy(slots, &pool[e->at], sizeof *slots * (size_t)v);
}

double plan_schedule_acts(PlanSchedule s, int pp, int v, int m, int rank, const double *saved,
                          const double *wsaved, bool dynamic)
{
    if (v < 1 || v > PLAN_MAX_CHUNKS)
        ir_die("plan_schedule_acts: %d chunks per rank (at most %d)", v, PLAN_MAX_CHUNKS);
    int slots[PLAN_MAX_CHUNKS];
    if (plan_schedule_split(s)) {
        if (v != 1)
            ir_die("plan_schedule_acts: %s runs one chunk per rank, not %d", plan_schedule_name(s), v);
        double ws = wsaved ? wsaved[0] : 0;
        if (!dynamic) /* both maxima allocated */
            return fmin(m, pp - rank) * saved[0] + plan_schedule_wslots(s, pp, m, rank) * ws;
        double peak;
        walk(s, pp, v, m, rank, horizon(s, pp, v, m, rank), slots, saved, wsaved, &peak);
        return peak;
    }
    if (v == 1) /* every rank's maximum, held at once either way */
        return fmin(m, pp - rank) * saved[0];
    if (dynamic) {
        double peak;
        walk(s, pp, v, m, rank, horizon(s, pp, v, m, rank), slots, saved, NULL, &peak);
        return peak;
    }
    plan_schedule_slots(pp, v, m, rank, slots);
    double bytes = 0;
    for (int j = 0; j < v; j++)
        bytes += slots[j] * saved[j];
    return bytes;
}
