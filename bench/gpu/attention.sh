#!/bin/sh
# bench/gpu/attention.sh [BUILD_DIR] [--full]: attention TFLOP/s on this
# machine's GPU (forward and backward, head dims 64 and 128, sequence
# lengths 512-8192, causal; --full adds non-causal), printed as a table;
# then the backward again with PTDC_ATTENTION_DETERMINISTIC=1 (the
# two-kernel backward whose dQ is bitwise reproducible) for comparison.
# Builds ptdc_attn_bench in BUILD_DIR (default build/, configured if absent).
# Without a usable GPU prints "SKIPPED: <reason>" and exits 77.
set -u
cd "$(dirname "$0")/../.."
build=build
case "${1:-}" in
--*|'') ;;
*) build=$1; shift ;;
esac
. bench/gpu/gpu_build.sh
gpu_build "$build" ptdc_attn_bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe -n 1 "$build/bench/gpu/ptdc_attn_bench" "$@" || exit 1
echo "-- PTDC_ATTENTION_DETERMINISTIC=1 (two-kernel backward):"
mpirun --oversubscribe -n 1 -x PTDC_ATTENTION_DETERMINISTIC=1 "$build/bench/gpu/ptdc_attn_bench" "$@"
