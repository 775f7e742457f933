#!/usr/bin/env python3
"""mkhf.py: tiny Hugging Face models for the import tests (python3 stdlib only).

  mkhf.py make ARCH DIR [--dtype f32|bf16|f16] [--shards N] [--seed S] [OPTIONS]
      DIR/config.json of ARCH (llama3, mistral, qwen2, gpt2) at a size a CPU
      trains in seconds, its weights as transformers names them, written as
      save_pretrained would: DIR/model.safetensors, or N shards
      model-0000i-of-0000N.safetensors and model.safetensors.index.json;
      and DIR/tokens.u16, a token file (run.sh --data u16:DIR/tokens.u16).
      OPTIONS:
        --generation-config     also DIR/generation_config.json
        --prefix add|strip      name the tensors with the class's
                                base_model_prefix ("transformer." as
                                GPT2LMHeadModel.save_pretrained writes them),
                                or without it ("model." gone, a LlamaModel's)
        --also NAME=OTHER       tensor NAME a second time, as OTHER
        --drop NAME             no tensor NAME
  mkhf.py shrink CONFIG DIR [--dtype ...] [--shards N] [--seed S] [OPTIONS]
      The same from a published config.json: every key kept, the sizes made
      as small as make's (hidden 32, 2 layers, 4 heads, 96 tokens, 16
      positions; grouped-query attention, rope scaling and a window kept).
  mkhf.py loss DIR GLOBAL_BATCH [--without FEATURE] [--tokens PATH]
      The loss of the first training step (sequences 0 .. GLOBAL_BATCH-1 of
      tokens.u16, or PATH, as the training program reads them) computed in
      double by a transcription of transformers' forward (LlamaForCausalLM,
      MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel) from the files in
      DIR. --without rope_scaling|window|bias drops one feature, to show the
      comparison would see it missing.

The forward is written from transformers' modeling code, independently of
ptdc: weights are read by name from the safetensors files, linear weights
used as stored ([out, in]; GPT-2's Conv1D [in, out])."""
import json
import math
import os
import random
import struct
import sys

# ------------------------------------------------------------------ configs

CONFIGS = {
    # LLaMA-3.1 style: grouped-query attention, rope_scaling llama3 (an
    # original context of 8 puts the 4 frequencies of head_dim 8 in all three
    # bands), untied head.
    "llama3": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1,
        "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 32,
        "initializer_range": 0.02, "intermediate_size": 48,
        "max_position_embeddings": 16, "mlp_bias": False,
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8, "rope_type": "llama3"},
        "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.43.0", "use_cache": True, "vocab_size": 96},
    # Mistral: a sliding window shorter than the sequence.
    "mistral": {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral",
        "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 32,
        "initializer_range": 0.02, "intermediate_size": 48, "max_position_embeddings": 16,
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 5,
        "tie_word_embeddings": False, "torch_dtype": "float16",
        "transformers_version": "4.34.0", "use_cache": True, "vocab_size": 96},
    # Qwen2: q, k, v biases, tied embeddings, a window use_sliding_window turns off.
    "qwen2": {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": 32, "initializer_range": 0.02,
        "intermediate_size": 48, "max_position_embeddings": 16, "max_window_layers": 2,
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 16,
        "tie_word_embeddings": True, "torch_dtype": "float32",
        "transformers_version": "4.37.2", "use_cache": True, "use_sliding_window": False,
        "vocab_size": 96},
    "gpt2": {
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1, "bos_token_id": 1, "embd_pdrop": 0.1, "eos_token_id": 2,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
        "n_ctx": 16, "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 16,
        "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True, "summary_type": "cls_index",
        "summary_use_proj": True, "vocab_size": 96},
}


def shapes(arch, c):
    """(name, shape, kind) in the order transformers' state dict lists them."""
    out = []
    if arch == "gpt2":
        d, v, s, n = c["n_embd"], c["vocab_size"], c["n_positions"], c["n_layer"]
        ff = c.get("n_inner") or 4 * d
        out += [("wte.weight", [v, d], "w"), ("wpe.weight", [s, d], "w")]
        for i in range(n):
            p = "h.%d." % i
            out += [(p + "ln_1.weight", [d], "norm"), (p + "ln_1.bias", [d], "b"),
                    (p + "attn.c_attn.weight", [d, 3 * d], "w"),
                    (p + "attn.c_attn.bias", [3 * d], "b"),
                    (p + "attn.c_proj.weight", [d, d], "w"), (p + "attn.c_proj.bias", [d], "b"),
                    (p + "ln_2.weight", [d], "norm"), (p + "ln_2.bias", [d], "b"),
                    (p + "mlp.c_fc.weight", [d, ff], "w"), (p + "mlp.c_fc.bias", [ff], "b"),
                    (p + "mlp.c_proj.weight", [ff, d], "w"), (p + "mlp.c_proj.bias", [d], "b")]
            # a buffer some GPT-2 checkpoints carry; the import must ignore it
            out.append((p + "attn.masked_bias", [1], "b"))
        out += [("ln_f.weight", [d], "norm"), ("ln_f.bias", [d], "b")]
        return out
    d, v, n = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"]
    h, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hd = c.get("head_dim") or d // h
    ff = c["intermediate_size"]
    out.append(("model.embed_tokens.weight", [v, d], "w"))
    for i in range(n):
        p = "model.layers.%d." % i
        out += [(p + "self_attn.q_proj.weight", [h * hd, d], "w"),
                (p + "self_attn.k_proj.weight", [kv * hd, d], "w"),
                (p + "self_attn.v_proj.weight", [kv * hd, d], "w")]
        if arch == "qwen2":
            out += [(p + "self_attn.q_proj.bias", [h * hd], "b"),
                    (p + "self_attn.k_proj.bias", [kv * hd], "b"),
                    (p + "self_attn.v_proj.bias", [kv * hd], "b")]
        out += [(p + "self_attn.o_proj.weight", [d, h * hd], "w"),
                (p + "mlp.gate_proj.weight", [ff, d], "w"),
                (p + "mlp.up_proj.weight", [ff, d], "w"),
                (p + "mlp.down_proj.weight", [d, ff], "w"),
                (p + "input_layernorm.weight", [d], "norm"),
                (p + "post_attention_layernorm.weight", [d], "norm")]
    out.append(("model.norm.weight", [d], "norm"))
    if not c.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", [v, d], "w"))
    return out


# ---------------------------------------------------------- safetensors I/O

DTYPES = {"f32": ("F32", 4), "bf16": ("BF16", 2), "f16": ("F16", 2)}


def bf16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u += 0x7FFF + ((u >> 16) & 1)  # round to nearest even (values are finite)
    return (u >> 16) & 0xFFFF


def encode(vals, dtype):
    if dtype == "F32":
        return struct.pack("<%df" % len(vals), *vals)
    if dtype == "F16":
        return struct.pack("<%de" % len(vals), *vals)
    return struct.pack("<%dH" % len(vals), *[bf16_bits(x) for x in vals])


def decode(raw, dtype):
    n = len(raw) // (4 if dtype == "F32" else 2)
    if dtype == "F32":
        return list(struct.unpack("<%df" % n, raw))
    if dtype == "F16":
        return list(struct.unpack("<%de" % n, raw))
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
            for h in struct.unpack("<%dH" % n, raw)]


def write_safetensors(path, tensors):
    """tensors: list of (name, shape, dtype, raw bytes)."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, dtype, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, raw in tensors:
            f.write(raw)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = (t["shape"], decode(data[b:e], t["dtype"]))
    return out


def load_weights(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for f in files:
        w.update(read_safetensors(os.path.join(d, f)))
    return w


def shrink(c):
    """A published config at make's sizes, every other key as it was."""
    c = dict(c)
    if c["architectures"][0] == "GPT2LMHeadModel":
        c.update(n_embd=32, n_head=4, n_layer=2, n_positions=16, vocab_size=96)
        if "n_ctx" in c:
            c["n_ctx"] = 16
        if c.get("n_inner"):
            c["n_inner"] = 48
        return c
    kv_same = c.get("num_key_value_heads", c["num_attention_heads"]) == c["num_attention_heads"]
    c.update(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             vocab_size=96, max_position_embeddings=16)
    if "num_key_value_heads" in c:
        c["num_key_value_heads"] = 4 if kv_same else 2
    if c.get("head_dim"):
        c["head_dim"] = 8
    if c.get("rope_scaling"):
        c["rope_scaling"] = dict(c["rope_scaling"], original_max_position_embeddings=8)
    if c["architectures"][0] == "MistralForCausalLM" and c.get("sliding_window"):
        c["sliding_window"] = 5
    return c


def arch_of(c):
    """shapes()'s name for a config's architecture."""
    return {"GPT2LMHeadModel": "gpt2", "Qwen2ForCausalLM": "qwen2"}.get(c["architectures"][0],
                                                                       "llama")


def rename(name, arch, prefix):
    """A tensor's name with or without its class's base_model_prefix."""
    if prefix == "add" and arch == "gpt2":
        return "transformer." + name
    if prefix == "strip" and arch != "gpt2" and name.startswith("model."):
        return name[len("model."):]
    return name


def make(arch, d, dtype, nshards, seed, c=None, gen=False, prefix=None, also=(), drop=()):
    c = c or CONFIGS[arch]
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
    if gen:  # as GenerationConfig.save_pretrained writes one
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump({"_from_model_config": True, "bos_token_id": 1, "eos_token_id": 2,
                       "do_sample": True, "temperature": 0.6, "top_p": 0.9,
                       "transformers_version": "4.43.0"}, f, indent=2, sort_keys=True)
            f.write("\n")
    rng = random.Random(seed)
    st, size = DTYPES[dtype]
    tensors = []
    for name, shape, kind in shapes(arch, c):
        n = 1
        for s in shape:
            n *= s
        # Large enough that attention is sharp and every feature moves the loss.
        if kind == "norm":
            vals = [1.0 + rng.uniform(-0.3, 0.3) for _ in range(n)]
        elif kind == "b":
            vals = [rng.uniform(-0.5, 0.5) for _ in range(n)]
        else:
            vals = [rng.uniform(-0.35, 0.35) for _ in range(n)]
        tensors.append((rename(name, arch, prefix), shape, st, encode(vals, st)))
    for pair in also:
        name, other = pair.split("=")
        tensors += [(other,) + t[1:] for t in tensors if t[0] == name]
    tensors = [t for t in tensors if t[0] not in drop]
    total = sum(len(t[3]) for t in tensors)
    if nshards <= 1:
        write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    else:
        per = (len(tensors) + nshards - 1) // nshards
        groups = [tensors[i:i + per] for i in range(0, len(tensors), per)]
        wmap = {}
        for i, g in enumerate(groups):
            fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(groups))
            write_safetensors(os.path.join(d, fn), g)
            for t in g:
                wmap[t[0]] = fn
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2,
                      sort_keys=True)
            f.write("\n")
    seq = c.get("max_position_embeddings") or c["n_positions"]
    toks = [rng.randrange(c["vocab_size"]) for _ in range(8 * 16 * seq + 1)]
    with open(os.path.join(d, "tokens.u16"), "wb") as f:
        f.write(struct.pack("<%dH" % len(toks), *toks))


# ---------------------------------------------------------------- forward

def linear(x, w, b=None):
    """x [n][in] @ w^T, w stored [out][in] (nn.Linear)."""
    out = []
    for row in x:
        r = [sum(a * bb for a, bb in zip(row, wr)) for wr in w]
        if b is not None:
            r = [a + bb for a, bb in zip(r, b)]
        out.append(r)
    return out


def conv1d(x, w, b):
    """x [n][in] @ w, w stored [in][out] (GPT-2's Conv1D)."""
    nout = len(w[0])
    out = []
    for row in x:
        r = list(b)
        for a, wr in zip(row, w):
            for j in range(nout):
                r[j] += a * wr[j]
        out.append(r)
    return out


def rows(flat, shape):
    if len(shape) == 1:
        return flat
    k = shape[1]
    return [flat[i * k:(i + 1) * k] for i in range(shape[0])]


def rmsnorm(x, w, eps):
    out = []
    for row in x:
        r = 1.0 / math.sqrt(sum(a * a for a in row) / len(row) + eps)
        out.append([a * r * g for a, g in zip(row, w)])
    return out


def layernorm(x, w, b, eps):
    out = []
    for row in x:
        m = sum(row) / len(row)
        var = sum((a - m) ** 2 for a in row) / len(row)
        r = 1.0 / math.sqrt(var + eps)
        out.append([(a - m) * r * g + bb for a, g, bb in zip(row, w, b)])
    return out


def inv_freqs(c, hd, scaling):
    theta = c.get("rope_theta", 10000.0)
    inv = [1.0 / theta ** (2 * j / hd) for j in range(hd // 2)]
    rs = c.get("rope_scaling")
    if not rs or not scaling:
        return inv
    # transformers' _compute_llama3_parameters
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in inv:
        wl = 2 * math.pi / f
        llama = f / factor if wl > lo_wl else f
        smooth = (old / wl - lo) / (hi - lo)
        smoothed = (1 - smooth) * llama / factor + smooth * llama
        medium = not (wl < hi_wl) and not (wl > lo_wl)
        out.append(smoothed if medium else llama)
    return out


def rope(x, nheads, hd, inv):
    """x [S][nheads * hd], rotate-half (HF apply_rotary_pos_emb) at positions 0..S-1."""
    half = hd // 2
    out = []
    for p, row in enumerate(x):
        r = list(row)
        for h in range(nheads):
            base = h * hd
            for j in range(half):
                a = p * inv[j]
                c, s = math.cos(a), math.sin(a)
                x1, x2 = row[base + j], row[base + j + half]
                r[base + j] = x1 * c - x2 * s
                r[base + j + half] = x2 * c + x1 * s
        out.append(r)
    return out


def attention(q, k, v, h, kvh, hd, window):
    """Causal softmax(q k^T / sqrt(hd)) v per head; kv head h // (h / kvh);
    with a window, key j visible to query i iff i - j < window."""
    S, g = len(q), h // kvh
    out = [[0.0] * (h * hd) for _ in range(S)]
    for hh in range(h):
        kh = hh // g
        for i in range(S):
            qi = q[i][hh * hd:(hh + 1) * hd]
            js = [j for j in range(i + 1) if not window or i - j < window]
            sc = [sum(a * b for a, b in zip(qi, k[j][kh * hd:(kh + 1) * hd])) / math.sqrt(hd)
                  for j in js]
            m = max(sc)
            e = [math.exp(s - m) for s in sc]
            z = sum(e)
            for j, ej in zip(js, e):
                vj = v[j][kh * hd:(kh + 1) * hd]
                for d in range(hd):
                    out[i][hh * hd + d] += ej / z * vj[d]
    return out


def cross_entropy(logits, targets):
    tot = 0.0
    for row, t in zip(logits, targets):
        m = max(row)
        tot += m + math.log(sum(math.exp(a - m) for a in row)) - row[t]
    return tot / len(targets)


def silu(a):
    return a / (1.0 + math.exp(-a))


def gelu_new(a):
    return 0.5 * a * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a ** 3)))


def forward_llama(c, W, toks, without):
    arch = c["architectures"][0]
    d, h = c["hidden_size"], c["num_attention_heads"]
    kvh = c.get("num_key_value_heads", h)
    hd = c.get("head_dim") or d // h
    eps = c.get("rms_norm_eps", 1e-6)
    window = c.get("sliding_window") if arch == "MistralForCausalLM" else None
    if without == "window":
        window = None
    inv = inv_freqs(c, hd, without != "rope_scaling")
    g = lambda n: rows(*reversed(W[n]))  # noqa: E731 (flat, shape) -> rows
    emb = g("model.embed_tokens.weight")
    x = [list(emb[t]) for t in toks]
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        hn = rmsnorm(x, W[p + "input_layernorm.weight"][1], eps)
        bias = lambda n: (W[p + n][1] if arch == "Qwen2ForCausalLM" and without != "bias"  # noqa
                          else None)
        q = linear(hn, g(p + "self_attn.q_proj.weight"), bias("self_attn.q_proj.bias"))
        k = linear(hn, g(p + "self_attn.k_proj.weight"), bias("self_attn.k_proj.bias"))
        v = linear(hn, g(p + "self_attn.v_proj.weight"), bias("self_attn.v_proj.bias"))
        q, k = rope(q, h, hd, inv), rope(k, kvh, hd, inv)
        a = attention(q, k, v, h, kvh, hd, window)
        o = linear(a, g(p + "self_attn.o_proj.weight"))
        x = [[s + t for s, t in zip(r1, r2)] for r1, r2 in zip(x, o)]
        hn = rmsnorm(x, W[p + "post_attention_layernorm.weight"][1], eps)
        gate = linear(hn, g(p + "mlp.gate_proj.weight"))
        up = linear(hn, g(p + "mlp.up_proj.weight"))
        m = linear([[silu(a) * b for a, b in zip(r1, r2)] for r1, r2 in zip(gate, up)],
                   g(p + "mlp.down_proj.weight"))
        x = [[s + t for s, t in zip(r1, r2)] for r1, r2 in zip(x, m)]
    x = rmsnorm(x, W["model.norm.weight"][1], eps)
    head = emb if c.get("tie_word_embeddings", False) else g("lm_head.weight")
    return linear(x, head)


def forward_gpt2(c, W, toks, without):
    d, h = c["n_embd"], c["n_head"]
    hd, eps = d // h, c.get("layer_norm_epsilon", 1e-5)
    g = lambda n: rows(*reversed(W[n]))  # noqa: E731
    wte, wpe = g("wte.weight"), g("wpe.weight")
    x = [[a + b for a, b in zip(wte[t], wpe[p])] for p, t in enumerate(toks)]
    for i in range(c["n_layer"]):
        p = "h.%d." % i
        hn = layernorm(x, W[p + "ln_1.weight"][1], W[p + "ln_1.bias"][1], eps)
        qkv = conv1d(hn, g(p + "attn.c_attn.weight"), W[p + "attn.c_attn.bias"][1])
        q, k, v = ([r[j * d:(j + 1) * d] for r in qkv] for j in range(3))
        a = attention(q, k, v, h, h, hd, None)
        o = conv1d(a, g(p + "attn.c_proj.weight"), W[p + "attn.c_proj.bias"][1])
        x = [[s + t for s, t in zip(r1, r2)] for r1, r2 in zip(x, o)]
        hn = layernorm(x, W[p + "ln_2.weight"][1], W[p + "ln_2.bias"][1], eps)
        f = conv1d(hn, g(p + "mlp.c_fc.weight"), W[p + "mlp.c_fc.bias"][1])
        f = [[gelu_new(a) for a in r] for r in f]
        m = conv1d(f, g(p + "mlp.c_proj.weight"), W[p + "mlp.c_proj.bias"][1])
        x = [[s + t for s, t in zip(r1, r2)] for r1, r2 in zip(x, m)]
    x = layernorm(x, W["ln_f.weight"][1], W["ln_f.bias"][1], eps)
    return linear(x, wte)


def loss(d, gb, without, tokens=None):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    W = load_weights(d)
    seq = c.get("max_position_embeddings") or c["n_positions"]
    with open(tokens or os.path.join(d, "tokens.u16"), "rb") as f:
        raw = f.read()
    toks = struct.unpack("<%dH" % (len(raw) // 2), raw)
    fwd = forward_gpt2 if c["architectures"][0] == "GPT2LMHeadModel" else forward_llama
    total = 0.0
    for i in range(gb):  # sequence i reads window i: tokens [i seq, i seq + seq]
        w = toks[i * seq:i * seq + seq + 1]
        total += cross_entropy(fwd(c, W, list(w[:-1]), without), list(w[1:]))
    return total / gb


def options(args):
    """--generation-config alone; every other option takes a value (--also, --drop repeat)."""
    o = {"--also": [], "--drop": []}
    i = 0
    while i < len(args):
        if args[i] == "--generation-config":
            o[args[i]] = True
            i += 1
        elif args[i] in o:
            o[args[i]].append(args[i + 1])
            i += 2
        else:
            o[args[i]] = args[i + 1]
            i += 2
    return o


def main(argv):
    if len(argv) >= 3 and argv[0] in ("make", "shrink"):
        o = options(argv[3:])
        if argv[0] == "make":
            arch, c = argv[1], None
        else:
            with open(argv[1]) as f:
                c = shrink(json.load(f))
            arch = arch_of(c)
        make(arch, argv[2], o.get("--dtype", "f32"), int(o.get("--shards", "1")),
             int(o.get("--seed", "1")), c, o.get("--generation-config", False), o.get("--prefix"),
             o["--also"], o["--drop"])
        return 0
    if len(argv) >= 3 and argv[0] == "loss":
        o = options(argv[3:])
        print("%.9f" % loss(argv[1], int(argv[2]), o.get("--without"), o.get("--tokens")))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
