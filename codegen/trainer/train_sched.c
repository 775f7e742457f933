/* train_sched.c: this rank's communicators, the point-to-point transfers
 * generated stage functions call, one walk of the micro-batch schedule, the
 * gradient reduction after it, and the step's loss over the world. */
#include "train.h"

void tr_make_comms(void)
{
    tr_world = rt_comm_world();
    int c0 = g_coord[0], c1 = g_coord[1];
    /* Mask 1: along axis 0 (same coordinate 1); mask 2: along axis 1; mask 3: the mesh. */
    g_comm[0] = NULL;
    g_comm[1] = rt_comm_split(tr_pp_rank * CG_DEVICES + c1, c0);
    g_comm[2] = rt_comm_split(tr_pp_rank * CG_DEVICES + c0, c1);
    g_comm[3] = rt_comm_split(tr_pp_rank, tr_mesh_index);
    for (int i = 0; i < CG_NTIED; i++)
        tr_tied[i] =
            rt_comm_split(cg_tied_mask[i] >> tr_pp_rank & 1 ? tr_mesh_index : -1, tr_pp_rank);
}

static int peer(int pp) { return pp * CG_DEVICES + tr_mesh_index; }

void (cg_recv)(void *buf, int64_t n, RtType t, int pp_peer, int tag)
{
    rt_wait(rt_irecv(tr_world, buf, n, t, peer(pp_peer), tag));
}

void (cg_wait)(RtReq **req)
{
    if (*req)
        rt_wait(*req);
    *req = NULL;
}

void cg_send(RtReq **req, const void *buf, int64_t n, RtType t, int pp_peer, int tag)
{
    cg_wait(req);
    *req = rt_isend(tr_world, buf, n, t, peer(pp_peer), tag);
}

static int group_size(const CgParam *p) { return p->pmask ? rt_comm_size(g_comm[p->pmask]) : 1; }
int64_t tr_padded(const CgParam *p) { return p->zshard ? p->shard * group_size(p) : p->numel; }

int tr_counts(int mask)
{
    for (int a = 0; a < CG_NAXES; a++)
        if ((mask >> a & 1) && g_coord[a] != 0)
            return 0;
    return 1;
}

/* Forward and backward of every micro-batch: gradients accumulate, the
 * loss sums in g_loss[0]. */
void tr_run_schedule(void)
{
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        int64_t n = p->zshard && CG_ZERO >= 2 ? p->shard : tr_padded(p);
        rt_zero(p->grad, (size_t)n * sizeof(rt_act));
    }
    rt_zero(g_loss, 2 * sizeof(float));
    for (int k = 0; k < tr_prog->nsched; k++) {
        const CgSchedOp *op = &tr_prog->sched[k];
        int slot = op->mb % tr_prog->nslots[op->chunk];
        (op->bwd ? tr_prog->backward : tr_prog->forward)[op->chunk](op->mb, slot);
    }
    tr_prog->wait_sends();
}

/* Gradient reduction: tied copies, then the mesh axes it is partial on. */
void tr_reduce_grads(void)
{
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        int64_t n = p->zshard && CG_ZERO >= 2 ? p->shard : tr_padded(p);
        if (p->tied >= 0)
            rt_allreduce(tr_tied[p->tied], p->grad, n, RT_ACT);
        if (!p->pmask || (p->zshard && CG_ZERO >= 2))
            continue;
        if (p->zshard)
            rt_reduce_scatter(g_comm[p->pmask], p->grad_shard, p->grad, p->shard, RT_ACT);
        else
            rt_allreduce(g_comm[p->pmask], p->grad, p->numel, RT_ACT);
    }
}

/* The step's loss: summed over micro-batches by cross-entropy, over the world here. */
double tr_world_loss(void)
{
    float host;
    if (!(tr_pp_rank == CG_LOSS_PP && tr_counts(CG_LOSS_MASK)))
        rt_zero(g_loss, sizeof(float));
    rt_allreduce(tr_world, g_loss, 1, RT_F32);
    rt_to_host(&host, g_loss, sizeof host);
    return host;
}
