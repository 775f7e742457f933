/* arena.c: bump allocation for one compilation, and die-on-failure malloc. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct Chunk {
    struct Chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
} Chunk;

struct IrArena {
    Chunk *head;
    size_t total;
};

_Noreturn void ir_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fprintf(stderr, "ptdc: internal error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

void *ir_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "ptdc: out of memory allocating %zu bytes\n", n);
        exit(1);
    }
    return p;
}

void *ir_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "ptdc: out of memory allocating %zu x %zu bytes\n", n, size);
        exit(1);
    }
    return p;
}

void *ir_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "ptdc: out of memory allocating %zu bytes\n", n);
        exit(1);
    }
    return q;
}

char *ir_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(ir_xmalloc(n), s, n);
}

IrArena *ir_arena_new(void) { return ir_xcalloc(1, sizeof(IrArena)); }

void ir_arena_free(IrArena *a)
{
    if (!a)
        return;
    for (Chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

void *ir_alloc(IrArena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    Chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > (1u << 16) ? n : (1u << 16);
        c = ir_xmalloc(sizeof(Chunk) + size);
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->total += n;
    memset(p, 0, n);
    return p;
}

char *ir_strndup(IrArena *a, const char *s, size_t n)
{
    char *p = ir_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *ir_strdup(IrArena *a, const char *s) { return ir_strndup(a, s, strlen(s)); }

char *ir_sprintf(IrArena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        ir_die("ir_sprintf: bad format '%s'", fmt);
    char *p = ir_alloc(a, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

size_t ir_arena_bytes(const IrArena *a) { return a->total; }
