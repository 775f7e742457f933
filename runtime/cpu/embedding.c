/* embedding.c: vocabulary-parallel embedding. A rank holds table rows
 * [vocab_offset, vocab_offset + vocab_local); ids elsewhere give zero rows,
 * so summing the outputs over the vocabulary group gives the full lookup.
 * The kernel does not know the whole vocabulary, so it can only refuse
 * negative ids; ids >= vocab are refused where tokens enter (rt_data) and by
 * the cross-entropy's ownership count. */
#include <string.h>

#include "cpu.h"

void rt_embedding_fwd(rt_act *out, const int32_t *ids, const rt_act *table, int64_t n,
                      int64_t vocab_local, int64_t vocab_offset, int64_t dim)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        if (id < 0)
            rt_fatal("rt_embedding_fwd: token id %lld at position %lld is negative", (long long)id,
                     (long long)i);
        int64_t row = id - vocab_offset;
        if (row >= 0 && row < vocab_local)
            memcpy(out + i * dim, table + row * dim, (size_t)dim * sizeof *out);
        else
            memset(out + i * dim, 0, (size_t)dim * sizeof *out);
    }
}

/* Rows accumulate in token order, so repeated ids sum deterministically. */
void rt_embedding_bwd(rt_grad *dtable, const int32_t *ids, const rt_act *dout, int64_t n,
                      int64_t vocab_local, int64_t vocab_offset, int64_t dim)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        if (id < 0)
            rt_fatal("rt_embedding_bwd: token id %lld at position %lld is negative", (long long)id,
                     (long long)i);
        int64_t row = id - vocab_offset;
        if (row < 0 || row >= vocab_local)
            continue;
        rt_act *d = dtable + row * dim;
        const rt_act *g = dout + i * dim;
        for (int64_t j = 0; j < dim; j++)
            d[j] += g[j];
    }
}
