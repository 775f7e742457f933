/* test_hfops.c: the kernels the Hugging Face architectures added (issue 14),
 * against double-precision references written here from the definitions:
 *   - sliding-window causal attention (Mistral): query i sees keys j with
 *     j <= i and i - j < window; forward against an explicit masked softmax,
 *     backward against central differences of it; window >= S is plain
 *     causal attention, bit for bit; a window without causal is refused;
 *   - attention sinks (GPT-OSS): a logit per head in every row's softmax
 *     that takes no value, written here as one more column of the softmax;
 *     rt_attention_fwd + rt_attention_sink_fwd against it (o, lse), and
 *     rt_attention_sink_bwd + rt_attention_bwd against its central
 *     differences (dq, dk, dv and the sinks'), with a window and without;
 *   - LLaMA-3.1 rope scaling: the frequencies of transformers'
 *     _compute_llama3_parameters (kept, interpolated, divided), the rotation
 *     in double; the inverse is the transpose (central differences); factor 1
 *     is the unscaled rotation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"
#include "rt.h"

#define FWD_TOL 2e-6
#define GRAD_TOL 1e-5
#define FD_H 1e-5

static float *fnew(int64_t n) { return calloc((size_t)(n ? n : 1), sizeof(float)); }
static double *dnew(int64_t n) { return calloc((size_t)(n ? n : 1), sizeof(double)); }

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* --------------------------------------------------------- window attention */
/* softmax(Q K^T / sqrt(D) + mask) V with the band mask written out. */
static void ref_window_attention(double *o, double *lse, const double *q, const double *k,
                                 const double *v, int64_t B, int64_t S, int64_t H, int64_t KVH,
                                 int64_t D, int64_t W)
{
    double scale = 1.0 / sqrt((double)D), *p = dnew(S);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / (H / KVH);
            for (int64_t i = 0; i < S; i++) {
                double m = -INFINITY, z = 0;
                for (int64_t j = 0; j < S; j++) {
                    bool visible = j <= i && i - j < W;
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += q[((b * S + i) * H + h) * D + d] * k[((b * S + j) * KVH + kh) * D + d];
                    p[j] = visible ? s * scale : -INFINITY;
                    m = fmax(m, p[j]);
                }
                for (int64_t j = 0; j < S; j++)
                    z += exp(p[j] - m);
                if (lse)
                    lse[(b * S + i) * H + h] = m + log(z);
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < S; j++)
                        acc += exp(p[j] - m) / z * v[((b * S + j) * KVH + kh) * D + d];
                    o[((b * S + i) * H + h) * D + d] = acc;
                }
            }
        }
    free(p);
}

typedef struct {
    double *q, *k, *v, *r, *o;
    int64_t B, S, H, KVH, D, W;
} WinCtx;

static double win_loss(void *p)
{
    WinCtx *c = p;
    ref_window_attention(c->o, NULL, c->q, c->k, c->v, c->B, c->S, c->H, c->KVH, c->D, c->W);
    return dot(c->r, c->o, c->B * c->S * c->H * c->D);
}

static void test_window_case(int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, int64_t W)
{
    printf("window attention B=%lld S=%lld H=%lld KVH=%lld D=%lld window=%lld\n", (long long)B,
           (long long)S, (long long)H, (long long)KVH, (long long)D, (long long)W);
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    WinCtx c = {dnew(nq), dnew(nk), dnew(nk), dnew(nq), dnew(nq), B, S, H, KVH, D, W};
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *r = fnew(nq), *o = fnew(nq);
    float *lse = fnew(nl), *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk);
    ref_fill(q, c.q, nq, -1.5, 1.5);
    ref_fill(k, c.k, nk, -1.5, 1.5);
    ref_fill(v, c.v, nk, -1, 1);
    ref_fill(r, c.r, nq, -1, 1);
    double *lref = dnew(nl);
    rt_attention_fwd(o, lse, q, k, v, B, S, H, KVH, D, true, W);
    ref_window_attention(c.o, lref, c.q, c.k, c.v, B, S, H, KVH, D, W);
    CHECK(ref_close("window attention o", o, c.o, nq, FWD_TOL, 1e-30), "window o");
    CHECK(ref_close("window attention lse", lse, lref, nl, FWD_TOL, 1e-30), "window lse");
    rt_attention_bwd(dq, dk, dv, q, k, v, o, lse, r, B, S, H, KVH, D, true, W);
    double *gq = dnew(nq), *gk = dnew(nk), *gv = dnew(nk);
    ref_fd_grad(win_loss, &c, c.q, nq, FD_H, gq);
    ref_fd_grad(win_loss, &c, c.k, nk, FD_H, gk);
    ref_fd_grad(win_loss, &c, c.v, nk, FD_H, gv);
    ref_check_grad("window attention dq", dq, gq, nq, GRAD_TOL);
    ref_check_grad("window attention dk", dk, gk, nk, GRAD_TOL);
    ref_check_grad("window attention dv", dv, gv, nk, GRAD_TOL);
    if (W < S) { /* the plain causal kernel is a different function here */
        rt_attention_fwd(o, lse, q, k, v, B, S, H, KVH, D, true, 0);
        printf("  (causal without the window, must differ:)\n");
        CHECK(!ref_close("causal o vs the window's", o, c.o, nq, FWD_TOL, 1e-30),
              "the window changed nothing");
    }
    free(gq), free(gk), free(gv), free(lref);
    free(q), free(k), free(v), free(r), free(o), free(lse), free(dq), free(dk), free(dv);
    free(c.q), free(c.k), free(c.v), free(c.r), free(c.o);
}

/* ----------------------------------------------------------- attention sinks */
/* Each row's softmax over its visible scores and one more logit, sinks[h],
 * whose column multiplies no value: o = sum_j p_j v_j with p over j and the
 * sink; lse over the same. */
static void ref_sink_attention(double *o, double *lse, const double *q, const double *k, const double *v,
                               const double *sinks, int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D,
                               int64_t W)
{
    double scale = 1.0 / sqrt((double)D), *x = dnew(S + 1);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / (H / KVH);
            for (int64_t i = 0; i < S; i++) {
                double m = sinks[h], z = 0;
                for (int64_t j = 0; j < S; j++) {
                    bool visible = j <= i && (W == 0 || i - j < W);
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += q[((b * S + i) * H + h) * D + d] * k[((b * S + j) * KVH + kh) * D + d];
                    x[j] = visible ? s * scale : -INFINITY;
                    m = fmax(m, x[j]);
                }
                x[S] = sinks[h]; /* the sink's column */
                for (int64_t j = 0; j <= S; j++)
                    z += exp(x[j] - m);
                if (lse)
                    lse[(b * S + i) * H + h] = m + log(z);
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < S; j++) /* not j = S: the sink has no value */
                        acc += exp(x[j] - m) / z * v[((b * S + j) * KVH + kh) * D + d];
                    o[((b * S + i) * H + h) * D + d] = acc;
                }
            }
        }
    free(x);
}

typedef struct {
    double *q, *k, *v, *s, *r, *o;
    int64_t B, S, H, KVH, D, W;
} SinkCtx;

static double sink_loss(void *p)
{
    SinkCtx *c = p;
    ref_sink_attention(c->o, NULL, c->q, c->k, c->v, c->s, c->B, c->S, c->H, c->KVH, c->D, c->W);
    return dot(c->r, c->o, c->B * c->S * c->H * c->D);
}

static void test_sink_case(int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, int64_t W)
{
    printf("attention sinks B=%lld S=%lld H=%lld KVH=%lld D=%lld window=%lld\n", (long long)B, (long long)S,
           (long long)H, (long long)KVH, (long long)D, (long long)W);
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    SinkCtx c = {dnew(nq), dnew(nk), dnew(nk), dnew(H), dnew(nq), dnew(nq), B, S, H, KVH, D, W};
    float *q = fnew(nq), *k = fnew(nk), *v = fnew(nk), *sk = fnew(H), *r = fnew(nq), *o = fnew(nq);
    float *lse = fnew(nl), *dq = fnew(nq), *dk = fnew(nk), *dv = fnew(nk), *ds = fnew(H);
    ref_fill(q, c.q, nq, -1.5, 1.5);
    ref_fill(k, c.k, nk, -1.5, 1.5);
    ref_fill(v, c.v, nk, -1, 1);
    ref_fill(sk, c.s, H, -1, 2); /* logits as large as the scores: the sink takes a real share */
    ref_fill(r, c.r, nq, -1, 1);
    double *lref = dnew(nl);
    rt_attention_fwd(o, lse, q, k, v, B, S, H, KVH, D, true, W);
    rt_attention_sink_fwd(o, lse, sk, B * S, H, D);
    ref_sink_attention(c.o, lref, c.q, c.k, c.v, c.s, B, S, H, KVH, D, W);
    CHECK(ref_close("sink attention o", o, c.o, nq, FWD_TOL, 1e-30), "sink o");
    CHECK(ref_close("sink attention lse", lse, lref, nl, FWD_TOL, 1e-30), "sink lse");
    rt_attention_sink_bwd(ds, o, lse, r, sk, B * S, H, D); /* ds starts at 0: it accumulates */
    rt_attention_bwd(dq, dk, dv, q, k, v, o, lse, r, B, S, H, KVH, D, true, W);
    double *gq = dnew(nq), *gk = dnew(nk), *gv = dnew(nk), *gs = dnew(H);
    ref_fd_grad(sink_loss, &c, c.q, nq, FD_H, gq);
    ref_fd_grad(sink_loss, &c, c.k, nk, FD_H, gk);
    ref_fd_grad(sink_loss, &c, c.v, nk, FD_H, gv);
    ref_fd_grad(sink_loss, &c, c.s, H, FD_H, gs);
    ref_check_grad("sink attention dq", dq, gq, nq, GRAD_TOL);
    ref_check_grad("sink attention dk", dk, gk, nk, GRAD_TOL);
    ref_check_grad("sink attention dv", dv, gv, nk, GRAD_TOL);
    ref_check_grad("sink attention dsinks", ds, gs, H, GRAD_TOL);
    float before = ds[0];
    rt_attention_sink_bwd(ds, o, lse, r, sk, B * S, H, D); /* a second micro-batch adds as much again */
    CHECK(fabsf(ds[0] - 2 * before) <= 1e-6f * fabsf(before) + 1e-12f, "rt_attention_sink_bwd does not accumulate");
    free(gq), free(gk), free(gv), free(gs), free(lref);
    free(q), free(k), free(v), free(sk), free(r), free(o), free(lse), free(dq), free(dk), free(dv), free(ds);
    free(c.q), free(c.k), free(c.v), free(c.s), free(c.r), free(c.o);
}

/* A window at least as long as the sequence is causal attention, bitwise. */
static void test_window_covers_all(void)
{
    enum { B = 1, S = 6, H = 2, KVH = 1, D = 4, NQ = B * S * H * D, NK = B * S * KVH * D };
    float q[NQ], k[NK], v[NK], o1[NQ], o2[NQ], l1[B * S * H], l2[B * S * H];
    double dummy[NQ];
    ref_fill(q, dummy, NQ, -1, 1);
    ref_fill(k, dummy, NK, -1, 1);
    ref_fill(v, dummy, NK, -1, 1);
    rt_attention_fwd(o1, l1, q, k, v, B, S, H, KVH, D, true, 0);
    rt_attention_fwd(o2, l2, q, k, v, B, S, H, KVH, D, true, S);
    CHECK(memcmp(o1, o2, sizeof o1) == 0 && memcmp(l1, l2, sizeof l1) == 0,
          "window = S differs from causal attention");
}

static void window_without_causal(void *arg)
{
    (void)arg;
    float x[24], lse[6];
    memset(x, 0, sizeof x);
    rt_attention_fwd(x, lse, x, x, x, 1, 2, 3, 3, 4, false, 2);
}

/* ------------------------------------------------------------ llama3 rope */
typedef struct {
    double theta, factor, low, high, orig;
} Scaling;

/* transformers' _compute_llama3_parameters, in double. */
static double llama3_freq(int64_t j, int64_t dim, const Scaling *s, int *band)
{
    double inv = 1.0 / pow(s->theta, (double)(2 * j) / (double)dim);
    double low_wavelen = s->orig / s->low, high_wavelen = s->orig / s->high;
    double wavelen = 2 * 3.14159265358979323846 / inv;
    double llama = wavelen > low_wavelen ? inv / s->factor : inv;
    double smooth = (s->orig / wavelen - s->low) / (s->high - s->low);
    double smoothed = (1 - smooth) * llama / s->factor + smooth * llama;
    bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    *band = wavelen < high_wavelen ? 0 : medium ? 1 : 2;
    return medium ? smoothed : llama;
}

static void ref_rope_llama3(double *y, const double *x, int64_t outer, int64_t seq, int64_t inner,
                            int64_t dim, int64_t off, const Scaling *s, double sign, int *bands)
{
    int64_t half = dim / 2;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t p = 0; p < seq; p++)
            for (int64_t i = 0; i < inner; i++)
                for (int64_t j = 0; j < half; j++) {
                    int band;
                    double a = sign * (double)(off + p) * llama3_freq(j, dim, s, &band);
                    if (bands)
                        bands[band] = 1;
                    int64_t base = ((o * seq + p) * inner + i) * dim;
                    y[base + j] = x[base + j] * cos(a) - x[base + j + half] * sin(a);
                    y[base + j + half] = x[base + j + half] * cos(a) + x[base + j] * sin(a);
                }
}

typedef struct {
    double *x, *r, *y;
    int64_t outer, seq, inner, dim, off;
    Scaling s;
} RopeCtx;

static double rope_loss(void *p)
{
    RopeCtx *c = p;
    ref_rope_llama3(c->y, c->x, c->outer, c->seq, c->inner, c->dim, c->off, &c->s, 1, NULL);
    return dot(c->r, c->y, c->outer * c->seq * c->inner * c->dim);
}

static void test_rope_llama3(void)
{
    printf("rope llama3\n");
    /* dim 16 at theta 10000 has wavelengths 6.3 ... 19869; an original
     * context of 64 puts them in all three bands (kept below 16, divided
     * above 64, interpolated between). Positions from 5000: past the
     * original context, where the scaling matters. */
    enum { O = 2, S = 5, I = 3, DM = 16, N = O * S * I * DM };
    Scaling sc = {10000, 8, 1, 4, 64};
    RopeCtx c = {dnew(N), dnew(N), dnew(N), O, S, I, DM, 5000, sc};
    float *x = fnew(N), *r = fnew(N), *y = fnew(N), *dx = fnew(N);
    ref_fill(x, c.x, N, -1, 1);
    ref_fill(r, c.r, N, -1, 1);
    int bands[3] = {0, 0, 0};
    ref_rope_llama3(c.y, c.x, O, S, I, DM, c.off, &sc, 1, bands);
    CHECK(bands[0] && bands[1] && bands[2], "the test misses a band: kept %d, interpolated %d, "
          "divided %d", bands[0], bands[1], bands[2]);
    rt_rope_llama3(y, x, O, S, I, DM, c.off, 10000.0f, 8.0f, 1.0f, 4.0f, 64.0f, false);
    CHECK(ref_close("rope llama3 fwd", y, c.y, N, FWD_TOL, 1e-30), "rope llama3 fwd");
    rt_rope(dx, x, O, S, I, DM, c.off, 10000.0f, false);
    printf("  (unscaled rotation, must differ:)\n");
    CHECK(!ref_close("rope without scaling", dx, c.y, N, FWD_TOL, 1e-30),
          "scaling changed nothing");
    rt_rope_llama3(dx, r, O, S, I, DM, c.off, 10000.0f, 8.0f, 1.0f, 4.0f, 64.0f, true);
    double *g = dnew(N);
    ref_fd_grad(rope_loss, &c, c.x, N, FD_H, g);
    ref_check_grad("rope llama3 dx (inverse rotation)", dx, g, N, GRAD_TOL);
    /* factor 1 divides nothing and interpolates between equal values */
    rt_rope_llama3(y, x, O, S, I, DM, 3, 100.0f, 1.0f, 1.0f, 4.0f, 64.0f, false);
    rt_rope(dx, x, O, S, I, DM, 3, 100.0f, false);
    double *dd = dnew(N);
    ref_to_double(dd, dx, N);
    CHECK(ref_close("rope llama3 factor 1 == rope", y, dd, N, 1e-6, 1e-30), "factor 1");
    free(dd), free(g), free(x), free(r), free(y), free(dx), free(c.x), free(c.r), free(c.y);
}

static void bad_scaling(void *arg)
{
    (void)arg;
    float x[8] = {0};
    rt_rope_llama3(x, x, 1, 1, 1, 8, 0, 10000.0f, 8.0f, 4.0f, 1.0f, 8192.0f, false);
}

int main(void)
{
    ref_seed(20240723);
    test_window_case(2, 7, 4, 2, 8, 3); /* GQA, a band narrower than the sequence */
    test_window_case(1, 5, 2, 2, 4, 2); /* each query sees itself and one before */
    test_window_case(1, 6, 3, 1, 4, 6); /* window = S: causal */
    test_window_covers_all();
    test_sink_case(2, 7, 4, 2, 8, 3); /* GQA, a window (GPT-OSS's sliding layers) */
    test_sink_case(1, 6, 2, 1, 4, 0); /* full causal (its other layers) */
    test_rope_llama3();
    ref_expect_fatal("window without causal", window_without_causal, NULL, "needs causal");
    ref_expect_fatal("rope llama3 high <= low", bad_scaling, NULL, "invalid scaling");
    return check_status("rt_hfops");
}
