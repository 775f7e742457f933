/* shard.c: the sharding algebra shared by the cost model, the ILP and codegen.
 * A node's strategy says which loop dim each mesh axis splits; from it follow
 * the shardings of its inputs, outputs and input gradients, and between a
 * producer and a consumer that disagree, the collectives that reconcile them. */
#include "plan.h"

#include <string.h>

const char *plan_coll_name(PlanCollKind k)
{
    switch (k) {
    case PLAN_COLL_NONE: return "none";
    case PLAN_COLL_ALLREDUCE: return "all-reduce";
    case PLAN_COLL_REDUCESCATTER: return "reduce-scatter";
    case PLAN_COLL_ALLGATHER: return "all-gather";
    case PLAN_COLL_ALLTOALL: return "all-to-all";
    case PLAN_COLL_SLICE: return "slice";
    case PLAN_COLL_SENDRECV: return "send/recv";
    }
    return "?";
}

bool plan_coll_reduces(PlanCollKind k) { return k == PLAN_COLL_ALLREDUCE || k == PLAN_COLL_REDUCESCATTER; }

int plan_mesh_devices(const PlanMesh *m)
{
    int n = 1;
    for (int a = 0; a < m->naxes; a++)
        n *= m->size[a];
    return n;
}

/* Sizes outermost first; trailing axes of size 1 are dropped (a dp-only
 * mesh is 1-D), inner ones kept (dp 1 x tp 4 is 2-D). */
static void mesh_make(PlanMesh *m, int naxes, const int *size, int gpn)
{
    memset(m, 0, sizeof *m);
    while (naxes > 1 && size[naxes - 1] == 1)
        naxes--;
    m->naxes = naxes;
    int stride = 1; /* ranks between neighbours along axis a */
    for (int a = naxes - 1; a >= 0; a--) {
        m->size[a] = size[a];
        /* A group along axis a is size[a] ranks `stride` apart: gpn / stride
         * of them share a node. */
        int share = stride >= gpn ? 1 : gpn / stride;
        if (share > size[a])
            share = size[a];
        m->per_node[a] = share;
        m->nodes[a] = (size[a] + share - 1) / share;
        stride *= size[a];
    }
    for (int a = naxes; a < PLAN_MAX_AXES; a++)
        m->size[a] = 1, m->per_node[a] = 1, m->nodes[a] = 1;
}

void plan_mesh_make(PlanMesh *m, int d0, int d1, int gpn)
{
    if (d0 < 1 || d1 < 1 || gpn < 1)
        ir_die("mesh %dx%d with %d GPUs per node", d0, d1, gpn);
    mesh_make(m, 2, (int[]){d0, d1}, gpn);
}

void plan_mesh_make_dims(PlanMesh *m, int dp, int cp, int tp, int gpn)
{
    if (dp < 1 || cp < 1 || tp < 1 || gpn < 1)
        ir_die("mesh dp %d x cp %d x tp %d with %d GPUs per node", dp, cp, tp, gpn);
    if (cp == 1)
        plan_mesh_make(m, dp, tp, gpn);
    else
        mesh_make(m, 3, (int[]){dp, cp, tp}, gpn);
}

void plan_mesh_dims_axes(int cp, int tp, int *dp_axis, int *cp_axis, int *tp_axis)
{
    *dp_axis = 0;
    *cp_axis = cp > 1 ? 1 : -1;
    *tp_axis = tp > 1 ? (cp > 1 ? 2 : 1) : -1;
}

/* The forward node a (possibly backward) node takes its rules from. */
static const IrNode *fwd_of(const IrGraph *g, const IrNode *n)
{
    return n->fwd >= 0 ? &g->nodes[n->fwd] : n;
}

static bool in_tensor(const IrGraph *g, int t, int d) { return ir_tensor_has_dim(g, t, d); }

/* PlanSharding.hi_outer is kept only on an axis sharing its dim with a lower
 * axis, so equal layouts compare equal. */
static void canon(PlanSharding *sh)
{
    for (int a = 0; a < PLAN_MAX_AXES; a++) {
        bool shared = false;
        for (int b = 0; b < a; b++)
            shared |= sh->dim[a] >= 0 && sh->dim[b] == sh->dim[a];
        if (!shared)
            sh->hi_outer &= (uint8_t)~(1u << a);
    }
}

bool plan_axis_outside(const PlanSharding *sh, int b, int a)
{
    if (a == b)
        return false;
    return b > a ? (sh->hi_outer >> b & 1) : !(sh->hi_outer >> a & 1);
}

/* Make axis a (splitting its dim in sh) the innermost level of that dim. */
static void nest_innermost(PlanSharding *sh, int a)
{
    for (int b = 0; b < PLAN_MAX_AXES; b++) {
        if (b == a || sh->dim[b] < 0 || sh->dim[b] != sh->dim[a])
            continue;
        if (b < a)
            sh->hi_outer &= (uint8_t)~(1u << a);
        else
            sh->hi_outer |= (uint8_t)(1u << b);
    }
    canon(sh);
}

PlanSharding plan_sharding_after(const PlanSharding *sh, const PlanColl *c)
{
    PlanSharding r = *sh;
    int a = c->axis;
    switch (c->kind) {
    case PLAN_COLL_ALLREDUCE: r.partial &= (uint8_t)~(1u << a); break;
    case PLAN_COLL_REDUCESCATTER:
        r.partial &= (uint8_t)~(1u << a);
        r.dim[a] = (int16_t)c->dim;
        nest_innermost(&r, a);
        break;
    case PLAN_COLL_ALLGATHER:
        r.dim[a] = -1;
        canon(&r);
        break;
    case PLAN_COLL_ALLTOALL:
        r.dim[a] = (int16_t)c->dim2;
        nest_innermost(&r, a);
        break;
    case PLAN_COLL_SLICE:
        r.dim[a] = (int16_t)c->dim;
        nest_innermost(&r, a);
        break;
    default: break;
    }
    return r;
}

/* A strategy's nesting order: an exchange axis splitting a dim that another,
 * higher axis splits too sits inside it (attention's heads dealt out over cp
 * inside tp's block). The batch folded over dp (plan_batch_nested, the
 * exchange on the higher axis) keeps the default. */
static uint8_t strategy_order(const PlanStrategy *s)
{
    uint8_t o = 0;
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        for (int b = a + 1; (s->xchg >> a & 1) && b < PLAN_MAX_AXES; b++)
            if (s->dim[a] >= 0 && s->dim[b] == s->dim[a])
                o |= (uint8_t)(1u << b);
    return o;
}

PlanSharding plan_shard_loop(const PlanStrategy *s)
{
    PlanSharding sh = {{s->dim[0], s->dim[1], s->dim[2]}, 0, strategy_order(s)};
    canon(&sh);
    return sh;
}

/* A tensor's sharding under strategy s takes s's order where two axes
 * split the same dim of it (k, v: the KV heads carry the heads' split). */
static void take_order(PlanSharding *sh, const PlanStrategy *s)
{
    sh->hi_outer = strategy_order(s);
    canon(sh);
}

/* ATTENTION: splitting the query heads splits the kv heads on the same axis. */
static int kv_dim(const IrGraph *g, const IrNode *n, int heads)
{
    if (n->op != IR_OP_ATTENTION)
        return -1;
    const IrTensor *q = &g->tensors[n->in[0]], *k = &g->tensors[n->in[1]];
    return heads == q->dim[2] ? k->dim[2] : -1;
}

int plan_expert_dim(const IrGraph *g, const IrNode *node)
{
    const IrNode *n = fwd_of(g, node);
    return n->op == IR_OP_MOE ? g->tensors[n->in[2]].dim[0] : -1;
}

int plan_routed_expert_dim(const IrGraph *g, const IrNode *node)
{
    int e = plan_expert_dim(g, node);
    return e >= 0 && g->dims[e].size > 1 ? e : -1;
}

int plan_ep_degree(const IrGraph *g, const IrNode *n, const PlanMesh *m, const PlanStrategy *s)
{
    int ep = 1;
    if (plan_expert_dim(g, n) < 0)
        return 1;
    for (int a = 0; a < m->naxes; a++)
        if (s->xchg >> a & 1)
            ep *= m->size[a];
    return ep;
}

/* The dim axis a splits in tensor t of node n beyond the strategy's own:
 * the expert dim of an exchange split, in the tensors without tokens. */
static int xchg_dim(const IrGraph *g, const IrNode *n, const PlanStrategy *s, int a, int t)
{
    if (!(s->xchg >> a & 1))
        return -1;
    int e = plan_expert_dim(g, n);
    return e >= 0 && ir_tensor_has_dim(g, t, e) ? e : -1;
}

bool plan_dim_splittable(const IrGraph *g, const IrNode *node, int d)
{
    const IrNode *n = fwd_of(g, node);
    if (!ir_node_has_dim(g, n, d))
        return false;
    switch (n->op) {
    case IR_OP_RMSNORM:
    case IR_OP_LAYERNORM: {
        /* never the normalised dims; a group's dims split with its weights */
        const IrTensor *w = &g->tensors[n->in[1]];
        for (int i = n->op == IR_OP_RMSNORM ? (int)n->attr.group_dims : 0; i < w->rank; i++)
            if (w->dim[i] == d)
                return false;
        return true;
    }
    case IR_OP_ROPE:
        return d != n->attr.dim[1];        /* rotation pairs stay together */
    case IR_OP_ATTENTION: {
        const IrTensor *q = &g->tensors[n->in[0]];
        /* Batch, heads, and the query sequence: context parallelism, the
         * keys and values gathered whole (plan_cp_dim). */
        return d == q->dim[0] || d == q->dim[1] || d == q->dim[2];
    }
    case IR_OP_SOFTMAX:
        return d != n->attr.dim[0];
    case IR_OP_ROUTE: {
        /* Never the experts (top-k needs every score); the sequence only
         * when nothing counts over a whole sequence (capacity, aux). */
        const IrRoute *r = &n->attr.route;
        const IrTensor *x = &g->tensors[n->in[0]];
        if (d == x->dim[x->rank - 1])
            return false;
        return d != g->seq_dim || (r->capacity == 0 && r->aux == 0);
    }
    case IR_OP_MOE: {
        /* Tokens, experts and the experts' width; never d_model, which the
         * first GEMMs contract inside the nonlinearity. */
        const IrTensor *h = &g->tensors[n->in[0]];
        return d != h->dim[h->rank - 1];
    }
    case IR_OP_SIGMOID:
    case IR_OP_SOFTPLUS:
    case IR_OP_RELU2:
        return true;
    case IR_OP_CONV1D: {
        /* Batch and channels; never seq (a split would need the K - 1 rows
         * before each shard) nor the kernel dim. */
        const IrTensor *w = &g->tensors[n->in[1]];
        return d != g->seq_dim && d != w->dim[w->rank - 1];
    }
    case IR_OP_SSD: {
        /* Batch, heads (tensor parallelism: each rank's heads with their
         * groups' B and C, Megatron's Mamba TP) and the head dim; never seq
         * (the scan carries its state along it: context parallelism over a
         * scan needs a state exchange libptdrt does not have) nor the
         * state dim B and C contract with. */
        const IrTensor *B = &g->tensors[n->in[3]];
        return d != g->seq_dim && d != B->dim[B->rank - 1];
    }
    case IR_OP_SLICE:
    case IR_OP_CONCAT: {
        /* Never the last dims cut or joined; any other, b reading whole a
         * dim it is broadcast along (its gradient then partial there). */
        for (int i = 0; i < n->nin; i++) {
            const IrTensor *x = &g->tensors[n->in[i]];
            if (d == x->dim[x->rank - 1])
                return false;
        }
        return d != n->attr.dim[0];
    }
    case IR_OP_EMBEDDING:
    case IR_OP_MATMUL:
    case IR_OP_SILU:
    case IR_OP_GELU:
    case IR_OP_SWIGLU:
    case IR_OP_ADD:
    case IR_OP_MUL:
    case IR_OP_CROSS_ENTROPY:
    case IR_OP_SHIFT: /* read from the data per rank: any block, no halo to fetch */
        return true;
    default:
        return false;
    }
}

/* Sequence parallelism inside context parallelism (Megatron's --sp with
 * --context-parallel-size): on a dp x cp x tp mesh an op that treats the
 * sequence's rows alike (no positions, no whole-sequence reductions) may
 * split the sequence over the cp axis and, inside each cp shard, over the tp
 * axis. A dim split over several axes is nested in axis order, outer first:
 * rank (c, t) holds the t-th of tp contiguous pieces of cp shard c, itself
 * the rows plan_cp_chunks gives rank c (both load-balanced chunks, in that
 * order), so an all-gather over tp yields the cp-local sequence and one over
 * cp after it the whole sequence in the program's row order. plan_reshard
 * keeps the nesting: it gathers or reduce-scatters a dim only over its
 * innermost splitting axis. Embedding, rope, attention, the loss and routing
 * place rows by position, so they stay on the cp axis alone, and so does an
 * op reading a parameter along the sequence (GPT's position table: a
 * parameter is stored split one axis per dim). */
bool plan_seq_nested(const IrGraph *g, const IrNode *node, const PlanMesh *m, int d, int outer, int inner)
{
    if (d < 0 || d != g->seq_dim || m->naxes != 3 || outer != 1 || inner != 2)
        return false;
    if (!node)
        return true; /* a boundary tensor: only a layout */
    const IrNode *n = fwd_of(g, node);
    for (int i = 0; i < n->nin; i++)
        if (g->tensors[n->in[i]].role == IR_PARAM && in_tensor(g, n->in[i], d))
            return false; /* a learned position table: parameters split one axis per dim */
    switch (n->op) {
    case IR_OP_RMSNORM:
    case IR_OP_LAYERNORM:
    case IR_OP_ADD:
    case IR_OP_MUL:
    case IR_OP_SILU:
    case IR_OP_GELU:
    case IR_OP_SWIGLU:
    case IR_OP_SIGMOID:
    case IR_OP_SOFTPLUS:
    case IR_OP_RELU2:
    case IR_OP_MATMUL:
    case IR_OP_SLICE:
    case IR_OP_CONCAT:
        return true;
    default:
        return false;
    }
}

bool plan_batch_nested(const IrGraph *g, const IrNode *node, const PlanMesh *m, int d, int outer, int inner)
{
    (void)node;
    return d >= 0 && d == g->batch_dim && outer == 0 && inner == 1 && m->naxes >= 2;
}

/* Loop dims of a node in a stable order (inputs' dims, then outputs'). */
static int loop_dims(const IrGraph *g, const IrNode *n, int *dims)
{
    int k = 0;
    for (int pass = 0; pass < 2; pass++) {
        int cnt = pass == 0 ? n->nin : n->nout;
        const int *ts = pass == 0 ? n->in : n->out;
        for (int i = 0; i < cnt; i++) {
            const IrTensor *t = &g->tensors[ts[i]];
            for (int j = 0; j < t->rank; j++) {
                bool seen = false;
                for (int e = 0; e < k; e++)
                    seen |= dims[e] == t->dim[j];
                if (!seen)
                    dims[k++] = t->dim[j];
            }
        }
    }
    return k;
}

static bool split_ok(const IrGraph *g, const IrNode *n, int d, int ways, const int64_t *dim_size)
{
    if (ways <= 1 || dim_size[d] % ways != 0 || dim_size[d] < ways)
        return false;
    int kv = kv_dim(g, n, d);
    if (kv >= 0 && kv != d && dim_size[kv] % ways != 0)
        return false; /* fewer KV heads than ways: refuse rather than compute wrongly */
    return true;
}

/* Attention's heads split over a dp x cp x tp mesh's cp and tp axes, tp
 * outer (Megatron's a2a beside tp: the q projection leaves tp rank t heads
 * block t, the all-to-all over cp deals that block out): only as the
 * all-to-all form, the heads and the KV heads dividing tp x cp (split_ok:
 * Transformer Engine asserts the heads per tp rank divide by cp). */
static bool heads_nested(const IrGraph *g, const IrNode *n, const PlanMesh *m, const PlanStrategy *st,
                         const int64_t *dim_size)
{
    if (n->op != IR_OP_ATTENTION || m->naxes != 3 || m->size[1] < 2 || m->size[2] < 2)
        return false;
    const IrTensor *q = &g->tensors[n->in[0]];
    int h = q->dim[2];
    return st->dim[1] == h && st->dim[2] == h && st->dim[0] != h && st->dim[0] != q->dim[1] &&
           (!dim_size || split_ok(g, n, h, m->size[1] * m->size[2], dim_size));
}

/* The axis strategy st could run attention's all-to-all CP form over, or
 * -1: it splits the heads on the innermost axis of more than one rank, and
 * no axis splits the query sequence; or it splits them over cp and tp
 * (heads_nested), the all-to-all over cp, inside tp's block. */
static int a2a_axis(const IrGraph *g, const IrNode *n, const PlanMesh *m, const PlanStrategy *st)
{
    if (n->op != IR_OP_ATTENTION)
        return -1;
    const IrTensor *q = &g->tensors[n->in[0]];
    int inner = -1;
    for (int a = 0; a < m->naxes; a++) {
        if (m->size[a] > 1)
            inner = a;
        if (st->dim[a] == q->dim[1])
            return -1;
    }
    if (heads_nested(g, n, m, st, NULL))
        return 1;
    return inner >= 0 && st->dim[inner] == q->dim[2] ? inner : -1;
}

int plan_strategies(const IrGraph *g, const IrNode *n, const PlanMesh *m, const int64_t *dim_size,
                    const uint64_t *allow, PlanStrategy *out, int max)
{
    int dims[4 * IR_MAX_RANK + 4], nd = loop_dims(g, n, dims);
    int cand[PLAN_MAX_AXES][4 * IR_MAX_RANK + 5], nc[PLAN_MAX_AXES];
    for (int a = 0; a < PLAN_MAX_AXES; a++) {
        nc[a] = 0;
        cand[a][nc[a]++] = -1;
        if (a >= m->naxes)
            continue;
        for (int i = 0; i < nd; i++) {
            int d = dims[i];
            if (allow && d < 64 && !(allow[a] >> d & 1))
                continue;
            if (plan_dim_splittable(g, n, d) && split_ok(g, n, d, m->size[a], dim_size))
                cand[a][nc[a]++] = d;
        }
    }
    /* Every combination of one candidate per axis, no dim on two axes but
     * the nested sequence split (plan_seq_nested). */
    int k = 0, e = plan_expert_dim(g, n), pick[PLAN_MAX_AXES] = {0};
    const IrTensor *h = &g->tensors[n->in[0]];
    for (;;) {
        PlanStrategy st = {PLAN_NO_DIMS, 0};
        bool ok = true;
        for (int a = 0; a < PLAN_MAX_AXES; a++)
            st.dim[a] = (int16_t)cand[a][pick[a]];
        bool heads = heads_nested(g, n, m, &st, dim_size);
        for (int a = 0; a < PLAN_MAX_AXES; a++)
            for (int b = 0; b < a; b++)
                ok &= st.dim[a] < 0 || st.dim[a] != st.dim[b] || (heads && b == 1 && a == 2) ||
                      (plan_seq_nested(g, n, m, st.dim[a], b, a) &&
                       dim_size[st.dim[a]] % (m->size[a] * m->size[b]) == 0);
        if (ok && heads) {
            /* Nested heads: the all-to-all form alone (a2a_axis gives 1). */
            if (k < max)
                out[k] = (PlanStrategy){{st.dim[0], st.dim[1], st.dim[2]}, 2u};
            k++;
        } else if (ok) {
            if (k < max)
                out[k] = st;
            k++;
            /* Context parallelism's ring: k and v stay split, their blocks
             * travelling the cp ranks inside the op (docs/context.md). */
            int ca = plan_cp_axis(g, n, &st);
            if (ca >= 0) {
                if (k < max)
                    out[k] = (PlanStrategy){{st.dim[0], st.dim[1], st.dim[2]}, (uint16_t)(1u << ca)};
                k++;
            }
            /* The all-to-all form: the heads split over the innermost axis,
             * the sequence nowhere; the ILP keeps it only on a cp axis
             * (cp_pins). With tp > 1 the heads are tp's: the form is the
             * nested split above, cp inside tp. */
            int ha = a2a_axis(g, n, m, &st);
            if (ha >= 0) {
                if (k < max)
                    out[k] = (PlanStrategy){{st.dim[0], st.dim[1], st.dim[2]}, (uint16_t)(1u << ha)};
                k++;
            }
            /* An exchange split on axis a: the tokens split there, the
             * experts too (docs/moe.md), unless another axis splits them.
             * `single` collects the axes that can; together (every subset
             * of two or more whose product divides the experts) they make
             * one exchange over their product group, the experts nested in
             * axis order (Megatron-Core's parallel folding with ETP 1: EP
             * across dp x tp, EP rank = dp rank x tp + tp rank). */
            unsigned single = 0;
            for (int a = 0; e >= 0 && a < m->naxes; a++) {
                int da = st.dim[a];
                bool other = false;
                for (int b = 0; b < PLAN_MAX_AXES; b++)
                    other |= b != a && st.dim[b] == e;
                if (da < 0 || !ir_tensor_has_dim(g, n->in[0], da) || da == h->dim[h->rank - 1] ||
                    other || (allow && e < 64 && !(allow[a] >> e & 1)))
                    continue;
                if (!plan_dim_splittable(g, n, e) || !split_ok(g, n, e, m->size[a], dim_size))
                    continue;
                if (k < max)
                    out[k] = (PlanStrategy){{st.dim[0], st.dim[1], st.dim[2]}, (uint16_t)(1u << a)};
                k++;
                single |= 1u << a;
            }
            for (unsigned x = 3; x <= single; x++) {
                if ((x & single) != x || !(x & (x - 1)))
                    continue;
                int ways = 1;
                for (int a = 0; a < m->naxes; a++)
                    ways *= x >> a & 1 ? m->size[a] : 1;
                if (!split_ok(g, n, e, ways, dim_size))
                    continue;
                if (k < max)
                    out[k] = (PlanStrategy){{st.dim[0], st.dim[1], st.dim[2]}, (uint16_t)x};
                k++;
            }
        }
        int a = PLAN_MAX_AXES - 1;
        while (a >= 0 && ++pick[a] == nc[a])
            pick[a--] = 0;
        if (a < 0)
            break;
    }
    return k < max ? k : max;
}

/* Does node n read a parameter; if d >= 0, one that carries dim d? */
static bool reads_param(const IrGraph *g, const IrNode *n, int d)
{
    for (int i = 0; i < n->nin; i++)
        if (g->tensors[n->in[i]].role == IR_PARAM && (d < 0 || in_tensor(g, n->in[i], d)))
            return true;
    return false;
}

/* Does strategy st meet requirement bit r for node n (or boundary tensor t)?
 * Returns -1 where the requirement does not apply to this node. */
static int meets(const IrGraph *g, const IrNode *n, int t, unsigned req, unsigned r,
                 const PlanStrategy *st)
{
    int tp = req & PLAN_REQ_CP ? 2 : 1;
    switch (r) {
    case PLAN_REQ_BATCH:
        if (n ? !ir_node_has_dim(g, n, g->batch_dim) : !in_tensor(g, t, g->batch_dim))
            return -1;
        return st->dim[0] == g->batch_dim;
    case PLAN_REQ_WEIGHTS:
        if (!n || (n->op != IR_OP_MATMUL && n->op != IR_OP_EMBEDDING) || !reads_param(g, n, -1))
            return -1;
        return st->dim[tp] >= 0 && reads_param(g, n, st->dim[tp]); /* the weight itself is split */
    case PLAN_REQ_SEQ_NORMS:
        if (!n || (n->op != IR_OP_RMSNORM && n->op != IR_OP_LAYERNORM))
            return -1;
        return st->dim[tp] == g->seq_dim;
    case PLAN_REQ_CP:
        if (g->seq_dim < 0 || (n ? !ir_node_has_dim(g, n, g->seq_dim) : !in_tensor(g, t, g->seq_dim)))
            return -1;
        /* ... attention's query sequence, or its heads in the all-to-all form. */
        return st->dim[1] == g->seq_dim || (n && plan_cp_a2a(g, n, st) == 1);
    }
    return -1;
}

int plan_strategies_require(const IrGraph *g, const IrNode *n, int t, unsigned req,
                            PlanStrategy *s, int k)
{
    for (unsigned r = 1; r <= PLAN_REQ_CP; r <<= 1) {
        if (!(req & r))
            continue;
        int keep = 0;
        for (int i = 0; i < k; i++)
            keep += meets(g, n, t, req, r, &s[i]) == 1;
        if (keep == 0)
            continue; /* not applicable, or impossible here (indivisible dims) */
        int j = 0;
        for (int i = 0; i < k; i++)
            if (meets(g, n, t, req, r, &s[i]) == 1)
                s[j++] = s[i];
        k = j;
    }
    return k;
}

bool plan_cp_split(const IrGraph *g, const IrNode *node, int d)
{
    const IrNode *n = fwd_of(g, node);
    return n->op == IR_OP_ATTENTION && d >= 0 && d == g->tensors[n->in[0]].dim[1];
}

int plan_cp_a2a(const IrGraph *g, const IrNode *node, const PlanStrategy *s)
{
    const IrNode *n = fwd_of(g, node);
    if (n->op != IR_OP_ATTENTION)
        return -1;
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        if ((s->xchg >> a & 1) && s->dim[a] >= 0 && s->dim[a] == g->tensors[n->in[0]].dim[2])
            return a;
    return -1;
}

int plan_cp_axis(const IrGraph *g, const IrNode *n, const PlanStrategy *s)
{
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        if (plan_cp_split(g, n, s->dim[a]))
            return a;
    return plan_cp_a2a(g, n, s);
}

bool plan_cp_ring(const IrGraph *g, const IrNode *n, const PlanStrategy *s)
{
    int a = plan_cp_axis(g, n, s);
    return a >= 0 && plan_cp_split(g, n, s->dim[a]) && (s->xchg >> a & 1);
}

/* Context parallelism: attention split on the query sequence over axis a
 * reads its keys and values (forward node n's inputs 1, 2) whole there,
 * unless they travel the ring inside the op (the exchange bit). */
static bool cp_whole(const IrGraph *g, const IrNode *n, const PlanStrategy *s, int a, int t)
{
    return plan_cp_split(g, n, s->dim[a]) && !(s->xchg >> a & 1) && (t == n->in[1] || t == n->in[2]);
}

/* Which dim of tensor t carries loop dim d of node n, or -1. */
static int carrier(const IrGraph *g, const IrNode *n, int t, int d)
{
    if (d < 0)
        return -1;
    if (in_tensor(g, t, d))
        return d;
    int kv = kv_dim(g, n, d);
    if (kv >= 0 && in_tensor(g, t, kv))
        return kv;
    return -1;
}

PlanSharding plan_shard_of(const IrGraph *g, int t, const PlanStrategy *s)
{
    PlanSharding sh = {PLAN_NO_DIMS, 0, 0};
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        if (s->dim[a] >= 0 && in_tensor(g, t, s->dim[a]))
            sh.dim[a] = s->dim[a];
    take_order(&sh, s);
    return sh;
}

void plan_shard_io(const IrGraph *g, const IrNode *node, const PlanStrategy *s, PlanSharding *in,
                   PlanSharding *out)
{
    const IrNode *n = fwd_of(g, node);
    /* (the search asks this millions of times: the order once, and an axis
     * that splits nothing and exchanges nothing left unsplit at once) */
    uint8_t order = strategy_order(s);
    for (int i = 0; in && i < node->nin; i++) {
        in[i] = (PlanSharding){PLAN_NO_DIMS, 0, 0};
        for (int a = 0; a < PLAN_MAX_AXES; a++) {
            if (s->dim[a] < 0 && !(s->xchg >> a & 1))
                continue;
            int c = cp_whole(g, n, s, a, node->in[i]) ? -1 : carrier(g, n, node->in[i], s->dim[a]);
            in[i].dim[a] = (int16_t)(c >= 0 ? c : xchg_dim(g, n, s, a, node->in[i]));
        }
        in[i].hi_outer = order;
        canon(&in[i]);
    }
    for (int i = 0; out && i < node->nout; i++) {
        out[i] = (PlanSharding){PLAN_NO_DIMS, 0, 0};
        for (int a = 0; a < PLAN_MAX_AXES; a++) {
            int d = s->dim[a];
            if (d < 0)
                continue;
            int c = carrier(g, n, node->out[i], d);
            if (c < 0)
                c = xchg_dim(g, n, s, a, node->out[i]); /* an expert's complete gradient */
            if (node != n && plan_cp_split(g, n, d) && !(s->xchg >> a & 1) && (i == 1 || i == 2))
                c = -1; /* dk, dv: every rank's queries add to every key's */
            if (c >= 0) {
                out[i].dim[a] = (int16_t)c;
                continue;
            }
            /* A split dim the output lacks was reduced over: partial sums,
             * except where the op reduces across the group itself
             * (vocabulary-parallel cross-entropy). */
            if (n->op == IR_OP_CROSS_ENTROPY && node == n &&
                d == g->tensors[n->in[0]].dim[g->tensors[n->in[0]].rank - 1])
                continue;
            out[i].partial |= (uint8_t)(1u << a);
        }
        out[i].hi_outer = order;
        canon(&out[i]);
    }
}

PlanSharding plan_shard_grad_in(const IrGraph *g, const IrNode *node, const PlanStrategy *s, int i)
{
    const IrNode *n = fwd_of(g, node);
    PlanSharding sh = {PLAN_NO_DIMS, 0, 0};
    for (int a = 0; a < PLAN_MAX_AXES; a++) {
        int d = s->dim[a];
        if (d < 0)
            continue;
        int c = cp_whole(g, n, s, a, n->in[i]) ? -1 : carrier(g, n, n->in[i], d);
        if (c < 0)
            c = xchg_dim(g, n, s, a, n->in[i]);
        if (c >= 0)
            sh.dim[a] = (int16_t)c;
        else
            sh.partial |= (uint8_t)(1u << a);
    }
    take_order(&sh, s);
    return sh;
}

void plan_local_sizes(const IrGraph *g, const IrNode *n, const PlanMesh *m, const PlanStrategy *s,
                      const int64_t *dim_size, int64_t *local)
{
    for (int d = 0; d < g->ndims; d++)
        local[d] = dim_size[d];
    for (int a = 0; a < m->naxes; a++) {
        int d = s->dim[a];
        if (d < 0)
            continue;
        local[d] /= m->size[a]; /* a nested split divides again */
        int kv = n ? kv_dim(g, fwd_of(g, n), d) : -1;
        if (kv >= 0 && kv != d)
            local[kv] /= m->size[a];
    }
    int e = n ? plan_expert_dim(g, n) : -1;
    for (int a = 0; a < m->naxes && e >= 0; a++)
        if (s->xchg >> a & 1)
            local[e] /= m->size[a];
}

int64_t plan_local_numel(const IrGraph *g, int t, const PlanMesh *m, const PlanSharding *sh,
                         const int64_t *dim_size)
{
    int64_t n = ir_numel(g, t, dim_size);
    for (int a = 0; a < m->naxes; a++)
        if (sh->dim[a] >= 0)
            n /= m->size[a];
    return n;
}

bool plan_sharding_eq(const PlanSharding *a, const PlanSharding *b)
{
    return a->dim[0] == b->dim[0] && a->dim[1] == b->dim[1] && a->dim[2] == b->dim[2] &&
           a->partial == b->partial && a->hi_outer == b->hi_outer;
}

/* The axes (bits) other than `axis` splitting d in sh. */
static unsigned axes_of(const PlanSharding *sh, int d, int axis)
{
    unsigned m = 0;
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        if (a != axis && d >= 0 && sh->dim[a] == d)
            m |= 1u << a;
    return m;
}

/* ... of those, the ones outside `axis` in sh's order (sh splits d over
 * axis, or will: the order of the sharding it is headed for). */
static unsigned outside_of(const PlanSharding *sh, int d, int axis)
{
    unsigned m = 0;
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        if ((axes_of(sh, d, axis) >> a & 1) && plan_axis_outside(sh, a, axis))
            m |= 1u << a;
    return m;
}

/* Nesting: does an axis inside `axis` split d in sh? A dim is gathered
 * only at its innermost level. */
static bool split_inside(const PlanSharding *sh, int d, int axis)
{
    return (axes_of(sh, d, axis) & ~outside_of(sh, d, axis)) != 0;
}

/* ... may axis split d in place in cur on the way to `to` (reduce-scatter,
 * slice, the target of an all-to-all)? Only where the axes splitting d in
 * cur are exactly those outside it in `to`: it becomes cur's innermost
 * level of d, its pieces pieces of the same outer shard in both (levels
 * inside it in `to` are sliced after). With at most two axes on a dim the
 * sets decide the order too. */
static bool splits_inner(const PlanSharding *cur, const PlanSharding *to, int d, int axis)
{
    return axes_of(cur, d, axis) == outside_of(to, d, axis);
}

/* ... may cur keep axis's split of d that `to` has too: the same axes
 * outside it in both. */
static bool same_outside(const PlanSharding *cur, const PlanSharding *to, int d, int axis)
{
    return outside_of(cur, d, axis) == outside_of(to, d, axis);
}

PlanSharding plan_reshard_reduced(const IrGraph *g, int t, const PlanMesh *m, PlanSharding from,
                                  const PlanSharding *to, const int64_t *dim_size)
{
    PlanColl steps[8];
    int n = plan_reshard(g, t, m, &from, to, dim_size, steps, 8);
    for (int k = 0; k < n; k++)
        if (plan_coll_reduces(steps[k].kind))
            from = plan_sharding_after(&from, &steps[k]);
    return from;
}

int plan_reshard(const IrGraph *g, int t, const PlanMesh *m, const PlanSharding *from,
                 const PlanSharding *to, const int64_t *dim_size, PlanColl *steps, int max)
{
    /* nothing to move (the passes below would find no step): the floors
     * and the ILP price every pair of layouts, the diagonal too */
    if (plan_sharding_eq(from, to))
        return 0;
    PlanSharding cur = *from;
    int64_t local = plan_local_numel(g, t, m, &cur, dim_size);
    int k = 0;
#define STEP(kind_, a_, d_, d2_, numel_)                                                      \
    do {                                                                                      \
        PlanColl s_ = {kind_, a_, d_, d2_, numel_};                                           \
        if (k < max)                                                                          \
            steps[k] = s_;                                                                    \
        k++;                                                                                  \
        cur = plan_sharding_after(&cur, &s_);                                                 \
    } while (0)
    if (to->partial & ~from->partial)
        ir_die("reshard of '%s' into a partial sum it does not hold", g->tensors[t].name);
    /* 1. Partial sums: reduce-scatter straight into the wanted split when the
     * axis is otherwise free, else all-reduce. */
    for (int a = 0; a < m->naxes; a++) {
        if (!(cur.partial >> a & 1) || (to->partial >> a & 1))
            continue;
        int d = to->dim[a];
        /* Straight into the split when no other axis splits d or, nested,
         * when a becomes d's innermost axis under the outer split the
         * target keeps. */
        if (d >= 0 && cur.dim[a] < 0 && splits_inner(&cur, to, d, a)) {
            STEP(PLAN_COLL_REDUCESCATTER, a, d, -1, local);
            local /= m->size[a];
        } else {
            STEP(PLAN_COLL_ALLREDUCE, a, -1, -1, local);
        }
    }
    /* 2. Splits that must go: all-to-all into the wanted split when possible.
     * A split nested inside another of the same dim goes first, and one the
     * target keeps goes too when an axis outside it changes (the slices of
     * step 3 cut outer levels first): passes repeat until nothing moves; a
     * plan without nested splits finishes in the first. An all-to-all turns
     * a's split into the innermost level of a dim other axes split already
     * only where the target orders it so (PlanSharding.hi_outer: the heads
     * dealt out over cp inside tp's block); into the sequence nested over cp
     * and tp the gather and slice stay, as every plan had them. */
    for (bool moved = true; moved;) {
        moved = false;
        for (int a = 0; a < m->naxes; a++) {
            int d = cur.dim[a];
            if (d < 0 || (d == to->dim[a] && same_outside(&cur, to, d, a)))
                continue;
            if (split_inside(&cur, d, a))
                continue; /* the inner axis first (a later pass comes back) */
            moved = true;
            int want = to->dim[a];
            bool into = want >= 0 && want != d &&
                        (axes_of(&cur, want, a) == 0 || (to->hi_outer & axes_of(to, want, a))) &&
                        splits_inner(&cur, to, want, a);
            if (into) {
                STEP(PLAN_COLL_ALLTOALL, a, d, want, local);
            } else {
                STEP(PLAN_COLL_ALLGATHER, a, d, -1, local * m->size[a]);
                local *= m->size[a];
            }
        }
    }
    /* 3. Splits that must appear: a local slice, no traffic, outer levels
     * first (in axis order unless the target orders a dim otherwise). */
    for (bool moved = true; moved;) {
        moved = false;
        for (int a = 0; a < m->naxes; a++) {
            if (cur.dim[a] >= 0 || to->dim[a] < 0 || !splits_inner(&cur, to, to->dim[a], a))
                continue;
            STEP(PLAN_COLL_SLICE, a, to->dim[a], -1, local);
            local /= m->size[a];
            moved = true;
        }
    }
#undef STEP
    if (!plan_sharding_eq(&cur, to))
        ir_die("reshard of '%s' did not reach its target", g->tensors[t].name);
    return k < max ? k : max;
}

const char *plan_sharding_str(const IrGraph *g, int t, const PlanSharding *sh,
                              const char *const *axis_names, char *buf, size_t n)
{
    const IrTensor *x = &g->tensors[t];
    size_t k = (size_t)snprintf(buf, n, "%s[", x->base);
    for (int i = 0; i < x->rank && k < n; i++) {
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", g->dims[x->dim[i]].name);
        int ax[PLAN_MAX_AXES], na = 0; /* outer levels first */
        for (int a = 0; a < PLAN_MAX_AXES; a++)
            if (sh->dim[a] == x->dim[i]) {
                int j = na++;
                for (; j > 0 && plan_axis_outside(sh, a, ax[j - 1]); j--)
                    ax[j] = ax[j - 1];
                ax[j] = a;
            }
        for (int j = 0; j < na && k < n; j++)
            k += (size_t)snprintf(buf + k, n - k, "/%s", axis_names[ax[j]]);
    }
    if (k < n)
        k += (size_t)snprintf(buf + k, n - k, "]");
    for (int a = 0; a < PLAN_MAX_AXES && k < n; a++)
        if (sh->partial >> a & 1)
            k += (size_t)snprintf(buf + k, n - k, " (partial over %s)", axis_names[a]);
    return buf;
}
