/* kvfile.c: the text form --cluster and --stack files share: `key = value`
 * per line, `#` starts a comment, blank lines are ignored. A value runs to
 * the comment or the end of the line (tables are several words). Each key
 * goes to a callback that checks it; errors quote the line with a caret. */
#include "cost/cost.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The whole of a regular text file (a FIFO or a directory is refused, not
 * waited on or read as empty), or NULL with a sentence in err. */
static char *read_text(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "'%s' cannot be opened: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%s' is not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((size_t)st.st_size > max) {
        snprintf(err, errlen, "'%s' is larger than %zu MiB", path, max >> 20);
        close(fd);
        return NULL;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = ir_xmalloc(cap + 1);
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "'%s' cannot be read: %s", path, strerror(errno));
            close(fd);
            free(buf);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n == cap) { /* grew while we read */
            if (cap > max) {
                snprintf(err, errlen, "'%s' is larger than %zu MiB", path, max >> 20);
                close(fd);
                free(buf);
                return NULL;
            }
            buf = ir_xrealloc(buf, (cap *= 2) + 1);
        }
    }
    close(fd);
    buf[n] = 0;
    if (memchr(buf, 0, n)) {
        snprintf(err, errlen, "'%s' is not text (contains a NUL byte)", path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static IrLoc at(const char *path, int line, const char *line_start, const char *p)
{
    return (IrLoc){path, line, (int)(p - line_start) + 1};
}

bool pass_kv_parse(const char *path, const char *text, size_t len, PassKvFn fn, void *ctx)
{
    ir_source_add(path, text, len);
    bool ok = true;
    const char *p = text, *end = text + len;
    for (int line = 1; p < end; line++) {
        const char *ls = p, *le = memchr(p, '\n', (size_t)(end - p));
        if (!le)
            le = end;
        p = le < end ? le + 1 : end;
        const char *q = ls;
        for (; q < le; q++)
            if ((unsigned char)*q < 32 && *q != '\t' && *q != '\r')
                break;
        if (q < le) {
            ir_error(at(path, line, ls, q), "control character in %s", path);
            return false;
        }
        q = ls;
        while (q < le && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q == le || *q == '#')
            continue;
        const char *k0 = q;
        while (q < le && (isalnum((unsigned char)*q) || *q == '_' || *q == '.' || *q == '-'))
            q++;
        if (q == k0) {
            ir_error(at(path, line, ls, q), "expected a key (`name = value`), found '%c'", *q);
            ok = false;
            continue;
        }
        const char *k1 = q;
        while (q < le && (*q == ' ' || *q == '\t'))
            q++;
        if (q == le || *q != '=') {
            ir_error(at(path, line, ls, q), "expected '=' after '%.*s'", (int)(k1 - k0), k0);
            ok = false;
            continue;
        }
        q++;
        while (q < le && (*q == ' ' || *q == '\t'))
            q++;
        const char *v0 = q;
        const char *v1 = le > v0 ? memchr(v0, '#', (size_t)(le - v0)) : NULL;
        if (!v1)
            v1 = le;
        while (v1 > v0 && isspace((unsigned char)v1[-1]))
            v1--;
        char key[128], val[4096];
        if ((size_t)(k1 - k0) >= sizeof key || (size_t)(v1 - v0) >= sizeof val) {
            ir_error(at(path, line, ls, k0), "line too long");
            ok = false;
            continue;
        }
        memcpy(key, k0, (size_t)(k1 - k0));
        key[k1 - k0] = 0;
        memcpy(val, v0, (size_t)(v1 - v0));
        val[v1 - v0] = 0;
        if (!*val) {
            ir_error(at(path, line, ls, v0), "'%s' needs a value", key);
            ok = false;
            continue;
        }
        ok &= fn(ctx, key, val, at(path, line, ls, k0), at(path, line, ls, v0));
    }
    return ok;
}

bool pass_kv_load(const char *path, const char *what, PassKvFn fn, void *ctx)
{
    char err[512];
    size_t n = 0;
    char *buf = read_text(path, (size_t)1 << 24, &n, err, sizeof err);
    if (!buf) {
        ir_error(IR_NOLOC, "%s file %s", what, err);
        return false;
    }
    /* The text and path stay alive for diagnostics quoting them later. */
    static VEC(char *) kept;
    char *p = ir_xstrdup(path);
    vec_push(kept, buf);
    vec_push(kept, p);
    return pass_kv_parse(p, buf, n, fn, ctx);
}

bool pass_kv_number(const char *key, const char *val, IrLoc loc, double lo, double hi,
                    const char *unit, double *out)
{
    char *e;
    errno = 0;
    double d = strtod(val, &e);
    if (e == val || *e || errno || !isfinite(d)) {
        ir_error(loc, "'%s' expects a number (%s), got '%s'", key, unit, val);
        return false;
    }
    if (d < lo || d > hi) {
        ir_error(loc, "'%s' = %s is out of range [%g, %g] %s", key, val, lo, hi, unit);
        return false;
    }
    *out = d;
    return true;
}
