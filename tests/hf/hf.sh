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
#      3. the export's config.json is the model: `ptdc import-hf` of it gives
#         the source's IR, it is hf_config.json beside the program, its keys
#         are transformers' (hfcheck.py keys), and mkhf.py's transcription of
#         transformers' forward reading it and the exported weights gives the
#         program's loss on them; generation_config.json is the source's, byte
#         for byte, when it has one (llama3, gpt2) and absent otherwise;
#      4. the exported directory re-imported and exported again over an
#         earlier export (a stale generation_config.json in it) is the same
#         bytes, shard by shard, index and config included;
#      5. importing the source and exporting it at step 0 in DTYPE gives the
#         source's tensors exactly (stcmp --tol 0), and torch_dtype says DTYPE;
#      6. `ptdc DIR` (the config directory as the model) has the .mdl's
#         parameter count.
#   hf.sh gptoss PTDC BIN WORK
#     synthetic/gpt-oss-tiny imported; its export's gate_up_proj is the
#     stacked gate and up interleaved (hfcheck.py interleaved), re-imported on
#     1 rank and tp2 and exported unchanged (stcmp --tol 0), config keys.
#   hf.sh direct PTDC BIN WORK ARCH
#     `ptdc DIR --gpus 1 --target cpu -o OUT`: the driver compiles the config
#     directory directly; its program's first loss equals step 1 above.
#   hf.sh roundtrip PTDC WORK NAME
#     configs/NAME (a published config.json) at mkhf.py's tiny sizes, every
#     other key kept, with bf16 shards and a generation_config.json: `ptdc
#     DIR` compiles it, its program imports and exports it; the export's
#     config.json has transformers' keys and types and imports as the same
#     model (IR and parameter count), generation_config.json is copied.
#   hf.sh prefix PTDC WORK    (after e2e gpt2 and qwen2) checkpoints whose
#     tensors carry the class's base_model_prefix (GPT-2 as save_pretrained
#     writes it: transformer.h.0...) or lack it (a LlamaModel's layers.0...)
#     train as the plain ones do: the same losses, the same exported bytes;
#     a tensor under both names, or under neither, is refused naming both.
#   hf.sh transformers WORK   (after e2e) each export loads with
#     AutoModelForCausalLM.from_pretrained and gives mkhf.py's loss; without
#     transformers and torch, "SKIPPED: ..." and status 77.
#   hf.sh native PTDC WORK MODEL:ARCH   models/MODEL.mdl compiled with -o gets
#     a hf_config.json of ARCH, with transformers' keys, importing as a model
#     of its parameter count (total and active).
#   hf.sh native PTDC WORK none   PaLM's parallel block and the DeepSeek-V3-style
#     model get no config, and a note saying why.
#   hf.sh refused PTDC BIN WORK
#     a model ptdc cannot state as a Hugging Face architecture (tiny-parallel;
#     LLaMA with its SwiGLU written as silu * up) is compiled with a note
#     saying why and no hf_config.json; its program refuses --export-hf DIR
#     before training (status 2, the reason, no DIR) and writes
#     --export-hf FILE.safetensors; a program directory reused for it keeps
#     no hf_config.json of the model it held before.
#   hf.sh moe PTDC BIN WORK MODEL
#     models/MODEL.mdl (tiny-mixtral, tiny-qwen2-moe, tiny-qwen3-moe), its
#     experts stacked [n_experts, ...] and named "...experts.{expert}...":
#      1. a 1-rank program's seeded weights exported as a model directory hold
#         one tensor per expert in Hugging Face's shape, value for value the
#         transposed slices of the stacked parameters (the same model with the
#         experts' hf names removed exports them stacked, hfcheck.py experts);
#         its config.json has transformers' keys and imports as the model;
#      2. the directory imported and exported again by the 1-rank program and
#         by a tp2 program (each rank reading its slice of every expert) gives
#         the same tensors exactly, and a re-export the same bytes;
#      3. 3 steps on 1 rank and on tp2 give the same losses (1e-5), and
#         transformers, when importable, gives the exported model's cross
#         entropy (a program without the load-balancing term; else SKIPPED).
#   hf.sh mixed PTDC WORK
#     mixed/qwen3-moe-{mixed,step2,irregular} (dense and MoE layers): `ptdc
#     DIR -o` writes a config.json whose mlp_only_layers are the config's
#     dense layers, which imports as the same model (IR and counts).
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
# The programs compile at -O0 and from the build tree's program cache, as
# the equivalence matrix's do (tests/codegen/equiv.sh, progcache.sh): under
# ASan a third of -O2's CPU time (2.0 against 4.9 CPU s for tiny-mixtral's
# tp2 program), the same bits (ISO C: no contraction or reassociation at
# any level), every access checked. The fault, trace and FP8-driver tests
# still build at the Makefile's -O2 (docs/design.md, "The suite's time").
. "$here/../codegen/progcache.sh"
opt=${HF_OPT:--O0}
fail() { echo "hf: $*"; exit 1; }
torch_dtype() { case $1 in bf16) echo bfloat16 ;; f16) echo float16 ;; *) echo float32 ;; esac; }

# same_model A B: `ptdc import-hf` of config directories A and B gives the same IR
same_model() {
    "$ptdc" import-hf "$1" -o "$1.mdl" 2> "$1.err" || { cat "$1.err"; fail "import-hf $1 failed"; }
    "$ptdc" import-hf "$2" -o "$2.mdl" 2> "$2.err" || { cat "$2.err"; fail "import-hf $2 failed"; }
    "$ptdc" "$1.mdl" --emit ir > "$1.ir" && "$ptdc" "$2.mdl" --emit ir > "$2.ir" ||
        fail "the imported models do not compile"
    cmp -s "$1.ir" "$2.ir" || { diff "$1.ir" "$2.ir" | head -20; fail "$2 is not the model $1 is"; }
    a=$("$ptdc" "$1.mdl" --emit summary | grep '^  parameters:')
    echo "hf: import-hf $2 gives the model of $1 (the same IR;$a)"
}

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
    gen=
    case $arch in llama3 | gpt2) gen=--generation-config ;; esac
    python3 "$here/mkhf.py" make "$arch" "$src" --dtype "$dtype" --shards "$shards" $gen
    "$ptdc" import-hf "$src" -o "$w/model.mdl"
    for l in 1rank "$layout"; do
        "$bin/cg_gen" "$w/model.mdl" "$l" "$w/$l" --set global_batch=$GB
        build_program "$w/$l" OPT="$opt"
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

    # 3. the export's config.json is the model
    same_model "$src" "$w/e1"
    cmp "$w/1rank/hf_config.json" "$w/e1/config.json" ||
        fail "$arch: config.json is not the hf_config.json codegen wrote"
    python3 "$here/hfcheck.py" keys "$w/e1/config.json" --dtype float32 || fail "$arch: config.json keys"
    train "$w/1rank" "$w/e1.log" --steps 1 --import-hf "$w/e1"
    got=$(grep '^step' "$w/e1.log" | head -n 1 | awk '{print $5}')
    want=$(python3 "$here/mkhf.py" loss "$w/e1" $GB --tokens "$src/tokens.u16")
    e=$(rel "$want" "$got")
    echo "hf: $arch: the export's loss $got, transformers' forward of its config.json in double $want: $e"
    le "$e" 1e-6 || fail "$arch: the exported config.json describes another model"
    if [ -n "$gen" ]; then
        cmp "$src/generation_config.json" "$w/e1/generation_config.json" ||
            fail "$arch: generation_config.json was not copied byte for byte"
    else
        [ ! -e "$w/e1/generation_config.json" ] || fail "$arch: a generation_config.json from nowhere"
    fi

    # 4. export -> import -> export is the identity, file by file, over an
    # earlier export's files
    mkdir -p "$w/e3"
    echo '{"stale": true}' > "$w/e3/generation_config.json"
    echo '{"stale": true}' > "$w/e3/config.json"
    train "$w/1rank" "$w/again.log" --steps 0 --import-hf "$w/e1" --export-hf "$w/e3" --max-shard-size 20000
    n=0
    for f in "$w/e1"/*; do
        cmp "$f" "$w/e3/$(basename "$f")" || fail "$arch: re-export changed $(basename "$f")"
        n=$((n + 1))
    done
    [ "$(ls "$w/e3" | wc -l)" -eq $n ] || fail "$arch: re-export wrote other files"
    echo "hf: $arch: $n files exported, imported and exported again unchanged"

    # 5. the source's tensors, exactly, in its own dtype
    train "$w/$layout" "$w/exact.log" --steps 0 --import-hf "$src" --export-hf "$w/e4" \
        --export-dtype "$dtype" --max-shard-size 20000
    "$bin/stcmp" "$w/e4" "$src" --tol 0 --subset
    python3 "$here/hfcheck.py" keys "$w/e4/config.json" --dtype "$(torch_dtype "$dtype")" ||
        fail "$arch: config.json of a $dtype export"

    # 6. the config directory compiles to the .mdl's parameter count
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
    build_program "$w/direct" OPT="$opt"
    train "$w/direct" "$w/direct.log" --steps 1 --import-hf "$src"
    a=$(grep '^step' "$w/1rank.log" | head -n 1 | awk '{print $5}')
    b=$(grep '^step' "$w/direct.log" | head -n 1 | awk '{print $5}')
    echo "hf: first loss of ptdc $arch/src: $b; of the imported .mdl: $a"
    [ "$a" = "$b" ] || fail "ptdc DIR trains another model"
    ;;
roundtrip)
    work=$3 name=$4
    w=$work/rt-$name src=$work/rt-$name/src
    rm -rf "$w" && mkdir -p "$w"
    python3 "$here/mkhf.py" shrink "$here/configs/$name/config.json" "$src" --dtype bf16 --shards 2 \
        --generation-config
    "$ptdc" "$src" --gpus 1 --global-batch $GB --target cpu -o "$w/prog" > "$w/ptdc.log" 2>&1 ||
        { cat "$w/ptdc.log"; fail "ptdc $src failed"; }
    build_program "$w/prog" OPT="$opt"
    train "$w/prog" "$w/train.log" --steps 1 --import-hf "$src" --export-hf "$w/exp"
    python3 "$here/hfcheck.py" keys "$w/exp/config.json" --dtype float32 || fail "$name: config.json keys"
    same_model "$src" "$w/exp"
    cmp "$w/prog/hf_config.json" "$w/exp/config.json" || fail "$name: config.json is not hf_config.json"
    cmp "$src/generation_config.json" "$w/exp/generation_config.json" ||
        fail "$name: generation_config.json was not copied byte for byte"
    # What a published config carries beyond its class (n_ctx, token ids,
    # versions) is not in the export, and the key check sees such keys.
    if python3 "$here/hfcheck.py" keys "$src/config.json" > "$w/keys.log"; then
        case $name in gpt2 | llama-2-7b) fail "$name: the key check passed a published config" ;; esac
    fi
    echo "hf: $name: exported, and its config.json imports as the model it came from"
    ;;
prefix)
    work=$3
    w=$work/prefix
    rm -rf "$w" && mkdir -p "$w"
    for arch in gpt2 qwen2; do
        [ -f "$work/$arch/1rank.log" ] || fail "run hf.sh e2e for $arch first"
        case $arch in gpt2) how=add dtype=bf16 shards=2 gen=--generation-config ;;
                      qwen2) how=strip dtype=f32 shards=1 gen= ;; esac
        python3 "$here/mkhf.py" make $arch "$w/$arch" --dtype $dtype --shards $shards $gen --prefix $how
        src=$work/$arch/src
        train "$work/$arch/1rank" "$w/$arch.log" --steps 3 --import-hf "$w/$arch" --export-hf "$w/$arch-e1" \
            --max-shard-size 20000
        grep '^step' "$work/$arch/1rank.log" | awk '{print $5, $11}' > "$w/a"
        grep '^step' "$w/$arch.log" | awk '{print $5, $11}' > "$w/b"
        cmp -s "$w/a" "$w/b" || { paste "$w/a" "$w/b"; fail "$arch: the prefixed checkpoint trains differently"; }
        n=0
        for f in "$work/$arch/e1"/*; do
            cmp "$f" "$w/$arch-e1/$(basename "$f")" || fail "$arch: the export from the prefixed checkpoint differs"
            n=$((n + 1))
        done
        [ "$(ls "$w/$arch-e1" | wc -l)" -eq $n ] || fail "$arch: the export from the prefixed checkpoint has other files"
        echo "hf: $arch: the checkpoint with base_model_prefix ($how) gives the same 3 losses and export"
    done
    # Never a guess: a tensor under both names, or under neither.
    python3 "$here/mkhf.py" make gpt2 "$w/both" --dtype bf16 --also wte.weight=transformer.wte.weight
    python3 "$here/mkhf.py" make gpt2 "$w/none" --dtype bf16 --prefix add --drop transformer.h.1.ln_2.bias
    for case in both none; do
        if "$work/gpt2/1rank/run.sh" --steps 0 --import-hf "$w/$case" > "$w/$case.log" 2>&1; then
            fail "a checkpoint with a tensor under $case of its names was accepted"
        fi
    done
    grep -q "both.*'wte.weight' and 'transformer.wte.weight' are both there" "$w/both.log" ||
        { cat "$w/both.log"; fail "no sentence naming both names and the file"; }
    grep -q "none.*no tensor 'h.1.ln_2.bias' (nor 'transformer.h.1.ln_2.bias')" "$w/none.log" ||
        { cat "$w/none.log"; fail "no sentence naming both names and the file"; }
    echo "hf: a tensor under both names, or neither, is refused naming both and the file"
    ;;
native)
    # One model a call (MODEL:ARCH), or `none`: the models with no config.
    work=$3 pair=$4
    w=$work/native
    mkdir -p "$w"
    if [ "$pair" != none ]; then
        m=${pair%%:*} arch=${pair#*:}
        rm -rf "$w/$m"
        "$ptdc" "$here/../../models/$m.mdl" --gpus 1024 --target cuda -o "$w/$m" > "$w/$m.log" 2>&1 ||
            { cat "$w/$m.log"; fail "$m does not compile"; }
        ! grep -q "Hugging Face" "$w/$m.log" || { cat "$w/$m.log"; fail "$m: a note about its config"; }
        c=$w/$m/hf_config.json
        [ "$(grep -A1 '"architectures"' "$c" | tail -n 1 | tr -d ' "')" = $arch ] || fail "$m: not $arch"
        python3 "$here/hfcheck.py" keys "$c" --dtype float32 > "$w/$m.keys" || { cat "$w/$m.keys"; fail "$m: keys"; }
        "$ptdc" import-hf "$c" -o "$w/$m.mdl" 2> "$w/$m.err" || { cat "$w/$m.err"; fail "$m: its config does not import"; }
        a=$("$ptdc" "$here/../../models/$m.mdl" --emit summary | grep '^  \(active \)*parameters:')
        b=$("$ptdc" "$w/$m.mdl" --emit summary | grep '^  \(active \)*parameters:')
        [ "$a" = "$b" ] || fail "$m has '$a', its config.json imports as '$b'"
        echo "hf: $m: $arch,$a"
        exit 0
    fi
    rm -rf "$w/palm" "$w/ds"
    "$ptdc" "$here/../../models/palm-8b.mdl" --gpus 64 --target cuda -o "$w/palm" > "$w/palm.log" 2>&1 ||
        { cat "$w/palm.log"; fail "palm-8b does not compile"; }
    grep -q "note: parallel has no Hugging Face config: no parameter has a Hugging Face name" "$w/palm.log" ||
        { cat "$w/palm.log"; fail "palm-8b: no note saying why it has no config"; }
    [ ! -e "$w/palm/hf_config.json" ] || fail "palm-8b has a hf_config.json"
    echo "hf: palm-8b: no config, and a note says why"
    # DeepSeek-V3's (multi-head latent attention: import-hf refuses its config).
    "$ptdc" "$here/../../models/tiny-deepseek.mdl" --gpus 2 --target cuda -o "$w/ds" > "$w/ds.log" 2>&1 ||
        { cat "$w/ds.log"; fail "tiny-deepseek does not compile"; }
    grep -q "note: deepseek_v3 has no Hugging Face config" "$w/ds.log" ||
        { cat "$w/ds.log"; fail "tiny-deepseek: no note saying why it has no config"; }
    [ ! -e "$w/ds/hf_config.json" ] || fail "tiny-deepseek has a hf_config.json"
    echo "hf: tiny-deepseek: no config, and a note says why"
    ;;
refused)
    bin=$3 work=$4
    w=$work/refused
    rm -rf "$w" && mkdir -p "$w"
    sed 's/g = swiglu(matmul(h, w_gate), matmul(h, w_up))/g = silu(matmul(h, w_gate)) * matmul(h, w_up)/' \
        "$here/../../models/llama.mdl" > "$w/llama-mul.mdl"
    grep -q 'silu(matmul(h, w_gate)) \* matmul' "$w/llama-mul.mdl" || fail "the SwiGLU was not rewritten"
    sed 's|import "llama.mdl"|import "llama-mul.mdl"|' "$here/../../models/tiny-llama.mdl" > "$w/tiny-mul.mdl"
    for m in "$here/../../models/tiny-parallel.mdl" "$w/tiny-mul.mdl"; do
        n=$(basename "$m" .mdl)
        "$bin/cg_gen" "$m" 1rank "$w/$n" --set global_batch=$GB > "$w/$n.log" 2>&1 ||
            { cat "$w/$n.log"; fail "$n does not compile"; }
        [ ! -e "$w/$n/hf_config.json" ] || fail "$n has a hf_config.json"
        build_program "$w/$n" OPT="$opt"
        status=0
        "$w/$n/run.sh" --steps 1 --export-hf "$w/$n-export" > "$w/$n.run" 2>&1 || status=$?
        [ $status -eq 2 ] || { cat "$w/$n.run"; fail "$n: --export-hf DIR: status $status, expected 2"; }
        ! grep -q '^step' "$w/$n.run" || fail "$n: trained before refusing the export"
        [ ! -e "$w/$n-export" ] || fail "$n: a refused export left $w/$n-export"
        "$w/$n/run.sh" --steps 1 --export-hf "$w/$n.safetensors" > "$w/$n.run2" 2>&1 ||
            { cat "$w/$n.run2"; fail "$n: --export-hf FILE.safetensors failed"; }
    done
    grep -q "note: parallel has no Hugging Face config: no parameter has a Hugging Face name" \
        "$w/tiny-parallel.log" || { cat "$w/tiny-parallel.log"; fail "tiny-parallel: no note"; }
    # A program directory reused for a model without a config keeps no stale one.
    "$bin/cg_gen" "$here/../../models/tiny-llama.mdl" 1rank "$w/reused" > /dev/null 2>&1 &&
        [ -e "$w/reused/hf_config.json" ] || fail "tiny-llama: no hf_config.json"
    "$bin/cg_gen" "$here/../../models/tiny-parallel.mdl" 1rank "$w/reused" > /dev/null 2>&1 ||
        fail "tiny-parallel does not compile over tiny-llama"
    [ ! -e "$w/reused/hf_config.json" ] || fail "tiny-llama's hf_config.json was left beside tiny-parallel"
    grep -q "train: --export-hf $w/tiny-parallel-export: parallel has no Hugging Face config" \
        "$w/tiny-parallel.run" || { cat "$w/tiny-parallel.run"; fail "tiny-parallel: no reason"; }
    grep -q "note: llama has no Hugging Face config: its graph is not LlamaForCausalLM's" \
        "$w/tiny-mul.log" || { cat "$w/tiny-mul.log"; fail "tiny-mul: no note"; }
    grep -q "its graph is not LlamaForCausalLM's" "$w/tiny-mul.run" || { cat "$w/tiny-mul.run"; fail "tiny-mul: no reason"; }
    sed -n 's/^ptdc: note: //p' "$w/tiny-parallel.log" "$w/tiny-mul.log"
    echo "hf: models ptdc cannot state as Hugging Face configs: a note, and --export-hf DIR refused"
    ;;
transformers)
    work=$2
    python3 -c 'import torch, transformers' > /dev/null 2>&1 || {
        echo "SKIPPED: transformers and torch are not importable here (no pip: Debian has no" \
             "python3-transformers); the exports were checked by ptdc import-hf, hfcheck.py keys" \
             "and mkhf.py's transcription of transformers' forward instead"
        exit 77
    }
    for arch in llama3 mistral qwen2 gpt2; do
        d=$work/$arch
        [ -d "$d/e1" ] || fail "run hf.sh e2e for $arch first"
        want=$(python3 "$here/mkhf.py" loss "$d/e1" $GB --tokens "$d/src/tokens.u16")
        python3 "$here/hfcheck.py" transformers "$d/e1" "$d/src/tokens.u16" $GB "$want" ||
            fail "$arch: transformers does not load the export as the model"
    done
    ;;
moe)
    bin=$3 work=$4 m=$5
    w=$work/moe-$m src=$w
    rm -rf "$w" && mkdir -p "$w"
    python3 -c "
import random, struct
random.seed(5)
open('$w/tokens.u16', 'wb').write(struct.pack('<8192H', *[random.randrange(256) for _ in range(8192)]))"
    models=$here/../../models
    fam=$(sed -n 's/^import "\(.*\)"/\1/p' "$models/$m.mdl")
    # The same model with the experts' hf names removed: exported stacked, by IR name.
    sed '/experts\.{expert}/d' "$models/$fam" > "$w/stacked-$fam"
    sed "s|import \"$fam\"|import \"stacked-$fam\"|" "$models/$m.mdl" > "$w/stacked.mdl"
    grep -q 'experts.{expert}' "$w/stacked-$fam" && fail "$m: the experts' hf names were not removed"
    for p in "$models/$m.mdl:1rank" "$models/$m.mdl:tp2" "$w/stacked.mdl:1rank"; do
        mdl=${p%%:*} l=${p#*:} d=$w/$(basename "${p%%:*}" .mdl)-${p#*:}
        "$bin/cg_gen" "$mdl" "$l" "$d" --set global_batch=$GB > "$d.log" 2>&1 ||
            { cat "$d.log"; fail "$m: cg_gen $l failed"; }
        build_program "$d" OPT="$opt" > "$d.make" 2>&1 || { cat "$d.make"; fail "$m: the $l program does not build"; }
    done
    one=$w/$m-1rank tp=$w/$m-tp2

    # 1. per-expert tensors, the transposed slices of the stacked parameters
    train "$one" "$w/e0.log" --steps 0 --export-hf "$w/e0"
    train "$w/stacked-1rank" "$w/s0.log" --steps 0 --export-hf "$w/s0.safetensors"
    python3 "$here/hfcheck.py" experts "$w/e0/model.safetensors" "$w/s0.safetensors" layers ||
        fail "$m: the exported experts are not the stacked parameters' slices"
    python3 "$here/hfcheck.py" keys "$w/e0/config.json" --dtype float32 || fail "$m: config.json keys"
    "$ptdc" import-hf "$w/e0" -o "$w/e0.mdl" 2> "$w/e0.err" || { cat "$w/e0.err"; fail "$m: its config does not import"; }
    a=$("$ptdc" "$models/$m.mdl" --emit summary | grep '^  \(active \)*parameters:')
    b=$("$ptdc" "$w/e0.mdl" --emit summary | grep '^  \(active \)*parameters:')
    [ "$a" = "$b" ] || fail "$m has '$a', its config.json imports as '$b'"

    # 2. import and export again, on 1 rank and split over tp2
    train "$one" "$w/e1.log" --steps 0 --import-hf "$w/e0" --export-hf "$w/e1" --max-shard-size 20000
    train "$tp" "$w/e2.log" --steps 0 --import-hf "$w/e1" --export-hf "$w/e2" --max-shard-size 20000
    train "$one" "$w/e3.log" --steps 0 --import-hf "$w/e2" --export-hf "$w/e3" --max-shard-size 20000
    "$bin/stcmp" "$w/e0" "$w/e2" --tol 0 || fail "$m: tp2's import and export changed the weights"
    n=0
    for f in "$w/e1"/*; do
        cmp "$f" "$w/e3/$(basename "$f")" || fail "$m: re-export changed $(basename "$f")"
        n=$((n + 1))
    done
    [ "$(ls "$w/e3" | wc -l)" -eq $n ] || fail "$m: re-export wrote other files"
    echo "hf: $m: experts exported one tensor each, imported on 1 rank and tp2, exported unchanged ($n files)"

    # 3. training, and transformers
    train "$one" "$w/t1.log" --steps 3 --import-hf "$w/e0"
    train "$tp" "$w/t2.log" --steps 3 --import-hf "$w/e0"
    grep '^step' "$w/t1.log" | awk '{print $5}' > "$w/a"
    grep '^step' "$w/t2.log" | awk '{print $5}' > "$w/b"
    [ "$(wc -l < "$w/a")" -eq 3 ] || fail "$m: the 1-rank run logged no losses"
    paste "$w/a" "$w/b" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (!(d <= 1e-5 * ($1 < 0 ? -$1 : $1))) bad = 1 }
        END { exit bad }' || { paste "$w/a" "$w/b"; fail "$m: tp2 trains differently from 1 rank"; }
    # transformers' loss is the cross entropy; the programs print the
    # objective, which adds the load-balancing term (docs/moe.md): compare a
    # program of the model without it (aux_coeff = 0, the same weights).
    "$bin/cg_gen" "$models/$m.mdl" 1rank "$w/noaux" --set global_batch=$GB --set aux_coeff=0 \
        > "$w/noaux.log" 2>&1 || { cat "$w/noaux.log"; fail "$m: cg_gen without aux failed"; }
    build_program "$w/noaux" OPT="$opt" > "$w/noaux.make" 2>&1 || { cat "$w/noaux.make"; fail "$m: no-aux build"; }
    train "$w/noaux" "$w/t3.log" --steps 1 --import-hf "$w/e0"
    got=$(grep '^step' "$w/t3.log" | awk 'NR == 1 {print $5}')
    python3 "$here/hfcheck.py" transformers "$w/e0" "$w/tokens.u16" $GB "$got"
    ;;
gptoss)
    # GptOssForCausalLM (synthetic/gpt-oss-tiny, a made-up tiny config):
    # imported; its program exports the experts as transformers stores them
    # (gate_up_proj with gate and up interleaved column by column), which
    # hfcheck.py checks against the same program without the experts' hf
    # names (stacked, exported by IR name) apart from the runtime's mapping;
    # the export imported again (1 rank, and tp2 with the experts split) and
    # exported gives the same tensors exactly; its config.json has
    # transformers' keys and imports as the same model.
    bin=$3 work=$4
    w=$work/gptoss src=$w
    rm -rf "$w" && mkdir -p "$w"
    python3 -c "
import random, struct
random.seed(5)
open('$w/tokens.u16', 'wb').write(struct.pack('<8192H', *[random.randrange(256) for _ in range(8192)]))"
    cp -r "$here/synthetic/gpt-oss-tiny" "$w/cfg"
    "$ptdc" import-hf "$w/cfg" -o "$w/model.mdl" 2> "$w/import.err" ||
        { cat "$w/import.err"; fail "gpt-oss-tiny does not import"; }
    # The experts' hf clauses removed (their own lines, and e_down_b's tail).
    sed -e '/^ *hf "model\.layers\.{layer}\.mlp\.experts\./d' \
        -e 's| hf "model\.layers\.{layer}\.mlp\.experts\.[^"]*"||' "$w/model.mdl" > "$w/stacked.mdl"
    grep -q 'mlp\.experts' "$w/stacked.mdl" && fail "gpt-oss: the experts' hf names were not removed"
    for p in model:1rank model:tp2 stacked:1rank; do
        m=${p%%:*} l=${p#*:} d=$w/${p%%:*}-${p#*:}
        "$bin/cg_gen" "$w/$m.mdl" "$l" "$d" --set global_batch=$GB > "$d.log" 2>&1 ||
            { cat "$d.log"; fail "gpt-oss: cg_gen $m $l failed"; }
        build_program "$d" OPT="$opt" > "$d.make" 2>&1 || { cat "$d.make"; fail "gpt-oss: $m $l does not build"; }
    done
    one=$w/model-1rank tp=$w/model-tp2
    train "$one" "$w/e0.log" --steps 0 --export-hf "$w/e0"
    train "$w/stacked-1rank" "$w/s0.log" --steps 0 --export-hf "$w/s0.safetensors"
    python3 "$here/hfcheck.py" interleaved "$w/e0/model.safetensors" "$w/s0.safetensors" layers ||
        fail "gpt-oss: the exported gate_up_proj is not the stacked gate and up interleaved"
    python3 "$here/hfcheck.py" keys "$w/e0/config.json" --dtype float32 || fail "gpt-oss: config.json keys"
    same_model "$w/cfg" "$w/e0"
    train "$one" "$w/e1.log" --steps 0 --import-hf "$w/e0" --export-hf "$w/e1"
    train "$tp" "$w/e2.log" --steps 0 --import-hf "$w/e0" --export-hf "$w/e2" --max-shard-size 20000
    "$bin/stcmp" "$w/e0" "$w/e1" --tol 0 || fail "gpt-oss: 1 rank's import and export changed the weights"
    "$bin/stcmp" "$w/e0" "$w/e2" --tol 0 || fail "gpt-oss: tp2's import and export changed the weights"
    train "$one" "$w/t1.log" --steps 2 --import-hf "$w/e0"
    train "$tp" "$w/t2.log" --steps 2 --import-hf "$w/e0"
    grep '^step' "$w/t1.log" | awk '{print $5}' > "$w/a"
    grep '^step' "$w/t2.log" | awk '{print $5}' > "$w/b"
    [ "$(wc -l < "$w/a")" -eq 2 ] || fail "gpt-oss: the 1-rank run logged no losses"
    paste "$w/a" "$w/b" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (!(d <= 1e-5 * ($1 < 0 ? -$1 : $1))) bad = 1 }
        END { exit bad }' || { paste "$w/a" "$w/b"; fail "gpt-oss: tp2 trains differently from 1 rank"; }
    echo "hf: gpt-oss: gate_up_proj interleaved on export, imported on 1 rank and tp2 and exported unchanged"
    ;;
mixed)
    work=$3
    w=$work/mixed
    rm -rf "$w" && mkdir -p "$w"
    for row in "qwen3-moe-mixed:[0, 1]" "qwen3-moe-step2:[0, 2, 4]" "qwen3-moe-irregular:[0, 2, 3, 4]"; do
        n=${row%%:*} want=${row#*:}
        "$ptdc" "$here/mixed/$n" --gpus 2 --target cpu -o "$w/$n" > "$w/$n.log" 2>&1 ||
            { cat "$w/$n.log"; fail "$n does not compile"; }
        ! grep -q "Hugging Face" "$w/$n.log" || { cat "$w/$n.log"; fail "$n: a note about its config"; }
        got=$(sed -n 's/^  "mlp_only_layers": \(.*\),$/\1/p' "$w/$n/hf_config.json")
        [ "$got" = "$want" ] || fail "$n: mlp_only_layers $got, expected $want"
        mkdir -p "$w/$n-src" "$w/$n-exp"
        cp "$here/mixed/$n/config.json" "$w/$n-src/"
        cp "$w/$n/hf_config.json" "$w/$n-exp/config.json"
        python3 "$here/hfcheck.py" keys "$w/$n-exp/config.json" --dtype float32 > "$w/$n.keys" ||
            { cat "$w/$n.keys"; fail "$n: keys"; }
        "$ptdc" import-hf "$w/$n-src" -o "$w/$n-src.mdl" 2> /dev/null &&
            "$ptdc" import-hf "$w/$n-exp" -o "$w/$n-exp.mdl" 2> /dev/null || fail "$n: import-hf failed"
        a=$("$ptdc" "$w/$n-src.mdl" --emit summary | grep '^  \(active \)*parameters:')
        b=$("$ptdc" "$w/$n-exp.mdl" --emit summary | grep '^  \(active \)*parameters:')
        [ "$a" = "$b" ] || fail "$n has '$a', its export's config.json imports as '$b'"
        echo "hf: $n: dense layers $got in its config.json, which imports as the model"
    done
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
    dir=configs/$name
    [ -d "$dir" ] || dir=mixed/$name # made-up configs, kept out of configs/ (published ones)
    [ -d "$dir" ] || dir=synthetic/$name
    "$ptdc" import-hf "$dir" -o "$tmp/out.mdl" 2> "$tmp/err" || { cat "$tmp/err"; fail "$name refused"; }
    [ "${PTDC_UPDATE:-}" = 1 ] && cp "$tmp/out.mdl" "golden/$name.mdl"
    cmp -s "golden/$name.mdl" "$tmp/out.mdl" || { diff "golden/$name.mdl" "$tmp/out.mdl"; fail "$name differs"; }
    echo "ok $name"
    ;;
*) fail "unknown command $cmd" ;;
esac
