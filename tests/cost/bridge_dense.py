#!/usr/bin/env python3
"""Megatron-Bridge's published dense runs on Blackwell (megatron_bridge_perf.csv,
arch dense, gpu B200, B300, GB200 or GB300) against ptdc's megatron stack.

  bridge_dense.py PTDC SRC REF test     every row ptdc can express is planned as
                                        published (--stack megatron, every layout
                                        flag pinned, --gpu by the row's GPU,
                                        --precision by its label with the recipe
                                        below): none may be predicted out of
                                        memory, and the median |error| of the
                                        predicted tokens/s per GPU against the
                                        published, over all the rows (issue 33's
                                        criterion), must be within 15% (the
                                        medians per precision and per GPU are
                                        printed, not asserted: NVFP4's is above
                                        15%, docs/precision.md); then the search (layout
                                        free) runs for SEARCH_SUBSET, and its plan
                                        must be predicted at least as fast as the
                                        published layout pinned
  bridge_dense.py PTDC SRC REF report   the pinned table, without the searches
  bridge_dense.py PTDC SRC REF search   the pinned table and the search for every
                                        expressible row (bench/bridge_dense_search.sh;
                                        minutes of CPU: not a test)

Precision labels -> ptdc, from Megatron-Bridge's recipes
(src/megatron/bridge/training/mixed_precision.py) and its performance configs
(scripts/performance/configs/llama/*_workload_base_configs.py, which name the
Blackwell variants BF16, FP8_CS, FP8_MX and NVFP4):
  FP8 (NeMo 26.x) and FP8-CS (25.11): bf16_with_fp8_current_scaling_mixed:
      --fp8-recipe tensorwise (lp_scaling=current), --fp8-param-gather, every
      transformer layer in FP8 (the recipe keeps the first and last in bf16, the
      performance scripts turn that off: FP8_CS below);
  FP8-MX (25.11) and MXFP8 (26.x): bf16_with_mxfp8_mixed: --fp8-recipe mxfp8, all
      transformer layers, --fp8-param-gather (with the gradient buffer reused for
      the MXFP8 parameter all-gather);
  NVFP4: bf16_with_nvfp4_mixed: --fp4-recipe nvfp4, all transformer layers, no
      low-precision parameter gather (Transformer Engine's NVFP4BlockScaling
      defaults: the Hadamard transform on the weight gradient's operands, the
      megatron preset's nvfp4_rht);
  unstated (25.09): the page's footnote says FP8 per tensor outside the parentheses
      and MXFP8 inside; decided from Megatron-Bridge v0.1.0rc4's performance configs
      where they say it (unstated_label): inside is MXFP8, outside FP8-CS for 70B on
      GB200, the rest skipped (delayed or current scaling, one layout).
Megatron-FSDP rows (the fsdp column, LLaMA3-70B on 64 GB200/GB300 in FP8-CS:
llama3_70b_pretrain_64gpu_gb{200,300}_fp8cs_config in Megatron-Bridge's
src/megatron/bridge/perf_recipes/llama/gb{200,300}/llama3.py, and
LLAMA3_70B_PRETRAIN_CONFIG_GB{200,300}_FP8_CS_V1/V2 in the scripts/performance
configs before them): use_megatron_fsdp with data_parallel_sharding_strategy
optim_grads_params (--zero 3 under the megatron stack with zero_stages=0,1,3),
fsdp_double_buffer, and
cpu_offloading of the first cpu_offloading_num_layers layers' activations (40 on
GB200, 20 on GB300; stack key offload_act_layers, FSDP_OFFLOAD below).
Every row also gets what the performance recipes set for every run (as
tests/cost/bridge.c): bf16 gradient reduction, Transformer Engine's fused
cross-entropy, no allocator fragmentation (expandable segments). Nothing here is
fitted: the constants are those the BF16 and H100 FP8 tests use.

The search check re-plans each row with the same GPUs, model, sequence, global
batch and precision recipe, the layout left to the search (--stack megatron, so
the search's layouts are Megatron's), and counts the rows whose searched plan is
predicted at least as fast as the published layout pinned (within TIE)."""

import csv
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

MODELS = {"LLAMA3_8B": "models/llama3-8b.mdl", "LLAMA3_70B": "models/llama3-70b.mdl",
          "LLAMA3.1_405B": "models/llama3-405b.mdl"}
GPUS = {"B200": "b200", "B300": "b300", "GB200": "gb200", "GB300": "gb300"}
BASE = ["--stack", "megatron", "--stack-set", "grad_bytes=2", "--stack-set", "loss_fp32=no",
        "--stack-set", "grad_in_place=yes", "--stack-set", "frag_act=0"]
# The performance scripts' get_precision_config turns the recipe's BF16 first and last
# layers off ("Disable BF16 Transformer layers in the performance config":
# first_last_layers_bf16 = False in scripts/performance/utils/helpers.py at v0.1.0rc4 and
# v0.2.0, scripts/performance/utils/precision.py at v0.3.0 to v0.6.0, and
# src/megatron/bridge/perf_recipes/_common.py _perf_precision at 067f987df): every layer FP8.
FP8_CS = ["--precision", "fp8", "--stack-set", "lp_scaling=current",
          "--stack-set", "lp_bf16_first_layers=0", "--stack-set", "lp_bf16_last_layers=0",
          "--stack-set", "fp8_param_gather=yes"]
MXFP8 = ["--precision", "mxfp8", "--stack-set", "fp8_param_gather=yes"]
NVFP4 = ["--precision", "nvfp4", "--stack-set", "fp8_param_gather=no"]
RECIPES = {"BF16": ("bf16", ["--precision", "bf16"]), "FP8": ("fp8-cs", FP8_CS),
           "FP8-CS": ("fp8-cs", FP8_CS), "FP8-MX": ("mxfp8", MXFP8), "MXFP8": ("mxfp8", MXFP8),
           "NVFP4": ("nvfp4", NVFP4)}
LAYERS = {"LLAMA3_8B": 32, "LLAMA3_70B": 80, "LLAMA3.1_405B": 126}
# Layers whose activations Megatron-Bridge's FSDP recipes offload to the host, by (model, GPU).
FSDP_OFFLOAD = {("LLAMA3_70B", "GB200"): 40, ("LLAMA3_70B", "GB300"): 20}
PLAN_MAX_CHUNKS = 16
TARGET = 0.15
TIE = 0.005
SEARCH_TARGET = 0.90
# The test's searches (the full sweep is `search` mode): one row per model on
# a different GPU and format, the 8B ones cheap, the 70B and 405B ones about 10 s
# each in a Release build; and one Megatron-FSDP row.
SEARCH_SUBSET = [
    ("NeMo 25.11", "LLAMA3_8B", "GB300", "FP8-CS"),
    ("NeMo 25.11", "LLAMA3_8B", "B200", "FP8-MX"),
    ("NeMo 26.04", "LLAMA3_70B", "GB300", "NVFP4"),
    # Megatron-FSDP with activation offloading (search_prune.c and search_dp.c count the
    # offloaded activations off the GPU): 9 s in a Release build, 20 s under ASan
    ("NeMo 26.04", "LLAMA3_70B", "GB300", "FP8"),
]


# Rows whose printed layout is a misprint, planned as the release's config runs them:
# (why, the columns as the config has them). The config is Megatron-Bridge v0.4.0's (the
# first tag whose docs/performance-summary.md has the 26.02.01 table):
# scripts/performance/configs/llama/llama3_workload_base_configs.py,
# LLAMA3_70B_PRETRAIN_CONFIG_GB300_{NVFP4,FP8_MX}_V2 = BASE_LLAMA3_70B_CONFIG_GBS256 with
# pipeline_model_parallel_size 4 and virtual_pipeline_model_parallel_size 5, the rest
# WorkloadBaseConfig's defaults (scripts/performance/utils/utils.py: tp 1, mbs 1, no FSDP).
CONFIG_70B_GB300 = dict(tp="1", pp="4", vp="5", micro_batch="1", fsdp="", dp="16")
MISPRINTS = {
    ("NeMo 26.02.01", "LLAMA3_70B", "GB300", "NVFP4"): (
        "printed t1 p1 fsdp 0 mb 2 (no sharding, no pipeline, no recomputation: 70B's bf16 weights "
        "and gradients alone are 263 GiB of the 279); the same system's row is t1 p4 v5 mb 1 in 26.02, "
        "26.04 and 26.04.01 at 6798-7397 tok/s (this one 7002), as in the release's config",
        CONFIG_70B_GB300),
    ("NeMo 26.02.01", "LLAMA3_70B", "GB300", "MXFP8"): (
        "printed t1 p4 mb 2 without interleaving (1F1B keeps 4 micro-batches of 20 layers at 16k "
        "tokens, no recomputation); the same system's row is t1 p4 v5 mb 1 in 26.02, 26.04 and "
        "26.04.01 at 4596-4864 tok/s (this one 4798), as in the release's config",
        CONFIG_70B_GB300),
}


# NeMo 25.09 prints no precision: each cell is "per-tensor FP8 (block-scaled)", and its
# footnote says the parentheses' granularity on GB200 and B200 is 32x32, i.e. MXFP8.
# Megatron-Bridge v0.1.0rc4 (the first tag whose docs/performance-summary.md has the
# 25.09 table) runs its performance configs (scripts/performance/configs/llama3/
# llama3_{8b,70b}_llm_pretrain.yaml, llama31/llama31_405b_llm_pretrain.yaml, perf_matrix)
# with --fp8_recipe ds (per-tensor delayed, the default), cs (per-tensor current) or mx.
# A value inside the parentheses is fp8_mx: the only block-scaled recipe on Blackwell there,
# and where the layouts differ (70B and 405B on GB200) the row has fp8_mx's. Outside, a
# per-tensor value is fp8_cs only where the layout says so: 70B on GB200 (mbs 2, FSDP, 40
# layers offloaded is fp8_cs's entry; fp8_ds's is mbs 1 without offloading). Elsewhere
# fp8_ds and fp8_cs have one layout and the recipe is not known.
UNSTATED_SRC = "Megatron-Bridge v0.1.0rc4 scripts/performance/configs"


def unstated_label(r):
    """(label, None) for a 25.09 row whose recipe the configs decide, else (None, why)."""
    inside = "inside parentheses" in r["notes"]
    if inside and r["gpu"] in ("GB200", "B200"):
        return "MXFP8", None
    if not inside and (r["model"], r["gpu"], num(r, "fsdp", 0), r["micro_batch"]) == ("LLAMA3_70B", "GB200", 64, "2"):
        return "FP8-CS", None
    return None, ("precision 'unstated' (NeMo 25.09), per-tensor FP8: %s run this layout with "
                  "fp8_ds (the scripts' default) and fp8_cs alike, so the recipe is not known" % UNSTATED_SRC)


def num(r, k, default=None):
    v = r[k].strip()
    return int(float(v)) if v else default


def skip_reason(r):
    if r["model"] not in MODELS:
        return "no ptdc model of %s" % r["model"]
    if r["precision"] not in RECIPES:
        return ("precision '%s': the page does not print the recipe (its footnote implies FP8 per "
                "tensor or MXFP8, one for each value of a cell)" % r["precision"])
    if num(r, "fsdp", 0) and (r["model"], r["gpu"]) not in FSDP_OFFLOAD:
        return "Megatron-FSDP (fsdp %s) without a recipe in Megatron-Bridge's configs" % r["fsdp"]
    if (num(r, "vp", 1) or 1) > PLAN_MAX_CHUNKS:
        return "more than %d virtual stages" % PLAN_MAX_CHUNKS
    if (r["recompute"].strip() or "none") != "none":
        return "recompute %s" % r["recompute"]
    return None


def fsdp_args(r):
    """Megatron-FSDP's activation offloading: part of the recipe, so the search
    plans with it too (it applies to the layouts Megatron offloads in)."""
    n = FSDP_OFFLOAD.get((r["model"], r["gpu"])) if num(r, "fsdp", 0) else None
    return ["--stack-set", "zero_stages=0,1,3", "--stack-set", "offload_act_layers=%d" % n] if n else []


def common(src, r):
    return [os.path.join(src, MODELS[r["model"]]), "--gpus", r["n_gpus"], "--gpu", GPUS[r["gpu"]],
            "--set", "seq=%s" % r["seq_len"], "--global-batch", r["global_batch"]] + BASE + \
        RECIPES[r["precision"]][1] + fsdp_args(r)


def pinned_args(src, r):
    tp, pp, cp = num(r, "tp", 1), num(r, "pp", 1), num(r, "cp", 1) or 1
    v = num(r, "vp", 1) or 1
    sp = r["sp"].strip() or ("on" if tp > 1 else "off")
    args = common(src, r) + [
        "--tp", str(tp), "--pp", str(pp), "--cp", str(cp), "--micro-batch", r["micro_batch"],
        "--recompute", "none", "--sp", sp, "--zero", "3" if num(r, "fsdp", 0) else "1"]
    args += ["--virtual-stages", str(v)] if v > 1 else ["--schedule", "1f1b"]
    chunks, L = pp * v, LAYERS[r["model"]]
    if chunks > 1 and L % chunks:
        # Megatron-Bridge's llama31_405b_pretrain_config (recipes/llama/llama3.py),
        # the base of its performance configs, sets account_for_embedding_in_pipeline_split
        # and account_for_loss_in_pipeline_split: the embedding and the loss count
        # as one layer each, (L + 2) / chunks per chunk, one fewer in the first
        # and the last chunk (none at all when (L + 2) / chunks is 1: the first
        # chunk holds the embedding alone, the last the head and the loss alone).
        per = (L + 2) // chunks
        assert per * chunks == L + 2, r
        args += ["--pp-layers", ",".join(str(per - (c in (0, chunks - 1))) for c in range(chunks))]
    return args


def run(ptdc, args):
    t0 = time.time()
    p = subprocess.run([ptdc] + args + ["--plan-only", "--json"], capture_output=True, text=True)
    dt = time.time() - t0
    try:
        return json.loads(p.stdout), p.stderr, dt
    except ValueError:
        return None, p.stderr or p.stdout, dt


def label_of(r):
    return "%s %s %sx%s %s t%s p%s c%s v%s mb%s gb%s" % (
        r["release"].replace("NeMo ", ""), r["model"], r["n_gpus"], r["gpu"], r["precision"],
        r["tp"], r["pp"], r["cp"] or 1, r["vp"] or 1, r["micro_batch"], r["global_batch"])


def layout_of(out):
    par, ctx = out["parallel"], out.get("context") or {}
    return "t%d p%d c%d v%d dp%d mb%d z%d%s%s" % (
        par["tp"], par["pp"], ctx.get("cp", 1), par["virtual_stages"], par["dp"], par["micro_batch"],
        par["zero"], " sp" if par["sp"] else "", "" if par["recompute"] == "none" else " rc-" + par["recompute"])


def searches(ptdc, src, rows, jobs):
    """The search for each distinct (model, GPUs, GPU, sequence, batch, recipe) of rows."""
    keys = {}
    for r in rows:
        keys.setdefault(tuple(common(src, r)), r)
    args = list(keys)
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        res = list(ex.map(lambda a: run(ptdc, list(a)), args))
    return {a: res[i] for i, a in enumerate(args)}


def summary(name, ts):
    """One line of a table's summary: the median |error| of rows ts (dicts with err and
    label) and the worst; returns the median (bridge_moe.py prints its groups so too)."""
    med = statistics.median(abs(t["err"]) for t in ts)
    worst = max(ts, key=lambda t: abs(t["err"]))
    print("  %-8s %2d rows: median |error| %4.1f%%, worst %+6.1f%% (%s)" % (
        name, len(ts), 100 * med, 100 * worst["err"], worst["label"]))
    return med


def main():
    if len(sys.argv) != 5 or sys.argv[4] not in ("test", "report", "search"):
        print(__doc__)
        return 2
    ptdc, src, ref, mode = sys.argv[1:]
    rows = [r for r in csv.DictReader(open(os.path.join(ref, "megatron_bridge_perf.csv")))
            if r["arch"] == "dense" and r["gpu"] in GPUS]
    fails, table, skipped, ok_rows = [], [], {}, []
    for r in rows:
        label = label_of(r)
        if r["precision"] == "unstated":
            lab, why = unstated_label(r)
            if why:
                skipped.setdefault(why, []).append(label)
                continue
            r = dict(r, precision=lab)  # as decided from the configs (unstated_label)
            label += "=" + lab
            # The 70B GB200 cell prints MBS 2 once for both values, but its GA (16)
            # gives 128 / (dp 8 x 16) = 1 for the parenthesised layout, as fp8_mx's
            # entry (mbs 1) in the v0.1.0rc4 llama3_70b config: the GA column holds.
            ga, dp = num(r, "ga", 0), int(r["n_gpus"]) // (num(r, "tp", 1) * num(r, "pp", 1) * (num(r, "cp", 1) or 1))
            if ga and int(r["global_batch"]) % (dp * ga) == 0 and str(int(r["global_batch"]) // (dp * ga)) != r["micro_batch"]:
                r = dict(r, micro_batch=str(int(r["global_batch"]) // (dp * ga)))
                label += " (mb%s by its GA)" % r["micro_batch"]
        fix = MISPRINTS.get((r["release"], r["model"], r["gpu"], r["precision"]))
        if fix:
            r = dict(r, **fix[1])
            label += " misprint, as its config: t%(tp)s p%(pp)s v%(vp)s mb%(micro_batch)s" % fix[1]
        why = skip_reason(r)
        if why:
            skipped.setdefault(why, []).append(label)
            continue
        out, err, _ = run(ptdc, pinned_args(src, r))
        if not out or out.get("status") != "fits":
            fails.append("%s: predicted %s: %s" % (label, (out or {}).get("status", "no answer"),
                                                   (err.strip().splitlines() or [""])[0]))
            continue
        pred = out["predicted"]
        tok = pred["tokens_per_s"] / float(r["n_gpus"])
        pub = float(r["tokens_per_s_per_gpu"])
        table.append(dict(label=label + (" fsdp" if num(r, "fsdp", 0) else ""), r=r, pub=pub, tok=tok, err=tok / pub - 1,
                          mem=pred["peak_mem_bytes"] / 2 ** 30, cap=pred["capacity_bytes"] / 2 ** 30,
                          step=pred["step_time_s"], group=RECIPES[r["precision"]][0]))
        ok_rows.append(r)

    print("%-58s %9s %9s %7s %13s" % ("row (release model GPUs format layout)", "published",
                                        "ptdc", "error", "mem/cap GiB"))
    for t in table:
        print("%-58s %9.0f %9.0f %+6.1f%% %6.1f/%-6.1f" % (t["label"], t["pub"], t["tok"],
                                                             100 * t["err"], t["mem"], t["cap"]))
    for why, labels in sorted(skipped.items()):
        print("skipped %d: %s (e.g. %s)" % (len(labels), why, labels[0]))
    print("%d dense Blackwell rows: %d expressible and predicted, %d skipped, %d failed" % (
        len(rows), len(table), sum(len(v) for v in skipped.values()), len(fails)))

    if not table:
        print("FAIL no row was expressible")
        return 1
    print("by precision:")
    for g in sorted({t["group"] for t in table}):
        summary(g, [t for t in table if t["group"] == g])
    print("by GPU:")
    for g in sorted({t["r"]["gpu"] for t in table}):
        summary(g, [t for t in table if t["r"]["gpu"] == g])
    if any(num(t["r"], "fsdp", 0) for t in table):
        print("Megatron-FSDP:")
        summary("fsdp", [t for t in table if num(t["r"], "fsdp", 0)])
    med = summary("all", table)
    if mode == "test" and med > TARGET:
        fails.append("median |error| %.1f%% above %.0f%%" % (100 * med, 100 * TARGET))

    if mode in ("test", "search"):
        if mode == "test":
            want = set(SEARCH_SUBSET)
            pick = [t for t in table if (t["r"]["release"], t["r"]["model"], t["r"]["gpu"],
                                         t["r"]["precision"]) in want]
            if len(pick) != len(want):
                fails.append("the search subset names %d rows, %d are expressible" % (len(want), len(pick)))
        else:
            pick = table
        t0 = time.time()
        res = searches(ptdc, src, [t["r"] for t in pick], 1 if mode == "test" else 2)
        wall = time.time() - t0
        print("search (layout free) against the published layout pinned, %d rows, %d searches, "
              "%.0f s wall, per search %s s:" % (
                  len(pick), len(res), wall, "/".join("%.1f" % v[2] for v in res.values())))
        good = 0
        for t in pick:
            out, err, _ = res[tuple(common(src, t["r"]))]
            if not out or out.get("status") != "fits":
                print("  %-58s search: %s" % (t["label"], (out or {}).get("status", "no answer")))
                continue
            s_step = out["predicted"]["step_time_s"]
            ratio = t["step"] / s_step
            ok = s_step <= t["step"] * (1 + TIE)
            good += ok
            print("  %-58s searched %s: %+5.1f%% %s" % (t["label"], layout_of(out), 100 * (ratio - 1),
                                                         "" if ok else "SLOWER"))
        frac = good / float(len(pick)) if pick else 0
        print("searched plan at least as fast as the published (within %.1f%%): %d of %d (%.0f%%)" % (
            100 * TIE, good, len(pick), 100 * frac))
        if frac < SEARCH_TARGET:
            fails.append("search: %d of %d rows below %.0f%%" % (good, len(pick), 100 * SEARCH_TARGET))
    for f in fails:
        print("FAIL " + f)
    return 1 if fails and mode != "report" else 0


if __name__ == "__main__":
    sys.exit(main())
