#!/usr/bin/env bash
# fault_ckpt_mpi: checkpoints of 2 real ranks (mpirun), with the records
# gathered and the outcome agreed as a trainer does:
#   - rank 1 killed just before it renames its file into place (step 3):
#     the job dies, step 2 loads on both ranks and the run resumes;
#   - rank 1's disk full while saving step 3: rank 1 names its file, rank 0
#     refuses the commit naming rank 1, every rank exits 1; step 2 loads.
set -u
bin=$1 shim=$2 mpirun=$3
prog=$bin/fault_ckpt
work=$(mktemp -d /tmp/ptdc-fault-mpi.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0
run() { timeout 120 "$mpirun" --oversubscribe -np 2 "$@" 2>&1; }

expect() { # expect NAME EXPECTED-RC PATTERN OUTPUT RC
  if { [ "$2" = nonzero ] && [ "$5" -eq 0 ]; } || { [ "$2" != nonzero ] && [ "$5" -ne "$2" ]; } ||
     ! grep -q -- "$3" <<<"$4"; then
    echo "FAIL: $1: exit $5 (want $2), output lacks '$3':"; echo "$4" | sed 's/^/    /'
    fail=1
  fi
}

d=$work/kill
out=$(run "$prog" "$d" 2 2); rc=$?
expect "clean save" 0 "saved step 2" "$out" $rc
# rank 1's renames: its file of step 3 is its first rename of this run
out=$(run -x LD_PRELOAD=$shim -x FAULT_ONLY_RANK=1 -x FAULT_KILL_AT=rename:1 "$prog" "$d" 4 2 load); rc=$?
expect "rank 1 killed" nonzero "loaded step 2" "$out" $rc
grep -q "saved step 3" <<<"$out" && { echo "FAIL: step 3 committed without rank 1"; fail=1; }
out=$(run "$prog" "$d" 4 2 load); rc=$?
expect "resume after the kill" 0 "loaded step 2$" "$out" $rc
expect "resume after the kill" 0 "saved step 4" "$out" $rc

d=$work/full
out=$(run "$prog" "$d" 2 2); rc=$?
out=$(run -x LD_PRELOAD=$shim -x FAULT_ONLY_RANK=1 -x FAULT_ENOSPC_AFTER=100 "$prog" "$d" 4 2 load); rc=$?
expect "rank 1 disk full" 1 "\[rank 1\] .*step-000000003/rank00001.ckpt: cannot write: No space left on device" "$out" $rc
expect "rank 1 disk full" 1 "\[rank 0\] .*step 3 not committed: rank 1 could not write its file (No space left on device)" "$out" $rc
out=$(run "$prog" "$d" 2 2 load); rc=$?
expect "load after the full disk" 0 "loaded step 2$" "$out" $rc
echo "$out"
exit $fail
