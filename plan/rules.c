/* rules.c: which nodes a stage's recomputation policy reruns in backward.
 * One predicate for the search, the cost model (which adds its attention
 * kernel choice: passes/cost/mem_saved.c) and codegen alike, so a plan is
 * priced with the recomputation its program runs. */
#include "plan.h"

#include <math.h>
#include <string.h>

/* The MLP sublayer: `block mlp`, or `block moe` (a mixture of experts'
 * router and experts, recomputed with their exchanges). */
bool plan_is_mlp(const IrNode *n)
{
    return n->block && (strcmp(n->block, "mlp") == 0 || strcmp(n->block, "moe") == 0);
}

const char *plan_recompute_name(PlanRecompute r)
{
    switch (r) {
    case PLAN_RECOMPUTE_NONE: return "none";
    case PLAN_RECOMPUTE_SELECTIVE: return "selective";
    case PLAN_RECOMPUTE_FFN: return "ffn";
    case PLAN_RECOMPUTE_FULL: return "full";
#define RC_SET(e, name, mods) \
    case PLAN_RECOMPUTE_##e: return name;
#include "recompute.def"
    case PLAN_RECOMPUTE_COUNT: break;
    }
    return "?";
}

const char *plan_rc_module_name(PlanRcModule m)
{
    static const char *const names[] = {
#define RC_MODULE(e, name, strict) name,
#include "recompute.def"
    };
    return m >= 0 && m < PLAN_RC_MODULE_COUNT ? names[m] : "?";
}

unsigned plan_recompute_modules(PlanRecompute r)
{
    switch (r) {
#define RC_SET(e, name, mods) \
    case PLAN_RECOMPUTE_##e: return mods;
#include "recompute.def"
    default: return 0;
    }
}

static bool in_block(const IrNode *n, const char *b) { return n->block && strcmp(n->block, b) == 0; }

static bool is_norm(const IrNode *n) { return n->op == IR_OP_RMSNORM || n->op == IR_OP_LAYERNORM; }

/* The node of n's piece that made tensor t, or NULL (made elsewhere). */
static const IrNode *maker(const IrGraph *g, const IrNode *n, int t)
{
    int p = g->tensors[t].producer;
    return p >= 0 && g->nodes[p].piece == n->piece ? &g->nodes[p] : NULL;
}

/* An MLA up-projection: a matmul of an attention block reading a norm of a
 * value its own piece made (the query or key-value latent; a block's first
 * norm reads the residual stream from the piece before). */
static bool up_proj(const IrGraph *g, const IrNode *n)
{
    if (n->op != IR_OP_MATMUL || !in_block(n, "attn"))
        return false;
    const IrNode *a = maker(g, n, n->in[0]);
    return a && is_norm(a) && maker(g, a, a->in[0]) != NULL;
}

/* Is n between an up-projection and core attention: every reader of its
 * output is attention or again such a node (slice, rope, concat)? */
static bool feeds_attention(const IrGraph *g, const IrNode *n, int depth)
{
    if (depth > 16 || n->op == IR_OP_MATMUL || is_norm(n) || n->op == IR_OP_ATTENTION || !in_block(n, "attn"))
        return false;
    const IrPiece *P = &g->pieces[n->piece];
    bool any = false;
    for (int j = n->id + 1; j < P->first + P->count; j++) {
        const IrNode *c = &g->nodes[j];
        for (int i = 0; i < c->nin; i++)
            if (c->in[i] == n->out[0]) {
                if (c->op != IR_OP_ATTENTION && !feeds_attention(g, c, depth + 1))
                    return false;
                any = true;
            }
    }
    return any;
}

/* Was n's input made by an up-projection or a node after one? */
static bool after_up_proj(const IrGraph *g, const IrNode *n, int depth)
{
    for (int i = 0; i < n->nin && depth < 16; i++) {
        const IrNode *a = maker(g, n, n->in[i]);
        if (a && (up_proj(g, a) || (feeds_attention(g, a, 0) && after_up_proj(g, a, depth + 1))))
            return true;
    }
    return false;
}

static bool piece_has_up_proj(const IrGraph *g, const IrNode *n)
{
    const IrPiece *P = &g->pieces[n->piece];
    for (int j = P->first; j < P->first + P->count; j++)
        if (up_proj(g, &g->nodes[j]))
            return true;
    return false;
}

/* Does Megatron module m rerun forward node n? MLA's rerun region is the
 * up-projections and what lies between them and attention, plus the RoPE
 * of the shared key part (applied inside Megatron's checkpointed function;
 * its slice stays saved). */
static bool module_reruns(const IrGraph *g, const IrNode *n, PlanRcModule m)
{
    switch (m) {
    case PLAN_RC_MODULE_MLA_UP_PROJ:
        return up_proj(g, n) ||
               (feeds_attention(g, n, 0) && (after_up_proj(g, n, 0) || (n->op == IR_OP_ROPE && piece_has_up_proj(g, n))));
    case PLAN_RC_MODULE_MLP: return in_block(n, "mlp");
    case PLAN_RC_MODULE_MOE: return in_block(n, "moe");
    case PLAN_RC_MODULE_CORE_ATTN: return n->op == IR_OP_ATTENTION;
    case PLAN_RC_MODULE_LAYERNORM: return is_norm(n) && n->block && maker(g, n, n->in[0]) == NULL;
    case PLAN_RC_MODULE_MOE_ACT: return false; /* inside the MoE node: plan_recomputes_part */
    case PLAN_RC_MODULE_COUNT: break;
    }
    return false;
}

bool plan_recomputes_part(const IrGraph *g, const IrNode *n, PlanRecompute r)
{
    return g->pieces[n->piece].layer >= 0 && n->op == IR_OP_MOE &&
           (plan_recompute_modules(r) >> PLAN_RC_MODULE_MOE_ACT & 1);
}

bool plan_recomputed(const IrGraph *g, const IrNode *n, PlanRecompute r, bool materialized)
{
    if (g->pieces[n->piece].layer < 0)
        return false; /* embedding and head are never recomputed */
    switch (r) {
    case PLAN_RECOMPUTE_FULL: return true;
    case PLAN_RECOMPUTE_FFN: return plan_is_mlp(n);
    case PLAN_RECOMPUTE_SELECTIVE: return n->op == IR_OP_ATTENTION && materialized;
    case PLAN_RECOMPUTE_NONE: break;
    default:
        for (int m = 0; m < PLAN_RC_MODULE_COUNT; m++)
            if ((plan_recompute_modules(r) >> m & 1) && module_reruns(g, n, (PlanRcModule)m))
                return true;
    }
    return false;
}

int plan_route_topk(const IrGraph *g, const IrNode *moe)
{
    int p = g->tensors[moe->in[1]].producer;
    if (p < 0 || g->nodes[p].op != IR_OP_ROUTE)
        ir_die("moe node %d: its gates come from no route", moe->id);
    return (int)g->nodes[p].attr.route.topk;
}

int64_t plan_moe_wslot_rows(const IrGraph *g, const IrNode *moe, int64_t tokens, int ep, int64_t e_local,
                            double factor)
{
    int p = g->tensors[moe->in[1]].producer;
    int64_t k = p >= 0 && g->nodes[p].op == IR_OP_ROUTE ? g->nodes[p].attr.route.topk : e_local;
    int64_t worst = tokens * ep * (k < e_local ? k : e_local);
    if (factor <= 0 || k >= e_local * ep)
        return worst;
    int64_t E = g->dims[g->tensors[moe->in[2]].dim[0]].size;
    double expected = (double)tokens * ep * (double)k * (double)e_local / (double)E;
    double rows = ceil(expected * factor);
    return rows < (double)worst ? (int64_t)rows : worst;
}

int64_t plan_moe_wslot_numel(const IrNode *moe, int64_t rows, int64_t d_model, int64_t d_expert)
{
    int64_t gated = ir_moe_slots(moe).w_gate >= 0;
    return rows * (2 * d_model + (2 + gated) * d_expert);
}

int plan_recompute_unused(const IrGraph *g, PlanRecompute r)
{
    static const bool strict[] = {
#define RC_MODULE(e, name, strict) strict,
#include "recompute.def"
    };
    unsigned mods = plan_recompute_modules(r);
    for (int m = 0; m < PLAN_RC_MODULE_COUNT; m++) {
        if (!(mods >> m & 1) || !strict[m])
            continue;
        bool any = false;
        for (int i = 0; i < g->nfwd && !any; i++) {
            const IrNode *n = &g->nodes[i];
            any = g->pieces[n->piece].layer >= 0 &&
                  (m == PLAN_RC_MODULE_MOE_ACT ? n->op == IR_OP_MOE : module_reruns(g, n, (PlanRcModule)m));
        }
        if (!any)
            return m;
    }
    return -1;
}
