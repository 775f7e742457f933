/* layout.h: a TEST-ONLY plan builder. It turns a layout (dp, tp, sp, pp, v,
 * micro-batches, ZeRO, recomputation) into a complete Plan with
 * Megatron-style strategies chosen by dim name, so codegen can be tested on
 * pinned layouts independently of the search (issues 4 and 5). */
#ifndef PTDC_TEST_LAYOUT_H
#define PTDC_TEST_LAYOUT_H

#include "plan.h"

typedef struct Layout {
    int dp, tp, pp, v, micro, zero;
    bool sp;
    PlanRecompute recompute;
} Layout;

/* Parse "dp2,tp2,sp,pp2,v2,mb4,zero1,full|ffn" (any subset, any order). */
bool layout_parse(const char *s, Layout *l);
/* The plan, allocated in g's arena; false (with a message) if the layout
 * does not fit the model. */
bool layout_plan(const IrGraph *g, const Layout *l, Plan *p);

#endif
