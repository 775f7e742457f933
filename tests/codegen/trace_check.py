#!/usr/bin/env python3
"""trace_check.py: checks a trace of a training program (PTDC_TRACE=FILE) and
the predicted trace of its plan (ptdc --trace-plan FILE) against the Chrome
trace-event format and against each other (docs/trace.md).

  trace_check.py --measured FILE --world W --pp P --micro M --chunks V --steps S
                 [--plan FILE] [--kernels] [--split] [--in-stage NAME=DIR]... [--self-test]

--split: the schedule splits the backward (ZB-H1): every micro-batch's weight
gradients (W) are a stage span too. --in-stage NAME=DIR (with kernel spans):
kernel NAME runs inside every DIR stage span of its ranks and in no other
(ZB-H1's MoE: rt_moe_act_bwd_w=wgrad, rt_moe_act_bwd_b=bwd); DIR none: never. With --plan, each rank runs its stage
spans in the plan's order (the order plan/schedule.c gives both).

Each check prints a line; any failure ends with status 1. --self-test breaks
copies of the measured trace in the ways the checks exist for (a lost
backward, a rank's clock off by a second, a collective without bytes, two
overlapping spans on one lane, a rank missing, two stage spans run in the
other order: with --split, a weight gradient run before the backward it
follows) and fails unless the check
rejects every one: the checks themselves are shown to be able to fail.
Standard library only."""
import argparse
import copy
import json
import sys
from collections import defaultdict

COMM_CATS = ("collective", "send", "recv")
STAGE_CATS = ("forward", "backward", "weight gradients")
EPS = 0.01  # us: ts and dur are printed to 0.001 us each, so their sums round off by that much


class Bad(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Bad(what)


def schema(doc, name):
    """Every event: ph, ts, pid, tid (dur for X); metadata names pids and lanes."""
    need(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list),
         f"{name}: no traceEvents list")
    ev = doc["traceEvents"]
    need(ev, f"{name}: no events")
    for e in ev:
        for k in ("ph", "ts", "pid", "tid", "name"):
            need(k in e, f"{name}: an event lacks '{k}': {e}")
        need(isinstance(e["ts"], (int, float)), f"{name}: ts not a number: {e}")
        if e["ph"] == "X":
            need(isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0,
                 f"{name}: a complete event without dur >= 0: {e}")
        else:
            need(e["ph"] == "M", f"{name}: unexpected phase {e['ph']}: {e}")
    spans = [e for e in ev if e["ph"] == "X"]
    pnames = {e["pid"]: e["args"]["name"] for e in ev
              if e["ph"] == "M" and e["name"] == "process_name"}
    lanes = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in spans:
        need(e["pid"] in pnames, f"{name}: pid {e['pid']} has no process_name")
        need((e["pid"], e["tid"]) in lanes, f"{name}: lane {e['pid']}/{e['tid']} has no thread_name")
        if e.get("cat") in COMM_CATS:
            b = e.get("args", {}).get("bytes")
            need(isinstance(b, int) and b > 0, f"{name}: communication without bytes: {e}")
            need(isinstance(e["args"].get("group"), str), f"{name}: communication without group: {e}")
    return spans, pnames


def lanes_ok(spans, name):
    """Per lane, in file order: starts never go back, and a span either ends
    before the next starts or contains it (nesting)."""
    by = defaultdict(list)
    for e in spans:
        by[(e["pid"], e["tid"])].append(e)
    for lane, es in by.items():
        open_ = []
        for e in es:
            need(not open_ or e["ts"] >= open_[-1]["ts"] - EPS,
                 f"{name}: lane {lane}: '{e['name']}' starts before the span before it")
            while open_ and open_[-1]["ts"] + open_[-1]["dur"] <= e["ts"] + EPS:
                open_.pop()
            if open_:
                outer = open_[-1]
                need(e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + EPS,
                     f"{name}: lane {lane}: '{e['name']}' overlaps '{outer['name']}' without nesting")
            open_.append(e)


def stage_spans(spans):
    """(pp, chunk, mb, dir) -> count, per (pid, step)."""
    out = defaultdict(lambda: defaultdict(int))
    for e in spans:
        if e.get("cat") in STAGE_CATS:
            a = e["args"]
            out[(e["pid"], a["step"])][(a["pp"], a["chunk"], a["mb"], a["dir"])] += 1
    return out


def schedule_ok(spans, pp_of, steps, pp, micro, chunks, name, split=False):
    """Every pipeline rank (each of its pids) runs the forward and the
    backward (split: and the weight gradients) of every micro-batch and
    chunk once per step."""
    got = stage_spans(spans)
    dirs = ("fwd", "bwd", "wgrad") if split else ("fwd", "bwd")
    for pid, p in pp_of.items():
        want = {(p, c, m, d) for c in range(chunks) for m in range(micro) for d in dirs}
        for s in steps:
            have = got.get((pid, s), {})
            need(set(have) == want, f"{name}: pid {pid} step {s}: stage spans "
                 f"{sorted(set(want) - set(have))[:4]} missing, {sorted(set(have) - set(want))[:4]} extra")
            need(all(n == 1 for n in have.values()), f"{name}: pid {pid} step {s}: a stage span twice")
    return {k for v in got.values() for k in v}


def check_measured(doc, a):
    spans, pnames = schema(doc, "measured")
    need(set(pnames) == set(range(a.world)), f"measured: pids {sorted(pnames)} are not ranks 0..{a.world - 1}")
    lanes_ok(spans, "measured")
    pp_of = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "process_name":
            pp_of[e["pid"]] = e["args"]["pp"]
    need(sorted(set(pp_of.values())) == list(range(a.pp)), f"measured: pipeline ranks {sorted(set(pp_of.values()))}")
    steps = defaultdict(list)
    for e in spans:
        if e.get("cat") == "step":
            steps[e["pid"]].append(e)
    for pid in pnames:
        need(len(steps[pid]) == a.steps, f"measured: rank {pid} has {len(steps[pid])} step spans, not {a.steps}")
    # Step numbers continue a loaded checkpoint's: the traced ones, in order.
    numbers = sorted({e["args"]["step"] for e in spans if e.get("cat") in STAGE_CATS})
    need(len(numbers) == a.steps, f"measured: stage spans of steps {numbers}, not {a.steps} steps")
    kinds = schedule_ok(spans, pp_of, numbers, a.pp, a.micro, a.chunks, "measured", a.split)
    # Every stage span inside its rank's step span of the same number.
    for e in spans:
        if e.get("cat") in STAGE_CATS:
            st = steps[e["pid"]][numbers.index(e["args"]["step"])]
            need(st["ts"] - EPS <= e["ts"] and e["ts"] + e["dur"] <= st["ts"] + st["dur"] + EPS,
                 f"measured: '{e['name']}' of rank {e['pid']} lies outside its step")
    # Kernels (PTDC_TRACE_KERNELS) inside one of their rank's steps.
    for e in spans:
        if e.get("cat") == "kernel":
            need(any(st["ts"] - EPS <= e["ts"] and e["ts"] + e["dur"] <= st["ts"] + st["dur"] + EPS
                     for st in steps[e["pid"]]), f"measured: kernel '{e['name']}' of rank {e['pid']} outside the steps")
    if a.kernels:
        need(any(e.get("cat") == "kernel" and e["name"] == "cg_matmul" for e in spans), "measured: no cg_matmul kernel span")
    # Clocks: the k-th receive of a (src, dst, tag) ends after the k-th send
    # of it starts, within the ranks' measured clock errors.
    err = {e["pid"]: e["args"].get("clock_error_us", 0) for e in doc["traceEvents"]
           if e["ph"] == "M" and e["name"] == "process_name"}
    sends, recvs = defaultdict(list), defaultdict(list)
    for e in spans:
        if e.get("cat") in ("send", "recv"):
            k = (e["args"]["src"], e["args"]["dst"], e["args"]["tag"])
            (sends if e["cat"] == "send" else recvs)[k].append(e)
    need(sends.keys() == recvs.keys(), "measured: sends and receives name different (src, dst, tag)")
    pairs = 0
    for k in sends:
        need(len(sends[k]) == len(recvs[k]), f"measured: {k}: {len(sends[k])} sends, {len(recvs[k])} receives")
        for s, r in zip(sends[k], recvs[k]):
            tol = err[s["pid"]] + err[r["pid"]] + 1.0
            need(r["ts"] + r["dur"] + tol >= s["ts"],
                 f"measured: clocks: the receive on rank {r['pid']} ended {s['ts'] - r['ts'] - r['dur']:.1f} us "
                 f"before its send on rank {s['pid']} started ({k})")
            pairs += 1
    need(a.pp == 1 or pairs > 0, "measured: a pipeline without sends and receives")
    return kinds, pairs


def check_plan(doc, a):
    spans, pnames = schema(doc, "predicted")
    need(set(pnames) == set(range(a.pp)), f"predicted: pids {sorted(pnames)} are not pipeline ranks 0..{a.pp - 1}")
    lanes_ok(spans, "predicted")
    return schedule_ok(spans, {p: p for p in pnames}, [1], a.pp, a.micro, a.chunks, "predicted", a.split)


def stage_order(doc):
    """(pid, step) -> the (chunk, mb, dir) of its stage spans in time order."""
    out = defaultdict(list)
    for e in sorted((e for e in doc["traceEvents"] if e["ph"] == "X" and e.get("cat") in STAGE_CATS),
                    key=lambda e: e["ts"]):
        a = e["args"]
        out[(e["pid"], a["step"])].append((a["chunk"], a["mb"], a["dir"]))
    return out


def order_ok(measured, plan):
    """Every rank runs its stage spans in its pipeline rank's predicted order."""
    pp_of = {e["pid"]: e["args"]["pp"] for e in measured["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    want = {pid: ops for (pid, _), ops in stage_order(plan).items()}
    for (pid, step), ops in stage_order(measured).items():
        w = want.get(pp_of[pid], [])
        k = next((i for i, (x, y) in enumerate(zip(ops, w)) if x != y), min(len(ops), len(w)))
        need(ops == w, f"rank {pid} step {step}: stage span {k} is {ops[k] if k < len(ops) else None}, "
             f"the plan's {w[k] if k < len(w) else None} (chunk, mb, dir)")


def kernels_in(measured, rules):
    """--in-stage NAME=DIR: every kernel span NAME lies inside a stage span
    of its rank whose dir is DIR, and every DIR span of a rank that runs NAME
    holds one (ZB-H1's MoE W: rt_moe_act_bwd_w in each W, rt_moe_act_bwd_b in
    each B); DIR "none": no NAME span at all."""
    ev = [e for e in measured["traceEvents"] if e["ph"] == "X"]
    stages = [e for e in ev if e.get("cat") in STAGE_CATS]
    for rule in rules:
        name, d = rule.split("=")
        ks = [e for e in ev if e.get("cat") == "kernel" and e["name"] == name]
        if d == "none":
            need(not ks, f"measured: {len(ks)} '{name}' kernel spans, none expected")
            continue
        need(ks, f"measured: no '{name}' kernel span")
        held = defaultdict(int)
        for k in ks:
            st = [s for s in stages if s["pid"] == k["pid"] and s["ts"] - EPS <= k["ts"] and
                  k["ts"] + k["dur"] <= s["ts"] + s["dur"] + EPS]
            need(st and st[0]["args"]["dir"] == d, f"measured: '{name}' of rank {k['pid']} at {k['ts']:.1f} us "
                 f"runs in {st[0]['args']['dir'] if st else 'no stage span'}, not {d}")
            held[id(st[0])] += 1
        for pid in {k["pid"] for k in ks}:
            for s in stages:
                need(s["pid"] != pid or s["args"]["dir"] != d or held[id(s)] > 0,
                     f"measured: rank {pid}'s {d} span (chunk {s['args']['chunk']}, mb {s['args']['mb']}) runs no '{name}'")


def run(measured, plan, a):
    kinds, pairs = check_measured(measured, a)
    msg = (f"measured: {a.world} ranks, {a.steps} steps, {len(kinds)} (pp, chunk, mb, dir) stage spans "
           f"per step, {pairs} send/receive pairs in clock order")
    if a.in_stage:
        kernels_in(measured, a.in_stage)
        msg += "; kernels in their stages: " + ", ".join(a.in_stage)
    if plan is not None:
        pk = check_plan(plan, a)
        need(pk == kinds, f"predicted and measured stage spans differ: {sorted(pk ^ kinds)[:6]}")
        order_ok(measured, plan)
        msg += "; predicted: the same stage spans, each rank's in the same order"
    return msg


def self_test(measured, plan, a):
    ev = measured["traceEvents"]

    def first(pred):
        return next(i for i, e in enumerate(ev) if pred(e))

    def drop_backward(d):
        del d["traceEvents"][first(lambda e: e.get("cat") == "backward")]

    def skew_clock(d):  # the last rank's clock one second early
        w = max(e["pid"] for e in ev)
        for e in d["traceEvents"]:
            if e["pid"] == w and e["ph"] == "X":
                e["ts"] -= 1e6

    def no_bytes(d):
        del d["traceEvents"][first(lambda e: e.get("cat") in COMM_CATS)]["args"]["bytes"]

    def overlap(d):  # a forward ending 1 us into the next span on its lane
        i = first(lambda e: e.get("cat") == "forward")
        e = d["traceEvents"][i]
        nxt = next(x for x in d["traceEvents"][i + 1:] if x["pid"] == e["pid"] and x["tid"] == e["tid"])
        e["dur"] = nxt["ts"] - e["ts"] + 1
        nxt["dur"] = max(nxt["dur"], 2)

    def lose_rank(d):
        d["traceEvents"] = [e for e in d["traceEvents"] if e["pid"] != 1]

    def no_dur(d):
        del d["traceEvents"][first(lambda e: e["ph"] == "X")]["dur"]

    def misorder(d):  # two stage spans of one rank swapped in time (split: a W and the B before it)
        st = sorted((e for e in d["traceEvents"] if e["ph"] == "X" and e.get("cat") in STAGE_CATS
                     and e["pid"] == 0), key=lambda e: e["ts"])
        i = next(i for i in range(1, len(st)) if st[i]["args"]["dir"] != st[i - 1]["args"]["dir"] and
                 (not a.split or st[i]["args"]["dir"] == "wgrad"))
        x, y = st[i - 1], st[i]  # their names and args: the times stay consistent, the order is wrong
        for k in ("name", "cat", "args"):
            x[k], y[k] = y[k], x[k]

    def kernel_elsewhere(d):  # the first --in-stage kernel renamed as a kernel no stage span should hold
        name, _ = a.in_stage[0].split("=")
        k = d["traceEvents"][first(lambda e: e.get("cat") == "kernel" and e["name"] == name)]
        k["name"] = next((r.split("=")[0] for r in a.in_stage if r.endswith("=none")), "cg_matmul")
        if k["name"] == "cg_matmul":  # no forbidden one: drop a required one instead
            k["name"] = name + "_moved"

    cases = [drop_backward, no_bytes, overlap, lose_rank, no_dur]
    if a.in_stage:
        cases.append(kernel_elsewhere)
    if plan is not None:
        cases.append(misorder)
    if a.pp > 1:
        cases.append(skew_clock)
    for f in cases:
        d = copy.deepcopy(measured)
        f(d)
        try:
            run(d, plan, a)
        except Bad as e:
            print(f"self-test {f.__name__}: rejected ({e})")
            continue
        raise Bad(f"self-test {f.__name__}: the broken trace passed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", required=True)
    ap.add_argument("--plan")
    for k in ("world", "pp", "micro", "chunks", "steps"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--kernels", action="store_true", help="the trace has PTDC_TRACE_KERNELS's spans")
    ap.add_argument("--split", action="store_true", help="a split schedule (ZB-H1): W spans too")
    ap.add_argument("--in-stage", action="append", default=[], metavar="NAME=DIR",
                    help="kernel NAME runs in every DIR (fwd, bwd, wgrad) stage span of its ranks and nowhere else; "
                         "DIR none: never")
    a = ap.parse_args()
    try:
        docs = []
        for path in (a.measured, a.plan):
            if path is None:
                docs.append(None)
                continue
            try:
                with open(path) as f:
                    docs.append(json.load(f))
            except (OSError, ValueError) as e:
                raise Bad(f"{path}: not a JSON trace: {e}")
        print(run(docs[0], docs[1], a))
        if a.self_test:
            self_test(docs[0], docs[1], a)
    except Bad as e:
        print(f"FAIL: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
