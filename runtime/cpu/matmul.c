/* matmul.c: C = op(A) op(B) (+ C) by OpenBLAS sgemm (row-major).
 *
 * Threads: the rank's OpenMP team splits C into as many blocks of rows (or
 * of columns, whichever dimension is longer) as it has threads, and each
 * thread runs a single-threaded sgemm on its block. OpenBLAS's own thread
 * pool stays unused: two pools on the same cores (libgomp's workers spinning
 * after a kernel, OpenBLAS's yielding after a GEMM) took 30% of a step. An
 * element of C is a sum over K in sgemm's own order whatever the block, so
 * a thread count gives the same bits run to run. A user who sets
 * OPENBLAS_NUM_THREADS gets OpenBLAS's threading instead (threads.c). */
#include <cblas.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/common.h"
#include "cpu.h"
#include "simd.h"

/* Below this many multiply-adds a GEMM runs on one thread. */
#define PAR_GEMM_MIN (1 << 21)

static void sgemm(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
                  bool ta, bool tb, bool accumulate, int64_t lda, int64_t ldb, int64_t ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)M, (blasint)N, (blasint)K, 1.0f, a, (blasint)lda, b, (blasint)ldb,
                accumulate ? 1.0f : 0.0f, c, (blasint)ldc);
}

void rt_matmul(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
               bool ta, bool tb, bool accumulate)
{
    if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX)
        rt_fatal("rt_matmul: sizes M=%lld N=%lld K=%lld outside BLAS's int range", (long long)M,
                 (long long)N, (long long)K);
    if (M == 0 || N == 0)
        return;
    if (K == 0) { /* an empty sum: not every BLAS applies beta then */
        if (!accumulate)
            rt_zero(c, (size_t)(M * N) * sizeof *c);
        return;
    }
    /* Leading dims of the stored row-major arrays. */
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    int parts = rtcpu_gemm_threads();
    if (parts <= 1 || (double)M * (double)N * (double)K < PAR_GEMM_MIN) {
        sgemm(c, a, b, M, N, K, ta, tb, accumulate, lda, ldb, N);
        return;
    }
    /* Blocks of rows of C (rows of op(A)) or of columns (columns of op(B)),
     * multiples of 16 (the kernels' register tiles) where the sizes allow. */
    bool rows = M >= N;
    int64_t len = rows ? M : N, step = (len + parts - 1) / parts;
    step = (step + 15) / 16 * 16;
    int64_t nblk = (len + step - 1) / step;
    RTCPU_PRAGMA(omp parallel for schedule(static))
    for (int64_t p = 0; p < nblk; p++) {
        int64_t lo = p * step, n = len - lo < step ? len - lo : step;
        if (rows)
            sgemm(c + lo * N, ta ? a + lo : a + lo * K, b, n, N, K, ta, tb, accumulate, lda, ldb, N);
        else
            sgemm(c + lo, a, tb ? b + lo * K : b + lo, M, n, K, ta, tb, accumulate, lda, ldb, N);
    }
}

/* On CPU gradients are float like everything else. */
void rt_matmul_grad(rt_grad *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
                    bool ta, bool tb, bool accumulate)
{
    rt_matmul(c, a, b, M, N, K, ta, tb, accumulate);
}

/* On CUDA the GEMMs of a batch run together, so a C overlapping another
 * GEMM's operands would give other results there than here: stop on either
 * backend (rtc_check_batch). */
static void check_batch(const char *fn, int count, float *const c[], const float *const a[],
                        const float *const b[], int64_t M, int64_t N, int64_t K)
{
    if (M <= 0 || N <= 0 || K < 0) { /* nothing written, or rt_matmul rejects the sizes */
        rtc_check_batch(fn, count, (void *const *)c, 0, (const void *const *)a, 0, (const void *const *)b, 0);
        return;
    }
    rtc_check_batch(fn, count, (void *const *)c, (size_t)(M * N) * sizeof(float), (const void *const *)a,
                    (size_t)(M * K) * sizeof(float), (const void *const *)b, (size_t)(K * N) * sizeof(float));
}

/* One after the other: bitwise the separate calls. */
void rt_matmul_batch(int count, rt_act *const c[], const rt_act *const a[], const rt_act *const b[],
                     int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool accumulate)
{
    check_batch("rt_matmul_batch", count, c, a, b, M, N, K);
    for (int i = 0; i < count; i++)
        rt_matmul(c[i], a[i], b[i], M, N, K, ta, tb, accumulate);
}

void rt_matmul_grad_batch(int count, rt_grad *const c[], const rt_act *const a[],
                          const rt_act *const b[], int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                          bool accumulate)
{
    check_batch("rt_matmul_grad_batch", count, c, a, b, M, N, K);
    for (int i = 0; i < count; i++)
        rt_matmul_grad(c[i], a[i], b[i], M, N, K, ta, tb, accumulate);
}
