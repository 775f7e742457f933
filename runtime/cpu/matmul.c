/* matmul.c: C = op(A) op(B) (+ C) by OpenBLAS sgemm (row-major). */
#include <cblas.h>
#include <limits.h>

#include "cpu.h"

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
    blasint lda = (blasint)(ta ? M : K), ldb = (blasint)(tb ? K : N);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)M, (blasint)N, (blasint)K, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f,
                c, (blasint)N);
}

/* On CPU gradients are float like everything else. */
void rt_matmul_grad(rt_grad *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
                    bool ta, bool tb, bool accumulate)
{
    rt_matmul(c, a, b, M, N, K, ta, tb, accumulate);
}
