#!/bin/sh
# Frontend checks through the ptdc command line, from the repository root
# (so paths in the output are "models/...").
#
# usage: run.sh PTDC SRCDIR models            every shipped model parses and verifies
#        run.sh PTDC SRCDIR count MODEL N [FLAGS...]
#                                             --emit summary reports exactly N parameters
#        run.sh PTDC SRCDIR active MODEL N A [FLAGS...]
#                                             N parameters, A active a token (MoE)
#        run.sh PTDC SRCDIR plan MODEL FLAGS...   `ptdc MODEL FLAGS -o DIR` plans and
#                                             writes the programs (plan.txt, model.c)
#        run.sh PTDC SRCDIR golden FILE FLAGS...
#                                             stdout equals golden/FILE exactly
#        PTDC_UPDATE=1 ... golden ...         rewrite golden/FILE
set -u
ptdc=$1 src=$2 what=$3
shift 3
case "$ptdc" in /*) ;; *) ptdc=$(pwd)/$ptdc ;; esac
cd "$src" || exit 1
here=tests/frontend
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case $what in
models)
    # ptdc runs the IR verifier on every graph the frontend returns and aborts
    # if it fails, so exit status 0 means parsed, lowered and verified.
    n=0 fail=0
    for m in models/*.mdl; do
        if "$ptdc" "$m" --emit summary >"$tmp/out" 2>"$tmp/err" && [ ! -s "$tmp/err" ] &&
           grep -q "^  parameters: " "$tmp/out"; then
            n=$((n + 1))
        else
            echo "FAIL $m"; cat "$tmp/err"; fail=1
        fi
    done
    [ $n -ge 14 ] || { echo "FAIL only $n models"; fail=1; }
    echo "$n models parse and verify"
    exit $fail ;;
count)
    model=$1 want=$2
    shift 2
    "$ptdc" "$model" --emit summary "$@" >"$tmp/out" || exit 1
    got=$(sed -n 's/^  parameters: \([0-9,]*\) .*/\1/p' "$tmp/out" | tr -d ,)
    if [ "$got" != "$want" ]; then
        echo "FAIL $model $*: $got parameters, expected $want"; cat "$tmp/out"; exit 1
    fi
    echo "ok $model $*: $got parameters" ;;
active)
    model=$1 want=$2 wanta=$3
    shift 3
    "$ptdc" "$model" --emit summary "$@" >"$tmp/out" || exit 1
    got=$(sed -n 's/^  parameters: \([0-9,]*\) .*/\1/p' "$tmp/out" | tr -d ,)
    gota=$(sed -n 's/^  active parameters: \([0-9,]*\) .*/\1/p' "$tmp/out" | tr -d ,)
    if [ "$got" != "$want" ] || [ "$gota" != "$wanta" ]; then
        echo "FAIL $model $*: $got parameters, $gota active; expected $want, $wanta"
        cat "$tmp/out"; exit 1
    fi
    echo "ok $model $*: $got parameters, $gota active" ;;
plan)
    model=$1
    shift
    "$ptdc" "$model" "$@" -o "$tmp/out" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    [ -s "$tmp/out/plan.txt" ] && [ -s "$tmp/out/model.c" ] ||
        { cat "$tmp/log"; echo "FAIL $model $*: no plan or no program"; exit 1; }
    echo "ok $model $*: $(grep -m1 'wrote' "$tmp/log")" ;;
golden)
    file=$1
    shift
    "$ptdc" "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    [ "${PTDC_UPDATE:-}" = 1 ] && cp "$tmp/out" "$here/golden/$file"
    if [ $status -ne 0 ] || [ -s "$tmp/err" ]; then
        echo "FAIL ptdc $*: status $status"; cat "$tmp/err"; exit 1
    fi
    if ! cmp -s "$here/golden/$file" "$tmp/out"; then
        echo "FAIL ptdc $*: output differs from $here/golden/$file"
        diff "$here/golden/$file" "$tmp/out" | head -40
        exit 1
    fi
    echo "ok $file" ;;
*)
    echo "run.sh: unknown check '$what'"; exit 2 ;;
esac
