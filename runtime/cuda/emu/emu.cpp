/* emu.cpp: fibers, barriers, shuffles and mma for the SIMT emulator (emu.h). */
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <ucontext.h>

#include <algorithm>
#include <map>
#include <string>
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
/* A cp.async in flight: lands when its group is waited for (or at once in
 * blocks that land copies eagerly). group 0: not committed yet. */
struct Copy {
    char *dst;
    const char *src;
    int bytes, src_bytes, group;
};

struct Fiber {
    ucontext_t ctx;
    jmp_buf jb;
    uint3 tid;
    int lin, state, started;
    char *stack;
    std::vector<Copy> copies;
    int groups; /* committed so far */
};

/* One lane's part of a warp-collective shared-memory access. */
struct Rec {
    const char *p;
    const char *site;
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
    Rec rec[32][32];
    int xmask[32][32];      /* shuffle masks */
    uint64_t xout[32][32];  /* shuffle results */
    float mo[32][32][4];    /* mma results */
    uint32_t lo[32][32][4]; /* ldmatrix results */
    int lnmat[32][32];
    bool ltrans[32][32];
    bool eager; /* cp.async copies land when issued */
    void (*tramp)(void *) = nullptr;
    void *arg = nullptr;
} B;

/* Dynamic shared memory, 128-byte aligned (ldmatrix and cp.async check
 * alignment; banks are counted from its start). */
std::vector<char> smem_store;
char *smem_base;
size_t smem_size;

std::map<const char *, BankStat> bank_by_site;

[[noreturn]] void kdie(const char *msg)
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

void *dyn_smem() { return smem_base; }

static bool in_smem(const void *p, size_t n)
{
    const char *c = (const char *)p;
    return c >= smem_base && c + n <= smem_base + smem_size;
}

/* Bank of a 4-byte word: counted from the start of shared memory when the
 * address is in it (the kernels' own layout), else from the address. */
static uintptr_t word_of(const char *p)
{
    return (in_smem(p, 1) ? (uintptr_t)(p - smem_base) : (uintptr_t)p) / 4;
}

/* Phases of `lanes` lanes each; lane i accesses bytes [p, p + bytes) (p
 * nullptr: inactive). Adds one request to site's statistics. */
static void count_banks(const char *site, const Rec *r, int bytes, int lanes_per_phase)
{
    uint64_t wf = 0, ideal = 0;
    for (int p0 = 0; p0 < 32; p0 += lanes_per_phase) {
        std::vector<uintptr_t> words;
        for (int l = p0; l < p0 + lanes_per_phase && l < 32; l++) {
            if (!r[l].p) continue;
            for (uintptr_t w = word_of(r[l].p); w <= word_of(r[l].p + bytes - 1); w++) words.push_back(w);
        }
        if (words.empty()) continue;
        std::sort(words.begin(), words.end());
        words.erase(std::unique(words.begin(), words.end()), words.end());
        int per_bank[32] = {};
        int worst = 0;
        for (uintptr_t w : words) worst = std::max(worst, ++per_bank[w % 32]);
        wf += (uint64_t)worst;
        ideal += (words.size() + 31) / 32;
    }
    if (!ideal) return;
    BankStat &s = bank_by_site[site];
    s.site = site;
    s.requests++;
    s.wavefronts += wf;
    s.ideal += ideal;
    s.worst = std::max(s.worst, (wf + ideal - 1) / ideal);
}

/* Every lane of the warp posts (p, site); the last to arrive checks that
 * all called from the same site and runs fn(w, rec) once for the warp. */
template <class F>
static void collect(const void *p, const char *site, const char *what, F fn)
{
    int lin = me().lin, w = lin / 32, lane = lin % 32;
    B.rec[w][lane] = Rec{(const char *)p, site};
    warp_collective(what, [&](int w) {
        for (int l = 1; l < 32; l++)
            if (B.rec[w][l].site != B.rec[w][0].site) {
                fprintf(stderr, "emu: %s: lane 0 at '%s', lane %d at '%s' (divergent warp)\n", what,
                        B.rec[w][0].site, l, B.rec[w][l].site);
                kdie("warp-collective call from different sites");
            }
        fn(w, B.rec[w]);
    });
}

static void land(const Copy &c)
{
    memcpy(c.dst, c.src, (size_t)c.src_bytes);
    memset(c.dst + c.src_bytes, 0, (size_t)(c.bytes - c.src_bytes));
}

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

/* A warp-collective step, after this lane has posted its inputs in B: the
 * last of the 32 lanes to arrive runs fn(w), which reads every lane's
 * inputs and writes every lane's outputs, and releases the others; each
 * lane then reads its outputs. One barrier a step: a lane's outputs cannot
 * be overwritten before it reads them, because the next step's fn needs
 * that lane's next inputs first. */
template <class F>
static void warp_collective(const char *what, F fn)
{
    Fiber &m = me();
    int w = m.lin / 32;
    if (B.warp_live[w] != 32) {
        fprintf(stderr, "emu: %s in a warp with exited or missing lanes\n", what);
        kdie("warp-collective operation needs all 32 lanes");
    }
    if (++B.warp_arrived[w] == 32) {
        fn(w);
        release_warp(w);
        return;
    }
    m.state = WAIT_WARP;
    yield(m);
}

uint64_t shfl_xor64(uint64_t v, int mask)
{
    int lane = me().lin % 32, w = me().lin / 32;
    B.xchg[w][lane] = v;
    B.xmask[w][lane] = mask;
    warp_collective("shuffle", [](int w) {
        for (int l = 0; l < 32; l++) B.xout[w][l] = B.xchg[w][l ^ (B.xmask[w][l] & 31)];
    });
    return B.xout[w][lane];
}

void ldmatrix(uint32_t *r, int nmat, const void *row, bool trans, const char *site)
{
    if (nmat != 1 && nmat != 2 && nmat != 4) kdie("ldmatrix: .x1, .x2 or .x4");
    int w = me().lin / 32, lane = me().lin % 32;
    B.lnmat[w][lane] = nmat;
    B.ltrans[w][lane] = trans;
    collect(row, site, "ldmatrix", [&](int w, const Rec *rec) {
        for (int l = 0; l < 32; l++)
            if (B.lnmat[w][l] != nmat || B.ltrans[w][l] != trans) kdie("ldmatrix: lanes disagree on .x or .trans");
        for (int l = 0; l < 8 * nmat; l++)
            if (!in_smem(rec[l].p, 16) || (uintptr_t)(rec[l].p - smem_base) % 16)
                kdie("ldmatrix: a row address outside shared memory or not 16-byte aligned");
        Rec used[32];
        for (int l = 0; l < 32; l++) used[l] = l < 8 * nmat ? rec[l] : Rec{nullptr, site};
        count_banks(site, used, 16, 8);
        for (int l = 0; l < 32; l++)
            for (int i = 0; i < nmat; i++) {
                uint16_t lo, hi;
                if (!trans) { /* row l/4, columns 2 (l%4) and +1 */
                    const char *p = rec[8 * i + l / 4].p + 4 * (l % 4);
                    memcpy(&lo, p, 2);
                    memcpy(&hi, p + 2, 2);
                } else { /* the transposed matrix: rows 2 (l%4) and +1, column l/4 */
                    memcpy(&lo, rec[8 * i + 2 * (l % 4)].p + 2 * (l / 4), 2);
                    memcpy(&hi, rec[8 * i + 2 * (l % 4) + 1].p + 2 * (l / 4), 2);
                }
                B.lo[w][l][i] = (uint32_t)lo | (uint32_t)hi << 16;
            }
    });
    for (int i = 0; i < nmat; i++) r[i] = B.lo[w][lane][i];
}

void cp_async(void *dst, const void *src, int bytes, int src_bytes, const char *site)
{
    if (bytes != 4 && bytes != 8 && bytes != 16) kdie("cp.async: 4, 8 or 16 bytes");
    if (dst && (src_bytes < 0 || src_bytes > bytes)) kdie("cp.async: src-size outside 0..cp-size");
    if (dst && (!in_smem(dst, (size_t)bytes) || (uintptr_t)((char *)dst - smem_base) % (uintptr_t)bytes ||
                (uintptr_t)src % (uintptr_t)bytes))
        kdie("cp.async: destination outside shared memory, or an address not aligned to the copy size");
    collect(dst, site, "cp.async",
            [&](int, const Rec *rec) { count_banks(site, rec, bytes, 128 / bytes < 32 ? 128 / bytes : 32); });
    if (!dst) return;
    Copy c{(char *)dst, (const char *)src, bytes, src_bytes, 0};
    if (B.eager)
        land(c);
    else
        me().copies.push_back(c);
}

void cp_async_commit()
{
    Fiber &m = me();
    m.groups++;
    for (Copy &c : m.copies)
        if (!c.group) c.group = m.groups;
}

void cp_async_wait(int n)
{
    Fiber &m = me();
    std::vector<Copy> keep;
    for (const Copy &c : m.copies)
        if (c.group && c.group <= m.groups - n)
            land(c);
        else
            keep.push_back(c);
    m.copies.swap(keep);
}

void smem_note(const void *p, int bytes, bool, const char *site)
{
    collect(p, site, "shared access", [&](int, const Rec *rec) {
        count_banks(site, rec, bytes, bytes >= 4 ? (128 / bytes < 32 ? 128 / bytes : 32) : 32);
    });
}

/* Both count the kernels queued so far: they run first. */
void bank_reset()
{
    drain_all("emu::bank_reset");
    bank_by_site.clear();
}

std::vector<BankStat> bank_stats()
{
    drain_all("emu::bank_stats");
    std::map<std::string, BankStat> by_name;
    for (auto &kv : bank_by_site) {
        BankStat &t = by_name[kv.second.site];
        t.site = kv.second.site;
        t.requests += kv.second.requests;
        t.wavefronts += kv.second.wavefronts;
        t.ideal += kv.second.ideal;
        t.worst = std::max(t.worst, kv.second.worst);
    }
    std::vector<BankStat> v;
    for (auto &kv : by_name) v.push_back(kv.second);
    return v;
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
    int w = me().lin / 32, lane = me().lin % 32;
    memcpy(B.ma[w][lane], a, sizeof B.ma[w][lane]);
    memcpy(B.mb[w][lane], b, sizeof B.mb[w][lane]);
    memcpy(B.mc[w][lane], c, sizeof B.mc[w][lane]);
    warp_collective("mma", [](int w) {
        for (int l = 0; l < 32; l++) {
            int g = l / 4, t = l % 4;
            for (int i = 0; i < 4; i++) {
                int r = g + 8 * (i / 2), n = 2 * t + (i % 2);
                float acc = B.mc[w][l][i];
                for (int k = 0; k < 16; k++) {
                    float av = half_of(B.ma[w][4 * (r % 8) + (k % 8) / 2][(r / 8) + 2 * (k / 8)], k % 2);
                    float bv = half_of(B.mb[w][4 * n + (k % 8) / 2][k / 8], k % 2);
                    acc += av * bv;
                }
                B.mo[w][l][i] = acc;
            }
        }
    });
    memcpy(c, B.mo[w][lane], sizeof B.mo[w][lane]);
}

cudaError_t sort_pairs(void *tmp, size_t &tmp_bytes, const unsigned *kin, unsigned *kout, const unsigned *vin,
                       unsigned *vout, int n, int begin_bit, int end_bit, cudaStream_t s)
{
    if (!tmp) {
        tmp_bytes = 16;
        return cudaSuccess;
    }
    submit(s, "cub::DeviceRadixSort::SortPairs", [=]() {
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
    });
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
    if (nt <= 0 || nt > 1024) kdie("block size outside 1..1024");
    if (grid.y > 65535 || grid.z > 65535) kdie("grid y or z above 65535");
    gridDim = grid;
    blockDim = block;
    B.tramp = tramp;
    B.arg = arg;
    if (B.f.size() < (size_t)nt) {
        size_t old = B.f.size();
        B.f.resize((size_t)nt);
        for (size_t i = old; i < (size_t)nt; i++) B.f[i].stack = (char *)malloc(STACK);
    }
    smem_store.assign(smem + 256, (char)0xff);
    smem_base = (char *)(((uintptr_t)smem_store.data() + 127) & ~(uintptr_t)127);
    smem_size = smem;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = make_uint3(bx, by, bz);
                memset(smem_store.data(), 0xff, smem_store.size());
                /* cp.async copies land at once in odd pairs of blocks */
                B.eager = ((bx + grid.x * (by + grid.y * bz)) >> 1) & 1;
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
                    x.copies.clear(); /* a block may end with copies in flight */
                    x.groups = 0;
                    getcontext(&x.ctx);
                    x.ctx.uc_stack.ss_sp = x.stack;
                    x.ctx.uc_stack.ss_size = STACK;
                    x.ctx.uc_link = &B.sched;
                    makecontext(&x.ctx, entry, 0);
                }
                /* Warp by warp: each warp runs until all its threads wait
                 * at a block barrier (or end) before the next starts, in
                 * index order in even blocks and in reverse in odd ones.
                 * So between two __syncthreads one warp finishes before
                 * another begins: a read of another warp's write without a
                 * barrier between them sees unwritten data in one of the
                 * orders, and a write into a buffer another warp has yet
                 * to read corrupts its input in the other. */
                bool rev = (bx + by + bz) % 2 == 1;
                int nw = (nt + 31) / 32;
                for (;;) {
                    bool ran = false, done = true;
                    for (int wj = 0; wj < nw; wj++) {
                        int w = rev ? nw - 1 - wj : wj;
                        for (bool again = true; again;) {
                            again = false;
                            for (int j = 0; j < 32; j++) {
                                int i = 32 * w + (rev ? 31 - j : j);
                                if (i >= nt) continue;
                                Fiber &x = B.f[(size_t)i];
                                if (x.state != DONE) done = false;
                                if (x.state != RUN) continue;
                                B.cur = i;
                                threadIdx = x.tid;
                                ran = again = true;
                                resume(x);
                            }
                        }
                    }
                    if (done) break;
                    if (!ran) kdie("deadlock: threads wait at different barriers");
                }
            }
}

} // namespace emu
