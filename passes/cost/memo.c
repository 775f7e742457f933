/* memo.c: the graph's facts pass_predict would otherwise find on every call
 * (PassMemo, cost.h). The files that compute each fill it; this one only
 * makes and frees it. */
#include "cost/cost.h"

#include <stdlib.h>

PassMemo *pass_memo_new(const IrGraph *g)
{
    PassMemo *m = ir_xcalloc(1, sizeof *m);
    m->g = g;
    m->flops_per_token = -1;
    return m;
}

void pass_memo_free(PassMemo *m)
{
    if (!m)
        return;
    free(m->over);
    free(m->prec);
    free(m->sx);
    free(m->sx_at);
    free(m->ext);
    free(m->ext_at);
    free(m->owner);
    free(m);
}
