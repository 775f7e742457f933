/* synth.c: see synth.h. */
#include "synth.h"

#include <string.h>

static struct {
    double op_fwd[IR_NUM_OPS], op_in[IR_NUM_OPS], bwd_ratio;
    double alpha[8], beta[8][PLAN_MAX_AXES];
    double sync_beta[PLAN_MAX_AXES], param_b;
    uint64_t salt;
} F;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static uint64_t state = 1;
static double urand(void)
{
    state = mix(state + 0x9e3779b97f4a7c15ull);
    return (double)(state >> 11) / 9007199254740992.0;
}

void synth_seed(uint64_t seed)
{
    state = seed * 7919 + 17;
    for (int i = 0; i < IR_NUM_OPS; i++) {
        F.op_fwd[i] = 0.5 + urand();
        F.op_in[i] = 0.2 * urand();
    }
    F.bwd_ratio = 1.5 + urand();
    for (int k = 0; k < 8; k++) {
        F.alpha[k] = 2 + 4 * urand();
        for (int a = 0; a < PLAN_MAX_AXES; a++)
            F.beta[k][a] = (0.5 + urand()) * (a == 0 ? 3 : 1);
    }
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        F.sync_beta[a] = 0.2 + urand();
    F.param_b = 0.5 + urand();
    F.salt = mix(seed);
}

/* A small strategy-dependent wobble that breaks ties deterministically. */
static double wobble(const IrGraph *g, const IrNode *n, const PlanStrategy *s)
{
    const IrPiece *p = &g->pieces[n->piece];
    uint64_t h = F.salt ^ mix((uint64_t)(n->tmpl * 131 + (p->rep >= 0 ? p->rep : 1000 + n->piece)));
    h = mix(h ^ (uint64_t)(s->dim[0] + 7) * 977 ^ (uint64_t)(s->dim[1] + 7) * 131071);
    return (double)(h >> 11) / 9007199254740992.0;
}

static double local_numel(const IrGraph *g, int t, const int64_t *local)
{
    const IrTensor *x = &g->tensors[t];
    double n = 1;
    for (int i = 0; i < x->rank; i++)
        n *= (double)local[x->dim[i]];
    return n;
}

static void node(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                 const PlanStrategy *s, const int64_t *dim_size, PassNodeCost *out)
{
    (void)c;
    int64_t local[64];
    plan_local_sizes(g, n, m, s, dim_size, local);
    double w = 0;
    for (int i = 0; i < n->nout; i++)
        w += local_numel(g, n->out[i], local);
    double in = 0;
    for (int i = 0; i < n->nin; i++)
        in += local_numel(g, n->in[i], local);
    /* Contractions cost their full loop space. */
    double loop = 1;
    for (int d = 0; d < g->ndims; d++) {
        bool used = false;
        for (int i = 0; i < n->nin && !used; i++)
            used = ir_tensor_has_dim(g, n->in[i], d);
        if (used)
            loop *= (double)local[d];
    }
    memset(out, 0, sizeof *out);
    out->fwd_s = 1e-6 * (F.op_fwd[n->op] * (w + (n->op == IR_OP_MATMUL ? loop : 0)) +
                         F.op_in[n->op] * in + wobble(g, n, s));
    out->bwd_s = F.bwd_ratio * out->fwd_s;
}

static double coll(const PassCostCtx *c, const PlanMesh *m, const PlanColl *k, int eb)
{
    (void)c;
    if (k->kind == PLAN_COLL_NONE)
        return 0;
    int a = k->axis >= 0 && k->axis < PLAN_MAX_AXES ? k->axis : 0;
    double n = m->size[a];
    if (k->kind == PLAN_COLL_SLICE)
        return 1e-7 * (double)k->numel * eb / n;
    return 1e-6 * (F.alpha[k->kind] + (double)k->numel * eb * F.beta[k->kind][a] * (n - 1) / n);
}

static double saved(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                    const PlanStrategy *s, const int64_t *dim_size, PlanRecompute r)
{
    (void)c;
    if (r == PLAN_RECOMPUTE_FULL && g->pieces[n->piece].rep >= 0)
        return 0;
    PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
    plan_shard_io(g, n, s, in, out);
    double b = 0;
    for (int i = 0; i < n->nin; i++)
        if ((ir_ops[n->op].saves & IR_SAVE_IN(i)) && g->tensors[n->in[i]].role != IR_PARAM)
            b += (double)plan_local_numel(g, n->in[i], m, &in[i], dim_size) *
                 ir_dtype_bytes(g->tensors[n->in[i]].dtype);
    for (int i = 0; i < n->nout; i++)
        if (ir_ops[n->op].saves & IR_SAVE_OUT(i))
            b += (double)plan_local_numel(g, n->out[i], m, &out[i], dim_size) *
                 ir_dtype_bytes(g->tensors[n->out[i]].dtype);
    return b;
}

/* saved() above counts every input its op saves. */
static bool keeps_input(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                        const int64_t *dim_size, int slot, PlanRecompute r)
{
    (void)c, (void)m, (void)dim_size;
    if (r == PLAN_RECOMPUTE_FULL && g->pieces[n->piece].rep >= 0)
        return false;
    return (ir_ops[n->op].saves & IR_SAVE_IN(slot)) && g->tensors[n->in[slot]].role != IR_PARAM;
}

/* Parameters n reads, with the axes their gradient is partial over. */
static double params(const IrGraph *g, const IrNode *n, const PlanMesh *m, const PlanStrategy *s,
                     int zero, bool sync)
{
    PlanSharding in[IR_MAX_IN];
    plan_shard_io(g, n, s, in, NULL);
    int64_t ds[64];
    ir_dim_sizes(g, 1, ds);
    double tot = 0;
    for (int i = 0; i < n->nin; i++) {
        if (g->tensors[n->in[i]].role != IR_PARAM)
            continue;
        double e = (double)plan_local_numel(g, n->in[i], m, &in[i], ds);
        PlanSharding gs = plan_shard_grad_in(g, n, s, i);
        double dp = 1, sb = 0;
        for (int a = 0; a < m->naxes; a++)
            if (gs.partial >> a & 1) {
                dp *= m->size[a];
                sb += F.sync_beta[a];
            }
        tot += sync ? 1e-6 * e * sb * (zero >= 2 ? 1.5 : 1) : F.param_b * e * (4 + 12 / (zero ? dp : 1));
    }
    return tot;
}

static double param_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                          const PlanStrategy *s, int zero)
{
    (void)c;
    return params(g, n, m, s, zero, false);
}

static double param_sync(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                         const PlanStrategy *s, int zero, int num_micro)
{
    (void)c;
    (void)num_micro;
    return params(g, n, m, s, zero, true);
}

const PassIlpCosts synth_costs = {node, coll, saved, keeps_input, param_bytes, param_sync};
