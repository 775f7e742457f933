#!/bin/sh
# bench/codegen/moe.sh BUILD_DIR [WORK]: the generated CPU program of a
# mixture of experts against the dense program of the same active size, on
# this machine (issue 31). docs/moe.md quotes its output.
#
# MoE: models/mixtral.mdl at 4 layers, d_model 256, 4 heads (2 KV heads),
# 8 experts of width 512, 2 chosen per token. Dense: models/mistral.mdl (no
# window) with one MLP of width 1024: the same attention, and per token the
# same MLP FLOPs and active parameters (2 x 512). Sequences of 256, 8 per
# step. Configurations:
#   1rank   one rank, one thread                   (moe 1rank  vs dense 1rank)
#   2ranks  two ranks, one thread each             (moe dp2-ep vs dense dp2)
# Each pair runs REPS (3) times alternately; a run trains STEPS (6) steps and
# its time is the median over its steps after the first; the table gives
# the median over runs and the ratio MoE / dense (above 1: the MoE step is
# slower: routing, gathering rows, per-expert GEMMs and, with ep, the
# exchange).
set -eu
build=$(cd "$1" && pwd)
work=${2:-/tmp/ptdc-bench-moe}
reps=${REPS:-3}
steps=${STEPS:-6}
here=$(cd "$(dirname "$0")" && pwd)
models=$here/../../models
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
mkdir -p "$work"

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
common="--set n_layers=4 --set d_model=256 --set n_heads=4 --set n_kv_heads=2 --set vocab=8192 --set seq=256 --set global_batch=8"
gen() { # kind layout dir
    if [ ! -x "$3/train" ]; then
        rm -rf "$3"
        if [ "$1" = moe ]; then
            # shellcheck disable=SC2086
            "$build/tests/codegen/cg_gen" "$models/mixtral.mdl" "$2" "$3" $common --set d_ff=512 \
                --set n_experts=8 --set topk=2 > "$3.gen.log" 2>&1 || { cat "$3.gen.log"; exit 1; }
        else
            # shellcheck disable=SC2086
            "$build/tests/codegen/cg_gen" "$models/mistral.mdl" "$2" "$3" $common --set d_ff=1024 \
                --set window=0 > "$3.gen.log" 2>&1 || { cat "$3.gen.log"; exit 1; }
        fi
        make -s -C "$3" train
    fi
}
run() { # dir log: median step ms over steps 2..
    OMP_NUM_THREADS=1 "$1/run.sh" --steps "$steps" > "$2" 2>&1 || { cat "$2"; exit 1; }
    grep '^step' "$2" | awk 'NR > 1 { for (i = 1; i <= NF; i++) if ($i == "ms") print $(i - 1) }' | median
}

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
     "load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %12s %12s %8s\n' config "MoE ms" "dense ms" ratio
for c in ${CONFIGS:-1rank 2ranks}; do
    case $c in
    1rank) ml=1rank dl=1rank ;;
    2ranks) ml=dp2-ep dl=dp2 ;;
    esac
    gen moe "$ml" "$work/moe-$ml"
    gen dense "$dl" "$work/dense-$dl"
    m="" d=""
    for r in $(seq "$reps"); do
        m="$m $(run "$work/moe-$ml" "$work/moe-$ml.log.$r")"
        d="$d $(run "$work/dense-$dl" "$work/dense-$dl.log.$r")"
    done
    mm=$(echo "$m" | tr ' ' '\n' | grep . | median)
    dd=$(echo "$d" | tr ' ' '\n' | grep . | median)
    printf '%-8s %12.1f %12.1f %8s\n' "$c" "$mm" "$dd" "$(echo "$mm $dd" | awk '{ printf "%.2f", $1 / $2 }')"
done
echo "load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
