/* cost_coll.c: collectives by the alpha-beta model in the nccl-tests
 * convention: t = alpha + c(n) * S / busbw, S the full buffer (PlanColl.numel
 * x element bytes), c = 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter,
 * all-gather and all-to-all. Inside a node busbw is the NVLink bus bandwidth;
 * a group spanning nodes runs NCCL's rings through the NICs of its members on
 * each node (rail-optimised, one NIC per GPU), so its inter-node bus
 * bandwidth is per_node x the per-NIC bandwidth, and the whole collective
 * runs at the slower of the two levels. */
#include "cost/cost.h"

#include <math.h>

static double ring_bw(const PassGpu *g, int nodes, int per_node)
{
    if (nodes <= 1)
        return g->busbw_nvlink;
    double ib = per_node * g->busbw_ib;
    return ib < g->busbw_nvlink ? ib : g->busbw_nvlink;
}

/* A measured collective (PassGpu.coll, `ptdc calibrate`): the fit of the
 * same kind for the same group size and level, else the nearest group size
 * measured at that level with its latency scaled by the ring steps. Returns
 * -1 when nothing of the kind was measured. */
static double measured(const PassGpu *g, PlanCollKind kind, double n, bool net, double rpn, double S)
{
    /* Same level first, then the ranks per node closest to the plan's (in
     * ratio), then the group size closest to n. */
    const PassCollFit *best = NULL;
    double bd = 0;
    for (int i = 0; i < g->ncoll[kind]; i++) {
        const PassCollFit *f = &g->coll[kind][i];
        double d = (f->net != net ? 1e6 : 0) + (f->rpn > 0 && rpn > 0 ? 1e3 * fabs(log(f->rpn / rpn)) : 0) +
                   fabs(log(f->group / n));
        if (!best || d < bd)
            best = f, bd = d;
    }
    if (!best)
        return -1;
    double factor = kind == PLAN_COLL_ALLREDUCE ? 2 * (n - 1) / n
                    : kind == PLAN_COLL_SENDRECV ? 1 : (n - 1) / n;
    double steps = kind == PLAN_COLL_SENDRECV ? 1 : (n - 1) / (best->group - 1);
    return best->alpha_s * steps + factor * S / best->busbw;
}

double pass_cost_coll(const PassCostCtx *c, const PlanMesh *m, const PlanColl *k, int elem_bytes)
{
    const PassGpu *g = &c->cl->gpu;
    double S = (double)k->numel * elem_bytes;
    /* Links: the NVLink domain (a point-to-point's alone: the mesh has the
     * rest); the ranks a measured fit ran with per node (CPU ranks sharing
     * cores): the host. */
    int rpn = pass_cluster_host(c->cl);
    if (k->kind == PLAN_COLL_NONE || S <= 0)
        return 0;
    if (k->kind == PLAN_COLL_SENDRECV && g->ncoll[PLAN_COLL_SENDRECV] > 0) {
        int dev = plan_mesh_devices(m);
        return measured(g, PLAN_COLL_SENDRECV, 2, 2 * dev > pass_cluster_domain(c->cl), rpn, S);
    }
    if (k->kind == PLAN_COLL_SENDRECV) {
        /* The next stage's ranks are `devices` further on: on the same node
         * only when both stages fit in one; each rank uses its own NIC. */
        int dev = plan_mesh_devices(m);
        bool same = 2 * dev <= pass_cluster_domain(c->cl);
        return pass_cost_consts.coll_base_s + (same ? g->alpha_nvlink : g->alpha_ib) +
               S / (same ? g->busbw_nvlink : g->busbw_ib);
    }
    int a = k->axis;
    if (a < 0 || a >= m->naxes)
        ir_die("pass_cost_coll: axis %d of a %d-axis mesh", a, m->naxes);
    double n = m->size[a];
    if (k->kind == PLAN_COLL_SLICE) /* local copy of the kept block */
        return g->kern[PASS_K_COPY].n > 0 ? pass_kernel_time(g, PASS_K_COPY, 1, S / n / elem_bytes)
                                          : pass_mem_time(g, 2 * S / n, 1);
    if (n <= 1)
        return 0;
    int nodes = m->nodes[a], per = m->per_node[a];
    double t = measured(g, k->kind, n, nodes > 1, rpn, S);
    if (t >= 0)
        return t;
    /* Ring latency: n - 1 steps (twice for an all-reduce), of which
     * nodes - 1 cross the network. */
    double steps = (n - 1) * (k->kind == PLAN_COLL_ALLREDUCE ? 2 : 1);
    double inter = (nodes - 1) * (k->kind == PLAN_COLL_ALLREDUCE ? 2 : 1);
    double alpha = pass_cost_consts.coll_base_s + (steps - inter) * g->alpha_nvlink + inter * g->alpha_ib;
    switch (k->kind) {
    case PLAN_COLL_ALLREDUCE:
        return alpha + 2 * (n - 1) / n * S / ring_bw(g, nodes, per);
    case PLAN_COLL_REDUCESCATTER:
    case PLAN_COLL_ALLGATHER:
        return alpha + (n - 1) / n * S / ring_bw(g, nodes, per);
    case PLAN_COLL_ALLTOALL: {
        /* Each rank keeps 1/n, sends (per-1)/n over NVLink and the rest
         * through its own NIC; the two levels run concurrently. */
        double t_nvl = (per - 1) / n * S / g->busbw_nvlink;
        double t_ib = nodes > 1 ? (n - per) / n * S / g->busbw_ib : 0;
        return alpha + (t_nvl > t_ib ? t_nvl : t_ib);
    }
    default:
        break;
    }
    ir_die("pass_cost_coll: collective kind %d", (int)k->kind);
}

/* The group of every mesh axis in `axes` as a one-axis mesh: its size the
 * product of theirs, its members per node the product of each axis's. */
static PlanMesh group_of(const PlanMesh *m, unsigned axes)
{
    PlanMesh one = {.naxes = 1, .size = {1, 1, 1}, .nodes = {1, 1, 1}, .per_node = {1, 1, 1}};
    for (int a = 0; a < m->naxes; a++)
        if (axes >> a & 1)
            one.size[0] *= m->size[a], one.per_node[0] *= m->per_node[a];
    one.nodes[0] = (one.size[0] + one.per_node[0] - 1) / one.per_node[0];
    return one;
}

double pass_cost_coll_axes(const PassCostCtx *c, const PlanMesh *m, PlanCollKind kind, unsigned axes,
                           double numel, int elem_bytes)
{
    PlanMesh one = group_of(m, axes);
    if (one.size[0] <= 1)
        return 0;
    PlanColl k = {kind, 0, -1, -1, (int64_t)numel};
    return pass_cost_coll(c, &one, &k, elem_bytes);
}

double pass_a2a_miss(double E, double held, double k)
{
    /* k distinct experts drawn uniformly from E (force-balanced routing:
     * Megatron's moe_router_force_load_balancing ranks random logits), none
     * of them among the `held` a node or a rank holds. */
    double p = 1;
    for (int i = 0; i < (int)k; i++)
        p *= E - held - i > 0 ? (E - held - i) / (E - i) : 0;
    return p;
}

double pass_cost_a2a_moe(const PassCostCtx *c, const PlanMesh *m, unsigned axes, double T, double k,
                         double El, double D, double imb, int elem_bytes)
{
    PlanMesh one = group_of(m, axes);
    double n = one.size[0], per = one.per_node[0], nodes = one.nodes[0];
    const PassGpu *g = &c->cl->gpu;
    if (n <= 1)
        return 0;
    /* The alltoall dispatcher (and within one NVLink domain either: see
     * below) sends a row per chosen expert, T k rows, as an NCCL
     * all-to-all. A measured cluster has its own all-to-all fit. */
    if (c->st.moe_dispatcher != PASS_DISPATCH_FLEX || nodes <= 1 || g->ncoll[PLAN_COLL_ALLTOALL] > 0)
        return pass_cost_coll_axes(c, m, PLAN_COLL_ALLTOALL, axes, T * k * D * imb, elem_bytes);
    /* DeepEP's and HybridEP's dispatch send each token over RDMA once to
     * every other node holding any of its k experts, to the GPU of the
     * sender's local rank there, which writes it over NVLink to the ranks of
     * that node holding them (once a rank); combine pre-reduces within the
     * node and crosses back once a node (DeepEP's docs/legacy.md, "Normal
     * kernels with NVLink and RDMA forwarding"; HybridEP's docs/Hybrid-EP_Implementation.md, section 8,
     * branch hybrid-ep). Per rank: the NIC carries T x the other nodes a
     * token reaches; NVLink the rank's own tokens to the other ranks of its
     * node and the tokens its peers sent on to them, T x (per - 1) x the
     * chance a rank is reached, from each of the nodes; the two run at
     * once, each at the link's rate (busbw_ib: the NIC's measured rate, as
     * DeepEP's README's 45 GB/s of CX7 at EP 8 x 2 once the local node's half
     * of its "logical" 90 GB/s is taken out). Within one domain the dispatch
     * still writes a token once per rank (not per expert), but HybridEP's
     * published 8-rank B200 rate (536 GB/s of deduplicated rows, torch API)
     * prices those rows as the NCCL model prices T k rows at NVLink's
     * busbw within 5.3% at top-8 of 16 experts a rank, so the domain keeps the
     * NCCL pricing above (docs/moe.md, "Across nodes"). */
    double E = n * El, row = D * imb * elem_bytes;
    double ib = T * row * (nodes - 1) * (1 - pass_a2a_miss(E, per * El, k));
    double nvl = T * row * (per - 1) * (1 - pass_a2a_miss(E, El, k)) * nodes;
    double t_ib = ib / g->busbw_ib, t_nvl = per > 1 ? nvl / g->busbw_nvlink : 0;
    /* One kernel a direction: the base, a step to each peer node and each
     * NVLink peer, as the ring latency counts its steps. */
    double alpha = pass_cost_consts.coll_base_s + (per - 1) * g->alpha_nvlink + (nodes - 1) * g->alpha_ib;
    return alpha + (t_ib > t_nvl ? t_ib : t_nvl);
}
