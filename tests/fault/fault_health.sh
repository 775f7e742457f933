#!/usr/bin/env bash
# fault_health: stragglers found from measurements, and where every rank is
# when a stall aborts the job (PTDC_HEALTH, rt_set_where; docs/runtime.md).
# tiny-llama on 4 CPU ranks, pp 2 x 2 replicas, so each rank has a peer in
# its pipeline stage to be compared with.
#   - healthy: every window says "no straggler" and no rank is named;
#   - PTDC_HEALTH_TEST_SLOW_RANK=3 (then 0): that rank sleeps 600 ms per
#     step (tiny-llama computes ~3 ms per step here in release, ~40 ms
#     under ASan, where a 100 ms sleep made only 3-4x) and is named the
#     straggler in every window, with the measured times; no other rank is
#     named, and its receivers' waits are not blamed on a link;
#   - PTDC_HEALTH=0: no health line;
#   - --diagnose: the GEMM, all-reduce and pipeline figures, and a rank
#     whose GEMMs are slowed named as falling short, no other;
#   - a hang (rank 2 sleeps 600 s in its first step, PTDC_TIMEOUT=2): every
#     rank prints where it is before the abort: the sleeping rank outside
#     any collective before the schedule, the others in the call they wait
#     in, with step, stage op and last call;
#   - rank 3 stopped with SIGSTOP from outside after step 20: ranks 0-2
#     print their positions and the stall line names rank 3 as not
#     responding.
# Thresholds: the tests set PTDC_HEALTH_SLOW=6 (and PTDC_HEALTH_LINK, below). This 2-core VM runs the 4
# ranks oversubscribed and shares its cores with other jobs: healthy ranks'
# compute (median over a window) measured up to 2.72x their stage peer's there (docs/runtime.md),
# while the slowed rank's is over 15x even under ASan; 6 leaves a factor of 2
# both ways.
set -u
bin=$1 shim=$2 mpirun=$3 ptdc=$4 src=$5
work=$(mktemp -d /tmp/ptdc-fault-health.XXXXXX)
trap 'rm -rf "$work"' EXIT
PROG_LAYOUT="--gpus 4 --pp 2"
. "$(dirname "$0")/prog.sh"
# PTDC_HEALTH_LINK=0.3: a slow link must cost over 30% of the step, not 10%:
# oversubscribed here, a healthy rank descheduled while its receive completes
# waited 5.7 ms of a 47.5 ms step against its peer's 0.0 (a clean-clone run
# on 2026-11-30).
export PTDC_HEALTH_EVERY=10 PTDC_HEALTH_SLOW=6 PTDC_HEALTH_LINK=0.3

train --steps 20
has "healthy" "^health: steps 2-10: no straggler, no slow pipeline link"
has "healthy" "^health: steps 11-20: no straggler, no slow pipeline link"
lacks "healthy" "^straggler:"
lacks "healthy" "^slow link"
[ "$rc" -eq 0 ] || { echo "FAIL: healthy run exited $rc"; fail=1; }

for r in 3 0; do
  name=$([ $r = 3 ] && echo "rank 3 (pp 1, rep 1)" || echo "rank 0 (pp 0, rep 0)")
  PTDC_HEALTH_TEST_SLOW_RANK=$r PTDC_HEALTH_TEST_SLOW_MS=600 train --steps 20
  has "rank $r slowed" "^straggler: $name computes [0-9.]* ms per step against a median of [0-9.]* ms ([0-9.]*x) over steps \(2-10\|11-20\)" 2
  lacks "rank $r slowed" "^straggler: rank [^$r] "
  lacks "rank $r slowed" "^slow link"
  lacks "rank $r slowed" "no straggler"
  [ "$rc" -eq 0 ] || { echo "FAIL: rank $r slowed: exit $rc"; fail=1; }
done

PTDC_HEALTH=0 train --steps 12
lacks "PTDC_HEALTH=0" "^health:"
[ "$rc" -eq 0 ] || { echo "FAIL: PTDC_HEALTH=0: exit $rc"; fail=1; }

# --diagnose: every rank's GEMM rate beside the others' and the plan's
# peak; rank 1's GEMMs stretched 60x (PTDC_HEALTH_TEST_SLOW_RANK: a sleep
# of 59x each GEMM's own time) fall short, no other rank's do. Measured on
# the loaded 2-core VM: the slowed rank 13-14x below the median (the others'
# GEMMs speed up while it sleeps), healthy ranks at most 2.07x below it;
# threshold 6. The link figures are printed but not checked: on this
# shared VM they vary up to 4x between ranks from one run to the next.
train --diagnose --steps 0
has "diagnose" "^diagnose: GEMM 256x256x256: median [0-9.]* GFLOP/s over 4 ranks"
has "diagnose" "^diagnose: the plan assumed a100-80gb at 312.0 TFLOP/s peak (plan.json)"
has "diagnose" "^diagnose: all-reduce 4 MiB, bus bandwidth, stage groups rep: median"
has "diagnose" "^diagnose: pipeline receive 4 MiB from the previous stage: median [0-9.]* GB/s over 2 ranks"
lacks "diagnose" "falls short: .*: GEMM"
PTDC_HEALTH_TEST_SLOW_RANK=1 train --diagnose --steps 0
has "diagnose, rank 1 slowed" "^diagnose: falls short: rank 1 (pp 0, mesh index 1): GEMM 256x256x256 [0-9.]* GFLOP/s against a median of"
lacks "diagnose, rank 1 slowed" "falls short: rank [023] .*: GEMM"

# A hang: rank 2 (pp 1) sleeps in its first step; rank 0 waits to receive
# from it, ranks 1 and 3 reach the optimizer's all-reduce.
t0=$(date +%s)
PTDC_TIMEOUT=2 PTDC_HEALTH_TEST_SLOW_RANK=2 PTDC_HEALTH_TEST_SLOW_MS=600000 train --steps 5
secs=$(( $(date +%s) - t0 ))
has "hang" "^\[rank 2\] where at the stall ([a-z' 0-9]*): outside any collective; trainer: step 1, before the schedule, last call entered none yet"
has "hang" "^\[rank 0\] where at the stall ([a-z' 0-9]*): waits in rt_wait for a receive (rank 2, tag [0-9]*); trainer: step 1, \(forward\|backward\) of micro-batch [0-9]* (chunk 0), last call entered cg_recv"
for k in 1 3; do
  has "hang" "^\[rank $k\] where at the stall ([a-z' 0-9]*): waits in \(rt_allreduce #[0-9]* on\|rt_wait for a receive (rank\)[^;]*; trainer: step 1, "
done
has "hang" "stalled: .*rank 2 .*outside any collective for [0-9.]* s (busy or hung)"
if [ "$rc" -eq 0 ] || [ "$secs" -gt 30 ]; then
  echo "FAIL: hang: exit $rc after $secs s (want nonzero within 30 s)"; fail=1
fi
# A rank stopped from outside (SIGSTOP) mid-run: it cannot speak, so the
# three others each print their position, and the stall line names it as
# not responding. (mpirun sends SIGCONT with the abort: rank 3 may then
# answer a later census and print its line too.)
( PTDC_TIMEOUT=2 timeout 120 "$prog/run.sh" --steps 100000 > "$work/stop.out" 2>&1; echo $? > "$work/stop.rc" ) &
pid=
for _ in $(seq 600); do
  if grep -q "^step    20/" "$work/stop.out" 2>/dev/null; then
    for p in $(pgrep -f "^$prog/train"); do # this test's ranks; which one is world rank 3
      tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=3" && pid=$p
    done
    break
  fi
  sleep 0.1
done
if [ -z "$pid" ]; then
  echo "FAIL: SIGSTOP: rank 3 of the run not found"; fail=1
else
  kill -STOP "$pid"
fi
wait
[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
out=$(cat "$work/stop.out"); rc=$(cat "$work/stop.rc")
for k in 0 1 2; do
  has "SIGSTOP of rank 3" "^\[rank $k\] where at the stall ([a-z' 0-9]*): [^;]*; trainer: step [0-9]*, "
done
has "SIGSTOP of rank 3" "stalled: .*rank 3 .*does not respond (stopped, hung, or lost with its node)"
[ "$rc" -ne 0 ] || { echo "FAIL: SIGSTOP of rank 3: exit 0"; fail=1; }
exit $fail
