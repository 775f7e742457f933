/* rules.c: which nodes a stage's recomputation policy reruns in backward.
 * One predicate for the search, the cost model (which adds its attention
 * kernel choice: passes/cost/mem_saved.c) and codegen alike, so a plan is
 * priced with the recomputation its program runs. */
#include "plan.h"

#include <string.h>

bool pass_is_mlp(const IrNode *n) { return n->block && strcmp(n->block, "mlp") == 0; }

const char *pass_recompute_name(PassRecompute r)
{
    switch (r) {
    case PASS_RECOMPUTE_NONE: return "none";
    case PASS_RECOMPUTE_SELECTIVE: return "selective";
    case PASS_RECOMPUTE_FFN: return "ffn";
    case PASS_RECOMPUTE_FULL: return "full";
    }
    return "?";
}

bool pass_plan_recomputed(const IrGraph *g, const IrNode *n, PassRecompute r, bool materialized)
{
    if (g->pieces[n->piece].layer < 0)
        return false; /* embedding and head are never recomputed */
    switch (r) {
    case PASS_RECOMPUTE_FULL: return true;
    case PASS_RECOMPUTE_FFN: return pass_is_mlp(n);
    case PASS_RECOMPUTE_SELECTIVE: return n->op == IR_OP_ATTENTION && materialized;
    case PASS_RECOMPUTE_NONE: break;
    }
    return false;
}
