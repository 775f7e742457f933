/* plan_arch.c: the model as the frameworks describe one. Megatron-LM's GPT
 * and torchtitan's llama3 are configured by a handful of numbers and
 * switches (layers, hidden size, heads, norm, activation, biases, positions,
 * tied embeddings); ptdc's model is an operator graph. This reads those
 * numbers back from the graph, and refuses with a sentence any graph that is
 * not a decoder of pre-norm layers they could build (alike but for dense
 * and MoE MLPs): what a framework cannot express is said here, before any
 * flag is printed. */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* A refusal, here at the bottom of the framework files (plan_frame.c and the
 * emitters call it too). */
bool rep_refuse(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return false;
}

const char *const rep_arch_what[REP_NARCH] = {
#define ARCH(ID, what) [REP_ARCH_##ID] = what,
#include "arch.def"
#undef ARCH
};

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

static bool read_embedding(const IrGraph *g, RepArch *A, char *why, size_t wn, int *x_out)
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
            return rep_refuse(why, wn, "its embedding piece computes %s (line %d), where the frameworks "
                          "have a token table and at most a learned position table added to it",
                          opname(n), n->loc.line);
    }
    if (emb < 0)
        return rep_refuse(why, wn, "it has no token embedding before its layers");
    const IrNode *E = &g->nodes[emb];
    const IrTensor *table = &g->tensors[E->in[1]];
    if (table->rank != 2)
        return rep_refuse(why, wn, "its token table %s is not a [vocab, d_model] matrix", table->name);
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
            return rep_refuse(why, wn, "its embedding adds %s, which is not a [seq, d_model] position table",
                          W->name);
        A->learned_pos = true;
        *x_out = n->out[0];
    }
    return true;
}

/* What the walk over one layer has found so far (read_layer's steps). */
typedef struct LayerWalk {
    int p;                        /* the layer's piece */
    int counts[IR_NUM_OPS];       /* its operators by kind */
    int x;                        /* the layer's input */
    const IrNode *N1;             /* the attention's norm */
    int ropes;                    /* rotary embeddings applied */
    int mla_extra;                /* MLA's operators beyond q, k, v, o projections: slices,
                                     concats, the second latent projection */
    int qkv_bias, out_bias, mlp_bias, router_bias; /* biases stepped over */
    int down_bias;                /* the experts' down bias: matmul(gates, b_down) and its add (2) */
    int xm;                       /* the residual stream after the attention */
    int h2;                       /* the MLP norm's output */
    int up[4], nup;               /* the projections reading h2 */
    const IrNode *act;            /* the MLP's activation */
    const IrNode *moes[2];        /* the experts (MOE) reading h2: routed, maybe a gated shared one */
    int nmoe;
} LayerWalk;

/* t's single consumer in piece p, stepping over `+ bias` (counted in *bias):
 * where a projection's output goes. */
static int consumer_past_bias(const IrGraph *g, int t, int p, int *bias)
{
    int c = only_consumer(g, t, p);
    if (c >= 0 && g->nodes[c].op == IR_OP_ADD && is_param(g, g->nodes[c].in[0] == t ? g->nodes[c].in[1] : g->nodes[c].in[0])) {
        (*bias)++;
        c = only_consumer(g, g->nodes[c].out[0], p);
    }
    return c;
}

/* The layer's operators are all of the kinds a decoder layer has, with one
 * attention: refused early with the operator named. */
static bool layer_ops(const IrGraph *g, LayerWalk *L, char *why, size_t wn)
{
    const IrPiece *P = &g->pieces[L->p];
    for (int i = P->first; i < P->first + P->count; i++)
        L->counts[g->nodes[i].op]++;
    for (int op = 0; op < IR_NUM_OPS; op++)
        if (L->counts[op] && op != IR_OP_RMSNORM && op != IR_OP_LAYERNORM && op != IR_OP_MATMUL &&
            op != IR_OP_ROPE && op != IR_OP_ATTENTION && op != IR_OP_SILU && op != IR_OP_GELU &&
            op != IR_OP_SWIGLU && op != IR_OP_ADD && op != IR_OP_MUL && op != IR_OP_ROUTE && op != IR_OP_MOE &&
            op != IR_OP_SLICE && op != IR_OP_CONCAT)
            return rep_refuse(why, wn, "its layers compute %s, which a Megatron-LM or torchtitan decoder "
                          "layer does not", ir_ops[op].name);
    if (L->counts[IR_OP_ATTENTION] > 1)
        return rep_refuse(why, wn, "one piece of it holds %d layers (a repeat body of several layers, as one "
                          "period of a dense/MoE pattern), and ptdc reads the frameworks' layers one per piece",
                          L->counts[IR_OP_ATTENTION]);
    if (L->counts[IR_OP_ATTENTION] != 1)
        return rep_refuse(why, wn, "its layers have %d attention operators; the frameworks' layers have one",
                      L->counts[IR_OP_ATTENTION]);
    return true;
}

/* n if it is a node of kind op (NULL-safe). */
static const IrNode *is_op(const IrNode *n, IrOp op) { return n && n->op == op ? n : NULL; }

static const IrNode *producer_of(const IrGraph *g, int t)
{
    return g->tensors[t].producer >= 0 ? &g->nodes[g->tensors[t].producer] : NULL;
}

/* A latent norm rmsnorm(x, w) with w over x's last dim: its input, or -1. */
static int latent_norm(const IrGraph *g, const IrNode *n, const RepArch *A)
{
    if (!n || (n->op != IR_OP_RMSNORM && n->op != IR_OP_LAYERNORM) || (n->op == IR_OP_RMSNORM) != A->rmsnorm ||
        !is_param(g, n->in[1]) || g->tensors[n->in[1]].rank != 1)
        return -1;
    return n->in[0];
}

/* Multi-head latent attention as Megatron-Core's MLASelfAttention computes
 * it (multi_latent_attention.py; docs/language.md has the .mdl): q =
 * concat(slice(Q), rope(slice(Q))) with Q = norm(h Wqa) Wqb; k =
 * concat(slice(KV), rope(slice(KVA))) with KVA = h Wkva and KV =
 * norm(slice(KVA)) Wkvb; v = slice(KV). The latent norms are its
 * qk_layernorm; the sizes its --q-lora-rank --kv-lora-rank --qk-head-dim
 * --qk-pos-emb-head-dim --v-head-dim. */
static bool read_mla(const IrGraph *g, const IrNode *At, LayerWalk *L, RepArch *A, char *why, size_t wn)
{
    int h = L->N1->out[0];
    const char *bad = NULL;
    const IrNode *cq = is_op(producer_of(g, At->in[0]), IR_OP_CONCAT);
    const IrNode *ck = is_op(producer_of(g, At->in[1]), IR_OP_CONCAT);
    const IrNode *sv = is_op(producer_of(g, At->in[2]), IR_OP_SLICE);
    const IrNode *qn = cq ? is_op(producer_of(g, cq->in[0]), IR_OP_SLICE) : NULL;
    const IrNode *qr = cq ? is_op(producer_of(g, cq->in[1]), IR_OP_ROPE) : NULL;
    const IrNode *qrs = qr ? is_op(producer_of(g, qr->in[0]), IR_OP_SLICE) : NULL;
    const IrNode *kn = ck ? is_op(producer_of(g, ck->in[0]), IR_OP_SLICE) : NULL;
    const IrNode *kr = ck ? is_op(producer_of(g, ck->in[1]), IR_OP_ROPE) : NULL;
    const IrNode *krs = kr ? is_op(producer_of(g, kr->in[0]), IR_OP_SLICE) : NULL;
    if (!cq || !qn || !qrs || qn->in[0] != qrs->in[0] || qn->attr.at != 0 ||
        qrs->attr.at != g->dims[qn->attr.dim[0]].size)
        bad = "its query is not [slice | rope(slice)] of one projection";
    else if (!ck || !kn || !krs || !sv || kn->in[0] != sv->in[0] || kn->attr.at != 0 ||
             sv->attr.at != g->dims[kn->attr.dim[0]].size || kn->attr.dim[0] != qn->attr.dim[0] ||
             krs->attr.dim[0] != qrs->attr.dim[0])
        bad = "its key is not [slice of the value's projection | rope(slice)] with the query's sizes";
    if (bad)
        return rep_refuse(why, wn, "%s (multi-head latent attention as Megatron-Core builds it)", bad);
    /* Q = norm(h Wqa) Wqb; KV = norm(slice(KVA)) Wkvb; KVA = h Wkva. */
    const IrNode *qb = is_op(producer_of(g, qn->in[0]), IR_OP_MATMUL);
    int qlat = qb ? latent_norm(g, producer_of(g, qb->in[0]), A) : -1;
    const IrNode *qa = qlat >= 0 ? producer_of(g, qlat) : NULL;
    const IrNode *kvb = is_op(producer_of(g, kn->in[0]), IR_OP_MATMUL);
    int kvlat = kvb ? latent_norm(g, producer_of(g, kvb->in[0]), A) : -1;
    const IrNode *kvs = kvlat >= 0 ? is_op(producer_of(g, kvlat), IR_OP_SLICE) : NULL;
    const IrNode *kva = kvs ? producer_of(g, kvs->in[0]) : NULL;
    if (!qb || !is_param(g, qb->in[1]) || proj_weight(g, qa, h) < 0)
        return rep_refuse(why, wn, "its latent query is not norm(h Wqa) Wqb (Megatron-Core's MLA with "
                          "--q-lora-rank)");
    if (!kvb || !is_param(g, kvb->in[1]) || !kvs || kvs->attr.at != 0 || proj_weight(g, kva, h) < 0 ||
        krs->in[0] != kvs->in[0] || krs->attr.at != g->dims[kvs->attr.dim[0]].size)
        return rep_refuse(why, wn, "its keys and values are not norm(c_kv) Wkvb with [c_kv | k_rope] = h Wkva "
                          "(Megatron-Core's MLA)");
    const IrTensor *q = &g->tensors[At->in[0]], *k = &g->tensors[At->in[1]], *v = &g->tensors[At->in[2]];
    if (k->dim[2] != q->dim[2])
        return rep_refuse(why, wn, "its latent attention's keys have fewer heads than its queries");
    A->mla = true;
    A->q_lora = dsize(g, g->tensors[qlat].dim[g->tensors[qlat].rank - 1]);
    A->kv_lora = dsize(g, kvs->attr.dim[0]);
    A->qk_nope = dsize(g, qn->attr.dim[0]);
    A->qk_rope = dsize(g, qrs->attr.dim[0]);
    A->v_head = dsize(g, v->dim[3]);
    A->heads_dim = A->kv_dim = q->dim[2];
    A->heads = A->kv_heads = dsize(g, q->dim[2]);
    A->head_dim = dsize(g, q->dim[3]);
    A->head_dim_dim = q->dim[3];
    A->rope_dim_dim = qrs->attr.dim[0];
    A->rope = true;
    A->qk_norm = true; /* Megatron-Core's q_layernorm, kv_layernorm under qk_layernorm */
    L->ropes = 2;
    L->mla_extra = L->counts[IR_OP_SLICE] + L->counts[IR_OP_CONCAT] + 1;
    if (L->counts[IR_OP_SLICE] != 6 || L->counts[IR_OP_CONCAT] != 2)
        return rep_refuse(why, wn, "its layers slice or join tensors besides multi-head latent attention");
    A->init_std = g->tensors[qa->in[1]].init_std;
    return true;
}

/* Attention's inputs: norm -> q, k, v projections (+ bias) (-> rope); the
 * heads, head size and rotary embedding the frameworks configure. */
static bool read_qkv(const IrGraph *g, const IrNode *At, LayerWalk *L, RepArch *A, char *why, size_t wn)
{
    if (is_op(producer_of(g, At->in[0]), IR_OP_CONCAT))
        return read_mla(g, At, L, A, why, wn);
    if (L->counts[IR_OP_SLICE] || L->counts[IR_OP_CONCAT])
        return rep_refuse(why, wn, "its layers slice or join tensors outside multi-head latent attention");
    int h = L->N1->out[0], bias = 0, rope_mask = 0, norm_mask = 0;
    int wqkv[3];
    for (int j = 0; j < 3; j++) {
        int b = 0;
        const IrNode *n = through_bias(g, At->in[j], &b);
        if (n && n->op == IR_OP_ROPE) {
            L->ropes++;
            rope_mask |= 1 << j;
            n = through_bias(g, n->in[0], &b);
        }
        /* A norm of each head over head_dim before the rotary embedding
         * (Qwen3, OLMo 2: Megatron's --qk-layernorm), the layer norms' kind. */
        if (n && (n->op == IR_OP_RMSNORM || n->op == IR_OP_LAYERNORM) && is_param(g, n->in[1]) &&
            g->tensors[n->in[1]].rank == 1 &&
            g->tensors[n->in[1]].dim[0] == g->tensors[n->in[0]].dim[g->tensors[n->in[0]].rank - 1]) {
            if ((n->op == IR_OP_RMSNORM) != A->rmsnorm)
                return rep_refuse(why, wn, "its per-head %s norm is a %s and its layer norms are not; the "
                                  "frameworks normalise q and k with the layers' norm",
                                  j == 0 ? "query" : j == 1 ? "key" : "value",
                                  n->op == IR_OP_RMSNORM ? "RMSNorm" : "LayerNorm");
            norm_mask |= 1 << j;
            n = through_bias(g, n->in[0], &b);
        }
        bias += b;
        wqkv[j] = proj_weight(g, n, h);
        if (wqkv[j] < 0)
            return rep_refuse(why, wn, "the %s of its attention is not a projection of the attention norm's "
                          "output", j == 0 ? "query" : j == 1 ? "key" : "value");
    }
    const IrTensor *q = &g->tensors[At->in[0]], *k = &g->tensors[At->in[1]];
    if (q->rank != 4 || k->rank != 4)
        return rep_refuse(why, wn, "its attention's query and key are not [batch, seq, heads, head_dim]");
    A->heads_dim = q->dim[2];
    A->kv_dim = k->dim[2];
    A->heads = dsize(g, q->dim[2]);
    A->kv_heads = dsize(g, k->dim[2]);
    A->head_dim = dsize(g, q->dim[3]);
    A->head_dim_dim = q->dim[3];
    if (rope_mask == 3) { /* query and key rotated, value not: its attributes are read below */
        A->rope = true;
    } else if (L->ropes != 0) {
        return rep_refuse(why, wn, "its rotary embedding is applied to the %s; the frameworks rotate the "
                      "query and the key", rope_mask == 1 ? "query only" : rope_mask == 2 ? "key only"
                      : "value");
    }
    if (norm_mask && norm_mask != 3)
        return rep_refuse(why, wn, "its attention normalises the %s per head; the frameworks' q/k norm "
                          "(--qk-layernorm) normalises the query and the key", norm_mask == 1 ? "query only" :
                          norm_mask == 2 ? "key only" : "value");
    A->qk_norm = norm_mask == 3;
    L->qkv_bias = bias;
    A->init_std = g->tensors[wqkv[0]].init_std;
    return true;
}

/* The attention half: norm -> q, k, v -> attention -> output projection
 * (+ bias) -> residual add; sets L->xm, the stream the MLP reads. */
static bool read_attention(const IrGraph *g, LayerWalk *L, RepArch *A, char *why, size_t wn)
{
    const IrPiece *P = &g->pieces[L->p];
    int nnorms, n1 = norm_consumer(g, L->x, L->p, &nnorms);
    if (nnorms > 1)
        return rep_refuse(why, wn, "its attention and MLP both normalise the layer's input (a parallel "
                      "block); the frameworks' layers run the MLP on the attention's output");
    L->N1 = n1 >= 0 ? &g->nodes[n1] : NULL;
    if (!L->N1 || (L->N1->op != IR_OP_RMSNORM && L->N1->op != IR_OP_LAYERNORM))
        return rep_refuse(why, wn, "its layers do not begin with a norm read by the attention "
                      "(the frameworks' layers are pre-norm)");
    A->rmsnorm = L->N1->op == IR_OP_RMSNORM;
    const IrNode *At = NULL;
    for (int i = P->first; i < P->first + P->count; i++)
        if (g->nodes[i].op == IR_OP_ATTENTION)
            At = &g->nodes[i];
    if (!read_qkv(g, At, L, A, why, wn))
        return false;
    if (At->nin == 4 && !is_param(g, At->in[3]))
        return rep_refuse(why, wn, "its attention's sinks are computed, and the frameworks learn them as a "
                          "parameter");
    A->sinks = At->nin == 4;
    int wo_n = only_consumer(g, At->out[0], L->p);
    int wo = wo_n >= 0 ? proj_weight(g, &g->nodes[wo_n], At->out[0]) : -1;
    if (wo < 0)
        return rep_refuse(why, wn, "its attention's output is not projected by one weight");
    int c = consumer_past_bias(g, g->nodes[wo_n].out[0], L->p, &L->out_bias);
    const IrNode *R1 = c >= 0 ? &g->nodes[c] : NULL;
    if (!R1 || R1->op != IR_OP_ADD || (R1->in[0] != L->x && R1->in[1] != L->x))
        return rep_refuse(why, wn, "its attention's output is not added to the layer's input (a residual "
                      "connection)");
    L->xm = R1->out[0];
    return true;
}

/* The MLP's norm, which must read the attention's sum: a norm on the layer
 * input would be a parallel block (PaLM), which neither framework builds;
 * then the projections reading its output (L->h2, L->up). */
static bool read_mlp_norm(const IrGraph *g, LayerWalk *L, const RepArch *A, char *why, size_t wn)
{
    const IrPiece *P = &g->pieces[L->p];
    const IrNode *N2 = NULL;
    int cs[8], nc = ir_consumers(g, L->xm, cs, 8);
    for (int i = 0; i < nc && i < 8; i++)
        if (g->nodes[cs[i]].op == IR_OP_RMSNORM || g->nodes[cs[i]].op == IR_OP_LAYERNORM)
            N2 = &g->nodes[cs[i]];
    if (!N2) {
        for (int i = P->first; i < P->first + P->count; i++)
            if (&g->nodes[i] != L->N1 && (g->nodes[i].op == IR_OP_RMSNORM || g->nodes[i].op == IR_OP_LAYERNORM) &&
                g->nodes[i].in[0] == L->x)
                return rep_refuse(why, wn, "its attention and MLP both read the layer's input (a parallel "
                              "block); the frameworks' layers run the MLP after the attention");
        return rep_refuse(why, wn, "its MLP is not a pre-norm block after the attention");
    }
    if ((N2->op == IR_OP_RMSNORM) != A->rmsnorm)
        return rep_refuse(why, wn, "its two norms differ in kind");
    L->h2 = N2->out[0];
    nc = ir_consumers(g, L->h2, cs, 8);
    for (int i = 0; i < nc && i < 8; i++) {
        if (g->nodes[cs[i]].op == IR_OP_MOE && g->nodes[cs[i]].in[0] == L->h2) {
            if (L->nmoe < 2)
                L->moes[L->nmoe] = &g->nodes[cs[i]];
            L->nmoe++;
            continue;
        }
        int w = proj_weight(g, &g->nodes[cs[i]], L->h2);
        if (w < 0)
            return rep_refuse(why, wn, "its MLP norm's output feeds %s, not only projections",
                          opname(&g->nodes[cs[i]]));
        if (L->nup < 4)
            L->up[L->nup++] = cs[i];
    }
    return true;
}

/* silu(h @ gate) * (h @ up), or swiglu(h @ gate, h @ up): the same MLP;
 * m is the MUL (silu_mul) or the SWIGLU. */
static bool read_swiglu(const IrGraph *g, const IrNode *m, bool silu_mul, LayerWalk *L, RepArch *A,
                        char *why, size_t wn)
{
    const IrNode *gate, *upp;
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
            return rep_refuse(why, wn, "its MLP multiplies something other than silu(gate) by up (SwiGLU)");
        gate = through_bias(g, a->in[0], &bg), upp = b;
    } else {
        gate = through_bias(g, m->in[0], &bg), upp = through_bias(g, m->in[1], &bu);
    }
    if (!gate || gate->op != IR_OP_MATMUL || gate->in[0] != L->h2 || !upp || upp->op != IR_OP_MATMUL ||
        upp->in[0] != L->h2)
        return rep_refuse(why, wn, "its MLP's gate and up are not projections of the MLP norm's output");
    L->mlp_bias += bg + bu;
    const IrTensor *W = &g->tensors[gate->in[1]];
    A->ff_dim = W->dim[W->rank - 1];
    A->d_ff = dsize(g, A->ff_dim);
    L->act = m;
    A->swiglu = true;
    return true;
}

/* The MLP's activation (L->act), SwiGLU or GELU, told apart by the
 * operators counted and the projections of the norm's output. */
static bool read_activation(const IrGraph *g, LayerWalk *L, RepArch *A, char *why, size_t wn)
{
    const IrPiece *P = &g->pieces[L->p];
    const int *counts = L->counts;
    bool silu_mul = L->nup == 2 && counts[IR_OP_SILU] == 1 && counts[IR_OP_MUL] == 1 && counts[IR_OP_GELU] == 0;
    bool fused = L->nup == 2 && counts[IR_OP_SWIGLU] == 1 && counts[IR_OP_SILU] == 0 && counts[IR_OP_MUL] == 0 &&
                 counts[IR_OP_GELU] == 0;
    if (silu_mul || fused) {
        const IrNode *m = NULL;
        for (int i = P->first; i < P->first + P->count; i++)
            if (g->nodes[i].op == (silu_mul ? IR_OP_MUL : IR_OP_SWIGLU))
                m = &g->nodes[i];
        return read_swiglu(g, m, silu_mul, L, A, why, wn);
    }
    if (L->nup == 1 && counts[IR_OP_GELU] == 1 && counts[IR_OP_SILU] == 0 && counts[IR_OP_MUL] == 0) {
        const IrNode *ge = NULL;
        for (int i = P->first; i < P->first + P->count; i++)
            if (g->nodes[i].op == IR_OP_GELU)
                ge = &g->nodes[i];
        int b = 0;
        const IrNode *fc = through_bias(g, ge->in[0], &b);
        if (fc != &g->nodes[L->up[0]])
            return rep_refuse(why, wn, "its MLP's GELU does not read the first projection");
        L->mlp_bias += b;
        const IrTensor *W = &g->tensors[fc->in[1]];
        A->ff_dim = W->dim[W->rank - 1];
        A->d_ff = dsize(g, A->ff_dim);
        L->act = ge;
        A->swiglu = false;
        return true;
    }
    return rep_refuse(why, wn, "its MLP is neither SwiGLU (swiglu(gate, up) or silu(gate) * up) nor GELU; Megatron-LM "
                  "offers those (torchtitan's llama3 only SwiGLU)");
}

/* The MLP half after its activation: down projection (+ bias) -> residual
 * add; sets A->out, the layer's output. */
static bool read_mlp_out(const IrGraph *g, LayerWalk *L, RepArch *A, char *why, size_t wn)
{
    int dn = only_consumer(g, L->act->out[0], L->p);
    int wd = dn >= 0 ? proj_weight(g, &g->nodes[dn], L->act->out[0]) : -1;
    if (wd < 0)
        return rep_refuse(why, wn, "its MLP's activation is not projected back by one weight");
    int c = consumer_past_bias(g, g->nodes[dn].out[0], L->p, &L->mlp_bias);
    const IrNode *R2 = c >= 0 ? &g->nodes[c] : NULL;
    if (!R2 || R2->op != IR_OP_ADD || (R2->in[0] != L->xm && R2->in[1] != L->xm))
        return rep_refuse(why, wn, "its MLP's output is not added to the residual stream");
    A->out = R2->out[0];
    return true;
}

/* t's producer, or NULL for an input or parameter. */
static const IrNode *producer(const IrGraph *g, int t)
{
    return g->tensors[t].producer >= 0 ? &g->nodes[g->tensors[t].producer] : NULL;
}

/* Is M (a moe reading the MLP norm's output) Qwen2-MoE's gated shared
 * expert as Megatron-Core's SharedExpertMLP with --moe-shared-expert-gate
 * computes it: one expert whose gate is route(matmul(h2, w_g), topk = 1,
 * score = sigmoid, norm = false) and nothing else, i.e. its MLP's output
 * times sigmoid(h2 . w_g) (shared_experts.py, forward)? */
static bool gated_shared(const IrGraph *g, const LayerWalk *L, const IrNode *M)
{
    const IrNode *R = producer(g, M->in[1]), *RM = R && R->op == IR_OP_ROUTE ? producer(g, R->in[0]) : NULL;
    if (dsize(g, g->tensors[M->in[2]].dim[0]) != 1 || proj_weight(g, RM, L->h2) < 0)
        return false;
    const IrAttrs *a = &R->attr;
    return ir_attr_get(a, IR_ATTR_ROUTE_TOPK) == 1 && ir_attr_get(a, IR_ATTR_ROUTE_SCORE) == IR_SCORE_SIGMOID &&
           ir_attr_get(a, IR_ATTR_ROUTE_NORM) == 0 &&
           (ir_attr_get(a, IR_ATTR_ROUTE_SCALE) == 0 || ir_attr_get(a, IR_ATTR_ROUTE_SCALE) == 1) &&
           ir_attr_get(a, IR_ATTR_ROUTE_GROUPS) <= 1 && ir_attr_get(a, IR_ATTR_ROUTE_CAPACITY) == 0 &&
           ir_attr_get(a, IR_ATTR_ROUTE_AUX) == 0 && ir_attr_get(a, IR_ATTR_ROUTE_ZLOSS) == 0;
}

/* Is the route node n the gate of a shared expert (its moe's experts are
 * not the routed ones, A->expert_dim)? Its attributes are then not the
 * router's (read_attrs). */
static bool is_shared_gate(const IrGraph *g, const RepArch *A, const IrNode *n)
{
    int c[4], k = ir_consumers(g, n->out[0], c, 4);
    return n->op == IR_OP_ROUTE && k == 1 && g->nodes[c[0]].op == IR_OP_MOE &&
           g->tensors[g->nodes[c[0]].in[2]].dim[0] != A->expert_dim;
}

/* The single add in piece p reading t, or NULL. */
static const IrNode *add_consumer(const IrGraph *g, int t, int p)
{
    int c[8], n = ir_consumers(g, t, c, 8);
    const IrNode *hit = NULL;
    for (int i = 0; i < n && i < 8; i++) {
        const IrNode *x = &g->nodes[c[i]];
        if (x->piece != p || x->op != IR_OP_ADD)
            continue;
        if (hit)
            return NULL;
        hit = x;
    }
    return hit;
}

/* The MLP's branches, the routed experts' output y1 and the shared
 * expert's y2 (-1: none), added to the residual stream in any order or
 * grouping (x + y1 + y2, x + (y2 + y1), ...): the last sum, the layer's
 * output (-1 when the adds are not that). */
static int residual_sum(const IrGraph *g, const LayerWalk *L, int y1, int y2)
{
    int cur = L->xm, left = y2 >= 0 ? 2 : 1;
    while (left > 0) {
        const IrNode *n = add_consumer(g, cur, L->p);
        if (!n)
            return -1;
        int other = n->in[0] == cur ? n->in[1] : n->in[0];
        const IrNode *s = producer(g, other);
        if (other == y1 || other == y2) {
            *(other == y1 ? &y1 : &y2) = -2;
            left--;
        } else if (left == 2 && s && s->op == IR_OP_ADD &&
                   ((s->in[0] == y1 && s->in[1] == y2) || (s->in[0] == y2 && s->in[1] == y1))) {
            left = 0;
        } else {
            return -1;
        }
        cur = n->out[0];
    }
    return cur;
}

/* A shared expert written as an MLP beside the experts (DeepSeek-V3):
 * swiglu(h2 @ s_gate, h2 @ s_up) @ s_down (or silu * up), no biases, as
 * Megatron-Core's SharedExpertMLP (the config's SwiGLU, no bias). Its
 * output into *y. */
static bool read_shared_mlp(const IrGraph *g, LayerWalk *L, RepArch *A, int *y, char *why, size_t wn)
{
    const IrPiece *P = &g->pieces[L->p];
    const int *counts = L->counts;
    if (counts[IR_OP_GELU])
        return rep_refuse(why, wn, "its MoE layers' shared expert is a GELU MLP, and Megatron-Core's shared "
                          "expert has the routed experts' activation, SwiGLU");
    bool silu_mul = counts[IR_OP_SILU] == 1 && counts[IR_OP_MUL] == 1 && !counts[IR_OP_SWIGLU];
    bool fused = counts[IR_OP_SWIGLU] == 1 && !counts[IR_OP_SILU] && !counts[IR_OP_MUL];
    if (L->nup != 3 || !(silu_mul || fused))
        return rep_refuse(why, wn, "its MoE layers have MLPs beside the routed experts that are not one SwiGLU "
                          "shared expert reading the MLP norm's output (Megatron-Core's "
                          "--moe-shared-expert-intermediate-size)");
    const IrNode *m = NULL;
    for (int i = P->first; i < P->first + P->count; i++)
        if (g->nodes[i].op == (silu_mul ? IR_OP_MUL : IR_OP_SWIGLU))
            m = &g->nodes[i];
    RepArch S = *A;
    if (!read_swiglu(g, m, silu_mul, L, &S, why, wn))
        return false;
    int dn = only_consumer(g, m->out[0], L->p);
    if (dn < 0 || proj_weight(g, &g->nodes[dn], m->out[0]) < 0)
        return rep_refuse(why, wn, "its MoE layers' shared expert is not projected back by one weight");
    A->shared_ff = S.d_ff;
    A->shared_ff_dim = S.ff_dim;
    *y = g->nodes[dn].out[0];
    return true;
}

/* The matmul of M's gates by a parameter [experts, d_model] in M's piece:
 * the experts' down bias, each chosen expert's weighted by its gate
 * (GPT-OSS, models/gpt-oss.mdl); NULL without one. */
static const IrNode *down_bias(const IrGraph *g, const LayerWalk *L, const IrNode *M)
{
    int c[8], n = ir_consumers(g, M->in[1], c, 8);
    for (int i = 0; i < n && i < 8; i++) {
        const IrNode *x = &g->nodes[c[i]];
        if (x->piece == L->p && x->op == IR_OP_MATMUL && x->in[0] == M->in[1] && is_param(g, x->in[1]) &&
            g->tensors[x->in[1]].rank == 2 && g->tensors[x->in[1]].dim[0] == g->tensors[M->in[2]].dim[0])
            return x;
    }
    return NULL;
}

/* A mixture-of-experts MLP (docs/moe.md): h2 -> matmul(h2, w_router) ->
 * route -> moe(h2, gates, e_gate, e_up, e_down), added to the residual
 * stream, as Megatron-Core's MoELayer with a TopKRouter and grouped SwiGLU
 * experts (its TEGroupedMLP); with at most one shared expert beside it,
 * added too: an MLP (DeepSeek-V3) or a gated one-expert moe (Qwen2-MoE). */
static bool read_moe(const IrGraph *g, LayerWalk *L, RepArch *A, char *why, size_t wn)
{
    const IrNode *M = L->moes[0], *SM = NULL;
    if (L->nmoe != L->counts[IR_OP_MOE] || L->counts[IR_OP_MOE] != L->counts[IR_OP_ROUTE] || L->nmoe > 2)
        return rep_refuse(why, wn, "its layers have %d expert and %d router operators; an MoE layer of the "
                          "frameworks has one of each (and a gated shared expert)", L->counts[IR_OP_MOE],
                          L->counts[IR_OP_ROUTE]);
    if (L->nmoe == 2) {
        bool s0 = gated_shared(g, L, L->moes[0]), s1 = gated_shared(g, L, L->moes[1]);
        if (s0 == s1)
            return rep_refuse(why, wn, "its MoE layers have two expert operators, and not exactly one is a "
                              "shared expert gated as Megatron-Core's --moe-shared-expert-gate (one expert whose "
                              "gate is route(matmul(h, w), topk = 1, score = sigmoid, norm = false): "
                              "sigmoid(h . w) times its MLP)");
        SM = s1 ? L->moes[1] : L->moes[0];
        M = s1 ? L->moes[0] : L->moes[1];
    }
    const IrNode *R = producer(g, M->in[1]);
    /* the router's logits may carry a bias (GPT-OSS; TopKRouter's with --add-bias-linear) */
    const IrNode *RM = R && R->op == IR_OP_ROUTE ? through_bias(g, R->in[0], &L->router_bias) : NULL;
    if (!RM || RM->op != IR_OP_MATMUL || RM->in[0] != L->h2 || !is_param(g, RM->in[1]))
        return rep_refuse(why, wn, "its experts' gates are not routed from a projection of the MLP norm's output "
                          "(Megatron-Core's TopKRouter: a linear layer, then top-k)");
    int y2 = -1;
    if (SM) {
        if (L->nup != 2 || L->counts[IR_OP_SWIGLU] || L->counts[IR_OP_SILU] || L->counts[IR_OP_MUL] ||
            L->counts[IR_OP_GELU])
            return rep_refuse(why, wn, "its MoE layers have a gated shared expert and other MLPs beside the "
                              "routed experts; Megatron-Core's MoE layer has one shared expert");
        const IrTensor *W = &g->tensors[SM->in[2]];
        A->shared_ff = dsize(g, W->dim[2]);
        A->shared_ff_dim = W->dim[2];
        A->shared_gate = true;
        y2 = SM->out[0];
    } else if (L->nup != 1 || L->counts[IR_OP_SWIGLU] || L->counts[IR_OP_SILU] || L->counts[IR_OP_MUL] ||
               L->counts[IR_OP_GELU]) {
        if (!read_shared_mlp(g, L, A, &y2, why, wn))
            return false;
    }
    /* The experts' biases (GPT-OSS, Megatron-Core's TEGroupedMLP under
     * --add-bias-linear: fc1's, inside the activation, and fc2's, each
     * chosen expert's weighted by its gate, p (fc2(x) + b): experts.py
     * _apply_bias): moe's trailing inputs, and matmul(gates, b_down) added
     * to its output. */
    int y1 = M->out[0];
    const IrNode *DB = down_bias(g, L, M);
    if (DB) {
        const IrNode *S = add_consumer(g, M->out[0], L->p);
        if (!S || (S->in[0] != DB->out[0] && S->in[1] != DB->out[0]))
            return rep_refuse(why, wn, "its experts' down bias (matmul of the gates) is not added to their output");
        y1 = S->out[0];
        L->down_bias = 2;
    }
    if ((ir_moe_slots(M).b_up >= 0) != (DB != NULL))
        return rep_refuse(why, wn, "its experts have a bias %s the activation only; Megatron-Core's "
                          "--add-bias-linear gives their fc1 and fc2 one each", DB ? "after" : "inside");
    A->expert_bias = DB != NULL;
    int out = residual_sum(g, L, y1, y2);
    if (out < 0)
        return rep_refuse(why, wn, "its experts' output is not added to the residual stream%s",
                          y2 >= 0 ? " with the shared expert's" : "");
    const IrTensor *W = &g->tensors[M->in[2]];
    A->moe = true;
    A->expert_dim = W->dim[0];
    A->n_experts = dsize(g, W->dim[0]);
    A->ff_dim = W->dim[2];
    A->d_ff = dsize(g, A->ff_dim);
    A->swiglu = true; /* the experts are SwiGLU MLPs */
    L->act = M;
    A->out = out;
    return true;
}

/* Nothing else in the layer (every node is one of those walked), and biases
 * as the frameworks place them: Megatron has them on every projection (its
 * default), on none (--disable-bias-linear) or on q, k, v only
 * (--add-qkv-bias). */
static bool layer_rest(const IrGraph *g, const LayerWalk *L, RepArch *A, char *why, size_t wn)
{
    const IrPiece *P = &g->pieces[L->p];
    int attn = 2 /* norms */ + 2 * A->qk_norm + 4 /* projections */ + L->ropes + 1 /* attention */ +
               1 /* residual */ + L->mla_extra;
    int expect = attn + (A->swiglu ? 3 : 2) /* projections */ +
                 (A->swiglu && !L->counts[IR_OP_SWIGLU] ? 2 : 1) /* activation */ + 1 /* residual */ +
                 L->qkv_bias + L->out_bias + L->mlp_bias;
    if (A->moe) { /* router projection, route, moe, residual; a shared expert and its add */
        int shared = !A->shared_ff ? 0 : A->shared_gate ? 4 : 3 + (L->counts[IR_OP_SWIGLU] ? 1 : 2) + 1;
        expect = attn + 4 + shared + L->qkv_bias + L->out_bias + L->mlp_bias + L->router_bias + L->down_bias;
    }
    if (P->count != expect)
        return rep_refuse(why, wn, "its layers compute %d operators besides those of a decoder layer",
                      P->count - expect);
    int nproj = 4 + (A->moe ? 1 : A->swiglu ? 3 : 2);
    int all = L->qkv_bias + L->out_bias + L->mlp_bias + L->router_bias;
    /* An MoE layer with a bias on every projection, the router's included, is
     * Megatron-Core's --add-bias-linear MoE layer (GPT-OSS): TopKRouter then
     * has a bias (router.py); a shared expert never has one. */
    if (A->moe && all > L->qkv_bias && (all != nproj || A->shared_ff))
        return rep_refuse(why, wn, "its MoE layers have biases on some of the output, router or shared expert "
                          "projections; Megatron-Core's MoE layers have them on all of the output and the "
                          "router (--add-bias-linear) or on none, and never on a shared expert");
    if (all == 0)
        A->bias_linear = A->bias_qkv = false;
    else if (all == nproj)
        A->bias_linear = A->bias_qkv = true;
    else if (all == 3 && L->qkv_bias == 3)
        A->bias_linear = false, A->bias_qkv = true;
    else
        return rep_refuse(why, wn, "%d of its %d projections %s a bias; the frameworks have one on all, "
                      "on none or on the query, key and value only", all, nproj, all == 1 ? "has" : "have");
    return true;
}

/* One layer: pre-norm attention, then a pre-norm MLP, each added to the
 * residual stream. x is the layer's input. */
static bool read_layer(const IrGraph *g, int p, int x, RepArch *A, char *why, size_t wn)
{
    LayerWalk L = {.p = p, .x = x};
    if (!(layer_ops(g, &L, why, wn) && read_attention(g, &L, A, why, wn) && read_mlp_norm(g, &L, A, why, wn)))
        return false;
    if (L.nmoe || L.counts[IR_OP_MOE] || L.counts[IR_OP_ROUTE]) {
        if (!L.nmoe)
            return rep_refuse(why, wn, "its experts do not read the MLP norm's output");
        return read_moe(g, &L, A, why, wn) && layer_rest(g, &L, A, why, wn);
    }
    return read_activation(g, &L, A, why, wn) && read_mlp_out(g, &L, A, why, wn) && layer_rest(g, &L, A, why, wn);
}

/* The first property two layers' readings differ in (NULL: none): the
 * attention half, then (mlp) the MLP half. */
static const char *layer_differs(const RepArch *a, const RepArch *b, bool mlp)
{
    if (a->rmsnorm != b->rmsnorm)
        return "the norm";
    if (a->heads != b->heads || a->kv_heads != b->kv_heads || a->head_dim != b->head_dim ||
        a->heads_dim != b->heads_dim || a->kv_dim != b->kv_dim || a->head_dim_dim != b->head_dim_dim)
        return "the attention heads";
    if (a->rope != b->rope)
        return "the rotary embedding";
    if (a->sinks != b->sinks)
        return "the attention sinks";
    if (a->bias_linear != b->bias_linear || a->bias_qkv != b->bias_qkv)
        return "the biases";
    if (a->init_std != b->init_std)
        return "the initialisation";
    if (!mlp)
        return NULL;
    if (a->swiglu != b->swiglu)
        return "the MLP's activation";
    if (a->d_ff != b->d_ff || a->ff_dim != b->ff_dim)
        return "the MLP width";
    if (a->n_experts != b->n_experts || a->expert_dim != b->expert_dim)
        return "the experts";
    if (a->shared_ff != b->shared_ff || a->shared_ff_dim != b->shared_ff_dim || a->shared_gate != b->shared_gate)
        return "the shared expert";
    return NULL;
}

/* The head's node after index i (and the tensor it reads at k, -1: any)
 * when it is of kind op, else NULL. */
static const IrNode *next_is(const IrGraph *g, int i, IrOp op)
{
    return i + 1 < g->nfwd && g->nodes[i + 1].op == op ? &g->nodes[i + 1] : NULL;
}

/* Which output of n tensor t is. */
static int out_index(const IrNode *n, int t)
{
    for (int j = 0; j < n->nout; j++)
        if (n->out[j] == t)
            return j;
    return 0;
}

/* Two nodes alike: op, attributes (ir/attrs.def's and a matmul's
 * contraction) and the number of inputs and outputs. */
static bool same_node(const IrNode *a, const IrNode *b)
{
    if (a->op != b->op || a->nin != b->nin || a->nout != b->nout)
        return false;
    for (int id = 0; id < IR_NATTRS; id++)
        if (ir_attrs[id].op == a->op && ir_attr_get(&a->attr, (IrAttrId)id) != ir_attr_get(&b->attr, (IrAttrId)id))
            return false;
    return a->op != IR_OP_MATMUL || (a->attr.ncontract == b->attr.ncontract &&
                                     memcmp(a->attr.contract, b->attr.contract, sizeof a->attr.contract) == 0);
}

/* One layer of a multi-token prediction depth from node first: reference
 * piece R's operators in order, reading in where R reads its input (the one
 * tensor R reads from outside it), parameters of R's shapes where R reads
 * its; *out is what R's output rout is to it, and its parameters are
 * appended to prm (*np, at most cap). False, with the first difference in
 * err, when the nodes are not such a layer. */
static bool mtp_layer(const IrGraph *g, const IrPiece *R, int rout, int first, int end, int in, int *out,
                      int *prm, int *np, int cap, char *err, size_t en, int *same)
{
    int n = R->count, lin = -1, np0 = *np;
    *same = 0;
    if (first + n > end) {
        snprintf(err, en, "the head ends before a layer like layer %d", (int)(R - g->pieces) - 1);
        return false;
    }
    for (int k = 0; k < n; k++, *same = k) {
        const IrNode *a = &g->nodes[R->first + k], *b = &g->nodes[first + k];
        if (!same_node(a, b)) {
            snprintf(err, en, "%s at line %d where layer %d computes %s", ir_ops[b->op].name, b->loc.line,
                     (int)(R - g->pieces) - 1, ir_ops[a->op].name);
            *np = np0;
            return false;
        }
        for (int j = 0; j < a->nin; j++) {
            const IrTensor *u = &g->tensors[a->in[j]], *v = &g->tensors[b->in[j]];
            int pu = u->producer, pv = v->producer;
            bool ok;
            if (u->role == IR_PARAM) {
                ok = v->role == IR_PARAM && v->rank == u->rank && !memcmp(v->dim, u->dim, sizeof(int) * (size_t)u->rank);
                if (ok && *np < cap)
                    prm[(*np)++] = b->in[j];
            } else if (pu >= R->first && pu < R->first + n) {
                ok = pv == first + (pu - R->first) && b->in[j] == g->nodes[pv].out[out_index(&g->nodes[pu], a->in[j])];
            } else {
                ok = (lin < 0 || lin == a->in[j]) && b->in[j] == in;
                lin = a->in[j];
            }
            if (!ok) {
                snprintf(err, en, "%s read at line %d where the model's layer reads %s", v->name, b->loc.line,
                         u->name);
                *np = np0;
                return false;
            }
        }
    }
    int pr = g->tensors[rout].producer;
    if (pr < R->first || pr >= R->first + n) {
        snprintf(err, en, "the model's layer's output is not made in it");
        *np = np0;
        return false;
    }
    *out = g->nodes[first + (pr - R->first)].out[out_index(&g->nodes[pr], rout)];
    return true;
}

/* A hybrid layer piece's output: its last add, the residual the next piece
 * reads (read_hybrid checked it). */
static int piece_out(const IrGraph *g, int p)
{
    const IrPiece *P = &g->pieces[p];
    for (int i = P->first + P->count - 1; i >= P->first; i--)
        if (g->nodes[i].op == IR_OP_ADD)
            return g->nodes[i].out[0];
    return -1;
}

/* Multi-token prediction after the head's loss, in Megatron-Core's form
 * (multi_token_prediction.py), depth d = 1, 2, ... each from node i on:
 * the tokens shifted by d (token 0 past the end), embedded by the model's
 * table, normalised (enorm), the hidden state normalised (hnorm; the final
 * norm's output xn at depth 1, the previous depth's after its final norm
 * at the next), joined [embedding; hidden] and projected 2d -> d (eh_proj);
 * then its layers, each operator for operator like a layer of the model (a
 * GPT model's: like its last, Megatron building the MTP layer from the
 * decoder's layer spec; a hybrid's: one of its kinds each, the pattern
 * after '/', every depth the same), its own final norm, the model's LM head
 * and a cross-entropy against the targets shifted by d with one weight for
 * every depth. The depths' parameters are all the first's
 * (mtp_use_repeated_layer: one layer run at every depth) or all their own. */
static bool read_mtp(const IrGraph *g, int i, int x, int xn, const IrNode *M, RepArch *A, char *why, size_t wn)
{
    const IrPiece *P = &g->pieces[g->npieces - 1];
    const char *bad = "after its loss it computes something other than Megatron-Core's multi-token "
                      "prediction (shifted tokens embedded, joined with the hidden state, projected; "
                      "layers like the model's; a norm, the LM head, a weighted loss)";
    /* The reference layers: a GPT model's last; a hybrid's first of each kind. */
    int ref[8], rout[8], nref = 0;
    if (!A->hybrid) {
        ref[0] = g->npieces - 2, rout[0] = x, nref = 1;
    } else {
        for (int p = 1; p <= A->layers && nref < 8; p++) {
            bool seen = false;
            for (int r = 0; r < nref; r++)
                seen |= A->pattern[ref[r] - 1] == A->pattern[p - 1];
            if (!seen)
                ref[nref] = p, rout[nref++] = piece_out(g, p);
        }
    }
    const IrNode *ce0 = &g->nodes[g->tensors[g->loss].producer];
    int end = P->first + P->count, hid = xn, at = i, depth = 0;
    int prm1[512], np1 = 0;
    char pat1[REP_MAX_MTP + 1] = "";
    bool shared = false;
    while (next_is(g, at, IR_OP_SHIFT) && depth < 16) {
        depth++;
        const IrNode *sh = next_is(g, at, IR_OP_SHIFT);
        const IrNode *em = sh ? next_is(g, sh->id, IR_OP_EMBEDDING) : NULL;
        const IrNode *en = em ? next_is(g, em->id, IR_OP_RMSNORM) : NULL;
        const IrNode *hn = en ? next_is(g, en->id, IR_OP_RMSNORM) : NULL;
        const IrNode *cat = hn ? next_is(g, hn->id, IR_OP_CONCAT) : NULL;
        const IrNode *eh = cat ? next_is(g, cat->id, IR_OP_MATMUL) : NULL;
        if (!eh || g->tensors[sh->in[0]].role != IR_INPUT || sh->attr.shift != depth || sh->attr.shift_tail != 1 ||
            em->in[0] != sh->out[0] || em->in[1] != A->table || en->in[0] != em->out[0] || hn->in[0] != hid ||
            cat->in[0] != en->out[0] || cat->in[1] != hn->out[0] || eh->in[0] != cat->out[0] ||
            !is_param(g, eh->in[1]) || !is_param(g, en->in[1]) || !is_param(g, hn->in[1]))
            return rep_refuse(why, wn, "%s (depth %d)", bad, depth);
        const IrTensor *W = &g->tensors[eh->in[1]];
        if (W->rank != 2 || dsize(g, W->dim[0]) != 2 * A->d_model || dsize(g, W->dim[1]) != A->d_model)
            return rep_refuse(why, wn, "its multi-token prediction's projection %s is not [2 d_model, d_model]",
                              W->name);
        int prm[512], np = 0;
        prm[np++] = en->in[1], prm[np++] = hn->in[1], prm[np++] = eh->in[1];
        /* its layers, until the final norm (a node no layer begins like) */
        char pat[REP_MAX_MTP + 1], err[160] = "";
        int nl = 0, cur = eh->out[0], pos = eh->id + 1;
        for (;;) {
            char e1[160] = "";
            int r = 0, out = -1, best = -1, same;
            for (; r < nref; r++) {
                if (mtp_layer(g, &g->pieces[ref[r]], rout[r], pos, end - 4, cur, &out, prm, &np, 512, e1, sizeof e1,
                              &same))
                    break;
                if (same > best) /* the model's layer it follows furthest says where it differs */
                    best = same, snprintf(err, sizeof err, "%s", e1);
            }
            if (r == nref) {
                if (nl == 0)
                    return rep_refuse(why, wn, "its multi-token prediction layer is not one like the model's %s (%s)",
                                      A->hybrid ? "layers" : "last", err);
                break;
            }
            if (nl >= REP_MAX_MTP)
                return rep_refuse(why, wn, "its multi-token prediction depth has more than %d layers", REP_MAX_MTP);
            pat[nl++] = A->hybrid ? A->pattern[ref[r] - 1] : 't';
            pos += g->pieces[ref[r]].count;
            cur = out;
            if (!A->hybrid)
                break; /* a GPT model's depth: one decoder layer */
        }
        pat[nl] = 0;
        const IrNode *fn = next_is(g, pos - 1, IR_OP_RMSNORM);
        const IrNode *hd = fn ? next_is(g, fn->id, IR_OP_MATMUL) : NULL;
        const IrNode *st = hd ? next_is(g, hd->id, IR_OP_SHIFT) : NULL;
        const IrNode *ce = st ? next_is(g, st->id, IR_OP_CROSS_ENTROPY) : NULL;
        if (!ce || fn->in[0] != cur || !is_param(g, fn->in[1]) || hd->in[0] != fn->out[0] || hd->in[1] != M->in[1] ||
            st->in[0] != ce0->in[1] || st->attr.shift != depth || st->attr.shift_tail != 0 ||
            ce->in[0] != hd->out[0] || ce->in[1] != st->out[0]) {
            if (A->hybrid && err[0]) /* what follows the matched layers is no head: a layer like none of the model's */
                return rep_refuse(why, wn, "its multi-token prediction's layer %d (depth %d) is like none of the "
                                  "model's layers (%s)", nl + 1, depth, err);
            return rep_refuse(why, wn, "%s (depth %d)", bad, depth);
        }
        if (np < 512)
            prm[np++] = fn->in[1];
        double w = ir_loss_weight(&ce->attr);
        if (depth == 1) {
            memcpy(prm1, prm, sizeof(int) * (size_t)np), np1 = np;
            snprintf(pat1, sizeof pat1, "%s", pat);
            A->mtp_weight = w;
            A->mtp_first = sh->id;
        } else {
            if (strcmp(pat, pat1) || np != np1)
                return rep_refuse(why, wn, "its multi-token prediction depths %d and 1 hold different layers (%s, "
                                  "%s), where Megatron builds every depth from one pattern", depth, pat, pat1);
            if (w != A->mtp_weight)
                return rep_refuse(why, wn, "its multi-token prediction depths weigh their losses %g and %g, where "
                                  "Megatron weighs each mtp_loss_scaling_factor / mtp_num_layers", A->mtp_weight, w);
            int same = 0;
            for (int k = 0; k < np; k++)
                same += prm[k] == prm1[k];
            if (same != 0 && same != np)
                return rep_refuse(why, wn, "its multi-token prediction depth %d shares %d of its %d parameters with "
                                  "depth 1, where Megatron's depths share all (mtp_use_repeated_layer) or none",
                                  depth, same, np);
            if (depth > 2 && (same == np) != shared)
                return rep_refuse(why, wn, "its multi-token prediction depths share parameters with depth 1 in "
                                  "some depths and not in others");
            shared = same == np;
        }
        A->mtp_last = ce->id;
        hid = fn->out[0];
        at = ce->id;
    }
    if (at != end - 1)
        return rep_refuse(why, wn, "%s", bad);
    A->mtp_layers = depth;
    A->mtp_repeated = shared;
    snprintf(A->mtp_pattern, sizeof A->mtp_pattern, "%s", A->hybrid ? pat1 : "");
    return true;
}

static bool read_head(const IrGraph *g, int x, RepArch *A, char *why, size_t wn)
{
    int p = g->npieces - 1;
    const IrPiece *P = &g->pieces[p];
    int norm = only_consumer(g, x, p);
    const IrNode *N = norm >= 0 ? &g->nodes[norm] : NULL;
    if (!N || (N->op != IR_OP_RMSNORM && N->op != IR_OP_LAYERNORM) || (N->op == IR_OP_RMSNORM) != A->rmsnorm)
        return rep_refuse(why, wn, "its head does not begin with a final norm like the layers'");
    int mm = only_consumer(g, N->out[0], p);
    const IrNode *nx = next_is(g, N->id, IR_OP_MATMUL);
    if (mm < 0 && nx && nx->in[0] == N->out[0]) /* the final norm read by multi-token prediction too */
        mm = nx->id;
    const IrNode *M = mm >= 0 ? &g->nodes[mm] : NULL;
    int w = proj_weight(g, M, N->out[0]);
    if (w < 0)
        return rep_refuse(why, wn, "its head does not project the final norm's output to the vocabulary");
    const IrTensor *W = &g->tensors[w];
    if (w == A->table) {
        A->tied = true;
    } else {
        if (W->rank != 2 || dsize(g, W->dim[0]) != A->d_model || W->dim[1] != A->vocab_dim)
            return rep_refuse(why, wn, "its LM head %s is not a [d_model, vocab] matrix", W->name);
        A->tied = false;
    }
    int ce = only_consumer(g, M->out[0], p);
    if (ce < 0 || g->nodes[ce].op != IR_OP_CROSS_ENTROPY)
        return rep_refuse(why, wn, "its logits do not go straight into the cross-entropy loss");
    if (P->count > 3 && g->nodes[ce].out[0] == g->loss && ce + 1 < P->first + P->count &&
        g->nodes[ce + 1].op == IR_OP_SHIFT)
        return read_mtp(g, ce, x, N->out[0], M, A, why, wn);
    if (P->count != 3)
        return rep_refuse(why, wn, "its head computes %d operators besides the norm, the LM head and the loss",
                      P->count - 3);
    return true;
}

/* Every attribute of every operator in the layers and the head, by the
 * table (ir/attrs.def), not by name: the frameworks configure one value per
 * attribute, so operators of one kind must agree on each. */
static bool read_attrs(const IrGraph *g, RepArch *A, char *why, size_t wn)
{
    int line[IR_NATTRS] = {0};
    for (int p = 1; p < g->npieces; p++) {
        const IrPiece *P = &g->pieces[p];
        for (int i = P->first; i < P->first + P->count; i++) {
            const IrNode *n = &g->nodes[i];
            /* multi-token prediction's shifts, join and loss: read_mtp read them */
            bool mtp = A->mtp_layers && i >= A->mtp_first && i <= A->mtp_last &&
                       (n->op == IR_OP_SHIFT || n->op == IR_OP_CONCAT || n->op == IR_OP_CROSS_ENTROPY);
            for (int id = 0; id < IR_NATTRS; id++) {
                if (ir_attrs[id].op != n->op || is_shared_gate(g, A, n) || mtp) /* read_moe checked it */
                    continue;
                if (A->mla && (n->op == IR_OP_SLICE || n->op == IR_OP_CONCAT))
                    continue; /* read_mla read their sizes */
                if (id == IR_ATTR_ATTN_WINDOW)
                    continue; /* read_window */
                if (id == IR_ATTR_RMSNORM_GROUPS && A->hybrid)
                    continue; /* the Mamba-2 gated norm's groups: read_hybrid read them */
                double v = ir_attr_get(&n->attr, (IrAttrId)id);
                if (A->has_attr[id] && v != A->attr[id]) {
                    char a[64], b[64];
                    IrAttrs x = {0};
                    ir_attr_set(&x, (IrAttrId)id, A->attr[id]);
                    return rep_refuse(why, wn, "its %s operators differ in %s (%s at line %d, %s at line %d), "
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

/* The layers' attention windows: one value on every layer, or a window W on
 * every layer but each f-th (layer numbers from 1), which has none: Megatron's
 * --window-size with --window-attn-skip-freq f (transformer_layer.py: a layer
 * whose number is a multiple of f attends to everything; GPT-OSS, f = 2). f
 * is the first unwindowed layer's number; each layer is then checked. */
static bool read_window(const IrGraph *g, RepArch *A, char *why, size_t wn)
{
    int id = IR_ATTR_ATTN_WINDOW, layer = 0, f = 0;
    double w = 0;
    for (int p = 1; p <= A->layers; p++) {
        const IrPiece *P = &g->pieces[p];
        for (int i = P->first; i < P->first + P->count; i++) {
            const IrNode *n = &g->nodes[i];
            if (n->op != IR_OP_ATTENTION)
                continue;
            double v = ir_attr_get(&n->attr, (IrAttrId)id);
            layer++;
            w = w == 0 ? v : w;
            if (v == 0 && f == 0 && layer > 1)
                f = layer;
        }
    }
    if (w == 0)
        return true; /* no window anywhere: the attribute is absent */
    if (f == 0 && layer > 0) {
        /* windowed everywhere, or its first layer unwindowed: checked below with f = layer + 1 */
        f = layer + 1;
    }
    layer = 0;
    for (int p = 1; p <= A->layers; p++) {
        const IrPiece *P = &g->pieces[p];
        for (int i = P->first; i < P->first + P->count; i++) {
            const IrNode *n = &g->nodes[i];
            if (n->op != IR_OP_ATTENTION)
                continue;
            double v = ir_attr_get(&n->attr, (IrAttrId)id), want = ++layer % f ? w : 0;
            if (v != want)
                return rep_refuse(why, wn, "its attention window is %g at line %d (layer %d), where the frameworks "
                                  "have one window on every layer, or one on every layer but each f-th "
                                  "(Megatron's --window-attn-skip-freq), which would give it %g", v, n->loc.line,
                                  layer - 1, want);
        }
    }
    A->has_attr[id] = true;
    A->attr[id] = w;
    A->window_skip_freq = f <= A->layers ? f : 0;
    return true;
}

/* The layer kind of piece p by its mixer: 'M' (ssd), '*' (attention), 'E'
 * (moe), '-' (an MLP: matmuls around relu2, gelu or swiglu); 0 when it holds
 * several mixers or none (*count: how many). */
static char hybrid_kind(const IrGraph *g, int p, int *count)
{
    const IrPiece *P = &g->pieces[p];
    int ssd = 0, att = 0, moe = 0, act = 0;
    for (int i = P->first; i < P->first + P->count; i++) {
        IrOp op = g->nodes[i].op;
        ssd += op == IR_OP_SSD, att += op == IR_OP_ATTENTION, moe += op == IR_OP_MOE;
        act += op == IR_OP_RELU2 || op == IR_OP_GELU || op == IR_OP_SWIGLU;
    }
    *count = ssd + att + (moe > 0) + (!ssd && !att && !moe && act > 0);
    if (*count != 1)
        return 0;
    return ssd ? 'M' : att ? '*' : moe ? 'E' : '-';
}

/* The product of t's dims [from, to). */
static int64_t dims_prod(const IrGraph *g, const IrTensor *t, int from, int to)
{
    int64_t n = 1;
    for (int i = from; i < to; i++)
        n *= dsize(g, t->dim[i]);
    return n;
}

/* The experts' input of moe node n in piece p: the hidden, or a latent MoE's
 * (Megatron-Core's MoELayer with moe_latent_size: fc1_latent_proj, a
 * [d_model, d_latent] matmul of the normalised hidden, before the dispatch;
 * the combined output's one consumer fc2_latent_proj, [d_latent, d_model]).
 * Megatron configures one latent for every MoE layer. */
static bool read_moe_latent(const IrGraph *g, const IrNode *n, int p, RepArch *A, char *why, size_t wn)
{
    const IrTensor *h = &g->tensors[n->in[0]];
    int64_t w = dsize(g, h->dim[h->rank - 1]), lat = 0;
    const IrNode *down = producer_of(g, n->in[0]);
    /* a projection feeding the experts is a latent, even one as wide as the hidden */
    if (w != A->d_model || (down && down->op == IR_OP_MATMUL && is_param(g, down->in[1]))) {
        int c = only_consumer(g, n->out[0], p);
        const IrNode *up = c >= 0 ? &g->nodes[c] : NULL;
        const IrTensor *wd = down && down->op == IR_OP_MATMUL && is_param(g, down->in[1]) ? &g->tensors[down->in[1]] : NULL;
        const IrTensor *wu = up && up->op == IR_OP_MATMUL && up->in[0] == n->out[0] && is_param(g, up->in[1])
                                 ? &g->tensors[up->in[1]] : NULL;
        if (!wd || !wu || wd->rank != 2 || wu->rank != 2 || dsize(g, wd->dim[0]) != A->d_model ||
            dsize(g, wu->dim[1]) != A->d_model || wu->dim[0] != h->dim[h->rank - 1])
            return rep_refuse(why, wn, "its experts at line %d read a %lld-wide input that is not the hidden "
                              "(%lld) nor a latent projection of it between two [d_model, latent] and [latent, "
                              "d_model] weights (Megatron's --moe-latent-size)", n->loc.line, (long long)w,
                              (long long)A->d_model);
        lat = w;
    }
    if (A->moe && A->moe_latent != lat) {
        char was[64], now[64];
        snprintf(was, sizeof was, A->moe_latent ? "a latent of %lld" : "the hidden (%lld)",
                 (long long)(A->moe_latent ? A->moe_latent : A->d_model));
        snprintf(now, sizeof now, lat ? "a latent of %lld" : "the hidden (%lld)", (long long)(lat ? lat : A->d_model));
        return rep_refuse(why, wn, "its MoE layers' experts run on %s and on %s (layer %d), where Megatron configures "
                          "one --moe-latent-size for every MoE layer", was, now, p - 1);
    }
    A->moe_latent = lat;
    return true;
}

/* A hybrid of Mamba-2, attention, MoE and MLP layers, one mixer a piece,
 * as Megatron-Core's MambaModel builds one (--hybrid-override-pattern): the
 * pattern, each kind's sizes (one value a kind, as Megatron configures),
 * the embedding and head as any decoder's. The layers' residual stream is
 * each piece's last add. */
static bool read_hybrid(const IrGraph *g, RepArch *A, char *why, size_t wn)
{
    A->hybrid = true;
    A->rmsnorm = true;
    A->m_group_dim = -1;
    A->mlp_op = -1;
    if (A->layers > REP_MAX_LAYERS)
        return rep_refuse(why, wn, "its %d layers are more than ptdc's emitters take (%d)", A->layers,
                          REP_MAX_LAYERS);
    int x = -1;
    if (!read_embedding(g, A, why, wn, &x))
        return false;
    for (int p = 1; p <= A->layers; p++) {
        const IrPiece *P = &g->pieces[p];
        int count;
        char k = hybrid_kind(g, p, &count);
        if (!k)
            return rep_refuse(why, wn, "its layers compute softplus (Mamba-2), and one piece of it holds %d "
                              "mixers (a repeat body of several layers, as hybrid.mdl's pairs): Megatron's "
                              "hybrid layers are one mixer each; write the layers as a pattern repeat", count);
        A->pattern[p - 1] = k;
        int last_add = -1;
        for (int i = P->first; i < P->first + P->count; i++) {
            const IrNode *n = &g->nodes[i];
            if (n->op == IR_OP_ADD)
                last_add = i;
            /* A parameter added to a projection is a bias, but for dt's
             * (dt_bias, read by softplus): the emitters refuse biases here,
             * Megatron's MambaMixer asserts it has none (bias=False). */
            if (n->op == IR_OP_ADD && (is_param(g, n->in[0]) || is_param(g, n->in[1]))) {
                int c = only_consumer(g, n->out[0], p);
                if (c < 0 || g->nodes[c].op != IR_OP_SOFTPLUS)
                    A->bias_linear = A->bias_qkv = true;
            }
            if (n->op == IR_OP_RMSNORM && n->attr.group_dims == 0 && is_param(g, n->in[1]) &&
                g->tensors[n->in[1]].rank != 1)
                return rep_refuse(why, wn, "its layer %d's norm at line %d is not over d_model", p - 1, n->loc.line);
            if (n->op == IR_OP_LAYERNORM)
                return rep_refuse(why, wn, "its hybrid layers use LayerNorm; Megatron's MambaModel builds RMSNorm");
            if (n->op == IR_OP_SSD) {
                const IrTensor *xs = &g->tensors[n->in[0]], *B = &g->tensors[n->in[3]];
                int64_t heads = dims_prod(g, xs, 2, xs->rank - 1), groups = dims_prod(g, B, 2, B->rank - 1);
                int64_t hd = dsize(g, xs->dim[xs->rank - 1]), st = dsize(g, B->dim[B->rank - 1]);
                if (A->m_heads && (A->m_heads != heads || A->m_groups != groups || A->m_head_dim != hd ||
                                   A->m_state != st))
                    return rep_refuse(why, wn, "its Mamba-2 layers differ in heads, groups, head size or state, "
                                      "where Megatron configures one value for every layer");
                A->m_heads = heads, A->m_groups = groups, A->m_head_dim = hd, A->m_state = st;
                A->m_group_dim = B->rank == 4 ? B->dim[2] : -1;
            }
            if (n->op == IR_OP_CONV1D)
                A->m_conv = dsize(g, g->tensors[n->in[1]].dim[g->tensors[n->in[1]].rank - 1]);
            if (n->op == IR_OP_ATTENTION) {
                const IrTensor *q = &g->tensors[n->in[0]], *kk = &g->tensors[n->in[1]];
                if (q->rank != 4 || kk->rank != 4 || n->nin != 3)
                    return rep_refuse(why, wn, "its attention at line %d is not [batch, seq, heads, head_dim] "
                                      "grouped-query attention without sinks", n->loc.line);
                A->heads_dim = q->dim[2], A->kv_dim = kk->dim[2], A->head_dim_dim = q->dim[3];
                A->heads = dsize(g, q->dim[2]), A->kv_heads = dsize(g, kk->dim[2]);
                A->head_dim = dsize(g, q->dim[3]);
                /* the projections' std, as rep_arch_read takes a decoder's: the query's */
                const IrNode *qm = producer_of(g, n->in[0]);
                if (qm && qm->op == IR_OP_MATMUL && is_param(g, qm->in[1]))
                    A->init_std = g->tensors[qm->in[1]].init_std;
            }
            if (n->op == IR_OP_MOE && !read_moe_latent(g, n, p, A, why, wn))
                return false;
            if (n->op == IR_OP_MOE) {
                const IrTensor *up = &g->tensors[n->in[2]];
                A->moe = true;
                A->expert_dim = up->dim[0];
                A->n_experts = dsize(g, up->dim[0]);
                A->ff_dim = up->dim[up->rank - 1];
                A->d_ff = dsize(g, A->ff_dim);
                if (p - 1 < REP_MAX_LAYERS)
                    A->layer_moe[(p - 1) / 64] |= (uint64_t)1 << ((p - 1) % 64);
            }
            /* an MLP's width (a '-' layer's, or an E layer's shared expert):
             * the activation's input's last dim */
            if ((n->op == IR_OP_RELU2 || n->op == IR_OP_GELU || n->op == IR_OP_SWIGLU) && k != 'M') {
                const IrTensor *a = &g->tensors[n->in[0]];
                int d = a->dim[a->rank - 1];
                if (A->mlp_op >= 0 && A->mlp_op != (int)n->op)
                    return rep_refuse(why, wn, "its hybrid layers' MLPs compute %s and %s, where Megatron's one "
                                      "activation (--squared-relu, --swiglu) sets them all", opname(n),
                                      ir_ops[A->mlp_op].name);
                A->mlp_op = (int)n->op;
                if (k == 'E')
                    A->shared_ff = dsize(g, d), A->shared_ff_dim = d;
                else
                    A->dense_ff = dsize(g, d), A->dense_ff_dim = d, A->n_dense++;
            }
        }
        int cons[8], nc = last_add < 0 ? 0 : ir_consumers(g, g->nodes[last_add].out[0], cons, 8), next = 0;
        for (int i = 0; i < nc && i < 8; i++)
            next += g->nodes[cons[i]].piece == p + 1;
        if (!next)
            return rep_refuse(why, wn, "its layer %d does not end with the residual add the next piece reads",
                              p - 1);
        x = g->nodes[last_add].out[0];
    }
    if (!A->moe)
        A->d_ff = A->dense_ff, A->ff_dim = A->dense_ff_dim;
    return read_head(g, x, A, why, wn) && read_window(g, A, why, wn) && read_attrs(g, A, why, wn);
}

bool rep_arch_read(const IrGraph *g, RepArch *A, char *why, size_t wn)
{
    memset(A, 0, sizeof *A);
    A->heads_dim = A->kv_dim = A->ff_dim = A->vocab_dim = A->head_dim_dim = A->expert_dim = -1;
    A->shared_ff_dim = A->dense_ff_dim = -1;
    A->seq = g->seq_dim >= 0 ? dsize(g, g->seq_dim) : 0;
    for (int p = 0; p < g->npieces; p++)
        if (g->pieces[p].rep >= 0)
            A->layers++;
    bool ssd = false;
    for (int i = 0; i < g->nfwd; i++)
        ssd |= g->nodes[i].op == IR_OP_SSD;
    if (ssd && g->npieces == A->layers + 2 && g->pieces[0].rep < 0 && g->pieces[g->npieces - 1].rep < 0)
        return read_hybrid(g, A, why, wn);
    /* Layers may come from several repeats (DeepSeek-V3's dense first
     * layers, then MoE ones): each piece one layer, all alike but for the
     * MLP, dense or MoE. */
    if (g->npieces != A->layers + 2 || g->pieces[0].rep >= 0 || g->pieces[g->npieces - 1].rep >= 0)
        return rep_refuse(why, wn, "the frameworks build one run of layers between the embedding and the head, "
                          "and %s has %d pieces, %d of them layers", g->name, g->npieces, A->layers);
    int x = -1;
    if (!read_embedding(g, A, why, wn, &x))
        return false;
    RepArch first[2]; /* the first dense and the first MoE layer */
    int at[2] = {-1, -1};
    for (int p = 1; p <= A->layers; p++) {
        RepArch L = *A;
        if (!read_layer(g, p, x, &L, why, wn))
            return false;
        int k = L.moe;
        const char *d = at[k] < 0 ? NULL : layer_differs(&first[k], &L, true);
        if (d)
            return rep_refuse(why, wn, "its layers %d and %d differ in %s, where the frameworks configure one "
                              "value for every layer", at[k], p - 1, d);
        if (at[k] < 0)
            first[k] = L, at[k] = p - 1;
        if (k && p - 1 < REP_MAX_LAYERS)
            A->layer_moe[(p - 1) / 64] |= (uint64_t)1 << ((p - 1) % 64);
        x = L.out;
    }
    uint64_t moe_bits[REP_MAX_LAYERS / 64];
    memcpy(moe_bits, A->layer_moe, sizeof moe_bits);
    if (at[1] >= 0 && at[0] >= 0) {
        const char *d = layer_differs(&first[0], &first[1], false);
        if (d)
            return rep_refuse(why, wn, "its dense layer %d and MoE layer %d differ in %s, where the frameworks "
                              "configure one value for every layer", at[0], at[1], d);
        if (!first[0].swiglu)
            return rep_refuse(why, wn, "its dense layers' MLP is GELU and its experts SwiGLU, and Megatron-LM's "
                              "--swiglu sets both");
        if (A->layers > REP_MAX_LAYERS)
            return rep_refuse(why, wn, "it mixes dense and MoE layers over %d layers, more than ptdc's emitters "
                              "take (%d)", A->layers, REP_MAX_LAYERS);
    }
    int n_dense = 0;
    for (int l = 0; l < A->layers && at[1] >= 0; l++)
        n_dense += !(moe_bits[l / 64] >> (l % 64) & 1);
    int x_out = x;
    *A = first[at[1] >= 0];
    memcpy(A->layer_moe, moe_bits, sizeof moe_bits);
    if (at[1] >= 0 && at[0] >= 0) {
        A->n_dense = n_dense;
        A->dense_ff = first[0].d_ff;
        A->dense_ff_dim = first[0].ff_dim;
    }
    if (!read_head(g, x_out, A, why, wn))
        return false;
    return read_window(g, A, why, wn) && read_attrs(g, A, why, wn);
}
