/* test_attention_ring.c: ring attention (rt_attention_ring_fwd/bwd), the
 * point-to-point form of context parallelism, under mpirun (2 and 4 ranks:
 * rt_attention_ring_np2, _np4).
 *
 *   - every rank builds the same whole sequence and computes the
 *     single-process attention (rt_attention_fwd/bwd) and the double
 *     reference (tests/runtime/ref.c); then the world is the cp group (a
 *     rt_comm_split_p2p communicator), each rank holds its rows, contiguous
 *     (one chunk) or load-balanced (two chunks: r and 2 cp - 1 - r), and runs
 *     the ring. Its o, lse, dq (its queries) and dk, dv (its own keys, every
 *     rank's shares summed by the ring) must equal the matching rows of both
 *     within FWD_TOL, GRAD_TOL scale-relative (as test_attention_pos.c: the
 *     merge reorders the row sums, so fp32 rounding, not bits). Causal and
 *     full masks, windows shorter than a chunk and spanning chunks,
 *     grouped-query and multi-head attention, B = 2, chunks that are and are
 *     not multiples of the kernels' tiles (32 keys, 16 queries);
 *   - the same call twice gives the same bits (the sums run in ring order);
 *   - the scratch and the outputs start as NaN, so a region read before it
 *     is written, or an element never written, fails;
 *   - rt_attention_merge alone: rows whose block saw no key are unchanged, a
 *     row seeing no key at all stays o = 0, lse = -inf, and two halves of
 *     the keys merge into the whole attention. */
#include <math.h>
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

static double *dnew(int64_t n)
{
    return malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
}

static void nan_fill(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
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

/* Rows [s0, s0 + n) of each batch of a [B, slen, X] double tensor into
 * rows [d0, d0 + n) of a [B, dlen, X] one. */
static void copy_rows_d(double *dst, int64_t dlen, int64_t d0, const double *src, int64_t slen,
                        int64_t s0, int64_t n, int64_t B, int64_t X)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(dst + (b * dlen + d0) * X, src + (b * slen + s0) * X, (size_t)(n * X) * sizeof *dst);
}

static void copy_rows(float *dst, int64_t dlen, int64_t d0, const float *src, int64_t slen,
                      int64_t s0, int64_t n, int64_t B, int64_t X)
{
    for (int64_t b = 0; b < B; b++)
        memcpy(dst + (b * dlen + d0) * X, src + (b * slen + s0) * X, (size_t)(n * X) * sizeof *dst);
}

typedef struct {
    int64_t B, S, H, KVH, D;
    bool causal;
    int64_t window;
} Shape;

/* One ring case on the world's cp ranks. */
static void test_ring(RtComm *c, Shape s, bool balanced)
{
    int cp = rt_comm_size(c), me = rt_comm_rank(c), per = balanced ? 2 : 1;
    int64_t B = s.B, S = s.S, H = s.H, KVH = s.KVH, D = s.D, W = s.window;
    int64_t nc = cp * per, ch = S / nc, Sl = per * ch;
    char tag[160];
    snprintf(tag, sizeof tag, "[cp %d %s, chunk %lld, B=%lld S=%lld H=%lld KVH=%lld D=%lld %s window %lld]",
             cp, balanced ? "balanced" : "contiguous", (long long)ch, (long long)B, (long long)S,
             (long long)H, (long long)KVH, (long long)D, s.causal ? "causal" : "full", (long long)W);
    if (me == 0)
        printf("ring %s\n", tag);
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *g = fnew(nq);
    double *qd = dnew(nq), *kd = dnew(nk), *vd = dnew(nk), *gd = dnew(nq), *want[2][5];
    ref_seed(1000 + (uint64_t)S);
    ref_fill(q, qd, nq, -1.5, 1.5), ref_fill(k, kd, nk, -1.5, 1.5);
    ref_fill(v, vd, nk, -1, 1), ref_fill(g, gd, nq, -1, 1);
    int64_t n5[5] = {nq, nl, nq, nk, nk};
    { /* want[0]: rt_attention_fwd/bwd of the whole sequence, want[1]: the reference */
        float *o = fnew(nq), *l = fnew(nl), *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
        rt_attention_fwd(o, l, q, k, v, B, S, H, KVH, D, s.causal, W);
        rt_attention_bwd(dq, dk, dv, q, k, v, o, l, g, B, S, H, KVH, D, s.causal, W);
        const float *f[5] = {o, l, dq, dk, dv};
        for (int x = 0; x < 5; x++) {
            want[0][x] = dnew(n5[x]), want[1][x] = dnew(n5[x]);
            ref_to_double(want[0][x], f[x], n5[x]);
        }
        ref_attention(want[1][0], want[1][1], qd, kd, vd, B, S, H, KVH, D, s.causal, W);
        ref_attention_bwd(want[1][2], want[1][3], want[1][4], qd, kd, vd, gd, B, S, H, KVH, D,
                          s.causal, W);
        free(o), free(l), free(dq), free(dk), free(dv);
    }
    /* the chunk (in the sequence) of each rank's local chunks, and its position */
    int64_t own[2 * 64], pos[2 * 64];
    for (int r = 0; r < cp; r++)
        for (int i = 0; i < per; i++) {
            own[r * per + i] = balanced ? (i ? nc - 1 - r : r) : r;
            pos[r * per + i] = own[r * per + i] * ch;
        }
    int64_t lq = B * Sl * H * D, lk = B * Sl * KVH * D, ll = B * Sl * H;
    float *ql = fnew(lq), *kl = fnew(lk), *vl = fnew(lk), *gl = fnew(lq);
    for (int i = 0; i < per; i++) {
        int64_t at = own[me * per + i] * ch;
        copy_rows(ql, Sl, i * ch, q, S, at, ch, B, H * D);
        copy_rows(gl, Sl, i * ch, g, S, at, ch, B, H * D);
        copy_rows(kl, Sl, i * ch, k, S, at, ch, B, KVH * D);
        copy_rows(vl, Sl, i * ch, v, S, at, ch, B, KVH * D);
    }
    size_t sbytes = rt_attention_ring_scratch(B, Sl, H, KVH, D);
    int64_t sn = (int64_t)(sbytes / sizeof(float));
    float *scratch = fnew(sn);
    float *got[2][5];
    int64_t l5[5] = {lq, ll, lq, lk, lk};
    for (int run = 0; run < 2; run++) {
        float **x = got[run];
        for (int i = 0; i < 5; i++)
            x[i] = fnew(l5[i]);
        nan_fill(scratch, sn);
        rt_attention_ring_fwd(c, x[0], x[1], ql, kl, vl, B, Sl, H, KVH, D, s.causal, W, ch, per, pos,
                              scratch);
        nan_fill(scratch, sn);
        rt_attention_ring_bwd(c, x[2], x[3], x[4], ql, kl, vl, x[0], x[1], gl, B, Sl, H, KVH, D,
                              s.causal, W, ch, per, pos, scratch);
    }
    static const char *nm[5] = {"o", "lse", "dq", "dk", "dv"};
    static const char *src[2] = {"vs rt_attention", "vs reference"};
    double *wl = dnew(lq);
    for (int x = 0; x < 5; x++) {
        int64_t X = x == 1 ? H : x < 3 ? H * D : KVH * D;
        CHECK(!memcmp(got[0][x], got[1][x], (size_t)l5[x] * sizeof(float)),
              "rank %d %s %s: two calls differ", me, nm[x], tag);
        for (int w = 0; w < 2; w++) {
            for (int i = 0; i < per; i++)
                copy_rows_d(wl, Sl, i * ch, want[w][x], S, own[me * per + i] * ch, ch, B, X);
            double e = rel_err(got[0][x], wl, l5[x]), tol = x < 2 ? FWD_TOL : GRAD_TOL;
            CHECK(e <= tol, "rank %d %s %s %s: relative error %.3g > %.3g", me, nm[x], src[w], tag,
                  e, tol);
        }
    }
    for (int w = 0; w < 2; w++)
        for (int x = 0; x < 5; x++)
            free(want[w][x]);
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 5; i++)
            free(got[run][i]);
    free(q), free(k), free(v), free(g), free(qd), free(kd), free(vd), free(gd);
    free(ql), free(kl), free(vl), free(gl), free(scratch), free(wl);
}

/* rt_attention_merge on its own (one process). */
static void test_merge(void)
{
    printf("merge: halves of the keys, unseen rows\n");
    enum { B = 2, S = 24, H = 2, KVH = 1, D = 16, half = 12 };
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H, nkh = B * half * KVH * D;
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk);
    ref_seed(77);
    ref_fill(q, NULL, nq, -1.5, 1.5), ref_fill(k, NULL, nk, -1.5, 1.5), ref_fill(v, NULL, nk, -1, 1);
    float *o = fnew(nq), *l = fnew(nl);
    int64_t qpos[1] = {0};
    rt_attention_pos_fwd(o, l, q, k, v, B, S, S, H, KVH, D, true, 0, S, qpos, qpos);
    /* keys [0, half) and [half, S) as two blocks: rows before half see no key of the second */
    float *k0 = fnew(nkh), *v0 = fnew(nkh), *k1 = fnew(nkh), *v1 = fnew(nkh);
    copy_rows(k0, half, 0, k, S, 0, half, B, KVH * D), copy_rows(v0, half, 0, v, S, 0, half, B, KVH * D);
    copy_rows(k1, half, 0, k, S, half, half, B, KVH * D);
    copy_rows(v1, half, 0, v, S, half, half, B, KVH * D);
    float *o0 = fnew(nq), *l0 = fnew(nl), *o1 = fnew(nq), *l1 = fnew(nl), *acc = fnew(nq);
    int64_t kp0[1] = {0}, kp1[1] = {half};
    rt_attention_pos_fwd(o0, l0, q, k0, v0, B, S, half, H, KVH, D, true, 0, half, (int64_t[]){0, half}, kp0);
    rt_attention_pos_fwd(o1, l1, q, k1, v1, B, S, half, H, KVH, D, true, 0, half, (int64_t[]){0, half}, kp1);
    memcpy(acc, o0, (size_t)nq * sizeof *acc);
    float *lm = fnew(nl), *om = fnew(nq);
    memcpy(lm, l0, (size_t)nl * sizeof *lm);
    rt_attention_merge(acc, lm, o1, l1, om, B * S * H, D);
    double *wo = dnew(nq), *wl = dnew(nl);
    ref_to_double(wo, o, nq), ref_to_double(wl, l, nl);
    double eo = rel_err(om, wo, nq), el = rel_err(lm, wl, nl);
    CHECK(eo <= FWD_TOL && el <= FWD_TOL, "merged halves: relative errors o %.3g lse %.3g", eo, el);
    /* rows whose block is -inf keep their values bit for bit (the first half's rows) */
    int bad = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < half; i++)
            for (int64_t h = 0; h < H; h++) {
                int64_t r = (b * S + i) * H + h;
                bad += l1[r] != -INFINITY || lm[r] != l0[r] ||
                       memcmp(acc + r * D, o0 + r * D, D * sizeof(float));
            }
    CHECK(!bad, "%d rows with lse_b = -inf changed", bad);
    /* a row that sees nothing, merged with nothing: o = 0, lse = -inf */
    float z[D] = {0}, zl = -INFINITY, zb[D], zbl = -INFINITY, out[D];
    for (int d = 0; d < D; d++)
        zb[d] = 0;
    rt_attention_merge(z, &zl, zb, &zbl, out, 1, D);
    bad = zl != -INFINITY;
    for (int d = 0; d < D; d++)
        bad += z[d] != 0 || out[d] != 0;
    CHECK(!bad, "a row seeing no key is not o = 0, lse = -inf");
    /* rt_add_f32 */
    float xa[3] = {1, 2, 3}, fa[3] = {0.5f, -2, 4};
    rt_add_f32(xa, xa, fa, 3);
    CHECK(xa[0] == 1.5f && xa[1] == 0 && xa[2] == 7, "rt_add_f32");
    free(q), free(k), free(v), free(o), free(l), free(k0), free(v0), free(k1), free(v1);
    free(o0), free(l0), free(o1), free(l1), free(acc), free(lm), free(om), free(wo), free(wl);
}

int main(int argc, char **argv)
{
    rt_init(&argc, &argv);
    int me = rt_world_rank();
    RtComm *c = rt_comm_split_p2p(0, me);
    int cp = rt_comm_size(c);
    if (me == 0)
        test_merge();
    /* S = 40: chunks of 20, 10, 5 (no multiple of a tile); 256: 128, 64, 32
     * (multiples); 136: 68, 34, 17. */
    static const int64_t lens[] = {40, 256, 136};
    for (int li = 0; li < 3; li++) {
        int64_t S = lens[li];
        for (int bal = 0; bal < 2; bal++) {
            int64_t nc = bal ? 2 * cp : cp;
            if (S % nc)
                continue;
            int64_t ch = S / nc;
            /* windows: none, shorter than a chunk, spanning chunks */
            int64_t wins[] = {0, ch > 2 ? ch / 2 + 1 : 1, ch + ch / 2 + 3};
            for (int wi = 0; wi < 3; wi++) {
                test_ring(c, (Shape){2, S, 4, 2, 16, true, wins[wi]}, bal);
                if (li != 2)
                    test_ring(c, (Shape){2, S, 2, 2, 24, true, wins[wi]}, bal);
            }
            test_ring(c, (Shape){2, S, 4, 2, 16, false, 0}, bal);
            test_ring(c, (Shape){2, S, 2, 2, 24, false, 0}, bal);
        }
    }
    int fails = check_failures;
    rt_allreduce(rt_comm_world(), &fails, 1, RT_I32);
    if (me == 0 && fails)
        printf("rt_attention_ring: %d check(s) failed on %d ranks\n", fails, cp);
    else if (me == 0)
        printf("rt_attention_ring: all checks passed on %d ranks\n", cp);
    rt_finalize();
    return fails ? 1 : 0;
}
