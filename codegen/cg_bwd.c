/* cg_bwd.c: backward nodes. Inputs are forward values (cg_get), complete
 * gradients (cg_finish_grad) or backward intermediates; each output goes
 * where it is summed: into the class sum of the contributions so far (the
 * kernel adds), over the forward tensor it differentiates, straight into a
 * parameter's accumulator, or into a temporary cg_grad.c then adds.
 *
 * Under a split schedule (ZB-H1) the weight-gradient GEMMs adding straight
 * into their accumulators leave the backward (B) for the chunk's W op: B
 * copies what each reads (the GEMM's input and its output's gradient, as the
 * GEMM reads them) into W slots, and the GEMM, with what completes its
 * parameter (cg_bwd_done: cg_grad_ready, ZeRO-2/3's reduce-scatter), runs in
 * W from the copies. An MoE layer's experts split the same way (Megatron-
 * Core's delayed wgrad of its grouped GEMMs): B, rt_moe_act_bwd_b, makes the
 * routed rows, their output gradients, the activation and the first GEMMs'
 * gradients in the layer's W slot (sized for the rank's expected rows:
 * plan_moe_wslot_rows; a micro-batch routing more runs its dW GEMMs in B,
 * into the accumulators B is given) and W, rt_moe_act_bwd_w, runs every
 * expert's dW GEMMs and bias sums from it. A parameter with any other
 * contribution in the op (a norm's weight, made by the kernel that makes its
 * input gradient; an FP8 GEMM, whose scales belong to B's casts) keeps all of
 * them in B, as the cost model's W counts only the GEMMs' (passes/cost/
 * predict.c, dw: gemm_dw_s and moe_dw_s). */
#include "cg_low.h"

#include <string.h>

static bool identity_reduce(const Low *L, const IrNode *b)
{
    return b->op == IR_OP_REDUCE_SUM && low_t(L, b->in[0])->rank == low_t(L, b->out[0])->rank;
}

/* The buffer of backward input u in sharding need. */
static int bwd_input(Low *L, int u, PlanSharding need)
{
    Cg *c = L->c;
    const IrTensor *x = low_t(L, u);
    if (x->role == IR_GRAD) {
        GradState *g = &L->gs[x->grad_of];
        if (g->final < 0)
            ir_die("codegen: gradient of '%s' read before it is complete", low_t(L, x->grad_of)->name);
        int b = cg_reshard(L, x->grad_of, "d_", g->final, c->gsh[x->grad_of], need, false, -1);
        return b;
    }
    if (x->producer >= L->c->g->nfwd) { /* a backward intermediate (MUL's broadcast rule) */
        PlanSharding made = c->prod[u];
        Avail *a = cg_find(L, u, &made);
        if (!a)
            ir_die("codegen: '%s' read before it is made", x->name);
        return cg_reshard(L, u, "", a->buf, made, need, false, -1);
    }
    return cg_get(L, u, need);
}

/* Whether backward node b writes its first output over input 0's buffer
 * inb: the forward op allows it, the graph lets it (nothing reads the input
 * afterwards), and the buffer has the gradient's layout and type. */
static bool grad_over_input(Low *L, const IrNode *b, int inb)
{
    Cg *c = L->c;
    const IrGraph *g = L->c->g;
    int t = b->in[0], v = b->out[0];
    if (inb < 0 || b->fwd < 0 || !(ir_ops[g->nodes[b->fwd].op].flags & IR_OPF_GRAD_IN_PLACE))
        return false;
    if (!cg_grad_of_act(L, v) || low_t(L, v)->grad_of != t || !ir_grad_in_place(g, t))
        return false;
    PlanSharding need = cg_need(c, b, 0), made = cg_made(c, b, 0);
    return plan_sharding_eq(&need, &made) && L->r->bufs.v[inb]->type == cg_tensor_type(c, v);
}

/* Whether output j of backward node b is a parameter's gradient made in its
 * accumulator's layout (lower_bwd's `direct`): added straight into it. */
static bool out_direct(const Low *L, const IrNode *b, int j)
{
    int v = b->out[j];
    if (!cg_grad_of_param(L, v))
        return false;
    const CgParamPlan *pp = cg_param_plan(L, low_t(L, v)->grad_of);
    PlanSharding made = cg_made(L->c, b, j), want = pp->store;
    want.partial = pp->pmask;
    return plan_sharding_eq(&made, &want);
}

/* Whether backward node b is a MATMUL adding its weight's gradient straight
 * into the accumulator, so nothing but bwd_done follows its GEMM. */
static bool dw_direct(const Low *L, const IrNode *b)
{
    return b->op == IR_OP_MATMUL && out_direct(L, b, 0);
}

/* Whether MoE backward b can leave its experts' gradients (outputs 2..) to
 * W: each added straight into its accumulator. */
static bool moe_deferrable(const Low *L, const IrNode *b)
{
    if (b->op != IR_OP_MOE_BWD)
        return false;
    for (int j = 2; j < b->nout; j++)
        if (!out_direct(L, b, j))
            return false;
    return true;
}

/* The weight gradients of GEMMs the forward batched (lower_gemm_batch) as
 * one rt_matmul_grad_batch, issued at the last of them in backward order
 * (q's, after v's and k's): the earlier ones wait in L->pend, their inputs
 * (the layer's input, the outputs' gradients) kept live by the later
 * reference. Only where every one adds straight into its accumulator, so
 * their bookkeeping (bwd_done: ZeRO-2's reduce-scatter, the bucket's
 * readiness) moves with them. Whether b was taken (queued or issued). */
static bool dw_batch(Low *L, const IrNode *b, const CgArgs *a, bool direct)
{
    const IrGraph *g = L->c->g;
    if (!direct || b->fwd < 0 || b->op != IR_OP_MATMUL || L->dw_of[b->fwd] != b->id || cg_gemm_fp8(L->c, b))
        return false;
    int ids[PLAN_GEMM_BATCH_MAX];
    int k = plan_gemm_batch(g, &g->nodes[b->fwd], L->c->p->strategy, ids), last = -1;
    if (k < 2)
        return false;
    for (int i = 0; i < k; i++) {
        int d = L->dw_of[ids[i]];
        if (d < 0 || L->c->node_stage[d] != L->stage || !dw_direct(L, &g->nodes[d]))
            return false;
        if (L->wop && L->wdefer[L->c->param_index[g->nodes[b->fwd].in[1]]] !=
                          L->wdefer[L->c->param_index[g->nodes[ids[i]].in[1]]])
            return false; /* one batch, one op */
        last = d > last ? d : last;
    }
    vec_push(L->pend, ((Pend){b, *a}));
    if (b->id != last)
        return true;
    const IrNode *m[PLAN_GEMM_BATCH_MAX];
    CgArgs args[PLAN_GEMM_BATCH_MAX];
    for (int i = 0; i < k; i++) { /* in the forward's order */
        int j = 0;
        while (j < L->pend.n && L->pend.v[j].b->id != L->dw_of[ids[i]])
            j++;
        if (j == L->pend.n)
            ir_die("codegen: weight gradient of node %d not queued for its batch", ids[i]);
        m[i] = L->pend.v[j].b;
        args[i] = L->pend.v[j].a;
        L->pend.v[j] = L->pend.v[--L->pend.n];
    }
    cg_kernel_batch(L->c, L->op, L->piece, m, args, k);
    for (int i = 0; i < k; i++)
        cg_bwd_done(L, m[i]);
    return true;
}

/* A weight-gradient GEMM W can run: in the accumulator's layout, not FP8. */
static bool dw_deferrable(const Low *L, const IrNode *b)
{
    return b->op == IR_OP_MATMUL && b->nout == 1 && cg_grad_of_param(L, b->out[0]) && dw_direct(L, b) &&
           !cg_gemm_fp8(L->c, b);
}

void cg_wdefer(Low *L)
{
    if (!L->wop)
        return;
    Cg *c = L->c;
    const IrGraph *g = c->g;
    L->wdefer = ir_alloc(c->arena, (size_t)c->nparams + 1);
    bool *other = ir_alloc(c->arena, (size_t)c->nparams + 1);
    for (int i = g->nfwd; i < g->nnodes; i++) {
        const IrNode *b = &g->nodes[i];
        if (c->node_stage[i] != L->stage || pass_is_grad_sum(g, b))
            continue;
        bool d = dw_deferrable(L, b) || moe_deferrable(L, b);
        for (int j = 0; j < b->nout; j++) {
            const IrTensor *x = low_t(L, b->out[j]);
            int k = x->role == IR_GRAD && x->grad_of >= 0 ? c->param_index[x->grad_of] : -1;
            if (k < 0)
                continue;
            if (d)
                L->wdefer[k] = true;
            else
                other[k] = true;
        }
    }
    for (int k = 0; k < c->nparams; k++)
        L->wdefer[k] &= !other[k];
}

/* Buffer src, input k of the deferred GEMM b, as W reads it: a copy in a W
 * slot made now (once per buffer per op: q, k and v read one input). */
static int wslot_copy(Low *L, const IrNode *b, int k, int src)
{
    Cg *c = L->c;
    CgRankProg *r = L->r;
    const CgBuf *sb = r->bufs.v[src];
    if (sb->kind == CG_B_PARAM || sb->kind == CG_B_GRAD)
        return src;
    for (int i = 0; i < L->wcopy.n; i += 2)
        if (L->wcopy.v[i] == src)
            return L->wcopy.v[i + 1];
    int t = b->in[k];
    PlanSharding sh = cg_need(c, b, k);
    int w = cg_buf_new(c, r, CG_B_WSLOT, sb->type, sb->numel, sb->tensor, sb->pre, cg_fmt(c, "%s_w", sb->suf),
                       cg_fmt(c, "%s: kept for the weight gradients (W)", cg_shape(c, t, &sh)));
    r->bufs.v[w]->chunk = L->chunk;
    r->bufs.v[w]->name = sb->name;
    LOW_CALL(L, COPY, BUF(w), BUF(src), cg_a_bytes(cg_sz_numel(c, t, &sh), sb->type));
    vec_push(L->wcopy, src);
    vec_push(L->wcopy, w);
    return w;
}

static void lower_node(Low *L, const IrNode *b);

void cg_lower_bwd(Low *L, const IrNode *b)
{
    CgOp *op = L->op; /* a deferred GEMM moves L->op to W */
    lower_node(L, b);
    L->op = op;
}

static void lower_node(Low *L, const IrNode *b)
{
    Cg *c = L->c;
    if (pass_is_grad_sum(L->c->g, b))
        return; /* contributions are summed per stage by act_contribution */
    int v0 = b->out[0];
    if (identity_reduce(L, b) && !cg_grad_of_param(L, v0)) {
        /* REDUCE_SUM over nothing: the same buffer. */
        PlanSharding need = cg_need(c, b, 0), made = cg_made(c, b, 0);
        int buf = bwd_input(L, b->in[0], need);
        if (cg_grad_of_act(L, v0))
            cg_act_contribution(L, low_t(L, v0)->grad_of, buf, made, false);
        else
            cg_put(L, v0, made, buf, false);
        goto done;
    }
    CgArgs a;
    memset(&a, 0, sizeof a);
    int inb[IR_MAX_IN];
    for (int k = 0; k < b->nin; k++) {
        /* a loss's seed: 1 times the loss's weight (a multi-token prediction loss's) */
        const IrTensor *u = low_t(L, b->in[k]);
        bool seed = u->role == IR_GRAD && u->producer < 0;
        inb[k] = seed ? -1 : bwd_input(L, b->in[k], cg_need(c, b, k));
        a.in[k] = inb[k] < 0 ? cg_a_flt(c, ir_loss_weight(&c->g->nodes[b->fwd].attr)) : BUF(inb[k]);
    }
    if (L->wop && b->op == IR_OP_MATMUL && cg_grad_of_param(L, v0) &&
        L->wdefer[c->param_index[low_t(L, v0)->grad_of]]) {
        for (int k = 0; k < b->nin; k++)
            if (inb[k] >= 0)
                a.in[k] = BUF(inb[k] = wslot_copy(L, b, k, inb[k]));
        L->op = L->wop; /* the GEMM and its parameter's completion */
    }
    /* An MoE layer whose experts' gradients all wait for W */
    bool wmoe = L->wop && moe_deferrable(L, b);
    for (int j = 2; wmoe && j < b->nout; j++)
        wmoe = L->wdefer[c->param_index[low_t(L, b->out[j])->grad_of]];
    int out[IR_MAX_OUT];
    bool direct[IR_MAX_OUT], over[IR_MAX_OUT], summed[IR_MAX_OUT];
    for (int j = 0; j < b->nout; j++) {
        int v = b->out[j];
        PlanSharding made = cg_made(c, b, j);
        direct[j] = over[j] = summed[j] = false;
        Class *k = cg_grad_of_act(L, v) ? cg_act_class(L, low_t(L, v)->grad_of, &made) : NULL;
        if (cg_sums_in_kernel(L, b, j, k)) {
            /* Into the sum of the contributions made so far. */
            summed[j] = true;
            if (b->op == IR_OP_MATMUL) {
                out[j] = k->buf;
                a.accumulate = true;
            } else {
                a.has_addend = true;
                a.addend = BUF(k->buf);
                out[j] = k->priv ? k->buf
                                 : cg_temp(L, low_t(L, v)->grad_of, &made, "d_", "_acc",
                                        "sum of gradient contributions");
                k->buf = out[j];
                k->priv = true;
            }
        } else if (j == 0 && grad_over_input(L, b, inb[0])) {
            /* The gradient over the forward tensor it differentiates
             * (ir_grad_in_place): the logits are dead once dlogits exists. */
            out[j] = inb[0];
            over[j] = true;
        } else if (cg_grad_of_param(L, v)) {
            const CgParamPlan *pp = cg_param_plan(L, low_t(L, v)->grad_of);
            bool native = cg_kernel_accumulates(b, j) || b->op == IR_OP_MATMUL ||
                          b->op == IR_OP_REDUCE_SUM;
            PlanSharding want = pp->store;
            want.partial = pp->pmask;
            if (native && plan_sharding_eq(&made, &want)) {
                CgOp *op = L->op; /* a deferred MoE's: made in W (ZeRO-2/3's temporary) */
                L->op = wmoe ? L->wop : op;
                out[j] = cg_param_accumulator(L, low_t(L, v)->grad_of);
                L->op = op;
                direct[j] = true;
                a.accumulate = true;
                a.grad_out = true;
            } else if (cg_kernel_accumulates(b, j)) { /* these kernels write rt_grad */
                out[j] = cg_temp_of(L, CG_GRAD, v, &made, "", "", "gradient contribution");
                LOW_CALL(L, ZERO, BUF(out[j]), cg_a_bytes(cg_sz_numel(c, v, &made), CG_GRAD));
            } else {
                out[j] = cg_temp(L, v, &made, "", "", "gradient contribution");
            }
        } else {
            out[j] = cg_temp(L, v, &made, "", "", cg_grad_of_act(L, v) ? NULL : "unused");
            if (cg_kernel_accumulates(b, j))
                LOW_CALL(L, ZERO, BUF(out[j]), cg_a_bytes(cg_sz_numel(c, v, &made), CG_ACT));
        }
        a.out[j] = BUF(out[j]);
    }
    if (over[0])
        cg_comment(c, L->op, L->piece, cg_fmt(c, "the gradient of %s written over it: nothing reads %s after this",
                                              low_t(L, b->in[0])->name, low_t(L, b->in[0])->name));
    if (dw_batch(L, b, &a, direct[0]))
        return; /* issued with its batch, bookkeeping included */
    if (wmoe) { /* B: the input gradients, W's operands made in its slot */
        int w = cg_buf_new(c, L->r, CG_B_WSLOT, CG_ACT, cg_moe_wslot(c, L->op, L->piece, b), b->in[0], "",
                           "_wrows", "the experts' routed rows, output gradients, activation and first GEMMs' "
                                     "gradients, kept for their weight gradients (W)");
        L->r->bufs.v[w]->chunk = L->chunk;
        a.wslot = BUF(w);
        a.wpart = 1;
    }
    cg_kernel(c, L->op, L->piece, b, &a);
    for (int j = 0; j < b->nout; j++) {
        int v = b->out[j];
        PlanSharding made = cg_made(c, b, j);
        if (cg_grad_of_param(L, v)) {
            if (!direct[j])
                cg_param_contribution(L, low_t(L, v)->grad_of, out[j], made);
        } else if (cg_grad_of_act(L, v) && !summed[j]) {
            /* Over the input: not this op's own buffer, so never summed into or renamed. */
            cg_act_contribution(L, low_t(L, v)->grad_of, out[j], made, !over[j]);
        } else if (low_t(L, v)->role != IR_GRAD) {
            cg_put(L, v, made, out[j], true);
        }
    }
    if (wmoe) { /* W: the experts' weight gradients from the slot, and what completes them */
        cg_bwd_done_of(L, b, 1);
        L->op = L->wop;
        a.wpart = 2;
        cg_kernel(c, L->op, L->piece, b, &a);
        cg_bwd_done_of(L, b, 2);
        return;
    }
done:
    cg_bwd_done(L, b);
}

