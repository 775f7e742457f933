/* emu.h: a host SIMT emulator for the CUDA backend's kernels, for tests on
 * machines without a GPU (tests/gpu: gpu.emu). Not part of libptdrt_cuda.
 *
 * Compiled with a host C++ compiler and -DPTDC_CUDA_EMU, the runtime's .cu
 * files run their kernels here: every CUDA thread is a fiber (ucontext) of
 * one host thread; blocks run one after another; __syncthreads is a barrier
 * of the block's live fibers, warp shuffles and mma.sync exchange registers
 * through a barrier of the warp's 32 fibers (threads run in index order in
 * even blocks and in reverse in odd ones, so a missing barrier shows in one
 * of the orders); __shared__ variables become
 * statics (one block at a time, so one copy suffices); dynamic shared memory
 * is a buffer filled with 0xff (NaN) before each block so reads of unwritten
 * shared memory show up. mma.m16n8k16 is computed from the PTX ISA fragment
 * layouts (the ones attention_mma.cu is written against) in fp32.
 *
 * What it checks: indexing, masking, tiling, barriers, reductions, fragment
 * bookkeeping, numerics in fp32. What it cannot: timing, memory-model races
 * between warps without a barrier (fibers switch only at barriers), real
 * tensor-core rounding, NCCL and multi-GPU behaviour (emu_api.cpp stubs a
 * single rank), anything about performance. */
#ifndef PTDC_RUNTIME_CUDA_EMU_H
#define PTDC_RUNTIME_CUDA_EMU_H

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

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
/* cub::DeviceRadixSort::SortPairs on unsigned keys and values (stable). */
cudaError_t sort_pairs(void *tmp, size_t &tmp_bytes, const unsigned *kin, unsigned *kout, const unsigned *vin,
                       unsigned *vout, int n, int begin_bit, int end_bit, cudaStream_t s);

template <class F>
void tramp_of(void *p)
{
    (*static_cast<F *>(p))();
}

template <class... P>
struct Launch {
    void (*k)(P...);
    dim3 grid, block;
    size_t smem;
    template <class... A>
    void operator()(A... args) const
    {
        auto body = [this, args...]() { k(static_cast<P>(args)...); };
        run_grid(grid, block, smem, tramp_of<decltype(body)>, (void *)&body);
    }
};

template <class... P>
Launch<P...> launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem)
{
    return Launch<P...>{k, grid, block, smem};
}

} // namespace emu

static inline void __syncthreads() { emu::block_barrier(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu::warp_barrier(); }
static inline void __threadfence() {}

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
static inline int atomicExch(int *p, int val)
{
    int old = *p;
    *p = val;
    return old;
}

#define RTCU_LAUNCH(k, grid, blk, smem) emu::launch(k, dim3(grid), dim3(blk), (size_t)(smem))
#define RTCU_DYN_SMEM(T, name) T *name = (T *)emu::dyn_smem()

#endif
