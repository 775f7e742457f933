/* ssm.c: Mamba-2's selective scan (rt.h: rt_ssd_fwd, rt_ssd_bwd), the
 * recurrence itself, one step at a time, in fp32 with the state [n, p] of
 * each (sequence, head) held by one thread.
 *
 * Backward runs the scan in reverse. It needs the state before every step;
 * rather than keep seq of them (seq n p floats a head), the forward is run
 * again storing the state at the start of every chunk of Q steps, then
 * each chunk, last first, is replayed from its start into a chunk of
 * states and walked backward (the chunked recomputation mamba_ssm's
 * backward does too). Memory is (seq / Q + Q) n p floats a thread, least at
 * Q = sqrt(seq); the recomputation costs one forward more. A task
 * is one (sequence, group): the heads of a group add into the same dB and
 * dC rows, so one thread sums them in head order; dA_log and dD are summed
 * per head over the sequences in a fixed order (deterministic). */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "simd.h"

void rt_ssd_fwd(rt_act *y, const rt_act *x, const rt_act *dt, const rt_act *A_log, const rt_act *B,
                const rt_act *C, const rt_act *D, int64_t batch, int64_t seq, int64_t heads, int64_t groups,
                int64_t p, int64_t n)
{
    const int64_t hpg = heads / groups;
    RTCPU_PAR_FOR(batch * heads * seq * n * p)
    for (int64_t bh = 0; bh < batch * heads; bh++) {
        int64_t b = bh / heads, h = bh % heads, g = h / hpg;
        float *S = rtcpu_scratch(3, sizeof(float) * (size_t)(n * p));
        memset(S, 0, sizeof(float) * (size_t)(n * p));
        const float A = -expf(A_log[h]), Dh = D[h];
        for (int64_t t = 0; t < seq; t++) {
            int64_t row = b * seq + t;
            const rt_act *xt = x + (row * heads + h) * p, *Bt = B + (row * groups + g) * n;
            const rt_act *Ct = C + (row * groups + g) * n;
            float d = dt[row * heads + h], a = expf(d * A);
            rt_act *yt = y + (row * heads + h) * p;
            for (int64_t j = 0; j < p; j++)
                yt[j] = Dh * xt[j];
            for (int64_t i = 0; i < n; i++) {
                float *Si = S + i * p, db = d * Bt[i], c = Ct[i];
                for (int64_t j = 0; j < p; j++) {
                    Si[j] = a * Si[j] + db * xt[j];
                    yt[j] += c * Si[j];
                }
            }
        }
    }
}

/* The state after step t from the state before it, S in place. */
static void step(float *S, const rt_act *xt, const rt_act *Bt, float d, float a, int64_t n, int64_t p)
{
    for (int64_t i = 0; i < n; i++) {
        float *Si = S + i * p, db = d * Bt[i];
        for (int64_t j = 0; j < p; j++)
            Si[j] = a * Si[j] + db * xt[j];
    }
}

void rt_ssd_bwd(rt_act *dx, rt_act *ddt, rt_grad *dA_log, rt_act *dB, rt_act *dC, rt_grad *dD, const rt_act *x,
                const rt_act *dt, const rt_act *A_log, const rt_act *B, const rt_act *C, const rt_act *D,
                const rt_act *dy, int64_t batch, int64_t seq, int64_t heads, int64_t groups, int64_t p, int64_t n)
{
    int64_t Q = 1;
    while (Q * Q < seq)
        Q++;
    const int64_t hpg = heads / groups, nc = (seq + Q - 1) / Q, np = n * p;
    /* dA and dD of each (sequence, head), summed over the sequences in
     * order after the tasks (slot 1: the calling thread's partial sums) */
    double *part = rtcpu_scratch(1, sizeof(double) * (size_t)(2 * batch * heads));
    RTCPU_PAR_FOR(batch * heads * seq * n * p)
    for (int64_t task = 0; task < batch * groups; task++) {
        int64_t b = task / groups, g = task % groups;
        float *start = rtcpu_scratch(3, sizeof(float) * (size_t)((nc + Q + 1) * np));
        float *chunk = start + nc * np, *G = chunk + Q * np;
        for (int64_t hh = 0; hh < hpg; hh++) {
            int64_t h = g * hpg + hh;
            const float A = -expf(A_log[h]), Dh = D[h];
            double gA = 0, gD = 0;
            {
                if (hh == 0)
                    for (int64_t t = 0; t < seq; t++) {
                        int64_t row = b * seq + t;
                        memset(dB + (row * groups + g) * n, 0, sizeof(rt_act) * (size_t)n);
                        memset(dC + (row * groups + g) * n, 0, sizeof(rt_act) * (size_t)n);
                    }
                /* the state at the start of each chunk */
                memset(start, 0, sizeof(float) * (size_t)np);
                for (int64_t t = 0; t < seq; t++) {
                    if (t % Q == 0 && t > 0)
                        memcpy(start + (t / Q) * np, start + (t / Q - 1) * np, sizeof(float) * (size_t)np);
                    int64_t row = b * seq + t;
                    float d = dt[row * heads + h];
                    /* advance the copy of this chunk's slot in place */
                    step(start + (t / Q) * np, x + (row * heads + h) * p, B + (row * groups + g) * n, d,
                         expf(d * A), n, p);
                }
                /* start[c] now holds the state after chunk c's last step:
                 * shift so start[c] is the state before chunk c */
                for (int64_t c = nc - 1; c >= 1; c--)
                    memcpy(start + c * np, start + (c - 1) * np, sizeof(float) * (size_t)np);
                memset(start, 0, sizeof(float) * (size_t)np);
                memset(G, 0, sizeof(float) * (size_t)np);
                for (int64_t c = nc - 1; c >= 0; c--) {
                    int64_t t0 = c * Q, t1 = t0 + Q < seq ? t0 + Q : seq;
                    /* chunk[t - t0]: the state after step t */
                    for (int64_t t = t0; t < t1; t++) {
                        int64_t row = b * seq + t;
                        float d = dt[row * heads + h];
                        float *dst = chunk + (t - t0) * np;
                        memcpy(dst, t == t0 ? start + c * np : dst - np, sizeof(float) * (size_t)np);
                        step(dst, x + (row * heads + h) * p, B + (row * groups + g) * n, d, expf(d * A), n, p);
                    }
                    for (int64_t t = t1 - 1; t >= t0; t--) {
                        int64_t row = b * seq + t;
                        const rt_act *xt = x + (row * heads + h) * p, *Bt = B + (row * groups + g) * n;
                        const rt_act *Ct = C + (row * groups + g) * n, *gy = dy + (row * heads + h) * p;
                        rt_act *gx = dx + (row * heads + h) * p, *gB = dB + (row * groups + g) * n;
                        rt_act *gC = dC + (row * groups + g) * n;
                        const float *S = chunk + (t - t0) * np;
                        const float *Sp = t == t0 ? start + c * np : S - np;
                        float d = dt[row * heads + h], a = expf(d * A);
                        /* y_t = S_t^T C_t + D x_t */
                        for (int64_t j = 0; j < p; j++) {
                            gx[j] = Dh * gy[j];
                            gD += (double)gy[j] * xt[j];
                        }
                        for (int64_t i = 0; i < n; i++) {
                            float s = 0, ci = Ct[i];
                            for (int64_t j = 0; j < p; j++) {
                                s += gy[j] * S[i * p + j];
                                G[i * p + j] += ci * gy[j];
                            }
                            gC[i] += s;
                        }
                        /* S_t = a S_{t-1} + d B_t x_t^T */
                        float ga = 0, gd = 0;
                        for (int64_t i = 0; i < n; i++) {
                            const float *Gi = G + i * p, *Si = Sp + i * p;
                            float sx = 0;
                            for (int64_t j = 0; j < p; j++) {
                                ga += Gi[j] * Si[j];
                                sx += Gi[j] * xt[j];
                            }
                            gd += sx * Bt[i];
                            gB[i] += d * sx;
                        }
                        for (int64_t j = 0; j < p; j++) {
                            float s = 0;
                            for (int64_t i = 0; i < n; i++)
                                s += G[i * p + j] * Bt[i];
                            gx[j] += d * s;
                        }
                        ddt[row * heads + h] = gd + ga * a * A;
                        gA += (double)ga * a * d;
                        for (int64_t i = 0; i < np; i++)
                            G[i] *= a;
                    }
                }
            }
            part[2 * (b * heads + h)] = gA * A; /* dA_log = dA dA/dA_log = dA A */
            part[2 * (b * heads + h) + 1] = gD;
        }
    }
    for (int64_t h = 0; h < heads; h++) {
        double a = 0, d = 0;
        for (int64_t b = 0; b < batch; b++)
            a += part[2 * (b * heads + h)], d += part[2 * (b * heads + h) + 1];
        dA_log[h] = (float)((double)dA_log[h] + a);
        dD[h] = (float)((double)dD[h] + d);
    }
}
