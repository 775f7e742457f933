/* share.c: CPU ranks sharing their node's cores (issue 10). The cluster's
 * rates for R ranks on C < R cores are each rank's time slice, C / R of one
 * core's (cluster.c: cpu_share): true while every rank computes. A
 * generated program's pipeline rank sleeps while it waits for a message
 * (rt_wait polls and naps: runtime/cpu/comm.c), so in a pipeline's fill,
 * drain and imbalance the ranks that have work run faster.
 * Processor sharing (the busy processes of a node split its cores, none
 * faster than one core) is the limit; how far the scheduler gets toward it
 * is measured (`ptdc calibrate`: core_share, runtime/measure/m_share.c) and the
 * speed is blended between the two by it. */
#include "cost/cost.h"

#include <math.h>

bool pass_share(const PassCluster *cl, int pp, int stage_ranks, PassShare *sh)
{
    const PassGpu *g = &cl->gpu;
    int rpn = cl->gpus_per_node > 0 ? cl->gpus_per_node : 1;
    if (g->kind != PASS_DEV_CPU || g->cores < 1 || g->core_share <= 0 || g->cores >= rpn || pp < 2 ||
        stage_ranks < 1)
        return false;
    /* Pipeline ranks fill nodes in consecutive blocks: a stage of
     * stage_ranks processes covers stage_ranks / rpn nodes, or a node holds
     * rpn / stage_ranks stages. */
    int group = stage_ranks >= rpn ? 1 : rpn / stage_ranks;
    if (group < 2)
        return false;
    sh->group = group < pp ? group : pp;
    sh->procs = stage_ranks < rpn ? stage_ranks : rpn;
    sh->cores = g->cores;
    sh->c = (double)g->cores / rpn;
    sh->gain = g->core_share;
    return sh->gain > 0;
}

double pass_share_speed(const PassShare *sh, int busy)
{
    double per = sh->cores / (busy * sh->procs), ps = (per < 1 ? per : 1) / sh->c;
    return 1 + sh->gain * (ps - 1);
}

double pass_share_bound(const PassShare *sh, int pp, double tsum, double tmax, double m)
{
    /* One rank alone runs at most at speed(1); a node's busy ranks together
     * make at most `group` seconds of their rates per second (all busy), so
     * the pp ranks at most pp. */
    double top = pass_share_speed(sh, 1);
    return fmax(fmax(m * tmax, tsum) / top, m * tsum / pp);
}
