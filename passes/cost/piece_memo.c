/* piece_memo.c: the pieces' costs a search's earlier plans found
 * (PassPieceMemo, cost.h). predict.c decides what a piece's cost reads, so
 * what the key holds; this file keeps the entries, numbers the plans'
 * contexts and drops everything when the cost context changes. */
#include "cost/cost.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Entries and contexts kept at most before they are all dropped: DeepSeek-V3
 * on 2048 GPUs ranks plans of a few hundred contexts into about ten thousand
 * entries (a few MB), so these only bound a pathological run. */
enum { PIECE_MEMO_MAX = 1 << 17, PIECE_MEMO_CTXS = 1 << 13 };

PassPieceMemo *pass_piece_memo_new(bool check)
{
    PassPieceMemo *m = ir_xcalloc(1, sizeof *m);
    m->check = check;
    m->cur = -1;
    return m;
}

static void drop_entries(PassPieceMemo *m)
{
    m->n = 0;
    m->nstrat = 0;
    if (m->slot)
        memset(m->slot, 0, sizeof(int) * (size_t)m->nslot);
}

void pass_piece_memo_free(PassPieceMemo *m)
{
    if (!m)
        return;
    pass_memo_free(m->facts);
    free(m->ctxs);
    free(m->reach);
    free(m->nodes);
    free(m->moe);
    free(m->keys);
    free(m->hash);
    free(m->strat_at);
    free(m->strat);
    free(m->vals);
    free(m->slot);
    free(m);
}

PassMemo *pass_piece_memo_facts(PassPieceMemo *m, const IrGraph *g)
{
    if (m->facts && m->facts->g != g) {
        pass_memo_free(m->facts);
        m->facts = NULL;
    }
    if (!m->facts)
        m->facts = pass_memo_new(g);
    return m->facts;
}

static bool same_ctx(const PassPieceCtx *x, const PassCostCtx *c, const Plan *plan)
{
    return !memcmp(&x->mesh, &plan->mesh, sizeof x->mesh) && x->mb_seqs == plan->mb_seqs &&
           x->attention == c->attention && x->prec == c->prec;
}

static bool same_cost_ctx(const PassPieceMemo *m, const PassCostCtx *c, const IrGraph *g)
{
    return m->valid && m->g == g && m->cl == c->cl && m->lamb == c->lamb && m->save_every == c->save_every &&
           m->memo == c->memo && !memcmp(&m->st, &c->st, sizeof m->st);
}

void pass_piece_memo_begin(PassPieceMemo *m, const PassCostCtx *c, const IrGraph *g, const Plan *plan)
{
    if (!same_cost_ctx(m, c, g)) {
        drop_entries(m);
        m->nctx = 0;
        m->cur = -1;
        if (m->g != g) { /* these are the graph's */
            free(m->reach), free(m->nodes), free(m->moe);
            m->reach = m->nodes = NULL;
            m->moe = NULL;
            m->off = false;
        }
        m->valid = true;
        m->g = g;
        m->cl = c->cl;
        m->st = c->st;
        m->lamb = c->lamb;
        m->save_every = c->save_every;
        m->memo = c->memo;
    }
    if (m->cur >= 0 && same_ctx(&m->ctxs[m->cur], c, plan)) /* most plans: the one before's */
        return;
    for (int i = 0; i < m->nctx; i++)
        if (same_ctx(&m->ctxs[i], c, plan)) {
            m->cur = i;
            return;
        }
    if (m->nctx >= PIECE_MEMO_CTXS) /* the entries carry the numbers */
        drop_entries(m), m->nctx = 0;
    if (m->nctx == m->capctx) {
        m->capctx = m->capctx ? 2 * m->capctx : 16;
        m->ctxs = ir_xrealloc(m->ctxs, sizeof *m->ctxs * (size_t)m->capctx);
    }
    m->ctxs[m->nctx] = (PassPieceCtx){plan->mesh, plan->mb_seqs, c->attention, c->prec};
    m->cur = m->nctx++;
}

static unsigned mix(unsigned h, unsigned w)
{
    return (h ^ w) * 16777619u;
}

static unsigned hash_key(const PassPieceKey *k, const PlanStrategy *s, int ns)
{
    int w[] = {k->ctx, k->piece, k->from, k->to, k->recompute, k->zero, k->split, k->a2a};
    unsigned h = 2166136261u;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        h = mix(h, (unsigned)w[i]);
    for (int i = 0; i < ns; i++) {
        for (int a = 0; a < PLAN_MAX_AXES; a++)
            h = mix(h, (unsigned)(uint16_t)s[i].dim[a]);
        h = mix(h, s[i].xchg);
    }
    return h ^ (h >> 15);
}

static bool same_strat(const PlanStrategy *a, const PlanStrategy *b, int ns)
{
    for (int i = 0; i < ns; i++) {
        for (int x = 0; x < PLAN_MAX_AXES; x++)
            if (a[i].dim[x] != b[i].dim[x])
                return false;
        if (a[i].xchg != b[i].xchg)
            return false;
    }
    return true;
}

static int find(const PassPieceMemo *m, const PassPieceKey *k, const PlanStrategy *s, int ns, unsigned h,
                unsigned *at)
{
    unsigned mask = (unsigned)m->nslot - 1, i = h & mask;
    for (;; i = (i + 1) & mask) {
        int e = m->slot[i] - 1;
        if (e < 0)
            break;
        if (m->hash[e] == h && !memcmp(&m->keys[e], k, sizeof *k) &&
            (size_t)ns == (e + 1 < m->n ? m->strat_at[e + 1] : m->nstrat) - m->strat_at[e] &&
            same_strat(&m->strat[m->strat_at[e]], s, ns))
            return e;
    }
    *at = i;
    return -1;
}

const void *pass_piece_memo_find(PassPieceMemo *m, const PassPieceKey *k, const PlanStrategy *s, int ns)
{
    unsigned at;
    if (m->n == 0)
        return NULL;
    int e = find(m, k, s, ns, hash_key(k, s, ns), &at);
    return e < 0 ? NULL : m->vals + (size_t)e * m->vsize;
}

static void reindex(PassPieceMemo *m)
{
    m->nslot = m->nslot ? 2 * m->nslot : 256;
    free(m->slot);
    m->slot = ir_xcalloc((size_t)m->nslot, sizeof(int));
    unsigned mask = (unsigned)m->nslot - 1;
    for (int e = 0; e < m->n; e++) {
        unsigned i = m->hash[e] & mask;
        while (m->slot[i])
            i = (i + 1) & mask;
        m->slot[i] = e + 1;
    }
}

void pass_piece_memo_add(PassPieceMemo *m, const PassPieceKey *k, const PlanStrategy *s, int ns, const void *val,
                         size_t vsize)
{
    if (m->vsize != vsize) { /* (one caller: one size) */
        drop_entries(m);
        free(m->vals);
        m->vals = NULL;
        m->cap = 0;
        m->vsize = vsize;
    }
    if (m->n >= PIECE_MEMO_MAX)
        drop_entries(m); /* (the contexts stay: the keys number them) */
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->keys = ir_xrealloc(m->keys, sizeof *m->keys * (size_t)m->cap);
        m->hash = ir_xrealloc(m->hash, sizeof *m->hash * (size_t)m->cap);
        m->strat_at = ir_xrealloc(m->strat_at, sizeof *m->strat_at * (size_t)m->cap);
        m->vals = ir_xrealloc(m->vals, vsize * (size_t)m->cap);
    }
    if (m->nstrat + (size_t)ns > m->capstrat) {
        m->capstrat = 2 * (m->capstrat + (size_t)ns);
        m->strat = ir_xrealloc(m->strat, sizeof *m->strat * m->capstrat);
    }
    if (2 * (m->n + 1) > m->nslot) /* at most half full */
        reindex(m);
    unsigned h = hash_key(k, s, ns), at;
    if (find(m, k, s, ns, h, &at) >= 0)
        ir_die("pass_piece_memo_add: piece %d is stored already", k->piece);
    m->keys[m->n] = *k;
    m->hash[m->n] = h;
    m->strat_at[m->n] = m->nstrat;
    memcpy(&m->strat[m->nstrat], s, sizeof *s * (size_t)ns);
    m->nstrat += (size_t)ns;
    memcpy(m->vals + (size_t)m->n * vsize, val, vsize);
    m->slot[at] = ++m->n;
}
