#!/bin/sh
# Run the frontend fuzzer (building it first, see build.sh) from a scratch
# directory holding copies of models/ (so `import "llama.mdl"` resolves) and
# tests/diag/lib/. Seeds: models/*.mdl, the diagnostics cases, and
# tests/fuzz/regress/ (inputs the fuzzer once found to crash: it runs every
# seed first, so they stay fixed).
#
# usage: run.sh SRCDIR OUTDIR SECONDS [CORPUS]
#   CORPUS: a directory kept between runs (default: a fresh one, removed after)
# Exit status: 0 nothing found, 77 skipped (no libFuzzer), else the finding's:
# libFuzzer's own default for a finding is 77 too, which ctest would read as
# a skip (SKIP_RETURN_CODE), so a crash or leak exits 1 (-error_exitcode).
set -u
src=$(cd "$1" && pwd) out=$2 secs=$3 corpus=${4:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
sh "$src/tests/fuzz/build.sh" "$src" "$out"
rc=$?
[ $rc -ne 0 ] && exit $rc

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src"/models/*.mdl "$work/"
mkdir -p "$work/lib" "$work/seeds"
cp "$src"/tests/diag/lib/*.mdl "$work/lib/"
for f in "$src"/models/*.mdl "$src"/tests/diag/*.mdl "$src"/tests/fuzz/regress/*.mdl; do
    cp "$f" "$work/seeds/$(basename "$(dirname "$f")")-$(basename "$f")"
done
if [ -z "$corpus" ]; then
    corpus=$work/corpus
fi
mkdir -p "$corpus"
corpus=$(cd "$corpus" && pwd)
cd "$work" || exit 1
echo "fuzzing the frontend for $secs s (corpus $corpus)"
exec "$out/fe_fuzz" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -error_exitcode=1 \
    -dict="$src/tests/fuzz/mdl.dict" -artifact_prefix="$out/" -print_final_stats=1 \
    "$corpus" "$work/seeds"
