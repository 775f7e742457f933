#!/usr/bin/env bash
# fault_stall: a rank that stops (SIGSTOP) while the others wait for it in a
# collective, a receive that is never matched, and a non-blocking collective
# one rank never issues. Every waiting rank must
# abort within the timeout (2 s here) plus the census grace, with one line
# naming the rank that did not arrive; nothing may hang. The bound allowed
# (15 s, for mpirun's start, the 2 s timeout and the census grace) leaves
# room for a loaded machine; the times measured are printed.
set -u
bin=$1 shim=$2 mpirun=$3
prog=$bin/fault_mpi
work=$(mktemp -d /tmp/ptdc-fault-stall.XXXXXX)
fail=0
cleanup() { # a stopped rank mpirun could not kill must not outlive the test
  for f in "$work"/*/pid.*; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

check() { # NAME OUTPUT RC SECONDS PATTERN
  local n
  n=$(grep -c -- "$5" <<<"$2")
  if [ "$3" -eq 0 ] || [ "$n" -lt 1 ] || [ "$(echo "$4 > 15" | bc)" = 1 ]; then
    echo "FAIL: $1: exit $3 after $4 s, $n line(s) matching '$5':"; echo "$2" | sed 's/^/    /'
    fail=1
  else
    echo "$1: aborted after $4 s: $(grep -m1 -- "$5" <<<"$2")"
  fi
}

timed() { # runs "$@", sets out, rc, secs
  local t0 t1
  t0=$(date +%s.%N)
  out=$(PTDC_TIMEOUT=2 timeout 60 "$@" 2>&1); rc=$?
  t1=$(date +%s.%N)
  secs=$(echo "$t1 - $t0" | bc)
}

# rank 2 stops itself between two all-reduces (outside any MPI call)
mkdir -p "$work/a"
timed "$mpirun" --oversubscribe -np 3 -x FAULT_STOP_RANK=2 -x FAULT_STOP_AT=300 -x PTDC_TIMEOUT "$prog" stall "$work/a"
check "SIGSTOP inside rank 2" "$out" $rc "$secs" \
  "^\[rank [01]\] stalled: rt_allreduce #[0-9]* on the world (3 ranks) has not completed in [0-9.]* s (timeout 2 s): rank 2 did not arrive: it does not respond (stopped, hung, or lost with its node)"

# rank 1 stopped from outside, wherever it is (most often inside MPI)
mkdir -p "$work/b"
( PTDC_TIMEOUT=2 timeout 60 "$mpirun" --oversubscribe -np 3 -x PTDC_TIMEOUT "$prog" stall "$work/b" > "$work/b.out" 2>&1; echo $? > "$work/b.rc" ) &
for _ in $(seq 200); do [ -f "$work/b/pid.1" ] && break; sleep 0.05; done
sleep 0.5
t0=$(date +%s.%N)
kill -STOP "$(cat "$work/b/pid.1")"
wait
secs=$(echo "$(date +%s.%N) - $t0" | bc)
check "SIGSTOP of rank 1 from outside" "$(cat "$work/b.out")" "$(cat "$work/b.rc")" "$secs" \
  "stalled: rt_allreduce .*: rank 1 did not arrive: it does not respond (stopped, hung, or lost with its node)"

# a receive its peer never sends: the peer is named, with where it is
mkdir -p "$work/c"
timed "$mpirun" --oversubscribe -np 2 -x PTDC_TIMEOUT "$prog" p2p "$work/c"
check "unmatched receive" "$out" $rc "$secs" \
  "^\[rank 0\] stalled: rt_wait for a receive (rank 1, tag 7) has not completed in [0-9.]* s (timeout 2 s): rank 1 is the peer: it has been outside any collective for [0-9.]* s (busy or hung)"

# a chain: rank 0 waits for rank 1, which waits for rank 2 (stopped) in a
# group without rank 0; whichever rank fires first names rank 2, in every
# trial (before, the census asked the waiting group only, and rank 0 named
# rank 1 in about half of them)
for trial in 1 2 3; do
  mkdir -p "$work/chain$trial"
  timed "$mpirun" --oversubscribe -np 3 -x PTDC_TIMEOUT "$prog" chain "$work/chain$trial"
  check "chain, trial $trial" "$out" $rc "$secs" "stalled: .*rank 2.* does not respond (stopped, hung, or lost with its node"
done

# a non-blocking all-reduce rank 2 never issues: the waits name it
mkdir -p "$work/d"
timed "$mpirun" --oversubscribe -np 3 -x PTDC_TIMEOUT "$prog" async "$work/d"
check "non-blocking collective never issued" "$out" $rc "$secs" \
  "^\[rank [01]\] stalled: rt_wait for rt_iallreduce #2 on the world (3 ranks) has not completed in [0-9.]* s (timeout 2 s): rank 2 did not arrive: it has been outside any collective for [0-9.]* s (busy or hung)"
exit $fail
