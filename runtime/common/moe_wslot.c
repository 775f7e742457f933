/* moe_wslot.c: the row counts of ZB-H1's MoE W slots (rt.h,
 * rt_moe_act_bwd_b / rt_moe_act_bwd_w), both backends. B leaves each
 * local expert's routed row count beside its slot here and W reads them
 * back: W needs them on the host to size its GEMMs, and reading them from
 * a device slot would synchronise the stream. Keyed by the slot's address
 * (one per MoE layer and W slot block, reused by the micro-batch m +
 * nwslots only after W of m has run: codegen's cg_sched.c checks the
 * order). The table lives for the process (a handful of layers x blocks). */
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct {
    const void *slot;
    int64_t el;
    int64_t *cnt; /* [el] */
} Entry;

static Entry *tab;
static int ntab, captab;

static Entry *find(const void *slot)
{
    for (int i = 0; i < ntab; i++)
        if (tab[i].slot == slot)
            return &tab[i];
    return NULL;
}

void rtc_moe_wslot_put(const void *slot, const int64_t *cnt, int64_t el)
{
    Entry *e = find(slot);
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
}

const int64_t *rtc_moe_wslot_get(const char *fn, const void *slot, int64_t el)
{
    const Entry *e = find(slot);
    if (!e || e->el != el)
        rt_fatal("%s: W slot %p holds no rows of %lld experts (its B, rt_moe_act_bwd_b, has not run)", fn,
                 slot, (long long)el);
    return e->cnt;
}
