/* emu.cpp: fibers, barriers, shuffles and mma for the SIMT emulator (emu.h). */
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <ucontext.h>

#include <algorithm>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace emu {
namespace {

enum { RUN, WAIT_BLOCK, WAIT_WARP, DONE };
constexpr size_t STACK = 256 * 1024;

/* Fibers start through makecontext/swapcontext and switch afterwards with
 * _setjmp/_longjmp, which, unlike swapcontext, make no signal-mask system
 * call: the switch is a few dozen instructions. */
struct Fiber {
    ucontext_t ctx;
    jmp_buf jb;
    uint3 tid;
    int lin, state, started;
    char *stack;
};

struct Block {
    std::vector<Fiber> f;
    ucontext_t sched;
    jmp_buf sched_jb;
    int cur = 0, live = 0, arrived = 0;
    int warp_live[32] = {}, warp_arrived[32] = {};
    uint64_t xchg[32][32];       /* [warp][lane] */
    uint32_t ma[32][32][4], mb[32][32][2];
    float mc[32][32][4];
    void (*tramp)(void *) = nullptr;
    void *arg = nullptr;
} B;

std::vector<char> smem_buf;

[[noreturn]] void die(const char *msg)
{
    fprintf(stderr, "emu: %s (block %u,%u,%u)\n", msg, blockIdx.x, blockIdx.y, blockIdx.z);
    abort();
}

Fiber &me() { return B.f[(size_t)B.cur]; }

void release_block()
{
    for (auto &x : B.f)
        if (x.state == WAIT_BLOCK) x.state = RUN;
    B.arrived = 0;
}

void release_warp(int w)
{
    for (auto &x : B.f)
        if (x.state == WAIT_WARP && x.lin / 32 == w) x.state = RUN;
    B.warp_arrived[w] = 0;
}

void entry()
{
    B.tramp(B.arg);
    Fiber &m = me();
    m.state = DONE;
    int w = m.lin / 32;
    B.live--;
    B.warp_live[w]--;
    /* exited threads no longer count at barriers */
    if (B.arrived > 0 && B.arrived == B.live) release_block();
    if (B.warp_arrived[w] > 0 && B.warp_arrived[w] == B.warp_live[w]) release_warp(w);
    _longjmp(B.sched_jb, 1); /* never returns: the stack is reused */
}

/* From a fiber back to the scheduler; returns when resumed. */
void yield(Fiber &m)
{
    if (!_setjmp(m.jb)) _longjmp(B.sched_jb, 1);
}

} // namespace

void *dyn_smem() { return smem_buf.data(); }

void block_barrier()
{
    Fiber &m = me();
    m.state = WAIT_BLOCK;
    if (++B.arrived == B.live) release_block();
    yield(m);
}

void warp_barrier()
{
    Fiber &m = me();
    int w = m.lin / 32;
    m.state = WAIT_WARP;
    if (++B.warp_arrived[w] == B.warp_live[w]) release_warp(w);
    yield(m);
}

uint64_t shfl_xor64(uint64_t v, int mask)
{
    int lin = me().lin, w = lin / 32, lane = lin % 32;
    if (B.warp_live[w] != 32) die("shuffle in a warp with exited or missing lanes");
    B.xchg[w][lane] = v;
    warp_barrier();
    uint64_t r = B.xchg[w][lane ^ (mask & 31)];
    warp_barrier();
    return r;
}

static float bf_lo(uint32_t u)
{
    uint32_t x = (u & 0xffffu) << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static float bf_hi(uint32_t u)
{
    uint32_t x = u & 0xffff0000u;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static float half_of(uint32_t u, int h) { return h ? bf_hi(u) : bf_lo(u); }

/* PTX ISA m16n8k16 bf16 layouts, g = lane / 4, t = lane % 4:
 * A[r][k]: lane 4 (r % 8) + (k % 8) / 2, register (r / 8) + 2 (k / 8), half k % 2
 * B[k][n]: lane 4 n + (k % 8) / 2, register k / 8, half k % 2
 * C[r][n]: lane 4 (r % 8) + (n % 8) / 2, register 2 (r / 8) + n % 2 */
void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2])
{
    int lin = me().lin, w = lin / 32, lane = lin % 32;
    if (B.warp_live[w] != 32) die("mma in a warp with exited or missing lanes");
    memcpy(B.ma[w][lane], a, sizeof B.ma[w][lane]);
    memcpy(B.mb[w][lane], b, sizeof B.mb[w][lane]);
    memcpy(B.mc[w][lane], c, sizeof B.mc[w][lane]);
    warp_barrier();
    int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; i++) {
        int r = g + 8 * (i / 2), n = 2 * t + (i % 2);
        float acc = B.mc[w][lane][i];
        for (int k = 0; k < 16; k++) {
            float av = half_of(B.ma[w][4 * (r % 8) + (k % 8) / 2][(r / 8) + 2 * (k / 8)], k % 2);
            float bv = half_of(B.mb[w][4 * n + (k % 8) / 2][k / 8], k % 2);
            acc += av * bv;
        }
        c[i] = acc;
    }
    warp_barrier();
}

cudaError_t sort_pairs(void *tmp, size_t &tmp_bytes, const unsigned *kin, unsigned *kout, const unsigned *vin,
                       unsigned *vout, int n, int begin_bit, int end_bit, cudaStream_t)
{
    if (!tmp) {
        tmp_bytes = 16;
        return cudaSuccess;
    }
    unsigned mask = (end_bit >= 32 ? ~0u : ((1u << end_bit) - 1)) & ~((1u << begin_bit) - 1);
    std::vector<int> idx((size_t)n);
    for (int i = 0; i < n; i++) idx[(size_t)i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](int x, int y) { return (kin[x] & mask) < (kin[y] & mask); });
    std::vector<unsigned> k2((size_t)n), v2((size_t)n);
    for (int i = 0; i < n; i++) {
        k2[(size_t)i] = kin[idx[(size_t)i]];
        v2[(size_t)i] = vin[idx[(size_t)i]];
    }
    std::copy(k2.begin(), k2.end(), kout);
    std::copy(v2.begin(), v2.end(), vout);
    return cudaSuccess;
}

/* Run fiber x until it yields or ends. A function of its own, so no local
 * of the caller lives across the _setjmp. */
__attribute__((noinline)) static void resume(Fiber &x)
{
    if (!_setjmp(B.sched_jb)) {
        if (x.started) _longjmp(x.jb, 1);
        x.started = 1;
        swapcontext(&B.sched, &x.ctx);
    }
}

void run_grid(dim3 grid, dim3 block, size_t smem, void (*tramp)(void *), void *arg)
{
    int nt = (int)(block.x * block.y * block.z);
    if (nt <= 0 || nt > 1024) die("block size outside 1..1024");
    if (grid.y > 65535 || grid.z > 65535) die("grid y or z above 65535");
    gridDim = grid;
    blockDim = block;
    B.tramp = tramp;
    B.arg = arg;
    if (B.f.size() < (size_t)nt) {
        size_t old = B.f.size();
        B.f.resize((size_t)nt);
        for (size_t i = old; i < (size_t)nt; i++) B.f[i].stack = (char *)malloc(STACK);
    }
    smem_buf.assign(smem + 16, (char)0xff);
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = make_uint3(bx, by, bz);
                memset(smem_buf.data(), 0xff, smem_buf.size());
                B.live = nt;
                B.arrived = 0;
                for (int w = 0; w < 32; w++) {
                    B.warp_live[w] = w * 32 < nt ? (nt - w * 32 < 32 ? nt - w * 32 : 32) : 0;
                    B.warp_arrived[w] = 0;
                }
                for (int i = 0; i < nt; i++) {
                    Fiber &x = B.f[(size_t)i];
                    x.lin = i;
                    x.tid = make_uint3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
                    x.state = RUN;
                    x.started = 0;
                    getcontext(&x.ctx);
                    x.ctx.uc_stack.ss_sp = x.stack;
                    x.ctx.uc_stack.ss_size = STACK;
                    x.ctx.uc_link = &B.sched;
                    makecontext(&x.ctx, entry, 0);
                }
                /* Alternate the order threads run between barriers, so a
                 * read of another thread's write without a barrier between
                 * them sees unwritten data in one of the orders. */
                bool rev = (bx + by + bz) % 2 == 1;
                for (;;) {
                    bool ran = false, done = true;
                    for (int j = 0; j < nt; j++) {
                        int i = rev ? nt - 1 - j : j;
                        Fiber &x = B.f[(size_t)i];
                        if (x.state != DONE) done = false;
                        if (x.state != RUN) continue;
                        B.cur = i;
                        threadIdx = x.tid;
                        ran = true;
                        resume(x);
                    }
                    if (done) break;
                    if (!ran) die("deadlock: threads wait at different barriers");
                }
            }
}

} // namespace emu
