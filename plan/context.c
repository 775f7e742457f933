/* context.c: where context parallelism puts each rank's part of the
 * sequence, and how much attention work that leaves each rank: the one
 * statement of the layout the cost model prices, the verifier checks and
 * docs/context.md describes (the programs' copy is runtime/trainer/train_cp.c,
 * tests/plan/test_plan.c holds the two together).
 *
 * The sequence of S positions splits over the cp ranks in rank order: rank r
 * holds positions [r S / cp, (r + 1) S / cp), and after the all-gather every
 * rank holds all keys and values in position order. */
#include "plan.h"

int plan_cp_chunks(int64_t S, int cp, int r, int64_t *chunk, int64_t *pos)
{
    if (cp < 1 || S % cp || r < 0 || r >= cp)
        ir_die("plan_cp_chunks: rank %d of %d over a sequence of %lld", r, cp, (long long)S);
    *chunk = S / cp;
    pos[0] = r * *chunk;
    return 1;
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

double plan_cp_pairs(int64_t S, int cp, int r, bool causal, int64_t window)
{
    int64_t chunk, pos[PLAN_MAX_CP_CHUNKS];
    int n = plan_cp_chunks(S, cp, r, &chunk, pos);
    double pairs = 0;
    for (int i = 0; i < n; i++) {
        double p0 = (double)pos[i], p1 = p0 + (double)chunk;
        pairs += causal ? seen(p1, (double)window) - seen(p0, (double)window) : (double)chunk * (double)S;
    }
    return pairs;
}

double plan_cp_pairs_max(int64_t S, int cp, bool causal, int64_t window)
{
    double most = 0;
    for (int r = 0; r < cp; r++) {
        double p = plan_cp_pairs(S, cp, r, causal, window);
        most = p > most ? p : most;
    }
    return most;
}
