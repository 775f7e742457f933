#!/bin/sh
# The layout's memory floor in every search (search.c, above_floor;
# search_memfloor.c): stages are whole pieces, so some rank holds
# ceil(j / pp) of the j largest, which the strategy-free memory bounds
# spread evenly. DeepSeek-V3 on 64 GB200s barely fits (dp 1 x tp 32 x pp 2,
# recomputing everything): the candidates whose mean states fit but whose
# fullest rank cannot were solved and walked down their frontiers to the
# end before a plan was found (253 meshes solved when written). The floor
# must prune without losing the plan: the same plan with it as without it
# (PTDC_SEARCH_NO_LAYOUT_FLOOR), and fewer meshes solved (78 when
# written). That the floor stays below pass_predict's peak is
# search.bounds' check (check_bounds); PTDC_SEARCH_CHECK is left out here
# (26 CPU s on this model; search/fit-cut runs it on Mixtral).
set -u
ptdc=$1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
args="models/deepseek-v3.mdl --gpus 64 --gpu gb200 --plan-only"
# shellcheck disable=SC2086
"$ptdc" $args -o "$out/a" 2>"$out/a.err" || { echo "FAIL: ptdc failed"; tail -n 5 "$out/a.err"; exit 1; }
# shellcheck disable=SC2086
PTDC_SEARCH_NO_LAYOUT_FLOOR=1 "$ptdc" $args -o "$out/b" 2>"$out/b.err" ||
    { echo "FAIL: ptdc failed without the floor"; tail -n 5 "$out/b.err"; exit 1; }
meshes() { sed -n 's/.* \([0-9]*\) of [0-9]* meshes solved.*/\1/p' "$1/plan.txt"; }
plan() { sed -n 's/^ptdc: wrote [^:]*: //p' "$1"; }
ma=$(meshes "$out/a") mb=$(meshes "$out/b")
pa=$(plan "$out/a.err") pb=$(plan "$out/b.err")
if [ -z "$pa" ] || [ "$pa" != "$pb" ]; then
    echo "FAIL layoutfloor: with the floor    '$pa'"
    echo "                  without it        '$pb'"
    exit 1
fi
[ -n "$ma" ] && [ -n "$mb" ] && [ "$ma" -lt "$mb" ] ||
    { echo "FAIL layoutfloor: $ma meshes solved with the floor, $mb without"; exit 1; }
echo "ok layoutfloor: the same plan ($pa); $ma meshes solved with the floor, $mb without"
