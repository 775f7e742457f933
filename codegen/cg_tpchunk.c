/* cg_tpchunk.c: tensor-parallel communication chunked with its GEMMs (the
 * plan's tp_overlap, --tp-overlap on; docs/codegen.md, "Chunked tensor
 * parallelism"). After an op is lowered, two patterns of its statements
 * become one call each:
 *   a gather along a dim (ALLGATHER_DIM) and the GEMMs that read what it
 *   gathered as their A (q, k and v; gate and up; in backward the
 *   row-parallel output's gradient into its input-gradient GEMM) ->
 *   rt_allgather_matmul, the GEMMs' rows of this rank's block running
 *   while the other blocks arrive;
 *   a forward GEMM (operands untransposed: a row-parallel layer, run or
 *   recomputed; an input-gradient GEMM reads W transposed) followed by the
 *   reduce-scatter of its product (REDUCE_SCATTER_DIM) ->
 *   rt_matmul_reduce_scatter, in PLAN_TP_RS_SPLITS pieces each
 *   reduce-scattered beside the next.
 * These are the pairs the cost model prices for the ptdc stack's
 * tp_overlap chunked (passes/cost/predict.c, edge_overlap); the backward
 * input gradient's reduce-scatter stays waited for where it is issued.
 * Later GEMMs reading the gathered input move up to the gather when no
 * statement between names any of their other buffers, so nothing they read
 * or write changes order. The memory plan (cg_mem.c) runs after this, on
 * the fused statements. */
#include "cg.h"

#include <string.h>

static bool is_gemm(const CgStmt *s)
{
    return s->fn == CG_CALL_MATMUL || s->fn == CG_CALL_MATMUL_BATCH;
}

/* The buffers a GEMM statement's operand k names (C: 0, A: 1, B: 2). */
static int operand(const CgStmt *s, int k, int i)
{
    return s->fn == CG_CALL_MATMUL ? s->args[k].buf : s->args[k].bufs[i];
}

static int gemm_count(const CgStmt *s)
{
    return s->fn == CG_CALL_MATMUL ? 1 : s->args[0].nbufs;
}

/* Devices in communicator `mask`. */
static int group_size(const Cg *c, int mask)
{
    int p = 1;
    for (int a = 0; a < c->mesh.naxes; a++)
        if (mask >> a & 1)
            p *= c->mesh.size[a];
    return p;
}

static bool names(const CgStmt *s, int buf)
{
    for (int i = 0; i < s->nargs; i++) {
        const CgArg *a = &s->args[i];
        if (a->kind == CG_A_BUF && a->buf == buf)
            return true;
        if (a->kind == CG_A_BUFS)
            for (int k = 0; k < a->nbufs; k++)
                if (a->bufs[k] == buf)
                    return true;
    }
    return false;
}

/* Whether GEMM statement g reads gathered buffer `gb` as A in every GEMM,
 * untransposed, over rows x inner, with the flags of `first`. */
static bool reads_gathered(const CgStmt *g, int gb, int64_t rows, int64_t inner, const CgStmt *first)
{
    if (!is_gemm(g) || g->guard || g->args[6].b)
        return false;
    for (int i = 0; i < gemm_count(g); i++)
        if (operand(g, 1, i) != gb || operand(g, 0, i) == gb || operand(g, 2, i) == gb)
            return false;
    if (g->args[3].size.v != rows || g->args[5].size.v != inner)
        return false;
    return !first || (g->args[7].b == first->args[7].b && g->args[8].b == first->args[8].b);
}

/* Whether g's buffers other than gb are named by none of st[from, to). */
static bool movable(const CgStmt *st, int from, int to, const CgStmt *g, int gb)
{
    for (int j = from; j < to; j++)
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < gemm_count(g); i++) {
                int b = operand(g, k, i);
                if (b != gb && names(&st[j], b))
                    return false;
            }
    return true;
}

/* The gather at st[i] and the GEMMs reading it, as one statement at i;
 * the GEMMs' statements dropped. Whether it fused. */
static bool fuse_gather(Cg *c, CgRankProg *r, CgOp *op, int i)
{
    CgStmt *st = op->st.v, *ag = &st[i];
    int gb = ag->args[1].buf, p = group_size(c, ag->args[0].buf);
    int64_t inner = ag->args[5].size.v, rows = ag->args[3].size.v * ag->args[4].size.v * p;
    int take[PLAN_GEMM_BATCH_MAX], nt = 0, cnt = 0;
    for (int j = i + 1; j < op->st.n; j++) {
        const CgStmt *g = &st[j];
        if (g->fn == CG_NCALLS)
            continue;
        if (g->piece != ag->piece)
            break;
        if (reads_gathered(g, gb, rows, inner, nt ? &st[take[0]] : NULL) &&
            cnt + gemm_count(g) <= PLAN_GEMM_BATCH_MAX && movable(st, i + 1, j, g, gb)) {
            take[nt++] = j;
            cnt += gemm_count(g);
            continue;
        }
        if (names(g, gb))
            break; /* a reader of another kind: the gathered input is complete from here */
    }
    if (nt == 0)
        return false;
    int cb[PLAN_GEMM_BATCH_MAX], bb[PLAN_GEMM_BATCH_MAX], k = 0;
    CgSize *n = ir_alloc(c->arena, sizeof *n * (size_t)cnt);
    for (int t = 0; t < nt; t++) {
        const CgStmt *g = &st[take[t]];
        for (int q = 0; q < gemm_count(g); q++, k++) {
            cb[k] = operand(g, 0, q);
            bb[k] = operand(g, 2, q);
            n[k] = g->args[4].size;
        }
    }
    CgArg ns;
    memset(&ns, 0, sizeof ns);
    ns.kind = CG_A_SIZES;
    ns.sizes = n;
    ns.nbufs = cnt;
    const CgStmt *g0 = &st[take[0]];
    CgArg a[] = {ag->args[0], ag->args[1], ag->args[2], ag->args[3], ag->args[4], ag->args[5],
                 ag->args[6], cg_a_bufs(c, cb, cnt), cg_a_bufs(c, bb, cnt), ns, g0->args[7],
                 g0->args[8]};
    CgArg *args = ir_alloc(c->arena, sizeof a);
    memcpy(args, a, sizeof a);
    st[i] = (CgStmt){ag->piece, CG_CALL_ALLGATHER_MATMUL, 0, (int)(sizeof a / sizeof *a), args, NULL};
    /* Drop the fused GEMMs, keeping the order of the rest. */
    int w = i + 1, t = 0;
    for (int j = i + 1; j < op->st.n; j++) {
        if (t < nt && take[t] == j) {
            t++;
            continue;
        }
        st[w++] = st[j];
    }
    op->st.n = w;
    (void)r;
    return true;
}

/* The GEMM at st[i] and the reduce-scatter of its product at st[i + 1] as
 * one statement. */
static bool fuse_scatter(Cg *c, CgRankProg *r, CgOp *op, int i)
{
    CgStmt *st = op->st.v, *g = &st[i], *rs = &st[i + 1];
    if (g->fn != CG_CALL_MATMUL || rs->fn != CG_CALL_REDUCE_SCATTER_DIM || g->guard || rs->guard ||
        g->piece != rs->piece || g->args[6].b || g->args[7].b || rs->args[2].buf != g->args[0].buf)
        return false;
    int p = group_size(c, rs->args[0].buf);
    int64_t outer = rs->args[3].size.v, d = rs->args[4].size.v, inner = rs->args[5].size.v;
    if (g->args[3].size.v != outer * p * d || g->args[4].size.v != inner)
        return false;
    if ((p + 1) * outer * d * inner > r->scratch_size)
        r->scratch_size = (p + 1) * outer * d * inner; /* send blocks, then received ones */
    CgArg a[] = {rs->args[0], rs->args[1], g->args[0], g->args[1], g->args[2], rs->args[3], rs->args[4],
                 rs->args[5], g->args[5], g->args[7], g->args[8],
                 cg_a_int("TP_RS_SPLITS", PLAN_TP_RS_SPLITS, "pieces of a row-parallel GEMM (--tp-overlap)"),
                 rs->args[6]};
    CgArg *args = ir_alloc(c->arena, sizeof a);
    memcpy(args, a, sizeof a);
    st[i] = (CgStmt){g->piece, CG_CALL_MATMUL_REDUCE_SCATTER, 0, (int)(sizeof a / sizeof *a), args, NULL};
    memmove(&st[i + 1], &st[i + 2], sizeof *st * (size_t)(op->st.n - i - 2));
    op->st.n--;
    return true;
}

void cg_tp_chunk(Cg *c, CgRankProg *r, CgOp *op)
{
    if (!c->p->tp_overlap)
        return;
    for (int i = 0; i < op->st.n; i++) {
        CgCallee fn = op->st.v[i].fn;
        if (fn == CG_CALL_ALLGATHER_DIM && !op->st.v[i].guard)
            fuse_gather(c, r, op, i);
        else if (fn == CG_CALL_MATMUL && i + 1 < op->st.n)
            fuse_scatter(c, r, op, i);
    }
}
