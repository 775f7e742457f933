/* cost_prec.c: the formats a plan's linear layers can run in (plan.h's
 * PlanPrecision) as the cost model sees them: each a row of bytes per
 * element, block scales and the tensor-core rate that runs it, and which
 * GEMMs of a model use it under a stack. docs/precision.md says what is
 * modelled and from which sources. */
#include "cost/cost.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* X(id, bytes of an element, elements per block scale (0: one scale per
 *   tensor), bytes of a block scale, the PassGpu field with its rate,
 *   Blackwell-class only, a per-tensor amax needed whatever the stack's
 *   scaling, the multiple of rows a grouped GEMM of the format takes per
 *   group)
 * MXFP8 runs at the FP8 rate but only Blackwell's tensor cores read its
 * E8M0 block scales; a GPU with a dense FP4 rate is Blackwell-class, so
 * MXFP8 needs peak_fp4_flops > 0 as well. NVFP4 keeps an E4M3 scale per 16
 * elements and an fp32 one per tensor (from the tensor's amax).
 * The row multiple: an expert's rows become the contraction of its weight
 * gradient, so a quantised grouped GEMM needs each expert's rows padded:
 * 16 for FP8 (Hopper's TN-only FP8 GEMM reads the transposed copy, rows
 * contiguous, 16-byte aligned), 32 for MXFP8 (a block scale per 32 rows of
 * the columnwise copy), 128 for NVFP4 (its grouped quantise and scale
 * layout). These are Megatron-Core's get_fp8_align_size and
 * get_fp4_align_size (fp8_utils.py, fp4_utils.py at 55ac7082, d7288711,
 * d0b3b775, cd4afffa), to which its experts pad each expert's rows
 * (Fp8Padding in TEGroupedMLP, or the dispatcher: HybridEP's pad_multiple,
 * moe_router_padding_for_quantization). BF16 takes the rows as they come
 * (1: Megatron's bf16 grouped GEMM pads nothing). */
#define PREC_FORMATS(X)                                                                         \
    X(BF16, 2.0, 0, 0, peak_flops, false, false, 1)                                             \
    X(FP8, 1.0, 0, 0, peak_fp8_flops, false, false, 16)                                         \
    X(MXFP8, 1.0, 32, 1, peak_fp8_flops, true, false, 32)                                       \
    X(NVFP4, 0.5, 16, 1, peak_fp4_flops, false, true, 128)

static const struct Fmt {
    double bytes;
    int block, scale_bytes;
    size_t peak;                  /* offsetof(PassGpu, ...) */
    bool blackwell;
    bool tensor_amax;
    int group_rows;
} fmts[PLAN_NPREC] = {
#define X(id, b, blk, sb, field, bw, amax, rows) [PLAN_PREC_##id] = {b, blk, sb, offsetof(PassGpu, field), bw, amax, rows},
    PREC_FORMATS(X)
#undef X
};

double pass_prec_peak(const PassGpu *gpu, PlanPrecision p)
{
    if ((unsigned)p >= PLAN_NPREC)
        return 0;
    if (fmts[p].blackwell && !(gpu->peak_fp4_flops > 0))
        return 0;
    return *(const double *)((const char *)gpu + fmts[p].peak);
}

const char *pass_prec_names(const PassGpu *gpu, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int p = 0; p < PLAN_NPREC; p++)
        if (pass_prec_peak(gpu, (PlanPrecision)p) > 0 && k < n)
            k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", plan_precision_name((PlanPrecision)p));
    return buf;
}

double pass_prec_elem_bytes(PlanPrecision p)
{
    const struct Fmt *f = &fmts[(unsigned)p < PLAN_NPREC ? p : PLAN_PREC_BF16];
    return f->bytes + (f->block ? (double)f->scale_bytes / f->block : 0);
}

double pass_prec_group_rows(PlanPrecision p, double rows)
{
    int q = fmts[(unsigned)p < PLAN_NPREC ? p : PLAN_PREC_BF16].group_rows;
    /* (the mean of whole rows can be a whole number computed inexactly) */
    return q > 1 ? ceil(rows / q - 1e-9) * q : rows;
}

static PlanPrecision prec_rule(const PassCostCtx *c, const IrGraph *g, const IrNode *n)
{
    /* plan_gemm_precision: the rule codegen lowers by too. */
    if (n->op == IR_OP_MOE)
        return c->st.lp_experts ? plan_expert_precision(g, n, c->prec, c->st.lp_bf16_first, c->st.lp_bf16_last)
                                : PLAN_PREC_BF16;
    return plan_gemm_precision(g, n, c->prec, c->st.lp_bf16_first, c->st.lp_bf16_last);
}

PlanPrecision pass_prec_of(const PassCostCtx *c, const IrGraph *g, const IrNode *n)
{
    PassMemo *m = c->memo;
    if (!m || m->g != g || n->id < 0 || n->id >= g->nfwd || n != &g->nodes[n->id])
        return prec_rule(c, g, n);
    /* Every forward node's, for the context's format and bf16 layers (the
     * rule looks along the piece: asked per node and candidate, it was a
     * fifth of a framework search). */
    int key[4] = {(int)c->prec, c->st.lp_bf16_first, c->st.lp_bf16_last, c->st.lp_experts};
    if (!m->prec || memcmp(key, m->prec_key, sizeof key)) {
        if (!m->prec)
            m->prec = ir_xmalloc((size_t)g->nfwd + 1);
        for (int i = 0; i < g->nfwd; i++)
            m->prec[i] = (int8_t)prec_rule(c, g, &g->nodes[i]);
        memcpy(m->prec_key, key, sizeof key);
    }
    return (PlanPrecision)m->prec[n->id];
}

double pass_gemm_time_prec(const PassGpu *gpu, double M, double N, double K, double batch,
                           PlanPrecision p)
{
    if (p == PLAN_PREC_BF16)
        return pass_gemm_time(gpu, M, N, K, batch);
    return pass_gemm_time_at(gpu, M, N, K, batch, pass_prec_peak(gpu, p), pass_prec_elem_bytes(p));
}

/* A per-tensor FP8 tensor serves both GEMM orientations from one copy where
 * the tensor cores take FP8 operands in any layout: Blackwell's (sm_100 to
 * sm_11x; Transformer Engine's is_non_tn_fp8_gemm_supported, which then
 * makes no transpose). Hopper's FP8 GEMM is TN only, so dgrad and wgrad need
 * the transpose; MX and NVFP4 block scales run along K, so each orientation
 * is a cast of its own on every GPU. */
int pass_prec_orientations(const PassGpu *gpu, PlanPrecision p, int want)
{
    if (p == PLAN_PREC_FP8 && gpu->peak_fp4_flops > 0 && want > 1)
        return 1;
    return want;
}

double pass_prec_cast_s(const PassCostCtx *c, double numel, PlanPrecision p, int orient)
{
    return pass_prec_cast_act_s(c, numel, p, orient, false);
}

double pass_prec_cast_act_s(const PassCostCtx *c, double numel, PlanPrecision p, int orient, bool wgrad)
{
    return pass_prec_cast_split_s(c, numel, p, orient, wgrad, 1);
}

/* The quantise calls Transformer Engine makes for a tensor of `splits`
 * consecutive splits, each a tensor of its own: GroupedLinear quantises the
 * experts' inputs and output gradients so, through tex.split_quantize
 * (extensions/cast.cpp), at every release Megatron-Bridge
 * pinned (2.9 70f53666 at v0.2.0, 2.12 5671fd36 at v0.3.x, 2.14 71bbefbf at
 * v0.4.x, 2.16 4220403e / b9d690e0 at v0.5.x, 2.17.1 4329ff84 at v0.6.0;
 * 2.18 too). split_quantize fuses the splits only where the format has a
 * kernel for them:
 *  - per-tensor FP8, delayed scaling: multi_tensor_quantize_impl's
 *    nvte_multi_cast_transpose, one kernel (the last steps' amax): 1 call;
 *  - per-tensor FP8, current scaling: each split's
 *    Float8CurrentScalingQuantizer::quantize_impl (quantizer.cpp: amax,
 *    scale, cast) after a create_tensor of its own: a call a split;
 *  - MXFP8: one bulk allocation (bulk_allocate_mxfp8_tensors, a Python
 *    MXFP8TensorStorage constructed a split), then multi_tensor_quantize_impl
 *    quantises the splits individually, MXFP8Quantizer::quantize's one
 *    nvte_quantize_v2 each (rowwise and columnwise in one kernel): a call a
 *    split at every release above;
 *  - NVFP4 (from 2.12, the first release with its rows): the fused split
 *    quantise, with the random Hadamard transform (inputs and gradients,
 *    nvfp4_rht) all grouped kernels (nvte_group_hadamard_transform_amax,
 *    nvte_group_nvfp4_quantize_with_amax, _cast_fusion_columnwise): 1 call;
 *    without it nvte_group_amax once, then nvte_quantize_v2 a split.
 * TE's grouped quantise (tex.group_quantize, 2.14 on) quantises them in one
 * call, but GroupedLinear takes it only on its GroupedTensor path
 * (NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM; on TE main after 2.18
 * use_grouped_tensor: the stack's moe_group_quantize) and the op fuser's grouped MLP takes it for
 * MXFP8 (moe_fused_mlp: ops/fused/forward_grouped_mlp.py, 2.16 on). */
double pass_prec_split_calls(const PassCostCtx *c, PlanPrecision p, bool wgrad, double splits)
{
    if (splits <= 1 || c->st.moe_group_quantize || (c->st.moe_fused_mlp && p == PLAN_PREC_MXFP8))
        return 1;
    switch (p) {
    case PLAN_PREC_FP8:
        return c->st.lp_scaling == PASS_SCALING_CURRENT ? splits : 1;
    case PLAN_PREC_MXFP8:
        return splits;
    case PLAN_PREC_NVFP4:
        return c->st.nvfp4_rht && wgrad ? 1 : splits;
    default:
        return 1;
    }
}

/* A tensor quantised as `groups` consecutive splits (pass_prec_split_calls):
 * the whole tensor's bytes, and where each split is a call of its own the
 * kernels of one tensor's cast for each split, but NVFP4's amax, which
 * nvte_group_amax finds for every split in one launch. (The current-scaling
 * scale kernel between amax and cast is not counted for one tensor
 * either.) */
double pass_prec_cast_split_s(const PassCostCtx *c, double numel, PlanPrecision p, int orient, bool wgrad,
                              double groups)
{
    if (p == PLAN_PREC_BF16 || numel <= 0)
        return 0;
    const PassGpu *gpu = &c->cl->gpu;
    orient = pass_prec_orientations(gpu, p, orient);
    double bytes = numel * (2 + orient * pass_prec_elem_bytes(p));
    int kernels = 1;
    /* A scale from this tensor's amax needs the amax before the cast: one
     * more read of the input. MX block scales come from each block's amax
     * inside the cast; delayed scaling takes last steps' amax and records
     * this one as it casts. */
    bool amax = fmts[p].tensor_amax || (!fmts[p].block && c->st.lp_scaling == PASS_SCALING_CURRENT);
    if (amax)
        bytes += 2 * numel, kernels++;
    /* Transformer Engine's NVFP4 recipe casts the copy the weight gradient
     * reads through a 16-point random Hadamard transform: one kernel finds
     * the amax of the input and of its transform, the rowwise cast reads the
     * input, the transform-and-cast of the columnwise copy reads it again
     * (cast.cpp: hadamard_transform_amax, then
     * hadamard_transform_cast_fusion_columnwise). */
    if (p == PLAN_PREC_NVFP4 && wgrad && orient >= 2 && c->st.nvfp4_rht)
        bytes += 2 * numel, kernels++;
    double calls = pass_prec_split_calls(c, p, wgrad, groups);
    if (calls > 1)
        kernels += (int)(calls - 1) * (p == PLAN_PREC_NVFP4 ? kernels - 1 : kernels);
    return pass_mem_time(gpu, bytes, kernels);
}
