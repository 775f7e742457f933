/* cross_entropy.c: vocabulary-parallel cross-entropy. Each rank of
 * vocab_comm holds the logit columns [vocab_offset, vocab_offset +
 * vocab_local); the row max, then the sum of exponentials (each rank's,
 * rescaled to the global max) and the target logit are all-reduced (two
 * calls for all rows). The same all-reduce counts the ranks
 * owning each target, which must be exactly one: that is how targets outside
 * the vocabulary are caught without the kernel knowing its size. */
#include <math.h>

#include "cpu.h"
#include "simd.h"

/* Rows run on the rank's threads; each row's loops are vectorised (simd.h).
 *
 * One pass over a row's logits (they are read from memory once, not twice):
 * chunks of CHUNK logits, each its max, then its exponentials against the
 * running max m, the running sum rescaled by e^(m_old - m_new) when a chunk
 * raises it. The sum is in double; the result is the row's max and
 * sum_j e^(x_j - max). */
enum { CHUNK = 512 };

RTCPU_CLONES static void row_stats(const rt_act *x, int64_t n, float *m_out, double *s_out)
{
    float m = -INFINITY;
    double s = 0.0;
    for (int64_t c0 = 0; c0 < n; c0 += CHUNK) {
        int64_t len = n - c0 < CHUNK ? n - c0 : CHUNK;
        const rt_act *xc = x + c0;
        float cm = -INFINITY;
        RTCPU_SIMD_MAX(cm)
        for (int64_t j = 0; j < len; j++)
            cm = xc[j] > cm ? xc[j] : cm;
        if (cm > m) {
            s *= exp((double)m - (double)cm); /* 0 while s is (m = -inf) */
            m = cm;
        }
        double cs = 0.0;
        RTCPU_SIMD_SUM(cs)
        for (int64_t j = 0; j < len; j++)
            cs += rtcpu_expf(xc[j] - m);
        s += cs;
    }
    *m_out = m;
    *s_out = s;
}

RTCPU_CLONES static void row_grad(rt_act *d, const rt_act *x, int64_t n, float lse, float scale)
{
    RTCPU_SIMD
    for (int64_t j = 0; j < n; j++)
        d[j] = rtcpu_expf(x[j] - lse) * scale;
}

void rt_cross_entropy_fwd(float *loss, float *lse, const rt_act *logits, const int32_t *targets,
                          int64_t rows, int64_t vocab_local, int64_t vocab_offset,
                          int64_t total_rows, float weight, RtComm *vocab_comm)
{
    /* buf: [rows] max, then [rows] sum of exp, [rows] target logit, [rows]
     * owners (the last three all-reduced in one call), [rows] this rank's
     * max, [rows] this rank's sum (double) */
    size_t bytes = (size_t)(5 * rows + 1) * sizeof(float) + (size_t)rows * sizeof(double);
    double *lsum = rtcpu_scratch(2, bytes);
    float *mx = (float *)(lsum + rows), *sum = mx + rows, *tl = mx + 2 * rows,
          *own = mx + 3 * rows, *lmx = mx + 4 * rows;
    RTCPU_PAR_FOR(rows * vocab_local)
    for (int64_t r = 0; r < rows; r++) {
        const rt_act *x = logits + r * vocab_local;
        row_stats(x, vocab_local, &lmx[r], &lsum[r]);
        mx[r] = lmx[r];
        int64_t t = (int64_t)targets[r] - vocab_offset;
        bool mine = targets[r] >= 0 && t >= 0 && t < vocab_local;
        tl[r] = mine ? x[t] : 0.0f;
        own[r] = mine ? 1.0f : 0.0f;
    }
    if (vocab_comm)
        rt_allreduce_max(vocab_comm, mx, rows);
    for (int64_t r = 0; r < rows; r++) /* this rank's sum against the global max */
        sum[r] = (float)(lmx[r] == mx[r] ? lsum[r] : lsum[r] * exp((double)lmx[r] - (double)mx[r]));
    if (vocab_comm)
        rt_allreduce(vocab_comm, sum, 3 * rows, RT_F32);
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        lse[r] = mx[r] + logf(sum[r]);
        if (targets[r] == -1) /* no target (rt.h) */
            continue;
        if (own[r] != 1.0f)
            rt_fatal("rt_cross_entropy_fwd: target %d of row %lld lies outside the vocabulary",
                     (int)targets[r], (long long)r);
        total += (double)lse[r] - tl[r];
    }
    *loss += (float)(weight * (total / (double)total_rows));
}

void rt_cross_entropy_bwd(rt_act *dlogits, const rt_act *logits, const int32_t *targets,
                          const float *lse, float dloss, int64_t rows, int64_t vocab_local,
                          int64_t vocab_offset, int64_t total_rows)
{
    float scale = (float)((double)dloss / (double)total_rows);
    RTCPU_PAR_FOR(rows * vocab_local)
    for (int64_t r = 0; r < rows; r++) {
        rt_act *d = dlogits + r * vocab_local;
        if (targets[r] == -1) { /* no target: no gradient */
            for (int64_t j = 0; j < vocab_local; j++)
                d[j] = 0;
            continue;
        }
        row_grad(d, logits + r * vocab_local, vocab_local, lse[r], scale);
        int64_t t = (int64_t)targets[r] - vocab_offset;
        if (t >= 0 && t < vocab_local)
            d[t] -= scale;
    }
}
