/* ilp_merge.c: shrink the ILP by tying each elementwise operator to the
 * operator it follows, when the tie is exact: the follower E reads output t
 * of P, nobody else reads t, t has E's dims, and the strategies correspond
 * one to one without communication: under every strategy of P (or of the
 * group P already leads) t is not a partial sum and E has the strategy that
 * splits t as P leaves it, and every strategy of E arises so. The tie then
 * drops no strategy of either operator; it drops only the pairings that
 * would reshard t between them. E's prices join P's node; its other inputs
 * and its readers become edges of the group. */
#include "ilp/ilp.h"

#include <stdlib.h>
#include <string.h>

static bool same_dims(const IrTensor *a, const IrTensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i])
            return false;
    return true;
}

/* The strategy of E that splits its loop dims as sh splits t, or -1. */
static int follower(const IlpInst *e, const PlanSharding *sh)
{
    for (int j = 0; j < e->nstrat; j++)
        if (e->strat[j].dim[0] == sh->dim[0] && e->strat[j].dim[1] == sh->dim[1])
            return j;
    return -1;
}

/* Try to tie instance e to the group of the instance its link l reads. */
static bool tie(IlpSeg *s, int e, const IlpLink *l)
{
    const IrGraph *g = s->g;
    IlpInst *E = &s->inst[e], *P = &s->inst[l->src];
    if (P->node < 0 || l->count != E->count || P->count != E->count)
        return false;
    for (int i = 0; i < s->nlinks; i++)
        if (s->link[i].src == l->src && s->link[i].out == l->out && &s->link[i] != l)
            return false; /* t has another reader */
    const IrNode *en = &g->nodes[E->node], *pn = &g->nodes[P->node];
    if (!same_dims(&g->tensors[pn->out[l->out]], &g->tensors[en->out[0]]))
        return false;
    const IlpInst *G = &s->inst[P->group];
    int k = G->nstrat;
    int *map = ir_xmalloc((size_t)k * sizeof *map);
    char *hit = ir_xcalloc((size_t)E->nstrat, 1);
    bool ok = true;
    for (int gi = 0; gi < k && ok; gi++) {
        int ps = P->group == l->src ? gi : P->gmap[gi];
        PlanSharding out[IR_MAX_OUT];
        plan_shard_io(g, pn, &P->strat[ps], NULL, out);
        map[gi] = out[l->out].partial ? -1 : follower(E, &out[l->out]);
        ok = map[gi] >= 0;
        if (ok)
            hit[map[gi]] = 1;
    }
    for (int j = 0; ok && j < E->nstrat; j++)
        ok = hit[j];
    free(hit);
    if (!ok) {
        free(map);
        return false;
    }
    E->group = P->group;
    E->gmap = map;
    return true;
}

void ilp_merge(IlpSeg *s)
{
    for (int e = 0; e < s->ninst; e++) {
        IlpInst *E = &s->inst[e];
        if (E->node < 0 || !(ir_ops[s->g->nodes[E->node].op].flags & IR_OPF_ELEMWISE))
            continue;
        for (int i = 0; i < s->nlinks; i++)
            if (s->link[i].dst == e && tie(s, e, &s->link[i]))
                break;
    }
}
