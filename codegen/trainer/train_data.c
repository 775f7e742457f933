/* train_data.c: the tokens and targets of each micro-batch. Sequence
 * tr_data_pos + mb x CG_MB_SEQS + b of the token source, where tr_data_pos
 * (sequences consumed, step x CG_GLOBAL_BATCH from the start) advances by
 * CG_GLOBAL_BATCH each step and is saved with checkpoints, so every plan
 * (and a resumed run, resharded or not) reads the same data at the same step. */
#include "train.h"

#include <stdlib.h>
#include <string.h>

static RtData *data;
static int32_t *tok_host, *tgt_host, *stage_host;

void tr_data_open(void)
{
    char err[1024];
    if (!(data = rt_data_try_open(tr_fl.data, CG_VOCAB, CG_SEQ, err, sizeof err)))
        rt_fatal("%s", err);
    tok_host = (int32_t *)malloc(sizeof(int32_t) * CG_SEQ);
    tgt_host = (int32_t *)malloc(sizeof(int32_t) * CG_SEQ);
    stage_host = (int32_t *)malloc(sizeof(int32_t) * CG_SEQ * CG_MB_SEQS);
}

void tr_data_close(void)
{
    rt_data_close(data);
    free(tok_host);
    free(tgt_host);
    free(stage_host);
}

void (cg_load)(int32_t *dst, int which, int mb, int64_t b0, int64_t nb, int64_t s0, int64_t ns)
{
    for (int64_t b = 0; b < nb; b++) {
        int64_t seq = tr_data_pos + (int64_t)mb * CG_MB_SEQS + b0 + b;
        rt_data_sequence(data, seq, tok_host, tgt_host);
        memcpy(stage_host + b * ns, (which == CG_TOKENS ? tok_host : tgt_host) + s0,
               (size_t)ns * sizeof(int32_t));
    }
    rt_to_device(dst, stage_host, (size_t)(nb * ns) * sizeof(int32_t));
    tr_dump_note_load(dst, which, mb, b0, nb, s0, ns);
}
