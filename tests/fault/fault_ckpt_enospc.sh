#!/usr/bin/env bash
# fault_ckpt_enospc: after a clean save of steps 1-2 (3 ranks), the disk
# fills after N bytes (N at 14 points from 0 to past a whole save) while
# steps 3-5 are saved; then fsync fails with EIO. Each time:
#   - the failed save names the file and the error, and exits 1;
#   - no temporary file stays behind;
#   - the newest step saved before the failure loads, its data intact;
#   - with space again, the run resumes and saves step 5.
set -u
bin=$1 shim=$2
prog=$bin/fault_ckpt
work=$(mktemp -d /tmp/ptdc-fault-enospc.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0

expect() { # expect NAME EXPECTED-RC PATTERN OUTPUT RC
  if [ "$5" -ne "$2" ] || ! grep -q -- "$3" <<<"$4"; then
    echo "FAIL: $1: exit $5 (want $2), output lacks '$3':"; echo "$4" | sed 's/^/    /'
    fail=1
  fi
}

check_failed_save() { # NAME DIR OUTPUT RC ERROR-TEXT
  expect "$1" 1 "$5" "$3" $4
  expect "$1" 1 "save of step [0-9]* failed" "$3" $4
  expect "$1" 1 "rank0000[0-2]\.ckpt\|manifest\.json" "$3" $4
  local tmps
  tmps=$(find "$2" -name '*.tmp.*')
  [ -z "$tmps" ] || { echo "FAIL: $1: temporaries left: $tmps"; fail=1; }
  local want
  want=$(sed -n 's/^saved step //p' <<<"$3" | tail -1)
  want=${want:-2}
  local out rc
  out=$("$prog" "$2" "$want" 2 load 2>&1); rc=$?
  expect "$1: load after the failure" 0 "loaded step $want$" "$out" $rc
  out=$("$prog" "$2" 5 2 load 2>&1); rc=$?
  expect "$1: resume" 0 "saved step 5" "$out" $rc
  echo "$1: step $want loads; $(grep -m1 'No space\|Input/output' <<<"$3")"
}

for n in 0 1 50 96 97 300 600 700 1200 1900 2300 2400 3000 6000; do
  d=$work/n$n
  out=$("$prog" "$d" 2 2 2>&1); rc=$?
  expect "clean save" 0 "saved step 2" "$out" $rc
  out=$(LD_PRELOAD=$shim FAULT_ENOSPC_AFTER=$n "$prog" "$d" 5 2 load 2>&1); rc=$?
  check_failed_save "ENOSPC after $n bytes" "$d" "$out" $rc "No space left on device"
done

d=$work/eio
out=$("$prog" "$d" 2 2 2>&1); rc=$?
out=$(LD_PRELOAD=$shim FAULT_FSYNC_EIO=1 "$prog" "$d" 5 2 load 2>&1); rc=$?
check_failed_save "fsync EIO" "$d" "$out" $rc "cannot fsync.*Input/output error"
exit $fail
