/* plan.h: exports of passes/plan/: the chosen plan written out (plan.txt,
 * plan.json, plan.svg) and --explain. They read a search result; only
 * --explain searches again (restricted searches for its runners-up). */
#ifndef PTDC_PASS_PLAN_H
#define PTDC_PASS_PLAN_H

#include "search/search.h"

bool pass_search_idle_note(const PassSearchResult *r, int gpus_per_node, char *buf, size_t n);

/* Outputs (plan_txt.c, plan_json.c, plan_svg.c, plan_explain.c). The text is
 * plan.txt (and --emit plan); the JSON plan.json; the SVG plan.svg. */
void pass_plan_print_text(FILE *f, const IrGraph *g, const PassCostCtx *c,
                          const PassSearchResult *r);
void pass_plan_print_json(FILE *f, const IrGraph *g, const PassCostCtx *c,
                          const PassSearchResult *r);
void pass_plan_print_svg(FILE *f, const IrGraph *g, const PassCostCtx *c,
                         const PassSearchResult *r);
/* --explain: the ten best alternatives and, for the runner-up of each kind
 * (more TP, more PP, recomputation on, bigger micro-batch), which time
 * terms make it slower; runs the restricted searches it needs. */
void pass_plan_explain(FILE *f, const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                       PassIlpCache *cache, const PassSearchResult *r);

#endif
