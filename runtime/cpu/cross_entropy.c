/* cross_entropy.c: vocabulary-parallel cross-entropy. Each rank of
 * vocab_comm holds the logit columns [vocab_offset, vocab_offset +
 * vocab_local); the row max, the sum of exponentials and the target logit are
 * all-reduced (two calls for all rows). The same all-reduce counts the ranks
 * owning each target, which must be exactly one: that is how targets outside
 * the vocabulary are caught without the kernel knowing its size. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

void rt_cross_entropy_fwd(float *loss, float *lse, const rt_act *logits, const int32_t *targets,
                          int64_t rows, int64_t vocab_local, int64_t vocab_offset,
                          int64_t total_rows, RtComm *vocab_comm)
{
    /* buf: [rows] max, then [rows] sum of exp, [rows] target logit, [rows] owners */
    float *buf = rtcpu_xmalloc((size_t)(4 * rows + 1) * sizeof *buf);
    float *mx = buf, *sum = buf + rows, *tl = buf + 2 * rows, *own = buf + 3 * rows;
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *x = logits + r * vocab_local;
        float m = -INFINITY;
        for (int64_t j = 0; j < vocab_local; j++)
            m = x[j] > m ? x[j] : m;
        mx[r] = m;
    }
    if (vocab_comm)
        rt_allreduce_max(vocab_comm, mx, rows);
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *x = logits + r * vocab_local;
        double s = 0.0;
        for (int64_t j = 0; j < vocab_local; j++)
            s += expf(x[j] - mx[r]);
        sum[r] = (float)s;
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
    free(buf);
}

void rt_cross_entropy_bwd(rt_act *dlogits, const rt_act *logits, const int32_t *targets,
                          const float *lse, float dloss, int64_t rows, int64_t vocab_local,
                          int64_t vocab_offset, int64_t total_rows)
{
    float scale = (float)((double)dloss / (double)total_rows);
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *x = logits + r * vocab_local;
        rt_act *d = dlogits + r * vocab_local;
        for (int64_t j = 0; j < vocab_local; j++)
            d[j] = expf(x[j] - lse[r]) * scale;
        int64_t t = (int64_t)targets[r] - vocab_offset;
        if (t >= 0 && t < vocab_local)
            d[t] -= scale;
    }
}
