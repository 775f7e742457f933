/* search_fitmem.c: the recomputation memory forces on an interleaved
 * candidate, as a lower bound on the step of its plans that fit
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

/* The layers of the run, their floors sorted one quantity at a time. */
typedef struct FitMem {
    int nq, N;
    int q[SRC_NRC];               /* the policies weighed */
    double *t[SRC_NRC];           /* [N + 1] prefix sums of the least times ascending, per policy */
    double *sv[SRC_NRC];          /* [N] saved bytes ascending, per policy */
    double *st;                   /* [N + 1] prefix sums of the least states ascending */
    double t1;                    /* the least time of one layer (any policy) */
    double avail;                 /* usable HBM less the runtime term */
    int cls;                      /* one floor class (its layers share a strategy), or -1 */
} FitMem;

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
    for (int i = 0; i < F->nq; i++) {
        F->t[i] = ir_xmalloc(sizeof(double) * (size_t)(N + 1));
        F->sv[i] = ir_xmalloc(sizeof(double) * (size_t)(N + 1));
        for (int l = 0; l < N; l++) {
            const SrcPiece *P = &H[lay[l]];
            x[l] = P->fwd + P->rec[F->q[i]];
            F->sv[i][l] = P->saved[F->q[i]];
            F->t1 = fmin(F->t1, P->fwd);
        }
        qsort(x, (size_t)N, sizeof *x, cmp_dbl);
        qsort(F->sv[i], (size_t)N, sizeof *x, cmp_dbl);
        F->t[i][0] = 0;
        for (int l = 0; l < N; l++)
            F->t[i][l + 1] = F->t[i][l] + x[l];
    }
    F->st = ir_xmalloc(sizeof(double) * (size_t)(N + 1));
    for (int l = 0; l < N; l++)
        x[l] = H[lay[l]].states[k->zero];
    qsort(x, (size_t)N, sizeof *x, cmp_dbl);
    F->st[0] = 0;
    for (int l = 0; l < N; l++)
        F->st[l + 1] = F->st[l] + x[l];
    free(x);
    free(lay);
    F->avail = s->usable - pass_runtime_bytes(s->c, &G->mesh, k->pp);
}

static void fitmem_free(FitMem *F)
{
    for (int i = 0; i < F->nq; i++) {
        free(F->t[i]);
        free(F->sv[i]);
    }
    free(F->st);
}

/* f[r * (N + 1) + n]: the least m x rank r's time per micro-batch plus the
 * first chunks of the ranks before it when it holds n of F's layers
 * (INFINITY: it cannot, within the usable HBM, or not n layers at all);
 * lo[r] the least count it holds. */
static void rank_times(const FitMem *F, const SrcGroup *G, const SrcCand *k, bool ef, bool el,
                       int N, int *lo, double *f)
{
    int pp = k->pp, v = k->v, m = G->m, chunks = pp * v;
    double *w = ir_xmalloc(sizeof(double) * (size_t)(v + 1));
    for (int r = 0; r < pp; r++) {
        int slots[PLAN_MAX_CHUNKS];
        plan_schedule_slots(pp, v, m, r, slots);
        int nw = 0, smin = slots[0];
        for (int j = 0; j < v; j++) {
            int c = j * pp + r;
            smin = slots[j] < smin ? slots[j] : smin;
            if (!((c == 0 && ef) || (c == chunks - 1 && el)))
                w[nw++] = slots[j];
        }
        qsort(w, (size_t)nw, sizeof *w, cmp_dbl); /* ascending; read from the end */
        lo[r] = nw;
        /* the first chunks of ranks 0 .. r-1, one layer each at least */
        double before = (r - (ef && r > 0 ? 1 : 0)) * F->t1;
        double acts[SRC_NRC] = {0}; /* of the first n layers, per policy */
        for (int n = 0; n <= N; n++) {
            double best = INFINITY;
            for (int i = 0; i < F->nq && n > 0 && n <= F->N; i++)
                /* the smallest saved bytes with the largest weights
                 * (rearrangement: no pairing of these layers weighs less) */
                acts[i] += (n - 1 < nw ? w[nw - n] : smin) * F->sv[i][n - 1];
            for (int i = 0; i < F->nq && n >= lo[r] && n <= F->N; i++) {
                double mem = F->st[n] + acts[i];
                if (mem > F->avail)
                    continue;
                double t = F->t[i][n];
                /* One class: its layers share one strategy, so each holds
                 * at most 1/n of the states the activations leave, and
                 * the leaner strategies that forces cost time. */
                if (F->cls >= 0 && n > 0 && G->floor_t) {
                    double x = (F->avail - (mem - F->st[n])) / n;
                    double d = src_fit_delta(G, F->cls, k->zero, x);
                    /* the floor of the class's layer raised by d (H's time
                     * may be the strategy-free bound, above the floor: the
                     * larger of the two, not their sum) */
                    t = fmax(t, n * (G->floor_t[(F->cls * SRC_NRC + F->q[i]) * 4 + k->zero] + d));
                }
                best = fmin(best, t);
            }
            f[r * (N + 1) + n] = before + m * best;
        }
    }
    free(w);
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

double src_fitmem_bound(const Src *s, const SrcGroup *G, const SrcCand *k, const SrcPiece *H)
{
    int pp = k->pp, v = k->v, N = s->rep_count, chunks = pp * v;
    int pins[PLAN_MAX_STAGES];
    PassShare sh;
    if (v < 2 || s->rep0 < 0 || N < 1 || s->c->st.ref_stack || src_split_pin(s, pp, v, pins, NULL, 0) != 0 ||
        pass_share(s->c->cl, pp, plan_mesh_devices(&G->mesh), &sh))
        return 0;
    /* The end chunks search_dp.c may leave without layers. */
    bool ef = false, el = false;
    if (chunks > N) {
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
    FitMem A, M;
    fitmem_init(&A, s, G, k, H, -1);
    if (maj >= 0)
        fitmem_init(&M, s, G, k, H, maj);
    int *lo = ir_xmalloc(sizeof(int) * (size_t)pp);
    double *fa = ir_xmalloc(sizeof(double) * (size_t)pp * (size_t)(N + 1));
    double *fm = ir_xmalloc(sizeof(double) * (size_t)pp * (size_t)(N + 1));
    long *gain = ir_xmalloc(sizeof(long) * (size_t)pp);
    rank_times(&A, G, k, ef, el, N, lo, fa);
    if (maj >= 0)
        rank_times(&M, G, k, ef, el, N, lo, fm);
    int need = 0;
    for (int r = 0; r < pp; r++)
        need += lo[r];
    double b = INFINITY;
    if (need <= N) {
        /* The least T at which the ranks can hold the N layers: a cap
         * changes only at some count's time (of either set), so the least
         * is one of them; holding more never takes less. */
        double *cand = ir_xmalloc(sizeof(double) * 2 * (size_t)pp * (size_t)(N + 1));
        int nc = 0;
        for (int i = 0; i < pp * (N + 1); i++) {
            if (isfinite(fa[i]))
                cand[nc++] = fa[i];
            if (maj >= 0 && isfinite(fm[i]))
                cand[nc++] = fm[i];
        }
        qsort(cand, (size_t)nc, sizeof *cand, cmp_dbl);
        int a = 0, z = nc; /* the first feasible index in [a, z) */
        while (a < z) {
            int mid = a + (z - a) / 2;
            double T = cand[mid];
            long held = 0;
            bool ok = true;
            for (int r = 0; r < pp && ok; r++) {
                int ca = cap_at(fa, r, N, lo[r], T);
                ok = ca >= lo[r];
                if (maj < 0) {
                    held += ca;
                    continue;
                }
                /* a rank that cannot hold its least of the majority
                 * class alone must be one of the K */
                int cm = cap_at(fm, r, N, lo[r], T);
                long base = cm >= lo[r] ? cm : -(long)(N + 1) * pp;
                held += base;
                gain[r] = ca - base;
            }
            if (ok && maj >= 0) {
                qsort(gain, (size_t)pp, sizeof *gain, cmp_long_desc);
                for (int r = 0; r < K && r < pp; r++)
                    held += gain[r];
            }
            if (ok && held >= N)
                z = mid;
            else
                a = mid + 1;
        }
        if (a < nc)
            b = cand[a];
        free(cand);
    }
    fitmem_free(&A);
    if (maj >= 0)
        fitmem_free(&M);
    free(gain);
    free(lo);
    free(fa);
    free(fm);
    return b;
}
