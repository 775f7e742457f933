#!/usr/bin/env python3
"""The searches under --stack megatron never choose a layout that ran out
of memory in the LLaMA-13B sweep (tests/cost/ref/layouts_llama13b_seq2048_64xA100.csv).

For each of the sweep's kernel configurations (attention: torch, megatron_fused,
flash1, flash2; RMSNorm kernel fused or not), with its code base's differences
as docs/stacks.md states them and its fixed dimensions (no sequence
parallelism, the distributed optimizer, 1F1B), both searches answer:
ptdc's own (--plan-only) and the framework's (--emit megatron). The chosen
tp, pp, micro-batch and recomputation are looked up among the sweep's rows of
that kernel configuration; a row that ran out of memory fails the test. A
choice the sweep did not run is reported, not judged; at least half must be
runs the sweep made, so the test keeps its teeth.

usage: sweep_search.py PTDC SRC"""

import csv
import json
import os
import subprocess
import sys

ATTN = {"torch": ("eager", True), "megatron_fused": ("fused_softmax", True), "flash1": ("flash1", False),
        "flash2": ("flash2", False)}


def main():
    ptdc, src = os.path.abspath(sys.argv[1]), sys.argv[2]
    os.chdir(src)
    rows = list(csv.DictReader(open("tests/cost/ref/layouts_llama13b_seq2048_64xA100.csv")))
    base = ("models/llama2-13b.mdl --set vocab=128000 --set seq=2048 --gpus 64 --global-batch 2048 "
            "--sp off --zero 1 --schedule 1f1b --stack megatron --stack-set grad_bytes=2 "
            "--stack-set grad_accum_unfused=yes --stack-set swiglu_unfused=yes").split()
    fails, judged, total = [], 0, 0
    for impl, (kernel, materialized) in ATTN.items():
        for rms in ("1", "0"):
            args = base + ["--stack-set", "attention_kernel=" + kernel,
                           "--stack-set", "norm_unfused=" + ("no" if rms == "1" else "yes")]
            if materialized:
                args += ["--attention", "materialized"]
            # Megatron-LM runs no FlashAttention-1: --emit megatron refuses that stack
            for how in (["--plan-only"], ["--emit", "megatron"])[: 1 if impl == "flash1" else 2]:
                p = subprocess.run([ptdc] + args + how + ["--json"], capture_output=True, text=True)
                ans = json.loads(p.stdout)
                total += 1
                what = "%s rmsnorm_kernel=%s %s" % (impl, rms, " ".join(how))
                if ans["status"] != "fits":
                    fails.append("%s: no plan (%s)" % (what, ans["status"]))
                    continue
                L = ans["parallel"]
                cp = ans.get("context", {}).get("cp", 1)  # the sweep ran no context parallelism
                rc = {"none": "none", "full": "every_layer"}.get(L["recompute"])
                match = [r for r in rows if cp == 1 and r["attention_impl"] == impl and r["rmsnorm_kernel"] == rms and
                         int(r["tp"]) == L["tp"] and int(r["pp"]) == L["pp"] and
                         int(r["micro_batch"]) == L["micro_batch"] and r["activation_checkpointing"] == rc]
                lay = "%stp %d pp %d mb %d recompute %s" % ("cp %d " % cp if cp > 1 else "", L["tp"], L["pp"],
                                                            L["micro_batch"], L["recompute"])
                if not match:
                    print("--   %s: %s (not a layout the sweep ran)" % (what, lay))
                    continue
                judged += 1
                status = match[0]["status"]
                ran = [r for r in rows if r["attention_impl"] == impl and r["rmsnorm_kernel"] == rms and
                       r["status"] == "ok"]
                best = max(float(r["mfu"]) for r in ran)
                print("%s %s: %s, which the sweep measured: %s (its best run: %.3f)" % (
                    "ok  " if status == "ok" else "FAIL", what, lay,
                    status if status != "ok" else "MFU %.3f" % float(match[0]["mfu"]), best))
                if status != "ok":
                    fails.append("%s chose %s, which ran out of memory in the sweep" % (what, lay))
    if judged * 2 < total:
        fails.append("only %d of %d choices are layouts the sweep ran" % (judged, total))
    for f in fails:
        print("FAIL " + f)
    print("%d choices, %d judged against the sweep, %d failures" % (total, judged, len(fails)))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
