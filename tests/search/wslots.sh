#!/bin/sh
# ZB-H1's W slots in the stage cuts (search_dp.c, SrcPiece.wsaved): under a
# split schedule each rank also holds what its deferred weight gradients read,
# up to rank + 1 micro-batches of it (plan_schedule_wslots), which for an MoE
# layer is every routed row's input, output gradient and activation. A cut
# that leaves them out is estimated to fit where pass_predict finds it twice
# too big (DeepSeek-V3 on 2048 B200s, pp 8: 176 GB estimated, 371 GB), and
# the search ranks it for nothing. Qwen3-30B-A3B on 32 H100s pinned to ZB-H1:
# with the W slots the search must plan what it plans without them
# (PTDC_SEARCH_NO_WSLOTS) or better, rank fewer plans pass_predict finds too
# big (PTDC_SEARCH_DEBUG's count: 25 against 462 when written), and its
# shortcuts hold (PTDC_SEARCH_CHECK).
set -u
ptdc=$1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
args="models/qwen3-30b-a3b.mdl --gpus 32 --schedule zb-h1 --plan-only"
# shellcheck disable=SC2086
PTDC_SEARCH_CHECK=1 PTDC_SEARCH_DEBUG=1 "$ptdc" $args -o "$out/a" 2>"$out/a.err" ||
    { echo "FAIL: ptdc failed"; tail -n 5 "$out/a.err"; exit 1; }
# shellcheck disable=SC2086
PTDC_SEARCH_NO_WSLOTS=1 PTDC_SEARCH_DEBUG=1 "$ptdc" $args -o "$out/b" 2>"$out/b.err" ||
    { echo "FAIL: ptdc failed without the W slots"; tail -n 5 "$out/b.err"; exit 1; }
over() { sed -n 's/.* \([0-9]*\) plans ranked too big for pass_predict.*/\1/p' "$1"; }
step() { sed -n 's/^ptdc: wrote .*, step \([0-9.]*\) s,.*/\1/p' "$1"; }
oa=$(over "$out/a.err") ob=$(over "$out/b.err") sa=$(step "$out/a.err") sb=$(step "$out/b.err")
if [ -z "$oa" ] || [ -z "$ob" ] || [ -z "$sa" ] || [ -z "$sb" ]; then
    echo "FAIL wslots: no count or step in ptdc's output"; tail -n 3 "$out/a.err" "$out/b.err"; exit 1
fi
grep -q 'schedule  *ZB-H1' "$out/a/plan.txt" || { echo "FAIL wslots: the plan is not ZB-H1"; exit 1; }
awk -v a="$sa" -v b="$sb" 'BEGIN { exit !(a <= b) }' ||
    { echo "FAIL wslots: step $sa s with the W slots, $sb s without"; exit 1; }
[ $((2 * oa)) -lt "$ob" ] ||
    { echo "FAIL wslots: $oa plans ranked too big with the W slots, $ob without (want under half)"; exit 1; }
echo "ok wslots: step $sa s ($sb s without the W slots); $oa plans ranked too big against $ob"
