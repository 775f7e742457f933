/* search.c: pass_search, the inter-operator search (docs/planner.md).
 *
 * 1. Enumerate layouts: for each pipeline degree pp, a stage size n (whole
 *    nodes or a divisor of a node; GPUs that no such layout can use stay
 *    idle), n = dp x tp with dp dividing the global batch, the micro-batch
 *    per replica b, sequence parallelism; these are the groups. Each group
 *    gets its candidates: pp, v (interleaving where layers divide), the
 *    recomputation mode (pinned, or the least per stage that fits) and the
 *    ZeRO stage. Every candidate gets strategy-free lower bounds on step time
 *    and memory (search_prune.c); one whose memory bound exceeds the usable
 *    HBM is dropped.
 * 2. Branch and bound: groups in order of their best bound. A group whose
 *    bound is no better than the keep-th best plan found so far is dropped
 *    with all that follow. Otherwise its strategies are solved (search_ilp.c,
 *    variant 0), and its candidates, in order of bound, are dropped by the
 *    same test (first strategy-free, then with the strategies' exact kernel
 *    times), or cut into stages (search_dp.c) and ranked with pass_predict.
 *    A partition whose estimate fits but pass_predict's total does not is
 *    recut with the limit lowered by the overflow (twice at most).
 * 3. The frontier walks: for candidates whose plan memory shaped (nothing
 *    fit, recomputation, a cut other than the fastest) and whose frontier
 *    bound (hope_bound) still beats the keep-th best, leaner variants, one
 *    point of the ILP's time/memory frontier at a time (search_ilp.c), until
 *    the walk bound (walk_bound: its layers no faster than at the last point)
 *    cannot beat it either.
 * 4. The plans that fit, best first, are the result; pass_predict's numbers
 *    are the ones reported. */
#include "search/src.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void pass_search_alt_free(PassSearchAlt *a)
{
    free(a->plan.stages);
    free(a->plan.strategy);
    pass_prediction_free(&a->pred);
    free(a->stage_fwd_s);
    free(a->stage_bwd_s);
    memset(a, 0, sizeof *a);
}

void pass_search_result_free(PassSearchResult *r)
{
    for (int i = 0; i < r->nalt; i++)
        pass_search_alt_free(&r->alt[i]);
    free(r->alt);
    if (r->have_closest)
        pass_search_alt_free(&r->closest);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------- enumeration */

/* PTDC_SEARCH_DEBUG: 1 prints a line per mesh solved and per walk, 2 also
 * one per candidate ranked (its variant's bound, each cut's bound and what
 * pass_predict said), to see where a walk's bounds and its plans part. */
static int debug_level(void)
{
    const char *e = getenv("PTDC_SEARCH_DEBUG");
    return !e ? 0 : atoi(e) >= 2 ? 2 : 1;
}

static bool stage_size_ok(int n, int gpn) { return n % gpn == 0 || gpn % n == 0; }

static uint64_t group_hash(int dp, int cp, int tp, int fold, int b, bool sp)
{
    uint64_t h = 1469598103934665603ull;
    int64_t key[] = {dp, cp, tp, fold, b, sp};
    for (int i = 0; i < 6; i++)
        h = (h ^ (uint64_t)key[i]) * 1099511628211ull;
    return h ^ h >> 29;
}

/* The group of that mesh and micro-batch, made if new (enumerate visits
 * each once per pipeline depth: looked up by hash, in the order made). */
static SrcGroup *group(Src *s, int *cap, int dp, int cp, int tp, int fold, int b, bool sp)
{
    if (2 * (s->ngroups + 1) > s->gslot_cap) {
        free(s->gslot);
        s->gslot_cap = s->gslot_cap ? 2 * s->gslot_cap : 1024;
        s->gslot = ir_xcalloc((size_t)s->gslot_cap, sizeof *s->gslot);
        for (int i = 0; i < s->ngroups; i++) {
            const SrcGroup *G = &s->groups[i];
            size_t h = (size_t)group_hash(G->dp, G->cp, G->tp, G->fold, G->b, G->sp) & (size_t)(s->gslot_cap - 1);
            while (s->gslot[h])
                h = (h + 1) & (size_t)(s->gslot_cap - 1);
            s->gslot[h] = i + 1;
        }
    }
    size_t h = (size_t)group_hash(dp, cp, tp, fold, b, sp) & (size_t)(s->gslot_cap - 1);
    for (; s->gslot[h]; h = (h + 1) & (size_t)(s->gslot_cap - 1)) {
        SrcGroup *G = &s->groups[s->gslot[h] - 1];
        if (G->dp == dp && G->cp == cp && G->tp == tp && G->fold == fold && G->b == b && G->sp == sp)
            return G;
    }
    if (s->ngroups == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        s->groups = ir_xrealloc(s->groups, (size_t)*cap * sizeof *s->groups);
    }
    s->gslot[h] = s->ngroups + 1;
    SrcGroup *G = &s->groups[s->ngroups++];
    memset(G, 0, sizeof *G);
    G->dp = dp, G->cp = cp, G->tp = tp, G->fold = fold, G->b = b, G->sp = sp;
    G->mb_seqs = plan_mb_seqs(b, dp);
    G->m = (int)(s->gb / G->mb_seqs);
    if (fold > 1) /* dp_outer x dp_inner, the inner consecutive ranks (tp 1) */
        plan_mesh_make(&G->mesh, dp / fold, fold, s->gpn);
    else
        plan_mesh_make_dims(&G->mesh, dp, cp, tp, s->gpn);
    G->lb = INFINITY;
    return G;
}

static void add_cand(Src *s, SrcGroup *G, int pp, int v, int sched, int rc, int zero)
{
    if (G->ncand == G->capcand) {
        G->capcand = G->capcand ? 2 * G->capcand : 8;
        G->cand = ir_xrealloc(G->cand, (size_t)G->capcand * sizeof *G->cand);
    }
    if (G->ncand == 0)
        src_group_sums(s, G);
    SrcCand *k = &G->cand[G->ncand++];
    memset(k, 0, sizeof *k);
    s->full_valid |= pp * G->dp * G->cp * G->tp == s->gpus;
    k->pp = pp, k->v = v, k->sched = sched, k->rc = rc, k->zero = zero;
    k->hope = k->hope_fit = k->lb_fit = NAN;
    src_bound(s, G, k);
    s->st->candidates++;
}

/* Interleaving: one repeat, at least one layer per chunk but for the end
 * chunks, which may hold the embedding or the head alone (chunks may
 * differ), a split --pp-layers allows, and (Megatron's schedule) a
 * micro-batch count that is a multiple of pp. */
static bool v_ok(const Src *s, int pp, int v, int m)
{
    int layers[PLAN_MAX_STAGES];
    /* Codegen's schedules hold at most PLAN_PROG_MAX_CHUNKS chunks per rank
     * and the search enumerates no more; a framework stack's pinned
     * --virtual-stages may have up to PLAN_MAX_CHUNKS (plan.h). */
    int vmax = s->c->st.ref_stack && s->o->pins.v == v ? PLAN_MAX_CHUNKS : PLAN_PROG_MAX_CHUNKS;
    return s->rep0 >= 0 && pp >= 2 && v >= 2 && v <= vmax && pp * v <= PLAN_MAX_STAGES &&
           pp * v <= s->rep_count + src_split_empty_ends(s) && m % pp == 0 && m >= pp &&
           src_split_pin(s, pp, v, layers, NULL, 0) >= 0;
}

/* 1F1B: a split --pp-layers allows. */
static bool one_ok(const Src *s, int pp)
{
    int layers[PLAN_MAX_STAGES];
    return src_split_pin(s, pp, 1, layers, NULL, 0) >= 0;
}

/* Context parallelism cp: pinned (--cp), or any degree whose ranks each
 * hold two whole chunks of the sequence (the load-balanced split's unit,
 * docs/context.md) of a model with attention and no experts. */
static bool cp_ok(const Src *s, int cp)
{
    const PassSearchPins *pin = &s->o->pins;
    /* Frameworks run CP inside a fused attention kernel (Transformer
     * Engine's, SDPA's flash): never beside a materialised one. */
    if (cp > 1 && (s->has_moe || s->has_scan || s->c->attention == PLAN_ATTN_MATERIALIZED))
        return false;
    if (pin->cp)
        return cp == pin->cp;
    if (cp == 1)
        return true;
    return s->has_attention && s->seq % (2 * cp) == 0 && cp <= PLAN_MAX_CP;
}

/* A cp layout whose micro-batch b shares a factor g with cp is dominated:
 * dp x g ranks each running b / g whole sequences and cp / g ranks per
 * sequence do the same GEMMs and attention pairs per rank, reduce the same
 * gradients over the same dp x cp ranks, and exchange fewer K/V blocks. So
 * cp > 1 is only tried with micro-batches prime to it, unless a pin or a
 * filter rules the dominating layout out. */
static bool cp_dominated(const Src *s, int dp, int cp, int64_t b)
{
    const PassSearchPins *pin = &s->o->pins;
    if (cp == 1 || pin->cp || pin->dp || pin->micro_batch)
        return false;
    int64_t g = 1;
    for (int64_t x = b, y = cp; y; g = y, y = x % y, x = g)
        ;
    return g > 1 && b / g > s->o->filter.mb_above && s->gb % ((int64_t)dp * g) == 0;
}

/* Does policy r rerun any node at all? */
static bool recomputes_any(const Src *s, int r)
{
    for (int i = 0; i < s->g->nfwd; i++)
        if (pass_recomputed(s->c, s->g, &s->g->nodes[i], (PlanRecompute)r))
            return true;
    return false;
}

/* The largest tp worth trying for a stage of n GPUs. */
static int tp_max(const PassSearchPins *pin, int gpn, int n)
{
    int t = pin->tp > gpn ? pin->tp : gpn;
    return t < n ? t : n;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The divisors of the global batch, ascending, into s->divs (sqrt(gb)
 * steps, once per search: at most 2^20 for the largest batch accepted). */
static void batch_divisors(Src *s)
{
    int cap = 64;
    s->divs = ir_xmalloc((size_t)cap * sizeof *s->divs);
    s->ndivs = 0;
    for (int64_t d = 1; d <= s->gb / d; d++) {
        if (s->gb % d)
            continue;
        for (int j = 0; j < (d == s->gb / d ? 1 : 2); j++) {
            if (s->ndivs + 1 >= cap) {
                cap *= 2;
                s->divs = ir_xrealloc(s->divs, (size_t)cap * sizeof *s->divs);
            }
            s->divs[s->ndivs++] = j ? s->gb / d : d;
        }
    }
    qsort(s->divs, (size_t)s->ndivs, sizeof *s->divs, cmp_i64);
}

/* The micro-batch sizes b (sequences per replica) for `per` sequences per
 * replica and step, ascending: the divisors of per that give at most
 * PLAN_MAX_MICRO micro-batches of at most PASS_SEARCH_MAX_MB
 * sequences (a loop b = 1 .. per would not end for a global batch of 2^32).
 * The sizes cut off are counted in s->micro_cut. Into s->mbs. */
static int micro_batches(Src *s, int64_t per)
{
    if (!s->mbs)
        s->mbs = ir_xmalloc((size_t)(s->ndivs + 1) * sizeof *s->mbs);
    int k = 0;
    for (int i = 0; i < s->ndivs && s->divs[i] <= per; i++) {
        int64_t b = s->divs[i];
        if (per % b)
            continue;
        if (b > PASS_SEARCH_MAX_MB || per / b > PLAN_MAX_MICRO)
            s->micro_cut++;
        else
            s->mbs[k++] = b;
    }
    return k;
}

static void enumerate(Src *s)
{
    const PassSearchPins *pin = &s->o->pins;
    const PassSearchFilter *f = &s->o->filter;
    int cap = 0, N = s->gpus, gpn = s->gpn;
    int cpmax = pin->cp ? pin->cp : PLAN_MAX_CP; /* cp_ok's bound, kept out of the loops */
    int ppmax = s->npieces < N ? s->npieces : N;
    ppmax = ppmax < PLAN_MAX_PP ? ppmax : PLAN_MAX_PP; /* codegen's limit */
    for (int pp = 1; pp <= ppmax; pp++) {
        if ((pin->pp && pp != pin->pp) || pp <= f->pp_above)
            continue;
        /* Stage sizes, largest first: with a pinned layout, all GPUs;
         * otherwise the four largest valid ones using at least half. */
        int sizes[4], nsz = 0;
        for (int n = N / pp; n >= 1 && nsz < 4; n--) {
            if (!stage_size_ok(n, gpn) || (pin->tp && n % pin->tp) || (pin->dp && n % pin->dp) ||
                (pin->cp && n % pin->cp))
                continue;
            /* A pinned layout, or CPU ranks (the processes are the plan's: a
             * rank the plan leaves out is not started, and the cost model
             * shares each node's cores among all N), use every one. */
            if ((pin->tp || pin->pp || pin->dp || s->c->cl->gpu.kind == PASS_DEV_CPU) && n * pp != N)
                continue;
            if (2 * n * pp < N)
                break;
            /* tp is at most a node's GPUs unless pinned: only those are
             * tried (a loop to n would make this quadratic in the GPUs). */
            bool any = false;
            for (int tp = 1; tp <= tp_max(pin, gpn, n) && !any; tp++)
                for (int cp = 1; cp <= n / tp && cp <= cpmax && !any; cp++)
                    any = n % (tp * cp) == 0 && cp_ok(s, cp) && s->gb % (n / (tp * cp)) == 0 &&
                          (tp <= gpn || pin->tp == tp);
            if (any)
                sizes[nsz++] = n;
        }
        for (int zi = 0; zi < nsz; zi++) {
            int n = sizes[zi];
            for (int tp = 1; tp <= tp_max(pin, gpn, n); tp++) {
                if (n % tp || (pin->tp && tp != pin->tp) || (!pin->tp && tp > gpn) || tp <= f->tp_above)
                    continue;
              for (int cp = 1; cp <= n / tp && cp <= cpmax; cp++) {
                if (n % (tp * cp) || !cp_ok(s, cp))
                    continue;
                int dp = n / (tp * cp);
                int folds[64];
                bool sp_any = tp > 1 && pin->sp != 0 && !s->c->st.no_sp; /* the sp loop below may set it */
                if ((pin->dp && dp != pin->dp) || s->gb % dp || src_folds(s, dp, cp, tp, sp_any, folds, 64) == 0)
                    continue;
                int64_t per = s->gb / dp;
                int nb = micro_batches(s, per);
                for (int ib = 0; ib < nb; ib++) {
                    int64_t b = s->mbs[ib];
                    if ((pin->micro_batch && b != pin->micro_batch) || b <= f->mb_above)
                        continue;
                    if (cp_dominated(s, dp, cp, b))
                        continue;
                    int m = (int)(per / b);
                    for (int sp = 0; sp < 2; sp++) {
                        if (pin->sp >= 0 ? sp != pin->sp : (sp && tp == 1))
                            continue;
                        if ((sp && tp == 1) || (sp && s->c->st.no_sp))
                            continue;
                      int nf = src_folds(s, dp, cp, tp, sp, folds, 64);
                      for (int fi = 0; fi < nf; fi++) {
                        SrcGroup *G = group(s, &cap, dp, cp, tp, folds[fi], (int)b, sp);
                        /* (v, schedule) pairs: one chunk under 1F1B (or no
                                         * pipeline) and ZB-H1, several interleaved. */
                        int vs[64], scs[64], nv = 0;
                        bool one = !(pin->v > 1) && one_ok(s, pp);
                        bool zb = pin->schedule == PLAN_SCHED_ZB_H1; /* (without a pipeline, if pinned) */
                        if (one && (pin->schedule < 0 || pin->schedule == PLAN_SCHED_1F1B) &&
                            (pp == 1 || pass_stack_has_schedule(&s->c->st, PLAN_SCHED_1F1B)))
                            vs[nv] = 1, scs[nv++] = PLAN_SCHED_1F1B;
                        if (one && (zb || (pp > 1 && pin->schedule < 0)) &&
                            pass_stack_has_schedule(&s->c->st, PLAN_SCHED_ZB_H1))
                            vs[nv] = 1, scs[nv++] = PLAN_SCHED_ZB_H1;
                        if ((pin->schedule < 0 || pin->schedule == PLAN_SCHED_INTERLEAVED) &&
                            pass_stack_has_schedule(&s->c->st, PLAN_SCHED_INTERLEAVED))
                            for (int v = 2; v <= s->rep_count && nv < 64; v++)
                                if ((!pin->v || v == pin->v) && v_ok(s, pp, v, m))
                                    vs[nv] = v, scs[nv++] = PLAN_SCHED_INTERLEAVED;
                        /* Whether ZeRO has ranks to shard over: ptdc's programs
                         * shard each parameter over every axis its gradient is
                         * partial on, tp's for the weights tp replicates too
                         * (the norms, MLA's down-projections, the router);
                         * Megatron's distributed optimizer over dp x cp only
                         * (its expert-dp left out here: the tp-replicated
                         * weights would be priced sharded over tp). */
                        bool zero_shards = s->c->st.ref_stack ? dp * cp > 1 : n > 1;
                        int rcs[SRC_NRC], nrc = 0;
                        if (pin->recompute >= 0)
                            rcs[nrc++] = pin->recompute;
                        else if (f->recompute_on)
                            for (int r = PLAN_RECOMPUTE_SELECTIVE; r <= PLAN_RECOMPUTE_FULL; r++) {
                                if (!recomputes_any(s, r) || !pass_stack_has_recompute(&s->c->st, r))
                                    continue; /* SELECTIVE under a flash kernel */
                                rcs[nrc++] = r;
                            }
                        else
                            rcs[nrc++] = SRC_AUTO;
                        for (int iv = 0; iv < nv; iv++)
                            for (int ir = 0; ir < nrc; ir++)
                                for (int z = 0; z < 4; z++) {
                                    if (pin->zero >= 0 ? z != pin->zero : (z > 0 && !zero_shards))
                                        continue;
                                    if (!pass_stack_has_zero(&s->c->st, z) && !(dp == 1 && z == 0))
                                        continue;
                                    add_cand(s, G, pp, vs[iv], scs[iv], rcs[ir], z);
                                }
                      }
                    }
                }
              }
            }
        }
    }
}

/* ------------------------------------------------------------ ranking */

typedef struct {
    Src *s;
    PassSearchResult *out;
    int keep;
    bool stop;                    /* first_fit satisfied */
    double close_over;            /* closest non-fitting overflow so far */
    PassPieceMemo *pieces;        /* the ranked plans' piece costs (piece_memo.c) */
} Rank;

static double threshold(const Rank *R)
{
    if (R->s->o->exhaustive)
        return INFINITY;
    double t = R->out->nalt < R->keep ? INFINITY : R->out->alt[R->keep - 1].pred.step_time_s;
    return R->s->o->beat_s > 0 && R->s->o->beat_s < t ? R->s->o->beat_s : t;
}

void src_plan(const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k,
              const SrcPart *part, Plan *p)
{
    memset(p, 0, sizeof *p);
    p->mesh = G->mesh;
    p->pp = k->pp;
    p->v = k->v;
    p->nstages = part->nstages;
    p->stages = (PlanStage *)part->stage;
    p->strategy = V->strat;
    p->num_micro = G->m;
    p->mb_seqs = G->mb_seqs;
    p->zero = k->zero;
    p->schedule = (PlanSchedule)k->sched;
    p->attention = s->c->attention;
    p->precision = s->c->prec;
    p->lp_bf16_first = s->c->st.lp_bf16_first;
    p->lp_bf16_last = s->c->st.lp_bf16_last;
    memcpy(p->axis, V->axis, sizeof p->axis); /* plan_axes, once per variant (search_ilp.c) */
    memcpy(p->nested, V->nested, sizeof p->nested);
    p->axes_set = true;
    if (src_check(s)) {
        Plan q = *p;
        plan_axes(s->g, &q);
        if (memcmp(q.axis, p->axis, sizeof q.axis) || memcmp(q.nested, p->nested, sizeof q.nested))
            ir_die("search: the variant's mesh axes differ from plan_axes' for its plan");
    }
}

/* A heap copy of an evaluated plan. */
static void make_alt(const Src *s, const SrcVariant *V, const Plan *p, const PassPrediction *pr,
                     PassSearchAlt *a)
{
    memset(a, 0, sizeof *a);
    a->plan = *p;
    a->plan.stages = ir_xmalloc(sizeof(PlanStage) * (size_t)p->nstages);
    memcpy(a->plan.stages, p->stages, sizeof(PlanStage) * (size_t)p->nstages);
    a->plan.strategy = ir_xmalloc(sizeof(PlanStrategy) * (size_t)(s->g->nfwd + 1));
    memcpy(a->plan.strategy, p->strategy, sizeof(PlanStrategy) * (size_t)s->g->nfwd);
    a->pred = *pr;
    a->pred.mem = ir_xmalloc(sizeof(PassRankMem) * (size_t)(pr->npp + 1));
    memcpy(a->pred.mem, pr->mem, sizeof(PassRankMem) * (size_t)pr->npp);
    a->stage_fwd_s = ir_xmalloc(sizeof(double) * (size_t)p->nstages);
    a->stage_bwd_s = ir_xmalloc(sizeof(double) * (size_t)p->nstages);
    src_stage_times(s, V, &a->plan, a->stage_fwd_s, a->stage_bwd_s);
    a->ilp_graph = s->o->skeleton ? s->o->skeleton : s->g;
    a->nilp = V->nq;
    for (int i = 0; i < V->nq; i++)
        a->ilp_q[i] = V->q[i], a->ilp_r[i] = V->r[i];
    plan_layout(s->g, &a->plan, &a->layout);
}

/* Faster first; ties (exact, e.g. ZeRO stages that cost alike) go to less
 * memory, then to a fixed order of layouts so that the result never depends
 * on the order candidates were visited in. */
static bool better(const Plan *pa, const PassPrediction *a, const Plan *pb,
                   const PassPrediction *b)
{
    if (a->step_time_s != b->step_time_s)
        return a->step_time_s < b->step_time_s;
    if (a->peak_mem_bytes != b->peak_mem_bytes)
        return a->peak_mem_bytes < b->peak_mem_bytes;
    int ka[] = {pa->mesh.size[1], pa->pp, pa->mesh.size[0], pa->v, pa->zero, (int)pa->mb_seqs};
    int kb[] = {pb->mesh.size[1], pb->pp, pb->mesh.size[0], pb->v, pb->zero, (int)pb->mb_seqs};
    for (int i = 0; i < 6; i++)
        if (ka[i] != kb[i])
            return ka[i] < kb[i];
    for (int i = 0; i < pa->nstages && i < pb->nstages; i++) {
        if (pa->stages[i].npieces != pb->stages[i].npieces)
            return pa->stages[i].npieces > pb->stages[i].npieces;
        if (pa->stages[i].recompute != pb->stages[i].recompute)
            return pa->stages[i].recompute < pb->stages[i].recompute;
    }
    return false;
}

static void record(Rank *R, const SrcVariant *V, const Plan *p, const PassPrediction *pr)
{
    PassSearchResult *out = R->out;
    if (p->mesh.size[0] * p->mesh.size[1] * p->pp == R->s->gpus &&
        (!out->full_ranked || pr->step_time_s < out->best_full_step_s)) {
        out->full_ranked = true;
        out->best_full_step_s = pr->step_time_s;
    }
    int pos = out->nalt;
    while (pos > 0 && better(p, pr, &out->alt[pos - 1].plan, &out->alt[pos - 1].pred))
        pos--;
    if (pos >= R->keep)
        return;
    if (out->nalt == R->keep) {
        pass_search_alt_free(&out->alt[R->keep - 1]);
        out->nalt--;
    }
    if (!plan_verify(R->s->g, p)) /* the contract codegen checks, kept at the source */
        ir_die("search: a plan the programs cannot execute (reported above)");
    memmove(&out->alt[pos + 1], &out->alt[pos], sizeof *out->alt * (size_t)(out->nalt - pos));
    make_alt(R->s, V, p, pr, &out->alt[pos]);
    out->nalt++;
    out->found = true;
    if (R->s->o->first_fit)
        R->stop = true;
}

static void record_closest(Rank *R, const SrcVariant *V, const Plan *p, const PassPrediction *pr)
{
    double over = pr->peak_mem_bytes - R->s->usable;
    if (R->out->have_closest && over >= R->close_over)
        return;
    if (R->out->have_closest)
        pass_search_alt_free(&R->out->closest);
    make_alt(R->s, V, p, pr, &R->out->closest);
    R->out->have_closest = true;
    R->close_over = over;
}

/* Does a plan pass the --explain filter (recomputation on)? */
static bool filtered_out(const Src *s, const Plan *p)
{
    if (!s->o->filter.recompute_on)
        return false;
    for (int i = 0; i < p->nstages; i++)
        if (p->stages[i].recompute != PLAN_RECOMPUTE_NONE)
            return false;
    return true;
}

/* src_fitmem_bound on the floors raised by delta (src_floor_fit's), or
 * by the delta it computes when NULL. */
static double fit_mem(Src *s, const SrcGroup *G, const SrcCand *k, const double *delta)
{
    double *own = NULL;
    if (!delta) {
        own = ir_xmalloc(sizeof(double) * (size_t)(s->npieces + 1));
        if (!src_floor_fit(s, G, k->pp, k->zero, own)) {
            free(own);
            return INFINITY;
        }
        delta = own;
    }
    double b = src_fitmem_bound(s, G, k, src_floor_pieces_at(s, G, k->zero, delta));
    free(own);
    return b;
}

static double fit_floor_bound(Src *s, const SrcGroup *G, const SrcCand *k, double thr);

/* The model's layout floors (search_memfloor.c): the count walk's
 * (PassSearchOpts.floor, of the same model), or made when first asked. */
static const PassMemFloor *src_mfloor(Src *s)
{
    if (s->o->floor)
        return s->o->floor;
    if (!s->mfloor) {
        s->mfloor = ir_xmalloc(sizeof *s->mfloor);
        pass_mem_floor_init(s->mfloor, s->c, s->g);
    }
    return s->mfloor;
}

static double dead_bound(Src *s, const SrcGroup *G, const SrcCand *k, double thr);

/* The pruning is sound only if every bound is at most what pass_predict
 * says; exhaustive searches (tests) check it on every plan they rank. */
static void check_bounds(Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k,
                         const Plan *p, const PassPrediction *pr)
{
    double lb2 = src_bound_variant(s, G, V, k), tol = 1e-9;
    if (k->lb > pr->step_time_s * (1 + tol) || lb2 > pr->step_time_s * (1 + tol))
        ir_die("search: step-time bound %.9g / %.9g above pass_predict's %.9g (dp %d tp %d b %d pp %d v %d)",
               k->lb, lb2, pr->step_time_s, G->dp, G->tp, G->b, k->pp, k->v);
    if (!isnan(k->hope) && k->hope > pr->step_time_s * (1 + tol))
        ir_die("search: frontier bound %.9g above pass_predict's %.9g (dp %d tp %d b %d pp %d v %d)",
               k->hope, pr->step_time_s, G->dp, G->tp, G->b, k->pp, k->v);
    /* The bounds of the plans that fit hold for those only. */
    double lf = src_fit_bound(s, G, k);
    if (pr->fits && ((!isnan(k->hope_fit) && k->hope_fit > pr->step_time_s * (1 + tol)) ||
                     lf > pr->step_time_s * (1 + tol)))
        ir_die("search: bound of the fitting plans %.9g / %.9g above pass_predict's %.9g (dp %d tp %d b %d "
               "pp %d v %d zero %d)", k->hope_fit, lf, pr->step_time_s, G->dp, G->tp, G->b, k->pp, k->v,
               k->zero);
    /* The recomputation memory forces on a pipelined plan that fits
     * (search_fitmem.c), whether or not its frontier bound was taken. */
    if (pr->fits && k->pp > 1) {
        double fm = fit_mem(s, G, k, NULL);
        if (getenv("PTDC_FITMEM_CHECK"))
            fprintf(stderr, "fitmem check dp %d tp %d b %d pp %d v %d zero %d: bound %.6f step %.6f hope %.6f\n", G->dp,
                    G->tp, G->b, k->pp, k->v, k->zero, fm, pr->step_time_s, k->hope);
        if (fm > pr->step_time_s * (1 + tol))
            ir_die("search: memory-forced bound %.9g above pass_predict's %.9g (dp %d tp %d b %d pp %d v %d zero %d)",
                   fm, pr->step_time_s, G->dp, G->tp, G->b, k->pp, k->v, k->zero);
        /* and the whole bound fit_pruned takes, all its terms */
        double ff = fit_floor_bound(s, G, k, INFINITY);
        if (ff > pr->step_time_s * (1 + tol))
            ir_die("search: floor bound of the fitting plans %.9g above pass_predict's %.9g (dp %d tp %d b %d pp %d "
                   "v %d zero %d)", ff, pr->step_time_s, G->dp, G->tp, G->b, k->pp, k->v, k->zero);
        /* and group_dead's, with the group's floor as it stood before
         * (none; the floor's times without its memory, in a copy with an id
         * of its own: the memos know a floor by it): a floor may lower ZB-H1's
         * path share, so neither level is the other's bound */
        for (int level = 0; level < 2; level++) {
            SrcGroup G0 = *G;
            G0.floor_saved = G0.floor_states = G0.floor_ws = G0.floor_fslack = G0.layer_lb = NULL;
            G0.fit = NULL, G0.fit_val = NULL, G0.nfit = 0;
            size_t nt = (size_t)s->floor_nrow * SRC_NRC * 4;
            G0.floor_t = level == 0 || !G->floor_t ? NULL : memcpy(ir_xmalloc(sizeof(double) * nt), G->floor_t,
                                                                  sizeof(double) * nt);
            G0.floor_id = G0.floor_t ? ++s->floor_serial : 0;
            double db = dead_bound(s, &G0, k, INFINITY);
            free(G0.floor_t);
            if (db > pr->step_time_s * (1 + tol))
                ir_die("search: bound of the fitting plans before the %s floor %.9g above pass_predict's %.9g (dp %d "
                       "tp %d b %d pp %d v %d zero %d)", level ? "whole" : "time", db, pr->step_time_s, G->dp, G->tp,
                       G->b, k->pp, k->v, k->zero);
        }
    }
    /* Each rank's pieces at their floors (src_floor_pieces, raised to the
     * ILP's least layer: search_layerlb.c) against what pass_predict gives
     * the rank per micro-batch. */
    SrcPiece *H = ir_xmalloc(sizeof *H * (size_t)s->npieces);
    double *rt = ir_xcalloc((size_t)p->pp + 1, sizeof(double));
    src_floor_pieces(s, G, k->zero, NULL, H);
    for (int st = 0; st < p->nstages; st++)
        for (int q = p->stages[st].first_piece; q < p->stages[st].first_piece + p->stages[st].npieces; q++)
            rt[p->stages[st].pp_rank] += H[q].fwd + H[q].rec[p->stages[st].recompute];
    for (int r = 0; r < p->pp && r < pr->npp; r++)
        if (rt[r] > (pr->mem[r].fwd_s + pr->mem[r].bwd_s) * (1 + tol) + 1e-12)
            ir_die("search: floor of pipeline rank %d %.9g above pass_predict's %.9g a micro-batch (dp %d tp %d b %d "
                   "pp %d v %d zero %d)", r, rt[r], pr->mem[r].fwd_s + pr->mem[r].bwd_s, G->dp, G->tp, G->b, k->pp,
                   k->v, k->zero);
    free(H);
    free(rt);
    /* The floor's resharding (search_edges.c) at the plan's own strategies,
     * against what pass_predict charges one stage for it. */
    if (p->pp == 1) {
        double e = G->m * src_edge_floor_at(s, G, p->strategy);
        if (e > pr->reshard_s * (1 + tol) + 1e-15)
            ir_die("search: resharding floor %.9g above pass_predict's %.9g (dp %d tp %d b %d sp %d)", e,
                   pr->reshard_s, G->dp, G->tp, G->b, G->sp);
    }
    if (k->mem_lb > pr->peak_mem_bytes * (1 + tol))
        ir_die("search: memory bound %.0f above pass_predict's %.0f (dp %d cp %d tp %d b %d pp %d v %d zero %d)",
               k->mem_lb, pr->peak_mem_bytes, G->dp, G->cp, G->tp, G->b, k->pp, k->v, k->zero);
    /* The layout's floor under the plan's ZeRO stage (the least of these
     * over the stages is what pass_search_min_gpus leaves counts out by). */
    double fl = pass_mem_floor_zero(src_mfloor(s), k->pp, G->cp * G->tp, G->dp * G->cp * G->tp, k->zero);
    if (fl > pr->peak_mem_bytes * (1 + tol))
        ir_die("search: the layout's memory floor %.0f above pass_predict's %.0f (dp %d cp %d tp %d fold %d b %d pp %d "
               "v %d zero %d)", fl, pr->peak_mem_bytes, G->dp, G->cp, G->tp, G->fold, G->b, k->pp, k->v, k->zero);
}

/* A candidate dropped for its memory bound: pass_predict must agree that it
 * does not fit, with at least that much memory (exhaustive searches). */
static void check_mem_prune(Src *s, SrcGroup *G, const SrcVariant *V, SrcCand *k)
{
    SrcPart part;
    if (!src_partition(s, G, V, k, s->usable, true, &part))
        return;
    Plan p;
    src_plan(s, G, V, k, &part, &p);
    PassPrediction pr;
    pass_predict(s->c, s->g, &p, &pr);
    if (pr.fits || k->mem_lb > pr.peak_mem_bytes * (1 + 1e-9))
        ir_die("search: memory bound %.0f dropped a plan pass_predict puts at %.0f (%s; dp %d tp %d b %d "
               "pp %d v %d zero %d)", k->mem_lb, pr.peak_mem_bytes, pr.fits ? "fits" : "does not fit",
               G->dp, G->tp, G->b, k->pp, k->v, k->zero);
    pass_prediction_free(&pr);
}

/* The pipeline transfers stage st waits for per micro-batch in
 * pass_predict's simulation (schedule_sim.c: a blocking receive before each
 * operation): its forward's from the stage before, its backward's from the
 * stage after (SrcPiece.p2p: a piece's transfers in, one way). */
static double stage_p2p(const SrcVariant *V, const Plan *p, int st)
{
    const PlanStage *S = &p->stages[st];
    double x = S->first_piece > 0 ? V->piece[S->first_piece].p2p : 0;
    if (st + 1 < p->nstages)
        x += V->piece[p->stages[st + 1].first_piece].p2p;
    return x;
}

/* A bound on plan p's step from pipeline rank 0's end (pass_predict's
 * dp_tail; ptdc's programs, ranks not sharing cores), from the stages'
 * kernels (never above the simulation's times) and rank 0's reduction red
 * and optimizer opt under the plan's ZeRO stage. dp_overlapped exposes at
 * least shown + sd (red - shown) after rank 0's last operation, shown >=
 * chain - bc (no ranks before rank 0 to hide under), bc its backward per
 * chunk (a split schedule: its W per micro-batch), and the chain of v
 * chunks' reductions is at least (j + 1) red / v - j g bc for each j < v
 * (g = min(m, pp)). Rank 0 ends no earlier than
 * - its operations one after another: m (F + v bc) (split: m (F + B'),
 *   B' its B, + m bc); each j's sum leaves bc a coefficient n - (1 -
 *   sd)(j g + 1), n the bc's it runs: where that is not negative, the
 *   kernels keep it a bound;
 * - with one chunk per rank, its last backward (split: last B) after the
 *   last micro-batch's backward came back through every later rank r, which
 *   ran m micro-batches after the first forward reached it: F of the ranks
 *   before r + m x r's work (its kernels, the least resharding inside its
 *   pieces and its transfers, rs_lb and stage_p2p; split: without its W's,
 *   which it may defer) + the backwards (B) of the ranks between; then its
 *   own last backward and the step end hide no more than (1 - sd) bc of
 *   red.
 * (For v > 1, pass_predict's bc counts each chunk's incoming transfer in
 * its backward, where the simulation waits for the next stage's instead;
 * the same incoming transfer is in the chunk's forward too, so m F + m v bc
 * still does not exceed the simulation's rank 0.)
 * PTDC_SEARCH_NO_TAIL (tests/search/cutbound.sh): none, to compare. */
static double tail_bound(const Src *s, const SrcVariant *V, const Plan *p, double m)
{
    if (s->c->st.ref_stack || getenv("PTDC_SEARCH_NO_TAIL"))
        return 0;
    int v = p->v > 0 ? p->v : 1, pp = p->pp > 0 ? p->pp : 1, z = p->zero;
    bool split = plan_schedule_split(p->schedule);
    double sd = fmin(1, fmax(0, pass_overlap_slowdown(&s->c->cl->gpu))), g = fmin(m, pp);
    double *f = ir_xcalloc((size_t)pp * 4, sizeof(double)), *b = f + pp, *w = b + pp, *rs = w + pp;
    double red = 0, opt = 0;
    for (int st = 0; st < p->nstages; st++) {
        const PlanStage *S = &p->stages[st];
        for (int q = S->first_piece; q < S->first_piece + S->npieces; q++) {
            const SrcPiece *P = &V->piece[q];
            f[S->pp_rank] += P->fwd;
            b[S->pp_rank] += P->bwd + P->rec[S->recompute]; /* split: B and W */
            w[S->pp_rank] += P->dw;
            rs[S->pp_rank] += P->rs_lb;
            if (S->pp_rank == 0)
                red += P->red[z], opt += P->opt[z];
        }
        rs[S->pp_rank] += stage_p2p(V, p, st);
    }
    double bc = split ? w[0] : b[0] / v, n = split ? m : m * v;
    double base = split ? m * (f[0] + b[0] - w[0]) : m * f[0], best = 0;
    for (int j = 0; j < v; j++) {
        double coef = n - (1 - sd) * (j * g + 1);
        if (coef < 0)
            break;
        best = fmax(best, base + coef * bc + (1 - sd) * (j + 1) * red / v + sd * red + opt);
    }
    if (v == 1 && p->nstages == pp) {
        double fpre = f[0], bmid = 0, d = 0;
        for (int r = 1; r < pp; r++) {
            double own = (split ? f[r] + b[r] - w[r] : f[r] + b[r]) + rs[r];
            d = fmax(d, fpre + m * own + bmid);
            fpre += f[r];
            bmid += split ? b[r] - w[r] : b[r];
        }
        if (pp > 1)
            best = fmax(best, d + (split ? b[0] - w[0] : 0) + sd * bc + red + opt);
    }
    free(f);
    return best;
}

/* cut_bound under ZB-H1 (one chunk per rank; stage r on rank r), from each
 * stage's forward f, backward without its weight gradients b (with its
 * recomputation) and weight gradients w (SrcPiece.dw, as pass_predict splits
 * them): rank r starts once micro-batch 0's forward has passed the stages
 * before it; it runs m forwards and backwards, and of its weight gradients all
 * but those plan/schedule.c defers past its last backward (r of them, and the
 * one right after), before that backward ends; then that micro-batch's
 * backward still runs through the stages before it and rank 0 its last W.
 * And the busiest rank's m micro-batches. Ranks sharing cores: their whole
 * work over the speed of one alone, or over pp ranks. */
static double split_bound(const Src *s, const SrcVariant *V, const Plan *p)
{
    int pp = p->pp > 0 ? p->pp : 1;
    double m = p->num_micro > 0 ? p->num_micro : 1, b = 0, top = 0, all = 0;
    double before_f = 0, before_b = 0, w0 = 0;
    for (int r = 0; r < p->nstages && r < pp; r++) {
        const PlanStage *S = &p->stages[r];
        double f = 0, bw = 0, w = 0, rs = 0;
        for (int q = S->first_piece; q < S->first_piece + S->npieces; q++) {
            f += V->piece[q].fwd;
            bw += V->piece[q].bwd + V->piece[q].rec[S->recompute] - V->piece[q].dw;
            w += V->piece[q].dw;
            rs += V->piece[q].rs_lb; /* forward and backward: only where both count */
        }
        rs += stage_p2p(V, p, r);
        bw = fmax(0, bw);
        if (r == 0)
            w0 = w;
        double early = fmax(0, m - (r < m ? r : m) - 1); /* W before its last backward */
        b = fmax(b, before_f + m * (f + bw + rs) + early * w + before_b + (r > 0 ? w0 : 0));
        top = fmax(top, m * (f + bw + w + rs));
        all += f + bw + w + rs;
        before_f += f, before_b += bw;
    }
    b = fmax(b, top);
    PassShare sh;
    if (pass_share(s->c->cl, pp, plan_mesh_devices(&p->mesh), &sh))
        b = fmax(top / pass_share_speed(&sh, 1), m * all / pp);
    else
        b = fmax(b, tail_bound(s, V, p, m));
    return b;
}

/* A bound on plan p's step time once its stages are cut, from its stages'
 * kernel times (the same pass_cost_node numbers pass_predict sums), the
 * least resharding inside their pieces (rs_lb) and the transfers they wait
 * for (stage_p2p), which pass_predict's stage times only add to:
 * the busiest rank runs m micro-batches one after another; one micro-batch
 * passes every stage forward and back; and a rank cannot start before the
 * first micro-batch's forward reaches it through the first chunk of the
 * ranks before it and, after its last backward, that micro-batch's
 * backward still runs through them: their first chunks + m x its own
 * work. pass_predict's simulation (and a reference stack's formula,
 * larger) is never below. */
static double cut_bound(const Src *s, const SrcVariant *V, const Plan *p)
{
    int ns = p->nstages, pp = p->pp > 0 ? p->pp : 1;
    double m = p->num_micro > 0 ? p->num_micro : 1;
    if (plan_schedule_split(p->schedule))
        return split_bound(s, V, p);
    double *rank = ir_xcalloc((size_t)pp * 2, sizeof(double)), *first = rank + pp;
    double tsum = 0;
    for (int st = 0; st < ns; st++) {
        const PlanStage *S = &p->stages[st];
        double t = 0;
        for (int q = S->first_piece; q < S->first_piece + S->npieces; q++)
            t += V->piece[q].fwd + V->piece[q].bwd + V->piece[q].rec[S->recompute] + V->piece[q].rs_lb;
        t += stage_p2p(V, p, st);
        rank[S->pp_rank] += t;
        if (st < pp)
            first[S->pp_rank] = t;
        tsum += t;
    }
    double b = tsum, top = 0, before = 0;
    for (int r = 0; r < pp; r++) {
        b = fmax(b, before + m * rank[r]), top = fmax(top, rank[r]);
        before += first[r];
    }
    free(rank);
    PassShare sh; /* ranks sharing cores run faster while others wait */
    if (pass_share(s->c->cl, pp, plan_mesh_devices(&p->mesh), &sh))
        b = pass_share_bound(&sh, pp, tsum, top, m);
    else
        b = fmax(b, tail_bound(s, V, p, m));
    return b;
}

/* Did memory shape this cut: does it differ (boundaries or recomputation)
 * from the fastest cut with no memory limit (free; NULL: there is none)? */
static bool memory_shaped(const SrcPart *free_, const SrcPart *part)
{
    if (!free_)
        return true;
    for (int i = 0; i < part->nstages; i++)
        if (part->stage[i].first_piece != free_->stage[i].first_piece ||
            part->stage[i].npieces != free_->stage[i].npieces ||
            part->stage[i].recompute != free_->stage[i].recompute)
            return true;
    return false;
}

/* hope_on's fill and drain of one-chunk candidate k on H (src_pipe_floor;
 * 0 where it has none: ranks sharing cores, ZB-H1 under a reference
 * stack). stop, only: src_pipe_floor's. */
static double pipe_floor(Src *s, const SrcGroup *G, const SrcCand *k, const SrcVariant *H, double stop, bool only)
{
    PassShare sh;
    if (pass_share(s->c->cl, k->pp, plan_mesh_devices(&G->mesh), &sh))
        return 0;
    if (!plan_schedule_split(k->sched))
        return src_pipe_floor(s, G, H, k, s->usable, 1, stop, only);
    if (s->c->st.ref_stack)
        return 0;
    /* ZB-H1's: every piece's path (its forwards and B) is at least its
     * strategy-free path work over the mesh (SrcWork.t_path), beta times
     * its time here under any policy */
    const SrcWork *W = src_work(s, G->mb_seqs);
    double n = G->dp * G->cp * G->tp, beta = 1;
    for (int p = 0; p < s->npieces; p++) {
        const SrcPiece *P = &H->piece[p];
        for (int r = 0; r < SRC_NRC; r++) {
            double t = P->fwd + P->bwd + P->rec[r] + P->rs_f + P->rs_b;
            if (src_rc_on(s, r) && t > 0)
                beta = src_fmin(beta, W->t_path[p * SRC_NRC + r] / n / t);
        }
    }
    return src_pipe_floor(s, G, H, k, s->usable, beta, stop, only);
}

/* A lower bound on candidate k's step with every variant whose pieces are
 * no faster and no leaner than H's (hope_bound: the floor; walk_bound: the
 * floor with the layers no faster than a walked point's), cut by the
 * partition, which finds the least slowest-rank time over every cut that
 * fits (a cut that fits with some variant's memory fits H): the busiest
 * rank runs m micro-batches, and one micro-batch passes every piece at
 * least without recomputation. INFINITY when not even H fits. stop: a
 * caller that asks only whether the bound reaches stop (a threshold) may
 * be answered by any value at least stop; INFINITY: the bound itself. */
static double hope_on(Src *s, const SrcGroup *G, const SrcCand *k, SrcVariant H, double stop)
{
    SrcPart part;
    double b = INFINITY, pf = NAN;
    if (k->v == 1 && k->pp > 1 && isfinite(stop)) {
        /* Asked only whether the bound reaches stop: the fill and drain
         * alone, tested at stop (one greedy cut), often says so, without
         * the partition or the bisection (below stop it is the whole
         * fill and drain, kept for below). */
        pf = pipe_floor(s, G, k, &H, stop, false);
        if (pf >= stop)
            return pf;
    }
    if (k->v > 1) {
        /* Interleaved: the chunks are cut by the variant's costs, so the
         * floor's cut is not every variant's: the busiest rank runs m
         * micro-batches of at least its share of the work, and of the
         * costliest piece; one micro-batch passes every piece. Memory is
         * left to the variant's own cut. */
        double tsum = 0, top = 0;
        for (int p = 0; p < s->npieces; p++) {
            double t = H.piece[p].fwd + (k->rc != SRC_AUTO ? H.piece[p].rec[k->rc] : 0);
            tsum += t;
            top = fmax(top, t);
        }
        b = fmax(tsum, G->m * fmax(tsum / k->pp, top));
        PassShare sh;
        if (pass_share(s->c->cl, k->pp, plan_mesh_devices(&G->mesh), &sh))
            b = pass_share_bound(&sh, k->pp, tsum, fmax(tsum / k->pp, top), G->m);
    } else if (src_partition(s, G, &H, k, s->usable, false, &part)) {
        int pp = k->pp;
        double *rank = ir_xcalloc((size_t)pp, sizeof(double)), tsum = 0, top = 0, before = 0;
        for (int p = 0; p < s->npieces; p++)
            tsum += H.piece[p].fwd + (k->rc != SRC_AUTO ? H.piece[p].rec[k->rc] : 0);
        for (int st = 0; st < part.nstages; st++) {
            const PlanStage *S = &part.stage[st];
            for (int q = S->first_piece; q < S->first_piece + S->npieces; q++)
                rank[S->pp_rank] += H.piece[q].fwd + H.piece[q].rec[S->recompute];
        }
        bool split = plan_schedule_split(k->sched); /* (pipe_bound: no one micro-batch's path) */
        b = split ? 0 : tsum;
        for (int r = 0; r < pp; r++) {
            top = fmax(top, rank[r]);
            /* interleaved: the chunks are fixed, each rank's policy the
             * fastest that fits, so its time is least; the first chunks of
             * the ranks before it (at no recomputation) precede its work
             * (cut_bound) */
            b = fmax(b, G->m * rank[r] + (k->v > 1 ? before : 0));
            for (int q = part.stage[r].first_piece; q < part.stage[r].first_piece + part.stage[r].npieces; q++)
                before += H.piece[q].fwd;
        }
        free(rank);
        PassShare sh; /* ranks sharing cores run faster while others wait */
        if (pass_share(s->c->cl, pp, plan_mesh_devices(&G->mesh), &sh))
            b = split ? fmax(G->m * top / pass_share_speed(&sh, 1), G->m * tsum / pp)
                      : pass_share_bound(&sh, pp, tsum, top, G->m);
        else if (k->v == 1 && pp > 1) /* and the fill and drain */
            b = fmax(b, isnan(pf) ? pipe_floor(s, G, k, &H, INFINITY, false) : pf);
    }
    return b;
}

/* hope_on at the floor (src_floor_pieces: the least kernel time and memory
 * any strategy of the mesh has, with the least resharding inside each
 * piece: search_edges.c): a bound whatever variant k is solved with. */
static double hope_bound(Src *s, const SrcGroup *G, const SrcCand *k, const double *delta, double stop)
{
    SrcVariant H;
    memset(&H, 0, sizeof H);
    /* hope_on only reads the pieces, and asks no floor of its own: the
     * remembered answer itself (src_floor_pieces_at). */
    H.piece = (SrcPiece *)src_floor_pieces_at(s, G, k->zero, delta);
    return hope_on(s, G, k, H, stop);
}

/* k->hope, and k->hope_fit: the same bound for the plans that fit, on
 * floors without the strategies none of them can use (src_floor_fit); the
 * middle layers' floors raised to the ILP's least (search_layerlb.c). */
static void hope_bounds(Src *s, SrcGroup *G, SrcCand *k)
{
    src_layer_lb(s, G);
    k->hope = hope_bound(s, G, k, NULL, INFINITY);
    double *delta = ir_xmalloc(sizeof(double) * (size_t)(s->npieces + 1));
    bool any = false;
    if (!src_floor_fit(s, G, k->pp, k->zero, delta))
        k->hope_fit = INFINITY;
    else {
        for (int p = 0; p < s->npieces; p++)
            any |= delta[p] > 0;
        k->hope_fit = any ? fmax(k->hope, hope_bound(s, G, k, delta, INFINITY)) : k->hope;
        /* The recomputation and the leaner strategies the ranks' memory
         * forces: interleaved, the frontier bound above leaves memory to
         * the variants' own cuts; one chunk per rank, it cuts the floor,
         * whose states are each node's least, not those of one strategy
         * per layer (search_fitmem.c). */
        if (k->pp > 1 && isfinite(k->hope_fit))
            k->hope_fit = fmax(k->hope_fit, fit_mem(s, G, k, delta));
    }
    free(delta);
}

/* A bound on k's plans that fit, with no variant of its group needed:
 * src_fit_bound's, and, pipelined, once the group's floor is known, the
 * floor without the strategies no fitting plan uses (src_floor_fit) cut
 * into stages that fit (hope_bound; one chunk per rank: an interleaved
 * candidate's chunks are each variant's own) and the recomputation and
 * leaner strategies memory forces on its ranks (fit_mem); each term only
 * while the bound stays under thr (a candidate at or above it is dropped
 * for good: thr only falls). The cut is what the strategy-free bounds
 * lack: whole pieces per rank (DeepSeek-V3's 61 on 32 ranks: two layers
 * on the busiest, not 1.9), its fill and drain, and memory. */
static double fit_floor_bound(Src *s, const SrcGroup *G, const SrcCand *k, double thr)
{
    double b = src_fit_bound(s, G, k);
    if (k->pp < 2 || !(b < thr) || !G->floor_t)
        return b;
    double *delta = ir_xmalloc(sizeof(double) * (size_t)(s->npieces + 1));
    if (!src_floor_fit(s, G, k->pp, k->zero, delta))
        b = INFINITY;
    if (k->v == 1 && b < thr && !getenv("PTDC_SEARCH_NO_FIT_CUT")) /* (tests/search/fitcut.sh: without, to compare) */
        b = fmax(b, hope_bound(s, G, k, delta, thr));
    if (b < thr)
        b = fmax(b, fit_mem(s, G, k, delta));
    free(delta);
    return b;
}

/* Can no plan of k that fits beat thr (fit_floor_bound)? Only once a plan
 * fits: before, the closest plan that does not is still of interest. */
static bool fit_pruned(const Rank *R, SrcGroup *G, SrcCand *k, double thr)
{
    if (!R->out->found || R->s->o->exhaustive)
        return false;
    if (isnan(k->lb_fit))
        k->lb_fit = fit_floor_bound(R->s, G, k, thr);
    return k->lb_fit >= thr;
}

/* No plan of G can win: its candidates not yet done are, pruned by time
 * (those its memory bounds dropped were counted so already). */
static void finish_group(Src *s, SrcGroup *G)
{
    for (int i = 0; i < G->ncand; i++)
        if (G->cand[i].mem_lb <= s->usable && !G->cand[i].done) {
            G->cand[i].done = true;
            s->st->pruned_time++;
        }
}

/* group_dead's bound on k's plans that fit with the floor G has so far
 * (the strategy-free pieces, or the time floor): src_fit_bound's, and,
 * one chunk per rank, the fill and drain of those pieces cut into stages
 * (pipe_floor; only whether it reaches thr). The pieces are the floor's
 * remembered answer, read in place (src_floor_pieces_at: pipe_floor asks
 * no floor of its own). */
static double dead_bound(Src *s, const SrcGroup *G, const SrcCand *k, double thr)
{
    double b = src_fit_bound(s, G, k);
    if (b < thr && k->pp > 1 && k->v == 1) {
        SrcVariant H;
        memset(&H, 0, sizeof H);
        H.piece = (SrcPiece *)src_floor_pieces_at(s, G, k->zero, NULL);
        b = fmax(b, pipe_floor(s, G, k, &H, thr, isfinite(thr)));
    }
    return b;
}

/* Before the search makes a group's next floor (search_order.c): can none
 * of its candidates' plans that fit beat thr with the floor it has
 * (dead_bound: fit_floor_bound's terms but the floor's memory and the
 * partition)? Then the floor is not made, nor the group solved: its
 * candidates are done. The floors cost more than the test: DeepSeek-V3 on
 * 2048 B200s makes 1,672 time floors and 685 whole ones, not 2,143 and
 * 999. */
static bool group_dead(void *ctx, SrcGroup *G, double thr)
{
    Rank *R = ctx;
    Src *s = R->s;
    if (!R->out->found || s->o->exhaustive || getenv("PTDC_SEARCH_NO_FIT_CUT"))
        return false;
    bool live = false;
    for (int i = 0; i < G->ncand && !live; i++) {
        const SrcCand *k = &G->cand[i];
        if (k->mem_lb > s->usable || k->done || k->lb >= thr)
            continue;
        live = dead_bound(s, G, k, thr) < thr;
    }
    if (!live)
        finish_group(s, G);
    return !live;
}

static void check_walk(Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k,
                       const PassPrediction *pr);

/* The step time above which record cannot keep plan p nor count it as the
 * best plan using every GPU (strictly above: ties are broken by memory and
 * layout), and above which record_closest has no use for it when it does
 * not fit: what pass_predict_cut may skip simulating. */
static PassPredictCut rank_cut(const Rank *R, const Plan *p)
{
    const PassSearchResult *out = R->out;
    PassPredictCut cut = {INFINITY, INFINITY, 0, NULL};
    if (R->s->o->exhaustive)
        return cut;
    if (out->nalt == R->keep)
        cut.fits = out->alt[R->keep - 1].pred.step_time_s;
    if (p->mesh.size[0] * p->mesh.size[1] * p->pp == R->s->gpus)
        cut.fits = out->full_ranked ? fmax(cut.fits, out->best_full_step_s) : INFINITY;
    if (out->found)
        cut.nofit = -INFINITY;
    return cut;
}

/* pass_predict for evaluate, but a plan that cannot be kept is not
 * simulated (pass_predict_cut): pr then has its memory alone, all
 * evaluate reads of it. src_check: every floor is checked against the
 * simulation, and a skipped plan predicted whole to check that record and
 * record_closest would have left it. */
static void rank_predict(const Rank *R, const Plan *p, PassPrediction *pr)
{
    const Src *s = R->s;
    PassPredictCut cut = rank_cut(R, p);
    cut.pieces = R->pieces;
    bool whole = pass_predict_cut(s->c, s->g, p, &cut, pr);
    if (!src_check(s))
        return;
    double floor = cut.floor;
    if (!whole) {
        double peak = pr->peak_mem_bytes;
        bool fits = pr->fits;
        pass_prediction_free(pr);
        pass_predict(s->c, s->g, p, pr);
        if (pr->peak_mem_bytes != peak || pr->fits != fits)
            ir_die("search: pass_predict_cut's memory %.0f differs from pass_predict's %.0f", peak,
                   pr->peak_mem_bytes);
        /* record's and record_closest's own tests, not the cut's */
        const PassSearchResult *out = R->out;
        bool full = p->mesh.size[0] * p->mesh.size[1] * p->pp == s->gpus;
        bool used = fits ? (full && (!out->full_ranked || pr->step_time_s < out->best_full_step_s)) ||
                               out->nalt < R->keep || better(p, pr, &out->alt[R->keep - 1].plan, &out->alt[R->keep - 1].pred)
                         : !out->found;
        if (used || !(pr->step_time_s > (fits ? cut.fits : cut.nofit)))
            ir_die("search: pass_predict_cut skipped a plan of %.9g s that the ranking uses (its cut %.9g; dp %d "
                   "tp %d pp %d v %d)",
                   pr->step_time_s, fits ? cut.fits : cut.nofit, p->mesh.size[0], p->mesh.size[1], p->pp, p->v);
    }
    if (floor > pr->step_time_s)
        ir_die("search: the schedule's floor %.9g above pass_predict's %.9g (dp %d tp %d pp %d v %d m %d, %s)",
               floor, pr->step_time_s, p->mesh.size[0], p->mesh.size[1], p->pp, p->v, p->num_micro,
               plan_schedule_name(p->schedule));
}

static bool same_cut(const SrcPart *a, const SrcPart *b)
{
    if (a->nstages != b->nstages)
        return false;
    for (int i = 0; i < a->nstages; i++) {
        const PlanStage *x = &a->stage[i], *y = &b->stage[i];
        if (x->first_piece != y->first_piece || x->npieces != y->npieces || x->pp_rank != y->pp_rank ||
            x->recompute != y->recompute)
            return false;
    }
    return true;
}

/* Can candidate k not beat the threshold even with variant V's fastest cut,
 * memory left out (free; NULL: there is none)? Then no leaner variant can
 * either (slower by the ILP's own measure, and memory only makes cuts
 * slower): memory shaped its plan, or nothing of V fits it, yet it is
 * finished as one memory did not shape. */
static bool free_lost(const Rank *R, const SrcGroup *G, const SrcVariant *V, const SrcCand *k,
                      const SrcPart *free_)
{
    if (!free_ || !isfinite(threshold(R)) || getenv("PTDC_SEARCH_NO_FREE_CUT")) /* (tests/search/freecut.sh) */
        return false;
    Plan p;
    src_plan(R->s, G, V, k, free_, &p);
    double b = cut_bound(R->s, V, &p);
    if (debug_level() >= 2)
        fprintf(stderr, "      the fastest cut, memory left out: bound %.3f\n", b);
    return b >= threshold(R);
}

/* Cut, predict, and keep candidate k with variant V. Afterwards k->limited
 * says whether memory shaped what it got (so a leaner variant may do
 * better, never better than k->hope), k->done whether no variant can make
 * it win. */
static void evaluate(Rank *R, SrcGroup *G, const SrcVariant *V, SrcCand *k)
{
    Src *s = R->s;
    SrcPart part, last, free_;
    /* the fastest cut, memory left out: what memory_shaped and free_lost compare with */
    const SrcPart *fr = src_partition(s, G, V, k, INFINITY, false, &free_) ? &free_ : NULL;
    double cap = s->usable;
    bool fit = false, shaped = false;
    for (int attempt = 0; attempt < 3 && !fit; attempt++) {
        if (attempt > 0) { /* the cut pass_predict just found too big */
            last.nstages = part.nstages;
            memcpy(last.stage, part.stage, sizeof(PlanStage) * (size_t)part.nstages);
        }
        if (!src_partition(s, G, V, k, cap, false, &part)) {
            if (debug_level() >= 2)
                fprintf(stderr, "      cut %d: none fits under %.4g GB\n", attempt, cap / 1e9);
            break;
        }
        /* The same cut under the lowered limit (the estimate that far
         * under pass_predict's total): the same plan, too big again. */
        if (attempt > 0 && same_cut(&part, &last))
            break;
        Plan p;
        src_plan(s, G, V, k, &part, &p);
        if (filtered_out(s, &p)) {
            k->done = true;
            return;
        }
        /* A cut made under a lowered limit is shaped by memory. */
        shaped = attempt > 0 || memory_shaped(fr, &part);
        double cb = cut_bound(s, V, &p);
        if (debug_level() >= 2)
            fprintf(stderr, "      cut %d: bound %.3f, estimated %.4g GB of %.4g, %s\n", attempt, cb,
                    part.mem_peak / 1e9, s->usable / 1e9, shaped ? "shaped by memory" : "the fastest");
        if (!s->o->exhaustive && cb >= threshold(R)) {
            s->st->pruned_time++;
            k->limited = shaped && !free_lost(R, G, V, k, fr);
            k->done = !k->limited;
            if (k->limited && isnan(k->hope))
                hope_bounds(s, G, k);
            return;
        }
        PassPrediction pr;
        rank_predict(R, &p, &pr);
        s->st->evaluated++;
        if (s->o->exhaustive) {
            src_layer_lb(s, G); /* so that the check covers it */
            check_bounds(s, G, V, k, &p, &pr);
            check_walk(s, G, V, k, &pr);
            if (cb > pr.step_time_s * (1 + 1e-9))
                ir_die("search: cut bound %.9g above pass_predict's %.9g (dp %d tp %d pp %d v %d)", cb,
                       pr.step_time_s, G->dp, G->tp, k->pp, k->v);
        }
        /* The cut's memory is a floor of pass_predict's (search_dp.c): a
         * cut it said fits may not, one it refused never would. */
        if ((s->o->exhaustive || src_check(s)) && part.mem_peak > pr.peak_mem_bytes * (1 + 1e-9))
            ir_die("search: the partition's memory estimate %.0f is above pass_predict's %.0f (dp %d tp %d pp "
                   "%d v %d zero %d)",
                   part.mem_peak, pr.peak_mem_bytes, G->dp, G->tp, k->pp, k->v, k->zero);
        if (debug_level() >= 2)
            fprintf(stderr, "      cut %d: pass_predict %.3f s, %.4g GB, %s\n", attempt, pr.step_time_s,
                    pr.peak_mem_bytes / 1e9, pr.fits ? "fits" : "too big");
        if (pr.fits) {
            record(R, V, &p, &pr);
            fit = true;
        } else {
            s->overflows++;
            if (!R->out->found)
                record_closest(R, V, &p, &pr);
            cap -= pr.peak_mem_bytes - s->usable + 1;
        }
        pass_prediction_free(&pr);
    }
    k->limited = (!fit || shaped) && (s->o->exhaustive || !free_lost(R, G, V, k, fr));
    k->done = !k->limited;
    if (k->limited && isnan(k->hope))
        hope_bounds(s, G, k);
}

static int cmp_cand(const void *a, const void *b)
{
    const SrcCand *x = a, *y = b;
    if (x->lb != y->lb)
        return (x->lb > y->lb) - (x->lb < y->lb);
    int kx[] = {x->pp, x->v, x->rc, x->zero}, ky[] = {y->pp, y->v, y->rc, y->zero};
    for (int i = 0; i < 4; i++)
        if (kx[i] != ky[i])
            return kx[i] - ky[i];
    return 0;
}

/* Rank a group's candidates with variant vi: all of them with the first,
 * then those no variant has finished with. */
static void rank_group(Rank *R, SrcGroup *G, int vi)
{
    Src *s = R->s;
    const SrcVariant *V = &G->var[vi];
    for (int i = 0; i < G->ncand && !R->stop; i++) {
        SrcCand *k = &G->cand[i];
        if (k->mem_lb > s->usable && s->o->exhaustive && vi == 0)
            check_mem_prune(s, G, V, k);
        if (k->mem_lb > s->usable || k->done)
            continue;
        double thr = threshold(R);
        if (k->lb >= thr || (k->limited && k->hope >= thr) ||
            (k->limited && R->out->found && k->hope_fit >= thr) || fit_pruned(R, G, k, thr)) {
            /* no variant can win */
            s->st->pruned_time++;
            k->done = true;
            continue;
        }
        double vb = src_bound_variant(s, G, V, k);
        if (debug_level() >= 2)
            fprintf(stderr, "    rank variant %d dp %d tp %d b %d sp %d pp %d v %d rc %d zero %d: variant bound %.3f "
                    "thr %.3f\n", vi, G->dp, G->tp, G->b, G->sp, k->pp, k->v, k->rc, k->zero, vb, thr);
        if (vb >= thr) {
            s->st->pruned_time++;
            /* No bound at all: the variant's states do not fit this
             * candidate (src_bound_variant), so memory shaped it and a
             * leaner variant may (the walk; e.g. the experts over more
             * ranks where ZeRO-1 cannot hold them over fewer). */
            k->limited = isinf(vb);
            if (k->limited && isnan(k->hope))
                hope_bounds(s, G, k);
            continue;
        }
        evaluate(R, G, V, k);
    }
}

/* Before a group's strategies are solved: can any candidate of it still
 * win? Those that cannot with any plan that fits are dropped (fit_pruned). */
static bool fit_live(Rank *R, SrcGroup *G)
{
    double thr = threshold(R);
    if (!R->out->found || R->s->o->exhaustive)
        return true;
    bool live = false;
    for (int i = 0; i < G->ncand && !live; i++) {
        SrcCand *k = &G->cand[i];
        live = k->mem_lb <= R->s->usable && !k->done && k->lb < thr && !fit_pruned(R, G, k, thr);
    }
    if (!live)
        finish_group(R->s, G);
    return live;
}

/* src_variant's question after each repeat of a group's variant 0 is
 * solved (Src.early_lost): can any candidate of G still rank a plan or
 * leave a leaner variant to walk? src_bound_solved bounds each one's step
 * from below with the layers solved so far at their costs and the rest at
 * their strategy-free work: no more than src_bound_variant's bound on the
 * whole variant (one chunk per rank under ZB-H1: no more than cut_bound's
 * for any cut of it, split_bound's terms being the same sums). Where it
 * reaches the threshold, rank_group would drop every candidate by the
 * variant bound or by the cut's (evaluate, free_lost: not limited), so no
 * plan of the group is predicted and none walks: the rest of the variant
 * is not solved. One stage under automatic recomputation is left to
 * rank_group (src_bound_variant keeps only the policies whose memory
 * fits), as are ranks sharing cores. DeepSeek-V3's MoE layers are 58 of
 * its 61 (src_variant solves the largest repeat first): a group whose MoE
 * layer already loses is not solved for its dense layers, embedding and
 * head (three of its four solves). PTDC_SEARCH_CHECK: every group is
 * solved whole, and one it would have stopped is checked to have ranked
 * nothing (pass_search). PTDC_SEARCH_NO_EARLY: never, to compare. */
static bool early_lost(Src *s, SrcGroup *G, const SrcVariant *V, const bool *have)
{
    Rank *R = s->early_ctx;
    double thr = threshold(R);
    if (!R->out->found || s->o->exhaustive || !isfinite(thr) || s->no_early)
        return false;
    bool live = false;
    for (int i = 0; i < G->ncand && !live; i++) {
        SrcCand *k = &G->cand[i];
        if (k->mem_lb > s->usable || k->done || k->lb >= thr)
            continue;
        PassShare sh;
        if ((k->pp == 1 && k->rc == SRC_AUTO) || pass_share(s->c->cl, k->pp, plan_mesh_devices(&G->mesh), &sh)) {
            live = true;
            break;
        }
        double b = src_bound_solved(s, G, V, have, k);
        live = !(isfinite(b) && b >= thr);
        if (debug_level() >= 2)
            fprintf(stderr, "    early dp %d tp %d b %d sp %d pp %d v %d rc %d zero %d: bound %.3f thr %.3f\n", G->dp,
                    G->tp, G->b, G->sp, k->pp, k->v, k->rc, k->zero, b, thr);
    }
    if (src_check(s)) { /* solved whole all the same: pass_search checks the group ranks nothing */
        G->early_said |= !live; /* (after any repeat) */
        return false;
    }
    return !live;
}

static bool same_strategies(const IrGraph *g, const SrcVariant *a, const SrcVariant *b)
{
    for (int i = 0; i < g->nfwd; i++)
        if (memcmp(a->strat[i].dim, b->strat[i].dim, sizeof a->strat[i].dim) != 0 ||
            a->strat[i].xchg != b->strat[i].xchg)
            return false;
    return true;
}

/* Solve variant G->nvar; false (nothing added) when the ILP has no leaner
 * point or hands back the previous one. */
static bool next_variant(Src *s, SrcGroup *G)
{
    if (G->nvar == G->capvar) {
        G->capvar = G->capvar ? 2 * G->capvar : 4;
        G->var = ir_xrealloc(G->var, (size_t)G->capvar * sizeof *G->var);
    }
    int k = G->nvar;
    if (!src_variant(s, G, k) || (k > 0 && same_strategies(s->g, &G->var[k - 1], &G->var[k]))) {
        src_variant_free(&G->var[k]);
        return false;
    }
    G->nvar++;
    return true;
}

/* Can a leaner variant still help candidate k of G: memory shaped its plan
 * with the last variant, and its frontier bound is below the threshold? */
static bool walkable(const Rank *R, const SrcCand *k)
{
    double thr = threshold(R);
    return !k->done && k->limited && k->mem_lb <= R->s->usable && k->lb < thr && k->hope < thr &&
           (!R->out->found || k->hope_fit < thr);
}

/* The least frontier bound of G's walkable candidates (INFINITY: none). */
static double walk_key(const Rank *R, const SrcGroup *G)
{
    double t = INFINITY;
    for (int i = 0; i < G->ncand; i++)
        if (walkable(R, &G->cand[i]))
            t = fmin(t, G->cand[i].hope);
    return t;
}

/* Per piece of the model, the least time per micro-batch (kernels and
 * resharding, no recomputation) that a repeat's layer can take at variant
 * V's point of the frontier or any later one, into t (0: not known): the
 * ILP's own time for the layer, fwd_s + bwd_s. Each later point of a
 * repeat is the fastest under a budget that V's point's own memory
 * exceeds, so V's point was the fastest under a budget the later one
 * meets: the ILP's step (m x that time + the gradient synchronisation)
 * never falls along the frontier (a proven optimum only: ILP_OPTIMAL, no
 * recomputation pinned into the query's times). The part per micro-batch
 * rises with it where the synchronisation does not grow (leaner points
 * shard the weights more); the exhaustive searches check both that and
 * that the bound is below pass_predict (check_walk). */
static void walk_times(const Src *s, const SrcVariant *V, double *t)
{
    const IrGraph *g = s->g, *gs = s->o->skeleton ? s->o->skeleton : g;
    for (int p = 0; p < g->npieces; p++)
        t[p] = 0;
    for (int i = 0; i < V->nq; i++) {
        const PassIlpQuery *q = &V->q[i];
        const PassIlpResult *r = V->r[i];
        if (q->npieces != 1 || gs->pieces[q->first_piece].rep < 0 || q->recompute != PLAN_RECOMPUTE_NONE ||
            !r->feasible || r->status != ILP_OPTIMAL)
            continue;
        const IrPiece *Q = &gs->pieces[q->first_piece];
        for (int p = 0; p < g->npieces; p++) /* the pieces solve_repeat gave its strategies */
            if (g->pieces[p].rep == Q->rep && g->pieces[p].count == Q->count)
                t[p] = r->fwd_s + r->bwd_s;
    }
}

/* Jumps (walk_jump). After variant V the next variant's budget for a
 * repeat's layer may be cut by `jump` of its memory at V, not by
 * SRC_FRONTIER_STEP: the layer then skips its frontier's points with
 * memory from (1 - jump) of V's up to V's. The walk's later points are the
 * frontier's (each the fastest under a budget), so with the layer at such
 * a point its pieces hold at least the least model states of those points
 * (pass_ilp_stage_least; under the query's ZeRO stage, and no less under
 * a lower one), whatever the other layers' points; a layer at its
 * frontier's leanest point (ended: nothing below its memory) keeps it, and
 * its own states. */
typedef struct JumpStates {
    double *lb;                   /* [npieces]: the least model states, or -INFINITY */
    int *zq;                      /* [npieces]: the ZeRO stage lb is under */
} JumpStates;

/* Has the layer of V's query i no leaner point than V's (ended)? */
static bool rep_ended(Src *s, const SrcVariant *V, int i)
{
    const IrGraph *gs = s->o->skeleton ? s->o->skeleton : s->g;
    double m = pass_ilp_stage_least(s->cache, s->c, &pass_ilp_costs, gs, &V->q[i], -1, 0,
                                    V->r[i]->mem_bytes * (1 - SRC_FRONTIER_STEP));
    return !isnan(m) && !isfinite(m);
}

/* Is V's query i a repeat's layer (one piece, feasible)? */
static bool rep_query(const Src *s, const SrcVariant *V, int i)
{
    const IrGraph *gs = s->o->skeleton ? s->o->skeleton : s->g;
    return V->q[i].npieces == 1 && gs->pieces[V->q[i].first_piece].rep >= 0 && V->r[i]->feasible;
}

/* J for a jump of `jump` after V with V's query `raised` at a skipped
 * point; ended[i]: V's query i has ended (rep_ended). */
static void jump_states(Src *s, const SrcVariant *V, double jump, int raised, const bool *ended, JumpStates *J)
{
    const IrGraph *g = s->g, *gs = s->o->skeleton ? s->o->skeleton : g;
    J->lb = ir_xmalloc(sizeof(double) * (size_t)(g->npieces + 1));
    J->zq = ir_xcalloc((size_t)g->npieces + 1, sizeof(int));
    for (int p = 0; p < g->npieces; p++)
        J->lb[p] = -INFINITY;
    for (int i = 0; i < V->nq; i++) {
        if (!rep_query(s, V, i) || (i != raised && !ended[i]))
            continue;
        const PassIlpQuery *q = &V->q[i];
        const PassIlpResult *r = V->r[i];
        const IrPiece *Q = &gs->pieces[q->first_piece];
        double lo = i == raised ? (1 - jump) * r->mem_bytes : r->mem_bytes;
        double lb = pass_ilp_stage_least(s->cache, s->c, &pass_ilp_costs, gs, q, ILP_MEM_PARAM, lo * (1 - 1e-9),
                                         r->mem_bytes * (1 + 1e-9));
        if (isnan(lb)) /* no frontier kept: no bound */
            continue;
        for (int p = 0; p < g->npieces; p++)
            if (g->pieces[p].rep == Q->rep && g->pieces[p].count == Q->count)
                J->lb[p] = lb * (1 - 1e-9), J->zq[p] = q->zero;
    }
}

static void jump_states_free(JumpStates *J)
{
    free(J->lb);
    free(J->zq);
}

/* A lower bound on candidate k's step with the walk's later points of the
 * frontier, after variant V: hope_on with each repeat's layers no faster
 * than at V's point (walk_times; the floor where it is higher) and the
 * floor's memory, and, for the plans that fit (fit: once one does), the
 * floor without the strategies no fitting plan uses and the memory forces
 * of search_fitmem.c on those pieces. The frontier bound (hope) is the same
 * at the floor's times; this one rises as the walk goes down the frontier,
 * so a walk ends once the layers are too slow for any cut to win. With J
 * (a jump's skipped points, else NULL), the pieces' memory raised to it. */
static double walk_bound(Src *s, const SrcGroup *G, const SrcCand *k, const SrcVariant *V, bool fit,
                         const JumpStates *J)
{
    double *delta = NULL, b = INFINITY;
    if (fit) {
        delta = ir_xmalloc(sizeof(double) * (size_t)(s->npieces + 1));
        if (!src_floor_fit(s, G, k->pp, k->zero, delta)) {
            free(delta);
            return INFINITY;
        }
    }
    SrcVariant H;
    memset(&H, 0, sizeof H);
    H.piece = ir_xmalloc(sizeof *H.piece * (size_t)s->npieces);
    double *t = ir_xmalloc(sizeof(double) * (size_t)(s->npieces + 1));
    src_floor_pieces(s, G, k->zero, delta, H.piece);
    walk_times(s, V, t);
    const SrcWork *W = src_work(s, G->mb_seqs); /* the strategy-free work, for recomputation */
    double nd = G->dp * G->cp * G->tp;
    for (int p = 0; p < s->npieces; p++) {
        SrcPiece *P = &H.piece[p];
        /* Recomputation only adds to a layer's time: each policy's time is
         * at least its floor's, and the point's time without it plus the
         * least its recomputed forward takes on the mesh whatever the
         * strategy (that work at peak rates over the mesh's devices). The
         * floor's own difference between policies is one of minima over
         * strategies (the fastest layout without recomputation may not be
         * the fastest with it), no bound on one strategy's recomputation. */
        double t0 = fmax(P->fwd, t[p]);
        for (int r = 0; r < SRC_NRC; r++) {
            double rw = fmax(0, W->t[p * SRC_NRC + r] - W->t[p * SRC_NRC + PLAN_RECOMPUTE_NONE]) / nd;
            P->rec[r] = fmax(P->fwd + P->rec[r], t[p] + rw) - t0;
        }
        P->fwd = t0;
    }
    for (int p = 0; J && p < s->npieces; p++)
        if (k->zero <= J->zq[p])
            H.piece[p].states[k->zero] = fmax(H.piece[p].states[k->zero], J->lb[p]);
    b = hope_on(s, G, k, H, INFINITY);
    if (fit && k->pp > 1 && b < INFINITY)
        b = fmax(b, src_fitmem_bound(s, G, k, H.piece));
    free(t);
    free(H.piece);
    free(delta);
    return b;
}

/* The budget cuts walk_jump tries, smallest first. */
static const double jumps[] = {1.0 / 128, 1.0 / 32, 1.0 / 8, 1.0 / 4, 1.0 / 2};
enum { NJUMPS = sizeof jumps / sizeof jumps[0] };

/* V's answer to J's query i (the same layer), or NULL. */
static const PassIlpResult *same_layer(const SrcVariant *J, int i, const SrcVariant *V)
{
    for (int x = 0; x < V->nq; x++)
        if (V->q[x].npieces == 1 && V->q[x].first_piece == J->q[i].first_piece)
            return V->r[x];
    return NULL;
}

/* walk_bound after every variant up to V (exhaustive searches walk every
 * frontier to its end) is at most what pass_predict says for a plan ranked
 * with V, as the walk's pruning takes it to be (walk_times, walk_prune);
 * so is each jump's bound after an earlier variant where V's layer lies in
 * the points the jump skips. */
static void check_walk(Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k,
                       const PassPrediction *pr)
{
    for (int j = 0; j <= (int)(V - G->var); j++)
        for (int fit = 0; fit <= pr->fits; fit++) {
            double b = walk_bound(s, G, k, &G->var[j], fit, NULL);
            if (b > pr->step_time_s * (1 + 1e-9))
                ir_die("search: walk bound %.9g after variant %d above pass_predict's %.9g with variant %d "
                       "(dp %d tp %d b %d pp %d v %d zero %d%s)", b, j, pr->step_time_s, (int)(V - G->var), G->dp,
                       G->tp, G->b, k->pp, k->v, k->zero, fit ? ", fitting" : "");
        }
    /* The jumps' bounds (walk_jump: plans that fit) on the plans of the
     * later points each skips: an ended repeat keeps its point, and with
     * another at a skipped point the bound raised at it holds. */
    for (int j = 0; j < (int)(V - G->var) && pr->fits; j++) {
        const SrcVariant *A = &G->var[j];
        bool *ended = ir_xcalloc((size_t)A->nq + 1, sizeof(bool));
        for (int i = 0; i < A->nq; i++) {
            const PassIlpResult *r = same_layer(A, i, V);
            ended[i] = rep_query(s, A, i) && rep_ended(s, A, i);
            if (ended[i] && r && r->mem_bytes != A->r[i]->mem_bytes)
                ir_die("search: the layer of piece %d left its frontier's leanest point (%.9g) for %.9g",
                       A->q[i].first_piece, A->r[i]->mem_bytes, r->mem_bytes);
        }
        for (int x = 0; x < NJUMPS; x++)
            for (int i = 0; i < A->nq; i++) {
                const PassIlpResult *r = same_layer(A, i, V);
                if (!rep_query(s, A, i) || ended[i] || !r || !(r->mem_bytes >= (1 - jumps[x]) * A->r[i]->mem_bytes))
                    continue;
                JumpStates J;
                jump_states(s, A, jumps[x], i, ended, &J);
                double b = walk_bound(s, G, k, A, true, &J);
                jump_states_free(&J);
                if (b > pr->step_time_s * (1 + 1e-9))
                    ir_die("search: the bound of a jump of %g after variant %d at piece %d, %.9g, above "
                           "pass_predict's %.9g with variant %d (dp %d tp %d b %d pp %d v %d zero %d)",
                           jumps[x], j, A->q[i].first_piece, b, pr->step_time_s, (int)(V - G->var), G->dp, G->tp,
                           G->b, k->pp, k->v, k->zero);
            }
        free(ended);
    }
}

/* Walkable candidates of G that walk_bound, after G's last variant, shows
 * cannot beat the threshold with any later point are finished; how many.
 * PTDC_SEARCH_NO_WALK_BOUND (tests/search/walk.sh): walk them on, to
 * compare. */
static int walk_prune(Rank *R, SrcGroup *G)
{
    Src *s = R->s;
    int n = 0;
    if (s->o->exhaustive || G->nvar == 0 || getenv("PTDC_SEARCH_NO_WALK_BOUND"))
        return 0;
    for (int i = 0; i < G->ncand; i++) {
        SrcCand *k = &G->cand[i];
        if (walkable(R, k) && walk_bound(s, G, k, &G->var[G->nvar - 1], R->out->found, NULL) >= threshold(R)) {
            k->done = true;
            s->st->pruned_time++;
            n++;
        }
    }
    return n;
}

/* How far below its memory at G's last variant the next variant's budget
 * for each repeat's layer goes (G->jump, by repeat; 0: SRC_FRONTIER_STEP):
 * the largest of `jumps` whose bound (walk_bound with that layer at the
 * points skipped, jump_states) shows that no plan that fits of any
 * walkable candidate with the layer at one of them can beat the threshold,
 * whatever the other layers' points. Once a plan fits only: the points
 * skipped are then those whose layers are too fat for any cut that fits to
 * be fast enough. PTDC_SEARCH_NO_JUMP: one step at a time, to compare
 * (tests/search/jump.sh). */
static void walk_jump(Rank *R, SrcGroup *G)
{
    Src *s = R->s;
    if (s->o->exhaustive || !R->out->found || G->nvar == 0 || getenv("PTDC_SEARCH_NO_JUMP"))
        return;
    const SrcVariant *V = &G->var[G->nvar - 1];
    const IrGraph *gs = s->o->skeleton ? s->o->skeleton : s->g;
    double thr = threshold(R);
    bool *ended = ir_xcalloc((size_t)V->nq + 1, sizeof(bool));
    for (int i = 0; i < V->nq; i++)
        ended[i] = rep_query(s, V, i) && rep_ended(s, V, i);
    for (int i = 0; i < V->nq; i++) {
        if (!rep_query(s, V, i) || ended[i])
            continue;
        double got = 0;
        for (int x = 0; x < NJUMPS; x++) {
            JumpStates J;
            jump_states(s, V, jumps[x], i, ended, &J);
            bool ok = true;
            for (int c = 0; c < G->ncand && ok; c++) {
                const SrcCand *k = &G->cand[c];
                ok = !walkable(R, k) || walk_bound(s, G, k, V, true, &J) >= thr;
            }
            jump_states_free(&J);
            if (!ok)
                break;
            got = jumps[x];
        }
        int rep = gs->pieces[V->q[i].first_piece].rep;
        if (got > 0) {
            if (!G->jump) {
                int nrep = 0; /* solve_repeat's repeats: the model's */
                for (int p = 0; p < s->g->npieces; p++)
                    nrep = s->g->pieces[p].rep + 1 > nrep ? s->g->pieces[p].rep + 1 : nrep;
                G->jump = ir_xcalloc((size_t)nrep + 1, sizeof(double));
            }
            G->jump[rep] = got;
        }
    }
    free(ended);
}

/* Down the ILP's time/memory frontier from G's last variant while some
 * candidate is walkable: the next point is the fastest set of strategies
 * using less memory, which may fit where the last needed recomputation or
 * a worse cut. A candidate memory did not shape is finished: a leaner point
 * is slower by the ILP's own measure; so is one whose cuts cannot win with
 * layers as slow as the last point's (walk_prune). */
static int walk_group(Rank *R, SrcGroup *G)
{
    int ended = 0;
    while (!R->stop && G->nvar > 0) {
        ended += walk_prune(R, G);
        if (!isfinite(walk_key(R, G)))
            break;
        walk_jump(R, G);
        bool more = next_variant(R->s, G);
        free(G->jump);
        G->jump = NULL;
        if (!more)
            break;
        /* The next point reads the two before it (search_ilp.c); older
         * ones keep their queries (variant 0's: src_layer_lb) but not their
         * strategies and costs, whose memory the next variants reuse
         * (exhaustive searches check walk bounds after every variant). */
        if (!R->s->o->exhaustive && G->nvar >= 4) {
            SrcVariant *old = &G->var[G->nvar - 3];
            free(old->strat);
            free(old->piece);
            old->strat = NULL, old->piece = NULL;
        }
        rank_group(R, G, G->nvar - 1);
    }
    return ended;
}

static int cmp_group(const void *a, const void *b)
{
    const SrcGroup *x = a, *y = b;
    if (x->lb != y->lb)
        return (x->lb > y->lb) - (x->lb < y->lb);
    /* Equal bounds: fewer devices per tensor group first (deterministic). */
    if (x->tp != y->tp)
        return x->tp - y->tp;
    if (x->cp != y->cp)
        return x->cp - y->cp;
    if (x->fold != y->fold)
        return x->fold - y->fold;
    if (x->dp != y->dp)
        return y->dp - x->dp;
    if (x->b != y->b)
        return x->b - y->b;
    return (int)x->sp - (int)y->sp;
}

/* A first fit (pass_search_min_gpus): the leanest groups first. */
static int cmp_lean(const void *a, const void *b)
{
    const SrcGroup *x = a, *y = b;
    if (x->mem_lb != y->mem_lb)
        return (x->mem_lb > y->mem_lb) - (x->mem_lb < y->mem_lb);
    return cmp_group(a, b);
}

static int cmp_walk(const void *a, const void *b)
{
    const SrcGroup *x = *(SrcGroup *const *)a, *y = *(SrcGroup *const *)b;
    if (x->walk_key != y->walk_key)
        return (x->walk_key > y->walk_key) - (x->walk_key < y->walk_key);
    return cmp_group(x, y);
}

/* Nothing fits: evaluate the candidate whose memory bound is least, with the
 * leanest recomputation, so that the caller can say what overflows. */
/* How many activations a candidate's schedule holds, in order: 1F1B,
 * then ZB-H1, then interleaving by v (plan_schedule_acts). */
static int lean_sched(const SrcCand *k)
{
    return k->v > 1 ? 1 + k->v : plan_schedule_split(k->sched);
}

static void closest_anyway(Rank *R)
{
    Src *s = R->s;
    SrcGroup *bg = NULL;
    SrcCand *bk = NULL;
    for (int i = 0; i < s->ngroups; i++)
        for (int j = 0; j < s->groups[i].ncand; j++) {
            SrcCand *k = &s->groups[i].cand[j];
            /* Equal bounds: 1F1B holds no more activations than ZB-H1
             * (its W waits) or interleaving (more in flight), whatever
             * the step-time bounds order them by. */
            if (!bk || k->mem_lb < bk->mem_lb ||
                (k->mem_lb == bk->mem_lb && lean_sched(k) < lean_sched(bk)))
                bg = &s->groups[i], bk = k;
        }
    if (!bk)
        return;
    if (bg->nvar == 0 && !next_variant(s, bg))
        return;
    const SrcVariant *V = &bg->var[bg->nvar - 1];
    SrcPart part;
    if (!src_partition(s, bg, V, bk, s->usable, true, &part))
        return;
    Plan p;
    src_plan(s, bg, V, bk, &part, &p);
    PassPrediction pr;
    pass_predict(s->c, s->g, &p, &pr);
    s->st->evaluated++;
    record_closest(R, V, &p, &pr);
    pass_prediction_free(&pr);
}

/* The slot of key in s->fmemo (empty if not there), the table grown first
 * to keep it at most half full. */
static struct SrcFloorMemo *floor_slot(Src *s, uint64_t key)
{
    if (2 * (s->fmemo_n + 1) > s->fmemo_cap) {
        struct SrcFloorMemo *old = s->fmemo;
        int cap = s->fmemo_cap;
        s->fmemo_cap = cap ? 2 * cap : 256;
        s->fmemo = ir_xcalloc((size_t)s->fmemo_cap, sizeof *s->fmemo);
        s->fmemo_n = 0;
        for (int i = 0; i < cap; i++)
            if (old[i].key) {
                *floor_slot(s, old[i].key) = old[i];
                s->fmemo_n++;
            }
        free(old);
    }
    size_t mask = (size_t)s->fmemo_cap - 1, h = (size_t)(key * 0x9E3779B97F4A7C15ull >> 32) & mask;
    while (s->fmemo[h].key && s->fmemo[h].key != key)
        h = (h + 1) & mask;
    return &s->fmemo[h];
}

/* Is k's layout's memory floor under its ZeRO stage (search_memfloor.c)
 * above the usable HBM, so that no plan of k fits? It knows what the
 * strategy-free bounds (mem_lb) average away: stages are whole pieces, so
 * some rank holds ceil(j / pp) of the j largest (DeepSeek-V3 on 64 GB200s,
 * dp 1 x tp 4 x pp 16: at least 209.7 GB, four of the 58 MoE layers on one
 * rank, where mem_lb says 191.4 of the 192.7 usable). The count walk's
 * first-fit searches pass theirs (PassSearchOpts.floor); the others make
 * one when first asked. */
static bool above_floor(Src *s, const SrcGroup *G, const SrcCand *k)
{
    /* Remembered by layout: the groups of a mesh (one per micro-batch
     * size) ask the same, and the pipeline depths of one stage share its
     * pieces' states (pass_mem_floor_layout, the costlier half). */
    const PassMemFloor *f = src_mfloor(s);
    int tp = G->cp * G->tp, n = G->dp * tp;
    uint64_t lay = (((uint64_t)tp << 20 | (uint64_t)n) << 2 | (uint64_t)k->zero) + 1;
    uint64_t key = lay + ((uint64_t)k->pp << 44);
    struct SrcFloorMemo *e = floor_slot(s, key);
    if (!e->key) {
        struct SrcFloorMemo *L = floor_slot(s, lay);
        if (!L->key) {
            L->key = lay;
            L->v = ir_xmalloc(sizeof *L->v * (size_t)(f->npieces + 1));
            pass_mem_floor_layout(f, tp, n, k->zero, L->v);
            s->fmemo_n++;
        }
        const PassMemFloorPiece *v = L->v;
        e = floor_slot(s, key); /* (the table may have grown) */
        e->key = key;
        e->above = pass_mem_floor_pp(f, v, k->pp, tp, n, k->zero) > s->usable;
        s->fmemo_n++;
    }
    /* the remembered answer, against the floor asked anew */
    if (src_check(s) && (pass_mem_floor_zero(f, k->pp, tp, n, k->zero) > s->usable) != e->above)
        ir_die("search: remembered layout floor differs (pp %d tp %d stage %d zero %d)", k->pp, tp, n, k->zero);
    return e->above;
}

/* Whether the search drops the candidates above their layout's floor:
 * exhaustive searches rank them, to check the floor (check_bounds);
 * PTDC_SEARCH_NO_LAYOUT_FLOOR (tests/search/layoutfloor.sh): only the
 * first-fit searches do, to compare. */
static bool floor_drops(const Src *s)
{
    return (s->o->first_fit && s->o->floor) || (!s->o->exhaustive && !getenv("PTDC_SEARCH_NO_LAYOUT_FLOOR"));
}

/* G's candidates' bounds with its next floor (floor_due: the lead class's
 * time floor, the time floor, then the whole per-mesh floor, src.h;
 * costlier than the strategy-free bounds, so only where some candidate's
 * memory bound leaves it a chance), in order, and G's least bounds. The candidates the floor's memory bounds
 * drop are counted (those the bounds before dropped were already). */
static void group_bounds(Src *s, SrcGroup *G)
{
    for (int j = 0; j < G->ncand; j++)
        s->st->pruned_mem -= G->cand[j].mem_lb > s->usable;
    if (G->floor_due > 0) {
        src_group_floor(s, G, G->floor_due - 1);
        src_group_sums(s, G);
        /* Each level's bound holds, so the larger does: a floor may lower
         * the path's share of a piece's time (pipe_bound's beta) and with
         * it the fill and drain's bound, yet the order needs each level at
         * least the last (search_order.c). */
        for (int j = 0; j < G->ncand; j++) {
            double lb0 = G->cand[j].lb;
            src_bound(s, G, &G->cand[j]);
            G->cand[j].lb = fmax(G->cand[j].lb, lb0);
        }
        G->floor_due--;
    }
    if (G->ncand > 1)
        qsort(G->cand, (size_t)G->ncand, sizeof *G->cand, cmp_cand);
    G->mem_lb = G->lb = INFINITY;
    bool floor_on = floor_drops(s);
    for (int j = 0; j < G->ncand; j++) {
        G->mem_lb = fmin(G->mem_lb, G->cand[j].mem_lb);
        if (G->cand[j].mem_lb > s->usable)
            s->st->pruned_mem++;
        else if (floor_on && above_floor(s, G, &G->cand[j])) {
            /* (mem_lb, the visiting order, kept; counted once over the
             * group's floor levels) */
            s->st->pruned_mem += !G->cand[j].done;
            G->cand[j].done = true;
        }
        else
            G->lb = fmin(G->lb, G->cand[j].lb);
    }
}

bool pass_search(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                 PassIlpCache *cache, PassSearchResult *out)
{
    double t0 = now_s();
    memset(out, 0, sizeof *out);
    /* The graph's facts the cost model keeps (PassMemo) are found once for
     * the whole search, not once per price. */
    PassCostCtx cm = *c;
    PassMemo *own = NULL;
    if (!cm.memo || cm.memo->g != g)
        cm.memo = own = pass_memo_new(g);
    c = &cm;
    Src s;
    memset(&s, 0, sizeof s);
    s.c = c, s.g = g, s.o = o, s.cache = cache, s.st = &out->stats;
    if (src_check(&s)) /* the ILP's shortcuts (frontiers, unique fastest choices) against GLPK too */
        pass_ilp_cache_check(cache, true);
    s.gpus = o->gpus > 0 ? o->gpus : c->cl->ngpus;
    s.gpn = pass_cluster_domain_at(c->cl, s.gpus);
    s.gb = o->global_batch > 0 ? o->global_batch : g->global_batch;
    out->gpus = s.gpus;
    out->global_batch = s.gb;
    s.usable = pass_usable_bytes(c);
    const PassCostConsts *K = &pass_cost_consts;
    s.eff_max = c->cl->gpu.gemm_eff *
                fmax(1, fmax(fmax(K->flash2_fwd, K->flash2_bwd), fmax(K->flash1_fwd, K->flash1_bwd)));
    /* A measured attention kernel may run closer to peak than the GEMMs. */
    for (int d = 0; d < c->cl->gpu.attn_dims; d++)
        for (int i = 0; i < c->cl->gpu.attn_fwd[d].n || i < c->cl->gpu.attn_bwd[d].n; i++) {
            if (i < c->cl->gpu.attn_fwd[d].n)
                s.eff_max = fmax(s.eff_max, c->cl->gpu.attn_fwd[d].y[i] / c->cl->gpu.peak_flops);
            if (i < c->cl->gpu.attn_bwd[d].n)
                s.eff_max = fmax(s.eff_max, c->cl->gpu.attn_bwd[d].y[i] / c->cl->gpu.peak_flops);
        }
    s.npieces = g->npieces;
    s.seq = g->seq_dim >= 0 ? g->dims[g->seq_dim].size : 0;
    for (int i = 0; i < g->nfwd; i++) {
        s.has_attention |= g->nodes[i].op == IR_OP_ATTENTION;
        s.has_moe |= plan_expert_dim(g, &g->nodes[i]) >= 0;
        s.has_scan |= g->nodes[i].op == IR_OP_SSD || g->nodes[i].op == IR_OP_CONV1D;
    }
    for (int p = 0; p < g->npieces; p++)
        s.nlayers += g->pieces[p].rep >= 0;
    src_layer_run(g, &s);
    if (!src_check_pins(&s)) {
        pass_memo_free(own);
        return false;
    }
    int hits0 = pass_ilp_cache_hits(cache), solves0 = pass_ilp_cache_solves(cache);
    /* ZB-H1 may be enumerated under ptdc's programs: piece costs carry its
     * W slots (before enumerate: the candidates' bounds make SrcWork). */
    s.wslots = !c->st.ref_stack && pass_stack_has_schedule(&c->st, PLAN_SCHED_ZB_H1) &&
               (o->pins.schedule < 0 || o->pins.schedule == PLAN_SCHED_ZB_H1) &&
               !getenv("PTDC_SEARCH_NO_WSLOTS"); /* (tests/search/wslots.sh: without, to compare) */
    src_states(&s);
    batch_divisors(&s);
    enumerate(&s);

    Rank R = {&s, out, o->keep > 0 ? o->keep : 1, false, INFINITY, pass_piece_memo_new(src_check(&s))};
    out->alt = ir_xcalloc((size_t)R.keep + 1, sizeof *out->alt);
    /* A first fit's order is by the memory bounds (cmp_lean), which the
     * floor raises; exhaustive searches check every bound: the floor of
     * every group at once there. Otherwise when the search reaches it. */
    bool lazy = !o->first_fit && !o->exhaustive, floor_on = floor_drops(&s);
    src_floor_classes(&s);
    for (int i = 0; i < s.ngroups; i++) {
        SrcGroup *G = &s.groups[i];
        G->mem_lb = INFINITY;
        for (int j = 0; j < G->ncand; j++) {
            G->mem_lb = fmin(G->mem_lb, G->cand[j].mem_lb);
            if (G->cand[j].mem_lb > s.usable)
                s.st->pruned_mem++;
            else if (floor_on && above_floor(&s, G, &G->cand[j])) /* before any floor is made */
                G->cand[j].done = true, s.st->pruned_mem++;
            else
                G->lb = fmin(G->lb, G->cand[j].lb);
        }
        /* some candidate's memory bound leaves it a chance: a floor to make */
        G->floor_due = !isfinite(G->lb) ? 0 : lazy ? (s.floor_lead >= 0 ? 3 : 2) : 1;
        if (G->floor_due <= 1)
            group_bounds(&s, G);
    }
    out->no_layout = s.st->candidates == 0;
    out->micro_cut = s.micro_cut > 0;
    out->full_valid = s.full_valid;
    s.st->groups = s.ngroups;
    SrcOrder ord;
    src_order_init(&ord, &s, o->first_fit ? cmp_lean : cmp_group, group_bounds);
    ord.dead = group_dead, ord.ctx = &R;
    SrcGroup *G;
    bool stopped = false;
    int nearly = 0; /* groups early_lost stopped */
    s.no_early = getenv("PTDC_SEARCH_NO_EARLY") != NULL;
    while (!R.stop && (G = src_order_next(&ord, threshold(&R))) != NULL) {
        if (!isfinite(G->lb) && !(o->exhaustive && G->ncand > 0))
            continue;
        if (G->lb >= threshold(&R) && !o->exhaustive) {
            src_order_push(&ord, G); /* the heap: every group left */
            for (int j = 0; j < ord.n; j++)
                for (int q = 0; q < ord.heap[j]->ncand; q++)
                    s.st->pruned_time += ord.heap[j]->cand[q].mem_lb <= s.usable;
            stopped = true;
            break;
        }
        double thr0 = threshold(&R);
        int sv0 = pass_ilp_cache_solves(cache);
        if (!fit_live(&R, G))
            continue;
        s.st->groups_solved++;
        s.early_lost = early_lost, s.early_ctx = &R;
        bool made = next_variant(&s, G);
        s.early_lost = NULL;
        long ev0 = s.st->evaluated;
        if (made)
            rank_group(&R, G, 0);
        else if (G->lost_early) {
            finish_group(&s, G);
            nearly++;
        }
        if (G->early_said) { /* (src_check) */
            for (int j = 0; j < G->ncand; j++)
                if (G->cand[j].limited || s.st->evaluated != ev0)
                    ir_die("search: early_lost would have stopped group dp %d tp %d b %d sp %d, which %s", G->dp,
                           G->tp, G->b, G->sp, s.st->evaluated != ev0 ? "predicted a plan" : "leaves a candidate to walk");
            nearly++;
        }
        if (o->first_fit && G->nvar > 0) /* down its frontier before the next group */
            walk_group(&R, G);
        if (debug_level()) {
            double lb2 = INFINITY;
            for (int j = 0; j < G->ncand && G->nvar; j++)
                lb2 = fmin(lb2, src_bound_variant(&s, G, &G->var[0], &G->cand[j]));
            fprintf(stderr, "group dp %d tp %d fold %d b %d sp %d: lb %.3f lb2 %.3f thr %.3f -> %.3f, solves %d\n", G->dp,
                    G->tp, G->fold, G->b, G->sp, G->lb, lb2, thr0, threshold(&R), pass_ilp_cache_solves(cache) - sv0);
        }
    }
    if (debug_level()) {
        fprintf(stderr, "groups: %d, %d with a floor to make; made when reached: %d lead class floors, %d time "
                "floors, %d whole floors\n", s.ngroups, ord.ndue, ord.nmade[SRC_FLOOR_LEAD], ord.nmade[SRC_FLOOR_TIME],
                ord.nmade[SRC_FLOOR_WHOLE]);
        fprintf(stderr, "early: %d solved groups stopped after their largest repeat (early_lost%s)\n", nearly,
                src_check(&s) ? ": would have, solved whole under the check" : "");
    }
    if (lazy && src_check(&s))
        src_order_check(&ord, stopped);
    src_order_free(&ord);
    /* Then the frontier walks, once every solved group's first variant has
     * set the threshold: groups with the least frontier bound first. */
    SrcGroup **walk = ir_xmalloc(sizeof *walk * (size_t)(s.ngroups + 1));
    int nwalk = 0;
    for (int i = 0; i < s.ngroups; i++)
        if (isfinite(s.groups[i].walk_key = walk_key(&R, &s.groups[i])))
            walk[nwalk++] = &s.groups[i];
    qsort(walk, (size_t)nwalk, sizeof *walk, cmp_walk);
    for (int i = 0; i < nwalk && !R.stop; i++) {
        double thr0 = threshold(&R);
        int nv0 = walk[i]->nvar, sv0 = pass_ilp_cache_solves(cache);
        if (debug_level())
            for (int j = 0; j < walk[i]->ncand; j++) {
                const SrcCand *k = &walk[i]->cand[j];
                if (walkable(&R, k))
                    fprintf(stderr, "  cand pp %d v %d rc %d zero %d lb %.3f hope %.3f (fit %.3f) mem_lb %.3g\n",
                            k->pp, k->v, k->rc, k->zero, k->lb, k->hope, k->hope_fit, k->mem_lb);
            }
        int ended = walk_group(&R, walk[i]);
        if (debug_level())
            fprintf(stderr, "walk dp %d tp %d b %d sp %d: bound %.3f thr %.3f -> %.3f, variants %d -> %d, solves %d, "
                    "ended by the walk bound %d\n", walk[i]->dp, walk[i]->tp, walk[i]->b, walk[i]->sp,
                    walk[i]->walk_key, thr0, threshold(&R), nv0, walk[i]->nvar,
                    pass_ilp_cache_solves(cache) - sv0, ended);
    }
    free(walk);
    if (debug_level())
        fprintf(stderr, "ranking: %ld piece costs remembered, %ld costed, %ld contexts; %ld plans ranked too big "
                "for pass_predict with a cut estimated to fit\n", R.pieces->hits, R.pieces->misses,
                (long)R.pieces->nctx, s.overflows);
    if (!out->found && !out->have_closest && !out->no_layout && !o->first_fit && !(o->beat_s > 0)) {
        /* its ties go to the first group in the order of the bounds (every
         * group's floor is known: nothing found, nothing stopped the visit) */
        qsort(s.groups, (size_t)s.ngroups, sizeof *s.groups, cmp_group);
        closest_anyway(&R);
    }
    pass_piece_memo_free(R.pieces);
    pass_memo_free(own);

    for (int i = 0; i < s.ngroups; i++) {
        for (int v = 0; v < s.groups[i].nvar; v++)
            src_variant_free(&s.groups[i].var[v]);
        free(s.groups[i].var);
        free(s.groups[i].cand);
        free(s.groups[i].floor_t);
        free(s.groups[i].floor_saved);
        free(s.groups[i].floor_states);
        free(s.groups[i].floor_ws);
        free(s.groups[i].floor_fslack);
        free(s.groups[i].layer_lb);
        free(s.groups[i].fit);
        free(s.groups[i].fit_val);
    }
    free(s.groups);
    if (s.mfloor)
        pass_mem_floor_free(s.mfloor);
    free(s.mfloor);
    for (int i = 0; i < s.fmemo_cap; i++)
        free(s.fmemo[i].v);
    free(s.fmemo);
    free(s.gslot);
    free(s.floor_cls);
    free(s.floor_cnt);
    free(s.floor_row);
    src_floor_free(&s);
    free(s.divs);
    free(s.mbs);
    for (int i = 0; i < s.nwork; i++) {
        free(s.work[i].t);
        free(s.work[i].t_path);
        free(s.work[i].saved);
        free(s.work[i].wsaved);
    }
    free(s.work);
    free(s.xin);
    free(s.xin_at);
    free(s.w);
    free(s.gr);
    free(s.op);
    free(s.xw);
    free(s.xgr);
    free(s.xop);
    out->stats.ilp_solves = pass_ilp_cache_solves(cache) - solves0;
    if (debug_level())
        fprintf(stderr, "ILP (cache so far): %d solves, %d on a kept model, %d from a kept frontier, "
                "%d the unique fastest choice, %d answered otherwise than the solver among ties "
                "(ilp_canon)\n", pass_ilp_cache_solves(cache), pass_ilp_cache_warm(cache),
                pass_ilp_cache_frontier(cache), pass_ilp_cache_unique(cache), pass_ilp_cache_canon(cache));
    out->stats.ilp_hits = pass_ilp_cache_hits(cache) - hits0;
    out->stats.seconds = now_s() - t0;
    return true;
}
