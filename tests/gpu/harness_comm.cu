/* harness_comm.cu: NCCL collectives, the dim helpers, point-to-point,
 * communicator splits and the vocabulary-parallel cross-entropy on >= 2 GPUs
 * (one rank per GPU, under mpirun). Every rank derives every rank's inputs
 * from the seed, so each computes the expected result on the host. */
#include "cpu_rt.h"
#include "harness.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

/* Deterministic value of element i of rank r's input, bf16-exact. */
static float val(uint64_t seed, int r, int64_t i)
{
    Rng g(seed * 1000003u + (uint64_t)r * 7919u + (uint64_t)i * 104729u);
    return bfr(g.uni());
}

static void t_collectives(uint64_t seed, RtComm *w)
{
    int P = rt_comm_size(w), me = rt_comm_rank(w);
    const int64_t n = 1000;
    std::vector<float> mine((size_t)n), sum((size_t)n, 0.0f), mx((size_t)n, -INFINITY);
    for (int64_t i = 0; i < n; i++) {
        mine[(size_t)i] = val(seed, me, i);
        for (int r = 0; r < P; r++) {
            sum[(size_t)i] += val(seed, r, i);
            mx[(size_t)i] = fmaxf(mx[(size_t)i], val(seed, r, i));
        }
    }
    float *f = df32(mine);
    rt_allreduce(w, f, n, RT_F32);
    report("allreduce f32", hf32(f, n), sum, TOL_F32);
    rt_to_device(f, mine.data(), (size_t)n * 4);
    rt_allreduce_max(w, f, n);
    report("allreduce_max f32", hf32(f, n), mx, 1e-7);
    rt_free(f);

    rt_act *a = dact(mine), *a2 = (rt_act *)rt_alloc((size_t)n * 2);
    rt_allreduce(w, a, n, RT_ACT);
    /* dependency: a kernel reading the result right after the collective */
    rt_add(a2, a, a, n, n);
    std::vector<float> twice(sum);
    for (auto &v : twice) v *= 2;
    report("allreduce bf16", hact(a, n), sum, TOL_BF16);
    report("allreduce bf16 then add (stream order)", hact(a2, n), twice, TOL_BF16);
    rt_free(a), rt_free(a2);

    std::vector<int32_t> iv((size_t)n);
    for (int64_t i = 0; i < n; i++) iv[(size_t)i] = (int32_t)(i * (me + 1));
    int32_t *di = di32(iv);
    rt_allreduce(w, di, n, RT_I32);
    std::vector<int32_t> ih((size_t)n);
    rt_to_host(ih.data(), di, (size_t)n * 4);
    bool ok = true;
    for (int64_t i = 0; i < n; i++) ok &= ih[(size_t)i] == (int32_t)(i * P * (P + 1) / 2);
    report_bool("allreduce i32", ok, "exact");
    rt_free(di);

    /* reduce_scatter: in = P blocks of m; rank keeps block me of the sum */
    const int64_t m = 123;
    std::vector<float> in((size_t)(m * P)), want((size_t)m, 0.0f);
    for (int64_t i = 0; i < m * P; i++) in[(size_t)i] = val(seed + 1, me, i);
    for (int64_t i = 0; i < m; i++)
        for (int r = 0; r < P; r++) want[(size_t)i] += val(seed + 1, r, me * m + i);
    float *din = df32(in), *dout = (float *)rt_alloc((size_t)(m * P) * 4);
    rt_reduce_scatter(w, dout, din, m, RT_F32);
    report("reduce_scatter f32", hf32(dout, m), want, TOL_F32);
    /* allgather: block r from rank r */
    std::vector<float> all((size_t)(m * P));
    for (int r = 0; r < P; r++)
        for (int64_t i = 0; i < m; i++) all[(size_t)(r * m + i)] = val(seed + 1, r, i);
    rt_allgather(w, dout, din, m, RT_F32);
    report("allgather f32", hf32(dout, m * P), all, 1e-7);
    /* alltoall: block r of in goes to rank r */
    std::vector<float> a2a((size_t)(m * P));
    for (int r = 0; r < P; r++)
        for (int64_t i = 0; i < m; i++) a2a[(size_t)(r * m + i)] = val(seed + 1, r, me * m + i);
    rt_alltoall(w, dout, din, m, RT_F32);
    report("alltoall f32", hf32(dout, m * P), a2a, 1e-7);
    /* bcast from the last rank */
    std::vector<float> root((size_t)m);
    for (int64_t i = 0; i < m; i++) root[(size_t)i] = val(seed + 1, P - 1, i);
    rt_bcast(w, din, m, RT_F32, P - 1);
    report("bcast f32 (root last)", hf32(din, m), root, 1e-7);
    rt_free(din), rt_free(dout);
}

/* Global tensor value at a flat index: bf16-exact. */
static float gval(uint64_t seed, int64_t i) { return val(seed, 99, i); }

static void t_dim_helpers(uint64_t seed, RtComm *w)
{
    int P = rt_comm_size(w), me = rt_comm_rank(w);
    char name[96];
    /* allgather_dim / reduce_scatter_dim over [outer, P*dl, inner] */
    for (int64_t outer : {1, 3}) {
        const int64_t dl = 2, inner = 5, d = P * dl, n = outer * d * inner, nl = outer * dl * inner;
        std::vector<float> glob((size_t)n), loc((size_t)nl);
        for (int64_t i = 0; i < n; i++) glob[(size_t)i] = gval(seed, i);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < dl; j++)
                for (int64_t k = 0; k < inner; k++)
                    loc[(size_t)((o * dl + j) * inner + k)] = glob[(size_t)((o * d + me * dl + j) * inner + k)];
        rt_act *dloc = dact(loc), *dout = (rt_act *)rt_alloc((size_t)n * 2), *scr = (rt_act *)rt_alloc((size_t)n * 2);
        rt_allgather_dim(w, dout, dloc, outer, dl, inner, scr);
        snprintf(name, sizeof name, "allgather_dim outer=%lld", (long long)outer);
        report(name, hact(dout, n), glob, 1e-7);
        /* every rank contributes glob scaled by (rank + 1): the sum is glob * P(P+1)/2 */
        std::vector<float> part((size_t)n), want((size_t)nl);
        for (int64_t i = 0; i < n; i++) part[(size_t)i] = glob[(size_t)i] * (float)(me + 1);
        for (int64_t i = 0; i < nl; i++) want[(size_t)i] = loc[(size_t)i] * (float)(P * (P + 1) / 2);
        rt_act *dpart = dact(part);
        rt_reduce_scatter_dim(w, dout, dpart, outer, dl, inner, scr);
        snprintf(name, sizeof name, "reduce_scatter_dim outer=%lld", (long long)outer);
        report(name, hact(dout, nl), want, TOL_BF16);
        rt_free(dloc), rt_free(dout), rt_free(scr), rt_free(dpart);
    }
    /* alltoall_dim over [outer, d1, mid, d2, inner], both directions */
    struct { int64_t outer, mid; } cases[] = {{1, 1}, {2, 3}, {1, 2}, {2, 1}};
    for (auto c : cases) {
        const int64_t outer = c.outer, mid = c.mid, d1 = 2 * P, d2 = 3 * P, inner = 4;
        const int64_t n = outer * d1 * mid * d2 * inner, nl = n / P;
        auto at = [&](int64_t o, int64_t a, int64_t m_, int64_t b, int64_t k) {
            return gval(seed + 5, (((o * d1 + a) * mid + m_) * d2 + b) * inner + k);
        };
        std::vector<float> s1((size_t)nl), s2((size_t)nl); /* split along d1, along d2 */
        int64_t i1 = 0, i2 = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t a = 0; a < d1 / P; a++)
                for (int64_t m_ = 0; m_ < mid; m_++)
                    for (int64_t b = 0; b < d2; b++)
                        for (int64_t k = 0; k < inner; k++) s1[(size_t)i1++] = at(o, me * (d1 / P) + a, m_, b, k);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t a = 0; a < d1; a++)
                for (int64_t m_ = 0; m_ < mid; m_++)
                    for (int64_t b = 0; b < d2 / P; b++)
                        for (int64_t k = 0; k < inner; k++) s2[(size_t)i2++] = at(o, a, m_, me * (d2 / P) + b, k);
        rt_act *d1p = dact(s1), *d2p = dact(s2), *dout = (rt_act *)rt_alloc((size_t)nl * 2);
        rt_act *scr = (rt_act *)rt_alloc((size_t)nl * 2);
        rt_alltoall_dim(w, dout, d1p, outer, d1, mid, d2, inner, true, scr);
        snprintf(name, sizeof name, "alltoall_dim to_second outer=%lld mid=%lld", (long long)outer, (long long)mid);
        report(name, hact(dout, nl), s2, 1e-7);
        rt_alltoall_dim(w, dout, d2p, outer, d1, mid, d2, inner, false, scr);
        snprintf(name, sizeof name, "alltoall_dim reverse outer=%lld mid=%lld", (long long)outer, (long long)mid);
        report(name, hact(dout, nl), s1, 1e-7);
        rt_free(d1p), rt_free(d2p), rt_free(dout), rt_free(scr);
    }
}

static void t_p2p_split(uint64_t seed, RtComm *w)
{
    int P = rt_comm_size(w), me = rt_comm_rank(w);
    const int64_t n = 777;
    int next = (me + 1) % P, prev = (me + P - 1) % P;
    std::vector<float> a((size_t)n), b((size_t)n), wa((size_t)n), wb((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        a[(size_t)i] = val(seed + 2, me, i);
        b[(size_t)i] = val(seed + 3, me, i);
        wa[(size_t)i] = val(seed + 2, prev, i);
        wb[(size_t)i] = val(seed + 3, prev, i);
    }
    float *sa = df32(a), *sb = df32(b), *ra = (float *)rt_alloc((size_t)n * 4), *rb = (float *)rt_alloc((size_t)n * 4);
    /* both ranks send first, then receive; two messages in order to one peer */
    RtReq *q1 = rt_isend(w, sa, n, RT_F32, next, 0);
    RtReq *q2 = rt_isend(w, sb, n, RT_F32, next, 1);
    RtReq *q3 = rt_irecv(w, ra, n, RT_F32, prev, 0);
    RtReq *q4 = rt_irecv(w, rb, n, RT_F32, prev, 1);
    rt_wait(q1), rt_wait(q2), rt_wait(q3), rt_wait(q4);
    report("isend/irecv ring, message 1", hf32(ra, n), wa, 1e-7);
    report("isend/irecv ring, message 2", hf32(rb, n), wb, 1e-7);
    rt_free(sa), rt_free(sb), rt_free(ra), rt_free(rb);

    /* split: odd and even ranks, ordered by descending world rank */
    RtComm *c = rt_comm_split(me % 2, -me);
    int members = (P - me % 2 + 1) / 2, pos = 0;
    for (int r = P - 1; r > me; r--) pos += r % 2 == me % 2;
    char detail[64];
    snprintf(detail, sizeof detail, "rank %d of %d", rt_comm_rank(c), rt_comm_size(c));
    report_bool("comm_split rank and size", rt_comm_rank(c) == pos && rt_comm_size(c) == members, detail);
    std::vector<int32_t> one = {me};
    int32_t *d = di32(one);
    rt_allreduce(c, d, 1, RT_I32);
    int32_t got = 0, want = 0;
    rt_to_host(&got, d, 4);
    for (int r = me % 2; r < P; r += 2) want += r;
    report_bool("allreduce on a split", got == want, "exact");
    rt_free(d);
    RtComm *none = rt_comm_split(me == 0 ? -1 : 0, me);
    report_bool("comm_split color < 0", me == 0 ? none == NULL : none != NULL, "NULL for non-members");
}

/* Non-blocking collectives on the communicator's stream: several in flight,
 * a group, an in-place all-gather, a kernel reading a result right after
 * rt_wait (stream order, no host wait); point-to-point on a
 * rt_comm_split_p2p communicator with every send posted before any receive;
 * a split equal to the world (shares its NCCL communicator) and one of a
 * single rank (none). */
static void t_nonblocking(uint64_t seed, RtComm *w)
{
    int P = rt_comm_size(w), me = rt_comm_rank(w);
    const int64_t n = 1500, m = 97;
    std::vector<float> sum((size_t)n, 0.0f), mine((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        mine[(size_t)i] = val(seed + 11, me, i);
        for (int r = 0; r < P; r++) sum[(size_t)i] += val(seed + 11, r, i);
    }
    float *a = df32(mine), *b = df32(mine);
    RtReq *qa = rt_iallreduce(w, a, n, RT_F32), *qb = rt_iallreduce(w, b, n, RT_F32);
    /* reduce-scatter and in-place all-gather in one group */
    std::vector<float> in((size_t)(m * P)), want((size_t)m, 0.0f), all((size_t)(m * P));
    for (int64_t i = 0; i < m * P; i++) in[(size_t)i] = val(seed + 12, me, i);
    for (int64_t i = 0; i < m; i++)
        for (int r = 0; r < P; r++) want[(size_t)i] += val(seed + 12, r, me * m + i);
    for (int r = 0; r < P; r++)
        for (int64_t i = 0; i < m; i++) all[(size_t)(r * m + i)] = val(seed + 13, r, i);
    std::vector<float> blk((size_t)(m * P), 0.0f);
    for (int64_t i = 0; i < m; i++) blk[(size_t)(me * m + i)] = val(seed + 13, me, i);
    float *din = df32(in), *dout = (float *)rt_alloc((size_t)m * 4), *dag = df32(blk);
    rt_group_begin();
    RtReq *qr = rt_ireduce_scatter(w, dout, din, m, RT_F32);
    RtReq *qg = rt_iallgather(w, dag, dag + me * m, m, RT_F32);
    rt_group_end();
    rt_wait(qb);
    rt_wait(qa);
    rt_wait(qg);
    rt_wait(qr);
    report("iallreduce f32", hf32(a, n), sum, TOL_F32);
    report("iallreduce f32 (second in flight)", hf32(b, n), sum, TOL_F32);
    report("ireduce_scatter f32 (group)", hf32(dout, m), want, TOL_F32);
    report("iallgather f32 in place (group)", hf32(dag, m * P), all, 1e-7);
    rt_act *x = dact(mine), *y = (rt_act *)rt_alloc((size_t)n * 2);
    RtReq *qx = rt_iallreduce(w, x, n, RT_ACT);
    rt_wait(qx);
    rt_add(y, x, x, n, n); /* ordered after the collective by rt_wait alone */
    std::vector<float> twice(sum);
    for (auto &v : twice) v *= 2;
    report("iallreduce bf16, then a kernel", hact(y, n), twice, TOL_BF16);
    rt_free(a), rt_free(b), rt_free(din), rt_free(dout), rt_free(dag), rt_free(x), rt_free(y);

    /* point-to-point channels: every rank sends to both neighbours first */
    RtComm *pc = rt_comm_split_p2p(0, me);
    int next = (me + 1) % P, prev = (me + P - 1) % P;
    const int64_t k = 333;
    std::vector<float> up((size_t)k), dn((size_t)k), wup((size_t)k), wdn((size_t)k);
    for (int64_t i = 0; i < k; i++) {
        up[(size_t)i] = val(seed + 14, me, i);
        dn[(size_t)i] = val(seed + 15, me, i);
        wup[(size_t)i] = val(seed + 14, prev, i);
        wdn[(size_t)i] = val(seed + 15, next, i);
    }
    float *su = df32(up), *sd = df32(dn), *ru = (float *)rt_alloc((size_t)k * 4), *rd = (float *)rt_alloc((size_t)k * 4);
    RtReq *q1 = rt_isend(pc, su, k, RT_F32, next, 0);
    RtReq *q2 = rt_isend(pc, sd, k, RT_F32, prev, 1);
    RtReq *q3 = rt_irecv(pc, ru, k, RT_F32, prev, 0);
    RtReq *q4 = rt_irecv(pc, rd, k, RT_F32, next, 1);
    rt_wait(q1), rt_wait(q2), rt_wait(q3), rt_wait(q4);
    report("p2p channels: ring up", hf32(ru, k), wup, 1e-7);
    report("p2p channels: ring down", hf32(rd, k), wdn, 1e-7);
    rt_free(su), rt_free(sd), rt_free(ru), rt_free(rd);

    RtComm *same = rt_comm_split(0, me), *self = rt_comm_split(me, 0);
    std::vector<int32_t> one = {me + 1};
    int32_t *d = di32(one), *d1 = di32(one);
    rt_allreduce(same, d, 1, RT_I32);
    rt_allreduce(self, d1, 1, RT_I32);
    int32_t got = 0, got1 = 0;
    rt_to_host(&got, d, 4);
    rt_to_host(&got1, d1, 4);
    report_bool("split equal to the world", got == P * (P + 1) / 2 && rt_comm_size(same) == P, "shared communicator");
    report_bool("split of one rank", got1 == me + 1 && rt_comm_size(self) == 1, "local");
    rt_free(d), rt_free(d1);
}

static void t_vocab_ce(uint64_t seed, RtComm *w)
{
    int P = rt_comm_size(w), me = rt_comm_rank(w);
    const int64_t rows = 19, vl = 250, V = vl * P, total = rows;
    Rng g(seed + 7);
    auto logits = randv(g, rows * V, 6.0f);
    std::vector<int32_t> tg((size_t)rows);
    for (auto &t : tg) t = (int32_t)g.below(V);
    std::vector<float> lse((size_t)rows), dl((size_t)(rows * V)), mine((size_t)(rows * vl)), dmine((size_t)(rows * vl));
    float loss = 0.0f;
    cpu_rt_cross_entropy_fwd(&loss, lse.data(), logits.data(), tg.data(), rows, V, 0, total, 1.0f, NULL);
    cpu_rt_cross_entropy_bwd(dl.data(), logits.data(), tg.data(), lse.data(), 1.0f, rows, V, 0, total);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < vl; j++) {
            mine[(size_t)(r * vl + j)] = logits[(size_t)(r * V + me * vl + j)];
            dmine[(size_t)(r * vl + j)] = dl[(size_t)(r * V + me * vl + j)];
        }
    rt_act *dlog = dact(mine), *ddl = (rt_act *)rt_alloc(mine.size() * 2);
    int32_t *dtg = di32(tg);
    float *dloss = df32(std::vector<float>{0.0f}), *dlse = (float *)rt_alloc((size_t)rows * 4);
    rt_cross_entropy_fwd(dloss, dlse, dlog, dtg, rows, vl, me * vl, total, 1.0f, w);
    report("cross_entropy vocab-parallel loss (fp32)", hf32(dloss, 1), std::vector<float>{loss}, TOL_F32);
    report("cross_entropy vocab-parallel lse (fp32)", hf32(dlse, rows), lse, TOL_F32);
    rt_cross_entropy_bwd(ddl, dlog, dtg, dlse, 1.0f, rows, vl, me * vl, total);
    report("cross_entropy vocab-parallel dlogits", hact(ddl, rows * vl), dmine, TOL_BF16);
    rt_free(dlog), rt_free(ddl), rt_free(dtg), rt_free(dloss), rt_free(dlse);
}

/* Ring attention (rt_attention_ring_fwd/bwd) over the world as the cp
 * group, on a rt_comm_split_p2p communicator: each rank's o, lse, dq and its
 * own keys' dk, dv against the CPU backend's whole-sequence attention on the
 * same bf16 inputs, rows picked by position. */
static void t_ring_attention(uint64_t seed, int64_t S, int64_t H, int64_t KVH, int64_t D, bool causal,
                             int64_t W, bool balanced)
{
    RtComm *pc = rt_comm_split_p2p(0, rt_world_rank());
    const int64_t P = rt_comm_size(pc), me = rt_comm_rank(pc), B = 2;
    const int64_t per = balanced ? 2 : 1, nc = P * per, ch = S / nc, Sl = per * ch;
    Rng g(seed + 31);
    const int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    auto q = randv(g, nq, 2.0f), k = randv(g, nk, 2.0f), v = randv(g, nk), dout = randv(g, nq);
    std::vector<float> o((size_t)nq), lse((size_t)nl), dq((size_t)nq), dk((size_t)nk), dv((size_t)nk);
    cpu_rt_attention_fwd(o.data(), lse.data(), q.data(), k.data(), v.data(), B, S, H, KVH, D, causal, W);
    cpu_rt_attention_bwd(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(), lse.data(),
                         dout.data(), B, S, H, KVH, D, causal, W);
    int64_t pos[2 * 64];
    for (int64_t r = 0; r < P; r++)
        for (int64_t i = 0; i < per; i++) pos[r * per + i] = (balanced && i ? nc - 1 - r : r) * ch;
    /* this rank's rows of a [B, S, X] tensor */
    auto mine = [&](const std::vector<float> &t, int64_t X) {
        std::vector<float> m((size_t)(B * Sl * X));
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < per; i++)
                for (int64_t j = 0; j < ch * X; j++)
                    m[(size_t)((b * Sl + i * ch) * X + j)] = t[(size_t)((b * S + pos[me * per + i]) * X + j)];
        return m;
    };
    rt_act *dqq = dact(mine(q, H * D)), *dkk = dact(mine(k, KVH * D)), *dvv = dact(mine(v, KVH * D));
    rt_act *ddo = dact(mine(dout, H * D));
    const int64_t lq = B * Sl * H * D, lk = B * Sl * KVH * D, ll = B * Sl * H;
    rt_act *doo = (rt_act *)rt_alloc((size_t)lq * 2), *ddq = (rt_act *)rt_alloc((size_t)lq * 2);
    rt_act *ddk = (rt_act *)rt_alloc((size_t)lk * 2), *ddv = (rt_act *)rt_alloc((size_t)lk * 2);
    float *dl = (float *)rt_alloc((size_t)ll * 4);
    void *scratch = rt_alloc(rt_attention_ring_scratch(B, Sl, H, KVH, D));
    rt_attention_ring_fwd(pc, doo, dl, dqq, dkk, dvv, B, Sl, H, KVH, D, causal, W, ch, (int)per, pos, scratch);
    rt_attention_ring_bwd(pc, ddq, ddk, ddv, dqq, dkk, dvv, doo, dl, ddo, B, Sl, H, KVH, D, causal, W, ch, (int)per,
                          pos, scratch);
    char name[200];
    static const char *what[5] = {"o  ", "lse", "dq ", "dk ", "dv "};
    std::vector<float> got[5] = {hact(doo, lq), hf32(dl, ll), hact(ddq, lq), hact(ddk, lk), hact(ddv, lk)};
    std::vector<float> want[5] = {mine(o, H * D), mine(lse, H), mine(dq, H * D), mine(dk, KVH * D), mine(dv, KVH * D)};
    for (int x = 0; x < 5; x++) {
        snprintf(name, sizeof name, "ring attention %s cp%lld %s chunk %lld S%lld H%lld KVH%lld D%lld%s window %lld",
                 what[x], (long long)P, balanced ? "bal" : "contig", (long long)ch, (long long)S, (long long)H,
                 (long long)KVH, (long long)D, causal ? " causal" : "", (long long)W);
        report(name, got[x], want[x], x == 1 ? TOL_F32 : TOL_BF16);
    }
    rt_free(dqq), rt_free(dkk), rt_free(dvv), rt_free(ddo), rt_free(doo), rt_free(ddq), rt_free(ddk), rt_free(ddv);
    rt_free(dl), rt_free(scratch);
}


int run_comm_tests(uint64_t seed)
{
    RtComm *w = rt_comm_world();
    t_collectives(seed, w);
    t_dim_helpers(seed, w);
    t_p2p_split(seed, w);
    t_nonblocking(seed, w);
    t_vocab_ce(seed, w);
    /* Also under the emulator: its streams run transfers asynchronously to
     * the host, as a GPU does (a ring that posts the next block's receive
     * before its compute needs that). */
    {
        const int64_t P = rt_comm_size(w);
        t_ring_attention(seed, 16 * P, 4, 2, 16, true, 5, true);  /* a window inside a chunk */
        t_ring_attention(seed, 12 * P, 2, 1, 64, true, 0, false); /* tensor cores, contiguous */
        t_ring_attention(seed, 4 * P, 2, 2, 64, false, 0, true);  /* full mask */
    }
    /* failures anywhere fail everywhere */
    std::vector<int32_t> f = {g_failures};
    int32_t *d = di32(f);
    rt_allreduce(w, d, 1, RT_I32);
    int32_t total = 0;
    rt_to_host(&total, d, 4);
    rt_free(d);
    return total;
}

/* Rank 0 enters a collective rank 1 never joins: the watchdog
 * (PTDC_NCCL_TIMEOUT) must abort the job. Returning is a failure. */
int run_hang_test(void)
{
    RtComm *w = rt_comm_world();
    float *d = df32(std::vector<float>(16, 1.0f));
    if (rt_comm_rank(w) == 0) {
        rt_allreduce(w, d, 16, RT_F32);
        float h[16];
        rt_to_host(h, d, sizeof h);
    } else {
        sleep(120);
    }
    fprintf(stderr, "hang: rank %d returned; the watchdog did not fire\n", rt_comm_rank(w));
    return 1;
}
