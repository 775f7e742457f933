#!/bin/sh
# A candidate memory shaped (its cut recomputes, or under a lowered limit, or
# nothing of the variant fits it) goes down the frontier walk, unless even the
# variant's fastest cut with memory left out cannot beat the best plan
# (search.c, free_lost): leaner variants are slower by the ILP's own measure
# and memory only makes cuts slower, the rule that finishes a candidate memory
# did not shape. It must end walks without losing a plan: Mixtral 8x7B on
# 1024 A100s plans the same with the rule as without it
# (PTDC_SEARCH_NO_FREE_CUT), with fewer ILP solves (339 against 429 when
# written), and its shortcuts hold (PTDC_SEARCH_CHECK).
set -u
ptdc=$1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
args="models/mixtral-8x7b.mdl --gpus 1024 --plan-only"
# shellcheck disable=SC2086
PTDC_SEARCH_CHECK=1 "$ptdc" $args -o "$out/a" 2>"$out/a.err" || { echo "FAIL: ptdc failed"; tail -n 5 "$out/a.err"; exit 1; }
# shellcheck disable=SC2086
PTDC_SEARCH_NO_FREE_CUT=1 "$ptdc" $args -o "$out/b" 2>"$out/b.err" ||
    { echo "FAIL: ptdc failed without the rule"; tail -n 5 "$out/b.err"; exit 1; }
solves() { sed -n 's/.* \([0-9]*\) ILP solves.*/\1/p' "$1/plan.txt"; }
plan() { sed -n 's/^ptdc: wrote [^:]*: //p' "$1"; }
sa=$(solves "$out/a") sb=$(solves "$out/b") pa=$(plan "$out/a.err") pb=$(plan "$out/b.err")
if [ -z "$pa" ] || [ "$pa" != "$pb" ]; then
    echo "FAIL freecut: with the rule '$pa'"
    echo "              without it    '$pb'"
    exit 1
fi
[ -n "$sa" ] && [ -n "$sb" ] && [ "$sa" -lt "$sb" ] ||
    { echo "FAIL freecut: $sa ILP solves with the rule, $sb without"; exit 1; }
echo "ok freecut: the same plan ($pa); $sa ILP solves against $sb"
