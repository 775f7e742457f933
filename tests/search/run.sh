#!/bin/sh
# The planner's command line, golden style.
#
#   run.sh PTDC SRC cli NAME   cli/NAME.args are ptdc's arguments (run from the
#                              source root, with -o DIR added). Without
#                              NAME.ok the run must exit with status 1 (or the
#                              one in NAME.status: 2 for a layout that does not
#                              fit), print nothing on stdout, leave DIR
#                              unwritten and print
#                              exactly cli/NAME.err on stderr; with NAME.ok it
#                              must exit 0, write plan.txt, plan.json and
#                              plan.svg and print NAME.err on stderr. With
#                              NAME.mask, numbers are compared as N (they come
#                              from the cost model, which other tests pin).
#   run.sh PTDC SRC golden     ptdc $(cat golden/small.args) --emit plan prints
#                              exactly golden/small.txt (but for the search and
#                              ILP solve times).
#   run.sh PTDC SRC pinned     the "evaluate a layout by hand" case: a fully
#                              pinned layout with --plan-only prints the
#                              prediction, with --json as JSON.
#   run.sh PTDC SRC explain    --explain lists ten alternatives and the four
#                              runners-up with the term that makes each slower.
#   run.sh PTDC SRC cpu        a plan on a measured CPU cluster file: the
#                              cluster line gives its fp32 rate (0.1 TFLOP/s,
#                              not "0 TFLOP/s bf16"), and an MFU over 100%
#                              (PaLM's formula on a small model) says why; a
#                              GPU preset's plan has no such note.
#   run.sh PTDC SRC moe        a mixture of experts (golden/moe.args) written
#                              with -o: plan.txt, the expert mesh of plan.json
#                              and plan.svg exactly as golden/moe.txt (but for
#                              the search and ILP solve times).
#   run.sh PTDC SRC cp         context parallelism (golden/cp.args: a dp x cp x tp
#                              mesh, two pipeline ranks) written with -o: plan.txt,
#                              the parallel, context, mesh and group keys of
#                              plan.json and the labels of plan.svg exactly as
#                              golden/cp.txt (but for the search and ILP times).
#   run.sh PTDC SRC nvl72      a GB200 NVL72 rack (golden/nvl72.args: 32 GPUs, hosts
#                              of 4, TP 16 inside the NVLink domain) written with
#                              -o: plan.txt's cluster, layout and rank grid,
#                              plan.json's cluster key and the devices label of
#                              plan.svg exactly as golden/nvl72.txt (the timings
#                              are other tests' business).
#   PTDC_UPDATE=1 rewrites the expected files from the actual output.
set -u
ptdc=$1
src=$2
what=$3
here=$(cd "$(dirname "$0")" && pwd)
case "$ptdc" in /*) ;; *) ptdc=$(pwd)/$ptdc ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 1
mask() { sed -E 's/[0-9]+(\.[0-9]+)?/N/g' "$1"; }

case "$what" in
cli)
    name=$4
    # shellcheck disable=SC2046
    "$ptdc" $(cat "$here/cli/$name.args") -o "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
    status=$?
    if [ "${PTDC_UPDATE:-}" = 1 ]; then
        cp "$tmp/stderr" "$here/cli/$name.err"
    fi
    fail=0
    if [ -f "$here/cli/$name.ok" ]; then
        [ $status -eq 0 ] || { echo "FAIL $name: exit status $status, expected 0"; fail=1; }
        for f in plan.txt plan.json plan.svg; do
            [ -s "$tmp/out/$f" ] || { echo "FAIL $name: $f not written"; fail=1; }
        done
        # keep only our lines: the code generation note is the driver's state, not the case's
        grep -v "code generation\|^ptdc: wrote" "$tmp/stderr" >"$tmp/stderr2"
        mv "$tmp/stderr2" "$tmp/stderr"
        [ "${PTDC_UPDATE:-}" = 1 ] && cp "$tmp/stderr" "$here/cli/$name.err"
    else
        want=1
        [ -f "$here/cli/$name.status" ] && want=$(cat "$here/cli/$name.status")
        [ $status -eq "$want" ] || { echo "FAIL $name: exit status $status, expected $want"; fail=1; }
        [ -s "$tmp/stdout" ] && { echo "FAIL $name: printed on stdout"; head -5 "$tmp/stdout"; fail=1; }
        if [ -e "$tmp/out" ] && [ -n "$(ls -A "$tmp/out")" ]; then
            echo "FAIL $name: wrote into the output directory despite the error:"
            ls -A "$tmp/out"
            fail=1
        fi
    fi
    if [ -f "$here/cli/$name.mask" ]; then
        mask "$here/cli/$name.err" >"$tmp/want"
        mask "$tmp/stderr" >"$tmp/got"
    else
        cp "$here/cli/$name.err" "$tmp/want"
        cp "$tmp/stderr" "$tmp/got"
    fi
    if ! cmp -s "$tmp/want" "$tmp/got"; then
        echo "FAIL $name: stderr differs from cli/$name.err"
        diff "$tmp/want" "$tmp/got" | head -20
        fail=1
    fi
    [ $fail -eq 0 ] && echo "ok $name"
    exit $fail
    ;;
golden)
    # shellcheck disable=SC2046
    "$ptdc" $(cat "$here/golden/small.args") --emit plan >"$tmp/plan" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
    grep -v "search time" "$tmp/plan" |
        sed -E 's/built in [0-9.]+ ms, solved in [0-9.]+ ms/built in T ms, solved in T ms/' >"$tmp/got"
    if [ "${PTDC_UPDATE:-}" = 1 ]; then
        cp "$tmp/got" "$here/golden/small.txt"
    fi
    if ! cmp -s "$here/golden/small.txt" "$tmp/got"; then
        echo "FAIL golden: plan differs from golden/small.txt"
        diff "$here/golden/small.txt" "$tmp/got" | head -40
        exit 1
    fi
    echo "ok golden"
    ;;
moe)
    # shellcheck disable=SC2046
    "$ptdc" $(cat "$here/golden/moe.args") -o "$tmp/out" --plan-only >"$tmp/stdout" 2>"$tmp/err" ||
        { cat "$tmp/err"; exit 1; }
    {
        grep -v "search time" "$tmp/out/plan.txt"
        echo "--- plan.json"
        grep -E '"experts"|"alltoall_s"|"active_params"' "$tmp/out/plan.json"
        echo "--- plan.svg"
        grep -o 'experts: [^<]*' "$tmp/out/plan.svg"
    } | sed -E 's/built in [0-9.]+ ms, solved in [0-9.]+ ms/built in T ms, solved in T ms/' >"$tmp/got"
    if [ "${PTDC_UPDATE:-}" = 1 ]; then
        cp "$tmp/got" "$here/golden/moe.txt"
    fi
    if ! cmp -s "$here/golden/moe.txt" "$tmp/got"; then
        echo "FAIL moe: plan differs from golden/moe.txt"
        diff "$here/golden/moe.txt" "$tmp/got" | head -40
        exit 1
    fi
    echo "ok moe"
    ;;
cp)
    # shellcheck disable=SC2046
    "$ptdc" $(cat "$here/golden/cp.args") -o "$tmp/out" --plan-only >"$tmp/stdout" 2>"$tmp/err" ||
        { cat "$tmp/err"; exit 1; }
    {
        grep -v "search time" "$tmp/out/plan.txt"
        echo "--- plan.json"
        grep -E '"parallel"|"context"|"mesh"|"axis[0-9]"|"pipeline"' "$tmp/out/plan.json"
        echo "--- plan.svg"
        grep -o 'context parallel: [^<]*\|Devices: [^<]*' "$tmp/out/plan.svg"
        grep -c 'stroke-dasharray="3,2"' "$tmp/out/plan.svg"
    } | sed -E 's/built in [0-9.]+ ms, solved in [0-9.]+ ms/built in T ms, solved in T ms/' >"$tmp/got"
    if [ "${PTDC_UPDATE:-}" = 1 ]; then
        cp "$tmp/got" "$here/golden/cp.txt"
    fi
    if ! cmp -s "$here/golden/cp.txt" "$tmp/got"; then
        echo "FAIL cp: plan differs from golden/cp.txt"
        diff "$here/golden/cp.txt" "$tmp/got" | head -40
        exit 1
    fi
    echo "ok cp"
    ;;
nvl72)
    # shellcheck disable=SC2046
    "$ptdc" $(cat "$here/golden/nvl72.args") -o "$tmp/out" --plan-only >"$tmp/stdout" 2>"$tmp/err" ||
        { cat "$tmp/err"; exit 1; }
    {
        sed -n '/^cluster/,/^$/p; /^layout/,/^$/p; /^rank grid/,/^$/p' "$tmp/out/plan.txt"
        echo "--- plan.json"
        grep -E '"cluster"' "$tmp/out/plan.json"
        echo "--- plan.svg"
        grep -o 'Devices: [^<]*' "$tmp/out/plan.svg"
    } >"$tmp/got"
    if [ "${PTDC_UPDATE:-}" = 1 ]; then
        cp "$tmp/got" "$here/golden/nvl72.txt"
    fi
    if ! cmp -s "$here/golden/nvl72.txt" "$tmp/got"; then
        echo "FAIL nvl72: plan differs from golden/nvl72.txt"
        diff "$here/golden/nvl72.txt" "$tmp/got" | head -40
        exit 1
    fi
    echo "ok nvl72"
    ;;
pinned)
    args="models/llama2-7b.mdl --gpus 64 --tp 2 --pp 4 --micro-batch 1 --global-batch 2048 --recompute none --sp on --zero 1 --schedule 1f1b --plan-only"
    # shellcheck disable=SC2086
    "$ptdc" $args >"$tmp/text" 2>"$tmp/err" || { echo "FAIL pinned: exit status"; cat "$tmp/err"; exit 1; }
    # shellcheck disable=SC2086
    "$ptdc" $args --json >"$tmp/json" 2>>"$tmp/err" || { echo "FAIL pinned --json: exit status"; exit 1; }
    fail=0
    grep -q "^prediction for llama on 64 x a100-80gb" "$tmp/text" || { echo "FAIL pinned: no prediction"; fail=1; }
    grep -q "mesh 8x2, pp 4 (v 1), 256 micro-batches of 8 sequences, zero 1" "$tmp/text" ||
        { echo "FAIL pinned: not the pinned layout"; head -3 "$tmp/text"; fail=1; }
    for k in step_time_s mfu peak_mem_bytes fits memory; do
        grep -q "\"$k\"" "$tmp/json" || { echo "FAIL pinned --json: no $k"; fail=1; }
    done
    [ -s "$tmp/err" ] && { echo "FAIL pinned: stderr"; cat "$tmp/err"; fail=1; }
    [ $fail -eq 0 ] && echo "ok pinned"
    exit $fail
    ;;
explain)
    "$ptdc" models/llama2-7b.mdl --gpus 64 --explain >"$tmp/out" 2>"$tmp/err" || { echo "FAIL explain: exit status"; cat "$tmp/err"; exit 1; }
    fail=0
    n=$(grep -cE '^ +[0-9]+  dp ' "$tmp/out")
    [ "$n" -eq 10 ] || { echo "FAIL explain: $n alternatives listed, expected 10"; fail=1; }
    for k in "more TP" "more PP" "recomputation on" "bigger micro-batch"; do
        grep -q "^  $k: " "$tmp/out" || { echo "FAIL explain: no runner-up '$k'"; fail=1; }
    done
    grep -q "slower mostly because of the" "$tmp/out" || { echo "FAIL explain: no reason given"; fail=1; }
    [ $fail -eq 0 ] && echo "ok explain"
    exit $fail
    ;;
cpu)
    # The benchmark model of bench/predict-vs-run on the VM's measured file.
    "$ptdc" models/llama.mdl --set n_layers=4 --set d_model=256 --set n_heads=8 --set n_kv_heads=4 \
        --set d_ff=704 --set vocab=4096 --set seq=256 --set global_batch=16 \
        --cluster tests/codegen/data/vm-cpu.cluster --gpus 2 --target cpu --emit plan >"$tmp/plan" 2>"$tmp/err" ||
        { echo "FAIL cpu: exit status"; cat "$tmp/err"; exit 1; }
    "$ptdc" models/tiny-llama.mdl --gpus 8 --emit plan >"$tmp/gpu" 2>>"$tmp/err" ||
        { echo "FAIL cpu: the GPU plan's exit status"; cat "$tmp/err"; exit 1; }
    fail=0
    grep -qE "^  2 x vm-cpu, 2 per node \(1 node\): 0\.1[0-9]{2} TFLOP/s fp32, " "$tmp/plan" ||
        { echo "FAIL cpu: cluster line"; grep "x vm-cpu" "$tmp/plan"; fail=1; }
    mfu=$(sed -nE 's/^  MFU +([0-9]+)\..*/\1/p' "$tmp/plan")
    [ "${mfu:-0}" -ge 100 ] || { echo "FAIL cpu: MFU ${mfu:-?}%, the case wants one over 100%"; fail=1; }
    grep -q "^                    (over 100%: MFU's formula counts the embedding lookup" "$tmp/plan" ||
        { echo "FAIL cpu: no note under an MFU over 100%"; grep -A1 "^  MFU" "$tmp/plan"; fail=1; }
    grep -q "over 100%" "$tmp/gpu" && { echo "FAIL cpu: the GPU plan has the note"; fail=1; }
    grep -q "TFLOP/s bf16" "$tmp/gpu" || { echo "FAIL cpu: the GPU plan's cluster line"; fail=1; }
    [ $fail -eq 0 ] && echo "ok cpu"
    exit $fail
    ;;
*)
    echo "usage: run.sh PTDC SRC cli NAME | golden | moe | cp | pinned | explain | cpu"
    exit 2
    ;;
esac
