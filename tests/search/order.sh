#!/bin/sh
# The per-mesh floor made when the search reaches a group (search_order.c):
# the groups are visited best bound first in a heap keyed by the bound they
# have (strategy-free, then the lead class's time floor, then the time
# floor, then the whole floor), which must visit the same groups in the same
# order, and stop at the same one, as sorting them by their whole floors'
# bounds. PTDC_SEARCH_CHECK makes every floor after the visit and dies on a
# difference (src_order_check); here on a dense model and an MoE one, where
# most groups never get the whole floor and some that get the lead class's
# never get the time floor (else the test would not exercise the
# shortcuts), and the plan must be the one the search gives unchecked. Each
# level's floor must be at least the one before it, row by row
# (src_group_floor). Tried: the lead class's floor 10% too high dies ("the
# whole floor of group dp 32 tp 1 b 16 sp 0 is below the floor before it
# (0.405429395, 0.445972335 at 88)"); the time floor 10% too high dies
# ("group dp 32 tp 1 b 16 sp 0 ordered by bound 14.5302088, which its floor
# lowers to 13.2092807"), and visiting groups on the time floor without the
# whole one too ("group 34 of the visit is dp 64 tp 1 b 4 sp 0, by the exact
# bounds dp 32 tp 1 b 4 sp 0").
set -u
ptdc=$1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
fail=0
for args in "models/llama2-7b.mdl --gpus 64" "models/mixtral-8x7b.mdl --gpus 64"; do
    # shellcheck disable=SC2086
    PTDC_SEARCH_CHECK=1 PTDC_SEARCH_DEBUG=1 "$ptdc" $args --plan-only -o "$out/a" 2>"$out/a.err" ||
        { echo "FAIL order ($args): the checked search failed"; grep -v '^ \|^group\|^walk' "$out/a.err" | tail -5; fail=1; continue; }
    # shellcheck disable=SC2086
    "$ptdc" $args --plan-only -o "$out/b" 2>"$out/b.err" || { echo "FAIL order ($args): ptdc failed"; fail=1; continue; }
    # "groups: 538, 538 with a floor to make; made when reached: 281 lead class floors, 40 time floors, 36 whole floors"
    counts=$(sed -n 's/^groups: [0-9]*, \([0-9]*\) with a floor to make; made when reached: \([0-9]*\) lead class floors, \([0-9]*\) time floors, \([0-9]*\) whole floors$/\1 \2 \3 \4/p' "$out/a.err")
    # shellcheck disable=SC2086
    set -- $counts
    if [ $# -ne 4 ] || [ "$4" -ge "$1" ] || [ "$3" -ge "$2" ]; then
        echo "FAIL order ($args): due, lead class, time and whole floors made '$counts' (a floor made for every group that had the one before: the shortcut was not taken)"
        fail=1
        continue
    fi
    due=$1 lead=$2 time=$3 whole=$4
    # (the times masked)
    mask='/search time/d; s/built in [0-9.]* ms, solved in [0-9.]* ms//'
    sed "$mask" "$out/a/plan.txt" >"$out/a.txt"
    sed "$mask" "$out/b/plan.txt" >"$out/b.txt"
    cmp -s "$out/a.txt" "$out/b.txt" || { echo "FAIL order ($args): plan.txt differs with the check"; diff "$out/a.txt" "$out/b.txt" | head; fail=1; }
    [ "$fail" -ne 0 ] || echo "ok order ($args): the visit checked against every floor; of $due groups, $lead got the lead class's time floor, $time the time floor, $whole the whole floor"
done
exit $fail
