/* cg_mem.c: the static memory plan of one pipeline rank.
 *
 * One rt_alloc holds three arenas, one per element type (rt_act, float,
 * int32), each laid out as
 *   persistent  parameters, gradient accumulators (fp32, bucket by bucket),
 *               optimizer state, and the per-slot buffers of every chunk
 *               (kept activations, received and sent boundary tensors, inputs),
 *               and a split schedule's W slots (cg_bwd.c)
 *   interface   temporaries shared by several pieces of one op (a gradient
 *               summed across layers), packed per op
 *   workspace   temporaries of one piece function, packed per function
 *   scratch     the collectives' staging area (rt_act only)
 * Offsets are in elements of the arena's type, so the plan is the same for the
 * CPU (float) and CUDA (bf16) builds of a program. Temporaries are packed by
 * liveness: a buffer lives from the first statement naming it to the last
 * (the buffers each typed statement names, cg_stmt_bufs),
 * and two buffers share memory only if their lives are disjoint. */
#include "cg.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64 /* elements: 256 bytes of floats */

static int64_t align(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

typedef struct LiveCtx {
    CgRankProg *r;
    int op, stmt, piece;
} LiveCtx;

static void touch(void *vctx, int id)
{
    LiveCtx *x = vctx;
    CgBuf *b = x->r->bufs.v[id];
    if (b->kind != CG_B_TEMP)
        return;
    if (b->op < 0) {
        b->op = x->op;
        b->first = x->stmt;
        b->piece = x->piece;
        b->home = x->piece >= 0 ? CG_HOME_LOCAL : CG_HOME_IFACE;
    }
    if (b->op != x->op)
        ir_die("codegen: temporary %s used by two ops", b->name);
    b->last = x->stmt;
    if (b->piece != x->piece) {
        b->piece = -1;
        b->home = CG_HOME_IFACE;
    }
}

/* Pack buffers bufs[0..n) (their lives [first, last]) into a region; returns its size. */
static int64_t pack(CgBuf **bufs, int n)
{
    /* Largest first, each at the lowest offset clear of every overlapping life. */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && bufs[j]->numel > bufs[j - 1]->numel; j--) {
            CgBuf *t = bufs[j];
            bufs[j] = bufs[j - 1];
            bufs[j - 1] = t;
        }
    int64_t size = 0;
    for (int i = 0; i < n; i++) {
        CgBuf *b = bufs[i];
        int64_t off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int k = 0; k < i; k++) {
                CgBuf *o = bufs[k];
                bool live = !(o->last < b->first || b->last < o->first);
                bool mem = off < o->offset + align(o->numel) && o->offset < off + align(b->numel);
                if (live && mem) {
                    off = o->offset + align(o->numel);
                    moved = true;
                }
            }
        }
        b->offset = off;
        if (off + align(b->numel) > size)
            size = off + align(b->numel);
    }
    return size;
}

static int64_t place(CgRankProg *r, CgType t, int64_t n, int cat)
{
    int64_t off = r->total[t];
    r->total[t] += align(n);
    r->mem[cat][t] += align(n);
    return off;
}

bool cg_master_aliases(const Cg *c) { return c->o->target == CG_TARGET_CPU; }

void cg_memplan(Cg *c, CgRankProg *r)
{
    /* Liveness of temporaries. */
    for (int o = 0; o < CG_NOPS(r); o++) {
        CgOp *op = &r->ops[o];
        for (int i = 0; i < op->st.n; i++) {
            LiveCtx x = {r, o, i, op->st.v[i].piece};
            cg_stmt_bufs(&op->st.v[i], touch, &x);
        }
    }
    /* Persistent buffers. */
    for (int i = 0; i < r->bufs.n; i++) {
        CgBuf *b = r->bufs.v[i];
        if (b->kind == CG_B_PARAM)
            b->offset = place(r, b->type, b->numel, CG_MEM_PARAM);
    }
    /* Gradients bucket by bucket, in the order the trainer reduces them, so
     * one collective covers a bucket's run (cg_bucket.c); then the rest. */
    bool *done = ir_alloc(c->arena, (size_t)r->bufs.n + 1);
    for (int i = 0; i < r->bucket_params.n; i++) {
        CgBuf *b = r->bufs.v[r->gbuf[r->bucket_params.v[i]]];
        b->offset = place(r, b->type, b->numel, CG_MEM_GRAD);
        done[b->id] = true;
    }
    for (int i = 0; i < r->bufs.n; i++) {
        CgBuf *b = r->bufs.v[i];
        if (b->kind == CG_B_GRAD && !done[i])
            b->offset = place(r, b->type, b->numel, CG_MEM_GRAD);
    }
    r->opt_off = ir_alloc(c->arena, sizeof(int64_t) * (size_t)(3 * c->nparams + 1));
    for (int i = 0; i < r->params.n; i++) {
        int k = r->params.v[i];
        const CgParamPlan *pp = &c->params[k];
        /* On CPU the weights are fp32 already: the master is this rank's
         * block of the parameter itself (CG_MASTER_ALIAS), not a copy. */
        for (int m = 0; m < 3; m++)
            r->opt_off[3 * k + m] = m == 0 && cg_master_aliases(c)
                                        ? -1
                                        : place(r, CG_F32, pp->shard, CG_MEM_OPT);
    }
    for (int i = 0; i < r->bufs.n; i++) {
        CgBuf *b = r->bufs.v[i];
        if (b->kind != CG_B_SLOT)
            continue;
        b->stride = align(b->numel);
        b->offset = place(r, b->type, b->stride * r->nslots[b->chunk], CG_MEM_ACT);
    }
    /* A split schedule's W slots, what the pending weight gradients read:
     * per chunk and arena one block per micro-batch whose W waits, so one
     * offset (g_wslot_<type>, set by the stage function) selects them all. */
    for (int j = 0; j < r->nchunks; j++)
        for (int t = 0; t < CG_NTYPES; t++) {
            int64_t block = 0;
            for (int i = 0; i < r->bufs.n; i++) {
                CgBuf *b = r->bufs.v[i];
                if (b->kind == CG_B_WSLOT && b->chunk == j && b->type == (CgType)t) {
                    b->offset = block;
                    block += align(b->numel);
                }
            }
            r->wblock[j][t] = block;
            if (!block)
                continue;
            if (r->nwslots[j] < 1)
                ir_die("codegen: W slots in chunk %d, whose schedule defers nothing", j);
            int64_t base = place(r, (CgType)t, block * r->nwslots[j], CG_MEM_ACT);
            for (int i = 0; i < r->bufs.n; i++) {
                CgBuf *b = r->bufs.v[i];
                if (b->kind == CG_B_WSLOT && b->chunk == j && b->type == (CgType)t) {
                    b->offset += base;
                    b->stride = block;
                }
            }
        }
    r->loss_off = place(r, CG_F32, 3, CG_MEM_WS); /* loss, gradient norm, regularisers */
    /* Interface temporaries: packed per op, the region sized for the largest. */
    int n = r->bufs.n;
    CgBuf **set = ir_alloc(c->arena, sizeof *set * (size_t)(n + 1));
    for (int t = 0; t < CG_NTYPES; t++) {
        int64_t iface = 0, ws = 0;
        for (int o = 0; o < CG_NOPS(r); o++) {
            int k = 0;
            for (int i = 0; i < n; i++) {
                CgBuf *b = r->bufs.v[i];
                if (b->kind == CG_B_TEMP && b->op == o && b->home == CG_HOME_IFACE && b->type == (CgType)t)
                    set[k++] = b;
            }
            int64_t sz = pack(set, k);
            if (sz > iface)
                iface = sz;
            /* Workspace: per piece function (its op and piece). */
            for (int p = 0; p < c->g->npieces; p++) {
                k = 0;
                for (int i = 0; i < n; i++) {
                    CgBuf *b = r->bufs.v[i];
                    if (b->kind == CG_B_TEMP && b->op == o && b->home == CG_HOME_LOCAL &&
                        b->piece == p && b->type == (CgType)t)
                        set[k++] = b;
                }
                sz = pack(set, k);
                if (sz > ws)
                    ws = sz;
            }
        }
        r->iface_base[t] = place(r, (CgType)t, iface, CG_MEM_WS);
        r->ws_base[t] = place(r, (CgType)t, ws, CG_MEM_WS);
        r->ws_size[t] = ws;
    }
    r->scratch_base = place(r, CG_ACT, r->scratch_size, CG_MEM_WS);
}
