#!/bin/sh
# --precision (docs/precision.md): auto picks FP8 for LLaMA-3 70B on 64
# H100s (and says what it buys), bf16 on A100s, which have no FP8 rate; a
# pinned format the GPU runs is planned in it, one a cluster file gives
# an FP4 rate runs NVFP4 and MXFP8 too; every plan file states the
# precision.
#   precision.sh PTDC SRC
set -u
ptdc=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 1
fail=0
field() { # field FILE KEY: precision.KEY of a plan JSON
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['precision'][sys.argv[2]])" "$1" "$2"
}
no() { echo "FAIL $*"; fail=1; }

"$ptdc" models/llama3-70b.mdl --gpus 64 --gpu h100-80gb --precision auto -o "$tmp/h100" --plan-only 2>"$tmp/err" ||
    { no "auto on H100: exit $?"; cat "$tmp/err"; }
[ "$(field "$tmp/h100/plan.json" format)" = fp8 ] || no "auto on H100 chose $(field "$tmp/h100/plan.json" format), not fp8"
python3 - "$tmp/h100/plan.json" <<'PY' || fail=1
import json, sys
p = json.load(open(sys.argv[1]))["precision"]
if not (p["searched"] and set(p["tried"]) == {"bf16", "fp8"}):
    print("FAIL auto on H100 tried %s" % p["tried"])
    sys.exit(1)
# (bf16 is searched after fp8 for plans faster than fp8's: none, so null)
if not (p["tried"]["fp8"] == p["step_time_s"] and p["tried"]["bf16"] is None and p["step_time_s"] < p["bf16_step_time_s"]):
    print("FAIL fp8 not faster: %s" % p)
    sys.exit(1)
# FP8 GEMMs are faster, by at most H100's FP8/BF16 rate ratio of 2 (the
# chosen dp 2 x cp 2 x tp 2 x pp 8 gets 1.45x over its GEMMs; the dp 2 x
# tp 4 x pp 8 plan chosen before the backward's all-to-alls were priced got
# 2.0x).
if not (1.0 < p["gemm_speedup"] <= 2.01):
    print("FAIL GEMM speed-up %g outside (1, 2]" % p["gemm_speedup"])
    sys.exit(1)
PY
grep -q "^  precision          fp8 (searched)" "$tmp/h100/plan.txt" || no "plan.txt has no precision line"
# (the sentence is wrapped: read it as one line)
tr -s '\n ' '  ' <"$tmp/h100/plan.txt" | grep -q "fp8: GEMMs [0-9.]*x faster, casts +[0-9.]*% of the bf16 step, step [0-9.]*x (bf16 " ||
    no "plan.txt does not say what fp8 buys"
grep -q "h100-80gb: .*, fp8</text>" "$tmp/h100/plan.svg" || no "plan.svg's layout line has no precision"

"$ptdc" models/llama3-70b.mdl --gpus 64 --gpu a100-80gb --precision auto --plan-only --json >"$tmp/a100.json" 2>"$tmp/err" ||
    { no "auto on A100: exit $?"; cat "$tmp/err"; }
[ "$(field "$tmp/a100.json" format)" = bf16 ] || no "auto on A100 chose $(field "$tmp/a100.json" format)"
field "$tmp/a100.json" note | grep -q "a100-80gb has no low-precision tensor cores" || no "A100: no reason for bf16"

# The default stays bf16; a pinned format is planned in it.
"$ptdc" models/tiny-llama.mdl --gpus 8 --gpu h100-80gb --plan-only --json >"$tmp/def.json" 2>/dev/null
[ "$(field "$tmp/def.json" format)" = bf16 ] && [ "$(field "$tmp/def.json" searched)" = False ] ||
    no "the default is not bf16"
"$ptdc" models/tiny-llama.mdl --gpus 8 --gpu h100-80gb --precision fp8 --plan-only --json >"$tmp/fp8.json" 2>/dev/null
[ "$(field "$tmp/fp8.json" format)" = fp8 ] || no "--precision fp8 not planned in fp8"
for p in nvfp4 mxfp8; do
    "$ptdc" models/tiny-llama.mdl --gpus 8 --cluster tests/search/prec/blackwell-ish.cluster --precision $p \
        --plan-only --json >"$tmp/$p.json" 2>"$tmp/err" || { no "$p with an FP4 rate: exit $?"; cat "$tmp/err"; }
    [ "$(field "$tmp/$p.json" format)" = $p ] || no "--precision $p not planned in $p"
done
# auto's later searches look only for plans faster than the best so far:
# its answer is the best of the formats searched in full, one at a time.
"$ptdc" models/tiny-llama.mdl --gpus 8 --gpu h100-80gb --precision auto --plan-only --json >"$tmp/auto.json" 2>/dev/null
"$ptdc" models/tiny-llama.mdl --gpus 8 --gpu h100-80gb --precision bf16 --plan-only --json >"$tmp/bf16.json" 2>/dev/null
python3 - "$tmp/auto.json" "$tmp/bf16.json" "$tmp/fp8.json" <<'PY' || fail=1
import json, sys
a, b, f = (json.load(open(x))["predicted"]["step_time_s"] for x in sys.argv[1:])
if abs(a - min(b, f)) > 1e-9 * a:
    print("FAIL auto's step %.9g, the best pinned %.9g (bf16 %.9g, fp8 %.9g)" % (a, min(b, f), b, f))
    sys.exit(1)
PY
[ $fail -eq 0 ] && echo "precision: ok"
exit $fail
