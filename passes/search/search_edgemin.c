/* search_edgemin.c: the least resharding prices of an edge of the per-mesh
 * floor (search_edges.c), remembered across the floors of one search.
 *
 * The floor prices every pair of a producer's and a reader's layouts of
 * every edge inside a piece (plan_reshard and pass_cost_coll, forward and
 * backward), in every floor it makes: 15.6 million prices in the 3,369
 * floors of DeepSeek-V3 on 2048 A100s, of which 99% had been asked before
 * (the same key, below) by an earlier floor: the time floor and the whole
 * floor of one group price the same edges; the first layer of a repeat and
 * the next (floor_like classes apart for their kernels) have the same edges;
 * groups differing only in dp (dp 32 and 64 at the same tp and sequences
 * per replica) split a batch-split activation into the same local blocks,
 * and a reshard over the tp axis alone never reads the dp axis. One price
 * is about as cheap as a lookup, so the edge is the unit: its least price
 * per producer layout (rowmin) and per reader layout pair (colmin).
 *
 * What the prices read (plan_reshard, plan/shard.c; pass_cost_coll,
 * cost_coll.c), so the key is exactly that:
 *   - the layouts: the producer's classes S[a] (in the order the strategies
 *     first give them), the reader's pairs (X[b] it reads, Gr[b] its
 *     gradient); the backward target is S[a] without partial sums;
 *   - the block each source layout holds (plan_local_numel of S[a], going
 *     forward, and of Gr[b], going back), from which plan_reshard derives
 *     every step's size by the sizes of the axes it touches;
 *   - the element bytes (pass_elem_bytes of the tensor's dtype) and the
 *     edge's factor (edge_factor / readers: the prices are f x the sum);
 *   - the mesh's axis count, and for each axis some pair may touch, its
 *     size, the nodes a group along it spans and its members per node (the
 *     collective's ring and links). An axis no pair touches is left out
 *     (zeros): one with the same dim or none in both layouts of a pair, the
 *     same partial bit, and no other axis of either layout splitting that
 *     dim. plan_reshard passes it over in each of its three phases (partial
 *     sums: the same bit; splits that go: the same dim and nothing nested
 *     beside it; splits that appear: it splits already or the target does
 *     not), no step on another axis gives another axis that dim (an
 *     all-to-all, reduce-scatter or slice on axis b ends at the target's
 *     dim on b, not that one; an all-gather leaves b unsplit), and
 *     pass_cost_coll reads only the step's own axis: its size enters only
 *     through the source blocks, which are in the key.
 * The cost context (GPU, cluster domain, measured collectives) is the
 * search's own, the same for every floor.
 *
 * PTDC_SEARCH_CHECK (src_check) prices every remembered edge again and dies
 * on a difference in any bit. */
#include "search/src.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct EdgeSlot {
    uint64_t hash;
    size_t key, nkey;             /* words of M->words */
    size_t val;                   /* nI + nJ doubles of M->vals */
    bool used;
} EdgeSlot;

struct SrcEdgeMemo {
    EdgeSlot *slot;
    size_t cap, n;                /* cap a power of two */
    uint64_t *words;              /* the keys, one after another */
    size_t nwords, capwords;
    double *vals;
    size_t nvals, capvals;
    uint64_t *key;                /* the key being looked up */
    size_t capkey;
    long asked, hits;
};

/* Whether plan_reshard can take a step on axis x in some pair: (S[a],
 * X[b]) forward or (Gr[b], S[a] without partial sums) back. None can when
 * every layout has the same dim d (or none) on x, the S and X the same
 * partial bit, the Gr none (the backward target has none), and no other
 * axis of any of them splits d (the key's comment): that is the
 * condition for each pair, over all the pairs at once. */
static bool touched(const PlanSharding *S, int nI, const PlanSharding *X, const PlanSharding *Gr, int nJ, int x)
{
    int d = S[0].dim[x];
    unsigned bit = S[0].partial >> x & 1;
    for (int a = 0; a < nI; a++)
        if (S[a].dim[x] != d || (S[a].partial >> x & 1) != bit)
            return true;
    for (int b = 0; b < nJ; b++)
        if (X[b].dim[x] != d || Gr[b].dim[x] != d || (X[b].partial >> x & 1) != bit || (Gr[b].partial >> x & 1))
            return true;
    for (int y = 0; y < PLAN_MAX_AXES && d >= 0; y++) {
        if (y == x)
            continue;
        for (int a = 0; a < nI; a++)
            if (S[a].dim[y] == d)
                return true;
        for (int b = 0; b < nJ; b++)
            if (X[b].dim[y] == d || Gr[b].dim[y] == d)
                return true;
    }
    return false;
}

/* pass_predict's coll_time for t from `from` to `to` (before overlaps). */
static double price(const Src *s, const PlanMesh *m, int t, const PlanSharding *from, const PlanSharding *to,
                    const int64_t *ds, int eb)
{
    PlanColl steps[8];
    int k = plan_reshard(s->g, t, m, from, to, ds, steps, 8);
    double x = 0;
    for (int i = 0; i < k; i++)
        x += pass_cost_coll(s->c, m, &steps[i], eb);
    return x;
}

/* The long way: every pair priced. */
static void mins(const Src *s, const PlanMesh *m, int t, const PlanSharding *S, int nI, const PlanSharding *X,
                 const PlanSharding *Gr, int nJ, const int64_t *ds, double f, double *rowmin, double *colmin)
{
    for (int a = 0; a < nI; a++)
        rowmin[a] = INFINITY;
    for (int b = 0; b < nJ; b++)
        colmin[b] = INFINITY;
    int eb = pass_elem_bytes(s->c, s->g->tensors[t].dtype); /* (the tensor's: one per edge) */
    for (int a = 0; a < nI; a++) {
        PlanSharding back = S[a];
        back.partial = 0;
        for (int b = 0; b < nJ; b++) {
            double x = f * (price(s, m, t, &S[a], &X[b], ds, eb) + price(s, m, t, &Gr[b], &back, ds, eb));
            rowmin[a] = src_fmin(rowmin[a], x);
            colmin[b] = src_fmin(colmin[b], x);
        }
    }
}

static uint64_t sh_word(const PlanSharding *x)
{
    /* the layout's fields, no padding (PlanSharding has none to read) */
    return (uint64_t)(uint16_t)x->dim[0] | (uint64_t)(uint16_t)x->dim[1] << 16 |
           (uint64_t)(uint16_t)x->dim[2] << 32 | (uint64_t)x->partial << 48 | (uint64_t)x->hi_outer << 56;
}

static uint64_t mix(uint64_t h, uint64_t w)
{
    h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static void *grow_array(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    while (*cap < need)
        *cap = *cap ? 2 * *cap : 4096;
    return ir_xrealloc(p, *cap * elem);
}

static void rehash(struct SrcEdgeMemo *M)
{
    EdgeSlot *old = M->slot;
    size_t ocap = M->cap;
    M->cap = ocap ? 2 * ocap : 1024;
    M->slot = ir_xcalloc(M->cap, sizeof *M->slot);
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].used)
            continue;
        size_t j = old[i].hash & (M->cap - 1);
        while (M->slot[j].used)
            j = (j + 1) & (M->cap - 1);
        M->slot[j] = old[i];
    }
    free(old);
}

void src_edge_mins(Src *s, const PlanMesh *m, int t, const PlanSharding *S, int nI, const PlanSharding *X,
                   const PlanSharding *Gr, int nJ, const int64_t *ds, double f, double *rowmin, double *colmin)
{
    struct SrcEdgeMemo *M = s->edge_memo;
    if (!M)
        M = s->edge_memo = ir_xcalloc(1, sizeof *M);
    /* The key: header, mesh, then the layouts with their source blocks. */
    size_t nkey = 2 + 3 * PLAN_MAX_AXES + 2 * (size_t)nI + 3 * (size_t)nJ;
    M->key = grow_array(M->key, &M->capkey, nkey, sizeof *M->key);
    uint64_t *k = M->key;
    unsigned mask = 0;
    for (int x = 0; x < m->naxes; x++)
        mask |= (unsigned)touched(S, nI, X, Gr, nJ, x) << x;
    uint64_t fb;
    memcpy(&fb, &f, sizeof fb);
    k[0] = (uint64_t)nI | (uint64_t)nJ << 16 | (uint64_t)m->naxes << 32 |
           (uint64_t)pass_elem_bytes(s->c, s->g->tensors[t].dtype) << 40;
    k[1] = fb;
    size_t w = 2;
    for (int x = 0; x < PLAN_MAX_AXES; x++) {
        bool on = x < m->naxes && (mask >> x & 1);
        k[w++] = on ? (uint64_t)m->size[x] : 0;
        k[w++] = on ? (uint64_t)m->nodes[x] : 0;
        k[w++] = on ? (uint64_t)m->per_node[x] : 0;
    }
    for (int a = 0; a < nI; a++) {
        k[w++] = sh_word(&S[a]);
        k[w++] = (uint64_t)plan_local_numel(s->g, t, m, &S[a], ds);
    }
    for (int b = 0; b < nJ; b++) {
        k[w++] = sh_word(&X[b]);
        k[w++] = sh_word(&Gr[b]);
        k[w++] = (uint64_t)plan_local_numel(s->g, t, m, &Gr[b], ds);
    }
    uint64_t h = 0;
    for (size_t i = 0; i < nkey; i++)
        h = mix(h, k[i]);
    M->asked++;
    if (2 * (M->n + 1) > M->cap)
        rehash(M);
    size_t j = h & (M->cap - 1);
    for (; M->slot[j].used; j = (j + 1) & (M->cap - 1)) {
        const EdgeSlot *e = &M->slot[j];
        if (e->hash != h || e->nkey != nkey || memcmp(&M->words[e->key], k, nkey * sizeof *k) != 0)
            continue;
        M->hits++;
        memcpy(rowmin, &M->vals[e->val], sizeof(double) * (size_t)nI);
        memcpy(colmin, &M->vals[e->val + (size_t)nI], sizeof(double) * (size_t)nJ);
        if (src_check(s)) {
            double *x = ir_xmalloc(sizeof(double) * (size_t)(nI + nJ));
            mins(s, m, t, S, nI, X, Gr, nJ, ds, f, x, x + nI);
            if (memcmp(x, rowmin, sizeof(double) * (size_t)nI) != 0 ||
                memcmp(x + nI, colmin, sizeof(double) * (size_t)nJ) != 0)
                ir_die("search: remembered least reshard prices of '%s' differ from the prices made again on a "
                       "mesh of %d x %d x %d", s->g->tensors[t].name, m->size[0], m->naxes > 1 ? m->size[1] : 1,
                       m->naxes > 2 ? m->size[2] : 1);
            free(x);
        }
        return;
    }
    mins(s, m, t, S, nI, X, Gr, nJ, ds, f, rowmin, colmin);
    M->words = grow_array(M->words, &M->capwords, M->nwords + nkey, sizeof *M->words);
    M->vals = grow_array(M->vals, &M->capvals, M->nvals + (size_t)(nI + nJ), sizeof *M->vals);
    EdgeSlot *e = &M->slot[j];
    e->used = true, e->hash = h, e->key = M->nwords, e->nkey = nkey, e->val = M->nvals;
    memcpy(&M->words[M->nwords], k, nkey * sizeof *k);
    memcpy(&M->vals[M->nvals], rowmin, sizeof(double) * (size_t)nI);
    memcpy(&M->vals[M->nvals + (size_t)nI], colmin, sizeof(double) * (size_t)nJ);
    M->nwords += nkey, M->nvals += (size_t)(nI + nJ);
    M->n++;
}

void src_edge_memo_counts(const Src *s, long *asked, long *hits)
{
    const struct SrcEdgeMemo *M = s->edge_memo;
    *asked = M ? M->asked : 0, *hits = M ? M->hits : 0;
}

void src_edge_memo_free(Src *s)
{
    struct SrcEdgeMemo *M = s->edge_memo;
    if (M) {
        free(M->slot);
        free(M->words);
        free(M->vals);
        free(M->key);
    }
    free(M);
    s->edge_memo = NULL;
}
