/* stop.c: preemption. SIGTERM, SIGINT and SIGUSR1 (Slurm's warning before
 * the end of a job's time) set a flag that the trainer polls at step
 * boundaries; rt_stop_agree makes every rank stop after the same step. The
 * handler only stores to a sig_atomic_t and, for a second SIGTERM or SIGINT,
 * restores the default action and raises the signal again (both
 * async-signal-safe), so an impatient second Ctrl-C still ends the run.
 *
 * The first signal also arms alarm(grace): a step or save that cannot
 * finish in the grace time (a stopped peer, a slow file system) must not
 * run past the scheduler's kill, which would leave no line saying why. On
 * SIGALRM the rank writes a line prepared at install time and _exits
 * RT_EXIT_PREEMPTED; an interrupted save leaves the previous step loadable.
 * A SIGALRM before any stop signal (the watchdogs' last resort, alarm(30))
 * keeps its default action. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static volatile sig_atomic_t stop_signal, grace_armed;
static unsigned grace_s = RT_STOP_GRACE;
static char grace_line[256];
static size_t grace_len;

static void on_stop(int sig)
{
    if (stop_signal == 0) {
        stop_signal = sig;
        if (grace_s) {
            grace_armed = 1;
            alarm(grace_s);
        }
        return;
    }
    if (sig == SIGTERM || sig == SIGINT) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
        raise(sig);
    }
}

static void on_alarm(int sig)
{
    if (grace_armed) {
        ssize_t w = write(STDERR_FILENO, grace_line, grace_len);
        (void)w;
        _exit(RT_EXIT_PREEMPTED);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void rt_stop_install(void)
{
    const char *g = getenv("PTDC_STOP_GRACE");
    if (g && *g) {
        char *end;
        long v = strtol(g, &end, 10);
        if (*end || v < 0 || v > 86400)
            rt_fatal("ptdrt: PTDC_STOP_GRACE=%s: expects whole seconds from 0 (none) to 86400", g);
        grace_s = (unsigned)v;
    }
    int k = snprintf(grace_line, sizeof grace_line,
                     "[rank %d] stopping: the step and its checkpoint did not finish within the "
                     "grace time of %u s (PTDC_STOP_GRACE): abandoned; the newest complete "
                     "checkpoint is the one to load; exit status %d (preempted)\n",
                     rt_world_rank(), grace_s, RT_EXIT_PREEMPTED);
    grace_len = k > 0 && (size_t)k < sizeof grace_line ? (size_t)k : 0;
    static const int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* reads, writes and MPI's polls carry on */
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            rt_fatal("ptdrt: cannot install the handler of signal %d", sigs[i]);
    sa.sa_handler = on_alarm;
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        rt_fatal("ptdrt: cannot install the handler of SIGALRM");
}

double rt_stop_grace(void)
{
    return grace_s;
}

int rt_stop_requested(void)
{
    return stop_signal;
}

int rt_stop_agree(RtComm *c)
{
    return (int)rt_host_max(c, stop_signal);
}
