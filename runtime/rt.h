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
 * run is bitwise reproducible on the same rank layout.
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
 * activations (offsets are planned at compile time). Device memory on CUDA. */
void *rt_alloc(size_t bytes);
void rt_free(void *p);
void rt_zero(void *dst, size_t bytes);
void rt_copy(void *dst, const void *src, size_t bytes);
/* Host <-> backend memory (plain memcpy on CPU). */
void rt_to_device(void *dst, const void *host_src, size_t bytes);
void rt_to_host(void *host_dst, const void *src, size_t bytes);
/* Convert between fp32 host arrays and rt_act buffers. */
void rt_act_from_f32(rt_act *dst, const float *host_src, int64_t n);
void rt_act_to_f32(float *host_dst, const rt_act *src, int64_t n);

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
/* out holds n_in * size elements: block r from rank r. */
void rt_allgather(RtComm *c, void *out, const void *in, int64_t n_in, RtType t);
/* Block r of `in` goes to rank r; block r of `out` comes from rank r. */
void rt_alltoall(RtComm *c, void *out, const void *in, int64_t n_per_rank, RtType t);
void rt_bcast(RtComm *c, void *buf, int64_t n, RtType t, int root);
/* Point-to-point between ranks of c (pipeline neighbours). The non-blocking
 * pair lets a 1F1B schedule post a send and a receive without deadlock. */
typedef struct RtReq RtReq;
RtReq *rt_isend(RtComm *c, const void *buf, int64_t n, RtType t, int peer, int tag);
RtReq *rt_irecv(RtComm *c, void *buf, int64_t n, RtType t, int peer, int tag);
void rt_wait(RtReq *r); /* completes and frees */

/* Collectives along a middle dim. A local tensor [outer, d, inner] split
 * `parts` ways along d is stored contiguously per rank; these move blocks so
 * that gathers, scatters and slices along any dim reduce to the collectives
 * above. `scratch` holds outer * parts * d * inner elements. */
void rt_allgather_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d_local,
                      int64_t inner, rt_act *scratch);
void rt_reduce_scatter_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d_local,
                           int64_t inner, rt_act *scratch);
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

/* --------------------------------------------------------------- kernels */
/* C[M,N] = op(A) op(B) (+ C if accumulate). A is [M,K] ([K,M] if ta); B is
 * [K,N] ([N,K] if tb). fp32 accumulation on both backends. */
void rt_matmul(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
               bool ta, bool tb, bool accumulate);

/* out[i, :] = table[ids[i] - vocab_offset, :] for ids inside this rank's rows
 * [vocab_offset, vocab_offset + vocab_local), zeros otherwise (the partial
 * sums of a vocabulary-parallel embedding). Ids outside [0, vocab) abort. */
void rt_embedding_fwd(rt_act *out, const int32_t *ids, const rt_act *table, int64_t n,
                      int64_t vocab_local, int64_t vocab_offset, int64_t dim);
/* dtable[ids[i] - offset, :] += dout[i, :] for ids in range; deterministic. */
void rt_embedding_bwd(rt_act *dtable, const int32_t *ids, const rt_act *dout, int64_t n,
                      int64_t vocab_local, int64_t vocab_offset, int64_t dim);

/* y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) per row (HF LlamaRMSNorm). */
void rt_rmsnorm_fwd(rt_act *y, float *rstd, const rt_act *x, const rt_act *w, int64_t rows,
                    int64_t cols, float eps);
void rt_rmsnorm_bwd(rt_act *dx, rt_act *dw, const rt_act *x, const rt_act *w, const float *rstd,
                    const rt_act *dy, int64_t rows, int64_t cols);
/* y = (x - mean) * rstd * w + b (torch LayerNorm, biased variance). */
void rt_layernorm_fwd(rt_act *y, float *mean, float *rstd, const rt_act *x, const rt_act *w,
                      const rt_act *b, int64_t rows, int64_t cols, float eps);
void rt_layernorm_bwd(rt_act *dx, rt_act *dw, rt_act *db, const rt_act *x, const rt_act *w,
                      const float *mean, const float *rstd, const rt_act *dy, int64_t rows,
                      int64_t cols);

/* Rotary embedding, rotate-half form of HF LLaMA. x is [outer, seq, inner,
 * dim]: element (o, s, i, j) sits at position pos_offset + s; for j < dim/2,
 * with f = theta^(-2j/dim) and a = position * f:
 *   y[j] = x[j] cos a - x[j + dim/2] sin a,  y[j + dim/2] = x[j + dim/2] cos a + x[j] sin a.
 * inverse = true applies the transposed rotation (the backward). */
void rt_rope(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
             int64_t pos_offset, float theta, bool inverse);

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

void rt_silu_fwd(rt_act *y, const rt_act *x, int64_t n);
void rt_silu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n);
/* tanh approximation (GPT-2's gelu_new). */
void rt_gelu_fwd(rt_act *y, const rt_act *x, int64_t n);
void rt_gelu_bwd(rt_act *dx, const rt_act *x, const rt_act *dy, int64_t n);

/* out[i] = a[i] + b[i % nb]: b broadcast over a's leading dims (nb == n for
 * equal shapes). out may alias a. */
void rt_add(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb);
void rt_mul(rt_act *out, const rt_act *a, const rt_act *b, int64_t n, int64_t nb);
/* out[j] = sum_i in[i * cols + j] (+ out[j] if accumulate): gradient of a
 * broadcast operand. */
void rt_reduce_rows(rt_act *out, const rt_act *in, int64_t rows, int64_t cols, bool accumulate);

void rt_softmax_fwd(rt_act *y, const rt_act *x, int64_t rows, int64_t cols);
void rt_softmax_bwd(rt_act *dx, const rt_act *y, const rt_act *dy, int64_t rows, int64_t cols);

/* Cross-entropy of `rows` tokens whose logits columns
 * [vocab_offset, vocab_offset + vocab_local) live here; the other columns
 * live on the ranks of vocab_comm (NULL when the vocabulary is whole), with
 * which the row max, sum of exponentials and target logit are all-reduced.
 * Writes lse[rows] and adds sum_i(loss_i) / total_rows to *loss (one float in
 * backend memory), so summing *loss over the data-parallel ranks and
 * micro-batches gives the mean loss of the step. */
void rt_cross_entropy_fwd(float *loss, float *lse, const rt_act *logits, const int32_t *targets,
                          int64_t rows, int64_t vocab_local, int64_t vocab_offset,
                          int64_t total_rows, RtComm *vocab_comm);
/* dlogits = (softmax(logits) - onehot(target)) * dloss / total_rows. */
void rt_cross_entropy_bwd(rt_act *dlogits, const rt_act *logits, const int32_t *targets,
                          const float *lse, float dloss, int64_t rows, int64_t vocab_local,
                          int64_t vocab_offset, int64_t total_rows);

/* ------------------------------------------------------------- optimizer */
/* *out += sum(x^2) in fp32 (for the global gradient norm). */
void rt_sumsq(float *out, const rt_act *x, int64_t n);
/* AdamW on one shard (torch.optim.AdamW semantics, bias-corrected, decoupled
 * weight decay): g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * master -= lr (mhat / (sqrt(vhat) + eps) + wd * master); param = master
 * rounded to rt_act. step counts from 1. On CPU param may alias master. */
void rt_adamw(float *master, rt_act *param, const rt_act *grad, float *m, float *v, int64_t n,
              float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
              int step);

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

/* ----------------------------------------------------------- checkpoints */
/* One file per rank holds that rank's shard: named blobs, the step and the
 * data position (format: docs/runtime.md). A blob's bytes live in backend
 * memory (e.g. inside the rt_alloc arena) and are staged through host memory.
 * Generated code names blobs "param:<name>", "master:<name>", "adam_m:<name>",
 * "adam_v:<name>"; names are at most 4095 bytes and unique.
 * Save writes a temporary file in the same directory, fsyncs it, renames it
 * over `path` and fsyncs the directory, so `path` always holds a complete
 * checkpoint. Load checks magic, version, sizes, names and the CRC32C of the
 * whole file before it writes a byte into the blobs; the file must hold
 * exactly these names (in any order) with these sizes. Both return 0, or -1
 * with a sentence in err naming the file and the problem. */
typedef struct {
    const char *name;
    void *data;    /* backend memory: read by save, overwritten by load */
    int64_t bytes;
} RtBlob;
int rt_ckpt_save(const char *path, const RtBlob *blobs, int n, int64_t step, int64_t data_pos,
                 char *err, size_t errlen);
int rt_ckpt_load(const char *path, const RtBlob *blobs, int n, int64_t *step, int64_t *data_pos,
                 char *err, size_t errlen);

/* ----------------------------------------------------------- safetensors */
/* Hugging Face safetensors files (8-byte little-endian header length, JSON
 * header, data), read strictly: malformed JSON, unknown dtypes, shapes that
 * disagree with data_offsets, overlapping or gapped data are refused.
 * All tensor data is exchanged as fp32 host memory. Functions returning int
 * give 0, or -1 with a sentence in err naming the file and the problem.
 *
 * A model parameter maps onto a file tensor as the .mdl `hf` clause says:
 * the parameter is slice `part` of `nparts` equal slices of the file
 * tensor's last dim (0 of 1: the whole tensor), then transposed when
 * `transposed` (2-D only: HF stores linear weights [out, in]). Blocks are
 * given like rt_init_param: `rank` dims, the parameter's global shape, and
 * the local block's offset and extent in parameter coordinates. */
enum { RT_ST_MAXDIM = 8 };
typedef struct RtSt RtSt;
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

/* Writing: declare every file tensor first (sorted into the header with
 * `__metadata__` {"format":"pt"}), then put parameter blocks in any order
 * and sharding (host fp32, one process writes the file); close checks that
 * each tensor received as many elements as it holds (it does not detect
 * overlapping blocks), then commits atomically like checkpoints. dtype:
 * "F32" or "BF16" (rounded to nearest even). */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[RT_ST_MAXDIM];
} RtStTensor;
typedef struct RtStWriter RtStWriter;
RtStWriter *rt_st_writer_open(const char *path, const RtStTensor *tensors, int n,
                              const char *dtype, char *err, size_t errlen);
int rt_st_writer_put(RtStWriter *w, const char *name, bool transposed, int part, int nparts,
                     int rank, const int64_t *global, const int64_t *offset, const int64_t *local,
                     const float *src, char *err, size_t errlen);
/* Completes the file (or fails, leaving `path` untouched); frees w either way. */
int rt_st_writer_close(RtStWriter *w, char *err, size_t errlen);
/* Abandons the file: removes the temporary, leaves `path` untouched. */
void rt_st_writer_abort(RtStWriter *w);

#ifdef __cplusplus
}
#endif
#endif
