/* tp_chunk_impl.h: rt_allgather_matmul and rt_matmul_reduce_scatter (rt.h),
 * written once over rt.h's own calls and included by each backend
 * (cpu/tp_chunk.c, cuda/tp_chunk.cu): the pieces are rt_matmul calls on
 * rows and non-blocking collectives, so the overlap is the backend's
 * (CPU: the communication thread makes the MPI call while the rank
 * computes; CUDA: the collective runs on the communicator's stream beside
 * the GEMMs on compute). Not compiled alone: rt_act's size is the
 * backend's. Valid C and C++. The backend may name the two non-blocking
 * collectives (TPC_IALLGATHER, TPC_IREDUCE_SCATTER) before including it.
 *
 * Bitwise equal to the unchunked pair: an element of C is a sum over K in
 * the GEMM's own order whichever rows a call covers (matmul.c), and with
 * two ranks each reduced element is one addition, which commutes. */
#include "rt.h"

#include <stdint.h>

#ifndef TPC_IALLGATHER
#define TPC_IALLGATHER rt_iallgather
#endif
#ifndef TPC_IREDUCE_SCATTER
#define TPC_IREDUCE_SCATTER rt_ireduce_scatter
#endif

enum { TPC_MAX_SPLITS = 16 };

static size_t tpc_z(int64_t v)
{
    return (size_t)v;
}

/* rows [row, row + n) of every C[i] = A rows (a, n of them) x op(B[i]),
 * one batch when the GEMMs have one shape (q, k, v's widths may differ). */
static void tpc_gemm_rows(int count, rt_act *const c[], const rt_act *a, const rt_act *const b[],
                          int64_t row, int64_t n, const int64_t N[], int64_t K, bool tb, bool accumulate)
{
    rt_act *cp[RT_MATMUL_BATCH_MAX];
    const rt_act *ap[RT_MATMUL_BATCH_MAX];
    bool same = true;
    for (int i = 0; i < count; i++) {
        cp[i] = c[i] + tpc_z(row * N[i]);
        ap[i] = a;
        same = same && N[i] == N[0];
    }
    if (count > 1 && same) {
        rt_matmul_batch(count, cp, ap, b, n, N[0], K, false, tb, accumulate);
        return;
    }
    for (int i = 0; i < count; i++)
        rt_matmul(cp[i], a, b[i], n, N[i], K, false, tb, accumulate);
}

void rt_allgather_matmul(RtComm *c, rt_act *gathered, const rt_act *in, int64_t outer, int64_t d_local,
                         int64_t inner, rt_act *scratch, int count, rt_act *const out[],
                         const rt_act *const b[], const int64_t N[], bool tb, bool accumulate)
{
    if (count < 1 || count > RT_MATMUL_BATCH_MAX)
        rt_fatal("rt_allgather_matmul: %d GEMMs (1 to %d)", count, RT_MATMUL_BATCH_MAX);
    int p = rt_comm_size(c), me = rt_comm_rank(c);
    int64_t blk = outer * d_local * inner, run = d_local * inner;
    /* Rank r's block lands in scratch rank-major, unpacked after the wait,
     * except when outer == 1, where the layouts coincide. */
    rt_act *dst = outer == 1 ? gathered : scratch;
    RtReq *req = TPC_IALLGATHER(c, dst, in, blk, RT_ACT);
    /* This rank's own rows need nothing from the others: they run while
     * the others' arrive. */
    for (int64_t o = 0; o < outer; o++)
        tpc_gemm_rows(count, out, in + tpc_z(o * run), b, (o * p + me) * d_local, d_local, N, inner, tb,
                      accumulate);
    rt_wait(req);
    if (outer > 1)
        for (int r = 0; r < p; r++)
            for (int64_t o = 0; o < outer; o++)
                rt_copy(gathered + tpc_z((o * p + r) * run), scratch + tpc_z((r * outer + o) * run),
                        tpc_z(run) * sizeof *gathered);
    for (int r = 0; r < p; r++)
        if (r != me)
            for (int64_t o = 0; o < outer; o++)
                tpc_gemm_rows(count, out, gathered + tpc_z((o * p + r) * run), b, (o * p + r) * d_local,
                              d_local, N, inner, tb, accumulate);
}

void rt_matmul_reduce_scatter(RtComm *c, rt_act *out, rt_act *partial, const rt_act *a, const rt_act *b,
                              int64_t outer, int64_t d_local, int64_t N, int64_t K, bool tb,
                              bool accumulate, int splits, rt_act *scratch)
{
    if (splits < 1 || splits > TPC_MAX_SPLITS)
        rt_fatal("rt_matmul_reduce_scatter: %d pieces (1 to %d)", splits, (int)TPC_MAX_SPLITS);
    int p = rt_comm_size(c);
    int k = d_local < splits ? (int)d_local : splits;
    if (k < 1)
        k = 1;
    /* scratch: the pieces' send blocks [p][outer][len][N] one after the
     * other (p outer d_local N elements), then their received blocks
     * [outer][len][N] (outer d_local N) unless outer == 1. */
    rt_act *recv_base = scratch + tpc_z(p * outer * d_local * N);
    RtReq *req[TPC_MAX_SPLITS];
    for (int j = 0; j < k; j++) {
        int64_t lo = d_local * j / k, len = d_local * (j + 1) / k - lo;
        rt_act *send = scratch + tpc_z(p * outer * lo * N);
        for (int r = 0; r < p; r++)
            for (int64_t o = 0; o < outer; o++) {
                int64_t row = (o * p + r) * d_local + lo;
                rt_matmul(partial + tpc_z(row * N), a + tpc_z(row * K), b, len, N, K, false, tb, accumulate);
                rt_copy(send + tpc_z((r * outer + o) * len * N), partial + tpc_z(row * N),
                        tpc_z(len * N) * sizeof *partial);
            }
        /* In flight while the next piece's GEMMs run. */
        rt_act *recv = outer == 1 ? out + tpc_z(lo * N) : recv_base + tpc_z(outer * lo * N);
        req[j] = TPC_IREDUCE_SCATTER(c, recv, send, outer * len * N, RT_ACT);
    }
    for (int j = 0; j < k; j++) {
        rt_wait(req[j]);
        if (outer == 1)
            continue;
        int64_t lo = d_local * j / k, len = d_local * (j + 1) / k - lo;
        for (int64_t o = 0; o < outer; o++)
            rt_copy(out + tpc_z((o * d_local + lo) * N), recv_base + tpc_z((outer * lo + o * len) * N),
                    tpc_z(len * N) * sizeof *out);
    }
}
