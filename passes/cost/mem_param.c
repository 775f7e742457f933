/* mem_param.c: model states and their synchronisation. Mixed-precision
 * AdamW keeps per parameter element a bf16 weight, a gradient (bf16 in ptdc's
 * runtime; fp32 where a stack accumulates in fp32), an fp32 master weight and
 * two fp32 moments. Each parameter's data-parallel group is the set of mesh
 * axes over which its gradient is partial (plan_shard_grad_in): the batch
 * axis for a weight, plus the sequence-parallel axis for a norm weight. ZeRO
 * shards over exactly that group. */
#include "cost/cost.h"

/* Weights and (by default) gradients are in the backend's activation
 * type: bf16 on GPUs, fp32 on the CPU backend. */
static int weight_bytes(const PassCostCtx *c) { return pass_elem_bytes(c, IR_BF16); }
static int grad_bytes(const PassCostCtx *c)
{
    return c->st.grad_bytes > 0 ? c->st.grad_bytes : weight_bytes(c);
}
/* fp32 master weights and two moments, unless the weights are fp32 and the
 * stack keeps no second copy. */
static int optim_bytes(const PassCostCtx *c)
{
    return c->st.master_aliases && weight_bytes(c) == 4 ? 8 : 12;
}
int pass_optim_bytes(const PassCostCtx *c) { return optim_bytes(c); }

static int first_of_piece(const IrGraph *g, int t)
{
    return g->tensors[t].piece >= 0 ? g->pieces[g->tensors[t].piece].first : 0;
}

/* Is n the first forward node reading parameter t? */
static bool owns(const IrGraph *g, const IrNode *n, int t)
{
    int from = first_of_piece(g, t);
    for (int j = from; j < n->id; j++) {
        const IrNode *o = &g->nodes[j];
        for (int i = 0; i < o->nin; i++)
            if (o->in[i] == t)
                return false;
    }
    for (int i = 0; i < n->nin; i++) /* the same parameter twice in n */
        if (n->in[i] == t)
            return true;
    return false;
}

/* ... the same, from the search's memo where it has one: owns reads every
 * node before n in the piece, for every parameter of every price. */
static bool owns_c(const PassCostCtx *c, const IrGraph *g, const IrNode *n, int t)
{
    PassMemo *m = c->memo && c->memo->g == g ? c->memo : NULL;
    if (!m || n->id < first_of_piece(g, t))
        return owns(g, n, t);
    if (!m->owner) {
        m->owner = ir_xmalloc(sizeof(int) * (size_t)(g->ntensors + 1));
        for (int u = 0; u < g->ntensors; u++)
            m->owner[u] = -1;
        for (int j = 0; j < g->nnodes; j++)
            for (int i = 0; i < g->nodes[j].nin; i++) {
                int u = g->nodes[j].in[i];
                if (u >= 0 && m->owner[u] < 0 && j >= first_of_piece(g, u))
                    m->owner[u] = j;
            }
    }
    return m->owner[t] == n->id;
}

typedef struct Owned {
    int t;
    double local;                 /* elements on this rank before ZeRO sharding */
    uint8_t dp_axes;              /* bit a: gradient partial over axis a */
    double dp;                    /* product of those axes' sizes */
    PlanPrecision prec;           /* the format a low-precision GEMM reads it in, or bf16 */
} Owned;

/* The parameters node n reads (only == -1) or just parameter `only`, and,
 * unless `any`, only those n owns. */
static int read_params(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m, const PlanStrategy *s,
                       int only, bool any, Owned *out)
{
    PlanSharding in[IR_MAX_IN];
    bool io = false;
    /* Parameters never carry the batch dim: global sizes suffice. */
    int64_t ds[256];
    int k = 0;
    for (int i = 0; i < n->nin; i++) {
        int t = n->in[i];
        if (g->tensors[t].role != IR_PARAM || (only >= 0 && t != only) || (!any && !owns_c(c, g, n, t)))
            continue;
        bool dup = false;
        for (int e = 0; e < k; e++)
            dup |= out[e].t == t;
        if (dup)
            continue;
        if (!io) {
            plan_shard_io(g, n, s, in, NULL);
            ir_dim_sizes(g, 1, ds);
            io = true;
        }
        PlanSharding gs = plan_shard_grad_in(g, n, s, i);
        /* A GEMM's weight is its second operand; an MoE node's expert
         * weights are its inputs from 2 on, before its biases (no GEMM
         * operand: ir_moe_slots). */
        IrMoeSlots sl = n->op == IR_OP_MOE ? ir_moe_slots(n) : (IrMoeSlots){0};
        bool lp_weight = n->op == IR_OP_MOE ? i >= 2 && i <= sl.w_down : i == 1;
        Owned o = {t, (double)plan_local_numel(g, t, m, &in[i], ds), 0, 1,
                   lp_weight ? pass_prec_of(c, g, n) : PLAN_PREC_BF16};
        for (int a = 0; a < m->naxes; a++)
            if ((gs.partial >> a & 1) && m->size[a] > 1) {
                o.dp_axes |= (uint8_t)(1u << a);
                o.dp *= m->size[a];
            }
        out[k++] = o;
    }
    return k;
}

static int owned_params(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m, const PlanStrategy *s,
                        Owned *out)
{
    return read_params(c, g, n, m, s, -1, false, out);
}

/* Bytes per element of a weight as held and all-gathered: the low-precision
 * copy itself under fp8_param_gather (Megatron --fp8-param-gather: the
 * distributed optimizer gathers the cast weights, no bf16 copy), else the
 * backend's weight type. */
static double gathered_bytes(const PassCostCtx *c, const Owned *o)
{
    if (o->prec != PLAN_PREC_BF16 && c->st.fp8_param_gather)
        return pass_prec_elem_bytes(o->prec);
    return weight_bytes(c);
}

static void states(const PassCostCtx *c, const Owned *own, int k, int zero, double *weights,
                   double *grads, double *optim)
{
    double w = 0, gr = 0, op = 0;
    for (int i = 0; i < k; i++) {
        double e = own[i].local, dp = own[i].dp;
        w += gathered_bytes(c, &own[i]) * e / (zero >= 3 ? dp : 1);
        /* A low-precision GEMM reads its weight cast, in each orientation
         * the stack keeps (the transpose for dgrad), held for the step. */
        int copies = pass_prec_orientations(&c->cl->gpu, own[i].prec, c->st.lp_weight_copies);
        if (own[i].prec != PLAN_PREC_BF16 && !c->st.fp8_param_gather)
            w += copies * pass_prec_elem_bytes(own[i].prec) * e / (zero >= 3 ? dp : 1);
        else if (own[i].prec != PLAN_PREC_BF16)
            w += (copies - 1) * pass_prec_elem_bytes(own[i].prec) * e / (zero >= 3 ? dp : 1);
        gr += grad_bytes(c) * e / (zero >= 2 ? dp : 1);
        /* ptdc's ZeRO-1 reduce-scatters the full gradient into a separate
         * shard (codegen's layout); Megatron's distributed optimizer does it
         * in place, so the calibrated stacks have no such buffer. */
        if (zero == 1 && dp > 1 && !c->st.ref_stack)
            gr += grad_bytes(c) * e / dp;
        op += optim_bytes(c) * e / (zero >= 1 ? dp : 1);
    }
    *weights = w, *grads = gr, *optim = op;
}

void pass_param_bytes3(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                       const PlanStrategy *s, int zero, double *weights, double *grads, double *optim)
{
    Owned own[IR_MAX_IN];
    states(c, own, owned_params(c, g, n, m, s, own), zero, weights, grads, optim);
}

void pass_param_bytes_of(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                         const PlanStrategy *s, int zero, int t, double *weights, double *grads,
                         double *optim)
{
    Owned own[IR_MAX_IN];
    states(c, own, read_params(c, g, n, m, s, t, true, own), zero, weights, grads, optim);
}

bool pass_param_owned(const IrGraph *g, const IrNode *n, int t) { return owns(g, n, t); }

double pass_param_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                        const PlanStrategy *s, int zero)
{
    double w, gr, op;
    pass_param_bytes3(c, g, n, m, s, zero, &w, &gr, &op);
    return w + gr + op;
}

/* The programs reduce and gather a gradient on the communicator of its
 * whole data-parallel group (cg_a_comm of the mask), as Megatron reduces
 * over its data-and-context-parallel group: one collective over it. */
static double over_axes(const PassCostCtx *c, const PlanMesh *m, PlanCollKind kind, uint8_t axes,
                        double numel, int eb)
{
    return pass_cost_coll_axes(c, m, kind, axes, numel, eb);
}

double pass_param_sync_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                         const PlanStrategy *s, int zero, int num_micro)
{
    Owned own[IR_MAX_IN];
    int k = owned_params(c, g, n, m, s, own);
    int gb = grad_bytes(c);
    double t = 0;
    for (int i = 0; i < k; i++) {
        double e = own[i].local;
        uint8_t ax = own[i].dp_axes;
        if (!ax)
            continue;
        double rs = over_axes(c, m, PLAN_COLL_REDUCESCATTER, ax, e, gb);
        /* All-gather of the updated weights from their shards. */
        double ag = over_axes(c, m, PLAN_COLL_ALLGATHER, ax, e * gathered_bytes(c, &own[i]), 1);
        switch (zero) {
        case 0:
            t += over_axes(c, m, PLAN_COLL_ALLREDUCE, ax, e, gb);
            break;
        case 1:
            t += rs + ag;
            break;
        case 2:
            t += num_micro * rs + ag;
            break;
        default:
            t += num_micro * (rs + 2 * ag);
            break;
        }
    }
    return t;
}

int pass_param_sync_lat(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                        const PlanStrategy *s, int zero, double *red_s, double *gather_s)
{
    Owned own[IR_MAX_IN];
    int k = owned_params(c, g, n, m, s, own), count = 0;
    *red_s = *gather_s = 0;
    for (int i = 0; i < k; i++) {
        uint8_t ax = own[i].dp_axes;
        if (!ax)
            continue;
        count++;
        /* The same collectives over a buffer of one element per rank: what
         * they cost whatever their size. */
        double e = own[i].dp;
        if (zero == 0)
            *red_s += over_axes(c, m, PLAN_COLL_ALLREDUCE, ax, e, grad_bytes(c));
        if (zero == 1)
            *red_s += over_axes(c, m, PLAN_COLL_REDUCESCATTER, ax, e, grad_bytes(c));
        if (zero == 1 || zero == 2)
            *gather_s += over_axes(c, m, PLAN_COLL_ALLGATHER, ax, e * gathered_bytes(c, &own[i]), 1);
    }
    return count;
}

double pass_param_gather_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                           const PlanStrategy *s, int zero)
{
    if (zero != 1 && zero != 2)
        return 0;
    Owned own[IR_MAX_IN];
    int k = owned_params(c, g, n, m, s, own);
    double t = 0;
    for (int i = 0; i < k; i++)
        if (own[i].dp_axes)
            t += over_axes(c, m, PLAN_COLL_ALLGATHER, own[i].dp_axes, own[i].local * gathered_bytes(c, &own[i]), 1);
    return t;
}

double pass_param_step_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                         const PlanStrategy *s, int zero)
{
    Owned own[IR_MAX_IN];
    int k = owned_params(c, g, n, m, s, own);
    const PassGpu *gpu = &c->cl->gpu;
    double t = 0;
    for (int i = 0; i < k; i++) {
        double e = own[i].local, dp = own[i].dp;
        double shard = zero >= 1 ? e / dp : e, grad = zero >= 2 ? e / dp : e;
        t += pass_kernel_time(gpu, PASS_K_ZERO, 1, grad) + pass_kernel_time(gpu, PASS_K_SUMSQ, 1, shard) +
             pass_kernel_time(gpu, PASS_K_ADAMW, 1, shard);
        /* LAMB (runtime/cpu/lamb.c): rt_lamb_prepare moves what AdamW's
         * pass does but the writes of master and weight, rt_lamb_apply
         * reads master, m and v again and writes both: 12 bytes an element
         * more than AdamW's 24 + 2 weight bytes (pass_kernel_bytes), priced
         * at AdamW's rate as its pass over as many elements as move those
         * bytes. The per-tensor norms' all-reduce over the world is
         * pass_predict's (dp_tail). */
        if (c->lamb) {
            double adamw_bytes = 24 + 2.0 * weight_bytes(c);
            t += pass_kernel_time(gpu, PASS_K_ADAMW, 1, shard * 12 / adamw_bytes);
        }
    }
    return t;
}

double pass_param_mb_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                       const PlanStrategy *s, int zero)
{
    if (zero < 2)
        return 0;
    Owned own[IR_MAX_IN];
    int k = owned_params(c, g, n, m, s, own);
    const PassGpu *gpu = &c->cl->gpu;
    double t = 0;
    for (int i = 0; i < k; i++)
        if (own[i].dp > 1)
            t += pass_kernel_time(gpu, PASS_K_ZERO, 1, own[i].local) +
                 pass_kernel_time(gpu, PASS_K_ADD, 1, own[i].local / own[i].dp);
    return t;
}
