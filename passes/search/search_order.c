/* search_order.c: the order the branch and bound visits groups in (search.c,
 * step 2), with each group's per-mesh floor (src_group_floor) computed only
 * when the search reaches it.
 *
 * The groups are visited in increasing order of their bound (G->lb, the
 * least over their candidates), and the visit stops at the first whose
 * bound cannot beat the keep-th best plan. The bound with the floor needs
 * every strategy of every node of the mesh priced (pass_cost_node,
 * pass_saved_list, the model states under four ZeRO stages): 19% of
 * planning Qwen3-235B-A22B on 2048 GB200s, for 1,266 groups of which the
 * search solved 240 (docs/planner.md, issue 31). Without the floor the
 * candidates' bounds are the strategy-free ones (search_prune.c), which
 * are never above them: every per-piece term is max(strategy-free, floor),
 * and the memory bound only grows with them, so a candidate the floor
 * leaves alive the strategy-free bound does too, at a bound no higher.
 *
 * The strategy-free bounds are alike for most layouts using every GPU (the
 * work over the GPUs), so a second, cheaper level comes between: the time
 * floor alone (src_group_floor, SRC_FLOOR_TIME: each node's least kernels
 * and resharding share, no ZeRO traffic per micro-batch, no memory), which
 * alone puts 683 of the 698 groups the floor rules out there above the
 * threshold. Where one floor class holds most pieces with a small part of
 * the nodes (Src.floor_lead: DeepSeek-V3's MoE layers after the first, 57 of
 * 63 pieces, 30 of 116 nodes) a third comes before it: that class's rows of
 * the time floor alone (SRC_FLOOR_LEAD), after which 2,505 of the 3,316
 * groups it is made for on 2048 GB300s never need the time floor (the visit
 * ends below their bound, or they are dead), at a quarter of the time
 * floor's prices. So the groups wait in a heap keyed by the bound they have:
 * strategy-free until they reach the top, then (refine) with the next level,
 * pushed back, and so on to the whole floor. A group taken off the top with
 * its exact bound is no later than any other in the exact order: each
 * other's exact bound is at least its key, which is at least this one's (on
 * equal bounds the comparator's fixed order of layouts decides either way).
 * So the groups come out in the order sorting by the exact bounds gives, and
 * a group at the top whose key cannot beat the threshold ends the visit
 * where the exact order would: every bound left is at least that key. The
 * groups never reached keep the bounds they had (their candidates count as
 * pruned by time).
 *
 * Before it makes a group's next floor the order asks SrcOrder.dead
 * (search.c, group_dead) whether no plan of the group that fits can beat
 * the threshold with the floor it has; such a group is dropped, neither
 * refined nor handed out (the test's bound holds for every plan of the
 * group that fits, so none of them could have won later either).
 *
 * src_order_check (PTDC_SEARCH_CHECK) computes the floor of those too and
 * compares the order and the stop with the exact one, the dropped groups
 * left out of both. */
#include "search/src.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool before(const SrcOrder *q, const SrcGroup *a, const SrcGroup *b)
{
    return q->cmp(a, b) < 0;
}

static void sift_down(SrcOrder *q, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < q->n && before(q, q->heap[l], q->heap[m]))
            m = l;
        if (r < q->n && before(q, q->heap[r], q->heap[m]))
            m = r;
        if (m == i)
            return;
        SrcGroup *t = q->heap[i];
        q->heap[i] = q->heap[m], q->heap[m] = t;
        i = m;
    }
}

void src_order_push(SrcOrder *q, SrcGroup *G)
{
    int i = q->n++;
    q->heap[i] = G;
    while (i > 0 && before(q, q->heap[i], q->heap[(i - 1) / 2])) {
        SrcGroup *t = q->heap[i];
        q->heap[i] = q->heap[(i - 1) / 2], q->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static SrcGroup *pop(SrcOrder *q)
{
    SrcGroup *G = q->heap[0];
    q->heap[0] = q->heap[--q->n];
    sift_down(q, 0);
    return G;
}

void src_order_init(SrcOrder *q, Src *s, int (*cmp)(const void *, const void *),
                    void (*refine)(Src *, SrcGroup *))
{
    memset(q, 0, sizeof *q);
    q->s = s, q->cmp = cmp, q->refine = refine;
    q->heap = ir_xmalloc(sizeof *q->heap * (size_t)(s->ngroups + 1));
    q->seen = ir_xmalloc(sizeof *q->seen * (size_t)(s->ngroups + 1));
    q->dropped = ir_xmalloc(sizeof *q->dropped * (size_t)(s->ngroups + 1));
    for (int i = 0; i < s->ngroups; i++) {
        src_order_push(q, &s->groups[i]);
        q->ndue += s->groups[i].floor_due > 0;
    }
    q->thr = NAN;
}

SrcGroup *src_order_next(SrcOrder *q, double thr)
{
    while (q->n > 0) {
        SrcGroup *G = pop(q);
        if (G->floor_due && G->lb < thr) {
            if (q->dead && q->dead(q->ctx, G, thr)) {
                q->dropped[q->ndropped++] = G;
                continue;
            }
            double key = G->lb;
            q->nmade[G->floor_due - 1]++;
            q->refine(q->s, G);
            if (!(G->lb >= key) && src_check(q->s))
                ir_die("search: group dp %d tp %d b %d sp %d ordered by bound %.9g, which its floor lowers to %.9g",
                       G->dp, G->tp, G->b, G->sp, key, G->lb);
            src_order_push(q, G);
            continue;
        }
        q->seen[q->nseen++] = G;
        q->thr = thr;
        q->last_free = G->floor_due;
        return G;
    }
    return NULL;
}

void src_order_free(SrcOrder *q)
{
    free(q->heap);
    free(q->seen);
    free(q->dropped);
    memset(q, 0, sizeof *q);
}

/* The long way: every group's exact bound (the floors of those never
 * reached refined now; the search's counts kept as they were), sorted,
 * against what the visit took. Visiting that sorted list would have taken
 * the same groups in the same order, and stopped at the same one: the
 * first with a finite bound no better than the threshold then (or the
 * end). seen[] is what src_order_next handed out; the last may have been
 * handed out on its strategy-free bound, to stop the visit. */
void src_order_check(SrcOrder *q, bool stopped)
{
    Src *s = q->s;
    PassSearchStats saved = *s->st;
    int n = s->ngroups;
    double *key = ir_xmalloc(sizeof(double) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        key[i] = s->groups[i].lb;
    for (int i = 0; i < n; i++)
        while (s->groups[i].floor_due) {
            q->refine(s, &s->groups[i]);
            if (!(s->groups[i].lb >= key[i]))
                ir_die("search: group dp %d tp %d b %d sp %d was left at bound %.9g, which its floor lowers to "
                       "%.9g", s->groups[i].dp, s->groups[i].tp, s->groups[i].b, s->groups[i].sp, key[i],
                       s->groups[i].lb);
        }
    *s->st = saved;
    SrcGroup **exact = ir_xmalloc(sizeof *exact * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        /* insertion into a sorted list by the same comparator (a total order) */
        int j = i;
        while (j > 0 && before(q, &s->groups[i], exact[j - 1])) {
            exact[j] = exact[j - 1];
            j--;
        }
        exact[j] = &s->groups[i];
    }
    /* The groups dropped before their floor were not visited: the exact
     * order without them is the visit's. */
    int ne = 0;
    for (int i = 0; i < n; i++) {
        bool drop = false;
        for (int j = 0; j < q->ndropped && !drop; j++)
            drop = q->dropped[j] == exact[i];
        if (!drop)
            exact[ne++] = exact[i];
    }
    /* The visit's stop: the last group handed out, exact or not, and the
     * exact order's group there must be no better than the threshold. */
    int same = q->nseen - (stopped && q->last_free);
    for (int i = 0; i < same; i++)
        if (q->seen[i] != exact[i])
            ir_die("search: group %d of the visit is dp %d tp %d b %d sp %d, by the exact bounds dp %d tp %d b %d "
                   "sp %d", i, q->seen[i]->dp, q->seen[i]->tp, q->seen[i]->b, q->seen[i]->sp, exact[i]->dp,
                   exact[i]->tp, exact[i]->b, exact[i]->sp);
    if (stopped && !(exact[q->nseen - 1]->lb >= q->thr))
        ir_die("search: the visit stopped at group %d, where the exact order has dp %d tp %d b %d sp %d, whose "
               "bound %.9g beats the threshold %.9g", q->nseen - 1, exact[q->nseen - 1]->dp,
               exact[q->nseen - 1]->tp, exact[q->nseen - 1]->b, exact[q->nseen - 1]->sp,
               exact[q->nseen - 1]->lb, q->thr);
    if (!stopped && q->nseen != ne)
        ir_die("search: the visit ended after %d of %d groups without stopping", q->nseen, ne);
    free(exact);
    free(key);
}
