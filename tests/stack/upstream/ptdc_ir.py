"""The model ptdc describes, read from `ptdc MODEL --emit ir` and `--emit
summary`, independently of report/ (which the emitters use): what the
frameworks' models built from ptdc's flags must equal.

Every attribute printed on an operator must be one this module knows how to
compare (KNOWN): an attribute added to ir/attrs.def that the checks do not
look at fails the corpus test until they do."""

import re

import rope

# (op, attribute) pairs the checks compare; "contract" is the structure of a matmul.
KNOWN = {
    ("rmsnorm", "eps"), ("layernorm", "eps"),
    ("rope", "pos"), ("rope", "rot"), ("rope", "theta"), ("rope", "scaling"), ("rope", "factor"),
    ("rope", "low_freq_factor"), ("rope", "high_freq_factor"), ("rope", "original_max_position"),
    ("attention", "causal"), ("attention", "window"),
    ("softmax", "dim"),
    ("matmul", "contract"),
    ("route", "topk"), ("route", "score"), ("route", "norm"), ("route", "scale"), ("route", "groups"),
    ("route", "group_topk"), ("route", "capacity"), ("route", "aux"), ("route", "zloss"),
}

NODE = re.compile(r"^  (?P<outs>[^=]+?) = (?P<op>[a-z_]+)\((?P<ins>[^)]*)\)(?P<attrs>.*?) : (?P<types>.*?)(  \{\w+\})?$")
TYPE = re.compile(r"(\w+)\[([^\]]*)\]")
PARAM = re.compile(r"^  (?P<name>\S+) : (?P<dtype>\w+)\[(?P<dims>[^\]]*)\] = (?P<init>\w+)(\((?P<std>[^)]*)\))?")


class Ir:
    def __init__(self, text):
        self.dims, self.params, self.types, self.pieces = {}, {}, {}, []
        section = None
        for line in text.splitlines():
            if not line.startswith("  "):
                m = re.match(r"piece (\d+): (\w+)", line)
                if m:
                    self.pieces.append({"kind": m.group(2), "nodes": []})
                    section = "piece"
                else:
                    section = line.split()[0] if line.strip() else None
                continue
            if section == "dims":
                m = re.match(r"  (\w+) = (\d+)", line)
                if m:
                    self.dims[m.group(1)] = int(m.group(2))
            elif section == "params":
                m = PARAM.match(line)
                if m:
                    dims = [d.strip() for d in m.group("dims").split(",") if d.strip()]
                    self.params[m.group("name")] = {"dtype": m.group("dtype"), "dims": dims,
                                                   "init": m.group("init"),
                                                   "std": float(m.group("std")) if m.group("std") else None}
            elif section == "piece":
                m = NODE.match(line)
                if not m:
                    raise ValueError("cannot read node line: " + line)
                outs = [o.strip() for o in m.group("outs").split(",")]
                ins = [i.strip() for i in m.group("ins").split(",") if i.strip()]
                attrs = {}
                for a in re.finditer(r"(\w+)=(\[[^\]]*\]|\S+)", m.group("attrs")):
                    attrs[a.group(1)] = a.group(2)
                types = [(t.group(1), [d.strip() for d in t.group(2).split(",") if d.strip()])
                         for t in TYPE.finditer(m.group("types"))]
                for o, t in zip(outs, types):
                    self.types[o] = t
                self.pieces[-1]["nodes"].append({"op": m.group("op"), "outs": outs, "ins": ins,
                                                 "attrs": attrs})
        self.producer = {o: n for p in self.pieces for n in p["nodes"] for o in n["outs"]}

    def size(self, dim):
        return self.dims[dim]


def freqs(theta, dim, scaling):
    """Rotary inverse frequencies as ptdc's rope computes them (runtime/cpu/rope.c)."""
    f = rope.inv_freqs(theta, dim)
    if scaling:
        f = rope.llama3(f, scaling["factor"], scaling["low"], scaling["high"], scaling["orig"])
    return f


def truth(ir_text, summary_text):
    """The model as a dict (see the keys below); 'decoder' False for a graph
    no framework decoder is (a parallel block, a softmax, other ops)."""
    ir = Ir(ir_text)
    t = {"unknown": [], "decoder": True, "why": "", "dropout": 0.0}  # ptdc's programs have no dropout
    m = re.search(r"parameters: ([\d,]+)", summary_text)
    t["params"] = int(m.group(1).replace(",", ""))
    for p in ir.pieces:
        for n in p["nodes"]:
            for a in n["attrs"]:
                if (n["op"], a) not in KNOWN:
                    t["unknown"].append("%s.%s" % (n["op"], a))
    layers = [p for p in ir.pieces if p["kind"] == "layer"]
    t["layers"] = len(layers)
    emb, head = ir.pieces[0], ir.pieces[-1]
    is_param = lambda x: x in ir.params

    def not_decoder(why):
        t["decoder"], t["why"] = False, why
        return t

    # Attribute values, one per (op, attr) over the layers and the head.
    attrs = {}
    for p in layers + [head]:
        for n in p["nodes"]:
            for a, v in n["attrs"].items():
                attrs.setdefault((n["op"], a), set()).add(v)
    t["attr_values"] = {k: sorted(v) for k, v in attrs.items()}
    ops = {n["op"] for p in layers for n in p["nodes"]}
    allowed = {"rmsnorm", "layernorm", "matmul", "rope", "attention", "silu", "gelu", "swiglu", "add", "mul",
               "route", "moe"}
    if ops - allowed:
        return not_decoder("layers compute " + ", ".join(sorted(ops - allowed)))
    L0 = layers[0]["nodes"]
    table = next(n["ins"][1] for n in emb["nodes"] if n["op"] == "embedding")
    t["vocab"] = ir.size(ir.params[table]["dims"][0])
    t["d_model"] = ir.size(ir.params[table]["dims"][1])
    t["bf16"] = ir.params[table]["dtype"] == "bf16"
    t["positions"] = "learned" if any(n["op"] == "add" and any(map(is_param, n["ins"])) for n in emb["nodes"]) else None
    norms = [n for n in L0 if n["op"] in ("rmsnorm", "layernorm")]
    if len(norms) != 2 or len({n["ins"][0] for n in norms}) < 2:
        return not_decoder("a parallel block (attention and MLP read one normalised layer input)")
    t["norm"] = norms[0]["op"]
    t["eps"] = float(norms[0]["attrs"]["eps"])
    att = next(n for n in L0 if n["op"] == "attention")
    t["causal"] = att["attrs"]["causal"] == "true"
    t["window"] = int(att["attrs"]["window"]) if "window" in att["attrs"] else None
    qd, kd = ir.types[att["ins"][0]][1], ir.types[att["ins"][1]][1]
    t["seq"], t["heads"], t["head_dim"] = ir.size(qd[1]), ir.size(qd[2]), ir.size(qd[3])
    t["kv_heads"] = ir.size(kd[2])
    bias, rope, qkv_adds = set(), None, set()

    def back(x, what):
        """Step from an attention input back to its projection weight."""
        nonlocal rope
        n = ir.producer.get(x)
        if n and n["op"] == "add" and any(map(is_param, n["ins"])):
            bias.add(what)
            qkv_adds.add(n["outs"][0])
            n = ir.producer.get(next(i for i in n["ins"] if not is_param(i)))
        if n and n["op"] == "rope":
            rope = n
            return back(n["ins"][0], what)
        return n["ins"][1] if n and n["op"] == "matmul" else None
    wq = back(att["ins"][0], "qkv")
    back(att["ins"][1], "qkv")
    back(att["ins"][2], "qkv")
    t["init_std"] = ir.params[wq]["std"] if wq else None
    if rope:
        a = rope["attrs"]
        t["positions"] = t["positions"] or "rope"
        t["rope"] = {"theta": float(a["theta"]), "rot_full": a["rot"] == qd[3], "pos_seq": a["pos"] == qd[1],
                     "scaling": None}
        if "scaling" in a:
            t["rope"]["scaling"] = {"kind": a["scaling"], "factor": float(a["factor"]),
                                    "low": float(a["low_freq_factor"]), "high": float(a["high_freq_factor"]),
                                    "orig": int(a["original_max_position"])}
        t["freqs"] = freqs(t["rope"]["theta"], t["head_dim"], t["rope"]["scaling"])
    t["positions"] = t["positions"] or "none"
    # Every other add with a parameter is a projection bias (out, MLP).
    for n in L0:
        if n["op"] == "add" and any(map(is_param, n["ins"])) and n["outs"][0] not in qkv_adds:
            bias.add("out_or_mlp")
    t["bias_qkv"] = "qkv" in bias
    t["bias_rest"] = "out_or_mlp" in bias
    t["experts"], t["router"] = None, None
    if "moe" in ops:
        # Shared experts (an MLP, or Qwen2-MoE's gated one-expert moe, beside
        # the routed experts): Megatron states them with
        # --moe-shared-expert-intermediate-size (and --moe-shared-expert-gate),
        # which ptdc's emitter does not write yet; until it does, such models
        # are compared as ones the emitter must refuse.
        if ops & {"swiglu", "silu", "mul", "gelu"} or sum(n["op"] == "moe" for n in L0) > 1:
            return not_decoder("shared experts beside the routed ones")
        moe = next(n for n in L0 if n["op"] == "moe")
        rt = next(n for n in L0 if n["op"] == "route")
        wg = ir.params[moe["ins"][2]]["dims"]
        t["mlp"], t["experts"], t["d_ff"] = "swiglu", ir.size(wg[0]), ir.size(wg[2])
        a = rt["attrs"]
        t["router"] = {"topk": int(a["topk"]), "score": a["score"], "norm": a.get("norm") == "true",
                       "scale": float(a.get("scale", 1) or 1), "groups": int(a.get("groups", 0)),
                       "group_topk": int(a.get("group_topk", 0)), "capacity": float(a.get("capacity", 0)),
                       "aux": float(a.get("aux", 0)), "zloss": float(a.get("zloss", 0))}
        hm = next(n for n in head["nodes"] if n["op"] == "matmul")
        t["tied"] = hm["ins"][1] == table
        return t
    if "swiglu" in ops or ("silu" in ops and "mul" in ops):
        t["mlp"] = "swiglu"
        act = next(n for n in L0 if n["op"] in ("swiglu", "mul"))
    elif "gelu" in ops:
        t["mlp"] = "gelu_tanh"  # ptdc's gelu is the tanh form (runtime/rt.h)
        act = next(n for n in L0 if n["op"] == "gelu")
    else:
        return not_decoder("an MLP that is neither SwiGLU nor GELU")
    t["d_ff"] = ir.size(ir.types[act["outs"][0]][1][-1])
    hm = next(n for n in head["nodes"] if n["op"] == "matmul")
    t["tied"] = hm["ins"][1] == table
    return t
