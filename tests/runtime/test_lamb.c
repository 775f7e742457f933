/* test_lamb.c: rt_lamb_prepare / rt_lamb_trust / rt_lamb_apply on one rank
 * against LAMB as You et al. 2020 ("Large Batch Optimization for Deep
 * Learning: Training BERT in 76 minutes") state it in Algorithm 2, written
 * here in double from the paper, not from the runtime:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   mh = m / (1-b1^t);    vh = v / (1-b2^t);
 *   r = mh / (sqrt(vh) + eps) + lambda w;
 *   w -= eta phi(||w||) / ||r|| r,  phi(z) = min(max(z, gamma_l), gamma_u)
 * per layer (tensor), with gamma_l = 0, gamma_u = 10 and the ratio 1 when a
 * norm is 0. The toy problem: three tensors under a quadratic loss
 * 0.5 sum a (w - c)^2, one starting at zero (ratio 1 at step 1), one whose
 * norm is above 10 (phi clips it), one without weight decay. Each of 30
 * steps starts the reference from the runtime's fp32 state, so the
 * comparison is of one step's arithmetic, not of 30 steps of drift. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rt.h"

int check_failures;

enum { NT = 3, STEPS = 30 };
static const int64_t len[NT] = {37, 70000, 1000}; /* 70000: several sum blocks */
static const double init_scale[NT] = {0.0, 0.2, 0.05};
static const double wdecay[NT] = {0.01, 0.01, 0.0};
static const double B1 = 0.9, B2 = 0.999, EPS = 1e-6, LR = 2e-3, PHI_MAX = 10;

static double urand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 24) * 2 - 1;
}

/* One LAMB step of one tensor in double, from the paper. Returns the ratio. */
static double ref_step(double *w, double *m, double *v, const double *g, int64_t n, int t, double wd)
{
    double *r = malloc((size_t)n * sizeof *r), wn = 0, rn = 0;
    for (int64_t i = 0; i < n; i++) {
        m[i] = (double)(float)B1 * m[i] + (1 - (double)(float)B1) * g[i];
        v[i] = (double)(float)B2 * v[i] + (1 - (double)(float)B2) * g[i] * g[i];
        double mh = m[i] / (1 - pow((double)(float)B1, t)), vh = v[i] / (1 - pow((double)(float)B2, t));
        r[i] = mh / (sqrt(vh) + (double)(float)EPS) + (double)(float)wd * w[i];
        wn += w[i] * w[i];
        rn += r[i] * r[i];
    }
    wn = sqrt(wn), rn = sqrt(rn);
    double phi = wn < 0 ? 0 : wn > PHI_MAX ? PHI_MAX : wn;
    double ratio = wn > 0 && rn > 0 ? phi / rn : 1.0;
    for (int64_t i = 0; i < n; i++)
        w[i] -= (double)(float)LR * ratio * r[i];
    free(r);
    return ratio;
}

static double max_rel(const float *got, const double *want, int64_t n)
{
    double scale = 0, d = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++)
        d = fmax(d, fabs(got[i] - want[i]));
    return scale > 0 ? d / scale : d;
}

int main(void)
{
    unsigned seed = 35;
    float *w[NT], *m[NT], *v[NT], *g[NT], *a[NT], *c[NT];
    for (int k = 0; k < NT; k++) {
        size_t b = (size_t)len[k] * sizeof(float);
        w[k] = malloc(b), m[k] = calloc(1, b), v[k] = calloc(1, b), g[k] = malloc(b);
        a[k] = malloc(b), c[k] = malloc(b);
        for (int64_t i = 0; i < len[k]; i++) {
            w[k][i] = (float)(init_scale[k] * urand(&seed));
            a[k][i] = (float)(0.5 + 0.5 * fabs(urand(&seed)));
            c[k][i] = (float)(0.3 * urand(&seed));
        }
    }
    double worst[4] = {0}, ratio_seen[NT][2];
    for (int t = 1; t <= STEPS; t++) {
        for (int k = 0; k < NT; k++) {
            int64_t n = len[k];
            double *wd = malloc((size_t)n * 4 * sizeof(double)), *md = wd + n, *vd = md + n, *gd = vd + n;
            for (int64_t i = 0; i < n; i++) {
                g[k][i] = a[k][i] * (w[k][i] - c[k][i]);
                wd[i] = w[k][i], md[i] = m[k][i], vd[i] = v[k][i], gd[i] = g[k][i];
            }
            double want_ratio = ref_step(wd, md, vd, gd, n, t, wdecay[k]);
            float sums[2] = {0, 0};
            rt_lamb_prepare(sums, w[k], g[k], m[k], v[k], n, (float)B1, (float)B2, (float)EPS,
                            (float)wdecay[k], 1.0f, t);
            double ratio = rt_lamb_trust(sums[0], sums[1], PHI_MAX);
            rt_lamb_apply(w[k], w[k], m[k], v[k], n, (float)LR, (float)B1, (float)B2, (float)EPS,
                          (float)wdecay[k], (float)ratio, t);
            double e[4] = {fabs(ratio - want_ratio) / want_ratio, max_rel(m[k], md, n),
                           max_rel(v[k], vd, n), max_rel(w[k], wd, n)};
            for (int j = 0; j < 4; j++)
                worst[j] = fmax(worst[j], e[j]);
            CHECK(e[0] <= 1e-6 && e[1] <= 1e-6 && e[2] <= 1e-6 && e[3] <= 1e-6,
                  "step %d tensor %d: ratio %.9g (reference %.9g), relative differences ratio %.3g "
                  "m %.3g v %.3g w %.3g", t, k, ratio, want_ratio, e[0], e[1], e[2], e[3]);
            if (t == 1 || t == STEPS)
                ratio_seen[k][t == STEPS] = ratio;
            free(wd);
        }
    }
    printf("lamb: %d steps of 3 tensors against the paper's update in double, worst relative "
           "differences: trust ratio %.3g, m %.3g, v %.3g, w %.3g (each step from the same state)\n",
           STEPS, worst[0], worst[1], worst[2], worst[3]);
    printf("lamb: trust ratios at steps 1 and %d: %.6g %.6g | %.6g %.6g | %.6g %.6g\n", STEPS,
           ratio_seen[0][0], ratio_seen[0][1], ratio_seen[1][0], ratio_seen[1][1],
           ratio_seen[2][0], ratio_seen[2][1]);
    /* The cases the toy problem must reach, or it proves less than it says. */
    CHECK(ratio_seen[0][0] == 1.0, "a zero tensor's first trust ratio is %g, not 1", ratio_seen[0][0]);
    double wn = 0;
    for (int64_t i = 0; i < len[1]; i++)
        wn += (double)w[1][i] * w[1][i];
    CHECK(sqrt(wn) > PHI_MAX, "tensor 1's norm %g never reached the clipping at %g", sqrt(wn), PHI_MAX);

    /* rt_lamb_trust's rule itself. */
    CHECK(rt_lamb_trust(0, 4, 10) == 1.0 && rt_lamb_trust(4, 0, 10) == 1.0, "a zero norm's ratio is 1");
    CHECK(rt_lamb_trust(9, 4, 10) == 1.5, "3 / 2 is %g", rt_lamb_trust(9, 4, 10));
    CHECK(rt_lamb_trust(400, 4, 10) == 5.0, "min(20, 10) / 2 is %g", rt_lamb_trust(400, 4, 10));
    CHECK(rt_lamb_trust(400, 4, 0) == 10.0, "phi_max 0 (no clipping): 20 / 2 is %g", rt_lamb_trust(400, 4, 0));

    /* Shards: two halves prepared into one pair of sums (as the trainer adds
     * a tensor's shards over its ranks) give the whole tensor's sums, and the
     * same moments bitwise (element-wise work). */
    {
        int64_t n = len[1], h = n / 2 + 123;
        size_t b = (size_t)n * sizeof(float);
        float *m1 = calloc(1, b), *v1 = calloc(1, b), *m2 = calloc(1, b), *v2 = calloc(1, b);
        float whole[2] = {0, 0}, split[2] = {0, 0};
        rt_lamb_prepare(whole, w[1], g[1], m1, v1, n, 0.9f, 0.999f, 1e-6f, 0.01f, 0.5f, 3);
        rt_lamb_prepare(split, w[1], g[1], m2, v2, h, 0.9f, 0.999f, 1e-6f, 0.01f, 0.5f, 3);
        rt_lamb_prepare(split, w[1] + h, g[1] + h, m2 + h, v2 + h, n - h, 0.9f, 0.999f, 1e-6f, 0.01f, 0.5f, 3);
        double d0 = fabs(whole[0] - split[0]) / whole[0], d1 = fabs(whole[1] - split[1]) / whole[1];
        printf("lamb: sums of two shards against the whole tensor: relative %.3g, %.3g\n", d0, d1);
        CHECK(d0 <= 1e-6 && d1 <= 1e-6, "shard sums differ: %.3g %.3g", d0, d1);
        CHECK(!memcmp(m1, m2, b) && !memcmp(v1, v2, b), "moments of shards differ from the whole's");
        free(m1), free(v1), free(m2), free(v2);
    }
    for (int k = 0; k < NT; k++)
        free(w[k]), free(m[k]), free(v[k]), free(g[k]), free(a[k]), free(c[k]);
    return check_status("rt_lamb");
}
