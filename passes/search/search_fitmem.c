/* search_fitmem.c: the recomputation memory forces on a pipelined
 * candidate (interleaved, 1F1B, ZB-H1), as a lower bound on the step of its plans that fit
 * (docs/planner.md, "The bound of the plans that fit").
 *
 * An interleaved candidate's chunks are cut by each variant's own costs, so
 * its frontier bound (search.c, hope_bound) cannot cut the floor into
 * stages the way a 1F1B one does, and it used to leave memory out. Yet a
 * rank of a fitting plan holds its layers' model states and, through the
 * schedule, slots[j] micro-batches of chunk j's saved activations
 * (plan_schedule_slots, as pass_predict's static arena counts them), all
 * within the usable HBM; what does not fit must be recomputed, and that
 * costs time. Per rank r holding n layers of the run:
 *
 *   - every chunk of the cut holds at least one layer of the run but the end
 *     chunks search_dp.c may leave empty (cost_split, chunk_greedy), so the
 *     leanest arrangement puts one layer in each other chunk and the rest in
 *     the chunk with the fewest slots: any other arrangement weighs every
 *     layer at least as much;
 *   - each layer costs at least t(q) = the least floor time of a layer of
 *     the run under policy q (src_floor_pieces: kernels, ZeRO traffic and
 *     the resharding inside the piece, plus the recomputed forward), keeps
 *     at least s(q) bytes a micro-batch and holds at least the least
 *     states st (per layer, not per chunk: a relaxation);
 *   - so its time is at least the least sum of t over per-layer policies
 *     with sum(w_l s(q_l)) <= B = usable - runtime - n st, whose Lagrangian
 *     dual max over lambda >= 0 of sum_l min_q (t(q) + lambda w_l s(q)) -
 *     lambda B (a concave piecewise-linear function of lambda, largest at
 *     0 or at a breakpoint) is a lower bound (weak duality); INFINITY when
 *     even the leanest policy everywhere overflows.
 *
 * The first piece (the embedding) lies on rank 0's first chunk and the last
 * (the head) on rank pp-1's last, whatever the cut: each adds its floor
 * time, states and saved bytes (weighed by its chunk's slots) to that rank.
 *
 * 1F1B and ZB-H1 (one chunk per rank) too: their frontier bound cuts the
 * floor, whose states are each node's least over strategies, so a layer
 * whose fastest strategies hold many times those (replicated experts) looks
 * as if it fitted without recomputation; here the states of a class's
 * layers come from one strategy (src_fit_delta). A stage of 1F1B runs one
 * policy, as a rank does here; ZB-H1 holds at least 1F1B's slots
 * (plan_schedule_acts) and its step is at least m times a rank's work, but
 * not that plus the fill (its weight gradients overlap it: split_bound).
 *
 * pass_predict's step is at least m times any rank's time per micro-batch
 * (cut_bound), and the ranks together hold the run's N layers: the step is
 * at least the least T at which every rank fits its layers within T / m and
 * the numbers of layers they can hold so add up to N. Pieces outside the
 * run (the embedding, the head) are left out: they only add time and
 * memory. Not for --pp-layers pins (the cut is given), a caching allocator
 * (--stack megatron's dynamic_memory holds less than the slots), or CPU
 * ranks sharing cores (a rank then runs faster than its rates). */
#include "search/src.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* x[0..n) ascending. The layers of a run take few distinct floors (one per
 * floor class), so counting them is linear where qsort was most of this
 * bound's cost (it runs for every candidate a group weighs); many distinct
 * values fall back to qsort. */
static void sort_few(double *x, int n)
{
    enum { MAXD = 16 };
    double d[MAXD];
    int c[MAXD], nd = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < nd && d[j] != x[i])
            j++;
        if (j == nd) {
            if (nd == MAXD) {
                qsort(x, (size_t)n, sizeof *x, cmp_dbl);
                return;
            }
            d[nd] = x[i], c[nd++] = 0;
        }
        c[j]++;
    }
    for (int i = 1; i < nd; i++) /* insertion sort of the distinct values */
        for (int j = i; j > 0 && d[j] < d[j - 1]; j--) {
            double td = d[j];
            int tc = c[j];
            d[j] = d[j - 1], c[j] = c[j - 1];
            d[j - 1] = td, c[j - 1] = tc;
        }
    int k = 0;
    for (int j = 0; j < nd; j++)
        for (int i = 0; i < c[j]; i++)
            x[k++] = d[j];
}

/* The layers of the run, their floors sorted one quantity at a time. */
typedef struct FitMem {
    int nq, N;
    int q[SRC_NRC];               /* the policies weighed */
    double *t[SRC_NRC];           /* [N + 1] prefix sums of the least times ascending, per policy */
    double *sv[SRC_NRC];          /* [N] saved bytes ascending, per policy */
    double *st;                   /* [N + 1] prefix sums of the least states ascending */
    double t1;                    /* the least time of one layer (any policy) */
    /* The first and the last piece when outside the run (the embedding, the
     * head): always on rank 0's first chunk and rank pp-1's last one. Per
     * end and policy: time, saved bytes; per end: states. */
    double et[2][SRC_NRC], esv[2][SRC_NRC], est[2];
    double e0;                    /* the first piece's time without recomputation */
    double avail;                 /* usable HBM less the runtime term */
    double ws;                    /* the least backward working set of a rank holding a layer of
                                     the run: the least over its layers of SrcGroup.floor_ws */
    double ews[2];                /* the same of the first and the last piece (ends) */
    int cls;                      /* one floor class (its layers share a strategy), or -1 */
    double xfree;                 /* the states per layer from which src_fit_delta is 0 (every
                                     node of the class at its fastest point) */
    /* src_fit_delta's arguments that do not change between its calls here:
     * the class's Pareto nodes under k's ZeRO stage (their G->fit indices,
     * in its order), the class's least states and floor time per policy. */
    int nfn, *fn;
    double cls_states, cls_t[SRC_NRC];
} FitMem;

/* fmax without the library call, with its rule for NaN (the other
 * operand); rank_times' inner loop called it millions of times. */
static inline double maxd(double a, double b) { return a >= b || b != b ? a : b; }

/* src_fit_delta(G, F->cls, zero, x) over F's nodes, each one's point by
 * bisection of its states (ascending, search_prune.c fit_node): the same
 * sum in the same order, without scanning every node of the group. */
static double fit_delta(const FitMem *F, const SrcGroup *G, double x)
{
    if (!G->floor_states)
        return 0;
    double d = 0;
    for (int i = 0; i < F->nfn; i++) {
        const SrcFitNode *P = &G->fit[F->fn[i]];
        const double *m = &G->fit_val[P->off], *t = m + P->n;
        double allow = x - (F->cls_states - m[0]);
        /* the last point within allow: lo <= it < hi */
        int lo = -1, hi = P->n;
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if (m[mid] <= allow)
                lo = mid;
            else
                hi = mid;
        }
        if (lo < 0)
            return INFINITY;
        d += t[lo] - t[P->n - 1];
    }
    return d;
}

/* cls >= 0: only the layers of that floor class (floor_like). */
static void fitmem_init(FitMem *F, const Src *s, const SrcGroup *G, const SrcCand *k, const SrcPiece *H,
                        int cls)
{
    int *lay = ir_xmalloc(sizeof(int) * (size_t)(s->rep_count + 1)), N = 0;
    for (int l = 0; l < s->rep_count; l++)
        if (cls < 0 || s->floor_cls[s->rep_first + l] == cls)
            lay[N++] = s->rep_first + l;
    memset(F, 0, sizeof *F);
    F->N = N;
    F->cls = cls;
    for (int r = 0; r < SRC_NRC; r++)
        if (k->rc != SRC_AUTO ? r == k->rc : r <= PLAN_RECOMPUTE_FULL)
            F->q[F->nq++] = r;
    double *x = ir_xmalloc(sizeof(double) * (size_t)(N + 1));
    F->t1 = INFINITY;
    /* (once: the same bits as once per policy, a fold of fmin over the
     * same values ending on the same last least one) */
    for (int l = 0; l < N && F->nq > 0; l++)
        F->t1 = src_fmin(F->t1, H[lay[l]].fwd);
    for (int i = 0; i < F->nq; i++) {
        F->t[i] = ir_xmalloc(sizeof(double) * (size_t)(N + 1));
        F->sv[i] = ir_xmalloc(sizeof(double) * (size_t)(N + 1));
        for (int l = 0; l < N; l++) {
            const SrcPiece *P = &H[lay[l]];
            x[l] = P->fwd + P->rec[F->q[i]];
            F->sv[i][l] = P->saved[F->q[i]];
        }
        sort_few(x, N);
        sort_few(F->sv[i], N);
        F->t[i][0] = 0;
        for (int l = 0; l < N; l++)
            F->t[i][l + 1] = F->t[i][l] + x[l];
    }
    F->st = ir_xmalloc(sizeof(double) * (size_t)(N + 1));
    for (int l = 0; l < N; l++)
        x[l] = H[lay[l]].states[k->zero];
    sort_few(x, N);
    F->st[0] = 0;
    for (int l = 0; l < N; l++)
        F->st[l + 1] = F->st[l] + x[l];
    free(x);
    F->avail = s->usable - pass_runtime_bytes(s->c, &G->mesh, k->pp);
    /* pass_predict's total adds the rank's largest backward working set
     * (transient): at least the least a layer it holds can have. */
    F->ws = INFINITY;
    for (int l = 0; l < N && G->floor_ws; l++)
        F->ws = src_fmin(F->ws, G->floor_ws[src_frow(s, lay[l])]);
    if (!isfinite(F->ws))
        F->ws = 0;
    free(lay);
    /* src_fit_delta(G, cls, zero, x) is 0 once x lets every node of the
     * class take its last (fastest) Pareto point: skip the call there. */
    F->xfree = -INFINITY;
    F->fn = ir_xmalloc(sizeof(int) * (size_t)(G->nfit + 1));
    for (int i = 0; cls >= 0 && G->floor_states && i < G->nfit; i++) {
        const SrcFitNode *P = &G->fit[i];
        if (P->z != k->zero || P->piece != cls)
            continue;
        const double *m = &G->fit_val[P->off];
        F->xfree = src_fmax(F->xfree, m[P->n - 1] + (G->floor_states[src_frow(s, cls) * 4 + k->zero] - m[0]));
        F->fn[F->nfn++] = i;
    }
    if (cls >= 0 && G->floor_states)
        F->cls_states = G->floor_states[src_frow(s, cls) * 4 + k->zero];
    for (int i = 0; cls >= 0 && G->floor_t && i < F->nq; i++)
        F->cls_t[i] = G->floor_t[(src_frow(s, cls) * SRC_NRC + F->q[i]) * 4 + k->zero];
    int end[2] = {s->rep_first > 0 ? 0 : -1, s->rep_first + s->rep_count < s->npieces ? s->npieces - 1 : -1};
    for (int e = 0; e < 2; e++) {
        const SrcPiece *P = end[e] >= 0 ? &H[end[e]] : NULL;
        F->est[e] = P ? P->states[k->zero] : 0;
        F->ews[e] = P && G->floor_ws ? G->floor_ws[src_frow(s, end[e])] : 0;
        if (e == 0)
            F->e0 = P ? P->fwd : 0;
        for (int i = 0; i < F->nq; i++) {
            F->et[e][i] = P ? P->fwd + P->rec[F->q[i]] : 0;
            F->esv[e][i] = P ? P->saved[F->q[i]] : 0;
        }
    }
}

static void fitmem_free(FitMem *F)
{
    for (int i = 0; i < F->nq; i++) {
        free(F->t[i]);
        free(F->sv[i]);
    }
    free(F->st);
    free(F->fn);
}

/* One rank's row of f (row_fill), computed a count at a time on demand:
 * what the counts before it left (acts), and what depends on the rank only
 * (its slots, the ends it holds). */
typedef struct Row {
    int nw, smin;                 /* chunks that take a layer; the fewest slots of any chunk */
    double *w;                    /* [v] their slots, ascending (read from the end) */
    double before;                /* the first chunks of the ranks before it */
    double xt[SRC_NRC], xa[SRC_NRC], xs, xw; /* the ends it holds: time, saved bytes (weighed) per
                                                 policy, states, working set */
    double acts[SRC_NRC];         /* the saved bytes of the first `next` layers, per policy */
    int next;                     /* f[.. next) written */
} Row;

static void row_init(const FitMem *F, const SrcGroup *G, const SrcCand *k, bool ef, bool el, int r, double *w,
                     Row *R)
{
    int pp = k->pp, v = k->v, m = G->m, chunks = pp * v;
    /* A split schedule (ZB-H1) runs a rank's weight gradients while
     * micro-batches are still passing the ranks before it: only its own m
     * micro-batches bound the step there (cut_bound's split_bound). */
    bool fill = !plan_schedule_split(k->sched);
    int slots[PLAN_MAX_CHUNKS];
    memset(R, 0, sizeof *R);
    R->w = w;
    plan_schedule_slots(pp, v, m, r, slots);
    R->smin = slots[0];
    for (int j = 0; j < v; j++) {
        int c = j * pp + r;
        R->smin = slots[j] < R->smin ? slots[j] : R->smin;
        if (!((c == 0 && ef) || (c == chunks - 1 && el)))
            R->w[R->nw++] = slots[j];
    }
    qsort(R->w, (size_t)R->nw, sizeof *R->w, cmp_dbl);
    /* the first chunks of ranks 0 .. r-1, one layer each at least,
     * and rank 0's the first piece (no recomputation) */
    R->before = fill && r > 0 ? (r - (ef ? 1 : 0)) * F->t1 + F->e0 : 0;
    /* the ends this rank holds: time, states and saved bytes per policy
     * (the first piece in chunk 0, weighed by its slots; the last in
     * chunk v - 1) */
    for (int e = 0; e < 2; e++) {
        if (!(e == 0 ? r == 0 : r == pp - 1))
            continue;
        R->xs += F->est[e];
        R->xw = src_fmax(R->xw, F->ews[e]);
        for (int i = 0; i < F->nq; i++) {
            R->xt[i] += F->et[e][i];
            R->xa[i] += slots[e == 0 ? 0 : v - 1] * F->esv[e][i];
        }
    }
}

/* f[r * (N + 1) + n] for n up to upto: the least m x rank r's time per
 * micro-batch plus the first chunks of the ranks before it when it holds n
 * of F's layers (INFINITY: it cannot, within the usable HBM, or not n
 * layers at all); R->nw the least count it holds. Counts past the first
 * at or above R->nw whose time exceeds cut are left INFINITY (cut: a
 * time at which the ranks are known to hold the layers, so no later count
 * of the row can decide the bound; src_fitmem_bound). */
static void row_fill(const FitMem *F, const SrcGroup *G, Row *R, int r, int N, double *f, int upto, double cut)
{
    double *fr = &f[r * (N + 1)];
    int lo = R->nw;
    if (R->next - 1 >= lo && R->next <= N && fr[R->next - 1] > cut) { /* written before the cut was known */
        for (int x = R->next; x <= N; x++)
            fr[x] = INFINITY;
        R->next = N + 1;
    }
    for (int n = R->next; n <= upto && n <= N; n = R->next) {
        double best = INFINITY;
        bool room = false; /* some policy's memory fits n layers */
        for (int i = 0; i < F->nq && n > 0 && n <= F->N; i++)
            /* the smallest saved bytes with the largest weights
             * (rearrangement: no pairing of these layers weighs less) */
            R->acts[i] += (n - 1 < R->nw ? R->w[R->nw - n] : R->smin) * F->sv[i][n - 1];
        for (int i = 0; i < F->nq && n >= lo && n <= F->N; i++) {
            double mem = F->st[n] + R->acts[i] + R->xs + R->xa[i] + maxd(R->xw, n > 0 ? F->ws : 0);
            if (mem > F->avail)
                continue;
            room = true;
            double t = F->t[i][n];
            /* One class: its layers share one strategy, so each holds
             * at most 1/n of the states the activations leave, and
             * the leaner strategies that forces cost time. */
            if (F->cls >= 0 && n > 0 && G->floor_t) {
                /* d >= 0 (the fastest point is the last): a policy
                 * that cannot beat the best so far even at d = 0 is
                 * left without its delta, the least unchanged */
                if (maxd(t, n * F->cls_t[i]) + R->xt[i] >= best)
                    continue;
                double x = (F->avail - (mem - F->st[n])) / n;
                double d = x >= F->xfree ? 0 : fit_delta(F, G, x);
                /* the floor of the class's layer raised by d (H's time
                 * may be the strategy-free bound, above the floor: the
                 * larger of the two, not their sum) */
                t = maxd(t, n * (F->cls_t[i] + d));
            }
            best = t + R->xt[i] < best ? t + R->xt[i] : best;
        }
        fr[n] = R->before + G->m * best;
        R->next = n + 1;
        /* The memory of n layers only grows with n (states and
         * activations are sums of non-negative terms): none fits
         * more either. */
        if ((n >= lo && !room) || n >= F->N || (n >= lo && fr[n] > cut)) {
            for (int x = n + 1; x <= N; x++)
                fr[x] = INFINITY;
            R->next = N + 1;
        }
    }
}

/* The most layers rank r can hold within T (lo[r] - 1: not even its least). */
static int cap_at(const double *f, int r, int N, int lo, double T)
{
    int n = lo - 1;
    while (n + 1 <= N && f[r * (N + 1) + n + 1] <= T)
        n++;
    return n;
}

static int cmp_long_desc(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

/* Can the ranks hold the N layers within T: each its least, and together
 * (majority-class counts for all but K ranks) at least N? */
static bool holds(const FitMem *M, const double *fa, const double *fm, const int *lo, long *gain, int pp, int N,
                  int K, double T)
{
    long held = 0;
    for (int r = 0; r < pp; r++) {
        int ca = cap_at(fa, r, N, lo[r], T);
        if (ca < lo[r])
            return false;
        if (!M) {
            held += ca;
            continue;
        }
        /* a rank that cannot hold its least of the majority class alone
         * must be one of the K */
        int cm = cap_at(fm, r, N, lo[r], T);
        long base = cm >= lo[r] ? cm : -(long)(N + 1) * pp;
        held += base;
        gain[r] = ca - base;
    }
    if (M) {
        qsort(gain, (size_t)pp, sizeof *gain, cmp_long_desc);
        for (int r = 0; r < K && r < pp; r++)
            held += gain[r];
    }
    return held >= N;
}

/* src_fitmem_bound's working state: the two sets of layers (M: the
 * majority class, NULL without classes), their rows and the arrays the
 * bound's selection reads. */
typedef struct Ctx {
    const FitMem *A, *M;
    const SrcGroup *G;
    const SrcCand *k;
    bool ef, el;
    int pp, N, K;
    int *lo, *cap;
    double *fa, *fm, *cand;
    long *gain;
    Row *ra, *rm;
} Ctx;

/* The least T at which every rank can hold its least count of F's layers
 * within T (cap_at) and all of them together N: cap_at's caps, raised one
 * count's time at a time. Fills F's rows as far as it reads them;
 * INFINITY when no T does. */
static double walk_caps(const Ctx *x, Row *R, double *f, const FitMem *F)
{
    int pp = x->pp, N = x->N;
    double T = -INFINITY;
    for (int r = 0; r < pp; r++) {
        row_fill(F, x->G, &R[r], r, N, f, x->lo[r], INFINITY);
        T = maxd(T, f[r * (N + 1) + x->lo[r]]);
    }
    if (!(T < INFINITY))
        return INFINITY;
    long held = 0;
    for (int r = 0; r < pp; r++)
        x->cap[r] = x->lo[r] - 1;
    for (;;) {
        double next = INFINITY;
        held = 0;
        for (int r = 0; r < pp; r++) {
            int *c = &x->cap[r];
            for (;;) {
                if (*c + 1 > N)
                    break;
                row_fill(F, x->G, &R[r], r, N, f, *c + 1, INFINITY);
                double t = f[r * (N + 1) + *c + 1];
                if (!(t <= T)) {
                    next = t < next ? t : next;
                    break;
                }
                (*c)++;
            }
            held += *c;
        }
        if (held >= N)
            return T;
        if (!(next < INFINITY))
            return INFINITY;
        T = next;
    }
}

/* Both sets' rows to their ends, each cut past its first count (at or above
 * its least) whose time exceeds U. */
static void fill_rows(const Ctx *x, double U)
{
    for (int r = 0; r < x->pp; r++) {
        row_fill(x->A, x->G, &x->ra[r], r, x->N, x->fa, x->N, U);
        if (x->M)
            row_fill(x->M, x->G, &x->rm[r], r, x->N, x->fm, x->N, U);
    }
}

static void restart_rows(const Ctx *x)
{
    for (int r = 0; r < x->pp; r++) {
        row_init(x->A, x->G, x->k, x->ef, x->el, r, x->ra[r].w, &x->ra[r]);
        if (x->M)
            row_init(x->M, x->G, x->k, x->ef, x->el, r, x->rm[r].w, &x->rm[r]);
    }
}

/* The least T at which the ranks can hold the N layers (U: a T at which
 * they do, or INFINITY): a cap changes only at some count's time (of
 * either set), so the least is one of them; holding more never takes
 * less. */
static double least_holding(const Ctx *x, double U)
{
    int pp = x->pp, N = x->N, nc = 0;
    double b = INFINITY, *cand = x->cand;
    /* none above U, where the ranks hold the run, nor below L, where some
     * rank cannot hold its least (holds) */
    double L = -INFINITY;
    for (int r = 0; r < pp; r++)
        L = maxd(L, x->fa[r * (N + 1) + x->lo[r]]);
    for (int i = 0; i < pp * (N + 1); i++) {
        if (isfinite(x->fa[i]) && x->fa[i] <= U && x->fa[i] >= L)
            cand[nc++] = x->fa[i];
        if (x->M && isfinite(x->fm[i]) && x->fm[i] <= U && x->fm[i] >= L)
            cand[nc++] = x->fm[i];
    }
    /* The least feasible value by selection, not sorting (every
     * candidate bound computes this): split [a, z) around a pivot
     * (below it, equal, above), test the pivot, keep the half that
     * still holds the answer. Linear on average. */
    int a = 0, z = nc;
    while (a < z) {
        double T = cand[a + (z - a) / 2];
        int lt = a, gt = z; /* [a, lt) < T, [lt, gt) == T, [gt, z) > T */
        for (int i = a; i < gt;) {
            if (cand[i] < T) {
                double y = cand[i];
                cand[i++] = cand[lt], cand[lt++] = y;
            } else if (cand[i] > T) {
                double y = cand[i];
                cand[i] = cand[--gt], cand[gt] = y;
            } else
                i++;
        }
        if (holds(x->M, x->fa, x->fm, x->lo, x->gain, pp, N, x->K, T))
            b = T, z = lt;
        else
            a = gt;
    }
    return b;
}

static double fitmem_bound(const Src *s, const SrcGroup *G, const SrcCand *k, const SrcPiece *H)
{
    int pp = k->pp, v = k->v, N = s->rep_count, chunks = pp * v;
    int pins[PLAN_MAX_STAGES];
    PassShare sh;
    if (pp < 2 || s->rep0 < 0 || N < 1 || s->c->st.ref_stack || src_split_pin(s, pp, v, pins, NULL, 0) != 0 ||
        pass_share(s->c->cl, pp, plan_mesh_devices(&G->mesh), &sh))
        return 0;
    /* One chunk per rank: the 1F1B cut (search_dp.c) may end a stage
     * between two pieces outside the run, leaving a middle rank without
     * layers; with one piece at each end at most, only the end ranks can. */
    if (v == 1 && (s->rep_first > 1 || s->npieces - (s->rep_first + N) > 1))
        return 0;
    /* The end chunks search_dp.c may leave without layers: interleaved,
     * only when there are more chunks than layers; one chunk per rank
     * (1F1B, ZB-H1), whenever pieces lie beside the run (a stage of the
     * embedding alone, or of the head alone, is a cut like any other). */
    bool ef = false, el = false;
    if (chunks > N || v == 1) {
        ef = s->rep_first > 0;
        el = s->rep_first + N < s->npieces;
    }
    /* Every layer of the run, and those of its largest floor class alone:
     * a rank holding none of the other K layers holds that class's only,
     * and at most K ranks hold any of them. */
    int maj = -1, nmaj = 0;
    if (s->floor_cls && s->floor_cnt)
        for (int l = 0; l < N; l++) {
            int c = s->floor_cls[s->rep_first + l];
            if (s->floor_cnt[c] > nmaj)
                maj = c, nmaj = s->floor_cnt[c];
        }
    int K = maj >= 0 ? N - nmaj : N;
    /* A layer at least in every chunk but the ends allowed empty (Row.nw):
     * more than N, and no cut has them (INFINITY, before any row). */
    if (chunks - ef - el > N)
        return INFINITY;
    FitMem A, M;
    fitmem_init(&A, s, G, k, H, -1);
    if (maj >= 0)
        fitmem_init(&M, s, G, k, H, maj);
    FitMem *W = maj >= 0 ? &M : &A;
    int *lo = ir_xmalloc(sizeof(int) * (size_t)pp), *cap = ir_xmalloc(sizeof(int) * (size_t)pp);
    double *fa = ir_xmalloc(sizeof(double) * (size_t)pp * (size_t)(N + 1));
    double *fm = ir_xmalloc(sizeof(double) * (size_t)pp * (size_t)(N + 1));
    double *cand = ir_xmalloc(sizeof(double) * 2 * (size_t)pp * (size_t)(N + 1));
    long *gain = ir_xmalloc(sizeof(long) * (size_t)pp);
    Row *ra = ir_xmalloc(sizeof(Row) * (size_t)pp), *rm = ir_xmalloc(sizeof(Row) * (size_t)pp);
    double *wbuf = ir_xmalloc(sizeof(double) * 2 * (size_t)pp * (size_t)v);
    Ctx x = {&A, maj >= 0 ? &M : NULL, G, k, ef, el, pp, N, K, lo, cap, fa, fm, cand, gain, ra, rm};
    for (int r = 0; r < pp; r++) {
        row_init(&A, G, k, ef, el, r, &wbuf[r * v], &ra[r]);
        if (maj >= 0)
            row_init(&M, G, k, ef, el, r, &wbuf[(pp + r) * v], &rm[r]);
        lo[r] = ra[r].nw;
    }
    /* Rows only as far as the bound reads them: the least T at which each
     * rank holds its least and all hold N of the majority class (or of all
     * the layers, without classes) is a time at which they hold the run
     * (checked: holds), so no count whose time exceeds it can be the
     * bound, and cap_at stops before a row's first such count. */
    double U = walk_caps(&x, W == &M ? rm : ra, W == &M ? fm : fa, W), b;
    fill_rows(&x, U);
    if (isfinite(U) && !holds(x.M, fa, fm, lo, gain, pp, N, K, U)) {
        restart_rows(&x);
        U = INFINITY;
        fill_rows(&x, U);
    }
    b = least_holding(&x, U);
    /* src_check: the rows cut at U against whole rows, the same bound bit
     * for bit. */
    if (src_check(s) && isfinite(U)) {
        restart_rows(&x);
        fill_rows(&x, INFINITY);
        double b2 = least_holding(&x, INFINITY);
        if (!(b2 == b || (isnan(b) && isnan(b2))))
            ir_die("search: memory-forced bound %.17g with rows cut at %.17g, %.17g with whole rows (pp %d v %d)",
                   b, U, b2, pp, v);
    }
    fitmem_free(&A);
    if (maj >= 0)
        fitmem_free(&M);
    free(ra);
    free(rm);
    free(wbuf);
    free(gain);
    free(cand);
    free(cap);
    free(lo);
    free(fa);
    free(fm);
    return b;
}

/* The answers of the last FIT_MEMO calls: a candidate's bounds are asked
 * again with each variant it is evaluated with (search.c, hope_bounds),
 * on floors that do not depend on the variant (a quarter of the 9,033
 * calls planning Qwen3-235B-A22B on 512 A100s repeat one). The answer
 * depends on the group (its layout, and its floor: floor_id, 0 before
 * the first), whether the floor classes are known yet, the candidate's
 * pp, v, schedule, recomputation and ZeRO stage, and H. */
enum { FIT_MEMO = 16 };
typedef struct FitMemo {
    bool used, sp, classes;
    int dp, cp, tp, fold, b, pp, v, sched, rc, zero;
    long floor_id;                /* SrcGroup.floor_id */
    SrcPiece *H;                  /* [npieces] */
    double bound;
} FitMemo;
struct SrcFitMemo {
    int next;                     /* the slot the next answer takes */
    FitMemo e[FIT_MEMO];
};

double src_fitmem_bound(Src *s, const SrcGroup *G, const SrcCand *k, const SrcPiece *H)
{
    struct SrcFitMemo *M = s->fit_memo;
    size_t hb = sizeof(SrcPiece) * (size_t)s->npieces;
    if (!M) {
        M = s->fit_memo = ir_xcalloc(1, sizeof *M);
        for (int i = 0; i < FIT_MEMO; i++)
            M->e[i].H = ir_xmalloc(hb + sizeof(SrcPiece));
    }
    bool classes = s->floor_cls && s->floor_cnt;
    for (int i = 0; i < FIT_MEMO; i++) {
        const FitMemo *e = &M->e[i];
        if (!e->used || e->pp != k->pp || e->v != k->v || e->sched != k->sched || e->rc != k->rc ||
            e->zero != k->zero || e->dp != G->dp || e->cp != G->cp || e->tp != G->tp || e->fold != G->fold ||
            e->b != G->b || e->sp != G->sp || e->floor_id != G->floor_id || e->classes != classes ||
            memcmp(e->H, H, hb) != 0)
            continue;
        if (src_check(s)) { /* computed again: the same bits */
            double b = fitmem_bound(s, G, k, H);
            if (memcmp(&b, &e->bound, sizeof b) != 0)
                ir_die("search: remembered memory-forced bound %.17g, %.17g computed (pp %d v %d)", e->bound, b,
                       k->pp, k->v);
        }
        return e->bound;
    }
    double b = fitmem_bound(s, G, k, H);
    FitMemo *e = &M->e[M->next];
    M->next = (M->next + 1) % FIT_MEMO;
    e->used = true, e->sp = G->sp, e->classes = classes;
    e->dp = G->dp, e->cp = G->cp, e->tp = G->tp, e->fold = G->fold, e->b = G->b;
    e->pp = k->pp, e->v = k->v, e->sched = k->sched, e->rc = k->rc, e->zero = k->zero;
    e->floor_id = G->floor_id;
    memcpy(e->H, H, hb);
    e->bound = b;
    return b;
}

void src_fitmem_free(Src *s)
{
    struct SrcFitMemo *M = s->fit_memo;
    for (int i = 0; M && i < FIT_MEMO; i++)
        free(M->e[i].H);
    free(M);
    s->fit_memo = NULL;
}
