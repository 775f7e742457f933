/* hf_mdl.c: an HfModel written as a .mdl a person can read and edit: a
 * header saying where it came from and what was accepted without effect, a
 * config block whose every constant names its config.json key, and the model
 * body of the architecture with Hugging Face's parameter names (so
 * --import-hf and --export-hf exchange weights with transformers). The body
 * follows models/llama.mdl and models/gpt.mdl. */
#include "hf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Out {
    IrArena *a;
    char *s;
    size_t len, cap;
} Out;

__attribute__((format(printf, 2, 3))) static void put(Out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (o->len + (size_t)n + 1 > o->cap) {
        o->cap = (o->len + (size_t)n + 1) * 2;
        o->s = ir_xrealloc(o->s, o->cap);
    }
    va_start(ap, fmt);
    vsnprintf(o->s + o->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    o->len += (size_t)n;
}

/* The shortest decimal that reads back as the same double. */
static const char *num(char *buf, size_t n, const HfConst *c)
{
    if (c->is_int) {
        snprintf(buf, n, "%lld", (long long)c->i);
        return buf;
    }
    if (c->f == (double)(int64_t)c->f && c->f < 1e15) { /* 500000.0, not 5e+05 */
        snprintf(buf, n, "%.1f", c->f);
        return buf;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, c->f);
        if (strtod(buf, NULL) == c->f)
            break;
    }
    /* 1e-05 -> 1e-5 */
    char *e = strchr(buf, 'e');
    if (e) {
        char *d = e + 1 + (e[1] == '-' || e[1] == '+'), *z = d;
        while (*z == '0' && z[1])
            z++;
        memmove(d, z, strlen(z) + 1);
        if (e[1] == '+')
            memmove(e + 1, e + 2, strlen(e + 2) + 1);
    }
    return buf;
}

/* "  name = value    # why" with the comments aligned. */
static void constant(Out *o, const char *name, const char *value, const char *why)
{
    char lhs[160];
    snprintf(lhs, sizeof lhs, "  %-13s = %s", name, value);
    if (why)
        put(o, "%-38s # %s\n", lhs, why);
    else
        put(o, "%s\n", lhs);
}

static void cnum(Out *o, const char *name, const HfConst *c)
{
    char buf[64];
    constant(o, name, num(buf, sizeof buf, c), c->why);
}

static void header(Out *o, const HfModel *m)
{
    put(o, "# %s imported from %s by `ptdc import-hf`.\n", m->arch_name, m->path);
    put(o, "# Each constant names the config.json key it comes from; a key ptdc cannot\n"
           "# reproduce exactly is refused, never guessed. Parameter names are Hugging\n"
           "# Face's, so the training program's --import-hf and --export-hf exchange\n"
           "# weights with transformers.\n");
    if (m->nnotes) {
        put(o, "# Accepted without effect on what ptdc computes:\n");
        for (int i = 0; i < m->nnotes; i++)
            put(o, "#   %s\n", m->notes[i]);
    }
    put(o, "\nconfig {\n");
    cnum(o, "n_layers", &m->n_layers);
    cnum(o, "d_model", &m->d_model);
    cnum(o, "n_heads", &m->n_heads);
    if (m->arch != HF_GPT2) {
        if (m->kv_is_heads)
            constant(o, "n_kv_heads", "n_heads", "one dim: as many KV heads as query heads");
        else
            cnum(o, "n_kv_heads", &m->n_kv_heads);
    }
    if (m->head_dim_derived)
        constant(o, "head_dim", "d_model / n_heads", m->head_dim.why);
    else
        cnum(o, "head_dim", &m->head_dim);
    if (!m->moe || m->arch == HF_MIXTRAL || m->arch == HF_GPT_OSS)
        cnum(o, "d_ff", &m->d_ff);
    else if (m->any_dense)
        constant(o, "d_ff", num((char[64]){0}, 64, &m->d_ff), "intermediate_size: the dense layers' MLP");
    if (m->moe) {
        if (m->arch != HF_MIXTRAL && m->arch != HF_GPT_OSS)
            cnum(o, "d_expert", &m->d_expert);
        if (m->arch == HF_QWEN2_MOE) {
            cnum(o, "d_shared", &m->d_shared);
            constant(o, "n_shared", "1", "the shared expert (one, gated by a sigmoid)");
        }
        cnum(o, "n_experts", &m->n_experts);
        cnum(o, "topk", &m->topk);
        if (m->aux.f > 0)
            cnum(o, "aux_coeff", &m->aux);
    }
    cnum(o, "vocab", &m->vocab);
    if (m->arch == HF_GPT2) {
        cnum(o, "seq", &m->seq);
    } else {
        char why[160];
        snprintf(why, sizeof why, "%s; --set seq=N trains shorter", m->seq.why);
        char buf[64];
        constant(o, "seq", num(buf, sizeof buf, &m->seq), why);
    }
    cnum(o, "norm_eps", &m->norm_eps);
    if (m->arch != HF_GPT2)
        cnum(o, "rope_theta", &m->rope_theta);
    cnum(o, "init_std", &m->init_std);
    if (m->arch == HF_GPT2)
        constant(o, "proj_std", "init_std / sqrt(2 * n_layers)",
                 "HF's init of the c_proj weights");
    if (m->llama3) {
        cnum(o, "rope_factor", &m->rope_factor);
        cnum(o, "rope_low", &m->rope_low);
        cnum(o, "rope_high", &m->rope_high);
        cnum(o, "rope_original", &m->rope_orig);
    }
    if (m->window.set)
        cnum(o, "window", &m->window);
    constant(o, "global_batch", "max(1, 4194304 // seq)",
             "not in config.json: 4M tokens a step; --global-batch N");
    put(o, "}\n\n");
}

static const char *rope_args(const HfModel *m)
{
    return m->llama3 ? ", theta = rope_theta,\n"
                       "          scaling = llama3, factor = rope_factor, low_freq_factor = rope_low,\n"
                       "          high_freq_factor = rope_high, original_max_position = rope_original"
                     : ", theta = rope_theta";
}

/* One decoder layer of LLaMA, Mistral, Qwen2 and their MoE kin: the
 * attention block, then a dense MLP or a mixture of experts. idx is the
 * Hugging Face index of the layer as an hf-name index ("layer",
 * "layer + 3", "2 * layer + 1"), sfx a suffix for its parameters' names when
 * a repeat holds several layers. */
static void layer_llama(Out *o, const HfModel *m, const char *idx, const char *sfx, bool moe)
{
    char L[96];
    snprintf(L, sizeof L, "model.layers.{%s}", idx);
    put(o, "    block attn {\n");
    put(o, "      param attn_norm%s : [d_model] = ones hf \"%s.input_layernorm.weight\"\n", sfx, L);
    static const char *const qkv[3][3] = {{"wq", "n_heads", "q"}, {"wk", "n_kv_heads", "k"},
                                          {"wv", "n_kv_heads", "v"}};
    for (int i = 0; i < 3; i++)
        put(o, "      param %s%s : [d_model, %s, head_dim] = normal(init_std)\n"
               "        hf \"%s.self_attn.%s_proj.weight\" transposed\n",
            qkv[i][0], sfx, qkv[i][1], L, qkv[i][2]);
    if (m->qkv_bias)
        for (int i = 0; i < 3; i++)
            put(o, "      param b%s%s : [%s, head_dim] = zeros hf \"%s.self_attn.%s_proj.bias\"\n",
                qkv[i][2], sfx, qkv[i][1], L, qkv[i][2]);
    if (m->qk_norm)
        for (int i = 0; i < 2; i++)
            put(o, "      param %s_norm%s : [head_dim] = ones hf \"%s.self_attn.%s_norm.weight\"\n",
                qkv[i][2], sfx, L, qkv[i][2]);
    put(o, "      param wo%s : [n_heads, head_dim, d_model] = normal(init_std)\n"
           "        hf \"%s.self_attn.o_proj.weight\" transposed\n\n", sfx, L);
    put(o, "      h = rmsnorm(x, attn_norm%s, eps = norm_eps)\n", sfx);
    for (int i = 0; i < 2; i++) {
        const char *c = qkv[i][2];
        char proj[96];
        if (m->qkv_bias)
            snprintf(proj, sizeof proj, "matmul(h, w%s%s) + b%s%s", c, sfx, c, sfx);
        else
            snprintf(proj, sizeof proj, "matmul(h, w%s%s)", c, sfx);
        if (m->qk_norm)
            put(o, "      %s : [batch, seq, %s, head_dim]%s =\n"
                   "        rope(rmsnorm(%s, %s_norm%s, eps = norm_eps)%s)\n",
                c, qkv[i][1], i ? "" : "   ", proj, c, sfx, rope_args(m));
        else
            put(o, "      %s : [batch, seq, %s, head_dim]%s = rope(%s%s)\n", c, qkv[i][1],
                i ? "" : "   ", proj, rope_args(m));
    }
    put(o, "      v : [batch, seq, n_kv_heads, head_dim] = matmul(h, wv%s)", sfx);
    if (m->qkv_bias)
        put(o, " + bv%s", sfx);
    put(o, "\n      a = attention(q, k, v, causal = true%s)\n",
        m->window.set ? ", window = window" : "");
    put(o, "      x = x + matmul(a, wo%s)\n    }\n", sfx);
    if (!moe) {
        put(o, "    block mlp {\n");
        put(o, "      param mlp_norm%s : [d_model] = ones hf \"%s.post_attention_layernorm.weight\"\n",
            sfx, L);
        static const char *const mlp[3][3] = {{"w_gate", "[d_model, d_ff]", "gate"},
                                              {"w_up", "[d_model, d_ff]", "up"},
                                              {"w_down", "[d_ff, d_model]", "down"}};
        for (int i = 0; i < 3; i++)
            put(o, "      param %s%s : %s = normal(init_std)\n"
                   "        hf \"%s.mlp.%s_proj.weight\" transposed\n", mlp[i][0], sfx, mlp[i][1],
                L, mlp[i][2]);
        put(o, "\n      h = rmsnorm(x, mlp_norm%s, eps = norm_eps)\n"
               "      g = swiglu(matmul(h, w_gate%s), matmul(h, w_up%s))\n"
               "      x = x + matmul(g, w_down%s)\n    }\n", sfx, sfx, sfx, sfx);
        return;
    }
    /* Mixtral: block_sparse_moe.experts.N.w1 (gate), w3 (up), w2 (down);
     * the Qwens: mlp.experts.N.gate_proj, up_proj, down_proj. */
    bool mixtral = m->arch == HF_MIXTRAL;
    const char *blk = mixtral ? "block_sparse_moe" : "mlp";
    const char *width = mixtral ? "d_ff" : "d_expert";
    static const char *const ex[3][3] = {{"e_gate", "gate_proj", "w1"}, {"e_up", "up_proj", "w3"},
                                         {"e_down", "down_proj", "w2"}};
    put(o, "    block moe {\n");
    put(o, "      param mlp_norm%s : [d_model] = ones hf \"%s.post_attention_layernorm.weight\"\n",
        sfx, L);
    put(o, "      param w_router%s : [d_model, n_experts] = normal(init_std)\n"
           "        hf \"%s.%s.gate.weight\" transposed\n", sfx, L, blk);
    for (int i = 0; i < 3; i++)
        put(o, "      param %s%s : [n_experts, %s, %s] = normal(init_std)\n"
               "        hf \"%s.%s.experts.{expert}.%s.weight\" transposed\n", ex[i][0], sfx,
            i < 2 ? "d_model" : width, i < 2 ? width : "d_model", L, blk,
            ex[i][mixtral ? 2 : 1]);
    bool shared = m->arch == HF_QWEN2_MOE;
    if (shared) {
        put(o, "      param w_sgate%s : [d_model, n_shared] = normal(init_std)\n"
               "        hf \"%s.mlp.shared_expert_gate.weight\" transposed\n", sfx, L);
        static const char *const sh[3][2] = {{"s_gate", "gate_proj"}, {"s_up", "up_proj"},
                                             {"s_down", "down_proj"}};
        for (int i = 0; i < 3; i++)
            put(o, "      param %s%s : [n_shared, %s, %s] = normal(init_std)\n"
                   "        hf \"%s.mlp.shared_expert.%s.weight\" transposed\n", sh[i][0], sfx,
                i < 2 ? "d_model" : "d_shared", i < 2 ? "d_shared" : "d_model", L, sh[i][1]);
    }
    put(o, "\n      h = rmsnorm(x, mlp_norm%s, eps = norm_eps)\n", sfx);
    put(o, "      gates = route(matmul(h, w_router%s), topk = topk, score = softmax, norm = %s%s)\n",
        sfx, m->norm_topk ? "true" : "false", m->aux.f > 0 ? ",\n                    aux = aux_coeff" : "");
    if (shared) {
        put(o, "      # the shared expert: a moe of one expert whose gate is sigmoid(h . "
               "shared_expert_gate)\n");
        put(o, "      s_gates = route(matmul(h, w_sgate%s), topk = n_shared, score = sigmoid, "
               "norm = false)\n", sfx);
        put(o, "      x = x + moe(h, gates, e_gate%s, e_up%s, e_down%s) + "
               "moe(h, s_gates, s_gate%s, s_up%s, s_down%s)\n    }\n", sfx, sfx, sfx, sfx, sfx, sfx);
    } else {
        put(o, "      x = x + moe(h, gates, e_gate%s, e_up%s, e_down%s)\n    }\n", sfx, sfx, sfx);
    }
}

/* The period of the dense/MoE pattern when it repeats whole with a period
 * of 2 or more (decoder_sparse_step), else 0. */
static int64_t period(const HfModel *m)
{
    int64_t n = m->n_layers.i;
    for (int64_t p = 2; p <= 8 && p < n; p++) {
        if (n % p)
            continue;
        bool ok = true;
        for (int64_t i = p; i < n && ok; i++)
            ok = m->moe_layer[i] == m->moe_layer[i - p];
        if (ok)
            return p;
    }
    return 0;
}

/* LLaMA, Mistral, Qwen2 and the MoE models: pre-norm RMSNorm, rotary,
 * SwiGLU, grouped-query attention. A model whose layers mix dense and MoE
 * MLPs is written as a repeat whose body holds one period of the pattern,
 * or else as one repeat per run of layers of one kind, each numbering its
 * layers as Hugging Face does (docs/language.md). */
static void body_llama(Out *o, const HfModel *m)
{
    put(o, "model %s {\n", m->model_type);
    put(o, "  input tokens  : i32[batch, seq]\n  input targets : i32[batch, seq]\n\n");
    put(o, "  param embed : [vocab, d_model] = normal(init_std) hf \"model.embed_tokens.weight\"\n");
    put(o, "  x = embedding(tokens, embed)\n\n");
    int64_t n = m->n_layers.i, p = m->any_dense ? period(m) : 0;
    if (!m->any_dense) {
        put(o, "  repeat n_layers {\n");
        layer_llama(o, m, "layer", "", m->moe);
        put(o, "  }\n\n");
    } else if (p) {
        put(o, "  repeat n_layers / %lld {    # %lld layers a repeat: ", (long long)p, (long long)p);
        for (int64_t j = 0; j < p; j++)
            put(o, "%s%s", j ? ", " : "", m->moe_layer[j] ? "MoE" : "dense");
        put(o, "\n");
        for (int64_t j = 0; j < p; j++) {
            char idx[48], sfx[24];
            snprintf(idx, sizeof idx, j ? "%lld * layer + %lld" : "%lld * layer", (long long)p,
                     (long long)j);
            snprintf(sfx, sizeof sfx, "_%lld", (long long)j);
            layer_llama(o, m, idx, sfx, m->moe_layer[j]);
        }
        put(o, "  }\n\n");
    } else {
        for (int64_t i = 0; i < n;) {
            int64_t j = i;
            while (j < n && m->moe_layer[j] == m->moe_layer[i])
                j++;
            if (j == n && i > 0)
                put(o, "  repeat n_layers - %lld {    # layer%s %lld%s: %s\n", (long long)i,
                    j - i > 1 ? "s" : "", (long long)i,
                    j - i > 1 ? ir_sprintf(o->a, " to %lld", (long long)(n - 1)) : "",
                    m->moe_layer[i] ? "MoE" : "dense");
            else if (j - i > 1)
                put(o, "  repeat %lld {    # layers %lld to %lld: %s\n", (long long)(j - i),
                    (long long)i, (long long)(j - 1), m->moe_layer[i] ? "MoE" : "dense");
            else
                put(o, "  repeat 1 {    # layer %lld: %s\n", (long long)i,
                    m->moe_layer[i] ? "MoE" : "dense");
            char idx[48];
            snprintf(idx, sizeof idx, i ? "layer + %lld" : "layer", (long long)i);
            layer_llama(o, m, idx, "", m->moe_layer[i]);
            put(o, "  }\n\n");
            i = j;
        }
    }
    put(o, "  param final_norm : [d_model] = ones hf \"model.norm.weight\"\n");
    if (!m->tied)
        put(o, "  param lm_head : [d_model, vocab] = normal(init_std) hf \"lm_head.weight\" "
               "transposed\n");
    put(o, "  x = rmsnorm(x, final_norm, eps = norm_eps)\n");
    put(o, "  logits : [batch, seq, vocab] = matmul(x, %s)    # %s\n", m->tied ? "embed" : "lm_head",
        m->tied_why);
    put(o, "  loss = cross_entropy(logits, targets)\n}\n");
}

/* GPT-2: pre-norm LayerNorm, learned positions, GELU (tanh), biases, tied head;
 * HF's Conv1D stores [in, out] (nothing transposed) and fuses q, k, v. */
static void body_gpt2(Out *o, const HfModel *m)
{
    (void)m;
    put(o, "model gpt2 {\n");
    put(o, "  input tokens  : i32[batch, seq]\n  input targets : i32[batch, seq]\n\n");
    put(o, "  param wte : [vocab, d_model] = normal(init_std) hf \"wte.weight\"\n"
           "  param wpe : [seq, d_model] = normal(init_std) hf \"wpe.weight\"\n"
           "  x = embedding(tokens, wte) + wpe\n\n");
    put(o, "  repeat n_layers {\n    block attn {\n");
    put(o, "      param ln1_w : [d_model] = ones hf \"h.{layer}.ln_1.weight\"\n"
           "      param ln1_b : [d_model] = zeros hf \"h.{layer}.ln_1.bias\"\n");
    static const char *const qkv[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++)
        put(o, "      param w%s : [d_model, n_heads, head_dim] = normal(init_std)\n"
               "        hf \"h.{layer}.attn.c_attn.weight\" part %d of 3\n", qkv[i], i);
    for (int i = 0; i < 3; i++)
        put(o, "      param b%s : [n_heads, head_dim] = zeros hf \"h.{layer}.attn.c_attn.bias\" "
               "part %d of 3\n", qkv[i], i);
    put(o, "      param wo : [n_heads, head_dim, d_model] = normal(proj_std) "
           "hf \"h.{layer}.attn.c_proj.weight\"\n"
           "      param bo : [d_model] = zeros hf \"h.{layer}.attn.c_proj.bias\"\n\n");
    put(o, "      h = layernorm(x, ln1_w, ln1_b, eps = norm_eps)\n");
    for (int i = 0; i < 3; i++)
        put(o, "      %s : [batch, seq, n_heads, head_dim] = matmul(h, w%s) + b%s\n", qkv[i],
            qkv[i], qkv[i]);
    put(o, "      a = attention(q, k, v, causal = true)\n"
           "      x = x + (matmul(a, wo) + bo)\n    }\n");
    put(o, "    block mlp {\n"
           "      param ln2_w : [d_model] = ones hf \"h.{layer}.ln_2.weight\"\n"
           "      param ln2_b : [d_model] = zeros hf \"h.{layer}.ln_2.bias\"\n"
           "      param w_fc : [d_model, d_ff] = normal(init_std) hf \"h.{layer}.mlp.c_fc.weight\"\n"
           "      param b_fc : [d_ff] = zeros hf \"h.{layer}.mlp.c_fc.bias\"\n"
           "      param w_proj : [d_ff, d_model] = normal(proj_std) hf \"h.{layer}.mlp.c_proj.weight\"\n"
           "      param b_proj : [d_model] = zeros hf \"h.{layer}.mlp.c_proj.bias\"\n\n"
           "      h = layernorm(x, ln2_w, ln2_b, eps = norm_eps)\n"
           "      f = gelu(matmul(h, w_fc) + b_fc)\n"
           "      x = x + (matmul(f, w_proj) + b_proj)\n    }\n  }\n\n");
    put(o, "  param lnf_w : [d_model] = ones hf \"ln_f.weight\"\n"
           "  param lnf_b : [d_model] = zeros hf \"ln_f.bias\"\n"
           "  x = layernorm(x, lnf_w, lnf_b, eps = norm_eps)\n"
           "  logits : [batch, seq, vocab] = matmul(x, wte)    # tied: the token table is the head\n"
           "  loss = cross_entropy(logits, targets)\n}\n");
}

/* GPT-OSS (models/gpt-oss.mdl, with Hugging Face's names): q, k, v and o
 * biases, a sink logit per head, a window on every even layer, experts in
 * every layer with a biased router, the clamped SwiGLU (swiglu_oai) and
 * biases. transformers stores the experts stacked and not transposed
 * (gate_up_proj [experts, d_model, 2 d_ff] read as h @ gate_up_proj), gate
 * and up alternating column by column (gate_up[..., ::2], gate_up[..., 1::2]),
 * so e_gate and e_up are its parts 0 and 1 of 2 interleaved, their biases
 * gate_up_proj_bias's; down_proj's bias is added outside the experts' sum,
 * weighted by the gates (docs/moe.md). */
static void body_gpt_oss(Out *o, const HfModel *m)
{
    (void)m;
    const char *L = "model.layers.{layer}";
    put(o, "model gpt_oss {\n");
    put(o, "  input tokens  : i32[batch, seq]\n  input targets : i32[batch, seq]\n\n");
    put(o, "  param embed : [vocab, d_model] = normal(init_std) hf \"model.embed_tokens.weight\"\n");
    put(o, "  x = embedding(tokens, embed)\n\n");
    put(o, "  repeat n_layers {\n    block attn {\n");
    put(o, "      param attn_norm : [d_model] = ones hf \"%s.input_layernorm.weight\"\n", L);
    static const char *const qkv[3][3] = {{"wq", "n_heads", "q"}, {"wk", "n_kv_heads", "k"},
                                          {"wv", "n_kv_heads", "v"}};
    for (int i = 0; i < 3; i++)
        put(o, "      param %s : [d_model, %s, head_dim] = normal(init_std)\n"
               "        hf \"%s.self_attn.%s_proj.weight\" transposed\n", qkv[i][0], qkv[i][1], L, qkv[i][2]);
    for (int i = 0; i < 3; i++)
        put(o, "      param b%s : [%s, head_dim] = zeros hf \"%s.self_attn.%s_proj.bias\"\n", qkv[i][2],
            qkv[i][1], L, qkv[i][2]);
    put(o, "      param wo : [n_heads, head_dim, d_model] = normal(init_std)\n"
           "        hf \"%s.self_attn.o_proj.weight\" transposed\n"
           "      param bo : [d_model] = zeros hf \"%s.self_attn.o_proj.bias\"\n"
           "      param sinks : [n_heads] = normal(init_std) hf \"%s.self_attn.sinks\"\n\n", L, L, L);
    put(o, "      h = rmsnorm(x, attn_norm, eps = norm_eps)\n"
           "      q : [batch, seq, n_heads, head_dim]    = rope(matmul(h, wq) + bq%s)\n"
           "      k : [batch, seq, n_kv_heads, head_dim] = rope(matmul(h, wk) + bk%s)\n"
           "      v : [batch, seq, n_kv_heads, head_dim] = matmul(h, wv) + bv\n"
           "      # layer_types: sliding_attention on the even layers, full_attention on the odd\n"
           "      a = attention(q, k, v, sinks, causal = true, window = window * ((layer + 1) %% 2))\n"
           "      x = x + (matmul(a, wo) + bo)\n    }\n", rope_args(m), rope_args(m));
    put(o, "    block moe {\n"
           "      param mlp_norm : [d_model] = ones hf \"%s.post_attention_layernorm.weight\"\n"
           "      param w_router : [d_model, n_experts] = normal(init_std)\n"
           "        hf \"%s.mlp.router.weight\" transposed\n"
           "      param b_router : [n_experts] = zeros hf \"%s.mlp.router.bias\"\n", L, L, L);
    static const char *const gu[2] = {"gate", "up"};
    for (int i = 0; i < 2; i++)
        put(o, "      param e_%s : [n_experts, d_model, d_ff] = normal(init_std)\n"
               "        hf \"%s.mlp.experts.gate_up_proj\" part %d of 2 interleaved\n", gu[i], L, i);
    put(o, "      param e_down : [n_experts, d_ff, d_model] = normal(init_std)\n"
           "        hf \"%s.mlp.experts.down_proj\"\n", L);
    for (int i = 0; i < 2; i++)
        put(o, "      param e_%s_b : [n_experts, d_ff] = zeros\n"
               "        hf \"%s.mlp.experts.gate_up_proj_bias\" part %d of 2 interleaved\n", gu[i], L, i);
    put(o, "      param e_down_b : [n_experts, d_model] = zeros hf \"%s.mlp.experts.down_proj_bias\"\n\n", L);
    put(o, "      h = rmsnorm(x, mlp_norm, eps = norm_eps)\n"
           "      gates = route(matmul(h, w_router) + b_router, topk = topk, score = softmax, norm = true%s)\n"
           "      x = x + (moe(h, gates, e_gate, e_up, e_down, e_gate_b, e_up_b, act = swiglu_oai) +\n"
           "               matmul(gates, e_down_b))\n    }\n  }\n\n",
        m->aux.f > 0 ? ",\n                    aux = aux_coeff" : "");
    put(o, "  param final_norm : [d_model] = ones hf \"model.norm.weight\"\n");
    if (!m->tied)
        put(o, "  param lm_head : [d_model, vocab] = normal(init_std) hf \"lm_head.weight\" transposed\n");
    put(o, "  x = rmsnorm(x, final_norm, eps = norm_eps)\n");
    put(o, "  logits : [batch, seq, vocab] = matmul(x, %s)    # %s\n", m->tied ? "embed" : "lm_head", m->tied_why);
    put(o, "  loss = cross_entropy(logits, targets)\n}\n");
}

char *hf_mdl_write(IrArena *a, const HfModel *m, size_t *len)
{
    Out o = {.a = a};
    header(&o, m);
    if (m->arch == HF_GPT2)
        body_gpt2(&o, m);
    else if (m->arch == HF_GPT_OSS)
        body_gpt_oss(&o, m);
    else
        body_llama(&o, m);
    char *text = ir_alloc(a, o.len + 1);
    memcpy(text, o.s, o.len + 1);
    *len = o.len;
    free(o.s);
    return text;
}
