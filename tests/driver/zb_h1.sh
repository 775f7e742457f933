#!/bin/sh
# zb_h1.sh PTDC SRC: the ZB-H1 schedule (--schedule zb-h1). Priced: LLaMA-2
# 70B on 64 A100s at tp 8 x pp 4 predicts under ZB-H1 a bubble at most
# two thirds of 1F1B's (the weight gradients fill the drain) and a shorter
# step, every rank holding activations within 1.1x of 1F1B's first rank (its
# pending weight gradients' inputs; 1F1B's first rank holds pp micro-batches).
# Refused with one sentence and status 1: by -o (the programs run 1F1B and
# interleaved), under --stack megatron and --stack fsdp (neither framework has
# it), with --virtual-stages 2.
set -u
ptdc=$1
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

layout="--gpus 64 --tp 8 --pp 4 --dp 2 --micro-batch 1 --global-batch 64 --recompute none --sp on --zero 1"
for s in 1f1b zb-h1; do
    "$ptdc" models/llama2-70b.mdl $layout --schedule $s --plan-only --json >"$tmp/$s.json" 2>"$tmp/$s.err" ||
        { echo "FAIL: --schedule $s: status $?"; cat "$tmp/$s.err"; fail=1; }
done
python3 - "$tmp/1f1b.json" "$tmp/zb-h1.json" <<'PY' || fail=1
import json, sys
a, z = (json.load(open(f)) for f in sys.argv[1:3])
pa, pz = a["predicted"], z["predicted"]
ok = True
def check(cond, what):
    global ok
    if not cond:
        print("FAIL:", what)
        ok = False
check(z["parallel"]["schedule"] == "zb-h1" and a["parallel"]["schedule"] == "1f1b", "the schedules named")
check(pz["bubble_s"] <= 2 / 3 * pa["bubble_s"], "zb-h1 bubble %.3f s, 1f1b %.3f s" % (pz["bubble_s"], pa["bubble_s"]))
check(pz["step_time_s"] < pa["step_time_s"], "zb-h1 step %.3f s, 1f1b %.3f s" % (pz["step_time_s"], pa["step_time_s"]))
first = a["predicted"]["memory"][0]["activations"]
for r, m in enumerate(pz["memory"]):
    check(m["activations"] <= 1.1 * first, "zb-h1 rank %d holds %.2f GiB of activations, 1f1b rank 0 %.2f" %
          (r, m["activations"] / 2**30, first / 2**30))
last = pa["memory"][-1]["activations"]
check(pz["memory"][-1]["activations"] > 2 * last, "zb-h1's last rank holds its pending weight gradients' inputs")
sys.exit(0 if ok else 1)
PY

refused() { # WANT ARGS...
    want=$1
    shift
    out=$("$ptdc" models/tiny-llama.mdl "$@" 2>&1)
    rc=$?
    if [ $rc -ne 1 ] || ! printf '%s\n' "$out" | grep -q -- "$want" || [ -e "$tmp/out" ]; then
        echo "FAIL: $*: status $rc, want 1 and '$want':"; printf '%s\n' "$out"; fail=1
    fi
}
refused "which run 1F1B and interleaved 1F1B, not ZB-H1" --gpus 2 --target cpu --schedule zb-h1 -o "$tmp/out"
refused "Megatron-LM has no such schedule" --gpus 8 --stack megatron --schedule zb-h1 --plan-only
refused "InterleavedZeroBubble and ZBVZeroBubble, run two or more stages" --gpus 8 --stack fsdp --schedule zb-h1 --plan-only
refused "needs --schedule interleaved" --gpus 8 --pp 4 --virtual-stages 2 --schedule zb-h1 --plan-only
# -o with the schedule searched: the programs' schedule, not ZB-H1.
"$ptdc" models/tiny-llama.mdl --gpus 2 --target cpu -o "$tmp/prog" >/dev/null 2>&1 &&
    grep -q "schedule *1F1B" "$tmp/prog/plan.txt" || { echo "FAIL: -o chose a schedule its programs run"; fail=1; }
exit $fail
