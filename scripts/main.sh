#!/usr/bin/env bash
# The main job, on a fresh machine: install what is missing and build; plan
# LLaMA-2 7B for 64 A100-80GB GPUs and show the plan; then compile tiny-llama
# for 4 CPU ranks (dp 2 x tp 2), build and run it for 30 steps and show the
# loss falling.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=build/main

echo
echo "== ptdc models/llama2-7b.mdl --gpus 64 -o $out/llama2-7b"
build/driver/ptdc models/llama2-7b.mdl --gpus 64 -o "$out/llama2-7b"
sed -n '1,/^operator shardings/p' "$out/llama2-7b/plan.txt" | sed '$d'
sed -n '/^prediction/,$p' "$out/llama2-7b/plan.txt"
echo "(the whole plan: $out/llama2-7b/plan.txt, plan.json, plan.svg; CUDA programs beside them)"

echo
echo "== ptdc models/tiny-llama.mdl --gpus 4 --dp 2 --tp 2 --target cpu -o $out/tiny-llama"
build/driver/ptdc models/tiny-llama.mdl --gpus 4 --dp 2 --tp 2 --target cpu -o "$out/tiny-llama"
echo
echo "== $out/tiny-llama/run.sh --steps 30   (4 MPI ranks on this machine's CPUs)"
"$out/tiny-llama/run.sh" --steps 30
