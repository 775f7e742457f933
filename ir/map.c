/* map.c: a small string -> int hash map with open addressing. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void grow(IrMap *m)
{
    IrMap old = *m;
    m->cap = old.cap ? 2 * old.cap : 64;
    m->n = 0;
    m->keys = ir_xcalloc((size_t)m->cap, sizeof *m->keys);
    m->vals = ir_xcalloc((size_t)m->cap, sizeof *m->vals);
    for (int i = 0; i < old.cap; i++)
        if (old.keys[i])
            ir_map_put(m, old.keys[i], old.vals[i]);
    free(old.keys);
    free(old.vals);
}

void ir_map_put(IrMap *m, const char *key, int val)
{
    if (2 * (m->n + 1) > m->cap)
        grow(m);
    uint32_t mask = (uint32_t)m->cap - 1, i = hash(key) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & mask;
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->n++;
    }
    m->vals[i] = val;
}

bool ir_map_get(const IrMap *m, const char *key, int *val)
{
    if (!m->cap)
        return false;
    uint32_t mask = (uint32_t)m->cap - 1, i = hash(key) & mask;
    while (m->keys[i]) {
        if (strcmp(m->keys[i], key) == 0) {
            if (val)
                *val = m->vals[i];
            return true;
        }
        i = (i + 1) & mask;
    }
    return false;
}

void ir_map_free(IrMap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}
