#!/bin/sh
# Golden diagnostics (the cproc style): each case NAME.mdl in this directory
# (or NAME.gen, a shell script printing the input, for inputs not committed:
# binary garbage, NUL bytes, a 10 MB line) is compiled by ptdc with the flags
# in NAME.args, if any. The run must exit with status 1, print nothing on
# stdout, and print exactly NAME.err on stderr.
#
# usage: run.sh PTDC [CASE...]     (no CASE: every case)
#        PTDC_UPDATE=1 run.sh ...  rewrite NAME.err from the actual output
set -u
ptdc=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
case "$ptdc" in /*) ;; *) ptdc=$(pwd)/$ptdc ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ $# -eq 0 ]; then
    set -- $(cd "$here" && ls *.mdl *.gen 2>/dev/null | sed 's/\.[a-z]*$//' | sort -u)
fi

fail=0
for name in "$@"; do
    dir=$here
    if [ -f "$here/$name.gen" ]; then
        dir=$tmp/gen
        mkdir -p "$dir"
        sh "$here/$name.gen" >"$dir/$name.mdl" || { echo "FAIL $name: generator failed"; fail=1; continue; }
    fi
    args=
    [ -f "$here/$name.args" ] && args=$(cat "$here/$name.args")
    # shellcheck disable=SC2086
    (cd "$dir" && exec "$ptdc" "$name.mdl" $args --emit summary) >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ "${PTDC_UPDATE:-}" = 1 ]; then
        cp "$tmp/err" "$here/$name.err"
    fi
    if [ $status -ne 1 ]; then
        echo "FAIL $name: exit status $status, expected 1"
        cat "$tmp/err"
        fail=1
    elif [ -s "$tmp/out" ]; then
        echo "FAIL $name: printed on stdout"
        head -5 "$tmp/out"
        fail=1
    elif ! cmp -s "$here/$name.err" "$tmp/err"; then
        echo "FAIL $name: stderr differs from $name.err"
        diff "$here/$name.err" "$tmp/err" | head -40
        fail=1
    else
        echo "ok   $name"
    fi
done
exit $fail
