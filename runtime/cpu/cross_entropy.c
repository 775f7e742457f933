/* cross_entropy.c: vocabulary-parallel cross-entropy. Each rank of
 * vocab_comm holds the logit columns [vocab_offset, vocab_offset +
 * vocab_local); the row max, the sum of exponentials and the target logit are
 * all-reduced (two calls for all rows). The same all-reduce counts the ranks
 * owning each target, which must be exactly one: that is how targets outside
 * the vocabulary are caught without the kernel knowing its size. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"
#include "simd.h"

/* Rows run on the rank's threads; each row's loops are vectorised (simd.h). */
RTCPU_CLONES static float row_max(const rt_act *x, int64_t n)
{
    float m = -INFINITY;
    RTCPU_SIMD_MAX(m)
    for (int64_t j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

/* sum_j e^(x_j - m), in double */
RTCPU_CLONES static double row_sumexp(const rt_act *x, int64_t n, float m)
{
    double s = 0.0;
    RTCPU_SIMD_SUM(s)
    for (int64_t j = 0; j < n; j++)
        s += rtcpu_expf(x[j] - m);
    return s;
}

RTCPU_CLONES static void row_grad(rt_act *d, const rt_act *x, int64_t n, float lse, float scale)
{
    RTCPU_SIMD
    for (int64_t j = 0; j < n; j++)
        d[j] = rtcpu_expf(x[j] - lse) * scale;
}

void rt_cross_entropy_fwd(float *loss, float *lse, const rt_act *logits, const int32_t *targets,
                          int64_t rows, int64_t vocab_local, int64_t vocab_offset,
                          int64_t total_rows, RtComm *vocab_comm)
{
    /* buf: [rows] max, then [rows] sum of exp, [rows] target logit, [rows] owners */
    float *buf = rtcpu_scratch(2, (size_t)(4 * rows + 1) * sizeof *buf);
    float *mx = buf, *sum = buf + rows, *tl = buf + 2 * rows, *own = buf + 3 * rows;
    RTCPU_PAR_FOR(rows * vocab_local)
    for (int64_t r = 0; r < rows; r++)
        mx[r] = row_max(logits + r * vocab_local, vocab_local);
    if (vocab_comm)
        rt_allreduce_max(vocab_comm, mx, rows);
    RTCPU_PAR_FOR(rows * vocab_local)
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *x = logits + r * vocab_local;
        sum[r] = (float)row_sumexp(x, vocab_local, mx[r]);
        int64_t t = (int64_t)targets[r] - vocab_offset;
        bool mine = targets[r] >= 0 && t >= 0 && t < vocab_local;
        tl[r] = mine ? x[t] : 0.0f;
        own[r] = mine ? 1.0f : 0.0f;
    }
    if (vocab_comm)
        rt_allreduce(vocab_comm, sum, 3 * rows, RT_F32);
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        if (own[r] != 1.0f)
            rt_fatal("rt_cross_entropy_fwd: target %d of row %lld lies outside the vocabulary",
                     (int)targets[r], (long long)r);
        lse[r] = mx[r] + logf(sum[r]);
        total += (double)lse[r] - tl[r];
    }
    *loss += (float)(total / (double)total_rows);
}

void rt_cross_entropy_bwd(rt_act *dlogits, const rt_act *logits, const int32_t *targets,
                          const float *lse, float dloss, int64_t rows, int64_t vocab_local,
                          int64_t vocab_offset, int64_t total_rows)
{
    float scale = (float)((double)dloss / (double)total_rows);
    RTCPU_PAR_FOR(rows * vocab_local)
    for (int64_t r = 0; r < rows; r++) {
        rt_act *d = dlogits + r * vocab_local;
        row_grad(d, logits + r * vocab_local, vocab_local, lse[r], scale);
        int64_t t = (int64_t)targets[r] - vocab_offset;
        if (t >= 0 && t < vocab_local)
            d[t] -= scale;
    }
}
