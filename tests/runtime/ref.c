/* ref.c: double-precision reference kernels, written the obvious way from
 * their definitions (HF LlamaRMSNorm, torch LayerNorm, HF rotate-half RoPE,
 * GPT-2 gelu_new, explicit softmax attention), and the gradient-check
 * helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ref.h"

int check_failures;

static uint64_t state = 0x9E3779B97F4A7C15ull;

void ref_seed(uint64_t s)
{
    state = s ? s : 1;
}

double ref_uniform(double lo, double hi)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return lo + (hi - lo) * (double)(state >> 11) * (1.0 / 9007199254740992.0);
}

void ref_fill(float *f, double *d, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) {
        float v = (float)ref_uniform(lo, hi);
        if (f)
            f[i] = v;
        if (d)
            d[i] = v;
    }
}

void ref_to_double(double *d, const float *f, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = f[i];
}

void ref_matmul(double *c, const double *a, const double *b, int64_t M, int64_t N, int64_t K,
                bool ta, bool tb)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++)
                s += (ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
            c[i * N + j] = s;
        }
}

void ref_embedding(double *out, const int32_t *ids, const double *table, int64_t n, int64_t dim)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < dim; j++)
            out[i * dim + j] = table[ids[i] * dim + j];
}

void ref_rmsnorm(double *y, const double *x, const double *w, int64_t rows, int64_t cols,
                 double eps)
{
    for (int64_t r = 0; r < rows; r++) {
        double ms = 0.0;
        for (int64_t j = 0; j < cols; j++)
            ms += x[r * cols + j] * x[r * cols + j];
        ms /= (double)cols;
        for (int64_t j = 0; j < cols; j++)
            y[r * cols + j] = w[j] * x[r * cols + j] / sqrt(ms + eps);
    }
}

void ref_layernorm(double *y, const double *x, const double *w, const double *b, int64_t rows,
                   int64_t cols, double eps)
{
    for (int64_t r = 0; r < rows; r++) {
        double mu = 0.0, var = 0.0;
        for (int64_t j = 0; j < cols; j++)
            mu += x[r * cols + j];
        mu /= (double)cols;
        for (int64_t j = 0; j < cols; j++)
            var += (x[r * cols + j] - mu) * (x[r * cols + j] - mu);
        var /= (double)cols;
        for (int64_t j = 0; j < cols; j++)
            y[r * cols + j] = (x[r * cols + j] - mu) / sqrt(var + eps) * w[j] + b[j];
    }
}

/* HF: inv_freq_j = theta^(-2j/dim); emb = cat(freqs, freqs);
 * y = x cos(emb) + rotate_half(x) sin(emb), rotate_half(x) = cat(-x2, x1). */
void ref_rope(double *y, const double *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
              int64_t pos_offset, double theta)
{
    int64_t half = dim / 2;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t s = 0; s < seq; s++)
            for (int64_t i = 0; i < inner; i++) {
                const double *xr = x + ((o * seq + s) * inner + i) * dim;
                double *yr = y + ((o * seq + s) * inner + i) * dim;
                for (int64_t j = 0; j < dim; j++) {
                    int64_t jj = j % half;
                    double a = (double)(pos_offset + s) * pow(theta, -2.0 * (double)jj / (double)dim);
                    double rot = j < half ? -xr[j + half] : xr[j - half];
                    yr[j] = xr[j] * cos(a) + rot * sin(a);
                }
            }
}

static bool masked(int64_t i, int64_t j, bool causal, int64_t window)
{
    return (causal && j > i) || (window > 0 && i - j >= window);
}

/* P [S][S] of (b, h): the softmax of the masked scaled scores, row by row. */
static void ref_probs(double *P, double *lse_row, const double *q, const double *k, int64_t b,
                      int64_t h, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                      int64_t window)
{
    double scale = 1.0 / sqrt((double)D);
    int64_t kh = h / (H / KVH);
    for (int64_t i = 0; i < S; i++)
        for (int64_t j = 0; j < S; j++) {
            double s = 0.0;
            for (int64_t d = 0; d < D; d++)
                s += q[((b * S + i) * H + h) * D + d] * k[((b * S + j) * KVH + kh) * D + d];
            P[i * S + j] = masked(i, j, causal, window) ? -INFINITY : s * scale;
        }
    for (int64_t i = 0; i < S; i++) {
        double m = -INFINITY, z = 0.0;
        for (int64_t j = 0; j < S; j++)
            m = fmax(m, P[i * S + j]);
        for (int64_t j = 0; j < S; j++)
            z += exp(P[i * S + j] - m);
        if (lse_row)
            lse_row[i] = m + log(z);
        for (int64_t j = 0; j < S; j++)
            P[i * S + j] = exp(P[i * S + j] - m) / z;
    }
}

void ref_attention(double *o, double *lse, const double *q, const double *k, const double *v,
                   int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                   int64_t window)
{
    double *P = malloc((size_t)(S * S) * sizeof *P), *l = malloc((size_t)S * sizeof *l);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / (H / KVH);
            ref_probs(P, l, q, k, b, h, S, H, KVH, D, causal, window);
            for (int64_t i = 0; i < S; i++) {
                if (lse)
                    lse[(b * S + i) * H + h] = l[i];
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < S; j++)
                        acc += P[i * S + j] * v[((b * S + j) * KVH + kh) * D + d];
                    o[((b * S + i) * H + h) * D + d] = acc;
                }
            }
        }
    free(P);
    free(l);
}

void ref_attention_bwd(double *dq, double *dk, double *dv, const double *q, const double *k,
                       const double *v, const double *dout, int64_t B, int64_t S, int64_t H,
                       int64_t KVH, int64_t D, bool causal, int64_t window)
{
    double *P = malloc((size_t)(S * S) * sizeof *P), *dP = malloc((size_t)(S * S) * sizeof *dP);
    double scale = 1.0 / sqrt((double)D);
    for (int64_t n = 0; n < B * S * KVH * D; n++)
        dk[n] = dv[n] = 0.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / (H / KVH);
#define Q(i, d) q[((b * S + (i)) * H + h) * D + (d)]
#define G(i, d) dout[((b * S + (i)) * H + h) * D + (d)]
#define KV(x, j, d) x[((b * S + (j)) * KVH + kh) * D + (d)]
            ref_probs(P, NULL, q, k, b, h, S, H, KVH, D, causal, window);
            for (int64_t i = 0; i < S; i++) {
                double rs = 0.0;
                for (int64_t j = 0; j < S; j++) {
                    double s = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        s += G(i, d) * KV(v, j, d);
                    dP[i * S + j] = s;
                    rs += s * P[i * S + j];
                }
                for (int64_t j = 0; j < S; j++)
                    dP[i * S + j] = P[i * S + j] * (dP[i * S + j] - rs); /* dS */
            }
            for (int64_t i = 0; i < S; i++)
                for (int64_t d = 0; d < D; d++) {
                    double s = 0.0;
                    for (int64_t j = 0; j < S; j++)
                        s += dP[i * S + j] * KV(k, j, d);
                    dq[((b * S + i) * H + h) * D + d] = s * scale;
                }
            for (int64_t j = 0; j < S; j++)
                for (int64_t d = 0; d < D; d++) {
                    double sk = 0.0, sv = 0.0;
                    for (int64_t i = 0; i < S; i++) {
                        sk += dP[i * S + j] * Q(i, d);
                        sv += P[i * S + j] * G(i, d);
                    }
                    KV(dk, j, d) += sk * scale;
                    KV(dv, j, d) += sv;
                }
#undef Q
#undef G
#undef KV
        }
    free(P);
    free(dP);
}

void ref_silu(double *y, const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] / (1.0 + exp(-x[i]));
}

void ref_gelu(double *y, const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = 0.5 * x[i] * (1.0 + tanh(sqrt(2.0 / acos(-1.0)) * (x[i] + 0.044715 * pow(x[i], 3.0))));
}

void ref_softmax(double *y, const double *x, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        double m = -INFINITY, z = 0.0;
        for (int64_t j = 0; j < cols; j++)
            m = fmax(m, x[r * cols + j]);
        for (int64_t j = 0; j < cols; j++)
            z += exp(x[r * cols + j] - m);
        for (int64_t j = 0; j < cols; j++)
            y[r * cols + j] = exp(x[r * cols + j] - m) / z;
    }
}

double ref_cross_entropy(double *lse, const double *logits, const int32_t *targets, int64_t rows,
                         int64_t vocab, int64_t total_rows)
{
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double m = -INFINITY, z = 0.0;
        for (int64_t j = 0; j < vocab; j++)
            m = fmax(m, logits[r * vocab + j]);
        for (int64_t j = 0; j < vocab; j++)
            z += exp(logits[r * vocab + j] - m);
        double l = m + log(z);
        if (lse)
            lse[r] = l;
        total += l - logits[r * vocab + targets[r]];
    }
    return total / (double)total_rows;
}

void ref_fd_grad(double (*loss)(void *ctx), void *ctx, double *x, int64_t n, double h,
                 double *grad)
{
    for (int64_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double up = loss(ctx);
        x[i] = keep - h;
        double down = loss(ctx);
        x[i] = keep;
        grad[i] = (up - down) / (2.0 * h);
    }
}

static double rel_err(const float *got, const double *want, int64_t n, double floor,
                      double *scale_out)
{
    double scale = floor, err = 0.0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= err)) /* NaN counts as an error */
            err = isnan(e) ? INFINITY : e;
    }
    if (scale_out)
        *scale_out = scale;
    return err / scale;
}

bool ref_close(const char *what, const float *got, const double *want, int64_t n, double tol,
               double floor)
{
    double e = rel_err(got, want, n, floor, NULL);
    bool ok = e <= tol;
    printf("  %-44s max err %.2e (tol %.0e) %s\n", what, e, tol, ok ? "ok" : "FAIL");
    return ok;
}

void ref_check_grad(const char *what, const float *got, const double *want, int64_t n, double tol)
{
    CHECK(ref_close(what, got, want, n, tol, 1e-30), "%s: gradient differs from central "
                                                     "differences", what);
    double scale;
    rel_err(got, want, n, 1e-30, &scale);
    float *bad = malloc((size_t)n * sizeof *bad);
    memcpy(bad, got, (size_t)n * sizeof *bad);
    int64_t k = n / 2;
    bad[k] = (float)(bad[k] + 10.0 * tol * scale);
    double e = rel_err(bad, want, n, 1e-30, NULL);
    CHECK(e > tol, "%s: a gradient with element %lld moved by 10 tol passes the check (err %.2e)",
          what, (long long)k, e);
    free(bad);
}

void ref_expect_fatal(const char *what, void (*fn)(void *), void *arg, const char *expect)
{
    int fds[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds) != 0) {
        CHECK(0, "%s: pipe failed", what);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn(arg);
        _exit(0); /* returned: not fatal */
    }
    close(fds[1]);
    char msg[4096];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof msg - 1 && (r = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0)
        len += (size_t)r;
    msg[len] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool exited1 = WIFEXITED(status) && WEXITSTATUS(status) == 1;
    printf("  %-44s -> %s", what, len ? msg : "(no message)\n");
    CHECK(exited1, "%s: expected exit status 1 (status %d)", what, status);
    CHECK(strstr(msg, expect) != NULL, "%s: message lacks '%s'", what, expect);
}

void ref_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            ref_rm_rf(sub);
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}
