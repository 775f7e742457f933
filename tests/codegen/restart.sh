#!/bin/sh
# restart.sh BIN WORK LAYOUT OTHER: checkpoints and Hugging Face files of the
# programs equiv.sh built in WORK (LAYOUT's and OTHER's).
#  1. 3 steps, save, load in a fresh launch, 2 more == 5 uninterrupted steps,
#     bitwise: the same logged losses and a byte-identical exported file.
#  2. A truncated, a corrupted and another plan's checkpoint are refused
#     (non-zero exit) with the sentence naming the file and the problem: the
#     sizes of a truncated file, the CRC-32C mismatch, both plans.
#  3. Importing the exported file into OTHER's program (another sharding) and
#     exporting again gives a byte-identical file.
set -eu
. "$(dirname "$0")/logcheck.sh"
bin=$1 work=$2 l=$3 other=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
d=$work/$l t=$work/restart-$l
rm -rf "$t" && mkdir -p "$t"
train() { "$d/run.sh" --data synthetic:7 --decay-steps 5 "$@"; }
fail() { echo "restart: $*"; exit 1; }

train --steps 5 --export-hf "$t/full.safetensors" > "$t/full.log" 2>&1 || { cat "$t/full.log"; fail "5 steps failed"; }
train --steps 3 --save "$t/ckpt" > "$t/first.log" 2>&1 || { cat "$t/first.log"; fail "3 steps failed"; }
train --steps 5 --load "$t/ckpt" --export-hf "$t/resumed.safetensors" > "$t/second.log" 2>&1 ||
    { cat "$t/second.log"; fail "resuming failed"; }
for log in full first second; do logcheck "$t/$log.log" || fail "sanitizer findings"; done
grep '^step' "$t/full.log" | awk '{split($2, s, "/"); print s[1], $5, $11}' > "$t/a"
{ grep '^step' "$t/first.log"; grep '^step' "$t/second.log"; } | awk '{split($2, s, "/"); print s[1], $5, $11}' > "$t/b"
cat "$t/b"
cmp "$t/a" "$t/b" || fail "resumed losses differ from the uninterrupted run"
cmp "$t/full.safetensors" "$t/resumed.safetensors" || fail "resumed weights differ from the uninterrupted run"
echo "restart: 3 + 2 steps == 5 steps, bitwise"

refused() { # what, then the command: it must fail, with no sanitizer finding
    what=$1
    shift
    if "$@" > "$t/refused.log" 2>&1; then cat "$t/refused.log"; fail "$what was accepted"; fi
    logcheck "$t/refused.log" || fail "$what: sanitizer findings"
}
says() { # what, then each fixed string the refusal must contain
    what=$1
    shift
    for want in "$@"; do
        grep -q -F -- "$want" "$t/refused.log" || { cat "$t/refused.log"; fail "$what: no '$want'"; }
    done
    echo "restart: $what refused: $(grep -m1 -F -- "$1" "$t/refused.log")"
}
f=$(ls "$t/ckpt" | grep 'ckpt$' | tail -n 1)
cp -r "$t/ckpt" "$t/trunc"
size=$(wc -c < "$t/trunc/$f")
head -c $((size - 100)) "$t/ckpt/$f" > "$t/trunc/$f"
refused "a truncated checkpoint" train --steps 5 --load "$t/trunc"
says "a truncated checkpoint" "cannot load checkpoint: $t/trunc/$f: truncated checkpoint" \
    "announces $size bytes, the file has $((size - 100))"
cp -r "$t/ckpt" "$t/flip"
printf 'X' | dd of="$t/flip/$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
refused "a corrupted checkpoint" train --steps 5 --load "$t/flip"
says "a corrupted checkpoint" "cannot load checkpoint: $t/flip/$f: corrupted checkpoint: CRC-32C mismatch"
# Another plan's: the sentence names the checkpoint and both plans.
plan() { sed -n 's/^#define CG_PLAN "\(.*\)"$/\1/p' "$1/model.h"; }
refused "another plan's checkpoint" "$work/$other/run.sh" --steps 5 --load "$t/ckpt"
says "another plan's checkpoint" "cannot load checkpoint $t/ckpt: it was saved by a program for another plan" \
    "($(plan "$d"), plan hash" "this program runs $(plan "$work/$other") (plan hash"

"$work/$other/run.sh" --steps 0 --import-hf "$t/full.safetensors" --export-hf "$t/again.safetensors" > "$t/again.log" 2>&1 ||
    { cat "$t/again.log"; fail "import into $other failed"; }
logcheck "$t/again.log" || fail "sanitizer findings"
cmp "$t/full.safetensors" "$t/again.safetensors" || fail "import then export changed the file"
echo "restart: import into $other then export gives the same file"
