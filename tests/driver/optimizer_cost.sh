#!/bin/sh
# optimizer_cost.sh PTDC SRC: --optimizer lamb prices LAMB's second pass over
# each shard (passes/cost/mem_param.c, issue 35) on a pinned layout (LLaMA-2
# 7B, dp 8 x tp 8, so both runs price the same plan):
#   - no --optimizer prices exactly what --optimizer adamw does;
#   - lamb's optimizer time is above adamw's and below twice it (12 bytes an
#     element more than AdamW's 28, at AdamW's rate; measured 5.41 ms ->
#     7.02 ms on the default cluster), and the step time grows with it.
set -eu
ptdc=$1 src=$2
t=$(mktemp -d /tmp/ptdc-optimizer-cost.XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "optimizer_cost: $*"; exit 1; }
plan() { # name, then flags
    n=$1
    shift
    "$ptdc" "$src/models/llama2-7b.mdl" --gpus 64 --dp 8 --tp 8 --plan-only --json "$@" > "$t/$n" 2> "$t/$n.err" ||
        { cat "$t/$n.err"; fail "ptdc $* failed"; }
}
plan default
plan adamw --optimizer adamw
plan lamb --optimizer lamb
python3 - "$t/default" "$t/adamw" "$t/lamb" <<'PY' || fail "LAMB is not priced as stated"
import json, sys
d, a, l = (json.load(open(f)) for f in sys.argv[1:])
for j in (d, a, l):
    j.pop("search", None)  # its "seconds" is the search's wall time
if d != a:
    print("optimizer_cost: no --optimizer differs from --optimizer adamw")
    sys.exit(1)
a, l = a["predicted"], l["predicted"]
print("optimizer_cost: optimizer %.4g s (adamw) %.4g s (lamb); step %.7g s %.7g s"
      % (a["optimizer_s"], l["optimizer_s"], a["step_time_s"], l["step_time_s"]))
ok = a["optimizer_s"] < l["optimizer_s"] < 2 * a["optimizer_s"] and l["step_time_s"] > a["step_time_s"]
sys.exit(0 if ok else 1)
PY
if "$ptdc" "$src/models/llama2-7b.mdl" --gpus 64 --optimizer sgd --plan-only > "$t/bad" 2>&1; then
    fail "--optimizer sgd was accepted"
fi
grep -q -- "--optimizer" "$t/bad" || { cat "$t/bad"; fail "the refusal of sgd does not name --optimizer"; }
