/* ilp_stage.c: pass_ilp_stage, the entry point: look the query up in the
 * cache, else lower the stage, merge, build, solve and extract. Stages whose
 * pieces are of the same kinds, in the same order, between neighbours of the
 * same kinds (layers 3..10 and 11..18 of one repeat) lower to the same
 * problem, so their answers are shared: node k of one is node k of the other.
 * A query that differs from a recent one only in its budget is solved on
 * that one's lowered stage, and on the reduction and GLPK model its last
 * solve left (IlpWarm). */
#include "ilp/ilp.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const IrGraph *g;
    const PassCostCtx *ctx;
    const PassIlpCosts *costs;
    PassIlpQuery q;
    int *kinds, nkinds;       /* kind of the piece before, of each piece, of the piece after */
    PassIlpResult *r;
    uint64_t h;               /* key_hash: everything the lookup compares but first_piece */
    int next;                 /* the entry before it in its bucket, -1: none */
} Entry;

/* The last answer solved on a lowered stage (its problem's nodes), kept
 * for the stage's next budget however long ago it was lowered: a frontier
 * walk's first budget comes after every group's first variant, long after
 * its stage left the ring of lowered stages below, and GLPK without a
 * start takes longer (ilp_repair.c). */
typedef struct {
    uint64_t h;               /* the ring's key hash (lowered); 0: an empty slot */
    const IrGraph *g;
    const PassCostCtx *ctx;
    const PassIlpCosts *costs;
    PassIlpQuery q;           /* the query it answered */
    int n, *choice;
} Last;

/* The last stages lowered, kept for a query that differs only in its
 * budget: the search's frontier walk asks the same layer again and again
 * with less memory (search_ilp.c), and lowering, merging and building do
 * not read the budget (ilp_build copies it into the problem last). */
enum { NLOWERED = 8 };

/* Entries are chained per bucket of their hash, newest first: a search asks
 * thousands of queries (DeepSeek-V3 on 2048 GPUs: about 9000), and a scan of
 * every entry per query grew quadratic. */
struct PassIlpCache {
    int n, cap;
    Entry *e;
    int *head;                /* [nbuckets]: newest entry of each bucket, -1: none */
    int nbuckets;             /* a power of two, at least 2 n */
    int hits, solves, relowered;
    IlpSeg *low[NLOWERED];    /* a ring, oldest replaced; each with its key below */
    uint64_t low_h[NLOWERED];
    const PassCostCtx *low_ctx[NLOWERED];
    const PassIlpCosts *low_costs[NLOWERED];
    IlpWarm *low_warm[NLOWERED];  /* its solves' reduction, GLPK model and root basis */
    int low_next;
    Last *last;                   /* per lowered stage, its last answer; open addressing */
    int nlast, caplast;           /* caplast a power of two, at least 2 nlast */
    int reuse;                    /* pass_ilp_cache_reuse, less PASS_ILP_FRONTIER */
    int warm;                     /* solves on a kept model */
    int canon;                    /* solves whose answer ilp_canon moved from GLPK's */
    int frontier;                 /* solves answered from a kept frontier */
    int unique;                   /* solves answered as the unique fastest choice */
    bool check;                   /* pass_ilp_cache_check */
};

PassIlpCache *pass_ilp_cache_new(void) { return ir_xcalloc(1, sizeof(PassIlpCache)); }

void pass_ilp_cache_free(PassIlpCache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].kinds);
        pass_ilp_result_free(c->e[i].r);
        free(c->e[i].r);
    }
    free(c->e);
    free(c->head);
    for (int i = 0; i < NLOWERED; i++) {
        ilp_seg_free(c->low[i]);
        ilp_warm_free(c->low_warm[i]);
    }
    for (int i = 0; i < c->caplast; i++)
        free(c->last[i].choice);
    free(c->last);
    free(c);
}

int pass_ilp_cache_hits(const PassIlpCache *c) { return c->hits; }
int pass_ilp_cache_solves(const PassIlpCache *c) { return c->solves; }
int pass_ilp_cache_relowered(const PassIlpCache *c) { return c->relowered; }
int pass_ilp_cache_warm(const PassIlpCache *c) { return c->warm; }
int pass_ilp_cache_canon(const PassIlpCache *c) { return c->canon; }
int pass_ilp_cache_frontier(const PassIlpCache *c) { return c->frontier; }
int pass_ilp_cache_unique(const PassIlpCache *c) { return c->unique; }
void pass_ilp_cache_check(PassIlpCache *c, bool on) { c->check = on; }
/* Stored less PASS_ILP_FRONTIER, so that a new (zeroed) cache answers from frontiers. */
void pass_ilp_cache_reuse(PassIlpCache *c, int reuse)
{
    if (reuse < PASS_ILP_COLD || reuse > PASS_ILP_FRONTIER)
        ir_die("pass_ilp_cache_reuse: %d is not a PASS_ILP_* mode", reuse);
    c->reuse = reuse - PASS_ILP_FRONTIER;
}

static int reuse_mode(const PassIlpCache *c) { return c->reuse + PASS_ILP_FRONTIER; }

/* A piece's kind: its repeat, or the piece itself outside repeats. */
static int kind(const IrGraph *g, int p)
{
    if (p < 0 || p >= g->npieces)
        return INT_MIN;
    return g->pieces[p].rep >= 0 ? g->pieces[p].rep : -(p + 2);
}

/* Equal in everything but the pieces. */
static bool same_query(const PassIlpQuery *a, const PassIlpQuery *b)
{
    const PlanMesh *m = &a->mesh, *n = &b->mesh;
    if (m->naxes != n->naxes)
        return false;
    for (int i = 0; i < PLAN_MAX_AXES; i++)
        if (m->size[i] != n->size[i] || m->nodes[i] != n->nodes[i] ||
            m->per_node[i] != n->per_node[i] || a->allow[i] != b->allow[i])
            return false;
    if (a->require != b->require || a->ep_axes != b->ep_axes || a->etp_axes != b->etp_axes ||
        a->cp_axes != b->cp_axes || a->fix_boundary != b->fix_boundary ||
        (a->fix_boundary && !plan_sharding_eq(&a->boundary, &b->boundary)))
        return false;
    return a->npieces == b->npieces && a->mb_seqs == b->mb_seqs && a->num_micro == b->num_micro &&
           a->zero == b->zero && a->recompute == b->recompute && a->inflight == b->inflight &&
           a->budget == b->budget && a->no_merge == b->no_merge &&
           a->time_limit_s == b->time_limit_s;
}

/* FNV-1a over the fields same_query compares (doubles by value: 0 and -0
 * compare equal), the query's piece kinds and the pointers the lookup
 * matches; not first_piece, since a stage of the same kinds elsewhere shares
 * the answer. */
static uint64_t mix(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        h = (h ^ (v & 0xff)) * 1099511628211ull;
    return h;
}

static uint64_t mix_d(uint64_t h, double d)
{
    uint64_t v = 0;
    if (d != 0)
        memcpy(&v, &d, sizeof v);
    return mix(h, v);
}

static uint64_t key_hash(const IrGraph *g, const PassCostCtx *ctx, const PassIlpCosts *costs,
                         const PassIlpQuery *q, const int *kinds, int nk)
{
    uint64_t h = 14695981039346656037ull;
    h = mix(h, (uint64_t)(uintptr_t)g);
    h = mix(h, (uint64_t)(uintptr_t)ctx);
    h = mix(h, (uint64_t)(uintptr_t)costs);
    h = mix(h, (uint64_t)q->mesh.naxes);
    for (int i = 0; i < PLAN_MAX_AXES; i++) {
        h = mix(h, (uint64_t)q->mesh.size[i]);
        h = mix(h, (uint64_t)q->mesh.nodes[i]);
        h = mix(h, (uint64_t)q->mesh.per_node[i]);
        h = mix(h, q->allow[i]);
    }
    h = mix(h, q->require);
    h = mix(h, q->ep_axes);
    h = mix(h, q->etp_axes);
    h = mix(h, q->cp_axes);
    h = mix(h, q->fix_boundary);
    if (q->fix_boundary) {
        for (int i = 0; i < PLAN_MAX_AXES; i++)
            h = mix(h, (uint64_t)(uint16_t)q->boundary.dim[i]);
        h = mix(h, q->boundary.partial);
    }
    h = mix(h, (uint64_t)q->npieces);
    h = mix(h, (uint64_t)q->mb_seqs);
    h = mix(h, (uint64_t)q->num_micro);
    h = mix(h, (uint64_t)q->zero);
    h = mix(h, (uint64_t)q->recompute);
    h = mix_d(h, q->inflight);
    h = mix_d(h, q->budget);
    h = mix(h, q->no_merge);
    h = mix_d(h, q->time_limit_s);
    for (int i = 0; i < nk; i++)
        h = mix(h, (uint64_t)(uint32_t)kinds[i]);
    return h;
}

/* Chain entry i into its bucket, doubling the buckets as the cache grows. */
static void index_entry(PassIlpCache *c, int i)
{
    if (2 * c->n > c->nbuckets) {
        c->nbuckets = c->nbuckets ? 2 * c->nbuckets : 64;
        while (2 * c->n > c->nbuckets)
            c->nbuckets *= 2;
        c->head = ir_xrealloc(c->head, (size_t)c->nbuckets * sizeof *c->head);
        for (int b = 0; b < c->nbuckets; b++)
            c->head[b] = -1;
        for (int j = 0; j < c->n; j++) { /* oldest first, so each chain is newest first */
            int b = (int)(c->e[j].h & (uint64_t)(c->nbuckets - 1));
            c->e[j].next = c->head[b];
            c->head[b] = j;
        }
        return;
    }
    int b = (int)(c->e[i].h & (uint64_t)(c->nbuckets - 1));
    c->e[i].next = c->head[b];
    c->head[b] = i;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static PassIlpResult *copy_result(const PassIlpResult *r, int first_node)
{
    PassIlpResult *c = ir_xmalloc(sizeof *c);
    *c = *r;
    c->first_node = first_node;
    c->strategy = ir_xmalloc((size_t)(r->nnodes ? r->nnodes : 1) * sizeof *c->strategy);
    memcpy(c->strategy, r->strategy, (size_t)r->nnodes * sizeof *c->strategy);
    c->coll = ir_xmalloc((size_t)(r->ncoll ? r->ncoll : 1) * sizeof *c->coll);
    memcpy(c->coll, r->coll, (size_t)r->ncoll * sizeof *c->coll);
    return c;
}

/* The same query in all but its budget: the same lowered stage. */
static bool same_but_budget(const PassIlpQuery *a, const PassIlpQuery *b)
{
    PassIlpQuery x = *b;
    x.budget = a->budget;
    return a->first_piece == b->first_piece && same_query(a, &x);
}

/* The lowered, merged and built stage for q: from the ring when only the
 * budget differs (then set to q's), else lowered now and put in the ring;
 * *slot: its place in the ring. */
static IlpSeg *lowered(PassIlpCache *c, const PassCostCtx *ctx, const PassIlpCosts *costs,
                       const IrGraph *g, const PassIlpQuery *q, int *slot)
{
    PassIlpQuery k = *q;
    k.budget = 0;
    int nk = q->npieces + 2, *kinds = ir_xmalloc((size_t)nk * sizeof *kinds);
    for (int i = 0; i < nk; i++)
        kinds[i] = kind(g, q->first_piece - 1 + i);
    uint64_t h = mix(key_hash(g, ctx, costs, &k, kinds, nk), (uint64_t)q->first_piece);
    free(kinds);
    for (int i = 0; i < NLOWERED; i++) {
        IlpSeg *s = c->low[i];
        if (s && c->low_h[i] == h && s->g == g && c->low_ctx[i] == ctx && c->low_costs[i] == costs &&
            same_but_budget(&s->q, q)) {
            s->q.budget = q->budget;
            s->prob->budget = q->budget > 0 ? q->budget : INFINITY; /* as ilp_build sets it */
            c->relowered++;
            *slot = i;
            return s;
        }
    }
    IlpSeg *s = ilp_lower(ctx, costs, g, q);
    if (!q->no_merge)
        ilp_merge(s);
    ilp_build(s);
    int i = c->low_next;
    c->low_next = (c->low_next + 1) % NLOWERED;
    ilp_seg_free(c->low[i]);
    ilp_warm_free(c->low_warm[i]);
    c->low_warm[i] = reuse_mode(c) == PASS_ILP_COLD ? NULL : ilp_warm_new();
    c->low[i] = s, c->low_h[i] = h, c->low_ctx[i] = ctx, c->low_costs[i] = costs;
    *slot = i;
    return s;
}

double pass_ilp_stage_least(PassIlpCache *c, const PassCostCtx *ctx, const PassIlpCosts *costs, const IrGraph *g,
                            const PassIlpQuery *q, int what, double mlo, double mhi)
{
    if (reuse_mode(c) != PASS_ILP_FRONTIER)
        return NAN;
    int slot, n = c->relowered; /* that counts solves (pass_ilp_cache_relowered), not this */
    IlpSeg *s = lowered(c, ctx, costs, g, q, &slot);
    c->relowered = n;
    return ilp_warm_least(c->low_warm[slot], s->prob, c->check, what, mlo, mhi);
}

/* The slot of stage s's last answer (key h) in c->last: its own, or the
 * empty one it would take. */
static Last *last_slot(PassIlpCache *c, const IlpSeg *s, uint64_t h)
{
    h = h ? h : 1; /* 0 marks an empty slot */
    for (int i = (int)(h & (uint64_t)(c->caplast - 1));; i = (i + 1) & (c->caplast - 1)) {
        Last *l = &c->last[i];
        if (!l->h || (l->h == h && l->g == s->g && l->ctx == s->ctx && l->costs == s->costs &&
                      same_but_budget(&l->q, &s->q)))
            return l;
    }
}

/* Stage s's last answer, or NULL. */
static const int *last_answer(PassIlpCache *c, const IlpSeg *s, uint64_t h)
{
    if (!c->caplast)
        return NULL;
    const Last *l = last_slot(c, s, h);
    return l->h && l->n == s->prob->nnodes ? l->choice : NULL;
}

static void last_keep(PassIlpCache *c, const IlpSeg *s, uint64_t h, const int *choice)
{
    if (2 * (c->nlast + 1) > c->caplast) {
        Last *old = c->last;
        int n = c->caplast;
        c->caplast = n ? 2 * n : 64;
        c->last = ir_xcalloc((size_t)c->caplast, sizeof *c->last);
        for (int i = 0; i < n; i++)
            if (old[i].h) {
                int j = (int)(old[i].h & (uint64_t)(c->caplast - 1));
                while (c->last[j].h)
                    j = (j + 1) & (c->caplast - 1);
                c->last[j] = old[i];
            }
        free(old);
    }
    Last *l = last_slot(c, s, h);
    if (!l->h) {
        c->nlast++;
        *l = (Last){h ? h : 1, s->g, s->ctx, s->costs, s->q, s->prob->nnodes, NULL};
        l->choice = ir_xmalloc((size_t)(l->n + 1) * sizeof(int));
    }
    memcpy(l->choice, choice, (size_t)l->n * sizeof(int));
}

const PassIlpResult *pass_ilp_stage(PassIlpCache *cache, const PassCostCtx *ctx,
                                    const PassIlpCosts *costs, const IrGraph *g,
                                    const PassIlpQuery *q)
{
    if (!cache || !costs || !g || !q)
        ir_die("pass_ilp_stage: cache, costs, graph and query are required");
    if (q->first_piece < 0 || q->npieces < 1 || q->first_piece + q->npieces > g->npieces)
        ir_die("pass_ilp_stage: pieces %d..%d of %d", q->first_piece,
               q->first_piece + q->npieces, g->npieces);
    int nk = q->npieces + 2;
    int *kinds = ir_xmalloc((size_t)nk * sizeof *kinds);
    for (int i = 0; i < nk; i++)
        kinds[i] = kind(g, q->first_piece - 1 + i);
    /* An equal query answers; else one of the same kinds elsewhere (the
     * newest, as a scan of every entry in order would find). */
    uint64_t h = key_hash(g, ctx, costs, q, kinds, nk);
    const Entry *like = NULL;
    for (int i = cache->nbuckets ? cache->head[h & (uint64_t)(cache->nbuckets - 1)] : -1; i >= 0;
         i = cache->e[i].next) {
        const Entry *e = &cache->e[i];
        if (e->h != h || e->g != g || e->ctx != ctx || e->costs != costs || e->nkinds != nk ||
            !same_query(&e->q, q) || memcmp(e->kinds, kinds, (size_t)nk * sizeof *kinds) != 0)
            continue;
        if (e->q.first_piece == q->first_piece) {
            free(kinds);
            cache->hits++;
            return e->r;
        }
        if (!like)
            like = e;
    }
    PassIlpResult *r;
    if (like) {
        r = copy_result(like->r, g->pieces[q->first_piece].first);
        cache->hits++;
    } else {
        double t0 = now_s();
        int slot;
        IlpSeg *s = lowered(cache, ctx, costs, g, q, &slot);
        double t1 = now_s();
        /* The frontier walk's next point: from the stage's kept frontier,
         * or GLPK started from the last point solved on this stage, made
         * to fit the tighter budget. */
        const int *prev = isfinite(s->prob->budget) ? last_answer(cache, s, cache->low_h[slot]) : NULL;
        int mode = reuse_mode(cache);
        IlpSolution sol;
        ilp_solve(s->prob,
                  &(IlpOpts){.time_limit_s = q->time_limit_s, .repair_from = prev,
                             .warm = cache->low_warm[slot], .warm_basis = mode >= PASS_ILP_WARM_BASIS,
                             .frontier = mode == PASS_ILP_FRONTIER, .check = cache->check},
                  &sol);
        cache->warm += sol.warm;
        cache->canon += sol.canon_moves > 0;
        cache->frontier += sol.frontier_points > 0;
        cache->unique += sol.unique;
        if (sol.choice)
            last_keep(cache, s, cache->low_h[slot], sol.choice);
        r = ir_xmalloc(sizeof *r);
        ilp_extract(s, &sol, r);
        r->build_s = t1 - t0;
        ilp_solution_free(&sol);
        cache->solves++;
    }
    if (cache->n == cache->cap) {
        cache->cap = cache->cap ? 2 * cache->cap : 16;
        cache->e = ir_xrealloc(cache->e, (size_t)cache->cap * sizeof *cache->e);
    }
    cache->e[cache->n] = (Entry){g, ctx, costs, *q, kinds, nk, r, h, -1};
    cache->n++;
    index_entry(cache, cache->n - 1);
    return r;
}

void pass_ilp_pins(const IrGraph *g, int dp_axis, int tp_axis, bool sp, uint64_t *allow)
{
    pass_ilp_pins_cp(g, dp_axis, -1, tp_axis, sp, allow);
}

void pass_ilp_pins_cp(const IrGraph *g, int dp_axis, int cp_axis, int tp_axis, bool sp,
                      uint64_t *allow)
{
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        allow[a] = ~0ull;
    uint64_t batch = g->batch_dim < 64 ? 1ull << g->batch_dim : 0;
    uint64_t seq = g->seq_dim >= 0 && g->seq_dim < 64 ? 1ull << g->seq_dim : 0;
    /* The data-parallel axis may also split the experts by exchange with
     * the batch (docs/moe.md: EP = dp); PLAN_REQ_BATCH keeps the batch split. */
    uint64_t experts = 0;
    for (int i = 0; i < g->nfwd; i++) {
        int e = plan_expert_dim(g, &g->nodes[i]);
        if (e >= 0 && e < 64)
            experts |= 1ull << e;
    }
    if (dp_axis >= 0 && dp_axis < PLAN_MAX_AXES)
        allow[dp_axis] = batch | experts;
    if (tp_axis >= 0 && tp_axis < PLAN_MAX_AXES)
        allow[tp_axis] = ~batch & (sp ? ~0ull : ~seq);
    /* The cp axis splits the sequence; attention may split its heads there
     * instead (the all-to-all form; PLAN_REQ_CP keeps every other node
     * carrying the sequence on the sequence). */
    uint64_t heads = 0;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        int h = n->op == IR_OP_ATTENTION ? g->tensors[n->in[0]].dim[2] : -1;
        if (h >= 0 && h < 64)
            heads |= 1ull << h;
    }
    if (cp_axis >= 0 && cp_axis < PLAN_MAX_AXES)
        allow[cp_axis] = seq | heads;
}
