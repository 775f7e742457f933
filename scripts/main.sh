#!/usr/bin/env bash
# The main job, on a fresh machine: install what is missing, build, then
# compile LLaMA-2 7B and show its IR summary and parameter count.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== ptdc models/llama2-7b.mdl --emit summary"
build/driver/ptdc models/llama2-7b.mdl --emit summary
