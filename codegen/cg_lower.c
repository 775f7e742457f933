/* cg_lower.c: one pipeline rank's work as typed statements over buffers.
 *
 * Each local chunk (stage) gets two ops, its forward and its backward for one
 * micro-batch, each a list of calls (cg_call.c) that cg_mem.c plans memory
 * from and cg_print.c prints. This file makes the rank's buffers (parameters,
 * gradients, the slots of kept and boundary tensors) and walks each op:
 * forward: receive the boundary activations, load the inputs, run each node
 * (cg_fwd.c), send the boundary; backward: receive the boundary gradients,
 * per piece recompute what the policy dropped, run each backward node
 * (cg_bwd.c, gradients summed by cg_grad.c), send the gradients on; under a
 * split schedule (ZB-H1) the weight-gradient GEMMs go to a third op, W
 * (cg_bwd.c). */
#include "cg_low.h"

#include <stdlib.h>

#include <string.h>

/* ------------------------------------------------------------- the ops */

static void low_begin(Low *L, Cg *c, CgRankProg *r, int chunk, bool bwd)
{
    memset(L, 0, sizeof *L);
    L->c = c;
    L->r = r;
    L->chunk = chunk;
    L->stage = r->stage[chunk];
    L->opi = CG_NOPKINDS * chunk + bwd;
    L->op = &r->ops[L->opi];
    L->op->chunk = chunk;
    L->op->stage = L->stage;
    L->op->bwd = bwd;
    if (bwd && plan_schedule_split(c->p->schedule)) {
        L->wop = CG_OP(r, chunk, PLAN_OP_W);
        L->wop->chunk = chunk;
        L->wop->stage = L->stage;
        L->wop->bwd = PLAN_OP_W;
    }
    L->piece = -1;
    L->gs = ir_alloc(c->arena, sizeof *L->gs * (size_t)c->g->ntensors);
    for (int t = 0; t < c->g->ntensors; t++)
        L->gs[t].recv = L->gs[t].send = L->gs[t].final = L->gs[t].last = -1;
    L->zgrad = ir_alloc(c->arena, sizeof(int) * (size_t)(c->nparams + 1));
    L->plast = ir_alloc(c->arena, sizeof(int) * (size_t)(c->nparams + 1));
    for (int k = 0; k < c->nparams; k++)
        L->zgrad[k] = L->plast[k] = -1;
    L->batched = ir_alloc(c->arena, (size_t)c->g->nnodes + 1);
    memset(L->batched, 0, (size_t)c->g->nnodes + 1);
    L->dw_of = ir_alloc(c->arena, sizeof(int) * (size_t)(c->g->nfwd + 1));
    for (int i = 0; i < c->g->nfwd; i++)
        L->dw_of[i] = -1;
    for (int i = c->g->nfwd; i < c->g->nnodes; i++) {
        const IrNode *b = &c->g->nodes[i];
        if (b->op == IR_OP_MATMUL && b->fwd >= 0 && low_t(L, b->out[0])->role == IR_GRAD &&
            low_t(L, b->out[0])->grad_of == c->g->nodes[b->fwd].in[1])
            L->dw_of[b->fwd] = i;
    }
}

/* Parameters, kept activations, received activations and inputs. */
static void low_avail(Low *L, ChunkBufs *cb)
{
    Cg *c = L->c;
    for (int i = 0; i < cb->slots.n; i++)
        cg_put(L, cb->slots.v[i].t, cb->slots.v[i].sh, cb->slots.v[i].buf, false);
    for (int i = 0; i < L->r->params.n; i++) {
        int k = L->r->params.v[i];
        const CgParamPlan *pp = &c->params[k];
        if (!(pp->zshard && c->p->zero == 3))
            cg_put(L, pp->tensor, pp->store, L->r->pbuf[k], false);
    }
}

/* The message tag of boundary tensor idx after `stage` (grad: its
 * gradient): CG_TAG in model.h, (stage * 64 + idx) * 2 + grad. */
static CgArg tag(Cg *c, int stage, int idx, bool grad)
{
    if (idx >= 64)
        ir_die("codegen: more than 64 tensors cross one pipeline boundary");
    return cg_a_sym(cg_fmt(c, "CG_TAG(%d, %d, %d)", stage, idx, grad));
}

#define PREV_WHAT "pipeline rank of the stage before"
#define NEXT_WHAT "pipeline rank of the stage after"

static CgArg req(Cg *c, const char *name) { return cg_a_sym(cg_fmt(c, "&s->%s", name)); }

static void lower_forward(Cg *c, CgRankProg *r, int j, ChunkBufs *cb)
{
    Low L;
    low_begin(&L, c, r, j, false);
    low_avail(&L, cb);
    const PlanStage *st = &c->p->stages[L.stage];
    int prev = L.stage > 0 ? cg_stage_pp(c, L.stage - 1) : -1;
    int next = L.stage + 1 < c->p->nstages ? cg_stage_pp(c, L.stage + 1) : -1;
    for (int i = 0; i < r->send_act[j].n; i++)
        LOW_CALL(&L, WAIT, req(c, r->send_act[j].v[i].req));
    for (int i = 0; i < r->recv_act[j].n; i++) {
        CgIo *io = &r->recv_act[j].v[i];
        LOW_CALL(&L, RECV, BUF(io->buf), SZ(cg_sz_numel(c, io->tensor, &c->canon[io->tensor])),
                 cg_a_sym("RT_ACT"), cg_a_int("PREV_PP", prev, PREV_WHAT), tag(c, L.stage - 1, i, false));
    }
    /* Inputs: each rank reads its block of the micro-batch (a shift: the
     * block `by` positions further on, the tail past the sequence filled). */
    for (int i = 0; i < cb->slots.n; i++) {
        Avail *a = &cb->slots.v[i];
        if (!cg_is_data(c, a->t))
            continue;
        int64_t by;
        int tail;
        int root = cg_data_root(c, a->t, &by, &tail);
        CgSize loc[2];
        CgArg off[2];
        for (int d = 0; d < 2; d++) {
            loc[d] = cg_sz_sh(c, a->t, &a->sh, d, d + 1);
            off[d] = cg_a_coord_of(&a->sh, low_t(&L, a->t)->dim[d], loc[d]);
        }
        LOW_CALL(&L, LOAD, BUF(a->buf), cg_a_sym(root == c->tokens ? "CG_TOKENS" : "CG_TARGETS"),
                 cg_a_sym("mb"), off[0], SZ(loc[0]), off[1], SZ(loc[1]),
                 cg_a_int(by ? cg_fmt(c, "SHIFT_%lld", (long long)by) : "NO_SHIFT", by, "positions the block is read further on"),
                 cg_a_int(tail ? "FILL_ZERO" : "FILL_NONE", tail ? 0 : -1,
                          "the value past the sequence's end"));
    }
    /* The stage's nodes in order; a fused pair may span two pieces (a
     * layer's last add, the next one's first norm): its call belongs to the
     * norm's piece. */
    const IrPiece *first = &c->g->pieces[st->first_piece], *last = first + st->npieces - 1;
    for (int i = first->first; i < last->first + last->count; i++) {
        const IrNode *n = &c->g->nodes[i];
        if (i + 1 < last->first + last->count) {
            L.piece = n[1].piece;
            if (cg_lower_add_norm(&L, n, n + 1, false, cb)) {
                i++;
                continue;
            }
        }
        L.piece = n->piece;
        if (L.batched[n->id] || cg_lower_gemm_batch(&L, n, false, cb, NULL, 0))
            continue;
        cg_lower_fwd(&L, n, false, cb);
    }
    L.piece = -1;
    for (int i = 0; i < r->send_act[j].n; i++) {
        CgIo *io = &r->send_act[j].v[i];
        LOW_CALL(&L, SEND, req(c, io->req), BUF(io->buf),
                 SZ(cg_sz_numel(c, io->tensor, &c->canon[io->tensor])), cg_a_sym("RT_ACT"),
                 cg_a_int("NEXT_PP", next, NEXT_WHAT), tag(c, L.stage, i, false));
    }
    vec_free(L.av);
}

static void lower_backward(Cg *c, CgRankProg *r, int j, ChunkBufs *cb)
{
    Low L;
    low_begin(&L, c, r, j, true);
    low_avail(&L, cb);
    const IrGraph *g = c->g;
    int s = L.stage;
    int prev = s > 0 ? cg_stage_pp(c, s - 1) : -1;
    int next = s + 1 < c->p->nstages ? cg_stage_pp(c, s + 1) : -1;
    /* Last contribution of each gradient in this stage. */
    for (int i = g->nfwd; i < g->nnodes; i++) {
        const IrNode *b = &g->nodes[i];
        if (c->node_stage[i] != s || pass_is_grad_sum(g, b))
            continue;
        for (int k = 0; k < b->nout; k++) {
            const IrTensor *x = &g->tensors[b->out[k]];
            if (x->role != IR_GRAD)
                continue;
            if (cg_grad_of_act(&L, x->id))
                L.gs[x->grad_of].last = i;
            if (c->param_index[x->grad_of] >= 0)
                L.plast[c->param_index[x->grad_of]] = i;
        }
    }
    cg_wdefer(&L);
    for (int i = 0; i < r->send_grad[j].n; i++) {
        CgIo *io = &r->send_grad[j].v[i];
        LOW_CALL(&L, WAIT, req(c, io->req));
        L.gs[io->tensor].send = io->buf;
    }
    for (int i = 0; i < r->recv_grad[j].n; i++) {
        CgIo *io = &r->recv_grad[j].v[i];
        int t = io->tensor;
        int buf = cg_temp(&L, t, &c->gsh[t], "d_", "_next", "gradient from the next stage");
        LOW_CALL(&L, RECV, BUF(buf), SZ(cg_sz_numel(c, t, &c->gsh[t])), cg_a_sym("RT_ACT"),
                 cg_a_int("NEXT_PP", next, NEXT_WHAT), tag(c, s, i, true));
        L.gs[t].recv = buf;
        if (L.gs[t].last < 0)
            cg_finish_grad(&L, t); /* nothing here adds to it */
    }
    /* Gradients this stage sends but nothing here contributes to. */
    for (int i = 0; i < r->send_grad[j].n; i++) {
        int t = r->send_grad[j].v[i].tensor;
        if (L.gs[t].last < 0 && L.gs[t].final < 0)
            cg_finish_grad(&L, t);
    }
    for (int i = g->nfwd; i < g->nnodes; i++) {
        const IrNode *b = &g->nodes[i];
        if (c->node_stage[i] != s || pass_is_grad_sum(g, b))
            continue;
        int p = g->nodes[b->fwd].piece;
        if (p != L.piece) {
            L.piece = p;
            cg_recompute(&L, p, cb);
        }
        cg_lower_bwd(&L, b);
    }
    L.piece = -1;
    for (int i = 0; i < r->send_grad[j].n; i++) {
        CgIo *io = &r->send_grad[j].v[i];
        if (L.gs[io->tensor].final != io->buf)
            ir_die("codegen: gradient of '%s' is not in its send buffer", g->tensors[io->tensor].name);
        LOW_CALL(&L, SEND, req(c, io->req), BUF(io->buf),
                 SZ(cg_sz_numel(c, io->tensor, &c->gsh[io->tensor])), cg_a_sym("RT_ACT"),
                 cg_a_int("PREV_PP", prev, PREV_WHAT), tag(c, s - 1, i, true));
    }
    if (L.pend.n)
        ir_die("codegen: %d weight-gradient GEMMs left without their batch", L.pend.n);
    vec_free(L.pend);
    vec_free(L.wcopy);
    vec_free(L.av);
    for (int t = 0; t < g->ntensors; t++)
        vec_free(L.gs[t].cls);
}

/* A request field of chunk j's struct, unique in it. */
static const char *request_name(Cg *c, CgRankProg *r, int j, const char *pre, int t)
{
    const char *base = cg_fmt(c, "%s%s", pre, cg_ident(c, cg_short_name(c, t))), *name = base;
    for (int k = 2;; k++) {
        bool used = false;
        for (int i = 0; i < r->send_act[j].n; i++)
            used |= !strcmp(r->send_act[j].v[i].req, name);
        for (int i = 0; i < r->send_grad[j].n; i++)
            used |= !strcmp(r->send_grad[j].v[i].req, name);
        if (!used)
            return name;
        name = cg_fmt(c, "%s_%d", base, k);
    }
}

/* Slot buffers of chunk j: received and kept activations, inputs, and the
 * boundary lists. */
static void chunk_slots(Cg *c, CgRankProg *r, int j, ChunkBufs *cb)
{
    const IrGraph *g = c->g;
    int s = r->stage[j];
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        if (x->producer < 0 || x->producer >= g->nfwd || x->role == IR_LOSS || cg_is_data(c, t))
            continue;
        int ps = c->node_stage[x->producer];
        const char *req = NULL;
        bool recv = ps < s && c->last_stage[t] >= s;
        bool kept = ps == s && c->saved[t];
        if (!recv && !kept)
            continue;
        int buf = cg_buf_new(c, r, CG_B_SLOT, cg_tensor_type(c, t), cg_numel(c, t, &c->canon[t]), t,
                             "", "", cg_fmt(c, "%s%s", cg_shape(c, t, &c->canon[t]),
                                            recv ? ": received from the previous stage" : ""));
        r->bufs.v[buf]->chunk = j;
        vec_push(cb->slots, ((Avail){t, c->canon[t], buf, false}));
        if (recv)
            vec_push(r->recv_act[j], ((CgIo){t, buf, NULL}));
        if (c->last_stage[t] > s) {
            req = request_name(c, r, j, "req_", t);
            vec_push(r->send_act[j], ((CgIo){t, buf, req}));
        }
        if (recv && c->has_grad[t]) {
            int gb = cg_buf_new(c, r, CG_B_SLOT, CG_ACT, cg_numel(c, t, &c->gsh[t]), t, "d_",
                                "_send", cg_fmt(c, "%s: gradient for the previous stage",
                                                cg_shape(c, t, &c->gsh[t])));
            r->bufs.v[gb]->chunk = j;
            const char *greq = request_name(c, r, j, "req_d_", t); /* before vec_push grows n */
            vec_push(r->send_grad[j], ((CgIo){t, gb, greq}));
        }
        if (c->last_stage[t] > s && c->has_grad[t])
            vec_push(r->recv_grad[j], ((CgIo){t, -1, NULL}));
    }
    /* Inputs (and shifts of them), in every sharding this stage's nodes
     * read them. */
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (c->node_stage[i] != s || n->op == IR_OP_SHIFT) /* a shift is read, not run */
            continue;
        for (int k = 0; k < n->nin; k++) {
            int t = n->in[k];
            if (!cg_is_data(c, t))
                continue;
            PlanSharding sh = cg_need(c, n, k);
            bool have = false;
            for (int m = 0; m < cb->slots.n; m++)
                have |= cb->slots.v[m].t == t && plan_sharding_eq(&cb->slots.v[m].sh, &sh);
            if (have)
                continue;
            int buf = cg_buf_new(c, r, CG_B_SLOT, CG_I32, cg_numel(c, t, &sh), t, "", "",
                                 cg_shape(c, t, &sh));
            r->bufs.v[buf]->chunk = j;
            vec_push(cb->slots, ((Avail){t, sh, buf, false}));
        }
    }
}

/* Storage, gradient accumulator and optimizer state of every parameter this
 * pipeline rank holds. */
static void param_bufs(Cg *c, CgRankProg *r)
{
    int np = c->nparams;
    r->pbuf = ir_alloc(c->arena, sizeof(int) * (size_t)(np + 1));
    r->gbuf = ir_alloc(c->arena, sizeof(int) * (size_t)(np + 1));
    r->gsbuf = ir_alloc(c->arena, sizeof(int) * (size_t)(np + 1));
    for (int k = 0; k < np; k++) {
        const CgParamPlan *pp = &c->params[k];
        r->pbuf[k] = r->gbuf[k] = r->gsbuf[k] = -1;
        if (!(pp->ppmask >> r->pp_rank & 1))
            continue;
        vec_push(r->params, k);
        int t = pp->tensor;
        const char *shape = cg_shape(c, t, &pp->store);
        bool z3 = pp->zshard && c->p->zero == 3, z2 = pp->zshard && c->p->zero >= 2;
        r->pbuf[k] = cg_buf_new(c, r, CG_B_PARAM, CG_ACT, z3 ? pp->shard : pp->padded, t, "", "",
                                z3 ? cg_fmt(c, "%s, ZeRO-3 shard of %lld", shape, (long long)pp->shard)
                                   : shape);
        r->gbuf[k] = cg_buf_new(c, r, CG_B_GRAD, CG_GRAD, z2 ? pp->shard : pp->padded, t, "d_", "",
                                z2 ? cg_fmt(c, "gradient, shard of %lld", (long long)pp->shard)
                                   : cg_fmt(c, "%s%s: gradient", shape,
                                            pp->pmask ? " summed per step" : ""));
        if (pp->zshard && c->p->zero == 1)
            r->gsbuf[k] = cg_buf_new(c, r, CG_B_GRAD, CG_GRAD, pp->shard, t, "d_", "_shard",
                                     "reduce-scattered gradient");
    }
}

void cg_lower(Cg *c, CgRankProg *r)
{
    param_bufs(c, r);
    r->ops = ir_alloc(c->arena, sizeof *r->ops * (size_t)CG_NOPS(r));
    memset(r->ops, 0, sizeof *r->ops * (size_t)CG_NOPS(r));
    ChunkBufs *cb = ir_alloc(c->arena, sizeof *cb * (size_t)r->nchunks);
    for (int j = 0; j < r->nchunks; j++)
        chunk_slots(c, r, j, &cb[j]);
    for (int j = 0; j < r->nchunks; j++) {
        lower_forward(c, r, j, &cb[j]);
        lower_backward(c, r, j, &cb[j]);
        for (int o = 0; o < CG_NOPKINDS; o++)
            cg_tp_chunk(c, r, CG_OP(r, j, o));
    }
    for (int j = 0; j < r->nchunks; j++)
        vec_free(cb[j].slots);
}
