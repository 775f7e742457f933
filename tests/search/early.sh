#!/bin/sh
# A group's first variant stops after its largest repeat where the layers
# solved so far already lose (search.c, early_lost): every candidate's
# bound from those layers at their costs and the rest at their
# strategy-free work reaches the best plan's step, so rank_group would
# predict none of its plans and walk none of its candidates; its other
# layers, embedding and head are not solved. It must not lose the plan:
# Qwen3-235B-A22B on 128 A100s (its MoE layers first) plans the same with
# it as without it (PTDC_SEARCH_NO_EARLY) and solves fewer ILPs (when
# written: 18 groups stopped, 291 solves against 327). Under
# PTDC_SEARCH_CHECK every group is solved whole, and one the rule would
# have stopped is checked to have predicted nothing and left nothing to
# walk: that run must succeed and plan the same.
set -u
sh "$(dirname "$0")/prunes.sh" "$1" "$2" early PTDC_SEARCH_NO_EARLY solves 0 \
    models/qwen3-235b-a22b.mdl --gpus 128 --gpu a100-80gb --plan-only || exit 1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
PTDC_SEARCH_CHECK=1 PTDC_SEARCH_DEBUG=1 "$1" models/qwen3-235b-a22b.mdl --gpus 128 --gpu a100-80gb --plan-only \
    -o "$out/c" 2>"$out/c.err" || { echo "FAIL early: under PTDC_SEARCH_CHECK"; tail -n 5 "$out/c.err"; exit 1; }
n=$(sed -n "s/^early: \([0-9]*\) solved groups stopped.*/\1/p" "$out/c.err")
[ -n "$n" ] && [ "$n" -gt 0 ] || { echo "FAIL early: no group the rule would stop under PTDC_SEARCH_CHECK"; exit 1; }
echo "ok early: under PTDC_SEARCH_CHECK, $n groups the rule would stop ranked nothing"
