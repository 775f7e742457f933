/* ref_model.c: the model families of models/llama.mdl, models/gpt.mdl and
 * models/mixtral.mdl as Hugging Face defines them, forward and backward, in
 * double. Mixtral (MixtralForCausalLM) is LLaMA with every MLP a sparse MoE
 * block (ref_moe.c).
 *
 * LLaMA (LlamaForCausalLM): x = embed[tok]; per layer
 *   x += o_proj(attn(rope(q_proj(h)), rope(k_proj(h)), v_proj(h))), h = rmsnorm(x) * w
 *   x += down_proj(silu(gate_proj(h)) * up_proj(h)),                h = rmsnorm(x) * w
 * logits = lm_head(rmsnorm(x) * w); linear weights stored [out, in].
 * GPT-2 (GPT2LMHeadModel): x = wte[tok] + wpe[pos]; per layer
 *   x += c_proj(attn(split3(c_attn(h)))),    h = layernorm_1(x)
 *   x += mlp.c_proj(gelu_new(c_fc(h))),      h = layernorm_2(x)
 * logits = layernorm_f(x) wte^T; Conv1D weights stored [in, out] with biases.
 * DeepSeek-V3 (models/deepseek-v3.mdl): LLaMA's norms and head, each layer's
 * attention multi-head latent attention (ref_mla.c), its first first_dense
 * MLPs dense SwiGLU of width d_ff, the others MoE blocks (ref_moe.c: sigmoid
 * group-limited routing, the shared expert) under HF's DeepseekV3 names.
 * GPT-OSS (GptOssForCausalLM as models/gpt-oss.mdl has it): Mixtral's layer
 * with biases on q, k, v (before the rotation) and o, attention sinks (a
 * logit per head in every row's softmax, weighing no value: ref_ops.c), a
 * window on the layers whose attention has one, and the router's bias.
 * The loss is the mean cross-entropy over every token of the step. */
#include "ref.h"

#include "frontend.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- sizes */
static int64_t dim(const IrGraph *g, const char *name, int64_t dflt)
{
    int d = ir_dim_find(g, name);
    return d >= 0 ? g->dims[d].size : dflt;
}

/* An integer config constant (after overrides), 0 when absent. */
static int64_t iconst(const IrGraph *g, const char *name)
{
    const IrConst *k = ir_const_find(g, name);
    return k && k->is_int ? k->i : 0;
}

/* REF_SETS="name=value ...": the model's constants overridden as the
 * programs' (tests/codegen's CG_SETS --set), e.g. more KV heads. */
static int env_sets(FeSet *sets, int max, char *buf, size_t n)
{
    const char *e = getenv("REF_SETS");
    snprintf(buf, n, "%s", e ? e : "");
    int k = 0;
    for (char *tok = strtok(buf, " "); tok && k < max; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            fprintf(stderr, "ref: REF_SETS item '%s' is not name=value\n", tok);
            exit(2);
        }
        *eq = 0;
        sets[k++] = (FeSet){tok, eq + 1};
    }
    return k;
}

bool ref_config(const char *mdl, RefConfig *c)
{
    memset(c, 0, sizeof *c);
    static char setbuf[512];
    FeSet sets[16];
    int nsets = env_sets(sets, 16, setbuf, sizeof setbuf);
    IrArena *a = ir_arena_new();
    IrGraph *g = fe_compile_file(a, mdl, sets, nsets, 0);
    if (!g) {
        ir_arena_free(a);
        return false;
    }
    bool rms = false, ln = false, moe = false, route_ok = true, sinks = false, ssd = false;
    int natt = 0;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op == IR_OP_ATTENTION) { /* GPT-OSS: sinks, a window per layer */
            sinks |= n->nin == 4;
            if (natt < 64)
                c->win[natt] = n->attr.window;
            natt++;
        }
        if (n->op == IR_OP_ROUTE) {
            /* the router Mixtral has: softmax, top-k, optional norm and regularisers */
            const IrRoute *r = &n->attr.route;
            const IrTensor *gt = &g->tensors[n->out[0]];
            c->E = g->dims[gt->dim[gt->rank - 1]].size;
            c->K = r->topk;
            c->moe_norm = r->norm;
            c->aux = r->aux, c->zloss = r->zloss;
            c->sigmoid = r->score != IR_SCORE_SOFTMAX;
            c->G = r->groups, c->Gk = r->group_topk, c->scale = r->scale;
            route_ok &= r->capacity == 0;
        }
        if (n->op == IR_OP_MOE) { /* e_gate (or e_up) [n_experts, d_model, d_expert] */
            const IrTensor *wg = &g->tensors[n->in[2]];
            moe = true;
            c->moe_act = n->attr.moe_act;
            c->F = g->dims[wg->dim[2]].size;
        }
        if (n->op == IR_OP_RMSNORM)
            rms = true, c->eps = n->attr.eps;
        if (n->op == IR_OP_LAYERNORM)
            ln = true, c->eps = n->attr.eps;
        if (n->op == IR_OP_ROPE)
            c->theta = n->attr.theta;
        ssd |= n->op == IR_OP_SSD;
    }
    if (ssd) { /* models/hybrid.mdl: Mamba-2 and attention layers alternating */
        c->fam = REF_HYBRID;
        c->MH = dim(g, "m_heads", 0), c->MP = dim(g, "m_head_dim", 0);
        c->MN = dim(g, "m_state", 0), c->MK = dim(g, "conv_k", 0);
        c->D = dim(g, "d_model", 0), c->H = dim(g, "n_heads", 0), c->KVH = dim(g, "n_kv_heads", c->H);
        c->Dh = dim(g, "head_dim", 0), c->V = dim(g, "vocab", 0);
        c->S = g->dims[g->seq_dim].size, c->B = g->global_batch;
        c->MG = dim(g, "m_groups", 1), c->Fd = dim(g, "d_ff", 0);
        if (dim(g, "m_hpg", 0) > 0) /* nemotron3.mdl: heads as [m_groups, m_hpg] */
            c->MH = c->MG * dim(g, "m_hpg", 0);
        /* the layers' kinds in order, each piece's by its operators (a
         * hybrid.mdl piece is a pair: M then *) */
        c->L = 0;
        for (int p = 0; p < g->npieces; p++) {
            const IrPiece *P = &g->pieces[p];
            bool pmoe = false; /* an MoE layer's shared expert computes relu2 too: it is E (or L), not - */
            for (int i = P->first; P->rep >= 0 && i < P->first + P->count; i++)
                pmoe |= g->nodes[i].op == IR_OP_MOE;
            for (int i = P->first; P->rep >= 0 && i < P->first + P->count; i++) {
                const IrNode *n = &g->nodes[i];
                const IrTensor *hin = n->op == IR_OP_MOE ? &g->tensors[n->in[0]] : NULL;
                /* a latent MoE (nemotron3.mdl's L): the experts' input is
                 * narrower than d_model, fc1_latent_proj's output */
                char k = n->op == IR_OP_SSD          ? 'M'
                         : n->op == IR_OP_ATTENTION  ? '*'
                         : hin                       ? (g->dims[hin->dim[hin->rank - 1]].size != dim(g, "d_model", 0) ? 'L' : 'E')
                         : n->op == IR_OP_RELU2 && !pmoe ? '-'
                                                     : 0;
                if (k == 'L')
                    c->DL = g->dims[hin->dim[hin->rank - 1]].size;
                if (k && c->L < (int64_t)sizeof c->kinds - 1)
                    c->kinds[c->L++] = k;
            }
        }
        if (moe) /* nemotron3.mdl's MoE layers: squared-ReLU experts and a shared expert of d_shared */
            c->Fs = dim(g, "d_shared", 0);
        /* multi-token prediction (nemotron3.mdl's mtp_depth): each later
         * cross-entropy a depth, its weight; the layers of a depth, by their
         * mixers, from the first join (eh_proj's input) to the first depth's
         * loss; every depth runs the same layer (mtp_use_repeated_layer) */
        bool cat = false, in_moe = false;
        for (int i = 0; i < g->nfwd; i++) {
            const IrNode *n = &g->nodes[i];
            if (n->op == IR_OP_CROSS_ENTROPY && n->out[0] != g->loss) {
                c->mtp++, c->mtp_w = ir_loss_weight(&n->attr);
                cat = false;
            }
            if (n->op == IR_OP_CONCAT && !c->mtp)
                cat = true;
            if (!cat || c->mtp || c->nmk >= (int64_t)sizeof c->mkinds - 1)
                continue;
            if (n->op == IR_OP_RMSNORM && n->in[0] >= 0 && g->tensors[n->in[0]].producer >= 0 &&
                g->nodes[g->tensors[n->in[0]].producer].op == IR_OP_ADD)
                in_moe = false; /* a layer's input norm (or the depth's final one) */
            if (n->op == IR_OP_ROUTE)
                in_moe = true;
            char k = n->op == IR_OP_SSD ? 'M' : n->op == IR_OP_ATTENTION ? '*' :
                     n->op == IR_OP_MOE ? (g->dims[g->tensors[n->in[0]].dim[g->tensors[n->in[0]].rank - 1]].size !=
                                           dim(g, "d_model", 0) ? 'L' : 'E') :
                     n->op == IR_OP_RELU2 && !in_moe ? '-' : 0;
            if (k)
                c->mkinds[c->nmk++] = k;
        }
        bool ok = rms && (!moe || (route_ok && c->E > 0 && c->E <= 256 && c->K >= 1 && c->K <= c->E &&
                                   c->moe_act == IR_MOE_RELU2 && c->G <= 1)) &&
                  c->MH > 0 && c->MG > 0 && c->MH % c->MG == 0 && (c->Fd > 0 || !strchr(c->kinds, '-')) && c->MP > 0 && c->MN > 0 && c->MK > 0 && c->D > 0 && c->H > 0 &&
                  c->Dh > 0 && c->V > 0 && c->L > 0 && c->H % c->KVH == 0 && (!c->mtp || c->nmk > 0);
        if (!ok)
            fprintf(stderr, "ref: %s is not the Mamba-2 hybrid the reference knows\n", mdl);
        ir_graph_free(g);
        ir_arena_free(a);
        return ok;
    }
    c->fam = moe && sinks ? REF_GPTOSS : moe ? REF_MIXTRAL : rms ? REF_LLAMA : REF_GPT;
    c->KR = dim(g, "kv_lora_rank", 0);
    if (moe && c->KR > 0) { /* DeepSeek: multi-head latent attention */
        c->fam = REF_DEEPSEEK;
        c->QR = dim(g, "q_lora_rank", 0), c->Dn = dim(g, "qk_nope_dim", 0);
        c->Dr = dim(g, "qk_rope_dim", 0), c->Dv = dim(g, "v_head_dim", 0);
        c->first_dense = iconst(g, "first_dense"), c->Fd = iconst(g, "d_ff");
        c->Fs = iconst(g, "d_shared");
        /* multi-token prediction: a second cross-entropy, its weight */
        for (int i = 0; i < g->nfwd; i++)
            if (g->nodes[i].op == IR_OP_CROSS_ENTROPY && g->nodes[i].out[0] != g->loss)
                c->mtp++, c->mtp_w = ir_loss_weight(&g->nodes[i].attr);
    }
    c->D = dim(g, "d_model", 0);
    c->H = dim(g, "n_heads", 0);
    c->KVH = dim(g, "n_kv_heads", c->H);
    c->Dh = dim(g, "head_dim", 0);
    if (!moe)
        c->F = dim(g, "d_ff", 0);
    c->V = dim(g, "vocab", 0);
    c->S = g->dims[g->seq_dim].size;
    c->B = g->global_batch;
    for (int i = 0; i < g->npieces; i++)
        if (g->pieces[i].layer + 1 > c->L)
            c->L = g->pieces[i].layer + 1;
    if (c->fam == REF_DEEPSEEK) /* two repeat blocks, each numbering its layers from 0 */
        c->L = iconst(g, "n_layers");
    bool ok = c->mtp <= 1 && rms != ln && c->D > 0 && c->H > 0 && c->F > 0 && c->V > 0 && c->L > 0 && c->H % c->KVH == 0;
    if (c->fam == REF_DEEPSEEK)
        ok &= c->QR > 0 && c->Dn > 0 && c->Dr > 0 && c->Dr % 2 == 0 && c->Dv > 0 &&
              (c->first_dense == 0 || c->Fd > 0) && (c->G <= 1 || (c->E % c->G == 0 && c->G <= 256)) &&
              c->E <= 256 && (c->Fd > 0 || c->first_dense == 0);
    else if (c->fam == REF_GPTOSS)
        ok &= c->Dh > 0 && c->L <= 64;
    else
        ok &= c->Dh * c->H == c->D;
    /* Mixtral's router: softmax, no groups, no scale */
    if (moe && (c->fam == REF_MIXTRAL || c->fam == REF_GPTOSS))
        route_ok &= !c->sigmoid && c->G <= 1 && (c->scale == 0 || c->scale == 1);
    if (moe)
        ok &= rms && route_ok && c->E > 0 && c->K >= 1 && c->K <= c->E;
    if (!ok)
        fprintf(stderr, "ref: %s is neither a LLaMA, a GPT, a Mixtral, a DeepSeek nor a GPT-OSS the reference "
                "knows\n", mdl);
    ir_graph_free(g);
    ir_arena_free(a);
    return ok;
}

/* ------------------------------------------------------------ tensors */
static const char *fmt(const char *f, ...)
{
    static char buf[8][128];
    static int k;
    k = (k + 1) % 8;
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf[k], sizeof buf[k], f, ap);
    va_end(ap);
    return buf[k];
}

static double *T(const RefSt *st, const char *name)
{
    RefTensor *t = ref_st_find(st, name);
    if (!t) {
        fprintf(stderr, "ref: no tensor %s\n", name);
        exit(1);
    }
    return t->v;
}

uint64_t ref_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double ref_normal(uint64_t *s)
{
    double u1 = ((double)(ref_rand(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(ref_rand(s) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fill(RefSt *st, uint64_t *s, const char *name, int ndim, int64_t a, int64_t b,
                 double mean, double std)
{
    int64_t shape[2] = {a, b};
    RefTensor *t = ref_st_add(st, name, ndim, shape);
    for (int64_t i = 0; i < t->n; i++)
        t->v[i] = (double)(float)(mean + std * ref_normal(s)); /* exactly what the file holds */
}

/* GPT-OSS's layer after its input norm: projections with biases, the sinks,
 * the router with its bias and the experts stacked [E, D, F], [E, F, D]
 * (written to the file fused as Hugging Face stores them: ref_oss.c). */
static void gptoss_layer(const RefConfig *c, RefSt *st, uint64_t *s, const char *p, int l)
{
    const double MAT = 0.08, NORM = 0.2, BIAS = 0.1;
    int64_t D = c->D, HD = c->H * c->Dh, KD = c->KVH * c->Dh, F = c->F, E = c->E;
    fill(st, s, fmt("%sself_attn.q_proj.weight", p), 2, HD, D, 0, MAT);
    fill(st, s, fmt("%sself_attn.q_proj.bias", p), 1, HD, 1, 0, BIAS);
    fill(st, s, fmt("%sself_attn.k_proj.weight", p), 2, KD, D, 0, MAT);
    fill(st, s, fmt("%sself_attn.k_proj.bias", p), 1, KD, 1, 0, BIAS);
    fill(st, s, fmt("%sself_attn.v_proj.weight", p), 2, KD, D, 0, MAT);
    fill(st, s, fmt("%sself_attn.v_proj.bias", p), 1, KD, 1, 0, BIAS);
    fill(st, s, fmt("%sself_attn.o_proj.weight", p), 2, D, HD, 0, MAT);
    fill(st, s, fmt("%sself_attn.o_proj.bias", p), 1, D, 1, 0, BIAS);
    fill(st, s, fmt("%sself_attn.sinks", p), 1, c->H, 1, 0, 1); /* logits the scores' size: a real share */
    fill(st, s, fmt("%spost_attention_layernorm.weight", p), 1, D, 1, 1, NORM);
    fill(st, s, fmt("%smlp.router.weight", p), 2, E, D, 0, MAT);
    fill(st, s, fmt("%smlp.router.bias", p), 1, E, 1, 0, BIAS);
    const char *ex[] = {"e_gate", "e_up", "e_down"};
    for (int i = 0; i < 3; i++) {
        int64_t shape[3] = {E, i < 2 ? D : F, i < 2 ? F : D};
        RefTensor *t = ref_st_add(st, fmt("layers.%d.%s", l, ex[i]), 3, shape);
        for (int64_t j = 0; j < t->n; j++)
            t->v[j] = (double)(float)(MAT * ref_normal(s));
    }
    /* The experts' biases; the gate and up ones wide enough (std 4) that
     * about 1 pre-activation in 12 lies past the clamps (gate above 7, up
     * outside [-7, 7]), so the clamps and their zero gradients are checked. */
    const char *eb[] = {"e_gate_b", "e_up_b", "e_down_b"};
    for (int i = 0; i < 3; i++) {
        int64_t shape[2] = {E, i < 2 ? F : D};
        RefTensor *t = ref_st_add(st, fmt("layers.%d.%s", l, eb[i]), 2, shape);
        for (int64_t j = 0; j < t->n; j++)
            t->v[j] = (double)(float)((i < 2 ? 4.0 : BIAS) * ref_normal(s));
    }
}

/* DeepSeek's layer after its input norm: MLA's tensors (ref_mla.c), then a
 * dense MLP or the MoE block with its shared expert. */
static void deepseek_layer(const RefConfig *c, RefSt *st, uint64_t *s, const char *p, int l)
{
    const double MAT = 0.08, NORM = 0.2;
    int64_t D = c->D, H = c->H, Dqk = c->Dn + c->Dr, F = c->F;
    fill(st, s, fmt("%sself_attn.q_a_proj.weight", p), 2, c->QR, D, 0, MAT);
    fill(st, s, fmt("%sself_attn.q_a_layernorm.weight", p), 1, c->QR, 1, 1, NORM);
    fill(st, s, fmt("%sself_attn.q_b_proj.weight", p), 2, H * Dqk, c->QR, 0, MAT);
    fill(st, s, fmt("%sself_attn.kv_a_proj_with_mqa.weight", p), 2, c->KR + c->Dr, D, 0, MAT);
    fill(st, s, fmt("%sself_attn.kv_a_layernorm.weight", p), 1, c->KR, 1, 1, NORM);
    fill(st, s, fmt("%sself_attn.kv_b_proj.weight", p), 2, H * (c->Dn + c->Dv), c->KR, 0, MAT);
    fill(st, s, fmt("%sself_attn.o_proj.weight", p), 2, D, H * c->Dv, 0, MAT);
    fill(st, s, fmt("%spost_attention_layernorm.weight", p), 1, D, 1, 1, NORM);
    if (l < c->first_dense) {
        fill(st, s, fmt("%smlp.gate_proj.weight", p), 2, c->Fd, D, 0, MAT);
        fill(st, s, fmt("%smlp.up_proj.weight", p), 2, c->Fd, D, 0, MAT);
        fill(st, s, fmt("%smlp.down_proj.weight", p), 2, D, c->Fd, 0, MAT);
        return;
    }
    fill(st, s, fmt("%smlp.gate.weight", p), 2, c->E, D, 0, MAT);
    for (int e = 0; e < c->E; e++) {
        fill(st, s, fmt("%smlp.experts.%d.gate_proj.weight", p, e), 2, F, D, 0, MAT);
        fill(st, s, fmt("%smlp.experts.%d.up_proj.weight", p, e), 2, F, D, 0, MAT);
        fill(st, s, fmt("%smlp.experts.%d.down_proj.weight", p, e), 2, D, F, 0, MAT);
    }
    if (c->Fs > 0) {
        fill(st, s, fmt("%smlp.shared_experts.gate_proj.weight", p), 2, c->Fs, D, 0, MAT);
        fill(st, s, fmt("%smlp.shared_experts.up_proj.weight", p), 2, c->Fs, D, 0, MAT);
        fill(st, s, fmt("%smlp.shared_experts.down_proj.weight", p), 2, D, c->Fs, 0, MAT);
    }
}

RefSt *ref_weights(const RefConfig *c, uint64_t seed)
{
    RefSt *st = ref_st_new();
    uint64_t s = seed;
    const double MAT = 0.08, NORM = 0.2, BIAS = 0.1;
    int64_t D = c->D, HD = c->H * c->Dh, KD = c->KVH * c->Dh, F = c->F, V = c->V;
    if (c->fam == REF_HYBRID) {
        ref_hybrid_weights(c, st, &s);
        return st;
    }
    if (c->fam != REF_GPT) {
        fill(st, &s, "model.embed_tokens.weight", 2, V, D, 0, 1);
        for (int l = 0; l < c->L; l++) {
            char p[64];
            snprintf(p, sizeof p, "model.layers.%d.", l);
            fill(st, &s, fmt("%sinput_layernorm.weight", p), 1, D, 1, 1, NORM);
            if (c->fam == REF_DEEPSEEK) {
                deepseek_layer(c, st, &s, p, l);
                continue;
            }
            if (c->fam == REF_GPTOSS) {
                gptoss_layer(c, st, &s, p, l);
                continue;
            }
            fill(st, &s, fmt("%sself_attn.q_proj.weight", p), 2, HD, D, 0, MAT);
            fill(st, &s, fmt("%sself_attn.k_proj.weight", p), 2, KD, D, 0, MAT);
            fill(st, &s, fmt("%sself_attn.v_proj.weight", p), 2, KD, D, 0, MAT);
            fill(st, &s, fmt("%sself_attn.o_proj.weight", p), 2, D, HD, 0, MAT);
            fill(st, &s, fmt("%spost_attention_layernorm.weight", p), 1, D, 1, 1, NORM);
            if (c->fam == REF_MIXTRAL) {
                fill(st, &s, fmt("%sblock_sparse_moe.gate.weight", p), 2, c->E, D, 0, MAT);
                for (int e = 0; e < c->E; e++) {
                    if (ir_moe_acts[c->moe_act].gated) /* relu2's experts have no gate */
                        fill(st, &s, fmt("%sblock_sparse_moe.experts.%d.w1.weight", p, e), 2, F, D, 0, MAT);
                    fill(st, &s, fmt("%sblock_sparse_moe.experts.%d.w3.weight", p, e), 2, F, D, 0, MAT);
                    fill(st, &s, fmt("%sblock_sparse_moe.experts.%d.w2.weight", p, e), 2, D, F, 0, MAT);
                }
                continue;
            }
            fill(st, &s, fmt("%smlp.gate_proj.weight", p), 2, F, D, 0, MAT);
            fill(st, &s, fmt("%smlp.up_proj.weight", p), 2, F, D, 0, MAT);
            fill(st, &s, fmt("%smlp.down_proj.weight", p), 2, D, F, 0, MAT);
        }
        fill(st, &s, "model.norm.weight", 1, D, 1, 1, NORM);
        fill(st, &s, "lm_head.weight", 2, V, D, 0, MAT);
        if (c->mtp) { /* the MTP module, layer L in Hugging Face's DeepSeek-V3 names */
            char p[64];
            snprintf(p, sizeof p, "model.layers.%d.", (int)c->L);
            fill(st, &s, fmt("%senorm.weight", p), 1, D, 1, 1, NORM);
            fill(st, &s, fmt("%shnorm.weight", p), 1, D, 1, 1, NORM);
            fill(st, &s, fmt("%seh_proj.weight", p), 2, D, 2 * D, 0, MAT);
            fill(st, &s, fmt("%sinput_layernorm.weight", p), 1, D, 1, 1, NORM);
            deepseek_layer(c, st, &s, p, (int)c->L);
            fill(st, &s, fmt("%sshared_head.norm.weight", p), 1, D, 1, 1, NORM);
        }
    } else {
        fill(st, &s, "wte.weight", 2, V, D, 0, 0.2);
        fill(st, &s, "wpe.weight", 2, c->S, D, 0, BIAS);
        for (int l = 0; l < c->L; l++) {
            char p[64];
            snprintf(p, sizeof p, "h.%d.", l);
            fill(st, &s, fmt("%sln_1.weight", p), 1, D, 1, 1, NORM);
            fill(st, &s, fmt("%sln_1.bias", p), 1, D, 1, 0, BIAS);
            fill(st, &s, fmt("%sattn.c_attn.weight", p), 2, D, 3 * D, 0, MAT);
            fill(st, &s, fmt("%sattn.c_attn.bias", p), 1, 3 * D, 1, 0, BIAS);
            fill(st, &s, fmt("%sattn.c_proj.weight", p), 2, D, D, 0, MAT);
            fill(st, &s, fmt("%sattn.c_proj.bias", p), 1, D, 1, 0, BIAS);
            fill(st, &s, fmt("%sln_2.weight", p), 1, D, 1, 1, NORM);
            fill(st, &s, fmt("%sln_2.bias", p), 1, D, 1, 0, BIAS);
            fill(st, &s, fmt("%smlp.c_fc.weight", p), 2, D, F, 0, MAT);
            fill(st, &s, fmt("%smlp.c_fc.bias", p), 1, F, 1, 0, BIAS);
            fill(st, &s, fmt("%smlp.c_proj.weight", p), 2, F, D, 0, MAT);
            fill(st, &s, fmt("%smlp.c_proj.bias", p), 1, D, 1, 0, BIAS);
        }
        fill(st, &s, "ln_f.weight", 1, D, 1, 1, NORM);
        fill(st, &s, "ln_f.bias", 1, D, 1, 0, BIAS);
    }
    return st;
}

/* ------------------------------------------------------------ the step */
/* What one layer keeps for its backward. */
typedef struct Layer {
    double *x_in, *h1, *xh1, *rs1, *q, *k, *v, *p, *a, *x_mid, *h2, *xh2, *rs2, *f1, *f2, *m;
    RefMla *mla; /* DeepSeek's attention */
} Layer;

static void add_bias(double *y, const double *b, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            y[r * cols + j] += b[j];
}

static void sum_rows(double *db, const double *dy, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++)
            db[j] += dy[r * cols + j];
}

static void axpy(double *y, const double *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

/* y [R, out] = x W^T (LLaMA, W [out, in]) or x W (GPT Conv1D, W [in, out]). */
static void linear(const RefConfig *c, double *y, const double *x, const double *w, int64_t R,
                   int64_t in, int64_t out)
{
    ref_mm(y, x, w, R, out, in, false, c->fam != REF_GPT, false);
}

/* dW += (gradient of linear's weight); dx (+)= dy W^T or dy W. */
static void linear_bwd(const RefConfig *c, double *dx, double *dw, const double *dy, const double *x,
                       const double *w, int64_t R, int64_t in, int64_t out, bool acc)
{
    if (c->fam != REF_GPT) {
        ref_mm(dw, dy, x, out, in, R, true, false, true);
        ref_mm(dx, dy, w, R, in, out, false, false, acc);
    } else {
        ref_mm(dw, x, dy, in, out, R, true, false, true);
        ref_mm(dx, dy, w, R, in, out, false, true, acc);
    }
}

/* The final norm, the head and the mean cross-entropy (dlogits when not NULL). */
static double head_fwd(const RefConfig *c, const RefSt *w, const double *x, const int32_t *targets,
                       double *xf, double *xhf, double *rsf, double *logits, double *dlogits)
{
    const bool llama = c->fam != REF_GPT;
    const int64_t R = c->B * c->S, D = c->D, V = c->V;
    if (llama)
        ref_rmsnorm_fwd(xf, rsf, x, T(w, "model.norm.weight"), R, D, c->eps);
    else
        ref_layernorm_fwd(xf, xhf, rsf, x, T(w, "ln_f.weight"), T(w, "ln_f.bias"), R, D, c->eps);
    ref_mm(logits, xf, T(w, llama ? "lm_head.weight" : "wte.weight"), R, V, D, false, true, false);
    return ref_cross_entropy(logits, targets, R, V, dlogits);
}

/* Multi-token prediction, depth 1 (the DeepSeek-V3 report, section 2.2, in
 * Megatron-Core's form): h' = M [RMSNorm(Emb(t_{i+1})); RMSNorm(h_i)], h the
 * main model's normalised output, then one more layer (the caller's loop),
 * its own norm, the shared head, and cross-entropy against t_{i+2} (the
 * targets one further on), the last position of each sequence without
 * one, meaned over the others and weighted lambda. */
typedef struct Mtp {
    int32_t *tok, *tgt;                 /* the shifted tokens (0 past the end) and targets (-1) */
    double *en, *rse, *hn, *rsh, *cat;  /* the normalised embedding and hidden state, joined */
    double *xf, *rsf, *logits, *dlogits;
} Mtp;

static void mtp_in(const RefConfig *c, const RefSt *w, Mtp *m, const int32_t *tokens, const int32_t *targets,
                   const double *h, double *x0)
{
    const int64_t R = c->B * c->S, D = c->D, S = c->S;
    char p[64];
    snprintf(p, sizeof p, "model.layers.%d.", (int)c->L);
    m->tok = calloc((size_t)R, sizeof(int32_t)), m->tgt = calloc((size_t)R, sizeof(int32_t));
    for (int64_t r = 0; r < R; r++) {
        bool in = r % S + 1 < S;
        m->tok[r] = in ? tokens[r + 1] : 0;
        m->tgt[r] = in ? targets[r + 1] : -1;
    }
    double *e = ref_zeros(R * D);
    const double *E = T(w, "model.embed_tokens.weight");
    for (int64_t r = 0; r < R; r++)
        memcpy(e + r * D, E + m->tok[r] * D, sizeof(double) * (size_t)D);
    m->en = ref_zeros(R * D), m->rse = ref_zeros(R), m->hn = ref_zeros(R * D), m->rsh = ref_zeros(R);
    ref_rmsnorm_fwd(m->en, m->rse, e, T(w, fmt("%senorm.weight", p)), R, D, c->eps);
    ref_rmsnorm_fwd(m->hn, m->rsh, h, T(w, fmt("%shnorm.weight", p)), R, D, c->eps);
    m->cat = ref_zeros(R * 2 * D);
    for (int64_t r = 0; r < R; r++) {
        memcpy(m->cat + r * 2 * D, m->en + r * D, sizeof(double) * (size_t)D);
        memcpy(m->cat + r * 2 * D + D, m->hn + r * D, sizeof(double) * (size_t)D);
    }
    ref_mm(x0, m->cat, T(w, fmt("%seh_proj.weight", p)), R, D, 2 * D, false, true, false);
    free(e);
}

/* The MTP head: its norm, the shared head, the masked weighted loss. */
static double mtp_out(const RefConfig *c, const RefSt *w, Mtp *m, const double *x, bool grads)
{
    const int64_t R = c->B * c->S, D = c->D, V = c->V;
    char p[64];
    snprintf(p, sizeof p, "model.layers.%d.", (int)c->L);
    m->xf = ref_zeros(R * D), m->rsf = ref_zeros(R), m->logits = ref_zeros(R * V);
    ref_rmsnorm_fwd(m->xf, m->rsf, x, T(w, fmt("%sshared_head.norm.weight", p)), R, D, c->eps);
    ref_mm(m->logits, m->xf, T(w, "lm_head.weight"), R, V, D, false, true, false);
    return ref_masked_cross_entropy(m->logits, m->tgt, R, V, c->mtp_w, grads ? &m->dlogits : NULL);
}

double ref_step(const RefConfig *c, const RefSt *w, const int32_t *tokens, const int32_t *targets,
                double *logits_out, RefSt *gr)
{
    if (c->fam == REF_HYBRID)
        return ref_hybrid_step(c, w, tokens, targets, logits_out, gr);
    const bool llama = c->fam != REF_GPT; /* LLaMA's norms and MLP names (and attention but DeepSeek's) */
    const bool deepseek = c->fam == REF_DEEPSEEK;
    const bool oss = c->fam == REF_GPTOSS;
    double reg = 0; /* the MoE blocks' regularisers */
    const int64_t R = c->B * c->S, D = c->D, H = c->H, KVH = c->KVH, Dh = c->Dh, F = c->F, V = c->V;
    const int64_t HD = H * Dh, KD = KVH * Dh;
    const int64_t Fmax = deepseek && c->Fd > F ? c->Fd : F; /* DeepSeek's dense layers are wider */
    const char *emb = llama ? "model.embed_tokens.weight" : "wte.weight";
    Layer *ly = calloc((size_t)(c->L + c->mtp), sizeof *ly);
    Mtp mt = {0};
    double *xmain = NULL, mtp_loss = 0; /* the main model's output (MTP reads it) */
    double *xf = ref_zeros(R * D), *xhf = ref_zeros(R * D), *rsf = ref_zeros(R), *logits = ref_zeros(R * V);
    double *dlogits = gr ? ref_zeros(R * V) : NULL;
    double loss = 0;
    double *x = ref_zeros(R * D);
    const double *E = T(w, emb);
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < D; j++)
            x[r * D + j] = E[tokens[r] * D + j] + (llama ? 0 : T(w, "wpe.weight")[(r % c->S) * D + j]);

    /* ---------------------------------------------------------- forward */
    for (int l = 0; l < c->L + c->mtp; l++) {
        Layer *L = &ly[l];
        if (l == c->L) { /* the main model's loss, then the MTP layer's input */
            loss = head_fwd(c, w, x, targets, xf, xhf, rsf, logits, dlogits);
            xmain = x;
            x = ref_zeros(R * D);
            mtp_in(c, w, &mt, tokens, targets, xf, x);
        }
        char p[64]; /* fmt's buffers are reused: keep the prefix */
        snprintf(p, sizeof p, llama ? "model.layers.%d." : "h.%d.", l);
        L->x_in = x;
        L->h1 = ref_zeros(R * D), L->xh1 = ref_zeros(R * D), L->rs1 = ref_zeros(R);
        L->q = ref_zeros(R * HD), L->k = ref_zeros(R * KD), L->v = ref_zeros(R * KD);
        L->p = ref_zeros(c->B * H * c->S * c->S), L->a = ref_zeros(R * HD);
        /* this layer's MLP: a MoE block, or a dense one of width Fl */
        const bool moe = c->fam == REF_MIXTRAL || oss || (deepseek && l >= c->first_dense);
        const int64_t Fl = deepseek && !moe ? c->Fd : F;
        if (deepseek) {
            ref_rmsnorm_fwd(L->h1, L->rs1, x, T(w, fmt("%sinput_layernorm.weight", p)), R, D, c->eps);
        } else if (llama) {
            ref_rmsnorm_fwd(L->h1, L->rs1, x, T(w, fmt("%sinput_layernorm.weight", p)), R, D, c->eps);
            linear(c, L->q, L->h1, T(w, fmt("%sself_attn.q_proj.weight", p)), R, D, HD);
            linear(c, L->k, L->h1, T(w, fmt("%sself_attn.k_proj.weight", p)), R, D, KD);
            linear(c, L->v, L->h1, T(w, fmt("%sself_attn.v_proj.weight", p)), R, D, KD);
            if (oss) { /* biases before the rotation */
                add_bias(L->q, T(w, fmt("%sself_attn.q_proj.bias", p)), R, HD);
                add_bias(L->k, T(w, fmt("%sself_attn.k_proj.bias", p)), R, KD);
                add_bias(L->v, T(w, fmt("%sself_attn.v_proj.bias", p)), R, KD);
            }
            ref_rope(L->q, R, c->S, H, Dh, c->theta, false);
            ref_rope(L->k, R, c->S, KVH, Dh, c->theta, false);
        } else {
            ref_layernorm_fwd(L->h1, L->xh1, L->rs1, x, T(w, fmt("%sln_1.weight", p)),
                              T(w, fmt("%sln_1.bias", p)), R, D, c->eps);
            double *qkv = ref_zeros(R * 3 * D);
            linear(c, qkv, L->h1, T(w, fmt("%sattn.c_attn.weight", p)), R, D, 3 * D);
            add_bias(qkv, T(w, fmt("%sattn.c_attn.bias", p)), R, 3 * D);
            for (int64_t r = 0; r < R; r++) {
                memcpy(L->q + r * D, qkv + r * 3 * D, sizeof(double) * (size_t)D);
                memcpy(L->k + r * D, qkv + r * 3 * D + D, sizeof(double) * (size_t)D);
                memcpy(L->v + r * D, qkv + r * 3 * D + 2 * D, sizeof(double) * (size_t)D);
            }
            free(qkv);
        }
        L->x_mid = ref_zeros(R * D);
        if (deepseek)
            L->mla = ref_mla_fwd(c, w, p, L->h1, L->x_mid);
        else
            ref_attention_sw_fwd(L->a, L->p, L->q, L->k, L->v, oss ? T(w, fmt("%sself_attn.sinks", p)) : NULL,
                                 oss ? c->win[l] : 0, c->B, c->S, H, KVH, Dh);
        if (!deepseek)
            linear(c, L->x_mid, L->a, T(w, llama ? fmt("%sself_attn.o_proj.weight", p) : fmt("%sattn.c_proj.weight", p)),
               R, HD, D);
        if (!llama)
            add_bias(L->x_mid, T(w, fmt("%sattn.c_proj.bias", p)), R, D);
        if (oss)
            add_bias(L->x_mid, T(w, fmt("%sself_attn.o_proj.bias", p)), R, D);
        axpy(L->x_mid, x, R * D);

        L->h2 = ref_zeros(R * D), L->xh2 = ref_zeros(R * D), L->rs2 = ref_zeros(R);
        L->f1 = ref_zeros(R * Fl), L->f2 = ref_zeros(R * Fl), L->m = ref_zeros(R * Fl);
        double *xo = ref_zeros(R * D);
        if (llama) {
            ref_rmsnorm_fwd(L->h2, L->rs2, L->x_mid, T(w, fmt("%spost_attention_layernorm.weight", p)),
                            R, D, c->eps);
            if (moe) {
                reg += ref_moe_fwd(c, w, p, L->h2, xo);
            } else {
                linear(c, L->f1, L->h2, T(w, fmt("%smlp.gate_proj.weight", p)), R, D, Fl);
                linear(c, L->f2, L->h2, T(w, fmt("%smlp.up_proj.weight", p)), R, D, Fl);
                for (int64_t i = 0; i < R * Fl; i++)
                    L->m[i] = ref_silu(L->f1[i]) * L->f2[i];
                linear(c, xo, L->m, T(w, fmt("%smlp.down_proj.weight", p)), R, Fl, D);
            }
        } else {
            ref_layernorm_fwd(L->h2, L->xh2, L->rs2, L->x_mid, T(w, fmt("%sln_2.weight", p)),
                              T(w, fmt("%sln_2.bias", p)), R, D, c->eps);
            linear(c, L->f1, L->h2, T(w, fmt("%smlp.c_fc.weight", p)), R, D, F);
            add_bias(L->f1, T(w, fmt("%smlp.c_fc.bias", p)), R, F);
            for (int64_t i = 0; i < R * F; i++)
                L->m[i] = ref_gelu(L->f1[i]);
            linear(c, xo, L->m, T(w, fmt("%smlp.c_proj.weight", p)), R, F, D);
            add_bias(xo, T(w, fmt("%smlp.c_proj.bias", p)), R, D);
        }
        axpy(xo, L->x_mid, R * D);
        x = xo;
    }
    if (c->mtp)
        mtp_loss = mtp_out(c, w, &mt, x, gr != NULL);
    else
        loss = head_fwd(c, w, x, targets, xf, xhf, rsf, logits, dlogits);
    const double *head = T(w, llama ? "lm_head.weight" : "wte.weight"); /* [V, D] */
    if (logits_out)
        memcpy(logits_out, logits, sizeof(double) * (size_t)(R * V));

    /* --------------------------------------------------------- backward */
    if (gr) {
        double *dxf = ref_zeros(R * D), *dx = ref_zeros(R * D);
        char mp[64];
        snprintf(mp, sizeof mp, "model.layers.%d.", (int)c->L);
        if (c->mtp) { /* the MTP head's backward: dx is then its layer's output gradient */
            ref_mm(T(gr, "lm_head.weight"), mt.dlogits, mt.xf, V, D, R, true, false, true);
            ref_mm(dxf, mt.dlogits, head, R, D, V, false, false, false);
            ref_rmsnorm_bwd(dx, T(gr, fmt("%sshared_head.norm.weight", mp)), dxf, x,
                            T(w, fmt("%sshared_head.norm.weight", mp)), mt.rsf, R, D);
        } else {
            ref_mm(T(gr, llama ? "lm_head.weight" : "wte.weight"), dlogits, xf, V, D, R, true, false, true);
            ref_mm(dxf, dlogits, head, R, D, V, false, false, false);
            if (llama)
                ref_rmsnorm_bwd(dx, T(gr, "model.norm.weight"), dxf, x, T(w, "model.norm.weight"), rsf, R, D);
            else
                ref_layernorm_bwd(dx, T(gr, "ln_f.weight"), T(gr, "ln_f.bias"), dxf, xhf, T(w, "ln_f.weight"),
                                  rsf, R, D);
        }
        double *dh = ref_zeros(R * D), *dm = ref_zeros(R * Fmax), *d1 = ref_zeros(R * Fmax), *d2 = ref_zeros(R * Fmax);
        double *da = ref_zeros(R * HD), *dq = ref_zeros(R * HD), *dk = ref_zeros(R * KD), *dv = ref_zeros(R * KD);
        double *tmp = ref_zeros(R * D);
        for (int l = (int)(c->L + c->mtp) - 1; l >= 0; l--) {
            Layer *L = &ly[l];
            if (c->mtp && l == c->L - 1) {
                /* dx is the MTP layer's input gradient: through eh_proj to
                 * the joined halves, their norms, the shifted tokens'
                 * embedding and the main model's normalised output, whose
                 * gradient joins the main head's. */
                double *dcat = ref_zeros(R * 2 * D), *den = ref_zeros(R * D), *dhn = ref_zeros(R * D);
                double *de = ref_zeros(R * D), *dh2 = ref_zeros(R * D), *e = ref_zeros(R * D);
                const char *eh = fmt("%seh_proj.weight", mp);
                ref_mm(T(gr, eh), dx, mt.cat, D, 2 * D, R, true, false, true);
                ref_mm(dcat, dx, T(w, eh), R, 2 * D, D, false, false, false);
                for (int64_t r = 0; r < R; r++) {
                    memcpy(den + r * D, dcat + r * 2 * D, sizeof(double) * (size_t)D);
                    memcpy(dhn + r * D, dcat + r * 2 * D + D, sizeof(double) * (size_t)D);
                    memcpy(e + r * D, T(w, emb) + mt.tok[r] * D, sizeof(double) * (size_t)D);
                }
                ref_rmsnorm_bwd(de, T(gr, fmt("%senorm.weight", mp)), den, e, T(w, fmt("%senorm.weight", mp)),
                                mt.rse, R, D);
                ref_rmsnorm_bwd(dh2, T(gr, fmt("%shnorm.weight", mp)), dhn, xf, T(w, fmt("%shnorm.weight", mp)),
                                mt.rsh, R, D);
                for (int64_t r = 0; r < R; r++)
                    for (int64_t j = 0; j < D; j++)
                        T(gr, emb)[mt.tok[r] * D + j] += de[r * D + j];
                ref_mm(T(gr, "lm_head.weight"), dlogits, xf, V, D, R, true, false, true);
                ref_mm(dxf, dlogits, head, R, D, V, false, false, false);
                axpy(dxf, dh2, R * D);
                ref_rmsnorm_bwd(dx, T(gr, "model.norm.weight"), dxf, xmain, T(w, "model.norm.weight"), rsf, R, D);
                free(dcat), free(den), free(dhn), free(de), free(dh2), free(e);
            }
            char p[64];
            snprintf(p, sizeof p, llama ? "model.layers.%d." : "h.%d.", l);
            const bool moe = c->fam == REF_MIXTRAL || oss || (deepseek && l >= c->first_dense);
            const int64_t Fl = deepseek && !moe ? c->Fd : F;
            /* MLP: dx is the gradient of the layer's output (and of x_mid through the residual). */
            if (moe) {
                ref_moe_bwd(c, w, gr, p, L->h2, dx, dh);
                ref_rmsnorm_bwd(tmp, T(gr, fmt("%spost_attention_layernorm.weight", p)), dh, L->x_mid,
                                T(w, fmt("%spost_attention_layernorm.weight", p)), L->rs2, R, D);
            } else if (llama) {
                linear_bwd(c, dm, T(gr, fmt("%smlp.down_proj.weight", p)), dx, L->m,
                           T(w, fmt("%smlp.down_proj.weight", p)), R, Fl, D, false);
                for (int64_t i = 0; i < R * Fl; i++) {
                    d1[i] = dm[i] * L->f2[i] * ref_silu_grad(L->f1[i]);
                    d2[i] = dm[i] * ref_silu(L->f1[i]);
                }
                linear_bwd(c, dh, T(gr, fmt("%smlp.gate_proj.weight", p)), d1, L->h2,
                           T(w, fmt("%smlp.gate_proj.weight", p)), R, D, Fl, false);
                linear_bwd(c, dh, T(gr, fmt("%smlp.up_proj.weight", p)), d2, L->h2,
                           T(w, fmt("%smlp.up_proj.weight", p)), R, D, Fl, true);
                ref_rmsnorm_bwd(tmp, T(gr, fmt("%spost_attention_layernorm.weight", p)), dh, L->x_mid,
                                T(w, fmt("%spost_attention_layernorm.weight", p)), L->rs2, R, D);
            } else {
                sum_rows(T(gr, fmt("%smlp.c_proj.bias", p)), dx, R, D);
                linear_bwd(c, dm, T(gr, fmt("%smlp.c_proj.weight", p)), dx, L->m,
                           T(w, fmt("%smlp.c_proj.weight", p)), R, F, D, false);
                for (int64_t i = 0; i < R * F; i++)
                    d1[i] = dm[i] * ref_gelu_grad(L->f1[i]);
                sum_rows(T(gr, fmt("%smlp.c_fc.bias", p)), d1, R, F);
                linear_bwd(c, dh, T(gr, fmt("%smlp.c_fc.weight", p)), d1, L->h2,
                           T(w, fmt("%smlp.c_fc.weight", p)), R, D, F, false);
                ref_layernorm_bwd(tmp, T(gr, fmt("%sln_2.weight", p)), T(gr, fmt("%sln_2.bias", p)), dh,
                                  L->xh2, T(w, fmt("%sln_2.weight", p)), L->rs2, R, D);
            }
            axpy(dx, tmp, R * D); /* now the gradient of x_mid */
            /* Attention. */
            if (deepseek) {
                ref_mla_bwd(c, w, gr, p, L->mla, L->h1, dx, dh);
                ref_rmsnorm_bwd(tmp, T(gr, fmt("%sinput_layernorm.weight", p)), dh, L->x_in,
                                T(w, fmt("%sinput_layernorm.weight", p)), L->rs1, R, D);
                axpy(dx, tmp, R * D);
                continue;
            }
            const char *wo = llama ? fmt("%sself_attn.o_proj.weight", p) : fmt("%sattn.c_proj.weight", p);
            if (!llama)
                sum_rows(T(gr, fmt("%sattn.c_proj.bias", p)), dx, R, D);
            if (oss)
                sum_rows(T(gr, fmt("%sself_attn.o_proj.bias", p)), dx, R, D);
            linear_bwd(c, da, T(gr, wo), dx, L->a, T(w, wo), R, HD, D, false);
            if (oss) { /* the sink's share of row i is 1 - sum_j p_ij: dsink -= share (dO_i . O_i) */
                double *ds = T(gr, fmt("%sself_attn.sinks", p));
                for (int64_t b = 0; b < c->B; b++)
                    for (int64_t h = 0; h < H; h++)
                        for (int64_t i = 0; i < c->S; i++) {
                            const double *pi = L->p + ((b * H + h) * c->S + i) * c->S;
                            double keys = 0, dot = 0;
                            for (int64_t j = 0; j < c->S; j++)
                                keys += pi[j];
                            for (int64_t d = 0; d < Dh; d++)
                                dot += da[((b * c->S + i) * H + h) * Dh + d] * L->a[((b * c->S + i) * H + h) * Dh + d];
                            ds[h] -= (1 - keys) * dot;
                        }
            }
            ref_attention_bwd(dq, dk, dv, da, L->p, L->q, L->k, L->v, c->B, c->S, H, KVH, Dh);
            if (llama) {
                ref_rope(dq, R, c->S, H, Dh, c->theta, true);
                ref_rope(dk, R, c->S, KVH, Dh, c->theta, true);
                if (oss) {
                    sum_rows(T(gr, fmt("%sself_attn.q_proj.bias", p)), dq, R, HD);
                    sum_rows(T(gr, fmt("%sself_attn.k_proj.bias", p)), dk, R, KD);
                    sum_rows(T(gr, fmt("%sself_attn.v_proj.bias", p)), dv, R, KD);
                }
                linear_bwd(c, dh, T(gr, fmt("%sself_attn.q_proj.weight", p)), dq, L->h1,
                           T(w, fmt("%sself_attn.q_proj.weight", p)), R, D, HD, false);
                linear_bwd(c, dh, T(gr, fmt("%sself_attn.k_proj.weight", p)), dk, L->h1,
                           T(w, fmt("%sself_attn.k_proj.weight", p)), R, D, KD, true);
                linear_bwd(c, dh, T(gr, fmt("%sself_attn.v_proj.weight", p)), dv, L->h1,
                           T(w, fmt("%sself_attn.v_proj.weight", p)), R, D, KD, true);
                ref_rmsnorm_bwd(tmp, T(gr, fmt("%sinput_layernorm.weight", p)), dh, L->x_in,
                                T(w, fmt("%sinput_layernorm.weight", p)), L->rs1, R, D);
            } else {
                double *dqkv = ref_zeros(R * 3 * D);
                for (int64_t r = 0; r < R; r++) {
                    memcpy(dqkv + r * 3 * D, dq + r * D, sizeof(double) * (size_t)D);
                    memcpy(dqkv + r * 3 * D + D, dk + r * D, sizeof(double) * (size_t)D);
                    memcpy(dqkv + r * 3 * D + 2 * D, dv + r * D, sizeof(double) * (size_t)D);
                }
                sum_rows(T(gr, fmt("%sattn.c_attn.bias", p)), dqkv, R, 3 * D);
                linear_bwd(c, dh, T(gr, fmt("%sattn.c_attn.weight", p)), dqkv, L->h1,
                           T(w, fmt("%sattn.c_attn.weight", p)), R, D, 3 * D, false);
                ref_layernorm_bwd(tmp, T(gr, fmt("%sln_1.weight", p)), T(gr, fmt("%sln_1.bias", p)), dh,
                                  L->xh1, T(w, fmt("%sln_1.weight", p)), L->rs1, R, D);
                free(dqkv);
            }
            axpy(dx, tmp, R * D); /* now the gradient of the layer's input */
        }
        double *dE = T(gr, emb);
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < D; j++) {
                dE[tokens[r] * D + j] += dx[r * D + j];
                if (!llama)
                    T(gr, "wpe.weight")[(r % c->S) * D + j] += dx[r * D + j];
            }
        free(dxf), free(dx), free(dh), free(dm), free(d1), free(d2);
        free(da), free(dq), free(dk), free(dv), free(tmp);
    }
    for (int l = 0; l < c->L + c->mtp; l++) {
        Layer *L = &ly[l];
        double *all[] = {l ? L->x_in : NULL, L->h1, L->xh1, L->rs1, L->q, L->k, L->v, L->p,
                         L->a, L->x_mid, L->h2, L->xh2, L->rs2, L->f1, L->f2, L->m};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            free(all[i]);
        ref_mla_free(L->mla);
    }
    free(ly[0].x_in);
    free(x);
    free(ly);
    free(xf), free(xhf), free(rsf), free(logits), free(dlogits);
    if (c->mtp) {
        free(xmain);
        free(mt.tok), free(mt.tgt), free(mt.en), free(mt.rse), free(mt.hn), free(mt.rsh), free(mt.cat);
        free(mt.xf), free(mt.rsf), free(mt.logits), free(mt.dlogits);
    }
    loss += mtp_loss; /* the objective the program minimises and prints */
    return c->objective ? loss + reg : loss;
}
