#!/bin/sh
# The search check of issue 33 over every expressible dense Blackwell row of
# Megatron-Bridge's table: each row re-planned with its GPUs, model, sequence,
# global batch and precision recipe, the layout left to the search under
# --stack megatron, against the published layout pinned (tests/cost/bridge_dense.py,
# whose test runs a subset). Several minutes of CPU in a Release build.
#   bench/bridge_dense_search.sh [PTDC]     (default build/driver/ptdc)
set -e
src=$(cd "$(dirname "$0")/.." && pwd)
ptdc=${1:-$src/build/driver/ptdc}
exec python3 "$src/tests/cost/bridge_dense.py" "$ptdc" "$src" "$src/tests/cost/ref" search
