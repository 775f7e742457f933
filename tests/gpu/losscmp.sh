#!/bin/sh
# losscmp.sh REF.log RUN.log RTOL: the per-step losses that two runs of a
# generated program print ("step N/M | loss X | ...") agree within relative
# tolerance RTOL at every step, both runs have the same steps, and RUN's loss
# falls (last below first). Prints one line per step; exit 1 on any failure.
set -u
awk -v rtol="$3" '
    function loss(line,   f) { split(line, f, "|"); sub(/^ *loss */, "", f[2]); return f[2] + 0 }
    FNR == 1 { file++ }
    /^step +[0-9]+\/[0-9]+ \| loss / { n = $2; sub(/\/.*/, "", n); n += 0; v[file, n] = loss($0); last[file] = n; if (!(file in first)) first[file] = n }
    END {
        bad = 0
        if (last[1] == "" || last[1] != last[2] || first[1] != first[2]) { print "losscmp: the runs have different steps (" last[1] " vs " last[2] ")"; exit 1 }
        for (i = first[1]; i <= last[1]; i++) {
            a = v[1, i]; b = v[2, i]; d = (a > b ? a - b : b - a) / (a > 0 ? a : 1)
            ok = d <= rtol
            printf "step %3d  ref %.6f  run %.6f  rel %.2e %s\n", i, a, b, d, ok ? "" : "FAIL"
            if (!ok) bad = 1
        }
        if (!(v[2, last[2]] < v[2, first[2]])) { print "losscmp: the loss does not fall"; bad = 1 }
        exit bad
    }' "$1" "$2"
