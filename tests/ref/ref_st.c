/* ref_st.c: safetensors files in and out for the reference, written here
 * (not the runtime's reader) so the reference shares no code with what it
 * checks. Format: 8-byte little-endian header length, a JSON object
 * {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
 * "__metadata__": {...}}, then the data. Only F32 tensors are read. */
#include "ref.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "ref: out of memory\n");
        exit(1);
    }
    return p;
}

RefSt *ref_st_new(void) { return xmalloc(sizeof(RefSt)); }

RefTensor *ref_st_add(RefSt *st, const char *name, int ndim, const int64_t *shape)
{
    st->t = realloc(st->t, sizeof *st->t * (size_t)(st->n + 1));
    if (!st->t) {
        fprintf(stderr, "ref: out of memory\n");
        exit(1);
    }
    RefTensor *t = &st->t[st->n++];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->ndim = ndim;
    t->n = 1;
    for (int i = 0; i < ndim; i++)
        t->n *= t->shape[i] = shape[i];
    t->v = xmalloc(sizeof(double) * (size_t)t->n);
    return t;
}

RefTensor *ref_st_find(const RefSt *st, const char *name)
{
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->t[i].name, name))
            return &st->t[i];
    return NULL;
}

RefSt *ref_st_zeros_like(const RefSt *st)
{
    RefSt *z = ref_st_new();
    for (int i = 0; i < st->n; i++)
        ref_st_add(z, st->t[i].name, st->t[i].ndim, st->t[i].shape);
    return z;
}

void ref_st_free(RefSt *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n; i++) {
        free(st->t[i].name);
        free(st->t[i].v);
    }
    free(st->t);
    free(st);
}

/* ------------------------------------------------------------ reading */
typedef struct {
    const char *p, *end, *path;
    bool bad;
} Js;

static void ws(Js *j)
{
    while (j->p < j->end && isspace((unsigned char)*j->p))
        j->p++;
}

static bool eat(Js *j, char c)
{
    ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return true;
    }
    j->bad = true;
    return false;
}

static bool peek(Js *j, char c)
{
    ws(j);
    return j->p < j->end && *j->p == c;
}

/* A string without escapes (the names here have none), or NULL. */
static char *string(Js *j)
{
    if (!eat(j, '"'))
        return NULL;
    const char *b = j->p;
    while (j->p < j->end && *j->p != '"') {
        if (*j->p == '\\')
            j->p++;
        j->p++;
    }
    if (j->p >= j->end) {
        j->bad = true;
        return NULL;
    }
    char *s = strndup(b, (size_t)(j->p - b));
    j->p++;
    return s;
}

static void skip_value(Js *j)
{
    ws(j);
    if (j->p >= j->end) {
        j->bad = true;
        return;
    }
    if (*j->p == '"') {
        free(string(j));
    } else if (*j->p == '{' || *j->p == '[') {
        char close = *j->p == '{' ? '}' : ']';
        j->p++;
        if (peek(j, close)) {
            j->p++;
            return;
        }
        do {
            if (close == '}') {
                free(string(j));
                eat(j, ':');
            }
            skip_value(j);
        } while (!j->bad && peek(j, ',') && eat(j, ','));
        eat(j, close);
    } else {
        while (j->p < j->end && !strchr(",}] \t\r\n", *j->p))
            j->p++;
    }
}

static int ints(Js *j, int64_t *out, int max)
{
    int n = 0;
    eat(j, '[');
    if (peek(j, ']')) {
        j->p++;
        return 0;
    }
    do {
        ws(j);
        char *e;
        long long v = strtoll(j->p, &e, 10);
        if (e == j->p || n == max) {
            j->bad = true;
            return n;
        }
        j->p = e;
        out[n++] = v;
    } while (peek(j, ',') && eat(j, ','));
    eat(j, ']');
    return n;
}

RefSt *ref_st_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ref: cannot open %s\n", path);
        return NULL;
    }
    unsigned char h8[8];
    uint64_t hlen = 0;
    if (fread(h8, 1, 8, f) != 8) {
        fprintf(stderr, "ref: %s: no header\n", path);
        fclose(f);
        return NULL;
    }
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | h8[i];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    if (hlen > (uint64_t)size - 8) {
        fprintf(stderr, "ref: %s: header length %llu past the end\n", path, (unsigned long long)hlen);
        fclose(f);
        return NULL;
    }
    char *buf = xmalloc((size_t)size);
    fseek(f, 0, SEEK_SET);
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "ref: %s: short read\n", path);
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    const char *data = buf + 8 + hlen;
    size_t dlen = (size_t)size - 8 - hlen;
    Js j = {buf + 8, buf + 8 + hlen, path, false};
    RefSt *st = ref_st_new();
    eat(&j, '{');
    while (!j.bad && !peek(&j, '}')) {
        char *name = string(&j);
        eat(&j, ':');
        if (!name || !strcmp(name, "__metadata__")) {
            skip_value(&j);
        } else {
            char *dtype = NULL;
            int64_t shape[4] = {0}, off[2] = {-1, -1};
            int ndim = -1;
            eat(&j, '{');
            while (!j.bad && !peek(&j, '}')) {
                char *k = string(&j);
                eat(&j, ':');
                if (k && !strcmp(k, "dtype"))
                    dtype = string(&j);
                else if (k && !strcmp(k, "shape"))
                    ndim = ints(&j, shape, 4);
                else if (k && !strcmp(k, "data_offsets"))
                    ints(&j, off, 2);
                else
                    skip_value(&j);
                free(k);
                if (peek(&j, ','))
                    eat(&j, ',');
            }
            eat(&j, '}');
            if (!j.bad) {
                RefTensor *t = ref_st_add(st, name, ndim < 0 ? 0 : ndim, shape);
                if (!dtype || strcmp(dtype, "F32") || ndim < 0 || off[0] < 0 ||
                    (size_t)off[1] > dlen || off[1] - off[0] != 4 * t->n) {
                    fprintf(stderr, "ref: %s: tensor %s is not F32 of its shape\n", path, name);
                    j.bad = true;
                } else {
                    for (int64_t i = 0; i < t->n; i++) {
                        float x;
                        const unsigned char *b = (const unsigned char *)data + off[0] + 4 * i;
                        uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                     (uint32_t)b[3] << 24;
                        memcpy(&x, &u, 4);
                        t->v[i] = x;
                    }
                }
            }
            free(dtype);
        }
        free(name);
        if (peek(&j, ','))
            eat(&j, ',');
    }
    free(buf);
    if (j.bad) {
        fprintf(stderr, "ref: %s: malformed header\n", path);
        ref_st_free(st);
        return NULL;
    }
    return st;
}

/* ------------------------------------------------------------ writing */
static int by_name(const void *a, const void *b)
{
    return strcmp((*(const RefTensor *const *)a)->name, (*(const RefTensor *const *)b)->name);
}

bool ref_st_write(const char *path, const RefSt *st)
{
    const RefTensor **order = xmalloc(sizeof *order * (size_t)(st->n + 1));
    for (int i = 0; i < st->n; i++)
        order[i] = &st->t[i];
    qsort(order, (size_t)st->n, sizeof *order, by_name);
    size_t cap = 256 + (size_t)st->n * 256, len = 0;
    char *h = xmalloc(cap);
    int64_t off = 0;
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < st->n; i++) {
        const RefTensor *t = order[i];
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[", t->name);
        for (int d = 0; d < t->ndim; d++)
            len += (size_t)snprintf(h + len, cap - len, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%lld,%lld]}", (long long)off,
                                (long long)(off + 4 * t->n));
        off += 4 * t->n;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8)
        h[len++] = ' ';
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL;
    unsigned char h8[8];
    for (int i = 0; i < 8; i++)
        h8[i] = (unsigned char)((uint64_t)len >> (8 * i));
    ok = ok && fwrite(h8, 1, 8, f) == 8 && fwrite(h, 1, len, f) == len;
    for (int i = 0; ok && i < st->n; i++)
        for (int64_t e = 0; ok && e < order[i]->n; e++) {
            float x = (float)order[i]->v[e];
            uint32_t u;
            memcpy(&u, &x, 4);
            unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                                  (unsigned char)(u >> 24)};
            ok = fwrite(b, 1, 4, f) == 4;
        }
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        fprintf(stderr, "ref: cannot write %s\n", path);
    free(h);
    free(order);
    return ok;
}
