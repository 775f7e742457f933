/* outcheck.c: can an output be written where it is asked for? Checked
 * before the first step, so that a read-only mount, a file in the way,
 * /proc or a missing parent is found before the work, not after it. The
 * test is the real one: a file is created (and removed) where the output
 * will be, since permission bits alone miss read-only mounts and ACLs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* A file created in the existing directory dir and removed again. */
static int probe(const char *what, const char *dir, char *err, size_t errlen)
{
    size_t n = strlen(dir) + 32;
    char *p = rtc_xmalloc(n);
    snprintf(p, n, "%s/.ptdc-probe.XXXXXX", dir);
    int fd = mkstemp(p);
    int rc = 0;
    if (fd < 0)
        rc = rtc_err(err, errlen, "%s: cannot write in %s: %s", what, dir, strerror(errno));
    else {
        close(fd);
        unlink(p);
    }
    free(p);
    return rc;
}

/* p's parent directory, in place ("." for a name without '/'). */
static void parent(char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = 0;
    char *slash = strrchr(p, '/');
    if (!slash)
        strcpy(p, ".");
    else if (slash == p)
        p[1] = 0;
    else
        *slash = 0;
}

int rt_output_check(const char *path, bool dir, char *err, size_t errlen)
{
    struct stat st;
    if (!*path)
        return rtc_err(err, errlen, "an empty output path");
    if (stat(path, &st) == 0) {
        if (dir && !S_ISDIR(st.st_mode))
            return rtc_err(err, errlen, "%s: exists and is not a directory", path);
        if (!dir && !S_ISREG(st.st_mode))
            return rtc_err(err, errlen, "%s: exists and is not a regular file", path);
        if (dir)
            return probe(path, path, err, errlen);
    }
    /* The nearest existing ancestor: a directory is created below it (mkdir
     * -p); a file needs its own directory to exist. */
    char *p = rtc_xstrdup(path);
    int rc = 0;
    for (;;) {
        parent(p);
        if (stat(p, &st) == 0) {
            rc = !S_ISDIR(st.st_mode) ? rtc_err(err, errlen, "%s: %s is not a directory", path, p)
                                      : probe(path, p, err, errlen);
            break;
        }
        if (errno != ENOENT || !dir) {
            rc = errno == ENOENT ? rtc_err(err, errlen, "%s: its directory %s does not exist",
                                           path, p)
                                 : rtc_err(err, errlen, "%s: %s: %s", path, p, strerror(errno));
            break;
        }
    }
    free(p);
    return rc;
}
