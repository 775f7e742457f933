#!/usr/bin/env bash
# fault_load_bcast: loading at scale (issue 35; docs/codegen.md, "Checkpoints
# and Hugging Face files"): each byte a load needs is read from storage by
# one of the ranks that need it and broadcast to the others. tiny-llama,
# dp 2 x tp 2 (4 ranks, ZeRO 0) and dp 2 (2 ranks):
#   (a) 3 steps, save, resume to 5: bitwise the same (losses and exported
#       weights) as the same resume with PTDC_LOAD_BCAST=0 (every rank reads
#       what it needs: the loader as it was; tests/codegen/restart.sh holds
#       that one to the uninterrupted run);
#   (b) the bytes read from storage over all ranks are one copy of the
#       checkpoint's state (the rank files' payloads, from their headers),
#       each rank reading an equal share: dp 2 x tp 2 resuming (4 copies
#       with PTDC_LOAD_BCAST=0), and dp 2 loading that checkpoint;
#   (c) resharding: the dp 2 program loads the dp 2 x tp 2 checkpoint (its two
#       ranks still a group), and the weights it exports at the loaded step
#       are byte-identical to the saver's (the masters they are made from
#       are read as the moments are);
#   (d) --import-hf by the dp 2 program reads each tensor's bytes once over
#       both ranks (the file's data bytes), both ranks reading a share, and
#       exports the imported weights byte-identical;
#   (e) a corrupted rank file: named with its CRC-32C mismatch by every
#       rank of the group that reads it, and the job exits non-zero
#       within the timeout (no rank waits for a broadcast that never comes).
# 6 launches (under ASan on a loaded 2-core VM the launches are the time).
set -u
bin=$1 shim=$2 mpirun=$3 ptdc=$4 src=$5
work=$(mktemp -d /tmp/ptdc-fault-load.XXXXXX)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
PROG_LAYOUT="--gpus 4 --dp 2 --tp 2 --pp 1 --zero 0"
. "$src/tests/fault/prog.sh"
two=$work/dp2
"$ptdc" "$src/models/tiny-llama.mdl" --gpus 2 --dp 2 --tp 1 --pp 1 --zero 0 --target cpu -o "$two" \
    > "$work/ptdc2.log" 2>&1 && build_program "$two" > "$work/make2.log" 2>&1 ||
    { echo "FAIL: cannot build the dp 2 program"; cat "$work/ptdc2.log" "$work/make2.log"; exit 1; }
T="--data synthetic:7 --decay-steps 5"
train2() { out=$(timeout 120 "$two/run.sh" "$@" 2>&1); rc=$?; }
losses() { grep '^step' <<<"$out" | awk '{split($2, s, "/"); print s[1], $5, $11}'; }
# The load line's numbers: read, the fewest and most per rank, received.
loadnum() { grep -m1 "^load: $1" <<<"$out" | sed -E 's/.*: ([0-9]+) bytes read from storage over [0-9]+ ranks? \(([0-9]+) to ([0-9]+) per rank\), ([0-9]+) bytes received.*/\1 \2 \3 \4/'; }
u64() { od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }
same() { # name, then two files
  if cmp -s "$2" "$3"; then echo "$1: identical"; else echo "FAIL: $1: $2 and $3 differ"; fail=1; fi
}
eq() { # name, got, want
  if [ "$2" = "$3" ]; then echo "$1: $2"; else echo "FAIL: $1: $2, want $3"; fail=1; fi
}

# (a) resume: the same with and without the broadcast.
train $T --steps 3 --save "$work/ck" --export-hf "$work/three.safetensors"
expect "3 steps, saved" 0 "^step     3/3"
train $T --steps 5 --load "$work/ck" --export-hf "$work/resumed.safetensors"
expect "resumed" 0 "^loaded checkpoint of step 3"
losses > "$work/b"
payload=0
for f in "$work"/ck/step-000000003/rank*.ckpt; do payload=$((payload + $(u64 "$f" 40))); done
# (b) Tensors that tp does not split (the norms) are saved in parts by all 4
# ranks, so every rank needs a part of every rank file: the 4 ranks are one
# group, each reading one file and broadcasting it whole.
read -r got lo hi rcv <<<"$(loadnum "checkpoint state")"
eq "(b) bytes read over 4 ranks with the broadcast (one copy of the payloads)" "$got" "$payload"
eq "(b) each rank's share" "$lo $hi" "$((payload / 4)) $((payload / 4))"
has "(b) one group of 4" "^load: checkpoint state: .*(groups of up to 4 ranks)"
PTDC_LOAD_BCAST=0 train $T --steps 5 --load "$work/ck" --export-hf "$work/direct.safetensors"
expect "resumed, every rank reading" 0 "^loaded checkpoint of step 3"
read -r got lo hi rcv <<<"$(loadnum "checkpoint state")"
eq "(b) bytes read with PTDC_LOAD_BCAST=0 (4 copies)" "$got $rcv" "$((4 * payload)) 0"
losses > "$work/c"
same "(a) losses, broadcast against every rank reading" "$work/b" "$work/c"
same "(a) weights, broadcast against every rank reading" "$work/resumed.safetensors" "$work/direct.safetensors"

# (c) resharding: the loaded weights are exactly the saver's.
train2 $T --steps 3 --load "$work/ck" --export-hf "$work/r3.safetensors"
expect "(c) dp 2 loads dp 2 x tp 2's step 3" 0 "resharded onto this one"
has "(c) its two ranks read as a group" "^load: checkpoint state: .*received by broadcast (groups of up to 2 ranks)"
same "(c) weights loaded resharded against the saver's" "$work/three.safetensors" "$work/r3.safetensors"
# (b) both dp 2 ranks need all 4 files: one copy, half on each rank.
read -r got lo hi rcv <<<"$(loadnum "checkpoint state")"
eq "(b) dp 2: bytes read, each rank's share (one copy of the payloads)" "$got $lo $hi" \
  "$payload $((payload / 2)) $((payload / 2))"

# (d) --import-hf: each tensor read once over both ranks, imported exactly.
train2 --steps 0 --import-hf "$work/three.safetensors" --export-hf "$work/re.safetensors"
expect "(d) dp 2 imports" 0 "^exported weights"
data=$(( $(wc -c < "$work/three.safetensors") - 8 - $(u64 "$work/three.safetensors" 0) ))
read -r got lo hi rcv <<<"$(loadnum "--import-hf")"
eq "(d) bytes of tensor data read over 2 ranks (the file's data bytes)" "$got" "$data"
if [ "$lo" -gt 0 ]; then echo "(d) both ranks read a share: $lo and $hi"; else echo "FAIL: (d) one rank read nothing ($lo, $hi)"; fail=1; fi
same "(d) weights imported and exported" "$work/three.safetensors" "$work/re.safetensors"

# (e) a corrupted rank file, read by one member of its group.
cp -r "$work/ck" "$work/flip"
f=$work/flip/step-000000003/rank00003.ckpt
size=$(wc -c < "$f")
printf 'X' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
start=$(date +%s)
train $T --steps 5 --load "$work/flip"
expect "(e) a corrupted rank file" nonzero "$f: corrupted checkpoint file: CRC-32C mismatch"
has "(e) named by every rank of its group (all 4)" "warning: $f: corrupted checkpoint file: CRC-32C mismatch" 4
has "(e) and the load refused" "error: cannot load checkpoint"
if [ "$rc" -eq 124 ] || [ $(($(date +%s) - start)) -ge 60 ]; then
  echo "FAIL: (e) the job hung (exit $rc after $(($(date +%s) - start)) s)"; fail=1
fi
lacks "(e) nothing loaded" "^loaded checkpoint"
exit $fail
