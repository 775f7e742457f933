/* harness_attn.cu: attention against the CPU backend (tensor-core and
 * CUDA-core paths, causal, full, sliding windows, grouped-query heads, odd
 * lengths, batches; rows at chunked positions for context parallelism),
 * bitwise repeatability, the one-time fallback warnings,
 * and (under the emulator) the shared-memory bank-conflict table. */
#include "cpu_rt.h"
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <string>

/* runtime/cuda test hook: 1 forces the CUDA-core kernels, 0 allows the
 * tensor-core ones, -1 reads PTDC_ATTENTION again. */
extern "C" void rtcu_attention_force_generic(int on);
/* 1 the deterministic two-kernel backward, 0 the one that adds dQ with
 * atomics, -1 reads PTDC_ATTENTION_DETERMINISTIC again. */
extern "C" void rtcu_attention_deterministic(int on);

static bool tc_dim(int64_t D) { return D == 64 || D == 80 || D == 96 || D == 128; }

static bool same_bits(const std::vector<float> &a, const std::vector<float> &b)
{
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct AttnCase {
    int64_t B, S, H, KVH, D;
    bool causal;
    int64_t window;
};

/* One case, forward and backward, against the CPU backend on the same
 * bf16-rounded inputs; then the same call again must give the same bits
 * (dQ of the atomic tensor-core backward: the same values within bf16
 * rounding, its additions' order being the hardware's). */
static void t_attention(Rng &r, const AttnCase &c, bool generic, bool determ = false)
{
    const int64_t B = c.B, S = c.S, H = c.H, KVH = c.KVH, D = c.D, W = c.window;
    rtcu_attention_force_generic(generic);
    rtcu_attention_deterministic(determ);
    bool tc = !generic && tc_dim(D);
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    auto q = randv(r, nq, 2.0f), k = randv(r, nk, 2.0f), v = randv(r, nk), dout = randv(r, nq);
    std::vector<float> o((size_t)nq), lse((size_t)nl), dq((size_t)nq), dk((size_t)nk), dv((size_t)nk);
    rt_act *dqq = dact(q), *dkk = dact(k), *dvv = dact(v), *ddo = dact(dout);
    rt_act *doo = (rt_act *)rt_alloc((size_t)nq * 2), *ddq = (rt_act *)rt_alloc((size_t)nq * 2);
    rt_act *ddk = (rt_act *)rt_alloc((size_t)nk * 2), *ddv = (rt_act *)rt_alloc((size_t)nk * 2);
    float *dl = (float *)rt_alloc((size_t)nl * 4);
    rt_attention_fwd(doo, dl, dqq, dkk, dvv, B, S, H, KVH, D, c.causal, W);
    /* The CPU backward reads the CPU forward's o; the GPU its own (bf16). */
    cpu_rt_attention_fwd(o.data(), lse.data(), q.data(), k.data(), v.data(), B, S, H, KVH, D, c.causal, W);
    char tag[112], name[176], wt[32] = "";
    if (W) snprintf(wt, sizeof wt, " window %lld", (long long)W);
    snprintf(tag, sizeof tag, "B%lld S%lld H%lld KVH%lld D%lld%s%s %s", (long long)B, (long long)S, (long long)H,
             (long long)KVH, (long long)D, c.causal ? " causal" : "", wt,
             !tc ? "cuda-core" : determ ? "tc deterministic" : "tc");
    auto go = hact(doo, nq), gl = hf32(dl, nl);
    snprintf(name, sizeof name, "attention_fwd o    %s", tag);
    report(name, go, o, TOL_BF16);
    snprintf(name, sizeof name, "attention_fwd lse  %s (fp32)", tag);
    report(name, gl, lse, TOL_F32);
    rt_attention_bwd(ddq, ddk, ddv, dqq, dkk, dvv, doo, dl, ddo, B, S, H, KVH, D, c.causal, W);
    cpu_rt_attention_bwd(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(), lse.data(),
                         dout.data(), B, S, H, KVH, D, c.causal, W);
    auto gq = hact(ddq, nq), gk = hact(ddk, nk), gv = hact(ddv, nk);
    snprintf(name, sizeof name, "attention_bwd dq   %s", tag);
    report(name, gq, dq, TOL_BF16);
    snprintf(name, sizeof name, "attention_bwd dk   %s", tag);
    report(name, gk, dk, TOL_BF16);
    snprintf(name, sizeof name, "attention_bwd dv   %s", tag);
    report(name, gv, dv, TOL_BF16);
    /* Determinism: the same inputs give the same bits (outputs zeroed in
     * between, so a kernel that skips a write cannot pass). */
    rt_zero(doo, (size_t)nq * 2), rt_zero(dl, (size_t)nl * 4);
    rt_zero(ddq, (size_t)nq * 2), rt_zero(ddk, (size_t)nk * 2), rt_zero(ddv, (size_t)nk * 2);
    rt_attention_fwd(doo, dl, dqq, dkk, dvv, B, S, H, KVH, D, c.causal, W);
    rt_attention_bwd(ddq, ddk, ddv, dqq, dkk, dvv, doo, dl, ddo, B, S, H, KVH, D, c.causal, W);
    auto gq2 = hact(ddq, nq);
    bool atomic_dq = tc && !determ;
    bool same = same_bits(go, hact(doo, nq)) && same_bits(gl, hf32(dl, nl)) && (atomic_dq || same_bits(gq, gq2)) &&
                same_bits(gk, hact(ddk, nk)) && same_bits(gv, hact(ddv, nk));
    snprintf(name, sizeof name, "attention repeat %s", tag);
    report_bool(name, same, atomic_dq ? "bitwise equal o lse dk dv" : "bitwise equal o lse dq dk dv");
    if (atomic_dq) {
        snprintf(name, sizeof name, "attention repeat dq %s", tag);
        report(name, gq2, gq, TOL_BF16);
    }
    rt_free(dqq), rt_free(dkk), rt_free(dvv), rt_free(ddo), rt_free(doo), rt_free(ddq), rt_free(ddk), rt_free(ddv);
    rt_free(dl);
    rtcu_attention_force_generic(-1);
    rtcu_attention_deterministic(-1);
}

void run_attention_tests(Rng &r)
{
    /* Odd lengths (not multiples of any tile), batches, grouped-query heads
     * (H / KVH = 1, 2, 3), windows narrower and wider than a tile, wider
     * than the sequence (= causal), of 1 (the diagonal only), and long
     * enough sequences that tiles are skipped on both sides of the band.
     * Window 2 puts the band's edges one row into a tile for every tiling
     * (query 128 sees keys 127 and 128; key 127 is seen by queries 127 and
     * 128), so a tile range one row short loses half of a row's terms. */
    const AttnCase tc[] = {
        {2, 100, 4, 2, 64, true, 0},  {1, 70, 2, 1, 64, false, 0},  {1, 200, 2, 2, 64, true, 37},
        {1, 260, 2, 1, 64, true, 2},  {1, 150, 2, 1, 80, true, 0},  {2, 33, 2, 2, 80, false, 0},
        {1, 90, 3, 1, 80, true, 1},   {1, 64, 3, 3, 96, true, 0},   {1, 130, 2, 1, 96, true, 50},
        {1, 47, 2, 2, 96, false, 0},  {1, 130, 4, 4, 128, true, 0}, {2, 65, 6, 2, 128, false, 0},
        {1, 260, 2, 1, 128, true, 2}, {1, 200, 2, 1, 128, true, 66}, {1, 40, 2, 1, 128, true, 1000},
    };
    for (const AttnCase &c : tc) t_attention(r, c, false);
    /* The deterministic two-kernel backward (PTDC_ATTENTION_DETERMINISTIC=1),
     * every head dim, with windows, grouped heads and odd lengths. */
    const AttnCase det[] = {
        {2, 100, 4, 2, 64, true, 0}, {1, 150, 2, 1, 80, true, 0},  {1, 130, 2, 1, 96, true, 50},
        {2, 65, 6, 2, 128, false, 0}, {1, 260, 2, 1, 128, true, 2},
    };
    for (const AttnCase &c : det) t_attention(r, c, false, true);
    /* The CUDA-core kernels: forced for served head dims, and the head dims
     * only they serve (these warn once that they fall back). */
    const AttnCase generic[] = {
        {2, 100, 4, 2, 64, true, 0}, {1, 70, 2, 1, 64, false, 0}, {1, 130, 2, 2, 128, true, 40},
        {2, 65, 6, 2, 128, false, 0},
    };
    for (const AttnCase &c : generic) t_attention(r, c, true);
    const AttnCase other[] = {
        {2, 45, 4, 2, 16, true, 0}, {2, 40, 6, 2, 40, true, 0}, {1, 20, 2, 2, 200, false, 0},
        {1, 77, 2, 1, 32, true, 9},
    };
    for (const AttnCase &c : other) t_attention(r, c, false);
    run_attention_pos_tests(r);
}

/* ------------------------------------------- attention over positions */
/* rt_attention_pos_fwd/bwd (context parallelism): the sequence split over
 * cp ranks, contiguously or load-balanced (2 cp chunks, rank r holding r
 * and 2 cp - 1 - r), K and V all-gathered in rank order. Each rank's call
 * runs on the GPU and on the CPU backend with the same inputs and is
 * compared there (the CPU backend's own test, tests/runtime/
 * test_attention_pos.c, checks these against single-device attention). */
struct PosCase {
    AttnCase a;
    int64_t cp;
    bool balanced, generic, determ;
};

static void t_attention_pos(Rng &r, const PosCase &pc)
{
    const AttnCase &c = pc.a;
    const int64_t B = c.B, S = c.S, H = c.H, KVH = c.KVH, D = c.D, W = c.window;
    rtcu_attention_force_generic(pc.generic);
    rtcu_attention_deterministic(pc.determ);
    bool tc = !pc.generic && tc_dim(D);
    const int64_t per = pc.balanced ? 2 : 1, nc = pc.cp * per, ch = S / nc, Sl = per * ch;
    const int64_t nk = B * S * KVH * D, lq = B * Sl * H * D, ll = B * Sl * H;
    auto k = randv(r, nk, 2.0f), v = randv(r, nk);
    rt_act *dkk = dact(k), *dvv = dact(v);
    int64_t own[RT_ATTN_MAX_CHUNKS], kpos[RT_ATTN_MAX_CHUNKS];
    for (int64_t x = 0; x < nc; x++) {
        int64_t rk = x / per;
        own[x] = pc.balanced ? (x % per ? nc - 1 - rk : rk) : rk;
        kpos[x] = own[x] * ch;
    }
    rt_act *doo = (rt_act *)rt_alloc((size_t)lq * 2), *ddq = (rt_act *)rt_alloc((size_t)lq * 2);
    rt_act *ddk = (rt_act *)rt_alloc((size_t)nk * 2), *ddv = (rt_act *)rt_alloc((size_t)nk * 2);
    float *dl = (float *)rt_alloc((size_t)ll * 4);
    char tag[160], name[224], wt[32] = "";
    if (W) snprintf(wt, sizeof wt, " window %lld", (long long)W);
    snprintf(tag, sizeof tag, "cp%lld %s chunk %lld B%lld S%lld H%lld KVH%lld D%lld%s%s %s", (long long)pc.cp,
             pc.balanced ? "bal" : "contig", (long long)ch, (long long)B, (long long)S, (long long)H, (long long)KVH,
             (long long)D, c.causal ? " causal" : "", wt, !tc ? "cuda-core" : pc.determ ? "tc deterministic" : "tc");
    for (int64_t rk = 0; rk < pc.cp; rk++) {
        /* This rank's rows (the all-gathered K and V are the same for all). */
        auto q = randv(r, lq, 2.0f), dout = randv(r, lq);
        rt_act *dqq = dact(q), *ddo = dact(dout);
        std::vector<float> o((size_t)lq), lse((size_t)ll), dq((size_t)lq), dk((size_t)nk), dv((size_t)nk);
        const int64_t *qp = kpos + rk * per;
        rt_attention_pos_fwd(doo, dl, dqq, dkk, dvv, B, Sl, S, H, KVH, D, c.causal, W, ch, qp, kpos);
        cpu_rt_attention_pos_fwd(o.data(), lse.data(), q.data(), k.data(), v.data(), B, Sl, S, H, KVH, D, c.causal,
                                 W, ch, qp, kpos);
        rt_attention_pos_bwd(ddq, ddk, ddv, dqq, dkk, dvv, doo, dl, ddo, B, Sl, S, H, KVH, D, c.causal, W, ch, qp,
                             kpos);
        cpu_rt_attention_pos_bwd(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(),
                                 lse.data(), dout.data(), B, Sl, S, H, KVH, D, c.causal, W, ch, qp, kpos);
        static const char *what[5] = {"o  ", "lse", "dq ", "dk ", "dv "};
        std::vector<float> got[5] = {hact(doo, lq), hf32(dl, ll), hact(ddq, lq), hact(ddk, nk), hact(ddv, nk)};
        const std::vector<float> *want[5] = {&o, &lse, &dq, &dk, &dv};
        for (int x = 0; x < 5; x++) {
            snprintf(name, sizeof name, "attention_pos %s rank %lld %s", what[x], (long long)rk, tag);
            report(name, got[x], *want[x], x == 1 ? TOL_F32 : TOL_BF16);
        }
        rt_free(dqq), rt_free(ddo);
    }
    rt_free(dkk), rt_free(dvv), rt_free(doo), rt_free(ddq), rt_free(ddk), rt_free(ddv), rt_free(dl);
    rtcu_attention_force_generic(-1);
    rtcu_attention_deterministic(-1);
}

/* One chunk of S rows at position 0 each side is rt_attention_fwd/bwd, bit
 * for bit (dq too unless the backward adds it with atomics). */
static void t_attention_pos_one(Rng &r, const AttnCase &c, bool generic)
{
    const int64_t B = c.B, S = c.S, H = c.H, KVH = c.KVH, D = c.D, W = c.window;
    rtcu_attention_force_generic(generic);
    rtcu_attention_deterministic(0);
    bool atomic_dq = !generic && tc_dim(D);
    int64_t nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H, zero[1] = {0};
    rt_act *dqq = dact(randv(r, nq, 2.0f)), *dkk = dact(randv(r, nk, 2.0f)), *dvv = dact(randv(r, nk));
    rt_act *ddo = dact(randv(r, nq));
    std::vector<float> out[2][5];
    for (int pos = 0; pos < 2; pos++) {
        rt_act *doo = (rt_act *)rt_alloc((size_t)nq * 2), *ddq = (rt_act *)rt_alloc((size_t)nq * 2);
        rt_act *ddk = (rt_act *)rt_alloc((size_t)nk * 2), *ddv = (rt_act *)rt_alloc((size_t)nk * 2);
        float *dl = (float *)rt_alloc((size_t)nl * 4);
        if (pos) {
            rt_attention_pos_fwd(doo, dl, dqq, dkk, dvv, B, S, S, H, KVH, D, c.causal, W, S, zero, zero);
            rt_attention_pos_bwd(ddq, ddk, ddv, dqq, dkk, dvv, doo, dl, ddo, B, S, S, H, KVH, D, c.causal, W, S, zero,
                                 zero);
        } else {
            rt_attention_fwd(doo, dl, dqq, dkk, dvv, B, S, H, KVH, D, c.causal, W);
            rt_attention_bwd(ddq, ddk, ddv, dqq, dkk, dvv, doo, dl, ddo, B, S, H, KVH, D, c.causal, W);
        }
        out[pos][0] = hact(doo, nq), out[pos][1] = hf32(dl, nl), out[pos][2] = hact(ddq, nq);
        out[pos][3] = hact(ddk, nk), out[pos][4] = hact(ddv, nk);
        rt_free(doo), rt_free(ddq), rt_free(ddk), rt_free(ddv), rt_free(dl);
    }
    bool same = true;
    for (int x = 0; x < 5; x++)
        if (x != 2 || !atomic_dq) same = same && same_bits(out[0][x], out[1][x]);
    char name[160];
    snprintf(name, sizeof name, "attention_pos one chunk = plain S%lld D%lld%s %s", (long long)S, (long long)D,
             c.causal ? " causal" : "", generic ? "cuda-core" : "tc");
    report_bool(name, same, atomic_dq ? "bitwise o lse dk dv" : "bitwise o lse dq dk dv");
    if (atomic_dq) {
        snprintf(name, sizeof name, "attention_pos one chunk dq S%lld D%lld", (long long)S, (long long)D);
        report(name, out[1][2], out[0][2], TOL_BF16);
    }
    rt_free(dqq), rt_free(dkk), rt_free(dvv), rt_free(ddo);
    rtcu_attention_force_generic(-1);
    rtcu_attention_deterministic(-1);
}

/* Queries at 0 .. 2c-1 against keys at 5 .. 5+c-1 and 3c .. 4c-1 (causal):
 * queries before 5 see nothing (o = 0, lse = -inf, dq = 0) and the later
 * key chunk nobody (dk = dv = 0); the rest as the CPU backend has it. */
static void t_attention_pos_unseen(Rng &r, int64_t D, bool generic)
{
    rtcu_attention_force_generic(generic);
    rtcu_attention_deterministic(0);
    const int64_t B = 1, c = 40, Sq = 2 * c, Sk = 2 * c, H = 2, KVH = 1;
    const int64_t nq = B * Sq * H * D, nk = B * Sk * KVH * D, nl = B * Sq * H, qpos[2] = {0, c}, kpos[2] = {5, 3 * c};
    auto q = randv(r, nq, 2.0f), k = randv(r, nk, 2.0f), v = randv(r, nk), dout = randv(r, nq);
    rt_act *dqq = dact(q), *dkk = dact(k), *dvv = dact(v), *ddo = dact(dout);
    rt_act *doo = (rt_act *)rt_alloc((size_t)nq * 2), *ddq = (rt_act *)rt_alloc((size_t)nq * 2);
    rt_act *ddk = (rt_act *)rt_alloc((size_t)nk * 2), *ddv = (rt_act *)rt_alloc((size_t)nk * 2);
    float *dl = (float *)rt_alloc((size_t)nl * 4);
    rt_attention_pos_fwd(doo, dl, dqq, dkk, dvv, B, Sq, Sk, H, KVH, D, true, 0, c, qpos, kpos);
    rt_attention_pos_bwd(ddq, ddk, ddv, dqq, dkk, dvv, doo, dl, ddo, B, Sq, Sk, H, KVH, D, true, 0, c, qpos, kpos);
    auto go = hact(doo, nq), gl = hf32(dl, nl), gq = hact(ddq, nq), gk = hact(ddk, nk), gv = hact(ddv, nk);
    int bad = 0;
    for (int64_t i = 0; i < Sq; i++)
        for (int64_t h = 0; h < H; h++) {
            int64_t row = i * H + h;
            bool none = i < 5;
            if (none != (gl[row] == -INFINITY)) bad++;
            for (int64_t d = 0; d < D; d++) {
                float x = go[row * D + d], y = gq[row * D + d];
                if (!std::isfinite(x) || !std::isfinite(y) || (none && (x != 0 || y != 0))) bad++;
            }
        }
    for (int64_t e = c * KVH * D; e < nk; e++) bad += gk[e] != 0 || gv[e] != 0;
    char name[160];
    snprintf(name, sizeof name, "attention_pos unseen rows/keys D%lld %s", (long long)D, generic ? "cuda-core" : "tc");
    report_bool(name, bad == 0, "o=0 lse=-inf dq=0 dk=dv=0");
    /* The rows that see keys, against the CPU backend. */
    std::vector<float> o((size_t)nq), lse((size_t)nl), dq((size_t)nq), dk((size_t)nk), dv((size_t)nk);
    cpu_rt_attention_pos_fwd(o.data(), lse.data(), q.data(), k.data(), v.data(), B, Sq, Sk, H, KVH, D, true, 0, c,
                             qpos, kpos);
    cpu_rt_attention_pos_bwd(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(), lse.data(),
                             dout.data(), B, Sq, Sk, H, KVH, D, true, 0, c, qpos, kpos);
    int64_t from = 5 * H * D; /* rows 5.. */
    snprintf(name, sizeof name, "attention_pos unseen: o  D%lld", (long long)D);
    report(name, std::vector<float>(go.begin() + from, go.end()), std::vector<float>(o.begin() + from, o.end()),
           TOL_BF16);
    snprintf(name, sizeof name, "attention_pos unseen: dq D%lld", (long long)D);
    report(name, std::vector<float>(gq.begin() + from, gq.end()), std::vector<float>(dq.begin() + from, dq.end()),
           TOL_BF16);
    snprintf(name, sizeof name, "attention_pos unseen: dk D%lld", (long long)D);
    report(name, gk, dk, TOL_BF16);
    rt_free(dqq), rt_free(dkk), rt_free(dvv), rt_free(ddo), rt_free(doo), rt_free(ddq), rt_free(ddk), rt_free(ddv);
    rt_free(dl);
    rtcu_attention_force_generic(-1);
    rtcu_attention_deterministic(-1);
}

/* Ring attention's merge (rt_attention_merge) and fp32 sum (rt_add_f32)
 * against the CPU backend's on the same inputs: random rows, some whose
 * block saw no key (lse_b = -inf: unchanged), some whose running result has
 * none yet (lse = -inf, acc = 0: the block's), some neither (report() takes
 * finite values only; the CPU test covers a row that stays -inf). */
static void t_attention_merge(Rng &r)
{
    const int64_t rows = 203, D = 72, n = rows * D;
    auto acc = randv(r, n), ob = randv(r, n);
    std::vector<float> lse((size_t)rows), lseb((size_t)rows);
    for (int64_t i = 0; i < rows; i++) {
        lse[(size_t)i] = 4.0f * r.uni(), lseb[(size_t)i] = 4.0f * r.uni();
        if (i % 7 == 3 && i % 11 != 5) lseb[(size_t)i] = -INFINITY; /* (a row of both would end -inf) */
        else if (i % 11 == 5) {
            lse[(size_t)i] = -INFINITY;
            for (int64_t d = 0; d < D; d++) acc[(size_t)(i * D + d)] = 0.0f;
        }
    }
    for (int final = 0; final < 2; final++) {
        float *da = df32(acc), *dl = df32(lse), *dlb = df32(lseb);
        rt_act *dob = dact(ob), *dout = final ? (rt_act *)rt_alloc((size_t)n * 2) : NULL;
        std::vector<float> ca(acc), cl(lse), co((size_t)n);
        rt_attention_merge(da, dl, dob, dlb, dout, rows, D);
        cpu_rt_attention_merge(ca.data(), cl.data(), ob.data(), lseb.data(), final ? co.data() : NULL, rows, D);
        report(final ? "attention_merge acc (fp32, with out)" : "attention_merge acc (fp32)", hf32(da, n), ca, TOL_F32);
        report(final ? "attention_merge lse (with out)" : "attention_merge lse", hf32(dl, rows), cl, TOL_F32);
        if (final) report("attention_merge out", hact(dout, n), co, TOL_BF16);
        std::vector<float> gl = hf32(dl, rows);
        bool same = true;
        for (int64_t i = 0; i < rows; i++)
            if (lseb[(size_t)i] == -INFINITY && !(gl[(size_t)i] == lse[(size_t)i])) same = false;
        report_bool("attention_merge rows with lse_b = -inf unchanged", same, "lse kept");
        rt_free(da), rt_free(dl), rt_free(dlb), rt_free(dob);
        if (dout) rt_free(dout);
    }
    auto x = randv(r, n), f = randv(r, n, 3.0f);
    rt_act *dx = dact(x);
    float *df = df32(f);
    std::vector<float> cx((size_t)n);
    rt_add_f32(dx, dx, df, n);
    cpu_rt_add_f32(cx.data(), x.data(), f.data(), n);
    report("add_f32 (in place)", hact(dx, n), cx, TOL_BF16);
    rt_free(dx), rt_free(df);
}

void run_attention_pos_tests(Rng &r)
{
    t_attention_merge(r);
    /* Chunks of 24 (a 128-query tile spans chunks), 10 (odd, under a tile),
     * 64 (whole tiles); windows inside a chunk and across chunks. */
    const PosCase pc[] = {
        {{2, 96, 4, 2, 64, true, 0}, 2, true, false, false},
        {{1, 80, 2, 1, 64, true, 7}, 4, true, false, false},
        {{1, 128, 2, 2, 64, true, 40}, 2, false, false, false},
        {{1, 64, 2, 1, 128, false, 0}, 2, true, false, false},
        {{1, 80, 2, 1, 80, true, 13}, 4, true, false, true},
        {{1, 96, 2, 1, 96, true, 30}, 2, true, false, true},
        {{2, 80, 4, 2, 64, true, 0}, 4, true, true, false},
        {{1, 80, 2, 1, 64, true, 25}, 2, false, true, false},
        {{1, 40, 2, 1, 16, true, 3}, 4, true, false, false},
    };
    for (const PosCase &c : pc) t_attention_pos(r, c);
    t_attention_pos_one(r, {2, 100, 4, 2, 64, true, 0}, false);
    t_attention_pos_one(r, {1, 130, 2, 1, 128, true, 50}, false);
    t_attention_pos_one(r, {1, 70, 2, 1, 64, false, 0}, true);
    t_attention_pos_unseen(r, 64, false);
    t_attention_pos_unseen(r, 64, true);
}

/* Fallbacks warn once per reason (run.sh counts the lines on stderr) and
 * still compute the right thing: an unserved head dim, and buffers at an
 * odd address (2 bytes past an allocation). */
int run_fallback_tests(uint64_t seed)
{
    Rng r(seed);
    rtcu_attention_force_generic(-1);
    for (int i = 0; i < 2; i++) t_attention(r, {1, 33, 2, 1, 40, true, 0}, false);
    const int64_t B = 1, S = 50, H = 2, KVH = 1, D = 64, nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
    for (int rep = 0; rep < 2; rep++) {
        auto q = randv(r, nq, 2.0f), k = randv(r, nk, 2.0f), v = randv(r, nk), dout = randv(r, nq);
        std::vector<float> o((size_t)nq), lse((size_t)nl), dq((size_t)nq), dk((size_t)nk), dv((size_t)nk);
        rt_act *base = (rt_act *)rt_alloc((size_t)(nq + 1) * 2), *qm = base + 1; /* misaligned q */
        rt_act_from_f32(qm, q.data(), nq);
        rt_act *dkk = dact(k), *dvv = dact(v), *ddo = dact(dout);
        rt_act *doo = (rt_act *)rt_alloc((size_t)nq * 2), *ddq = (rt_act *)rt_alloc((size_t)nq * 2);
        rt_act *ddk = (rt_act *)rt_alloc((size_t)nk * 2), *ddv = (rt_act *)rt_alloc((size_t)nk * 2);
        float *dl = (float *)rt_alloc((size_t)nl * 4);
        rt_attention_fwd(doo, dl, qm, dkk, dvv, B, S, H, KVH, D, true, 0);
        rt_attention_bwd(ddq, ddk, ddv, qm, dkk, dvv, doo, dl, ddo, B, S, H, KVH, D, true, 0);
        cpu_rt_attention_fwd(o.data(), lse.data(), q.data(), k.data(), v.data(), B, S, H, KVH, D, true, 0);
        cpu_rt_attention_bwd(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(), lse.data(),
                             dout.data(), B, S, H, KVH, D, true, 0);
        report("attention misaligned q: o", hact(doo, nq), o, TOL_BF16);
        report("attention misaligned q: dq", hact(ddq, nq), dq, TOL_BF16);
        report("attention misaligned q: dk", hact(ddk, nk), dk, TOL_BF16);
        rt_free(base), rt_free(dkk), rt_free(dvv), rt_free(ddo), rt_free(doo), rt_free(ddq), rt_free(ddk);
        rt_free(ddv), rt_free(dl);
    }
    return g_failures;
}

/* ------------------------------------------------- shared-memory banks */
#ifdef PTDC_CUDA_EMU
#define RTCU_EMU_STREAM ((cudaStream_t)0) /* no runtime here: the legacy stream */
#include "emu/emu.h"

/* The shared-memory accesses of the previous tensor-core kernel
 * (attention_mma.cu before the FlashAttention-2 rewrite), reproduced
 * address for address: its staging of a 64-row tile (16-byte row-major
 * stores into rows padded by 8 elements, and the transposed copy for V and
 * K^T, eight 2-byte stores per thread into [D][64 + 8]) and its 32-bit
 * fragment loads. 128 threads. */
template <int D>
static void k_legacy(void)
{
    constexpr int ROWS = 64, LR = D + 8, LT = ROWS + 8, V8 = D / 8;
    RTCU_DYN_SMEM(uint16_t, sm);
    uint16_t *rm = sm, *tr = sm + ROWS * LR;
    int w = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int idx = (int)threadIdx.x; idx < ROWS * V8; idx += 128) {
        int r = idx / V8, c8 = (idx % V8) * 8;
        emu::smem_note(rm + r * LR + c8, 16, true, D == 64 ? "old D=64: staging store, 16 B" : "old D=128: staging store, 16 B");
        for (int i = 0; i < 8; i++)
            emu::smem_note(tr + (c8 + i) * LT + r, 2, true,
                           D == 64 ? "old D=64: transposed staging store, 2 B" : "old D=128: transposed staging store, 2 B");
    }
    /* frag_a / frag_b: (row g, cols 2t..) of a padded tile, 4 bytes a lane */
    for (int k0 = 0; k0 < D; k0 += 16)
        for (int half = 0; half < 2; half++)
            emu::smem_note(rm + (16 * w + g) * LR + k0 + 8 * half + 2 * t, 4, false,
                           D == 64 ? "old D=64: fragment load, 4 B" : "old D=128: fragment load, 4 B");
    for (int k0 = 0; k0 < ROWS; k0 += 16)
        emu::smem_note(tr + (8 * w + g) * LT + k0 + 2 * t, 4, false,
                       D == 64 ? "old D=64: transposed fragment load, 4 B" : "old D=128: transposed fragment load, 4 B");
}

static void print_banks(bool want_clean)
{
    for (const emu::BankStat &s : emu::bank_stats()) {
        double per = (double)s.wavefronts / (double)s.requests, ideal = (double)s.ideal / (double)s.requests;
        bool clean = s.wavefronts == s.ideal;
        bool ok = want_clean ? clean : true;
        char detail[96];
        snprintf(detail, sizeof detail, "%5.2f / %4.2f wavefronts, worst %llu-way", per, ideal,
                 (unsigned long long)s.worst);
        report_bool(s.site, ok, detail);
    }
}

/* The bank-conflict table (docs/cuda.md): the old kernel's patterns must
 * show their 16-way (D=128) and 8-way (D=64) transposed stores, which
 * validates the counter; every shared access of the new kernels must cost
 * exactly its ideal number of wavefronts. */
int run_bank_tests(uint64_t seed)
{
    if (g_print) printf("%-40s %-26s\n", "site", "wavefronts/request (actual / ideal)");
    emu::bank_reset();
    RTCU_LAUNCH(k_legacy<64>, 1, 128, (64 * 72 + 64 * 72) * 2)();
    RTCU_LAUNCH(k_legacy<128>, 1, 128, (64 * 136 + 128 * 72) * 2)();
    auto old = emu::bank_stats();
    print_banks(false);
    uint64_t worst64 = 0, worst128 = 0;
    for (auto &s : old) {
        if (strstr(s.site, "old D=64: transposed staging")) worst64 = s.worst;
        if (strstr(s.site, "old D=128: transposed staging")) worst128 = s.worst;
    }
    report_bool("old transposed store conflicts reproduced", worst64 == 8 && worst128 == 16, "8-way at 64, 16-way at 128");

    Rng r(seed);
    static const int64_t dims[] = {64, 80, 96, 128};
    for (int i = 0; i < 8; i++) { /* both backwards, every head dim */
        const int determ = i / 4;
        const int64_t D = dims[i % 4];
        rtcu_attention_deterministic(determ);
        emu::bank_reset();
        const int64_t B = 1, S = 160, H = 2, KVH = 1, nq = B * S * H * D, nk = B * S * KVH * D, nl = B * S * H;
        rt_act *q = dact(randv(r, nq)), *k = dact(randv(r, nk)), *v = dact(randv(r, nk)), *dout = dact(randv(r, nq));
        rt_act *o = (rt_act *)rt_alloc((size_t)nq * 2), *dq = (rt_act *)rt_alloc((size_t)nq * 2);
        rt_act *dk = (rt_act *)rt_alloc((size_t)nk * 2), *dv = (rt_act *)rt_alloc((size_t)nk * 2);
        float *lse = (float *)rt_alloc((size_t)nl * 4);
        rt_attention_fwd(o, lse, q, k, v, B, S, H, KVH, D, true, 0);
        rt_attention_bwd(dq, dk, dv, q, k, v, o, lse, dout, B, S, H, KVH, D, true, 0);
        if (g_print) printf("-- new kernels, D=%lld%s\n", (long long)D, determ ? ", deterministic backward" : "");
        print_banks(true);
        rt_free(q), rt_free(k), rt_free(v), rt_free(dout), rt_free(o), rt_free(dq), rt_free(dk), rt_free(dv);
        rt_free(lse);
    }
    rtcu_attention_deterministic(-1);
    return g_failures;
}
#else
int run_bank_tests(uint64_t)
{
    if (g_print) printf("SKIPPED: the bank-conflict count runs under the emulator only\n");
    return 0;
}
#endif
