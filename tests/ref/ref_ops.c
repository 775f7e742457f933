/* ref_ops.c: the reference's operators in double precision, forward and
 * hand-derived backward, written from the definitions (Hugging Face's
 * LlamaRMSNorm, torch.nn.LayerNorm, rotate_half rotary embeddings, causal
 * scaled dot-product attention, SiLU, gelu_new, mean cross-entropy), in the
 * plainest loops: speed does not matter at the sizes tests use. */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double *ref_zeros(int64_t n)
{
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!p) {
        fprintf(stderr, "ref: out of memory\n");
        exit(1);
    }
    return p;
}

void ref_mm(double *c, const double *a, const double *b, int64_t M, int64_t N, int64_t K, bool ta,
            bool tb, bool acc)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
            c[i * N + j] = acc ? c[i * N + j] + s : s;
        }
}

/* y = x / sqrt(mean(x^2) + eps) * w */
void ref_rmsnorm_fwd(double *y, double *rstd, const double *x, const double *w, int64_t rows,
                     int64_t cols, double eps)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * cols;
        double ss = 0;
        for (int64_t j = 0; j < cols; j++)
            ss += xr[j] * xr[j];
        rstd[r] = 1 / sqrt(ss / (double)cols + eps);
        for (int64_t j = 0; j < cols; j++)
            y[r * cols + j] = xr[j] * rstd[r] * w[j];
    }
}

/* With g = dy * w: dx = rstd g - x rstd^3 (g . x) / cols. */
void ref_rmsnorm_bwd(double *dx, double *dw, const double *dy, const double *x, const double *w,
                     const double *rstd, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * cols, *dyr = dy + r * cols;
        double rs = rstd[r], gx = 0;
        for (int64_t j = 0; j < cols; j++) {
            dw[j] += dyr[j] * xr[j] * rs;
            gx += dyr[j] * w[j] * xr[j];
        }
        for (int64_t j = 0; j < cols; j++)
            dx[r * cols + j] = rs * dyr[j] * w[j] - xr[j] * rs * rs * rs * gx / (double)cols;
    }
}

/* xhat = (x - mean) / sqrt(var + eps) (biased variance); y = xhat w + b */
void ref_layernorm_fwd(double *y, double *xhat, double *rstd, const double *x, const double *w,
                       const double *b, int64_t rows, int64_t cols, double eps)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * cols;
        double mu = 0, var = 0;
        for (int64_t j = 0; j < cols; j++)
            mu += xr[j];
        mu /= (double)cols;
        for (int64_t j = 0; j < cols; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        var /= (double)cols;
        rstd[r] = 1 / sqrt(var + eps);
        for (int64_t j = 0; j < cols; j++) {
            xhat[r * cols + j] = (xr[j] - mu) * rstd[r];
            y[r * cols + j] = xhat[r * cols + j] * w[j] + b[j];
        }
    }
}

/* With g = dy * w: dx = rstd (g - mean(g) - xhat mean(g xhat)). */
void ref_layernorm_bwd(double *dx, double *dw, double *db, const double *dy, const double *xhat,
                       const double *w, const double *rstd, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xh = xhat + r * cols, *dyr = dy + r * cols;
        double mg = 0, mgx = 0;
        for (int64_t j = 0; j < cols; j++) {
            dw[j] += dyr[j] * xh[j];
            db[j] += dyr[j];
            mg += dyr[j] * w[j];
            mgx += dyr[j] * w[j] * xh[j];
        }
        mg /= (double)cols;
        mgx /= (double)cols;
        for (int64_t j = 0; j < cols; j++)
            dx[r * cols + j] = rstd[r] * (dyr[j] * w[j] - mg - xh[j] * mgx);
    }
}

/* HF: q * cos + rotate_half(q) * sin, rotate_half(x) = [-x2, x1], with
 * angle pos * theta^(-2i/dim) on both halves' element i. */
void ref_rope(double *x, int64_t rows, int64_t S, int64_t heads, int64_t dim, double theta,
              bool inverse)
{
    int64_t half = dim / 2;
    for (int64_t r = 0; r < rows; r++) {
        double pos = (double)(r % S);
        for (int64_t h = 0; h < heads; h++) {
            double *v = x + (r * heads + h) * dim;
            for (int64_t i = 0; i < half; i++) {
                double a = pos * pow(theta, -2.0 * (double)i / (double)dim);
                double c = cos(a), s = inverse ? -sin(a) : sin(a);
                double x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c - x2 * s;
                v[i + half] = x2 * c + x1 * s;
            }
        }
    }
}

/* Query head h reads key/value head h / (H / KVH) (HF repeat_kv). */
void ref_attention_fwd(double *o, double *p, const double *q, const double *k, const double *v,
                       int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D)
{
    ref_attention_sw_fwd(o, p, q, k, v, NULL, 0, B, S, H, KVH, D);
}

/* The same with a sliding window (key j visible to query i when j <= i and
 * i - j < window; 0: none) and sinks (GPT-OSS): sinks[h] one more logit in
 * every row's softmax, whose probability weighs no value (p keeps the keys'
 * probabilities only, which then sum to less than 1). */
void ref_attention_sw_fwd(double *o, double *p, const double *q, const double *k, const double *v,
                          const double *sinks, int64_t window, int64_t B, int64_t S, int64_t H, int64_t KVH,
                          int64_t D)
{
    double scale = 1 / sqrt((double)D);
    int64_t group = H / KVH;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / group;
            for (int64_t i = 0; i < S; i++) {
                const double *qi = q + ((b * S + i) * H + h) * D;
                double *pi = p + ((b * H + h) * S + i) * S, mx = -INFINITY, z = 0;
                bool *seen = calloc((size_t)S, sizeof *seen);
                for (int64_t j = 0; j < S; j++) {
                    if (j > i || (window > 0 && i - j >= window)) { /* causal; the window */
                        pi[j] = 0;
                        continue;
                    }
                    seen[j] = true;
                    const double *kj = k + ((b * S + j) * KVH + kh) * D;
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += qi[d] * kj[d];
                    pi[j] = s * scale;
                    mx = fmax(mx, pi[j]);
                }
                if (sinks)
                    mx = fmax(mx, sinks[h]);
                for (int64_t j = 0; j <= i; j++)
                    if (seen[j])
                        z += pi[j] = exp(pi[j] - mx);
                if (sinks)
                    z += exp(sinks[h] - mx); /* the sink's share of the denominator */
                free(seen);
                double *oi = o + ((b * S + i) * H + h) * D;
                memset(oi, 0, sizeof(double) * (size_t)D);
                for (int64_t j = 0; j <= i; j++) {
                    pi[j] /= z;
                    const double *vj = v + ((b * S + j) * KVH + kh) * D;
                    for (int64_t d = 0; d < D; d++)
                        oi[d] += pi[j] * vj[d];
                }
            }
        }
}

/* dP_ij = dO_i . V_j; dV_j += P_ij dO_i; dS_ij = P_ij (dP_ij - sum_l P_il dP_il);
 * dQ_i += scale dS_ij K_j; dK_j += scale dS_ij Q_i. */
void ref_attention_bwd(double *dq, double *dk, double *dv, const double *dout, const double *p,
                       const double *q, const double *k, const double *v, int64_t B, int64_t S,
                       int64_t H, int64_t KVH, int64_t D)
{
    double scale = 1 / sqrt((double)D);
    int64_t group = H / KVH;
    memset(dq, 0, sizeof(double) * (size_t)(B * S * H * D));
    memset(dk, 0, sizeof(double) * (size_t)(B * S * KVH * D));
    memset(dv, 0, sizeof(double) * (size_t)(B * S * KVH * D));
    double *dp = malloc(sizeof(double) * (size_t)S);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / group;
            for (int64_t i = 0; i < S; i++) {
                const double *pi = p + ((b * H + h) * S + i) * S;
                const double *doi = dout + ((b * S + i) * H + h) * D;
                double dot = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const double *vj = v + ((b * S + j) * KVH + kh) * D;
                    double *dvj = dv + ((b * S + j) * KVH + kh) * D;
                    dp[j] = 0;
                    for (int64_t d = 0; d < D; d++) {
                        dp[j] += doi[d] * vj[d];
                        dvj[d] += pi[j] * doi[d];
                    }
                    dot += pi[j] * dp[j];
                }
                const double *qi = q + ((b * S + i) * H + h) * D;
                double *dqi = dq + ((b * S + i) * H + h) * D;
                for (int64_t j = 0; j <= i; j++) {
                    double ds = pi[j] * (dp[j] - dot) * scale;
                    const double *kj = k + ((b * S + j) * KVH + kh) * D;
                    double *dkj = dk + ((b * S + j) * KVH + kh) * D;
                    for (int64_t d = 0; d < D; d++) {
                        dqi[d] += ds * kj[d];
                        dkj[d] += ds * qi[d];
                    }
                }
            }
        }
    free(dp);
}

static double sigmoid(double x) { return 1 / (1 + exp(-x)); }
double ref_silu(double x) { return x * sigmoid(x); }
double ref_silu_grad(double x)
{
    double s = sigmoid(x);
    return s * (1 + x * (1 - s));
}

/* gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static const double GELU_C = 0.7978845608028654; /* sqrt(2 / pi) */
double ref_gelu(double x) { return 0.5 * x * (1 + tanh(GELU_C * (x + 0.044715 * x * x * x))); }
double ref_gelu_grad(double x)
{
    double t = tanh(GELU_C * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x);
}

/* loss = mean over rows of log(sum exp z) - z[target]; dz = (softmax - onehot) / rows */
double ref_cross_entropy(const double *logits, const int32_t *targets, int64_t rows, int64_t V,
                         double *dlogits)
{
    double total = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *z = logits + r * V;
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < V; j++)
            mx = fmax(mx, z[j]);
        for (int64_t j = 0; j < V; j++)
            s += exp(z[j] - mx);
        double lse = mx + log(s);
        total += lse - z[targets[r]];
        if (dlogits)
            for (int64_t j = 0; j < V; j++)
                dlogits[r * V + j] = (exp(z[j] - lse) - (j == targets[r])) / (double)rows;
    }
    return total / (double)rows;
}

double ref_masked_cross_entropy(const double *logits, const int32_t *targets, int64_t rows, int64_t V,
                                double weight, double **dlogits)
{
    int64_t n = 0;
    double *lg = ref_zeros(rows * V), *dl = ref_zeros(rows * V);
    int32_t *tg = calloc((size_t)rows, sizeof(int32_t));
    for (int64_t r = 0; r < rows; r++)
        if (targets[r] >= 0) {
            memcpy(lg + n * V, logits + r * V, sizeof(double) * (size_t)V);
            tg[n++] = targets[r];
        }
    double loss = weight * ref_cross_entropy(lg, tg, n, V, dl);
    if (dlogits) {
        *dlogits = ref_zeros(rows * V);
        for (int64_t r = 0, k = 0; r < rows; r++)
            if (targets[r] >= 0) {
                for (int64_t j = 0; j < V; j++)
                    (*dlogits)[r * V + j] = weight * dl[k * V + j];
                k++;
            }
    }
    free(lg), free(dl), free(tg);
    return loss;
}
