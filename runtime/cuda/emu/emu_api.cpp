/* emu_api.cpp: the CUDA runtime, cuBLAS and NCCL calls libptdrt_cuda makes,
 * on the host, for the SIMT emulator (emu.h). Device memory is host memory,
 * streams and events are tokens (everything runs in call order), NCCL runs
 * over MPI (so the collective tests run under mpirun on any machine). cublasGemmEx_64 follows cuBLAS's column-major definition
 * literally, so rt_matmul's row-major mapping is checked against it;
 * cublasGemmBatchedEx_64 runs it per GEMM of the batch. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

static int tok_storage[4];
static void *token(int i) { return &tok_storage[i]; }

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
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int, int prio)
{
    *s = (cudaStream_t)token(prio == 0 ? 0 : 1);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int)
{
    *e = (cudaEvent_t)token(2);
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
static void complete_p2p(void);
/* Waits complete the point-to-point operations issued outside a group (see
 * ncclSend below), as a real stream would have by then. */
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int)
{
    complete_p2p();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t)
{
    complete_p2p();
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n)
{
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void *p)
{
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
cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
cudaError_t cudaFreeAsync(void *p, cudaStream_t) { return cudaFree(p); }
cudaError_t cudaMemGetInfo(size_t *f, size_t *t)
{
    *f = *t = 0;
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n)
{
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { return cudaMemset(p, v, n); }
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind)
{
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t)
{
    return cudaMemcpy(d, s, n, k);
}
cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, enum cudaMemcpyKind,
                              cudaStream_t)
{
    for (size_t r = 0; r < h; r++) memmove((char *)d + r * dp, (const char *)s + r * sp, w);
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
cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t, cublasPointerMode_t) { return CUBLAS_STATUS_SUCCESS; }

/* C (m x n, ldc) = alpha op(A) op(B) + beta C, column-major, bf16 A and B,
 * fp32 compute, C bf16 or fp32 (the two combinations rt_matmul and
 * rt_matmul_grad use). */
cublasStatus_t cublasGemmEx_64(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                               int64_t k, const void *alpha, const void *A, cudaDataType_t at, int64_t lda,
                               const void *Bm, cudaDataType_t bt, int64_t ldb, const void *beta, void *C,
                               cudaDataType_t ct, int64_t ldc, cublasComputeType_t comp, cublasGemmAlgo_t)
{
    if (at != CUDA_R_16BF || bt != CUDA_R_16BF || (ct != CUDA_R_16BF && ct != CUDA_R_32F) ||
        comp != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if ((ta == CUBLAS_OP_N ? lda < m : lda < k) || (tb == CUBLAS_OP_N ? ldb < k : ldb < n) || ldc < m)
        return CUBLAS_STATUS_INVALID_VALUE;
    const __nv_bfloat16 *a = (const __nv_bfloat16 *)A, *b = (const __nv_bfloat16 *)Bm;
    __nv_bfloat16 *c = (__nv_bfloat16 *)C;
    float *cf = (float *)C;
    float al = *(const float *)alpha, be = *(const float *)beta;
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
    return CUBLAS_STATUS_SUCCESS;
}

/* C[i] = alpha op(A[i]) op(B[i]) + beta C[i] for i < batchCount: cuBLAS's
 * definition, the pointer arrays in "device" memory (host memory here),
 * each GEMM the one above. */
cublasStatus_t cublasGemmBatchedEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                                      int64_t n, int64_t k, const void *alpha, const void *const Aarray[],
                                      cudaDataType_t at, int64_t lda, const void *const Barray[], cudaDataType_t bt,
                                      int64_t ldb, const void *beta, void *const Carray[], cudaDataType_t ct,
                                      int64_t ldc, int64_t batchCount, cublasComputeType_t comp,
                                      cublasGemmAlgo_t algo)
{
    if (batchCount < 0) return CUBLAS_STATUS_INVALID_VALUE;
    for (int64_t i = 0; i < batchCount; i++) {
        cublasStatus_t s = cublasGemmEx_64(h, ta, tb, m, n, k, alpha, Aarray[i], at, lda, Barray[i], bt, ldb, beta,
                                           Carray[i], ct, ldc, comp, algo);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ NCCL */
/* NCCL over MPI on host memory, with NCCL's semantics: element counts, bf16
 * sums rounded per reduction step, p2p matched in posting order per pair,
 * grouped sends and receives progressing together. */
struct ncclComm {
    MPI_Comm comm;
    int rank, size;
};

static MPI_Datatype mpi_type(ncclDataType_t t)
{
    switch (t) {
    case ncclBfloat16: case ncclFloat16: return MPI_UINT16_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclInt32: return MPI_INT32_T;
    case ncclUint32: return MPI_UINT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclUint64: return MPI_UINT64_T;
    case ncclInt8: return MPI_INT8_T;
    default: return MPI_UINT8_T;
    }
}

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *)
{
    const __nv_bfloat16 *a = (const __nv_bfloat16 *)in;
    __nv_bfloat16 *b = (__nv_bfloat16 *)inout;
    for (int i = 0; i < *len; i++) b[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

static MPI_Op mpi_op(ncclRedOp_t op, ncclDataType_t t)
{
    static MPI_Op bf_sum = MPI_OP_NULL;
    if (t == ncclBfloat16) {
        if (op != ncclSum) {
            fprintf(stderr, "emu: only sums of bf16\n");
            abort();
        }
        if (bf_sum == MPI_OP_NULL) MPI_Op_create(bf16_sum, 1, &bf_sum);
        return bf_sum;
    }
    switch (op) {
    case ncclSum: return MPI_SUM;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    case ncclProd: return MPI_PROD;
    default: fprintf(stderr, "emu: unsupported NCCL op\n"); abort();
    }
}

const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "emulated NCCL error"; }
const char *ncclGetLastError(ncclComm_t) { return ""; }
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t *c, int nranks, ncclUniqueId, int rank)
{
    ncclComm *x = new ncclComm;
    MPI_Comm_dup(MPI_COMM_WORLD, &x->comm);
    MPI_Comm_rank(x->comm, &x->rank);
    MPI_Comm_size(x->comm, &x->size);
    if (x->size != nranks || x->rank != rank) return ncclInvalidUsage;
    *c = x;
    return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t *c, int nranks, ncclUniqueId id, int rank, ncclConfig_t *)
{
    return ncclCommInitRank(c, nranks, id, rank);
}
ncclResult_t ncclCommSplit(ncclComm_t p, int color, int key, ncclComm_t *out, ncclConfig_t *)
{
    MPI_Comm m;
    MPI_Comm_split(p->comm, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &m);
    if (m == MPI_COMM_NULL) {
        *out = NULL;
        return ncclSuccess;
    }
    ncclComm *x = new ncclComm;
    x->comm = m;
    MPI_Comm_rank(m, &x->rank);
    MPI_Comm_size(m, &x->size);
    *out = x;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r)
{
    *r = c->rank;
    return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t c, int *n)
{
    *n = c->size;
    return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *r)
{
    *r = ncclSuccess;
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    MPI_Comm_free(&c->comm);
    delete c;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t)
{
    MPI_Allreduce(s == r ? MPI_IN_PLACE : s, r, (int)n, mpi_type(t), mpi_op(op, t), c->comm);
    return ncclSuccess;
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t)
{
    MPI_Reduce_scatter_block(s, r, (int)n, mpi_type(t), mpi_op(op, t), c->comm);
    return ncclSuccess;
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t)
{
    int es = 0;
    MPI_Type_size(mpi_type(t), &es);
    bool in_place = (const char *)s == (char *)r + (size_t)c->rank * n * (size_t)es; /* NCCL's in-place form */
    MPI_Allgather(in_place ? MPI_IN_PLACE : s, (int)n, mpi_type(t), r, (int)n, mpi_type(t), c->comm);
    return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t)
{
    int es = 0;
    MPI_Type_size(mpi_type(t), &es);
    if (c->rank == root && s != r) memmove(r, s, n * (size_t)es);
    MPI_Bcast(r, (int)n, mpi_type(t), root, c->comm);
    return ncclSuccess;
}

struct P2p {
    bool send;
    void *buf;
    int n;
    MPI_Datatype t;
    int peer;
    MPI_Comm comm;
};
static std::vector<P2p> pending;
static int group_depth;
/* Sends and receives issued outside a group: on a GPU they run on their
 * stream while the host goes on, so here they are MPI requests completed
 * at the next wait on an event or stream. */
static std::vector<MPI_Request> inflight;
static void complete_p2p(void)
{
    if (inflight.empty()) return;
    MPI_Waitall((int)inflight.size(), inflight.data(), MPI_STATUSES_IGNORE);
    inflight.clear();
}
cudaError_t cudaStreamSynchronize(cudaStream_t)
{
    complete_p2p();
    return cudaSuccess;
}
static void flush(void)
{
    std::vector<MPI_Request> rq(pending.size());
    for (size_t i = 0; i < pending.size(); i++) {
        P2p &p = pending[i];
        if (p.send)
            MPI_Isend(p.buf, p.n, p.t, p.peer, 0, p.comm, &rq[i]);
        else
            MPI_Irecv(p.buf, p.n, p.t, p.peer, 0, p.comm, &rq[i]);
    }
    MPI_Waitall((int)rq.size(), rq.data(), MPI_STATUSES_IGNORE);
    pending.clear();
}
ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void)
{
    if (--group_depth == 0) flush();
    return ncclSuccess;
}
static void post_alone(bool send, void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c)
{
    MPI_Request rq;
    if (send)
        MPI_Isend(buf, (int)n, mpi_type(t), peer, 0, c->comm, &rq);
    else
        MPI_Irecv(buf, (int)n, mpi_type(t), peer, 0, c->comm, &rq);
    inflight.push_back(rq);
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t)
{
    if (!group_depth) {
        post_alone(true, (void *)s, n, t, peer, c);
        return ncclSuccess;
    }
    pending.push_back({true, (void *)s, (int)n, mpi_type(t), peer, c->comm});
    return ncclSuccess;
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t)
{
    if (!group_depth) {
        post_alone(false, r, n, t, peer, c);
        return ncclSuccess;
    }
    pending.push_back({false, r, (int)n, mpi_type(t), peer, c->comm});
    return ncclSuccess;
}

} /* extern "C" */
