/* test_slice.c: the CPU backend's slice and concat (multi-head latent
 * attention, docs/language.md). Forward: every element where the
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
    return check_status("rt_slice");
}
