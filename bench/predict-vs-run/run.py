#!/usr/bin/env python3
"""bench/predict-vs-run: close the loop on this machine's CPU ranks.

Calibrate (`ptdc calibrate`: K times, alternating with the first K - 1
rounds of runs, fitted as one with each measured point's median: --from ...),
then for every layout below: predict its step time and memory with the
measured cluster file (`ptdc --plan-only --json`), generate and run its
program (PTDC_PROFILE=1), take the median step time over steps 3..N in each
round (every layout once per round, in turn) and the median over rounds, the
peak resident memory, and compare. Also runs the planner's own choice for
each rank count (planned with that file, so in the last R rounds only) and
compares it with the fastest measured layout of that count (a choice that
generates a pinned layout's very program is that layout, measured once). A
pinned layout whose program the merged file changes (the search still picks
some shardings) is made again and its earlier rounds are dropped.

    bench/predict-vs-run/run.py [--build build] [--cluster FILE] [--steps N]
                                [--rounds R] [--calibrations K] [--work DIR]
                                [--only NAME,...] [--docs] [--reuse-runs [--model FILE]]

--cluster reuses a cluster file instead of calibrating; --docs rewrites the
table in docs/cost-model.md; --reuse-runs predicts again for the runs kept in
--work (--model: the model file those programs were made from, when it has
changed since). Targets (issue 10): median |error| <= 10%,
Spearman >= 0.9, the planner's choice within 5% of the fastest measured
layout, the arena equal to the predicted model states and activations, peak
RSS within 10% of the predicted total.

The machine's own speed is measured beside the layouts: a fixed probe
program (two ranks, one per core, a smaller model of the same kind) runs
before calibrating, after it, and between every two layouts' runs. Its
spread is the noise floor the errors above sit on (a shared VM's speed moves
with its neighbours). Scaling each run by the probe around it was tried and
is not used: on this VM the speed moves within seconds, so the probe around
a run does not predict the run (it halved the median spread of one program
over rounds and doubled the largest).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from stats import spearman, split_half  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))

# A LLaMA-style model sized for one step of 0.2-2 s on this machine's ranks:
# 4 layers of d_model 256, 8 heads of 32 (4 KV heads), SwiGLU 704, vocabulary
# 4096, sequences of 256, 16 per step.
MODEL = ["models/llama.mdl", "--set", "n_layers=4", "--set", "d_model=256", "--set", "n_heads=8",
         "--set", "n_kv_heads=4", "--set", "d_ff=704", "--set", "vocab=4096", "--set", "seq=256",
         "--set", "global_batch=16"]

# name, ranks, pins (every part pinned: a layout evaluated by hand).
def L(name, ranks, tp=1, pp=1, dp=1, mb=1, rc="none", sp="off", zero=0, sched="1f1b", v=1, cp=1,
      layers=None, form=None):
    a = ["--tp", str(tp), "--pp", str(pp), "--dp", str(dp), "--micro-batch", str(mb),
         "--recompute", rc, "--sp", sp, "--zero", str(zero), "--schedule", sched]
    if v > 1:
        a += ["--virtual-stages", str(v)]
    if cp > 1:
        a += ["--cp", str(cp)]
    if layers:
        a += ["--pp-layers", layers]
    if form:  # CP's form is the ILP's choice; the debug variable pins it (run() sets it)
        a += ["ENV:PTDC_CP_FORM=" + form]
    return (name, ranks, a)

LAYOUTS = [
    L("1r-mb4", 1, mb=4),
    L("1r-mb16", 1, mb=16),
    L("1r-mb2-full", 1, mb=2, rc="full"),
    L("1r-mb4-ffn", 1, mb=4, rc="ffn"),
    L("dp2-z0", 2, dp=2, mb=4),
    L("dp2-z1-mb2", 2, dp=2, mb=2, zero=1),
    L("dp2-z2", 2, dp=2, mb=4, zero=2),
    L("dp2-z3-mb8", 2, dp=2, mb=8, zero=3),
    L("dp2-full", 2, dp=2, mb=4, rc="full"),
    L("tp2", 2, tp=2, mb=4),
    L("tp2-sp", 2, tp=2, mb=4, sp="on"),
    L("pp2-1f1b", 2, pp=2, mb=2),
    L("pp2-zb", 2, pp=2, mb=2, sched="zb-h1"),
    L("pp2-v2", 2, pp=2, mb=2, sched="interleaved", v=2),
    L("dp4", 4, dp=4, mb=2),
    L("dp2-tp2", 4, dp=2, tp=2, mb=2),
    L("tp4", 4, tp=4, mb=4),
    L("pp2-dp2", 4, pp=2, dp=2, mb=2),
    L("pp4", 4, pp=4, mb=1),
    L("pp4-zb", 4, pp=4, mb=1, sched="zb-h1"),
    L("dp2-pp2-z1", 4, dp=2, pp=2, mb=4, zero=1),
    # Context parallelism (docs/context.md) and uneven pipeline stages.
    L("cp2", 2, cp=2, mb=4),
    L("dp2-cp2", 4, dp=2, cp=2, mb=2),
    L("cp2-tp2", 4, cp=2, tp=2, mb=4),
    L("cp2-a2a", 2, cp=2, mb=4, form="a2a"),
    L("cp2-ring", 2, cp=2, mb=4, form="ring"),
    L("cp2-gather", 2, cp=2, mb=4, form="gather"),
    # cp2-tp2 is the all-to-all form beside tp since the ILP may choose it (heads over tp, then
    # cp); the ring it was before, pinned:
    L("cp2-tp2-ring", 4, cp=2, tp=2, mb=4, form="ring"),
    L("pp2-1-3", 2, pp=2, mb=2, layers="1,3"),
    # End chunks of no layers: the embedding alone, and both ends interleaved.
    L("pp2-0-4", 2, pp=2, mb=2, layers="0,4"),
    L("pp2-v2-0-2-2-0", 2, pp=2, mb=2, sched="interleaved", v=2, layers="0,2,2,0"),
]


# The speed probe: two ranks (one per core) of a two-layer model of the same
# kind, micro-batch 4, a step of about 0.1 s; its median over steps 3..5.
PROBE = MODEL[:1] + ["--set", "n_layers=2", "--set", "d_model=256", "--set", "n_heads=8",
                     "--set", "n_kv_heads=4", "--set", "d_ff=704", "--set", "vocab=4096", "--set", "seq=256",
                     "--set", "global_batch=8", "--gpus", "2", "--dp", "2", "--tp", "1", "--pp", "1",
                     "--micro-batch", "4", "--recompute", "none", "--zero", "0"]
PROBE_STEPS = 5


def run(cmd, env=None, check=True, cwd=SRC):
    # A layout's "ENV:NAME=VALUE" items are environment, not arguments.
    extra = dict(c[4:].split("=", 1) for c in cmd if c.startswith("ENV:"))
    if extra:
        cmd = [c for c in cmd if not c.startswith("ENV:")]
        env = dict(env or os.environ, **extra)
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if check and p.returncode != 0:
        sys.exit("predict-vs-run: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stdout[-3000:]))
    return p


def parse_run(log, steps):
    times = [float(m.group(1)) / 1e3 for m in re.finditer(r"^step\s+\d+/\d+ .*?\|\s+([\d.]+) ms", log, re.M)]
    if len(times) < steps:  # (steps 0: start-up only, for the memory plan)
        sys.exit("predict-vs-run: the program printed %d steps of %d:\n%s" % (len(times), steps, log[-3000:]))
    prof = {}
    for m in re.finditer(r"^profile: (\S+)\s+(\S+)\s+([\d.eE+-]+)\s+([\d.eE+-]+)\s*$", log, re.M):
        prof[m.group(1)] = (m.group(2), float(m.group(3)), float(m.group(4)))
    rss = re.search(r"^profile: peak_rss_bytes (\d+) (\d+)", log, re.M)
    plan = []  # per pipeline rank: its memory plan's categories
    for m in re.finditer(r"^  pipeline rank \d+|^    (parameters|gradients|optimizer state|activations|workspace|total)\s+([\d.]+) MiB", log, re.M):
        if m.group(1) is None:
            plan.append({})
        elif plan:
            plan[-1][m.group(1)] = float(m.group(2))
    window = times[2:] if len(times) > 2 else times  # fewer steps: a memory check, not a timing
    return statistics.median(window) if window else 0.0, prof, float(rss.group(2)) if rss else 0.0, plan, times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--cluster")
    ap.add_argument("--steps", type=int, default=8)
    # 12: on this VM the rounds of one program spread 9-56% (docs/cost-model.md);
    # the medians of 14 (12 after the calibrations) rank the layouts alike
    # across halves of the rounds (reliability 0.94) where 5 did not (0.5-0.9).
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--calibrations", type=int, default=3,
                    help="calibrations alternating with the first rounds, fitted as one (median per point)")
    ap.add_argument("--reuse-runs", action="store_true",
                    help="predict again against the runs of WORK/results.json (no calibration, no runs)")
    ap.add_argument("--work", default="/tmp/ptdc-predict-vs-run")
    ap.add_argument("--model", help="with --reuse-runs: the model file the kept programs ran")
    ap.add_argument("--only")
    ap.add_argument("--quick-calibration", action="store_true")
    ap.add_argument("--docs", action="store_true")
    a = ap.parse_args()
    if a.calibrations < 1 or a.calibrations > 16 or a.rounds < 1:
        sys.exit("predict-vs-run: --calibrations expects 1 to 16, --rounds at least 1")
    ptdc = os.path.join(a.build, "driver", "ptdc")
    if not os.access(ptdc, os.X_OK):
        sys.exit("predict-vs-run: %s is not built (run scripts/setup.sh)" % ptdc)
    os.makedirs(a.work, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cluster = a.cluster
    t0 = time.time()
    if a.reuse_runs:
        return repredict(a, ptdc, env, t0)
    probe_dir = os.path.join(a.work, "speed-probe")
    run([ptdc] + PROBE + ["--target", "cpu", "-o", probe_dir], env)
    run(["make", "-s", "-C", probe_dir, "train"], env)

    def probe():
        log = run([os.path.join(probe_dir, "run.sh"), "--steps", str(PROBE_STEPS)], env).stdout
        return parse_run(log, PROBE_STEPS)[0]
    probes_cal = []  # the probe before and after each calibration

    def calibrate(k):
        rec = os.path.join(a.work, "records-%d" % k)
        shutil.rmtree(rec, ignore_errors=True)
        cmd = [ptdc, "calibrate", "-o", os.path.join(a.work, "cal-%d.cluster" % k), "--records", rec]
        if a.quick_calibration:
            cmd.append("--quick")
        print("== calibration %d of %d: %s" % (k, a.calibrations, " ".join(cmd)), flush=True)
        t = time.time()
        probes_cal.append(probe())
        p = subprocess.run(cmd, cwd=SRC, env=env, stderr=subprocess.PIPE, text=True)
        if p.returncode:
            sys.exit(p.stderr[-3000:])
        if k == 1:
            print("\n".join(l for l in p.stderr.splitlines() if not l.startswith("calibrate: ")))
        probes_cal.append(probe())
        print("   calibration %d took %.0f s; speed probe %.4f s before, %.4f s after" % (
            k, time.time() - t, probes_cal[-2], probes_cal[-1]), flush=True)
        return rec

    env_run = dict(env, PTDC_PROFILE="1")
    only = set(a.only.split(",")) if a.only else None
    records = []
    if not cluster:
        records.append(calibrate(1))
    # Every pinned layout's program (a pinned program does not depend on the
    # cluster file, only the prediction printed beside it does).
    gen_cluster = os.path.abspath(cluster or os.path.join(a.work, "cal-1.cluster"))
    jobs = []
    for name, ranks, pins in LAYOUTS:
        if only and name not in only:
            continue
        out = os.path.join(a.work, name)
        run([ptdc] + MODEL + ["--cluster", gen_cluster, "--gpus", str(ranks), "--target", "cpu"] + pins +
            ["-o", out], env)
        run(["make", "-s", "-C", out, "train"], env)
        jobs.append([name, ranks, " ".join(pins), None, out, pins])
    # Rounds: every layout once in turn, so that a slow minute of a shared
    # machine hits every layout alike; a layout's time is the median of its
    # rounds' medians.
    runs = {j[0]: [] for j in jobs}
    speed = {j[0]: [] for j in jobs}  # per round: the probe's time around the run
    state = {"before": probe()}

    def one_round(rnd, total, todo):
        # Every other round in reverse order: a machine that drifts steadily
        # through a round then favours no layout over another (its early
        # and late layouts swap places), where a fixed order gave the first
        # ones of every round the same head start.
        for name, ranks, layout, pred, out, _ in (todo if rnd % 2 else todo[::-1]):
            log = run([os.path.join(out, "run.sh"), "--steps", str(a.steps)], env_run).stdout
            runs[name].append(parse_run(log, a.steps))
            after = probe()
            speed[name].append((state["before"] + after) / 2)
            state["before"] = after
            print("round %d/%d %-12s %.3f s   (probe %.4f s)" % (rnd, total, name, runs[name][-1][0],
                                                                 speed[name][-1]), flush=True)
    # The machine's speed moves for minutes at a time (the probe); one
    # calibration meets it at one moment and sets every prediction's offset
    # (runs 6 and 7 of docs/cost-model.md: every row over, then every row
    # under). So the calibrations alternate with the first rounds, and the
    # predictions come from the median of each measured point over them
    # (ptdc calibrate --from ... --from ...).
    extra = a.calibrations - 1 if not cluster else 0
    total = a.rounds + extra
    for k in range(2, a.calibrations + 1) if not cluster else ():
        one_round(k - 1, total, jobs)
        records.append(calibrate(k))
        state["before"] = probes_cal[-1]
    if not cluster:
        cluster = os.path.join(a.work, "cpu.cluster")
        cmd = [ptdc, "calibrate", "-o", cluster] + [x for r in records for x in ("--from", r)]
        p = subprocess.run(cmd, cwd=SRC, env=env, stderr=subprocess.PIPE, text=True)
        if p.returncode:
            sys.exit(p.stderr[-3000:])
        if len(records) > 1:
            print("== the median of %d calibrations:" % len(records))
            print("\n".join(l for l in p.stderr.splitlines() if not l.startswith("calibrate: ")), flush=True)
    cluster = os.path.abspath(cluster)
    # A pinned layout leaves some choices to the search (an embedding's
    # sharding, say), so its program may differ under the merged file: it is
    # then made again, and the rounds that measured the other program dropped.
    for j in jobs if cluster != gen_cluster else ():
        old = j[4] + ".first"
        shutil.rmtree(old, ignore_errors=True)
        os.rename(j[4], old)
        run([ptdc] + MODEL + ["--cluster", cluster, "--gpus", str(j[1]), "--target", "cpu"] + j[5] +
            ["-o", j[4]], env)
        if same_program(old, j[4]):
            shutil.rmtree(j[4])
            os.rename(old, j[4])
            continue
        shutil.rmtree(old)
        run(["make", "-s", "-C", j[4], "train"], env)
        print("== %s: the merged calibration makes another program of it; its %d earlier round%s dropped"
              % (j[0], len(runs[j[0]]), "" if len(runs[j[0]]) == 1 else "s"), flush=True)
        runs[j[0]], speed[j[0]] = [], []
    # Predictions, and the planner's own choices, from that file.
    for j in jobs:
        base = [ptdc] + MODEL + ["--cluster", cluster, "--gpus", str(j[1]), "--target", "cpu"]
        j[3] = json.loads(run(base + j[5] + ["--plan-only", "--json"], env).stdout)["predicted"]
    for n in (1, 2, 4):
        name = "planner-%d" % n
        if only and name not in only:
            continue
        out = os.path.join(a.work, name)
        run([ptdc] + MODEL + ["--cluster", cluster, "--gpus", str(n), "--target", "cpu", "-o", out], env)
        with open(os.path.join(out, "plan.json")) as f:
            pj = json.load(f)
        par = pj.get("parallel", {})
        layout = " ".join("%s %s" % (k, v) for k, v in par.items() if not isinstance(v, (dict, list)))
        run(["make", "-s", "-C", out, "train"], env)
        jobs.append([name, n, layout, pj["predicted"], out, None])
        runs[name], speed[name] = [], []
    # The planner's choice is often one of the pinned layouts: the very same
    # program (its sources byte for byte). It is then that layout, measured
    # with it: run twice under two names, its two noisy estimates were
    # compared with each other (the same program 15-24% apart in one run).
    twin = {}
    for name, _, _, _, out, _ in jobs:
        if name.startswith("planner-"):
            twin[name] = next((j[0] for j in jobs if not j[0].startswith("planner-") and
                               same_program(out, j[4])), None)
    for rnd in range(extra + 1, total + 1):
        one_round(rnd, total, [j for j in jobs if not twin.get(j[0])])
    rows = []
    for name, ranks, layout, pred, out, _ in jobs:
        rs = runs[twin.get(name) or name]
        meas = statistics.median(r[0] for r in rs)
        _, prof, rss, plan, times = rs[0]
        rss = max(r[2] for r in rs)
        arena_pred, arena_prog = arena(pred, plan)
        row = dict(name=name, ranks=ranks, layout=layout, pred=pred["step_time_s"], meas=meas,
                   rounds=[r[0] for r in rs], err=pred["step_time_s"] / meas - 1,
                   probe=speed[twin.get(name) or name], probe_cal=probes_cal, same_as=twin.get(name),
                   pred_mem=pred["peak_mem_bytes"] / 2**20, rss=rss / 2**20, arena_pred=arena_pred,
                   arena_prog=arena_prog, prof=prof, pred_parts=pred, times=times)
        rows.append(row)
        print("%-12s %d ranks  predicted %7.3f s  measured %7.3f s  %+6.1f%%   memory predicted %7.1f MiB, "
              "peak RSS %7.1f MiB (%+5.1f%%)" % (name, ranks, row["pred"], meas, 100 * row["err"], row["pred_mem"],
                                                  row["rss"], 100 * (row["pred_mem"] / row["rss"] - 1) if rss else 0),
              flush=True)
    with open(os.path.join(a.work, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    report(rows, a, cluster, time.time() - t0)


def same_program(a, b):
    """Whether two generated program directories hold the same sources."""
    def sources(d):
        return sorted(f for f in os.listdir(d) if f.endswith((".c", ".h", ".cu")) or f in ("Makefile", "run.sh"))
    if sources(a) != sources(b):
        return False
    for f in sources(a):
        with open(os.path.join(a, f), "rb") as x, open(os.path.join(b, f), "rb") as y:
            if x.read() != y.read():
                return False
    return True


def arena(pred, plan):
    """The arena against the prediction, pipeline rank by pipeline rank: the
    rank where they differ most (predicted MiB, the program's MiB)."""
    arena_pred, arena_prog = 0.0, 0.0
    for i, mem in enumerate(pred["memory"]):
        ap = (mem["weights"] + mem["grads"] + mem["optimizer"] + mem["activations"]) / 2**20
        pg = sum(plan[i].get(k, 0) for k in ("parameters", "gradients", "optimizer state", "activations")) \
            if i < len(plan) else float("nan")
        if not (abs(pg - ap) <= abs(arena_prog - arena_pred)):
            arena_pred, arena_prog = ap, pg
    return arena_pred, arena_prog


def repredict(a, ptdc, env, t0):
    """The model changed, the measurements did not: every prediction again."""
    with open(os.path.join(a.work, "results.json")) as f:
        rows = json.load(f)
    cluster = a.cluster or os.path.join(a.work, "cpu.cluster")
    pins_of = {name: pins for name, _, pins in LAYOUTS}
    model = ([os.path.abspath(a.model)] if a.model else MODEL[:1]) + MODEL[1:]
    for r in rows:
        base = [ptdc] + model + ["--cluster", cluster, "--gpus", str(r["ranks"]), "--target", "cpu"]
        if r["name"] in pins_of:
            pred = json.loads(run(base + pins_of[r["name"]] + ["--plan-only", "--json"], env).stdout)["predicted"]
        else:
            pj = json.loads(run(base + ["--plan-only", "--json"], env).stdout)
            pred = pj["predicted"]
            par = pj.get("parallel", {})
            layout = " ".join("%s %s" % (k, v) for k, v in par.items() if not isinstance(v, (dict, list)))
            if layout != r["layout"]:
                print("%s: the planner now chooses %s (measured: %s); run without --reuse-runs to measure it"
                      % (r["name"], layout, r["layout"]))
        r["pred"], r["pred_parts"] = pred["step_time_s"], pred
        # The program's memory plan again (it prints it at start-up).
        log = run([os.path.join(a.work, r["name"], "run.sh"), "--steps", "0"], env).stdout
        r["arena_pred"], r["arena_prog"] = arena(pred, parse_run(log, 0)[3])
        r["err"] = r["pred"] / r["meas"] - 1
        r["pred_mem"] = pred["peak_mem_bytes"] / 2**20
        print("%-12s predicted %7.3f s  measured %7.3f s  %+6.1f%%" % (r["name"], r["pred"], r["meas"], 100 * r["err"]))
    report(rows, a, cluster, time.time() - t0)


def report(rows, a, cluster, elapsed):
    pinned = [r for r in rows if not r["name"].startswith("planner-")]
    has_probe = all("probe" in r for r in rows)
    lines = []
    head = "| layout | ranks | predicted s | measured s | rounds s | error |"
    rule = "|---|---|---|---|---|---|"
    if has_probe:
        head += " probe s |"
        rule += "---|"
    lines.append(head + " predicted MiB | peak RSS MiB | error |")
    lines.append(rule + "---|---|---|")
    for r in rows:
        rounds = r.get("rounds") or [r["meas"]]
        line = "| %s | %d | %.3f | %.3f | %s | %+.1f%% |" % (
            r["name"], r["ranks"], r["pred"], r["meas"], " ".join("%.3f" % x for x in rounds), 100 * r["err"])
        if has_probe:
            line += " %s |" % " ".join("%.3f" % p for p in r["probe"])
        lines.append(line + " %.1f | %.1f | %+.1f%% |" % (
            r["pred_mem"], r["rss"], 100 * (r["pred_mem"] / r["rss"] - 1) if r["rss"] else 0))
    summary = []
    if has_probe:
        ps = [p for r in rows for p in r["probe"]]
        cal = rows[0].get("probe_cal") or []
        summary.append("the machine: the speed probe (one fixed two-rank program) around the runs took %.3f s "
                       "median, %.3f..%.3f s (spread %.0f%%)%s" % (
                           statistics.median(ps), min(ps), max(ps), 100 * (max(ps) - min(ps)) / statistics.median(ps),
                           "; before and after each calibration %s s" % ", ".join(
                               "%.3f/%.3f" % (cal[i], cal[i + 1]) for i in range(0, len(cal) - 1, 2))
                           if cal else ""))
    for key, rkey, ekey, word in [("meas", "rounds", "err", "measured")]:
        spread = [(max(r[rkey]) - min(r[rkey])) / r[key] for r in pinned if len(r.get(rkey, [])) > 1]
        if spread:
            summary.append("%s: run-to-run spread of the same program (largest minus smallest round over the "
                           "median): median %.1f%%, largest %.1f%%" % (word, 100 * statistics.median(spread),
                                                                        100 * max(spread)))
        if pinned:
            summary.append("%s: median |error| of the step time over %d pinned layouts: %.1f%% (target <= 10%%)"
                           % (word, len(pinned), 100 * statistics.median(abs(r[ekey]) for r in pinned)))
            summary.append("%s: Spearman rank correlation, predicted vs measured: %.3f (target >= 0.9)"
                           % (word, spearman([r["pred"] for r in pinned], [r[key] for r in pinned])))
            # How far the machine lets a rank correlation go: the rounds
            # against themselves (bench/stats.py: split_half).
            if len(pinned) >= 3 and all(len(r.get(rkey, [])) >= 2 for r in pinned):
                h, rel, ceil = split_half([r[rkey] for r in pinned])
                summary.append("%s: the rounds against themselves (not a target): Spearman between the medians "
                               "of two random halves of each layout's rounds %.3f (median of 200 splits); all "
                               "the rounds' reliability %.3f (Spearman-Brown), so a model that knew every "
                               "program's true time would reach about %.2f against these medians"
                               % (word, h, rel, ceil))
        for r in rows:
            if not r["name"].startswith("planner-"):
                continue
            n = r["ranks"]
            same = [p for p in pinned if p["ranks"] == n] + [r]
            best = min(same, key=lambda p: p[key])
            summary.append("%s: planner's choice on %d rank%s: %.3f s, %+.1f%% from the fastest (%s, %.3f s) "
                           "(target <= 5%%)" % (word, n, "" if n == 1 else "s", r[key],
                                                100 * (r[key] / best[key] - 1), best["name"], best[key]))
    # A second reading: each round's time divided by the machine's speed at
    # that moment (the probe around it, over the probe's median), to show how
    # much of the rank correlation's shortfall is the machine's drift. The
    # targets are judged on the plain medians above.
    if has_probe and all(len(r["probe"]) == len(r.get("rounds") or []) for r in pinned):
        pm = statistics.median(p for r in rows for p in r["probe"])
        norm = [statistics.median(t * pm / q for t, q in zip(r["rounds"], r["probe"])) for r in pinned]
        summary.append("the machine's drift divided out (each round's time times the probe's median over the "
                       "probe around it; not a target): median |error| %.1f%%, Spearman %.3f" % (
                           100 * statistics.median(abs(r["pred"] / v - 1) for r, v in zip(pinned, norm)),
                           spearman([r["pred"] for r in pinned], norm)))
    if pinned:
        rss = [abs(r["pred_mem"] / r["rss"] - 1) for r in pinned if r["rss"]]
        if rss:
            summary.append("peak RSS vs predicted total: median %.1f%%, largest %.1f%% (target <= 10%%)"
                           % (100 * statistics.median(rss), 100 * max(rss)))
        arena = [abs(r["arena_prog"] - r["arena_pred"]) for r in pinned]
        summary.append("arena (parameters, gradients, optimizer state, activations) vs predicted: "
                       "largest difference %.3f MiB" % max(arena))
    for r in rows:
        if r["name"].startswith("planner-"):
            summary.append("planner's choice on %d rank%s: %s%s" % (
                r["ranks"], "" if r["ranks"] == 1 else "s", r["layout"],
                " (the program of %s, byte for byte: measured once, as that layout)" % r["same_as"]
                if r.get("same_as") else ""))
    text = "\n".join(lines) + "\n\n" + "\n".join("- " + s for s in summary) + "\n"
    print()
    print(text)
    print("(%.0f s in all; machine: %s, %d cores)" % (elapsed, os.uname().nodename, os.cpu_count()))
    if a.docs:
        doc = os.path.join(SRC, "docs", "cost-model.md")
        with open(doc) as f:
            d = f.read()
        b, e = "<!-- BEGIN predict-vs-run -->", "<!-- END predict-vs-run -->"
        if b not in d or e not in d:
            sys.exit("predict-vs-run: docs/cost-model.md lacks the %s ... %s markers" % (b, e))
        ncal = len(rows[0].get("probe_cal") or []) // 2
        body = ("\nMeasured with `bench/predict-vs-run/run.py --rounds %d --docs` on %s (%d cores), %d steps per "
                "layout and round, medians over steps 3..%d, then over the rounds (%d; the planner's own "
                "choices %d)%s.\n\n" % (a.rounds, os.uname().nodename, os.cpu_count(), a.steps, a.steps,
                                        a.rounds + max(ncal - 1, 0), a.rounds,
                                        "; the cluster file is the median of %d calibrations alternating "
                                        "with the first rounds" % ncal if ncal > 1 else "")) + text
        if a.reuse_runs:
            body = body.replace("\n\n|", " The predictions were made again for these runs with "
                                "`--reuse-runs` (the model changed after the runs, the runs did not).\n\n|", 1)
        d = d[:d.index(b) + len(b)] + body + d[d.index(e):]
        with open(doc, "w") as f:
            f.write(d)


if __name__ == "__main__":
    main()
