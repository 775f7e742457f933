#!/bin/sh
# bench/codegen/run.sh BUILD_DIR [WORK]: tokens/s of generated CPU training
# programs and the share of their step time spent in GEMMs (PTDC_TIME_GEMM=1
# times every rt_matmul). Models: tiny-llama, and "small" (LLaMA with 4
# layers of d_model 256, 8 heads, 4 KV heads, d_ff 768, vocabulary 8192,
# sequences of 256, 16 per step). Layouts: 1 rank, 2 ranks data parallel,
# 2 ranks tensor parallel. Each runs STEPS (12) steps; the table shows the
# medians over steps 3..STEPS. docs/codegen.md quotes its output.
set -eu
build=$1
work=${2:-/tmp/ptdc-bench-codegen}
steps=${STEPS:-12}
here=$(cd "$(dirname "$0")" && pwd)
models=$here/../../models
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none" PTDC_TIME_GEMM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
small="--set n_layers=4 --set d_model=256 --set n_heads=8 --set n_kv_heads=4 --set d_ff=768 --set vocab=8192 --set seq=256 --set global_batch=16"
mkdir -p "$work"
printf '%-12s %-8s %6s %12s %10s %12s\n' model layout ranks "tokens/s" "gemm %" "gemm GFLOP/s"
for m in tiny small; do
    for l in 1rank dp2 tp2; do
        d=$work/$m-$l
        if [ "$m" = tiny ]; then
            "$build/tests/codegen/cg_gen" "$models/tiny-llama.mdl" "$l" "$d"
        else
            # shellcheck disable=SC2086
            "$build/tests/codegen/cg_gen" "$models/llama.mdl" "$l" "$d" $small
        fi
        make -s -C "$d" train
        "$d/run.sh" --steps "$steps" > "$d/log" 2>&1 || { cat "$d/log"; exit 1; }
        ranks=$(grep -m1 ' ranks, ' "$d/log" | sed 's/.*: \([0-9]*\) ranks.*/\1/')
        grep '^step' "$d/log" | awk -v skip=2 'NR > skip {
                for (i = 1; i <= NF; i++) { if ($i == "tok/s") t[n] = $(i - 1); if ($i == "gemm") { g[n] = $(i + 1); f[n] = $(i + 2) } }
                n++ }
            function median(a, n,   i, j, x) { for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] + 0 < a[i] + 0) { x = a[i]; a[i] = a[j]; a[j] = x }
                return n % 2 ? a[int(n / 2)] : (a[n / 2 - 1] + a[n / 2]) / 2 }
            END { for (i = 0; i < n; i++) sub(/%/, "", g[i]); printf "%s %s %s\n", median(t, n), median(g, n), median(f, n) }' \
            > "$d/median"
        read -r tps gemm gf < "$d/median"
        printf '%-12s %-8s %6s %12.0f %9.1f%% %12.2f\n' "$m" "$l" "$ranks" "$tps" "$gemm" "$gf"
    done
done
