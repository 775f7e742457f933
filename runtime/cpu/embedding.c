/* embedding.c: vocabulary-parallel embedding. A rank holds table rows
 * [vocab_offset, vocab_offset + vocab_local); ids elsewhere give zero rows,
 * so summing the outputs over the vocabulary group gives the full lookup.
 * The kernel does not know the whole vocabulary, so it can only refuse
 * negative ids; ids >= vocab are refused where tokens enter (rt_data) and by
 * the cross-entropy's ownership count. */
#include <string.h>

#include "cpu.h"
#include "simd.h"

void rt_embedding_fwd(rt_act *out, const int32_t *ids, const rt_act *table, int64_t n,
                      int64_t vocab_local, int64_t vocab_offset, int64_t dim)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0)
            rt_fatal("rt_embedding_fwd: token id %lld at position %lld is negative",
                     (long long)ids[i], (long long)i);
    RTCPU_PAR_FOR(n * dim)
    for (int64_t i = 0; i < n; i++) {
        int64_t row = (int64_t)ids[i] - vocab_offset;
        if (row >= 0 && row < vocab_local)
            memcpy(out + i * dim, table + row * dim, (size_t)dim * sizeof *out);
        else
            memset(out + i * dim, 0, (size_t)dim * sizeof *out);
    }
}

/* Columns [lo, lo + len) of every token's row, tokens in order. */
RTCPU_CLONES static void emb_bwd_cols(rt_grad *dtable, const int32_t *ids, const rt_act *dout,
                                      int64_t n, int64_t vocab_local, int64_t vocab_offset,
                                      int64_t dim, int64_t lo, int64_t len)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t row = (int64_t)ids[i] - vocab_offset;
        if (row < 0 || row >= vocab_local)
            continue;
        rt_grad *d = dtable + row * dim + lo;
        const rt_act *g = dout + i * dim + lo;
        RTCPU_SIMD
        for (int64_t j = 0; j < len; j++)
            d[j] += g[j];
    }
}

/* Rows accumulate in token order, so repeated ids sum deterministically; the
 * threads split the columns (blocks of 64), never the tokens. */
void rt_embedding_bwd(rt_grad *dtable, const int32_t *ids, const rt_act *dout, int64_t n,
                      int64_t vocab_local, int64_t vocab_offset, int64_t dim)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0)
            rt_fatal("rt_embedding_bwd: token id %lld at position %lld is negative",
                     (long long)ids[i], (long long)i);
    enum { COLS = 64 };
    int64_t nb = (dim + COLS - 1) / COLS;
    RTCPU_PAR_FOR(n * dim)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * COLS, len = dim - lo < COLS ? dim - lo : COLS;
        emb_bwd_cols(dtable, ids, dout, n, vocab_local, vocab_offset, dim, lo, len);
    }
}
