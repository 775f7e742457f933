#!/bin/sh
# The walk bound (search.c, walk_bound): a frontier walk stops walking a
# candidate once its layers, at least as slow as at the last point walked
# (the ILP's time never falls along its frontier), leave no cut that can beat
# the best plan. It must end walks without losing a plan: here, where a walk
# finds the plan (DeepSeek-V3 with 5 layers on 8 A100s at pp 1 and one
# sequence per micro-batch, the case of
# frontier.sh) and the bound ends candidates on the way, the search with the
# bound must plan exactly what it plans without it (PTDC_SEARCH_NO_WALK_BOUND),
# with fewer ILP solves. Overstating the bound by 30% (tried) gives dp 8,
# zero 2 at 303.900 s instead of dp 4 x tp 2 at 278.863 s (279.070 s since the
# runs walk too, docs/planner.md, seventeenth change). The first run traces
# every candidate ranked (PTDC_SEARCH_DEBUG=2): the plan's step must be one a
# traced prediction that fits gave. Both runs walk without jumps
# (PTDC_SEARCH_NO_JUMP): here a jump (search.c, walk_jump) skips the very
# points after which this bound ends the candidate (tests/search/jump.sh).
set -u
export PTDC_SEARCH_NO_JUMP=1
ptdc=$1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
args="models/deepseek-v3.mdl --set n_layers=5 --gpus 8 --pp 1 --micro-batch 1 --plan-only"
# shellcheck disable=SC2086
PTDC_SEARCH_DEBUG=2 "$ptdc" $args -o "$out/a" 2>"$out/a.err" || { echo "FAIL: ptdc failed"; cat "$out/a.err"; exit 1; }
# shellcheck disable=SC2086
PTDC_SEARCH_NO_WALK_BOUND=1 "$ptdc" $args -o "$out/b" 2>"$out/b.err" || { echo "FAIL: ptdc failed without the walk bound"; cat "$out/b.err"; exit 1; }
ended=$(sed -n 's/.*ended by the walk bound \([0-9]*\)$/\1/p' "$out/a.err" | awk '{ s += $1 } END { print s + 0 }')
solves() { sed -n 's/.* \([0-9]*\) ILP solves.*/\1/p' "$1/plan.txt"; }
sa=$(solves "$out/a") sb=$(solves "$out/b")
plan() { sed -n 's/^ptdc: wrote [^:]*: //p' "$1"; }
pa=$(plan "$out/a.err") pb=$(plan "$out/b.err")
[ "$ended" -gt 0 ] || { echo "FAIL walk: the walk bound ended no candidate here (the test cannot fail)"; exit 1; }
if [ -z "$pa" ] || [ "$pa" != "$pb" ]; then
    echo "FAIL walk: with the walk bound '$pa'"
    echo "           without it      '$pb'"
    exit 1
fi
step=$(echo "$pa" | sed -n 's/.*step \([0-9.]*\) s.*/\1/p')
grep -q "pass_predict $step s, .* fits\$" "$out/a.err" ||
    { echo "FAIL walk: no traced prediction that fits gave the plan's step ($step s)"; exit 1; }
[ "$sa" -lt "$sb" ] || { echo "FAIL walk: $sa ILP solves with the walk bound, $sb without"; exit 1; }
echo "ok walk: the same plan ($pa); $ended candidates ended by the walk bound, $sa ILP solves against $sb"
