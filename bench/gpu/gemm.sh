#!/bin/sh
# bench/gpu/gemm.sh [BUILD_DIR]: sibling GEMMs (q, k, v; gate, up; their
# weight gradients) as one rt_matmul_batch against separate rt_matmul calls
# on this machine's GPU, at LLaMA-2 7B (dp) and 70B (tp 8) shapes, printed as
# a table (docs/cuda.md). Builds ptdc_gemm_bench in BUILD_DIR (default
# build/, configured if absent). Without a usable GPU prints
# "SKIPPED: <reason>" and exits 77.
set -u
cd "$(dirname "$0")/../.."
build=${1:-build}
if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "SKIPPED: no nvidia-smi (no NVIDIA driver on this machine)"; exit 77
fi
if ! smi=$(nvidia-smi -L 2>&1); then
    echo "SKIPPED: nvidia-smi fails: $(echo "$smi" | head -n 1)"; exit 77
fi
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
cmake --build "$build" --target ptdc_gemm_bench -j "$(nproc 2>/dev/null || echo 2)" >/dev/null || {
    echo "FAILED: could not build ptdc_gemm_bench in $build"; exit 1; }
echo "$smi" | head -n 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe -n 1 "$build/bench/gpu/ptdc_gemm_bench"
