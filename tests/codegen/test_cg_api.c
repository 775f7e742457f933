/* test_cg_api.c: cg_emit's contract, without running a program: it writes
 * every file of DIR or none (an unwritable DIR, a file in the way, a plan it
 * cannot execute leave no DIR and no temporary behind), adds its files to an
 * existing DIR without touching the others, and reports user errors with a
 * sentence. */
#include "codegen.h"
#include "frontend.h"
#include "layout.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fails;
#define CHECK(c, ...)                                                                         \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fprintf(stderr, "test_cg_api:%d: ", __LINE__);                                    \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            fails++;                                                                          \
        }                                                                                     \
    } while (0)

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Anything named like a cg_emit temporary in dir ("DIR.tmp-PID" next to a
 * new DIR, "DIR/.ptdc-tmp-PID" inside an existing one)? */
static bool temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && (e = readdir(d));)
        found |= strstr(e->d_name, "tmp-") != NULL;
    if (d)
        closedir(d);
    return found;
}

static char *diag;
static size_t diag_len;

/* cg_emit with diagnostics captured in diag (the caller closes *cap before
 * the next call). */
static bool emit(const IrGraph *g, const Plan *p, const char *dir, FILE **cap)
{
    free(diag);
    diag = NULL;
    *cap = open_memstream(&diag, &diag_len);
    ir_diag_set_stream(*cap);
    CgOptions o;
    cg_options_default(&o, CG_TARGET_CPU);
    bool ok = cg_emit(g, p, &o, dir);
    fflush(*cap);
    ir_diag_set_stream(stderr);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_cg_api MODELS_DIR WORK\n");
        return 2;
    }
    char path[8192], dir[4096];
    snprintf(path, sizeof path, "%s/tiny-llama.mdl", argv[1]);
    const char *work = argv[2];
    mkdir(work, 0777);
    IrArena *a = ir_arena_new();
    IrGraph *g = fe_compile_file(a, path, NULL, 0, 0);
    CHECK(g && pass_autodiff(g), "tiny-llama does not compile");
    if (!g)
        return 1;
    Layout l;
    Plan p;
    layout_parse("dp2-tp2", &l);
    CHECK(layout_plan(g, &l, &p), "no plan");
    FILE *cap;

    /* A good DIR: every file, run.sh executable. */
    snprintf(dir, sizeof dir, "%s/good", work);
    CHECK(emit(g, &p, dir, &cap), "emit failed: %s", diag);
    fclose(cap);
    const char *files[] = {"model.c", "model.h", "trainer.c", "trainer.h", "Makefile", "run.sh"};
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        CHECK(exists(path), "%s missing", path);
    }
    snprintf(path, sizeof path, "%s/run.sh", dir);
    CHECK(access(path, X_OK) == 0, "run.sh is not executable");
    CHECK(!temporaries(work), "temporaries left in %s", work);

    /* An existing DIR keeps what it had (the driver's plan files). */
    snprintf(path, sizeof path, "%s/plan.txt", dir);
    FILE *f = fopen(path, "w");
    fputs("the plan\n", f);
    fclose(f);
    CHECK(emit(g, &p, dir, &cap), "emit into an existing DIR failed: %s", diag);
    fclose(cap);
    CHECK(exists(path), "plan.txt was removed");
    /* ... written through a temporary inside DIR (DIR may be a mount point,
     * where a sibling would be on another file system), which is gone. */
    CHECK(!temporaries(dir), "temporaries left inside %s", dir);

    /* A file where DIR should be: refused, file untouched. */
    snprintf(dir, sizeof dir, "%s/afile", work);
    f = fopen(dir, "w");
    fputs("x", f);
    fclose(f);
    CHECK(!emit(g, &p, dir, &cap), "emit over a file succeeded");
    fclose(cap);
    CHECK(diag_len && strstr(diag, "not a directory"), "no message: '%s'", diag ? diag : "");
    CHECK(!temporaries(work), "temporaries left after a refusal");

    /* DIR under a file: cannot be created, nothing left. */
    snprintf(dir, sizeof dir, "%s/afile/sub", work);
    CHECK(!emit(g, &p, dir, &cap), "emit under a file succeeded");
    fclose(cap);
    CHECK(diag_len && strstr(diag, "cannot create"), "no message: '%s'", diag ? diag : "");

    /* A plan it cannot execute: the heads split over 3 ranks. */
    Plan bad = p;
    bad.strategy = ir_alloc(a, sizeof *bad.strategy * (size_t)g->nfwd);
    memcpy(bad.strategy, p.strategy, sizeof *bad.strategy * (size_t)g->nfwd);
    plan_mesh_make(&bad.mesh, 1, 3, 8);
    snprintf(dir, sizeof dir, "%s/bad", work);
    CHECK(!emit(g, &bad, dir, &cap), "an impossible plan was accepted");
    fclose(cap);
    CHECK(diag_len && strstr(diag, "cannot execute"), "no message: '%s'", diag ? diag : "");
    CHECK(!exists(dir), "a refused plan left %s", dir);
    CHECK(!temporaries(work), "temporaries left after a bad plan");

    /* Micro-batches that do not make the global batch. */
    bad = p;
    bad.num_micro = 3;
    CHECK(!emit(g, &bad, dir, &cap), "a wrong micro-batch count was accepted");
    fclose(cap);
    CHECK(diag_len && strstr(diag, "global batch"), "no message: '%s'", diag ? diag : "");
    CHECK(!exists(dir), "a refused plan left %s", dir);

    free(diag);
    ir_graph_free(g);
    ir_arena_free(a);
    if (fails)
        fprintf(stderr, "test_cg_api: %d failures\n", fails);
    return fails != 0;
}
