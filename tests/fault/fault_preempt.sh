#!/usr/bin/env bash
# fault_preempt: stopping tiny-llama's program through run.sh (issue 36.3).
#   - SIGTERM to run.sh (kill, timeout(1), a scheduler) and SIGINT to its
#     process group (Ctrl-C): the ranks finish the step, save, print one line
#     saying so, and the job exits 75 (preempted); the step saved loads;
#   - a rank that cannot finish (SIGSTOP) within PTDC_STOP_GRACE: the others
#     abandon the step with a line and the job ends within the grace time;
#   - run.sh killed with -9: the ranks (in the launcher's own session) end.
set -u
work=$(mktemp -d /tmp/ptdc-fault-preempt.XXXXXX)
cleanup() {
  [ -n "${job:-}" ] && kill -KILL -- -"$job" 2>/dev/null
  [ -n "${stopped:-}" ] && kill -KILL "$stopped" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
. "$(dirname "$0")/prog.sh"
alive() { [ -r "/proc/$1/stat" ] && ! sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | grep -q '^Z'; }
secs() { echo "$(date +%s.%N) - $1" | bc; }
start() { # NAME ARGS...: run.sh in a process group of its own, once it trains
  : > "$work/$1.out"
  # as from a terminal: SIGINT not ignored (bash ignores it in the jobs it
  # starts with &, and a shell cannot trap a signal ignored on entry)
  python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setsid(); os.execv(sys.argv[1], sys.argv[1:])' "$prog/run.sh" "${@:2}" > "$work/$1.out" 2>&1 &
  job=$!
  for _ in $(seq 600); do grep -q "^step" "$work/$1.out" && break; sleep 0.05; done
  sleep 0.3
}
finish() { wait "$job"; rc=$?; job=; out=$(cat "$work/$1.out"); }
ranks() { pgrep -f "^$prog/train" | sort; }

for how in term int; do
  d=$work/$how
  start $how --steps 100000 --save "$d" --save-every 100000
  t0=$(date +%s.%N)
  if [ $how = term ]; then kill -TERM "$job"; else kill -INT -- -"$job"; fi
  finish $how
  echo "$how: the job ended $(secs "$t0") s after the signal"
  expect "SIG${how^^} to run.sh" 75 "^stopped by SIGUSR1 after step [0-9]* of 100000: saved checkpoint $d/step-[0-9]*; exit status 75 (preempted)"
  step=$(sed -n 's/^stopped by SIGUSR1 after step \([0-9]*\) .*/\1/p' <<<"$out")
  train --steps "$((step + 1))" --load "$d"
  expect "SIG${how^^}: resume" 0 "loaded checkpoint of step $step "
done

d=$work/grace
PTDC_STOP_GRACE=2 start grace --steps 100000 --save "$d" --save-every 100000
stopped=$(ranks | tail -n 1)
kill -STOP "$stopped"
t0=$(date +%s.%N)
kill -TERM "$job"
finish grace
t=$(secs "$t0")
kill -KILL "$stopped" 2>/dev/null; stopped=
expect "a stopped rank past the grace time" 75 "did not finish within the grace time of 2 s (PTDC_STOP_GRACE): abandoned"
if [ "$(echo "$t > 10" | bc)" = 1 ]; then echo "FAIL: the job took $t s to end, grace 2 s"; fail=1; fi
echo "grace: the job ended $t s after the signal"

start kill9 --steps 100000
mapfile -t pids < <(ranks)
kill -KILL "$job"
t0=$(date +%s.%N)
for _ in $(seq 100); do
  left=0; for p in "${pids[@]}"; do alive "$p" && left=1; done
  [ $left = 0 ] && break; sleep 0.05
done
{ wait "$job"; } 2>/dev/null; job=
if [ $left = 1 ]; then echo "FAIL: ranks ${pids[*]} outlived run.sh killed with -9"; fail=1
else echo "kill -9 of run.sh: the ranks (${pids[*]}) ended $(secs "$t0") s later"; fi
exit $fail
