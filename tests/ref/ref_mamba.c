/* ref_mamba.c: the hybrids of models/hybrid.mdl (Mamba-2 and attention
 * layers, Nemotron-H's kinds M and *, alternating) and models/nemotron3.mdl
 * without its MoE layers (M, * and squared-ReLU MLP layers - in the order of
 * its pattern; c->kinds), forward and backward in double,
 * written from the Mamba-2 paper's recurrence (Dao and Gu 2024,
 * "Transformers are SSMs", the SSD layer) and mamba_ssm's Mamba2 block,
 * apart from the runtime: the scan keeps every state (no chunks), the
 * convolution is the plain causal sum.
 *
 * Layer 2i (Mamba-2), h = rmsnorm(x) w:
 *   z = h Wz^T, xr = h Wx^T, Br = h WB^T, Cr = h WC^T, dr = h Wdt^T
 *   xs = silu(conv(xr)), B = silu(conv(Br)), C = silu(conv(Cr))
 *     conv(u)[t, c] = b[c] + sum_j w[c, j] u[t - K + 1 + j, c]
 *   dt = softplus(dr + dt_bias), A = -exp(A_log)
 *   per head h of group q = h / (H / G): S_t = exp(dt_t A) S_{t-1} + dt_t B_t,q xs_t^T,
 *     y_t = S_t^T C_t,q + D xs_t  (B, C [G, N] a step: one row per group)
 *   g = y silu(z), out = (rmsnorm(g) w_n) Wout^T, the norm over each group's
 *     H / G heads apart (mamba_ssm's RMSNormGated, group_size); x += out
 * Attention layer: causal grouped-query attention without positions, x += o_proj(...).
 * MLP layer: x += down(relu(up h)^2) (Nemotron-H's -, squared ReLU, no gate).
 * MoE layer (nemotron3.mdl's E, and L: the latent MoE of Nemotron 3 Super):
 *   ref_moe.c's block on h, x += its output.
 * logits = lm_head(rmsnorm(x) w_f). */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *W(const RefSt *st, const char *fmt_, int l)
{
    char name[160];
    snprintf(name, sizeof name, fmt_, l);
    RefTensor *t = ref_st_find(st, name);
    if (!t) {
        fprintf(stderr, "ref: no tensor %s\n", name);
        exit(1);
    }
    return t->v;
}

/* A tensor of ndim (at most 3) dims a, b, c, in the shape ptdc's importer
 * expects: a weight of more than two dims flattened to [leading, last]. */
static void fill3(RefSt *st, uint64_t *s, const char *fmt_, int l, int ndim, int64_t a, int64_t b, int64_t c,
                  double mean, double std)
{
    char name[160];
    snprintf(name, sizeof name, fmt_, l);
    int64_t shape[3] = {a, b, c};
    RefTensor *t = ref_st_add(st, name, ndim, shape);
    for (int64_t i = 0; i < t->n; i++)
        t->v[i] = (double)(float)(mean + std * ref_normal(s));
}

static void fillw(RefSt *st, uint64_t *s, const char *fmt_, int l, int ndim, int64_t a, int64_t b, double mean,
                  double std)
{
    fill3(st, s, fmt_, l, ndim, a, b, 1, mean, std);
}

/* A layer's tensor name format: pre ("backbone.layers.%d.", or "mtp.layers.%d."
 * for the multi-token prediction layer) then x; rotating buffers, as one call
 * may name several. */
static const char *nm(const char *pre, const char *x)
{
    static char buf[8][160];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s%s", pre, x);
    return buf[k];
}
#define P_(x) nm(pre, x)
static const char *const MAIN = "backbone.layers.%d.", *const MTP = "mtp.layers.%d.";

/* Layer l's tensors, of kind k, under name format pre. */
static void layer_weights(const RefConfig *c, RefSt *st, uint64_t *s, const char *pre, int l, char k)
{
    const double MAT = 0.08, NORM = 0.2, BIAS = 0.1;
    int64_t D = c->D, HP = c->MH * c->MP, G = c->MG, N = c->MN, GN = G * N, K = c->MK;
    {
        fillw(st, s, P_("norm.weight"), l, 1, D, 1, 1, NORM);
        if (k == '-') {
            fillw(st, s, P_("mixer.up_proj.weight"), l, 2, c->Fd, D, 0, MAT);
            fillw(st, s, P_("mixer.down_proj.weight"), l, 2, D, c->Fd, 0, MAT);
        } else if (k == 'E' || k == 'L') {
            int64_t De = k == 'L' ? c->DL : D; /* the experts' width */
            char name[160], at[64];
            snprintf(at, sizeof at, pre, l);
            fillw(st, s, P_("mixer.gate.weight"), l, 2, c->E, D, 0, MAT);
            if (k == 'L') {
                fillw(st, s, P_("mixer.fc1_latent_proj.weight"), l, 2, De, D, 0, MAT);
                fillw(st, s, P_("mixer.fc2_latent_proj.weight"), l, 2, D, De, 0, MAT);
            }
            for (int e = 0; e < c->E; e++) { /* the name made first: fillw's format takes the layer only */
                snprintf(name, sizeof name, "%smixer.experts.%d.up_proj.weight", at, e);
                fillw(st, s, name, l, 2, c->F, De, 0, MAT);
                snprintf(name, sizeof name, "%smixer.experts.%d.down_proj.weight", at, e);
                fillw(st, s, name, l, 2, De, c->F, 0, MAT);
            }
            fillw(st, s, P_("mixer.shared_experts.up_proj.weight"), l, 2, c->Fs, D, 0, MAT);
            fillw(st, s, P_("mixer.shared_experts.down_proj.weight"), l, 2, D, c->Fs, 0, MAT);
        } else if (k == 'M') {
            fillw(st, s, P_("mixer.in_proj_z.weight"), l, 2, HP, D, 0, MAT);
            fillw(st, s, P_("mixer.in_proj_x.weight"), l, 2, HP, D, 0, MAT);
            fillw(st, s, P_("mixer.in_proj_B.weight"), l, 2, GN, D, 0, 0.25);
            fillw(st, s, P_("mixer.in_proj_C.weight"), l, 2, GN, D, 0, 0.25);
            fillw(st, s, P_("mixer.in_proj_dt.weight"), l, 2, c->MH, D, 0, MAT);
            fillw(st, s, P_("mixer.conv1d_x.weight"), l, 2, HP, K, 0, 0.5);
            fillw(st, s, P_("mixer.conv1d_x.bias"), l, 2, c->MH, c->MP, 0, BIAS);
            fillw(st, s, P_("mixer.conv1d_B.weight"), l, 2, GN, K, 0, 0.5);
            fillw(st, s, P_("mixer.conv1d_B.bias"), l, G > 1 ? 2 : 1, G > 1 ? G : N, G > 1 ? N : 1, 0, BIAS);
            fillw(st, s, P_("mixer.conv1d_C.weight"), l, 2, GN, K, 0, 0.5);
            fillw(st, s, P_("mixer.conv1d_C.bias"), l, G > 1 ? 2 : 1, G > 1 ? G : N, G > 1 ? N : 1, 0, BIAS);
            fillw(st, s, P_("mixer.dt_bias"), l, 1, c->MH, 1, -1, 0.5);
            fillw(st, s, P_("mixer.A_log"), l, G > 1 ? 2 : 1, G > 1 ? G : c->MH, G > 1 ? c->MH / G : 1, 0, 0.5);
            fillw(st, s, P_("mixer.D"), l, G > 1 ? 2 : 1, G > 1 ? G : c->MH, G > 1 ? c->MH / G : 1, 1, NORM);
            fillw(st, s, P_("mixer.norm.weight"), l, 2, c->MH, c->MP, 1, NORM);
            fillw(st, s, P_("mixer.out_proj.weight"), l, 2, D, HP, 0, MAT);
        } else {
            fillw(st, s, P_("mixer.q_proj.weight"), l, 2, c->H * c->Dh, D, 0, MAT);
            fillw(st, s, P_("mixer.k_proj.weight"), l, 2, c->KVH * c->Dh, D, 0, MAT);
            fillw(st, s, P_("mixer.v_proj.weight"), l, 2, c->KVH * c->Dh, D, 0, MAT);
            fillw(st, s, P_("mixer.o_proj.weight"), l, 2, D, c->H * c->Dh, 0, MAT);
        }
    }
}

void ref_hybrid_weights(const RefConfig *c, RefSt *st, uint64_t *s)
{
    const double MAT = 0.08, NORM = 0.2;
    int64_t D = c->D, V = c->V;
    fillw(st, s, "backbone.embeddings.weight", 0, 2, V, D, 0, 1);
    for (int l = 0; l < c->L; l++)
        layer_weights(c, st, s, MAIN, l, c->kinds[l]);
    fillw(st, s, "backbone.norm_f.weight", 0, 1, D, 1, 1, NORM);
    fillw(st, s, "lm_head.weight", 0, 2, V, D, 0, MAT);
    if (!c->mtp)
        return;
    /* multi-token prediction's one layer (drawn after the model's, which
     * keep their values): Hugging Face's flattened names (nemotron_h_bridge.py),
     * enorm, hnorm and eh_proj [D, 2D] on its first layer, final_layernorm on
     * its last */
    fillw(st, s, "mtp.layers.0.enorm.weight", 0, 1, D, 1, 1, NORM);
    fillw(st, s, "mtp.layers.0.hnorm.weight", 0, 1, D, 1, 1, NORM);
    fillw(st, s, "mtp.layers.0.eh_proj.weight", 0, 2, D, 2 * D, 0, MAT);
    for (int j = 0; j < c->nmk; j++)
        layer_weights(c, st, s, MTP, j, c->mkinds[j]);
    fillw(st, s, "mtp.layers.%d.final_layernorm.weight", (int)c->nmk - 1, 1, D, 1, 1, NORM);
}

static double silu_(double x) { return x / (1 + exp(-x)); }
static double dsilu(double x)
{
    double s = 1 / (1 + exp(-x));
    return s * (1 + x * (1 - s));
}
static double softplus(double x) { return x > 20 ? x : log1p(exp(x)); }

/* y [R, out] = x [R, in] W^T (W [out, in]); the backward's two products. */
static void lin(double *y, const double *x, const double *w, int64_t R, int64_t in, int64_t out)
{
    ref_mm(y, x, w, R, out, in, false, true, false);
}
static void lin_bwd(double *dx, double *dw, const double *dy, const double *x, const double *w, int64_t R,
                    int64_t in, int64_t out, bool acc)
{
    ref_mm(dw, dy, x, out, in, R, true, false, true);
    ref_mm(dx, dy, w, R, in, out, false, false, acc);
}

/* The causal depthwise convolution of u [B, S, ch]; backward: du
 * overwritten, dw [ch, K] and db added. */
static void conv(double *y, const double *u, const double *w, const double *b, int64_t B, int64_t S, int64_t ch,
                 int64_t K)
{
    for (int64_t s = 0; s < B; s++)
        for (int64_t t = 0; t < S; t++)
            for (int64_t c = 0; c < ch; c++) {
                double a = b[c];
                for (int64_t j = 0; j < K; j++)
                    if (t - K + 1 + j >= 0)
                        a += w[c * K + j] * u[((s * S) + t - K + 1 + j) * ch + c];
                y[(s * S + t) * ch + c] = a;
            }
}
static void conv_bwd(double *du, double *dw, double *db, const double *dy, const double *u, const double *w,
                     int64_t B, int64_t S, int64_t ch, int64_t K)
{
    memset(du, 0, sizeof(double) * (size_t)(B * S * ch));
    for (int64_t s = 0; s < B; s++)
        for (int64_t t = 0; t < S; t++)
            for (int64_t c = 0; c < ch; c++) {
                double g = dy[(s * S + t) * ch + c];
                db[c] += g;
                for (int64_t j = 0; j < K; j++) {
                    int64_t u_ = t - K + 1 + j;
                    if (u_ < 0)
                        continue;
                    dw[c * K + j] += g * u[(s * S + u_) * ch + c];
                    du[(s * S + u_) * ch + c] += g * w[c * K + j];
                }
            }
}

/* What a Mamba layer keeps for its backward. */
typedef struct M {
    double *z, *xr, *Br, *Cr, *dr, *xc, *Bc, *Cc, *xs, *Bs, *Cs, *dt, *y, *g, *gn, *rs, *S;
} M;

/* Forward of the scan for all (sequence, head), every state kept:
 * S [B, H, S+1, N, P] (index 0: the zero state). */
static void scan(const RefConfig *c, M *m, const double *Alog, const double *Dd)
{
    int64_t Bn = c->B, L = c->S, H = c->MH, P = c->MP, N = c->MN, G = c->MG;
    for (int64_t b = 0; b < Bn; b++)
        for (int64_t h = 0; h < H; h++) {
            double A = -exp(Alog[h]);
            double *S = m->S + (b * H + h) * (L + 1) * N * P;
            int64_t q = h / (H / G); /* the head's group */
            memset(S, 0, sizeof(double) * (size_t)(N * P));
            for (int64_t t = 0; t < L; t++) {
                int64_t r = b * L + t;
                double d = m->dt[r * H + h], a = exp(d * A);
                const double *x = m->xs + (r * H + h) * P, *Bt = m->Bs + (r * G + q) * N, *Ct = m->Cs + (r * G + q) * N;
                double *Sp = S + t * N * P, *St = Sp + N * P, *y = m->y + (r * H + h) * P;
                for (int64_t n = 0; n < N; n++)
                    for (int64_t p = 0; p < P; p++)
                        St[n * P + p] = a * Sp[n * P + p] + d * Bt[n] * x[p];
                for (int64_t p = 0; p < P; p++) {
                    double s = Dd[h] * x[p];
                    for (int64_t n = 0; n < N; n++)
                        s += Ct[n] * St[n * P + p];
                    y[p] = s;
                }
            }
        }
}

/* The scan's backward from dy: dxs, ddt, dBs, dCs overwritten; dAlog, dD added. */
static void scan_bwd(const RefConfig *c, const M *m, const double *Alog, const double *Dd, const double *dy,
                     double *dxs, double *ddt, double *dBs, double *dCs, double *dAlog, double *dD)
{
    int64_t Bn = c->B, L = c->S, H = c->MH, P = c->MP, N = c->MN, NG = c->MG, R = Bn * L;
    memset(dxs, 0, sizeof(double) * (size_t)(R * H * P));
    memset(ddt, 0, sizeof(double) * (size_t)(R * H));
    memset(dBs, 0, sizeof(double) * (size_t)(R * NG * N));
    memset(dCs, 0, sizeof(double) * (size_t)(R * NG * N));
    double *G = ref_zeros(N * P);
    for (int64_t b = 0; b < Bn; b++)
        for (int64_t h = 0; h < H; h++) {
            double A = -exp(Alog[h]), gA = 0;
            const double *S = m->S + (b * H + h) * (L + 1) * N * P;
            int64_t q = h / (H / NG);
            memset(G, 0, sizeof(double) * (size_t)(N * P)); /* dLoss/dS_t, carried backward */
            for (int64_t t = L - 1; t >= 0; t--) {
                int64_t r = b * L + t;
                double d = m->dt[r * H + h], a = exp(d * A);
                int64_t o = (r * NG + q) * N;
                const double *x = m->xs + (r * H + h) * P, *Bt = m->Bs + o, *Ct = m->Cs + o;
                const double *Sp = S + t * N * P, *St = Sp + N * P, *gy = dy + (r * H + h) * P;
                double *gx = dxs + (r * H + h) * P;
                for (int64_t p = 0; p < P; p++) {
                    gx[p] += Dd[h] * gy[p];
                    dD[h] += gy[p] * x[p];
                }
                for (int64_t n = 0; n < N; n++)
                    for (int64_t p = 0; p < P; p++) {
                        dCs[o + n] += gy[p] * St[n * P + p];
                        G[n * P + p] += Ct[n] * gy[p];
                    }
                double da = 0, gd = 0;
                for (int64_t n = 0; n < N; n++)
                    for (int64_t p = 0; p < P; p++) {
                        double g = G[n * P + p];
                        da += g * Sp[n * P + p];
                        gd += g * Bt[n] * x[p];
                        dBs[o + n] += g * d * x[p];
                        gx[p] += g * d * Bt[n];
                    }
                /* a = exp(d A): da/dd = a A, da/dA = a d */
                ddt[r * H + h] += gd + da * a * A;
                gA += da * a * d;
                for (int64_t i = 0; i < N * P; i++)
                    G[i] *= a;
            }
            dAlog[h] += gA * A; /* A = -exp(A_log) */
        }
    free(G);
}

/* The gated norm per group: each row's G groups of HP / G values, each
 * with its own weight row (G = 1: over all of HP). */
static void group_norm_fwd(const RefConfig *c, double *y, double *rs, const double *x, const double *w, int64_t R,
                           int64_t HP)
{
    int64_t G = c->MG, cols = HP / G;
    for (int64_t r = 0; r < R; r++)
        for (int64_t q = 0; q < G; q++)
            ref_rmsnorm_fwd(y + r * HP + q * cols, rs + r * G + q, x + r * HP + q * cols, w + q * cols, 1, cols,
                            c->eps);
}

static void group_norm_bwd(const RefConfig *c, double *dx, double *dw, const double *dy, const double *x,
                           const double *w, const double *rs, int64_t R, int64_t HP)
{
    int64_t G = c->MG, cols = HP / G;
    for (int64_t r = 0; r < R; r++)
        for (int64_t q = 0; q < G; q++)
            ref_rmsnorm_bwd(dx + r * HP + q * cols, dw + q * cols, dy + r * HP + q * cols, x + r * HP + q * cols,
                            w + q * cols, rs + r * G + q, 1, cols);
}

static void mamba_fwd(const RefConfig *c, const RefSt *w, const char *pre, int l, M *m, const double *h,
                      double *out)
{
    int64_t R = c->B * c->S, D = c->D, H = c->MH, HP = H * c->MP, N = c->MG * c->MN, K = c->MK;
    m->z = ref_zeros(R * HP), m->xr = ref_zeros(R * HP), m->Br = ref_zeros(R * N), m->Cr = ref_zeros(R * N);
    m->dr = ref_zeros(R * H), m->xc = ref_zeros(R * HP), m->Bc = ref_zeros(R * N), m->Cc = ref_zeros(R * N);
    m->xs = ref_zeros(R * HP), m->Bs = ref_zeros(R * N), m->Cs = ref_zeros(R * N), m->dt = ref_zeros(R * H);
    m->y = ref_zeros(R * HP), m->g = ref_zeros(R * HP), m->gn = ref_zeros(R * HP), m->rs = ref_zeros(R * c->MG);
    m->S = ref_zeros(c->B * H * (c->S + 1) * N * c->MP);
    lin(m->z, h, W(w, P_("mixer.in_proj_z.weight"), l), R, D, HP);
    lin(m->xr, h, W(w, P_("mixer.in_proj_x.weight"), l), R, D, HP);
    lin(m->Br, h, W(w, P_("mixer.in_proj_B.weight"), l), R, D, N);
    lin(m->Cr, h, W(w, P_("mixer.in_proj_C.weight"), l), R, D, N);
    lin(m->dr, h, W(w, P_("mixer.in_proj_dt.weight"), l), R, D, H);
    conv(m->xc, m->xr, W(w, P_("mixer.conv1d_x.weight"), l), W(w, P_("mixer.conv1d_x.bias"), l), c->B, c->S, HP, K);
    conv(m->Bc, m->Br, W(w, P_("mixer.conv1d_B.weight"), l), W(w, P_("mixer.conv1d_B.bias"), l), c->B, c->S, N, K);
    conv(m->Cc, m->Cr, W(w, P_("mixer.conv1d_C.weight"), l), W(w, P_("mixer.conv1d_C.bias"), l), c->B, c->S, N, K);
    for (int64_t i = 0; i < R * HP; i++)
        m->xs[i] = silu_(m->xc[i]);
    for (int64_t i = 0; i < R * N; i++)
        m->Bs[i] = silu_(m->Bc[i]), m->Cs[i] = silu_(m->Cc[i]);
    const double *dtb = W(w, P_("mixer.dt_bias"), l);
    for (int64_t i = 0; i < R * H; i++)
        m->dt[i] = softplus(m->dr[i] + dtb[i % H]);
    scan(c, m, W(w, P_("mixer.A_log"), l), W(w, P_("mixer.D"), l));
    for (int64_t i = 0; i < R * HP; i++)
        m->g[i] = m->y[i] * silu_(m->z[i]);
    group_norm_fwd(c, m->gn, m->rs, m->g, W(w, P_("mixer.norm.weight"), l), R, HP);
    lin(out, m->gn, W(w, P_("mixer.out_proj.weight"), l), R, HP, D);
}

/* dh overwritten from dout; the layer's weight gradients added into gr. */
static void mamba_bwd(const RefConfig *c, const RefSt *w, RefSt *gr, const char *pre, int l, const M *m,
                      const double *h, const double *dout, double *dh)
{
    int64_t R = c->B * c->S, D = c->D, H = c->MH, HP = H * c->MP, N = c->MG * c->MN, K = c->MK;
    double *dgn = ref_zeros(R * HP), *dg = ref_zeros(R * HP), *dz = ref_zeros(R * HP), *dy = ref_zeros(R * HP);
    double *dxs = ref_zeros(R * HP), *ddt = ref_zeros(R * H), *dBs = ref_zeros(R * N), *dCs = ref_zeros(R * N);
    double *dxr = ref_zeros(R * HP), *dBr = ref_zeros(R * N), *dCr = ref_zeros(R * N), *ddr = ref_zeros(R * H);
    lin_bwd(dgn, W(gr, P_("mixer.out_proj.weight"), l), dout, m->gn, W(w, P_("mixer.out_proj.weight"), l), R, HP, D,
            false);
    group_norm_bwd(c, dg, W(gr, P_("mixer.norm.weight"), l), dgn, m->g, W(w, P_("mixer.norm.weight"), l), m->rs, R, HP);
    for (int64_t i = 0; i < R * HP; i++) {
        dy[i] = dg[i] * silu_(m->z[i]);
        dz[i] = dg[i] * m->y[i] * dsilu(m->z[i]);
    }
    scan_bwd(c, m, W(w, P_("mixer.A_log"), l), W(w, P_("mixer.D"), l), dy, dxs, ddt, dBs, dCs,
             W(gr, P_("mixer.A_log"), l), W(gr, P_("mixer.D"), l));
    const double *dtb = W(w, P_("mixer.dt_bias"), l);
    double *gdtb = W(gr, P_("mixer.dt_bias"), l);
    for (int64_t i = 0; i < R * H; i++) {
        double u = m->dr[i] + dtb[i % H];
        ddr[i] = ddt[i] / (1 + exp(-u)); /* softplus' = sigmoid */
        gdtb[i % H] += ddr[i];
    }
    for (int64_t i = 0; i < R * HP; i++)
        dxs[i] *= dsilu(m->xc[i]);
    for (int64_t i = 0; i < R * N; i++)
        dBs[i] *= dsilu(m->Bc[i]), dCs[i] *= dsilu(m->Cc[i]);
    conv_bwd(dxr, W(gr, P_("mixer.conv1d_x.weight"), l), W(gr, P_("mixer.conv1d_x.bias"), l), dxs, m->xr,
             W(w, P_("mixer.conv1d_x.weight"), l), c->B, c->S, HP, K);
    conv_bwd(dBr, W(gr, P_("mixer.conv1d_B.weight"), l), W(gr, P_("mixer.conv1d_B.bias"), l), dBs, m->Br,
             W(w, P_("mixer.conv1d_B.weight"), l), c->B, c->S, N, K);
    conv_bwd(dCr, W(gr, P_("mixer.conv1d_C.weight"), l), W(gr, P_("mixer.conv1d_C.bias"), l), dCs, m->Cr,
             W(w, P_("mixer.conv1d_C.weight"), l), c->B, c->S, N, K);
    lin_bwd(dh, W(gr, P_("mixer.in_proj_z.weight"), l), dz, h, W(w, P_("mixer.in_proj_z.weight"), l), R, D, HP, false);
    lin_bwd(dh, W(gr, P_("mixer.in_proj_x.weight"), l), dxr, h, W(w, P_("mixer.in_proj_x.weight"), l), R, D, HP, true);
    lin_bwd(dh, W(gr, P_("mixer.in_proj_B.weight"), l), dBr, h, W(w, P_("mixer.in_proj_B.weight"), l), R, D, N, true);
    lin_bwd(dh, W(gr, P_("mixer.in_proj_C.weight"), l), dCr, h, W(w, P_("mixer.in_proj_C.weight"), l), R, D, N, true);
    lin_bwd(dh, W(gr, P_("mixer.in_proj_dt.weight"), l), ddr, h, W(w, P_("mixer.in_proj_dt.weight"), l), R, D, H, true);
    double *all[] = {dgn, dg, dz, dy, dxs, ddt, dBs, dCs, dxr, dBr, dCr, ddr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

static void mamba_free(M *m)
{
    double *all[] = {m->z, m->xr, m->Br, m->Cr, m->dr, m->xc, m->Bc, m->Cc, m->xs,
                     m->Bs, m->Cs, m->dt, m->y, m->g, m->gn, m->rs, m->S};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* What a layer keeps: its input, norm, and the mixer's state. */
typedef struct Ly {
    double *x, *h, *rs, *q, *k, *v, *p, *a, *u; /* u: an MLP layer's up projection */
    M m;
} Ly;

/* Layer l of kind k (names under pre) on x: L keeps what its backward
 * needs; returns x plus the mixer's output (a new array) and adds the MoE
 * routers' regularisers to *reg. */
static double *layer_fwd(const RefConfig *c, const RefSt *w, const char *pre, int l, char k, Ly *L, double *x,
                         double *reg)
{
    const int64_t R = c->B * c->S, D = c->D, H = c->H, KVH = c->KVH, Dh = c->Dh;
    const int64_t HD = H * Dh, KD = KVH * Dh;
    char prefix[64];
    L->x = x, L->h = ref_zeros(R * D), L->rs = ref_zeros(R);
    ref_rmsnorm_fwd(L->h, L->rs, x, W(w, P_("norm.weight"), l), R, D, c->eps);
    double *out = ref_zeros(R * D);
    snprintf(prefix, sizeof prefix, pre, l);
    if (k == 'M') {
        mamba_fwd(c, w, pre, l, &L->m, L->h, out);
    } else if (k == 'E' || k == 'L') {
        *reg += ref_moe_fwd(c, w, prefix, L->h, out);
    } else if (k == '-') {
        double *a2 = ref_zeros(R * c->Fd);
        L->u = ref_zeros(R * c->Fd);
        lin(L->u, L->h, W(w, P_("mixer.up_proj.weight"), l), R, D, c->Fd);
        for (int64_t i = 0; i < R * c->Fd; i++)
            a2[i] = L->u[i] > 0 ? L->u[i] * L->u[i] : 0;
        lin(out, a2, W(w, P_("mixer.down_proj.weight"), l), R, c->Fd, D);
        free(a2);
    } else {
        L->q = ref_zeros(R * HD), L->k = ref_zeros(R * KD), L->v = ref_zeros(R * KD);
        L->p = ref_zeros(c->B * H * c->S * c->S), L->a = ref_zeros(R * HD);
        lin(L->q, L->h, W(w, P_("mixer.q_proj.weight"), l), R, D, HD);
        lin(L->k, L->h, W(w, P_("mixer.k_proj.weight"), l), R, D, KD);
        lin(L->v, L->h, W(w, P_("mixer.v_proj.weight"), l), R, D, KD);
        ref_attention_fwd(L->a, L->p, L->q, L->k, L->v, c->B, c->S, H, KVH, Dh);
        lin(out, L->a, W(w, P_("mixer.o_proj.weight"), l), R, HD, D);
    }
    for (int64_t i = 0; i < R * D; i++)
        out[i] += x[i];
    return out;
}

/* dx: the gradient of layer l's output on entry, of its input on return
 * (the residual's plus the mixer's through the norm); the layer's weight
 * gradients added into gr. */
static void layer_bwd(const RefConfig *c, const RefSt *w, RefSt *gr, const char *pre, int l, char k, const Ly *L,
                      double *dx)
{
    const int64_t R = c->B * c->S, D = c->D, H = c->H, KVH = c->KVH, Dh = c->Dh;
    const int64_t HD = H * Dh, KD = KVH * Dh;
    char prefix[64];
    double *dh = ref_zeros(R * D), *dout = ref_zeros(R * D), *tmp = ref_zeros(R * D);
    memcpy(dout, dx, sizeof(double) * (size_t)(R * D));
    snprintf(prefix, sizeof prefix, pre, l);
    if (k == 'M') {
        mamba_bwd(c, w, gr, pre, l, &L->m, L->h, dout, dh);
    } else if (k == 'E' || k == 'L') {
        ref_moe_bwd(c, w, gr, prefix, L->h, dout, dh);
    } else if (k == '-') {
        int64_t F = c->Fd;
        double *a2 = ref_zeros(R * F), *da2 = ref_zeros(R * F);
        for (int64_t i = 0; i < R * F; i++)
            a2[i] = L->u[i] > 0 ? L->u[i] * L->u[i] : 0;
        lin_bwd(da2, W(gr, P_("mixer.down_proj.weight"), l), dout, a2, W(w, P_("mixer.down_proj.weight"), l), R, F,
                D, false);
        for (int64_t i = 0; i < R * F; i++)
            da2[i] *= L->u[i] > 0 ? 2 * L->u[i] : 0; /* d relu(u)^2 / du */
        lin_bwd(dh, W(gr, P_("mixer.up_proj.weight"), l), da2, L->h, W(w, P_("mixer.up_proj.weight"), l), R, D, F,
                false);
        free(a2), free(da2);
    } else {
        double *da = ref_zeros(R * HD), *dq = ref_zeros(R * HD), *dk = ref_zeros(R * KD), *dv = ref_zeros(R * KD);
        lin_bwd(da, W(gr, P_("mixer.o_proj.weight"), l), dout, L->a, W(w, P_("mixer.o_proj.weight"), l), R, HD, D,
                false);
        ref_attention_bwd(dq, dk, dv, da, L->p, L->q, L->k, L->v, c->B, c->S, H, KVH, Dh);
        lin_bwd(dh, W(gr, P_("mixer.q_proj.weight"), l), dq, L->h, W(w, P_("mixer.q_proj.weight"), l), R, D, HD,
                false);
        lin_bwd(dh, W(gr, P_("mixer.k_proj.weight"), l), dk, L->h, W(w, P_("mixer.k_proj.weight"), l), R, D, KD,
                true);
        lin_bwd(dh, W(gr, P_("mixer.v_proj.weight"), l), dv, L->h, W(w, P_("mixer.v_proj.weight"), l), R, D, KD,
                true);
        free(da), free(dq), free(dk), free(dv);
    }
    ref_rmsnorm_bwd(tmp, W(gr, P_("norm.weight"), l), dh, L->x, W(w, P_("norm.weight"), l), L->rs, R, D);
    for (int64_t i = 0; i < R * D; i++)
        dx[i] += tmp[i]; /* the residual's gradient plus the mixer's */
    free(dh), free(dout), free(tmp);
}

static void layer_free(Ly *L, char k)
{
    if (k == 'M')
        mamba_free(&L->m);
    double *all[] = {L->h, L->rs, L->q, L->k, L->v, L->p, L->a, L->u};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* One multi-token prediction depth d (1, 2, ...), Megatron-Core's
 * MultiTokenPredictionLayer on a hybrid: the tokens d further on (0 past
 * the end) embedded and normalised (enorm), the hidden state hid (the main
 * model's normalised output at depth 1, the previous depth's after its
 * final norm) normalised (hnorm), joined [embedding; hidden], projected by
 * eh_proj [D, 2D], the layers of c->mkinds (the same weights at every
 * depth), final_layernorm, the shared head, and cross-entropy against the
 * targets d further on, the last d positions of each sequence without one,
 * meaned over the others and weighted mtp_w. */
typedef struct Depth {
    int32_t *tok, *tgt;
    double *e, *en, *rse, *hn, *rsh, *cat, *x0, *xo, *xf, *rsf, *dlogits;
    const double *hid;
    Ly ly[16];
} Depth;

static double depth_fwd(const RefConfig *c, const RefSt *w, Depth *m, int d, const int32_t *tokens,
                        const int32_t *targets, const double *hid, double *reg, bool grads)
{
    const int64_t R = c->B * c->S, D = c->D, S = c->S, V = c->V;
    m->hid = hid;
    m->tok = calloc((size_t)R, sizeof(int32_t)), m->tgt = calloc((size_t)R, sizeof(int32_t));
    for (int64_t r = 0; r < R; r++) {
        bool in = r % S + d < S;
        m->tok[r] = in ? tokens[r + d] : 0;
        m->tgt[r] = in ? targets[r + d] : -1;
    }
    const double *E = W(w, "backbone.embeddings.weight", 0);
    m->e = ref_zeros(R * D), m->en = ref_zeros(R * D), m->rse = ref_zeros(R), m->hn = ref_zeros(R * D);
    m->rsh = ref_zeros(R), m->cat = ref_zeros(R * 2 * D), m->x0 = ref_zeros(R * D);
    for (int64_t r = 0; r < R; r++)
        memcpy(m->e + r * D, E + m->tok[r] * D, sizeof(double) * (size_t)D);
    ref_rmsnorm_fwd(m->en, m->rse, m->e, W(w, "mtp.layers.0.enorm.weight", 0), R, D, c->eps);
    ref_rmsnorm_fwd(m->hn, m->rsh, hid, W(w, "mtp.layers.0.hnorm.weight", 0), R, D, c->eps);
    for (int64_t r = 0; r < R; r++) {
        memcpy(m->cat + r * 2 * D, m->en + r * D, sizeof(double) * (size_t)D);
        memcpy(m->cat + r * 2 * D + D, m->hn + r * D, sizeof(double) * (size_t)D);
    }
    lin(m->x0, m->cat, W(w, "mtp.layers.0.eh_proj.weight", 0), R, 2 * D, D);
    double *x = m->x0;
    for (int j = 0; j < c->nmk; j++)
        x = layer_fwd(c, w, MTP, j, c->mkinds[j], &m->ly[j], x, reg);
    m->xo = x;
    m->xf = ref_zeros(R * D), m->rsf = ref_zeros(R);
    ref_rmsnorm_fwd(m->xf, m->rsf, x, W(w, "mtp.layers.%d.final_layernorm.weight", (int)c->nmk - 1), R, D, c->eps);
    double *logits = ref_zeros(R * V);
    ref_mm(logits, m->xf, W(w, "lm_head.weight", 0), R, V, D, false, true, false);
    double loss = ref_masked_cross_entropy(logits, m->tgt, R, V, c->mtp_w, grads ? &m->dlogits : NULL);
    free(logits);
    return loss;
}

/* dxf: the gradient of the depth's normalised output (its head's, plus the
 * next depth's through its hnorm); returns the gradient of hid in dhid. */
static void depth_bwd(const RefConfig *c, const RefSt *w, RefSt *gr, const Depth *m, const double *dxf, double *dhid)
{
    const int64_t R = c->B * c->S, D = c->D;
    double *dx = ref_zeros(R * D), *dcat = ref_zeros(R * 2 * D), *den = ref_zeros(R * D), *dhn = ref_zeros(R * D);
    double *de = ref_zeros(R * D);
    const char *fl = "mtp.layers.%d.final_layernorm.weight";
    ref_rmsnorm_bwd(dx, W(gr, fl, (int)c->nmk - 1), dxf, m->xo, W(w, fl, (int)c->nmk - 1), m->rsf, R, D);
    for (int j = (int)c->nmk - 1; j >= 0; j--)
        layer_bwd(c, w, gr, MTP, j, c->mkinds[j], &m->ly[j], dx);
    lin_bwd(dcat, W(gr, "mtp.layers.0.eh_proj.weight", 0), dx, m->cat, W(w, "mtp.layers.0.eh_proj.weight", 0), R,
            2 * D, D, false);
    for (int64_t r = 0; r < R; r++) {
        memcpy(den + r * D, dcat + r * 2 * D, sizeof(double) * (size_t)D);
        memcpy(dhn + r * D, dcat + r * 2 * D + D, sizeof(double) * (size_t)D);
    }
    ref_rmsnorm_bwd(de, W(gr, "mtp.layers.0.enorm.weight", 0), den, m->e, W(w, "mtp.layers.0.enorm.weight", 0),
                    m->rse, R, D);
    ref_rmsnorm_bwd(dhid, W(gr, "mtp.layers.0.hnorm.weight", 0), dhn, m->hid, W(w, "mtp.layers.0.hnorm.weight", 0),
                    m->rsh, R, D);
    double *dE = W(gr, "backbone.embeddings.weight", 0);
    for (int64_t r = 0; r < R; r++) /* the shared table: the shifted tokens' rows */
        for (int64_t j = 0; j < D; j++)
            dE[m->tok[r] * D + j] += de[r * D + j];
    free(dx), free(dcat), free(den), free(dhn), free(de);
}

static void depth_free(const RefConfig *c, Depth *m)
{
    for (int j = 0; j < c->nmk; j++) {
        layer_free(&m->ly[j], c->mkinds[j]);
        if (j)
            free(m->ly[j].x);
    }
    double *all[] = {m->e, m->en, m->rse, m->hn, m->rsh, m->cat, m->x0, m->xo, m->xf, m->rsf, m->dlogits};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(m->tok), free(m->tgt);
}

double ref_hybrid_step(const RefConfig *c, const RefSt *w, const int32_t *tokens, const int32_t *targets,
                       double *logits_out, RefSt *gr)
{
    const int64_t R = c->B * c->S, D = c->D, V = c->V;
    Ly *ly = calloc((size_t)c->L, sizeof *ly);
    double *x = ref_zeros(R * D), reg = 0; /* reg: the MoE routers' regularisers */
    const double *E = W(w, "backbone.embeddings.weight", 0);
    for (int64_t r = 0; r < R; r++)
        memcpy(x + r * D, E + tokens[r] * D, sizeof(double) * (size_t)D);
    for (int l = 0; l < c->L; l++)
        x = layer_fwd(c, w, MAIN, l, c->kinds[l], &ly[l], x, &reg);
    double *xf = ref_zeros(R * D), *rsf = ref_zeros(R), *logits = ref_zeros(R * V);
    ref_rmsnorm_fwd(xf, rsf, x, W(w, "backbone.norm_f.weight", 0), R, D, c->eps);
    const double *head = W(w, "lm_head.weight", 0);
    ref_mm(logits, xf, head, R, V, D, false, true, false);
    double *dlogits = gr ? ref_zeros(R * V) : NULL;
    double loss = ref_cross_entropy(logits, targets, R, V, dlogits), mtp_loss = 0;
    if (logits_out)
        memcpy(logits_out, logits, sizeof(double) * (size_t)(R * V));
    Depth *dp = calloc((size_t)(c->mtp ? c->mtp : 1), sizeof *dp);
    for (int d = 0; d < c->mtp; d++) /* after the model's loss, as the graph orders the routers */
        mtp_loss += depth_fwd(c, w, &dp[d], d + 1, tokens, targets, d ? dp[d - 1].xf : xf, &reg, gr != NULL);
    if (gr) {
        double *dxf = ref_zeros(R * D), *dx = ref_zeros(R * D), *dhid = ref_zeros(R * D);
        /* the depths last to first: each one's normalised output takes its
         * head's gradient and the next depth's through hnorm */
        for (int d = (int)c->mtp - 1; d >= 0; d--) {
            double *dd = ref_zeros(R * D);
            ref_mm(W(gr, "lm_head.weight", 0), dp[d].dlogits, dp[d].xf, V, D, R, true, false, true);
            ref_mm(dd, dp[d].dlogits, head, R, D, V, false, false, false);
            for (int64_t i = 0; i < R * D; i++)
                dd[i] += dhid[i];
            depth_bwd(c, w, gr, &dp[d], dd, dhid);
            free(dd);
        }
        ref_mm(W(gr, "lm_head.weight", 0), dlogits, xf, V, D, R, true, false, true);
        ref_mm(dxf, dlogits, head, R, D, V, false, false, false);
        for (int64_t i = 0; i < R * D; i++)
            dxf[i] += dhid[i]; /* the main model's normalised output feeds the first depth too */
        ref_rmsnorm_bwd(dx, W(gr, "backbone.norm_f.weight", 0), dxf, x, W(w, "backbone.norm_f.weight", 0), rsf, R, D);
        for (int l = (int)c->L - 1; l >= 0; l--)
            layer_bwd(c, w, gr, MAIN, l, c->kinds[l], &ly[l], dx);
        double *dE = W(gr, "backbone.embeddings.weight", 0);
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < D; j++)
                dE[tokens[r] * D + j] += dx[r * D + j];
        free(dxf), free(dx), free(dhid);
    }
    for (int d = 0; d < c->mtp; d++)
        depth_free(c, &dp[d]);
    free(dp);
    for (int l = 0; l < c->L; l++) {
        layer_free(&ly[l], c->kinds[l]);
        free(ly[l].x);
    }
    free(x), free(ly), free(xf), free(rsf), free(logits), free(dlogits);
    loss += mtp_loss; /* the objective the program minimises and prints */
    return c->objective ? loss + reg : loss;
}
