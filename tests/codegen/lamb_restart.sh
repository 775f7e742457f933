#!/bin/sh
# lamb_restart.sh WORK LAYOUT: LAMB's state in checkpoints, with the program
# equiv.sh built in WORK/LAYOUT.
#  1. --optimizer lamb: 3 steps, save, resume in a fresh launch for 2 more ==
#     5 uninterrupted steps, bitwise (logged losses and gradient norms, and a
#     byte-identical export); the manifest names the optimizer.
#  2. The LAMB checkpoint resumed with --optimizer adamw, and an AdamW one
#     resumed with --optimizer lamb, are refused with a sentence naming both.
set -eu
. "$(dirname "$0")/logcheck.sh"
work=$1 l=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
d=$work/$l t=$work/lamb-restart-$l
rm -rf "$t" && mkdir -p "$t"
train() { "$d/run.sh" --data synthetic:7 --decay-steps 5 "$@"; }
fail() { echo "lamb_restart: $*"; exit 1; }

train --optimizer lamb --steps 5 --export-hf "$t/full.safetensors" > "$t/full.log" 2>&1 ||
    { cat "$t/full.log"; fail "5 steps failed"; }
train --optimizer lamb --steps 3 --save "$t/ckpt" > "$t/first.log" 2>&1 ||
    { cat "$t/first.log"; fail "3 steps failed"; }
train --optimizer lamb --steps 5 --load "$t/ckpt" --export-hf "$t/resumed.safetensors" > "$t/second.log" 2>&1 ||
    { cat "$t/second.log"; fail "resuming failed"; }
for log in full first second; do logcheck "$t/$log.log" || fail "sanitizer findings"; done
grep -q '"optimizer": "lamb"' "$t/ckpt/step-000000003/manifest.json" || fail "the manifest does not name lamb"
grep '^step' "$t/full.log" | awk '{split($2, s, "/"); print s[1], $5, $11}' > "$t/a"
{ grep '^step' "$t/first.log"; grep '^step' "$t/second.log"; } | awk '{split($2, s, "/"); print s[1], $5, $11}' > "$t/b"
cat "$t/b"
[ "$(wc -l < "$t/a")" -eq 5 ] || fail "the uninterrupted run logged $(wc -l < "$t/a") steps, not 5"
cmp "$t/a" "$t/b" || fail "resumed losses differ from the uninterrupted run"
cmp "$t/full.safetensors" "$t/resumed.safetensors" || fail "resumed weights differ from the uninterrupted run"
echo "lamb_restart: 3 + 2 steps == 5 steps with LAMB, bitwise"
# LAMB's updates differ from AdamW's: otherwise the refusals below would guard nothing.
train --steps 5 --save "$t/adamw" > "$t/adamw.log" 2>&1 || { cat "$t/adamw.log"; fail "AdamW failed"; }
grep '^step' "$t/adamw.log" | awk '{split($2, s, "/"); print s[1], $5, $11}' > "$t/c"
if cmp -s "$t/a" "$t/c"; then fail "LAMB logged the same losses as AdamW"; fi

refused() { # log, then the flags: the resume must fail and say why
    log=$1
    shift
    if train --steps 6 "$@" > "$t/$log" 2>&1; then cat "$t/$log"; fail "$* was accepted"; fi
    logcheck "$t/$log" || fail "$*: sanitizer findings"
}
refused lamb-as-adamw.log --optimizer adamw --load "$t/ckpt"
grep -q -F "was trained with --optimizer lamb, and this run has --optimizer adamw: resume with --optimizer lamb" \
    "$t/lamb-as-adamw.log" || { cat "$t/lamb-as-adamw.log"; fail "no reason given for refusing lamb as adamw"; }
refused adamw-as-lamb.log --optimizer lamb --load "$t/adamw"
grep -q -F "was trained with --optimizer adamw, and this run has --optimizer lamb: resume with --optimizer adamw" \
    "$t/adamw-as-lamb.log" || { cat "$t/adamw-as-lamb.log"; fail "no reason given for refusing adamw as lamb"; }
echo "lamb_restart: $(grep -m1 -o 'cannot load checkpoint.*' "$t/lamb-as-adamw.log")"
