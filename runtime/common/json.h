/* json.h: a small strict JSON (RFC 8259) parser for safetensors headers.
 * Strict: no comments, trailing commas, leading zeros, raw control
 * characters, invalid escapes, unpaired surrogates, invalid UTF-8 or
 * duplicate object keys; nesting at most 64 deep; nothing after the value
 * but whitespace. */
#ifndef PTDRT_JSON_H
#define PTDRT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { RTJ_NULL, RTJ_BOOL, RTJ_NUMBER, RTJ_STRING, RTJ_ARRAY, RTJ_OBJECT } RtjKind;

typedef struct RtjValue RtjValue;
struct RtjValue {
    RtjKind kind;
    bool boolean;
    char *text;       /* STRING: decoded UTF-8 (NUL-terminated; may hold NULs, see len);
                         NUMBER: the literal as written */
    size_t len;       /* STRING: decoded length in bytes */
    int n;            /* ARRAY, OBJECT: element count */
    RtjValue *items;  /* ARRAY, OBJECT: elements (values) */
    char **keys;      /* OBJECT: keys, decoded */
    size_t *key_lens;
};

/* Parse text[0, len). Returns a tree the caller frees with rtj_free, or NULL
 * with a sentence in err ("at byte N: ..."). */
RtjValue *rtj_parse(const char *text, size_t len, char *err, size_t errlen);
void rtj_free(RtjValue *v);
/* The member `key` of an object, or NULL. */
const RtjValue *rtj_get(const RtjValue *obj, const char *key);
/* A NUMBER that is a non-negative integer literal below 2^63: 0 and *out. */
int rtj_uint(const RtjValue *v, int64_t *out);

#endif
