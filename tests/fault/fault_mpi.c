/* fault_mpi.c: a small MPI program for the stall, launcher and preemption
 * tests (run by fault_*.sh under mpirun). Modes:
 *   stall DIR      ranks loop on all-reduces (and a little compute); each
 *                  writes its pid to DIR/pid.R; rank FAULT_STOP_RANK raises
 *                  SIGSTOP on itself at iteration FAULT_STOP_AT (outside any
 *                  MPI call) unless FAULT_STOP_AT is unset (then the test
 *                  script stops it from outside).
 *   p2p DIR        rank 0 waits for a message rank 1 never sends
 *   chain DIR      3 ranks: rank 2 stops itself (SIGSTOP); rank 1 waits for
 *                  it in an all-reduce of the group {1, 2}, rank 0 for a
 *                  message rank 1 sends after it (a pipeline's chain: the
 *                  first rank to fire may not share a group with rank 2)
 *   async DIR      a non-blocking all-reduce completes, then ranks 0 and 1
 *                  issue and wait for a second one that rank 2 never issues
 *   loop DIR       like stall, without stopping; runs until killed
 *   stop DIR       a training loop: rt_stop_install, a step = compute +
 *                  all-reduce; at each step boundary rt_stop_agree; on a
 *                  request every rank prints "stopped after step N (signal S)"
 *                  and exits 0 (with FAULT_STOP_IGNORE set it carries on, so
 *                  a second signal can be sent). Rank files DIR/pid.R.
 * The timeout comes from PTDC_TIMEOUT. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt.h"

static void write_pid(const char *dir, int rank)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/pid.%d", dir, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        rt_fatal("cannot write %s", path);
}

static void busy(double seconds)
{
    double t0 = rt_time();
    volatile double x = 0;
    while (rt_time() - t0 < seconds)
        for (int i = 0; i < 1000; i++)
            x += i;
}

int main(int argc, char **argv)
{
    rt_init(&argc, &argv);
    if (argc != 3)
        rt_fatal("usage: fault_mpi stall|p2p|chain|async|loop|stop DIR");
    const char *mode = argv[1], *dir = argv[2];
    RtComm *w = rt_comm_world();
    int rank = rt_world_rank();
    const char *sr = getenv("FAULT_STOP_RANK"), *sa = getenv("FAULT_STOP_AT");
    int stop_rank = sr ? atoi(sr) : -1;
    long stop_at = sa ? atol(sa) : -1;
    if (!strcmp(mode, "stop"))
        rt_stop_install();
    write_pid(dir, rank);
    rt_barrier(w);
    if (!strcmp(mode, "p2p")) {
        float x = 0;
        if (rank == 0)
            rt_wait(rt_irecv(w, &x, 1, RT_F32, 1, 7));
        else
            busy(1e9);
    }
    if (!strcmp(mode, "chain")) {
        RtComm *g = rt_comm_split(rank > 0, rank);
        float x = 1;
        if (rank == 2)
            raise(SIGSTOP);
        if (rank == 1) {
            rt_allreduce(g, &x, 1, RT_F32);
            rt_wait(rt_isend(w, &x, 1, RT_F32, 0, 9));
        }
        if (rank == 0)
            rt_wait(rt_irecv(w, &x, 1, RT_F32, 1, 9));
    }
    float buf[256];
    if (!strcmp(mode, "async")) {
        for (int i = 0; i < 256; i++)
            buf[i] = (float)i;
        rt_wait(rt_iallreduce(w, buf, 256, RT_F32));
        if (rank != 2)
            rt_wait(rt_iallreduce(w, buf, 256, RT_F32));
        else
            busy(1e9);
    }
    for (long it = 0;; it++) {
        if (rank == stop_rank && it == stop_at)
            raise(SIGSTOP);
        for (int i = 0; i < 256; i++)
            buf[i] = (float)(rank + i);
        rt_allreduce(w, buf, 256, RT_F32);
        if (!strcmp(mode, "stop")) {
            busy(0.01);
            int sig = rt_stop_agree(w);
            if (sig && !getenv("FAULT_STOP_IGNORE")) {
                printf("rank %d: stopped after step %ld (signal %d)\n", rank, it + 1, sig);
                fflush(stdout);
                break;
            }
        }
    }
    rt_finalize();
    return 0;
}
