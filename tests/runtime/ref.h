/* ref.h: naive double-precision reference kernels (the definitions the
 * fp32 kernels of libptdrt are checked against), and gradient checking by
 * central differences over them. */
#ifndef PTDRT_TEST_REF_H
#define PTDRT_TEST_REF_H

#include <stdbool.h>
#include <stdint.h>

/* Deterministic test data: a fixed xorshift stream, uniform in [lo, hi). */
void ref_seed(uint64_t s);
double ref_uniform(double lo, double hi);
void ref_fill(float *f, double *d, int64_t n, double lo, double hi); /* same values in both */
void ref_to_double(double *d, const float *f, int64_t n);

void ref_matmul(double *c, const double *a, const double *b, int64_t M, int64_t N, int64_t K,
                bool ta, bool tb);
void ref_embedding(double *out, const int32_t *ids, const double *table, int64_t n, int64_t dim);
void ref_rmsnorm(double *y, const double *x, const double *w, int64_t rows, int64_t cols,
                 double eps);
void ref_layernorm(double *y, const double *x, const double *w, const double *b, int64_t rows,
                   int64_t cols, double eps);
void ref_rope(double *y, const double *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
              int64_t pos_offset, double theta);
/* Explicit softmax(Q K^T / sqrt(D) + mask) V with the full S x S matrix; the
 * mask hides key j from query i when causal and j > i, or when window > 0
 * and i - j >= window. */
void ref_attention(double *o, double *lse, const double *q, const double *k, const double *v,
                   int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                   int64_t window);
/* Its gradients written out from the definition (P = softmax row by row):
 * dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dP P)), dQ = dS K / sqrt(D),
 * dK = dS^T Q / sqrt(D), with dK and dV summed over each kv head's group.
 * Checked against central differences of ref_attention where both are
 * affordable, then used at sizes where differences are not. */
void ref_attention_bwd(double *dq, double *dk, double *dv, const double *q, const double *k,
                       const double *v, const double *dout, int64_t B, int64_t S, int64_t H,
                       int64_t KVH, int64_t D, bool causal, int64_t window);
void ref_silu(double *y, const double *x, int64_t n);
void ref_gelu(double *y, const double *x, int64_t n);
void ref_softmax(double *y, const double *x, int64_t rows, int64_t cols);
/* Returns sum_i loss_i / total_rows; lse[rows] when non-NULL. */
double ref_cross_entropy(double *lse, const double *logits, const int32_t *targets, int64_t rows,
                         int64_t vocab, int64_t total_rows);

/* Central differences: grad[i] = (L(x + h e_i) - L(x - h e_i)) / 2h, with x
 * perturbed in place and restored. */
void ref_fd_grad(double (*loss)(void *ctx), void *ctx, double *x, int64_t n, double h,
                 double *grad);

/* Scale-relative comparison: max_i |got_i - want_i| / max(max_i |want_i|,
 * floor) <= tol. Prints the error; returns true when within. */
bool ref_close(const char *what, const float *got, const double *want, int64_t n, double tol,
               double floor);
/* A gradient check that can fail: `got` must be within tol of `want`, and a
 * copy of `got` with one element moved by 10 tol (scale-relative) must not
 * be: this proves tol is tight enough to see a single wrong element. Counts
 * failures through CHECK. */
void ref_check_grad(const char *what, const float *got, const double *want, int64_t n, double tol);

/* Run fn(arg) in a forked child with stderr captured: it must exit with
 * status 1 (rt_fatal without MPI) after printing a message containing
 * `expect`. Counts failures through CHECK. */
void ref_expect_fatal(const char *what, void (*fn)(void *), void *arg, const char *expect);

/* rm -r path (a test's scratch directory); missing paths are fine. */
void ref_rm_rf(const char *path);

#endif
