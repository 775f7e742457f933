#!/usr/bin/env python3
"""JSON for every answer (issue 11): each case runs ptdc with --json from the
source root and checks that stdout is exactly one JSON object with the
documented status and exit_status (docs/planner.md, "JSON answers"), that the
process exits with that status, and what the case says about the rest.
usage: json_answers.py PTDC SRC"""
import json
import subprocess
import sys

ptdc, src = sys.argv[1], sys.argv[2]
failures = 0

L7 = "models/llama2-7b.mdl --gpus 64 --global-batch 2048 --schedule 1f1b"
SWEEP = ("models/llama2-13b.mdl --set vocab=128000 --set seq=2048 --gpus 64 --sp off --zero 1 "
         "--schedule 1f1b --global-batch 2048 --stack megatron --stack-set grad_bytes=2 "
         "--stack-set grad_accum_unfused=yes")


def run(args):
    p = subprocess.run([ptdc] + args.split() + ["--json"], cwd=src, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def case(name, args, status, code, check=None):
    global failures
    rc, out, err = run(args)
    problems = []
    try:
        j = json.loads(out)
    except ValueError as e:
        j = None
        problems.append(f"stdout is not one JSON object ({e}): {out[:200]!r}")
    if j is not None:
        if j.get("status") != status:
            problems.append(f"status {j.get('status')!r}, expected {status!r}")
        if j.get("exit_status") != code:
            problems.append(f"exit_status {j.get('exit_status')!r}, expected {code}")
        if check:
            try:
                check(j, err)
            except AssertionError as e:
                problems.append(f"check: {e}")
    if rc != code:
        problems.append(f"exit status {rc}, expected {code}")
    if code != 0 and not err.strip():
        problems.append("nothing said on stderr")
    if problems:
        failures += 1
        print(f"FAIL {name}: ptdc {args} --json")
        for p in problems:
            print(f"  {p}")
        print("  stderr: " + err[:400].replace("\n", "\n          "))
    else:
        print(f"ok {name}")


def memory(j, ranks):
    m = j["predicted"]["memory"]
    assert len(m) == ranks, f"{len(m)} ranks in predicted.memory, expected {ranks}"
    for r in m:
        for k in ("weights", "grads", "optimizer", "activations", "total"):
            assert k in r, f"no {k} in a memory entry"


def fits_pinned(j, err):
    assert j["predicted"]["fits"] is True
    assert j["parallel"]["tp"] == 2 and j["parallel"]["pp"] == 4 and j["parallel"]["dp"] == 8
    for k in ("step_time_s", "mfu", "peak_mem_bytes", "capacity_bytes"):
        assert isinstance(j["predicted"][k], (int, float)), f"predicted.{k}"
    memory(j, 4)
    assert j["reason"] is None and j["stack"] == "ptdc"
    assert err == "", f"stderr: {err!r}"


def overflow(stack, ranks):
    def check(j, err):
        assert j["predicted"]["fits"] is False
        assert j["reason"].startswith("the layout does not fit in memory: pipeline rank"), j["reason"]
        assert j["reason"] in err, "the reason is not what stderr says"
        assert any(" it fits: " in n for n in j["notes"]), f"no suggestion in {j['notes']}"
        assert j["stack"] == stack
        memory(j, ranks)
    return check


def error(text, located=False):
    def check(j, err):
        assert text in j["error"], f"error {j['error']!r} lacks {text!r}"
        assert j["diagnostics"], "no diagnostics"
        assert all(d in err for d in j["diagnostics"]), "diagnostics differ from stderr"
        if located:
            assert ".mdl:" in j["diagnostics"][0], f"no file:line:col in {j['diagnostics'][0]!r}"
    return check


def search_fits(j, err):
    for k in ("parallel", "stages", "groups", "predicted", "search"):
        assert k in j, f"no {k}"
    assert j["predicted"]["fits"] is True


def nofit_search(j, err):
    assert j["predicted"]["fits"] is False and j["parallel"] is not None
    assert "does not fit on 4" in j["reason"], j["reason"]
    assert any("smallest number" in n for n in j["notes"]), j["notes"]


def emitted(j, err):
    assert j["emit"]["framework"] == "megatron"
    assert "--tensor-model-parallel-size 2" in j["emit"]["text"]
    assert j["stack"] == "megatron" and j["predicted"]["fits"] is True


def refused(text):
    def check(j, err):
        assert text in j["reason"], j["reason"]
        assert j["emit"]["text"] is None
    return check


case("pinned-fits", f"{L7} --tp 2 --pp 4 --micro-batch 1 --recompute none --sp on --zero 1 --plan-only",
     "fits", 0, fits_pinned)
case("pinned-does-not-fit",
     "models/llama2-7b.mdl --gpus 8 --tp 1 --pp 1 --micro-batch 8 --recompute none --zero 0 --sp off "
     "--schedule 1f1b --plan-only", "does_not_fit", 2, overflow("ptdc", 1))
case("framework-does-not-fit",
     f"{SWEEP} --tp 2 --pp 2 --dp 16 --micro-batch 4 --recompute none --stack-set attention_kernel=flash1 "
     "--stack-set norm_unfused=yes --plan-only", "does_not_fit", 2, overflow("megatron", 2))
case("tp-not-dividing-heads", f"{L7} --tp 3 --plan-only", "error", 1,
     error("--tp 3 does not divide the 32 attention heads"))
case("bad-flag-value", f"{L7} --zero 7 --plan-only", "error", 1,
     error("--zero expects an integer from 0 to 3, got '7'"))
case("unknown-flag", f"{L7} --frobnicate --plan-only", "error", 1, error("unknown option '--frobnicate'"))
case("model-error", "tests/diag/dim-not-positive.mdl --gpus 8 --plan-only", "error", 1,
     error("", located=True))
case("no-model-file", "models/no-such-model.mdl --gpus 8 --plan-only", "error", 1,
     error("no-such-model.mdl"))
case("bad-stack-key", f"{L7} --stack megatron --stack-set nope=1 --plan-only", "error", 1,
     error("unknown key 'nope'"))
case("uneven-framework-stages",
     "models/llama2-13b.mdl --gpus 48 --tp 2 --pp 3 --dp 8 --micro-batch 1 --recompute none --sp on "
     "--zero 1 --schedule 1f1b --stack megatron --plan-only", "error", 1,
     error("split the 40 layers evenly"))
case("search-fits", "models/llama2-7b.mdl --gpus 8 --plan-only", "fits", 0, search_fits)
case("search-does-not-fit", "models/llama-65b.mdl --gpus 4", "does_not_fit", 2, nofit_search)
case("emit-megatron", "models/llama2-7b.mdl --gpus 64 --tp 2 --pp 1 --micro-batch 1 --recompute none "
     "--sp on --zero 1 --schedule 1f1b --emit megatron", "fits", 0, emitted)
case("emit-refused", "models/gpt3-1.3b.mdl --gpus 8 --emit torchtitan", "cannot_express", 3,
     refused("LayerNorm"))

if failures:
    print(f"{failures} case(s) failed")
sys.exit(1 if failures else 0)
