#!/bin/sh
# sanitizer.sh CG_GEN MODEL WORK: in the sanitizer build, a sanitizer finding
# fails a generated program and every script that runs one.
#  1. The Makefile cg_emit writes compiles with -fsanitize=address,undefined
#     and -fno-sanitize-recover=all.
#  2. A tiny program with a planted signed overflow, built with that
#     Makefile's CC and CFLAGS, exits non-zero with UBSan's "runtime error".
#  3. The same program built without -fno-sanitize-recover exits 0 after the
#     report, and logcheck (what equiv.sh, restart.sh and tests/ref/run.sh
#     call on every log) still fails it.
#  4. A planted use after free exits non-zero (ASan) and logcheck fails its log; a
#     clean program's log passes.
set -u
. "$(dirname "$0")/logcheck.sh"
cg_gen=$1 model=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
"$cg_gen" "$model" 1rank "$work/prog" > "$work/gen.log" 2>&1 || { cat "$work/gen.log"; fail "cg_gen"; }
cc=$(sed -n 's/^CC = //p' "$work/prog/Makefile")
cflags=$(sed -n 's/^CFLAGS = //p' "$work/prog/Makefile")
# CFLAGS names the Makefile's MARCH (-march=native unless `make MARCH=`) and
# OPT (-O2): expand them.
march=$(sed -n 's/^MARCH = //p' "$work/prog/Makefile")
opt=$(sed -n 's/^OPT = //p' "$work/prog/Makefile")
cflags=$(echo "$cflags" | sed -e "s|\$(MARCH)|$march|" -e "s|\$(OPT)|$opt|")
echo "generated programs: $cc $cflags"
case " $cflags " in *" -fno-sanitize-recover=all "*) ;; *) fail "no -fno-sanitize-recover=all" ;; esac
case " $cflags " in *" -fsanitize=address,undefined "*) ;; *) fail "no -fsanitize=address,undefined" ;; esac

cat > "$work/overflow.c" <<'C'
#include <limits.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    (void)argv;
    int x = INT_MAX - 1 + argc; /* INT_MAX */
    x += argc;                  /* planted: signed overflow */
    printf("%d\n", x);
    return 0;
}
C
cat > "$work/heap.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    (void)argv;
    int *p = malloc(4 * sizeof *p);
    p[0] = argc;
    free(p);
    printf("%d\n", p[0]); /* planted: use after free */
    return 0;
}
C
cat > "$work/clean.c" <<'C'
#include <stdio.h>
int main(void) { printf("ok\n"); return 0; }
C
build() { # name, flags
    # shellcheck disable=SC2086
    $cc $2 -o "$work/$1" "$work/$1.c" > "$work/$1.build" 2>&1 || { cat "$work/$1.build"; fail "cannot build $1"; }
}
build overflow "$cflags"
if "$work/overflow" > "$work/overflow.log" 2>&1; then cat "$work/overflow.log"; fail "the planted signed overflow exited 0"; fi
grep -q "runtime error" "$work/overflow.log" || { cat "$work/overflow.log"; fail "no UBSan report"; }
echo "ok: the planted signed overflow stops the program: $(grep -m1 'runtime error' "$work/overflow.log")"

nr=$(echo " $cflags " | sed 's/ -fno-sanitize-recover=all / /')
cp "$work/overflow.c" "$work/recover.c"
build recover "$nr"
"$work/recover" > "$work/recover.log" 2>&1 || fail "without -fno-sanitize-recover the program should exit 0"
grep -q "runtime error" "$work/recover.log" || fail "no UBSan report without -fno-sanitize-recover"
if logcheck "$work/recover.log" > /dev/null; then fail "logcheck passed a log with a UBSan report"; fi
echo "ok: exit status 0 with a UBSan report, and logcheck fails it"

build heap "$cflags"
if "$work/heap" > "$work/heap.log" 2>&1; then fail "the planted use after free exited 0"; fi
if logcheck "$work/heap.log" > /dev/null; then cat "$work/heap.log"; fail "logcheck passed an ASan report"; fi
echo "ok: the planted use after free fails: $(grep -m1 'AddressSanitizer' "$work/heap.log")"

build clean "$cflags"
"$work/clean" > "$work/clean.log" 2>&1 || fail "a clean program failed"
logcheck "$work/clean.log" || fail "logcheck failed a clean log"
echo "ok: a clean program passes"
