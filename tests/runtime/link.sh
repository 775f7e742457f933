#!/bin/sh
# link.sh FLAGS_FILE OUTDIR MPIEXEC: build a program outside the tree the way
# generated programs are built (rt.h plus the published build line in
# ptdrt_cpu.flags, nothing else), then run it on 2 ranks.
set -eu
flags=$1 out=$2 mpiexec=$3
mkdir -p "$out"
CC=$(sed -n 's/^CC=//p' "$flags")
CFLAGS=$(sed -n 's/^CFLAGS=//p' "$flags")
LIBS=$(sed -n 's/^LIBS=//p' "$flags")
cat > "$out/main.c" <<'PROG'
#include <stdio.h>
#include "rt.h"
int main(int argc, char **argv)
{
    rt_init(&argc, &argv);
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4];
    rt_matmul(c, a, b, 2, 2, 2, false, false, false);
    rt_allreduce(rt_comm_world(), c, 4, RT_ACT);
    int n = rt_world_size();
    int ok = c[0] == n * 1.0f && c[3] == n * 4.0f;
    if (rt_world_rank() == 0)
        printf("link: %s on %d ranks\n", ok ? "ok" : "WRONG", n);
    rt_finalize();
    return ok ? 0 : 1;
}
PROG
# shellcheck disable=SC2086
$CC $CFLAGS -o "$out/prog" "$out/main.c" $LIBS
"$mpiexec" -np 2 --oversubscribe "$out/prog"
