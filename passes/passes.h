/* passes.h: every export of the passes/ layer (the planner and autodiff),
 * for report/, driver/, calibrate/, tests/ and bench/. Files inside passes/
 * include only their own folder's header. One folder per concern, each with
 * one header; each includes the one below it, so dependencies run one way,
 * all on the plan contract (plan/plan.h) and the IR:
 *   cost/     cluster, stack, cost and memory model, the schedule simulated,
 *             pass_predict
 *   ilp/      intra-operator ILP of one pipeline stage (GLPK)
 *   search/   inter-operator search: pipeline, meshes, micro-batch, recomputation, ZeRO
 *   autodiff/ the backward graph (needs only ir/; a library of its own, which
 *             codegen links) */
#ifndef PTDC_PASSES_H
#define PTDC_PASSES_H

#include "plan.h"
#include "cost/cost.h"
#include "ilp/ilp.h"
#include "search/search.h"
#include "autodiff/autodiff.h"

#endif
