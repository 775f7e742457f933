/* matmul.cu: rt_matmul through cublasGemmEx (bf16 in and out, fp32 compute)
 * and rt_matmul_grad (bf16 in, fp32 out); their batches (rt_matmul_batch,
 * rt_matmul_grad_batch) through one cublasGemmBatchedEx.
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
#include "common/common.h"
#include "cu.h"

/* Slots of rtcu.gemm_ptrs: cuBLAS's A (our B), its B (our A), C. */
enum { PTRS_B = 0, PTRS_A = RT_MATMUL_BATCH_MAX, PTRS_C = 2 * RT_MATMUL_BATCH_MAX };

struct GemmPtrs {
    void *p[3 * RT_MATMUL_BATCH_MAX];
};

/* cuBLAS's batched GEMM reads its pointer arrays from device memory: one
 * thread per slot copies them there from the kernel's arguments, which the
 * launch captures (no host buffer to keep alive until the copy runs). */
static __global__ void k_gemm_ptrs(void **out, GemmPtrs ptrs)
{
    out[threadIdx.x] = ptrs.p[threadIdx.x];
}

/* count GEMMs of one shape, C of type T (bf16 activations, fp32 gradients,
 * cuBLAS type ct) from bf16 A and B: one cublasGemmEx for a single GEMM, one
 * cublasGemmBatchedEx for several. */
template <class T>
static void gemm(const char *fn, int count, T *const c[], cudaDataType_t ct, const rt_act *const a[],
                 const rt_act *const b[], int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool accumulate)
{
    rtcu_require_init(fn);
    if (M < 0 || N < 0 || K < 0) rt_fatal("%s: negative size %lld x %lld x %lld", fn, (long long)M, (long long)N, (long long)K);
    size_t cs = (size_t)(M * N) * sizeof(T), as = (size_t)(M * K) * sizeof(rt_act), bs = (size_t)(K * N) * sizeof(rt_act);
    /* The batch's GEMMs run together: a C overlapping another GEMM's
     * operands would race (rt.h forbids it; the CPU backend checks it too). */
    rtc_check_batch(fn, count, (void *const *)c, cs, (const void *const *)a, as, (const void *const *)b, bs);
    if (M == 0 || N == 0) return;
    /* A repeated operand finds nothing left to wait for the second time. */
    for (int i = 0; i < count; i++) rtcu_deps({{c[i], cs}, {a[i], as}, {b[i], bs}});
    if (K == 0) { /* empty sum: C = 0 (+ C) */
        if (!accumulate)
            for (int i = 0; i < count; i++) CUDA_CHECK(cudaMemsetAsync(c[i], 0, cs, rtcu.compute));
        return;
    }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    int64_t ldb = tb ? K : N, lda = ta ? M : K;
    if (count == 1) {
        CUBLAS_CHECK(cublasGemmEx_64(rtcu.blas, opb, opa, N, M, K, &alpha, b[0], CUDA_R_16BF, ldb, a[0], CUDA_R_16BF,
                                     lda, &beta, c[0], ct, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
    }
    GemmPtrs ptrs = {};
    for (int i = 0; i < count; i++) {
        ptrs.p[PTRS_B + i] = const_cast<rt_act *>(b[i]);
        ptrs.p[PTRS_A + i] = const_cast<rt_act *>(a[i]);
        ptrs.p[PTRS_C + i] = c[i];
    }
    /* One array for every batch: the copy and the GEMM that reads it run in
     * order on the compute stream (cuBLAS's handle is bound to it), so the
     * next batch's copy cannot overwrite pointers a GEMM still reads. */
    void **d = rtcu.gemm_ptrs;
    RTCU_LAUNCH(k_gemm_ptrs, 1, 3 * RT_MATMUL_BATCH_MAX, 0)(d, ptrs);
    LAUNCH_CHECK();
    CUBLAS_CHECK(cublasGemmBatchedEx_64(rtcu.blas, opb, opa, N, M, K, &alpha, d + PTRS_B, CUDA_R_16BF, ldb, d + PTRS_A,
                                        CUDA_R_16BF, lda, &beta, d + PTRS_C, ct, N, count, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT));
}

void rt_matmul(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K, bool ta,
               bool tb, bool accumulate)
{
    gemm("rt_matmul", 1, &c, CUDA_R_16BF, &a, &b, M, N, K, ta, tb, accumulate);
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
    gemm("rt_matmul_grad", 1, &c, CUDA_R_32F, &a, &b, M, N, K, ta, tb, accumulate);
}

void rt_matmul_batch(int count, rt_act *const c[], const rt_act *const a[], const rt_act *const b[], int64_t M,
                     int64_t N, int64_t K, bool ta, bool tb, bool accumulate)
{
    gemm("rt_matmul_batch", count, c, CUDA_R_16BF, a, b, M, N, K, ta, tb, accumulate);
}

void rt_matmul_grad_batch(int count, rt_grad *const c[], const rt_act *const a[], const rt_act *const b[],
                          int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool accumulate)
{
    gemm("rt_matmul_grad_batch", count, c, CUDA_R_32F, a, b, M, N, K, ta, tb, accumulate);
}
