#!/bin/sh
# outdir.sh PTDC SRC: -o DIR creates missing parent directories, accepts a
# trailing slash, writes plan files and programs together, and on an
# unwritable DIR fails with one sentence, status 1 and nothing written.
# A directory ptdc did not write keeps its own files: -o refuses one holding
# a file ptdc would write (a user's Makefile), before any search; ptdc's
# own output (marked .ptdc-output) is rewritten; an input is never written
# over (import-hf -o its own config.json; a model named like an output);
# two compilations into one DIR leave one of them whole.
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
# A user's directory with a Makefile of their own: refused, untouched.
mkdir "$tmp/mine" && echo "all: mine" > "$tmp/mine/Makefile" && echo "notes" > "$tmp/mine/notes.txt"
"$ptdc" models/tiny-llama.mdl --gpus 1 --target cpu -o "$tmp/mine" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 1 ] || ! grep -q "^ptdc: error: -o $tmp/mine holds Makefile, which ptdc did not write there" "$tmp/err" ||
   [ "$(cat "$tmp/mine/Makefile")" != "all: mine" ] || [ -e "$tmp/mine/model.c" ] || [ -e "$tmp/mine/plan.txt" ]; then
    echo "FAIL: a user's Makefile: status $rc"; cat "$tmp/err"; fail=1
fi
# Files of their own beside: accepted, kept, and the directory becomes ptdc's.
rm "$tmp/mine/Makefile"
"$ptdc" models/tiny-llama.mdl --gpus 1 --target cpu -o "$tmp/mine" >/dev/null 2>&1 &&
    [ "$(cat "$tmp/mine/notes.txt")" = notes ] && [ -e "$tmp/mine/.ptdc-output" ] && [ -s "$tmp/mine/model.c" ] ||
    { echo "FAIL: a directory with other files"; fail=1; }
# ptdc's own output is rewritten.
"$ptdc" models/tiny-llama.mdl --gpus 2 --target cpu -o "$tmp/mine" >/dev/null 2>&1 ||
    { echo "FAIL: rewriting ptdc's own output"; fail=1; }
# A model kept under a name ptdc writes, in the directory: never written over.
mkdir "$tmp/in" && cp models/tiny-llama.mdl "$tmp/in/model.h"
"$ptdc" "$tmp/in/model.h" --gpus 1 --target cpu -o "$tmp/in" >/dev/null 2>"$tmp/err"
rc=$?
cmp -s models/tiny-llama.mdl "$tmp/in/model.h" && [ $rc -ne 0 ] && grep -q "over the input" "$tmp/err" ||
    { echo "FAIL: an input named like an output: status $rc"; cat "$tmp/err"; fail=1; }
# import-hf -o its own config.json: refused, the config unchanged.
mkdir "$tmp/hf" && cp tests/hf/configs/llama-2-7b/config.json "$tmp/hf/config.json"
"$ptdc" import-hf "$tmp/hf" -o "$tmp/hf/config.json" >/dev/null 2>"$tmp/err"
rc=$?
cmp -s tests/hf/configs/llama-2-7b/config.json "$tmp/hf/config.json" && [ $rc -eq 1 ] &&
    grep -q "is the config it reads" "$tmp/err" || { echo "FAIL: import-hf over its input: status $rc"; cat "$tmp/err"; fail=1; }
# Two compilations into one DIR at once: both succeed, and DIR holds one of
# them whole (its Makefile and model.h agree on the rank count).
"$ptdc" models/tiny-llama.mdl --gpus 1 --target cpu -o "$tmp/two" >/dev/null 2>&1 &
p1=$!
"$ptdc" models/tiny-llama.mdl --gpus 2 --target cpu -o "$tmp/two" >/dev/null 2>&1 || { echo "FAIL: the second of two"; fail=1; }
wait $p1 || { echo "FAIL: the first of two"; fail=1; }
b=$(grep -o "[0-9]*-rank" "$tmp/two/Makefile" | head -1)
r=$(grep -o "ranks\": [0-9]*\|\"gpus\": [0-9]*" "$tmp/two/plan.json" | head -1 | grep -o "[0-9]*$")
[ "$b" = "$r-rank" ] || { echo "FAIL: two compilations mixed: Makefile $b, plan.json $r"; fail=1; }
[ $fail = 0 ] && echo "ok outdir"
exit $fail
