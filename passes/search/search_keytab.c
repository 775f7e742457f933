/* search_keytab.c: the search's memos' table (SrcKeyTab, src.h): two-word
 * keys to fixed-width answers, open addressing, the answers in order of
 * arrival. search_nodestates.c and search_nodeprice.c key by the node and
 * an interned context in the first word, the strategy in the second. */
#include "search/src.h"

#include <stdlib.h>

static uint64_t hash_key(const uint64_t *k)
{
    uint64_t h = 0;
    for (int i = 0; i < 2; i++) {
        h ^= k[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
    }
    return h ^ (h >> 31);
}

static void rehash(SrcKeyTab *T)
{
    uint64_t(*old)[2] = T->key;
    uint32_t *oat = T->at;
    size_t ocap = T->cap;
    T->cap = ocap ? 2 * ocap : 1024;
    T->key = ir_xcalloc(T->cap, sizeof *T->key);
    T->at = ir_xmalloc(T->cap * sizeof *T->at);
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i][0])
            continue;
        size_t j = hash_key(old[i]) & (T->cap - 1);
        while (T->key[j][0])
            j = (j + 1) & (T->cap - 1);
        T->key[j][0] = old[i][0], T->key[j][1] = old[i][1];
        T->at[j] = oat[i];
    }
    free(old);
    free(oat);
}

uint64_t src_strategy_word(const PlanStrategy *st)
{
    return (uint64_t)(uint16_t)st->dim[0] | (uint64_t)(uint16_t)st->dim[1] << 16 |
           (uint64_t)(uint16_t)st->dim[2] << 32 | (uint64_t)st->xchg << 48;
}

double *src_keytab_slot(SrcKeyTab *T, const uint64_t k[2], int width, bool *found)
{
    T->asked++;
    if (2 * (T->n + 1) > T->cap)
        rehash(T);
    size_t j = hash_key(k) & (T->cap - 1);
    while (T->key[j][0] && (T->key[j][0] != k[0] || T->key[j][1] != k[1]))
        j = (j + 1) & (T->cap - 1);
    if (T->key[j][0]) {
        T->hits++;
        *found = true;
        return &T->vals[(size_t)T->at[j] * (size_t)width];
    }
    if (T->n == T->capvals) {
        T->capvals = T->capvals ? 2 * T->capvals : 1024;
        T->vals = ir_xrealloc(T->vals, sizeof(double) * (size_t)width * T->capvals);
    }
    T->key[j][0] = k[0], T->key[j][1] = k[1];
    T->at[j] = (uint32_t)T->n;
    *found = false;
    return &T->vals[T->n++ * (size_t)width];
}

void src_keytab_free(SrcKeyTab *T)
{
    free(T->key);
    free(T->at);
    free(T->vals);
    *T = (SrcKeyTab){0};
}
