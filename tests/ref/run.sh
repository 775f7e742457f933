#!/bin/sh
# run.sh: the generated programs against the independent reference
# (tests/ref/CMakeLists.txt registers each command as a test).
#   run.sh TOOL MODEL PROGRAMS WORK prepare        random weights (every tensor,
#                                                   HF names), a step of raw
#                                                   tokens, and those tokens with
#                                                   position T + 1 changed
#   run.sh TOOL MODEL PROGRAMS WORK check LAYOUT   LAYOUT's program (built by
#                                                   tests/codegen in PROGRAMS)
#                                                   imports the weights, runs step
#                                                   1 on the tokens and dumps it;
#                                                   ref_tool check compares loss,
#                                                   logits and every gradient
#   run.sh TOOL MODEL PROGRAMS WORK causal LAYOUT  the program and the reference
#                                                   on both token files: nothing
#                                                   at positions <= T moves
set -eu
. "$(dirname "$0")/../codegen/logcheck.sh"
tool=$1 model=$2 programs=$3 work=$4 cmd=$5
T=15 # the causality probe changes position 16 of every sequence
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"

dump() { # layout, token file, dump directory
    rm -rf "$3"
    "$programs/$1/run.sh" --steps 1 --import-hf "$work/weights.st" --data "u16:$2" \
        --dump-first-step "$3" > "$3.log" 2>&1 || { cat "$3.log"; echo "ref: $1 failed"; exit 1; }
    logcheck "$3.log" || exit 1
    grep '^dumped' "$3.log"
}

case $cmd in
prepare)
    rm -rf "$work" && mkdir -p "$work"
    "$tool" weights "$model" "$work/weights.st" 1
    "$tool" tokens "$model" "$work/tokens.u16" 2
    "$tool" alter "$model" "$work/tokens.u16" "$work/altered.u16" $T
    ;;
check)
    mkdir -p "$work/$6"
    dump "$6" "$work/tokens.u16" "$work/$6/dump"
    "$tool" check "$model" "$work/weights.st" "$work/tokens.u16" "$work/$6/dump"
    ;;
causal)
    mkdir -p "$work/$6"
    dump "$6" "$work/tokens.u16" "$work/$6/causal-a"
    dump "$6" "$work/altered.u16" "$work/$6/causal-b"
    "$tool" causal "$model" "$work/weights.st" "$work/tokens.u16" "$work/altered.u16" $T \
        "$work/$6/causal-a" "$work/$6/causal-b"
    # The altered tokens are a second full check of the program.
    "$tool" check "$model" "$work/weights.st" "$work/altered.u16" "$work/$6/causal-b" \
        > "$work/$6/causal-b.check" || { cat "$work/$6/causal-b.check"; exit 1; }
    tail -n 1 "$work/$6/causal-b.check"
    ;;
*) echo "ref/run.sh: unknown command $cmd"; exit 2 ;;
esac
