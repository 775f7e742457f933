# prog.sh: sourced by the fault tests of a generated training program.
# Compiles tiny-llama for 2 CPU ranks (pp 2; PROG_LAYOUT replaces
# "--gpus 2") into $work/prog and defines
#   train ARGS...             run.sh ARGS, output in $out, status in $rc
#   expect NAME RC PATTERN    $rc is RC ("nonzero": any but 0) and $out
#                             matches the grep pattern; else FAIL
#   has NAME PATTERN [COUNT]  at least COUNT (1) lines of $out match; else FAIL
#   lacks NAME PATTERN        $out does not match PATTERN; else FAIL
# Arguments of every fault test: BIN SHIM MPIRUN PTDC SRC.
ptdc=$4 src=$5
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PTDC_MPIRUN_FLAGS="--oversubscribe --bind-to none"
prog=$work/prog
. "$src/tests/codegen/progcache.sh" # build_program: tiny-llama's program is built once
# FAULT_BASE=TREE (by hand, to see a test fail on older code): the trainer
# and run.sh of TREE (a source tree whose build is TREE/b; TREE/run.sh) and
# its runtime instead of this tree's.
# shellcheck disable=SC2086
"$ptdc" "$src/models/tiny-llama.mdl" ${PROG_LAYOUT:---gpus 2} --target cpu -o "$prog" > "$work/ptdc.log" 2>&1 &&
  if [ -n "${FAULT_BASE:-}" ]; then
    cp "$FAULT_BASE"/runtime/trainer/*.[ch] "$prog"/ && cp "$FAULT_BASE/run.sh" "$prog/run.sh" &&
      sed -i -e "s|^RUNTIME_INCLUDE = .*|RUNTIME_INCLUDE = $FAULT_BASE/runtime|" \
        -e "s|^RUNTIME_LIB = .*|RUNTIME_LIB = $FAULT_BASE/b/runtime/libptdrt_cpu.a|" "$prog/Makefile"
  fi &&
  build_program "$prog" > "$work/make.log" 2>&1 ||
  { echo "FAIL: cannot build the program"; cat "$work/ptdc.log" "$work/make.log"; exit 1; }
fail=0
train() { out=$(timeout 120 "$prog/run.sh" "$@" 2>&1); rc=$?; }
expect() {
  if { [ "$2" = nonzero ] && [ "$rc" -eq 0 ]; } || { [ "$2" != nonzero ] && [ "$rc" -ne "$2" ]; } ||
     ! grep -q -- "$3" <<<"$out"; then
    echo "FAIL: $1: exit $rc (want $2), output lacks '$3':"; echo "$out" | sed 's/^/    /'
    fail=1
  else
    echo "$1: $(grep -m1 -- "$3" <<<"$out")"
  fi
}
has() {
  local n; n=$(grep -c -- "$2" <<<"$out")
  if [ "$n" -lt "${3:-1}" ]; then
    echo "FAIL: $1: $n line(s) match '$2' (want ${3:-1}), exit $rc:"; echo "$out" | sed 's/^/    /'
    fail=1
  else
    echo "$1: $(grep -m1 -- "$2" <<<"$out")"
  fi
}
lacks() {
  if grep -q -- "$2" <<<"$out"; then
    echo "FAIL: $1: output has '$2':"; echo "$out" | sed 's/^/    /'; fail=1
  fi
}
