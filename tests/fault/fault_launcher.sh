#!/usr/bin/env bash
# fault_launcher: mpirun killed with -9 while 2 ranks train; both ranks must
# be gone within 1 s (the watchdog checks every 25 ms; measured ~50 ms).
set -u
bin=$1 shim=$2 mpirun=$3
work=$(mktemp -d /tmp/ptdc-fault-launch.XXXXXX)
cleanup() {
  for f in "$work"/pid.*; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# alive PID: exists and is not a zombie (a dead rank whose new parent has
# not reaped it yet counts as gone)
alive() { [ -r "/proc/$1/stat" ] && ! sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | grep -q '^Z'; }

"$mpirun" --oversubscribe -np 2 "$bin/fault_mpi" loop "$work" > "$work/out" 2>&1 &
launcher=$!
for _ in $(seq 400); do [ -f "$work/pid.0" ] && [ -f "$work/pid.1" ] && break; sleep 0.05; done
sleep 0.3
p0=$(cat "$work/pid.0") p1=$(cat "$work/pid.1")
alive "$p0" && alive "$p1" || { echo "FAIL: the ranks did not start"; exit 1; }
t0=$(date +%s.%N)
kill -9 $launcher
while alive "$p0" || alive "$p1"; do
  if [ "$(echo "$(date +%s.%N) - $t0 > 5" | bc)" = 1 ]; then break; fi
  sleep 0.005
done
secs=$(echo "$(date +%s.%N) - $t0" | bc)
wait $launcher 2>/dev/null
if alive "$p0" || alive "$p1" || [ "$(echo "$secs > 1" | bc)" = 1 ]; then
  echo "FAIL: ranks still alive $secs s after mpirun was killed"; exit 1
fi
echo "ranks gone $secs s after kill -9 of mpirun"
