/* train_cp.c: context parallelism in the programs (docs/context.md): where
 * the sequence's rows sit, and the attention generated code calls where it
 * splits its queries' sequence over a mesh axis.
 *
 * The split is the plan's statement (plan/context.c: plan_cp_chunks, what
 * the cost model prices); this is the programs' copy, which the CP
 * equivalence tests (tests/codegen: losses, gradients and weights equal one
 * rank's) prove. With CG_CP_BALANCED the sequence is cut into 2 CG_CP chunks
 * of C positions and CP rank r holds chunks r and 2 CG_CP - 1 - r: row i of
 * the sequence dim (as the program lays it out, rank 0's rows first) is at
 * position tr_cp_position(i). Otherwise rows are positions, rank r holding
 * [r Sq, (r + 1) Sq). The keys and values reach attention gathered: all
 * Sk = cp x Sq of them in rank order, so their chunks are every rank's. */
#include "train.h"

RtComm *tr_cp_ring;

int64_t tr_cp_position(int64_t row)
{
    if (!CG_CP_BALANCED)
        return row;
    int64_t C = CG_SEQ / (2 * CG_CP), c = row / C, r = c / 2;
    return ((c & 1) ? 2 * CG_CP - 1 - r : r) * C + row % C;
}

/* The chunk length; qpos: rank r's chunks; kpos: every rank's, in order
 * (Sk of them, gathered: the whole sequence). */
static int64_t positions(int64_t Sq, int64_t Sk, int cp, int r, int64_t *qpos, int64_t *kpos)
{
    if (Sk != Sq * cp || Sk != CG_SEQ || cp != CG_CP)
        rt_fatal("context parallelism: %lld keys are not %d x %lld queries of the sequence of %d",
                 (long long)Sk, cp, (long long)Sq, (int)CG_SEQ);
    if (cp < 1 || 2 * cp > RT_ATTN_MAX_CHUNKS || r < 0 || r >= cp)
        rt_fatal("context parallelism: rank %d of %d (at most %d ranks)", r, cp, RT_ATTN_MAX_CHUNKS / 2);
    if (!CG_CP_BALANCED || cp == 1) {
        qpos[0] = r * Sq;
        for (int j = 0; j < cp; j++)
            kpos[j] = j * Sq;
        return Sq;
    }
    int64_t C = Sq / 2;
    for (int j = 0; j < 2 * cp; j++)
        kpos[j] = tr_cp_position(j * C);
    qpos[0] = kpos[2 * r], qpos[1] = kpos[2 * r + 1];
    return C;
}

void cg_attention_cp_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                         int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                         bool causal, int64_t window, int cp, int r)
{
    int64_t qpos[2], kpos[RT_ATTN_MAX_CHUNKS];
    int64_t chunk = positions(Sq, Sk, cp, r, qpos, kpos);
    rt_attention_pos_fwd(o, lse, q, k, v, B, Sq, Sk, H, KVH, D, causal, window, chunk, qpos, kpos);
}

void cg_attention_cp_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                         const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                         int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t KVH, int64_t D,
                         bool causal, int64_t window, int cp, int r)
{
    int64_t qpos[2], kpos[RT_ATTN_MAX_CHUNKS];
    int64_t chunk = positions(Sq, Sk, cp, r, qpos, kpos);
    rt_attention_pos_bwd(dq, dk, dv, q, k, v, o, lse, dout, B, Sq, Sk, H, KVH, D, causal, window,
                         chunk, qpos, kpos);
}

/* Rope over rows [row0, row0 + seq) of the sequence dim, each run of
 * consecutive positions (at most a chunk) rotated by one rt_rope call per
 * outer index: x and y [outer, seq, inner, dim]. */
typedef void (*RopeRun)(rt_act *y, const rt_act *x, int64_t n, int64_t inner, int64_t dim, int64_t pos,
                        const float *k);

static void rope_runs(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner,
                      int64_t dim, int64_t row0, RopeRun run, const float *k)
{
    int64_t C = CG_SEQ / (2 * CG_CP), row = inner * dim;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < seq;) {
            int64_t n = C - (row0 + i) % C;
            n = n < seq - i ? n : seq - i;
            size_t at = (size_t)((o * seq + i) * row);
            run(y + at, x + at, n, inner, dim, tr_cp_position(row0 + i), k);
            i += n;
        }
}

/* k: theta, inverse */
static void run_rope(rt_act *y, const rt_act *x, int64_t n, int64_t inner, int64_t dim, int64_t pos,
                     const float *k)
{
    rt_rope(y, x, 1, n, inner, dim, pos, k[0], k[1] != 0);
}

/* k: theta, factor, low, high, original, inverse */
static void run_llama3(rt_act *y, const rt_act *x, int64_t n, int64_t inner, int64_t dim, int64_t pos,
                       const float *k)
{
    rt_rope_llama3(y, x, 1, n, inner, dim, pos, k[0], k[1], k[2], k[3], k[4], k[5] != 0);
}

void cg_rope(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner, int64_t dim,
             int64_t row0, float theta, bool inverse)
{
    if (!CG_CP_BALANCED) {
        rt_rope(y, x, outer, seq, inner, dim, row0, theta, inverse);
        return;
    }
    const float k[2] = {theta, inverse ? 1.0f : 0.0f}; /* (no narrowing: nvcc compiles this as C++) */
    rope_runs(y, x, outer, seq, inner, dim, row0, run_rope, k);
}

void cg_rope_llama3(rt_act *y, const rt_act *x, int64_t outer, int64_t seq, int64_t inner,
                    int64_t dim, int64_t row0, float theta, float factor, float low_freq_factor,
                    float high_freq_factor, float original_max_position, bool inverse)
{
    if (!CG_CP_BALANCED) {
        rt_rope_llama3(y, x, outer, seq, inner, dim, row0, theta, factor, low_freq_factor,
                       high_freq_factor, original_max_position, inverse);
        return;
    }
    const float k[6] = {theta, factor, low_freq_factor, high_freq_factor, original_max_position,
                        inverse ? 1.0f : 0.0f};
    rope_runs(y, x, outer, seq, inner, dim, row0, run_llama3, k);
}

/* The ring (rt_attention_ring_fwd/bwd): every rank's chunk positions, rank
 * by rank, and a scratch grown to the largest call. */
static int ring_positions(int64_t Sq, int cp, int64_t *pos, int64_t *chunk)
{
    if (cp != CG_CP || Sq * cp != CG_SEQ || 2 * cp > RT_ATTN_MAX_CHUNKS)
        rt_fatal("context parallelism: %lld queries on each of %d ranks, not the sequence of %d",
                 (long long)Sq, cp, (int)CG_SEQ);
    int n = CG_CP_BALANCED ? 2 : 1;
    *chunk = Sq / n;
    for (int j = 0; j < cp * n; j++)
        pos[j] = tr_cp_position(j * *chunk);
    return n;
}

static void *ring_scratch(size_t bytes)
{
    static void *buf;
    static size_t have;
    if (bytes > have) {
        if (buf)
            rt_free(buf);
        buf = rt_alloc(bytes);
        have = bytes;
    }
    return buf;
}

void cg_attention_ring_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                           int64_t B, int64_t Sq, int64_t H, int64_t KVH, int64_t D, bool causal,
                           int64_t window, int cp, int r)
{
    int64_t pos[RT_ATTN_MAX_CHUNKS], chunk;
    int n = ring_positions(Sq, cp, pos, &chunk);
    (void)r; /* the ring's communicator knows this rank's place */
    void *scratch = ring_scratch(rt_attention_ring_scratch(B, Sq, H, KVH, D));
    rt_attention_ring_fwd(tr_cp_ring, o, lse, q, k, v, B, Sq, H, KVH, D, causal, window, chunk, n, pos,
                          scratch);
}

void cg_attention_ring_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                           const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                           int64_t B, int64_t Sq, int64_t H, int64_t KVH, int64_t D, bool causal,
                           int64_t window, int cp, int r)
{
    int64_t pos[RT_ATTN_MAX_CHUNKS], chunk;
    int n = ring_positions(Sq, cp, pos, &chunk);
    (void)r;
    void *scratch = ring_scratch(rt_attention_ring_scratch(B, Sq, H, KVH, D));
    rt_attention_ring_bwd(tr_cp_ring, dq, dk, dv, q, k, v, o, lse, dout, B, Sq, H, KVH, D, causal, window,
                          chunk, n, pos, scratch);
}

/* The all-to-all form (docs/context.md): q, k, v arrive by all-to-all as
 * the whole sequence of this rank's heads, rows in the program's order
 * (rank 0's chunks first, as the ring's blocks), so queries and keys sit
 * at the same chunk positions. */
static int64_t a2a_positions(int64_t S, int64_t *pos)
{
    if (S != CG_SEQ)
        rt_fatal("context parallelism (all-to-all): %lld rows are not the sequence of %d",
                 (long long)S, (int)CG_SEQ);
    int64_t chunk;
    ring_positions(S / CG_CP, CG_CP, pos, &chunk);
    return chunk;
}

void cg_attention_a2a_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                          int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                          int64_t window)
{
    int64_t pos[RT_ATTN_MAX_CHUNKS], chunk = a2a_positions(S, pos);
    rt_attention_pos_fwd(o, lse, q, k, v, B, S, S, H, KVH, D, causal, window, chunk, pos, pos);
}

void cg_attention_a2a_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                          const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout,
                          int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                          int64_t window)
{
    int64_t pos[RT_ATTN_MAX_CHUNKS], chunk = a2a_positions(S, pos);
    rt_attention_pos_bwd(dq, dk, dv, q, k, v, o, lse, dout, B, S, S, H, KVH, D, causal, window, chunk,
                         pos, pos);
}
