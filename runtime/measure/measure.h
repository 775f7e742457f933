/* measure.h: ptdc-measure, the program `ptdc calibrate` launches (prefix
 * cal_; the compiler's side is calibrate/).
 *
 * ptdc-measure is written against runtime/rt.h only, like the programs ptdc
 * generates, and builds for both backends: C with the CPU backend, CUDA C++
 * with the CUDA backend. It times the runtime's own kernels and collectives
 * and prints raw records on stdout (rank 0); `ptdc calibrate` fits the cost
 * model's parameters to them (calibrate/cal_fit.c). Keeping the fit out of
 * this program means a record file can be refitted, and tested, without the
 * machine it came from. Record format: records.h (docs/cost-model.md,
 * "Calibration records").
 *
 * Calls run one way, down this header: measure.c's main calls the parts
 * (m_compute.c, m_comm.c, m_memory.c, m_share.c, m_sync.c), which call only
 * m_util.c, which calls only the runtime. */
#ifndef PTDC_MEASURE_H
#define PTDC_MEASURE_H

#include "rt.h"
#include "records.h"

#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------- m_util.c */
typedef struct CalOpts {
    double budget_s;              /* target seconds per timed point */
    int quick;                    /* fewer points (tests) */
    int rank, size;               /* world */
    int threads;                  /* threads per rank asked for (0: the runtime's default) */
    int gpu;                      /* the CUDA backend: shapes sized for a GPU, not a core */
} CalOpts;

/* Before any timing (allocates the buffer the slowest rank's time crosses). */
void cal_util_init(void);
/* One median-of-samples timing: f(arg) is run in batches sized so a batch
 * takes about budget/samples seconds; returns seconds per call. Every rank
 * of comm runs it together (NULL: this rank alone) and the slowest rank's
 * time is taken, since a collective step waits for it. */
typedef void (*CalFn)(void *arg);
double cal_time(const CalOpts *o, RtComm *comm, CalFn f, void *arg);
/* Seconds per call of f with its buffers out of the caches: before every
 * call (untimed) evict(arg) flushes them; the median of single calls, each
 * the slowest rank's. For what a training step's kernels leave behind. */
double cal_time_cold(const CalOpts *o, RtComm *comm, CalFn f, CalFn evict, void *arg);
/* Flush bytes [p, p + n) out of every cache level (host memory). */
void cal_evict(const void *p, size_t n);
/* The median of v[0..n) (sorts v). */
double cal_median(double *v, int n);

/* Backend buffers with deterministic contents. */
rt_act *cal_act(int64_t n, float scale);
float *cal_f32(int64_t n, float value);
int32_t *cal_ids(int64_t n, int64_t modulo);

/* Output (rank 0 only) and progress (stderr, rank 0 only). */
void cal_out(const CalOpts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cal_progress(const CalOpts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The CPUs the ranks run on together: the union of their affinity masks
 * (collective over the world). */
int cal_cpus(void);

/* ------------------------------------- the parts (measure.c calls them) */

/* m_compute.c */
void cal_measure_gemm(const CalOpts *o);
void cal_measure_kernels(const CalOpts *o);
void cal_measure_attention(const CalOpts *o);
void cal_measure_comm(const CalOpts *o);   /* m_comm.c */
void cal_measure_memory(const CalOpts *o); /* m_memory.c */
/* With more CPU ranks than cores: how much of a waiting rank's share the
 * others gain (m_share.c); nothing otherwise. */
void cal_measure_share(const CalOpts *o);
/* CPU ranks in pairs: the wait for the later partner at a collective after
 * each few ms of GEMMs or of copies, as a fraction of the work (m_sync.c). */
void cal_measure_sync(const CalOpts *o);

#endif
