/* train_fp8.c: the FP8 GEMMs of a plan in FP8 (docs/precision.md, "What the
 * programs compute"), Transformer Engine's current scaling: each operand's
 * scale from the amax of the whole tensor at the time of use, its shards'
 * amaxes max-reduced over the ranks holding them (codegen passes that group:
 * plan_amax_axes), so the codes, and the result, are those of one rank
 * holding the whole tensor. Composed of rt.h's FP8 calls, so the CPU and
 * CUDA backends compute the same codes (runtime/common/fp8.c's rounding). */
#include "train.h"

#include <string.h>

/* Backend memory for the codes of the two operands and a result on its way
 * into an fp32 accumulator: grown to the largest GEMM, kept for the run
 * (outside the planned arena; a few times a GEMM operand's bytes). */
static void *q8, *res;
static size_t q8_bytes, res_bytes;

static void *grow(void **p, size_t *have, size_t need)
{
    if (need > *have) {
        if (*p)
            rt_free(*p);
        *p = rt_alloc(need);
        *have = need;
    }
    return *p;
}

/* The cast scale of x (n elements here): its amax, the largest over group
 * when its shards are spread over one (NULL: this rank holds all of it). */
static float scale_of(const rt_act *x, int64_t n, RtComm *group, RtFp8Format f)
{
    float amax = rt_amax(x, n);
    if (group) {
        /* An amax is never negative, and non-negative floats order as their
         * bit patterns, NaN's above infinity's: the integers' max is the
         * floats' max, a NaN winning, with the control collective both
         * backends have. */
        uint32_t u;
        memcpy(&u, &amax, sizeof u);
        u = (uint32_t)rt_host_max(group, (int64_t)u);
        memcpy(&amax, &u, sizeof amax);
    }
    return rt_fp8_scale(amax, f);
}

/* c = op(a) op(b) (+ c) in FP8: op(a) [M, K] cast as is or transposed into
 * rows of K, op(b) [K, N] into rows of K too (rt_matmul_fp8's TN layout). */
static void gemm(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K, bool ta,
                 bool tb, bool accumulate, RtFp8Format fa, RtFp8Format fb, RtComm *ga, RtComm *gb)
{
    size_t na = ((size_t)(M * K) + 255) / 256 * 256; /* b's codes 256-byte aligned, as cuBLASLt wants */
    uint8_t *qa = (uint8_t *)grow(&q8, &q8_bytes, na + (size_t)(N * K)), *qb = qa + na;
    float sa = scale_of(a, M * K, ga, fa), sb = scale_of(b, N * K, gb, fb);
    if (ta)
        rt_cast_fp8_t(qa, a, K, M, sa, fa);
    else
        rt_cast_fp8(qa, a, M * K, sa, fa);
    if (tb)
        rt_cast_fp8(qb, b, N * K, sb, fb);
    else
        rt_cast_fp8_t(qb, b, K, N, sb, fb);
    rt_matmul_fp8(c, qa, fa, 1.0f / sa, qb, fb, 1.0f / sb, M, N, K, accumulate);
}

/* Timed whole under PTDC_TIME_GEMM (amaxes, their reductions and the casts
 * with the GEMM: what an FP8 GEMM costs the step). */
void (cg_matmul_fp8)(rt_act *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K, bool ta,
                     bool tb, bool accumulate, RtFp8Format fa, RtFp8Format fb, RtComm *ga, RtComm *gb)
{
    double t0 = tr_gemm_start();
    gemm(c, a, b, M, N, K, ta, tb, accumulate, fa, fb, ga, gb);
    tr_gemm_end(t0, 1, M, N, K);
}

/* A weight's gradient: the GEMM's result in rt_act, then added to the fp32
 * accumulator (rt_matmul_fp8 writes rt_act: exact on CPU, where rt_act is
 * fp32; rounded once to bf16 on CUDA before the fp32 sum). */
void (cg_matmul_fp8_grad)(rt_grad *c, const rt_act *a, const rt_act *b, int64_t M, int64_t N, int64_t K,
                          bool ta, bool tb, bool accumulate, RtFp8Format fa, RtFp8Format fb, RtComm *ga,
                          RtComm *gb)
{
    double t0 = tr_gemm_start();
    rt_act *t = (rt_act *)grow(&res, &res_bytes, (size_t)(M * N) * sizeof(rt_act));
    gemm(t, a, b, M, N, K, ta, tb, false, fa, fb, ga, gb);
    /* (name)(...): unprofiled, this call's profile counts them (trainer.h) */
    if (!accumulate)
        (rt_zero)(c, (size_t)(M * N) * sizeof(rt_grad));
    (rt_grad_add)(c, t, M * N);
    tr_gemm_end(t0, 1, M, N, K);
}
