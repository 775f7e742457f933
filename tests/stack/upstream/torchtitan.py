"""torchtitan's job file as data: the keys --emit torchtitan may write with
their types and choices, the rules torchtitan applies to them at start-up,
and the llama3 model a flavor's TransformerModelArgs builds.

UPSTREAM names the source each entry was read from. When torchtitan changes,
update the entries and UPSTREAM together."""

import ast
import math

import rope

UPSTREAM = ("torchtitan v0.2.2 (73a0e6979dd1): torchtitan/config/job_config.py, distributed/parallel_dims.py, "
            "protocols/model_converter.py, components/quantization/{__init__,float8,mx,utils}.py, "
            "distributed/utils.py (maybe_enable_amp), distributed/pipeline_parallel.py, "
            "models/llama3/infra/parallelize.py, models/llama3/model/{args,model}.py")

# section.key: (type, default, choices)
KEYS = {
    "model.name": (str, "llama3", None),
    "model.flavor": (str, "debugmodel", None),
    "training.local_batch_size": (int, 8, None),
    "training.global_batch_size": (int, -1, None),
    "training.seq_len": (int, 2048, None),
    "training.dtype": (str, "float32", ["bfloat16", "float32"]),
    "training.mixed_precision_param": (str, "bfloat16", ["bfloat16", "float32"]),
    "training.mixed_precision_reduce": (str, "float32", ["float32"]),
    "parallelism.data_parallel_replicate_degree": (int, 1, None),
    "parallelism.data_parallel_shard_degree": (int, -1, None),
    "parallelism.fsdp_reshard_after_forward": (str, "default", ["default", "always", "never"]),
    "parallelism.tensor_parallel_degree": (int, 1, None),
    "parallelism.disable_loss_parallel": (bool, False, None),
    "parallelism.enable_async_tensor_parallel": (bool, False, None),
    "parallelism.pipeline_parallel_degree": (int, 1, None),
    "parallelism.pipeline_parallel_first_stage_less_layers": (int, 1, None),
    "parallelism.pipeline_parallel_last_stage_less_layers": (int, 1, None),
    "parallelism.pipeline_parallel_layers_per_stage": (int, None, None),
    "parallelism.pipeline_parallel_schedule": (str, "1F1B", ["1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS",
                                                             "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"]),
    "parallelism.pipeline_parallel_microbatch_size": (int, 1, None),
    "parallelism.context_parallel_degree": (int, 1, None),
    "parallelism.context_parallel_rotate_method": (str, "allgather", ["allgather", "alltoall"]),
    "parallelism.expert_parallel_degree": (int, 1, None),
    "activation_checkpoint.mode": (str, "selective", ["selective", "full", "memory_budget", "none"]),
    "compile.enable": (bool, False, None),
    # model converters (protocols/model_converter.py: a KeyError for an unregistered name) and their
    # settings (Quantize; components/quantization/float8.py, mx.py)
    "model.converters": (list, [], ["quantize.linear.float8", "quantize.grouped_mm.float8",
                                    "quantize.linear.mx", "quantize.grouped_mm.mx"]),
    "quantize.linear.float8.enable_fsdp_float8_all_gather": (bool, False, None),
    "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp": (bool, False, None),
    "quantize.linear.float8.recipe_name": (str, None, ["tensorwise", "rowwise", "rowwise_with_gw_hp"]),
    "quantize.linear.float8.filter_fqns": (list, [], None),
    # recipe_name is a str for torchao's MXLinearConfig.from_recipe_name: its MXLinearRecipeName
    # values (torchao, not mirrored here)
    "quantize.linear.mx.recipe_name": (str, "mxfp8_cublas", ["mxfp8_emulated", "mxfp8_cublas",
                                                             "mxfp8_cublas_rceil", "mxfp4_emulated",
                                                             "mxfp4_cutlass"]),
    "quantize.linear.mx.filter_fqns": (list, ["output"], None),
}

SINGLE_STAGE = {"1F1B", "GPipe"}


class Reject(Exception):
    pass


def toml(text):
    """The subset of TOML --emit torchtitan writes: [section], key = value."""
    out, sec = {}, None
    for l in text.splitlines():
        l = l.split("#", 1)[0].strip() if not l.strip().startswith('"') else l.strip()
        if not l:
            continue
        if l.startswith("["):
            sec = l.strip("[]")
            continue
        k, v = [x.strip() for x in l.split("=", 1)]
        if v in ("true", "false"):
            v = v == "true"
        elif v.startswith('"'):
            v = v.strip('"')
        elif v.startswith("["):  # an array of strings
            v = ast.literal_eval(v)
        else:
            v = float(v) if "." in v else int(v)
        out["%s.%s" % (sec, k)] = v
    return out


def parse(text):
    cfg = toml(text)
    for k, v in cfg.items():
        if k not in KEYS:
            raise Reject("%s: not a key of torchtitan's job file (%s)" % (k, UPSTREAM.split(":")[0]))
        typ, _, choices = KEYS[k]
        if type(v) is not typ:
            raise Reject("%s = %r: not a %s" % (k, v, typ.__name__))
        if choices and (set(v) - set(choices) if typ is list else v not in choices):
            raise Reject("%s = %r: not one of %s" % (k, v, choices))
    full = {k: d for k, (t, d, c) in KEYS.items()}
    full.update(cfg)
    world = gpu = None
    flavor = None
    for l in text.splitlines():
        if l.startswith("# Predicted for"):
            world = int(l.split(" on ")[1].split(" x ")[0])
            gpu = l.split(" x ")[1].split(":")[0].strip()
    # The flavor: the commented TransformerModelArgs(...) expression.
    lines = text.splitlines()
    i = next((i for i, l in enumerate(lines) if "TransformerModelArgs(" in l), None)
    if i is not None:
        expr = ""
        for l in lines[i:]:
            expr += l.lstrip("#").strip() + " "
            if expr.count("(") == expr.count(")"):
                break
        name = expr[:expr.index("TransformerModelArgs(")].strip().rstrip(":").strip().strip('"')
        expr = expr[expr.index("TransformerModelArgs("):].rstrip(", ")
        flavor = _flavor(expr)
        flavor["_name"] = name
    return full, world, gpu, flavor


def _flavor(expr):
    try:
        call = ast.parse(expr, mode="eval").body
    except SyntaxError as e:
        raise Reject("the flavor is not Python: %s" % e)
    if not (isinstance(call, ast.Call) and call.func.id == "TransformerModelArgs"):
        raise Reject("the flavor is not a TransformerModelArgs(...) call")
    args = {}
    for kw in call.keywords:
        if isinstance(kw.value, ast.Call):
            if kw.value.func.id != "RoPEScalingArgs":
                raise Reject("%s=%s(...): not RoPEScalingArgs" % (kw.arg, kw.value.func.id))
            args[kw.arg] = {k.arg: ast.literal_eval(k.value) for k in kw.value.keywords}
        else:
            args[kw.arg] = ast.literal_eval(kw.value)
    known = {"dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "multiple_of", "ffn_dim_multiplier",
             "norm_eps", "rope_theta", "rope_scaling_args", "max_seq_len", "depth_init", "attn_type",
             "attn_mask_type", "eos_id"}
    if set(args) - known:
        raise Reject("TransformerModelArgs has no %s" % ", ".join(sorted(set(args) - known)))
    rs = {"scaling_factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}
    if set(args.get("rope_scaling_args", {})) - rs:
        raise Reject("RoPEScalingArgs has no %s" % ", ".join(sorted(set(args["rope_scaling_args"]) - rs)))
    # TransformerModelArgs' and RoPEScalingArgs' defaults for what is not given
    full = dict(ARGS_DEFAULTS)
    full.update(args)
    full["rope_scaling_args"] = dict(ROPE_DEFAULTS, **args.get("rope_scaling_args", {}))
    return full


ARGS_DEFAULTS = {"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": None, "vocab_size": 128256,
                 "multiple_of": 256, "ffn_dim_multiplier": None, "norm_eps": 1e-5, "rope_theta": 10000}
ROPE_DEFAULTS = {"scaling_factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 8192}


def validate(text):
    cfg, world, gpu, flavor = parse(text)
    P = lambda k: cfg["parallelism." + k]
    rep, shard, tp, pp, cp = (P("data_parallel_replicate_degree"), P("data_parallel_shard_degree"),
                              P("tensor_parallel_degree"), P("pipeline_parallel_degree"),
                              P("context_parallel_degree"))
    if shard == -1:
        shard = world // (rep * tp * pp * cp)
    def fail(name, src, msg):
        raise Reject("%s (%s): %s" % (name, src, msg))
    if rep * shard * tp * pp * cp != world:
        fail("degrees", "ParallelDims._validate", "dp_replicate %d x dp_shard %d x cp x tp %d x pp %d != world %d"
             % (rep, shard, tp, pp, world))
    if rep > 1 and (tp > 1 or pp > 1 or shard > 1 or cp > 1) and shard == 1:
        fail("DDP", "parallelize_llama: 'DDP has not supported > 1D parallelism'", "replicate degree with TP/PP")
    fsdp = shard > 1 or cp > 1
    if cfg["training.mixed_precision_param"] == "bfloat16" and not fsdp and (tp > 1 or pp > 1):
        fail("mixed precision", "maybe_enable_amp", "without FSDP, TP or PP train in fp32: bfloat16 is not applied")
    # components/quantization: one quantization type (QuantizationConverter._validate); float8.py
    # asserts recipe_name apart from enable_fsdp_float8_all_gather; mx.py: no TP under compile
    conv = cfg["model.converters"]
    if len({c.split(".")[-1] for c in conv if "quantize" in c}) > 1:
        fail("converters", "QuantizationConverter._validate", "different quantization types %s" % conv)
    f8 = lambda k: cfg["quantize.linear.float8." + k]
    if "quantize.linear.float8" in conv and f8("recipe_name") is not None and f8("enable_fsdp_float8_all_gather"):
        fail("float8", "Float8LinearConverter", "enable_fsdp_float8_all_gather together with recipe_name")
    if "quantize.linear.mx" in conv and cfg["compile.enable"] and tp > 1:
        fail("mx", "MXLinearConverter", "TP not yet supported with torch.compile for mxfp8")
    seq = cfg["training.seq_len"]
    if seq % (tp * 2 * cp):
        fail("seq_len", "ParallelDims.seq_len_divisor (tp x 2 x cp)", "%d %% %d" % (seq, tp * 2 * cp))
    dp = rep * shard
    lb, gb = cfg["training.local_batch_size"], cfg["training.global_batch_size"]
    if gb > 0 and gb % (lb * dp):
        fail("gradient accumulation", "train.py: global_batch_size / (local_batch_size x dp)",
             "%d %% (%d x %d)" % (gb, lb, dp))
    if pp > 1:
        mb = P("pipeline_parallel_microbatch_size")
        if lb % mb:
            fail("micro-batches", "pipeline_parallel.py", "local_batch_size %d %% microbatch %d" % (lb, mb))
        lps = P("pipeline_parallel_layers_per_stage")
        layers = flavor["n_layers"] if flavor else None
        if lps is not None and layers is not None:
            stages = math.ceil((layers + P("pipeline_parallel_first_stage_less_layers")
                                + P("pipeline_parallel_last_stage_less_layers")) / lps)
            if stages % pp:
                fail("stages", "pipeline_parallel.py", "%d stages over pp %d" % (stages, pp))
            single = P("pipeline_parallel_schedule") in SINGLE_STAGE
            if single and stages // pp != 1:
                fail("stages", "pipeline_parallel.py", "a single-stage schedule with %d stages per rank" % (stages // pp))
            if not single and stages // pp < 2:
                fail("stages", "pipeline_parallel.py", "a multi-stage schedule needs at least 2 stages per rank")
    return cfg, world, gpu, flavor


def precision(cfg, fl=None):
    """The format the llama3 layers' nn.Linear modules train in, in ptdc's
    words where it is one of ptdc's precisions (float8 tensorwise: FP8 with
    per-tensor current scales, E4M3 forward and E5M2 gradients, torchao's
    Float8LinearConfig default; mx mxfp8_*: MXFP8), whether the FP8 weights
    are all-gathered by FSDP (enable_fsdp_float8_all_gather, applied with a
    dp_shard mesh only), and whether the head ("output") is converted too
    (module_filter_fn: a filter_fqns entry contained in the module's name
    keeps it in BF16)."""
    conv = cfg["model.converters"]
    shard = cfg["parallelism.data_parallel_shard_degree"]
    if "quantize.linear.float8" in conv:
        sec = "quantize.linear.float8."
        r = cfg[sec + "recipe_name"]
        p = "fp8" if r in (None, "tensorwise") else "fp8 " + r
        gather = r is None and cfg[sec + "enable_fsdp_float8_all_gather"] and shard != 1
    elif "quantize.linear.mx" in conv:
        sec = "quantize.linear.mx."
        r = cfg[sec + "recipe_name"]
        p, gather = "mxfp8" if r.startswith("mxfp8") else "mx " + r, False
    else:
        return "bf16", False, False
    head = not any(f in "output" for f in cfg[sec + "filter_fqns"])
    if fl is not None:  # module_filter_fn: a weight with a dim not a multiple of 16 stays in BF16
        dim, H = fl["dim"], fl["n_heads"]
        hd, kvh = dim // H, fl.get("n_kv_heads") or H
        F = ffn_hidden(dim, fl["multiple_of"], fl["ffn_dim_multiplier"])
        left = [n for n, o, i in (("wq", H * hd, dim), ("wk", kvh * hd, dim), ("wo", dim, H * hd),
                                  ("w1", F, dim), ("w2", dim, F)) if o % 16 or i % 16]
        if left:
            p += ", %s in bf16" % " ".join(left)
    return p, gather, head


def ffn_hidden(dim, multiple_of, mult):
    """FeedForward(hidden_dim=4 * dim) in llama3/model/model.py."""
    h = int(2 * (4 * dim) / 3)
    if mult is not None:
        h = int(mult * h)
    return multiple_of * ((h + multiple_of - 1) // multiple_of)


def freqs(dim, theta, rs):
    """precompute_freqs_cis: the scaling is always applied (a factor of 1
    changes nothing)."""
    return rope.llama3(rope.inv_freqs(theta, dim), rs["scaling_factor"], rs["low_freq_factor"],
                       rs["high_freq_factor"], rs["original_max_position_embeddings"])


def model(cfg, fl):
    """The llama3 Transformer a flavor builds, in the shape of ptdc_ir.truth."""
    dim, L, H = fl["dim"], fl["n_layers"], fl["n_heads"]
    KV = fl.get("n_kv_heads") or H
    hd = dim // H
    F = ffn_hidden(dim, fl["multiple_of"], fl["ffn_dim_multiplier"])
    V = fl["vocab_size"]
    m = {"layers": L, "d_model": dim, "heads": H, "kv_heads": KV, "head_dim": hd, "d_ff": F, "vocab": V,
         "seq": cfg["training.seq_len"], "norm": "rmsnorm", "qk_norm": False, "eps": fl["norm_eps"], "causal": True,
         "tied": False, "bf16": cfg["training.mixed_precision_param"] == "bfloat16", "bias_qkv": False,
         "bias_rest": False, "mlp": "swiglu", "positions": "rope", "window": None, "dropout": 0.0, "mla": None,
         "freqs": freqs(hd, fl["rope_theta"], fl["rope_scaling_args"])}
    layer = dim * H * hd + 2 * dim * KV * hd + H * hd * dim + 3 * dim * F + 2 * dim
    m["params"] = V * dim + L * layer + dim + dim * V
    return m
