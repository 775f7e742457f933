/* moe.cu: the experts of a mixture-of-experts layer (docs/moe.md, `moe`) on
 * the GPU, with or without the exchange of routed rows: the CPU backend's
 * scheme (runtime/cpu/moe.c) in bf16 storage with fp32 accumulation.
 *
 * The host plans each call: it reads the gates (a synchronisation; the row
 * counts size every buffer and every NCCL transfer), exchanges the
 * per-expert row counts with MPI_Alltoall over the communicator's MPI
 * group, and uploads index arrays. Rows are then gathered by kernels into
 * send order (destination rank, local expert, token), exchanged with NCCL
 * grouped ncclSend/ncclRecv on the communicator's stream (joined to compute
 * by events both ways), put expert-major (ascending source rank, token) by
 * a gather, multiplied expert by expert with cuBLAS (rt_matmul: bf16
 * operands, fp32 accumulation), and sent back. The combine sums each
 * token's contributions in fp32 in ascending expert index, rounding once:
 * deterministic, and 1 rank and n ranks differ only by the GEMMs.
 * Buffers are stream-ordered allocations (cudaMallocAsync) sized from the
 * counts and freed on compute before return. */
#include "common/common.h"
#include "cu_dev.cuh"

#include <stdlib.h>
#include <string.h>
#include <vector>

namespace {

/* The plan of one call (moe.c's Plan) and its device index arrays. */
struct Plan {
    RtComm *ep; /* NULL: no exchange (also for a communicator of one rank) */
    int n;
    int64_t el, cols, tokens;
    int64_t nsend, nrecv;
    std::vector<int64_t> soff;      /* [cols + 1] send offsets of each global expert */
    std::vector<int> rcnt;          /* [n * el] rows from rank p for local expert j */
    std::vector<int64_t> ecnt, eoff; /* rows per local expert, expert-major offsets */
    /* device, int32: send_tok/send_col [nsend] the token and gate column of
     * each send row; tok_ptr [tokens + 1], tok_row [nsend] each token's send
     * rows in ascending expert; to_exp [nrecv] the receive row of each
     * expert-major row; to_recv [nrecv] the inverse */
    int *d_idx;
    int *send_tok, *send_col, *tok_ptr, *tok_row, *to_exp, *to_recv;
};

void *dalloc(size_t bytes)
{
    void *p = NULL;
    CUDA_CHECK(cudaMallocAsync(&p, bytes ? bytes : 256, rtcu.compute));
    return p;
}
void dfree(void *p) { CUDA_CHECK(cudaFreeAsync(p, rtcu.compute)); }

int i32(int64_t v, const char *what)
{
    if (v > INT32_MAX) rt_fatal("rt_moe: %s of %lld rows exceeds the 32-bit row index", what, (long long)v);
    return (int)v;
}

void check_args(const char *fn, RtComm *ep, int64_t tokens, int64_t d_model, int64_t gate_cols, int64_t e_local,
                int64_t d_expert)
{
    rtcu_require_init(fn);
    if (tokens < 0 || d_model < 1 || e_local < 1 || d_expert < 1)
        rt_fatal("%s: sizes tokens=%lld d_model=%lld e_local=%lld d_expert=%lld out of range", fn, (long long)tokens,
                 (long long)d_model, (long long)e_local, (long long)d_expert);
    int64_t want = ep ? e_local * rt_comm_size(ep) : e_local;
    if (gate_cols != want)
        rt_fatal("%s: gates have %lld columns, but %s needs %lld (e_local = %lld)", fn, (long long)gate_cols,
                 ep ? "the exchange over the ep ranks" : "ep == NULL", (long long)want, (long long)e_local);
}

Plan plan_make(RtComm *ep, const rt_act *gates, int64_t tokens, int64_t cols, int64_t el)
{
    Plan P;
    P.ep = ep && ep->size > 1 ? ep : NULL;
    P.n = ep ? ep->size : 1;
    P.el = el;
    P.cols = cols;
    P.tokens = tokens;
    /* the gates on the host: rt_to_host joins the streams first */
    std::vector<uint16_t> hg((size_t)(tokens * cols));
    if (tokens) rt_to_host(hg.data(), gates, hg.size() * sizeof(uint16_t));
    auto nz = [&](int64_t i) { return (hg[(size_t)i] & 0x7fff) != 0; }; /* bf16 +-0 is "not routed" */
    std::vector<int> scnt((size_t)cols, 0);
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t e = 0; e < cols; e++)
            if (nz(t * cols + e)) scnt[(size_t)e]++;
    P.soff.assign((size_t)cols + 1, 0);
    for (int64_t e = 0; e < cols; e++) P.soff[(size_t)e + 1] = P.soff[(size_t)e] + scnt[(size_t)e];
    P.nsend = P.soff[(size_t)cols];
    P.rcnt.assign((size_t)cols, 0);
    if (P.ep) {
        rtcu_block_begin("MPI_Alltoall", __FILE__, __LINE__);
        int rc = MPI_Alltoall(scnt.data(), (int)el, MPI_INT, P.rcnt.data(), (int)el, MPI_INT, ep->mpi);
        rtcu_block_end();
        if (rc != MPI_SUCCESS) rt_fatal("rt_moe: MPI_Alltoall of the row counts failed (error %d)", rc);
    } else {
        P.rcnt = scnt;
    }
    P.ecnt.assign((size_t)el, 0);
    P.eoff.assign((size_t)el + 1, 0);
    for (int p = 0; p < P.n; p++)
        for (int64_t j = 0; j < el; j++) P.ecnt[(size_t)j] += P.rcnt[(size_t)(p * el + j)];
    for (int64_t j = 0; j < el; j++) P.eoff[(size_t)j + 1] = P.eoff[(size_t)j] + P.ecnt[(size_t)j];
    P.nrecv = P.eoff[(size_t)el];
    i32(P.nsend, "a send buffer");
    i32(P.nrecv, "a receive buffer");
    /* host index arrays, then one upload */
    int64_t ns = P.nsend, nr = P.nrecv, total = 3 * ns + tokens + 1 + 2 * nr;
    std::vector<int> h((size_t)total);
    int *send_tok = h.data(), *send_col = send_tok + ns, *tok_ptr = send_col + ns, *tok_row = tok_ptr + tokens + 1,
        *to_exp = tok_row + ns, *to_recv = to_exp + nr;
    std::vector<int64_t> cur(P.soff.begin(), P.soff.end() - 1);
    int64_t i = 0;
    for (int64_t t = 0; t < tokens; t++) {
        tok_ptr[t] = (int)i;
        for (int64_t e = 0; e < cols; e++)
            if (nz(t * cols + e)) {
                int64_t row = cur[(size_t)e]++;
                send_tok[row] = (int)t;
                send_col[row] = (int)e;
                tok_row[i++] = (int)row;
            }
    }
    tok_ptr[tokens] = (int)i;
    std::vector<int64_t> fill(P.eoff.begin(), P.eoff.end() - 1);
    int64_t r = 0;
    for (int p = 0; p < P.n; p++)
        for (int64_t j = 0; j < el; j++)
            for (int c = 0; c < P.rcnt[(size_t)(p * el + j)]; c++, r++) {
                int64_t x = fill[(size_t)j]++;
                to_exp[x] = (int)r;
                to_recv[r] = (int)x;
            }
    P.d_idx = (int *)dalloc((size_t)total * sizeof(int));
    CUDA_CHECK(cudaMemcpyAsync(P.d_idx, h.data(), (size_t)total * sizeof(int), cudaMemcpyHostToDevice, rtcu.compute));
    P.send_tok = P.d_idx;
    P.send_col = P.send_tok + ns;
    P.tok_ptr = P.send_col + ns;
    P.tok_row = P.tok_ptr + tokens + 1;
    P.to_exp = P.tok_row + ns;
    P.to_recv = P.to_exp + nr;
    /* a pageable source: the copy has taken the bytes when it returns */
    return P;
}

/* dst[i, :] = src[idx[i], :] */
template <class T>
__global__ void gather_rows(T *dst, const T *src, const int *idx, int64_t rows, int64_t width)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < rows * width;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = k / width, c = k % width;
        dst[k] = src[(int64_t)idx[i] * width + c];
    }
}

template <class T>
void gather(T *dst, const T *src, const int *idx, int64_t rows, int64_t width)
{
    if (rows == 0) return;
    RTCU_LAUNCH(gather_rows<T>, rtcu_grid(rows * width, 256), 256, 0)(dst, src, idx, rows, width);
    LAUNCH_CHECK();
}

/* g[i] = gates[send_tok[i], send_col[i]] as fp32 */
__global__ void gather_gates(float *g, const rt_act *gates, const int *tok, const int *col, int64_t rows,
                             int64_t cols)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows; i += (int64_t)gridDim.x * blockDim.x)
        g[i] = ld(gates + (int64_t)tok[i] * cols + col[i]);
}

/* y[t, c] = sum over the token's rows (ascending expert) of gate * o[row, c]
 * (gate 1 when gates is NULL: dh's sum), in fp32, rounded once. */
__global__ void combine(rt_act *y, const rt_act *o, const rt_act *gates, const int *ptr, const int *rows,
                        const int *col, int64_t tokens, int64_t D, int64_t cols)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < tokens * D;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = k / D, c = k % D;
        float s = 0;
        for (int i = ptr[t]; i < ptr[t + 1]; i++) {
            int r = rows[i];
            float g = gates ? ld(gates + t * cols + col[r]) : 1.0f;
            s += g * ld(o + (int64_t)r * D + c);
        }
        y[k] = bf(s);
    }
}

/* dgates[t, :]: the returned values where routed, 0 elsewhere. */
__global__ void scatter_dgates(rt_act *dg, const float *v, const int *ptr, const int *rows, const int *col,
                               int64_t tokens, int64_t cols)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < tokens * cols;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = k / cols, e = k % cols;
        float x = 0;
        for (int i = ptr[t]; i < ptr[t + 1]; i++)
            if (col[rows[i]] == e) x = v[rows[i]];
        dg[k] = bf(x);
    }
}

/* Per expert-major row (one warp): dgate = <u, act>, then u *= gate (the
 * gradient of act) and gy = gate * dy (of the expert's output). */
__global__ void row_grads(float *dgate, rt_act *u, rt_act *gy, const rt_act *act, const rt_act *dy, const float *g,
                          int64_t rows, int64_t F, int64_t D)
{
    int lane = threadIdx.x & 31;
    int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    /* a warp-stride loop: the grid is capped (rtcu_grid); whole warps iterate together */
    for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; w < rows; w += warps) {
        float s = 0, gw = g[w];
        for (int64_t c = lane; c < F; c += 32) { /* fixed lanes and tree: deterministic */
            float x = ld(u + w * F + c);
            s += x * ld(act + w * F + c);
            u[w * F + c] = bf(gw * x);
        }
        s = warp_sum(s);
        if (lane == 0) dgate[w] = s;
        for (int64_t c = lane; c < D; c += 32) gy[w * D + c] = bf(gw * ld(dy + w * D + c));
    }
}

/* One array moved by the exchange: rows of row_bytes in send and receive order. */
struct Xfer {
    void *send, *recv;
    size_t row_bytes;
};

void nccl_inside_group(ncclResult_t r, const char *call)
{
    if (r != ncclSuccess && r != ncclInProgress) rtcu_fail(__FILE__, __LINE__, "NCCL", ncclGetErrorString(r), call);
}

/* Forward (send -> receive order) or back; without an exchange the two
 * orders are one buffer: recv aliases send and nothing moves. */
void exchange(const Plan &P, std::initializer_list<Xfer> xs, bool back)
{
    if (!P.ep) return;
    RtComm *c = P.ep;
    cudaEvent_t ready, finished;
    CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&finished, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ready, rtcu.compute));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, ready, 0));
    NCCL_CHECK(ncclGroupStart());
    for (const Xfer &x : xs) {
        int64_t so = 0, ro = 0;
        for (int p = 0; p < P.n; p++) {
            int64_t s = P.soff[(size_t)((p + 1) * P.el)] - P.soff[(size_t)(p * P.el)], r = 0;
            for (int64_t j = 0; j < P.el; j++) r += P.rcnt[(size_t)(p * P.el + j)];
            /* byte counts with a byte type: no element-size slip */
            char *sb = (char *)x.send + so * x.row_bytes, *rb = (char *)x.recv + ro * x.row_bytes;
            size_t sn = (size_t)s * x.row_bytes, rn = (size_t)r * x.row_bytes;
            if (!back) {
                if (sn) nccl_inside_group(RTCU_NCCL(ncclSend(sb, sn, ncclUint8, p, c->nccl, c->stream)), "ncclSend");
                if (rn) nccl_inside_group(RTCU_NCCL(ncclRecv(rb, rn, ncclUint8, p, c->nccl, c->stream)), "ncclRecv");
            } else {
                if (rn) nccl_inside_group(RTCU_NCCL(ncclSend(rb, rn, ncclUint8, p, c->nccl, c->stream)), "ncclSend");
                if (sn) nccl_inside_group(RTCU_NCCL(ncclRecv(sb, sn, ncclUint8, p, c->nccl, c->stream)), "ncclRecv");
            }
            so += s;
            ro += r;
        }
    }
    NCCL_COMM_CHECK(c->nccl, ncclGroupEnd());
    CUDA_CHECK(cudaEventRecord(finished, c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(rtcu.compute, finished, 0));
    CUDA_CHECK(cudaEventDestroy(ready)); /* released once they complete */
    CUDA_CHECK(cudaEventDestroy(finished));
}

/* The act's pointwise kernels (rt.h RtMoeAct, the rows of ir/moe_acts.def),
 * as runtime/cpu/moe.c: y from a (gate; absent ungated) and b (up); the
 * backward overwrites a and b with their gradients (b alone ungated). */
bool act_gated(const char *fn, int act)
{
    switch (act) {
    case RT_MOE_SWIGLU:
    case RT_MOE_SWIGLU_OAI: return true;
    case RT_MOE_RELU2: return false;
    }
    rt_fatal("%s: unknown expert activation %d", fn, act);
}

void act_fwd(int act, rt_act *y, const rt_act *a, const rt_act *b, int64_t n)
{
    if (act == RT_MOE_SWIGLU) rt_swiglu_fwd(y, a, b, n);
    else if (act == RT_MOE_SWIGLU_OAI) rt_swiglu_oai_fwd(y, a, b, n);
    else rt_relu2_fwd(y, b, n);
}

void act_bwd(int act, rt_act *a, rt_act *b, const rt_act *dy, int64_t n)
{
    if (act == RT_MOE_SWIGLU) rt_swiglu_bwd(a, b, a, b, dy, n);
    else if (act == RT_MOE_SWIGLU_OAI) rt_swiglu_oai_bwd(a, b, a, b, dy, n);
    else rt_relu2_bwd(b, b, dy, n);
}

void check_weights(const char *fn, int act, const rt_act *w_gate, const rt_act *b_gate)
{
    bool gated = act_gated(fn, act);
    if (gated != (w_gate != NULL) || (!gated && b_gate))
        rt_fatal("%s: activation %d %s a gate weight%s", fn, act, gated ? "needs" : "takes no", gated ? "" : " or bias");
}

/* The first GEMMs of n rows x of expert j into a (gate) and b (up), each plus its bias row. */
void first_gemms(rt_act *a, rt_act *b, const rt_act *x, const rt_act *w_gate, const rt_act *w_up, const rt_act *b_gate,
                 const rt_act *b_up, int64_t j, int64_t n, int64_t D, int64_t F)
{
    if (w_gate) {
        rt_matmul(a, x, w_gate + j * D * F, n, F, D, false, false, false);
        if (b_gate) rt_add(a, a, b_gate + j * F, n * F, F);
    }
    rt_matmul(b, x, w_up + j * D * F, n, F, D, false, false, false);
    if (b_up) rt_add(b, b, b_up + j * F, n * F, F);
}

} // namespace

void rt_moe_fwd(RtComm *ep, rt_act *y, const rt_act *h, const rt_act *gates, const rt_act *w_gate,
                const rt_act *w_up, const rt_act *w_down, int64_t tokens, int64_t d_model, int64_t gate_cols,
                int64_t e_local, int64_t d_expert)
{
    rt_moe_act_fwd(ep, y, h, gates, w_gate, w_up, w_down, NULL, NULL, RT_MOE_SWIGLU, tokens, d_model, gate_cols,
                   e_local, d_expert);
}

void rt_moe_bwd(RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down,
                const rt_act *h, const rt_act *gates, const rt_act *w_gate, const rt_act *w_up, const rt_act *w_down,
                const rt_act *dy, int64_t tokens, int64_t d_model, int64_t gate_cols, int64_t e_local,
                int64_t d_expert)
{
    rt_moe_act_bwd(ep, dh, dgates, dw_gate, dw_up, dw_down, NULL, NULL, h, gates, w_gate, w_up, w_down, NULL, NULL, dy,
                   RT_MOE_SWIGLU, tokens, d_model, gate_cols, e_local, d_expert);
}

void rt_moe_act_fwd(RtComm *ep, rt_act *y, const rt_act *h, const rt_act *gates, const rt_act *w_gate,
                    const rt_act *w_up, const rt_act *w_down, const rt_act *b_gate, const rt_act *b_up, int act,
                    int64_t tokens, int64_t d_model, int64_t gate_cols, int64_t e_local, int64_t d_expert)
{
    check_args("rt_moe_fwd", ep, tokens, d_model, gate_cols, e_local, d_expert);
    check_weights("rt_moe_fwd", act, w_gate, b_gate);
    int64_t D = d_model, F = d_expert, T = tokens;
    size_t wb = (size_t)(e_local * D * F) * sizeof(rt_act), ab = sizeof(rt_act), bb = (size_t)(e_local * F) * ab;
    rtcu_deps({{y, (size_t)(T * D) * ab}, {h, (size_t)(T * D) * ab}, {gates, (size_t)(T * gate_cols) * ab},
               {w_gate, wb}, {w_up, wb}, {w_down, wb}, {b_gate, bb}, {b_up, bb}});
    Plan P = plan_make(ep, gates, T, gate_cols, e_local);
    int64_t S = P.nsend, R = P.nrecv;
    rt_act *xs = (rt_act *)dalloc((size_t)(S * D) * ab);
    rt_act *xr = P.ep ? (rt_act *)dalloc((size_t)(R * D) * ab) : xs;
    rt_act *xe = (rt_act *)dalloc((size_t)(R * D) * ab), *oe = (rt_act *)dalloc((size_t)(R * D) * ab);
    rt_act *a = (rt_act *)dalloc((size_t)(R * F) * ab), *b = (rt_act *)dalloc((size_t)(R * F) * ab);
    gather(xs, h, P.send_tok, S, D);
    exchange(P, {{xs, xr, (size_t)D * ab}}, false);
    gather(xe, xr, P.to_exp, R, D);
    for (int64_t j = 0; j < e_local; j++) {
        int64_t n = P.ecnt[(size_t)j], o = P.eoff[(size_t)j];
        if (n == 0) continue;
        first_gemms(a + o * F, b + o * F, xe + o * D, w_gate, w_up, b_gate, b_up, j, n, D, F);
    }
    act_fwd(act, a, a, b, R * F);
    for (int64_t j = 0; j < e_local; j++) {
        int64_t n = P.ecnt[(size_t)j], o = P.eoff[(size_t)j];
        if (n) rt_matmul(oe + o * D, a + o * F, w_down + j * F * D, n, D, F, false, false, false);
    }
    gather(xr, oe, P.to_recv, R, D); /* receive order */
    exchange(P, {{xs, xr, (size_t)D * ab}}, true);
    if (T) {
        RTCU_LAUNCH(combine, rtcu_grid(T * D, 256), 256, 0)(y, xs, gates, P.tok_ptr, P.tok_row, P.send_col, T, D,
                                                             gate_cols);
        LAUNCH_CHECK();
    }
    for (void *p : {(void *)a, (void *)b, (void *)oe, (void *)xe}) dfree(p);
    if (xr != xs) dfree(xr);
    dfree(xs);
    dfree(P.d_idx);
}

namespace {

/* The experts' weight and bias gradients of expert j's n rows (moe.c's
 * expert_dw): one order for rt_moe_act_bwd and W. */
void expert_dw(rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up, const rt_act *x,
               const rt_act *gy, const rt_act *acts, const rt_act *a, const rt_act *b, int64_t j, int64_t n, int64_t D,
               int64_t F)
{
    rt_matmul_grad(dw_down + j * F * D, acts, gy, F, D, n, true, false, true);
    if (dw_gate) {
        rt_matmul_grad(dw_gate + j * D * F, x, a, D, F, n, true, false, true);
        if (db_gate) rt_reduce_rows_grad(db_gate + j * F, a, n, F, true);
    }
    rt_matmul_grad(dw_up + j * D * F, x, b, D, F, n, true, false, true);
    if (db_up) rt_reduce_rows_grad(db_up + j * F, b, n, F, true);
}

/* The W slot's regions (rt.h rt_moe_act_bwd_b): x, gy, acts, b, a. */
struct Slot {
    rt_act *x, *gy, *acts, *b, *a;
};

Slot slot_of(const rt_act *ws, int64_t rows_max, int64_t D, int64_t F, bool gated)
{
    rt_act *p = (rt_act *)ws;
    return Slot{p, p + rows_max * D, p + 2 * rows_max * D, p + rows_max * (2 * D + F),
                gated ? p + rows_max * (2 * D + 2 * F) : nullptr};
}

size_t slot_bytes(int64_t rows_max, int64_t D, int64_t F, bool gated)
{
    return (size_t)(rows_max * (2 * D + (2 + gated) * F)) * sizeof(rt_act);
}

/* W's work: every local expert's weight gradients from slot ws (cnt[j]
 * rows of expert j, expert-major). */
void slot_dw(rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up, const rt_act *ws,
             int64_t rows_max, bool gated, int64_t D, int64_t el, int64_t F, const int64_t *cnt)
{
    Slot sl = slot_of(ws, rows_max, D, F, gated);
    int64_t o = 0;
    for (int64_t j = 0; j < el; j++) {
        int64_t n = cnt[j];
        if (n > 0)
            expert_dw(dw_gate, dw_up, dw_down, db_gate, db_up, sl.x + o * D, sl.gy + o * D, sl.acts + o * F,
                      gated ? sl.a + o * F : nullptr, sl.b + o * F, j, n, D, F);
        o += n;
    }
}

/* Before an overflowing B adds its micro-batch's weight gradients: the W
 * still pending on the layer's other slots, oldest first (moe.c's flush). */
void flush(rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up, bool gated,
           int64_t D, int64_t el, int64_t F)
{
    int64_t rows_max;
    const void *ws;
    while ((ws = rtc_moe_wslot_oldest(dw_down, &rows_max))) {
        rtcu_deps({{ws, slot_bytes(rows_max, D, F, gated)}});
        slot_dw(dw_gate, dw_up, dw_down, db_gate, db_up, (const rt_act *)ws, rows_max, gated, D, el, F,
                rtc_moe_wslot_take("rt_moe_act_bwd_b", ws, el, rows_max, false));
    }
}

/* ws non-NULL (ZB-H1's B): the weight gradients' operands are made in the
 * W slot ws and the gradients left to rt_moe_act_bwd_w; unless more than
 * rows_max rows arrive: then the layer's pending W run first (flush) and
 * this B adds the gradients into dw_* itself, as rt_moe_act_bwd does. */
void moe_bwd(const char *fn, RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up,
             rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up, rt_act *ws, int64_t rows_max, const rt_act *h,
             const rt_act *gates, const rt_act *w_gate, const rt_act *w_up, const rt_act *w_down,
             const rt_act *b_gate, const rt_act *b_up, const rt_act *dy, int act, int64_t tokens, int64_t d_model,
             int64_t gate_cols, int64_t e_local, int64_t d_expert)
{
    check_args(fn, ep, tokens, d_model, gate_cols, e_local, d_expert);
    check_weights(fn, act, w_gate, b_gate);
    if ((!ws || dw_up || dw_down || dw_gate || db_gate || db_up) &&
        ((b_gate != NULL) != (db_gate != NULL) || (b_up != NULL) != (db_up != NULL) ||
         (w_gate != NULL) != (dw_gate != NULL) || !dw_up || !dw_down))
        rt_fatal("%s: a gradient for each weight and bias, and none for absent ones", fn);
    int64_t D = d_model, F = d_expert, T = tokens, E = e_local;
    size_t ab = sizeof(rt_act), wb = (size_t)(E * D * F) * ab, gb = (size_t)(E * D * F) * sizeof(rt_grad);
    size_t bb = (size_t)(E * F) * ab, dbb = (size_t)(E * F) * sizeof(rt_grad);
    size_t tb = (size_t)(T * D) * ab, cb = (size_t)(T * gate_cols) * ab;
    size_t sb = ws ? slot_bytes(rows_max, D, F, w_gate != NULL) : 0;
    rtcu_deps({{dh, tb}, {dgates, cb}, {dw_gate, gb}, {dw_up, gb}, {dw_down, gb}, {db_gate, dbb}, {db_up, dbb}, {h, tb},
               {gates, cb}, {w_gate, wb}, {w_up, wb}, {w_down, wb}, {b_gate, bb}, {b_up, bb}, {dy, tb}, {ws, sb}});
    Plan P = plan_make(ep, gates, T, gate_cols, e_local);
    int64_t S = P.nsend, R = P.nrecv;
    bool spill = ws && R > rows_max;
    if (spill && !dw_up)
        rt_fatal("%s: %lld routed rows reach this rank's experts, more than the W slot's %lld, and B has no "
                 "gradient accumulators to add them into (a slot without them holds the worst case)", fn,
                 (long long)R, (long long)rows_max);
    if (spill) flush(dw_gate, dw_up, dw_down, db_gate, db_up, w_gate != NULL, D, e_local, F);
    rt_act *slot = spill ? nullptr : ws;
    bool x = P.ep != NULL;
    /* send order: h, dy, gate per routed row; then the receive order */
    rt_act *xs = (rt_act *)dalloc((size_t)(S * D) * ab), *ys = (rt_act *)dalloc((size_t)(S * D) * ab);
    float *gs = (float *)dalloc((size_t)S * sizeof(float)), *dgs = (float *)dalloc((size_t)S * sizeof(float));
    rt_act *xr = x ? (rt_act *)dalloc((size_t)(R * D) * ab) : xs, *yr = x ? (rt_act *)dalloc((size_t)(R * D) * ab) : ys;
    float *gr = x ? (float *)dalloc((size_t)R * sizeof(float)) : gs, *dgr = x ? (float *)dalloc((size_t)R * sizeof(float)) : dgs;
    gather(xs, h, P.send_tok, S, D);
    gather(ys, dy, P.send_tok, S, D);
    if (S) {
        RTCU_LAUNCH(gather_gates, rtcu_grid(S, 256), 256, 0)(gs, gates, P.send_tok, P.send_col, S, gate_cols);
        LAUNCH_CHECK();
    }
    exchange(P, {{xs, xr, (size_t)D * ab}, {ys, yr, (size_t)D * ab}, {gs, gr, sizeof(float)}}, false);
    /* expert-major operands */
    /* under ZB-H1 those W reads are made in its slot */
    Slot sl = slot ? slot_of(slot, rows_max, D, F, w_gate != NULL) : Slot{};
    rt_act *xe = slot ? sl.x : (rt_act *)dalloc((size_t)(R * D) * ab), *ye = (rt_act *)dalloc((size_t)(R * D) * ab);
    rt_act *gy = slot ? sl.gy : (rt_act *)dalloc((size_t)(R * D) * ab), *dx = (rt_act *)dalloc((size_t)(R * D) * ab);
    rt_act *a = sl.a ? sl.a : (rt_act *)dalloc((size_t)(R * F) * ab), *b = slot ? sl.b : (rt_act *)dalloc((size_t)(R * F) * ab);
    rt_act *acts = slot ? sl.acts : (rt_act *)dalloc((size_t)(R * F) * ab), *u = (rt_act *)dalloc((size_t)(R * F) * ab);
    float *ge = (float *)dalloc((size_t)R * sizeof(float)), *dge = (float *)dalloc((size_t)R * sizeof(float));
    gather(xe, xr, P.to_exp, R, D);
    gather(ye, yr, P.to_exp, R, D);
    gather(ge, gr, P.to_exp, R, 1);
    /* recompute the first GEMMs (moe keeps only h and gates), and u = dy W_down^T */
    for (int64_t j = 0; j < E; j++) {
        int64_t n = P.ecnt[(size_t)j], o = P.eoff[(size_t)j];
        if (n == 0) continue;
        first_gemms(a + o * F, b + o * F, xe + o * D, w_gate, w_up, b_gate, b_up, j, n, D, F);
        rt_matmul(u + o * F, ye + o * D, w_down + j * F * D, n, F, D, false, true, false);
    }
    act_fwd(act, acts, a, b, R * F);
    if (R) {
        RTCU_LAUNCH(row_grads, rtcu_grid(R * 32, 256), 256, 0)(dge, u, gy, acts, ye, ge, R, F, D);
        LAUNCH_CHECK();
    }
    act_bwd(act, a, b, u, R * F); /* a, b now d(gate GEMM), d(up GEMM) */
    for (int64_t j = 0; j < E; j++) {
        int64_t n = P.ecnt[(size_t)j], o = P.eoff[(size_t)j];
        if (n == 0) continue;
        if (!slot)
            expert_dw(dw_gate, dw_up, dw_down, db_gate, db_up, xe + o * D, gy + o * D, acts + o * F, a + o * F,
                      b + o * F, j, n, D, F);
        if (w_gate) /* dx = da Wg^T + db Wu^T, in that order */
            rt_matmul(dx + o * D, a + o * F, w_gate + j * D * F, n, D, F, false, true, false);
        rt_matmul(dx + o * D, b + o * F, w_up + j * D * F, n, D, F, false, true, w_gate != NULL);
    }
    gather(xr, dx, P.to_recv, R, D);
    gather(dgr, dge, P.to_recv, R, 1);
    exchange(P, {{xs, xr, (size_t)D * ab}, {dgs, dgr, sizeof(float)}}, true);
    if (T) {
        RTCU_LAUNCH(combine, rtcu_grid(T * D, 256), 256, 0)(dh, xs, (const rt_act *)nullptr, P.tok_ptr, P.tok_row, P.send_col, T, D,
                                                             gate_cols);
        LAUNCH_CHECK();
        RTCU_LAUNCH(scatter_dgates, rtcu_grid(T * gate_cols, 256), 256, 0)(dgates, dgs, P.tok_ptr, P.tok_row,
                                                                            P.send_col, T, gate_cols);
        LAUNCH_CHECK();
    }
    if (ws) rtc_moe_wslot_put(ws, dw_down, P.ecnt.data(), e_local, rows_max, !spill);
    for (void *p : {(void *)ye, (void *)dx, (void *)u, (void *)ge, (void *)dge, (void *)xs, (void *)ys, (void *)gs,
                    (void *)dgs})
        dfree(p);
    for (void *p : {(void *)xe, (void *)gy, (void *)a, (void *)b, (void *)acts})
        if (!slot || (p != sl.x && p != sl.gy && p != sl.a && p != sl.b && p != sl.acts)) dfree(p);
    if (x)
        for (void *p : {(void *)xr, (void *)yr, (void *)gr, (void *)dgr}) dfree(p);
    dfree(P.d_idx);
}

} // namespace

void rt_moe_act_bwd(RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down,
                    rt_grad *db_gate, rt_grad *db_up, const rt_act *h, const rt_act *gates, const rt_act *w_gate,
                    const rt_act *w_up, const rt_act *w_down, const rt_act *b_gate, const rt_act *b_up,
                    const rt_act *dy, int act, int64_t tokens, int64_t d_model, int64_t gate_cols, int64_t e_local,
                    int64_t d_expert)
{
    moe_bwd("rt_moe_bwd", ep, dh, dgates, dw_gate, dw_up, dw_down, db_gate, db_up, NULL, 0, h, gates, w_gate, w_up,
            w_down, b_gate, b_up, dy, act, tokens, d_model, gate_cols, e_local, d_expert);
}

void rt_moe_act_bwd_b(RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down,
                      rt_grad *db_gate, rt_grad *db_up, rt_act *wslot, int64_t rows_max, const rt_act *h,
                      const rt_act *gates, const rt_act *w_gate, const rt_act *w_up, const rt_act *w_down,
                      const rt_act *b_gate, const rt_act *b_up, const rt_act *dy, int act, int64_t tokens,
                      int64_t d_model, int64_t gate_cols, int64_t e_local, int64_t d_expert)
{
    if (!wslot || rows_max < 0)
        rt_fatal("rt_moe_act_bwd_b: a W slot of rows_max >= 0 rows (got %p, %lld)", (void *)wslot, (long long)rows_max);
    moe_bwd("rt_moe_act_bwd_b", ep, dh, dgates, dw_gate, dw_up, dw_down, db_gate, db_up, wslot, rows_max, h, gates,
            w_gate, w_up,
            w_down, b_gate, b_up, dy, act, tokens, d_model, gate_cols, e_local, d_expert);
}

void rt_moe_act_bwd_w(rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up,
                      const rt_act *wslot, int64_t rows_max, int act, int64_t d_model, int64_t e_local, int64_t d_expert)
{
    rtcu_require_init("rt_moe_act_bwd_w");
    bool gated = act_gated("rt_moe_act_bwd_w", act);
    if (gated != (dw_gate != NULL) || (!gated && db_gate) || !dw_up || !dw_down)
        rt_fatal("rt_moe_act_bwd_w: a gradient for each weight of activation %d, and none for absent ones", act);
    int64_t D = d_model, F = d_expert, E = e_local;
    size_t gb = (size_t)(E * D * F) * sizeof(rt_grad), dbb = (size_t)(E * F) * sizeof(rt_grad);
    rtcu_deps({{dw_gate, gb}, {dw_up, gb}, {dw_down, gb}, {db_gate, dbb}, {db_up, dbb},
               {wslot, slot_bytes(rows_max, D, F, gated)}});
    const int64_t *cnt = rtc_moe_wslot_take("rt_moe_act_bwd_w", wslot, e_local, rows_max, true);
    if (cnt) /* else its B overflowed the slot, or a later one's did: done there */
        slot_dw(dw_gate, dw_up, dw_down, db_gate, db_up, wslot, rows_max, gated, D, E, F, cnt);
}
