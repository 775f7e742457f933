/* memory.c: memory of the CPU backend.
 *
 * Large allocations (the program's arena) are anonymous mappings asking for
 * transparent huge pages: the kernel hands them out zeroed, so rt_alloc
 * writes nothing, and the first touch of each 2 MiB costs one page fault
 * instead of 512. Large zeroing and copies run on the rank's threads in
 * blocks, so that first touch (the trainer zeroes its arena at start-up) is
 * spread over the cores. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu.h"
#include "simd.h"

enum { MAP_MIN = 4 << 20, HUGE = 2 << 20, BLOCK = 1 << 20 };

/* Mappings made by rt_alloc, for rt_free (few: one arena per program). */
typedef struct Map {
    void *p;
    size_t bytes;
    struct Map *next;
} Map;
static Map *maps;

/* 64-byte aligned (cache lines, AVX-512 loads) and zeroed, so a program that
 * reads a buffer before writing it is at least deterministic. */
void *rt_alloc(size_t bytes)
{
    size_t n = (bytes + 63) / 64 * 64;
    if (n == 0)
        n = 64;
    if (n >= MAP_MIN) {
        /* 2 MiB-aligned: map one huge page more and trim both ends. */
        size_t len = (n + HUGE - 1) / HUGE * HUGE;
        char *raw = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED)
            rt_fatal("ptdrt: out of memory allocating %zu bytes", bytes);
        char *p = (char *)(((uintptr_t)raw + HUGE - 1) / HUGE * HUGE);
        if (p > raw)
            munmap(raw, (size_t)(p - raw));
        if (raw + len + HUGE > p + len)
            munmap(p + len, (size_t)(raw + len + HUGE - (p + len)));
#ifdef MADV_HUGEPAGE
        madvise(p, len, MADV_HUGEPAGE); /* a hint: without it, small pages */
#endif
        Map *m = rtcpu_xmalloc(sizeof *m);
        *m = (Map){p, len, maps};
        maps = m;
        return p;
    }
    void *p = aligned_alloc(64, n);
    if (!p)
        rt_fatal("ptdrt: out of memory allocating %zu bytes", bytes);
    memset(p, 0, n);
    return p;
}

/* Per-thread scratch: grow-only buffers reused by every kernel call, so that
 * kernels neither malloc nor fault in fresh pages each call (a few hundred
 * KiB per call went through mmap and the kernel's page clearing: 12% of a
 * step). Thread-local: the OpenMP workers live as long as the program. */
static _Thread_local struct {
    void *p;
    size_t bytes;
} scratch[RTCPU_SCRATCH_SLOTS];

void *rtcpu_scratch(int slot, size_t bytes)
{
    if (scratch[slot].bytes < bytes) {
        free(scratch[slot].p);
        size_t n = bytes + bytes / 4 + 4096;
        scratch[slot].p = aligned_alloc(64, (n + 63) / 64 * 64);
        if (!scratch[slot].p)
            rt_fatal("ptdrt: out of host memory allocating %zu bytes of scratch", n);
        scratch[slot].bytes = n;
    }
    return scratch[slot].p;
}

void rt_free(void *p)
{
    for (Map **m = &maps; *m; m = &(*m)->next)
        if ((*m)->p == p) {
            Map *dead = *m;
            *m = dead->next;
            munmap(dead->p, dead->bytes);
            free(dead);
            return;
        }
    free(p);
}

void rt_zero(void *dst, size_t bytes)
{
    if (bytes < 4 * BLOCK) {
        if (bytes)
            memset(dst, 0, bytes);
        return;
    }
    int64_t nb = (int64_t)((bytes + BLOCK - 1) / BLOCK);
    RTCPU_PRAGMA(omp parallel for schedule(static))
    for (int64_t b = 0; b < nb; b++) {
        size_t lo = (size_t)b * BLOCK, len = bytes - lo < BLOCK ? bytes - lo : BLOCK;
        memset((char *)dst + lo, 0, len);
    }
}

void rt_copy(void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src)
        return;
    const char *s = src;
    char *d = dst;
    if (bytes < 4 * BLOCK || (d < s + bytes && s < d + bytes)) { /* small, or overlapping */
        memmove(dst, src, bytes);
        return;
    }
    int64_t nb = (int64_t)((bytes + BLOCK - 1) / BLOCK);
    RTCPU_PRAGMA(omp parallel for schedule(static))
    for (int64_t b = 0; b < nb; b++) {
        size_t lo = (size_t)b * BLOCK, len = bytes - lo < BLOCK ? bytes - lo : BLOCK;
        memcpy(d + lo, s + lo, len);
    }
}

void rt_to_device(void *dst, const void *host_src, size_t bytes)
{
    rt_copy(dst, host_src, bytes);
}

void rt_to_host(void *host_dst, const void *src, size_t bytes)
{
    rt_copy(host_dst, src, bytes);
}

void rt_act_from_f32(rt_act *dst, const float *host_src, int64_t n)
{
    rt_copy(dst, host_src, (size_t)n * sizeof *dst);
}

void rt_act_to_f32(float *host_dst, const rt_act *src, int64_t n)
{
    rt_copy(host_dst, src, (size_t)n * sizeof *src);
}

/* Host staging buffers are plain memory: the "device" is the host. */
void *rt_host_alloc(size_t bytes)
{
    return rtcpu_xmalloc(bytes);
}

void rt_host_free(void *p)
{
    free(p);
}

RtReq *rt_to_device_async(void *dst, const void *host_src, size_t bytes)
{
    rt_copy(dst, host_src, bytes);
    RtReq *r = rtcpu_xmalloc(sizeof *r);
    memset(r, 0, sizeof *r);
    r->kind = RTREQ_DONE;
    return r;
}
