/* attention_v.c: attention whose v head (Dv) is narrower than q and k's (D):
 * multi-head latent attention's 128 against 192 (rt_attention_v_fwd/bwd,
 * runtime/rt.h). The attention kernels take one head size, so v is padded
 * with zero columns to D: o' = P [V | 0] = [o | 0], the same lse, and
 * backward with dO' = [dO | 0] gives dP = dO' V'^T = dO V^T, the same
 * D_i = dO' . O' and dQ, dK, while dV' = P^T dO' = [dV | 0]. Exact (the
 * padded columns add zeros), at the price of D - Dv wasted columns in P V
 * and of temporaries allocated per call (rt_alloc; on CUDA a device
 * allocation that synchronises: correct, not fast). The pads and cuts are
 * the backend's own concat and slice kernels, so this host code serves
 * both backends. */
#include "common.h"

/* A buffer of n activations. */
static void *acts(int64_t n) { return rt_alloc((size_t)n * rtc_act_bytes()); }

/* dst [rows, D] = [src [rows, Dv] | 0]; z holds D - Dv zeros (one row,
 * broadcast over every row). */
static void pad(rt_act *dst, const rt_act *src, const rt_act *z, int64_t rows, int64_t D, int64_t Dv)
{
    rt_concat_fwd(dst, src, z, 1, rows, 1, Dv, D - Dv);
}

static void check(const char *fn, int64_t D, int64_t Dv)
{
    if (Dv < 1 || Dv > D)
        rt_fatal("%s: v's head size %lld must be between 1 and q's %lld", fn, (long long)Dv, (long long)D);
}

void rt_attention_v_fwd(rt_act *o, float *lse, const rt_act *q, const rt_act *k, const rt_act *v,
                        int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D, int64_t Dv, bool causal,
                        int64_t window)
{
    check("rt_attention_v_fwd", D, Dv);
    if (Dv == D) {
        rt_attention_fwd(o, lse, q, k, v, B, S, H, KVH, D, causal, window);
        return;
    }
    rt_act *z = acts(D - Dv), *vp = acts(B * S * KVH * D), *op = acts(B * S * H * D);
    rt_zero(z, (size_t)(D - Dv) * rtc_act_bytes());
    pad(vp, v, z, B * S * KVH, D, Dv);
    rt_attention_fwd(op, lse, q, k, vp, B, S, H, KVH, D, causal, window);
    rt_slice_fwd(o, op, B * S * H, D, Dv, 0);
    rt_free(z), rt_free(vp), rt_free(op);
}

void rt_attention_v_bwd(rt_act *dq, rt_act *dk, rt_act *dv, const rt_act *q, const rt_act *k,
                        const rt_act *v, const rt_act *o, const float *lse, const rt_act *dout, int64_t B,
                        int64_t S, int64_t H, int64_t KVH, int64_t D, int64_t Dv, bool causal, int64_t window)
{
    check("rt_attention_v_bwd", D, Dv);
    if (Dv == D) {
        rt_attention_bwd(dq, dk, dv, q, k, v, o, lse, dout, B, S, H, KVH, D, causal, window);
        return;
    }
    int64_t nq = B * S * H * D, nkv = B * S * KVH * D;
    rt_act *z = acts(D - Dv), *vp = acts(nkv), *dvp = acts(nkv), *op = acts(nq), *gp = acts(nq);
    rt_zero(z, (size_t)(D - Dv) * rtc_act_bytes());
    pad(vp, v, z, B * S * KVH, D, Dv);
    pad(op, o, z, B * S * H, D, Dv);
    pad(gp, dout, z, B * S * H, D, Dv);
    rt_attention_bwd(dq, dk, dvp, q, k, vp, op, lse, gp, B, S, H, KVH, D, causal, window);
    rt_slice_fwd(dv, dvp, B * S * KVH, D, Dv, 0);
    rt_free(z), rt_free(vp), rt_free(dvp), rt_free(op), rt_free(gp);
}
