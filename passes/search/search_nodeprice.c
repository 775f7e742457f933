/* search_nodeprice.c: a node's kernel prices under one strategy for the
 * per-mesh floor (search_prune.c, node_price), remembered across one search.
 *
 * A time floor takes most prices from its twin or a kin (search_prune.c,
 * price_piece): the last groups of its class, read in step. Of the 423,000
 * prices left to make planning DeepSeek-V3 on 2048 GB300s, 131,000 had been
 * made before by an older group of the class, or one of another class on a
 * mesh that agrees on the axes the strategy reads.
 *
 * What a price reads (pass_cost_node; search_prune.c, used_axes, has the
 * argument): the node, the strategy, the dim sizes (the group's sequences
 * per micro-batch: the floor's sizes are ir_dim_sizes at them), and of the
 * mesh only the axes the strategy splits a loop dim over or exchanges
 * experts over: each one's size, the nodes a group along it spans and its
 * members per node. The key is exactly that, with the mesh's axis count:
 * the sequences and the mesh's axes that strategy reads enter as their
 * place among the contexts seen (a few thousand), so a slot is two words.
 *
 * PTDC_SEARCH_CHECK (src_check) prices every remembered answer again and
 * dies on a difference in any bit (search_prune.c). */
#include "search/src.h"

#include <stdlib.h>
#include <string.h>

enum { CTXW = 2 + 3 * PLAN_MAX_AXES, NMASK = 1 << PLAN_MAX_AXES };

struct SrcPriceMemo {
    uint64_t (*slot)[2];          /* k[0]: the node and the context's place + 1 (0: empty), k[1]: the
                                     strategy */
    uint32_t *val;                /* [cap] the answer's place in vals */
    size_t cap, n;                /* cap a power of two */
    double *vals;                 /* [n * SRC_NPRICE] */
    size_t capvals;
    uint64_t *ctx;                /* [nctx * CTXW] the contexts seen */
    int *ctab;                    /* [capc] their places + 1, by hash (0: empty) */
    int nctx, capctx, capc;
    const SrcGroup *last;         /* the group ids[] are of, its mesh and sequences */
    PlanMesh last_mesh;
    int64_t last_mb;
    int ids[NMASK];               /* its contexts by mask of axes read (-1: not yet) */
    long asked, hits;
};

static uint64_t mix(uint64_t h, uint64_t w)
{
    h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_words(const uint64_t *k, int n)
{
    uint64_t h = 0;
    for (int i = 0; i < n; i++)
        h = mix(h, k[i]);
    return h ^ (h >> 31);
}

static void ctx_rehash(struct SrcPriceMemo *M)
{
    free(M->ctab);
    M->capc = M->capc ? 2 * M->capc : 256;
    M->ctab = ir_xcalloc((size_t)M->capc, sizeof *M->ctab);
    for (int i = 0; i < M->nctx; i++) {
        size_t j = hash_words(&M->ctx[(size_t)i * CTXW], CTXW) & (size_t)(M->capc - 1);
        while (M->ctab[j])
            j = (j + 1) & (size_t)(M->capc - 1);
        M->ctab[j] = i + 1;
    }
}

/* The place of G's sequences and mesh on the axes in `mask` (added when
 * new). */
static int ctx_id(struct SrcPriceMemo *M, const SrcGroup *G, unsigned mask)
{
    if (M->last != G || M->last_mb != G->mb_seqs || memcmp(&M->last_mesh, &G->mesh, sizeof G->mesh) != 0) {
        M->last = G, M->last_mb = G->mb_seqs, M->last_mesh = G->mesh;
        for (int i = 0; i < NMASK; i++)
            M->ids[i] = -1;
    }
    if (M->ids[mask] >= 0)
        return M->ids[mask];
    const PlanMesh *m = &G->mesh;
    uint64_t w[CTXW];
    w[0] = (uint64_t)(uint32_t)m->naxes;
    w[1] = (uint64_t)G->mb_seqs;
    for (int a = 0; a < PLAN_MAX_AXES; a++) {
        bool on = a < m->naxes && (mask >> a & 1);
        w[2 + 3 * a] = on ? (uint64_t)(uint32_t)m->size[a] : 0;
        w[3 + 3 * a] = on ? (uint64_t)(uint32_t)m->nodes[a] : 0;
        w[4 + 3 * a] = on ? (uint64_t)(uint32_t)m->per_node[a] : 0;
    }
    if (2 * (M->nctx + 1) > M->capc)
        ctx_rehash(M);
    size_t j = hash_words(w, CTXW) & (size_t)(M->capc - 1);
    for (; M->ctab[j]; j = (j + 1) & (size_t)(M->capc - 1))
        if (memcmp(&M->ctx[(size_t)(M->ctab[j] - 1) * CTXW], w, sizeof w) == 0)
            return M->ids[mask] = M->ctab[j] - 1;
    if (M->nctx == M->capctx) {
        M->capctx = M->capctx ? 2 * M->capctx : 256;
        M->ctx = ir_xrealloc(M->ctx, sizeof(uint64_t) * CTXW * (size_t)M->capctx);
    }
    memcpy(&M->ctx[(size_t)M->nctx * CTXW], w, sizeof w);
    M->ctab[j] = M->nctx + 1;
    return M->ids[mask] = M->nctx++;
}

static void rehash(struct SrcPriceMemo *M)
{
    uint64_t(*old)[2] = M->slot;
    uint32_t *oval = M->val;
    size_t ocap = M->cap;
    M->cap = ocap ? 2 * ocap : 4096;
    M->slot = ir_xcalloc(M->cap, sizeof *M->slot);
    M->val = ir_xmalloc(M->cap * sizeof *M->val);
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i][0])
            continue;
        size_t j = hash_words(old[i], 2) & (M->cap - 1);
        while (M->slot[j][0])
            j = (j + 1) & (M->cap - 1);
        M->slot[j][0] = old[i][0], M->slot[j][1] = old[i][1];
        M->val[j] = oval[i];
    }
    free(old);
    free(oval);
}

double *src_price_slot(Src *s, const SrcGroup *G, const IrNode *nd, const PlanStrategy *st, unsigned axes,
                       bool *found)
{
    struct SrcPriceMemo *M = s->price_memo;
    if (!M)
        M = s->price_memo = ir_xcalloc(1, sizeof *M);
    uint64_t k[2];
    k[0] = (uint64_t)(uint32_t)nd->id | (uint64_t)(uint32_t)(ctx_id(M, G, axes & (NMASK - 1)) + 1) << 32;
    k[1] = (uint64_t)(uint16_t)st->dim[0] | (uint64_t)(uint16_t)st->dim[1] << 16 |
           (uint64_t)(uint16_t)st->dim[2] << 32 | (uint64_t)st->xchg << 48;
    M->asked++;
    if (2 * (M->n + 1) > M->cap)
        rehash(M);
    size_t j = hash_words(k, 2) & (M->cap - 1);
    while (M->slot[j][0] && (M->slot[j][0] != k[0] || M->slot[j][1] != k[1]))
        j = (j + 1) & (M->cap - 1);
    if (M->slot[j][0]) {
        M->hits++;
        *found = true;
        return &M->vals[(size_t)M->val[j] * SRC_NPRICE];
    }
    if (M->n == M->capvals) {
        M->capvals = M->capvals ? 2 * M->capvals : 4096;
        M->vals = ir_xrealloc(M->vals, sizeof(double) * SRC_NPRICE * M->capvals);
    }
    M->slot[j][0] = k[0], M->slot[j][1] = k[1];
    M->val[j] = (uint32_t)M->n;
    *found = false;
    return &M->vals[M->n++ * SRC_NPRICE];
}

void src_price_memo_counts(const Src *s, long *asked, long *hits)
{
    const struct SrcPriceMemo *M = s->price_memo;
    *asked = M ? M->asked : 0, *hits = M ? M->hits : 0;
}

void src_price_memo_free(Src *s)
{
    struct SrcPriceMemo *M = s->price_memo;
    if (M) {
        free(M->slot);
        free(M->val);
        free(M->vals);
        free(M->ctx);
        free(M->ctab);
    }
    free(M);
    s->price_memo = NULL;
}
