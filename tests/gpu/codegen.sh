#!/bin/sh
# codegen.sh PTDC SRC WORK: the programs ptdc generates for GPUs compile and
# link with nvcc for sm_80 and sm_90 against cuBLAS, NCCL and the CUDA
# runtime library, warning-free (-Werror all-warnings, host -Wall -Wextra
# -Werror). No GPU needed: this is the CI half of issue 7's proof.
set -u
ptdc=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
fail=0
build() { # name, then ptdc arguments
    name=$1; shift
    if ! "$ptdc" "$@" --target cuda -o "$work/$name" >"$work/$name.gen" 2>&1; then
        echo "FAIL $name: ptdc $*"; cat "$work/$name.gen"; fail=1; return
    fi
    if ! make -s -C "$work/$name" train WERROR="-Werror all-warnings -Xcompiler=-Werror" \
            >"$work/$name.make" 2>&1 || [ ! -x "$work/$name/train" ]; then
        echo "FAIL $name: nvcc build"; tail -n 30 "$work/$name.make"; fail=1; return
    fi
    if [ -s "$work/$name.make" ]; then
        echo "FAIL $name: the build printed warnings"; head -n 30 "$work/$name.make"; fail=1; return
    fi
    ranks=$(grep -o -- '-np [0-9]*' "$work/$name/run.sh" | tail -n 1)
    echo "ok $name: train built for sm_80 and sm_90 ($ranks)"
}
cd "$src" || exit 1
build llama2-7b-64 models/llama2-7b.mdl --gpus 64
build tiny-llama-4 models/tiny-llama.mdl --gpus 4 --dp 2 --tp 2
build tiny-gpt-4-pp models/tiny-gpt.mdl --gpus 4 --pp 2 --tp 2
# ZB-H1: each stage's W (stageN_wgrad) and the W slots B copies into
build tiny-llama-zb models/tiny-llama.mdl --gpus 4 --pp 2 --tp 2 --sp on --schedule zb-h1
# ... with MoE layers: the experts' B (rt_moe_act_bwd_b) and W
# (rt_moe_act_bwd_w) around each layer's W slot, the experts exchanged over dp
build tiny-mixtral-zb models/tiny-mixtral.mdl --gpus 4 --pp 2 --dp 2 --ep 2 --schedule zb-h1
# FP8 GEMMs (cg_matmul_fp8: rt_cast_fp8_t, rt_matmul_fp8) and their amax
# reductions over the tensor-parallel group
build tiny-llama-fp8 models/tiny-llama.mdl --gpus 2 --gpu h100-80gb --precision fp8 --tp 2
build tiny-mtp-4 models/tiny-mtp.mdl --gpus 4 --pp 2 --tp 2   # multi-token prediction: shifted loads, two losses
exit $fail
