#!/bin/sh
# names.sh: generated calls name their sizes (issue 30).
#   names.sh BIN MODELS CG_H WORK
# Generates programs (cg_gen in BIN) for tiny-llama, tiny-gpt, tiny-mistral
# and tiny-llama3 under pinned and planner-made layouts (tensor, sequence and
# pipeline parallelism, ZeRO-2/3, ZB-H1's W slots, all-to-alls and slices) and checks every
# runtime or trainer call in model.c (rt_*, cg_*): no argument holds an
# integer literal, but for an offset of 0 and the indices of g_comm[...],
# g_coord[...] and CG_TAG(...); an argument the call table (CG_CALLS in
# codegen/cg.h) calls a size ('n' element count, 'y' byte count) is a product
# of named constants (and sizeof); and the check itself fails on a planted
# call with a bare size.
set -eu
bin=$1 models=$2 cgh=$3 work=$4
rm -rf "$work"
mkdir -p "$work"

# The call table: name -> argument kinds.
grep -E '^ *X\([A-Z_0-9]+, "[a-z_0-9]+", "[a-zA-Z]+"\)' "$cgh" |
    sed -E 's/^ *X\([A-Z_0-9]+, "([a-z_0-9]+)", "([a-zA-Z]+)"\).*/\1 \2/' > "$work/calls"
[ "$(wc -l < "$work/calls")" -ge 40 ] || { echo "names: no call table in $cgh"; exit 1; }

check() { # model.c files...
    awk -v calls="$work/calls" '
    BEGIN { while ((getline l < calls) > 0) { split(l, a, " "); sig[a[1]] = a[2] } }
    function fail(msg) { printf "%s:%d: %s\n    %s\n", FILENAME, FNR, msg, $0; bad = 1 }
    # The arguments of the call whose "(" is at s[p]: into args[], count returned.
    function split_args(s, p,    depth, n, cur, ch) {
        depth = 0; n = 0; cur = ""
        for (p = p + 1; p <= length(s); p++) {
            ch = substr(s, p, 1)
            if (ch == "(" || ch == "[" || ch == "{") depth++
            if (ch == ")" || ch == "]" || ch == "}") {
                if (depth == 0) { args[++n] = cur; return n }
                depth--
            }
            if (ch == "," && depth == 0) { args[++n] = cur; cur = ""; continue }
            cur = cur ch
        }
        return -1
    }
    function trim(x) { sub(/^[ \t]+/, "", x); sub(/[ \t]+$/, "", x); return x }
    # Integer literals of x outside g_comm[...], g_coord[...] and CG_TAG(...).
    function has_int(x) {
        gsub(/g_comm\[[0-9]+\]|g_coord\[[0-9]+\]|CG_TAG\([0-9, ]+\)/, "ID", x)
        gsub(/[0-9]+\.[0-9]*([eE][-+]?[0-9]+)?f|[0-9]+[eE][-+]?[0-9]+f/, "FLT", x)
        gsub(/[A-Za-z_][A-Za-z_0-9]*/, "ID", x)
        return x ~ /[0-9]/
    }
    {
        line = $0
        while (match(line, /(^|[^A-Za-z_0-9>.])(rt|cg)_[a-z_0-9]+\(/)) {
            start = RSTART + (substr(line, RSTART, 1) ~ /[a-z]/ ? 0 : 1)
            name = substr(line, start, RSTART + RLENGTH - 1 - start)
            rest = substr(line, RSTART + RLENGTH - 1)
            n = split_args(rest, 1)
            line = substr(line, RSTART + RLENGTH)
            if (n < 0) { fail("unbalanced call " name); break }
            ncalls++
            k = (name in sig) ? sig[name] : ""
            if (name == "rt_matmul_batch" || name == "rt_matmul_grad_batch") k = "eeee" substr(k, 4)
            for (i = 1; i <= n; i++) {
                x = trim(args[i]); kind = substr(k, i, 1)
                if (kind == "n" || kind == "y") {
                    sized++
                    y = x; gsub(/sizeof\((rt_act|float|int32_t)\)/, "S", y)
                    if (y !~ /^[A-Z][A-Z_0-9]*( \* [A-Z][A-Z_0-9]*)*$/)
                        fail("argument " i " of " name " is a size but not named: " x)
                } else if (x != "0" && has_int(x)) {
                    fail("argument " i " of " name " holds a number: " x)
                }
            }
        }
    }
    END { if (!bad && !sized) { print "names: no sized calls found"; bad = 1 }
          if (!bad) printf "names: %d calls, %d size arguments, all named\n", ncalls, sized
          exit bad }' "$@"
}

# The check fails on a bare size, a size hidden in an expression and a
# number where a size is not expected.
for planted in 'rt_matmul(c, a, b, 64, LAYER_D, LAYER_K, false, false, false);' \
               'rt_add(x, y, z, LAYER_N * 2, LAYER_N);' \
               'cg_recv(s->x, STAGE1_N, RT_ACT, 1, CG_TAG(0, 0, 0));' \
               '{ rt_act *c_[] = {a, b}; const rt_act *a_[] = {h, h}; const rt_act *b_[] = {p, q}; rt_matmul_batch(2, c_, a_, b_, LAYER_M, LAYER_N, LAYER_K, false, false, false); }'; do
    printf 'static void f(void)\n{\n    %s\n}\n' "$planted" > "$work/planted.c"
    if check "$work/planted.c" > "$work/planted.log" 2>&1; then
        cat "$work/planted.log"; echo "names: the check passed a planted bare number: $planted"; exit 1
    fi
done

gen() { # model layout [cg_gen flags]
    m=$1 l=$2
    shift 2
    "$bin/cg_gen" "$models/$m.mdl" "$l" "$work/$m-$l" "$@" > "$work/$m-$l.log" 2>&1 || {
        cat "$work/$m-$l.log"; echo "names: cg_gen $m $l failed"; exit 1; }
}
llama_sets="--plan-set d_model=4096 --plan-set n_heads=32 --plan-set n_kv_heads=8 --plan-set d_ff=11008 --plan-set vocab=32000 --plan-set seq=2048"
llama3_sets="--plan-set d_model=4096 --plan-set n_heads=32 --plan-set n_kv_heads=8 --plan-set d_ff=14336 --plan-set vocab=128256 --plan-set seq=8192"
for l in 1rank tp2-pp2-mb4 tp2-sp pp2-v2-mb4 dp2-tp2-zero3-mb2 dp2-zero2-mb2 dp2-tp2-sp-full tp2-sp-chunk \
         dp2-tp2-sp-full-chunk tp2-sp-pp2-mb4-zb; do
    gen tiny-llama $l
done
for l in search-dp2-tp2-sp search-tp2-sp-full search-tp2-pp2-mb4; do
    # shellcheck disable=SC2086
    gen tiny-llama $l $llama_sets
done
for l in tp2-pp2-mb4 dp2-tp2-zero1-mb2; do gen tiny-gpt $l; done
gen tiny-mistral tp2-pp2-mb4-full
# shellcheck disable=SC2086
gen tiny-llama3 search-tp2-sp-full $llama3_sets
check "$work"/*/model.c
