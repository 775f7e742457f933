#!/usr/bin/env bash
# fault_lines: rt_log and rt_fatal write each line with one write() (counted
# by the shim), and lines of 4 processes sharing a pipe never run together.
set -u
bin=$1 shim=$2 ptdc=$4 src=$5
fail=0
count=$(mktemp)
out=$(LD_PRELOAD=$shim FAULT_STDERR_COUNT=$count "$bin/fault_lines" count 2>&1)
rc=$?
n=$(cat "$count")
rm -f "$count"
echo "$out"
if [ $rc -ne 1 ] || [ "$n" != 4 ] || [ "$(grep -c '' <<<"$out")" != 4 ]; then
  echo "FAIL: exit $rc, $n write() calls on stderr for 4 lines"; fail=1
fi
grep -q '^fatal: the last line, 4$' <<<"$out" || { echo "FAIL: rt_fatal's line"; fail=1; }
"$bin/fault_lines" race || { echo "FAIL: torn lines"; fail=1; }

# the compiler: each diagnostic (its line, the source line, the caret) is
# written with one write(), so 2 diagnostics are 2 writes of 3 lines each
bad=$(mktemp -d)
cat > "$bad/two.mdl" <<'EOM'
model m {
  input tokens : i32[batch, nope]
  input targets : i32[batch, nada]
}
EOM
count=$(mktemp)
out=$(cd "$bad" && LD_PRELOAD=$shim FAULT_STDERR_COUNT=$count "$ptdc" two.mdl 2>&1)
rc=$?
n=$(cat "$count" 2>/dev/null)
lines=$(grep -c '' <<<"$out")
errors=$(grep -c ': error: ' <<<"$out")
rm -rf "$bad" "$count"
echo "$out"
if [ $rc -ne 1 ] || [ "$errors" -lt 2 ] || [ "$n" != "$errors" ] || [ "$lines" != $((3 * errors)) ]; then
  echo "FAIL: ptdc: $errors diagnostics in $lines lines took ${n:-?} write() calls"; fail=1
fi
exit $fail
