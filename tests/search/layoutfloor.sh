#!/bin/sh
# The layout's memory floor in every search (search.c, above_floor;
# search_memfloor.c): stages are whole pieces, so some rank holds
# ceil(j / pp) of the j largest, which the strategy-free memory bounds
# spread evenly. DeepSeek-V3 on 64 GB200s barely fits (dp 1 x tp 32 x pp 2,
# recomputing everything): the candidates whose mean states fit but whose
# fullest rank cannot were solved and walked down their frontiers to the
# end before a plan was found (253 meshes solved when written). The floor
# must prune without losing the plan: the same plan with it as without it
# (PTDC_SEARCH_NO_LAYOUT_FLOOR), and fewer meshes solved (78 when
# written). That the floor stays below pass_predict's peak is
# search.bounds' check (check_bounds); PTDC_SEARCH_CHECK is left out here
# (26 CPU s on this model; search/fit-cut runs it on Mixtral).
exec sh "$(dirname "$0")/prunes.sh" "$1" "$2" layoutfloor PTDC_SEARCH_NO_LAYOUT_FLOOR meshes 0 models/deepseek-v3.mdl --gpus 64 --gpu gb200 --plan-only
