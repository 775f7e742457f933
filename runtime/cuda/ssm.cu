/* ssm.cu: Mamba-2's operators on the CUDA backend (rt_softplus_*,
 * rt_conv1d_*, rt_ssd_*; runtime/rt.h), the CPU backend's semantics
 * (runtime/cpu/ssm.c, conv1d.c): bf16 in and out, fp32 arithmetic, fp32
 * parameter gradients added in a fixed order (deterministic).
 *
 * Plain kernels, the recurrence as written (docs/hybrid.md): the scan's
 * forward is one block per (sequence, head), a thread per column p of the
 * state holding its n entries; the backward is one block per (sequence,
 * head) too, the state recomputed from checkpoints every Q = ceil(sqrt(seq))
 * steps into a chunk of states in global scratch and walked backward with
 * the state's gradient G [n, p] in shared memory. A head's dB, dC rows and
 * its dA_log, dD partials go to scratch, summed over a group's heads and
 * over the sequences in order by a second kernel. Not mamba_ssm's chunked
 * tensor-core algorithm: correct and slow (the cost model prices the GPU
 * frameworks' kernel, passes/cost/cost_ops.c). */
#include "cu_dev.cuh"

namespace {

constexpr int MAXN = 256; /* the state a forward thread holds in registers */

__global__ void k_softplus_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = ld(x + i);
        y[i] = bf(v > 20.0f ? v : log1pf(expf(v)));
    }
}

__global__ void k_softplus_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dx[i] = bf(ld(dy + i) / (1.0f + expf(-ld(x + i))));
}

__global__ void k_conv_fwd(rt_act *y, const rt_act *x, const rt_act *w, const rt_act *b, int64_t batch, int64_t seq,
                           int64_t ch, int64_t k)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x, total = batch * seq * ch;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        int64_t c = e % ch, t = (e / ch) % seq, s = e / (ch * seq);
        float acc = ld(b + c);
        for (int64_t j = 0; j < k; j++) {
            int64_t u = t - k + 1 + j;
            if (u >= 0)
                acc += ld(w + c * k + j) * ld(x + (s * seq + u) * ch + c);
        }
        y[e] = bf(acc);
    }
}

__global__ void k_conv_bwd_dx(rt_act *dx, const rt_act *w, const rt_act *dy, int64_t batch, int64_t seq, int64_t ch,
                              int64_t k)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x, total = batch * seq * ch;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        int64_t c = e % ch, t = (e / ch) % seq, s = e / (ch * seq);
        float acc = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t u = t + k - 1 - j;
            if (u < seq)
                acc += ld(w + c * k + j) * ld(dy + (s * seq + u) * ch + c);
        }
        dx[e] = bf(acc);
    }
}

/* One thread per channel: its k + 1 sums over (sequence, position) in order. */
__global__ void k_conv_bwd_dw(rt_grad *dw, rt_grad *db, const rt_act *x, const rt_act *dy, int64_t batch,
                              int64_t seq, int64_t ch, int64_t k)
{
    int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ch)
        return;
    float gb = 0;
    for (int64_t s = 0; s < batch; s++)
        for (int64_t t = 0; t < seq; t++)
            gb += ld(dy + (s * seq + t) * ch + c);
    db[c] += gb;
    for (int64_t j = 0; j < k; j++) {
        float g = 0;
        for (int64_t s = 0; s < batch; s++)
            for (int64_t t = 0; t < seq; t++) {
                int64_t u = t - k + 1 + j;
                if (u >= 0)
                    g += ld(dy + (s * seq + t) * ch + c) * ld(x + (s * seq + u) * ch + c);
            }
        dw[c * k + j] += g;
    }
}

/* Block (b, h), thread p: the state's column p in registers. */
__global__ void k_ssd_fwd(rt_act *y, const rt_act *x, const rt_act *dt, const rt_act *A_log, const rt_act *B,
                          const rt_act *C, const rt_act *D, int64_t seq, int64_t heads, int64_t groups, int64_t p,
                          int64_t n)
{
    RTCU_DYN_SMEM(float, sh); /* B_t, C_t */
    int64_t b = blockIdx.x / heads, h = blockIdx.x % heads, g = h / (heads / groups);
    int j = threadIdx.x;
    float S[MAXN];
    for (int i = 0; i < n; i++)
        S[i] = 0;
    const float A = -expf(ld(A_log + h)), Dh = ld(D + h);
    for (int64_t t = 0; t < seq; t++) {
        int64_t row = b * seq + t;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            sh[i] = ld(B + (row * groups + g) * n + i);
            sh[n + i] = ld(C + (row * groups + g) * n + i);
        }
        __syncthreads();
        float d = ld(dt + row * heads + h), a = expf(d * A);
        if (j < p) {
            float xv = ld(x + (row * heads + h) * p + j), acc = Dh * xv;
            for (int i = 0; i < n; i++) {
                S[i] = a * S[i] + d * sh[i] * xv;
                acc += sh[n + i] * S[i];
            }
            y[(row * heads + h) * p + j] = bf(acc);
        }
        __syncthreads();
    }
}

/* State after step t from the one before it, row i of [n, p] per thread. */
__device__ void ssd_step(float *dst, const float *src, const rt_act *xt, const rt_act *Bt, float d, float a,
                         int64_t n, int64_t p)
{
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float db = d * ld(Bt + i);
        for (int64_t j = 0; j < p; j++)
            dst[i * p + j] = (src ? a * src[i * p + j] : 0.0f) + db * ld(xt + j);
    }
}

/* Block (b, h). Scratch per block: ckpt [nc][n][p] (the state before each
 * chunk), chunk [Q][n][p]; dBh, dCh [batch, seq, heads, n]; part [batch,
 * heads][2] (dA, dD). Shared: G [n][p], B_t, C_t [n], gy, x_t [p], ga, gd [n]. */
__global__ void k_ssd_bwd(rt_act *dx, rt_act *ddt, float *dBh, float *dCh, float *part, float *work,
                          const rt_act *x, const rt_act *dt, const rt_act *A_log, const rt_act *B, const rt_act *C,
                          const rt_act *D, const rt_act *dy, int64_t seq, int64_t heads, int64_t groups, int64_t p,
                          int64_t n, int64_t Q)
{
    RTCU_DYN_SMEM(float, sh);
    float *G = sh, *sB = G + n * p, *sC = sB + n, *sgy = sC + n, *sx = sgy + p, *sga = sx + p, *sgd = sga + n;
    __shared__ float red[32];
    int64_t b = blockIdx.x / heads, h = blockIdx.x % heads, g = h / (heads / groups);
    int64_t np = n * p, nc = (seq + Q - 1) / Q;
    float *ckpt = work + (int64_t)blockIdx.x * (nc + Q) * np, *chunk = ckpt + nc * np;
    const float A = -expf(ld(A_log + h)), Dh = ld(D + h);
    int tid = threadIdx.x;
    /* checkpoints: ckpt[c] = the state before chunk c */
    for (int64_t i = tid; i < np; i += blockDim.x)
        ckpt[i] = 0;
    __syncthreads();
    for (int64_t c = 0; c + 1 < nc; c++) {
        for (int64_t t = c * Q; t < (c + 1) * Q; t++) {
            int64_t row = b * seq + t;
            float d = ld(dt + row * heads + h);
            float *dst = ckpt + (c + 1) * np;
            ssd_step(dst, t == c * Q ? ckpt + c * np : dst, x + (row * heads + h) * p, B + (row * groups + g) * n, d,
                     expf(d * A), n, p);
            __syncthreads();
        }
    }
    for (int64_t i = tid; i < np; i += blockDim.x)
        G[i] = 0;
    float gA = 0, gD = 0;
    __syncthreads();
    for (int64_t c = nc - 1; c >= 0; c--) {
        int64_t t0 = c * Q, t1 = t0 + Q < seq ? t0 + Q : seq;
        for (int64_t t = t0; t < t1; t++) { /* chunk[t - t0]: the state after step t */
            int64_t row = b * seq + t;
            float d = ld(dt + row * heads + h);
            ssd_step(chunk + (t - t0) * np, t == t0 ? ckpt + c * np : chunk + (t - t0 - 1) * np,
                     x + (row * heads + h) * p, B + (row * groups + g) * n, d, expf(d * A), n, p);
            __syncthreads();
        }
        for (int64_t t = t1 - 1; t >= t0; t--) {
            int64_t row = b * seq + t;
            const float *S = chunk + (t - t0) * np, *Sp = t == t0 ? ckpt + c * np : S - np;
            float d = ld(dt + row * heads + h), a = expf(d * A);
            for (int64_t i = tid; i < n; i += blockDim.x) {
                sB[i] = ld(B + (row * groups + g) * n + i);
                sC[i] = ld(C + (row * groups + g) * n + i);
            }
            for (int64_t j = tid; j < p; j += blockDim.x) {
                sgy[j] = ld(dy + (row * heads + h) * p + j);
                sx[j] = ld(x + (row * heads + h) * p + j);
            }
            __syncthreads();
            /* rows of the state: y_t = S_t^T C_t, then S_t = a S_{t-1} + d B_t x_t^T */
            for (int64_t i = tid; i < n; i += blockDim.x) {
                float sc = 0, sxg = 0, ga = 0;
                for (int64_t j = 0; j < p; j++) {
                    sc += sgy[j] * S[i * p + j];
                    float gij = G[i * p + j] + sC[i] * sgy[j];
                    G[i * p + j] = gij;
                    sxg += gij * sx[j];
                    ga += gij * Sp[i * p + j];
                }
                dCh[(row * heads + h) * n + i] = sc;
                dBh[(row * heads + h) * n + i] = d * sxg;
                sgd[i] = sxg * sB[i];
                sga[i] = ga;
            }
            __syncthreads();
            for (int64_t j = tid; j < p; j += blockDim.x) {
                float s = 0;
                for (int64_t i = 0; i < n; i++)
                    s += G[i * p + j] * sB[i];
                dx[(row * heads + h) * p + j] = bf(Dh * sgy[j] + d * s);
                gD += sgy[j] * sx[j];
            }
            if (tid == 0) {
                float ga = 0, gd = 0;
                for (int64_t i = 0; i < n; i++)
                    ga += sga[i], gd += sgd[i];
                ddt[row * heads + h] = bf(gd + ga * a * A);
                gA += ga * a * d;
            }
            __syncthreads();
            for (int64_t i = tid; i < np; i += blockDim.x)
                G[i] *= a;
            __syncthreads();
        }
    }
    gD = block_sum(gD, red);
    if (tid == 0) {
        part[blockIdx.x * 2] = gA * A; /* dA_log = dA A */
        part[blockIdx.x * 2 + 1] = gD;
    }
}

/* dB, dC [row, group, n]: a group's heads summed in order. */
__global__ void k_ssd_group_sum(rt_act *dB, rt_act *dC, const float *dBh, const float *dCh, int64_t rows,
                                int64_t heads, int64_t groups, int64_t n)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x, total = rows * groups * n, hpg = heads / groups;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        int64_t i = e % n, g = (e / n) % groups, row = e / (n * groups);
        float sb = 0, sc = 0;
        for (int64_t k = 0; k < hpg; k++) {
            int64_t h = g * hpg + k;
            sb += dBh[(row * heads + h) * n + i];
            sc += dCh[(row * heads + h) * n + i];
        }
        dB[e] = bf(sb), dC[e] = bf(sc);
    }
}

/* dA_log, dD [heads] += the sequences' partials, in order. */
__global__ void k_ssd_param_sum(rt_grad *dA_log, rt_grad *dD, const float *part, int64_t batch, int64_t heads)
{
    int64_t h = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (h >= heads)
        return;
    float a = 0, d = 0;
    for (int64_t b = 0; b < batch; b++)
        a += part[(b * heads + h) * 2], d += part[(b * heads + h) * 2 + 1];
    dA_log[h] += a;
    dD[h] += d;
}

int block_of(int64_t m)
{
    int64_t t = (m + 31) / 32 * 32;
    return (int)(t < 32 ? 32 : t > 1024 ? 1024 : t);
}

} // namespace

void rt_softplus_fwd(rt_act *y, const rt_act *x, int64_t n)
{
    rtcu_require_init("rt_softplus_fwd");
    if (n <= 0) return;
    rtcu_deps({{y, (size_t)n * sizeof(rt_act)}, {x, (size_t)n * sizeof(rt_act)}});
    RTCU_LAUNCH(k_softplus_fwd, rtcu_grid(n, 256), 256, 0)(y, x, n);
    LAUNCH_CHECK();
}

void rt_softplus_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n)
{
    rtcu_require_init("rt_softplus_bwd");
    if (n <= 0) return;
    size_t b = (size_t)n * sizeof(rt_act);
    rtcu_deps({{dx, b}, {x, b}, {dy, b}});
    RTCU_LAUNCH(k_softplus_bwd, rtcu_grid(n, 256), 256, 0)(dx, x, dy, n);
    LAUNCH_CHECK();
}

void rt_conv1d_fwd(rt_act *y, const rt_act *x, const rt_act *w, const rt_act *b, int64_t batch, int64_t seq,
                   int64_t ch, int64_t k)
{
    rtcu_require_init("rt_conv1d_fwd");
    int64_t total = batch * seq * ch;
    if (total <= 0) return;
    size_t es = sizeof(rt_act), bx = (size_t)total * es;
    rtcu_deps({{y, bx}, {x, bx}, {w, (size_t)(ch * k) * es}, {b, (size_t)ch * es}});
    RTCU_LAUNCH(k_conv_fwd, rtcu_grid(total, 256), 256, 0)(y, x, w, b, batch, seq, ch, k);
    LAUNCH_CHECK();
}

void rt_conv1d_bwd(rt_act *dx, rt_grad *dw, rt_grad *db, const rt_act *x, const rt_act *w, const rt_act *dy,
                   int64_t batch, int64_t seq, int64_t ch, int64_t k)
{
    rtcu_require_init("rt_conv1d_bwd");
    int64_t total = batch * seq * ch;
    if (total <= 0) return;
    size_t es = sizeof(rt_act), bx = (size_t)total * es;
    rtcu_deps({{dx, bx}, {dw, (size_t)(ch * k) * sizeof(rt_grad)}, {db, (size_t)ch * sizeof(rt_grad)}, {x, bx},
               {w, (size_t)(ch * k) * es}, {dy, bx}});
    RTCU_LAUNCH(k_conv_bwd_dx, rtcu_grid(total, 256), 256, 0)(dx, w, dy, batch, seq, ch, k);
    LAUNCH_CHECK();
    RTCU_LAUNCH(k_conv_bwd_dw, rtcu_grid(ch, 128), 128, 0)(dw, db, x, dy, batch, seq, ch, k);
    LAUNCH_CHECK();
}

void rt_ssd_fwd(rt_act *y, const rt_act *x, const rt_act *dt, const rt_act *A_log, const rt_act *B,
                const rt_act *C, const rt_act *D, int64_t batch, int64_t seq, int64_t heads, int64_t groups,
                int64_t p, int64_t n)
{
    rtcu_require_init("rt_ssd_fwd");
    if (batch * seq * heads <= 0) return;
    if (n > MAXN || p > 1024 || groups <= 0 || heads % groups)
        rt_fatal("rt_ssd_fwd: a state of %lld (at most %d), a head of %lld (at most 1024), %lld heads in %lld "
                 "groups", (long long)n, MAXN, (long long)p, (long long)heads, (long long)groups);
    size_t es = sizeof(rt_act), bx = (size_t)(batch * seq * heads * p) * es, bb = (size_t)(batch * seq * groups * n) * es;
    rtcu_deps({{y, bx}, {x, bx}, {dt, (size_t)(batch * seq * heads) * es}, {A_log, (size_t)heads * es}, {B, bb},
               {C, bb}, {D, (size_t)heads * es}});
    rtcu_check_grid("rt_ssd_fwd", batch * heads, 1, 1);
    RTCU_LAUNCH(k_ssd_fwd, (unsigned)(batch * heads), block_of(p), (size_t)(2 * n) * sizeof(float))(
        y, x, dt, A_log, B, C, D, seq, heads, groups, p, n);
    LAUNCH_CHECK();
}

void rt_ssd_bwd(rt_act *dx, rt_act *ddt, rt_grad *dA_log, rt_act *dB, rt_act *dC, rt_grad *dD, const rt_act *x,
                const rt_act *dt, const rt_act *A_log, const rt_act *B, const rt_act *C, const rt_act *D,
                const rt_act *dy, int64_t batch, int64_t seq, int64_t heads, int64_t groups, int64_t p, int64_t n)
{
    rtcu_require_init("rt_ssd_bwd");
    if (batch * seq * heads <= 0) return;
    size_t smem = (size_t)(n * p + 4 * n + 2 * p) * sizeof(float);
    if (smem > 48 * 1024 || groups <= 0 || heads % groups)
        rt_fatal("rt_ssd_bwd: a state of %lld x %lld needs %zu bytes of shared memory (at most 48 KiB), %lld heads "
                 "in %lld groups", (long long)n, (long long)p, smem, (long long)heads, (long long)groups);
    int64_t Q = 1;
    while (Q * Q < seq)
        Q++;
    int64_t nc = (seq + Q - 1) / Q, rows = batch * seq, blocks = batch * heads;
    size_t work = (size_t)(blocks * (nc + Q) * n * p), hn = (size_t)(rows * heads * n);
    float *s = (float *)rtcu_scratch((work + 2 * hn + 2 * (size_t)blocks) * sizeof(float));
    float *dBh = s + work, *dCh = dBh + hn, *part = dCh + hn;
    size_t es = sizeof(rt_act), bx = (size_t)(rows * heads * p) * es, bb = (size_t)(rows * groups * n) * es;
    size_t bd = (size_t)(rows * heads) * es, bh = (size_t)heads * es;
    rtcu_deps({{dx, bx}, {ddt, bd}, {dA_log, (size_t)heads * sizeof(rt_grad)}, {dB, bb}, {dC, bb},
               {dD, (size_t)heads * sizeof(rt_grad)}, {x, bx}, {dt, bd}, {A_log, bh}, {B, bb}, {C, bb}, {D, bh},
               {dy, bx}});
    rtcu_check_grid("rt_ssd_bwd", blocks, 1, 1);
    RTCU_LAUNCH(k_ssd_bwd, (unsigned)blocks, block_of(n > p ? n : p), smem)(
        dx, ddt, dBh, dCh, part, s, x, dt, A_log, B, C, D, dy, seq, heads, groups, p, n, Q);
    LAUNCH_CHECK();
    RTCU_LAUNCH(k_ssd_group_sum, rtcu_grid(rows * groups * n, 256), 256, 0)(dB, dC, dBh, dCh, rows, heads, groups, n);
    LAUNCH_CHECK();
    RTCU_LAUNCH(k_ssd_param_sum, rtcu_grid(heads, 128), 128, 0)(dA_log, dD, part, batch, heads);
    LAUNCH_CHECK();
}
