/* m_comm.c: collectives and pipeline transfers by group size and message
 * size, every group of the launch running at once (as a mesh axis's groups
 * do in a plan).
 *
 * Records (BYTES in the nccl-tests convention the cost model uses, see
 * PlanColl: all-reduce the buffer, reduce-scatter its input, all-gather its
 * output, all-to-all the local tensor; send/recv the message):
 *   node RANK NODE                      which node each rank is on
 *   coll KIND GROUP NODES PER_NODE BYTES SECONDS
 * KIND: allreduce, reduce_scatter, allgather, alltoall, sendrecv. Groups are
 * consecutive ranks (a mesh's inner axis, inside a node when it fits) and,
 * across nodes, one rank per node (an outer axis). */
#include "measure.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int kind;                     /* 0 allreduce, 1 reduce_scatter, 2 allgather, 3 alltoall, 4 sendrecv */
    RtComm *c;
    rt_act *a, *b;
    int64_t n;                    /* elements: buffer, output block, input block, per-rank block, message */
    int peer;
    size_t evict_bytes;           /* of each buffer, before a cold call */
} CollArg;

/* The CPU backend's collectives move host memory: both buffers out of the
 * caches before each call, as a training step's kernels leave them (a
 * program's working set is larger than the caches, and between two
 * collectives its GEMMs stream weights and activations through them).
 * Timed warm, a 128 KiB reduce-scatter between two ranks ran 4.7x faster
 * and a 4 MiB one 1.4x (docs/cost-model.md, "Calibration"). */
static void evict_coll(void *p)
{
    CollArg *k = (CollArg *)p;
    cal_evict(k->a, k->evict_bytes);
    cal_evict(k->b, k->evict_bytes);
}

static const char *const coll_name[CAL_NCOLL] = CAL_COLL_NAMES;

static void run_coll(void *p)
{
    CollArg *k = (CollArg *)p;
    switch (k->kind) {
    case 0: rt_allreduce(k->c, k->a, k->n, RT_ACT); break;
    case 1: rt_reduce_scatter(k->c, k->b, k->a, k->n, RT_ACT); break;
    case 2: rt_allgather(k->c, k->b, k->a, k->n, RT_ACT); break;
    case 3: rt_alltoall(k->c, k->b, k->a, k->n, RT_ACT); break;
    default: {
        /* Both directions at once, as 1F1B's steady state sends activations
         * on and gradients back. */
        RtReq *s = rt_isend(k->c, k->a, k->n, RT_ACT, k->peer, 7);
        RtReq *r = rt_irecv(k->c, k->b, k->n, RT_ACT, k->peer, 7);
        rt_wait(s);
        rt_wait(r);
    }
    }
}

static uint32_t host_hash(void)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint32_t h = 2166136261u;
    for (const char *s = host; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h & 0x7fffffff;
}

/* node[r]: index of rank r's node (in order of first appearance). */
static void find_nodes(const CalOpts *o, int *node, int *nnodes)
{
    int32_t mine = (int32_t)host_hash();
    int32_t *d = (int32_t *)rt_alloc(sizeof(int32_t) * (size_t)(o->size + 1));
    int32_t *all = (int32_t *)malloc(sizeof(int32_t) * (size_t)o->size);
    if (!all)
        rt_fatal("ptdc-measure: out of host memory");
    rt_to_device(d, &mine, sizeof mine);
    rt_allgather(rt_comm_world(), d + 1, d, 1, RT_I32);
    rt_to_host(all, d + 1, sizeof(int32_t) * (size_t)o->size);
    *nnodes = 0;
    for (int r = 0; r < o->size; r++) {
        node[r] = -1;
        for (int q = 0; q < r && node[r] < 0; q++)
            if (all[q] == all[r])
                node[r] = node[q];
        if (node[r] < 0)
            node[r] = (*nnodes)++;
    }
    free(all);
    rt_free(d);
}

static void measure_groups(const CalOpts *o, const int *node, int g, bool strided, int *done,
                           int total)
{
    int per_group = strided ? o->size / g : 1; /* stride between members */
    int color = strided ? o->rank % per_group : o->rank / g;
    RtComm *c = rt_comm_split(color, o->rank);
    /* Nodes one group spans and its members per node (rank 0's group). */
    int nodes = 0, per_node = 0;
    int seen[1024];
    for (int i = 0; i < g && i < 1024; i++) {
        int r = strided ? i * per_group : i;
        bool dup = false;
        for (int j = 0; j < nodes; j++)
            dup |= seen[j] == node[r];
        if (!dup)
            seen[nodes++] = node[r];
        per_node += node[r] == node[0];
    }
    static const int64_t bytes[] = {1 << 10, 1 << 13, 1 << 16, 1 << 19, 1 << 22, 1 << 25};
    enum { NB = 6 };
    int64_t maxn = bytes[NB - 1] / (int64_t)sizeof(rt_act);
    CollArg k;
    memset(&k, 0, sizeof k);
    k.c = c;
    k.a = cal_act(maxn, 1e-3f);
    k.b = cal_act(maxn, 0.f);
    int me = rt_comm_rank(c);
    k.peer = me ^ 1;
    for (int kind = 0; kind < 5; kind++) {
        if (kind == 4 && (g != 2))
            continue; /* pipeline neighbours are pairs */
        for (int s = 0; s < NB; s++) {
            if (o->quick && s % 2)
                continue;
            int64_t elems = bytes[s] / (int64_t)sizeof(rt_act);
            k.kind = kind;
            /* n per call from the buffer size in the model's convention. */
            k.n = (kind == 0 || kind == 4) ? elems : elems / g;
            if (k.n < 1)
                continue;
            int64_t conv = (kind == 0 || kind == 4) ? k.n : k.n * g;
            k.evict_bytes = (size_t)conv * sizeof(rt_act);
            double t = o->gpu ? cal_time(o, rt_comm_world(), run_coll, &k)
                              : cal_time_cold(o, rt_comm_world(), run_coll, evict_coll, &k);
            cal_out(o, CAL_FMT_COLL, coll_name[kind], g, nodes, per_node,
                    (long long)(conv * (int64_t)sizeof(rt_act)), t);
            if (s == NB - 1)
                cal_progress(o, "collective %2d/%d  %-14s group %d%s  %8.3f GB/s at %lld MiB",
                             ++*done, total, coll_name[kind], g,
                             nodes > 1 ? " (across nodes)" : "",
                             (double)conv * sizeof(rt_act) / t * 1e-9,
                             (long long)(conv * (int64_t)sizeof(rt_act) >> 20));
        }
    }
    rt_free(k.a);
    rt_free(k.b);
}

void cal_measure_comm(const CalOpts *o)
{
    int *node = (int *)malloc(sizeof(int) * (size_t)o->size);
    if (!node)
        rt_fatal("ptdc-measure: out of host memory");
    int nnodes = 0;
    find_nodes(o, node, &nnodes);
    for (int r = 0; r < o->size; r++)
        cal_out(o, CAL_FMT_NODE, r, node[r]);
    if (o->size < 2) {
        cal_progress(o, "one rank: no collectives to measure (launch with more ranks)");
        free(node);
        return;
    }
    /* Group sizes: every power of two dividing the world, consecutive ranks;
     * with several nodes also one rank per node. */
    int sizes[32], ns = 0;
    for (int g = 2; g <= o->size; g *= 2)
        if (o->size % g == 0)
            sizes[ns++] = g;
    int per_node0 = 0;
    for (int r = 0; r < o->size; r++)
        per_node0 += node[r] == 0;
    bool across = nnodes > 1 && o->size % nnodes == 0 && per_node0 * nnodes == o->size;
    int total = 0;
    for (int i = 0; i < ns; i++)
        total += sizes[i] == 2 ? 5 : 4;
    if (across)
        total += nnodes == 2 ? 5 : 4;
    int done = 0;
    for (int i = 0; i < ns; i++)
        measure_groups(o, node, sizes[i], false, &done, total);
    if (across)
        measure_groups(o, node, nnodes, true, &done, total);
    free(node);
}
