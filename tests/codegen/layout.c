/* layout.c: the test-only plan builder (see layout.h).
 *
 * Strategies: mesh axis 0 is data parallel (the batch dim, when dp > 1);
 * axis 1 is tensor parallel: each node splits the first of vocab, n_heads,
 * d_ff, n_kv_heads it has and can split (Megatron: vocabulary-parallel
 * embedding and cross-entropy, column-parallel q/k/v and up projections,
 * row-parallel o and down projections, heads-parallel attention). With
 * sequence parallelism the nodes without such a dim (norms, residual adds)
 * split the sequence instead. A node that can split nothing stays
 * replicated (e.g. 2 KV heads under tp4). MoE nodes split their experts as
 * the layout's ep/epf/epx/ex/epN item says (layout.h). With cp, axis 1 is context
 * parallel (every node carrying the sequence splits it there; attention its
 * heads with "a2a", the all-to-all form) and tp the last axis; with sp as well the norms and adds split each cp shard's
 * sequence over tp (nested, plan_seq_nested). Stages: pieces cut as evenly as possible into pp x v
 * contiguous chunks, chunk c on pipeline rank c % pp; or, with a "c2_1_3_1"
 * item, chunks of those many pieces (uneven stages). */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool layout_parse(const char *s, Layout *l)
{
    memset(l, 0, sizeof *l);
    l->dp = l->tp = l->pp = l->v = l->micro = l->cp = 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ",-"); tok; tok = strtok(NULL, ",-")) {
        int n;
        if (!strcmp(tok, "sp"))
            l->sp = true;
        else if (!strcmp(tok, "chunk"))
            l->chunk = true;
        else if (!strcmp(tok, "full"))
            l->recompute = PLAN_RECOMPUTE_FULL;
        else if (!strcmp(tok, "ffn"))
            l->recompute = PLAN_RECOMPUTE_FFN;
        else if (!strcmp(tok, "1rank"))
            ;
        else if (!strcmp(tok, "ep"))
            l->experts = LAYOUT_EXPERTS_EP;
        else if (!strcmp(tok, "epf"))
            l->experts = LAYOUT_EXPERTS_EPF;
        else if (!strcmp(tok, "epx"))
            l->experts = LAYOUT_EXPERTS_EPX;
        else if (!strcmp(tok, "ex"))
            l->experts = LAYOUT_EXPERTS_GATHER;
        else if (!strcmp(tok, "ring"))
            l->ring = true;
        else if (!strcmp(tok, "zb"))
            l->zb = true;
        else if (!strcmp(tok, "a2a"))
            l->a2a = true;
        else if (tok[0] == 'c' && tok[1] >= '1' && tok[1] <= '9') {
            for (char *q = tok + 1; *q && l->nsplit < 64;) {
                char *end;
                long k = strtol(q, &end, 10);
                if (end == q || k < 1 || (*end && *end != '_')) {
                    fprintf(stderr, "layout: bad chunk split '%s'\n", tok);
                    return false;
                }
                l->split[l->nsplit++] = (int)k;
                q = *end ? end + 1 : end;
            }
        } else if (tok[0] == 'l' && tok[1] >= '0' && tok[1] <= '9') {
            for (char *q = tok + 1; *q && l->nlayers < 64;) {
                char *end;
                long k = strtol(q, &end, 10);
                if (end == q || k < 0 || (*end && *end != '_')) {
                    fprintf(stderr, "layout: bad layer split '%s'\n", tok);
                    return false;
                }
                l->layers[l->nlayers++] = (int)k;
                q = *end ? end + 1 : end;
            }
        } else if (sscanf(tok, "ep%d", &n) == 1 && n > 1)
            l->ep_fold = n;
        else if (sscanf(tok, "dp%d", &n) == 1 && n > 0)
            l->dp = n;
        else if (sscanf(tok, "cp%d", &n) == 1 && n > 0)
            l->cp = n;
        else if (sscanf(tok, "tp%d", &n) == 1 && n > 0)
            l->tp = n;
        else if (sscanf(tok, "pp%d", &n) == 1 && n > 0)
            l->pp = n;
        else if (sscanf(tok, "v%d", &n) == 1 && n > 0)
            l->v = n;
        else if (sscanf(tok, "mb%d", &n) == 1 && n > 0)
            l->micro = n;
        else if (sscanf(tok, "zero%d", &n) == 1 && n >= 0 && n <= 3)
            l->zero = n;
        else if (sscanf(tok, "ws%d", &n) == 1 && n > 0)
            l->wslot_pct = n;
        else {
            fprintf(stderr, "layout: unknown item '%s'\n", tok);
            return false;
        }
    }
    return true;
}

static bool valid(const IrGraph *g, const IrNode *n, const PlanMesh *m, const int64_t *dim,
                  PlanStrategy s)
{
    PlanStrategy all[256];
    int k = plan_strategies(g, n, m, dim, NULL, all, 256);
    for (int i = 0; i < k; i++)
        if (all[i].dim[0] == s.dim[0] && all[i].dim[1] == s.dim[1] && all[i].dim[2] == s.dim[2] &&
            all[i].xchg == s.xchg)
            return true;
    return false;
}

/* A strategy splitting the batch over axes 0 and 1 (nested, epN): valid
 * when the same strategy without axis 1 is, and the micro-batch and (for
 * an exchange over axis 1, and tp's beside it) the experts divide over it
 * too. */
static bool valid_nested(const IrGraph *g, const IrNode *n, const PlanMesh *m, const int64_t *dim,
                         PlanStrategy s)
{
    if (s.dim[0] < 0 || s.dim[1] != s.dim[0] || !plan_batch_nested(g, n, m, s.dim[0], 0, 1))
        return valid(g, n, m, dim, s);
    int e = plan_expert_dim(g, n);
    int64_t ways = 1; /* the experts' split: the exchange axes from the inner dp factor on */
    for (int a = 1; a < m->naxes; a++)
        ways *= s.xchg >> a & 1 ? m->size[a] : 1;
    PlanStrategy t = s;
    t.dim[1] = -1;
    t.xchg = (uint16_t)(s.xchg & ~2u);
    return valid(g, n, m, dim, t) && dim[s.dim[0]] % ((int64_t)m->size[0] * m->size[1]) == 0 &&
           (!(s.xchg >> 1 & 1) || (e >= 0 && dim[e] % ways == 0));
}

bool layout_plan(const IrGraph *g, const Layout *l, Plan *p)
{
    memset(p, 0, sizeof *p);
    /* epN: N = dp_inner x tp (ETP 1); beside tp the mesh is dp_outer x
     * dp_inner x tp, the experts exchanged over the last two axes. */
    int fold = l->ep_fold && l->tp > 1 && l->ep_fold % l->tp == 0 ? l->ep_fold / l->tp : l->ep_fold;
    if (fold && (l->cp > 1 || (l->tp > 1 && l->ep_fold % l->tp) || fold < 2 || l->dp % fold ||
                 fold >= l->dp)) {
        fprintf(stderr, "layout: ep%d folds EP below DP: a divisor of dp %d below it, times tp %d, "
                "without cp\n", l->ep_fold, l->dp, l->tp);
        return false;
    }
    if (fold && l->tp > 1)
        plan_mesh_make_dims(&p->mesh, l->dp / fold, fold, l->tp, 8);
    else if (fold)
        plan_mesh_make(&p->mesh, l->dp / fold, fold, 8);
    else
        plan_mesh_make_dims(&p->mesh, l->dp, l->cp, l->tp, 8);
    p->pp = l->pp;
    p->v = l->v;
    p->nstages = l->pp * l->v;
    p->num_micro = l->micro;
    if (g->global_batch % l->micro) {
        fprintf(stderr, "layout: %d micro-batches do not divide the batch of %lld\n", l->micro,
                (long long)g->global_batch);
        return false;
    }
    p->mb_seqs = g->global_batch / l->micro;
    p->zero = l->zero;
    p->tp_overlap = l->chunk;
    p->moe_wslot = l->wslot_pct / 100.0;
    if (l->zb && l->v > 1) {
        fprintf(stderr, "layout: zb (ZB-H1) runs one chunk per pipeline rank, not v%d\n", l->v);
        return false;
    }
    p->schedule = l->zb ? PLAN_SCHED_ZB_H1 : l->v > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B;
    p->attention = PLAN_ATTN_FLASH;
    if (p->nstages > g->npieces) {
        fprintf(stderr, "layout: %d stages but only %d pieces\n", p->nstages, g->npieces);
        return false;
    }
    p->stages = ir_alloc(g->arena, sizeof *p->stages * (size_t)p->nstages);
    int total = 0;
    if (l->nlayers) {
        fprintf(stderr, "layout: a layer split (l...) is the planner's --pp-layers: search-... layouts only\n");
        return false;
    }
    for (int s = 0; s < l->nsplit; s++)
        total += l->split[s];
    if (l->nsplit && (l->nsplit != p->nstages || total != g->npieces)) {
        fprintf(stderr, "layout: a split of %d chunks and %d pieces for %d stages of %d pieces\n", l->nsplit,
                total, p->nstages, g->npieces);
        return false;
    }
    for (int s = 0, first = 0; s < p->nstages; s++) {
        int n = l->nsplit ? l->split[s] : g->npieces / p->nstages + (s < g->npieces % p->nstages);
        p->stages[s] = (PlanStage){first, n, s % p->pp, l->recompute};
        first += n;
    }
    int64_t *dim = ir_alloc(g->arena, sizeof *dim * (size_t)g->ndims);
    ir_dim_sizes(g, p->mb_seqs, dim);
    p->strategy = ir_alloc(g->arena, sizeof *p->strategy * (size_t)(g->nfwd + 1));
    /* m_groups: Mamba-2 heads by group, each rank its groups' B, C and gated-norm weights */
    static const char *const tp_dims[] = {"vocab", "n_heads", "d_ff", "n_kv_heads", "m_groups", NULL};
    int tp_axis = p->mesh.naxes - 1;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        PlanStrategy s = {PLAN_NO_DIMS, 0};
        if (l->dp > 1)
            s.dim[0] = (int16_t)g->batch_dim;
        if (fold && ir_node_has_dim(g, n, g->batch_dim))
            s.dim[1] = (int16_t)g->batch_dim; /* dp's inner factor */
        if (l->cp > 1 && ir_node_has_dim(g, n, g->seq_dim))
            s.dim[1] = (int16_t)g->seq_dim; /* attention: its queries; k, v gathered */
        if (l->cp > 1 && l->ring && n->op == IR_OP_ATTENTION)
            s.xchg = 1u << 1; /* ... or passed round the ring */
        if (l->cp > 1 && l->a2a && n->op == IR_OP_ATTENTION) /* ... or its heads, all-to-all */
            s.dim[1] = g->tensors[n->in[0]].dim[2], s.xchg = 1u << 1;
        if (l->tp > 1) {
            bool any = false;
            for (int k = 0; tp_dims[k]; k++) {
                int d = ir_dim_find(g, tp_dims[k]);
                if (d < 0 || !ir_node_has_dim(g, n, d))
                    continue;
                any = true;
                PlanStrategy t = s;
                t.dim[tp_axis] = (int16_t)d;
                if (valid(g, n, &p->mesh, dim, t)) {
                    s = t;
                    break;
                }
            }
            if (!any && l->sp) {
                PlanStrategy t = s;
                t.dim[tp_axis] = (int16_t)g->seq_dim;
                if (valid(g, n, &p->mesh, dim, t))
                    s = t;
            }
        }
        int e = plan_expert_dim(g, n);
        if (e >= 0 && fold && plan_routed_expert_dim(g, n) >= 0 && l->tp > 1)
            s.dim[tp_axis] = (int16_t)g->seq_dim, s.xchg = (uint16_t)(1u << 1 | 1u << tp_axis);
        else if (e >= 0 && fold && plan_routed_expert_dim(g, n) >= 0)
            s.xchg = 1u << 1;
        else if (e >= 0 && l->experts == LAYOUT_EXPERTS_EP && l->dp > 1)
            s.xchg = 1;
        else if (e >= 0 && l->experts == LAYOUT_EXPERTS_EPF && l->tp > 1)
            s.dim[tp_axis] = (int16_t)g->seq_dim, s.xchg = (uint16_t)(1u << tp_axis);
        else if (e >= 0 && l->experts == LAYOUT_EXPERTS_EPX && l->tp > 1 && l->dp > 1)
            s.dim[tp_axis] = (int16_t)g->seq_dim, s.xchg = (uint16_t)(1u | 1u << tp_axis);
        else if (e >= 0 && l->experts == LAYOUT_EXPERTS_GATHER && l->tp > 1)
            s.dim[tp_axis] = (int16_t)e;
        if (!valid_nested(g, n, &p->mesh, dim, s)) {
            fprintf(stderr, "layout: no valid strategy for node %d (%s)\n", i, ir_ops[n->op].name);
            return false;
        }
        p->strategy[i] = s;
    }
    plan_axes(g, p);
    return true;
}
