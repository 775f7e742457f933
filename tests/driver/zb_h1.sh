#!/bin/sh
# zb_h1.sh PTDC SRC: the ZB-H1 schedule (--schedule zb-h1). Priced: LLaMA-2
# 70B on 64 A100s at tp 8 x pp 4 predicts under ZB-H1 a bubble at most
# two thirds of 1F1B's (the weight gradients fill the drain) and a shorter
# step, rank r holding 1F1B's activations and r + 1 W slots (its pending
# weight gradients' inputs).
# Offered by the search under ptdc's stack, whose programs run it: tiny-llama
# on 2 CPU ranks chooses ZB-H1, predicted faster than the best plan without it
# (--stack-set schedules=1f1b,interleaved); -o
# writes its programs (each stage's wgrad, plan.txt's ZB-H1) and plans as
# --plan-only does. Refused with one sentence and status 1 under --stack
# megatron and --stack fsdp (neither framework has it), with --virtual-stages 2.
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
# Rank r holds 1F1B's activations and r + 1 W slots (the W of the r
# micro-batches deferred and of the one just past its B: plan_schedule_wslots,
# what the programs allocate); the middle stages' layers are alike, the
# first's embedding makes no W, the last's head adds to its slot.
slot = pz["memory"][0]["activations"] - pa["memory"][0]["activations"]
check(slot > 0, "zb-h1 rank 0 holds a W slot")
for r, (m1, mz) in enumerate(zip(pa["memory"], pz["memory"])):
    extra = mz["activations"] - m1["activations"]
    want = (r + 1) * slot
    last = r == len(pz["memory"]) - 1
    check(extra >= want * (1 - 1e-9) if last else abs(extra - want) <= 1e-9 * want,
          "zb-h1 rank %d holds %.4f GiB more than 1f1b, %d W slots of %.4f" % (r, extra / 2**30, r + 1, slot / 2**30))
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
"$ptdc" models/tiny-llama.mdl --gpus 2 --target cpu --schedule zb-h1 -o "$tmp/zb" >"$tmp/zb.log" 2>&1 &&
    grep -q "schedule *ZB-H1" "$tmp/zb/plan.txt" && grep -q "^static void stage1_wgrad(int mb, int slot)" "$tmp/zb/model.c" ||
    { echo "FAIL: -o --schedule zb-h1 wrote no ZB-H1 programs"; cat "$tmp/zb.log"; fail=1; }
refused "Megatron-LM has no such schedule" --gpus 8 --stack megatron --schedule zb-h1 --plan-only
refused "InterleavedZeroBubble and ZBVZeroBubble, run two or more stages" --gpus 8 --stack fsdp --schedule zb-h1 --plan-only
refused "needs --schedule interleaved" --gpus 8 --pp 4 --virtual-stages 2 --schedule zb-h1 --plan-only
# -o with the schedule searched plans as --plan-only does.
s1= s2=
"$ptdc" models/tiny-llama.mdl --gpus 2 --target cpu -o "$tmp/prog" >/dev/null 2>&1 &&
    "$ptdc" models/tiny-llama.mdl --gpus 2 --target cpu --plan-only >"$tmp/plan.txt" 2>&1 &&
    s1=$(grep -o "schedule *[A-Za-z0-9-]*" "$tmp/prog/plan.txt") && s2=$(grep -o "schedule *[A-Za-z0-9-]*" "$tmp/plan.txt") &&
    [ -n "$s1" ] && [ "$s1" = "$s2" ] || { echo "FAIL: -o and --plan-only chose other schedules ('$s1', '$s2')"; fail=1; }
# The free search offers ZB-H1 where it is predicted fastest: tiny-llama on
# 2 CPU ranks (pp 2, one micro-batch: the last rank's W runs beside the
# first rank's B), a search of 0.01 CPU s where LLaMA-2 70B's on 64 A100s
# (docs/planner.md) takes 5.
for s in all noz; do
    set -- --gpus 2 --target cpu --plan-only --json
    [ $s = noz ] && set -- "$@" --stack-set schedules=1f1b,interleaved
    "$ptdc" models/tiny-llama.mdl "$@" >"$tmp/free-$s.json" 2>"$tmp/free-$s.err" ||
        { echo "FAIL: free search ($s): status $?"; cat "$tmp/free-$s.err"; fail=1; }
done
python3 - "$tmp/free-all.json" "$tmp/free-noz.json" <<'PY' || fail=1
import json, sys
z, n = (json.load(open(f)) for f in sys.argv[1:3])
ok = z["parallel"]["schedule"] == "zb-h1" and z["predicted"]["step_time_s"] < n["predicted"]["step_time_s"]
print("%s: free search %s %.6f s, without ZB-H1 %s %.6f s" % ("ok" if ok else "FAIL", z["parallel"]["schedule"],
      z["predicted"]["step_time_s"], n["parallel"]["schedule"], n["predicted"]["step_time_s"]))
sys.exit(0 if ok else 1)
PY
exit $fail
