#!/bin/sh
# bench/codegen/run.sh BUILD_DIR [WORK]: ptdc's generated CPU training programs
# against the same model and optimizer in plain PyTorch (torch_gpt.py), side by
# side on this machine. docs/codegen.md quotes its output.
#
# Models (models/gpt.mdl): "small" (4 layers, d_model 384, 6 heads, d_ff 1536,
# vocabulary 8192, sequences of 256, 8 per step) and "gpt2" (the GPT-2 124M
# shape: 12 layers, d_model 768, 12 heads, vocabulary 50304, sequences of
# 1024, 2 per step). Configurations:
#   1 thread   ptdc 1 rank, OMP_NUM_THREADS=1     vs PyTorch, 1 thread
#   2 ranks    ptdc dp2, one thread a rank        vs PyTorch, 2 threads
#   2 threads  ptdc 1 rank, 2 threads             vs PyTorch, 2 threads
# Each pair runs REPS (3) times alternately (ptdc, PyTorch, ptdc, ...); a run
# trains STEPS steps (5; gpt2: GPT2_STEPS, 3) and its time is the median over
# its steps after the first; the table gives the median over runs and the
# ratio PyTorch time / ptdc time (above 1: ptdc is faster). Start-up is the
# wall time of `run.sh --steps 0` (launch, allocation, initialisation, exit)
# over ptdc's step time. MODELS="small gpt2" and CONFIGS pick subsets.
#
# OpenBLAS serves both sides. Where it does not know the CPU and falls back to
# its Prescott kernels, ptdc's runtime names better ones (OPENBLAS_CORETYPE,
# runtime/cpu/threads.c); PyTorch gets the same setting, so both multiply
# with the same GEMM kernels.
set -eu
build=$(cd "$1" && pwd)
work=${2:-/tmp/ptdc-bench-codegen}
reps=${REPS:-3}
here=$(cd "$(dirname "$0")" && pwd)
models=$here/../../models
python=${PYTHON:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work"

if ! "$python" -c 'import torch' 2>/dev/null; then
    echo "bench: PyTorch is missing; installing Debian's python3-torch" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends python3-torch \
        > "$work/apt.log" 2>&1 || ! "$python" -c 'import torch' 2>/dev/null; then
        echo "bench: PyTorch is missing (apt-get install python3-torch failed, see $work/apt.log);" \
             "measuring ptdc alone" >&2
        python=""
    fi
fi
if [ -n "$python" ] && [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    core=$("$python" -c 'import ctypes; f = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
f.restype = ctypes.c_char_p; print(f().decode())' 2>/dev/null || echo unknown)
    case $core in
    [Pp]rescott)
        if grep -q avx512bw /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
        elif grep -q avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi ;;
    esac
fi

load() { cut -d' ' -f1-3 /proc/loadavg; }
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

gen() { # model layout dir
    m=$1 l=$2 d=$3
    if [ ! -x "$d/train" ]; then
        rm -rf "$d"
        # shellcheck disable=SC2046
        "$build/tests/codegen/cg_gen" "$models/gpt.mdl" "$l" "$d" $(sets "$m") > /dev/null
        make -s -C "$d" train
    fi
}
sets() {
    case $1 in
    small) echo "--set n_layers=4 --set d_model=384 --set n_heads=6 --set d_ff=1536 --set vocab=8192 --set seq=256 --set global_batch=8" ;;
    gpt2) echo "--set n_layers=12 --set d_model=768 --set n_heads=12 --set d_ff=3072 --set vocab=50304 --set seq=1024 --set global_batch=2" ;;
    esac
}
torch_args() {
    case $1 in
    small) echo "--layers 4 --d-model 384 --heads 6 --vocab 8192 --seq 256 --batch 8" ;;
    gpt2) echo "--layers 12 --d-model 768 --heads 12 --vocab 50304 --seq 1024 --batch 2" ;;
    esac
}

# One ptdc run: median step time (ms) over steps 2.. of `--steps N`.
ptdc_run() { # dir steps threads log
    if [ "$3" = 0 ]; then
        "$1/run.sh" --steps "$2" > "$4" 2>&1 || { cat "$4"; exit 1; }
    else
        OMP_NUM_THREADS=$3 "$1/run.sh" --steps "$2" > "$4" 2>&1 || { cat "$4"; exit 1; }
    fi
    grep '^step' "$4" | awk 'NR > 1 { for (i = 1; i <= NF; i++) if ($i == "ms") print $(i - 1) }' | median
}
torch_run() { # model steps threads log
    # shellcheck disable=SC2046
    OMP_NUM_THREADS=$3 OPENBLAS_NUM_THREADS=$3 "$python" "$here/torch_gpt.py" $(torch_args "$1") \
        --steps "$2" --threads "$3" > "$4" 2>&1 || { cat "$4"; exit 1; }
    grep '^step' "$4" | awk 'NR > 1 { print $3 }' | median
}
startup() { # dir: wall seconds of run.sh --steps 0
    t0=$(date +%s.%N)
    "$1/run.sh" --steps 0 > /dev/null 2>&1
    t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
     "OpenBLAS core ${OPENBLAS_CORETYPE:-as detected}; load average at start $(load)"
printf '%-6s %-10s %12s %12s %8s %10s %10s\n' model config "ptdc ms" "PyTorch ms" ratio "startup s" "/ step"
for m in ${MODELS:-small gpt2}; do
    steps=${STEPS:-5}
    [ "$m" = gpt2 ] && steps=${GPT2_STEPS:-3}
    for c in ${CONFIGS:-1thread 2ranks 2threads}; do
        case $c in
        1thread) layout=1rank threads=1 tt=1 ;;
        2ranks) layout=dp2 threads=0 tt=2 ;;
        2threads) layout=1rank threads=2 tt=2 ;;
        esac
        d=$work/$m-$layout
        gen "$m" "$layout" "$d"
        pt="" tt_ms=""
        for r in $(seq "$reps"); do
            pt="$pt $(ptdc_run "$d" "$steps" "$threads" "$d/log.$c.$r")"
            [ -n "$python" ] && tt_ms="$tt_ms $(torch_run "$m" "$steps" "$tt" "$work/torch-$m-$c.$r.log")"
        done
        p=$(echo "$pt" | tr ' ' '\n' | grep . | median)
        t=nan ratio=nan
        if [ -n "$python" ]; then
            t=$(echo "$tt_ms" | tr ' ' '\n' | grep . | median)
            ratio=$(echo "$t $p" | awk '{ printf "%.2f", $1 / $2 }')
        fi
        s=$( (for r in $(seq "$reps"); do
            if [ "$threads" = 0 ]; then startup "$d"; else OMP_NUM_THREADS=$threads startup "$d"; fi
        done) | median)
        printf '%-6s %-10s %12.1f %12s %8s %10.2f %10.3f\n' "$m" "$c" "$p" "$t" "$ratio" "$s" \
            "$(echo "$s $p" | awk '{ print $1 / ($2 / 1000) }')"
    done
done
echo "load average at end $(load)"
