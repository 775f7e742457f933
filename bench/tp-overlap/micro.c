/* micro.c: one chunked tensor-parallel pair against its unchunked calls,
 * under mpirun (bench/tp-overlap/run.sh runs it on 2 ranks): whether the
 * CPU backend's transfer progresses while the GEMM runs. For a gather of
 * [p d, K] into a GEMM with N columns, and a GEMM with K = N inner columns
 * into a reduce-scatter, the median over REPS of each rank's slowest time:
 *   gemm       the GEMM alone
 *   coll       the collective alone
 *   unchunked  the collective then the GEMM (or the reverse), one after
 *              the other
 *   chunked    rt_allgather_matmul / rt_matmul_reduce_scatter
 * hidden = unchunked - chunked: the transfer time the chunked call hid
 * (at most coll). Usage: micro D K N REPS. */
#include <stdio.h>
#include <stdlib.h>

#include "rt.h"

static double now_max(RtComm *c, double t0)
{
    float t = (float)(rt_time() - t0);
    rt_allreduce_max(c, &t, 1);
    return t;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return v[n / 2];
}

static float *buf(int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    return p;
}

int main(int argc, char **argv)
{
    rt_init(&argc, &argv);
    if (argc != 5) {
        fprintf(stderr, "usage: micro D K N REPS\n");
        return 2;
    }
    int64_t d = atoll(argv[1]), K = atoll(argv[2]), N = atoll(argv[3]);
    int reps = atoi(argv[4]);
    RtComm *c = rt_comm_split(0, rt_world_rank());
    int p = rt_comm_size(c);
    int64_t M = p * d;
    float *in = buf(d * K), *g = buf(M * K), *s = buf((p + 1) * M * (K > N ? K : N));
    float *b = buf(K * N), *cc = buf(M * N), *a = buf(M * K), *part = buf(M * N), *out = buf(d * N);
    double *t = malloc(sizeof(double) * (size_t)reps * 8);
    const float *bl[1] = {b};
    float *cl[1] = {cc};
    int64_t nl[1] = {N};
    for (int r = 0; r < reps; r++) {
        double t0;
        rt_barrier(c), t0 = rt_time();
        rt_matmul(cc, g, b, M, N, K, false, false, false);
        t[0 * reps + r] = now_max(c, t0);
        rt_barrier(c), t0 = rt_time();
        rt_allgather_dim(c, g, in, 1, d, K, s);
        t[1 * reps + r] = now_max(c, t0);
        rt_barrier(c), t0 = rt_time();
        rt_allgather_dim(c, g, in, 1, d, K, s);
        rt_matmul(cc, g, b, M, N, K, false, false, false);
        t[2 * reps + r] = now_max(c, t0);
        rt_barrier(c), t0 = rt_time();
        rt_allgather_matmul(c, g, in, 1, d, K, s, 1, cl, bl, nl, false, false);
        t[3 * reps + r] = now_max(c, t0);
        rt_barrier(c), t0 = rt_time();
        rt_matmul(part, a, b, M, N, K, false, false, false);
        t[4 * reps + r] = now_max(c, t0);
        rt_barrier(c), t0 = rt_time();
        rt_reduce_scatter_dim(c, out, part, 1, d, N, s);
        t[5 * reps + r] = now_max(c, t0);
        rt_barrier(c), t0 = rt_time();
        rt_matmul(part, a, b, M, N, K, false, false, false);
        rt_reduce_scatter_dim(c, out, part, 1, d, N, s);
        t[6 * reps + r] = now_max(c, t0);
        rt_barrier(c), t0 = rt_time();
        rt_matmul_reduce_scatter(c, out, part, a, b, 1, d, N, K, false, false, 4, s);
        t[7 * reps + r] = now_max(c, t0);
    }
    if (rt_world_rank() == 0) {
        printf("%d ranks, rows %lld per rank, K %lld, N %lld, median of %d (ms)\n", p, (long long)d,
               (long long)K, (long long)N, reps);
        printf("%-16s %8s %8s %10s %8s %7s\n", "pair", "gemm", "coll", "unchunked", "chunked", "hidden");
        for (int k = 0; k < 2; k++) {
            double v[4];
            for (int j = 0; j < 4; j++)
                v[j] = 1e3 * median(t + (4 * k + j) * reps, reps);
            printf("%-16s %8.2f %8.2f %10.2f %8.2f %7.2f\n", k ? "gemm+scatter" : "gather+gemm", v[0], v[1],
                   v[2], v[3], v[2] - v[3]);
        }
    }
    rt_finalize();
    return 0;
}
