/* ilp_lower.c: a pipeline stage as instances, links and uses (the IlpSeg
 * that ilp_merge.c shrinks and ilp_build.c prices).
 *
 * Instances: the first piece of each repeat in the stage stands for every
 * piece of that repeat (nodes matched by IrNode.tmpl), so one instance is
 * one operator of one distinct piece kind, with the count of nodes it stands
 * for. Every physical read of an activation is counted onto a link between
 * instances. A tensor that a repeat's node makes and another piece reads (a
 * layer's output) goes through a boundary instance: the producer's output is
 * resharded to the boundary's sharding, the readers read from it. That is how
 * consecutive layers agree: layer i's output and layer i+1's input both meet
 * the one boundary sharding. Tensors made outside the stage also enter
 * through a boundary. A use collects the links of one physical tensor from
 * one source, so that ilp_build.c can price work they share once. */
#include "ilp/ilp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROW(arr, n, cap)                                                          \
    do {                                                                           \
        if ((n) == (cap)) {                                                        \
            (cap) = (cap) ? 2 * (cap) : 16;                                        \
            (arr) = ir_xrealloc((arr), (size_t)(cap) * sizeof *(arr));             \
        }                                                                          \
    } while (0)

#define MAX_STRAT 512

static int new_inst(IlpSeg *s, int node, int tensor)
{
    GROW(s->inst, s->ninst, s->capi);
    IlpInst *x = &s->inst[s->ninst];
    memset(x, 0, sizeof *x);
    x->node = node;
    x->tensor = tensor;
    x->group = s->ninst;
    return s->ninst++;
}

/* MOE node n's strategies the --ep and --etp pins allow (q->ep_axes,
 * etp_axes): the axis splitting the expert dim (plainly or by exchange;
 * PASS_ILP_EP_ACROSS: exchanged over several axes) and the one splitting
 * d_expert. */
static unsigned moe_axis_bit(const PlanStrategy *s, const PlanMesh *m, int d, bool xchg)
{
    int across = 0;
    for (int a = 0; xchg && a < m->naxes; a++)
        across += m->size[a] > 1 && (s->xchg >> a & 1);
    if (across > 1)
        return PASS_ILP_EP_ACROSS;
    for (int a = 0; a < m->naxes; a++)
        if (m->size[a] > 1 && (s->dim[a] == d || (xchg && (s->xchg >> a & 1))))
            return 2u << a;
    return 1;
}

static int expert_pins(const IrGraph *g, const IrNode *n, const PassIlpQuery *q, PlanStrategy *s, int k)
{
    int e = plan_routed_expert_dim(g, n);
    if (e < 0 || (!q->ep_axes && !q->etp_axes))
        return k;
    int f = g->tensors[n->in[2]].dim[2], j = 0;
    for (int i = 0; i < k; i++)
        if ((!q->ep_axes || (q->ep_axes & moe_axis_bit(&s[i], &q->mesh, e, true))) &&
            (!q->etp_axes || (q->etp_axes & moe_axis_bit(&s[i], &q->mesh, f, false))))
            s[j++] = s[i];
    if (j == 0)
        ir_die("ilp: --ep/--etp leave node %d no strategy (search_pins.c should have refused)", n->id);
    return j;
}

/* The CP form PTDC_CP_FORM keeps (gather, ring, a2a; unset: all three, the
 * ILP choosing by cost): a debug pin, to price each form of one layout
 * (docs/context.md). */
static int cp_form_pin(void)
{
    const char *e = getenv("PTDC_CP_FORM");
    if (!e || !*e)
        return -1;
    static const char *const names[] = {"gather", "ring", "a2a"};
    for (int f = 0; f < 3; f++)
        if (!strcmp(e, names[f]))
            return f;
    fprintf(stderr, "ptdc: error: PTDC_CP_FORM=%s: the context-parallel form is gather, ring or a2a\n", e);
    exit(1); /* bad input, not an internal error */
}

/* Attention splits its query sequence (context parallelism) only over the
 * axes the query names (cp_axes). */
static int cp_pins(const IrGraph *g, const IrNode *n, const PassIlpQuery *q, PlanStrategy *s, int k)
{
    int j = 0, form = cp_form_pin();
    for (int i = 0; i < k; i++) {
        int a = plan_cp_axis(g, n, &s[i]);
        int f = plan_cp_a2a(g, n, &s[i]) >= 0 ? 2 : plan_cp_ring(g, n, &s[i]) ? 1 : 0;
        if (a < 0 || ((q->cp_axes >> a & 1) && (form < 0 || f == form)))
            s[j++] = s[i];
    }
    if (j == 0 && form >= 0) {
        fprintf(stderr, "ptdc: error: PTDC_CP_FORM=%s leaves attention node %d no strategy on this mesh (the a2a "
                "form needs the heads and key/value heads divisible by tp x cp)\n",
                getenv("PTDC_CP_FORM"), n->id);
        exit(1);
    }
    return j;
}

/* The shardings a boundary may carry for tensor t: per axis nothing or one of
 * t's dims the pins allow and the axis divides; no dim on two axes but the
 * nested sequence split (plan_seq_nested: the residual stream of Megatron's
 * sequence parallelism inside context parallelism). */
static void boundary_strategies(IlpSeg *s, IlpInst *x)
{
    const IrGraph *g = s->g;
    const IrTensor *t = &g->tensors[x->tensor];
    const PlanMesh *m = &s->q.mesh;
    const uint64_t *allow = s->q.allow[0] || s->q.allow[1] || s->q.allow[2] ? s->q.allow : NULL;
    int cand[PLAN_MAX_AXES][IR_MAX_RANK + 1], nc[PLAN_MAX_AXES];
    for (int a = 0; a < PLAN_MAX_AXES; a++) {
        nc[a] = 0;
        cand[a][nc[a]++] = -1;
        if (a >= m->naxes || m->size[a] <= 1)
            continue;
        for (int i = 0; i < t->rank; i++) {
            int d = t->dim[i];
            if (allow && d < 64 && !(allow[a] >> d & 1))
                continue;
            if (s->dim_size[d] % m->size[a] == 0 && s->dim_size[d] >= m->size[a])
                cand[a][nc[a]++] = d;
        }
    }
    x->strat = ir_xmalloc((size_t)(nc[0] * nc[1] * nc[2]) * sizeof *x->strat);
    x->nstrat = 0;
    bool fixed = s->q.fix_boundary;
    for (int a = 0; fixed && a < PLAN_MAX_AXES; a++) {
        int d = s->q.boundary.dim[a];
        if (d >= 0 && !ir_tensor_has_dim(g, x->tensor, d))
            fixed = false; /* the pinned sharding names dims this tensor lacks */
    }
    for (int i = 0; i < nc[0]; i++)
        for (int j = 0; j < nc[1]; j++)
            for (int l = 0; l < nc[2]; l++) {
                int d0 = cand[0][i], d1 = cand[1][j], d2 = cand[2][l];
                if ((d0 >= 0 && (d0 == d1 || d0 == d2)) ||
                    (d1 >= 0 && d1 == d2 && !plan_seq_nested(g, NULL, m, d1, 1, 2)))
                    continue;
                if (d1 >= 0 && d1 == d2 && s->dim_size[d1] % (m->size[1] * m->size[2]) != 0)
                    continue;
                if (fixed && (d0 != s->q.boundary.dim[0] || d1 != s->q.boundary.dim[1] ||
                              d2 != s->q.boundary.dim[2]))
                    continue;
                x->strat[x->nstrat++] = (PlanStrategy){{(int16_t)d0, (int16_t)d1, (int16_t)d2}, 0};
            }
    if (x->nstrat == 0)
        ir_die("ilp: the fixed boundary sharding does not fit tensor '%s' on this mesh",
               t->name);
    x->nstrat = plan_strategies_require(g, NULL, x->tensor, s->q.require, x->strat, x->nstrat);
}

/* A boundary instance, found by key: (rep, tmpl, out) for a repeat's output,
 * (-1, tensor, 0) for other tensors entering the stage. */
typedef struct {
    int a, b, c, inst;
} BKey;

static int boundary(IlpSeg *s, BKey **keys, int *nkeys, int *cap, int a, int b, int c, int tensor)
{
    for (int i = 0; i < *nkeys; i++)
        if ((*keys)[i].a == a && (*keys)[i].b == b && (*keys)[i].c == c)
            return (*keys)[i].inst;
    int x = new_inst(s, -1, tensor);
    boundary_strategies(s, &s->inst[x]);
    GROW(*keys, *nkeys, *cap);
    (*keys)[(*nkeys)++] = (BKey){a, b, c, x};
    return x;
}

static int link(IlpSeg *s, int src, int out, int dst, int in, int tensor, bool saver)
{
    for (int i = 0; i < s->nlinks; i++) {
        IlpLink *l = &s->link[i];
        if (l->src == src && l->out == out && l->dst == dst && l->in == in) {
            l->count++;
            return i;
        }
    }
    GROW(s->link, s->nlinks, s->capl);
    s->link[s->nlinks] = (IlpLink){src, out, dst, in, tensor, 1, saver, -1};
    return s->nlinks++;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Count one physical tensor read by exactly these links. */
static void use(IlpSeg *s, int *links, int n)
{
    if (n == 0)
        return;
    qsort(links, (size_t)n, sizeof *links, cmp_int);
    int k = 0;
    for (int i = 0; i < n; i++) /* one link may carry two reads (x * x): one use entry */
        if (i == 0 || links[i] != links[i - 1])
            links[k++] = links[i];
    for (int i = 0; i < s->nuses; i++) {
        IlpUse *u = &s->use[i];
        if (u->nlinks == k && memcmp(u->links, links, (size_t)k * sizeof *links) == 0) {
            u->count++;
            return;
        }
    }
    GROW(s->use, s->nuses, s->capu);
    IlpUse *u = &s->use[s->nuses++];
    u->nlinks = k;
    u->links = ir_xmalloc((size_t)k * sizeof *links);
    memcpy(u->links, links, (size_t)k * sizeof *links);
    u->count = 1;
}

static void check_query(const IrGraph *g, const PassIlpQuery *q)
{
    if (q->first_piece < 0 || q->npieces < 1 || q->first_piece + q->npieces > g->npieces)
        ir_die("ilp: pieces %d..%d of %d", q->first_piece, q->first_piece + q->npieces, g->npieces);
    if (q->mesh.naxes < 1 || q->mesh.naxes > PLAN_MAX_AXES || q->mesh.size[0] < 1 ||
        q->mesh.size[1] < 1 || (q->mesh.naxes == 1 && q->mesh.size[1] != 1))
        ir_die("ilp: malformed mesh");
    if (q->mb_seqs < 1 || q->num_micro < 1 || q->inflight < 0 || q->zero < 0 || q->zero > 3 ||
        q->budget < 0 || !(q->time_limit_s >= 0))
        ir_die("ilp: malformed query (mb_seqs %lld, num_micro %d, inflight %g, zero %d, budget %g)",
               (long long)q->mb_seqs, q->num_micro, q->inflight, q->zero, q->budget);
}

/* Does slot j of n read its tensor first (not in an earlier slot), a
 * tensor of the graph's? */
static bool first_read(const IrNode *n, int j, int ntensors)
{
    int t = n->in[j], k = 0;
    while (k < j && n->in[k] != t)
        k++;
    return k == j && t >= 0 && t < ntensors;
}

/* Every tensor's forward consumers, as ir_consumers lists them (by node,
 * a node reading it twice once): clist[cstart[t] .. cstart[t + 1]). One
 * pass over the nodes, where ir_consumers per tensor scanned every node
 * for each (1% of DeepSeek-V3's planning on 2048 A100s, 1,763 lowerings). */
void ilp_consumers(const IrGraph *g, int **cstart, int **clist)
{
    int *st = ir_xcalloc((size_t)g->ntensors + 2, sizeof *st);
    for (int i = 0; i < g->nfwd; i++)
        for (int j = 0; j < g->nodes[i].nin; j++)
            if (first_read(&g->nodes[i], j, g->ntensors))
                st[g->nodes[i].in[j] + 1]++;
    for (int t = 0; t < g->ntensors; t++)
        st[t + 1] += st[t];
    int *list = ir_xmalloc((size_t)(st[g->ntensors] + 1) * sizeof *list);
    int *fill = ir_xcalloc((size_t)g->ntensors + 1, sizeof *fill);
    for (int i = 0; i < g->nfwd; i++)
        for (int j = 0; j < g->nodes[i].nin; j++)
            if (first_read(&g->nodes[i], j, g->ntensors)) {
                int t = g->nodes[i].in[j];
                list[st[t] + fill[t]++] = i;
            }
    free(fill);
    *cstart = st;
    *clist = list;
}

IlpSeg *ilp_lower(const PassCostCtx *ctx, const PassIlpCosts *costs, const IrGraph *g,
                  const PassIlpQuery *q)
{
    check_query(g, q);
    IlpSeg *s = ir_xcalloc(1, sizeof *s);
    s->g = g;
    s->q = *q;
    s->ctx = ctx;
    s->costs = costs;
    s->dim_size = ir_xmalloc((size_t)g->ndims * sizeof *s->dim_size);
    ir_dim_sizes(g, q->mb_seqs, s->dim_size);
    int p0 = q->first_piece, p1 = q->first_piece + q->npieces;
    s->first_node = g->pieces[p0].first;
    s->end_node = g->pieces[p1 - 1].first + g->pieces[p1 - 1].count;
    if (s->end_node > g->nfwd || s->end_node <= s->first_node)
        ir_die("ilp: pieces %d..%d hold no forward nodes", p0, p1);
    int nn = s->end_node - s->first_node;
    s->inst_of = ir_xmalloc((size_t)nn * sizeof *s->inst_of);
    const uint64_t *allow = q->allow[0] || q->allow[1] || q->allow[2] ? q->allow : NULL;
    PlanStrategy buf[MAX_STRAT];

    /* Instances: one per node of each piece kind's first piece. */
    for (int p = p0; p < p1; p++) {
        const IrPiece *pc = &g->pieces[p];
        int rp = p;
        if (pc->rep >= 0)
            for (int r = p0; r < p; r++)
                if (g->pieces[r].rep == pc->rep) {
                    rp = r;
                    break;
                }
        const IrPiece *rpc = &g->pieces[rp];
        if (rpc->count != pc->count)
            ir_die("ilp: pieces '%s' and '%s' of one repeat differ in size", rpc->name, pc->name);
        for (int k = 0; k < pc->count; k++) {
            int n = pc->first + k, r = rpc->first + k;
            if (g->nodes[n].op != g->nodes[r].op || g->nodes[n].tmpl != g->nodes[r].tmpl)
                ir_die("ilp: node %d of '%s' does not match its template in '%s'", n, pc->name,
                       rpc->name);
            if (rp == p) {
                int x = new_inst(s, n, -1);
                IlpInst *in = &s->inst[x];
                in->nstrat = plan_strategies(g, &g->nodes[n], &q->mesh, s->dim_size, allow, buf,
                                             MAX_STRAT);
                in->nstrat = plan_strategies_require(g, &g->nodes[n], -1, q->require, buf,
                                                     in->nstrat);
                in->nstrat = expert_pins(g, &g->nodes[n], q, buf, in->nstrat);
                in->nstrat = cp_pins(g, &g->nodes[n], q, buf, in->nstrat);
                if (in->nstrat < 1)
                    ir_die("ilp: node %d has no strategy", n);
                in->strat = ir_xmalloc((size_t)in->nstrat * sizeof *in->strat);
                memcpy(in->strat, buf, (size_t)in->nstrat * sizeof *in->strat);
                in->recompute = pass_recomputed(ctx, g, &g->nodes[n], q->recompute);
                s->inst_of[n - s->first_node] = x;
            } else {
                s->inst_of[n - s->first_node] = s->inst_of[r - s->first_node];
            }
            s->inst[s->inst_of[n - s->first_node]].count++;
        }
    }

    /* Links and uses, one physical activation at a time. */
    BKey *keys = NULL;
    int nkeys = 0, capk = 0;
    int *side[2] = {NULL, NULL}, nside[2], capside = 0;
    int *cstart, *clist;
    ilp_consumers(g, &cstart, &clist);
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        int p = x->producer;
        if (x->role != IR_ACT || p < 0 || p >= g->nfwd)
            continue;
        const int *cons = &clist[cstart[t]];
        int ncons = cstart[t + 1] - cstart[t];
        if (ncons == 0)
            continue;
        bool p_in = p >= s->first_node && p < s->end_node;
        const IrNode *pn = &g->nodes[p];
        int rep = g->pieces[pn->piece].rep, o = 0;
        while (pn->out[o] != t)
            o++;
        bool read_in = false, read_across = false;
        for (int i = 0; i < ncons; i++) {
            bool in = cons[i] >= s->first_node && cons[i] < s->end_node;
            read_in |= in;
            read_across |= g->nodes[cons[i]].piece != pn->piece;
        }
        /* A repeat's output read by another piece (here or in a later stage)
         * is resharded to the boundary; so is anything from outside. */
        bool to_boundary = p_in && rep >= 0 && read_across;
        if (!read_in && !to_boundary)
            continue;
        int b = -1;
        if (to_boundary || !p_in)
            b = rep >= 0 ? boundary(s, &keys, &nkeys, &capk, rep, pn->tmpl, o, t)
                         : boundary(s, &keys, &nkeys, &capk, -1, t, 0, t);
        if (capside < ncons * IR_MAX_IN + 1) { /* a node may read t in several slots */
            capside = ncons * IR_MAX_IN + 1;
            side[0] = ir_xrealloc(side[0], (size_t)capside * sizeof *side[0]);
            side[1] = ir_xrealloc(side[1], (size_t)capside * sizeof *side[1]);
        }
        nside[0] = nside[1] = 0;
        for (int i = 0; i < ncons; i++) {
            int c = cons[i];
            if (c < s->first_node || c >= s->end_node)
                continue;
            const IrNode *cn = &g->nodes[c];
            bool via_b = !p_in || (rep >= 0 && cn->piece != pn->piece);
            for (int k = 0; k < cn->nin; k++) {
                if (cn->in[k] != t)
                    continue;
                /* The reader whose saved bytes count t, if any (the
                 * producer may keep it instead). */
                bool sv = costs->keeps_input(ctx, g, cn, &q->mesh, s->dim_size, k, q->recompute);
                int dst = s->inst_of[c - s->first_node];
                if (via_b)
                    side[1][nside[1]++] = link(s, b, 0, dst, k, t, sv);
                else
                    side[0][nside[0]++] = link(s, s->inst_of[p - s->first_node], o, dst, k, t, sv);
            }
        }
        if (to_boundary)
            side[0][nside[0]++] = link(s, s->inst_of[p - s->first_node], o, b, 0, t, false);
        if (b >= 0)
            s->inst[b].count++;
        use(s, side[0], nside[0]);
        use(s, side[1], nside[1]);
    }
    free(keys);
    free(side[0]);
    free(side[1]);
    free(cstart);
    free(clist);
    return s;
}

void ilp_seg_free(IlpSeg *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->ninst; i++) {
        free(s->inst[i].strat);
        free(s->inst[i].gmap);
    }
    for (int i = 0; i < s->nuses; i++)
        free(s->use[i].links);
    free(s->inst);
    free(s->link);
    free(s->use);
    free(s->inst_of);
    free(s->group_of);
    free(s->dim_size);
    ilp_free(s->prob);
    free(s);
}
