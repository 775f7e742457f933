#!/bin/sh
# cpu_header.sh RT_H OUT: rt.h with every name prefixed as rename_syms.sh
# prefixes the CPU backend's symbols (rt_ -> cpu_rt_, Rt -> CpuRt, RT_ ->
# CPU_RT_), compiled without PTDC_CUDA (rt_act = float), so the harness can
# declare both backends.
set -eu
sed -e 's/\brt_/cpu_rt_/g' -e 's/\bRt\([A-Z]\)/CpuRt\1/g' -e 's/\bRT_/CPU_RT_/g' \
    -e 's/PTDC_RT_H/PTDC_CPU_RT_H/g' -e 's/PTDC_CUDA/PTDC_CPU_REF_NEVER_CUDA/g' "$1" > "$2.tmp"
mv "$2.tmp" "$2"
