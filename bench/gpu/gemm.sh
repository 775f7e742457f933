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
. bench/gpu/gpu_build.sh
gpu_build "$build" ptdc_gemm_bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe -n 1 "$build/bench/gpu/ptdc_gemm_bench"
