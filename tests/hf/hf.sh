#!/bin/sh
# hf.sh: Hugging Face models end to end (issue 14; tests/hf/CMakeLists.txt).
#
#   hf.sh e2e PTDC BIN WORK ARCH DTYPE SHARDS LAYOUT
#     mkhf.py writes a tiny ARCH model (config.json, weights in DTYPE, SHARDS
#     files) and a token file; `ptdc import-hf` writes its .mdl; cg_gen (in
#     BIN, with stcmp) builds a 1-rank program and one for LAYOUT. Then:
#      1. the 1-rank program, importing the directory, logs a first-step loss
#         equal (1e-6 relative) to mkhf.py's double-precision transcription
#         of transformers' forward, and that transcription without the
#         architecture's feature (rope scaling, window, biases) differs;
#      2. 3 steps on LAYOUT give the 1-rank run's losses and gradient norms
#         (1e-5 relative, as tests/codegen/equiv.sh) and, exported as sharded
#         directories, its weights (stcmp 1e-5);
#      3. the exported directory re-imported and exported again is the same
#         bytes, shard by shard, index included;
#      4. importing the source and exporting it at step 0 in DTYPE gives the
#         source's tensors exactly (stcmp --tol 0);
#      5. `ptdc DIR` (the config directory as the model) has the .mdl's
#         parameter count.
#   hf.sh direct PTDC BIN WORK ARCH
#     `ptdc DIR --gpus 1 --target cpu -o OUT`: the driver compiles the config
#     directory directly; its program's first loss equals step 1 above.
#   hf.sh diag PTDC CASE      tests/hf/diag/CASE.json refused: exit status 1,
#                             stderr exactly CASE.err (PTDC_UPDATE=1 rewrites it)
#   hf.sh golden PTDC NAME    `ptdc import-hf configs/NAME` equals golden/NAME.mdl
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cmd=$1 ptdc=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
GB=4
fail() { echo "hf: $*"; exit 1; }

# rel A B: |A - B| / |A|
rel() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; if (a < 0) a = -a; printf "%.3g", d / a }'; }
le() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x <= y) }'; }

train() { # DIR LOG FLAGS...: run a program, keep its log
    d=$1 log=$2
    shift 2
    "$d/run.sh" --data "u16:$src/tokens.u16" --adam-eps 1e-4 "$@" > "$log" 2>&1 ||
        { cat "$log"; fail "$d failed"; }
}

case $cmd in
e2e)
    bin=$3 work=$4 arch=$5 dtype=$6 shards=$7 layout=$8
    w=$work/$arch src=$work/$arch/src
    rm -rf "$w" && mkdir -p "$w"
    python3 "$here/mkhf.py" make "$arch" "$src" --dtype "$dtype" --shards "$shards"
    "$ptdc" import-hf "$src" -o "$w/model.mdl"
    for l in 1rank "$layout"; do
        "$bin/cg_gen" "$w/model.mdl" "$l" "$w/$l" --set global_batch=$GB
        make -s -C "$w/$l" train
    done

    # 1. the first loss against transformers' forward, transcribed
    train "$w/1rank" "$w/1rank.log" --steps 3 --import-hf "$src" --export-hf "$w/e1" --max-shard-size 20000
    got=$(grep '^step' "$w/1rank.log" | head -n 1 | awk '{print $5}')
    want=$(python3 "$here/mkhf.py" loss "$src" $GB)
    e=$(rel "$want" "$got")
    echo "hf: $arch first loss $got, transformers' forward in double $want: $e"
    le "$e" 1e-6 || fail "$arch: the first loss differs from the reference by $e"
    case $arch in llama3) feat=rope_scaling ;; mistral) feat=window ;; qwen2) feat=bias ;; *) feat= ;; esac
    if [ -n "$feat" ]; then
        other=$(python3 "$here/mkhf.py" loss "$src" $GB --without "$feat")
        e=$(rel "$other" "$got")
        echo "hf: $arch without $feat the reference gives $other: $e"
        le 1e-4 "$e" || fail "$arch: the reference cannot tell $feat from its absence"
    fi

    # 2. the sharded layout: the same losses and weights
    train "$w/$layout" "$w/sharded.log" --steps 3 --import-hf "$src" --export-hf "$w/e2" --max-shard-size 20000
    grep '^step' "$w/1rank.log" | awk '{print $5, $11}' > "$w/a"
    grep '^step' "$w/sharded.log" | awk '{print $5, $11}' > "$w/b"
    [ "$(wc -l < "$w/a")" -eq 3 ] || fail "$arch: the 1-rank run logged no losses"
    paste "$w/a" "$w/b" | awk -v l="$layout" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        { r = rel($1, $3); q = rel($2, $4)
          printf "hf: step %d: loss %s (1 rank) %s (%s): %.2g; gradient norm %s %s: %.2g\n", NR, $1, $3, l, r, $2, $4, q
          if (!(r <= 1e-5) || !(q <= 1e-5)) bad = 1 }
        END { exit bad }' || fail "$arch: $layout differs from 1 rank"
    ls "$w/e1" | grep -q 'model-00002-of-' || fail "$arch: the export was not sharded"
    "$bin/stcmp" "$w/e1" "$w/e2" --tol 1e-5

    # 3. export -> import -> export is the identity, file by file
    train "$w/1rank" "$w/again.log" --steps 0 --import-hf "$w/e1" --export-hf "$w/e3" --max-shard-size 20000
    n=0
    for f in "$w/e1"/*; do
        cmp "$f" "$w/e3/$(basename "$f")" || fail "$arch: re-export changed $(basename "$f")"
        n=$((n + 1))
    done
    [ "$(ls "$w/e3" | wc -l)" -eq $n ] || fail "$arch: re-export wrote other files"
    echo "hf: $arch: $n files exported, imported and exported again unchanged"

    # 4. the source's tensors, exactly, in its own dtype
    train "$w/$layout" "$w/exact.log" --steps 0 --import-hf "$src" --export-hf "$w/e4" \
        --export-dtype "$dtype" --max-shard-size 20000
    "$bin/stcmp" "$w/e4" "$src" --tol 0 --subset

    # 5. the config directory compiles to the .mdl's parameter count
    a=$("$ptdc" "$src" --emit summary | grep '^  parameters:')
    b=$("$ptdc" "$w/model.mdl" --emit summary | grep '^  parameters:')
    [ "$a" = "$b" ] || fail "$arch: ptdc DIR says '$a', the .mdl '$b'"
    echo "hf: $arch: ptdc DIR and the imported .mdl agree:$a"
    ;;
direct)
    bin=$3 work=$4 arch=$5
    w=$work/$arch src=$work/$arch/src
    [ -f "$w/1rank.log" ] || fail "run hf.sh e2e for $arch first"
    rm -rf "$w/direct"
    "$ptdc" "$src" --gpus 1 --global-batch $GB --target cpu -o "$w/direct" 2> "$w/direct.err" ||
        { cat "$w/direct.err"; fail "ptdc $src failed"; }
    make -s -C "$w/direct" train
    train "$w/direct" "$w/direct.log" --steps 1 --import-hf "$src"
    a=$(grep '^step' "$w/1rank.log" | head -n 1 | awk '{print $5}')
    b=$(grep '^step' "$w/direct.log" | head -n 1 | awk '{print $5}')
    echo "hf: first loss of ptdc $arch/src: $b; of the imported .mdl: $a"
    [ "$a" = "$b" ] || fail "ptdc DIR trains another model"
    ;;
diag)
    name=$3
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cd "$here/diag"
    status=0
    "$ptdc" import-hf "$name.json" > "$tmp/out" 2> "$tmp/err" || status=$?
    [ "${PTDC_UPDATE:-}" = 1 ] && cp "$tmp/err" "$name.err"
    [ $status -eq 1 ] || { cat "$tmp/err"; fail "$name: exit status $status, expected 1"; }
    [ ! -s "$tmp/out" ] || fail "$name: printed on stdout"
    cmp -s "$name.err" "$tmp/err" || { diff "$name.err" "$tmp/err"; fail "$name: stderr differs"; }
    echo "ok $name"
    ;;
golden)
    name=$3
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cd "$here"
    "$ptdc" import-hf "configs/$name" -o "$tmp/out.mdl" 2> "$tmp/err" || { cat "$tmp/err"; fail "$name refused"; }
    [ "${PTDC_UPDATE:-}" = 1 ] && cp "$tmp/out.mdl" "golden/$name.mdl"
    cmp -s "golden/$name.mdl" "$tmp/out.mdl" || { diff "golden/$name.mdl" "$tmp/out.mdl"; fail "$name differs"; }
    echo "ok $name"
    ;;
*) fail "unknown command $cmd" ;;
esac
