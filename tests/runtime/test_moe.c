/* test_moe.c: the mixture-of-experts calls (docs/moe.md) against
 * double-precision references written here from the contract.
 *   rt_moe_test       rt_route_fwd for softmax and sigmoid scores, groups,
 *                     norm, scale, capacity drops and every tie rule;
 *                     rt_route_bwd against central differences of
 *                     sum(gates R) + aux + zloss; rt_moe_fwd/bwd and
 *                     rt_moe_act_* (relu2, swiglu_oai, biases) without an
 *                     exchange against the reference and central differences;
 *                     bad arguments refused with one sentence.
 *   rt_moe_test mpi   (mpirun -np 2 or 4) the exchange form on n ranks, each
 *                     with a slice of the tokens and E/n experts, against the
 *                     one-rank form on all tokens: a rank that receives no
 *                     rows, an expert no token chose, tokens routed nowhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"
#include "rt.h"

static float *fnew(int64_t n) { return calloc((size_t)(n ? n : 1), sizeof(float)); }
static double *dnew(int64_t n) { return calloc((size_t)(n ? n : 1), sizeof(double)); }

/* ------------------------------------------------------- route reference */
typedef struct {
    double v;
    int i;
} Ranked;

/* descending value, ties to the lower index */
static int ranked_desc(const void *pa, const void *pb)
{
    const Ranked *a = pa, *b = pb;
    if (a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return a->i - b->i;
}

/* One token: scores s[E], pre-capacity weights w[E] (0 where not chosen),
 * chosen[E]. */
static void ref_route_token(double *s, double *w, bool *chosen, const double *z, int E,
                            const RtRoute *r)
{
    double m = z[0], sum = 0;
    for (int e = 0; e < E; e++)
        m = z[e] > m ? z[e] : m;
    for (int e = 0; e < E; e++)
        sum += exp(z[e] - m);
    for (int e = 0; e < E; e++)
        s[e] = r->sigmoid ? 1 / (1 + exp(-z[e])) : exp(z[e] - m) / sum;
    bool cand[RT_ROUTE_MAX_EXPERTS];
    for (int e = 0; e < E; e++)
        cand[e] = true;
    if (r->groups > 1) {
        int G = r->groups, per = E / G;
        Ranked gr[RT_ROUTE_MAX_EXPERTS], in[RT_ROUTE_MAX_EXPERTS];
        for (int g = 0; g < G; g++) {
            for (int j = 0; j < per; j++)
                in[j] = (Ranked){s[g * per + j], j};
            qsort(in, (size_t)per, sizeof *in, ranked_desc);
            gr[g] = (Ranked){in[0].v + (r->sigmoid && per > 1 ? in[1].v : 0), g};
        }
        qsort(gr, (size_t)G, sizeof *gr, ranked_desc);
        for (int e = 0; e < E; e++)
            cand[e] = false;
        for (int j = 0; j < r->group_topk; j++)
            for (int e = gr[j].i * per; e < (gr[j].i + 1) * per; e++)
                cand[e] = true;
    }
    Ranked all[RT_ROUTE_MAX_EXPERTS];
    int n = 0;
    for (int e = 0; e < E; e++)
        if (cand[e])
            all[n++] = (Ranked){s[e], e};
    qsort(all, (size_t)n, sizeof *all, ranked_desc);
    double tot = 0;
    for (int e = 0; e < E; e++) {
        w[e] = 0;
        chosen[e] = false;
    }
    for (int j = 0; j < r->topk; j++) {
        chosen[all[j].i] = true;
        tot += all[j].v;
    }
    for (int e = 0; e < E; e++)
        if (chosen[e])
            w[e] = (r->norm ? s[e] / tot : s[e]) * r->scale;
}

/* gates of seqs x S tokens; returns the regularisers' part of the objective
 * (sum over these sequences of aux_seq / nglob, plus beta sum lse^2 / (nglob S)). */
static double ref_route(double *gates, const double *z, int seqs, int S, int E, const RtRoute *r,
                        int nglob)
{
    double *s = dnew(S * E), *w = dnew(S * E);
    bool *ch = calloc((size_t)(S * E), sizeof *ch);
    double reg = 0;
    int64_t C = r->capacity > 0 ? (int64_t)ceil((double)r->capacity * S * r->topk / E) : S;
    for (int q = 0; q < seqs; q++) {
        const double *zq = z + (int64_t)q * S * E;
        for (int t = 0; t < S; t++)
            ref_route_token(s + t * E, w + t * E, ch + t * E, zq + t * E, E, r);
        for (int t = 0; t < S; t++)
            for (int e = 0; e < E; e++) {
                int rank = 0; /* choices of e ahead of (t, e) */
                for (int u = 0; u < S; u++)
                    if (ch[u * E + e] && (w[u * E + e] > w[t * E + e] ||
                                          (w[u * E + e] == w[t * E + e] && u < t)))
                        rank++;
                gates[(int64_t)q * S * E + t * E + e] = ch[t * E + e] && rank < C ? w[t * E + e] : 0;
            }
        if (r->aux > 0) {
            double a = 0;
            for (int e = 0; e < E; e++) {
                double cnt = 0, P = 0;
                for (int t = 0; t < S; t++) {
                    double ssum = 0;
                    for (int j = 0; j < E; j++)
                        ssum += s[t * E + j];
                    cnt += ch[t * E + e];
                    P += r->sigmoid ? s[t * E + e] / ssum : s[t * E + e];
                }
                a += (double)E / ((double)r->topk * S) * cnt * (P / S);
            }
            reg += r->aux * a / nglob;
        }
        if (r->zloss > 0)
            for (int t = 0; t < S; t++) {
                double m = zq[t * E], sum = 0;
                for (int e = 0; e < E; e++)
                    m = zq[t * E + e] > m ? zq[t * E + e] : m;
                for (int e = 0; e < E; e++)
                    sum += exp(zq[t * E + e] - m);
                double lse = m + log(sum);
                reg += r->zloss * lse * lse / ((double)nglob * S);
            }
    }
    free(s);
    free(w);
    free(ch);
    return reg;
}

typedef struct {
    double *z, *R, *g;
    int seqs, S, E, nglob;
    const RtRoute *r;
} RouteCtx;

static double route_obj(void *p)
{
    RouteCtx *c = p;
    double reg = ref_route(c->g, c->z, c->seqs, c->S, c->E, c->r, c->nglob);
    double o = 0;
    for (int64_t i = 0; i < (int64_t)c->seqs * c->S * c->E; i++)
        o += c->g[i] * c->R[i];
    return o + reg;
}

static void test_route_case(const char *name, int seqs, int S, int E, RtRoute r, bool grad)
{
    printf("route %s\n", name);
    int64_t n = (int64_t)seqs * S * E;
    float *zf = fnew(n), *gf = fnew(n), *Rf = fnew(n), *dzf = fnew(n);
    double *z = dnew(n), *g = dnew(n), *R = dnew(n), *dz = dnew(n);
    ref_fill(zf, z, n, -2, 2);
    ref_fill(Rf, R, n, -1, 1);
    int nglob = 2 * seqs; /* other ranks hold the rest of the global batch */
    float obj = 0.25f;    /* rt_route_fwd adds to it */
    rt_route_fwd(gf, zf, seqs, S, E, &r, &obj, 0.5f, nglob);
    double reg = ref_route(g, z, seqs, S, E, &r, nglob);
    CHECK(ref_close("gates", gf, g, n, 1e-6, 1e-30), "route %s: gates differ", name);
    CHECK(fabs((obj - 0.25) - 0.5 * reg) <= 1e-6 * fabs(reg) + 1e-7,
          "route %s: regularisers %.9g, the reference's %.9g", name, (obj - 0.25) / 0.5, reg);
    int64_t zeros = 0;
    for (int64_t i = 0; i < n; i++)
        if ((gf[i] == 0) != (g[i] == 0))
            zeros++;
    CHECK(zeros == 0, "route %s: %lld choices kept differently", name, (long long)zeros);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++)
        kept += gf[i] != 0;
    CHECK(r.capacity > 0 ? kept < (int64_t)seqs * S * r.topk : kept == (int64_t)seqs * S * r.topk,
          "route %s: %lld choices kept (capacity must drop some, dropless none)", name,
          (long long)kept);
    if (grad) {
        rt_route_bwd(dzf, zf, gf, Rf, seqs, S, E, &r, nglob);
        RouteCtx c = {z, R, g, seqs, S, E, nglob, &r};
        ref_fd_grad(route_obj, &c, z, n, 1e-6, dz);
        ref_check_grad("dlogits", dzf, dz, n, 1e-5);
    }
    free(zf), free(gf), free(Rf), free(dzf), free(z), free(g), free(R), free(dz);
}

/* Equal logits: top-k and capacity ties go to the lower expert index and
 * the earlier position; groups' ties to the lower group. */
static void test_route_ties(void)
{
    enum { S = 6, E = 8 };
    float z[S * E], g[S * E];
    for (int t = 0; t < S; t++)
        for (int e = 0; e < E; e++)
            z[t * E + e] = e == 5 || e == 6 || e == 2 ? 1.0f : 0.0f;
    RtRoute r = {.topk = 2, .norm = 1, .scale = 1};
    rt_route_fwd(g, z, 1, S, E, &r, NULL, 0, 0);
    bool ok = true;
    for (int t = 0; t < S; t++)
        for (int e = 0; e < E; e++)
            ok = ok && (g[t * E + e] != 0) == (e == 2 || e == 5);
    CHECK(ok, "top-k ties must go to the lower expert index");
    /* capacity 0.5: C = ceil(0.5 * 6 * 2 / 8) = 1 per expert: token 0 alone */
    r.capacity = 0.5f;
    rt_route_fwd(g, z, 1, S, E, &r, NULL, 0, 0);
    ok = g[2] == 0.5f && g[5] == 0.5f;
    for (int t = 1; t < S; t++)
        for (int e = 0; e < E; e++)
            ok = ok && g[t * E + e] == 0;
    CHECK(ok, "capacity ties must go to the earlier position");
    /* groups of 2 experts, best 2 groups: groups 1 {2,3} and 2 {4,5} tie
     * with 3 {6,7}; group 1 and 2 win, so expert 6 is no candidate */
    r = (RtRoute){.topk = 3, .groups = 4, .group_topk = 2, .scale = 1};
    rt_route_fwd(g, z, 1, S, E, &r, NULL, 0, 0);
    ok = g[2] != 0 && g[5] != 0 && g[6] == 0 && (g[3] != 0) + (g[4] != 0) == 1 && g[3] != 0;
    CHECK(ok, "group ties must go to the lower group (gates %g %g %g %g %g)", g[2], g[3], g[4],
          g[5], g[6]);
    /* capacity counts per sequence: the second sequence keeps its own first token */
    float z2[2 * S * E], g2[2 * S * E];
    memcpy(z2, z, sizeof z);
    memcpy(z2 + S * E, z, sizeof z);
    r = (RtRoute){.topk = 2, .norm = 1, .scale = 1, .capacity = 0.5f};
    rt_route_fwd(g2, z2, 2, S, E, &r, NULL, 0, 0);
    CHECK(g2[S * E + 2] == 0.5f && g2[S * E + 5] == 0.5f && g2[S * E + E + 2] == 0,
          "capacity must count per sequence");
}

/* rt_route_freeze: a replayed call chooses as the recorded one did (the
 * same experts kept, drops included) and weighs from its own logits. */
static void test_route_freeze(void)
{
    printf("route freeze\n");
    enum { S = 16, E = 8 };
    float z[S * E], z2[S * E], g[S * E], g2[S * E], gf[S * E], gw[S * E];
    double zd[S * E];
    ref_fill(z, zd, S * E, -2, 2);
    for (int i = 0; i < S * E; i++)
        z2[i] = z[i] + (float)(0.7 * sin(3.0 * i)); /* enough to change choices */
    RtRoute r = {.topk = 2, .norm = 1, .scale = 1, .capacity = 1.0f};
    rt_route_fwd(g2, z2, 1, S, E, &r, NULL, 0, 0);  /* free: z2's own choice */
    rt_route_freeze(RT_ROUTE_RECORD);
    rt_route_fwd(g, z, 1, S, E, &r, NULL, 0, 0);
    rt_route_freeze(RT_ROUTE_REPLAY);
    rt_route_fwd(gf, z2, 1, S, E, &r, NULL, 0, 0);  /* z's choice, z2's weights */
    rt_route_freeze(RT_ROUTE_FREE);
    bool same = true, moved = false, differs = false;
    for (int i = 0; i < S * E; i++) {
        same = same && (gf[i] != 0) == (g[i] != 0);
        moved = moved || (gf[i] != g[i] && g[i] != 0);
        differs = differs || (g2[i] != 0) != (g[i] != 0);
    }
    CHECK(differs, "route freeze: the perturbation must change the free choice");
    CHECK(same, "route freeze: a replayed call must keep the recorded choices");
    CHECK(moved, "route freeze: a replayed call must weigh from its own logits");
    /* the replayed weights are z2's scores renormalised over the recorded
     * pair (checked where capacity kept both) */
    for (int t = 0; t < S; t++) {
        double s[E], m = -1e30, sum = 0, ch = 0;
        int kept = 0;
        for (int e = 0; e < E; e++)
            kept += gf[t * E + e] != 0;
        for (int e = 0; e < E; e++)
            m = fmax(m, z2[t * E + e]);
        for (int e = 0; e < E; e++)
            sum += s[e] = exp(z2[t * E + e] - m);
        for (int e = 0; e < E; e++)
            if (gf[t * E + e] != 0)
                ch += s[e] / sum;
        for (int e = 0; e < E; e++)
            gw[t * E + e] = gf[t * E + e] != 0 && kept == r.topk ? (float)(s[e] / sum / ch) : gf[t * E + e];
    }
    double worst = 0;
    for (int i = 0; i < S * E; i++)
        worst = fmax(worst, fabs((double)gf[i] - gw[i]));
    CHECK(worst < 1e-6, "route freeze: replayed weights off by %.3g", worst);
}

/* --------------------------------------------------------- moe reference */
/* The experts of any act (rt.h RtMoeAct; docs/moe.md "Expert activations"):
 * a = h wg + bg, u = h wu + bu; swiglu silu(a) u, relu2 max(u, 0)^2 (no wg),
 * swiglu_oai g sigmoid(1.702 g) (c + 1), g = min(a, 7), c = clamp(u, -7, 7). */
typedef struct {
    int T, D, F, E, act;
    double *h, *g, *wg, *wu, *wd, *bg, *bu, *R, *y; /* wg, bg, bu NULL when absent */
} MoeCtx;

static double ref_act(int act, double a, double u)
{
    if (act == RT_MOE_RELU2)
        return u > 0 ? u * u : 0;
    if (act == RT_MOE_SWIGLU_OAI) {
        double g = fmin(a, 7), c = fmax(-7, fmin(u, 7));
        return g / (1 + exp(-1.702 * g)) * (c + 1);
    }
    return a / (1 + exp(-a)) * u;
}

static void ref_moe(const MoeCtx *c, double *y)
{
    int D = c->D, F = c->F;
    double *a = dnew(F);
    for (int t = 0; t < c->T; t++) {
        for (int j = 0; j < D; j++)
            y[t * D + j] = 0;
        for (int e = 0; e < c->E; e++) {
            double gt = c->g[t * c->E + e];
            if (gt == 0)
                continue;
            for (int f = 0; f < F; f++) {
                double x = c->bg ? c->bg[e * F + f] : 0, u = c->bu ? c->bu[e * F + f] : 0;
                for (int j = 0; j < D; j++) {
                    if (c->wg)
                        x += c->h[t * D + j] * c->wg[((int64_t)e * D + j) * F + f];
                    u += c->h[t * D + j] * c->wu[((int64_t)e * D + j) * F + f];
                }
                a[f] = ref_act(c->act, x, u);
            }
            for (int j = 0; j < D; j++) {
                double o = 0;
                for (int f = 0; f < F; f++)
                    o += a[f] * c->wd[((int64_t)e * F + f) * D + j];
                y[t * D + j] += gt * o;
            }
        }
    }
    free(a);
}

static double moe_obj(void *p)
{
    MoeCtx *c = p;
    ref_moe(c, c->y);
    double o = 0;
    for (int64_t i = 0; i < (int64_t)c->T * c->D; i++)
        o += c->y[i] * c->R[i];
    return o;
}

/* Random top-k gates among experts [0, lim) but `skip` (an expert no token
 * chooses); every `none`-th token is routed nowhere. */
static void make_gates(float *gf, double *gd, int T, int E, int k, int lim, int skip, int none)
{
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < E; e++)
            gf[t * E + e] = 0;
        if (none && t % none == none - 1)
            continue;
        for (int j = 0; j < k; j++) {
            int e;
            do
                e = (int)ref_uniform(0, lim);
            while (e == skip || gf[t * E + e] != 0);
            gf[t * E + e] = (float)ref_uniform(0.1, 1.0);
        }
    }
    ref_to_double(gd, gf, (int64_t)T * E);
}

/* rt_moe_fwd/bwd (act swiglu, no biases), or rt_moe_act_* for act with
 * biases inside the activation when bias, against the reference and its
 * central differences. bscale: the biases' range, wide enough for
 * swiglu_oai to put pre-activations past its clamps (+-7). */
/* ZB-H1 with W slots smaller than the rows routed here (plan_moe_wslot_rows
 * sized for the expected rows): three micro-batches in ZB-H1's order on two
 * slots, B1 (fits slot A), B2 (one row over slot B: runs W1 first, then its
 * own weight gradients), W1, B3 (slot A again, fits), W2, W3. Each
 * micro-batch's output gradient differs, so the order of the sums shows:
 * dh, dgates and every weight and bias gradient equal rt_moe_act_bwd of 1,
 * 2, 3 accumulated in that order, bitwise. */
static void test_wslot_overflow(const float *h, const float *g, const float *WG, const float *wu, const float *wd,
                                const float *BG, const float *BU, const float *R, int act, int T, int D, int E, int F)
{
    bool gated = WG != NULL;
    int64_t nw = (int64_t)E * D * F, nb = (int64_t)E * F, rows = 0;
    for (int64_t i = 0; i < (int64_t)T * E; i++)
        rows += g[i] != 0; /* no exchange: a row per chosen expert */
    int64_t ns = rows * (2 * D + (2 + gated) * F);
    float *A = fnew(ns), *B = fnew(ns), *dy[3], *dh[2][3], *dg[2][3], *w[2][5];
    for (int m = 0; m < 3; m++) {
        dy[m] = fnew(T * D);
        for (int64_t i = 0; i < (int64_t)T * D; i++)
            dy[m][i] = R[i] * (float)(1 + 0.37 * m) - 0.11f * (float)m;
        for (int v = 0; v < 2; v++)
            dh[v][m] = fnew(T * D), dg[v][m] = fnew(T * E);
    }
    for (int v = 0; v < 2; v++)
        for (int j = 0; j < 5; j++) {
            int64_t n = j < 3 ? nw : nb;
            w[v][j] = fnew(n);
            for (int64_t i = 0; i < n; i++) /* (0 + a) + b is (0 + b) + a: start elsewhere */
                w[v][j][i] = 0.5f + 0.001f * (float)(i % 7);
        }
#define GR(v) gated ? w[v][0] : NULL, w[v][1], w[v][2], BG ? w[v][3] : NULL, BU ? w[v][4] : NULL
    for (int m = 0; m < 3; m++)
        rt_moe_act_bwd(NULL, dh[0][m], dg[0][m], GR(0), h, g, WG, wu, wd, BG, BU, dy[m], act, T, D, E, E, F);
    rt_moe_act_bwd_b(NULL, dh[1][0], dg[1][0], GR(1), A, rows, h, g, WG, wu, wd, BG, BU, dy[0], act, T, D, E, E, F);
    rt_moe_act_bwd_b(NULL, dh[1][1], dg[1][1], GR(1), B, rows - 1, h, g, WG, wu, wd, BG, BU, dy[1], act, T, D, E, E,
                     F);
    rt_moe_act_bwd_w(GR(1), A, rows, act, D, E, F);
    rt_moe_act_bwd_b(NULL, dh[1][2], dg[1][2], GR(1), A, rows, h, g, WG, wu, wd, BG, BU, dy[2], act, T, D, E, E, F);
    rt_moe_act_bwd_w(GR(1), B, rows - 1, act, D, E, F);
    rt_moe_act_bwd_w(GR(1), A, rows, act, D, E, F);
#undef GR
    bool same = true;
    for (int m = 0; m < 3; m++)
        same = same && !memcmp(dh[0][m], dh[1][m], sizeof(float) * (size_t)(T * D)) &&
               !memcmp(dg[0][m], dg[1][m], sizeof(float) * (size_t)(T * E));
    for (int j = 0; j < 5; j++)
        same = same && !memcmp(w[0][j], w[1][j], sizeof(float) * (size_t)(j < 3 ? nw : nb));
    CHECK(same, "an overflowing B (its weight gradients in B, after the pending W) must equal rt_moe_act_bwd "
                "of the micro-batches in order, bitwise");
    free(A), free(B);
    for (int m = 0; m < 3; m++) {
        free(dy[m]);
        for (int v = 0; v < 2; v++)
            free(dh[v][m]), free(dg[v][m]);
    }
    for (int v = 0; v < 2; v++)
        for (int j = 0; j < 5; j++)
            free(w[v][j]);
}

static void test_moe_local(int T, int D, int F, int E, int k, int act, bool bias, double bscale)
{
    printf("moe T=%d D=%d F=%d E=%d k=%d act=%d%s\n", T, D, F, E, k, act, bias ? " biases" : "");
    bool gated = act != RT_MOE_RELU2;
    int64_t nw = (int64_t)E * D * F, nb = (int64_t)E * F;
    float *h = fnew(T * D), *g = fnew(T * E), *wg = fnew(nw), *wu = fnew(nw), *wd = fnew(nw);
    float *bg = fnew(nb), *bu = fnew(nb), *dbg = fnew(nb), *dbu = fnew(nb);
    float *y = fnew(T * D), *R = fnew(T * D), *dh = fnew(T * D), *dg = fnew(T * E);
    float *dwg = fnew(nw), *dwu = fnew(nw), *dwd = fnew(nw);
    MoeCtx c = {T, D, F, E, act, dnew(T * D), dnew(T * E), gated ? dnew(nw) : NULL, dnew(nw), dnew(nw),
                bias && gated ? dnew(nb) : NULL, bias ? dnew(nb) : NULL, dnew(T * D), dnew(T * D)};
    ref_fill(h, c.h, T * D, -1, 1);
    if (gated)
        ref_fill(wg, c.wg, nw, -0.5, 0.5);
    ref_fill(wu, c.wu, nw, -0.5, 0.5);
    ref_fill(wd, c.wd, nw, -0.5, 0.5);
    if (c.bg)
        ref_fill(bg, c.bg, nb, -bscale, bscale);
    if (c.bu)
        ref_fill(bu, c.bu, nb, -bscale, bscale);
    ref_fill(R, c.R, T * D, -1, 1);
    int skip = E > k ? E - 1 : -1; /* an expert no token chooses */
    make_gates(g, c.g, T, E, k, E, skip, 4);
    float *WG = gated ? wg : NULL, *BG = c.bg ? bg : NULL, *BU = c.bu ? bu : NULL;
    float *DWG = gated ? dwg : NULL, *DBG = c.bg ? dbg : NULL, *DBU = c.bu ? dbu : NULL;
    if (act == RT_MOE_SWIGLU && !bias)
        rt_moe_fwd(NULL, y, h, g, wg, wu, wd, T, D, E, E, F);
    else
        rt_moe_act_fwd(NULL, y, h, g, WG, wu, wd, BG, BU, act, T, D, E, E, F);
    double *yd = dnew(T * D);
    ref_moe(&c, yd);
    CHECK(ref_close("y", y, yd, T * D, 2e-6, 1e-30), "moe forward differs");
    for (int64_t i = 0; i < nw; i++) /* weight gradients accumulate */
        dwg[i] = dwu[i] = dwd[i] = 0.5f;
    for (int64_t i = 0; i < nb; i++)
        dbg[i] = dbu[i] = 0.5f;
    for (int64_t i = 0; i < T * E; i++)
        dg[i] = 7; /* overwritten, zeros included */
    if (act == RT_MOE_SWIGLU && !bias)
        rt_moe_bwd(NULL, dh, dg, dwg, dwu, dwd, h, g, wg, wu, wd, R, T, D, E, E, F);
    else
        rt_moe_act_bwd(NULL, dh, dg, DWG, dwu, dwd, DBG, DBU, h, g, WG, wu, wd, BG, BU, R, act, T, D, E, E, F);
    for (int64_t i = 0; i < nw; i++) {
        dwg[i] -= 0.5f;
        dwu[i] -= 0.5f;
        dwd[i] -= 0.5f;
    }
    for (int64_t i = 0; i < nb; i++)
        dbg[i] -= 0.5f, dbu[i] -= 0.5f;
    double *gr = dnew(nw + T * D + T * E); /* room for any of them */
    ref_fd_grad(moe_obj, &c, c.h, T * D, 1e-6, gr);
    ref_check_grad("dh", dh, gr, T * D, 2e-5);
    ref_fd_grad(moe_obj, &c, c.g, T * E, 1e-6, gr);
    bool zero = true;
    for (int64_t i = 0; i < T * E; i++)
        if (g[i] == 0) {
            zero = zero && dg[i] == 0;
            gr[i] = 0; /* not routed: the contract's gradient is 0 */
        }
    CHECK(zero, "dgates must be 0 where the gate is 0");
    ref_check_grad("dgates", dg, gr, T * E, 2e-5);
    if (gated) {
        ref_fd_grad(moe_obj, &c, c.wg, nw, 1e-6, gr);
        ref_check_grad("dw_gate", dwg, gr, nw, 2e-5);
    }
    ref_fd_grad(moe_obj, &c, c.wu, nw, 1e-6, gr);
    ref_check_grad("dw_up", dwu, gr, nw, 2e-5);
    ref_fd_grad(moe_obj, &c, c.wd, nw, 1e-6, gr);
    ref_check_grad("dw_down", dwd, gr, nw, 2e-5);
    if (c.bg) {
        ref_fd_grad(moe_obj, &c, c.bg, nb, 1e-6, gr);
        ref_check_grad("db_gate", dbg, gr, nb, 2e-5);
    }
    if (c.bu) {
        ref_fd_grad(moe_obj, &c, c.bu, nb, 1e-6, gr);
        ref_check_grad("db_up", dbu, gr, nb, 2e-5);
    }
    bool untouched = true; /* expert `skip`: no token chose it */
    for (int64_t i = skip < 0 ? nw : (int64_t)skip * D * F; i < nw; i++)
        untouched = untouched && dwg[i] == 0 && dwu[i] == 0 && dwd[i] == 0;
    for (int64_t i = skip < 0 ? nb : (int64_t)skip * F; i < nb; i++)
        untouched = untouched && dbg[i] == 0 && dbu[i] == 0;
    CHECK(untouched, "an expert no token chose must get no gradient");
    /* ZB-H1's split: B then W from the slot, bitwise the whole backward */
    int64_t rows = (int64_t)T * (k < E ? k : E), ns = rows * (2 * D + (2 + gated) * F);
    float *slot = fnew(ns), *dh2 = fnew(T * D), *dg2 = fnew(T * E);
    float *dwg2 = fnew(nw), *dwu2 = fnew(nw), *dwd2 = fnew(nw), *dbg2 = fnew(nb), *dbu2 = fnew(nb);
    for (int64_t i = 0; i < nw; i++) /* accumulated onto what the whole one was */
        dwg2[i] = dwu2[i] = dwd2[i] = 0.5f;
    for (int64_t i = 0; i < nb; i++)
        dbg2[i] = dbu2[i] = 0.5f;
    rt_moe_act_bwd_b(NULL, dh2, dg2, NULL, NULL, NULL, NULL, NULL, slot, rows, h, g, WG, wu, wd, BG, BU, R, act, T, D,
                     E, E, F);
    rt_moe_act_bwd_w(gated ? dwg2 : NULL, dwu2, dwd2, DBG ? dbg2 : NULL, DBU ? dbu2 : NULL, slot, rows, act, D, E, F);
    for (int64_t i = 0; i < nw; i++)
        dwg2[i] -= 0.5f, dwu2[i] -= 0.5f, dwd2[i] -= 0.5f;
    for (int64_t i = 0; i < nb; i++)
        dbg2[i] -= 0.5f, dbu2[i] -= 0.5f;
    if (!gated) /* untouched by both */
        memcpy(dwg2, dwg, sizeof *dwg * (size_t)nw);
    if (!DBG)
        memcpy(dbg2, dbg, sizeof *dbg * (size_t)nb);
    if (!DBU)
        memcpy(dbu2, dbu, sizeof *dbu * (size_t)nb);
    bool same = !memcmp(dh2, dh, sizeof *dh * (size_t)(T * D)) && !memcmp(dg2, dg, sizeof *dg * (size_t)(T * E)) &&
                !memcmp(dwg2, dwg, sizeof *dwg * (size_t)nw) && !memcmp(dwu2, dwu, sizeof *dwu * (size_t)nw) &&
                !memcmp(dwd2, dwd, sizeof *dwd * (size_t)nw) && !memcmp(dbg2, dbg, sizeof *dbg * (size_t)nb) &&
                !memcmp(dbu2, dbu, sizeof *dbu * (size_t)nb);
    CHECK(same, "rt_moe_act_bwd_b then rt_moe_act_bwd_w must equal rt_moe_act_bwd bitwise");
    test_wslot_overflow(h, g, WG, wu, wd, BG, BU, R, act, T, D, E, F);
    free(slot), free(dh2), free(dg2), free(dwg2), free(dwu2), free(dwd2), free(dbg2), free(dbu2);
    free(h), free(g), free(wg), free(wu), free(wd), free(y), free(R), free(dh), free(dg);
    free(dwg), free(dwu), free(dwd), free(yd), free(gr), free(bg), free(bu), free(dbg), free(dbu);
    free(c.h), free(c.g), free(c.wg), free(c.wu), free(c.wd), free(c.bg), free(c.bu), free(c.R), free(c.y);
}

/* ------------------------------------------------------------ refusals */
static void bad_topk(void *arg)
{
    (void)arg;
    float z[4] = {0}, g[4];
    RtRoute r = {.topk = 3, .groups = 2, .group_topk = 1, .scale = 1};
    rt_route_fwd(g, z, 1, 1, 4, &r, NULL, 0, 0);
}

/* ZB-H1's B with a W slot one row short of the rows routed here, and W
 * from a slot no B filled. */
static void bad_wslot_rows(void *arg)
{
    (void)arg;
    float h[4] = {1, 2, 3, 4}, g[4] = {1, 0, 0, 1}, w[4] = {0}, dh[4], dg[4], slot[64];
    rt_moe_act_bwd_b(NULL, dh, dg, NULL, NULL, NULL, NULL, NULL, slot, 1, h, g, w, w, w, NULL, NULL, h, RT_MOE_SWIGLU,
                     2, 2, 2, 2, 1);
}

static void bad_wslot_unfilled(void *arg)
{
    (void)arg;
    float slot[64] = {0}, dw[4] = {0};
    rt_moe_act_bwd_w(dw, dw, dw, NULL, NULL, slot, 1, RT_MOE_SWIGLU, 2, 2, 1);
}

static void bad_cols(void *arg)
{
    (void)arg;
    float x[16] = {0};
    rt_moe_fwd(NULL, x, x, x, x, x, x, 1, 2, 3, 2, 2);
}

/* ---------------------------------------------------------------- MPI */
static bool all_ok(bool ok)
{
    int v = ok ? 0 : 1;
    rt_allreduce(rt_comm_world(), &v, 1, RT_I32);
    return v == 0;
}

/* Scale-relative closeness of two fp32 results of the same math summed in
 * other orders. */
static bool near(const char *what, const float *got, const float *want, int64_t n, double tol)
{
    double *w = dnew(n);
    ref_to_double(w, want, n);
    bool ok = ref_close(what, got, w, n, tol, 1e-30);
    free(w);
    return ok;
}

static void test_exchange(int me, int np)
{
    enum { TL = 5, D = 8, F = 6, EL = 3, K = 2 };
    int E = EL * np, T = TL * np;
    int64_t nw = (int64_t)E * D * F, nl = (int64_t)EL * D * F;
    ref_seed(777); /* every rank makes the same global problem */
    float *h = fnew(T * D), *g = fnew(T * E), *wg = fnew(nw), *wu = fnew(nw), *wd = fnew(nw);
    float *dy = fnew(T * D);
    double *tmp = dnew(nw);
    ref_fill(h, tmp, T * D, -1, 1);
    ref_fill(wg, tmp, nw, -0.5, 0.5);
    ref_fill(wu, tmp, nw, -0.5, 0.5);
    ref_fill(wd, tmp, nw, -0.5, 0.5);
    ref_fill(dy, tmp, T * D, -1, 1);
    /* the last rank's experts get nothing; expert 1 is chosen by no token;
     * every 4th token goes nowhere */
    make_gates(g, tmp, T, E, K, E - EL, 1, 4);
    /* the one-rank form on all tokens */
    float *y1 = fnew(T * D), *dh1 = fnew(T * D), *dg1 = fnew(T * E);
    float *dwg1 = fnew(nw), *dwu1 = fnew(nw), *dwd1 = fnew(nw);
    rt_moe_fwd(NULL, y1, h, g, wg, wu, wd, T, D, E, E, F);
    rt_moe_bwd(NULL, dh1, dg1, dwg1, dwu1, dwd1, h, g, wg, wu, wd, dy, T, D, E, E, F);
    /* the exchange form: tokens [me TL, (me+1) TL), experts [me EL, (me+1) EL) */
    RtComm *ep = rt_comm_world();
    float *y = fnew(TL * D), *dh = fnew(TL * D), *dg = fnew(TL * E);
    float *dwg = fnew(nl), *dwu = fnew(nl), *dwd = fnew(nl);
    const float *hl = h + me * TL * D, *gl = g + me * TL * E, *dyl = dy + me * TL * D;
    rt_moe_fwd(ep, y, hl, gl, wg + me * nl, wu + me * nl, wd + me * nl, TL, D, E, EL, F);
    rt_moe_bwd(ep, dh, dg, dwg, dwu, dwd, hl, gl, wg + me * nl, wu + me * nl, wd + me * nl, dyl,
               TL, D, E, EL, F);
    char what[64];
    snprintf(what, sizeof what, "rank %d of %d: y", me, np);
    bool ok = near(what, y, y1 + me * TL * D, TL * D, 1e-6);
    snprintf(what, sizeof what, "rank %d of %d: dh", me, np);
    ok = near(what, dh, dh1 + me * TL * D, TL * D, 1e-6) && ok;
    snprintf(what, sizeof what, "rank %d of %d: dgates", me, np);
    ok = near(what, dg, dg1 + me * TL * E, TL * E, 1e-6) && ok;
    /* weight gradients: gathered over the ranks, the one-rank ones */
    float *all = fnew(nw);
    float *mine[3] = {dwg, dwu, dwd}, *one[3] = {dwg1, dwu1, dwd1};
    const char *names[3] = {"dw_gate", "dw_up", "dw_down"};
    for (int i = 0; i < 3; i++) {
        rt_allgather(ep, all, mine[i], nl, RT_F32);
        snprintf(what, sizeof what, "rank %d of %d: %s gathered", me, np, names[i]);
        ok = near(what, all, one[i], nw, 1e-6) && ok;
    }
    bool zero = true; /* the last rank received nothing; expert 1 was chosen by no token */
    for (int64_t i = 0; i < nl; i++)
        if (me == np - 1 || (me == 0 && i >= D * F && i < 2 * D * F))
            zero = zero && dwg[i] == 0 && dwu[i] == 0 && dwd[i] == 0;
    CHECK(ok, "rank %d of %d: the exchange form differs from the one-rank form", me, np);
    CHECK(zero, "rank %d of %d: experts without rows must get no gradient", me, np);
    free(h), free(g), free(wg), free(wu), free(wd), free(dy), free(tmp);
    free(y1), free(dh1), free(dg1), free(dwg1), free(dwu1), free(dwd1);
    free(y), free(dh), free(dg), free(dwg), free(dwu), free(dwd), free(all);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "mpi") == 0) {
        rt_init(&argc, &argv);
        int me = rt_world_rank(), np = rt_world_size();
        test_exchange(me, np);
        bool ok = all_ok(check_failures == 0);
        if (me == 0)
            printf(ok ? "rt_moe: exchange equals one rank on %d ranks\n" : "rt_moe: failures on %d ranks\n",
                   np);
        rt_finalize();
        return ok ? 0 : 1;
    }
    ref_seed(20261129);
    RtRoute soft = {.topk = 2, .norm = 1, .scale = 1};
    test_route_case("softmax top-2 norm", 2, 7, 8, soft, true);
    RtRoute plain = {.topk = 3, .scale = 2.5f};
    test_route_case("softmax top-3 scale", 1, 5, 6, plain, true);
    RtRoute sig = {.topk = 4, .sigmoid = 1, .groups = 4, .group_topk = 2, .norm = 1,
                   .scale = 2.5f};
    test_route_case("sigmoid groups norm scale", 2, 5, 16, sig, true);
    RtRoute sgroups = {.topk = 2, .groups = 3, .group_topk = 2, .scale = 1};
    test_route_case("softmax groups", 1, 6, 9, sgroups, true);
    RtRoute cap = {.topk = 2, .norm = 1, .scale = 1, .capacity = 0.75f};
    test_route_case("capacity drops", 2, 12, 4, cap, true);
    RtRoute reg = {.topk = 2, .norm = 1, .scale = 1, .aux = 0.01f, .zloss = 0.001f};
    test_route_case("softmax aux zloss", 2, 6, 8, reg, true);
    RtRoute sreg = {.topk = 3, .sigmoid = 1, .norm = 1, .scale = 1, .aux = 0.1f, .zloss = 0.01f,
                    .capacity = 1.0f};
    test_route_case("sigmoid aux zloss capacity", 2, 8, 6, sreg, true);
    RtRoute wide = {.topk = 8, .sigmoid = 1, .groups = 8, .group_topk = 4, .norm = 1, .scale = 1};
    test_route_case("256 experts top-8", 1, 3, 256, wide, false);
    test_route_ties();
    test_route_freeze();
    test_moe_local(9, 8, 6, 4, 2, RT_MOE_SWIGLU, false, 0);
    test_moe_local(5, 4, 3, 1, 1, RT_MOE_SWIGLU, false, 0);
    test_moe_local(16, 12, 10, 6, 3, RT_MOE_SWIGLU, false, 0);
    test_moe_local(9, 8, 6, 4, 2, RT_MOE_RELU2, false, 0);
    test_moe_local(9, 8, 6, 4, 2, RT_MOE_RELU2, true, 1);
    test_moe_local(9, 8, 6, 4, 2, RT_MOE_SWIGLU, true, 1);
    test_moe_local(9, 8, 6, 4, 2, RT_MOE_SWIGLU_OAI, true, 10); /* past the clamps */
    ref_expect_fatal("topk beyond the candidates", bad_topk, NULL, "topk = 3 outside");
    ref_expect_fatal("gate columns", bad_cols, NULL, "gates have 3 columns");
    ref_expect_fatal("W slot rows", bad_wslot_rows, NULL, "more than the W slot's 1");
    ref_expect_fatal("W slot unfilled", bad_wslot_unfilled, NULL, "holds no rows");
    return check_status("rt_moe");
}
