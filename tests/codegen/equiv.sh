#!/bin/sh
# equiv.sh: the equivalence matrix (tests/codegen/CMakeLists.txt).
#   equiv.sh BIN MODEL WORK setup LAYOUT...  generate and build each layout's program
#                                            (cg_gen), run the 1-rank reference
#   equiv.sh BIN MODEL WORK check LAYOUT     run LAYOUT's program; every step's loss and
#                                            gradient norm must equal the reference's within
#                                            1e-5 relative and the final weights within 1e-5
#                                            of each tensor's scale (stcmp); FP8 programs
#                                            the first step so, later ones looser (below)
#   equiv.sh BIN MODEL WORK gradcheck LAYOUT every parameter's gradient against finite
#                                            differences of the loss (train --grad-check)
#   equiv.sh BIN MODEL WORK chunked A B      B is A with "chunk" (--tp-overlap on): B's program
#                                            must make chunked calls, and its losses and gradient
#                                            norms must print as A's, its final weights within
#                                            1e-5 of each tensor's scale (below)
# TRAIN_FLAGS: more flags for every run (the reference's too), e.g.
# "--optimizer lamb".
# BIN holds cg_gen and stcmp. Each program trains STEPS (5) steps from the same
# initial weights (sharding-independent initialisation) on the same data. The
# reference is layout REF (default 1rank; a deep model's long pipeline is
# compared with a short one, the 1-rank runs of shallow models anchoring
# both: fp32 sums through 18 layers drift past 1e-5 of a small bias's
# scale between one rank and any pipeline).
set -eu
. "$(dirname "$0")/logcheck.sh"
. "$(dirname "$0")/progcache.sh"
bin=$1 model=$2 work=$3 cmd=$4 ref=${REF:-1rank}
shift 4
steps=${STEPS:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"

run() { # layout [tag]: train it, write loss and weights (file names + tag: runs of
         # one layout by two tests at once keep apart)
    d=$work/$1 t=${2:-}
    # --deterministic: accepted everywhere, a no-op on CPU (always bitwise)
    "$d/run.sh" --steps "$steps" --data synthetic:7 --adam-eps 1e-4 --deterministic ${TRAIN_FLAGS:-} --export-hf "$d/final$t.safetensors" \
        > "$d/log$t" 2>&1 || {
        cat "$d/log$t"; echo "equiv: $1 failed to train"; exit 1; }
    logcheck "$d/log$t" || exit 1
    grep '^step' "$d/log$t" | awk '{print $5, $11}' > "$d/losses$t" # loss, gradient norm
    [ "$(wc -l < "$d/losses$t")" -eq "$steps" ] || { cat "$d/log$t"; echo "equiv: $1 logged no losses"; exit 1; }
}

# A residual add whose sum the very next statement normalises (RMSNorm,
# LayerNorm) is one rt_add_rmsnorm_fwd / rt_add_layernorm_fwd call (the cost
# model prices it so): fail on a pair left as two calls.
fused() { # program dir
    awk '
        /^[ \t]*rt_add\(/ { s = $0; sub(/^[ \t]*rt_add\(/, "", s); split(s, a, ", *");
                              sum = a[1]; nb = a[5]; sub(/\).*/, "", nb); full = (a[4] == nb); next }
        /^[ \t]*rt_rmsnorm_fwd\(/ { s = $0; sub(/^[ \t]*rt_rmsnorm_fwd\(/, "", s); split(s, a, ", *");
                              if (full && sum != "" && a[3] == sum) { print FILENAME ": " $0; bad = 1 } }
        /^[ \t]*rt_layernorm_fwd\(/ { s = $0; sub(/^[ \t]*rt_layernorm_fwd\(/, "", s); split(s, a, ", *");
                              if (full && sum != "" && a[4] == sum) { print FILENAME ": " $0; bad = 1 } }
        /;[ \t]*$/ { sum = "" }
        END { exit bad }' "$1"/model.c || { echo "equiv: an add and the norm of its sum left unfused"; return 1; }
    fuse_n=$((${fuse_n:-0} + $(grep -c 'rt_add_[a-z]*norm_fwd(' "$1"/model.c || true)))
}

# Sibling GEMMs (q, k, v of one input; gate and up) run as one
# rt_matmul_batch, their weight gradients as one rt_matmul_grad_batch
# (plan_gemm_batch; the cost model prices them so): fail on two GEMMs of one
# function with the same A operand and shape left as separate calls (forward:
# rt_matmul without accumulation; weight gradients: rt_matmul_grad).
batched() { # program dir
    awk '
        /^(static )?void / { delete seen }
        /^[ \t]*rt_matmul(_grad)?\(/ { s = $0; sub(/^[ \t]*/, "", s); fn = s; sub(/\(.*/, "", fn)
                              sub(/^[a-z_]*\(/, "", s); sub(/\);.*/, "", s); split(s, a, ", *")
                              if (fn == "rt_matmul" && a[9] != "false") next
                              key = fn " " a[2] " " a[4] " " a[5] " " a[6] " " a[7] " " a[8]
                              if (key in seen) { print FILENAME ": " seen[key]; print FILENAME ": " $0; bad = 1 }
                              seen[key] = $0 }
        END { exit bad }' "$1"/model.c || { echo "equiv: sibling GEMMs left unbatched"; return 1; }
    batch_n=$((${batch_n:-0} + $(grep -c 'rt_matmul_batch(' "$1"/model.c || true)))
}

# An FP8 plan (CG_SETS has --precision fp8): its linear GEMMs run one
# cg_matmul_fp8 call each, never batched, and every program must have them.
fp8=0
case " ${CG_SETS:-} " in *" --precision fp8 "*) fp8=1 ;; esac

# The programs compile at -O0 (EQUIV_OPT): a third of -O2's CPU time under
# ASan, the same bits (ISO C: no contraction or reassociation at any level;
# every loss, gradient norm and final weight of the matrix compared equal
# with -O2's, docs/design.md "The suite's time"). The other tests that
# build programs (tests/fault, tests/hf, trace, fp8) keep the Makefile's -O2.
opt=${EQUIV_OPT:--O0}
# ... and as one unit (EQUIV_UNITY=off: the Makefile's 22): equiv_unity.c
# includes every source the Makefile lists, in its order, as the CUDA
# Makefile's trainer_all.cu does for the same files. 1.2 CPU s a program
# under ASan at -O0 instead of 1.9 (the compiler starts once and reads the
# headers once); no code changes (no inlining at -O0), and the matrix's
# losses, gradient norms and final weights compared byte for byte with the
# separate units' (docs/design.md, "The suite's time"). The Makefile's own
# separate compilation is what the Hugging Face, fault, trace and FP8 tests
# build.
# EQUIV_SAN=runtime (tests/codegen/CMakeLists.txt sets it on the fixtures
# of cg_san_runtime; EQUIV_SAN_KEEP lists their layouts that stay whole
# under the sanitizers): the program's own code, model.c and the
# trainer's 21 files, compiles as one unit without the build's sanitizers
# (equiv.mk), linked as before against the sanitised runtime: two thirds of
# a program's compile at -O0 is their instrumentation. model.c is runtime
# calls: every buffer it names is a slice of the program's one arena
# (rt_alloc), read and written by the runtime's kernels, collectives and
# copies, whose accesses ASan and UBSan check as before (an overrun past
# the arena is theirs, and one between two slices no build sees; a planted
# one fails the same way in both modes). What goes unchecked in these
# programs is the trainer's own accesses and model.c's pointer tables: the
# other fixtures' programs and the kept layouts run every trainer line
# these programs reach, measured with gcov (scripts/trainer_cover.py,
# docs/design.md "The suite's time").
unity() { # program dir: the make variables that build it as one unit
    [ "${EQUIV_UNITY:-on}" = on ] || return 0
    for f in $(sed -n 's/^SRCS = //p' "$1/Makefile"); do echo "#include \"$f\""; done > "$1/equiv_unity.c"
    case " ${EQUIV_SAN_KEEP:-} " in *" $(basename "$1") "*) echo SRCS=equiv_unity.c; return 0 ;; esac
    if [ "${EQUIV_SAN:-all}" = all ]; then
        echo SRCS=equiv_unity.c
        return 0
    fi
    # (the train rule's prerequisites are read at the include, its command
    # at run time: it links the object with the sanitizers' libraries)
    cat > "$1/equiv.mk" <<'MK'
include Makefile
PLAIN_CFLAGS = $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CFLAGS))
UNITY_SRCS := $(SRCS)
SRCS := equiv_unity.o
train: $(SRCS)
equiv_unity.o: equiv_unity.c $(UNITY_SRCS) $(HDRS)
	$(CC) $(PLAIN_CFLAGS) -I$(RUNTIME_INCLUDE) -c -o $@ equiv_unity.c
MK
    echo -f equiv.mk
}

case $cmd in
setup)
    mkdir -p "$work"
    for l in "$@"; do
        rm -rf "$work/$l"
        "$bin/cg_gen" "$model" "$l" "$work/$l" ${CG_SETS:-}
        build_program "$work/$l" OPT="$opt" $(unity "$work/$l")
        fused "$work/$l"
        batched "$work/$l"
        if [ $fp8 = 1 ]; then
            grep -q 'cg_matmul_fp8(' "$work/$l"/model.c || { echo "equiv: $l's FP8 program runs no FP8 GEMM"; exit 1; }
        fi
    done
    [ "${fuse_n:-0}" -gt 0 ] || { echo "equiv: no residual add fused into a norm in $model's programs"; exit 1; }
    [ $fp8 = 1 ] || [ "${batch_n:-0}" -gt 0 ] || { echo "equiv: no sibling GEMMs batched in $model's programs"; exit 1; }
    run "$ref"
    ;;
check)
    l=$1
    run "$l"
    # FP8: the first step within 1e-5 like every layout (the same scales,
    # so the same codes); after it, fp32 sums ordered otherwise by the layout
    # (a tensor-parallel all-reduce, a pipeline's micro-batch sums) leave
    # a few inputs on the other side of an FP8 rounding boundary, one E4M3
    # or E5M2 step (6 to 12% of the value) apart, and the runs drift: tiny-gpt
    # under tp2-sp measured 1.7e-5 in the gradient norm at step 2, 6.2e-5 in
    # the loss and 0.0031 in the gradient norm by step 5, and final weights
    # up to 0.036 of a bias's scale. A missing amax reduction moves the first
    # step's loss by 1.2e-4 (tiny-llama, tp2).
    tl=1e-5 tg=1e-5 tw=1e-5
    [ $fp8 = 0 ] || tl=1e-3 tg=1e-2 tw=0.1
    # LAMB: each tensor's step is scaled by ||w|| / ||r||, whose fp32 sums
    # the layout orders; a zero-initialised bias (tiny ||w||) carries that
    # rounding into its weights: tiny-gpt tp2-pp2 measured 8.7e-6 of the
    # scale (AdamW 3.3e-6 on the same layouts). Losses stay within 1e-5.
    case "${TRAIN_FLAGS:-}" in *lamb*) tw=3e-5 ;; esac
    # EQUIV_TOL_W: a model's own weight tolerance (tests/codegen/CMakeLists.txt
    # says why where it is set).
    [ -z "${EQUIV_TOL_W:-}" ] || tw=$EQUIV_TOL_W
    paste "$work/$ref/losses" "$work/$l/losses" | awk -v l="$l" -v tl=$tl -v tg=$tg '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        { r = rel($1, $3); q = rel($2, $4)
          printf "step %d: loss %s (reference) %s (%s): %.2g; gradient norm %s %s: %.2g\n", NR, $1, $3, l, r, $2, $4, q
          if (NR == 1 ? !(r <= 1e-5) || !(q <= 1e-5) : !(r <= tl) || !(q <= tg)) bad = 1 }
        END { exit bad }'
    "$bin/stcmp" "$work/$ref/final.safetensors" "$work/$l/final.safetensors" --tol $tw
    ;;
chunked)
    # Chunked GEMMs run OpenBLAS on fewer rows, and it picks kernels by
    # shape, so a product may differ from the whole GEMM's in the last bit
    # (tests/runtime/test_tp_chunk.c); what is gathered and reduce-scattered
    # is moved bit for bit. Measured over 5 steps: the losses and gradient
    # norms print the same; final weights 3.5e-7 of a scale apart on
    # tiny-llama (tp2-sp), 1.9e-6 on tiny-gpt (a zero-initialised bias,
    # whose small scale magnifies a last-bit difference): 1e-5, the
    # matrix's own bound.
    a=$1 b=$2
    for f in rt_allgather_matmul rt_matmul_reduce_scatter; do
        grep -q "$f(" "$work/$b/model.c" || { echo "equiv: $b's program makes no $f call"; exit 1; }
        ! grep -q "$f(" "$work/$a/model.c" || { echo "equiv: $a's program makes $f calls"; exit 1; }
    done
    run "$a" .chunked
    run "$b" .chunked
    paste "$work/$a/losses.chunked" "$work/$b/losses.chunked"
    cmp "$work/$a/losses.chunked" "$work/$b/losses.chunked" || { echo "equiv: $b's losses are not $a's"; exit 1; }
    "$bin/stcmp" "$work/$a/final.chunked.safetensors" "$work/$b/final.chunked.safetensors" --tol 1e-5
    ;;
wslot)
    # B is A (ZB-H1 with MoE layers) with smaller W slots (layout wsN): its
    # overflowing micro-batches run the experts' weight gradients in B,
    # after the W still pending (rt.h rt_moe_act_bwd_b), so every sum is
    # made in the same order: the losses, gradient norms and final weights
    # are A's bit for bit.
    a=$1 b=$2
    ra=$(sed -n 's/.*_MOE_W_ROWS = \([0-9]*\);.*/\1/p' "$work/$a/model.c" | head -1)
    rb=$(sed -n 's/.*_MOE_W_ROWS = \([0-9]*\);.*/\1/p' "$work/$b/model.c" | head -1)
    [ -n "$ra" ] && [ -n "$rb" ] && [ "$rb" -lt "$ra" ] || {
        echo "equiv: $b's W slots ($rb rows) are not smaller than $a's ($ra)"; exit 1; }
    run "$a" .wslot
    run "$b" .wslot
    paste "$work/$a/losses.wslot" "$work/$b/losses.wslot"
    cmp "$work/$a/losses.wslot" "$work/$b/losses.wslot" || { echo "equiv: $b's losses are not $a's"; exit 1; }
    cmp "$work/$a/final.wslot.safetensors" "$work/$b/final.wslot.safetensors" || {
        echo "equiv: $b's final weights are not $a's bit for bit"; exit 1; }
    echo "equiv: $b (W slots of $rb rows) equals $a ($ra rows) bit for bit"
    ;;
gradcheck)
    "$work/$1/run.sh" --grad-check --data synthetic:7 > "$work/$1/gradcheck.log" 2>&1 || {
        cat "$work/$1/gradcheck.log"; echo "equiv: gradient check of $1 failed"; exit 1; }
    logcheck "$work/$1/gradcheck.log" || exit 1
    grep grad-check "$work/$1/gradcheck.log"
    ;;
*) echo "equiv.sh: unknown command $cmd"; exit 2 ;;
esac
