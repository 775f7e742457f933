/* m_memory.c: what a rank needs besides its arena, and host work per token.
 *
 * Records:
 *   mem base BYTES     resident after start-up: the runtime initialised, a
 *                      GEMM and a collective run (library buffers), as a
 *                      training program is before its first step
 *   mem comm BYTES     one more communicator, once a collective has used it
 *   host SEQ SECONDS   loading one sequence of SEQ tokens (and its targets)
 *                      from the synthetic source, as the trainer does per
 *                      sequence of a micro-batch
 * On CPU "resident" is the process's VmRSS; on CUDA the device memory in use
 * (cudaMemGetInfo: total - free, this process being the only one). */
#include "measure.h"

#include <stdlib.h>
#include <string.h>

#ifdef PTDC_CUDA
#include <cuda_runtime.h>
static double resident(void)
{
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess)
        rt_fatal("ptdc-measure: cudaMemGetInfo failed");
    return (double)(total - free_b);
}
#else
static double resident(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atof(line + 6);
    fclose(f);
    return kb * 1024;
}
#endif

typedef struct {
    RtData *d;
    int64_t seq, next;
    int32_t *tok, *tgt;
} HostArg;

static void load_one(void *p)
{
    HostArg *h = (HostArg *)p;
    /* The trainer loads tokens and targets with a call each. */
    rt_data_sequence(h->d, h->next, h->tok, h->tgt);
    rt_data_sequence(h->d, h->next++, h->tok, h->tgt);
}

void cal_measure_memory(const CalOpts *o)
{
    /* What a program holds outside its arena once its first step ran: the
     * BLAS's packing buffers (a GEMM as large as a layer's), the kernels'
     * thread team and scratch (a norm, attention forward and backward: on
     * a GPU these also load their modules), the communication thread (a
     * non-blocking all-reduce). A 256-wide GEMM and one all-reduce, as this
     * measured before, left the 4-rank CPU programs' peak RSS 8-11% above
     * the prediction (docs/cost-model.md). The operands are freed first. */
    {
        enum { G = 1024, S = 256, H = 4, D = 64 };
        rt_act *x = cal_act(G * G, 0.5f), *y = cal_act(G * G, 0.f), *z = cal_act(G * G, 0.f);
        float *st = cal_f32(G * H, 0.f);
        rt_matmul(z, x, y, G, G, G, false, false, false);
        rt_matmul(z, x, y, G, G, G, true, false, false);
        rt_matmul(z, x, y, G, G, G, false, true, false);
        rt_rmsnorm_fwd(y, st, x, x, G, G, 1e-5f); /* weights: x's first row */
        /* q, k, v, o, dout, dq, dk, dv: [1, S, H, D] slices of the three buffers. */
        int64_t t = (int64_t)S * H * D;
        rt_attention_fwd(z, st, x, x + t, x + 2 * t, 1, S, H, H, D, true, 0);
        rt_attention_bwd(y, y + t, y + 2 * t, x, x + t, x + 2 * t, z, st, z + t, 1, S, H, H, D, true, 0);
        rt_wait(rt_iallreduce(rt_comm_world(), z, G, RT_ACT));
        rt_barrier(rt_comm_world());
        rt_free(x), rt_free(y), rt_free(z), rt_free(st);
    }
    rt_act *c = cal_act(256 * 256, 0.f);
    rt_allreduce(rt_comm_world(), c, 256 * 256, RT_ACT);
    rt_barrier(rt_comm_world());
    double base = resident();
    /* Three more communicators, each used once. */
    enum { NCOMM = 3 };
    for (int i = 0; i < NCOMM; i++) {
        RtComm *k = rt_comm_split(i % 2 ? o->rank % 2 : 0, o->rank);
        rt_allreduce(k, c, 256 * 256, RT_ACT);
    }
    rt_barrier(rt_comm_world());
    double per = (resident() - base) / NCOMM;
    cal_out(o, CAL_FMT_MEM_BASE, base);
    cal_out(o, CAL_FMT_MEM_COMM, per > 0 ? per : 0);
    cal_progress(o, "memory: %.1f MiB per rank after start-up, %.2f MiB per communicator",
                 base / 1048576, per / 1048576);
    /* Host work per token. */
    HostArg h;
    h.seq = 1024;
    h.next = 0;
    h.d = rt_data_open("synthetic:1", 32000, h.seq);
    h.tok = (int32_t *)malloc(sizeof(int32_t) * (size_t)(h.seq + 1));
    h.tgt = (int32_t *)malloc(sizeof(int32_t) * (size_t)(h.seq + 1));
    if (!h.tok || !h.tgt)
        rt_fatal("ptdc-measure: out of host memory");
    double t = cal_time(o, NULL, load_one, &h);
    cal_out(o, CAL_FMT_HOST, (long long)h.seq, t);
    cal_progress(o, "host: %.1f ns per token loaded", t / (double)h.seq * 1e9 / 2);
    rt_data_close(h.d);
    free(h.tok);
    free(h.tgt);
    rt_free(c);
}
