/* ref_moe.c: Mixtral's sparse MoE block (Hugging Face MixtralSparseMoeBlock),
 * and DeepSeek-V3's (the V3 report's DeepSeekMoE equations: sigmoid scores,
 * normalised top-k weights; the group score as docs/moe.md states it; the
 * weights times route_scale; a shared expert every token uses with weight
 * 1; router() says how), in double, forward and backward, written from docs/moe.md and HF's
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
 * Jacobian, element by element.
 * Nemotron 3 (models/nemotron3.mdl, REF_HYBRID): DeepSeek's block under
 * mixer.{gate, experts.e.up_proj, down_proj, shared_experts.*}, the experts
 * and the shared expert ungated squared-ReLU MLPs; Super's latent MoE (its
 * L layers, c->DL > 0; Megatron-LM's MoELayer with moe_latent_size) routes
 * on h but runs the experts on hl = fc1_latent_proj(h) [DL], their weighted
 * sum yl [DL] taken back by fc2_latent_proj:
 *   y = fc2 (sum over the chosen e of w_e expert_e(fc1 h)) + shared(h)
 * GPT-OSS (models/gpt-oss.mdl): the router has a bias (mlp.router.weight,
 * mlp.router.bias: z = gate(h) + b), and the experts are held stacked,
 * layers.L.e_gate, e_up [E, D, F] and e_down [E, F, D] (h W) with their
 * biases e_gate_b, e_up_b [E, F] and e_down_b [E, D], which ref_oss.c makes
 * from and into the files' gate_up_proj (gate and up interleaved),
 * down_proj and their biases; and the clamped SwiGLU of transformers'
 * GptOssExperts (act_m below). */
#include "ref.h"

#include "ir.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The block's tensors under Hugging Face's names: Mixtral's
 * block_sparse_moe.{gate, experts.e.w1, w3, w2}, DeepSeek's mlp.{gate,
 * experts.e.gate_proj, up_proj, down_proj, shared_experts.*}. */
enum { ROUTER, W1, W3, W2, S1, S3, S2, B1, B3, BD };
static double *W(const RefConfig *c, const RefSt *st, const char *prefix, int which, int e)
{
    if (which >= B1 && c->fam != REF_GPTOSS)
        return NULL; /* only GPT-OSS's experts have biases */
    static const char *mixtral[] = {"gate.weight", "experts.%d.w1.weight", "experts.%d.w3.weight",
                                    "experts.%d.w2.weight"};
    static const char *deepseek[] = {"gate.weight",
                                     "experts.%d.gate_proj.weight",
                                     "experts.%d.up_proj.weight",
                                     "experts.%d.down_proj.weight",
                                     "shared_experts.gate_proj.weight",
                                     "shared_experts.up_proj.weight",
                                     "shared_experts.down_proj.weight"};
    bool ds = c->fam == REF_DEEPSEEK || c->fam == REF_HYBRID;
    char name[256], tail[128];
    if (which == S1 && !ir_moe_acts[c->moe_act].gated)
        return NULL; /* an ungated shared expert (Nemotron 3's) has no gate projection */
    if (c->fam == REF_GPTOSS) { /* the router's names; the experts' stacked tensors (expert_w) */
        static const char *oss[] = {[ROUTER] = "mlp.router.weight", [W1] = "e_gate", [W3] = "e_up",
                                    [W2] = "e_down", [B1] = "e_gate_b", [B3] = "e_up_b", [BD] = "e_down_b"};
        int layer = atoi(prefix + strlen("model.layers."));
        if (which == ROUTER)
            snprintf(name, sizeof name, "%s%s", prefix, oss[which]);
        else
            snprintf(name, sizeof name, "layers.%d.%s", layer, oss[which]);
        int64_t per = which == B1 || which == B3 ? c->F : which == BD ? c->D : c->D * c->F;
        RefTensor *t = ref_st_find(st, name);
        if (!t) {
            fprintf(stderr, "ref: no tensor %s\n", name);
            exit(1);
        }
        return which == ROUTER ? t->v : t->v + (int64_t)e * per;
    }
    snprintf(tail, sizeof tail, ds ? deepseek[which] : mixtral[which], e);
    snprintf(name, sizeof name, "%s%s%s", prefix,
             c->fam == REF_HYBRID ? "mixer." : ds ? "mlp." : "block_sparse_moe.", tail);
    RefTensor *t = ref_st_find(st, name);
    if (!t) {
        fprintf(stderr, "ref: no tensor %s\n", name);
        exit(1);
    }
    return t->v;
}

/* The gate projection w1 of expert e, NULL for an ungated act (relu2). */
static double *W1_(const RefConfig *c, const RefSt *st, const char *prefix, int e)
{
    return ir_moe_acts[c->moe_act].gated ? W(c, st, prefix, W1, e) : NULL;
}

/* The latent MoE's projections (c->DL > 0): fc1_latent_proj [DL, D] (which
 * 0) and fc2_latent_proj [D, DL] (which 1), stored [out, in]; NULL without. */
static double *LAT(const RefConfig *c, const RefSt *st, const char *prefix, int which)
{
    if (c->DL <= 0)
        return NULL;
    char name[256];
    snprintf(name, sizeof name, "%smixer.fc%d_latent_proj.weight", prefix, which + 1);
    RefTensor *t = ref_st_find(st, name);
    if (!t) {
        fprintf(stderr, "ref: no tensor %s\n", name);
        exit(1);
    }
    return t->v;
}

/* Element (f, j) of w1, w3 ([F, D] stored [out, in]; GPT-OSS's stacked
 * [D, F], in then out) and (j, f) of w2 ([D, F]; stacked [F, D]). */
static int stacked;
#define W13(w, f, j) (*(stacked ? &(w)[(j) * F + (f)] : &(w)[(f) * D + (j)]))
#define W2(w, j, f) (*(stacked ? &(w)[(f) * D + (j)] : &(w)[(j) * F + (f)]))

/* The experts' activation (docs/moe.md, "Expert activations"), m = act(a1,
 * a3) with a1 the gate projection and a3 the up one, and its partial
 * derivatives: SwiGLU silu(a1) a3; squared ReLU max(a3, 0)^2 (no gate, a1
 * unused); GPT-OSS's g sigmoid(1.702 g) (c + 1) with g = min(a1, 7), c =
 * clamp(a3, -7, 7), whose clamps pass no gradient outside their range
 * (transformers' GptOssExperts._apply_gate, torch.clamp's gradient). */
static int act; /* IrMoeAct of the block at hand */
static double act_m(double a1, double a3)
{
    if (act == IR_MOE_RELU2)
        return a3 > 0 ? a3 * a3 : 0;
    if (act == IR_MOE_SWIGLU_OAI) {
        double g = fmin(a1, 7), c = fmax(-7, fmin(a3, 7));
        return g / (1 + exp(-1.702 * g)) * (c + 1);
    }
    return ref_silu(a1) * a3;
}
static void act_grad(double a1, double a3, double *d1, double *d3)
{
    if (act == IR_MOE_RELU2) {
        *d1 = 0, *d3 = a3 > 0 ? 2 * a3 : 0;
        return;
    }
    if (act == IR_MOE_SWIGLU_OAI) {
        double g = fmin(a1, 7), c = fmax(-7, fmin(a3, 7)), sg = 1 / (1 + exp(-1.702 * g));
        *d1 = a1 <= 7 ? (c + 1) * sg * (1 + 1.702 * g * (1 - sg)) : 0;
        *d3 = a3 >= -7 && a3 <= 7 ? g * sg : 0;
        return;
    }
    *d1 = a3 * ref_silu_grad(a1), *d3 = ref_silu(a1);
}

/* One expert on one row: a1 = w1 h (+ b1), a3 = w3 h (+ b3), m = act(a1,
 * a3), o = w2 m (+ bd). w1 is NULL for an ungated act, b1, b3 and bd
 * without biases (GPT-OSS's gate_up_proj_bias, down_proj_bias). */
static const double *bias_d; /* bd of the expert at hand (set by the callers), or NULL */
static void expert(const double *w1, const double *w3, const double *w2, const double *b1, const double *b3,
                   const double *h, int64_t D, int64_t F, double *a1, double *a3, double *m, double *o)
{
    for (int64_t f = 0; f < F; f++) {
        double s1 = b1 ? b1[f] : 0, s3 = b3 ? b3[f] : 0;
        for (int64_t j = 0; j < D; j++) {
            if (w1)
                s1 += W13(w1, f, j) * h[j];
            s3 += W13(w3, f, j) * h[j];
        }
        a1[f] = s1, a3[f] = s3, m[f] = act_m(s1, s3);
    }
    for (int64_t j = 0; j < D; j++) {
        double s = bias_d ? bias_d[j] : 0;
        for (int64_t f = 0; f < F; f++)
            s += W2(w2, j, f) * m[f];
        o[j] = s;
    }
}

/* One expert's backward on one row, its output weighted wt: the weight
 * (and bias) gradients accumulate into g1, g3, g2 (gb1, gb3) and dh;
 * returns <dy, expert output> (the gradient of wt). */
static double *grad_bias_d; /* the gradient of bias_d, or NULL */
static double expert_bwd(const double *w1, const double *w3, const double *w2, const double *b1,
                         const double *b3, double *g1, double *g3, double *g2, double *gb1, double *gb3,
                         const double *h, const double *dy, double wt, int64_t D, int64_t F, double *a1,
                         double *a3, double *m, double *o, double *dm, double *dh)
{
    expert(w1, w3, w2, b1, b3, h, D, F, a1, a3, m, o);
    double d = 0;
    for (int64_t j = 0; j < D; j++) {
        d += dy[j] * o[j];
        if (grad_bias_d)
            grad_bias_d[j] += wt * dy[j];
    }
    for (int64_t ff = 0; ff < F; ff++) {
        double s = 0;
        for (int64_t j = 0; j < D; j++) {
            s += W2(w2, j, ff) * dy[j];
            W2(g2, j, ff) += wt * dy[j] * m[ff];
        }
        dm[ff] = wt * s;
    }
    for (int64_t ff = 0; ff < F; ff++) {
        double p1, p3;
        act_grad(a1[ff], a3[ff], &p1, &p3);
        double d1 = dm[ff] * p1, d3 = dm[ff] * p3;
        if (gb1)
            gb1[ff] += d1;
        if (gb3)
            gb3[ff] += d3;
        for (int64_t j = 0; j < D; j++) {
            if (w1) {
                W13(g1, ff, j) += d1 * h[j];
                dh[j] += W13(w1, ff, j) * d1;
            }
            W13(g3, ff, j) += d3 * h[j];
            dh[j] += W13(w3, ff, j) * d3;
        }
    }
    return d;
}

/* Frozen choices (ref_moe_freeze): every router call's top-k, in call order. */
static int freeze_mode, *frozen;
static int64_t nfrozen, frozen_cap, frozen_pos;

void ref_moe_freeze(int mode)
{
    freeze_mode = mode, frozen_pos = 0;
    if (mode == 1)
        nfrozen = 0;
}

/* The router of row r (docs/moe.md's route, DeepSeek-V3 eqs. 15-16): logits
 * z; scores s = softmax(z) or sigmoid(z); p, the scores normalised over all
 * experts (the balance loss's); under groups, only the experts of the Gk
 * groups with the best group score (softmax: its largest s; sigmoid: the sum
 * of its two largest) stay candidates; the top K candidates by s (ties to
 * the lower index) and their weights s (/ their sum when the route
 * normalises) times the route's scale. */
static const double *router_bias; /* GPT-OSS's mlp.router.bias of the block at hand, else NULL */
static void router(const RefConfig *c, const double *wr, const double *h, double *z, double *s,
                   double *p, int *sel, double *wt)
{
    int64_t E = c->E, D = c->D, G = c->G > 1 ? c->G : 1, per = E / G;
    double mx = -INFINITY, sum = 0;
    for (int64_t e = 0; e < E; e++) {
        double v = router_bias ? router_bias[e] : 0;
        for (int64_t j = 0; j < D; j++)
            v += wr[e * D + j] * h[j];
        z[e] = v;
        mx = fmax(mx, v);
    }
    for (int64_t e = 0; e < E; e++)
        sum += c->sigmoid ? (s[e] = 1 / (1 + exp(-z[e]))) : exp(z[e] - mx);
    for (int64_t e = 0; e < E; e++) {
        if (!c->sigmoid)
            s[e] = exp(z[e] - mx) / sum;
        p[e] = c->sigmoid ? s[e] / sum : s[e];
    }
    bool cand[256], gkeep[256];
    double gs[256];
    for (int64_t g = 0; g < G; g++) {
        double b1 = -INFINITY, b2 = -INFINITY;
        for (int64_t e = g * per; e < (g + 1) * per; e++) {
            if (s[e] > b1)
                b2 = b1, b1 = s[e];
            else if (s[e] > b2)
                b2 = s[e];
        }
        gs[g] = c->sigmoid && per > 1 ? b1 + b2 : b1;
        gkeep[g] = G == 1;
    }
    for (int64_t k = 0; G > 1 && k < c->Gk; k++) {
        int64_t best = -1;
        for (int64_t g = 0; g < G; g++)
            if (!gkeep[g] && (best < 0 || gs[g] > gs[best]))
                best = g;
        gkeep[best] = true;
    }
    for (int64_t e = 0; e < E; e++)
        cand[e] = gkeep[e / per];
    double tot = 0;
    for (int64_t k = 0; k < c->K; k++) {
        int best = -1;
        for (int64_t e = 0; e < E; e++)
            if (cand[e] && (best < 0 || s[e] > s[best]))
                best = (int)e;
        sel[k] = best;
        cand[best] = false;
        tot += s[best];
    }
    if (freeze_mode == 2) { /* replay: the recorded choices, their weights from today's scores */
        if (frozen_pos + c->K > nfrozen) {
            fprintf(stderr, "ref: more router calls than were recorded\n");
            exit(1);
        }
        tot = 0;
        for (int64_t k = 0; k < c->K; k++)
            sel[k] = frozen[frozen_pos++], tot += s[sel[k]];
    } else if (freeze_mode == 1) {
        if (nfrozen + c->K > frozen_cap) {
            frozen_cap = 2 * (nfrozen + c->K);
            frozen = realloc(frozen, sizeof *frozen * (size_t)frozen_cap);
        }
        for (int64_t k = 0; k < c->K; k++)
            frozen[nfrozen++] = sel[k];
    }
    double sc = c->scale > 0 ? c->scale : 1;
    for (int64_t k = 0; k < c->K; k++)
        wt[k] = sc * (c->moe_norm ? s[sel[k]] / tot : s[sel[k]]);
}

double ref_moe_fwd(const RefConfig *c, const RefSt *w, const char *prefix, const double *h, double *y)
{
    int64_t R = c->B * c->S, D = c->D, F = c->F, E = c->E, K = c->K;
    const double *wr = W(c, w, prefix, ROUTER, 0);
    char bn[128];
    snprintf(bn, sizeof bn, "%smlp.router.bias", prefix);
    stacked = c->fam == REF_GPTOSS;
    act = c->moe_act;
    router_bias = stacked ? ref_st_find(w, bn)->v : NULL;
    int64_t Fm = c->Fs > F ? c->Fs : F, De = c->DL > 0 ? c->DL : D; /* De: the experts' width */
    const double *l1 = LAT(c, w, prefix, 0), *l2 = LAT(c, w, prefix, 1);
    double *z = ref_zeros(E), *sv = ref_zeros(E), *p = ref_zeros(E), *wt = ref_zeros(K), *a1 = ref_zeros(Fm),
           *a3 = ref_zeros(Fm), *m = ref_zeros(Fm), *o = ref_zeros(D > De ? D : De), *P = ref_zeros(E),
           *hl = ref_zeros(De), *yl = ref_zeros(De);
    int *sel = calloc((size_t)K, sizeof *sel);
    int64_t *cnt = calloc((size_t)E, sizeof *cnt);
    double reg = 0;
    for (int64_t r = 0; r < R; r++) {
        const double *hr = h + r * D;
        router(c, wr, hr, z, sv, p, sel, wt);
        if (l1) /* down to the latent before the experts (and the dispatch) */
            ref_mm(hl, hr, l1, 1, De, D, false, true, false);
        const double *he = l1 ? hl : hr;
        double *ye = l1 ? yl : y + r * D;
        for (int64_t j = 0; j < De; j++)
            ye[j] = 0;
        for (int64_t k = 0; k < K; k++) {
            int e = sel[k];
            bias_d = W(c, w, prefix, BD, e);
            expert(W1_(c, w, prefix, e), W(c, w, prefix, W3, e), W(c, w, prefix, W2, e), W(c, w, prefix, B1, e),
                   W(c, w, prefix, B3, e), he, De, F, a1, a3, m, o);
            bias_d = NULL;
            for (int64_t j = 0; j < De; j++)
                ye[j] += wt[k] * o[j];
            cnt[e]++;
        }
        if (l2) /* back to the hidden after the combine */
            ref_mm(y + r * D, yl, l2, 1, D, De, false, true, false);
        if (c->Fs > 0) { /* the shared expert every token uses, weight 1 (DeepSeek-V3 eq. 12) */
            expert(W(c, w, prefix, S1, 0), W(c, w, prefix, S3, 0), W(c, w, prefix, S2, 0), NULL, NULL, hr,
                   D, c->Fs, a1, a3, m, o);
            for (int64_t j = 0; j < D; j++)
                y[r * D + j] += o[j];
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
    free(z), free(sv), free(p), free(wt), free(a1), free(a3), free(m), free(o), free(P), free(sel), free(cnt);
    free(hl), free(yl);
    return reg;
}

void ref_moe_bwd(const RefConfig *c, const RefSt *w, RefSt *gr, const char *prefix, const double *h,
                 const double *dy, double *dh)
{
    int64_t R = c->B * c->S, D = c->D, F = c->F, E = c->E, K = c->K, S = c->S;
    const double *wr = W(c, w, prefix, ROUTER, 0);
    double *dwr = W(c, gr, prefix, ROUTER, 0);
    char bn[128];
    snprintf(bn, sizeof bn, "%smlp.router.bias", prefix);
    stacked = c->fam == REF_GPTOSS;
    act = c->moe_act;
    router_bias = stacked ? ref_st_find(w, bn)->v : NULL;
    double *dbr = stacked ? ref_st_find(gr, bn)->v : NULL;
    int64_t Fm = c->Fs > F ? c->Fs : F, De = c->DL > 0 ? c->DL : D;
    const double *l1 = LAT(c, w, prefix, 0), *l2 = LAT(c, w, prefix, 1);
    double *dl1 = LAT(c, gr, prefix, 0), *dl2 = LAT(c, gr, prefix, 1);
    double *z = ref_zeros(E), *sv = ref_zeros(E), *p = ref_zeros(E), *wt = ref_zeros(K), *a1 = ref_zeros(Fm),
           *a3 = ref_zeros(Fm), *m = ref_zeros(Fm), *o = ref_zeros(D > De ? D : De), *dm = ref_zeros(Fm),
           *dp = ref_zeros(E), *ds = ref_zeros(E), *dz = ref_zeros(E), *dw = ref_zeros(K), *f = ref_zeros(R * E),
           *hl = ref_zeros(De), *yl = ref_zeros(De), *dyl = ref_zeros(De), *dhl = ref_zeros(De);
    int *sel = calloc((size_t)K, sizeof *sel);
    /* f_e of each sequence (the counts of its top-k choices), first */
    for (int64_t r = 0; r < R; r++) {
        router(c, wr, h + r * D, z, sv, p, sel, wt);
        for (int64_t k = 0; k < K; k++)
            f[(r / S) * E + sel[k]] += (double)E / ((double)K * (double)S);
    }
    for (int64_t r = 0; r < R; r++) {
        const double *hr = h + r * D, *g = dy + r * D;
        double *dhr = dh + r * D;
        router(c, wr, hr, z, sv, p, sel, wt);
        for (int64_t j = 0; j < D; j++)
            dhr[j] = 0;
        /* latent: the experts' input hl = fc1 h and their output's gradient
         * dyl = fc2^T dy; fc2's gradient dy yl^T once yl is summed below */
        if (l1) {
            ref_mm(hl, hr, l1, 1, De, D, false, true, false);
            ref_mm(dyl, g, l2, 1, De, D, false, false, false);
            for (int64_t i = 0; i < De; i++)
                yl[i] = 0, dhl[i] = 0;
        }
        const double *he = l1 ? hl : hr, *ge = l1 ? dyl : g;
        double *dhe = l1 ? dhl : dhr;
        for (int64_t k = 0; k < K; k++) {
            int e = sel[k];
            bias_d = W(c, w, prefix, BD, e), grad_bias_d = W(c, gr, prefix, BD, e);
            dw[k] = expert_bwd(W1_(c, w, prefix, e), W(c, w, prefix, W3, e), W(c, w, prefix, W2, e),
                               W(c, w, prefix, B1, e), W(c, w, prefix, B3, e), W1_(c, gr, prefix, e),
                               W(c, gr, prefix, W3, e), W(c, gr, prefix, W2, e), W(c, gr, prefix, B1, e),
                               W(c, gr, prefix, B3, e), he, ge, wt[k], De, F, a1, a3, m, o, dm, dhe);
            bias_d = NULL, grad_bias_d = NULL;
            for (int64_t i = 0; l1 && i < De; i++)
                yl[i] += wt[k] * o[i];
        }
        if (l1) { /* fc2: dW2 += dy yl^T; fc1: dW1 += dhl h^T, dh += fc1^T dhl */
            ref_mm(dl2, g, yl, D, De, 1, true, false, true);
            ref_mm(dl1, dhl, hr, De, D, 1, true, false, true);
            ref_mm(dhr, dhl, l1, 1, D, De, false, false, true);
        }
        if (c->Fs > 0)
            expert_bwd(W(c, w, prefix, S1, 0), W(c, w, prefix, S3, 0), W(c, w, prefix, S2, 0), NULL, NULL,
                       W(c, gr, prefix, S1, 0), W(c, gr, prefix, S3, 0), W(c, gr, prefix, S2, 0), NULL, NULL, hr,
                       g, 1, D, c->Fs, a1, a3, m, o, dm, dhr);
        /* through the weights to the scores s: w_k = scale s_k (/ tot) */
        double sc = c->scale > 0 ? c->scale : 1, tot = 0, dot = 0, ssum = 0, pdot = 0;
        for (int64_t e = 0; e < E; e++)
            ds[e] = 0, ssum += sv[e];
        for (int64_t k = 0; k < K; k++)
            tot += sv[sel[k]], dot += dw[k] * sv[sel[k]];
        for (int64_t k = 0; k < K; k++)
            ds[sel[k]] += sc * (c->moe_norm ? dw[k] / tot - dot / (tot * tot) : dw[k]);
        /* the balance loss, through p: p = s (softmax) or s / sum s (sigmoid) */
        for (int64_t e = 0; e < E; e++) {
            dp[e] = c->aux * f[(r / S) * E + e] / ((double)S * (double)c->B);
            pdot += dp[e] * p[e];
        }
        for (int64_t e = 0; e < E; e++)
            ds[e] += c->sigmoid ? (dp[e] - pdot) / ssum : dp[e];
        /* to the logits: the sigmoid's derivative, or the softmax Jacobian
         * dz_e = sum_i ds_i s_i (delta_ie - s_e); the z-loss's own term */
        double mx = -INFINITY, se = 0;
        for (int64_t e = 0; e < E; e++)
            mx = fmax(mx, z[e]);
        for (int64_t e = 0; e < E; e++)
            se += exp(z[e] - mx);
        double lse = mx + log(se);
        for (int64_t e = 0; e < E; e++) {
            double v = 0;
            if (c->sigmoid)
                v = ds[e] * sv[e] * (1 - sv[e]);
            else
                for (int64_t i = 0; i < E; i++)
                    v += ds[i] * sv[i] * ((i == e) - sv[e]);
            dz[e] = v + c->zloss * 2 * lse * exp(z[e] - lse) / (double)R;
        }
        for (int64_t e = 0; e < E; e++) {
            if (dbr)
                dbr[e] += dz[e];
            for (int64_t j = 0; j < D; j++) {
                dwr[e * D + j] += dz[e] * hr[j];
                dhr[j] += dz[e] * wr[e * D + j];
            }
        }
    }
    free(z), free(sv), free(p), free(wt), free(a1), free(a3), free(m), free(o), free(dm), free(dp);
    free(ds), free(dz);
    free(dw), free(f), free(sel), free(hl), free(yl), free(dyl), free(dhl);
}
