#!/bin/sh
# The cut bound beyond the kernels (search.c, cut_bound, tail_bound): the
# communication of each stage, the resharding inside its pieces at the
# variant's layouts (SrcPiece.rs_lb) and the pipeline transfers it waits
# for (stage_p2p), and the step end, pipeline rank 0's exposed
# data-parallel reduction and optimizer after its last operation. With them
# memory-shaped cuts, and limited candidates whose fastest cut cannot win,
# are told so without pass_predict. They must prune without losing a plan:
# Mixtral 8x7B on 2048 A100s plans the same with both as without either
# (PTDC_SEARCH_NO_CUT_COMM, PTDC_SEARCH_NO_TAIL), and each ranks fewer
# plans with the cost model (102 with both, 184 without the step end, 186
# without the communication, when written), its shortcuts holding
# (PTDC_SEARCH_CHECK). That the bound stays below pass_predict is
# search.bounds' check (the step end with the reduction, the resharding or
# the transfers overstated by half dies there).
set -u
ptdc=$1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
args="models/mixtral-8x7b.mdl --gpus 2048 --plan-only"
# shellcheck disable=SC2086
PTDC_SEARCH_CHECK=1 "$ptdc" $args -o "$out/a" 2>"$out/a.err" || { echo "FAIL: ptdc failed"; tail -n 5 "$out/a.err"; exit 1; }
# shellcheck disable=SC2086
PTDC_SEARCH_NO_TAIL=1 "$ptdc" $args -o "$out/b" 2>"$out/b.err" ||
    { echo "FAIL: ptdc failed without the step end"; tail -n 5 "$out/b.err"; exit 1; }
# shellcheck disable=SC2086
PTDC_SEARCH_NO_CUT_COMM=1 "$ptdc" $args -o "$out/c" 2>"$out/c.err" ||
    { echo "FAIL: ptdc failed without the communication"; tail -n 5 "$out/c.err"; exit 1; }
ranked() { sed -n 's/.* \([0-9]*\) ranked with the cost model.*/\1/p' "$1/plan.txt"; }
plan() { sed -n 's/^ptdc: wrote [^:]*: //p' "$1"; }
ra=$(ranked "$out/a") rb=$(ranked "$out/b") rc=$(ranked "$out/c")
pa=$(plan "$out/a.err") pb=$(plan "$out/b.err") pc=$(plan "$out/c.err")
if [ -z "$pa" ] || [ "$pa" != "$pb" ] || [ "$pa" != "$pc" ]; then
    echo "FAIL cutbound: with both terms     '$pa'"
    echo "               without the step end '$pb'"
    echo "               without communication '$pc'"
    exit 1
fi
[ -n "$ra" ] && [ -n "$rb" ] && [ -n "$rc" ] && [ "$ra" -lt "$rb" ] && [ "$ra" -lt "$rc" ] ||
    { echo "FAIL cutbound: $ra plans ranked with both terms, $rb without the step end, $rc without the communication"; exit 1; }
echo "ok cutbound: the same plan ($pa); $ra plans ranked with both terms, $rb without the step end, $rc without the communication"
