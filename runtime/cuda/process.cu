/* process.cu: rt_init / rt_finalize, ranks, rt_fatal, rt_time for CUDA.
 *
 * rt_init: MPI (MPI_THREAD_MULTIPLE requested so the watchdog thread may call
 * MPI_Abort), the GPU chosen by the node-local rank (MPI_COMM_TYPE_SHARED),
 * one compute stream (each communicator gets its own, comm.cu), cuBLAS
 * bound to the compute stream with a fixed workspace (deterministic GEMMs),
 * the NCCL world communicator from a unique id broadcast over MPI, and the
 * watchdog. */
#include "cu.h"
#include "common/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

RtcuState rtcu;


static bool mpi_up(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

void rt_fatal(const char *fmt, ...)
{
    static volatile int in_fatal;
    char prefix[48] = "ptdc: ";
    if (rtcu.size > 1) snprintf(prefix, sizeof prefix, "ptdc: rank %d: ", rtcu.rank);
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    rtc_vwrite_line(2, prefix, fmt, ap); /* one write(): lines of ranks never run together */
    va_end(ap);
    if (!in_fatal) { /* an error while aborting must not recurse */
        in_fatal = 1;
        if (mpi_up()) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    _exit(1);
}

void rtcu_fail(const char *file, int line, const char *lib, const char *msg, const char *call)
{
    if (lib[0] == 'N') { /* NCCL: its last-error text says which peer or transport */
        const char *detail = ncclGetLastError(NULL);
        if (detail && detail[0])
            rt_fatal("%s:%d: %s: %s: %s (in %s)", file, line, lib, msg, detail, call);
    }
    rt_fatal("%s:%d: %s: %s (in %s)", file, line, lib, msg, call);
}

void rtcu_require_init(const char *fn)
{
    if (!rtcu.initialized) rt_fatal("%s called before rt_init", fn);
}

void rtcu_check_grid(const char *fn, int64_t x, int64_t y, int64_t z)
{
    if (x > 2147483647LL || y > 65535 || z > 65535)
        rt_fatal("%s: problem too large for one launch (grid %lld x %lld x %lld)", fn,
                 (long long)x, (long long)y, (long long)z);
}

void rtcu_check_dev_err(void)
{
    if (!rtcu.dev_err) return;
    RtcuDevErr e;
    CUDA_SYNC_CHECK(cudaMemcpy(&e, rtcu.dev_err, sizeof e, cudaMemcpyDeviceToHost));
    switch (e.code) {
    case RTCU_ERR_NONE: return;
    case RTCU_ERR_EMBED_ID:
        rt_fatal("rt_embedding: token id %lld at position %lld is out of range", e.value, e.index);
    case RTCU_ERR_TARGET:
        rt_fatal("rt_cross_entropy: target %lld of row %lld is out of range (not owned by exactly one vocabulary rank)",
                 e.value, e.index);
    default: rt_fatal("device error code %d (value %lld, index %lld)", e.code, e.value, e.index);
    }
}

void rt_init(int *argc, char ***argv)
{
    if (rtcu.initialized) rt_fatal("rt_init called twice");
    int inited = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
            fprintf(stderr, "ptdc: MPI_Init_thread failed\n");
            exit(1);
        }
    } else {
        MPI_Query_thread(&provided);
    }
    rtcu.mpi_multiple = provided >= MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(MPI_COMM_WORLD, &rtcu.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rtcu.size);

    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rtcu.rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &rtcu.local_rank);
    MPI_Comm_size(node, &rtcu.local_size);

    /* Which GPU: ranks compare the PCI bus ids they see (devpick.c), so
     * per-rank binding (srun --gpus-per-task, CUDA_VISIBLE_DEVICES per rank)
     * works as well as every rank seeing the whole node. */
    enum { MAXVIS = 16 };
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess) ndev = 0;
    char mine[MAXVIS * RTC_DEVID_LEN];
    memset(mine, 0, sizeof mine);
    int nmine = ndev < MAXVIS ? ndev : MAXVIS;
    for (int k = 0; k < nmine; k++)
        CUDA_CHECK(cudaDeviceGetPCIBusId(mine + (size_t)k * RTC_DEVID_LEN, RTC_DEVID_LEN, k));
    int *nvis = (int *)rtc_xmalloc(sizeof(int) * (size_t)rtcu.local_size);
    char *ids = (char *)rtc_xmalloc(sizeof mine * (size_t)rtcu.local_size);
    MPI_Allgather(&nmine, 1, MPI_INT, nvis, 1, MPI_INT, node);
    MPI_Allgather(mine, (int)sizeof mine, MPI_CHAR, ids, (int)sizeof mine, MPI_CHAR, node);
    MPI_Comm_free(&node);
    char err[512];
    int pick = rtc_pick_device(rtcu.local_rank, rtcu.local_size, nvis, ids, MAXVIS, err, sizeof err);
    free(nvis);
    free(ids);
    if (pick < 0) {
        if (e != cudaSuccess) rt_fatal("no usable CUDA device: %s", cudaGetErrorString(e));
        rt_fatal("%s", err);
    }
    rtcu.device = pick;
    CUDA_CHECK(cudaSetDevice(rtcu.device));
    CUDA_CHECK(cudaDeviceGetAttribute(&rtcu.num_sms, cudaDevAttrMultiProcessorCount, rtcu.device));

    /* Compute at the lowest priority: each communicator's stream (comm.cu)
     * gets the highest, so communication kernels get the SMs they need as
     * soon as their inputs are ready. */
    int lo = 0, hi = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    CUDA_CHECK(cudaStreamCreateWithPriority(&rtcu.compute, cudaStreamNonBlocking, lo));

    CUBLAS_CHECK(cublasCreate(&rtcu.blas));
    CUBLAS_CHECK(cublasSetStream(rtcu.blas, rtcu.compute));
    CUDA_CHECK(cudaMalloc(&rtcu.blas_ws, RTCU_BLAS_WS_BYTES));
    CUBLAS_CHECK(cublasSetWorkspace(rtcu.blas, rtcu.blas_ws, RTCU_BLAS_WS_BYTES));
    CUBLAS_CHECK(cublasSetPointerMode(rtcu.blas, CUBLAS_POINTER_MODE_HOST));

    CUDA_CHECK(cudaMalloc(&rtcu.dev_err, sizeof(RtcuDevErr)));
    CUDA_CHECK(cudaMemsetAsync(rtcu.dev_err, 0, sizeof(RtcuDevErr), rtcu.compute)); /* before any kernel reports */
    CUDA_CHECK(cudaMalloc(&rtcu.gemm_ptrs, 3 * RT_MATMUL_BATCH_MAX * sizeof(void *)));

    rtcu.initialized = 1;
    rtcu_watchdog_start();

    ncclUniqueId id;
    if (rtcu.rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    RtComm *w = (RtComm *)calloc(1, sizeof *w);
    if (!w) rt_fatal("out of host memory");
    w->mpi = MPI_COMM_WORLD;
    w->rank = rtcu.rank;
    w->size = rtcu.size;
    /* Non-blocking (config.blocking = 0): calls return at once and the
     * runtime polls them, so the watchdog may abort the communicator from
     * its own thread. Splits inherit the configuration. */
    ncclConfig_t cfg = rtcu_nccl_config();
    ncclComm_t nc = NULL;
    ncclResult_t r = RTCU_NCCL(ncclCommInitRankConfig(&nc, rtcu.size, id, rtcu.rank, &cfg));
    rtcu_nccl_settle(nc, r, "ncclCommInitRankConfig", __FILE__, __LINE__);
    rtcu_comm_own(w, nc);
    rtcu.world = w;
    rtcu_comm_remember(w);
}

void rt_finalize(void)
{
    rtcu_require_init("rt_finalize");
    rtcu_sync();
    rtcu_comm_destroy_all();
    rtcu_watchdog_stop();
    rtcu_scratch_free();
    rtcu_fp8_free();
    CUBLAS_CHECK(cublasDestroy(rtcu.blas));
    CUDA_CHECK(cudaFree(rtcu.blas_ws));
    CUDA_CHECK(cudaFree(rtcu.dev_err));
    rtcu.dev_err = NULL;
    CUDA_CHECK(cudaFree(rtcu.gemm_ptrs));
    rtcu.gemm_ptrs = NULL;
    CUDA_CHECK(cudaStreamDestroy(rtcu.compute));
    rtcu.initialized = 0;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}

int rt_world_rank(void) { return rtcu.rank; }
int rt_world_size(void) { return rtcu.size; }

double rt_time(void)
{
    if (rtcu.initialized) rtcu_sync_except_sends(); /* timing points must not wait for sends (cu.h) */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Control collectives over host memory, on MPI (the NCCL communicators
 * work on device memory); the watchdog times them like any blocking call. */
void rt_host_allgather(RtComm *c, void *out, const void *in, size_t bytes)
{
    if (!c) rt_fatal("rt_host_allgather on a NULL communicator (this rank is not a member)");
    if (bytes > 2147483647u) rt_fatal("rt_host_allgather of %zu bytes: at most 2^31 - 1", bytes);
    rtcu_block_begin("MPI_Allgather (rt_host_allgather)", __FILE__, __LINE__);
    int rc = MPI_Allgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, c->mpi);
    rtcu_block_end();
    if (rc != MPI_SUCCESS) rt_fatal("%s:%d: MPI_Allgather failed (rt_host_allgather)", __FILE__, __LINE__);
}

void rt_host_bcast(RtComm *c, void *buf, size_t bytes, int root)
{
    if (!c) rt_fatal("rt_host_bcast on a NULL communicator (this rank is not a member)");
    /* In pieces of at most 1 GiB: MPI counts are int. */
    for (size_t at = 0; at < bytes;) {
        size_t k = bytes - at < ((size_t)1 << 30) ? bytes - at : (size_t)1 << 30;
        rtcu_block_begin("MPI_Bcast (rt_host_bcast)", __FILE__, __LINE__);
        int rc = MPI_Bcast((char *)buf + at, (int)k, MPI_BYTE, root, c->mpi);
        rtcu_block_end();
        if (rc != MPI_SUCCESS) rt_fatal("%s:%d: MPI_Bcast failed (rt_host_bcast)", __FILE__, __LINE__);
        at += k;
    }
}

int64_t rt_host_max(RtComm *c, int64_t value)
{
    if (!c) rt_fatal("rt_host_max on a NULL communicator (this rank is not a member)");
    rtcu_block_begin("MPI_Allreduce (rt_host_max)", __FILE__, __LINE__);
    int rc = MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_MAX, c->mpi);
    rtcu_block_end();
    if (rc != MPI_SUCCESS) rt_fatal("%s:%d: MPI_Allreduce failed (rt_host_max)", __FILE__, __LINE__);
    return value;
}
