/* search_prune.c: the lower bounds that let the search skip candidates
 * without solving or ranking them (docs/planner.md, "Why the pruning is
 * sound").
 *
 * Time. pass_predict's step time is at least its pipeline term
 *   m * tmax + (tsum - tmax) / v,
 * tmax the slowest pipeline rank's time per micro-batch and tsum the sum over
 * ranks; it grows with both (m >= 1 >= 1/v). A rank's time is at least the
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
#include "search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool src_recomputed(const PassCostCtx *c, const IrGraph *g, const IrNode *n, PassRecompute r)
{
    /* Mirrors pass_predict and pass_saved_bytes: pieces outside repeats are
     * never recomputed; FFN is `block mlp`; SELECTIVE reruns a materialised
     * attention (a flash kernel recomputes inside its backward anyway). */
    if (g->pieces[n->piece].layer < 0)
        return false;
    switch (r) {
    case PASS_RECOMPUTE_FULL: return true;
    case PASS_RECOMPUTE_FFN: return n->block && strcmp(n->block, "mlp") == 0;
    case PASS_RECOMPUTE_SELECTIVE: {
        bool mat = c->attn_kernel == PASS_KERNEL_AUTO ? c->attention == PASS_ATTN_MATERIALIZED
                 : c->attn_kernel == PASS_KERNEL_FUSED_SOFTMAX || c->attn_kernel == PASS_KERNEL_EAGER;
        return n->op == IR_OP_ATTENTION && mat;
    }
    case PASS_RECOMPUTE_NONE: break;
    }
    return false;
}

double src_inflight(int pp, int v, int m, int r)
{
    /* pass_predict: 1F1B holds min(m, pp - r) micro-batches on rank r; the
     * interleaved schedule holds that many chunk-micro-batches, each a 1/v
     * share of the rank's saved bytes. */
    if (v <= 1)
        return fmin(m, pp - r);
    return fmin((double)m * v, 2.0 * (pp - r - 1) + (v - 1.0) * pp + 1) / v;
}

double src_runtime_bytes(const PassMesh *m, int pp)
{
    /* pass_predict's runtime term: CUDA context, one NCCL communicator per
     * group kind the rank belongs to, library workspaces. */
    const PassCostConsts *K = &pass_cost_consts;
    int ncomm = 1 + (m->size[0] > 1) + (m->naxes > 1 && m->size[1] > 1) + (pp > 1);
    return K->cuda_ctx_bytes + ncomm * K->nccl_comm_bytes + K->workspace_bytes;
}

void src_states(Src *s)
{
    const IrGraph *g = s->g;
    PassMesh one;
    pass_mesh_make(&one, 1, 1, s->gpn);
    PassStrategy rep = {{-1, -1}};
    s->w = ir_xcalloc((size_t)s->npieces, sizeof(double));
    s->gr = ir_xcalloc((size_t)s->npieces, sizeof(double));
    s->op = ir_xcalloc((size_t)s->npieces, sizeof(double));
    for (int p = 0; p < s->npieces; p++)
        for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
            double w, gr, op;
            pass_param_bytes3(s->c, g, &g->nodes[n], &one, &rep, 0, &w, &gr, &op);
            s->w[p] += w, s->gr[p] += gr, s->op[p] += op;
        }
}

/* The piece that stands for p when costs depend only on the piece's kind:
 * the first piece of its repeat. */
static int rep_piece(const IrGraph *g, int p)
{
    if (g->pieces[p].rep < 0)
        return p;
    for (int q = 0; q < p; q++)
        if (g->pieces[q].rep == g->pieces[p].rep && g->pieces[q].count == g->pieces[p].count)
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
    W->saved = ir_xcalloc((size_t)s->npieces * SRC_NRC, sizeof(double));
    int64_t *ds = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    ir_dim_sizes(g, mb_seqs, ds);
    PassMesh one;
    pass_mesh_make(&one, 1, 1, s->gpn);
    PassStrategy rep = {{-1, -1}};
    double flop_rate = gpu->peak_flops * s->eff_max, byte_rate = gpu->hbm_bw * gpu->hbm_eff;
    for (int p = 0; p < s->npieces; p++) {
        int q = rep_piece(g, p);
        if (q != p) {
            memcpy(&W->t[p * SRC_NRC], &W->t[q * SRC_NRC], SRC_NRC * sizeof(double));
            memcpy(&W->saved[p * SRC_NRC], &W->saved[q * SRC_NRC], SRC_NRC * sizeof(double));
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
            for (int r = 0; r < SRC_NRC; r++) {
                W->t[p * SRC_NRC + r] += tf + tb + (src_recomputed(s->c, g, nd, r) ? tf : 0);
                W->saved[p * SRC_NRC + r] += pass_saved_bytes(s->c, g, nd, &one, &rep, ds, r);
            }
        }
    }
    free(ds);
    return W;
}

/* The in-flight counts' extremes and harmonic sum over the ranks. */
static void inflight_stats(int pp, int v, int m, double *imin, double *imax, double *h)
{
    *imin = INFINITY, *imax = 0, *h = 0;
    for (int r = 0; r < pp; r++) {
        double i = src_inflight(pp, v, m, r);
        *imin = fmin(*imin, i);
        *imax = fmax(*imax, i);
        *h += 1 / i;
    }
}

static double pipe_bound(double tsum, double tmax, int pp, int v, int m)
{
    tmax = fmax(tmax, tsum / pp);
    return m * tmax + (tsum - tmax) / v;
}

/* The tighter bound of a group: for every node the least kernel time,
 * saved bytes and model states over the strategies the ILP may choose on the
 * group's mesh (pass_strategies under the same pins), summed per piece. A
 * sum of per-node minima is at most what any one choice costs. */
void src_group_floor(Src *s, SrcGroup *G)
{
    const IrGraph *g = s->g;
    int P = s->npieces;
    G->floor_t = ir_xcalloc((size_t)P * SRC_NRC, sizeof(double));
    G->floor_saved = ir_xcalloc((size_t)P * SRC_NRC, sizeof(double));
    G->floor_states = ir_xcalloc((size_t)P * 4, sizeof(double));
    int64_t *ds = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    ir_dim_sizes(g, G->mb_seqs, ds);
    uint64_t allow[PASS_MAX_AXES];
    pass_ilp_pins(g, 0, G->tp > 1 ? 1 : -1, G->sp, allow);
    enum { MAXS = 512 };
    PassStrategy *st = ir_xmalloc(sizeof(PassStrategy) * MAXS);
    for (int p = 0; p < P; p++) {
        int q = rep_piece(g, p);
        if (q != p) {
            memcpy(&G->floor_t[p * SRC_NRC], &G->floor_t[q * SRC_NRC], SRC_NRC * sizeof(double));
            memcpy(&G->floor_saved[p * SRC_NRC], &G->floor_saved[q * SRC_NRC], SRC_NRC * sizeof(double));
            memcpy(&G->floor_states[p * 4], &G->floor_states[q * 4], 4 * sizeof(double));
            continue;
        }
        for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
            const IrNode *nd = &g->nodes[n];
            int ns = pass_strategies(g, nd, &G->mesh, ds, allow, st, MAXS);
            double tb = INFINITY, tf = INFINITY, sv[SRC_NRC], sz[4];
            for (int r = 0; r < SRC_NRC; r++)
                sv[r] = INFINITY;
            for (int z = 0; z < 4; z++)
                sz[z] = INFINITY;
            for (int i = 0; i < ns; i++) {
                PassNodeCost nc;
                pass_cost_node(s->c, g, nd, &G->mesh, &st[i], ds, &nc);
                tb = fmin(tb, nc.fwd_s + nc.bwd_s);
                tf = fmin(tf, nc.fwd_s);
                for (int r = 0; r < SRC_NRC; r++)
                    sv[r] = fmin(sv[r], pass_saved_bytes(s->c, g, nd, &G->mesh, &st[i], ds, r));
                for (int z = 0; z < 4; z++)
                    sz[z] = fmin(sz[z], pass_param_bytes(s->c, g, nd, &G->mesh, &st[i], z));
            }
            if (ns < 1)
                tb = tf = 0, sv[0] = sv[1] = sv[2] = sv[3] = 0, sz[0] = sz[1] = sz[2] = sz[3] = 0;
            for (int r = 0; r < SRC_NRC; r++) {
                G->floor_t[p * SRC_NRC + r] += tb + (src_recomputed(s->c, g, nd, r) ? tf : 0);
                G->floor_saved[p * SRC_NRC + r] += sv[r];
            }
            for (int z = 0; z < 4; z++)
                G->floor_states[p * 4 + z] += sz[z];
        }
    }
    free(st);
    free(ds);
}

void src_bound(Src *s, const SrcGroup *G, SrcCand *k)
{
    const SrcWork *W = src_work(s, G->mb_seqs);
    int n = G->dp * G->tp, rc = k->rc == SRC_AUTO ? PASS_RECOMPUTE_NONE : k->rc;
    double tsum = 0, tmax = 0, smin = 0, states = 0;
    for (int p = 0; p < s->npieces; p++) {
        double t = W->t[p * SRC_NRC + rc] / n;
        if (G->floor_t)
            t = fmax(t, G->floor_t[p * SRC_NRC + rc]);
        tsum += t;
        tmax = fmax(tmax, t);
        /* Auto may recompute anything: the least any policy keeps. */
        double sv = INFINITY;
        for (int r = 0; r < SRC_NRC; r++)
            if (k->rc == SRC_AUTO || r == rc)
                sv = fmin(sv, fmax(W->saved[p * SRC_NRC + r] / n,
                                   G->floor_saved ? G->floor_saved[p * SRC_NRC + r] : 0));
        smin += sv;
        /* ZeRO shards over the data-parallel axis what its stage covers;
         * tensor parallelism can split the rest at most tp ways. */
        double x = s->w[p] / (k->zero >= 3 ? n : G->tp) + s->gr[p] / (k->zero >= 2 ? n : G->tp) +
                   s->op[p] / (k->zero >= 1 ? n : G->tp);
        if (G->floor_states)
            x = fmax(x, G->floor_states[p * 4 + k->zero]);
        states += x;
    }
    k->lb = pipe_bound(tsum, tmax, k->pp, k->v, G->m);
    double imin, imax, h;
    inflight_stats(k->pp, k->v, G->m, &imin, &imax, &h);
    double mean = states / k->pp + imin * smin / k->pp;
    double harm = (smin + states / imax) / h;
    k->mem_lb = src_runtime_bytes(&G->mesh, k->pp) + fmax(mean, harm);
}

double src_bound_variant(const Src *s, const SrcGroup *G, const SrcVariant *V, const SrcCand *k)
{
    int rc = k->rc == SRC_AUTO ? PASS_RECOMPUTE_NONE : k->rc;
    double tsum = 0, tmax = 0;
    for (int p = 0; p < s->npieces; p++) {
        const SrcPiece *P = &V->piece[p];
        double t = P->fwd + P->bwd + P->rec[rc];
        tsum += t;
        tmax = fmax(tmax, t);
    }
    return pipe_bound(tsum, tmax, k->pp, k->v, G->m);
}
