/* codegen.h: exports of codegen/: per-rank training programs from an IR graph
 * with its backward (pass_autodiff) and a parallel plan (Plan).
 *
 * cg_emit writes DIR with
 *   model.h, model.c   the generated model: piece structs and functions, the
 *                      pipeline stages, schedules, parameter tables and the
 *                      static memory plan of every pipeline rank
 *   trainer.h, train.h, trainer.c, train_*.c  the fixed training driver
 *                      (runtime/trainer/): flags and the step loop, process
 *                      groups and the schedule, gradient reduction, ZeRO,
 *                      clipping, AdamW, checkpoints, initialisation,
 *                      safetensors, data
 *   Makefile           builds `train` against the ptdc tree's runtime
 *   run.sh             builds, then launches every rank (mpirun, or srun
 *                      under Slurm), passing its flags to each rank
 *   hf_config.json     the config.json of `--export-hf DIR`, when the model
 *                      is a Hugging Face architecture ptdc states exactly
 *                      (otherwise a note says why, and the program refuses
 *                      directory exports)
 * One program serves every rank: a rank runs the stage chunks of its
 * pipeline rank (docs/codegen.md). The files are written to a temporary
 * directory next to DIR and moved into place only when all are complete. */
#ifndef PTDC_CODEGEN_H
#define PTDC_CODEGEN_H

#include "ir.h"
#include "plan.h"
#include "autodiff.h"

typedef enum {
    CG_TARGET_CPU,  /* fp32, OpenBLAS, MPI: libptdrt_cpu.a */
    CG_TARGET_CUDA, /* bf16, cuBLAS, NCCL: libptdrt_cuda.a, nvcc for sm_80 and sm_90 */
} CgTarget;

typedef struct CgOptions {
    CgTarget target;
    const char *runtime_include; /* directory holding rt.h */
    const char *runtime_lib;     /* libptdrt_cpu.a or libptdrt_cuda.a */
    const char *cc;              /* C compiler for the CPU target (mpicc) */
    const char *nvcc;            /* CUDA target */
    const char *mpirun;          /* launcher used by run.sh outside Slurm */
    const char *blas_lib;        /* OpenBLAS (CPU target) */
    const char *mpi_include;     /* CUDA target: MPI headers and libraries for nvcc */
    const char *mpi_libs;
    const char *cuda_libs;       /* CUDA target: -lcublas -lcublasLt -lnccl ... */
    const char *cuda_include;    /* CUDA target: the toolkit's headers (train-emu) */
    const char *emu_lib;         /* CUDA target: train-emu's emulated runtime archive */
    const char *extra_cflags;    /* e.g. the sanitizer flags the runtime was built with */
    int64_t bucket_elems;        /* gradient bucket size; 0: the target's (cg_bucket.c) */
} CgOptions;

/* Paths of the tree ptdc itself was built in (runtime/rt.h, the runtime
 * libraries, MPI, OpenBLAS, CUDA), for `target`. */
void cg_options_default(CgOptions *o, CgTarget target);

/* Generate the program for graph g (forward and backward, verified) under
 * plan p into directory dir. On a user error (a plan the program cannot
 * execute, a model outside what codegen supports, an unwritable DIR) it
 * reports with ir_error and returns false, leaving DIR as it was. */
/* Every file name cg_emit may write into DIR (NULL-terminated): what -o
 * must not find there unless ptdc wrote it (ir_outdir_check). */
const char *const *cg_output_names(void);
bool cg_emit(const IrGraph *g, const Plan *p, const CgOptions *o, const char *dir);
/* Whether ptdc's programs compute a plan in format p: bf16, and fp8 with
 * per-tensor current scaling (docs/precision.md). MXFP8's and NVFP4's block
 * scales are planned and priced but not programmed; cg_emit refuses them. */
bool cg_precision_runs(PlanPrecision p);
/* Does codegen run schedule s? 1F1B, interleaved and ZB-H1 (the backward
 * split into B and the deferred weight gradients W, which read B's copies of
 * their inputs in W slots: docs/codegen.md, "Pipelines"). */
bool cg_schedule_runs(PlanSchedule s);

/* The static memory plan cg_emit writes for each pipeline rank, in bytes at
 * the target's element sizes (weights, gradients and activations in rt_act:
 * bf16 on CUDA, fp32 on CPU; optimizer state fp32). The program prints the
 * same numbers at start-up; for the CUDA target they are what the cost
 * model predicts (tests/codegen/memplan.c checks it). */
typedef struct CgMemPlan {
    double params, grads, optim, acts, workspace;
} CgMemPlan;

/* Fill out[0 .. p->pp - 1]; false (with an ir_error) on a plan codegen
 * cannot execute. g must carry its backward (pass_autodiff). */
bool cg_memory_plan(const IrGraph *g, const Plan *p, CgTarget target, CgMemPlan *out);

#endif
