/* ckpt_cost.c: the time a checkpoint save blocks the step loop (issue 35),
 * priced for plan.txt when the user gives --save-every.
 *
 * A save writes 12 bytes per parameter (the fp32 master and two AdamW
 * moments, runtime/trainer/train_ckpt.c); the devices of a pipeline rank
 * share its stage's state evenly (ZeRO shards, or replicas each writing a
 * part), so the busiest rank holds the stage with the most optimizer state,
 * divided by the devices per stage. Every rank waits for the slowest at the
 * commit, so that rank's share is what blocks:
 *   synchronous:  its bytes / storage_write_gbs (the site's storage, written
 *                 by every rank at once, fsync included);
 *   asynchronous: its bytes / host_copy_gbs (the copy into host staging);
 *                 the write then runs beside training, and if it takes longer
 *                 than the steps until the next save, that save waits for
 *                 the rest.
 * Not priced: the checks both modes make before a save (a forward pass on
 * the next batch), the commit (one small manifest), and the writer's
 * competition with training for host CPUs and memory bandwidth (on a CPU
 * cluster it shows: docs/runtime.md's benchmark). */
#include "cost.h"

void pass_ckpt_cost(const PassCostCtx *c, const IrGraph *g, const PassPrediction *pr,
                    int devices, PassCkptCost *out)
{
    const PassGpu *gpu = &c->cl->gpu;
    out->total_bytes = 12.0 * (double)ir_param_count(g);
    double sum = 0, max = 0;
    for (int s = 0; s < pr->npp; s++) {
        sum += pr->mem[s].optim;
        if (pr->mem[s].optim > max)
            max = pr->mem[s].optim;
    }
    double stage = sum > 0 ? max / sum : 1.0 / (pr->npp > 0 ? pr->npp : 1);
    out->rank_bytes = out->total_bytes * stage / (devices > 0 ? devices : 1);
    out->write_s = gpu->storage_write_bw > 0 ? out->rank_bytes / gpu->storage_write_bw : -1;
    out->sync_s = out->write_s;
    out->async_s = -1;
    out->wait_s = 0;
    if (gpu->host_copy_bw > 0 && out->write_s >= 0) {
        out->async_s = out->rank_bytes / gpu->host_copy_bw;
        double between = c->save_every * pr->step_time_s;
        if (out->write_s > between)
            out->wait_s = out->write_s - between;
    }
}
