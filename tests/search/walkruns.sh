#!/bin/sh
# The frontier walk makes the runs outside repeats (the embedding with the
# first layer, the last layer with the head) leaner with the layers
# (search_ilp.c, run_point). Before, only the repeats walked and the runs
# were solved again without a budget, so their fastest point (a replicated
# vocabulary table) stayed at every variant: DeepSeek-V3 with 4 layers on 8
# A100-40GB at --pp 1 --dp 1 was refused (47.8 GiB of 38.8 usable, tp 8 with
# the embedding and head replicated) while --tp 8 pinned, which requires
# sharded weights everywhere and so a sharded table, fits at 255.604 s. The
# search with the tensor axis free must find a plan at least as fast as the
# one the pin finds (now: 252.887 s, micro-batch 4; 64 GB200s with the whole
# model show the same, docs/planner.md, seventeenth change).
set -u
ptdc=$1
cd "$2" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
args="models/deepseek-v3.mdl --set n_layers=4 --gpus 8 --gpu a100-40gb --pp 1 --dp 1 --plan-only"
# shellcheck disable=SC2086
"$ptdc" $args --tp 8 -o "$out/pin" 2>"$out/pin.err" || { echo "FAIL: ptdc --tp 8 failed"; cat "$out/pin.err"; exit 1; }
# shellcheck disable=SC2086
"$ptdc" $args -o "$out/free" 2>"$out/free.err"
rc=$?
step() { sed -n 's/^ptdc: wrote .*, step \([0-9.]*\) s,.*/\1/p' "$1"; }
sp=$(step "$out/pin.err") sf=$(step "$out/free.err")
[ -n "$sp" ] || { echo "FAIL walkruns: no plan with --tp 8"; cat "$out/pin.err"; exit 1; }
if [ "$rc" -ne 0 ] || [ -z "$sf" ]; then
    echo "FAIL walkruns: --tp 8 pinned fits (step $sp s) but the search over tp refuses (exit $rc):"
    cat "$out/free.err"
    exit 1
fi
awk -v f="$sf" -v p="$sp" 'BEGIN { exit !(f <= p) }' ||
    { echo "FAIL walkruns: the search over tp plans $sf s, slower than --tp 8 pinned ($sp s)"; exit 1; }
echo "ok walkruns: tp searched $sf s, --tp 8 pinned $sp s"
