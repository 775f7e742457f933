/* stack.h: the software a plan runs on (passes/cost/stack.c, `--stack`):
 * ptdc's own programs or a framework (Megatron-LM, torchtitan) with its
 * kernels, overlap settings and the layouts it offers. */
#ifndef PTDC_PASS_STACK_H
#define PTDC_PASS_STACK_H

#include "cost/cluster.h"

/* The kernel that runs attention. AUTO is what ptdc's runtime runs: a
 * flash-style kernel for PLAN_ATTN_FLASH; PLAN_ATTN_MATERIALIZED is costed as
 * FUSED_SOFTMAX. The others describe other stacks (calibration). */
typedef enum {
    PASS_KERNEL_AUTO,
    PASS_KERNEL_FLASH2,           /* FlashAttention-2 class */
    PASS_KERNEL_FLASH1,           /* FlashAttention-1: same memory, slower */
    PASS_KERNEL_FUSED_SOFTMAX,    /* S x S scores in bf16, one fused scale-mask-softmax kernel */
    PASS_KERNEL_EAGER,            /* S x S, unfused framework ops, softmax in fp32 */
} PassAttnKernel;

/* Which tensor-parallel collectives run beside a GEMM (with sequence
 * parallelism: the all-gathers and reduce-scatters on either side of the
 * column- and row-parallel GEMMs; all-reduces never do). */
typedef enum {
    PASS_TP_OVERLAP_NONE,         /* each waited for where it is issued */
    PASS_TP_OVERLAP_BACKWARD,     /* backward only: the input's re-gather beside the gradient
                                     GEMM, the input gradient's reduce-scatter beside the
                                     weight-gradient GEMM (Megatron's and Transformer
                                     Engine's linear layers, asynchronous) */
    PASS_TP_OVERLAP_UB,           /* also forward and the row-parallel gradient's gather:
                                     Transformer Engine's userbuffers pipeline the GEMM in
                                     chunks with the transfer (Megatron --tp-comm-overlap) */
    PASS_TP_OVERLAP_CHUNKED,      /* ptdc's programs under --tp-overlap on (codegen/cg_tpchunk.c):
                                     each forward gather beside its GEMMs' rows of the rank's
                                     own block, each forward reduce-scatter pipelined in
                                     PLAN_TP_RS_SPLITS pieces, the row-parallel gradient's
                                     gather like the forward one; no backward bulk pair */
} PassTpOverlap;

/* Where ZeRO-1/2's all-gather of the updated weights runs. */
typedef enum {
    PASS_GATHER_OPTIMIZER,        /* beside the optimizer's kernels of the later parameters
                                     (ptdc's programs) */
    PASS_GATHER_FORWARD,          /* in the next step's first forward, bucket by bucket, each
                                     bucket's gather beside the compute of the one before
                                     (Megatron --overlap-param-gather; FSDP's pre-forward
                                     unshard) */
    PASS_GATHER_BLOCKING,         /* after the optimizer, waited for */
} PassParamGather;

/* How a low-precision GEMM's input scales are found (docs/precision.md). */
typedef enum {
    PASS_SCALING_DELAYED,         /* from an amax history (Transformer Engine's DelayedScaling,
                                     Megatron --fp8-recipe delayed): the cast records the amax
                                     as it goes, one reduction of every amax per step */
    PASS_SCALING_CURRENT,         /* from this tensor's own amax (Megatron --fp8-recipe
                                     tensorwise, "FP8-CS"): a read pass for the amax before
                                     the cast, the amax all-reduced over the tensor-parallel
                                     group when the input is split there */
} PassScaling;

/* Which parts of a step a framework replays from captured CUDA graphs:
 * one graph launch from the host instead of each op's dispatch and launch
 * (Megatron-Core --cuda-graph-impl transformer_engine with
 * --cuda-graph-scope, or full_iteration; host.c). */
typedef enum {
    PASS_GRAPH_NONE,              /* every op dispatched and launched by the host (eager) */
    PASS_GRAPH_MOE,               /* scope moe_router + moe_preprocess: an MoE layer's
                                     pre-MLP norm, router and dispatcher preprocessing */
    PASS_GRAPH_ATTN_MOE,          /* also attn: the input norm and self-attention */
    PASS_GRAPH_FULL,              /* full_iteration: the whole step, with static (capacity-
                                     padded) dispatch shapes and no device-to-host sync */
} PassCudaGraph;

/* How an MoE layer's dispatcher moves the routed rows between the ranks of
 * its exchange group (Megatron-Core --moe-token-dispatcher-type and
 * --moe-flex-dispatcher-backend; cost_coll.c, pass_cost_a2a_moe). */
typedef enum {
    PASS_DISPATCH_ALLTOALL,       /* one row per (token, chosen expert) to the expert's rank
                                     by an NCCL all-to-all (alltoall dispatcher; ptdc's
                                     programs' exchange), remote ranks through the NICs */
    PASS_DISPATCH_FLEX,           /* DeepEP or HybridEP (flex dispatcher): a token crosses
                                     the network once per node holding any of its experts,
                                     to the peer GPU of the sender's rail, which forwards it
                                     over NVLink to the ranks there that hold them */
} PassDispatch;

/* The software a plan runs on (stack.c; docs/stacks.md): ptdc's generated
 * programs (the preset "ptdc", all defaults) or a framework people already
 * run ("megatron", "fsdp"), read from --stack NAME|FILE. The fields below
 * `name` say how it computes, overlaps and holds memory; the masks what it
 * offers, which the search honours. Every preset field carries its source in
 * stack.c. */
typedef struct PassStack {
    char name[32];
    /* kernels */
    PassAttnKernel attn_kernel;   /* AUTO: ptdc's own flash kernel (measured, or FA2 class) */
    bool norm_unfused;            /* norms as unfused framework ops: they also save an fp32
                                     copy of the input and the normalised value, and cost
                                     several memory passes */
    bool add_norm_unfused;        /* the residual add and the norm reading its sum run as two
                                     kernels (ptdc: one, rt_add_rmsnorm_fwd or
                                     rt_add_layernorm_fwd, one read of the sum fewer) */
    bool gemm_unbatched;          /* sibling GEMMs (q, k, v; gate, up) run as separate calls
                                     (ptdc: one batched call, plan_gemm_batch; Megatron: one
                                     GEMM over the concatenated weights) */
    bool ssm_fused;               /* Mamba-2's conv1d + silu, softplus, scan and gate as
                                     mamba_ssm's mamba_split_conv1d_scan_combined, kernel by
                                     kernel (cost_ssm.c; Megatron's MambaMixer) */
    bool swiglu_unfused;          /* SwiGLU as eager framework ops, silu(gate) * up: autograd
                                     also saves silu(gate), and its kernels move 5 + 9
                                     elements per output where the fused ones move 3 + 5 */
    bool rope_unfused;            /* rope as eager framework ops (Megatron-Core's
                                     _apply_rotary_pos_emb_bshd, which it runs for YaRN or
                                     without --apply-rope-fusion): 6 kernels moving 12
                                     elements per element forward, 5 moving 10 backward, where
                                     the fused kernel moves 2 each way */
    bool loss_fp32;               /* the loss upcasts the logits to fp32 and saves its fp32
                                     softmax (Megatron's vocabulary-parallel cross-entropy) */
    int grad_bytes;               /* gradient element bytes (accumulation, reduction);
                                     0: the backend's activation width */
    bool grad_accum_unfused;      /* each micro-batch's weight gradient is written to a
                                     temporary and added to the accumulated one by a separate
                                     kernel (framework autograd) instead of inside the GEMM */
    bool attn_dropout;            /* a materialised attention keeps a dropout mask and output
                                     (Megatron's path keeps them even at p = 0) */
    bool moe_saves_rows;          /* an MoE layer keeps its permuted rows, the first GEMMs'
                                     output and the activation for backward (Megatron's
                                     GroupedMLP); no: it keeps h and gates and recomputes the
                                     first GEMMs in backward (ptdc's rt_moe_bwd) */
    bool moe_bias_unfused;        /* an MoE layer of a model with biases on its linear layers
                                     (the router's logits carry one: Megatron's
                                     --add-bias-linear) adds each local expert's output bias,
                                     scaled by the rows' routing weights, as eager ops
                                     (Megatron-Core TEGroupedMLP._apply_bias) */
    bool moe_clamp_unfused;       /* an MoE layer whose activation clamps its pre-activations
                                     (ir/moe_acts.def clamped: GPT-OSS) clamps each half and
                                     concatenates them as eager ops before the fused
                                     activation (Megatron-Core weighted_bias_quick_geglu_impl) */
    bool moe_fused_mlp;           /* the experts run as Transformer Engine's op-fuser grouped
                                     MLP (Megatron use_transformer_engine_op_fuser): the
                                     output bias and the clamps inside its kernels; under MXFP8
                                     the CuTeDSL kernels (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1) put
                                     the activation and the casts of its output and of fc1's
                                     gradient in the GEMMs' epilogues (cost_ops.c) */
    bool moe_probs_fp32;          /* the routing weights reach the experts in fp32 (Megatron
                                     --moe-router-dtype fp32, or the flex dispatcher, which
                                     upcasts them); no: in the activations' type */
    double moe_imbalance;         /* routed rows of the busiest rank over the mean (1:
                                     force-balanced, as the reference benchmarks; <= 1 reads
                                     as 1): scales the expert GEMMs and the all-to-all */
    bool moe_wslot_worst;         /* ZB-H1's MoE W slots hold the dropless worst case of routed
                                     rows (no micro-batch overflows into B; plan_moe_wslot_rows);
                                     no: the expected rows x moe_imbalance (Plan.moe_wslot) */
    /* host (host.c; docs/cost-model.md, "Host time") */
    double host_op_s[2];          /* host seconds to dispatch and launch one framework op, on
                                     an x86 host [0] and a Grace host [1] (PassGpu.host_grace);
                                     0: the host is never the bottleneck */
    PassCudaGraph cuda_graph;     /* what runs from captured CUDA graphs */
    bool cuda_graph_mamba;        /* and the Mamba layers (Megatron's scope mamba: the
                                     MambaLayer, its norm, mixer and residual add) */
    bool moe_sync;                /* a dropless dispatcher waits once per MoE layer forward
                                     for the routed counts on the host (Megatron's alltoall
                                     and flex dispatchers) */
    PassDispatch moe_dispatcher;  /* how the routed rows travel (PassDispatch) */
    bool moe_a2a_overlap;         /* the expert all-to-all of one micro-batch runs beside
                                     another micro-batch's compute in the 1F1B steady state
                                     (Megatron --overlap-moe-expert-parallel-comm
                                     --delay-wgrad-compute), where Megatron runs it
                                     (pass_a2a_overlap_applies; a2a_overlap.c) */
    /* low precision (a plan's precision other than bf16; docs/precision.md) */
    int lp_bf16_first, lp_bf16_last; /* linear layers of the first / last repeated layers kept
                                     in bf16 (Megatron --first-last-layers-bf16 with
                                     --num-layers-at-start/end-in-bf16) */
    PassScaling lp_scaling;       /* per-tensor FP8's scales (block formats' are in-kernel) */
    int lp_weight_copies;         /* orientations of the low-precision weight kept (2: the
                                     weight and its transpose, for dgrad) */
    bool lp_weight_cached;        /* the weight is cast once per step (Transformer Engine's
                                     is_first_microbatch), not every micro-batch */
    bool nvfp4_rht;               /* NVFP4's weight-gradient operands (the input and the output
                                     gradient, columnwise) pass a 16-point random Hadamard
                                     transform with an amax of their own (Transformer Engine's
                                     NVFP4BlockScaling: with_rht, with_post_rht_amax) */
    bool lp_experts;              /* an MoE layer's expert GEMMs (grouped) run in the low
                                     precision too, their inputs cast and saved in it */
    bool moe_group_quantize;      /* the experts' rows are quantised by one grouped call
                                     (Transformer Engine's GroupedTensor path: Megatron-Core's
                                     moe_use_grouped_tensor, or its op fuser); no: GroupedLinear's
                                     tex.split_quantize, a quantise per local expert where the
                                     format does not fuse the splits (pass_prec_split_calls) */
    bool fp8_param_gather;        /* the weights are kept and all-gathered in the low
                                     precision (Megatron --fp8-param-gather): no bf16 copy */
    /* communication */
    bool dp_overlap;              /* gradient reduction (and ZeRO gathers) run asynchronously
                                     beside backward; false: after it, blocking */
    double dp_bucket_elems;       /* gradients reduced in buckets of this many elements;
                                     0: the backend's (pass_stack_bucket_elems) */
    bool zero3_prefetch;          /* ZeRO-3 gathers run ahead, hidden behind compute */
    bool zero3_pools;             /* ZeRO-3 holds Megatron-FSDP's buffers: two layers' gathered
                                     weights and two layers' unsharded gradients (the
                                     double-buffer pools), and every piece outside the
                                     repeated layers gathered for the whole step; false: two
                                     gathered pieces' weights (current and prefetch) */
    int offload_act_layers;       /* the first N repeated layers' saved activations go to host
                                     memory after their forward and come back for their
                                     backward (Megatron --cpu-offloading-num-layers, Transformer
                                     Engine's CPU offload; pass_offload); a framework stack's,
                                     applied where the framework allows it: pp 1, no
                                     recomputation */
    bool pp_overlap;              /* an interleaved schedule's pipeline transfers run beside
                                     the chunks' compute (a framework's; ptdc's programs wait
                                     for each receive) */
    PassTpOverlap tp_overlap;     /* tensor-parallel collectives beside their GEMMs */
    PassParamGather param_gather; /* where ZeRO-1/2's weight all-gather runs */
    double reshard_overlap;       /* fraction of the resharding collectives tp_overlap leaves
                                     exposed that is hidden nonetheless (a user's estimate;
                                     the presets have 0) */
    /* memory */
    bool ref_stack;               /* memory as a caching-allocator framework holds it, not as
                                     ptdc's programs do: activations peak at the bytes alive at
                                     once rather than each chunk's slots of a static arena;
                                     ZeRO-1 reduce-scatters in place; no pipeline send/gradient
                                     slot copies */
    double frag_act;              /* caching-allocator fragmentation as a fraction of the bytes
                                     allocated and freed every micro-batch; 0: static arena */
    double alloc_reserve;         /* fraction of memory kept free for model error (and a
                                     caching allocator's overhead); 0 = PASS_MEM_RESERVE
                                     unless alloc_reserve_bytes is set */
    double alloc_reserve_bytes;   /* bytes kept free for what the model does not itemise;
                                     the reserve is the larger of the two (pass_usable_bytes) */
    bool master_aliases;          /* the fp32 master weights are the weights (an fp32 backend
                                     that keeps no second copy) */
    bool grad_in_place;           /* the loss writes dlogits over the logits it keeps
                                     (ir_grad_in_place): no second logits-sized buffer */
    bool keeps_exchanged;         /* a saved input that an all-to-all or a slice brought to its
                                     reader is kept so (Transformer Engine's all-to-all context
                                     parallelism saves q, k, v exchanged), not made again in
                                     backward from the copy kept as produced (ptdc's programs:
                                     docs/sharding.md); all-gathered ones are gathered again
                                     either way (sequence parallelism) */
    bool grad_sum_in_kernel;      /* a GEMM (beta = 1) or a norm's backward (dres) adds its
                                     gradient contribution into the sum of the others, no
                                     rt_add (IR_OPF_GRAD_SUM) */
    /* what it offers */
    unsigned zero_stages;         /* bit z: ZeRO stage z (0: all) */
    unsigned recompute;           /* bit PlanRecompute r: that policy (0: all) */
    unsigned schedules;           /* bit PlanSchedule s: that schedule (0: all) */
    unsigned cp_comm;             /* bit PassCpComm f: that context-parallel form (0: all) */
    bool no_sp;                   /* no sequence parallelism */
    unsigned backends;            /* bit PassDevKind: devices it runs on (0: all) */
} PassStack;

/* The built-in stacks: "ptdc", "megatron", "fsdp" (stack.c). */
bool pass_stack_preset(const char *name, PassStack *out);
const char *pass_stack_preset_names(void);
/* Read a --stack file (format: docs/stacks.md): `key = value` lines like a
 * cluster file; `stack = NAME` first starts from a preset. Errors with
 * file:line:col and a caret; false on any. */
bool pass_stack_load(const char *path, PassStack *out);
bool pass_stack_parse(const char *path, const char *text, size_t len, PassStack *out);
/* The same keys applied on top of *st (--stack-set). */
bool pass_stack_apply(const char *path, const char *text, size_t len, PassStack *st);
/* --stack NAME|FILE (NULL: ptdc): a preset name, else a file. */
bool pass_stack_setup(PassStack *out, const char *name_or_file);
/* The file form, every key, with the preset's sources as comments. */
void pass_stack_print(FILE *f, const PassStack *st);
/* Does the stack offer ZeRO stage z, recomputation r, schedule s? */
bool pass_stack_has_zero(const PassStack *st, int z);
/* The gradient bucket a stack reduces at once on this device: its own
 * setting, else the size ptdc's programs use (codegen/cg_bucket.c). */
double pass_stack_bucket_elems(const PassStack *st, const PassGpu *gpu);
/* Compute time lost per second of collective overlapped with it: a GPU's
 * copy engines and SMs barely notice NCCL; a CPU rank's communication
 * thread copies with the cores the kernels use, so nothing is gained. */
double pass_overlap_slowdown(const PassGpu *gpu);
bool pass_stack_has_recompute(const PassStack *st, int r);
bool pass_stack_has_schedule(const PassStack *st, int s);
/* ... attention's context-parallel form f (docs/context.md), Megatron's
 * --cp-comm-type words: keys and values gathered, passed round the ring, or
 * the heads split by all-to-all. */
typedef enum { PASS_CP_ALL_GATHER, PASS_CP_P2P, PASS_CP_A2A } PassCpComm;
bool pass_stack_has_cp_comm(const PassStack *st, int f);

#endif
