#!/bin/sh
# ptdc's answers for the frameworks, golden style.
#
#   run.sh PTDC SRC emit NAME   cases/NAME.args are ptdc's arguments (run from the
#                               source root). stdout must be exactly cases/NAME.out,
#                               stderr cases/NAME.err, the exit status the number in
#                               cases/NAME.status (0 without one). With NAME.mask,
#                               numbers on comment lines (#) and on stderr compare as
#                               N: they are the cost model's, which tests/cost pins;
#                               the flags themselves are compared exactly. The
#                               command must parse (sh -n), the job file as TOML
#                               (python3 tomllib, where it has one); with exit 0
#                               or 3 upstream/check.py checks every flag and key
#                               against the framework's own options and rules
#                               and the model it would build against ptdc's.
#   run.sh PTDC SRC stackfile   for each preset, --emit stack prints a stack file
#                               that --stack FILE reads back into the same stack
#                               (printed again identically), with every key.
#   PTDC_UPDATE=1 rewrites the expected files from the actual output.
set -u
ptdc=$1
src=$2
what=$3
here=$(cd "$(dirname "$0")" && pwd)
case "$ptdc" in /*) ;; *) ptdc=$(pwd)/$ptdc ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 1

# Numbers on comment lines and on stderr as N.
mask_out() { sed -E '/^#/ s/[0-9]+(\.[0-9]+)?/N/g' "$1"; }
mask_err() { sed -E 's/[0-9]+(\.[0-9]+)?/N/g' "$1"; }

case "$what" in
emit)
    name=$4
    # shellcheck disable=SC2046
    "$ptdc" $(cat "$here/cases/$name.args") >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ "${PTDC_UPDATE:-}" = 1 ]; then
        cp "$tmp/out" "$here/cases/$name.out"
        cp "$tmp/err" "$here/cases/$name.err"
        [ $status -ne 0 ] && echo $status >"$here/cases/$name.status"
    fi
    fail=0
    want=0
    [ -f "$here/cases/$name.status" ] && want=$(cat "$here/cases/$name.status")
    [ $status -eq "$want" ] || { echo "FAIL $name: exit status $status, expected $want"; fail=1; }
    for f in out err; do
        if [ -f "$here/cases/$name.mask" ]; then
            mask_$f "$here/cases/$name.$f" >"$tmp/want"
            mask_$f "$tmp/$f" >"$tmp/got"
        else
            cp "$here/cases/$name.$f" "$tmp/want"
            cp "$tmp/$f" "$tmp/got"
        fi
        if ! cmp -s "$tmp/want" "$tmp/got"; then
            echo "FAIL $name: std$f differs from cases/$name.$f"
            diff "$tmp/want" "$tmp/got" | head -20
            fail=1
        fi
    done
    if grep -q "pretrain_gpt.py\|pretrain_hybrid.py" "$tmp/out"; then
        sh -n "$tmp/out" || { echo "FAIL $name: the command does not parse"; fail=1; }
    fi
    if grep -q '^\[parallelism\]' "$tmp/out" && python3 -c 'import tomllib' 2>/dev/null; then
        python3 -c 'import sys, tomllib; tomllib.load(open(sys.argv[1], "rb"))' "$tmp/out" ||
            { echo "FAIL $name: not valid TOML"; fail=1; }
    fi
    # The frameworks' own rules and the model they would build (upstream/check.py).
    if [ $status -eq 0 ] || [ $status -eq 3 ]; then
        # shellcheck disable=SC2046
        python3 "$here/upstream/check.py" "$ptdc" "$src" case $(cat "$here/cases/$name.args") >"$tmp/up" 2>&1 ||
            { echo "FAIL $name: upstream rules"; cat "$tmp/up"; fail=1; }
    fi
    [ $fail -eq 0 ] && echo "ok $name"
    exit $fail
    ;;
stackfile)
    fail=0
    for preset in ptdc megatron fsdp; do
        "$ptdc" --stack $preset --emit stack >"$tmp/$preset.stack" || { echo "FAIL $preset: --emit stack"; fail=1; }
        "$ptdc" --stack "$tmp/$preset.stack" --emit stack >"$tmp/again" ||
            { echo "FAIL $preset: its stack file does not load"; fail=1; }
        cmp -s "$tmp/$preset.stack" "$tmp/again" ||
            { echo "FAIL $preset: the stack file does not round-trip"; diff "$tmp/$preset.stack" "$tmp/again"; fail=1; }
        n=$(grep -c ' = ' "$tmp/$preset.stack")
        [ "$n" -ge 20 ] && [ "$n" -eq "$(wc -l <"$tmp/$preset.stack")" ] ||
            { echo "FAIL $preset: $n keys printed, expected one per line, at least 20"; fail=1; }
    done
    [ $fail -eq 0 ] && echo "ok stackfile"
    exit $fail
    ;;
*)
    echo "usage: run.sh PTDC SRC emit NAME | stackfile"
    exit 2
    ;;
esac
