/* train.h: what the trainer's own files (trainer.c, train_*.c) share; model.c
 * sees only trainer.h. Each section names the file that defines it, and each
 * file calls only the files whose sections come before its own (trainer.c's
 * main calls them all). Common subset of C11 and C++, as trainer.h. */
#ifndef PTDC_TRAIN_H
#define PTDC_TRAIN_H

#include "trainer.h"

/* ---------------------------------------------------------- train_state.c */
typedef struct Flags {
    long steps, decay_steps, save_every, warmup;
    long keep;                       /* --keep: complete checkpoint steps kept */
    long max_skips;                  /* --max-skips: non-finite steps in a row before aborting */
    const char *data, *load, *save, *import_hf, *export_hf, *export_dtype, *dump;
    long long shard_bytes; /* --max-shard-size */
    double lr, min_lr, clip, weight_decay, beta1, beta2, eps;
    double timeout;                  /* --timeout seconds; < 0: the runtime's default */
    unsigned long long seed;
    int grad_check;
    int save_sync;                   /* --save-sync: every save inside the step boundary */
    int diagnose;                    /* --diagnose: train_diag.c's self-test first */
    const char *optimizer;           /* --optimizer: "adamw" (default) or "lamb" */
    double trust_max;                /* --lamb-trust-max: LAMB's phi clips ||w|| to it (0: off) */
} Flags;

extern Flags tr_fl;              /* parsed by trainer.c */
extern const CgRank *tr_prog;    /* what this rank's pipeline rank runs */
extern int tr_pp_rank, tr_mesh_index, tr_world_rank;
extern RtComm *tr_world, *tr_tied[64]; /* every rank; each tied group's copies */
extern int64_t tr_step;          /* steps done */
extern int64_t tr_data_pos;      /* sequences consumed: the next step reads from here */

#define ROOT (tr_world_rank == 0)
int tr_mesh_size(int axis);      /* CG_MESH0, CG_MESH1 or CG_MESH2 */
/* This rank's block of p's global tensor: offset and extent per dim. */
void tr_block(const CgParam *p, int64_t *off, int64_t *loc);

/* --------------------------------------------------------- train_health.c */
/* Stragglers and slow pipeline links (PTDC_HEALTH, docs/runtime.md). */
void tr_health_init(void);               /* after tr_prof_init */
void tr_health_step_begin(void);         /* before a step */
void tr_health_step(double seconds);     /* after it (tr_step counts it); collective every
                                            PTDC_HEALTH_EVERY steps */
void tr_health_report(void);             /* collective, at the end: the last window */
void tr_health_wait(int call, double s); /* a listed call that waited s seconds (ignores others) */
void tr_health_recv(int pp_peer, double s); /* cg_recv from pipeline rank pp_peer */

/* ---------------------------------------------------------- train_where.c */
/* Where this rank is, for the watchdog's stall report (rt_set_where). */
void tr_where_init(void);
void tr_where_step(void);                    /* a step starts (tr_step + 1) */
void tr_where_op(int bwd, int chunk, int mb); /* a stage forward or backward starts */
void tr_where_phase(const char *what);       /* other work: a static string */

/* ---------------------------------------------------------- train_trace.c */
/* PTDC_TRACE=FILE (docs/trace.md). Collective: checks FILE (every rank
 * exits 2 when it cannot be written, rank 0 saying why) and aligns the
 * ranks' clocks; nothing when unset. */
void tr_trace_init(void);
void tr_trace_step_begin(void);  /* before a step: records it while under PTDC_TRACE_STEPS */
void tr_trace_step_end(void);    /* after it (collective: writes FILE after the last traced step) */
void tr_trace_finish(void);      /* collective, at the end: writes FILE if not yet written */
/* While cg_prof_on & CG_TIMED_TRACE: spans from t0 to now (rt_time). */
void tr_trace_call(int call, double t0, double t1);  /* a listed call cg_prof_add timed */
void tr_trace_op(const CgSchedOp *op, double t0);    /* a stage forward or backward */
void tr_trace_span(const char *name, double t0);     /* other work on the compute lane */
/* A non-blocking collective's issue: elems of type t over c. */
void tr_trace_issue(const char *name, double t0, const RtComm *c, int64_t elems, RtType t);
/* A pipeline receive (recv 1: until the data is there) or send (its post). */
void tr_trace_p2p(int recv, double t0, int64_t n, RtType t, int pp_peer, int tag);

/* ---------------------------------------------------------- train_sched.c */
void tr_make_comms(void);
/* Elements of p's parameter and gradient buffers (a whole number of ZeRO shards). */
int64_t tr_padded(const CgParam *p);
/* train_cp.c: the position of row `row` of the sequence dim (context
 * parallelism's load-balanced order; the row itself otherwise). */
int64_t tr_cp_position(int64_t row);
/* The CP ranks of this rank's stage as a point-to-point ring (NULL without
 * context parallelism), made with the other communicators. */
extern RtComm *tr_cp_ring;
/* Does this rank count a value replicated along the mesh axes in mask (its
 * coordinate on them is 0)? */
int tr_counts(int mask);
void tr_run_schedule(void);
/* Under PTDC_TIME_GEMM (trainer.c): a GEMM call's start, then its time and
 * the FLOPs of its count GEMMs of M x N x K into the step's GEMM share. */
double tr_gemm_start(void);
void tr_gemm_end(double t0, int count, int64_t M, int64_t N, int64_t K);
void tr_reduce_grads(void);
double tr_world_loss(void);
extern int tr_overlap;           /* buckets and non-blocking all-gathers (PTDC_OVERLAP, default 1) */
void tr_buckets_init(void);      /* after bind (it sorts the gradients' addresses) */
void tr_buckets_free(void);
void tr_push_req(RtReq *r);      /* a non-blocking collective tr_wait_reqs completes */
void tr_wait_reqs(void);

/* ----------------------------------------------------------- train_data.c */
void tr_data_open(void);         /* --data, or rt_fatal */
void tr_data_close(void);

/* ---------------------------------------------------------- train_optim.c */
double tr_grad_sumsq(int only);
/* CG_MASTER_ALIAS: point each fp32 master at the parameter block AdamW
 * writes (after bind; the parameter's values are the master's). */
void tr_alias_masters(void);
/* One step; false when the loss or the gradient norm is not finite and the
 * update was skipped (every rank sees the same values, so all skip). */
bool tr_step_once(double *loss, double *norm, double *lr);
/* Collective: are every rank's fp32 masters and AdamW moments finite? */
bool tr_state_finite(void);
/* Collective: the loss of the current weights on the next step's batch
 * (forwards only, a third of a step): what a checkpoint of this state would
 * resume with. */
double tr_forward_loss(void);

/* ----------------------------------------------------------- train_lamb.c */
/* LAMB's per-tensor sums of squares (||w||^2, ||r||^2), whole tensors over
 * the world. Per step: tr_lamb_zero; rt_lamb_prepare of parameter i into
 * tr_lamb_sums(i); tr_lamb_norms (collective) gives the world's sums, the
 * pair of parameter i at 2 tr_lamb_slot(i). */
void tr_lamb_zero(void);
float *tr_lamb_sums(int i);
const float *tr_lamb_norms(void);
int tr_lamb_slot(int i);

/* ------------------------------------------------------ train_gradcheck.c */
int tr_grad_check(double tol);   /* tensors outside tol */

/* ----------------------------------------------------------- train_ckpt.c */
/* Collective, before the first step: --save is not a step directory, is
 * writable, has room for a checkpoint and is locked for this job; --export-hf
 * is writable. Every rank exits 2 otherwise, rank 0 saying why. */
void tr_check_outputs(void);
void tr_ckpt_new_run(void);      /* collective: a fresh run id (rank 0's) */
/* Collective: save step tr_step into DIR/step-N; 0, or -1 on every rank when
 * the step was not committed (the previous complete step stays loadable). */
int tr_save_checkpoint(const char *dir);
/* Collective: the newest complete step of DIR (this plan's or another's),
 * or exit 1 with the reason. */
void tr_load_checkpoint(const char *dir);
/* The parts of a save, for train_ckpt_async.c. This rank's share of the
 * state it saves, as blobs whose data is the state itself (backend memory): */
typedef struct {
    RtCkptBlob *b;
    int n;
    char *names;
} TrBlobs;
TrBlobs tr_ckpt_blobs(void);
void tr_ckpt_blobs_free(TrBlobs *B);
void tr_ckpt_meta(RtCkptMeta *m);  /* what a save of step tr_step says of itself */
/* Collective: gather every rank's record of m's step; rank 0 commits the
 * manifest and prunes. 0, or -1 on every rank when it was not committed. */
int tr_ckpt_commit(const char *dir, const RtCkptMeta *m, const RtCkptRecord *rec);

/* ----------------------------------------------------- train_ckpt_async.c */
/* Collective: save step tr_step into DIR (--save), asynchronously unless
 * --save-sync (first waiting for a save still in flight); checks_s, the
 * time the caller spent checking the state, counts in the time the line
 * "saved checkpoint of step N ..." says the step loop was blocked. 0, or -1
 * on every rank when a save was not committed. */
int tr_save(const char *dir, double checks_s);
/* Collective, at every step boundary: commit the save in flight once every
 * rank's writer has finished (with wait, waiting for them). 0 when there is
 * none or it was committed or is still being written; -1 when it failed. */
int tr_save_poll(bool wait);
/* Collective: tr_save_poll(true), then the staging buffer freed. */
int tr_save_finish(void);

/* ---------------------------------------------------------- train_hfdir.c */
int tr_hf_is_file(const char *path);  /* --export-hf PATH.safetensors: one file */
/* Why --export-hf path cannot be written (a directory of a model without a
 * Hugging Face config), or NULL. */
const char *tr_hf_export_refused(const char *path);
/* Rank 0, at import: keep the generation_config.json of the model directory
 * import_path names (itself, or the one holding its shard index), if any. */
void tr_hf_keep_generation_config(const char *import_path);
/* config.json (torch_dtype of dtype) and the kept generation_config.json
 * into a directory export. */
void tr_hf_add_files(RtStWriter *w, const char *dtype);
/* The name st holds the tensor `name` under: itself, or with or without the
 * architecture's base_model_prefix; exits naming both when neither or both. */
const char *tr_hf_import_name(const RtSt *st, const char *name);

/* ------------------------------------------------------------- train_hf.c */
void tr_init_params(void);       /* seeded, or --import-hf */
/* Every parameter's weights (grads 0) or reduced gradients (grads 1), whole,
 * under its Hugging Face name and layout, gathered to rank 0, which writes path
 * (a .safetensors file, or a directory of shards) in dtype ("F32", "BF16", "F16"). */
void tr_write_hf(const char *path, int grads, const char *dtype);
void tr_export_hf(const char *path); /* tr_write_hf(path, 0) and a line saying so */
/* The whole of p in buf on every rank of its pipeline rank, from src: the
 * local tensor, or (sharded) this rank's ZeRO shard of it, of elements w
 * rt_act wide (1: weights; sizeof(rt_grad) / sizeof(rt_act): gradients).
 * tmp and scratch hold as much as buf. */
void tr_gather_full(const CgParam *p, const void *src, int w, int sharded, rt_act *buf,
                    rt_act *tmp, rt_act *scratch);

/* ----------------------------------------------------------- train_dump.c */
/* cg_load calls this for every block it loads (the dump places each logits
 * block by the targets it was scored against; shifted targets, multi-token
 * prediction's, score logits the dump leaves out). */
void tr_dump_note_load(const int32_t *dst, int which, int mb, int64_t b0, int64_t nb, int64_t s0,
                       int64_t ns, int64_t shift);
void tr_dump_first_step(const char *dir); /* --dump-first-step */

/* ----------------------------------------------------------- train_prof.c */
/* train_diag.c: --diagnose. Collective: GEMM, all-reduce and pipeline
 * transfer rates of every rank beside the others' and the plan's (rank 0
 * prints them); argv0 locates plan.json. */
void tr_diagnose(const char *argv0);
void tr_prof_init(void);           /* PTDC_PROFILE */
void tr_prof_step(double seconds); /* after each step (tr_step counts it) */
void tr_prof_report(void);         /* collective: every rank calls it at the end */

/* ----------------------------------------------------------- train_load.c */
/* FNV-1a of n bytes, continuing h: what a rank loads, so that ranks loading
 * the same find each other. */
uint64_t tr_load_hash(uint64_t h, const void *data, size_t n);
bool tr_load_bcast_on(void); /* PTDC_LOAD_BCAST is not 0 */
/* Collective over the world: the ranks whose hash is this one's (every rank
 * alone when PTDC_LOAD_BCAST=0), ordered by world rank. */
RtComm *tr_load_group(uint64_t hash);
/* Collective: one line on rank 0 with the load's bytes over all ranks (state
 * read from storage, received by broadcast, headers and indexes), the
 * largest group and the slowest rank's seconds; meta < 0: not counted. */
void tr_load_report(const char *what, int64_t state, int64_t meta, int64_t received, int group,
                    double seconds);

/* ------------------------------------------------------------ train_env.c */
/* Collective: 1 when the ranks see different values of the environment
 * variables that change what a rank issues or computes (rank 0 says which). */
int tr_env_check(void);

#endif
