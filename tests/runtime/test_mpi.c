/* test_mpi.c (mpirun -np 4): every collective and *_dim helper against a
 * reference computed in this process; vocabulary-parallel embedding and
 * cross-entropy over 2 and 4 ranks against the unsplit kernels; sharded
 * initialisation assembled across ranks against the unsplit tensor.
 * Non-blocking collectives in flight together and beside blocking ones.
 * Test values are small integers (exact in fp32), so collectives must
 * match exactly; the split cross-entropy sums in another order and is
 * compared to 1e-6. Each rank counts its failures; the world agrees. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"
#include "rt.h"

static int me, np;

static bool all(bool ok)
{
    int v = ok ? 0 : 1;
    rt_allreduce(rt_comm_world(), &v, 1, RT_I32);
    return v == 0;
}

static void test_comm_split(void)
{
    /* even and odd ranks, ordered by descending world rank */
    RtComm *c = rt_comm_split(me % 2, -me);
    CHECK(rt_comm_size(c) == np / 2, "split size %d", rt_comm_size(c));
    int want = (np / 2 - 1) - me / 2;
    CHECK(rt_comm_rank(c) == want, "split rank %d, want %d", rt_comm_rank(c), want);
    RtComm *none = rt_comm_split(me == 0 ? 0 : -1, 0);
    CHECK((me == 0) == (none != NULL), "color < 0 must give NULL");
    CHECK(rt_comm_size(rt_comm_world()) == np && rt_comm_rank(rt_comm_world()) == me, "world");
}

static void test_collectives(RtComm *c, const char *name)
{
    int p = rt_comm_size(c), r = rt_comm_rank(c);
    enum { N = 1000 };
    float *buf = malloc(sizeof(float) * N * 4), *out = malloc(sizeof(float) * N * 4);
    /* all-reduce: sum over ranks of (rank*100 + i) */
    for (int i = 0; i < N; i++)
        buf[i] = (float)(r * 100 + i);
    rt_allreduce(c, buf, N, RT_F32);
    bool ok = true;
    for (int i = 0; i < N; i++)
        ok = ok && buf[i] == (float)(100 * p * (p - 1) / 2 + p * i);
    CHECK(ok, "%s: allreduce", name);
    int32_t ib[3] = {r, 1, -r};
    rt_allreduce(c, ib, 3, RT_I32);
    CHECK(ib[0] == p * (p - 1) / 2 && ib[1] == p && ib[2] == -ib[0], "%s: allreduce i32", name);
    float mx[2] = {(float)r, (float)-r};
    rt_allreduce_max(c, mx, 2);
    CHECK(mx[0] == (float)(p - 1) && mx[1] == 0.0f, "%s: allreduce_max", name);
    /* reduce-scatter: in[j] = rank + j over p blocks of N/4 */
    int nb = N / 4;
    for (int j = 0; j < nb * p; j++)
        buf[j] = (float)(r + j);
    rt_reduce_scatter(c, out, buf, nb, RT_F32);
    ok = true;
    for (int i = 0; i < nb; i++)
        ok = ok && out[i] == (float)(p * (p - 1) / 2 + p * (r * nb + i));
    CHECK(ok, "%s: reduce_scatter", name);
    /* all-gather: block q holds q*1000 + i */
    for (int i = 0; i < nb; i++)
        buf[i] = (float)(r * 1000 + i);
    rt_allgather(c, out, buf, nb, RT_ACT);
    ok = true;
    for (int q = 0; q < p; q++)
        for (int i = 0; i < nb; i++)
            ok = ok && out[q * nb + i] == (float)(q * 1000 + i);
    CHECK(ok, "%s: allgather", name);
    /* all-to-all: block q of rank r holds r*10000 + q*100 + i */
    for (int q = 0; q < p; q++)
        for (int i = 0; i < nb; i++)
            buf[q * nb + i] = (float)(r * 10000 + q * 100 + i);
    rt_alltoall(c, out, buf, nb, RT_F32);
    ok = true;
    for (int q = 0; q < p; q++)
        for (int i = 0; i < nb; i++)
            ok = ok && out[q * nb + i] == (float)(q * 10000 + r * 100 + i);
    CHECK(ok, "%s: alltoall", name);
    /* broadcast from the last rank */
    for (int i = 0; i < nb; i++)
        buf[i] = r == p - 1 ? (float)(7 * i) : -1.0f;
    rt_bcast(c, buf, nb, RT_F32, p - 1);
    ok = true;
    for (int i = 0; i < nb; i++)
        ok = ok && buf[i] == (float)(7 * i);
    CHECK(ok, "%s: bcast", name);
    /* a ring of non-blocking sends and receives, both posted before waiting */
    int32_t send[5], recv[5] = {0};
    for (int i = 0; i < 5; i++)
        send[i] = r * 10 + i;
    RtReq *rq = rt_irecv(c, recv, 5, RT_I32, (r + p - 1) % p, 7);
    RtReq *sq = rt_isend(c, send, 5, RT_I32, (r + 1) % p, 7);
    rt_wait(sq);
    rt_wait(rq);
    ok = true;
    for (int i = 0; i < 5; i++)
        ok = ok && recv[i] == ((r + p - 1) % p) * 10 + i;
    CHECK(ok, "%s: isend/irecv ring", name);
    rt_barrier(c);
    free(buf);
    free(out);
}

/* Non-blocking collectives: several in flight on one communicator at
 * once, blocking collectives on the same group between issue and wait
 * (they run on the main thread while the communication thread runs the
 * others: the twin keeps them apart), an in-place all-gather, a group, and
 * each result exact. */
static void test_nonblocking(RtComm *c, const char *name)
{
    int p = rt_comm_size(c), r = rt_comm_rank(c);
    enum { N = 3000, K = 4 };
    float *ar[K], *rs_in = malloc(sizeof(float) * N * 4), *rs_out = malloc(sizeof(float) * N);
    float *ag = malloc(sizeof(float) * N * 4), *ag2 = malloc(sizeof(float) * N * 4);
    RtReq *rq[K + 3];
    for (int k = 0; k < K; k++) {
        ar[k] = malloc(sizeof(float) * N);
        for (int i = 0; i < N; i++)
            ar[k][i] = (float)(r * 100 + i + k);
        rq[k] = rt_iallreduce(c, ar[k], N, RT_F32);
    }
    int nb = N / 4;
    for (int j = 0; j < nb * p; j++)
        rs_in[j] = (float)(r + j);
    rt_group_begin();
    rq[K] = rt_ireduce_scatter(c, rs_out, rs_in, nb, RT_F32);
    for (int i = 0; i < nb; i++) /* in place: this rank's block of the output */
        ag[r * nb + i] = (float)(r * 1000 + i);
    rq[K + 1] = rt_iallgather(c, ag, ag + r * nb, nb, RT_F32);
    rt_group_end();
    float *src = malloc(sizeof(float) * nb);
    for (int i = 0; i < nb; i++)
        src[i] = (float)(-r * 1000 - i);
    rq[K + 2] = rt_iallgather(c, ag2, src, nb, RT_F32);
    /* A blocking all-reduce on the same group while those are in flight. */
    int32_t v = r + 1;
    rt_allreduce(c, &v, 1, RT_I32);
    CHECK(v == p * (p + 1) / 2, "%s: blocking allreduce among non-blocking ones", name);
    for (int k = K + 2; k >= 0; k--) /* any order of waits */
        rt_wait(rq[k]);
    bool ok = true;
    for (int k = 0; k < K; k++)
        for (int i = 0; i < N; i++)
            ok = ok && ar[k][i] == (float)(100 * p * (p - 1) / 2 + p * (i + k));
    CHECK(ok, "%s: iallreduce x%d", name, K);
    ok = true;
    for (int i = 0; i < nb; i++)
        ok = ok && rs_out[i] == (float)(p * (p - 1) / 2 + p * (r * nb + i));
    CHECK(ok, "%s: ireduce_scatter", name);
    ok = true;
    for (int q = 0; q < p; q++)
        for (int i = 0; i < nb; i++)
            ok = ok && ag[q * nb + i] == (float)(q * 1000 + i) && ag2[q * nb + i] == (float)(-q * 1000 - i);
    CHECK(ok, "%s: iallgather (in place and not)", name);
    for (int k = 0; k < K; k++)
        free(ar[k]);
    free(rs_in), free(rs_out), free(ag), free(ag2), free(src);
}

/* T[o][d][i] = o*1000 + d*10 + i, viewed [outer, d, inner]. */
static float tval(int64_t o, int64_t d, int64_t i)
{
    return (float)(o * 1000 + d * 10 + i);
}

static void test_dim_helpers(RtComm *c, const char *name)
{
    int p = rt_comm_size(c), r = rt_comm_rank(c);
    for (int64_t outer = 1; outer <= 3; outer += 2) {
        const int64_t dl = 2, inner = 5, d = dl * p;
        int64_t nfull = outer * d * inner, nloc = outer * dl * inner;
        float *full = malloc(sizeof(float) * (size_t)nfull), *loc = malloc(sizeof(float) * (size_t)nloc);
        float *out = malloc(sizeof(float) * (size_t)nfull), *scr = malloc(sizeof(float) * (size_t)nfull);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < d; j++)
                for (int64_t i = 0; i < inner; i++)
                    full[(o * d + j) * inner + i] = tval(o, j, i);
        rt_slice_dim(loc, full, outer, dl, inner, p, r);
        bool ok = true;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < dl; j++)
                for (int64_t i = 0; i < inner; i++)
                    ok = ok && loc[(o * dl + j) * inner + i] == tval(o, r * dl + j, i);
        CHECK(ok, "%s: slice_dim outer=%lld", name, (long long)outer);
        rt_allgather_dim(c, out, loc, outer, dl, inner, scr);
        CHECK(memcmp(out, full, sizeof(float) * (size_t)nfull) == 0, "%s: allgather_dim outer=%lld",
              name, (long long)outer);
        /* partial sums: rank r holds (r + 1) T; the sum is p(p+1)/2 T */
        for (int64_t k = 0; k < nfull; k++)
            out[k] = (float)(r + 1) * full[k];
        rt_reduce_scatter_dim(c, loc, out, outer, dl, inner, scr);
        ok = true;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < dl; j++)
                for (int64_t i = 0; i < inner; i++)
                    ok = ok && loc[(o * dl + j) * inner + i] ==
                                   (float)(p * (p + 1) / 2) * tval(o, r * dl + j, i);
        CHECK(ok, "%s: reduce_scatter_dim outer=%lld", name, (long long)outer);
        free(full), free(loc), free(out), free(scr);
    }
    /* all-to-all: [outer, d1, mid, d2, inner] moving the split d1 <-> d2 */
    const int64_t outer = 2, d1 = 2 * p, mid = 3, d2 = p, inner = 2;
    int64_t n = outer * d1 * mid * d2 * inner, nl = n / p;
#define AIDX(o, a, m, b, i, D1, D2) ((((o) * (D1) + (a)) * mid + (m)) * (D2) + (b)) * inner + (i)
    float *s1 = malloc(sizeof(float) * (size_t)nl), *s2 = malloc(sizeof(float) * (size_t)nl);
    float *got = malloc(sizeof(float) * (size_t)nl), *scr = malloc(sizeof(float) * (size_t)nl);
    int64_t a1 = d1 / p, b2 = d2 / p;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t a = 0; a < d1; a++)
            for (int64_t m = 0; m < mid; m++)
                for (int64_t b = 0; b < d2; b++)
                    for (int64_t i = 0; i < inner; i++) {
                        float v = (float)((((o * d1 + a) * mid + m) * d2 + b) * inner + i);
                        if (a / a1 == r) /* split along d1 */
                            s1[AIDX(o, a % a1, m, b, i, a1, d2)] = v;
                        if (b / b2 == r) /* split along d2 */
                            s2[AIDX(o, a, m, b % b2, i, d1, b2)] = v;
                    }
    rt_alltoall_dim(c, got, s1, outer, d1, mid, d2, inner, true, scr);
    CHECK(memcmp(got, s2, sizeof(float) * (size_t)nl) == 0, "%s: alltoall_dim d1 -> d2", name);
    rt_alltoall_dim(c, got, s2, outer, d1, mid, d2, inner, false, scr);
    CHECK(memcmp(got, s1, sizeof(float) * (size_t)nl) == 0, "%s: alltoall_dim d2 -> d1", name);
    free(s1), free(s2), free(got), free(scr);
}

/* Vocabulary split over the ranks of c: equal to the unsplit kernels. */
static void test_vocab_parallel(RtComm *c, const char *name)
{
    int p = rt_comm_size(c), r = rt_comm_rank(c);
    enum { V = 12, DIM = 4, ROWS = 7, TOTAL = 28 };
    int64_t vl = V / p, off = r * vl;
    float table[V * DIM], logits[ROWS * V];
    ref_seed(99); /* the same data on every rank */
    ref_fill(table, NULL, V * DIM, -1, 1);
    ref_fill(logits, NULL, ROWS * V, -4, 4);
    const int32_t ids[ROWS] = {0, 11, 5, 6, 3, 3, 9};

    float whole[ROWS * DIM], part[ROWS * DIM];
    rt_embedding_fwd(whole, ids, table, ROWS, V, 0, DIM);
    rt_embedding_fwd(part, ids, table + off * DIM, ROWS, vl, off, DIM);
    rt_allreduce(c, part, ROWS * DIM, RT_ACT);
    CHECK(memcmp(whole, part, sizeof whole) == 0, "%s: vocab-parallel embedding fwd", name);
    float dout[ROWS * DIM], gw[V * DIM] = {0}, gp[V * DIM] = {0};
    ref_fill(dout, NULL, ROWS * DIM, -1, 1);
    rt_embedding_bwd(gw, ids, dout, ROWS, V, 0, DIM);
    rt_embedding_bwd(gp + off * DIM, ids, dout, ROWS, vl, off, DIM);
    rt_allgather(c, table, gp + off * DIM, vl * DIM, RT_ACT); /* table reused as output */
    CHECK(memcmp(gw, table, sizeof gw) == 0, "%s: vocab-parallel embedding bwd", name);

    /* cross-entropy over logit columns [off, off + vl) */
    float mine[ROWS * V / 1];
    for (int i = 0; i < ROWS; i++)
        memcpy(mine + i * vl, logits + i * V + off, sizeof(float) * (size_t)vl);
    float lw = 0.25f, ls = 0.25f, lsew[ROWS], lses[ROWS];
    rt_cross_entropy_fwd(&lw, lsew, logits, ids, ROWS, V, 0, TOTAL, 1.0f, NULL);
    rt_cross_entropy_fwd(&ls, lses, mine, ids, ROWS, vl, off, TOTAL, 1.0f, c);
    double lwd = lw, lsed[ROWS];
    for (int i = 0; i < ROWS; i++)
        lsed[i] = lsew[i];
    char what[96];
    snprintf(what, sizeof what, "%s: vocab-parallel CE loss (rank %d)", name, me);
    CHECK(ref_close(what, &ls, &lwd, 1, 1e-6, 1e-30), "%s", what);
    snprintf(what, sizeof what, "%s: vocab-parallel CE lse (rank %d)", name, me);
    CHECK(ref_close(what, lses, lsed, ROWS, 1e-6, 1e-30), "%s", what);
    float dw[ROWS * V], ds[ROWS * V];
    rt_cross_entropy_bwd(dw, logits, ids, lsew, 0.5f, ROWS, V, 0, TOTAL);
    rt_cross_entropy_bwd(ds, mine, ids, lses, 0.5f, ROWS, vl, off, TOTAL);
    double want[ROWS * V];
    for (int i = 0; i < ROWS; i++)
        for (int64_t j = 0; j < vl; j++)
            want[i * vl + j] = dw[i * V + off + j];
    snprintf(what, sizeof what, "%s: vocab-parallel CE dlogits (rank %d)", name, me);
    CHECK(ref_close(what, ds, want, ROWS * vl, 1e-6, 1e-30), "%s", what);
}

/* A [8, 6] parameter over a 2 x 2 grid of ranks, gathered on every rank. */
static void test_sharded_init(void)
{
    if (np != 4)
        return;
    uint64_t key = rt_hash("layers.3.w_up");
    int64_t g[2] = {8, 6}, off[2] = {(me / 2) * 4, (me % 2) * 3}, loc[2] = {4, 3};
    float full[48], blk[12], all_blk[48];
    int64_t z[2] = {0, 0};
    rt_init_param(full, key, RT_INIT_NORMAL, 0.02, 2, g, z, g);
    rt_init_param(blk, key, RT_INIT_NORMAL, 0.02, 2, g, off, loc);
    rt_allgather(rt_comm_world(), all_blk, blk, 12, RT_F32);
    float as[48];
    for (int q = 0; q < 4; q++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++)
                as[((q / 2) * 4 + i) * 6 + (q % 2) * 3 + j] = all_blk[q * 12 + i * 3 + j];
    CHECK(memcmp(as, full, sizeof full) == 0, "sharded init does not assemble to the full tensor");
}

int main(int argc, char **argv)
{
    rt_init(&argc, &argv);
    me = rt_world_rank();
    np = rt_world_size();
    if (np != 4) {
        fprintf(stderr, "rt_mpi: run with 4 ranks (got %d)\n", np);
        rt_finalize();
        return 1;
    }
    test_comm_split();
    test_collectives(rt_comm_world(), "world");
    RtComm *pair = rt_comm_split(me / 2, me); /* {0,1}, {2,3} */
    test_collectives(pair, "pairs");
    test_nonblocking(rt_comm_world(), "world");
    test_nonblocking(pair, "pairs");
    test_dim_helpers(rt_comm_world(), "4 ranks");
    test_dim_helpers(pair, "2 ranks");
    RtComm *one = rt_comm_split(me, 0);
    test_dim_helpers(one, "1 rank");
    test_vocab_parallel(rt_comm_world(), "4 ranks");
    test_vocab_parallel(pair, "2 ranks");
    test_sharded_init();
    bool ok = all(check_failures == 0);
    if (me == 0)
        printf(ok ? "rt_mpi: all checks passed on 4 ranks\n" : "rt_mpi: failures\n");
    rt_finalize();
    return ok ? 0 : 1;
}
