/* harness.cu: every CUDA kernel of libptdrt against the CPU backend.
 *
 *   ptdc_gpu_harness --count        print the number of visible GPUs
 *   ptdc_gpu_harness kernels [SEED] each kernel forward and backward on fresh
 *                                   random inputs, one line per output
 *   ptdc_gpu_harness comm [SEED]    collectives (mpirun, >= 2 GPUs)
 *   ptdc_gpu_harness attention [SEED] only the attention part of `kernels`
 *   ptdc_gpu_harness mamba [SEED]   only Mamba-2's kernels (softplus, conv1d, ssd)
 *   ptdc_gpu_harness fp8 [SEED]     only the FP8 part of `kernels`
 *   ptdc_gpu_harness fallback [SEED] attention on an unserved head dim and a
 *                                   misaligned buffer: right results, and one
 *                                   warning per reason on stderr
 *   ptdc_gpu_harness banks [SEED]   shared-memory bank-conflict table of the
 *                                   attention kernels (emulator only)
 *   ptdc_gpu_harness die-embed      must abort: a negative token id
 *   ptdc_gpu_harness die-target     must abort: a target outside the vocabulary
 *   ptdc_gpu_harness hang           must abort via the watchdog (mpirun -n 2)
 *   ptdc_gpu_harness wd-race | pp-profile [SEED] | alloc-order [SEED]
 *                                   ordering and threading (harness_order.cu)
 *   ptdc_gpu_harness emu-streams    the emulator's stream-order rules (emulator only)
 *   ptdc_gpu_harness mismatch       must abort: ranks disagree on a collective
 *   ptdc_gpu_harness mismatch-time  the same (PTDC_NCCL_CHECK=1: the runtime's check)
 *
 * Exit status: 0 all passed, 1 a failure. The seed (time-based unless given)
 * is printed so a failure can be replayed. */
#include "cpu_rt.h"
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

int g_failures;
bool g_print = true;

double rel_err(const std::vector<float> &got, const std::vector<float> &ref)
{
    if (got.size() != ref.size()) return INFINITY;
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (!std::isfinite(got[i]) || !std::isfinite(ref[i])) return INFINITY;
        num = fmax(num, fabs((double)got[i] - (double)ref[i]));
        den = fmax(den, fabs((double)ref[i]));
    }
    return den > 0 ? num / den : num;
}

void report(const char *name, const std::vector<float> &got, const std::vector<float> &ref, double tol)
{
    double e = rel_err(got, ref);
    bool ok = e < tol;
    if (!ok) g_failures++;
    if (g_print) printf("%-40s rel.err %9.2e  tol %.0e  %s\n", name, e, tol, ok ? "ok" : "FAIL");
    fflush(stdout);
}

void report_bool(const char *name, bool ok, const char *detail)
{
    if (!ok) g_failures++;
    if (g_print) printf("%-40s %-26s %s\n", name, detail, ok ? "ok" : "FAIL");
    fflush(stdout);
}

static bool bitwise_eq(const std::vector<float> &a, const std::vector<float> &b)
{
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/* ---------------------------------------------------------------- matmul */
static void t_matmul(Rng &r)
{
    const int64_t M = 67, N = 45, K = 129;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int acc = 0; acc < 2; acc++) {
                auto a = randv(r, M * K), b = randv(r, K * N), c = randv(r, M * N);
                rt_act *da = dact(a), *db = dact(b), *dc = dact(c);
                rt_matmul(dc, da, db, M, N, K, ta, tb, acc);
                cpu_rt_matmul(c.data(), a.data(), b.data(), M, N, K, ta, tb, acc);
                char name[64];
                snprintf(name, sizeof name, "matmul ta=%d tb=%d acc=%d", ta, tb, acc);
                report(name, hact(dc, M * N), c, TOL_BF16);
                rt_free(da), rt_free(db), rt_free(dc);
                /* the weight-gradient GEMM: an fp32 C accumulated over micro-batches */
                auto g = randv(r, M * N);
                rt_act *da2 = dact(a), *db2 = dact(b);
                float *dg = df32(g);
                rt_matmul_grad(dg, da2, db2, M, N, K, ta, tb, acc);
                cpu_rt_matmul(g.data(), a.data(), b.data(), M, N, K, ta, tb, acc);
                snprintf(name, sizeof name, "matmul_grad ta=%d tb=%d acc=%d (fp32 C)", ta, tb, acc);
                report(name, hf32(dg, M * N), g, TOL_F32);
                rt_free(da2), rt_free(db2), rt_free(dg);
            }
}

/* Batched GEMMs (q, k and v from one A; a transposed pair, as a backward
 * batches its GEMMs), overwriting and accumulating: each against the CPU
 * backend, and against the GPU's own separate calls, bitwise under the
 * emulator (its GEMM is one fixed loop); on a GPU cuBLAS may choose other
 * kernels for a batch than for one GEMM (another split of K), so there
 * within the matmul tolerance. */
static void t_matmul_batch(Rng &r)
{
    const int64_t M = 67, N = 45, K = 129;
    struct Case {
        int count;
        bool shared, ta, tb;
    };
    const Case cases[] = {{3, true, false, false}, {2, true, true, false}, {2, false, false, true}, {3, false, true, true}};
    for (const Case &k : cases)
        for (int acc = 0; acc < 2; acc++)
            for (int grad = 0; grad < 2; grad++) {
                const int n = k.count;
                std::vector<float> a[3], b[3], c[3], got, sep, ref;
                std::vector<void *> bufs;
                const rt_act *pa[3], *pb[3];
                rt_act *cb[3], *cs[3]; /* batched, separate */
                float *gb[3], *gs[3];  /* the same, fp32 C */
                for (int i = 0; i < n; i++) {
                    bool same_a = i > 0 && k.shared;
                    a[i] = same_a ? a[0] : randv(r, M * K);
                    b[i] = randv(r, K * N);
                    c[i] = randv(r, M * N);
                    pa[i] = same_a ? pa[0] : dact(a[i]);
                    pb[i] = dact(b[i]);
                    if (!same_a) bufs.push_back((void *)pa[i]);
                    bufs.push_back((void *)pb[i]);
                    if (grad) {
                        gb[i] = df32(c[i]), gs[i] = df32(c[i]);
                        bufs.push_back(gb[i]), bufs.push_back(gs[i]);
                    } else {
                        cb[i] = dact(c[i]), cs[i] = dact(c[i]);
                        bufs.push_back(cb[i]), bufs.push_back(cs[i]);
                    }
                }
                if (grad)
                    rt_matmul_grad_batch(n, gb, pa, pb, M, N, K, k.ta, k.tb, acc);
                else
                    rt_matmul_batch(n, cb, pa, pb, M, N, K, k.ta, k.tb, acc);
                for (int i = 0; i < n; i++) {
                    if (grad)
                        rt_matmul_grad(gs[i], pa[i], pb[i], M, N, K, k.ta, k.tb, acc);
                    else
                        rt_matmul(cs[i], pa[i], pb[i], M, N, K, k.ta, k.tb, acc);
                    cpu_rt_matmul(c[i].data(), a[i].data(), b[i].data(), M, N, K, k.ta, k.tb, acc);
                    auto hb = grad ? hf32(gb[i], M * N) : hact(cb[i], M * N);
                    auto hs = grad ? hf32(gs[i], M * N) : hact(cs[i], M * N);
                    got.insert(got.end(), hb.begin(), hb.end());
                    sep.insert(sep.end(), hs.begin(), hs.end());
                    ref.insert(ref.end(), c[i].begin(), c[i].end());
                }
                char name[64];
                snprintf(name, sizeof name, "matmul%s_batch x%d%s ta%d tb%d acc%d", grad ? "_grad" : "", n,
                         k.shared ? " one A" : "", k.ta, k.tb, acc);
                double tol = grad ? TOL_F32 : TOL_BF16;
                report(name, got, ref, tol);
#ifdef PTDC_CUDA_EMU
                report_bool("  = separate calls", bitwise_eq(got, sep), "bitwise equal");
#else
                report("  = separate calls", got, sep, tol);
#endif
                for (void *p : bufs) rt_free(p);
            }
}

/* ------------------------------------------------------------- embedding */
static void t_embedding(Rng &r)
{
    const int64_t n = 96, vocab = 100, vl = 40, off = 30;
    for (int64_t dim : {24, 64}) {
        std::vector<int32_t> ids((size_t)n);
        for (auto &i : ids) i = (int32_t)(r.below(4) == 0 ? 35 : r.below(vocab)); /* repeats */
        auto table = randv(r, vl * dim), dout = randv(r, n * dim), dtable = randv(r, vl * dim);
        std::vector<float> out((size_t)(n * dim));
        int32_t *dids = di32(ids);
        rt_act *dtab = dact(table), *dout_d = dact(dout);
        float *ddt = df32(dtable); /* the gradient: fp32 */
        rt_act *dout_fwd = (rt_act *)rt_alloc(out.size() * sizeof(rt_act));
        rt_embedding_fwd(dout_fwd, dids, dtab, n, vl, off, dim);
        cpu_rt_embedding_fwd(out.data(), ids.data(), table.data(), n, vl, off, dim);
        char name[64];
        snprintf(name, sizeof name, "embedding_fwd dim=%lld", (long long)dim);
        report(name, hact(dout_fwd, n * dim), out, TOL_BF16);
        rt_embedding_bwd(ddt, dids, dout_d, n, vl, off, dim);
        cpu_rt_embedding_bwd(dtable.data(), ids.data(), dout.data(), n, vl, off, dim);
        snprintf(name, sizeof name, "embedding_bwd dim=%lld (fp32)", (long long)dim);
        report(name, hf32(ddt, vl * dim), dtable, TOL_F32);
        rt_free(dids), rt_free(dtab), rt_free(dout_d), rt_free(ddt), rt_free(dout_fwd);
    }
}

/* ----------------------------------------------------------------- norms */
static void t_rmsnorm_cols(Rng &r, int64_t cols)
{
    const int64_t rows = 37;
    const float eps = 1e-5f;
    auto x = randv(r, rows * cols, 2.0f), w = randv(r, cols), dy = randv(r, rows * cols), dw = randv(r, cols);
    std::vector<float> y((size_t)(rows * cols)), rstd((size_t)rows), dx((size_t)(rows * cols));
    rt_act *dxx = dact(x), *dww = dact(w), *ddy = dact(dy);
    float *ddw = df32(dw);
    rt_act *dyy = (rt_act *)rt_alloc(y.size() * sizeof(rt_act)), *ddx = (rt_act *)rt_alloc(dx.size() * sizeof(rt_act));
    float *drstd = (float *)rt_alloc((size_t)rows * sizeof(float));
    rt_rmsnorm_fwd(dyy, drstd, dxx, dww, rows, cols, eps);
    cpu_rt_rmsnorm_fwd(y.data(), rstd.data(), x.data(), w.data(), rows, cols, eps);
    report(cols % 8 ? "rmsnorm_fwd y" : "rmsnorm_fwd y (16-byte)", hact(dyy, rows * cols), y, TOL_BF16);
    report(cols % 8 ? "rmsnorm_fwd rstd (fp32)" : "rmsnorm_fwd rstd (16-byte)", hf32(drstd, rows), rstd, TOL_F32);
    rt_rmsnorm_bwd(ddx, ddw, dxx, dww, drstd, ddy, NULL, rows, cols);
    cpu_rt_rmsnorm_bwd(dx.data(), dw.data(), x.data(), w.data(), rstd.data(), dy.data(), NULL, rows, cols);
    report(cols % 8 ? "rmsnorm_bwd dx" : "rmsnorm_bwd dx (16-byte)", hact(ddx, rows * cols), dx, TOL_BF16);
    report(cols % 8 ? "rmsnorm_bwd dw (fp32, accumulated)" : "rmsnorm_bwd dw (16-byte)", hf32(ddw, cols), dw, TOL_F32);
    /* The residual's gradient added in the same pass, in place (dres == dx),
     * as the generated programs call it. */
    auto res = randv(r, rows * cols);
    rt_act *dres = dact(res);
    rt_rmsnorm_bwd(dres, ddw, dxx, dww, drstd, ddy, dres, rows, cols);
    cpu_rt_rmsnorm_bwd(res.data(), dw.data(), x.data(), w.data(), rstd.data(), dy.data(), res.data(), rows, cols);
    report(cols % 8 ? "rmsnorm_bwd dx += dres (in place)" : "rmsnorm_bwd dx += dres (16-byte, in place)",
           hact(dres, rows * cols), res, TOL_BF16);
    rt_free(dxx), rt_free(dww), rt_free(ddy), rt_free(ddw), rt_free(dyy), rt_free(ddx), rt_free(drstd), rt_free(dres);
}

/* The residual add fused into the norm: the CPU backend's sum and norm, and
 * bitwise the GPU's rt_add then rt_rmsnorm_fwd (the sum written over a, as
 * the programs may place it). */
static void t_add_rmsnorm_cols(Rng &r, int64_t cols)
{
    const int64_t rows = 37, n = rows * cols;
    const float eps = 1e-5f;
    auto a = randv(r, n, 2.0f), b = randv(r, n), w = randv(r, cols);
    std::vector<float> sum((size_t)n), y((size_t)n), rstd((size_t)rows);
    cpu_rt_add_rmsnorm_fwd(sum.data(), y.data(), rstd.data(), a.data(), b.data(), w.data(), rows, cols, eps);
    rt_act *da = dact(a), *db = dact(b), *dw = dact(w), *da2 = dact(a);
    rt_act *dsum = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act)), *dy = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act));
    rt_act *dy2 = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act));
    float *drstd = (float *)rt_alloc((size_t)rows * 4), *drstd2 = (float *)rt_alloc((size_t)rows * 4);
    rt_add(dsum, da, db, n, n);
    rt_rmsnorm_fwd(dy, drstd, dsum, dw, rows, cols, eps);
    rt_add_rmsnorm_fwd(da2, dy2, drstd2, da2, db, dw, rows, cols, eps);
    bool v8 = cols % 8 == 0;
    /* The norm's reference from the GPU's sum, rounded to bf16 as the GPU
     * stores it (the CPU backend's sum is fp32). */
    cpu_rt_rmsnorm_fwd(y.data(), rstd.data(), hact(da2, n).data(), w.data(), rows, cols, eps);
    report(v8 ? "add_rmsnorm_fwd sum (16-byte)" : "add_rmsnorm_fwd sum", hact(da2, n), sum, TOL_BF16);
    report(v8 ? "add_rmsnorm_fwd y (16-byte)" : "add_rmsnorm_fwd y", hact(dy2, n), y, TOL_BF16);
    report(v8 ? "add_rmsnorm_fwd rstd (16-byte)" : "add_rmsnorm_fwd rstd (fp32)", hf32(drstd2, rows), rstd, TOL_F32);
    bool same = bitwise_eq(hact(da2, n), hact(dsum, n)) && bitwise_eq(hact(dy2, n), hact(dy, n)) &&
                bitwise_eq(hf32(drstd2, rows), hf32(drstd, rows));
    report_bool(v8 ? "add_rmsnorm_fwd = add, rmsnorm (16-byte)" : "add_rmsnorm_fwd = add, rmsnorm", same,
                "sum, y, rstd bitwise");
    rt_free(da), rt_free(db), rt_free(dw), rt_free(da2), rt_free(dsum), rt_free(dy), rt_free(dy2);
    rt_free(drstd), rt_free(drstd2);
}

static void t_rmsnorm(Rng &r)
{
    /* 300: the scalar kernels; 512: the 16-byte ones. */
    for (int64_t cols : {300, 512}) {
        t_rmsnorm_cols(r, cols);
        t_add_rmsnorm_cols(r, cols);
    }
}

static void t_layernorm(Rng &r)
{
    const int64_t rows = 29, cols = 257;
    const float eps = 1e-5f;
    auto x = randv(r, rows * cols, 2.0f), w = randv(r, cols), b = randv(r, cols), dy = randv(r, rows * cols);
    auto dw = randv(r, cols), db = randv(r, cols);
    for (auto &v : x) v = bfr(v + 0.5f); /* a non-zero mean */
    std::vector<float> y((size_t)(rows * cols)), mean((size_t)rows), rstd((size_t)rows), dx((size_t)(rows * cols));
    rt_act *dxx = dact(x), *dww = dact(w), *dbb = dact(b), *ddy = dact(dy);
    float *ddw = df32(dw), *ddb = df32(db);
    rt_act *dyy = (rt_act *)rt_alloc(y.size() * sizeof(rt_act)), *ddx = (rt_act *)rt_alloc(dx.size() * sizeof(rt_act));
    float *dmean = (float *)rt_alloc((size_t)rows * 4), *drstd = (float *)rt_alloc((size_t)rows * 4);
    rt_layernorm_fwd(dyy, dmean, drstd, dxx, dww, dbb, rows, cols, eps);
    cpu_rt_layernorm_fwd(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, cols, eps);
    report("layernorm_fwd y", hact(dyy, rows * cols), y, TOL_BF16);
    report("layernorm_fwd mean (fp32)", hf32(dmean, rows), mean, TOL_F32);
    report("layernorm_fwd rstd (fp32)", hf32(drstd, rows), rstd, TOL_F32);
    rt_layernorm_bwd(ddx, ddw, ddb, dxx, dww, dmean, drstd, ddy, NULL, rows, cols);
    cpu_rt_layernorm_bwd(dx.data(), dw.data(), db.data(), x.data(), w.data(), mean.data(), rstd.data(), dy.data(),
                         NULL, rows, cols);
    report("layernorm_bwd dx", hact(ddx, rows * cols), dx, TOL_BF16);
    report("layernorm_bwd dw (fp32, accumulated)", hf32(ddw, cols), dw, TOL_F32);
    report("layernorm_bwd db (fp32, accumulated)", hf32(ddb, cols), db, TOL_F32);
    {   /* dx = dres + the norm's gradient, into another buffer */
        auto res = randv(r, rows * cols);
        std::vector<float> dx2((size_t)(rows * cols)), dw2((size_t)cols), db2((size_t)cols);
        rt_act *dres = dact(res), *ddx2 = (rt_act *)rt_alloc(dx2.size() * sizeof(rt_act));
        rt_layernorm_bwd(ddx2, ddw, ddb, dxx, dww, dmean, drstd, ddy, dres, rows, cols);
        cpu_rt_layernorm_bwd(dx2.data(), dw2.data(), db2.data(), x.data(), w.data(), mean.data(), rstd.data(),
                             dy.data(), res.data(), rows, cols);
        report("layernorm_bwd dx = dres + dx", hact(ddx2, rows * cols), dx2, TOL_BF16);
        rt_free(dres), rt_free(ddx2);
    }
    {   /* the residual add fused in front: against the CPU's norm of the GPU's
         * bf16 sum, and bitwise the GPU's rt_add then rt_layernorm_fwd */
        const int64_t n = rows * cols;
        auto x1 = randv(r, n);
        rt_act *dx1 = dact(x1), *dx0 = dact(x), *dsum = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act));
        rt_act *dy2 = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act));
        float *dm2 = (float *)rt_alloc((size_t)rows * 4), *dr2 = (float *)rt_alloc((size_t)rows * 4);
        rt_add(dsum, dxx, dx1, n, n);
        rt_layernorm_fwd(dyy, dmean, drstd, dsum, dww, dbb, rows, cols, eps);
        rt_add_layernorm_fwd(dx0, dy2, dm2, dr2, dx0, dx1, dww, dbb, rows, cols, eps);
        std::vector<float> y2((size_t)n), m2((size_t)rows), r2((size_t)rows);
        cpu_rt_layernorm_fwd(y2.data(), m2.data(), r2.data(), hact(dx0, n).data(), w.data(), b.data(), rows, cols,
                             eps);
        report("add_layernorm_fwd y", hact(dy2, n), y2, TOL_BF16);
        report("add_layernorm_fwd mean, rstd (fp32)", hf32(dr2, rows), r2, TOL_F32);
        bool same = bitwise_eq(hact(dx0, n), hact(dsum, n)) && bitwise_eq(hact(dy2, n), hact(dyy, n)) &&
                    bitwise_eq(hf32(dm2, rows), hf32(dmean, rows)) && bitwise_eq(hf32(dr2, rows), hf32(drstd, rows));
        report_bool("add_layernorm_fwd = add, layernorm", same, "sum, y, mean, rstd bitwise");
        rt_free(dx1), rt_free(dx0), rt_free(dsum), rt_free(dy2), rt_free(dm2), rt_free(dr2);
    }
    rt_free(dxx), rt_free(dww), rt_free(dbb), rt_free(ddy), rt_free(ddw), rt_free(ddb);
    rt_free(dyy), rt_free(ddx), rt_free(dmean), rt_free(drstd);
}

/* ------------------------------------------------------------------ rope */
static void t_rope(Rng &r)
{
    const int64_t outer = 2, seq = 17, inner = 3, pos = 5;
    const float theta = 10000.0f;
    /* 16 and 128: the 16-byte kernel (one and eight groups of eight pairs
     * per row); 6: the pair-per-thread kernel. */
    for (int64_t dim : {16, 128, 6})
    for (int inv = 0; inv < 2; inv++) {
        int64_t n = outer * seq * inner * dim;
        auto x = randv(r, n);
        std::vector<float> y((size_t)n);
        rt_act *dx = dact(x), *dy = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act));
        rt_rope(dy, dx, outer, seq, inner, dim, pos, theta, inv);
        cpu_rt_rope(y.data(), x.data(), outer, seq, inner, dim, pos, theta, inv);
        char what[64];
        snprintf(what, sizeof what, "rope %s D=%lld", inv ? "inverse (backward)" : "forward", (long long)dim);
        report(what, hact(dy, n), y, TOL_BF16);
        rt_rope(dx, dx, outer, seq, inner, dim, pos, theta, inv); /* in place */
        snprintf(what, sizeof what, "rope %s in place D=%lld", inv ? "inverse" : "forward", (long long)dim);
        report(what, hact(dx, n), y, TOL_BF16);
        rt_free(dx), rt_free(dy);
    }
    const int64_t dim = 16, n = outer * seq * inner * dim;
    {   /* The two kernels compute the same bits: a buffer 2 bytes off
         * 16-byte alignment takes the pair-per-thread kernel. */
        auto x = randv(r, n);
        rt_act *dx = dact(x), *dy = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act));
        rt_act *mx = (rt_act *)rt_alloc((size_t)(n + 1) * sizeof(rt_act));
        rt_act *my = (rt_act *)rt_alloc((size_t)(n + 1) * sizeof(rt_act));
        rt_copy(mx + 1, dx, (size_t)n * sizeof(rt_act));
        rt_rope(dy, dx, outer, seq, inner, dim, pos, theta, false);
        rt_rope(my + 1, mx + 1, outer, seq, inner, dim, pos, theta, false);
        report_bool("rope 16-byte kernel vs pair kernel", bitwise_eq(hact(dy, n), hact(my + 1, n)), "bitwise equal");
        rt_free(dx), rt_free(dy), rt_free(mx), rt_free(my);
    }
    /* LLaMA-3.1's scaling (factor 8, low 1, high 4) with an original context
     * of 64 positions, so the 8 frequencies of dim 16 at theta 10000 fall in
     * all three bands: kept, interpolated, divided. */
    for (int inv = 0; inv < 2; inv++) {
        auto x = randv(r, n);
        std::vector<float> y((size_t)n);
        rt_act *dx = dact(x), *dy = (rt_act *)rt_alloc((size_t)n * sizeof(rt_act));
        rt_rope_llama3(dy, dx, outer, seq, inner, dim, pos, theta, 8.0f, 1.0f, 4.0f, 64.0f, inv);
        cpu_rt_rope_llama3(y.data(), x.data(), outer, seq, inner, dim, pos, theta, 8.0f, 1.0f, 4.0f, 64.0f, inv);
        report(inv ? "rope llama3 inverse (backward)" : "rope llama3 forward", hact(dy, n), y, TOL_BF16);
        rt_free(dx), rt_free(dy);
    }
}

/* ------------------------------------------------------------- pointwise */
static void t_pointwise(Rng &r)
{
    for (int64_t n : {1003, 1024}) {
        auto x = randv(r, n, 4.0f), dy = randv(r, n);
        std::vector<float> y((size_t)n), dx((size_t)n);
        rt_act *dxx = dact(x), *ddy = dact(dy), *dout = (rt_act *)rt_alloc((size_t)n * 2);
        char name[64];
        const char *vec = n % 8 ? "" : " (vector)";
        rt_silu_fwd(dout, dxx, n);
        cpu_rt_silu_fwd(y.data(), x.data(), n);
        snprintf(name, sizeof name, "silu_fwd n=%lld%s", (long long)n, vec);
        report(name, hact(dout, n), y, TOL_BF16);
        rt_silu_bwd(dout, dxx, ddy, n);
        cpu_rt_silu_bwd(dx.data(), x.data(), dy.data(), n);
        snprintf(name, sizeof name, "silu_bwd n=%lld%s", (long long)n, vec);
        report(name, hact(dout, n), dx, TOL_BF16);
        {
            auto b = randv(r, n, 2.0f);
            std::vector<float> db((size_t)n);
            rt_act *dbb = dact(b), *dout2 = (rt_act *)rt_alloc((size_t)n * 2);
            rt_swiglu_fwd(dout, dxx, dbb, n);
            cpu_rt_swiglu_fwd(y.data(), x.data(), b.data(), n);
            snprintf(name, sizeof name, "swiglu_fwd n=%lld%s", (long long)n, vec);
            report(name, hact(dout, n), y, TOL_BF16);
            rt_swiglu_bwd(dout, dout2, dxx, dbb, ddy, n);
            cpu_rt_swiglu_bwd(dx.data(), db.data(), x.data(), b.data(), dy.data(), n);
            snprintf(name, sizeof name, "swiglu_bwd da n=%lld%s", (long long)n, vec);
            report(name, hact(dout, n), dx, TOL_BF16);
            snprintf(name, sizeof name, "swiglu_bwd db n=%lld%s", (long long)n, vec);
            report(name, hact(dout2, n), db, TOL_BF16);
            /* In place, as the generated programs may call it (da over a, db over b). */
            rt_swiglu_bwd(dxx, dbb, dxx, dbb, ddy, n);
            report("swiglu_bwd in place", hact(dxx, n), dx, TOL_BF16);
            rt_free(dxx);
            dxx = dact(x);
            rt_free(dbb), rt_free(dout2);
        }
        {
            /* The experts' other activations (ir/moe_acts.def): relu2, and
             * GPT-OSS's clamped SwiGLU on values past its clamps (+-7). */
            auto a = randv(r, n, 10.0f), b = randv(r, n, 10.0f);
            std::vector<float> da((size_t)n), db((size_t)n);
            rt_act *dA = dact(a), *dB = dact(b), *dout2 = (rt_act *)rt_alloc((size_t)n * 2);
            rt_relu2_fwd(dout, dB, n);
            cpu_rt_relu2_fwd(y.data(), b.data(), n);
            snprintf(name, sizeof name, "relu2_fwd n=%lld", (long long)n);
            report(name, hact(dout, n), y, TOL_BF16);
            rt_relu2_bwd(dout, dB, ddy, n);
            cpu_rt_relu2_bwd(db.data(), b.data(), dy.data(), n);
            snprintf(name, sizeof name, "relu2_bwd n=%lld", (long long)n);
            report(name, hact(dout, n), db, TOL_BF16);
            rt_swiglu_oai_fwd(dout, dA, dB, n);
            cpu_rt_swiglu_oai_fwd(y.data(), a.data(), b.data(), n);
            snprintf(name, sizeof name, "swiglu_oai_fwd n=%lld", (long long)n);
            report(name, hact(dout, n), y, TOL_BF16);
            rt_swiglu_oai_bwd(dout, dout2, dA, dB, ddy, n);
            cpu_rt_swiglu_oai_bwd(da.data(), db.data(), a.data(), b.data(), dy.data(), n);
            snprintf(name, sizeof name, "swiglu_oai_bwd da n=%lld", (long long)n);
            report(name, hact(dout, n), da, TOL_BF16);
            snprintf(name, sizeof name, "swiglu_oai_bwd db n=%lld", (long long)n);
            report(name, hact(dout2, n), db, TOL_BF16);
            rt_free(dA), rt_free(dB), rt_free(dout2);
        }
        rt_gelu_fwd(dout, dxx, n);
        cpu_rt_gelu_fwd(y.data(), x.data(), n);
        snprintf(name, sizeof name, "gelu_fwd n=%lld%s", (long long)n, vec);
        report(name, hact(dout, n), y, TOL_BF16);
        rt_gelu_bwd(dout, dxx, ddy, n);
        cpu_rt_gelu_bwd(dx.data(), x.data(), dy.data(), n);
        snprintf(name, sizeof name, "gelu_bwd n=%lld%s", (long long)n, vec);
        report(name, hact(dout, n), dx, TOL_BF16);
        rt_free(dxx), rt_free(ddy), rt_free(dout);
    }
    struct { int64_t n, nb; } cases[] = {{320, 40}, {111, 37}, {256, 256}, {99, 99}};
    for (auto c : cases) {
        auto a = randv(r, c.n), b = randv(r, c.nb);
        std::vector<float> out((size_t)c.n);
        rt_act *da = dact(a), *db = dact(b), *dout = (rt_act *)rt_alloc((size_t)c.n * 2);
        char name[64];
        rt_add(dout, da, db, c.n, c.nb);
        cpu_rt_add(out.data(), a.data(), b.data(), c.n, c.nb);
        snprintf(name, sizeof name, "add n=%lld nb=%lld", (long long)c.n, (long long)c.nb);
        report(name, hact(dout, c.n), out, TOL_BF16);
        rt_mul(dout, da, db, c.n, c.nb);
        cpu_rt_mul(out.data(), a.data(), b.data(), c.n, c.nb);
        snprintf(name, sizeof name, "mul n=%lld nb=%lld", (long long)c.n, (long long)c.nb);
        report(name, hact(dout, c.n), out, TOL_BF16);
        rt_add(da, da, db, c.n, c.nb); /* out aliases a */
        cpu_rt_add(out.data(), a.data(), b.data(), c.n, c.nb);
        snprintf(name, sizeof name, "add in place n=%lld nb=%lld", (long long)c.n, (long long)c.nb);
        report(name, hact(da, c.n), out, TOL_BF16);
        rt_free(da), rt_free(db), rt_free(dout);
    }
}

/* ------------------------------------- Mamba-2: softplus, conv1d, ssd */
static void t_mamba(Rng &r)
{
    char name[96];
    {
        int64_t n = 1000;
        auto x = randv(r, n, 25.0f), dy = randv(r, n); /* both sides of softplus's x > 20 branch */
        std::vector<float> y((size_t)n), dx((size_t)n);
        rt_act *d_x = dact(x), *d_dy = dact(dy), *d_y = (rt_act *)rt_alloc((size_t)n * 2);
        rt_softplus_fwd(d_y, d_x, n);
        cpu_rt_softplus_fwd(y.data(), x.data(), n);
        report("softplus_fwd", hact(d_y, n), y, TOL_BF16);
        rt_softplus_bwd(d_y, d_x, d_dy, n);
        cpu_rt_softplus_bwd(dx.data(), x.data(), dy.data(), n);
        report("softplus_bwd", hact(d_y, n), dx, TOL_BF16);
        rt_free(d_x), rt_free(d_dy), rt_free(d_y);
    }
    struct { int64_t batch, seq, ch, k; } cv[] = {{2, 13, 24, 4}, {1, 3, 5, 4}};
    for (auto c : cv) {
        int64_t nx = c.batch * c.seq * c.ch;
        auto x = randv(r, nx), w = randv(r, c.ch * c.k), b = randv(r, c.ch), dy = randv(r, nx);
        std::vector<float> y((size_t)nx), dx((size_t)nx), dw((size_t)(c.ch * c.k), 0.5f), db((size_t)c.ch, 0.25f);
        rt_act *d_x = dact(x), *d_w = dact(w), *d_b = dact(b), *d_dy = dact(dy), *d_y = (rt_act *)rt_alloc((size_t)nx * 2);
        float *d_dw = df32(dw), *d_db = df32(db);
        rt_conv1d_fwd(d_y, d_x, d_w, d_b, c.batch, c.seq, c.ch, c.k);
        cpu_rt_conv1d_fwd(y.data(), x.data(), w.data(), b.data(), c.batch, c.seq, c.ch, c.k);
        snprintf(name, sizeof name, "conv1d_fwd %lldx%lldx%lld k %lld", (long long)c.batch, (long long)c.seq,
                 (long long)c.ch, (long long)c.k);
        report(name, hact(d_y, nx), y, TOL_BF16);
        rt_conv1d_bwd(d_y, d_dw, d_db, d_x, d_w, d_dy, c.batch, c.seq, c.ch, c.k);
        cpu_rt_conv1d_bwd(dx.data(), dw.data(), db.data(), x.data(), w.data(), dy.data(), c.batch, c.seq, c.ch, c.k);
        report("conv1d_bwd dx", hact(d_y, nx), dx, TOL_BF16);
        report("conv1d_bwd dw (fp32, accumulated)", hf32(d_dw, c.ch * c.k), dw, 1e-4);
        report("conv1d_bwd db (fp32, accumulated)", hf32(d_db, c.ch), db, 1e-4);
        rt_free(d_x), rt_free(d_w), rt_free(d_b), rt_free(d_dy), rt_free(d_y), rt_free(d_dw), rt_free(d_db);
    }
    /* seq 37: chunks of 7 in the backward, the last one short */
    struct { int64_t batch, seq, heads, groups, p, n; } sc[] = {{2, 37, 4, 2, 8, 16}, {1, 9, 3, 1, 5, 6}};
    for (auto c : sc) {
        int64_t rows = c.batch * c.seq, nx = rows * c.heads * c.p, nb = rows * c.groups * c.n, nd = rows * c.heads;
        auto x = randv(r, nx), B = randv(r, nb), C = randv(r, nb), dy = randv(r, nx);
        auto dt = randv(r, nd, 0.5f), A = randv(r, c.heads, 0.5f), D = randv(r, c.heads);
        for (auto &v : dt) v = bfr(fabsf(v) + 0.0625f); /* a softplus output, a bf16 value */
        std::vector<float> y((size_t)nx), dx((size_t)nx), ddt((size_t)nd), dB((size_t)nb), dC((size_t)nb);
        std::vector<float> dA((size_t)c.heads, 0.5f), dD((size_t)c.heads, -0.25f);
        rt_act *d_x = dact(x), *d_dt = dact(dt), *d_A = dact(A), *d_B = dact(B), *d_C = dact(C), *d_D = dact(D);
        rt_act *d_dy = dact(dy), *d_y = (rt_act *)rt_alloc((size_t)nx * 2), *d_ddt = (rt_act *)rt_alloc((size_t)nd * 2);
        rt_act *d_dB = (rt_act *)rt_alloc((size_t)nb * 2), *d_dC = (rt_act *)rt_alloc((size_t)nb * 2);
        float *d_dA = df32(dA), *d_dD = df32(dD);
        rt_ssd_fwd(d_y, d_x, d_dt, d_A, d_B, d_C, d_D, c.batch, c.seq, c.heads, c.groups, c.p, c.n);
        cpu_rt_ssd_fwd(y.data(), x.data(), dt.data(), A.data(), B.data(), C.data(), D.data(), c.batch, c.seq, c.heads,
                       c.groups, c.p, c.n);
        snprintf(name, sizeof name, "ssd_fwd %lld heads in %lld groups, seq %lld", (long long)c.heads,
                 (long long)c.groups, (long long)c.seq);
        report(name, hact(d_y, nx), y, TOL_BF16);
        rt_ssd_bwd(d_y, d_ddt, d_dA, d_dB, d_dC, d_dD, d_x, d_dt, d_A, d_B, d_C, d_D, d_dy, c.batch, c.seq, c.heads,
                   c.groups, c.p, c.n);
        cpu_rt_ssd_bwd(dx.data(), ddt.data(), dA.data(), dB.data(), dC.data(), dD.data(), x.data(), dt.data(), A.data(),
                       B.data(), C.data(), D.data(), dy.data(), c.batch, c.seq, c.heads, c.groups, c.p, c.n);
        report("ssd_bwd dx", hact(d_y, nx), dx, TOL_BF16);
        report("ssd_bwd ddt", hact(d_ddt, nd), ddt, TOL_BF16);
        report("ssd_bwd dB (a group's heads summed)", hact(d_dB, nb), dB, TOL_BF16);
        report("ssd_bwd dC", hact(d_dC, nb), dC, TOL_BF16);
        report("ssd_bwd dA_log (fp32, accumulated)", hf32(d_dA, c.heads), dA, 1e-4);
        report("ssd_bwd dD (fp32, accumulated)", hf32(d_dD, c.heads), dD, 1e-4);
        rt_act *all[] = {d_x, d_dt, d_A, d_B, d_C, d_D, d_dy, d_y, d_ddt, d_dB, d_dC};
        for (rt_act *a : all) rt_free(a);
        rt_free(d_dA), rt_free(d_dD);
    }
}

/* ------------------------------------------- slice, concat (MLA) */
static void t_slice_concat(Rng &r)
{
    char name[96];
    struct { int64_t rows, cols, n, at; } sl[] = {{48, 24, 8, 16}, {48, 24, 16, 0}, {35, 20, 12, 8}};
    for (auto c : sl) {
        auto x = randv(r, c.rows * c.cols), dy = randv(r, c.rows * c.n);
        std::vector<float> y((size_t)(c.rows * c.n)), dx((size_t)(c.rows * c.cols));
        rt_act *dxx = dact(x), *ddy = dact(dy), *dout = (rt_act *)rt_alloc((size_t)(c.rows * c.cols) * 2);
        rt_slice_fwd(dout, dxx, c.rows, c.cols, c.n, c.at);
        cpu_rt_slice_fwd(y.data(), x.data(), c.rows, c.cols, c.n, c.at);
        snprintf(name, sizeof name, "slice_fwd %lld of %lld at %lld", (long long)c.n, (long long)c.cols, (long long)c.at);
        report(name, hact(dout, c.rows * c.n), y, TOL_BF16);
        rt_slice_bwd(dout, ddy, c.rows, c.cols, c.n, c.at);
        cpu_rt_slice_bwd(dx.data(), dy.data(), c.rows, c.cols, c.n, c.at);
        snprintf(name, sizeof name, "slice_bwd %lld of %lld at %lld", (long long)c.n, (long long)c.cols, (long long)c.at);
        report(name, hact(dout, c.rows * c.cols), dx, TOL_BF16);
        rt_free(dxx), rt_free(ddy), rt_free(dout);
    }
    /* a [outer, bcast, inner, na] | b [outer, inner, nb] broadcast over bcast */
    struct { int64_t outer, bcast, inner, na, nb; } cc[] = {{6, 1, 1, 8, 8}, {6, 4, 1, 8, 8}, {2, 3, 5, 4, 6}};
    for (auto c : cc) {
        int64_t rows = c.outer * c.bcast * c.inner, brows = c.outer * c.inner, w = c.na + c.nb;
        auto a = randv(r, rows * c.na), b = randv(r, brows * c.nb), dy = randv(r, rows * w);
        std::vector<float> y((size_t)(rows * w)), da((size_t)(rows * c.na)), db((size_t)(brows * c.nb));
        rt_act *d_a = dact(a), *d_b = dact(b), *d_dy = dact(dy), *d_y = (rt_act *)rt_alloc((size_t)(rows * w) * 2);
        rt_act *d_da = (rt_act *)rt_alloc((size_t)(rows * c.na) * 2), *d_db = (rt_act *)rt_alloc((size_t)(brows * c.nb) * 2);
        rt_concat_fwd(d_y, d_a, d_b, c.outer, c.bcast, c.inner, c.na, c.nb);
        cpu_rt_concat_fwd(y.data(), a.data(), b.data(), c.outer, c.bcast, c.inner, c.na, c.nb);
        snprintf(name, sizeof name, "concat_fwd %lldx%lldx%lld, %lld | %lld", (long long)c.outer, (long long)c.bcast,
                 (long long)c.inner, (long long)c.na, (long long)c.nb);
        report(name, hact(d_y, rows * w), y, TOL_BF16);
        rt_concat_bwd(d_da, d_db, d_dy, c.outer, c.bcast, c.inner, c.na, c.nb);
        cpu_rt_concat_bwd(da.data(), db.data(), dy.data(), c.outer, c.bcast, c.inner, c.na, c.nb);
        snprintf(name, sizeof name, "concat_bwd da %lldx%lldx%lld", (long long)c.outer, (long long)c.bcast, (long long)c.inner);
        report(name, hact(d_da, rows * c.na), da, TOL_BF16);
        snprintf(name, sizeof name, "concat_bwd db (summed over %lld copies)", (long long)c.bcast);
        report(name, hact(d_db, brows * c.nb), db, TOL_BF16);
        rt_free(d_a), rt_free(d_b), rt_free(d_dy), rt_free(d_y), rt_free(d_da), rt_free(d_db);
    }
    /* attention with v narrower than q and k (rt_attention_v_*: v padded) */
    int64_t B = 1, S = 7, H = 4, KVH = 2, D = 16, Dv = 12;
    auto q = randv(r, B * S * H * D), k = randv(r, B * S * KVH * D), v = randv(r, B * S * KVH * Dv);
    auto dout = randv(r, B * S * H * Dv);
    std::vector<float> o((size_t)(B * S * H * Dv)), lse((size_t)(B * S * H)), dq((size_t)(B * S * H * D));
    std::vector<float> dk((size_t)(B * S * KVH * D)), dv((size_t)(B * S * KVH * Dv));
    rt_act *d_q = dact(q), *d_k = dact(k), *d_v = dact(v), *d_do = dact(dout);
    rt_act *d_o = (rt_act *)rt_alloc(o.size() * 2), *d_dq = (rt_act *)rt_alloc(dq.size() * 2);
    rt_act *d_dk = (rt_act *)rt_alloc(dk.size() * 2), *d_dv = (rt_act *)rt_alloc(dv.size() * 2);
    float *d_lse = (float *)rt_alloc(lse.size() * 4);
    rt_attention_v_fwd(d_o, d_lse, d_q, d_k, d_v, B, S, H, KVH, D, Dv, true, 0);
    cpu_rt_attention_v_fwd(o.data(), lse.data(), q.data(), k.data(), v.data(), B, S, H, KVH, D, Dv, true, 0);
    report("attention_v_fwd o (D 16, Dv 12)", hact(d_o, (int64_t)o.size()), o, TOL_BF16);
    rt_attention_v_bwd(d_dq, d_dk, d_dv, d_q, d_k, d_v, d_o, d_lse, d_do, B, S, H, KVH, D, Dv, true, 0);
    cpu_rt_attention_v_bwd(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(), lse.data(),
                           dout.data(), B, S, H, KVH, D, Dv, true, 0);
    report("attention_v_bwd dq", hact(d_dq, (int64_t)dq.size()), dq, TOL_BF16);
    report("attention_v_bwd dk", hact(d_dk, (int64_t)dk.size()), dk, TOL_BF16);
    report("attention_v_bwd dv", hact(d_dv, (int64_t)dv.size()), dv, TOL_BF16);
    rt_free(d_q), rt_free(d_k), rt_free(d_v), rt_free(d_do), rt_free(d_o), rt_free(d_dq), rt_free(d_dk);
    rt_free(d_dv), rt_free(d_lse);
}

/* --------------------------------------------------- reductions, softmax */
static void t_reduce_softmax(Rng &r)
{
    for (int acc = 0; acc < 2; acc++) {
        const int64_t rows = 1000, cols = 77;
        auto in = randv(r, rows * cols), out = randv(r, cols);
        rt_act *din = dact(in), *dout = dact(out);
        rt_reduce_rows(dout, din, rows, cols, acc);
        cpu_rt_reduce_rows(out.data(), in.data(), rows, cols, acc);
        report(acc ? "reduce_rows accumulate" : "reduce_rows", hact(dout, cols), out, TOL_BF16);
        auto first = hact(dout, cols);
        if (!acc) {
            rt_reduce_rows(dout, din, rows, cols, false);
            report_bool("reduce_rows repeat", bitwise_eq(first, hact(dout, cols)), "bitwise equal");
        }
        rt_free(din), rt_free(dout);
        auto gout = randv(r, cols);
        din = dact(in);
        float *dg = df32(gout);
        rt_reduce_rows_grad(dg, din, rows, cols, acc);
        cpu_rt_reduce_rows(gout.data(), in.data(), rows, cols, acc);
        report(acc ? "reduce_rows_grad accumulate (fp32)" : "reduce_rows_grad (fp32)", hf32(dg, cols), gout, TOL_F32);
        rt_free(din), rt_free(dg);
    }
    /* gradient adds: fp32 += bf16 contribution, fp32 += fp32 shard */
    {
        const int64_t n = 1001;
        auto acc = randv(r, n), x = randv(r, n), y = randv(r, n, 1e-3f);
        float *dacc = df32(acc), *dy32 = df32(y);
        rt_act *dx = dact(x);
        rt_grad_add(dacc, dx, n);
        rt_grad_sum(dacc, dy32, n);
        for (int64_t i = 0; i < n; i++) acc[(size_t)i] = (acc[(size_t)i] + x[(size_t)i]) + y[(size_t)i];
        report("grad_add + grad_sum (fp32)", hf32(dacc, n), acc, TOL_F32);
        rt_free(dacc), rt_free(dy32), rt_free(dx);
    }
    const int64_t rows = 13, cols = 301;
    auto x = randv(r, rows * cols, 4.0f), dy = randv(r, rows * cols);
    std::vector<float> y((size_t)(rows * cols)), dx((size_t)(rows * cols));
    rt_act *dxx = dact(x), *ddy = dact(dy), *dyy = (rt_act *)rt_alloc(y.size() * 2), *ddx = (rt_act *)rt_alloc(dx.size() * 2);
    rt_softmax_fwd(dyy, dxx, rows, cols);
    cpu_rt_softmax_fwd(y.data(), x.data(), rows, cols);
    report("softmax_fwd", hact(dyy, rows * cols), y, TOL_BF16);
    /* backward from the rounded y both sides see */
    auto yb = hact(dyy, rows * cols);
    rt_softmax_bwd(ddx, dyy, ddy, rows, cols);
    cpu_rt_softmax_bwd(dx.data(), yb.data(), dy.data(), rows, cols);
    report("softmax_bwd", hact(ddx, rows * cols), dx, TOL_BF16);
    rt_free(dxx), rt_free(ddy), rt_free(dyy), rt_free(ddx);
}

/* --------------------------------------------------------- cross-entropy */
/* mtp: multi-token prediction's loss, every fourth row without a target (-1)
 * and a weight of 0.3 (the CPU backend, the reference, is checked against
 * the targets-only rows by tests/runtime/test_kernels.c). */
static void t_cross_entropy_at(Rng &r, int64_t vocab, bool mtp)
{
    const int64_t rows = 29, total = 2 * rows;
    const float weight = mtp ? 0.3f : 1.0f;
    const char *vec = mtp ? (vocab % 8 ? " (rows without target, weight)" : " (vector, rows without target, weight)")
                          : vocab % 8 ? "" : " (vector)";
    char name[128];
    auto logits = randv(r, rows * vocab, 6.0f);
    std::vector<int32_t> tg((size_t)rows);
    for (auto &t : tg) t = (int32_t)r.below(vocab);
    for (size_t i = 3; mtp && i < tg.size(); i += 4) tg[i] = -1;
    std::vector<float> lse((size_t)rows), dl((size_t)(rows * vocab));
    float loss = 0.25f;
    rt_act *dlog = dact(logits), *ddl = (rt_act *)rt_alloc(dl.size() * 2);
    int32_t *dtg = di32(tg);
    float *dloss = df32(std::vector<float>{0.25f}), *dlse = (float *)rt_alloc((size_t)rows * 4);
    rt_cross_entropy_fwd(dloss, dlse, dlog, dtg, rows, vocab, 0, total, weight, NULL);
    cpu_rt_cross_entropy_fwd(&loss, lse.data(), logits.data(), tg.data(), rows, vocab, 0, total, weight, NULL);
    snprintf(name, sizeof name, "cross_entropy_fwd loss (fp32) V=%lld%s", (long long)vocab, vec);
    report(name, hf32(dloss, 1), std::vector<float>{loss}, TOL_F32);
    snprintf(name, sizeof name, "cross_entropy_fwd lse (fp32) V=%lld%s", (long long)vocab, vec);
    report(name, hf32(dlse, rows), lse, TOL_F32);
    rt_cross_entropy_bwd(ddl, dlog, dtg, dlse, 0.5f * weight, rows, vocab, 0, total);
    cpu_rt_cross_entropy_bwd(dl.data(), logits.data(), tg.data(), lse.data(), 0.5f * weight, rows, vocab, 0, total);
    snprintf(name, sizeof name, "cross_entropy_bwd dlogits V=%lld%s", (long long)vocab, vec);
    auto got = hact(ddl, rows * vocab);
    report(name, got, dl, TOL_BF16);
    if (mtp) { /* a row without target takes no gradient: exactly 0, not within a tolerance */
        bool zero = true;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; tg[(size_t)i] < 0 && j < vocab; j++)
                zero &= got[(size_t)(i * vocab + j)] == 0.0f;
        snprintf(name, sizeof name, "cross_entropy_bwd rows without target V=%lld%s", (long long)vocab, vec);
        report_bool(name, zero, "all zero");
    }
    /* In place, as the generated programs call it (ir_grad_in_place). */
    rt_cross_entropy_bwd(dlog, dlog, dtg, dlse, 0.5f * weight, rows, vocab, 0, total);
    snprintf(name, sizeof name, "cross_entropy_bwd dlogits over logits V=%lld%s", (long long)vocab, vec);
    report(name, hact(dlog, rows * vocab), dl, TOL_BF16);
    rt_free(dlog), rt_free(ddl), rt_free(dtg), rt_free(dloss), rt_free(dlse);
}

static void t_cross_entropy(Rng &r)
{
    for (bool mtp : {false, true})
        for (int64_t vocab : {1000, 1003}) /* 16-byte and 2-byte accesses */
            t_cross_entropy_at(r, vocab, mtp);
}

/* ------------------------------------------------------------- optimizer */
static void t_optimizer(Rng &r)
{
    const int64_t n = 100003;
    auto x = randv(r, n);
    float s = 1.5f;
    float *ds = df32(std::vector<float>{1.5f});
    float *dx = df32(x); /* gradients are fp32 */
    rt_sumsq(ds, dx, n);
    cpu_rt_sumsq(&s, x.data(), n);
    report("sumsq (fp32, accumulated)", hf32(ds, 1), std::vector<float>{s}, TOL_F32);
    auto first = hf32(ds, 1);
    rt_to_device(ds, std::vector<float>{1.5f}.data(), 4);
    rt_sumsq(ds, dx, n);
    report_bool("sumsq repeat", bitwise_eq(first, hf32(ds, 1)), "bitwise equal");
    rt_free(ds), rt_free(dx);

    const int64_t m = 10007;
    auto master = randv(r, m), mom = randv(r, m, 0.01f), var = randv(r, m, 0.01f);
    for (auto &v : var) v = fabsf(v);
    std::vector<float> param((size_t)m);
    float *dmaster = df32(master), *dm = df32(mom), *dv = df32(var);
    rt_act *dparam = (rt_act *)rt_alloc((size_t)m * 2);
    for (int step = 1; step <= 3; step++) {
        auto g = randv(r, m, 0.1f);
        for (auto &v : g) v *= 1.0f + 1.0f / 1024; /* not bf16-representable: fp32 gradients */
        float *dg = df32(g);
        rt_adamw(dmaster, dparam, dg, dm, dv, m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, step);
        cpu_rt_adamw(master.data(), param.data(), g.data(), mom.data(), var.data(), m, 1e-3f, 0.9f, 0.95f, 1e-8f,
                     0.1f, 0.5f, step);
        rt_free(dg);
    }
    report("adamw master (fp32, 3 steps)", hf32(dmaster, m), master, TOL_F32);
    report("adamw m (fp32)", hf32(dm, m), mom, TOL_F32);
    report("adamw v (fp32)", hf32(dv, m), var, TOL_F32);
    report("adamw param (bf16)", hact(dparam, m), param, TOL_BF16);
    rt_free(dmaster), rt_free(dm), rt_free(dv), rt_free(dparam);
}

/* LAMB's two passes (runtime/cuda/lamb.cu) against the CPU backend's on
 * one tensor of 10007 elements (not a multiple of any block) for 3 steps:
 * the per-tensor sums, then each backend's own trust ratio from its own
 * sums, so a wrong sum shows in the weights too. */
static void t_lamb(Rng &r)
{
    const int64_t m = 10007;
    auto master = randv(r, m), mom = randv(r, m, 0.01f), var = randv(r, m, 0.01f);
    for (auto &v : var) v = fabsf(v);
    std::vector<float> param((size_t)m);
    float *dmaster = df32(master), *dm = df32(mom), *dv = df32(var);
    float *dsums = df32(std::vector<float>{0.25f, 0.5f});
    rt_act *dparam = (rt_act *)rt_alloc((size_t)m * 2);
    const auto start = master;
    float sums[2] = {0.25f, 0.5f}; /* prepare adds to what is there */
    for (int step = 1; step <= 3; step++) {
        auto g = randv(r, m, 0.1f);
        for (auto &v : g) v *= 1.0f + 1.0f / 1024;
        float *dg = df32(g);
        rt_lamb_prepare(dsums, dmaster, dg, dm, dv, m, 0.9f, 0.999f, 1e-6f, 0.01f, 0.5f, step);
        cpu_rt_lamb_prepare(sums, master.data(), g.data(), mom.data(), var.data(), m, 0.9f, 0.999f, 1e-6f, 0.01f,
                            0.5f, step);
        auto hs = hf32(dsums, 2);
        char name[64];
        snprintf(name, sizeof name, "lamb sums ||w||^2, ||r||^2 (step %d)", step);
        report(name, hs, std::vector<float>{sums[0], sums[1]}, TOL_F32);
        /* phi_max 1: below this tensor's weight norm, so phi clips it. */
        float tg = (float)rt_lamb_trust(hs[0], hs[1], 1.0), tc = (float)cpu_rt_lamb_trust(sums[0], sums[1], 1.0);
        /* lr 0.1: the three steps move the master by several percent of its
         * scale (measured 4.5e-2), far above the tolerance, so a missing or
         * wrong update shows. */
        rt_lamb_apply(dmaster, dparam, dm, dv, m, 0.1f, 0.9f, 0.999f, 1e-6f, 0.01f, tg, step);
        cpu_rt_lamb_apply(master.data(), param.data(), mom.data(), var.data(), m, 0.1f, 0.9f, 0.999f, 1e-6f, 0.01f,
                          tc, step);
        rt_free(dg);
    }
    double moved = rel_err(master, start);
    char what[64];
    snprintf(what, sizeof what, "moved %.2e of its scale", moved);
    report_bool("lamb master moved (3 steps)", moved > 100 * TOL_F32, what);
    report("lamb master (fp32, 3 steps)", hf32(dmaster, m), master, TOL_F32);
    report("lamb m (fp32)", hf32(dm, m), mom, TOL_F32);
    report("lamb v (fp32)", hf32(dv, m), var, TOL_F32);
    report("lamb param (bf16)", hact(dparam, m), param, TOL_BF16);
    rt_free(dmaster), rt_free(dm), rt_free(dv), rt_free(dparam), rt_free(dsums);
}

/* ------------------------------------------------- slices, dim helpers (p = 1) */
static void t_dims(Rng &r)
{
    const int64_t outer = 3, parts = 4, dl = 5, inner = 6, n = outer * parts * dl * inner;
    auto x = randv(r, n);
    rt_act *dx = dact(x), *dout = (rt_act *)rt_alloc((size_t)n * 2), *scr = (rt_act *)rt_alloc((size_t)n * 2);
    for (int idx = 0; idx < parts; idx++) {
        std::vector<float> want((size_t)(outer * dl * inner)), got;
        cpu_rt_slice_dim(want.data(), x.data(), outer, dl, inner, (int)parts, idx);
        rt_slice_dim(dout, dx, outer, dl, inner, (int)parts, idx);
        got = hact(dout, outer * dl * inner);
        char name[64];
        snprintf(name, sizeof name, "slice_dim block %d of %lld", idx, (long long)parts);
        report(name, got, want, TOL_BF16);
    }
    /* On one rank the collectives along a dim are copies. */
    RtComm *w = rt_comm_world();
    rt_allgather_dim(w, dout, dx, outer, parts * dl, inner, scr);
    report("allgather_dim (1 rank)", hact(dout, n), x, TOL_BF16);
    rt_reduce_scatter_dim(w, dout, dx, outer, parts * dl, inner, scr);
    report("reduce_scatter_dim (1 rank)", hact(dout, n), x, TOL_BF16);
    rt_alltoall_dim(w, dout, dx, outer, parts, dl, inner, 1, true, scr);
    report("alltoall_dim (1 rank)", hact(dout, n), x, TOL_BF16);
    rt_free(dx), rt_free(dout), rt_free(scr);
}

/* ------------------------------------------------------------ determinism */
[[maybe_unused]] static void t_determinism(Rng &r)
{
    const int64_t n = 4096, vl = 512, dim = 128, rows = 2048, cols = 1024;
    std::vector<int32_t> ids((size_t)n);
    for (auto &i : ids) i = (int32_t)r.below(64); /* many repeats */
    auto dout = randv(r, n * dim), x = randv(r, rows * cols), w = randv(r, cols), dy = randv(r, rows * cols);
    int32_t *dids = di32(ids);
    rt_act *ddo = dact(dout);
    float *dt = (float *)rt_alloc((size_t)(vl * dim) * 4);
    std::vector<float> t1;
    for (int rep = 0; rep < 2; rep++) {
        rt_zero(dt, (size_t)(vl * dim) * 4);
        rt_embedding_bwd(dt, dids, ddo, n, vl, 0, dim);
        auto t = hf32(dt, vl * dim);
        if (rep) report_bool("embedding_bwd repeat (4096 tokens)", bitwise_eq(t, t1), "bitwise equal");
        t1 = t;
    }
    rt_act *dx = dact(x), *dw = dact(w), *ddy = dact(dy), *ddx = (rt_act *)rt_alloc((size_t)(rows * cols) * 2);
    float *ddw = (float *)rt_alloc((size_t)cols * 4);
    rt_act *dyy = (rt_act *)rt_alloc((size_t)(rows * cols) * 2);
    float *drstd = (float *)rt_alloc((size_t)rows * 4);
    rt_rmsnorm_fwd(dyy, drstd, dx, dw, rows, cols, 1e-6f);
    for (int rep = 0; rep < 2; rep++) {
        rt_zero(ddw, (size_t)cols * 4);
        rt_rmsnorm_bwd(ddx, ddw, dx, dw, drstd, ddy, NULL, rows, cols);
        auto t = hf32(ddw, cols);
        if (rep) report_bool("rmsnorm_bwd dw repeat (2048 rows)", bitwise_eq(t, t1), "bitwise equal");
        t1 = t;
    }
    rt_free(dids), rt_free(ddo), rt_free(dt), rt_free(dx), rt_free(dw), rt_free(ddy), rt_free(ddx), rt_free(ddw);
    rt_free(dyy), rt_free(drstd);
}

static int run_kernel_tests(uint64_t seed)
{
    Rng r(seed);
    t_matmul(r);
    t_matmul_batch(r);
    t_embedding(r);
    t_rmsnorm(r);
    t_layernorm(r);
    t_rope(r);
    run_attention_tests(r);
    t_pointwise(r);
    t_slice_concat(r);
    t_mamba(r);
    t_reduce_softmax(r);
    t_cross_entropy(r);
    t_optimizer(r);
    t_lamb(r);
    t_dims(r);
    run_fp8_tests(r);
#ifndef PTDC_CUDA_EMU
    t_determinism(r); /* the emulator runs sequentially: trivially repeatable */
#endif
    return g_failures;
}

/* Must abort with a message naming the bad id. */
static void die_embed(void)
{
    std::vector<int32_t> ids = {1, -7, 2};
    int32_t *d = di32(ids);
    rt_act *t = dact(std::vector<float>(40, 1.0f)), *o = (rt_act *)rt_alloc(3 * 4 * 2);
    rt_embedding_fwd(o, d, t, 3, 10, 0, 4);
    hact(o, 12); /* synchronises: the device error must fire here */
    fprintf(stderr, "die-embed: no error reported\n");
}

/* Must abort: a target no vocabulary rank owns (here: past the vocabulary). */
static void die_target(void)
{
    std::vector<int32_t> tg = {3, 10};
    int32_t *d = di32(tg);
    rt_act *lg = dact(std::vector<float>(20, 0.5f));
    float *loss = df32(std::vector<float>{0.0f}), *lse = (float *)rt_alloc(8);
    rt_cross_entropy_fwd(loss, lse, lg, d, 2, 10, 0, 2, 1.0f, NULL);
    hf32(loss, 1);
    fprintf(stderr, "die-target: no error reported\n");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "kernels";
    if (!strcmp(mode, "--count")) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            printf("0 (%s)\n", cudaGetErrorString(e));
            return 0;
        }
        printf("%d\n", n);
        return 0;
    }
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : (uint64_t)time(NULL);
    rt_init(&argc, &argv);
    g_print = rt_world_rank() == 0;
    int fails = 0;
    if (!strcmp(mode, "kernels")) {
        if (g_print) printf("seed %llu\n", (unsigned long long)seed);
        fails = run_kernel_tests(seed);
    } else if (!strcmp(mode, "comm")) {
        if (g_print) printf("seed %llu, %d ranks\n", (unsigned long long)seed, rt_world_size());
        fails = run_comm_tests(seed);
    } else if (!strcmp(mode, "attention")) {
        if (g_print) printf("seed %llu\n", (unsigned long long)seed);
        Rng r(seed);
        run_attention_tests(r);
        fails = g_failures;
    } else if (!strcmp(mode, "fp8")) {
        if (g_print) printf("seed %llu\n", (unsigned long long)seed);
        Rng r(seed);
        run_fp8_tests(r);
        fails = g_failures;
    } else if (!strcmp(mode, "attention-pos")) {
        if (g_print) printf("seed %llu\n", (unsigned long long)seed);
        Rng r(seed);
        run_attention_pos_tests(r);
        fails = g_failures;
    } else if (!strcmp(mode, "cross-entropy")) { /* t_cross_entropy alone (also in "kernels") */
        if (g_print) printf("seed %llu\n", (unsigned long long)seed);
        Rng r(seed);
        t_cross_entropy(r);
        fails = g_failures;
    } else if (!strcmp(mode, "slice")) { /* t_slice_concat alone (also in "kernels") */
        if (g_print) printf("seed %llu\n", (unsigned long long)seed);
        Rng r(seed);
        t_slice_concat(r);
        fails = g_failures;
    } else if (!strcmp(mode, "mamba")) { /* t_mamba alone (also in "kernels") */
        if (g_print) printf("seed %llu\n", (unsigned long long)seed);
        Rng r(seed);
        t_mamba(r);
        fails = g_failures;
    } else if (!strcmp(mode, "fallback")) {
        fails = run_fallback_tests(seed);
    } else if (!strcmp(mode, "banks")) {
        fails = run_bank_tests(seed);
    } else if (!strcmp(mode, "die-embed")) {
        die_embed();
        fails = 1;
    } else if (!strcmp(mode, "die-target")) {
        die_target();
        fails = 1;
    } else if (!strcmp(mode, "hang")) {
        fails = run_hang_test();
    } else if (!strcmp(mode, "wd-race")) {
        fails = run_wd_race_test();
    } else if (!strcmp(mode, "pp-profile")) {
        fails = run_pp_profile_test(seed);
    } else if (!strcmp(mode, "alloc-order")) {
        fails = run_alloc_order_test(seed);
    } else if (!strcmp(mode, "emu-streams")) {
        fails = run_emu_streams_test();
    } else if (!strcmp(mode, "mismatch") || !strcmp(mode, "mismatch-time")) {
        fails = run_mismatch_test(!strcmp(mode, "mismatch-time"));
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        fails = 1;
    }
    if (g_print) printf("%s: %d failure(s)\n", mode, fails);
    rt_finalize();
    return fails ? 1 : 0;
}
