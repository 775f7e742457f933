#!/bin/sh
# trace_browser.sh PTDC SRC WORK: a PTDC_TRACE file and its plan's
# --trace-plan file opened in a real browser (issue 35): headless Chromium
# running speedscope's Chrome trace-event importer (tests/browser, installed
# by scripts/setup.sh --asan). tests/browser/trace_view.mjs proves that the
# viewer shows every rank's lanes, each with exactly the file's spans
# (count, names, starts, durations: it reads the viewer's own export back),
# and that the flame chart is drawn (WORK/*/shot.png, a screenshot to look
# at). Also: a truncated file is refused by the importer, and a trace with a
# rank's compute lane removed fails the every-rank check, so neither check
# passes vacuously.
# Without Chromium, Node.js or the npm packages: "SKIPPED: <why>", exit 77.
set -u
ptdc=$1 src=$2 work=$3
view=$src/tests/browser/trace_view.mjs
for need in /usr/bin/chromium:"Debian's chromium" "$src/tests/browser/node_modules/speedscope":speedscope \
            "$src/tests/browser/node_modules/playwright-core":playwright-core; do
    [ -e "${need%%:*}" ] || { echo "SKIPPED: ${need#*:} is not installed (scripts/setup.sh --asan installs it)"; exit 77; }
done
command -v node > /dev/null || { echo "SKIPPED: node is not installed (scripts/setup.sh --asan installs it)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
rm -rf "$work" && mkdir -p "$work"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

d=$work/dp2-pp2
if ! "$ptdc" "$src/models/tiny-llama.mdl" --gpus 4 --pp 2 --dp 2 --micro-batch 2 --zero 1 --schedule 1f1b --target cpu \
        -o "$d" --trace-plan "$d/plan-trace.json" > "$work/ptdc.log" 2>&1 ||
   ! make -s -C "$d" train > "$work/make.log" 2>&1; then
    cat "$work/ptdc.log" "$work/make.log"; echo "FAIL: cannot build the program"; exit 1
fi
PTDC_TRACE=$d/trace.json PTDC_TRACE_KERNELS=1 "$d/run.sh" --steps 4 > "$d/run.log" 2>&1 ||
    { cat "$d/run.log"; echo "FAIL: the traced run failed"; exit 1; }

echo "== the run's trace"
timeout 120 node "$view" "$d/trace.json" "$work/measured" --ranks 4 --lanes step,compute,communication,kernels ||
    bad "the measured trace in the browser"
echo "== the plan's predicted trace"
timeout 120 node "$view" "$d/plan-trace.json" "$work/predicted" --ranks 2 --lanes step,compute,communication ||
    bad "the predicted trace in the browser"

echo "== broken traces"
head -c 3000 "$d/trace.json" > "$work/truncated.json"
timeout 120 node "$view" "$work/truncated.json" "$work/truncated" --expect-reject || bad "a truncated trace was imported"
python3 - "$d/trace.json" "$work/no-rank3.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
kept = [e for e in ev if not (e.get("pid") == 3 and e.get("tid") == 1 and e.get("ph") == "X")]
if isinstance(d, dict):
    d["traceEvents"] = kept
else:
    d = kept
json.dump(d, open(sys.argv[2], "w"))
PY
if timeout 120 node "$view" "$work/no-rank3.json" "$work/no-rank3" --ranks 4 --lanes step,compute,communication \
        > "$work/no-rank3.log" 2>&1; then
    cat "$work/no-rank3.log"; bad "a trace without rank 3's compute lane passed"
elif ! grep -q 'rank 3 has no lane "compute"' "$work/no-rank3.log"; then
    cat "$work/no-rank3.log"; bad "a trace without rank 3's compute lane failed for another reason"
else
    echo "rank 3's compute lane removed: refused as expected"
fi
[ $fail = 0 ] && echo "trace_browser: ok (screenshots: $work/measured/shot.png, $work/predicted/shot.png)"
exit $fail
