# suite_env.cmake: the environment every test runs in. ctest includes this
# file (TEST_INCLUDE_FILES, set in tests/CMakeLists.txt) before it starts a
# test, and each test inherits ctest's environment; scripts/test_cpu.py
# applies it the same way. A variable already set is left as it is.
#
# OMPI_MCA_mpi_yield_when_idle=1: an Open MPI rank waiting for a peer (a
# collective, a receive) polls in a loop, and yields the CPU between polls
# only when mpirun knows the node is oversubscribed (more ranks than slots).
# The suite runs tests side by side on 2 cores (ctest -j 2), each with 1 to 8
# ranks, so a 2-rank program is oversubscribed without Open MPI knowing: its
# waiting rank spins on the core its peer, or another test, needs. Measured
# (ASan build, loaded 2-core VM): tiny-llama3's 2-rank search-tp2-sp-full
# trained 5 steps in 1.3 to 1.8 CPU s spinning, 0.45 yielding, the same
# losses bit for bit; docs/design.md, "The suite's time". Only the waiting
# changes: every rank computes and communicates exactly as before. The
# yield itself still takes a share of a core: the ranks of generated
# programs sleep instead (tests/quiet: its generated quiet_env.cmake is
# included after this file).
if(NOT DEFINED ENV{OMPI_MCA_mpi_yield_when_idle})
  set(ENV{OMPI_MCA_mpi_yield_when_idle} 1)
endif()
