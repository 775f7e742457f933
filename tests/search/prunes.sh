#!/bin/sh
# A pruning rule of the search must not lose the plan: `ptdc ARGS` plans the
# same with the rule as with it turned off (TOGGLE=1 in the environment),
# and counts fewer METRIC (meshes: meshes solved; solves: ILP solves, from
# plan.txt's search line). CHECK 1: the run with the rule is made under
# PTDC_SEARCH_CHECK, its shortcuts checked too. The callers (fitcut.sh,
# freecut.sh, layoutfloor.sh, jump.sh) say which rule, and why that model.
#   prunes.sh PTDC ROOT NAME TOGGLE METRIC CHECK ARGS...
set -u
ptdc=$1 name=$3 toggle=$4 metric=$5 check=$6
cd "$2" || exit 1
shift 6
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
chk=""
[ "$check" = 1 ] && chk=PTDC_SEARCH_CHECK=1
env $chk "$ptdc" "$@" -o "$out/a" 2>"$out/a.err" || { echo "FAIL $name: ptdc failed"; tail -n 5 "$out/a.err"; exit 1; }
env "$toggle=1" "$ptdc" "$@" -o "$out/b" 2>"$out/b.err" ||
    { echo "FAIL $name: ptdc failed with $toggle"; tail -n 5 "$out/b.err"; exit 1; }
case $metric in
meshes) count() { sed -n 's/.* \([0-9]*\) of [0-9]* meshes solved.*/\1/p' "$1/plan.txt"; } ;;
solves) count() { sed -n 's/.* \([0-9]*\) ILP solves.*/\1/p' "$1/plan.txt"; } ;;
*) echo "FAIL $name: unknown metric '$metric'"; exit 1 ;;
esac
plan() { sed -n 's/^ptdc: wrote [^:]*: //p' "$1"; }
ca=$(count "$out/a") cb=$(count "$out/b")
pa=$(plan "$out/a.err") pb=$(plan "$out/b.err")
if [ -z "$pa" ] || [ "$pa" != "$pb" ]; then
    echo "FAIL $name: with the rule '$pa'"
    echo "  with $toggle '$pb'"
    exit 1
fi
[ -n "$ca" ] && [ -n "$cb" ] && [ "$ca" -lt "$cb" ] ||
    { echo "FAIL $name: $ca $metric with the rule, $cb with $toggle"; exit 1; }
echo "ok $name: the same plan ($pa); $ca $metric with the rule, $cb with $toggle"
