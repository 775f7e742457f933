/* train_gradcheck.c: --grad-check. */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The loss of the current weights (tr_forward_loss: the schedule's
 * forwards only), the routers replaying their choices. */
static double gc_forward_loss(void)
{
    rt_route_freeze(RT_ROUTE_REPLAY); /* the routers choose as on the unmoved weights */
    return tr_forward_loss();
}

/* Index of global element e of p in this rank's block of it, or -1. */
static int64_t gc_local_index(const CgParam *p, int64_t e)
{
    int64_t off[CG_MAX_RANK], loc[CG_MAX_RANK], coord[CG_MAX_RANK], li = 0;
    tr_block(p, off, loc);
    for (int d = p->rank - 1; d >= 0; d--) {
        coord[d] = e % p->global[d];
        e /= p->global[d];
    }
    for (int d = 0; d < p->rank; d++) {
        if (coord[d] < off[d] || coord[d] >= off[d] + loc[d])
            return -1;
        li = li * loc[d] + coord[d] - off[d];
    }
    return li;
}

static uint64_t gc_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

enum { GC_NCAND = 24, GC_NELEM = 3 };
/* An element passes when |fd - G| <= GC_ELEM_REL |G| + GC_ELEM_ULPS / (2h): the
 * relative part covers the truncation of central differences, the other the
 * rounding of the two fp32 losses (about 6 ulp of a loss near 5). */
static const double GC_ELEM_REL = 1e-2, GC_ELEM_ULPS = 6e-6;

/* Per element: of parameter q (mine: its index on this rank, -1 if none),
 * the tensor's largest |G|, the largest among GC_NCAND drawn at random and one
 * drawn at random (GC_NELEM elements), each checked by central differences of the loss along
 * that one element (every copy of it moved: data-parallel and
 * tensor-parallel replicas, tied copies). h makes the loss move by about
 * 1e-3 (thousands of fp32 ulps), but moves the element by at most a quarter
 * of the tensor's root mean square (or 0.01): an embedding entry moved by
 * twice its size changes its row's norm, and the loss, far from linearly
 * (3% off at h = 0.04 in tiny-llama). Returns the
 * worst error over its allowance (ELEM_*: <= 1 passes) and counts the
 * elements. */
static double gc_check_elements(const CgParam *q, int qi, int mine, float *const *g, float *const *w,
                             float *dev, int *nelem)
{
    const CgParam *p = mine >= 0 ? &tr_prog->params[mine] : NULL;
    int64_t n = 1;
    for (int d = 0; d < q->rank; d++)
        n *= q->global[d];
    /* Rank-holders that count each element once (as the norm does). */
    int counts = p && p->primary && tr_counts(p->norm_mask);
    /* The tensor's largest |G| and where. */
    float host[2 * GC_NCAND + 2];
    float best = 0, where = -1;
    if (counts) {
        int64_t off[CG_MAX_RANK], loc[CG_MAX_RANK];
        tr_block(p, off, loc);
        for (int64_t e = 0; e < n; e++) {
            int64_t li = gc_local_index(p, e);
            if (li >= 0 && fabsf(g[mine][li]) > best)
                best = fabsf(g[mine][li]), where = (float)e;
        }
    }
    host[0] = best;
    rt_to_device(dev, host, sizeof(float));
    rt_allreduce_max(tr_world, dev, 1);
    rt_to_host(host, dev, sizeof(float));
    host[1] = counts && best == host[0] ? where : -1;
    rt_to_device(dev, host + 1, sizeof(float));
    rt_allreduce_max(tr_world, dev, 1);
    rt_to_host(host + 1, dev, sizeof(float));
    int64_t cand[GC_NCAND + 1];
    cand[0] = (int64_t)host[1];
    for (int j = 1; j <= GC_NCAND; j++)
        cand[j] = (int64_t)(gc_mix((uint64_t)qi * 1000003u + (uint64_t)j) % (uint64_t)n);
    float vals[GC_NCAND + 2];
    for (int j = 0; j <= GC_NCAND; j++) {
        int64_t li = counts && cand[j] >= 0 ? gc_local_index(p, cand[j]) : -1;
        vals[j] = li >= 0 ? g[mine][li] : 0.0f;
    }
    /* and the tensor's root mean square, which bounds the step */
    float ss = 0;
    for (int64_t e = 0; counts && e < p->numel; e++)
        ss += w[mine][e] * w[mine][e];
    vals[GC_NCAND + 1] = ss;
    rt_to_device(dev, vals, sizeof vals);
    rt_allreduce(tr_world, dev, GC_NCAND + 2, RT_F32);
    rt_to_host(vals, dev, sizeof vals);
    double cap = 0.25 * sqrt(vals[GC_NCAND + 1] / (double)n);
    cap = cap < 0.01 ? 0.01 : cap;
    double worst = 0;
    bool used[GC_NCAND + 1] = {false};
    for (int k = 0; k < GC_NELEM; k++) {
        /* k = 0: the largest (cand[0]); 1: the largest of the random ones;
         * 2: the first random one whatever its |G|: an element whose
         * gradient was dropped (orthogonal to G, so invisible along G) is
         * never among the largest. */
        int j = -1;
        for (int c = k == 0 ? 0 : 1; c <= (k == 2 ? GC_NCAND : k == 0 ? 0 : GC_NCAND); c++)
            if (!used[c] && cand[c] >= 0 &&
                (j < 0 || (k == 1 && fabsf(vals[c]) > fabsf(vals[j]))))
                j = c;
        if (j < 0 || (k < 2 && vals[j] == 0))
            continue;
        for (int c = 0; c <= GC_NCAND; c++) /* the same element drawn twice */
            used[c] |= cand[c] == cand[j];
        double G = vals[j], h = G != 0 ? 1e-3 / fabs(G) : cap;
        h = h > cap ? cap : h;
        int64_t li = p ? gc_local_index(p, cand[j]) : -1;
        double lpm[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            if (li >= 0) {
                float v = (float)(w[mine][li] + (sgn ? -h : h));
                rt_act_from_f32(p->param + li, &v, 1);
            }
            lpm[sgn] = gc_forward_loss();
        }
        if (li >= 0)
            rt_act_from_f32(p->param + li, &w[mine][li], 1);
        double fd = (lpm[0] - lpm[1]) / (2 * h);
        /* Error over what is allowed: <= 1 passes. */
        double rel = fabs(fd - G) / (GC_ELEM_REL * fabs(G) + GC_ELEM_ULPS / (2 * h));
        worst = rel > worst ? rel : worst;
        ++*nelem;
        if (ROOT && getenv("PTDC_GRADCHECK_VERBOSE"))
            printf("  element %lld G %.6e fd %.6e rel %.1e h %.1e\n", (long long)cand[j], G, fd, rel, h);
    }
    return worst;
}

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
    /* The routers' choices (top-k, drops) are piecewise constant in the
     * weights: the gradient holds them fixed, and so must the differences,
     * or a step across a switch measures a jump. A forward-only pass on the
     * unmoved weights (forwards write no gradient) records each router's
     * logits in the order every later pass calls it; those passes choose
     * from them (rt_route_freeze, gc_forward_loss). */
    rt_route_freeze(RT_ROUTE_RECORD);
    for (int k = 0; k < tr_prog->nsched; k++) {
        const CgSchedOp *op = &tr_prog->sched[k];
        if (!op->bwd)
            tr_prog->forward[op->chunk](op->mb, op->mb % tr_prog->nslots[op->chunk]);
    }
    tr_prog->wait_sends();
    int bad = 0, nchecked = 0, nelems = 0;
    float *dev = (float *)rt_alloc(64 * sizeof(float)); /* element values, reduced */
    float **g = (float **)calloc((size_t)tr_prog->nparams + 1, sizeof *g);
    float **w = (float **)calloc((size_t)tr_prog->nparams + 1, sizeof *w);
    float *tmp = NULL;
    int64_t most = 1;
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        g[i] = (float *)malloc((size_t)p->numel * sizeof(float));
        w[i] = (float *)malloc((size_t)p->numel * sizeof(float));
        rt_to_host(g[i], p->grad, (size_t)p->numel * sizeof(rt_grad));
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
             * at most 1 in weight units (its elements move by far less) and
             * at most a quarter of the tensor's own norm: a router of small
             * weights moved by more than its size saturates its softmax, and
             * the differences measure that curvature (central differences
             * err by h^2/6 times the third derivative). */
            float wss[1] = {0};
            if (mine >= 0 && tr_prog->params[mine].primary && tr_counts(tr_prog->params[mine].norm_mask))
                for (int64_t e = 0; e < tr_prog->params[mine].numel; e++)
                    wss[0] += w[mine][e] * w[mine][e];
            rt_to_device(dev, wss, sizeof wss);
            rt_allreduce(tr_world, dev, 1, RT_F32);
            rt_to_host(wss, dev, sizeof wss);
            double h = 2e-3 / nrm, hcap = 0.25 * sqrt((double)wss[0]);
            h = h < 1e-3 ? 1e-3 : h > 1.0 ? 1.0 : h;
            h = hcap > 1e-3 && h > hcap ? hcap : h;
            double lpm[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                if (mine >= 0) {
                    CgParam *p = &tr_prog->params[mine];
                    double d = (sgn ? -h : h) / nrm;
                    for (int64_t e = 0; e < p->numel; e++)
                        tmp[e] = (float)(w[mine][e] + d * g[mine][e]);
                    rt_act_from_f32(p->param, tmp, p->numel);
                }
                lpm[sgn] = gc_forward_loss();
            }
            if (mine >= 0)
                rt_act_from_f32(tr_prog->params[mine].param, w[mine], tr_prog->params[mine].numel);
            double fd = (lpm[0] - lpm[1]) / (2 * h), rel = fabs(fd - nrm) / nrm;
            /* A gradient that is zero but for rounding (GPT's key bias: softmax
             * ignores a shift every key shares) has no direction to test. */
            if (nrm < 1e-7 && fabs(fd) < 1e-4)
                rel = 0;
            int nel = 0;
            double erel = nrm < 1e-7 ? 0 : gc_check_elements(q, qi, mine, g, w, dev, &nel);
            nchecked++;
            nelems += nel;
            if (!(rel <= tol) || !(erel <= 1))
                bad++;
            if (ROOT)
                printf("grad-check %-40s |G| %.6e  finite differences %.6e  relative %.1e; %d "
                       "elements: worst %.2f of allowed%s\n", q->name, nrm, fd, rel, nel, erel,
                       rel <= tol && erel <= 1 ? "" : "  MISMATCH");
        }
    if (ROOT)
        printf("grad-check: loss %.7f, %d tensors (directional, within %.0e) and %d elements (each "
               "within %.0e relative + rounding): %d tensors outside\n", l0, nchecked, tol, nelems,
               GC_ELEM_REL, bad);
    rt_free(dev);
    for (int i = 0; i < tr_prog->nparams; i++) {
        free(g[i]);
        free(w[i]);
    }
    free(g);
    free(w);
    free(tmp);
    free(norms);
    free(local);
    rt_route_freeze(RT_ROUTE_FREE);
    return bad;
}
