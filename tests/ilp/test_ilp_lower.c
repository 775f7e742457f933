/* test_ilp_lower.c: pass_ilp_stage on random small graphs against brute
 * force. Each case builds a random model (a first piece, one to three
 * identical layers of random operators, a last piece), picks a random stage,
 * mesh, pins, micro-batching, ZeRO stage, recomputation, in-flight count and
 * budget, and enumerates every strategy of every operator (one per layer
 * template) and every boundary sharding. The objective of each combination is
 * computed here, independently of ilp_lower.c and ilp_build.c, straight from
 * the model's definition (docs/sharding.md): node prices, and per physical
 * tensor and source one forward reshard per distinct wanted sharding, one
 * backward reshard per distinct gradient sharding, recomputation and
 * the saving readers' resharding again in backward. The ILP must reach the brute-force optimum within 1e-9
 * relative, report infeasibility exactly when nothing fits, and account for
 * its times and collectives consistently. */
#include "check.h"
#include "passes.h"
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



/* ------------------------------------------------------------ random models */
typedef struct {
    IrGraph *g;
    int b, s, d, f, h, kvh, hd, e;
    int nparam;
} Gen;

static int param(Gen *G, int rank, const int *dims)
{
    char name[32];
    snprintf(name, sizeof name, "w%d", G->nparam++);
    int t = ir_tensor_add(G->g, name, IR_BF16, IR_PARAM, rank, dims, IR_NOLOC);
    G->g->tensors[t].init = IR_INIT_NORMAL;
    G->g->tensors[t].init_std = 0.02;
    return t;
}

static int op(Gen *G, IrOp o, const int *in, int nin, const IrAttrs *attr)
{
    IrAttrs a = {.dim = {-1, -1}, .eps = 1e-5, .theta = 10000, .causal = true};
    int n = ir_node_add(G->g, o, in, nin, attr ? attr : &a, IR_NOLOC);
    if (n < 0)
        ir_die("test: %s did not fit", ir_ops[o].name);
    return G->g->nodes[n].out[0];
}

static const IrTensor *T(Gen *G, int t) { return &G->g->tensors[t]; }
static int last_dim(Gen *G, int t) { return T(G, t)->dim[T(G, t)->rank - 1]; }

/* One step of a layer program: op kind and pool operands, replayed for
 * every layer so all layers are identical. */
typedef struct {
    int kind, a, b, extra;
} Step;

enum { S_NORM, S_UP, S_DOWN, S_ACT, S_ADD, S_MUL, S_ATTN, S_SOFTMAX, S_NKIND };

static bool same_shape(Gen *G, int x, int y)
{
    const IrTensor *a = T(G, x), *b = T(G, y);
    return a->rank == b->rank && memcmp(a->dim, b->dim, sizeof(int) * (size_t)a->rank) == 0;
}

/* Apply a step to the pool; returns false when its operands do not fit. */
static bool apply(Gen *G, const Step *st, int *pool, int *np, bool dry)
{
    int x = pool[st->a % *np], y = pool[st->b % *np];
    int out;
    switch (st->kind) {
    case S_NORM: {
        if (dry)
            return true;
        int w = param(G, 1, (int[]){last_dim(G, x)});
        out = op(G, IR_OP_RMSNORM, (int[]){x, w}, 2, NULL);
        pool[(*np)++] = out;
        return true;
    }
    case S_UP:
    case S_DOWN: {
        int from = st->kind == S_UP ? G->d : G->f, to = st->kind == S_UP ? G->f : G->d;
        if (last_dim(G, x) != from || T(G, x)->rank != 3)
            return false;
        if (dry)
            return true;
        int w = param(G, 2, (int[]){from, to});
        pool[(*np)++] = op(G, IR_OP_MATMUL, (int[]){x, w}, 2, NULL);
        return true;
    }
    case S_ACT:
        if (!dry)
            pool[(*np)++] = op(G, st->extra ? IR_OP_GELU : IR_OP_SILU, &x, 1, NULL);
        return true;
    case S_ADD:
    case S_MUL:
        if (st->extra && !same_shape(G, x, y))
            return false;
        if (dry)
            return true;
        if (!st->extra)
            y = param(G, 1, (int[]){last_dim(G, x)});
        pool[(*np)++] = op(G, st->kind == S_ADD ? IR_OP_ADD : IR_OP_MUL, (int[]){x, y}, 2, NULL);
        return true;
    case S_SOFTMAX:
        if (!dry)
            pool[(*np)++] = op(G, IR_OP_SOFTMAX, &x, 1, NULL);
        return true;
    case S_ATTN: {
        if (last_dim(G, x) != G->d || T(G, x)->rank != 3)
            return false;
        if (dry)
            return true;
        int q = op(G, IR_OP_MATMUL, (int[]){x, param(G, 3, (int[]){G->d, G->h, G->hd})}, 2, NULL);
        int k = op(G, IR_OP_MATMUL, (int[]){x, param(G, 3, (int[]){G->d, G->kvh, G->hd})}, 2, NULL);
        int v = op(G, IR_OP_MATMUL, (int[]){x, param(G, 3, (int[]){G->d, G->kvh, G->hd})}, 2, NULL);
        if (st->extra & 1) {
            q = op(G, IR_OP_ROPE, &q, 1, NULL);
            k = op(G, IR_OP_ROPE, &k, 1, NULL);
        }
        int a = op(G, IR_OP_ATTENTION, (int[]){q, k, v}, 3, NULL);
        pool[(*np)++] = op(G, IR_OP_MATMUL, (int[]){a, param(G, 3, (int[]){G->h, G->hd, G->d})}, 2, NULL);
        return true;
    }
    }
    return false;
}

typedef struct {
    IrArena *arena;
    IrGraph *g;
    Gen G;
    int nlayers;
} Model;

static void model_free(Model *m)
{
    ir_graph_free(m->g);
    ir_arena_free(m->arena);
}

static void build_model(Model *M)
{
    M->arena = ir_arena_new();
    IrGraph *g = M->g = ir_graph_new(M->arena, "rand", NULL);
    Gen *G = &M->G;
    memset(G, 0, sizeof *G);
    G->g = g;
    G->b = g->batch_dim;
    G->s = ir_dim_add(g, "seq", irand(2) ? 4 : 8, IR_NOLOC);
    G->d = ir_dim_add(g, "d_model", irand(2) ? 4 : 8, IR_NOLOC);
    G->f = ir_dim_add(g, "d_ff", irand(3) ? 8 : 12, IR_NOLOC);
    int h = irand(2) ? 2 : 4, kvh = irand(2) ? h : h / 2;
    G->h = ir_dim_add(g, "n_heads", h, IR_NOLOC);
    G->kvh = kvh == h ? G->h : ir_dim_add(g, "n_kv_heads", kvh, IR_NOLOC);
    G->hd = ir_dim_add(g, "head_dim", irand(2) ? 2 : 4, IR_NOLOC);
    G->e = ir_dim_add(g, "emb", 4, IR_NOLOC);
    g->seq_dim = G->s;
    g->global_batch = 8;
    /* A random layer program, checked to fit by a dry run over shapes. */
    Step prog[8];
    int nsteps = 0, want = 1 + irand(4);
    ir_piece_begin(g, "pre", -1, -1);
    int inp = ir_tensor_add(g, "inp", IR_BF16, IR_INPUT, 3, (int[]){G->b, G->s, G->e}, IR_NOLOC);
    int x = op(G, IR_OP_MATMUL, (int[]){inp, param(G, 2, (int[]){G->e, G->d})}, 2, NULL);
    if (irand(2))
        x = op(G, IR_OP_SILU, &x, 1, NULL);
    M->nlayers = 1 + irand(3);
    for (int l = 0; l < M->nlayers; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer %d", l);
        ir_piece_begin(g, name, l, 0);
        int pool[32], np = 1;
        pool[0] = x;
        if (l == 0) {
            /* Choose steps that fit, building layer 0 as we go. */
            for (int tries = 0; nsteps < want && tries < 40; tries++) {
                Step st = {irand(S_NKIND), irand(8), irand(8), irand(4)};
                if (st.kind == S_ATTN && irand(2))
                    continue;
                g->cur_block = irand(3) == 0 ? "mlp" : NULL;
                if (!apply(G, &st, pool, &np, true))
                    continue;
                apply(G, &st, pool, &np, false);
                prog[nsteps++] = st;
            }
        } else {
            for (int i = 0; i < nsteps; i++) {
                g->cur_block = NULL;
                apply(G, &prog[i], pool, &np, false);
            }
        }
        /* The layer output: the input plus the last [b, s, d] tensor made. */
        g->cur_block = NULL;
        int z = -1;
        for (int i = np - 1; i >= 1 && z < 0; i--)
            if (same_shape(G, pool[i], x))
                z = pool[i];
        if (z < 0) {
            int last = pool[np - 1];
            z = last_dim(G, last) == G->f && T(G, last)->rank == 3
                    ? op(G, IR_OP_MATMUL, (int[]){last, param(G, 2, (int[]){G->f, G->d})}, 2, NULL)
                    : op(G, IR_OP_SILU, &x, 1, NULL);
        }
        x = op(G, IR_OP_ADD, (int[]){x, z}, 2, NULL);
    }
    ir_piece_begin(g, "post", -1, -1);
    int o = op(G, IR_OP_MATMUL, (int[]){x, param(G, 2, (int[]){G->d, G->e})}, 2, NULL);
    if (irand(2))
        op(G, IR_OP_RMSNORM, (int[]){o, param(G, 1, (int[]){G->e})}, 2, NULL);
}

/* Blocks were only set while building layer 0; mark the same nodes of every
 * layer so the pieces stay identical (FFN recomputation reads blocks). */
static void copy_blocks(IrGraph *g)
{
    int first = -1;
    for (int p = 0; p < g->npieces; p++) {
        if (g->pieces[p].rep < 0)
            continue;
        if (first < 0) {
            first = p;
            continue;
        }
        for (int k = 0; k < g->pieces[p].count; k++)
            g->nodes[g->pieces[p].first + k].block = g->nodes[g->pieces[first].first + k].block;
    }
}

/* ------------------------------------------------- the independent evaluator */
typedef struct {
    const IrGraph *g;
    PassIlpQuery q;
    PassCostCtx ctx;
    int64_t dim_size[64];
    int n0, n1;                     /* stage nodes */
    int *rep;                       /* [n1 - n0]: representative node of each */
    int nstrat[256];                /* per representative node (by id - n0) */
    PlanStrategy *strat[256];
    IlpVals *nval[256];             /* per representative node and strategy: quantities */
    /* boundaries */
    int nb, bkey[64][3], btensor[64], bn[64];
    PlanStrategy bopt[64][32];
} Ev;

static bool recomputed(const Ev *E, const IrNode *n)
{
    const IrGraph *g = E->g;
    if (g->pieces[n->piece].rep < 0)
        return false;
    switch (E->q.recompute) {
    case PLAN_RECOMPUTE_NONE: return false;
    case PLAN_RECOMPUTE_SELECTIVE:
        return n->op == IR_OP_ATTENTION && E->ctx.attention == PLAN_ATTN_MATERIALIZED;
    case PLAN_RECOMPUTE_FFN: return n->block && strcmp(n->block, "mlp") == 0;
    case PLAN_RECOMPUTE_FULL: return true;
    default: break; /* Megatron's module sets: not drawn here (irand(4)) */
    }
    return false;
}

static bool in_stage(const Ev *E, int n) { return n >= E->n0 && n < E->n1; }

static int bkey_find(Ev *E, int a, int b, int c)
{
    for (int i = 0; i < E->nb; i++)
        if (E->bkey[i][0] == a && E->bkey[i][1] == b && E->bkey[i][2] == c)
            return i;
    return -1;
}

/* The boundary a tensor from producer p (output o) is read through, or -1. */
static int boundary_of(const Ev *E, int t)
{
    const IrGraph *g = E->g;
    int p = g->tensors[t].producer;
    const IrNode *pn = &g->nodes[p];
    int o = 0;
    while (pn->out[o] != t)
        o++;
    int rep = g->pieces[pn->piece].rep;
    return rep >= 0 ? bkey_find((Ev *)E, rep, pn->tmpl, o) : bkey_find((Ev *)E, -1, t, 0);
}

static void ev_init(Ev *E, const IrGraph *g, const PassIlpQuery *q)
{
    memset(E, 0, sizeof *E);
    E->g = g;
    E->q = *q;
    ir_dim_sizes(g, q->mb_seqs, E->dim_size);
    E->n0 = g->pieces[q->first_piece].first;
    const IrPiece *last = &g->pieces[q->first_piece + q->npieces - 1];
    E->n1 = last->first + last->count;
    E->rep = malloc(sizeof(int) * (size_t)(E->n1 - E->n0));
    const uint64_t *allow = q->allow[0] || q->allow[1] ? q->allow : NULL;
    for (int n = E->n0; n < E->n1; n++) {
        const IrNode *nd = &g->nodes[n];
        int rp = nd->piece;
        if (g->pieces[rp].rep >= 0)
            for (int p = q->first_piece; p < nd->piece; p++)
                if (g->pieces[p].rep == g->pieces[nd->piece].rep) {
                    rp = p;
                    break;
                }
        int r = g->pieces[rp].first + nd->tmpl;
        E->rep[n - E->n0] = r;
        if (r == n) {
            PlanStrategy buf[512];
            int k = plan_strategies(g, nd, &q->mesh, E->dim_size, allow, buf, 512);
            E->nstrat[n - E->n0] = k;
            E->strat[n - E->n0] = malloc(sizeof(PlanStrategy) * (size_t)k);
            memcpy(E->strat[n - E->n0], buf, sizeof(PlanStrategy) * (size_t)k);
        }
    }
    /* Boundaries: a repeat's output read by another piece, anything from
     * outside the stage. */
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        if (x->role != IR_ACT || x->producer < 0)
            continue;
        int p = x->producer;
        const IrNode *pn = &g->nodes[p];
        int rep = g->pieces[pn->piece].rep;
        bool read_in = false, across = false;
        for (int c = 0; c < g->nfwd; c++)
            for (int i = 0; i < g->nodes[c].nin; i++)
                if (g->nodes[c].in[i] == t) {
                    read_in |= in_stage(E, c);
                    across |= g->nodes[c].piece != pn->piece;
                }
        bool need = (in_stage(E, p) && rep >= 0 && across) || (!in_stage(E, p) && read_in);
        if (!need)
            continue;
        int o = 0;
        while (pn->out[o] != t)
            o++;
        int key[3] = {rep >= 0 ? rep : -1, rep >= 0 ? pn->tmpl : t, rep >= 0 ? o : 0};
        if (bkey_find(E, key[0], key[1], key[2]) >= 0)
            continue;
        int b = E->nb++;
        memcpy(E->bkey[b], key, sizeof key);
        E->btensor[b] = t;
        /* Its options: per axis nothing or an allowed dim the axis divides. */
        int cand[2][8], nc[2];
        for (int a = 0; a < 2; a++) {
            nc[a] = 0;
            cand[a][nc[a]++] = -1;
            if (a >= q->mesh.naxes || q->mesh.size[a] <= 1)
                continue;
            for (int i = 0; i < x->rank; i++) {
                int d = x->dim[i];
                if (allow && !(allow[a] >> d & 1))
                    continue;
                if (E->dim_size[d] % q->mesh.size[a] == 0 && E->dim_size[d] >= q->mesh.size[a])
                    cand[a][nc[a]++] = d;
            }
        }
        bool fixed = q->fix_boundary;
        for (int a = 0; a < 2 && fixed; a++)
            fixed = q->boundary.dim[a] < 0 || ir_tensor_has_dim(g, t, q->boundary.dim[a]);
        for (int i = 0; i < nc[0]; i++)
            for (int j = 0; j < nc[1]; j++) {
                int d0 = cand[0][i], d1 = cand[1][j];
                if (d0 >= 0 && d0 == d1)
                    continue;
                if (fixed && (d0 != q->boundary.dim[0] || d1 != q->boundary.dim[1]))
                    continue;
                E->bopt[b][E->bn[b]++] = (PlanStrategy){{(int16_t)d0, (int16_t)d1, -1}, 0};
            }
    }
}

static void ev_prices(Ev *E, const PassIlpCosts *c)
{
    const IrGraph *g = E->g;
    for (int n = E->n0; n < E->n1; n++) {
        if (E->rep[n - E->n0] != n)
            continue;
        int k = E->nstrat[n - E->n0];
        E->nval[n - E->n0] = calloc((size_t)k, sizeof(IlpVals));
        for (int i = 0; i < k; i++) {
            const PlanStrategy *s = &E->strat[n - E->n0][i];
            const IrNode *nd = &g->nodes[n];
            PassNodeCost nc;
            c->node(&E->ctx, g, nd, &E->q.mesh, s, E->dim_size, &nc);
            IlpVals *v = &E->nval[n - E->n0][i];
            v->q[ILP_FWD] = nc.fwd_s;
            v->q[ILP_BWD] = nc.bwd_s + (recomputed(E, nd) ? nc.fwd_s : 0);
            v->q[ILP_SYNC] = c->param_sync(&E->ctx, g, nd, &E->q.mesh, s, E->q.zero, E->q.num_micro);
            v->q[ILP_MEM_PARAM] = c->param_bytes(&E->ctx, g, nd, &E->q.mesh, s, E->q.zero);
            v->q[ILP_MEM_ACT] =
                c->saved(&E->ctx, g, nd, &E->q.mesh, s, E->dim_size, E->q.recompute) * E->q.inflight;
        }
    }
}

static double reshard(const Ev *E, const PassIlpCosts *c, int t, const PlanSharding *from,
                      const PlanSharding *to, double *ag, int64_t *sharded)
{
    PlanColl st[8];
    int n = plan_reshard(E->g, t, &E->q.mesh, from, to, E->dim_size, st, 8);
    int eb = ir_dtype_bytes(E->g->tensors[t].dtype);
    double tot = 0;
    *ag = 0;
    *sharded = 0;
    for (int i = 0; i < n; i++) {
        double x = c->coll(&E->ctx, &E->q.mesh, &st[i], eb);
        tot += x;
        /* The steps after the reductions: a saving reader's backward runs
         * them again from the kept copy (all-gathers, all-to-alls, slices). */
        if (st[i].kind != PLAN_COLL_ALLREDUCE && st[i].kind != PLAN_COLL_REDUCESCATTER)
            *ag += x;
        if (st[i].kind == PLAN_COLL_ALLGATHER && !*sharded)
            *sharded = st[i].numel / E->q.mesh.size[st[i].axis];
    }
    return tot;
}

typedef struct {
    PlanSharding X, G;
    bool rc, rg, saver;
} Reader;

/* The shared work of the readers of tensor t from source sharding S. */
static void readers_cost(const Ev *E, const PassIlpCosts *c, int t, PlanSharding S, const Reader *r,
                         int nr, IlpVals *tot)
{
    PlanSharding T = S;
    T.partial = 0;
    double eb = ir_dtype_bytes(E->g->tensors[t].dtype);
    for (int i = 0; i < nr; i++) {
        double ag;
        int64_t sh;
        double f = reshard(E, c, t, &S, &r[i].X, &ag, &sh);
        bool fx = true, frc = r[i].rc, frg = r[i].rg, fg = true;
        for (int j = 0; j < i; j++) {
            fx &= !plan_sharding_eq(&r[j].X, &r[i].X);
            frc &= !(r[j].rc && plan_sharding_eq(&r[j].X, &r[i].X));
            frg &= !(r[j].rg && plan_sharding_eq(&r[j].X, &r[i].X));
            fg &= !plan_sharding_eq(&r[j].G, &r[i].G);
        }
        if (fx)
            tot->q[ILP_FWD] += f;
        if (frc)
            tot->q[ILP_BWD] += f;
        if (frg)
            tot->q[ILP_BWD] += ag;
        if (fg) {
            double a2;
            int64_t s2;
            tot->q[ILP_BWD] += reshard(E, c, t, &r[i].G, &T, &a2, &s2);
        }
        if (r[i].saver && r[i].rg && sh > 0) {
            int64_t full = plan_local_numel(E->g, t, &E->q.mesh, &r[i].X, E->dim_size);
            tot->q[ILP_MEM_ACT] -= (double)(full - sh) * eb * E->q.inflight;
        }
    }
}

/* Quantities of one plan: choice[i] for representative node n0 + i, bch[b]
 * for boundary b. */
static void ev_plan(const Ev *E, const PassIlpCosts *c, const int *choice, const int *bch, IlpVals *tot)
{
    const IrGraph *g = E->g;
    memset(tot, 0, sizeof *tot);
#define STRAT(n) (&E->strat[E->rep[(n) - E->n0] - E->n0][choice[E->rep[(n) - E->n0] - E->n0]])
    for (int n = E->n0; n < E->n1; n++) {
        int r = E->rep[n - E->n0];
        const IlpVals *v = &E->nval[r - E->n0][choice[r - E->n0]];
        for (int q = 0; q < ILP_NQ; q++)
            tot->q[q] += v->q[q];
    }
    Reader side[2][32];
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        if (x->role != IR_ACT || x->producer < 0)
            continue;
        int p = x->producer, nr[2] = {0, 0};
        const IrNode *pn = &g->nodes[p];
        int rep = g->pieces[pn->piece].rep, o = 0;
        while (pn->out[o] != t)
            o++;
        int b = boundary_of(E, t);
        bool across = false;
        for (int cn = 0; cn < g->nfwd; cn++) {
            const IrNode *cd = &g->nodes[cn];
            for (int i = 0; i < cd->nin; i++) {
                if (cd->in[i] != t)
                    continue;
                across |= cd->piece != pn->piece;
                if (!in_stage(E, cn))
                    continue;
                bool via_b = !in_stage(E, p) || (rep >= 0 && cd->piece != pn->piece);
                PlanSharding in[IR_MAX_IN];
                plan_shard_io(g, cd, STRAT(cn), in, NULL);
                Reader R = {in[i], plan_shard_grad_in(g, cd, STRAT(cn), i), recomputed(E, cd), false,
                            false};
                R.rg = !R.rc && (ir_ops[cd->op].saves & IR_SAVE_IN(i));
                R.saver = c->keeps_input(&E->ctx, g, cd, &E->q.mesh, E->dim_size, i, E->q.recompute);
                side[via_b][nr[via_b]++] = R;
            }
        }
        PlanSharding bs = {PLAN_NO_DIMS, 0, 0};
        if (b >= 0) {
            const PlanStrategy *bo = &E->bopt[b][bch[b]];
            bs = (PlanSharding){{bo->dim[0], bo->dim[1], bo->dim[2]}, 0, 0};
        }
        if (in_stage(E, p) && rep >= 0 && across) /* the boundary reads the producer */
            side[0][nr[0]++] = (Reader){bs, bs, false, false, false};
        if (nr[0] > 0) {
            PlanSharding out[IR_MAX_OUT];
            plan_shard_io(g, pn, STRAT(p), NULL, out);
            readers_cost(E, c, t, out[o], side[0], nr[0], tot);
        }
        if (nr[1] > 0)
            readers_cost(E, c, t, bs, side[1], nr[1], tot);
    }
#undef STRAT
}

static double ev_obj(const Ev *E, const IlpVals *v)
{
    return E->q.num_micro * (v->q[ILP_FWD] + v->q[ILP_BWD]) + v->q[ILP_SYNC];
}

static double ev_mem(const IlpVals *v) { return v->q[ILP_MEM_PARAM] + v->q[ILP_MEM_ACT]; }

static void ev_free(Ev *E)
{
    for (int i = 0; i < E->n1 - E->n0; i++) {
        free(E->strat[i]);
        free(E->nval[i]);
    }
    free(E->rep);
}

/* Enumerate representative strategies (restricted by `tie`: a node tied to
 * another takes tie_map[its leader's choice]) and boundary options. */
typedef struct {
    int leader[256];                /* -1: free; else representative index it follows */
    int *map[256];                  /* map[i][leader choice] = own choice */
} Tie;

typedef struct {
    double best, lo_mem, hi_mem, closest;
    IlpVals best_v;
    long combos;
} Brute;

static void brute(const Ev *E, const PassIlpCosts *c, const Tie *tie, double budget, Brute *out)
{
    int nr = E->n1 - E->n0;
    int choice[256] = {0}, bch[64] = {0};
    int free_idx[256], nf = 0;
    for (int i = 0; i < nr; i++)
        if (E->rep[i] == E->n0 + i && (!tie || tie->leader[i] < 0))
            free_idx[nf++] = i;
    out->best = INFINITY;
    out->lo_mem = INFINITY;
    out->hi_mem = -INFINITY;
    out->closest = INFINITY;
    out->combos = 0;
    for (;;) {
        if (tie)
            for (int i = 0; i < nr; i++)
                if (E->rep[i] == E->n0 + i && tie->leader[i] >= 0)
                    choice[i] = tie->map[i][choice[tie->leader[i]]];
        IlpVals v;
        ev_plan(E, c, choice, bch, &v);
        double obj = ev_obj(E, &v), mem = ev_mem(&v);
        out->combos++;
        out->lo_mem = fmin(out->lo_mem, mem);
        out->hi_mem = fmax(out->hi_mem, mem);
        if (budget > 0)
            out->closest = fmin(out->closest, fabs(mem - budget));
        if ((budget <= 0 || mem <= budget) && obj < out->best) {
            out->best = obj;
            out->best_v = v;
        }
        /* Next combination: free representatives, then boundaries. */
        int i = 0;
        for (; i < nf; i++) {
            int r = free_idx[i];
            if (++choice[r] < E->nstrat[r])
                break;
            choice[r] = 0;
        }
        if (i < nf)
            continue;
        int b = 0;
        for (; b < E->nb; b++) {
            if (++bch[b] < E->bn[b])
                break;
            bch[b] = 0;
        }
        if (b == E->nb)
            break;
    }
}

static double space(const Ev *E, const Tie *tie)
{
    double n = 1;
    for (int i = 0; i < E->n1 - E->n0; i++)
        if (E->rep[i] == E->n0 + i && (!tie || tie->leader[i] < 0))
            n *= E->nstrat[i];
    for (int b = 0; b < E->nb; b++)
        n *= E->bn[b];
    return n;
}

/* The ties ilp_merge makes, as representative-to-representative maps. */
static void merged_ties(const IrGraph *g, const PassCostCtx *ctx, const PassIlpQuery *q, const Ev *E,
                        Tie *tie, int *nties)
{
    IlpSeg *s = ilp_lower(ctx, &synth_costs, g, q);
    ilp_merge(s);
    *nties = 0;
    for (int i = 0; i < 256; i++) {
        tie->leader[i] = -1;
        tie->map[i] = NULL;
    }
    for (int x = 0; x < s->ninst; x++) {
        const IlpInst *in = &s->inst[x];
        if (in->node < 0 || in->group == x)
            continue;
        const IlpInst *ld = &s->inst[in->group];
        int i = in->node - E->n0, li = ld->node - E->n0;
        /* Strategy lists here and in the lowering come from the same call. */
        if (E->nstrat[i] != in->nstrat || E->nstrat[li] != ld->nstrat)
            ir_die("test: strategy lists differ");
        tie->leader[i] = li;
        tie->map[i] = malloc(sizeof(int) * (size_t)ld->nstrat);
        memcpy(tie->map[i], in->gmap, sizeof(int) * (size_t)ld->nstrat);
        (*nties)++;
        /* Exact: every strategy of the follower is kept, and under every
         * group strategy it reads its producer's output as produced, with
         * no partial sums: no communication between them. */
        char hit[512] = {0};
        for (int gi = 0; gi < ld->nstrat; gi++)
            hit[in->gmap[gi]] = 1;
        for (int j = 0; j < in->nstrat; j++)
            CHECK(hit[j], "tie of node %d drops its strategy %d", in->node, j);
        for (int l = 0; l < s->nlinks; l++) {
            const IlpLink *lk = &s->link[l];
            if (lk->dst != x || s->inst[lk->src].group != in->group)
                continue;
            for (int gi = 0; gi < ld->nstrat; gi++) {
                PlanSharding out = ilp_out_sharding(s, lk->src, lk->out, ilp_own(s, lk->src, gi));
                PlanSharding want, grad;
                ilp_in_sharding(s, x, lk->in, in->gmap[gi], &want, &grad);
                CHECK(out.partial == 0 && plan_sharding_eq(&out, &want) && plan_sharding_eq(&grad, &want),
                      "tie of node %d communicates under group strategy %d", in->node, gi);
            }
        }
    }
    ilp_seg_free(s);
}

static void tie_free(Tie *t)
{
    for (int i = 0; i < 256; i++)
        free(t->map[i]);
}

/* ------------------------------------------------------------------ a case */
static const int meshes[][2] = {{1, 2}, {2, 1}, {1, 4}, {4, 1}, {2, 2}, {1, 3}};

typedef struct {
    int run, optimal, infeasible, merged, skipped, boundaries, fixed;
} Stats;

/* ilp_consumers, which the lowering reads, against ir_consumers for every
 * tensor of g: the same nodes in the same order. */
static void check_consumers(const IrGraph *g, int tc)
{
    int *cstart, *clist, want[64];
    ilp_consumers(g, &cstart, &clist);
    for (int t = 0; t < g->ntensors; t++) {
        int n = ir_consumers(g, t, want, 64);
        CHECK(n == cstart[t + 1] - cstart[t] && (n > 64 || !memcmp(want, &clist[cstart[t]], (size_t)n * sizeof *want)),
              "case %d: tensor %d's consumers: %d by ilp_consumers, %d by ir_consumers (or in another order)", tc,
              t, cstart[t + 1] - cstart[t], n);
    }
    free(cstart);
    free(clist);
}

static void one_case(int tc, Stats *st)
{
    Model M;
    build_model(&M);
    copy_blocks(M.g);
    const IrGraph *g = M.g;
    check_consumers(g, tc);
    synth_seed((uint64_t)tc * 2654435761u + 1);
    PassIlpQuery q;
    memset(&q, 0, sizeof q);
    q.first_piece = irand(g->npieces);
    q.npieces = 1 + irand(g->npieces - q.first_piece);
    const int *ms = meshes[irand(6)];
    plan_mesh_make(&q.mesh, ms[0], ms[1], 2);
    int64_t mbs[] = {1, 2, 4, 6};
    q.mb_seqs = mbs[irand(4)];
    q.num_micro = 1 + irand(4);
    q.zero = irand(4);
    q.recompute = (PlanRecompute)irand(4);
    q.inflight = 1 + irand(3);
    if (irand(4) == 0) /* pins: axis 0 batch only, or no sequence split */
        pass_ilp_pins(g, irand(2) ? 0 : -1, q.mesh.naxes > 1 ? 1 : 0, irand(2), q.allow);
    if (irand(6) == 0) {
        /* Replicated, or split along the sequence on the last axis if the
         * pins and sizes allow it. */
        int a = q.mesh.naxes - 1, s = g->seq_dim;
        bool seq_ok = q.mesh.size[a] > 1 && g->dims[s].size % q.mesh.size[a] == 0 &&
                      (!(q.allow[0] || q.allow[1]) || (q.allow[a] >> s & 1));
        q.fix_boundary = true;
        q.boundary = (PlanSharding){PLAN_NO_DIMS, 0, 0};
        if (seq_ok && irand(2))
            q.boundary.dim[a] = (int16_t)s;
        st->fixed++;
    }
    PassCostCtx ctx = {.attention = irand(2) ? PLAN_ATTN_FLASH : PLAN_ATTN_MATERIALIZED};
    Ev E;
    ev_init(&E, g, &q);
    E.ctx = ctx;
    double n_all = space(&E, NULL);
    if (n_all > 6000) {
        st->skipped++;
        ev_free(&E);
        model_free(&M);
        return;
    }
    ev_prices(&E, &synth_costs);
    st->boundaries += E.nb > 0;
    /* Budget: none, loose, between the extremes, impossible. */
    Brute bf;
    brute(&E, &synth_costs, NULL, 0, &bf);
    switch (tc % 4) {
    case 0: q.budget = 0; break;
    case 1: q.budget = bf.hi_mem * 1.01 + 1; break;
    case 2: q.budget = bf.lo_mem + (bf.hi_mem - bf.lo_mem) * urand(); break;
    case 3: q.budget = bf.lo_mem * (0.5 + 0.4 * urand()); break;
    }
    if (q.budget > 0 && q.budget < 1)
        q.budget = 0; /* lo_mem can be 0 with no parameters on the stage */
    E.q.budget = q.budget;
    brute(&E, &synth_costs, NULL, q.budget, &bf);
    if (q.budget > 0 && bf.closest < 1e-6 * q.budget) { /* tolerance would decide */
        st->skipped++;
        ev_free(&E);
        model_free(&M);
        return;
    }
    st->run++;
    PassIlpCache *cache = pass_ilp_cache_new();
    /* 1. Without merging: the ILP optimum is the brute-force optimum. */
    q.no_merge = true;
    const PassIlpResult *r = pass_ilp_stage(cache, &ctx, &synth_costs, g, &q);
    if (!isfinite(bf.best)) {
        CHECK(!r->feasible && r->status == ILP_INFEASIBLE, "case %d: brute force finds nothing within %g, ILP says %s",
              tc, q.budget, ilp_status_name(r->status));
        st->infeasible++;
    } else {
        CHECK(r->feasible && r->status == ILP_OPTIMAL, "case %d: status %s", tc, ilp_status_name(r->status));
        if (r->feasible) {
            st->optimal++;
            CHECK(fabs(r->step_s - bf.best) <= 1e-9 * fabs(bf.best), "case %d: ILP %.17g, brute force %.17g",
                  tc, r->step_s, bf.best);
            CHECK(q.budget <= 0 || r->mem_bytes <= q.budget * (1 + 1e-9), "case %d: memory %g over %g", tc,
                  r->mem_bytes, q.budget);
            /* The ILP's strategies, with the best boundaries, evaluate here to
             * its objective; its parts add up. */
            int choice[256] = {0};
            for (int i = 0; i < E.n1 - E.n0; i++) {
                if (E.rep[i] != E.n0 + i)
                    continue;
                choice[i] = -1;
                for (int k = 0; k < E.nstrat[i]; k++)
                    if (E.strat[i][k].dim[0] == r->strategy[i].dim[0] &&
                        E.strat[i][k].dim[1] == r->strategy[i].dim[1])
                        choice[i] = k;
                CHECK(choice[i] >= 0, "case %d: node %d got a strategy it does not have", tc, E.n0 + i);
                if (choice[i] < 0)
                    choice[i] = 0;
            }
            for (int i = 0; i < E.n1 - E.n0; i++) /* layers share their template's strategy */
                CHECK(r->strategy[i].dim[0] == r->strategy[E.rep[i] - E.n0].dim[0] &&
                          r->strategy[i].dim[1] == r->strategy[E.rep[i] - E.n0].dim[1],
                      "case %d: node %d differs from its template", tc, E.n0 + i);
            /* Over the boundary options: the best evaluates to its objective,
             * and one of the plans reaching it has exactly its parts (ties
             * can split fwd and bwd differently). */
            int bch[64] = {0};
            double best = INFINITY;
            bool parts = false;
            for (int pass = 0; pass < 2; pass++)
                for (;;) {
                    IlpVals v;
                    ev_plan(&E, &synth_costs, choice, bch, &v);
                    bool fits = q.budget <= 0 || ev_mem(&v) <= q.budget;
                    if (pass == 0 && fits && ev_obj(&E, &v) < best)
                        best = ev_obj(&E, &v);
                    if (pass == 1 && fits && fabs(ev_obj(&E, &v) - best) <= 1e-12 * best)
                        parts |= fabs(v.q[ILP_FWD] - r->fwd_s) <= 1e-9 * fmax(1e-12, r->fwd_s) &&
                                 fabs(v.q[ILP_BWD] - r->bwd_s) <= 1e-9 * fmax(1e-12, r->bwd_s) &&
                                 fabs(v.q[ILP_SYNC] - r->sync_s) <= 1e-9 * fmax(1e-12, r->sync_s) &&
                                 fabs(ev_mem(&v) - r->mem_bytes) <= 1e-9 * fmax(1, r->mem_bytes);
                    int b = 0;
                    for (; b < E.nb; b++) {
                        if (++bch[b] < E.bn[b])
                            break;
                        bch[b] = 0;
                    }
                    if (b == E.nb)
                        break;
                }
            CHECK(fabs(best - r->step_s) <= 1e-9 * fabs(r->step_s), "case %d: its plan evaluates to %.17g, it says %.17g",
                  tc, best, r->step_s);
            CHECK(parts, "case %d: no best plan has its parts fwd %g bwd %g sync %g mem %g", tc, r->fwd_s,
                  r->bwd_s, r->sync_s, r->mem_bytes);
            /* The listed collectives and the nodes' own times make fwd + bwd. */
            double colls = 0, nodes = 0;
            for (int i = 0; i < r->ncoll; i++)
                colls += r->coll[i].seconds * r->coll[i].count;
            for (int n = E.n0; n < E.n1; n++) {
                int ri = E.rep[n - E.n0] - E.n0;
                const IlpVals *v = &E.nval[ri][choice[ri]];
                nodes += v->q[ILP_FWD] + v->q[ILP_BWD];
            }
            CHECK(fabs(colls + nodes - r->fwd_s - r->bwd_s) <= 1e-9 * (r->fwd_s + r->bwd_s),
                  "case %d: collectives %g + nodes %g != fwd + bwd %g", tc, colls, nodes, r->fwd_s + r->bwd_s);
        }
    }
    /* The cache answers an equal query without solving. */
    int solves = pass_ilp_cache_solves(cache);
    const PassIlpResult *r2 = pass_ilp_stage(cache, &ctx, &synth_costs, g, &q);
    CHECK(r2 == r && pass_ilp_cache_solves(cache) == solves, "case %d: cache miss", tc);
    /* 2. With merging: the optimum over the tied space, never below the
     * untied one. */
    Tie tie;
    int nties;
    merged_ties(g, &ctx, &q, &E, &tie, &nties);
    q.no_merge = false;
    const PassIlpResult *rm = pass_ilp_stage(cache, &ctx, &synth_costs, g, &q);
    if (nties > 0) {
        st->merged++;
        Brute bt;
        brute(&E, &synth_costs, &tie, q.budget, &bt);
        CHECK(rm->feasible == isfinite(bt.best), "case %d: merged feasibility %d, brute force %g", tc,
              rm->feasible, bt.best);
        if (rm->feasible && isfinite(bt.best))
            CHECK(fabs(rm->step_s - bt.best) <= 1e-9 * fabs(bt.best), "case %d: merged ILP %.17g, brute force %.17g",
                  tc, rm->step_s, bt.best);
        CHECK(!isfinite(bt.best) || bt.best >= bf.best * (1 - 1e-12), "case %d: ties beat the untied optimum", tc);
    } else {
        CHECK(rm->feasible == r->feasible && (!rm->feasible || fabs(rm->step_s - r->step_s) <= 1e-9 * r->step_s),
              "case %d: nothing merged, yet the answer changed", tc);
    }
    tie_free(&tie);
    pass_ilp_cache_free(cache);
    ev_free(&E);
    model_free(&M);
}

int main(int argc, char **argv)
{
    ilp_seed(0x2545F4914F6CDD1Dull);
    int ncases = argc > 1 ? atoi(argv[1]) : 300;
    Stats st = {0};
    for (int tc = 0; tc < ncases; tc++)
        one_case(tc, &st);
    printf("ilp lower: %d cases run (%d skipped: too large or budget on a plan): %d optimal, %d "
           "infeasible, %d with merges, %d with boundaries, %d with a fixed boundary; %d failures\n",
           st.run, st.skipped, st.optimal, st.infeasible, st.merged, st.boundaries, st.fixed, failures);
    CHECK(st.optimal > st.run / 3 && st.infeasible > st.run / 10 && st.merged > st.run / 20 &&
              st.boundaries > st.run / 4,
          "too few cases of some kind");
    return failures ? 1 : 0;
}
