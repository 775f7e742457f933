/* ckpt_lock.c: one job at a time saves into a checkpoint directory.
 *
 * DIR/.ptdc-save.lock is locked with flock by rank 0 before the first step
 * and stays locked until the process ends: the kernel releases the lock of
 * a process that dies however it dies, so a lock is never stale (the file
 * may stay; it is only the holder's note). The file holds the holder's host
 * and pid, for the refusal a second job prints. Two jobs saving into one
 * directory would otherwise prune and overwrite each other's steps. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common.h"

#define LOCK_NAME ".ptdc-save.lock"

int rt_ckpt_lock(const char *dir, int64_t need_bytes, char *err, size_t errlen)
{
    if (rtc_mkdirs(dir, err, errlen) != 0)
        return -1;
    size_t n = strlen(dir) + sizeof LOCK_NAME + 2;
    char *path = rtc_xmalloc(n);
    snprintf(path, n, "%s/%s", dir, LOCK_NAME);
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    int rc = 0;
    if (fd < 0) {
        rc = rtc_err(err, errlen, "%s: cannot write in the checkpoint directory: %s", dir,
                     strerror(errno));
    } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            char who[256] = "";
            ssize_t k = pread(fd, who, sizeof who - 1, 0);
            who[k > 0 ? k : 0] = 0;
            who[strcspn(who, "\n")] = 0;
            rc = rtc_err(err, errlen, "%s: another job is saving checkpoints into this "
                         "directory (its lock %s is held by %s); two jobs saving into one "
                         "directory would prune and overwrite each other's steps: wait for it "
                         "to end, or pass another --save directory", dir, path,
                         who[0] ? who : "a process that has not written its name yet");
        } else if (errno != ENOLCK && errno != EOPNOTSUPP && errno != ENOSYS) {
            rc = rtc_err(err, errlen, "%s: cannot lock: %s", path, strerror(errno));
        } /* a file system without locks: saved unlocked (docs/runtime.md) */
    } else {
        char host[128] = "?", who[256];
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = 0;
        int k = snprintf(who, sizeof who, "pid %ld on host %s\n", (long)getpid(), host);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, who, (size_t)k, 0) != k)
            rc = rtc_err(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    }
    /* Room for one more checkpoint: the steps pruned make room only after
     * the new one is committed. */
    struct statvfs vs;
    if (rc == 0 && need_bytes > 0 && statvfs(dir, &vs) == 0 &&
        (double)vs.f_bavail * (double)vs.f_frsize < (double)need_bytes)
        rc = rtc_err(err, errlen, "%s: %.1f MiB free, a checkpoint of this model needs about "
                     "%.1f MiB: free some space or pass another --save directory", dir,
                     (double)vs.f_bavail * (double)vs.f_frsize / 1048576.0,
                     (double)need_bytes / 1048576.0);
    if (rc != 0 && fd >= 0)
        close(fd);
    free(path);
    return rc == 0 ? (fd >= 0 ? fd : 0) : -1;
}
