/* search_ilp.c: a group's strategies from the intra-operator ILP, and the
 * per-piece costs the partition and the bounds work with.
 *
 * The stage mesh is (dp x tp): axis 0 may split only the batch, axis 1
 * anything else (and the sequence only with sp), pass_ilp_pins. One solve per
 * kind of piece serves every stage of every pipeline degree: each repeat is
 * solved as one layer between layers of its kind (the cache answers any
 * other stage of that shape), and each run of pieces outside repeats (the
 * embedding, the head) together with the layer next to it, whose boundary
 * sharding is fixed to the one the layers chose so that the pieces agree.
 * The queries use the group's micro-batch and count, one micro-batch in
 * flight and no memory budget (variant 0). Variant k > 0 solves the layers
 * and the runs again, each under a budget just below variant k - 1's memory
 * for it: the fastest strategies that use less, so that the variants walk
 * the ILP's time/memory frontier point by point (sharded instead of
 * replicated weights, a split vocabulary, split norms, ...), and a candidate that memory constrains can take the first
 * point it fits with rather than recomputation or a worse cut. */
#include "search/src.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* plan_axes reads only the mesh and the strategies, which every plan
 * ranked with V shares: found once here, copied by src_plan. */
static void variant_axes(const Src *s, const SrcGroup *G, SrcVariant *V)
{
    Plan p;
    memset(&p, 0, sizeof p);
    p.mesh = G->mesh;
    p.strategy = V->strat;
    plan_axes(s->g, &p);
    memcpy(V->axis, p.axis, sizeof V->axis);
    memcpy(V->nested, p.nested, sizeof V->nested);
}

void src_variant_free(SrcVariant *v)
{
    free(v->strat);
    free(v->piece);
    free(v->wsmax);
    memset(v, 0, sizeof *v);
}

/* The piece to solve for repeat `rep`: one whose neighbours are of its kind
 * when there is one, so every group's query has the same shape. */
static int rep_representative(const IrGraph *g, int rep)
{
    int first = -1;
    for (int p = 0; p < g->npieces; p++) {
        if (g->pieces[p].rep != rep)
            continue;
        if (first < 0)
            first = p;
        if (p > 0 && p + 1 < g->npieces && g->pieces[p - 1].rep == rep && g->pieces[p + 1].rep == rep)
            return p;
    }
    return first;
}

static const PassIlpResult *solve(Src *s, SrcVariant *V, const PassIlpQuery *q)
{
    if (V->nq >= SRC_MAXQ)
        ir_die("search: more than %d ILP queries for one variant", SRC_MAXQ);
    const IrGraph *gs = s->o->skeleton ? s->o->skeleton : s->g;
    const PassIlpResult *r = pass_ilp_stage(s->cache, s->c, &pass_ilp_costs, gs, q);
    V->q[V->nq] = *q;
    V->r[V->nq++] = r;
    return r;
}

/* The bytes node nd keeps for its backward under each policy on (its
 * variant's strategies). */
static void node_kept(Src *s, const SrcGroup *G, const SrcVariant *V, const int64_t *ds, const IrNode *nd,
                      const bool *on, double *kept)
{
    enum { NS = IR_MAX_IN + IR_MAX_OUT };
    int slots[SRC_NRC * NS], nslots[SRC_NRC];
    for (int r = 0; r < SRC_NRC; r++)
        nslots[r] = on[r] ? src_saved_slots(s, nd, r, &slots[r * NS]) : 0;
    pass_kept_bytes_each_at(s->c, s->g, &G->mesh, V->strat, ds, nd, on, slots, nslots, kept);
    for (int r = 0; r < SRC_NRC && src_check(s); r++)
        if (on[r] && kept[r] != src_kept_bytes(s->c, s->g, &G->mesh, V->strat, ds, nd, r))
            ir_die("search: kept bytes of node %d under policy %d differ", nd->id, r);
}

/* Whether node n of piece p reads an activation made outside p. */
static bool reads_outside(const IrGraph *g, const IrNode *n, int p)
{
    for (int i = 0; i < n->nin; i++) {
        int pr = g->tensors[n->in[i]].producer;
        if (pr >= 0 && g->nodes[pr].piece != p)
            return true;
    }
    return false;
}

/* A layer whose input comes from another kind of piece than layer q's
 * (the first of a run: from the embedding, say), P holding q's costs:
 * what it keeps follows its own nodes. Where q's saved bytes were made
 * with every layout they read known (exact), only the nodes reading from
 * outside the piece differ: their bytes replace q's counterparts', and its
 * working set is q's inside nodes' with theirs, without their kernels'
 * workspaces (at most pass_predict's); else every node's bytes again.
 * Its times and states stay q's. */
static void piece_mem(Src *s, const SrcGroup *G, const SrcVariant *V, const int64_t *ds, int p, int q, bool exact,
                      SrcPiece *P)
{
    const IrGraph *g = s->g;
    bool on[SRC_NRC];
    for (int r = 0; r < SRC_NRC; r++) {
        on[r] = src_rc_on(s, r);
        if (!exact)
            P->saved[r] = 0;
    }
    if (!exact)
        P->ws_mid = 0;
    P->ws = P->ws_mid;
    for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
        const IrNode *nd = &g->nodes[n];
        bool edge = reads_outside(g, nd, p);
        if (exact && !edge)
            continue;
        double kept[SRC_NRC], was[SRC_NRC];
        node_kept(s, G, V, ds, nd, on, kept);
        if (exact)
            node_kept(s, G, V, ds, &g->nodes[n - g->pieces[p].first + g->pieces[q].first], on, was);
        for (int r = 0; r < SRC_NRC; r++)
            P->saved[r] += on[r] ? kept[r] - (exact ? was[r] : 0) : 0;
        double w = src_node_ws(s, &G->mesh, nd, &V->strat[n], 0, ds);
        P->ws = src_fmax(P->ws, w);
        if (!edge)
            P->ws_mid = src_fmax(P->ws_mid, w);
    }
}

/* The repeat of the piece before p (-2: none; -1: outside repeats). */
static int pred_rep(const IrGraph *g, int p) { return p > 0 ? g->pieces[p - 1].rep : -2; }

/* Whether layer p keeps what layer q, its repeat's priced layer, keeps: a
 * layer's saved bytes follow the layout its input is produced in, known
 * when the repeat is priced only where the producer is a layer of the
 * same repeat (a layer before it, or the embedding, is solved later). */
static bool same_kept(const IrGraph *g, int p, int q)
{
    return pred_rep(g, p) == pred_rep(g, q) && pred_rep(g, q) == g->pieces[q].rep;
}

static void piece_costs(Src *s, const SrcGroup *G, SrcVariant *V, const int64_t *ds, int p,
                        SrcPiece *P)
{
    const IrGraph *g = s->g;
    memset(P, 0, sizeof *P);
    PassCostCtx cc = *s->c;
    cc.plan = V->strat; /* the GEMMs these layouts batch, as pass_predict prices them */
    bool on[SRC_NRC];
    for (int r = 0; r < SRC_NRC; r++)
        on[r] = src_rc_on(s, r);
    for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
        const IrNode *nd = &g->nodes[n];
        const PlanStrategy *st = &V->strat[n];
        PassNodeCost nc;
        pass_cost_node(&cc, g, nd, &G->mesh, st, ds, &nc);
        if (nc.fused_s != 0 && !plan_add_norm_fused(g, nd, V->strat))
            nc.fwd_s -= nc.fused_s, nc.fused_s = 0; /* the layouts keep the norm alone */
        P->fwd += nc.fwd_s;
        P->bwd += nc.bwd_s;
        double w = src_node_ws(s, &G->mesh, nd, st, nc.ws_bytes, ds);
        P->ws = src_fmax(P->ws, w);
        if (!reads_outside(g, nd, p))
            P->ws_mid = src_fmax(P->ws_mid, w);
        if (nd->op == IR_OP_MATMUL && g->tensors[nd->in[1]].role == IR_PARAM)
            P->dw += nc.gemm_dw_s;
        P->dw += nc.moe_dw_s;
        double kept[SRC_NRC];
        node_kept(s, G, V, ds, nd, on, kept);
        for (int r = 0; r < SRC_NRC; r++) {
            if (!on[r])
                continue; /* a module set not pinned */
            if (pass_recomputed(s->c, g, nd, r))
                P->rec[r] += pass_rec_fwd_s(s->c, g, nd, r, &nc);
            P->saved[r] += kept[r];
        }
        /* Model states and the step end's reduction and optimizer, as the
         * floor prices them (remembered by node, strategy and mesh). */
        if (src_reads_param(g, nd)) {
            double w0, g0, o0;
            pass_param_bytes3(s->c, g, nd, &G->mesh, st, 0, &w0, &g0, &o0);
            P->z3buf += !s->c->st.zero3_pools ? 2 * w0 : g->pieces[p].rep >= 0 ? 2 * (w0 + g0) : w0;
            double v[SRC_NSTATES];
            src_node_states(s, nd, &G->mesh, st, true, v);
            for (int z = 0; z < 4; z++) {
                P->states[z] += v[z];
                P->red[z] += v[8 + z];
                P->opt[z] += v[12 + z];
            }
        }
        /* What a ZB-H1 W slot holds of it, as pass_predict counts it (only
         * the experts and parameter GEMMs hold any). */
        if (s->wslots && pass_wslot_holds(g, nd)) {
            PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
            plan_shard_io(g, nd, st, in, out);
            for (int z = 0; z < 2; z++)
                pass_wslot_add(s->c, g, nd, &G->mesh, st, in, out, ds, pass_moe_wslot_factor_zero(s->c, 2 * z),
                               &P->wsaved[z], NULL, NULL);
        }
    }
    /* The resharding inside the piece at these strategies: each edge's
     * shares of its price at the one pair of layouts (search_edges.c).
     * PTDC_SEARCH_NO_CUT_COMM (tests/search/cutbound.sh): none, nor
     * transfers (variant_p2p), to compare. */
    if (getenv("PTDC_SEARCH_NO_CUT_COMM"))
        return;
    int c = g->pieces[p].count;
    PlanStrategy **st = ir_xmalloc(sizeof *st * (size_t)c + 1);
    double **sh = ir_xmalloc(sizeof *sh * (size_t)c + 1), *v = ir_xcalloc((size_t)c + 1, sizeof(double));
    int *ns = ir_xmalloc(sizeof(int) * (size_t)c + 1);
    for (int a = 0; a < c; a++)
        st[a] = &V->strat[g->pieces[p].first + a], sh[a] = &v[a], ns[a] = 1;
    src_edge_shares(s, G, p, ds, st, ns, sh);
    for (int a = 0; a < c; a++)
        P->rs_lb += v[a];
    free(st);
    free(sh);
    free(v);
    free(ns);
}

/* What src_variant's steps share while they solve one variant. */
typedef struct VariantWalk {
    Src *s;
    SrcGroup *G;
    SrcVariant *V;
    int k;                        /* the variant */
    const IrGraph *g, *gs;        /* the model; the graph the ILP runs on (skeleton or g) */
    PassIlpQuery base;            /* every query's common part */
    double *rs;                   /* per piece: resharding s forward, backward beyond its kernels */
    int64_t *ds;                  /* dim sizes at the group's micro-batch */
    const PassIlpResult **rep_r;  /* per repeat: its layer's solve */
    bool *have;                   /* per piece of g: its costs made (src_variant, early_lost) */
} VariantWalk;

/* The query every solve of the group shares: its mesh, micro-batches,
 * ZeRO and recomputation pins, what the mesh axes may split. */
static void variant_query(const Src *s, const SrcGroup *G, const IrGraph *gs, PassIlpQuery *base)
{
    const PassSearchPins *pin = &s->o->pins;
    memset(base, 0, sizeof *base);
    base->mesh = G->mesh;
    base->mb_seqs = G->mb_seqs;
    base->num_micro = G->m;
    base->zero = pin->zero >= 0 ? pin->zero : G->dp > 1 ? 1 : 0;
    base->recompute = pin->recompute >= 0 ? (PlanRecompute)pin->recompute : PLAN_RECOMPUTE_NONE;
    base->inflight = 1;
    base->time_limit_s = s->o->ilp_time_limit_s > 0 ? s->o->ilp_time_limit_s : 10;
    int dpa, cpa, tpa;
    plan_mesh_dims_axes(G->cp, G->tp, &dpa, &cpa, &tpa);
    pass_ilp_pins_cp(gs, dpa, cpa, tpa, G->sp, base->allow);
    /* Axis 0 is the data-parallel axis: one that splits no batch holds only
     * replicas, which the search already weighs as idle GPUs. The tp axis may
     * serve a sequence split with whole weights; a pinned --tp asks for
     * tensor parallelism proper (sharded weights), a pinned --sp on for split
     * norms. */
    base->require = PLAN_REQ_BATCH | (pin->tp > 1 ? PLAN_REQ_WEIGHTS : 0) |
                    (pin->sp == 1 && G->tp > 1 ? PLAN_REQ_SEQ_NORMS : 0);
    /* A cp axis splits the sequence everywhere, attention's queries too. */
    if (cpa >= 0) {
        base->require |= PLAN_REQ_CP;
        base->cp_axes = 1u << cpa;
    }
    base->ep_axes = src_moe_axes(G->dp, G->tp, s->o->ep);
    base->etp_axes = src_moe_axes(G->dp, G->tp, s->o->etp) & ~2u;
}

/* Variant k > 0 is solved under a budget strictly below variant k - 1's
 * memory for the same layer (strictly less: GLPK accepts a choice within
 * its integrality tolerance (1e-5) of the budget, so a budget only that
 * much below could return the same point again). Variant k's query and
 * result for the layer rs_. */
static const PassIlpResult *frontier_query(const VariantWalk *w, int rs_, int k, PassIlpQuery *q0)
{
    const SrcVariant *P = &w->G->var[k];
    const PassIlpResult *r0 = NULL;
    for (int i = 0; i < P->nq; i++)
        if (P->q[i].first_piece == rs_ && P->q[i].npieces == 1)
            r0 = P->r[i], *q0 = P->q[i];
    if (!r0)
        ir_die("search: variant %d without variant %d", w->k, k);
    return r0;
}

/* Repeat rep solved as one layer: its strategies for every layer of that
 * shape, its representative's costs. False when it does not fit. */
static bool solve_repeat(VariantWalk *w, int rep)
{
    const IrGraph *g = w->g, *gs = w->gs;
    int rs_ = rep_representative(gs, rep), rp = rep_representative(g, rep);
    if (rs_ < 0 || rp < 0)
        return true;
    PassIlpQuery q = w->base;
    q.first_piece = rs_;
    q.npieces = 1;
    PassIlpQuery q0;
    const PassIlpResult *r0 = NULL;
    const PassIlpResult *r;
    if (w->k > 0) {
        r0 = frontier_query(w, rs_, w->k - 1, &q0);
        q.budget = r0->mem_bytes * (1 - fmax(SRC_FRONTIER_STEP, w->G->jump ? w->G->jump[rep] : 0));
    }
    /* The walk lowers every layer's budget at once, and one layer's frontier
     * may end before another's (a few dense layers beside many MoE ones):
     * that layer keeps its leanest point, the last variant's (the same
     * query: the cache answers), so the walk stops only when no layer can
     * be made leaner. A layer that kept its point the variant before is
     * not asked again. */
    PassIlpQuery q1;
    if (w->k > 1 && frontier_query(w, rs_, w->k - 2, &q1) == r0) {
        r = solve(w->s, w->V, &q0);
    } else {
        r = solve(w->s, w->V, &q);
        if (!r->feasible && r0) {
            w->V->nq--;
            r = solve(w->s, w->V, &q0);
        }
    }
    if (!r->feasible)
        return false;
    w->rep_r[rep] = r;
    const IrPiece *R = &gs->pieces[rs_];
    for (int p = 0; p < g->npieces; p++) {
        const IrPiece *P = &g->pieces[p];
        if (P->rep != rep || P->count != R->count)
            continue;
        for (int j = 0; j < P->count; j++)
            w->V->strat[P->first + j] = r->strategy[R->first + j - r->first_node];
    }
    piece_costs(w->s, w->G, w->V, w->ds, rp, &w->V->piece[rp]);
    SrcPiece *P = &w->V->piece[rp];
    w->rs[2 * rp] = fmax(0, r->fwd_s - P->fwd);
    w->rs[2 * rp + 1] = fmax(0, r->bwd_s - P->bwd - P->rec[q.recompute]);
    return true;
}

/* g's piece named as gs's piece ps (outside repeats). */
static int run_piece(const VariantWalk *w, int ps)
{
    for (int x = 0; x < w->g->npieces; x++)
        if (w->g->pieces[x].rep < 0 && !strcmp(w->g->pieces[x].name, w->gs->pieces[ps].name))
            return x;
    ir_die("search: piece '%s' missing from the model", w->gs->pieces[ps].name);
}

/* The run a..b of gs's pieces (outside repeats) with the layers lo..hi
 * around it: its strategies into g's pieces of the same names, and the
 * kernels of the run (*kf, *kb); returns the run's first piece in g. */
static int run_strategies(VariantWalk *w, const PassIlpResult *r, int a, int b, PlanRecompute rc, double *kf,
                          double *kb)
{
    const IrGraph *g = w->g, *gs = w->gs;
    SrcVariant *V = w->V;
    int first = -1;
    for (int ps = a; ps <= b; ps++) {
        int p = run_piece(w, ps);
        if (first < 0)
            first = p;
        const IrPiece *S = &gs->pieces[ps], *P = &g->pieces[p];
        for (int j = 0; j < P->count; j++)
            V->strat[P->first + j] = r->strategy[S->first + j - r->first_node];
        piece_costs(w->s, w->G, V, w->ds, p, &V->piece[p]);
        *kf += V->piece[p].fwd;
        *kb += V->piece[p].bwd + V->piece[p].rec[rc];
    }
    return first;
}

/* Could the run a..b's own pieces be leaner than at variant k - 1, whose
 * answer for the run is r0, by a step of the walk? What they hold above
 * the group's floor (the least model states under the query's ZeRO stage
 * and bytes kept under its recomputation any strategy of the mesh has) is
 * at most what a leaner point of the run could save in them; under
 * SRC_FRONTIER_STEP of the run's memory, a leaner point could only save
 * in the neighbouring layer, whose strategies the repeat's walk sets. */
static bool run_at_floor(const VariantWalk *w, int a, int b, const PassIlpResult *r0)
{
    const SrcGroup *G = w->G;
    const SrcVariant *P = &G->var[w->k - 1];
    int z = w->base.zero, rc = w->base.recompute;
    if (!G->floor_states || !G->floor_saved)
        return false;
    double over = 0;
    for (int ps = a; ps <= b; ps++) {
        int p = run_piece(w, ps);
        over += fmax(0, P->piece[p].states[z] - G->floor_states[src_frow(w->s, p) * 4 + z]) +
                fmax(0, P->piece[p].saved[rc] - G->floor_saved[src_frow(w->s, p) * SRC_NRC + rc]);
    }
    return over < r0->mem_bytes * SRC_FRONTIER_STEP;
}

/* Variant k's query for the run q (its pieces, its boundary), walked down
 * its own frontier as the repeats are (solve_repeat): under a budget just
 * below variant k - 1's memory for the run, so that a walk which makes the
 * layers leaner makes the embedding and the head leaner too (a vocabulary
 * split instead of a replicated table: DeepSeek-V3's embedding and head
 * hold 48 GiB per GPU replicated over tp 64, which no leaner layer makes
 * up for). The boundary may have moved since variant k - 1 (the layers
 * chose another), so where no point fits under the lowered budget the run
 * keeps the last budget, and where that no longer fits either, none; a run
 * that kept its budget the variant before is not asked to go lower, nor is
 * one whose own pieces are at the group's floor (run_at_floor): the run's
 * memory holds the neighbouring layer too, so its frontier would otherwise
 * walk that layer's points again, a solve each, for strategies the
 * repeat's walk sets. */
static const PassIlpResult *run_point(VariantWalk *w, PassIlpQuery *q, int a, int b)
{
    const PassIlpQuery *q0 = NULL, *q1 = NULL;
    const PassIlpResult *r0 = NULL;
    for (int j = 1; j <= 2 && j <= w->k; j++) {
        const SrcVariant *P = &w->G->var[w->k - j];
        for (int i = 0; i < P->nq; i++)
            if (P->q[i].first_piece == q->first_piece && P->q[i].npieces == q->npieces) {
                if (j == 1)
                    q0 = &P->q[i], r0 = P->r[i];
                else
                    q1 = &P->q[i];
            }
    }
    if (!q0)
        return solve(w->s, w->V, q);
    bool ended = (q1 && q1->budget == q0->budget) || run_at_floor(w, a, b, r0);
    double tries[3] = {ended ? q0->budget : r0->mem_bytes * (1 - SRC_FRONTIER_STEP), q0->budget, 0};
    const PassIlpResult *r = NULL;
    for (int t = 0; t < 3; t++) {
        if (t > 0 && (tries[t] == tries[t - 1] || (r && r->feasible)))
            continue;
        if (r)
            w->V->nq--;
        q->budget = tries[t];
        r = solve(w->s, w->V, q);
    }
    return r;
}

/* A run of pieces outside repeats (a..b: the embedding, the head) solved
 * with the layer next to it, whose boundary sharding is fixed to the one
 * the layers chose; then the resharding the solve's times hold beyond the
 * kernels of the run and the neighbouring layers' own estimate. False when
 * it does not fit. */
static bool solve_run(VariantWalk *w, int a, int b)
{
    const IrGraph *g = w->g, *gs = w->gs;
    int lo = a > 0 ? a - 1 : a, hi = b + 1 < gs->npieces ? b + 1 : b;
    PassIlpQuery q = w->base;
    q.first_piece = lo;
    q.npieces = hi - lo + 1;
    int nb = (lo < a) + (hi > b);
    int rb = lo < a ? gs->pieces[lo].rep : hi > b ? gs->pieces[hi].rep : -1;
    bool one_kind = nb == 1 || (nb == 2 && gs->pieces[lo].rep == gs->pieces[hi].rep);
    if (rb >= 0 && one_kind && w->rep_r[rb] && w->rep_r[rb]->has_boundary) {
        q.fix_boundary = true;
        q.boundary = w->rep_r[rb]->boundary;
    }
    const PassIlpResult *r = run_point(w, &q, a, b);
    if (!r->feasible)
        return false;
    double kf = 0, kb = 0;
    int first = run_strategies(w, r, a, b, q.recompute, &kf, &kb);
    for (int ps = lo; ps <= hi; ps++) {
        if (ps >= a && ps <= b)
            continue;
        int rp = rep_representative(g, gs->pieces[ps].rep);
        const SrcPiece *L = &w->V->piece[rp];
        kf += L->fwd + w->rs[2 * rp];
        kb += L->bwd + L->rec[q.recompute] + w->rs[2 * rp + 1];
    }
    w->rs[2 * first] = fmax(0, r->fwd_s - kf);
    w->rs[2 * first + 1] = fmax(0, r->bwd_s - kb);
    return true;
}

/* Every piece of a repeat costs what its representative does; every
 * piece's resharding into its costs. */
static void spread_costs(VariantWalk *w)
{
    const IrGraph *g = w->g;
    SrcVariant *V = w->V;
    double *rs = w->rs;
    for (int p = 0; p < g->npieces; p++) {
        int rep = g->pieces[p].rep;
        if (rep >= 0) {
            int rp = rep_representative(g, rep);
            bool priced = false; /* by piece_costs now, every layout known */
            if (p != rp) {
                if (g->pieces[p].count == g->pieces[rp].count)
                    V->piece[p] = V->piece[rp];
                else
                    piece_costs(w->s, w->G, V, w->ds, p, &V->piece[p]), priced = true;
                rs[2 * p] = rs[2 * rp];
                rs[2 * p + 1] = rs[2 * rp + 1];
            }
            if (!priced && !same_kept(g, p, rp))
                piece_mem(w->s, w->G, V, w->ds, p, rp, pred_rep(g, rp) == rep && p != rp, &V->piece[p]);
        }
        V->piece[p].rs_f = rs[2 * p];
        V->piece[p].rs_b = rs[2 * p + 1];
    }
}

/* Per piece, the activations that cross into it when it starts a stage
 * (pass_predict, predict.c edge_in): those its nodes read from an earlier
 * piece, once each (an earlier reader in the stage pays for a later one).
 * The graph's alone: made once a search (Src.xin). */
static void crossings(Src *s)
{
    const IrGraph *g = s->g;
    s->xin_at = ir_xcalloc((size_t)g->npieces + 1, sizeof *s->xin_at);
    int n = 0, cap = 16;
    s->xin = ir_xmalloc(sizeof *s->xin * (size_t)cap);
    for (int p = 0; p < g->npieces; p++) {
        const IrPiece *P = &g->pieces[p];
        for (int id = P->first; id < P->first + P->count; id++)
            for (int i = 0; i < g->nodes[id].nin; i++) {
                int t = g->nodes[id].in[i];
                if (t < 0 || g->tensors[t].role == IR_PARAM || g->tensors[t].role == IR_INPUT ||
                    g->nodes[g->tensors[t].producer].piece >= p)
                    continue;
                bool seen = false;
                for (int j = s->xin_at[p]; j < n && !seen; j++)
                    seen = s->xin[j] == t;
                if (seen)
                    continue;
                if (n == cap)
                    s->xin = ir_xrealloc(s->xin, sizeof *s->xin * (size_t)(cap *= 2));
                s->xin[n++] = t;
            }
        s->xin_at[p + 1] = n;
    }
}

/* Per piece, the pipeline transfers pass_predict charges when it starts a
 * stage: each crossing activation sent in its producer's layout. */
static void variant_p2p(Src *s, const SrcGroup *G, SrcVariant *V, const int64_t *ds)
{
    const IrGraph *g = s->g;
    if (getenv("PTDC_SEARCH_NO_CUT_COMM"))
        return;
    if (!s->xin)
        crossings(s);
    for (int p = 0; p < g->npieces; p++) {
        double t2 = 0;
        for (int x = s->xin_at[p]; x < s->xin_at[p + 1]; x++) {
            int t = s->xin[x];
            const IrNode *pn = &g->nodes[g->tensors[t].producer];
            PlanSharding out[IR_MAX_OUT];
            plan_shard_io(g, pn, &V->strat[pn->id], NULL, out);
            for (int j = 0; j < pn->nout; j++)
                if (pn->out[j] == t) {
                    PlanColl k = {PLAN_COLL_SENDRECV, 0, -1, -1, plan_local_numel(g, t, &G->mesh, &out[j], ds)};
                    t2 += pass_cost_coll(s->c, &G->mesh, &k, pass_elem_bytes(s->c, g->tensors[t].dtype));
                }
        }
        V->piece[p].p2p = t2;
    }
}

/* A folded group's only variant: its fixed strategies (src_fold_strategy),
 * each piece priced by the cost model on its mesh. Every tensor is split by
 * the batch over both axes wherever it flows (the exchange keeps h, gates and
 * y split by tokens), so nothing reshards: no resharding estimate. There is
 * no leaner point to walk to (k > 0: none). */
static bool fold_variant(Src *s, SrcGroup *G, int k)
{
    const IrGraph *g = s->g;
    SrcVariant *V = &G->var[k];
    memset(V, 0, sizeof *V);
    if (k > 0)
        return false;
    V->strat = ir_xmalloc(sizeof(PlanStrategy) * (size_t)(g->nfwd + 1));
    for (int i = 0; i < g->nfwd; i++)
        V->strat[i] = src_fold_strategy(g, &g->nodes[i]);
    V->piece = ir_xcalloc((size_t)g->npieces, sizeof *V->piece);
    int64_t *ds = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    ir_dim_sizes(g, G->mb_seqs, ds);
    for (int p = 0; p < g->npieces; p++) {
        /* a layer of the same repeat priced before: the same costs, its
         * memory too where its input comes from a layer of the repeat as
         * that one's does (every strategy is known here) */
        int q = p, any = p;
        for (int j = 0; j < p && g->pieces[p].rep >= 0; j++)
            if (g->pieces[j].rep == g->pieces[p].rep && g->pieces[j].count == g->pieces[p].count) {
                any = any < p ? any : j;
                if (pred_rep(g, p) == pred_rep(g, j)) {
                    q = j;
                    break;
                }
            }
        if (q < p) {
            V->piece[p] = V->piece[q];
        } else if (any < p) {
            V->piece[p] = V->piece[any];
            piece_mem(s, G, V, ds, p, any, true, &V->piece[p]);
        } else
            piece_costs(s, G, V, ds, p, &V->piece[p]);
    }
    variant_p2p(s, G, V, ds);
    free(ds);
    variant_axes(s, G, V);
    src_variant_ws(s, V);
    V->ok = true;
    return true;
}

bool src_variant(Src *s, SrcGroup *G, int k)
{
    if (G->fold > 1)
        return fold_variant(s, G, k);
    const IrGraph *g = s->g;
    VariantWalk w;
    memset(&w, 0, sizeof w);
    w.s = s, w.G = G, w.V = &G->var[k], w.k = k, w.g = g;
    w.gs = s->o->skeleton ? s->o->skeleton : g; /* the ILP runs on gs; strategies and costs are g's */
    SrcVariant *V = w.V;
    memset(V, 0, sizeof *V);
    variant_query(s, G, w.gs, &w.base);
    V->strat = ir_xmalloc(sizeof(PlanStrategy) * (size_t)(g->nfwd + 1));
    for (int i = 0; i < g->nfwd; i++)
        V->strat[i] = (PlanStrategy){PLAN_NO_DIMS, 0};
    V->piece = ir_xcalloc((size_t)g->npieces, sizeof *V->piece);
    w.rs = ir_xcalloc((size_t)g->npieces * 2, sizeof(double));
    w.ds = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    ir_dim_sizes(g, G->mb_seqs, w.ds);
    bool ok = true;
    /* Repeats: one layer each. */
    int nrep = 0;
    for (int p = 0; p < g->npieces; p++)
        if (g->pieces[p].rep + 1 > nrep)
            nrep = g->pieces[p].rep + 1;
    w.rep_r = ir_xcalloc((size_t)nrep + 1, sizeof *w.rep_r);
    w.have = ir_xcalloc((size_t)g->npieces + 1, sizeof *w.have);
    /* The repeat of the most layers first: it bounds the most of the
     * model once solved (early_lost below). */
    int *reps = ir_xmalloc(sizeof(int) * (size_t)(nrep + 1)), *cnt = ir_xcalloc((size_t)nrep + 1, sizeof(int));
    for (int p = 0; p < g->npieces; p++)
        if (g->pieces[p].rep >= 0)
            cnt[g->pieces[p].rep]++;
    for (int i = 0; i < nrep; i++) { /* by count, down; by number among equals */
        int j = i;
        while (j > 0 && cnt[reps[j - 1]] < cnt[i])
            reps[j] = reps[j - 1], j--;
        reps[j] = i;
    }
    for (int i = 0; i < nrep && ok; i++) {
        int rep = reps[i];
        ok = solve_repeat(&w, rep);
        /* Variant 0 whose layers solved so far already lose (the rest are
         * not solved: search.c, early_lost). */
        if (ok && k == 0 && s->early_lost) {
            /* the repeat's pieces as spread_costs will copy them */
            int rp = rep_representative(g, rep);
            for (int p = 0; rp >= 0 && p < g->npieces; p++)
                if (g->pieces[p].rep == rep && g->pieces[p].count == g->pieces[rp].count) {
                    if (p != rp)
                        V->piece[p] = V->piece[rp];
                    w.have[p] = true;
                }
        }
        if (ok && k == 0 && s->early_lost && s->early_lost(s, G, V, w.have)) {
            G->lost_early = true;
            ok = false;
        }
    }
    /* The repeats' queries back in the model's order (plan.txt shows
     * them so): one each, solved before any run. */
    for (int i = 1; ok && i < V->nq; i++) {
        PassIlpQuery q = V->q[i];
        const PassIlpResult *r = V->r[i];
        int j = i;
        while (j > 0 && w.gs->pieces[V->q[j - 1].first_piece].rep > w.gs->pieces[q.first_piece].rep) {
            V->q[j] = V->q[j - 1], V->r[j] = V->r[j - 1];
            j--;
        }
        V->q[j] = q, V->r[j] = r;
    }
    /* Runs of pieces outside repeats, each with the layer next to it. */
    for (int a = 0; a < w.gs->npieces && ok;) {
        if (w.gs->pieces[a].rep >= 0) {
            a++;
            continue;
        }
        int b = a;
        while (b + 1 < w.gs->npieces && w.gs->pieces[b + 1].rep < 0)
            b++;
        ok = solve_run(&w, a, b);
        a = b + 1;
    }
    if (ok) {
        spread_costs(&w);
        variant_p2p(s, G, V, w.ds);
        variant_axes(s, G, V);
        src_variant_ws(s, V);
    }
    free(reps);
    free(w.have);
    free(cnt);
    free(w.rep_r);
    free(w.rs);
    free(w.ds);
    V->ok = ok;
    return ok;
}
