/* load.c: reading .mdl files and following their imports.
 *
 * A file is checked to be UTF-8 text before the scanner sees it, so binary
 * garbage gets one located error instead of thousands. Imports resolve
 * relative to the importing file's directory, depth first, so files come out
 * in dependency order (what a file imports precedes it). A file reached twice
 * (a diamond) is read once; reaching a file that is still being read is a
 * circular import, reported with the whole chain. */
#include "fe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct Loader {
    IrArena *keep, *tmp;
    VEC(FeFile *) files;   /* dependency order */
    VEC(const char *) stack; /* keys of the files being read, outermost first */
    VEC(const char *) shown; /* their paths as shown */
    IrMap done;            /* key -> index in files */
} Loader;

/* First problem that makes `text` not a .mdl source: a NUL byte, a control
 * character other than tab, CR and LF, or a byte sequence that is not UTF-8. */
static bool check_text(const char *path, const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    int line = 1, col = 1;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        IrLoc at = {path, line, col};
        if (c == 0) {
            ir_error(at, "NUL byte in the source; a .mdl file must be text");
            return false;
        }
        if ((c < 32 && c != '\t' && c != '\r' && c != '\n') || c == 127) {
            ir_error(at, "control character 0x%02x in the source; a .mdl file must be text", c);
            return false;
        }
        size_t n = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3
                 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
        bool good = n > 0 && i + n <= len;
        for (size_t k = 1; good && k < n; k++)
            good = (s[i + k] & 0xc0) == 0x80;
        /* Overlong forms, surrogates and code points past U+10FFFF. */
        if (good && n == 3)
            good = !(c == 0xe0 && s[i + 1] < 0xa0) && !(c == 0xed && s[i + 1] >= 0xa0);
        if (good && n == 4)
            good = !(c == 0xf0 && s[i + 1] < 0x90) && !(c == 0xf4 && s[i + 1] >= 0x90);
        if (!good) {
            ir_error(at, "byte 0x%02x is not UTF-8 text; a .mdl file must be UTF-8 text", c);
            return false;
        }
        if (c == '\n') {
            line++;
            col = 1;
        } else {
            col += (int)n; /* columns count bytes, as the scanner's do */
        }
        i += n;
    }
    return true;
}

/* Read a regular file into the keep arena (NUL-terminated). Devices, pipes
 * and directories are refused so an import can never block or stream. */
static char *read_file(IrArena *keep, const char *path, IrLoc from, size_t *len)
{
    FILE *f = ir_open_regular(path, NULL, from); /* never blocks on a FIFO */
    struct stat st;
    if (!f)
        return NULL;
    if (fstat(fileno(f), &st) != 0) {
        ir_error(from, "cannot read '%s': %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    if (st.st_size > FE_MAX_FILE) {
        ir_error(from, "'%s' is %lld bytes; a .mdl file may have at most %d", path,
                 (long long)st.st_size, FE_MAX_FILE);
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    char *text = ir_alloc(keep, n + 1);
    size_t got = fread(text, 1, n, f);
    bool err = ferror(f);
    fclose(f);
    if (err || got != n) {
        ir_error(from, "cannot read '%s': %s", path, err ? strerror(errno) : "it changed while read");
        return NULL;
    }
    text[n] = 0;
    *len = n;
    return text;
}

/* "models/llama.mdl" for `import "llama.mdl"` in models/llama2-7b.mdl. */
static const char *resolve(IrArena *a, const char *importer, const char *name)
{
    const char *slash = strrchr(importer, '/');
    if (name[0] == '/' || !slash)
        return ir_strdup(a, name);
    return ir_sprintf(a, "%.*s/%s", (int)(slash - importer), importer, name);
}

/* Two paths naming one file must be one key (so a cycle through "./a.mdl"
 * and "a.mdl" is seen): the device and inode; a file that does not exist
 * keeps its path. */
static const char *file_key(IrArena *a, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return ir_sprintf(a, "path:%s", path);
    return ir_sprintf(a, "file:%llu:%llu", (unsigned long long)st.st_dev,
                      (unsigned long long)st.st_ino);
}

static bool load(Loader *ld, const char *path, const char *key, const char *text, size_t len,
                 IrLoc from);

static bool load_imports(Loader *ld, FeFile *f)
{
    bool ok = true;
    for (int i = 0; i < f->nimports; i++) {
        const FeImport *im = &f->imports[i];
        if (!im->path[0]) {
            ir_error(im->loc, "import of an empty path");
            ok = false;
            continue;
        }
        const char *path = resolve(ld->keep, f->path, im->path);
        const char *key = file_key(ld->tmp, path);
        int at;
        if (ir_map_get(&ld->done, key, &at))
            continue; /* already read through another import */
        int open = -1;
        for (int k = 0; k < ld->stack.n; k++)
            if (strcmp(ld->stack.v[k], key) == 0)
                open = k;
        if (open >= 0) {
            char chain[1024];
            size_t n = 0;
            for (int k = open; k < ld->shown.n && n < sizeof chain; k++)
                n += (size_t)snprintf(chain + n, sizeof chain - n, "%s -> ", ld->shown.v[k]);
            if (n < sizeof chain)
                snprintf(chain + n, sizeof chain - n, "%s", path);
            ir_error(im->loc, "circular import: %s", chain);
            ok = false;
            continue;
        }
        if (ld->stack.n >= FE_MAX_IMPORT_DEPTH) {
            ir_error(im->loc, "imports are chained more than %d deep", FE_MAX_IMPORT_DEPTH);
            ok = false;
            continue;
        }
        ok &= load(ld, path, key, NULL, 0, im->loc);
    }
    return ok;
}

static bool load(Loader *ld, const char *path, const char *key, const char *text, size_t len,
                 IrLoc from)
{
    if (text && len > FE_MAX_FILE) {
        ir_error((IrLoc){path, 0, 0}, "the source is %zu bytes; a .mdl file may have at most %d",
                 len, FE_MAX_FILE);
        return false;
    }
    if (text)
        text = ir_strndup(ld->keep, text, len); /* the caller's buffer may go; quotes need it */
    else if (!(text = read_file(ld->keep, path, from, &len)))
        return false;
    /* A UTF-8 byte-order mark (Windows editors write one) is skipped, as
     * compilers do: it is invisible, so columns count from after it. */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        text += 3, len -= 3;
    /* Registered only once it is known to be text, so quotes never print garbage. */
    if (!check_text(path, text, len))
        return false;
    ir_source_add(path, text, len);

    FeFile *f = ir_alloc(ld->tmp, sizeof *f);
    f->path = path;
    FeParse ps = {.keep = ld->keep, .tmp = ld->tmp, .path = path, .file = f};
    if (!fe_parse(&ps, text, len))
        return false;

    vec_push(ld->stack, key);
    vec_push(ld->shown, path);
    bool ok = load_imports(ld, f);
    ld->stack.n--;
    ld->shown.n--;
    ir_map_put(&ld->done, key, ld->files.n);
    vec_push(ld->files, f);
    return ok;
}

/* The one model body of the program (NULL if none); a second is an error
 * naming both. */
static const FeFile *find_model(const Loader *ld, bool *ok)
{
    const FeFile *model = NULL;
    for (int i = 0; i < ld->files.n; i++) {
        const FeFile *f = ld->files.v[i];
        if (!f->has_model)
            continue;
        if (model) {
            ir_error(f->model_loc, "a second model body ('%s'); the program already has model '%s'",
                     f->model_name, model->model_name);
            ir_note(model->model_loc, "model '%s' is defined here", model->model_name);
            *ok = false;
            continue;
        }
        model = f;
    }
    return model;
}

bool fe_load(IrArena *keep, IrArena *tmp, const char *path, const char *text, size_t len,
             FeProgram *prog)
{
    Loader ld = {.keep = keep, .tmp = tmp};
    memset(prog, 0, sizeof *prog);
    const char *shown = ir_strdup(keep, path);
    bool ok = load(&ld, shown, file_key(tmp, shown), text, len, IR_NOLOC);
    if (ok)
        prog->model_file = find_model(&ld, &ok);
    prog->nfiles = ld.files.n;
    prog->files = ir_alloc(tmp, sizeof(FeFile *) * (size_t)(ld.files.n + 1));
    if (ld.files.n)
        memcpy(prog->files, ld.files.v, sizeof(FeFile *) * (size_t)ld.files.n);
    vec_free(ld.files);
    vec_free(ld.stack);
    vec_free(ld.shown);
    ir_map_free(&ld.done);
    return ok;
}

void fe_program_free(FeProgram *prog) { memset(prog, 0, sizeof *prog); }
