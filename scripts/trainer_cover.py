#!/usr/bin/env python3
"""trainer_cover.py: which lines of the generated programs' trainer only the
programs compiled without the sanitizers reach (tests/codegen/equiv.sh,
EQUIV_SAN=runtime; docs/design.md, "The suite's time").

    scripts/trainer_cover.py WORK FIXTURE[:LAYOUT,...]...

WORK is tests/codegen/work of a build whose matrix ran with coverage
(release build: EQUIV_OPT="-O0 --coverage" PTDC_PROGCACHE=off ctest -L codegen):
each program directory then holds train-equiv_unity.gcda. Each FIXTURE named
is one compiled without the sanitizers, but for the LAYOUTs listed after it
(EQUIV_SAN_KEEP); every other program counts as compiled whole. Prints the
trainer lines (train*.c, trainer.c and their headers; model.c excluded) that
some program reaches, those the runtime-only programs reach, and each line
no whole program reaches, with the programs that do.
"""
import collections
import os
import subprocess
import sys


def lines_run(d):
    """(file, line) of the trainer that the program in d executed."""
    out = subprocess.run(["gcov", "-t", "train-equiv_unity.gcda"], cwd=d,
                         capture_output=True, text=True).stdout
    src, got = None, set()
    for line in out.splitlines():
        p = line.split(":", 2)
        if len(p) < 3:
            continue
        count, no, text = p[0].strip(), p[1].strip(), p[2]
        if no == "0" and text.startswith("Source:"):
            src = os.path.basename(text[len("Source:"):])
            continue
        if src is None or src.startswith("model") or src == "equiv_unity.c":
            continue
        if count not in ("-", "#####", "====="):
            got.add((src, int(no)))
    return got


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    work = sys.argv[1]
    plain = {}
    for a in sys.argv[2:]:
        fx, _, keep = a.partition(":")
        plain[fx] = set(filter(None, keep.split(",")))
    whole, runtime = collections.defaultdict(set), collections.defaultdict(set)
    n = collections.Counter()
    for fx in sorted(os.listdir(work)):
        for layout in sorted(os.listdir(os.path.join(work, fx))):
            d = os.path.join(work, fx, layout)
            if not os.path.exists(os.path.join(d, "train-equiv_unity.gcda")):
                continue
            kind = runtime if fx in plain and layout not in plain[fx] else whole
            n["runtime-only" if kind is runtime else "whole"] += 1
            for k in lines_run(d):
                kind[k].add(fx + "/" + layout)
    only = sorted(k for k in runtime if k not in whole)
    print("programs: %d whole, %d runtime-only; trainer lines reached: %d, by runtime-only programs %d, "
          "by them alone %d" % (n["whole"], n["runtime-only"], len(set(whole) | set(runtime)), len(runtime),
                                len(only)))
    for k in only:
        print("  %s:%d  %s" % (k[0], k[1], " ".join(sorted(runtime[k])[:4])))


if __name__ == "__main__":
    main()
