/* test_shard.c: the sharding algebra on a hand-built Megatron MLP and
 * attention block: input/output shardings, gradient partial sums, and the
 * collectives plan_reshard prescribes between disagreeing shardings. */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

typedef struct {
    IrArena *a;
    IrGraph *g;
    int b, s, d, f, h, kvh, hd, v;
    int x, w1, w2, y, z, q, k, vv, att, tok, emb, logits, tgt;
    int n_mm1, n_mm2, n_att, n_emb, n_ce;
} Fix;

static int tensor(IrGraph *g, const char *name, IrRole role, int rank, const int *dims)
{
    int t = ir_tensor_add(g, name, role == IR_INPUT && rank == 2 ? IR_I32 : IR_BF16, role, rank, dims,
                          IR_NOLOC);
    if (role == IR_PARAM) {
        g->tensors[t].init = IR_INIT_NORMAL;
        g->tensors[t].init_std = 0.02;
    }
    return t;
}

static void build(Fix *f)
{
    f->a = ir_arena_new();
    IrGraph *g = f->g = ir_graph_new(f->a, "t", NULL);
    f->b = g->batch_dim;
    f->s = ir_dim_add(g, "seq", 16, IR_NOLOC);
    f->d = ir_dim_add(g, "d_model", 64, IR_NOLOC);
    f->f = ir_dim_add(g, "d_ff", 256, IR_NOLOC);
    f->h = ir_dim_add(g, "n_heads", 8, IR_NOLOC);
    f->kvh = ir_dim_add(g, "n_kv_heads", 2, IR_NOLOC);
    f->hd = ir_dim_add(g, "head_dim", 8, IR_NOLOC);
    f->v = ir_dim_add(g, "vocab", 128, IR_NOLOC);
    g->seq_dim = f->s;
    g->global_batch = 8;
    ir_piece_begin(g, "embedding", -1, -1);
    f->tok = tensor(g, "tokens", IR_INPUT, 2, (int[]){f->b, f->s});
    f->tgt = tensor(g, "targets", IR_INPUT, 2, (int[]){f->b, f->s});
    f->emb = tensor(g, "wte", IR_PARAM, 2, (int[]){f->v, f->d});
    f->n_emb = ir_node_add(g, IR_OP_EMBEDDING, (int[]){f->tok, f->emb}, 2, NULL, IR_NOLOC);
    f->x = g->nodes[f->n_emb].out[0];
    ir_piece_begin(g, "layer 0", 0, 0);
    f->w1 = tensor(g, "w1", IR_PARAM, 2, (int[]){f->d, f->f});
    f->w2 = tensor(g, "w2", IR_PARAM, 2, (int[]){f->f, f->d});
    f->n_mm1 = ir_node_add(g, IR_OP_MATMUL, (int[]){f->x, f->w1}, 2, NULL, IR_NOLOC);
    f->y = g->nodes[f->n_mm1].out[0];
    f->n_mm2 = ir_node_add(g, IR_OP_MATMUL, (int[]){f->y, f->w2}, 2, NULL, IR_NOLOC);
    f->z = g->nodes[f->n_mm2].out[0];
    int wq = tensor(g, "wq", IR_PARAM, 3, (int[]){f->d, f->h, f->hd});
    int wk = tensor(g, "wk", IR_PARAM, 3, (int[]){f->d, f->kvh, f->hd});
    int nq = ir_node_add(g, IR_OP_MATMUL, (int[]){f->z, wq}, 2, NULL, IR_NOLOC);
    int nk = ir_node_add(g, IR_OP_MATMUL, (int[]){f->z, wk}, 2, NULL, IR_NOLOC);
    f->q = g->nodes[nq].out[0];
    f->k = g->nodes[nk].out[0];
    f->n_att = ir_node_add(g, IR_OP_ATTENTION, (int[]){f->q, f->k, f->k}, 3,
                           &(IrAttrs){.causal = true}, IR_NOLOC);
    f->att = g->nodes[f->n_att].out[0];
    ir_piece_begin(g, "head", -1, -1);
    int nl = ir_node_add(g, IR_OP_MATMUL, (int[]){f->z, f->emb}, 2, NULL, IR_NOLOC);
    f->logits = g->nodes[nl].out[0];
    f->n_ce = ir_node_add(g, IR_OP_CROSS_ENTROPY, (int[]){f->logits, f->tgt}, 2, NULL, IR_NOLOC);
    g->loss = g->nodes[f->n_ce].out[0];
}

static bool sh_is(PlanSharding s, int d0, int d1, int partial)
{
    return s.dim[0] == d0 && s.dim[1] == d1 && s.partial == partial;
}

int main(void)
{
    Fix f;
    build(&f);
    IrGraph *g = f.g;
    CHECK(ir_verify(g, "test build"));
    int64_t sz[32];
    ir_dim_sizes(g, 8, sz);

    PlanMesh m;
    plan_mesh_make(&m, 2, 4, 8); /* 2 x 4 inside one node */
    CHECK(m.nodes[0] == 1 && m.nodes[1] == 1 && m.per_node[0] == 2 && m.per_node[1] == 4);
    plan_mesh_make(&m, 4, 8, 8); /* 4 nodes x 8 GPUs */
    CHECK(m.nodes[0] == 4 && m.per_node[0] == 1 && m.nodes[1] == 1 && m.per_node[1] == 8);
    plan_mesh_make(&m, 16, 1, 8); /* 1-D over 2 nodes */
    CHECK(m.naxes == 1 && m.nodes[0] == 2 && m.per_node[0] == 8);

    /* Megatron MLP on a (dp=2) x (tp=4) mesh: column-parallel w1, row-parallel w2. */
    plan_mesh_make(&m, 2, 4, 8);
    const IrNode *mm1 = &g->nodes[f.n_mm1], *mm2 = &g->nodes[f.n_mm2];
    PlanStrategy col = {{(int16_t)f.b, (int16_t)f.f, -1}, 0}, row = {{(int16_t)f.b, (int16_t)f.f, -1}, 0};
    PlanSharding in[2], out[1];
    plan_shard_io(g, mm1, &col, in, out);
    CHECK(sh_is(in[0], f.b, -1, 0));     /* x[batch/dp, seq, d_model] */
    CHECK(sh_is(in[1], -1, f.f, 0));     /* w1[d_model, d_ff/tp] */
    CHECK(sh_is(out[0], f.b, f.f, 0));   /* y[batch/dp, seq, d_ff/tp] */
    PlanSharding gw1 = plan_shard_grad_in(g, mm1, &col, 1);
    CHECK(sh_is(gw1, -1, f.f, 1));       /* dw1 partial over dp: the DP reduction */
    PlanSharding gx = plan_shard_grad_in(g, mm1, &col, 0);
    CHECK(sh_is(gx, f.b, -1, 2));        /* dx partial over tp: Megatron's f backward */
    plan_shard_io(g, mm2, &row, in, out);
    CHECK(sh_is(in[0], f.b, f.f, 0));
    CHECK(sh_is(out[0], f.b, -1, 2));    /* z partial over tp: needs the all-reduce */

    /* z partial over tp -> replicated: one all-reduce of the local tensor. */
    PlanColl st[8];
    PlanSharding rep = {{(int16_t)f.b, -1, -1}, 0, 0};
    int n = plan_reshard(g, f.z, &m, &out[0], &rep, sz, st, 8);
    CHECK(n == 1 && st[0].kind == PLAN_COLL_ALLREDUCE && st[0].axis == 1);
    CHECK(st[0].numel == 4 * 16 * 64); /* batch 8/2, seq 16, d_model 64 */
    /* -> sequence split over tp instead: a reduce-scatter (sequence parallelism). */
    PlanSharding sp = {{(int16_t)f.b, (int16_t)f.s, -1}, 0, 0};
    n = plan_reshard(g, f.z, &m, &out[0], &sp, sz, st, 8);
    CHECK(n == 1 && st[0].kind == PLAN_COLL_REDUCESCATTER && st[0].dim == f.s);
    /* sequence split -> replicated: all-gather, counted as its output. */
    n = plan_reshard(g, f.z, &m, &sp, &rep, sz, st, 8);
    CHECK(n == 1 && st[0].kind == PLAN_COLL_ALLGATHER && st[0].numel == 4 * 16 * 64);
    /* seq split -> d_model split on the same axis: all-to-all. */
    PlanSharding dsplit = {{(int16_t)f.b, (int16_t)f.d, -1}, 0, 0};
    n = plan_reshard(g, f.z, &m, &sp, &dsplit, sz, st, 8);
    CHECK(n == 1 && st[0].kind == PLAN_COLL_ALLTOALL && st[0].dim == f.s && st[0].dim2 == f.d);
    /* replicated -> split: a local slice, then equal shardings need nothing. */
    n = plan_reshard(g, f.z, &m, &rep, &sp, sz, st, 8);
    CHECK(n == 1 && st[0].kind == PLAN_COLL_SLICE);
    CHECK(plan_reshard(g, f.z, &m, &sp, &sp, sz, st, 8) == 0);
    /* Swapping two splits between axes is a gather then a slice, never a clash. */
    PlanSharding ab = {{(int16_t)f.b, (int16_t)f.s, -1}, 0, 0}, ba = {{(int16_t)f.s, (int16_t)f.b, -1}, 0, 0};
    n = plan_reshard(g, f.z, &m, &ab, &ba, sz, st, 8);
    CHECK(n >= 2);

    /* Strategies: replicated first; no dim on both axes; divisibility respected. */
    PlanStrategy ss[256];
    int ns = plan_strategies(g, mm1, &m, sz, NULL, ss, 256);
    CHECK(ns > 4 && ss[0].dim[0] == -1 && ss[0].dim[1] == -1);
    for (int i = 0; i < ns; i++) {
        CHECK(ss[i].dim[0] < 0 || ss[i].dim[0] != ss[i].dim[1]);
        for (int a = 0; a < 2; a++)
            if (ss[i].dim[a] >= 0)
                CHECK(sz[ss[i].dim[a]] % m.size[a] == 0);
    }
    /* Pins: axis 0 may split only the batch. */
    uint64_t allow[2] = {1ull << f.b, ~(1ull << f.b)};
    ns = plan_strategies(g, mm1, &m, sz, allow, ss, 256);
    for (int i = 0; i < ns; i++)
        CHECK(ss[i].dim[0] == -1 || ss[i].dim[0] == f.b);

    /* Attention: batch, heads and the query sequence split (context
     * parallelism), never head_dim; 2 KV heads refuse a 4-way head split but
     * allow a 2-way one, with the kv dim following the heads. */
    const IrNode *att = &g->nodes[f.n_att];
    CHECK(plan_dim_splittable(g, att, f.s) && !plan_dim_splittable(g, att, f.hd));
    CHECK(plan_dim_splittable(g, att, f.h) && plan_dim_splittable(g, att, f.b));
    ns = plan_strategies(g, att, &m, sz, NULL, ss, 256);
    for (int i = 0; i < ns; i++)
        CHECK(ss[i].dim[1] != f.h); /* axis 1 has 4 devices, 2 KV heads */
    PlanMesh m2;
    plan_mesh_make(&m2, 4, 2, 8);
    ns = plan_strategies(g, att, &m2, sz, NULL, ss, 256);
    bool found = false;
    for (int i = 0; i < ns; i++)
        found |= ss[i].dim[1] == f.h;
    CHECK(found);
    PlanStrategy hs = {{(int16_t)f.b, (int16_t)f.h, -1}, 0};
    PlanSharding ain[3], aout[2];
    plan_shard_io(g, att, &hs, ain, aout);
    CHECK(sh_is(ain[1], f.b, f.kvh, 0) && sh_is(aout[0], f.b, f.h, 0) && sh_is(aout[1], f.b, f.h, 0));
    /* Context parallelism on a dp 2 x cp 2 x tp 2 mesh: the queries, output
     * and lse split on the sequence, k and v read whole along cp (gathered),
     * and their gradients partial sums over it. */
    PlanMesh m3;
    plan_mesh_make_dims(&m3, 2, 2, 2, 8);
    CHECK(m3.naxes == 3 && plan_mesh_devices(&m3) == 8 && m3.per_node[2] == 2 && m3.per_node[1] == 2 &&
          m3.per_node[0] == 2 && m3.nodes[0] == 1);
    plan_mesh_make_dims(&m3, 4, 4, 8, 8); /* tp a node, cp over 4 nodes */
    CHECK(m3.per_node[2] == 8 && m3.nodes[1] == 4 && m3.per_node[1] == 1 && m3.nodes[0] == 4);
    plan_mesh_make_dims(&m3, 2, 2, 2, 8);
    PlanStrategy cs = {{(int16_t)f.b, (int16_t)f.s, (int16_t)f.h}, 0};
    CHECK(plan_cp_axis(g, att, &cs) == 1 && plan_cp_axis(g, att, &hs) == -1);
    PlanSharding cin[3], cout[2];
    plan_shard_io(g, att, &cs, cin, cout);
    CHECK(cin[0].dim[0] == f.b && cin[0].dim[1] == f.s && cin[0].dim[2] == f.h && !cin[0].partial);
    CHECK(cin[1].dim[0] == f.b && cin[1].dim[1] == -1 && cin[1].dim[2] == f.kvh && !cin[1].partial);
    CHECK(cout[0].dim[1] == f.s && cout[1].dim[1] == f.s && !cout[0].partial);
    PlanSharding dk = plan_shard_grad_in(g, att, &cs, 1), dq = plan_shard_grad_in(g, att, &cs, 0);
    CHECK(dk.dim[1] == -1 && dk.dim[2] == f.kvh && dk.partial == 2);
    CHECK(dq.dim[1] == f.s && dq.partial == 0);
    int64_t loc[32];
    plan_local_sizes(g, att, &m2, &hs, sz, loc);
    CHECK(loc[f.h] == 4 && loc[f.kvh] == 1 && loc[f.b] == 2);

    /* Sequence parallelism inside context parallelism (plan_seq_nested): on
     * dp x cp x tp a matmul may split the sequence over cp and, nested, tp;
     * attention and the embedding place rows by position and may not, nor
     * may a 2-axis mesh. The collectives keep the nesting: tp (inner) is
     * gathered before cp, reduce-scattered into after it, and sliced after. */
    CHECK(plan_seq_nested(g, mm1, &m3, f.s, 1, 2) && plan_seq_nested(g, NULL, &m3, f.s, 1, 2));
    CHECK(!plan_seq_nested(g, att, &m3, f.s, 1, 2) && !plan_seq_nested(g, &g->nodes[f.n_emb], &m3, f.s, 1, 2));
    CHECK(!plan_seq_nested(g, mm1, &m3, f.s, 0, 2) && !plan_seq_nested(g, mm1, &m3, f.d, 1, 2));
    CHECK(!plan_seq_nested(g, mm1, &m2, f.s, 0, 1));
    PlanStrategy nest = {{(int16_t)f.b, (int16_t)f.s, (int16_t)f.s}, 0};
    bool has_nest = false;
    int nn = plan_strategies(g, mm1, &m3, sz, NULL, ss, 256);
    for (int i = 0; i < nn; i++)
        has_nest |= ss[i].dim[0] == f.b && ss[i].dim[1] == f.s && ss[i].dim[2] == f.s;
    CHECK(has_nest);
    nn = plan_strategies(g, att, &m3, sz, NULL, ss, 256);
    for (int i = 0; i < nn; i++)
        CHECK(!(ss[i].dim[1] == f.s && ss[i].dim[2] == f.s));
    plan_local_sizes(g, mm1, &m3, &nest, sz, loc);
    CHECK(loc[f.s] == 4 && loc[f.b] == 4 && loc[f.d] == 64);
    PlanSharding xn = plan_shard_of(g, f.x, &nest), xc = {{(int16_t)f.b, (int16_t)f.s, -1}, 0, 0};
    CHECK(plan_local_numel(g, f.x, &m3, &xn, sz) == 4 * 4 * 64);
    PlanColl rs[8];
    int ns2 = plan_reshard(g, f.x, &m3, &xn, &xc, sz, rs, 8); /* gather the cp-local sequence */
    CHECK(ns2 == 1 && rs[0].kind == PLAN_COLL_ALLGATHER && rs[0].axis == 2 && rs[0].numel == 4 * 8 * 64);
    PlanSharding xp = xc;
    xp.partial = 4; /* a row-parallel output: reduce-scatter over tp into the nested split */
    ns2 = plan_reshard(g, f.x, &m3, &xp, &xn, sz, rs, 8);
    CHECK(ns2 == 1 && rs[0].kind == PLAN_COLL_REDUCESCATTER && rs[0].axis == 2 && rs[0].numel == 4 * 8 * 64);
    PlanSharding whole = {PLAN_NO_DIMS, 0, 0};
    ns2 = plan_reshard(g, f.x, &m3, &xn, &whole, sz, rs, 8);
    CHECK(ns2 == 3 && rs[0].axis == 0 && rs[1].axis == 2 && rs[2].axis == 1);
    for (int i = 0; i < ns2; i++)
        CHECK(rs[i].kind == PLAN_COLL_ALLGATHER);
    PlanSharding xt = {{(int16_t)f.b, -1, (int16_t)f.s}, 0, 0}; /* the sequence over tp alone */
    ns2 = plan_reshard(g, f.x, &m3, &xt, &xn, sz, rs, 8);
    CHECK(ns2 == 3 && rs[0].kind == PLAN_COLL_ALLGATHER && rs[0].axis == 2 &&
          rs[1].kind == PLAN_COLL_SLICE && rs[1].axis == 1 && rs[2].kind == PLAN_COLL_SLICE && rs[2].axis == 2);
    ns2 = plan_reshard(g, f.x, &m3, &xn, &xt, sz, rs, 8); /* ... and back: no nesting broken */
    CHECK(ns2 == 3 && rs[0].axis == 2 && rs[0].kind == PLAN_COLL_ALLGATHER && rs[1].axis == 1 &&
          rs[1].kind == PLAN_COLL_ALLGATHER && rs[2].axis == 2 && rs[2].kind == PLAN_COLL_SLICE);
    ns2 = plan_reshard(g, f.x, &m3, &whole, &xn, sz, rs, 8);
    CHECK(ns2 == 3 && rs[1].kind == PLAN_COLL_SLICE && rs[1].axis == 1 && rs[2].axis == 2);

    /* Vocabulary-parallel embedding leaves partial sums; vocabulary-parallel
     * cross-entropy reduces inside, so its loss is not partial over that axis. */
    PlanStrategy vs = {{(int16_t)f.b, (int16_t)f.v, -1}, 0};
    PlanSharding eo[1], co[2];
    plan_shard_io(g, &g->nodes[f.n_emb], &vs, NULL, eo);
    CHECK(sh_is(eo[0], f.b, -1, 2));
    plan_shard_io(g, &g->nodes[f.n_ce], &vs, NULL, co);
    CHECK(sh_is(co[0], -1, -1, 1)); /* partial over dp (batch), whole over the vocab axis */
    CHECK(sh_is(co[1], f.b, -1, 0));

    /* Requirements: the dp axis splits the batch, a pinned tp the weight
     * itself (not the sequence beside a whole weight). */
    PlanMesh m22;
    plan_mesh_make(&m22, 2, 2, 8);
    int nr = plan_strategies(g, mm1, &m22, sz, NULL, ss, 256);
    int kept = plan_strategies_require(g, mm1, -1, PLAN_REQ_BATCH | PLAN_REQ_WEIGHTS, ss, nr);
    CHECK(kept > 0 && kept < nr);
    for (int i = 0; i < kept; i++)
        CHECK(ss[i].dim[0] == f.b && (ss[i].dim[1] == f.d || ss[i].dim[1] == f.f));
    /* A requirement nothing can meet is dropped, never leaving zero strategies:
     * the attention reads no weight. */
    nr = plan_strategies(g, att, &m22, sz, NULL, ss, 256);
    CHECK(plan_strategies_require(g, att, -1, PLAN_REQ_WEIGHTS, ss, nr) == nr);
    /* A boundary tensor: only the batch requirement applies. */
    PlanStrategy bs[3] = {{PLAN_NO_DIMS, 0}, {{(int16_t)f.b, -1, -1}, 0}, {{(int16_t)f.b, (int16_t)f.s, -1}, 0}};
    CHECK(plan_strategies_require(g, NULL, f.x, PLAN_REQ_BATCH | PLAN_REQ_SEQ_NORMS, bs, 3) == 2);

    /* The all-to-all CP form (plan_cp_a2a): on a dp x cp mesh (tp 1, axis 1
     * innermost) attention may split its heads over cp with the exchange
     * bit; q, k, v, o then carry heads / cp heads of the whole sequence, the
     * reshard from the sequence split is one all-to-all, and PLAN_REQ_CP
     * keeps it. Not offered where the 2 KV heads do not divide (axis 1 of 4),
     * nor on dp x cp x tp with tp > 1 (the heads would need tp and cp). */
    nr = plan_strategies(g, att, &m22, sz, NULL, ss, 256);
    int na2a = 0;
    for (int i = 0; i < nr; i++)
        if (plan_cp_a2a(g, att, &ss[i]) >= 0) {
            na2a++;
            CHECK(plan_cp_a2a(g, att, &ss[i]) == 1 && ss[i].dim[1] == f.h && ss[i].xchg == 2);
            CHECK(plan_cp_axis(g, att, &ss[i]) == 1 && !plan_cp_ring(g, att, &ss[i]));
        }
    CHECK(na2a == 2); /* with the batch over axis 0 or not */
    int nreq = plan_strategies_require(g, att, -1, PLAN_REQ_BATCH | PLAN_REQ_CP, ss, nr);
    CHECK(nreq == 3); /* the batch over dp; gather, ring and a2a over cp */
    for (int i = 0; i < nreq; i++)
        CHECK(ss[i].dim[0] == f.b && (plan_cp_split(g, att, ss[i].dim[1]) || plan_cp_a2a(g, att, &ss[i]) == 1));
    PlanStrategy as = {{(int16_t)f.b, (int16_t)f.h, -1}, 2};
    CHECK(plan_cp_a2a(g, att, &as) == 1 && plan_cp_a2a(g, att, &hs) == -1 && plan_cp_a2a(g, att, &cs) == -1);
    PlanSharding ain2[3], aout2[2];
    plan_shard_io(g, att, &as, ain2, aout2);
    CHECK(sh_is(ain2[0], f.b, f.h, 0) && sh_is(ain2[1], f.b, f.kvh, 0) && sh_is(aout2[0], f.b, f.h, 0));
    PlanSharding dk2 = plan_shard_grad_in(g, att, &as, 1);
    CHECK(sh_is(dk2, f.b, f.kvh, 0)); /* complete: each rank owns its heads' keys */
    PlanSharding qs = {{(int16_t)f.b, (int16_t)f.s, -1}, 0, 0};
    ns2 = plan_reshard(g, att->in[0], &m22, &qs, &ain2[0], sz, rs, 8);
    CHECK(ns2 == 1 && rs[0].kind == PLAN_COLL_ALLTOALL && rs[0].axis == 1);
    ns2 = plan_reshard(g, att->in[1], &m22, &dk2, &qs, sz, rs, 8); /* dk back to the sequence */
    CHECK(ns2 == 1 && rs[0].kind == PLAN_COLL_ALLTOALL && rs[0].axis == 1);
    nr = plan_strategies(g, att, &m, sz, NULL, ss, 256);
    for (int i = 0; i < nr; i++)
        CHECK(plan_cp_a2a(g, att, &ss[i]) < 0);
    nr = plan_strategies(g, att, &m3, sz, NULL, ss, 256); /* 2 KV heads over tp 2 x cp 2: no */
    for (int i = 0; i < nr; i++)
        CHECK(plan_cp_a2a(g, att, &ss[i]) != 1);

    /* ... beside tp (docs/context.md, "All-to-all"): with 4 KV heads on dp 2
     * x cp 2 x tp 2 the heads split over tp and, nested inside tp's block,
     * cp (tp outer: PlanSharding.hi_outer bit 2), only as the all-to-all
     * form. From the q projection's [batch/dp, seq/cp, n_heads/tp] one
     * all-to-all over cp reaches it, and back; the default order (cp outer)
     * would gather and slice both levels. */
    char buf[256];
    int64_t sz4[32];
    memcpy(sz4, sz, sizeof sz4);
    sz4[f.kvh] = 4;
    nr = plan_strategies(g, att, &m3, sz4, NULL, ss, 256);
    na2a = 0;
    for (int i = 0; i < nr; i++) {
        if (ss[i].dim[1] == f.h && ss[i].dim[2] == f.h) {
            CHECK(ss[i].xchg == 2 && plan_cp_a2a(g, att, &ss[i]) == 1 && plan_cp_axis(g, att, &ss[i]) == 1);
            na2a++;
        }
        CHECK(plan_cp_a2a(g, att, &ss[i]) != 1 || (ss[i].dim[1] == f.h && ss[i].dim[2] == f.h));
    }
    CHECK(na2a == 2); /* with the batch over axis 0 or not */
    nreq = plan_strategies_require(g, att, -1, PLAN_REQ_BATCH | PLAN_REQ_CP, ss, nr);
    int nested_kept = 0;
    for (int i = 0; i < nreq; i++)
        nested_kept += plan_cp_a2a(g, att, &ss[i]) == 1;
    CHECK(nested_kept == 1);
    PlanStrategy ts = {{(int16_t)f.b, (int16_t)f.h, (int16_t)f.h}, 2};
    PlanSharding tin[3], tout[2];
    plan_shard_io(g, att, &ts, tin, tout);
    CHECK(tin[0].dim[1] == f.h && tin[0].dim[2] == f.h && tin[0].hi_outer == 4 && !tin[0].partial);
    CHECK(tin[1].dim[1] == f.kvh && tin[1].dim[2] == f.kvh && tin[1].hi_outer == 4);
    CHECK(tout[0].dim[1] == f.h && tout[0].dim[2] == f.h && tout[0].hi_outer == 4);
    CHECK(plan_axis_outside(&tin[0], 2, 1) && !plan_axis_outside(&tin[0], 1, 2));
    PlanSharding tdk = plan_shard_grad_in(g, att, &ts, 1);
    CHECK(tdk.dim[1] == f.kvh && tdk.dim[2] == f.kvh && tdk.hi_outer == 4 && !tdk.partial);
    plan_local_sizes(g, att, &m3, &ts, sz4, loc);
    CHECK(loc[f.h] == 2 && loc[f.kvh] == 1 && loc[f.s] == 16);
    PlanSharding qt = {{(int16_t)f.b, (int16_t)f.s, (int16_t)f.h}, 0, 0}; /* the q projection's */
    ns2 = plan_reshard(g, att->in[0], &m3, &qt, &tin[0], sz4, rs, 8);
    CHECK(ns2 == 1 && rs[0].kind == PLAN_COLL_ALLTOALL && rs[0].axis == 1 && rs[0].dim == f.s &&
          rs[0].dim2 == f.h && rs[0].numel == 4 * 8 * 4 * 8);
    ns2 = plan_reshard(g, att->in[0], &m3, &tout[0], &qt, sz4, rs, 8); /* o back */
    CHECK(ns2 == 1 && rs[0].kind == PLAN_COLL_ALLTOALL && rs[0].axis == 1 && rs[0].dim == f.h &&
          rs[0].dim2 == f.s);
    PlanSharding kt = {{(int16_t)f.b, (int16_t)f.s, (int16_t)f.kvh}, 0, 0};
    ns2 = plan_reshard(g, att->in[1], &m3, &tdk, &kt, sz4, rs, 8); /* dK back: complete */
    CHECK(ns2 == 1 && rs[0].kind == PLAN_COLL_ALLTOALL && rs[0].axis == 1);
    CHECK(plan_sharding_eq(&(PlanSharding){{(int16_t)f.b, (int16_t)f.h, (int16_t)f.h}, 0, 4}, &tin[0]));
    PlanSharding cpo = tin[0]; /* the default order: cp outer */
    cpo.hi_outer = 0;
    CHECK(!plan_sharding_eq(&cpo, &tin[0]));
    ns2 = plan_reshard(g, att->in[0], &m3, &qt, &cpo, sz4, rs, 8);
    CHECK(ns2 == 4 && rs[0].kind == PLAN_COLL_ALLGATHER && rs[0].axis == 1 && rs[1].kind == PLAN_COLL_ALLGATHER &&
          rs[1].axis == 2 && rs[2].kind == PLAN_COLL_SLICE && rs[2].axis == 1 && rs[3].kind == PLAN_COLL_SLICE &&
          rs[3].axis == 2);
    ns2 = plan_reshard(g, att->in[0], &m3, &tin[0], &cpo, sz4, rs, 8); /* one order to the other */
    CHECK(ns2 == 4 && rs[0].kind == PLAN_COLL_ALLGATHER && rs[0].axis == 1 && rs[1].kind == PLAN_COLL_ALLGATHER &&
          rs[1].axis == 2 && rs[2].kind == PLAN_COLL_SLICE && rs[2].axis == 1 && rs[3].kind == PLAN_COLL_SLICE &&
          rs[3].axis == 2);
    ns2 = plan_reshard(g, att->in[0], &m3, &cpo, &tin[0], sz4, rs, 8); /* ... and back: tp's level first */
    CHECK(ns2 == 4 && rs[0].axis == 2 && rs[0].kind == PLAN_COLL_ALLGATHER && rs[1].axis == 1 &&
          rs[2].kind == PLAN_COLL_SLICE && rs[2].axis == 2 && rs[3].kind == PLAN_COLL_SLICE && rs[3].axis == 1);
    ns2 = plan_reshard(g, att->in[0], &m3, &whole, &tin[0], sz4, rs, 8); /* slices outer (tp) first */
    CHECK(ns2 == 3 && rs[0].axis == 0 && rs[1].kind == PLAN_COLL_SLICE && rs[1].axis == 2 && rs[2].axis == 1);
    PlanColl ag1 = {PLAN_COLL_ALLGATHER, 1, f.h, -1, 0};
    PlanSharding after = plan_sharding_after(&tin[0], &ag1);
    CHECK(after.dim[1] == -1 && after.dim[2] == f.h && after.hi_outer == 0); /* canonical */
    const char *names3[3] = {"dp", "cp", "tp"};
    plan_sharding_str(g, att->in[0], &tin[0], names3, buf, sizeof buf);
    CHECK(strstr(buf, "n_heads/tp/cp") != NULL);
    plan_sharding_str(g, att->in[0], &cpo, names3, buf, sizeof buf);
    CHECK(strstr(buf, "n_heads/cp/tp") != NULL);

    const char *names[2] = {"dp", "tp"};
    plan_sharding_str(g, f.w1, &gw1, names, buf, sizeof buf);
    CHECK(strcmp(buf, "w1[d_model, d_ff/tp] (partial over dp)") == 0);

    ir_graph_free(g);
    ir_arena_free(f.a);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    else
        printf("shard: all checks passed\n");
    return failures != 0;
}
