/* calibrate.h: exports of the calibrate/ layer (prefix cal_): `ptdc
 * calibrate` measures the machine through libptdrt (the ptdc-measure
 * program, runtime/measure/), fits the cost model's parameters to the records and
 * writes a cluster file that --cluster reads (docs/cost-model.md,
 * "Calibrating a cluster"). */
#ifndef PTDC_CALIBRATE_H
#define PTDC_CALIBRATE_H

#include "passes.h"
#include "records.h" /* runtime/measure: the record format ptdc-measure prints */

/* ------------------------------------------------------ cal_records.c */
typedef struct CalGemm {
    double M, N, K;
    int ta, tb;
    double s;                     /* seconds per call */
} CalGemm;

typedef struct CalKern {
    char name[32];                /* runtime kernel, e.g. "rmsnorm_fwd" */
    double rows, cols, s;
} CalKern;

typedef struct CalAttn {
    int bwd, causal;
    double B, S, H, KVH, D, s;
} CalAttn;

/* CAL_ALLREDUCE ... CAL_NCOLL: the collectives of the records (records.h). */
extern const char *const cal_coll_names[CAL_NCOLL];

typedef struct CalColl {
    int kind;                     /* CAL_* */
    int group, nodes, per_node;   /* group size, nodes it spans, members per node */
    int rpn;                      /* ranks per node of the run that measured it */
    double bytes, s;              /* PlanColl convention; seconds per call */
} CalColl;

/* One run of ptdc-measure. */
typedef struct CalRecords {
    char backend[16];             /* "cpu" or "cuda" */
    char host[64];
    int ranks, threads, act_bytes, nodes;
    VEC(CalGemm) gemm;
    VEC(CalKern) kern;
    VEC(CalAttn) attn;
    VEC(CalColl) coll;
    double mem_base, mem_comm;    /* bytes: a rank after start-up; one more communicator */
    double host_seq_s;            /* seconds to load one sequence of tokens (host) */
    double host_seq;              /* its length */
    /* More ranks than cores (m_share.c): all computing, then half while the
     * other half waits; 0: not measured. */
    int share_ranks, share_cpus;
    double share_all_s, share_half_s;
    /* Pairs' wait at a collective after GEMMs [0] and copies [1], a
     * fraction of the work (m_sync.c); has_sync false: not measured. */
    bool has_sync;
    double sync[2];
} CalRecords;

/* Parse ptdc-measure's output (`name` for messages). False after reporting
 * (ir_error) the first malformed line or a run that did not finish. */
bool cal_records_parse(const char *name, const char *text, CalRecords *r);
void cal_records_free(CalRecords *r);

/* ------------------------------------------------------ cal_merge.c */
/* Record sets of one part measured at different moments (up to
 * CAL_MAX_SETS), as one text: every measured number the median over the
 * sets. NULL after a message if the sets did not measure the same things. */
enum { CAL_MAX_SETS = 16 };
char *cal_records_merge(const char *name, char *const *texts, int nsets);

/* ----------------------------------------------------------- cal_fit.c */
/* What one calibration measured: the node full (one rank per core, one
 * thread each: the base rates), one rank alone with every core (how much
 * more a rank gets when it has the node to itself) and the collectives. */
typedef struct CalInput {
    const CalRecords *full;       /* required */
    const CalRecords *solo;       /* may be NULL: no speed-up measured */
    const CalRecords *comm[2];    /* NULL: not measured. CPU: with one rank per core, and
                                     with two (ranks sharing cores) */
    const CalRecords *memory;     /* may be NULL */
    int cores;                    /* cores per node (CPU), 0 on GPUs */
} CalInput;

/* How well each fitted part reproduces its measurements: the median and
 * largest relative error of the model's times against the records. */
typedef struct CalQuality {
    int n;
    double median_err, max_err;
} CalQuality;

typedef struct CalReport {
    CalQuality gemm, kern, attn, coll;
    CalQuality solo;              /* the GEMM fit of a rank alone on its node */
} CalReport;

/* Fit the device parameters of out->gpu (GEMM curve, kernel and attention
 * rate curves, collectives, runtime memory) to the records, keeping what
 * they do not measure from the preset out->gpu already holds. False (after
 * ir_error) when the records cannot support a fit (e.g. no GEMMs). */
bool cal_fit(const CalInput *in, PassCluster *out, CalReport *rep);
/* A table of what was measured and fitted, for the end of a run. */
void cal_print_summary(FILE *f, const CalInput *in, const PassCluster *cl, const CalReport *rep);

/* ---------------------------------------------------------- cal_main.c */
/* `ptdc calibrate ARGS` (argv[0] is "calibrate"); returns the exit status. */
int cal_main(int argc, char **argv);

#endif
