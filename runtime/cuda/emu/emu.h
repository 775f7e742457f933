/* emu.h: a host SIMT emulator for the CUDA backend's kernels, for tests on
 * machines without a GPU (tests/gpu: gpu.emu). Not part of libptdrt_cuda.
 *
 * Compiled with a host C++ compiler and -DPTDC_CUDA_EMU, the runtime's .cu
 * files run their kernels here: every CUDA thread is a fiber (ucontext) of
 * one host thread; blocks run one after another; __syncthreads is a barrier
 * of the block's live fibers, warp shuffles and mma.sync exchange registers
 * through a barrier of the warp's 32 fibers. Warps run one at a time from
 * one __syncthreads to the next, in index order in even blocks and in
 * reverse in odd ones, so a missing barrier shows in one of the orders (a
 * read before another warp's write, or a write before another warp's
 * read); __shared__ variables become
 * statics (one block at a time, so one copy suffices); dynamic shared memory
 * is a buffer filled with 0xff (NaN) before each block so reads of unwritten
 * shared memory show up. mma.m16n8k16 is computed from the PTX ISA fragment
 * layouts (the ones attention_mma.cu is written against) in fp32.
 *
 * ldmatrix (.x1/.x2/.x4, .trans) reads the rows the 32 lanes address, as
 * the PTX ISA distributes them. cp.async copies are queued per thread in
 * commit groups and land at cp.async.wait_group (even block pairs) or at
 * once when issued (odd pairs): a read before the wait and its barrier sees
 * stale or NaN data in the first mode, and a copy into a buffer other warps
 * still read corrupts their result in the second.
 *
 * Shared-memory bank accounting: every warp-wide shared access made through
 * these calls (ldmatrix, cp.async, smem_note) is counted per site: the
 * access is split into the phases the hardware serves (a phase moves at
 * most 128 bytes: 32 lanes of 4 bytes, 16 of 8, 8 of 16, one 8x8 matrix of
 * ldmatrix), and a phase costs as many wavefronts as the largest number of
 * distinct 4-byte words that fall into one of the 32 banks (equal words are
 * broadcast). Ideal is ceil(distinct words / 32) per phase; wavefronts over
 * ideal is the conflict degree ("16-way").
 *
 * What it checks: indexing, masking, tiling, barriers, reductions, fragment
 * bookkeeping, numerics in fp32, warp-collective calls made by all 32 lanes
 * at the same site, bank conflicts. What it cannot: timing, memory-model
 * races between warps without a barrier (fibers switch only at barriers),
 * real tensor-core rounding, anything else about performance.
 *
 * Launches (RTCU_LAUNCH) are queued on their stream and run when the
 * stream scheduler gets to them (emu_sched.h: streams, events, the legacy
 * default stream, a seeded random legal order); NCCL runs over MPI with its
 * ordering and threading rules checked (emu_nccl.cpp). */
#ifndef PTDC_RUNTIME_CUDA_EMU_H
#define PTDC_RUNTIME_CUDA_EMU_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include <vector>

#include "emu_sched.h"

#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

namespace emu {

/* Run body() for every thread of every block of the grid. */
void run_grid(dim3 grid, dim3 block, size_t smem, void (*tramp)(void *), void *arg);
void block_barrier();
void warp_barrier();
void *dyn_smem();
/* Exchange 8 bytes with lane (mine ^ mask) of the same warp. */
uint64_t shfl_xor64(uint64_t v, int mask);
void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2]);
/* ldmatrix.sync.aligned.m8n8.x{nmat}[.trans].shared.b16: lane l gives the
 * address of row l % 8 of matrix l / 8 (16 bytes in dynamic shared memory);
 * r[i] receives its part of matrix i. Warp-collective. */
void ldmatrix(uint32_t *r, int nmat, const void *row, bool trans, const char *site);
/* cp.async of `bytes` (4, 8 or 16) from global src to shared dst, reading
 * src_bytes of them and zero-filling the rest. Warp-collective (each lane
 * its own copy; dst nullptr: this lane copies nothing). */
void cp_async(void *dst, const void *src, int bytes, int src_bytes, const char *site);
void cp_async_commit();
/* Wait until at most n of this thread's committed groups are pending. */
void cp_async_wait(int n);
/* Accounting only, for a plain shared load or store the caller then makes:
 * warp-collective; p nullptr: this lane does not access. */
void smem_note(const void *p, int bytes, bool store, const char *site);

struct BankStat {
    const char *site;
    uint64_t requests;   /* warp-wide accesses */
    uint64_t wavefronts; /* what they cost */
    uint64_t ideal;      /* what they would cost without conflicts */
    uint64_t worst;      /* largest wavefronts / ideal of one request, rounded up */
};
void bank_reset();
/* Accumulated since the last reset, one entry per site (sorted by name). */
std::vector<BankStat> bank_stats();
/* cub::DeviceRadixSort::SortPairs on unsigned keys and values (stable). */
cudaError_t sort_pairs(void *tmp, size_t &tmp_bytes, const unsigned *kin, unsigned *kout, const unsigned *vin,
                       unsigned *vout, int n, int begin_bit, int end_bit, cudaStream_t s);

template <class F>
void tramp_of(void *p)
{
    (*static_cast<F *>(p))();
}

/* A kernel launch: queued on its stream with its arguments by value (as
 * CUDA copies them), run when the scheduler (emu_sched.h) gets to it. */
template <class... P>
struct Launch {
    void (*k)(P...);
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    template <class... A>
    void operator()(A... args) const
    {
        void (*kk)(P...) = k;
        dim3 g = grid, b = block;
        size_t sm = smem;
        submit(stream, "kernel", [=]() {
            auto body = [&]() { kk(static_cast<P>(args)...); };
            run_grid(g, b, sm, tramp_of<decltype(body)>, (void *)&body);
        });
    }
};

template <class... P>
Launch<P...> launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s)
{
    return Launch<P...>{k, grid, block, smem, s};
}

} // namespace emu

static inline void __syncthreads() { emu::block_barrier(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu::warp_barrier(); }
static inline void __threadfence() {}
/* A product the compiler may not fuse into an FMA (IEEE round to nearest). */
static inline float __fmul_rn(float a, float b) { return a * b; }

template <class T>
static inline T __shfl_xor_sync(unsigned, T v, int mask)
{
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    u = emu::shfl_xor64(u, mask);
    T r;
    memcpy(&r, &u, sizeof r);
    return r;
}

static inline int atomicCAS(int *p, int cmp, int val)
{
    int old = *p;
    if (old == cmp) *p = val;
    return old;
}
/* Blocks run one after another and fibers switch only at barriers, so a
 * plain read-modify-write is atomic here. */
static inline float atomicAdd(float *p, float val)
{
    float old = *p;
    *p = old + val;
    return old;
}
static inline int atomicExch(int *p, int val)
{
    int old = *p;
    *p = val;
    return old;
}

/* The runtime launches on its compute stream; code without the runtime
 * defines RTCU_EMU_STREAM first. */
#ifndef RTCU_EMU_STREAM
#define RTCU_EMU_STREAM rtcu.compute
#endif
#define RTCU_LAUNCH(k, grid, blk, smem) emu::launch(k, dim3(grid), dim3(blk), (size_t)(smem), RTCU_EMU_STREAM)
#define RTCU_DYN_SMEM(T, name) T *name = (T *)emu::dyn_smem()

#endif
