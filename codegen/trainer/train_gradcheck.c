/* train_gradcheck.c: --grad-check. */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --grad-check: for every parameter tensor W with reduced gradient G, the
 * derivative of the loss along G/|G| by central differences (step h),
 * (L(W + h G/|G|) - L(W - h G/|G|)) / 2h, must equal |G| (autodiff, the
 * kernels and every collective checked against the program's own forward).
 * A wrong scale, a wrong sign or a missing term in G changes that derivative.
 * Tied copies move together. Needs ZeRO-0 (parameters whole on each rank). */
int tr_grad_check(double tol)
{
    if (CG_ZERO != 0)
        rt_fatal("--grad-check needs a plan without ZeRO");
    tr_run_schedule();
    tr_reduce_grads();
    double l0 = tr_world_loss();
    int bad = 0, nchecked = 0;
    float **g = (float **)calloc((size_t)tr_prog->nparams + 1, sizeof *g);
    float **w = (float **)calloc((size_t)tr_prog->nparams + 1, sizeof *w);
    float *tmp = NULL;
    int64_t most = 1;
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        g[i] = (float *)malloc((size_t)p->numel * sizeof(float));
        w[i] = (float *)malloc((size_t)p->numel * sizeof(float));
        rt_act_to_f32(g[i], p->grad, p->numel);
        rt_act_to_f32(w[i], p->param, p->numel);
        if (p->numel > most)
            most = p->numel;
    }
    tmp = (float *)malloc((size_t)most * sizeof(float));
    /* Every parameter of the model in a fixed order; the ranks holding it move
     * it. First |G| of each (collectives: every rank, every parameter), before
     * any perturbed pass overwrites the gradients. */
    int total = 0;
    for (int r = 0; r < CG_PP; r++)
        total += cg_ranks[r].nparams;
    double *norms = (double *)calloc((size_t)total + 1, sizeof(double));
    int *local = (int *)calloc((size_t)total + 1, sizeof(int));
    for (int r = 0, q = 0; r < CG_PP; r++)
        for (int k = 0; k < cg_ranks[r].nparams; k++, q++) {
            local[q] = -1;
            for (int i = 0; i < tr_prog->nparams; i++)
                if (!strcmp(tr_prog->params[i].name, cg_ranks[r].params[k].name))
                    local[q] = i;
            if (cg_ranks[r].params[k].primary)
                norms[q] = sqrt(tr_grad_sumsq(local[q] >= 0 ? local[q] : -2));
        }
    for (int r = 0, qi = -1; r < CG_PP; r++)
        for (int k = 0; k < cg_ranks[r].nparams; k++) {
            const CgParam *q = &cg_ranks[r].params[k];
            qi++;
            if (!q->primary)
                continue;
            int mine = local[qi];
            double nrm = norms[qi];
            /* A step that moves the fp32 loss by ~4e-3 (thousands of its ulps),
             * at most 1 in weight units (its elements move by far less). */
            double h = 2e-3 / nrm;
            h = h < 1e-3 ? 1e-3 : h > 1.0 ? 1.0 : h;
            double lpm[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                if (mine >= 0) {
                    CgParam *p = &tr_prog->params[mine];
                    double d = (sgn ? -h : h) / nrm;
                    for (int64_t e = 0; e < p->numel; e++)
                        tmp[e] = (float)(w[mine][e] + d * g[mine][e]);
                    rt_act_from_f32(p->param, tmp, p->numel);
                }
                tr_run_schedule();
                lpm[sgn] = tr_world_loss();
            }
            if (mine >= 0)
                rt_act_from_f32(tr_prog->params[mine].param, w[mine], tr_prog->params[mine].numel);
            double fd = (lpm[0] - lpm[1]) / (2 * h), rel = fabs(fd - nrm) / nrm;
            /* A gradient that is zero but for rounding (GPT's key bias: softmax
             * ignores a shift every key shares) has no direction to test. */
            if (nrm < 1e-7 && fabs(fd) < 1e-4)
                rel = 0;
            nchecked++;
            if (!(rel <= tol))
                bad++;
            if (ROOT)
                printf("grad-check %-40s |G| %.6e  finite differences %.6e  relative %.1e%s\n",
                       q->name, nrm, fd, rel, rel <= tol ? "" : "  MISMATCH");
        }
    if (ROOT)
        printf("grad-check: loss %.7f, %d tensors, %d outside %.0e\n", l0, nchecked, bad, tol);
    for (int i = 0; i < tr_prog->nparams; i++) {
        free(g[i]);
        free(w[i]);
    }
    free(g);
    free(w);
    free(tmp);
    free(norms);
    free(local);
    return bad;
}
