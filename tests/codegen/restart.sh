#!/bin/sh
# restart.sh BIN WORK LAYOUT OTHER: checkpoints and Hugging Face files of the
# programs equiv.sh built in WORK (LAYOUT's and OTHER's).
#  1. 3 steps, save, load in a fresh launch, 2 more == 5 uninterrupted steps,
#     bitwise: the same logged losses and a byte-identical exported file.
#  2. A truncated and a corrupted rank file are refused (non-zero exit) with
#     the sentence naming the file and the problem (its size against the
#     manifest's, the CRC-32C mismatch); with an older complete step in the
#     directory, the load falls back to it (and says why).
#  3. OTHER's program (another plan) loads the checkpoint, resharded.
#  4. Importing the exported file into OTHER's program (another sharding) and
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
sd=$t/ckpt/step-000000003
[ -f "$sd/manifest.json" ] || { ls -R "$t/ckpt"; fail "no committed step 3"; }
f=$(ls "$sd" | grep 'ckpt$' | tail -n 1)
cp -r "$t/ckpt" "$t/trunc"
size=$(wc -c < "$sd/$f")
head -c $((size - 100)) "$sd/$f" > "$t/trunc/step-000000003/$f"
refused "a truncated checkpoint" train --steps 5 --load "$t/trunc"
says "a truncated checkpoint" "$t/trunc/step-000000003/$f: is $((size - 100)) bytes; the manifest recorded $size" \
    "cannot load checkpoint: "
cp -r "$t/ckpt" "$t/flip"
printf 'X' | dd of="$t/flip/step-000000003/$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
refused "a corrupted checkpoint" train --steps 5 --load "$t/flip"
says "a corrupted checkpoint" "$t/flip/step-000000003/$f: corrupted checkpoint file: CRC-32C mismatch" \
    "cannot load checkpoint: "
# With step 2 next to it, a damaged step 3 gives way to step 2, which resumes bitwise.
train --steps 2 --save "$t/two" > "$t/two.log" 2>&1 || { cat "$t/two.log"; fail "2 steps failed"; }
cp -r "$t/flip/step-000000003" "$t/two/"
train --steps 5 --load "$t/two" > "$t/fallback.log" 2>&1 || { cat "$t/fallback.log"; fail "fallback failed"; }
logcheck "$t/fallback.log" || fail "fallback: sanitizer findings"
grep -q -F "$t/two/step-000000003/$f: corrupted checkpoint file: CRC-32C mismatch" "$t/fallback.log" &&
    grep -q "^loaded checkpoint of step 2 " "$t/fallback.log" ||
    { cat "$t/fallback.log"; fail "a damaged step 3 did not give way to step 2"; }
{ grep '^step' "$t/two.log"; grep '^step' "$t/fallback.log"; } | awk '{split($2, s, "/"); print s[1], $5, $11}' > "$t/c"
cmp "$t/a" "$t/c" || fail "resumed from step 2 after a damaged step 3: losses differ"
echo "restart: a damaged step 3 gives way to step 2, resumed bitwise"
"$work/$other/run.sh" --steps 4 --load "$t/ckpt" --data synthetic:7 --decay-steps 5 > "$t/other.log" 2>&1 ||
    { cat "$t/other.log"; fail "$other did not load $l's checkpoint"; }
logcheck "$t/other.log" || fail "$other: sanitizer findings"
grep -q "^loaded checkpoint of step 3 .*resharded" "$t/other.log" || { cat "$t/other.log"; fail "$other: not resharded"; }
echo "restart: $other loads $l's checkpoint: $(grep '^loaded' "$t/other.log")"

"$work/$other/run.sh" --steps 0 --import-hf "$t/full.safetensors" --export-hf "$t/again.safetensors" > "$t/again.log" 2>&1 ||
    { cat "$t/again.log"; fail "import into $other failed"; }
logcheck "$t/again.log" || fail "sanitizer findings"
cmp "$t/full.safetensors" "$t/again.safetensors" || fail "import then export changed the file"
echo "restart: import into $other then export gives the same file"
