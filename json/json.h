/* json.h: a small strict JSON (RFC 8259) parser (prefix json_), below both
 * sides of ptdc: the compiler's frontend reads Hugging Face config.json with
 * it, the runtime safetensors headers, shard indexes and checkpoint
 * manifests. It depends on nothing but the C library and never exits: every
 * error, running out of memory included, is returned to the caller.
 * Strict: no comments, trailing commas, leading zeros, raw control
 * characters, invalid escapes, unpaired surrogates, invalid UTF-8 or
 * duplicate object keys; nesting at most 64 deep; nothing after the value
 * but whitespace. */
#ifndef PTDC_JSON_H
#define PTDC_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonKind;

typedef struct JsonValue JsonValue;
struct JsonValue {
    JsonKind kind;
    bool boolean;
    char *text;       /* STRING: decoded UTF-8 (NUL-terminated; may hold NULs, see len);
                         NUMBER: the literal as written */
    size_t len;       /* STRING: decoded length in bytes */
    int n;            /* ARRAY, OBJECT: element count */
    JsonValue *items;  /* ARRAY, OBJECT: elements (values) */
    char **keys;      /* OBJECT: keys, decoded */
    size_t *key_lens;
};

/* Parse text[0, len). Returns a tree the caller frees with json_free, or NULL
 * with a sentence in err ("at byte N: ...", "at byte N: out of memory"). */
JsonValue *json_parse(const char *text, size_t len, char *err, size_t errlen);
/* The same, refusing an array of more than max_array elements (0: any) as
 * soon as it reaches one: a reader whose format has only short arrays
 * (safetensors: shapes, offsets) bounds its memory by that, not by the
 * input's size. Memory: about 60 bytes a value plus its text; the parse is
 * linear in the input. */
JsonValue *json_parse_limited(const char *text, size_t len, int max_array, char *err,
                              size_t errlen);
void json_free(JsonValue *v);
/* The member `key` of an object, or NULL. */
const JsonValue *json_get(const JsonValue *obj, const char *key);
/* A NUMBER that is a non-negative integer literal below 2^63: 0 and *out. */
int json_uint(const JsonValue *v, int64_t *out);

#endif
