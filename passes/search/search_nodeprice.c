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
 * place among the contexts seen (a few thousand), so a key is two words
 * (search_keytab.c's table).
 *
 * PTDC_SEARCH_CHECK (src_check) prices every remembered answer again and
 * dies on a difference in any bit (search_prune.c). */
#include "search/src.h"

#include <stdlib.h>
#include <string.h>

enum { CTXW = 2 + 3 * PLAN_MAX_AXES, NMASK = 1 << PLAN_MAX_AXES };

struct SrcPriceMemo {
    SrcKeyTab tab;                /* k[0]: the node and the context's place + 1, k[1]: the
                                     strategy; SRC_NPRICE answers */
    uint64_t *ctx;                /* [nctx * CTXW] the contexts seen */
    int *ctab;                    /* [capc] their places + 1, by hash (0: empty) */
    int nctx, capctx, capc;
    const SrcGroup *last;         /* the group ids[] are of, its mesh and sequences */
    PlanMesh last_mesh;
    int64_t last_mb;
    int ids[NMASK];               /* its contexts by mask of axes read (-1: not yet) */
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

double *src_price_slot(Src *s, const SrcGroup *G, const IrNode *nd, const PlanStrategy *st, unsigned axes,
                       bool *found)
{
    struct SrcPriceMemo *M = s->price_memo;
    if (!M)
        M = s->price_memo = ir_xcalloc(1, sizeof *M);
    int ctx = ctx_id(M, G, axes & (NMASK - 1));
    uint64_t k[2] = {(uint64_t)(uint32_t)nd->id | (uint64_t)(uint32_t)(ctx + 1) << 32, src_strategy_word(st)};
    return src_keytab_slot(&M->tab, k, SRC_NPRICE, found);
}

void src_price_memo_counts(const Src *s, long *asked, long *hits)
{
    const struct SrcPriceMemo *M = s->price_memo;
    *asked = M ? M->tab.asked : 0, *hits = M ? M->tab.hits : 0;
}

void src_price_memo_free(Src *s)
{
    struct SrcPriceMemo *M = s->price_memo;
    if (M) {
        src_keytab_free(&M->tab);
        free(M->ctx);
        free(M->ctab);
    }
    free(M);
    s->price_memo = NULL;
}
