#!/usr/bin/env bash
# fault_ckpt_swap: rank files swapped, copied over each other, mixed in from
# another run, or damaged inside after a save. The resuming run (3 ranks)
# must name what is wrong with the newest step (the note of
# rt_ckpt_open_latest, or the read that found the damage) and resume from the
# step before it, with every rank's data intact.
set -u
bin=$1
prog=$bin/fault_ckpt
work=$(mktemp -d /tmp/ptdc-fault-swap.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail=0

case_() { # NAME EXPECTED-NOTE; the step directory to damage is $s3
  local out rc
  out=$("$prog" "$d" 3 3 load 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! grep -q -- "$2" <<<"$out" || ! grep -q "^loaded step 2$" <<<"$out"; then
    echo "FAIL: $1: exit $rc, want '$2' and step 2:"; echo "$out" | sed 's/^/    /'; fail=1
  else
    echo "$1: $(grep -m1 -- "$2" <<<"$out" | sed "s|$work/||")"
  fi
}

fresh() {
  d=$work/$1
  s3=$d/step-000000003
  "$prog" "$d" 3 3 > /dev/null 2>&1 || { echo "FAIL: save"; exit 1; }
}

fresh swap
mv "$s3/rank00000.ckpt" "$s3/x"; mv "$s3/rank00001.ckpt" "$s3/rank00000.ckpt"; mv "$s3/x" "$s3/rank00001.ckpt"
case_ "swapped" "holds rank 1's state, not rank 0's (rank files swapped or copied over each other?)"

fresh copied
cp "$s3/rank00000.ckpt" "$s3/rank00002.ckpt"
case_ "copied over" "rank00002.ckpt: holds rank 0's state, not rank 2's"

fresh mixed
"$prog" "$work/other" 3 3 > /dev/null 2>&1
cp "$work/other/step-000000003/rank00001.ckpt" "$s3/rank00001.ckpt"
case_ "another run" "rank00001.ckpt: belongs to run [0-9a-f]*, the manifest to run [0-9a-f]* (a rank file mixed in from another run?)"

fresh flipped
# a payload byte of rank 1's file: header, trailer and manifest still agree,
# so only the read finds it; the run then takes the step before
printf '\x55' | dd of="$s3/rank00001.ckpt" bs=1 seek=400 conv=notrunc status=none
case_ "damaged payload" "step 3: .*rank00001.ckpt: corrupted checkpoint file: CRC-32C mismatch"
exit $fail
