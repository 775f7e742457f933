/* emu_api.cpp: the CUDA runtime's memory calls and the cuBLAS calls
 * libptdrt_cuda makes, on the host, for the SIMT emulator (emu.h). Device
 * memory is host memory; work on a stream (copies, memsets, GEMMs) is queued
 * there and run by the scheduler (emu_sched.cpp, which also has the stream
 * and event calls); NCCL is emu_nccl.cpp. Copies follow CUDA's rules for
 * pageable host memory: cudaMemcpyAsync from it takes the data at the call,
 * to it returns when the copy is done; with page-locked memory
 * (cudaMallocHost) both are truly asynchronous. cudaMemset and cudaMemcpy
 * are the legacy default stream's (cudaMemset returns at once, cudaMemcpy
 * when done). cublasGemmEx_64 follows cuBLAS's column-major definition
 * literally, so rt_matmul's row-major mapping is checked against it;
 * cublasGemmBatchedEx_64 runs it per GEMM of the batch. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "emu_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <memory>
#include <vector>

static int tok_storage[4];
static void *token(int i) { return &tok_storage[i]; }

/* Page-locked host allocations (cudaMallocHost): start -> bytes. */
static std::map<const char *, size_t> pinned;
static bool is_pinned(const void *p)
{
    auto it = pinned.upper_bound((const char *)p);
    if (it == pinned.begin()) return false;
    --it;
    return (const char *)p < it->first + it->second;
}
static cudaStream_t blas_stream;

extern "C" {

const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error"; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 8; /* one "GPU" per rank of an emulated node */
    return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int dev)
{
    snprintf(id, (size_t)len, "0000:%02x:00.0", dev); /* every rank sees the same 8 */
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int)
{
    /* An sm_90 (FP8 GEMMs run: emu_lt.cpp) with few "SMs": grid-stride
     * loops take several turns. */
    *v = a == cudaDevAttrComputeCapabilityMajor ? 9 : a == cudaDevAttrComputeCapabilityMinor ? 0 : 4;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int *lo, int *hi)
{
    *lo = 0;
    *hi = -1;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    pinned[(const char *)*p] = n ? n : 1;
    return cudaSuccess;
}
/* Synchronises the device first, as CUDA does. */
cudaError_t cudaFreeHost(void *p)
{
    emu::drain_all("cudaFreeHost");
    pinned.erase((const char *)p);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = NULL;
    if (n == 0) return cudaSuccess;
    if (posix_memalign(p, 256, n)) return cudaErrorMemoryAllocation;
    memset(*p, 0xff, n); /* like fresh device memory: not zero */
    return cudaSuccess;
}
/* Synchronises the device first, as CUDA does. */
cudaError_t cudaFree(void *p)
{
    emu::drain_all("cudaFree");
    free(p);
    return cudaSuccess;
}
/* Stream-ordered: usable by work queued on s from now on (the memory is
 * there at once, poisoned), released when s gets to the free. */
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    emu::submit(s, "cudaFreeAsync", [p]() { free(p); });
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *f, size_t *t)
{
    *f = *t = 0;
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    emu::submit(s, "cudaMemset", [=]() { memset(p, v, n); });
    return cudaSuccess;
}
/* On the legacy default stream, asynchronous to the host (device memory). */
cudaError_t cudaMemset(void *p, int v, size_t n) { return cudaMemsetAsync(p, v, n, NULL); }

/* h rows of w bytes (pitches dp, sp); one row: a plain copy. */
static cudaError_t copy2d(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k,
                          cudaStream_t st)
{
    const char *src = (const char *)s;
    std::shared_ptr<std::vector<char>> snap;
    if (k == cudaMemcpyHostToDevice && !is_pinned(s)) { /* pageable: staged at the call */
        snap = std::make_shared<std::vector<char>>(w * h);
        for (size_t r = 0; r < h; r++) memcpy(snap->data() + r * w, src + r * sp, w);
        src = snap->data();
        sp = w;
    }
    uint64_t seq = emu::submit(st, "cudaMemcpy", [=]() {
        for (size_t r = 0; r < h; r++) memmove((char *)d + r * dp, src + r * sp, w);
        (void)snap;
    });
    if (k == cudaMemcpyDeviceToHost && !is_pinned(d)) /* pageable: returns when done */
        emu::drain_dep({emu::stream_of(st), seq}, "cudaMemcpyAsync to pageable host memory");
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
    return copy2d(d, n, s, n, n, 1, k, st);
}
cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k,
                              cudaStream_t st)
{
    return copy2d(d, dp, s, sp, w, h, k, st);
}
/* The legacy default stream, and the host waits for the copy. */
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    copy2d(d, n, s, n, n, 1, k, NULL);
    emu::drain_dep(emu::tail(NULL), "cudaMemcpy");
    return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void *, enum cudaFuncAttribute, int) { return cudaSuccess; }

/* ---------------------------------------------------------------- cuBLAS */
const char *cublasGetStatusString(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? "success" : "emulated cuBLAS error"; }
cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = (cublasHandle_t)token(3);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t s)
{
    blas_stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t, cublasPointerMode_t) { return CUBLAS_STATUS_SUCCESS; }

/* C (m x n, ldc) = alpha op(A) op(B) + beta C, column-major, bf16 A and B,
 * fp32 compute, C bf16 or fp32 (the two combinations rt_matmul and
 * rt_matmul_grad use). */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, float al,
                 const void *A, int64_t lda, const void *Bm, int64_t ldb, float be, void *C, cudaDataType_t ct,
                 int64_t ldc)
{
    const __nv_bfloat16 *a = (const __nv_bfloat16 *)A, *b = (const __nv_bfloat16 *)Bm;
    __nv_bfloat16 *c = (__nv_bfloat16 *)C;
    float *cf = (float *)C;
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) {
            float s = 0.0f;
            for (int64_t p = 0; p < k; p++) {
                float x = __bfloat162float(ta == CUBLAS_OP_N ? a[i + p * lda] : a[p + i * lda]);
                float y = __bfloat162float(tb == CUBLAS_OP_N ? b[p + j * ldb] : b[j + p * ldb]);
                s += x * y;
            }
            if (ct == CUDA_R_32F) {
                float old = be != 0.0f ? cf[i + j * ldc] : 0.0f;
                cf[i + j * ldc] = al * s + be * old;
                continue;
            }
            float old = be != 0.0f ? __bfloat162float(c[i + j * ldc]) : 0.0f;
            c[i + j * ldc] = __float2bfloat16(al * s + be * old);
        }
}

static cublasStatus_t gemm_check(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                                 cudaDataType_t at, int64_t lda, cudaDataType_t bt, int64_t ldb, cudaDataType_t ct,
                                 int64_t ldc, cublasComputeType_t comp)
{
    if (at != CUDA_R_16BF || bt != CUDA_R_16BF || (ct != CUDA_R_16BF && ct != CUDA_R_32F) ||
        comp != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if ((ta == CUBLAS_OP_N ? lda < m : lda < k) || (tb == CUBLAS_OP_N ? ldb < k : ldb < n) || ldc < m)
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

/* Queued on the handle's stream; alpha and beta (host pointers) read now. */
cublasStatus_t cublasGemmEx_64(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                               int64_t k, const void *alpha, const void *A, cudaDataType_t at, int64_t lda,
                               const void *Bm, cudaDataType_t bt, int64_t ldb, const void *beta, void *C,
                               cudaDataType_t ct, int64_t ldc, cublasComputeType_t comp, cublasGemmAlgo_t)
{
    cublasStatus_t st = gemm_check(ta, tb, m, n, k, at, lda, bt, ldb, ct, ldc, comp);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    float al = *(const float *)alpha, be = *(const float *)beta;
    emu::submit(blas_stream, "cublasGemmEx", [=]() { gemm(ta, tb, m, n, k, al, A, lda, Bm, ldb, be, C, ct, ldc); });
    return CUBLAS_STATUS_SUCCESS;
}

/* C[i] = alpha op(A[i]) op(B[i]) + beta C[i] for i < batchCount: cuBLAS's
 * definition, the pointer arrays in "device" memory (host memory here),
 * read when the GEMM runs, each GEMM the one above. */
cublasStatus_t cublasGemmBatchedEx_64(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                                      int64_t n, int64_t k, const void *alpha, const void *const Aarray[],
                                      cudaDataType_t at, int64_t lda, const void *const Barray[], cudaDataType_t bt,
                                      int64_t ldb, const void *beta, void *const Carray[], cudaDataType_t ct,
                                      int64_t ldc, int64_t batchCount, cublasComputeType_t comp, cublasGemmAlgo_t)
{
    if (batchCount < 0) return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t st = gemm_check(ta, tb, m, n, k, at, lda, bt, ldb, ct, ldc, comp);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    float al = *(const float *)alpha, be = *(const float *)beta;
    emu::submit(blas_stream, "cublasGemmBatchedEx", [=]() {
        for (int64_t i = 0; i < batchCount; i++)
            gemm(ta, tb, m, n, k, al, Aarray[i], lda, Barray[i], ldb, be, Carray[i], ct, ldc);
    });
    return CUBLAS_STATUS_SUCCESS;
}

} /* extern "C" */
