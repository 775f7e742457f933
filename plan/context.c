/* context.c: where context parallelism puts each rank's part of the
 * sequence, and how much attention work that leaves each rank: the one
 * statement of the layout the cost model prices, the verifier checks and
 * docs/context.md describes (the programs' copy is runtime/trainer/train_cp.c,
 * tests/plan/test_plan.c holds the two together).
 *
 * Load-balanced (Megatron's and Llama 3's split): the sequence is cut into
 * 2 cp chunks of S / (2 cp) positions and rank r holds chunks r and
 * 2 cp - 1 - r, in that order, so under a causal mask every rank scores the
 * same number of pairs. The sequence dim's rows are in that order across the
 * whole program (the data loader reads them so, rope and attention place
 * them by position): an all-gather over the cp axis yields rank 0's two
 * chunks, then rank 1's, ... A model with a parameter along the sequence (a
 * learned position table) keeps its rows in position order: there the split
 * is contiguous, rank r holding [r S / cp, (r + 1) S / cp). */
#include "plan.h"

bool plan_cp_balanced(const IrGraph *g)
{
    for (int t = 0; t < g->ntensors; t++)
        if (g->tensors[t].role == IR_PARAM && g->seq_dim >= 0 && ir_tensor_has_dim(g, t, g->seq_dim))
            return false;
    return true;
}

int plan_cp_chunks(int64_t S, int cp, int r, bool balanced, int64_t *chunk, int64_t *pos)
{
    if (cp < 1 || S % (balanced ? 2 * cp : cp) || r < 0 || r >= cp)
        ir_die("plan_cp_chunks: rank %d of %d over a sequence of %lld", r, cp, (long long)S);
    if (!balanced || cp == 1) {
        *chunk = S / cp;
        pos[0] = r * *chunk;
        return 1;
    }
    *chunk = S / (2 * cp);
    pos[0] = r * *chunk;
    pos[1] = (2 * cp - 1 - r) * *chunk;
    return 2;
}

/* Keys a causal query at position p sees, integrated over p in [0, x): the
 * continuous count (x^2 / 2 without a window; a band of width w covers
 * w^2 / 2 + (x - w) w), the one the kernels' tile skipping follows. */
static double seen(double x, double w)
{
    if (w <= 0 || x <= w)
        return x * x / 2;
    return w * w / 2 + (x - w) * w;
}

double plan_cp_pairs(int64_t S, int cp, int r, bool balanced, bool causal, int64_t window)
{
    int64_t chunk, pos[PLAN_MAX_CP_CHUNKS];
    int n = plan_cp_chunks(S, cp, r, balanced, &chunk, pos);
    double pairs = 0;
    for (int i = 0; i < n; i++) {
        double p0 = (double)pos[i], p1 = p0 + (double)chunk;
        pairs += causal ? seen(p1, (double)window) - seen(p0, (double)window) : (double)chunk * (double)S;
    }
    return pairs;
}

double plan_cp_pairs_max(int64_t S, int cp, bool balanced, bool causal, int64_t window)
{
    double most = 0;
    for (int r = 0; r < cp; r++) {
        double p = plan_cp_pairs(S, cp, r, balanced, causal, window);
        most = p > most ? p : most;
    }
    return most;
}
