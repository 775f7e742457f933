#!/usr/bin/env python3
"""Megatron-Bridge's published MoE runs (megatron_bridge_perf.csv, arch != dense)
against ptdc's megatron stack.

  bridge_moe.py PTDC SRC REF test     every row ptdc can express is planned as
                                      published (--stack megatron, every layout
                                      flag pinned, --ep): it must fit; the rest
                                      are listed as skipped with the reason
  bridge_moe.py PTDC SRC REF report   the same, with predicted tokens/s per GPU
                                      beside the published ones (a benchmark
                                      table, not a timed test)

A row is expressible when ptdc has the model (MODELS), a preset of the GPU
(GPUS) and the layout is one its 2-D meshes carry: no context parallelism or
Megatron-FSDP, EP 1 or a whole mesh axis (dp or tp), at most PLAN_MAX_CHUNKS
virtual stages. Its precision decides what the row checks: BF16 rows compare
throughput; FP8 rows (and the 25.09 rows whose precision is unstated, FP8 by
the page's footnote) are planned in BF16 as a memory sanity check, as
tests/cost/bridge.c does for the dense rows (FP8 keeps FP8 copies beside the
BF16 weights and some saved inputs in FP8, so a BF16 plan needs about what the
run had). Routing is force-balanced (moe_imbalance 1), as the runs were."""

import csv
import json
import os
import subprocess
import sys

# The CSV's model -> ptdc's file (relative to SRC) and what it lacks.
MODELS = {
    "Qwen3_30B_a3B": "tests/cost/models/qwen3-30b-a3b.mdl",
}
WHY_NOT = {
    "GPT OSS 120B": "GPT-OSS needs attention sinks and alternating sliding windows, which ptdc lacks",
    "DeepSeekV3": "DeepSeek-V3 needs multi-head latent attention (MLA), which ptdc lacks",
    "DeepSeekV4 Flash": "DeepSeek-V4 needs MLA and its own attention, which ptdc lacks",
    "Kimi_K2": "Kimi-K2 needs multi-head latent attention (MLA), which ptdc lacks",
    "Qwen3_235B_a22B": "no Qwen3-235B-A22B model file yet (models/qwen3-moe is being written)",
}
GPUS = {"H100": "h100-80gb"}
# What Megatron-Bridge's performance recipes set (as tests/cost/bridge.c):
# bf16 gradient reduction, Transformer Engine's fused cross-entropy, no
# fragmentation (expandable segments).
RECIPE = ["--stack", "megatron", "--stack-set", "grad_bytes=2", "--stack-set", "loss_fp32=no",
          "--stack-set", "grad_in_place=yes", "--stack-set", "frag_act=0", "--stack-set", "moe_imbalance=1"]
PLAN_MAX_CHUNKS = 16


def num(r, k, default=None):
    v = r[k].strip()
    return int(float(v)) if v else default


def skip_reason(r):
    if r["model"] not in MODELS:
        return WHY_NOT.get(r["model"], "no ptdc model of %s" % r["model"])
    if r["gpu"] not in GPUS:
        return "no ptdc preset of %s (a later issue: Blackwell)" % r["gpu"]
    if num(r, "cp", 1) != 1:
        return "context parallelism"
    if num(r, "fsdp", 0):
        return "Megatron-FSDP"
    tp, pp, ep, n = num(r, "tp", 1), num(r, "pp", 1), num(r, "ep", 1), num(r, "n_gpus")
    dp = n // (tp * pp)
    if ep not in (1, tp, dp):
        return "EP %d is neither 1, tp %d nor dp %d: ptdc's 2-D mesh folds EP over a whole axis" % (ep, tp, dp)
    v = num(r, "vp", 1) or 1
    if v > PLAN_MAX_CHUNKS:
        return "%d virtual stages (ptdc's programs take at most %d)" % (v, PLAN_MAX_CHUNKS)
    return None


def plan(ptdc, src, r):
    tp, pp, ep, n = num(r, "tp", 1), num(r, "pp", 1), num(r, "ep", 1), num(r, "n_gpus")
    v = num(r, "vp", 1) or 1
    args = [ptdc, os.path.join(src, MODELS[r["model"]]), "--gpus", str(n), "--gpu", GPUS[r["gpu"]],
            "--set", "seq=%s" % r["seq_len"], "--global-batch", r["global_batch"]] + RECIPE + [
        "--tp", str(tp), "--pp", str(pp), "--ep", str(ep), "--micro-batch", r["micro_batch"],
        "--recompute", "none", "--sp", "on" if tp > 1 else "off", "--zero", "1", "--plan-only", "--json"]
    args += ["--virtual-stages", str(v)] if v > 1 else ["--schedule", "1f1b"]
    p = subprocess.run(args, capture_output=True, text=True)
    try:
        return json.loads(p.stdout), p.stderr, args
    except ValueError:
        return None, p.stderr or p.stdout, args


def main():
    if len(sys.argv) != 5 or sys.argv[4] not in ("test", "report"):
        print(__doc__)
        return 2
    ptdc, src, ref, mode = sys.argv[1:]
    rows = [r for r in csv.DictReader(open(os.path.join(ref, "megatron_bridge_perf.csv"))) if r["arch"] != "dense"]
    fails, ran, skipped = [], 0, {}
    table = []
    for r in rows:
        label = "%s %s %sx%s %s tp%s pp%s ep%s vp%s mb%s gb%s" % (
            r["release"], r["model"], r["n_gpus"], r["gpu"], r["precision"], r["tp"], r["pp"], r["ep"],
            r["vp"] or 1, r["micro_batch"], r["global_batch"])
        why = skip_reason(r)
        if why:
            skipped.setdefault(why, []).append(label)
            continue
        ran += 1
        out, err, args = plan(ptdc, src, r)
        pred = (out or {}).get("predicted") or {}
        if not out or out.get("status") != "fits":
            fails.append("%s: not planned as published (%s): %s" % (
                label, (out or {}).get("status", "no answer"), err.strip().splitlines()[:1]))
            continue
        tok = pred["tokens_per_s"] / float(r["n_gpus"])
        table.append((label, r["precision"], float(r["tokens_per_s_per_gpu"]), tok, pred["peak_mem_bytes"] / 2 ** 30,
                      pred.get("alltoall_s", 0) / pred["step_time_s"]))
    if mode == "report" or fails:
        print("%-72s %9s %9s %7s %6s" % ("row", "published", "ptdc bf16", "mem GiB", "a2a"))
        for label, prec, pub, tok, mem, a2a in table:
            print("%-72s %9.0f %9.0f %7.1f %5.0f%%" % (label, pub, tok, mem, 100 * a2a))
        print("(published tokens/s per GPU at the row's precision; ptdc's in BF16: FP8 rows compare memory only)")
    for why, labels in sorted(skipped.items()):
        print("skipped %d: %s (e.g. %s)" % (len(labels), why, labels[0]))
    for f in fails:
        print("FAIL " + f)
    print("%d MoE rows: %d planned as published, %d skipped, %d failed" % (len(rows), ran, len(rows) - ran, len(fails)))
    if mode == "test" and ran == 0:
        print("FAIL no MoE row was expressible")
        return 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
