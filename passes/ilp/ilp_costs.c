/* ilp_costs.c: the cost model of cost.h as the ILP's price functions. Kept
 * apart so that code pricing with synthetic functions (the ILP's own tests)
 * does not link the cost model. */
#include "ilp/ilp.h"

/* Is input `slot` among what pass_saved_bytes counts for n (which keeps does
 * not depend on the strategy, only the bytes do)? */
static bool keeps_input(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                        const int64_t *dim_size, int slot, PlanRecompute r)
{
    PlanStrategy rep = {PLAN_NO_DIMS, 0};
    PassSaved it[IR_MAX_IN + IR_MAX_OUT + 2];
    int k = pass_saved_list(c, g, n, m, &rep, dim_size, r, it, IR_MAX_IN + IR_MAX_OUT + 2);
    for (int i = 0; i < k; i++)
        if (it[i].slot == slot && it[i].tensor == n->in[slot])
            return true;
    return false;
}

const PassIlpCosts pass_ilp_costs = {
    pass_cost_node, pass_cost_coll, pass_saved_bytes, keeps_input, pass_param_bytes, pass_param_sync_s,
};
