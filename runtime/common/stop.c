/* stop.c: preemption. SIGTERM, SIGINT and SIGUSR1 (Slurm's warning before
 * the end of a job's time) set a flag that the trainer polls at step
 * boundaries; rt_stop_agree makes every rank stop after the same step. The
 * handler only stores to a sig_atomic_t and, for a second SIGTERM or SIGINT,
 * restores the default action and raises the signal again (both
 * async-signal-safe), so an impatient second Ctrl-C still ends the run. */
#include <signal.h>
#include <string.h>

#include "common.h"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    if (stop_signal == 0) {
        stop_signal = sig;
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

void rt_stop_install(void)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* reads, writes and MPI's polls carry on */
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            rt_fatal("ptdrt: cannot install the handler of signal %d", sigs[i]);
}

int rt_stop_requested(void)
{
    return stop_signal;
}

int rt_stop_agree(RtComm *c)
{
    return (int)rt_host_max(c, stop_signal);
}
