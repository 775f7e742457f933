/* cu.h: internals of the CUDA backend of libptdrt (rt.h). Prefix rtcu_.
 *
 * Streams: every kernel and cuBLAS call runs on rtcu.compute; every NCCL call
 * on the stream of its communicator (one per NCCL communicator; two for a
 * point-to-point communicator, one per direction). An operation first makes
 * its stream wait on an event recorded on compute (it sees all earlier
 * kernels), then records a completion event that the next compute work
 * touching its buffers waits on (rtcu_deps, comm.cu), or that rt_wait of its
 * request makes compute wait on. Host-synchronous calls join everything
 * first (rtcu_sync).
 *
 * Errors: CUDA_CHECK / CUBLAS_CHECK / NCCL_CHECK report file:line, the
 * library and its own error string, then abort every rank (rt_fatal).
 * Calls that may block the host (stream synchronisation, synchronous
 * copies, the polling of non-blocking NCCL communicators) are bracketed by
 * rtcu_block_begin/end, which the watchdog (watchdog.cu) times against the
 * stall timeout. */
#ifndef PTDC_RUNTIME_CUDA_CU_H
#define PTDC_RUNTIME_CUDA_CU_H

#include "rt.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
/* MPI's C API only (no MPI-2 C++ bindings in these C++ files). */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <nccl.h>

#include <initializer_list>
#include <mutex>
#include <stdint.h>

typedef struct RtcuDevErr RtcuDevErr;

struct RtComm {
    ncclComm_t nccl;         /* NULL for a group of one rank (local copies) */
    MPI_Comm mpi;
    int rank, size;
    cudaStream_t stream;     /* its operations' stream (shared with nccl) */
    int owner;               /* nccl and stream are this communicator's (else shared) */
    int p2p;                 /* rt_comm_split_p2p: chan[0], chan[1] carry messages up the rank
                                order from even and odd senders, chan[2], chan[3] down */
    ncclComm_t chan[4];
    cudaStream_t chan_stream[4];
    struct RtcuFpSeq *fp;    /* PTDC_NCCL_CHECK's sequence (comm_check.cu), shared like nccl */
};

typedef struct RtcuState {
    int initialized;
    int rank, size;            /* world */
    int local_rank, local_size;
    int device, num_sms;
    int mpi_multiple;          /* MPI_THREAD_MULTIPLE: the watchdog may call MPI_Abort */
    cudaStream_t compute;
    cublasHandle_t blas;
    void *blas_ws;
    RtComm *world;
    RtcuDevErr *dev_err;       /* device memory, see below */
    void **gemm_ptrs;          /* device memory: a GEMM batch's B, A and C pointers (matmul.cu) */
} RtcuState;
extern RtcuState rtcu;
/* rtcu.blas_ws's size: cuBLAS's handle and cuBLASLt's FP8 GEMMs
 * (fp8_matmul.cu) share it on the compute stream. */
enum { RTCU_BLAS_WS_BYTES = 32 << 20 }; /* cuBLAS recommends 32 MiB on Hopper */

/* ------------------------------------------------------------ checks */
[[noreturn]] void rtcu_fail(const char *file, int line, const char *lib, const char *msg,
                            const char *call);

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t rtcu_e_ = (call);                                                     \
        if (rtcu_e_ != cudaSuccess)                                                       \
            rtcu_fail(__FILE__, __LINE__, "CUDA", cudaGetErrorString(rtcu_e_), #call);    \
    } while (0)
#define CUBLAS_CHECK(call)                                                                \
    do {                                                                                  \
        cublasStatus_t rtcu_s_ = (call);                                                  \
        if (rtcu_s_ != CUBLAS_STATUS_SUCCESS)                                             \
            rtcu_fail(__FILE__, __LINE__, "cuBLAS", cublasGetStatusString(rtcu_s_), #call); \
    } while (0)
/* An NCCL call that does not involve a communicator's progress (queries,
 * group brackets, calls inside a group). Calls on a communicator go through
 * NCCL_COMM_CHECK: communicators are non-blocking, so a call may return
 * ncclInProgress and the host then polls until it settles (comm.cu),
 * watched by the watchdog. */
/* One host thread inside NCCL at a time: NCCL forbids two threads in one
 * communicator at once (a non-blocking communicator's
 * ncclCommGetAsyncError completes and frees in-progress jobs). Every NCCL
 * call of the runtime holds rtcu_nccl_mu (RTCU_NCCL; recursive, as a call
 * may be made inside another's lambda); the watchdog polls the
 * communicators only when it can take it (try_lock), so it never waits
 * for the main thread. ncclCommAbort alone is called without it (NCCL's
 * way to end a hang from another thread). */
extern std::recursive_mutex rtcu_nccl_mu;
#define RTCU_NCCL(call) ([&]() { std::lock_guard<std::recursive_mutex> rtcu_g_(rtcu_nccl_mu); return (call); }())
#define NCCL_CHECK(call)                                                                  \
    do {                                                                                  \
        ncclResult_t rtcu_r_ = RTCU_NCCL(call);                                           \
        if (rtcu_r_ != ncclSuccess)                                                       \
            rtcu_fail(__FILE__, __LINE__, "NCCL", ncclGetErrorString(rtcu_r_), #call);    \
    } while (0)
#define NCCL_COMM_CHECK(comm, call) rtcu_nccl_settle((comm), RTCU_NCCL(call), #call, __FILE__, __LINE__)
/* A CUDA call that waits for the device (stream sync, synchronous copy). */
#define CUDA_SYNC_CHECK(call)                                                             \
    do {                                                                                  \
        rtcu_block_begin(#call, __FILE__, __LINE__);                                      \
        cudaError_t rtcu_e_ = (call);                                                     \
        rtcu_block_end();                                                                 \
        if (rtcu_e_ != cudaSuccess)                                                       \
            rtcu_fail(__FILE__, __LINE__, "CUDA", cudaGetErrorString(rtcu_e_), #call);    \
    } while (0)
/* After every kernel launch. */
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

/* Kernel launch on the compute stream, and a kernel's dynamic shared memory.
 * Macros so that tests/gpu can also run the kernels on the host under the
 * SIMT emulator in emu/ (PTDC_CUDA_EMU; see docs/cuda.md). */
#ifndef PTDC_CUDA_EMU
#define RTCU_LAUNCH(k, grid, block, smem) k<<<(grid), (block), (smem), rtcu.compute>>>
#define RTCU_DYN_SMEM(T, name) extern __shared__ __align__(16) T name[]
#else
#include "emu/emu.h"
#endif

void rtcu_require_init(const char *fn);

/* ---------------------------------------------------- watchdog.cu */
void rtcu_watchdog_start(void);
void rtcu_watchdog_stop(void);
void rtcu_watchdog_add(ncclComm_t c);
void rtcu_watchdog_forget_comms(void); /* before destroying them */
/* The main thread's blocking calls, published without a lock (one writer). */
void rtcu_block_begin(const char *what, const char *file, int line);
void rtcu_block_end(void);
/* Set once the watchdog aborts: the main thread must not touch a
 * communicator again; rtcu_park waits for the process to end. */
bool rtcu_aborting(void);
[[noreturn]] void rtcu_park(void);

/* ----------------------------------------------------- device errors */
/* Kernels report bad input (a token id out of range) through a device word
 * (rtcu.dev_err, passed to them); the host checks it at every
 * synchronisation point. The first report wins (atomicCAS on code). */
enum { RTCU_ERR_NONE = 0, RTCU_ERR_EMBED_ID = 1, RTCU_ERR_TARGET = 2 };
typedef struct RtcuDevErr {
    int code;
    int pad;
    long long value, index;
} RtcuDevErr;
static __device__ __forceinline__ void rtcu_report(RtcuDevErr *e, int code, long long value,
                                                   long long index)
{
    if (atomicCAS(&e->code, 0, -1) == 0) {
        e->value = value;
        e->index = index;
        __threadfence();
        atomicExch(&e->code, code);
    }
}
void rtcu_check_dev_err(void); /* host, after a sync */

/* ------------------------------------------------------ comm.cu */
/* Make compute wait for every pending operation whose buffers overlap any
 * of these byte ranges. Called at the start of every kernel entry point with
 * all its inputs and outputs (NULL or empty ranges are ignored). */
struct RtcuRange {
    const void *p;
    size_t bytes;
};
void rtcu_deps(std::initializer_list<RtcuRange> ranges);
/* Make compute wait for all pending communication. */
void rtcu_join_comm(void);
/* Join everything and wait on the host (then check device errors). */
void rtcu_sync(void);
/* rt_time's wait: the same, except for point-to-point sends nothing has
 * waited for yet. A send of a message NCCL cannot buffer completes only
 * when its receive is posted, and in a pipeline that receive may be the
 * peer's next call after its own timing point: waiting for sends there
 * deadlocks both (issue 34, bug 2). Their buffers stay guarded by range
 * (rtcu_deps), and rtcu_sync still waits for them. */
void rtcu_sync_except_sends(void);
/* PTDC_NCCL_CHECK=1 (comm_check.cu): c's fingerprint sequence (owners of an
 * NCCL communicator), one collective's fingerprint, compare what has
 * arrived (wait: all of it), release c's sequence. */
void rtcu_check_own(RtComm *c);
void rtcu_check_call(const RtComm *c, const char *call, size_t b1, size_t b2);
void rtcu_check_poll(bool wait);
void rtcu_check_free(RtComm *c);
/* Check a call on non-blocking communicator c: poll it while in progress. */
void rtcu_nccl_settle(ncclComm_t c, ncclResult_t r, const char *call, const char *file, int line);
ncclConfig_t rtcu_nccl_config(void); /* blocking = 0 */
/* c takes nc and a new stream of its own (and the watchdog watches nc). */
void rtcu_comm_own(RtComm *c, ncclComm_t nc);
size_t rtcu_type_size(RtType t);
ncclDataType_t rtcu_nccl_type(RtType t);
void rtcu_comm_remember(RtComm *c); /* destroyed by rtcu_comm_destroy_all */
void rtcu_comm_destroy_all(void);

/* ------------------------------------------------------ memory.cu */
/* Grow-only device scratch owned by the runtime (cuBLAS workspace is
 * separate): used by kernels for partial sums and sort buffers. Valid until
 * the next rtcu_scratch call; ordered on the compute stream. */
void *rtcu_scratch(size_t bytes);
void rtcu_scratch_free(void);

/* ------------------------------------------------- fp8_matmul.cu */
void rtcu_fp8_free(void); /* cuBLASLt's handle and the scales (rt_finalize) */

/* ------------------------------------------------------ reduce.cu */
/* Deterministic column sums in two stages. Stage 1 (in each caller's kernel)
 * writes partial[g * cols + j] = sum over the rows of group g; the groups are
 * contiguous chunks of `chunk` rows, a function of (rows, cols) only, so the
 * result does not depend on the GPU. Stage 2 adds the groups in a fixed tree:
 * out[j] = sum_g partial[g, j] (+ out[j] if accumulate), rounded once. */
void rtcu_row_groups(int64_t rows, int64_t cols, int64_t *groups, int64_t *chunk);
void rtcu_colsum_final(rt_act *out, const float *partial, int64_t groups, int64_t cols, bool accumulate);
void rtcu_colsum_final(rt_grad *out, const float *partial, int64_t groups, int64_t cols, bool accumulate);

/* ------------------------------------------------ attention_fa2.cu */
/* Tensor-core attention (FlashAttention-2 scheme) for the head dims
 * rtcu_attention_fa2_dim accepts (64, 80, 96, 128), buffers 16-byte aligned;
 * attention.cu dispatches, and falls back to its CUDA-core kernels otherwise
 * (warning once) or when PTDC_ATTENTION=generic. window: 0 none, else
 * causal with i - j < window. delta = rowsum(dO * O) per (b, s, h) row.
 * dq_acc: B * Sq * H * D floats of scratch for the one-kernel backward that
 * adds dQ with atomics, or NULL for the deterministic two-kernel one. Rows
 * sit at the positions of `pos` (attention_pos.cuh; one chunk at 0 for
 * rt_attention_fwd/bwd), and the masks apply to positions. */
struct RtcuAttnPos;
bool rtcu_attention_fa2_dim(int64_t D);
void rtcu_attention_fa2_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v, int64_t B,
                            int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D, bool causal, int64_t window,
                            const RtcuAttnPos &pos);
void rtcu_attention_fa2_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k, const rt_act *v,
                            const float *lse, const float *delta, const rt_act *dout, int64_t B, int64_t Sq, int64_t Sk,
                            int64_t H, int64_t KVH, int64_t D, bool causal, int64_t window, const RtcuAttnPos &pos,
                            float *dq_acc);
/* Test hook (tests/gpu): 1 forces the CUDA-core kernels, 0 allows the
 * tensor-core ones, -1 reads PTDC_ATTENTION again. */
extern "C" void rtcu_attention_force_generic(int on);
/* Test hook: 1 the deterministic two-kernel backward, 0 the atomic one, -1
 * reads PTDC_ATTENTION_DETERMINISTIC again. */
extern "C" void rtcu_attention_deterministic(int on);

/* ---------------------------------------------------- launch helpers */
static inline int64_t rtcu_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
/* Blocks for a grid-stride loop over n items with `threads` per block. */
static inline unsigned rtcu_grid(int64_t n, int threads)
{
    int64_t b = rtcu_cdiv(n, threads);
    int64_t cap = (int64_t)(rtcu.num_sms > 0 ? rtcu.num_sms : 80) * 32;
    if (b > cap) b = cap;
    if (b < 1) b = 1;
    return (unsigned)b;
}
/* Grid dimension checks: y and z are limited to 65535. */
void rtcu_check_grid(const char *fn, int64_t x, int64_t y, int64_t z);

#endif
