#!/bin/sh
# The search check of issue 33 over the MoE rows of Megatron-Bridge's table
# (issue 31): each expressible row re-planned with its GPUs, model, sequence,
# global batch and precision recipe, the layout (EP and its folding included)
# left to the search under --stack megatron --emit megatron, against the
# published layout pinned (tests/cost/bridge_moe.py search). Tens of minutes of
# CPU in a Release build: the Qwen3-235B searches on 64-256 GPUs take minutes each.
#   bench/bridge_moe_search.sh [PTDC]     (default build/driver/ptdc)
# BRIDGE_MOE_SEARCH=REGEX searches only the rows whose label matches;
# BRIDGE_MOE_OVERLAP=off prices them without the recipes' all-to-all overlap.
set -e
src=$(cd "$(dirname "$0")/.." && pwd)
ptdc=${1:-$src/build/driver/ptdc}
exec python3 "$src/tests/cost/bridge_moe.py" "$ptdc" "$src" "$src/tests/cost/ref" search
