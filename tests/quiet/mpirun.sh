#!/bin/sh
# mpirun.sh: the launcher of the suite's generated programs (PTDC_MPIRUN, set
# for every test by quiet_env.cmake, tests/quiet/CMakeLists.txt): Open MPI's
# mpirun (PTDC_QUIET_MPIRUN) with the ranks alone preloading
# PTDC_QUIET_PRELOAD (quiet_yield.c: a waiting rank sleeps between polls
# instead of yielding; in the sanitizer build the sanitizer's runtime comes
# first, as it must), ahead of any LD_PRELOAD of the caller (the fault
# tests' faultfs). Arguments pass unchanged; exec keeps the process
# mpirun's, which the fault tests signal and kill.
exec "${PTDC_QUIET_MPIRUN:?}" -x LD_PRELOAD="${PTDC_QUIET_PRELOAD:?}${LD_PRELOAD:+:$LD_PRELOAD}" "$@"
