/* train_data.c: the tokens and targets of each micro-batch. Sequence
 * tr_data_pos + mb x CG_MB_SEQS + b of the token source, where tr_data_pos
 * (sequences consumed, step x CG_GLOBAL_BATCH from the start) advances by
 * CG_GLOBAL_BATCH each step and is saved with checkpoints, so every plan
 * (and a resumed run, resharded or not) reads the same data at the same step.
 *
 * A load fills one of NSTAGE page-locked staging buffers (rt_host_alloc) on
 * the host and copies it to the device without waiting (rt_to_device_async,
 * ordered before the kernels that read it): the host waits only before it
 * refills a buffer whose copy NSTAGE loads ago has not finished, never per
 * micro-batch. On CPU the copy is a memcpy, done on return. */
#include "train.h"

#include <stdlib.h>
#include <string.h>

enum { NSTAGE = 4 }; /* tokens and targets of two micro-batches in flight */

static RtData *data;
static int32_t *tok_host, *tgt_host;
static int32_t *stage[NSTAGE];
static RtReq *inflight[NSTAGE];
static int next_stage;

void tr_data_open(void)
{
    char err[1024];
    if (!(data = rt_data_try_open(tr_fl.data, CG_VOCAB, CG_SEQ, err, sizeof err)))
        rt_fatal("%s", err);
    tok_host = (int32_t *)malloc(sizeof(int32_t) * CG_SEQ);
    tgt_host = (int32_t *)malloc(sizeof(int32_t) * CG_SEQ);
    for (int k = 0; k < NSTAGE; k++)
        stage[k] = (int32_t *)rt_host_alloc(sizeof(int32_t) * CG_SEQ * CG_MB_SEQS);
}

void tr_data_close(void)
{
    rt_data_close(data);
    free(tok_host);
    free(tgt_host);
    for (int k = 0; k < NSTAGE; k++) {
        if (inflight[k])
            (rt_wait)(inflight[k]);
        inflight[k] = NULL;
        rt_host_free(stage[k]);
    }
}

/* Rows [b0, b0 + nb) and positions [s0, s0 + ns) of micro-batch mb, read
 * `shift` positions further on (multi-token prediction's shift op), a
 * position past the sequence's end holding `fill` (-1: no target). */
void (cg_load)(int32_t *dst, int which, int mb, int64_t b0, int64_t nb, int64_t s0, int64_t ns,
               int64_t shift, int32_t fill)
{
    int k = next_stage;
    next_stage = (next_stage + 1) % NSTAGE;
    if (inflight[k]) /* the buffer's previous copy: long done, unless the host ran far ahead */
        (rt_wait)(inflight[k]);
    int32_t *st = stage[k];
    for (int64_t b = 0; b < nb; b++) {
        int64_t seq = tr_data_pos + (int64_t)mb * CG_MB_SEQS + b0 + b;
        rt_data_sequence(data, seq, tok_host, tgt_host);
        const int32_t *src = which == CG_TOKENS ? tok_host : tgt_host;
        if (CG_CP_BALANCED || shift) /* rows in context parallelism's order (train_cp.c) */
            for (int64_t i = 0; i < ns; i++) {
                int64_t p = (CG_CP_BALANCED ? tr_cp_position(s0 + i) : s0 + i) + shift;
                st[b * ns + i] = p < CG_SEQ ? src[p] : fill;
            }
        else
            memcpy(st + b * ns, src + s0, (size_t)ns * sizeof(int32_t));
    }
    inflight[k] = rt_to_device_async(dst, st, (size_t)(nb * ns) * sizeof(int32_t));
    tr_dump_note_load(dst, which, mb, b0, nb, s0, ns, shift);
}
