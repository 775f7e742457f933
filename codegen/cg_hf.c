/* cg_hf.c: the Hugging Face config.json of the model, for the program's
 * `--export-hf DIR`, decided from the graph at compile time.
 *
 * The architecture comes from the parameters' `hf` names (LLaMA's
 * model.layers.N.self_attn.q_proj.weight, GPT-2's h.N.attn.c_attn.weight)
 * and the graph's attributes (a sliding window: Mistral; q, k and v biases:
 * Qwen2); every value from the model's own constants (parameter shapes, node
 * attributes, the sequence). Keys and value types are those of transformers'
 * configuration classes (LlamaConfig, MistralConfig, Qwen2Config,
 * GPT2Config; tests/hf/transformers-keys.txt lists them with the commit they
 * were read from), written as their to_json_string does (sorted, indent 2).
 *
 * A config is stated only when it is exact: `ptdc import-hf` of it must give
 * this very graph (cg_hf_check.c). Otherwise the model has none, codegen says
 * why in a note, and the program refuses `--export-hf DIR` with that reason
 * (a directory of weights without a true config.json would not load, or
 * would load another model). */
#include "cg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -------------------------------------------------------- JSON values */

/* A float as Python's repr writes it (json.dumps does): the shortest digits
 * that read back, "1e-05", "10000.0", "0.02", "1.5e+16". */
static const char *jfloat(Cg *c, double x)
{
    char e[64];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x)
            break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, x);
    int exp = atoi(strchr(e, 'e') + 1);
    if (exp >= -4 && exp < 16) {
        char f[64];
        snprintf(f, sizeof f, "%.*f", p - 1 - exp > 0 ? p - 1 - exp : 0, x);
        return strchr(f, '.') ? cg_fmt(c, "%s", f) : cg_fmt(c, "%s.0", f);
    }
    char mant[32];
    snprintf(mant, sizeof mant, "%.*s", (int)(strchr(e, 'e') - e), e);
    return cg_fmt(c, "%se%c%02d", mant, exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
}

static const char *jint(Cg *c, int64_t v) { return cg_fmt(c, "%lld", (long long)v); }
static const char *jstr(Cg *c, const char *s) { return cg_fmt(c, "\"%s\"", s); }
static const char *jbool(bool b) { return b ? "true" : "false"; }

static void key(Cg *c, const char *k, const char *v)
{
    CgHf *h = &c->hf;
    if (h->nkeys == CG_HF_MAX_KEYS)
        ir_die("codegen: more than %d config.json keys", CG_HF_MAX_KEYS);
    h->key[h->nkeys] = k;
    h->value[h->nkeys++] = v;
}

/* LLaMA-3.1's rope_scaling object, as config.json states it. */
static const char *llama3_scaling(Cg *c, const IrNode *rope)
{
    const IrRopeScaling *r = &rope->attr.rope;
    return cg_fmt(c, "{\n    \"factor\": %s,\n    \"high_freq_factor\": %s,\n    "
                     "\"low_freq_factor\": %s,\n    \"original_max_position_embeddings\": %lld,"
                     "\n    \"rope_type\": \"llama3\"\n  }",
                  jfloat(c, r->factor), jfloat(c, r->high_freq_factor), jfloat(c, r->low_freq_factor),
                  (long long)r->original_max_position);
}

static int by_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ----------------------------------------------------- the graph read */

static int param(const IrGraph *g, const char *hf)
{
    for (int t = 0; t < g->ntensors; t++)
        if (g->tensors[t].role == IR_PARAM && g->tensors[t].hf_name &&
            !strcmp(g->tensors[t].hf_name, hf))
            return t;
    return -1;
}

static const IrNode *first_of(const IrGraph *g, IrOp op)
{
    for (int i = 0; i < g->nfwd; i++)
        if (g->nodes[i].op == op)
            return &g->nodes[i];
    return NULL;
}

/* Layers: one more than the largest N of an hf name "<prefix>N.". */
static int64_t layers(const IrGraph *g, const char *prefix)
{
    int64_t n = 0;
    size_t k = strlen(prefix);
    for (int t = 0; t < g->ntensors; t++) {
        const char *s = g->tensors[t].hf_name;
        char *end;
        if (g->tensors[t].role != IR_PARAM || !s || strncmp(s, prefix, k) != 0)
            continue;
        long long i = strtoll(s + k, &end, 10);
        if (end != s + k && *end == '.' && i + 1 > n)
            n = i + 1;
    }
    return n;
}

typedef struct Read {
    Cg *c;
    const char *why;  /* the first thing missing */
} Read;

__attribute__((format(printf, 2, 3))) static void refuse(Read *r, const char *fmt, ...)
{
    if (r->why)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    r->why = ir_strdup(r->c->arena, buf);
}

/* Size of dim i of the parameter named hf, which must have `rank` dims. */
static int64_t psize(Read *r, const char *hf, int rank, int i, const char *role)
{
    const IrGraph *g = r->c->g;
    int t = param(g, hf);
    if (t < 0) {
        refuse(r, "no parameter is named %s (%s)", hf, role);
        return 1;
    }
    if (g->tensors[t].rank != rank) {
        refuse(r, "parameter %s (%s) has %d dims, not %d", hf, role, g->tensors[t].rank, rank);
        return 1;
    }
    return g->dims[g->tensors[t].dim[i]].size;
}

static const IrNode *need(Read *r, IrOp op, const char *what)
{
    const IrNode *n = first_of(r->c->g, op);
    if (!n)
        refuse(r, "it has no %s", what);
    return n;
}

/* The token table's std (HF's initializer_range; a config never changes what a loaded model
 * computes with it). */
static const char *init_range(Cg *c, const char *hf)
{
    int t = param(c->g, hf);
    return jfloat(c, t >= 0 && c->g->tensors[t].init == IR_INIT_NORMAL ? c->g->tensors[t].init_std
                                                                        : 0.02);
}

static void common(Cg *c, const char *arch, const char *type, bool tied)
{
    c->hf.arch = arch;
    key(c, "architectures", cg_fmt(c, "[\n    \"%s\"\n  ]", arch));
    key(c, "model_type", jstr(c, type));
    key(c, "tie_word_embeddings", jbool(tied));
    key(c, "torch_dtype", NULL); /* the export's (--export-dtype) */
}

static bool has(const IrGraph *g, const char *fmt, int64_t layer)
{
    char buf[256];
    snprintf(buf, sizeof buf, fmt, (long long)layer);
    return param(g, buf) >= 0;
}

/* The route node making a moe's gates from the experts named `experts`
 * (its first expert weight's hf name), or NULL. */
static const IrNode *router_of(const IrGraph *g, const char *experts)
{
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op != IR_OP_MOE || !g->tensors[n->in[2]].hf_name ||
            strcmp(g->tensors[n->in[2]].hf_name, experts) != 0)
            continue;
        int p = g->tensors[n->in[1]].producer;
        return p >= 0 && g->nodes[p].op == IR_OP_ROUTE ? &g->nodes[p] : NULL;
    }
    return NULL;
}

/* MixtralForCausalLM (block_sparse_moe in every layer), Qwen3MoeForCausalLM
 * (q/k norms) and Qwen2MoeForCausalLM (biases, a sigmoid-gated shared
 * expert): the LLaMA decoder whose MLPs are mixtures of experts, the Qwens'
 * with dense MLPs in the layers config.json lists in mlp_only_layers. */
static void moe_like(Cg *c, Read *r, bool bias, bool llama3, int64_t window, int64_t d,
                     int64_t h, int64_t hd)
{
    const IrGraph *g = c->g;
    int64_t nl = layers(g, "model.layers.");
    bool mixtral = param(g, "model.layers.0.block_sparse_moe.gate.weight") >= 0;
    bool qk_norm = param(g, "model.layers.0.self_attn.q_norm.weight") >= 0;
    const char *arch = mixtral ? "MixtralForCausalLM"
                     : bias    ? "Qwen2MoeForCausalLM" : "Qwen3MoeForCausalLM";
    if (mixtral && (bias || qk_norm)) {
        refuse(r, "its experts are named as Mixtral's, which has no %s",
               bias ? "q, k and v biases" : "q and k norms");
        return;
    }
    if (!mixtral && bias == qk_norm) {
        refuse(r, "its experts are named as the Qwens', but it has %s",
               bias ? "both Qwen2-MoE's biases and Qwen3's q and k norms"
                    : "neither Qwen2-MoE's biases nor Qwen3's q and k norms");
        return;
    }
    if (llama3 && !qk_norm) {
        refuse(r, "%s has no rope_scaling", arch);
        return;
    }
    if (window && !mixtral) {
        refuse(r, "%s's sliding window (use_sliding_window, from max_window_layers on) is not "
               "the one it has on every layer", arch);
        return;
    }
    if (bias && hd * h != d) {
        refuse(r, "Qwen2MoeConfig has no head_dim for heads of %lld with %lld heads of a %lld "
               "model", (long long)hd, (long long)h, (long long)d);
        return;
    }
    const char *blk = mixtral ? "block_sparse_moe" : "mlp";
    const char *gate = mixtral ? "w1" : "gate_proj";
    /* Which layers are MoE, the first of them, and a dense one's width. */
    int64_t first = -1, ff = 0;
    const char *only = cg_fmt(c, "[");
    for (int64_t l = 0; l < nl; l++) {
        if (has(g, mixtral ? "model.layers.%lld.block_sparse_moe.gate.weight"
                           : "model.layers.%lld.mlp.gate.weight", l)) {
            if (first < 0)
                first = l;
            continue;
        }
        if (mixtral) {
            refuse(r, "MixtralForCausalLM has experts in every layer, and layer %lld has none",
                   (long long)l);
            return;
        }
        char name[128];
        snprintf(name, sizeof name, "model.layers.%lld.mlp.gate_proj.weight", (long long)l);
        ff = psize(r, name, 2, 1, "a dense layer's MLP gate");
        only = cg_fmt(c, "%s%s%lld", only, strcmp(only, "[") ? ", " : "", (long long)l);
    }
    only = cg_fmt(c, "%s]", only);
    if (first < 0) {
        refuse(r, "no layer has experts");
        return;
    }
    char ex[160], rt[160];
    snprintf(ex, sizeof ex, "model.layers.%lld.%s.experts.{expert}.%s.weight", (long long)first,
             blk, gate);
    snprintf(rt, sizeof rt, "model.layers.%lld.%s.gate.weight", (long long)first, blk);
    int64_t ne = psize(r, rt, 2, 1, "the router");
    int64_t de = psize(r, ex, 3, 2, "the experts' gate");
    int64_t ds = 0;
    if (bias) {
        snprintf(rt, sizeof rt, "model.layers.%lld.mlp.shared_expert.gate_proj.weight",
                 (long long)first);
        ds = psize(r, rt, 3, 2, "the shared expert's gate");
    }
    const IrNode *route = router_of(g, ex);
    if (!route && !r->why)
        refuse(r, "its experts' gates are not made by route");
    if (r->why)
        return;
    const IrRoute *ro = &route->attr.route;
    if (ro->score != IR_SCORE_SOFTMAX || ro->groups > 1 || (ro->scale != 0 && ro->scale != 1) ||
        ro->capacity > 0 || ro->zloss > 0) {
        refuse(r, "%s's router is a softmax top-k without groups, scaling, capacity or z-loss",
               arch);
        return;
    }
    if (mixtral && !ro->norm) {
        refuse(r, "MixtralForCausalLM renormalises the chosen weights (norm = true)");
        return;
    }
    common(c, arch, mixtral ? "mixtral" : bias ? "qwen2_moe" : "qwen3_moe",
           param(g, "lm_head.weight") < 0);
    c->hf.prefix = "model";
    c->hf.prefixed = true;
    const IrNode *norm = first_of(g, IR_OP_RMSNORM), *rope = first_of(g, IR_OP_ROPE);
    key(c, "attention_dropout", "0.0"); /* ptdc trains without dropout */
    key(c, "hidden_act", jstr(c, "silu"));
    key(c, "hidden_size", jint(c, d));
    key(c, "initializer_range", init_range(c, "model.embed_tokens.weight"));
    /* The dense layers' width; the experts' for Mixtral; unused without dense layers. */
    key(c, "intermediate_size", jint(c, mixtral || !ff ? de : ff));
    key(c, "max_position_embeddings", jint(c, g->dims[g->seq_dim].size));
    key(c, "num_attention_heads", jint(c, h));
    key(c, "num_hidden_layers", jint(c, nl));
    key(c, "num_key_value_heads",
        jint(c, psize(r, "model.layers.0.self_attn.k_proj.weight", 3, 1, "the key projection")));
    key(c, "rms_norm_eps", jfloat(c, norm->attr.eps));
    key(c, "rope_theta", jfloat(c, rope->attr.theta));
    key(c, "vocab_size", jint(c, psize(r, "model.embed_tokens.weight", 2, 0, "the token table")));
    key(c, "num_experts_per_tok", jint(c, ro->topk));
    key(c, mixtral ? "num_local_experts" : "num_experts", jint(c, ne));
    key(c, "output_router_logits", "false");
    key(c, "router_aux_loss_coef", jfloat(c, ro->aux));
    if (mixtral) {
        key(c, "head_dim", jint(c, hd));
        key(c, "router_jitter_noise", "0.0");
        key(c, "sliding_window", window ? jint(c, window) : "null");
        return;
    }
    key(c, "decoder_sparse_step", "1");
    key(c, "moe_intermediate_size", jint(c, de));
    key(c, "norm_topk_prob", jbool(ro->norm));
    key(c, "use_sliding_window", "false");
    key(c, "max_window_layers", jint(c, nl));
    if (ff || qk_norm)
        key(c, "mlp_only_layers", strcmp(only, "[]") ? only : "[]");
    if (bias) {
        key(c, "shared_expert_intermediate_size", jint(c, ds));
        return;
    }
    key(c, "attention_bias", "false");
    key(c, "head_dim", jint(c, hd));
    key(c, "sliding_window", "null");
    if (llama3)
        key(c, "rope_scaling", llama3_scaling(c, rope));
    else
        key(c, "rope_scaling", "null");
}

/* GptOssForCausalLM (hf_config.c read_gpt_oss, hf_mdl.c body_gpt_oss): the
 * keys of GptOssConfig (transformers v4.55, configuration_gpt_oss.py), the
 * window on the even layers as layer_types, rope_scaling null (the class's
 * default is YaRN, which ptdc does not compute). Whether the graph is that
 * model exactly is cg_hf_check.c's to say, as for every config. */
static void gpt_oss(Cg *c, Read *r, const IrNode *rope, const IrNode *norm)
{
    const IrGraph *g = c->g;
    int64_t nl = layers(g, "model.layers.");
    const char *gu = "model.layers.0.mlp.experts.gate_up_proj";
    int64_t ne = psize(r, gu, 3, 0, "the experts' gate and up");
    int64_t ff = psize(r, gu, 3, 2, "the experts' gate and up");
    int64_t hd = psize(r, "model.layers.0.self_attn.q_proj.weight", 3, 2, "the query projection");
    const IrNode *route = NULL, *attn0 = NULL;
    for (int i = 0; i < g->nfwd && !route; i++)
        if (g->nodes[i].op == IR_OP_ROUTE)
            route = &g->nodes[i];
    for (int i = 0; i < g->nfwd && !attn0; i++)
        if (g->nodes[i].op == IR_OP_ATTENTION)
            attn0 = &g->nodes[i];
    if (!route && !r->why)
        refuse(r, "its experts' gates are not made by route");
    if (rope->attr.rope.kind != IR_ROPE_PLAIN && !r->why)
        refuse(r, "its rotary embedding is scaled, and ptdc writes GptOssConfig with rope_scaling null only");
    if (r->why)
        return;
    int64_t window = attn0->attr.window;
    common(c, "GptOssForCausalLM", "gpt_oss", param(g, "lm_head.weight") < 0);
    c->hf.prefix = "model";
    c->hf.prefixed = true;
    const char *types = cg_fmt(c, "[");
    for (int64_t l = 0; l < nl; l++)
        types = cg_fmt(c, "%s%s\n    \"%s\"", types, l ? "," : "",
                       (l + 1) % 2 ? "sliding_attention" : "full_attention");
    types = cg_fmt(c, "%s\n  ]", types);
    key(c, "attention_bias", "true");
    key(c, "attention_dropout", "0.0"); /* ptdc trains without dropout */
    key(c, "head_dim", jint(c, hd));
    key(c, "hidden_act", jstr(c, "silu"));
    key(c, "hidden_size", jint(c, psize(r, "model.embed_tokens.weight", 2, 1, "the token table")));
    key(c, "initializer_range", init_range(c, "model.embed_tokens.weight"));
    key(c, "intermediate_size", jint(c, ff));
    key(c, "layer_types", types);
    key(c, "max_position_embeddings", jint(c, g->dims[g->seq_dim].size));
    key(c, "num_attention_heads", jint(c, psize(r, "model.layers.0.self_attn.q_proj.weight", 3, 1, "the queries")));
    key(c, "num_experts_per_tok", jint(c, route->attr.route.topk));
    key(c, "num_hidden_layers", jint(c, nl));
    key(c, "num_key_value_heads",
        jint(c, psize(r, "model.layers.0.self_attn.k_proj.weight", 3, 1, "the key projection")));
    key(c, "num_local_experts", jint(c, ne));
    key(c, "output_router_logits", "false");
    key(c, "rms_norm_eps", jfloat(c, norm->attr.eps));
    key(c, "rope_scaling", "null");
    key(c, "rope_theta", jfloat(c, rope->attr.theta));
    key(c, "router_aux_loss_coef", jfloat(c, route->attr.route.aux));
    key(c, "sliding_window", window ? jint(c, window) : "null");
    key(c, "vocab_size", jint(c, psize(r, "model.embed_tokens.weight", 2, 0, "the token table")));
}

/* LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM: one decoder (HF
 * copies Mistral and Qwen2 from LLaMA), told apart by a window and biases;
 * with experts, moe_like's. */
static void llama_like(Cg *c, Read *r)
{
    const IrGraph *g = c->g;
    int64_t vocab = psize(r, "model.embed_tokens.weight", 2, 0, "the token table");
    int64_t d = psize(r, "model.embed_tokens.weight", 2, 1, "the token table");
    int64_t h = psize(r, "model.layers.0.self_attn.q_proj.weight", 3, 1, "the query projection");
    int64_t hd = psize(r, "model.layers.0.self_attn.q_proj.weight", 3, 2, "the query projection");
    int64_t kv = psize(r, "model.layers.0.self_attn.k_proj.weight", 3, 1, "the key projection");
    const IrNode *norm = need(r, IR_OP_RMSNORM, "RMSNorm");
    const IrNode *rope = need(r, IR_OP_ROPE, "rotary embedding");
    const IrNode *attn = need(r, IR_OP_ATTENTION, "attention");
    if (r->why)
        return;
    if (attn->nin == 4) { /* sinks: GptOssForCausalLM */
        gpt_oss(c, r, rope, norm);
        return;
    }
    bool tied = param(g, "lm_head.weight") < 0;
    bool bias = param(g, "model.layers.0.self_attn.q_proj.bias") >= 0;
    bool llama3 = rope->attr.rope.kind == IR_ROPE_LLAMA3;
    int64_t window = attn->attr.window;
    if (first_of(g, IR_OP_MOE)) {
        for (int i = 0; i < g->nfwd; i++)
            if (g->nodes[i].op == IR_OP_MOE && g->nodes[i].attr.moe_act != IR_MOE_SWIGLU) {
                refuse(r, "its experts' activation is %s, and the MoE classes ptdc writes (Mixtral, "
                       "Qwen2-MoE, Qwen3-MoE) have SwiGLU experts", ir_moe_acts[g->nodes[i].attr.moe_act].name);
                return;
            }
        moe_like(c, r, bias, llama3, window, d, h, hd);
        return;
    }
    int64_t ff = psize(r, "model.layers.0.mlp.gate_proj.weight", 2, 1, "the MLP's gate");
    if (r->why)
        return;
    if (bias && window) {
        refuse(r, "its q, k and v biases make it Qwen2, whose sliding window (use_sliding_window, "
               "from max_window_layers on) is not the one it has on every layer");
        return;
    }
    if (bias && hd * h != d) {
        refuse(r, "its q, k and v biases make it Qwen2, and Qwen2Config has no head_dim for "
               "heads of %lld with %lld heads of a %lld model", (long long)hd, (long long)h,
               (long long)d);
        return;
    }
    if (window && llama3) {
        refuse(r, "its sliding window makes it Mistral, and MistralConfig has no rope_scaling");
        return;
    }
    const char *arch = bias ? "Qwen2ForCausalLM" : window ? "MistralForCausalLM" : "LlamaForCausalLM";
    common(c, arch, bias ? "qwen2" : window ? "mistral" : "llama", tied);
    c->hf.prefix = "model";
    c->hf.prefixed = true;
    key(c, "attention_dropout", "0.0"); /* ptdc trains without dropout */
    key(c, "hidden_act", jstr(c, "silu"));
    key(c, "hidden_size", jint(c, d));
    key(c, "initializer_range", init_range(c, "model.embed_tokens.weight"));
    key(c, "intermediate_size", jint(c, ff));
    key(c, "max_position_embeddings", jint(c, g->dims[g->seq_dim].size));
    key(c, "num_attention_heads", jint(c, h));
    key(c, "num_hidden_layers", jint(c, layers(g, "model.layers.")));
    key(c, "num_key_value_heads", jint(c, kv));
    key(c, "rms_norm_eps", jfloat(c, norm->attr.eps));
    key(c, "rope_theta", jfloat(c, rope->attr.theta));
    key(c, "vocab_size", jint(c, vocab));
    if (!bias)
        key(c, "head_dim", jint(c, hd));
    if (window)
        key(c, "sliding_window", jint(c, window));
    else if (llama3)
        key(c, "rope_scaling", llama3_scaling(c, rope));
    else
        key(c, "rope_scaling", "null");
    if (!bias && !window) {
        key(c, "attention_bias", "false");
        key(c, "mlp_bias", "false");
    }
    if (bias)
        key(c, "use_sliding_window", "false");
}

/* GPT2LMHeadModel (GPT-2, and GPT-3's dense layers). */
static void gpt2(Cg *c, Read *r)
{
    const IrGraph *g = c->g;
    int64_t vocab = psize(r, "wte.weight", 2, 0, "the token table");
    int64_t d = psize(r, "wte.weight", 2, 1, "the token table");
    int64_t h = psize(r, "h.0.attn.c_attn.weight", 3, 1, "the attention's q, k, v");
    int64_t ff = psize(r, "h.0.mlp.c_fc.weight", 2, 1, "the MLP");
    const IrNode *norm = need(r, IR_OP_LAYERNORM, "LayerNorm");
    if (r->why)
        return;
    common(c, "GPT2LMHeadModel", "gpt2", true);
    c->hf.prefix = "transformer";
    c->hf.prefixed = false;
    key(c, "activation_function", jstr(c, "gelu_new")); /* the tanh GELU */
    key(c, "attn_pdrop", "0.0");                        /* ptdc trains without dropout */
    key(c, "embd_pdrop", "0.0");
    key(c, "resid_pdrop", "0.0");
    key(c, "initializer_range", init_range(c, "wte.weight"));
    key(c, "layer_norm_epsilon", jfloat(c, norm->attr.eps));
    key(c, "n_embd", jint(c, d));
    key(c, "n_head", jint(c, h));
    key(c, "n_inner", jint(c, ff));
    key(c, "n_layer", jint(c, layers(g, "h.")));
    key(c, "n_positions", jint(c, g->dims[g->seq_dim].size));
    key(c, "scale_attn_by_inverse_layer_idx", "false");
    key(c, "scale_attn_weights", "true");
    key(c, "vocab_size", jint(c, vocab));
}

/* Which architecture the names say, and its keys (c->hf), or why none. */
static void derive(Cg *c)
{
    Read r = {c, NULL};
    const IrGraph *g = c->g;
    bool any = false;
    for (int t = 0; t < g->ntensors; t++)
        any |= g->tensors[t].role == IR_PARAM && g->tensors[t].hf_name;
    if (!any)
        refuse(&r, "no parameter has a Hugging Face name: the .mdl has no `hf` clause");
    else if (param(g, "model.embed_tokens.weight") >= 0)
        llama_like(c, &r);
    else if (param(g, "wte.weight") >= 0)
        gpt2(c, &r);
    else
        refuse(&r, "its parameter names are neither LLaMA's (model.embed_tokens.weight, ...) nor "
               "GPT-2's (wte.weight, ...)");
    if (r.why) {
        c->hf = (CgHf){0};
        c->hf.why = r.why;
        return;
    }
    /* Sorted, as to_json_string(sort_keys=True); the value arrays follow. */
    const char *pairs[CG_HF_MAX_KEYS][2];
    for (int i = 0; i < c->hf.nkeys; i++) {
        pairs[i][0] = c->hf.key[i];
        pairs[i][1] = c->hf.value[i];
    }
    qsort(pairs, (size_t)c->hf.nkeys, sizeof pairs[0], by_key);
    for (int i = 0; i < c->hf.nkeys; i++) {
        c->hf.key[i] = pairs[i][0];
        c->hf.value[i] = pairs[i][1];
    }
}

/* ------------------------------------------------------------ output */

const char *cg_hf_json(Cg *c, const char *torch_dtype)
{
    size_t n = 4;
    for (int i = 0; i < c->hf.nkeys; i++)
        n += strlen(c->hf.key[i]) + strlen(c->hf.value[i] ? c->hf.value[i] : torch_dtype) + 12;
    char *s = ir_alloc(c->arena, n), *p = s;
    p += sprintf(p, "{\n");
    for (int i = 0; i < c->hf.nkeys; i++)
        p += c->hf.value[i] ? sprintf(p, "  \"%s\": %s%s\n", c->hf.key[i], c->hf.value[i],
                                      i + 1 < c->hf.nkeys ? "," : "")
                            : sprintf(p, "  \"%s\": \"%s\"%s\n", c->hf.key[i], torch_dtype,
                                      i + 1 < c->hf.nkeys ? "," : "");
    sprintf(p, "}\n");
    return s;
}

/* A C string literal of s. */
static void cstr(FILE *f, const char *s)
{
    if (!s) {
        fputs("NULL", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

void cg_hf_print(const Cg *c, FILE *f)
{
    const CgHf *h = &c->hf;
    fprintf(f, "\n/* ------------------------------------------------------- Hugging Face */\n\n");
    if (h->arch)
        fprintf(f, "/* config.json of --export-hf DIR (hf_config.json beside this program): %s,\n"
                   " * from the model's constants; torch_dtype (NULL) is the export's. */\n",
                h->arch);
    else
        fprintf(f, "/* No config.json: --export-hf DIR is refused (cg_hf_refused says why). */\n");
    fprintf(f, "const CgHfKey cg_hf_config[] = {\n");
    for (int i = 0; i < h->nkeys; i++) {
        fprintf(f, "    {");
        cstr(f, h->key[i]);
        fprintf(f, ", ");
        cstr(f, h->value[i]);
        fprintf(f, "},\n");
    }
    fprintf(f, "    {NULL, NULL}};\nconst int cg_hf_nkeys = %d;\n", h->nkeys);
    fprintf(f, "const char *const cg_hf_refused = ");
    cstr(f, h->arch ? NULL : h->why);
    fprintf(f, ";\n/* Imported tensors may carry base_model_prefix or not, as transformers "
               "allows. */\nconst char *const cg_hf_prefix = ");
    cstr(f, h->prefix);
    fprintf(f, ";\nconst int cg_hf_prefixed = %d; /* the hf names here carry it */\n", h->prefixed);
}

bool cg_hf_config(Cg *c, const char *dir)
{
    derive(c);
    const char *path = ir_sprintf(c->arena, "%s/%s", dir, CG_HF_FILE);
    if (c->hf.arch) {
        const char *text = cg_hf_json(c, "float32");
        FILE *f = fopen(path, "w");
        bool ok = f && fputs(text, f) >= 0;
        if (f && fclose(f) != 0)
            ok = false;
        if (!ok) {
            ir_error(IR_NOLOC, "cannot write %s: %s", path, strerror(errno));
            return false;
        }
        const char *why = cg_hf_check(c, path);
        if (why) {
            unlink(path);
            const char *arch = c->hf.arch;
            c->hf = (CgHf){0};
            c->hf.why = cg_fmt(c, "its graph is not %s's: %s", arch, why);
        }
    }
    if (!c->hf.arch)
        ir_note(IR_NOLOC, "%s has no Hugging Face config: %s; its program refuses "
                "--export-hf DIR (--export-hf FILE.safetensors writes the weights alone)",
                c->g->name, c->hf.why);
    return true;
}
