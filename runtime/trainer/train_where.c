/* train_where.c: where this rank is in the training program, for the
 * watchdog's stall report (rt_set_where): the step, the stage forward or
 * backward and micro-batch it runs (or the phase outside the schedule), and
 * the last listed call it entered (cg_last_call, stored by trainer.h's
 * CG_PROF hooks). The runtime says which collective or receive the rank
 * waits in; this says what the program was doing, so a rank that hangs
 * outside any collective ("busy or hung") is placed too:
 *   trainer: step 12, backward of micro-batch 3 (chunk 0), last call entered cg_recv
 * The fields are written by the main thread with plain stores (a few per
 * stage op) and read by the watchdog thread, which may see a mix of two
 * consecutive positions: good enough for a report, and free of locks the
 * stuck main thread could hold. */
#include "train.h"

#include <stdio.h>

volatile int cg_last_call = -1;
static volatile long long w_step;       /* the step running (tr_step + 1) */
static volatile int w_bwd, w_chunk, w_mb = -1; /* the stage op, w_mb < 0: none */
static const char *volatile w_phase = "start-up";

static const char *const where_call_names[CG_PF_N] = {
#define CG_PF_NAME(f) #f,
    CG_PROFILED(CG_PF_NAME)
#undef CG_PF_NAME
};

static void describe(char *out, size_t n)
{
    int call = cg_last_call, mb = w_mb;
    int k;
    if (mb >= 0)
        k = snprintf(out, n, "trainer: step %lld, %s of micro-batch %d (chunk %d)", w_step,
                     w_bwd == CG_OP_WGRAD ? "weight gradients" : w_bwd ? "backward" : "forward", mb, w_chunk);
    else
        k = snprintf(out, n, "trainer: step %lld, %s", w_step, w_phase);
    if (k > 0 && (size_t)k < n)
        snprintf(out + k, n - (size_t)k, ", last call entered %s",
                 call >= 0 && call < CG_PF_N ? where_call_names[call] : "none yet");
}

void tr_where_init(void) { rt_set_where(describe); }

void tr_where_step(void)
{
    w_step = (long long)tr_step + 1;
    tr_where_phase("before the schedule");
}

void tr_where_op(int bwd, int chunk, int mb)
{
    w_bwd = bwd;
    w_chunk = chunk;
    w_mb = mb;
}

void tr_where_phase(const char *what)
{
    w_phase = what;
    w_mb = -1;
}
