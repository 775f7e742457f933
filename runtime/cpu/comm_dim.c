/* comm_dim.c: collectives along a middle dim, reduced to the plain ones.
 *
 * A tensor [outer, d, inner] split p ways along d keeps on rank r the
 * contiguous block [outer, d/p, inner] with rows r d/p .. (r+1) d/p - 1. The
 * plain collectives exchange whole contiguous buffers, rank-major; these
 * helpers pack or unpack between the two layouts. When outer == 1 the layouts
 * coincide and no copy is made. All-to-all unpacks with an MPI vector type
 * straight into `out`, so it needs only one local tensor of scratch. */
#include <string.h>

#include "cpu.h"

static size_t z(int64_t v)
{
    return (size_t)v;
}

void rt_allgather_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d_local,
                      int64_t inner, rt_act *scratch)
{
    int p = rt_comm_size(c);
    int64_t blk = outer * d_local * inner, run = d_local * inner;
    if (outer == 1) {
        rt_allgather(c, out, in, blk, RT_ACT);
        return;
    }
    rt_allgather(c, scratch, in, blk, RT_ACT);
    /* scratch [p][outer][d_local][inner] -> out [outer][p * d_local][inner] */
    for (int r = 0; r < p; r++)
        for (int64_t o = 0; o < outer; o++)
            memcpy(out + z((o * p + r) * run), scratch + z((r * outer + o) * run),
                   z(run) * sizeof *out);
}

void rt_reduce_scatter_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d_local,
                           int64_t inner, rt_act *scratch)
{
    int p = rt_comm_size(c);
    int64_t blk = outer * d_local * inner, run = d_local * inner;
    if (outer == 1) {
        rt_reduce_scatter(c, out, in, blk, RT_ACT);
        return;
    }
    /* in [outer][p * d_local][inner] -> scratch [p][outer][d_local][inner] */
    for (int r = 0; r < p; r++)
        for (int64_t o = 0; o < outer; o++)
            memcpy(scratch + z((r * outer + o) * run), in + z((o * p + r) * run),
                   z(run) * sizeof *in);
    rt_reduce_scatter(c, out, scratch, blk, RT_ACT);
}

/* A receive type: `count` runs of `len` elements, `stride` apart, whose
 * extent is `len` elements so that rank r's block starts r runs in. */
static MPI_Datatype strided(int64_t count, int64_t len, int64_t stride)
{
    MPI_Datatype v, r;
    RT_MPI(MPI_Type_vector(rtcpu_mpi_count(count, "rt_alltoall_dim"),
                           rtcpu_mpi_count(len, "rt_alltoall_dim"),
                           rtcpu_mpi_count(stride, "rt_alltoall_dim"), MPI_FLOAT, &v));
    RT_MPI(MPI_Type_create_resized(v, 0, (MPI_Aint)(z(len) * sizeof(float)), &r));
    RT_MPI(MPI_Type_commit(&r));
    RT_MPI(MPI_Type_free(&v));
    return r;
}

void rt_alltoall_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d1,
                     int64_t mid, int64_t d2, int64_t inner, bool to_second, rt_act *scratch)
{
    int p = rt_comm_size(c);
    if (d1 % p || d2 % p)
        rt_fatal("rt_alltoall_dim: dims %lld and %lld do not split %d ways", (long long)d1,
                 (long long)d2, p);
    int64_t a = d1 / p, b = d2 / p;
    int64_t blk = outer * a * mid * b * inner; /* elements sent to each rank */
    MPI_Datatype recv;
    if (to_second) {
        /* in [outer][a][mid][d2][inner]: block s is the d2 slice s, packed
         * [outer][a][mid][b][inner]; received blocks stack along d1, which in
         * out [outer][d1][mid][b][inner] are runs of a*mid*b*inner. */
        int64_t rows = outer * a * mid, run = b * inner;
        for (int s = 0; s < p; s++)
            for (int64_t i = 0; i < rows; i++)
                memcpy(scratch + z(s * blk + i * run), in + z(i * d2 * inner + s * run),
                       z(run) * sizeof *in);
        recv = strided(outer, a * mid * run, d1 * mid * run);
    } else {
        /* in [outer][d1][mid][b][inner]: block s is the d1 slice s; received
         * blocks stack along d2, runs of b*inner in out [outer][a][mid][d2][inner]. */
        int64_t run = a * mid * b * inner;
        for (int s = 0; s < p; s++)
            for (int64_t o = 0; o < outer; o++)
                memcpy(scratch + z(s * blk + o * run), in + z((o * p + s) * run),
                       z(run) * sizeof *in);
        recv = strided(outer * a * mid, b * inner, d2 * inner);
    }
    int k = rtcpu_mpi_count(blk, "rt_alltoall_dim");
    RT_MPI_WAIT(RTW_ALLTOALL, c, -1, 0,
                MPI_Alltoall(scratch, k, MPI_FLOAT, out, 1, recv, c->comm));
    RT_MPI(MPI_Type_free(&recv));
}

void rt_slice_dim(rt_act *out, const rt_act *in, int64_t outer, int64_t d_local, int64_t inner,
                  int parts, int index)
{
    if (parts < 1 || index < 0 || index >= parts)
        rt_fatal("rt_slice_dim: block %d of %d", index, parts);
    int64_t run = d_local * inner;
    for (int64_t o = 0; o < outer; o++)
        memcpy(out + z(o * run), in + z((o * parts + index) * run), z(run) * sizeof *in);
}
