/* emu_lt.cpp: the cuBLASLt calls of rt_matmul_fp8 (fp8_matmul.cu) on the
 * host, for the SIMT emulator (emu.h). cublasLtMatmul follows cuBLASLt's
 * column-major definition literally, D = alpha * scale_a * scale_b *
 * op(A) op(B) + beta * C, for the one combination FP8 GEMMs use (FP8 A and
 * B, bf16 C and D, fp32 compute and scales), with FP8 values decoded by
 * cuda_fp8.h's own conversion: so rt_matmul_fp8's TN mapping, shapes and
 * leading dimensions and its descriptors are checked against the definition
 * (the two scales only as their product, which is all D depends on), and
 * the harness compares the result with the CPU backend. Anything else is
 * CUBLAS_STATUS_NOT_SUPPORTED. */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "emu_sched.h"

#include <stdlib.h>
#include <string.h>

namespace {
/* What the stand-in keeps in the descriptors' opaque words. */
struct Desc {
    cublasComputeType_t compute;
    cudaDataType_t scale_type;
    cublasOperation_t ta, tb;
    const float *sa, *sb;
};
struct Layout {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
};
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t), "Desc fits");
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "Layout fits");

int lt_token;

/* Element (i, j) of op(X) for a column-major X. */
float fp8_at(const Layout &l, const void *p, cublasOperation_t op, uint64_t i, uint64_t j)
{
    uint64_t r = op == CUBLAS_OP_N ? i : j, c = op == CUBLAS_OP_N ? j : i;
    __nv_fp8_storage_t v = ((const uint8_t *)p)[r + c * (uint64_t)l.ld];
    __half_raw h = __nv_cvt_fp8_to_halfraw(v, l.type == CUDA_R_8F_E4M3 ? __NV_E4M3 : __NV_E5M2);
    return __half2float(__half(h));
}
} // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = (cublasLtHandle_t)&lt_token;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale)
{
    *d = (cublasLtMatmulDesc_t)calloc(1, sizeof(cublasLtMatmulDescOpaque_t));
    Desc *x = (Desc *)*d;
    x->compute = compute, x->scale_type = scale, x->ta = x->tb = CUBLAS_OP_N;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size)
{
    Desc *x = (Desc *)d;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
        if (size != sizeof x->ta) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&x->ta, buf, size);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_TRANSB:
        if (size != sizeof x->tb) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&x->tb, buf, size);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
        if (size != sizeof x->sa) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&x->sa, buf, size);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
        if (size != sizeof x->sb) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&x->sb, buf, size);
        return CUBLAS_STATUS_SUCCESS;
    default:
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld)
{
    if (ld < (int64_t)rows || ld < 1) return CUBLAS_STATUS_INVALID_VALUE;
    *l = (cublasLtMatrixLayout_t)calloc(1, sizeof(cublasLtMatrixLayoutOpaque_t));
    *(Layout *)*l = Layout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = (cublasLtMatmulPreference_t)calloc(1, sizeof(cublasLtMatmulPreferenceOpaque_t));
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void *, size_t)
{
    return CUBLAS_STATUS_SUCCESS;
}

/* Real cuBLASLt's FP8 rules: TN only, and not E5M2 x E5M2. */
static bool fp8_ok(const Desc *x, const Layout *a, const Layout *b, const Layout *c, const Layout *d)
{
    bool fa = a->type == CUDA_R_8F_E4M3 || a->type == CUDA_R_8F_E5M2;
    bool fb = b->type == CUDA_R_8F_E4M3 || b->type == CUDA_R_8F_E5M2;
    return fa && fb && !(a->type == CUDA_R_8F_E5M2 && b->type == CUDA_R_8F_E5M2) && x->ta == CUBLAS_OP_T &&
           x->tb == CUBLAS_OP_N && x->compute == CUBLAS_COMPUTE_32F && x->scale_type == CUDA_R_32F &&
           c->type == CUDA_R_16BF && d->type == CUDA_R_16BF && a->ld % 16 == 0 && b->ld % 16 == 0;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t *res, int *found)
{
    *found = 0;
    if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    if (fp8_ok((Desc *)d, (Layout *)a, (Layout *)b, (Layout *)c, (Layout *)dd)) {
        memset(res, 0, sizeof *res);
        res->state = CUBLAS_STATUS_SUCCESS;
        *found = 1;
    }
    return *found ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

/* Queued on the stream: the descriptors and alpha, beta copied now (the
 * caller may change them once the call returns), the scales (device
 * pointers) read when it runs. */
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t adesc, const void *B, cublasLtMatrixLayout_t bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t cdesc, void *D,
                              cublasLtMatrixLayout_t ddesc, const cublasLtMatmulAlgo_t *, void *, size_t,
                              cudaStream_t stream)
{
    const Desc x = *(const Desc *)desc;
    const Layout la = *(const Layout *)adesc, lb = *(const Layout *)bdesc, lc = *(const Layout *)cdesc,
                 ld = *(const Layout *)ddesc;
    if (!fp8_ok(&x, &la, &lb, &lc, &ld)) return CUBLAS_STATUS_NOT_SUPPORTED;
    /* op(A) is m x k, op(B) k x n, C and D m x n. */
    uint64_t m = x.ta == CUBLAS_OP_N ? la.rows : la.cols, k = x.ta == CUBLAS_OP_N ? la.cols : la.rows;
    uint64_t kb = x.tb == CUBLAS_OP_N ? lb.rows : lb.cols, n = x.tb == CUBLAS_OP_N ? lb.cols : lb.rows;
    if (kb != k || lc.rows != m || lc.cols != n || ld.rows != m || ld.cols != n)
        return CUBLAS_STATUS_INVALID_VALUE;
    float al = *(const float *)alpha, be = *(const float *)beta;
    emu::submit(stream, "cublasLtMatmul", [=]() {
        float s = al * (x.sa ? *x.sa : 1.0f) * (x.sb ? *x.sb : 1.0f);
        const __nv_bfloat16 *c = (const __nv_bfloat16 *)C;
        __nv_bfloat16 *dst = (__nv_bfloat16 *)D;
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t i = 0; i < m; i++) {
                float acc = 0.0f;
                for (uint64_t p = 0; p < k; p++) acc += fp8_at(la, A, x.ta, i, p) * fp8_at(lb, B, x.tb, p, j);
                float old = be != 0.0f ? __bfloat162float(c[i + j * lc.ld]) : 0.0f;
                dst[i + j * ld.ld] = __float2bfloat16(s * acc + be * old);
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
