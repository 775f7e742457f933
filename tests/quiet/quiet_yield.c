/* quiet_yield.c: preloaded into the suite's ranks (mpirun.sh), a
 * sched_yield that sleeps 50 us instead.
 *
 * An Open MPI rank waiting in a blocking call (a collective, MPI_Wait) polls
 * its transports in a loop, calling sched_yield between polls
 * (mpi_yield_when_idle, tests/suite_env.cmake). The suite runs 1 to 8 ranks
 * a test, 3 tests at a time on 2 cores: sched_yield keeps the waiting rank
 * runnable, so it still takes its share of a core, in system calls, from
 * the ranks and tests that compute. Asleep between polls it takes almost
 * none: tiny-gpt tp2-pp2-mb4's gradient check (4 ranks) spent 53% of its
 * CPU time in sched_yield (perf). A message that arrives while the rank
 * sleeps is seen at most one sleep late; the runtime's own waits poll the
 * same way (runtime/cpu/comm.c, test_wait: 50 us). Nothing a rank computes
 * or sends changes, only when a waiting one looks again. */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <time.h>

int sched_yield(void)
{
    const struct timespec nap = {0, 50000};
    nanosleep(&nap, NULL);
    return 0;
}
