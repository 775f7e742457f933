/* train_lamb.c: the norms LAMB's trust ratios need, one per whole tensor.
 *
 * A tensor's elements are spread over ranks: tensor-parallel splits, ZeRO
 * shards over its pmask group, and pipeline ranks that each own their own
 * tensors. The global gradient norm (train_optim.c) already counts every
 * element of every tensor exactly once over the world: a rank counts its
 * copy when it is the primary one (tied copies on several pipeline ranks)
 * and its coordinate is 0 on the axes where the copy is replicated
 * (norm_mask). The same rule, applied per tensor instead of summed, gives
 * each tensor's ||w||^2 and ||r||^2 from one world all-reduce of a small
 * vector: two slots per tensor of every pipeline rank (a tied group shares
 * one pair), plus a last pair where copies that do not count put their sums.
 * Every rank derives the same slots from cg_ranks[], so after the
 * all-reduce each rank reads its tensors' whole-tensor sums, replicated
 * copies included. One collective of 8 bytes a tensor per step, beside the
 * gradient norm's own. */
#include "train.h"

#include <stdlib.h>

static int *slot_of;    /* [nparams of this pipeline rank] */
static int nslots;      /* tensors of every pipeline rank, tied groups once */
static float *sums_dev; /* [2 (nslots + 1)] backend memory */
static float *sums_host;

static void lamb_init(void)
{
    int ntied = 0;
    for (int s = 0; s < CG_PP; s++)
        for (int i = 0; i < cg_ranks[s].nparams; i++)
            if (cg_ranks[s].params[i].tied >= ntied)
                ntied = cg_ranks[s].params[i].tied + 1;
    /* Tied groups first, then each pipeline rank's untied tensors in order. */
    nslots = ntied;
    slot_of = (int *)malloc(((size_t)tr_prog->nparams + 1) * sizeof *slot_of);
    if (!slot_of)
        rt_fatal("out of host memory");
    for (int s = 0; s < CG_PP; s++)
        for (int i = 0; i < cg_ranks[s].nparams; i++) {
            const CgParam *p = &cg_ranks[s].params[i];
            int slot = p->tied >= 0 ? p->tied : nslots++;
            if (s == tr_pp_rank)
                slot_of[i] = slot;
        }
    size_t bytes = 2 * ((size_t)nslots + 1) * sizeof(float);
    sums_dev = (float *)rt_alloc(bytes);
    sums_host = (float *)malloc(bytes);
    if (!sums_host)
        rt_fatal("out of host memory");
}

/* Collective: the world's sums, after every rank's prepares (host memory). */
const float *tr_lamb_norms(void)
{
    if (!slot_of)
        lamb_init();
    size_t bytes = 2 * ((size_t)nslots + 1) * sizeof(float);
    rt_allreduce(tr_world, sums_dev, 2 * ((int64_t)nslots + 1), RT_F32);
    rt_to_host(sums_host, sums_dev, bytes);
    return sums_host;
}

float *tr_lamb_sums(int i)
{
    if (!slot_of)
        lamb_init();
    const CgParam *p = &tr_prog->params[i];
    bool counts = p->primary && tr_counts(p->norm_mask);
    return sums_dev + 2 * (counts ? slot_of[i] : nslots);
}

int tr_lamb_slot(int i) { return slot_of[i]; }

void tr_lamb_zero(void)
{
    if (!slot_of)
        lamb_init();
    rt_zero(sums_dev, 2 * ((size_t)nslots + 1) * sizeof(float));
}
