#!/bin/sh
# flags.sh PTDC SRC: numeric flags are parsed in 64 bits and range-checked,
# so a huge value is either carried whole (--global-batch 4294967296 reaches
# the model as 4294967296) or refused with one sentence naming the flag,
# never wrapped or truncated; anything but plain decimal digits is refused;
# a model that is a FIFO or a directory is refused at once (no blocking).
set -u
ptdc=$1
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
m=models/tiny-llama.mdl

out=$("$ptdc" $m --global-batch 4294967296 --emit summary 2>&1) || { echo "FAIL: --global-batch 2^32: $out"; fail=1; }
echo "$out" | grep -q "global batch: 4294967296 sequences" || { echo "FAIL: 2^32 not carried whole: $out"; fail=1; }
out=$("$ptdc" $m --global-batch 1099511627776 --emit summary 2>&1) || { echo "FAIL: --global-batch 2^40: $out"; fail=1; }
out=$("$ptdc" $m --gpus 1048576 --emit summary 2>&1) || { echo "FAIL: --gpus 2^20: $out"; fail=1; }

refused() { # FLAG VALUE RANGE
    out=$(timeout 10 "$ptdc" $m "$1" "$2" --emit summary 2>&1)
    rc=$?
    want="ptdc: error: $1 expects an integer from $3, got '$2'"
    if [ $rc -ne 1 ] || [ "$out" != "$want" ]; then
        echo "FAIL: $1 '$2': status $rc, '$out' (want '$want')"; fail=1
    fi
}
for v in 1099511627777 4611686018427387904 9223372036854775808 99999999999999999999 \
         0 -1 -4294967296 ' 5' '5 ' +5 0x10 1e3 12abc ''; do
    refused --global-batch "$v" "1 to 1099511627776"
done
for v in 1048577 2147483648 4294967297 -2147483648; do
    refused --gpus "$v" "1 to 1048576"
    refused --tp "$v" "1 to 1048576"
    refused --micro-batch "$v" "1 to 1048576"
done
refused --gpus-per-node 1025 "1 to 1024"
refused --zero 4 "0 to 3"
refused --zero -0x1 "0 to 3"
for v in nan inf -1 0 3601; do
    out=$("$ptdc" $m --ilp-time-limit "$v" --emit summary 2>&1)
    [ $? -eq 1 ] && echo "$out" | grep -q "ilp-time-limit expects seconds" || { echo "FAIL: --ilp-time-limit $v: $out"; fail=1; }
done

mkfifo "$tmp/model.fifo"
out=$(timeout 10 "$ptdc" "$tmp/model.fifo" 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$out" = "ptdc: error: cannot read '$tmp/model.fifo': it is a FIFO, not a regular file" ] ||
    { echo "FAIL: a FIFO as model: status $rc, '$out'"; fail=1; }
out=$(timeout 10 "$ptdc" "$tmp" 2>&1)
rc=$?
# A directory is a Hugging Face model directory: without a config.json it is refused by name.
[ $rc -eq 1 ] && [ "$out" = "ptdc: error: cannot open Hugging Face config '$tmp/config.json': No such file or directory" ] ||
    { echo "FAIL: a directory as model: status $rc, '$out'"; fail=1; }
# A FIFO or a directory as its config.json: refused by what it is, at once.
mkdir "$tmp/hf" && mkfifo "$tmp/hf/config.json"
out=$(timeout 10 "$ptdc" "$tmp/hf" 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$out" = "ptdc: error: cannot read Hugging Face config '$tmp/hf/config.json': it is a FIFO, not a regular file" ] ||
    { echo "FAIL: a FIFO as config.json: status $rc, '$out'"; fail=1; }
rm "$tmp/hf/config.json" && mkdir "$tmp/hf/config.json"
out=$(timeout 10 "$ptdc" "$tmp/hf" 2>&1)
rc=$?
[ $rc -eq 1 ] && [ "$out" = "ptdc: error: cannot read Hugging Face config '$tmp/hf/config.json': it is a directory, not a regular file" ] ||
    { echo "FAIL: a directory as config.json: status $rc, '$out'"; fail=1; }
[ $fail = 0 ] && echo "ok flags"
exit $fail
