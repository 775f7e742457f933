#!/bin/sh
# bench/ckpt-async/run.sh BUILD_DIR [WORK]: the time the step loop is blocked
# by a checkpoint save, asynchronous (the default) against synchronous
# (--save-sync), on this machine and the file system of WORK (issue 35).
# docs/runtime.md quotes its output.
#
# The program: tiny-llama widened to d_model 512, d_ff 1536, vocab 32000
# (about 39M parameters: 470 MB of fp32 masters and AdamW moments), on 2 CPU
# ranks (pp 2), sequences of 16, 2 per step, so that a step is short and the
# save is what shows. A run trains STEPS (15) steps saving every EVERY (5),
# far enough apart that the writer is done before the next save; the saves
# of steps 5 and 10 are measured (the last one, at the end, waits for its
# writer by design and is left out). Each mode runs REPS (3) times,
# alternately; the table gives medians over the saves of all runs of what
# the "saved checkpoint" lines say:
#   blocked ms   the step loop's time lost to the save, in all
#   checks ms    of which the checks both modes make (finite state, the
#                next batch's loss: a third of a step)
#   save ms      the rest: sync: writing and committing; async: the copy to
#                host staging and, at later step boundaries, asking whether
#                the writers are done and committing
#   staging ms   async: the copy to host staging (part of save ms)
#   writer ms    async: the writer thread's time for the rank file
#   step ms      median step time (the writer competes with training for
#                the CPUs and the disk)
#   run s        the whole run, launch to exit (the net of the above)
set -eu
build=$(cd "$1" && pwd)
work=${2:-/tmp/ptdc-bench-ckpt-async}
reps=${REPS:-3}
steps=${STEPS:-15}
every=${EVERY:-5}
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
mkdir -p "$work"
prog=$work/prog

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
if [ ! -x "$prog/train" ]; then
    rm -rf "$prog"
    "$build/driver/ptdc" "$here/../../models/tiny-llama.mdl" --gpus 2 --target cpu -o "$prog" \
        --set d_model=512 --set d_ff=1536 --set vocab=32000 --set seq=16 --global-batch 2 \
        > "$work/ptdc.log" 2>&1 || { cat "$work/ptdc.log"; exit 1; }
    make -s -C "$prog" train
fi

machine="machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem/ {print $2}') GiB;\
 $work on $(df -T "$work" | awk 'NR == 2 {print $2, $1}'); load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # mode log
    rm -rf "$work/ckpt"
    flag=
    [ "$1" = sync ] && flag=--save-sync
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=1 "$prog/run.sh" --steps "$steps" --save "$work/ckpt" --save-every "$every" $flag \
        > "$2" 2>&1 || { cat "$2"; exit 1; }
    echo "$(date +%s.%N) - $t0" | bc > "$2.wall"
}
for i in $(seq "$reps"); do
    for m in sync async; do
        run $m "$work/$m-$i.log"
    done
done
saves="^saved checkpoint of step \($every\|$((2 * every))\) "
state=$(grep "$saves" "$work/async-1.log" | sed -n 's/.*copying \([0-9.]*\) MB.*/\1/p' | head -1)
echo "$machine"
echo "state staged by rank 0: $state MB; $reps runs per mode, saves of steps $every and $((2 * every))"
printf '%-6s %11s %10s %10s %11s %10s %9s %7s\n' mode "blocked ms" "checks ms" "save ms" \
    "staging ms" "writer ms" "step ms" "run s"
pick() { cat "$work/$1"-*.log | grep "$saves" | sed -n "s/$2/\\1/p" | median; }
for m in sync async; do
    b=$(pick $m '.*was blocked \([0-9.]*\) ms.*')
    c=$(pick $m '.*: checks \([0-9.]*\),.*')
    x=$(cat "$work/$m"-*.log | grep "$saves" |
        sed -n 's/.*was blocked \([0-9.]*\) ms: checks \([0-9.]*\),.*/\1 \2/p' | awk '{print $1 - $2}' | median)
    s=- w=-
    if [ $m = async ]; then
        s=$(pick $m '.*host staging \([0-9.]*\),.*')
        w=$(pick $m '.*in the background in \([0-9.]*\) ms.*')
    fi
    t=$(cat "$work/$m"-*.log | grep '^step' | awk '{ for (i = 1; i <= NF; i++) if ($i == "ms") print $(i - 1) }' | median)
    r=$(cat "$work/$m"-*.log.wall | median)
    printf '%-6s %11s %10s %10s %11s %10s %9s %7.1f\n' $m "$b" "$c" "$x" "$s" "$w" "$t" "$r"
done
