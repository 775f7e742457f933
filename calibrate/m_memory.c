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
    /* Start-up as a program has it before its first step. */
    rt_act *a = cal_act(256 * 256, 0.5f), *c = cal_act(256 * 256, 0.f);
    rt_matmul(c, a, a, 256, 256, 256, false, false, false);
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
    cal_out(o, "mem base %.0f", base);
    cal_out(o, "mem comm %.0f", per > 0 ? per : 0);
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
    cal_out(o, "host %lld %.9g", (long long)h.seq, t);
    cal_progress(o, "host: %.1f ns per token loaded", t / (double)h.seq * 1e9 / 2);
    rt_data_close(h.d);
    free(h.tok);
    free(h.tgt);
    rt_free(a);
    rt_free(c);
}
