#!/bin/sh
# outdir.sh PTDC SRC: -o DIR creates missing parent directories, accepts a
# trailing slash, writes plan files and programs together, and on an
# unwritable DIR fails with one sentence, status 1 and nothing written.
set -u
ptdc=$1
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
if ! "$ptdc" models/tiny-llama.mdl --gpus 1 --target cpu -o "$tmp/a/b/c/" >"$tmp/out" 2>&1; then
    echo "FAIL: nested -o with a trailing slash"; cat "$tmp/out"; fail=1
fi
for f in plan.txt plan.json plan.svg model.c model.h trainer.c trainer.h Makefile run.sh; do
    [ -s "$tmp/a/b/c/$f" ] || { echo "FAIL: $f not written"; fail=1; }
done
[ -z "$(ls -d "$tmp"/a/b/c.tmp-* 2>/dev/null)" ] || { echo "FAIL: a temporary directory was left"; fail=1; }
# --plan-only writes the plan files and no program.
"$ptdc" models/tiny-llama.mdl --gpus 1 --plan-only -o "$tmp/p" >/dev/null 2>&1 || { echo "FAIL: --plan-only -o"; fail=1; }
[ -s "$tmp/p/plan.txt" ] && [ ! -e "$tmp/p/model.c" ] || { echo "FAIL: --plan-only wrote programs or no plan"; fail=1; }
# A file where a directory is needed: an error, status 1, nothing written.
: >"$tmp/file"
"$ptdc" models/tiny-llama.mdl --gpus 1 --target cpu -o "$tmp/file/sub" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 1 ] || ! grep -q "^ptdc: error: cannot create" "$tmp/err" || [ -s "$tmp/out" ]; then
    echo "FAIL: -o under a file: status $rc"; cat "$tmp/err"; fail=1
fi
[ $fail = 0 ] && echo "ok outdir"
exit $fail
