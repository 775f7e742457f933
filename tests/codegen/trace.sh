#!/bin/sh
# trace.sh PTDC SRC WORK: PTDC_TRACE and ptdc --trace-plan (docs/trace.md).
#  1. Two programs of tiny-llama on 4 CPU ranks, each with its --trace-plan:
#     dp 2 x pp 2 1F1B (ZeRO-1: non-blocking reduce-scatters and all-gathers,
#     4 micro-batches; pinned: the search would choose ZB-H1, whose trace
#     zb_order.sh checks) and tp 2 x pp 2 interleaved (v 2: two chunks per
#     rank, tensor-parallel all-reduces; PTDC_TRACE_KERNELS=1: every
#     kernel's span too). Each trains 5 steps under
#     PTDC_TRACE with every rank's clock set apart on purpose
#     (PTDC_TRACE_TEST_SKEW): the trace holds the first 3 steps, and
#     trace_check.py proves the format, every rank, every (pp, chunk,
#     micro-batch, forward/backward) span, the bytes of every transfer, the
#     lanes, clocks aligned again (each receive ends after its send starts)
#     and the same stage spans in the prediction, each rank's in its order; --self-test proves the
#     checks reject traces broken in each of those ways.
#  2. PTDC_OVERLAP=0's blocking reductions are collectives with bytes;
#     PTDC_TRACE_STEPS=1 keeps one step; a run shorter than the steps traced
#     still writes its trace at the end, a resumed run its own steps (3, 4);
#     PTDC_TRACE_MAX_MB cuts a trace that
#     would be larger, saying so in the trace and the log.
#  3. An unwritable PTDC_TRACE file and a bad PTDC_TRACE_STEPS stop every rank
#     before the first step with exit 2 and a sentence; an unwritable
#     --trace-plan file is an error of ptdc's.
set -u
ptdc=$1 src=$2 work=$3
. "$(dirname "$0")/logcheck.sh"
check=$(dirname "$0")/trace_check.py
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
rm -rf "$work" && mkdir -p "$work"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# NAME MICRO CHUNKS PTDC-FLAGS...
program() {
  name=$1 micro=$2 chunks=$3
  shift 3
  d=$work/$name
  if ! "$ptdc" "$src/models/tiny-llama.mdl" "$@" --gpus 4 --target cpu -o "$d" \
       --trace-plan "$d/plan-trace.json" > "$work/$name.ptdc.log" 2>&1 ||
     ! make -s -C "$d" train > "$work/$name.make.log" 2>&1; then
    cat "$work/$name.ptdc.log" "$work/$name.make.log" 2>/dev/null; bad "$name: cannot build"; return
  fi
  env PTDC_TRACE="$d/trace.json" PTDC_TRACE_TEST_SKEW=0.25 $kernels "$d/run.sh" --steps 5 > "$d/run.log" 2>&1 ||
    { cat "$d/run.log"; bad "$name: the traced run failed"; return; }
  logcheck "$d/run.log" || bad "$name: sanitizer findings"
  grep -q "^trace: wrote $d/trace.json" "$d/run.log" || bad "$name: no 'trace: wrote' line"
  [ "$(grep -c '^step' "$d/run.log")" = 5 ] || bad "$name: not 5 steps"
  python3 "$check" --measured "$d/trace.json" --plan "$d/plan-trace.json" --world 4 --pp 2 \
    --micro "$micro" --chunks "$chunks" --steps 3 ${kernels:+--kernels} --self-test || bad "$name: trace_check"
}
kernels=
program dp2-pp2 4 1 --pp 2 --dp 2 --micro-batch 2 --zero 1 --schedule 1f1b
kernels=PTDC_TRACE_KERNELS=1
program tp2-pp2-v2 4 2 --set n_layers=4 --pp 2 --tp 2 --schedule interleaved --virtual-stages 2 \
  --micro-batch 4

d=$work/dp2-pp2
if [ -x "$d/train" ]; then
  PTDC_TRACE=$d/one.json PTDC_TRACE_STEPS=1 "$d/run.sh" --steps 3 > "$d/one.log" 2>&1 &&
    python3 "$check" --measured "$d/one.json" --world 4 --pp 2 --micro 4 --chunks 1 --steps 1 ||
    { cat "$d/one.log"; bad "PTDC_TRACE_STEPS=1"; }
  PTDC_TRACE=$d/short.json "$d/run.sh" --steps 2 > "$d/short.log" 2>&1 &&
    python3 "$check" --measured "$d/short.json" --world 4 --pp 2 --micro 4 --chunks 1 --steps 2 ||
    { cat "$d/short.log"; bad "a run of 2 steps under the default 3"; }
  # Without overlap the gradients' reductions block, one collective each.
  PTDC_TRACE=$d/blocking.json PTDC_OVERLAP=0 "$d/run.sh" --steps 3 > "$d/blocking.log" 2>&1 &&
    python3 "$check" --measured "$d/blocking.json" --world 4 --pp 2 --micro 4 --chunks 1 --steps 3 &&
    grep -q '"name":"rt_reduce_scatter","cat":"collective","args":{"bytes":[1-9]' "$d/blocking.json" ||
    { cat "$d/blocking.log"; bad "PTDC_OVERLAP=0: no trace with the blocking reduce-scatters"; }

  # A resumed run traces its own steps, numbered on from the checkpoint's.
  { "$d/run.sh" --steps 2 --save "$d/ckpt" > "$d/save.log" 2>&1 &&
    PTDC_TRACE=$d/resumed.json PTDC_TRACE_STEPS=2 "$d/run.sh" --steps 4 --load "$d/ckpt" > "$d/resumed.log" 2>&1 &&
    python3 "$check" --measured "$d/resumed.json" --world 4 --pp 2 --micro 4 --chunks 1 --steps 2 &&
    grep -q '"name":"step 4"' "$d/resumed.json"; } ||
    { cat "$d/save.log" "$d/resumed.log"; bad "a run resumed at step 2: no trace of steps 3 and 4"; }

  # A cap of 0.05 MiB (12.8 KiB a rank) cuts the trace: still one JSON
  # document, the ranks past their share labelled, rank 0 warns, and the
  # check rejects it as incomplete.
  PTDC_TRACE=$d/cut.json PTDC_TRACE_MAX_MB=0.05 "$d/run.sh" --steps 3 > "$d/cut.log" 2>&1 ||
    { cat "$d/cut.log"; bad "PTDC_TRACE_MAX_MB=0.05: the run failed"; }
  grep -q "warning: PTDC_TRACE: a rank left out" "$d/cut.log" || bad "PTDC_TRACE_MAX_MB=0.05: no warning"
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not any(
      e['name'] == 'process_labels' and 'truncated' in e['args']['labels'] for e in d['traceEvents']))" \
    "$d/cut.json" || bad "PTDC_TRACE_MAX_MB=0.05: not JSON, or no rank labelled truncated"
  if python3 "$check" --measured "$d/cut.json" --world 4 --pp 2 --micro 4 --chunks 1 --steps 3 > /dev/null; then
    bad "PTDC_TRACE_MAX_MB=0.05: the cut trace passed the check"
  fi

  # NAME ENV... : exit 2, the sentence, no step
  refused() {
    want=$1 name=$2
    shift 2
    out=$(env "$@" "$d/run.sh" --steps 2 2>&1)
    rc=$?
    if [ $rc -ne 2 ] || ! printf '%s\n' "$out" | grep -q -- "$want" || printf '%s\n' "$out" | grep -q '^step'; then
      printf '%s\n' "$out" | sed 's/^/    /'; bad "$name: exit $rc (want 2, '$want', no step)"
    else
      echo "$name: $(printf '%s\n' "$out" | grep -m1 -- "$want")"
    fi
  }
  refused "train: PTDC_TRACE $work/none/t.json" "unwritable PTDC_TRACE" PTDC_TRACE=$work/none/t.json
  refused "PTDC_TRACE_MAX_MB expects a number" "PTDC_TRACE_MAX_MB=x" PTDC_TRACE=$d/x.json \
    PTDC_TRACE_MAX_MB=x
  refused "PTDC_TRACE_STEPS expects a positive integer" "PTDC_TRACE_STEPS=0" PTDC_TRACE=$d/x.json \
    PTDC_TRACE_STEPS=0
fi

out=$("$ptdc" "$src/models/tiny-llama.mdl" --gpus 2 --target cpu --plan-only \
      --trace-plan "$work/none/p.json" 2>&1)
rc=$?
if [ $rc -eq 0 ] || ! printf '%s\n' "$out" | grep -q "trace-plan: cannot write '$work/none/p.json'"; then
  printf '%s\n' "$out" | tail -3; bad "unwritable --trace-plan: exit $rc"
else
  echo "unwritable --trace-plan: $(printf '%s\n' "$out" | grep -m1 'trace-plan')"
fi
[ $fail = 0 ] && echo "trace: ok"
exit $fail
