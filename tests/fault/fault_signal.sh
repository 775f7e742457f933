#!/usr/bin/env bash
# fault_signal: preemption. SIGTERM to one of 3 ranks, and SIGUSR1 to mpirun
# (which forwards it to every rank): every rank reports stopping after the
# same step, with the signal, and the job exits 0. A second SIGTERM to a
# process that already has a stop pending ends it.
set -u
bin=$1 shim=$2 mpirun=$3
prog=$bin/fault_mpi
work=$(mktemp -d /tmp/ptdc-fault-signal.XXXXXX)
cleanup() {
  for f in "$work"/*/pid.*; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fail=0

one() { # NAME SIGNAL TARGET(rank number or "mpirun") EXPECTED-SIGNAL-NUMBER
  local d=$work/$1
  mkdir -p "$d"
  # no timeout(1) in between: the signal must reach mpirun itself
  "$mpirun" --oversubscribe -np 3 "$prog" stop "$d" > "$d.out" 2>&1 &
  local launcher=$!
  for _ in $(seq 400); do [ -f "$d/pid.0" ] && [ -f "$d/pid.1" ] && [ -f "$d/pid.2" ] && break; sleep 0.05; done
  sleep 0.5
  if [ "$3" = mpirun ]; then kill -"$2" $launcher; else kill -"$2" "$(cat "$d/pid.$3")"; fi
  wait $launcher
  local rc=$? out
  out=$(cat "$d.out")
  local steps
  steps=$(sed -n "s/^rank [0-2]: stopped after step \([0-9]*\) (signal $4)$/\1/p" <<<"$out" | sort -u)
  if [ $rc -ne 0 ] || [ "$(grep -c "stopped after step" <<<"$out")" != 3 ] || [ "$(wc -w <<<"$steps")" != 1 ]; then
    echo "FAIL: $1: exit $rc:"; echo "$out" | sed 's/^/    /'; fail=1
  else
    echo "$1: all 3 ranks stopped after step $steps"
  fi
}
one sigterm-rank1 TERM 1 15
one sigusr1-mpirun USR1 mpirun 10

# a second SIGTERM ends a process whose first one is still pending
d=$work/twice
mkdir -p "$d"
"$mpirun" --oversubscribe -np 2 -x FAULT_STOP_IGNORE=1 "$prog" stop "$d" > "$d.out" 2>&1 &
launcher=$!
for _ in $(seq 400); do [ -f "$d/pid.1" ] && break; sleep 0.05; done
sleep 0.3
p1=$(cat "$d/pid.1")
kill -TERM "$p1"; sleep 0.2; kill -TERM "$p1"
wait $launcher
rc=$?
if [ $rc -eq 0 ]; then echo "FAIL: a second SIGTERM did not end rank 1"; cat "$d.out"; fail=1
else echo "second SIGTERM: the job ended (exit $rc)"; fi
exit $fail
