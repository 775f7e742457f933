/* launcher.c: notice that the launcher of this rank (mpirun, orted, srun's
 * step daemon) has died, so the rank exits instead of training on alone.
 *
 * The launcher is the parent process; when it dies the kernel reparents us
 * and getppid() changes at once (unlike kill(pid, 0), which still succeeds
 * on a dead parent not yet reaped). When the rank was started through a
 * wrapper (a shell script run by mpirun), Open MPI names its local daemon
 * in PMIX_SERVER_TMPDIR (".../pid.N"): that process is watched as well,
 * through /proc, where a zombie shows as state Z. The backends' watchdog
 * threads call rtc_launcher_gone every tick (tens of milliseconds). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static pid_t parent, daemon_pid, script_pid;
static bool watching;

void rtc_launcher_init(void)
{
    /* Only ranks started by a launcher: a single process run from a shell
     * may outlive it on purpose (nohup). */
    bool launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") ||
                    getenv("PMI_RANK") || getenv("SLURM_STEP_ID") || getenv("PTDC_WATCH_PARENT");
    parent = getppid();
    watching = launched && parent > 1;
    daemon_pid = 0;
    /* run.sh names itself "host:pid": the launcher runs in a session of its
     * own there (so that its signals reach the ranks first), and would
     * outlive a run.sh killed with -9; ranks of that host watch it too. */
    const char *w = getenv("PTDC_WATCH_PID"), *colon = w ? strrchr(w, ':') : NULL;
    char host[256];
    script_pid = 0;
    if (colon && gethostname(host, sizeof host) == 0 &&
        strlen(host) == (size_t)(colon - w) && !strncmp(host, w, (size_t)(colon - w))) {
        long v = strtol(colon + 1, NULL, 10);
        if (v > 1) {
            script_pid = (pid_t)v;
            watching = true;
        }
    }
    const char *t = getenv("PMIX_SERVER_TMPDIR");
    const char *p = t ? strstr(t, "/pid.") : NULL;
    if (p) {
        long v = strtol(p + 5, NULL, 10);
        if (v > 1 && v != parent)
            daemon_pid = (pid_t)v;
    }
}

/* Is pid gone (no such process, or a zombie)? */
static bool dead(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    const char *rp = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces */
    return rp && rp[1] == ' ' && rp[2] == 'Z';
}

bool rtc_launcher_gone(char *what, size_t len)
{
    if (!watching)
        return false;
    if (getppid() != parent) {
        snprintf(what, len, "its launcher (pid %d, the parent process) died", (int)parent);
        return true;
    }
    if (script_pid && dead(script_pid)) {
        snprintf(what, len, "its run.sh (pid %d) died", (int)script_pid);
        return true;
    }
    if (daemon_pid && dead(daemon_pid)) {
        snprintf(what, len, "its launcher's daemon (pid %d) died", (int)daemon_pid);
        return true;
    }
    return false;
}
