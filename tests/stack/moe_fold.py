#!/usr/bin/env python3
"""Megatron-Core's parallel folding under --stack megatron (docs/moe.md,
"Parallel folding"): Qwen3-235B-A22B on 256 B300s, pp 8, tp 1, dp 32, pinned
with EP 8 and 16 (groups of consecutive dp ranks: EP below DP) and EP 32 (the
whole dp axis), answered as JSON.

  moe_fold.py PTDC SRC

Checks what follows from the layout, whatever the cost model's constants:
- the experts' weights divide by EP, the rest does not: pipeline rank 0's
  weight bytes are D + X / ep, so W8 - W16 = 2 (W16 - W32);
- ZeRO-1 shards the experts' optimizer state over expert-DP (dp / ep ranks)
  and the rest over all dp ranks: every rank holds 1/dp of each, the same
  bytes at every EP (sharding the experts over all 32 dp ranks instead would
  give X / (ep dp));
- the all-to-all runs inside a node at EP 8 (8 B300s per NVLink domain) and
  across 2 and 4 nodes at EP 16 and 32: its time grows with EP although
  every rank sends the same rows."""

import json
import os
import subprocess
import sys


def answer(ptdc, src, ep):
    args = [os.path.join(src, "models/qwen3-235b-a22b.mdl"), "--gpus", "256", "--gpu", "b300",
            "--set", "seq=4096", "--global-batch", "8192", "--stack", "megatron", "--precision", "bf16",
            "--stack-set", "moe_imbalance=1", "--tp", "1", "--pp", "8", "--micro-batch", "1",
            "--recompute", "none", "--sp", "off", "--zero", "1", "--schedule", "1f1b",
            "--pp-layers", "11,12,12,12,12,12,12,11", "--ep", str(ep), "--plan-only", "--json"]
    p = subprocess.run([ptdc] + args, capture_output=True, text=True)
    d = json.loads(p.stdout)
    if d.get("status") != "fits":
        sys.exit("FAIL ep %d: %s %s" % (ep, d.get("status"), p.stderr.strip()))
    return d


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ptdc, src = sys.argv[1:]
    fails = []
    a = {ep: answer(ptdc, src, ep) for ep in (8, 16, 32)}
    for ep, d in a.items():
        e = d["experts"]
        if (e["ep"], e["expert_dp"], d["parallel"]["dp"]) != (ep, 32 // ep, 32):
            fails.append("ep %d: the plan reports ep %d, expert-dp %d, dp %d" % (
                ep, e["ep"], e["expert_dp"], d["parallel"]["dp"]))
    m = {ep: a[ep]["predicted"]["memory"][0] for ep in a}
    w = {ep: m[ep]["weights"] for ep in m}
    if abs((w[8] - w[16]) - 2 * (w[16] - w[32])) > 1e-6 * w[8] or w[16] <= w[32]:
        fails.append("weights per GPU %s do not fall as D + X / ep" % w)
    o = {ep: m[ep]["optimizer"] for ep in m}
    if max(o.values()) - min(o.values()) > 1e-6 * o[8]:
        fails.append("optimizer state per GPU %s differs with EP: the experts' ZeRO group is not "
                     "expert-DP" % o)
    t = {ep: a[ep]["predicted"]["alltoall_s"] for ep in a}
    if not 0 < t[8] < t[16] < t[32]:
        fails.append("all-to-all seconds %s do not grow with the nodes the group spans" % t)
    print("weights %s, optimizer %s, all-to-all %s" % (w, o, t))
    for f in fails:
        print("FAIL " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
