/* matmul.cu: rt_matmul through cublasGemmEx (bf16 in and out, fp32 compute).
 *
 * cuBLAS is column-major. A row-major [R, C] matrix is, read column-major, its
 * transpose [C, R] with leading dimension C. So row-major C = op(A) op(B) is
 * column-major C^T = op(B)^T op(A)^T, and:
 *   op(B)^T: B stored [K,N] (tb false) reads as B^T, used as is (OP_N, ld N);
 *            B stored [N,K] (tb true) reads as B^T = op(B), transpose it (OP_T, ld K);
 *   op(A)^T: A stored [M,K] (ta false) reads as A^T (OP_N, ld K);
 *            A stored [K,M] (ta true) reads as A^T = op(A) (OP_T, ld M);
 *   C^T [N, M] column-major with ld N is C [M, N] row-major.
 * accumulate sets beta = 1 (C read in bf16, summed in fp32, rounded once). */
#include "cu.h"

void rt_matmul(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K, bool ta,
               bool tb, bool accumulate)
{
    rtcu_require_init("rt_matmul");
    if (M < 0 || N < 0 || K < 0) rt_fatal("rt_matmul: negative size %lld x %lld x %lld", (long long)M, (long long)N, (long long)K);
    if (M == 0 || N == 0) return;
    size_t es = sizeof(rt_act);
    rtcu_deps({{c, (size_t)(M * N) * es}, {a, (size_t)(M * K) * es}, {b, (size_t)(K * N) * es}});
    if (K == 0) { /* empty sum: C = 0 (+ C) */
        if (!accumulate) CUDA_CHECK(cudaMemsetAsync(c, 0, (size_t)(M * N) * es, rtcu.compute));
        return;
    }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    CUBLAS_CHECK(cublasGemmEx_64(rtcu.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 N, M, K, &alpha, b, CUDA_R_16BF, tb ? K : N, a, CUDA_R_16BF, ta ? M : K,
                                 &beta, c, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
