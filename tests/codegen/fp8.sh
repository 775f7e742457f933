#!/bin/sh
# fp8.sh: FP8 programs (docs/precision.md, "What the programs compute").
#   fp8.sh BIN PTDC SRC WORK
# 1. tiny-llama on one rank in fp8 and in bf16, 8 steps from the same weights
#    on the same data: every step's loss within 3% of bf16's, not all equal
#    (the FP8 GEMMs ran), and the fp8 loss falls.
# 2. The driver's FP8 program (ptdc --precision fp8 -o) runs in FP8 exactly
#    the GEMMs the plan prices in FP8: tiny-llama with 4 layers, the stack's
#    bf16 first and last layers 1 and 1, so the two middle layers' 7 linears
#    (q, k, v, o, gate, up, down): per micro-batch 2 x 14 cg_matmul_fp8
#    (forward and the input's gradient) and 2 x 7 cg_matmul_fp8_grad (the
#    weight's), counted by the program's own profile (PTDC_PROFILE=1); the
#    1-layer-each-end ones and the head stay bf16 GEMMs.
# BIN holds cg_gen.
set -eu
bin=$1 ptdc=$2 src=$3 work=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
. "$src/tests/codegen/progcache.sh"
rm -rf "$work"
mkdir -p "$work"
fail=0

train() { # dir steps: the losses, one a line
    "$1/run.sh" --steps "$2" --data synthetic:7 --adam-eps 1e-4 --deterministic > "$1/log" 2>&1 || {
        cat "$1/log"; echo "fp8: $1 failed to train"; exit 1; }
    grep '^step' "$1/log" | awk '{print $5}' > "$1/losses"
}

for p in bf16 fp8; do
    "$bin/cg_gen" "$src/models/tiny-llama.mdl" 1rank "$work/$p" --precision $p
    build_program "$work/$p"
    train "$work/$p" 8
done
paste "$work/bf16/losses" "$work/fp8/losses" | awk '
    { d = $2 - $1; if (d < 0) d = -d; r = d / $1
      printf "step %d: loss bf16 %s fp8 %s: %.3g relative\n", NR, $1, $2, r
      if (!(r <= 0.03)) { print "FAIL: fp8 more than 3% from bf16"; bad = 1 }
      if ($1 != $2) differ = 1
      if (NR == 1) first = $2; last = $2 }
    END { if (!differ) { print "FAIL: fp8 losses equal bf16 bit for bit: no FP8 GEMM ran"; bad = 1 }
          if (!(last < first)) { print "FAIL: fp8 training did not lower the loss"; bad = 1 }
          printf "fp8 loss %s -> %s\n", first, last
          exit bad }' || fail=1

d=$work/driver
"$ptdc" "$src/models/tiny-llama.mdl" --set n_layers=4 --gpus 2 --gpu h100-80gb --precision fp8 --target cpu \
    --dp 2 --stack-set lp_bf16_first_layers=1 --stack-set lp_bf16_last_layers=1 -o "$d"
python3 - "$d/plan.json" <<'PY' || fail=1
import json, sys
p = json.load(open(sys.argv[1]))["precision"]
if (p["format"], p["bf16_layers_first"], p["bf16_layers_last"]) != ("fp8", 1, 1):
    print("FAIL plan.json precision %s" % p)
    sys.exit(1)
PY
make -s -C "$d" train
PTDC_PROFILE=1 "$d/run.sh" --steps 4 --data synthetic:7 > "$d/log" 2>&1 || { cat "$d/log"; echo "fp8: the driver's program failed"; exit 1; }
micro=$(sed -n 's/.* \([0-9]*\) micro-batches of .*/\1/p' "$d/log" | head -1)
calls() { awk -v f="$1" '$1 == "profile:" && $2 == f { print $3 + 0; exit }' "$d/log"; }
fwd=$(calls cg_matmul_fp8) wgrad=$(calls cg_matmul_fp8_grad) bf=$(calls cg_matmul)
echo "driver program: $micro micro-batch(es); per step cg_matmul_fp8 $fwd, cg_matmul_fp8_grad $wgrad, bf16 cg_matmul $bf"
[ "$fwd" = "$((micro * 28))" ] || { echo "FAIL: $fwd FP8 forward and input-gradient GEMMs, not $((micro * 28))"; fail=1; }
[ "$wgrad" = "$((micro * 14))" ] || { echo "FAIL: $wgrad FP8 weight-gradient GEMMs, not $((micro * 14))"; fail=1; }
[ -n "$bf" ] && [ "$bf" -gt 0 ] || { echo "FAIL: no bf16 GEMM left (the first and last layers, the head)"; fail=1; }
exit $fail
