#!/bin/sh
# Build the frontend fuzzer with clang: the frontend and IR sources plus the
# flex/bison outputs, with -fsanitize=fuzzer,address,undefined (the main
# build uses gcc, which has no libFuzzer). The unrolling limits are lowered
# so a single input cannot spend seconds building a million-node graph.
#
# usage: build.sh SRCDIR OUTDIR     -> OUTDIR/fe_fuzz
# Exit status 77 (and a line saying why) when clang or libFuzzer is missing.
set -eu
src=$1 out=$2
mkdir -p "$out"
cc=${CLANG:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "SKIP: $cc not found; the fuzzer needs clang with libFuzzer"
    exit 77
fi
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$out/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$out/probe.c" -o "$out/probe" >"$out/probe.log" 2>&1; then
    echo "SKIP: $cc cannot link -fsanitize=fuzzer (libFuzzer missing; Debian: libclang-rt-dev):"
    head -3 "$out/probe.log"
    exit 77
fi

sources="$src/frontend/frontend.c $src/frontend/load.c $src/frontend/consts.c
         $src/frontend/lower.c $src/frontend/suggest.c
         $src/frontend/hf_import.c $src/frontend/hf_config.c $src/frontend/hf_mdl.c
         $src/json/json.c
         $src/ir/arena.c $src/ir/diag.c $src/ir/fs.c $src/ir/map.c $src/ir/graph.c $src/ir/attrs.c $src/ir/shape.c
         $src/ir/verify.c $src/ir/print.c $src/tests/fuzz/fe_fuzz.c"
inputs="$sources $src/frontend/parser.y $src/frontend/lexer.l $src/frontend/fe.h
        $src/frontend/frontend.h $src/frontend/hf.h $src/json/json.h $src/ir/ir.h $src/ir/ops.def $0"
# Up to date?
if [ -x "$out/fe_fuzz" ]; then
    stale=0
    for f in $inputs; do
        [ "$f" -nt "$out/fe_fuzz" ] && stale=1
    done
    [ $stale = 0 ] && exit 0
fi
bison -o "$out/parser.c" --defines="$out/parser.h" "$src/frontend/parser.y"
flex -o "$out/lexer.c" "$src/frontend/lexer.l"
# shellcheck disable=SC2086
"$cc" -std=c11 -g -O1 -D_POSIX_C_SOURCE=200809L -DFE_MAX_NODES=20000 -DFE_MAX_STEPS=200000 \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
    -Wall -Wextra -Wno-sign-compare -Wno-unused-function -Wno-unused-parameter \
    -I"$src/ir" -I"$src/frontend" -I"$src/json" -I"$out" \
    $sources "$out/parser.c" "$out/lexer.c" -lm -o "$out/fe_fuzz.tmp"
mv "$out/fe_fuzz.tmp" "$out/fe_fuzz"
echo "built $out/fe_fuzz"
