/* search_dp.c: cutting the pieces into pipeline stages.
 *
 * 1F1B. pass_predict's pipeline term grows with tmax and tsum (a reference
 * stack's m * tmax + (tsum - tmax); the simulation of ptdc's schedule, about
 * the same for balanced stages): with the per-piece costs summed into
 * stages, tsum does not depend on the cuts (only on the recomputation stages
 * need), so the partition minimises tmax, the
 * slowest stage, under each stage's memory limit (its model states plus
 * min(m, pp - s) micro-batches of activations must fit). Alpa enumerates
 * t_max and runs a DP for each; here stage costs only grow as a stage takes
 * more pieces, so for a given t_max the greedy cut (each stage takes as many
 * pieces as it can while leaving one per later stage) fits whenever any cut
 * does: if some cut fits, by induction each greedy stage ends no earlier than
 * that cut's, and the suffix the greedy leaves is a suffix of that cut's.
 * Bisection over t_max then finds the least feasible one. Recomputation is
 * chosen per stage: among the allowed policies, the fastest that fits.
 *
 * Interleaved (v chunks per pipeline rank): the layers are cut into pp * v
 * chunks by cost (cost_split; chunks may differ, the end ones may hold the
 * embedding or the head alone), the pieces before the repeat join the first
 * chunk and those after it the last; each rank takes the fastest policy
 * that fits for all its chunks, their activations held as pass_predict
 * holds them (plan_schedule_acts). */
#include "search/src.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { DP_ROOM = 4096 };
typedef struct {
    const Src *s;
    const SrcVariant *V;
    const SrcCand *k;
    int P, pp, m;
    const double *wst[SRC_NRC];   /* V->wsmax's table of each policy under the candidate's ZeRO
                                     stage (NULL: none; stage_ws) */
    int wslev;                    /* their levels (the prefix maxima's row) */
    int nrc, rcs[SRC_NRC];        /* allowed policies */
    double *T[SRC_NRC], *S[SRC_NRC], *W; /* prefix sums: time, saved, states */
    double *infl;                 /* [pp] 1F1B micro-batches in flight per stage (the greedy
                                     asks for them in its inner loop) */
    double *WS;                   /* prefix sums of the W slots' bytes (SrcPiece.wsaved; NULL: the
                                     schedule holds none, or not as a static arena) */
    double *wsl;                  /* [pp] a split schedule's W slots per stage (plan_schedule_wslots) */
    double runtime, cap;
    bool ignore_mem;
    int ef, el;                   /* the first / last chunk may hold no layer (interleaved
                                     cuts with more chunks than layers) */
    /* The arrays above are carved from room (DP_ROOM doubles, in the
     * caller's frame) or, for a model too large for it, from block (heap;
     * NULL: none): init_dp runs 40,000 times in a DeepSeek-V3 search, and
     * ten callocs each cost more than its sums. Last: init_dp clears what
     * comes before it only. */
    double *block;
    double room[DP_ROOM];
} Dp;

static double stage_time(const Dp *d, int r, int i, int j) { return d->T[r][j + 1] - d->T[r][i]; }

/* A variant's range-maximum tables (SrcVariant.wsmax): one per policy r
 * the search weighs (src_rc_on) and ZeRO-3 or not, of each piece's ws,
 * plus the bytes a layer recomputed under r holds beyond what r keeps
 * (pass_predict's recompute_ws: its saved bytes without recomputation less
 * r's; 0 where NONE is not searched), plus under ZeRO-3 z3buf. Levels
 * 0 .. L-1 of a table, then a row of prefix maxima (stage_over's quick
 * answer). Only the policies weighed and, where a pinned --zero rules it
 * out, no ZeRO-3 half: a search keeps a thousand variants and more. */

/* Levels of a variant's range-maximum tables over P pieces. */
static int ws_levels(int P)
{
    int l = 1;
    while ((1 << l) <= P)
        l++;
    return l;
}

/* Policy r's table among a half's (-1: not weighed); *n: a half's tables. */
static int ws_slot(const Src *s, int r, int *n)
{
    int pin = s->o->pins.recompute;
    *n = PLAN_RECOMPUTE_FULL + 1 + (pin > PLAN_RECOMPUTE_FULL);
    return r <= PLAN_RECOMPUTE_FULL ? r : src_rc_on(s, r) ? PLAN_RECOMPUTE_FULL + 1 : -1;
}

static bool ws_zero3(const Src *s) { return s->o->pins.zero < 0 || s->o->pins.zero >= 3; }

/* Policy r's table under ZeRO-3 or not, of L levels (NULL: none made). */
static const double *ws_table(const Src *s, const SrcVariant *V, int r, bool z3, int L)
{
    int n, slot = ws_slot(s, r, &n);
    if (!V->wsmax || slot < 0 || (z3 && !ws_zero3(s)))
        return NULL;
    return &V->wsmax[(size_t)(z3 * n + slot) * (size_t)(L + 1) * (size_t)s->npieces];
}

void src_variant_ws(const Src *s, SrcVariant *V)
{
    int P = s->npieces, L = ws_levels(P), n;
    ws_slot(s, 0, &n);
    bool none = src_rc_on(s, PLAN_RECOMPUTE_NONE);
    free(V->wsmax);
    V->wsmax = ir_xmalloc(sizeof(double) * (size_t)((1 + ws_zero3(s)) * n) * (size_t)(L + 1) * (size_t)P);
    for (int q = 0; q < 2 * SRC_NRC; q++) {
        int r = q % SRC_NRC;
        bool z3 = q >= SRC_NRC;
        double *t = (double *)ws_table(s, V, r, z3, L);
        if (!t)
            continue; /* a policy or ZeRO stage no candidate takes */
        for (int p = 0; p < P; p++) {
            const SrcPiece *x = &V->piece[p];
            double rws = none ? src_fmax(0, x->saved[PLAN_RECOMPUTE_NONE] - x->saved[r]) : 0;
            t[p] = x->ws + rws + (z3 ? x->z3buf : 0);
        }
        for (int l = 1; l < L; l++)
            for (int p = 0; p + (1 << l) <= P; p++)
                t[(size_t)l * P + p] = src_fmax(t[(size_t)(l - 1) * P + p], t[(size_t)(l - 1) * P + p + (1 << (l - 1))]);
        double *pre = &t[(size_t)L * P];
        for (int p = 0; p < P; p++)
            pre[p] = p ? src_fmax(pre[p - 1], t[p]) : t[p];
    }
}

/* What a stage holds beyond its states and activations at its peak under
 * policy r, as pass_predict counts it at least: the largest over its
 * pieces of a node's backward working set plus, recomputing, the layer's
 * dropped bytes, plus under ZeRO-3 the gathered weights' buffers (one
 * piece's sum: at most the sum of the three largests pass_predict adds). */
static double stage_ws(const Dp *d, int r, int i, int j)
{
    const double *t = d->wst[r];
    if (!t)
        return 0;
    int l = 31 - __builtin_clz((unsigned)(j - i + 1));
    t += (size_t)l * (size_t)d->P;
    return src_fmax(t[i], t[j + 1 - (1 << l)]);
}

/* A stage's states, activations and runtime: stage_mem without stage_ws. */
static double stage_base(const Dp *d, int st, int r, int i, int j)
{
    double m = d->runtime + d->W[j + 1] - d->W[i] + d->infl[st] * (d->S[r][j + 1] - d->S[r][i]);
    return d->WS ? m + d->wsl[st] * (d->WS[j + 1] - d->WS[i]) : m;
}

static double stage_mem(const Dp *d, int st, int r, int i, int j)
{
    return stage_base(d, st, r, i, j) + stage_ws(d, r, i, j);
}

/* stage_mem(...) > d->cap, the range looked up only where the largest of
 * pieces 0..j (a row of the table) would decide otherwise: the cuts ask it
 * in their inner loops. */
static bool stage_over(const Dp *d, int st, int r, int i, int j)
{
    double b = stage_base(d, st, r, i, j);
    if (b > d->cap)
        return true;
    if (!d->wst[r] || b + d->wst[r][(size_t)d->wslev * (size_t)d->P + (size_t)j] <= d->cap)
        return false;
    return b + stage_ws(d, r, i, j) > d->cap;
}

/* The times a greedy cut compared with its tmax: the largest within it
 * and the least above it. Another tmax at or above `in` (and below the
 * first) or below `out` (and above it) gets every one of those comparisons
 * the same way, so the cut takes the same path to the same answer
 * (part_1f1b's and cost_split's bisections cut only when neither holds). */
typedef struct Seen {
    double in, out;
} Seen;

/* !(t > tmax), noted in w (a NaN t is never above tmax, whatever it is) */
static bool within(double t, double tmax, Seen *w)
{
    if (t > tmax) {
        if (w && t < w->out)
            w->out = t;
        return false;
    }
    if (w && t <= tmax && t > w->in)
        w->in = t;
    return true;
}

/* t <= tmax, noted in w (a NaN t is never within it, whatever it is) */
static bool at_most(double t, double tmax, Seen *w)
{
    if (t <= tmax) {
        if (w && t > w->in)
            w->in = t;
        return true;
    }
    if (w && t > tmax && t < w->out)
        w->out = t;
    return false;
}

/* Whether a bisection's cut under mid is already decided by the cuts at its
 * ends (at_hi fit, at_lo did not): true with *fits set, false to cut. */
static bool seen_decides(const Seen *at_hi, const Seen *at_lo, double mid, bool *fits)
{
    if (mid >= at_hi->in)
        *fits = true;
    else if (mid < at_lo->out)
        *fits = false;
    else
        return false;
    return true;
}

/* The policy stage st should use for pieces i..j under tmax, or -1. Without
 * memory limits (a not-fitting plan to explain), the leanest policy. */
static int stage_rc(const Dp *d, int st, int i, int j, double tmax, Seen *w)
{
    int best = -1;
    double bt = INFINITY;
    for (int x = 0; x < d->nrc; x++) {
        int r = d->rcs[x];
        double t = stage_time(d, r, i, j);
        if (d->ignore_mem) {
            if (best < 0 || stage_mem(d, st, r, i, j) < stage_mem(d, st, best, i, j))
                best = r;
            continue;
        }
        if (!within(t, tmax, w) || stage_over(d, st, r, i, j))
            continue;
        if (t < bt * (1 - 1e-12))
            best = r, bt = t;
    }
    if (d->ignore_mem && best >= 0 && !within(stage_time(d, best, i, j), tmax, w))
        return -1;
    return best;
}

/* stage_rc(d, st, i, j, tmax, w) >= 0, asked for every piece the greedy
 * cuts try, of which only the last one's policy is kept: the first policy
 * that stage_rc would take ends it. */
static bool stage_fits(const Dp *d, int st, int i, int j, double tmax, Seen *w)
{
    if (d->ignore_mem)
        return stage_rc(d, st, i, j, tmax, w) >= 0;
    for (int x = 0; x < d->nrc; x++) {
        int r = d->rcs[x];
        double t = stage_time(d, r, i, j);
        /* stage_rc's test, and its first pick: below bt = INFINITY */
        if (within(t, tmax, w) && t < INFINITY && !stage_over(d, st, r, i, j))
            return true;
    }
    return false;
}

/* Greedy cut under tmax; ends[st] = last piece of stage st; w (or NULL)
 * the times it compared with tmax. */
static bool greedy(const Dp *d, double tmax, int *ends, int *rc, Seen *w)
{
    int i = 0;
    for (int st = 0; st < d->pp; st++) {
        int left = d->pp - st - 1, jmax = d->P - 1 - left;
        if (st == d->pp - 1) {
            int r = stage_rc(d, st, i, d->P - 1, tmax, w);
            if (r < 0)
                return false;
            ends[st] = d->P - 1;
            rc[st] = r;
            return true;
        }
        int j = i - 1;
        while (j + 1 <= jmax && stage_fits(d, st, i, j + 1, tmax, w))
            j++;
        if (j < i)
            return false;
        ends[st] = j;
        rc[st] = stage_rc(d, st, i, j, tmax, w);
        i = j + 1;
    }
    return false;
}

static void init_dp(Dp *d, const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k,
                    double cap, bool ignore_mem)
{
    memset(d, 0, offsetof(Dp, room)); /* (room: written before it is read) */
    d->s = s, d->V = V, d->k = k;
    d->P = s->npieces, d->pp = k->pp, d->m = G->m;
    d->wslev = ws_levels(d->P);
    for (int r = 0; r < SRC_NRC; r++)
        d->wst[r] = ws_table(s, V, r, k->zero >= 3, d->wslev);
    d->cap = cap, d->ignore_mem = ignore_mem;
    d->runtime = pass_runtime_bytes(s->c, &G->mesh, k->pp);
    if (k->rc != SRC_AUTO) {
        d->rcs[d->nrc++] = k->rc;
    } else {
        /* A policy that keeps exactly what a lighter one keeps, for no less
         * time, is never better (SELECTIVE under a flash kernel). */
        for (int r = 0; r <= PLAN_RECOMPUTE_FULL; r++) { /* Megatron's module sets: pinned only */
            if (!pass_stack_has_recompute(&s->c->st, r))
                continue; /* the stack does not offer it */
            bool same = false;
            for (int x = 0; x < d->nrc && !same; x++) {
                int q = d->rcs[x];
                same = true;
                for (int p = 0; p < d->P && same; p++)
                    same = V->piece[p].saved[r] >= V->piece[p].saved[q] &&
                           V->piece[p].rec[r] >= V->piece[p].rec[q];
            }
            if (!same)
                d->rcs[d->nrc++] = r;
        }
    }
    bool ws = s->wslots && plan_schedule_split(k->sched) && k->v == 1;
    size_t P1 = (size_t)d->P + 1, pp = (size_t)d->pp;
    size_t need = P1 * (2 * (size_t)d->nrc + 1 + (ws ? 1 : 0)) + pp * (ws ? 2 : 1);
    double *b = need <= DP_ROOM ? d->room : (d->block = ir_xmalloc(need * sizeof(double)));
    for (int x = 0; x < d->nrc; x++) {
        int r = d->rcs[x];
        double keep = src_offload_keep(s, k->pp, r); /* activation offloading's share kept */
        d->T[r] = b, b += P1;
        d->S[r] = b, b += P1;
        d->T[r][0] = d->S[r][0] = 0;
        for (int p = 0; p < d->P; p++) {
            const SrcPiece *P = &V->piece[p];
            d->T[r][p + 1] = d->T[r][p] + P->fwd + P->bwd + P->rec[r] + P->rs_f + P->rs_b;
            d->S[r][p + 1] = d->S[r][p] + P->saved[r] * (s->g->pieces[p].rep >= 0 ? keep : 1);
        }
    }
    d->W = b, b += P1;
    d->W[0] = 0;
    for (int p = 0; p < d->P; p++)
        d->W[p + 1] = d->W[p] + V->piece[p].states[k->zero];
    d->infl = b, b += pp;
    for (int st = 0; st < d->pp; st++)
        d->infl[st] = src_inflight(d->pp, 1, d->m, st);
    /* ZB-H1 also holds what the deferred weight gradients read, in W slots
     * of their own on top of the 1F1B micro-batches (plan_schedule_acts's
     * static arena, ptdc's programs; a caching allocator's peak is below
     * the sum): counted so that the cut fits as pass_predict counts it. */
    if (ws) {
        int z = k->zero >= 2;
        d->WS = b, b += P1;
        d->WS[0] = 0;
        for (int p = 0; p < d->P; p++)
            d->WS[p + 1] = d->WS[p] + V->piece[p].wsaved[z];
        d->wsl = b;
        for (int st = 0; st < d->pp; st++)
            d->wsl[st] = plan_schedule_wslots((PlanSchedule)k->sched, d->pp, d->m, st);
    }
}

static void free_dp(Dp *d) { free(d->block); }

/* Chunks from layer counts: chunk c runs layers[c] layers, the pieces
 * before the repeat join the first chunk, those after it the last. */
static void chunks_of_layers(const Src *s, int chunks, int pp, const int *layers, SrcPart *out)
{
    out->nstages = chunks;
    for (int c = 0, l = s->rep_first; c < chunks; c++) {
        int first = c == 0 ? 0 : l;
        l += layers[c];
        int last = c == chunks - 1 ? s->npieces - 1 : l - 1;
        out->stage[c] = (PlanStage){first, last - first + 1, c % pp, PLAN_RECOMPUTE_NONE};
    }
}

/* 1F1B with the stages --pp-layers pins: each the fastest policy that fits. */
static bool part_1f1b_pinned(Dp *d, const int *layers, SrcPart *out)
{
    chunks_of_layers(d->s, d->pp, d->pp, layers, out);
    out->mem_peak = 0;
    for (int st = 0; st < d->pp; st++) {
        PlanStage *S = &out->stage[st];
        int i = S->first_piece, j = i + S->npieces - 1, r = stage_rc(d, st, i, j, INFINITY, NULL);
        if (r < 0)
            return false;
        S->recompute = (PlanRecompute)r;
        out->mem_peak = fmax(out->mem_peak, stage_mem(d, st, r, i, j));
    }
    return true;
}

static bool part_1f1b(Dp *d, SrcPart *out)
{
    int pp = d->pp, layers[PLAN_MAX_STAGES];
    if (pp > 1 && src_split_pin(d->s, pp, 1, layers, NULL, 0) > 0)
        return part_1f1b_pinned(d, layers, out);
    int *ends = ir_xmalloc(sizeof(int) * (size_t)pp), *rc = ir_xmalloc(sizeof(int) * (size_t)pp);
    double hi = 0;
    for (int x = 0; x < d->nrc; x++)
        hi = fmax(hi, d->T[d->rcs[x]][d->P]);
    hi = hi * (1 + 1e-9) + 1e-12;
    Seen at_hi = {-INFINITY, INFINITY}, at_lo = {-INFINITY, -INFINITY};
    bool ok = greedy(d, hi, ends, rc, &at_hi);
    if (ok) {
        double lo = 0;
        for (int it = 0; it < 100 && hi - lo > 1e-9 * hi; it++) {
            double mid = 0.5 * (lo + hi);
            /* The cut at hi fits and the one at lo does not: a mid that
             * gets all the comparisons of one of them its way answers the
             * same without cutting (Seen); most of the later steps do. */
            bool fits = false, known = seen_decides(&at_hi, &at_lo, mid, &fits);
            if (known && src_check(d->s) && greedy(d, mid, ends, rc, NULL) != fits)
                ir_die("search: the stage cut under %.17g %s, not as the cut under %.17g", mid,
                       fits ? "does not fit" : "fits", fits ? hi : lo);
            if (!known) {
                Seen w = {-INFINITY, INFINITY};
                fits = greedy(d, mid, ends, rc, &w);
                if (fits)
                    at_hi = w;
                else
                    at_lo = w;
            }
            if (fits)
                hi = mid;
            else
                lo = mid;
        }
        greedy(d, hi, ends, rc, NULL);
        out->nstages = pp;
        out->mem_peak = 0;
        for (int st = 0, i = 0; st < pp; st++) {
            out->stage[st] = (PlanStage){i, ends[st] - i + 1, st, (PlanRecompute)rc[st]};
            out->mem_peak = fmax(out->mem_peak, stage_mem(d, st, rc[st], i, ends[st]));
            i = ends[st] + 1;
        }
    }
    free(ends);
    free(rc);
    return ok;
}

/* Can the pieces from i0 on be cut into n chunks of at most tmax each,
 * at least one layer a chunk but the ends d->ef / d->el allow empty (the
 * first chunk of the model takes the pieces before the repeat, the last
 * those after it)? ends[] the greedy's (each chunk as long as it can be),
 * or NULL. */
static bool chunk_greedy(const Dp *d, const double *t, int i0, int n, double tmax, int *ends, Seen *w)
{
    const Src *s = d->s;
    int i = i0, lend = s->rep_first + s->rep_count; /* one past the last layer */
    for (int c = 0; c < n; c++) {
        int j;
        if (c == n - 1) {
            if (!within(t[d->P] - t[i], tmax, w) || i >= lend + d->el)
                return false;
            j = d->P - 1;
        } else {
            int jmax = lend - 1 - (n - 1 - c - d->el), jmin = i == 0 ? s->rep_first - d->ef : i;
            j = i - 1;
            while (j + 1 <= jmax && (j + 1 <= jmin || at_most(t[j + 2] - t[i], tmax, w)))
                j++;
            if (j < jmin || !within(t[j + 1] - t[i], tmax, w))
                return false;
        }
        if (ends)
            ends[c] = j;
        i = j + 1;
    }
    return true;
}

/* The layers of each chunk by cost: the least slowest chunk (bisection on
 * tmax, as for 1F1B), then each boundary as near the even share of the
 * total time as tmax allows (the greedy alone would leave the last chunks
 * short), so the embedding's and the head's chunks take fewer layers when
 * that balances. Times at the first allowed policy. */
static void cost_split(const Dp *d, int chunks, int *layers)
{
    const Src *s = d->s;
    const double *t = d->T[d->rcs[0]];
    int *ends = ir_xmalloc(sizeof(int) * (size_t)chunks);
    double hi = t[d->P] * (1 + 1e-9) + 1e-12, lo = 0;
    /* as part_1f1b's bisection: none known to fit or fail before the first
     * cuts */
    Seen at_hi = {INFINITY, INFINITY}, at_lo = {-INFINITY, -INFINITY};
    for (int it = 0; it < 100 && hi - lo > 1e-9 * hi; it++) {
        double mid = 0.5 * (lo + hi);
        bool fits = false, known = seen_decides(&at_hi, &at_lo, mid, &fits);
        if (known && src_check(d->s) && chunk_greedy(d, t, 0, chunks, mid, NULL, NULL) != fits)
            ir_die("search: the chunk cut under %.17g %s, not as the cut under %.17g", mid,
                   fits ? "does not fit" : "fits", fits ? hi : lo);
        if (!known) {
            Seen w = {-INFINITY, INFINITY};
            fits = chunk_greedy(d, t, 0, chunks, mid, NULL, &w);
            if (fits)
                at_hi = w;
            else
                at_lo = w;
        }
        if (fits)
            hi = mid;
        else
            lo = mid;
    }
    chunk_greedy(d, t, 0, chunks, hi, ends, NULL);
    /* The latest end of each chunk is the greedy's; walk the boundaries
     * towards the even shares while the rest still cuts under hi. */
    int prev = -1, lend = s->rep_first + s->rep_count;
    for (int c = 0; c < chunks - 1; c++) {
        double target = t[d->P] * (c + 1) / chunks;
        int best = ends[c];
        for (int j = ends[c]; j >= (c == 0 ? s->rep_first - d->ef : prev + 1); j--) {
            if (t[j + 1] - t[prev + 1] > hi)
                break;
            if (j > lend - 1 - (chunks - 1 - c - d->el))
                continue;
            /* and the rest from j + 1 still cuts into the chunks left under hi */
            if (fabs(t[j + 1] - target) < fabs(t[best + 1] - target) &&
                chunk_greedy(d, t, j + 1, chunks - 1 - c, hi, NULL, NULL))
                best = j;
        }
        ends[c] = best;
        prev = best;
    }
    for (int c = 0, i = 0; c < chunks; c++) {
        int a = c == 0 ? s->rep_first : i, b = c == chunks - 1 ? lend - 1 : ends[c];
        layers[c] = b - a + 1;
        i = ends[c] + 1;
    }
    free(ends);
}

static bool part_interleaved(Dp *d, SrcPart *out)
{
    const Src *s = d->s;
    int pp = d->pp, v = d->k->v, chunks = pp * v;
    int layers[PLAN_MAX_STAGES];
    /* More chunks than layers (v_ok allows up to two more): the end chunks
     * may hold the embedding or the head alone, as Megatron's
     * account_for_*_in_pipeline_split does. */
    if (chunks > s->rep_count) {
        d->ef = s->rep_first > 0;
        d->el = s->rep_first + s->rep_count < s->npieces;
    }
    if (src_split_pin(s, pp, v, layers, NULL, 0) <= 0)
        cost_split(d, chunks, layers);
    chunks_of_layers(s, chunks, pp, layers, out);
    out->mem_peak = 0;
    for (int r = 0; r < pp; r++) {
        int best = -1;
        double bt = INFINITY, bm = INFINITY;
        for (int x = 0; x < d->nrc; x++) {
            int q = d->rcs[x];
            double t = 0, w = 0, sv[PLAN_MAX_CHUNKS], ws = 0;
            for (int c = r; c < chunks; c += pp) {
                const PlanStage *S = &out->stage[c];
                int i = S->first_piece, j = i + S->npieces - 1;
                t += d->T[q][j + 1] - d->T[q][i];
                sv[c / pp] = d->S[q][j + 1] - d->S[q][i];
                w += d->W[j + 1] - d->W[i];
                if (S->npieces > 0)
                    ws = src_fmax(ws, stage_ws(d, q, i, j));
            }
            /* Each chunk's own bytes through the schedule, as pass_predict
             * holds them: a static arena's slots, or a caching allocator's
             * peak of what is alive at once (--stack megatron), which is
             * less; the mean slots of the static arena would refuse
             * uneven cuts such a stack runs without recomputation. */
            double mem = d->runtime + w + ws + plan_schedule_acts(v > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B, pp, v, d->m, r, sv, NULL,
                                                             d->s->c->st.ref_stack);
            bool take = d->ignore_mem ? mem < bm : mem <= d->cap && t < bt * (1 - 1e-12);
            if (take)
                best = q, bt = t, bm = mem;
        }
        if (best < 0)
            return false;
        for (int c = r; c < chunks; c += pp)
            out->stage[c].recompute = (PlanRecompute)best;
        out->mem_peak = fmax(out->mem_peak, bm);
    }
    return true;
}

bool src_partition(const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k,
                   double cap, bool ignore_mem, SrcPart *out)
{
    if (k->pp * k->v > (int)(sizeof out->stage / sizeof out->stage[0]))
        ir_die("search: %d pipeline stages", k->pp * k->v);
    Dp d;
    init_dp(&d, s, G, V, k, cap, ignore_mem);
    bool ok = k->v > 1 ? part_interleaved(&d, out) : part_1f1b(&d, out);
    free_dp(&d);
    return ok;
}

/* Greedy cut for src_pipe_floor: stage st may take t <= (T - beta prefix) / c_st,
 * prefix the fastest policy's time of the pieces before it; c_st = m
 * (1F1B, beta 1), or beta m + (1 - beta) (m - st - 1)+ (split). w (or
 * NULL): the comparisons it made, as T's (each stage's Seen moved by its
 * own c_st and prefix, and the test of a stage's share against 0): another
 * T at or above w->in and below w->out takes the same path to the same
 * answer. */
static bool greedy_pipe(const Dp *d, const double *pre, double T, bool split, double beta, Seen *w)
{
    int i = 0;
    for (int st = 0; st < d->pp; st++) {
        double c = split ? beta * d->m + (1 - beta) * fmax(0, d->m - st - 1) : d->m;
        double off = split ? beta * pre[i] : pre[i];
        double cap_t = (T - off) / c;
        bool ok;
        Seen ws = {-INFINITY, INFINITY};
        if (cap_t < 0)
            ok = false, ws.out = 0;
        else {
            ws.in = 0;
            int jmax = st == d->pp - 1 ? d->P - 1 : d->P - 1 - (d->pp - st - 1), j = i - 1;
            if (st == d->pp - 1)
                ok = stage_rc(d, st, i, d->P - 1, cap_t, &ws) >= 0;
            else {
                while (j + 1 <= jmax && stage_fits(d, st, i, j + 1, cap_t, &ws))
                    j++;
                ok = j >= i;
            }
            i = j + 1;
        }
        /* t <= cap_t exactly when T >= t c + off; a hair on the safe side of
         * each for the rounding between the two forms. */
        if (w) {
            if (ws.in > -INFINITY)
                w->in = fmax(w->in, (ws.in * c + off) * (1 + 1e-12) + 1e-300);
            if (ws.out < INFINITY)
                w->out = fmin(w->out, (ws.out * c + off) * (1 - 1e-12));
        }
        if (!ok || st == d->pp - 1)
            return ok;
    }
    return false;
}

double src_pipe_floor(const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k, double cap,
                      double beta, double stop, bool only)
{
    bool split = plan_schedule_split(k->sched);
    if (split && !(beta > 0))
        return 0;
    Dp d;
    init_dp(&d, s, G, V, k, cap, false);
    double *pre = ir_xcalloc((size_t)d.P + 1, sizeof(double)), hi = 0;
    for (int p = 0; p < d.P; p++) {
        double t = INFINITY;
        for (int x = 0; x < d.nrc; x++)
            t = src_fmin(t, d.T[d.rcs[x]][p + 1] - d.T[d.rcs[x]][p]);
        pre[p + 1] = pre[p] + t;
    }
    for (int x = 0; x < d.nrc; x++)
        hi = src_fmax(hi, d.T[d.rcs[x]][d.P]);
    hi = (d.m + 1) * hi * (1 + 1e-9) + 1e-12;
    double lo = 0, out = INFINITY;
    if (stop < hi && !greedy_pipe(&d, pre, stop, split, beta, NULL))
        out = stop; /* no cut within stop: at least stop (greedy_pipe only fits more as T grows) */
    else if (only && stop < hi)
        out = 0; /* some cut is: nothing more was asked */
    else if (greedy_pipe(&d, pre, hi, split, beta, NULL)) {
        /* Bisection, each end moved to the comparison nearest it that
         * would change the cut's path (greedy_pipe's w): a fit at mid fits
         * from w.in up, a miss misses below w.out. The ends then close on
         * the least T that fits within a few steps, not forty. */
        for (int it = 0; it < 100 && hi - lo > 1e-9 * hi; it++) {
            double mid = 0.5 * (lo + hi);
            Seen w = {-INFINITY, INFINITY};
            if (greedy_pipe(&d, pre, mid, split, beta, &w))
                hi = src_fmax(lo, src_fmin(mid, w.in));
            else
                lo = src_fmin(hi, src_fmax(mid, w.out));
        }
        out = lo;
    }
    free(pre);
    free_dp(&d);
    return out;
}

void src_stage_times(const Src *s, const SrcVariant *V, const Plan *p, double *fwd, double *bwd)
{
    (void)s;
    for (int st = 0; st < p->nstages; st++) {
        const PlanStage *S = &p->stages[st];
        fwd[st] = bwd[st] = 0;
        for (int q = S->first_piece; q < S->first_piece + S->npieces; q++) {
            const SrcPiece *P = &V->piece[q];
            fwd[st] += P->fwd + P->rs_f;
            bwd[st] += P->bwd + P->rec[S->recompute] + P->rs_b;
        }
    }
}
