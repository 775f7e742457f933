/* comm_dim.cu: collectives along a middle dim and local slices.
 *
 * NCCL moves contiguous blocks per rank, so a split along a middle dim needs
 * a block transpose before or after the collective. Every one needed here is
 * the same one: [P, Q, X] -> [Q, P, X] with X contiguous (swap01), a copy
 * kernel with 16-byte accesses when X and the pointers allow (memory-bound,
 * ~80% of HBM bandwidth). It is skipped whenever P or Q is 1, so
 * the common cases (outer == 1) move data straight between the user's
 * buffers. */
#include "cu_dev.cuh"

/* out[q, p, :] = in[p, q, :] for in [P, Q, X]. */
static __global__ void k_swap01(rt_act *out, const rt_act *in, int64_t P, int64_t Q, int64_t X, bool vec)
{
    for (int64_t t = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; t < P * Q; t += (int64_t)gridDim.x * blockDim.y) {
        int64_t q = t / P, p = t % P;
        rt_act *o = out + t * X;
        const rt_act *s = in + (p * Q + q) * X;
        if (vec)
            for (int64_t j = 8 * threadIdx.x; j < X; j += 8 * blockDim.x)
                *reinterpret_cast<uint4 *>(o + j) = *reinterpret_cast<const uint4 *>(s + j);
        else
            for (int64_t j = threadIdx.x; j < X; j += blockDim.x) o[j] = s[j];
    }
}

static void swap01(rt_act *out, const rt_act *in, int64_t P, int64_t Q, int64_t X)
{
    size_t b = (size_t)(P * Q * X) * sizeof(rt_act);
    if (b == 0) return;
    rtcu_deps({{out, b}, {in, b}});
    if (P == 1 || Q == 1) {
        if (out != in) CUDA_CHECK(cudaMemcpyAsync(out, in, b, cudaMemcpyDeviceToDevice, rtcu.compute));
        return;
    }
    bool vec = X % 8 == 0 && rtcu_aligned16(out, in);
    RTCU_LAUNCH(k_swap01, rtcu_grid(P * Q, 8), dim3(32, 8), 0)(out, in, P, Q, X, vec);
    LAUNCH_CHECK();
}

static void copy_act(rt_act *out, const rt_act *in, int64_t n)
{
    if (out == in || n <= 0) return;
    size_t b = (size_t)n * sizeof(rt_act);
    rtcu_deps({{out, b}, {in, b}});
    CUDA_CHECK(cudaMemcpyAsync(out, in, b, cudaMemcpyDeviceToDevice, rtcu.compute));
}

static void need_comm(const RtComm *c, const char *fn)
{
    rtcu_require_init(fn);
    if (!c) rt_fatal("%s: NULL communicator (this rank is not a member)", fn);
}

void rt_allgather_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d_local, int64_t inner,
                      rt_act *scratch)
{
    need_comm(c, "rt_allgather_dim");
    int64_t p = c->size, X = d_local * inner;
    if (outer <= 0 || X <= 0) return;
    if (p == 1) {
        copy_act(out, in, outer * X);
    } else if (outer == 1) {
        rt_allgather(c, out, in, X, RT_ACT);
    } else {
        rt_allgather(c, scratch, in, outer * X, RT_ACT); /* [p, outer, X] */
        swap01(out, scratch, p, outer, X);                /* [outer, p, X] */
    }
}

void rt_reduce_scatter_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d_local,
                           int64_t inner, rt_act *scratch)
{
    need_comm(c, "rt_reduce_scatter_dim");
    int64_t p = c->size, X = d_local * inner;
    if (outer <= 0 || X <= 0) return;
    if (p == 1) {
        copy_act(out, in, outer * X);
    } else if (outer == 1) {
        rt_reduce_scatter(c, out, in, X, RT_ACT);
    } else {
        swap01(scratch, in, outer, p, X); /* [outer, p, X] -> [p, outer, X] */
        rt_reduce_scatter(c, out, scratch, outer * X, RT_ACT);
    }
}

void rt_alltoall_dim(RtComm *c, rt_act *out, const rt_act *in, int64_t outer, int64_t d1, int64_t mid, int64_t d2,
                     int64_t inner, bool to_second, rt_act *scratch)
{
    need_comm(c, "rt_alltoall_dim");
    int64_t p = c->size;
    if (d1 % p || d2 % p)
        rt_fatal("rt_alltoall_dim: dims %lld and %lld not divisible by %lld ranks", (long long)d1, (long long)d2,
                 (long long)p);
    int64_t A = d1 / p, Y = (d2 / p) * inner, M = outer * A * mid, Z = A * mid * Y;
    int64_t n = outer * p * Z; /* local elements, before and after; n / p per rank */
    if (n <= 0) return;
    if (p == 1) {
        copy_act(out, in, n);
        return;
    }
    /* to_second: in [M, p, Y] -> send [p, M, Y]; recv [p, outer, Z] -> out [outer, p, Z].
     * reverse:   in [outer, p, Z] -> send [p, outer, Z]; recv [p, M, Y] -> out [M, p, Y]. */
    int64_t pk_P = to_second ? M : outer, pk_X = to_second ? Y : Z;
    int64_t up_Q = to_second ? outer : M, up_X = to_second ? Z : Y;
    bool pack = pk_P > 1, unpack = up_Q > 1;
    const rt_act *send = in;
    if (pack) {
        swap01(scratch, in, pk_P, p, pk_X);
        send = scratch;
    }
    rt_act *recv = pack || !unpack ? out : scratch;
    rt_alltoall(c, recv, send, n / p, RT_ACT);
    if (unpack) {
        rt_act *dst = recv == out ? scratch : out;
        swap01(dst, recv, p, up_Q, up_X);
        if (dst != out) copy_act(out, dst, n);
    }
}

void rt_slice_dim(rt_act *out, const rt_act *in, int64_t outer, int64_t d_local, int64_t inner, int parts, int index)
{
    rtcu_require_init("rt_slice_dim");
    if (index < 0 || index >= parts) rt_fatal("rt_slice_dim: block %d of %d", index, parts);
    int64_t X = d_local * inner;
    if (outer <= 0 || X <= 0) return;
    size_t es = sizeof(rt_act);
    rtcu_deps({{out, (size_t)(outer * X) * es}, {in, (size_t)(outer * X * parts) * es}});
    CUDA_CHECK(cudaMemcpy2DAsync(out, (size_t)X * es, in + (int64_t)index * X, (size_t)(parts * X) * es,
                                 (size_t)X * es, (size_t)outer, cudaMemcpyDeviceToDevice, rtcu.compute));
}
