/* overlap.c: how much of a tensor-parallel transfer of `comm` seconds stays
 * exposed when it runs beside a GEMM of `gemm` seconds that produces or
 * consumes it (docs/cost-model.md, "Tensor-parallel overlap"). The three
 * ways Transformer Engine pairs them (transformer_engine/pytorch/module/
 * base.py, initialize_ub; Megatron --tp-comm-overlap), and the backward pair
 * Megatron's own linear layers overlap without it:
 *
 *   RING      an all-gather feeding a GEMM: the GEMM runs in `chunks` (the
 *             group size) pieces, each on the chunk at hand while the next
 *             arrives from the neighbour; only the last piece has no
 *             transfer under it. Exposed: max(0, comm - gemm (k-1)/k).
 *   PIPELINE  a reduce-scatter of a GEMM's output: the GEMM runs in `chunks`
 *             pieces (TE's num_splits), each piece's reduce-scatter beside
 *             the next piece; the last piece's is exposed. Exposed:
 *             comm/k + (k-1)/k max(0, comm - gemm).
 *   BULK      the transfer is issued with a GEMM that does not depend on it
 *             and waited for after it. Exposed: max(0, comm - gemm).
 *   OWN       ptdc's chunked gather (rt_allgather_matmul): one all-gather
 *             in flight while the GEMM runs the rows of the rank's own
 *             block, a `chunks`-th of it (the group size); the rest waits.
 *             Exposed: max(0, comm - gemm/k); RING's for two ranks.
 *
 * The chunked GEMM is priced as the whole one (its pieces are still large:
 * a sequence of 4096 tokens over 8 ranks gives 512-row pieces). */
#include "cost/cost.h"

#include <math.h>

double pass_overlap_exposed(PassOverlapKind kind, double comm, double gemm, int chunks)
{
    if (comm <= 0)
        return 0;
    double k = chunks > 1 ? chunks : 1;
    switch (kind) {
    case PASS_OVERLAP_RING:
        return fmax(0, comm - gemm * (k - 1) / k);
    case PASS_OVERLAP_PIPELINE:
        return comm / k + (k - 1) / k * fmax(0, comm - gemm);
    case PASS_OVERLAP_BULK:
        return fmax(0, comm - gemm);
    case PASS_OVERLAP_OWN:
        return fmax(0, comm - gemm / k);
    }
    return comm;
}
