/* train_env.c: every rank must see the same values of the environment
 * variables that change which collectives a rank issues (PTDC_OVERLAP:
 * buckets and non-blocking gathers; PTDC_PROFILE and PTDC_TIME_GEMM: timed
 * waits between posts; PTDC_TRACE and PTDC_TRACE_STEPS: timed steps and the
 * trace's gather after them) or what a kernel computes (PTDC_ATTENTION*). Ranks
 * that disagree would hang in mismatched collectives or silently diverge,
 * so a disagreement ends the run at start with both values named. run.sh
 * exports the launching shell's PTDC_* and NCCL_* variables (mpirun -x); a
 * node whose own profile sets one differently is what this catches. */
#include "train.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How each variable is read where it takes effect; ranks are compared on the
 * setting, so PTDC_PROFILE=0 on one node and unset on another agree. */
typedef enum { ON_UNLESS_0, OFF_UNLESS_NONZERO, GENERIC_OR_AUTO, ON_IF_SET, NUMBER } EnvRead;
static const struct {
    const char *name;
    EnvRead read;
} checked[] = {
    {"PTDC_OVERLAP", ON_UNLESS_0},         /* train_sched.c */
    {"PTDC_PROFILE", OFF_UNLESS_NONZERO},  /* train_prof.c */
    {"PTDC_TIME_GEMM", OFF_UNLESS_NONZERO}, /* trainer.c */
    {"PTDC_ATTENTION", GENERIC_OR_AUTO},   /* runtime/cuda/attention.cu */
    {"PTDC_ATTENTION_DETERMINISTIC", OFF_UNLESS_NONZERO},
    {"PTDC_TRACE", ON_IF_SET},             /* train_trace.c: its steps are timed and gathered */
    {"PTDC_TRACE_STEPS", NUMBER},          /* (the gather follows the last traced step) */
#ifdef PTDC_CUDA /* train_health.c: a gather every PTDC_HEALTH_EVERY steps; off on CUDA unless set */
    {"PTDC_HEALTH", OFF_UNLESS_NONZERO},
#else
    {"PTDC_HEALTH", ON_UNLESS_0},
#endif
    {"PTDC_HEALTH_EVERY", NUMBER},
};
enum { NCHECKED = sizeof checked / sizeof checked[0], VALUE_MAX = 64 };

/* "on"/"off" ("generic"/"auto"), then the raw value as set, cut short. */
static void setting_of(int i, char out[VALUE_MAX])
{
    const char *v = getenv(checked[i].name);
    bool on;
    switch (checked[i].read) {
    case ON_UNLESS_0: on = !(v && !strcmp(v, "0")); break;
    case OFF_UNLESS_NONZERO: on = v && *v && strcmp(v, "0") != 0; break;
    case ON_IF_SET: on = v && *v; break;
    case NUMBER: on = false; break; /* compared by value below */
    default: on = v && !strcmp(v, "generic"); break;
    }
    char num[24];
    snprintf(num, sizeof num, "%ld", v ? strtol(v, NULL, 10) : 0L);
    const char *word = checked[i].read == GENERIC_OR_AUTO ? (on ? "generic" : "auto")
                       : checked[i].read == NUMBER        ? (v ? num : "default")
                                                          : (on ? "on" : "off");
    memset(out, 0, VALUE_MAX);
    if (v)
        snprintf(out, VALUE_MAX, "%s (\"%.24s%s\")", word, v, strlen(v) > 24 ? "..." : "");
    else
        snprintf(out, VALUE_MAX, "%s (unset)", word);
}

/* Equal settings: the words before the raw values. */
static bool same_setting(const char *a, const char *b)
{
    size_t n = strcspn(a, " ");
    return n == strcspn(b, " ") && !strncmp(a, b, n);
}

int tr_env_check(void)
{
    int world = rt_world_size();
    char mine[NCHECKED][VALUE_MAX];
    for (int i = 0; i < NCHECKED; i++)
        setting_of(i, mine[i]);
    typedef char Settings[NCHECKED][VALUE_MAX];
    Settings *all = (Settings *)malloc((size_t)world * sizeof *all);
    if (!all)
        rt_fatal("train: out of host memory checking the environment of %d ranks", world);
    rt_host_allgather(rt_comm_world(), all, mine, sizeof mine);
    int bad = 0;
    for (int i = 0; i < NCHECKED && !bad; i++)
        for (int r = 1; r < world; r++)
            if (!same_setting(all[0][i], all[r][i])) {
                if (tr_world_rank == 0)
                    rt_log("train: the ranks disagree on %s (rank 0: %s, rank %d: %s); it changes "
                           "which collectives a rank issues or what it computes, so the run "
                           "would hang or diverge. run.sh passes the launching shell's PTDC_* "
                           "variables to every rank; set it the same on every node",
                           checked[i].name, all[0][i], r, all[r][i]);
                bad = 1;
                break;
            }
    free(all);
    return bad;
}
