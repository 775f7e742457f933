/* memory.cu: device allocation, copies and fp32 <-> bf16 conversion.
 *
 * Everything is ordered on the compute stream (after any pending collective
 * on the same bytes, via rtcu_deps); copies to and from the host return only
 * when the data has arrived. */
#include "cu.h"

#include <stdlib.h>
#include <string.h>

void *rt_alloc(size_t bytes)
{
    rtcu_require_init("rt_alloc");
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError(); /* clear the (non-sticky) allocation error */
        cudaMemGetInfo(&fr, &tot);
        rt_fatal("rt_alloc: cannot allocate %zu bytes on GPU %d (%zu of %zu bytes free): %s", bytes,
                 rtcu.device, fr, tot, cudaGetErrorString(e));
    }
    /* rt.h: zeroed. On compute, which every later use of the memory is
     * ordered after (kernels run there; communicators' streams wait for it):
     * cudaMemset would run on the legacy default stream, which the
     * runtime's non-blocking streams do not wait for, so the zeroing could
     * land after the first writes. */
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, rtcu.compute));
    return p;
}

void rt_free(void *p)
{
    rtcu_require_init("rt_free");
    if (!p) return;
    rtcu_sync();
    CUDA_SYNC_CHECK(cudaFree(p));
}

void rt_zero(void *dst, size_t bytes)
{
    rtcu_require_init("rt_zero");
    if (bytes == 0) return;
    rtcu_deps({{dst, bytes}});
    CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, rtcu.compute));
}

void rt_copy(void *dst, const void *src, size_t bytes)
{
    rtcu_require_init("rt_copy");
    if (bytes == 0 || dst == src) return;
    rtcu_deps({{dst, bytes}, {src, bytes}});
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, rtcu.compute));
}

void rt_to_device(void *dst, const void *host_src, size_t bytes)
{
    rtcu_require_init("rt_to_device");
    if (bytes == 0) return;
    rtcu_deps({{dst, bytes}});
    CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, rtcu.compute));
    CUDA_SYNC_CHECK(cudaStreamSynchronize(rtcu.compute)); /* host_src may change after return */
}

void rt_to_host(void *host_dst, const void *src, size_t bytes)
{
    rtcu_require_init("rt_to_host");
    if (bytes == 0) return;
    rtcu_deps({{src, bytes}});
    /* Into pageable memory cudaMemcpyAsync returns only when the copy is
     * done: a wait like the synchronisation, timed by the watchdog. */
    CUDA_SYNC_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, rtcu.compute));
    CUDA_SYNC_CHECK(cudaStreamSynchronize(rtcu.compute));
    rtcu_check_dev_err();
}

/* Page-locked, so copies from it are truly asynchronous (rt_to_device_async,
 * comm.cu). */
void *rt_host_alloc(size_t bytes)
{
    rtcu_require_init("rt_host_alloc");
    void *p = NULL;
    CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 1));
    return p;
}

void rt_host_free(void *p)
{
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

/* Conversions go through a host staging buffer in chunks. */
static const int64_t CHUNK = 1 << 22;

void rt_act_from_f32(rt_act *dst, const float *host_src, int64_t n)
{
    rtcu_require_init("rt_act_from_f32");
    if (n <= 0) return;
    rtcu_deps({{dst, (size_t)n * sizeof(rt_act)}});
    int64_t c = n < CHUNK ? n : CHUNK;
    rt_act *stage = (rt_act *)malloc((size_t)c * sizeof(rt_act));
    if (!stage) rt_fatal("out of host memory");
    for (int64_t i = 0; i < n; i += c) {
        int64_t m = n - i < c ? n - i : c;
        for (int64_t j = 0; j < m; j++) stage[j] = __float2bfloat16(host_src[i + j]); /* RNE */
        CUDA_CHECK(cudaMemcpyAsync(dst + i, stage, (size_t)m * sizeof(rt_act), cudaMemcpyHostToDevice,
                                   rtcu.compute));
        CUDA_SYNC_CHECK(cudaStreamSynchronize(rtcu.compute));
    }
    free(stage);
}

void rt_act_to_f32(float *host_dst, const rt_act *src, int64_t n)
{
    rtcu_require_init("rt_act_to_f32");
    if (n <= 0) return;
    rtcu_deps({{src, (size_t)n * sizeof(rt_act)}});
    int64_t c = n < CHUNK ? n : CHUNK;
    rt_act *stage = (rt_act *)malloc((size_t)c * sizeof(rt_act));
    if (!stage) rt_fatal("out of host memory");
    for (int64_t i = 0; i < n; i += c) {
        int64_t m = n - i < c ? n - i : c;
        CUDA_SYNC_CHECK(cudaMemcpyAsync(stage, src + i, (size_t)m * sizeof(rt_act), cudaMemcpyDeviceToHost,
                                   rtcu.compute));
        CUDA_SYNC_CHECK(cudaStreamSynchronize(rtcu.compute));
        for (int64_t j = 0; j < m; j++) host_dst[i + j] = __bfloat162float(stage[j]);
    }
    free(stage);
    rtcu_check_dev_err();
}

/* ------------------------------------------------------------- scratch */
static void *scratch;
static size_t scratch_cap;

void *rtcu_scratch(size_t bytes)
{
    if (bytes <= scratch_cap) return scratch;
    size_t cap = scratch_cap ? scratch_cap : (1 << 20);
    while (cap < bytes) cap *= 2;
    /* Stream-ordered: kernels still queued on compute keep the old buffer. */
    if (scratch) CUDA_CHECK(cudaFreeAsync(scratch, rtcu.compute));
    CUDA_CHECK(cudaMallocAsync(&scratch, cap, rtcu.compute));
    scratch_cap = cap;
    return scratch;
}

void rtcu_scratch_free(void)
{
    if (scratch) CUDA_CHECK(cudaFreeAsync(scratch, rtcu.compute));
    CUDA_SYNC_CHECK(cudaStreamSynchronize(rtcu.compute));
    scratch = NULL;
    scratch_cap = 0;
}
