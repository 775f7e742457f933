/* rules.c: which nodes a stage's recomputation policy reruns in backward.
 * One predicate for the search, the cost model (which adds its attention
 * kernel choice: passes/cost/mem_saved.c) and codegen alike, so a plan is
 * priced with the recomputation its program runs. */
#include "plan.h"

#include <string.h>

/* The MLP sublayer: `block mlp`, or `block moe` (a mixture of experts'
 * router and experts, recomputed with their exchanges). */
bool plan_is_mlp(const IrNode *n)
{
    return n->block && (strcmp(n->block, "mlp") == 0 || strcmp(n->block, "moe") == 0);
}

const char *plan_recompute_name(PlanRecompute r)
{
    switch (r) {
    case PLAN_RECOMPUTE_NONE: return "none";
    case PLAN_RECOMPUTE_SELECTIVE: return "selective";
    case PLAN_RECOMPUTE_FFN: return "ffn";
    case PLAN_RECOMPUTE_FULL: return "full";
    }
    return "?";
}

bool plan_recomputed(const IrGraph *g, const IrNode *n, PlanRecompute r, bool materialized)
{
    if (g->pieces[n->piece].layer < 0)
        return false; /* embedding and head are never recomputed */
    switch (r) {
    case PLAN_RECOMPUTE_FULL: return true;
    case PLAN_RECOMPUTE_FFN: return plan_is_mlp(n);
    case PLAN_RECOMPUTE_SELECTIVE: return n->op == IR_OP_ATTENTION && materialized;
    case PLAN_RECOMPUTE_NONE: break;
    }
    return false;
}

int plan_route_topk(const IrGraph *g, const IrNode *moe)
{
    int p = g->tensors[moe->in[1]].producer;
    if (p < 0 || g->nodes[p].op != IR_OP_ROUTE)
        ir_die("moe node %d: its gates come from no route", moe->id);
    return (int)g->nodes[p].attr.route.topk;
}
