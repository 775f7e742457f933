/* passes.h: every export of the passes/ layer, for driver/, codegen/, tests/
 * and bench/. Files inside passes/ include only their own folder's header.
 * One folder per concern, each with one header; each includes the one below
 * it, so dependencies run one way:
 *   shard/    sharding algebra: meshes, strategies, shardings, resharding
 *   cost/     the plan, the schedule, cluster, cost and memory model, pass_predict
 *   ilp/      intra-operator ILP of one pipeline stage (GLPK)
 *   search/   inter-operator search: pipeline, meshes, micro-batch, recomputation, ZeRO
 *   plan/     plan.txt, plan.json, plan.svg and --explain from a search result
 *   autodiff/ the backward graph (needs only ir/) */
#ifndef PTDC_PASSES_H
#define PTDC_PASSES_H

#include "shard/shard.h"
#include "cost/cost.h"
#include "ilp/ilp.h"
#include "search/search.h"
#include "plan/plan.h"
#include "autodiff/autodiff.h"

#endif
