#!/bin/sh
# The walk's jumps (search.c, walk_jump): once a plan fits, the next point
# of a repeat's frontier may be asked under a budget well below its last
# memory, not just below it, where every point skipped holds too many model
# states (the least of them, pass_ilp_stage_least) for any cut that fits to
# beat the best plan. They must skip without losing a plan: Mixtral 8x7B on
# 256 A100s plans the same with them as without (PTDC_SEARCH_NO_JUMP), with
# fewer ILP solves (222 against 244 when written), its shortcuts holding
# (PTDC_SEARCH_CHECK: the frontiers the jumps read against the long way's).
# That the jumps' bounds stay below pass_predict on the points they skip is
# search.bounds' check (check_walk). DeepSeek-V3 on 2048 B200s: 3,968 -> 3,306
# solves (docs/planner.md, thirty-fourth change).
exec sh "$(dirname "$0")/prunes.sh" "$1" "$2" jump PTDC_SEARCH_NO_JUMP solves 1 models/mixtral-8x7b.mdl --gpus 256 --plan-only
