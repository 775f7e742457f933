/* util.c: allocation, error sentences, whole-buffer file I/O and atomic
 * replacement of a file (temporary + fsync + rename + directory fsync). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

void *rtc_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        rt_fatal("ptdrt: out of host memory allocating %zu bytes", bytes);
    return p;
}

void *rtc_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        rt_fatal("ptdrt: out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

char *rtc_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = rtc_xmalloc(n);
    memcpy(d, s, n);
    return d;
}

int rtc_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void rtc_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void rtc_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

uint32_t rtc_get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

uint64_t rtc_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int rtc_write_all(int fd, const void *buf, size_t n, int64_t offset, const char *path, char *err,
                  size_t errlen)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = offset >= 0 ? pwrite(fd, p, n, (off_t)offset) : write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return rtc_err(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        }
        p += w;
        n -= (size_t)w;
        if (offset >= 0)
            offset += w;
    }
    return 0;
}

int rtc_read_all(int fd, void *buf, size_t n, int64_t offset, const char *path, char *err,
                 size_t errlen)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return rtc_err(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        }
        if (r == 0)
            return rtc_err(err, errlen, "%s: file is truncated (ends at byte %lld)", path,
                           (long long)offset);
        p += r;
        n -= (size_t)r;
        offset += r;
    }
    return 0;
}

int rtc_atomic_open(RtcAtomic *a, const char *path, char *err, size_t errlen)
{
    size_t n = strlen(path);
    a->path = rtc_xstrdup(path);
    a->tmp = rtc_xmalloc(n + 16);
    snprintf(a->tmp, n + 16, "%s.tmp.XXXXXX", path);
    a->fd = mkstemp(a->tmp);
    if (a->fd < 0) {
        int e = errno;
        free(a->path);
        free(a->tmp);
        return rtc_err(err, errlen, "%s: cannot create a temporary file next to it: %s", path,
                       strerror(e));
    }
    /* mkstemp makes 0600; a checkpoint or weights file is ordinary data. */
    if (fchmod(a->fd, 0644) != 0) {
        int e = errno;
        rtc_atomic_abort(a);
        return rtc_err(err, errlen, "%s: cannot set permissions: %s", path, strerror(e));
    }
    return 0;
}

void rtc_atomic_abort(RtcAtomic *a)
{
    close(a->fd);
    unlink(a->tmp);
    free(a->path);
    free(a->tmp);
}

/* The directory holding path ("." when it has no slash). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return rtc_xstrdup(".");
    if (slash == path)
        return rtc_xstrdup("/");
    size_t n = (size_t)(slash - path);
    char *d = rtc_xmalloc(n + 1);
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

int rtc_atomic_commit(RtcAtomic *a, char *err, size_t errlen)
{
    int rc = 0;
    if (fsync(a->fd) != 0) {
        rc = rtc_err(err, errlen, "%s: cannot fsync the temporary %s: %s", a->path, a->tmp,
                     strerror(errno));
        rtc_atomic_abort(a);
        return rc;
    }
    if (close(a->fd) != 0) {
        rc = rtc_err(err, errlen, "%s: cannot close the temporary %s: %s", a->path, a->tmp,
                     strerror(errno));
        unlink(a->tmp);
        goto done;
    }
    if (rename(a->tmp, a->path) != 0) {
        rc = rtc_err(err, errlen, "%s: cannot rename %s over it: %s", a->path, a->tmp,
                     strerror(errno));
        unlink(a->tmp);
        goto done;
    }
    /* The rename is durable only once the directory entry is on disk. */
    char *dir = dir_of(a->path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0 || fsync(dfd) != 0)
        rc = rtc_err(err, errlen, "%s: cannot fsync directory %s: %s", a->path, dir,
                     strerror(errno));
    if (dfd >= 0)
        close(dfd);
    free(dir);
done:
    free(a->path);
    free(a->tmp);
    return rc;
}

int64_t rtc_numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

int rtc_check_block(int rank, const int64_t *global, const int64_t *offset, const int64_t *local,
                    const char *what, char *err, size_t errlen)
{
    if (rank < 0 || rank > RT_ST_MAXDIM)
        return rtc_err(err, errlen, "%s: rank %d is outside [0, %d]", what, rank, RT_ST_MAXDIM);
    for (int i = 0; i < rank; i++)
        if (global[i] < 0 || offset[i] < 0 || local[i] < 0 || offset[i] > global[i] ||
            local[i] > global[i] - offset[i])
            return rtc_err(err, errlen,
                           "%s: block [%lld, +%lld) of dim %d lies outside its size %lld", what,
                           (long long)offset[i], (long long)local[i], i, (long long)global[i]);
    return 0;
}

void rtc_str_add(RtcStr *b, const void *src, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns)
            rt_fatal("ptdrt: out of host memory (%zu bytes of text)", cap);
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, src, n);
    b->len += n;
    b->s[b->len] = 0;
}
