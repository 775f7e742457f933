#!/usr/bin/env bash
# fault_env: the environment reaches every rank, and ranks that see different
# values of a variable that changes which collectives they issue refuse to
# start (issue 34.4: nodes disagreeing on PTDC_OVERLAP or PTDC_PROFILE hang).
#   - run.sh under mpirun passes -x for every PTDC_*/NCCL_* variable and
#     CUDA_DEVICE_MAX_CONNECTIONS of the launching shell (a stand-in mpirun
#     named by PTDC_MPIRUN records its arguments), none for other variables;
#   - under Slurm, srun gets --mpi=pmix --kill-on-bad-exit=1 (PTDC_SRUN_FLAGS
#     replaces them), a stand-in srun on PATH records them;
#   - the real program started by mpirun with PTDC_OVERLAP=0 (PTDC_PROFILE=1)
#     on rank 0 only exits 2 at start with one line naming the variable and
#     both settings; PTDC_PROFILE=0 on one rank and unset on the other agree.
set -u
work=$(mktemp -d /tmp/ptdc-fault-env.XXXXXX)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/prog.sh"
mpirun=$3

mkdir -p "$work/fake"
cat > "$work/fake/launcher" <<'SH'
#!/bin/sh
printf '%s\n' "$@" > "$FAKE_ARGS"
SH
chmod +x "$work/fake/launcher"
ln -s launcher "$work/fake/srun"
export FAKE_ARGS=$work/args

has() { # NAME ARG...: the recorded arguments hold each ARG as one word
  for a in "${@:2}"; do
    if ! grep -qxF -- "$a" "$FAKE_ARGS"; then
      echo "FAIL: $1: the launcher was not given '$a':"; sed 's/^/    /' "$FAKE_ARGS"; fail=1; return
    fi
  done
  echo "$1: ok"
}
hasnt() {
  if grep -qxF -- "$2" "$FAKE_ARGS"; then echo "FAIL: $1: the launcher was given '$2'"; fail=1; fi
}

rm -f "$FAKE_ARGS"
PTDC_MPIRUN=$work/fake/launcher PTDC_OVERLAP=0 NCCL_ALGO=Ring CUDA_DEVICE_MAX_CONNECTIONS=1 \
  UNRELATED_VAR=1 "$prog/run.sh" --steps 1 > "$work/out" 2>&1
has "mpirun exports" -x PTDC_OVERLAP NCCL_ALGO CUDA_DEVICE_MAX_CONNECTIONS PTDC_STOP_GRACE PTDC_WATCH_PID
hasnt "mpirun exports nothing else" UNRELATED_VAR

rm -f "$FAKE_ARGS"
SLURM_JOB_ID=1 PATH=$work/fake:$PATH "$prog/run.sh" --steps 1 > "$work/out" 2>&1
has "srun flags" --mpi=pmix --kill-on-bad-exit=1 --ntasks=2
rm -f "$FAKE_ARGS"
SLURM_JOB_ID=1 PTDC_SRUN_FLAGS=--mpi=pmi2 PATH=$work/fake:$PATH "$prog/run.sh" --steps 1 > "$work/out" 2>&1
has "PTDC_SRUN_FLAGS replaces them" --mpi=pmi2
hasnt "PTDC_SRUN_FLAGS replaces them" --mpi=pmix

for c in "PTDC_OVERLAP 0 off on" "PTDC_PROFILE 1 on off"; do
  read -r v val word unset <<<"$c"
  out=$(cd "$prog" && timeout 120 "$mpirun" --oversubscribe --bind-to none -np 1 -x $v=$val ./train --steps 2 : \
        -np 1 ./train --steps 2 2>&1)
  rc=$?
  expect "$v=$val on rank 0 only" nonzero "the ranks disagree on $v (rank 0: $word (\"$val\"), rank 1: $unset (unset))"
  lacks "$v=$val on rank 0 only: no step" "^step"
done
# the same setting spelled differently (PTDC_PROFILE=0 and unset) agrees
out=$(cd "$prog" && timeout 120 "$mpirun" --oversubscribe --bind-to none -np 1 -x PTDC_PROFILE=0 ./train --steps 1 : \
      -np 1 ./train --steps 1 2>&1)
rc=$?
expect "PTDC_PROFILE=0 on rank 0, unset on rank 1: trains" 0 "^step *1/1"
exit $fail
