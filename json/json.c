/* json.c: strict recursive-descent JSON parser (rules in json.h). It calls
 * only the C library: running out of memory is an error returned like any
 * other, so the compiler and the runtime each report it their own way. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

/* The decoded strings and number literals of one document, packed into
 * chunks freed with it: a value costs its node and its bytes, not a
 * malloc of its own (a 40 MB array of numbers once took 1.9 GB). */
typedef struct Chunk {
    struct Chunk *next;
    size_t used, cap;
    char data[];
} Chunk;

/* The root as allocated: json_free finds the chunks behind it. */
typedef struct {
    JsonValue root;
    Chunk *chunks;
} Doc;

typedef struct {
    const unsigned char *s;
    size_t len, pos;
    int depth;
    char *err;
    size_t errlen;
    bool failed;
    int max_array;                /* elements an array may hold (0: any) */
    Chunk **chunks;               /* the document's */
    char *scratch;                /* a string being decoded */
    size_t scratch_cap;
} Parser;

static bool fail(Parser *p, const char *msg)
{
    if (!p->failed && p->err && p->errlen)
        snprintf(p->err, p->errlen, "at byte %zu: %s", p->pos, msg);
    p->failed = true;
    return false;
}

/* n bytes of src, NUL-terminated, kept with the document. */
static char *keep(Parser *p, const void *src, size_t n)
{
    Chunk *c = *p->chunks;
    if (!c || c->cap - c->used < n + 1) {
        size_t cap = n + 1 > 65536 - sizeof(Chunk) ? n + 1 : 65536 - sizeof(Chunk);
        Chunk *nc = malloc(sizeof(Chunk) + cap);
        if (!nc) {
            fail(p, "out of memory");
            return NULL;
        }
        nc->used = 0, nc->cap = cap;
        /* A large string gets a chunk of its own behind the current one,
         * which keeps its free space. */
        if (c && n + 1 > 65536 - sizeof(Chunk)) {
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            *p->chunks = nc;
        }
        c = nc;
    }
    char *d = c->data + c->used;
    memcpy(d, src, n);
    d[n] = 0;
    c->used += n + 1;
    return d;
}

/* A growing NUL-terminated string (a string's decoded bytes). */
typedef struct {
    char *s;
    size_t len, cap;
} Buf;

static bool add(Parser *p, Buf *b, const void *src, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns)
            return fail(p, "out of memory");
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, src, n);
    b->len += n;
    b->s[b->len] = 0;
    return true;
}

static void skip_ws(Parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static bool literal(Parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return fail(p, "invalid literal");
    p->pos += n;
    return true;
}

static bool put_utf8(Parser *p, Buf *b, uint32_t cp)
{
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | (cp >> 6));
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | (cp >> 12));
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | (cp >> 18));
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return add(p, b, u, n);
}

static bool hex4(Parser *p, uint32_t *out)
{
    if (p->len - p->pos < 4)
        return fail(p, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->s[p->pos + (size_t)i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return fail(p, "invalid \\u escape");
        v = v * 16 + (uint32_t)d;
    }
    p->pos += 4;
    *out = v;
    return true;
}

/* One UTF-8 sequence starting at p->pos (first byte >= 0x80): well-formed,
 * shortest form, no surrogates, at most U+10FFFF. */
static bool utf8_seq(Parser *p, Buf *b)
{
    const unsigned char *s = p->s + p->pos;
    size_t left = p->len - p->pos;
    unsigned char c = s[0];
    size_t n;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, cp = c & 0x07, min = 0x10000;
    else
        return fail(p, "invalid UTF-8");
    if (left < n)
        return fail(p, "truncated UTF-8 sequence");
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return fail(p, "invalid UTF-8");
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return fail(p, "invalid UTF-8");
    if (!add(p, b, s, n))
        return false;
    p->pos += n;
    return true;
}

static bool decode(Parser *p, Buf *bp);

static bool string(Parser *p, char **out, size_t *outlen)
{
    Buf b = {p->scratch, 0, p->scratch_cap};
    bool ok = decode(p, &b);
    p->scratch = b.s, p->scratch_cap = b.cap; /* reused by the next string */
    if (!ok)
        return false;
    *outlen = b.len;
    return (*out = keep(p, b.s, b.len)) != NULL;
}

/* The string at p->pos (its opening quote) decoded into b. */
static bool decode(Parser *p, Buf *bp)
{
    Buf b = *bp;
    if (!add(p, &b, "", 0))
        return false;
    p->pos++; /* opening quote */
    for (;;) {
        if (p->pos >= p->len) {
            *bp = b;
            return fail(p, "unterminated string");
        }
        unsigned char c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) {
            *bp = b;
            return fail(p, "control character in string");
        }
        if (c >= 0x80) {
            if (!utf8_seq(p, &b)) {
                *bp = b;
                return false;
            }
            continue;
        }
        if (c != '\\') {
            if (!add(p, &b, &c, 1)) {
                *bp = b;
                return false;
            }
            p->pos++;
            continue;
        }
        p->pos++;
        if (p->pos >= p->len) {
            *bp = b;
            return fail(p, "unterminated string");
        }
        char e = (char)p->s[p->pos++];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            if (!add(p, &b, &map[simple - "\"\\/bfnrt"], 1)) {
                *bp = b;
                return false;
            }
            continue;
        }
        if (e != 'u') {
            p->pos--;
            *bp = b;
            return fail(p, "invalid escape in string");
        }
        uint32_t cp;
        if (!hex4(p, &cp)) {
            *bp = b;
            return false;
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            *bp = b;
            return fail(p, "unpaired low surrogate");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                *bp = b;
                return fail(p, "unpaired high surrogate");
            }
            p->pos += 2;
            if (!hex4(p, &lo)) {
                *bp = b;
                return false;
            }
            if (lo < 0xDC00 || lo > 0xDFFF) {
                *bp = b;
                return fail(p, "unpaired high surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (!put_utf8(p, &b, cp)) {
            *bp = b;
            return false;
        }
    }
    *bp = b;
    return true;
}

static bool digits(Parser *p)
{
    size_t start = p->pos;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
        p->pos++;
    return p->pos > start;
}

static bool number(Parser *p, JsonValue *v)
{
    size_t start = p->pos;
    if (p->s[p->pos] == '-')
        p->pos++;
    if (p->pos < p->len && p->s[p->pos] == '0') {
        p->pos++;
        if (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            return fail(p, "leading zero in number");
    } else if (!digits(p)) {
        return fail(p, "invalid number");
    }
    if (p->pos < p->len && p->s[p->pos] == '.') {
        p->pos++;
        if (!digits(p))
            return fail(p, "invalid number: digits must follow '.'");
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
            p->pos++;
        if (!digits(p))
            return fail(p, "invalid number: digits must follow the exponent");
    }
    v->kind = JSON_NUMBER;
    v->len = p->pos - start;
    return (v->text = keep(p, p->s + start, v->len)) != NULL;
}

static bool value(Parser *p, JsonValue *v);

/* Room for one more member; false (failed) when out of memory or past
 * the caller's limit on an array's elements. */
static bool grow(Parser *p, JsonValue *v, int *cap, bool keys)
{
    if (!keys && p->max_array > 0 && v->n >= p->max_array) {
        char msg[96];
        snprintf(msg, sizeof msg, "an array of more than %d elements", p->max_array);
        return fail(p, msg);
    }
    if (v->n == INT32_MAX)
        return fail(p, "more than 2^31 elements in an array or object");
    if (v->n < *cap)
        return true;
    int ncap = !*cap ? 4 : *cap > INT32_MAX / 2 ? INT32_MAX : *cap * 2;
    JsonValue *items = realloc(v->items, (size_t)ncap * sizeof *items);
    if (!items)
        return fail(p, "out of memory");
    v->items = items;
    if (keys) {
        char **k = realloc(v->keys, (size_t)ncap * sizeof *k);
        if (!k)
            return fail(p, "out of memory");
        v->keys = k;
        size_t *kl = realloc(v->key_lens, (size_t)ncap * sizeof *kl);
        if (!kl)
            return fail(p, "out of memory");
        v->key_lens = kl;
    }
    *cap = ncap;
    return true;
}

/* The members' arrays cut to their count once the value is closed: the
 * doubling's slack is not kept for the document's life. */
static void fit(JsonValue *v)
{
    if (v->n == 0) {
        free(v->items), free(v->keys), free(v->key_lens);
        v->items = NULL, v->keys = NULL, v->key_lens = NULL;
        return;
    }
    JsonValue *items = realloc(v->items, (size_t)v->n * sizeof *items);
    if (items)
        v->items = items;
    if (v->keys) {
        char **k = realloc(v->keys, (size_t)v->n * sizeof *k);
        if (k)
            v->keys = k;
        size_t *kl = realloc(v->key_lens, (size_t)v->n * sizeof *kl);
        if (kl)
            v->key_lens = kl;
    }
}

/* An object's keys seen so far, hashed (open addressing, slots hold the
 * member index + 1): the duplicate check is linear in the members, where
 * comparing each key with every earlier one took 64 s for 200k keys. */
typedef struct {
    uint32_t *slot;
    size_t mask;
} KeySet;

static uint64_t key_hash(const char *k, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

static bool keyset_put(Parser *p, KeySet *ks, const JsonValue *v, int i, bool *dup);

static bool keyset_grow(Parser *p, KeySet *ks, const JsonValue *v, int n)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)n + 2)
        cap *= 2;
    free(ks->slot);
    ks->slot = calloc(cap, sizeof *ks->slot);
    if (!ks->slot)
        return fail(p, "out of memory");
    ks->mask = cap - 1;
    bool dup = false;
    for (int i = 0; i < n; i++)
        keyset_put(p, ks, v, i, &dup);
    return true;
}

/* Adds member i's key; *dup when an earlier member has it. */
static bool keyset_put(Parser *p, KeySet *ks, const JsonValue *v, int i, bool *dup)
{
    if (!ks->slot || 2 * (size_t)(i + 1) > ks->mask + 1)
        if (!keyset_grow(p, ks, v, i))
            return false;
    const char *k = v->keys[i];
    size_t n = v->key_lens[i];
    for (size_t h = key_hash(k, n) & ks->mask;; h = (h + 1) & ks->mask) {
        uint32_t j = ks->slot[h];
        if (!j) {
            ks->slot[h] = (uint32_t)i + 1;
            return true;
        }
        if (v->key_lens[j - 1] == n && memcmp(v->keys[j - 1], k, n) == 0) {
            *dup = true;
            return true;
        }
    }
}

static bool array(Parser *p, JsonValue *v)
{
    int cap = 0;
    v->kind = JSON_ARRAY;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
        return true;
    }
    for (;;) {
        if (!grow(p, v, &cap, false))
            return false;
        memset(&v->items[v->n], 0, sizeof v->items[0]);
        v->n++;
        if (!value(p, &v->items[v->n - 1]))
            return false;
        skip_ws(p);
        if (p->pos >= p->len)
            return fail(p, "unterminated array");
        char c = (char)p->s[p->pos++];
        if (c == ']') {
            fit(v);
            return true;
        }
        if (c != ',') {
            p->pos--;
            return fail(p, "expected ',' or ']' in array");
        }
    }
}

static bool members(Parser *p, JsonValue *v, KeySet *ks)
{
    int cap = 0;
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != '"')
            return fail(p, "expected a string key in object");
        if (!grow(p, v, &cap, true))
            return false;
        memset(&v->items[v->n], 0, sizeof v->items[0]);
        v->keys[v->n] = NULL;
        v->key_lens[v->n] = 0;
        v->n++;
        size_t klen;
        size_t kpos = p->pos;
        if (!string(p, &v->keys[v->n - 1], &klen))
            return false;
        v->key_lens[v->n - 1] = klen;
        bool dup = false;
        if (v->n <= 8) { /* small objects: no table */
            for (int i = 0; i < v->n - 1; i++)
                dup |= v->key_lens[i] == klen && memcmp(v->keys[i], v->keys[v->n - 1], klen) == 0;
        } else if (!keyset_put(p, ks, v, v->n - 1, &dup)) {
            return false;
        }
        if (dup) {
            p->pos = kpos;
            return fail(p, "duplicate key in object");
        }
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ':')
            return fail(p, "expected ':' after object key");
        p->pos++;
        if (!value(p, &v->items[v->n - 1]))
            return false;
        skip_ws(p);
        if (p->pos >= p->len)
            return fail(p, "unterminated object");
        char c = (char)p->s[p->pos++];
        if (c == '}')
            return true;
        if (c != ',') {
            p->pos--;
            return fail(p, "expected ',' or '}' in object");
        }
    }
}

static bool object(Parser *p, JsonValue *v)
{
    v->kind = JSON_OBJECT;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
        return true;
    }
    KeySet ks = {NULL, 0};
    bool ok = members(p, v, &ks);
    free(ks.slot);
    if (ok)
        fit(v);
    return ok;
}

static bool value(Parser *p, JsonValue *v)
{
    skip_ws(p);
    if (p->pos >= p->len)
        return fail(p, "unexpected end of text");
    if (p->depth >= JSON_MAX_DEPTH)
        return fail(p, "nesting deeper than 64");
    bool ok;
    switch (p->s[p->pos]) {
    case '{':
        p->depth++;
        ok = object(p, v);
        p->depth--;
        return ok;
    case '[':
        p->depth++;
        ok = array(p, v);
        p->depth--;
        return ok;
    case '"':
        v->kind = JSON_STRING;
        return string(p, &v->text, &v->len);
    case 't':
        v->kind = JSON_BOOL;
        v->boolean = true;
        return literal(p, "true");
    case 'f':
        v->kind = JSON_BOOL;
        return literal(p, "false");
    case 'n':
        v->kind = JSON_NULL;
        return literal(p, "null");
    default:
        if (p->s[p->pos] == '-' || (p->s[p->pos] >= '0' && p->s[p->pos] <= '9'))
            return number(p, v);
        return fail(p, "unexpected character");
    }
}

static void free_inner(JsonValue *v)
{
    for (int i = 0; i < v->n; i++)
        free_inner(&v->items[i]);
    free(v->items);
    free(v->keys);
    free(v->key_lens);
}

void json_free(JsonValue *v)
{
    if (!v)
        return;
    Doc *d = (Doc *)v; /* json_parse's root is a Doc's first member */
    free_inner(&d->root);
    for (Chunk *c = d->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(d);
}

JsonValue *json_parse_limited(const char *text, size_t len, int max_array, char *err, size_t errlen)
{
    Parser p = {(const unsigned char *)text, len, 0, 0, err, errlen, false, max_array, NULL, NULL, 0};
    Doc *d = calloc(1, sizeof *d);
    if (!d) {
        fail(&p, "out of memory");
        return NULL;
    }
    p.chunks = &d->chunks;
    if (value(&p, &d->root)) {
        skip_ws(&p);
        if (p.pos != p.len)
            fail(&p, "text after the JSON value");
    }
    free(p.scratch);
    if (p.failed) {
        json_free(&d->root);
        return NULL;
    }
    return &d->root;
}

JsonValue *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    return json_parse_limited(text, len, 0, err, errlen);
}

const JsonValue *json_get(const JsonValue *obj, const char *key)
{
    if (!obj || obj->kind != JSON_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (int i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == n && memcmp(obj->keys[i], key, n) == 0)
            return &obj->items[i];
    return NULL;
}

int json_uint(const JsonValue *v, int64_t *out)
{
    if (!v || v->kind != JSON_NUMBER || v->len == 0 || v->len > 19)
        return -1;
    uint64_t x = 0; /* 19 digits cannot overflow 64 bits */
    for (size_t i = 0; i < v->len; i++) {
        char c = v->text[i];
        if (c < '0' || c > '9')
            return -1;
        x = x * 10 + (uint64_t)(c - '0');
    }
    if (x > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)x;
    return 0;
}
