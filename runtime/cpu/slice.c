/* slice.c: pieces of the last dim and their joining (the .mdl's slice and
 * concat, multi-head latent attention: docs/language.md). Rows are
 * independent, so the rank's threads split them; each output element is
 * written once, by one thread, and the broadcast sum of concat's backward
 * runs in a fixed order (deterministic). */
#include <string.h>

#include "cpu.h"
#include "simd.h"

void rt_slice_fwd(rt_act *y, const rt_act *x, int64_t rows, int64_t cols, int64_t n, int64_t at)
{
    RTCPU_PAR_FOR(rows * n)
    for (int64_t r = 0; r < rows; r++)
        memcpy(y + r * n, x + r * cols + at, sizeof(rt_act) * (size_t)n);
}

void rt_slice_bwd(rt_act *dx, const rt_act *dy, int64_t rows, int64_t cols, int64_t n, int64_t at)
{
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t r = 0; r < rows; r++) {
        rt_act *d = dx + r * cols;
        memset(d, 0, sizeof(rt_act) * (size_t)at);
        memcpy(d + at, dy + r * n, sizeof(rt_act) * (size_t)n);
        memset(d + at + n, 0, sizeof(rt_act) * (size_t)(cols - at - n));
    }
}

void rt_concat_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t outer, int64_t bcast,
                   int64_t inner, int64_t na, int64_t nb)
{
    int64_t rows = outer * bcast * inner;
    RTCPU_PAR_FOR(rows * (na + nb))
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = r / (bcast * inner), i = r % inner;
        memcpy(y + r * (na + nb), a + r * na, sizeof(rt_act) * (size_t)na);
        memcpy(y + r * (na + nb) + na, b + (o * inner + i) * nb, sizeof(rt_act) * (size_t)nb);
    }
}

void rt_concat_bwd(rt_act *da, rt_act *db, const rt_act *dy, int64_t outer, int64_t bcast,
                   int64_t inner, int64_t na, int64_t nb)
{
    int64_t rows = outer * bcast * inner, w = na + nb;
    RTCPU_PAR_FOR(rows * na)
    for (int64_t r = 0; r < rows; r++)
        memcpy(da + r * na, dy + r * w, sizeof(rt_act) * (size_t)na);
    /* db[o, i] = sum over the broadcast copies c of dy[(o, c, i), na:] */
    RTCPU_PAR_FOR(rows * nb)
    for (int64_t ob = 0; ob < outer * inner; ob++) {
        int64_t o = ob / inner, i = ob % inner;
        rt_act *d = db + ob * nb;
        for (int64_t j = 0; j < nb; j++) {
            float s = 0;
            for (int64_t c = 0; c < bcast; c++)
                s += dy[((o * bcast + c) * inner + i) * w + na + j];
            d[j] = s;
        }
    }
}
