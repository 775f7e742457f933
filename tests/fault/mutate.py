#!/usr/bin/env python3
"""A seeded corpus of mutated command lines and model files (issue 12).

usage: mutate.py PTDC SRC WORKDIR [--seed N] [--cli N] [--models N] [--timeout S]

Every case is derived from a handful of valid invocations by a fixed-seed
random generator, so a run is reproducible and a failure names its case.
The command-line cases replace flag values with hostile ones (0, -1, 2^31,
2^63, 1e308, nan, inf, '', 'abc', 1/3, ...), drop values, duplicate, swap
and invent flags, pass a directory, a FIFO, /dev/zero or a missing path as
the model, --cluster, --stack or -o, write damaged cluster and stack files,
and --set / --stack-set absurd sizes. The model cases mutate tiny-llama.mdl,
tiny-gpt.mdl or the family file they import (lines deleted, duplicated or
swapped, characters flipped, huge numbers, NUL and non-UTF-8 bytes, deep
nesting, truncation) and plan them with --gpus 2 --plan-only (some also
generate CPU programs with -o).

Each case must: finish within 20 s (--timeout; CMake gives 60 to sanitized builds, 5x slower), not die by a signal, exit 0, 1, 2 or 3
(docs/planner.md, "Exit statuses"), say something on stderr when it fails and
never "internal error" or a sanitizer report, print at most one JSON object
when stdout is JSON (with exit_status = the status), and leave no file in a
fresh -o DIR when it fails. A failure prints the command that reproduces it
(run from WORKDIR) and keeps its files under WORKDIR/cases/."""
import concurrent.futures
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time

TIMEOUT = 20

# Cases known to fail, by name, with the reason (none at present).
EXPECTED_FAIL = {}

HOSTILE = ["0", "-1", "2147483648", "9223372036854775808", "1e308", "nan", "inf", "", "abc",
           "1/3", "-0", "+1", " 1", "1 ", "0x10", "1.5", "18446744073709551616",
           "-9223372036854775809", "4294967297", "1048576", "1099511627776", "99" * 200,
           "-inf", "1e-308", "\u00e9", "--json", "-o"]

VALUE_FLAGS = {"-o", "--output", "--emit", "--set", "--target", "--gpus", "--gpu",
               "--gpus-per-node", "--cluster", "--stack", "--stack-set", "--tp", "--pp", "--dp",
               "--micro-batch", "--virtual-stages", "--global-batch", "--recompute", "--sp",
               "--zero", "--schedule", "--attention", "--ilp-time-limit"}

# Real flags with values worth trying on top of a base (valid ones and big valid ones).
EXTRA = [("--gpu", ["h200", "a100-40gb", "nosuch", "H100-80GB"]),
         ("--gpus-per-node", ["1", "3", "1024", "8"]),
         ("--recompute", ["none", "selective", "ffn", "full", "half"]),
         ("--sp", ["on", "off", "yes"]),
         ("--zero", ["0", "1", "2", "3", "4"]),
         ("--schedule", ["1f1b", "interleaved", "gpipe"]),
         ("--virtual-stages", ["1", "2", "3", "1048576"]),
         ("--attention", ["flash", "materialized", "sdpa"]),
         ("--global-batch", ["1", "3", "16", "1099511627776"]),
         ("--micro-batch", ["1", "3", "16", "1048576"]),
         ("--gpus", ["1", "3", "7", "1048576"]),
         ("--ilp-time-limit", ["0.001", "1", "3600", "1e-300"]),
         ("--emit", ["summary", "ir", "ir-grad", "plan", "megatron", "torchtitan", "stack"]),
         ("--target", ["cpu", "cuda", "metal"]),
         ("--explain", None), ("--json", None), ("--plan-only", None)]

UNKNOWN = ["--frobnicate", "-x", "--", "-", "---tp", "--TP", "--tp=", "--=", "--plan-only=yes",
           "--json=1", "-o=", "--gpus=4=4", "extra.mdl", "--" + "a" * 5000, "-oo", "--gpus=",
           "--set=", "--stack-set==", "=", "--help=no"]

SET_NAMES = ["n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab", "seq",
             "global_batch", "rope_theta", "init_std", "norm_eps", "nosuch", "head_dim", "a b",
             "1x"]
SET_VALUES = HOSTILE + ["1e30", "4611686018427387904", "1000000000", "100000", "0.5", "3",
                        "1024 * 1024 * 1024 * 1024", "n_layers", "(", "2 ** 70"]

STACK_KEYS = ["grad_bytes", "dp_bucket_melems", "frag_act", "alloc_reserve", "reshard_overlap",
              "tp_overlap", "param_gather", "pp_overlap",
              "zero_stages", "recompute", "schedules", "backends", "attention_kernel",
              "dynamic_memory", "nosuch", "name"]

CLUSTER = ("# 8-GPU H100 nodes with a slower fabric (docs/cost-model.md)\n"
           "gpu = h100-80gb\ngpus_per_node = 8\nnic_bw_gbits = 200\nbusbw_ib_gbs = 22\n")
CLUSTER_KEYS = ["gpus", "gpus_per_node", "peak_tflops", "hbm_gib", "hbm_bw_gbs", "nvlink_bw_gbs",
                "nic_bw_gbits", "busbw_nvlink_gbs", "busbw_ib_gbs", "alpha_nvlink_us",
                "alpha_ib_us", "sms", "gemm_eff", "hbm_eff", "device", "nodes", "gemm_tile_m",
                "gpu", "nosuch"]

BAD_TEXT = ["internal error", "AddressSanitizer", "LeakSanitizer", "runtime error:",
            "Sanitizer:", "Segmentation fault", "core dumped", "Assertion"]


class Case:
    def __init__(self, name, args, files=(), out=None):
        self.name = name
        self.args = args          # argv after the ptdc path
        self.files = list(files)  # (path, bytes) written before the run
        self.out = out            # a fresh -o DIR, checked to stay empty on failure
        self.seconds = TIMEOUT
        self.expect = None        # the exit status a base or regression case must have
        self.stdout = ""


def fixtures(work, ptdc):
    fix = os.path.join(work, "fix")
    os.makedirs(os.path.join(fix, "adir"))
    os.mkfifo(os.path.join(fix, "fifo"))
    with open(os.path.join(fix, "h100.cluster"), "w") as f:
        f.write(CLUSTER)
    with open(os.path.join(fix, "empty"), "w"):
        pass
    with open(os.path.join(fix, "afile"), "w") as f:
        f.write("not a directory\n")
    os.makedirs(os.path.join(fix, "full"))
    with open(os.path.join(fix, "full", "keep"), "w") as f:
        f.write("x\n")
    stack = subprocess.run([ptdc, "--stack", "megatron", "--emit", "stack"], capture_output=True,
                           check=True).stdout
    with open(os.path.join(fix, "mega.stack"), "wb") as f:
        f.write(stack)
    return fix, stack


def bad_paths(fix):
    return [os.path.join(fix, "adir"), os.path.join(fix, "fifo"), os.path.join(fix, "nope"),
            "/dev/zero", os.path.join(fix, "empty"), os.path.join(fix, "afile", "sub"), "",
            "/dev/null", os.path.join(fix, "h100.cluster"), os.path.join(fix, "mega.stack"),
            os.path.join(fix, "adir") + "/"]


def groups_of(argv):
    """[flag, value] / [flag] / [positional] groups of a base argv."""
    g, i = [], 0
    while i < len(argv):
        if argv[i] in VALUE_FLAGS and i + 1 < len(argv):
            g.append([argv[i], argv[i + 1]])
            i += 2
        else:
            g.append([argv[i]])
            i += 1
    return g


def mutate_text(rng, text, pool):
    """One random mutation of a key = value file (cluster or stack)."""
    lines = text.split("\n")
    k = rng.randrange(6)
    if k == 0:  # a known key with a hostile value
        lines.insert(rng.randrange(len(lines) + 1), f"{rng.choice(pool)} = {rng.choice(HOSTILE)}")
    elif k == 1:  # a line twice
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif k == 2:  # garbage line
        lines.insert(rng.randrange(len(lines) + 1),
                     rng.choice(["=", "= 3", "key", "gpu =", "\x00", "\xff\xfe", "a = b = c",
                                 "x" * 100000 + " = 1", "# only a comment"]))
    elif k == 3:  # a value replaced
        idx = [i for i, l in enumerate(lines) if "=" in l and not l.startswith("#")]
        if idx:
            i = rng.choice(idx)
            lines[i] = lines[i].split("=")[0] + "= " + rng.choice(HOSTILE)
    elif k == 4:  # truncated
        return text[:rng.randrange(len(text) + 1)]
    else:  # a line deleted
        del lines[rng.randrange(len(lines))]
    return "\n".join(lines)


def cli_cases(rng, n, ptdc, src, work, fix, stack_text):
    m = lambda name: os.path.join(src, "models", name)
    bases = [
        [m("tiny-llama.mdl"), "--gpus", "4", "--plan-only"],
        [m("tiny-llama.mdl"), "--gpus", "4", "--plan-only", "--json"],
        [m("tiny-llama.mdl"), "--gpus", "4", "--tp", "2", "--pp", "2", "--micro-batch", "2",
         "--plan-only"],
        [m("tiny-gpt.mdl"), "--cluster", os.path.join(fix, "h100.cluster"), "--gpus", "8",
         "--plan-only"],
        [m("tiny-llama.mdl"), "--gpus", "8", "--stack", "megatron", "--emit", "megatron"],
        [m("tiny-gpt.mdl"), "--gpus", "2", "--target", "cpu", "-o", "@OUT"],
        [m("tiny-llama.mdl"), "--stack", os.path.join(fix, "mega.stack"), "--gpus", "8", "--tp",
         "2", "--pp", "2", "--dp", "2", "--micro-batch", "1", "--json"],
        ["--stack", "megatron", "--stack-set", "grad_bytes=2", "--emit", "stack"],
    ]
    cases = []
    for i, b in enumerate(bases):
        out = os.path.join(work, "cases", f"cli-base-{i}", "out")
        cases.append(Case(f"cli-base-{i}", [a.replace("@OUT", out) for a in b],
                          out=out if "@OUT" in b else None))
    # The bugs this corpus found, pinned: an empty -o wrote to "/"; --explain --json printed the
    # alternatives after the JSON object.
    cases.append(Case("reg-empty-o", [m("tiny-gpt.mdl"), "--gpus", "2", "-o", ""]))
    cases.append(Case("reg-empty-output", [m("tiny-gpt.mdl"), "--gpus", "2", "--output="]))
    cases.append(Case("reg-explain-json", [m("tiny-llama.mdl"), "--gpus", "4", "--plan-only",
                                           "--explain", "--json"]))
    expect = {"reg-empty-o": 1, "reg-empty-output": 1, "reg-explain-json": 0}
    for c in cases:
        c.expect = expect.get(c.name, 0)
    paths = bad_paths(fix)
    for c in range(n):
        name = f"cli-{c:03d}"
        cdir = os.path.join(work, "cases", name)
        g = [list(x) for x in groups_of(rng.choice(bases))]
        files = []
        for _ in range(rng.choice([1, 1, 2, 2, 3])):
            op = rng.randrange(12)
            valued = [x for x in g if len(x) == 2]
            if op == 0 and valued:  # hostile value
                rng.choice(valued)[1] = rng.choice(HOSTILE)
            elif op == 1 and valued:  # value dropped
                del rng.choice(valued)[1]
            elif op == 2:  # a flag twice, maybe with a hostile value
                d = list(rng.choice(g))
                if len(d) == 2 and rng.random() < 0.5:
                    d[1] = rng.choice(HOSTILE)
                g.insert(rng.randrange(len(g) + 1), d)
            elif op == 3:  # an unknown or malformed flag
                g.insert(rng.randrange(len(g) + 1), [rng.choice(UNKNOWN)])
            elif op == 4 and len(g) > 1:  # two flags swapped
                i, j = rng.sample(range(len(g)), 2)
                g[i], g[j] = g[j], g[i]
            elif op == 5:  # a path that is no regular file, for the model, --cluster or --stack
                where = rng.choice(["model", "--cluster", "--stack", "-o"])
                p = rng.choice(paths)
                if where == "-o":  # the case's own, so no case writes where another reads
                    k = rng.randrange(7)
                    p = ["/dev/null", "", "/dev/zero/x", os.path.join(cdir, "ofile"),
                         os.path.join(cdir, "ofile", "sub"), os.path.join(cdir, "ofifo"),
                         os.path.join(cdir, "full")][k]
                    if k in (3, 4):
                        files.append((os.path.join(cdir, "ofile"), b"a file\n"))
                    elif k == 5:
                        files.append((os.path.join(cdir, "ofifo"), None))
                    elif k == 6:  # a directory already holding a file: only that file may stay
                        files.append((os.path.join(cdir, "full", "keep"), b"x\n"))
                    hit = [x for x in g if x[0] == "-o" and len(x) == 2]
                    if hit:
                        hit[0][1] = p
                    else:
                        g.append(["-o", p])
                elif where == "model":
                    pos = [x for x in g if len(x) == 1 and not x[0].startswith("-")]
                    if pos:
                        pos[0][0] = p
                    else:
                        g.insert(0, [p])
                else:
                    hit = [x for x in g if x[0] == where and len(x) == 2]
                    if hit:
                        hit[0][1] = p
                    else:
                        g.append([where, p])
            elif op == 6:  # --set with an absurd size
                g.insert(rng.randrange(len(g) + 1),
                         ["--set", f"{rng.choice(SET_NAMES)}={rng.choice(SET_VALUES)}"])
            elif op == 7:  # --stack-set with an absurd value
                g.insert(rng.randrange(len(g) + 1),
                         ["--stack-set", f"{rng.choice(STACK_KEYS)}={rng.choice(HOSTILE)}"])
            elif op == 8 and valued:  # --flag=value
                x = rng.choice(valued)
                g[g.index(x)] = [f"{x[0]}={x[1]}"]
            elif op == 9:  # a damaged cluster file
                text = CLUSTER
                for _ in range(rng.randint(1, 3)):
                    text = mutate_text(rng, text, CLUSTER_KEYS)
                p = os.path.join(cdir, f"c{len(files)}.cluster")
                files.append((p, text.encode("utf-8", "surrogateescape")))
                g = [x for x in g if x[0] != "--cluster"] + [["--cluster", p]]
            elif op == 10:  # a damaged stack file
                text = stack_text.decode()
                for _ in range(rng.randint(1, 3)):
                    text = mutate_text(rng, text, STACK_KEYS)
                p = os.path.join(cdir, f"s{len(files)}.stack")
                files.append((p, text.encode("utf-8", "surrogateescape")))
                g = [x for x in g if x[0] != "--stack"] + [["--stack", p]]
            else:  # another real flag, valid or not
                flag, vals = rng.choice(EXTRA)
                g.insert(rng.randrange(len(g) + 1), [flag] if vals is None else
                         [flag, rng.choice(vals + [rng.choice(HOSTILE)])])
        out = os.path.join(cdir, "out")
        args = [a.replace("@OUT", out) for x in g for a in x]
        full = os.path.join(cdir, "full")
        cases.append(Case(name, args, files, out if out in args else full if full in args else None))
    return cases


TOKEN = re.compile(rb'\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|[A-Za-z_]\w*|"[^"\n]*"|\S')
HUGE = [b"99999999999999999999999999", b"9223372036854775808", b"2147483648", b"1e308",
        b"1e-308", b"0", b"-1", b"0.0", b"1e400", b"nan", b"inf", b"4294967296", b"65537",
        b"1" * 5000]


def mutate_model(rng, data):
    k = rng.randrange(14)
    lines = data.split(b"\n")
    if k == 0:  # a line deleted
        del lines[rng.randrange(len(lines))]
    elif k == 1:  # a line twice
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif k == 2:  # two lines swapped
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif k in (3, 4):  # a character changed: printable, or any byte
        if data:
            i = rng.randrange(len(data))
            b = rng.choice(b"(){}[]:=,.*+-/\"#_0aZ ") if k == 3 else rng.randrange(256)
            return data[:i] + bytes([b]) + data[i + 1:]
    elif k in (5, 6):  # a number replaced by a huge or degenerate one
        toks = [t for t in TOKEN.finditer(data) if t.group()[:1].isdigit()]
        if toks:
            t = rng.choice(toks)
            return data[:t.start()] + rng.choice(HUGE) + data[t.end():]
    elif k == 7:  # a token deleted or doubled
        toks = list(TOKEN.finditer(data))
        if toks:
            t = rng.choice(toks)
            mid = b"" if rng.random() < 0.5 else t.group() + b" " + t.group()
            return data[:t.start()] + mid + data[t.end():]
    elif k == 8:  # an identifier replaced by another of the file
        toks = [t for t in TOKEN.finditer(data) if t.group()[:1].isalpha()]
        if toks:
            t = rng.choice(toks)
            return data[:t.start()] + rng.choice(toks).group() + data[t.end():]
    elif k == 9:  # a NUL, a control or a non-UTF-8 byte
        i = rng.randrange(len(data) + 1)
        return data[:i] + rng.choice([b"\x00", b"\x01", b"\xff", b"\xc0\x80", b"\xed\xa0\x80",
                                      b"\x7f", b"\xe2\x82"]) + data[i:]
    elif k == 10:  # truncated
        return data[:rng.randrange(len(data) + 1)]
    elif k == 11:  # deep nesting or a very long line
        i = rng.randrange(len(lines))
        depth = rng.choice([100, 10000, 100000])
        lines.insert(i, rng.choice([
            b"  y = " + b"(" * depth + b"x" + b")" * depth,
            b"  y = " + b"-" * depth + b"x",
            b"  z = " + b" + ".join([b"x"] * depth),
            b"  " + b"a" * (depth * 10) + b" = 1",
            b"  c = " + b"[" * depth]))
    elif k == 12:  # an import of itself, of nothing, of a directory or a FIFO
        lines.insert(0, rng.choice([b'import "tiny.mdl"', b'import ""', b'import "."',
                                    b'import "/dev/zero"', b'import "nope.mdl"',
                                    b'import "base.mdl"\nimport "base.mdl"', b'import "fifo"']))
    else:  # a brace or bracket removed or added
        i = rng.randrange(len(data) + 1)
        return data[:i] + rng.choice([b"{", b"}", b"(", b")", b"[", b"]", b"\"", b""]) + data[i:]
    return b"\n".join(lines)


def model_cases(rng, n, src, work, fix):
    cases = []
    for family in ("llama", "gpt"):
        with open(os.path.join(src, "models", f"tiny-{family}.mdl"), "rb") as f:
            tiny = f.read().replace(f'import "{family}.mdl"'.encode(), b'import "base.mdl"')
        with open(os.path.join(src, "models", f"{family}.mdl"), "rb") as f:
            base = f.read()
        for c in range(n // 2):
            name = f"mdl-{family}-{c:03d}"
            cdir = os.path.join(work, "cases", name)
            t, b = tiny, base
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                if rng.random() < 0.4:
                    t = mutate_model(rng, t)
                else:
                    b = mutate_model(rng, b)
            files = [(os.path.join(cdir, "tiny.mdl"), t), (os.path.join(cdir, "base.mdl"), b),
                     (os.path.join(cdir, "fifo"), None)]
            args = [os.path.join(cdir, "tiny.mdl"), "--gpus", "2", "--plan-only"]
            out = None
            if rng.random() < 0.2:  # also generate the CPU programs
                out = os.path.join(cdir, "out")
                args = args[:-1] + ["--target", "cpu", "-o", out]
            cases.append(Case(name, args, files, out))
    return cases


def regular_files(d):
    return [os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs]


def check(case, ptdc, work):
    for p, data in case.files:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if data is None:
            os.mkfifo(p)
        else:
            with open(p, "wb") as f:
                f.write(data)
    before = set(regular_files(case.out)) if case.out and os.path.isdir(case.out) else set()
    problems = []
    t0 = time.monotonic()
    try:
        p = subprocess.run([ptdc] + case.args, cwd=work, capture_output=True, timeout=TIMEOUT,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, [f"no answer within {TIMEOUT} s (a hang)"], ""
    case.seconds = time.monotonic() - t0
    rc, out, err = p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    case.stdout = out
    if rc < 0:
        problems.append(f"killed by signal {-rc}")
    elif rc not in (0, 1, 2, 3):
        problems.append(f"exit status {rc}, not one of 0 1 2 3")
    if rc != 0 and not err.strip():
        problems.append("failed without a word on stderr")
    for bad in BAD_TEXT:
        if bad in err:
            problems.append(f"stderr says {bad!r}")
    # Whatever it wrote is inside the working directory (an empty -o once meant "/").
    for w in re.findall(r"^ptdc: wrote (.*)/plan\.txt, ", err, re.M):
        if not os.path.abspath(os.path.join(work, w)).startswith(work + os.sep):
            problems.append(f"wrote plan files outside {work}: {w}/plan.txt")
    if out.lstrip().startswith("{"):
        try:
            j = json.loads(out)
            if isinstance(j, dict) and "exit_status" in j and j["exit_status"] != rc:
                problems.append(f"JSON exit_status {j['exit_status']}, process exit status {rc}")
        except ValueError as e:
            problems.append(f"stdout starts like JSON but is not one JSON object ({e})")
    if case.out and rc != 0 and os.path.isdir(case.out):
        left = [f for f in regular_files(case.out) if f not in before]
        if left:
            problems.append(f"failed, yet left files in {case.out}: {left[:5]}")
    return rc, problems, err


def main():
    argv = sys.argv[1:]
    global TIMEOUT
    opts = {"--seed": 12, "--cli": 220, "--models": 160, "--timeout": TIMEOUT}
    pos = []
    while argv:
        a = argv.pop(0)
        if a in opts:
            opts[a] = int(argv.pop(0))
        else:
            pos.append(a)
    ptdc, src, work = (os.path.abspath(x) for x in pos)
    TIMEOUT = opts["--timeout"]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fix, stack_text = fixtures(work, ptdc)
    rng = random.Random(opts["--seed"])
    cases = cli_cases(rng, opts["--cli"], ptdc, src, work, fix, stack_text)
    cases += model_cases(rng, opts["--models"], src, work, fix)

    workers = max(1, min(2, os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(lambda c: check(c, ptdc, work), cases))

    failed = refused = ok = xfail = 0
    for case, (rc, problems, err) in zip(cases, results):
        if case.expect is not None and rc != case.expect:
            problems = problems + [f"exit status {rc}, expected {case.expect}"]
        if case.name == "reg-explain-json" and not problems:
            try:
                json.loads(case.stdout)
            except ValueError:
                problems.append("stdout is not one JSON object")
        if problems and case.name in EXPECTED_FAIL:
            xfail += 1
            print(f"expected failure {case.name} ({EXPECTED_FAIL[case.name]})")
            continue
        if case.name in EXPECTED_FAIL:
            print(f"note: {case.name} is marked as an expected failure but passed")
        if problems:
            failed += 1
            print(f"FAIL {case.name}: {'; '.join(problems)}")
            print(f"  reproduce: (cd {shlex.quote(work)} && {shlex.join([ptdc] + case.args)})")
            if case.files:
                print(f"  its files are kept under {os.path.join(work, 'cases', case.name)}")
            print("  stderr: " + err[-600:].replace("\n", "\n          "))
            continue
        if os.environ.get("MUTATE_VERBOSE"):
            first = err.strip().splitlines()[:1]
            print(f"{case.name} -> {rc}: {shlex.join(case.args)[:160]}\n    {first[0][:200] if first else ''}")
        if rc == 0:
            ok += 1
        else:
            refused += 1
        # passed: its files are not needed
        if not os.environ.get("MUTATE_KEEP"):
            shutil.rmtree(os.path.join(work, "cases", case.name), ignore_errors=True)
    print(f"mutate: {len(cases)} cases, {refused} refused cleanly, {ok} succeeded"
          + (f", {xfail} expected failures" if xfail else "")
          + (f", {failed} FAILED" if failed else "") + f" (seed {opts['--seed']})")
    slow = max(cases, key=lambda c: c.seconds)
    print(f"slowest case: {slow.name}, {slow.seconds:.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
