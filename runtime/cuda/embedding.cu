/* embedding.cu: (vocabulary-parallel) embedding lookup and its deterministic
 * backward.
 *
 * Forward: a warp-row per token copies (16-byte vectors when aligned) the
 * table row or zeros. Memory-bound: ~85% of HBM bandwidth.
 *
 * Backward, without atomics: the token positions are radix-sorted by local
 * row (CUB, stable, so positions with the same id stay in ascending order);
 * the first position of each run of equal ids owns that table row and adds
 * the run's dout rows in that order in fp32, then adds the sum to the fp32
 * dtable (rt_grad) once. Bitwise reproducible. Cost: a sort of n 32-bit keys (a few us for
 * n = 16K) plus one read of dout and one read-modify-write of the touched
 * table rows; a very frequent token serialises its run in one block.
 *
 * Ids below 0 are reported through the device error word and abort at the
 * next synchronisation (the global vocabulary size is not known here, so ids
 * past it look like another rank's rows). */
#include "cu_dev.cuh"

#ifndef PTDC_CUDA_EMU
#include <cub/device/device_radix_sort.cuh>
#define RTCU_SORT_PAIRS cub::DeviceRadixSort::SortPairs
#else
#define RTCU_SORT_PAIRS emu::sort_pairs /* a stable host sort (emu/emu.cpp) */
#endif

#include <limits.h>

static __global__ void k_embed_fwd(rt_act *out, const int32_t *ids, const rt_act *table, int64_t n,
                                   int64_t vl, int64_t off, int64_t dim, bool vec, RtcuDevErr *err)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; i < n; i += (int64_t)gridDim.x * blockDim.y) {
        int64_t id = ids[i], r = id - off;
        if (id < 0 && threadIdx.x == 0) rtcu_report(err, RTCU_ERR_EMBED_ID, id, i);
        bool here = id >= 0 && r >= 0 && r < vl;
        rt_act *o = out + i * dim;
        const rt_act *t = table + (here ? r : 0) * dim;
        if (vec) {
            for (int64_t j = 8 * threadIdx.x; j < dim; j += 8 * blockDim.x) {
                uint4 v = here ? *reinterpret_cast<const uint4 *>(t + j) : make_uint4(0, 0, 0, 0);
                *reinterpret_cast<uint4 *>(o + j) = v;
            }
        } else {
            for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) o[j] = here ? t[j] : bf(0.0f);
        }
    }
}

void rt_embedding_fwd(rt_act *out, const int32_t *ids, const rt_act *table, int64_t n, int64_t vocab_local,
                      int64_t vocab_offset, int64_t dim)
{
    rtcu_require_init("rt_embedding_fwd");
    if (n <= 0 || dim <= 0) return;
    size_t es = sizeof(rt_act);
    rtcu_deps({{out, (size_t)(n * dim) * es}, {ids, (size_t)n * 4}, {table, (size_t)(vocab_local * dim) * es}});
    bool vec = dim % 8 == 0 && rtcu_aligned16(out, table);
    RTCU_LAUNCH(k_embed_fwd, rtcu_grid(n, 8), dim3(32, 8), 0)(out, ids, table, n, vocab_local, vocab_offset,
                                                                  dim, vec, rtcu.dev_err);
    LAUNCH_CHECK();
}

/* key = local row, or vl (sorts last) for ids of other ranks. */
static __global__ void k_embed_keys(unsigned *keys, unsigned *pos, const int32_t *ids, int64_t n, int64_t vl,
                                    int64_t off, RtcuDevErr *err)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t id = ids[i], r = id - off;
        if (id < 0) rtcu_report(err, RTCU_ERR_EMBED_ID, id, i);
        keys[i] = (unsigned)(id >= 0 && r >= 0 && r < vl ? r : vl);
        pos[i] = (unsigned)i;
    }
}

/* Block (p, column chunk): if sorted position p starts a run of one row,
 * sum the run's dout rows in order and add them to that table row. */
static __global__ void k_embed_bwd(rt_grad *dtable, const unsigned *keys, const unsigned *pos, const rt_act *dout,
                                   int64_t n, int64_t vl, int64_t dim)
{
    int64_t p = blockIdx.x, j = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    unsigned k = keys[p];
    if (k >= (unsigned)vl || (p > 0 && keys[p - 1] == k) || j >= dim) return;
    float s = 0.0f;
    for (int64_t q = p; q < n && keys[q] == k; q++) s += ld(dout + (int64_t)pos[q] * dim + j);
    rt_grad *t = dtable + (int64_t)k * dim + j;
    *t += s;
}

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

void rt_embedding_bwd(rt_grad *dtable, const int32_t *ids, const rt_act *dout, int64_t n, int64_t vocab_local,
                      int64_t vocab_offset, int64_t dim)
{
    rtcu_require_init("rt_embedding_bwd");
    if (n <= 0 || dim <= 0 || vocab_local <= 0) return;
    if (n > INT_MAX || vocab_local >= (int64_t)UINT_MAX)
        rt_fatal("rt_embedding_bwd: %lld tokens / %lld rows exceed one sort", (long long)n, (long long)vocab_local);
    size_t es = sizeof(rt_act);
    rtcu_deps({{dtable, (size_t)(vocab_local * dim) * sizeof(rt_grad)}, {ids, (size_t)n * 4}, {dout, (size_t)(n * dim) * es}});
    int end_bit = 1;
    while (end_bit < 32 && ((uint64_t)1 << end_bit) <= (uint64_t)vocab_local) end_bit++;
    size_t tmp = 0;
    CUDA_CHECK(RTCU_SORT_PAIRS(NULL, tmp, (unsigned *)NULL, (unsigned *)NULL, (unsigned *)NULL,
                                               (unsigned *)NULL, (int)n, 0, end_bit, rtcu.compute));
    size_t a = align256((size_t)n * 4);
    char *s = (char *)rtcu_scratch(4 * a + align256(tmp));
    unsigned *keys = (unsigned *)s, *pos = (unsigned *)(s + a), *keys2 = (unsigned *)(s + 2 * a),
             *pos2 = (unsigned *)(s + 3 * a);
    RTCU_LAUNCH(k_embed_keys, rtcu_grid(n, 256), 256, 0)(keys, pos, ids, n, vocab_local, vocab_offset,
                                                              rtcu.dev_err);
    LAUNCH_CHECK();
    CUDA_CHECK(RTCU_SORT_PAIRS(s + 4 * a, tmp, keys, keys2, pos, pos2, (int)n, 0, end_bit,
                                               rtcu.compute));
    int T = dim >= 256 ? 256 : (int)(32 * rtcu_cdiv(dim, 32));
    rtcu_check_grid("rt_embedding_bwd", n, rtcu_cdiv(dim, T), 1);
    RTCU_LAUNCH(k_embed_bwd, dim3((unsigned)n, (unsigned)rtcu_cdiv(dim, T)), T, 0)(dtable, keys2, pos2, dout,
                                                                                         n, vocab_local, dim);
    LAUNCH_CHECK();
}
