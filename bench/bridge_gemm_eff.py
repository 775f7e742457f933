#!/usr/bin/env python3
"""The Blackwell presets' gemm_eff fitted on Megatron-Bridge's published dense rows
(docs/cost-model.md, "The Blackwell presets' sustained rates").

  bench/bridge_gemm_eff.py [PTDC [LO HI STEP]]   (default build/driver/ptdc 0.40 0.72 0.01)

For each gemm_eff of the grid, tests/cost/bridge_dense.py's pinned table (report mode) is
priced with every Blackwell preset at that gemm_eff: this script stands in for ptdc and
replaces the table's `--gpu NAME` by a --cluster file `gpu = NAME`, `gemm_eff = E`
(docs/cost-model.md, "Cluster file"), the rest of the preset unchanged. Each GPU's rows
depend on its own preset only, so one pass of the grid fits all four. Per GPU it prints
the mean |log(predicted / published tokens/s)| of its rows (the objective: every row
counts, a factor too fast as much as one too slow, as bridge_moe.py's host fit), their
median |error| and signed median, and the grid point with the least objective (ties: the
smaller value). The MoE rows are not used: they are the held-out check
(tests/cost/bridge_moe.py report, after the preset is changed). About 4 s of CPU per
grid point in a Release build (the default grid: 136 s)."""

import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPUS = {"B200": "b200", "B300": "b300", "GB200": "gb200", "GB300": "gb300"}
ROW = re.compile(r"^(\S.*?)\s+(\d+)\s+(\d+)\s+[+-][\d.]+%\s+[\d.]+/[\d.]+")


def as_ptdc():
    """Invoked by bridge_dense.py in ptdc's place (BRIDGE_GEMM_EFF set)."""
    ptdc, eff, tmp = os.environ["BRIDGE_PTDC"], os.environ["BRIDGE_GEMM_EFF"], os.environ["BRIDGE_TMP"]
    a = sys.argv[1:]
    if "--gpu" in a:
        i = a.index("--gpu")
        f = os.path.join(tmp, "%s-%s.cluster" % (a[i + 1], eff))
        if not os.path.exists(f):
            with open(f + ".part", "w") as out:
                out.write("gpu = %s\ngemm_eff = %s\n" % (a[i + 1], eff))
            os.replace(f + ".part", f)
        a[i:i + 2] = ["--cluster", f]
    os.execv(ptdc, [ptdc] + a)


def table(ptdc, eff, tmp):
    env = dict(os.environ, BRIDGE_PTDC=ptdc, BRIDGE_GEMM_EFF="%.3f" % eff, BRIDGE_TMP=tmp)
    p = subprocess.run([sys.executable, os.path.join(SRC, "tests/cost/bridge_dense.py"), os.path.abspath(__file__),
                        SRC, os.path.join(SRC, "tests/cost/ref"), "report"], capture_output=True, text=True, env=env)
    rows = []
    for line in p.stdout.splitlines():
        m = ROW.match(line)
        if m and not line.startswith("skipped"):
            gpu = re.search(r"\d+x(\w+) ", m.group(1)).group(1)
            rows.append((gpu, float(m.group(3)) / float(m.group(2))))
    if not rows or any(line.startswith("FAIL") for line in p.stdout.splitlines()):
        sys.exit("bridge_dense.py at gemm_eff %.3f: %s" % (eff, p.stdout[-2000:] + p.stderr[-2000:]))
    return rows


def main():
    if "BRIDGE_GEMM_EFF" in os.environ:
        return as_ptdc()
    args = sys.argv[1:]
    ptdc = os.path.abspath(args[0] if args else os.path.join(SRC, "build/driver/ptdc"))
    lo, hi, step = (float(x) for x in args[1:4]) if len(args) >= 4 else (0.40, 0.72, 0.01)
    grid = [round(lo + k * step, 3) for k in range(int(round((hi - lo) / step)) + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        res = {e: table(ptdc, e, tmp) for e in grid}
    for gpu in GPUS:
        best = None
        for e in grid:
            r = [x for g, x in res[e] if g == gpu]
            if not r:
                continue
            obj = statistics.mean(abs(math.log(x)) for x in r)
            print("  %-5s gemm_eff %.2f: mean |log ratio| %.4f, median |error| %4.1f%%, signed median %+5.1f%% "
                  "over %d rows" % (gpu, e, obj, 100 * statistics.median(abs(x - 1) for x in r),
                                    100 * statistics.median(x - 1 for x in r), len(r)))
            if best is None or obj < best[1] - 1e-12:
                best = (e, obj, len(r))
        if best:
            print("%s: best gemm_eff %.2f (mean |log ratio| %.4f over its %d dense rows)" % (gpu, *best))
        else:
            print("%s: no dense row published: not fitted" % gpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
