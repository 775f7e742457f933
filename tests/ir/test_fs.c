/* test_fs.c: ir/fs.c. Input files: a regular file opens; a FIFO (without
 * blocking), a directory and a missing file are refused with one sentence
 * naming the role and the path. Output directories: a missing DIR is
 * written next to itself and renamed into place; an existing DIR is written
 * from a temporary inside it, on DIR's own file system (so a mount point
 * works: checked on /dev/shm when that is a writable mount point); a file in
 * DIR's place is refused; abort leaves nothing behind. */
#include "ir.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;
#define CHECK(c, ...)                                                                        \
    do {                                                                                     \
        if (!(c)) {                                                                          \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                            \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

static char *diag;
static size_t diag_len;
static FILE *diag_f;

static void diag_begin(void)
{
    ir_diag_reset();
    free(diag);
    diag = NULL;
    diag_f = open_memstream(&diag, &diag_len);
    ir_diag_set_stream(diag_f);
}

static const char *diag_end(void)
{
    fclose(diag_f);
    ir_diag_set_stream(NULL);
    return diag;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static dev_t dev_of(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? st.st_dev : (dev_t)-1;
}

static const char *names[2] = {"plan.txt", "model.c"};

/* Write both files through an IrOutDir on dir and check the result. */
static void write_through(const char *dir, bool expect_inside)
{
    IrOutDir o;
    diag_begin();
    bool ok = ir_outdir_begin(&o, dir);
    const char *d = diag_end();
    CHECK(ok, "begin %s: %s", dir, d);
    if (!ok)
        return;
    CHECK(o.inside == expect_inside, "%s: temporary inside %d", dir, o.inside);
    /* the temporary is on the file system the files end up on */
    char parent[512];
    snprintf(parent, sizeof parent, "%s", o.dir);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = 0;
    CHECK(dev_of(o.tmp) == dev_of(expect_inside ? o.dir : parent),
          "%s: temporary %s on another file system", dir, o.tmp);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", o.tmp);
    write_file(o.tmp, names[0], "plan\n");
    write_file(o.tmp, names[1], "int x;\n");
    diag_begin();
    ok = ir_outdir_commit(&o, (const char *const *)names, 2);
    d = diag_end();
    CHECK(ok, "commit %s: %s", dir, d);
    char p[600];
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        CHECK(access(p, R_OK) == 0, "%s not written", p);
    }
    CHECK(access(tmp, F_OK) != 0, "temporary %s left behind", tmp);
}

int main(void)
{
    alarm(30); /* a blocking open fails the test instead of hanging it */
    char root[] = "/tmp/ptdc-fs-XXXXXX";
    if (!mkdtemp(root))
        return 1;
    char p[512];

    /* input files */
    snprintf(p, sizeof p, "%s/ok.mdl", root);
    write_file(root, "ok.mdl", "model m {}\n");
    const char *d;
    diag_begin();
    FILE *f = ir_open_regular(p, "model", IR_NOLOC);
    d = diag_end();
    CHECK(f && !ir_error_count(), "regular file refused: %s", d);
    if (f)
        fclose(f);
    snprintf(p, sizeof p, "%s/in.fifo", root);
    mkfifo(p, 0644);
    diag_begin();
    f = ir_open_regular(p, "cluster file", IR_NOLOC);
    d = diag_end();
    char want[700];
    snprintf(want, sizeof want, "ptdc: error: cannot read cluster file '%s': it is a FIFO, not a regular file\n", p);
    CHECK(!f && !strcmp(d, want), "FIFO: '%s'", d);
    unlink(p);
    diag_begin();
    f = ir_open_regular(root, NULL, (IrLoc){"x.mdl", 3, 8});
    d = diag_end();
    snprintf(want, sizeof want, "x.mdl:3:8: error: cannot read '%s': it is a directory, not a regular file\n", root);
    CHECK(!f && !strcmp(d, want), "directory: '%s'", d);
    snprintf(p, sizeof p, "%s/missing.mdl", root);
    diag_begin();
    f = ir_open_regular(p, "model", IR_NOLOC);
    d = diag_end();
    snprintf(want, sizeof want, "ptdc: error: cannot open model '%s': No such file or directory\n", p);
    CHECK(!f && !strcmp(d, want), "missing: '%s'", d);

    /* output directories */
    snprintf(p, sizeof p, "%s/new/out/", root);
    write_through(p, false);
    snprintf(p, sizeof p, "%s/new/out", root);
    CHECK(entries(p) == 2, "new DIR holds %d entries", entries(p));
    write_through(p, true); /* now it exists: the temporary goes inside */
    CHECK(entries(p) == 2, "existing DIR holds %d entries", entries(p));
    snprintf(p, sizeof p, "%s/new", root);
    CHECK(entries(p) == 1, "a sibling temporary was left: %d entries", entries(p));

    snprintf(p, sizeof p, "%s/afile", root);
    write_file(root, "afile", "x");
    IrOutDir o;
    bool ok;
    diag_begin();
    ok = ir_outdir_begin(&o, p);
    d = diag_end();
    CHECK(!ok, "a file accepted as DIR");
    snprintf(want, sizeof want, "ptdc: error: %s exists and is not a directory\n", p);
    CHECK(!strcmp(d, want), "file as DIR: '%s'", d);

    snprintf(p, sizeof p, "%s/aborted", root);
    diag_begin();
    ok = ir_outdir_begin(&o, p);
    d = diag_end();
    CHECK(ok, "begin: %s", d);
    write_file(o.tmp, names[0], "x");
    ir_outdir_abort(&o, (const char *const *)names, 2);
    CHECK(entries(root) == 3, "abort left something: %d entries in %s", entries(root), root);

    /* a real mount point, when there is one we may write to */
    if (dev_of("/dev/shm") != dev_of("/dev") && access("/dev/shm", W_OK) == 0) {
        char a[64], b[64], pa[96], pb[96];
        snprintf(a, sizeof a, "ptdc-test-fs-%ld-a", (long)getpid());
        snprintf(b, sizeof b, "ptdc-test-fs-%ld-b", (long)getpid());
        names[0] = a;
        names[1] = b;
        write_through("/dev/shm", true);
        snprintf(pa, sizeof pa, "/dev/shm/%s", a);
        snprintf(pb, sizeof pb, "/dev/shm/%s", b);
        unlink(pa);
        unlink(pb);
        printf("mount point /dev/shm: ok\n");
    }

    snprintf(p, sizeof p, "rm -rf '%s'", root);
    if (system(p) != 0)
        return 1;
    free(diag);
    if (failures)
        fprintf(stderr, "test_fs: %d check(s) failed\n", failures);
    else
        printf("test_fs: all checks passed\n");
    return failures != 0;
}
