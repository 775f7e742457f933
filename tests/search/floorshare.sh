#!/bin/sh
# The per-mesh floors' shared work (search_edgemin.c: an edge's least
# resharding prices remembered across floors, keyed by what they read, so
# groups whose meshes differ only on axes no reshard of the edge touches
# share them; search_nodestates.c: a node's model states and ZeRO traffic
# by strategy and mesh, shared by the groups of one mesh;
# search_nodeprice.c: a node's kernel prices by strategy, micro-batch and
# the mesh axes the strategy reads, for any later floor; search_prune.c:
# the time floor's node prices kept for the group's whole floor, and read
# by the time floor of its twin, the group differing only in sequence
# parallelism, and of its kin, a group of the same cp, tp, fold and
# micro-batch, for the strategies that read no mesh axis the two differ on;
# the whole floor's saved slots asked once per node and policy; the ILP's
# pins once per mesh's axes). PTDC_SEARCH_CHECK prices every remembered
# edge, every kept, twin's or kin's node price and every saved list again
# and dies on a difference in any bit; here on a dense model and an MoE one
# (tp, sp, dp and the expert exchanges), which must answer most edges from
# memory and make whole floors from kept prices and take some time floors'
# node prices from their twins' and kin's (else the test would not
# exercise the sharing), with the plan the search gives unchecked. Tried: a whole floor reading the prices its neighbour
# group kept dies ("the node prices group dp 16 tp 1 b 16 sp 0 kept from
# its time floor differ for node 0 (embedding)"); the key
# without the source blocks' sizes dies ("remembered least reshard prices
# of 'layers.0.h' differ from the prices made again on a mesh of 32 x 2 x
# 1"), and so does one that leaves every axis's size and links out (the
# same on a mesh of 4 x 2 x 3); the node states keyed without the mesh die
# ("the remembered model states of node 0 (embedding) differ from those
# priced again on a mesh of 16 x 1 x 1"); a time floor taking the price of
# the twin's next strategy dies ("the node price of node 0 (embedding) group
# dp 32 tp 2 b 1 sp 1 took from its twin's time floor differs"), a kin's
# price taken whatever axes the strategy reads ("the node price of node 0
# (embedding) group dp 32 tp 1 b 2 sp 0 took from its kin's time floor
# differs"), a remembered node price keyed without the mesh's axes ("the
# remembered node price of node 16 (rmsnorm) differs from the price made
# again in group dp 32 tp 1 b 2 sp 0") or without the micro-batch (the
# same, in group dp 64 tp 1 b 2 sp 0), and the saved slots one short ("the saved bytes of node 1 (rmsnorm) from its
# remembered slots differ from pass_saved_list's under policy 0").
set -u
ptdc=$1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
fail=0
for args in "models/llama2-7b.mdl --gpus 64" "models/mixtral-8x7b.mdl --gpus 64"; do
    # shellcheck disable=SC2086
    PTDC_SEARCH_CHECK=1 PTDC_SEARCH_DEBUG=1 "$ptdc" $args --plan-only -o "$out/a" 2>"$out/a.err" ||
        { echo "FAIL floorshare ($args): the checked search failed"; grep -v '^ \|^group\|^walk' "$out/a.err" | tail -5; fail=1; continue; }
    # shellcheck disable=SC2086
    "$ptdc" $args --plan-only -o "$out/b" 2>"$out/b.err" || { echo "FAIL floorshare ($args): ptdc failed"; fail=1; continue; }
    # "floor: 305946 edges priced, 267735 remembered; 330944 node states priced, 301622 remembered; 52016
    # node prices asked of the memo, 9124 remembered"
    counts=$(sed -n 's/^floor: \([0-9]*\) edges priced, \([0-9]*\) remembered; \([0-9]*\) node states priced, \([0-9]*\) remembered; \([0-9]*\) node prices asked of the memo, \([0-9]*\) remembered$/\1 \2 \3 \4 \5 \6/p' "$out/a.err")
    # shellcheck disable=SC2086
    set -- $counts
    if [ $# -ne 6 ] || [ $((2 * $2)) -le "$1" ] || [ $((2 * $4)) -le "$3" ] || [ "$6" -eq 0 ]; then
        echo "FAIL floorshare ($args): edges, node states and node prices remembered '$counts' (asked, remembered: half or fewer of the edges or states, or no price: the sharing was not exercised)"
        fail=1
        continue
    fi
    asked=$1 hits=$2 sasked=$3 shits=$4 pasked=$5 phits=$6
    # "floor: 187092 node prices made, 11492 taken from the twin's time floor, 36057 from a kin's"
    twins=$(sed -n "s/^floor: [0-9]* node prices made, \([0-9]*\) taken from the twin's time floor, \([0-9]*\) from a kin's\$/\1 \2/p" "$out/a.err")
    twin=${twins% *} kin=${twins#* }
    if [ -z "$twins" ] || [ "$twin" -eq 0 ] || [ "$kin" -eq 0 ]; then
        echo "FAIL floorshare ($args): node prices taken from a twin's and a kin's time floor '$twins' (one is none: they were not exercised)"
        fail=1
    fi
    # "groups: 538, 538 with a floor to make; made when reached: 281 lead class floors, 40 time floors, 36 whole floors"
    whole=$(sed -n 's/^groups: .* made when reached: .* time floors, \([0-9]*\) whole floors$/\1/p' "$out/a.err")
    if [ -z "$whole" ] || [ "$whole" -eq 0 ]; then
        echo "FAIL floorshare ($args): no whole floor made after a time floor ('$whole'): the kept prices were not read"
        fail=1
    fi
    mask='/search time/d; s/built in [0-9.]* ms, solved in [0-9.]* ms//'
    sed "$mask" "$out/a/plan.txt" >"$out/a.txt"
    sed "$mask" "$out/b/plan.txt" >"$out/b.txt"
    cmp -s "$out/a.txt" "$out/b.txt" || { echo "FAIL floorshare ($args): plan.txt differs with the check"; diff "$out/a.txt" "$out/b.txt" | head; fail=1; }
    [ "$fail" -ne 0 ] || echo "ok floorshare ($args): $hits of $asked edges and $shits of $sasked node states and $phits of $pasked node prices from memory, $whole whole floors from kept node prices, $twin node prices from twins and $kin from kin, each priced again and equal"
done
exit $fail
