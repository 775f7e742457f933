/* plan_pipe.c: a plan's pipeline schedule laid out in time from the cost
 * model's per-micro-batch stage times: the order each pipeline rank runs
 * its forwards and backwards in (1F1B, or Megatron's interleaved 1F1B) and
 * a simulation of it. plan.svg draws it (plan_svg.c); plan_trace.c writes
 * it as the predicted trace (--trace-plan). */
#include "report.h"

#include <math.h>
#include <stdlib.h>

/* The per-rank order of the schedule: 1F1B (v = 1) or Megatron's
 * interleaved 1F1B. ops[r] gets 2 * m * v entries. */
void rep_pipe_order(int pp, int v, int m, int r, RepPipeOp *ops)
{
    int total = m * v, n = 0;
    int warm = v == 1 ? (pp - r - 1 < m ? pp - r - 1 : m)
                      : ((pp - r - 1) * 2 + (v - 1) * pp < total ? (pp - r - 1) * 2 + (v - 1) * pp : total);
    int kf = 0, kb = 0;
#define FWD()                                                                          \
    do {                                                                               \
        int k = kf++;                                                                  \
        ops[n++] = (RepPipeOp){r, false, v == 1 ? k : (k / (pp * v)) * pp + k % pp,    \
                        v == 1 ? 0 : (k / pp) % v, 0, 0, false};                       \
    } while (0)
#define BWD()                                                                          \
    do {                                                                               \
        int k = kb++;                                                                  \
        ops[n++] = (RepPipeOp){r, true, v == 1 ? k : (k / (pp * v)) * pp + k % pp,     \
                        v == 1 ? 0 : v - 1 - (k / pp) % v, 0, 0, false};               \
    } while (0)
    for (int i = 0; i < warm; i++)
        FWD();
    for (int i = 0; i < total - warm; i++) {
        FWD();
        BWD();
    }
    for (int i = 0; i < warm; i++)
        BWD();
#undef FWD
#undef BWD
}

/* Simulate: an op starts when its rank is free and its input is there (the
 * previous virtual stage's forward, the next one's backward). */
double rep_pipe_simulate(int pp, int v, int m, const double *fwd, const double *bwd, RepPipeOp **ops)
{
    int per = 2 * m * v, vs_n = pp * v;
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
                if (!o->bwd)
                    ready = vs == 0 ? 0 : ff[(vs - 1) * m + o->mb];
                else
                    ready = vs == vs_n - 1 ? ff[vs * m + o->mb] : bf[(vs + 1) * m + o->mb];
                if (ready < 0)
                    break;
                o->start = fmax(ready, free_at[r]);
                o->end = o->start + (o->bwd ? bwd[vs] : fwd[vs]);
                free_at[r] = o->end;
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
