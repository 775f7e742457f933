/* plan_frame.c: the plan a framework runs for a layout. Megatron-LM and
 * torchtitan do not search strategies or stage boundaries: their tensor
 * parallelism is a fixed pattern over the model's modules and their
 * pipeline split is even. So a layout pinned under a framework stack is
 * evaluated as that plan, not as the one ptdc's search would make of the
 * same degrees (ILP strategies, time-balanced stages): the numbers are then
 * the framework's, which is what tests/cost's calibration compares with
 * measured runs (tests/stack checks the command line reproduces it). */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The dim the tensor-parallel axis splits in node n: the first of heads, KV
 * heads, FFN width (the experts', an MoE model's dense layers', the shared
 * expert's) and vocabulary the node has and may split (column-parallel
 * where it is an output dim, row-parallel where contracted); else, with
 * sequence parallelism, the sequence (norms, residual adds). */
static int tp_dim(const IrGraph *g, const RepArch *A, const IrNode *n, bool sp)
{
    /* m_group_dim: a hybrid's Mamba-2 heads by group (MambaMixer's
     * nheads / tp and ngroups / tp each rank) */
    const int order[] = {A->heads_dim, A->kv_dim, A->ff_dim, A->dense_ff_dim, A->shared_ff_dim, A->vocab_dim,
                         A->hybrid ? A->m_group_dim : -1};
    for (int k = 0; k < 7; k++) {
        int d = order[k];
        if (d >= 0 && ir_node_has_dim(g, n, d) && plan_dim_splittable(g, n, d))
            return d;
    }
    if (sp && ir_node_has_dim(g, n, g->seq_dim) && plan_dim_splittable(g, n, g->seq_dim))
        return g->seq_dim;
    return -1;
}

static int one_policy(unsigned bits)
{
    for (int r = PLAN_RECOMPUTE_NONE; r < PLAN_RECOMPUTE_COUNT; r++)
        if (bits == 1u << r)
            return r;
    return -1;
}

/* The strategies of one framework mesh and the mesh axes they give
 * (plan_axes): the same for every pipeline split, ZeRO stage, micro-batch
 * and recomputation on it, which a search tries one after another, so it
 * keeps the last few (RepFrameMemo; building them walks every node). */
enum { FRAME_MEMO = 64, FRAME_KEY = 10 };
typedef struct FrameStrat {
    PlanMesh mesh;
    int key[FRAME_KEY];           /* what else the strategies follow (plan_framework) */
    PlanStrategy *strategy;
    int8_t axis[PLAN_NDIMS];
    uint8_t nested[PLAN_NDIMS];
} FrameStrat;

struct RepFrameMemo {
    const IrGraph *g;
    int n, next;
    FrameStrat e[FRAME_MEMO];
};

RepFrameMemo *rep_frame_memo_new(const IrGraph *g)
{
    RepFrameMemo *m = ir_xcalloc(1, sizeof *m);
    m->g = g;
    return m;
}

void rep_frame_memo_free(RepFrameMemo *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n; i++)
        free(m->e[i].strategy);
    free(m);
}

static FrameStrat *memo_find(RepFrameMemo *m, const PlanMesh *mesh, const int *key)
{
    for (int i = 0; i < m->n; i++)
        if (!memcmp(m->e[i].key, key, sizeof m->e[i].key) && !memcmp(&m->e[i].mesh, mesh, sizeof *mesh))
            return &m->e[i];
    return NULL;
}

static void memo_keep(RepFrameMemo *m, const IrGraph *g, const Plan *p, const int *key)
{
    FrameStrat *e = &m->e[m->next];
    if (m->n < FRAME_MEMO)
        m->n++;
    else
        free(e->strategy);
    m->next = (m->next + 1) % FRAME_MEMO;
    e->mesh = p->mesh;
    memcpy(e->key, key, sizeof e->key);
    e->strategy = ir_xmalloc(sizeof *e->strategy * ((size_t)g->nfwd + 1));
    memcpy(e->strategy, p->strategy, sizeof *e->strategy * (size_t)g->nfwd);
    memcpy(e->axis, p->axis, sizeof e->axis);
    memcpy(e->nested, p->nested, sizeof e->nested);
}

/* The framework's plan for layout L; its pipeline split that of `cut`
 * (a plan of L's pp x v chunks, uneven ones included: Megatron's
 * --pipeline-model-parallel-layout, torchtitan's module_fqns_per_model_part),
 * or even when cut is NULL. */
static bool plan_framework(const IrGraph *g, const RepArch *A, const PlanLayout *L, PlanAttention att,
                           int gpn, const Plan *cut, RepFrameMemo *memo, Plan *p, char *why, size_t wn)
{
    memset(p, 0, sizeof *p);
    int v = L->v > 0 ? L->v : 1, chunks = L->pp * v;
    if (gpn <= 0)
        gpn = 8;
    if (cut && cut->nstages != chunks)
        cut = NULL;
    int rc = one_policy(L->recompute);
    if (rc < 0)
        return rep_refuse(why, wn, "the plan recomputes its stages differently, and the frameworks apply "
                      "one recomputation policy to every layer");
    if (!cut && A->layers % chunks)
        return rep_refuse(why, wn, "without --pp-layers the frameworks split the %d layers evenly, which %d "
                      "%s cannot do; give the split (--pp-layers first=F,last=Z, Megatron's "
                      "--decoder-first/last-pipeline-num-layers, or one count per chunk), or leave a "
                      "layout flag unpinned and the search chooses it", A->layers, chunks,
                      v > 1 ? "model chunks" : "pipeline stages");
    if (L->dp < 1 || L->tp < 1 || L->micro_batch < 1 || L->num_micro < 1)
        return rep_refuse(why, wn, "the layout has no data-parallel degree, tensor-parallel degree or "
                      "micro-batch");
    /* Column-parallel layers give each rank heads / tp heads, KV heads / tp
     * query groups and d_ff / tp columns (Megatron's divide() asserts it,
     * torchtitan computes n_heads // tp); the vocabulary is padded. */
    const struct { const char *what; int64_t n; } split[] = {
        {"attention heads", A->heads}, {"key/value heads", A->kv_heads}, {"MLP width", A->moe ? 0 : A->d_ff},
        {"dense layers' MLP width", A->n_dense ? A->dense_ff : 0}, {"shared expert's width", A->shared_ff},
        {"Mamba-2 groups (MambaMixer's ngroups)", A->hybrid ? A->m_groups : 0}};
    for (int i = 0; i < 6; i++)
        if (split[i].n % L->tp)
            return rep_refuse(why, wn, "the frameworks' tensor parallelism splits the %lld %s evenly, which "
                          "tp %d cannot do", (long long)split[i].n, split[i].what, L->tp);
    /* Megatron-Core's experts (parallel_state.py: the expert ranks are the
     * dense TP x CP x DP ranks, tp fastest, regrouped as ETP, EP, expert-DP
     * in that order). EP a whole axis: folded over tp (exchange with the
     * sequence) or over dp (exchange with the batch), ETP over tp. Else
     * parallel folding: with ETP 1, EP takes ep / tp consecutive dp ranks
     * with every tp rank of each (EP across dp x tp; tp 1: EP below DP);
     * with ETP tp, ep consecutive dp ranks. dp is then dp_outer x dp_inner
     * on two mesh axes, dense ops splitting the batch over both (one
     * gradient reduction over all dp ranks, mem_param.c) and the experts
     * exchanged over dp_inner (and tp): replicated over dp_outer, which is
     * expert data parallelism and the experts' ZeRO group. */
    int ep = L->moe && L->ep > 1 ? L->ep : 1, etp = L->moe && L->etp > 1 ? L->etp : 1;
    int ep_axis = ep == 1 ? -1 : L->ep_axis >= 0 ? L->ep_axis : ep == L->tp ? 1 : 0;
    int dpi = 1; /* dp's inner factor, experts exchanged over it */
    bool whole = ep == 1 || (ep == (ep_axis == 1 ? L->tp : L->dp) && !(ep_axis == 1 && etp > 1));
    bool over_tp = false; /* folded: EP spans the tp ranks too */
    if (!whole && etp == 1 && ep % L->tp == 0 && L->dp % (ep / L->tp) == 0)
        dpi = ep / L->tp, over_tp = L->tp > 1;
    else if (!whole && etp > 1 && etp == L->tp && L->dp % ep == 0)
        dpi = ep;
    /* Megatron-Core: "Bias in Moe is only supported when ETP==1"
     * (transformer_config.py __post_init__; the experts' biases, GPT-OSS) */
    if (A->moe && A->expert_bias && etp > 1)
        return rep_refuse(why, wn, "the experts split etp %d ways, and the frameworks give experts with biases "
                          "no expert tensor parallelism (Megatron-Core's TransformerConfig asserts ETP 1 with biases)", etp);
    if (A->moe && (A->n_experts % ep || A->d_ff % etp || (etp > 1 && etp != L->tp) || (!whole && dpi == 1 && !over_tp)))
        return rep_refuse(why, wn, "the experts split ep %d, etp %d ways, which the %lld experts of width %lld "
                          "on a dp %d x tp %d mesh cannot do (EP dividing the experts and made of whole tp groups "
                          "of consecutive dp ranks, or of consecutive dp ranks with ETP tp; ETP the tp axis "
                          "dividing the width)", ep, etp, (long long)A->n_experts, (long long)A->d_ff, L->dp, L->tp);
    if (dpi == L->dp) /* EP = dp x tp: no outer factor */
        dpi = 1, ep_axis = 0;
    /* Context parallelism, the all-gather form (Megatron's --cp-comm-type
     * all_gather): every node carrying the sequence splits it over the cp
     * axis, attention its queries' (keys and values gathered). The mesh is
     * dp x cp x tp, tp fastest, which is Megatron's default rank order
     * (tp-cp-ep-dp-pp). With sequence parallelism the norms and residual
     * adds split each cp shard's sequence over tp as well (plan_seq_nested:
     * Megatron scatters the cp-local sequence over tp in the SP regions). */
    int cp = L->cp > 1 ? L->cp : 1, dpa, cpa, tpa;
    if (cp > 1 && L->sp && L->tp > 1 && A->seq % ((int64_t)cp * L->tp))
        return rep_refuse(why, wn, "sequence parallelism inside context parallelism splits each cp shard's "
                          "sequence over tp, which a sequence of %lld with cp %d and tp %d cannot do (a "
                          "multiple of cp x tp)", (long long)A->seq, cp, L->tp);
    if (cp > 1 && (A->moe || g->seq_dim < 0 || A->seq % (2 * cp)))
        return rep_refuse(why, wn, "context parallelism cp %d needs a dense model whose sequence (%lld) is a "
                          "multiple of 2 x cp (Megatron-LM's load-balanced chunks)", cp, (long long)A->seq);
    /* The all-to-all form (--cp-comm-type a2a) splits each tp rank's heads
     * over cp (tp outer, cp inner: the strategy's nested heads, PlanSharding
     * .hi_outer). Transformer Engine asserts the query and KV heads per tp
     * rank divide by cp; Megatron's KV heads replicated over a tp larger than
     * their count leave one per rank, which cp > 1 cannot divide, so both
     * counts divide tp x cp (docs/context.md). */
    int64_t hw = (int64_t)cp * L->tp;
    if (cp > 1 && L->cp_a2a && (A->heads % hw || A->kv_heads % hw))
        return rep_refuse(why, wn, "context parallelism's all-to-all form splits each tp rank's attention heads "
                          "over cp, which needs the %lld heads and %lld key/value heads divisible by tp %d x cp %d "
                          "(Transformer Engine's condition)", (long long)A->heads, (long long)A->kv_heads, L->tp, cp);
    int dia = -1; /* dp_inner's axis */
    if (dpi > 1) {
        plan_mesh_make_dims(&p->mesh, L->dp / dpi, dpi, L->tp, gpn);
        plan_mesh_dims_axes(dpi, L->tp, &dpa, &dia, &tpa);
        cpa = -1;
    } else {
        plan_mesh_make_dims(&p->mesh, L->dp, cp, L->tp, gpn);
        plan_mesh_dims_axes(cp, L->tp, &dpa, &cpa, &tpa);
    }
    uint16_t xchg = (uint16_t)(dia >= 0 ? 1u << dia : ep_axis >= 0 ? 1u << ep_axis : 0);
    if (over_tp)
        xchg |= (uint16_t)(1u << tpa);
    p->pp = L->pp;
    p->v = v;
    p->nstages = chunks;
    p->stages = ir_xcalloc((size_t)chunks, sizeof *p->stages);
    int per = A->layers / chunks;
    for (int c = 0; c < chunks; c++) {
        PlanStage *s = &p->stages[c];
        s->first_piece = cut ? cut->stages[c].first_piece : c == 0 ? 0 : 1 + c * per;
        s->npieces = cut ? cut->stages[c].npieces : per + (c == 0) + (c == chunks - 1);
        s->pp_rank = c % L->pp;
        s->recompute = (PlanRecompute)rc;
    }
    p->strategy = ir_xcalloc((size_t)g->nfwd + 1, sizeof *p->strategy);
    p->num_micro = L->num_micro;
    p->mb_seqs = plan_mb_seqs(L->micro_batch, L->dp);
    p->zero = L->zero;
    p->schedule = v > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B;
    p->attention = att;
    /* Everything the loop below reads of L besides the mesh. */
    int key[FRAME_KEY] = {L->dp > 1, dpa, dia, tpa, cpa, L->sp, L->cp_ring, L->cp_a2a, etp, xchg};
    FrameStrat *hit = memo && memo->g == g ? memo_find(memo, &p->mesh, key) : NULL;
    if (hit) {
        memcpy(p->strategy, hit->strategy, sizeof *p->strategy * (size_t)g->nfwd);
        memcpy(p->axis, hit->axis, sizeof p->axis);
        memcpy(p->nested, hit->nested, sizeof p->nested);
        p->axes_set = true;
        return true;
    }
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        PlanStrategy *s = &p->strategy[i];
        *s = (PlanStrategy){PLAN_NO_DIMS, 0};
        s->dim[dpa] = (int16_t)(L->dp > 1 && ir_node_has_dim(g, n, g->batch_dim) ? g->batch_dim : -1);
        if (dia >= 0)
            s->dim[dia] = s->dim[dpa];
        if (tpa >= 0)
            s->dim[tpa] = (int16_t)tp_dim(g, A, n, L->sp);
        if (cpa >= 0 && ir_node_has_dim(g, n, g->seq_dim) && plan_dim_splittable(g, n, g->seq_dim))
            s->dim[cpa] = (int16_t)g->seq_dim;
        /* Attention's CP form: the ring (p2p) keeps k and v split; the
         * all-to-all (a2a) splits the heads instead of the queries. */
        if (cpa >= 0 && n->op == IR_OP_ATTENTION && (L->cp_ring || L->cp_a2a))
            s->xchg = (uint16_t)(1u << cpa);
        if (cpa >= 0 && n->op == IR_OP_ATTENTION && L->cp_a2a)
            s->dim[cpa] = (int16_t)g->tensors[n->in[0]].dim[2];
        /* An op placing rows by position keeps the cp-local sequence whole
         * over tp (as Megatron adds GPT's position table before scattering). */
        if (cpa >= 0 && tpa >= 0 && s->dim[tpa] == g->seq_dim && s->dim[cpa] == g->seq_dim &&
            !plan_seq_nested(g, n, &p->mesh, g->seq_dim, cpa, tpa))
            s->dim[tpa] = -1;
        /* The routed experts; a gated shared expert (a moe of its own) is
         * Megatron-Core's SharedExpertMLP, split over tp like any MLP. (No
         * cp with experts: axis 1 is tp's.) */
        if (n->op == IR_OP_MOE && g->tensors[n->in[2]].dim[0] == A->expert_dim) {
            bool seq = tpa >= 0 && (L->sp || (xchg >> tpa & 1));
            if (tpa >= 0)
                s->dim[tpa] = (int16_t)(etp > 1 ? A->ff_dim : seq ? g->seq_dim : -1);
            s->xchg = xchg;
        } else if (n->op == IR_OP_MOE) {
            /* Megatron splits it over tp like any MLP. plan_layout reads a
             * moe whose width is split over an axis as ETP there, so that
             * split is kept for etp = tp; with etp 1 it is computed whole
             * on each tp rank (on its sequence slice with sp). */
            if (tpa >= 0)
                s->dim[tpa] = (int16_t)(etp > 1 ? A->shared_ff_dim : L->sp ? g->seq_dim : -1);
        }
    }
    plan_axes(g, p);
    if (memo && memo->g == g)
        memo_keep(memo, g, p, key);
    return true;
}

bool rep_plan_framework(const IrGraph *g, const RepArch *A, const PlanLayout *L, PlanAttention att,
                        int gpn, Plan *p, char *why, size_t wn)
{
    return plan_framework(g, A, L, att, gpn, NULL, NULL, p, why, wn);
}

/* Predict a->plan, its layout and per-stage times. */
static bool framework_alt_finish(const PassCostCtx *c, const IrGraph *g, PassSearchAlt *a)
{
    a->plan.precision = c->prec; /* the format the stack is asked to run */
    pass_predict(c, g, &a->plan, &a->pred);
    plan_layout(g, &a->plan, &a->layout);
    int n = a->plan.nstages, v = a->plan.v > 0 ? a->plan.v : 1;
    a->stage_fwd_s = ir_xcalloc((size_t)n, sizeof *a->stage_fwd_s);
    a->stage_bwd_s = ir_xcalloc((size_t)n, sizeof *a->stage_bwd_s);
    for (int s = 0; s < n; s++) {
        const PassRankMem *m = &a->pred.mem[a->plan.stages[s].pp_rank];
        a->stage_fwd_s[s] = m->fwd_s / v;
        a->stage_bwd_s[s] = m->bwd_s / v;
    }
    return true;
}

bool rep_framework_alt_cut(const PassCostCtx *c, const IrGraph *g, const PlanLayout *L, const int *layers,
                           PassSearchAlt *a, char *why, size_t wn)
{
    RepArch A;
    if (!rep_arch_read(g, &A, why, wn)) {
        memset(a, 0, sizeof *a);
        return false;
    }
    return rep_framework_alt_cut_of(c, g, &A, NULL, L, layers, a, why, wn);
}

bool rep_framework_alt_cut_of(const PassCostCtx *c, const IrGraph *g, const RepArch *A, RepFrameMemo *memo,
                              const PlanLayout *L, const int *layers, PassSearchAlt *a, char *why, size_t wn)
{
    memset(a, 0, sizeof *a);
    int chunks = L->pp * (L->v > 0 ? L->v : 1), first = 0;
    while (first < g->npieces && g->pieces[first].rep < 0)
        first++;
    Plan cut;
    memset(&cut, 0, sizeof cut);
    cut.nstages = layers ? chunks : 0;
    cut.stages = layers ? ir_xcalloc((size_t)chunks, sizeof *cut.stages) : NULL;
    for (int k = 0, l = first; layers && k < chunks; k++) {
        int a0 = k == 0 ? 0 : l;
        l += layers[k];
        cut.stages[k].first_piece = a0;
        cut.stages[k].npieces = (k == chunks - 1 ? g->npieces : l) - a0;
    }
    bool ok = plan_framework(g, A, L, c->attention, pass_cluster_domain(c->cl), layers ? &cut : NULL, memo,
                             &a->plan, why, wn);
    free(cut.stages);
    if (!ok) {
        free(a->plan.stages);
        free(a->plan.strategy);
        memset(a, 0, sizeof *a);
        return false;
    }
    return framework_alt_finish(c, g, a);
}

bool rep_framework_alt(const PassCostCtx *c, const IrGraph *g, const PlanLayout *L, PassSearchAlt *a,
                       char *why, size_t wn)
{
    RepArch A;
    if (!rep_arch_read(g, &A, why, wn)) {
        memset(a, 0, sizeof *a);
        return false;
    }
    return rep_framework_alt_of(c, g, &A, L, a, why, wn);
}

bool rep_framework_alt_of(const PassCostCtx *c, const IrGraph *g, const RepArch *A, const PlanLayout *L,
                          PassSearchAlt *a, char *why, size_t wn)
{
    memset(a, 0, sizeof *a);
    if (!rep_plan_framework(g, A, L, c->attention, pass_cluster_domain(c->cl), &a->plan, why, wn)) {
        free(a->plan.stages);
        free(a->plan.strategy);
        memset(a, 0, sizeof *a);
        return false;
    }
    return framework_alt_finish(c, g, a);
}

/* Keep the faster of *best and the fitting alternative for layout l. */
static void consider(const PassCostCtx *c, const IrGraph *g, const RepArch *A, const PlanLayout *l,
                     PassSearchAlt *best, bool *have)
{
    char why[256];
    PassSearchAlt a;
    if (!rep_framework_alt_of(c, g, A, l, &a, why, sizeof why))
        return;
    if (a.pred.fits && (!*have || a.pred.step_time_s < best->pred.step_time_s)) {
        if (*have)
            pass_search_alt_free(best);
        *best = a;
        *have = true;
    } else {
        pass_search_alt_free(&a);
    }
}

bool rep_framework_relax(const PassCostCtx *c, const IrGraph *g, const PlanLayout *l0,
                         PassSearchAlt *out, char *what, size_t wn)
{
    const PassStack *st = &c->st;
    int64_t gb = plan_mb_seqs(l0->micro_batch, l0->dp) * l0->num_micro;
    bool have = false;
    RepArch A;
    char sub[256];
    if (!rep_arch_read(g, &A, sub, sizeof sub))
        return false;
    for (int i = 0; i < 4 && !have; i++) {
        PlanLayout l = *l0;
        switch (i) {
        case 0:
            snprintf(what, wn, "--recompute");
            for (int r = PLAN_RECOMPUTE_NONE; r <= PLAN_RECOMPUTE_FULL; r++)
                if (l0->recompute != 1u << r && pass_stack_has_recompute(st, r)) {
                    l.recompute = 1u << r;
                    consider(c, g, &A, &l, out, &have);
                }
            break;
        case 1:
            snprintf(what, wn, "--micro-batch");
            for (int64_t b = 1; b <= gb / l0->dp; b++) {
                if (b == l0->micro_batch || gb % (b * l0->dp))
                    continue;
                l.micro_batch = b;
                l.num_micro = (int)(gb / (b * l0->dp));
                if (l.v > 1 && l.num_micro % l.pp)
                    continue;
                consider(c, g, &A, &l, out, &have);
            }
            break;
        case 2:
            snprintf(what, wn, "--zero");
            for (int z = 0; z <= 3; z++)
                if (z != l0->zero && pass_stack_has_zero(st, z) && (z == 0 || l0->dp > 1)) {
                    l.zero = z;
                    consider(c, g, &A, &l, out, &have);
                }
            break;
        case 3:
            snprintf(what, wn, "--sp");
            if (l0->tp > 1 && !st->no_sp) {
                l.sp = !l0->sp;
                consider(c, g, &A, &l, out, &have);
            }
            break;
        }
    }
    return have;
}

bool rep_plan_matches_framework(const IrGraph *g, const RepArch *A, const PassSearchAlt *a, int gpn,
                                char *why, size_t wn)
{
    Plan f;
    if (!plan_framework(g, A, &a->layout, a->plan.attention, gpn, &a->plan, NULL, &f, why, wn))
        return false;
    bool ok = true;
    if (f.nstages != a->plan.nstages) {
        ok = rep_refuse(why, wn, "the plan has %d model chunks where the framework would make %d",
                    a->plan.nstages, f.nstages);
    } else {
        for (int s = 0; s < f.nstages && ok; s++)
            if (f.stages[s].first_piece != a->plan.stages[s].first_piece ||
                f.stages[s].npieces != a->plan.stages[s].npieces)
                ok = rep_refuse(why, wn, "stage %d of the plan runs pieces %d-%d, and the framework's even "
                            "split would give it %d-%d", s, a->plan.stages[s].first_piece,
                            a->plan.stages[s].first_piece + a->plan.stages[s].npieces - 1,
                            f.stages[s].first_piece, f.stages[s].first_piece + f.stages[s].npieces - 1);
    }
    for (int i = 0; i < g->nfwd && ok; i++)
        for (int x = 0; x < PLAN_MAX_AXES && ok; x++)
            if (x < a->plan.mesh.naxes && a->plan.mesh.size[x] > 1 &&
                f.strategy[i].dim[x] != a->plan.strategy[i].dim[x])
                ok = rep_refuse(why, wn, "the plan shards %s (%s:%d) differently from the framework's "
                            "tensor parallelism", g->tensors[g->nodes[i].out[0]].name,
                            g->nodes[i].loc.file ? g->nodes[i].loc.file : g->path, g->nodes[i].loc.line);
    free(f.stages);
    free(f.strategy);
    return ok;
}

/* What each precision of the plan runs in low precision (docs/stacks.md):
 * the layers' linear layers, as Transformer Engine's and torchao's linear
 * modules do; attention, the embedding, the norms and the head stay BF16. */
static const char *const prec_what[PLAN_NPREC] = {
    [PLAN_PREC_BF16] = NULL,
    [PLAN_PREC_FP8] = "FP8 (E4M3 forward, E5M2 gradients, per-tensor current scaling)",
    [PLAN_PREC_MXFP8] = "MXFP8 (E4M3, a scale per 32 elements)",
    [PLAN_PREC_NVFP4] = "NVFP4 (E2M1, a scale per 16 elements and one per tensor)",
};

bool rep_precision_gpu(const PassGpu *gpu, PlanPrecision p, const char *fw, char *why, size_t n)
{
    if ((p == PLAN_PREC_FP8 || p == PLAN_PREC_MXFP8) && !(gpu->peak_fp8_flops > 0))
        return rep_refuse(why, n, "the plan runs its linear layers in %s, and the %s has no FP8 tensor cores "
                          "(peak_fp8_tflops 0), which %s's FP8 needs (compute capability 8.9 or later)",
                          plan_precision_name(p), gpu->name, fw);
    if (p == PLAN_PREC_NVFP4 && !(gpu->peak_fp4_flops > 0))
        return rep_refuse(why, n, "the plan runs its linear layers in nvfp4, and the %s has no FP4 tensor cores "
                          "(peak_fp4_tflops 0), which %s's NVFP4 needs (Blackwell)", gpu->name, fw);
    return true;
}

void rep_emit_header(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a, const char *what)
{
    char lay[256];
    const PassPrediction *p = &a->pred;
    const double gib = 1073741824.0;
    fprintf(f, "# %s for %s (%s), from ptdc.\n", what, g->name, g->path);
    fprintf(f, "# Plan: %s.\n", plan_layout_str(&a->layout, lay, sizeof lay));
    fprintf(f, "# Predicted for the %s stack on %d x %s: step %.3f s, %.0f tokens/s, MFU %.1f%%,\n",
            c->st.name, a->layout.gpus, c->cl->gpu.name, p->step_time_s, p->tokens_per_s, 100 * p->mfu);
    fprintf(f, "#   peak %.1f GiB of %.1f GiB per GPU (pipeline rank %d).\n", p->peak_mem_bytes / gib,
            p->capacity_bytes / gib, p->peak_rank);
    /* BF16 plans say nothing, as before precision was a plan choice. */
    if (a->plan.precision != PLAN_PREC_BF16)
        fprintf(f, "# Precision: %s: %s in the\n"
                   "#   layers' linear layers; attention, the embedding, the norms and the head in BF16.\n",
                plan_precision_name(a->plan.precision), prec_what[a->plan.precision]);
}
