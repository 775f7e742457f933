/* train_sched.c: this rank's communicators, the point-to-point transfers
 * generated stage functions call, one walk of the micro-batch schedule, the
 * gradient reduction (buckets overlapping the backward, and what remains at
 * the end), and the step's loss over the world.
 *
 * PTDC_OVERLAP=0 turns the overlap off: every gradient is then reduced by a
 * blocking collective per tensor after the schedule, and ZeRO's all-gathers
 * block after each AdamW (the structure before buckets, for comparison). */
#include "train.h"

#include <stdlib.h>
#include <string.h>

static RtComm *pipe_comm; /* pipeline neighbours: the ranks of this mesh index, by pp rank */

void tr_make_comms(void)
{
    tr_world = rt_comm_world();
    /* Mask m: the ranks of this stage whose coordinates differ only along
     * the axes in m (mask 1: along axis 0, ...; all bits: the mesh). The
     * colour numbers the other coordinates, the key orders the group by its
     * own. A group equal to another (the world, or one axis of a one-axis
     * mesh) shares that communicator in the runtime, and a group of one rank
     * has none (its collectives are copies). Collective over the world: every
     * rank splits every mask in the same order. */
    g_comm[0] = NULL;
    for (int m = 1; m < 1 << CG_NAXES; m++) {
        int color = 0, key = 0;
        for (int a = 0; a < 3; a++) {
            if (m >> a & 1)
                key = key * tr_mesh_size(a) + g_coord[a];
            else
                color = color * tr_mesh_size(a) + g_coord[a];
        }
        g_comm[m] = rt_comm_split(tr_pp_rank * CG_DEVICES + color, key);
    }
    for (int m = 1 << CG_NAXES; m < 8; m++) /* axes past the mesh's have one rank */
        g_comm[m] = g_comm[m & ((1 << CG_NAXES) - 1)];
    /* Context parallelism's ring: the cp axis's group, its transfers issued
     * as posted so they overlap the blocks' compute (train_cp.c). */
    if (CG_CP_AXIS >= 0) {
        int color = 0;
        for (int a = 0; a < 3; a++)
            if (a != CG_CP_AXIS)
                color = color * tr_mesh_size(a) + g_coord[a];
        /* (the guard keeps the index in bounds where the branch is dead) */
        tr_cp_ring = rt_comm_split_p2p(tr_pp_rank * CG_DEVICES + color, g_coord[CG_CP_AXIS < 0 ? 0 : CG_CP_AXIS]);
    }
    for (int i = 0; i < CG_NTIED; i++)
        tr_tied[i] =
            rt_comm_split(cg_tied_mask[i] >> tr_pp_rank & 1 ? tr_mesh_index : -1, tr_pp_rank);
    /* Pipeline transfers are issued as soon as posted (on CUDA one channel
     * per direction, cg_check_deadlock proves the order safe). */
    pipe_comm = CG_PP > 1 ? rt_comm_split_p2p(tr_mesh_index, tr_pp_rank) : NULL;
}

void (cg_recv)(void *buf, int64_t n, RtType t, int pp_peer, int tag)
{
    double t0 = cg_prof_on & (CG_TIMED_TRACE | CG_TIMED_HEALTH) ? rt_time() : 0;
    (rt_wait)(rt_irecv(pipe_comm, buf, n, t, pp_peer, tag));
    if (cg_prof_on & CG_TIMED_HEALTH) /* the wait per peer: a slow link's trace */
        tr_health_recv(pp_peer, rt_time() - t0);
    if (cg_prof_on & CG_TIMED_TRACE)
        tr_trace_p2p(1, t0, n, t, pp_peer, tag);
}

void (cg_wait)(RtReq **req)
{
    if (*req)
        (rt_wait)(*req);
    *req = NULL;
}

void cg_send(RtReq **req, const void *buf, int64_t n, RtType t, int pp_peer, int tag)
{
    (cg_wait)(req);
    double t0 = cg_prof_on & CG_TIMED_TRACE ? rt_time() : 0;
    *req = rt_isend(pipe_comm, buf, n, t, pp_peer, tag);
    if (cg_prof_on & CG_TIMED_TRACE)
        tr_trace_p2p(0, t0, n, t, pp_peer, tag);
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

/* ------------------------------------------------------ gradient buckets */

int tr_overlap = 1;              /* PTDC_OVERLAP */
static int last_bwd;             /* the op running is its chunk's last micro-batch's backward
                                    (or a split schedule's W of it: both complete gradients) */
static int *param_left;          /* per parameter: cg_grad_ready calls still due this step */
static int *bucket_left;         /* per bucket: parameters not yet complete */
static int *bucket_issued;
static int *by_grad;             /* parameter indices sorted by gradient address */
static RtReq **reqs;             /* issued, not yet waited for */
static int nreqs, capreqs;

static int cmp_grad(const void *a, const void *b)
{
    const rt_grad *x = tr_prog->params[*(const int *)a].grad;
    const rt_grad *y = tr_prog->params[*(const int *)b].grad;
    return x < y ? -1 : x > y;
}

void tr_buckets_init(void)
{
    const char *e = getenv("PTDC_OVERLAP");
    tr_overlap = !(e && !strcmp(e, "0"));
    int np = tr_prog->nparams, nb = tr_prog->nbuckets;
    param_left = (int *)calloc((size_t)np + 1, sizeof(int));
    bucket_left = (int *)calloc((size_t)nb + 1, sizeof(int));
    bucket_issued = (int *)calloc((size_t)nb + 1, sizeof(int));
    by_grad = (int *)malloc(sizeof(int) * ((size_t)np + 1));
    for (int i = 0; i < np; i++)
        by_grad[i] = i;
    qsort(by_grad, (size_t)np, sizeof(int), cmp_grad);
}

void tr_buckets_free(void)
{
    free(param_left);
    free(bucket_left);
    free(bucket_issued);
    free(by_grad);
    free(reqs);
}

void tr_push_req(RtReq *r)
{
    if (nreqs == capreqs) {
        capreqs = capreqs ? 2 * capreqs : 64;
        reqs = (RtReq **)realloc(reqs, sizeof *reqs * (size_t)capreqs);
        if (!reqs)
            rt_fatal("out of host memory");
    }
    reqs[nreqs++] = r;
}

void tr_wait_reqs(void)
{
    for (int i = 0; i < nreqs; i++)
        rt_wait(reqs[i]);
    nreqs = 0;
}

/* A bucket's reduction: ZeRO-0 all-reduces each run of gradients that lie
 * back to back with the same group (the memory plan lays a bucket out in
 * one run; gaps are alignment padding, always zero), ZeRO-1 reduce-scatters
 * each tensor; all in one group (one NCCL launch on CUDA). */
static void issue_bucket(int b)
{
    bucket_issued[b] = 1;
    const int *ix = tr_prog->bucket_params + tr_prog->bucket_start[b];
    int n = tr_prog->bucket_start[b + 1] - tr_prog->bucket_start[b];
    rt_group_begin();
    for (int i = 0; i < n;) {
        CgParam *p = &tr_prog->params[ix[i]];
        double t0 = cg_prof_on & CG_TIMED_TRACE ? rt_time() : 0;
        if (p->zshard) {
            tr_push_req(rt_ireduce_scatter(g_comm[p->pmask], p->grad_shard, p->grad, p->shard, RT_F32));
            if (cg_prof_on & CG_TIMED_TRACE)
                tr_trace_issue("reduce_scatter (issue)", t0, g_comm[p->pmask],
                               tr_padded(p), RT_F32);
            i++;
            continue;
        }
        rt_grad *end = p->grad + p->numel;
        int j = i + 1;
        for (; j < n; j++) {
            CgParam *q = &tr_prog->params[ix[j]];
            if (q->zshard || q->pmask != p->pmask || q->grad < end || q->grad - end >= 64)
                break;
            end = q->grad + q->numel;
        }
        tr_push_req(rt_iallreduce(g_comm[p->pmask], p->grad, end - p->grad, RT_F32));
        if (cg_prof_on & CG_TIMED_TRACE)
            tr_trace_issue("allreduce (issue)", t0, g_comm[p->pmask], end - p->grad, RT_F32);
        i = j;
    }
    rt_group_end();
}

void (cg_grad_ready)(const rt_grad *g)
{
    if (!last_bwd || !tr_overlap)
        return;
    int lo = 0, hi = tr_prog->nparams - 1, i = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const rt_grad *x = tr_prog->params[by_grad[mid]].grad;
        if (x == g) {
            i = by_grad[mid];
            break;
        }
        if (x < g)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    if (i < 0)
        rt_fatal("cg_grad_ready: %p is not a parameter's gradient", (const void *)g);
    CgParam *p = &tr_prog->params[i];
    if (p->bucket < 0 || --param_left[i] > 0)
        return;
    if (--bucket_left[p->bucket] == 0)
        issue_bucket(p->bucket);
}

/* Forward and backward of every micro-batch: gradients accumulate, the
 * loss sums in g_loss[0]; complete buckets start reducing on the way. */
void tr_run_schedule(void)
{
    for (int i = 0; i < tr_prog->nparams; i++) {
        CgParam *p = &tr_prog->params[i];
        int64_t n = p->zshard && CG_ZERO >= 2 ? p->shard : tr_padded(p);
        rt_zero(p->grad, (size_t)n * sizeof(rt_grad));
        param_left[i] = p->nready;
    }
    for (int b = 0; b < tr_prog->nbuckets; b++) {
        bucket_left[b] = tr_prog->bucket_start[b + 1] - tr_prog->bucket_start[b];
        bucket_issued[b] = 0;
    }
    rt_zero(g_loss, 3 * sizeof(float));
    for (int k = 0; k < tr_prog->nsched; k++) {
        const CgSchedOp *op = &tr_prog->sched[k];
        int slot = op->mb % tr_prog->nslots[op->chunk];
        last_bwd = op->bwd && op->mb == CG_NUM_MICRO - 1;
        tr_where_op(op->bwd, op->chunk, op->mb);
        double t0 = cg_prof_on & CG_TIMED_TRACE ? rt_time() : 0;
        (op->bwd == CG_OP_WGRAD ? tr_prog->wgrad : op->bwd ? tr_prog->backward : tr_prog->forward)[op->chunk](op->mb, slot);
        if (cg_prof_on & CG_TIMED_TRACE)
            tr_trace_op(op, t0);
    }
    last_bwd = 0;
    tr_where_phase("the schedule's last sends");
    tr_prog->wait_sends();
}

/* One parameter's reduction after the schedule, blocking: over its tied
 * copies, then over the mesh axes it is partial on (ZeRO-2/3 reduced theirs
 * per micro-batch). */
static void reduce_now(CgParam *p)
{
    int64_t n = p->zshard && CG_ZERO >= 2 ? p->shard : tr_padded(p);
    if (p->tied >= 0)
        rt_allreduce(tr_tied[p->tied], p->grad, n, RT_F32);
    if (!p->pmask || (p->zshard && CG_ZERO >= 2))
        return;
    if (p->zshard)
        rt_reduce_scatter(g_comm[p->pmask], p->grad_shard, p->grad, p->shard, RT_F32);
    else
        rt_allreduce(g_comm[p->pmask], p->grad, p->numel, RT_F32);
}

/* Gradient reduction after the schedule: buckets not yet started (none
 * when the backward signalled them all), tied parameters, then the wait for
 * every bucket. Without overlap, every tensor blocking, in table order. */
static void reduce_grads(void)
{
    if (!tr_overlap) {
        for (int i = 0; i < tr_prog->nparams; i++)
            reduce_now(&tr_prog->params[i]);
        return;
    }
    double t0 = cg_prof_on ? rt_time() : 0;
    for (int b = 0; b < tr_prog->nbuckets; b++)
        if (!bucket_issued[b])
            issue_bucket(b);
    if (cg_prof_on)
        cg_prof_add(CG_PF_cg_issue, t0);
    for (int i = 0; i < tr_prog->nparams; i++)
        if (tr_prog->params[i].bucket < 0)
            reduce_now(&tr_prog->params[i]);
    tr_wait_reqs();
}

void tr_reduce_grads(void)
{
    tr_where_phase("the gradient reduction and the optimizer");
    double t0 = cg_prof_on & CG_TIMED_TRACE ? rt_time() : 0;
    reduce_grads();
    if (cg_prof_on & CG_TIMED_TRACE)
        tr_trace_span("reduce gradients (after the schedule)", t0);
}

/* The step's objective: the loss, summed over micro-batches by
 * cross-entropy (one copy of it counted), and the routers' regularisers
 * (g_loss[2], each copy weighted by its share), summed over the world
 * here. g_loss[1] rides along: the optimizer zeroes it before its use. */
double tr_world_loss(void)
{
    float host[3];
    if (!(tr_pp_rank == CG_LOSS_PP && tr_counts(CG_LOSS_MASK)))
        rt_zero(g_loss, sizeof(float));
    rt_allreduce(tr_world, g_loss, 3, RT_F32);
    rt_to_host(host, g_loss, sizeof host);
    return (double)host[0] + host[2];
}
