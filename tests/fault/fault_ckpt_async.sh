#!/usr/bin/env bash
# fault_ckpt_async: asynchronous saves against synchronous ones (issue 35),
# tiny-llama's program on 2 ranks.
#   - the same steps saved asynchronously (step 2 while training goes on,
#     step 4 at the end) and with --save-sync give the same rank files, byte
#     for byte but for the run id in the header and the CRC-32C that covers
#     it (each run draws its own id);
#   - saves back to back (--save-every 1, the writer slowed by
#     PTDC_CKPT_WRITE_DELAY_MS): each waits for the one before and says how
#     long, every step commits in order, the losses are those of the run
#     without the delay, the rank files again those of the synchronous
#     save, and the last step loads;
#   - rank 1's disk full while its writer writes: the job ends 1 naming the
#     rank and the error, no temporary stays, the step before loads;
#   - a save refused (non-finite next loss) while the step before is still
#     being written: that step is committed before the job ends, and loads.
set -u
shim=$2
work=$(mktemp -d /tmp/ptdc-fault-async.XXXXXX)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/prog.sh"
common="--data synthetic:7 --steps 4"
losses() { grep '^step' <<<"$out" | awk '{split($2, s, "/"); print s[1], $5}'; }
# same_files A B: rank files of A and B equal but for the run id (bytes
# 64..79 of the header) and the trailer's CRC-32C (the last 8 bytes' first 4).
same_files() {
  python3 - "$1" "$2" <<'PY' || fail=1
import sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
def masked(x):
    x = bytearray(x)
    x[64:80] = bytes(16)
    x[-8:-4] = bytes(4)
    return bytes(x)
if len(a) != len(b) or masked(a) != masked(b):
    print(f"FAIL: {sys.argv[1]} and {sys.argv[2]} differ beyond the run id and CRC")
    sys.exit(1)
if a[64:80] == b[64:80]:
    print(f"FAIL: {sys.argv[1]} and {sys.argv[2]} have the same run id: not two runs")
    sys.exit(1)
print(f"same bytes: {sys.argv[1].split('/')[-2:]} ({len(a)} bytes)")
PY
}

train $common --save "$work/sync" --save-every 2 --save-sync
expect "synchronous saves" 0 "saved checkpoint of step 4 .*(synchronous: the step loop was blocked"
losses > "$work/sync.losses"
train $common --save "$work/async" --save-every 2
expect "asynchronous saves" 0 "saved checkpoint of step 2 .*(asynchronous: the step loop was blocked"
expect "asynchronous saves" 0 "saved checkpoint of step 4 .*(asynchronous"
losses > "$work/async.losses"
cmp "$work/sync.losses" "$work/async.losses" || { echo "FAIL: the losses differ"; fail=1; }
for s in 2 4; do
  for r in 0 1; do
    f=step-00000000$s/rank0000$r.ckpt
    same_files "$work/sync/$f" "$work/async/$f"
  done
done

PTDC_CKPT_WRITE_DELAY_MS=2000 train $common --save "$work/b2b" --save-every 1 --keep 4
expect "back to back" 0 "saved checkpoint of step 4 "
for s in 2 3 4; do
  expect "back to back: step $s" 0 \
    "^checkpoint of step $s: waited [0-9.]* s for the checkpoint of step $((s - 1)) to be written first"
  w=$(sed -n "s/^checkpoint of step $s: waited \([0-9.]*\) s .*/\1/p" <<<"$out")
  if [ "$(echo "${w:-0} < 0.5" | bc)" = 1 ]; then
    echo "FAIL: step $s waited ${w:-nothing} s for a writer that sleeps 2 s"; fail=1
  fi
done
# in order: step s-1 committed before step s's save went ahead
order=$(grep -o '^saved checkpoint of step [0-9]*\|^checkpoint of step [0-9]*: waited' <<<"$out" |
        awk '{print $1 == "saved" ? "c" $5 : "w" $4}' | tr -d ':' | tr '\n' ' ')
[ "$order" = "c1 w2 c2 w3 c3 w4 c4 " ] || { echo "FAIL: saves out of order: $order"; fail=1; }
losses > "$work/b2b.losses"
cmp "$work/sync.losses" "$work/b2b.losses" || { echo "FAIL: the losses differ with the delay"; fail=1; }
for s in 1 2 3 4; do
  [ -f "$work/b2b/step-00000000$s/manifest.json" ] || { echo "FAIL: step $s not committed"; fail=1; }
done
same_files "$work/sync/step-000000002/rank00001.ckpt" "$work/b2b/step-000000002/rank00001.ckpt"
train --data synthetic:7 --steps 5 --load "$work/b2b"
expect "load after back-to-back saves" 0 "loaded checkpoint of step 4 "

# rank 1's disk fills while its writer writes step 4 (its step 2 file, 645
# kB, fits): the failure comes back from the thread to the commit, the job
# ends 1 naming rank 1 and ENOSPC, no temporary stays, and step 2 loads.
d=$work/full
LD_PRELOAD=$shim FAULT_ONLY_RANK=1 FAULT_ENOSPC_AFTER=1000000 train $common --save "$d" --save-every 2
expect "a full disk under an asynchronous save" 1 \
  "step 4 not committed: rank 1 could not write its file (No space left on device)"
expect "a full disk under an asynchronous save" 1 "a checkpoint was not saved"
lacks "a full disk under an asynchronous save" "saved checkpoint of step 4"
if ls "$d"/step-000000004 2>/dev/null | grep -q tmp; then
  echo "FAIL: a temporary file stayed: $(ls "$d"/step-000000004)"; fail=1
fi
train --data synthetic:7 --steps 5 --load "$d"
expect "load after the failed save" 0 "loaded checkpoint of step 2 "

# A run that refuses to save (--lr 1e3 diverges after a few steps: the
# state's next loss is not finite) while the save of the step before is
# still being written: that save, which passed its checks, is committed
# before the job ends, and loads.
d=$work/diverge
PTDC_CKPT_WRITE_DELAY_MS=1000 train --steps 8 --save "$d" --save-every 1 --keep 10 --lr 1e3
expect "a refused save after an asynchronous one" 1 "not saving step [0-9]*: its weights give a non-finite loss"
n=$(sed -n 's/.*not saving step \([0-9]*\): .*/\1/p' <<<"$out" | head -1)
if [ "${n:-0}" -ge 2 ]; then
  expect "a refused save after an asynchronous one" 1 "saved checkpoint of step $((n - 1)) "
  train --steps "$n" --load "$d"
  expect "load after the refused save" 0 "loaded checkpoint of step $((n - 1)) "
else
  echo "FAIL: --lr 1e3 refused step ${n:-none}: no step before it to keep"; fail=1
fi
exit $fail
