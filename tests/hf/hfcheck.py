#!/usr/bin/env python3
"""hfcheck.py: checks of an exported Hugging Face model directory (python3 stdlib).

  hfcheck.py keys CONFIG.json [--dtype TORCH_DTYPE]
      Every key of CONFIG.json is one its class (the architecture's
      configuration class, or PretrainedConfig) defines, with a value of the
      type that class gives it, as tests/hf/transformers-keys.txt lists them
      with the transformers commit they were read from; a rope_scaling
      object's keys likewise. With --dtype, torch_dtype must be TORCH_DTYPE.
  hfcheck.py transformers DIR TOKENS GLOBAL_BATCH LOSS
      Loads DIR with transformers' AutoModelForCausalLM.from_pretrained and
      checks its loss on the first GLOBAL_BATCH sequences of TOKENS (a u16
      file, read as the training program reads it) against LOSS (1e-5
      relative; the model in float64). Without an importable transformers and
      torch: prints "SKIPPED: ..." and exits 77.
  hfcheck.py experts PER_EXPERT.safetensors STACKED.safetensors PREFIX
      Each expert tensor of PER_EXPERT (model.layers.L....experts.E.w1.weight,
      Hugging Face's [out, in]) is slice E of the stacked parameter
      PREFIX.L.e_gate (e_up, e_down; [n_experts, in, out]) of STACKED,
      transposed, value for value, and every slice is some expert's (both
      files F32)."""
import json
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLASS_OF = {"LlamaForCausalLM": "LlamaConfig", "MistralForCausalLM": "MistralConfig",
            "Qwen2ForCausalLM": "Qwen2Config", "GPT2LMHeadModel": "GPT2Config",
            "MixtralForCausalLM": "MixtralConfig", "Qwen2MoeForCausalLM": "Qwen2MoeConfig",
            "Qwen3MoeForCausalLM": "Qwen3MoeConfig", "GptOssForCausalLM": "GptOssConfig"}


def key_lists():
    """{section: {key: type}} from transformers-keys.txt."""
    out, cur = {}, None
    with open(os.path.join(HERE, "transformers-keys.txt")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("["):
                cur = out.setdefault(line[1:-1].split()[0], {})
            else:
                k, t = line.split()
                cur[k] = t
    return out


def type_ok(v, t):
    for one in t.split("|"):
        if one == "null" and v is None:
            return True
        if one == "int" and isinstance(v, int) and not isinstance(v, bool):
            return True
        if one == "float" and isinstance(v, float):
            return True
        if one == "bool" and isinstance(v, bool):
            return True
        if one == "str" and isinstance(v, str):
            return True
        if one == "list" and isinstance(v, list) and all(isinstance(x, str) for x in v):
            return True
        if one == "intlist" and isinstance(v, list) and all(
                isinstance(x, int) and not isinstance(x, bool) for x in v):
            return True
        if one == "object" and isinstance(v, dict):
            return True
    return False


def check_keys(path, dtype):
    with open(path) as f:
        c = json.load(f)
    lists = key_lists()
    bad = []
    arch = c.get("architectures", [None])[0]
    cls = CLASS_OF.get(arch)
    if not cls:
        bad.append("architectures %r is none of %s" % (c.get("architectures"), sorted(CLASS_OF)))
        cls = "PretrainedConfig"
    allowed = dict(lists["PretrainedConfig"])
    allowed.update(lists[cls])
    for k, v in sorted(c.items()):
        if k not in allowed:
            bad.append("key %r: %s defines no such key" % (k, cls))
        elif not type_ok(v, allowed[k]):
            bad.append("key %r: %r is not of type %s" % (k, v, allowed[k]))
    rs = c.get("rope_scaling")
    if isinstance(rs, dict):
        sub = lists.get("rope_scaling." + str(rs.get("rope_type")))
        if sub is None:
            bad.append("rope_scaling: rope_type %r is not listed" % rs.get("rope_type"))
        else:
            for k, v in sorted(rs.items()):
                if k not in sub:
                    bad.append("rope_scaling.%s: no such key" % k)
                elif not type_ok(v, sub[k]):
                    bad.append("rope_scaling.%s: %r is not of type %s" % (k, v, sub[k]))
            for k in sub:
                if k not in rs:
                    bad.append("rope_scaling.%s is missing" % k)
    if dtype and c.get("torch_dtype") != dtype:
        bad.append("torch_dtype %r, the export's is %r" % (c.get("torch_dtype"), dtype))
    for b in bad:
        print("hfcheck: %s: %s" % (path, b))
    if not bad:
        print("hfcheck: %s: %d keys, each one %s or PretrainedConfig defines, of its type"
              % (path, len(c), cls))
    return 1 if bad else 0


def check_transformers(d, tokens, gb, want):
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except Exception as e:  # noqa: BLE001 (any import failure means: not here)
        print("SKIPPED: transformers and torch are not importable here (%s: %s); the directory's "
              "config.json and weights were checked by ptdc import-hf and mkhf.py instead"
              % (type(e).__name__, e))
        return 77
    model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float64)
    model.eval()
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    seq = c.get("max_position_embeddings") or c["n_positions"]
    with open(tokens, "rb") as f:
        raw = f.read()
    toks = struct.unpack("<%dH" % (len(raw) // 2), raw)
    total = 0.0
    with torch.no_grad():
        for i in range(gb):
            w = list(toks[i * seq:i * seq + seq + 1])
            x = torch.tensor([w[:-1]])
            y = torch.tensor([w[1:]])
            logits = model(input_ids=x).logits[0]
            total += torch.nn.functional.cross_entropy(logits, y[0]).item()
    got = total / gb
    e = abs(got - want) / abs(want)
    print("hfcheck: %s: transformers' %s gives loss %.9f, expected %.9f: %.2g"
          % (d, type(model).__name__, got, want, e))
    return 0 if e <= 1e-5 else 1


def read_f32(path):
    """{name: (shape, [float])} of an F32 safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        if v["dtype"] != "F32":
            raise SystemExit("hfcheck: %s: %s is %s, not F32" % (path, k, v["dtype"]))
        a, b = v["data_offsets"]
        out[k] = (v["shape"], struct.unpack("<%df" % ((b - a) // 4), data[a:b]))
    return out


EXPERT = re.compile(r"model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(\w+)\.weight$")
STACK = {"w1": "e_gate", "gate_proj": "e_gate", "w3": "e_up", "up_proj": "e_up",
         "w2": "e_down", "down_proj": "e_down"}


def check_experts(per_expert, stacked, layer_prefix):
    """Each Hugging Face expert tensor (model.layers.L...experts.E.w1.weight,
    [out, in]) of per_expert is slice E of the stacked parameter
    LAYER_PREFIX.L.e_gate ([n_experts, in, out]) of stacked, transposed, and
    every slice of every stacked parameter is some expert's tensor."""
    a, b = read_f32(per_expert), read_f32(stacked)
    seen, bad, n = {}, 0, 0
    for name, (shape, vals) in sorted(a.items()):
        m = EXPERT.match(name)
        if not m:
            continue
        layer, e, w = int(m.group(1)), int(m.group(2)), m.group(3)
        sname = "%s.%d.%s" % (layer_prefix, layer, STACK[w])
        if sname not in b:
            print("hfcheck: %s has no %s (for %s)" % (stacked, sname, name))
            bad = 1
            continue
        sshape, svals = b[sname]
        rows, cols = shape
        if len(sshape) != 3 or sshape[1:] != [cols, rows] or not e < sshape[0]:
            print("hfcheck: %s %s is not expert %d of %s %s, transposed" % (name, shape, e, sname, sshape))
            bad = 1
            continue
        base = e * rows * cols
        for i in range(rows):
            for j in range(cols):
                if vals[i * cols + j] != svals[base + j * rows + i]:
                    print("hfcheck: %s[%d][%d] = %r, but %s[%d][%d][%d] = %r"
                          % (name, i, j, vals[i * cols + j], sname, e, j, i, svals[base + j * rows + i]))
                    return 1
        seen.setdefault(sname, set()).add(e)
        n += 1
    for sname, (sshape, _) in b.items():
        if re.search(r"\.e_(gate|up|down)$", sname) and seen.get(sname) != set(range(sshape[0])):
            print("hfcheck: %s: experts %s have no tensor in %s" % (
                sname, sorted(set(range(sshape[0])) - seen.get(sname, set())), per_expert))
            bad = 1
    if n == 0:
        print("hfcheck: %s holds no expert tensors" % per_expert)
        bad = 1
    if not bad:
        print("hfcheck: %d expert tensors of %s are the slices of %s's stacked experts, transposed"
              % (n, per_expert, stacked))
    return bad


def check_interleaved(fused, stacked, layer_prefix):
    """GPT-OSS's experts (transformers' GptOssExperts): every layer L's
    model.layers.L.mlp.experts.gate_up_proj [E, d_model, 2 d_ff] of fused holds
    the stacked LAYER_PREFIX.L.e_gate [E, d_model, d_ff] of stacked in its even
    columns and e_up in its odd ones (gate_up[..., ::2], gate_up[..., 1::2]),
    gate_up_proj_bias [E, 2 d_ff] e_gate_b and e_up_b likewise, down_proj and
    down_proj_bias are e_down and e_down_b as they are. Computed here, apart
    from the runtime's mapping (safetensors.c), which wrote fused."""
    a, b = read_f32(fused), read_f32(stacked)
    n = 0
    for name, (shape, vals) in sorted(a.items()):
        m = re.match(r"model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|gate_up_proj_bias|down_proj|down_proj_bias)$",
                     name)
        if not m:
            continue
        L, what = m.group(1), m.group(2)
        pre = "%s.%s." % (layer_prefix, L)
        if what.startswith("gate_up"):
            sfx = "_b" if what.endswith("bias") else ""
            parts = [b.get(pre + "e_gate" + sfx), b.get(pre + "e_up" + sfx)]
            if None in parts:
                print("hfcheck: %s has no %se_gate%s or %se_up%s (for %s)" % (stacked, pre, sfx, pre, sfx, name))
                return 1
            cols = shape[-1]
            for p, (pshape, pvals) in enumerate(parts):
                if pshape[:-1] != shape[:-1] or 2 * pshape[-1] != cols:
                    print("hfcheck: %s %s is not two of %s interleaved" % (name, shape, pshape))
                    return 1
                for k, v in enumerate(pvals):
                    row, j = divmod(k, pshape[-1])
                    if vals[row * cols + 2 * j + p] != v:
                        print("hfcheck: %s[row %d][%d] = %r, but %s's element [row %d][%d] = %r"
                              % (name, row, 2 * j + p, vals[row * cols + 2 * j + p],
                                 pre + ("e_gate", "e_up")[p] + sfx, row, j, v))
                        return 1
        else:
            sname = pre + ("e_down_b" if what.endswith("bias") else "e_down")
            if sname not in b or b[sname][0] != shape or list(b[sname][1]) != list(vals):
                print("hfcheck: %s is not %s of %s" % (name, sname, stacked))
                return 1
        n += 1
    if n == 0:
        print("hfcheck: %s holds no GPT-OSS expert tensors" % fused)
        return 1
    print("hfcheck: %d GPT-OSS expert tensors of %s are %s's stacked experts, gate and up interleaved"
          % (n, fused, stacked))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "keys":
        dtype = argv[3] if len(argv) > 3 and argv[2] == "--dtype" else None
        return check_keys(argv[1], dtype)
    if len(argv) == 4 and argv[0] == "experts":
        return check_experts(argv[1], argv[2], argv[3])
    if len(argv) == 4 and argv[0] == "interleaved":
        return check_interleaved(argv[1], argv[2], argv[3])
    if len(argv) == 5 and argv[0] == "transformers":
        return check_transformers(argv[1], argv[2], int(argv[3]), float(argv[4]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
