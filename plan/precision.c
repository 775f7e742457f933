/* precision.c: the names and widths of PLAN_PRECISIONS (plan.h), for the
 * flags, the plan files and the frameworks' outputs. */
#include "plan.h"

#include <string.h>

static const struct {
    const char *name;
    int bits;
} precs[PLAN_NPREC] = {
#define X(id, name, bits) {name, bits},
    PLAN_PRECISIONS(X)
#undef X
};

const char *plan_precision_name(PlanPrecision p)
{
    return (unsigned)p < PLAN_NPREC ? precs[p].name : "?";
}

int plan_precision_bits(PlanPrecision p)
{
    return (unsigned)p < PLAN_NPREC ? precs[p].bits : 16;
}

int plan_precision_parse(const char *s)
{
    for (int i = 0; i < PLAN_NPREC; i++)
        if (!strcmp(s, precs[i].name))
            return i;
    return -1;
}

/* Is n's layer among the last `last` of its repeat statement? A statement's
 * layers are consecutive pieces, layer k the k-th (ir_verify checks it), so
 * n's is when the statement has ended `last` pieces after n's. (Counting the
 * statement's pieces instead scanned the graph on every call: the cost model
 * asks per node, strategy and candidate.) */
static bool last_layers(const IrGraph *g, const IrNode *n, int last)
{
    int q = n->piece + last;
    return last > 0 && (q >= g->npieces || g->pieces[q].stmt != g->pieces[n->piece].stmt);
}

PlanPrecision plan_gemm_precision(const IrGraph *g, const IrNode *n, PlanPrecision prec, int bf16_first,
                                  int bf16_last)
{
    if (prec == PLAN_PREC_BF16 || n->op != IR_OP_MATMUL || n->nin < 2 || n->layer < 0 ||
        g->tensors[n->in[1]].role != IR_PARAM || g->pieces[n->piece].rep < 0)
        return PLAN_PREC_BF16;
    if (n->layer < bf16_first || last_layers(g, n, bf16_last))
        return PLAN_PREC_BF16;
    /* A router's scores pick the experts: Megatron-LM keeps the router out of
     * FP8 (its GEMM is small, n_experts wide, and a rounding flips choices).
     * Its ROUTE follows it inside its piece; the cost model asks this per
     * node and strategy, so only the piece's later nodes are looked at. */
    for (int i = n->id + 1; i < g->nfwd && g->nodes[i].piece == n->piece; i++)
        if (g->nodes[i].op == IR_OP_ROUTE && g->nodes[i].in[0] == n->out[0])
            return PLAN_PREC_BF16;
    /* The gates times a [experts, d_model] weight is the experts' down bias
     * (GPT-OSS, docs/moe.md): a bias, which Megatron-LM adds in bf16 or
     * fp32 (experts.py _apply_bias), never an FP8 GEMM. */
    int r = g->tensors[n->in[0]].producer;
    if (r >= 0 && g->nodes[r].op == IR_OP_ROUTE)
        return PLAN_PREC_BF16;
    return prec;
}

PlanPrecision plan_expert_precision(const IrGraph *g, const IrNode *n, PlanPrecision prec, int bf16_first,
                                    int bf16_last)
{
    if (prec == PLAN_PREC_BF16 || n->op != IR_OP_MOE || n->layer < 0 || g->pieces[n->piece].rep < 0)
        return PLAN_PREC_BF16;
    if (n->layer < bf16_first || last_layers(g, n, bf16_last))
        return PLAN_PREC_BF16;
    return prec;
}

int plan_amax_axes(const IrGraph *g, const IrNode *n, const PlanStrategy *s, int which)
{
    PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
    plan_shard_io(g, n, s, in, out);
    const PlanSharding *t = which == 2 ? &out[0] : &in[which];
    int mask = 0;
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        if (t->dim[a] >= 0 && t->dim[a] != g->batch_dim)
            mask |= 1 << a;
    return mask;
}
