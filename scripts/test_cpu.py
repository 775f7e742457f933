#!/usr/bin/env python3
"""test_cpu.py: the CPU seconds (user + sys, every process a test starts) of
each test of a build, the measure of the suite's cost that a loaded machine
does not distort as it does wall time (docs/design.md, "The suite's time").

    scripts/test_cpu.py BUILD [-R REGEX] [-L LABEL] [-LE LABEL] [-j N] [--top N] [--csv FILE]

Runs the tests ctest selects (with the fixtures they need, setups first),
N at a time (default 1), each as ctest would (its command, environment and
working directory, killed past its TIMEOUT, with the variables that the files
ctest includes first add: tests/suite_env.cmake), and prints the top N by CPU
seconds, then the total and the pass/fail count. CPU is each test's rusage
from wait4: its processes and every descendant they waited for (mpirun's
ranks included).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time


def load(build, regex, label, exclude):
    cmd = ["ctest", "--test-dir", build, "--show-only=json-v1"]
    if regex:
        cmd += ["-R", regex]
    if label:
        cmd += ["-L", label]
    if exclude:
        cmd += ["-LE", exclude]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    tests = []
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if "command" not in t:
            continue
        tests.append({"name": t["name"], "cmd": t["command"], "props": props})
    return tests


def suite_env(build):
    """The environment ctest runs the tests in: its own, plus what the files
    the build tree's CTestTestfile.cmake includes set (TEST_INCLUDE_FILES:
    tests/suite_env.cmake), evaluated by cmake itself."""
    top = os.path.join(build, "CTestTestfile.cmake")
    files = re.findall(r'^include\("([^"]+)"\)', open(top).read(), re.M) if os.path.exists(top) else []
    if not files:
        return dict(os.environ)
    script = "".join(f'include("{f}")\n' for f in files)
    script += 'execute_process(COMMAND "${CMAKE_COMMAND}" -E environment)\n'
    path = os.path.join(build, "Testing", "test_cpu_env.cmake")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(script)
    out = subprocess.run(["cmake", "-P", path], check=True, capture_output=True, text=True).stdout
    # the variables those files add or change (PATH: the python_env.cmake
    # that tests/CMakeLists.txt generates); a value of several lines, which
    # `cmake -E environment` cannot print apart, is never one of them
    env = dict(os.environ)
    for line in out.splitlines():
        k, sep, v = line.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) and os.environ.get(k) != v:
            env[k] = v
    return env


def start(t, base):
    env = dict(base)
    for kv in t["props"].get("ENVIRONMENT", []):
        k, _, v = kv.partition("=")
        env[k] = v
    cwd = t["props"].get("WORKING_DIRECTORY") or os.getcwd()
    return subprocess.Popen(t["cmd"], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("-R")
    ap.add_argument("-L")
    ap.add_argument("-LE", dest="LE", help="leave out the tests of this label (what scripts/test.sh's ASan run does with release-only)")
    ap.add_argument("-j", type=int, default=1)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--csv")
    a = ap.parse_args()
    tests = load(a.build, a.R, a.L, a.LE)
    base = suite_env(a.build)
    setups = {}
    for t in tests:
        for f in t["props"].get("FIXTURES_SETUP", []):
            setups.setdefault(f, []).append(t["name"])
    done, failed, running, results = set(), set(), {}, []
    pending = list(tests)
    t0 = time.time()
    while pending or running:
        # start what is ready: every setup of the fixtures it needs has run
        for t in list(pending):
            if len(running) >= a.j:
                break
            need = [s for f in t["props"].get("FIXTURES_REQUIRED", []) for s in setups.get(f, [])]
            if all(s in done for s in need):
                pending.remove(t)
                p = start(t, base)
                running[p.pid] = (t, p, time.time())
        if not running:
            break
        pid, status, ru = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            # a test past its TIMEOUT (ctest's default 1500 s) is killed, as ctest would
            for q, (t, p, st) in running.items():
                if time.time() - st > float(t["props"].get("TIMEOUT", 1500)):
                    os.killpg(q, 9)
            time.sleep(0.1)
            continue
        if pid not in running:
            continue
        t, p, st = running.pop(pid)
        rc = os.waitstatus_to_exitcode(status)
        skip = t["props"].get("SKIP_RETURN_CODE")
        state = "pass" if rc == 0 else ("skip" if skip is not None and rc == int(skip) else "FAIL")
        if t["props"].get("WILL_FAIL") in (True, "TRUE", "ON", "1"):
            state = "pass" if rc != 0 else "FAIL"
        cpu = ru.ru_utime + ru.ru_stime
        results.append((t["name"], cpu, time.time() - st, state))
        done.add(t["name"])
        if state == "FAIL":
            failed.add(t["name"])
        print(f"{state:4} {cpu:8.1f} s CPU {time.time() - st:7.1f} s wall  {t['name']}", flush=True)
    results.sort(key=lambda r: -r[1])
    print(f"\ntop {a.top} by CPU seconds (user+sys):")
    for name, cpu, wall, state in results[: a.top]:
        print(f"  {cpu:8.1f}  {wall:8.1f}  {state:4}  {name}")
    total = sum(r[1] for r in results)
    print(f"{len(results)} tests, {total:.0f} CPU s in all ({total / 60:.1f} CPU min; "
          f"{total / 120:.1f} min on 2 busy cores), {len(failed)} failed, "
          f"{time.time() - t0:.0f} s wall")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("test,cpu_s,wall_s,state\n")
            for name, cpu, wall, state in results:
                f.write(f"{name},{cpu:.2f},{wall:.2f},{state}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
