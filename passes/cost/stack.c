/* stack.c: the software a plan runs on (PassStack): the presets, each
 * assumption with its source, and the --stack file (kvfile.c syntax).
 *
 *   ptdc      the programs ptdc generates (codegen/, runtime/), as they run
 *             today: ptdc's flash-style attention, fused norms and loss in the
 *             backend's precision, fp32 gradients accumulated inside the
 *             GEMMs, bucketed gradient reductions overlapping the last
 *             backward, a static arena planned at compile time.
 *   megatron  Megatron-LM / Megatron-Core with the distributed optimizer.
 *   fsdp      PyTorch FSDP2 as torchtitan runs it. */
#include "cost/cost.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define BIT(x) (1u << (x))

/* The megatron preset's host seconds per framework op (host_op_us), fitted
 * as its comment below says: the least absolute log error of the fit rows'
 * tokens/s over a 5 us grid, one value per host CPU type, with each row's
 * expert all-to-all overlap priced as its recipe sets it (moe_a2a_overlap;
 * x86 was 65 us fitted without it, docs/cost-model.md "Host time"). Refitted
 * after the Blackwell presets' gemm_eff was fitted (2026-11-30): x86 stays
 * 75, Grace 95 -> 90 (GB200's GEMMs slower, less of its step left to host). */
#define HOST_OP_X86_US 75.0
#define HOST_OP_GRACE_US 90.0

static const PassStack presets[] = {
    {
        .name = "ptdc",
        /* The kernels of ops.def as codegen calls them (cost_ops.c), a
         * static arena with the model-error reserve PASS_MEM_RESERVE, and
         * the collectives as docs/runtime.md ("Overlap in a training step")
         * says the programs issue them: step-end gradient reductions in
         * buckets issued during the last micro-batch's backward
         * (codegen/cg_bucket.c: 40M elements on CUDA, 1M on CPU, the
         * default of pass_stack_bucket_elems), ZeRO-1/2 all-gathers beside
         * the optimizer, ZeRO-2/3 per-micro-batch traffic, tensor-parallel
         * and pipeline transfers waited for where they are issued. */
        .dp_overlap = true,
        /* The ZeRO-1/2 all-gathers are issued beside AdamW of the later
         * parameters (docs/runtime.md, "Overlap in a training step"). */
        .param_gather = PASS_GATHER_OPTIMIZER,
        /* Tensor-parallel collectives are waited for where they are issued
         * (tp_overlap none). */
        /* Gradients are fp32 on both backends (runtime/rt.h: rt_grad;
         * codegen's CG_GRAD): accumulation and reduction. */
        .grad_bytes = 4,
        /* On the CPU target the fp32 master is the parameter's own block
         * (codegen/cg_mem.c: cg_master_aliases); CUDA keeps one beside its
         * bf16 weights. */
        .master_aliases = true,
        /* rt_cross_entropy_bwd writes dlogits over the kept logits
         * (codegen/cg_lower.c: grad_over_input). */
        .grad_in_place = true,
        /* Gradient contributions to one activation: the GEMMs' beta = 1 and
         * the norms' dres add them up (codegen/cg_lower.c: sums_in_kernel). */
        .grad_sum_in_kernel = true,
        /* rt_moe_fwd keeps h and gates (docs/moe.md): moe_saves_rows stays
         * no; routing as balanced as the reference runs force it. */
        .moe_imbalance = 1,
        /* rt_moe_* plans each call on the host after one device
         * synchronisation (docs/moe.md, Limits). The programs' per-call host
         * cost is not measured on a GPU (none was lent): host_op_us stays 0,
         * and with it every sync and launch is free (host.c). */
        .moe_sync = true,
        /* Low precision as the issue-33 FP8 programs run it (the CUDA
         * runtime's FP8 GEMMs: per-tensor current scaling, docs/precision.md):
         * every linear layer of the repeated layers, the weight and its
         * transpose cast each micro-batch. */
        .lp_scaling = PASS_SCALING_CURRENT,
        .lp_weight_copies = 2,
        /* ptdc's programs run the four policies; Megatron's module sets
         * (recompute.def) are priced for --stack megatron only. */
        .recompute = BIT(PLAN_RECOMPUTE_NONE) | BIT(PLAN_RECOMPUTE_SELECTIVE) | BIT(PLAN_RECOMPUTE_FFN) |
                     BIT(PLAN_RECOMPUTE_FULL),
        .backends = 0,
    },
    {
        .name = "megatron",
        /* Sources: Megatron-LM main (megatron/training/arguments.py and the
         * config dataclasses it builds flags from). --emit megatron writes
         * the flags (report/emit_megatron.c). */
        /* Transformer Engine / flash-attn kernels (--attention-backend flash,
         * TE's fused RMSNorm). Attention with sinks (GPT-OSS, softmax_type
         * learnable) runs in cuDNN's FusedAttention, priced as this class:
         * TE 2.12-2.17 (fused_attn.cpp nvte_get_fused_attn_backend) takes
         * it from cuDNN 9.13.1 with the window (127, 0) and head_dim 64;
         * below that, or deterministic, TE runs UnfusedDotProductAttention
         * (attention_kernel fused_softmax prices it: pass_attn_te_sinks),
         * whose fp32 scores Megatron-Bridge's published GPT-OSS runs could
         * not have held (docs/moe.md, GPT-OSS). */
        .attn_kernel = PASS_KERNEL_FLASH2,
        /* --swiglu runs fused (bias_swiglu_fusion, on by default:
         * megatron/core/fusions/fused_bias_swiglu.py saves its input only),
         * as ptdc's swiglu does: swiglu_unfused stays no. RoPE runs as
         * Transformer Engine's fused kernel (apply_rope_fusion, on by default
         * and in Megatron-Bridge's performance overrides) unless the rotary
         * embedding is not plain rope: arguments.py turns the fusion off for
         * any other --position-embedding-type, and rope_utils.py
         * (apply_rotary_pos_emb) falls back to the unfused path whenever
         * YaRN's mscale is not 1, so rope_unfused stays no here and a user
         * or a row sets it (tests/cost/bridge_moe.py, GPT-OSS). */
        /* The residual add is bias_dropout_add (megatron/core/fusions/
         * fused_bias_dropout.py), its own kernel; the next layer's norm
         * (TE's LayerNormLinear) reads the sum again. */
        .add_norm_unfused = true,
        /* MambaMixer (megatron/core/ssm/mamba_mixer.py, _ssm_training on
         * the default use_mamba_mem_eff_path) runs mamba_ssm's
         * mamba_split_conv1d_scan_combined: the convolution with its silu,
         * dt's softplus and bias, the chunked scan and the z gate in its
         * kernels (cost_ssm.c), then RMSNormGated alone. */
        .ssm_fused = true,
        /* linear_qkv and linear_fc1 (gated: gate and up) are one GEMM each
         * over the concatenated weights: priced as ptdc's batched call, the
         * same tiles in one launch (gemm_unbatched stays no). */
        /* megatron/core/tensor_parallel/cross_entropy.py upcasts the
         * vocabulary-parallel logits to fp32 and keeps its softmax. */
        .loss_fp32 = true,
        /* megatron/training/arguments.py: bf16 forces
         * accumulate_allreduce_grads_in_fp32 (fp32 main gradients). */
        .grad_bytes = 4,
        /* The materialised path keeps the dropout mask and output even at
         * p = 0 (core_attention: attention_dropout). */
        .attn_dropout = true,
        /* megatron/core/transformer/moe/experts.py (TEGroupedMLP): the
         * grouped linear_fc1 keeps its input (the permuted rows), the
         * activation its input (fc1's output), linear_fc2 its input;
         * nothing is recomputed unless --recompute-modules moe_act. */
        .moe_saves_rows = true,
        /* The same TEGroupedMLP under --add-bias-linear (GPT-OSS): linear_fc2
         * returns its per-expert biases unapplied (skip_bias_add=True) and
         * _apply_bias adds them, scaled by the routing weights, expert by
         * expert as eager ops (experts.py at every Megatron-LM commit
         * Megatron-Bridge 26.02 - 26.08 pins: b0cc2706, d7288711, d0b3b775,
         * cd4afffa). The weights stay in the router's type: its logits'
         * (router.py gating, moe_router_dtype unset; TE's fused top-k keeps
         * the logits' type) unless --moe-router-dtype fp32 or the flex
         * dispatcher upcasts them (token_dispatcher.py: HybridEP and DeepEP
         * take fp32 probs), which moe_probs_fp32 says per run. */
        .moe_bias_unfused = true,
        /* The same experts' clamped activation (GPT-OSS: bias_activation_fusion
         * with quick_gelu, activation_func_clamp_value 7): bias_act_func calls
         * weighted_bias_quick_geglu_impl (core/fusions/fused_bias_geglu.py,
         * the same at the four commits above), which clamps the gate half
         * (max) and the linear half (min, max) and concatenates them with
         * eager torch ops before the compiled weighted quick-GEGLU; autograd
         * keeps the concatenation besides fc1's output. */
        .moe_clamp_unfused = true,
        /* --moe-router-force-load-balancing, as Megatron-Bridge's
         * benchmarks run (reference/README.md). */
        .moe_imbalance = 1,
        /* Host time (host.c; docs/cost-model.md, "Host time"): eager
         * PyTorch dispatches and launches every op (--cuda-graph-impl
         * defaults to none); the dropless alltoall and flex dispatchers
         * copy the routed counts to the host and wait for them once per MoE
         * layer forward (megatron/core/transformer/moe/token_dispatcher.py:
         * _maybe_dtoh_and_synchronize at cuda_sync_point, before_ep_alltoall
         * with EP; HybridEP's setup_metadata .item()). host_op_us: FITTED,
         * one value per host CPU type, on the MoE rows of the releases before
         * NeMo 26.04 priced with their recipes' all-to-all overlap
         * (`tests/cost/bridge_moe.py PTDC SRC REF fit`; no datasheet gives
         * it); the later releases' rows are held out. */
        .host_op_s = {HOST_OP_X86_US * 1e-6, HOST_OP_GRACE_US * 1e-6},
        .moe_sync = true,
        /* --overlap-moe-expert-parallel-comm is off by default
         * (core/model_parallel_config.py); Megatron-Bridge's performance
         * recipes turn it on per model and GPU (moe_a2a_overlap, with
         * delay_wgrad_compute), so moe_a2a_overlap stays no here and a row
         * or a user sets it (tests/cost/bridge_moe.py a2a_overlap). */
        /* Low precision (--fp8-format, --fp8-recipe; megatron/training/
         * arguments.py): every linear layer of the transformer layers runs
         * in it (--first-last-layers-bf16 is off by default; with it,
         * --num-layers-at-start-in-bf16 and --num-layers-at-end-in-bf16
         * default to 1); the embedding, core attention (unless
         * --fp8-dot-product-attention) and the output layer stay bf16.
         * --fp8-recipe defaults to delayed. Transformer Engine keeps the
         * weight's FP8 data in both orientations (rowwise for fprop,
         * columnwise for dgrad: Hopper's FP8 GEMM takes TN operands only,
         * MXFP8's block scales run along K) and casts it on the first
         * micro-batch of a step only (is_first_microbatch);
         * --fp8-param-gather is off by default. */
        .lp_scaling = PASS_SCALING_DELAYED,
        .lp_weight_copies = 2,
        .lp_weight_cached = true,
        /* NVFP4BlockScaling's defaults (transformer_engine/common/recipe):
         * inputs and gradients quantised with_rht and with_post_rht_amax,
         * the Hadamard transform on their columnwise (wgrad) copies. */
        .nvfp4_rht = true,
        /* Transformer Engine's GroupedLinear runs the experts' GEMMs in the
         * recipe's format like every other linear layer of the layer
         * (megatron/core/transformer/moe/experts.py TEGroupedMLP); the
         * router stays bf16 (plan_gemm_precision). */
        .lp_experts = true,
        /* ... and GroupedLinear quantises the experts' rows with
         * tex.split_quantize, a tensor a local expert: Megatron-Core's
         * moe_use_grouped_tensor (TE's one grouped call) is False by default
         * at every commit that has it (transformer_config.py, d98e8a64), and
         * no Megatron-Bridge recipe sets it or TE's
         * NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM (v0.2.0 to v0.6.0); the
         * splits' quantise calls, per format, in pass_prec_split_calls
         * (docs/moe.md, "Per-expert quantise calls"). */
        .moe_group_quantize = false,
        /* --overlap-grad-reduce --overlap-param-gather with DDP buckets of
         * max(40M, 1M x dp) parameters (distributed_data_parallel_config). */
        .dp_overlap = true,
        .dp_bucket_elems = 40e6,
        /* --overlap-param-gather: the first bucket's all-gather is issued
         * when the gradients are zeroed, each next one in the forward
         * pre-hook of the modules whose weights the previous one gathered
         * (megatron/core/distributed/distributed_data_parallel.py:
         * next_param_gather_bucket_group; core_r0.8.0 distrib_optimizer.py
         * _finish_param_sync_helper): the next step's first forward hides
         * them. */
        .param_gather = PASS_GATHER_FORWARD,
        /* --tp-comm-overlap (with --sequence-parallel; Transformer Engine
         * userbuffers, transformer_engine/pytorch/module/base.py
         * initialize_ub): the column-parallel GEMMs consume their input's
         * all-gather chunk by chunk as it arrives (ring exchange), the
         * row-parallel ones reduce-scatter their output in 4 chunks as they
         * finish (pipeline), and in backward the input's re-gather runs
         * beside the gradient GEMM and the input gradient's reduce-scatter
         * beside the weight-gradient GEMM (bulk). NVIDIA runs its published
         * Megatron-Core numbers with it (README "Training Speed and
         * Scalability"; Megatron-Bridge's performance recipes). Without the
         * flag Megatron still overlaps the two backward transfers
         * (tp_overlap backward: megatron/core/tensor_parallel/layers.py,
         * LinearWithGradAccumulationAndAsyncCommunication). */
        .tp_overlap = PASS_TP_OVERLAP_UB,
        /* The interleaved schedule overlaps its sends and receives with the
         * chunks' compute (overlap_p2p_comm, on unless
         * --no-overlap-p2p-communication; Megatron turns it off for the
         * non-interleaved schedule: megatron/training/arguments.py). */
        .pp_overlap = true,
        /* PyTorch's caching allocator: fitted on the LLaMA-13B sweep
         * (tests/cost/test_calib.c; docs/cost-model.md, Calibration): 15% of
         * the bytes allocated and freed per micro-batch lost to
         * fragmentation, and a reserve of 4 GiB, the 5% of the 80 GiB A100 the
         * fit found (its window 3.2-4.0 GiB). The reserve is bytes, not a share
         * of the HBM: what it stands for (library workspaces, the allocator's
         * rounding, the CUDA context's and NCCL's variation) is per process.
         * As 5% of a GB200's 185 GiB it claimed 9.3 GiB, more than the 6.8
         * GiB Megatron-FSDP's published 70B runs leave beside what the model
         * itemises (docs/precision.md, "Megatron-FSDP"). */
        .ref_stack = true,
        /* Autograd saves what an op received: TE's all-to-all context
         * parallelism keeps q, k, v after the exchange (its backward
         * exchanges dO and dq, dk, dv only); sequence parallelism's linear
         * layers keep the shard and gather again (keeps_exchanged leaves
         * all-gathers to that). */
        .keeps_exchanged = true,
        .frag_act = 0.15,
        .alloc_reserve_bytes = 4.0 * 1073741824.0,
        /* --use-distributed-optimizer is ZeRO-1. ZeRO-3 is Megatron-FSDP
         * (--use-megatron-fsdp --data-parallel-sharding-strategy
         * optim_grads_params, megatron/core/distributed/fsdp): weights,
         * gradients and optimizer state sharded over dp x cp, each layer's
         * weights all-gathered before its forward and again before its
         * backward, its gradients reduce-scattered after it, all on their
         * own streams beside compute (the next layer's gather prefetched,
         * --fsdp-double-buffer: two layers' gathered weights alive).
         * Megatron-FSDP's optim_grads (ZeRO-2) is not priced. ZeRO-3 is
         * offered on request (zero_stages = 0,1,3; docs/stacks.md): the
         * preset's searches keep the distributed optimizer Megatron runs by
         * default. */
        .zero_stages = BIT(0) | BIT(1),
        .zero3_prefetch = true,
        /* Megatron-FSDP's memory (megatron/core/distributed/fsdp/src/
         * megatron_fsdp/param_and_grad_buffer.py): under --fsdp-double-buffer
         * FixedPoolAllocator keeps two buffers of one TransformerLayer's
         * gathered weights ("fsdp_params") and two of its unsharded gradients
         * ("fsdp_grads", reduce-scattered from there into the shard); the
         * modules outside the FSDP units (embedding, final norm, output layer)
         * are gathered at their forward and released only when the step's
         * buckets are reset (megatron_fsdp.py: no post-forward release for
         * non-units). */
        .zero3_pools = true,
        /* --recompute-granularity selective (core attention, or
         * --recompute-modules mlp) or full. */
        .recompute = BIT(PLAN_RECOMPUTE_NONE) | BIT(PLAN_RECOMPUTE_SELECTIVE) |
                     BIT(PLAN_RECOMPUTE_FFN) | BIT(PLAN_RECOMPUTE_FULL)
        /* and --recompute-modules as recompute.def's sets */
#define RC_SET(e, name, mods) | BIT(PLAN_RECOMPUTE_##e)
#include "recompute.def"
        ,
        .schedules = BIT(PLAN_SCHED_1F1B) | BIT(PLAN_SCHED_INTERLEAVED),
        /* --cp-comm-type: all_gather, p2p, a2a (a2a+p2p not built); the
         * search prices all_gather unless a stack asks for more. */
        .cp_comm = BIT(PASS_CP_ALL_GATHER),
        .backends = BIT(PASS_DEV_GPU),
    },
    {
        .name = "fsdp",
        /* Sources: torchtitan v0.2.2 (the last release with TOML job files),
         * torch.distributed.fsdp.fully_shard (FSDP2). --emit torchtitan
         * writes the job file (report/emit_torchtitan.c). */
        /* torch.nn.functional.scaled_dot_product_attention: the FA2 backend. */
        .attn_kernel = PASS_KERNEL_FLASH2,
        /* torchtitan's RMSNorm runs as eager PyTorch ops unless compiled
         * (and the residual add before it as its own op). */
        .norm_unfused = true,
        .add_norm_unfused = true,
        /* torchtitan's Attention has separate wq, wk, wv Linears and its
         * FeedForward w1 and w3: five GEMMs where ptdc batches two calls. */
        .gemm_unbatched = true,
        /* and its FeedForward computes w2(F.silu(w1(x)) * w3(x)): autograd
         * keeps silu's output beside both projections. */
        .swiglu_unfused = true,
        /* torchtitan's cross_entropy_loss calls .float() on the logits. */
        .loss_fp32 = true,
        /* MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): fp32
         * gradient reduction and sharded gradients. */
        .grad_bytes = 4,
        /* Autograd accumulates each micro-batch's gradient with its own add. */
        .grad_accum_unfused = true,
        /* (torchtitan's MoE is not a target: emit_torchtitan refuses MoE.) */
        .moe_imbalance = 1,
        /* torchao's Float8Linear (torchtitan's float8 converter): dynamic
         * tensorwise scaling (current), every Linear of the layers but the
         * output (filter_fqns), the weight cast in each forward and its
         * transpose again for backward. */
        .lp_scaling = PASS_SCALING_CURRENT,
        .lp_weight_copies = 2,
        /* FSDP reduce-scatters each block's gradients as its backward ends
         * and prefetches the next block's all-gather. */
        .dp_overlap = true,
        .zero3_prefetch = true,
        /* ZeRO-2's weights are unsharded by each module's pre-forward hook
         * in the next step's first forward, the next module's prefetched. */
        .param_gather = PASS_GATHER_FORWARD,
        .ref_stack = true,
        /* Autograd saves what an op received: TE's all-to-all context
         * parallelism keeps q, k, v after the exchange (its backward
         * exchanges dO and dq, dk, dv only); sequence parallelism's linear
         * layers keep the shard and gather again (keeps_exchanged leaves
         * all-gathers to that). */
        .keeps_exchanged = true,
        .frag_act = 0.15,
        .alloc_reserve = 0.05,
        /* DDP (0), reshard_after_forward=False (2), FULL_SHARD (3). */
        .zero_stages = BIT(0) | BIT(2) | BIT(3),
        /* [activation_checkpoint] mode none or full. Its mode "selective"
         * is not ptdc's: per-op (torchtitan/models/llama3/infra/
         * parallelize.py, _op_sac_save_list: saves matmul and attention
         * outputs, recomputes the rest) or full checkpointing of every n-th
         * layer (selective_ac_option = "2"); neither recomputes just core
         * attention or the MLP. */
        .recompute = BIT(PLAN_RECOMPUTE_NONE) | BIT(PLAN_RECOMPUTE_FULL),
        /* pipeline_parallel_schedule 1F1B, Interleaved1F1B. */
        .schedules = BIT(PLAN_SCHED_1F1B) | BIT(PLAN_SCHED_INTERLEAVED),
        /* context_parallel_rotate_method allgather (priced; alltoall is
         * ptdc's ring, not offered by default). */
        .cp_comm = BIT(PASS_CP_ALL_GATHER),
        .backends = BIT(PASS_DEV_GPU),
    },
};
enum { NPRESETS = (int)(sizeof presets / sizeof presets[0]) };

bool pass_stack_preset(const char *name, PassStack *out)
{
    for (int i = 0; i < NPRESETS; i++)
        if (!strcmp(presets[i].name, name)) {
            *out = presets[i];
            return true;
        }
    return false;
}

double pass_stack_bucket_elems(const PassStack *st, const PassGpu *gpu)
{
    if (st->dp_bucket_elems > 0)
        return st->dp_bucket_elems;
    return gpu->kind == PASS_DEV_CPU ? 1e6 : 40e6; /* cg_bucket_elems */
}

double pass_overlap_slowdown(const PassGpu *gpu)
{
    return gpu->kind == PASS_DEV_CPU ? 1.0 : pass_cost_consts.overlap_slowdown;
}

const char *pass_stack_preset_names(void) { return "ptdc, megatron, fsdp"; }

bool pass_stack_has_zero(const PassStack *st, int z)
{
    return z >= 0 && z <= 3 && (!st->zero_stages || (st->zero_stages >> z & 1));
}
bool pass_stack_has_recompute(const PassStack *st, int r)
{
    return r >= 0 && r < PLAN_RECOMPUTE_COUNT && (!st->recompute || (st->recompute >> r & 1));
}
bool pass_stack_has_schedule(const PassStack *st, int s)
{
    return s >= 0 && s < PLAN_NSCHED && (!st->schedules || (st->schedules >> s & 1));
}
bool pass_stack_has_cp_comm(const PassStack *st, int f)
{
    return f >= 0 && f <= PASS_CP_A2A && (!st->cp_comm || (st->cp_comm >> f & 1));
}

int pass_elem_bytes(const PassCostCtx *c, IrDtype t)
{
    int b = ir_dtype_bytes(t);
    if (t == IR_BF16 && c && c->cl && c->cl->gpu.act_bytes > b)
        return c->cl->gpu.act_bytes;
    return b;
}

/* ------------------------------------------------------------ the file */
/* S_INT: an element width (0, 2 or 4); S_COUNT: a whole number in [lo, hi]. */
typedef enum { S_PRESET, S_NAME, S_BOOL, S_NUM, S_INT, S_COUNT, S_ENUM, S_LIST } SKind;

/* S_ENUM fields are enums stored as int: names[i] is value i. */
_Static_assert(sizeof(PassAttnKernel) == sizeof(int) && sizeof(PassTpOverlap) == sizeof(int) &&
                   sizeof(PassParamGather) == sizeof(int) && sizeof(PassScaling) == sizeof(int),
               "S_ENUM fields are int-sized");
_Static_assert(sizeof(PassCudaGraph) == sizeof(int), "S_ENUM fields are int-sized");
static const char *const graph_names[] = {"none", "moe", "attn_moe", "full"}; /* PassCudaGraph */
_Static_assert(sizeof(PassDispatch) == sizeof(int), "S_ENUM fields are int-sized");
static const char *const dispatch_names[] = {"alltoall", "flex"}; /* PassDispatch */
static const char *const kernel_names[] = {"auto", "flash2", "flash1", "fused_softmax", "eager"};
static const char *const tp_overlap_names[] = {"none", "backward", "userbuffers", "chunked"}; /* PassTpOverlap */
static const char *const gather_names[] = {"optimizer", "forward", "blocking"}; /* PassParamGather */
static const char *const scaling_names[] = {"delayed", "current"}; /* PassScaling */
static const char *const zero_names[] = {"0", "1", "2", "3"};
static const char *const rec_names[] = {"none", "selective", "ffn", "full"};
static const char *const sched_names[] = {
#define X(id, name, title, chunks, split) name,
    PLAN_SCHEDULES(X)
#undef X
};
static const char *const cp_comm_names[] = {"all_gather", "p2p", "a2a"}; /* PassCpComm */
static const char *const backend_names[] = {"cuda", "cpu"}; /* by PassDevKind */

static const struct SKey {
    const char *key;
    SKind kind;
    size_t off;
    double scale, lo, hi;
    const char *const *names; /* S_LIST: the words, bit i for names[i] */
    int nnames;
    const char *help;
} skeys[] = {
#define F(f) offsetof(PassStack, f)
    {"stack", S_PRESET, 0, 0, 0, 0, NULL, 0, "preset to start from (first)"},
    {"name", S_NAME, F(name), 0, 0, 0, NULL, 0, "a name for printing"},
    {"attention_kernel", S_ENUM, F(attn_kernel), 0, 0, 0, kernel_names, 5,
     "auto (the backend's own), flash2, flash1, fused_softmax, eager"},
    {"norm_unfused", S_BOOL, F(norm_unfused), 0, 0, 0, NULL, 0, "norms as eager framework ops"},
    {"add_norm_unfused", S_BOOL, F(add_norm_unfused), 0, 0, 0, NULL, 0,
     "the residual add and the norm after it as two kernels"},
    {"gemm_unbatched", S_BOOL, F(gemm_unbatched), 0, 0, 0, NULL, 0,
     "q, k, v (gate, up) as separate GEMMs"},
    {"swiglu_unfused", S_BOOL, F(swiglu_unfused), 0, 0, 0, NULL, 0,
     "SwiGLU as eager framework ops (silu, then a product)"},
    {"ssm_fused", S_BOOL, F(ssm_fused), 0, 0, 0, NULL, 0,
     "Mamba-2's conv1d, softplus, scan and gate as mamba_ssm's fused kernels"},
    {"rope_unfused", S_BOOL, F(rope_unfused), 0, 0, 0, NULL, 0,
     "rope as eager framework ops (Megatron --no-rope-fusion, or YaRN)"},
    {"loss_fp32", S_BOOL, F(loss_fp32), 0, 0, 0, NULL, 0, "the loss upcasts logits to fp32"},
    {"grad_bytes", S_INT, F(grad_bytes), 1, 0, 4, NULL, 0, "gradient element bytes (0: as weights)"},
    {"grad_accum_unfused", S_BOOL, F(grad_accum_unfused), 0, 0, 0, NULL, 0,
     "micro-batch gradients added by a separate kernel"},
    {"attn_dropout", S_BOOL, F(attn_dropout), 0, 0, 0, NULL, 0,
     "materialised attention keeps a dropout mask"},
    {"moe_saves_rows", S_BOOL, F(moe_saves_rows), 0, 0, 0, NULL, 0,
     "MoE layers keep their permuted rows and first GEMMs' output (no recompute)"},
    {"moe_bias_unfused", S_BOOL, F(moe_bias_unfused), 0, 0, 0, NULL, 0,
     "a biased MoE layer adds its experts' output bias per expert by eager ops (Megatron)"},
    {"moe_clamp_unfused", S_BOOL, F(moe_clamp_unfused), 0, 0, 0, NULL, 0,
     "a clamped expert activation clamps and concatenates by eager ops (Megatron)"},
    {"moe_fused_mlp", S_BOOL, F(moe_fused_mlp), 0, 0, 0, NULL, 0,
     "experts as TE's op-fuser grouped MLP (MXFP8: CuTeDSL, activation and casts in the GEMMs)"},
    {"moe_probs_fp32", S_BOOL, F(moe_probs_fp32), 0, 0, 0, NULL, 0,
     "routing weights reach the experts in fp32 (--moe-router-dtype fp32, flex dispatcher)"},
    {"moe_imbalance", S_NUM, F(moe_imbalance), 1, 1, 64, NULL, 0,
     "routed rows of the busiest rank over the mean (1: balanced)"},
    {"moe_wslot_worst", S_BOOL, F(moe_wslot_worst), 0, 0, 0, NULL, 0,
     "ZB-H1 MoE W slots hold the dropless worst case (else expected rows x moe_imbalance)"},
    {"host_op_us", S_NUM, F(host_op_s), 1e-6, 0, 1e5, NULL, 0,
     "host us to dispatch and launch one framework op, x86 host (0: host never the bottleneck)"},
    {"host_op_us_grace", S_NUM, F(host_op_s) + sizeof(double), 1e-6, 0, 1e5, NULL, 0,
     "the same on a Grace host (GB200, GB300)"},
    {"cuda_graph", S_ENUM, F(cuda_graph), 0, 0, 0, graph_names, 4,
     "none, moe (moe_router + moe_preprocess), attn_moe (and attn), full (full_iteration)"},
    {"cuda_graph_mamba", S_BOOL, F(cuda_graph_mamba), 0, 0, 0, NULL, 0,
     "also the Mamba layers from captured graphs, one launch each way (--cuda-graph-scope mamba)"},
    {"moe_sync", S_BOOL, F(moe_sync), 0, 0, 0, NULL, 0,
     "the MoE dispatcher waits for routed counts on the host once per layer forward"},
    {"moe_dispatcher", S_ENUM, F(moe_dispatcher), 0, 0, 0, dispatch_names, 2,
     "alltoall (NCCL: a row per chosen expert), flex (DeepEP/HybridEP: once per node, NVLink onward)"},
    {"moe_a2a_overlap", S_BOOL, F(moe_a2a_overlap), 0, 0, 0, NULL, 0,
     "expert all-to-all beside another micro-batch's compute (Megatron --overlap-moe-expert-parallel-comm)"},
    {"lp_bf16_first_layers", S_COUNT, F(lp_bf16_first), 1, 0, 1 << 20, NULL, 0,
     "low precision: linear layers of the first N layers kept in bf16"},
    {"lp_bf16_last_layers", S_COUNT, F(lp_bf16_last), 1, 0, 1 << 20, NULL, 0,
     "low precision: linear layers of the last N layers kept in bf16"},
    {"lp_scaling", S_ENUM, F(lp_scaling), 0, 0, 0, scaling_names, 2,
     "delayed, current (per-tensor FP8's scales: amax history, or this tensor's amax)"},
    {"lp_weight_copies", S_COUNT, F(lp_weight_copies), 1, 1, 2, NULL, 0,
     "low-precision weight orientations kept (2: with its transpose)"},
    {"lp_weight_cached", S_BOOL, F(lp_weight_cached), 0, 0, 0, NULL, 0,
     "low-precision weights cast once per step, not per micro-batch"},
    {"nvfp4_rht", S_BOOL, F(nvfp4_rht), 0, 0, 0, NULL, 0,
     "NVFP4's weight-gradient operands pass a random Hadamard transform (an amax and a cast of their own)"},
    {"lp_experts", S_BOOL, F(lp_experts), 0, 0, 0, NULL, 0,
     "low precision: MoE experts' grouped GEMMs in it too (ptdc's programs: bf16)"},
    {"moe_group_quantize", S_BOOL, F(moe_group_quantize), 0, 0, 0, NULL, 0,
     "the experts' rows quantised by one grouped call (moe_use_grouped_tensor), not one per local expert"},
    {"fp8_param_gather", S_BOOL, F(fp8_param_gather), 0, 0, 0, NULL, 0,
     "weights kept and all-gathered in the low precision (no bf16 copy)"},
    {"dp_overlap", S_BOOL, F(dp_overlap), 0, 0, 0, NULL, 0,
     "gradient reduction overlaps backward"},
    {"dp_bucket_melems", S_NUM, F(dp_bucket_elems), 1e6, 0, 1e6, NULL, 0,
     "gradient bucket, M elements (0: per tensor)"},
    {"zero3_prefetch", S_BOOL, F(zero3_prefetch), 0, 0, 0, NULL, 0, "ZeRO-3 gathers run ahead"},
    {"zero3_pools", S_BOOL, F(zero3_pools), 0, 0, 0, NULL, 0,
     "ZeRO-3 keeps two layers' gathered weights and unsharded gradients, the rest gathered"},
    {"offload_act_layers", S_COUNT, F(offload_act_layers), 1, 0, 1 << 20, NULL, 0,
     "the first N layers' saved activations kept in host memory (framework stacks; pp 1, no recomputation)"},
    {"pp_overlap", S_BOOL, F(pp_overlap), 0, 0, 0, NULL, 0,
     "interleaved pipeline transfers overlap the chunks' compute"},
    {"tp_overlap", S_ENUM, F(tp_overlap), 0, 0, 0, tp_overlap_names, 4,
     "none, backward, userbuffers, chunked (tensor-parallel transfers beside their GEMMs)"},
    {"param_gather", S_ENUM, F(param_gather), 0, 0, 0, gather_names, 3,
     "optimizer, forward, blocking (where ZeRO-1/2's weight all-gather runs)"},
    {"reshard_overlap", S_NUM, F(reshard_overlap), 1, 0, 1, NULL, 0,
     "fraction of the resharding tp_overlap leaves exposed hidden anyway"},
    {"dynamic_memory", S_BOOL, F(ref_stack), 0, 0, 0, NULL, 0,
     "a caching allocator (peak of live bytes) instead of a static arena"},
    {"frag_act", S_NUM, F(frag_act), 1, 0, 1, NULL, 0, "allocator fragmentation fraction"},
    {"alloc_reserve", S_NUM, F(alloc_reserve), 1, 0, 0.9, NULL, 0, "memory kept free, fraction"},
    {"alloc_reserve_gib", S_NUM, F(alloc_reserve_bytes), 1073741824.0, 0, 1e4, NULL, 0,
     "memory kept free, GiB (the reserve is the larger of this and alloc_reserve's)"},
    {"master_aliases", S_BOOL, F(master_aliases), 0, 0, 0, NULL, 0,
     "fp32 master weights are the weights"},
    {"grad_in_place", S_BOOL, F(grad_in_place), 0, 0, 0, NULL, 0,
     "the loss gradient overwrites the logits"},
    {"keeps_exchanged", S_BOOL, F(keeps_exchanged), 0, 0, 0, NULL, 0,
     "a saved input exchanged (all-to-all) for its reader is kept exchanged, not exchanged again"},
    {"grad_sum_in_kernel", S_BOOL, F(grad_sum_in_kernel), 0, 0, 0, NULL, 0,
     "GEMMs and norm backwards add gradient contributions"},
    {"zero_stages", S_LIST, F(zero_stages), 0, 0, 0, zero_names, 4, "ZeRO stages offered"},
    {"recompute", S_LIST, F(recompute), 0, 0, 0, rec_names, 4, "recomputation policies offered"},
    {"schedules", S_LIST, F(schedules), 0, 0, 0, sched_names, PLAN_NSCHED, "pipeline schedules offered"},
    {"cp_comm", S_LIST, F(cp_comm), 0, 0, 0, cp_comm_names, 3,
     "context-parallel forms offered (all_gather, p2p, a2a)"},
    {"sequence_parallel", S_BOOL, F(no_sp), 0, 0, 0, NULL, 0, "sequence parallelism offered"},
    {"backends", S_LIST, F(backends), 0, 0, 0, backend_names, 2, "devices it runs on"},
#undef F
};
enum { NSKEYS = (int)(sizeof skeys / sizeof skeys[0]) };

typedef struct SParse {
    PassStack *out;
    bool seen[NSKEYS];
    bool any;                     /* a key other than `stack` seen */
    bool on_top;                  /* pass_stack_apply: keys over a stack already chosen */
} SParse;

static bool parse_bool(const char *key, const char *val, IrLoc loc, bool *out)
{
    if (!strcmp(val, "yes") || !strcmp(val, "true") || !strcmp(val, "on") || !strcmp(val, "1"))
        return *out = true, true;
    if (!strcmp(val, "no") || !strcmp(val, "false") || !strcmp(val, "off") || !strcmp(val, "0"))
        return *out = false, true;
    ir_error(loc, "'%s' is yes or no, got '%s'", key, val);
    return false;
}

static bool s_on_key(void *ctx, const char *key, const char *val, IrLoc kloc, IrLoc vloc)
{
    SParse *P = ctx;
    int ki = -1;
    for (int i = 0; i < NSKEYS; i++)
        if (!strcmp(skeys[i].key, key))
            ki = i;
    if (ki < 0) {
        char list[1024];
        size_t n = 0;
        for (int i = 0; i < NSKEYS && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", skeys[i].key);
        ir_error(kloc, "unknown key '%s' (keys: %s)", key, list);
        return false;
    }
    const struct SKey *k = &skeys[ki];
    if (P->seen[ki]) {
        ir_error(kloc, "'%s' is set twice", key);
        return false;
    }
    P->seen[ki] = true;
    char *field = (char *)P->out + k->off;
    switch (k->kind) {
    case S_PRESET:
        if (P->any) {
            ir_error(kloc, "'stack' must come first (it would overwrite the values above it)");
            return false;
        }
        if (P->on_top) { /* it would silently undo --stack and the --stack-set before it */
            ir_error(kloc, "'stack' chooses the preset a stack file starts from; choose it with --stack");
            return false;
        }
        if (!pass_stack_preset(val, P->out)) {
            ir_error(vloc, "unknown stack '%s' (presets: %s)", val, pass_stack_preset_names());
            return false;
        }
        return true;
    case S_NAME:
        P->any = true;
        if (strlen(val) >= sizeof P->out->name) {
            ir_error(vloc, "name '%s' is longer than %zu characters", val, sizeof P->out->name - 1);
            return false;
        }
        strcpy(P->out->name, val);
        return true;
    case S_BOOL: {
        P->any = true;
        bool b;
        if (!parse_bool(key, val, vloc, &b))
            return false;
        if (k->off == offsetof(PassStack, no_sp))
            b = !b; /* the file says what is offered */
        *(bool *)field = b;
        return true;
    }
    case S_NUM:
    case S_INT:
    case S_COUNT: {
        P->any = true;
        double d;
        if (!pass_kv_number(key, val, vloc, k->lo, k->hi, k->help, &d))
            return false;
        if (k->kind == S_COUNT) {
            if (d != (int)d) {
                ir_error(vloc, "'%s' is a whole number, got '%s'", key, val);
                return false;
            }
            *(int *)field = (int)d;
        } else if (k->kind == S_INT) {
            if (d != (int)d || (d != 0 && d != 2 && d != 4)) {
                ir_error(vloc, "'%s' is 0, 2 or 4, got '%s'", key, val);
                return false;
            }
            *(int *)field = (int)d;
        } else {
            *(double *)field = d * k->scale;
        }
        return true;
    }
    case S_ENUM:
        P->any = true;
        for (int i = 0; i < k->nnames; i++)
            if (!strcmp(val, k->names[i])) {
                *(int *)field = i;
                return true;
            }
        ir_error(vloc, "'%s' is one of %s, got '%s'", key, k->help, val);
        return false;
    case S_LIST: {
        P->any = true;
        unsigned mask = 0;
        char buf[512];
        snprintf(buf, sizeof buf, "%s", val);
        for (char *save = NULL, *w = strtok_r(buf, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save)) {
            int hit = -1;
            for (int i = 0; i < k->nnames; i++)
                if (!strcmp(w, k->names[i]))
                    hit = i;
            if (hit < 0) {
                char names[256];
                size_t n = 0;
                for (int i = 0; i < k->nnames; i++)
                    n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", k->names[i]);
                ir_error(vloc, "'%s': unknown '%s' (one or more of %s)", key, w, names);
                return false;
            }
            mask |= 1u << hit;
        }
        if (!mask) {
            ir_error(vloc, "'%s' needs at least one value", key);
            return false;
        }
        *(unsigned *)field = mask;
        return true;
    }
    }
    return false;
}

bool pass_stack_apply(const char *path, const char *text, size_t len, PassStack *st)
{
    SParse P;
    memset(&P, 0, sizeof P);
    P.out = st;
    P.on_top = true;
    return pass_kv_parse(path, text, len, s_on_key, &P);
}

bool pass_stack_parse(const char *path, const char *text, size_t len, PassStack *out)
{
    SParse P;
    memset(&P, 0, sizeof P);
    pass_stack_preset("ptdc", out);
    P.out = out;
    return pass_kv_parse(path, text, len, s_on_key, &P);
}

bool pass_stack_load(const char *path, PassStack *out)
{
    SParse P;
    memset(&P, 0, sizeof P);
    pass_stack_preset("ptdc", out);
    snprintf(out->name, sizeof out->name, "%s", path);
    P.out = out;
    return pass_kv_load(path, "stack", s_on_key, &P);
}

bool pass_stack_setup(PassStack *out, const char *name_or_file)
{
    if (!name_or_file)
        return pass_stack_preset("ptdc", out);
    if (pass_stack_preset(name_or_file, out))
        return true;
    if (!strchr(name_or_file, '/') && !strchr(name_or_file, '.')) {
        ir_error(IR_NOLOC, "--stack: unknown stack '%s' (presets: %s, or a stack file)", name_or_file,
                 pass_stack_preset_names());
        return false;
    }
    return pass_stack_load(name_or_file, out);
}

/* "a,b" of the words whose bits are set (every word when mask is 0). */
static void print_list(FILE *f, unsigned mask, const char *const *names, int n)
{
    bool first = true;
    for (int i = 0; i < n; i++)
        if (!mask || (mask >> i & 1)) {
            fprintf(f, "%s%s", first ? "" : ",", names[i]);
            first = false;
        }
}

void pass_stack_print(FILE *f, const PassStack *st)
{
    for (int i = 0; i < NSKEYS; i++) {
        const struct SKey *k = &skeys[i];
        const char *field = (const char *)st + k->off;
        if (k->kind == S_PRESET)
            continue;
        fprintf(f, "%-18s = ", k->key); /* (a key of 19 or more still gets its space) */
        switch (k->kind) {
        case S_NAME: fprintf(f, "%s", st->name); break;
        case S_BOOL: {
            bool b = *(const bool *)field;
            if (k->off == offsetof(PassStack, no_sp))
                b = !b;
            fprintf(f, "%s", b ? "yes" : "no");
            break;
        }
        case S_NUM: fprintf(f, "%g", *(const double *)field / k->scale); break;
        case S_INT:
        case S_COUNT: fprintf(f, "%d", *(const int *)field); break;
        case S_ENUM: fprintf(f, "%s", k->names[*(const int *)field]); break;
        case S_LIST: print_list(f, *(const unsigned *)field, k->names, k->nnames); break;
        case S_PRESET: break;
        }
        fprintf(f, "  # %s\n", k->help);
    }
}
