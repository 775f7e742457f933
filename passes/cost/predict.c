/* predict.c: a whole plan's step time, throughput and memory.
 *
 * Per pipeline stage and micro-batch: node costs (pass_cost_node), the
 * resharding collectives on every edge forward and backward (plan_reshard;
 * consumers that read the same tensor in the same layout share one, and
 * gradient contributions of the same layout are summed before one
 * reduction), pipeline transfers between stages, and recomputation. Stages
 * combine under the schedule: 1F1B takes (m - 1) times the slowest pipeline
 * rank plus the sum of all ranks (fill and drain); interleaved divides the
 * fill and drain by v. The data-parallel gradient traffic overlaps the
 * backward of the last micro-batch (and the slack later ranks have); what
 * does not fit is exposed, as is the optimizer step.
 *
 * Memory per pipeline rank: model states of the parameters it owns, the
 * activations of the micro-batches in flight under the schedule, the layer
 * being recomputed, the largest backward working set, buffers and runtime.
 *
 * Layers with the same strategies cost the same: each piece is compared
 * with the last one costed and reuses its numbers, so a 100-layer model
 * costs a few layers; a search ranking many plans also hands in the pieces'
 * costs of the plans before (PassPredictCut.pieces, piece_memo.c), keyed by
 * everything a piece's cost reads (piece_reach, piece_key). */
#include "cost/cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct PieceCost {
    double fwd, bwd, rec;         /* s per micro-batch: kernels, and recompute in backward */
    double rs_f, rs_b, p2p_f, p2p_b;
    double flops, rec_flops;      /* per micro-batch */
    double saved, extra_ws;       /* kept bytes; extra bytes alive while recomputing it */
    double w, gr, op;             /* model states */
    double sync_step, sync_mb;    /* link seconds per step / per micro-batch */
    double sync_gather;           /* of sync_step: ZeRO-1/2's all-gather after the optimizer */
    double lat_red, lat_gather;   /* of sync_step: the latency of the per-tensor reductions and
                                     all-gathers (pass_param_sync_lat) */
    int nsync;                    /* parameter tensors those are for */
    double transient;             /* largest backward working set of one node */
    double shard_elems;           /* optimizer shard elements */
    double grad_elems;            /* gradient elements reduced over a data-parallel group */
    double full_w;                /* weights before ZeRO-3 sharding (gathered working set) */
    double full_g;                /* gradients before sharding (a reduce-scatter's input) */
    double step_s;                /* ptdc: kernels once per step (zero grads, norm, AdamW) */
    double mb_extra;              /* ptdc, ZeRO 2/3: kernels per micro-batch around each
                                     gradient's reduce-scatter */
    double host_s;                /* host work per micro-batch: loading input tokens */
    PassHostCost host;            /* the host's dispatching and launching, and its syncs */
    double gemm, attn;            /* of fwd + bwd: GEMMs, flash attention */
    double cast;                  /* of fwd + bwd: low-precision casts and amax reductions */
    double a2a;                   /* of fwd + bwd: MoE all-to-all exchanges */
    double a2a_f;                 /* of a2a: the forward's */
    double moe_f, moe_b, moe_dw;  /* of fwd, bwd: the exchanging MoE layers' experts (their
                                     all-to-alls apart), and of moe_b the weight gradients */
    int group_f, group_b;         /* largest group a forward / backward collective spans */
    double ub_bytes;              /* tp_overlap userbuffers: the largest gathered input */
    double dw;                    /* of bwd: the parameters' weight-gradient GEMMs (dense and
                                     experts'), a split schedule's W */
    double wsaved;                /* bytes those GEMMs read: inputs and output gradients */
} PieceCost;

typedef struct Ctx {
    const PassCostCtx *c;
    const IrGraph *g;
    const Plan *p;
    int64_t *ds;                  /* dim sizes at the plan's micro-batch */
    int *stage_of;                /* piece -> stage */
    bool *over;                   /* tensor -> its gradient is written over it */
    bool a2a;                     /* the expert all-to-all overlap runs (a2a_overlap.c): the
                                     host launches its schedule nodes (host.c) */
} Ctx;

static const PlanStrategy *strat(const Ctx *x, int node) { return &x->p->strategy[node]; }

static bool strat_eq(const PlanStrategy *a, const PlanStrategy *b)
{
    return a->dim[0] == b->dim[0] && a->dim[1] == b->dim[1];
}

/* The resharding's time; *group: the largest group it synchronises;
 * *agrs (may be NULL): the group of its steps when they are all-gathers
 * and reduce-scatters, what a GEMM can consume or produce chunk by chunk
 * (tp_overlap); 0 otherwise (an all-reduce, an all-to-all, a slice). */
static double coll_time(const Ctx *x, int t, const PlanSharding *from, const PlanSharding *to, int *group,
                        int *agrs, double *launches)
{
    PlanColl steps[8];
    int k = plan_reshard(x->g, t, &x->p->mesh, from, to, x->ds, steps, 8);
    double s = 0;
    int eb = pass_elem_bytes(x->c, x->g->tensors[t].dtype), pg = 0;
    bool pairs = k > 0;
    for (int i = 0; i < k; i++) {
        double ti = pass_cost_coll(x->c, &x->p->mesh, &steps[i], eb);
        s += ti;
        *launches += ti > 0; /* one collective the host launches */
        bool ax = steps[i].axis >= 0 && steps[i].axis < x->p->mesh.naxes;
        if (ti > 0 && steps[i].kind != PLAN_COLL_SLICE && steps[i].kind != PLAN_COLL_SENDRECV && ax &&
            x->p->mesh.size[steps[i].axis] > *group)
            *group = x->p->mesh.size[steps[i].axis];
        if ((steps[i].kind == PLAN_COLL_ALLGATHER || steps[i].kind == PLAN_COLL_REDUCESCATTER) && ax)
            pg = pg > x->p->mesh.size[steps[i].axis] ? pg : x->p->mesh.size[steps[i].axis];
        else if (ti > 0)
            pairs = false;
    }
    if (agrs)
        *agrs = pairs ? pg : 0;
    return s;
}

/* The GEMM seconds (forward, input gradient, weight gradient) of the
 * matmuls of the piece that read t in layout `lay`: the GEMMs a transfer of
 * t can run beside (q, k, v share one gather of their input, and the sum of
 * their input gradients one reduce-scatter). */
static void reader_gemms(const Ctx *x, const PassNodeCost *ncs, int piece, int t, const PlanSharding *lay,
                         double out[3])
{
    const IrGraph *g = x->g;
    const IrPiece *P = &g->pieces[piece];
    out[0] = out[1] = out[2] = 0;
    for (int j = P->first; j < P->first + P->count; j++) {
        const IrNode *o = &g->nodes[j];
        if (o->op != IR_OP_MATMUL)
            continue;
        PlanSharding in[IR_MAX_IN];
        plan_shard_io(g, o, strat(x, j), in, NULL);
        for (int i = 0; i < o->nin; i++)
            if (o->in[i] == t && plan_sharding_eq(&in[i], lay)) {
                const PassNodeCost *nc = &ncs[j - P->first];
                out[0] += nc->gemm_fwd_s, out[1] += nc->gemm_dx_s, out[2] += nc->gemm_dw_s;
                break;
            }
    }
}

/* The node cost of t's producer when it is a matmul of this piece, else NULL. */
static const PassNodeCost *producer_gemm(const Ctx *x, const PassNodeCost *ncs, int piece, int t)
{
    const IrGraph *g = x->g;
    int p = g->tensors[t].producer;
    if (p < 0 || g->nodes[p].piece != piece || g->nodes[p].op != IR_OP_MATMUL)
        return NULL;
    return &ncs[p - g->pieces[piece].first];
}

static PlanSharding out_sharding(const Ctx *x, int t)
{
    const IrGraph *g = x->g;
    int pid = g->tensors[t].producer;
    const IrNode *pn = &g->nodes[pid];
    PlanSharding out[IR_MAX_OUT];
    plan_shard_io(g, pn, strat(x, pid), NULL, out);
    for (int j = 0; j < pn->nout; j++)
        if (pn->out[j] == t)
            return out[j];
    ir_die("tensor %s is not an output of its producer", g->tensors[t].name);
}

/* Did an earlier consumer of t in the same stage need it in layout `to`
 * (forward) or return its gradient in layout `gto` (backward)? */
static void shared_edges(const Ctx *x, const IrNode *n, int t, const PlanSharding *to,
                         const PlanSharding *gto, bool *fwd_shared, bool *bwd_shared)
{
    const IrGraph *g = x->g;
    *fwd_shared = *bwd_shared = false;
    int st = x->stage_of[n->piece];
    for (int j = g->tensors[t].producer + 1; j < n->id; j++) {
        const IrNode *o = &g->nodes[j];
        if (x->stage_of[o->piece] != st)
            continue;
        for (int i = 0; i < o->nin; i++) {
            if (o->in[i] != t)
                continue;
            PlanSharding in[IR_MAX_IN];
            plan_shard_io(g, o, strat(x, j), in, NULL);
            PlanSharding gi = plan_shard_grad_in(g, o, strat(x, j), i);
            *fwd_shared |= plan_sharding_eq(&in[i], to);
            *bwd_shared |= plan_sharding_eq(&gi, gto);
        }
    }
}

/* Bytes n keeps under r in the layouts the programs keep them (pass_kept_bytes). */
static double kept_bytes(const Ctx *x, const IrNode *n, PlanRecompute r, double *regather)
{
    return pass_kept_bytes(x->c, x->g, &x->p->mesh, x->p->strategy, x->ds, n, r, false, regather);
}

/* What cost_piece's steps share while they walk one piece. */
typedef struct PieceWalk {
    const Ctx *x;
    int piece;
    PlanRecompute r;
    PassNodeCost *ncs;            /* every node's cost, by its place in the piece */
    PassTpOverlap ov;             /* the stack's tensor-parallel overlap */
    double sd;                    /* the device's overlap slowdown */
    double saved_none;            /* kept bytes without recomputation */
    double *colls;                /* by place in the piece: collectives launched on its
                                     input edges, forward and backward (host.c) */
} PieceWalk;

/* Every node's cost first: a transfer on one edge may run beside the GEMMs
 * of later nodes (tp_overlap). */
static PassNodeCost *node_costs(const Ctx *x, int piece)
{
    const IrGraph *g = x->g;
    const IrPiece *P = &g->pieces[piece];
    PassNodeCost *ncs = ir_xcalloc((size_t)P->count + 1, sizeof *ncs);
    for (int id = P->first; id < P->first + P->count; id++) {
        const IrNode *n = &g->nodes[id];
        PassNodeCost *nc = &ncs[id - P->first];
        pass_cost_node(x->c, g, n, &x->p->mesh, strat(x, id), x->ds, nc);
        /* A norm priced fused with the add before it runs alone after a
         * stage cut, or where the two layouts differ. */
        if (nc->fused_s != 0 && (x->stage_of[g->nodes[n->id - 1].piece] != x->stage_of[piece] ||
                                 !plan_add_norm_fused(g, n, x->p->strategy)))
            nc->fwd_s -= nc->fused_s, nc->fused_s = 0;
    }
    return ncs;
}

/* n's kernels: forward, backward and, when n is recomputed, its forward
 * again in the backward. */
static void node_kernels(const PieceWalk *w, const IrNode *n, const PassNodeCost *nc, bool rec, PieceCost *pc)
{
    pc->fwd += nc->fwd_s;
    pc->bwd += nc->bwd_s;
    if (n->op == IR_OP_MATMUL && w->x->g->tensors[n->in[1]].role == IR_PARAM)
        pc->dw += nc->gemm_dw_s; /* (not attention's dK, dV: not a weight's) */
    pc->dw += nc->moe_dw_s;
    pc->gemm += nc->gemm_s;
    pc->attn += nc->attn_s;
    pc->cast += nc->cast_s;
    pc->a2a += nc->a2a_s;
    if (nc->a2a_s > 0) { /* an MoE layer exchanging its rows (a2a_overlap.c) */
        pc->a2a_f += nc->a2a_fwd_s;
        pc->moe_f += nc->fwd_s - nc->a2a_fwd_s;
        pc->moe_b += nc->bwd_s - (nc->a2a_s - nc->a2a_fwd_s);
        pc->moe_dw += nc->moe_dw_s;
    }
    pc->flops += nc->flops_fwd + nc->flops_bwd;
    if (rec) {
        pc->rec += pass_rec_fwd_s(w->x->c, w->x->g, n, w->r, nc);
        pc->rec_flops += nc->flops_fwd;
    }
    if (!rec && plan_recomputes_part(w->x->g, n, w->r))
        pc->rec += nc->act_fwd_s; /* moe_act */
}

/* The bytes n keeps for its backward, and the input kept sequence-sharded
 * that is gathered again for the weight gradient, beside the input-gradient
 * GEMM (bulk). */
static void node_saved(PieceWalk *w, const IrNode *n, const PlanSharding *in, PieceCost *pc)
{
    const Ctx *x = w->x;
    double regather, regather_none;
    double sv = kept_bytes(x, n, w->r, &regather);
    pc->saved += sv;
    if (regather > 0 && (w->ov == PASS_TP_OVERLAP_BACKWARD || w->ov == PASS_TP_OVERLAP_UB) &&
        n->op == IR_OP_MATMUL) {
        double gm[3];
        reader_gemms(x, w->ncs, w->piece, n->in[0], &in[0], gm);
        double e = pass_overlap_exposed(PASS_OVERLAP_BULK, regather, gm[1], 1);
        regather = e + w->sd * (regather - e);
    }
    pc->bwd += regather * (1 - x->c->st.reshard_overlap);
    w->saved_none += w->r == PLAN_RECOMPUTE_NONE ? sv : kept_bytes(x, n, PLAN_RECOMPUTE_NONE, &regather_none);
}

/* What n's weight-gradient GEMMs read, held from the backward (B) to the
 * weight gradients (W) under a split schedule (pass_wslot_add); an MoE
 * node's experts' weight gradients of the micro-batches overflowing its W
 * slot (expected fraction pass_moe_wslot_overflow) are left in B. */
static void node_wsaved(const PieceWalk *w, const IrNode *n, const PassNodeCost *nc, const PlanSharding *in,
                        const PlanSharding *out, PieceCost *pc)
{
    const Ctx *x = w->x;
    int64_t rows, worst;
    pass_wslot_add(x->c, x->g, n, &x->p->mesh, strat(x, n->id), in, out, x->ds, pass_moe_wslot_factor(x->c, x->p),
                   &pc->wsaved, &rows, &worst);
    if (n->op == IR_OP_MOE && !x->c->st.ref_stack && plan_schedule_split(x->p->schedule))
        pc->dw -= nc->moe_dw_s * pass_moe_wslot_overflow(x->c, rows, worst);
}

/* Model states of n's parameters and their synchronisation. */
static void node_states(const Ctx *x, const IrNode *n, const PlanStrategy *s, PieceCost *pc)
{
    const PassCostCtx *c = x->c;
    const IrGraph *g = x->g;
    const PlanMesh *m = &x->p->mesh;
    int zero = x->p->zero;
    double w, gr, op;
    pass_param_bytes3(c, g, n, m, s, zero, &w, &gr, &op);
    pc->w += w, pc->gr += gr, pc->op += op;
    if (w + gr + op <= 0)
        return;
    double ob = pass_optim_bytes(c);
    pc->shard_elems += op / ob;
    double w0, g0, o0;
    pass_param_bytes3(c, g, n, m, s, 0, &w0, &g0, &o0);
    pc->full_w += w0;
    pc->full_g += g0;
    if (o0 / ob > op / ob + 0.5 || zero == 0)
        pc->grad_elems += o0 / ob;
    if (!c->st.ref_stack) {
        pc->step_s += pass_param_step_s(c, g, n, m, s, zero);
        pc->mb_extra += pass_param_mb_s(c, g, n, m, s, zero);
    }
    double s1 = pass_param_sync_s(c, g, n, m, s, zero, 1);
    double s2 = zero >= 2 ? pass_param_sync_s(c, g, n, m, s, zero, 2) : s1;
    pc->sync_mb += s2 - s1;
    pc->sync_step += s1 - (s2 - s1);
    pc->sync_gather += pass_param_gather_s(c, g, n, m, s, zero);
    double lr, lg;
    pc->nsync += pass_param_sync_lat(c, g, n, m, s, zero, &lr, &lg);
    pc->lat_red += lr, pc->lat_gather += lg;
}

/* The bytes of n's backward working set before its inputs' gradients: its
 * own and its first output's gradient. A gradient written over the tensor
 * it differentiates (the loss's dlogits over the kept logits) takes no
 * memory of its own. */
static double node_grad_bytes(const Ctx *x, const IrNode *n, const PassNodeCost *nc, const PlanSharding *out)
{
    const IrGraph *g = x->g;
    double grads = nc->ws_bytes;
    for (int j = 0; j < n->nout; j++)
        if (j == 0 && g->tensors[n->out[j]].role != IR_LOSS && !x->over[n->out[j]])
            grads += (double)plan_local_numel(g, n->out[j], &x->p->mesh, &out[j], x->ds) *
                     pass_elem_bytes(x->c, g->tensors[n->out[j]].dtype);
    return grads;
}

/* With sequence parallelism a column-parallel GEMM reads its input
 * all-gathered and a row-parallel one writes its output reduce-scattered;
 * the stack may run the transfer beside the GEMM (tp_overlap,
 * pass_overlap_exposed). Overlapped seconds cost the compute the device's
 * overlap slowdown. *tf, *tb: edge (n, input i)'s transfer seconds forward
 * and backward, kf, kb their all-gather / reduce-scatter groups. */
static void edge_overlap(const PieceWalk *w, const IrNode *n, int t, const PlanSharding *lay, int kf, int kb,
                         double *tf, double *tb, PieceCost *pc)
{
    const Ctx *x = w->x;
    const IrGraph *g = x->g;
    const PassNodeCost *pg = producer_gemm(x, w->ncs, w->piece, t);
    double gm[3] = {0, 0, 0};
    bool ub = w->ov == PASS_TP_OVERLAP_UB, ch = w->ov == PASS_TP_OVERLAP_CHUNKED;
    /* ptdc's chunked gathers run beside their GEMMs' own-block rows (OWN),
     * its reduce-scatters in the programs' pieces (cg_tpchunk.c). */
    PassOverlapKind gather = ch ? PASS_OVERLAP_OWN : PASS_OVERLAP_RING;
    int splits = ch ? PLAN_TP_RS_SPLITS : pass_cost_consts.tp_rs_splits;
    if (n->op == IR_OP_MATMUL && (kf || kb))
        reader_gemms(x, w->ncs, w->piece, t, lay, gm);
    if (*tf > 0 && kf && ub && n->op == IR_OP_MATMUL)
        pc->ub_bytes = fmax(pc->ub_bytes, (double)plan_local_numel(g, t, &x->p->mesh, lay, x->ds) *
                                              pass_elem_bytes(x->c, g->tensors[t].dtype));
    if (*tf > 0 && kf && (ub || ch)) {
        double e = n->op == IR_OP_MATMUL ? pass_overlap_exposed(gather, *tf, gm[0], kf)
                   : pg ? pass_overlap_exposed(PASS_OVERLAP_PIPELINE, *tf, pg->gemm_fwd_s, splits)
                        : *tf;
        *tf = e + w->sd * (*tf - e);
    }
    if (*tb > 0 && kb) {
        double e = n->op == IR_OP_MATMUL && (ub || w->ov == PASS_TP_OVERLAP_BACKWARD)
                       ? pass_overlap_exposed(PASS_OVERLAP_BULK, *tb, gm[2], 1)
                   : pg && (ub || ch)
                       ? pass_overlap_exposed(gather, *tb, pg->gemm_dx_s, kb)
                       : *tb;
        *tb = e + w->sd * (*tb - e);
    }
}

/* The edge into n's input i (an activation, not a repeat of an earlier
 * input): the pipeline transfer when it crosses a stage, resharding forward
 * and gradient resharding backward, unless an earlier consumer in the stage
 * already paid for the same layout. */
static void edge_in(const PieceWalk *w, const IrNode *n, int i, const PlanSharding *in, bool rec, PieceCost *pc)
{
    const Ctx *x = w->x;
    const IrGraph *g = x->g;
    const PlanMesh *m = &x->p->mesh;
    const PassCostCtx *c = x->c;
    int t = n->in[i];
    PlanSharding from = out_sharding(x, t);
    PlanSharding gfrom = plan_shard_grad_in(g, n, strat(x, n->id), i), gto = from;
    gto.partial = 0;
    bool fsh, bsh;
    shared_edges(x, n, t, &in[i], &gfrom, &fsh, &bsh);
    int pp_piece = g->nodes[g->tensors[t].producer].piece;
    bool cross = x->stage_of[pp_piece] != x->stage_of[w->piece];
    if (cross && !fsh) {
        PlanColl k = {PLAN_COLL_SENDRECV, 0, -1, -1, plan_local_numel(g, t, m, &from, x->ds)};
        double tp2p = pass_cost_coll(c, m, &k, pass_elem_bytes(x->c, g->tensors[t].dtype));
        pc->p2p_f += tp2p;
        pc->p2p_b += tp2p;
    }
    int kf = 0, kb = 0;
    double *nl = &w->colls[2 * (n->id - g->pieces[w->piece].first)];
    double tf = fsh ? 0 : coll_time(x, t, &from, &in[i], &pc->group_f, &kf, &nl[0]);
    double tb = bsh ? 0 : coll_time(x, t, &gfrom, &gto, &pc->group_b, &kb, &nl[1]);
    edge_overlap(w, n, t, &in[i], kf, kb, &tf, &tb, pc);
    tf *= 1 - c->st.reshard_overlap;
    tb *= 1 - c->st.reshard_overlap;
    pc->rs_f += tf;
    pc->rs_b += tb;
    if (rec && !cross && g->nodes[g->tensors[t].producer].piece == w->piece)
        pc->rec += tf;
}

/* The edges into n, and the largest backward working set so far (n's own,
 * its output's gradient, its inputs' gradients). Token inputs are loaded on
 * the host every micro-batch. */
static void node_edges(const PieceWalk *w, const IrNode *n, const PassNodeCost *nc, const PlanSharding *in,
                       const PlanSharding *out, bool rec, PieceCost *pc)
{
    const Ctx *x = w->x;
    const IrGraph *g = x->g;
    const PlanMesh *m = &x->p->mesh;
    double grads = node_grad_bytes(x, n, nc, out);
    for (int i = 0; i < n->nin; i++) {
        int t = n->in[i];
        IrRole role = g->tensors[t].role;
        if (role == IR_INPUT)
            pc->host_s += x->c->cl->gpu.host_token_s * (double)plan_local_numel(g, t, m, &in[i], x->ds);
        if (role == IR_PARAM || role == IR_INPUT)
            continue;
        bool dup = false;
        for (int e = 0; e < i; e++)
            dup |= n->in[e] == t;
        if (dup)
            continue;
        if (!x->over[t])
            grads += (double)plan_local_numel(g, t, m, &in[i], x->ds) * pass_elem_bytes(x->c, g->tensors[t].dtype);
        edge_in(w, n, i, in, rec, pc);
    }
    if (grads > pc->transient)
        pc->transient = grads;
}

/* CPU ranks meeting at the piece's collectives wait for the latest
 * (sync.c): over the forward's work and the backward's, each where it has
 * them. */
static void piece_sync_wait(const PassCostCtx *c, PieceCost *pc)
{
    double comp = pc->fwd + pc->bwd, hard = fmin(comp, pc->gemm + pc->attn);
    if (comp > 0 && pc->group_f > 1)
        pc->rs_f += pass_sync_wait(c->cl, pc->group_f, hard, comp - hard) * pc->fwd / comp;
    if (comp > 0 && pc->group_b > 1)
        pc->rs_b += pass_sync_wait(c->cl, pc->group_b, hard, comp - hard) * pc->bwd / comp;
}

/* One micro-batch of one piece under recomputation r: its kernels, saved
 * activations, model states, edges and collectives. */
static void cost_piece(const Ctx *x, int piece, PlanRecompute r, PieceCost *pc)
{
    const IrGraph *g = x->g;
    memset(pc, 0, sizeof *pc);
    const IrPiece *P = &g->pieces[piece];
    PieceWalk w = {x, piece, r, node_costs(x, piece), x->c->st.tp_overlap, pass_overlap_slowdown(&x->c->cl->gpu), 0,
                   ir_xcalloc(2 * (size_t)P->count + 2, sizeof(double))};
    for (int id = P->first; id < P->first + P->count; id++) {
        const IrNode *n = &g->nodes[id];
        const PassNodeCost *nc = &w.ncs[id - P->first];
        bool rec = pass_recomputed(x->c, g, n, r);
        node_kernels(&w, n, nc, rec, pc);
        PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
        plan_shard_io(g, n, strat(x, id), in, out);
        node_saved(&w, n, in, pc);
        node_wsaved(&w, n, nc, in, out, pc);
        node_states(x, n, strat(x, id), pc);
        node_edges(&w, n, nc, in, out, rec, pc);
    }
    pass_host_piece(x->c, g, &x->p->mesh, piece, r, x->a2a, w.colls, w.ncs, &pc->host);
    free(w.ncs);
    free(w.colls);
    piece_sync_wait(x->c, pc);
    pc->extra_ws = w.saved_none - pc->saved;
}

/* Every attribute of ir/attrs.def the two nodes' op carries is equal: a
 * layer's attributes may differ from the one before it (GPT-OSS alternates
 * a 128-position window with full attention, `window = sliding * ((layer +
 * 1) % 2)`), and attention's pairs, so its cost, follow the window. */
static bool same_attrs(const IrNode *a, const IrNode *b)
{
    /* Equal bytes are equal attributes (the usual case: every layer's node
     * built alike); else attribute by attribute, as padding may differ. */
    if (!memcmp(&a->attr, &b->attr, sizeof a->attr))
        return true;
    for (int id = 0; id < IR_NATTRS; id++)
        if (ir_attrs[id].op == a->op &&
            ir_attr_get(&a->attr, (IrAttrId)id) != ir_attr_get(&b->attr, (IrAttrId)id))
            return false;
    return true;
}

/* Producer p of an input of piece `cur`, before it, and its counterpart p -
 * shift before `ref`: the same op and strategy, and both in or both out of
 * their piece's stage. */
static bool same_producer(const Ctx *x, int ref, int cur, int shift, int p)
{
    const IrGraph *g = x->g;
    int q = p - shift;
    return q >= 0 && g->nodes[q].op == g->nodes[p].op && strat_eq(strat(x, p), strat(x, q)) &&
           (x->stage_of[g->nodes[p].piece] == x->stage_of[cur]) == (x->stage_of[g->nodes[q].piece] == x->stage_of[ref]);
}

/* The producers before each piece of its nodes' inputs, the graph's alone:
 * those of piece q are ext[ext_at[q]] to ext[ext_at[q + 1] - 1] (PassMemo),
 * found once per search where same_piece would read every input of every
 * node for each plan. NULL: no memo. */
static const int *piece_producers(const Ctx *x, const int **at)
{
    const IrGraph *g = x->g;
    PassMemo *m = x->c->memo && x->c->memo->g == g ? x->c->memo : NULL;
    if (!m)
        return NULL;
    if (!m->ext_at) {
        int n = 0, cap = 64;
        int *ext = ir_xmalloc(sizeof(int) * (size_t)cap), *ea = ir_xmalloc(sizeof(int) * (size_t)(g->npieces + 1));
        for (int q = 0; q < g->npieces; q++) {
            const IrPiece *C = &g->pieces[q];
            ea[q] = n;
            for (int id = C->first; id < C->first + C->count; id++)
                for (int i = 0; i < g->nodes[id].nin; i++) {
                    int p = g->tensors[g->nodes[id].in[i]].producer;
                    if (p < 0 || p >= C->first)
                        continue;
                    if (n == cap)
                        ext = ir_xrealloc(ext, sizeof(int) * (size_t)(cap *= 2));
                    ext[n++] = p;
                }
        }
        ea[g->npieces] = n;
        m->ext = ext, m->ext_at = ea;
    }
    *at = m->ext_at;
    return m->ext;
}

/* Same strategies and attributes, same neighbourhood (which inputs come from
 * another stage), same recomputation: piece `cur` costs what `ref` did. */
static bool same_piece(const Ctx *x, int ref, int cur)
{
    const IrGraph *g = x->g;
    const IrPiece *R = &g->pieces[ref], *C = &g->pieces[cur];
    if (R->rep < 0 || R->rep != C->rep || R->count != C->count ||
        x->p->stages[x->stage_of[ref]].recompute != x->p->stages[x->stage_of[cur]].recompute)
        return false;
    int shift = C->first - R->first;
    const int *at, *ext = piece_producers(x, &at);
    for (int k = 0; k < C->count; k++) {
        const IrNode *n = &g->nodes[C->first + k];
        /* (the stack keeps the first and last layers' GEMMs in bf16; a BF16
         * plan runs every node in BF16, pass_prec_of) */
        if (!strat_eq(strat(x, C->first + k), strat(x, R->first + k)) ||
            !same_attrs(n, &g->nodes[R->first + k]) ||
            (x->c->prec != PLAN_PREC_BF16 &&
             pass_prec_of(x->c, g, n) != pass_prec_of(x->c, g, &g->nodes[R->first + k])))
            return false;
        for (int i = 0; i < n->nin && !ext; i++) {
            int p = g->tensors[n->in[i]].producer;
            if (p >= 0 && p < C->first && !same_producer(x, ref, cur, shift, p))
                return false;
        }
    }
    for (int e = ext ? at[cur] : 0; ext && e < at[cur + 1]; e++)
        if (!same_producer(x, ref, cur, shift, ext[e]))
            return false;
    return true;
}

typedef struct RankAcc {
    double t_mb, fwd, bwd;        /* per micro-batch */
    double rec, rs, p2p, p2p_f, p2p_b, flops, rec_flops;
    double saved, nchunks, extra_ws, transient;
    double saved_chunk[PLAN_MAX_CHUNKS]; /* per micro-batch, by the rank's chunk */
    double wsaved_chunk[PLAN_MAX_CHUNKS]; /* of those, what the weight gradients read (PieceCost) */
    double dw;                    /* of bwd: the weight-gradient GEMMs (a split schedule's W) */
    double w, gr, op, sync_step, sync_mb, sync_gather, shard_elems, grad_elems, full_w_max;
    double unit_wg_max;           /* zero3_pools: the largest layer's gathered weights and
                                     unsharded gradients */
    double held_w;                /* zero3_pools: the other pieces' gathered weights */
    double lat_red, lat_gather;
    int nsync;
    double ub_bytes;              /* tp_overlap userbuffers: the largest gathered input */
    PassHostCost hc;              /* per micro-batch: the host's launches and syncs */
    double host_wait;             /* per micro-batch: GPU time waiting for the host */
    double step_s;                /* ptdc: per-step kernels */
    double gemm, attn, comp, host; /* per micro-batch: GEMMs, attention, all kernels, host */
    double cast;                  /* per micro-batch: low-precision casts */
    double a2a;                   /* per micro-batch: MoE all-to-alls */
    double a2a_f;                 /* of a2a: the forward's */
    double a2a_save, a2a_hid;     /* per overlapped micro-batch (moe_a2a_overlap): the seconds
                                     the pairing saves, the all-to-all it hides */
    double saved_piece;           /* the largest paired MoE layer's saved bytes, one micro-batch */
} RankAcc;

double pass_active_params(const IrGraph *g)
{
    return (double)ir_active_param_count(g); /* one count of it, the IR's */
}

double pass_model_flops_per_token(const IrGraph *g)
{
    double f = 6.0 * pass_active_params(g);
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op == IR_OP_SSD) {
            /* Megatron's hybrid_flops: the scan is 7 d_inner N a token
             * forward, three times that for training (its d_inner is
             * 2 hidden; here the model's heads x head_dim). */
            const IrTensor *x = &g->tensors[n->in[0]], *B = &g->tensors[n->in[3]];
            double inner = 1;
            for (int k = 2; k < x->rank; k++)
                inner *= (double)g->dims[x->dim[k]].size;
            f += 21.0 * inner * (double)g->dims[B->dim[B->rank - 1]].size;
            continue;
        }
        if (n->op != IR_OP_ATTENTION)
            continue;
        /* Q K^T over the qk head size and P V over v's (MLA: 192 and 128). */
        const IrTensor *q = &g->tensors[n->in[0]], *v = &g->tensors[n->in[2]];
        f += 6.0 * (double)g->dims[q->dim[2]].size *
             (double)(g->dims[q->dim[3]].size + g->dims[v->dim[3]].size) * (double)g->dims[q->dim[1]].size;
    }
    return f;
}

void pass_prediction_free(PassPrediction *p)
{
    free(p->mem);
    p->mem = NULL;
    p->npp = 0;
}

/* Local bytes of activation t in the layout its producer writes it. */
static double boundary_bytes(const Ctx *x, int t)
{
    const IrGraph *g = x->g;
    const IrNode *p = &g->nodes[g->tensors[t].producer];
    PlanSharding out[IR_MAX_OUT];
    plan_shard_io(g, p, &x->p->strategy[p->id], NULL, out);
    for (int k = 0; k < p->nout; k++)
        if (p->out[k] == t)
            return (double)plan_local_numel(g, t, &x->p->mesh, &out[k], x->ds) *
                   pass_elem_bytes(x->c, g->tensors[t].dtype);
    return 0;
}

/* Input k of n a parameter n does not own (pass_param_owned): the node
 * that does, or -1 (none); -2: not such a parameter. Owning is a question
 * of the nodes before n, and the owner one of every node. */
static int foreign_param(const IrGraph *g, const IrNode *n, int k)
{
    int t = n->in[k];
    if (g->tensors[t].role != IR_PARAM || pass_param_owned(g, n, t))
        return -2;
    for (int j = 0; j < g->nfwd; j++)
        if (pass_param_owned(g, &g->nodes[j], t))
            return j;
    return -1;
}

/* The inputs of piece q's nodes stage_extras may count, the graph's alone:
 * a parameter another node owns, or an activation produced by a forward
 * node of an earlier piece (what another stage sends), in node order:
 * PassMemo.sx's pairs (node x IR_MAX_IN + input, the owner or -2), piece
 * q's from sx_at[q] to sx_at[q + 1] - 1. Found once per search where
 * stage_extras would read every input of every node for each plan. NULL:
 * no memo. */
static const int *stage_inputs(const Ctx *x, const int **at)
{
    const IrGraph *g = x->g;
    PassMemo *m = x->c->memo && x->c->memo->g == g ? x->c->memo : NULL;
    if (!m)
        return NULL;
    if (!m->sx_at) {
        int n = 0, cap = 64;
        int *sx = ir_xmalloc(sizeof(int) * 2 * (size_t)cap), *sa = ir_xmalloc(sizeof(int) * (size_t)(g->npieces + 1));
        for (int q = 0; q < g->npieces; q++) {
            const IrPiece *C = &g->pieces[q];
            sa[q] = n;
            for (int id = C->first; id < C->first + C->count; id++)
                for (int k = 0; k < g->nodes[id].nin; k++) {
                    int owner = foreign_param(g, &g->nodes[id], k), p = g->tensors[g->nodes[id].in[k]].producer;
                    if (owner == -1 || (owner == -2 && (p < 0 || p >= g->nfwd || g->nodes[p].piece >= q)))
                        continue;
                    if (n == cap)
                        sx = ir_xrealloc(sx, sizeof(int) * 2 * (size_t)(cap *= 2));
                    sx[2 * n] = id * IR_MAX_IN + k, sx[2 * n + 1] = owner;
                    n++;
                }
        }
        sa[g->npieces] = n;
        m->sx = sx, m->sx_at = sa;
    }
    *at = m->sx_at;
    return m->sx;
}

/* Input k of node i, a parameter `owner` owns (-2: none), into stage st's
 * extras: a parameter an earlier stage owns, or an activation one sends;
 * anything else is passed over before the search of those already
 * counted (seen). */
static void stage_input(const Ctx *x, int st, RankAcc *ra, int i, int k, int owner, int *seen, int *nseen)
{
    const IrGraph *g = x->g;
    const Plan *plan = x->p;
    const IrNode *n = &g->nodes[i];
    RankAcc *r = &ra[plan->stages[st].pp_rank];
    int chunk = st / plan->pp; /* stages are dealt to ranks round-robin: chunk c of rank c % pp */
    int t = n->in[k];
    const IrTensor *tt = &g->tensors[t];
    bool foreign = owner >= 0 && x->stage_of[g->nodes[owner].piece] != st;
    if (!foreign && (owner >= -1 || tt->producer < 0 || tt->producer >= g->nfwd ||
                     x->stage_of[g->nodes[tt->producer].piece] >= st))
        return;
    for (int e = 0; e < *nseen; e++)
        if (seen[e] == t)
            return;
    if (foreign) {
        double w, gr, op;
        pass_param_bytes_of(x->c, g, n, &plan->mesh, &plan->strategy[i], plan->zero, t, &w, &gr, &op);
        r->w += w, r->gr += gr, r->op += op;
    } else {
        /* Received: the gradient going back, and the sender's copy. */
        double b = boundary_bytes(x, t);
        const PlanStage *P = &plan->stages[x->stage_of[g->nodes[tt->producer].piece]];
        int pchunk = (int)(P - plan->stages) / plan->pp;
        r->saved_chunk[chunk] += b;
        ra[P->pp_rank].saved_chunk[pchunk] += b;
    }
    if (*nseen < 64)
        seen[(*nseen)++] = t;
}

static void stage_extras(const Ctx *x, int st, RankAcc *ra)
{
    const IrGraph *g = x->g;
    const PlanStage *S = &x->p->stages[st];
    int seen[64], nseen = 0;
    const int *at, *sx = stage_inputs(x, &at);
    if (sx) {
        for (int e = at[S->first_piece]; e < at[S->first_piece + S->npieces]; e++)
            stage_input(x, st, ra, sx[2 * e] / IR_MAX_IN, sx[2 * e] % IR_MAX_IN, sx[2 * e + 1], seen, &nseen);
        return;
    }
    int first = g->pieces[S->first_piece].first;
    int end = g->pieces[S->first_piece + S->npieces - 1].first +
              g->pieces[S->first_piece + S->npieces - 1].count;
    for (int i = first; i < end; i++)
        for (int k = 0; k < g->nodes[i].nin; k++)
            stage_input(x, st, ra, i, k, foreign_param(g, &g->nodes[i], k), seen, &nseen);
}

double pass_runtime_bytes(const PassCostCtx *c, const PlanMesh *m, int pp)
{
    /* CUDA context, one NCCL communicator per group kind the rank belongs to
     * (world, each mesh axis larger than 1, the pipeline), library workspaces;
     * a measured device says what its process and communicators take. */
    const PassCostConsts *K = &pass_cost_consts;
    const PassGpu *gpu = &c->cl->gpu;
    int ncomm = 1 + (pp > 1);
    for (int a = 0; a < m->naxes; a++)
        ncomm += m->size[a] > 1;
    if (gpu->runtime_bytes > 0)
        return gpu->runtime_bytes + ncomm * gpu->comm_bytes;
    return K->cuda_ctx_bytes + ncomm * K->nccl_comm_bytes + K->workspace_bytes;
}

double pass_usable_bytes(const PassCostCtx *c)
{
    double hbm = c->cl->gpu.hbm_bytes;
    double frac = c->st.alloc_reserve > 0 ? c->st.alloc_reserve : c->st.alloc_reserve_bytes > 0 ? 0 : PASS_MEM_RESERVE;
    return hbm - fmax(frac * hbm, c->st.alloc_reserve_bytes);
}

/* The plan's sizes and ownership, found once: dim sizes at the plan's
 * micro-batch, each piece's stage, which tensors' gradients are written
 * over them (ir_grad_in_place_all: one pass, where asking ir_grad_in_place
 * tensor by tensor scanned the graph for each, quadratic in the layers).
 * Freed by ctx_free. */
static void ctx_init(Ctx *x, const PassCostCtx *c, const IrGraph *g, const Plan *plan)
{
    int64_t *ds = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    ir_dim_sizes(g, plan->mb_seqs, ds);
    int *stage_of = ir_xmalloc(sizeof(int) * (size_t)(g->npieces + 1));
    for (int i = 0; i < g->npieces; i++)
        stage_of[i] = -1;
    for (int st = 0; st < plan->nstages; st++)
        for (int k = 0; k < plan->stages[st].npieces; k++)
            stage_of[plan->stages[st].first_piece + k] = st;
    for (int i = 0; i < g->npieces; i++)
        if (stage_of[i] < 0)
            ir_die("pass_predict: piece %d (%s) is in no stage", i, g->pieces[i].name);
    PassMemo *m = c->memo && c->memo->g == g ? c->memo : NULL;
    bool *over;
    if (!c->st.grad_in_place) {
        over = ir_xcalloc((size_t)g->ntensors + 1, sizeof(bool));
    } else if (m) { /* the graph's alone: found once per search */
        if (!m->over) {
            m->over = ir_xcalloc((size_t)g->ntensors + 1, sizeof(bool));
            ir_grad_in_place_all(g, m->over);
        }
        over = m->over;
    } else {
        over = ir_xcalloc((size_t)g->ntensors + 1, sizeof(bool));
        ir_grad_in_place_all(g, over);
    }
    *x = (Ctx){c, g, plan, ds, stage_of, over, pass_a2a_overlap_applies(c, g, plan)};
}

static void ctx_free(Ctx *x)
{
    free(x->ds);
    free(x->stage_of);
    if (!x->c->memo || x->over != x->c->memo->over)
        free(x->over);
}

/* What pass_predict's steps share: the plan's shape, the sums per
 * pipeline rank and, per stage, one micro-batch's forward and backward on
 * its rank and the transfers into it (the schedule simulation's inputs). */
typedef struct Predict {
    Ctx x;
    int pp, v, m;                 /* pipeline ranks, chunks per rank, micro-batches */
    RankAcc *ra;                  /* by pipeline rank */
    double *sf, *sb, *sxf, *sxb;  /* by stage */
    double *sw;                   /* by stage: of sb, the weight-gradient GEMMs */
    PassHostCost *sh;             /* by stage: the host's launches and syncs */
    double host_step;             /* the host's seconds per step on a rank without syncs, the
                                     longest (the step waits for it, not each micro-batch) */
    bool a2a_overlap;             /* the expert all-to-all overlap runs (a2a_overlap.c) */
    bool blocking;                /* data-parallel traffic waited for (no dp_overlap) */
    bool mb_blocking;             /* so is the per-micro-batch traffic (also ptdc's programs) */
    double z3f;                   /* of sync_mb: ZeRO-3's forward gather */
    double *finish;               /* by rank: when its last backward ends */
    double pipe;                  /* the schedule's seconds */
    /* the repeated layers of pipeline rank 0 summed (activation offloading) */
    int lay_n;
    double lay_saved, lay_f, lay_b;
    double post_saved; /* saved by rank 0's pieces after its first layer (the head, the loss) */
    PassPieceMemo *pieces;        /* earlier plans' piece costs (piece_memo.c), or NULL */
} Predict;

/* Collectives a stack waits for inside each micro-batch: ZeRO-3's forward
 * gather, and the rest of the per-micro-batch traffic in backward. ptdc's
 * programs wait for their ZeRO-2/3 per-micro-batch collectives where they
 * are issued (docs/runtime.md, "Overlap in a training step"): only the
 * step-end reductions and gathers overlap. */
static void predict_init(Predict *P, const PassCostCtx *c, const IrGraph *g, const Plan *plan)
{
    memset(P, 0, sizeof *P);
    ctx_init(&P->x, c, g, plan);
    P->pp = plan->pp > 0 ? plan->pp : 1, P->v = plan->v > 0 ? plan->v : 1;
    P->m = plan->num_micro > 0 ? plan->num_micro : 1;
    P->ra = ir_xcalloc((size_t)P->pp, sizeof *P->ra);
    int nst = plan->nstages;
    P->sf = ir_xcalloc((size_t)nst, sizeof(double)), P->sb = ir_xcalloc((size_t)nst, sizeof(double));
    P->sxf = ir_xcalloc((size_t)nst, sizeof(double)), P->sxb = ir_xcalloc((size_t)nst, sizeof(double));
    P->sw = ir_xcalloc((size_t)nst, sizeof(double));
    P->sh = ir_xcalloc((size_t)nst, sizeof *P->sh);
    P->finish = ir_xcalloc((size_t)P->pp, sizeof(double));
    P->blocking = !c->st.dp_overlap;
    P->mb_blocking = P->blocking || !c->st.ref_stack;
    double wb = pass_elem_bytes(c, IR_BF16), gb = c->st.grad_bytes > 0 ? c->st.grad_bytes : wb;
    P->z3f = plan->zero >= 3 ? wb / (gb + 2 * wb) : 0;
}

static void predict_free(Predict *P)
{
    free(P->finish);
    free(P->sf), free(P->sb), free(P->sxf), free(P->sxb), free(P->sw), free(P->sh);
    free(P->ra);
    ctx_free(&P->x);
}

/* An MoE layer under the expert all-to-all overlap (a2a_overlap.c): what
 * pairing its forward with another micro-batch's backward saves per
 * micro-batch, the seconds it hides costing the overlap slowdown, as the
 * other overlaps here. Everything of the layer but its experts and their
 * all-to-alls is the pre-dispatch part (the layer's resharding, and its
 * recomputation, in backward). */
static void a2a_pair(const Predict *P, RankAcc *r, const PieceCost *pc)
{
    const PassCostCtx *c = P->x.c;
    int nb = c->st.moe_saves_rows ? 2 : 3; /* cost_ops.c: a recomputed dispatch */
    double ab = pc->a2a - pc->a2a_f;
    PassA2aLayer l = {.pre_f = pc->fwd + pc->rs_f - pc->moe_f - pc->a2a_f,
                      .pre_b = pc->bwd + pc->rec + pc->rs_b + pc->mb_extra - pc->moe_b - ab,
                      .mlp_f = pc->moe_f,
                      .mlp_dx = pc->moe_b - pc->moe_dw,
                      .mlp_dw = pc->moe_dw,
                      .a2a_f = pc->a2a_f / 2,
                      .a2a_b = ab / nb,
                      .n_b = nb};
    l.pre_f = fmax(0, l.pre_f), l.pre_b = fmax(0, l.pre_b);
    double hid, pair = pass_a2a_pair_s(&l, &hid);
    double serial = l.pre_f + l.pre_b + l.mlp_f + l.mlp_dx + l.mlp_dw + pc->a2a;
    pair += pass_overlap_slowdown(&c->cl->gpu) * hid;
    r->a2a_save += fmax(0, serial - pair);
    r->a2a_hid += hid;
}

/* One piece's micro-batch added to its stage and its pipeline rank. */
static void add_piece(Predict *P, int st, RankAcc *r, const PieceCost *pc)
{
    double mbf = P->mb_blocking ? P->z3f * pc->sync_mb : 0, mbb = P->mb_blocking ? pc->sync_mb - mbf : 0;
    P->sf[st] += pc->fwd + pc->rs_f + pc->host_s + mbf;
    P->sb[st] += pc->bwd + pc->rec + pc->rs_b + pc->mb_extra + mbb;
    P->sxf[st] += pc->p2p_f;
    P->sxb[st] += pc->p2p_b;
    P->sw[st] += pc->dw;
    r->dw += pc->dw;
    r->wsaved_chunk[(int)r->nchunks - 1] += pc->wsaved;
    r->fwd += pc->fwd + pc->rs_f + pc->p2p_f + pc->host_s + mbf;
    r->bwd += pc->bwd + pc->rec + pc->rs_b + pc->p2p_b + pc->mb_extra + mbb;
    r->step_s += pc->step_s;
    pass_host_add(&P->sh[st], &pc->host);
    pass_host_add(&r->hc, &pc->host);
    r->a2a += pc->a2a;
    r->a2a_f += pc->a2a_f;
    if (P->a2a_overlap && pc->a2a > 0) {
        a2a_pair(P, r, pc);
        r->saved_piece = fmax(r->saved_piece, pc->saved);
    }
    r->cast += pc->cast;
    r->gemm += pc->gemm, r->attn += pc->attn, r->comp += pc->fwd + pc->bwd, r->host += pc->host_s;
    r->rec += pc->rec;
    r->rs += pc->rs_f + pc->rs_b;
    r->p2p += pc->p2p_f + pc->p2p_b;
    r->p2p_f += pc->p2p_f, r->p2p_b += pc->p2p_b;
    r->flops += pc->flops;
    r->rec_flops += pc->rec_flops;
    r->saved += pc->saved;
    r->saved_chunk[(int)r->nchunks - 1] += pc->saved;
    r->extra_ws = fmax(r->extra_ws, pc->extra_ws);
    r->transient = fmax(r->transient, pc->transient);
    r->w += pc->w, r->gr += pc->gr, r->op += pc->op;
    r->sync_step += pc->sync_step;
    r->sync_gather += pc->sync_gather;
    r->lat_red += pc->lat_red, r->lat_gather += pc->lat_gather, r->nsync += pc->nsync;
    r->ub_bytes = fmax(r->ub_bytes, pc->ub_bytes);
    r->sync_mb += pc->sync_mb;
    r->shard_elems += pc->shard_elems;
    r->grad_elems += pc->grad_elems;
    r->full_w_max = fmax(r->full_w_max, pc->full_w);
}

/* What cost_piece(piece) reads of the plan's stages and strategies, found
 * once per graph. The stages: the piece of the node before each of its
 * nodes (node_costs: a norm priced fused with the add before it), of each
 * input's producer (edge_in: a crossing) and of every node between the
 * producer and the node (shared_edges: an earlier consumer in the same
 * stage); *lo and *hi, the lowest and highest of those pieces. Nothing
 * else of it reads stage_of, so two cuts whose stage around the piece holds
 * the same pieces of [lo, hi] cost it the same. The strategies: those of
 * its own nodes (pass_cost_node: the GEMMs it batches are siblings in the
 * piece, plan_gemm_batch; host.c), the node before each (plan_add_norm_fused),
 * the producers and the nodes between them and their consumers (out_sharding,
 * shared_edges; mem_saved.c's redo_s), and the first readers of its inputs
 * and outputs up to the end of the piece after their producer's
 * (pass_kept_sharding, pass_readers_end): forward nodes *na to *nb - 1,
 * provided the pieces are in node order (false otherwise: no memo). */
static bool piece_reach(const IrGraph *g, int piece, int *lo, int *hi, int *na, int *nb)
{
    const IrPiece *P = &g->pieces[piece];
    int first = P->first;
    for (int id = P->first; id < P->first + P->count; id++) {
        const IrNode *n = &g->nodes[id];
        if (id > 0 && id - 1 < first)
            first = id - 1;
        for (int i = 0; i < n->nin; i++) {
            int q = g->tensors[n->in[i]].producer;
            if (q >= 0 && q < first)
                first = q;
        }
    }
    *lo = *hi = piece;
    for (int id = first; id < P->first + P->count; id++) {
        int q = g->nodes[id].piece;
        *lo = q < *lo ? q : *lo;
        *hi = q > *hi ? q : *hi;
    }
    int next = piece + 1 < g->npieces ? piece + 1 : piece;
    *na = first;
    *nb = g->pieces[next].first + g->pieces[next].count;
    *nb = *nb < g->nfwd ? *nb : g->nfwd;
    return *hi == piece && (piece == 0 || g->pieces[piece - 1].first + g->pieces[piece - 1].count == P->first);
}

/* The key of `piece` in stage S of this plan (PassPieceKey) and the first
 * of the strategies it holds, *ns of them (piece_reach); false: no memo
 * for this graph. */
static bool piece_key(Predict *P, const PlanStage *S, int piece, PassPieceKey *k, int *na, int *ns)
{
    PassPieceMemo *m = P->pieces;
    const IrGraph *g = P->x.g;
    if (!m->reach) {
        m->reach = ir_xmalloc(sizeof(int) * 2 * (size_t)(g->npieces + 1));
        m->nodes = ir_xmalloc(sizeof(int) * 2 * (size_t)(g->npieces + 1));
        m->moe = ir_xcalloc((size_t)g->npieces + 1, sizeof(bool));
        for (int q = 0; q < g->npieces; q++) {
            if (!piece_reach(g, q, &m->reach[2 * q], &m->reach[2 * q + 1], &m->nodes[2 * q], &m->nodes[2 * q + 1]))
                m->off = true;
            for (int id = g->pieces[q].first; id < g->pieces[q].first + g->pieces[q].count; id++)
                m->moe[q] |= g->nodes[id].op == IR_OP_MOE;
        }
    }
    if (m->off)
        return false;
    int lo = m->reach[2 * piece], hi = m->reach[2 * piece + 1];
    int s0 = S->first_piece, s1 = S->first_piece + S->npieces - 1;
    memset(k, 0, sizeof *k);
    k->ctx = m->cur;
    k->piece = piece;
    k->from = lo > s0 ? lo : s0;
    k->to = hi < s1 ? hi : s1;
    k->recompute = (int)S->recompute;
    k->zero = P->x.p->zero;
    k->split = m->moe[piece] && !P->x.c->st.ref_stack && plan_schedule_split(P->x.p->schedule);
    k->a2a = P->x.a2a;
    *na = m->nodes[2 * piece];
    *ns = m->nodes[2 * piece + 1] - *na;
    return true;
}

/* cost_piece, or what it gave for the same key in an earlier plan
 * (P->pieces). Checked: every such answer costed again, dying unless the
 * bits are the same. */
static void piece_cost(Predict *P, const PlanStage *S, int piece, PieceCost *pc)
{
    PassPieceMemo *m = P->pieces;
    PassPieceKey k;
    int na, ns;
    if (!m || !piece_key(P, S, piece, &k, &na, &ns)) {
        cost_piece(&P->x, piece, S->recompute, pc);
        return;
    }
    const PlanStrategy *st = &P->x.p->strategy[na];
    const void *v = pass_piece_memo_find(m, &k, st, ns);
    if (!v) {
        m->misses++;
        cost_piece(&P->x, piece, S->recompute, pc);
        pass_piece_memo_add(m, &k, st, ns, pc, sizeof *pc);
        return;
    }
    m->hits++;
    memcpy(pc, v, sizeof *pc);
    if (m->check) {
        PieceCost again;
        cost_piece(&P->x, piece, S->recompute, &again);
        if (memcmp(&again, pc, sizeof again))
            ir_die("pass_predict: the remembered costs of piece %d (%s; its stage's pieces %d-%d, recompute %d, "
                   "zero %d) differ from costing it again: forward %.17g / %.17g s, backward %.17g / %.17g s, "
                   "saved %.17g / %.17g bytes, model states %.17g / %.17g bytes, step's traffic %.17g / %.17g s",
                   piece, P->x.g->pieces[piece].name, S->first_piece, S->first_piece + S->npieces - 1,
                   (int)S->recompute, P->x.p->zero, pc->fwd, again.fwd, pc->bwd, again.bwd, pc->saved,
                   again.saved, pc->w + pc->gr + pc->op, again.w + again.gr + again.op, pc->sync_step,
                   again.sync_step);
    }
}

/* Every piece of every stage costed, reusing a few recently costed pieces:
 * a layer matches the one before it, or the first layer of an earlier stage
 * when it starts a stage itself; else the costs an earlier plan found for
 * it (piece_cost). */
static void cost_stages(Predict *P)
{
    const Plan *plan = P->x.p;
    enum { NREF = 8 };
    PieceCost pc, ref[NREF];
    int refp[NREF], nref = 0, next = 0;
    for (int st = 0; st < plan->nstages; st++) {
        const PlanStage *S = &plan->stages[st];
        RankAcc *r = &P->ra[S->pp_rank];
        r->nchunks += 1;
        if (r->nchunks > PLAN_MAX_CHUNKS)
            ir_die("pass_predict: more than %d chunks on pipeline rank %d", PLAN_MAX_CHUNKS,
                   S->pp_rank);
        for (int k = 0; k < S->npieces; k++) {
            int piece = S->first_piece + k;
            int hit = -1;
            for (int j = 0; j < nref && hit < 0; j++)
                if (same_piece(&P->x, refp[j], piece))
                    hit = j;
            if (hit >= 0) {
                pc = ref[hit];
            } else {
                piece_cost(P, S, piece, &pc);
                ref[next] = pc;
                refp[next] = piece;
                next = (next + 1) % NREF;
                nref += nref < NREF;
            }
            add_piece(P, st, r, &pc);
            if (P->x.g->pieces[piece].rep >= 0)
                r->unit_wg_max = fmax(r->unit_wg_max, pc.full_w + pc.full_g);
            else
                r->held_w += pc.full_w;
            if (S->pp_rank == 0 && P->x.g->pieces[piece].rep < 0 && P->lay_n > 0)
                P->post_saved += pc.saved;
            if (S->pp_rank == 0 && P->x.g->pieces[piece].rep >= 0) {
                P->lay_n++;
                P->lay_saved += pc.saved;
                P->lay_f += pc.fwd + pc.rs_f;
                P->lay_b += pc.bwd + pc.rec + pc.rs_b + pc.mb_extra;
            }
        }
    }
}

bool pass_offload_applies(const PassCostCtx *c, const Plan *plan)
{
    if (c->st.offload_act_layers <= 0 || !c->st.ref_stack || c->cl->gpu.host_copy_bw <= 0 || plan->pp > 1)
        return false;
    for (int st = 0; st < plan->nstages; st++)
        if (plan->stages[st].recompute != PLAN_RECOMPUTE_NONE)
            return false;
    return true;
}

/* Activation offloading (stack offload_act_layers; offload.c) where the
 * framework runs it (pass_offload_applies): the copies of the first N
 * layers' saved activations stall each micro-batch by what outlasts their
 * windows of compute, and the GPU holds the most layers alive at once
 * instead of every layer's. Copy engines move the bytes: no SM time is
 * charged beside them. */
static void offload_acts(Predict *P, PassPrediction *out)
{
    const PassCostCtx *c = P->x.c;
    int L = P->lay_n, N = c->st.offload_act_layers;
    if (!pass_offload_applies(c, P->x.p) || N >= L)
        return;
    double per = P->lay_saved / L;
    PassOffload o;
    pass_offload(L, N, P->lay_f / L, P->lay_b / L, per / c->cl->gpu.host_copy_bw, &o);
    RankAcc *r = &P->ra[0];
    r->fwd += o.fwd_s, r->bwd += o.bwd_s;
    P->sf[0] += o.fwd_s, P->sb[0] += o.bwd_s;
    /* The layers beyond the L - N never offloaded are on the GPU only while
     * a layer runs: at the end of the last layer's forward, before its wait
     * frees the last offloaded group, and from the start of the last
     * layer's backward, when the first reload starts. The head and the
     * loss run between the two, with L - N layers held, and their saved
     * tensors are freed by the head's backward: the two do not add up. */
    double extra = (o.resident - (L - N)) * per;
    double freed = (L - o.resident) * per + fmin(extra, P->post_saved);
    r->saved -= freed;
    r->saved_chunk[0] -= freed;
    out->offload_layers = N;
    out->offload_s = P->m * (o.fwd_s + o.bwd_s);
    out->offload_bytes = P->m * 2.0 * N * per;
    out->offload_copy_s = P->m * 2.0 * N * o.copy_s;
}

/* The expert all-to-all overlap (a2a_overlap.c): each rank's micro-batch
 * shortened by what its MoE layers' pairing saves, on the share of its
 * micro-batches run in the paired steady state (the warm-up forwards and
 * cool-down backwards run alone); the saving taken from forward and
 * backward as their all-to-alls are. */
static void overlap_a2a(Predict *P)
{
    if (!P->a2a_overlap)
        return;
    for (int i = 0; i < P->pp; i++) {
        RankAcc *r = &P->ra[i];
        double k = 1 - pass_a2a_unpaired(P->pp, P->v, P->m, i);
        double s = k * r->a2a_save, fs = r->a2a > 0 ? r->a2a_f / r->a2a : 0.5;
        r->fwd -= s * fs, r->bwd -= s * (1 - fs);
        r->a2a_hid *= k;
    }
}

/* The host (host.c): each rank's and each stage's micro-batch of GPU work
 * (but the pipeline transfers, which wait on the other rank) stretched to
 * what its host's launches and syncs allow. A rank whose host never waits
 * for its GPU within the step (no syncs) runs ahead across micro-batches
 * and pipeline waits alike (a receive makes the stream wait, not the host):
 * only its whole step's launches bound the step (P->host_step). */
static void host_time(Predict *P)
{
    const PassCostCtx *c = P->x.c;
    if (pass_host_op_s(c) <= 0)
        return;
    for (int st = 0; st < P->x.p->nstages; st++)
        if (P->sh[st].syncs_f + P->sh[st].syncs_b > 0)
            pass_host_bound(c, &P->sh[st], &P->sf[st], &P->sb[st]);
    for (int i = 0; i < P->pp; i++) {
        RankAcc *r = &P->ra[i];
        if (r->hc.syncs_f + r->hc.syncs_b <= 0) {
            P->host_step = fmax(P->host_step, P->m * (r->hc.fwd_s + r->hc.bwd_s));
            continue;
        }
        double gf = r->fwd - r->p2p_f, gb = r->bwd - r->p2p_b, f = gf, b = gb;
        pass_host_bound(c, &r->hc, &f, &b);
        r->fwd += f - gf, r->bwd += b - gb;
        r->host_wait = f - gf + b - gb;
    }
}

/* A framework that overlaps pipeline transfers (pp_overlap: Megatron's
 * interleaved schedule posts the next chunk's receive and this chunk's
 * send before computing, megatron/core/pipeline_parallel/schedules.py,
 * overlap_p2p_comm) hides them under the chunk's compute, but for what
 * outlasts it; the overlapped seconds cost the overlap slowdown. */
static void overlap_p2p(Predict *P)
{
    for (int i = 0; i < P->pp; i++) {
        RankAcc *r = &P->ra[i];
        double sdp = pass_overlap_slowdown(&P->x.c->cl->gpu);
        double cf = r->fwd - r->p2p_f, cb = r->bwd - r->p2p_b;
        double ef = fmax(0, r->p2p_f - cf), eb = fmax(0, r->p2p_b - cb);
        ef += sdp * (r->p2p_f - ef), eb += sdp * (r->p2p_b - eb);
        r->fwd = cf + ef, r->bwd = cb + eb, r->p2p = ef + eb;
    }
}

/* The schedule: P->pipe and each rank's finish, and the slowest rank's
 * terms into out. */
/* The backward the simulation runs per stage: a split schedule's B is the
 * backward but its weight gradients (W). Free it with sim_b_free. */
static double *sim_b(const Predict *P)
{
    if (!plan_schedule_split(P->x.p->schedule))
        return P->sb;
    int ns = P->pp * P->v;
    double *b = ir_xmalloc(sizeof(double) * (size_t)ns);
    for (int st = 0; st < ns; st++)
        b[st] = fmax(0, P->sb[st] - P->sw[st]);
    return b;
}

static void sim_b_free(const Predict *P, double *b)
{
    if (b != P->sb)
        free(b);
}

static void rank_mb_times(Predict *P)
{
    for (int i = 0; i < P->pp; i++)
        P->ra[i].t_mb = P->ra[i].fwd + P->ra[i].bwd;
}

static void schedule(Predict *P, PassPrediction *out)
{
    const PassCostCtx *c = P->x.c;
    RankAcc *ra = P->ra;
    int pp = P->pp, v = P->v, m = P->m;
    double tmax = 0, tsum = 0;
    int slow = 0;
    rank_mb_times(P);
    for (int i = 0; i < pp; i++) {
        tsum += ra[i].t_mb;
        if (ra[i].t_mb > tmax)
            tmax = ra[i].t_mb, slow = i;
    }
    double pipe;
    if (!c->st.ref_stack) {
        /* ptdc's programs: the schedule codegen runs, simulated op by op
         * (CPU ranks of several pipeline ranks on one node's cores share
         * them: share.c). */
        PassShare sh;
        bool shared = pass_share(c->cl, pp, plan_mesh_devices(&P->x.p->mesh), &sh);
        double *b = sim_b(P);
        pipe = pass_schedule_sim_shared(P->x.p->schedule, pp, v, m, P->sf, b, P->sw, P->sxf, P->sxb,
                                        P->finish, shared ? &sh : NULL);
        sim_b_free(P, b);
    } else {
        /* A reference stack: 1F1B takes (m - 1) times the slowest rank plus
         * every rank once (fill and drain); interleaving divides the fill and
         * drain by v. */
        pipe = m * tmax + (tsum - tmax) / v;
        for (int i = 0; i < pp; i++)
            P->finish[i] = pipe;
    }
    if (P->host_step > pipe) { /* launch-bound: the GPUs wait for their hosts */
        out->host_wait_s = P->host_step - pipe;
        pipe = P->host_step;
    }
    P->pipe = pipe;
    out->pipeline_s = pipe;
    out->bubble_s = fmax(0, pipe - m * tmax);
    out->stage_fwd_s = ra[slow].fwd;
    out->stage_bwd_s = ra[slow].bwd;
    out->recompute_s = m * ra[slow].rec;
    out->reshard_s = m * ra[slow].rs;
    out->p2p_s = m * ra[slow].p2p;
    out->gemm_s = m * ra[slow].gemm;
    out->attn_s = m * ra[slow].attn;
    out->cast_s = m * ra[slow].cast;
    out->kernels_s = m * (ra[slow].comp - ra[slow].gemm - ra[slow].attn);
    out->host_s = m * ra[slow].host;
    out->a2a_s = m * ra[slow].a2a;
    out->a2a_overlap = P->a2a_overlap;
    out->a2a_hidden_s = m * ra[slow].a2a_hid;
    out->host_wait_s += m * ra[slow].host_wait;
}

/* A rank's data-parallel reduction and weight gathers per step. A
 * framework reduces and gathers each bucket of gradients as one collective
 * over a contiguous buffer (Megatron's param_and_grad_buffer.py; FSDP's
 * flat groups): the latency is paid per bucket, not per tensor. */
static void dp_traffic(const Predict *P, const RankAcc *r, double bk, double *red, double *gat)
{
    *red = r->sync_step - r->sync_gather, *gat = r->sync_gather;
    if (P->x.c->st.ref_stack && r->nsync > 0) {
        double nb = fmax(1, ceil(r->grad_elems / bk));
        *red += (nb - r->nsync) * r->lat_red / r->nsync;
        *gat += (nb - r->nsync) * r->lat_gather / r->nsync;
    }
}

/* Of the weight gathers gat, the seconds exposed where the stack runs them
 * (param_gather); first: when rank i's first input arrives. */
static double gather_shown(const Predict *P, int i, double gat, double opt, double first, double bucket)
{
    switch (P->x.c->st.param_gather) {
    case PASS_GATHER_OPTIMIZER:
        /* Beside the later parameters' AdamW (ptdc); what outlasts the
         * optimizer is exposed. */
        return fmax(0, gat - opt);
    case PASS_GATHER_FORWARD:
        /* Bucket after bucket beside the next step's first forward, the
         * first issued as the step starts: rank i's wait for its first
         * input and its own forward hide them, but for what outlasts both
         * and, on a rank that starts at once, the first bucket. */
        return fmax(gat - (first + P->ra[i].fwd), fmax(0, bucket * gat - first));
    case PASS_GATHER_BLOCKING:
    default:
        return gat;
    }
}

/* Rank i's exposed step-end traffic when it overlaps the backward.
 * Rank i finishes its last backward when the ranks before it still have
 * theirs to run: that and its own last backward hide traffic. The last
 * bucket and whatever outlasts the window are exposed; the rest hides
 * under backward, slowing it by the device's overlap slowdown.
 * Interleaved, each chunk's reduction starts when its last backward ends;
 * the chunks end one group of min(m, pp) micro-batches' backwards apart
 * (chunk v-1 first), so every chunk's reduction but the last has the later
 * chunks' backwards to hide under: the chain of v transfers of red/v
 * exposes max over j of (j+1) red/v - j g bc beyond the last chunk's own
 * backward bc (1F1B: red - bc; ZB-H1: bc is the last weight gradients, W,
 * of the rank's last micro-batch). *slack: the backwards of the ranks before. */
static double dp_overlapped(const Predict *P, int i, double red, double gat, double opt, double first,
                            double bucket, double sd, double *slack)
{
    int v = P->v, m = P->m, pp = P->pp;
    /* A split schedule completes the gradients in its last W. */
    double bc = plan_schedule_split(P->x.p->schedule) ? P->ra[i].dw : P->ra[i].bwd / v, gm = m < pp ? m : pp, chain = red / v;
    for (int j = 1; j < v; j++)
        chain = fmax(chain, (j + 1) * red / v - j * gm * bc);
    double shown = fmax(chain - bc - *slack, bucket * red);
    *slack += P->ra[i].bwd;
    double exp_step = shown + sd * (red - shown);
    if (gat > 0) {
        shown = gather_shown(P, i, gat, opt, first, bucket);
        exp_step += shown + sd * (gat - shown);
    }
    return exp_step;
}

/* Data-parallel traffic and the optimizer, after the last backward (and the
 * weight gathers of the next step's first forward): the seconds the step
 * runs past the schedule, and its terms into out. */
static double dp_tail(const Predict *P, PassPrediction *out)
{
    const PassCostCtx *c = P->x.c;
    const PassGpu *gpu = &c->cl->gpu;
    const PassCostConsts *K = &pass_cost_consts;
    int v = P->v, m = P->m;
    double tail = 0, slack = 0, start = 0, end = 0;
    double bk = pass_stack_bucket_elems(&c->st, gpu), sd = pass_overlap_slowdown(gpu);
    /* LAMB's per-tensor norms (runtime/trainer/train_lamb.c): one world
     * all-reduce of ||w||^2 and ||r||^2 per parameter tensor (tied ones
     * once) and a pair for the copies that do not count, between its two
     * passes: part of every rank's optimizer step. */
    double lamb_s = 0;
    const Plan *plan = P->x.p;
    int world = P->pp * plan_mesh_devices(&plan->mesh);
    if (!c->st.ref_stack && c->lamb && world > 1) {
        const IrGraph *g = P->x.g;
        int64_t ntensors = 0;
        for (int t = 0; t < g->ntensors; t++)
            ntensors += g->tensors[t].role == IR_PARAM;
        PlanMesh wm;
        plan_mesh_make(&wm, world, 1, pass_cluster_domain(c->cl));
        PlanColl norms = {PLAN_COLL_ALLREDUCE, 0, -1, -1, 2 * (ntensors + 1)};
        lamb_s = pass_cost_coll(c, &wm, &norms, 4);
    }
    for (int i = 0; i < P->pp; i++) {
        const RankAcc *r = &P->ra[i];
        double exp_step, exp_mb, opt;
        if (!c->st.ref_stack)
            opt = r->step_s + lamb_s; /* the kernels the trainer runs, per parameter */
        else
            opt = pass_mem_time(gpu, r->shard_elems * K->opt_bytes_per_elem, 4);
        double red, gat;
        dp_traffic(P, r, bk, &red, &gat);
        double bucket = r->grad_elems > 0 ? fmin(1, bk / r->grad_elems) : 0;
        /* Rank i's first forward of a step starts once the ranks before it
         * have run theirs through their first chunk. */
        double first = start;
        start += P->ra[i].fwd / (v > 1 ? v : 1);
        if (P->blocking) {
            /* Reduced after the schedule, one blocking collective after
             * another; the per-micro-batch traffic is inside the stages. */
            exp_step = red + gat;
            exp_mb = 0;
        } else {
            exp_step = dp_overlapped(P, i, red, gat, opt, first, bucket, sd, &slack);
            exp_mb = P->mb_blocking ? 0
                                    : m * (fmax(0, r->sync_mb - r->t_mb) + sd * fmin(r->sync_mb, r->t_mb));
        }
        out->dp_sync_s = fmax(out->dp_sync_s, red + gat + m * r->sync_mb);
        if (P->finish[i] + exp_step + exp_mb + opt > end) {
            end = P->finish[i] + exp_step + exp_mb + opt;
            tail = end - P->pipe;
            out->dp_exposed_s = exp_step + exp_mb;
            out->optimizer_s = opt;
        }
    }
    /* ptdc's trainer all-reduces the gradient norm and the loss over the
     * world, one float each. */
    if (!c->st.ref_stack && world > 1) {
        PlanMesh wm;
        plan_mesh_make(&wm, world, 1, pass_cluster_domain(c->cl));
        PlanColl one = {PLAN_COLL_ALLREDUCE, 0, -1, -1, 1};
        tail += 2 * pass_cost_coll(c, &wm, &one, 4);
    }
    return tail;
}

/* Throughput and utilisation from the step time. */
static void throughput(const Predict *P, PassPrediction *out)
{
    const IrGraph *g = P->x.g;
    const Plan *plan = P->x.p;
    const PassGpu *gpu = &P->x.c->cl->gpu;
    int m = P->m;
    int dev = plan_mesh_devices(&plan->mesh), gpus = dev * P->pp;
    double tokens = (double)plan->mb_seqs * m * (double)P->x.ds[g->seq_dim >= 0 ? g->seq_dim : 0];
    if (g->seq_dim < 0)
        tokens = (double)plan->mb_seqs * m;
    out->tokens_per_s = tokens / out->step_time_s;
    PassMemo *mm = P->x.c->memo && P->x.c->memo->g == g ? P->x.c->memo : NULL;
    if (mm && mm->flops_per_token < 0)
        mm->flops_per_token = pass_model_flops_per_token(g);
    out->model_flops = tokens * (mm ? mm->flops_per_token : pass_model_flops_per_token(g));
    for (int i = 0; i < P->pp; i++)
        out->hw_flops += m * dev * (P->ra[i].flops + P->ra[i].rec_flops);
    /* Against the peak of the format the linear layers run in (the BF16
     * one for BF16 plans): an FP8 or NVFP4 plan measured against the BF16
     * peak would read above 100%. */
    double peak = pass_prec_peak(gpu, P->x.c->prec);
    if (!(peak > 0))
        peak = gpu->peak_flops;
    out->mfu = out->model_flops / out->step_time_s / (gpus * peak);
    out->hfu = out->hw_flops / out->step_time_s / (gpus * peak);
}

/* Memory per pipeline rank, the peak and the margin to the usable HBM. */
static void memory(const Predict *P, PassPrediction *out)
{
    const PassCostCtx *c = P->x.c;
    const Plan *plan = P->x.p;
    const PassGpu *gpu = &c->cl->gpu;
    const PassCostConsts *K = &pass_cost_consts;
    int pp = P->pp, v = P->v, m = P->m;
    out->npp = pp;
    out->mem = ir_xcalloc((size_t)pp, sizeof *out->mem);
    out->capacity_bytes = gpu->hbm_bytes;
    double usable = pass_usable_bytes(c);
    for (int i = 0; i < pp; i++) {
        const RankAcc *r = &P->ra[i];
        PassRankMem *M = &out->mem[i];
        M->fwd_s = r->fwd, M->bwd_s = r->bwd, M->dw_s = r->dw;
        M->weights = r->w, M->grads = r->gr, M->optim = r->op;
        /* The schedule codegen runs decides what is alive: each chunk's most
         * micro-batches in ptdc's static arena, the peak of the sum under a
         * caching allocator (plan_schedule_acts). */
        M->acts = plan_schedule_acts(plan->schedule, pp, v, m, i, r->saved_chunk, r->wsaved_chunk,
                                     c->st.ref_stack);
        double held = 0; /* one micro-batch through every chunk of the rank */
        for (int j = 0; j < v; j++)
            held += r->saved_chunk[j];
        /* The expert all-to-all overlap holds more: forward layer j of one
         * micro-batch runs before backward layer L-1-j of another frees its
         * activations (one layer's more at the peak), and an interleaved
         * schedule warms up one more forward chunk (schedules.py,
         * get_pp_rank_microbatches); not where no micro-batch pairs. */
        if (P->a2a_overlap && pass_a2a_unpaired(pp, v, m, i) < 1) {
            double chunk = 0;
            for (int j = 0; j < v && v > 1; j++)
                chunk = fmax(chunk, r->saved_chunk[j]);
            M->acts += r->saved_piece + chunk;
        }
        M->inflight = held > 0 ? M->acts / (held / v) : fmin(m, pp - i);
        M->recompute_ws = r->extra_ws;
        M->transient = r->transient;
        M->buffers = plan->zero < 3 ? 0
                     : c->st.zero3_pools ? 2 * r->unit_wg_max + r->held_w
                                         : 2 * r->full_w_max;
        /* Transformer Engine's userbuffers: one buffer of the gathered
         * activation for each of the ten GEMMs it pairs a transfer with
         * (transformer_engine/pytorch/module/base.py, initialize_ub: qkv,
         * proj, fc1, fc2 forward and gradient, qkv and fc1 weight gradient;
         * shape [seq x micro-batch, hidden]), allocated once. */
        M->buffers += K->tp_ub_buffers * r->ub_bytes;
        M->runtime = pass_runtime_bytes(c, &plan->mesh, pp);
        M->frag = c->st.frag_act * (M->acts + M->recompute_ws + M->transient);
        M->total = M->weights + M->grads + M->optim + M->acts + M->recompute_ws + M->transient +
                   M->buffers + M->runtime + M->frag;
        if (M->total > out->peak_mem_bytes)
            out->peak_mem_bytes = M->total, out->peak_rank = i;
    }
    out->margin_bytes = usable - out->peak_mem_bytes;
    out->fits = out->margin_bytes >= 0;
}

/* Per pipeline rank, no later than the simulation's end of its last
 * operation (pass_schedule_sim, not sharing cores), from the stage times
 * alone, into lb: a rank runs its operations one after another once its
 * first one starts, and that one, a forward of stage st0, waits for the
 * forwards of the stages before it and their transfers (the fill); its
 * last backward (B) waits for the same micro-batch's backward of the next
 * stage and that transfer, which, where it is the next rank's last B, is
 * no earlier than that rank's own floor (the drain); after its last B only
 * weight gradients (W) run, back to back. Which operations are first and
 * last is the schedule's own (plan_schedule_op), a few per rank: this is
 * O(pp v) where the simulation is O(pp m v). */
static void sim_floor(const Predict *P, const double *b, double *lb)
{
    PlanSchedule s = P->x.p->schedule;
    int pp = P->pp, v = P->v, m = P->m, ns = pp * v, nops = plan_schedule_nops(s, v, m);
    bool split = plan_schedule_split(s);
    const double *f = P->sf, *w = P->sw, *xf = P->sxf, *xb = P->sxb;
    int next_st = -1, next_mb = -1; /* rank r + 1's last B: its stage and micro-batch, */
    double next_db = 0;             /* and the floor of its end */
    for (int r = pp - 1; r >= 0; r--) {
        PlanSchedOp first = plan_schedule_op(s, pp, v, m, r, 0);
        double fill = 0, work = 0, trail = 0;
        for (int j = 0; first.bwd == PLAN_OP_F && j < first.chunk * pp + r; j++)
            fill += f[j] + xf[j + 1];
        for (int c = 0; c < v; c++)
            work += f[c * pp + r] + b[c * pp + r] + (split ? w[c * pp + r] : 0);
        int k = nops - 1;
        PlanSchedOp op = {0};
        for (; k >= 0 && (op = plan_schedule_op(s, pp, v, m, r, k)).bwd == PLAN_OP_W; k--)
            trail += w[op.chunk * pp + r];
        double db = fill + m * work - trail;
        if (k >= 0 && op.bwd == PLAN_OP_B) {
            int st = op.chunk * pp + r;
            if (st + 1 < ns && next_st == st + 1 && next_mb == op.mb)
                db = fmax(db, next_db + xb[st + 1] + b[st]);
            next_st = st, next_mb = op.mb, next_db = db;
        } else {
            next_st = -1;
        }
        lb[r] = db + trail;
    }
}

/* The step time of P no earlier than its simulation can give, into
 * cut->floor (0 where none is made: a reference stack's formula costs
 * nothing to run, and ranks sharing cores run faster while others wait).
 * dp_tail's end is the latest rank's finish and its step-end traffic,
 * which only a rank's finish, not the simulation, decides. True: the
 * prediction must be finished (the floor is not above out->fits' cut). */
static bool cut_sim(Predict *P, PassPredictCut *cut, PassPrediction *out)
{
    const PassCostCtx *c = P->x.c;
    PassShare sh;
    cut->floor = 0;
    if (c->st.ref_stack || pass_share(c->cl, P->pp, plan_mesh_devices(&P->x.p->mesh), &sh))
        return true;
    rank_mb_times(P);
    double *b = sim_b(P);
    sim_floor(P, b, P->finish);
    sim_b_free(P, b);
    PassPrediction scratch;
    memset(&scratch, 0, sizeof scratch);
    P->pipe = 0; /* the tail is then the step */
    cut->floor = dp_tail(P, &scratch) * (1 - PASS_PREDICT_CUT_TOL);
    if (!(cut->floor > (out->fits ? cut->fits : cut->nofit)))
        return true;
    out->step_time_s = cut->floor;
    return false;
}

void pass_predict(const PassCostCtx *ctx, const IrGraph *g, const Plan *plan, PassPrediction *out)
{
    pass_predict_cut(ctx, g, plan, NULL, out);
}

bool pass_predict_cut(const PassCostCtx *ctx, const IrGraph *g, const Plan *plan, PassPredictCut *cut,
                      PassPrediction *out)
{
    /* The plan says which attention kernel runs. */
    PassCostCtx cc = *ctx;
    cc.attention = plan->attention;
    cc.prec = plan->precision; /* and which format its linear layers run in */
    cc.plan = plan->strategy; /* which GEMMs its programs batch */
    if (cut && cut->pieces && !cc.memo) /* the graph's facts, kept beside the pieces' costs */
        cc.memo = pass_piece_memo_facts(cut->pieces, g);
    const PassCostCtx *c = &cc;
    memset(out, 0, sizeof *out);
    Predict P;
    predict_init(&P, c, g, plan);
    P.a2a_overlap = P.x.a2a;
    if (cut && cut->pieces) {
        P.pieces = cut->pieces;
        pass_piece_memo_begin(P.pieces, c, g, plan);
    }
    cost_stages(&P);
    offload_acts(&P, out);
    overlap_a2a(&P);
    host_time(&P);
    /* What ptdc's programs hold per stage beyond the saved activations and
     * owned parameters (codegen/cg_lower.c, cg_analyse.c): per micro-batch slot,
     * the activation a stage sends on (kept until its backward) and the
     * gradient it sends back for what it received; and its own copy of a
     * parameter an earlier stage owns (a tied embedding). */
    if (!c->st.ref_stack)
        for (int st = 0; st < plan->nstages; st++)
            stage_extras(&P.x, st, P.ra);
    if (c->st.ref_stack && c->st.pp_overlap && P.v > 1)
        overlap_p2p(&P);
    /* The memory first (nothing of it is the schedule's): whether the
     * plan fits picks the cut. */
    memory(&P, out);
    bool whole = !cut || cut_sim(&P, cut, out);
    if (whole) {
        schedule(&P, out);
        double tail = dp_tail(&P, out);
        out->step_time_s = P.pipe + tail;
        throughput(&P, out);
    }
    predict_free(&P);
    return whole;
}
