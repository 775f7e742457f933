#!/usr/bin/env python3
"""bench/gpu/train.py: a ~1.1B LLaMA trained by the generated CUDA program on
this machine's GPU, measured beside ptdc's prediction for the same plan.

  bench/gpu/train.py [--build DIR] [--cluster FILE] [--steps N] [--global-batch B]
  bench/gpu/train.py --sweep [--cluster FILE] ...   pinned layouts, ranked

For the datasheet preset of the GPU found (--gpu from nvidia-smi's name) and,
with --cluster, for a measured cluster file (`ptdc calibrate --target cuda`),
ptdc plans the model on one GPU and emits the CUDA program; the program runs
N steps twice: plain (the step time: median of steps 3..N) and with
PTDC_PROFILE=1 (each runtime call synchronised and timed: the GEMM share).
Prints predicted and measured step time, tokens/s and MFU (the cost model's
formula: tokens/s x (6N + 12 L H Q T) / peak, docs/cost-model.md) and the
profile's largest calls. Without a usable GPU prints "SKIPPED: <reason>" and
exits 77.

--sweep: the same model under pinned layouts of one GPU (micro-batch 1-16,
recompute none/selective/ffn/full): every program is built first (in
parallel), then run one after another; prints each layout's predicted and
measured step time, the median absolute error and the Spearman rank
correlation (the predict-vs-run statistics of docs/cost-model.md).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from stats import spearman  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# TinyLlama-1.1B's shape (LLaMA-2 architecture): 22 layers, 2048 wide, 32
# heads (4 KV heads there; here all 32), SwiGLU 5632, 2048 tokens.
MODEL = ["models/llama.mdl", "--set", "n_layers=22", "--set", "d_model=2048", "--set", "n_heads=32",
         "--set", "d_ff=5632", "--set", "seq=2048"]


def gpu_name():
    """(name, compute capability as in sm_NN, None) of the first GPU, or
    (None, None, why not)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, None, "nvidia-smi: %s" % e
    if out.returncode or not out.stdout.strip():
        return None, None, "nvidia-smi fails: %s" % (out.stderr or out.stdout).strip().splitlines()[:1]
    name, _, cap = out.stdout.strip().splitlines()[0].rpartition(",")
    return name.strip(), cap.strip().replace(".", ""), None


def preset(name):
    n = name.upper()
    if "H200" in n:
        return "h200"
    if "H100" in n:
        return "h100-80gb"
    if "A100" in n:
        return "a100-40gb" if "40GB" in n else "a100-80gb"
    return None


def run(cmd, env=None, timeout=None):
    p = subprocess.run(cmd, cwd=SRC, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        sys.exit("train.py: %s failed (exit %d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout[-2000:],
                                                          p.stderr[-3000:]))
    return p.stdout


def steps_of(log):
    return [float(m.group(1)) / 1e3 for m in re.finditer(r"^step\s+\d+/\d+ .*?\|\s+([\d.]+) ms", log, re.M)]


# (micro-batch 16 without recomputation is refused: predicted 79.1 GiB of 77.3
# usable on an 80 GB card; selective equals none under flash attention.)
SWEEP = [(1, "none"), (2, "none"), (4, "none"), (8, "none"), (2, "ffn"), (4, "ffn"), (16, "ffn"),
         (1, "full"), (4, "full"), (16, "full")]


def run_sampling_memory(cmd, env):
    """Runs cmd while nvidia-smi samples the GPU's used memory every 100 ms;
    returns (stdout, the largest MiB seen)."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                            "-lms", "100"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        out = run(cmd, env, timeout=900)
    finally:
        smi.terminate()
    seen = [float(x) for x in smi.communicate()[0].split() if x.replace(".", "", 1).isdigit()]
    return out, max(seen) if seen else 0.0


def native_arch(out, sm):
    """Builds a generated program for this GPU's architecture (sm) alone (the
    Makefile names sm_80 and sm_90): half the nvcc time, the same code."""
    if not sm.isdigit():
        return
    mk = os.path.join(out, "Makefile")
    with open(mk) as f:
        text = f.read()
    text = re.sub(r"(-gencode arch=compute_\d+,code=sm_\d+ ?)+", "-gencode arch=compute_%s,code=sm_%s " % (sm, sm), text)
    with open(mk, "w") as f:
        f.write(text)


def sweep(a, ptdc, env, cases, sm):
    jobs = []
    for mb, rc in SWEEP:
        if a.only and rc not in a.only.split(","):
            continue
        pins = ["--micro-batch", str(mb), "--recompute", rc]
        base = [ptdc] + MODEL + ["--gpus", "1", "--global-batch", str(a.global_batch)] + pins
        pj = [json.loads(run(base + machine + ["--plan-only", "--json"], env))["predicted"] for _, machine in cases]
        preds = [p["step_time_s"] for p in pj]
        mem = pj[0]["peak_mem_bytes"] / 2**20
        out = os.path.join(a.work, "sweep-mb%d-%s" % (mb, rc))
        run(base + cases[0][1] + ["--target", "cuda", "-o", out], env)
        native_arch(out, sm)
        jobs.append(("mb %d %s" % (mb, rc), preds, out, mem))
    builds = [subprocess.Popen(["make", "-s", "-C", out, "train"], cwd=SRC, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _, _, out, _ in jobs]
    for b, (name, _, _, _) in zip(builds, jobs):
        if b.wait():
            sys.exit("train.py: building %s failed:\n%s" % (name, b.stderr.read().decode()[-2000:]))
    rows = []
    for name, preds, out, mem in jobs:
        log, used = run_sampling_memory([os.path.join(out, "run.sh"), "--steps", str(a.steps)], env)
        meas = statistics.median(steps_of(log)[2:])
        rows.append((name, preds, meas))
        print("%-14s measured %.3f s  " % (name, meas) + "  ".join(
            "%s %.3f s (%+.1f%%)" % (label.split()[0], p, 100 * (p / meas - 1)) for (label, _), p in zip(cases, preds))
            + "   GPU memory predicted %.0f MiB, nvidia-smi peak %.0f MiB (%+.1f%%)"
            % (mem, used, 100 * (mem / used - 1) if used else 0), flush=True)
    for i, (label, _) in enumerate(cases):
        errs = [abs(r[1][i] / r[2] - 1) for r in rows]
        print("%s: median |error| %.1f%%, largest %.1f%%, Spearman %.3f over %d layouts" % (
            label, 100 * statistics.median(errs), 100 * max(errs),
            spearman([r[1][i] for r in rows], [r[2] for r in rows]), len(rows)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--cluster", help="a measured cluster file (ptdc calibrate --target cuda)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--work", default="/tmp/ptdc-bench-gpu-train")
    ap.add_argument("--sweep", action="store_true", help="pinned layouts of one GPU, ranked")
    ap.add_argument("--only", help="--sweep: the layouts whose recompute policy is in this comma list")
    a = ap.parse_args()
    name, sm, why = gpu_name()
    if name is None:
        print("SKIPPED: %s" % why)
        sys.exit(77)
    gpu = preset(name)
    ptdc = os.path.join(a.build, "driver", "ptdc")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    print("device: %s (preset %s)" % (name, gpu or "none: datasheet rows skipped"))
    cases = []
    if gpu:
        cases.append(("datasheet " + gpu, ["--gpu", gpu]))
    if a.cluster:
        cases.append(("measured " + os.path.basename(a.cluster), ["--cluster", os.path.abspath(a.cluster)]))
    if not cases:
        print("SKIPPED: no preset for '%s'; pass --cluster" % name)
        sys.exit(77)
    if a.sweep:
        return sweep(a, ptdc, env, cases, sm)
    measured = {}  # the layout's pins -> its runs: one program per distinct layout
    for label, machine in cases:
        out = os.path.join(a.work, re.sub(r"[^a-z0-9]+", "-", label))
        base = [ptdc] + MODEL + machine + ["--gpus", "1", "--global-batch", str(a.global_batch)]
        run(base + ["--target", "cuda", "-o", out], env)
        with open(os.path.join(out, "plan.json")) as f:
            plan = json.load(f)
        pred = plan["predicted"]
        key = json.dumps(plan.get("parallel", {}), sort_keys=True)
        if key not in measured:
            run(["make", "-s", "-C", out, "train"], env, timeout=900)
            log = run([os.path.join(out, "run.sh"), "--steps", str(a.steps)], env, timeout=1800)
            prof = run([os.path.join(out, "run.sh"), "--steps", str(min(a.steps, 5))],
                       dict(env, PTDC_PROFILE="1"), timeout=1800)
            measured[key] = (log, prof)
        log, prof = measured[key]
        times = steps_of(log)
        if len(times) < 3:
            sys.exit("train.py: the program printed %d steps:\n%s" % (len(times), log[-3000:]))
        meas = statistics.median(times[2:])
        losses = [float(m.group(1)) for m in re.finditer(r"^step\s+\d+/\d+ \| loss ([\d.]+)", log, re.M)]
        tokens = a.global_batch * 2048
        ratio = pred["step_time_s"] / meas
        par = plan.get("parallel", {})
        print("\n== %s: %s" % (label, " ".join("%s %s" % (k, v) for k, v in par.items()
                                                  if not isinstance(v, (dict, list)))))
        print("step time   predicted %.3f s   measured %.3f s (median of steps 3..%d: %s)   predicted/measured %.2f"
              % (pred["step_time_s"], meas, a.steps, " ".join("%.3f" % t for t in times[2:]), ratio))
        print("tokens/s    predicted %.0f   measured %.0f" % (tokens / pred["step_time_s"], tokens / meas))
        if "mfu" in pred:
            print("MFU         predicted %.1f%%   measured %.1f%% (the same FLOPs over the measured time)"
                  % (100 * pred["mfu"], 100 * pred["mfu"] * ratio))
        print("loss        first %.4f  last %.4f" % (losses[0], losses[-1]) if losses else "loss        (none printed)")
        rows = []
        for m in re.finditer(r"^profile: (\S+)\s+(\S+)\s+([\d.eE+-]+)\s+([\d.eE+-]+)\s*$", prof, re.M):
            rows.append((m.group(1), m.group(2), float(m.group(3))))
        step = next((r[2] for r in rows if r[0] == "step"), 0)
        print("profile (PTDC_PROFILE=1: every call synchronised; step %.3f s):" % step)
        for call, calls, s in sorted((r for r in rows if r[0] != "step"), key=lambda r: -r[2])[:10]:
            print("  %-22s %8s calls %9.4f s  %5.1f%%" % (call, calls, s, 100 * s / step if step else 0))


if __name__ == "__main__":
    main()
