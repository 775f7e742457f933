#!/bin/sh
# cli.sh PTDC SRC WORK: `ptdc calibrate` on this machine, end to end, at a
# small time budget: the file it writes parses and plans a CPU layout whose
# prediction comes from it; the kept records refit to the same file; and the
# command refuses what it cannot do, with a sentence.
set -u
ptdc=$1 src=$2 work=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$work"
mkdir -p "$work"
fail=0
"$ptdc" calibrate --quick --budget 0.004 --records "$work/rec" -o "$work/cpu.cluster" 2>"$work/log" || {
    echo "FAIL: calibrate failed"; cat "$work/log"; exit 1; }
for k in "device = cpu" "cores_per_node" "kernel.rmsnorm_fwd" "attention_fwd." "runtime_mib"; do
    grep -q "$k" "$work/cpu.cluster" || { echo "FAIL: the cluster file lacks '$k'"; fail=1; }
done
grep -q "part .* points .* median err" "$work/log" || { echo "FAIL: no summary table"; fail=1; }
grep -q "^calibrate: gemm " "$work/log" || { echo "FAIL: no progress on stderr"; fail=1; }
# Refitting the kept records gives the same file (but for its first line).
"$ptdc" calibrate --from "$work/rec" -o "$work/refit.cluster" 2>/dev/null || { echo "FAIL: --from"; fail=1; }
sed 1d "$work/cpu.cluster" > "$work/a"
sed 1d "$work/refit.cluster" > "$work/b"
cmp -s "$work/a" "$work/b" || { echo "FAIL: refitting the records changed the file"; diff "$work/a" "$work/b" | head; fail=1; }
# Several sets fit their medians: three copies of one set are that set.
"$ptdc" calibrate --from "$work/rec" --from "$work/rec" --from "$work/rec" -o "$work/merged.cluster" 2>/dev/null ||
    { echo "FAIL: --from three times"; fail=1; }
sed 1d "$work/merged.cluster" > "$work/c"
cmp -s "$work/a" "$work/c" || { echo "FAIL: the median of three identical sets changed the file"; diff "$work/a" "$work/c" | head; fail=1; }
# Plan CPU ranks with it: the prediction is the measured device's.
cd "$src" || exit 1
"$ptdc" models/tiny-llama.mdl --cluster "$work/cpu.cluster" --gpus 2 --dp 2 --tp 1 --pp 1 \
    --micro-batch 4 --recompute none --sp off --zero 0 --schedule 1f1b --plan-only --json \
    > "$work/pred.json" 2>"$work/plan.err" || { echo "FAIL: planning with the file"; cat "$work/plan.err"; fail=1; }
grep -q '"gpu": "[^"]*-cpu"' "$work/pred.json" || { echo "FAIL: the prediction is not on the CPU device"; fail=1; }
# A CPU cluster's programs are CPU programs.
"$ptdc" models/tiny-llama.mdl --cluster "$work/cpu.cluster" --gpus 2 --target cuda -o "$work/x" 2>"$work/e1" && {
    echo "FAIL: --target cuda with a CPU cluster was accepted"; fail=1; }
grep -q "CPU programs (--target cpu)" "$work/e1" || { echo "FAIL: message"; cat "$work/e1"; fail=1; }
# Refusals.
check() { # want, args...
    want=$1; shift
    "$ptdc" calibrate "$@" >"$work/out" 2>&1 && { echo "FAIL: calibrate $* succeeded"; fail=1; }
    grep -qe "$want" "$work/out" || { echo "FAIL: calibrate $*: want '$want', got:"; cat "$work/out"; fail=1; }
}
check "unknown option '--bogus'" --bogus
check "--target expects cpu or cuda" --target tpu
check "--ranks expects 1 to 4096" --ranks 0
check "--budget expects seconds" --budget -1
check "cannot read '$work/none/full.records'" --from "$work/none"
mkdir -p "$work/bad"
printf 'meta backend cpu ranks 2 act_bytes 4\ngemm 1 2 3\nend\n' > "$work/bad/full.records"
check "full:2: malformed calibration record 'gemm'" --from "$work/bad"
mkdir -p "$work/other"
sed 's/^meta backend cpu ranks [0-9]*/meta backend cpu ranks 64/' "$work/rec/full.records" > "$work/other/full.records"
check "full: record 'meta backend ...' of set 1 is not in set 2: sets of different runs" --from "$work/rec" --from "$work/other"
mkdir -p "$work/part"
cp "$work/rec/full.records" "$work/part/"
check "solo.records is in 1 of the 2 --from directories" --from "$work/rec" --from "$work/part"
if [ -x "$(dirname "$ptdc")/../runtime/measure/cuda/ptdc-measure-cuda" ] && ! command -v nvidia-smi >/dev/null 2>&1; then
    check "needs a GPU, and this machine has none" --target cuda
fi
[ $fail -eq 0 ] && echo "calibrate cli: ok ($(grep -c '' "$work/cpu.cluster") lines)"
exit $fail
