#!/bin/sh
# The floor cut into stages in the bound of a candidate's plans that fit
# (search.c, fit_floor_bound): before a group's strategies are solved, a
# pipelined candidate with one chunk per rank is bounded by the group's
# floor, without the strategies no fitting plan uses, cut into stages that
# fit by the partition, with the fill and drain (hope_bound) - whole pieces
# per rank, which the strategy-free bounds spread evenly. Groups none of
# whose candidates can then beat the best plan are not solved. It must
# prune without losing a plan: Mixtral 8x7B on 256 A100s plans the same
# with it as without it (PTDC_SEARCH_NO_FIT_CUT), and solves fewer meshes
# (61 against 89 when written), its shortcuts holding (PTDC_SEARCH_CHECK).
# That the bound stays below pass_predict is search.bounds' check (the cut
# overstated by 1% dies there).
exec sh "$(dirname "$0")/prunes.sh" "$1" "$2" fitcut PTDC_SEARCH_NO_FIT_CUT meshes 1 models/mixtral-8x7b.mdl --gpus 256 --plan-only
