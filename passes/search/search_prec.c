/* search_prec.c: --precision auto. Precision changes every GEMM's price and
 * the weights' memory, so each format the GPU runs gets a search of its own
 * (the ILP's strategies differ with the GEMM times), and the fastest plan
 * that fits wins. Only formats the GPU has are tried: on an A100 this is
 * the bf16 search alone; on a Hopper two; on a Blackwell four. The formats
 * go fastest rate first, and each later search only looks for plans faster
 * than the best so far (PassSearchOpts.beat_s): where FP8 wins, the bf16
 * search prunes almost everything at once. */
#include "search/search.h"

#include "cost/cost.h"

#include <string.h>

bool pass_search_precisions(const PassCostCtx *c, PassCostCtx ctxs[PLAN_NPREC], const IrGraph *g,
                            const PassSearchOpts *o, PassIlpCache *cache, PassSearchResult *out,
                            const PassCostCtx **chosen)
{
    const PassGpu *gpu = &c->cl->gpu;
    int order[PLAN_NPREC], n = 0;
    for (int p = 0; p < PLAN_NPREC; p++)
        if (pass_prec_peak(gpu, (PlanPrecision)p) > 0) {
            int i = n++;
            for (; i > 0 && pass_prec_peak(gpu, (PlanPrecision)order[i - 1]) < pass_prec_peak(gpu, (PlanPrecision)p); i--)
                order[i] = order[i - 1];
            order[i] = p;
        }
    PassSearchResult best;
    memset(&best, 0, sizeof best);
    double step[PLAN_NPREC] = {0};
    unsigned tried = 0;
    bool have = false;
    *chosen = NULL;
    for (int i = 0; i < n; i++) {
        int p = order[i];
        ctxs[p] = *c;
        ctxs[p].prec = (PlanPrecision)p;
        PassSearchOpts op = *o;
        op.pins.precision = p;
        if (have && best.found)
            op.beat_s = best.alt[0].pred.step_time_s;
        PassSearchResult r;
        if (!pass_search(&ctxs[p], g, &op, cache, &r)) {
            if (have)
                pass_search_result_free(&best);
            return false;
        }
        tried |= 1u << p;
        if (r.found)
            step[p] = r.alt[0].pred.step_time_s;
        /* Nothing fitting in any format: the bf16 search's answer (its
         * closest plan, the no-fit explanation's context). */
        bool take = !have || (r.found && (!best.found || step[p] < best.alt[0].pred.step_time_s)) ||
                    (!best.found && !r.found && p == PLAN_PREC_BF16);
        if (take) {
            if (have)
                pass_search_result_free(&best);
            best = r, have = true, *chosen = &ctxs[p];
        } else {
            pass_search_result_free(&r);
        }
    }
    *out = best;
    memcpy(out->prec_step, step, sizeof step);
    out->prec_tried = tried;
    return true;
}
