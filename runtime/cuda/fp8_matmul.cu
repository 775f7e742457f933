/* fp8_matmul.cu: rt_matmul_fp8 through cuBLASLt (FP8 A and B, bf16 C and
 * D, fp32 compute and scales).
 *
 * cuBLASLt runs FP8 only in its "TN" form: its A transposed, its B not, both
 * column-major with K as the leading dimension. Row-major C[M,N] = A[M,K]
 * B[N,K]^T is column-major C^T[N,M] = B A^T, where our B, stored [N,K], reads
 * column-major as a K x N matrix (its A, op T, ld K) and our A, stored
 * [M,K], as K x M (its B, op N, ld K); D is N x M with ld N. So cuBLASLt's A
 * scale is our b_scale_inv and its B scale our a_scale_inv. It computes
 * D = scale_a * scale_b * sum(a * b) + beta * C in fp32 and rounds D to bf16
 * once; the scales must be device pointers.
 *
 * FP8 tensor cores exist from sm_89 (Ada, Hopper): on older GPUs the call
 * stops with rt_fatal, never a wrong result. CUBLASLT_MATMUL_DESC_FAST_ACCUM
 * stays 0: Hopper's FP8 MMA accumulates at reduced precision and cuBLASLt
 * then promotes partial sums into fp32 at intervals (TE turns fast
 * accumulation on for forward GEMMs only). */
#include <cublasLt.h>

#include "common/common.h"
#include "cu.h"

/* The handle, and two device floats for the scales: written by a kernel
 * from its arguments (ordered on the compute stream before the GEMM reading
 * them, so back-to-back GEMMs cannot see each other's scales). */
static cublasLtHandle_t lt;
static float *lt_scales;
static int lt_cc = -1; /* compute capability * 10 */

static __global__ void k_set_scales(float *s, float a, float b)
{
    s[0] = a;
    s[1] = b;
}

static cudaDataType_t lt_type(RtFp8Format f) { return f == RT_FP8_E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

static void lt_init(void)
{
    if (lt) return;
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, rtcu.device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, rtcu.device));
    lt_cc = major * 10 + minor;
    if (lt_cc < 89) return;
    CUBLAS_CHECK(cublasLtCreate(&lt));
    CUDA_CHECK(cudaMalloc(&lt_scales, 2 * sizeof(float)));
}

void rtcu_fp8_free(void)
{
    if (lt) CUBLAS_CHECK(cublasLtDestroy(lt));
    if (lt_scales) CUDA_CHECK(cudaFree(lt_scales));
    lt = NULL;
    lt_scales = NULL;
    lt_cc = -1;
}

void rt_matmul_fp8(rt_act *c, const uint8_t *a, RtFp8Format fa, float a_scale_inv, const uint8_t *b,
                   RtFp8Format fb, float b_scale_inv, int64_t M, int64_t N, int64_t K, bool accumulate)
{
    const char *fn = "rt_matmul_fp8";
    rtcu_require_init(fn);
    rtc_check_matmul_fp8(fn, fa, fb, M, N, K);
    lt_init();
    if (lt_cc < 89)
        rt_fatal("%s: FP8 GEMMs need an sm_89 or newer GPU (Ada, Hopper); this one is sm_%d", fn, lt_cc);
    if (M == 0 || N == 0) return;
    size_t cs = (size_t)(M * N) * sizeof(rt_act);
    rtcu_deps({{c, cs}, {a, (size_t)(M * K)}, {b, (size_t)(N * K)}});
    if (K == 0) { /* an empty sum: C = 0 (+ C) */
        if (!accumulate) CUDA_CHECK(cudaMemsetAsync(c, 0, cs, rtcu.compute));
        return;
    }
    /* cuBLASLt's A is our B: its scale first. */
    RTCU_LAUNCH(k_set_scales, 1, 1, 0)(lt_scales, b_scale_inv, a_scale_inv);
    LAUNCH_CHECK();

    cublasLtMatmulDesc_t op;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const float *sa = lt_scales, *sb = lt_scales + 1;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
    cublasLtMatrixLayout_t la, lb, lc;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, lt_type(fb), (uint64_t)K, (uint64_t)N, K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, lt_type(fa), (uint64_t)K, (uint64_t)M, K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, (uint64_t)N, (uint64_t)M, N));
    /* The cuBLAS handle's workspace: both run in order on the compute
     * stream, so they never use it at the same time. */
    size_t ws = RTCU_BLAS_WS_BYTES;
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t h = {};
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &h, &found));
    if (found < 1)
        rt_fatal("%s: cuBLASLt has no FP8 algorithm for M=%lld N=%lld K=%lld", fn, (long long)M, (long long)N,
                 (long long)K);
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(lt, op, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &h.algo, rtcu.blas_ws, ws,
                                rtcu.compute));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(op));
}
