/* route.c: the router of a mixture-of-experts layer (docs/moe.md, `route`):
 * scores, group-limited top-k, weights, per-sequence capacity, and the
 * backward through the kept choices plus the load-balancing and z-loss
 * regularisers.
 *
 * A token's routing is a small computation over at most
 * RT_ROUTE_MAX_EXPERTS scores; it runs in double so that the fp32 gates are
 * the exact math rounded once, and ties (equal logits give equal scores)
 * stay ties. Tokens run on the rank's threads; the capacity step and the
 * load-balancing counts work per sequence, in token order, so the result
 * does not depend on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "cpu.h"
#include "simd.h"

/* One token's routing: scores s[E], the k chosen experts (descending score,
 * ties to the lower index) and their weights before capacity. */
typedef struct {
    double s[RT_ROUTE_MAX_EXPERTS];
    int pick[RT_ROUTE_MAX_TOPK];
    double w[RT_ROUTE_MAX_TOPK];
    double chosen_sum; /* sum of the chosen s (norm's denominator) */
} Tok;

/* The scores of one token (step 1). */
static void scores(double *s, const rt_act *z, int64_t E, const RtRoute *r)
{
    if (r->sigmoid) {
        for (int64_t e = 0; e < E; e++)
            s[e] = 1.0 / (1.0 + exp(-(double)z[e]));
        return;
    }
    double m = -INFINITY, sum = 0;
    for (int64_t e = 0; e < E; e++)
        m = fmax(m, (double)z[e]);
    for (int64_t e = 0; e < E; e++)
        sum += s[e] = exp((double)z[e] - m);
    for (int64_t e = 0; e < E; e++)
        s[e] /= sum;
}

/* Step 4 for the chosen experts t->pick, from scores t->s. */
static void weights(Tok *t, const RtRoute *r)
{
    t->chosen_sum = 0;
    for (int i = 0; i < r->topk; i++)
        t->chosen_sum += t->s[t->pick[i]];
    for (int i = 0; i < r->topk; i++) {
        double w = t->s[t->pick[i]];
        if (r->norm)
            w /= t->chosen_sum;
        t->w[i] = w * (double)r->scale;
    }
}

/* Steps 1-4 of docs/moe.md for one token. */
static void route_token(Tok *t, const rt_act *z, int64_t E, const RtRoute *r)
{
    scores(t->s, z, E, r);
    bool cand[RT_ROUTE_MAX_EXPERTS];
    for (int64_t e = 0; e < E; e++)
        cand[e] = true;
    if (r->groups > 1) {
        int G = r->groups;
        int64_t per = E / G;
        double gs[RT_ROUTE_MAX_EXPERTS];
        for (int g = 0; g < G; g++) {
            /* the largest s, or (sigmoid) the sum of the two largest */
            double a = -INFINITY, b = -INFINITY;
            for (int64_t e = g * per; e < (g + 1) * per; e++) {
                double v = t->s[e];
                if (v > a) {
                    b = a;
                    a = v;
                } else if (v > b)
                    b = v;
            }
            gs[g] = r->sigmoid && per > 1 ? a + b : a;
        }
        bool keep[RT_ROUTE_MAX_EXPERTS] = {false};
        for (int i = 0; i < r->group_topk; i++) {
            int best = -1;
            for (int g = 0; g < G; g++)
                if (!keep[g] && (best < 0 || gs[g] > gs[best]))
                    best = g;
            keep[best] = true;
        }
        for (int64_t e = 0; e < E; e++)
            cand[e] = keep[e / per];
    }
    for (int i = 0; i < r->topk; i++) {
        int best = -1;
        for (int64_t e = 0; e < E; e++) /* strict >: ties to the lower index */
            if (cand[e] && (best < 0 || t->s[e] > t->s[best]))
                best = (int)e;
        cand[best] = false;
        t->pick[i] = best;
    }
    weights(t, r);
}

/* The selection held fixed for gradient checks (rt_route_freeze): copies of
 * the logits of each call since RT_ROUTE_RECORD, in call order. */
static struct {
    int mode, next, n, cap;
    rt_act **copy;
    int64_t *numel;
} frozen;

void rt_route_freeze(int mode)
{
    if (mode != RT_ROUTE_REPLAY) {
        for (int i = 0; i < frozen.n; i++)
            free(frozen.copy[i]);
        frozen.n = 0;
    }
    if (mode == RT_ROUTE_FREE) {
        free(frozen.copy);
        free(frozen.numel);
        frozen.copy = NULL, frozen.numel = NULL, frozen.cap = 0;
    }
    frozen.mode = mode;
    frozen.next = 0;
}

/* The logits this call chooses from: its own, or (replaying) the copy. */
static const rt_act *selection_logits(const rt_act *logits, int64_t n)
{
    if (frozen.mode == RT_ROUTE_RECORD) {
        if (frozen.n == frozen.cap) {
            frozen.cap = frozen.cap ? 2 * frozen.cap : 16;
            frozen.copy = realloc(frozen.copy, (size_t)frozen.cap * sizeof *frozen.copy);
            frozen.numel = realloc(frozen.numel, (size_t)frozen.cap * sizeof *frozen.numel);
            if (!frozen.copy || !frozen.numel)
                rt_fatal("ptdrt: out of host memory in rt_route_freeze");
        }
        frozen.copy[frozen.n] = rtcpu_xmalloc((size_t)n * sizeof(rt_act));
        memcpy(frozen.copy[frozen.n], logits, (size_t)n * sizeof(rt_act));
        frozen.numel[frozen.n++] = n;
        return logits;
    }
    if (frozen.mode != RT_ROUTE_REPLAY)
        return logits;
    if (frozen.next >= frozen.n || frozen.numel[frozen.next] != n)
        rt_fatal("rt_route_fwd: replaying call %d of %d recorded, with %lld logits: the forward "
                 "differs from the recorded one", frozen.next + 1, frozen.n, (long long)n);
    return frozen.copy[frozen.next++];
}

/* The regularisers' value over one sequence's tokens (docs/moe.md): aux_seq
 * (the counts from the top-k before drops) / n_seq and zloss's sum of
 * lse^2 / (n_seq S), in double. tok holds the choices and z's scores, z
 * the logits. */
static double regularisers(const Tok *tok, const rt_act *z, int64_t S, int64_t E, const RtRoute *r,
                           double n_seq)
{
    double v = 0;
    if (r->aux > 0) {
        double cnt[RT_ROUTE_MAX_EXPERTS] = {0}, P[RT_ROUTE_MAX_EXPERTS] = {0};
        for (int64_t p = 0; p < S; p++) {
            for (int i = 0; i < r->topk; i++)
                cnt[tok[p].pick[i]] += 1;
            const double *s = tok[p].s; /* z's scores (route_token or the replay's) */
            double sum = 0;
            for (int64_t e = 0; e < E; e++)
                sum += s[e];
            for (int64_t e = 0; e < E; e++) /* p = s normalised over every expert */
                P[e] += s[e] / sum / (double)S;
        }
        double aux = 0;
        for (int64_t e = 0; e < E; e++)
            aux += (double)E / ((double)r->topk * (double)S) * cnt[e] * P[e];
        v += (double)r->aux * aux / n_seq;
    }
    if (r->zloss > 0) {
        double zs = 0;
        for (int64_t p = 0; p < S; p++) {
            const rt_act *zp = z + p * E;
            double m = -INFINITY, sum = 0;
            for (int64_t e = 0; e < E; e++)
                m = fmax(m, (double)zp[e]);
            for (int64_t e = 0; e < E; e++)
                sum += exp((double)zp[e] - m);
            double lse = m + log(sum);
            zs += lse * lse;
        }
        v += (double)r->zloss * zs / (n_seq * (double)S);
    }
    return v;
}

/* A choice of the sequence: token position and weight, for the capacity
 * ranking (largest weight first, ties to the earlier position). */
typedef struct {
    double w;
    int64_t pos;
    int slot; /* index into the token's pick[] */
} Choice;

static int by_priority(const void *pa, const void *pb)
{
    const Choice *a = pa, *b = pb;
    if (a->w != b->w)
        return a->w > b->w ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* Step 5 over one sequence's tokens: clears kept[pos * k + slot] of the
 * dropped choices. */
static void apply_capacity(bool *kept, const Tok *tok, int64_t S, int64_t E, const RtRoute *r,
                           int64_t cap)
{
    int k = r->topk;
    int64_t *cnt = calloc((size_t)E + 1, sizeof *cnt);
    Choice *ch = rtcpu_xmalloc((size_t)(S * k) * sizeof *ch);
    if (!cnt)
        rt_fatal("ptdrt: out of host memory in rt_route_fwd");
    for (int64_t p = 0; p < S; p++)
        for (int i = 0; i < k; i++)
            cnt[tok[p].pick[i] + 1]++;
    for (int64_t e = 0; e < E; e++)
        cnt[e + 1] += cnt[e];
    int64_t *fill = rtcpu_xmalloc((size_t)E * sizeof *fill);
    memcpy(fill, cnt, (size_t)E * sizeof *fill);
    for (int64_t p = 0; p < S; p++)
        for (int i = 0; i < k; i++)
            ch[fill[tok[p].pick[i]]++] = (Choice){tok[p].w[i], p, i};
    for (int64_t e = 0; e < E; e++) {
        int64_t n = cnt[e + 1] - cnt[e];
        if (n <= cap)
            continue;
        qsort(ch + cnt[e], (size_t)n, sizeof *ch, by_priority);
        for (int64_t j = cap; j < n; j++)
            kept[ch[cnt[e] + j].pos * k + ch[cnt[e] + j].slot] = false;
    }
    free(fill);
    free(ch);
    free(cnt);
}

void rt_route_fwd(rt_act *gates, const rt_act *logits, int64_t seqs, int64_t seq_len,
                  int64_t n_experts, const RtRoute *r, float *objective, float weight,
                  int64_t global_seqs)
{
    rtc_check_route("rt_route_fwd", seqs, seq_len, n_experts, r);
    bool value = (r->aux > 0 || r->zloss > 0) && objective; /* NULL: a recomputation */
    if (value && global_seqs < 1)
        rt_fatal("rt_route_fwd: the regularisers average over the global batch's sequences, got %lld",
                 (long long)global_seqs);
    int64_t E = n_experts, S = seq_len, k = r->topk, cap = rtc_route_capacity(r, S, E);
    if (S == 0 || seqs == 0)
        return;
    const rt_act *sel = selection_logits(logits, seqs * S * E);
    Tok *tok = rtcpu_xmalloc((size_t)S * sizeof *tok);
    bool *kept = rtcpu_xmalloc((size_t)(S * k) * sizeof *kept);
    double sum = 0;
    for (int64_t q = 0; q < seqs; q++) {
        const rt_act *z = logits + q * S * E, *zs = sel + q * S * E;
        rt_act *g = gates + q * S * E;
        RTCPU_PRAGMA(omp parallel for schedule(static))
        for (int64_t p = 0; p < S; p++) {
            route_token(&tok[p], zs + p * E, E, r);
            if (zs != z) { /* replaying: the recorded choice, today's weights */
                scores(tok[p].s, z + p * E, E, r);
                weights(&tok[p], r);
            }
        }
        for (int64_t i = 0; i < S * k; i++)
            kept[i] = true;
        if (cap < S * k) {
            if (zs != z) { /* drops by the recorded weights too */
                Tok *rec = rtcpu_xmalloc((size_t)S * sizeof *rec);
                for (int64_t p = 0; p < S; p++)
                    route_token(&rec[p], zs + p * E, E, r);
                apply_capacity(kept, rec, S, E, r, cap);
                free(rec);
            } else {
                apply_capacity(kept, tok, S, E, r, cap);
            }
        }
        for (int64_t p = 0; p < S; p++) {
            memset(g + p * E, 0, (size_t)E * sizeof *g);
            for (int i = 0; i < k; i++)
                if (kept[p * k + i])
                    g[p * E + tok[p].pick[i]] = (rt_act)tok[p].w[i];
        }
        if (value)
            sum += regularisers(tok, z, S, E, r, (double)global_seqs);
    }
    if (value)
        *objective += (float)((double)weight * sum);
    free(kept);
    free(tok);
}

/* d(objective)/dz for one token: the kept choices' path through steps 4
 * and 1, the load-balancing term (a[e] = alpha f_e / (S N_seq), the
 * gradient with respect to p[t, e]) and the z-loss term. */
static void token_bwd(rt_act *dz, const Tok *t, const rt_act *z, const rt_act *gate,
                      const rt_act *dgate, int64_t E, const RtRoute *r, const double *a,
                      double zcoef)
{
    double ds[RT_ROUTE_MAX_EXPERTS];
    for (int64_t e = 0; e < E; e++)
        ds[e] = 0;
    double dot = 0; /* sum over the kept of dg_e s_e (norm's quotient rule) */
    for (int i = 0; i < r->topk; i++) {
        int e = t->pick[i];
        if (gate[e] != 0)
            dot += (double)dgate[e] * t->s[e];
    }
    for (int i = 0; i < r->topk; i++) {
        int e = t->pick[i];
        double dg = gate[e] != 0 ? (double)dgate[e] : 0;
        if (r->norm)
            ds[e] = (double)r->scale * (dg / t->chosen_sum - dot / (t->chosen_sum * t->chosen_sum));
        else
            ds[e] = (double)r->scale * dg;
    }
    if (a) {
        if (r->sigmoid) { /* p = s / sum s */
            double sum = 0, ap = 0;
            for (int64_t e = 0; e < E; e++)
                sum += t->s[e];
            for (int64_t e = 0; e < E; e++)
                ap += a[e] * t->s[e] / sum;
            for (int64_t e = 0; e < E; e++)
                ds[e] += (a[e] - ap) / sum;
        } else {
            for (int64_t e = 0; e < E; e++)
                ds[e] += a[e];
        }
    }
    double sds = 0;
    if (!r->sigmoid)
        for (int64_t e = 0; e < E; e++)
            sds += ds[e] * t->s[e];
    double m = -INFINITY, sum = 0, lse = 0;
    if (zcoef != 0) {
        for (int64_t e = 0; e < E; e++)
            m = fmax(m, (double)z[e]);
        for (int64_t e = 0; e < E; e++)
            sum += exp((double)z[e] - m);
        lse = m + log(sum);
    }
    for (int64_t e = 0; e < E; e++) {
        double s = t->s[e];
        double d = r->sigmoid ? ds[e] * s * (1 - s) : s * (ds[e] - sds);
        if (zcoef != 0) /* d/dz beta lse^2 = 2 beta lse softmax(z) */
            d += zcoef * 2 * lse * exp((double)z[e] - lse);
        dz[e] = (rt_act)d;
    }
}

void rt_route_bwd(rt_act *dlogits, const rt_act *logits, const rt_act *gates,
                  const rt_act *dgates, int64_t seqs, int64_t seq_len, int64_t n_experts,
                  const RtRoute *r, int64_t global_seqs)
{
    rtc_check_route("rt_route_bwd", seqs, seq_len, n_experts, r);
    if ((r->aux > 0 || r->zloss > 0) && global_seqs < 1)
        rt_fatal("rt_route_bwd: global_seqs = %lld, but the regularisers average over the global batch",
                 (long long)global_seqs);
    int64_t E = n_experts, S = seq_len, k = r->topk;
    if (S == 0)
        return;
    Tok *tok = rtcpu_xmalloc((size_t)S * sizeof *tok);
    double a[RT_ROUTE_MAX_EXPERTS];
    double zcoef = r->zloss > 0 ? (double)r->zloss / ((double)global_seqs * (double)S) : 0;
    for (int64_t q = 0; q < seqs; q++) {
        const int64_t off = q * S * E;
        RTCPU_PRAGMA(omp parallel for schedule(static))
        for (int64_t p = 0; p < S; p++)
            route_token(&tok[p], logits + off + p * E, E, r);
        if (r->aux > 0) {
            /* f_e = E / (k S) * tokens whose top-k (before drops) holds e */
            int64_t cnt[RT_ROUTE_MAX_EXPERTS] = {0};
            for (int64_t p = 0; p < S; p++)
                for (int i = 0; i < k; i++)
                    cnt[tok[p].pick[i]]++;
            for (int64_t e = 0; e < E; e++)
                a[e] = (double)r->aux * ((double)E / ((double)k * S) * (double)cnt[e]) /
                       ((double)S * (double)global_seqs);
        }
        RTCPU_PRAGMA(omp parallel for schedule(static))
        for (int64_t p = 0; p < S; p++)
            token_bwd(dlogits + off + p * E, &tok[p], logits + off + p * E, gates + off + p * E,
                      dgates + off + p * E, E, r, r->aux > 0 ? a : NULL, zcoef);
    }
    free(tok);
}
