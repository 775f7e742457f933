/* sync.c: the wait at a synchronising collective on CPU ranks (issue 10).
 * The rates are each rank's mean over many calls (the slowest rank's), so a
 * program that synchronises once a step runs at them; one whose ranks meet
 * at a collective after every few ms of work (tensor parallelism) waits each
 * time for whichever is late this time. `ptdc calibrate` measures that wait
 * in pairs, as a fraction of the GEMMs and of the memory-bound work between
 * two collectives (runtime/measure/m_sync.c); a group of g waits for the latest of
 * g, the expected maximum of g independent normal delays against that of
 * two. GPUs: not measured, no term. */
#include "cost/cost.h"

#include <math.h>

/* Expected maximum of g standard normal variables (g = 1..8), then the
 * asymptote sqrt(2 ln g). */
static double max_normal(int g)
{
    static const double e[] = {0, 0, 0.5642, 0.8463, 1.0294, 1.1630, 1.2672, 1.3522, 1.4236};
    return g <= 8 ? e[g < 0 ? 0 : g] : sqrt(2 * log((double)g));
}

double pass_sync_wait(const PassCluster *cl, int group, double compute_s, double other_s)
{
    const PassGpu *g = &cl->gpu;
    if (g->kind != PASS_DEV_CPU || group < 2)
        return 0;
    int rpn = cl->gpus_per_node > 0 ? cl->gpus_per_node : 1;
    bool shared = g->cores >= 1 && rpn > g->cores;
    double jc = shared ? g->sync_gemm_shared : g->sync_gemm, jm = shared ? g->sync_mem_shared : g->sync_mem;
    return max_normal(group) / max_normal(2) * (jc * compute_s + jm * other_s);
}
