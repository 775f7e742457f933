/* test_attention_pos.c: attention over chunked positions
 * (rt_attention_pos_fwd/bwd), the kernel of all-gather context parallelism.
 *
 *   - one chunk of S rows at position 0 each side is rt_attention_fwd/bwd,
 *     bit for bit; so is the same sequence cut into chunks in order;
 *   - context parallelism simulated in one process: the sequence split over
 *     cp ranks (cp 2 and 4), contiguously or load-balanced (2 cp chunks,
 *     rank r holding chunks r and 2 cp - 1 - r), K and V all-gathered in rank
 *     order; each rank attends its own query rows against every key. Its o,
 *     lse and dq must equal the matching rows of the single-device attention
 *     and dk, dv summed over the ranks the single-device dk, dv (FWD_TOL,
 *     GRAD_TOL scale-relative, as test_kernels.c), both rt_attention_fwd/bwd's
 *     and the double reference's (tests/runtime/ref.c). Causal and full masks,
 *     windows shorter than a chunk and spanning chunks, grouped-query and
 *     multi-head attention, B = 2, chunks that are and are not multiples of
 *     the kernel's tiles (32 keys, 16 queries), head dims 16 and 24;
 *   - a query that sees no key gets o = 0, lse = -inf, dq = 0, and keys no
 *     query sees get dk = dv = 0;
 *   - results do not depend on the thread count (bitwise);
 *   - bad chunkings are refused (rt_fatal; the rt_fatal_* tests run them).
 * Outputs start as NaN, so an element a kernel forgets fails. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"
#include "rt.h"

#define FWD_TOL 2e-6
#define GRAD_TOL 1e-5

static float *fnew(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static bool same(const float *a, const float *b, int64_t n)
{
    return !memcmp(a, b, (size_t)n * sizeof *a);
}

/* max |got - want| / max |want| (0 / 0 = 0); NaN anywhere gives infinity. */
static double rel_err(const float *got, const double *want, int64_t n)
{
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d == d))
            return INFINITY;
        e = d > e ? d : e;
        s = fabs(want[i]) > s ? fabs(want[i]) : s;
    }
    return s > 0 ? e / s : e;
}

static void close_to(const char *what, const char *tag, const float *got, const double *want,
                     int64_t n, double tol)
{
    double e = rel_err(got, want, n);
    CHECK(e <= tol, "%s %s: relative error %.3g > %.3g", what, tag, e, tol);
}

static double *dnew(int64_t n)
{
    return malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
}

typedef struct {
    int64_t B, S, H, KVH, D;
    bool causal;
    int64_t window;
} Shape;

/* Rows [r0, r0 + n) of each batch of a [B, S, X] tensor to/from a [B, n, X]
 * one at row d0 of its d-long sequence. */
static void copy_rows(float *dst, int64_t dlen, int64_t d0, const float *src, int64_t slen, int64_t s0,
                      int64_t n, int64_t B, int64_t X)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(dst + (b * dlen + d0) * X, src + (b * slen + s0) * X, (size_t)(n * X) * sizeof *dst);
}

static void copy_rows_d(double *dst, int64_t dlen, int64_t d0, const double *src, int64_t slen,
                        int64_t s0, int64_t n, int64_t B, int64_t X)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(dst + (b * dlen + d0) * X, src + (b * slen + s0) * X, (size_t)(n * X) * sizeof *dst);
}

/* (a) chunk = S at position 0 is rt_attention_fwd/bwd bitwise; and the
 * sequence cut into nc chunks in order (positions 0, c, 2c, ...) too: the
 * same tiles, and each row's intervals merge into the one-chunk interval. */
static void test_one_chunk(Shape s, int64_t nc)
{
    int64_t B = s.B, S = s.S, H = s.H, KVH = s.KVH, D = s.D, W = s.window;
    printf("pos = plain: B=%lld S=%lld H=%lld KVH=%lld D=%lld %s window %lld, %lld chunk(s)\n",
           (long long)B, (long long)S, (long long)H, (long long)KVH, (long long)D,
           s.causal ? "causal" : "full", (long long)W, (long long)nc);
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H, c = S / nc;
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *g = fnew(nq);
    ref_fill(q, NULL, nq, -1.5, 1.5), ref_fill(k, NULL, nk, -1.5, 1.5);
    ref_fill(v, NULL, nk, -1, 1), ref_fill(g, NULL, nq, -1, 1);
    float *o1 = fnew(nq), *l1 = fnew(nl), *dq1 = fnew(nq), *dk1 = fnew(nk), *dv1 = fnew(nk);
    float *o2 = fnew(nq), *l2 = fnew(nl), *dq2 = fnew(nq), *dk2 = fnew(nk), *dv2 = fnew(nk);
    int64_t pos[RT_ATTN_MAX_CHUNKS];
    for (int64_t i = 0; i < nc; i++)
        pos[i] = i * c;
    rt_attention_fwd(o1, l1, q, k, v, B, S, H, KVH, D, s.causal, W);
    rt_attention_bwd(dq1, dk1, dv1, q, k, v, o1, l1, g, B, S, H, KVH, D, s.causal, W);
    rt_attention_pos_fwd(o2, l2, q, k, v, B, S, S, H, KVH, D, s.causal, W, c, pos, pos);
    rt_attention_pos_bwd(dq2, dk2, dv2, q, k, v, o2, l2, g, B, S, S, H, KVH, D, s.causal, W, c, pos,
                         pos);
    CHECK(same(o1, o2, nq) && same(l1, l2, nl), "pos forward differs from rt_attention_fwd");
    CHECK(same(dq1, dq2, nq) && same(dk1, dk2, nk) && same(dv1, dv2, nk),
          "pos backward differs from rt_attention_bwd");
    free(q), free(k), free(v), free(g);
    free(o1), free(l1), free(dq1), free(dk1), free(dv1);
    free(o2), free(l2), free(dq2), free(dk2), free(dv2);
}

/* (b) context parallelism over cp ranks; balanced: 2 cp chunks, rank r
 * holding r and 2 cp - 1 - r; else cp contiguous chunks. Each rank's rows
 * are compared with the single-device attention twice: rt_attention_fwd/bwd
 * and the double reference of ref.c (independent of the kernel). */
static void test_cp(Shape s, int64_t cp, bool balanced)
{
    int64_t B = s.B, S = s.S, H = s.H, KVH = s.KVH, D = s.D, W = s.window;
    int64_t per = balanced ? 2 : 1, nc = cp * per, c = S / nc, Sl = per * c; /* local rows */
    char tag[160];
    snprintf(tag, sizeof tag, "[cp %lld %s, chunk %lld, B=%lld S=%lld H=%lld KVH=%lld D=%lld %s window %lld]",
             (long long)cp, balanced ? "balanced" : "contiguous", (long long)c, (long long)B,
             (long long)S, (long long)H, (long long)KVH, (long long)D, s.causal ? "causal" : "full",
             (long long)W);
    printf("cp %s\n", tag);
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *g = fnew(nq);
    double *want[2][5], *qd = dnew(nq), *kd = dnew(nk), *vd = dnew(nk), *gd = dnew(nq);
    ref_fill(q, qd, nq, -1.5, 1.5), ref_fill(k, kd, nk, -1.5, 1.5);
    ref_fill(v, vd, nk, -1, 1), ref_fill(g, gd, nq, -1, 1);
    { /* want[0]: rt_attention, want[1]: the reference; o, lse, dq, dk, dv */
        float *o = fnew(nq), *l = fnew(nl), *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
        rt_attention_fwd(o, l, q, k, v, B, S, H, KVH, D, s.causal, W);
        rt_attention_bwd(dq, dk, dv, q, k, v, o, l, g, B, S, H, KVH, D, s.causal, W);
        const float *f[5] = {o, l, dq, dk, dv};
        int64_t n[5] = {nq, nl, nq, nk, nk};
        for (int x = 0; x < 5; x++) {
            want[0][x] = dnew(n[x]), want[1][x] = dnew(n[x]);
            ref_to_double(want[0][x], f[x], n[x]);
        }
        ref_attention(want[1][0], want[1][1], qd, kd, vd, B, S, H, KVH, D, s.causal, W);
        ref_attention_bwd(want[1][2], want[1][3], want[1][4], qd, kd, vd, gd, B, S, H, KVH, D,
                          s.causal, W);
        free(o), free(l), free(dq), free(dk), free(dv);
    }

    /* chunk index (in the sequence) of local chunk i of rank r; the gathered
     * order is rank 0's chunks, rank 1's, ... */
    int64_t own[RT_ATTN_MAX_CHUNKS], kpos[RT_ATTN_MAX_CHUNKS];
    for (int64_t r = 0; r < cp; r++)
        for (int64_t i = 0; i < per; i++) {
            own[r * per + i] = balanced ? (i ? nc - 1 - r : r) : r;
            kpos[r * per + i] = own[r * per + i] * c;
        }
    float *kg = fnew(nk), *vg = fnew(nk); /* all-gathered K, V */
    for (int64_t x = 0; x < nc; x++) {
        copy_rows(kg, S, x * c, k, S, own[x] * c, c, B, KVH * D);
        copy_rows(vg, S, x * c, v, S, own[x] * c, c, B, KVH * D);
    }
    int64_t lq = B * Sl * H * D, ll = B * Sl * H;
    float *ql = fnew(lq), *gl = fnew(lq), *ol = fnew(lq), *lsel = fnew(ll), *dql = fnew(lq);
    float *dkr = fnew(nk), *dvr = fnew(nk), *dks = calloc((size_t)nk, sizeof *dks),
          *dvs = calloc((size_t)nk, sizeof *dvs);
    double *wl = dnew(lq);
    static const char *src[2] = {"vs rt_attention", "vs reference"};
    for (int64_t r = 0; r < cp; r++) {
        for (int64_t i = 0; i < per; i++) {
            copy_rows(ql, Sl, i * c, q, S, own[r * per + i] * c, c, B, H * D);
            copy_rows(gl, Sl, i * c, g, S, own[r * per + i] * c, c, B, H * D);
        }
        for (int64_t i = 0; i < lq; i++)
            ol[i] = dql[i] = NAN;
        rt_attention_pos_fwd(ol, lsel, ql, kg, vg, B, Sl, S, H, KVH, D, s.causal, W, c,
                             kpos + r * per, kpos);
        rt_attention_pos_bwd(dql, dkr, dvr, ql, kg, vg, ol, lsel, gl, B, Sl, S, H, KVH, D, s.causal,
                             W, c, kpos + r * per, kpos);
        for (int w = 0; w < 2; w++) {
            char what[64];
            static const char *nm[3] = {"o", "lse", "dq"};
            const float *got[3] = {ol, lsel, dql};
            for (int x = 0; x < 3; x++) {
                int64_t X = x == 1 ? H : H * D;
                for (int64_t i = 0; i < per; i++)
                    copy_rows_d(wl, Sl, i * c, want[w][x], S, own[r * per + i] * c, c, B, X);
                snprintf(what, sizeof what, "rank %lld %s %s", (long long)r, nm[x], src[w]);
                close_to(what, tag, got[x], wl, B * Sl * X, x == 2 ? GRAD_TOL : FWD_TOL);
            }
        }
        /* the reduce-scatter's sum, back in sequence order */
        for (int64_t x = 0; x < nc; x++)
            for (int64_t b = 0; b < B; b++)
                for (int64_t e = 0; e < c * KVH * D; e++) {
                    int64_t from = (b * S + x * c) * KVH * D + e, to = (b * S + own[x] * c) * KVH * D + e;
                    dks[to] += dkr[from];
                    dvs[to] += dvr[from];
                }
    }
    for (int w = 0; w < 2; w++) {
        char what[64];
        snprintf(what, sizeof what, "dk summed over ranks %s", src[w]);
        close_to(what, tag, dks, want[w][3], nk, GRAD_TOL);
        snprintf(what, sizeof what, "dv summed over ranks %s", src[w]);
        close_to(what, tag, dvs, want[w][4], nk, GRAD_TOL);
    }
    for (int w = 0; w < 2; w++)
        for (int x = 0; x < 5; x++)
            free(want[w][x]);
    free(q), free(k), free(v), free(g), free(qd), free(kd), free(vd), free(gd);
    free(kg), free(vg), free(ql), free(gl), free(ol), free(lsel), free(dql), free(dkr), free(dvr);
    free(dks), free(dvs), free(wl);
}

/* Queries at positions 0 .. 2c-1 against keys at 5 .. 5+c-1 and 3c .. 4c-1
 * (causal, window w): a query before 5 sees nothing (o = 0, lse = -inf,
 * dq = 0); keys of the later chunk are seen by nobody (dk = dv = 0). The
 * rows that see keys match plain attention over the keys they see, which
 * the same queries against the first key chunk alone give: the later chunk
 * adds nothing, bit for bit. */
static void test_unseen(int64_t window)
{
    printf("rows and keys outside every mask, window %lld\n", (long long)window);
    enum { B = 2, c = 12, H = 2, KVH = 1, D = 16 };
    int64_t Sq = 2 * c, Sk = 2 * c, nq = B * Sq * H * D, nk = B * Sk * KVH * D, nl = B * Sq * H;
    int64_t qpos[2] = {0, c}, kpos[2] = {5, 3 * c};
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *g = fnew(nq);
    ref_fill(q, NULL, nq, -1.5, 1.5), ref_fill(k, NULL, nk, -1.5, 1.5);
    ref_fill(v, NULL, nk, -1, 1), ref_fill(g, NULL, nq, -1, 1);
    float *o = fnew(nq), *l = fnew(nl), *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
    rt_attention_pos_fwd(o, l, q, k, v, B, Sq, Sk, H, KVH, D, true, window, c, qpos, kpos);
    rt_attention_pos_bwd(dq, dk, dv, q, k, v, o, l, g, B, Sq, Sk, H, KVH, D, true, window, c, qpos,
                         kpos);
    int bad = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Sq; i++)
            for (int64_t h = 0; h < H; h++) {
                int64_t row = (b * Sq + i) * H + h;
                bool none = i < 5 || (window && i - (5 + c - 1) >= window);
                for (int64_t d = 0; d < D; d++) {
                    if (none && (o[row * D + d] != 0 || dq[row * D + d] != 0))
                        bad++;
                    if (!isfinite(o[row * D + d]) || !isfinite(dq[row * D + d]))
                        bad++;
                }
                if (none != (l[row] == -INFINITY))
                    bad++;
            }
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = c; j < Sk; j++)
            for (int64_t e = 0; e < KVH * D; e++)
                bad += dk[(b * Sk + j) * KVH * D + e] != 0 || dv[(b * Sk + j) * KVH * D + e] != 0;
    CHECK(!bad, "%d elements wrong for rows or keys outside the mask", bad);
    /* The rows that see keys: as one query chunk at 0 against the first key chunk alone. */
    int64_t nq1 = nq, nk1 = B * c * KVH * D;
    float *k1 = fnew(nk1), *v1 = fnew(nk1), *o1 = fnew(nq1), *l1 = fnew(nl), *dq1 = fnew(nq1);
    float *dk1 = fnew(nk1), *dv1 = fnew(nk1);
    copy_rows(k1, c, 0, k, Sk, 0, c, B, KVH * D);
    copy_rows(v1, c, 0, v, Sk, 0, c, B, KVH * D);
    int64_t k0[1] = {5};
    rt_attention_pos_fwd(o1, l1, q, k1, v1, B, Sq, c, H, KVH, D, true, window, c, qpos, k0);
    rt_attention_pos_bwd(dq1, dk1, dv1, q, k1, v1, o1, l1, g, B, Sq, c, H, KVH, D, true, window, c,
                         qpos, k0);
    CHECK(same(o, o1, nq) && same(l, l1, nl) && same(dq, dq1, nq), "a key chunk nobody sees changed the rows");
    float *dkh = fnew(nk1);
    copy_rows(dkh, c, 0, dk, Sk, 0, c, B, KVH * D);
    CHECK(same(dkh, dk1, nk1), "a key chunk nobody sees changed dk");
    free(q), free(k), free(v), free(g), free(o), free(l), free(dq), free(dk), free(dv);
    free(k1), free(v1), free(o1), free(l1), free(dq1), free(dk1), free(dv1), free(dkh);
}

/* The same call on 1 and on 2 threads: the same bits. */
static void test_threads(void)
{
    printf("thread count independence (cp 4 balanced, rank 1)\n");
    enum { B = 2, S = 512, H = 4, KVH = 2, D = 24, c = 64 };
    int64_t Sl = 2 * c, nq = B * Sl * H * D, nk = B * S * KVH * D, nl = B * Sl * H;
    int64_t qpos[2] = {1 * c, 6 * c}, kpos[8];
    for (int r = 0; r < 4; r++)
        kpos[2 * r] = r * c, kpos[2 * r + 1] = (7 - r) * c;
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *g = fnew(nq), *out[2][5];
    ref_fill(q, NULL, nq, -1.5, 1.5), ref_fill(k, NULL, nk, -1.5, 1.5);
    ref_fill(v, NULL, nk, -1, 1), ref_fill(g, NULL, nq, -1, 1);
    int threads = omp_get_max_threads();
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t ? 2 : 1);
        float **x = out[t];
        x[0] = fnew(nq), x[1] = fnew(nl), x[2] = fnew(nq), x[3] = fnew(nk), x[4] = fnew(nk);
        rt_attention_pos_fwd(x[0], x[1], q, k, v, B, Sl, S, H, KVH, D, true, 100, c, qpos, kpos);
        rt_attention_pos_bwd(x[2], x[3], x[4], q, k, v, x[0], x[1], g, B, Sl, S, H, KVH, D, true, 100,
                             c, qpos, kpos);
    }
    omp_set_num_threads(threads);
    CHECK(same(out[0][0], out[1][0], nq) && same(out[0][1], out[1][1], nl) &&
              same(out[0][2], out[1][2], nq) && same(out[0][3], out[1][3], nk) &&
              same(out[0][4], out[1][4], nk),
          "1 and 2 threads differ");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 5; i++)
            free(out[t][i]);
    free(q), free(k), free(v), free(g);
}

int main(void)
{
    ref_seed(32);
    /* (a) */
    test_one_chunk((Shape){2, 40, 4, 2, 16, true, 0}, 1);
    test_one_chunk((Shape){2, 40, 4, 2, 16, false, 0}, 1);
    test_one_chunk((Shape){2, 70, 2, 2, 24, true, 9}, 1);
    test_one_chunk((Shape){2, 40, 4, 2, 16, true, 0}, 8);
    test_one_chunk((Shape){2, 256, 4, 2, 16, true, 50}, 8);
    test_one_chunk((Shape){1, 96, 2, 1, 16, false, 0}, 3);
    /* (b): S = 40 gives chunks of 5, 10 and 20 (no multiple of a tile), S =
     * 256 chunks of 32, 64 and 128 (multiples); 136 a chunk of 34 and 17. */
    static const int64_t lens[] = {40, 256, 136};
    for (int li = 0; li < 3; li++) {
        int64_t S = lens[li];
        for (int64_t cp = 2; cp <= 4; cp += 2)
            for (int bal = 0; bal < 2; bal++) {
                int64_t c = S / (bal ? 2 * cp : cp);
                if (S % (bal ? 2 * cp : cp))
                    continue;
                /* windows: shorter than a chunk, spanning chunks */
                int64_t wins[] = {0, c > 2 ? c / 2 + 1 : 1, c + c / 2 + 3};
                for (int wi = 0; wi < 3; wi++) {
                    test_cp((Shape){2, S, 4, 2, 16, true, wins[wi]}, cp, bal);
                    if (li != 2)
                        test_cp((Shape){2, S, 2, 2, 24, true, wins[wi]}, cp, bal);
                }
                test_cp((Shape){2, S, 4, 2, 16, false, 0}, cp, bal);
                test_cp((Shape){2, S, 2, 2, 24, false, 0}, cp, bal);
            }
    }
    test_unseen(0);
    test_unseen(9);
    test_threads();
    return check_status("rt_attention_pos");
}
