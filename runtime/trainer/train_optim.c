/* train_optim.c: one optimizer step: the schedule and gradient reduction
 * (train_sched.c), the global gradient norm and clipping, the learning-rate
 * schedule (linear warm-up, cosine decay), AdamW or LAMB (--optimizer) on
 * this rank's shard (fp32 gradients) and the in-place all-gather of ZeRO-1/2
 * shards back. A step whose loss or gradient norm is not finite updates
 * nothing (the caller counts such steps, --max-skips); tr_state_finite guards
 * saves and exports. */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double learning_rate(int64_t t)
{
    if (t < tr_fl.warmup)
        return tr_fl.lr * (double)(t + 1) / (double)tr_fl.warmup;
    if (tr_fl.decay_steps <= tr_fl.warmup)
        return tr_fl.min_lr;
    double r = (double)(t - tr_fl.warmup) / (double)(tr_fl.decay_steps - tr_fl.warmup);
    if (r > 1)
        r = 1;
    return tr_fl.min_lr + 0.5 * (1 + cos(3.14159265358979323846 * r)) * (tr_fl.lr - tr_fl.min_lr);
}

/* The reduced gradient this rank updates with: full, or its ZeRO shard. */
static rt_grad *reduced_grad(const CgParam *p, int64_t *n)
{
    *n = p->zshard ? p->shard : p->numel;
    return p->zshard && CG_ZERO == 1 ? p->grad_shard : p->grad;
}

/* Sum of squares of the reduced gradients (of parameter `only` of this rank,
 * none if -2, all if -1), each element counted once over the world. */
double tr_grad_sumsq(int only)
{
    float host;
    rt_zero(g_loss + 1, sizeof(float));
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        int64_t n;
        rt_grad *g = reduced_grad(p, &n);
        if (p->primary && tr_counts(p->norm_mask) && (only == -1 || only == i))
            rt_sumsq(g_loss + 1, g, n);
    }
    rt_allreduce(tr_world, g_loss + 1, 1, RT_F32);
    rt_to_host(&host, g_loss + 1, sizeof host);
    return host;
}

/* The block of p this rank's AdamW updates: its ZeRO-1/2 shard of the
 * padded parameter, else the parameter (ZeRO-3 holds only the shard). */
static rt_act *own_block(const CgParam *p)
{
    bool gather = p->zshard && CG_ZERO < 3;
    return gather ? p->param + (int64_t)rt_comm_rank(g_comm[p->pmask]) * p->shard : p->param;
}

void tr_alias_masters(void)
{
#if CG_MASTER_ALIAS
    /* fp32 weights (the CPU target): a second fp32 copy would only double
     * the memory and AdamW's traffic; every value is bitwise the same. */
    _Static_assert(sizeof(rt_act) == sizeof(float), "masters alias fp32 parameters only");
    for (int i = 0; i < tr_prog->nparams; i++)
        tr_prog->params[i].master = (float *)own_block(&tr_prog->params[i]);
#endif
}

bool tr_step_once(double *loss, double *norm, double *lr)
{
    tr_run_schedule();
    tr_reduce_grads();
    /* The loss and the norm are world-wide sums, the same on every rank, so
     * the decision to skip is too. */
    *loss = tr_world_loss();
    *norm = sqrt(tr_grad_sumsq(-1));
    *lr = learning_rate(tr_step);
    if (!isfinite(*loss) || !isfinite(*norm))
        return false; /* no update: weights and moments stay as they were */
    double scale = tr_fl.clip > 0 && *norm > tr_fl.clip ? tr_fl.clip / (*norm + 1e-6) : 1.0;
    double t_opt = cg_prof_on & CG_TIMED_TRACE ? rt_time() : 0;
    bool lamb = !strcmp(tr_fl.optimizer, "lamb");
    const float *nrm = NULL;
    if (lamb) {
        /* LAMB's first pass: moments, and each tensor's partial norms; then
         * the whole tensors' norms in one collective (train_lamb.c). */
        tr_lamb_zero();
        for (int i = 0; i < tr_prog->nparams; i++) {
            CgParam *p = &tr_prog->params[i];
            int64_t n;
            rt_grad *g = reduced_grad(p, &n);
            float wd = p->decay ? (float)tr_fl.weight_decay : 0.0f;
            rt_lamb_prepare(tr_lamb_sums(i), p->master, g, p->m, p->v, n, (float)tr_fl.beta1,
                            (float)tr_fl.beta2, (float)tr_fl.eps, wd, (float)scale,
                            (int)tr_step + 1);
        }
        nrm = tr_lamb_norms();
    }
    /* ZeRO-1/2: AdamW writes this rank's block of the padded parameter and
     * the all-gather runs in place, without blocking: the next parameters'
     * AdamW runs meanwhile; the step waits for them all at its end. */
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        int64_t n;
        rt_grad *g = reduced_grad(p, &n);
        float wd = p->decay ? (float)tr_fl.weight_decay : 0.0f;
        bool gather = p->zshard && CG_ZERO < 3;
        rt_act *mine = own_block(p);
        if (lamb) {
            int s = tr_lamb_slot(i);
            double trust = rt_lamb_trust(nrm[2 * s], nrm[2 * s + 1], tr_fl.trust_max);
            rt_lamb_apply(p->master, mine, p->m, p->v, n, (float)*lr, (float)tr_fl.beta1,
                          (float)tr_fl.beta2, (float)tr_fl.eps, wd, (float)trust,
                          (int)tr_step + 1);
        } else {
            rt_adamw(p->master, mine, g, p->m, p->v, n, (float)*lr, (float)tr_fl.beta1,
                     (float)tr_fl.beta2, (float)tr_fl.eps, wd, (float)scale, (int)tr_step + 1);
        }
        if (gather && tr_overlap) {
            double t0 = cg_prof_on ? rt_time() : 0;
            tr_push_req(rt_iallgather(g_comm[p->pmask], p->param, mine, p->shard, RT_ACT));
            if (cg_prof_on & CG_TIMED_TRACE)
                tr_trace_issue("allgather (issue)", t0, g_comm[p->pmask], tr_padded(p), RT_ACT);
            if (cg_prof_on)
                cg_prof_add(CG_PF_cg_issue, t0);
        } else if (gather) {
            rt_allgather(g_comm[p->pmask], p->param, mine, p->shard, RT_ACT);
        }
    }
    tr_wait_reqs();
    if (cg_prof_on & CG_TIMED_TRACE)
        tr_trace_span(lamb ? "optimizer (LAMB, ZeRO all-gathers)"
                           : "optimizer (AdamW, ZeRO all-gathers)", t_opt);
    return true;
}

double tr_forward_loss(void)
{
    /* The schedule's forwards only, in its order: every rank skips its
     * backwards and their transfers alike, so the rest stays matched (as
     * --grad-check does). The batch is the next step's: tr_data_pos. */
    rt_zero(g_loss, 3 * sizeof(float));
    for (int k = 0; k < tr_prog->nsched; k++) {
        const CgSchedOp *op = &tr_prog->sched[k];
        if (!op->bwd)
            tr_prog->forward[op->chunk](op->mb, op->mb % tr_prog->nslots[op->chunk]);
    }
    tr_prog->wait_sends();
    return tr_world_loss();
}

bool tr_state_finite(void)
{
    enum { CHUNK = 1 << 16 };
    float *h = (float *)malloc(CHUNK * sizeof(float));
    if (!h)
        rt_fatal("out of host memory");
    int64_t bad = 0;
    for (int i = 0; i < tr_prog->nparams && !bad; i++) {
        const CgParam *p = &tr_prog->params[i];
        const float *bufs[3] = {p->master, p->m, p->v};
        for (int k = 0; k < 3 && !bad; k++)
            for (int64_t at = 0; at < p->shard && !bad; at += CHUNK) {
                int64_t n = p->shard - at < CHUNK ? p->shard - at : (int64_t)CHUNK;
                rt_to_host(h, bufs[k] + at, (size_t)n * sizeof(float));
                for (int64_t j = 0; j < n; j++)
                    bad |= !isfinite(h[j]);
            }
    }
    free(h);
    return rt_host_max(tr_world, bad) == 0;
}
