#!/bin/sh
# bench/tp-overlap/run.sh BUILD_DIR [WORK]: the CPU speed of a tensor-parallel
# program with sequence parallelism chunked (--tp-overlap on: each gather
# beside its GEMMs' rows of the rank's own block, each reduce-scatter in 4
# pieces beside the next piece's GEMM; docs/codegen.md) against the same
# program unchunked, and what the cost model predicts for each (issue 35).
# docs/cost-model.md ("Tensor-parallel overlap") quotes its output.
#
# The program: tiny-llama widened to d_model 1024, d_ff 2816, 16 heads (4 KV
# heads), sequences of SEQ (256), GB (4) per step, one micro-batch, on 2 CPU
# ranks as tp 2 with sp on: the GEMMs are large enough that compute is
# measured (about a second a step on the 2-core VM), each gather and
# reduce-scatter moves 2 MB. TP 2 only: the VM has 2 cores, and tp 4 would
# run 4 ranks on them, so that a rank's transfer could only progress while
# another rank's compute is descheduled. Each program trains STEPS (6)
# steps, REPS (3) runs alternately; the first step of each run is left out
# (start-up). Predictions: ptdc's plan.json step_time_s with
# --cluster tests/codegen/data/vm-cpu.cluster (ptdc calibrate on that VM).
# Then micro (BUILD_DIR/bench/tp-overlap/ptdc-bench-tp-micro, micro.c): one
# gather + GEMM and one GEMM + reduce-scatter of the program's sizes (a
# rank's SEQ GB / 2 rows, 1024 x 1024), each alone, one after the other and
# chunked, 2 ranks, median of 7: how much transfer the chunked call hides.
set -eu
build=$(cd "$1" && pwd)
work=${2:-/tmp/ptdc-bench-tp-overlap}
reps=${REPS:-3}
steps=${STEPS:-6}
seq=${SEQ:-256}
gb=${GB:-4}
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../tests/codegen/data/vm-cpu.cluster
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
mkdir -p "$work"

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
for m in off on; do
    prog=$work/$m
    rm -rf "$prog"
    "$build/driver/ptdc" "$here/../../models/tiny-llama.mdl" --cluster "$cluster" --gpus 2 --tp 2 --sp on \
        --tp-overlap $m --micro-batch "$gb" --global-batch "$gb" --target cpu -o "$prog" \
        --set d_model=1024 --set d_ff=2816 --set n_heads=16 --set n_kv_heads=4 --set seq="$seq" \
        > "$work/ptdc-$m.log" 2>&1 || { cat "$work/ptdc-$m.log"; exit 1; }
    make -s -C "$prog" train
done
grep -q rt_allgather_matmul "$work/on/model.c" || { echo "tp-overlap: the chunked program makes no chunked call"; exit 1; }

machine="machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem/ {print $2}') GiB;\
 load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$reps"); do
    for m in off on; do
        OMP_NUM_THREADS=1 "$work/$m/run.sh" --steps "$steps" --data synthetic:7 > "$work/$m-$i.log" 2>&1 ||
            { cat "$work/$m-$i.log"; exit 1; }
    done
done
echo "$machine"
echo "tiny-llama d_model 1024, d_ff 2816, seq $seq, $gb sequences per step; tp 2, sp on; $reps runs x $((steps - 1)) steps per mode"
printf '%-10s %12s %14s\n' "tp overlap" "step ms" "predicted ms"
for m in off on; do
    t=$(cat "$work/$m"-*.log | grep '^step' | grep -v '^step *1/' |
        awk '{ for (i = 1; i <= NF; i++) if ($i == "ms") print $(i - 1) }' | median)
    p=$(sed -n 's/.*"step_time_s": \([0-9.e+-]*\).*/\1/p' "$work/$m/plan.json" | head -1)
    printf '%-10s %12s %14.1f\n' "$m" "$t" "$(echo "$p * 1000" | sed 's/e/*10^/' | bc -l)"
    eval "t_$m=$t p_$m=$p"
done
echo "on / off: measured $(echo "$t_on / $t_off" | bc -l | cut -c1-5), predicted $(echo "$p_on / $p_off" | sed 's/e/*10^/g' | bc -l | cut -c1-5)"
OMP_NUM_THREADS=1 mpirun -np 2 $PTDC_MPIRUN_FLAGS "$build/bench/tp-overlap/ptdc-bench-tp-micro" \
    $((seq * gb / 2)) 1024 1024 7
