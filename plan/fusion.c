/* fusion.c: which forward nodes ptdc's programs run as one kernel: a norm
 * with the residual add before it (plan_add_norm_pair, _fused), and GEMMs as
 * one batched call (plan_gemm_siblings, _batch). Codegen issues them so and
 * the cost model prices them so (passes/cost/cost_ops.c).
 *
 * Batched GEMMs.
 *
 * q, k and v are three GEMMs reading the same normalised input, gate and up
 * two: codegen (codegen/cg_lower.c) issues each such group as one
 * rt_matmul_batch, and their weight gradients as one rt_matmul_grad_batch.
 * On a GPU that is one launch whose tiles fill the device together (two
 * 128-wide kv projections of a GQA layer under tensor parallelism are 32
 * tiles each on a 108-SM A100; batched, one wave of 64); on the CPU the
 * calls run one after the other. The cost model prices each member as its
 * share of the batched GEMM (pass_gemm_time with batch = the group's size),
 * which on a CPU's measured curve (one unit, no per-call overhead) is the
 * GEMM alone.
 *
 * The rule is one function for codegen and the cost model. From the graph
 * alone (plan_gemm_siblings): forward MATMULs of one piece reading the same
 * activation as operand A and a parameter as operand B, contracting the
 * same dims, whose weights and outputs have the same shape dim by dim (a
 * GQA layer's k and v, not q). Under a plan's strategies (plan_gemm_batch):
 * those of them whose weights and outputs are split and summed alike (same
 * positions over the same mesh axes) and that read A in the same layout,
 * so every member has the same local M, N, K. Groups are cut into runs of
 * at most PLAN_GEMM_BATCH_MAX in node order (the runtime's
 * RT_MATMUL_BATCH_MAX). */
#include "plan.h"

#include <string.h>

/* Siblings looked at per piece (a layer has two groups of two or three). */
#define MAX_SIBLINGS 16

static bool matmul_with_param(const IrGraph *g, const IrNode *n)
{
    return n->op == IR_OP_MATMUL && n->id < g->nfwd && g->tensors[n->in[1]].role == IR_PARAM &&
           g->tensors[n->in[0]].role != IR_PARAM && g->tensors[n->out[0]].role != IR_LOSS;
}

/* Tensors a and b have the same shape dim by dim (the same dim, or dims of
 * one size) and the same dtype. */
static bool same_shape(const IrGraph *g, int a, int b)
{
    const IrTensor *x = &g->tensors[a], *y = &g->tensors[b];
    if (x->rank != y->rank || x->dtype != y->dtype)
        return false;
    for (int i = 0; i < x->rank; i++)
        if (x->dim[i] != y->dim[i] && g->dims[x->dim[i]].size != g->dims[y->dim[i]].size)
            return false;
    return true;
}

static bool siblings(const IrGraph *g, const IrNode *n, const IrNode *m)
{
    if (!matmul_with_param(g, n) || !matmul_with_param(g, m) || n->piece != m->piece ||
        n->in[0] != m->in[0] || n->attr.ncontract != m->attr.ncontract ||
        memcmp(n->attr.contract, m->attr.contract, sizeof(int) * (size_t)n->attr.ncontract) != 0)
        return false;
    if (!same_shape(g, n->in[1], m->in[1]) || !same_shape(g, n->out[0], m->out[0]))
        return false;
    /* The contracted dims sit at the same positions of both weights (the
     * same transposes). */
    for (int i = 0; i < n->attr.ncontract; i++)
        if (ir_tensor_dim_pos(g, n->in[1], n->attr.contract[i]) !=
            ir_tensor_dim_pos(g, m->in[1], m->attr.contract[i]))
            return false;
    return true;
}

/* Sharding a of tensor ta is sharding b of tensor tb moved dim for dim. */
static bool same_split(const IrGraph *g, int ta, const PlanSharding *a, int tb, const PlanSharding *b)
{
    if (a->partial != b->partial)
        return false;
    for (int ax = 0; ax < PLAN_MAX_AXES; ax++) {
        if ((a->dim[ax] < 0) != (b->dim[ax] < 0))
            return false;
        if (a->dim[ax] >= 0 &&
            ir_tensor_dim_pos(g, ta, a->dim[ax]) != ir_tensor_dim_pos(g, tb, b->dim[ax]))
            return false;
    }
    return true;
}

static bool same_layout(const IrGraph *g, const IrNode *n, const IrNode *m, const PlanStrategy *strategy)
{
    PlanSharding ni[IR_MAX_IN], no[IR_MAX_OUT], mi[IR_MAX_IN], mo[IR_MAX_OUT];
    plan_shard_io(g, n, &strategy[n->id], ni, no);
    plan_shard_io(g, m, &strategy[m->id], mi, mo);
    return plan_sharding_eq(&ni[0], &mi[0]) && same_split(g, n->in[1], &ni[1], m->in[1], &mi[1]) &&
           same_split(g, n->out[0], &no[0], m->out[0], &mo[0]);
}

/* n's run among its siblings (strategy: those laid out as n is). */
static int group(const IrGraph *g, const IrNode *n, const PlanStrategy *strategy, int *out)
{
    if (!matmul_with_param(g, n)) {
        if (out)
            out[0] = n->id;
        return 1;
    }
    const IrPiece *p = &g->pieces[n->piece];
    int all[MAX_SIBLINGS], k = 0, mine = -1;
    for (int id = p->first; id < p->first + p->count && id < g->nfwd; id++) {
        const IrNode *m = &g->nodes[id];
        if (m != n && (!siblings(g, n, m) || (strategy && !same_layout(g, n, m, strategy))))
            continue;
        if (k == MAX_SIBLINGS)
            break;
        if (m == n)
            mine = k;
        all[k++] = id;
    }
    if (mine < 0) { /* more siblings than the table holds before n: alone */
        if (out)
            out[0] = n->id;
        return 1;
    }
    int lo = mine / PLAN_GEMM_BATCH_MAX * PLAN_GEMM_BATCH_MAX;
    int cnt = k - lo < PLAN_GEMM_BATCH_MAX ? k - lo : PLAN_GEMM_BATCH_MAX;
    if (out)
        memcpy(out, all + lo, sizeof(int) * (size_t)cnt);
    return cnt;
}

int plan_gemm_siblings(const IrGraph *g, const IrNode *n, int *out)
{
    return group(g, n, NULL, out);
}

int plan_gemm_batch(const IrGraph *g, const IrNode *n, const PlanStrategy *strategy, int *out)
{
    return group(g, n, strategy, out);
}

bool plan_add_norm_pair(const IrGraph *g, const IrNode *n)
{
    if ((n->op != IR_OP_RMSNORM && n->op != IR_OP_LAYERNORM) || n->id < 1 || n->id >= g->nfwd)
        return false;
    if (n->op == IR_OP_RMSNORM && n->attr.group_dims)
        return false; /* the fused kernel has one weight row (a gated norm follows no add) */
    const IrNode *a = &g->nodes[n->id - 1];
    if (a->op != IR_OP_ADD || a->out[0] != n->in[0])
        return false;
    const IrTensor *y = &g->tensors[a->out[0]];
    for (int i = 0; i < 2; i++) {
        const IrTensor *x = &g->tensors[a->in[i]];
        if (x->rank != y->rank || memcmp(x->dim, y->dim, sizeof(int) * (size_t)y->rank) != 0)
            return false;
    }
    return true;
}

bool plan_add_norm_fused(const IrGraph *g, const IrNode *n, const PlanStrategy *strategy)
{
    if (!plan_add_norm_pair(g, n))
        return false;
    const IrNode *a = &g->nodes[n->id - 1];
    PlanSharding ain[IR_MAX_IN], aout[IR_MAX_OUT], nin[IR_MAX_IN];
    plan_shard_io(g, a, &strategy[a->id], ain, aout);
    plan_shard_io(g, n, &strategy[n->id], nin, NULL);
    return aout[0].partial == 0 && plan_sharding_eq(&aout[0], &nin[0]) &&
           plan_sharding_eq(&aout[0], &ain[0]) && plan_sharding_eq(&aout[0], &ain[1]);
}
