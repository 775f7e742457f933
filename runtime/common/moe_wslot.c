/* moe_wslot.c: the row counts of ZB-H1's MoE W slots (rt.h,
 * rt_moe_act_bwd_b / rt_moe_act_bwd_w), both backends. B leaves each
 * local expert's routed row count beside its slot here and W reads them
 * back: W needs them on the host to size its GEMMs, and reading them from
 * a device slot would synchronise the stream. Keyed by the slot's address
 * (one per MoE layer and W slot block, reused by the micro-batch m +
 * nwslots only after W of m has run: codegen's cg_sched.c checks the
 * order). The table lives for the process (a handful of layers x blocks).
 *
 * A B whose routed rows overflow its slot runs the experts' weight
 * gradients itself, after the W still pending on the layer's other slots
 * (rtc_moe_wslot_oldest, by the layer's key: its dW_down accumulator), so
 * the gradients accumulate in micro-batch order whichever op runs them;
 * each slot's W then finds its work done. */
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { PENDING, RAN_IN_B, RAN_IN_W };

typedef struct {
    const void *slot, *key;
    int64_t el, rows_max;
    uint64_t seq;  /* order of the B that filled it */
    int state;
    int64_t *cnt;  /* [el] */
} Entry;

static Entry *tab;
static int ntab, captab;
static uint64_t nput;

static Entry *find(const void *slot)
{
    for (int i = 0; i < ntab; i++)
        if (tab[i].slot == slot)
            return &tab[i];
    return NULL;
}

void rtc_moe_wslot_put(const void *slot, const void *key, const int64_t *cnt, int64_t el, int64_t rows_max,
                       bool pending)
{
    Entry *e = find(slot);
    if (e && e->state == PENDING)
        rt_fatal("rt_moe_act_bwd_b: W slot %p is filled again before its W (rt_moe_act_bwd_w) ran", slot);
    if (!e) {
        if (ntab == captab) {
            int cap = captab ? 2 * captab : 16;
            Entry *t = rtc_xcalloc((size_t)cap, sizeof *t);
            if (ntab)
                memcpy(t, tab, (size_t)ntab * sizeof *t);
            free(tab);
            tab = t;
            captab = cap;
        }
        e = &tab[ntab++];
        e->slot = slot;
        e->el = 0;
        e->cnt = NULL;
    }
    if (e->el != el) {
        free(e->cnt);
        e->cnt = rtc_xmalloc((size_t)el * sizeof *e->cnt);
        e->el = el;
    }
    memcpy(e->cnt, cnt, (size_t)el * sizeof *cnt);
    e->key = key;
    e->rows_max = rows_max;
    e->seq = nput++;
    e->state = pending ? PENDING : RAN_IN_B;
}

const int64_t *rtc_moe_wslot_take(const char *fn, const void *slot, int64_t el, int64_t rows_max, bool in_w)
{
    Entry *e = find(slot);
    if (!e || e->el != el || e->rows_max != rows_max || e->state == RAN_IN_W)
        rt_fatal("%s: W slot %p holds no rows of %lld experts in %lld (its B, rt_moe_act_bwd_b, has not run "
                 "since its last W)", fn, slot, (long long)el, (long long)rows_max);
    int was = e->state;
    if (!in_w && was != PENDING)
        rt_fatal("%s: W slot %p has no W pending", fn, slot);
    e->state = in_w ? RAN_IN_W : RAN_IN_B;
    return was == PENDING ? e->cnt : NULL;
}

const void *rtc_moe_wslot_oldest(const void *key, int64_t *rows_max)
{
    const Entry *best = NULL;
    for (int i = 0; i < ntab; i++)
        if (tab[i].key == key && tab[i].state == PENDING && (!best || tab[i].seq < best->seq))
            best = &tab[i];
    if (best)
        *rows_max = best->rows_max;
    return best ? best->slot : NULL;
}
