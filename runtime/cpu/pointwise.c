/* pointwise.c: activations, broadcast add/mul, row reduction, softmax.
 *
 * Element-wise kernels run blocks of RTCPU_BLOCK elements on the rank's
 * threads, each block a vectorised loop (simd.h); the exponentials are
 * rtcpu_expf, not libm's (which does not vectorise). GELU's tanh is written
 * through the identity 0.5 (1 + tanh(u)) = sigmoid(2u), which needs one
 * exponential and no cancellation. */
#include <math.h>

#include "cpu.h"
#include "simd.h"

#define RTCPU_BLOCK 8192

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

RTCPU_CLONES static void silu_fwd_blk(rt_act *y, const rt_act *x, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] / (1.0f + rtcpu_expf(-x[i]));
}

/* sigmoid; backward from the output: dx = dy y (1 - y) */
RTCPU_CLONES static void sigmoid_fwd_blk(rt_act *y, const rt_act *x, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++)
        y[i] = rtcpu_sigmoidf(x[i]);
}

RTCPU_CLONES static void sigmoid_bwd_blk(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

/* d/dx x s(x) = s (1 + x (1 - s)) */
RTCPU_CLONES static void silu_bwd_blk(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++) {
        float s = rtcpu_sigmoidf(x[i]);
        dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
    }
}

/* silu(a) b; its backward: da = dy b s (1 + a (1 - s)), db = dy a s, with
 * s = sigmoid(a). */
RTCPU_CLONES static void swiglu_fwd_blk(rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] / (1.0f + rtcpu_expf(-a[i])) * b[i];
}

RTCPU_CLONES static void swiglu_bwd_blk(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b,
                                        const rt_act *dy, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++) {
        float x = a[i], s = rtcpu_sigmoidf(x), g = dy[i];
        float dbi = g * x * s;
        da[i] = g * b[i] * s * (1.0f + x * (1.0f - s));
        db[i] = dbi;
    }
}

/* relu(x)^2; its backward dx = dy 2 relu(x) */
RTCPU_CLONES static void relu2_fwd_blk(rt_act *y, const rt_act *x, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++) {
        float r = x[i] > 0.0f ? x[i] : 0.0f;
        y[i] = r * r;
    }
}

RTCPU_CLONES static void relu2_bwd_blk(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++)
        dx[i] = x[i] > 0.0f ? 2.0f * x[i] * dy[i] : 0.0f;
}

/* GPT-OSS: y = g s(alpha g) (c + 1), g = min(a, L), c = clamp(b, -L, L);
 * dg = s (1 + alpha g (1 - s)) */
RTCPU_CLONES static void swiglu_oai_fwd_blk(rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++) {
        float g = a[i] < RT_OAI_LIMIT ? a[i] : RT_OAI_LIMIT;
        float c = b[i] < -RT_OAI_LIMIT ? -RT_OAI_LIMIT : b[i] > RT_OAI_LIMIT ? RT_OAI_LIMIT : b[i];
        y[i] = g * rtcpu_sigmoidf(RT_OAI_ALPHA * g) * (c + 1.0f);
    }
}

RTCPU_CLONES static void swiglu_oai_bwd_blk(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b,
                                            const rt_act *dy, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++) {
        float x = a[i], v = b[i], d = dy[i];
        float g = x < RT_OAI_LIMIT ? x : RT_OAI_LIMIT;
        float c = v < -RT_OAI_LIMIT ? -RT_OAI_LIMIT : v > RT_OAI_LIMIT ? RT_OAI_LIMIT : v;
        float s = rtcpu_sigmoidf(RT_OAI_ALPHA * g), glu = g * s;
        float dai = x <= RT_OAI_LIMIT ? d * (c + 1.0f) * s * (1.0f + RT_OAI_ALPHA * g * (1.0f - s)) : 0.0f;
        db[i] = v >= -RT_OAI_LIMIT && v <= RT_OAI_LIMIT ? d * glu : 0.0f;
        da[i] = dai;
    }
}

/* GPT-2 gelu_new: 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = k (x + c x^3) */
RTCPU_CLONES static void gelu_fwd_blk(rt_act *y, const rt_act *x, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float u = GELU_K * (v + GELU_C * v * v * v);
        y[i] = v * rtcpu_sigmoidf(2.0f * u);
    }
}

/* With s = sigmoid(2u) = 0.5 (1 + tanh u): 1 - tanh^2 u = 4 s (1 - s), so
 * d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) u' = s + 2 x s (1 - s) u'. */
RTCPU_CLONES static void gelu_bwd_blk(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float s = rtcpu_sigmoidf(2.0f * GELU_K * (v + GELU_C * v * v * v));
        float du = GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
    }
}

/* Blocks of an element-wise kernel over the rank's threads. */
#define ELEMENTWISE(n, call)                                                                       \
    do {                                                                                           \
        int64_t nblk_ = ((n) + RTCPU_BLOCK - 1) / RTCPU_BLOCK;                                     \
        RTCPU_PAR_FOR(n)                                                                           \
        for (int64_t b_ = 0; b_ < nblk_; b_++) {                                                   \
            int64_t lo = b_ * RTCPU_BLOCK, len = (n) - lo < RTCPU_BLOCK ? (n) - lo : RTCPU_BLOCK;  \
            call;                                                                                  \
        }                                                                                          \
    } while (0)

void rt_sigmoid_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    ELEMENTWISE(n, sigmoid_fwd_blk(y + lo, x + lo, len));
}

void rt_sigmoid_bwd(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t n)
{
    ELEMENTWISE(n, sigmoid_bwd_blk(dx + lo, y + lo, dy + lo, len));
}

void rt_silu_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    ELEMENTWISE(n, silu_fwd_blk(y + lo, x + lo, len));
}

void rt_silu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    ELEMENTWISE(n, silu_bwd_blk(dx + lo, x + lo, dy + lo, len));
}

void rt_swiglu_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    ELEMENTWISE(n, swiglu_fwd_blk(y + lo, a + lo, b + lo, len));
}

void rt_swiglu_bwd(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b, const rt_act *dy, int64_t n)
{
    ELEMENTWISE(n, swiglu_bwd_blk(da + lo, db + lo, a + lo, b + lo, dy + lo, len));
}

void rt_relu2_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    ELEMENTWISE(n, relu2_fwd_blk(y + lo, x + lo, len));
}

void rt_relu2_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    ELEMENTWISE(n, relu2_bwd_blk(dx + lo, x + lo, dy + lo, len));
}

void rt_swiglu_oai_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    ELEMENTWISE(n, swiglu_oai_fwd_blk(y + lo, a + lo, b + lo, len));
}

void rt_swiglu_oai_bwd(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b, const rt_act *dy,
                       int64_t n)
{
    ELEMENTWISE(n, swiglu_oai_bwd_blk(da + lo, db + lo, a + lo, b + lo, dy + lo, len));
}

void rt_gelu_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    ELEMENTWISE(n, gelu_fwd_blk(y + lo, x + lo, len));
}

void rt_gelu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    ELEMENTWISE(n, gelu_bwd_blk(dx + lo, x + lo, dy + lo, len));
}

static void check_bcast(int64_t n, int64_t nb, const char *what)
{
    if (nb < 1 || n % nb)
        rt_fatal("%s: %lld elements do not repeat a broadcast operand of %lld", what,
                 (long long)n, (long long)nb);
}

/* out[i] = a[i] op b[i - lo + off] for i in [lo, lo + len), b repeating every nb. */
RTCPU_CLONES static void binary_blk(rt_act *out, const rt_act *a, const rt_act *b, int64_t len,
                                    int64_t nb, int64_t off, bool mul)
{
    for (int64_t i = 0; i < len;) {
        int64_t run = nb - off < len - i ? nb - off : len - i;
        const rt_act *bo = b + off;
        if (mul) {
            RTCPU_SIMD
            for (int64_t j = 0; j < run; j++)
                out[i + j] = a[i + j] * bo[j];
        } else {
            RTCPU_SIMD
            for (int64_t j = 0; j < run; j++)
                out[i + j] = a[i + j] + bo[j];
        }
        i += run;
        off = 0;
    }
}

static void binary(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb, bool mul)
{
    if (n == 0)
        return;
    check_bcast(n, nb, mul ? "rt_mul" : "rt_add");
    ELEMENTWISE(n, binary_blk(out + lo, a + lo, b, len, nb, lo % nb, mul));
}

void rt_add(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb)
{
    binary(out, a, b, n, nb, false);
}

void rt_mul(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb)
{
    binary(out, a, b, n, nb, true);
}

/* acc[j] = sum of rows [0, rows) of in, in double, rows in order. */
RTCPU_CLONES static void colsum_blk(double *acc, const rt_act *in, int64_t rows, int64_t cols)
{
    for (int64_t j = 0; j < cols; j++)
        acc[j] = 0.0;
    for (int64_t i = 0; i < rows; i++) {
        const rt_act *r = in + i * cols;
        RTCPU_SIMD
        for (int64_t j = 0; j < cols; j++)
            acc[j] += r[j];
    }
}

/* Column sums in double: each chunk of RTCPU_CHUNK rows sums in row order,
 * chunks combine in order, whatever the thread count. */
void rt_reduce_rows(rt_act *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate)
{
    if (cols <= 0)
        return;
    int64_t nc = (rows + RTCPU_CHUNK - 1) / RTCPU_CHUNK;
    double *part = rtcpu_scratch(1, (size_t)(nc ? nc : 1) * (size_t)cols * sizeof *part);
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t c = 0; c < nc; c++) {
        int64_t r0 = c * RTCPU_CHUNK, nr = rows - r0 < RTCPU_CHUNK ? rows - r0 : RTCPU_CHUNK;
        colsum_blk(part + c * cols, in + r0 * cols, nr, cols);
    }
    for (int64_t j = 0; j < cols; j++) {
        double s = 0.0;
        for (int64_t c = 0; c < nc; c++)
            s += part[c * cols + j];
        out[j] = (float)(accumulate ? s + out[j] : s);
    }
}

RTCPU_CLONES static void softmax_row(rt_act *y, const rt_act *x, int64_t cols)
{
    float m = -INFINITY;
    RTCPU_SIMD_MAX(m)
    for (int64_t j = 0; j < cols; j++)
        m = x[j] > m ? x[j] : m;
    double sum = 0.0;
    RTCPU_SIMD_SUM(sum)
    for (int64_t j = 0; j < cols; j++) {
        float e = rtcpu_expf(x[j] - m);
        y[j] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    RTCPU_SIMD
    for (int64_t j = 0; j < cols; j++)
        y[j] *= inv;
}

/* On CPU gradients and activations are both float. */
void rt_reduce_rows_grad(rt_grad *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate)
{
    rt_reduce_rows(out, in, rows, cols, accumulate);
}

void rt_grad_add(rt_grad *acc, const rt_act *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] += x[i];
}

void rt_grad_sum(rt_grad *acc, const rt_grad *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] += x[i];
}

void rt_softmax_fwd(rt_act *y, const rt_act *x, int64_t rows, int64_t cols)
{
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t r = 0; r < rows; r++)
        softmax_row(y + r * cols, x + r * cols, cols);
}

/* dx = y (dy - sum(dy y)) */
RTCPU_CLONES static void softmax_bwd_row(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t cols)
{
    double s = 0.0;
    RTCPU_SIMD_SUM(s)
    for (int64_t j = 0; j < cols; j++)
        s += (double)dy[j] * y[j];
    float sf = (float)s;
    RTCPU_SIMD
    for (int64_t j = 0; j < cols; j++)
        dx[j] = y[j] * (dy[j] - sf);
}

void rt_softmax_bwd(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t rows, int64_t cols)
{
    RTCPU_PAR_FOR(rows * cols)
    for (int64_t r = 0; r < rows; r++)
        softmax_bwd_row(dx + r * cols, y + r * cols, dy + r * cols, cols);
}

/* softplus (Mamba-2's step size): log(1 + e^x), x itself above 20 as
 * torch's; d/dx = sigmoid(x). */
RTCPU_CLONES static void softplus_fwd_blk(rt_act *y, const rt_act *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] > 20.0f ? x[i] : log1pf(rtcpu_expf(x[i]));
}

RTCPU_CLONES static void softplus_bwd_blk(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    RTCPU_SIMD
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * rtcpu_sigmoidf(x[i]);
}

void rt_softplus_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    ELEMENTWISE(n, softplus_fwd_blk(y + lo, x + lo, len));
}

void rt_softplus_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    ELEMENTWISE(n, softplus_bwd_blk(dx + lo, x + lo, dy + lo, len));
}
