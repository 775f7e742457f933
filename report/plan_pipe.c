/* plan_pipe.c: a plan's pipeline schedule laid out in time from the cost
 * model's per-micro-batch stage times: the order each pipeline rank runs
 * its forwards and backwards in (1F1B, or Megatron's interleaved 1F1B) and
 * a simulation of it. plan.svg draws it (plan_svg.c); plan_trace.c writes
 * it as the predicted trace (--trace-plan). */
#include "report.h"

#include <math.h>
#include <stdlib.h>

/* The per-rank order: plan/schedule.c's, the order the programs run and
 * the cost model simulates. */
void rep_pipe_order(PlanSchedule s, int pp, int v, int m, int r, RepPipeOp *ops)
{
    for (int k = 0; k < plan_schedule_nops(s, v, m); k++) {
        PlanSchedOp o = plan_schedule_op(s, pp, v, m, r, k);
        ops[k] = (RepPipeOp){r, o.bwd != PLAN_OP_F, o.bwd == PLAN_OP_W, o.mb, o.chunk, 0, 0, false};
    }
}

double *rep_pipe_wgrad(const PassSearchAlt *a)
{
    const Plan *p = &a->plan;
    if (!plan_schedule_split(p->schedule) || !a->pred.mem || a->pred.npp < p->pp)
        return NULL;
    double *w = ir_xcalloc((size_t)p->nstages + 1, sizeof(double));
    for (int s = 0; s < p->nstages; s++) {
        const PassRankMem *M = &a->pred.mem[s % p->pp];
        w[s] = M->bwd_s > 0 ? a->stage_bwd_s[s] * M->dw_s / M->bwd_s : 0;
    }
    return w;
}

/* Simulate: an op starts when its rank is free and its input is there (the
 * previous virtual stage's forward, the next one's backward). */
double rep_pipe_simulate(PlanSchedule s, int pp, int v, int m, const double *fwd, const double *bwd,
                         const double *w, RepPipeOp **ops)
{
    int per = plan_schedule_nops(s, v, m), vs_n = pp * v;
    /* finish times by (virtual stage, micro-batch) */
    double *ff = ir_xmalloc(sizeof(double) * (size_t)vs_n * (size_t)m);
    double *bf = ir_xmalloc(sizeof(double) * (size_t)vs_n * (size_t)m);
    for (int i = 0; i < vs_n * m; i++)
        ff[i] = bf[i] = -1;
    int *next = ir_xcalloc((size_t)pp, sizeof(int));
    double *free_at = ir_xcalloc((size_t)pp, sizeof(double));
    int left = pp * per;
    double end = 0;
    while (left > 0) {
        bool progress = false;
        for (int r = 0; r < pp; r++) {
            while (next[r] < per) {
                RepPipeOp *o = &ops[r][next[r]];
                int vs = o->chunk * pp + r;
                double ready;
                if (o->w)
                    ready = free_at[r];
                else if (!o->bwd)
                    ready = vs == 0 ? 0 : ff[(vs - 1) * m + o->mb];
                else
                    ready = vs == vs_n - 1 ? ff[vs * m + o->mb] : bf[(vs + 1) * m + o->mb];
                if (ready < 0)
                    break;
                o->start = fmax(ready, free_at[r]);
                double wt = w ? w[vs] : 0;
                o->end = o->start + (o->w ? wt : o->bwd ? bwd[vs] - wt : fwd[vs]);
                free_at[r] = o->end;
                if (!o->w)
                    (o->bwd ? bf : ff)[vs * m + o->mb] = o->end;
                end = fmax(end, o->end);
                next[r]++;
                left--;
                progress = true;
            }
        }
        if (!progress)
            ir_die("plan_pipe: the schedule deadlocks (pp %d, v %d, m %d)", pp, v, m);
    }
    free(ff);
    free(bf);
    free(next);
    free(free_at);
    return end;
}
