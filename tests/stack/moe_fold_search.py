#!/usr/bin/env python3
"""The megatron stack's framework search (--emit megatron) over Megatron-Core's
expert layouts, parallel folding included (docs/moe.md): with the dense layout
pinned and EP left free, the searched plan must be as fast as the fastest of
every (EP, ETP) Megatron-Core accepts, each pinned with --ep/--etp (EP dividing
the experts, ETP 1 or tp, EP x ETP dividing the dp x tp ranks; a layout
ptdc cannot lay out is refused, never searched), and its plan.json expert mesh
must multiply out to its degrees.

  moe_fold_search.py PTDC SRC

Cases: Qwen3-235B-A22B on 256 B300s at tp 1, pp 8, dp 32, where EP 2 below DP
(groups of 2 consecutive dp ranks) is the fastest that fits; Qwen3-30B-A3B on 32
H100s at tp 1, pp 4, dp 8, where no folded EP is; and on 16 H100s at tp 2, pp 2,
dp 4, where ETP tp and EP across dp x tp are among the candidates. The first
must pick a folded EP and the second must not (each case's claim is printed),
so both branches of the search are exercised."""

import json
import math
import os
import subprocess
import sys

COMMON = ["--stack", "megatron", "--precision", "bf16", "--stack-set", "moe_imbalance=1", "--micro-batch", "1",
          "--zero", "1", "--schedule", "1f1b", "--emit", "megatron", "--plan-only", "--json"]
CASES = [
    ("qwen3-235b-a22b.mdl", ["--gpus", "256", "--gpu", "b300", "--set", "seq=4096", "--global-batch", "8192",
                             "--tp", "1", "--pp", "8", "--sp", "off", "--pp-layers", "11,12,12,12,12,12,12,11"],
     1, 32, True),
    ("qwen3-30b-a3b.mdl", ["--gpus", "32", "--gpu", "h100-80gb", "--tp", "1", "--pp", "4", "--sp", "off"],
     1, 8, False),
    ("qwen3-30b-a3b.mdl", ["--gpus", "16", "--gpu", "h100-80gb", "--tp", "2", "--pp", "2", "--sp", "on"],
     2, 4, None),
]
EXPERTS = 128  # both models' num_experts (models/qwen3-*.mdl)


def plan(ptdc, src, model, args, extra):
    p = subprocess.run([ptdc, os.path.join(src, "models", model)] + args + COMMON + extra,
                       capture_output=True, text=True)
    try:
        return json.loads(p.stdout)
    except ValueError:
        sys.exit("FAIL %s %s: no JSON answer (exit %d): %s" % (model, " ".join(extra), p.returncode,
                                                               p.stderr.strip()))


def mesh_of(d):
    e = d["experts"]
    def prod(axes):
        return math.prod(a["degree"] for a in axes)
    return e, prod(e["ep_axes"]), prod(e["etp_axes"]), prod(e["expert_dp_axes"])


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ptdc, src = sys.argv[1:]
    fails = []
    for model, args, tp, dp, want_folded in CASES:
        name = "%s on %s %s, tp %d dp %d" % (model, args[1], args[3], tp, dp)
        got = plan(ptdc, src, model, args, [])
        if got.get("status") != "fits":
            fails.append("%s: the search answered %s" % (name, got.get("status")))
            continue
        best, how = None, []
        for ep in (e for e in range(1, dp * tp + 1) if (dp * tp) % e == 0 and EXPERTS % e == 0):
            for etp in sorted({1, tp}):
                if (dp * tp) % (ep * etp):
                    continue
                d = plan(ptdc, src, model, args, ["--ep", str(ep), "--etp", str(etp)])
                step = d["predicted"]["step_time_s"] if d.get("status") == "fits" else None
                how.append("ep %d etp %d: %s" % (ep, etp, "%.3f s" % step if step else d.get("status")))
                if step and (best is None or step < best[0]):
                    best = (step, ep, etp)
        e, ep, etp, edp = mesh_of(got)
        step = got["predicted"]["step_time_s"]
        folded = any(a["part"] != "whole" for a in e["ep_axes"]) or len(e["ep_axes"]) > 1
        print("%s: searched ep %d etp %d expert-dp %d (%s) %.3f s; pinned %s" % (
            name, e["ep"], e["etp"], e["expert_dp"], ", ".join("%s %d %s" % (a["axis"], a["degree"], a["part"])
                                                                for a in e["ep_axes"]) or "-", step, "; ".join(how)))
        if best is None:
            fails.append("%s: no pinned EP fits" % name)
        elif step > best[0] * (1 + 1e-9):
            fails.append("%s: the search's %.4f s is slower than ep %d etp %d pinned, %.4f s" % (
                name, step, best[1], best[2], best[0]))
        if (ep, etp, edp) != (e["ep"], e["etp"], e["expert_dp"]) or e["ep"] * e["etp"] * e["expert_dp"] != dp * tp:
            fails.append("%s: the expert mesh %s does not multiply out to ep %d, etp %d, expert-dp %d" % (
                name, e, e["ep"], e["etp"], e["expert_dp"]))
        if want_folded is not None and folded != want_folded:
            fails.append("%s: the case is meant to %s a folded EP, the search picked %s" % (
                name, "pick" if want_folded else "not pick", e["ep_axes"]))
    for f in fails:
        print("FAIL " + f)
    print("FAIL" if fails else "ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
