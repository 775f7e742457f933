/* test_tp_chunk.c: the chunked tensor-parallel pairs (rt_allgather_matmul,
 * rt_matmul_reduce_scatter) against the unchunked calls they replace
 * (rt_allgather_dim then GEMMs; rt_matmul then rt_reduce_scatter_dim),
 * under mpirun (2 and 4 ranks: rt_tp_chunk_np2, _np4).
 *
 *   - what moves is moved bit for bit: the gathered input equals
 *     rt_allgather_dim's; the reduce-scattered result equals
 *     rt_reduce_scatter_dim of the chunked call's own product with 2 ranks
 *     (each element one addition, which commutes); with 4, within GEMM_TOL:
 *     Open MPI picks its reduce-scatter algorithm by message size, and the
 *     pieces' smaller blocks are summed in another order (measured: they
 *     differ in the last bit);
 *   - the GEMMs' products within GEMM_TOL of each output's scale: OpenBLAS
 *     picks its kernels by shape (0.3.21 on AVX-512: small-matrix kernels
 *     below a size, others for B transposed), and they order a dot
 *     product's multiply-adds otherwise, so a GEMM over some rows may
 *     differ from the whole one in the last bit (measured: B transposed and
 *     M N K below ~6e5 differ, untransposed ones mostly agree). The largest
 *     difference seen here is printed;
 *   - outer 1 (no packing) and 3 (blocks packed in scratch), local blocks
 *     of 1, 5 (uneven pieces) and 8 rows, splits 1, 4 and more than the
 *     rows, B transposed or not, accumulating into C or not, 1 to 3 GEMMs
 *     of different widths on one gathered input;
 *   - outputs start as NaN, so an element never written fails. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rt.h"


static float *fill(int64_t n, unsigned seed)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

static float *nans(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

#define GEMM_TOL 1e-6

static double worst; /* the largest scale-relative GEMM difference seen */

static bool same(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, sizeof *a * (size_t)n) == 0;
}

/* max |a - b| / max |a| within GEMM_TOL; NaN anywhere fails. */
static bool close(const float *a, const float *b, int64_t n)
{
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (!(e == e))
            return false;
        d = fmax(d, e);
        s = fmax(s, fabs((double)a[i]));
    }
    double r = s > 0 ? d / s : d;
    worst = fmax(worst, r);
    return r <= GEMM_TOL;
}

static void test_gather(RtComm *c, int64_t outer, int64_t d, int64_t K, int count, bool tb, bool acc)
{
    int p = rt_comm_size(c), me = rt_comm_rank(c);
    int64_t M = outer * p * d, N[3] = {24, 8, 8};
    float *in = fill(outer * d * K, 7u + (unsigned)me);
    float *g0 = nans(M * K), *g1 = nans(M * K), *s0 = nans(M * K), *s1 = nans(M * K);
    float *b[3], *c0[3], *c1[3];
    for (int i = 0; i < count; i++) {
        b[i] = fill(K * N[i], 100u + (unsigned)i);
        c0[i] = acc ? fill(M * N[i], 200u + (unsigned)i) : nans(M * N[i]);
        c1[i] = malloc(sizeof(float) * (size_t)(M * N[i]));
        memcpy(c1[i], c0[i], sizeof(float) * (size_t)(M * N[i]));
    }
    rt_allgather_dim(c, g0, in, outer, d, K, s0);
    for (int i = 0; i < count; i++)
        rt_matmul(c0[i], g0, b[i], M, N[i], K, false, tb, acc);
    rt_allgather_matmul(c, g1, in, outer, d, K, s1, count, c1, (const float *const *)b, N, tb, acc);
    CHECK(same(g0, g1, M * K), "gather: outer %lld d %lld: gathered input differs", (long long)outer,
          (long long)d);
    for (int i = 0; i < count; i++)
        CHECK(close(c0[i], c1[i], M * N[i]), "gather: outer %lld d %lld K %lld GEMM %d of %d tb %d acc %d differs",
              (long long)outer, (long long)d, (long long)K, i, count, tb, acc);
    for (int i = 0; i < count; i++)
        free(b[i]), free(c0[i]), free(c1[i]);
    free(in), free(g0), free(g1), free(s0), free(s1);
}

static void test_scatter(RtComm *c, int64_t outer, int64_t d, int64_t N, int64_t K, int splits, bool tb,
                         bool acc)
{
    int p = rt_comm_size(c), me = rt_comm_rank(c);
    int64_t M = outer * p * d;
    float *a = fill(M * K, 300u + (unsigned)me), *b = fill(K * N, 400u + (unsigned)me);
    float *p0 = acc ? fill(M * N, 500u + (unsigned)me) : nans(M * N), *p1 = malloc(sizeof(float) * (size_t)(M * N));
    memcpy(p1, p0, sizeof(float) * (size_t)(M * N));
    float *o0 = nans(outer * d * N), *o1 = nans(outer * d * N);
    float *s0 = nans(M * N), *s1 = nans((p + 1) * outer * d * N);
    rt_matmul(p0, a, b, M, N, K, false, tb, acc);
    rt_reduce_scatter_dim(c, o0, p0, outer, d, N, s0);
    rt_matmul_reduce_scatter(c, o1, p1, a, b, outer, d, N, K, tb, acc, splits, s1);
    CHECK(close(p0, p1, M * N), "scatter: outer %lld d %lld: the product differs", (long long)outer, (long long)d);
    CHECK(close(o0, o1, outer * d * N), "scatter: outer %lld d %lld: the result differs", (long long)outer,
          (long long)d);
    /* The same products reduce-scattered unchunked: the same bits. */
    rt_reduce_scatter_dim(c, o0, p1, outer, d, N, s0);
    CHECK(p == 2 ? same(o0, o1, outer * d * N) : close(o0, o1, outer * d * N),
          "scatter: outer %lld d %lld N %lld K %lld splits %d tb %d acc %d: result differs", (long long)outer,
          (long long)d, (long long)N, (long long)K, splits, tb, acc);
    free(a), free(b), free(p0), free(p1), free(o0), free(o1), free(s0), free(s1);
}

int main(int argc, char **argv)
{
    rt_init(&argc, &argv);
    RtComm *c = rt_comm_split(0, rt_world_rank());
    static const int64_t outers[] = {1, 3}, ds[] = {1, 5, 8};
    for (int oi = 0; oi < 2; oi++)
        for (int di = 0; di < 3; di++)
            for (int f = 0; f < 4; f++) {
                bool tb = f & 1, acc = f & 2;
                for (int count = 1; count <= 3; count++)
                    test_gather(c, outers[oi], ds[di], 40, count, tb, acc);
                static const int splits[] = {1, 4, 16};
                for (int si = 0; si < 3; si++)
                    test_scatter(c, outers[oi], ds[di], 48, 36, splits[si], tb, acc);
            }
    /* GEMMs large enough to be split over the rank's threads (matmul.c). */
    test_gather(c, 1, 64, 256, 2, false, false);
    test_scatter(c, 2, 64, 256, 128, 4, false, false);
    if (rt_world_rank() == 0)
        printf("rt_tp_chunk: %d ranks: largest GEMM difference %.3g of the scale\n", rt_comm_size(c), worst);
    int bad = check_status(rt_world_rank() == 0 ? "rt_tp_chunk" : "rt_tp_chunk (rank)");
    rt_finalize();
    return bad;
}
