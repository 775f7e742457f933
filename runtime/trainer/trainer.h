/* trainer.h: the interface between a generated model (model.c, model.h) and
 * the fixed training driver (trainer.c and train_*.c), written by ptdc's code
 * generator.
 *
 * model.c describes every pipeline rank of the plan: its stage functions (one
 * forward and one backward per model chunk, for one micro-batch), its
 * micro-batch schedule, its parameters and its static memory plan. The
 * trainer runs one rank: it binds the plan to one rt_alloc arena, initialises
 * or loads the weights, walks the schedule every step, reduces gradients,
 * clips, runs AdamW and writes checkpoints. All compile as C11 and as CUDA
 * C++. What model.c and model.h define is model_abi.h; this header adds what
 * model.c calls in the trainer. */
#ifndef PTDC_TRAINER_H
#define PTDC_TRAINER_H

#include "rt.h"

#include <stdint.h>

#include "model_abi.h" /* CgRank, CgParam, CG_MEM_*: what model.c and model.h define */
#include "model.h"

/* model.h defines the plan's constants model_abi.h lists (a program whose
 * model.h and trainer disagree stops here). */
#if !defined(CG_MODEL) || !defined(CG_WORLD) || !defined(CG_PP) || !defined(CG_DEVICES) ||     \
    !defined(CG_NAXES) || !defined(CG_MESH0) || !defined(CG_MESH1) || !defined(CG_AXIS0) ||   \
    !defined(CG_AXIS1) || !defined(CG_MESH2) || !defined(CG_AXIS2) || !defined(CG_CP) ||      \
    !defined(CG_CP_BALANCED) || !defined(CG_CP_AXIS) || !defined(CG_NUM_MICRO) || !defined(CG_MB_SEQS) ||                    \
    !defined(CG_GLOBAL_BATCH) || !defined(CG_SEQ) || !defined(CG_VOCAB) || !defined(CG_ZERO) || \
    !defined(CG_NTIED) || !defined(CG_MASTER_ALIAS) || !defined(CG_LOSS_PP) ||                 \
    !defined(CG_LOSS_MASK) || !defined(CG_PLAN) || !defined(CG_PLAN_HASH)
#error "model.h lacks a constant of model_abi.h"
#endif
extern const CgRank cg_ranks[CG_PP];

/* ------------------------------------------ what generated code calls */
extern RtComm *g_comm[8];      /* g_comm[m]: the ranks of this stage differing only along the
                                  mesh axes in bitmask m (NULL for m = 0) */
extern int g_coord[3];         /* this rank's mesh coordinate */
extern float *g_loss;          /* the step's loss, summed by cross-entropy; [1] the gradients'
                                  sum of squares; [2] the routers' regularisers (docs/moe.md) */
extern rt_act *g_scratch;      /* staging area of the *_dim collectives */
extern rt_act *g_ws_act;       /* workspace of one piece function */
extern float *g_ws_f32;
extern int32_t *g_ws_i32;

/* rt_matmul, timed (rt_time, which synchronises on CUDA) when the
 * environment sets PTDC_TIME_GEMM: the step log then shows the GEMM share. */
void cg_matmul(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
               bool ta, bool tb, bool accumulate);
void cg_matmul_grad(rt_grad *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
                    bool ta, bool tb, bool accumulate);
/* rt_matmul_batch / rt_matmul_grad_batch, likewise (one timing per call). */
void cg_matmul_batch(int count, rt_act *const c[], const rt_act *const a[], const rt_act *const b[],
                     int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool accumulate);
void cg_matmul_grad_batch(int count, rt_grad *const c[], const rt_act *const a[],
                          const rt_act *const b[], int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                          bool accumulate);

/* A GEMM in FP8 with per-tensor current scaling (train_fp8.c), as
 * rt_matmul's arguments and then each operand's format and the group its
 * amax is max-reduced over (NULL: this rank holds the whole tensor). */
void cg_matmul_fp8(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K, bool ta,
                   bool tb, bool accumulate, RtFp8Format fa, RtFp8Format fb, RtComm *ga, RtComm *gb);
/* The same into an fp32 gradient accumulator (as rt_matmul_grad). */
void cg_matmul_fp8_grad(rt_grad *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
                        bool ta, bool tb, bool accumulate, RtFp8Format fa, RtFp8Format fb, RtComm *ga,
                        RtComm *gb);

/* This op's backward has made its last contribution to the gradient g (a
 * parameter's accumulator). After the last micro-batch of every chunk
 * holding it, the parameter is complete; when its bucket's parameters all
 * are, the bucket's reduction starts (train_sched.c) while the backward goes
 * on, and the optimizer waits for it. */
void cg_grad_ready(const rt_grad *g);

/* rt_cross_entropy_fwd; under --dump-first-step it also keeps the logits it
 * scored (train_dump.c). Generated code calls it through the rt_cross_entropy_fwd
 * macro below. */
void cg_cross_entropy_fwd(float *loss, float *lse, const rt_act *logits, const int32_t *targets,
                          int64_t rows, int64_t vocab_local, int64_t vocab_offset,
                          int64_t total_rows, float weight, RtComm *vocab_comm);

/* Context parallelism (train_cp.c, docs/context.md): attention of this
 * rank's Sq queries, rank r of cp along the sequence, against all Sk keys
 * and values gathered in rank order; rt_attention_pos_fwd/bwd at the
 * positions the plan puts them. */
void cg_attention_cp_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                         int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                         bool causal, int64_t window, int cp, int r);
void cg_attention_cp_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                         const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                         int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                         bool causal, int64_t window, int cp, int r);

/* The ring form (rt_attention_ring_fwd/bwd): q, k, v this rank's Sq rows;
 * the blocks travel the CP ranks' ring (tr_cp_ring, train_cp.c). */
void cg_attention_ring_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                           int64_t B, int64_t Sq, int64_t H, int64_t KVH, int64_t D, bool causal,
                           int64_t window, int cp, int r);
void cg_attention_ring_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                           const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                           int64_t B, int64_t Sq, int64_t H, int64_t KVH, int64_t D, bool causal,
                           int64_t window, int cp, int r);

/* The all-to-all form: q, k, v the whole sequence (S rows, the program's
 * order) of this rank's H heads (KVH key/value heads), after the all-to-all
 * over the cp axis (train_cp.c). */
void cg_attention_a2a_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                          int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                          int64_t window);
void cg_attention_a2a_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                          const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                          int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                          int64_t window);

/* rt_rope and rt_rope_llama3 over rows [row0, row0 + seq) of the sequence
 * dim, each at its position in context parallelism's load-balanced order
 * (train_cp.c); with CG_CP_BALANCED 0 exactly the rt_ calls. */
void cg_rope(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
             int64_t row0, float theta, bool inverse);
void cg_rope_llama3(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner,
                    int64_t dim, int64_t row0, float theta, float factor, float low_freq_factor,
                    float high_freq_factor, float original_max_position, bool inverse);

/* Receive into buf from the rank of pipeline rank pp_peer with this mesh coordinate. */
void cg_recv(void *buf, int64_t n, RtType t, int pp_peer, int tag);
/* Post a send (waiting first for the one *req still had in flight). */
void cg_send(RtReq **req, const void *buf, int64_t n, RtType t, int pp_peer, int tag);
void cg_wait(RtReq **req);
/* Tokens or targets of micro-batch mb of the current step: sequences
 * [b0, b0 + nb) of the micro-batch, positions [s0, s0 + ns). */
void cg_load(int32_t *dst, int which, int mb, int64_t b0, int64_t nb, int64_t s0, int64_t ns,
             int64_t shift, int32_t fill);

/* ------------------------------------------------------------- profiling */
/* With PTDC_PROFILE=1 every runtime call the program makes is timed
 * (rt_time, which synchronises on CUDA) and the step log is followed by a
 * table of the time per step in each call, so a measured step can be taken
 * apart the way the cost model's prediction is (train_prof.c). Off, a call
 * costs one untaken branch. Communication the main thread waits for shows in
 * the collectives, cg_recv, cg_wait and rt_wait (the non-blocking
 * collectives' completion; cg_grad_ready and cg_issue are their issue):
 * together, the exposed communication. A listed function
 * calling another listed one calls it as (name)(...), unprofiled, so no
 * time counts twice. */
#define CG_PROFILED(X)                                                                        \
    X(cg_matmul) X(rt_attention_fwd) X(rt_attention_bwd) X(rt_embedding_fwd)                  \
    X(rt_embedding_bwd) X(rt_rmsnorm_fwd) X(rt_add_rmsnorm_fwd) X(rt_rmsnorm_bwd)             \
    X(rt_layernorm_fwd) X(rt_add_layernorm_fwd) X(rt_layernorm_bwd) X(rt_rope)                \
    X(rt_silu_fwd) X(rt_silu_bwd)                                                             \
    X(rt_gelu_fwd) X(rt_gelu_bwd) X(rt_swiglu_fwd) X(rt_swiglu_bwd) X(rt_add) X(rt_mul)       \
    X(rt_reduce_rows) X(rt_softmax_fwd) X(rt_softmax_bwd)                                     \
    X(rt_cross_entropy_fwd) X(rt_cross_entropy_bwd) X(rt_zero) X(rt_copy) X(rt_sumsq)         \
    X(rt_adamw) X(rt_allreduce) X(rt_reduce_scatter) X(rt_allgather) X(rt_alltoall)           \
    X(rt_allgather_dim) X(rt_reduce_scatter_dim) X(rt_alltoall_dim) X(rt_slice_dim)           \
    X(cg_recv) X(cg_wait) X(cg_load) X(cg_matmul_grad) X(rt_reduce_rows_grad)                 \
    X(rt_grad_add) X(rt_grad_sum) X(cg_grad_ready) X(rt_wait) X(cg_issue)                     \
    X(cg_matmul_batch) X(cg_matmul_grad_batch) X(cg_matmul_fp8) X(cg_matmul_fp8_grad)          \
    X(rt_moe_fwd) X(rt_moe_bwd) X(rt_moe_act_fwd) X(rt_moe_act_bwd) X(rt_moe_act_bwd_b)        \
    X(rt_moe_act_bwd_w)
enum {
#define CG_PF_ENUM(f) CG_PF_##f,
    CG_PROFILED(CG_PF_ENUM)
#undef CG_PF_ENUM
    CG_PF_N
};
/* Who times the calls now: PTDC_PROFILE's table (train_prof.c) and
 * PTDC_TRACE's timeline during its traced steps (train_trace.c); 0, the
 * usual case, costs one untaken branch per call. */
extern int cg_prof_on;
/* CG_TIMED_HEALTH (train_health.c, PTDC_HEALTH): only the calls that wait
 * for other ranks (collectives, cg_recv, cg_wait, rt_wait) are timed, so a
 * step splits into compute and wait at two clock reads per wait. */
enum { CG_TIMED_PROFILE = 1, CG_TIMED_TRACE = 2, CG_TIMED_HEALTH = 4,
       CG_TIMED_ALL = CG_TIMED_PROFILE | CG_TIMED_TRACE };
/* The listed call this rank entered last (train_where.c names it when the
 * watchdog reports a stall): one store per call, always. */
extern volatile int cg_last_call;
void cg_prof_add(int call, double t0);
/* A collective's end: cg_prof_add, and for the trace its communicator and
 * bytes: elems of type t, times the group's size (scale 1: the gathered or
 * scattered whole), divided by it (-1) or as they are (0). */
void cg_prof_comm(int call, double t0, const RtComm *c, int64_t elems, RtType t, int scale);
#define CG_PROF_IF(mask, k, call)                                                             \
    do {                                                                                      \
        cg_last_call = (k);                                                                   \
        double cg_t0_ = cg_prof_on & (mask) ? rt_time() : 0;                                  \
        call;                                                                                 \
        if (cg_prof_on & (mask))                                                              \
            cg_prof_add(k, cg_t0_);                                                           \
    } while (0)
/* A call that computes (timed by PTDC_PROFILE and PTDC_TRACE), and one that
 * waits for other ranks (by PTDC_HEALTH too). */
#define CG_PROF(k, call) CG_PROF_IF(CG_TIMED_ALL, k, call)
#define CG_PROF_WAIT(k, call) CG_PROF_IF(~0, k, call)
/* A collective: the arguments the trace reads are evaluated again, only
 * while calls are timed (generated code passes plain expressions). */
#define CG_PROF_COMM(k, call, c, elems, t, scale)                                             \
    do {                                                                                      \
        cg_last_call = (k);                                                                   \
        double cg_t0_ = cg_prof_on ? rt_time() : 0;                                           \
        call;                                                                                 \
        if (cg_prof_on)                                                                       \
            cg_prof_comm(k, cg_t0_, c, elems, t, scale);                                      \
    } while (0)
/* Calls as statements, timed (a function-like macro does not expand inside
 * itself, so each names the real function). */
#define cg_matmul(...) CG_PROF(CG_PF_cg_matmul, cg_matmul(__VA_ARGS__))
#define cg_matmul_fp8(...) CG_PROF(CG_PF_cg_matmul_fp8, cg_matmul_fp8(__VA_ARGS__))
#define cg_matmul_fp8_grad(...) CG_PROF(CG_PF_cg_matmul_fp8_grad, cg_matmul_fp8_grad(__VA_ARGS__))
#define rt_attention_fwd(...) CG_PROF(CG_PF_rt_attention_fwd, rt_attention_fwd(__VA_ARGS__))
#define rt_attention_bwd(...) CG_PROF(CG_PF_rt_attention_bwd, rt_attention_bwd(__VA_ARGS__))
#define rt_embedding_fwd(...) CG_PROF(CG_PF_rt_embedding_fwd, rt_embedding_fwd(__VA_ARGS__))
#define rt_embedding_bwd(...) CG_PROF(CG_PF_rt_embedding_bwd, rt_embedding_bwd(__VA_ARGS__))
#define rt_rmsnorm_fwd(...) CG_PROF(CG_PF_rt_rmsnorm_fwd, rt_rmsnorm_fwd(__VA_ARGS__))
#define rt_add_rmsnorm_fwd(...) CG_PROF(CG_PF_rt_add_rmsnorm_fwd, rt_add_rmsnorm_fwd(__VA_ARGS__))
#define rt_rmsnorm_bwd(...) CG_PROF(CG_PF_rt_rmsnorm_bwd, rt_rmsnorm_bwd(__VA_ARGS__))
#define rt_layernorm_fwd(...) CG_PROF(CG_PF_rt_layernorm_fwd, rt_layernorm_fwd(__VA_ARGS__))
#define rt_add_layernorm_fwd(...) CG_PROF(CG_PF_rt_add_layernorm_fwd, rt_add_layernorm_fwd(__VA_ARGS__))
#define rt_layernorm_bwd(...) CG_PROF(CG_PF_rt_layernorm_bwd, rt_layernorm_bwd(__VA_ARGS__))
#define rt_rope(...) CG_PROF(CG_PF_rt_rope, rt_rope(__VA_ARGS__))
#define rt_silu_fwd(...) CG_PROF(CG_PF_rt_silu_fwd, rt_silu_fwd(__VA_ARGS__))
#define rt_silu_bwd(...) CG_PROF(CG_PF_rt_silu_bwd, rt_silu_bwd(__VA_ARGS__))
#define rt_swiglu_fwd(...) CG_PROF(CG_PF_rt_swiglu_fwd, rt_swiglu_fwd(__VA_ARGS__))
#define rt_swiglu_bwd(...) CG_PROF(CG_PF_rt_swiglu_bwd, rt_swiglu_bwd(__VA_ARGS__))
#define rt_gelu_fwd(...) CG_PROF(CG_PF_rt_gelu_fwd, rt_gelu_fwd(__VA_ARGS__))
#define rt_gelu_bwd(...) CG_PROF(CG_PF_rt_gelu_bwd, rt_gelu_bwd(__VA_ARGS__))
#define rt_add(...) CG_PROF(CG_PF_rt_add, rt_add(__VA_ARGS__))
#define rt_mul(...) CG_PROF(CG_PF_rt_mul, rt_mul(__VA_ARGS__))
#define rt_reduce_rows(...) CG_PROF(CG_PF_rt_reduce_rows, rt_reduce_rows(__VA_ARGS__))
#define rt_softmax_fwd(...) CG_PROF(CG_PF_rt_softmax_fwd, rt_softmax_fwd(__VA_ARGS__))
#define rt_softmax_bwd(...) CG_PROF(CG_PF_rt_softmax_bwd, rt_softmax_bwd(__VA_ARGS__))
#define rt_cross_entropy_fwd(...) CG_PROF(CG_PF_rt_cross_entropy_fwd, cg_cross_entropy_fwd(__VA_ARGS__))
#define rt_cross_entropy_bwd(...) CG_PROF(CG_PF_rt_cross_entropy_bwd, rt_cross_entropy_bwd(__VA_ARGS__))
#define rt_zero(...) CG_PROF(CG_PF_rt_zero, rt_zero(__VA_ARGS__))
#define rt_copy(...) CG_PROF(CG_PF_rt_copy, rt_copy(__VA_ARGS__))
#define rt_sumsq(...) CG_PROF(CG_PF_rt_sumsq, rt_sumsq(__VA_ARGS__))
#define rt_adamw(...) CG_PROF(CG_PF_rt_adamw, rt_adamw(__VA_ARGS__))
#define rt_allreduce(c, b, n, t) CG_PROF_COMM(CG_PF_rt_allreduce, rt_allreduce(c, b, n, t), c, n, t, 0)
#define rt_reduce_scatter(c, o, i, n, t) CG_PROF_COMM(CG_PF_rt_reduce_scatter, rt_reduce_scatter(c, o, i, n, t), c, n, t, 1)
#define rt_allgather(c, o, i, n, t) CG_PROF_COMM(CG_PF_rt_allgather, rt_allgather(c, o, i, n, t), c, n, t, 1)
#define rt_alltoall(c, o, i, n, t) CG_PROF_COMM(CG_PF_rt_alltoall, rt_alltoall(c, o, i, n, t), c, n, t, 1)
#define rt_allgather_dim(c, o, i, outer, d, inner, s)                                         \
    CG_PROF_COMM(CG_PF_rt_allgather_dim, rt_allgather_dim(c, o, i, outer, d, inner, s), c,     \
                 (outer) * (d) * (inner), RT_ACT, 1)
#define rt_reduce_scatter_dim(c, o, i, outer, d, inner, s)                                    \
    CG_PROF_COMM(CG_PF_rt_reduce_scatter_dim, rt_reduce_scatter_dim(c, o, i, outer, d, inner, s), \
                 c, (outer) * (d) * (inner), RT_ACT, 1)
#define rt_alltoall_dim(c, o, i, outer, d1, mid, d2, inner, ts, s)                            \
    CG_PROF_COMM(CG_PF_rt_alltoall_dim, rt_alltoall_dim(c, o, i, outer, d1, mid, d2, inner, ts, s), \
                 c, (outer) * (d1) * (mid) * (d2) * (inner), RT_ACT, -1)
#define rt_slice_dim(...) CG_PROF(CG_PF_rt_slice_dim, rt_slice_dim(__VA_ARGS__))
#define cg_recv(...) CG_PROF_WAIT(CG_PF_cg_recv, cg_recv(__VA_ARGS__))
#define cg_wait(...) CG_PROF_WAIT(CG_PF_cg_wait, cg_wait(__VA_ARGS__))
#define cg_load(...) CG_PROF(CG_PF_cg_load, cg_load(__VA_ARGS__))
#define cg_matmul_grad(...) CG_PROF(CG_PF_cg_matmul_grad, cg_matmul_grad(__VA_ARGS__))
#define cg_matmul_batch(...) CG_PROF(CG_PF_cg_matmul_batch, cg_matmul_batch(__VA_ARGS__))
#define cg_matmul_grad_batch(...) CG_PROF(CG_PF_cg_matmul_grad_batch, cg_matmul_grad_batch(__VA_ARGS__))
#define rt_reduce_rows_grad(...) CG_PROF(CG_PF_rt_reduce_rows_grad, rt_reduce_rows_grad(__VA_ARGS__))
#define rt_grad_add(...) CG_PROF(CG_PF_rt_grad_add, rt_grad_add(__VA_ARGS__))
#define rt_grad_sum(...) CG_PROF(CG_PF_rt_grad_sum, rt_grad_sum(__VA_ARGS__))
#define cg_grad_ready(...) CG_PROF(CG_PF_cg_grad_ready, cg_grad_ready(__VA_ARGS__))
#define rt_wait(...) CG_PROF_WAIT(CG_PF_rt_wait, rt_wait(__VA_ARGS__))
/* an MoE layer's experts (their exchanges inside: compute and wait together) */
#define rt_moe_fwd(...) CG_PROF(CG_PF_rt_moe_fwd, rt_moe_fwd(__VA_ARGS__))
#define rt_moe_bwd(...) CG_PROF(CG_PF_rt_moe_bwd, rt_moe_bwd(__VA_ARGS__))
#define rt_moe_act_fwd(...) CG_PROF(CG_PF_rt_moe_act_fwd, rt_moe_act_fwd(__VA_ARGS__))
#define rt_moe_act_bwd(...) CG_PROF(CG_PF_rt_moe_act_bwd, rt_moe_act_bwd(__VA_ARGS__))
#define rt_moe_act_bwd_b(...) CG_PROF(CG_PF_rt_moe_act_bwd_b, rt_moe_act_bwd_b(__VA_ARGS__))
#define rt_moe_act_bwd_w(...) CG_PROF(CG_PF_rt_moe_act_bwd_w, rt_moe_act_bwd_w(__VA_ARGS__))
/* cg_issue has no macro: the trainer times the non-blocking collectives it
 * issues outside cg_grad_ready (train_sched.c, train_optim.c). */

#endif
