/* plan_arch.c: the model as the frameworks describe one. Megatron-LM's GPT
 * and torchtitan's llama3 are configured by a handful of numbers and
 * switches (layers, hidden size, heads, norm, activation, biases, positions,
 * tied embeddings); ptdc's model is an operator graph. This reads those
 * numbers back from the graph, and refuses with a sentence any graph that is
 * not a decoder of identical pre-norm layers they could build: what a
 * framework cannot express is said here, before any flag is printed. */
#include "plan/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const pass_arch_what[PASS_NARCH] = {
#define ARCH(ID, what) [PASS_ARCH_##ID] = what,
#include "plan/arch.def"
#undef ARCH
};

bool pass_refuse(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return false;
}

static bool is_param(const IrGraph *g, int t) { return g->tensors[t].role == IR_PARAM; }

static int64_t dsize(const IrGraph *g, int d) { return g->dims[d].size; }

/* The single forward consumer of t inside piece p, or -1 (none or several). */
static int only_consumer(const IrGraph *g, int t, int p)
{
    int c[8], n = ir_consumers(g, t, c, 8), hit = -1;
    if (n > 8)
        return -1;
    for (int i = 0; i < n; i++) {
        if (g->nodes[c[i]].piece != p)
            continue;
        if (hit >= 0)
            return -1;
        hit = c[i];
    }
    return hit;
}

/* The consumer of t inside piece p that is a norm (-1: none), and how
 * many there are. */
static int norm_consumer(const IrGraph *g, int t, int p, int *count)
{
    int c[8], n = ir_consumers(g, t, c, 8), hit = -1;
    *count = 0;
    for (int i = 0; i < n && i < 8; i++) {
        const IrNode *x = &g->nodes[c[i]];
        if (x->piece != p || (x->op != IR_OP_RMSNORM && x->op != IR_OP_LAYERNORM))
            continue;
        if (hit < 0)
            hit = c[i];
        (*count)++;
    }
    return hit;
}

/* An activation's producer, stepping over `+ bias` (an ADD with a
 * parameter); *bias counts the biases stepped over. */
static const IrNode *through_bias(const IrGraph *g, int t, int *bias)
{
    const IrNode *n = g->tensors[t].producer >= 0 ? &g->nodes[g->tensors[t].producer] : NULL;
    if (n && n->op == IR_OP_ADD && (is_param(g, n->in[0]) || is_param(g, n->in[1]))) {
        (*bias)++;
        int x = is_param(g, n->in[0]) ? n->in[1] : n->in[0];
        n = g->tensors[x].producer >= 0 ? &g->nodes[g->tensors[x].producer] : NULL;
    }
    return n;
}

/* The weight of a projection x @ W, or -1 if n is not one reading x. */
static int proj_weight(const IrGraph *g, const IrNode *n, int x)
{
    if (!n || n->op != IR_OP_MATMUL || n->in[0] != x || !is_param(g, n->in[1]))
        return -1;
    return n->in[1];
}

static const char *opname(const IrNode *n) { return ir_ops[n->op].name; }

static bool read_embedding(const IrGraph *g, PassArch *A, char *why, size_t wn, int *x_out)
{
    const IrPiece *P = &g->pieces[0];
    int emb = -1, pos = -1;
    for (int i = P->first; i < P->first + P->count; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op == IR_OP_EMBEDDING && emb < 0 && is_param(g, n->in[1]))
            emb = i;
        else if (n->op == IR_OP_ADD && pos < 0 && emb >= 0 && (is_param(g, n->in[0]) || is_param(g, n->in[1])))
            pos = i;
        else
            return pass_refuse(why, wn, "its embedding piece computes %s (line %d), where the frameworks "
                          "have a token table and at most a learned position table added to it",
                          opname(n), n->loc.line);
    }
    if (emb < 0)
        return pass_refuse(why, wn, "it has no token embedding before its layers");
    const IrNode *E = &g->nodes[emb];
    const IrTensor *table = &g->tensors[E->in[1]];
    if (table->rank != 2)
        return pass_refuse(why, wn, "its token table %s is not a [vocab, d_model] matrix", table->name);
    A->vocab_dim = table->dim[0];
    A->vocab = dsize(g, table->dim[0]);
    A->d_model = dsize(g, table->dim[1]);
    A->table = E->in[1];
    A->bf16 = table->dtype == IR_BF16;
    *x_out = E->out[0];
    if (pos >= 0) {
        const IrNode *n = &g->nodes[pos];
        int w = is_param(g, n->in[0]) ? n->in[0] : n->in[1];
        const IrTensor *W = &g->tensors[w];
        if (W->rank != 2 || W->dim[0] != g->seq_dim || dsize(g, W->dim[1]) != A->d_model)
            return pass_refuse(why, wn, "its embedding adds %s, which is not a [seq, d_model] position table",
                          W->name);
        A->learned_pos = true;
        *x_out = n->out[0];
    }
    return true;
}

/* One layer: pre-norm attention, then a pre-norm MLP, each added to the
 * residual stream. x is the layer's input. */
static bool read_layer(const IrGraph *g, int p, int x, PassArch *A, char *why, size_t wn)
{
    const IrPiece *P = &g->pieces[p];
    int counts[IR_NUM_OPS] = {0};
    for (int i = P->first; i < P->first + P->count; i++)
        counts[g->nodes[i].op]++;
    for (int op = 0; op < IR_NUM_OPS; op++)
        if (counts[op] && op != IR_OP_RMSNORM && op != IR_OP_LAYERNORM && op != IR_OP_MATMUL &&
            op != IR_OP_ROPE && op != IR_OP_ATTENTION && op != IR_OP_SILU && op != IR_OP_GELU &&
            op != IR_OP_SWIGLU && op != IR_OP_ADD && op != IR_OP_MUL)
            return pass_refuse(why, wn, "its layers compute %s, which a Megatron-LM or torchtitan decoder "
                          "layer does not", ir_ops[op].name);
    if (counts[IR_OP_ATTENTION] != 1)
        return pass_refuse(why, wn, "its layers have %d attention operators; the frameworks' layers have one",
                      counts[IR_OP_ATTENTION]);

    /* Attention: norm -> q, k, v projections (+ bias) (-> rope) -> attention
     * -> output projection (+ bias) -> residual add. */
    int nnorms, n1 = norm_consumer(g, x, p, &nnorms);
    if (nnorms > 1)
        return pass_refuse(why, wn, "its attention and MLP both normalise the layer's input (a parallel "
                      "block); the frameworks' layers run the MLP on the attention's output");
    const IrNode *N1 = n1 >= 0 ? &g->nodes[n1] : NULL;
    if (!N1 || (N1->op != IR_OP_RMSNORM && N1->op != IR_OP_LAYERNORM))
        return pass_refuse(why, wn, "its layers do not begin with a norm read by the attention "
                      "(the frameworks' layers are pre-norm)");
    A->rmsnorm = N1->op == IR_OP_RMSNORM;
    int h = N1->out[0];
    const IrNode *At = NULL;
    for (int i = P->first; i < P->first + P->count; i++)
        if (g->nodes[i].op == IR_OP_ATTENTION)
            At = &g->nodes[i];
    int bias = 0, ropes = 0, rope_mask = 0;
    int wqkv[3];
    for (int j = 0; j < 3; j++) {
        int b = 0;
        const IrNode *n = through_bias(g, At->in[j], &b);
        if (n && n->op == IR_OP_ROPE) {
            ropes++;
            rope_mask |= 1 << j;
            n = through_bias(g, n->in[0], &b);
        }
        bias += b;
        wqkv[j] = proj_weight(g, n, h);
        if (wqkv[j] < 0)
            return pass_refuse(why, wn, "the %s of its attention is not a projection of the attention norm's "
                          "output", j == 0 ? "query" : j == 1 ? "key" : "value");
    }
    const IrTensor *q = &g->tensors[At->in[0]], *k = &g->tensors[At->in[1]];
    if (q->rank != 4 || k->rank != 4)
        return pass_refuse(why, wn, "its attention's query and key are not [batch, seq, heads, head_dim]");
    A->heads_dim = q->dim[2];
    A->kv_dim = k->dim[2];
    A->heads = dsize(g, q->dim[2]);
    A->kv_heads = dsize(g, k->dim[2]);
    A->head_dim = dsize(g, q->dim[3]);
    A->head_dim_dim = q->dim[3];
    if (rope_mask == 3) { /* query and key rotated, value not: its attributes are read below */
        A->rope = true;
    } else if (ropes != 0) {
        return pass_refuse(why, wn, "its rotary embedding is applied to the %s; the frameworks rotate the "
                      "query and the key", rope_mask == 1 ? "query only" : rope_mask == 2 ? "key only"
                      : "value");
    }
    int qkv_bias = bias;
    A->init_std = g->tensors[wqkv[0]].init_std;

    int wo_n = only_consumer(g, At->out[0], p);
    int wo = wo_n >= 0 ? proj_weight(g, &g->nodes[wo_n], At->out[0]) : -1;
    if (wo < 0)
        return pass_refuse(why, wn, "its attention's output is not projected by one weight");
    int t = g->nodes[wo_n].out[0], out_bias = 0;
    int c = only_consumer(g, t, p);
    if (c >= 0 && g->nodes[c].op == IR_OP_ADD && is_param(g, g->nodes[c].in[0] == t ? g->nodes[c].in[1] : g->nodes[c].in[0])) {
        out_bias++;
        t = g->nodes[c].out[0];
        c = only_consumer(g, t, p);
    }
    const IrNode *R1 = c >= 0 ? &g->nodes[c] : NULL;
    if (!R1 || R1->op != IR_OP_ADD || (R1->in[0] != x && R1->in[1] != x))
        return pass_refuse(why, wn, "its attention's output is not added to the layer's input (a residual "
                      "connection)");
    int xm = R1->out[0];

    /* MLP: norm -> (gate, up | fc) (+ bias) -> silu * up, swiglu | gelu -> down (+
     * bias) -> residual add. The norm must read the attention's sum: a norm
     * on the layer input would be a parallel block (PaLM), which neither
     * framework builds. */
    const IrNode *N2 = NULL;
    int cs[8], nc = ir_consumers(g, xm, cs, 8);
    for (int i = 0; i < nc && i < 8; i++)
        if (g->nodes[cs[i]].op == IR_OP_RMSNORM || g->nodes[cs[i]].op == IR_OP_LAYERNORM)
            N2 = &g->nodes[cs[i]];
    if (!N2) {
        for (int i = P->first; i < P->first + P->count; i++)
            if (&g->nodes[i] != N1 && (g->nodes[i].op == IR_OP_RMSNORM || g->nodes[i].op == IR_OP_LAYERNORM) &&
                g->nodes[i].in[0] == x)
                return pass_refuse(why, wn, "its attention and MLP both read the layer's input (a parallel "
                              "block); the frameworks' layers run the MLP after the attention");
        return pass_refuse(why, wn, "its MLP is not a pre-norm block after the attention");
    }
    if ((N2->op == IR_OP_RMSNORM) != A->rmsnorm)
        return pass_refuse(why, wn, "its two norms differ in kind");
    int h2 = N2->out[0];
    int up[4], nup = 0;
    nc = ir_consumers(g, h2, cs, 8);
    for (int i = 0; i < nc && i < 8; i++) {
        int w = proj_weight(g, &g->nodes[cs[i]], h2);
        if (w < 0)
            return pass_refuse(why, wn, "its MLP norm's output feeds %s, not only projections",
                          opname(&g->nodes[cs[i]]));
        if (nup < 4)
            up[nup++] = cs[i];
    }
    int mlp_bias = 0;
    int64_t dff = -1;
    int ff_dim = -1;
    const IrNode *act = NULL;
    bool silu_mul = nup == 2 && counts[IR_OP_SILU] == 1 && counts[IR_OP_MUL] == 1 && counts[IR_OP_GELU] == 0;
    bool fused = nup == 2 && counts[IR_OP_SWIGLU] == 1 && counts[IR_OP_SILU] == 0 && counts[IR_OP_MUL] == 0 &&
                 counts[IR_OP_GELU] == 0;
    if (silu_mul || fused) {
        /* silu(h @ gate) * (h @ up), or swiglu(h @ gate, h @ up): the same MLP */
        const IrNode *m = NULL, *gate, *upp;
        for (int i = P->first; i < P->first + P->count; i++)
            if (g->nodes[i].op == (silu_mul ? IR_OP_MUL : IR_OP_SWIGLU))
                m = &g->nodes[i];
        int bg = 0, bu = 0;
        if (silu_mul) {
            int ba = 0;
            const IrNode *a = through_bias(g, m->in[0], &ba), *b = through_bias(g, m->in[1], &bu);
            if (b && b->op == IR_OP_SILU) {
                const IrNode *tmp = a;
                a = b, b = tmp;
                bu = ba;
            }
            if (!a || a->op != IR_OP_SILU || !b || b->op != IR_OP_MATMUL)
                return pass_refuse(why, wn, "its MLP multiplies something other than silu(gate) by up (SwiGLU)");
            gate = through_bias(g, a->in[0], &bg), upp = b;
        } else {
            gate = through_bias(g, m->in[0], &bg), upp = through_bias(g, m->in[1], &bu);
        }
        if (!gate || gate->op != IR_OP_MATMUL || gate->in[0] != h2 || !upp || upp->op != IR_OP_MATMUL ||
            upp->in[0] != h2)
            return pass_refuse(why, wn, "its MLP's gate and up are not projections of the MLP norm's output");
        mlp_bias += bg + bu;
        const IrTensor *W = &g->tensors[gate->in[1]];
        ff_dim = W->dim[W->rank - 1];
        dff = dsize(g, ff_dim);
        act = m;
        A->swiglu = true;
    } else if (nup == 1 && counts[IR_OP_GELU] == 1 && counts[IR_OP_SILU] == 0 && counts[IR_OP_MUL] == 0) {
        const IrNode *ge = NULL;
        for (int i = P->first; i < P->first + P->count; i++)
            if (g->nodes[i].op == IR_OP_GELU)
                ge = &g->nodes[i];
        int b = 0;
        const IrNode *fc = through_bias(g, ge->in[0], &b);
        if (fc != &g->nodes[up[0]])
            return pass_refuse(why, wn, "its MLP's GELU does not read the first projection");
        mlp_bias += b;
        const IrTensor *W = &g->tensors[fc->in[1]];
        ff_dim = W->dim[W->rank - 1];
        dff = dsize(g, ff_dim);
        act = ge;
        A->swiglu = false;
    } else {
        return pass_refuse(why, wn, "its MLP is neither SwiGLU (swiglu(gate, up) or silu(gate) * up) nor GELU; Megatron-LM "
                      "offers those (torchtitan's llama3 only SwiGLU)");
    }
    int dn = only_consumer(g, act->out[0], p);
    int wd = dn >= 0 ? proj_weight(g, &g->nodes[dn], act->out[0]) : -1;
    if (wd < 0)
        return pass_refuse(why, wn, "its MLP's activation is not projected back by one weight");
    t = g->nodes[dn].out[0];
    c = only_consumer(g, t, p);
    if (c >= 0 && g->nodes[c].op == IR_OP_ADD && is_param(g, g->nodes[c].in[0] == t ? g->nodes[c].in[1] : g->nodes[c].in[0])) {
        mlp_bias++;
        t = g->nodes[c].out[0];
        c = only_consumer(g, t, p);
    }
    const IrNode *R2 = c >= 0 ? &g->nodes[c] : NULL;
    if (!R2 || R2->op != IR_OP_ADD || (R2->in[0] != xm && R2->in[1] != xm))
        return pass_refuse(why, wn, "its MLP's output is not added to the residual stream");
    A->ff_dim = ff_dim;
    A->d_ff = dff;
    /* Nothing else in the layer: every node is one of those above. */
    int expect = 2 /* norms */ + 4 + (A->swiglu ? 3 : 2) /* projections */ + ropes + 1 /* attention */ +
                 (A->swiglu && !counts[IR_OP_SWIGLU] ? 2 : 1) /* activation */ + 2 /* residuals */ + qkv_bias + out_bias + mlp_bias;
    if (P->count != expect)
        return pass_refuse(why, wn, "its layers compute %d operators besides those of a decoder layer",
                      P->count - expect);
    /* Biases: Megatron has them on every projection (its default), on none
     * (--disable-bias-linear) or on q, k, v only (--add-qkv-bias). */
    int nproj = 4 + (A->swiglu ? 3 : 2), all = qkv_bias + out_bias + mlp_bias;
    if (all == 0)
        A->bias_linear = A->bias_qkv = false;
    else if (all == nproj)
        A->bias_linear = A->bias_qkv = true;
    else if (all == 3 && qkv_bias == 3)
        A->bias_linear = false, A->bias_qkv = true;
    else
        return pass_refuse(why, wn, "%d of its %d projections %s a bias; the frameworks have one on all, "
                      "on none or on the query, key and value only", all, nproj, all == 1 ? "has" : "have");
    A->out = R2->out[0];
    return true;
}

static bool read_head(const IrGraph *g, int x, PassArch *A, char *why, size_t wn)
{
    int p = g->npieces - 1;
    const IrPiece *P = &g->pieces[p];
    int norm = only_consumer(g, x, p);
    const IrNode *N = norm >= 0 ? &g->nodes[norm] : NULL;
    if (!N || (N->op != IR_OP_RMSNORM && N->op != IR_OP_LAYERNORM) || (N->op == IR_OP_RMSNORM) != A->rmsnorm)
        return pass_refuse(why, wn, "its head does not begin with a final norm like the layers'");
    int mm = only_consumer(g, N->out[0], p);
    const IrNode *M = mm >= 0 ? &g->nodes[mm] : NULL;
    int w = proj_weight(g, M, N->out[0]);
    if (w < 0)
        return pass_refuse(why, wn, "its head does not project the final norm's output to the vocabulary");
    const IrTensor *W = &g->tensors[w];
    if (w == A->table) {
        A->tied = true;
    } else {
        if (W->rank != 2 || dsize(g, W->dim[0]) != A->d_model || W->dim[1] != A->vocab_dim)
            return pass_refuse(why, wn, "its LM head %s is not a [d_model, vocab] matrix", W->name);
        A->tied = false;
    }
    int ce = only_consumer(g, M->out[0], p);
    if (ce < 0 || g->nodes[ce].op != IR_OP_CROSS_ENTROPY)
        return pass_refuse(why, wn, "its logits do not go straight into the cross-entropy loss");
    if (P->count != 3)
        return pass_refuse(why, wn, "its head computes %d operators besides the norm, the LM head and the loss",
                      P->count - 3);
    return true;
}

/* Every attribute of every operator in the layers and the head, by the
 * table (ir/attrs.def), not by name: the frameworks configure one value per
 * attribute, so operators of one kind must agree on each. */
static bool read_attrs(const IrGraph *g, PassArch *A, char *why, size_t wn)
{
    int line[IR_NATTRS] = {0};
    for (int p = 1; p < g->npieces; p++) {
        const IrPiece *P = &g->pieces[p];
        for (int i = P->first; i < P->first + P->count; i++) {
            const IrNode *n = &g->nodes[i];
            for (int id = 0; id < IR_NATTRS; id++) {
                if (ir_attrs[id].op != n->op)
                    continue;
                double v = ir_attr_get(&n->attr, (IrAttrId)id);
                if (A->has_attr[id] && v != A->attr[id]) {
                    char a[64], b[64];
                    IrAttrs x = {0};
                    ir_attr_set(&x, (IrAttrId)id, A->attr[id]);
                    return pass_refuse(why, wn, "its %s operators differ in %s (%s at line %d, %s at line %d), "
                                  "where the frameworks configure one value", ir_ops[n->op].name,
                                  ir_attrs[id].name, ir_attr_str(g, &x, (IrAttrId)id, a, sizeof a), line[id],
                                  ir_attr_str(g, &n->attr, (IrAttrId)id, b, sizeof b), n->loc.line);
                }
                A->has_attr[id] = true;
                A->attr[id] = v;
                line[id] = n->loc.line;
            }
        }
    }
    return true;
}

bool pass_arch_read(const IrGraph *g, PassArch *A, char *why, size_t wn)
{
    memset(A, 0, sizeof *A);
    A->heads_dim = A->kv_dim = A->ff_dim = A->vocab_dim = A->head_dim_dim = -1;
    A->seq = g->seq_dim >= 0 ? dsize(g, g->seq_dim) : 0;
    int nrep = 0, rep = -1;
    for (int p = 0; p < g->npieces; p++)
        if (g->pieces[p].rep >= 0) {
            A->layers++;
            if (g->pieces[p].rep != rep)
                nrep++, rep = g->pieces[p].rep;
        }
    if (nrep != 1 || g->npieces != A->layers + 2 || g->pieces[0].rep >= 0 || g->pieces[g->npieces - 1].rep >= 0)
        return pass_refuse(why, wn, "the frameworks build one run of identical layers between the embedding "
                      "and the head, and %s has %d pieces in %d repeat%s", g->name, g->npieces, nrep,
                      nrep == 1 ? "" : "s");
    int x = -1;
    if (!read_embedding(g, A, why, wn, &x))
        return false;
    for (int p = 1; p <= A->layers; p++) {
        PassArch L = *A;
        if (!read_layer(g, p, x, &L, why, wn))
            return false;
        if (p == 1)
            *A = L;
        x = L.out;
    }
    if (!read_head(g, x, A, why, wn))
        return false;
    return read_attrs(g, A, why, wn);
}
