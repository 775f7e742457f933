#!/bin/sh
# Pinned layouts shard for real even where the costs alone would not: on
# tiny-llama every collective costs more than the compute it saves, so an
# unconstrained ILP replicates; --dp, --tp and --sp on must still split the
# batch, the weights and the norms. --ep and --etp pin the routed experts
# only: Qwen2-MoE's gated shared expert (a one-expert moe) is a dense MLP and
# left to the ILP (it stopped these pins with an internal error before).
set -u
ptdc=$1
cd "$2" || exit 1
fail=0
check() { # args... -- pattern...
    args=""
    while [ "$1" != "--" ]; do args="$args $1"; shift; done
    shift
    # shellcheck disable=SC2086
    out=$("$ptdc" models/${model:-tiny-llama}.mdl --gpus 4 $args --emit plan 2>&1) || { echo "FAIL:$args: exit $?"; echo "$out"; fail=1; return; }
    for pat in "$@"; do
        printf '%s\n' "$out" | grep -qE -- "$pat" || { echo "FAIL:$args: no line matching '$pat'"; fail=1; }
    done
}
check --dp 4 -- "^  DP 4 x TP 1 x PP 1 = 4 GPUs" "rmsnorm +h\[batch/dp, seq, d_model\]"
check --dp 2 --tp 2 -- "^  DP 2 x TP 2 x PP 1 = 4 GPUs" "wq\[d_model, n_heads/tp, head_dim\]" \
    "w_down\[d_ff/tp, d_model\]" "embed\[vocab/tp, d_model\]|embed\[vocab, d_model/tp\]"
check --dp 2 --tp 2 --sp on -- "sequence parallel  on" "rmsnorm +h\[batch/dp, seq/sp, d_model\]"
check --tp 2 --pp 2 -- "^  DP 1 x TP 2 x PP 2 = 4 GPUs" "lm_head\[d_model/tp, vocab\]|lm_head\[d_model, vocab/tp\]"
model=tiny-qwen2-moe
check --tp 2 --ep 2 -- "^  DP 1 x TP 2 x PP 2 = 4 GPUs" "^  experts +ep 2 \(folded over tp, all-gather\), etp 1," \
    "e_gate\[n_experts/tp, d_model, d_expert\]"
check --dp 2 --tp 2 --ep 2 --etp 1 -- "^  experts +ep 2 \(folded over dp, all-to-all\), etp 1, expert-dp 2"
check --dp 2 --tp 2 --ep 2 --etp 2 -- "^  experts +ep 2 \(folded over dp, all-to-all\), etp 2 \(folded over tp\)"
[ $fail = 0 ] && echo "ok pins"
exit $fail
