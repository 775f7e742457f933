/* diag.c: user-facing diagnostics in the chibicc/clang form:
 *   models/x.mdl:3:14: error: unknown dimension 'd_mdl'
 *       x : bf16[batch, seq, d_mdl]
 *                            ^
 */
#include "ir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SOURCES 64
#define MAX_ERRORS 50

static struct {
    const char *path, *text;
    size_t len;
} sources[MAX_SOURCES];
static int nsources;
static int nerrors;
static FILE *stream;

void ir_source_add(const char *path, const char *text, size_t len)
{
    if (nsources == MAX_SOURCES)
        return; /* quoting is a courtesy; the message still prints */
    sources[nsources].path = path;
    sources[nsources].text = text;
    sources[nsources].len = len;
    nsources++;
}

void ir_diag_reset(void)
{
    nsources = 0;
    nerrors = 0;
}

FILE *ir_diag_set_stream(FILE *f)
{
    FILE *old = stream ? stream : stderr;
    stream = f;
    return old;
}

int ir_error_count(void) { return nerrors; }

/* Print the source line of loc and a caret under its column. Long lines are
 * cut to a window around the column so a 10 MB line prints as one screen. */
static void quote(FILE *f, IrLoc loc)
{
    if (!loc.file || loc.line <= 0)
        return;
    for (int i = nsources - 1; i >= 0; i--) {
        if (strcmp(sources[i].path, loc.file) != 0)
            continue;
        const char *p = sources[i].text, *end = p + sources[i].len;
        for (int line = 1; line < loc.line && p < end; p++)
            if (*p == '\n')
                line++;
        const char *eol = p;
        while (eol < end && *eol != '\n')
            eol++;
        long len = eol - p, col = loc.col > 0 ? loc.col - 1 : 0;
        if (col > len)
            col = len;
        long from = 0, to = len;
        if (len > 120) {
            from = col > 60 ? col - 60 : 0;
            to = from + 120 < len ? from + 120 : len;
        }
        fputs("    ", f);
        for (long k = from; k < to; k++) {
            unsigned char c = (unsigned char)p[k];
            fputc(c == '\t' ? ' ' : (c < 32 || c == 127) ? '?' : c, f);
        }
        fputs("\n    ", f);
        for (long k = from; k < col; k++)
            fputc(' ', f);
        fputs("^\n", f);
        return;
    }
}

/* Write a whole diagnostic (its line, the quoted source, the caret) with one
 * write() when it goes to stderr, so the lines of several processes sharing
 * the stream never run together. */
static void put(FILE *f, const char *text, size_t len)
{
    if (f != stderr) {
        fwrite(text, 1, len, f);
        return;
    }
    fflush(stderr);
    for (size_t done = 0; done < len;) {
        ssize_t w = write(fileno(stderr), text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        done += (size_t)w;
    }
}

static void emit(const char *kind, IrLoc loc, const char *fmt, va_list ap)
{
    FILE *f = stream ? stream : stderr;
    fflush(stdout);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) { /* no memory: print it in pieces rather than not at all */
        m = f;
    }
    if (loc.file && loc.line > 0)
        fprintf(m, "%s:%d:%d: %s: ", loc.file, loc.line, loc.col, kind);
    else if (loc.file)
        fprintf(m, "%s: %s: ", loc.file, kind);
    else
        fprintf(m, "ptdc: %s: ", kind);
    vfprintf(m, fmt, ap);
    fputc('\n', m);
    quote(m, loc);
    if (m != f) {
        fclose(m);
        put(f, text, len);
        free(text);
    }
}

void ir_verror(IrLoc loc, const char *fmt, va_list ap)
{
    nerrors++;
    if (nerrors > MAX_ERRORS)
        return;
    emit("error", loc, fmt, ap);
    if (nerrors == MAX_ERRORS) {
        static const char msg[] = "ptdc: too many errors; stopping\n";
        put(stream ? stream : stderr, msg, sizeof msg - 1);
    }
}

void ir_error(IrLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ir_verror(loc, fmt, ap);
    va_end(ap);
}

void ir_warning(IrLoc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit("warning", loc, fmt, ap);
    va_end(ap);
}

void ir_note(IrLoc loc, const char *fmt, ...)
{
    if (nerrors > MAX_ERRORS)
        return;
    va_list ap;
    va_start(ap, fmt);
    emit("note", loc, fmt, ap);
    va_end(ap);
}
