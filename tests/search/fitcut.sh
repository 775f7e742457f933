#!/bin/sh
# The floor cut into stages in the bound of a candidate's plans that fit
# (search.c, fit_floor_bound): before a group's strategies are solved, a
# pipelined candidate with one chunk per rank is bounded by the group's
# floor, without the strategies no fitting plan uses, cut into stages that
# fit by the partition, with the fill and drain (hope_bound) - whole pieces
# per rank, which the strategy-free bounds spread evenly. Groups none of
# whose candidates can then beat the best plan are not solved. It must
# prune without losing a plan: Mixtral 8x7B on 256 A100s plans the same
# with it as without it (PTDC_SEARCH_NO_FIT_CUT), and solves fewer meshes
# (61 against 89 when written), its shortcuts holding (PTDC_SEARCH_CHECK).
# That the bound stays below pass_predict is search.bounds' check (the cut
# overstated by 1% dies there).
set -u
ptdc=$1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
args="models/mixtral-8x7b.mdl --gpus 256 --plan-only"
# shellcheck disable=SC2086
PTDC_SEARCH_CHECK=1 "$ptdc" $args -o "$out/a" 2>"$out/a.err" || { echo "FAIL: ptdc failed"; tail -n 5 "$out/a.err"; exit 1; }
# shellcheck disable=SC2086
PTDC_SEARCH_NO_FIT_CUT=1 "$ptdc" $args -o "$out/b" 2>"$out/b.err" ||
    { echo "FAIL: ptdc failed without the cut"; tail -n 5 "$out/b.err"; exit 1; }
meshes() { sed -n 's/.* \([0-9]*\) of [0-9]* meshes solved.*/\1/p' "$1/plan.txt"; }
plan() { sed -n 's/^ptdc: wrote [^:]*: //p' "$1"; }
ma=$(meshes "$out/a") mb=$(meshes "$out/b")
pa=$(plan "$out/a.err") pb=$(plan "$out/b.err")
if [ -z "$pa" ] || [ "$pa" != "$pb" ]; then
    echo "FAIL fitcut: with the cut    '$pa'"
    echo "              without it      '$pb'"
    exit 1
fi
[ -n "$ma" ] && [ -n "$mb" ] && [ "$ma" -lt "$mb" ] ||
    { echo "FAIL fitcut: $ma meshes solved with the cut, $mb without"; exit 1; }
echo "ok fitcut: the same plan ($pa); $ma meshes solved with the cut, $mb without"
