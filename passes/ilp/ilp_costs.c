/* ilp_costs.c: the cost model of cost.h as the ILP's price functions. Kept
 * apart so that code pricing with synthetic functions (the ILP's own tests)
 * does not link the cost model. */
#include "ilp/ilp.h"

const PassIlpCosts pass_ilp_costs = {
    pass_cost_node, pass_cost_coll, pass_saved_bytes, pass_param_bytes, pass_param_sync_s,
};
