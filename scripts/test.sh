#!/usr/bin/env bash
# Every test of ptdc, on a fresh machine: install what is missing, build the
# release and the ASan+UBSan builds, then run
#   1. from build/ the tests labelled release-only: those only an
#      uninstrumented build can run (the CUDA harness, its emulator, and the
#      generated CUDA programs, which nvcc cannot link against a sanitised
#      runtime), and the big searches whose code smaller runs under ASan
#      already take (docs/design.md, "The suite's time");
#   2. from build-asan/ every other test, under AddressSanitizer and UBSan.
# Every test must carry a label (ctest -L); a test without one fails the run.
# A test the ASan build registers with the label release-only must be one
# build/ runs too, or it would run nowhere: the run fails on one that is not.
# The output ends with every test that failed or was skipped, with the
# reason it gave, and "N passed, N failed, N skipped" over both runs
# (scripts/test_summary.py); the exit status is non-zero if anything failed.
# Extra arguments go to both ctest runs (e.g. -R codegen).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --asan || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
# One test more than cores at a time: many tests wait without computing
# (mpirun's start, the fault tests' timeouts and stopped ranks, a slowed
# writer), and a waiting test holds ctest's slot but not its core. The
# fault tests took 193 s of the ASan run's slots on the 2-core VM and 76
# CPU s (docs/design.md, "The suite's time"). Tests that measure time run
# alone (RUN_SERIAL) or allow for a loaded machine.
tjobs=$((jobs + 1))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
start=$(date +%s)

unlabelled=0
for b in build build-asan; do
    all=$(ctest --test-dir "$b" -N | sed -n 's/^ *Test *#[0-9]*: //p' | sort)
    labelled=$(ctest --test-dir "$b" -N -L . | sed -n 's/^ *Test *#[0-9]*: //p' | sort)
    for t in $(comm -23 <(echo "$all") <(echo "$labelled")); do
        echo "test.sh: $t ($b) has no label"
        unlabelled=1
    done
done

# The tests the ASan run leaves to build/ (label release-only in both
# builds) must be among build/'s release-only tests.
rel=$(ctest --test-dir build -N -L release-only | sed -n 's/^ *Test *#[0-9]*: //p' | sort)
asan_rel=$(ctest --test-dir build-asan -N -L release-only | sed -n 's/^ *Test *#[0-9]*: //p' | sort)
orphans=0
for t in $(comm -23 <(echo "$asan_rel") <(echo "$rel")); do
    echo "test.sh: $t is release-only in build-asan/ but not a release-only test of build/: it would run nowhere"
    orphans=1
done

runs=()
echo "== release-only tests (build/)"
if ctest --test-dir build -N -L release-only "$@" | grep -q 'Total Tests: [1-9]'; then
    ctest --test-dir build --output-on-failure -j "$tjobs" -L release-only \
        --output-junit "$results/release.xml" "$@"
    runs+=("build=$results/release.xml")
else
    echo "(none in this configuration)"
fi
echo "== the other tests under ASan+UBSan (build-asan/)"
ctest --test-dir build-asan --output-on-failure -j "$tjobs" -LE release-only --output-junit "$results/asan.xml" "$@"
runs+=("build-asan=$results/asan.xml")

python3 scripts/test_summary.py "${runs[@]}"
rc=$?
echo "($(( $(date +%s) - start )) s of tests on $jobs cores)"
[ $unlabelled = 0 ] || { echo "test.sh: every test needs a label"; exit 1; }
[ $orphans = 0 ] || { echo "test.sh: a release-only test of build-asan/ runs in neither build"; exit 1; }
exit $rc
