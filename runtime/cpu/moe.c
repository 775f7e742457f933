/* moe.c: the experts of a mixture-of-experts layer (docs/moe.md, `moe`),
 * with or without the all-to-all exchange of routed rows.
 *
 * The routed rows of this rank are listed in send order: by destination
 * rank, then the destination's local expert, then token (ascending). The
 * exchange (MPI_Alltoall of per-expert row counts, then MPI_Alltoallv of the
 * rows) delivers them by source rank, each source's block in that order; a
 * block copy puts them expert-major, so that the rows of an expert are
 * ascending (source rank, token): with tokens split over ranks in order,
 * the same rows in the same order as the one-rank form. Each expert's rows
 * then run as GEMMs (rt_matmul), the results travel back the same way, and
 * the token's own rank sums its experts' contributions in ascending expert
 * index: results do not depend on timing, and 1 rank and n ranks differ
 * only by the GEMMs' blocking. Without an exchange (ep == NULL) the send
 * order is already expert-major and nothing moves.
 *
 * Workspace is malloc'd per call, sized from the counts, and freed before
 * return (the routed row count is known only here). */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "cpu.h"

/* Who sends what where, for one call. */
typedef struct {
    RtComm *ep;       /* NULL: no exchange */
    int n, me;        /* ranks of ep (1 and 0 without one) */
    int64_t el, cols; /* local experts; gate columns (el * n) */
    int64_t nsend;    /* routed rows of this rank's tokens */
    int64_t *soff;    /* [cols + 1]: send row offset of each (rank, expert) bucket */
    int *rcnt;        /* [n * el]: rows received from rank p for local expert j */
    int64_t nrecv;
    int64_t *ecnt, *eoff; /* [el], [el + 1]: rows per local expert, expert-major offsets */
} Plan;

static void check_args(const char *fn, RtComm *ep, int64_t tokens, int64_t d_model,
                       int64_t gate_cols, int64_t e_local, int64_t d_expert)
{
    if (tokens < 0 || d_model < 1 || e_local < 1 || d_expert < 1)
        rt_fatal("%s: sizes tokens=%lld d_model=%lld e_local=%lld d_expert=%lld out of range", fn,
                 (long long)tokens, (long long)d_model, (long long)e_local, (long long)d_expert);
    int64_t want = ep ? e_local * rt_comm_size(ep) : e_local;
    if (gate_cols != want)
        rt_fatal("%s: gates have %lld columns, but %s needs %lld (e_local = %lld)", fn,
                 (long long)gate_cols, ep ? "the exchange over the ep ranks" : "ep == NULL",
                 (long long)want, (long long)e_local);
}

/* Counts the routed rows, exchanges the counts and lays out both orders. */
static Plan plan_make(RtComm *ep, const rt_act *gates, int64_t tokens, int64_t gate_cols,
                      int64_t e_local)
{
    Plan P = {.ep = ep, .n = ep ? rt_comm_size(ep) : 1, .me = ep ? rt_comm_rank(ep) : 0,
              .el = e_local, .cols = gate_cols};
    P.soff = calloc((size_t)gate_cols + 1, sizeof *P.soff);
    int *scnt = calloc((size_t)gate_cols, sizeof *scnt);
    P.rcnt = calloc((size_t)gate_cols, sizeof *P.rcnt);
    P.ecnt = calloc((size_t)e_local, sizeof *P.ecnt);
    P.eoff = calloc((size_t)e_local + 1, sizeof *P.eoff);
    if (!P.soff || !scnt || !P.rcnt || !P.ecnt || !P.eoff)
        rt_fatal("ptdrt: out of host memory planning an MoE exchange");
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t e = 0; e < gate_cols; e++)
            if (gates[t * gate_cols + e] != 0) {
                if (scnt[e] == INT32_MAX)
                    rt_fatal("rt_moe: more than %d rows routed to expert %lld", INT32_MAX, (long long)e);
                scnt[e]++;
            }
    /* buckets are (rank, local expert) = global expert e: ascending e is send order */
    for (int64_t e = 0; e < gate_cols; e++)
        P.soff[e + 1] = P.soff[e] + scnt[e];
    P.nsend = P.soff[gate_cols];
    if (ep) {
        /* rcnt[p * el + j]: what rank p routes to our expert j */
        RT_MPI_WAIT(RTW_ALLTOALL, ep, -1, 0,
                    MPI_Alltoall(scnt, (int)e_local, MPI_INT, P.rcnt, (int)e_local, MPI_INT,
                                 ep->comm));
    } else {
        memcpy(P.rcnt, scnt, (size_t)gate_cols * sizeof *scnt);
    }
    free(scnt);
    for (int p = 0; p < P.n; p++)
        for (int64_t j = 0; j < e_local; j++)
            P.ecnt[j] += P.rcnt[p * e_local + j];
    for (int64_t j = 0; j < e_local; j++)
        P.eoff[j + 1] = P.eoff[j] + P.ecnt[j];
    P.nrecv = P.eoff[e_local];
    return P;
}

static void plan_free(Plan *P)
{
    free(P->soff);
    free(P->rcnt);
    free(P->ecnt);
    free(P->eoff);
}

/* Row r of the send order of each routed (t, e), in the order (token, then
 * expert) the combine walks: the k-th routed choice of t in ascending e. */
static int64_t *send_rows(const Plan *P, const rt_act *gates, int64_t tokens)
{
    int64_t *cur = rtcpu_xmalloc((size_t)P->cols * sizeof *cur);
    int64_t *row = rtcpu_xmalloc((size_t)P->nsend * sizeof *row);
    memcpy(cur, P->soff, (size_t)P->cols * sizeof *cur);
    int64_t i = 0;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t e = 0; e < P->cols; e++)
            if (gates[t * P->cols + e] != 0)
                row[i++] = cur[e]++;
    free(cur);
    return row;
}

/* Rows of `width` floats between send order (this rank's tokens) and
 * receive order (by source rank, then local expert, then token), forward
 * (to the experts) or back. Without an exchange the two are one buffer. */
static void exchange(const Plan *P, float *recv, float *send, int64_t width, bool back)
{
    if (!P->ep) {
        memcpy(back ? send : recv, back ? recv : send,
               (size_t)(P->nsend * width) * sizeof(float));
        return;
    }
    int n = P->n;
    int *sc = rtcpu_xmalloc((size_t)n * sizeof *sc), *sd = rtcpu_xmalloc((size_t)n * sizeof *sd);
    int *rc = rtcpu_xmalloc((size_t)n * sizeof *rc), *rd = rtcpu_xmalloc((size_t)n * sizeof *rd);
    int64_t so = 0, ro = 0;
    for (int p = 0; p < n; p++) {
        int64_t s = P->soff[(p + 1) * P->el] - P->soff[p * P->el], r = 0;
        for (int64_t j = 0; j < P->el; j++)
            r += P->rcnt[p * P->el + j];
        sc[p] = rtcpu_mpi_count(s * width, "rt_moe's exchange");
        rc[p] = rtcpu_mpi_count(r * width, "rt_moe's exchange");
        sd[p] = rtcpu_mpi_count(so, "rt_moe's exchange");
        rd[p] = rtcpu_mpi_count(ro, "rt_moe's exchange");
        so += s * width;
        ro += r * width;
    }
    if (back) /* the reverse: our experts' rows go back to their tokens' ranks */
        RT_MPI_WAIT(RTW_ALLTOALL, P->ep, -1, 0,
                    MPI_Alltoallv(recv, rc, rd, MPI_FLOAT, send, sc, sd, MPI_FLOAT,
                                  P->ep->comm));
    else
        RT_MPI_WAIT(RTW_ALLTOALL, P->ep, -1, 0,
                    MPI_Alltoallv(send, sc, sd, MPI_FLOAT, recv, rc, rd, MPI_FLOAT, P->ep->comm));
    free(sc);
    free(sd);
    free(rc);
    free(rd);
}

/* Receive order <-> expert-major order, by blocks of (source rank, expert). */
static void permute(const Plan *P, float *emaj, float *recv, int64_t width, bool to_expert)
{
    int64_t r = 0;
    int64_t *fill = rtcpu_xmalloc((size_t)P->el * sizeof *fill);
    memcpy(fill, P->eoff, (size_t)P->el * sizeof *fill);
    for (int p = 0; p < P->n; p++)
        for (int64_t j = 0; j < P->el; j++) {
            int64_t c = P->rcnt[p * P->el + j];
            float *e = emaj + fill[j] * width, *v = recv + r * width;
            size_t bytes = (size_t)(c * width) * sizeof(float);
            if (bytes)
                memcpy(to_expert ? e : v, to_expert ? v : e, bytes);
            fill[j] += c;
            r += c;
        }
    free(fill);
}

static float *fbuf(int64_t n) { return rtcpu_xmalloc((size_t)n * sizeof(float)); }

/* The act's pointwise kernels (rt.h RtMoeAct, the rows of ir/moe_acts.def):
 * y from the first GEMMs' outputs a (gate; absent ungated) and b (up); the
 * backward overwrites a and b with their gradients (b alone ungated). */
static bool act_gated(const char *fn, int act)
{
    switch (act) {
    case RT_MOE_SWIGLU:
    case RT_MOE_SWIGLU_OAI: return true;
    case RT_MOE_RELU2: return false;
    }
    rt_fatal("%s: unknown expert activation %d", fn, act);
}

static void act_fwd(int act, float *y, const float *a, const float *b, int64_t n)
{
    if (act == RT_MOE_SWIGLU)
        rt_swiglu_fwd(y, a, b, n);
    else if (act == RT_MOE_SWIGLU_OAI)
        rt_swiglu_oai_fwd(y, a, b, n);
    else
        rt_relu2_fwd(y, b, n);
}

static void act_bwd(int act, float *a, float *b, const float *dy, int64_t n)
{
    if (act == RT_MOE_SWIGLU)
        rt_swiglu_bwd(a, b, a, b, dy, n);
    else if (act == RT_MOE_SWIGLU_OAI)
        rt_swiglu_oai_bwd(a, b, a, b, dy, n);
    else
        rt_relu2_bwd(b, b, dy, n);
}

static void check_weights(const char *fn, int act, const rt_act *w_gate, const rt_act *b_gate)
{
    bool gated = act_gated(fn, act);
    if (gated != (w_gate != NULL) || (!gated && b_gate))
        rt_fatal("%s: activation %d %s a gate weight%s", fn, act, gated ? "needs" : "takes no",
                 gated ? "" : " or bias");
}

/* The first GEMMs of n rows x of expert j into a (gate) and b (up), each
 * plus its bias row. */
static void first_gemms(float *a, float *b, const float *x, const rt_act *w_gate, const rt_act *w_up,
                        const rt_act *b_gate, const rt_act *b_up, int64_t j, int64_t n, int64_t D,
                        int64_t F)
{
    if (w_gate) {
        rt_matmul(a, x, w_gate + j * D * F, n, F, D, false, false, false);
        if (b_gate)
            rt_add(a, a, b_gate + j * F, n * F, F);
    }
    rt_matmul(b, x, w_up + j * D * F, n, F, D, false, false, false);
    if (b_up)
        rt_add(b, b, b_up + j * F, n * F, F);
}

void rt_moe_fwd(RtComm *ep, rt_act *y, const rt_act *h, const rt_act *gates,
                const rt_act *w_gate, const rt_act *w_up, const rt_act *w_down,
                int64_t tokens, int64_t d_model, int64_t gate_cols, int64_t e_local,
                int64_t d_expert)
{
    rt_moe_act_fwd(ep, y, h, gates, w_gate, w_up, w_down, NULL, NULL, RT_MOE_SWIGLU, tokens, d_model,
                   gate_cols, e_local, d_expert);
}

void rt_moe_bwd(RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up,
                rt_grad *dw_down, const rt_act *h, const rt_act *gates, const rt_act *w_gate,
                const rt_act *w_up, const rt_act *w_down, const rt_act *dy, int64_t tokens,
                int64_t d_model, int64_t gate_cols, int64_t e_local, int64_t d_expert)
{
    rt_moe_act_bwd(ep, dh, dgates, dw_gate, dw_up, dw_down, NULL, NULL, h, gates, w_gate, w_up, w_down,
                   NULL, NULL, dy, RT_MOE_SWIGLU, tokens, d_model, gate_cols, e_local, d_expert);
}

void rt_moe_act_fwd(RtComm *ep, rt_act *y, const rt_act *h, const rt_act *gates,
                    const rt_act *w_gate, const rt_act *w_up, const rt_act *w_down,
                    const rt_act *b_gate, const rt_act *b_up, int act, int64_t tokens,
                    int64_t d_model, int64_t gate_cols, int64_t e_local, int64_t d_expert)
{
    check_args("rt_moe_fwd", ep, tokens, d_model, gate_cols, e_local, d_expert);
    check_weights("rt_moe_fwd", act, w_gate, b_gate);
    int64_t D = d_model, F = d_expert;
    Plan P = plan_make(ep, gates, tokens, gate_cols, e_local);
    int64_t *row = send_rows(&P, gates, tokens);
    float *xs = fbuf(P.nsend * D);
    int64_t i = 0;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t e = 0; e < gate_cols; e++)
            if (gates[t * gate_cols + e] != 0)
                memcpy(xs + row[i++] * D, h + t * D, (size_t)D * sizeof(float));
    float *xr = fbuf(P.nrecv * D), *xe = fbuf(P.nrecv * D);
    exchange(&P, xr, xs, D, false);
    permute(&P, xe, xr, D, true);
    float *a = fbuf(P.nrecv * F), *b = fbuf(P.nrecv * F), *oe = fbuf(P.nrecv * D);
    for (int64_t j = 0; j < e_local; j++) {
        int64_t n = P.ecnt[j], o = P.eoff[j];
        if (n == 0)
            continue;
        first_gemms(a + o * F, b + o * F, xe + o * D, w_gate, w_up, b_gate, b_up, j, n, D, F);
        act_fwd(act, a + o * F, a + o * F, b + o * F, n * F);
        rt_matmul(oe + o * D, a + o * F, w_down + j * F * D, n, D, F, false, false, false);
    }
    permute(&P, oe, xr, D, false);
    exchange(&P, xr, xs, D, true);
    /* the combine: each token's experts in ascending index */
    i = 0;
    for (int64_t t = 0; t < tokens; t++) {
        rt_act *yt = y + t * D;
        memset(yt, 0, (size_t)D * sizeof *yt);
        for (int64_t e = 0; e < gate_cols; e++) {
            float g = gates[t * gate_cols + e];
            if (g == 0)
                continue;
            const float *o = xs + row[i++] * D;
            for (int64_t c = 0; c < D; c++)
                yt[c] += g * o[c];
        }
    }
    free(a);
    free(b);
    free(oe);
    free(xe);
    free(xr);
    free(xs);
    free(row);
    plan_free(&P);
}

/* The experts' weight and bias gradients of expert j's n rows: x its
 * inputs, gy its outputs' gradients, acts the activation's outputs, A and B
 * the gate and up GEMMs' gradients. One order for rt_moe_act_bwd and W. */
static void expert_dw(rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate,
                      rt_grad *db_up, const float *x, const float *gy, const float *acts,
                      const float *A, const float *B, int64_t j, int64_t n, int64_t D, int64_t F)
{
    rt_matmul_grad(dw_down + j * F * D, acts, gy, F, D, n, true, false, true);
    if (dw_gate) {
        rt_matmul_grad(dw_gate + j * D * F, x, A, D, F, n, true, false, true);
        if (db_gate)
            rt_reduce_rows_grad(db_gate + j * F, A, n, F, true);
    }
    rt_matmul_grad(dw_up + j * D * F, x, B, D, F, n, true, false, true);
    if (db_up)
        rt_reduce_rows_grad(db_up + j * F, B, n, F, true);
}

/* The W slot's regions (rt.h rt_moe_act_bwd_b): x, gy, acts, B, A. */
typedef struct {
    float *x, *gy, *acts, *b, *a;
} Slot;

static Slot slot_of(const rt_act *ws, int64_t rows_max, int64_t D, int64_t F, bool gated)
{
    float *p = (float *)ws;
    Slot s = {p, p + rows_max * D, p + 2 * rows_max * D, p + rows_max * (2 * D + F),
              gated ? p + rows_max * (2 * D + 2 * F) : NULL};
    return s;
}

/* W's work: every local expert's weight gradients from slot ws (cnt[j]
 * rows of expert j, expert-major). */
static void slot_dw(rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up,
                    const rt_act *ws, int64_t rows_max, bool gated, int64_t D, int64_t el, int64_t F,
                    const int64_t *cnt)
{
    Slot sl = slot_of(ws, rows_max, D, F, gated);
    int64_t o = 0;
    for (int64_t j = 0; j < el; j++) {
        int64_t n = cnt[j];
        if (n > 0)
            expert_dw(dw_gate, dw_up, dw_down, db_gate, db_up, sl.x + o * D, sl.gy + o * D, sl.acts + o * F,
                      gated ? sl.a + o * F : NULL, sl.b + o * F, j, n, D, F);
        o += n;
    }
}

/* Before an overflowing B adds its micro-batch's weight gradients: the W
 * still pending on the layer's other slots, oldest first, so they add in
 * micro-batch order as without the overflow (bitwise the same sums). */
static void flush(rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up,
                  bool gated, int64_t D, int64_t el, int64_t F)
{
    int64_t rows_max;
    const void *ws;
    while ((ws = rtc_moe_wslot_oldest(dw_down, &rows_max)))
        slot_dw(dw_gate, dw_up, dw_down, db_gate, db_up, ws, rows_max, gated, D, el, F,
                rtc_moe_wslot_take("rt_moe_act_bwd_b", ws, el, rows_max, false));
}

/* Per routed row the owner needs h, dy and the gate: one row of 2 D + 1
 * floats travels; D + 1 come back (the row's dh contribution and dgate).
 * ws non-NULL (ZB-H1's B): the weight gradients' operands are made in the
 * W slot ws and the gradients left to rt_moe_act_bwd_w; unless more than
 * rows_max rows arrive: then the layer's pending W run first (flush) and
 * this B adds the gradients into dw_* itself, as rt_moe_act_bwd does. */
static void moe_bwd(const char *fn, RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate,
                    rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up,
                    rt_act *ws, int64_t rows_max, const rt_act *h, const rt_act *gates,
                    const rt_act *w_gate, const rt_act *w_up, const rt_act *w_down,
                    const rt_act *b_gate, const rt_act *b_up, const rt_act *dy, int act,
                    int64_t tokens, int64_t d_model, int64_t gate_cols, int64_t e_local,
                    int64_t d_expert)
{
    check_args(fn, ep, tokens, d_model, gate_cols, e_local, d_expert);
    check_weights(fn, act, w_gate, b_gate);
    if ((!ws || dw_up || dw_down || dw_gate || db_gate || db_up) &&
        ((b_gate != NULL) != (db_gate != NULL) || (b_up != NULL) != (db_up != NULL) ||
         (w_gate != NULL) != (dw_gate != NULL) || !dw_up || !dw_down))
        rt_fatal("%s: a gradient for each weight and bias, and none for absent ones", fn);
    int64_t D = d_model, F = d_expert, W = 2 * D + 1;
    Plan P = plan_make(ep, gates, tokens, gate_cols, e_local);
    int64_t *row = send_rows(&P, gates, tokens);
    float *ps = fbuf(P.nsend * W);
    int64_t i = 0;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t e = 0; e < gate_cols; e++) {
            float g = gates[t * gate_cols + e];
            if (g == 0)
                continue;
            float *r = ps + row[i++] * W;
            memcpy(r, h + t * D, (size_t)D * sizeof(float));
            memcpy(r + D, dy + t * D, (size_t)D * sizeof(float));
            r[2 * D] = g;
        }
    float *pr = fbuf(P.nrecv * W), *pe = fbuf(P.nrecv * W);
    exchange(&P, pr, ps, W, false);
    permute(&P, pe, pr, W, true);
    int64_t R = P.nrecv;
    bool spill = ws && R > rows_max;
    if (spill && !dw_up)
        rt_fatal("%s: %lld routed rows reach this rank's experts, more than the W slot's %lld, and B has no "
                 "gradient accumulators to add them into (a slot without them holds the worst case)", fn,
                 (long long)R, (long long)rows_max);
    if (spill)
        flush(dw_gate, dw_up, dw_down, db_gate, db_up, w_gate != NULL, D, e_local, F);
    rt_act *slot = spill ? NULL : ws;
    /* unpacked expert-major operands (GEMMs want dense rows); under ZB-H1
     * those W reads are made in its slot */
    Slot sl = slot ? slot_of(slot, rows_max, D, F, w_gate != NULL) : (Slot){0};
    float *x = slot ? sl.x : fbuf(R * D), *gy = slot ? sl.gy : fbuf(R * D), *dyr = fbuf(R * D);
    float *a = sl.a ? sl.a : fbuf(R * F), *b = slot ? sl.b : fbuf(R * F);
    float *acts = slot ? sl.acts : fbuf(R * F), *u = fbuf(R * F);
    float *back = fbuf(R * (D + 1)), *dx = fbuf(R * D);
    for (int64_t q = 0; q < R; q++) {
        const float *r = pe + q * W;
        float g = r[2 * D];
        memcpy(x + q * D, r, (size_t)D * sizeof(float));
        memcpy(dyr + q * D, r + D, (size_t)D * sizeof(float));
        for (int64_t c = 0; c < D; c++) /* d(expert output) = gate * dy */
            gy[q * D + c] = g * r[D + c];
    }
    for (int64_t j = 0; j < e_local; j++) {
        int64_t n = P.ecnt[j], o = P.eoff[j];
        if (n == 0)
            continue;
        const float *wu = w_up + j * D * F, *wd = w_down + j * F * D;
        float *A = a + o * F, *B = b + o * F, *ACT = acts + o * F, *U = u + o * F;
        first_gemms(A, B, x + o * D, w_gate, w_up, b_gate, b_up, j, n, D, F);
        act_fwd(act, ACT, A, B, n * F);
        /* u = dy W_down^T: dgate = <u, act>; d(act) = gate u */
        rt_matmul(U, dyr + o * D, wd, n, F, D, false, true, false);
        for (int64_t q = 0; q < n; q++) {
            float s = 0, g = pe[(o + q) * W + 2 * D];
            for (int64_t c = 0; c < F; c++) {
                s += U[q * F + c] * ACT[q * F + c];
                U[q * F + c] *= g;
            }
            back[(o + q) * (D + 1) + D] = s;
        }
        act_bwd(act, A, B, U, n * F); /* A, B now da, db */
        if (!slot)
            expert_dw(dw_gate, dw_up, dw_down, db_gate, db_up, x + o * D, gy + o * D, ACT, A, B, j, n, D, F);
        if (w_gate) /* dx = da Wg^T + db Wu^T, in that order */
            rt_matmul(dx + o * D, A, w_gate + j * D * F, n, D, F, false, true, false);
        rt_matmul(dx + o * D, B, wu, n, D, F, false, true, w_gate != NULL);
    }
    for (int64_t q = 0; q < R; q++)
        memcpy(back + q * (D + 1), dx + q * D, (size_t)D * sizeof(float));
    float *br = fbuf(R * (D + 1)), *bs = fbuf(P.nsend * (D + 1));
    permute(&P, back, br, D + 1, false);
    exchange(&P, br, bs, D + 1, true);
    i = 0;
    for (int64_t t = 0; t < tokens; t++) {
        rt_act *dht = dh + t * D;
        memset(dht, 0, (size_t)D * sizeof *dht);
        for (int64_t e = 0; e < gate_cols; e++) {
            rt_act *dg = dgates + t * gate_cols + e;
            if (gates[t * gate_cols + e] == 0) {
                *dg = 0;
                continue;
            }
            const float *r = bs + row[i++] * (D + 1);
            for (int64_t c = 0; c < D; c++)
                dht[c] += r[c];
            *dg = r[D];
        }
    }
    if (ws)
        rtc_moe_wslot_put(ws, dw_down, P.ecnt, e_local, rows_max, !spill);
    float *all[] = {ps, pr, pe, dyr, u, back, dx, br, bs};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
        free(all[k]);
    float *own[] = {x, gy, a, b, acts};
    for (size_t k = 0; k < sizeof own / sizeof *own; k++)
        if (!slot || (own[k] != sl.x && own[k] != sl.gy && own[k] != sl.a && own[k] != sl.b &&
                    own[k] != sl.acts))
            free(own[k]);
    free(row);
    plan_free(&P);
}

void rt_moe_act_bwd(RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up,
                    rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up, const rt_act *h,
                    const rt_act *gates, const rt_act *w_gate, const rt_act *w_up,
                    const rt_act *w_down, const rt_act *b_gate, const rt_act *b_up,
                    const rt_act *dy, int act, int64_t tokens, int64_t d_model,
                    int64_t gate_cols, int64_t e_local, int64_t d_expert)
{
    moe_bwd("rt_moe_bwd", ep, dh, dgates, dw_gate, dw_up, dw_down, db_gate, db_up, NULL, 0, h, gates,
            w_gate, w_up, w_down, b_gate, b_up, dy, act, tokens, d_model, gate_cols, e_local, d_expert);
}

void rt_moe_act_bwd_b(RtComm *ep, rt_act *dh, rt_act *dgates, rt_grad *dw_gate, rt_grad *dw_up,
                      rt_grad *dw_down, rt_grad *db_gate, rt_grad *db_up, rt_act *wslot, int64_t rows_max,
                      const rt_act *h, const rt_act *gates, const rt_act *w_gate, const rt_act *w_up,
                      const rt_act *w_down, const rt_act *b_gate, const rt_act *b_up, const rt_act *dy,
                      int act, int64_t tokens, int64_t d_model, int64_t gate_cols, int64_t e_local,
                      int64_t d_expert)
{
    if (!wslot || rows_max < 0)
        rt_fatal("rt_moe_act_bwd_b: a W slot of rows_max >= 0 rows (got %p, %lld)", (void *)wslot,
                 (long long)rows_max);
    moe_bwd("rt_moe_act_bwd_b", ep, dh, dgates, dw_gate, dw_up, dw_down, db_gate, db_up, wslot, rows_max, h, gates,
            w_gate, w_up, w_down, b_gate, b_up, dy, act, tokens, d_model, gate_cols, e_local, d_expert);
}

void rt_moe_act_bwd_w(rt_grad *dw_gate, rt_grad *dw_up, rt_grad *dw_down, rt_grad *db_gate,
                      rt_grad *db_up, const rt_act *wslot, int64_t rows_max, int act, int64_t d_model,
                      int64_t e_local, int64_t d_expert)
{
    bool gated = act_gated("rt_moe_act_bwd_w", act);
    if (gated != (dw_gate != NULL) || (!gated && db_gate) || !dw_up || !dw_down)
        rt_fatal("rt_moe_act_bwd_w: a gradient for each weight of activation %d, and none for absent ones", act);
    const int64_t *cnt = rtc_moe_wslot_take("rt_moe_act_bwd_w", wslot, e_local, rows_max, true);
    if (cnt) /* else its B overflowed the slot, or a later one's did: done there */
        slot_dw(dw_gate, dw_up, dw_down, db_gate, db_up, wslot, rows_max, gated, d_model, e_local, d_expert, cnt);
}
