#!/bin/sh
# rename_syms.sh IN.a OUT.a PREFIX: copy a static library with every global
# symbol it defines renamed PREFIX<name>, references included. Undefined
# symbols (libc, MPI, BLAS) keep their names. Used to link the CPU backend
# next to the CUDA backend in one test program.
set -eu
in=$1 out=$2 prefix=$3
map=$out.syms
# nm -P: "name type value size"; member headers end in ':'; U/w/v are undefined.
nm -g -P --defined-only "$in" 2>/dev/null |
    awk -v p="$prefix" 'NF >= 2 && $1 !~ /:$/ && $2 !~ /^[Uwv]$/ { print $1 " " p $1 }' |
    sort -u > "$map"
if [ ! -s "$map" ]; then
    echo "rename_syms.sh: $in defines no global symbols" >&2
    exit 1
fi
objcopy --redefine-syms="$map" "$in" "$out.tmp"
mv "$out.tmp" "$out"
