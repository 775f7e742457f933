/* frame_search.c: the best plan a framework can run. ptdc's own search
 * ranks ILP strategies and time-balanced stages, which Megatron-LM and
 * torchtitan cannot be told; re-evaluating its best few as the framework
 * lays them out misses layouts only the framework's plan makes best (LLaMA-3
 * 70B on 64 GPUs: the ten best are all uneven splits, while TP 8 fits). So
 * --emit megatron|torchtitan searches the framework's own space: every
 * degree, interleaving, micro-batch, sequence parallelism, ZeRO stage and
 * recomputation policy it offers, each priced by pass_predict on the
 * framework's plan (rep_framework_alt_of). Two facts prune it without losing
 * the best: at one micro-batch more recomputation never runs faster, and a
 * larger micro-batch never needs less memory. Pipeline splits: the even one;
 * --pp-layers as pinned (its pp x v only); and for Megatron-LM, where the
 * layers do not divide into pp x v chunks, the balanced uneven splits its
 * --decoder-first/last-pipeline-num-layers express (LLaMA-3 405B's 126
 * layers over pp 16: 7, 8 x 14, 7), and the even splits with the embedding
 * and/or the loss counted as a layer that --account-for-embedding/loss-in-
 * pipeline-split express (126 + 2 over pp 16 x v 8: 0, 1 x 126, 0). */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Search {
    const PassCostCtx *c;
    const IrGraph *g;
    const PassSearchOpts *o;
    const RepArch *A;
    RepFrameLayoutFn *ok;
    PassSearchResult *r;
    int keep;
    char *why;
    size_t wn;
    bool refused_all;             /* no layout passed ok so far */
    const int *cut;               /* layers per model chunk; NULL: the even split */
    RepFrameMemo *memo;           /* the strategies of the meshes planned so far */
} Search;

/* Keep a (fitting) among the keep fastest, best first; frees what is dropped. */
static void keep_alt(Search *S, PassSearchAlt *a)
{
    PassSearchResult *r = S->r;
    int pos = r->nalt;
    while (pos > 0 && a->pred.step_time_s < r->alt[pos - 1].pred.step_time_s)
        pos--;
    if (pos >= S->keep) {
        pass_search_alt_free(a);
        return;
    }
    if (r->nalt == S->keep) {
        pass_search_alt_free(&r->alt[S->keep - 1]);
        r->nalt--;
    }
    memmove(&r->alt[pos + 1], &r->alt[pos], sizeof *r->alt * (size_t)(r->nalt - pos));
    r->alt[pos] = *a;
    r->nalt++;
    r->found = true;
}

/* The expert all-to-all overlap (stack moe_a2a_overlap) holds more
 * activations than the schedule without it: where the layout does not fit
 * with it, the search weighs it without (Megatron runs either; --emit
 * megatron prints the flags only for a plan priced with it). */
static void without_a2a_overlap(const Search *S, PassSearchAlt *a)
{
    PassCostCtx c = *S->c;
    c.st.moe_a2a_overlap = false;
    PassPrediction p;
    pass_predict(&c, S->g, &a->plan, &p);
    if (!p.fits) {
        pass_prediction_free(&p);
        return;
    }
    pass_prediction_free(&a->pred);
    a->pred = p;
    int v = a->plan.v > 0 ? a->plan.v : 1;
    for (int s = 0; s < a->plan.nstages; s++) {
        const PassRankMem *m = &a->pred.mem[a->plan.stages[s].pp_rank];
        a->stage_fwd_s[s] = m->fwd_s / v, a->stage_bwd_s[s] = m->bwd_s / v;
    }
}

/* Evaluate one layout; 1 it fits, 0 it does not, -1 not evaluated (the
 * framework cannot run it). */
static int try(Search *S, const PlanLayout *L)
{
    char sub[512];
    if (!S->ok(S->A, L, &S->c->st, S->c->attention, sub, sizeof sub)) {
        if (S->refused_all && !S->why[0])
            snprintf(S->why, S->wn, "%s", sub);
        return -1;
    }
    PassSearchAlt a;
    bool ok = rep_framework_alt_cut_of(S->c, S->g, S->A, S->memo, L, S->cut, &a, sub, sizeof sub);
    if (!ok) {
        if (S->refused_all && !S->why[0])
            snprintf(S->why, S->wn, "%s", sub);
        return -1;
    }
    S->refused_all = false;
    S->r->stats.evaluated++;
    if (!a.pred.fits && a.pred.a2a_overlap)
        without_a2a_overlap(S, &a);
    if (a.pred.fits) {
        keep_alt(S, &a);
        return 1;
    }
    PassSearchResult *r = S->r;
    if (!r->have_closest || a.pred.peak_mem_bytes < r->closest.pred.peak_mem_bytes) {
        if (r->have_closest)
            pass_search_alt_free(&r->closest);
        r->closest = a;
        r->have_closest = true;
    } else {
        pass_search_alt_free(&a);
    }
    return 0;
}

/* The micro-batches of one (tp, pp, v, sp, zero), smallest first, each with
 * the least recomputation that fits. */
static void micro_batches(Search *S, PlanLayout L)
{
    const PassSearchPins *pin = &S->o->pins;
    const PassStack *st = &S->c->st;
    int64_t per = S->r->global_batch / L.dp; /* sequences per replica per step */
    bool too_big[PLAN_RECOMPUTE_COUNT] = {0}; /* did not fit at a smaller micro-batch */
    bool first = true;
    for (int64_t b = 1; b <= per; b++) {
        if (per % b || (pin->micro_batch && b != pin->micro_batch))
            continue;
        L.micro_batch = b;
        L.num_micro = (int)(per / b);
        if (L.v > 1 && L.num_micro % L.pp) /* both frameworks run interleaved groups of pp */
            continue;
        S->r->stats.candidates++;
        int res[PLAN_RECOMPUTE_COUNT]; /* 1 fits, 0 does not, -1 refused, -2 not evaluated */
        for (int rc = 0; rc < PLAN_RECOMPUTE_COUNT; rc++)
            res[rc] = -2;
        bool offered[PLAN_RECOMPUTE_COUNT];
        for (int rc = 0; rc < PLAN_RECOMPUTE_COUNT; rc++)
            offered[rc] = pass_stack_has_recompute(st, rc) && (pin->recompute < 0 || rc == pin->recompute);
        bool all = S->o->exhaustive; /* tests: no pruning, every policy at every micro-batch */
        if (first && offered[PLAN_RECOMPUTE_FULL] && pin->recompute < 0 && !all) {
            /* The leanest policy at the smallest micro-batch first: if it does
             * not fit, nothing of this group does (most groups of a large
             * model on few GPUs), and one evaluation says so. */
            L.recompute = 1u << PLAN_RECOMPUTE_FULL;
            res[PLAN_RECOMPUTE_FULL] = try(S, &L);
            if (res[PLAN_RECOMPUTE_FULL] <= 0) {
                S->r->stats.pruned_mem += res[PLAN_RECOMPUTE_FULL] == 0;
                break;
            }
        }
        first = false;
        /* Recomputation in order of cost: none; then core attention or the
         * MLP; then all of it. One that fits makes the costlier ones slower. */
        /* Megatron's module sets (recompute.def) only when pinned. */
        const int order[][2] = {{PLAN_RECOMPUTE_NONE, -1},
                                {PLAN_RECOMPUTE_SELECTIVE, PLAN_RECOMPUTE_FFN},
                                {PLAN_RECOMPUTE_FULL, -1},
                                {pin->recompute > PLAN_RECOMPUTE_FULL ? pin->recompute : -1, -1}};
        bool fit = false, tried = false;
        for (int step = 0; step < 4 && (!fit || all); step++)
            for (int k = 0; k < 2; k++) {
                int rc = order[step][k];
                if (rc < 0 || !offered[rc])
                    continue;
                if (too_big[rc] && !all) { /* memory only grows with the micro-batch */
                    S->r->stats.pruned_mem++;
                    continue;
                }
                if (res[rc] == -2) {
                    L.recompute = 1u << rc;
                    res[rc] = try(S, &L);
                }
                fit |= res[rc] == 1;
                tried |= res[rc] >= 0;
                too_big[rc] = res[rc] == 0;
            }
        if (!fit && !all) {
            /* Nothing the framework runs fits at b (or it runs nothing here);
             * more sequences per micro-batch only add memory. */
            S->r->stats.pruned_mem += tried;
            break;
        }
    }
}

/* Does the model's decoder form one repeat of A->layers pieces, one layer
 * each (what a split by layer counts cuts: rep_framework_alt_cut)? */
static bool one_repeat(const IrGraph *g, const RepArch *A)
{
    int first = 0, n = 0;
    while (first < g->npieces && g->pieces[first].rep < 0)
        first++;
    for (int p = first; p < g->npieces; p++)
        n += g->pieces[p].rep >= 0 && g->pieces[p].rep == g->pieces[first].rep;
    return first < g->npieces && n == A->layers;
}

enum { MAX_UNEVEN = 4, MAX_SPLITS = MAX_UNEVEN + 3 };

/* The balanced splits of L layers over pp ranks of v chunks each that
 * Megatron-LM's --decoder-first/last-pipeline-num-layers express: the ranks
 * between the first and the last m layers each (a multiple of v: each rank's
 * layers split evenly over its chunks; L / pp rounded down or up), the first
 * and last what is left, each a multiple of v, at most v apart. Chunk c
 * belongs to rank c % pp (model order), as src_split_pin lays them out. */
static int uneven_splits(int L, int pp, int v, int cuts[][PLAN_MAX_STAGES])
{
    int n = 0, lo = L / (pp * v) * v;
    for (int m = lo; m <= lo + v && n < MAX_UNEVEN; m += v) {
        if (pp > 2 && m < v)
            continue;
        int rest = L - (pp - 2) * m;
        for (int F = v; F <= rest - v && n < MAX_UNEVEN; F += v) {
            int Z = rest - F;
            if (Z % v || F - Z > v || Z - F > v)
                continue;
            bool dup = false; /* pp 2 has no middle ranks: every m gives the same */
            for (int k = 0; k < n && !dup; k++)
                dup = cuts[k][0] == F / v && cuts[k][pp - 1] == Z / v;
            if (dup)
                continue;
            for (int c = 0; c < pp * v; c++) {
                int r = c % pp;
                cuts[n][c] = (r == 0 ? F : r == pp - 1 ? Z : m) / v;
            }
            n++;
        }
        if (pp == 2)
            break;
    }
    return n;
}

/* The splits Megatron-LM's --account-for-embedding-in-pipeline-split and
 * --account-for-loss-in-pipeline-split make, appended to cuts[0..n): the
 * embedding (e) and/or the loss (l) count as one layer each, every one of
 * the pp x v chunks takes (L + e + l) / (pp x v), the first chunk e fewer
 * and the last l fewer, so none when that share is 1 (the embedding or
 * the head alone). Megatron requires L + e + l to divide by pp and the
 * share of each rank by v (TransformerConfig.__post_init__,
 * validate_args), which is L + e + l dividing by pp x v; pipelines only.
 * A split already in cuts (or the even one) is not repeated. */
static int account_splits(int L, int pp, int v, int cuts[][PLAN_MAX_STAGES], int n)
{
    int chunks = pp * v;
    for (int e = 1; e >= 0 && pp > 1; e--)
        for (int l = 1; l >= 0; l--) {
            int tot = L + e + l;
            if (!(e || l) || tot % chunks || tot < chunks)
                continue;
            int *cut = cuts[n];
            bool even = true, dup = false;
            for (int c = 0; c < chunks; c++) {
                cut[c] = tot / chunks - (e && c == 0) - (l && c == chunks - 1);
                even &= cut[c] == cut[0];
            }
            for (int k = 0; k < n && !dup; k++)
                dup = !memcmp(cuts[k], cut, sizeof *cut * (size_t)chunks);
            n += !even && !dup;
        }
    return n;
}

enum { MAX_EXPERT_LAYOUTS = 256 };

typedef struct Expert {
    int ep, etp;
    int axis;                     /* EP's mesh axis (0 dp, 1 tp), -1: plan_frame.c folds it */
} Expert;

static int add_expert(const Search *S, Expert *xs, int n, int ep, int etp, int axis)
{
    const RepArch *A = S->A;
    if (n == MAX_EXPERT_LAYOUTS || A->n_experts % ep || A->d_ff % etp || (S->o->ep && ep != S->o->ep) ||
        (S->o->etp && etp != S->o->etp))
        return n;
    if (A->expert_bias && etp > 1 && !S->o->etp) /* Megatron-Core: experts' biases at ETP 1 only (plan_frame.c) */
        return n;
    for (int k = 0; k < n; k++)
        if (xs[k].ep == ep && xs[k].etp == etp && xs[k].axis == axis)
            return n;
    xs[n] = (Expert){ep, etp, axis};
    return n + 1;
}

/* Megatron-Core's expert layouts on a dp x tp mesh (parallel_state.py: the
 * dense TP x CP x DP ranks, tp fastest, regrouped as ETP x EP x expert-DP),
 * each with num_experts % EP == 0 and expert-DP = dp tp / (EP ETP) whole:
 * EP 1 (ETP 1 or tp); EP over the whole tp axis (ETP 1: folded over the
 * attention's TP ranks) or the whole dp axis (ETP 1 or tp); and parallel
 * folding for every divisor k of dp: with ETP 1, EP tp k (whole tp groups of
 * k consecutive dp ranks: below DP at tp 1, across dp x tp at k = dp); with
 * ETP tp, EP k (k consecutive dp ranks). Which is fastest is the cost
 * model's answer (group size against the nodes its all-to-all crosses, the
 * expert weights per GPU against memory); plan_frame.c lays the folded ones
 * out (axis -1). A pinned --ep outside these is passed on for plan_frame.c
 * to refuse with its sentence. */
static int expert_layouts(const Search *S, int tp, int dp, Expert *xs)
{
    int n = 0;
    n = add_expert(S, xs, n, 1, 1, -1);
    if (tp > 1)
        n = add_expert(S, xs, n, 1, tp, -1), n = add_expert(S, xs, n, tp, 1, 1);
    if (dp > 1) {
        n = add_expert(S, xs, n, dp, 1, 0);
        if (tp > 1)
            n = add_expert(S, xs, n, dp, tp, 0);
    }
    for (int k = 2; k <= dp; k++) {
        if (dp % k)
            continue;
        if (tp * k != dp) /* tp k = dp: the whole dp axis above, laid out the same */
            n = add_expert(S, xs, n, tp * k, 1, -1);
        if (tp > 1 && k < dp)
            n = add_expert(S, xs, n, k, tp, -1);
    }
    int pin = S->o->ep;
    bool listed = pin <= 1;
    for (int k = 0; k < n && !listed; k++)
        listed = xs[k].ep == pin;
    if (!listed && S->A->n_experts % pin == 0) /* a degree Megatron-Core cannot fold */
        for (int etp = 1; etp <= tp; etp = etp == 1 && tp > 1 ? tp : tp + 1)
            if (n < MAX_EXPERT_LAYOUTS && S->A->d_ff % etp == 0 && (!S->o->etp || etp == S->o->etp))
                xs[n++] = (Expert){pin, etp, -1};
    return n;
}

/* Every layout of one (tp, pp, v, cp) on the current split (S->cut). */
static void layouts(Search *S, int tp, int pp, int v, int cp, PlanSchedule sched)
{
    const PassSearchPins *pin = &S->o->pins;
    const PassStack *st = &S->c->st;
    const RepArch *A = S->A;
    int gpus = S->r->gpus, dp = gpus / (tp * pp * cp);
    Expert xs[MAX_EXPERT_LAYOUTS];
    for (int sp = 0; sp <= 1; sp++) {
        if ((sp && (tp == 1 || st->no_sp)) || (pin->sp >= 0 && sp != pin->sp && tp > 1))
            continue;
        bool one = false; /* with one replica every ZeRO stage is the same plan */
        for (int z = 0; z <= 3 && !one; z++) {
            if (!pass_stack_has_zero(st, z) || (pin->zero >= 0 && z != pin->zero))
                continue;
            one = dp == 1;
            S->r->stats.groups++;
            PlanLayout L = {.gpus = gpus, .dp = dp, .tp = tp, .pp = pp, .v = v,
                            .cp = cp, .cp_axis = cp > 1 ? 1 : -1,
                            .dp_axis = 0, .tp_axis = cp > 1 ? 2 : 1, .replicated = 1, .sp = sp,
                            .zero = z, .schedule = sched, .ep = 1, .etp = 1,
                            .ep_axis = -1, .etp_axis = -1, .moe = A->moe};
            if (!A->moe) {
                /* Attention's CP forms the stack offers (all_gather, p2p, a2a). */
                for (int f = PASS_CP_ALL_GATHER; f <= PASS_CP_A2A; f++) {
                    if ((cp == 1 && f > 0) || (cp > 1 && !pass_stack_has_cp_comm(st, f)))
                        continue;
                    PlanLayout C = L;
                    C.cp_ring = cp > 1 && f == PASS_CP_P2P, C.cp_a2a = cp > 1 && f == PASS_CP_A2A;
                    micro_batches(S, C);
                }
                continue;
            }
            int nx = expert_layouts(S, tp, dp, xs);
            for (int e = 0; e < nx; e++) {
                PlanLayout M = L;
                M.ep = xs[e].ep, M.etp = xs[e].etp, M.ep_axis = xs[e].axis;
                M.etp_axis = xs[e].etp > 1 ? 1 : -1;
                M.ep_exchange = xs[e].ep > 1;
                micro_batches(S, M);
            }
        }
    }
}

void rep_framework_search(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                          RepFrameLayoutFn *layout_ok, PassSearchResult *r, char *why, size_t wn)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    memset(r, 0, sizeof *r);
    why[0] = 0;
    RepArch A;
    char sub[256];
    r->gpus = o->gpus > 0 ? o->gpus : c->cl->ngpus;
    r->global_batch = o->global_batch > 0 ? o->global_batch : g->global_batch;
    if (!rep_arch_read(g, &A, sub, sizeof sub)) {
        snprintf(why, wn, "%s", sub);
        r->no_layout = true;
        return;
    }
    /* The graph's facts pass_predict asks of every candidate, and each
     * mesh's strategies, found once (PTDC_NO_MEMO: afresh each time, which
     * stack.frame-search compares with). */
    bool memo = !getenv("PTDC_NO_MEMO");
    PassCostCtx cm = *c;
    cm.memo = memo ? pass_memo_new(g) : NULL;
    c = &cm;
    Search S = {.c = c, .g = g, .o = o, .A = &A, .ok = layout_ok, .r = r,
                .keep = o->keep > 0 ? o->keep : 1, .why = why, .wn = wn, .refused_all = true,
                .memo = memo ? rep_frame_memo_new(g) : NULL};
    r->alt = ir_xcalloc((size_t)S.keep, sizeof *r->alt);
    const PassSearchPins *pin = &o->pins;
    const PassStack *st = &c->st;
    int gpus = r->gpus, gpn = pass_cluster_domain(c->cl);
    bool pinned_split = o->pp_nlayers || o->pp_first || o->pp_last;
    bool uneven = layout_ok == rep_megatron_layout && one_repeat(g, &A);
    for (int tp = 1; tp <= gpus; tp++) {
        if (gpus % tp || (pin->tp && tp != pin->tp) || (!pin->tp && tp > gpn) || A.heads % tp ||
            A.kv_heads % tp || (!A.moe && A.d_ff % tp))
            continue;
        for (int pp = 1; pp <= gpus / tp && pp <= A.layers && pp <= PLAN_MAX_PP; pp++) {
            if ((gpus / tp) % pp || (A.layers % pp && !uneven && !pinned_split) || (pin->pp && pp != pin->pp))
                continue;
            /* Context parallelism as pinned (--cp), never searched here. */
            int cp = pin->cp > 1 ? pin->cp : 1;
            if ((gpus / tp) % (pp * cp))
                continue;
            int dp = gpus / (tp * pp * cp);
            if ((pin->dp && dp != pin->dp) || r->global_batch % dp)
                continue;
            /* pass_predict's limits; unpinned, the chunks per rank the
             * searches enumerate (plan.h) */
            /* up to two chunks more than layers where the embedding and
             * the loss may each count as one (account_splits) */
            int most = A.layers + (uneven && !pinned_split ? 2 : 0);
            int vmax = pin->v ? PLAN_MAX_CHUNKS : PLAN_PROG_MAX_CHUNKS;
            for (int v = 1; pp * v <= most && v <= vmax && pp * v <= PLAN_MAX_STAGES; v++) {
                if ((v > 1 && pp == 1) || (pin->v && v != pin->v))
                    continue;
                PlanSchedule sched = v > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B;
                if ((pin->schedule >= 0 && (int)sched != pin->schedule) || !pass_stack_has_schedule(st, sched))
                    continue;
                int cuts[MAX_SPLITS][PLAN_MAX_STAGES], ncuts = 0;
                bool even = !pinned_split && A.layers % (pp * v) == 0;
                if (pinned_split)
                    ncuts = pass_search_split_pin(c, g, o, pp, v, cuts[0]) ? 1 : 0;
                else if (!even && uneven && pp > 1)
                    ncuts = account_splits(A.layers, pp, v, cuts, uneven_splits(A.layers, pp, v, cuts));
                if (even) {
                    S.cut = NULL;
                    layouts(&S, tp, pp, v, cp, sched);
                }
                for (int k = 0; k < ncuts; k++) {
                    S.cut = cuts[k];
                    layouts(&S, tp, pp, v, cp, sched);
                }
            }
        }
    }
    r->full_valid = r->full_ranked = r->found;
    if (r->found)
        r->best_full_step_s = r->alt[0].pred.step_time_s;
    r->no_layout = S.refused_all;
    pass_memo_free(cm.memo);
    rep_frame_memo_free(S.memo);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->stats.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (getenv("PTDC_SEARCH_DEBUG")) /* the counts a timing table quotes (docs/planner.md, "Speed") */
        fprintf(stderr, "framework search: %ld meshes, %ld layouts, %ld priced, %ld dropped by memory, %.2f s\n",
                r->stats.groups, r->stats.candidates, r->stats.evaluated, r->stats.pruned_mem, r->stats.seconds);
}
