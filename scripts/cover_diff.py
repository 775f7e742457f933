#!/usr/bin/env python3
"""cover_diff.py: the lines of ptdc's C sources that some tests reach and
others do not, the check before a test leaves the ASan run for build/
(label release-only; docs/design.md, "The suite's time"): a test whose lines
the tests still under ASan reach adds no path for the sanitizers to check.

    scripts/cover_diff.py BUILD --keep 'CTEST ARGS' --moved 'CTEST ARGS' [-j N] [--keep-cache FILE]

BUILD is a build tree compiled with gcc's --coverage, e.g.
    cmake -S . -B build-cov -DPTDC_CUDA_HOME=/nonexistent -DCMAKE_BUILD_TYPE=None \\
          "-DCMAKE_C_FLAGS=--coverage -O0" -DCMAKE_EXE_LINKER_FLAGS=--coverage
Runs the tests `ctest ARGS` selects for --keep, records the lines they
executed, then those of --moved, and prints each source file (under the
repository, tests/ excluded: test programs are not what users run) with the
lines only --moved reached. Exit status 1 if there are any."""
import argparse
import gzip
import json
import os
import shlex
import subprocess
import sys
import tempfile


def gcda_files(build):
    for root, _, files in os.walk(build):
        for f in files:
            if f.endswith(".gcda"):
                yield os.path.join(root, f)


def run(build, args, jobs):
    for f in gcda_files(build):
        os.remove(f)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["ctest", "--test-dir", build, "-j", str(jobs)] + shlex.split(args)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    tail = [l for l in r.stdout.splitlines() if "tests passed" in l or "Failed" in l or "***" in l]
    print(f"cover_diff: ctest {args}: " + ("; ".join(tail[-6:]) or "(no summary)"), file=sys.stderr)


def covered(build, src):
    """{source file: set of executed lines} of the .gcda files now in BUILD."""
    lines = {}
    with tempfile.TemporaryDirectory() as out:
        files = list(gcda_files(build))
        for i in range(0, len(files), 200):
            subprocess.run(["gcov", "--json-format", "--preserve-paths"] + files[i:i + 200],
                           cwd=out, capture_output=True)
        for name in os.listdir(out):
            if not name.endswith(".gcov.json.gz"):
                continue
            with gzip.open(os.path.join(out, name), "rt") as f:
                data = json.load(f)
            cwd = data.get("current_working_directory", "")
            for fi in data["files"]:
                path = os.path.realpath(os.path.join(cwd, fi["file"]))
                if not path.startswith(src + os.sep) or path.startswith(os.path.join(src, "tests") + os.sep):
                    continue
                hit = lines.setdefault(os.path.relpath(path, src), set())
                hit.update(l["line_number"] for l in fi["lines"] if l["count"] > 0)
    return lines


def ranges(nums):
    nums = sorted(nums)
    out, start = [], None
    for i, n in enumerate(nums):
        if start is None:
            start = n
        if i + 1 == len(nums) or nums[i + 1] != n + 1:
            out.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ",".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--keep", required=True)
    ap.add_argument("--moved", required=True)
    ap.add_argument("-j", type=int, default=1)
    ap.add_argument("--keep-cache", help="a JSON file of --keep's lines: read if present, else written")
    a = ap.parse_args()
    src = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    if a.keep_cache and os.path.exists(a.keep_cache):
        keep = {f: set(v) for f, v in json.load(open(a.keep_cache)).items()}
    else:
        run(a.build, a.keep, a.j)
        keep = covered(a.build, src)
        if a.keep_cache:
            json.dump({f: sorted(v) for f, v in keep.items()}, open(a.keep_cache, "w"))
    run(a.build, a.moved, a.j)
    moved = covered(a.build, src)
    total = only = 0
    for f in sorted(moved):
        extra = moved[f] - keep.get(f, set())
        total += len(moved[f])
        if extra:
            only += len(extra)
            print(f"{f}: {len(extra)} lines: {ranges(extra)}")
    kept = sum(len(v) for v in keep.values())
    print(f"cover_diff: --keep reached {kept} lines, --moved {total}; {only} only --moved")
    return 1 if only else 0


if __name__ == "__main__":
    sys.exit(main())
