#!/usr/bin/env bash
# fault_ckpt_kill: SIGKILL just before every phase of a save (each mkdir,
# unlink, fsync, rename and rmdir, and every fifth write of a run saving
# steps 1..4 of 3 ranks, keeping 2). After each kill:
#   - the step that loads is exactly the newest whose manifest the killed run
#     had renamed into place (from the shim's log), its data intact, or, if
#     none was, the load is refused ("no complete checkpoint");
#   - the run resumes from there and saves steps up to 6 over whatever the
#     kill left behind, and step 6 then loads.
set -u
bin=$1 shim=$2
prog=$bin/fault_ckpt
work=$(mktemp -d /tmp/ptdc-fault-kill.XXXXXX)
# every run counts its calls through the shim, without real fsyncs (which
# only make a save durable against power loss, not against a kill)
export LD_PRELOAD=$shim FAULT_NO_SYNC=1
trap 'rm -rf "$work"' EXIT
fail=0 points=0

expect() { # expect NAME EXPECTED-RC PATTERN OUTPUT RC
  if [ "$5" -ne "$2" ] || ! grep -q -- "$3" <<<"$4"; then
    echo "FAIL: $1: exit $5 (want $2), output lacks '$3':"; echo "$4" | sed 's/^/    /'
    fail=1
  fi
}

for ev in mkdir unlink fsync rename rmdir write; do
  stride=1
  [ $ev = write ] && stride=5
  k=1
  while :; do
    d=$work/$ev-$k
    log=$work/$ev-$k.log
    out=$(FAULT_KILL_AT=$ev:$k FAULT_LOG=$log "$prog" "$d" 4 2 2>&1)
    rc=$?
    if [ $rc -ne 137 ]; then # fewer than k such calls: the run completed
      expect "$ev:$k (no kill)" 0 "saved step 4" "$out" $rc
      break
    fi
    points=$((points + 1))
    want=$(sed -n 's|^rename .*/step-0*\([0-9][0-9]*\)/manifest\.json$|\1|p' "$log" 2>/dev/null | tail -1)
    if [ -z "$want" ]; then
      out=$("$prog" "$d" 6 2 load 2>&1); rc=$?
      expect "$ev:$k load with nothing committed" 2 "no complete checkpoint\|holds no checkpoint\|cannot open checkpoint directory" "$out" $rc
      out=$("$prog" "$d" 6 2 2>&1); rc=$?
      expect "$ev:$k fresh run over the leftovers" 0 "saved step 6" "$out" $rc
    else
      out=$("$prog" "$d" 6 2 load 2>&1); rc=$?
      expect "$ev:$k resume" 0 "loaded step $want$" "$out" $rc
      expect "$ev:$k resume" 0 "saved step 6" "$out" $rc
    fi
    out=$("$prog" "$d" 6 2 load 2>&1); rc=$?
    expect "$ev:$k final load" 0 "loaded step 6$" "$out" $rc
    [ $fail -eq 0 ] && rm -rf "$d" "$log"
    k=$((k + stride))
  done
done
echo "$points kill points"
[ $points -ge 60 ] || { echo "FAIL: only $points kill points"; fail=1; }
exit $fail
