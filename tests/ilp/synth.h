/* synth.h: a synthetic cost model for the ILP's tests: deterministic prices
 * that depend on local shapes, the strategy and per-test random factors, so
 * optima are rarely tied and every term (compute, memory, collectives per
 * kind and axis, parameter sync) matters. Prices depend on a node's op,
 * position in its piece and piece kind only, never its id, as the real cost
 * model's do: the layers of a repeat price alike. */
#ifndef PTDC_TEST_SYNTH_H
#define PTDC_TEST_SYNTH_H

#include "passes.h"

/* New random factors. */
void synth_seed(uint64_t seed);
extern const PassIlpCosts synth_costs;

#endif
