#!/bin/sh
# reshard.sh BIN WORK OTHER LAYOUT...: resharding on load, with the programs
# equiv.sh built in WORK (one model) and OTHER (another model's).
#  1. A chain: LAYOUT 1 trains step 1 and saves; each next layout loads the
#     newest checkpoint (saved under the layout before: another dp, tp, pp,
#     sp, ZeRO stage or world size), trains one more step and saves. Every
#     step's loss and gradient norm equal the uninterrupted 1-rank run's
#     within equiv.sh's tolerance (1e-5 relative), and so do the final
#     weights (stcmp): weights, AdamW moments, step and data position all
#     crossed every layout change. Each load after a layout change says it
#     resharded.
#  2. The checkpoint is refused by OTHER's program (another model), naming
#     a tensor, and nothing is trained.
set -eu
bin=$1 work=$2 other=$3
shift 3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
t=$work/reshard
rm -rf "$t" && mkdir -p "$t"
fail() { echo "reshard: $*"; exit 1; }
n=$#
flags="--data synthetic:7 --adam-eps 1e-4 --decay-steps $n"
losses() { grep '^step' "$1" | awk '{split($2, s, "/"); print s[1], $5, $11}'; }

# shellcheck disable=SC2086
"$work/1rank/run.sh" --steps "$n" $flags --export-hf "$t/ref.safetensors" > "$t/ref.log" 2>&1 ||
    { cat "$t/ref.log"; fail "the 1-rank reference failed"; }
losses "$t/ref.log" > "$t/ref"

step=0 prev=
: > "$t/chain"
for l in "$@"; do
    step=$((step + 1))
    set -- --steps "$step" --save "$t/ckpt" --keep 2
    [ -n "$prev" ] && set -- "$@" --load "$t/ckpt"
    [ "$step" -eq "$n" ] && set -- "$@" --export-hf "$t/final.safetensors"
    # shellcheck disable=SC2086
    "$work/$l/run.sh" "$@" $flags > "$t/$step.log" 2>&1 || { cat "$t/$step.log"; fail "$l failed"; }
    if [ -n "$prev" ] && [ "$prev" != "$l" ]; then
        grep -q "^loaded checkpoint of step $((step - 1)) .*resharded onto this one" "$t/$step.log" ||
            { cat "$t/$step.log"; fail "$l: no resharded load of step $((step - 1))"; }
    fi
    [ "$(losses "$t/$step.log" | wc -l)" -eq 1 ] || { cat "$t/$step.log"; fail "$l did not train one step"; }
    losses "$t/$step.log" >> "$t/chain"
    echo "step $step: $prev -> $l"
    prev=$l
done
paste "$t/ref" "$t/chain" | awk '
    function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
    { r = rel($2, $5); q = rel($3, $6)
      printf "step %d: loss %s (1 rank) %s (resharded chain): %.2g; gradient norm %s %s: %.2g\n", $1, $2, $5, r, $3, $6, q
      if ($1 != $4 || !(r <= 1e-5) || !(q <= 1e-5)) bad = 1 }
    END { exit bad }' || fail "the resharded chain left the 1-rank run"
"$bin/stcmp" "$t/ref.safetensors" "$t/final.safetensors" --tol 1e-5 || fail "final weights differ"
echo "reshard: $n steps across $n layouts equal the 1-rank run"

if "$other/1rank/run.sh" --steps "$((n + 1))" --load "$t/ckpt" > "$t/other.log" 2>&1; then
    cat "$t/other.log"; fail "another model's program loaded the checkpoint"
fi
grep -q "error: cannot load checkpoint: .*tensor '[^']*'.*saved from another model" "$t/other.log" ||
    { cat "$t/other.log"; fail "another model: no message naming a tensor"; }
grep -q '^step' "$t/other.log" && fail "another model trained after a refused load"
echo "reshard: another model's program refused it: $(grep -m1 'cannot load' "$t/other.log")"
