/* fs.c: input files (regular files only, never blocking on a FIFO) and
 * output directories (the driver's plan files, codegen's DIR), written on
 * the file system where they end up so that a rename never crosses one. */
#include "ir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

bool ir_mkdirs(const char *dir)
{
    char *p = ir_xstrdup(dir);
    bool ok = true;
    for (char *s = p + 1; ok && *p; s++) {
        bool end = *s == 0;
        if (*s == '/' || end) {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                ir_error(IR_NOLOC, "cannot create directory '%s': %s", p, strerror(errno));
                ok = false;
            }
            if (end)
                break;
            *s = '/';
        }
    }
    free(p);
    return ok;
}

bool ir_mkdirs_parent(const char *path)
{
    char *p = ir_xstrdup(path);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') /* "out/" names the directory "out" */
        p[--n] = 0;
    char *slash = strrchr(p, '/');
    bool ok = true;
    if (slash && slash != p) {
        *slash = 0;
        ok = ir_mkdirs(p);
    }
    free(p);
    return ok;
}

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

FILE *ir_open_regular(const char *path, const char *what, IrLoc from)
{
    /* "cannot open cluster file 'x'", or without a role "cannot open 'x'" */
    char role[64] = "";
    if (what && *what)
        snprintf(role, sizeof role, "%s ", what);
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever;
     * it is cleared before anything is read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        ir_error(from, "cannot open %s'%s': %s", role, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    int fl;
    if (fstat(fd, &st) != 0) {
        ir_error(from, "cannot open %s'%s': %s", role, path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        ir_error(from, "cannot read %s'%s': it is %s, not a regular file", role, path,
                 kind_of(st.st_mode));
        close(fd);
        return NULL;
    }
    FILE *f = NULL;
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
        !(f = fdopen(fd, "rb"))) {
        ir_error(from, "cannot open %s'%s': %s", role, path, strerror(errno));
        close(fd);
    }
    return f;
}

static void outdir_free(IrOutDir *o)
{
    free(o->dir);
    free(o->tmp);
    o->dir = o->tmp = NULL;
}

bool ir_outdir_begin(IrOutDir *o, const char *dir)
{
    o->dir = ir_xstrdup(dir);
    for (size_t n = strlen(o->dir); n > 1 && o->dir[n - 1] == '/'; n--)
        o->dir[n - 1] = 0;
    o->tmp = NULL;
    o->inside = false;
    if (!ir_mkdirs_parent(o->dir)) {
        outdir_free(o);
        return false;
    }
    struct stat st;
    size_t len = strlen(o->dir) + 64;
    o->tmp = ir_xmalloc(len);
    if (stat(o->dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            ir_error(IR_NOLOC, "%s exists and is not a directory", o->dir);
            outdir_free(o);
            return false;
        }
        /* An existing DIR may be a mount point: a sibling would be on the
         * parent's file system, and moving files from it would fail with
         * "Invalid cross-device link". Inside DIR, renames stay within. */
        snprintf(o->tmp, len, "%s/.ptdc-tmp-%ld", o->dir, (long)getpid());
        o->inside = true;
    } else {
        snprintf(o->tmp, len, "%s.tmp-%ld", o->dir, (long)getpid());
    }
    if (mkdir(o->tmp, 0777) != 0) {
        ir_error(IR_NOLOC, "cannot create %s: %s", o->tmp, strerror(errno));
        outdir_free(o);
        return false;
    }
    return true;
}

static void remove_tmp(IrOutDir *o, const char *const *names, int n)
{
    size_t len = strlen(o->tmp) + 2;
    for (int i = 0; i < n; i++) {
        char *p = ir_xmalloc(len + strlen(names[i]));
        snprintf(p, len + strlen(names[i]), "%s/%s", o->tmp, names[i]);
        unlink(p);
        free(p);
    }
    rmdir(o->tmp);
}

bool ir_outdir_commit(IrOutDir *o, const char *const *names, int n)
{
    bool ok = true;
    if (!o->inside && rename(o->tmp, o->dir) == 0) {
        outdir_free(o);
        return true;
    }
    /* DIR exists (it did from the start, or it appeared meanwhile): move
     * the files in one by one. */
    for (int i = 0; i < n && ok; i++) {
        size_t a = strlen(o->tmp) + strlen(names[i]) + 2, b = strlen(o->dir) + strlen(names[i]) + 2;
        char *from = ir_xmalloc(a), *to = ir_xmalloc(b);
        snprintf(from, a, "%s/%s", o->tmp, names[i]);
        snprintf(to, b, "%s/%s", o->dir, names[i]);
        if (rename(from, to) != 0) {
            ir_error(IR_NOLOC, "cannot write %s: %s", to, strerror(errno));
            ok = false;
        }
        free(from);
        free(to);
    }
    remove_tmp(o, names, n);
    outdir_free(o);
    return ok;
}

void ir_outdir_abort(IrOutDir *o, const char *const *names, int n)
{
    if (o->tmp)
        remove_tmp(o, names, n);
    outdir_free(o);
}

/* ------------------------------------------------ the output's ownership */

#define OWN_MARK ".ptdc-output"

/* DIR/name, in a buffer of the caller's. */
static const char *in_dir(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

bool ir_outdir_check(const char *dir, const char *const *names, int n, const char *const *inputs,
                     int ninputs)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return true; /* created by the write: nothing to lose */
    if (!S_ISDIR(st.st_mode)) {
        ir_error(IR_NOLOC, "-o %s: it exists and is not a directory", dir);
        return false;
    }
    char a[4096], b[4096];
    bool ours = lstat(in_dir(a, sizeof a, dir, OWN_MARK), &st) == 0 && S_ISREG(st.st_mode);
    /* Never over an input, ptdc's own directory or not (a model kept in
     * its program directory under a name ptdc writes). */
    for (int i = 0; i < n; i++) {
        struct stat out;
        if (stat(in_dir(a, sizeof a, dir, names[i]), &out) != 0)
            continue;
        for (int k = 0; k < ninputs; k++) {
            struct stat in;
            if (inputs[k] && stat(inputs[k], &in) == 0 && in.st_dev == out.st_dev &&
                in.st_ino == out.st_ino) {
                ir_error(IR_NOLOC, "-o %s would write %s over the input %s; choose another directory",
                         dir, names[i], inputs[k]);
                return false;
            }
        }
    }
    if (ours)
        return true;
    /* Not ptdc's: it may hold anything but what ptdc would replace. */
    int clash = 0;
    size_t used = 0;
    b[0] = 0;
    for (int i = 0; i < n; i++)
        if (lstat(in_dir(a, sizeof a, dir, names[i]), &st) == 0) {
            if (clash++ < 3)
                used += (size_t)snprintf(b + used, sizeof b - used, "%s%s", clash > 1 ? ", " : "",
                                         names[i]);
        }
    if (clash) {
        ir_error(IR_NOLOC,
                 "-o %s holds %s%s, which ptdc did not write there (no %s/%s): it will not replace "
                 "them; choose an empty or new directory, or remove them",
                 dir, b, clash > 3 ? " and more" : "", dir, OWN_MARK);
        return false;
    }
    return true;
}

bool ir_outdir_mark(const char *dir, bool *had)
{
    char a[4096], t[4096];
    struct stat st;
    *had = lstat(in_dir(a, sizeof a, dir, OWN_MARK), &st) == 0 && S_ISREG(st.st_mode);
    if (*had)
        return true;
    snprintf(t, sizeof t, "%s/.%s.tmp.%ld", dir, OWN_MARK + 1, (long)getpid());
    FILE *f = fopen(t, "w");
    bool ok = f && fputs("This directory is a ptdc output (-o): ptdc replaces the files it wrote "
                         "here, and no others.\n", f) >= 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok || rename(t, in_dir(a, sizeof a, dir, OWN_MARK)) != 0) {
        ir_error(IR_NOLOC, "cannot write '%s': %s", a, strerror(errno));
        unlink(t);
        return false;
    }
    return true;
}

void ir_outdir_unmark(const char *dir)
{
    char a[4096];
    unlink(in_dir(a, sizeof a, dir, OWN_MARK));
}

int ir_outdir_lock(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        ir_error(IR_NOLOC, "cannot open '%s': %s", dir, strerror(errno));
        return -1;
    }
    /* Another ptdc writing DIR: wait for it, then write over its files
     * whole (never a mix of the two). */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "ptdc: waiting for another ptdc writing %s\n", dir);
        if (flock(fd, LOCK_EX) != 0) {
            ir_error(IR_NOLOC, "cannot lock '%s': %s", dir, strerror(errno));
            close(fd);
            return -1;
        }
    }
    return fd;
}

void ir_outdir_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* releases the flock */
}
