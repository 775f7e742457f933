/* frame.c: answers under a framework stack (--stack megatron, fsdp, or a
 * stack file with dynamic_memory = yes). Megatron-LM and torchtitan choose
 * neither strategies nor stage boundaries, so a fully pinned layout is
 * evaluated as the framework lays it out (rep_framework_alt), and --emit
 * megatron|torchtitan prints the framework's configuration of such a plan.
 * docs/stacks.md describes both. */
#include "driver.h"

#include "passes.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0

/* The layout the pins describe (pass_search_pinned_fully holds). */
static void layout_of_pins(const PassSearchOpts *so, const IrGraph *g, int gpus, int64_t gb, PlanLayout *L)
{
    const PassSearchPins *p = &so->pins;
    memset(L, 0, sizeof *L);
    /* The experts as pinned; unpinned, Megatron's defaults: EP 1, ETP tp. */
    for (int i = 0; i < g->nfwd; i++)
        L->moe |= plan_expert_dim(g, &g->nodes[i]) >= 0;
    L->ep = so->ep > 0 ? so->ep : 1;
    L->etp = so->etp > 0 ? so->etp : L->ep == p->tp && p->tp > 1 ? 1 : p->tp;
    L->ep_axis = L->ep == 1 ? -1 : L->ep == p->tp ? 1 : 0;
    L->etp_axis = L->etp > 1 ? 1 : -1;
    L->ep_exchange = L->ep > 1;
    L->tp = p->tp;
    L->pp = p->pp;
    L->cp = p->cp > 1 ? p->cp : 1; /* context parallelism: the cp axis between dp and tp */
    L->cp_axis = L->cp > 1 ? 1 : -1;
    L->dp = p->dp ? p->dp : gpus / (p->tp * p->pp * L->cp);
    L->v = p->v > 1 ? p->v : 1;
    L->gpus = L->dp * L->cp * L->tp * L->pp;
    L->replicated = 1;
    L->sp = p->sp == 1 && p->tp > 1;
    L->zero = p->zero;
    L->micro_batch = p->micro_batch;
    L->num_micro = (int)(gb / plan_mb_seqs(p->micro_batch, L->dp));
    L->schedule = L->v > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B;
    L->recompute = 1u << p->recompute;
}

int drv_framework_layout(const DrvOptions *o, const IrGraph *g, const PassCostCtx *c,
                         const PassSearchOpts *so, PassSearchResult *r)
{
    memset(r, 0, sizeof *r);
    if (!pass_search_check_pins(c, g, so))
        return DRV_INVALID;
    int gpus = so->gpus;
    int64_t gb = so->global_batch;
    PlanLayout L;
    layout_of_pins(so, g, gpus, gb, &L);
    PassSearchAlt a;
    char why[512], lay[256], flags[256], what[32];
    int cut[PLAN_MAX_STAGES];
    bool pinned_cut = pass_search_split_pin(c, g, so, L.pp, L.v > 0 ? L.v : 1, cut);
    if (!rep_framework_alt_cut(c, g, &L, pinned_cut ? cut : NULL, &a, why, sizeof why)) {
        ir_error(IR_NOLOC, "the %s stack evaluates a pinned layout as the framework lays it out, and %s",
                 c->st.name, why);
        return DRV_INVALID;
    }
    if (!a.pred.fits) {
        pass_search_explain_overflow(c, g, &a, true, gpus);
        PassSearchAlt b;
        if (rep_framework_relax(c, g, &L, &b, what, sizeof what)) {
            ir_note(IR_NOLOC, "with %s searched instead of pinned, it fits: %s (step %.2f s, peak %.1f GiB): %s", what,
                    plan_layout_str(&b.layout, lay, sizeof lay), b.pred.step_time_s,
                    b.pred.peak_mem_bytes / GIB, plan_layout_flags(&b.layout, flags, sizeof flags));
            pass_search_alt_free(&b);
        } else {
            ir_note(IR_NOLOC, "relaxing one of --recompute, --micro-batch, --zero or --sp does not make it "
                    "fit as the %s stack lays it out; leave out the layout flags to search", c->st.name);
        }
        if (o->json)
            drv_answer_json(g, c, &a, "does_not_fit", DRV_NOFIT, NULL, NULL);
        pass_search_alt_free(&a);
        return DRV_NOFIT;
    }
    r->found = true;
    r->nalt = 1;
    r->alt = ir_xcalloc(1, sizeof *r->alt);
    r->alt[0] = a;
    r->gpus = gpus;
    r->global_batch = gb;
    r->full_valid = r->full_ranked = L.gpus == gpus;
    r->best_full_step_s = a.pred.step_time_s;
    return DRV_OK;
}

int drv_framework_search(const DrvOptions *o, const IrGraph *g, const PassCostCtx *c,
                         const PassSearchOpts *so, PassSearchResult *r)
{
    memset(r, 0, sizeof *r);
    if (!pass_search_check_pins(c, g, so))
        return DRV_INVALID;
    const char *fw = o->emit;
    char why[512];
    rep_framework_search(c, g, so, !strcmp(fw, "megatron") ? rep_megatron_layout : rep_torchtitan_layout, r,
                         why, sizeof why);
    if (r->found)
        return DRV_OK;
    if (r->no_layout) {
        if (why[0])
            ir_error(IR_NOLOC, "--emit %s: no layout of %d GPUs that %s runs can be expressed%s; the first: %s",
                     fw, r->gpus, !strcmp(fw, "megatron") ? "Megatron-LM" : "torchtitan",
                     pass_search_pinned_fully(&so->pins) ? "" : " within the pins", why);
        else
            ir_error(IR_NOLOC, "--emit %s: no layout of %d GPUs splits the model as %s does (tp dividing the "
                     "heads and the MLP width, pp x v the %s)", fw, r->gpus,
                     !strcmp(fw, "megatron") ? "Megatron-LM" : "torchtitan", "layers");
        if (o->json)
            drv_answer_json(g, c, NULL, "cannot_express", DRV_INEXPRESSIBLE, fw, NULL);
        return DRV_INEXPRESSIBLE;
    }
    ir_error(IR_NOLOC, "none of the %ld layouts %s runs on %d GPUs fits as the %s stack lays it out "
             "(%s, the framework's tensor parallelism)", r->stats.evaluated,
             !strcmp(fw, "megatron") ? "Megatron-LM" : "torchtitan", r->gpus, c->st.name,
             !strcmp(fw, "megatron") ? "even layers per stage or uneven first and last stages"
                                     : "even layers per stage");
    if (r->have_closest)
        pass_search_explain_overflow(c, g, &r->closest, false, r->gpus);
    /* The pipeline degrees the even split rules out (Megatron-LM's search
     * tries the uneven splits its flags express: frame_search.c). */
    RepArch A;
    char sub[256], list[160] = "";
    if (strcmp(fw, "megatron") && rep_arch_read(g, &A, sub, sizeof sub)) {
        int gpn = pass_cluster_domain(c->cl), n = 0;
        for (int pp = 2; pp <= r->gpus && pp <= PLAN_MAX_PP; pp++) {
            bool some_tp = false;
            for (int tp = 1; tp <= gpn && !some_tp; tp++)
                some_tp = r->gpus % (tp * pp) == 0 && (so->pins.tp == 0 || so->pins.tp == tp);
            if (some_tp && A.layers % pp && (so->pins.pp == 0 || so->pins.pp == pp) && n < 8) {
                size_t k = strlen(list);
                snprintf(list + k, sizeof list - k, "%s%d", n ? ", " : "", pp);
                n++;
            }
        }
        if (n)
            ir_note(IR_NOLOC, "torchtitan splits the %d layers evenly over the pipeline stages, which rules "
                    "out pp %s%s here (ptdc writes no uneven torchtitan split yet)", A.layers, list,
                    n == 8 ? ", ..." : "");
    }
    if (o->json && r->have_closest)
        drv_answer_json(g, c, &r->closest, "does_not_fit", DRV_NOFIT, NULL, NULL);
    return DRV_NOFIT;
}

/* Run the emitter into a string; NULL (why filled) if it refuses. */
static char *emit_text(const char *fw, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                       char *why, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        ir_die("open_memstream failed");
    bool ok = !strcmp(fw, "megatron") ? rep_emit_megatron(m, g, c, a, why, n)
                                      : rep_emit_torchtitan(m, g, c, a, why, n);
    fclose(m);
    if (!ok) {
        free(text);
        return NULL;
    }
    return text;
}

int drv_emit_framework(const DrvOptions *o, const IrGraph *g, const PassCostCtx *c, const PassSearchResult *r)
{
    const char *fw = o->emit;
    char why[512];
    /* The format the layout was priced in (--precision, the context's). */
    PassSearchAlt pinned = r->alt[0];
    pinned.plan.precision = c->prec;
    const PassSearchAlt *chosen = &pinned;
    char *text = emit_text(fw, g, c, chosen, why, sizeof why);
    int rc = DRV_OK;
    if (!text) {
        ir_error(IR_NOLOC, "--emit %s: %s", fw, why);
        rc = DRV_INEXPRESSIBLE;
        if (o->json)
            drv_answer_json(g, c, chosen, "cannot_express", rc, fw, NULL);
    } else if (o->json) {
        drv_answer_json(g, c, chosen, "fits", DRV_OK, fw, text);
    } else {
        fputs(text, stdout);
    }
    free(text);
    return rc;
}
