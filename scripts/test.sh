#!/usr/bin/env bash
# Every test of ptdc, on a fresh machine: install what is missing, build the
# release and the ASan+UBSan builds, then run
#   1. from build/ the tests only an uninstrumented build can run (label
#      release-only: the CUDA harness, its emulator, and the generated CUDA
#      programs, which nvcc cannot link against a sanitised runtime);
#   2. from build-asan/ the whole suite, under AddressSanitizer and UBSan.
# The output ends with ctest's summary of the last run; the exit status is
# non-zero if either run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --asan
jobs=$(nproc 2>/dev/null || echo 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== release-only tests (build/)"
ctest --test-dir build --output-on-failure -j "$jobs" -L release-only "$@"
echo "== the whole suite under ASan+UBSan (build-asan/)"
ctest --test-dir build-asan --output-on-failure -j "$jobs" "$@"
