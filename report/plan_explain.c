/* plan_explain.c: --explain. The ten best plans the search ranked (it prunes
 * against the tenth best when asked to keep ten, so they are the ten best by
 * pass_predict among the candidates it enumerates), then for each kind of
 * change people ask about (more TP, more PP, recomputation on, a bigger
 * micro-batch) the best plan of that kind, found by searching again with a
 * filter, and the time terms of pass_predict's step that make it slower. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define GIB 1073741824.0

enum { T_COMPUTE, T_RECOMPUTE, T_RESHARD, T_P2P, T_BUBBLE, T_DP, T_OPT, NT };
static const char *const term_name[NT] = {
    "compute", "recomputation", "resharding (tensor/sequence-parallel collectives)",
    "pipeline transfers", "pipeline bubble", "exposed data-parallel traffic", "optimizer step"};

/* pass_predict's step split into terms that add up to it. */
static void terms(const PassPrediction *p, double *t)
{
    t[T_RECOMPUTE] = p->recompute_s;
    t[T_RESHARD] = p->reshard_s;
    t[T_P2P] = p->p2p_s;
    t[T_BUBBLE] = p->bubble_s;
    t[T_COMPUTE] = p->pipeline_s - p->bubble_s - p->recompute_s - p->reshard_s - p->p2p_s;
    t[T_DP] = p->dp_exposed_s;
    t[T_OPT] = p->step_time_s - p->pipeline_s - p->dp_exposed_s;
}

static void compare(FILE *f, const char *kind, const PassSearchAlt *best, const PassSearchAlt *alt)
{
    char lay[256];
    double a[NT], b[NT], d[NT];
    terms(&best->pred, a);
    terms(&alt->pred, b);
    double ds = alt->pred.step_time_s - best->pred.step_time_s;
    fprintf(f, "  %s: %s\n", kind, plan_layout_str(&alt->layout, lay, sizeof lay));
    fprintf(f, "    step %.3f s (%+.3f s, %+.1f%%), MFU %.1f%%, peak %.1f GiB\n", alt->pred.step_time_s,
            ds, best->pred.step_time_s > 0 ? 100 * ds / best->pred.step_time_s : 0, 100 * alt->pred.mfu,
            alt->pred.peak_mem_bytes / GIB);
    int order[NT];
    for (int i = 0; i < NT; i++)
        d[i] = b[i] - a[i], order[i] = i;
    for (int i = 0; i < NT; i++)
        for (int j = i + 1; j < NT; j++)
            if (d[order[j]] > d[order[i]]) {
                int x = order[i];
                order[i] = order[j];
                order[j] = x;
            }
    fprintf(f, "    ");
    int shown = 0;
    for (int i = 0; i < NT; i++) {
        int k = order[i];
        if (fabs(d[k]) < 5e-4 * fmax(best->pred.step_time_s, 1e-9))
            continue;
        fprintf(f, "%s%s %+.3f s", shown++ ? ", " : "", term_name[k], d[k]);
    }
    if (!shown)
        fprintf(f, "no term changes noticeably");
    fprintf(f, "\n");
    if (ds > 0 && d[order[0]] > 0)
        fprintf(f, "    slower mostly because of the %s (%.3f -> %.3f s)\n", term_name[order[0]],
                a[order[0]], b[order[0]]);
    else if (ds <= 0)
        fprintf(f, "    not slower, but ranked after the chosen plan (equal time, more memory)\n");
}

void rep_plan_explain(FILE *f, const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                      PassIlpCache *cache, const PassSearchResult *r)
{
    char lay[256];
    const PassSearchAlt *best = &r->alt[0];
    fprintf(f, "alternatives, best first (predicted by the cost model)\n");
    fprintf(f, "  %2s  %-96s %9s %6s %9s\n", "#", "layout", "step s", "MFU", "peak GiB");
    for (int i = 0; i < r->nalt && i < 10; i++) {
        const PassSearchAlt *a = &r->alt[i];
        fprintf(f, "  %2d  %-96s %9.3f %5.1f%% %9.2f\n", i + 1, plan_layout_str(&a->layout, lay, sizeof lay),
                a->pred.step_time_s, 100 * a->pred.mfu, a->pred.peak_mem_bytes / GIB);
    }
    fprintf(f, "\nthe best plan of each other kind, and what makes it slower\n");
    const PlanLayout *L = &best->layout;
    for (int kind = 0; kind < 4; kind++) {
        static const char *const names[] = {"more TP", "more PP", "recomputation on", "bigger micro-batch"};
        PassSearchOpts q = *o;
        q.keep = 1;
        q.first_fit = false;
        memset(&q.filter, 0, sizeof q.filter);
        const char *pinned = NULL;
        switch (kind) {
        case 0:
            q.filter.tp_above = L->tp;
            pinned = o->pins.tp ? "--tp" : o->pins.dp && o->pins.pp ? "--dp and --pp" : NULL;
            break;
        case 1:
            q.filter.pp_above = L->pp;
            pinned = o->pins.pp ? "--pp" : NULL;
            break;
        case 2:
            if (L->recompute & ~1u) {
                fprintf(f, "  %s: the chosen plan already recomputes (%s)\n", names[kind],
                        plan_layout_recompute_name(L));
                continue;
            }
            q.filter.recompute_on = true;
            pinned = o->pins.recompute >= 0 ? "--recompute" : NULL;
            break;
        case 3:
            q.filter.mb_above = (int)L->micro_batch;
            pinned = o->pins.micro_batch ? "--micro-batch" : NULL;
            break;
        }
        if (pinned) {
            fprintf(f, "  %s: not searched (%s pinned)\n", names[kind], pinned);
            continue;
        }
        PassSearchResult rr;
        if (!pass_search(c, g, &q, cache, &rr))
            continue;
        if (rr.found)
            compare(f, names[kind], best, &rr.alt[0]);
        else
            fprintf(f, "  %s: no such plan fits in memory\n", names[kind]);
        pass_search_result_free(&rr);
    }
}
