/* host.c: the host's share of a framework's step (docs/cost-model.md,
 * "Host time").
 *
 * An eager framework's host dispatches and launches every op; the GPU runs
 * them in order, each no earlier than it was launched. So the host runs
 * ahead of the GPU until something makes it wait for the GPU (a sync):
 * between two syncs a stretch of work takes max(host, GPU), and after each
 * sync the GPU is idle until the host has launched the next op (one op's
 * host time exposed, and more while the ops after it take the GPU less
 * time than the host takes to launch them). Megatron's dropless MoE
 * dispatchers sync once per MoE layer forward (stack key moe_sync);
 * backward has none. So a micro-batch's forward is walked in launch order
 * (the stretches below), and its backward takes max(host, GPU). Without
 * any sync the host runs ahead across micro-batches and pipeline waits
 * alike, and only the whole step's launches bound the step (pass_predict).
 *
 * The host's work is counted from the plan: one framework op per forward
 * node and direction (a GEMM's backward two: data and weight gradient; an
 * MoE layer its dispatcher's steps and a GEMM per local expert), one per
 * collective its resharding launches, a captured CUDA graph one launch
 * instead of the ops inside it (stack key cuda_graph), and under the expert
 * all-to-all overlap the schedule nodes each layer runs as (below). The
 * seconds per op are the stack's host_op_s for the cluster's host CPU. */
#include "cost/cost.h"

#include <math.h>
#include <string.h>

/* An MoE layer's forward as Megatron's MoELayer runs it with the alltoall
 * or flex dispatcher (megatron/core/transformer/moe/moe_layer.py,
 * token_dispatcher.py): dispatcher preprocessing (routed counts, splits),
 * permute, the dispatch all-to-all, the activation, the combine all-to-all,
 * unpermute, and the grouped fc1 and fc2, which Transformer Engine's
 * GroupedLinear runs as one GEMM per local expert (general_grouped_gemm:
 * a cuBLAS call per expert over several streams; Transformer Engine is not
 * mirrored here to re-read, docs/moe.md, Limits). Its backward: the five
 * steps' gradients and a data and a weight gradient GEMM per local expert
 * of fc1 and fc2. */
#define MOE_FWD_STEPS 6
#define MOE_BWD_STEPS 5

/* Megatron's expert all-to-all overlap (moe_a2a_overlap where it runs:
 * pass_a2a_overlap_applies) runs each transformer layer as schedule nodes,
 * two micro-batches' forward and backward interleaved node by node
 * (megatron/core/pipeline_parallel/combined_1f1b.py;
 * models/common/model_chunk_schedule_plan.py, TransformerLayerSchedulePlan:
 * attn = the attention, pre-MLP norm, router and dispatcher preprocessing;
 * moe_dispatch; mlp; moe_combine). Each node's forward and its backward is a
 * call of its own around the ops inside it (pipeline_parallel/utils.py,
 * ScheduleNode: an event waited for and recorded on its stream, its inputs
 * detached; the backward an autograd run of its own, where the eager
 * schedule runs one per model chunk), and the weight gradients the recipes
 * delay with it (delay_wgrad_compute) are a call each of attn and mlp
 * (backward_dw): one framework op per call, as every IR-level call is.
 * Megatron-Bridge's recipes set the overlap on x86 hosts without CUDA
 * graphs (Qwen3-235B on B200 at v0.2.0, B300 at v0.3.0, H100), where these
 * calls are launched eagerly. moe_dispatch's call precedes its sync. */
#define A2A_ATTN_CALLS_F 1 /* attn */
#define A2A_ATTN_CALLS_B 2 /* attn backward, backward_dw */
#define A2A_MOE_CALLS_F 3  /* moe_dispatch, mlp, moe_combine */
#define A2A_MOE_CALLS_B 4  /* their backward, mlp backward_dw */

/* The stretches. The host launches op k when it has launched op k - 1
 * (L += its host time h_k); the GPU runs it when it has run op k - 1 and
 * op k is launched (F = max(F, L) + its GPU time g_k); a sync makes the
 * host wait for the GPU (L = max(L, F)). Both are max-plus linear in
 * (L, F), so a stretch of ops is a 2 x 2 max-plus matrix (rows: new L, new
 * F; columns: old L, old F) and pieces compose by its product: the order
 * matters where the sum of max(host, GPU) over the micro-batch does not
 * see it (a Nano stretch: the MoE layer's per-expert launches, the GPU
 * idle, then a Mamba layer's GPU work the host is already ahead of).
 * A node is n ops of host time t each and its GPU seconds g shared evenly
 * (k t + (n - k + 1) g / n is linear in k: the worst launch is the first
 * or the last); n = 0: run by a launch before it (a captured graph's). */
#define ORD_NONE (-INFINITY)

static void ord_mul(double a[2][2], const double b[2][2]) /* a = b (x) a: b after a */
{
    double r[2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            r[i][j] = fmax(b[i][0] + a[0][j], b[i][1] + a[1][j]);
    memcpy(a, r, sizeof r);
}

static void ord_ops(double a[2][2], double n, double t, double g)
{
    double H = n * t;
    double b[2][2] = {{H, ORD_NONE}, {n > 0 ? fmax(t + g, H + g / n) : g, g}};
    ord_mul(a, b);
}

static void ord_sync(double a[2][2])
{
    const double b[2][2] = {{0, 0}, {ORD_NONE, 0}};
    ord_mul(a, b);
}

double pass_host_op_s(const PassCostCtx *c)
{
    const PassGpu *g = &c->cl->gpu;
    if (g->kind == PASS_DEV_CPU || c->st.cuda_graph == PASS_GRAPH_FULL)
        return 0; /* a CPU rank's ops are its compute; a full graph is one launch a step */
    return c->st.host_op_s[g->host_grace ? 1 : 0];
}

static void node_ops(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m, double *f,
                     double *b)
{
    *f = 1, *b = 1;
    if (n->op == IR_OP_MATMUL)
        *b = 2;
    else if (n->op == IR_OP_MOE) {
        double E = (double)g->dims[g->tensors[n->in[2]].dim[0]].size;
        double el = c->plan ? E / plan_ep_degree(g, n, m, &c->plan[n->id]) : E;
        *f = MOE_FWD_STEPS + 2 * el, *b = MOE_BWD_STEPS + 4 * el;
        /* FP8 current scaling quantises each local expert's rows as a
         * tensor of its own (TE's split_quantize: a create_tensor, then
         * amax, scale and cast launches, per expert; delayed scaling fuses
         * them into one multi_tensor_quantize): the two inputs forward, the
         * two gradients backward, a call per expert (docs/moe.md, "The H100
         * rows' gap"). MXFP8's splits are launched per expert too
         * (pass_prec_split_calls prices their kernels), but each is one
         * nvte_quantize_v2 on a bulk allocation, not a framework op's
         * work: counted as a framework op each, the Bridge MoE table goes
         * from 14.20% to 22.06% median |error| (16.68% with host_op_us
         * refitted to 50 / 60 us), and what one costs beside a framework
         * op is not in the sources ("Per-expert quantise calls"). */
        PlanPrecision p = pass_prec_of(c, g, n);
        double q = p == PLAN_PREC_FP8 ? pass_prec_split_calls(c, p, true, el) : 1;
        if (q > 1)
            *f += 2 * q, *b += 2 * q;
    }
}

/* The first node of an MoE layer's router scope (Megatron's moe_router: the
 * pre-MLP norm and the router): the norm feeding the router's GEMM, else
 * that GEMM, else the route node; -1 without one. */
static int router_first(const IrGraph *g, const IrNode *moe)
{
    int r = g->tensors[moe->in[1]].producer;
    if (r < 0 || g->nodes[r].op != IR_OP_ROUTE)
        return -1;
    int m = g->tensors[g->nodes[r].in[0]].producer;
    if (m < 0 || g->nodes[m].op != IR_OP_MATMUL)
        return r;
    int n = g->tensors[g->nodes[m].in[0]].producer;
    return n >= 0 && (g->nodes[n].op == IR_OP_RMSNORM || g->nodes[n].op == IR_OP_LAYERNORM) ? n : m;
}

void pass_host_piece(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m, int piece, PlanRecompute r,
                     bool a2a, const double *colls, const PassNodeCost *ncs, PassHostCost *h)
{
    memset(h, 0, sizeof *h);
    h->ord_f[0][1] = h->ord_f[1][0] = ORD_NONE; /* the identity */
    h->ord_n = 1;
    double t = pass_host_op_s(c);
    if (t <= 0)
        return;
    const IrPiece *P = &g->pieces[piece];
    int end = P->first + P->count, moe = -1, attn = -1, ssd = -1;
    for (int id = P->first; id < end; id++) {
        moe = g->nodes[id].op == IR_OP_MOE && moe < 0 ? id : moe;
        attn = g->nodes[id].op == IR_OP_ATTENTION && attn < 0 ? id : attn;
        ssd = g->nodes[id].op == IR_OP_SSD && ssd < 0 ? id : ssd;
    }
    /* Megatron's scopes (transformer_layer.py, _get_submodules_under_cudagraphs):
     * moe_router the pre-MLP norm and the router ([rf, moe)), moe_preprocess
     * the dispatcher's first step, attn the input norm and self-attention
     * (the piece's nodes before the router's, or all of them without an MoE
     * layer, when it holds the attention). */
    bool scoped = c->st.cuda_graph == PASS_GRAPH_MOE || c->st.cuda_graph == PASS_GRAPH_ATTN_MOE;
    int rf = scoped && moe >= 0 ? router_first(g, &g->nodes[moe]) : -1;
    if (rf < P->first)
        rf = -1;
    int a0 = attn >= 0 && c->st.cuda_graph == PASS_GRAPH_ATTN_MOE ? P->first : -1;
    int a1 = a0 < 0 ? -1 : rf >= 0 ? rf : moe >= 0 ? moe : end;
    /* mamba: a Mamba layer's piece (its scan, no attention or MoE layer
     * beside it), all of it. */
    if (c->st.cuda_graph_mamba && ssd >= 0 && attn < 0 && moe < 0)
        a0 = P->first, a1 = end;
    double fo = 0, bo = 0;
    bool rec_a = false, rec_r = false;
    for (int id = P->first; id < end; id++) {
        const IrNode *n = &g->nodes[id];
        double f, b;
        node_ops(c, g, n, m, &f, &b);
        /* The overlap's schedule-node calls around the node's ops (a2a; a
         * recomputation re-runs the ops inside, not the calls): attn's
         * launched before its ops, also around a graph's replay. */
        double nf = 0, nb = 0;
        if (a2a && n->op == IR_OP_ATTENTION)
            nf = A2A_ATTN_CALLS_F, nb = A2A_ATTN_CALLS_B, ord_ops(h->ord_f, nf, t, 0);
        else if (a2a && n->op == IR_OP_MOE)
            nf = A2A_MOE_CALLS_F, nb = A2A_MOE_CALLS_B;
        fo += nf, bo += nb;
        f += colls[2 * (id - P->first)], b += colls[2 * (id - P->first) + 1];
        bool rec = pass_recomputed(c, g, n, r);
        double gs = ncs ? ncs[id - P->first].fwd_s : 0;
        h->gpu_f += gs;
        /* A captured graph: one launch forward (here, at its first node:
         * it runs the nodes after it too), one for its backward graph. */
        if (a0 >= 0 && id >= a0 && id < a1) {
            rec_a |= rec;
            ord_ops(h->ord_f, id == a0, t, gs);
            continue;
        }
        if (rf >= 0 && id >= rf && id < moe) {
            rec_r |= rec;
            ord_ops(h->ord_f, id == rf, t, gs);
            continue;
        }
        if (rf >= 0 && id == moe)
            f -= 1; /* moe_preprocess runs in the router's graph */
        fo += f, bo += b + (rec ? f : 0);
        if (n->op == IR_OP_MOE && c->st.moe_sync) {
            h->syncs_f += 1;
            h->syncs_b += rec;
            /* Launched before the sync: the edge's collectives and the
             * preprocessing unless graphed, whose GPU time is the router's
             * (another node); then the host waits, and launches the rest. */
            double pre = colls[2 * (id - P->first)] + (rf >= 0 ? 0 : 1), pn = nf > 0 ? 1 : 0;
            ord_ops(h->ord_f, pre + pn, t, 0); /* moe_dispatch's call too */
            ord_sync(h->ord_f);
            ord_ops(h->ord_f, f - pre + nf - pn, t, gs);
        } else {
            ord_ops(h->ord_f, n->op == IR_OP_MOE ? f + nf : f, t, gs); /* attn's walked above */
        }
    }
    int ga = a0 >= 0, gr = rf >= 0;
    fo += ga + gr;
    bo += ga + gr + rec_a + rec_r;
    h->fwd_s = fo * t, h->bwd_s = bo * t;
}

void pass_host_add(PassHostCost *sum, const PassHostCost *h)
{
    sum->fwd_s += h->fwd_s, sum->bwd_s += h->bwd_s;
    sum->syncs_f += h->syncs_f, sum->syncs_b += h->syncs_b;
    sum->gpu_f += h->gpu_f;
    if (h->ord_n > 0 && sum->ord_n > 0)
        ord_mul(sum->ord_f, h->ord_f); /* h's piece runs after sum's */
    else if (h->ord_n > 0)
        memcpy(sum->ord_f, h->ord_f, sizeof h->ord_f);
    sum->ord_n += h->ord_n;
}

/* The forward: at least all its launches, and one after each sync, beside
 * its GPU work (the bound without the order); and at least its GPU work
 * plus the GPU's idle time the walk finds, from the host ahead of the GPU
 * by what the previous backward's GPU work (whose launches never wait)
 * outlasts its launches (s). The walk's GPU seconds are the nodes' own;
 * *gf may be less (an all-to-all overlapped with another micro-batch), so
 * only the idle time is carried over. */
void pass_host_bound(const PassCostCtx *c, const PassHostCost *h, double *gf, double *gb)
{
    double t = pass_host_op_s(c);
    if (t <= 0)
        return;
    double f = fmax(*gf, h->fwd_s) + h->syncs_f * t;
    if (h->ord_n > 0) {
        double s = fmax(0, *gb - h->bwd_s);
        double end = fmax(h->ord_f[1][0], h->ord_f[1][1] + s) - s;
        f = fmax(f, *gf + fmax(0, end - h->gpu_f));
    }
    *gf = f;
    *gb = fmax(*gb, h->bwd_s) + h->syncs_b * t;
}
