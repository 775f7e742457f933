#!/usr/bin/env bash
# Every test of ptdc, on a fresh machine: install what is missing, build the
# release and the ASan+UBSan builds, then run the whole suite (ctest) on the
# sanitizer build. Exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --asan
jobs=$(nproc 2>/dev/null || echo 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build-asan --output-on-failure -j "$jobs" "$@"
