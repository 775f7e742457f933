#!/bin/sh
# zb_order.sh PTDC SRC WORK: a ZB-H1 program runs plan/schedule.c's order.
# tiny-llama on 4 CPU ranks, pp 4 (rank r defers each weight gradient r
# backwards), 8 micro-batches, written by `ptdc --schedule zb-h1 -o` with its
# --trace-plan, trains 3 steps under PTDC_TRACE. trace_check.py --split
# proves every rank ran every micro-batch's forward, backward (B) and
# weight gradients (W) once per step, in the predicted trace's order for its
# pipeline rank (both from plan_schedule_op), and (--self-test) that the
# check rejects a W run before the B it follows. The numbers are the
# equivalence tests' (tests/codegen/CMakeLists.txt, *-zb layouts): W run
# right after its own B computes the same gradients, so only the order shows
# where it ran. Then MOE, tests/codegen's tiny-mixtral pp2-mb4-zb program
# (fixture cg_tiny-mixtral: nothing more to build), traced with kernel spans:
# each MoE layer's experts make their weight gradients in W
# (rt_moe_act_bwd_w in every W span, rt_moe_act_bwd_b in every B span, never
# the unsplit rt_moe_act_bwd).
#   zb_order.sh PTDC SRC WORK MOE
set -u
ptdc=$1 src=$2 work=$3 moe=$4
. "$(dirname "$0")/logcheck.sh"
. "$(dirname "$0")/progcache.sh"
check=$(dirname "$0")/trace_check.py
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
rm -rf "$work" && mkdir -p "$work"
d=$work/pp4-zb
"$ptdc" "$src/models/tiny-llama.mdl" --gpus 4 --target cpu --pp 4 --dp 1 --tp 1 --micro-batch 2 \
    --recompute none --zero 0 --schedule zb-h1 -o "$d" --trace-plan "$d/plan-trace.json" > "$work/ptdc.log" 2>&1 &&
    build_program "$d" > "$work/make.log" 2>&1 || { cat "$work/ptdc.log" "$work/make.log"; echo "FAIL: cannot build"; exit 1; }
grep -q "schedule *ZB-H1" "$d/plan.txt" || { echo "FAIL: plan.txt is not ZB-H1"; exit 1; }
PTDC_TRACE="$d/trace.json" "$d/run.sh" --steps 3 > "$d/run.log" 2>&1 || { cat "$d/run.log"; echo "FAIL: the traced run failed"; exit 1; }
logcheck "$d/run.log" || { echo "FAIL: sanitizer findings"; exit 1; }
python3 "$check" --measured "$d/trace.json" --plan "$d/plan-trace.json" --world 4 --pp 4 --micro 8 --chunks 1 \
    --steps 3 --split --self-test || { echo "FAIL: trace_check"; exit 1; }
[ -x "$moe/train" ] || { echo "FAIL: no program in $moe (fixture cg_tiny-mixtral)"; exit 1; }
PTDC_TRACE="$work/moe-trace.json" PTDC_TRACE_KERNELS=1 "$moe/run.sh" --steps 2 > "$work/moe-run.log" 2>&1 ||
    { cat "$work/moe-run.log"; echo "FAIL: the traced MoE run failed"; exit 1; }
logcheck "$work/moe-run.log" || { echo "FAIL: sanitizer findings"; exit 1; }
python3 "$check" --measured "$work/moe-trace.json" --world 2 --pp 2 --micro 4 --chunks 1 \
    --steps 2 --split --kernels --in-stage rt_moe_act_bwd_w=wgrad --in-stage rt_moe_act_bwd_b=bwd \
    --in-stage rt_moe_act_bwd=none --self-test || { echo "FAIL: trace_check (MoE)"; exit 1; }
echo "zb_order: every rank ran ZB-H1's order, the experts' weight gradients in W"
