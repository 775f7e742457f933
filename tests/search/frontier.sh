#!/bin/sh
# The frontier walk lowers every layer's memory budget at once; a model with
# two kinds of layer (DeepSeek-V3: three dense layers, then MoE ones) can run
# out of leaner points on one kind first. The walk must go on with the other
# kind (search_ilp.c, solve_repeat): here, 5 layers on 8 A100s at pp 1 and
# one sequence per micro-batch, the searched mesh and strategies must be no
# slower than those the search finds with the mesh pinned to dp 4 x tp 2
# (whose strategy space the unpinned search's contains). Stopping the walk
# where the dense layers' frontier ends gave 294.526 s against the pin's
# 280.757 s.
set -u
ptdc=$1
cd "$2" || exit 1
args="models/deepseek-v3.mdl --set n_layers=5 --gpus 8 --pp 1 --micro-batch 1 --emit plan"
step() { # args... -> the plan's step time in seconds
    # shellcheck disable=SC2086
    "$ptdc" $args "$@" 2>&1 | awk '/^  step time /{ print $3 }'
}
free=$(step)
pinned=$(step --dp 4 --tp 2)
[ -n "$free" ] && [ -n "$pinned" ] || { echo "FAIL: no step time (searched '$free', pinned '$pinned')"; exit 1; }
if awk -v a="$free" -v b="$pinned" 'BEGIN { exit !(a <= b * (1 + 1e-9)) }'; then
    echo "ok frontier: searched $free s <= pinned dp 4 x tp 2 $pinned s"
else
    echo "FAIL frontier: searched $free s, slower than the pinned dp 4 x tp 2's $pinned s"
    exit 1
fi
