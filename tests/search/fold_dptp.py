#!/usr/bin/env python3
"""tests/search/fold_dptp.py: ptdc's own search exchanges the experts across
dp x tp (Megatron-Core's parallel folding with ETP 1, docs/moe.md) where it
pays, and only there.

    python3 tests/search/fold_dptp.py PTDC SRC

Qwen3-30B-A3B (128 experts, 95% of its 30.5B parameters) on one node of 8
H100s:

- tp 2, pp 1 pinned (dp 4), the rest searched: the experts do not fit at
  ZeRO-1 over tp alone (64 a rank) and EP 4 over dp needs ZeRO-3 (weights
  gathered every micro-batch) or the experts' width split over tp too. EP 8
  across dp x tp holds 16 whole experts a rank, exchanges tokens by one
  all-to-all inside the node (NVLink) and reduces no expert gradient: the
  search must take it (two expert-mesh axes, dp and tp), be at least as fast
  as every other --ep pinned, and equal --ep 8 pinned.
- the layout free: a pipeline of 4 lets 64 experts a rank fit (EP 2 over
  tp, no data parallelism), so no token crosses a dp rank and the search
  keeps that; --ep 8 (across dp 4 x tp 2 at pp 1) is slower.

A search that cannot plan EP across dp x tp fails the first case; one that
takes it where it loses, or misses a better plan it could pin, fails by the
step comparison. Each run is a fraction of a CPU second.
"""
import json
import os
import subprocess
import sys


def plan(ptdc, src, args):
    r = subprocess.run([ptdc, os.path.join(src, "models/qwen3-30b-a3b.mdl"), "--gpus", "8", "--gpu",
                        "h100-80gb"] + args + ["--plan-only", "--json"], capture_output=True, text=True,
                       timeout=300)
    try:
        d = json.loads(r.stdout)
    except ValueError:
        return None, {"error": "no JSON answer (status %d): %s" % (r.returncode, r.stderr.strip()[-300:])}
    return (d["predicted"]["step_time_s"] if r.returncode == 0 else None), d


def describe(d):
    p, x = d["parallel"], d["experts"]
    axes = ",".join("%s %d" % (a["axis"], a["degree"]) for a in x["ep_axes"]) or "-"
    return "dp %d tp %d pp %d sp %s zero %d mb %d recompute %s ep %d [%s]" % (
        p["dp"], p["tp"], p["pp"], p["sp"], p["zero"], p["micro_batch"], p["recompute"], x["ep"], axes)


def across(d):
    return d["experts"]["ep"] == 8 and len(d["experts"]["ep_axes"]) == 2


def main():
    ptdc, src = sys.argv[1], sys.argv[2]
    bad = 0
    for name, base, want, alts in (
            ("tp 2, pp 1", ["--tp", "2", "--pp", "1"], True, [1, 2, 4, 8]),
            ("free", [], False, [8])):
        step, d = plan(ptdc, src, base)
        if step is None:
            print("FAIL %s: no plan: %s" % (name, d))
            bad += 1
            continue
        print("%s: searched %.4f s  %s" % (name, step, describe(d)))
        if across(d) != want:
            print("FAIL %s: the search %s EP across dp x tp" % (name, "took" if across(d) else "did not take"))
            bad += 1
        for ep in alts:
            s, e = plan(ptdc, src, base + ["--ep", str(ep)])
            if s is None:
                print("  --ep %-3d no plan (%s)" % (ep, e.get("error", e.get("status"))))
                continue
            print("  --ep %-3d %.4f s  %s" % (ep, s, describe(e)))
            if s < step * (1 - 1e-9):
                print("FAIL %s: --ep %d is predicted faster than the search's plan" % (name, ep))
                bad += 1
            if want and ep == 8 and abs(s - step) > 1e-9 * step:
                print("FAIL %s: --ep 8 pinned gives %.4f s, the search %.4f s" % (name, s, step))
                bad += 1
    print("fold_dptp: %d failures" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
