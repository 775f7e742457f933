#!/bin/sh
# tp_overlap.sh PTDC SRC: --tp-overlap (issue 35). Refused with one sentence
# and status 1, writing nothing, where it cannot apply (sequence parallelism
# off, no tensor parallelism, a framework's stack, a bad value); on, the
# plan files say it and the ptdc stack prices it (tp_overlap chunked): on a
# GPU cluster a tp 8 SP plan of a 7B-sized layer is predicted faster
# chunked; off, the plan files say nothing of it.
set -u
ptdc=$1
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
m=models/tiny-llama.mdl

refused() { # WANT ARGS...
    want=$1
    shift
    out=$("$ptdc" $m "$@" -o "$tmp/out" 2>&1)
    rc=$?
    if [ $rc -ne 1 ] || [ "$out" != "ptdc: error: $want" ] || [ -e "$tmp/out" ]; then
        echo "FAIL: $*: status $rc, '$out' (want 'ptdc: error: $want')"; fail=1
    fi
}
refused "--tp-overlap on chunks the tensor-parallel gathers and reduce-scatters of sequence parallelism, but --sp is off" \
    --tp-overlap on --sp off
refused "--tp-overlap on chunks the tensor-parallel gathers and reduce-scatters of sequence parallelism, but --tp is 1" \
    --tp-overlap on --tp 1
refused "--tp-overlap expects one of on, off, got 'yes'" --tp-overlap yes
refused "--tp-overlap chunks ptdc's own programs, and the megatron stack runs another framework's (its key tp_overlap says how: --stack-set tp_overlap=...)" \
    --tp-overlap on --stack megatron

for v in on off; do
    "$ptdc" $m --gpus 2 --tp 2 --sp on --tp-overlap $v --target cpu --plan-only -o "$tmp/$v" > /dev/null 2>&1 ||
        { echo "FAIL: --tp-overlap $v did not plan"; fail=1; }
done
grep -q '^  tp overlap         chunked' "$tmp/on/plan.txt" || { echo "FAIL: plan.txt does not say tp overlap"; fail=1; }
grep -q '"tp_overlap": {"chunked": true, "rs_splits": 4}' "$tmp/on/plan.json" ||
    { echo "FAIL: plan.json does not say tp_overlap"; fail=1; }
! grep -q 'tp.overlap' "$tmp/off/plan.txt" "$tmp/off/plan.json" || { echo "FAIL: off, yet the plan says tp overlap"; fail=1; }
"$ptdc" --emit stack --tp-overlap on | grep -q '^tp_overlap *= chunked' || { echo "FAIL: the stack is not tp_overlap chunked"; fail=1; }

# Priced: a 7B-sized layer at tp 8 on the default GPUs.
big="--set d_model=4096 --set n_heads=32 --set n_kv_heads=8 --set d_ff=11008 --set seq=4096 --global-batch 8"
step() { "$ptdc" $m $big --gpus 8 --tp 8 --sp on --pp 1 --tp-overlap "$1" --json 2>/dev/null |
         sed -n 's/.*"step_time_s": \([0-9.e-]*\).*/\1/p' | head -1; }
on=$(step on) off=$(step off)
awk -v a="$on" -v b="$off" 'BEGIN { exit !(a > 0 && b > 0 && a < b) }' ||
    { echo "FAIL: chunked predicted $on s, unchunked $off s (want faster)"; fail=1; }
[ $fail = 0 ] && echo "tp_overlap: all checks passed"
exit $fail
