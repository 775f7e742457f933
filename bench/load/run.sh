#!/bin/sh
# bench/load/run.sh BUILD_DIR [WORK]: what a checkpoint load and an
# --import-hf read from storage, with the reading shared by the ranks that
# need the same bytes (the default) against every rank reading what it
# needs (PTDC_LOAD_BCAST=0), on N CPU ranks (issue 35, MegaScale's fix for
# storage overload). docs/codegen.md quotes its output.
#
# The program: tiny-llama widened to d_model 256, d_ff 768, vocab 32000 (about
# 18M parameters: 215 MB of fp32 masters and AdamW moments, 72 MB of fp32
# weights), ZeRO 0, in two layouts of 4 ranks: dp 4 and dp 2 x tp 2. One run
# saves step 1 and exports the weights; then each mode loads the checkpoint
# (--load, no step left to train) and imports the weights (--import-hf, one
# step), REPS (3) times each, alternately. The table gives, per layout,
# mode and load, what the "load:" line says: the bytes read from storage
# over all ranks (identical every time), the most one rank read, the bytes
# received by broadcast, and the median of the slowest rank's load time.
#
# Bytes are the honest metric here: the files were just written, so the
# page cache serves every re-read from memory and the time says little
# about a shared file system, where the bytes are what costs. The times
# come from a shared 2-core VM (other builds run beside it) with 4 ranks
# oversubscribed: noisy.
set -eu
build=$(cd "$1" && pwd)
work=${2:-/tmp/ptdc-bench-load}
reps=${REPS:-3}
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
mkdir -p "$work"

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
machine="machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem/ {print $2}') GiB;\
 $work on $(df -T "$work" | awk 'NR == 2 {print $2, $1}'); load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$machine"
printf '%-9s %-6s %-10s %14s %14s %14s %9s\n' layout mode load "read bytes" "most 1 rank" "received" "load s"
for layout in "dp4:--dp 4 --tp 1" "dp2-tp2:--dp 2 --tp 2"; do
    name=${layout%%:*}
    prog=$work/$name
    if [ ! -x "$prog/train" ]; then
        rm -rf "$prog"
        # shellcheck disable=SC2086
        "$build/driver/ptdc" "$here/../../models/tiny-llama.mdl" --gpus 4 ${layout#*:} --pp 1 --zero 0 \
            --target cpu -o "$prog" --set d_model=256 --set d_ff=768 --set vocab=32000 --set seq=16 \
            --global-batch 4 > "$work/ptdc.log" 2>&1 || { cat "$work/ptdc.log"; exit 1; }
        make -s -C "$prog" train
    fi
    rm -rf "$work/ckpt-$name" "$work/hf-$name"
    OMP_NUM_THREADS=1 "$prog/run.sh" --steps 1 --save "$work/ckpt-$name" --export-hf "$work/hf-$name" \
        > "$work/save-$name.log" 2>&1 || { cat "$work/save-$name.log"; exit 1; }
    for i in $(seq "$reps"); do
        for m in bcast direct; do
            v=1
            [ $m = direct ] && v=0
            PTDC_LOAD_BCAST=$v OMP_NUM_THREADS=1 "$prog/run.sh" --steps 1 --load "$work/ckpt-$name" \
                > "$work/$name-$m-load-$i.log" 2>&1 || { cat "$work/$name-$m-load-$i.log"; exit 1; }
            PTDC_LOAD_BCAST=$v OMP_NUM_THREADS=1 "$prog/run.sh" --steps 1 --import-hf "$work/hf-$name" \
                > "$work/$name-$m-import-$i.log" 2>&1 || { cat "$work/$name-$m-import-$i.log"; exit 1; }
        done
    done
    for m in bcast direct; do
        for l in load import; do
            line=$(grep -h '^load:' "$work/$name-$m-$l-1.log")
            read_b=$(echo "$line" | sed -n 's/.*: \([0-9]*\) bytes read from storage.*/\1/p')
            most=$(echo "$line" | sed -n 's/.* to \([0-9]*\) per rank.*/\1/p')
            rcv=$(echo "$line" | sed -n 's/.*, \([0-9]*\) bytes received.*/\1/p')
            t=$(grep -h '^load:' "$work/$name-$m-$l"-*.log | sed -n 's/.*, \([0-9.]*\) s$/\1/p' | median)
            printf '%-9s %-6s %-10s %14s %14s %14s %9s\n' "$name" "$m" "$l" "$read_b" "$most" "$rcv" "$t"
        done
    done
done
for name in dp4 dp2-tp2; do
    echo "$name: checkpoint $(du -sb "$work/ckpt-$name"/step-* | awk '{print $1}') bytes (rank files and manifest), export $(du -sb "$work/hf-$name" | awk '{print $1}') bytes"
done
