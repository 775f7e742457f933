/* plan_trace.c: --trace-plan FILE, the chosen plan's step as the cost model
 * predicts it, in the Chrome trace-event JSON format of the programs'
 * PTDC_TRACE (runtime/trainer/train_trace.c, docs/trace.md), so that the
 * prediction and a measured run open side by side in ui.perfetto.dev or
 * chrome://tracing with the same names and lanes:
 *   pid P          pipeline rank P (every rank of that stage runs the same
 *                  schedule, so one stands for all);
 *   tid 0 "step"   the step, with the cost model's per-step terms as args;
 *   tid 1 "compute" forward and backward of each micro-batch and chunk, laid
 *                  out by simulating the schedule with the stages' predicted
 *                  per-micro-batch times (plan_pipe.c, as plan.svg draws
 *                  it), then the optimizer;
 *   tid 2 "communication" the data-parallel gradient reduction: dp_sync_s
 *                  long, ending dp_exposed_s after the last backward (the
 *                  rest is hidden under the backward), the cost model's
 *                  slowest rank's for every rank.
 * The cost model prices tensor-parallel, context-parallel, expert and
 * pipeline transfers per step, not per call: they are inside the stage
 * times and named in the step's args, not drawn as separate spans. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* Times in whole nanoseconds, printed as microseconds with three decimals.
 * A span ends 1 ns before the instant it was predicted to end: a lane's
 * spans touch (the next starts where one ends), and viewers that add ts and
 * dur in floating point (speedscope, chrome://tracing) would otherwise see
 * the sum an ulp past the next start and nest the next span inside this
 * one (tests/browser/trace_view.mjs caught it). */
static void span(FILE *f, int pid, int tid, const char *name, const char *cat, double t0, double dur,
                 const char *args)
{
    long long a = t0 > 0 ? llround(t0 * 1e9) : 0, b = t0 + dur > 0 ? llround((t0 + dur) * 1e9) : 0;
    long long d = b - a > 1 ? b - a - 1 : b > a ? b - a : 0;
    fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%lld.%03lld,\"dur\":%lld.%03lld,\"name\":\"%s\","
               "\"cat\":\"%s\",\"args\":{%s}}", pid, tid, a / 1000, a % 1000, d / 1000, d % 1000, name, cat, args);
}

void rep_plan_print_trace(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchResult *r)
{
    const PassSearchAlt *a = &r->alt[0];
    const Plan *p = &a->plan;
    const PassPrediction *pr = &a->pred;
    int pp = p->pp, v = p->v > 1 ? p->v : 1, m = p->num_micro, nvs = pp * v;
    double *fwd = ir_xcalloc((size_t)nvs, sizeof(double)), *bwd = ir_xcalloc((size_t)nvs, sizeof(double));
    for (int s = 0; s < p->nstages && s < nvs; s++) { /* stage s: rank s % pp, chunk s / pp */
        fwd[s] = a->stage_fwd_s[s];
        bwd[s] = a->stage_bwd_s[s];
    }
    double *wg = rep_pipe_wgrad(a);
    int nops = plan_schedule_nops(p->schedule, v, m);
    RepPipeOp **ops = ir_xmalloc(sizeof(RepPipeOp *) * (size_t)pp);
    for (int k = 0; k < pp; k++) {
        ops[k] = ir_xmalloc(sizeof(RepPipeOp) * (size_t)nops);
        rep_pipe_order(p->schedule, pp, v, m, k, ops[k]);
    }
    double end = rep_pipe_simulate(p->schedule, pp, v, m, fwd, bwd, wg, ops);
    free(wg);
    double hidden = pr->dp_sync_s - pr->dp_exposed_s;
    double total = end + pr->dp_exposed_s + pr->optimizer_s;
    char lay[512];
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":");
    json_str(f, g->name);
    fprintf(f, ",\"layout\":");
    json_str(f, plan_layout_str(&a->layout, lay, sizeof lay));
    fprintf(f, ",\"pp\":%d,\"virtual_stages\":%d,\"micro_batches\":%d,\"predicted_step_s\":%.9g,"
               "\"clock\":\"predicted: seconds from the step's start\"},\"traceEvents\":[\n", pp, v, m,
            pr->step_time_s);
    fprintf(f, "{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"ts\":0,\"name\":\"trace_name\",\"args\":{\"name\":"
               "\"predicted\"}}");
    static const char *const lanes[3] = {"step", "compute", "communication"};
    char args[640], name[64];
    for (int k = 0; k < pp; k++) {
        fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"ts\":0,\"name\":\"process_name\",\"args\":"
                   "{\"name\":\"pipeline rank %d (predicted, every rank of the stage)\",\"pp\":%d}}",
                k, k, k);
        fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"ts\":0,\"name\":\"process_sort_index\","
                   "\"args\":{\"sort_index\":%d}}", k, k);
        for (int l = 0; l < 3; l++)
            fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"ts\":0,\"name\":\"thread_name\","
                       "\"args\":{\"name\":\"%s\"}}", k, l, lanes[l]);
        snprintf(args, sizeof args, "\"step_time_s\":%.9g,\"pipeline_s\":%.9g,\"bubble_s\":%.9g,"
                 "\"reshard_s\":%.9g,\"p2p_s\":%.9g,\"a2a_s\":%.9g,\"recompute_s\":%.9g,"
                 "\"dp_sync_s\":%.9g,\"dp_exposed_s\":%.9g,\"optimizer_s\":%.9g",
                 pr->step_time_s, pr->pipeline_s, pr->bubble_s, pr->reshard_s, pr->p2p_s, pr->a2a_s,
                 pr->recompute_s, pr->dp_sync_s, pr->dp_exposed_s, pr->optimizer_s);
        span(f, k, 0, "step 1", "step", 0, total, args);
        for (int i = 0; i < nops; i++) {
            const RepPipeOp *o = &ops[k][i];
            const char *what = o->w ? "weight gradients" : o->bwd ? "backward" : "forward";
            snprintf(name, sizeof name, "%s mb %d chunk %d", what, o->mb, o->chunk);
            snprintf(args, sizeof args, "\"pp\":%d,\"chunk\":%d,\"mb\":%d,\"dir\":\"%s\",\"step\":1",
                     k, o->chunk, o->mb, o->w ? "wgrad" : o->bwd ? "bwd" : "fwd");
            span(f, k, 1, name, what, o->start, o->end - o->start, args);
        }
        if (pr->dp_sync_s > 0) {
            double t0 = end - hidden > 0 ? end - hidden : 0;
            /* bytes: the rank's gradients (the memory model's, whole
             * again under ZeRO-2/3), what its reduction takes in, as the
             * measured trace counts a reduce-scatter's or all-reduce's */
            double gb = k < pr->npp ? pr->mem[k].grads * (a->layout.zero >= 2 ? a->layout.dp : 1) : 0;
            snprintf(args, sizeof args, "\"bytes\":%.0f,\"group\":\"dp\",\"dp_sync_s\":%.9g,"
                     "\"dp_exposed_s\":%.9g", gb, pr->dp_sync_s, pr->dp_exposed_s);
            span(f, k, 2, "gradient reduction (data-parallel)", "collective", t0,
                 end + pr->dp_exposed_s - t0, args);
        }
        if (pr->optimizer_s > 0)
            span(f, k, 1, c->lamb ? "optimizer (LAMB, ZeRO all-gathers)" : "optimizer (AdamW, ZeRO all-gathers)",
                 "compute", end + pr->dp_exposed_s, pr->optimizer_s, "");
    }
    fprintf(f, "\n]}\n");
    for (int k = 0; k < pp; k++)
        free(ops[k]);
    free(ops);
    free(fwd);
    free(bwd);
}
