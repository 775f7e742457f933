#!/bin/sh
# bench/plan-time/run.sh: how long ptdc takes to plan the large MoE models
# (issue 31: under 2 s each), and what it plans, one line per case:
#   model gpus gpu  exit-status  cpu-s  wall-s  plan (ptdc's one-line summary, or its error)
#   ILP-solves  meshes-solved (plan.txt's search counts; - where no plan was written)
# cpu-s is user + system time: on a machine shared with other builds the
# wall time measures the load as much as ptdc, and even the CPU seconds move
# with it (caches, hyperthreads); the solve counts do not.
# Two builds' outputs can be diffed with the times cut off (cut -f1-4,7) to
# show that a change to the search's speed did not change its plans.
#   bench/plan-time/run.sh [PTDC] [GPU...]   default: build/driver/ptdc, the default GPU
# Env: MODELS (default: the three MoE models), COUNTS (64 .. 2048), REPEAT
# (default 1: runs per case; the CPU and wall seconds printed are the
# medians, each on its own, of that many runs; the plan is the last run's).
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
ptdc=${1:-$here/build/driver/ptdc}
[ $# -gt 0 ] && shift
[ -x "$ptdc" ] || { echo "run.sh: no ptdc executable at $ptdc (give its path as the first argument)" >&2; exit 1; }
models=${MODELS:-"mixtral-8x7b qwen3-235b-a22b deepseek-v3"}
counts=${COUNTS:-"64 128 256 512 1024 2048"}
gpus=${*:-default}
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
for gpu in $gpus; do
    for m in $models; do
        for n in $counts; do
            flag=""
            [ "$gpu" = default ] || flag="--gpu $gpu"
            : >"$out/times"
            i=0
            while [ "$i" -lt "${REPEAT:-1}" ]; do
                i=$((i + 1))
                rm -rf "$out/p"
                # shellcheck disable=SC2086
                /usr/bin/time -f '%U %S %e' -o "$out/t" \
                    "$ptdc" "$here/models/$m.mdl" --gpus "$n" $flag --plan-only -o "$out/p" >"$out/o" 2>"$out/e"
                rc=$?
                # /usr/bin/time writes "Command exited with non-zero status" first then.
                tail -1 "$out/t" | awk '{ printf "%.2f %.2f\n", $1 + $2, $3 }' >>"$out/times"
            done
            # The summary: "ptdc: wrote ...: LAYOUT, step S s, MFU M" or the first error.
            line=$(sed -n 's/^ptdc: wrote [^:]*: //p' "$out/e" | head -1)
            [ -n "$line" ] || line=$(grep -m1 'error' "$out/e")
            cpu=$(cut -d' ' -f1 "$out/times" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
            wall=$(cut -d' ' -f2 "$out/times" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
            # "...; 455 of 2848 meshes solved, 4371 ILP solves, ..."
            solves=$(sed -n 's/.* \([0-9]*\) of [0-9]* meshes solved, \([0-9]*\) ILP solves.*/\2\t\1/p' "$out/p/plan.txt" 2>/dev/null)
            [ -n "$solves" ] || solves="-\t-"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%b\n' "$m" "$n" "$gpu" "$rc" "$cpu" "$wall" "$line" "$solves"
            rm -rf "$out/p"
        done
    done
done
