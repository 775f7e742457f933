#!/bin/sh
# A candidate memory shaped (its cut recomputes, or under a lowered limit, or
# nothing of the variant fits it) goes down the frontier walk, unless even the
# variant's fastest cut with memory left out cannot beat the best plan
# (search.c, free_lost): leaner variants are slower by the ILP's own measure
# and memory only makes cuts slower, the rule that finishes a candidate memory
# did not shape. It must end walks without losing a plan: Mixtral 8x7B on
# 1024 A100s plans the same with the rule as without it
# (PTDC_SEARCH_NO_FREE_CUT), with fewer ILP solves (339 against 429 when
# written), and its shortcuts hold (PTDC_SEARCH_CHECK).
exec sh "$(dirname "$0")/prunes.sh" "$1" "$2" freecut PTDC_SEARCH_NO_FREE_CUT solves 1 models/mixtral-8x7b.mdl --gpus 1024 --plan-only
