/* search_prune.c: the lower bounds that let the search skip candidates
 * without solving or ranking them (docs/planner.md, "Why the pruning is
 * sound").
 *
 * Time. pass_predict's step time is at least its pipeline term, and that is
 * at least max(m * tmax, tsum), tmax the slowest pipeline rank's time per
 * micro-batch and tsum the sum over ranks: the slowest rank runs m of them
 * one after another, and one micro-batch passes every stage forward and
 * back. (A reference stack's 1F1B formula, m * tmax + (tsum - tmax) / v, is
 * larger; the event simulation of ptdc's schedule can come close to
 * m * tmax alone when the busiest rank is the first; the fill and drain,
 * pipe_bound, raise it whatever the cut.) A rank's time is at least the
 * kernel time of its nodes, and tmax >= max(tsum / pp, the costliest piece).
 * Before any strategy is known, a node's kernels on n devices take at least
 * its global FLOPs / (n * peak * best efficiency) (matmul, attention) or its
 * global bytes / (n * HBM rate) (memory-bound ops): the devices of a stage
 * together do at least the unsharded work, and every device does the same.
 * Once a variant's strategies are known, the bound uses their exact kernel
 * times (pass_cost_node), the same numbers pass_predict sums.
 *
 * Memory. pass_predict's total on a rank is at least its model states plus
 * its in-flight activations plus the runtime term. Model states are at least
 * the unsharded ones divided by the ways they can be split (tp for weights,
 * tp * dp for what ZeRO shards); activations at least the unsharded saved
 * bytes / n. With x_r, y_r a rank's states and saved bytes and i_r its
 * in-flight count, max_r (x_r + i_r y_r) is at least any weighted mean of
 * them; the two weightings 1/pp and (1/i_r) / sum(1/i_r) give bounds that
 * do not depend on where the stages are cut. */
#include "search/src.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double src_inflight(int pp, int v, int m, int r)
{
    /* pass_predict holds slots[j] micro-batches of chunk j (the schedule's,
     * plan/schedule.c); with chunks of equal size that is the rank's saved
     * bytes times the mean slot count. */
    int slots[PLAN_MAX_CHUNKS];
    plan_schedule_slots(pp, v, m, r, slots);
    double sum = 0;
    for (int j = 0; j < v; j++)
        sum += slots[j];
    return sum / v;
}

double src_inflight_lo(int pp, int v, int m, int r)
{
    /* A lower bound whatever the chunks' sizes: every chunk holds at least
     * the fewest slots of any. */
    int slots[PLAN_MAX_CHUNKS];
    plan_schedule_slots(pp, v, m, r, slots);
    int lo = slots[0];
    for (int j = 1; j < v; j++)
        lo = slots[j] < lo ? slots[j] : lo;
    return lo;
}

void src_states(Src *s)
{
    const IrGraph *g = s->g;
    PlanMesh one;
    plan_mesh_make(&one, 1, 1, s->gpn);
    PlanStrategy rep = {PLAN_NO_DIMS, 0};
    s->w = ir_xcalloc((size_t)s->npieces, sizeof(double));
    s->gr = ir_xcalloc((size_t)s->npieces, sizeof(double));
    s->op = ir_xcalloc((size_t)s->npieces, sizeof(double));
    s->xw = ir_xcalloc((size_t)s->npieces, sizeof(double));
    s->xgr = ir_xcalloc((size_t)s->npieces, sizeof(double));
    s->xop = ir_xcalloc((size_t)s->npieces, sizeof(double));
    for (int p = 0; p < s->npieces; p++)
        for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
            double w, gr, op;
            pass_param_bytes3(s->c, g, &g->nodes[n], &one, &rep, 0, &w, &gr, &op);
            s->w[p] += w, s->gr[p] += gr, s->op[p] += op;
            if (plan_expert_dim(g, &g->nodes[n]) >= 0)
                s->xw[p] += w, s->xgr[p] += gr, s->xop[p] += op;
        }
}

double src_states_lb(const Src *s, int p, int z, double n, double tp)
{
    double w = s->w[p] - s->xw[p], gr = s->gr[p] - s->xgr[p], op = s->op[p] - s->xop[p];
    return w / (z >= 3 ? n : tp) + gr / (z >= 2 ? n : tp) + op / (z >= 1 ? n : tp) +
           (s->xw[p] + s->xgr[p] + s->xop[p]) / n;
}

/* Whether pieces p and q (of one repeat, as many nodes) run each node in
 * the same format: a low-precision plan keeps the first and last layers in
 * bf16 under lp_bf16_first/last_layers, which saves more and casts nothing. */
static bool same_prec(const Src *s, int p, int q)
{
    const IrGraph *g = s->g;
    if (s->c->prec == PLAN_PREC_BF16)
        return true;
    for (int i = 0; i < g->pieces[p].count; i++)
        if (pass_prec_of(s->c, g, &g->nodes[g->pieces[p].first + i]) !=
            pass_prec_of(s->c, g, &g->nodes[g->pieces[q].first + i]))
            return false;
    return true;
}

/* The piece that stands for p when costs depend only on the piece's kind
 * and format: the first piece of its repeat in the same formats. */
static int rep_piece(const Src *s, int p)
{
    const IrGraph *g = s->g;
    if (g->pieces[p].rep < 0)
        return p;
    for (int q = 0; q < p; q++)
        if (g->pieces[q].rep == g->pieces[p].rep && g->pieces[q].count == g->pieces[p].count &&
            same_prec(s, p, q))
            return q;
    return p;
}

/* The kind of piece p for floor_like: its repeat, -1 outside repeats,
 * -2 before the first. */
static int piece_kind(const IrGraph *g, int p)
{
    return p < 0 || p >= g->npieces ? -2 : g->pieces[p].rep;
}

/* rep_piece for the per-mesh floor, whose kernel prices depend on the
 * piece before too: a norm fuses with the residual add of the layer before
 * it (plan_add_norm_fused, pass_rec_fwd_s), which the embedding does not
 * have, so the first layer costs more than the next and cannot stand for
 * it. The first piece of p's repeat in the same formats after a piece of
 * the same kind. */
static int floor_like(const Src *s, int p)
{
    const IrGraph *g = s->g;
    if (g->pieces[p].rep < 0)
        return p;
    for (int q = 0; q < p; q++)
        if (g->pieces[q].rep == g->pieces[p].rep && g->pieces[q].count == g->pieces[p].count &&
            piece_kind(g, q - 1) == piece_kind(g, p - 1) && same_prec(s, p, q))
            return q;
    return p;
}

const SrcWork *src_work(Src *s, int64_t mb_seqs)
{
    for (int i = 0; i < s->nwork; i++)
        if (s->work[i].mb_seqs == mb_seqs)
            return &s->work[i];
    const IrGraph *g = s->g;
    const PassGpu *gpu = &s->c->cl->gpu;
    if (s->nwork == s->capwork) {
        s->capwork = s->capwork ? 2 * s->capwork : 16;
        s->work = ir_xrealloc(s->work, (size_t)s->capwork * sizeof *s->work);
    }
    SrcWork *W = &s->work[s->nwork++];
    W->mb_seqs = mb_seqs;
    W->t = ir_xcalloc((size_t)s->npieces * SRC_NRC, sizeof(double));
    W->t_path = ir_xcalloc((size_t)s->npieces * SRC_NRC, sizeof(double));
    W->saved = ir_xcalloc((size_t)s->npieces * SRC_NRC, sizeof(double));
    W->wsaved = ir_xcalloc((size_t)s->npieces + 1, sizeof(double));
    int64_t *ds = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    ir_dim_sizes(g, mb_seqs, ds);
    PlanMesh one;
    plan_mesh_make(&one, 1, 1, s->gpn);
    PlanStrategy rep = {PLAN_NO_DIMS, 0};
    /* A low-precision plan's linear layers run at their format's rate. */
    double flop_rate = fmax(gpu->peak_flops, pass_prec_peak(gpu, s->c->prec)) * s->eff_max, byte_rate = gpu->hbm_bw * gpu->hbm_eff;
    for (int p = 0; p < s->npieces; p++) {
        int q = rep_piece(s, p);
        if (q != p) {
            memcpy(&W->t[p * SRC_NRC], &W->t[q * SRC_NRC], SRC_NRC * sizeof(double));
            memcpy(&W->t_path[p * SRC_NRC], &W->t_path[q * SRC_NRC], SRC_NRC * sizeof(double));
            memcpy(&W->saved[p * SRC_NRC], &W->saved[q * SRC_NRC], SRC_NRC * sizeof(double));
            W->wsaved[p] = W->wsaved[q];
            continue;
        }
        for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
            const IrNode *nd = &g->nodes[n];
            PassNodeCost nc;
            pass_cost_node(s->c, g, nd, &one, &rep, ds, &nc);
            /* Compute-bound kernels by FLOPs, the rest by bytes. */
            bool fl = nc.flops_fwd + nc.flops_bwd > 0;
            double tf = fl ? nc.flops_fwd / flop_rate : nc.bytes_fwd / byte_rate;
            double tb = fl ? nc.flops_bwd / flop_rate : nc.bytes_bwd / byte_rate;
            /* A weight gradient's GEMM does its forward's FLOPs: what stays
             * in B is at least the rest (never more than the real dX). The
             * experts' too: their backward's FLOPs are the recomputed gate
             * and up, the two dX and the three dW (pass_opcost_MOE's
             * moe_dw_s, a split schedule's W), which do the forward's. */
            double tbp = nd->op == IR_OP_MOE || (nd->op == IR_OP_MATMUL && g->tensors[nd->in[1]].role == IR_PARAM)
                             ? fmax(0, tb - tf)
                             : tb;
            for (int r = 0; r < SRC_NRC; r++) {
                if (!src_rc_on(s, r))
                    continue;
                double rec = pass_recomputed(s->c, g, nd, (PlanRecompute)r) ? tf : 0;
                W->t[p * SRC_NRC + r] += tf + tb + rec;
                W->t_path[p * SRC_NRC + r] += tf + tbp + rec;
                W->saved[p * SRC_NRC + r] += pass_saved_bytes(s->c, g, nd, &one, &rep, ds, r);
            }
            /* A ZB-H1 W slot's bytes on one device at the least rows a
             * slot is sized for (the expected, factor 1): the devices of a
             * stage hold at least these together (each routed row whole,
             * its expert's width split at most), so each at least 1/n. */
            if (s->wslots && pass_wslot_holds(g, nd)) {
                PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
                plan_shard_io(g, nd, &rep, in, out);
                pass_wslot_add(s->c, g, nd, &one, &rep, in, out, ds, 1, &W->wsaved[p], NULL, NULL);
            }
        }
    }
    free(ds);
    return W;
}

/* The in-flight counts' extremes and harmonic sum over the ranks, which
 * depend on pp, v and m only: remembered, since every candidate's bound
 * asks them (pp slot tables each, which overflow plan/schedule.c's memo:
 * 1% of planning Qwen3-235B-A22B on 512 A100s was their simulation). */
static void inflight_stats(int pp, int v, int m, double *imin, double *imax, double *h)
{
    static struct {
        int pp, v, m;
        double imin, imax, h;
    } memo[256];
    unsigned key = (((unsigned)pp * 131u + (unsigned)v) * 131u + (unsigned)m) % 256u;
    if (memo[key].pp == pp && memo[key].v == v && memo[key].m == m) {
        *imin = memo[key].imin, *imax = memo[key].imax, *h = memo[key].h;
        return;
    }
    *imin = INFINITY, *imax = 0, *h = 0;
    for (int r = 0; r < pp; r++) {
        double i = src_inflight_lo(pp, v, m, r);
        *imin = fmin(*imin, i);
        *imax = fmax(*imax, i);
        *h += 1 / i;
    }
    memo[key].pp = pp, memo[key].v = v, memo[key].m = m;
    memo[key].imin = *imin, memo[key].imax = *imax, memo[key].h = *h;
}

/* Piece p's time t and path (forwards and B) into S. */
static void pipe_add(SrcPipeSum *S, int p, int np, double t, double path)
{
    if (p == 0)
        S->tsum = S->tmax = S->path = 0, S->beta = 1, S->first = t, S->mid = INFINITY;
    S->tsum += t;
    S->tmax = src_fmax(S->tmax, t);
    S->path += path;
    if (t > 0)
        S->beta = src_fmin(S->beta, path / t);
    if (p > 0 && p < np - 1)
        S->mid = src_fmin(S->mid, t);
}

/* CPU ranks of several pipeline ranks sharing cores run faster than their
 * rates while others wait (share.c): the bound allows for it. A split
 * schedule's (ZB-H1's) weight gradients run beside the other ranks' work:
 * one micro-batch's way through every stage is its forwards and B alone
 * (path, at most tsum), with the busiest rank's m micro-batches and the
 * ranks' whole work.
 *
 * The fill and drain, whatever the cut (docs/planner.md, "Why the pruning
 * is sound", the fill and drain): a reference stack's step is
 * m tmax + (tsum - tmax) / v, increasing in tmax >= tsum / pp. ptdc's
 * simulated schedules: a rank starts once the first micro-batch's forward
 * has passed the first chunks of the ranks before it, runs its work, and
 * the last micro-batch's backward then passes them again (cut_bound,
 * split_bound per cut).
 *   One chunk per rank: the step is at least A_s = P_s + m T_s, P_s the
 * stages before s. Under ZB-H1 only the forwards and B (the path T')
 * chain, and stage s leaves at most s + 1 weight gradients after its last
 * B: A_s = P'_s + m T'_s + (m - s - 1)+ W_s = P'_s + k_s T_s + (m - k_s) T'_s,
 * k_s = (m - s - 1)+. With every piece's path at least beta times its
 * time (beta = 1 without a split), A_s >= beta Q_s + c_s T_s,
 * c_s = beta m + (1 - beta) k_s >= beta, Q_s the time before s. Were
 * every A_s below X, by induction Q_s < X g_s, g_0 = 0,
 * g_{s+1} = g_s (1 - beta / c_s) + 1 / c_s, and tsum = Q_pp < X g_pp: the
 * step is at least tsum / g_pp for every cut.
 *   Interleaved: rank 0's first chunk holds the first piece, and ranks
 * 1 .. pp-1's first chunks are middle chunks, a piece each at least, so
 * rank r waits a_r >= first + (r - 1) mid (r > 0) and the step is at least
 * max_r (a_r + m R_r) with the ranks' work R summing to tsum: at least the
 * level X where sum_r (X - a_r)+ = m tsum. */
static double pipe_bound(const Src *s, const SrcGroup *G, const SrcPipeSum *S, int pp, int v, bool split, int m)
{
    double tsum = S->tsum, tmax = S->tmax, path = S->path;
    PassShare sh;
    if (pass_share(s->c->cl, pp, plan_mesh_devices(&G->mesh), &sh))
        return split ? src_fmax(src_fmax(m * tmax, path) / pass_share_speed(&sh, 1), m * tsum / pp)
                     : pass_share_bound(&sh, pp, tsum, tmax, m);
    tmax = src_fmax(tmax, tsum / pp);
    double b = src_fmax(m * tmax, split ? path : tsum);
    if (pp < 2 || m < 1)
        return b;
    if (s->c->st.ref_stack)
        return src_fmax(b, m * tmax + (tsum - tmax) / (v > 0 ? v : 1));
    if (v > 1) {
        if (split || !isfinite(S->mid))
            return b;
        /* the level: with K ranks under it, X = (m tsum + a_0 + .. + a_{K-1}) / K */
        double a = 0;
        for (int K = 1; K <= pp; K++) {
            double x = (m * tsum + a) / K, next = S->first + (K - 1) * S->mid; /* a_K */
            if (K == pp || x <= next)
                return src_fmax(b, x);
            a += next;
        }
        return b;
    }
    double beta = split ? src_fmin(1, src_fmax(0, S->beta)) : 1, g = 0;
    if (beta <= 0)
        return b;
    for (int st = 0; st < pp; st++) {
        double k = split ? src_fmax(0, m - st - 1) : 0, c = beta * m + (1 - beta) * k;
        g = g * (1 - beta / c) + 1 / c;
    }
    return src_fmax(b, tsum / g);
}

/* Bytes node n keeps for backward under r, as pass_predict counts them
 * (pass_kept_bytes) but never more than n reads: a lower bound while later
 * nodes' strategies are still open. */
double src_kept_bytes(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m,
                      const PlanStrategy *strat, const int64_t *ds, const IrNode *n, PlanRecompute r)
{
    return pass_kept_bytes(c, g, m, strat, ds, n, r, true, NULL);
}

/* A group's dim sizes at its micro-batch (the caller frees them) and the
 * ILP's pins on its mesh: what every per-node floor enumerates under. */
static int64_t *group_sizes_pins(const IrGraph *g, const SrcGroup *G, uint64_t allow[PLAN_MAX_AXES])
{
    int64_t *ds = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    ir_dim_sizes(g, G->mb_seqs, ds);
    int dpa, cpa, tpa;
    plan_mesh_dims_axes(G->cp, G->tp, &dpa, &cpa, &tpa);
    pass_ilp_pins_cp(g, dpa, cpa, tpa, G->sp, allow);
    return ds;
}

/* The strategies the group's plans may give node n: the ILP's candidates
 * on its mesh, or a folded group's one (src_fold_strategy). */
static int group_strategies(const Src *s, const SrcGroup *G, const IrNode *n, const int64_t *ds,
                            const uint64_t *allow, PlanStrategy *st, int max)
{
    if (G->fold > 1) {
        st[0] = src_fold_strategy(s->g, n);
        return 1;
    }
    return plan_strategies(s->g, n, &G->mesh, ds, allow, st, max);
}

/* The least bytes any allowed strategy of t's producer lays t out in (a
 * floor for what pass_predict keeps of t), cached in minb[t]. */
static double producer_floor(Src *s, const SrcGroup *G, const int64_t *ds, const uint64_t *allow,
                             PlanStrategy *st, int maxs, double *minb, int t)
{
    if (minb[t] >= 0)
        return minb[t];
    const IrGraph *g = s->g;
    const IrNode *pn = &g->nodes[g->tensors[t].producer];
    int ns = group_strategies(s, G, pn, ds, allow, st, maxs);
    double best = INFINITY;
    for (int i = 0; i < ns; i++) {
        PlanSharding out[IR_MAX_OUT];
        plan_shard_io(g, pn, &st[i], NULL, out);
        for (int o = 0; o < pn->nout; o++)
            if (pn->out[o] == t)
                best = src_fmin(best, (double)plan_local_numel(g, t, &G->mesh, &out[o], ds) *
                                      pass_elem_bytes(s->c, g->tensors[t].dtype));
    }
    return minb[t] = isfinite(best) ? best : 0;
}

/* The Pareto points of one node under ZeRO z (src.h, SrcFitNode) from its
 * ns strategies' times t[i * 4 + z] and states m[i * 4 + z]; kept when
 * there are two or more (the fastest strategy is not the leanest). */
static void fit_node(SrcGroup *G, int piece, int z, int ns, const double *t, const double *m)
{
    if (ns < 2)
        return;
    int *ord = ir_xmalloc(sizeof(int) * (size_t)ns);
    for (int i = 0; i < ns; i++)
        ord[i] = i;
    /* insertion sort by states, then time: a few dozen strategies */
    for (int i = 1; i < ns; i++)
        for (int j = i; j > 0; j--) {
            int a = ord[j - 1], b = ord[j];
            if (m[a * 4 + z] < m[b * 4 + z] || (m[a * 4 + z] == m[b * 4 + z] && t[a * 4 + z] <= t[b * 4 + z]))
                break;
            ord[j - 1] = b, ord[j] = a;
        }
    int n = 0;
    double best = INFINITY;
    for (int i = 0; i < ns; i++)
        if (t[ord[i] * 4 + z] < best)
            best = t[ord[i] * 4 + z], ord[n++] = ord[i];
    if (n >= 2) {
        if (G->nfit == G->capfit) {
            G->capfit = G->capfit ? 2 * G->capfit : 16;
            G->fit = ir_xrealloc(G->fit, (size_t)G->capfit * sizeof *G->fit);
        }
        while (G->nfitval + 2 * n > G->capfitval) {
            G->capfitval = G->capfitval ? 2 * G->capfitval : 128;
            G->fit_val = ir_xrealloc(G->fit_val, (size_t)G->capfitval * sizeof *G->fit_val);
        }
        G->fit[G->nfit++] = (SrcFitNode){piece, z, n, G->nfitval};
        for (int i = 0; i < n; i++) {
            G->fit_val[G->nfitval + i] = m[ord[i] * 4 + z];
            G->fit_val[G->nfitval + n + i] = t[ord[i] * 4 + z];
        }
        G->nfitval += 2 * n;
    }
    free(ord);
}

/* Which tensors' gradients are written over them (pass_predict's `over`,
 * predict.c): they take no working memory of their own. [ntensors + 1];
 * the caller frees it. */
static bool *grad_over(const Src *s)
{
    const IrGraph *g = s->g;
    bool *over = ir_xcalloc((size_t)g->ntensors + 1, sizeof(bool));
    for (int i = 0; i < g->nfwd && s->c->st.grad_in_place; i++)
        if (ir_ops[g->nodes[i].op].flags & IR_OPF_GRAD_IN_PLACE)
            over[g->nodes[i].in[0]] = ir_grad_in_place(g, g->nodes[i].in[0]);
    return over;
}

/* Node n's backward working set under strategy st, as pass_predict's
 * transient counts it (predict.c, node_grad_bytes and node_edges): its
 * kernels' temporaries, its first output's gradient (but the loss's, and
 * one written over its tensor), and the gradients of its activation
 * inputs (each once, in the layout n reads them); in and out: plan_shard_io
 * of n under the strategy. */
static double grad_ws(const Src *s, const PlanMesh *m, const IrNode *n, const PlanSharding *in,
                      const PlanSharding *out, double ws_bytes, const int64_t *ds, const bool *over)
{
    const IrGraph *g = s->g;
    double b = ws_bytes;
    if (n->nout > 0 && g->tensors[n->out[0]].role != IR_LOSS && !over[n->out[0]])
        b += (double)plan_local_numel(g, n->out[0], m, &out[0], ds) *
             pass_elem_bytes(s->c, g->tensors[n->out[0]].dtype);
    for (int i = 0; i < n->nin; i++) {
        int t = n->in[i];
        IrRole role = g->tensors[t].role;
        bool dup = false;
        for (int e = 0; e < i; e++)
            dup |= n->in[e] == t;
        if (role == IR_PARAM || role == IR_INPUT || dup || over[t])
            continue;
        b += (double)plan_local_numel(g, t, m, &in[i], ds) * pass_elem_bytes(s->c, g->tensors[t].dtype);
    }
    return b;
}

double src_node_ws(Src *s, const PlanMesh *m, const IrNode *n, const PlanStrategy *st, double ws_bytes,
                   const int64_t *ds)
{
    if (!s->ws_over)
        s->ws_over = grad_over(s);
    PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
    plan_shard_io(s->g, n, st, in, out);
    return grad_ws(s, m, n, in, out, ws_bytes, ds, s->ws_over);
}

/* pass_recomputed of every forward node under every policy, once per
 * search (s->rec_node): the floor asks it per node, policy and group. */
static const bool *rec_nodes(Src *s)
{
    if (!s->rec_node) {
        const IrGraph *g = s->g;
        bool *x = ir_xcalloc((size_t)g->nfwd * SRC_NRC + 1, sizeof(bool));
        for (int n = 0; n < g->nfwd; n++)
            for (int r = 0; r < SRC_NRC; r++)
                x[n * SRC_NRC + r] = pass_recomputed(s->c, g, &g->nodes[n], (PlanRecompute)r);
        s->rec_node = x;
    }
    return s->rec_node;
}

/* src_floor_pieces' answers: the bounds of a candidate and the walk ask
 * for the same group, ZeRO stage and delta again and again (93% of 12,086
 * calls planning Qwen3-235B-A22B on 512 A100s were among the last 8
 * asked). A group is its layout (group() makes one per layout) and its
 * floor and least-layer arrays, which are made once each (NULL before):
 * the answer depends on nothing else. */
enum { PIECE_MEMO = 8 };
typedef struct PieceMemo {
    bool used, sp, has_delta;
    int dp, cp, tp, fold, b, zero;
    long floor_id;
    const double *layer_lb;
    double *delta;                /* [npieces] */
    SrcPiece *out;                /* [npieces] */
} PieceMemo;
struct SrcPieceMemo {
    int next;                     /* the slot the next answer takes */
    PieceMemo e[PIECE_MEMO];
};

/* What node n's kernels under one strategy give the floor (pass_cost_node):
 * f the forward (a norm priced fused may run alone, plan_add_norm_fused: the
 * cheaper of the two; the expert all-to-all overlap, stack moe_a2a_overlap,
 * may hide a whole exchange: a floor without it), fb that with the backward
 * (less its hidden exchange), the fused slack and the kernels' working
 * bytes. */
typedef struct NodePrice {
    double f, fb, fused, ws;
} NodePrice;

static NodePrice node_price_made(const Src *s, const SrcGroup *G, const IrNode *nd, const PlanStrategy *st,
                                 const int64_t *ds)
{
    PassNodeCost nc;
    pass_cost_node(s->c, s->g, nd, &G->mesh, st, ds, &nc);
    double f = nc.fwd_s - fmax(0, nc.fused_s), hf = 0, hb = 0;
    if (s->c->st.moe_a2a_overlap)
        hf = nc.a2a_fwd_s, hb = nc.a2a_s - nc.a2a_fwd_s;
    f -= hf;
    return (NodePrice){f, f + nc.bwd_s - hb, nc.fused_s, nc.ws_bytes};
}

static unsigned used_axes(const PlanStrategy *x);
_Static_assert(sizeof(NodePrice) == SRC_NPRICE * sizeof(double), "a NodePrice is a memo slot");

/* ... remembered for the search (search_nodeprice.c): ds are the floor's
 * sizes, ir_dim_sizes at G's sequences per micro-batch. */
static NodePrice node_price(Src *s, const SrcGroup *G, const IrNode *nd, const PlanStrategy *st, const int64_t *ds)
{
    bool found;
    double *v = src_price_slot(s, G, nd, st, used_axes(st), &found);
    NodePrice p;
    if (!found) {
        p = node_price_made(s, G, nd, st, ds);
        memcpy(v, &p, sizeof p);
        return p;
    }
    memcpy(&p, v, sizeof p);
    if (src_check(s)) {
        NodePrice y = node_price_made(s, G, nd, st, ds);
        if (memcmp(&y, &p, sizeof y) != 0)
            ir_die("search: the remembered node price of node %d (%s) differs from the price made again in group "
                   "dp %d tp %d b %d sp %d", nd->id, ir_ops[nd->op].name, G->dp, G->tp, G->b, G->sp);
    }
    return p;
}

/* A group's time floor prices every strategy of every node of its floor
 * classes (and their resharding shares); its whole floor, made later when
 * the group reaches the top of the order again (search_order.c), priced
 * them all again: 1,152 of the 2,217 groups with a time floor planning
 * DeepSeek-V3 on 2048 A100s. So the time floor keeps them, in the order
 * the floor visits the nodes (classes ascending, nodes in order), and the
 * whole floor reads them back and frees them: the same group, mesh and
 * micro-batch, the same numbers. About 50 bytes a strategy, 400 strategies
 * a group there. */
typedef struct Kept {
    int nn, capn, cn;             /* nodes kept, read back so far */
    int *ns;                      /* [nn] strategies of each */
    int n, cap, cs;               /* strategies kept, read back so far */
    PlanStrategy *st;             /* [n] */
    double *esh;                  /* [n] resharding shares (search_edges.c) */
    NodePrice *np;                /* [n] */
    int *cn0, *cs0;               /* [npieces] where each floor class's nodes and strategies
                                     start (-1: not kept: the lead class's floor keeps one) */
} Kept;

static Kept *kept_new(const Src *s)
{
    Kept *K = ir_xcalloc(1, sizeof *K);
    K->cn0 = ir_xmalloc(sizeof(int) * 2 * (size_t)(s->npieces + 1));
    K->cs0 = K->cn0 + s->npieces + 1;
    for (int p = 0; p < s->npieces; p++)
        K->cn0[p] = K->cs0[p] = -1;
    return K;
}

static void kept_free(Kept *K)
{
    if (!K)
        return;
    free(K->ns);
    free(K->st);
    free(K->esh);
    free(K->np);
    free(K->cn0);
    free(K);
}

static void kept_add(Kept *K, int ns, const PlanStrategy *st, const double *esh, const NodePrice *np)
{
    if (K->nn == K->capn) {
        K->capn = K->capn ? 2 * K->capn : 64;
        K->ns = ir_xrealloc(K->ns, sizeof(int) * (size_t)K->capn);
    }
    K->ns[K->nn++] = ns;
    if (K->n + ns > K->cap) {
        while (K->n + ns > K->cap)
            K->cap = K->cap ? 2 * K->cap : 256;
        K->st = ir_xrealloc(K->st, sizeof(PlanStrategy) * (size_t)K->cap);
        K->esh = ir_xrealloc(K->esh, sizeof(double) * (size_t)K->cap);
        K->np = ir_xrealloc(K->np, sizeof(NodePrice) * (size_t)K->cap);
    }
    if (ns > 0) {
        memcpy(&K->st[K->n], st, sizeof(PlanStrategy) * (size_t)ns);
        memcpy(&K->esh[K->n], esh, sizeof(double) * (size_t)ns);
        memcpy(&K->np[K->n], np, sizeof(NodePrice) * (size_t)ns);
    }
    K->n += ns;
}

/* The tighter bound of a group: for every node the least kernel time
 * (with its share of the resharding inside its piece, search_edges.c),
 * saved bytes and model states over the strategies the ILP may choose on
 * the group's mesh (plan_strategies under the same pins), summed per piece.
 * A sum of per-node minima is at most what any one choice costs. */
/* src_group_floor's working arrays, the same sizes for every group of a
 * search: made once (src_floor_free frees them), since a fresh allocation
 * of a few hundred kilobytes per group costs page faults every time. */
enum { MAXS = 512 };              /* strategies of one node, at most */
struct SrcFloorBuf {
    bool *over;                   /* grad_over */
    PlanStrategy *pst;            /* [MAXS] producer_floor's */
    double *minb;                 /* [ntensors + 1] */
    double *stz, *ssz;            /* [MAXS * 4] */
    PlanStrategy *stall;          /* [MAXS * maxc] */
    double *shall;                /* [MAXS * maxc] */
    int *nsall;                   /* [maxc] */
    PlanStrategy **stp;           /* [maxc] */
    double **shp;                 /* [maxc] */
    struct NodePrice *npall;      /* [MAXS * maxc] */
    struct NodePrice **npp;       /* [maxc] */
    struct Kept **kept;           /* [ngroups] the time floor's node prices, until the group's
                                     whole floor (NULL: none kept) */
    /* pass_saved_slots of each forward node under each policy: strategy-free,
     * so asked once per search rather than per strategy, policy and floor
     * (the scans for the first keeper were most of the whole floor's
     * pass_saved_list). [(n * SRC_NRC + r) * NSLOT ..], count at nslot[n *
     * SRC_NRC + r] (-1: not yet). */
    signed char *slot, *nslot;
    int *twin;                    /* [ngroups] the group on the same mesh at the same micro-batch
                                     with sequence parallelism the other way (-1: none) */
    int *kin, nkin;               /* [ngroups] the group's kin class: the same cp, tp, fold and
                                     micro-batch, any dp and sequence parallelism */
    struct KinSlot {
        int g;                    /* the last group of the class with sequence parallelism off,
                                     on, whose time floor kept its prices (-1: none) */
        struct Kept *own;         /* those prices once its whole floor is made (else its kept) */
    } *kin_last;                  /* [kin classes * 2] */
    long twin_asked, twin_hits, kin_hits; /* node prices a time floor made, took from its twin's,
                                     and from its kin's */
    /* pass_ilp_pins_cp by mesh axes and sequence parallelism: it scans the
     * graph for the experts' and heads' dims, 54,000 instructions a floor
     * for one of a handful of answers. */
    int npins;
    struct {
        int dpa, cpa, tpa;
        bool sp;
        uint64_t allow[PLAN_MAX_AXES];
    } pins[8];
};
enum { NSLOT = IR_MAX_IN + IR_MAX_OUT };

/* Groups in the order of their layout but sequence parallelism (twins
 * side by side). */
static const Src *twin_src;
static int twin_cmp(const void *a, const void *b)
{
    const SrcGroup *x = &twin_src->groups[*(const int *)a], *y = &twin_src->groups[*(const int *)b];
    int kx[6] = {x->dp, x->cp, x->tp, x->fold, x->b, x->sp}, ky[6] = {y->dp, y->cp, y->tp, y->fold, y->b, y->sp};
    for (int i = 0; i < 6; i++)
        if (kx[i] != ky[i])
            return kx[i] < ky[i] ? -1 : 1;
    return 0;
}

/* Each group's twin: the same dp, cp, tp, fold and micro-batch (so the
 * same mesh and dim sizes: every node's price under a strategy both allow
 * is the same), sequence parallelism the other way (its pins allow other
 * strategies of some nodes). [ngroups + 1], -1 where none. */
static int *twins(const Src *s)
{
    int n = s->ngroups;
    int *ord = ir_xmalloc(sizeof(int) * (size_t)(n + 1)), *tw = ir_xmalloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        ord[i] = i, tw[i] = -1;
    twin_src = s;
    qsort(ord, (size_t)n, sizeof *ord, twin_cmp);
    for (int i = 0; i + 1 < n; i++) {
        const SrcGroup *x = &s->groups[ord[i]], *y = &s->groups[ord[i + 1]];
        if (x->dp == y->dp && x->cp == y->cp && x->tp == y->tp && x->fold == y->fold && x->b == y->b &&
            x->sp != y->sp)
            tw[ord[i]] = ord[i + 1], tw[ord[i + 1]] = ord[i];
    }
    free(ord);
    return tw;
}

/* Groups in the order of cp, tp, fold and micro-batch (kin side by side). */
static int kin_cmp(const void *a, const void *b)
{
    const SrcGroup *x = &twin_src->groups[*(const int *)a], *y = &twin_src->groups[*(const int *)b];
    int64_t kx[4] = {x->cp, x->tp, x->fold, x->mb_seqs}, ky[4] = {y->cp, y->tp, y->fold, y->mb_seqs};
    for (int i = 0; i < 4; i++)
        if (kx[i] != ky[i])
            return kx[i] < ky[i] ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* Each group's kin class (B->kin) and the classes' last time floors (none
 * yet). */
static void kins(const Src *s, struct SrcFloorBuf *B)
{
    int n = s->ngroups, nk = 0;
    int *ord = ir_xmalloc(sizeof(int) * (size_t)(n + 1));
    B->kin = ir_xmalloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        ord[i] = i;
    twin_src = s;
    qsort(ord, (size_t)n, sizeof *ord, kin_cmp);
    for (int i = 0; i < n; i++) {
        const SrcGroup *x = &s->groups[ord[i]], *y = i > 0 ? &s->groups[ord[i - 1]] : NULL;
        if (!y || x->cp != y->cp || x->tp != y->tp || x->fold != y->fold || x->mb_seqs != y->mb_seqs)
            nk++;
        B->kin[ord[i]] = nk - 1;
    }
    B->nkin = nk;
    B->kin_last = ir_xmalloc(sizeof *B->kin_last * (size_t)(2 * nk + 1));
    for (int i = 0; i < 2 * nk; i++)
        B->kin_last[i] = (struct KinSlot){-1, NULL};
    free(ord);
}

static struct SrcFloorBuf *floor_buf(Src *s)
{
    if (s->floor_buf)
        return s->floor_buf;
    const IrGraph *g = s->g;
    struct SrcFloorBuf *B = ir_xcalloc(1, sizeof *B);
    B->over = grad_over(s);
    B->pst = ir_xmalloc(sizeof(PlanStrategy) * MAXS);
    B->minb = ir_xmalloc(sizeof(double) * (size_t)(g->ntensors + 1));
    B->stz = ir_xmalloc(sizeof(double) * MAXS * 4);
    B->ssz = ir_xmalloc(sizeof(double) * MAXS * 4);
    int maxc = 1;
    for (int p = 0; p < s->npieces; p++)
        maxc = g->pieces[p].count > maxc ? g->pieces[p].count : maxc;
    B->stall = ir_xmalloc(sizeof(PlanStrategy) * MAXS * (size_t)maxc);
    B->shall = ir_xmalloc(sizeof(double) * MAXS * (size_t)maxc);
    B->nsall = ir_xmalloc(sizeof(int) * (size_t)maxc);
    B->stp = ir_xmalloc(sizeof(PlanStrategy *) * (size_t)maxc);
    B->shp = ir_xmalloc(sizeof(double *) * (size_t)maxc);
    B->npall = ir_xmalloc(sizeof(NodePrice) * MAXS * (size_t)maxc);
    B->npp = ir_xmalloc(sizeof(NodePrice *) * (size_t)maxc);
    B->kept = ir_xcalloc((size_t)s->ngroups + 1, sizeof *B->kept);
    B->twin = twins(s);
    kins(s, B);
    B->slot = ir_xmalloc((size_t)g->nfwd * SRC_NRC * NSLOT + 1);
    B->nslot = ir_xmalloc((size_t)g->nfwd * SRC_NRC + 1);
    memset(B->nslot, -1, (size_t)g->nfwd * SRC_NRC + 1);
    return s->floor_buf = B;
}

void src_floor_free(Src *s)
{
    struct SrcFloorBuf *B = s->floor_buf;
    if (B) {
        free(B->over);
        free(B->pst);
        free(B->minb);
        free(B->stz);
        free(B->ssz);
        free(B->stall);
        free(B->shall);
        free(B->nsall);
        free(B->stp);
        free(B->shp);
        free(B->npall);
        free(B->npp);
        for (int i = 0; i < s->ngroups; i++)
            kept_free(B->kept[i]);
        free(B->kept);
        free(B->slot);
        free(B->nslot);
        free(B->twin);
        free(B->kin);
        for (int i = 0; i < 2 * B->nkin; i++)
            kept_free(B->kin_last[i].own);
        free(B->kin_last);
        if (getenv("PTDC_SEARCH_DEBUG"))
            fprintf(stderr, "floor: %ld node prices made, %ld taken from the twin's time floor, %ld from a kin's\n",
                    B->twin_asked, B->twin_hits, B->kin_hits);
        free(B);
    }
    s->floor_buf = NULL;
    free(s->ws_over);
    s->ws_over = NULL;
    struct SrcPieceMemo *M = s->piece_memo;
    for (int i = 0; M && i < PIECE_MEMO; i++) {
        free(M->e[i].delta);
        free(M->e[i].out);
    }
    free(M);
    s->piece_memo = NULL;
    src_fitmem_free(s);
    if (getenv("PTDC_SEARCH_DEBUG")) {
        long asked, hits;
        src_edge_memo_counts(s, &asked, &hits);
        fprintf(stderr, "floor: %ld edges priced, %ld remembered", asked, hits);
        src_states_memo_counts(s, &asked, &hits);
        fprintf(stderr, "; %ld node states priced, %ld remembered", asked, hits);
        src_price_memo_counts(s, &asked, &hits);
        fprintf(stderr, "; %ld node prices asked of the memo, %ld remembered\n", asked, hits);
    }
    src_edge_memo_free(s);
    src_states_memo_free(s);
    src_price_memo_free(s);
    free(s->rec_node);
    s->rec_node = NULL;
}

/* pass_saved_slots of forward node nd under policy r into x, asked once
 * per search (B's). */
static int slots_of(Src *s, struct SrcFloorBuf *B, const IrNode *nd, int r, int *x)
{
    int at = nd->id * SRC_NRC + r;
    signed char *sl = &B->slot[(size_t)at * NSLOT];
    if (B->nslot[at] < 0) {
        int k = pass_saved_slots(s->c, s->g, nd, (PlanRecompute)r, x);
        for (int j = 0; j < k; j++)
            sl[j] = (signed char)x[j];
        B->nslot[at] = (signed char)k;
    }
    for (int j = 0; j < B->nslot[at]; j++)
        x[j] = sl[j];
    return B->nslot[at];
}

int src_saved_slots(Src *s, const IrNode *nd, int r, int *x) { return slots_of(s, floor_buf(s), nd, r, x); }

/* What node nd keeps for backward under policy r with strategy st (in, out:
 * plan_shard_io's), each input at most as big as its producer can lay it
 * out (pass_predict may keep the producer's layout instead): the floor's
 * saved bytes of that strategy. pass_saved_list's items, from the slots
 * remembered in B (src_check: against pass_saved_list itself). */
static double saved_floor(Src *s, const SrcGroup *G, const IrNode *nd, const PlanStrategy *st,
                          const PlanSharding *in, const PlanSharding *out, const int64_t *ds,
                          const uint64_t *allow, int r, struct SrcFloorBuf *B)
{
    const IrGraph *g = s->g;
    int x[NSLOT];
    int ns = slots_of(s, B, nd, r, x);
    PassSaved it[IR_MAX_IN + IR_MAX_OUT + 2];
    int k = pass_saved_list_at(s->c, g, nd, &G->mesh, st, in, out, ds, (PlanRecompute)r, x, ns, it,
                               IR_MAX_IN + IR_MAX_OUT + 2);
    if (src_check(s)) {
        PassSaved it2[IR_MAX_IN + IR_MAX_OUT + 2];
        int k2 = pass_saved_list(s->c, g, nd, &G->mesh, st, ds, (PlanRecompute)r, it2, IR_MAX_IN + IR_MAX_OUT + 2);
        bool same = k2 == k;
        for (int j = 0; same && j < k; j++)
            same = it[j].tensor == it2[j].tensor && it[j].slot == it2[j].slot &&
                   memcmp(&it[j].bytes, &it2[j].bytes, sizeof(double)) == 0;
        if (!same)
            ir_die("search: the saved bytes of node %d (%s) from its remembered slots differ from "
                   "pass_saved_list's under policy %d", nd->id, ir_ops[nd->op].name, r);
    }
    double b = 0;
    for (int j = 0; j < k; j++) {
        int t = it[j].tensor;
        double x = it[j].bytes;
        if (t >= 0 && it[j].slot < nd->nin && g->tensors[t].producer >= 0)
            x = src_fmin(x, producer_floor(s, G, ds, allow, B->pst, MAXS, B->minb, t));
        b += x;
    }
    return b;
}

/* group_sizes_pins with the pins remembered in B (src_check: against
 * pass_ilp_pins_cp). */
static int64_t *floor_sizes_pins(const Src *s, struct SrcFloorBuf *B, const SrcGroup *G,
                                 uint64_t allow[PLAN_MAX_AXES])
{
    const IrGraph *g = s->g;
    int dpa, cpa, tpa;
    plan_mesh_dims_axes(G->cp, G->tp, &dpa, &cpa, &tpa);
    int i = 0;
    while (i < B->npins && !(B->pins[i].dpa == dpa && B->pins[i].cpa == cpa && B->pins[i].tpa == tpa &&
                             B->pins[i].sp == G->sp))
        i++;
    if (i == B->npins || src_check(s)) {
        int64_t *ds = group_sizes_pins(g, G, allow);
        if (i < B->npins && memcmp(allow, B->pins[i].allow, sizeof B->pins[i].allow) != 0)
            ir_die("search: the remembered ILP pins of group dp %d tp %d sp %d differ", G->dp, G->tp, G->sp);
        if (i == B->npins && i < (int)(sizeof B->pins / sizeof B->pins[0])) {
            B->pins[i].dpa = dpa, B->pins[i].cpa = cpa, B->pins[i].tpa = tpa, B->pins[i].sp = G->sp;
            memcpy(B->pins[i].allow, allow, sizeof B->pins[i].allow);
            B->npins++;
        }
        return ds;
    }
    memcpy(allow, B->pins[i].allow, sizeof B->pins[i].allow);
    int64_t *ds = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    ir_dim_sizes(g, G->mb_seqs, ds);
    return ds;
}

/* The time floor alone (src_group_floor, time_only) of the nodes of one
 * floor class p: per node the least kernels with its share of the
 * resharding inside the piece over its strategies, without the ZeRO
 * traffic per micro-batch, which is never negative (sync(z, 2 micro-batches)
 * - sync(z, 1) and shard kernels), so the same for every ZeRO stage and at
 * most each one's. */
static void floor_time(Src *s, SrcGroup *G, int p, const int *nsall, double *const *shp, NodePrice *const *npp)
{
    const IrGraph *g = s->g;
    const bool *recn = rec_nodes(s);
    for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
        int a = n - g->pieces[p].first, ns = nsall[a];
        double tf = INFINITY, tz = INFINITY;
        for (int i = 0; i < ns; i++) {
            tf = src_fmin(tf, npp[a][i].f);
            tz = src_fmin(tz, npp[a][i].fb + shp[a][i]);
        }
        if (ns < 1)
            tf = tz = 0;
        for (int r = 0; r < SRC_NRC; r++)
            for (int z = 0; z < 4; z++)
                G->floor_t[(src_frow(s, p) * SRC_NRC + r) * 4 + z] += tz + (recn[n * SRC_NRC + r] ? tf : 0);
    }
}

/* Another group's kept prices read alongside a time floor's nodes (the
 * same nodes in the same order): cn, cs its place; axes, the mesh axes on
 * which its mesh and the floor's agree (size, nodes a group spans, members
 * per node): a strategy using no other axis has the same price on both. */
typedef struct TwinRead {
    const Kept *K;
    int cn, cs;
    unsigned axes;
} TwinRead;

/* The axes strategy x reads of the mesh (pass_cost_node, cost_ops.c): the
 * local sizes divide by the axes splitting a loop dim or exchanging
 * experts, and every collective a node prices runs over such an axis
 * (context parallelism's ring and the vocabulary's reductions over the
 * axis splitting that dim, the amax reductions over those splitting an
 * operand, the experts' all-to-all over the exchange axes); nothing else
 * of the mesh is read. */
static unsigned used_axes(const PlanStrategy *x)
{
    unsigned u = x->xchg;
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        u |= (unsigned)(x->dim[a] >= 0) << a;
    return u;
}

static unsigned same_axes(const PlanMesh *m, const PlanMesh *q)
{
    unsigned u = 0;
    for (int a = 0; a < PLAN_MAX_AXES && a < m->naxes && a < q->naxes; a++)
        u |= (unsigned)(m->size[a] == q->size[a] && m->nodes[a] == q->nodes[a] && m->per_node[a] == q->per_node[a])
             << a;
    return u;
}

/* Where strategy x (the floor's i-th of the node) is among the tn kept
 * ones of the node T reads next (-1: not there, or x reads an axis the two
 * meshes disagree on): mostly in the same place, some left out or added. */
static int kept_at(const TwinRead *T, int tn, int i, const PlanStrategy *x)
{
    if (!T || (used_axes(x) & ~T->axes))
        return -1;
    const PlanStrategy *tst = &T->K->st[T->cs];
    if (i < tn && memcmp(&tst[i], x, sizeof *x) == 0)
        return i;
    for (int k = 0; k < tn; k++)
        if (memcmp(&tst[k], x, sizeof *x) == 0)
            return k;
    return -1;
}

/* The sources a time floor reads kept prices from: its twin's, then its
 * kin's (one with sequence parallelism as its own, one the other way). */
enum { NSRC = 3 };

/* Piece p's nodes' strategies, resharding shares and prices into B's
 * arrays (nsall, stp, shp, npp). With R (NULL, or each NULL: none), a
 * strategy a source priced takes its price from there where their meshes
 * agree on every axis it reads: R[0] a time floor's twin's (its mesh is
 * the floor's), the others a kin's (the same cp, tp, fold and micro-batch,
 * so the same dim sizes); src_check prices it again and compares. */
static void price_piece(Src *s, SrcGroup *G, int p, const int64_t *ds, const uint64_t *allow, struct SrcFloorBuf *B,
                        TwinRead *const *R)
{
    const IrGraph *g = s->g;
    for (int a = 0; a < g->pieces[p].count; a++) {
        B->stp[a] = B->stall + (size_t)a * MAXS, B->shp[a] = B->shall + (size_t)a * MAXS;
        B->npp[a] = B->npall + (size_t)a * MAXS;
        B->nsall[a] = group_strategies(s, G, &g->nodes[g->pieces[p].first + a], ds, allow, B->stp[a], MAXS);
    }
    src_edge_shares(s, G, p, ds, B->stp, B->nsall, B->shp);
    for (int a = 0; a < g->pieces[p].count; a++) {
        const IrNode *nd = &g->nodes[g->pieces[p].first + a];
        int tn[NSRC];
        for (int k = 0; k < NSRC; k++)
            tn[k] = R && R[k] ? R[k]->K->ns[R[k]->cn] : 0;
        B->twin_asked += B->nsall[a];
        for (int i = 0; i < B->nsall[a]; i++) {
            const PlanStrategy *x = &B->stp[a][i];
            int k = 0, j = -1;
            for (; R && k < NSRC && j < 0; k++)
                j = kept_at(R[k], tn[k], i, x);
            if (j < 0) {
                B->npp[a][i] = node_price(s, G, nd, x, ds);
                continue;
            }
            const NodePrice *np = &R[k - 1]->K->np[R[k - 1]->cs + j];
            if (k == 1)
                B->twin_hits++;
            else
                B->kin_hits++;
            B->npp[a][i] = *np;
            if (src_check(s)) {
                NodePrice y = node_price_made(s, G, nd, x, ds);
                if (memcmp(&y, np, sizeof y) != 0)
                    ir_die("search: the node price of node %d (%s) group dp %d tp %d b %d sp %d took from its "
                           "%s's time floor differs", nd->id, ir_ops[nd->op].name, G->dp, G->tp, G->b, G->sp,
                           k == 1 ? "twin" : "kin");
            }
        }
        for (int k = 0; R && k < NSRC; k++)
            if (R[k])
                R[k]->cs += tn[k], R[k]->cn++;
    }
}

/* Piece p's nodes' strategies, shares and prices as the group's time floor
 * kept them: B's pointers into K (the same numbers: src_check prices them
 * again and compares). */
static void kept_piece(Src *s, SrcGroup *G, int p, const int64_t *ds, const uint64_t *allow, struct SrcFloorBuf *B,
                       Kept *K)
{
    const IrGraph *g = s->g;
    if (src_check(s)) {
        price_piece(s, G, p, ds, allow, B, NULL);
        K->cn = K->cn0[p], K->cs = K->cs0[p];
        for (int a = 0, at = K->cs; a < g->pieces[p].count; at += B->nsall[a], a++) {
            int ns = B->nsall[a];
            if (K->cn + a >= K->nn || K->ns[K->cn + a] != ns ||
                memcmp(&K->st[at], B->stp[a], sizeof(PlanStrategy) * (size_t)ns) != 0 ||
                memcmp(&K->esh[at], B->shp[a], sizeof(double) * (size_t)ns) != 0 ||
                memcmp(&K->np[at], B->npp[a], sizeof(NodePrice) * (size_t)ns) != 0)
                ir_die("search: the node prices group dp %d tp %d b %d sp %d kept from its time floor differ for "
                       "node %d (%s)", G->dp, G->tp, G->b, G->sp, g->pieces[p].first + a,
                       ir_ops[g->nodes[g->pieces[p].first + a].op].name);
        }
    }
    K->cn = K->cn0[p], K->cs = K->cs0[p];
    for (int a = 0; a < g->pieces[p].count; a++) {
        int ns = K->ns[K->cn++];
        B->nsall[a] = ns;
        B->stp[a] = &K->st[K->cs], B->shp[a] = &K->esh[K->cs], B->npp[a] = &K->np[K->cs];
        K->cs += ns;
    }
}

/* Where R's source kept piece p's class (NULL: it did not): R, read from
 * the class's first node. */
static TwinRead *read_at(TwinRead *R, const TwinRead *src, int p)
{
    if (!src->K || src->K->cn0[p] < 0)
        return NULL;
    *R = *src;
    R->cn = src->K->cn0[p], R->cs = src->K->cs0[p];
    return R;
}

void src_group_floor(Src *s, SrcGroup *G, int level)
{
    const IrGraph *g = s->g;
    int P = s->npieces;
    bool time_only = level != SRC_FLOOR_WHOLE;
    double *time0 = G->floor_t; /* a time floor made before: freed once this one is made (a new
                                   array and a new floor_id: the memos of src_floor_pieces and
                                   src_fitmem_bound know a floor by its id) */
    src_floor_classes(s);
    /* one row per floor class: its pieces' floors are equal (floor_like) */
    size_t NR = (size_t)s->floor_nrow;
    G->floor_t = ir_xcalloc(NR * SRC_NRC * 4, sizeof(double));
    G->floor_id = ++s->floor_serial;
    if (!time_only) {
        G->floor_saved = ir_xcalloc(NR * SRC_NRC, sizeof(double));
        G->floor_states = ir_xcalloc(NR * 4, sizeof(double));
        G->floor_ws = ir_xcalloc(NR + 1, sizeof(double));
        G->floor_fslack = ir_xcalloc(NR + 1, sizeof(double));
    }
    struct SrcFloorBuf *B = floor_buf(s);
    const bool *over = B->over;
    const bool *recn = rec_nodes(s);
    uint64_t allow[PLAN_MAX_AXES];
    int64_t *ds = floor_sizes_pins(s, B, G, allow);
    double *minb = B->minb;
    double *stz = B->stz, *ssz = B->ssz;
    for (int t = 0; t < g->ntensors && !time_only; t++) /* producer_floor's: the whole floor's */
        minb[t] = -1;
    /* Per node of the piece: its strategies, and each one's share of the
     * resharding inside the piece (search_edges.c). */
    int *nsall = B->nsall;
    PlanStrategy **stp = B->stp;
    double **shp = B->shp;
    /* A time floor keeps its node prices (own; the lead class's floor's,
     * added to) for the whole floor, which reads them back (kept) and
     * frees them. */
    Kept *kept = NULL, *own = NULL;
    /* the twin's and a kin's time floors' prices, while they keep them */
    TwinRead src[NSRC] = {{NULL, 0, 0, 0}, {NULL, 0, 0, 0}, {NULL, 0, 0, 0}};
    int gi = (int)(G - s->groups);
    if (time_only) {
        own = B->kept[gi];
        if (level == SRC_FLOOR_LEAD || !own) {
            kept_free(own);
            own = B->kept[gi] = kept_new(s);
        }
        int tw = B->twin[gi];
        src[0].K = tw >= 0 ? B->kept[tw] : NULL;
        src[0].axes = src[0].K ? same_axes(&G->mesh, &s->groups[tw].mesh) : 0;
        for (int k = 0; k < 2; k++) {
            const struct KinSlot *q = &B->kin_last[2 * B->kin[gi] + (k ? !G->sp : G->sp)];
            if (q->g >= 0 && (q->g != tw || !src[0].K)) {
                src[1 + k].K = q->own ? q->own : B->kept[q->g];
                src[1 + k].axes = same_axes(&G->mesh, &s->groups[q->g].mesh);
            }
        }
    } else {
        kept = B->kept[gi];
    }
    for (int p = 0; p < P; p++) {
        if (s->floor_cls[p] != p)
            continue; /* floor_like: its class's row, made with its first piece */
        if (level == SRC_FLOOR_LEAD && p != s->floor_lead)
            continue;
        if (level == SRC_FLOOR_TIME && own->cn0[p] >= 0) {
            /* the lead class's floor made this row: the same numbers */
            size_t row = (size_t)src_frow(s, p) * SRC_NRC * 4;
            memcpy(&G->floor_t[row], &time0[row], sizeof(double) * SRC_NRC * 4);
            continue;
        }
        if (kept && kept->cn0[p] >= 0) {
            kept_piece(s, G, p, ds, allow, B, kept);
        } else {
            TwinRead r[NSRC], *rp[NSRC];
            for (int k = 0; k < NSRC; k++)
                rp[k] = read_at(&r[k], &src[k], p);
            price_piece(s, G, p, ds, allow, B, rp);
        }
        if (time_only) {
            floor_time(s, G, p, nsall, shp, B->npp);
            own->cn0[p] = own->nn, own->cs0[p] = own->n;
            for (int a = 0; a < g->pieces[p].count; a++)
                kept_add(own, nsall[a], stp[a], shp[a], B->npp[a]);
            continue;
        }
        for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
            const IrNode *nd = &g->nodes[n];
            int ns = nsall[n - g->pieces[p].first];
            const PlanStrategy *st = stp[n - g->pieces[p].first];
            const double *esh = shp[n - g->pieces[p].first];
            const NodePrice *np = B->npp[n - g->pieces[p].first];
            /* tz[z]: kernels and ZeRO z's per-micro-batch traffic of one
             * strategy, least over strategies: a plan pays both with the
             * same strategy (an expert split over dp exchanges tokens but
             * has no data-parallel replicas to reduce; replicated experts
             * the other way round). */
            double tb = INFINITY, tf = INFINITY, sv[SRC_NRC], sz[4], tz[4], ws = INFINITY, fsl = 0;
            for (int r = 0; r < SRC_NRC; r++)
                sv[r] = INFINITY;
            for (int z = 0; z < 4; z++)
                sz[z] = tz[z] = INFINITY;
            /* Only a node that reads parameters has ZeRO traffic (most do not:
             * skip the pricing there). */
            bool params = src_reads_param(g, nd);
            for (int i = 0; i < ns; i++) {
                PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
                plan_shard_io(g, nd, &st[i], in, out);
                ws = src_fmin(ws, grad_ws(s, &G->mesh, nd, in, out, np[i].ws, ds, over));
                fsl = src_fmax(fsl, np[i].fused);
                /* kernels (node_price: a norm alone or fused, less a hidden
                 * exchange) */
                tb = src_fmin(tb, np[i].fb);
                tf = src_fmin(tf, np[i].f);
                /* Model states by ZeRO stage and the traffic they make per
                 * micro-batch (none without parameters; remembered across
                 * floors, search_nodestates.c). */
                double pv[SRC_NSTATES] = {0};
                if (params)
                    src_node_states(s, nd, &G->mesh, &st[i], false, pv);
                for (int z = 0; z < 4; z++) {
                    ssz[i * 4 + z] = pv[z];
                    sz[z] = src_fmin(sz[z], ssz[i * 4 + z]);
                }
                for (int z = 0; z < 4; z++) {
                    stz[i * 4 + z] = np[i].fb + esh[i] + pv[4 + z];
                    tz[z] = src_fmin(tz[z], stz[i * 4 + z]);
                }
                for (int r = 0; r < SRC_NRC; r++) {
                    if (!src_rc_on(s, r)) {
                        sv[r] = 0;
                        continue;
                    }
                    sv[r] = src_fmin(sv[r], saved_floor(s, G, nd, &st[i], in, out, ds, allow, r, B));
                }
            }
            if (params)
                for (int z = 0; z < 4; z++)
                    fit_node(G, p, z, ns, stz, ssz);
            if (ns < 1) {
                tb = tf = 0, sz[0] = sz[1] = sz[2] = sz[3] = 0, tz[0] = tz[1] = tz[2] = tz[3] = 0;
                for (int r = 0; r < SRC_NRC; r++) /* every policy, Megatron's module sets too */
                    sv[r] = 0;
            }
            int row = src_frow(s, p);
            for (int r = 0; r < SRC_NRC; r++) {
                for (int z = 0; z < 4; z++)
                    G->floor_t[(row * SRC_NRC + r) * 4 + z] +=
                        tz[z] + (recn[n * SRC_NRC + r] ? tf : 0);
                G->floor_saved[row * SRC_NRC + r] += sv[r];
            }
            for (int z = 0; z < 4; z++)
                G->floor_states[row * 4 + z] += sz[z];
            /* pass_predict's transient is the largest node's working set:
             * the largest of the nodes' least is at most that */
            if (ns >= 1)
                G->floor_ws[row] = src_fmax(G->floor_ws[row], ws);
            G->floor_fslack[row] += fsl;
        }
    }
    /* Each level's floor is at least the one before, row by row (the whole
     * floor adds the ZeRO traffic to the same sums; the time floor copies
     * the lead class's row): the order's keys need it (search_order.c). */
    for (size_t i = 0; time0 && src_check(s) && i < NR * SRC_NRC * 4; i++)
        if (!(time0[i] <= G->floor_t[i]))
            ir_die("search: the %s floor of group dp %d tp %d b %d sp %d is below the floor before it (%.9g, "
                   "%.9g at %zu)", time_only ? "time" : "whole", G->dp, G->tp, G->b, G->sp, G->floor_t[i], time0[i], i);
    if (!time_only) { /* read back: the group has its last floor */
        struct KinSlot *q = &B->kin_last[2 * B->kin[gi] + G->sp];
        if (q->g == gi && kept) /* the class's last: its kin read them still */
            q->own = kept;
        else
            kept_free(kept);
        B->kept[gi] = NULL;
    } else if (level == SRC_FLOOR_TIME) { /* (the lead class's alone: a partial kin) */
        struct KinSlot *q = &B->kin_last[2 * B->kin[gi] + G->sp];
        kept_free(q->own);
        *q = (struct KinSlot){gi, NULL};
    }
    free(ds);
    free(time0);
}

/* A group's per-piece bounds summed once (they do not depend on pp, v or
 * the partition): time per policy, its costliest piece, saved bytes per
 * policy and the least over policies, model states per ZeRO stage. */
void src_group_sums(Src *s, SrcGroup *G)
{
    const SrcWork *W = src_work(s, G->mb_seqs);
    int n = G->dp * G->cp * G->tp;
    memset(G->pipe, 0, sizeof G->pipe);
    memset(G->sum_saved, 0, sizeof G->sum_saved);
    memset(G->sum_states, 0, sizeof G->sum_states);
    G->sum_saved_min = 0;
    for (int p = 0; p < s->npieces; p++) {
        double smin = INFINITY;
        for (int r = 0; r < SRC_NRC; r++) {
            if (!src_rc_on(s, r))
                continue;
            for (int z = 0; z < 4; z++) {
                double t = W->t[p * SRC_NRC + r] / n;
                if (G->floor_t)
                    t = src_fmax(t, G->floor_t[(src_frow(s, p) * SRC_NRC + r) * 4 + z]);
                pipe_add(&G->pipe[r][z], p, s->npieces, t, W->t_path[p * SRC_NRC + r] / n);
            }
            double sv = W->saved[p * SRC_NRC + r] / n;
            if (G->floor_saved)
                sv = src_fmax(sv, G->floor_saved[src_frow(s, p) * SRC_NRC + r]);
            G->sum_saved[r] += sv;
            smin = src_fmin(smin, sv);
        }
        G->sum_saved_min += smin;
        /* ZeRO shards over the data-parallel axis what its stage covers;
         * tensor parallelism can split the rest at most tp ways, and
         * context parallelism a parameter along the sequence (GPT's
         * position table) cp ways more. */
        for (int z = 0; z < 4; z++) {
            double x = src_states_lb(s, p, z, n, G->tp * G->cp);
            if (G->floor_states)
                x = src_fmax(x, G->floor_states[src_frow(s, p) * 4 + z]);
            G->sum_states[z] += x;
        }
    }
}

/* Activation offloading (stack offload_act_layers) takes a share of a
 * single stage's saved activations off the GPU when nothing is recomputed
 * (pass_offload_applies): the memory bounds then count none of them, which
 * still bounds from below. */
static bool src_offloads(const Src *s, int pp, int rc)
{
    const PassCostCtx *c = s->c;
    return pp == 1 && rc == PLAN_RECOMPUTE_NONE && c->st.offload_act_layers > 0 && c->st.ref_stack &&
           c->cl->gpu.host_copy_bw > 0;
}

double src_offload_keep(const Src *s, int pp, int rc)
{
    if (!src_offloads(s, pp, rc))
        return 1;
    int L = 0;
    for (int i = 0; i < s->g->npieces; i++)
        L += s->g->pieces[i].rep >= 0;
    PassOffload o;
    pass_offload(L, s->c->st.offload_act_layers, 0, 0, 0, &o); /* how many stay: no times needed */
    return L > 0 ? (double)o.resident / L : 1;
}

/* The bounds of candidate k with every stage under policy rc; `mixed`: the
 * policy may differ between stages (recomputation chosen per stage), so the
 * memory bound takes the least any policy keeps. */
static void bound_rc(Src *s, const SrcGroup *G, const SrcCand *k, int rc, bool mixed, double *t_lb,
                     double *m_lb)
{
    double smin = mixed ? G->sum_saved_min : G->sum_saved[rc], states = G->sum_states[k->zero];
    if (!mixed && src_offloads(s, k->pp, rc))
        smin = 0;
    *t_lb = pipe_bound(s, G, &G->pipe[rc][k->zero], k->pp, k->v, plan_schedule_split(k->sched), G->m);
    double imin, imax, h;
    inflight_stats(k->pp, k->v, G->m, &imin, &imax, &h);
    double mean = states / k->pp + imin * smin / k->pp;
    double harm = (smin + states / imax) / h;
    *m_lb = pass_runtime_bytes(s->c, &G->mesh, k->pp) + fmax(mean, harm);
    (void)s;
}

void src_bound(Src *s, const SrcGroup *G, SrcCand *k)
{
    if (k->rc != SRC_AUTO) {
        bound_rc(s, G, k, k->rc, false, &k->lb, &k->mem_lb);
        return;
    }
    if (k->pp > 1) {
        /* Stages may mix policies: time as if none recomputes, memory as if
         * every stage kept the least. */
        bound_rc(s, G, k, PLAN_RECOMPUTE_NONE, true, &k->lb, &k->mem_lb);
        return;
    }
    /* One stage, one policy: the fastest policy whose memory bound fits. */
    k->lb = k->mem_lb = INFINITY;
    for (int r = 0; r < SRC_NRC; r++) {
        double t, m;
        if (r > PLAN_RECOMPUTE_FULL)
            continue; /* automatic: the four searched policies */
        bound_rc(s, G, k, r, false, &t, &m);
        k->mem_lb = fmin(k->mem_lb, m);
        if (m <= s->usable)
            k->lb = fmin(k->lb, t);
    }
    if (!isfinite(k->lb)) /* nothing fits: keep the time bound finite for ordering */
        bound_rc(s, G, k, PLAN_RECOMPUTE_FULL, false, &k->lb, &k->mem_lb);
}

double src_bound_variant(const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k)
{
    double best = INFINITY;
    for (int rc = 0; rc < SRC_NRC; rc++) {
        if (k->rc != SRC_AUTO ? rc != k->rc : (k->pp > 1 && rc != PLAN_RECOMPUTE_NONE) || rc > PLAN_RECOMPUTE_FULL)
            continue;
        double states = 0, saved = 0;
        SrcPipeSum S;
        for (int p = 0; p < s->npieces; p++) {
            const SrcPiece *P = &V->piece[p];
            double t = P->fwd + P->bwd + P->rec[rc] + P->rs_lb; /* (cut_bound's resharding) */
            /* (split_bound's B: the backward but the weight gradients) */
            pipe_add(&S, p, s->npieces, t, t - P->dw);
            states += P->states[k->zero];
            saved += P->saved[rc];
        }
        /* One stage under auto: only the policies whose estimate fits (the
         * partition would not pick another; pass_predict adds to it). */
        if (src_offloads(s, k->pp, rc))
            saved = 0;
        if (k->rc == SRC_AUTO && k->pp == 1 &&
            pass_runtime_bytes(s->c, &G->mesh, 1) + states + src_inflight(1, 1, G->m, 0) * saved > s->usable)
            continue;
        best = fmin(best, pipe_bound(s, G, &S, k->pp, k->v, plan_schedule_split(k->sched), G->m));
    }
    return best;
}

double src_bound_solved(Src *s, const SrcGroup *G, const SrcVariant *V, const bool *have, const SrcCand *k)
{
    const SrcWork *W = src_work(s, G->mb_seqs);
    double n = G->dp * G->cp * G->tp, best = INFINITY;
    for (int rc = 0; rc < SRC_NRC; rc++) {
        if (k->rc != SRC_AUTO ? rc != k->rc : (k->pp > 1 && rc != PLAN_RECOMPUTE_NONE) || rc > PLAN_RECOMPUTE_FULL)
            continue;
        SrcPipeSum S;
        for (int p = 0; p < s->npieces; p++) {
            double t, path;
            if (have[p]) {
                const SrcPiece *P = &V->piece[p];
                t = P->fwd + P->bwd + P->rec[rc] + P->rs_lb;
                path = t - P->dw;
            } else {
                t = W->t[p * SRC_NRC + rc] / n;
                path = src_fmin(t, W->t_path[p * SRC_NRC + rc] / n);
            }
            pipe_add(&S, p, s->npieces, t, path);
        }
        best = src_fmin(best, pipe_bound(s, G, &S, k->pp, k->v, plan_schedule_split(k->sched), G->m));
    }
    return best;
}

static void floor_pieces(Src *s, const SrcGroup *G, int zero, const double *delta, SrcPiece *out)
{
    const SrcWork *W = src_work(s, G->mb_seqs);
    int n = G->dp * G->cp * G->tp;
    for (int p = 0; p < s->npieces; p++) {
        SrcPiece *P = &out[p];
        memset(P, 0, sizeof *P);
        double t[SRC_NRC];
        for (int r = 0; r < SRC_NRC; r++) {
            t[r] = W->t[p * SRC_NRC + r] / n;
            if (G->floor_t)
                t[r] = src_fmax(t[r], G->floor_t[(src_frow(s, p) * SRC_NRC + r) * 4 + zero] + (delta ? delta[p] : 0));
            P->saved[r] = W->saved[p * SRC_NRC + r] / n;
            if (G->floor_saved)
                P->saved[r] = src_fmax(P->saved[r], G->floor_saved[src_frow(s, p) * SRC_NRC + r]);
        }
        /* Kernels and the least resharding inside the piece (floor_t);
         * none across pieces (it is never negative). A middle layer: at
         * least the ILP's least layer with its resharding (search_layerlb.c). */
        P->fwd = t[PLAN_RECOMPUTE_NONE];
        if (G->layer_lb)
            P->fwd = src_fmax(P->fwd, G->layer_lb[p]);
        for (int r = 0; r < SRC_NRC; r++)
            P->rec[r] = src_fmax(0, t[r] - t[PLAN_RECOMPUTE_NONE]);
        for (int z = 0; z < 4; z++) {
            P->states[z] = src_states_lb(s, p, z, n, G->tp * G->cp);
            if (G->floor_states)
                P->states[z] = src_fmax(P->states[z], G->floor_states[src_frow(s, p) * 4 + z]);
        }
        P->wsaved[0] = P->wsaved[1] = W->wsaved[p] / n;
    }
}

const SrcPiece *src_floor_pieces_at(Src *s, const SrcGroup *G, int zero, const double *delta)
{
    struct SrcPieceMemo *M = s->piece_memo;
    size_t np = (size_t)s->npieces;
    if (!M) {
        M = s->piece_memo = ir_xcalloc(1, sizeof *M);
        for (int i = 0; i < PIECE_MEMO; i++) {
            M->e[i].delta = ir_xmalloc(sizeof(double) * (np + 1));
            M->e[i].out = ir_xmalloc(sizeof(SrcPiece) * (np + 1));
        }
    }
    for (int i = 0; i < PIECE_MEMO; i++) {
        const PieceMemo *e = &M->e[i];
        if (!e->used || e->dp != G->dp || e->cp != G->cp || e->tp != G->tp || e->fold != G->fold || e->b != G->b ||
            e->sp != G->sp || e->zero != zero || e->floor_id != G->floor_id || e->layer_lb != G->layer_lb ||
            e->has_delta != (delta != NULL) || (delta && memcmp(e->delta, delta, sizeof(double) * np) != 0))
            continue;
        if (src_check(s)) { /* the answer computed again: the same bytes */
            SrcPiece *x = ir_xmalloc(sizeof(SrcPiece) * (np + 1));
            floor_pieces(s, G, zero, delta, x);
            if (memcmp(x, e->out, sizeof(SrcPiece) * np) != 0)
                ir_die("search: remembered floor of group dp %d tp %d b %d zero %d differs", G->dp, G->tp, G->b,
                       zero);
            free(x);
        }
        return e->out;
    }
    PieceMemo *e = &M->e[M->next];
    M->next = (M->next + 1) % PIECE_MEMO;
    e->used = false;
    floor_pieces(s, G, zero, delta, e->out);
    e->used = true, e->sp = G->sp, e->has_delta = delta != NULL;
    e->dp = G->dp, e->cp = G->cp, e->tp = G->tp, e->fold = G->fold, e->b = G->b, e->zero = zero;
    e->floor_id = G->floor_id, e->layer_lb = G->layer_lb;
    if (delta)
        memcpy(e->delta, delta, sizeof(double) * np);
    return e->out;
}

void src_floor_pieces(Src *s, const SrcGroup *G, int zero, const double *delta, SrcPiece *out)
{
    memcpy(out, src_floor_pieces_at(s, G, zero, delta), sizeof(SrcPiece) * (size_t)s->npieces);
}

void src_floor_classes(Src *s)
{
    if (s->floor_cls)
        return;
    s->floor_cls = ir_xmalloc(sizeof(int) * (size_t)(s->npieces + 1));
    s->floor_cnt = ir_xcalloc((size_t)s->npieces + 1, sizeof(int));
    s->floor_row = ir_xmalloc(sizeof(int) * (size_t)(s->npieces + 1));
    s->floor_nrow = 0;
    for (int p = 0; p < s->npieces; p++) {
        int q = s->floor_cls[p] = floor_like(s, p);
        s->floor_cnt[q]++;
        s->floor_row[p] = q == p ? s->floor_nrow++ : s->floor_row[q];
    }
    /* The lead class: the one of most pieces, where it holds three in four
     * of them with at most half the classes' nodes (DeepSeek-V3: 57 of 63
     * MoE layers, 30 of 116 nodes; its dense layers' classes price 44% of
     * the strategies for three layers). Its time floor alone puts most
     * groups whose time floor does above the threshold, at a quarter of
     * the price there. */
    const IrGraph *g = s->g;
    int lead = -1, nodes = 0;
    for (int p = 0; p < s->npieces; p++)
        if (s->floor_cls[p] == p) {
            nodes += g->pieces[p].count;
            if (lead < 0 || s->floor_cnt[p] > s->floor_cnt[lead])
                lead = p;
        }
    s->floor_lead = lead >= 0 && 4 * s->floor_cnt[lead] >= 3 * s->npieces && 2 * g->pieces[lead].count <= nodes
                        ? lead
                        : -1;
}

bool src_floor_fit(Src *s, const SrcGroup *G, int pp, int zero, double *delta)
{
    src_floor_classes(s);
    for (int p = 0; p < s->npieces; p++)
        delta[p] = 0;
    if (!G->floor_states)
        return true;
    /* pass_predict's total on a rank is at least its model states plus the
     * runtime term (predict.c, memory). */
    double avail = s->usable - pass_runtime_bytes(s->c, &G->mesh, pp);
    for (int i = 0; i < G->nfit; i++) {
        const SrcFitNode *F = &G->fit[i];
        if (F->z != zero)
            continue;
        const double *m = &G->fit_val[F->off], *t = m + F->n;
        int c = s->floor_cnt[F->piece];
        double held = (double)((c + pp - 1) / pp);
        /* this node's states within what the others leave at their least,
         * and the backward working set of the layer the rank holds
         * (pass_predict's transient: at least the piece's floor_ws) */
        double ws = G->floor_ws ? G->floor_ws[src_frow(s, F->piece)] : 0;
        double allow = (avail - ws) / held - (G->floor_states[src_frow(s, F->piece) * 4 + zero] - m[0]);
        int j = -1;
        while (j + 1 < F->n && m[j + 1] <= allow)
            j++;
        if (j < 0)
            return false;
        delta[F->piece] += t[j] - t[F->n - 1];
    }
    for (int p = 0; p < s->npieces; p++)
        delta[p] = delta[s->floor_cls[p]];
    return true;
}

double src_fit_delta(const Src *s, const SrcGroup *G, int cls, int zero, double x)
{
    if (!G->floor_states)
        return 0;
    double d = 0;
    for (int i = 0; i < G->nfit; i++) {
        const SrcFitNode *F = &G->fit[i];
        if (F->z != zero || F->piece != cls)
            continue;
        const double *m = &G->fit_val[F->off], *t = m + F->n;
        /* this node's states within what the piece's others leave at their least */
        double allow = x - (G->floor_states[src_frow(s, cls) * 4 + zero] - m[0]);
        int j = -1;
        while (j + 1 < F->n && m[j + 1] <= allow)
            j++;
        if (j < 0)
            return INFINITY;
        d += t[j] - t[F->n - 1];
    }
    return d;
}

double src_fit_bound(Src *s, const SrcGroup *G, const SrcCand *k)
{
    double *delta = ir_xmalloc(sizeof(double) * (size_t)(s->npieces + 1));
    double b = INFINITY;
    if (src_floor_fit(s, G, k->pp, k->zero, delta)) {
        /* As bound_rc's time: policy rc, or none where it is chosen per
         * stage (the least time: recomputation only adds). */
        int rc = k->rc != SRC_AUTO ? k->rc : PLAN_RECOMPUTE_NONE;
        const SrcWork *W = src_work(s, G->mb_seqs);
        int n = G->dp * G->cp * G->tp;
        SrcPipeSum S;
        for (int p = 0; p < s->npieces; p++) {
            double t = W->t[p * SRC_NRC + rc] / n;
            if (G->floor_t)
                t = fmax(t, G->floor_t[(src_frow(s, p) * SRC_NRC + rc) * 4 + k->zero] + delta[p]);
            pipe_add(&S, p, s->npieces, t, W->t_path[p * SRC_NRC + rc] / n);
        }
        b = pipe_bound(s, G, &S, k->pp, k->v, plan_schedule_split(k->sched), G->m);
    }
    free(delta);
    return b;
}

double src_edge_floor_at(Src *s, const SrcGroup *G, const PlanStrategy *strat)
{
    const IrGraph *g = s->g;
    uint64_t allow[PLAN_MAX_AXES];
    int64_t *ds = group_sizes_pins(g, G, allow);
    double sum = 0;
    for (int p = 0; p < s->npieces && !isnan(sum); p++) {
        int c = g->pieces[p].count;
        PlanStrategy **st = ir_xmalloc(sizeof *st * (size_t)c + 1);
        double **sh = ir_xmalloc(sizeof *sh * (size_t)c + 1);
        int *ns = ir_xmalloc(sizeof(int) * (size_t)c + 1);
        for (int a = 0; a < c; a++) {
            st[a] = ir_xmalloc(sizeof(PlanStrategy) * MAXS);
            sh[a] = ir_xmalloc(sizeof(double) * MAXS);
            ns[a] = group_strategies(s, G, &g->nodes[g->pieces[p].first + a], ds, allow, st[a], MAXS);
        }
        src_edge_shares(s, G, p, ds, st, ns, sh);
        for (int a = 0; a < c; a++) {
            const PlanStrategy *x = &strat[g->pieces[p].first + a];
            int i = 0;
            while (i < ns[a] && (memcmp(st[a][i].dim, x->dim, sizeof x->dim) || st[a][i].xchg != x->xchg))
                i++;
            if (ns[a] > 0)
                sum += i < ns[a] ? sh[a][i] : NAN; /* not a strategy of the mesh: no check */
            free(st[a]);
            free(sh[a]);
        }
        free(st);
        free(sh);
        free(ns);
    }
    free(ds);
    return sum;
}
