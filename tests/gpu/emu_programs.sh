#!/bin/sh
# emu_programs.sh CGBIN SRC WORK: the CUDA programs ptdc generates, end to end
# on 2-8 emulated GPUs (runtime/cuda/emu: `make train-emu`, one MPI process
# per GPU), each against the CPU backend's program for the same layout
# (tests/codegen/cg_gen pins both plans): every step's loss and gradient
# norm, and the exported weights (stcmp, within a tolerance of each tensor's
# scale). CGBIN holds cg_gen and stcmp. The cases (name, model, layout, then
# VAR=VALUE settings of the CUDA run) are chosen so that every path issue 34
# lists runs at least once; docs/cuda.md "The generated programs" lists them.
# EMU_CASES="name ..." runs only those cases (a failing one, quickly).
set -eu
bin=$1 src=$2 work=$3
. "$src/tests/codegen/logcheck.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
mkdir -p "$work"
steps=3
# The models at half their sequence and batch: emulated kernels run every
# CUDA thread as a fiber.
sets="--set seq=16 --set global_batch=8"
# --decay-steps: the same learning rate schedule for a run cut short and
# resumed as for the whole run.
args="--data synthetic:7 --adam-eps 1e-2 --deterministic --decay-steps $steps"

# Tolerances, relative, derived from this matrix's own runs (docs/cuda.md):
# the CPU backend keeps activations in fp32, the CUDA backend in bf16 (8
# bits of mantissa, a rounding of up to 2^-9 of each stored value), so the
# two differ by bf16 roundings. One rank shows the same differences as
# every layout here (tiny-gpt 1rank: loss 1.8e-5 at step 3, gradient norm
# 4.9e-4, weights 0.034 of a bias's scale, the same as dp2-zero2's), so they
# are the backends' rounding, not the distribution's. Measured worst over
# the bf16 cases: loss 1.8e-5, gradient norm 4.9e-4, weights 0.034 (a
# zero-initialised bias: its whole value is 3 steps' updates); the limits
# are about 5x those, 3x for the weights. A lost or doubled reduction, a wrong
# shard or a stale buffer moves the gradient norm by far more than 3e-3.
# FP8 (case 7): a bf16 rather than fp32 input to a cast lands some values on
# the other side of an E4M3 rounding boundary (6 to 12% of the value):
# measured loss 1e-4, gradient norm 2e-3, weights 0.006; limits as
# tests/codegen/equiv.sh's FP8 ones (1e-3, 1e-2, 0.1).
# --adam-eps 1e-2, not equiv.sh's 1e-4: with eps far below a gradient's
# size Adam's step is its sign, and a zero-initialised bias whose gradient is
# near zero then moves by a whole learning rate on one backend and not the
# other: 0.21 of its scale after 3 steps of tiny-gpt on one rank, bf16
# against fp32; with 1e-2 a weight's step stays proportional to its
# gradient (0.034).
bf16_tol="1e-4 3e-3 0.1" fp8_tol="1e-3 1e-2 0.1"

fail() { echo "emu_programs: $*"; exit 1; }

# The programs' own code (model.c, the trainer) compiles at EMU_OPT (-O0),
# the CPU programs as one unit (tests/codegen/equiv.sh's unity build): what
# runs the kernels, the CPU runtime archive and the emulator's, is the
# build's, compiled as before. ISO C and C++ (-std=c11, -std=c++17) allow no
# contraction or reassociation at any level, so the losses, gradient norms
# and exported weights are byte for byte those of the Makefiles' -O2
# (cmp of both cases dp2-zero2-nooverlap and tp2-fp8, the CPU runs and the
# emulated ones). Measured (release build, the shared 2-core VM at load
# 19): tiny-llama dp2-tp2-sp-zero3-full-mb2's CPU program 2.7 CPU s at -O2
# in 22 units, 0.6 at -O0 as one; its train-emu 2.6 CPU s at -O2, 1.5 at
# -O0; those two cases 29.9 CPU s before, 23.5 after (docs/design.md,
# "The suite's time"). EMU_OPT=-O2: the Makefiles' level (still one unit).
opt=${EMU_OPT:--O0}
build() { # dir, model, layout, then cg_gen flags: generate and build once
    d=$1 model=$2 layout=$3
    shift 3
    [ -f "$d/.built" ] && return 0
    rm -rf "$d"
    "$bin/cg_gen" "$src/models/$model.mdl" "$layout" "$d" $sets "$@" > "$d.gen" 2>&1 ||
        { cat "$d.gen"; fail "cg_gen $model $layout $* failed"; }
    case " $* " in
    *" --cuda "*)
        # EMUFLAGS with the Makefile's -O2 replaced (the Makefile names no
        # variable for the level alone)
        emuflags=$(sed -n 's/^EMUFLAGS = //p' "$d/Makefile" | sed "s/^-O2 /$opt /")
        case $emuflags in "$opt "*) ;; *) fail "$d/Makefile: EMUFLAGS does not start with -O2: $emuflags" ;; esac
        make -s -C "$d" train-emu EMU_WERROR=-Werror "EMUFLAGS=$emuflags" > "$d.make" 2>&1 ||
            { tail -n 30 "$d.make"; fail "make train-emu failed in $d"; } ;;
    *)
        for f in $(sed -n 's/^SRCS = //p' "$d/Makefile"); do echo "#include \"$f\""; done > "$d/emu_unity.c"
        make -s -C "$d" train OPT="$opt" SRCS=emu_unity.c > "$d.make" 2>&1 ||
            { tail -n 30 "$d.make"; fail "make train failed in $d"; } ;;
    esac
    touch "$d/.built"
}

losses() { # log, out: step, loss, gradient norm
    grep '^step' "$1" | awk '{split($2, s, "/"); print s[1], $5, $11}' > "$2"
    [ "$(wc -l < "$2")" -gt 0 ] || { cat "$1"; fail "$1 logged no steps"; }
}

emu() { # dir, log, then train flags: the emulated program on its ranks
    d=$1 log=$2
    shift 2
    ranks=$(sed -n 's/^ *ranks=\([0-9]*\)$/\1/p' "$d/run.sh")
    mpirun --oversubscribe --bind-to none -np "$ranks" "$d/train-emu" "$@" > "$log" 2>&1 ||
        { tail -n 40 "$log"; fail "$log: the emulated program failed"; }
    logcheck "$log" || fail "$log: sanitizer findings"
}

compare() { # name, cpu losses, cuda losses, cpu weights, cuda weights
    case " $cg_flags " in *" fp8 "*) set -- "$@" $fp8_tol ;; *) set -- "$@" $bf16_tol ;; esac
    tol_loss=$6 tol_gnorm=$7 tol_w=$8
    paste "$2" "$3" | awk -v n="$1" -v tl="$tol_loss" -v tg="$tol_gnorm" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        { r = rel($2, $5); q = rel($3, $6)
          printf "%s step %d: loss %s (cpu) %s (emulated cuda): %.2g; gradient norm %s %s: %.2g\n", n, $1, $2, $5, r, $3, $6, q
          if ($1 != $4 || !(r <= tl) || !(q <= tg)) bad = 1 }
        END { exit bad || NR == 0 }' || fail "$1: losses or gradient norms differ beyond bf16 rounding"
    "$bin/stcmp" "$4" "$5" --tol "$tol_w" > "$work/$1.stcmp" 2>&1 ||
        { cat "$work/$1.stcmp"; fail "$1: exported weights differ beyond bf16 rounding"; }
    echo "$1 weights: $(tail -n 1 "$work/$1.stcmp")"
}

run_case() { # name, model, layout, then VAR=VALUE settings of the CUDA run
    name=$1 model=$2 layout=$3
    shift 3
    tag=$model-$layout${cg_flags:+-$(echo $cg_flags | sed 's/^-*//; s/[^a-z0-9]\{1,\}/-/g')}
    cpu=$work/$tag-cpu cuda=$work/$tag-cuda
    build "$cpu" "$model" "$layout" $cg_flags
    build "$cuda" "$model" "$layout" --cuda $cg_flags
    if [ ! -f "$cpu/losses" ]; then # the CPU reference, once per layout
        "$cpu/run.sh" --steps $steps $args --export-hf "$cpu/final.safetensors" > "$cpu/log" 2>&1 ||
            { tail -n 40 "$cpu/log"; fail "$cpu: the CPU program failed"; }
        losses "$cpu/log" "$cpu/losses"
    fi
    t=$work/$name
    rm -rf "$t" && mkdir -p "$t"
    start=$(date +%s)
    (export "$@"; emu "$cuda" "$t/log" --steps $steps $args --export-hf "$t/final.safetensors") || exit 1
    losses "$t/log" "$t/losses"
    compare "$name" "$cpu/losses" "$t/losses" "$cpu/final.safetensors" "$t/final.safetensors"
    echo "$name: $(grep -m 1 '^emu: scheduler seed' "$t/log" || echo 'no seed line') ($(($(date +%s) - start)) s)"
}

cg_flags= # more cg_gen flags of both programs (a case sets and clears it)
want() { [ -z "${EMU_CASES:-}" ] || case " $EMU_CASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# 1. Data parallel x tensor parallel with sequence parallelism, ZeRO-3
#    (parameter gathers, gradient reduce-scatters), full recomputation,
#    gradient buckets overlapped with the backward; twice, with two scheduler
#    seeds: every legal order must give the same bits.
if want dp2-tp2-sp-zero3; then
    run_case dp2-tp2-sp-zero3-s1 tiny-llama dp2-tp2-sp-zero3-full-mb2 PTDC_EMU_SEED=1
    run_case dp2-tp2-sp-zero3-s2 tiny-llama dp2-tp2-sp-zero3-full-mb2 PTDC_EMU_SEED=2
    cmp "$work/dp2-tp2-sp-zero3-s1/losses" "$work/dp2-tp2-sp-zero3-s2/losses" &&
        cmp "$work/dp2-tp2-sp-zero3-s1/final.safetensors" "$work/dp2-tp2-sp-zero3-s2/final.safetensors" ||
        fail "dp2-tp2-sp-zero3: scheduler seeds 1 and 2 gave different results"
    echo "dp2-tp2-sp-zero3: seeds 1 and 2 bitwise equal"
fi
# 2. ZeRO-2 and data parallelism without the overlap (PTDC_OVERLAP=0: every
#    gradient reduced after the backward), selective recomputation.
want dp2-zero2-nooverlap && run_case dp2-zero2-nooverlap tiny-gpt dp2-zero2-ffn-mb2 PTDC_OVERLAP=0 PTDC_EMU_SEED=3
# 3. Pipeline, interleaved (v2), with ZeRO-1 over dp, profiled and with
#    GEMMs timed (both synchronise the host inside the schedule: issue 34's
#    deadlock); sends above the rendezvous threshold (PTDC_EMU_RENDEZVOUS
#    lowered so the tiny activations meet it).
want pp2-v2-dp2-prof && run_case pp2-v2-dp2-prof tiny-gpt dp2-pp2-v2-mb4-zero1 PTDC_PROFILE=1 PTDC_TIME_GEMM=1 \
    PTDC_EMU_RENDEZVOUS=1024 PTDC_EMU_SEED=4
if want pp2-v2-dp2-prof; then
    grep -q '^profile: step ' "$work/pp2-v2-dp2-prof/log" || fail "pp2-v2-dp2-prof: PTDC_PROFILE printed no profile"
fi
# 4. Pipeline 1F1B with tensor parallelism and rendezvous sends; then the
#    checkpoint: 2 steps, save, resume for the third == the whole run, bitwise.
if want tp2-pp2-ckpt; then
    run_case tp2-pp2-ckpt tiny-llama tp2-pp2-mb4 PTDC_EMU_RENDEZVOUS=1024 PTDC_EMU_SEED=5
    d=$work/tiny-llama-tp2-pp2-mb4-cuda t=$work/tp2-pp2-ckpt
    (export PTDC_EMU_RENDEZVOUS=1024 PTDC_EMU_SEED=6
     emu "$d" "$t/first.log" --steps 2 $args --save "$t/ckpt"
     emu "$d" "$t/second.log" --steps $steps $args --load "$t/ckpt" --export-hf "$t/resumed.safetensors") || exit 1
    grep -q '^loaded checkpoint of step 2' "$t/second.log" || { cat "$t/second.log"; fail "tp2-pp2-ckpt: no checkpoint loaded"; }
    { grep '^step' "$t/first.log"; grep '^step' "$t/second.log"; } | awk '{split($2, s, "/"); print s[1], $5, $11}' > "$t/resumed"
    cmp "$t/losses" "$t/resumed" || { paste "$t/losses" "$t/resumed"; fail "tp2-pp2-ckpt: resumed losses differ"; }
    cmp "$t/final.safetensors" "$t/resumed.safetensors" || fail "tp2-pp2-ckpt: resumed weights differ"
    echo "tp2-pp2-ckpt: 2 steps + save + load + 1 step == 3 steps, bitwise"
fi
# 5. Mixture of experts with expert parallelism over dp (the tokens'
#    all-to-all between emulated ranks).
want dp2-ep && run_case dp2-ep tiny-mixtral dp2-ep-mb2 PTDC_EMU_SEED=7
#    ... and across dp x tp (EP 4, one expert a rank, the all-to-all over all
#    4 emulated GPUs), with ZeRO-1 over nothing for the experts.
want dp2-tp2-sp-epx && run_case dp2-tp2-sp-epx tiny-mixtral dp2-tp2-sp-epx-zero1-mb2 PTDC_EMU_SEED=11
# 6. All of dp, tp with sp and an interleaved pipeline on 8 emulated GPUs.
want dp2-tp2-sp-pp2-v2 && run_case dp2-tp2-sp-pp2-v2 tiny-llama dp2-tp2-sp-pp2-v2-mb4-zero1 PTDC_EMU_SEED=9
# 7. FP8 GEMMs (cuBLASLt's FP8 path, amax all-reduces over tp) against the
#    CPU backend's FP8 emulation.
cg_flags="--precision fp8"
want tp2-fp8 && run_case tp2-fp8 tiny-llama tp2-mb4 PTDC_EMU_SEED=8
cg_flags=
# 8. Multi-head latent attention (tiny-deepseek): slice, concat with the
#    rotated key part broadcast over the heads split by tp, attention with
#    v narrower than q and k (rt_attention_v_*), among routed experts.
want tp2-mla && run_case tp2-mla tiny-deepseek tp2 PTDC_EMU_SEED=10
# 9. ZB-H1 with data parallelism: each micro-batch's weight gradients (W)
#    deferred past later backwards, reading B's copies in W slots (rt_copy
#    on the compute stream), the buckets completed by the last W.
want dp2-pp2-zb && run_case dp2-pp2-zb tiny-llama dp2-pp2-mb4-zb PTDC_EMU_SEED=11
#    ... with MoE layers, the experts exchanged over dp: their weight
#    gradients in W (rt_moe_act_bwd_w) from the W slot B made them in
#    (rt_moe_act_bwd_b), the row counts kept on the host.
#    Then with W slots of the expected rows (ws100): a B that more rows
#    reach runs the layer's pending W, then its own weight gradients, and
#    the program makes the worst-case slots' bits (docs/moe.md, "Sizing the
#    W slot").
if want dp2-pp2-ep-zb; then
    run_case dp2-pp2-ep-zb tiny-mixtral dp2-pp2-ep-mb4-zb PTDC_EMU_SEED=12
    run_case dp2-pp2-ep-zb-ws tiny-mixtral dp2-pp2-ep-mb4-zb-ws100 PTDC_EMU_SEED=12
    cmp "$work/dp2-pp2-ep-zb/losses" "$work/dp2-pp2-ep-zb-ws/losses" &&
        cmp "$work/dp2-pp2-ep-zb/final.safetensors" "$work/dp2-pp2-ep-zb-ws/final.safetensors" ||
        fail "dp2-pp2-ep-zb-ws (W slots of the expected rows) is not dp2-pp2-ep-zb bit for bit"
fi
# 10. Experts of another activation (moe act = relu2, ungated: rt_moe_act_*,
#     rt_relu2_*; docs/moe.md "Expert activations"), exchanged over dp.
want dp2-ep-relu2 && run_case dp2-ep-relu2 tiny-moe-relu2 dp2-ep-mb2 PTDC_EMU_SEED=11
# multi-token prediction: the shifted targets' tail (-1, no target) and the weighted second loss
# in the CUDA cross-entropy kernels
want tp2-mtp && run_case tp2-mtp tiny-llama-mtp tp2-mb2 PTDC_EMU_SEED=13
echo "emu_programs: ok"
