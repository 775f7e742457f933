"""Megatron-LM's command line as data: the options --emit megatron may print,
the rules validate_args and TransformerConfig.__post_init__ apply to them,
and the GPT model pretrain_gpt.py builds from them.

UPSTREAM names the source each entry was read from. When Megatron-LM changes,
update the entries and UPSTREAM together."""

import shlex

import rope

UPSTREAM = ("Megatron-LM main at d98e8a64ddf3 (2026-08-22): megatron/training/arguments.py "
            "(_add_transformer_engine_args), argument_utils.py (core_transformer_config_from_args), training/config/training_config.py, "
            "core/model_parallel_config.py, core/transformer/transformer_config.py, "
            "core/models/common/embeddings/rotary_pos_embedding.py, core/fusions/fused_bias_gelu.py, "
            "core/transformer/moe/shared_experts.py, moe_layer.py, moe_utils.py (group_limited_topk), "
            "core/models/gpt/gpt_layer_specs.py (get_gpt_decoder_layer_specs, get_gpt_decoder_block_spec), "
            "core/transformer/pipeline_parallel_layer_layout.py, transformer_block.py (get_num_layers_to_build), "
            "transformer_layer.py (get_transformer_layer_offset), training/training.py (get_model: pre_process, "
            "post_process); the hybrid model: pretrain_hybrid.py, hybrid_builders.py, "
            "core/models/hybrid/{hybrid_model,hybrid_block,hybrid_layer_specs,hybrid_layer_allocation}.py, "
            "core/ssm/{mamba_mixer,mamba_layer,mlp_layer}.py")

# flag: (dest, kind, default, choices). kind: int, float, str, true (store_true),
# false (store_false), tuple ("a,b" of ints), list (one or more words), freq
# (moe_freq_type: an int, or a Python list expression of digits , [ ] ( ) + *).
OPTIONS = {
    # ModelParallelConfig / TrainingConfig (ArgumentGroupFactory: field -> --field-name)
    "--tensor-model-parallel-size": ("tensor_model_parallel_size", "int", 1, None),
    "--pipeline-model-parallel-size": ("pipeline_model_parallel_size", "int", 1, None),
    "--sequence-parallel": ("sequence_parallel", "true", False, None),
    "--context-parallel-size": ("context_parallel_size", "int", 1, None),
    "--tp-comm-overlap": ("tp_comm_overlap", "true", False, None),
    "--bf16": ("bf16", "true", False, None),
    "--micro-batch-size": ("micro_batch_size", "int", None, None),
    "--global-batch-size": ("global_batch_size", "int", None, None),
    # arguments.py
    "--num-layers-per-virtual-pipeline-stage": ("num_layers_per_virtual_pipeline_stage", "int", None, None),
    "--num-virtual-stages-per-pipeline-rank": ("num_virtual_stages_per_pipeline_rank", "int", None, None),
    # uneven pipelines (argument_utils.py: num_layers_in_{first,last}_pipeline_stage of TransformerConfig)
    "--decoder-first-pipeline-num-layers": ("decoder_first_pipeline_num_layers", "int", None, None),
    "--decoder-last-pipeline-num-layers": ("decoder_last_pipeline_num_layers", "int", None, None),
    "--pipeline-model-parallel-layout": ("pipeline_model_parallel_layout", "str", None, None),
    "--use-distributed-optimizer": ("use_distributed_optimizer", "true", False, None),
    "--overlap-grad-reduce": ("overlap_grad_reduce", "true", False, None),
    "--overlap-param-gather": ("overlap_param_gather", "true", False, None),
    "--overlap-param-gather-with-optimizer-step": ("overlap_param_gather_with_optimizer_step", "true", False, None),
    "--no-overlap-p2p-communication": ("overlap_p2p_comm", "false", True, None),
    # nargs='+' with no argparse choices; the words are TransformerConfig.cp_comm_type's (one for
    # every layer, or one per layer), which Transformer Engine's attention checks
    "--cp-comm-type": ("cp_comm_type", "list", ["p2p"], ["p2p", "all_gather", "a2a", "a2a+p2p"]),
    "--ckpt-format": ("ckpt_format", "str", "torch_dist", ["torch", "torch_dist", "torch_dcp", "fsdp_dtensor"]),
    # Megatron-FSDP (arguments.py _add_distributed_args; use_megatron_fsdp is DistributedInitConfig's)
    "--use-megatron-fsdp": ("use_megatron_fsdp", "true", False, None),
    "--data-parallel-sharding-strategy": ("data_parallel_sharding_strategy", "str", "optim_grads_params",
                                          ["no_shard", "optim", "optim_grads", "optim_grads_params"]),
    "--fsdp-double-buffer": ("fsdp_double_buffer", "true", False, None),
    # TransformerConfig (ModelParallelConfig) cpu_offloading_num_layers; cpu_offloading itself has no
    # flag (excluded in _add_network_size_args) and validate_args turns it on for a count > 0
    "--cpu-offloading-num-layers": ("cpu_offloading_num_layers", "int", 0, None),
    # TransformerConfig's multi-token prediction (transformer_config.py mtp_num_layers,
    # mtp_loss_scaling_factor; core/transformer/multi_token_prediction.py)
    "--mtp-num-layers": ("mtp_num_layers", "int", None, None),
    "--mtp-loss-scaling-factor": ("mtp_loss_scaling_factor", "float", 0.1, None),
    # one MTP layer run at every depth (MultiTokenPredictionBlock._build_layers)
    "--mtp-use-repeated-layer": ("mtp_use_repeated_layer", "true", False, None),
    "--grad-reduce-in-bf16": ("grad_reduce_in_bf16", "true", False, None),
    "--no-gradient-accumulation-fusion": ("gradient_accumulation_fusion", "false", True, None),
    "--group-query-attention": ("group_query_attention", "true", False, None),
    "--seq-length": ("seq_length", "int", None, None),
    "--max-position-embeddings": ("max_position_embeddings", "int", None, None),
    "--position-embedding-type": ("position_embedding_type", "str", "learned_absolute",
                                  ["learned_absolute", "rope", "yarn", "mrope", "relative", "none"]),
    "--rotary-base": ("rotary_base", "int", 10000, None),
    "--use-rope-scaling": ("use_rope_scaling", "true", False, None),
    "--rope-scaling-factor": ("rope_scaling_factor", "float", 8.0, None),
    "--window-size": ("window_size", "tuple", None, None),
    # TransformerConfig softmax_type (ArgumentGroupFactory: the Literal's values); learnable adds a
    # [heads] softmax_offset to each layer's attention (dot_product_attention.py)
    "--softmax-type": ("softmax_type", "str", "vanilla", ["vanilla", "off-by-one", "learnable"]),
    # TransformerConfig window_attn_skip_freq (arguments.py: type=moe_freq_type)
    "--window-attn-skip-freq": ("window_attn_skip_freq", "freq", None, None),
    "--swiglu": ("swiglu", "true", False, None),
    # arguments.py _add_network_size_args; argument_utils.py: --squared-relu (not with --swiglu) sets
    # activation_func squared_relu, no GLU; --quick-geglu a GLU of quick_gelu (x sigmoid(1.702 x));
    # TransformerConfig glu_linear_offset (added to the GLU's linear half) and
    # activation_func_clamp_value (experts.py glu: x_glu.clamp(max=v), x_linear.clamp(-v, v))
    "--squared-relu": ("squared_relu", "true", False, None),
    "--quick-geglu": ("quick_geglu", "true", False, None),
    "--glu-linear-offset": ("glu_linear_offset", "float", 0.0, None),
    "--activation-func-clamp-value": ("activation_func_clamp_value", "float", None, None),
    "--untie-embeddings-and-output-weights": ("untie_embeddings_and_output_weights", "true", False, None),
    "--no-masked-softmax-fusion": ("masked_softmax_fusion", "false", True, None),
    # arguments.py _add_training_args: store_false into apply_rope_fusion
    "--no-rope-fusion": ("apply_rope_fusion", "false", True, None),
    "--no-bias-gelu-fusion": ("bias_gelu_fusion", "false", True, None),
    "--make-vocab-size-divisible-by": ("make_vocab_size_divisible_by", "int", 128, None),
    # TransformerConfig
    "--num-layers": ("num_layers", "int", None, None),
    "--hidden-size": ("hidden_size", "int", None, None),
    "--ffn-hidden-size": ("ffn_hidden_size", "int", None, None),
    "--num-attention-heads": ("num_attention_heads", "int", None, None),
    "--num-query-groups": ("num_query_groups", "int", None, None),
    "--kv-channels": ("kv_channels", "int", None, None),
    "--hidden-dropout": ("hidden_dropout", "float", 0.1, None),
    "--attention-dropout": ("attention_dropout", "float", 0.1, None),
    "--norm-epsilon": ("layernorm_epsilon", "float", 1e-5, None),
    "--disable-bias-linear": ("add_bias_linear", "false", True, None),
    "--add-qkv-bias": ("add_qkv_bias", "true", False, None),
    "--normalization": ("normalization", "str", "LayerNorm", ["LayerNorm", "RMSNorm"]),
    "--qk-layernorm": ("qk_layernorm", "true", False, None),
    # Multi-latent attention (arguments.py _add_mla_args; MLATransformerConfig)
    "--multi-latent-attention": ("multi_latent_attention", "true", False, None),
    "--q-lora-rank": ("q_lora_rank", "int", None, None),
    "--kv-lora-rank": ("kv_lora_rank", "int", 32, None),
    "--qk-head-dim": ("qk_head_dim", "int", 128, None),
    "--qk-pos-emb-head-dim": ("qk_pos_emb_head_dim", "int", 64, None),
    "--v-head-dim": ("v_head_dim", "int", 128, None),
    "--init-method-std": ("init_method_std", "float", 0.02, None),
    "--attention-backend": ("attention_backend", "str", "auto", ["flash", "fused", "unfused", "local", "auto"]),
    "--recompute-granularity": ("recompute_granularity", "str", None, ["full", "selective"]),
    "--recompute-method": ("recompute_method", "str", None, ["uniform", "block"]),
    "--recompute-num-layers": ("recompute_num_layers", "int", None, None),
    "--account-for-embedding-in-pipeline-split": ("account_for_embedding_in_pipeline_split", "true", False, None),
    "--account-for-loss-in-pipeline-split": ("account_for_loss_in_pipeline_split", "true", False, None),
    # MoE (arguments.py _add_moe_args; TransformerConfig moe_* fields; ModelParallelConfig)
    "--num-experts": ("num_experts", "int", None, None),
    "--moe-ffn-hidden-size": ("moe_ffn_hidden_size", "int", None, None),
    "--moe-grouped-gemm": ("moe_grouped_gemm", "true", False, None),
    "--moe-router-load-balancing-type": ("moe_router_load_balancing_type", "list", ["aux_loss"],
                                         ["aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn",
                                          "quantile_balancing", "none"]),
    "--moe-aux-loss-coeff": ("moe_aux_loss_coeff", "float", 0.0, None),
    "--moe-z-loss-coeff": ("moe_z_loss_coeff", "float", None, None),
    "--moe-router-topk": ("moe_router_topk", "int", 2, None),
    "--moe-router-score-function": ("moe_router_score_function", "str", "softmax",
                                    ["softmax", "sigmoid", "sqrtsoftplus"]),
    "--moe-router-pre-softmax": ("moe_router_pre_softmax", "true", False, None),
    "--moe-router-topk-scaling-factor": ("moe_router_topk_scaling_factor", "float", None, None),
    "--moe-router-num-groups": ("moe_router_num_groups", "int", None, None),
    "--moe-router-group-topk": ("moe_router_group_topk", "int", None, None),
    "--moe-expert-capacity-factor": ("moe_expert_capacity_factor", "float", None, None),
    "--moe-token-drop-policy": ("moe_token_drop_policy", "str", "probs", ["probs", "position"]),
    "--moe-token-dispatcher-type": ("moe_token_dispatcher_type", "str", "allgather", ["allgather", "alltoall", "flex"]),
    "--moe-flex-dispatcher-backend": ("moe_flex_dispatcher_backend", "str", "deepep", ["deepep", "hybridep", "ncclep"]),
    "--moe-layer-freq": ("moe_layer_freq", "freq", 1, None),  # arguments.py moe_freq_type
    "--moe-shared-expert-intermediate-size": ("moe_shared_expert_intermediate_size", "int", None, None),
    # TransformerConfig.moe_latent_size (ArgumentGroupFactory): the latent MoE's width
    "--moe-latent-size": ("moe_latent_size", "int", None, None),
    "--moe-shared-expert-gate": ("moe_shared_expert_gate", "true", False, None),
    "--moe-shared-expert-overlap": ("moe_shared_expert_overlap", "true", False, None),
    "--expert-model-parallel-size": ("expert_model_parallel_size", "int", 1, None),
    "--expert-tensor-parallel-size": ("expert_tensor_parallel_size", "int", None, None),
    # Precision. TransformerConfig (ArgumentGroupFactory: Literal -> choices): fp8 -> --fp8-format,
    # fp4 -> --fp4-format (argparse_meta arg_names), fp8_recipe's default is delayed; the
    # *-param-gather flags are arguments.py's _add_transformer_engine_args (store_true).
    "--fp8-format": ("fp8", "str", None, ["e4m3", "hybrid"]),
    "--fp8-recipe": ("fp8_recipe", "str", "delayed", ["tensorwise", "delayed", "mxfp8", "blockwise", "custom"]),
    "--fp8-amax-history-len": ("fp8_amax_history_len", "int", 1, None),
    "--fp8-amax-compute-algo": ("fp8_amax_compute_algo", "str", "most_recent", ["most_recent", "max"]),
    "--fp8-param-gather": ("fp8_param_gather", "true", False, None),
    "--first-last-layers-bf16": ("first_last_layers_bf16", "true", False, None),
    "--num-layers-at-start-in-bf16": ("num_layers_at_start_in_bf16", "int", 1, None),
    "--num-layers-at-end-in-bf16": ("num_layers_at_end_in_bf16", "int", 1, None),
    "--fp4-format": ("fp4", "str", None, ["e2m1"]),
    "--fp4-recipe": ("fp4_recipe", "str", "nvfp4", ["nvfp4", "custom"]),
    "--fp4-param-gather": ("fp4_param_gather", "true", False, None),
    # ModelParallelConfig (ArgumentGroupFactory: field -> --field-name): the expert all-to-all
    # overlap with another micro-batch's compute, and the weight gradients it delays
    "--overlap-moe-expert-parallel-comm": ("overlap_moe_expert_parallel_comm", "true", False, None),
    "--delay-wgrad-compute": ("delay_wgrad_compute", "true", False, None),
    # The hybrid model (pretrain_hybrid.py): arguments.py _add_experimental_args (--spec nargs='*', the
    # pattern; --hybrid-override-pattern its deprecated alias), TransformerConfig's mamba_* fields and
    # is_hybrid_model (ArgumentGroupFactory; argument_utils.py sets is_hybrid_model with a pattern)
    "--spec": ("spec", "list", None, None),
    "--hybrid-layer-pattern": ("hybrid_layer_pattern", "str", None, None),
    "--hybrid-override-pattern": ("hybrid_override_pattern", "str", None, None),
    "--is-hybrid-model": ("is_hybrid_model", "true", False, None),
    "--mamba-state-dim": ("mamba_state_dim", "int", 128, None),
    "--mamba-head-dim": ("mamba_head_dim", "int", 64, None),
    "--mamba-num-groups": ("mamba_num_groups", "int", 8, None),
    "--mamba-num-heads": ("mamba_num_heads", "int", None, None),
    "--recompute-modules": ("recompute_modules", "list", ["core_attn"],  # __post_init__: None -> ["core_attn"]
                            ["core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
                             "gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc"]),
}


class Reject(Exception):
    pass


# The training scripts: pretrain_gpt.py builds GPTModel; pretrain_hybrid.py builds HybridModel
# (hybrid_builders.py), which pretrain_mamba.py (deprecated) runs.
SCRIPTS = ("pretrain_gpt.py", "pretrain_hybrid.py", "pretrain_mamba.py")
# hybrid_layer_allocation.py Symbols: M mamba, G gated delta net, * attention, D DeepSeek sparse
# attention, + MLA, - MLP, E MoE; | a pipeline segment's end, / the MTP patterns'.
HYBRID_LAYERS = "MG*D+-E"
# hybrid_builders.py: import_module(args.spec), the (module, name) of a HybridStack spec. The
# training spec is hybrid_stack_spec (mamba_stack_spec its alias, mamba_layer_specs.py re-exporting
# hybrid_layer_specs.py); the inference and gated-delta-product stacks build other mixers.
HYBRID_SPECS = {("megatron.core.models.hybrid.hybrid_layer_specs", "hybrid_stack_spec"),
                ("megatron.core.models.hybrid.hybrid_layer_specs", "mamba_stack_spec"),
                ("megatron.core.models.mamba.mamba_layer_specs", "hybrid_stack_spec"),
                ("megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec")}


def hybrid_segments(a):
    """The main pattern's pipeline segments (split at |), or None for a GPT model."""
    p = a["hybrid_layer_pattern"]
    return None if p is None else p.split("/")[0].split("|")


def hybrid_letters(a):
    """The main pattern's layers, one letter each ('' without a pattern)."""
    return "".join(hybrid_segments(a) or [])


def moe_freq_type(x):
    """arguments.py moe_freq_type and _eval_pattern: "N", or a list expression
    such as "([0]*3+[1]*58)" of digits , [ ] ( ) + * only (ValueError else)."""
    import re
    if "[" not in x:
        return int(x)
    if re.search(r"[^,\d\[\]\(\)\+\*]", x):
        raise ValueError("Invalid pattern: " + x)
    return eval(x)


def moe_pattern(a):
    """gpt_layer_specs.py get_gpt_decoder_layer_specs: 1 (MoE) or 0 (dense) per layer."""
    f, L = a["moe_layer_freq"], a["num_layers"]
    if isinstance(f, int):
        return [1 if i % f == 0 else 0 for i in range(L)]
    return list(f)


LAYOUT_CHARS = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}


def layout_stages(text):
    """pipeline_parallel_layer_layout.py parse_str_to_list: commas dropped,
    "(...)*n" then "x*n" unrolled, stages split at "|", one layer per
    character of E (embedding), L (loss), t (decoder), m (mtp). Raises Reject
    where it asserts (an unknown character)."""
    import re
    text = text.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        text = re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), text)
    stages = []
    for stage in text.split("|"):
        stages.append([])
        for ch in stage:
            if ch not in LAYOUT_CHARS:
                raise Reject("invalid layer character %r in the pipeline layout (known: %s)" % (
                    ch, ", ".join(LAYOUT_CHARS)))
            stages[-1].append(LAYOUT_CHARS[ch])
    return stages


def _split_counts(a):
    """The flags of the pipeline split: pp, vpp (None without interleaving, as
    validate_args leaves it), first, last, account_for_embedding, account_for_loss."""
    return (a["pipeline_model_parallel_size"], a.get("_vpp"), a["decoder_first_pipeline_num_layers"],
            a["decoder_last_pipeline_num_layers"], a["account_for_embedding_in_pipeline_split"],
            a["account_for_loss_in_pipeline_split"])


def num_layers_to_build(a, vp, r):
    """transformer_block.py get_num_layers_to_build for pipeline rank r,
    virtual stage vp (the layout's count where there is one)."""
    pp, vpp, first, last, acc_e, acc_l = _split_counts(a)
    if a["pipeline_model_parallel_layout"] is not None:
        return a["_layout"][vp * pp + r].count("decoder")
    if first is not None or last is not None:
        left, stages = a["num_layers"], pp
        if first is not None:
            left, stages = left - first, stages - 1
        if last is not None:
            left, stages = left - last, stages - 1
        if stages > 0:
            if left % stages:
                raise Reject("get_num_layers_to_build: with uneven pipelining the left over layers (%d) must be "
                             "divisible by left over stages (%d)" % (left, stages))
            per_rank = left // stages
        else:
            per_rank = 0
        if r == 0 and first is not None:
            per_rank = first
        if r == pp - 1 and last is not None:
            per_rank = last
    else:
        n = a["num_layers"] + acc_e + acc_l
        if n % pp:
            raise Reject("get_num_layers_to_build: %d layers not divisible by pp %d" % (n, pp))
        per_rank = n // pp
    if vpp is not None and pp > 1:
        if per_rank % vpp:
            raise Reject("get_num_layers_to_build: num_layers_per_pipeline_rank %d not divisible by vp_size %d"
                         % (per_rank, vpp))
        build = per_rank // vpp
    else:
        build = per_rank
    if acc_e and vp == 0 and r == 0:
        build -= 1
    if acc_l and vp == (vpp or 1) - 1 and r == pp - 1:
        build -= 1
    if build < 0:
        raise Reject("get_num_layers_to_build: not enough layers in the first or last virtual pipeline stage")
    return build


def layer_offset(a, vp, r):
    """transformer_layer.py get_transformer_layer_offset (the branches without a layout)."""
    pp, vpp, first, last, acc_e, acc_l = _split_counts(a)
    if pp == 1:
        return 0
    if first is not None or last is not None:
        middle_stages = pp - (first is not None) - (last is not None)
        f, z = first or 0, last or 0
        middle = a["num_layers"] - f - z
        middle_rank = r if first is None else r - 1
        if vpp is not None:
            f_chunk, z_chunk, mid_chunk = f // vpp, z // vpp, middle // vpp
            total = f_chunk + mid_chunk + z_chunk
            if r == 0:
                return vp * total
            if middle_stages == 0:  # evaluated even where middle_rank is 0
                raise Reject("get_transformer_layer_offset: an interleaved uneven pipeline with both first and "
                             "last counts and no middle stage (pp 2) divides by the 0 middle stages "
                             "(ZeroDivisionError building pipeline rank 1)")
            return vp * total + f_chunk + middle_rank * (mid_chunk // middle_stages)
        per = middle // middle_stages if middle_stages > 0 else 0
        return 0 if r == 0 else middle_rank * per + f
    n = a["num_layers"] + acc_e + acc_l
    per = n // pp
    if vpp is not None:
        offset = vp * (n // vpp) + r * (per // vpp)
    else:
        offset = r * per
    if acc_e and not (vp == 0 and r == 0):
        offset -= 1
    return offset


def pipeline_chunks(a):
    """The model chunks Megatron-LM builds, in model order (virtual stage
    major, pipeline rank minor, as the interleaved schedule runs them): for
    each, (the decoder layer ids it builds, holds the embedding, holds the
    output layer and loss). gpt_layer_specs.py get_gpt_decoder_block_spec:
    with a layout, its get_layer_id_list; else layer_specs[offset : offset +
    num_layers_to_build] (a Python slice of the num_layers specs). The
    embedding is built where pre_process is true, the first pipeline rank's
    first virtual stage, the output layer where post_process is (the last
    rank's last stage), whatever the layout string says (training.py get_model)."""
    segs = hybrid_segments(a)
    if segs is not None and len(segs) > 1:  # select_pipeline_segment: segment vp * pp + r, in order
        chunks, off = [], 0
        for c, seg in enumerate(segs):
            chunks.append((list(range(off, off + len(seg))), c == 0, c == len(segs) - 1))
            off += len(seg)
        return chunks
    pp, vpp = a["pipeline_model_parallel_size"], a.get("_vpp") or 1
    ids = list(range(a["num_layers"]))
    chunks = []
    for vp in range(vpp):
        for r in range(pp):
            n = num_layers_to_build(a, vp, r)
            if a["pipeline_model_parallel_layout"] is not None:
                st = a["_layout"]
                off = sum(st[c].count("decoder") for c in range(vp * pp + r))  # get_layer_offset
                built = list(range(off, off + n))
            else:
                off = layer_offset(a, vp, r)
                built = ids[off:off + n]
            chunks.append((built, vp == 0 and r == 0, vp == vpp - 1 and r == pp - 1))
    return chunks


def data_parallel_size(a, world):
    """validate_args: world // (tp x pp x cp) (total_model_size)."""
    return world // (a["tensor_model_parallel_size"] * a["pipeline_model_parallel_size"] *
                     a["context_parallel_size"])


def parse(text):
    """The command --emit megatron printed: (args namespace as a dict, env,
    world size, gpu name, the header's vocabulary)."""
    lines = text.splitlines()
    env, gpu, vocab = {}, None, None
    for l in lines:
        if l.startswith("export "):
            k, v = l[len("export "):].split("=", 1)
            env[k] = v
        if l.startswith("# Predicted for"):
            gpu = l.split(" x ")[1].split(":")[0].strip()
        if "The model's vocabulary is" in l:
            vocab = int(l.split("The model's vocabulary is")[1].split(";")[0])
    start = next(i for i, l in enumerate(lines) if l.startswith("torchrun "))
    words = shlex.split(" ".join(lines[start:]).replace("\\", " "))
    nproc = int(words[words.index("--nproc-per-node") + 1])
    nnodes = int(words[words.index("--nnodes") + 1])
    script = next((w for w in words if w in SCRIPTS), None)
    if script is None:
        raise Reject("no training script of Megatron-LM's (%s) in the command" % ", ".join(SCRIPTS))
    words = words[words.index(script) + 1:]
    args = {dest: default for dest, kind, default, _ in OPTIONS.values()}
    args["_script"] = script
    seen = set()
    i = 0
    while i < len(words):
        flag = words[i]
        if flag not in OPTIONS:
            raise Reject("%s: not an option of pretrain_gpt.py (%s)" % (flag, UPSTREAM.split(":")[0]))
        if flag in seen:
            raise Reject("%s given twice" % flag)
        seen.add(flag)
        dest, kind, _, choices = OPTIONS[flag]
        i += 1
        if kind in ("true", "false"):
            args[dest] = kind == "true"
            continue
        if kind == "list":
            vals = []
            while i < len(words) and not words[i].startswith("--"):
                vals.append(words[i])
                i += 1
            if not vals or (choices and set(vals) - set(choices)):
                raise Reject("%s %s: expected one or more of %s" % (flag, " ".join(vals), choices))
            args[dest] = vals
            continue
        if i >= len(words):
            raise Reject("%s needs a value" % flag)
        v = words[i]
        i += 1
        try:
            if kind == "int":
                v = int(v)
            elif kind == "float":
                v = float(v)
            elif kind == "tuple":  # arguments.py tuple_type: "a,b" of ints
                v = tuple(int(x) for x in v.split(","))
            elif kind == "freq":
                v = moe_freq_type(v)
        except ValueError:
            raise Reject("%s %s: not a %s (type=%s)" % (flag, v, kind, kind))
        if choices and v not in choices:
            raise Reject("%s %s: invalid choice (choose from %s)" % (flag, v, ", ".join(choices)))
        args[dest] = v
    return args, env, nproc * nnodes, gpu, vocab, seen


def is_pre_blackwell(gpu):
    """A GPU before Blackwell, by ptdc's name for it (None: unknown, so assumed)."""
    return gpu is None or gpu.split("-")[0] in ("a100", "h100", "h200", "h800", "a800")


# The rules, each (name, source, check(args, env, world, gpu) -> error or None).
def _rules():
    R = []

    def rule(name, src):
        def add(f):
            R.append((name, src, f))
            return f
        return add

    @rule("hybrid layer pattern", "arguments.py validate_args: --hybrid-override-pattern forwarded to "
          "--hybrid-layer-pattern (not both), num_layers = the pattern's layers, no MLA/DSA beside attention; "
          "hybrid_layer_allocation.py: valid symbols; hybrid_builders.py: a --spec, HybridModel; pretrain_gpt.py "
          "builds GPTModel, which reads no pattern; mamba_mixer.py: nheads (default 2 hidden / head_dim) and "
          "ngroups divisible by tp, nheads by ngroups, under FP8 the in_proj width by 16; the MoE layer spec "
          "needs num_experts")
    def _(a, env, world, gpu):
        if a["hybrid_override_pattern"] is not None:
            if a["hybrid_layer_pattern"] is not None:
                return "--hybrid-override-pattern and --hybrid-layer-pattern cannot both be specified"
            a["hybrid_layer_pattern"] = a["hybrid_override_pattern"]
        pat, script = a["hybrid_layer_pattern"], a["_script"]
        if script == "pretrain_gpt.py":
            if pat is not None or a["spec"] is not None:
                return "pretrain_gpt.py builds GPTModel, which reads no --hybrid-layer-pattern (nor this --spec)"
            return None
        if pat is None:
            return ("%s without --hybrid-layer-pattern: HybridModel would make one from the deprecated "
                    "attention/MLP ratios, all Mamba by default" % script)
        if a["spec"] is None or tuple(a["spec"]) not in HYBRID_SPECS:
            return "hybrid_builder needs --spec naming the training HybridStack spec, not %s" % a["spec"]
        # parse_hybrid_pattern: the parts after '/' are the MTP depths, all alike, no '|' among them;
        # validate_args infers mtp_num_layers from their count (a different --mtp-num-layers is
        # overridden with a warning)
        parts = pat.split("/")
        mtp = parts[1:]
        if mtp and (any(p != mtp[0] for p in mtp) or not mtp[0]):
            return "All MTP patterns must be identical (and not empty): %s" % "/".join(mtp)
        if mtp and "|" in mtp[0]:
            return "an MTP pattern with a pipeline segment's end ('|')"
        if mtp:
            a["mtp_num_layers"] = len(mtp)
        bad = set(pat) - set(HYBRID_LAYERS + "|/")
        if bad:
            return "'%s' is not a valid layer symbol" % "".join(sorted(bad))
        if "*" in pat and ("D" in pat or "+" in pat):
            return "Not supported to have both Attention and MLA/DSA in one model"
        for ch, what in (("G", "gated delta net"), ("D", "DeepSeek sparse attention"), ("+", "MLA")):
            if ch in pat:
                return "the pattern has %s layers ('%s'), which this table does not build" % (what, ch)
        a["num_layers"] = len(hybrid_letters(a))
        a["is_hybrid_model"] = True
        tp, G = a["tensor_model_parallel_size"], a["mamba_num_groups"]
        if "M" in pat:
            H = a["mamba_num_heads"] if a["mamba_num_heads"] is not None else \
                (2 * a["hidden_size"] // a["mamba_head_dim"] if a["hidden_size"] else 0)
            if a["mamba_num_heads"] is None and (2 * a["hidden_size"]) % a["mamba_head_dim"]:
                return "d_inner must be evenly divisible by headdim"
            if H <= 0 or H % tp:
                return "nheads (%d) must be evenly divisible by tp_size %d" % (H, tp)
            if G <= 0 or G % tp:
                return "ngroups (%d) must be evenly divisible by tp_size %d" % (G, tp)
            if H % G:
                return "nheads (%d) must be evenly divisible by ngroups (%d)" % (H, G)
            if a["fp8"] and (2 * H * a["mamba_head_dim"] + 2 * G * a["mamba_state_dim"] + H) % 16:
                return "For FP8, the Mamba in_proj output width must be a multiple of 16"
        if "E" in pat and not a["num_experts"]:
            return "the pattern has MoE layers ('E') and --num-experts is not given"

    @rule("required arguments", "arguments.py: required_args, micro_batch_size asserted")
    def _(a, env, world, gpu):
        for k in ("num_layers", "hidden_size", "num_attention_heads", "max_position_embeddings",
                  "micro_batch_size", "seq_length"):
            if a[k] is None:
                return "%s is not given" % k
        if a["global_batch_size"] is None:  # validate_args: micro_batch_size x data_parallel_size
            a["global_batch_size"] = a["micro_batch_size"] * data_parallel_size(a, world)

    @rule("tp*pp*cp divides the world", "arguments.py: total_model_size, data_parallel_size")
    def _(a, env, world, gpu):
        tp, pp, cp = a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"], a["context_parallel_size"]
        if world % (tp * pp * cp):
            return "world size %d is not a multiple of tp %d x pp %d x cp %d" % (world, tp, pp, cp)

    @rule("global batch", "arguments.py: global_batch_size % (micro_batch_size * data_parallel_size)")
    def _(a, env, world, gpu):
        dp = data_parallel_size(a, world)
        if a["micro_batch_size"] is None or a["global_batch_size"] % (a["micro_batch_size"] * dp):
            return "global batch %s is not a multiple of micro-batch %s x dp %d" % (
                a["global_batch_size"], a["micro_batch_size"], dp)

    @rule("pipeline split", "arguments.py validate_args: at most one of --num-layers-per-virtual-pipeline-stage, "
          "--num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout; the layout's stages % pp "
          "(its vpp); uneven first/last stages need --num-virtual-stages-per-pipeline-rank to interleave; "
          "(num_layers + account_for_*) % pp and per-stage % num_layers_per_virtual_pipeline_stage; vpp 1 is "
          "none; interleaving needs pp > 1 (pp > 2 without --overlap-p2p-comm); schedules.py: microbatch "
          "groups of pp")
    def _(a, env, world, gpu):
        pp, L = a["pipeline_model_parallel_size"], a["num_layers"]
        lv, nv = a["num_layers_per_virtual_pipeline_stage"], a["num_virtual_stages_per_pipeline_rank"]
        lay = a["pipeline_model_parallel_layout"]
        first, last = a["decoder_first_pipeline_num_layers"], a["decoder_last_pipeline_num_layers"]
        acc = a["account_for_embedding_in_pipeline_split"] + a["account_for_loss_in_pipeline_split"]
        a["_vpp"] = a["_layout"] = None
        segs = hybrid_segments(a)
        vpp = None
        if segs is not None:  # validate_args: the pattern's | segments give the split
            if lv is not None or nv is not None or lay is not None or acc:
                return ("--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank, "
                        "--pipeline-model-parallel-layout, --account-for-*-in-pipeline-split should not be used "
                        "with --hybrid-layer-pattern")
            if len(segs) > 1 and (first is not None or last is not None):
                return "--decoder-first/last-pipeline-num-layers with pipe separators in the pattern"
            if len(segs) > 1 and len(segs) % pp:
                return "the pattern's %d pipeline segments are not divisible by pp %d" % (len(segs), pp)
            vpp = len(segs) // pp if len(segs) > 1 else None
            if len(segs) == 1 and pp > 1 and first is None and last is None and L % pp:
                return "select_pipeline_segment: %d layers not divisible by pp %d without pipes" % (L, pp)
        else:
            if (lv is not None) + (nv is not None) + (lay is not None) > 1:
                return ("no more than one of --num-layers-per-virtual-pipeline-stage, "
                        "--num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout")
            # a count of 0 or less divides by zero (lv) or makes no chunk (nv)
            for flag, x in (("--num-layers-per-virtual-pipeline-stage", lv),
                            ("--num-virtual-stages-per-pipeline-rank", nv)):
                if x is not None and x < 1:
                    return "%s %d" % (flag, x)
            if lay is not None:
                try:
                    stages = layout_stages(lay)
                except Reject as e:
                    return str(e)
                if len(stages) % pp:
                    return "the layout's %d stages are not divisible by pp %d" % (len(stages), pp)
                vpp = len(stages) // pp
                a["_layout"] = stages
            elif lv is not None or nv is not None:
                if nv is None:
                    if first is not None or last is not None:
                        return ("please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline "
                                "parallel degree when enable uneven pipeline parallelism")
                    if (L + acc) % pp:
                        return "num_layers %d (+%d) not divisible by pp %d" % (L, acc, pp)
                    if (L + acc) // pp % lv:
                        return "layers per pipeline stage %d not divisible by %d" % ((L + acc) // pp, lv)
                    vpp = (L + acc) // pp // lv
                else:
                    vpp = nv
            elif first is None and last is None and (L + acc) % pp:
                return "num_layers %d (+%d) not divisible by pp %d" % (L, acc, pp)
        a["_vpp"] = vpp = None if vpp == 1 else vpp
        if vpp is not None:
            if pp <= (1 if a["overlap_p2p_comm"] else 2):
                return "interleaved schedule with pp %d (more than %d needed)" % (pp, 1 if a["overlap_p2p_comm"] else 2)
            dp = data_parallel_size(a, world)
            m = a["global_batch_size"] // (a["micro_batch_size"] * dp)
            if m < pp or m % pp:
                return "%d micro-batches with the interleaved schedule's groups of pp %d" % (m, pp)

    @rule("uneven pipeline stages", "transformer_config.py __post_init__: first/last not with account_for_*; "
          "the layout not with first/last/account_for_*; first and last > 0 and multiples of vpp; middle "
          "layers and middle stages both or neither, the middle layers divisible by the middle stages and each "
          "middle rank's by vpp; account_for_*: (num_layers + 1 or 2) % pp, per rank % vpp; "
          "pipeline_parallel_layer_layout.py validate_layer_layout: E first, L last, each once, decoder "
          "layers == num_layers, no mtp (mtp_num_layers None); training.py get_model builds the embedding in "
          "the first chunk and the loss in the last; transformer_block.py get_num_layers_to_build")
    def _(a, env, world, gpu):
        pp, vpp, first, last, acc_e, acc_l = _split_counts(a)
        L = a["num_layers"]
        uneven = first is not None or last is not None
        if uneven and (acc_e or acc_l):
            return "num_layers_in_first/last_pipeline_stage cannot be set with account_for_*_in_pipeline_split"
        if a["pipeline_model_parallel_layout"] is not None:
            if uneven or acc_e or acc_l:
                return "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments"
            flat = [x for vp in range(vpp or 1) for r in range(pp) for x in a["_layout"][vp * pp + r]]
            if not flat or flat[0] != "embedding" or flat[-1] != "loss":
                return "the layout's first layer must be E and its last L"
            if flat.count("embedding") != 1 or flat.count("loss") != 1:
                return "the layout must give E and L exactly once"
            if flat.count("decoder") != L:
                return "the layout has %d decoder layers, num_layers is %d" % (flat.count("decoder"), L)
            n_mtp = a["mtp_num_layers"] or 0
            if flat.count("mtp") != n_mtp:
                return "the layout has %d mtp layers, mtp_num_layers is %s" % (flat.count("mtp"), a["mtp_num_layers"])
            if n_mtp and "decoder" in flat[flat.index("mtp"):]:
                return "decoder layers must be placed before MTP layers"
            if n_mtp and (any("mtp" in c for c in a["_layout"][:-1]) or a["_layout"][-1].count("mtp") != n_mtp):
                return "the MTP layers must all be in the last pipeline stage's last chunk"
            st = a["_layout"]
            if "embedding" not in st[0] or "loss" not in st[-1]:
                return ("the layout puts E or L in a chunk where Megatron does not build it (the embedding is "
                        "built in the first chunk, the loss in the last: pre_process, post_process)")
        elif uneven:
            stages, left = pp, L
            for name, x in (("first", first), ("last", last)):
                if x is None:
                    continue
                if x <= 0:
                    return "num_layers_in_%s_pipeline_stage must be larger than 0" % name
                if vpp is not None and x % vpp:
                    return "number of layers at %s stage %d must be divisible by vpp %d" % (name, x, vpp)
                left, stages = left - x, stages - 1
            if bool(left) != bool(stages):
                return "%d middle layers remaining but %d middle PP stages available" % (left, stages)
            if stages and left % stages:
                return "number of layers at middle stage %d must be divisible by the middle pp size %d" % (left, stages)
            if stages and vpp is not None and left // stages % vpp:
                return "layers on each middle pipeline rank (%d) must be divisible by vpp %d" % (left // stages, vpp)
        elif acc_e or acc_l:
            n = L + acc_e + acc_l
            if n % pp:
                return "num_layers %d (+ embedding/loss) must be divisible by pp %d" % (n, pp)
            if vpp is not None and n // pp % vpp:
                return "layers on each pipeline rank (%d) must be divisible by vpp %d" % (n // pp, vpp)
        try:
            a["_chunks"] = pipeline_chunks(a)
        except Reject as e:
            return str(e)

    @rule("heads and query groups over tp", "transformer_config.py __post_init__")
    def _(a, env, world, gpu):
        tp = a["tensor_model_parallel_size"]
        if a["num_attention_heads"] % tp:
            return "num_attention_heads %% tp"
        g = (a["group_query_attention"] and a["num_query_groups"]) or a["num_attention_heads"]
        if g % tp and tp % g:
            return "num_query_groups must be a multiple or divisor of tp"

    @rule("multi-latent attention excludes grouped-query attention",
          "arguments.py: assert not args.group_query_attention with multi_latent_attention")
    def _(a, env, world, gpu):
        if a["multi_latent_attention"] and a["group_query_attention"]:
            return "Group query attention is mutually exclusive with multi latent attention"

    @rule("num-query-groups needs --group-query-attention",
          "argument_utils.py: num_query_groups = args.num_query_groups only if args.group_query_attention")
    def _(a, env, world, gpu):
        if a["num_query_groups"] is not None and not a["group_query_attention"]:
            return "--num-query-groups is dropped without --group-query-attention"

    @rule("sequence parallelism needs tp > 1", "arguments.py: disables sequence_parallel when tp == 1")
    def _(a, env, world, gpu):
        if a["sequence_parallel"] and a["tensor_model_parallel_size"] == 1:
            return "--sequence-parallel is dropped with tp 1"

    @rule("tp-comm-overlap needs sequence parallelism", "arguments.py")
    def _(a, env, world, gpu):
        if a["tp_comm_overlap"] and not a["sequence_parallel"]:
            return "--tp-comm-overlap without --sequence-parallel"

    @rule("overlap-param-gather needs the distributed optimizer and --overlap-grad-reduce", "arguments.py")
    def _(a, env, world, gpu):
        if a["overlap_param_gather"] and not (a["use_distributed_optimizer"] or a["use_megatron_fsdp"]):
            return "--overlap-param-gather without --use-distributed-optimizer or --use-megatron-fsdp"
        if a["overlap_param_gather"] and not a["overlap_grad_reduce"]:
            return "--overlap-param-gather without --overlap-grad-reduce"

    @rule("overlap-param-gather-with-optimizer-step", "arguments.py: distributed optimizer, --overlap-param-gather, "
          "an interleaved schedule, no distributed checkpoint (use_dist_ckpt: ckpt_format != torch)")
    def _(a, env, world, gpu):
        if not a["overlap_param_gather_with_optimizer_step"]:
            return
        if not (a["use_distributed_optimizer"] and a["overlap_param_gather"]):
            return "needs --use-distributed-optimizer --overlap-param-gather"
        if a["num_layers_per_virtual_pipeline_stage"] is None:
            return "needs the interleaved schedule"
        if a["ckpt_format"] != "torch":
            return "not supported with distributed checkpointing (--ckpt-format %s)" % a["ckpt_format"]

    @rule("CUDA_DEVICE_MAX_CONNECTIONS", "arguments.py: asserted == '1' with tp or cp > 1 before Blackwell "
          "(only warned about under Megatron-FSDP, which asserts it is not 1, and with "
          "overlap_moe_expert_parallel_comm)")
    def _(a, env, world, gpu):
        pre_blackwell = is_pre_blackwell(gpu)
        model_parallel = a["tensor_model_parallel_size"] > 1 or a["context_parallel_size"] > 1
        if a["use_megatron_fsdp"]:
            if env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":
                return "FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset"
            return None
        if a["overlap_moe_expert_parallel_comm"]:  # only warned about: the overlap wants more connections
            return None
        if model_parallel and pre_blackwell and env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":
            return "tp or cp > 1 on %s needs CUDA_DEVICE_MAX_CONNECTIONS=1 in the environment" % gpu

    @rule("context parallelism", "arguments.py: seq_length % (2 x context_parallel_size), a2a+p2p needs "
          "--hierarchical-context-parallel-sizes; transformer_config.py: one cp_comm_type or one per layer; "
          "Transformer Engine's a2a: heads and query groups per tp rank divisible by cp; "
          "dot_product_attention.py: cp only in TEDotProductAttention (not --attention-backend local)")
    def _(a, env, world, gpu):
        cp, kinds = a["context_parallel_size"], a["cp_comm_type"]
        if cp < 1:
            return "context_parallel_size %d" % cp
        if "--cp-comm-type" in a["_seen"] and cp == 1:
            return "--cp-comm-type is read only with --context-parallel-size > 1"
        if cp == 1:
            return
        if a["seq_length"] % (2 * cp):
            return "seq-length %d is not a multiple of 2 * context-parallel-size %d" % (a["seq_length"], cp)
        if len(kinds) not in (1, a["num_layers"]):
            return "%d cp_comm_types for %d layers" % (len(kinds), a["num_layers"])
        if "a2a+p2p" in kinds:
            return "a2a+p2p needs --hierarchical-context-parallel-sizes"
        if "a2a" in kinds:  # Transformer Engine's AttnFuncWithCPAndQKVOA2A asserts both, per tp rank
            tp = a["tensor_model_parallel_size"]
            g = (a["group_query_attention"] and a["num_query_groups"]) or a["num_attention_heads"]
            if (a["num_attention_heads"] // tp) % cp or max(g // tp, 1) % cp:
                return "a2a needs the attention heads and query groups of each tp rank divisible by cp"
        if a["attention_backend"] == "local":
            return "context parallelism is only supported by TEDotProductAttention"
        if a["attention_backend"] == "unfused":  # Transformer Engine: get_attention_backend
            return "Transformer Engine's unfused attention does not support context parallelism"

    @rule("Megatron-FSDP", "arguments.py validate_args: use_megatron_fsdp turns use_distributed_optimizer on "
          "(--megatron-fsdp-version 1, the default), needs --ckpt-format fsdp_dtensor, which needs it; "
          "optimizer adam or sgd (adam, the default, here); the sharding strategy, double buffer are read only "
          "by Megatron-FSDP (distributed_data_parallel_config.py); --overlap-param-gather needs the distributed "
          "optimizer or Megatron-FSDP, and --overlap-grad-reduce")
    def _(a, env, world, gpu):
        if a["use_megatron_fsdp"]:
            a["use_distributed_optimizer"] = True
            if a["ckpt_format"] != "fsdp_dtensor":
                return "Megatron-FSDP requires the fsdp_dtensor checkpointing format (--ckpt-format %s)" % a["ckpt_format"]
        else:
            if a["ckpt_format"] == "fsdp_dtensor":
                return "--ckpt-format fsdp_dtensor is only tested with Megatron FSDP"
            for f in ("--data-parallel-sharding-strategy", "--fsdp-double-buffer"):
                if f in a["_seen"]:
                    return "%s without --use-megatron-fsdp (read by Megatron-FSDP only)" % f

    @rule("CPU offloading", "arguments.py: cpu_offloading_num_layers > 0 turns cpu_offloading on; "
          "transformer_config.py __post_init__: 0 <= cpu_offloading_num_layers < num_layers, no pipeline "
          "parallelism, no recomputation (recompute_granularity None)")
    def _(a, env, world, gpu):
        n = a["cpu_offloading_num_layers"]
        if n == 0:
            return None
        if not 0 < n < a["num_layers"]:
            return "CPU offloading can be done only for layers less than %d (%d)" % (a["num_layers"], n)
        if a["pipeline_model_parallel_size"] > 1:
            return "Currently there is no support for Pipeline parallelism with CPU offloading"
        if a["recompute_granularity"] is not None:
            return "CPU offloading does not work when activation recomputation is enabled"

    @rule("recomputation", "transformer_config.py __post_init__: recompute_method / recompute_num_layers")
    def _(a, env, world, gpu):
        g, m, n = a["recompute_granularity"], a["recompute_method"], a["recompute_num_layers"]
        if g is None:
            if m is not None or n is not None or "--recompute-modules" in a["_seen"]:
                return "recompute method/layers/modules without --recompute-granularity"
        elif g == "full":
            if m is None or n is None:
                return "full recomputation needs --recompute-method and --recompute-num-layers"
            if not 1 <= n <= a["num_layers"] // a["pipeline_model_parallel_size"]:
                return "recompute_num_layers out of range"
        else:
            if m is not None or n is not None:
                return "selective recomputation with a method or a layer count"

    @rule("recompute modules", "transformer_config.py __post_init__: mla_up_proj needs multi_latent_attention, "
          "moe_act moe_grouped_gemm")
    def _(a, env, world, gpu):
        mods = a["recompute_modules"] if a["recompute_granularity"] == "selective" else []
        if "mla_up_proj" in mods and not a["multi_latent_attention"]:
            return "mla_up_proj in recompute_modules is only supported with multi_latent_attention"
        if "moe_act" in mods and not a["moe_grouped_gemm"]:
            return "moe_act in recompute_modules is only supported with moe_grouped_gemm"

    @rule("rope scaling", "rotary_pos_embedding.py: the factor is read only with rope_scaling")
    def _(a, env, world, gpu):
        if "--rope-scaling-factor" in a["_seen"] and not a["use_rope_scaling"]:
            return "--rope-scaling-factor is dropped without --use-rope-scaling"
        if (a["use_rope_scaling"] or "--rotary-base" in a["_seen"]) and a["position_embedding_type"] != "rope":
            return "rotary flags without --position-embedding-type rope"

    @rule("GELU", "transformer_config.py: bias_activation_fusion with gelu needs add_bias_linear")
    def _(a, env, world, gpu):
        return None  # arguments.py turns the fusion off without biases; model() says which GELU runs

    @rule("experts", "arguments.py validate_args: expert_tensor_parallel_size defaults to tp, num_experts "
          "% expert_model_parallel_size, moe_ffn_hidden_size defaults to ffn_hidden_size; parallel_state.py: "
          "world % (etp x ep x pp); transformer_config.py: MoE bias only with ETP 1, EP needs experts, "
          "num_moe_experts % moe_router_num_groups, group_topk needs num_groups, softmax top-1 needs "
          "pre-softmax, capacity with aux_loss/seq_aux_loss/none, moe_shared_expert_intermediate_size > 0, "
          "shared expert overlap with alltoall/flex; shared_experts.py: no bias; gpt_layer_specs.py: "
          "one moe_layer_freq entry, 0 or 1, per layer; arguments.py: moe_latent_size > 0 and only with "
          "num_experts; moe_layer.py preprocess: no shared expert overlap beside latent projections in training")
    def _(a, env, world, gpu):
        if a["expert_tensor_parallel_size"] is None:
            a["expert_tensor_parallel_size"] = a["tensor_model_parallel_size"]
        E, ep, etp = a["num_experts"], a["expert_model_parallel_size"], a["expert_tensor_parallel_size"]
        if E == 0:
            a["num_experts"] = E = None
        if ep > 1 and (E is None or E % ep):
            return "num_experts %s is not a multiple of expert_model_parallel_size %d" % (E, ep)
        if world % (etp * ep * a["pipeline_model_parallel_size"]):
            return "world %d is not divisible by etp %d x ep %d x pp %d" % (world, etp, ep,
                                                                            a["pipeline_model_parallel_size"])
        if E is None:
            for f in ("--moe-ffn-hidden-size", "--moe-router-topk", "--moe-grouped-gemm",
                      "--moe-token-dispatcher-type", "--moe-aux-loss-coeff", "--moe-layer-freq",
                      "--moe-shared-expert-intermediate-size", "--moe-shared-expert-gate", "--moe-latent-size"):
                if f in a["_seen"]:
                    return "%s without --num-experts" % f
            return
        if a["moe_latent_size"] is not None and a["moe_latent_size"] <= 0:
            return "MoE latent projection dimension has to be greater than zero (%d)" % a["moe_latent_size"]
        if a["moe_latent_size"] and a["moe_shared_expert_overlap"]:
            return "shared expert overlap with MoE latent projections is not supported during training"
        f = a["moe_layer_freq"]
        if isinstance(f, int) and f < 1:
            return "--moe-layer-freq %d" % f
        if isinstance(f, list) and (len(f) != a["num_layers"] or set(f) - {0, 1}):
            return "the --moe-layer-freq pattern %s is not one 0 or 1 per layer (%d layers)" % (f, a["num_layers"])
        S = a["moe_shared_expert_intermediate_size"]
        if S is not None:
            if S <= 0:
                return "moe_shared_expert_intermediate_size %d" % S
            if a["add_bias_linear"]:
                return "bias is not supported in the shared experts (SharedExpertMLP asserts add_bias_linear off)"
            if a["moe_shared_expert_overlap"] and a["moe_token_dispatcher_type"] not in ("alltoall", "flex"):
                return "moe_shared_expert_overlap only works with alltoall or flex token dispatcher"
        elif a["moe_shared_expert_gate"] or a["moe_shared_expert_overlap"]:
            return "a shared expert flag without --moe-shared-expert-intermediate-size (it is ignored)"
        if a["moe_router_group_topk"] and not a["moe_router_num_groups"]:
            return "group limited routing without moe_router_num_groups"
        if (a["moe_router_topk"] == 1 and a["moe_router_score_function"] == "softmax" and
                not a["moe_router_pre_softmax"] and a["moe_router_load_balancing_type"] != ["sinkhorn"]):
            return "topk 1 with a softmax router needs --moe-router-pre-softmax"
        if a["moe_ffn_hidden_size"] is None:
            a["moe_ffn_hidden_size"] = a["ffn_hidden_size"]
        if a["add_bias_linear"] and etp != 1:
            return "bias in MoE is only supported with ETP 1"
        if a["moe_router_topk"] > E:
            return "moe_router_topk %d above num_experts %d" % (a["moe_router_topk"], E)
        if a["moe_router_num_groups"] and E % a["moe_router_num_groups"]:
            return "num_experts not a multiple of moe_router_num_groups"
        lb = a["moe_router_load_balancing_type"]
        if a["moe_expert_capacity_factor"] is not None and set(lb) - {"aux_loss", "seq_aux_loss", "none"}:
            return "capacity factor with load balancing %s" % lb

    @rule("low precision", "arguments.py validate_args: --fp8-param-gather needs the distributed optimizer or "
          "Megatron-FSDP, --fp4-format not with --fp8-format, --fp4-param-gather needs --fp4-format; "
          "transformer_config.py __post_init__: first/last layers in BF16 not with delayed scaling, each count "
          "from 0 to num_layers // pp; a custom recipe needs a quantizer factory (no flag here)")
    def _(a, env, world, gpu):
        if a["fp8_param_gather"] and not (a["use_distributed_optimizer"] or a["use_megatron_fsdp"]):
            return "--fp8-param-gather only supported with distributed optimizer"
        if a["fp4"] and a["fp8"]:
            return "--fp4-format and --fp8-format cannot be used simultaneously"
        if a["fp4_param_gather"] and not a["fp4"]:
            return "--fp4-param-gather must be used together with --fp4-format"
        if a["fp8"] and a["first_last_layers_bf16"]:
            if a["fp8_recipe"] == "delayed":
                return "Delayed scaling does not support first / last layer in BF16"
            most = a["num_layers"] // a["pipeline_model_parallel_size"]
            for k in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"):
                if not 0 <= a[k] <= most:
                    return "%s (%d) must be between 0 and %d" % (k, a[k], most)
        if (a["fp8"] and a["fp8_recipe"] == "custom") or (a["fp4"] and a["fp4_recipe"] == "custom"):
            return "a custom recipe needs --fp8/fp4-quantizer-factory"

    @rule("low-precision GEMM shapes", "transformer_engine/pytorch/utils.py assert_dim_for_fp8_exec (TE main at "
          "d0067d0da), from Linear, LayerNormLinear, LayerNormMLP under any quantized recipe: each rank's "
          "weight [out % 8, in % 16], its input rows % 8")
    def _(a, env, world, gpu):
        if not (a["fp8"] or a["fp4"]):
            return None
        tp, cp = a["tensor_model_parallel_size"], a["context_parallel_size"]
        H, h = a["num_attention_heads"], a["hidden_size"]
        kv = a["kv_channels"] or h // H
        g = a["num_query_groups"] if a["group_query_attention"] and a["num_query_groups"] else H
        ff = a["ffn_hidden_size"] or effective_default("ffn_hidden_size", a)
        dense = not a["num_experts"] or 0 in moe_pattern(a)
        glu = 2 if a["swiglu"] else 1
        sh = a["moe_shared_expert_intermediate_size"] if a["num_experts"] else None
        ws = [("linear_qkv", (H + 2 * g) * kv // tp, h), ("linear_proj", h, H * kv // tp)]
        ws += [("linear_fc1", glu * ff // tp, h), ("linear_fc2", h, ff // tp)] if dense else []
        ws += [("shared linear_fc1", glu * sh // tp, h), ("shared linear_fc2", h, sh // tp)] if sh else []
        if "M" in hybrid_letters(a):  # MambaMixer's in_proj [z x B C dt] and out_proj
            P, G_, N = a["mamba_head_dim"], a["mamba_num_groups"], a["mamba_state_dim"]
            nh = a["mamba_num_heads"] or 2 * h // P
            ws += [("mamba in_proj", (2 * nh * P + 2 * G_ * N + nh) // tp, h), ("mamba out_proj", h, nh * P // tp)]
        if a["hybrid_layer_pattern"] is not None:  # a hybrid's MLP layers exist only as '-'
            ws = [w for w in ws if not w[0].startswith("linear_fc") or "-" in hybrid_letters(a)]
        for name, o, i in ws:
            if o % 8 or i % 16:
                return "%s weight [%d, %d] per rank" % (name, o, i)
        rows = a["micro_batch_size"] * a["seq_length"] // cp // (tp if a["sequence_parallel"] and tp > 1 else 1)
        if rows % 8:
            return "%d input rows per rank" % rows

    @rule("multi-token prediction", "arguments.py validate_args: mtp_num_layers with position_embedding_type "
          "learned_absolute, rope, mrope or none; a hybrid model's MTP comes from its pattern after '/'")
    def _(a, env, world, gpu):
        if a["mtp_num_layers"]:
            if a["position_embedding_type"] not in ("learned_absolute", "rope", "mrope", "none"):
                return "MTP with %s positions" % a["position_embedding_type"]
            if a["hybrid_layer_pattern"] is not None and "/" not in a["hybrid_layer_pattern"]:
                return "a hybrid model with --mtp-num-layers but no MTP pattern"

    @rule("positions cover the sequence", "arguments.py: max_position_embeddings >= seq_length")
    def _(a, env, world, gpu):
        if a["seq_length"] > a["max_position_embeddings"]:
            return "seq_length above max_position_embeddings"
    @rule("flex dispatcher backend", "transformer_config.py __post_init__: ncclep only with the flex dispatcher; "
          "token_dispatcher.py MoEFlexTokenDispatcher: deepep and ncclep need expert tp x ep > 1")
    def _(a, env, world, gpu):
        backend = a["moe_flex_dispatcher_backend"]
        if backend == "ncclep" and a["moe_token_dispatcher_type"] != "flex":
            return "moe_flex_dispatcher_backend ncclep without the flex dispatcher"
        if a["moe_token_dispatcher_type"] == "flex" and backend in ("deepep", "ncclep") and \
                a["num_experts"] and a["expert_model_parallel_size"] * (a["expert_tensor_parallel_size"] or a["tensor_model_parallel_size"]) <= 1:
            return "the %s backend with expert tp x ep of 1" % backend

    @rule("expert all-to-all overlap", "transformer_config.py __post_init__: overlap_moe_expert_parallel_comm "
          "needs virtual_pipeline_model_parallel_size with pp > 1, expert_model_parallel_size > 1, the alltoall "
          "or flex dispatcher, no full recomputation (granularity, method, num_layers) nor moe in "
          "recompute_modules, bf16 or fp16, no moe_shared_expert_overlap; delay_wgrad_compute needs it; "
          "moe/README.md: CUDA_DEVICE_MAX_CONNECTIONS > 1")
    def _(a, env, world, gpu):
        if a["delay_wgrad_compute"] and not a["overlap_moe_expert_parallel_comm"]:
            return "delay_wgrad_compute without overlap_moe_expert_parallel_comm"
        if not a["overlap_moe_expert_parallel_comm"]:
            return None
        if a["pipeline_model_parallel_size"] > 1 and a["_vpp"] is None:
            return "the overlap with pp > 1 needs virtual pipeline stages"
        if a["expert_model_parallel_size"] <= 1:
            return "the overlap needs expert_model_parallel_size > 1"
        if a["moe_token_dispatcher_type"] not in ("alltoall", "flex"):
            return "the overlap needs the alltoall or flex dispatcher (%s)" % a["moe_token_dispatcher_type"]
        if a["recompute_granularity"] == "full" or a["recompute_method"] is not None or \
                a["recompute_num_layers"] is not None:
            return "the overlap with full recomputation"
        if "moe" in (a["recompute_modules"] or []):
            return "the overlap with moe in recompute_modules"
        if not a["bf16"]:
            return "the overlap needs a bf16 (or fp16) model"
        if a["moe_shared_expert_overlap"]:
            return "the overlap with moe_shared_expert_overlap"
        if env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":
            return "the overlap's streams serialised by CUDA_DEVICE_MAX_CONNECTIONS=1"
    return R


RULES = _rules()


def effective_default(dest, a):
    """The value a dest takes when its flag is absent, where Megatron derives
    it from others (validate_args, TransformerConfig.__post_init__)."""
    h, H = a["hidden_size"], a["num_attention_heads"]
    derived = {"ffn_hidden_size": (int((4 * h * 2 / 3) / 64) * 64 if a["swiglu"] else 4 * h) if h else None,
               "kv_channels": h // H if h and H else None,
               "num_query_groups": H,
               "expert_tensor_parallel_size": a["tensor_model_parallel_size"],  # validate_args
               "moe_ffn_hidden_size": a["ffn_hidden_size"],  # TransformerConfig.__post_init__
               # validate_args: a hybrid's MTP depths are its pattern's parts after '/'
               "mtp_num_layers": (a["hybrid_layer_pattern"] or "").count("/") or None}
    if dest in derived:
        return derived[dest]
    return next(d for k, (dst, kind, d, c) in OPTIONS.items() if dst == dest)


def unused(dest, a):
    """A dest the model built from a does not read: an MoE model without dense
    layers builds no MLP of ffn_hidden_size (its experts have
    moe_ffn_hidden_size); without expert parallelism either dispatcher runs."""
    if dest == "ffn_hidden_size" and a["hybrid_layer_pattern"] is not None:
        return "-" not in hybrid_letters(a)  # only a hybrid's MLP layers are of ffn_hidden_size
    if dest == "ffn_hidden_size":
        return bool(a["num_experts"]) and a["moe_ffn_hidden_size"] is not None and 0 not in moe_pattern(a)
    if dest == "moe_token_dispatcher_type":
        return a["expert_model_parallel_size"] == 1
    if dest == "moe_flex_dispatcher_backend":
        return a["moe_token_dispatcher_type"] != "flex"
    return False


def precision(a):
    """The format Transformer Engine runs the layers' linear layers in, in
    ptdc's words where it is one of ptdc's precisions (hybrid tensorwise: FP8
    with E5M2 gradients and per-tensor current scales; e4m3 mxfp8: MXFP8;
    e2m1 nvfp4: NVFP4), else the flags' own words; and the layers kept in BF16
    at each end (first_last_layers_bf16, with fp8 or fp4 only)."""
    if a["fp4"]:
        p = "nvfp4" if (a["fp4"], a["fp4_recipe"]) == ("e2m1", "nvfp4") else "fp4 %s %s" % (a["fp4"], a["fp4_recipe"])
    elif a["fp8"]:
        p = {("hybrid", "tensorwise"): "fp8", ("e4m3", "mxfp8"): "mxfp8"}.get(
            (a["fp8"], a["fp8_recipe"]), "fp8 %s %s" % (a["fp8"], a["fp8_recipe"]))
    else:
        return "bf16"
    if a["first_last_layers_bf16"]:
        p += ", the first %d and last %d layers in bf16" % (a["num_layers_at_start_in_bf16"],
                                                            a["num_layers_at_end_in_bf16"])
    return p


def validate(text):
    """Parse and apply every rule; raises Reject with the first failure."""
    args, env, world, gpu, vocab, seen = parse(text)
    args["_seen"] = seen
    for name, src, check in RULES:
        err = check(args, env, world, gpu)
        if err:
            raise Reject("%s (%s): %s" % (name, src, err))
    return args, env, world, gpu, vocab


def freqs(a):
    """RotaryEmbedding.inv_freq (rotary_percent 1: dim = kv_channels); with
    --use-rope-scaling, _apply_scaling(freqs, factor) keeps its defaults for
    the rest (low 1, high 4, original 8192)."""
    f = rope.inv_freqs(a["rotary_base"], a["kv_channels"])
    if a["use_rope_scaling"]:
        f = rope.llama3(f, a["rope_scaling_factor"], 1, 4, 8192)
    return f


def mlp_kind(a, gelu_fused):
    """The MLP's activation (argument_utils.py): ptdc's names for the ones it has."""
    if a["squared_relu"]:
        return "relu2"
    if a["quick_geglu"]:  # GPT-OSS's clamped SwiGLU (ptdc's swiglu_oai) is offset 1, clamp 7
        c = a["activation_func_clamp_value"]
        return "swiglu_oai" if (a["glu_linear_offset"], c) == (1.0, 7.0) else \
            "quick_geglu offset %g clamp %s" % (a["glu_linear_offset"], c)
    if a["activation_func_clamp_value"] is not None or a["glu_linear_offset"]:
        return "swiglu clamp %s offset %g" % (a["activation_func_clamp_value"], a["glu_linear_offset"])
    return "swiglu" if a["swiglu"] else "gelu_tanh" if gelu_fused else "gelu_erf"


def model(a, vocab):
    """The GPT model pretrain_gpt.py builds from the flags, as a dict in the
    shape of ptdc_ir.truth (the vocabulary unpadded: the header's)."""
    h, L = a["hidden_size"], a["num_layers"]
    H = a["num_attention_heads"]
    G = (a["group_query_attention"] and a["num_query_groups"]) or H  # __post_init__: None -> heads
    d = a["kv_channels"] if a["kv_channels"] is not None else h // H
    a["kv_channels"] = d
    F = a["ffn_hidden_size"]
    if F is None:  # validate_args: a SwiGLU keeps the parameters of 4h, rounded to 64
        F = int((4 * h * 2 / 3) / 64) * 64 if a["swiglu"] else 4 * h
    bias_linear = a["add_bias_linear"]
    bias_qkv = a["add_qkv_bias"] or bias_linear
    gelu_fused = bias_linear and a["bias_gelu_fusion"]
    m = {"layers": L, "d_model": h, "heads": H, "kv_heads": G, "head_dim": d, "d_ff": F, "vocab": vocab,
         "seq": a["seq_length"], "norm": a["normalization"].lower(), "eps": a["layernorm_epsilon"],
         "qk_norm": a["qk_layernorm"],
         "causal": True, "tied": not a["untie_embeddings_and_output_weights"], "bf16": a["bf16"],
         "init_std": a["init_method_std"], "bias_qkv": bias_qkv, "bias_rest": bias_linear,
         "mlp": mlp_kind(a, gelu_fused),
         "dropout": max(a["hidden_dropout"], a["attention_dropout"])}
    pos = a["position_embedding_type"]
    m["positions"] = {"rope": "rope", "learned_absolute": "learned", "none": "none"}.get(pos, pos)
    if pos == "rope":
        m["freqs"] = freqs(a)
    w = a["window_size"]
    m["window"] = None if w is None else (w[0] + 1 if w[1] == 0 else ("non-causal window", w))
    f = a["window_attn_skip_freq"]
    if w is not None and f is not None:  # utils.py is_layer_window_attention, layer numbers from 1
        on = [(l + 1) % f != 0 if isinstance(f, int) else bool(f[l]) for l in range(a["num_layers"])]
        m["window"] = tuple(m["window"] if x else None for x in on)
        m["window"] = m["window"][0] if len(set(m["window"])) == 1 else m["window"]
    norm = 2 * h if m["norm"] == "layernorm" else h
    glu = 2 if a["swiglu"] or a["quick_geglu"] else 1
    mlp = h * F * glu + (bias_linear and F * glu) + F * h + (bias_linear and h)
    E = a["num_experts"]
    m["experts"], m["router"], m["d_expert"], m["shared"], m["moe_layers"] = None, None, None, None, None
    moe_mlp = 0
    if E:  # MoELayer: TopKRouter weight [E, h] (no bias), E grouped experts of moe_ffn_hidden_size
        Fm = a["moe_ffn_hidden_size"] if a["moe_ffn_hidden_size"] is not None else F
        m["experts"], m["d_expert"] = E, Fm
        m["expert_bias"] = bias_linear
        # moe_layer.py: with moe_latent_size the experts (experts.py) run on that width, between
        # fc1_latent_proj [h -> lat] and fc2_latent_proj [lat -> h] (TELinear, a bias each under
        # add_bias_linear); the router and the shared expert stay on h
        lat = a["moe_latent_size"]
        m["moe_latent"] = lat
        x = lat or h
        # TopKRouter: weight [E, h], and a bias [E] under add_bias_linear (router.py)
        moe_mlp = h * E + (bias_linear and E) + E * (x * Fm * glu + (bias_linear and Fm * glu) + Fm * x +
                                                     (bias_linear and x))
        if lat:
            moe_mlp += 2 * h * lat + (bias_linear and lat + h)
        S = a["moe_shared_expert_intermediate_size"]
        if S is not None:  # SharedExpertMLP: an MLP of width S without biases; gate_weight [1, h]
            m["shared"] = {"d_ff": S, "gate": a["moe_shared_expert_gate"]}
            moe_mlp += h * S * glu + S * h + (a["moe_shared_expert_gate"] and h)
        m["moe_layers"] = moe_pattern(a)
        sig = a["moe_router_score_function"] == "sigmoid"
        lb = a["moe_router_load_balancing_type"]
        k = a["moe_router_topk"]
        m["router"] = {"topk": k, "score": a["moe_router_score_function"],
                       # softmax: the softmax of the k chosen (renormalised) unless pre-softmax;
                       # sigmoid: k > 1 choices always normalised (moe_utils.py)
                       "norm": k > 1 if sig else not a["moe_router_pre_softmax"],
                       "scale": a["moe_router_topk_scaling_factor"] or 1.0,
                       "groups": a["moe_router_num_groups"] or 0, "group_topk": a["moe_router_group_topk"] or 0,
                       "capacity": a["moe_expert_capacity_factor"] or 0.0,
                       "aux": a["moe_aux_loss_coeff"] if lb == ["seq_aux_loss"] else
                       (0.0 if lb == ["none"] or not a["moe_aux_loss_coeff"] else ("%s loss" % lb)),
                       "zloss": a["moe_z_loss_coeff"] or 0.0,
                       # group_limited_topk: a group scores the sum of its topk // group_topk best
                       # (with one group, kept whatever its score, the score chooses nothing)
                       "group_score": "top%d" % (k // a["moe_router_group_topk"])
                       if (a["moe_router_num_groups"] or 0) > 1 and a["moe_router_group_topk"] else None}
    m["pattern"], m["mamba"] = None, None
    if a["hybrid_layer_pattern"] is not None:
        return hybrid_model(a, m, norm, mlp, moe_mlp, vocab)
    pattern = m["moe_layers"] or [0] * L
    if 0 not in pattern:  # no dense layer: ffn_hidden_size builds nothing
        m["d_ff"] = None
    # qk_layernorm: q_layernorm and k_layernorm over kv_channels, the --normalization kind
    qk = a["qk_layernorm"] and 2 * (2 * d if m["norm"] == "layernorm" else d)
    attn = 2 * norm + qk + h * (H + 2 * G) * d + (bias_qkv and (H + 2 * G) * d) + H * d * h + (bias_linear and h)
    attn += H if a["softmax_type"] == "learnable" else 0
    m["mla"] = None
    if a["multi_latent_attention"]:
        # MLASelfAttention (multi_latent_attention.py): linear_q_down_proj [h -> q_lora],
        # q_layernorm, linear_q_up_proj [q_lora -> H (qk + pos)], linear_kv_down_proj
        # [h -> kv_lora + pos], kv_layernorm, linear_kv_up_proj [kv_lora -> H (qk + v)],
        # linear_proj [H v -> h]; the latent norms exist under qk_layernorm (gpt_layer_specs);
        # rotary over qk_pos_emb_head_dim; no biases (add_bias_linear off).
        ql, kl = a["q_lora_rank"], a["kv_lora_rank"]
        qk_, pe, v = a["qk_head_dim"], a["qk_pos_emb_head_dim"], a["v_head_dim"]
        m["mla"] = {"q_lora": ql, "kv_lora": kl, "qk_nope": qk_, "qk_rope": pe, "v_head": v}
        m["head_dim"], m["kv_heads"] = qk_ + pe, H
        nk = lambda n: (2 * n if m["norm"] == "layernorm" else n) if a["qk_layernorm"] else 0
        q = h * H * (qk_ + pe) if ql is None else h * ql + nk(ql) + ql * H * (qk_ + pe)
        attn = 2 * norm + q + h * (kl + pe) + nk(kl) + kl * H * (qk_ + v) + H * v * h
        if pos == "rope":
            m["freqs"] = rope.inv_freqs(a["rotary_base"], pe)
    m["params"] = (vocab * h + (pos == "learned_absolute" and a["max_position_embeddings"] * h) +
                   sum(attn + (moe_mlp if moe else mlp) for moe in pattern) + norm +
                   (0 if m["tied"] else vocab * h))
    # MultiTokenPredictionBlock (multi_token_prediction.py; pretrain_gpt.py builds its layer
    # from the decoder's last layer spec): per depth enorm, hnorm, eh_proj [2h -> h] (no
    # bias), that layer, final_layernorm; the embedding and the output layer are the
    # model's (shared). Each depth's loss weighs mtp_loss_scaling_factor / mtp_num_layers.
    # mtp_use_repeated_layer: one layer, run at every depth.
    n = a["mtp_num_layers"] or 0
    m["mtp"] = {"layers": n, "scale": a["mtp_loss_scaling_factor"],
                "repeated": bool(a["mtp_use_repeated_layer"])} if n else None
    built = 1 if n and a["mtp_use_repeated_layer"] else n
    m["params"] += built * (3 * norm + 2 * h * h + attn + (moe_mlp if pattern[-1] else mlp))
    return m


def hybrid_model(a, m, norm, mlp, moe_mlp, vocab):
    """The HybridModel pretrain_hybrid.py builds (hybrid_layer_specs.py
    hybrid_stack_spec), m's GPT reading completed: layer i of the pattern's
    kind, each one mixer with its input norm fused into the first projection
    (TELayerNormColumnParallelLinear; the MoE layer's pre_mlp_layernorm a
    TENorm): M a MambaLayer (MambaMixer: in_proj [z x B C dt], a 4-tap conv1d
    with bias over x B C, dt_bias, A_log and D per head, the gated norm over
    d_inner, out_proj; no biases), * a TransformerLayer of self-attention only,
    - an MLPLayer (fc1, fc2 of ffn_hidden_size), E a MoETransformerLayer; the
    embedding (no position table unless asked), HybridStack's final norm, the
    output layer."""
    h, pat = a["hidden_size"], hybrid_letters(a)
    parts = a["hybrid_layer_pattern"].split("/")
    mtp_pat = parts[1] if len(parts) > 1 else ""
    H, d, G = a["num_attention_heads"], a["kv_channels"], m["kv_heads"]
    glu = 2 if a["swiglu"] or a["quick_geglu"] else 1
    bias_linear, bias_qkv = a["add_bias_linear"], a["add_qkv_bias"] or a["add_bias_linear"]
    attn = norm + h * (H + 2 * G) * d + (bias_qkv and (H + 2 * G) * d) + H * d * h + (bias_linear and h)
    per = {"*": attn, "-": norm + mlp, "E": norm + moe_mlp}
    if "M" in pat + mtp_pat:
        P, N, ng = a["mamba_head_dim"], a["mamba_state_dim"], a["mamba_num_groups"]
        nh = a["mamba_num_heads"] if a["mamba_num_heads"] is not None else 2 * h // P
        di, K = nh * P, 4  # MambaMixer: d_conv 4, D_has_hdim False, conv_bias True, bias False
        per["M"] = (norm + h * (2 * di + 2 * ng * N + nh) + (di + 2 * ng * N) * (K + 1) + 3 * nh + di + di * h)
        m["mamba"] = {"heads": nh, "head_dim": P, "groups": ng, "state": N, "conv": K, "gnorm_groups": ng,
                      "gnorm_eps": 1e-5}  # ExtendedRMSNorm(eps=1e-5, group_size=d_inner / ngroups)
    m["pattern"] = pat
    m["layers"] = len(pat)
    m["moe_layers"] = [int(c == "E") for c in pat] if "E" in pat else None
    if "E" not in pat:
        m["experts"], m["router"], m["d_expert"], m["shared"], m["moe_latent"] = None, None, None, None, None
        m.pop("expert_bias", None)
    if "-" not in pat:
        m["d_ff"] = None
    if "-" not in pat and "E" not in pat:
        m["mlp"] = None
    if "*" not in pat:
        for k in ("heads", "kv_heads", "head_dim"):
            m[k] = None
    m["params"] = (vocab * h + (a["position_embedding_type"] == "learned_absolute" and
                                a["max_position_embeddings"] * h) +
                   sum(per[c] for c in pat) + norm + (0 if m["tied"] else vocab * h))
    # The MTP block (multi_token_prediction.py, the hybrid path): each layer enorm, hnorm,
    # eh_proj [2h -> h] (no bias), a HybridStack of the MTP pattern's layers built from the
    # same specs (no final norm of its own), final_layernorm; the embedding and the output
    # layer are the model's. mtp_use_repeated_layer builds one layer for every depth.
    n = a["mtp_num_layers"] or 0
    m["mtp"] = {"layers": n, "scale": a["mtp_loss_scaling_factor"], "repeated": bool(a["mtp_use_repeated_layer"]),
                "pattern": mtp_pat} if n else None
    built = 1 if n and a["mtp_use_repeated_layer"] else n
    m["params"] += built * (3 * norm + 2 * h * h + sum(per[c] for c in mtp_pat))
    return m
