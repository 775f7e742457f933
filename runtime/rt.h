/* rt.h: libptdrt, the runtime every generated training program links against.
 *
 * Two backends implement this one API with the same semantics:
 *   CPU   runtime/cpu/      fp32 throughout; GEMMs by OpenBLAS (cblas); MPI.
 *   CUDA  runtime/cuda/     bf16 weights, activations and gradients with fp32
 *                            accumulation, fp32 master weights and AdamW moments;
 *                            GEMMs by cuBLAS/cuBLASLt; NCCL (bootstrapped by MPI).
 * Generated code is written once against this header. `rt_act` is the element
 * type of weights, activations and gradients: float on CPU, __nv_bfloat16 on
 * CUDA. Buffers passed to kernels and collectives are host memory on CPU and
 * device memory on CUDA; fp32 statistics (rstd, lse, loss) are float in both.
 *
 * Layout: every tensor is row-major in its IR dim order with its local
 * (per-rank) sizes. Kernels that take (rows, cols) view the tensor as
 * [product of leading dims, product of trailing dims].
 *
 * Conventions: kernels overwrite their outputs, except parameter gradients
 * (dw, db, dtable, and rt_matmul with accumulate=true), which accumulate over
 * micro-batches. Reductions are deterministic (fixed order, no atomics), so a
 * run is bitwise reproducible on the same rank layout; one exception: the
 * CUDA backend's tensor-core attention backward adds dq with fp32 atomics,
 * as FlashAttention-2 does, unless PTDC_ATTENTION_DETERMINISTIC=1 is set
 * (docs/cuda.md).
 *
 * Errors: every library call is checked; a failure prints
 * "file:line: <library>: <its error string>" and aborts all ranks.
 */
#ifndef PTDC_RT_H
#define PTDC_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef PTDC_CUDA
#ifdef __cplusplus
#include <cuda_bf16.h>
typedef __nv_bfloat16 rt_act;
#else
/* C has no __nv_bfloat16. rt_act crosses the API only by pointer, so the
 * same two bytes as an integer type are ABI-identical: a generated program
 * may be C (gcc) or C++ (nvcc) against the same libptdrt_cuda. */
typedef uint16_t rt_act;
#endif
#else
typedef float rt_act;
#endif
/* Parameter gradients: their accumulation over micro-batches, their
 * reduction (all-reduce, reduce-scatter) and the optimizer's reads are fp32
 * on both backends (bf16 accumulation over many micro-batches and ranks
 * swamps small contributions). Kernels writing a parameter gradient take an
 * rt_grad pointer; collectives move it as RT_F32. */
typedef float rt_grad;

#ifdef __cplusplus
extern "C" {
#endif

/* --------------------------------------------------------------- process */
/* MPI_Init; on CUDA also picks the GPU from the node-local rank and creates
 * the NCCL world communicator. Call first. */
void rt_init(int *argc, char ***argv);
void rt_finalize(void);
int rt_world_rank(void);
int rt_world_size(void);
/* Abort every rank with a message (never hang on an error). C++ (nvcc)
 * spells _Noreturn as [[noreturn]]. */
#ifdef __cplusplus
[[noreturn]]
#else
_Noreturn
#endif
void rt_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double rt_time(void); /* seconds, monotonic; on CUDA after synchronising the streams */

/* ---------------------------------------------------------------- memory */
/* One allocation per program for parameters, gradients, optimizer state and
 * activations (offsets are planned at compile time). Device memory on CUDA.
 * Zeroed on both backends (CPU: fresh pages, touched only when first used,
 * so start-up does not fault in the whole arena). */
void *rt_alloc(size_t bytes);
void rt_free(void *p);
void rt_zero(void *dst, size_t bytes);
void rt_copy(void *dst, const void *src, size_t bytes);
/* Host <-> backend memory (plain memcpy on CPU). */
void rt_to_device(void *dst, const void *host_src, size_t bytes);
void rt_to_host(void *host_dst, const void *src, size_t bytes);
/* A copy to the device that does not wait: ordered before later work on the
 * compute stream (CUDA); host_src (rt_host_alloc memory for a truly
 * asynchronous copy) must not change until rt_wait of the request. On CPU
 * the copy is done on return. */
typedef struct RtReq RtReq; /* a transfer in flight: rt_wait (below) completes it */
RtReq *rt_to_device_async(void *dst, const void *host_src, size_t bytes);
/* Convert between fp32 host arrays and rt_act buffers. */
void rt_act_from_f32(rt_act *dst, const float *host_src, int64_t n);
void rt_act_to_f32(float *host_dst, const rt_act *src, int64_t n);
/* Host staging for copies that do not block: page-locked on CUDA (malloc on
 * CPU). */
void *rt_host_alloc(size_t bytes);
void rt_host_free(void *p);

/* ------------------------------------------------------- communication */
typedef struct RtComm RtComm;

typedef enum {
    RT_ACT, /* rt_act elements */
    RT_F32,
    RT_I32,
} RtType;

RtComm *rt_comm_world(void);
/* Collective over the world: ranks passing the same color form a group,
 * ordered by key (MPI_Comm_split / ncclCommSplit). color < 0: not a member
 * (returns NULL). */
RtComm *rt_comm_split(int color, int key);
int rt_comm_rank(const RtComm *c);
int rt_comm_size(const RtComm *c);
void rt_barrier(RtComm *c);
/* Sum in place. */
void rt_allreduce(RtComm *c, void *buf, int64_t n, RtType t);
void rt_allreduce_max(RtComm *c, float *buf, int64_t n);
/* in holds n_out * size elements, rank r keeps the r-th block of the sum. */
void rt_reduce_scatter(RtComm *c, void *out, const void *in, int64_t n_out, RtType t);
/* out holds n_in * size elements: block r from rank r. In place when
 * in == out + rank * n_in. */
void rt_allgather(RtComm *c, void *out, const void *in, int64_t n_in, RtType t);
/* Block r of `in` goes to rank r; block r of `out` comes from rank r. */
void rt_alltoall(RtComm *c, void *out, const void *in, int64_t n_per_rank, RtType t);
void rt_bcast(RtComm *c, void *buf, int64_t n, RtType t, int root);
/* Point-to-point between ranks of c (pipeline neighbours). The non-blocking
 * pair lets a 1F1B schedule post a send and a receive without deadlock. */
RtReq *rt_isend(RtComm *c, const void *buf, int64_t n, RtType t, int peer, int tag);
RtReq *rt_irecv(RtComm *c, void *buf, int64_t n, RtType t, int peer, int tag);
/* Completes and frees a request (point-to-point, collective or copy). After
 * it, the request's buffers may be reused and its results read: on CPU the
 * host waits; on CUDA later work on the compute stream waits (the host does
 * not), so copies to the host see the result. */
void rt_wait(RtReq *r);
/* A communicator for point-to-point transfers that are issued as soon as
 * they are posted: the two directions of rank order progress independently
 * (on CUDA four NCCL communicators and streams, one per direction and
 * parity of the sending rank; NCCL sends and receives block their stream
 * until matched, and a rank's sends and receives never share one, so a
 * receive never waits behind a send's tail), so ranks may post sends
 * and receives in any order as long as the messages each direction carries
 * between two ranks are received in the order they were sent. Collective
 * over the world, like rt_comm_split. On a plain communicator rt_isend and
 * rt_irecv are issued together at the first rt_wait on CUDA. */
RtComm *rt_comm_split_p2p(int color, int key);

/* Non-blocking collectives: the same semantics as the blocking ones, on
 * other threads of execution (CPU: a communication thread per rank making
 * the blocking MPI calls on a duplicate of the communicator; CUDA: the
 * communicator's own stream, after an event on compute). Issue them in the
 * same order on every member. Until rt_wait, `in` must not change and `out`
 * must not be read; buffers of a collective still in flight are not touched
 * by blocking collectives or kernels on CPU (the caller's duty), while on
 * CUDA kernels touching them wait for it. rt_iallgather may run in place:
 * in == out + rank * n_in. The stall timeout covers rt_wait. */
RtReq *rt_iallreduce(RtComm *c, void *buf, int64_t n, RtType t);
RtReq *rt_ireduce_scatter(RtComm *c, void *out, const void *in, int64_t n_out, RtType t);
RtReq *rt_iallgather(RtComm *c, void *out, const void *in, int64_t n_in, RtType t);
/* Collectives issued between these two calls go out together (one
 * ncclGroupStart/End on CUDA: one launch for a bucket of per-tensor
 * reduce-scatters; on CPU they run one after another). Not nested. */
void rt_group_begin(void);
void rt_group_end(void);

/* Collectives along a middle dim. A local tensor [outer, d, inner] split
 * `parts` ways along d is stored contiguously per rank; these move blocks so
 * that gathers, scatters and slices along any dim reduce to the collectives
 * above. `scratch` holds outer * parts * d * inner elements. */
void rt_allgather_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d_local,
                      int64_t inner, rt_act *scratch);
void rt_reduce_scatter_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d_local,
                           int64_t inner, rt_act *scratch);
/* Tensor-parallel communication chunked with its GEMMs (sequence
 * parallelism; docs/codegen.md, "Chunked tensor parallelism"). Each equals
 * the unchunked pair, bit for bit on CPU with two ranks (with more, a
 * reduce-scatter of a smaller block may add in another order):
 * rt_allgather_matmul is rt_allgather_dim(c, gathered, in, outer, d_local,
 * inner, scratch) then, for each of count GEMMs (<= RT_MATMUL_BATCH_MAX),
 * out[i] = gathered [outer p d_local, inner] x op(b[i]) (+ out[i]), N[i]
 * columns (the GEMMs reading one gathered input: q, k and v): the
 * GEMM's rows of this rank's block run while the others' are gathered.
 * rt_matmul_reduce_scatter is partial = a [outer p d_local, K] x op(b)
 * (+ partial) then rt_reduce_scatter_dim(c, out, partial, outer, d_local,
 * N, scratch), the GEMM in `splits` (1..16) pieces of rows, each piece's
 * reduce-scatter in flight while the next piece computes; its scratch
 * holds (p + 1) outer d_local N elements. */
void rt_allgather_matmul(RtComm *c, rt_act *gathered, const rt_act *in, int64_t outer, int64_t d_local,
                         int64_t inner, rt_act *scratch, int count, rt_act *const out[],
                         const rt_act *const b[], const int64_t N[], bool tb, bool accumulate);
void rt_matmul_reduce_scatter(RtComm *c, rt_act *out, rt_act *partial, const rt_act *a, const rt_act *b,
                              int64_t outer, int64_t d_local, int64_t N, int64_t K, bool tb,
                              bool accumulate, int splits, rt_act *scratch);
/* Move a split from one dim to another (all-to-all). The tensor is viewed as
 * [outer, d1, mid, d2, inner] with d1, d2 the full sizes of the two dims; if
 * to_second, in is split along d1 ([outer, d1/p, mid, d2, inner]) and out
 * along d2 ([outer, d1, mid, d2/p, inner]); otherwise the reverse.
 * `scratch` holds one local tensor (outer * d1 * mid * d2 * inner / p
 * elements). In all four helpers out, in and scratch do not overlap. */
void rt_alltoall_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d1,
                     int64_t mid, int64_t d2, int64_t inner, bool to_second, rt_act *scratch);
/* out = block `index` of `parts` along the middle dim of in [outer, parts*d_local, inner]. */
void rt_slice_dim(rt_act *out, const rt_act *in, int64_t outer, int64_t d_local, int64_t inner,
                  int parts, int index);

/* ------------------------------------------------- stalls and preemption */
/* Stall timeout: a collective, point-to-point wait or control collective
 * that has not completed after `seconds` aborts every rank with a message
 * naming the ranks that did not arrive (and where they wait, when they
 * answer). Default: PTDC_TIMEOUT from the environment, else 300 s; 0 turns
 * the check off. On CUDA this is the watchdog's timeout. Every rank should
 * set the same value. */
void rt_set_timeout(double seconds);
double rt_timeout(void);
/* What the program says of where it is (the trainer: step, stage op, last
 * call), for the stall report: when the watchdog fires, and (CPU) when
 * another rank's watchdog asks this one where it is, the rank prints one
 * line with its own wait and fn's words, so the log holds every
 * responding rank's position before the job aborts. fn runs on the
 * watchdog thread while the main thread may be stuck anywhere: it may only
 * read memory (no locks, no runtime calls) and writes at most n bytes. */
typedef void (*RtWhereFn)(char *out, size_t n);
void rt_set_where(RtWhereFn fn);

/* Preemption: after rt_stop_install, SIGTERM, SIGINT and SIGUSR1 (Slurm's
 * warning signal) only set a flag (async-signal-safe); a second SIGTERM or
 * SIGINT ends the process as usual. The trainer polls at step boundaries.
 * The first signal also starts the grace time (PTDC_STOP_GRACE seconds,
 * default RT_STOP_GRACE; 0: none): a rank still running when it ends
 * prints one line and exits RT_EXIT_PREEMPTED, abandoning its step or save
 * (the newest complete checkpoint stays the one to load). */
enum { RT_EXIT_PREEMPTED = 75, RT_STOP_GRACE = 90 }; /* 75: EX_TEMPFAIL, run it again */
void rt_stop_install(void);
double rt_stop_grace(void); /* seconds; 0: none */
int rt_stop_requested(void); /* the first signal received here, 0 if none */
/* Collective over c: the largest signal number any rank received (0: none),
 * so that every rank stops after the same step. One small all-reduce. */
int rt_stop_agree(RtComm *c);

/* Control collectives over host memory (records, flags), on both backends,
 * with the stall timeout: `out` receives size * bytes, rank r's at r * bytes. */
void rt_host_allgather(RtComm *c, void *out, const void *in, size_t bytes);
int64_t rt_host_max(RtComm *c, int64_t value); /* the largest value over c */
/* root's `bytes` of host memory into buf on every member of c (MPI on both
 * backends: loaded state passes through host memory anyway). */
void rt_host_bcast(RtComm *c, void *buf, size_t bytes, int root);

/* One line on stderr, "[rank N] " first when there are several ranks,
 * written with a single write() so lines of ranks never run together. */
void rt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --------------------------------------------------------------- kernels */
/* C[M,N] = op(A) op(B) (+ C if accumulate). A is [M,K] ([K,M] if ta); B is
 * [K,N] ([N,K] if tb). fp32 accumulation on both backends. */
void rt_matmul(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
               bool ta, bool tb, bool accumulate);
/* The same with an fp32 C: a parameter's gradient accumulated over
 * micro-batches (cuBLAS: bf16 A and B, fp32 C and compute). */
void rt_matmul_grad(rt_grad *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
                    bool ta, bool tb, bool accumulate);
/* count GEMMs of one shape in one call (1 <= count <= RT_MATMUL_BATCH_MAX):
 * C[i] = op(A[i]) op(B[i]) (+ C[i] if accumulate), each exactly what
 * rt_matmul computes for it. Operands may repeat (q, k and v read the same
 * A); no C[i] may overlap another GEMM's C, A or B (the GEMMs run together
 * on CUDA). Codegen batches sibling GEMMs this way (q, k, v from one input;
 * gate and up): on CUDA one batched cuBLAS call runs the GEMMs' tiles in one
 * launch, so small GEMMs fill the device; on CPU the GEMMs run one after
 * the other, the same results bit for bit as separate calls. */
#define RT_MATMUL_BATCH_MAX 4
void rt_matmul_batch(int count, rt_act *const c[], const rt_act *const a[], const rt_act *const b[],
                     int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool accumulate);
/* The same with fp32 C (parameter gradients, as rt_matmul_grad). */
void rt_matmul_grad_batch(int count, rt_grad *const c[], const rt_act *const a[],
                          const rt_act *const b[], int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                          bool accumulate);

/* FP8 with per-tensor current scaling (Transformer Engine's "current
 * scaling" recipe; docs/runtime.md, "FP8"): E4M3 for forward operands, E5M2
 * for gradients. An FP8 tensor is one byte per element (OCP FP8 codes) plus
 * one fp32 scale: x ~ decode(q) / scale. Both backends round identically:
 * x * scale in fp32, then round to nearest even, saturating to +-max
 * (infinities too); NaN -> 0x7F. */
typedef enum {
    RT_FP8_E4M3, /* bias 7, max 448, no infinities, NaN S.1111.111 */
    RT_FP8_E5M2, /* bias 15, max 57344, IEEE infinities and NaNs */
} RtFp8Format;
float rt_fp8_max(RtFp8Format f); /* 448 or 57344 */
/* max |src[i]| (0 for n == 0; NaN if any element is NaN). On CUDA the host
 * waits for the result (a synchronisation). */
float rt_amax(const rt_act *src, int64_t n);
/* The cast's scale: fp8_max / amax; 1 when amax is 0 or not finite; FLT_MAX
 * when the quotient overflows. Host arithmetic, the same on both backends. */
float rt_fp8_scale(float amax, RtFp8Format f);
/* dst[i] = the FP8 code of src[i] * scale (dst: n bytes). */
void rt_cast_fp8(uint8_t *dst, const rt_act *src, int64_t n, float scale, RtFp8Format f);
/* The same, transposed: src [rows, cols] row-major, dst [cols, rows] (a GEMM
 * operand whose contracted dim runs down its columns, cast into
 * rt_matmul_fp8's rows-of-K layout). The codes equal rt_cast_fp8's. */
void rt_cast_fp8_t(uint8_t *dst, const rt_act *src, int64_t rows, int64_t cols, float scale,
                   RtFp8Format f);
/* dst[i] = decode(src[i]) * scale_inv, rounded to rt_act. */
void rt_dequant_fp8(rt_act *dst, const uint8_t *src, int64_t n, float scale_inv, RtFp8Format f);
/* C[M,N] = (A * a_scale_inv) (B * b_scale_inv)^T (+ C if accumulate): A is
 * [M,K] and B is [N,K] FP8 codes, both rows of K (cuBLASLt's only FP8
 * layout, "TN"; a transposed operand is cast transposed by the caller). fp32
 * accumulation; K and N multiples of 16, not both E5M2. CUDA: cuBLASLt on sm_89 and
 * newer, rt_fatal on older GPUs (never a wrong result). CPU: the decoded
 * values multiplied in fp32, the reference. */
void rt_matmul_fp8(rt_act *c, const uint8_t *a, RtFp8Format fa, float a_scale_inv, const uint8_t *b,
                   RtFp8Format fb, float b_scale_inv, int64_t M, int64_t N, int64_t K, bool accumulate);

/* out[i, :] = table[ids[i] - vocab_offset, :] for ids inside this rank's rows
 * [vocab_offset, vocab_offset + vocab_local), zeros otherwise (the partial
 * sums of a vocabulary-parallel embedding). Ids outside [0, vocab) abort. */
void rt_embedding_fwd(rt_act *out, const int32_t *ids, const rt_act *table, int64_t n,
                      int64_t vocab_local, int64_t vocab_offset, int64_t dim);
/* dtable[ids[i] - offset, :] += dout[i, :] for ids in range; deterministic. */
void rt_embedding_bwd(rt_grad *dtable, const int32_t *ids, const rt_act *dout, int64_t n,
                      int64_t vocab_local, int64_t vocab_offset, int64_t dim);

/* y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) per row (HF LlamaRMSNorm). */
void rt_rmsnorm_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t rows,
                    int64_t cols, float eps);
/* The residual add and the next norm in one pass: sum = a + b (rounded to
 * rt_act as rt_add rounds it), then rt_rmsnorm_fwd of sum. Bitwise the
 * results of rt_add then rt_rmsnorm_fwd, with one read of the row fewer
 * (the norm reads the sum where it was just made). sum may be a or b. */
void rt_add_rmsnorm_fwd(rt_act *sum, rt_act *y, float *rstd, const rt_act *a, const rt_act *b,
                        const rt_act *w, int64_t rows, int64_t cols, float eps);
/* dx = dres + the norm's gradient when dres is not NULL (the residual
 * stream's other gradient contribution, added in the same pass; dres may be
 * dx itself), else the norm's gradient alone. */
void rt_rmsnorm_bwd(rt_act *dx, rt_grad *dw, const rt_act *x, const rt_act *w, const float *rstd,
                    const rt_act *dy, const rt_act *dres, int64_t rows, int64_t cols);
/* RMSNorm per group with a weight row per group (Mamba-2's gated norm,
 * mamba_ssm's RMSNormGated with group_size = d_inner / ngroups; the .mdl's
 * rmsnorm with group_dims): x, y [rows, groups, cols], w [groups, cols],
 * rstd [rows, groups]. dw [groups, cols] += its sum over rows, in row order;
 * dres as rt_rmsnorm_bwd's. */
void rt_rmsnorm_group_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t rows,
                          int64_t groups, int64_t cols, float eps);
void rt_rmsnorm_group_bwd(rt_act *dx, rt_grad *dw, const rt_act *x, const rt_act *w, const float *rstd,
                          const rt_act *dy, const rt_act *dres, int64_t rows, int64_t groups, int64_t cols);
/* y = (x - mean) * rstd * w + b (torch LayerNorm, biased variance). */
void rt_layernorm_fwd(rt_act *y, float *mean, float *rstd, const rt_act *x, const rt_act *w,
                      const rt_act *b, int64_t rows, int64_t cols, float eps);
/* rt_add_rmsnorm_fwd's pass for LayerNorm: sum = x0 + x1, then
 * rt_layernorm_fwd of sum; sum may be x0 or x1. */
void rt_add_layernorm_fwd(rt_act *sum, rt_act *y, float *mean, float *rstd, const rt_act *x0,
                          const rt_act *x1, const rt_act *w, const rt_act *b, int64_t rows,
                          int64_t cols, float eps);
/* dres as rt_rmsnorm_bwd's. */
void rt_layernorm_bwd(rt_act *dx, rt_grad *dw, rt_grad *db, const rt_act *x, const rt_act *w,
                      const float *mean, const float *rstd, const rt_act *dy, const rt_act *dres,
                      int64_t rows, int64_t cols);

/* Rotary embedding, rotate-half form of HF LLaMA. x is [outer, seq, inner,
 * dim]: element (o, s, i, j) sits at position pos_offset + s; for j < dim/2,
 * with f = theta^(-2j/dim) and a = position * f:
 *   y[j] = x[j] cos a - x[j + dim/2] sin a,  y[j + dim/2] = x[j + dim/2] cos a + x[j] sin a.
 * inverse = true applies the transposed rotation (the backward). */
void rt_rope(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
             int64_t pos_offset, float theta, bool inverse);
/* rt_rope with LLaMA-3.1's frequency scaling (Hugging Face rope_type
 * "llama3"). With f = theta^(-2j/dim), wavelength L = 2 pi / f and
 * M = original_max_position: f is kept where L < M / high_freq_factor,
 * divided by factor where L > M / low_freq_factor, and in between becomes
 * (1 - s) f / factor + s f with s = (M / L - low_freq_factor) /
 * (high_freq_factor - low_freq_factor). */
void rt_rope_llama3(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner,
                    int64_t dim, int64_t pos_offset, float theta, float factor,
                    float low_freq_factor, float high_freq_factor, float original_max_position,
                    bool inverse);

/* Scaled dot-product attention with grouped-query heads: q, o [B, S, H, D];
 * k, v [B, S, KVH, D]; query head h reads kv head h / (H / KVH); scale
 * 1/sqrt(D); causal masks keys after the query. window > 0 (causal only)
 * also masks keys window or more positions back: query i sees key j iff
 * j <= i && i - j < window (Hugging Face Mistral's sliding window); 0: no
 * window. lse [B, S, H] holds each row's log-sum-exp of the scaled scores,
 * so backward recomputes the probabilities and nothing S x S is stored
 * between passes. */
void rt_attention_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                      int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                      int64_t window);
void rt_attention_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                      const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                      int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                      int64_t window);
/* Attention sinks (GPT-OSS: runtime/common/attention_sink.h has the
 * arithmetic): o [rows, H, Dv] and lse [rows, H] of any attention kernel
 * become those of rows whose softmax denominators also hold e^sinks[h]
 * (in place), after the forward kernel; before the backward kernel (which
 * then reads those o and lse), dsinks [H] accumulates -sum over rows of
 * e^{sinks[h] - lse} (dout . o). rows is every row of the rank: batch x
 * its sequence. */
void rt_attention_sink_fwd(rt_act *o, float *lse, const rt_act *sinks, int64_t rows, int64_t H, int64_t Dv);
void rt_attention_sink_bwd(rt_grad *dsinks, const rt_act *o, const float *lse, const rt_act *dout,
                           const rt_act *sinks, int64_t rows, int64_t H, int64_t Dv);
/* Attention whose v head Dv is narrower than q and k's D (multi-head latent
 * attention: 128 against 192): o [B, S, H, Dv], v, dv [B, S, KVH, Dv], the
 * rest as rt_attention_fwd/bwd with head size D (scale 1/sqrt(D)). Runs them
 * with v padded by zero columns (exact); allocates its temporaries per call.
 * Dv == D is rt_attention_fwd/bwd itself. */
void rt_attention_v_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                        int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, int64_t Dv, bool causal,
                        int64_t window);
void rt_attention_v_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                        const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout, int64_t B,
                        int64_t S, int64_t H, int64_t KVH, int64_t D, int64_t Dv, bool causal, int64_t window);
/* Attention whose rows sit at chunked positions (context parallelism). q, o [B, Sq, H, D];
 * k, v [B, Sk, KVH, D]; lse [B, Sq, H]. Rows come in chunks of `chunk` consecutive
 * positions: query row i is at position qpos[i / chunk] + i % chunk, key row j at
 * kpos[j / chunk] + j % chunk (Sq, Sk multiples of chunk; at most RT_ATTN_MAX_CHUNKS
 * chunks each side). Masks as rt_attention_fwd's, on positions: a causal query at p sees
 * a key at p' iff p' <= p (and p - p' < window when window > 0). A query row seeing no
 * key gets o = 0, lse = -INFINITY and dq = 0. rt_attention_fwd(...) equals
 * rt_attention_pos_fwd(..., S, S, ..., chunk = S, qpos = {0}, kpos = {0}). */
#define RT_ATTN_MAX_CHUNKS 64
void rt_attention_pos_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                          int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                          bool causal, int64_t window, int64_t chunk, const int64_t *qpos,
                          const int64_t *kpos);
void rt_attention_pos_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                          const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                          int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                          bool causal, int64_t window, int64_t chunk, const int64_t *qpos,
                          const int64_t *kpos);
/* Ring attention (context parallelism, docs/context.md): the cp ranks of c each hold Sq rows
 * of q, k, v ([B, Sq, H, D], [B, Sq, KVH, D]), in nchunks chunks of `chunk` positions:
 * rank j's chunk i starts at position pos[j * nchunks + i] (pos: cp x nchunks entries, host
 * memory; nchunks 1 or 2). Out: o and lse of this rank's queries against every rank's keys,
 * equal to rt_attention_pos_fwd against all keys gathered (masks on positions, as there).
 * The K/V blocks travel the ring (rank j sends to j + 1, receives from j - 1), the next
 * transfer posted before the current block's compute; blocks no query of this rank sees
 * (causal: all after its last position; window) are neither computed nor waited for longer
 * than the ring needs. Every rank of c calls it with the same arguments but q, k, v, o, lse
 * and scratch. scratch: 2 * B * Sq * KVH * D * 2 activations (two K/V blocks in flight)
 * plus, forward, B * Sq * H * (D + 1) floats (the fp32 running output, one block's lse) or,
 * backward, 2 * B * Sq * KVH * D activations (one block's dk, dv), 4 * B * Sq * KVH * D
 * floats (two fp32 dk, dv accumulators in flight) and B * Sq * H * D floats (the fp32 dq);
 * each region 256-byte aligned: rt_attention_ring_scratch(B, Sq, H, KVH, D) returns the
 * size in bytes, enough for both directions. On CUDA pass a communicator from
 * rt_comm_split_p2p so sends overlap compute. The merged result equals the gathered
 * attention to fp32 rounding (the log-sum-exp merge reorders the row sums): within 2e-6
 * of the largest output on CPU, as the all-gather form. */
size_t rt_attention_ring_scratch(int64_t B, int64_t Sq, int64_t H, int64_t KVH, int64_t D);
void rt_attention_ring_fwd(RtComm *c, rt_act *o, float *lse, const rt_act *q, const rt_act *k,
                           const rt_act *v, int64_t B, int64_t Sq, int64_t H, int64_t KVH,
                           int64_t D, bool causal, int64_t window, int64_t chunk, int nchunks,
                           const int64_t *pos, void *scratch);
/* Backward: dq for this rank's queries; dk, dv for this rank's own keys and values (complete:
 * every rank's contributions summed, travelling the ring with the blocks and returning home).
 * o and lse are the forward's (the whole attention's), so each block's backward is exact.
 * Deterministic: dq sums its blocks in ring order, a block's dk, dv sum the ranks' shares in
 * ring order from its owner's successor, the owner's own last, all in fp32, whatever the
 * timing. */
void rt_attention_ring_bwd(RtComm *c, rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q,
                           const rt_act *k, const rt_act *v, const rt_act *o, const float *lse,
                           const rt_act *dout, int64_t B, int64_t Sq, int64_t H, int64_t KVH,
                           int64_t D, bool causal, int64_t window, int64_t chunk, int nchunks,
                           const int64_t *pos, void *scratch);
/* Ring attention's merge of one block into the running result, rows of D values (rows =
 * B * Sq * H): with l = logaddexp(lse, lse_b), acc = acc e^(lse - l) + o_b e^(lse_b - l) and
 * lse = l, in fp32; rows with lse_b = -inf are unchanged (a row that never sees a key keeps
 * acc = 0, lse = -inf); acc must be finite. out != NULL: also out = acc rounded to rt_act
 * (the last block; out may be o_b). */
void rt_attention_merge(float *acc, float *lse, const rt_act *o_b, const float *lse_b,
                        rt_act *out, int64_t rows, int64_t D);
/* out[i] = x[i] + acc[i], summed in fp32 and rounded once (out may be x): the last of a sum
 * kept in fp32 (ring attention's dq, dk, dv). */
void rt_add_f32(rt_act *out, const rt_act *x, const float *acc, int64_t n);

/* y = 1 / (1 + exp(-x)); backward from the output: dx = dy y (1 - y). */
void rt_sigmoid_fwd(rt_act *y, const rt_act *x, int64_t n);
void rt_sigmoid_bwd(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t n);
void rt_silu_fwd(rt_act *y, const rt_act *x, int64_t n);
void rt_silu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n);
/* SwiGLU, fused: y = silu(a) * b, and its backward da, db from a, b, dy
 * (reads a and b only: silu(a) is not kept). Outputs may alias inputs. */
void rt_swiglu_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t n);
void rt_swiglu_bwd(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b, const rt_act *dy, int64_t n);
/* Squared ReLU, y = max(x, 0)^2, and its backward dx = 2 max(x, 0) dy
 * (Nemotron 3's experts, ir/moe_acts.def relu2). Outputs may alias inputs. */
void rt_relu2_fwd(rt_act *y, const rt_act *x, int64_t n);
void rt_relu2_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n);
/* GPT-OSS's clamped SwiGLU (ir/moe_acts.def swiglu_oai; transformers'
 * GptOssExperts, Megatron's --quick-geglu --glu-linear-offset 1
 * --activation-func-clamp-value 7): with a' = min(a, 7), b' = clamp(b, -7,
 * 7), y = a' sigmoid(1.702 a') (b' + 1); the clamps pass no gradient
 * outside [., 7] and [-7, 7] (torch.clamp's). Outputs may alias inputs. */
#define RT_OAI_ALPHA 1.702f
#define RT_OAI_LIMIT 7.0f
void rt_swiglu_oai_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t n);
void rt_swiglu_oai_bwd(rt_act *da, rt_act *db, const rt_act *a, const rt_act *b, const rt_act *dy,
                       int64_t n);
/* tanh approximation (GPT-2's gelu_new). */
void rt_gelu_fwd(rt_act *y, const rt_act *x, int64_t n);
void rt_gelu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n);

/* Pieces of the last dim (the .mdl's slice and concat: multi-head latent
 * attention). rt_slice_fwd: y [rows, n] = x [rows, cols][:, at : at + n];
 * rt_slice_bwd writes dx [rows, cols] whole: dy in that place, zeros around.
 * rt_concat_fwd: y [rows, na + nb] = [a | b] with rows = outer x bcast x
 * inner and b [outer, inner, nb] broadcast over the bcast copies (DeepSeek's
 * rotated key part, shared by the heads; bcast 1: none); rt_concat_bwd
 * writes da and db, db summed over the copies in fp32. */
void rt_slice_fwd(rt_act *y, const rt_act *x, int64_t rows, int64_t cols, int64_t n, int64_t at);
void rt_slice_bwd(rt_act *dx, const rt_act *dy, int64_t rows, int64_t cols, int64_t n, int64_t at);
void rt_concat_fwd(rt_act *y, const rt_act *a, const rt_act *b, int64_t outer, int64_t bcast,
                   int64_t inner, int64_t na, int64_t nb);
void rt_concat_bwd(rt_act *da, rt_act *db, const rt_act *dy, int64_t outer, int64_t bcast,
                   int64_t inner, int64_t na, int64_t nb);

/* Mamba-2 (the .mdl's softplus, conv1d and ssd; docs/hybrid.md).
 * softplus: y = log(1 + exp(x)) (torch's, linear above 20).
 * rt_conv1d_fwd: the causal depthwise convolution over seq of x [batch,
 * seq, ch] with w [ch, k] and bias b [ch]: y[t, c] = b[c] + sum_j w[c, j]
 * x[t - k + 1 + j, c] (x zero before the sequence). rt_conv1d_bwd writes dx
 * and adds the weight's and bias's gradients into dw, db (fp32).
 * rt_ssd_fwd: the selective scan per (sequence, head), state S [n, p] from
 * zero: S_t = exp(dt_t A) S_{t-1} + dt_t B_t x_t^T, y_t = S_t^T C_t + D x_t,
 * A = -exp(A_log); x, y [batch, seq, heads, p], dt [batch, seq, heads],
 * A_log, D [heads], B, C [batch, seq, groups, n], head h reading group
 * h / (heads / groups). rt_ssd_bwd runs the scan in reverse from the
 * inputs (the states recomputed a chunk at a time): writes dx, ddt, dB, dC
 * and adds dA_log, dD (fp32); deterministic. */
void rt_softplus_fwd(rt_act *y, const rt_act *x, int64_t n);
void rt_softplus_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n);
void rt_conv1d_fwd(rt_act *y, const rt_act *x, const rt_act *w, const rt_act *b, int64_t batch, int64_t seq,
                   int64_t ch, int64_t k);
void rt_conv1d_bwd(rt_act *dx, rt_grad *dw, rt_grad *db, const rt_act *x, const rt_act *w, const rt_act *dy,
                   int64_t batch, int64_t seq, int64_t ch, int64_t k);
void rt_ssd_fwd(rt_act *y, const rt_act *x, const rt_act *dt, const rt_act *A_log, const rt_act *B,
                const rt_act *C, const rt_act *D, int64_t batch, int64_t seq, int64_t heads, int64_t groups,
                int64_t p, int64_t n);
void rt_ssd_bwd(rt_act *dx, rt_act *ddt, rt_grad *dA_log, rt_act *dB, rt_act *dC, rt_grad *dD, const rt_act *x,
                const rt_act *dt, const rt_act *A_log, const rt_act *B, const rt_act *C, const rt_act *D,
                const rt_act *dy, int64_t batch, int64_t seq, int64_t heads, int64_t groups, int64_t p, int64_t n);

/* out[i] = a[i] + b[i % nb]: b broadcast over a's leading dims (nb == n for
 * equal shapes). out may alias a. */
void rt_add(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb);
void rt_mul(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb);
/* out[j] = sum_i in[i * cols + j] (+ out[j] if accumulate): gradient of a
 * broadcast operand. */
void rt_reduce_rows(rt_act *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate);
void rt_reduce_rows_grad(rt_grad *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate);
/* Parameter gradients: acc[i] += x[i] for a contribution made in rt_act
 * (rt_grad_add) or a reduced fp32 shard (rt_grad_sum). */
void rt_grad_add(rt_grad *acc, const rt_act *x, int64_t n);
void rt_grad_sum(rt_grad *acc, const rt_grad *x, int64_t n);

void rt_softmax_fwd(rt_act *y, const rt_act *x, int64_t rows, int64_t cols);
void rt_softmax_bwd(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t rows, int64_t cols);

/* Cross-entropy of `rows` tokens whose logits columns
 * [vocab_offset, vocab_offset + vocab_local) live here; the other columns
 * live on the ranks of vocab_comm (NULL when the vocabulary is whole), with
 * which the row max, sum of exponentials and target logit are all-reduced.
 * Writes lse[rows] and adds weight * sum_i(loss_i) / total_rows to *loss (one
 * float in backend memory), so summing *loss over the data-parallel ranks
 * and micro-batches gives the (weighted) mean loss of the step. A target of
 * -1 is no target (multi-token prediction's shifted targets past the
 * sequence's end): its row adds nothing, total_rows counting only the others. */
void rt_cross_entropy_fwd(float *loss, float *lse, const rt_act *logits, const int32_t *targets,
                          int64_t rows, int64_t vocab_local, int64_t vocab_offset,
                          int64_t total_rows, float weight, RtComm *vocab_comm);
/* dlogits = (softmax(logits) - onehot(target)) * dloss / total_rows, 0 in a
 * row without target (-1). dlogits may be logits (in place: the generated
 * programs call it so). */
void rt_cross_entropy_bwd(rt_act *dlogits, const rt_act *logits, const int32_t *targets,
                          const float *lse, float dloss, int64_t rows, int64_t vocab_local,
                          int64_t vocab_offset, int64_t total_rows);

/* ---------------------------------------------------- mixture of experts */
/* The `route` and `moe` operators of docs/moe.md (the contract: exact math,
 * tie rules, capacity, the regularisers and the exchange split). */
typedef struct RtRoute {
    int topk;          /* k */
    int sigmoid;       /* 0: softmax scores, 1: sigmoid */
    int groups, group_topk; /* 0 or 1 groups: no group limit */
    int norm;          /* normalise the chosen weights */
    float scale;       /* routed scaling factor (1: none) */
    float capacity;    /* 0: dropless */
    float aux, zloss;  /* coefficients (0: off) */
} RtRoute;
/* Limits of both backends (the CUDA kernel keeps a token's scores in
 * registers): n_experts <= RT_ROUTE_MAX_EXPERTS, topk <= RT_ROUTE_MAX_TOPK. */
enum { RT_ROUTE_MAX_EXPERTS = 256, RT_ROUTE_MAX_TOPK = 8 };

/* gates, logits [seqs, seq_len, n_experts]: whole sequences (capacity and
 * aux count per sequence). Capacity C = ceil(capacity * seq_len * topk /
 * n_experts), computed in double from the float capacity. */
void rt_route_fwd(rt_act *gates, const rt_act *logits, int64_t seqs, int64_t seq_len,
                  int64_t n_experts, const RtRoute *r, float *objective, float weight,
                  int64_t global_seqs);
/* Gradient checks (train --grad-check): with RT_ROUTE_RECORD every
 * rt_route_fwd keeps a copy of its logits, in call order; with
 * RT_ROUTE_REPLAY the i-th call after it chooses (groups, top-k, capacity
 * drops) from the i-th copy and weighs from its own logits, so a
 * perturbed forward differentiates what the backward does: the selection
 * held fixed. RT_ROUTE_FREE: choose from the logits again (the default). */
enum { RT_ROUTE_FREE, RT_ROUTE_RECORD, RT_ROUTE_REPLAY };
void rt_route_freeze(int mode);
/* rt_route_fwd adds weight x the regularisers' value over its seqs
 * sequences (each one's aux_seq / global_seqs, zloss's terms / (global_seqs
 * seq_len)) to *objective, one float in backend memory (docs/moe.md); NULL
 * (a recomputation) adds nothing.
 * dlogits (overwritten) from dgates through the kept choices (gates != 0),
 * plus the gradients of aux and zloss; global_seqs: the sequences of the
 * global batch the regularisers average over. The selection is recomputed
 * from logits (aux counts the top-k before capacity drops). */
void rt_route_bwd(rt_act *dlogits, const rt_act *logits, const rt_act *gates,
                  const rt_act *dgates, int64_t seqs, int64_t seq_len, int64_t n_experts,
                  const RtRoute *r, int64_t global_seqs);

/* y[t] = sum over e with gates[t, e] != 0, ascending e, of gates[t, e] *
 * (silu(h[t] w_gate[e]) * (h[t] w_up[e])) w_down[e]. h, y [tokens, d_model];
 * w_gate, w_up [e_local, d_model, d_expert]; w_down [e_local, d_expert,
 * d_model]. ep == NULL: gates [tokens, gate_cols == e_local]. ep != NULL:
 * gates [tokens, gate_cols == e_local * size(ep)], rank r holding experts
 * [r e_local, (r+1) e_local); routed rows travel to their expert's rank and
 * back (collective over ep, every member calls it). */
void rt_moe_fwd(RtComm *ep, rt_act *y, const rt_act *h, const rt_act *gates,
                const rt_act *w_gate, const rt_act *w_up, const rt_act *w_down,
                int64_t tokens, int64_t d_model, int64_t gate_cols, int64_t e_local,
                int64_t d_expert);
/* dh, dgates overwritten; dw_* accumulate. Recomputes the routed rows'
 * first GEMMs (moe saves only h and gates). */
void rt_moe_bwd(RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up,
                rt_grad *dw_down, const rt_act *h, const rt_act *gates, const rt_act *w_gate,
                const rt_act *w_up, const rt_act *w_down, const rt_act *dy, int64_t tokens,
                int64_t d_model, int64_t gate_cols, int64_t e_local, int64_t d_expert);

/* The experts' activations (ir/moe_acts.def: codegen names them RT_MOE_<ID>
 * from its rows). A gated act computes act(a, b) with a = x w_gate + b_gate,
 * b = x w_up + b_up; an ungated one act(b) (w_gate, b_gate NULL). */
typedef enum {
    RT_MOE_SWIGLU,     /* silu(a) b */
    RT_MOE_RELU2,      /* max(b, 0)^2, no gate */
    RT_MOE_SWIGLU_OAI, /* GPT-OSS's clamped form (docs/moe.md) */
} RtMoeAct;
/* rt_moe_fwd / rt_moe_bwd for any act, with the biases inside the
 * activation (b_gate, b_up [e_local, d_expert]; NULL: none; db_* accumulate
 * like dw_*). rt_moe_fwd is this with RT_MOE_SWIGLU and no biases. */
void rt_moe_act_fwd(RtComm *ep, rt_act *y, const rt_act *h, const rt_act *gates,
                    const rt_act *w_gate, const rt_act *w_up, const rt_act *w_down,
                    const rt_act *b_gate, const rt_act *b_up, int act, int64_t tokens,
                    int64_t d_model, int64_t gate_cols, int64_t e_local, int64_t d_expert);
void rt_moe_act_bwd(RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up,
                    rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up, const rt_act *h,
                    const rt_act *gates, const rt_act *w_gate, const rt_act *w_up,
                    const rt_act *w_down, const rt_act *b_gate, const rt_act *b_up,
                    const rt_act *dy, int act, int64_t tokens, int64_t d_model,
                    int64_t gate_cols, int64_t e_local, int64_t d_expert);
/* ZB-H1's split of rt_moe_act_bwd (docs/codegen.md, "Pipelines"; Qi et
 * al.'s W, Megatron-Core's delayed wgrad of its grouped GEMMs): _b is
 * rt_moe_act_bwd without the experts' weight and bias gradients, leaving
 * what they read in wslot; _w makes them from it, accumulating as
 * rt_moe_act_bwd does. B then W are rt_moe_act_bwd, bitwise. wslot holds,
 * expert-major, at most rows_max routed rows as [rows_max, d_model] the
 * rows of h, [rows_max, d_model] their output gradients gate * dy,
 * [rows_max, d_expert] the activation's outputs, the up GEMM's gradients,
 * and (gated acts only) the gate GEMM's: numel rows_max (2 d_model + (2 +
 * gated) d_expert). Each local expert's row count stays on the host beside
 * the slot's address until the next _b on that slot. When more than
 * rows_max rows reach the rank (the slot sized for the expected rows,
 * plan_moe_wslot_rows), _b adds the gradients into dw_* itself, as
 * rt_moe_act_bwd, after running the W still pending on the layer's other
 * slots (those _b left with the same dw_down), oldest first, and each of
 * their _w does nothing: the sums are the same, in the same order, bitwise.
 * _b's dw_* may all be NULL (a slot that holds every row that can arrive:
 * overflowing it is rt_fatal). */
void rt_moe_act_bwd_b(RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up,
                      rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up, rt_act *wslot, int64_t rows_max,
                      const rt_act *h, const rt_act *gates, const rt_act *w_gate, const rt_act *w_up,
                      const rt_act *w_down, const rt_act *b_gate, const rt_act *b_up, const rt_act *dy,
                      int act, int64_t tokens, int64_t d_model, int64_t gate_cols, int64_t e_local,
                      int64_t d_expert);
void rt_moe_act_bwd_w(rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate,
                      rt_grad *db_up, const rt_act *wslot, int64_t rows_max, int act, int64_t d_model,
                      int64_t e_local, int64_t d_expert);

/* ------------------------------------------------------------- optimizer */
/* *out += sum(x^2) in fp32 (for the global gradient norm). */
void rt_sumsq(float *out, const rt_grad *x, int64_t n);
/* AdamW on one shard (torch.optim.AdamW semantics, bias-corrected, decoupled
 * weight decay): g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * master -= lr (mhat / (sqrt(vhat) + eps) + wd * master); param = master
 * rounded to rt_act. step counts from 1. On CPU param may alias master. */
void rt_adamw(float *master, rt_act *param, const rt_grad *grad, float *m, float *v, int64_t n,
              float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
              int step);
/* LAMB (You et al. 2020, "Large Batch Optimization for Deep Learning",
 * Algorithm 2) on one shard of a tensor, in two passes around the reduction of
 * the tensor's norms over the ranks holding its shards (the trainer batches
 * those sums of every tensor into one all-reduce). With g = grad * grad_scale,
 * mhat = m / (1 - b1^t), vhat = v / (1 - b2^t) (bias corrections in double,
 * applied in fp32 as multiplications by their inverses) and the update
 * r = mhat / (sqrt(vhat) + eps) + wd * master:
 *   prepare: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *            sums[0] += sum(master^2), sums[1] += sum(r^2) (fp32 out, each
 *            accumulated in double in a fixed order, as rt_sumsq);
 *   apply:   master -= lr * trust * r, r recomputed from m, v and master
 *            exactly as prepare computed it (no buffer for r); param = master
 *            rounded to rt_act. On CPU param may alias master.
 * trust is rt_lamb_trust of the reduced sums. step counts from 1. */
void rt_lamb_prepare(float *sums, const float *master, const rt_grad *grad, float *m, float *v,
                     int64_t n, float beta1, float beta2, float eps, float weight_decay,
                     float grad_scale, int step);
void rt_lamb_apply(float *master, rt_act *param, const float *m, const float *v, int64_t n,
                   float lr, float beta1, float beta2, float eps, float weight_decay, float trust,
                   int step);
/* The layer-wise trust ratio phi(||w||) / ||r|| of a whole tensor from its
 * sums of squares, phi(z) = min(z, phi_max) (the paper's clipping function
 * with gamma_l = 0, gamma_u = phi_max; phi_max <= 0: no clipping); 1 when
 * either norm is 0 (a zero-initialised tensor still moves; no update, no
 * division by zero). Host code, the same on both backends. */
double rt_lamb_trust(double w_sumsq, double r_sumsq, double phi_max);

/* ------------------------------------------------------ initialisation */
/* Parameter values independent of the sharding: element e (global row-major
 * index) of the parameter with key `key` is a pure function of (key, e), from
 * a counter-based generator. Fills the local block at `offset` of extent
 * `local` inside the global shape (rank dims) in fp32 host memory. */
enum { RT_INIT_NORMAL = 1, RT_INIT_ZEROS = 2, RT_INIT_ONES = 3 };
uint64_t rt_hash(const char *s); /* key of a parameter name */
void rt_init_param(float *host_dst, uint64_t key, int kind, double std, int rank,
                   const int64_t *global, const int64_t *offset, const int64_t *local);

/* ------------------------------------------------------------------ data */
/* A token source. spec: a path to an llm.c shard (256 int32 header, magic
 * 20240520, uint16 tokens), a raw token file ("u16:PATH" or "u32:PATH"), or
 * "synthetic:SEED" (a deterministic pseudo-random stream over the vocabulary). */
typedef struct RtData RtData;
RtData *rt_data_open(const char *spec, int64_t vocab, int64_t seq);
void rt_data_close(RtData *d);
/* Tokens and next-token targets of global sequence `index` (the index-th
 * sequence of the run: step * global_batch + position in the batch). */
void rt_data_sequence(RtData *d, int64_t index, int32_t *tokens, int32_t *targets);
/* rt_data_open that returns NULL with a sentence in err (naming the file and
 * the problem) instead of aborting; rt_data_open is this plus rt_fatal. */
RtData *rt_data_try_open(const char *spec, int64_t vocab, int64_t seq, char *err, size_t errlen);
/* Distinct sequences before the source wraps around (-1: synthetic, unbounded).
 * Sequence i reads window i mod this count (docs/runtime.md). */
int64_t rt_data_num_sequences(const RtData *d);

/* ------------------------------------------------- checkpoints, version 2 */
/* A checkpoint directory DIR holds one subdirectory per saved step,
 * DIR/step-000000123/ (at least 9 digits), with one file per rank
 * (rank00003.ckpt) and a manifest (manifest.json). A step is valid only once
 * its manifest exists: rank 0 writes it, atomically, after every rank has
 * written and synced its file; it lists every rank file with its size and
 * CRC-32C, the world size, the run id, the plan hash, the model's tensors
 * and shapes, the step and the data position. A save that fails or is
 * killed at any point leaves the previous complete step loadable.
 *
 * The save, on every rank r of a world of W ranks:
 *     rt_ckpt_write(dir, &meta, blobs, n, &rec, err, errlen);  // even if it fails
 *     gather every rank's rec on rank 0 (RT_CKPT_RECORD_WORDS int32 words each,
 *         rt_host_allgather on the world)
 *     rank 0: rt_ckpt_commit(dir, &meta, recs, W, model, nmodel, ...), then
 *             rt_ckpt_prune(dir, keep, ...)
 *     every rank: rt_host_max(world, rank 0's failure flag): the outcome and
 *         the barrier at once.
 * The load: rank 0 finds the step (rt_ckpt_open_latest), broadcasts it
 * (rt_host_max); every rank opens it (rt_ckpt_open_step), checks it against
 * the program (rt_ckpt_check_program) and reads its own file (rt_ckpt_read);
 * the ranks agree on success (rt_host_max of a failure flag) and, when a
 * rank file turns out damaged, may try the next older step
 * (rt_ckpt_open_latest with `before`).
 * Step numbers and data positions are int64 everywhere. Functions return 0
 * (or a pointer), or -1 (NULL) with one sentence in err naming the file and
 * the problem. */
enum { RT_CKPT_MAXDIM = 8, RT_RUN_ID_BYTES = 16, RT_PLAN_HASH_MAX = 255 };
typedef enum {
    RT_DT_F32 = 1,
    RT_DT_BF16 = 2,
    RT_DT_F16 = 3,
    RT_DT_I32 = 4,
    RT_DT_U8 = 5, /* bytes: any state without a tensor type */
} RtDtype;

/* What one save is: identical on every rank of the save but for `rank`. */
typedef struct {
    uint8_t run_id[RT_RUN_ID_BYTES]; /* rt_run_id_new at the run's first step; kept on resume */
    /* The lineage: rt_run_id_new at the first step and at each rollback (a
     * resume from a step directory given by name); kept by a plain resume.
     * All zero: the run id. A rollback's lineage names where it forked:
     * parent_lineage's step parent_step (parent_lineage all zero: none). Steps
     * of the parent lineage after parent_step are abandoned (docs/runtime.md). */
    uint8_t lineage[RT_RUN_ID_BYTES];
    uint8_t parent_lineage[RT_RUN_ID_BYTES];
    int64_t parent_step;
    const char *plan_hash;           /* the program's plan hash, at most RT_PLAN_HASH_MAX bytes */
    const char *optimizer;           /* whose moments m, v are ("adamw", "lamb"); NULL: "adamw" */
    int64_t step;                    /* optimizer steps done (>= 0) */
    int64_t data_pos;                /* sequences consumed (>= 0) */
    int rank, world;
} RtCkptMeta;

/* One blob of a rank file: the part of a model tensor (or of any named
 * array) this rank holds. The rank's copy of the tensor is the block
 * [offset, offset + local) of the global shape; of that block (row-major) the
 * blob holds the elements [flat_start, flat_start + flat_count): all of them
 * (0, numel) unless the state is flat-sharded (ZeRO). `bytes` is at least
 * flat_count elements; bytes after them are padding. */
typedef struct {
    const char *name;  /* unique, at most 4095 bytes, e.g. "master:layers.0.wq" */
    void *data;        /* backend memory: read by rt_ckpt_write, written by rt_ckpt_read */
    int64_t bytes;
    RtDtype dtype;
    int ndim;          /* 0 .. RT_CKPT_MAXDIM */
    int64_t global[RT_CKPT_MAXDIM];
    int64_t offset[RT_CKPT_MAXDIM];
    int64_t local[RT_CKPT_MAXDIM];
    int64_t flat_start, flat_count;
} RtCkptBlob;

/* A tensor of the whole model (every pipeline rank's) as the manifest
 * records it; a load compares names, dtypes and shapes. */
typedef struct {
    const char *name;
    RtDtype dtype;
    int ndim;
    int64_t shape[RT_CKPT_MAXDIM];
} RtCkptTensor;

/* What each rank reports after writing its file; plain words, so it can be
 * gathered as RT_CKPT_RECORD_WORDS int32 values. */
typedef struct {
    int32_t rank, world;
    int32_t status;   /* 0: the file is written and synced; else an errno value (or -1) */
    uint32_t crc;     /* CRC-32C of the rank file (its trailer's) */
    int64_t step, bytes;
    uint8_t run_id[RT_RUN_ID_BYTES];
} RtCkptRecord;
enum { RT_CKPT_RECORD_WORDS = (int)(sizeof(RtCkptRecord) / 4) };

/* 128 random bits (getrandom); never all zero. */
int rt_run_id_new(uint8_t id[RT_RUN_ID_BYTES], char *err, size_t errlen);
void rt_run_id_hex(const uint8_t id[RT_RUN_ID_BYTES], char out[2 * RT_RUN_ID_BYTES + 1]);

/* Every rank: write DIR/step-N/rankR.ckpt (temporary, fsync, rename, fsync
 * of the directory; DIR and the step directory are created as needed, a
 * stale manifest of the same step is removed first). Fills *rec on success
 * and on failure (status != 0), so the gather that follows never hangs. */
int rt_ckpt_write(const char *dir, const RtCkptMeta *meta, const RtCkptBlob *blobs, int n,
                  RtCkptRecord *rec, char *err, size_t errlen);
/* rt_ckpt_write of blobs whose data is host memory (a staging copy of the
 * state): the same file, byte for byte, written without a backend call (no
 * rt_to_host, no stream) and without MPI, so that a thread other than the
 * one driving the backend may call it (the trainer's asynchronous saves). */
int rt_ckpt_write_host(const char *dir, const RtCkptMeta *meta, const RtCkptBlob *blobs, int n,
                       RtCkptRecord *rec, char *err, size_t errlen);
/* Rank 0, with the records of ranks 0 .. world-1 in rank order: checks that
 * every rank wrote this step of this run, then writes the manifest
 * atomically and syncs DIR. Fails, committing nothing, if any did not. */
int rt_ckpt_commit(const char *dir, const RtCkptMeta *meta, const RtCkptRecord *recs, int nrecs,
                   const RtCkptTensor *model, int nmodel, char *err, size_t errlen);
/* Rank 0, after committing `meta`'s step: keep the newest `keep` complete
 * steps of meta's lineage (keep >= 1; the newest is never removed) and remove
 * older ones of that lineage, and incomplete or damaged step directories
 * older than its newest complete step that hold nothing of another run.
 * Steps of other runs or lineages are never removed; a step entry that is a
 * symbolic link (or not a directory) is never followed or removed: a line
 * in notes says so. One line per removed directory is appended to notes. */
int rt_ckpt_prune(const char *dir, const RtCkptMeta *meta, int keep, char *notes,
                  size_t noteslen, char *err, size_t errlen);

/* Rank 0, before the first step of a job that saves into DIR: create DIR
 * (mkdir -p) and lock DIR/.ptdc-save.lock (flock, held until the process
 * ends; the file names the holder's pid and host), and check that
 * need_bytes (0: unknown) are free there. Returns the lock's descriptor (>=
 * 0, left open), or -1 with a sentence: another job holds the lock (naming
 * it), DIR cannot be created or written, or there is not room
 * (ckpt_lock.c). */
int rt_ckpt_lock(const char *dir, int64_t need_bytes, char *err, size_t errlen);
/* Can an output be written at path: a directory (created with its missing
 * parents if need be) or a file (its directory must exist)? Tried by
 * creating and removing a file there: 0, or -1 with a sentence naming path
 * and the reason (outcheck.c). */
int rt_output_check(const char *path, bool dir, char *err, size_t errlen);

typedef struct RtCkpt RtCkpt; /* one complete step, its manifest read and checked */
/* The newest complete step of DIR below `before` (INT64_MAX: any) that no
 * rollback abandoned, or DIR itself when it is a step directory. A step of
 * lineage L is abandoned when a complete step in DIR belongs to a lineage
 * forked from L at an older step. Incomplete, damaged and abandoned steps
 * are skipped, each with a line in notes saying why; when DIR holds steps of
 * other runs, a line names the run chosen and the others. NULL when there is
 * none. */
RtCkpt *rt_ckpt_open_latest(const char *dir, int64_t before, char *notes, size_t noteslen,
                            char *err, size_t errlen);
RtCkpt *rt_ckpt_open_step(const char *dir, int64_t step, char *err, size_t errlen);
void rt_ckpt_close(RtCkpt *c);
const char *rt_ckpt_dir(const RtCkpt *c); /* DIR/step-000000123 */
int64_t rt_ckpt_step(const RtCkpt *c);
int64_t rt_ckpt_data_pos(const RtCkpt *c);
int rt_ckpt_world(const RtCkpt *c);
const uint8_t *rt_ckpt_run_id(const RtCkpt *c);
const uint8_t *rt_ckpt_lineage(const RtCkpt *c);
/* Where the step's lineage forked: *step -1 for a fresh run's. */
const uint8_t *rt_ckpt_parent(const RtCkpt *c, int64_t *step);
/* Is path a step directory (it holds a manifest.json)? */
bool rt_ckpt_is_step_dir(const char *path);
const char *rt_ckpt_plan_hash(const RtCkpt *c);
/* The optimizer the manifest names; "adamw" for manifests written before it
 * was recorded (AdamW was then the only one). */
const char *rt_ckpt_optimizer(const RtCkpt *c);
/* The checkpoint against the program: world size, plan hash, and the model's
 * tensors (the same names, dtypes and shapes). */
int rt_ckpt_check_program(const RtCkpt *c, int world, const char *plan_hash,
                          const RtCkptTensor *model, int nmodel, char *err, size_t errlen);
/* The model's tensors only: what a load under another plan must agree on. */
int rt_ckpt_check_model(const RtCkpt *c, const RtCkptTensor *model, int nmodel, char *err,
                        size_t errlen);
/* Read rank `rank`'s file into the blobs. Refused before any blob is
 * written: a file of another rank, world size, run, step or plan, one whose
 * size or CRC differs from the manifest's, and blobs that differ in name,
 * dtype, shape, block or size. The payload's CRC is checked as it streams
 * into the blobs: if it fails, the blobs hold garbage and -1 is returned. */
int rt_ckpt_read(const RtCkpt *c, int rank, const RtCkptBlob *blobs, int n, char *err,
                 size_t errlen);
/* Resharding: fill the blobs from whichever rank files of the checkpoint hold
 * their elements, whatever plan and world size saved it (ckpt_reshard.c).
 * Element e of a blob is the tensor element it names (global shape, block,
 * flat range); it is taken from an entry of the same name, dtype and global
 * shape whose block and flat range hold it. Refused before any blob is
 * written: a rank file that does not belong to the manifest (as
 * rt_ckpt_read), an entry of another shape or dtype, and an element no
 * rank file holds. Every rank file holding something is read whole, its
 * CRC checked as it streams; if one fails, the blobs hold garbage. */
int rt_ckpt_read_any(const RtCkpt *c, const RtCkptBlob *blobs, int n, char *err,
                     size_t errlen);
/* rt_ckpt_read_any with the reading shared over the world (rt_comm_world;
 * collective; every rank passes its own blobs), so that each rank file is
 * read from storage once where ranks need the same files: the index of rank
 * file r is read by rank r % size and broadcast (rt_host_bcast); then the
 * ranks that need the same set of rank files form a group, and the k-th of
 * those files is read by member k % size and broadcast to the others as it
 * streams (only the bytes their blobs take when the members' blobs are
 * alike, as data-parallel replicas' are; else whole), followed by the
 * reader's outcome, so that every member fails with the reader's sentence
 * naming the file and none waits. Failures of one rank's own are agreed
 * over the world too. world NULL: read alone (rt_ckpt_read_any). *io counts
 * this rank's part. */
typedef struct {
    int64_t state;    /* payload bytes of rank files read from storage here */
    int64_t meta;     /* their headers, indexes and trailers read here */
    int64_t received; /* bytes received by broadcast from other ranks */
    int group;        /* ranks in this rank's group for the payloads */
} RtCkptIo;
int rt_ckpt_read_shared(const RtCkpt *c, RtComm *world, const RtCkptBlob *blobs, int n,
                        RtCkptIo *io, char *err, size_t errlen);

/* ----------------------------------------------------------- safetensors */
/* Hugging Face safetensors files (8-byte little-endian header length, JSON
 * header, data), read strictly: malformed JSON, unknown dtypes, shapes that
 * disagree with data_offsets, overlapping or gapped data are refused.
 * All tensor data is exchanged as fp32 host memory. Functions returning int
 * give 0, or -1 with a sentence in err naming the file and the problem.
 *
 * A model parameter maps onto a file tensor as the .mdl `hf` clause says:
 * the parameter is slice `part` of `nparts` equal slices of the file
 * tensor's last dim (0 of 1: the whole tensor), or with nparts given as
 * RT_ST_INTERLEAVED(n) part `part` of n parts interleaved along it (its
 * element j at file index j x n + part: GPT-OSS's gate_up_proj alternates
 * gate and up columns), then transposed when `transposed` (2-D only: HF
 * stores linear weights [out, in]). Blocks are
 * given like rt_init_param: `rank` dims, the parameter's global shape, and
 * the local block's offset and extent in parameter coordinates. */
enum { RT_ST_MAXDIM = 8 };
#define RT_ST_INTERLEAVED(n) (-(n)) /* nparts of interleaved parts (above) */
typedef struct RtSt RtSt;
/* path: a .safetensors file; a shard index (*.index.json: "weight_map" from
 * tensor to shard file beside it); or a Hugging Face model directory, read
 * through its model.safetensors, else its model.safetensors.index.json (the
 * order of transformers' from_pretrained). The tensors of all shards then act
 * as one file. */
RtSt *rt_st_open(const char *path, char *err, size_t errlen);
void rt_st_close(RtSt *st);
int rt_st_count(const RtSt *st); /* tensors, sorted by name */
const char *rt_st_name(const RtSt *st, int i);
/* Index of `name` or -1; fills *ndim, shape[RT_ST_MAXDIM] and *dtype
 * ("F32", "BF16", ...) when found (each may be NULL). */
int rt_st_find(const RtSt *st, const char *name, int *ndim, int64_t *shape, const char **dtype);
/* Value of a `__metadata__` entry, or NULL. */
const char *rt_st_metadata(const RtSt *st, const char *key);
/* Read the local block of a parameter from file tensor `name` (dtype F32,
 * BF16 or F16) as fp32; the file tensor's shape must match `global` under
 * the mapping. */
int rt_st_read(const RtSt *st, const char *name, bool transposed, int part, int nparts, int rank,
               const int64_t *global, const int64_t *offset, const int64_t *local, float *dst,
               char *err, size_t errlen);
/* Bytes of tensor data rt_st_read has read from st's files so far (a
 * block's elements times the file dtype's size). */
int64_t rt_st_bytes_read(const RtSt *st);
/* Which of a tensor's two names st uses: `name`, or `alt` (NULL: it has one),
 * its name with or without the model class's base_model_prefix (GPT-2's
 * `transformer.`, LLaMA's `model.`: transformers saves and loads both
 * layouts). The name present; NULL with err naming both names and the file
 * when neither is, or both are (which one is meant is never guessed). */
const char *rt_st_pick(const RtSt *st, const char *name, const char *alt, char *err,
                       size_t errlen);

/* Writing: declare every file tensor first (sorted into the header with
 * `__metadata__` {"format":"pt"}), then put parameter blocks in any order
 * and sharding (host fp32, one process writes the file); close checks that
 * each tensor received as many elements as it holds (it does not detect
 * overlapping blocks), then commits atomically like checkpoints. dtype:
 * "F32", "BF16" or "F16" (both rounded to nearest even). */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[RT_ST_MAXDIM];
} RtStTensor;
typedef struct RtStWriter RtStWriter;
RtStWriter *rt_st_writer_open(const char *path, const RtStTensor *tensors, int n,
                              const char *dtype, char *err, size_t errlen);
/* A Hugging Face model directory (created if missing), laid out as
 * save_pretrained does: tensors in declared order fill shards of at most
 * max_shard_bytes (a larger tensor gets its own), written as
 * model-00001-of-0000N.safetensors ... with model.safetensors.index.json
 * ({"metadata": {"total_size"}, "weight_map"}), or as model.safetensors
 * alone when one shard holds everything. Model files of an earlier export
 * that this one does not use are removed at close. */
RtStWriter *rt_st_writer_open_dir(const char *dir, const RtStTensor *tensors, int n,
                                  const char *dtype, int64_t max_shard_bytes, char *err,
                                  size_t errlen);
int rt_st_writer_put(RtStWriter *w, const char *name, bool transposed, int part, int nparts,
                     int rank, const int64_t *global, const int64_t *offset, const int64_t *local,
                     const float *src, char *err, size_t errlen);
/* A directory writer's other files: `name` is config.json or
 * generation_config.json, `data` its bytes (copied). Written at close, each
 * atomically, after the shards and the index, config.json last: DIR's
 * config.json is the mark of a complete export, so close removes the one an
 * earlier export left before the first shard moves into place, and one of
 * these files an earlier export left that this one does not write is
 * removed with its stale shards. A directory never holds a config.json
 * beside weights of another export or of an unfinished one. */
int rt_st_writer_add_file(RtStWriter *w, const char *name, const void *data, size_t len,
                          char *err, size_t errlen);
/* Completes the file (or fails, leaving `path` untouched); frees w either way. */
int rt_st_writer_close(RtStWriter *w, char *err, size_t errlen);
/* Abandons the file: removes the temporary, leaves `path` untouched. */
void rt_st_writer_abort(RtStWriter *w);

#ifdef __cplusplus
}
#endif
#endif
