/* plan_prec.c: what the plan's precision buys, said the same way in
 * plan.txt, plan.json and plan.svg: the plan re-priced in bf16 on the same
 * layout, and, when --precision auto kept bf16, the best other format's
 * step and the reason (docs/precision.md). */
#include "report.h"

#include <stdio.h>
#include <string.h>

void rep_prec(const PassCostCtx *c, const IrGraph *g, const PassSearchResult *r, RepPrec *out)
{
    memset(out, 0, sizeof *out);
    const PassSearchAlt *a = &r->alt[0];
    out->prec = a->plan.precision;
    out->step_s = a->pred.step_time_s;
    out->searched = r->prec_tried != 0;
    for (int p = 0; p < g->npieces; p++)
        out->nlayers += g->pieces[p].rep >= 0;
    int L = out->nlayers;
    out->bf16_first = c->st.lp_bf16_first < L ? c->st.lp_bf16_first : L;
    out->bf16_last = c->st.lp_bf16_last < L - out->bf16_first ? c->st.lp_bf16_last : L - out->bf16_first;
    const char *name = plan_precision_name(out->prec);
    if (out->prec != PLAN_PREC_BF16) {
        Plan b = a->plan;
        b.precision = PLAN_PREC_BF16;
        PassPrediction pb;
        pass_predict(c, g, &b, &pb);
        out->bf16_step_s = pb.step_time_s;
        out->bf16_fits = pb.fits;
        out->gemm_x = a->pred.gemm_s > 0 ? pb.gemm_s / a->pred.gemm_s : 1;
        out->cast_s = a->pred.cast_s;
        char kept[96] = "";
        if (out->bf16_first || out->bf16_last)
            snprintf(kept, sizeof kept, "; the first %d and last %d layers' linears", out->bf16_first,
                     out->bf16_last);
        snprintf(out->note, sizeof out->note,
                 "%s: GEMMs %.2fx faster, casts +%.1f%% of the bf16 step, step %.2fx (bf16 %.4g s -> %.4g s)%s; "
                 "the embedding, attention's core and the head stay bf16%s",
                 name, out->gemm_x, 100 * out->cast_s / out->bf16_step_s, out->bf16_step_s / out->step_s,
                 out->bf16_step_s, out->step_s, out->bf16_fits ? "" : " (bf16 does not fit on this layout)",
                 kept);
        pass_prediction_free(&pb);
        return;
    }
    if (!out->searched) {
        snprintf(out->note, sizeof out->note, "bf16 (the default; --precision auto tries the formats the %s runs)",
                 c->cl->gpu.name);
        return;
    }
    /* auto kept bf16: the fastest other format tried, and why it lost. */
    int best = -1;
    for (int p = 1; p < PLAN_NPREC; p++)
        if (r->prec_tried >> p & 1 && r->prec_step[p] > 0 && (best < 0 || r->prec_step[p] < r->prec_step[best]))
            best = p;
    bool others = (r->prec_tried & ~1u) != 0;
    if (!others) {
        snprintf(out->note, sizeof out->note, "bf16: the %s has no low-precision tensor cores (no FP8 or FP4 rate)",
                 c->cl->gpu.name);
    } else if (best < 0) {
        snprintf(out->note, sizeof out->note, "bf16: no plan in a lower precision fits (their weight copies "
                 "need more memory)");
    } else {
        double gshare = a->pred.step_time_s > 0 ? a->pred.gemm_s / a->pred.step_time_s : 0;
        snprintf(out->note, sizeof out->note,
                 "bf16: %s's best plan takes %.4g s against %.4g s; the GEMMs are %.0f%% of the bf16 step, %s",
                 plan_precision_name((PlanPrecision)best), r->prec_step[best], out->step_s, 100 * gshare,
                 gshare < 0.5 ? "the rest is communication and memory-bound kernels a faster format does "
                                "not speed up, while its casts add to them"
                              : "and they are small: tile quantisation and per-call overheads stay, the "
                                "casts do not pay for themselves");
    }
}
