/* util.c: allocation, error sentences, whole-buffer file I/O, opening
 * input files safely, atomic replacement of a file (temporary + fsync +
 * rename + directory fsync) and whole-line writes to stderr. */
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
        if (w == 0) /* nothing written and no error: never loop on it */
            return rtc_err(err, errlen, "%s: cannot write: the write made no progress", path);
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

void rtc_str_fmt(RtcStr *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0)
        rt_fatal("ptdrt: cannot format '%s'", fmt);
    if ((size_t)k < sizeof tmp) {
        rtc_str_add(b, tmp, (size_t)k);
        return;
    }
    char *big = rtc_xmalloc((size_t)k + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    rtc_str_add(b, big, (size_t)k);
    free(big);
}

void rtc_str_json(RtcStr *b, const char *s)
{
    rtc_str_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            rtc_str_add(b, esc, 2);
        } else if (*p < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            rtc_str_add(b, esc, 6);
        } else {
            rtc_str_add(b, (const char *)p, 1);
        }
    }
    rtc_str_add(b, "\"", 1);
}

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int rtc_open_regular(const char *path, const char *what, struct stat *st, char *err,
                     size_t errlen)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer forever; on a regular file the flag means nothing, and it is
     * cleared before any read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return rtc_err(err, errlen, "%s: cannot open %s: %s", path, what, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return rtc_err(err, errlen, "%s: cannot stat %s: %s", path, what, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return rtc_err(err, errlen, "%s: cannot read %s: it is %s, not a regular file", path,
                       what, file_kind(sb.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return rtc_err(err, errlen, "%s: cannot open %s: %s", path, what, strerror(e));
    }
    if (st)
        *st = sb;
    return fd;
}

int rtc_mkdirs(const char *dir, char *err, size_t errlen)
{
    if (!*dir)
        return rtc_err(err, errlen, "an empty directory name");
    /* The common case, a missing last component, in one call. */
    struct stat sb;
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return 0;
    char *p = rtc_xstrdup(dir);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        bool end = *s == 0;
        if (*s == '/' || end) {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                rc = rtc_err(err, errlen, "%s: cannot create directory %s: %s", dir, p,
                             strerror(errno));
            else if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
                rc = rtc_err(err, errlen, "%s: %s exists and is not a directory", dir, p);
            if (end || rc)
                break;
            *s = '/';
        }
    }
    free(p);
    return rc;
}

int rtc_fsync_dir(const char *dir, char *err, size_t errlen)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return rtc_err(err, errlen, "%s: cannot fsync the directory: %s", dir, strerror(e));
    }
    close(dfd);
    return 0;
}

void rtc_vwrite_line(int fd, const char *prefix, const char *fmt, va_list ap)
{
    char small[1024];
    va_list aq;
    va_copy(aq, ap);
    size_t np = prefix ? strlen(prefix) : 0;
    int k = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (k < 0)
        k = 0;
    size_t n = np + (size_t)k + 1;
    char *buf = n <= sizeof small ? small : malloc(n + 1);
    if (!buf) { /* no memory: still say something, in pieces */
        buf = small;
        n = sizeof small - 1;
    }
    if (np)
        memcpy(buf, prefix, np < n ? np : n);
    if (np < n)
        vsnprintf(buf + np, n - np, fmt, ap);
    buf[n - 1] = '\n';
    /* One write() for the whole line (a pipe keeps writes of up to PIPE_BUF
     * bytes whole); loop only when the kernel takes part of it. */
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (buf != small)
        free(buf);
}

void rtc_write_line(int fd, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rtc_vwrite_line(fd, prefix, fmt, ap);
    va_end(ap);
}

static bool overlaps(const void *p, size_t pn, const void *q, size_t qn)
{
    uintptr_t x = (uintptr_t)p, y = (uintptr_t)q;
    return pn && qn && x < y + qn && y < x + pn;
}

void rtc_check_batch(const char *fn, int count, void *const c[], size_t cs, const void *const a[],
                     size_t as, const void *const b[], size_t bs)
{
    if (count < 1 || count > RT_MATMUL_BATCH_MAX)
        rt_fatal("%s: count %d outside [1, %d]", fn, count, RT_MATMUL_BATCH_MAX);
    for (int i = 0; i < count; i++)
        for (int j = 0; j < count; j++)
            if (j != i && (overlaps(c[i], cs, c[j], cs) || overlaps(c[i], cs, a[j], as) ||
                           overlaps(c[i], cs, b[j], bs)))
                rt_fatal("%s: C of GEMM %d overlaps C, A or B of GEMM %d", fn, i, j);
}
