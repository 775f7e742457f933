/* ref_mla.c: DeepSeek-V2/V3's multi-head latent attention (DeepSeek-AI 2024,
 * "DeepSeek-V2", section 2.1, and "DeepSeek-V3 Technical Report", eqs. 1-11)
 * in double, forward and backward, written from the papers' equations and
 * Hugging Face's tensor names and layouts, apart from the runtime. Per token
 * t of a layer's normalised input h (weights stored [out, in]):
 *   c_q  = RMSNorm(q_a_proj h) * q_a_layernorm          [q_lora_rank]
 *   q_h  = [q_nope_h | rope(q_rope_h)] = (q_b_proj c_q)_h   per head, Dn + Dr
 *   [c_kv | k_r] = kv_a_proj_with_mqa h                 [kv_lora_rank + Dr]
 *   k_R  = rope(k_r), one rotated key part shared by every head
 *   [k_nope_h | v_h] = (kv_b_proj (RMSNorm(c_kv) * kv_a_layernorm))_h
 *   k_h  = [k_nope_h | k_R]
 *   o_h  = sum_{j <= t} softmax_j(q_h . k_h,j / sqrt(Dn + Dr)) v_h,j  (v of Dv)
 *   out  = o_proj [o_1 .. o_H]
 * Rope rotates halves of the Dr dimensions (models/deepseek-v3.mdl says why,
 * LLaMA's layout: ref_rope). The backward is the chain rule through each of
 * these, by hand. */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct RefMla {
    double *cq_raw, *rs_q, *cq, *q, *kva, *rs_kv, *ckv, *kv, *kpe, *k, *v, *p, *o;
};

static double *Wt(const RefSt *st, const char *prefix, const char *name)
{
    char full[256];
    snprintf(full, sizeof full, "%sself_attn.%s", prefix, name);
    RefTensor *t = ref_st_find(st, full);
    if (!t) {
        fprintf(stderr, "ref: no tensor %s\n", full);
        exit(1);
    }
    return t->v;
}

/* The rope part [R, heads, Dr] of x [R, heads, stride] at offset `at`, rotated
 * (or by the transposed rotation) in place. */
static void rope_part(double *x, int64_t R, int64_t S, int64_t heads, int64_t stride, int64_t at,
                      int64_t Dr, double theta, bool inverse)
{
    double *t = ref_zeros(R * heads * Dr);
    for (int64_t r = 0; r < R * heads; r++)
        memcpy(t + r * Dr, x + r * stride + at, sizeof(double) * (size_t)Dr);
    ref_rope(t, R, S, heads, Dr, theta, inverse);
    for (int64_t r = 0; r < R * heads; r++)
        memcpy(x + r * stride + at, t + r * Dr, sizeof(double) * (size_t)Dr);
    free(t);
}

RefMla *ref_mla_fwd(const RefConfig *c, const RefSt *w, const char *prefix, const double *h, double *out)
{
    const int64_t R = c->B * c->S, S = c->S, D = c->D, H = c->H, QR = c->QR, KR = c->KR;
    const int64_t Dn = c->Dn, Dr = c->Dr, Dv = c->Dv, Dqk = Dn + Dr, Dkv = Dn + Dv;
    RefMla *m = calloc(1, sizeof *m);
    m->cq_raw = ref_zeros(R * QR), m->rs_q = ref_zeros(R), m->cq = ref_zeros(R * QR), m->q = ref_zeros(R * H * Dqk);
    m->kva = ref_zeros(R * (KR + Dr)), m->rs_kv = ref_zeros(R), m->ckv = ref_zeros(R * KR);
    m->kv = ref_zeros(R * H * Dkv), m->kpe = ref_zeros(R * Dr), m->k = ref_zeros(R * H * Dqk);
    m->v = ref_zeros(R * H * Dv), m->p = ref_zeros(c->B * H * S * S), m->o = ref_zeros(R * H * Dv);
    double *craw = ref_zeros(R * KR);
    /* queries */
    ref_mm(m->cq_raw, h, Wt(w, prefix, "q_a_proj.weight"), R, QR, D, false, true, false);
    ref_rmsnorm_fwd(m->cq, m->rs_q, m->cq_raw, Wt(w, prefix, "q_a_layernorm.weight"), R, QR, c->eps);
    ref_mm(m->q, m->cq, Wt(w, prefix, "q_b_proj.weight"), R, H * Dqk, QR, false, true, false);
    rope_part(m->q, R, S, H, Dqk, Dn, Dr, c->theta, false);
    /* keys and values */
    ref_mm(m->kva, h, Wt(w, prefix, "kv_a_proj_with_mqa.weight"), R, KR + Dr, D, false, true, false);
    for (int64_t r = 0; r < R; r++) {
        memcpy(craw + r * KR, m->kva + r * (KR + Dr), sizeof(double) * (size_t)KR);
        memcpy(m->kpe + r * Dr, m->kva + r * (KR + Dr) + KR, sizeof(double) * (size_t)Dr);
    }
    ref_rope(m->kpe, R, S, 1, Dr, c->theta, false);
    ref_rmsnorm_fwd(m->ckv, m->rs_kv, craw, Wt(w, prefix, "kv_a_layernorm.weight"), R, KR, c->eps);
    ref_mm(m->kv, m->ckv, Wt(w, prefix, "kv_b_proj.weight"), R, H * Dkv, KR, false, true, false);
    for (int64_t r = 0; r < R; r++)
        for (int64_t hd = 0; hd < H; hd++) {
            const double *kv = m->kv + (r * H + hd) * Dkv;
            double *k = m->k + (r * H + hd) * Dqk;
            memcpy(k, kv, sizeof(double) * (size_t)Dn);
            memcpy(k + Dn, m->kpe + r * Dr, sizeof(double) * (size_t)Dr);
            memcpy(m->v + (r * H + hd) * Dv, kv + Dn, sizeof(double) * (size_t)Dv);
        }
    /* causal attention, one sequence and head at a time */
    const double scale = 1 / sqrt((double)Dqk);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t hd = 0; hd < H; hd++)
            for (int64_t i = 0; i < S; i++) {
                double *p = m->p + ((b * H + hd) * S + i) * S, mx = -INFINITY, sum = 0;
                const double *q = m->q + ((b * S + i) * H + hd) * Dqk;
                for (int64_t j = 0; j <= i; j++) {
                    const double *k = m->k + ((b * S + j) * H + hd) * Dqk;
                    double s = 0;
                    for (int64_t d = 0; d < Dqk; d++)
                        s += q[d] * k[d];
                    p[j] = s * scale;
                    mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j <= i; j++)
                    sum += (p[j] = exp(p[j] - mx));
                double *o = m->o + ((b * S + i) * H + hd) * Dv;
                for (int64_t j = 0; j <= i; j++) {
                    p[j] /= sum;
                    const double *v = m->v + ((b * S + j) * H + hd) * Dv;
                    for (int64_t d = 0; d < Dv; d++)
                        o[d] += p[j] * v[d];
                }
            }
    ref_mm(out, m->o, Wt(w, prefix, "o_proj.weight"), R, D, H * Dv, false, true, false);
    free(craw);
    return m;
}

void ref_mla_bwd(const RefConfig *c, const RefSt *w, RefSt *gr, const char *prefix, const RefMla *m,
                 const double *h, const double *dout, double *dh)
{
    const int64_t R = c->B * c->S, S = c->S, D = c->D, H = c->H, QR = c->QR, KR = c->KR;
    const int64_t Dn = c->Dn, Dr = c->Dr, Dv = c->Dv, Dqk = Dn + Dr, Dkv = Dn + Dv;
    double *dO = ref_zeros(R * H * Dv), *dq = ref_zeros(R * H * Dqk), *dk = ref_zeros(R * H * Dqk),
           *dv = ref_zeros(R * H * Dv), *dkv = ref_zeros(R * H * Dkv), *dkva = ref_zeros(R * (KR + Dr)),
           *dkpe = ref_zeros(R * Dr), *dckv = ref_zeros(R * KR), *dcraw = ref_zeros(R * KR), *dcq = ref_zeros(R * QR),
           *dcqr = ref_zeros(R * QR), *craw = ref_zeros(R * KR);
    ref_mm(Wt(gr, prefix, "o_proj.weight"), dout, m->o, D, H * Dv, R, true, false, true);
    ref_mm(dO, dout, Wt(w, prefix, "o_proj.weight"), R, H * Dv, D, false, false, false);
    /* attention: dp_j = dO . v_j; ds_j = p_j (dp_j - sum_l p_l dp_l) */
    const double scale = 1 / sqrt((double)Dqk);
    double *dp = ref_zeros(S);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t hd = 0; hd < H; hd++)
            for (int64_t i = 0; i < S; i++) {
                const double *p = m->p + ((b * H + hd) * S + i) * S;
                const double *g = dO + ((b * S + i) * H + hd) * Dv;
                const double *q = m->q + ((b * S + i) * H + hd) * Dqk;
                double *dqi = dq + ((b * S + i) * H + hd) * Dqk, dot = 0;
                for (int64_t j = 0; j <= i; j++) {
                    const double *v = m->v + ((b * S + j) * H + hd) * Dv;
                    double *dvj = dv + ((b * S + j) * H + hd) * Dv, s = 0;
                    for (int64_t d = 0; d < Dv; d++) {
                        s += g[d] * v[d];
                        dvj[d] += p[j] * g[d];
                    }
                    dp[j] = s;
                    dot += p[j] * s;
                }
                for (int64_t j = 0; j <= i; j++) {
                    double ds = p[j] * (dp[j] - dot) * scale;
                    const double *k = m->k + ((b * S + j) * H + hd) * Dqk;
                    double *dkj = dk + ((b * S + j) * H + hd) * Dqk;
                    for (int64_t d = 0; d < Dqk; d++) {
                        dqi[d] += ds * k[d];
                        dkj[d] += ds * q[d];
                    }
                }
            }
    /* k = [k_nope | k_R shared], v: back to kv and the rotated key part */
    for (int64_t r = 0; r < R; r++)
        for (int64_t hd = 0; hd < H; hd++) {
            const double *dkh = dk + (r * H + hd) * Dqk;
            double *d = dkv + (r * H + hd) * Dkv;
            memcpy(d, dkh, sizeof(double) * (size_t)Dn);
            memcpy(d + Dn, dv + (r * H + hd) * Dv, sizeof(double) * (size_t)Dv);
            for (int64_t j = 0; j < Dr; j++)
                dkpe[r * Dr + j] += dkh[Dn + j];
        }
    ref_rope(dkpe, R, S, 1, Dr, c->theta, true);
    ref_mm(Wt(gr, prefix, "kv_b_proj.weight"), dkv, m->ckv, H * Dkv, KR, R, true, false, true);
    ref_mm(dckv, dkv, Wt(w, prefix, "kv_b_proj.weight"), R, KR, H * Dkv, false, false, false);
    for (int64_t r = 0; r < R; r++)
        memcpy(craw + r * KR, m->kva + r * (KR + Dr), sizeof(double) * (size_t)KR);
    ref_rmsnorm_bwd(dcraw, Wt(gr, prefix, "kv_a_layernorm.weight"), dckv, craw,
                    Wt(w, prefix, "kv_a_layernorm.weight"), m->rs_kv, R, KR);
    for (int64_t r = 0; r < R; r++) {
        memcpy(dkva + r * (KR + Dr), dcraw + r * KR, sizeof(double) * (size_t)KR);
        memcpy(dkva + r * (KR + Dr) + KR, dkpe + r * Dr, sizeof(double) * (size_t)Dr);
    }
    ref_mm(Wt(gr, prefix, "kv_a_proj_with_mqa.weight"), dkva, h, KR + Dr, D, R, true, false, true);
    ref_mm(dh, dkva, Wt(w, prefix, "kv_a_proj_with_mqa.weight"), R, D, KR + Dr, false, false, false);
    /* queries */
    rope_part(dq, R, S, H, Dqk, Dn, Dr, c->theta, true);
    ref_mm(Wt(gr, prefix, "q_b_proj.weight"), dq, m->cq, H * Dqk, QR, R, true, false, true);
    ref_mm(dcq, dq, Wt(w, prefix, "q_b_proj.weight"), R, QR, H * Dqk, false, false, false);
    ref_rmsnorm_bwd(dcqr, Wt(gr, prefix, "q_a_layernorm.weight"), dcq, m->cq_raw,
                    Wt(w, prefix, "q_a_layernorm.weight"), m->rs_q, R, QR);
    ref_mm(Wt(gr, prefix, "q_a_proj.weight"), dcqr, h, QR, D, R, true, false, true);
    ref_mm(dh, dcqr, Wt(w, prefix, "q_a_proj.weight"), R, D, QR, false, false, true);
    free(dO), free(dq), free(dk), free(dv), free(dkv), free(dkva), free(dkpe), free(dckv);
    free(dcraw), free(dcq), free(dcqr), free(craw), free(dp);
}

void ref_mla_free(RefMla *m)
{
    if (!m)
        return;
    double *all[] = {m->cq_raw, m->rs_q, m->cq, m->q, m->kva, m->rs_kv, m->ckv,
                     m->kv, m->kpe, m->k, m->v, m->p, m->o};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(m);
}
