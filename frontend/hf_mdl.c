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
    cnum(o, "d_ff", &m->d_ff);
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

/* LLaMA, Mistral, Qwen2: pre-norm RMSNorm, rotary, SwiGLU, grouped-query attention. */
static void body_llama(Out *o, const HfModel *m)
{
    const char *L = "model.layers.{layer}";
    put(o, "model %s {\n", m->model_type);
    put(o, "  input tokens  : i32[batch, seq]\n  input targets : i32[batch, seq]\n\n");
    put(o, "  param embed : [vocab, d_model] = normal(init_std) hf \"model.embed_tokens.weight\"\n");
    put(o, "  x = embedding(tokens, embed)\n\n");
    put(o, "  repeat n_layers {\n    block attn {\n");
    put(o, "      param attn_norm : [d_model] = ones hf \"%s.input_layernorm.weight\"\n", L);
    static const char *const qkv[3][3] = {{"wq", "n_heads", "q"}, {"wk", "n_kv_heads", "k"},
                                          {"wv", "n_kv_heads", "v"}};
    for (int i = 0; i < 3; i++)
        put(o, "      param %s : [d_model, %s, head_dim] = normal(init_std)\n"
               "        hf \"%s.self_attn.%s_proj.weight\" transposed\n",
            qkv[i][0], qkv[i][1], L, qkv[i][2]);
    if (m->qkv_bias)
        for (int i = 0; i < 3; i++)
            put(o, "      param b%s : [%s, head_dim] = zeros hf \"%s.self_attn.%s_proj.bias\"\n",
                qkv[i][2], qkv[i][1], L, qkv[i][2]);
    put(o, "      param wo : [n_heads, head_dim, d_model] = normal(init_std)\n"
           "        hf \"%s.self_attn.o_proj.weight\" transposed\n\n", L);
    put(o, "      h = rmsnorm(x, attn_norm, eps = norm_eps)\n");
    const char *bq = m->qkv_bias ? " + bq" : "", *bk = m->qkv_bias ? " + bk" : "";
    const char *bv = m->qkv_bias ? " + bv" : "";
    put(o, "      q : [batch, seq, n_heads, head_dim]    = rope(matmul(h, wq)%s%s)\n", bq,
        rope_args(m));
    put(o, "      k : [batch, seq, n_kv_heads, head_dim] = rope(matmul(h, wk)%s%s)\n", bk,
        rope_args(m));
    put(o, "      v : [batch, seq, n_kv_heads, head_dim] = matmul(h, wv)%s\n", bv);
    put(o, "      a = attention(q, k, v, causal = true%s)\n", m->window.set ? ", window = window" : "");
    put(o, "      x = x + matmul(a, wo)\n    }\n");
    put(o, "    block mlp {\n");
    put(o, "      param mlp_norm : [d_model] = ones hf \"%s.post_attention_layernorm.weight\"\n", L);
    static const char *const mlp[3][3] = {{"w_gate", "[d_model, d_ff]", "gate"},
                                          {"w_up", "[d_model, d_ff]", "up"},
                                          {"w_down", "[d_ff, d_model]", "down"}};
    for (int i = 0; i < 3; i++)
        put(o, "      param %s : %s = normal(init_std)\n"
               "        hf \"%s.mlp.%s_proj.weight\" transposed\n", mlp[i][0], mlp[i][1], L,
            mlp[i][2]);
    put(o, "\n      h = rmsnorm(x, mlp_norm, eps = norm_eps)\n"
           "      g = swiglu(matmul(h, w_gate), matmul(h, w_up))\n"
           "      x = x + matmul(g, w_down)\n    }\n  }\n\n");
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

char *hf_mdl_write(IrArena *a, const HfModel *m, size_t *len)
{
    Out o = {0};
    header(&o, m);
    if (m->arch == HF_GPT2)
        body_gpt2(&o, m);
    else
        body_llama(&o, m);
    char *text = ir_alloc(a, o.len + 1);
    memcpy(text, o.s, o.len + 1);
    *len = o.len;
    free(o.s);
    return text;
}
