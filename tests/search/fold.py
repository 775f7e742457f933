#!/usr/bin/env python3
"""tests/search/fold.py: ptdc's own search folds expert parallelism below DP
(docs/moe.md, "Parallel folding") where it pays, and only there.

    python3 tests/search/fold.py PTDC SRC

Each case searches with EP free, then pins every alternative EP (--ep N:
a whole axis, or a divisor of dp below it, which is folding) with the rest
of the layout as the case pins it, and checks that the search's plan is
predicted at least as fast as each pinned one (their predictions are the
same cost model's), that the EP it chose is the one expected for the case's
physical reason, and that the pinned EP equal to the searched one gives the
same step. It prints every prediction.

- Qwen3-30B-A3B (128 experts) on 32 H100s (4 nodes of 8), tp 1, pp 1: the
  data-parallel axis spans the nodes, so EP = dp is an all-to-all across 4
  nodes over InfiniBand; EP 1 keeps every expert on every rank, which fits
  only with ZeRO-3 and full recomputation. EP of a few consecutive dp ranks
  exchanges inside a node over NVLink: the search folds (EP below DP, inside
  one node).
- Mixtral 8x7B on 32 H100s, tp 1: EP = dp needs dp <= 8 (8 experts), hence a
  pipeline of 4; EP 1 replicates 45B expert parameters, hence pp 8. EP 8 of
  the 32 dp ranks keeps one node's ranks per EP group and no pipeline: folds.
- Qwen3-30B-A3B on 32 H100s, tp 1, pp free: with a pipeline of 4 the
  experts fit replicated (EP 1), no token leaves its rank and the bubble of
  128 micro-batches is small; every folded EP pays an all-to-all and the
  search keeps EP 1 (folding loses).

A search that never folds fails the first two cases; one that folds where
it loses (or whose bound prunes the folded plans unsoundly) fails by the
step comparison.
"""
import json
import os
import subprocess
import sys
import tempfile


def plan(ptdc, src, args):
    r = subprocess.run([ptdc, os.path.join(src, args[0])] + args[1:] + ["--plan-only", "--json"],
                       capture_output=True, text=True, timeout=600)
    d = json.loads(r.stdout)
    if r.returncode != 0:
        return None, d
    return d["predicted"]["step_time_s"], d


def describe(d):
    x = d["experts"]
    parts = ",".join("%s/%s %d" % (a["axis"], a["part"], a["degree"]) for a in x["ep_axes"]) or "-"
    p = d["parallel"]
    return "dp %d pp %d ep %d [%s] zero %d mb %d recompute %s" % (
        p["dp"], p["pp"], x["ep"], parts, p["zero"], p["micro_batch"], p["recompute"])


def case(ptdc, src, name, base, alts, want_fold, gpn=8):
    bad = 0
    step, d = plan(ptdc, src, base)
    if step is None:
        print("FAIL %s: the search found no plan: %s" % (name, d))
        return 1
    ep = d["experts"]["ep"]
    inner = [a for a in d["experts"]["ep_axes"] if a["part"] == "inner"]
    print("%s: searched %.4f s  %s" % (name, step, describe(d)))
    folded = bool(inner)
    if folded != want_fold:
        print("FAIL %s: the search %s EP (ep %d), expected %s" % (
            name, "folded" if folded else "did not fold", ep, "folding" if want_fold else "no folding"))
        bad += 1
    if folded and ep > gpn:
        print("FAIL %s: the folded EP group of %d spans nodes of %d" % (name, ep, gpn))
        bad += 1
    for alt in alts:
        n, more = (alt, []) if isinstance(alt, int) else (alt[0], list(alt[1:]))
        pin = " ".join(["--ep", str(n)] + more)
        s, e = plan(ptdc, src, base + pin.split())
        if s is None:
            print("  %-14s no plan (%s)" % (pin, e.get("error", e.get("status"))))
            continue
        kind = "folded" if any(a["part"] == "inner" for a in e["experts"]["ep_axes"]) else "whole axis"
        print("  %-14s %.4f s  %s (%s)" % (pin, s, describe(e), kind))
        if s < step * (1 - 1e-9):
            print("FAIL %s: %s is predicted faster (%.4f s) than the searched plan (%.4f s)" % (
                name, pin, s, step))
            bad += 1
        if n == ep and not more and abs(s - step) > 1e-9 * step:
            print("FAIL %s: %s (the searched EP) predicts %.4f s, the search %.4f s" % (name, pin, s, step))
            bad += 1
    return bad


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ptdc, src = sys.argv[1], sys.argv[2]
    bad = 0
    h100 = ["--gpus", "32", "--gpu", "h100-80gb", "--tp", "1"]
    bad += case(ptdc, src, "qwen3-30b-a3b, 32 h100, tp 1, pp 1 (folds)",
                ["models/qwen3-30b-a3b.mdl"] + h100 + ["--pp", "1"], [1, 2, 4, 8, 16, 32], True)
    bad += case(ptdc, src, "mixtral-8x7b, 32 h100, tp 1 (folds)",
                ["models/mixtral-8x7b.mdl"] + h100, [1, 2, 4, 8, (8, "--dp", "8")], True)
    bad += case(ptdc, src, "qwen3-30b-a3b, 32 h100, tp 1 (keeps ep 1)",
                ["models/qwen3-30b-a3b.mdl"] + h100, [1, 2, 4, 8, 16], False)
    # plan.txt shows the searched plan's expert mesh, each group on its axes.
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([ptdc, os.path.join(src, "models/mixtral-8x7b.mdl")] + h100 +
                       ["--plan-only", "-o", out], capture_output=True, timeout=600)
        txt = open(os.path.join(out, "plan.txt")).read()
        want = "ep 8 over axis 1 (dp inner, 8); etp 1; expert-dp 4 over axis 0 (dp outer, 4)"
        if want not in txt:
            print("FAIL plan.txt lacks the expert mesh '%s'" % want)
            bad += 1
    print("FAIL" if bad else "ok fold")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
