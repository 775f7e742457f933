#!/bin/sh
# tests/search/stages.sh PTDC SRC: uneven pipeline stages (issue 32).
# LLaMA-3 405B as Meta trained it (Llama 3 paper, Table 4: TP 8 x PP 16 x DP 64,
# interleaved, 8,192 H100s, 8,192 tokens, 16M tokens = 2048 sequences a step) is
# accepted and predicted: 126 layers into pp x v chunks of different sizes, cut by
# cost (the embedding's and the head's chunks take fewer layers), and with the
# split pinned by --pp-layers (Meta's: one layer fewer in the first and the last
# chunk). Refusals of --pp-layers name the flag.
ptdc=$1
src=$2
cd "$src" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
base="models/llama3-405b.mdl --gpus 8192 --gpu h100-80gb --set seq=8192 --global-batch 2048 --tp 8 --pp 16 --dp 64 --schedule interleaved --plan-only --json"
check() { # name, python condition on d (the JSON answer), args...
    name=$1 cond=$2
    shift 2
    # shellcheck disable=SC2086
    "$ptdc" "$@" >"$tmp/out.json" 2>"$tmp/err"
    st=$?
    python3 - "$tmp/out.json" "$name" "$cond" "$st" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
name, cond, st = sys.argv[2], sys.argv[3], int(sys.argv[4])
layers = [len(s["layers"]) for s in d.get("stages") or []]
ok = eval(cond)
p = d.get("predicted") or {}
print("%s %s: exit %d, %s, v %s, layers per chunk %s, MFU %s" % ("ok" if ok else "FAIL", name, st,
      d["status"], (d.get("parallel") or {}).get("virtual_stages"), layers, p.get("mfu")))
if not ok:
    print("  ", d.get("error") or d.get("reason"))
sys.exit(0 if ok else 1)
PY
}
# shellcheck disable=SC2086
check meta-searched 'st == 0 and d["status"] == "fits" and d["parallel"]["virtual_stages"] > 1 and sum(layers) == 126 and len(set(layers)) > 1 and layers[0] <= max(layers) and layers[-1] <= max(layers) and 0.2 < d["predicted"]["mfu"] < 0.6' $base
meta=3
i=1
while [ $i -lt 31 ]; do meta="$meta,4"; i=$((i + 1)); done
meta="$meta,3"
# shellcheck disable=SC2086
check meta-pinned 'st == 0 and d["status"] == "fits" and layers == [3] + [4] * 30 + [3] and 0.2 < d["predicted"]["mfu"] < 0.6' $base --virtual-stages 2 --pp-layers $meta
# Megatron-Bridge's 405B split at pp 16 x v 8 (account_for_embedding/loss_in_pipeline_split):
# 128 chunks for 126 layers, the first holding the embedding alone, the last the head alone.
ends=0
i=0
while [ $i -lt 126 ]; do ends="$ends,1"; i=$((i + 1)); done
ends="$ends,0"
# shellcheck disable=SC2086
check empty-ends 'st == 0 and d["status"] == "fits" and layers == [0] + [1] * 126 + [0] and d["stages"][0]["pieces"] == ["embedding"] and d["stages"][-1]["pieces"] == ["head"] and 0 < d["stages"][0]["time_s"] < d["stages"][1]["time_s"] and 0.2 < d["predicted"]["mfu"] < 0.6' $base --virtual-stages 8 --pp-layers $ends
# A chunk between the ends with no layers would run nothing.
mid=$(echo "$ends" | sed 's/^0,1,1,/1,1,0,/')
# shellcheck disable=SC2086
check empty-middle 'st == 1 and "--pp-layers gives model chunk 2 no layers" in d["error"]' $base --virtual-stages 8 --pp-layers $mid
# Megatron's first/last per pipeline rank: 7 + 14 x 8 + 7 = 126 (1F1B: the ranks' layers must split over v)
# shellcheck disable=SC2086
check megatron-first-last 'st == 0 and layers == [7] + [8] * 14 + [7]' \
    models/llama3-405b.mdl --gpus 8192 --gpu h100-80gb --set seq=8192 --global-batch 2048 --tp 8 --pp 16 --dp 64 \
    --schedule 1f1b --pp-layers first=7,last=7 --plan-only --json
# shellcheck disable=SC2086
check first-not-even 'st == 1 and "--pp-layers" in d["error"] and "model chunks" in d["error"]' $base --virtual-stages 2 --pp-layers first=7,last=7
# shellcheck disable=SC2086
check wrong-count 'st == 1 and "--pp-layers gives 3 model chunks" in d["error"]' $base --virtual-stages 2 --pp-layers 40,40,46
exit $fail
