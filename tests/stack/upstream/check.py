#!/usr/bin/env python3
"""The frameworks' own rules, applied to what ptdc tells their users.

  check.py PTDC SRC corpus        every model in models/ and every Hugging Face
                                  config in tests/hf/configs, both emitters
                                  (--emit megatron, --emit torchtitan), and a few
                                  pinned layouts that exercise the layout flags
  check.py PTDC SRC case ARGS...  one ptdc command line (tests/stack/cases)

For each output ptdc prints, the options are parsed as the framework parses
them (megatron.py, torchtitan.py: the options, types, choices and start-up
rules as data, with the upstream version they describe), the model the
framework would build from them is computed, and it is compared with the
model ptdc describes, read from `ptdc --emit ir` (ptdc_ir.py): layers, sizes,
norm and epsilon, activation, biases, tied embeddings, positions, every
rotary frequency, the attention window, the parameter count; for Megatron-LM
also the layers, embedding and head each pipeline chunk builds against the
stages of ptdc's plan (plan_chunks). Where ptdc
refuses (exit status 3), the framework's model must indeed be unable to say
what ptdc's says (an independent judgement, below). An attribute on ptdc's
operators that these checks do not compare fails the corpus."""

import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron  # noqa: E402
import ptdc_ir  # noqa: E402
import torchtitan  # noqa: E402

FAILS = []


def fail(what, msg):
    FAILS.append("%s: %s" % (what, msg))
    print("FAIL %s: %s" % (what, msg))


def run(ptdc, args):
    p = subprocess.run([ptdc] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def model_args(args):
    """The model and its --set overrides out of a ptdc command line."""
    out, i = [], 0
    while i < len(args):
        if args[i] == "--set":
            out += args[i:i + 2]
            i += 2
            continue
        if not args[i].startswith("-") and not out:
            out.append(args[i])
        elif not args[i].startswith("-") and i > 0 and not args[i - 1].startswith("-"):
            pass
        i += 1
    return out


def truth_of(ptdc, margs):
    rc, ir, err = run(ptdc, margs + ["--emit", "ir"])
    rc2, summ, err2 = run(ptdc, margs + ["--emit", "summary"])
    if rc or rc2:
        raise RuntimeError("ptdc %s --emit ir/summary failed: %s%s" % (" ".join(margs), err, err2))
    return ptdc_ir.truth(ir, summ)


# ----------------------------------------------------- expressibility
def megatron_can(t):
    """None if Megatron-LM's GPT model (or, for a hybrid, its HybridModel) can
    be ptdc's model, else why not."""
    if not t["decoder"]:
        return t["why"]
    m = t.get("mamba")
    if m and m["conv"] != 4:
        return "MambaMixer's convolution has 4 taps (d_conv, no flag)"
    if m and m["gnorm_eps"] != 1e-5:
        return "MambaMixer's gated norm has eps 1e-5 (no flag)"
    if m and m["gnorm_groups"] != m["groups"]:
        return "MambaMixer's gated norm normalises each of ngroups apart"
    if t.get("pattern") is not None:
        if t["bias_qkv"] or t["bias_rest"]:
            return "MambaMixer has no projection biases"
        if t["heads"] is None:
            return "no attention layer, and --num-attention-heads is required"
        if t["mlp"] == "gelu_tanh":
            return "GELU without biases is the erf form"
    if not t["causal"]:
        return "not causal"
    if t.get("mtp") and t["positions"] not in ("rope", "none", "learned"):
        return "MTP with %s positions (validate_args: rope, mrope, learned_absolute or none)" % t["positions"]
    if t["positions"] == "rope":
        r = t["rope"]
        if not (r["rot_full"] and r["pos_seq"]):
            return "partial rotary"
        if r["theta"] != int(r["theta"]):
            return "--rotary-base is an int"
        s = r["scaling"]
        if s and (s["kind"] != "llama3" or (s["low"], s["high"], s["orig"]) != (1, 4, 8192)):
            return "_apply_scaling fixes low/high/original"
    if t["mlp"] == "gelu_tanh" and not (t["bias_rest"] and t["bias_qkv"]):
        return "the tanh GELU needs the fused bias_gelu (biases)"
    if t["bias_rest"] and not t["bias_qkv"]:
        return "biases on the output/MLP projections but not q/k/v"
    r = t.get("router")
    if r:
        if r["score"] == "sigmoid" and r["topk"] > 1 and not r["norm"]:
            return "Megatron-Core's sigmoid router normalises k > 1 weights"
        if r["score"] == "softmax" and r["topk"] == 1 and r["norm"]:
            return "Megatron-Core's softmax top-1 router must be pre-softmax (an unnormalised weight)"
        if r["group_score"] and r["topk"] // r["group_topk"] != int(r["group_score"][3:]):
            return "Megatron-Core scores a group by its topk // group_topk best, ptdc by its %s" % r["group_score"]
        if t["bias_rest"] != t.get("expert_bias", False):
            # --add-bias-linear gives the experts' fc1 and fc2 biases too (TEGroupedMLP)
            return "MoE layers with output/router biases and experts without (or the reverse)"
    return None


def torchtitan_can(t):
    if not t["decoder"]:
        return t["why"]
    bad = [(t.get("mtp") is not None, "multi-token prediction (a model-registry argument of its DeepSeek-V3, no "
                                      "job-file key)"),
           (t.get("pattern") is not None, "Mamba-2 layers"), (t.get("mla") is not None, "multi-head latent attention"),
           (t.get("experts") is not None, "mixture of experts"), (not t["causal"], "not causal"), (t["norm"] != "rmsnorm", "LayerNorm"), (t["mlp"] != "swiglu", "GELU"),
           (t["positions"] != "rope", "no RoPE"), (t["bias_qkv"] or t["bias_rest"], "biases"),
           (t["tied"], "tied"), (t["head_dim"] * t["heads"] != t["d_model"], "head_dim"),
           (t["window"] is not None, "sliding window")]
    for b, why in bad:
        if b:
            return why
    if t["positions"] == "rope" and not (t["rope"]["rot_full"] and t["rope"]["pos_seq"]):
        return "partial rotary"
    return None


def ffn_solvable(dim, dff):
    """Some multiple_of (a power of two) and multiplier (none, or with two decimals) gives dff."""
    for e in range(13):
        for k in [None] + list(range(50, 401)):
            if torchtitan.ffn_hidden(dim, 2 ** e, None if k is None else k / 100) == dff:
                return True
    return False


# ----------------------------------------------------------- compare
KEYS = ["layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "vocab", "seq", "norm", "qk_norm", "positions",
        "window", "causal", "tied", "bf16", "bias_qkv", "bias_rest", "mlp", "params", "dropout", "experts",
        "router", "d_expert", "shared", "moe_layers", "mla", "expert_bias", "pattern", "mamba", "moe_latent", "mtp"]


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def compare(what, t, m, init_std=True):
    for k in KEYS:
        if m.get(k) != t.get(k):
            fail(what, "%s: ptdc's model has %r, the framework's %r" % (k, t.get(k), m.get(k)))
    if not close(t["eps"], m["eps"]):
        fail(what, "norm epsilon: ptdc %g, framework %g" % (t["eps"], m["eps"]))
    if init_std and t["init_std"] is not None and not close(t["init_std"], m["init_std"]):
        fail(what, "init std: ptdc %g, framework %g" % (t["init_std"], m["init_std"]))
    if "freqs" in t:
        fr = m.get("freqs", [])
        diff = [i for i, (a, b) in enumerate(zip(t["freqs"], fr)) if not close(a, b)]
        if len(fr) != len(t["freqs"]) or diff:
            fail(what, "rotary frequencies: %d of %d differ (first at %s)" % (
                len(diff) + abs(len(fr) - len(t["freqs"])), len(t["freqs"]), diff[:1]))


def header_plan(out):
    """The plan ptdc's header states: '# Plan: dp 32 x tp 2 x pp 1 (v 2), sp on, zero 1,
    micro-batch 1 x 32, interleaved, recompute none.'"""
    import re
    line = next(l for l in out.splitlines() if l.startswith("# Plan: "))
    # context parallelism, when there is some; " (ring)": its p2p form, " (a2a)": its all-to-all one
    cp = re.search(r"# Plan: dp \d+ x cp (\d+)(?: \((ring|a2a)\))? x ", line)
    line = re.sub(r"^(# Plan: dp \d+) x cp \d+( \((ring|a2a)\))?", r"\1", line)
    m = re.match(r"# Plan: dp (\d+) x tp (\d+) x pp (\d+)(?: \(v (\d+)\))?, sp (on|off), zero (\d), "
                 r"micro-batch (\d+) x (\d+), (\w+), recompute ([\w,]+)"
                 r"(?:, ep (\d+)(?: \((?:folded over [\w ]+|groups of \d+ consecutive dp ranks of \d+), ([a-z-]+)\))?, "
                 r"etp (\d+)(?: \([^)]*\))?, expert-dp \d+)?\.", line)
    if not m:
        raise RuntimeError("cannot read " + line)
    g = m.groups()
    return {"dp": int(g[0]), "cp": int(cp.group(1)) if cp else 1, "tp": int(g[1]), "pp": int(g[2]),
            "v": int(g[3] or 1), "sp": g[4] == "on",
            "zero": int(g[5]), "mb": int(g[6]), "m": int(g[7]), "gb": int(g[0]) * int(g[6]) * int(g[7]),
            # ptdc's ffn and Megatron's mlp module (one of its module sets) both emit --recompute-modules mlp
            # in a dense model (in a model with experts ptdc's ffn is mlp + moe, and its mlp set stays mlp)
            "recompute": g[9] if g[10] and g[9] == "mlp" else {"mlp": "ffn"}.get(g[9], g[9]), "cp_comm": [{"ring": "p2p", "a2a": "a2a"}.get(cp.group(2) if cp else None, "all_gather")], **({"ep": int(g[10]), "etp": int(g[12]),
                                   "dispatcher": "allgather" if g[11] == "all-gather" else "exchange"}
                                  if g[10] else {})}


def plan_chunks(ptdc, args, out):
    """The model chunks of ptdc's plan, in model order: for each, (its layers,
    holds the embedding, holds the head), read from the plan.json of the same
    plan. The header states the layout but not the split, so the command line
    runs again without --emit, under the stack --emit implies, with the
    header's layout pinned where the command line left it to the search (a
    pinned layout under a framework stack is the framework's plan, with any
    --pp-layers), and `--plan-only -o DIR`. A stage's pieces other than
    layers are the embedding before the first layer and the head after the last."""
    import re
    import shutil
    import tempfile
    h = header_plan(out)
    line = next(l for l in out.splitlines() if l.startswith("# Plan: "))
    sched = re.search(r", (1f1b|interleaved), recompute ", line).group(1)
    fw = args[args.index("--emit") + 1]
    i = args.index("--emit")
    a = [x for x in args[:i] + args[i + 2:] if x != "--json"]
    if "--stack" not in a:
        a += ["--stack", "megatron" if fw == "megatron" else "fsdp"]
    pins = [("--tp", h["tp"]), ("--pp", h["pp"]), ("--dp", h["dp"]), ("--micro-batch", h["mb"]),
            ("--recompute", h["recompute"]), ("--sp", "on" if h["sp"] else "off"), ("--zero", h["zero"]),
            ("--schedule", sched)]
    pins += [("--virtual-stages", h["v"])] if h["v"] > 1 else []
    pins += [("--cp", h["cp"])] if h["cp"] > 1 else []
    pins += [("--ep", h["ep"]), ("--etp", h["etp"])] if "ep" in h else []
    for flag, val in pins:
        if flag not in a:
            a += [flag, str(val)]
    # An uneven split the search chose is stated only by the flags
    # (--decoder-first/last-pipeline-num-layers): pinned as --pp-layers, the
    # plan's chunks are then laid out by ptdc's rules and compared below with
    # the model Megatron builds from the same two numbers.
    ends = [(k, re.search(r"--decoder-%s-pipeline-num-layers (\d+)" % k, out)) for k in ("first", "last")]
    ends = ["%s=%s" % (k, m.group(1)) for k, m in ends if m]
    if ends and "--pp-layers" not in a:
        a += ["--pp-layers", ",".join(ends)]
    # A hybrid's split is its pattern's segments ('MEM*|EME'), each a chunk.
    pat = re.search(r"--hybrid-layer-pattern '([^']*)'", out)
    if pat and "|" in pat.group(1) and "--pp-layers" not in a:
        a += ["--pp-layers", ",".join(str(len(seg)) for seg in pat.group(1).split("|"))]
    # So too the split of --account-for-embedding/loss-in-pipeline-split
    # (frame_search.c's account_splits): the embedding and/or the loss count
    # as a layer, each chunk (layers + e + l) / (pp v), the ends e and l fewer.
    acc = [("--account-for-%s-in-pipeline-split" % k) in out for k in ("embedding", "loss")]
    if any(acc) and "--pp-layers" not in a:
        n, L = h["pp"] * h["v"], int(re.search(r"--num-layers (\d+)", out).group(1))
        per, rem = divmod(L + sum(acc), n)
        if rem:
            raise RuntimeError("--account-for flags with %d layers over %d chunks, which do not divide" % (L, n))
        a += ["--pp-layers", ",".join(str(per - (acc[0] and c == 0) - (acc[1] and c == n - 1)) for c in range(n))]
    d = tempfile.mkdtemp(prefix="ptdc-chunks-")
    try:
        rc, _, err = run(ptdc, a + ["--plan-only", "-o", d])
        if rc:
            raise RuntimeError("ptdc %s --plan-only -o DIR exited %d: %s" % (" ".join(a), rc, err.strip()))
        with open(os.path.join(d, "plan.json")) as f:
            plan = json.load(f)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    par = plan["parallel"]
    if (par["pp"], par["virtual_stages"], par["tp"], par["dp"]) != (h["pp"], h["v"], h["tp"], h["dp"]):
        raise RuntimeError("ptdc %s planned %s, not the header's plan" % (" ".join(a), par))
    chunks, seen_layer = [], False
    for st in plan["stages"]:
        emb = head = False
        for name in st["pieces"]:
            if name.startswith("layer "):
                seen_layer = True
            elif seen_layer:
                head = True
            else:
                emb = True
        chunks.append((st["layers"], emb, head))
    return chunks


def header_precision(out):
    """The precision ptdc's header states ("# Precision: fp8: ..."; none: bf16)."""
    line = next((l for l in out.splitlines() if l.startswith("# Precision: ")), None)
    return line.split()[2].rstrip(":") if line else "bf16"


def precision_plan(out, fw):
    """What the plan's precision means in the framework: the format of the
    layers' linear layers; whether the weights are all-gathered in it (Megatron-LM
    with the distributed optimizer, torchtitan's float8 under FSDP: docs/stacks.md);
    the head stays in BF16."""
    h, prec = header_plan(out), header_precision(out)
    if fw == "megatron":
        gather = h["zero"] in (1, 3) and h["dp"] * h["cp"] > 1
    else:
        gather = prec == "fp8" and h["dp"] > 1 and h["zero"] >= 2
    return {"precision": prec, "lowp_gather": gather and prec != "bf16", "lowp_head": False}


def megatron_plan(a, world):
    tp, pp = a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"]
    g, mods = a["recompute_granularity"], a["recompute_modules"] or ["core_attn"]
    # ptdc's ffn reruns every MLP, dense and MoE: Megatron's mlp module (the
    # dense MLP) plus, in a model with experts, its moe module (the MoE layer).
    ffn = ["mlp", "moe"] if a["num_experts"] else ["mlp"]
    rc = ("none" if g is None else "full" if g == "full" else "selective" if mods == ["core_attn"]
          else "ffn" if sorted(mods) == ffn else ",".join(mods))
    cp = a["context_parallel_size"]
    dp = megatron.data_parallel_size(a, world)
    return {"dp": dp, "cp": cp, "tp": tp, "pp": pp, "v": a["_vpp"] or 1,
            # the layers, embedding and head each chunk builds (megatron.pipeline_chunks)
            "chunks": a["_chunks"],
            # Megatron-FSDP's optim_grads_params shards weights too (ZeRO-3), optim_grads gradients (2)
            "sp": a["sequence_parallel"] and tp > 1,
            "zero": ({"optim_grads_params": 3, "optim_grads": 2}.get(a["data_parallel_sharding_strategy"], 1)
                     if a["use_megatron_fsdp"] else 1 if a["use_distributed_optimizer"] else 0),
            "mb": a["micro_batch_size"], "m": a["global_batch_size"] // (a["micro_batch_size"] * dp),
            "gb": a["global_batch_size"], "recompute": rc, "ep": a["expert_model_parallel_size"],
            "etp": a["expert_tensor_parallel_size"],
            # the plan's exchange is either all-to-all dispatcher's (alltoall over NCCL, flex over
            # HybridEP/DeepEP: the same tokens to the same experts)
            "dispatcher": {"alltoall": "exchange", "flex": "exchange"}.get(a["moe_token_dispatcher_type"],
                                                                           a["moe_token_dispatcher_type"]),
            # the linear layers' format; the weights all-gathered in it; the head never (no
            # --fp8-output-proj here)
            "precision": megatron.precision(a), "lowp_gather": a["fp8_param_gather"] or a["fp4_param_gather"],
            "lowp_head": False,
            # ptdc's context parallelism: the all-gather form or the ring (p2p)
            "cp_comm": ["all_gather"] if cp == 1 else a["cp_comm_type"]}


def torchtitan_plan(cfg, fl):
    P = lambda k: cfg["parallelism." + k]
    tp, pp, rep, shard, cp = (P("tensor_parallel_degree"), P("pipeline_parallel_degree"),
                              P("data_parallel_replicate_degree"), P("data_parallel_shard_degree"),
                              P("context_parallel_degree"))
    lps = P("pipeline_parallel_layers_per_stage")
    # FSDP shards over dp_shard x cp (parallelize_llama: the dp_shard_cp mesh)
    zero = ({"never": 2, "always": 3}.get(P("fsdp_reshard_after_forward"), -1) if shard * cp > 1 else 0)
    lb, gb = cfg["training.local_batch_size"], cfg["training.global_batch_size"]
    ga = gb // (lb * rep * shard)  # gradient accumulation steps (train.py)
    mb = P("pipeline_parallel_microbatch_size") if pp > 1 else lb
    # Micro-batches per step as one pipeline pass: the plan's schedule runs
    # them all in one; accumulation steps would each pay the pipeline's fill.
    m = (lb // mb if ga == 1 else "%d passes of %d" % (ga, lb // mb)) if pp > 1 else ga
    prec, gather, head = torchtitan.precision(cfg, fl)
    return {"dp": rep * shard, "cp": cp, "tp": tp, "pp": pp, "v": fl["n_layers"] // pp // lps if pp > 1 and lps else 1,
            "sp": tp > 1, "zero": zero, "mb": mb, "m": m, "gb": gb, "recompute": cfg["activation_checkpoint.mode"],
            "precision": prec, "lowp_gather": gather, "lowp_head": head}


def compare_plan(what, want, got):
    for k in want:
        if k == "zero" and want["dp"] * want["cp"] == 1:
            continue  # one replica: every ZeRO stage is the same plan
        if k == "sp" and want["tp"] == 1:
            continue
        if k == "dispatcher" and want["ep"] == 1:
            continue  # no expert parallelism: either dispatcher runs the same plan
        if k not in got:
            continue  # a key of one framework's plan only (cp_comm, chunks: Megatron's)
        if k == "chunks" and want[k] != got[k]:
            show = lambda cs: " | ".join("%s%d%s" % ("E " if e else "", len(ls), " L" if h else "")
                                         for ls, e, h in cs)
            same = [len(c[0]) for c in want[k]] == [len(c[0]) for c in got[k]]
            fail(what, "the plan's chunks hold %s layers, Megatron-LM builds %s%s" % (
                show(want[k]), show(got[k]), " (other layer ids)" if same else ""))
            continue
        if want[k] != got[k]:
            fail(what, "the plan's %s is %r, the framework runs %r" % (k, want[k], got[k]))


# ------------------------------------------------------------ one case
def check_case(ptdc, args, what=None):
    what = what or " ".join(args)
    fw = args[args.index("--emit") + 1]
    rc, out, err = run(ptdc, args)
    t = truth_of(ptdc, model_args(args))
    if t["unknown"]:
        fail(what, "ptdc's IR carries %s, which tests/stack/upstream does not compare with the frameworks "
                   "(teach ptdc_ir.py, megatron.py and torchtitan.py how each states it)" % ", ".join(sorted(set(t["unknown"]))))
    can = megatron_can(t) if fw == "megatron" else torchtitan_can(t)
    if rc == 3:
        if not err.startswith("ptdc: error: ") or len(err.split(":", 2)[2].strip()) < 20:
            fail(what, "exit status 3 without a sentence saying why: %r" % err.strip())
        model_refusal = "model cannot express" in err
        if model_refusal and can is None:
            if fw == "torchtitan" and "FFN width" in err and not ffn_solvable(t["d_model"], t["d_ff"]):
                return rc
            fail(what, "ptdc refuses (%s) a model the framework can build" % err.strip().splitlines()[0])
        return rc
    if rc != 0:
        return rc
    if can is not None:
        fail(what, "ptdc emitted a configuration for a model the framework cannot build (%s)" % can)
        return rc
    try:
        chunks = ptdc_chunks(ptdc, args, out, t) if fw == "megatron" else None
    except RuntimeError as e:
        fail(what, "cannot read the plan's stages: %s" % e)
        return rc
    for msg in check_text(fw, out, t, chunks):
        fail(what, msg)
    return rc


UNREPLANNED = []


def ptdc_chunks(ptdc, args, out, t):
    """plan_chunks, or without a pipeline the one chunk of every layer. Where
    ptdc refuses the header's layout pinned though its framework search chose
    it (an interleaved schedule over a model of several repeats: the pins'
    check_interleaved_pins, which the search does not apply), and the command
    line pins no split, the chunks are the split docs/stacks.md gives every
    framework plan (layers / (pp v) each, the embedding with the first, the
    head with the last); such cases are counted and printed."""
    h = header_plan(out)
    L = t["layers"]
    if h["pp"] == 1:
        return [(list(range(L)), True, True)]
    try:
        return plan_chunks(ptdc, args, out)
    except RuntimeError as e:
        if "--pp-layers" in args or "form one repeat" not in str(e):
            raise
    UNREPLANNED.append(" ".join(args))
    n = h["pp"] * h["v"]
    per = L // n
    return [(list(range(c * per, (c + 1) * per)), c == 0, c == n - 1) for c in range(n)]


def check_text(fw, out, t, chunks=None):
    """The failures of one emitted output against ptdc's model t and, for
    Megatron-LM, the chunks of ptdc's plan (ptdc_chunks)."""
    global FAILS
    saved, FAILS = FAILS, []
    try:
        with open(os.devnull, "w") as quiet:
            stdout, sys.stdout = sys.stdout, quiet
            try:
                _check_text(fw, out, t, chunks)
            finally:
                sys.stdout = stdout
        return FAILS
    finally:
        FAILS = saved


def _check_text(fw, out, t, chunks):
    what = fw
    try:
        if fw == "megatron":
            a, env, world, gpu, vocab = megatron.validate(out)
            if vocab is None:
                fail(what, "the header does not state the vocabulary the tokenizer must have")
                vocab = t["vocab"]
            compare(what, t, megatron.model(a, vocab))
            if chunks is None:
                fail(what, "no plan stages to compare with the chunks Megatron-LM builds")
            compare_plan(what, dict(header_plan(out), chunks=chunks, **precision_plan(out, fw)),
                         megatron_plan(a, world))
        else:
            cfg, world, gpu, fl = torchtitan.validate(out)
            if fl is None:
                fail(what, "no TransformerModelArgs flavor in the header")
                return
            compare(what, t, torchtitan.model(cfg, fl), init_std=False)
            compare_plan(what, dict(header_plan(out), **precision_plan(out, fw)), torchtitan_plan(cfg, fl))
            if fl.get("_name") != cfg["model.flavor"]:
                fail(what, "the job runs flavor %r, and the header registers %r" % (cfg["model.flavor"],
                                                                                   fl.get("_name")))
    except (megatron.Reject, torchtitan.Reject) as e:
        fail(what, "the framework rejects it: %s" % e)


# Flags that change how fast Megatron-LM runs, not what it computes or the
# plan's degrees: dropping one leaves the same model and layout.
PERF_ONLY = {"--overlap-grad-reduce", "--overlap-param-gather", "--attention-backend", "--no-masked-softmax-fusion",
             "--no-rope-fusion",
             "--grad-reduce-in-bf16", "--no-gradient-accumulation-fusion", "--tp-comm-overlap",
             "--overlap-param-gather-with-optimizer-step", "--no-overlap-p2p-communication", "--ckpt-format",
             "--moe-grouped-gemm",
             # memory and speed: Megatron-FSDP's two gathered-weight buffers, activations kept in host memory
             "--fsdp-double-buffer", "--cpu-offloading-num-layers",
             # speed and memory: the expert weight gradients delayed under the all-to-all overlap
             "--delay-wgrad-compute",
             # which library moves the flex dispatcher's tokens (HybridEP, DeepEP, NCCL EP): the same rows
             "--moe-flex-dispatcher-backend"}
# torchtitan's: float8's scales computed for all weights at once after the optimizer step; and
# keys whose value is what their default means (float8 without a recipe_name is tensorwise).
PERF_ONLY_TT = {"quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp"}
DEFAULT_MEANS_TT = {"quantize.linear.float8.recipe_name": "tensorwise"}


SPLIT_FLAGS = ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
               "--num-virtual-stages-per-pipeline-rank", "--num-layers-per-virtual-pipeline-stage")


def split_variants(out):
    """Outputs whose pipeline split differs from the emitted one: each count
    of the split flags one chunk per rank more and less (first and last moved
    together too, which keeps Megatron's sum), and the layout with one layer
    moved from each chunk to the next, written out plainly ("Et|tt|..."). Each
    changes the layers some chunk holds, so the checks must fail (a rule, or
    the chunks against the plan's stages)."""
    import re
    a, *_ = megatron.parse(out)
    vpp = a["num_virtual_stages_per_pipeline_rank"] or 1
    vs = []

    def sub(flag, val, new):
        return re.sub(r"(    %s )%s\b" % (re.escape(flag), re.escape(val)), lambda m: m.group(1) + new, out, count=1)

    for flag in SPLIT_FLAGS:
        dest = megatron.OPTIONS[flag][0]
        n = a[dest]
        if n is None:
            continue
        for d in (vpp, -vpp) if flag.startswith("--decoder") else (1, -1):
            if n + d > 0:
                vs.append(("changing %s %d to %d" % (flag, n, n + d), False, sub(flag, str(n), str(n + d))))
    f, z = a["decoder_first_pipeline_num_layers"], a["decoder_last_pipeline_num_layers"]
    if f is not None and z is not None and z > vpp:
        t = sub("--decoder-first-pipeline-num-layers", str(f), str(f + vpp))
        vs.append(("moving %d layers from the last pipeline rank to the first" % vpp, False,
                   re.sub(r"(    --decoder-last-pipeline-num-layers )%d\b" % z, lambda m: m.group(1) + str(z - vpp),
                          t, count=1)))
    pat = a["hybrid_layer_pattern"]
    if pat is not None and "|" in pat:  # each pipe one layer later and earlier
        for i, ch in enumerate(pat):
            if ch != "|":
                continue
            for j in (i - 1, i + 1):
                if 0 <= j < len(pat) and pat[j] != "|":
                    moved = list(pat)
                    moved[i], moved[j] = moved[j], moved[i]
                    vs.append(("moving the pattern's pipe %d by one layer" % i, False,
                               out.replace("'%s'" % pat, "'%s'" % "".join(moved), 1)))
    lay = a["pipeline_model_parallel_layout"]
    if lay is not None:
        st = megatron.layout_stages(lay)
        char = {v: k for k, v in megatron.LAYOUT_CHARS.items()}
        for c in range(len(st) - 1):
            if "decoder" not in st[c]:
                continue
            moved = [list(x) for x in st]
            moved[c].remove("decoder")
            moved[c + 1].insert(0, "decoder")
            text = "|".join("".join(char[x] for x in chunk) for chunk in moved)
            vs.append(("moving a layer of the layout's chunk %d to the next" % c, False,
                       out.replace("'%s'" % lay, "'%s'" % text, 1)))
    return vs


def mutants(ptdc, cases):
    """Drop each flag (Megatron-LM) or each flavor keyword and job-file key
    (torchtitan) of real outputs one at a time: unless what is dropped is the
    framework's default anyway (or only changes speed), the checks must fail.
    Megatron-LM outputs with an uneven split also get each split count changed
    (split_variants). This is the proof that an emitter dropping an attribute
    or misstating the split fails a test."""
    import re
    n = caught = 0
    for args in cases:
        fw = args[args.index("--emit") + 1]
        rc, out, err = run(ptdc, args)
        if rc:
            fail(" ".join(args), "exit %d: %s" % (rc, err))
            continue
        t = truth_of(ptdc, model_args(args))
        chunks = ptdc_chunks(ptdc, args, out, t) if fw == "megatron" else None
        if check_text(fw, out, t, chunks):
            fail(" ".join(args), "the unmutated output fails: %s" % check_text(fw, out, t, chunks))
            continue
        lines = out.splitlines()
        variants = []
        if fw == "megatron":
            args_m, _, _, gpu_m, *_ = megatron.parse(out)
            for i, l in enumerate(lines):
                m = re.match(r"    (--[a-z0-9-]+)( (\S+))?", l)
                if m:
                    flag = m.group(1)
                    dest, kind, default, _ = megatron.OPTIONS[flag]
                    harmless = flag in PERF_ONLY or megatron.unused(dest, args_m) or (
                        kind not in ("true", "false") and args_m[dest] == megatron.effective_default(dest, args_m))
                    v = lines[:i] + lines[i + 1:]
                    if i == len(lines) - 1:  # the last flag has no continuation backslash
                        v[-1] = v[-1].rstrip(" \\")
                    variants.append((flag, harmless, "\n".join(v) + "\n"))
                elif l.startswith("export "):
                    # validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS before Blackwell only;
                    # NVTE_CPU_OFFLOAD_V1 picks the offload schedule priced (speed, not the model)
                    # (not with the expert all-to-all overlap, which wants it above 1, as unset is)
                    harmless = ("CUDA_DEVICE_MAX_CONNECTIONS" in l and (not megatron.is_pre_blackwell(gpu_m) or
                                                                        args_m["overlap_moe_expert_parallel_comm"])) or \
                        "NVTE_CPU_OFFLOAD_V1" in l
                    variants.append((l, harmless, "\n".join(lines[:i] + lines[i + 1:]) + "\n"))
            variants += split_variants(out)
        else:
            cfg, world, gpu, fl = torchtitan.parse(out)
            start = next(i for i, l in enumerate(lines) if "TransformerModelArgs(" in l)
            end = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith(")),"))
            text = "\n".join(lines[start:end + 1])
            for kw in re.findall(r"(\w+)=([^,()]+)", text):
                key, val = kw
                if val.startswith("RoPEScalingArgs"):
                    continue
                d = dict(torchtitan.ARGS_DEFAULTS, **torchtitan.ROPE_DEFAULTS)
                harmless = (d.get(key) is not None and float(val) == d[key]) or \
                    (key == "n_kv_heads" and int(val) == fl["n_heads"])
                dropped = re.sub(r"\b%s=%s,? ?" % (key, re.escape(val)), "", text, count=1)
                v = lines[:start] + dropped.splitlines() + lines[end + 1:]
                variants.append((key, harmless, "\n".join(v) + "\n"))
            sec = None
            for i, l in enumerate(lines):
                if l.startswith("["):
                    sec = l.strip("[]")
                elif " = " in l and not l.startswith("#"):
                    key = "%s.%s" % (sec, l.split(" = ")[0])
                    typ, default, _ = torchtitan.KEYS[key]
                    val = cfg[key]
                    harmless = val == default or key in ("model.name", "parallelism.data_parallel_shard_degree") \
                        or key in PERF_ONLY_TT or DEFAULT_MEANS_TT.get(key) == val
                    variants.append((key, harmless, "\n".join(lines[:i] + lines[i + 1:]) + "\n"))
        for what, harmless, text in variants:
            if harmless:
                continue
            n += 1
            if check_text(fw, text, t, chunks):
                caught += 1
            else:
                fail(" ".join(args), "dropping %s goes unnoticed" % what)
    print("%d of %d mutants caught" % (caught, n))


def corpus(ptdc, src):
    models = sorted(glob.glob(os.path.join(src, "models", "*.mdl")))
    hf = sorted(d for d in glob.glob(os.path.join(src, "tests", "hf", "configs", "*")) if os.path.isdir(d))
    n = emitted = 0
    for m in models + hf:
        rel = os.path.relpath(m, src)
        # Kimi K2's 384 experts a layer: three MoE layers (51B parameters, over
        # 0.8 TB with Adam's state) do not fit 8 GPUs; one dense and one MoE
        # layer still check both kinds.
        sets = ["--set", "n_layers=2" if rel == "models/kimi-k2.mdl" else "n_layers=4"]
        # The Mamba-2 hybrids (layers in pairs: a Mamba-2 layer and an
        # attention layer; or Nemotron 3's pattern repeat, here five layers of
        # its kinds): Megatron-LM's HybridModel, checked as any model (the
        # pairs, two mixers a piece, refused); torchtitan must refuse them by
        # name (status 3).
        text = open(m).read() if m.endswith(".mdl") else ""
        if "n_pairs" in text or "repeat pattern" in text or m.endswith("nemotron3-nano.mdl") or \
                m.endswith("nemotron3-super.mdl") or os.path.basename(m).startswith("tiny-nemotron"):
            # Nemotron 3 Super's latent MoE layers are nemotron3.mdl's L (docs/moe.md)
            latent = re.search(r'pattern\s*=\s*"[^"]*L', text) or "super" in os.path.basename(m)
            few = ["--set", "n_pairs=2"] if "n_pairs" in text else ["--set", "pattern=MLM*L" if latent else
                                                                      "pattern=MEM*E"]
            rc = check_case(ptdc, [rel] + few + ["--gpus", "8", "--gpu", "h100-80gb", "--emit", "megatron"])
            n += 1
            emitted += rc == 0
            if rc != (3 if "n_pairs" in text else 0):
                fail(rel, "--emit megatron of a Mamba-2 hybrid exited %d" % rc)
            rc, out, err = run(ptdc, [rel] + few + ["--gpus", "8", "--gpu", "h100-80gb", "--emit", "torchtitan"])
            n += 1
            if rc != 3 or "softplus" not in err:
                fail(rel, "--emit torchtitan of a Mamba-2 hybrid: status %d, not the refusal: %s" % (rc, err))
            continue
        if m in hf:
            sets += ["--set", "seq=2048"]
        for fw in ("megatron", "torchtitan"):
            rc = check_case(ptdc, [rel] + sets + ["--gpus", "8", "--gpu", "h100-80gb", "--emit", fw])
            n += 1
            emitted += rc == 0
            if rc not in (0, 3):
                fail(rel, "--emit %s exited %d (the corpus sizes fit 8 GPUs)" % (fw, rc))
    # The layout flags: pinned layouts through both frameworks' rules.
    layouts = [
        ("models/llama3-8b.mdl", "--gpus 16 --tp 2 --pp 2 --virtual-stages 2 --micro-batch 1 --recompute none --sp on"),
        ("models/llama3-8b.mdl", "--gpus 16 --tp 4 --pp 1 --micro-batch 2 --recompute full --sp on"),
        ("models/llama2-7b.mdl", "--gpus 16 --tp 2 --pp 4 --micro-batch 1 --recompute selective --sp off"),
        ("models/llama2-7b.mdl", "--gpus 16 --tp 1 --pp 2 --micro-batch 1 --recompute ffn --sp off"),
        ("models/gpt3-1.3b.mdl", "--gpus 16 --tp 2 --pp 2 --micro-batch 2 --recompute none --sp on"),
        ("models/mistral-7b.mdl", "--gpus 16 --tp 2 --pp 1 --micro-batch 1 --recompute full --sp on"),
        # GPT-OSS's attention: a window on every other layer (--window-attn-skip-freq) and sinks
        ("tests/stack/upstream/models/mistral-gpt-oss-attention.mdl",
         "--gpus 16 --tp 2 --pp 1 --micro-batch 1 --recompute full --sp on"),
        # Experts folded over tp (alltoall), over dp with ETP on tp, and ETP alone.
        ("models/mixtral.mdl", "--gpus 16 --tp 2 --pp 2 --ep 2 --micro-batch 1 --recompute none --sp on"),
        ("models/mixtral.mdl", "--gpus 16 --tp 2 --pp 1 --ep 8 --etp 2 --micro-batch 1 --recompute full --sp on"),
        ("models/mixtral.mdl", "--gpus 16 --tp 2 --pp 2 --ep 1 --etp 2 --micro-batch 1 --recompute none --sp on"),
        # Shared experts (gated, and an MLP) and dense layers among MoE ones, split over tp.
        ("models/tiny-qwen2-moe.mdl", "--gpus 8 --tp 2 --pp 2 --ep 2 --micro-batch 1 --recompute none --sp on"),
        ("models/tiny-qwen2-moe.mdl", "--gpus 8 --tp 2 --pp 1 --ep 2 --etp 2 --micro-batch 1 --recompute none --sp off"),
        ("models/tiny-deepseek.mdl", "--set topk=4 --gpus 8 --tp 2 --pp 2 --ep 2 --micro-batch 1 --recompute full --sp on"),
        # Megatron's recompute modules (plan/recompute.def): MLA's up-projections with the experts'
        # activation, and the dense MLP alone.
        ("models/tiny-deepseek.mdl", "--set topk=4 --gpus 8 --tp 2 --pp 2 --ep 2 --micro-batch 1 "
         "--recompute mla_up_proj,moe_act --sp on"),
        ("models/llama2-7b.mdl", "--gpus 16 --tp 1 --pp 2 --micro-batch 1 --recompute mlp --sp off"),
        # Context parallelism (the all-gather form), with a pipeline; beside tp (Megatron only: torchtitan's
        # tensor parallelism always splits the norms' sequence, which ptdc's cp axis holds).
        ("models/llama3-8b.mdl", "--gpus 16 --cp 2 --tp 1 --pp 2 --micro-batch 1 --recompute none --sp off"),
        ("models/llama3-8b.mdl", "--gpus 16 --cp 2 --tp 2 --pp 1 --micro-batch 1 --recompute full --sp off"),
        # The ring (p2p) and the all-to-all form (a2a: heads split over cp; beside tp each tp rank's heads
        # over cp, Transformer Engine's condition checked by megatron.py) where the stack offers them;
        # torchtitan refuses a2a.
        ("models/llama3-8b.mdl", "--gpus 16 --cp 2 --tp 1 --pp 2 --micro-batch 1 --recompute none --sp off "
         "--stack-set cp_comm=p2p"),
        ("models/llama3-8b.mdl", "--gpus 16 --cp 2 --tp 1 --pp 2 --micro-batch 1 --recompute none --sp off "
         "--stack-set cp_comm=a2a"),
        ("models/llama3-8b.mdl", "--gpus 16 --cp 2 --tp 2 --pp 1 --micro-batch 1 --recompute full --sp off "
         "--stack-set cp_comm=a2a"),
        # Uneven pipelines (--pp-layers): Megatron's first/last counts under 1F1B and interleaved, the
        # first alone (3,2,2,1: the last is the middle's), its layout string under 1F1B and interleaved
        # (torchtitan refuses them all).
        ("models/llama3-8b.mdl", "--gpus 6 --tp 2 --pp 3 --micro-batch 1 --recompute none --sp on --schedule 1f1b "
         "--pp-layers first=2,last=2"),
        ("models/llama2-7b.mdl", "--gpus 6 --global-batch 24 --tp 2 --pp 3 --virtual-stages 2 --micro-batch 1 "
         "--recompute full --sp on --schedule interleaved --pp-layers first=2,last=2"),
        ("models/gpt3-1.3b.mdl", "--gpus 8 --tp 2 --pp 4 --micro-batch 1 --recompute none --sp on --schedule 1f1b --pp-layers 3,2,2,1"),
        ("models/llama3-8b.mdl", "--gpus 16 --tp 2 --pp 4 --micro-batch 1 --recompute none --sp on --schedule 1f1b --pp-layers 1,2,4,1"),
        ("models/llama3-8b.mdl", "--gpus 16 --tp 2 --pp 2 --virtual-stages 2 --micro-batch 1 --recompute selective "
         "--sp on --schedule interleaved --pp-layers 1,3,3,1"),
        # The embedding and the loss counted as layers (--account-for-embedding/loss-in-pipeline-split):
        # end chunks holding the embedding or the head alone, both ends and the first only.
        ("models/llama3-8b.mdl", "--gpus 20 --global-batch 20 --tp 2 --pp 5 --virtual-stages 2 --micro-batch 1 "
         "--recompute none --sp on --schedule interleaved --pp-layers 0,1,1,1,1,1,1,1,1,0"),
        ("models/llama3-8b.mdl", "--gpus 6 --global-batch 12 --tp 2 --pp 3 --virtual-stages 3 --micro-batch 1 "
         "--recompute none --sp on --schedule interleaved --pp-layers 0,1,1,1,1,1,1,1,1"),
        # Multi-token prediction in a layout string: 'm' in the last chunk before 'L' ('Et*3|t|t*2|t*2mL').
        ("models/tiny-llama-mtp.mdl", "--gpus 4 --tp 1 --pp 4 --micro-batch 1 --recompute none --sp off "
         "--schedule 1f1b --pp-layers 3,1,2,2"),
        # A hybrid's pipeline split as its pattern's segments, 1F1B and interleaved, uneven.
        ("models/tiny-nemotron3.mdl", "--gpus 8 --tp 2 --pp 2 --ep 2 --micro-batch 1 --recompute none --sp on "
         "--pp-layers 4,3"),
        ("models/tiny-nemotronh.mdl", "--gpus 8 --tp 2 --pp 2 --virtual-stages 2 --micro-batch 1 --recompute full "
         "--sp on --schedule interleaved --pp-layers 1,2,2,1"),
        # A hybrid's multi-token prediction: the pattern's '/' parts after the pipeline split
        # ('MEM*|EME/*E/*E'), the depths on the last stage.
        ("models/tiny-nemotron3-super-mtp.mdl", "--gpus 8 --tp 2 --pp 2 --ep 2 --micro-batch 1 --recompute none "
         "--sp on --pp-layers 4,3"),
    ]
    for model, lay in layouts:
        for fw, zero in (("megatron", "1"), ("torchtitan", "3")):
            sets = [] if "nemotron" in model else ["--set", "n_layers=8"]  # a pattern, not n_layers
            rc = check_case(ptdc, [model] + sets + lay.split() +
                            ["--zero", zero, "--gpu", "h100-80gb", "--emit", fw])
            n += 1
            emitted += rc == 0
    # Each precision through both frameworks, the weights sharded (gathered in the low precision
    # where the framework does) and not (torchtitan refuses NVFP4).
    for prec in ("fp8", "mxfp8", "nvfp4"):
        for fw, zero in (("megatron", "1"), ("megatron", "0"), ("torchtitan", "3"), ("torchtitan", "0")):
            lay = "--gpus 8 --tp 1 --pp 1 --micro-batch 1 --recompute full --sp off" if zero == "0" else \
                "--gpus 16 --tp 2 --pp 2 --micro-batch 1 --recompute none --sp on"
            gpu = ["--gpu", "h100-80gb"] if prec == "fp8" else ["--gpu", "b200"]
            rc = check_case(ptdc, ["models/llama3-8b.mdl", "--set", "n_layers=4"] + lay.split() +
                            ["--zero", zero] + gpu + ["--precision", prec, "--emit", fw])
            n += 1
            emitted += rc == 0
            if rc not in (0, 3) or (rc == 3) != (fw == "torchtitan" and prec == "nvfp4"):
                fail("--precision %s --emit %s" % (prec, fw), "exited %d" % rc)
    print("%d outputs checked (%d emitted, the rest refused with a reason) against %s and %s" % (
        n, emitted, megatron.UPSTREAM.split(":")[0], torchtitan.UPSTREAM.split(":")[0]))
    for c in UNREPLANNED:
        print("note: ptdc refuses this layout pinned, so its chunks are taken as the framework's even split: " + c)
    if emitted < n // 3:
        fail("corpus", "only %d of %d outputs were emitted" % (emitted, n))


def main():
    ptdc, src, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    ptdc = os.path.abspath(ptdc)
    os.chdir(src)
    if mode == "corpus":
        corpus(ptdc, src)
    elif mode == "mutants":
        cases = [
            "models/llama3-8b.mdl --set n_layers=8 --gpus 16 --tp 2 --pp 2 --virtual-stages 2 --micro-batch 1 "
            "--recompute full --sp on --zero 1 --gpu h100-80gb --emit megatron",
            "models/mistral-7b.mdl --set n_layers=4 --gpus 8 --gpu h100-80gb --emit megatron",
            "models/gpt3-1.3b.mdl --set n_layers=4 --gpus 8 --tp 2 --pp 1 --micro-batch 2 --recompute selective "
            "--sp off --zero 1 --gpu h100-80gb --emit megatron",
            "models/qwen2-7b.mdl --set n_layers=4 --gpus 8 --gpu h100-80gb --emit megatron",
            # A gated shared expert with ETP on tp; dense first layers beside MoE ones with a shared expert.
            "models/qwen2-moe.mdl --gpus 8 --tp 2 --pp 1 --ep 4 --etp 2 --micro-batch 1 --recompute full --sp on "
            "--zero 1 --gpu h100-80gb --stack megatron --emit megatron",
            "models/tiny-deepseek.mdl --set topk=4 --gpus 4 --tp 2 --pp 1 --micro-batch 1 --recompute none --sp on "
            "--zero 1 --emit megatron",
            "models/llama3-8b.mdl --set n_layers=8 --gpus 16 --tp 2 --pp 2 --virtual-stages 2 --micro-batch 1 "
            "--recompute full --sp on --zero 3 --gpu h100-80gb --emit torchtitan",
            "models/llama2-7b.mdl --set n_layers=4 --gpus 8 --gpu h100-80gb --emit torchtitan",
            "models/llama3-8b.mdl --set n_layers=8 --gpus 16 --cp 2 --tp 2 --pp 1 --micro-batch 1 "
            "--recompute none --sp off --zero 1 --gpu h100-80gb --emit megatron",
            "models/llama3-8b.mdl --set n_layers=8 --gpus 16 --cp 2 --tp 1 --pp 1 --micro-batch 1 "
            "--recompute none --sp off --zero 3 --gpu h100-80gb --emit torchtitan",
            "models/llama3-8b.mdl --set n_layers=8 --gpus 16 --cp 2 --tp 1 --pp 1 --micro-batch 1 "
            "--recompute none --sp off --zero 1 --gpu h100-80gb --stack-set cp_comm=a2a --emit megatron",
            "models/llama3-8b.mdl --set n_layers=8 --gpus 16 --cp 2 --tp 2 --pp 1 --micro-batch 1 "
            "--recompute none --sp on --zero 1 --gpu h100-80gb --stack-set cp_comm=a2a --emit megatron",
            # Uneven pipelines: first/last under 1F1B and interleaved, and the layout string.
            "models/llama3-8b.mdl --set n_layers=8 --gpus 6 --tp 2 --pp 3 --micro-batch 1 --recompute none "
            "--sp on --zero 1 --schedule 1f1b --pp-layers first=2,last=2 --gpu h100-80gb --emit megatron",
            "models/llama3-8b.mdl --set n_layers=8 --gpus 6 --global-batch 24 --tp 2 --pp 3 --virtual-stages 2 "
            "--micro-batch 1 --recompute none --sp on --zero 1 --schedule interleaved --pp-layers first=2,last=2 "
            "--gpu h100-80gb --emit megatron",
            "models/llama3-8b.mdl --set n_layers=8 --gpus 16 --tp 2 --pp 2 --virtual-stages 2 --micro-batch 1 "
            "--recompute none --sp on --zero 1 --schedule interleaved --pp-layers 1,3,3,1 --gpu h100-80gb --emit megatron",
            # Each precision's flags and keys, with the weights gathered in it (issue 33).
            "models/llama3-8b.mdl --set n_layers=4 --gpus 16 --tp 2 --pp 2 --micro-batch 1 --recompute none "
            "--sp on --zero 1 --gpu h100-80gb --precision fp8 --emit megatron",
            "models/llama3-8b.mdl --set n_layers=4 --gpus 16 --tp 2 --pp 1 --micro-batch 1 --recompute none "
            "--sp on --zero 1 --gpu b200 --precision mxfp8 --emit megatron",
            "models/llama3-8b.mdl --set n_layers=4 --gpus 16 --tp 2 --pp 1 --micro-batch 1 --recompute none "
            "--sp on --zero 1 --gpu b200 --precision nvfp4 --emit megatron",
            "models/llama3-8b.mdl --set n_layers=4 --gpus 16 --tp 2 --pp 1 --micro-batch 1 --recompute none "
            "--sp on --zero 3 --gpu h100-80gb --precision fp8 --emit torchtitan",
            "models/llama3-8b.mdl --set n_layers=4 --gpus 8 --tp 1 --pp 1 --micro-batch 1 --recompute full "
            "--sp off --zero 0 --gpu h100-80gb --precision fp8 --emit torchtitan",
            "models/llama3-8b.mdl --set n_layers=4 --gpus 16 --tp 2 --pp 1 --micro-batch 1 --recompute none "
            "--sp on --zero 3 --gpu b200 --precision mxfp8 --emit torchtitan",
            # Megatron-FSDP (ZeRO-3 offered by zero_stages) with activation offloading, and with tp on
            # a Hopper (no CUDA_DEVICE_MAX_CONNECTIONS=1 under FSDP).
            "models/llama3-8b.mdl --set n_layers=4 --gpus 8 --tp 1 --pp 1 --micro-batch 1 --recompute none "
            "--sp off --zero 3 --gpu gb200 --precision fp8 --stack megatron --stack-set zero_stages=0,1,3 "
            "--stack-set offload_act_layers=2 --emit megatron",
            "models/llama3-8b.mdl --set n_layers=4 --gpus 16 --tp 2 --pp 1 --micro-batch 1 --recompute none "
            "--sp on --zero 3 --gpu h100-80gb --stack megatron --stack-set zero_stages=0,1,3 --emit megatron",
            # The expert all-to-all overlap (stack moe_a2a_overlap): no pipeline on Blackwell, and
            # interleaved with tp on a Hopper (CUDA_DEVICE_MAX_CONNECTIONS above 1).
            "models/qwen3-30b-a3b.mdl --set n_layers=4 --gpus 8 --tp 1 --pp 1 --ep 8 --micro-batch 1 "
            "--recompute none --sp off --zero 1 --gpu gb200 --stack megatron --stack-set moe_a2a_overlap=yes "
            "--emit megatron",
            "models/qwen3-30b-a3b.mdl --set n_layers=8 --gpus 16 --global-batch 32 --tp 2 --pp 2 --virtual-stages 2 "
            "--ep 4 --micro-batch 1 --recompute none --sp on --zero 1 --gpu h100-80gb --stack megatron "
            "--stack-set moe_a2a_overlap=yes --emit megatron",
            # The flex dispatcher (stack moe_dispatcher=flex), EP 16 across two H100 nodes.
            "models/qwen3-30b-a3b.mdl --set n_layers=4 --gpus 16 --tp 1 --pp 1 --ep 16 --micro-batch 1 "
            "--recompute none --sp off --zero 1 --gpu h100-80gb --stack megatron --stack-set moe_dispatcher=flex "
            "--emit megatron",
            # Hybrids (pretrain_hybrid.py): Mamba-2, attention and MoE layers with the pipeline split in the
            # pattern's segments; Mamba-2, attention and squared-ReLU MLP layers.
            "models/tiny-nemotron3.mdl --gpus 8 --tp 2 --pp 2 --ep 2 --micro-batch 1 --recompute none --sp on "
            "--zero 1 --pp-layers 4,3 --gpu h100-80gb --emit megatron",
            "models/tiny-nemotronh.mdl --gpus 8 --tp 2 --pp 1 --micro-batch 1 --recompute full --sp on --zero 1 "
            "--gpu h100-80gb --emit megatron",
            # Nemotron 3 Super's latent MoE (--moe-latent-size) beside tp, sp and experts over dp.
            "models/tiny-nemotron3-super.mdl --gpus 8 --tp 2 --pp 1 --ep 4 --micro-batch 1 --recompute none "
            "--sp on --zero 1 --gpu h100-80gb --emit megatron",
            # Its multi-token prediction: two depths of one shared '*E' layer (--mtp-use-repeated-layer).
            "models/tiny-nemotron3-super-mtp.mdl --gpus 8 --tp 2 --pp 1 --ep 4 --micro-batch 1 --recompute none "
            "--sp on --zero 1 --gpu h100-80gb --emit megatron",
        ]
        mutants(ptdc, [c.split() for c in cases])
    else:
        check_case(ptdc, sys.argv[4:])
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
