/* cost_ops.c: FLOPs, memory traffic and time of one forward node and its
 * backward on one rank, from its local (sharded) shapes. One function per
 * operator of ops.def (pass_opcost_<ID>), dispatched through a table the
 * X-macro builds, so a new operator without a cost fails to compile.
 *
 * ptdc's own programs are priced call by call: each operator costs the
 * runtime calls codegen makes for it (codegen/cg_kernel.c), each call
 * priced by pass_kernel_time / pass_gemm_time on the device (measured
 * curves where `ptdc calibrate` measured them). Options of the stack
 * (unfused norms, an fp32 loss, materialised attention) describe other
 * implementations with their own traffic counts.
 *
 * Conventions: bytes count every read and write a kernel makes of memory
 * (the backend's activation width, fp32 statistics); elementwise FLOPs are
 * ignored (bandwidth bound); backward of a forward node is charged to that
 * node, with the additions that sum its outputs' gradient contributions. */
#include "cost/cost.h"

#include <math.h>
#include <string.h>

typedef struct OpArgs {
    const PassCostCtx *c;
    const IrGraph *g;
    const IrNode *n;
    const PlanMesh *m;
    const PlanStrategy *s;
    const int64_t *local;         /* local size of every dim inside n */
} OpArgs;

static double lnumel(const OpArgs *a, int t)
{
    const IrTensor *x = &a->g->tensors[t];
    double n = 1;
    for (int i = 0; i < x->rank; i++)
        n *= (double)a->local[x->dim[i]];
    return n;
}

static const PassGpu *gpu(const OpArgs *a) { return &a->c->cl->gpu; }

/* Bytes of an activation element in the backend being priced. */
static int eb(const OpArgs *a) { return gpu(a)->act_bytes > 0 ? gpu(a)->act_bytes : 2; }

static bool needs_grad(const OpArgs *a, int t) { return a->g->tensors[t].role != IR_INPUT; }

/* A memory-bound op: fwd and bwd traffic in units of elements x bytes. */
static void membound(const OpArgs *a, PassNodeCost *o, double bf, int kf, double bb, int kb)
{
    o->bytes_fwd += bf;
    o->bytes_bwd += bb;
    o->fwd_s += pass_mem_time(gpu(a), bf, kf);
    o->bwd_s += bb > 0 ? pass_mem_time(gpu(a), bb, kb) : 0;
}

/* One call of runtime kernel k, forward or backward. */
static void kcall(const OpArgs *a, PassNodeCost *o, bool bwd, PassKernel k, double rows, double cols)
{
    double b = pass_kernel_bytes(k, rows, cols, eb(a));
    double t = pass_kernel_time(gpu(a), k, rows, cols);
    if (bwd)
        o->bytes_bwd += b, o->bwd_s += t;
    else
        o->bytes_fwd += b, o->fwd_s += t;
}

/* batch GEMMs of one shape, issued in one call with their siblings'
 * (plan_gemm_batch): `calls` such groups in the call, of which this is one
 * share (the waves hold every group's tiles; one per-call overhead); the
 * operands in format p (cost_prec.c). */
static void gemm_share_p(const OpArgs *a, double M, double N, double K, double batch, int calls,
                         bool bwd, PlanPrecision p, PassNodeCost *o)
{
    double ib = p == PLAN_PREC_BF16 ? eb(a) : pass_prec_elem_bytes(p);
    double f = 2 * M * N * K * batch, b = (ib * (M * K + K * N) + eb(a) * M * N) * batch;
    double t = pass_gemm_time_prec(gpu(a), M, N, K, batch * calls, p) / calls;
    o->gemm_s += t;
    if (bwd) {
        o->flops_bwd += f, o->bytes_bwd += b, o->bwd_s += t;
    } else {
        o->flops_fwd += f, o->bytes_fwd += b, o->fwd_s += t;
    }
}

static void gemm_share(const OpArgs *a, double M, double N, double K, double batch, int calls,
                       bool bwd, PassNodeCost *o)
{
    gemm_share_p(a, M, N, K, batch, calls, bwd, PLAN_PREC_BF16, o);
}

static void gemm(const OpArgs *a, double M, double N, double K, double batch, bool bwd,
                 PassNodeCost *o)
{
    gemm_share(a, M, N, K, batch, 1, bwd, o);
}

/* A low-precision GEMM's casts (docs/precision.md): t seconds of
 * quantising kernels, forward or backward. */
static void cast(PassNodeCost *o, bool bwd, double t)
{
    o->cast_s += t;
    if (bwd)
        o->bwd_s += t;
    else
        o->fwd_s += t;
}

/* The amax all-reduces of a quantised operand under per-tensor current
 * scaling: its shards must share one scale, so its amax is max-reduced over
 * each axis that splits it other than by the batch (plan_amax_axes, the
 * groups the programs reduce over), one float each. which: 0 the input, 1
 * the weight, 2 the output's gradient. */
static double amax_reduce_s(const OpArgs *a, PlanPrecision p, int which)
{
    bool tensor_scale = p == PLAN_PREC_NVFP4 || (p == PLAN_PREC_FP8 && a->c->st.lp_scaling == PASS_SCALING_CURRENT);
    if (!tensor_scale)
        return 0;
    int axes = plan_amax_axes(a->g, a->n, a->s, which);
    double t = 0;
    for (int ax = 0; ax < a->m->naxes; ax++)
        if ((axes >> ax & 1) && a->m->size[ax] > 1)
            t += pass_cost_coll(a->c, a->m, &(PlanColl){.kind = PLAN_COLL_ALLREDUCE, .axis = ax, .numel = 1}, 4);
    return t;
}

/* ------------------------------------------------------------ operators */
static void pass_opcost_EMBEDDING(const OpArgs *a, PassNodeCost *o)
{
    double x = lnumel(a, a->n->out[0]), ids = lnumel(a, a->n->in[0]);
    /* Gather rows; backward adds dy rows into the table's gradient. */
    kcall(a, o, false, PASS_K_EMBEDDING_FWD, ids, x / ids);
    kcall(a, o, true, PASS_K_EMBEDDING_BWD, ids, x / ids);
}

static void pass_opcost_MATMUL(const OpArgs *a, PassNodeCost *o)
{
    const IrNode *n = a->n;
    double K = 1;
    for (int i = 0; i < n->attr.ncontract; i++)
        K *= (double)a->local[n->attr.contract[i]];
    double M = lnumel(a, n->in[0]) / K, N = lnumel(a, n->in[1]) / K;
    /* The forward GEMM and the weight's gradient run batched with their
     * siblings'; dA accumulates into one sum, call after call. */
    int calls = a->c->st.gemm_unbatched ? 1
                : a->c->plan        ? plan_gemm_batch(a->g, n, a->c->plan, NULL)
                                    : plan_gemm_siblings(a->g, n, NULL);
    PlanPrecision p = pass_prec_of(a->c, a->g, n);
    bool dA = needs_grad(a, n->in[0]), dB = needs_grad(a, n->in[1]);
    /* Each of the three GEMMs on its own (gemm_fwd_s, gemm_dx_s,
     * gemm_dw_s): a tensor-parallel collective can run beside one of them
     * (pass_predict, the stack's tp_overlap). */
    double t0 = o->gemm_s;
    gemm_share_p(a, M, N, K, 1, calls, false, p, o);
    o->gemm_fwd_s = o->gemm_s - t0;
    if (dA) {
        t0 = o->gemm_s;
        gemm_share_p(a, M, K, N, 1, 1, true, p, o); /* dA = dC B^T */
        o->gemm_dx_s = o->gemm_s - t0;
    }
    if (dB) {
        t0 = o->gemm_s;
        gemm_share_p(a, K, N, M, 1, calls, true, p, o); /* dB = A^T dC */
        o->gemm_dw_s = o->gemm_s - t0;
    }
    if (p == PLAN_PREC_BF16)
        return;
    /* Forward: the input, shared by the siblings that read it (one cast per
     * call), in both orientations when the weight gradient reads it again;
     * the weight each micro-batch unless the stack caches it for the step
     * (then once per step, not charged: a step's weights once, under 0.1%
     * of a step). Backward: the output's gradient in both orientations
     * (dgrad reads it rowwise, wgrad columnwise). */
    cast(o, false, pass_prec_cast_act_s(a->c, M * K, p, dB ? 2 : 1, dB) / calls + amax_reduce_s(a, p, 0) / calls);
    if (!a->c->st.lp_weight_cached)
        cast(o, false, pass_prec_cast_s(a->c, K * N, p, dA ? a->c->st.lp_weight_copies : 1) +
                           amax_reduce_s(a, p, 1));
    if (dA || dB)
        cast(o, true, pass_prec_cast_act_s(a->c, M * N, p, dA && dB ? 2 : 1, dB) + amax_reduce_s(a, p, 2));
}

/* Norms. ptdc's kernels read x and write y in one pass (rstd per row);
 * unfused framework norms run ~6 kernels in fp32 (to-fp32, pow, mean, rsqrt
 * multiply, to-bf16, weight multiply) forward and about twice that backward.
 * A norm right after the residual add it reads runs with it as one call
 * (plan_add_norm_pair): the pair costs that call, the add's own price
 * standing, so the norm's forward is the call less an rt_add (fused_s
 * records the difference for what runs it alone: a recomputation, a stage
 * cut between the two). */
static void norm(const OpArgs *a, PassNodeCost *o, int stats)
{
    double x = lnumel(a, a->n->in[0]), rows = lnumel(a, a->n->out[1]);
    if (a->c->st.norm_unfused) {
        membound(a, o, 36 * x + 8 * rows * stats, 6 + stats, 64 * x + 8 * rows * stats, 11 + stats);
        o->ws_bytes = 8 * x;
        return;
    }
    PassKernel fwd = stats == 1 ? PASS_K_RMSNORM_FWD : PASS_K_LAYERNORM_FWD;
    if (!a->c->st.add_norm_unfused && plan_add_norm_pair(a->g, a->n)) {
        const PassGpu *d = gpu(a);
        PassKernel fused = stats == 1 ? PASS_K_ADD_RMSNORM_FWD : PASS_K_ADD_LAYERNORM_FWD;
        double alone = pass_kernel_time(d, fwd, rows, x / rows);
        double pair = pass_kernel_time(d, fused, rows, x / rows) - pass_kernel_time(d, PASS_K_ADD, 1, x);
        /* What the program runs, also where a measured curve makes the
         * call dearer than the two (codegen fuses regardless). */
        o->fused_s = pair - alone;
        o->fwd_s += pair;
        o->bytes_fwd += pass_kernel_bytes(fused, rows, x / rows, eb(a)) - pass_kernel_bytes(PASS_K_ADD, 1, x, eb(a));
    } else {
        kcall(a, o, false, fwd, rows, x / rows);
    }
    kcall(a, o, true, stats == 1 ? PASS_K_RMSNORM_BWD : PASS_K_LAYERNORM_BWD, rows, x / rows);
}

double pass_rec_fwd_s(const PassCostCtx *c, const IrGraph *g, const IrNode *n, PlanRecompute r,
                      const PassNodeCost *nc)
{
    const IrNode *a = &g->nodes[n->id - 1];
    if (nc->fused_s != 0 && (a->piece != n->piece || !pass_recomputed(c, g, a, r)))
        return nc->fwd_s - nc->fused_s;
    return nc->fwd_s;
}

static void pass_opcost_RMSNORM(const OpArgs *a, PassNodeCost *o) { norm(a, o, 1); }
static void pass_opcost_LAYERNORM(const OpArgs *a, PassNodeCost *o) { norm(a, o, 2); }

static void pass_opcost_ROPE(const OpArgs *a, PassNodeCost *o)
{
    double x = lnumel(a, a->n->in[0]);
    const IrTensor *t = &a->g->tensors[a->n->in[0]];
    double dim = (double)a->local[t->dim[t->rank - 1]];
    if (a->c->st.rope_unfused) {
        /* Megatron-Core's _apply_rotary_pos_emb_bshd (core/models/common/
         * embeddings/rope_utils.py) as eager PyTorch ops, elements moved per
         * element of x: t * cos (2), -x2 on half the rows' columns (1),
         * cat(-x2, x1) (2), * sin (2), the sum (3), cat(t, t_pass) with an
         * empty t_pass (2): 12 in 6 kernels. Autograd: the two products'
         * gradients (2 + 2), the negation's (1), the chunk's halves joined
         * (2), the two paths summed (3): 10 in 5 kernels. The cos and sin
         * tables ([seq, dim], computed once per forward) and the slices'
         * views move nothing worth counting. Nothing more is saved: the
         * products keep cos and sin, not x. */
        membound(a, o, 12.0 * eb(a) * x, 6, 10.0 * eb(a) * x, 5);
        return;
    }
    kcall(a, o, false, PASS_K_ROPE, x / dim, dim);
    kcall(a, o, true, PASS_K_ROPE, x / dim, dim); /* the inverse rotation */
}

static PassAttnKernel attn_kernel(const PassCostCtx *c)
{
    if (c->st.attn_kernel != PASS_KERNEL_AUTO)
        return c->st.attn_kernel;
    return c->attention == PLAN_ATTN_MATERIALIZED ? PASS_KERNEL_FUSED_SOFTMAX : PASS_KERNEL_FLASH2;
}

/* Transformer Engine's UnfusedDotProductAttention with attention sinks
 * (softmax_type learnable or off-by-one: TE 2.8-2.17 backends.py), the
 * backend TE falls back to where FusedAttention cannot take sinks (cuDNN
 * before 9.13.1, determinism; utils.py get_attention_backend,
 * fused_attn.cpp; FP8 attention has neither) and FlashAttention never can. Per
 * score element of the B x H x S x (Sk + 1) tensor, after the QK^T GEMM
 * (scale inside it, alpha) has written the S x Sk scores:
 *   forward  torch.cat of the sink column (read 2, write 2 B); the softmax
 *            then cannot use TE's fused masked-softmax kernel (it needs
 *            Sk + 1 % 8 == 0), so it runs forward_torch_softmax: .float()
 *            (2 + 4), masked_fill with the full [1, 1, S, Sk + 1] mask
 *            (4 + 4; causal and window masks alike: every score is
 *            computed), softmax (4 + 4), .bfloat16() (4 + 2); the probs'
 *            slice [..., :-1] is a view PV's bmm reads strided:
 *            32 B in 5 kernels;
 *   backward the slice's backward (zeros of the full shape, then the copy:
 *            2 + 2 + 2), .bfloat16()'s (2 + 4), softmax's (4 + 4 + 4),
 *            masked_fill's (4 + 4), .float()'s (4 + 2): 38 B in 6 kernels;
 *            cat's backward is views, the sinks' gradient a sum over the
 *            column (B H S elements, one kernel).
 * Forward also repeats K and V to every query head (repeat_interleave; its
 * backward sums them back) and makes the output contiguous. The mask
 * itself (S x (Sk + 1) bytes, no head dim) is left out, and so is dropout:
 * at p = 0 torch's dropout returns its input (GPT-OSS trains without
 * attention dropout, and FusedAttention's window needs none). What autograd
 * keeps, the fp32 softmax output and the bf16 probabilities, is counted by
 * mem_saved.c; the transients are the workspace: at the softmax the cat's
 * bf16 scores, the fp32 input and the masked fp32 copy live beside the
 * kept output (2 + 4 + 4 B). */
static void te_unfused_sinks(const OpArgs *a, double B, double H, double S, double Sk,
                             PassNodeCost *o)
{
    double ss1 = B * H * S * (Sk + 1);
    const IrTensor *k = &a->g->tensors[a->n->in[1]], *v = &a->g->tensors[a->n->in[2]];
    double kv = lnumel(a, a->n->in[1]) + lnumel(a, a->n->in[2]);
    double hkv = (double)a->local[k->dim[2]], rep = hkv > 0 ? H / hkv : 1;
    double dv = (double)a->local[v->dim[3]];
    membound(a, o, 32 * ss1 + eb(a) * kv * (1 + rep) + 2 * eb(a) * B * S * H * dv, 5 + 2 + 1,
             38 * ss1 + (double)eb(a) * (B * H * S + kv * (1 + rep)), 6 + 1 + 2);
    o->ws_bytes = 10 * ss1;
}

/* plan_cp_balanced reads every tensor of the graph: once per search (the
 * memo), not once per attention node priced. */
static bool cp_balanced(const PassCostCtx *c, const IrGraph *g)
{
    PassMemo *m = c->memo && c->memo->g == g ? c->memo : NULL;
    if (!m)
        return plan_cp_balanced(g);
    if (!m->cp_balanced)
        m->cp_balanced = plan_cp_balanced(g) ? 1 : -1;
    return m->cp_balanced > 0;
}

static void attention_kernels(const OpArgs *a, PassNodeCost *o)
{
    const IrGraph *g = a->g;
    const IrTensor *q = &g->tensors[a->n->in[0]];
    double B = (double)a->local[q->dim[0]], S = (double)a->local[q->dim[1]];
    double H = (double)a->local[q->dim[2]], D = (double)a->local[q->dim[3]];
    /* v's head size (MLA: 128 against q and k's 192): Q K^T contracts D, P V
     * makes Dv; with Dv = D the forms below are the usual ones. */
    const IrTensor *vt = &g->tensors[a->n->in[2]];
    double Dv = (double)a->local[vt->dim[3]], Dm = (D + Dv) / 2;
    /* Context parallelism: S local queries against all Sk keys, gathered
     * (k and v read whole); the slowest rank's share of the pairs. The
     * all-to-all form attends the whole sequence (S is whole there) with
     * heads / cp heads (H is local): every pair, balanced by construction;
     * its all-to-alls are the plan's collectives around the op. */
    int cpa = plan_cp_a2a(g, a->n, a->s) >= 0 ? -1 : plan_cp_axis(g, a->n, a->s);
    int cp = cpa >= 0 ? a->m->size[cpa] : 1;
    double Sk = S * cp, kvf = cp;
    const IrNode *f = a->n->fwd >= 0 ? &g->nodes[a->n->fwd] : a->n;
    double pairs = plan_cp_pairs_max((int64_t)Sk, cp, cp > 1 && cp_balanced(a->c, g), f->attr.causal,
                                     f->attr.window);
    double qkvo = (lnumel(a, a->n->in[0]) + lnumel(a, a->n->out[0])) +
                  (lnumel(a, a->n->in[1]) + lnumel(a, a->n->in[2])) * kvf; /* elements */
    const PassGpu *gp = gpu(a);
    const PassCostConsts *k = &pass_cost_consts;
    PassAttnKernel kind = attn_kernel(a->c);
    if (kind == PASS_KERNEL_FLASH2 || kind == PASS_KERNEL_FLASH1) {
        /* Tiles above the diagonal are skipped under a causal mask, and those
         * left of a sliding window's band too: the band of width W < S covers
         * S W - W^2 / 2 of the S^2 scores (S^2 / 2 at W = S). */
        double f = 2 * B * H * pairs * (D + Dv);
        double ef = kind == PASS_KERNEL_FLASH2 ? k->flash2_fwd : k->flash1_fwd;
        double ebw = kind == PASS_KERNEL_FLASH2 ? k->flash2_bwd : k->flash1_bwd;
        double rate = gp->peak_flops * gp->gemm_eff;
        double rf = rate * ef, rb = rate * ebw, ovh = gp->kernel_overhead_s;
        /* ptdc's own kernel at the speed calibration measured, when it did. */
        if (a->c->st.attn_kernel == PASS_KERNEL_AUTO && gp->attn_dims > 0) {
            rf = pass_attn_rate(gp, 0, Dm, S);
            rb = pass_attn_rate(gp, 1, Dm, S);
            ovh = 0; /* inside the measured rate */
        }
        o->flops_fwd += f;
        o->flops_bwd += f * k->flash_bwd_ratio;
        o->bytes_fwd += eb(a) * qkvo;
        o->bytes_bwd += 2 * eb(a) * qkvo;
        o->fwd_s += f / rf + ovh;
        o->bwd_s += f * k->flash_bwd_ratio / rb + 2 * ovh;
        o->attn_s += f / rf + f * k->flash_bwd_ratio / rb + 3 * ovh;
        /* A GPU backward adds dQ with atomics into an fp32 buffer
         * (FlashAttention's dq_accum, ptdc's rtcu_scratch) held while it
         * runs; the CPU kernels sum dQ in place. */
        if (gp->kind != PASS_DEV_CPU)
            o->ws_bytes = 4 * B * S * H * D;
        return;
    }
    /* Materialised: QK^T and PV as batched GEMMs over all S x S (the mask is
     * applied after), softmax over S x S in HBM. */
    double ss = B * H * S * Sk;
    gemm(a, S, Sk, D, B * H, false, o); /* scores = Q K^T */
    gemm(a, S, Dv, Sk, B * H, false, o); /* O = P V */
    gemm(a, Sk, Dv, S, B * H, true, o);  /* dV = P^T dO */
    gemm(a, S, Sk, Dv, B * H, true, o);  /* dP = dO V^T */
    gemm(a, S, D, Sk, B * H, true, o);  /* dQ = dS K */
    gemm(a, Sk, D, S, B * H, true, o);  /* dK = dS^T Q */
    if (pass_attn_te_sinks(a->c, a->n)) {
        te_unfused_sinks(a, B, H, S, Sk, o);
        return;
    }
    if (a->c->st.attn_dropout) /* mask and output forward; mask, dy, dx backward */
        membound(a, o, 5 * ss, 1, 5 * ss, 1);
    if (kind == PASS_KERNEL_FUSED_SOFTMAX) {
        /* One scale-mask-softmax kernel: read scores, write P; backward reads
         * P and dP, writes dS. */
        membound(a, o, 4 * ss, 1, 6 * ss, 1);
        o->ws_bytes = 4 * ss;
    } else {
        /* Eager: scale, mask, to-fp32, softmax, to-bf16 (28 B per element);
         * backward to-fp32, softmax-backward, to-bf16, mask, scale (32 B). */
        membound(a, o, 28 * ss, 5, 32 * ss, 5);
        o->ws_bytes = 8 * ss;
    }
}

/* Context parallelism's ring (plan_cp_ring, docs/context.md): the kernels
 * run block by block, cp blocks of K/V travelling the ring; a block's
 * transfer (the gather's per-step share) overlaps the previous block's
 * compute, and the backward's carries dK/dV with K/V, then one hop home. */
static void pass_opcost_ATTENTION(const OpArgs *a, PassNodeCost *o)
{
    PassNodeCost c = *o;
    attention_kernels(a, &c);
    int cpa = plan_cp_axis(a->g, a->n, a->s), cp = cpa >= 0 ? a->m->size[cpa] : 1;
    if (!plan_cp_ring(a->g, a->n, a->s) || cp < 2) {
        *o = c;
        return;
    }
    double kv = lnumel(a, a->n->in[1]) + lnumel(a, a->n->in[2]);
    PlanColl x = {PLAN_COLL_ALLGATHER, cpa, -1, -1, (int64_t)(kv * cp)};
    double tx = pass_cost_coll(a->c, a->m, &x, eb(a)) / (cp - 1);
    /* Each block is its own kernel launch (two backward). */
    double ovh = gpu(a)->kernel_overhead_s;
    double fw = (c.fwd_s - o->fwd_s - ovh) / cp + ovh, bw = (c.bwd_s - o->bwd_s - 2 * ovh) / cp + 2 * ovh;
    c.fwd_s = o->fwd_s + fw + (cp - 1) * fmax(fw, tx);
    c.bwd_s = o->bwd_s + bw + (cp - 1) * fmax(bw, 2 * tx) + tx;
    /* rt_attention_ring_scratch, the backward's (the larger): two K/V
     * blocks in flight, one block's dK/dV, two fp32 dK/dV accumulators in
     * flight and the fp32 dQ. */
    c.ws_bytes += eb(a) * 3 * kv + 4 * (2 * kv + lnumel(a, a->n->in[0]));
    *o = c;
}

static void pass_opcost_SILU(const OpArgs *a, PassNodeCost *o)
{
    double x = lnumel(a, a->n->in[0]);
    kcall(a, o, false, PASS_K_SILU_FWD, 1, x);
    kcall(a, o, true, PASS_K_SILU_BWD, 1, x);
}
static void pass_opcost_GELU(const OpArgs *a, PassNodeCost *o)
{
    double x = lnumel(a, a->n->in[0]);
    kcall(a, o, false, PASS_K_GELU_FWD, 1, x);
    kcall(a, o, true, PASS_K_GELU_BWD, 1, x);
}

/* Fused: one kernel each way. Eager (a framework's silu(gate) * up): silu,
 * then the product; backward, the product's two gradients (dy * up,
 * dy * silu(gate)) and silu's. */
static void pass_opcost_SWIGLU(const OpArgs *a, PassNodeCost *o)
{
    double x = lnumel(a, a->n->out[0]);
    bool grad = needs_grad(a, a->n->in[0]) || needs_grad(a, a->n->in[1]);
    if (a->c->st.swiglu_unfused) {
        kcall(a, o, false, PASS_K_SILU_FWD, 1, x);
        kcall(a, o, false, PASS_K_MUL, 1, x);
        if (grad) {
            kcall(a, o, true, PASS_K_MUL, 1, x);
            kcall(a, o, true, PASS_K_MUL, 1, x);
            kcall(a, o, true, PASS_K_SILU_BWD, 1, x);
        }
        return;
    }
    kcall(a, o, false, PASS_K_SWIGLU_FWD, 1, x);
    if (grad)
        kcall(a, o, true, PASS_K_SWIGLU_BWD, 1, x);
}

static void pass_opcost_ADD(const OpArgs *a, PassNodeCost *o)
{
    double y = lnumel(a, a->n->out[0]);
    double x0 = lnumel(a, a->n->in[0]), x1 = lnumel(a, a->n->in[1]);
    double small = x0 < x1 ? x0 : x1;
    if (small < y)
        kcall(a, o, false, PASS_K_ADD_BCAST, y / small, small);
    else
        kcall(a, o, false, PASS_K_ADD, 1, y);
    /* Backward passes dy through; a broadcast operand sums it over rows. */
    for (int i = 0; i < 2; i++) {
        double x = i ? x1 : x0;
        if (x < y && needs_grad(a, a->n->in[i]))
            kcall(a, o, true, PASS_K_REDUCE_ROWS, y / x, x);
    }
}

static void pass_opcost_MUL(const OpArgs *a, PassNodeCost *o)
{
    double y = lnumel(a, a->n->out[0]);
    double x0 = lnumel(a, a->n->in[0]), x1 = lnumel(a, a->n->in[1]);
    double small = x0 < x1 ? x0 : x1;
    kcall(a, o, false, small < y ? PASS_K_ADD_BCAST : PASS_K_MUL, small < y ? y / small : 1,
          small < y ? small : y);
    /* Backward: dy times the other operand, per operand needing a gradient;
     * a broadcast operand's product is then summed over rows. */
    for (int i = 0; i < 2; i++) {
        double x = i ? x1 : x0;
        if (!needs_grad(a, a->n->in[i]))
            continue;
        kcall(a, o, true, PASS_K_MUL, 1, y);
        if (x < y)
            kcall(a, o, true, PASS_K_REDUCE_ROWS, y / x, x);
    }
}

static void pass_opcost_SOFTMAX(const OpArgs *a, PassNodeCost *o)
{
    double x = lnumel(a, a->n->in[0]);
    const IrTensor *t = &a->g->tensors[a->n->in[0]];
    double cols = (double)a->local[t->dim[t->rank - 1]];
    kcall(a, o, false, PASS_K_SOFTMAX_FWD, x / cols, cols);
    kcall(a, o, true, PASS_K_SOFTMAX_BWD, x / cols, cols);
}

/* ptdc's loss reads the logits twice (max, then sum of exponentials) and
 * writes the row lse; backward reads them once and writes dlogits. With the
 * vocabulary split, the row max, sum and target logit are all-reduced over
 * that axis. Megatron's fp32 loss: to-fp32, max, subtract, exp, sum, ...
 * (about 30 B per logit) and backward in fp32 then to-bf16 (22 B). */
static void pass_opcost_CROSS_ENTROPY(const OpArgs *a, PassNodeCost *o)
{
    const IrGraph *g = a->g;
    double x = lnumel(a, a->n->in[0]), rows = lnumel(a, a->n->in[1]);
    if (a->c->st.loss_fp32) {
        membound(a, o, 30 * x + 16 * rows, 7, 22 * x, 3);
        o->ws_bytes = 2 * x;
    } else {
        kcall(a, o, false, PASS_K_CROSS_ENTROPY_FWD, rows, x / rows);
        kcall(a, o, true, PASS_K_CROSS_ENTROPY_BWD, rows, x / rows);
    }
    /* A split vocabulary: the row max, then the sum of exponentials, the
     * target logit and the owner count (runtime/cpu/cross_entropy.c: two
     * all-reduces of all rows). */
    const IrTensor *lg = &g->tensors[a->n->in[0]];
    int vocab = lg->dim[lg->rank - 1];
    for (int ax = 0; ax < a->m->naxes; ax++)
        if (a->s->dim[ax] == vocab && a->m->size[ax] > 1) {
            PlanColl k1 = {PLAN_COLL_ALLREDUCE, ax, -1, -1, (int64_t)rows};
            PlanColl k3 = {PLAN_COLL_ALLREDUCE, ax, -1, -1, (int64_t)(3 * rows)};
            o->fwd_s += pass_cost_coll(a->c, a->m, &k1, 4) + pass_cost_coll(a->c, a->m, &k3, 4);
        }
}

/* The traffic of silu's kernels: one input read and one output written
 * forward, two read and one written backward. */
static void pass_opcost_SIGMOID(const OpArgs *a, PassNodeCost *o) { pass_opcost_SILU(a, o); }

/* The router's kernel reads a row of expert scores and writes the gates
 * (a softmax's traffic); its backward reads logits, gates and dgates. */
static void pass_opcost_ROUTE(const OpArgs *a, PassNodeCost *o)
{
    double x = lnumel(a, a->n->in[0]);
    const IrTensor *t = &a->g->tensors[a->n->in[0]];
    double cols = (double)a->local[t->dim[t->rank - 1]];
    kcall(a, o, false, PASS_K_SOFTMAX_FWD, x / cols, cols);
    kcall(a, o, true, PASS_K_SOFTMAX_BWD, x / cols, cols);
    membound(a, o, 0, 0, eb(a) * x, 0);
}

/* Whether the router's logits carry a bias (an add of a parameter after
 * its GEMM): a model with biases on every linear layer, which Megatron
 * builds with --add-bias-linear, giving TopKRouter a bias (router.py) and
 * TEGroupedMLP's experts two (experts.py; report/plan_arch.c reads the
 * same layer as such). */
static bool router_biased(const IrGraph *g, const IrNode *moe)
{
    int r = g->tensors[moe->in[1]].producer;
    if (r < 0 || g->nodes[r].op != IR_OP_ROUTE)
        return false;
    int b = g->tensors[g->nodes[r].in[0]].producer;
    if (b < 0 || g->nodes[b].op != IR_OP_ADD)
        return false;
    const IrNode *x = &g->nodes[b];
    return g->tensors[x->in[0]].role == IR_PARAM || g->tensors[x->in[1]].role == IR_PARAM;
}

/* The experts' output bias as Megatron-Core adds it (stack key
 * moe_bias_unfused; TEGroupedMLP._apply_bias, core/transformer/moe/
 * experts.py): for each of the El local experts, t + b * p over its rows
 * (t: fc2's output, b: the expert's [D] bias, p: the rows' routing
 * weights, [rows, 1], in the type of pb bytes), then a cat of the experts'
 * rows and a cast back to the activations' type (e bytes; none when pb is
 * e). Per element of the R x D output, forward: b * p written (pb), the
 * sum (e + pb in, pb out), the cat (pb, pb), the cast (pb, e); backward
 * (autograd): the cast's gradient (e, pb), t's gradient cast to t's type
 * (pb, e), and each product's gradients, grad * p and grad * b, each
 * written and then summed over rows or columns (3 pb each). The bias and
 * weight vectors themselves are negligible; nothing is saved but them.
 * fc1's bias is not here: GroupedLinear adds it in the GEMM and its
 * gradient comes with the weight's (BF16: the wgrad GEMM's epilogue) or
 * with the gradient's cast (FP8: bgrad_quantize). */
static void moe_out_bias(const OpArgs *a, PassNodeCost *o, double R, double D, double El)
{
    double e = eb(a), pb = a->c->st.moe_probs_fp32 ? 4 : e;
    bool cast = pb != e;
    double f = pb + (e + 2 * pb) + 2 * pb + (cast ? pb + e : 0);
    double b = (cast ? 2 * (e + pb) : 0) + 6 * pb;
    int kf = (int)(2 * El) + 1 + cast, kb = (int)((cast ? 6 : 4) * El) + cast;
    membound(a, o, f * R * D, kf, b * R * D, kb);
}

/* A clamped activation's clamps as Megatron-Core runs them (stack key
 * moe_clamp_unfused; weighted_bias_quick_geglu_impl, core/fusions/
 * fused_bias_geglu.py): over fc1's R x 2F output, chunk (views), the gate
 * half's clamp(max) and the linear half's clamp(min, max), each reading and
 * writing its R x F half, then torch.cat writing R x 2F for the compiled
 * activation: per element of one R x F half, 2 + 2 + 2 + 2 + 4 + 4 elements
 * = 16 bytes in bf16, 3 kernels. Backward (autograd): cat's is views;
 * clamp(max)'s gradient is where(x <= max, g, 0), a compare (2 B read, a
 * 1 B mask written) and the where (1 + 2 read, 2 written): 8 B in 2
 * kernels; clamp(min, max)'s two compares, their logical_and_ (1 + 1, 1)
 * and the where: 14 B in 4; chunk's (split's) backward cats the halves'
 * gradients (4 + 4): 30 B in 7 kernels. moe_act's recomputation reruns the
 * forward (inside act_fwd_s). The bytes scale with the activations' width
 * (eb), the masks' byte with nothing. */
static bool moe_clamps(const OpArgs *a)
{
    int act = a->n->attr.moe_act;
    return a->c->st.moe_clamp_unfused && !a->c->st.moe_fused_mlp && act >= 0 && act < IR_NMOE_ACTS && ir_moe_acts[act].clamped;
}
static void moe_clamps_fwd(const OpArgs *a, PassNodeCost *o, double R, double F, bool bwd)
{
    double b = 8 * eb(a) * R * F;
    if (bwd)
        membound(a, o, 0, 0, b, 3);
    else
        membound(a, o, b, 3, 0, 0);
}
static void moe_clamps_bwd(const OpArgs *a, PassNodeCost *o, double R, double F)
{
    double e = eb(a);
    membound(a, o, 0, 0, ((e + 1) + (1 + 2 * e) + 2 * (e + 1) + 3 + (1 + 2 * e) + 4 * e) * R * F, 7);
}

/* Transformer Engine's fused grouped MLP (stack key moe_fused_mlp:
 * Megatron-Core's use_transformer_engine_op_fuser, TEGroupedMLP._fused_forward,
 * with NVTE_CUTEDSL_FUSED_GROUPED_MLP=1; TE 2.16-2.17
 * ops/fused/forward_grouped_mlp.py, backward_grouped_mlp.py, grouped_mlp.py)
 * runs an MXFP8 expert MLP on sm_100 as cuDNN front-end CuTeDSL kernels: the
 * input's grouped quantize, fc1 whose epilogue applies the activation and
 * the routing weights and writes fc1's bf16 output (kept for backward) and
 * fc2's input in MXFP8 rowwise and columnwise, then fc2 (bias and weights
 * in its epilogue). Backward: the output gradient's grouped quantize, fc2's
 * dgrad whose epilogue reads fc1's kept output and writes the activation's
 * gradient (and the weights') as fc1's MXFP8 output gradient in both
 * orientations, then the grouped dgrad and wgrad GEMMs. So against the
 * unfused experts (GroupedLinear, the activation, GroupedLinear) four
 * kernels are gone: the activation forward and its cast to fc2's input,
 * the activation backward and the cast of fc1's output gradient; the GEMMs
 * are the same. Only MXFP8 matches: its fuser matches GroupedLinear +
 * ScaledSwiGLU / ScaledClampedQGeGLU / ScaledSReLU + GroupedLinear under an
 * MXFP8 or NVFP4 recipe on compute capability 10 (every Blackwell preset);
 * its NVFP4 variant writes bf16 and casts after (not modelled). */
static bool moe_fused_epilogue(const OpArgs *a, PlanPrecision p)
{
    return a->c->st.moe_fused_mlp && p == PLAN_PREC_MXFP8;
}

/* The experts' kernels follow their activation's row (ir/moe_acts.def): a
 * gated expert runs two first GEMMs (gate, up) and a two-input pointwise
 * kernel (swiglu's traffic), an ungated one one GEMM and a one-input
 * kernel (silu's traffic: relu2 reads u, writes its square); each bias
 * inside the activation is a broadcast add over the rows forward and a row
 * sum backward. */
static void pass_opcost_MOE(const OpArgs *a, PassNodeCost *o)
{
    const IrGraph *g = a->g;
    const IrNode *n = a->n;
    const IrTensor *wg = &g->tensors[n->in[2]];
    double T = lnumel(a, n->in[0]) / (double)a->local[wg->dim[1]];
    double D, F;
    double R = pass_moe_rows(a->c, g, n, a->m, a->s, a->local, &D, &F);
    double El = (double)a->local[wg->dim[0]];
    double k = (double)plan_route_topk(g, n);
    double imb = a->c->st.moe_imbalance > 1 ? a->c->st.moe_imbalance : 1;
    bool keep = a->c->st.moe_saves_rows;
    IrMoeSlots sl = ir_moe_slots(n);
    double up = sl.w_gate >= 0 ? 2 : 1, nb = (sl.b_gate >= 0) + (sl.b_up >= 0);
    PassKernel kf = sl.w_gate >= 0 ? PASS_K_SWIGLU_FWD : PASS_K_SILU_FWD;
    PassKernel kb = sl.w_gate >= 0 ? PASS_K_SWIGLU_BWD : PASS_K_SILU_BWD;
    /* The experts' GEMMs run in the plan's low precision where the stack's
     * do (lp_experts), each operand cast as a dense GEMM's is (below). */
    PlanPrecision p = pass_prec_of(a->c, g, n);
    /* Each expert's GEMMs run its rows, padded in a quantised format to the
     * format's multiple (pass_prec_group_rows): with E not dividing the
     * group's choices the mean R / El is a fraction (Kimi K2: 384 experts,
     * 6 a rank, 10922.7 rows), which no GEMM runs and which the curve would
     * price as a misaligned shape. */
    double M = pass_prec_group_rows(p, R / El);
    bool fused = moe_fused_epilogue(a, p);
    gemm_share_p(a, M, F, D, up * El, 1, false, p, o);  /* gate and up (up alone) */
    for (int b = 0; b < nb; b++)
        kcall(a, o, false, PASS_K_ADD_BCAST, R, F);
    gemm_share_p(a, M, D, F, El, 1, false, p, o);      /* down */
    double act0 = o->fwd_s;
    if (moe_clamps(a))
        moe_clamps_fwd(a, o, R, F, false);
    if (!fused)
        kcall(a, o, false, kf, 1, R * F);
    o->act_fwd_s = o->fwd_s - act0; /* what moe_act reruns */
    kcall(a, o, false, PASS_K_COPY, R, D); /* gather the rows */
    kcall(a, o, false, PASS_K_COPY, R, D); /* scatter and sum */
    if (!keep) {
        kcall(a, o, true, PASS_K_COPY, R, D); /* h's rows again */
        gemm_share_p(a, M, F, D, up * El, 1, true, p, o);   /* recompute gate and up */
        for (int b = 0; b < nb; b++)
            kcall(a, o, true, PASS_K_ADD_BCAST, R, F);
        if (moe_clamps(a))
            moe_clamps_fwd(a, o, R, F, true);
        if (!fused)
            kcall(a, o, true, kf, 1, R * F);
    }
    gemm_share_p(a, M, F, D, El, 1, true, p, o);       /* dact = dy Wd^T */
    double dw0 = o->bwd_s;
    gemm_share_p(a, F, D, M, El, 1, true, p, o);       /* dWd */
    o->moe_dw_s += o->bwd_s - dw0;
    if (!fused)
        kcall(a, o, true, kb, 1, R * F);
    if (moe_clamps(a))
        moe_clamps_bwd(a, o, R, F);
    gemm_share_p(a, M, D, F, up * El, 1, true, p, o);   /* dh from both (from up) */
    dw0 = o->bwd_s;
    gemm_share_p(a, D, F, M, up * El, 1, true, p, o);   /* dWg, dWu (dWu) */
    for (int b = 0; b < nb; b++)
        kcall(a, o, true, PASS_K_REDUCE_ROWS, R, F);    /* the biases' gradients */
    o->moe_dw_s += o->bwd_s - dw0;
    if (p != PLAN_PREC_BF16) {
        /* Each expert's rows are a tensor of their own (GroupedLinear's
         * split_quantize: pass_prec_cast_split_s, a call each where
         * pass_prec_split_calls says), its weights two.
         * Forward: the rows into gate/up and into down, each in both
         * orientations (the weight gradients read them again); the weights
         * unless cached for the step. Backward: the output's gradient
         * rows and the activation's (gate and up), both orientations.
         * The experts' weights are whole on their EP rank (no amax
         * reduction; ETP's is not priced). */
        double fc2_in = fused ? 0 : pass_prec_cast_split_s(a->c, R * F, p, 2, true, El);
        double fc1_dy = fused ? 0 : pass_prec_cast_split_s(a->c, up * R * F, p, 2, true, El);
        cast(o, false, pass_prec_cast_split_s(a->c, R * D, p, 2, true, El) + fc2_in);
        if (!a->c->st.lp_weight_cached)
            cast(o, false, pass_prec_cast_split_s(a->c, (up + 1) * El * D * F, p, a->c->st.lp_weight_copies, false, 2 * El));
        cast(o, true, pass_prec_cast_split_s(a->c, R * D, p, 2, true, El) + fc1_dy);
    }
    kcall(a, o, true, PASS_K_COPY, R, D); /* dy's rows */
    kcall(a, o, true, PASS_K_COPY, R, D); /* dh scattered and summed */
    /* The op fuser's fc2 adds its bias inside the GEMM (GroupedLinear's). */
    if (a->c->st.moe_bias_unfused && !a->c->st.moe_fused_mlp && router_biased(g, n))
        moe_out_bias(a, o, R, D, El);
    o->ws_bytes = eb(a) * R * (2 * D + (2 * up + 1) * F);
    /* One exchange over the group of every exchange axis (EP over dp x tp
     * under parallel folding is one all-to-all over both). */
    unsigned xa = 0;
    for (int ax = 0; ax < a->m->naxes; ax++)
        if ((a->s->xchg & (1u << ax)) && a->m->size[ax] > 1)
            xa |= 1u << ax;
    if (xa) {
        /* The rows this rank sends (its tokens' choices over the
         * group); the busiest receives imb times the mean. */
        double t = pass_cost_a2a_moe(a->c, a->m, xa, T, k, El, D, imb, eb(a));
        int nb = keep ? 2 : 3;
        o->fwd_s += 2 * t;
        o->bwd_s += nb * t;
        o->a2a_s += (2 + nb) * t;
        o->a2a_fwd_s += 2 * t;
        kcall(a, o, false, PASS_K_COPY, R, D); /* sort received rows by expert */
        kcall(a, o, false, PASS_K_COPY, R, D); /* and back */
        for (int i = 0; i < nb; i++)
            kcall(a, o, true, PASS_K_COPY, R, D);
    }
}

/* slice: one copy of the piece; backward writes dx whole, the piece from
 * dy and zeros around it. */
static void pass_opcost_SLICE(const OpArgs *a, PassNodeCost *o)
{
    const IrTensor *x = &a->g->tensors[a->n->in[0]];
    double cols = (double)a->local[x->dim[x->rank - 1]], rows = lnumel(a, x->id) / cols;
    double piece = (double)a->local[a->n->attr.dim[0]];
    kcall(a, o, false, PASS_K_COPY, rows, piece);
    if (needs_grad(a, x->id)) {
        kcall(a, o, true, PASS_K_COPY, rows, piece);
        kcall(a, o, true, PASS_K_ZERO, rows, cols - piece);
    }
}

/* shift: the program reads it from the data like an input (cg_load), each
 * rank its own block; no kernel, no traffic worth pricing beside the step. */
static void pass_opcost_SHIFT(const OpArgs *a, PassNodeCost *o) { (void)a, (void)o; }

/* concat: each output row written once from a's row and b's (b's rows read
 * once per broadcast copy); backward copies a's piece out and sums b's over
 * the copies. */
static void pass_opcost_CONCAT(const OpArgs *a, PassNodeCost *o)
{
    const IrTensor *ta = &a->g->tensors[a->n->in[0]], *tb = &a->g->tensors[a->n->in[1]];
    double A = (double)a->local[ta->dim[ta->rank - 1]], Bc = (double)a->local[tb->dim[tb->rank - 1]];
    double rows = lnumel(a, ta->id) / A, brows = lnumel(a, tb->id) / Bc;
    kcall(a, o, false, PASS_K_COPY, rows, A + Bc);
    if (needs_grad(a, ta->id))
        kcall(a, o, true, PASS_K_COPY, rows, A);
    if (needs_grad(a, tb->id)) {
        if (brows < rows)
            kcall(a, o, true, PASS_K_REDUCE_ROWS, rows / brows, brows * Bc);
        else
            kcall(a, o, true, PASS_K_COPY, rows, Bc);
    }
}

/* ------------------------------------------------------------- Mamba-2 */
/* softplus: silu's traffic (one read, one write; two reads backward). */
static void pass_opcost_SOFTPLUS(const OpArgs *a, PassNodeCost *o) { pass_opcost_SILU(a, o); }
/* memory-bound as silu: one read and one write a value forward, two reads
 * and a write backward (silu's kernels price it) */
static void pass_opcost_RELU2(const OpArgs *a, PassNodeCost *o) { pass_opcost_SILU(a, o); }

/* conv1d: memory-bound (K multiply-adds per element, K = 4 in Mamba): x
 * read once (the window is cached) and y written, the weight and bias
 * read once; backward reads x and dy, writes dx and the weight's gradient
 * (a reduction over rows, as a norm's dw). */
static void pass_opcost_CONV1D(const OpArgs *a, PassNodeCost *o)
{
    double x = lnumel(a, a->n->in[0]), w = lnumel(a, a->n->in[1]);
    double e = eb(a);
    /* Under ssm_fused (cost_ssm.c) the conv1d is causal_conv1d with the
     * silu after it applied inside: the same traffic forward, and backward
     * runs the forward again (mamba_split_conv1d_scan_combined saves only
     * in_proj's output) before causal_conv1d_bwd. */
    int rd[2];
    bool fused = a->c->st.ssm_fused && ir_consumers(a->g, a->n->out[0], rd, 2) == 1 &&
                 pass_ssm_fused_away(a->g, &a->g->nodes[rd[0]]);
    double again = fused ? (2 * x + w) * e : 0;
    membound(a, o, (2 * x + w) * e, 1, again + (3 * x + w) * e + 4 * 2 * w, fused ? 2 : 1);
}

/* ssd: priced as the kernel that runs on GPUs, mamba_ssm's chunked SSD
 * (Dao and Gu 2024, section 6; mamba_chunk_scan_combined, which
 * Megatron's MambaMixer calls with chunk_size 128): the sequence is cut
 * into chunks of Q, and per chunk and head the work is four small GEMMs
 * on tensor cores: C B^T [Q, Q] over the state N (per group), that
 * (masked, decayed) times x [Q, P], the chunk's state B^T x [N, P] over Q,
 * and the output from the incoming state C S [Q, P] over N; passing states
 * between chunks is L/Q steps of N P (memory-bound). Each GEMM is priced as
 * a batch of the GEMM curve's small GEMMs (their low efficiency is the
 * curve's, not a constant here). Backward (mamba_chunk_scan_combined_bwd)
 * recomputes the chunk states and runs each forward GEMM's two gradient
 * GEMMs: 1 + 2 x the forward. Bytes: x, dt, B, C read and y written, the
 * fp32 chunk states written and read once. */
#define SSD_CHUNK 128 /* mamba_ssm's chunk_size as Megatron's MambaMixer sets it */
/* ssm_fused: each kernel of cost_ssm.c's list as a roofline, the longer of
 * its HBM traffic and its dots at the bf16 GEMM curve's efficiency for
 * their shape, plus its launches. */
static void ssd_fused(const OpArgs *a, PassNodeCost *o, double Bt, double L, double H, double P, double G,
                      double N)
{
    const PassGpu *d = gpu(a);
    PassSsdShape sh = {Bt, L, H, P, G, N, SSD_CHUNK, eb(a)};
    PassSsdKernel k[PASS_SSD_MAX_KERNELS];
    int nk = pass_ssd_kernels(&sh, k);
    for (int i = 0; i < nk; i++) {
        double tc = 0;
        for (int j = 0; j < k[i].ndots; j++) {
            const double *m = k[i].dot[j];
            tc += 2 * m[0] * m[1] * m[2] * m[3] / (d->peak_flops * pass_gemm_eff(d, m[0], m[1], m[2], m[3]));
        }
        double tm = pass_mem_time(d, k[i].bytes, 0);
        double t = (tc > tm ? tc : tm) + k[i].kernels * d->kernel_overhead_s;
        if (k[i].bwd)
            o->bwd_s += t, o->bytes_bwd += k[i].bytes, o->flops_bwd += k[i].flops;
        else
            o->fwd_s += t, o->bytes_fwd += k[i].bytes, o->flops_fwd += k[i].flops;
    }
}

static void pass_opcost_SSD(const OpArgs *a, PassNodeCost *o)
{
    const IrGraph *g = a->g;
    const IrTensor *x = &g->tensors[a->n->in[0]], *B = &g->tensors[a->n->in[3]];
    double Bt = (double)a->local[x->dim[0]], L = (double)a->local[x->dim[1]];
    double P = (double)a->local[x->dim[x->rank - 1]], N = (double)a->local[B->dim[B->rank - 1]];
    double H = lnumel(a, x->id) / (Bt * L * P), G = lnumel(a, B->id) / (Bt * L * N);
    if (a->c->st.ssm_fused) {
        ssd_fused(a, o, Bt, L, H, P, G, N);
        return;
    }
    double Q = L < SSD_CHUNK ? L : SSD_CHUNK, chunks = ceil(L / Q);
    for (int bwd = 0; bwd < 2; bwd++) {
        int times = bwd ? 2 : 1;
        for (int k = 0; k < times; k++) {
            gemm(a, Q, Q, N, Bt * G * chunks, bwd, o);       /* C B^T */
            gemm(a, Q, P, Q, Bt * H * chunks, bwd, o);       /* (L o C B^T) x */
            gemm(a, N, P, Q, Bt * H * chunks, bwd, o);       /* the chunk's state */
            gemm(a, Q, P, N, Bt * H * chunks, bwd, o);       /* C S_in */
        }
        if (bwd)
            gemm(a, N, P, Q, Bt * H * chunks, true, o);      /* the states recomputed */
    }
    double e = eb(a), io = (2 * lnumel(a, x->id) + lnumel(a, a->n->in[1]) + 2 * lnumel(a, B->id)) * e;
    double states = Bt * H * chunks * N * P * 4;
    membound(a, o, io + 2 * states, 3, 2 * io + 4 * states, 5);
}
#undef SSD_CHUNK

#define BWD_OP(ID)                                                                            \
    static void pass_opcost_##ID(const OpArgs *a, PassNodeCost *o)                            \
    {                                                                                         \
        (void)o;                                                                              \
        ir_die("pass_cost_node on backward node %s: backward is costed with its forward",    \
               ir_ops[a->n->op].name);                                                        \
    }
BWD_OP(EMBEDDING_BWD)
BWD_OP(RMSNORM_BWD)
BWD_OP(LAYERNORM_BWD)
BWD_OP(ROPE_BWD)
BWD_OP(ATTENTION_BWD)
BWD_OP(SILU_BWD)
BWD_OP(GELU_BWD)
BWD_OP(SWIGLU_BWD)
BWD_OP(SOFTMAX_BWD)
BWD_OP(CROSS_ENTROPY_BWD)
BWD_OP(SIGMOID_BWD)
BWD_OP(ROUTE_BWD)
BWD_OP(MOE_BWD)
BWD_OP(SLICE_BWD)
BWD_OP(CONCAT_BWD)
BWD_OP(SOFTPLUS_BWD)
BWD_OP(CONV1D_BWD)
BWD_OP(SSD_BWD)
BWD_OP(RELU2_BWD)
BWD_OP(REDUCE_SUM)
#undef BWD_OP

/* The gradient contribution of reader (n, input i) to activation t when the
 * kernels sum contributions themselves (stack grad_sum_in_kernel; codegen's
 * cg_lower.c sums_in_kernel is the same rule). Backward makes the
 * contributions in reverse order of the readers: the last reader's starts the
 * sum (an ADD of t's size passes the incoming gradient through, which the op
 * does not own); each earlier one is added by an rt_add, unless its op is
 * IR_OPF_GRAD_SUM: a norm reads the sum as dres (one more read of t), a GEMM
 * accumulates into it with beta = 1 (its C read is not charged: the GEMM is
 * compute-bound) once the op owns it. Readers are looked for up to
 * pass_readers_end. */
static void grad_sum_cost(const OpArgs *a, PassNodeCost *o, int i)
{
    const IrGraph *g = a->g;
    const IrNode *n = a->n;
    int t = n->in[i];
    int later = 0, last = -1;
    for (int e = i + 1; e < n->nin; e++)
        if (n->in[e] == t)
            later++, last = n->id;
    int end = pass_readers_end(g, t);
    for (int id = n->id + 1; id < end; id++)
        for (int k = 0; k < g->nodes[id].nin; k++)
            if (g->nodes[id].in[k] == t)
                later++, last = id;
    if (later == 0)
        return; /* n's contribution starts the sum */
    double x = lnumel(a, t);
    const IrNode *L = &g->nodes[last];
    bool through = L->op == IR_OP_ADD && lnumel(a, L->out[0]) == x;
    bool owned = later > 1 || !through;
    if (!(ir_ops[n->op].flags & IR_OPF_GRAD_SUM) || (n->op == IR_OP_MATMUL && !owned))
        kcall(a, o, true, PASS_K_ADD, 1, x);
    else if (n->op != IR_OP_MATMUL)
        membound(a, o, 0, 0, x * eb(a), 0);
}

static void (*const opcost[IR_NUM_OPS])(const OpArgs *, PassNodeCost *) = {
#define OP(ID, name, nin, nout, flags, saves) [IR_OP_##ID] = pass_opcost_##ID,
#include "ops.def"
#undef OP
};

void pass_cost_node(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                    const PlanStrategy *s, const int64_t *dim_size, PassNodeCost *out)
{
    int64_t local[256];
    if (g->ndims > 256)
        ir_die("pass_cost_node: %d dims", g->ndims);
    plan_local_sizes(g, n, m, s, dim_size, local);
    memset(out, 0, sizeof *out);
    if (c->st.ssm_fused && pass_ssm_fused_away(g, n))
        return; /* inside mamba_ssm's kernels, priced with ssd and conv1d (cost_ssm.c) */
    OpArgs a = {c, g, n, m, s, local};
    opcost[n->op](&a, out);
    /* An activation read by k nodes gets k gradient contributions, which
     * autodiff sums with a chain of k - 1 additions in backward, before any
     * reduction: in the layout the readers take it in. */
    for (int i = 0; i < n->nin; i++) {
        int t = n->in[i];
        if (g->tensors[t].role != IR_ACT || g->tensors[t].producer < 0)
            continue;
        if (c->st.grad_sum_in_kernel) {
            grad_sum_cost(&a, out, i);
            continue;
        }
        /* Each reader but the first pays one, at its own local size. */
        bool earlier = false;
        for (int e = 0; e < i && !earlier; e++)
            earlier = n->in[e] == t;
        for (int id = g->tensors[t].producer + 1; id < n->id && !earlier; id++)
            for (int k = 0; k < g->nodes[id].nin && !earlier; k++)
                earlier = g->nodes[id].in[k] == t;
        if (earlier)
            kcall(&a, out, true, PASS_K_ADD, 1, lnumel(&a, t));
    }
    /* Framework autograd adds each micro-batch's weight gradient into the
     * accumulated one with a separate kernel: read both, write one. */
    if (c->st.grad_accum_unfused) {
        int gb = c->st.grad_bytes > 0 ? c->st.grad_bytes : 2;
        for (int i = 0; i < n->nin; i++)
            if (g->tensors[n->in[i]].role == IR_PARAM)
                membound(&a, out, 0, 0, 3.0 * gb * lnumel(&a, n->in[i]), 1);
    }
}
