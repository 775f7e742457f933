#!/bin/sh
# ckpt_cost.sh PTDC SRC: --save-every prices a checkpoint save in plan.txt
# (passes/cost/ckpt_cost.c, issue 35).
#   - without storage_write_gbs and host_copy_gbs in the cluster: the size is
#     stated and the time is not priced, saying which keys are missing;
#   - with them (a CPU cluster file plus the two keys): a save is 12 bytes
#     per parameter, the busiest rank's share at each rate is the blocked
#     time (sync: storage, async: host copy), divided by the interval per
#     step; a write longer than the steps between saves adds the wait;
#   - without --save-every, no checkpoint line.
set -eu
ptdc=$1 src=$2
t=$(mktemp -d /tmp/ptdc-ckpt-cost.XXXXXX)
trap 'rm -rf "$t"' EXIT
fail() { echo "ckpt_cost: $*"; exit 1; }
model="$src/models/tiny-llama.mdl --gpus 2 --set d_model=512 --set d_ff=1536 --set vocab=32000 --set seq=16 --global-batch 2 --tp 1 --pp 1 --dp 2 --emit plan"

# shellcheck disable=SC2086
"$ptdc" $model --cluster "$src/tests/codegen/data/vm-cpu.cluster" --save-every 5 > "$t/none" 2>&1 ||
    { cat "$t/none"; fail "ptdc failed"; }
grep -q "checkpoints       every 5 steps (--save-every): " "$t/none" || { cat "$t/none"; fail "no checkpoint line"; }
grep -q "not priced: the cluster gives no storage_write_gbs nor host_copy_gbs" "$t/none" ||
    { cat "$t/none"; fail "unpriced keys not named"; }

params=$("$ptdc" "$src/models/tiny-llama.mdl" --set d_model=512 --set d_ff=1536 --set vocab=32000 \
    --emit summary 2>&1 | sed -n 's/^  parameters: \([0-9,]*\) .*/\1/p' | tr -d ,)
[ -n "$params" ] || fail "no parameter count from --emit summary"
check() { # interval storage hostcopy
    (cat "$src/tests/codegen/data/vm-cpu.cluster"; echo "storage_write_gbs = $2"; echo "host_copy_gbs = $3") > "$t/c"
    # shellcheck disable=SC2086
    "$ptdc" $model --cluster "$t/c" --save-every "$1" > "$t/out" 2>&1 || { cat "$t/out"; fail "ptdc failed"; }
    step=$(sed -n 's/^  step time  *\([0-9.]*\) s$/\1/p' "$t/out")
    sizes=$(sed -n 's/.*(--save-every): \([0-9.]*\) GB a save, \([0-9.]*\) GB on the busiest rank$/\1 \2/p' "$t/out")
    sync=$(sed -n 's/.* synchronous  \([0-9.]*\) s blocked a save .*/\1/p' "$t/out")
    async=$(sed -n 's/.* asynchronous \([0-9.]*\) s blocked a save .*/\1/p' "$t/out")
    echo "$params $1 $2 $3 ${step:-x} ${sizes:-x x} ${sync:-x} ${async:-x}" | awk '
    function off(got, want) { return got - want > 0.002 + 0.003 * want || want - got > 0.002 + 0.003 * want }
    {
        p = $1; n = $2; w = $3; h = $4; step = $5; total = $6; rank = $7; sync = $8; async = $9
        want_total = 12 * p / 1e9; want_rank = want_total / 2   # dp 2: half each
        write = want_rank / w; copy = want_rank / h
        wait = write > n * step ? write - n * step : 0
        bad = 0   # the plan prints 3 decimals; the step time it rounds enters the wait
        if (off(total, want_total)) { print "total GB", total, "want", want_total; bad = 1 }
        if (off(rank, want_rank)) { print "rank GB", rank, "want", want_rank; bad = 1 }
        if (off(sync, write)) { print "sync s", sync, "want", write; bad = 1 }
        if (off(async, copy + wait)) { print "async s", async, "want", copy + wait; bad = 1 }
        exit bad
    }' || { grep -A2 "checkpoints  " "$t/out"; fail "interval $1, storage $2 GB/s, host copy $3 GB/s: wrong price"; }
    echo "ckpt_cost: --save-every $1, storage $2 GB/s, host copy $3 GB/s: sync $sync s, async $async s a save"
}
check 100 1 10      # the write hides behind 100 steps
check 1 0.05 2      # the write outlasts one step: the next save waits

# shellcheck disable=SC2086
"$ptdc" $model --cluster "$t/c" > "$t/out" 2>&1
! grep -q "checkpoints  " "$t/out" || fail "a checkpoint line without --save-every"
echo "ckpt_cost: ok"
