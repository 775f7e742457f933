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
    ("slice", "dim"), ("slice", "at"), ("concat", "dim"),
    ("moe", "act"),
    ("rmsnorm", "group_dims"),  # the Mamba-2 gated norm's groups (hybrid_truth)
    # multi-token prediction after the head (truth: mtp): the shifts and the later losses' weight
    ("shift", "by"), ("shift", "tail"), ("cross_entropy", "weight"),
}

NODE = re.compile(r"^  (?P<outs>[^=]+?) = (?P<op>[a-z_][a-z_0-9]*)\((?P<ins>[^)]*)\)(?P<attrs>.*?) : (?P<types>.*?)(  \{\w+\})?$")
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


def mla_of(ir, att):
    """Multi-head latent attention feeding att (DeepSeek-V3: q = concat(slice(Q),
    rope(slice(Q))), Q = norm(h Wqa) Wqb; k = concat(slice(KV), rope(slice(KVA))),
    KVA = h Wkva, KV = norm(slice(KVA)) Wkvb; v = slice(KV)): None when q is not
    a concat, a reason when the pattern breaks, else its sizes, latent norms,
    query weight and rope node."""
    P = lambda x: ir.producer.get(x)
    op = lambda n, o: n if n and n["op"] == o else None
    cq, ck, sv = op(P(att["ins"][0]), "concat"), op(P(att["ins"][1]), "concat"), op(P(att["ins"][2]), "slice")
    if not cq:
        return None
    qn, qr = op(P(cq["ins"][0]), "slice"), op(P(cq["ins"][1]), "rope")
    qrs = qr and op(P(qr["ins"][0]), "slice")
    kn, kr = ck and op(P(ck["ins"][0]), "slice"), ck and op(P(ck["ins"][1]), "rope")
    krs = kr and op(P(kr["ins"][0]), "slice")
    if not (qn and qrs and kn and krs and sv) or qn["ins"] != qrs["ins"] or kn["ins"] != sv["ins"]:
        return "attention inputs joined, but not as multi-head latent attention"
    at = lambda n: int(n["attrs"].get("at", 0))
    if at(qn) or at(kn) or at(qrs) != ir.size(qn["attrs"]["dim"]) or at(sv) != ir.size(kn["attrs"]["dim"]):
        return "latent attention's slices are not [nope | rope] and [k | v]"
    qb, kvb = op(P(qn["ins"][0]), "matmul"), op(P(kn["ins"][0]), "matmul")
    qnorm, kvnorm = qb and P(qb["ins"][0]), kvb and P(kvb["ins"][0])
    norms = [n for n in (qnorm, kvnorm) if n and n["op"] in ("rmsnorm", "layernorm")]
    qa = P(qnorm["ins"][0]) if qnorm in norms else qnorm
    kvs = op(P(kvnorm["ins"][0]) if kvnorm in norms else kvnorm, "slice")
    if not (qa and qa["op"] == "matmul" and kvs and kvs["ins"] == krs["ins"]):
        return "latent attention's projections are not Megatron-Core's"
    return {"sizes": {"q_lora": ir.size(ir.params[qa["ins"][1]]["dims"][-1]),
                      "kv_lora": ir.size(kvs["attrs"]["dim"]), "qk_nope": ir.size(qn["attrs"]["dim"]),
                      "qk_rope": ir.size(qrs["attrs"]["dim"]), "v_head": ir.size(ir.types[sv["outs"][0]][1][-1])},
            "norms": norms, "wq": qa["ins"][1], "rope": qr, "rope_dim": qrs["attrs"]["dim"]}


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
    t["pattern"], t["mamba"] = None, None
    if any(n["op"] == "ssd" for p in layers for n in p["nodes"]):
        return hybrid_truth(ir, t, layers, emb, head)

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
    L0 = layers[0]["nodes"]
    att = next((n for n in L0 if n["op"] == "attention"), None)
    mla = att and mla_of(ir, att)
    if isinstance(mla, str):
        return not_decoder(mla)
    if mla:
        allowed |= {"slice", "concat"}
    if ops - allowed:
        return not_decoder("layers compute " + ", ".join(sorted(ops - allowed)))
    t["mla"] = mla["sizes"] if mla else None
    table = next(n["ins"][1] for n in emb["nodes"] if n["op"] == "embedding")
    t["vocab"] = ir.size(ir.params[table]["dims"][0])
    t["d_model"] = ir.size(ir.params[table]["dims"][1])
    t["bf16"] = ir.params[table]["dtype"] == "bf16"
    t["positions"] = "learned" if any(n["op"] == "add" and any(map(is_param, n["ins"])) for n in emb["nodes"]) else None
    norms = [n for n in L0 if n["op"] in ("rmsnorm", "layernorm")]
    # A norm of each head's query or key (its output goes into rope or the
    # attention) is the q/k norm, not one of the layer's two.
    into_attn = {i for n in L0 if n["op"] in ("rope", "attention") for i in n["ins"]}
    qk_norms = [n for n in norms if n["outs"][0] in into_attn or (mla and n in mla["norms"])]
    norms = [n for n in norms if n not in qk_norms]
    if len(norms) != 2 or len({n["ins"][0] for n in norms}) < 2:
        return not_decoder("a parallel block (attention and MLP read one normalised layer input)")
    t["norm"] = norms[0]["op"]
    t["eps"] = float(norms[0]["attrs"]["eps"])
    att = next(n for n in L0 if n["op"] == "attention")
    t["causal"] = att["attrs"]["causal"] == "true"
    # one window on every layer, else the per-layer list (None: full attention; GPT-OSS alternates)
    wins = [next((int(n["attrs"]["window"]) if "window" in n["attrs"] else None)
                 for n in p["nodes"] if n["op"] == "attention") for p in layers]
    t["window"] = wins[0] if len(set(wins)) == 1 else tuple(wins)
    qd, kd = ir.types[att["ins"][0]][1], ir.types[att["ins"][1]][1]
    t["seq"], t["heads"], t["head_dim"] = ir.size(qd[1]), ir.size(qd[2]), ir.size(qd[3])
    t["kv_heads"] = ir.size(kd[2])
    bias, rope, qkv_adds = set(), None, set()

    normed = set()

    def back(x, what, j):
        """Step from attention input j back to its projection weight."""
        nonlocal rope
        n = ir.producer.get(x)
        if n and n["op"] == "add" and any(map(is_param, n["ins"])):
            bias.add(what)
            qkv_adds.add(n["outs"][0])
            n = ir.producer.get(next(i for i in n["ins"] if not is_param(i)))
        if n and n["op"] == "rope":
            rope = n
            return back(n["ins"][0], what, j)
        if n in qk_norms:
            normed.add(j)
            return back(n["ins"][0], what, j)
        return n["ins"][1] if n and n["op"] == "matmul" else None
    if mla:  # the latent norms stand for the q/k norm (Megatron-Core's qk_layernorm)
        wq, rope, normed = mla["wq"], mla["rope"], {0, 1} if len(mla["norms"]) == 2 else set()
    else:
        wq = back(att["ins"][0], "qkv", 0)
        back(att["ins"][1], "qkv", 1)
        back(att["ins"][2], "qkv", 2)
    if normed not in (set(), {0, 1}):
        return not_decoder("per-head norms of attention inputs %s (the frameworks norm q and k)" % sorted(normed))
    t["qk_norm"] = normed == {0, 1}
    t["init_std"] = ir.params[wq]["std"] if wq else None
    if rope:
        a = rope["attrs"]
        t["positions"] = t["positions"] or "rope"
        rot = mla["rope_dim"] if mla else qd[3]  # MLA rotates its rope part whole
        t["rope"] = {"theta": float(a["theta"]), "rot_full": a["rot"] == rot, "pos_seq": a["pos"] == qd[1],
                     "scaling": None}
        if "scaling" in a:
            t["rope"]["scaling"] = {"kind": a["scaling"], "factor": float(a["factor"]),
                                    "low": float(a["low_freq_factor"]), "high": float(a["high_freq_factor"]),
                                    "orig": int(a["original_max_position"])}
        t["freqs"] = freqs(t["rope"]["theta"], ir.size(rot), t["rope"]["scaling"])
    t["positions"] = t["positions"] or "none"
    # Every other add with a parameter is a projection bias (out, MLP).
    for n in L0:
        if n["op"] == "add" and any(map(is_param, n["ins"])) and n["outs"][0] not in qkv_adds:
            bias.add("out_or_mlp")
    t["bias_qkv"] = "qkv" in bias
    t["bias_rest"] = "out_or_mlp" in bias
    t["experts"], t["router"], t["d_expert"], t["shared"], t["moe_layers"] = None, None, None, None, None
    hm = next(n for n in head["nodes"] if n["op"] == "matmul")
    # Multi-token prediction: each later cross-entropy a depth, its weight the
    # per-depth share of the scaling factor; every depth reads the tokens and
    # the targets shifted by one more (Megatron-Core's roll_tensor).
    ces = [n for n in head["nodes"] if n["op"] == "cross_entropy"]
    shifts = sorted((n["ins"][0], int(n["attrs"]["by"]), n["attrs"].get("tail", "none"))
                    for n in head["nodes"] if n["op"] == "shift")
    t["mtp"] = None
    if len(ces) > 1:
        k = len(ces) - 1
        ws = {float(n["attrs"].get("weight", 1)) for n in ces[1:]}
        if len(ws) != 1 or shifts != sorted([("targets", d, "none") for d in range(1, k + 1)] +
                                            [("tokens", d, "zero") for d in range(1, k + 1)]):
            return not_decoder("later losses unlike multi-token prediction's (one weight, the tokens and "
                               "targets shifted 1..depths)")
        t["mtp"] = mtp_depths(ir, head, k, ws.pop())
    t["tied"] = hm["ins"][1] == table

    def mlp_of(nodes):
        """A dense layer's MLP: (kind, width) or None."""
        lops = {n["op"] for n in nodes}
        if "swiglu" in lops or ("silu" in lops and "mul" in lops):
            act = next(n for n in nodes if n["op"] in ("swiglu", "mul"))
            return "swiglu", ir.size(ir.types[act["outs"][0]][1][-1])
        if "gelu" in lops:  # ptdc's gelu is the tanh form (runtime/rt.h)
            act = next(n for n in nodes if n["op"] == "gelu")
            return "gelu_tanh", ir.size(ir.types[act["outs"][0]][1][-1])
        return None

    def gated(moe, nodes):
        """Qwen2-MoE's gated shared expert: a moe of one expert whose gate is
        route(topk=1, score=sigmoid, norm=false) of a projection and nothing else:
        sigmoid(h . w) times its MLP."""
        rt = next((n for n in nodes if moe["ins"][1] in n["outs"] and n["op"] == "route"), None)
        return (ir.size(ir.params[moe["ins"][2]]["dims"][0]) == 1 and rt is not None and
                rt["attrs"] == {"topk": "1", "score": "sigmoid", "norm": "false"})

    def moe_of(nodes):
        """An MoE layer: (experts, width, router attrs, shared expert) or a reason it is none."""
        moes = [n for n in nodes if n["op"] == "moe"]
        shared = None
        if len(moes) == 2:
            g = [gated(m, nodes) for m in moes]
            if g[0] == g[1]:
                return "two expert operators, not one of them a gated shared expert"
            sm, moe = (moes[0], moes[1]) if g[0] else (moes[1], moes[0])
            if mlp_of(nodes):
                return "a gated shared expert and an MLP beside the experts"
            shared = {"d_ff": ir.size(ir.params[sm["ins"][2]]["dims"][2]), "gate": True}
        elif len(moes) == 1:
            moe = moes[0]
            mlp = mlp_of(nodes)
            if mlp:
                if mlp[0] != "swiglu":
                    return "a GELU shared expert beside SwiGLU experts"
                shared = {"d_ff": mlp[1], "gate": False}
        else:
            return "%d expert operators" % len(moes)
        rt = next(n for n in nodes if moe["ins"][1] in n["outs"])
        wg = ir.params[moe["ins"][2]]["dims"]
        act = moe["attrs"].get("act", "swiglu")
        # the experts' biases: inside the activation (moe's inputs past its
        # weights: gated acts read 3 weights, relu2 2), and the down one, a
        # matmul of the gates by a parameter (models/gpt-oss.mdl)
        nw = 2 if act == "relu2" else 3
        inner = len(moe["ins"]) > 2 + nw
        down = any(n["op"] == "matmul" and n["ins"][0] == moe["ins"][1] and is_param(n["ins"][1]) for n in nodes)
        if inner != down:
            return "experts with a bias %s the activation only" % ("after" if down else "inside")
        return ir.size(wg[0]), ir.size(wg[2]), rt["attrs"], shared, act, inner

    kinds = []
    for p in layers:
        nodes = p["nodes"]
        if any(n["op"] == "moe" for n in nodes):
            r = moe_of(nodes)
            if isinstance(r, str):
                return not_decoder(r)
            kinds.append(("moe",) + r[:2] + (tuple(sorted(r[2].items())), repr(r[3])) + r[4:])
        else:
            r = mlp_of(nodes)
            if r is None:
                return not_decoder("an MLP that is neither SwiGLU nor GELU")
            kinds.append(("dense",) + r)
    if len({k for k in kinds if k[0] == "moe"}) > 1 or len({k for k in kinds if k[0] == "dense"}) > 1:
        return not_decoder("layers of one kind differ")
    dense = next((k for k in kinds if k[0] == "dense"), None)
    moe = next((k for k in kinds if k[0] == "moe"), None)
    t["d_ff"] = dense[2] if dense else None
    t["mlp"] = dense[1] if dense else moe[5] if moe else "swiglu"
    if not moe:
        return t
    if dense and dense[1] != moe[5]:
        return not_decoder("%s dense layers beside %s experts" % (dense[1], moe[5]))
    if moe[5] != "swiglu" and eval(moe[4]):
        return not_decoder("a SwiGLU shared expert beside %s experts" % moe[5])
    t["expert_bias"] = moe[6]
    t["moe_layers"] = [int(k[0] == "moe") for k in kinds]
    t["experts"], t["d_expert"], t["shared"] = moe[1], moe[2], eval(moe[4])
    a = dict(moe[3])
    groups = int(a.get("groups", 0))
    t["router"] = {"topk": int(a["topk"]), "score": a["score"], "norm": a.get("norm") == "true",
                   "scale": float(a.get("scale", 1) or 1), "groups": groups,
                   "group_topk": int(a.get("group_topk", 0)), "capacity": float(a.get("capacity", 0)),
                   "aux": float(a.get("aux", 0)), "zloss": float(a.get("zloss", 0)),
                   # a group's score (docs/moe.md, route step 2): its best, or its two best summed
                   "group_score": None if groups <= 1 else "top1" if a["score"] == "softmax" else "top2"}
    return t


def mtp_depths(ir, head, k, w, hybrid=False):
    """Multi-token prediction's k depths in the head piece: each from the
    tokens' shift to its cross-entropy. repeated: every later depth reads only
    parameters the first reads (Megatron's mtp_use_repeated_layer); for a
    hybrid the first depth's layers, a letter each as hybrid_truth's pattern,
    split where a norm reads the residual stream (not the gated norm's gate)."""
    nodes = head["nodes"]
    starts = [i for i, n in enumerate(nodes) if n["op"] == "shift" and n["ins"][0] == "tokens"]
    ends = [i for i, n in enumerate(nodes) if n["op"] == "cross_entropy"][1:]
    segs = [nodes[a:b + 1] for a, b in zip(starts, ends)]
    used = [{i for n in sg for i in n["ins"] if i in ir.params} for sg in segs]
    m = {"layers": k, "scale": w * k, "repeated": k > 1 and all(u <= used[0] for u in used[1:])}
    if hybrid:
        sg = segs[0]
        eh = next(j for j, n in enumerate(sg) if n["op"] == "concat") + 1
        norms = [j for j, n in enumerate(sg) if j > eh and n["op"] == "rmsnorm" and
                 ir.producer.get(n["ins"][0], {}).get("op") not in ("swiglu", "mul")]
        pat = ""
        for a, b in zip(norms[:-1], norms[1:]):  # the last norm is the depth's final norm
            ops = [n["op"] for n in sg[a:b]]
            pat += "M" if "ssd" in ops else "*" if "attention" in ops else "E" if "moe" in ops else "-"
        m["pattern"] = pat
    return m


def hybrid_truth(ir, t, layers, emb, head):
    """A hybrid of Mamba-2, attention, MoE and MLP layers (docs/hybrid.md),
    each layer piece one mixer: its kind letter ('M' an ssd, '*' attention,
    'E' experts, '-' an MLP), the Mamba-2 sizes (heads, head size, groups of B
    and C, state, convolution taps, the gated norm's groups and epsilon), the
    attention's, the experts' and the MLPs' as for a decoder."""
    is_param = lambda x: x in ir.params
    t.update({"qk_norm": False, "mla": None, "window": None, "causal": True, "positions": "none",
              "experts": None, "router": None, "d_expert": None, "shared": None, "moe_layers": None,
              "heads": None, "kv_heads": None, "head_dim": None, "d_ff": None, "mlp": None, "init_std": None})

    def not_decoder(why):
        t["decoder"], t["why"] = False, why
        return t

    table = next(n["ins"][1] for n in emb["nodes"] if n["op"] == "embedding")
    t["vocab"] = ir.size(ir.params[table]["dims"][0])
    t["d_model"] = ir.size(ir.params[table]["dims"][1])
    t["bf16"] = ir.params[table]["dtype"] == "bf16"
    if any(n["op"] == "add" for n in emb["nodes"]):
        t["positions"] = "learned"
    t["seq"] = None
    pattern, mamba, mlps, biases, eps, gnorm_eps = "", None, set(), False, set(), set()
    consumers = {}
    for p in layers:
        for n in p["nodes"]:
            for i in n["ins"]:
                consumers.setdefault(i, []).append(n)
    for p in layers:
        nodes = p["nodes"]
        ops = [n["op"] for n in nodes]
        ssd, att, moe = ops.count("ssd"), ops.count("attention"), ops.count("moe")
        act = sum(o in ("relu2", "gelu", "swiglu") for o in ops) + (("silu" in ops and "mul" in ops) and not ssd)
        count = ssd + att + (moe > 0) + (not ssd and not att and not moe and act > 0)
        if count != 1:
            return not_decoder("a layer piece of %d mixers (layers in pairs): Megatron's hybrid layers are one "
                               "mixer each" % count)
        kind = "M" if ssd else "*" if att else "E" if moe else "-"
        pattern += kind
        if "rope" in ops:
            return not_decoder("a rotary embedding in a hybrid (not compared)")
        for n in nodes:
            # a parameter added is a bias, but dt's (read by softplus)
            if n["op"] == "add" and any(map(is_param, n["ins"])) and \
                    not all(c["op"] == "softplus" for c in consumers.get(n["outs"][0], [])):
                biases = True
        norms = [n for n in nodes if n["op"] in ("rmsnorm", "layernorm")]
        if kind == "M":
            sd = next(n for n in nodes if n["op"] == "ssd")
            x, B = ir.types[sd["ins"][0]][1], ir.types[sd["ins"][3]][1]
            prod = lambda ds: eval("*".join(str(ir.size(d)) for d in ds) or "1")
            conv = next(n for n in nodes if n["op"] == "conv1d")
            gn = [n for n in norms if ir.producer.get(n["ins"][0], {}).get("op") in ("swiglu", "mul")]
            if len(gn) != 1 or len(norms) != 2 or len(conv["ins"]) != 3 or "softplus" not in ops:
                return not_decoder("a Mamba-2 layer that is not MambaMixer's (input norm, conv1d with a bias, "
                                   "softplus of dt plus dt_bias, one gated norm after the gate)")
            gd = int(gn[0]["attrs"].get("group_dims", 0))
            w = ir.params[gn[0]["ins"][1]]["dims"]
            m = {"heads": prod(x[2:-1]), "head_dim": ir.size(x[-1]), "groups": prod(B[2:-1]),
                 "state": ir.size(B[-1]), "conv": ir.size(ir.params[conv["ins"][1]]["dims"][-1]),
                 "gnorm_groups": prod(w[:gd]), "gnorm_eps": float(gn[0]["attrs"]["eps"])}
            if ir.params[sd["ins"][5]]["dims"] != ir.params[sd["ins"][2]]["dims"]:
                return not_decoder("D is not per head")
            if mamba not in (None, m):
                return not_decoder("Mamba-2 layers of different sizes")
            mamba = m
            norms = [n for n in norms if n not in gn]
        for n in norms:
            eps.add(float(n["attrs"]["eps"]))
        if kind == "*":
            a = next(n for n in nodes if n["op"] == "attention")
            qd, kd = ir.types[a["ins"][0]][1], ir.types[a["ins"][1]][1]
            sizes = (ir.size(qd[2]), ir.size(kd[2]), ir.size(qd[3]))
            if t["heads"] is not None and sizes != (t["heads"], t["kv_heads"], t["head_dim"]):
                return not_decoder("attention layers of different sizes")
            t["heads"], t["kv_heads"], t["head_dim"] = sizes
            t["seq"] = ir.size(qd[1])
            t["causal"] = a["attrs"]["causal"] == "true"
            if "window" in a["attrs"] or len(a["ins"]) != 3:
                return not_decoder("a hybrid's attention with a window or sinks (not compared)")
            q = ir.producer.get(a["ins"][0])
            t["init_std"] = ir.params[q["ins"][1]]["std"] if q and q["op"] == "matmul" else None
        for n in nodes:  # the MLPs' activations, dense and shared
            if kind in "-E" and n["op"] in ("relu2", "gelu", "swiglu"):
                w = ir.size(ir.types[n["outs"][0]][1][-1])
                mlps.add({"relu2": "relu2", "gelu": "gelu_tanh", "swiglu": "swiglu"}[n["op"]])
                if kind == "-":
                    if t["d_ff"] not in (None, w):
                        return not_decoder("MLP layers of different widths")
                    t["d_ff"] = w
                else:
                    t["shared"] = {"d_ff": w, "gate": False}
        if kind == "E":
            mo = next(n for n in nodes if n["op"] == "moe")
            rt = next(n for n in nodes if mo["ins"][1] in n["outs"])
            ra = rt["attrs"]
            wg = ir.params[mo["ins"][2]]["dims"]
            mlps.add(mo["attrs"].get("act", "swiglu"))
            groups = int(ra.get("groups", 0))
            router = {"topk": int(ra["topk"]), "score": ra["score"], "norm": ra.get("norm") == "true",
                      "scale": float(ra.get("scale", 1) or 1), "groups": groups,
                      "group_topk": int(ra.get("group_topk", 0)), "capacity": float(ra.get("capacity", 0)),
                      "aux": float(ra.get("aux", 0)), "zloss": float(ra.get("zloss", 0)),
                      "group_score": None if groups <= 1 else "top1" if ra["score"] == "softmax" else "top2"}
            e = (ir.size(wg[0]), ir.size(wg[-1]), router)
            if t["experts"] is not None and e != (t["experts"], t["d_expert"], t["router"]):
                return not_decoder("MoE layers that differ")
            t["experts"], t["d_expert"], t["router"] = e
            t["expert_bias"] = len(mo["ins"]) > 2 + (2 if mo["attrs"].get("act") == "relu2" else 3)
            # a latent MoE (docs/moe.md): the experts' input narrower than the hidden
            w = ir.size(ir.types[mo["ins"][0]][1][-1])
            lat = w if w != t["d_model"] else None
            if "moe_latent" in t and t["moe_latent"] != lat:
                return not_decoder("MoE layers of different latent widths")
            t["moe_latent"] = lat
    if len(mlps) > 1:
        return not_decoder("MLPs and experts of different activations (%s)" % ", ".join(sorted(mlps)))
    if len(eps) != 1:
        return not_decoder("norms of different epsilons")
    t["eps"] = eps.pop()
    t["mlp"] = mlps.pop() if mlps else None
    t["pattern"], t["mamba"] = pattern, mamba
    t["moe_layers"] = [int(c == "E") for c in pattern] if "E" in pattern else None
    t["bias_qkv"] = t["bias_rest"] = biases
    t["norm"] = next(n["op"] for p in layers for n in p["nodes"] if n["op"] in ("rmsnorm", "layernorm"))
    fn = next(n for n in head["nodes"] if n["op"] in ("rmsnorm", "layernorm"))
    if float(fn["attrs"]["eps"]) != t["eps"]:
        return not_decoder("a final norm of another epsilon")
    hm = next(n for n in head["nodes"] if n["op"] == "matmul")
    t["tied"] = hm["ins"][1] == table
    # Multi-token prediction (the pattern after '/'): the later losses, as truth reads a decoder's
    ces = [n for n in head["nodes"] if n["op"] == "cross_entropy"]
    t["mtp"] = None
    if len(ces) > 1:
        ws = {float(n["attrs"].get("weight", 1)) for n in ces[1:]}
        shifts = sorted((n["ins"][0], int(n["attrs"]["by"]), n["attrs"].get("tail", "none"))
                        for n in head["nodes"] if n["op"] == "shift")
        k = len(ces) - 1
        if len(ws) != 1 or shifts != sorted([("targets", d, "none") for d in range(1, k + 1)] +
                                            [("tokens", d, "zero") for d in range(1, k + 1)]):
            return not_decoder("later losses unlike multi-token prediction's (one weight, the tokens and "
                               "targets shifted 1..depths)")
        t["mtp"] = mtp_depths(ir, head, k, ws.pop(), hybrid=True)
    if t["seq"] is None:
        t["seq"] = ir.size(ir.types[hm["outs"][0]][1][1])
    return t
