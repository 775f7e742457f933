/* search_nofit.c: after the search, the requests it could not satisfy, each
 * with a sentence saying why: layouts and models that do not fit (the item
 * that overflows and by how much, then what would fit, found by searching
 * again with pins relaxed or more GPUs), and idle GPUs. Calls pass_search, so
 * it sits above search.c; pins refused before searching are search_pins.c's. */
#include "search/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GIB 1073741824.0

/* A layout of whole GPUs: pp x tp x dp, and two floors of its memory per
 * GPU: the model states spread evenly over the stage's GPUs (the order
 * probes are tried in), and the layout's own (pass_mem_floor: what it can
 * split and what ZeRO-3 gathers), at least as high (NAN until its count is
 * tried). */
typedef struct Lay {
    int pp, tp, dp, count;
    double floor, need;
} Lay;

static int cmp_count(const void *a, const void *b)
{
    const Lay *x = a, *y = b;
    return (x->count > y->count) - (x->count < y->count);
}

/* The layouts of [from, limit] GPUs that some search may use whole, by
 * count ascending: pp x tp x dp with pp at most the pieces, tp at most a
 * node (or as pinned), dp dividing the global batch and stages of whole
 * nodes or a divisor of one (pass_search's rules). A plan found on n GPUs
 * uses such a count n' <= n and is found on n' too, so the smallest count
 * on which some plan fits is among theirs. Layouts whose even floor
 * (search_memfloor.c) is above the usable HBM cannot fit and are left
 * out; those whose own floor is are kept, to be passed over (fit_on), so
 * that the counts tried and the layouts probed are the ones the even
 * floor gives (and the plan the note shows with them). */
static Lay *usable_layouts(const IrGraph *g, const PassSearchOpts *o, const PassCluster *cl, int64_t gb,
                           const PassMemFloor *mf, double usable, int from, int limit, int *n)
{
    const PassSearchPins *pin = &o->pins;
    int cap = 256, k = 0;
    Lay *v = ir_xmalloc((size_t)cap * sizeof *v);
    /* The NVLink domain a count is placed with depends on the count (NVL72:
     * 64 GPUs are one domain of 64); gpn, the largest, bounds tp. */
    int gpn = pass_cluster_domain_at(cl, 0);
    int tpmax = pin->tp > gpn ? pin->tp : gpn;
    for (int pp = 1; pp <= g->npieces && pp <= limit; pp++) {
        if (pin->pp && pp != pin->pp)
            continue;
        for (int tp = 1; tp <= tpmax && (int64_t)pp * tp <= limit; tp++) {
            if (pin->tp ? tp != pin->tp : tp > gpn)
                continue;
            for (int64_t dp = 1; dp <= gb && (int64_t)pp * tp * dp <= limit; dp++) {
                if (gb % dp || (pin->dp && dp != pin->dp))
                    continue;
                int stage = tp * (int)dp, count = pp * stage, d = pass_cluster_domain_at(cl, count);
                if (count < from || !(stage % d == 0 || d % stage == 0) || (!pin->tp && tp > d))
                    continue;
                double fl = pass_mem_floor_even(mf, pp, stage);
                if (fl > usable)
                    continue;
                if (k == cap) {
                    cap *= 2;
                    v = ir_xrealloc(v, (size_t)cap * sizeof *v);
                }
                v[k++] = (Lay){pp, tp, (int)dp, count, fl, NAN};
            }
        }
    }
    qsort(v, (size_t)k, sizeof *v, cmp_count);
    *n = k;
    return v;
}

/* Probe order: the fewest data-parallel replicas first, so the most
 * GPUs per replica (pipeline and tensor parallelism divide the model
 * states exactly, where data parallelism needs ZeRO and the stack's
 * stages of it), then the wider tensor group (with sequence parallelism it
 * divides the activations too), then the leaner floor (whole pieces per
 * rank). The floor alone does not order them: it counts the states spread
 * over every GPU of a stage, as no layout of DeepSeek-V3 on 160 GPUs holds
 * them, and it is the same 71.2 GiB for pp 1, 2, 4 and 5 there. */
static int cmp_lean(const void *a, const void *b)
{
    const Lay *x = a, *y = b;
    if (x->dp != y->dp)
        return x->dp - y->dp;
    if (x->tp != y->tp)
        return y->tp - x->tp;
    return (x->floor > y->floor) - (x->floor < y->floor);
}

/* pass_search, quietly (the caller's stream restored after: --json
 * captures it), with its first plan that fits into a when a is not NULL;
 * whether one fits. */
static bool quiet_search(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *q, PassIlpCache *cache,
                         PassSearchAlt *a)
{
    PassSearchResult r;
    FILE *devnull = fopen("/dev/null", "w"), *prev = NULL;
    if (devnull)
        prev = ir_diag_set_stream(devnull);
    bool ok = pass_search(c, g, q, cache, &r);
    if (devnull) {
        ir_diag_set_stream(prev);
        fclose(devnull);
    }
    if (!ok)
        return false;
    bool found = r.found;
    if (found && a) {
        *a = r.alt[0];
        r.alt[0] = (PassSearchAlt){0};
        r.nalt = 0;
    }
    pass_search_result_free(&r);
    return found;
}

/* pass_search_min_gpus' probes of one count: first-fit searches of its
 * layouts pinned one at a time, leanest first. A pinned search weighs a
 * few meshes where the unpinned one weighs hundreds, and solves each
 * before it walks any frontier; the leanest layouts are where a plan that
 * fits is found first. */
#define MIN_PROBES 2

/* A plan that fits on n GPUs into a (the first one found, not the best),
 * or false when none does: the probes, then, if they find none, the
 * unpinned first-fit search of n (what decides that none fits). A layout
 * whose own floor is above the usable HBM fits nowhere: its probe is not
 * run (a search would find nothing), and when every layout of n is such,
 * nothing is searched. */
static bool fit_on(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *q, PassIlpCache *cache,
                   const Lay *lay, int nlay, int n, const PassMemFloor *mf, double usable, PassSearchAlt *a)
{
    Lay *at = ir_xmalloc(sizeof *at * (size_t)(nlay + 1));
    int k = 0;
    bool any = false;
    for (int i = 0; i < nlay; i++)
        if (lay[i].count == n) {
            at[k] = lay[i];
            /* (here, not for every layout: a count's few, and only the
             * counts tried) */
            at[k].need = pass_mem_floor(mf, at[k].pp, at[k].tp, at[k].tp * at[k].dp);
            any |= at[k++].need <= usable;
        }
    qsort(at, (size_t)k, sizeof *at, cmp_lean);
    bool dbg = getenv("PTDC_SEARCH_DEBUG") != NULL, found = false;
    for (int i = 0; i < k && dbg; i++)
        if (at[i].need <= usable)
            fprintf(stderr, "min gpus %d: pp %d tp %d dp %d under its own floor %.2f GiB\n", n, at[i].pp, at[i].tp,
                    at[i].dp, at[i].need / GIB);
    /* The leanest layouts whose own floor fits: one whose floor does not
     * is no probe (it would find nothing), so it leaves its turn to the
     * next (DeepSeek-V3's two leanest on 384 A100-40GBs are above theirs,
     * the third fits: the whole count's search took 2.3 CPU s). */
    for (int i = 0, probes = 0; i < k && probes < MIN_PROBES && !found && any; i++) {
        if (at[i].need > usable)
            continue;
        probes++;
        PassSearchOpts p = *q;
        p.pins.pp = at[i].pp, p.pins.tp = at[i].tp, p.pins.dp = at[i].dp;
        clock_t t0 = clock();
        found = quiet_search(c, g, &p, cache, a);
        if (dbg)
            fprintf(stderr, "min gpus %d: probe pp %d tp %d dp %d (floor %.1f GiB, its own %.1f): %s, %.2f CPU s\n",
                    n, at[i].pp, at[i].tp, at[i].dp, at[i].floor / GIB, at[i].need / GIB,
                    found ? "fits" : "nothing", (double)(clock() - t0) / CLOCKS_PER_SEC);
    }
    free(at);
    if (!found && any) {
        clock_t t0 = clock();
        found = quiet_search(c, g, q, cache, a);
        if (dbg)
            fprintf(stderr, "min gpus %d: search: %s, %.2f CPU s\n", n, found ? "fits" : "nothing",
                    (double)(clock() - t0) / CLOCKS_PER_SEC);
    } else if (!any && dbg)
        fprintf(stderr, "min gpus %d: every layout's own floor above the usable %.1f GiB: nothing searched\n", n,
                usable / GIB);
    return found;
}

/* pass_search calls one minimum-count query makes at most: the first
 * MIN_LINEAR usable counts in order, then counts growing by a quarter at
 * least, so that a model that fits nowhere is said to in seconds. */
#define MIN_LINEAR 32
#define MIN_TRIES 64

int pass_search_min_gpus(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                         PassIlpCache *cache, int from, int limit, PassSearchAlt *first,
                         int *skipped)
{
    double usable = pass_usable_bytes(c);
    PassMemFloor mf;
    pass_mem_floor_init(&mf, c, g);
    PassSearchOpts q = *o;
    q.pins.dp = 0;
    q.keep = 1;
    q.first_fit = true;
    q.floor = &mf;
    memset(&q.filter, 0, sizeof q.filter);
    int64_t gb = o->global_batch > 0 ? o->global_batch : g->global_batch;
    int nlay;
    Lay *lay = usable_layouts(g, &q, c->cl, gb, &mf, usable, from > 0 ? from : 1, limit, &nlay);
    int tries = 0, last = 0, found = 0;
    *skipped = 0; /* every usable count below the answer was tried */
    for (int i = 0; i < nlay && tries < MIN_TRIES && !found; i++) {
        int n = lay[i].count;
        if (i > 0 && n == lay[i - 1].count)
            continue;
        if (tries >= MIN_LINEAR && n < last + (last + 3) / 4) {
            if (!*skipped)
                *skipped = n; /* from here on, counts are skipped */
            continue;
        }
        tries++;
        last = n;
        q.gpus = n;
        /* Priced as a cluster of n GPUs: its NVLink domain depends on n
         * (pass_cluster_domain). */
        PassCluster cn = *c->cl;
        cn.ngpus = n;
        PassCostCtx cc = *c;
        cc.cl = &cn;
        if (fit_on(&cc, g, &q, cache, lay, nlay, n, &mf, usable, first))
            /* It may leave GPUs idle: it fits on the count it uses. */
            found = first->layout.gpus > 0 && first->layout.gpus < n ? first->layout.gpus : n;
    }
    free(lay);
    pass_mem_floor_free(&mf);
    if (found && *skipped >= found)
        *skipped = 0; /* every count below the answer was tried */
    return found;
}

/* The largest item of a rank's memory. */
static const char *largest(const PassRankMem *m, double *v, char *buf, size_t n)
{
    struct {
        const char *name;
        double v;
    } it[] = {{"weights", m->weights}, {"gradients", m->grads}, {"optimizer state", m->optim},
              {"activations", m->acts}, {"recomputation working set", m->recompute_ws},
              {"backward temporaries", m->transient}, {"communication buffers", m->buffers},
              {"CUDA and NCCL runtime", m->runtime}, {"allocator fragmentation", m->frag}};
    int b = 0;
    for (int i = 1; i < (int)(sizeof it / sizeof it[0]); i++)
        if (it[i].v > it[b].v)
            b = i;
    *v = it[b].v;
    if (it[b].v == m->acts)
        snprintf(buf, n, "activations (%g micro-batch%s in flight)", m->inflight, m->inflight == 1 ? "" : "es");
    else
        snprintf(buf, n, "%s", it[b].name);
    return buf;
}

static void breakdown(const PassRankMem *m, char *buf, size_t n)
{
    snprintf(buf, n, "weights %.1f, gradients %.1f, optimizer state %.1f, activations %.1f "
             "(%g in flight), recomputation %.1f, temporaries %.1f, buffers %.1f, runtime %.1f GiB",
             m->weights / GIB, m->grads / GIB, m->optim / GIB, m->acts / GIB, m->inflight,
             m->recompute_ws / GIB, m->transient / GIB, m->buffers / GIB, m->runtime / GIB);
}

static bool any_pin(const PassSearchPins *p)
{
    return p->tp || p->pp || p->dp || p->micro_batch || p->recompute >= 0 || p->sp >= 0 ||
           p->zero >= 0 || p->schedule >= 0 || p->v;
}

void pass_search_explain_overflow(const PassCostCtx *c, const IrGraph *g, const PassSearchAlt *a,
                                  bool pinned, int gpus)
{
    const PassGpu *gpu = &c->cl->gpu;
    double usable = pass_usable_bytes(c);
    const PassRankMem *m = &a->pred.mem[a->pred.peak_rank];
    double big;
    char item[128], lay[256], buf[512];
    largest(m, &big, item, sizeof item);
    plan_layout_str(&a->layout, lay, sizeof lay);
    if (pinned)
        ir_error(IR_NOLOC, "the layout does not fit in memory: pipeline rank %d needs %.1f GiB "
                 "per GPU, %.1f GiB more than the %.1f GiB usable of %.1f GiB; its largest item "
                 "is %s, %.1f GiB", a->pred.peak_rank, m->total / GIB, (m->total - usable) / GIB,
                 usable / GIB, gpu->hbm_bytes / GIB, item, big / GIB);
    else
        ir_error(IR_NOLOC, "%s does not fit on %d x %s: the leanest layout (%s) needs %.1f GiB "
                 "per GPU on pipeline rank %d, %.1f GiB more than the %.1f GiB usable; its "
                 "largest item is %s, %.1f GiB", g->name, gpus, gpu->name, lay, m->total / GIB,
                 a->pred.peak_rank, (m->total - usable) / GIB, usable / GIB, item, big / GIB);
    breakdown(m, buf, sizeof buf);
    ir_note(IR_NOLOC, "%s on pipeline rank %d: %s", pinned ? lay : "that layout", a->pred.peak_rank, buf);
}

/* No layout satisfies the pins: the condition that failed, each its own
 * sentence. With pp, tp and dp all pinned (or implied), the one layout's
 * conditions in order; otherwise the rules every layout keeps. */
static void no_layout_pinned(const IrGraph *g, const PassSearchOpts *o, int N, int gpn, int64_t gb)
{
    const PassSearchPins *pin = &o->pins;
    int tp = pin->tp, pp = pin->pp, dp = pin->dp, cp = pin->cp ? pin->cp : 1;
    if (tp && pp && !dp && N % (tp * pp * cp) == 0)
        dp = N / (tp * pp * cp);
    if (!(tp && pp && dp)) {
        ir_error(IR_NOLOC, "no layout of %d GPUs satisfies the pins. Every layout's pipeline stages are "
                 "whole nodes of %d GPUs or a divisor of one. Its dp x micro-batch divides the global "
                 "batch of %lld sequences into at most %d micro-batches. With the interleaved schedule "
                 "its micro-batches are a multiple of pp and each of its pp x v model chunks has a layer "
                 "(%s has %d)", N, gpn, (long long)gb, PLAN_MAX_MICRO, g->name, g->npieces - 2);
        return;
    }
    int n = N / pp;
    if (n % gpn && gpn % n) {
        ir_error(IR_NOLOC, "no layout of %d GPUs satisfies the pins: with --pp %d each pipeline stage gets "
                 "%d GPUs, neither whole nodes of %d GPUs nor a divisor of one", N, pp, n, gpn);
        return;
    }
    if (gb % dp) {
        ir_error(IR_NOLOC, "no layout of %d GPUs satisfies the pins: dp %d does not divide the global batch "
                 "of %lld sequences", N, dp, (long long)gb);
        return;
    }
    bool inter = pin->schedule == PLAN_SCHED_INTERLEAVED || pin->v > 1;
    int64_t per = gb / dp;
    bool any_b = false, any_round = false;
    for (int64_t b = 1; b <= per && b <= PASS_SEARCH_MAX_MB; b++) {
        if (per % b || (pin->micro_batch && b != pin->micro_batch) || per / b > PLAN_MAX_MICRO)
            continue;
        any_b = true;
        any_round |= (per / b) % pp == 0 && per / b >= pp;
    }
    if (!any_b)
        ir_error(IR_NOLOC, "no layout of %d GPUs satisfies the pins: no micro-batch size cuts the %lld "
                 "sequences per data-parallel replica into at most %d micro-batches", N, (long long)per,
                 PLAN_MAX_MICRO);
    else if (inter && !any_round)
        ir_error(IR_NOLOC, "no layout of %d GPUs satisfies the pins: the interleaved schedule needs the "
                 "micro-batches per step to be a multiple of --pp %d, and no micro-batch size cuts the "
                 "%lld sequences per data-parallel replica so", N, pp, (long long)per);
    else {
        char cps[32] = "";
        if (cp > 1)
            snprintf(cps, sizeof cps, " x cp %d", cp);
        ir_error(IR_NOLOC, "no layout of %d GPUs satisfies the pins: tp %d x pp %d x dp %d%s%s%s is not one "
                 "the search can build (the stack's schedules, recomputation and ZeRO stages, the pipeline "
                 "split --pp-layers gives)", N, tp, pp, dp, cps, inter ? ", interleaved" : "",
                 pin->v > 1 ? " with the pinned --virtual-stages" : "");
    }
}

void pass_search_explain_nofit(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                               PassIlpCache *cache, const PassSearchResult *r)
{
    const PassGpu *gpu = &c->cl->gpu;
    int N = r->gpus;
    const PassSearchPins *pin = &o->pins;
    char lay[256], flags[256];
    int gpn = pass_cluster_domain_at(c->cl, N);
    if (r->no_layout) {
        if (r->micro_cut)
            ir_error(IR_NOLOC, "no layout of %d GPUs can take the global batch of %lld sequences: "
                     "each way of cutting it gives more than %d micro-batches per step or more "
                     "than %d sequences per micro-batch and data-parallel replica", N,
                     (long long)r->global_batch, PLAN_MAX_MICRO, PASS_SEARCH_MAX_MB);
        else if (any_pin(pin))
            no_layout_pinned(g, o, N, gpn, r->global_batch);
        else
            ir_error(IR_NOLOC, "no layout can use %d GPUs: a plan uses at least half of them, as "
                     "pp x dp x tp with pp at most the model's %d pieces, tp at most a node's %d "
                     "GPUs and pipeline stages of whole nodes or a divisor of one, and dp must "
                     "divide the global batch of %lld sequences", N, g->npieces, gpn,
                     (long long)r->global_batch);
        return;
    }
    if (r->have_closest) {
        pass_search_explain_overflow(c, g, &r->closest, any_pin(pin), N);
    } else {
        ir_error(IR_NOLOC, "%s does not fit on %d x %s: its model states alone need more than the "
                 "%.1f GiB usable per GPU", g->name, N, gpu->name, pass_usable_bytes(c) / GIB);
    }

    /* What would fit: one pin relaxed at a time, then none, then more GPUs. */
    if (any_pin(pin)) {
        static const char *const what[] = {"--recompute", "--micro-batch", "--zero", "--sp",
                                           "--schedule", "--tp, --pp and --dp"};
        for (int i = 0; i < 6; i++) {
            PassSearchOpts q = *o;
            q.keep = 1;
            q.first_fit = false;
            memset(&q.filter, 0, sizeof q.filter);
            bool had = true;
            switch (i) {
            case 0: had = pin->recompute >= 0; q.pins.recompute = -1; break;
            case 1: had = pin->micro_batch > 0; q.pins.micro_batch = 0; break;
            case 2: had = pin->zero >= 0; q.pins.zero = -1; break;
            case 3: had = pin->sp >= 0; q.pins.sp = -1; break;
            case 4: had = pin->schedule >= 0 || pin->v; q.pins.schedule = -1; q.pins.v = 0; break;
            case 5: had = pin->tp || pin->pp || pin->dp; q.pins.tp = q.pins.pp = q.pins.dp = 0; break;
            }
            if (!had)
                continue;
            PassSearchAlt a;
            if (quiet_search(c, g, &q, cache, &a)) {
                ir_note(IR_NOLOC, "with %s searched instead of pinned, it fits: %s (step %.2f s, peak %.1f GiB): %s", what[i],
                        plan_layout_str(&a.layout, lay, sizeof lay), a.pred.step_time_s,
                        a.pred.peak_mem_bytes / GIB, plan_layout_flags(&a.layout, flags, sizeof flags));
                pass_search_alt_free(&a);
                return;
            }
        }
        PassSearchOpts q = *o;
        pass_search_pins_none(&q.pins);
        q.keep = 1;
        memset(&q.filter, 0, sizeof q.filter);
        PassSearchAlt a;
        if (quiet_search(c, g, &q, cache, &a)) {
            ir_note(IR_NOLOC, "without any pins it fits: %s (step %.2f s, peak %.1f GiB): %s",
                    plan_layout_str(&a.layout, lay, sizeof lay), a.pred.step_time_s,
                    a.pred.peak_mem_bytes / GIB, plan_layout_flags(&a.layout, flags, sizeof flags));
            pass_search_alt_free(&a);
            return;
        }
    }
    PassSearchOpts q = *o;
    pass_search_pins_none(&q.pins);
    PassSearchAlt a;
    int limit = N * 64 > 65536 ? N * 64 : 65536;
    int skipped;
    int n = pass_search_min_gpus(c, g, &q, cache, N + 1, limit, &a, &skipped);
    /* The plan is the first one found there, not the best: the best is a
     * search of that count, as costly as planning it (--gpus n). */
    if (n > 0 && !skipped) {
        ir_note(IR_NOLOC, "the smallest number of %s GPUs on which %s fits is %d, for example with %s "
                "(step %.2f s, peak %.1f GiB): the first plan found there, not the best (--gpus %d "
                "searches for it)", gpu->name, g->name, n, plan_layout_str(&a.layout, lay, sizeof lay),
                a.pred.step_time_s, a.pred.peak_mem_bytes / GIB, n);
        pass_search_alt_free(&a);
    } else if (n > 0) {
        ir_note(IR_NOLOC, "%s fits on %d %s GPUs, for example with %s (step %.2f s, peak %.1f GiB: "
                "the first plan found there, not the best); above %d GPUs not every count was tried, "
                "so fewer may do", g->name, n, gpu->name, plan_layout_str(&a.layout, lay, sizeof lay),
                a.pred.step_time_s, a.pred.peak_mem_bytes / GIB, skipped);
        pass_search_alt_free(&a);
    } else if (!skipped) {
        ir_note(IR_NOLOC, "%s fits on no number of %s GPUs up to %d", g->name, gpu->name, limit);
    } else {
        ir_note(IR_NOLOC, "%s fits on none of the numbers of %s GPUs tried up to %d (every number "
                "a layout can use up to %d, then numbers a quarter apart)", g->name, gpu->name,
                limit, skipped);
    }
}

bool rep_search_idle_note(const PassSearchResult *r, int gpn, char *buf, size_t n)
{
    if (!r->found || r->alt[0].layout.gpus >= r->gpus)
        return false;
    int used = r->alt[0].layout.gpus, idle = r->gpus - used;
    if (!r->full_valid)
        snprintf(buf, n, "the plan uses %d of the %d GPUs; %d stay idle: no layout uses all %d "
                 "(pipeline stages must be whole nodes of %d GPUs or a divisor of one, and dp must "
                 "divide the global batch of %lld sequences)", used, r->gpus, idle, r->gpus, gpn,
                 (long long)r->global_batch);
    else if (r->full_ranked)
        snprintf(buf, n, "the plan uses %d of the %d GPUs; %d stay idle: layouts using all %d are "
                 "predicted slower (the best one ranked takes %.3f s per step against %.3f s)", used,
                 r->gpus, idle, r->gpus, r->best_full_step_s, r->alt[0].pred.step_time_s);
    else
        snprintf(buf, n, "the plan uses %d of the %d GPUs; %d stay idle: every layout using all %d "
                 "is predicted slower or does not fit", used, r->gpus, idle, r->gpus);
    return true;
}
