/* cg_grad.c: gradient contributions. Contributions to one activation are
 * summed per sharding class (partial sums add before they are reduced, so
 * q, k and v's contributions to their input cost one all-reduce) and
 * completed after the last one: the class sums reduced to the complete
 * gradient's sharding and added, with the gradient received from the next
 * stage. Parameter gradients accumulate straight into their accumulator
 * when the kernel makes them in its sharding (GEMM with beta = 1, dw +=
 * ...), over every micro-batch; under ZeRO-2/3 into a full temporary
 * reduce-scattered into the shard after the op's last contribution. */
#include "cg_low.h"

bool cg_grad_of_param(const Low *L, int v)
{
    const IrTensor *x = low_t(L, v);
    return x->role == IR_GRAD && low_t(L, x->grad_of)->role == IR_PARAM && cg_param_plan(L, x->grad_of);
}

bool cg_grad_of_act(const Low *L, int v)
{
    const IrTensor *x = low_t(L, v);
    return x->role == IR_GRAD && x->producer >= 0 && L->c->has_grad[x->grad_of];
}

/* The buffer a parameter's gradient accumulates into during this op. */
int cg_param_accumulator(Low *L, int t)
{
    Cg *c = L->c;
    int k = c->param_index[t];
    const CgParamPlan *pp = &c->params[k];
    if (!(pp->zshard && c->p->zero >= 2))
        return L->r->gbuf[k];
    if (L->zgrad[k] < 0) {
        PlanSharding g = pp->store;
        g.partial = pp->pmask;
        L->zgrad[k] = cg_temp_of(L, CG_GRAD, t, &g, "d_", "", "gradient of this micro-batch, before reduce-scatter");
        L->r->bufs.v[L->zgrad[k]]->numel = pp->padded;
        LOW_CALL(L, ZERO, BUF(L->zgrad[k]), cg_a_bytes(cg_param_size(c, k, "PADDED"), CG_GRAD));
    }
    return L->zgrad[k];
}

/* Add contribution buf (sharding sh) to parameter t's gradient: made in
 * rt_act (a GEMM or column sum that needs resharding first, in bf16), or
 * in rt_grad by a kernel that only writes gradients (norm, embedding). */
void cg_param_contribution(Low *L, int t, int buf, PlanSharding sh)
{
    Cg *c = L->c;
    const CgParamPlan *pp = cg_param_plan(L, t);
    PlanSharding want = pp->store;
    want.partial = sh.partial & pp->pmask;
    bool f32 = L->r->bufs.v[buf]->type == CG_GRAD;
    if (f32 && plan_reshard(c->g, t, &c->mesh, &sh, &want, c->dim, NULL, 0) > 0)
        ir_die("codegen: the fp32 gradient contribution to '%s' would need a collective",
               low_t(L, t)->name);
    int b = cg_reshard(L, t, "d_", buf, sh, want, true, -1);
    /* Axes the accumulator is partial over but this contribution is not:
     * every rank there holds the whole value, so one of them adds it. */
    uint8_t guard = 0;
    for (int a = 0; a < c->naxes; a++)
        if ((pp->pmask >> a & 1) && !(sh.partial >> a & 1))
            guard |= (uint8_t)(1u << a);
    int acc = cg_param_accumulator(L, t);
    cg_call(c, L->op, L->piece, guard, f32 ? CG_CALL_GRAD_SUM : CG_CALL_GRAD_ADD,
            CG_ARGS(BUF(acc), BUF(b), SZ(cg_sz_numel(c, t, &pp->store))));
}

/* After the op's last contribution to parameter k. ZeRO-2/3 keep only this
 * rank's shard: the shard accumulated so far is added into this rank's block
 * of the micro-batch's gradient, whose reduce-scatter (fp32) then lands in
 * the accumulator itself. Otherwise, when the gradient is reduced over the
 * mesh at the end of the step, the trainer hears that it is complete for
 * this op (cg_grad_ready: after the last micro-batch its bucket's reduction
 * starts, overlapping the rest of the backward). */
static void param_done(Low *L, int k)
{
    Cg *c = L->c;
    const CgParamPlan *pp = &c->params[k];
    int acc = L->r->gbuf[k];
    if (L->zgrad[k] < 0) {
        if (pp->pmask && pp->tied < 0) {
            LOW_CALL(L, GRAD_READY, BUF(acc));
            if (L->op->bwd == PLAN_OP_W)
                vec_push(L->r->wready[L->chunk], k);
            else
                vec_push(L->r->ready[L->chunk], k);
        }
        return;
    }
    CgSize shard = cg_param_size(c, k, "SHARD");
    LOW_CALL(L, GRAD_SUM, cg_a_buf_at(L->zgrad[k], pp->pmask, shard), BUF(acc), SZ(shard));
    LOW_CALL(L, REDUCE_SCATTER, cg_a_comm(pp->pmask), BUF(acc), BUF(L->zgrad[k]), SZ(shard),
             cg_a_sym("RT_F32"));
}

/* The running sum of t's gradient contributions in layout sh, NULL. */
Class *cg_act_class(Low *L, int t, const PlanSharding *sh)
{
    GradState *g = &L->gs[t];
    for (int i = 0; i < g->cls.n; i++)
        if (plan_sharding_eq(&g->cls.v[i].sh, sh))
            return &g->cls.v[i];
    return NULL;
}

/* Whether backward node b adds its output j into the sum k of the
 * contributions made so far itself, instead of writing a temporary an rt_add
 * then adds (IR_OPF_GRAD_SUM on its forward op; the cost model's
 * grad_sum_cost follows the same rule): a GEMM with beta = 1 into a sum this
 * op owns, a norm's backward reading the sum as dres (into it if owned, else
 * into a new sum). */
bool cg_sums_in_kernel(Low *L, const IrNode *b, int j, const Class *k)
{
    if (!k || b->fwd < 0 || !(ir_ops[L->c->g->nodes[b->fwd].op].flags & IR_OPF_GRAD_SUM) ||
        L->r->bufs.v[k->buf]->type != cg_tensor_type(L->c, b->out[j]))
        return false;
    if (b->op == IR_OP_MATMUL)
        return k->priv;
    return j == 0 && (b->op == IR_OP_RMSNORM_BWD || b->op == IR_OP_LAYERNORM_BWD);
}

void cg_act_contribution(Low *L, int t, int buf, PlanSharding sh, bool priv)
{
    GradState *g = &L->gs[t];
    for (int i = 0; i < g->cls.n; i++) {
        Class *k = &g->cls.v[i];
        if (!plan_sharding_eq(&k->sh, &sh))
            continue;
        CgSize n = cg_sz_numel(L->c, t, &sh);
        if (!k->priv) {
            int acc = cg_temp(L, t, &sh, "d_", "_acc", "sum of gradient contributions");
            LOW_CALL(L, ADD, BUF(acc), BUF(k->buf), BUF(buf), SZ(n), SZ(n));
            k->buf = acc;
            k->priv = true;
        } else {
            LOW_CALL(L, ADD, BUF(k->buf), BUF(k->buf), BUF(buf), SZ(n), SZ(n));
        }
        return;
    }
    vec_push(g->cls, ((Class){sh, buf, priv}));
}

/* The complete gradient of t on this stage: class sums reduced to gsh[t],
 * plus what the next stage sent; into the send buffer if it goes on. */
void cg_finish_grad(Low *L, int t)
{
    Cg *c = L->c;
    GradState *g = &L->gs[t];
    PlanSharding want = c->gsh[t];
    CgSize n = cg_sz_numel(c, t, &want);
    int terms[64], nt = 0;
    if (g->cls.n == 1 && g->recv < 0 && g->send >= 0) {
        g->final = cg_reshard(L, t, "d_", g->cls.v[0].buf, g->cls.v[0].sh, want, g->cls.v[0].priv, g->send);
        return;
    }
    bool owned = g->cls.n != 1 || g->recv >= 0 || g->cls.v[0].priv;
    for (int i = 0; i < g->cls.n && nt < 63; i++)
        terms[nt++] = cg_reshard(L, t, "d_", g->cls.v[i].buf, g->cls.v[i].sh, want, g->cls.v[i].priv, -1);
    if (g->recv >= 0)
        terms[nt++] = g->recv;
    int out = g->send;
    if (nt == 0) {
        if (out < 0)
            out = cg_temp(L, t, &want, "d_", "", "gradient (nothing contributes)");
        LOW_CALL(L, ZERO, BUF(out), cg_a_bytes(n, CG_ACT));
    } else if (nt == 1) {
        if (out >= 0)
            LOW_CALL(L, COPY, BUF(out), BUF(terms[0]), cg_a_bytes(n, CG_ACT));
        else
            out = terms[0];
    } else {
        if (out < 0)
            out = cg_temp(L, t, &want, "d_", "", "gradient");
        LOW_CALL(L, ADD, BUF(out), BUF(terms[0]), BUF(terms[1]), SZ(n), SZ(n));
        for (int i = 2; i < nt; i++)
            LOW_CALL(L, ADD, BUF(out), BUF(out), BUF(terms[i]), SZ(n), SZ(n));
    }
    g->final = out;
    if (owned && out != g->send && out != g->recv) {
        /* Whatever made it, the complete gradient of t is called d_<t>. */
        CgBuf *b = L->r->bufs.v[out];
        b->tensor = t;
        b->pre = "d_";
        b->suf = "";
        b->comment = cg_fmt(c, "%s: gradient", cg_shape(c, t, &want));
    }
}

/* After backward node b's kernel: gradients it completed, of activations
 * (what: 1), parameters (2) or both (3: cg_bwd_done). */
void cg_bwd_done_of(Low *L, const IrNode *b, int what)
{
    for (int j = 0; j < b->nout; j++) {
        const IrTensor *x = low_t(L, b->out[j]);
        if (x->role != IR_GRAD)
            continue;
        if ((what & 1) && cg_grad_of_act(L, b->out[j]) && L->gs[x->grad_of].last == b->id)
            cg_finish_grad(L, x->grad_of);
        int k = L->c->param_index[x->grad_of];
        if ((what & 2) && k >= 0 && L->plast[k] == b->id)
            param_done(L, k);
    }
}

void cg_bwd_done(Low *L, const IrNode *b) { cg_bwd_done_of(L, b, 3); }
