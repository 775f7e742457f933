/* ref_moe.c: Mixtral's sparse MoE block (Hugging Face MixtralSparseMoeBlock)
 * in double, forward and backward, written from docs/moe.md and HF's
 * definition, apart from the runtime:
 *   z = gate(h)                       router logits, gate.weight [E, D]
 *   p = softmax(z)                    over the E experts
 *   top-k of p (ties to the lower index), w = p / sum of the chosen p when
 *   the route normalises (Mixtral does), else p
 *   y = sum over the chosen e of w_e * w2_e(silu(w1_e(h)) * w3_e(h))
 * with w1, w3 [F, D] and w2 [D, F] stored [out, in]. The regularisers of
 * docs/moe.md enter the backward (not the printed loss): the per-sequence
 * load-balancing loss alpha sum_e f_e P_e, f_e = E / (k S) * (tokens of the
 * sequence whose top-k holds e), P_e the sequence's mean p, averaged over
 * the B sequences of the step; and the z-loss beta (logsumexp z)^2 averaged
 * over the step's tokens. The backward goes through the full softmax
 * Jacobian, element by element. */
#include "ref.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *W(const RefSt *st, const char *prefix, const char *fmt, int e)
{
    char name[256], tail[128];
    snprintf(tail, sizeof tail, fmt, e);
    snprintf(name, sizeof name, "%sblock_sparse_moe.%s", prefix, tail);
    RefTensor *t = ref_st_find(st, name);
    if (!t) {
        fprintf(stderr, "ref: no tensor %s\n", name);
        exit(1);
    }
    return t->v;
}

static double *zeros(int64_t n)
{
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!p) {
        fprintf(stderr, "ref: out of memory\n");
        exit(1);
    }
    return p;
}

/* One expert on one row: a1 = w1 h, a3 = w3 h, m = silu(a1) a3, o = w2 m. */
static void expert(const double *w1, const double *w3, const double *w2, const double *h, int64_t D,
                   int64_t F, double *a1, double *a3, double *m, double *o)
{
    for (int64_t f = 0; f < F; f++) {
        double s1 = 0, s3 = 0;
        for (int64_t j = 0; j < D; j++) {
            s1 += w1[f * D + j] * h[j];
            s3 += w3[f * D + j] * h[j];
        }
        a1[f] = s1, a3[f] = s3, m[f] = ref_silu(s1) * s3;
    }
    for (int64_t j = 0; j < D; j++) {
        double s = 0;
        for (int64_t f = 0; f < F; f++)
            s += w2[j * F + f] * m[f];
        o[j] = s;
    }
}

/* The router of row r: z, p, the chosen experts (descending p) and weights. */
static void router(const RefConfig *c, const double *wr, const double *h, double *z, double *p,
                   int *sel, double *wt)
{
    int64_t E = c->E, D = c->D;
    double mx = -INFINITY, sum = 0;
    for (int64_t e = 0; e < E; e++) {
        double s = 0;
        for (int64_t j = 0; j < D; j++)
            s += wr[e * D + j] * h[j];
        z[e] = s;
        mx = fmax(mx, s);
    }
    for (int64_t e = 0; e < E; e++)
        sum += exp(z[e] - mx);
    for (int64_t e = 0; e < E; e++)
        p[e] = exp(z[e] - mx) / sum;
    double tot = 0;
    for (int64_t k = 0; k < c->K; k++) {
        int best = -1;
        for (int64_t e = 0; e < E; e++) {
            bool taken = false;
            for (int64_t i = 0; i < k; i++)
                taken |= sel[i] == e;
            if (!taken && (best < 0 || p[e] > p[best]))
                best = (int)e;
        }
        sel[k] = best;
        tot += p[best];
    }
    for (int64_t k = 0; k < c->K; k++)
        wt[k] = c->moe_norm ? p[sel[k]] / tot : p[sel[k]];
}

double ref_moe_fwd(const RefConfig *c, const RefSt *w, const char *prefix, const double *h, double *y)
{
    int64_t R = c->B * c->S, D = c->D, F = c->F, E = c->E, K = c->K;
    const double *wr = W(w, prefix, "gate.weight", 0);
    double *z = zeros(E), *p = zeros(E), *wt = zeros(K), *a1 = zeros(F), *a3 = zeros(F),
           *m = zeros(F), *o = zeros(D), *P = zeros(E);
    int *sel = calloc((size_t)K, sizeof *sel);
    int64_t *cnt = calloc((size_t)E, sizeof *cnt);
    double reg = 0;
    for (int64_t r = 0; r < R; r++) {
        const double *hr = h + r * D;
        router(c, wr, hr, z, p, sel, wt);
        for (int64_t j = 0; j < D; j++)
            y[r * D + j] = 0;
        for (int64_t k = 0; k < K; k++) {
            int e = sel[k];
            expert(W(w, prefix, "experts.%d.w1.weight", e), W(w, prefix, "experts.%d.w3.weight", e),
                   W(w, prefix, "experts.%d.w2.weight", e), hr, D, F, a1, a3, m, o);
            for (int64_t j = 0; j < D; j++)
                y[r * D + j] += wt[k] * o[j];
            cnt[e]++;
        }
        for (int64_t e = 0; e < E; e++)
            P[e] += p[e] / (double)c->S;
        if (c->zloss > 0) {
            double mx = -INFINITY, s = 0;
            for (int64_t e = 0; e < E; e++)
                mx = fmax(mx, z[e]);
            for (int64_t e = 0; e < E; e++)
                s += exp(z[e] - mx);
            reg += c->zloss * (mx + log(s)) * (mx + log(s)) / (double)R;
        }
        if ((r + 1) % c->S == 0) { /* a sequence ends: its load-balancing term */
            for (int64_t e = 0; e < E; e++) {
                double f = (double)E / ((double)K * (double)c->S) * (double)cnt[e];
                reg += c->aux * f * P[e] / (double)c->B;
                cnt[e] = 0, P[e] = 0;
            }
        }
    }
    free(z), free(p), free(wt), free(a1), free(a3), free(m), free(o), free(P), free(sel), free(cnt);
    return reg;
}

void ref_moe_bwd(const RefConfig *c, const RefSt *w, RefSt *gr, const char *prefix, const double *h,
                 const double *dy, double *dh)
{
    int64_t R = c->B * c->S, D = c->D, F = c->F, E = c->E, K = c->K, S = c->S;
    const double *wr = W(w, prefix, "gate.weight", 0);
    double *dwr = W(gr, prefix, "gate.weight", 0);
    double *z = zeros(E), *p = zeros(E), *wt = zeros(K), *a1 = zeros(F), *a3 = zeros(F),
           *m = zeros(F), *o = zeros(D), *dm = zeros(F), *dp = zeros(E), *dz = zeros(E),
           *dw = zeros(K), *f = zeros(R * E);
    int *sel = calloc((size_t)K, sizeof *sel);
    /* f_e of each sequence (the counts of its top-k choices), first */
    for (int64_t r = 0; r < R; r++) {
        router(c, wr, h + r * D, z, p, sel, wt);
        for (int64_t k = 0; k < K; k++)
            f[(r / S) * E + sel[k]] += (double)E / ((double)K * (double)S);
    }
    for (int64_t r = 0; r < R; r++) {
        const double *hr = h + r * D, *g = dy + r * D;
        double *dhr = dh + r * D;
        router(c, wr, hr, z, p, sel, wt);
        for (int64_t j = 0; j < D; j++)
            dhr[j] = 0;
        for (int64_t k = 0; k < K; k++) {
            int e = sel[k];
            const double *w1 = W(w, prefix, "experts.%d.w1.weight", e);
            const double *w3 = W(w, prefix, "experts.%d.w3.weight", e);
            const double *w2 = W(w, prefix, "experts.%d.w2.weight", e);
            double *g1 = W(gr, prefix, "experts.%d.w1.weight", e);
            double *g3 = W(gr, prefix, "experts.%d.w3.weight", e);
            double *g2 = W(gr, prefix, "experts.%d.w2.weight", e);
            expert(w1, w3, w2, hr, D, F, a1, a3, m, o);
            double d = 0; /* d loss / d w_k = <dy, expert output> */
            for (int64_t j = 0; j < D; j++)
                d += g[j] * o[j];
            dw[k] = d;
            for (int64_t ff = 0; ff < F; ff++) {
                double s = 0;
                for (int64_t j = 0; j < D; j++) {
                    s += w2[j * F + ff] * g[j];
                    g2[j * F + ff] += wt[k] * g[j] * m[ff];
                }
                dm[ff] = wt[k] * s;
            }
            for (int64_t ff = 0; ff < F; ff++) {
                double d1 = dm[ff] * a3[ff] * ref_silu_grad(a1[ff]), d3 = dm[ff] * ref_silu(a1[ff]);
                for (int64_t j = 0; j < D; j++) {
                    g1[ff * D + j] += d1 * hr[j];
                    g3[ff * D + j] += d3 * hr[j];
                    dhr[j] += w1[ff * D + j] * d1 + w3[ff * D + j] * d3;
                }
            }
        }
        /* through the weights to p */
        for (int64_t e = 0; e < E; e++)
            dp[e] = c->aux * f[(r / S) * E + e] / ((double)S * (double)c->B);
        double tot = 0, dot = 0;
        for (int64_t k = 0; k < K; k++)
            tot += p[sel[k]], dot += dw[k] * p[sel[k]];
        for (int64_t k = 0; k < K; k++)
            dp[sel[k]] += c->moe_norm ? dw[k] / tot - dot / (tot * tot) : dw[k];
        /* softmax Jacobian: dz_e = sum_i dp_i p_i (delta_ie - p_e) */
        double mx = -INFINITY, se = 0;
        for (int64_t e = 0; e < E; e++)
            mx = fmax(mx, z[e]);
        for (int64_t e = 0; e < E; e++)
            se += exp(z[e] - mx);
        double lse = mx + log(se);
        for (int64_t e = 0; e < E; e++) {
            double s = 0;
            for (int64_t i = 0; i < E; i++)
                s += dp[i] * p[i] * ((i == e) - p[e]);
            dz[e] = s + c->zloss * 2 * lse * p[e] / (double)R;
        }
        for (int64_t e = 0; e < E; e++)
            for (int64_t j = 0; j < D; j++) {
                dwr[e * D + j] += dz[e] * hr[j];
                dhr[j] += dz[e] * wr[e * D + j];
            }
    }
    free(z), free(p), free(wt), free(a1), free(a3), free(m), free(o), free(dm), free(dp), free(dz);
    free(dw), free(f), free(sel);
}
