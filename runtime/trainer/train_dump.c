/* train_dump.c: --dump-first-step DIR, what a test compares with an
 * independent implementation of the model (tests/ref): the first step's
 * forward and backward as the plan runs them, then, before any optimizer
 * step,
 *   DIR/outputs.safetensors  loss [1] (the step's mean), logits [batch, seq,
 *                            vocab] of every micro-batch in global sequence
 *                            order, tokens and targets [batch, seq] (F32)
 *   DIR/weights.safetensors  every parameter as --export-hf writes it
 *   DIR/grads.safetensors    every parameter's reduced gradient (summed over
 *                            micro-batches, data-parallel ranks and tied
 *                            copies), whole, in the same names and layout.
 * Logits are caught where the loss reads them (cg_cross_entropy_fwd): each
 * rank's block is placed by the targets cg_load put in the buffer the loss
 * scores it against, so any split of batch, sequence or vocabulary lands in
 * the right place; rank 0 assembles them and checks every element was made
 * by some rank. Meant for small models: the whole logits tensor is held in
 * host memory on every rank. */
#include "train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const int32_t *dst;
    int mb;
    int64_t b0, nb, s0, ns;
    bool shifted; /* multi-token prediction's targets: not the model's logits */
} DumpLoad;

enum { DUMP_MAX_LOADS = 64 };
static int dump_on;
static DumpLoad dump_loads[DUMP_MAX_LOADS];
static int dump_nloads;
static float *dump_sum, *dump_count; /* [CG_GLOBAL_BATCH * CG_SEQ * CG_VOCAB] */

void tr_dump_note_load(const int32_t *dst, int which, int mb, int64_t b0, int64_t nb, int64_t s0,
                       int64_t ns, int64_t shift)
{
    if (!dump_on || which != CG_TARGETS)
        return;
    int i = 0;
    while (i < dump_nloads && dump_loads[i].dst != dst)
        i++;
    if (i == DUMP_MAX_LOADS)
        rt_fatal("--dump-first-step: more than %d target buffers", DUMP_MAX_LOADS);
    dump_nloads += i == dump_nloads;
    DumpLoad l = {dst, mb, b0, nb, s0, ns, shift != 0};
    dump_loads[i] = l;
}

void cg_cross_entropy_fwd(float *loss, float *lse, const rt_act *logits, const int32_t *targets,
                          int64_t rows, int64_t vocab_local, int64_t vocab_offset,
                          int64_t total_rows, float weight, RtComm *vocab_comm)
{
    (rt_cross_entropy_fwd)(loss, lse, logits, targets, rows, vocab_local, vocab_offset, total_rows,
                           weight, vocab_comm);
    if (!dump_on)
        return;
    const DumpLoad *l = NULL;
    for (int i = 0; i < dump_nloads; i++)
        if (dump_loads[i].dst == targets)
            l = &dump_loads[i];
    if (l && l->shifted)
        return;
    if (!l || l->nb * l->ns != rows)
        rt_fatal("--dump-first-step: the loss scores %lld rows against targets this rank did not "
                 "load; cannot place its logits", (long long)rows);
    float *host = (float *)malloc((size_t)(rows * vocab_local) * sizeof(float));
    if (!host)
        rt_fatal("--dump-first-step: out of host memory");
    rt_act_to_f32(host, logits, rows * vocab_local);
    for (int64_t r = 0; r < rows; r++) {
        int64_t seq = (int64_t)l->mb * CG_MB_SEQS + l->b0 + r / l->ns;
        int64_t pos = tr_cp_position(l->s0 + r % l->ns);
        int64_t at = (seq * CG_SEQ + pos) * CG_VOCAB + vocab_offset;
        for (int64_t c = 0; c < vocab_local; c++) {
            dump_sum[at + c] += host[r * vocab_local + c];
            dump_count[at + c] += 1;
        }
    }
    free(host);
}

/* DIR/outputs.safetensors on rank 0. */
static void dump_write_outputs(const char *path, double loss, const float *logits)
{
    char err[1024];
    int64_t nseq = CG_GLOBAL_BATCH;
    RtStTensor t[4];
    memset(t, 0, sizeof t);
    t[0].name = "loss", t[0].ndim = 1, t[0].shape[0] = 1;
    t[1].name = "logits", t[1].ndim = 3, t[1].shape[0] = nseq, t[1].shape[1] = CG_SEQ,
    t[1].shape[2] = CG_VOCAB;
    t[2].name = "tokens", t[2].ndim = 2, t[2].shape[0] = nseq, t[2].shape[1] = CG_SEQ;
    t[3] = t[2], t[3].name = "targets";
    float *tok = (float *)malloc(sizeof(float) * (size_t)(2 * nseq * CG_SEQ));
    int32_t *a = (int32_t *)malloc(sizeof(int32_t) * 2 * CG_SEQ);
    RtData *d = rt_data_try_open(tr_fl.data, CG_VOCAB, CG_SEQ, err, sizeof err);
    if (!tok || !a || !d)
        rt_fatal("--dump-first-step: %s", d ? "out of host memory" : err);
    for (int64_t s = 0; s < nseq; s++) {
        rt_data_sequence(d, tr_step * CG_GLOBAL_BATCH + s, a, a + CG_SEQ);
        for (int j = 0; j < CG_SEQ; j++) {
            tok[s * CG_SEQ + j] = (float)a[j];
            tok[(nseq + s) * CG_SEQ + j] = (float)a[CG_SEQ + j];
        }
    }
    rt_data_close(d);
    float fl = (float)loss;
    const float *src[4] = {&fl, logits, tok, tok + nseq * CG_SEQ};
    RtStWriter *w = rt_st_writer_open(path, t, 4, "F32", err, sizeof err);
    if (!w)
        rt_fatal("%s", err);
    for (int i = 0; i < 4; i++) {
        int64_t zero[3] = {0, 0, 0};
        if (rt_st_writer_put(w, t[i].name, false, 0, 1, t[i].ndim, t[i].shape, zero, t[i].shape,
                             src[i], err, sizeof err)) {
            rt_st_writer_abort(w);
            rt_fatal("%s", err);
        }
    }
    if (rt_st_writer_close(w, err, sizeof err))
        rt_fatal("%s", err);
    free(tok);
    free(a);
}

static const char *dump_join(char *buf, size_t n, const char *dir, const char *file)
{
    snprintf(buf, n, "%s/%s", dir, file);
    return buf;
}

void tr_dump_first_step(const char *dir)
{
    int64_t n = (int64_t)CG_GLOBAL_BATCH * CG_SEQ * CG_VOCAB;
    if (n > ((int64_t)1 << 27))
        rt_fatal("--dump-first-step: the step's logits (%lld values) are too large to dump; it is "
                 "meant for small models", (long long)n);
    if (ROOT && mkdir(dir, 0777) != 0 && errno != EEXIST)
        rt_fatal("--dump-first-step: cannot create %s: %s", dir, strerror(errno));
    dump_sum = (float *)calloc((size_t)n, sizeof(float));
    dump_count = (float *)calloc((size_t)n, sizeof(float));
    float *dev = (float *)rt_alloc((size_t)(2 * n) * sizeof(float));
    if (!dump_sum || !dump_count)
        rt_fatal("--dump-first-step: out of host memory");
    dump_on = 1;
    tr_run_schedule();
    tr_reduce_grads();
    dump_on = 0;
    double loss = tr_world_loss();
    /* Every rank's blocks to rank 0 (replicated blocks are counted, then averaged). */
    rt_to_device(dev, dump_sum, (size_t)n * sizeof(float));
    rt_to_device(dev + n, dump_count, (size_t)n * sizeof(float));
    rt_allreduce(tr_world, dev, 2 * n, RT_F32);
    rt_to_host(dump_sum, dev, (size_t)n * sizeof(float));
    rt_to_host(dump_count, dev + n, (size_t)n * sizeof(float));
    rt_free(dev);
    char path[4096];
    if (ROOT) {
        for (int64_t i = 0; i < n; i++) {
            if (!(dump_count[i] >= 1))
                rt_fatal("--dump-first-step: no rank computed the logit of sequence %lld, "
                         "position %lld, token %lld", (long long)(i / CG_VOCAB / CG_SEQ),
                         (long long)(i / CG_VOCAB % CG_SEQ), (long long)(i % CG_VOCAB));
            dump_sum[i] /= dump_count[i];
        }
        dump_write_outputs(dump_join(path, sizeof path, dir, "outputs.safetensors"), loss, dump_sum);
    }
    tr_write_hf(dump_join(path, sizeof path, dir, "weights.safetensors"), 0, "F32");
    tr_write_hf(dump_join(path, sizeof path, dir, "grads.safetensors"), 1, "F32");
    free(dump_sum);
    free(dump_count);
    if (ROOT)
        printf("dumped step %lld to %s: loss %.7f\n", (long long)tr_step + 1, dir, loss);
}
