/* test_kernels.c: every fp32 kernel of the CPU backend against the naive
 * double-precision references of ref.c, and every backward kernel against
 * central differences of those references.
 *
 * Tolerances (scale-relative: max abs error / max abs reference value):
 *   FWD_TOL 2e-6: fp32 rounds at 6e-8 relative; the sums here have at most
 *     ~64 terms, so accumulated rounding stays below ~4e-6 of the scale in the
 *     worst case and near 1e-7 in practice (measured: <= 1e-7).
 *   GRAD_TOL 1e-5: the differences are taken in double with h = 1e-5
 *     (truncation ~h^2 = 1e-10, cancellation ~1e-16/h = 1e-11), so the
 *     reference is good to ~1e-9; a backward kernel chains two or three fp32
 *     reductions (measured: <= 3e-7), leaving a 30x margin.
 * ref_check_grad also moves one element by 10 x GRAD_TOL and requires the
 * check to fail, and test_wrong_gradients feeds plausible wrong backward
 * formulas (missing term, wrong mask, wrong transpose) that must be caught.
 * Outputs that kernels overwrite are pre-filled with NaN, so a kernel that
 * skips an element fails; accumulated gradients start from random values. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "ref.h"
#include "rt.h"

#define FWD_TOL 2e-6
#define GRAD_TOL 1e-5
#define FD_H 1e-5

static float *fnew(int64_t n)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double *dnew(int64_t n)
{
    return calloc((size_t)(n ? n : 1), sizeof(double));
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* got - base, for gradients that accumulate onto random initial values. */
static float *minus(const float *got, const float *base, int64_t n)
{
    float *d = fnew(n);
    for (int64_t i = 0; i < n; i++)
        d[i] = got[i] - base[i];
    return d;
}

static void expect_caught(const char *what, const float *got, const double *want, int64_t n)
{
    printf("  (a wrong gradient, must fail:)\n");
    CHECK(!ref_close(what, got, want, n, GRAD_TOL, 1e-30), "%s: wrong gradient not caught", what);
}

/* ------------------------------------------------------------------ matmul */
typedef struct {
    double *a, *b, *r, *c;
    int64_t M, N, K;
    bool ta, tb;
} MatmulCtx;

static double matmul_loss(void *p)
{
    MatmulCtx *x = p;
    ref_matmul(x->c, x->a, x->b, x->M, x->N, x->K, x->ta, x->tb);
    return dot(x->r, x->c, x->M * x->N);
}

/* The backward of C = op(A) op(B) is two more matmuls whose flags depend on
 * ta and tb: the same table codegen uses. */
static void matmul_grads(float *da, float *db, const float *a, const float *b, const float *r,
                         int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool acc)
{
    if (!ta)
        rt_matmul(da, r, b, M, K, N, false, !tb, acc); /* dA = R op(B)^T */
    else
        rt_matmul(da, b, r, K, M, N, tb, true, acc); /* dA^T = op(B) R^T */
    if (!tb)
        rt_matmul(db, a, r, K, N, M, !ta, false, acc); /* dB = op(A)^T R */
    else
        rt_matmul(db, r, a, N, K, M, true, ta, acc); /* dB^T = R^T op(A) */
}

static void test_matmul(void)
{
    const int64_t M = 5, N = 7, K = 6;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        char name[64];
        printf("matmul ta=%d tb=%d\n", ta, tb);
        MatmulCtx x = {dnew(M * K), dnew(K * N), dnew(M * N), dnew(M * N), M, N, K, ta, tb};
        float *a = fnew(M * K), *b = fnew(K * N), *r = fnew(M * N), *c = fnew(M * N);
        ref_fill(a, x.a, M * K, -1, 1);
        ref_fill(b, x.b, K * N, -1, 1);
        ref_fill(r, x.r, M * N, -1, 1);
        rt_matmul(c, a, b, M, N, K, ta, tb, false);
        ref_matmul(x.c, x.a, x.b, M, N, K, ta, tb);
        snprintf(name, sizeof name, "matmul fwd ta=%d tb=%d", ta, tb);
        CHECK(ref_close(name, c, x.c, M * N, FWD_TOL, 1e-30), "%s", name);
        /* accumulate adds onto C */
        float *c0 = fnew(M * N);
        double *want = dnew(M * N);
        ref_fill(c0, NULL, M * N, -1, 1);
        memcpy(c, c0, (size_t)(M * N) * sizeof *c);
        rt_matmul(c, a, b, M, N, K, ta, tb, true);
        for (int64_t i = 0; i < M * N; i++)
            want[i] = x.c[i] + c0[i];
        snprintf(name, sizeof name, "matmul accumulate ta=%d tb=%d", ta, tb);
        CHECK(ref_close(name, c, want, M * N, FWD_TOL, 1e-30), "%s", name);

        float *da = fnew(M * K), *db = fnew(K * N);
        double *ga = dnew(M * K), *gb = dnew(K * N);
        matmul_grads(da, db, a, b, r, M, N, K, ta, tb, false);
        ref_fd_grad(matmul_loss, &x, x.a, M * K, FD_H, ga);
        ref_fd_grad(matmul_loss, &x, x.b, K * N, FD_H, gb);
        snprintf(name, sizeof name, "matmul dA ta=%d tb=%d", ta, tb);
        ref_check_grad(name, da, ga, M * K, GRAD_TOL);
        snprintf(name, sizeof name, "matmul dB ta=%d tb=%d", ta, tb);
        ref_check_grad(name, db, gb, K * N, GRAD_TOL);
        /* accumulating gradients (micro-batches) */
        float *da0 = fnew(M * K), *db0 = fnew(K * N);
        ref_fill(da0, NULL, M * K, -1, 1);
        ref_fill(db0, NULL, K * N, -1, 1);
        memcpy(da, da0, (size_t)(M * K) * sizeof *da);
        memcpy(db, db0, (size_t)(K * N) * sizeof *db);
        matmul_grads(da, db, a, b, r, M, N, K, ta, tb, true);
        float *dda = minus(da, da0, M * K), *ddb = minus(db, db0, K * N);
        snprintf(name, sizeof name, "matmul dA accumulate ta=%d tb=%d", ta, tb);
        ref_check_grad(name, dda, ga, M * K, GRAD_TOL);
        snprintf(name, sizeof name, "matmul dB accumulate ta=%d tb=%d", ta, tb);
        ref_check_grad(name, ddb, gb, K * N, GRAD_TOL);
        free(dda), free(ddb), free(da0), free(db0), free(da), free(db), free(ga), free(gb);
        free(c0), free(want), free(a), free(b), free(r), free(c);
        free(x.a), free(x.b), free(x.r), free(x.c);
    }
    /* K = 0: an empty sum is zero (C was NaN). */
    float *c = fnew(6), a[1] = {0}, b[1] = {0};
    rt_matmul(c, a, b, 2, 3, 0, false, false, false);
    bool zero = true;
    for (int i = 0; i < 6; i++)
        zero = zero && c[i] == 0.0f;
    CHECK(zero, "matmul with K = 0 must write zeros");
    free(c);
}

/* rt_matmul_batch and rt_matmul_grad_batch: bitwise the separate calls, for
 * 1 to 3 GEMMs with one A shared by all (q, k, v), one A each, or one B
 * shared by all, every transpose, overwriting and accumulating. */
static void test_matmul_batch(void)
{
    printf("matmul batch\n");
    enum { NB = 3 };
    const int64_t M = 9, N = 11, K = 7;
    float *a[NB], *b[NB], *c0[NB], *cb[NB], *cs[NB];
    for (int i = 0; i < NB; i++) {
        a[i] = fnew(M * K), b[i] = fnew(K * N), c0[i] = fnew(M * N);
        cb[i] = fnew(M * N), cs[i] = fnew(M * N);
        ref_fill(a[i], NULL, M * K, -1, 1);
        ref_fill(b[i], NULL, K * N, -1, 1);
        ref_fill(c0[i], NULL, M * N, -1, 1);
    }
    static const char *const modes[3] = {"A each", "A shared", "B shared"};
    for (int k = 0; k < 2 * NB * 3 * 4 * 2; k++) {
        int grad = k % 2, count = 1 + k / 2 % NB, mode = k / (2 * NB) % 3, t = k / (6 * NB) % 4;
        bool ta = t & 1, tb = t & 2, acc = k / (24 * NB);
        const float *ap[NB], *bp[NB];
        for (int i = 0; i < NB; i++) {
            ap[i] = mode == 1 ? a[0] : a[i];
            bp[i] = mode == 2 ? b[0] : b[i];
            memcpy(cb[i], c0[i], (size_t)(M * N) * sizeof(float));
            memcpy(cs[i], c0[i], (size_t)(M * N) * sizeof(float));
        }
        if (grad)
            rt_matmul_grad_batch(count, cb, ap, bp, M, N, K, ta, tb, acc);
        else
            rt_matmul_batch(count, cb, ap, bp, M, N, K, ta, tb, acc);
        for (int i = 0; i < count; i++) {
            if (grad)
                rt_matmul_grad(cs[i], ap[i], bp[i], M, N, K, ta, tb, acc);
            else
                rt_matmul(cs[i], ap[i], bp[i], M, N, K, ta, tb, acc);
        }
        bool same = true;
        for (int i = 0; i < NB; i++) /* the slots past count untouched too */
            same = same && !memcmp(cb[i], cs[i], (size_t)(M * N) * sizeof(float));
        CHECK(same, "matmul%s_batch count=%d %s ta=%d tb=%d acc=%d: not the separate calls",
              grad ? "_grad" : "", count, modes[mode], ta, tb, acc);
    }
    for (int i = 0; i < NB; i++)
        free(a[i]), free(b[i]), free(c0[i]), free(cb[i]), free(cs[i]);
}

/* --------------------------------------------------------------- embedding */
typedef struct {
    const int32_t *ids;
    double *table, *r, *out;
    int64_t n, vocab, dim;
} EmbCtx;

static double emb_loss(void *p)
{
    EmbCtx *x = p;
    ref_embedding(x->out, x->ids, x->table, x->n, x->dim);
    return dot(x->r, x->out, x->n * x->dim);
}

static void test_embedding(void)
{
    printf("embedding\n");
    enum { V = 11, DIM = 6, NTOK = 9 };
    static const int32_t ids[NTOK] = {3, 1, 3, 7, 0, 10, 3, 1, 5}; /* repeats accumulate */
    EmbCtx x = {ids, dnew(V * DIM), dnew(NTOK * DIM), dnew(NTOK * DIM), NTOK, V, DIM};
    float *table = fnew(V * DIM), *r = fnew(NTOK * DIM), *out = fnew(NTOK * DIM);
    ref_fill(table, x.table, V * DIM, -1, 1);
    ref_fill(r, x.r, NTOK * DIM, -1, 1);
    rt_embedding_fwd(out, ids, table, NTOK, V, 0, DIM);
    ref_embedding(x.out, ids, x.table, NTOK, DIM);
    CHECK(ref_close("embedding fwd (exact)", out, x.out, NTOK * DIM, 0.0, 1e-30), "embedding fwd");
    /* vocabulary split in 2 uneven parts: the partial outputs sum to the full */
    float *p0 = fnew(NTOK * DIM), *p1 = fnew(NTOK * DIM);
    rt_embedding_fwd(p0, ids, table, NTOK, 6, 0, DIM);
    rt_embedding_fwd(p1, ids, table + 6 * DIM, NTOK, V - 6, 6, DIM);
    for (int64_t i = 0; i < NTOK * DIM; i++)
        p0[i] += p1[i];
    CHECK(ref_close("embedding fwd, vocab split 6+5", p0, x.out, NTOK * DIM, 0.0, 1e-30),
          "split embedding");

    float *g0 = fnew(V * DIM), *g = fnew(V * DIM);
    double *want = dnew(V * DIM);
    ref_fill(g0, NULL, V * DIM, -1, 1);
    memcpy(g, g0, sizeof(float) * V * DIM);
    rt_embedding_bwd(g, ids, r, NTOK, V, 0, DIM);
    ref_fd_grad(emb_loss, &x, x.table, V * DIM, FD_H, want);
    float *d = minus(g, g0, V * DIM);
    ref_check_grad("embedding dtable (accumulated)", d, want, V * DIM, GRAD_TOL);
    /* split backward: each part gets exactly its rows */
    memcpy(g, g0, sizeof(float) * V * DIM);
    rt_embedding_bwd(g, ids, r, NTOK, 6, 0, DIM);
    rt_embedding_bwd(g + 6 * DIM, ids, r, NTOK, V - 6, 6, DIM);
    free(d);
    d = minus(g, g0, V * DIM);
    ref_check_grad("embedding dtable, vocab split 6+5", d, want, V * DIM, GRAD_TOL);
    free(d), free(g0), free(g), free(want), free(p0), free(p1), free(table), free(r), free(out);
    free(x.table), free(x.r), free(x.out);
}

/* -------------------------------------------------------------- rmsnorm */
typedef struct {
    double *x, *w, *b, *r, *y;
    int64_t rows, cols;
    double eps;
} NormCtx;

static double rms_loss(void *p)
{
    NormCtx *c = p;
    ref_rmsnorm(c->y, c->x, c->w, c->rows, c->cols, c->eps);
    return dot(c->r, c->y, c->rows * c->cols);
}

static double ln_loss(void *p)
{
    NormCtx *c = p;
    ref_layernorm(c->y, c->x, c->w, c->b, c->rows, c->cols, c->eps);
    return dot(c->r, c->y, c->rows * c->cols);
}

/* The residual form (dres): dx = dres + the norm's gradient, as the
 * generated programs call it: into another buffer, and in place (dres ==
 * dx). The sum may be contracted into an FMA, so within a few ulps of dres +
 * the plain call's dx rather than bitwise; dw and db are bitwise the plain
 * call's. mean NULL: RMSNorm. */
static void norm_bwd(float *dx, float *dw, float *db, int R, int C, const float *x, const float *w,
                     const float *rstd, const float *mean, const float *dy, const float *dres)
{
    if (mean)
        rt_layernorm_bwd(dx, dw, db, x, w, mean, rstd, dy, dres, R, C);
    else
        rt_rmsnorm_bwd(dx, dw, x, w, rstd, dy, dres, R, C);
}

static void check_norm_residual(const char *what, int R, int C, const float *x, const float *w,
                                const float *rstd, const float *mean, const float *dy)
{
    float *res = fnew(R * C), *dx0 = fnew(R * C), *out = fnew(R * C);
    float *dw0 = fnew(C), *db0 = fnew(C), *dw = fnew(C), *db = fnew(C), *pw = fnew(C), *pb = fnew(C);
    ref_fill(res, NULL, R * C, -1, 1);
    ref_fill(dw0, NULL, C, -1, 1);
    ref_fill(db0, NULL, C, -1, 1);
    for (int inplace = 0; inplace < 2; inplace++) {
        memcpy(pw, dw0, sizeof(float) * C), memcpy(pb, db0, sizeof(float) * C);
        norm_bwd(dx0, pw, pb, R, C, x, w, rstd, mean, dy, NULL);
        memcpy(dw, dw0, sizeof(float) * C), memcpy(db, db0, sizeof(float) * C);
        if (inplace)
            memcpy(out, res, sizeof(float) * R * C);
        norm_bwd(out, dw, db, R, C, x, w, rstd, mean, dy, inplace ? out : res);
        int bad = 0;
        for (int i = 0; i < R * C; i++) {
            float want = res[i] + dx0[i];
            bad += !(fabsf(out[i] - want) <= 4 * FLT_EPSILON * (fabsf(res[i]) + fabsf(dx0[i])));
        }
        const char *where = inplace ? "in place" : "into another buffer";
        CHECK(bad == 0, "%s bwd with dres (%s): %d of %d elements are not dres + dx", what, where,
              bad, R * C);
        CHECK(!memcmp(pw, dw, sizeof(float) * C) && (!mean || !memcmp(pb, db, sizeof(float) * C)),
              "%s bwd with dres (%s): the weight gradients differ from the plain call's", what, where);
    }
    free(res), free(dx0), free(out), free(dw0), free(db0), free(dw), free(db), free(pw), free(pb);
}

static void test_rmsnorm(void)
{
    printf("rmsnorm\n");
    enum { R = 6, C = 16 };
    NormCtx c = {dnew(R * C), dnew(C), NULL, dnew(R * C), dnew(R * C), R, C, 1e-5};
    float *x = fnew(R * C), *w = fnew(C), *r = fnew(R * C), *y = fnew(R * C), rstd[R];
    ref_fill(x, c.x, R * C, -2, 2);
    ref_fill(w, c.w, C, 0.5, 1.5);
    ref_fill(r, c.r, R * C, -1, 1);
    rt_rmsnorm_fwd(y, rstd, x, w, R, C, 1e-5f);
    ref_rmsnorm(c.y, c.x, c.w, R, C, 1e-5);
    CHECK(ref_close("rmsnorm fwd", y, c.y, R * C, FWD_TOL, 1e-30), "rmsnorm fwd");
    double want_rstd[R];
    for (int i = 0; i < R; i++)
        want_rstd[i] = 1.0 / sqrt(dot(c.x + i * C, c.x + i * C, C) / C + 1e-5);
    CHECK(ref_close("rmsnorm rstd", rstd, want_rstd, R, FWD_TOL, 1e-30), "rmsnorm rstd");

    float *dx = fnew(R * C), *dw0 = fnew(C), *dw = fnew(C);
    ref_fill(dw0, NULL, C, -1, 1);
    memcpy(dw, dw0, sizeof(float) * C);
    rt_rmsnorm_bwd(dx, dw, x, w, rstd, r, NULL, R, C);
    double *gx = dnew(R * C), *gw = dnew(C);
    ref_fd_grad(rms_loss, &c, c.x, R * C, FD_H, gx);
    ref_fd_grad(rms_loss, &c, c.w, C, FD_H, gw);
    ref_check_grad("rmsnorm dx", dx, gx, R * C, GRAD_TOL);
    float *d = minus(dw, dw0, C);
    ref_check_grad("rmsnorm dw (accumulated)", d, gw, C, GRAD_TOL);
    check_norm_residual("rmsnorm", R, C, x, w, rstd, NULL, r);
    /* wrong: dx = rstd dy w, forgetting that rstd depends on x */
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            dx[i * C + j] = rstd[i] * r[i * C + j] * w[j];
    expect_caught("rmsnorm dx without the rstd term", dx, gx, R * C);

    /* The residual add fused in front: bitwise rt_add then rt_rmsnorm_fwd,
     * also with the sum written over an operand (as the programs may). */
    float *a = fnew(R * C), *s = fnew(R * C), *y2 = fnew(R * C), rstd2[R];
    ref_fill(a, NULL, R * C, -1, 1);
    rt_add(s, a, r, R * C, R * C);
    rt_rmsnorm_fwd(y, rstd, s, w, R, C, 1e-5f);
    rt_add_rmsnorm_fwd(a, y2, rstd2, a, r, w, R, C, 1e-5f);
    CHECK(!memcmp(a, s, sizeof(float) * R * C), "add_rmsnorm_fwd: the sum differs from rt_add's");
    CHECK(!memcmp(y2, y, sizeof(float) * R * C) && !memcmp(rstd2, rstd, sizeof rstd),
          "add_rmsnorm_fwd: y or rstd differ from rt_rmsnorm_fwd's of the sum");
    printf("  %-44s bitwise rt_add, rt_rmsnorm_fwd\n", "add_rmsnorm_fwd (sum over a)");
    free(a), free(s), free(y2);
    free(d), free(dx), free(dw0), free(dw), free(gx), free(gw), free(x), free(w), free(r), free(y);
    free(c.x), free(c.w), free(c.r), free(c.y);
}

static void test_layernorm(void)
{
    printf("layernorm\n");
    enum { R = 5, C = 12 };
    NormCtx c = {dnew(R * C), dnew(C), dnew(C), dnew(R * C), dnew(R * C), R, C, 1e-5};
    float *x = fnew(R * C), *w = fnew(C), *b = fnew(C), *r = fnew(R * C), *y = fnew(R * C);
    float mean[R], rstd[R];
    ref_fill(x, c.x, R * C, -2, 3);
    ref_fill(w, c.w, C, 0.5, 1.5);
    ref_fill(b, c.b, C, -0.5, 0.5);
    ref_fill(r, c.r, R * C, -1, 1);
    rt_layernorm_fwd(y, mean, rstd, x, w, b, R, C, 1e-5f);
    ref_layernorm(c.y, c.x, c.w, c.b, R, C, 1e-5);
    CHECK(ref_close("layernorm fwd", y, c.y, R * C, FWD_TOL, 1e-30), "layernorm fwd");

    float *dx = fnew(R * C), *dw0 = fnew(C), *dw = fnew(C), *db0 = fnew(C), *db = fnew(C);
    ref_fill(dw0, NULL, C, -1, 1);
    ref_fill(db0, NULL, C, -1, 1);
    memcpy(dw, dw0, sizeof(float) * C);
    memcpy(db, db0, sizeof(float) * C);
    rt_layernorm_bwd(dx, dw, db, x, w, mean, rstd, r, NULL, R, C);
    double *gx = dnew(R * C), *gw = dnew(C), *gb = dnew(C);
    ref_fd_grad(ln_loss, &c, c.x, R * C, FD_H, gx);
    ref_fd_grad(ln_loss, &c, c.w, C, FD_H, gw);
    ref_fd_grad(ln_loss, &c, c.b, C, FD_H, gb);
    ref_check_grad("layernorm dx", dx, gx, R * C, GRAD_TOL);
    float *d1 = minus(dw, dw0, C), *d2 = minus(db, db0, C);
    ref_check_grad("layernorm dw (accumulated)", d1, gw, C, GRAD_TOL);
    ref_check_grad("layernorm db (accumulated)", d2, gb, C, GRAD_TOL);
    check_norm_residual("layernorm", R, C, x, w, rstd, mean, r);

    /* The residual add fused in front, as for rmsnorm. */
    float *a = fnew(R * C), *s = fnew(R * C), *y2 = fnew(R * C), mean2[R], rstd2[R];
    ref_fill(a, NULL, R * C, -1, 1);
    rt_add(s, a, r, R * C, R * C);
    rt_layernorm_fwd(y, mean, rstd, s, w, b, R, C, 1e-5f);
    rt_add_layernorm_fwd(a, y2, mean2, rstd2, a, r, w, b, R, C, 1e-5f);
    CHECK(!memcmp(a, s, sizeof(float) * R * C), "add_layernorm_fwd: the sum differs from rt_add's");
    CHECK(!memcmp(y2, y, sizeof(float) * R * C) && !memcmp(mean2, mean, sizeof mean) &&
              !memcmp(rstd2, rstd, sizeof rstd),
          "add_layernorm_fwd: y, mean or rstd differ from rt_layernorm_fwd's of the sum");
    printf("  %-44s bitwise rt_add, rt_layernorm_fwd\n", "add_layernorm_fwd (sum over a)");
    free(a), free(s), free(y2);
    free(d1), free(d2), free(dx), free(dw0), free(dw), free(db0), free(db), free(gx), free(gw);
    free(gb), free(x), free(w), free(b), free(r), free(y);
    free(c.x), free(c.w), free(c.b), free(c.r), free(c.y);
}

/* ------------------------------------------------------------------ rope */
typedef struct {
    double *x, *r, *y;
    int64_t outer, seq, inner, dim, off;
    double theta;
} RopeCtx;

static double rope_loss(void *p)
{
    RopeCtx *c = p;
    ref_rope(c->y, c->x, c->outer, c->seq, c->inner, c->dim, c->off, c->theta);
    return dot(c->r, c->y, c->outer * c->seq * c->inner * c->dim);
}

static void test_rope(void)
{
    printf("rope\n");
    enum { O = 2, S = 5, I = 3, DM = 8, N = O * S * I * DM };
    RopeCtx c = {dnew(N), dnew(N), dnew(N), O, S, I, DM, 3, 100.0};
    float *x = fnew(N), *r = fnew(N), *y = fnew(N), *dx = fnew(N);
    ref_fill(x, c.x, N, -1, 1);
    ref_fill(r, c.r, N, -1, 1);
    rt_rope(y, x, O, S, I, DM, 3, 100.0f, false);
    ref_rope(c.y, c.x, O, S, I, DM, 3, 100.0);
    CHECK(ref_close("rope fwd (pos offset 3)", y, c.y, N, FWD_TOL, 1e-30), "rope fwd");
    /* in place gives the same */
    float *z = fnew(N);
    memcpy(z, x, sizeof(float) * N);
    rt_rope(z, z, O, S, I, DM, 3, 100.0f, false);
    CHECK(memcmp(z, y, sizeof(float) * N) == 0, "rope in place differs from out of place");
    rt_rope(dx, r, O, S, I, DM, 3, 100.0f, true);
    double *g = dnew(N);
    ref_fd_grad(rope_loss, &c, c.x, N, FD_H, g);
    ref_check_grad("rope dx (inverse rotation)", dx, g, N, GRAD_TOL);
    rt_rope(dx, r, O, S, I, DM, 3, 100.0f, false);
    expect_caught("rope dx by the forward rotation", dx, g, N);
    free(z), free(g), free(x), free(r), free(y), free(dx), free(c.x), free(c.r), free(c.y);
}

/* ------------------------------------------------------------- attention */
typedef struct {
    double *q, *k, *v, *r, *o;
    int64_t B, S, H, KVH, D, window;
    bool causal;
} AttnCtx;

static double attn_loss(void *p)
{
    AttnCtx *c = p;
    ref_attention(c->o, NULL, c->q, c->k, c->v, c->B, c->S, c->H, c->KVH, c->D, c->causal,
                  c->window);
    return dot(c->r, c->o, c->B * c->S * c->H * c->D);
}

static float *to_float(const double *d, int64_t n)
{
    float *f = fnew(n);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)d[i];
    return f;
}

/* Forward against the explicit softmax; backward against the written-out
 * double gradients (ref_attention_bwd), which `fd` checks against central
 * differences first (affordable at small sizes only). */
static void test_attention_case(int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
                                bool causal, int64_t window, bool fd)
{
    printf("attention B=%lld S=%lld H=%lld KVH=%lld D=%lld %s", (long long)B, (long long)S,
           (long long)H, (long long)KVH, (long long)D, causal ? "causal" : "full");
    if (window)
        printf(" window %lld", (long long)window);
    printf("\n");
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    AttnCtx c = {dnew(nq), dnew(nk), dnew(nk), dnew(nq), dnew(nq), B, S, H, KVH, D, window, causal};
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *r = fnew(nq), *o = fnew(nq), *lse = fnew(nl);
    ref_fill(q, c.q, nq, -1.5, 1.5);
    ref_fill(k, c.k, nk, -1.5, 1.5);
    ref_fill(v, c.v, nk, -1, 1);
    ref_fill(r, c.r, nq, -1, 1);
    rt_attention_fwd(o, lse, q, k, v, B, S, H, KVH, D, causal, window);
    double *lref = dnew(nl);
    ref_attention(c.o, lref, c.q, c.k, c.v, B, S, H, KVH, D, causal, window);
    CHECK(ref_close("attention o vs softmax(QK^T)V", o, c.o, nq, FWD_TOL, 1e-30), "attention o");
    CHECK(ref_close("attention lse", lse, lref, nl, FWD_TOL, 1e-30), "attention lse");

    float *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
    rt_attention_bwd(dq, dk, dv, q, k, v, o, lse, r, B, S, H, KVH, D, causal, window);
    double *gq = dnew(nq), *gk = dnew(nk), *gv = dnew(nk);
    ref_attention_bwd(gq, gk, gv, c.q, c.k, c.v, c.r, B, S, H, KVH, D, causal, window);
    if (fd) {
        double *fq = dnew(nq), *fk = dnew(nk), *fv = dnew(nk);
        ref_fd_grad(attn_loss, &c, c.q, nq, FD_H, fq);
        ref_fd_grad(attn_loss, &c, c.k, nk, FD_H, fk);
        ref_fd_grad(attn_loss, &c, c.v, nk, FD_H, fv);
        float *aq = to_float(gq, nq), *ak = to_float(gk, nk), *av = to_float(gv, nk);
        ref_check_grad("reference dq vs differences", aq, fq, nq, GRAD_TOL);
        ref_check_grad("reference dk vs differences", ak, fk, nk, GRAD_TOL);
        ref_check_grad("reference dv vs differences", av, fv, nk, GRAD_TOL);
        free(aq), free(ak), free(av), free(fq), free(fk), free(fv);
    }
    ref_check_grad("attention dq", dq, gq, nq, GRAD_TOL);
    ref_check_grad("attention dk (summed over the kv group)", dk, gk, nk, GRAD_TOL);
    ref_check_grad("attention dv (summed over the kv group)", dv, gv, nk, GRAD_TOL);
    if (causal && !window) { /* wrong: the backward forgets the mask */
        rt_attention_bwd(dq, dk, dv, q, k, v, o, lse, r, B, S, H, KVH, D, false, 0);
        expect_caught("attention dk without the causal mask", dk, gk, nk);
    }
    if (window && window < S) { /* wrong: the backward forgets the window */
        rt_attention_bwd(dq, dk, dv, q, k, v, o, lse, r, B, S, H, KVH, D, causal, 0);
        expect_caught("attention dk without the window", dk, gk, nk);
    }
    free(dq), free(dk), free(dv), free(gq), free(gk), free(gv), free(lref);
    free(q), free(k), free(v), free(r), free(o), free(lse);
    free(c.q), free(c.k), free(c.v), free(c.r), free(c.o);
}

/* A window as long as the sequence is plain causal attention, bit for bit. */
static void test_attention_long_window(void)
{
    printf("attention window >= S is causal\n");
    enum { B = 1, S = 40, H = 2, KVH = 1, D = 8 };
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *o1 = fnew(nq), *o2 = fnew(nq);
    float *l1 = fnew(nl), *l2 = fnew(nl);
    ref_fill(q, NULL, nq, -1.5, 1.5);
    ref_fill(k, NULL, nk, -1.5, 1.5);
    ref_fill(v, NULL, nk, -1, 1);
    rt_attention_fwd(o1, l1, q, k, v, B, S, H, KVH, D, true, 0);
    rt_attention_fwd(o2, l2, q, k, v, B, S, H, KVH, D, true, S);
    CHECK(!memcmp(o1, o2, (size_t)nq * sizeof *o1) && !memcmp(l1, l2, (size_t)nl * sizeof *l1),
          "attention with window %d of %d differs from causal", S, S);
    free(q), free(k), free(v), free(o1), free(o2), free(l1), free(l2);
}

/* A window of 1: each query sees only its own key, so o = v and the exact
 * dq and dk are 0 (dS = P (dP - D) with dP_ii = D_i). The kernel sums D_i as
 * its dP tile sums dP_ii, so it gives exact zeros too; the CUDA tests
 * compare against this output, where rounding noise would be all the
 * reference has. Head dims with and without padding, on each set (the
 * _avx2 and _sse2 runs of this program). */
static void test_attention_window_one(void)
{
    printf("attention window 1: o = v, dq = dk = 0 exactly\n");
    for (int64_t D = 8; D <= 80; D += 72) {
        const int64_t B = 1, S = 50, H = 3, KVH = 1;
        int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
        float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *o = fnew(nq), *l = fnew(nl);
        float *g = fnew(nq), *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
        ref_fill(q, NULL, nq, -2, 2);
        ref_fill(k, NULL, nk, -2, 2);
        ref_fill(v, NULL, nk, -1, 1);
        ref_fill(g, NULL, nq, -1, 1);
        rt_attention_fwd(o, l, q, k, v, B, S, H, KVH, D, true, 1);
        rt_attention_bwd(dq, dk, dv, q, k, v, o, l, g, B, S, H, KVH, D, true, 1);
        int bad_o = 0, bad_q = 0, bad_k = 0;
        for (int64_t i = 0; i < nq; i++) {
            int64_t s = i / (H * D), d = i % D;
            bad_o += o[i] != v[s * D + d];
            bad_q += dq[i] != 0.0f;
        }
        for (int64_t i = 0; i < nk; i++)
            bad_k += dk[i] != 0.0f;
        CHECK(!bad_o && !bad_q && !bad_k, "window 1, D %lld: %d outputs differ from v, %d dq and %d dk "
              "not 0", (long long)D, bad_o, bad_q, bad_k);
        free(q), free(k), free(v), free(o), free(l), free(g), free(dq), free(dk), free(dv);
    }
}

/* The window skips key tiles instead of masking them: on one thread, a
 * window of 32 over 1024 positions costs a fraction of causal attention
 * (tiles seen per query block: at most 3 of 32 keys instead of ~16). CPU
 * time of this thread, so other processes do not matter; the bound leaves a
 * 2.5x margin over the expected ~0.2. */
static void test_attention_window_cost(void)
{
    printf("attention window skips work\n");
    enum { B = 1, S = 1024, H = 2, KVH = 1, D = 32 };
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *o = fnew(nq), *l = fnew(nl);
    float *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
    ref_fill(q, NULL, nq, -1, 1);
    ref_fill(k, NULL, nk, -1, 1);
    ref_fill(v, NULL, nk, -1, 1);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    double t[2];
    for (int w = 0; w < 2; w++) {
        double t0 = thread_cpu();
        for (int rep = 0; rep < 2; rep++) {
            rt_attention_fwd(o, l, q, k, v, B, S, H, KVH, D, true, w ? 32 : 0);
            rt_attention_bwd(dq, dk, dv, q, k, v, o, l, q, B, S, H, KVH, D, true, w ? 32 : 0);
        }
        t[w] = thread_cpu() - t0;
    }
    omp_set_num_threads(threads);
    printf("  causal %.3f s, window 32: %.3f s (%.2f)\n", t[0], t[1], t[1] / t[0]);
    CHECK(t[1] < 0.5 * t[0], "a window of 32 of 1024 costs %.2f of causal attention", t[1] / t[0]);
    free(q), free(k), free(v), free(o), free(l), free(dq), free(dk), free(dv);
}

static void test_attention(void)
{
    test_attention_case(2, 5, 4, 2, 8, true, 0, true);  /* GQA, causal */
    test_attention_case(2, 5, 4, 2, 8, false, 0, true); /* GQA, full */
    test_attention_case(1, 6, 3, 3, 4, true, 0, true);  /* MHA */
    test_attention_case(1, 4, 4, 1, 4, false, 0, true); /* MQA */
    test_attention_case(1, 7, 2, 1, 4, true, 3, true);  /* sliding window */
    /* Sizes that cross the kernel's blocks: query blocks of 16 with a ragged
     * last one, key tiles of 32, head dims padded to 16 (20 -> 32: one
     * vector at a time; 72 -> 80: four, then one). */
    test_attention_case(2, 70, 4, 2, 20, true, 0, false);
    test_attention_case(1, 70, 2, 2, 72, false, 0, false);
    test_attention_case(1, 100, 4, 1, 16, true, 24, false); /* window inside a tile */
    test_attention_case(1, 100, 2, 2, 8, true, 40, false);  /* window across tiles */
    test_attention_case(1, 40, 2, 1, 8, true, 2, false);    /* two keys a query */
    test_attention_long_window();
    test_attention_window_one();
    test_attention_window_cost();
}

/* ------------------------------------------------------------- pointwise */
typedef struct {
    double *x, *r, *y;
    int64_t n;
    void (*f)(double *, const double *, int64_t);
} PwCtx;

static double pw_loss(void *p)
{
    PwCtx *c = p;
    c->f(c->y, c->x, c->n);
    return dot(c->r, c->y, c->n);
}

static void test_activation(const char *name, void (*fwd)(rt_act *, const rt_act *, int64_t),
                            void (*bwd)(rt_act *, const rt_act *, const rt_act *, int64_t),
                            void (*ref)(double *, const double *, int64_t))
{
    printf("%s\n", name);
    enum { N = 40 };
    PwCtx c = {dnew(N), dnew(N), dnew(N), N, ref};
    float *x = fnew(N), *r = fnew(N), *y = fnew(N), *dx = fnew(N);
    ref_fill(x, c.x, N, -4, 4);
    ref_fill(r, c.r, N, -1, 1);
    fwd(y, x, N);
    ref(c.y, c.x, N);
    char what[64];
    snprintf(what, sizeof what, "%s fwd", name);
    CHECK(ref_close(what, y, c.y, N, FWD_TOL, 1e-30), "%s", what);
    bwd(dx, x, r, N);
    double *g = dnew(N);
    ref_fd_grad(pw_loss, &c, c.x, N, FD_H, g);
    snprintf(what, sizeof what, "%s dx", name);
    ref_check_grad(what, dx, g, N, GRAD_TOL);
    free(g), free(x), free(r), free(y), free(dx), free(c.x), free(c.r), free(c.y);
}

/* sigmoid's backward reads its output: through the forward here, so the
 * activation test's finite differences (in x) check it. */
static void ref_sigmoid(double *y, const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = 1.0 / (1.0 + exp(-x[i]));
}

static void sigmoid_bwd_of_x(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    float *y = fnew(n);
    rt_sigmoid_fwd(y, x, n);
    rt_sigmoid_bwd(dx, y, dy, n);
    free(y);
}

/* Fused SwiGLU, y = silu(a) b: against the double reference, both gradients
 * by finite differences (a and b side by side in one vector), and in place. */
typedef struct {
    double *ab, *r, *y;
    int64_t n;
} SwiCtx;

static double swi_loss(void *p)
{
    SwiCtx *c = p;
    ref_silu(c->y, c->ab, c->n);
    for (int64_t i = 0; i < c->n; i++)
        c->y[i] *= c->ab[c->n + i];
    return dot(c->r, c->y, c->n);
}

static void test_swiglu(void)
{
    printf("swiglu\n");
    enum { N = 40 };
    SwiCtx c = {dnew(2 * N), dnew(N), dnew(N), N};
    float *ab = fnew(2 * N), *r = fnew(N), *y = fnew(N), *d = fnew(2 * N);
    ref_fill(ab, c.ab, N, -4, 4);
    ref_fill(ab + N, c.ab + N, N, -2, 2);
    ref_fill(r, c.r, N, -1, 1);
    rt_swiglu_fwd(y, ab, ab + N, N);
    swi_loss(&c);
    CHECK(ref_close("swiglu fwd", y, c.y, N, FWD_TOL, 1e-30), "swiglu fwd");
    rt_swiglu_bwd(d, d + N, ab, ab + N, r, N);
    double *g = dnew(2 * N);
    ref_fd_grad(swi_loss, &c, c.ab, 2 * N, FD_H, g);
    ref_check_grad("swiglu da", d, g, N, GRAD_TOL);
    ref_check_grad("swiglu db", d + N, g + N, N, GRAD_TOL);
    rt_swiglu_bwd(ab, ab + N, ab, ab + N, r, N); /* da over a, db over b */
    CHECK(memcmp(ab, d, 2 * N * sizeof(float)) == 0, "swiglu bwd in place differs from out of place");
    free(g), free(ab), free(r), free(y), free(d), free(c.ab), free(c.r), free(c.y);
}

/* add / mul with b broadcast over a's rows; the gradient of b is a
 * reduce_rows, the gradient of a a broadcast mul (or dy itself for add). */
typedef struct {
    double *a, *b, *r, *y;
    int64_t n, nb;
    bool mul;
} BinCtx;

static double bin_loss(void *p)
{
    BinCtx *c = p;
    for (int64_t i = 0; i < c->n; i++)
        c->y[i] = c->mul ? c->a[i] * c->b[i % c->nb] : c->a[i] + c->b[i % c->nb];
    return dot(c->r, c->y, c->n);
}

static void test_binary(bool mul, int64_t rows, int64_t nb)
{
    printf("%s, b broadcast over %lld rows of %lld\n", mul ? "mul" : "add", (long long)rows,
           (long long)nb);
    int64_t n = rows * nb;
    BinCtx c = {dnew(n), dnew(nb), dnew(n), dnew(n), n, nb, mul};
    float *a = fnew(n), *b = fnew(nb), *r = fnew(n), *y = fnew(n);
    ref_fill(a, c.a, n, -2, 2);
    ref_fill(b, c.b, nb, -2, 2);
    ref_fill(r, c.r, n, -1, 1);
    (mul ? rt_mul : rt_add)(y, a, b, n, nb);
    bin_loss(&c);
    CHECK(ref_close(mul ? "mul fwd" : "add fwd", y, c.y, n, FWD_TOL, 1e-30), "binary fwd");
    /* out aliasing a */
    float *z = fnew(n);
    memcpy(z, a, sizeof(float) * n);
    (mul ? rt_mul : rt_add)(z, z, b, n, nb);
    CHECK(memcmp(z, y, sizeof(float) * n) == 0, "binary op in place differs");

    float *da = fnew(n), *db = fnew(nb), *t = fnew(n);
    if (mul) {
        rt_mul(da, r, b, n, nb); /* da = dy * b (broadcast) */
        rt_mul(t, r, a, n, n);   /* db = reduce_rows(dy * a) */
        rt_reduce_rows(db, t, rows, nb, false);
    } else {
        memcpy(da, r, sizeof(float) * n);
        rt_reduce_rows(db, r, rows, nb, false);
    }
    double *ga = dnew(n), *gb = dnew(nb);
    ref_fd_grad(bin_loss, &c, c.a, n, FD_H, ga);
    ref_fd_grad(bin_loss, &c, c.b, nb, FD_H, gb);
    ref_check_grad(mul ? "mul da" : "add da", da, ga, n, GRAD_TOL);
    ref_check_grad(mul ? "mul db via reduce_rows" : "add db via reduce_rows", db, gb, nb,
                   GRAD_TOL);
    /* reduce_rows accumulate=true adds onto out */
    float *db0 = fnew(nb), *db2 = fnew(nb);
    ref_fill(db0, NULL, nb, -1, 1);
    memcpy(db2, db0, sizeof(float) * nb);
    rt_reduce_rows(db2, mul ? t : r, rows, nb, true);
    float *d = minus(db2, db0, nb);
    ref_check_grad("reduce_rows accumulate", d, gb, nb, GRAD_TOL);
    free(d), free(db0), free(db2), free(z), free(da), free(db), free(t), free(ga), free(gb);
    free(a), free(b), free(r), free(y), free(c.a), free(c.b), free(c.r), free(c.y);
}

/* --------------------------------------------------------------- softmax */
typedef struct {
    double *x, *r, *y;
    int64_t rows, cols;
} SmCtx;

static double sm_loss(void *p)
{
    SmCtx *c = p;
    ref_softmax(c->y, c->x, c->rows, c->cols);
    return dot(c->r, c->y, c->rows * c->cols);
}

static void test_softmax(void)
{
    printf("softmax\n");
    enum { R = 4, C = 9, N = R * C };
    SmCtx c = {dnew(N), dnew(N), dnew(N), R, C};
    float *x = fnew(N), *r = fnew(N), *y = fnew(N), *dx = fnew(N);
    ref_fill(x, c.x, N, -3, 3);
    ref_fill(r, c.r, N, -1, 1);
    rt_softmax_fwd(y, x, R, C);
    ref_softmax(c.y, c.x, R, C);
    CHECK(ref_close("softmax fwd", y, c.y, N, FWD_TOL, 1e-30), "softmax fwd");
    rt_softmax_bwd(dx, y, r, R, C);
    double *g = dnew(N);
    ref_fd_grad(sm_loss, &c, c.x, N, FD_H, g);
    ref_check_grad("softmax dx", dx, g, N, GRAD_TOL);
    free(g), free(x), free(r), free(y), free(dx), free(c.x), free(c.r), free(c.y);
}

/* --------------------------------------------------------- cross-entropy */
typedef struct {
    double *logits;
    const int32_t *targets;
    int64_t rows, vocab, total;
    double dloss;
} CeCtx;

static double ce_loss(void *p)
{
    CeCtx *c = p;
    return c->dloss * ref_cross_entropy(NULL, c->logits, c->targets, c->rows, c->vocab, c->total);
}

static void test_cross_entropy(void)
{
    printf("cross_entropy\n");
    enum { R = 6, V = 13, TOTAL = 24 };
    static const int32_t targets[R] = {0, 12, 5, 5, 7, 1};
    CeCtx c = {dnew(R * V), targets, R, V, TOTAL, 0.75};
    float *logits = fnew(R * V), lse[R], loss = 0.5f;
    ref_fill(logits, c.logits, R * V, -4, 4);
    rt_cross_entropy_fwd(&loss, lse, logits, targets, R, V, 0, TOTAL, 1.0f, NULL);
    double lref[R];
    double want = ref_cross_entropy(lref, c.logits, targets, R, V, TOTAL);
    float got = loss - 0.5f;
    CHECK(ref_close("cross_entropy loss (added to *loss)", &got, &want, 1, FWD_TOL, 1e-30),
          "ce loss");
    CHECK(ref_close("cross_entropy lse", lse, lref, R, FWD_TOL, 1e-30), "ce lse");
    float *dl = fnew(R * V);
    rt_cross_entropy_bwd(dl, logits, targets, lse, 0.75f, R, V, 0, TOTAL);
    double *g = dnew(R * V);
    ref_fd_grad(ce_loss, &c, c.logits, R * V, FD_H, g);
    ref_check_grad("cross_entropy dlogits", dl, g, R * V, GRAD_TOL);
    /* Over the logits, as the generated programs call it (ir_grad_in_place):
     * the same values to the bit. */
    rt_cross_entropy_bwd(logits, logits, targets, lse, 0.75f, R, V, 0, TOTAL);
    CHECK(memcmp(logits, dl, sizeof(float) * R * V) == 0, "ce dlogits over logits differ from out of place");
    free(g), free(dl), free(logits), free(c.logits);

    /* A vocabulary of several of the kernel's chunks (512), with the row
     * maxima in later chunks than the first, so the running sum is rescaled
     * (and one row whose first chunk holds the max). */
    enum { R2 = 4, V2 = 1800 };
    static const int32_t t2[R2] = {3, 1799, 900, 512};
    float *l2 = fnew(R2 * V2), lse2[R2], loss2 = 0.0f;
    double *d2 = dnew(R2 * V2), lref2[R2];
    ref_fill(l2, d2, R2 * V2, -4, 4);
    for (int r = 0; r < R2; r++)
        for (int j = 0; j < V2; j++) { /* rising: the last chunk holds the max (but row 3) */
            float x = l2[r * V2 + j] + (r == 3 ? -0.01f : 0.01f) * (float)j;
            l2[r * V2 + j] = x, d2[r * V2 + j] = x;
        }
    rt_cross_entropy_fwd(&loss2, lse2, l2, t2, R2, V2, 0, R2, 1.0f, NULL);
    double want2 = ref_cross_entropy(lref2, d2, t2, R2, V2, R2);
    CHECK(ref_close("cross_entropy loss, 4 chunks a row", &loss2, &want2, 1, FWD_TOL, 1e-30),
          "ce loss (chunks)");
    CHECK(ref_close("cross_entropy lse, 4 chunks a row", lse2, lref2, R2, FWD_TOL, 1e-30),
          "ce lse (chunks)");
    free(l2), free(d2);

    /* Multi-token prediction's loss: rows without a target (-1) add nothing
     * and take no gradient; the weight scales the loss (the backward's
     * dloss carries it). The same as the rows with targets alone. */
    enum { R3 = 5, V3 = 7 };
    static const int32_t t3[R3] = {2, -1, 6, 0, -1}, t3v[3] = {2, 6, 0};
    float *l3 = fnew(R3 * V3), *v3 = fnew(3 * V3), lse3[R3], lsev[3], loss3 = 0, lossv = 0;
    double *d3 = dnew(R3 * V3);
    ref_fill(l3, d3, R3 * V3, -4, 4);
    for (int r = 0, k = 0; r < R3; r++)
        if (t3[r] >= 0)
            memcpy(v3 + V3 * k++, l3 + V3 * r, sizeof(float) * V3);
    rt_cross_entropy_fwd(&loss3, lse3, l3, t3, R3, V3, 0, 3, 0.3f, NULL);
    rt_cross_entropy_fwd(&lossv, lsev, v3, t3v, 3, V3, 0, 3, 1.0f, NULL);
    CHECK(fabsf(loss3 - 0.3f * lossv) <= 1e-6f * fabsf(lossv), "ce: rows without target or the weight");
    float *dl3 = fnew(R3 * V3), *dlv = fnew(3 * V3);
    rt_cross_entropy_bwd(dl3, l3, t3, lse3, 0.3f, R3, V3, 0, 3);
    rt_cross_entropy_bwd(dlv, v3, t3v, lsev, 0.3f, 3, V3, 0, 3);
    bool same = true;
    for (int r = 0, k = 0; r < R3; r++) {
        for (int j = 0; j < V3; j++)
            same &= t3[r] < 0 ? dl3[r * V3 + j] == 0 : dl3[r * V3 + j] == dlv[k * V3 + j];
        k += t3[r] >= 0;
    }
    CHECK(same, "ce: a row without target takes no gradient, the others the targets-only kernel's");
    free(l3), free(v3), free(d3), free(dl3), free(dlv);
}

/* ------------------------------------------------------------- optimizer */
static void test_optimizer(void)
{
    printf("sumsq, adamw\n");
    enum { N = 50 };
    float x[N], s = 0.25f;
    double xd[N];
    ref_fill(x, xd, N, -2, 2);
    rt_sumsq(&s, x, N);
    double want = 0.25 + dot(xd, xd, N);
    float got = s;
    CHECK(ref_close("sumsq (added to *out)", &got, &want, 1, FWD_TOL, 1e-30), "sumsq");

    /* Three steps against torch.optim.AdamW's update written in double:
     * p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * p -= lr/(1-b1^t) m / (sqrt(v)/sqrt(1-b2^t) + eps). */
    float master[N], param[N], m[N] = {0}, v[N] = {0}, grad[N];
    double pm[N], dm[N] = {0}, dv[N] = {0};
    ref_fill(master, pm, N, -1, 1);
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.5;
    for (int step = 1; step <= 3; step++) {
        double gd[N];
        ref_fill(grad, gd, N, -1, 1);
        rt_adamw(master, param, grad, m, v, N, (float)lr, (float)b1, (float)b2, (float)eps,
                 (float)wd, (float)gs, step);
        for (int i = 0; i < N; i++) {
            double g = gd[i] * gs;
            pm[i] *= 1.0 - (double)(float)lr * (double)(float)wd;
            dm[i] = (double)(float)b1 * dm[i] + (1.0 - (double)(float)b1) * g;
            dv[i] = (double)(float)b2 * dv[i] + (1.0 - (double)(float)b2) * g * g;
            double bc1 = 1.0 - pow((double)(float)b1, step), bc2 = 1.0 - pow((double)(float)b2, step);
            pm[i] -= (double)(float)lr / bc1 * dm[i] / (sqrt(dv[i]) / sqrt(bc2) + (double)(float)eps);
        }
    }
    CHECK(ref_close("adamw master after 3 steps", master, pm, N, FWD_TOL, 1e-30), "adamw");
    CHECK(ref_close("adamw m", m, dm, N, FWD_TOL, 1e-30), "adamw m");
    CHECK(ref_close("adamw v", v, dv, N, FWD_TOL, 1e-30), "adamw v");
    CHECK(memcmp(master, param, sizeof master) == 0, "adamw: param must equal master on CPU");
    /* aliasing param and master is allowed on CPU */
    float a1[N], a2[N], m1[N] = {0}, v1[N] = {0}, m2[N] = {0}, v2[N] = {0}, p2[N];
    ref_fill(a1, NULL, N, -1, 1);
    memcpy(a2, a1, sizeof a1);
    rt_adamw(a1, a1, grad, m1, v1, N, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1);
    rt_adamw(a2, p2, grad, m2, v2, N, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1);
    CHECK(memcmp(a1, a2, sizeof a1) == 0, "adamw with param aliasing master differs");
}

/* ---------------------------------------------------------------- threads */
/* Every threaded kernel gives the same bits on 1 and on 3 threads (rows and
 * tasks are whole per thread; sums over rows use a fixed partition). Sizes
 * are above the kernels' thresholds for starting threads. */
#define SAME_ON_THREADS(what, out, bytes, ...)                                                     \
    do {                                                                                           \
        omp_set_num_threads(1);                                                                    \
        __VA_ARGS__;                                                                               \
        void *one_ = malloc(bytes);                                                                \
        memcpy(one_, out, bytes);                                                                  \
        omp_set_num_threads(3);                                                                    \
        __VA_ARGS__;                                                                               \
        CHECK(!memcmp(one_, out, bytes), "%s: 1 and 3 threads differ", what);                      \
        printf("  %-44s same on 1 and 3 threads\n", what);                                         \
        free(one_);                                                                                \
    } while (0)

static void test_threads(void)
{
    printf("threads\n");
    int threads = omp_get_max_threads();
    enum { R = 300, C = 130, N = 100000, V = 1000, RC = 64 };
    float *x = fnew(N), *y = fnew(N), *g = fnew(N), *w = fnew(C), *b = fnew(C), *out = fnew(N);
    float *dw = fnew(C), *db = fnew(C), *st1 = fnew(R), *st2 = fnew(R);
    ref_fill(x, NULL, N, -3, 3);
    ref_fill(g, NULL, N, -1, 1);
    ref_fill(w, NULL, C, 0.5, 1.5);
    ref_fill(b, NULL, C, -1, 1);
    size_t rc = (size_t)(R * C) * sizeof(float), cb = (size_t)C * sizeof(float);
    SAME_ON_THREADS("layernorm fwd", out, rc, rt_layernorm_fwd(out, st1, st2, x, w, b, R, C, 1e-5f));
    rt_layernorm_fwd(y, st1, st2, x, w, b, R, C, 1e-5f);
    SAME_ON_THREADS("layernorm bwd dx", out, rc,
                    memset(dw, 0, cb), memset(db, 0, cb),
                    rt_layernorm_bwd(out, dw, db, x, w, st1, st2, g, NULL, R, C));
    SAME_ON_THREADS("layernorm bwd dw", dw, cb, memset(dw, 0, cb), memset(db, 0, cb),
                    rt_layernorm_bwd(out, dw, db, x, w, st1, st2, g, NULL, R, C));
    SAME_ON_THREADS("layernorm bwd db", db, cb, memset(dw, 0, cb), memset(db, 0, cb),
                    rt_layernorm_bwd(out, dw, db, x, w, st1, st2, g, NULL, R, C));
    SAME_ON_THREADS("rmsnorm fwd", out, rc, rt_rmsnorm_fwd(out, st1, x, w, R, C, 1e-5f));
    SAME_ON_THREADS("add_rmsnorm fwd", out, rc, rt_add_rmsnorm_fwd(y, out, st1, x, g, w, R, C, 1e-5f));
    SAME_ON_THREADS("add_layernorm fwd", out, rc,
                    rt_add_layernorm_fwd(y, out, st1, st2, x, g, w, b, R, C, 1e-5f));
    SAME_ON_THREADS("rmsnorm bwd dw", dw, cb, memset(dw, 0, cb),
                    rt_rmsnorm_bwd(out, dw, x, w, st1, g, NULL, R, C));
    SAME_ON_THREADS("reduce_rows", dw, cb, rt_reduce_rows(dw, g, R, C, false));
    float ss = 0;
    SAME_ON_THREADS("sumsq", &ss, sizeof ss, ss = 0, rt_sumsq(&ss, g, N));
    SAME_ON_THREADS("softmax fwd", out, rc, rt_softmax_fwd(out, x, R, C));
    rt_softmax_fwd(y, x, R, C);
    SAME_ON_THREADS("softmax bwd", out, rc, rt_softmax_bwd(out, y, g, R, C));
    size_t nb = (size_t)N * sizeof(float);
    SAME_ON_THREADS("gelu fwd", out, nb, rt_gelu_fwd(out, x, N));
    SAME_ON_THREADS("gelu bwd", out, nb, rt_gelu_bwd(out, x, g, N));
    SAME_ON_THREADS("silu bwd", out, nb, rt_silu_bwd(out, x, g, N));
    SAME_ON_THREADS("swiglu fwd", out, nb, rt_swiglu_fwd(out, x, g, N));
    SAME_ON_THREADS("add (broadcast)", out, nb, rt_add(out, x, w, N - N % C, C));
    int32_t tg[RC];
    for (int i = 0; i < RC; i++)
        tg[i] = (i * 37) % V;
    float loss = 0, lse[RC];
    SAME_ON_THREADS("cross_entropy fwd", &loss, sizeof loss, loss = 0,
                    rt_cross_entropy_fwd(&loss, lse, x, tg, RC, V, 0, RC, 1.0f, NULL));
    SAME_ON_THREADS("cross_entropy bwd", out, (size_t)(RC * V) * sizeof(float),
                    rt_cross_entropy_bwd(out, x, tg, lse, 1.0f, RC, V, 0, RC));
    float *m = fnew(N), *v = fnew(N), *pm = fnew(N);
    SAME_ON_THREADS("adamw", pm, nb, memcpy(pm, x, nb), memset(m, 0, nb), memset(v, 0, nb),
                    rt_adamw(pm, pm, g, m, v, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1));
    float ls[2];
    SAME_ON_THREADS("lamb prepare (sums)", ls, sizeof ls, ls[0] = ls[1] = 0,
                    memset(m, 0, nb), memset(v, 0, nb),
                    rt_lamb_prepare(ls, x, g, m, v, N, 0.9f, 0.999f, 1e-6f, 0.01f, 1.0f, 1));
    SAME_ON_THREADS("lamb apply", pm, nb, memcpy(pm, x, nb),
                    rt_lamb_apply(pm, pm, m, v, N, 1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, 0.5f, 1));
    int32_t ids[500];
    for (int i = 0; i < 500; i++)
        ids[i] = (i * 7) % 50; /* repeated ids */
    SAME_ON_THREADS("embedding bwd", out, (size_t)(50 * C) * sizeof(float),
                    memset(out, 0, (size_t)(50 * C) * sizeof(float)),
                    rt_embedding_bwd(out, ids, g, 500, 50, 0, C));
    SAME_ON_THREADS("rope", out, (size_t)(2 * 64 * 4 * 64) * sizeof(float),
                    rt_rope(out, x, 2, 64, 4, 64, 3, 10000.0f, false));
    enum { B = 2, S = 70, H = 4, KVH = 2, D = 20 };
    int64_t nq = B * S * H * D, nk = B * S * KVH * D;
    float *o = fnew(nq), *l = fnew(B * S * H), *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
    SAME_ON_THREADS("attention fwd", o, (size_t)nq * sizeof(float),
                    rt_attention_fwd(o, l, x, g, y, B, S, H, KVH, D, true, 0));
    SAME_ON_THREADS("attention bwd dq", dq, (size_t)nq * sizeof(float),
                    rt_attention_bwd(dq, dk, dv, x, g, y, o, l, g, B, S, H, KVH, D, true, 0));
    SAME_ON_THREADS("attention bwd dk", dk, (size_t)nk * sizeof(float),
                    rt_attention_bwd(dq, dk, dv, x, g, y, o, l, g, B, S, H, KVH, D, true, 0));
    SAME_ON_THREADS("attention bwd dv (window)", dv, (size_t)nk * sizeof(float),
                    rt_attention_bwd(dq, dk, dv, x, g, y, o, l, g, B, S, H, KVH, D, true, 9));
    omp_set_num_threads(threads);
    free(o), free(l), free(dq), free(dk), free(dv), free(m), free(v), free(pm);
    free(x), free(y), free(g), free(w), free(b), free(out), free(dw), free(db), free(st1), free(st2);
}

/* rt_matmul splits a large GEMM into one block of rows (M >= N) or of
 * columns per thread: 3 threads (blocks of 112, 112 and 76 rows, or
 * columns), every transpose combination, overwriting and accumulating,
 * against the double reference. */
static void test_matmul_split(void)
{
    printf("matmul split over threads\n");
    int threads = omp_get_max_threads();
    omp_set_num_threads(3);
    static const int64_t shapes[2][3] = {{300, 170, 64}, {64, 300, 170}}; /* rows, columns */
    for (int sh = 0; sh < 2; sh++)
        for (int t = 0; t < 4; t++) {
            int64_t M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
            bool ta = t & 1, tb = t & 2;
            float *a = fnew(M * K), *b = fnew(K * N), *c = fnew(M * N), *c0 = fnew(M * N);
            double *da = dnew(M * K), *db = dnew(K * N), *want = dnew(M * N);
            ref_fill(a, da, M * K, -1, 1);
            ref_fill(b, db, K * N, -1, 1);
            ref_fill(c0, NULL, M * N, -1, 1);
            rt_matmul(c, a, b, M, N, K, ta, tb, false);
            ref_matmul(want, da, db, M, N, K, ta, tb);
            char name[64];
            snprintf(name, sizeof name, "matmul %s blocks ta=%d tb=%d", sh ? "column" : "row", ta, tb);
            CHECK(ref_close(name, c, want, M * N, FWD_TOL, 1e-30), "%s", name);
            memcpy(c, c0, (size_t)(M * N) * sizeof *c);
            rt_matmul(c, a, b, M, N, K, ta, tb, true);
            for (int64_t i = 0; i < M * N; i++)
                want[i] += c0[i];
            snprintf(name, sizeof name, "  accumulating");
            CHECK(ref_close(name, c, want, M * N, FWD_TOL, 1e-30), "%s", name);
            free(a), free(b), free(c), free(c0), free(da), free(db), free(want);
        }
    omp_set_num_threads(threads);
}

/* A wrong transpose in a matmul backward must be caught too. */
static void test_wrong_matmul_grad(void)
{
    printf("wrong gradients\n");
    enum { S = 6 };
    MatmulCtx x = {dnew(S * S), dnew(S * S), dnew(S * S), dnew(S * S), S, S, S, false, false};
    float a[S * S], b[S * S], r[S * S], da[S * S];
    ref_fill(a, x.a, S * S, -1, 1);
    ref_fill(b, x.b, S * S, -1, 1);
    ref_fill(r, x.r, S * S, -1, 1);
    double *g = dnew(S * S);
    ref_fd_grad(matmul_loss, &x, x.a, S * S, FD_H, g);
    rt_matmul(da, r, b, S, S, S, false, false, false); /* R B instead of R B^T */
    expect_caught("matmul dA = R B (missing transpose)", da, g, S * S);
    free(g), free(x.a), free(x.b), free(x.r), free(x.c);
}

/* Invalid inputs stop the program with a sentence (exit 1 without MPI). */
static void bad_embedding_id(void *arg)
{
    (void)arg;
    float table[4] = {0}, out[2];
    int32_t ids[1] = {-3};
    rt_embedding_fwd(out, ids, table, 1, 2, 0, 2);
}

static void bad_target(void *arg)
{
    (void)arg;
    float logits[3] = {0}, lse[1], loss = 0;
    int32_t t[1] = {3}; /* vocabulary of 3 */
    rt_cross_entropy_fwd(&loss, lse, logits, t, 1, 3, 0, 1, 1.0f, NULL);
}

static void bad_broadcast(void *arg)
{
    (void)arg;
    float a[5] = {0}, b[2] = {0}, out[5];
    rt_add(out, a, b, 5, 2);
}

static void bad_window(void *arg)
{
    float x[16] = {0}, lse[4];
    rt_attention_fwd(x, lse, x, x, x, 1, 2, 2, 2, 2, arg != NULL, arg ? -1 : 4);
}

static void bad_gqa(void *arg)
{
    (void)arg;
    float x[12] = {0}, lse[3];
    rt_attention_fwd(x, lse, x, x, x, 1, 1, 3, 2, 4, true, 0);
}

/* arg NULL: 5 GEMMs (one over RT_MATMUL_BATCH_MAX); else two whose Cs overlap. */
static void bad_batch(void *arg)
{
    float a[4] = {0}, b[4] = {0}, c[8];
    float *cp[5] = {c, arg ? c + 2 : c + 4, c, c, c};
    const float *ap[5] = {a, a, a, a, a}, *bp[5] = {b, b, b, b, b};
    rt_matmul_batch(arg ? 2 : 5, cp, ap, bp, 2, 2, 2, false, false, false);
}

static void test_fatal(void)
{
    printf("invalid inputs\n");
    ref_expect_fatal("embedding id -3", bad_embedding_id, NULL, "token id -3");
    ref_expect_fatal("cross_entropy target 3 of 3", bad_target, NULL, "outside the vocabulary");
    ref_expect_fatal("add: 5 elements, b of 2", bad_broadcast, NULL, "do not repeat");
    ref_expect_fatal("attention 3 heads on 2 kv heads", bad_gqa, NULL, "do not group");
    ref_expect_fatal("attention window without causal", bad_window, NULL, "needs causal");
    ref_expect_fatal("attention window -1", bad_window, "neg", "negative");
    ref_expect_fatal("matmul batch of 5 GEMMs", bad_batch, NULL, "count 5 outside");
    ref_expect_fatal("matmul batch, Cs overlapping", bad_batch, "overlap", "overlaps");
}

int main(void)
{
    ref_seed(20240520);
    test_matmul();
    test_matmul_split();
    test_matmul_batch();
    test_embedding();
    test_rmsnorm();
    test_layernorm();
    test_rope();
    test_attention();
    test_activation("silu", rt_silu_fwd, rt_silu_bwd, ref_silu);
    test_activation("gelu (tanh)", rt_gelu_fwd, rt_gelu_bwd, ref_gelu);
    test_activation("sigmoid", rt_sigmoid_fwd, sigmoid_bwd_of_x, ref_sigmoid);
    test_swiglu();
    test_binary(false, 4, 6);
    test_binary(true, 4, 6);
    test_binary(true, 1, 10); /* equal shapes */
    test_softmax();
    test_cross_entropy();
    test_optimizer();
    test_threads();
    test_wrong_matmul_grad();
    test_fatal();
    return check_status("rt_kernels");
}
