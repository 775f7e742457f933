/* layout.c: which mesh axis each parallel dimension runs along (recorded in
 * the plan once, from its strategies), the micro-batch's two units, and a
 * plan's layout in the usual words (dp, tp, sp, ...). */
#include "plan.h"

#include <stdio.h>
#include <string.h>

static const char *const dim_names[PLAN_NDIMS] = {
#define PLAN_DIM(id, name, what) name,
#include "dims.def"
#undef PLAN_DIM
};

const char *plan_dim_name(PlanDim d) { return d >= 0 && d < PLAN_NDIMS ? dim_names[d] : "?"; }

void plan_axes(const IrGraph *g, Plan *p)
{
    for (int d = 0; d < PLAN_NDIMS; d++)
        p->axis[d] = -1, p->nested[d] = 0;
    /* What each axis's nodes do, in one walk over the nodes (a search asks
     * this of every variant it solves: the model's nodes once, not once per
     * axis). */
    bool batch[PLAN_MAX_AXES] = {0}, other[PLAN_MAX_AXES] = {0}, cp[PLAN_MAX_AXES] = {0};
    bool xchg[PLAN_MAX_AXES] = {0}, ep[PLAN_MAX_AXES] = {0}, etp[PLAN_MAX_AXES] = {0};
    for (int i = 0; i < g->nfwd; i++) {
        const PlanStrategy *s = &p->strategy[i];
        int c = plan_cp_axis(g, &g->nodes[i], s), e = plan_routed_expert_dim(g, &g->nodes[i]);
        int f = e >= 0 ? g->tensors[g->nodes[i].in[2]].dim[2] : -1;
        for (int a = 0; a < p->mesh.naxes; a++) {
            int d = s->dim[a];
            batch[a] |= d == g->batch_dim;
            other[a] |= d >= 0 && d != g->batch_dim;
            cp[a] |= c == a;
            xchg[a] |= e >= 0 && (s->xchg >> a & 1);
            /* The experts: the axis an MOE node splits its expert dim over
             * (by exchange or plainly) is EP's, the one splitting d_expert
             * ETP's. */
            ep[a] |= e >= 0 && ((s->xchg >> a & 1) || d == e);
            etp[a] |= e >= 0 && d == f;
        }
    }
    for (int a = 0; a < p->mesh.naxes; a++) {
        if (p->mesh.size[a] <= 1)
            continue;
        /* Attention splitting its queries' sequence (or, all-to-all, its
         * heads with the exchange bit): context parallelism. A second
         * axis splitting only the batch, the experts exchanged over it, is
         * dp's inner factor (parallel folding: EP below DP). */
        if (batch[a] && p->axis[PLAN_DIM_DP] < 0)
            p->axis[PLAN_DIM_DP] = (int8_t)a;
        else if (batch[a] && !other[a] && xchg[a])
            p->nested[PLAN_DIM_DP] |= (uint8_t)(1u << a);
        else if (cp[a] && p->axis[PLAN_DIM_CP] < 0)
            p->axis[PLAN_DIM_CP] = (int8_t)a;
        else if (other[a] && p->axis[PLAN_DIM_TP] < 0)
            p->axis[PLAN_DIM_TP] = (int8_t)a;
        if (ep[a] && p->axis[PLAN_DIM_EP] < 0)
            p->axis[PLAN_DIM_EP] = (int8_t)a;
        if (etp[a] && p->axis[PLAN_DIM_ETP] < 0)
            p->axis[PLAN_DIM_ETP] = (int8_t)a;
    }
    /* EP over several axes (dp x tp, or dp's inner factor with tp): the
     * other axes the node that set EP's axis exchanges over. */
    int ea = p->axis[PLAN_DIM_EP];
    for (int i = 0; ea >= 0 && i < g->nfwd; i++) {
        const PlanStrategy *s = &p->strategy[i];
        if (plan_routed_expert_dim(g, &g->nodes[i]) < 0 || !(s->xchg >> ea & 1))
            continue;
        for (int b = 0; b < p->mesh.naxes; b++)
            if (b != ea && (s->xchg >> b & 1) && p->mesh.size[b] > 1)
                p->nested[PLAN_DIM_EP] |= (uint8_t)(1u << b);
        break;
    }
    p->axes_set = true;
}

static void need_axes(const Plan *p)
{
    if (!p->axes_set)
        ir_die("plan: the mesh axes of its parallel dimensions were never recorded (plan_axes)");
}

int plan_degree(const Plan *p, PlanDim d)
{
    need_axes(p);
    if (p->axis[d] < 0)
        return 1;
    int n = p->mesh.size[p->axis[d]];
    for (int a = 0; a < p->mesh.naxes; a++)
        if (p->nested[d] >> a & 1)
            n *= p->mesh.size[a];
    return n;
}

/* Bit a for every axis dimension d runs along. */
static uint8_t axes_of(const Plan *p, PlanDim d)
{
    return p->axis[d] < 0 ? 0 : (uint8_t)(p->nested[d] | 1u << p->axis[d]);
}

int64_t plan_micro_batch(const Plan *p) { return p->mb_seqs / plan_degree(p, PLAN_DIM_DP); }

int64_t plan_mb_seqs(int64_t micro_batch, int dp) { return micro_batch * dp; }

void plan_layout(const IrGraph *g, const Plan *p, PlanLayout *out)
{
    need_axes(p);
    memset(out, 0, sizeof *out);
    out->dp_axis = p->axis[PLAN_DIM_DP];
    out->tp_axis = p->axis[PLAN_DIM_TP];
    out->dp = plan_degree(p, PLAN_DIM_DP);
    out->tp = plan_degree(p, PLAN_DIM_TP);
    out->cp_axis = p->axis[PLAN_DIM_CP];
    out->cp = plan_degree(p, PLAN_DIM_CP);
    out->cp_balanced = out->cp > 1 && plan_cp_balanced(g);
    for (int i = 0; out->cp > 1 && i < g->nfwd; i++)
        out->cp_ring |= plan_cp_ring(g, &g->nodes[i], &p->strategy[i]),
        out->cp_a2a |= plan_cp_a2a(g, &g->nodes[i], &p->strategy[i]) >= 0;
    out->dp_axes = axes_of(p, PLAN_DIM_DP);
    out->ep_axes = axes_of(p, PLAN_DIM_EP);
    out->replicated = 1;
    for (int a = 0; a < p->mesh.naxes; a++)
        if (!(out->dp_axes >> a & 1) && a != out->tp_axis && a != out->cp_axis)
            out->replicated *= p->mesh.size[a];
    /* Sequence parallelism as Megatron means it: the norms split the sequence
     * over the tensor-parallel axis. */
    out->ep_axis = p->axis[PLAN_DIM_EP];
    out->etp_axis = p->axis[PLAN_DIM_ETP];
    out->ep = plan_degree(p, PLAN_DIM_EP);
    out->etp = plan_degree(p, PLAN_DIM_ETP);
    out->edp = plan_mesh_devices(&p->mesh) / (out->ep * out->etp);
    for (int i = 0; i < g->nfwd; i++) {
        const PlanStrategy *s = &p->strategy[i];
        if (plan_routed_expert_dim(g, &g->nodes[i]) < 0)
            continue;
        out->moe = true;
        out->ep_exchange |= out->ep_axis >= 0 && (s->xchg >> out->ep_axis & 1);
    }
    for (int i = 0; out->tp_axis >= 0 && i < g->nfwd; i++)
        out->sp |= p->strategy[i].dim[out->tp_axis] == g->seq_dim && g->seq_dim >= 0 &&
                   (g->nodes[i].op == IR_OP_RMSNORM || g->nodes[i].op == IR_OP_LAYERNORM);
    out->pp = p->pp;
    out->v = p->v > 0 ? p->v : 1;
    out->gpus = plan_mesh_devices(&p->mesh) * p->pp;
    out->zero = p->zero;
    out->micro_batch = plan_micro_batch(p);
    out->num_micro = p->num_micro;
    out->schedule = p->schedule;
    for (int i = 0; i < p->nstages; i++)
        out->recompute |= 1u << p->stages[i].recompute;
}

const char *plan_layout_recompute_name(const PlanLayout *l)
{
    for (int r = PLAN_RECOMPUTE_NONE; r < PLAN_RECOMPUTE_COUNT; r++)
        if (l->recompute == 1u << r)
            return plan_recompute_name((PlanRecompute)r);
    return "mixed";
}

const char *plan_layout_str(const PlanLayout *l, char *buf, size_t n)
{
    char v[32] = "";
    if (l->v > 1)
        snprintf(v, sizeof v, " (v %d)", l->v);
    char rep[32] = "";
    if (l->replicated > 1)
        snprintf(rep, sizeof rep, " x %d replicas", l->replicated);
    char cp[32] = "";
    if (l->cp > 1)
        snprintf(cp, sizeof cp, " x cp %d%s", l->cp, l->cp_ring ? " (ring)" : l->cp_a2a ? " (a2a)" : "");
    snprintf(buf, n, "dp %d%s x tp %d x pp %d%s%s, sp %s, zero %d, micro-batch %lld x %d, %s, recompute %s",
             l->dp, cp, l->tp, l->pp, rep, v, l->sp ? "on" : "off", l->zero, (long long)l->micro_batch,
             l->num_micro, plan_schedule_name(l->schedule),
             plan_layout_recompute_name(l));
    if (l->moe) {
        size_t k = strlen(buf);
        char ep[160];
        snprintf(buf + k, k < n ? n - k : 0, ", %s", plan_layout_experts_str(l, ep, sizeof ep));
    }
    return buf;
}

static const char *axis_word(const PlanLayout *l, int a)
{
    return a < 0                                           ? "none"
           : a == l->dp_axis || (a >= 0 && (l->dp_axes >> a & 1)) ? "dp"
           : a == l->tp_axis                                ? "tp"
           : a == l->cp_axis                                ? "cp"
                                                            : "a replica axis";
}

const char *plan_layout_experts_str(const PlanLayout *l, char *buf, size_t n)
{
    char ep[96] = "ep 1", etp[64] = "etp 1";
    const char *how = l->ep_exchange ? "all-to-all" : "all-gather";
    uint8_t more = (uint8_t)(l->ep_axes & ~(l->ep_axis >= 0 ? 1u << l->ep_axis : 0u));
    bool in_dp = l->ep_axis >= 0 && (l->dp_axes >> l->ep_axis & 1) && l->dp_axis != l->ep_axis;
    if (l->ep > 1 && in_dp && !more) /* dp's inner factor: EP below DP */
        snprintf(ep, sizeof ep, "ep %d (groups of %d consecutive dp ranks of %d, %s)", l->ep, l->ep, l->dp, how);
    else if (l->ep > 1 && more)
        snprintf(ep, sizeof ep, "ep %d (folded over %s%s x tp, %s)", l->ep, in_dp ? "part of " : "",
                 axis_word(l, l->ep_axis), how);
    else if (l->ep > 1)
        snprintf(ep, sizeof ep, "ep %d (folded over %s, %s)", l->ep, axis_word(l, l->ep_axis), how);
    if (l->etp > 1)
        snprintf(etp, sizeof etp, "etp %d (folded over %s)", l->etp, axis_word(l, l->etp_axis));
    snprintf(buf, n, "%s, %s, expert-dp %d", ep, etp, l->edp);
    return buf;
}

const char *plan_layout_flags(const PlanLayout *l, char *buf, size_t n)
{
    char rc[32] = "", v[32] = "";
    const char *r = plan_layout_recompute_name(l);
    if (strcmp(r, "mixed") != 0)
        snprintf(rc, sizeof rc, " --recompute %s", r);
    if (l->v > 1)
        snprintf(v, sizeof v, " --virtual-stages %d", l->v);
    snprintf(buf, n, "--tp %d --pp %d --dp %d --micro-batch %lld%s --sp %s --zero %d --schedule %s%s",
             l->tp, l->pp, l->dp, (long long)l->micro_batch, rc, l->sp ? "on" : "off", l->zero,
             plan_schedule_name(l->schedule), v);
    if (l->cp > 1) {
        size_t k = strlen(buf);
        snprintf(buf + k, k < n ? n - k : 0, " --cp %d", l->cp);
    }
    if (l->moe) {
        size_t k = strlen(buf);
        snprintf(buf + k, k < n ? n - k : 0, " --ep %d --etp %d", l->ep, l->etp);
    }
    return buf;
}
