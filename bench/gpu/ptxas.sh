#!/bin/sh
# bench/gpu/ptxas.sh [ARCH...]: registers and spills of the tensor-core
# attention kernels (runtime/cuda/attention_fa2.cu) as ptxas reports them,
# one line per kernel and head dim (default: sm_80 and sm_90). No GPU needed.
# Exit status 1 if any kernel spills (docs/cuda.md promises none).
set -u
cd "$(dirname "$0")/../.."
nvcc=${PTDC_CUDA_HOME:-/usr/local/cuda}/bin/nvcc
[ -x "$nvcc" ] || { echo "SKIPPED: no nvcc at $nvcc"; exit 77; }
mpi_inc=$(mpicc --showme:compile 2>/dev/null || echo "")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
spills=0
for arch in ${@:-80 90}; do
    # shellcheck disable=SC2086
    "$nvcc" -std=c++17 -O3 -DPTDC_CUDA -gencode "arch=compute_$arch,code=sm_$arch" --expt-relaxed-constexpr \
        -Iruntime -Iruntime/cuda $mpi_inc -Xptxas -v -c runtime/cuda/attention_fa2.cu -o "$tmp/a.o" \
        >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    # ptxas prints, per kernel: "Compiling entry function 'NAME' for 'sm_XX'",
    # then the stack/spill line, then the register line.
    awk -v arch="sm_$arch" '
        /Compiling entry function/ {
            name = $0; sub(/.*function .\047/, "", name); sub(/\047 for.*/, "", name)
            k = name; sub(/^_ZN[^_]*_[0-9]*/, "", k)
            if (match(name, /(k_fwd|k_dq|k_dkv)ILi[0-9]+E(Lb[01]E)?/)) {
                s = substr(name, RSTART, RLENGTH); sub(/ILi/, "<", s)
                sub(/ELb1E$/, ", dQ>", s); sub(/ELb0E$/, ">", s); sub(/E$/, ">", s); k = s
            } else if (name ~ /k_dq_cast/) k = "k_dq_cast"
        }
        /spill stores/ { st = $5; ld = $9 }
        /Used [0-9]+ registers/ {
            for (i = 1; i <= NF; i++) if ($i == "Used") r = $(i + 1)
            printf "%-6s %-14s %4s registers, spills %s B stored / %s B loaded\n", arch, k, r, st, ld
        }' "$tmp/log" | sort -t'<' -k1,1 -k2n
    if grep "spill stores" "$tmp/log" | grep -qv " 0 bytes spill stores, 0 bytes spill loads"; then spills=1; fi
done
[ $spills -eq 0 ] || { echo "FAILED: a kernel spills registers"; exit 1; }
