/* matmul.cu: rt_matmul through cublasGemmEx (bf16 in and out, fp32 compute)
 * and rt_matmul_grad (bf16 in, fp32 out).
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

/* C of type ct (bf16 activations, fp32 gradients) from bf16 A and B. */
static void gemm(const char *fn, void *c, cudaDataType_t ct, size_t cs, const rt_act *a, const rt_act *b,
                 int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool accumulate)
{
    rtcu_require_init(fn);
    if (M < 0 || N < 0 || K < 0) rt_fatal("%s: negative size %lld x %lld x %lld", fn, (long long)M, (long long)N, (long long)K);
    if (M == 0 || N == 0) return;
    size_t es = sizeof(rt_act);
    rtcu_deps({{c, (size_t)(M * N) * cs}, {a, (size_t)(M * K) * es}, {b, (size_t)(K * N) * es}});
    if (K == 0) { /* empty sum: C = 0 (+ C) */
        if (!accumulate) CUDA_CHECK(cudaMemsetAsync(c, 0, (size_t)(M * N) * cs, rtcu.compute));
        return;
    }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    CUBLAS_CHECK(cublasGemmEx_64(rtcu.blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 N, M, K, &alpha, b, CUDA_R_16BF, tb ? K : N, a, CUDA_R_16BF, ta ? M : K,
                                 &beta, c, ct, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void rt_matmul(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K, bool ta,
               bool tb, bool accumulate)
{
    gemm("rt_matmul", c, CUDA_R_16BF, sizeof(rt_act), a, b, M, N, K, ta, tb, accumulate);
}

/* A weight gradient accumulated over micro-batches: cublasGemmEx takes
 * bf16 A and B with an fp32 C under CUBLAS_COMPUTE_32F (a tensor-core
 * combination of its type table), so the running sum never passes through
 * bf16. Against a bf16 GEMM into a temporary plus an fp32 add, this saves
 * the temporary and a pass over it: C costs 8 bytes per element read and
 * written instead of 4, on a weight-sized C next to activation-sized A and
 * B (for a [4096 x 4096] weight and 4096 tokens per micro-batch, 134 MB of
 * C traffic beside 67 MB of operands and 137 GFLOP: below 2% of the GEMM's
 * time at A100 rates). */
void rt_matmul_grad(rt_grad *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K, bool ta,
                    bool tb, bool accumulate)
{
    gemm("rt_matmul_grad", c, CUDA_R_32F, sizeof(rt_grad), a, b, M, N, K, ta, tb, accumulate);
}
