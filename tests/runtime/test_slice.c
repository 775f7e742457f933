/* test_slice.c: the CPU backend's slice and concat (multi-head latent
 * attention, docs/language.md), and attention with v's own head size. Forward: every element where the
 * definition puts it, outputs pre-filled with NaN so a skipped element
 * fails. Backward: both are linear, so each backward kernel must be the
 * forward's adjoint, <fwd(x), dy> = <x, bwd(dy)> in double for random x
 * and dy (the gradient of <fwd(x), dy> by x), which a missing broadcast
 * sum, a wrong offset or a dropped zero breaks (test_wrong_adjoint makes
 * sure the check can fail). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"
#include "rt.h"

static float *fill(int64_t n)
{
    float *f = malloc(sizeof(float) * (size_t)n);
    ref_fill(f, NULL, n, -1, 1);
    return f;
}

static float *nans(int64_t n)
{
    float *f = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        f[i] = NAN;
    return f;
}

static double dot(const float *a, const float *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

static bool adjoint_ok(double lhs, double rhs, double scale)
{
    return fabs(lhs - rhs) <= 1e-5 * scale;
}

static void test_slice(int64_t rows, int64_t cols, int64_t n, int64_t at)
{
    float *x = fill(rows * cols), *y = nans(rows * n), *dy = fill(rows * n), *dx = nans(rows * cols);
    rt_slice_fwd(y, x, rows, cols, n, at);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++)
            CHECK(y[r * n + j] == x[r * cols + at + j], "slice [%lld, %lld]: y[%lld, %lld]", (long long)cols,
                  (long long)at, (long long)r, (long long)j);
    rt_slice_bwd(dx, dy, rows, cols, n, at);
    double lhs = dot(y, dy, rows * n), rhs = dot(x, dx, rows * cols);
    CHECK(adjoint_ok(lhs, rhs, (double)(rows * n)), "slice %lld of %lld at %lld: <fwd(x), dy> %.9g, <x, bwd(dy)> %.9g",
          (long long)n, (long long)cols, (long long)at, lhs, rhs);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            if (j < at || j >= at + n)
                CHECK(dx[r * cols + j] == 0, "slice backward: dx[%lld, %lld] outside the slice is %g",
                      (long long)r, (long long)j, dx[r * cols + j]);
    free(x), free(y), free(dy), free(dx);
}

/* concat of a [outer, bcast, inner, na] and b [outer, inner, nb]; wrong != 0
 * feeds the check a backward that forgets the broadcast sum (db from the first
 * copy only), which must fail. */
static int concat_case(int64_t outer, int64_t bcast, int64_t inner, int64_t na, int64_t nb, bool wrong)
{
    int64_t rows = outer * bcast * inner, w = na + nb, brows = outer * inner;
    float *a = fill(rows * na), *b = fill(brows * nb), *y = nans(rows * w), *dy = fill(rows * w);
    float *da = nans(rows * na), *db = nans(brows * nb);
    int bad = 0;
    rt_concat_fwd(y, a, b, outer, bcast, inner, na, nb);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < bcast; c++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t r = (o * bcast + c) * inner + i;
                for (int64_t j = 0; j < w; j++) {
                    float want = j < na ? a[r * na + j] : b[(o * inner + i) * nb + j - na];
                    bad += y[r * w + j] != want;
                }
            }
    CHECK(!wrong ? bad == 0 : true, "concat forward: %d elements misplaced", bad);
    rt_concat_bwd(da, db, dy, outer, bcast, inner, na, nb);
    if (wrong)
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++)
                for (int64_t j = 0; j < nb; j++)
                    db[(o * inner + i) * nb + j] = dy[((o * bcast) * inner + i) * w + na + j];
    double lhs = dot(y, dy, rows * w), rhs = dot(a, da, rows * na) + dot(b, db, brows * nb);
    bool ok = adjoint_ok(lhs, rhs, (double)(rows * w));
    if (!wrong)
        CHECK(ok, "concat [%lld x %lld x %lld, %lld | %lld]: <fwd(a, b), dy> %.9g, <a, da> + <b, db> %.9g",
              (long long)outer, (long long)bcast, (long long)inner, (long long)na, (long long)nb, lhs, rhs);
    free(a), free(b), free(y), free(dy), free(da), free(db);
    return ok;
}

/* attention with v's head Dv narrower than q and k's D (rt_attention_v_*)
 * against softmax(Q K^T / sqrt(D) + causal mask) V and its gradients written
 * from the definition in double, here with Dv != D (ref.c's reference takes
 * one head size). */
static void test_attention_v(int64_t S, int64_t H, int64_t KVH, int64_t D, int64_t Dv)
{
    int64_t nq = S * H * D, nk = S * KVH * D, nv = S * KVH * Dv, no = S * H * Dv, g = H / KVH;
    float *q = fill(nq), *k = fill(nk), *v = fill(nv), *dout = fill(no), *o = nans(no), *lse = nans(S * H);
    float *dq = nans(nq), *dk = nans(nk), *dv = nans(nv);
    double *P = calloc((size_t)(S * S), sizeof(double)), *dP = calloc((size_t)(S * S), sizeof(double));
    double *rdq = calloc((size_t)nq, sizeof(double)), *rdk = calloc((size_t)nk, sizeof(double));
    double *rdv = calloc((size_t)nv, sizeof(double)), scale = 1 / sqrt((double)D), worst = 0, big = 0;
    rt_attention_v_fwd(o, lse, q, k, v, 1, S, H, KVH, D, Dv, true, 0);
    rt_attention_v_bwd(dq, dk, dv, q, k, v, o, lse, dout, 1, S, H, KVH, D, Dv, true, 0);
#define DIFF(got, want) (big = fmax(big, fabs(want)), worst = fmax(worst, fabs((got) - (want))))
    for (int64_t h = 0; h < H; h++) {
        int64_t kh = h / g;
        for (int64_t i = 0; i < S; i++) {
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j <= i; j++) {
                double sc = 0;
                for (int64_t d = 0; d < D; d++)
                    sc += (double)q[(i * H + h) * D + d] * k[(j * KVH + kh) * D + d];
                P[i * S + j] = sc * scale, m = fmax(m, sc * scale);
            }
            for (int64_t j = 0; j <= i; j++)
                sum += P[i * S + j] = exp(P[i * S + j] - m);
            for (int64_t j = 0; j <= i; j++)
                P[i * S + j] /= sum;
            for (int64_t d = 0; d < Dv; d++) {
                double acc = 0;
                for (int64_t j = 0; j <= i; j++)
                    acc += P[i * S + j] * v[(j * KVH + kh) * Dv + d];
                DIFF(o[(i * H + h) * Dv + d], acc);
            }
            /* dP = dO V^T, dS = P (dP - sum_j dP P) */
            double rs = 0;
            for (int64_t j = 0; j <= i; j++) {
                double a = 0;
                for (int64_t d = 0; d < Dv; d++)
                    a += (double)dout[(i * H + h) * Dv + d] * v[(j * KVH + kh) * Dv + d];
                dP[i * S + j] = a, rs += a * P[i * S + j];
            }
            for (int64_t j = 0; j <= i; j++) {
                double ds = P[i * S + j] * (dP[i * S + j] - rs) * scale;
                for (int64_t d = 0; d < D; d++) {
                    rdq[(i * H + h) * D + d] += ds * k[(j * KVH + kh) * D + d];
                    rdk[(j * KVH + kh) * D + d] += ds * q[(i * H + h) * D + d];
                }
                for (int64_t d = 0; d < Dv; d++)
                    rdv[(j * KVH + kh) * Dv + d] += P[i * S + j] * dout[(i * H + h) * Dv + d];
            }
        }
    }
    double fwd = worst / big;
    worst = big = 0;
    for (int64_t n = 0; n < nq; n++) DIFF(dq[n], rdq[n]);
    for (int64_t n = 0; n < nk; n++) DIFF(dk[n], rdk[n]);
    for (int64_t n = 0; n < nv; n++) DIFF(dv[n], rdv[n]);
#undef DIFF
    CHECK(fwd <= 2e-6, "attention D %lld, Dv %lld: o off by %.3g of its scale", (long long)D, (long long)Dv, fwd);
    CHECK(worst / big <= 1e-5, "attention D %lld, Dv %lld: gradients off by %.3g of their scale", (long long)D,
          (long long)Dv, worst / big);
    free(q), free(k), free(v), free(dout), free(o), free(lse), free(dq), free(dk), free(dv);
    free(P), free(dP), free(rdq), free(rdk), free(rdv);
}

int main(void)
{
    ref_seed(20261129);
    test_slice(6, 24, 8, 16);  /* DeepSeek's k_rope out of kv_a (at the end) */
    test_slice(6, 24, 16, 0);  /* c_kv (at the start) */
    test_slice(5, 20, 12, 8);  /* v out of [k_nope | v] */
    concat_case(3, 1, 1, 8, 8, false);  /* q = [q_nope | q_rope] */
    concat_case(3, 4, 1, 8, 8, false);  /* k = [k_nope | k_rope shared by 4 heads] */
    concat_case(2, 3, 5, 4, 6, false);  /* a broadcast run with dims inside it */
    CHECK(!concat_case(3, 4, 1, 8, 8, true), "an adjoint check that misses a dropped broadcast sum");
    test_attention_v(7, 4, 2, 16, 12); /* tiny MLA: q, k 16, v 12, two query heads a kv head */
    test_attention_v(5, 2, 2, 24, 8);
    test_attention_v(5, 2, 2, 16, 16); /* Dv == D: rt_attention_fwd/bwd themselves */
    return check_status("rt_slice");
}
