/* faultfs.c: an LD_PRELOAD shim that makes file system calls fail or kill
 * the process at a chosen point, for the fault-injection tests.
 *
 *   FAULT_ENOSPC_AFTER=N   writes to regular files succeed for N bytes in
 *                          all (the one crossing N is cut short there, as a
 *                          full disk does), then fail with ENOSPC
 *   FAULT_FSYNC_EIO=1      fsync and fdatasync fail with EIO
 *   FAULT_KILL_AT=EV:K     SIGKILL just before the K-th call of EV (write,
 *                          fsync, rename, unlink, mkdir, rmdir), counting
 *                          calls on regular files (write, fsync) or paths
 *   FAULT_NO_SYNC=1        fsync and fdatasync only count (a killed process
 *                          loses nothing the page cache holds: the kill
 *                          tests need the order of calls, not durability)
 *   FAULT_ONLY_RANK=R      apply the above only in the MPI rank R
 *                          (OMPI_COMM_WORLD_RANK)
 *   FAULT_LOG=PATH         append "EV PATH" for every rename, unlink and
 *                          rmdir that succeeded (the test reads what a
 *                          killed save had committed)
 *   FAULT_STDERR_COUNT=PATH write the number of write() calls on fd 2 to
 *                          PATH at exit (whole lines are one call each)
 * Calls the runtime makes directly (write, pwrite, fsync, rename, ...) are
 * intercepted; stdio's internal writes are not, nor are writes to pipes,
 * terminals and sockets (the error message must still get out). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { EV_WRITE, EV_FSYNC, EV_RENAME, EV_UNLINK, EV_MKDIR, EV_RMDIR, EV_N };
static const char *const ev_names[EV_N] = {"write", "fsync", "rename", "unlink", "mkdir", "rmdir"};

static int active = -1; /* -1: not read yet */
static long long enospc_after = -1, written;
static int fsync_eio, no_sync, kill_ev = -1;
static long kill_at, counts[EV_N];
static const char *log_path, *stderr_count_path;
static long stderr_writes;

static void setup(void)
{
    if (active >= 0)
        return;
    const char *only = getenv("FAULT_ONLY_RANK"), *me = getenv("OMPI_COMM_WORLD_RANK");
    active = !only || (me && strcmp(only, me) == 0);
    const char *e = getenv("FAULT_ENOSPC_AFTER");
    if (e)
        enospc_after = atoll(e);
    fsync_eio = getenv("FAULT_FSYNC_EIO") != NULL;
    no_sync = getenv("FAULT_NO_SYNC") != NULL;
    const char *k = getenv("FAULT_KILL_AT");
    if (k) {
        const char *colon = strchr(k, ':');
        for (int i = 0; colon && i < EV_N; i++)
            if (strlen(ev_names[i]) == (size_t)(colon - k) && !strncmp(k, ev_names[i], (size_t)(colon - k)))
                kill_ev = i;
        kill_at = colon ? atol(colon + 1) : 0;
    }
    log_path = getenv("FAULT_LOG");
    stderr_count_path = getenv("FAULT_STDERR_COUNT");
}

static void event(int ev)
{
    setup();
    if (active && ev == kill_ev && ++counts[ev] == kill_at)
        raise(SIGKILL);
}

static bool regular(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

static void log_event(const char *ev, const char *path)
{
    if (!log_path || !active)
        return;
    static ssize_t (*real_write)(int, const void *, size_t);
    if (!real_write)
        real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[4200];
    int n = snprintf(line, sizeof line, "%s %s\n", ev, path);
    if (n > 0 && real_write(fd, line, (size_t)n) < 0)
        perror("faultfs log");
    close(fd);
}

/* How much of a write of n bytes to let through (-1: fail with ENOSPC). */
static ssize_t allowance(int fd, size_t n)
{
    if (!active || fd <= 2 || !regular(fd)) /* stdout and stderr always get through */
        return (ssize_t)n;
    event(EV_WRITE);
    if (enospc_after < 0)
        return (ssize_t)n;
    long long left = enospc_after - written;
    if (left <= 0)
        return -1;
    return (ssize_t)((long long)n < left ? (long long)n : left);
}

static void count_stderr(void)
{
    if (!stderr_count_path)
        return;
    FILE *f = fopen(stderr_count_path, "w");
    if (f) {
        fprintf(f, "%ld\n", stderr_writes);
        fclose(f);
    }
}

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    setup();
    if (fd == 2 && stderr_count_path) {
        if (stderr_writes++ == 0)
            atexit(count_stderr);
        return real(fd, buf, n);
    }
    ssize_t k = allowance(fd, n);
    if (k < 0) {
        errno = ENOSPC;
        return -1;
    }
    ssize_t w = real(fd, buf, (size_t)k);
    if (w > 0)
        written += w;
    return w;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    ssize_t k = allowance(fd, n);
    if (k < 0) {
        errno = ENOSPC;
        return -1;
    }
    ssize_t w = real(fd, buf, (size_t)k, off);
    if (w > 0)
        written += w;
    return w;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    return pwrite(fd, buf, n, off);
}

static int sync_common(int fd, const char *name)
{
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    event(EV_FSYNC); /* a directory's fsync is a phase of a save too */
    if (active && fsync_eio && regular(fd)) {
        errno = EIO;
        return -1;
    }
    return no_sync ? 0 : real(fd);
}

int fsync(int fd) { return sync_common(fd, "fsync"); }
int fdatasync(int fd) { return sync_common(fd, "fdatasync"); }

int rename(const char *from, const char *to)
{
    int (*real)(const char *, const char *) =
        (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    event(EV_RENAME);
    int rc = real(from, to);
    if (rc == 0)
        log_event("rename", to);
    return rc;
}

int unlink(const char *path)
{
    int (*real)(const char *) = (int (*)(const char *))dlsym(RTLD_NEXT, "unlink");
    event(EV_UNLINK);
    int rc = real(path);
    if (rc == 0)
        log_event("unlink", path);
    return rc;
}

int unlinkat(int dirfd, const char *path, int flags)
{
    int (*real)(int, const char *, int) = (int (*)(int, const char *, int))dlsym(RTLD_NEXT, "unlinkat");
    event(EV_UNLINK);
    int rc = real(dirfd, path, flags);
    if (rc == 0)
        log_event("unlink", path);
    return rc;
}

int mkdir(const char *path, mode_t mode)
{
    int (*real)(const char *, mode_t) = (int (*)(const char *, mode_t))dlsym(RTLD_NEXT, "mkdir");
    event(EV_MKDIR);
    return real(path, mode);
}

int rmdir(const char *path)
{
    int (*real)(const char *) = (int (*)(const char *))dlsym(RTLD_NEXT, "rmdir");
    event(EV_RMDIR);
    int rc = real(path);
    if (rc == 0)
        log_event("rmdir", path);
    return rc;
}
