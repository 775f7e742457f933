/* cg_analyse.c: what a plan implies for every tensor, before any code exists.
 *
 * Shardings come from plan/shard.c: a node's strategy fixes the sharding it
 * needs for each input and makes for each output (backward nodes use their
 * forward node's strategy). A produced tensor is brought to its canonical
 * form right where it is made: the reductions (all-reduce, reduce-scatter)
 * that plan_reshard prescribes towards its first consumer. Consumers then
 * only gather, slice or all-to-all from the canonical form, which is what the
 * backward pass keeps (a saved all-gathered input is gathered again, as in
 * Megatron). A complete gradient has its tensor's produced dims, no partial
 * sum. Parameters are stored in the sharding their first consumer needs;
 * their gradient stays a partial sum over the axes the batch (or sequence)
 * is split on until the step's reduction. */
#include "cg.h"

#include <stdarg.h>
#include <string.h>

const char *cg_fmt(Cg *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ir_strdup(c->arena, buf);
}

const PlanStrategy *cg_strategy(const Cg *c, const IrNode *n)
{
    return &c->p->strategy[n->fwd >= 0 ? n->fwd : n->id];
}

PlanSharding cg_need(const Cg *c, const IrNode *n, int i)
{
    PlanSharding in[IR_MAX_IN];
    plan_shard_io(c->g, n, cg_strategy(c, n), in, NULL);
    return in[i];
}

PlanSharding cg_made(const Cg *c, const IrNode *n, int j)
{
    PlanSharding out[IR_MAX_OUT];
    plan_shard_io(c->g, n, cg_strategy(c, n), NULL, out);
    return out[j];
}

void cg_local_dims(const Cg *c, int t, const PlanSharding *sh, int64_t *local)
{
    const IrTensor *x = &c->g->tensors[t];
    for (int i = 0; i < x->rank; i++) {
        local[i] = c->dim[x->dim[i]];
        for (int a = 0; a < c->naxes; a++)
            if (sh->dim[a] == x->dim[i])
                local[i] /= c->mesh.size[a];
    }
}

int64_t cg_numel(const Cg *c, int t, const PlanSharding *sh)
{
    int64_t local[IR_MAX_RANK], n = 1;
    cg_local_dims(c, t, sh, local);
    for (int i = 0; i < c->g->tensors[t].rank; i++)
        n *= local[i];
    return n;
}

const char *cg_shape(const Cg *c, int t, const PlanSharding *sh)
{
    char buf[512];
    plan_sharding_str(c->g, t, sh, c->axis_name, buf, sizeof buf);
    /* plan_sharding_str starts with the tensor's base name; keep the shape. */
    const char *s = strchr(buf, '[');
    return ir_strdup(c->arena, s ? s : buf);
}

int cg_stage_pp(const Cg *c, int stage) { return c->p->stages[stage].pp_rank; }

int cg_chunk_of_stage(const Cg *c, int stage)
{
    int k = 0;
    for (int s = 0; s < stage; s++)
        k += c->p->stages[s].pp_rank == c->p->stages[stage].pp_rank;
    return k;
}

/* ---------------------------------------------------------------- checks */

static bool check_plan(Cg *c) { return plan_verify(c->g, c->p); }

/* A tensor the program reads from the data: an input, or a shift of one
 * (multi-token prediction's tokens and targets further on). */
bool cg_is_data(const Cg *c, int t)
{
    const IrTensor *x = &c->g->tensors[t];
    return x->role == IR_INPUT ||
           (x->producer >= 0 && x->producer < c->g->nfwd && c->g->nodes[x->producer].op == IR_OP_SHIFT);
}

/* The input a data tensor reads and how far along (0: the input itself). */
int cg_data_root(const Cg *c, int t, int64_t *shift, int *tail)
{
    const IrTensor *x = &c->g->tensors[t];
    *shift = 0, *tail = 0;
    if (x->role == IR_INPUT)
        return t;
    const IrNode *n = &c->g->nodes[x->producer];
    *shift = n->attr.shift, *tail = n->attr.shift_tail;
    return n->in[0];
}

/* The two inputs: token ids (read by the embedding) and targets (by the
 * cross-entropy), both [batch, seq]. */
static bool find_inputs(Cg *c)
{
    const IrGraph *g = c->g;
    c->tokens = c->targets = -1;
    for (int i = 0; i < g->nfwd; i++)
        if (g->nodes[i].op == IR_OP_CROSS_ENTROPY && g->tensors[g->nodes[i].in[1]].role == IR_INPUT)
            c->targets = g->nodes[i].in[1];
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        if (x->role != IR_INPUT || t == c->targets)
            continue;
        if (c->tokens >= 0) {
            ir_error(x->loc, "codegen: input '%s': a model has two inputs, token ids and targets",
                     x->name);
            return false;
        }
        c->tokens = t;
    }
    for (int k = 0; k < 2; k++) {
        int t = k ? c->targets : c->tokens;
        if (t < 0) {
            ir_error(IR_NOLOC, "codegen: the model has no %s input", k ? "targets" : "token");
            return false;
        }
        const IrTensor *x = &g->tensors[t];
        if (x->rank != 2 || x->dim[0] != g->batch_dim || x->dim[1] != g->seq_dim ||
            x->dtype != IR_I32) {
            ir_error(x->loc, "codegen: input '%s' must be i32[batch, seq]", x->name);
            return false;
        }
    }
    return true;
}

/* What the runtime has no kernel for yet: attention whose v head size
 * differs from q and k's (DeepSeek-V3's multi-head latent attention, 128
 * against 192) under context parallelism. Without it rt_attention_v_fwd/bwd
 * run it (v padded to q's size); the ring, all-gather and all-to-all forms
 * take one head size. The plan and the frameworks' flags (--emit megatron)
 * are made for such a layout; its programs are refused here, by name. */
static bool cg_supported(const Cg *c)
{
    const IrGraph *g = c->g;
    if (plan_degree(c->p, PLAN_DIM_CP) <= 1)
        return true;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op != IR_OP_ATTENTION || g->tensors[n->in[2]].dim[3] == g->tensors[n->in[1]].dim[3])
            continue;
        ir_error(n->loc, "codegen: ptdc's programs do not run attention whose v head ('%s', %lld) differs "
                 "from q and k's ('%s', %lld) under context parallelism: its ring, all-gather and all-to-all "
                 "kernels take one head size; plan it with --plan-only, or state it for Megatron-LM with "
                 "--emit megatron",
                 g->dims[g->tensors[n->in[2]].dim[3]].name, (long long)g->dims[g->tensors[n->in[2]].dim[3]].size,
                 g->dims[g->tensors[n->in[1]].dim[3]].name, (long long)g->dims[g->tensors[n->in[1]].dim[3]].size);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------- analysis */

static bool in_recompute_set(const Cg *c, const IrNode *n)
{
    const IrGraph *g = c->g;
    /* The generated attention keeps nothing S x S: the flash reading (NULL). */
    return n->id < g->nfwd && plan_recomputed(g, n, c->piece_recompute[n->piece], false);
}

static void analyse_tensors(Cg *c)
{
    const IrGraph *g = c->g;
    int nt = g->ntensors;
    for (int t = 0; t < nt; t++) {
        c->last_stage[t] = -1;
        c->param_index[t] = -1;
        c->prod[t] = c->canon[t] = c->gsh[t] = (PlanSharding){PLAN_NO_DIMS, 0, 0};
    }
    for (int i = 0; i < g->nnodes; i++) {
        const IrNode *n = &g->nodes[i];
        c->node_stage[i] = c->piece_stage[n->fwd >= 0 ? g->nodes[n->fwd].piece : n->piece];
        if (i < g->nfwd)
            c->recomputed[i] = in_recompute_set(c, n);
        for (int j = 0; j < n->nout; j++)
            c->prod[n->out[j]] = cg_made(c, n, j);
    }
    for (int i = 0; i < g->nfwd; i++)
        for (int k = 0; k < g->nodes[i].nin; k++) {
            int t = g->nodes[i].in[k];
            if (c->node_stage[i] > c->last_stage[t])
                c->last_stage[t] = c->node_stage[i];
        }
    /* Canonical form: reduced towards the first consumer, in node order. */
    bool *seen = ir_alloc(c->arena, (size_t)nt);
    for (int i = 0; i < g->nnodes; i++) {
        const IrNode *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++) {
            int t = n->in[k];
            if (seen[t] || g->tensors[t].producer < 0)
                continue;
            seen[t] = true;
            PlanSharding need = cg_need(c, n, k);
            c->canon[t] = plan_reshard_reduced(g, t, &c->mesh, c->prod[t], &need, c->dim);
        }
    }
    for (int t = 0; t < nt; t++)
        if (!seen[t])
            c->canon[t] = c->prod[t];
    /* Recomputation roots, and what the backward pass keeps. */
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (!c->recomputed[i])
            continue;
        for (int k = 0; k < n->nin; k++) {
            int p = g->tensors[n->in[k]].producer;
            if (p >= 0 && (!c->recomputed[p] || g->nodes[p].piece != n->piece))
                c->is_root[n->in[k]] = true;
        }
    }
    for (int i = g->nfwd; i < g->nnodes; i++) {
        const IrNode *b = &g->nodes[i];
        for (int k = 0; k < b->nin; k++) {
            int t = b->in[k];
            const IrTensor *x = &g->tensors[t];
            if (x->role == IR_GRAD || x->producer < 0 || x->producer >= g->nfwd)
                continue;
            int p = x->producer;
            if (!c->recomputed[p] || g->nodes[p].piece != g->nodes[b->fwd].piece)
                c->saved[t] = true;
        }
    }
    for (int t = 0; t < nt; t++) {
        int p = g->tensors[t].producer;
        if (p >= 0 && p < g->nfwd && (c->is_root[t] || c->last_stage[t] > c->node_stage[p]))
            c->saved[t] = true;
    }
    /* Gradients read by a backward node (other than a gradient sum). */
    for (int i = g->nfwd; i < g->nnodes; i++) {
        const IrNode *b = &g->nodes[i];
        if (pass_is_grad_sum(g, b))
            continue;
        for (int k = 0; k < b->nin; k++) {
            const IrTensor *u = &g->tensors[b->in[k]];
            if (u->role != IR_GRAD)
                continue;
            if (u->producer < 0) {
                c->seed = u->id;
                continue;
            }
            c->has_grad[u->grad_of] = true;
            c->gsh[u->grad_of] = c->prod[u->grad_of];
            c->gsh[u->grad_of].partial = 0;
        }
    }
}

/* How a parameter's first dims group into Hugging Face's 2-D view: the
 * contracted dims of its first MATMUL, or the vocabulary of an embedding;
 * otherwise its own shape (1-D when sliced as a part). */
static void hf_view(const Cg *c, CgParamPlan *pp)
{
    const IrGraph *g = c->g;
    const IrTensor *x = &g->tensors[pp->tensor];
    /* The experts' weights and biases of a moe under one name without
     * {expert}, not transposed: transformers keeps them stacked as
     * nn.Parameters of their own shape, multiplied as they are (GPT-OSS's
     * gate_up_proj [n_experts, d_model, 2 d_ff], down_proj, their biases), so
     * the view is the parameter's. (A transposed one is an nn.Linear's [out,
     * in] weight of a one-expert moe: Qwen2-MoE's shared expert, 2-D.) */
    for (int i = 0; x->hf_name && !x->hf_transposed && !strstr(x->hf_name, "{expert}") && i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        for (int k = 2; n->op == IR_OP_MOE && k < n->nin; k++)
            if (n->in[k] == pp->tensor) {
                pp->hf_split = -1;
                return;
            }
    }
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op == IR_OP_EMBEDDING && n->in[1] == pp->tensor) {
            pp->hf_split = x->rank > 1 ? 1 : 0;
            return;
        }
        if (n->op == IR_OP_MATMUL && (n->in[0] == pp->tensor || n->in[1] == pp->tensor)) {
            bool first = x->dim[0] == n->attr.contract[0];
            pp->hf_split = first ? n->attr.ncontract : x->rank - n->attr.ncontract;
            return;
        }
    }
    /* A projection's bias (added to a MATMUL's result: nn.Linear keeps it
     * 1-D, as Qwen2's q_proj.bias [n_heads x head_dim]), a bias sliced out of
     * a fused one, a norm's weight: 1-D; a table such as GPT-2's positions:
     * its own rows. */
    bool bias = false;
    for (int i = 0; i < g->nfwd && !bias; i++) {
        const IrNode *n = &g->nodes[i];
        for (int k = 0; n->op == IR_OP_ADD && k < 2; k++) {
            int other = g->tensors[n->in[1 - k]].producer;
            bias |= n->in[k] == pp->tensor && other >= 0 && g->nodes[other].op == IR_OP_MATMUL;
        }
    }
    pp->hf_split = bias || x->hf_nparts > 1 || x->rank <= 1 ? 0 : x->rank - 1;
}

static void analyse_params(Cg *c)
{
    const IrGraph *g = c->g;
    const Plan *p = c->p;
    c->params = ir_alloc(c->arena, sizeof *c->params * (size_t)(g->ntensors + 1));
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        if (x->role != IR_PARAM)
            continue;
        CgParamPlan *pp = &c->params[c->nparams];
        memset(pp, 0, sizeof *pp);
        pp->tensor = t;
        pp->tied = -1;
        bool first = true;
        for (int i = 0; i < g->nfwd; i++) {
            const IrNode *n = &g->nodes[i];
            for (int k = 0; k < n->nin; k++) {
                if (n->in[k] != t)
                    continue;
                if (first)
                    pp->store = cg_need(c, n, k);
                first = false;
                pp->ppmask |= (uint64_t)1 << cg_stage_pp(c, c->node_stage[i]);
            }
        }
        if (first)
            continue; /* unused: not trained */
        pp->store.partial = 0;
        /* The runtime nests a parameter's dim split over several axes in
         * axis order (CgParam.split_axes, tr_block): the experts over dp x
         * tp. Only activations take another order (attention's heads). */
        if (pp->store.hi_outer)
            ir_die("codegen: parameter %s is stored nested out of axis order", x->name);
        /* Partial axes of the contributions the storage does not split. */
        for (int i = g->nfwd; i < g->nnodes; i++) {
            const IrNode *b = &g->nodes[i];
            if (pass_is_grad_sum(g, b))
                continue;
            for (int j = 0; j < b->nout; j++)
                if (g->tensors[b->out[j]].role == IR_GRAD && g->tensors[b->out[j]].grad_of == t)
                    for (int a = 0; a < c->naxes; a++)
                        if ((cg_made(c, b, j).partial >> a & 1) && pp->store.dim[a] < 0)
                            pp->pmask |= (uint8_t)(1u << a);
        }
        pp->numel = cg_numel(c, t, &pp->store);
        pp->group = 1;
        for (int a = 0; a < c->naxes; a++)
            if (pp->pmask >> a & 1)
                pp->group *= c->mesh.size[a];
        pp->zshard = p->zero >= 1 && pp->pmask != 0;
        pp->shard = pp->zshard ? (pp->numel + pp->group - 1) / pp->group : pp->numel;
        pp->padded = pp->zshard ? pp->shard * pp->group : pp->numel;
        for (int r = 0; r < p->pp; r++)
            if (pp->ppmask >> r & 1) {
                pp->primary = r;
                break;
            }
        if (__builtin_popcountll(pp->ppmask) > 1) {
            int k = 0;
            while (k < c->ntied && c->tied_mask[k] != pp->ppmask)
                k++;
            if (k == CG_MAX_TIED)
                ir_die("codegen: more than %d groups of pipeline ranks share parameters", CG_MAX_TIED);
            if (k == c->ntied)
                c->tied_mask[c->ntied++] = pp->ppmask;
            pp->tied = k;
        }
        hf_view(c, pp);
        c->param_index[t] = c->nparams++;
    }
}

bool cg_analyse(Cg *c)
{
    const IrGraph *g = c->g;
    const Plan *p = c->p;
    c->mesh = p->mesh;
    c->naxes = p->mesh.naxes;
    /* Axis names for comments: "dp" where the tokens' batch is split, else "tp". */
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        c->axis_name[a] = a == 0 ? "m0" : "m1";
    c->dim = ir_alloc(c->arena, sizeof *c->dim * (size_t)g->ndims);
    ir_dim_sizes(g, p->mb_seqs, c->dim);
    if (!check_plan(c) || !find_inputs(c) || !cg_supported(c))
        return false;
    c->total_rows = g->global_batch * g->dims[g->seq_dim].size;
    for (int i = 0; i < g->nfwd; i++)
        if (g->nodes[i].op == IR_OP_CROSS_ENTROPY) {
            const IrTensor *l = &g->tensors[g->nodes[i].in[0]];
            c->vocab = g->dims[l->dim[l->rank - 1]].size;
        }
    /* Axis names for comments: the first parallel dimension the plan
     * records on each axis (dp, tp before the experts' ep, etp, which fold
     * over them); an axis of size 1 never shows. */
    for (int a = 0; a < c->naxes; a++) {
        c->axis_name[a] = p->mesh.size[a] == 1 ? "unused" : "rep";
        for (int d = 0; d < PLAN_NDIMS; d++)
            if (plan_degree(p, (PlanDim)d) > 1 && p->axis[d] == a) {
                c->axis_name[a] = plan_dim_name((PlanDim)d);
                break;
            }
    }
    int np = g->npieces, nt = g->ntensors, nn = g->nnodes;
    c->piece_stage = ir_alloc(c->arena, sizeof(int) * (size_t)np);
    c->piece_recompute = ir_alloc(c->arena, sizeof(PlanRecompute) * (size_t)np);
    for (int s = 0; s < p->nstages; s++)
        for (int k = 0; k < p->stages[s].npieces; k++) {
            c->piece_stage[p->stages[s].first_piece + k] = s;
            c->piece_recompute[p->stages[s].first_piece + k] = p->stages[s].recompute;
        }
    c->node_stage = ir_alloc(c->arena, sizeof(int) * (size_t)nn);
    c->recomputed = ir_alloc(c->arena, (size_t)nn);
    c->prod = ir_alloc(c->arena, sizeof(PlanSharding) * (size_t)nt);
    c->canon = ir_alloc(c->arena, sizeof(PlanSharding) * (size_t)nt);
    c->gsh = ir_alloc(c->arena, sizeof(PlanSharding) * (size_t)nt);
    c->last_stage = ir_alloc(c->arena, sizeof(int) * (size_t)nt);
    c->saved = ir_alloc(c->arena, (size_t)nt);
    c->is_root = ir_alloc(c->arena, (size_t)nt);
    c->has_grad = ir_alloc(c->arena, (size_t)nt);
    c->param_index = ir_alloc(c->arena, sizeof(int) * (size_t)nt);
    c->seed = -1;
    analyse_tensors(c);
    analyse_params(c);
    /* Every loss adds into g_loss on its ranks, and one copy of it is
     * counted (tr_world_loss): they must share the stage and the copies. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < g->nfwd; i++) {
            if (g->tensors[g->nodes[i].out[0]].role != IR_LOSS || (pass == 0) != (g->nodes[i].out[0] == g->loss))
                continue;
            PlanSharding l = cg_made(c, &g->nodes[i], 0);
            uint8_t mask = 0;
            for (int a = 0; a < c->naxes; a++)
                if (!(l.partial >> a & 1))
                    mask |= (uint8_t)(1u << a);
            if (pass == 1 && (c->node_stage[i] != c->loss_stage || mask != c->loss_count_mask)) {
                ir_error(g->nodes[i].loc, "codegen: this cross_entropy lies on another pipeline stage "
                         "or other ranks than the model's loss; the losses must share them");
                return false;
            }
            c->loss_stage = c->node_stage[i];
            c->loss_count_mask = mask;
        }
    if (c->seed < 0)
        ir_die("codegen: the graph has no backward pass (run pass_autodiff first)");
    return true;
}
