/* hf_config.c: a Hugging Face config.json read strictly into an HfModel.
 *
 * Four dense architectures (and the MoE ones below: Mixtral, Qwen2-MoE,
 * Qwen3-MoE, GPT-OSS's read_gpt_oss): LlamaForCausalLM (LLaMA-2, LLaMA-3 and 3.1 with
 * rope_scaling of type llama3, grouped-query attention, tied or untied
 * embeddings), MistralForCausalLM (a sliding window), Qwen2ForCausalLM (q, k
 * and v biases) and GPT2LMHeadModel. Every key of the file is one of:
 *   - read: it sets a constant (absent optional keys take the default of
 *     transformers' config class, and the .mdl says so);
 *   - checked: it must have the value ptdc computes (hidden_act "silu",
 *     attention_bias false, ...), otherwise it is refused by name;
 *   - accepted without effect: dropout rates (ptdc trains without dropout),
 *     LLaMA's pretraining_tp (it only splits HF's matmuls), a Qwen2 window
 *     that use_sliding_window turns off; the .mdl lists them;
 *   - metadata (token ids, dtype, versions, GPT-2's summary_* head).
 * Any other key, architecture or value is refused by name: an import never
 * guesses. The JSON is parsed by the strict reader the runtime uses too
 * (json/json.c). */
#include "fe.h"
#include "hf.h"

#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HF_MAX_CONFIG (16 << 20)

typedef struct Rd {
    IrArena *a;
    const char *path;
    const char *arch;     /* for messages */
    const JsonValue *root;
    bool *used;           /* per key of root */
    bool ok;
} Rd;

__attribute__((format(printf, 2, 3))) static void fail(Rd *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ir_error(IR_NOLOC, "%s: %s", r->path, msg);
    r->ok = false;
}

/* The value of `key` (marked used), or NULL when absent or JSON null. */
static const JsonValue *take(Rd *r, const char *key)
{
    for (int i = 0; i < r->root->n; i++)
        if (strcmp(r->root->keys[i], key) == 0) {
            r->used[i] = true;
            return r->root->items[i].kind == JSON_NULL ? NULL : &r->root->items[i];
        }
    return NULL;
}

static bool present(Rd *r, const char *key)
{
    for (int i = 0; i < r->root->n; i++)
        if (strcmp(r->root->keys[i], key) == 0)
            return true;
    return false;
}

static bool as_double(const JsonValue *v, double *out)
{
    if (v->kind != JSON_NUMBER)
        return false;
    char *end;
    *out = strtod(v->text, &end);
    return *end == 0 && isfinite(*out);
}

/* A positive integer; absent: required (an error) or `def` with why `dwhy`. */
static void int_key(Rd *r, const char *key, HfConst *c, bool required, int64_t def,
                    const char *dwhy)
{
    const JsonValue *v = take(r, key);
    if (!v) {
        if (required)
            fail(r, "key '%s' is missing; %s needs it", key, r->arch);
        *c = (HfConst){true, true, def, 0, dwhy};
        return;
    }
    int64_t i;
    if (json_uint(v, &i) != 0 || i < 1 || i > ((int64_t)1 << 40)) {
        fail(r, "'%s' must be a positive integer, got %s", key,
             v->kind == JSON_NUMBER ? v->text : "a non-number");
        i = 1;
    }
    *c = (HfConst){true, true, i, 0, key};
}

/* Operators of the smallest decoder layer import-hf writes (Mixtral's 14;
 * LLaMA's 15, GPT-2's and Qwen2's 18). */
enum { HF_MIN_LAYER_OPS = 14 };

/* A positive number (or >= 0 when zero_ok). */
static void num_key(Rd *r, const char *key, HfConst *c, double def, const char *dwhy)
{
    const JsonValue *v = take(r, key);
    if (!v) {
        *c = (HfConst){true, false, 0, def, dwhy};
        return;
    }
    double f;
    if (!as_double(v, &f) || !(f > 0)) {
        fail(r, "'%s' must be a positive number, got %s", key,
             v->kind == JSON_NUMBER ? v->text : "a non-number");
        f = def;
    }
    *c = (HfConst){true, false, 0, f, key};
}

static bool bool_key(Rd *r, const char *key, bool def)
{
    const JsonValue *v = take(r, key);
    if (!v)
        return def;
    if (v->kind != JSON_BOOL) {
        fail(r, "'%s' must be true or false", key);
        return def;
    }
    return v->boolean;
}

static const char *str_key(Rd *r, const char *key, const char *def)
{
    const JsonValue *v = take(r, key);
    if (!v)
        return def;
    if (v->kind != JSON_STRING) {
        fail(r, "'%s' must be a string", key);
        return def;
    }
    return ir_strdup(r->a, v->text);
}

/* A boolean that must have one value: anything else is a model ptdc does not build. */
static void must_bool(Rd *r, const char *key, bool want, const char *why)
{
    if (bool_key(r, key, want) != want)
        fail(r, "'%s': %s is not supported (%s)", key, want ? "false" : "true", why);
}

static void note(Rd *r, HfModel *m, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(Rd *r, HfModel *m, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (m->nnotes < HF_MAX_NOTES)
        m->notes[m->nnotes++] = ir_strdup(r->a, msg);
}

/* A dropout rate: accepted, said in the header; ptdc trains without dropout. */
static void dropout_key(Rd *r, HfModel *m, const char *key)
{
    const JsonValue *v = take(r, key);
    if (!v)
        return;
    double f;
    if (!as_double(v, &f) || f < 0 || f >= 1) {
        fail(r, "'%s' must be a dropout rate in [0, 1), got %s", key,
             v->kind == JSON_NUMBER ? v->text : "a non-number");
        return;
    }
    if (f > 0)
        note(r, m, "%s %s: dropout is not modelled (ptdc trains without it)", key, v->text);
}

/* rope_scaling: null, or {"rope_type" (or "type"): "llama3", "factor",
 * "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}. */
static void rope_scaling(Rd *r, HfModel *m)
{
    const JsonValue *s = take(r, "rope_scaling");
    if (!s)
        return;
    if (s->kind != JSON_OBJECT) {
        fail(r, "'rope_scaling' must be an object or null");
        return;
    }
    const JsonValue *type = json_get(s, "rope_type");
    if (!type)
        type = json_get(s, "type");
    if (!type || type->kind != JSON_STRING) {
        fail(r, "'rope_scaling' has no rope_type");
        return;
    }
    if (strcmp(type->text, "default") == 0 && s->n == 1)
        return; /* transformers' name for no scaling */
    if (strcmp(type->text, "llama3") != 0) {
        fail(r, "rope_scaling type '%s' is not supported (ptdc implements llama3 only)",
             type->text);
        return;
    }
    static const char *const keys[] = {"rope_type", "type", "factor", "low_freq_factor",
                                       "high_freq_factor", "original_max_position_embeddings"};
    for (int i = 0; i < s->n; i++) {
        bool known = false;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            known |= strcmp(s->keys[i], keys[k]) == 0;
        if (!known)
            fail(r, "rope_scaling.%s is not supported for rope_type llama3", s->keys[i]);
    }
    struct {
        const char *key;
        HfConst *c;
        bool is_int;
    } f[] = {{"factor", &m->rope_factor, false},
             {"low_freq_factor", &m->rope_low, false},
             {"high_freq_factor", &m->rope_high, false},
             {"original_max_position_embeddings", &m->rope_orig, true}};
    for (int i = 0; i < 4; i++) {
        const JsonValue *v = json_get(s, f[i].key);
        double d = 0;
        int64_t n = 0;
        bool good = v && (f[i].is_int ? json_uint(v, &n) == 0 && n > 0 : as_double(v, &d) && d > 0);
        if (!good) {
            fail(r, "rope_scaling.%s %s", f[i].key,
                 !v ? "is missing (llama3 scaling needs it)"
                    : f[i].is_int ? "must be a positive integer" : "must be a positive number");
            continue;
        }
        *f[i].c = (HfConst){true, f[i].is_int, n, d,
                            ir_sprintf(r->a, "rope_scaling.%s", f[i].key)};
    }
    if (m->rope_high.set && m->rope_low.set && !(m->rope_high.f > m->rope_low.f))
        fail(r, "rope_scaling.high_freq_factor must be greater than low_freq_factor");
    m->llama3 = true;
}

/* GptOssForCausalLM (transformers' modeling_gpt_oss.py, configuration_gpt_oss.py):
 * the LLaMA decoder with biases on q, k, v and o (attention_bias, which
 * GptOssConfig forces true), a learned sink logit per head (self_attn.sinks),
 * a window on the layers layer_types calls sliding_attention (by default
 * every even one, which is the only order ptdc's .mdl writes:
 * models/gpt-oss.mdl), and a mixture of experts in every layer whose router
 * has a bias and takes the softmax of the top-k logits (GptOssTopKRouter,
 * ptdc's renormalised top-k) and whose experts compute the clamped SwiGLU
 * (GptOssExperts: alpha 1.702, limit 7.0 in its code: ptdc's swiglu_oai) with
 * biases, gate and up interleaved column by column in gate_up_proj. The
 * experts' keys are read_moe's. */
static void read_gpt_oss(Rd *r, HfModel *m)
{
    m->qkv_bias = true;
    /* GptOssConfig's rope_scaling defaults to YaRN (factor 32 over 4096
     * positions), which ptdc does not compute: only an explicit null (or
     * llama3) imports; rope_scaling() refuses yarn by name. */
    if (!present(r, "rope_scaling"))
        fail(r, "'rope_scaling' absent: GptOssConfig's default is YaRN (factor 32 over 4096 positions), which "
             "ptdc does not compute (it implements llama3 scaling only); a config with \"rope_scaling\": null "
             "imports");
    must_bool(r, "attention_bias", true, "GptOssConfig sets attention_bias true whatever the file says");
    if (!present(r, "sliding_window"))
        m->window = (HfConst){true, true, 128, 0, "sliding_window absent: 128, GptOssConfig's default"};
    else if (take(r, "sliding_window"))
        int_key(r, "sliding_window", &m->window, true, 1, NULL);
    else
        fail(r, "'sliding_window' null: GPT-OSS's sliding layers need a window");
    const JsonValue *lt = take(r, "layer_types");
    for (int64_t i = 0; lt && r->ok && i < m->n_layers.i; i++) {
        const char *want = (i + 1) % 2 ? "sliding_attention" : "full_attention";
        if (lt->kind != JSON_ARRAY || lt->n != m->n_layers.i) {
            fail(r, "'layer_types' must list num_hidden_layers (%lld) layer types", (long long)m->n_layers.i);
            break;
        }
        const JsonValue *v = &lt->items[i];
        if (v->kind != JSON_STRING || strcmp(v->text, want) != 0) {
            fail(r, "layer_types[%lld] is %s, where ptdc writes GPT-OSS's order only (%s on every even layer, "
                 "full_attention on every odd one, GptOssConfig's default)", (long long)i,
                 v->kind == JSON_STRING ? v->text : "not a string", "sliding_attention");
            break;
        }
    }
    /* transformers' GptOssExperts clamps at 7.0 whatever the config says; the
     * key is OpenAI's (its reference code reads it). */
    const JsonValue *lim = take(r, "swiglu_limit");
    double f = 7.0;
    if (lim && (!as_double(lim, &f) || f != 7.0))
        fail(r, "'swiglu_limit' %s: transformers' GptOssExperts clamps at 7.0 (limit), as ptdc's swiglu_oai does",
             lim->kind == JSON_NUMBER ? lim->text : "not a number");
    if (present(r, "quantization_config") && take(r, "quantization_config"))
        fail(r, "'quantization_config': quantized experts (OpenAI's checkpoints store them as MXFP4 blocks and "
             "scales) are not read; the training program reads F32, BF16 and F16 tensors (use a BF16 checkpoint)");
    const JsonValue *ic = take(r, "initial_context_length");
    if (ic)
        note(r, m, "initial_context_length %s: YaRN's original length in OpenAI's config; no rope_scaling, no effect",
             ic->kind == JSON_NUMBER ? ic->text : "?");
}

/* LLaMA, Mistral and Qwen2 share one decoder (HF copies Mistral and Qwen2
 * from LLaMA); their differences are the keys below. */
static void read_llama_like(Rd *r, HfModel *m)
{
    int_key(r, "num_hidden_layers", &m->n_layers, true, 1, NULL);
    /* Said against the key: the unrolling's own limit would be reported on
     * a line of the .mdl text generated from it, which the user never saw. */
    if (m->n_layers.i * HF_MIN_LAYER_OPS > FE_MAX_NODES)
        fail(r, "'num_hidden_layers' is %lld: more layers than ptdc unrolls (a model has at most "
             "%d operators, a decoder layer at least %d)",
             (long long)m->n_layers.i, FE_MAX_NODES, HF_MIN_LAYER_OPS);
    int_key(r, "hidden_size", &m->d_model, true, 1, NULL);
    int_key(r, "num_attention_heads", &m->n_heads, true, 1, NULL);
    int_key(r, "intermediate_size", &m->d_ff, true, 1, NULL);
    int_key(r, "vocab_size", &m->vocab, true, 1, NULL);
    int_key(r, "max_position_embeddings", &m->seq, m->arch != HF_GPT_OSS, 131072,
            "absent: 131072, GptOssConfig's default");
    /* Absent: LlamaConfig's None (the query heads); the MoE classes' defaults are numbers. */
    if (m->arch == HF_GPT_OSS)
        int_key(r, "num_key_value_heads", &m->n_kv_heads, false, 8, "absent: 8, GptOssConfig's default");
    else if (m->arch == HF_MIXTRAL || m->arch == HF_QWEN2_MOE || m->arch == HF_QWEN3_MOE)
        int_key(r, "num_key_value_heads", &m->n_kv_heads, false,
                m->arch == HF_MIXTRAL ? 8 : m->arch == HF_QWEN2_MOE ? 16 : 4,
                m->arch == HF_MIXTRAL    ? "absent: 8, MixtralConfig's default"
                : m->arch == HF_QWEN2_MOE ? "absent: 16, Qwen2MoeConfig's default"
                                          : "absent: 4, Qwen3MoeConfig's default");
    else
        int_key(r, "num_key_value_heads", &m->n_kv_heads, false, m->n_heads.i,
                "absent: num_attention_heads, as HF");
    int64_t h = m->n_heads.i, kv = m->n_kv_heads.i, d = m->d_model.i;
    bool sizes = r->ok; /* the checks between sizes only when each was read */
    if (sizes && h % kv != 0)
        fail(r, "num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
             (long long)h, (long long)kv);
    m->kv_is_heads = kv == h;
    if (present(r, "head_dim") && take(r, "head_dim")) {
        int_key(r, "head_dim", &m->head_dim, true, 1, NULL);
        m->head_dim_derived = m->head_dim.i * h == d;
    } else {
        if (sizes && d % h != 0)
            fail(r, "hidden_size %lld is not a multiple of num_attention_heads %lld (and there "
                 "is no head_dim)", (long long)d, (long long)h);
        m->head_dim = (HfConst){true, true, d / h, 0, "hidden_size / num_attention_heads"};
        m->head_dim_derived = true;
    }
    if (sizes && m->head_dim.i % 2 != 0)
        fail(r, "head_dim %lld is odd; rotary embeddings rotate pairs", (long long)m->head_dim.i);
    num_key(r, "rms_norm_eps", &m->norm_eps, m->arch == HF_GPT_OSS ? 1e-5 : 1e-6, "absent: HF's default");
    num_key(r, "rope_theta", &m->rope_theta, m->arch == HF_GPT_OSS ? 150000.0 : 10000.0, "absent: HF's default");
    num_key(r, "initializer_range", &m->init_std, 0.02, "absent: HF's default");
    bool given = present(r, "tie_word_embeddings");
    m->tied = bool_key(r, "tie_word_embeddings", false);
    m->tied_why = m->tied ? "tie_word_embeddings: the token table is the head"
                : given   ? "tie_word_embeddings false: a head of its own"
                          : "tie_word_embeddings absent (false, as HF): a head of its own";
    const char *act = str_key(r, "hidden_act", "silu");
    if (strcmp(act, "silu") != 0)
        fail(r, "hidden_act '%s' is not supported (ptdc's SwiGLU uses silu)", act);
    dropout_key(r, m, "attention_dropout");
    rope_scaling(r, m);
    switch (m->arch) {
    case HF_LLAMA: {
        must_bool(r, "attention_bias", false, "LLaMA's projections have no bias in ptdc's import");
        must_bool(r, "mlp_bias", false, "LLaMA's MLP has no bias in ptdc's import");
        HfConst tp;
        int_key(r, "pretraining_tp", &tp, false, 1, NULL);
        if (tp.i != 1)
            note(r, m, "pretraining_tp %lld: only splits HF's matmuls; the result is the same",
                 (long long)tp.i);
        break;
    }
    case HF_MISTRAL:
        if (!present(r, "sliding_window"))
            m->window = (HfConst){true, true, 4096, 0, "sliding_window absent: 4096, MistralConfig's default"};
        else if (take(r, "sliding_window"))
            int_key(r, "sliding_window", &m->window, true, 1, NULL);
        break;
    case HF_MIXTRAL:
        if (take(r, "sliding_window")) /* MixtralConfig's default: null, none */
            int_key(r, "sliding_window", &m->window, true, 1, NULL);
        break;
    case HF_QWEN3_MOE:
        must_bool(r, "attention_bias", false, "Qwen3's projections have no bias");
        m->qk_norm = true;
        /* fall through */
    case HF_QWEN2_MOE:
    case HF_QWEN2: {
        m->qkv_bias = m->arch != HF_QWEN3_MOE;
        if (m->arch == HF_QWEN2_MOE)
            must_bool(r, "qkv_bias", true, "Qwen2-MoE's q, k and v projections have biases");
        const JsonValue *w = take(r, "sliding_window"), *l = take(r, "max_window_layers");
        if (bool_key(r, "use_sliding_window", false)) {
            fail(r, "'use_sliding_window': true is not supported (Qwen2's windows on layers "
                 "from max_window_layers on)");
            break;
        }
        if (w || l)
            note(r, m, "sliding_window %s, max_window_layers %s: unused, use_sliding_window is "
                 "false", w && w->kind == JSON_NUMBER ? w->text : "null",
                 l && l->kind == JSON_NUMBER ? l->text : "null");
        break;
    }
    case HF_GPT_OSS:
        read_gpt_oss(r, m);
        break;
    case HF_GPT2:
        break;
    }
}

/* A number >= 0 (a loss coefficient); absent: def. */
static void coef_key(Rd *r, const char *key, HfConst *c, double def, const char *why,
                     const char *dwhy)
{
    const JsonValue *v = take(r, key);
    double f = def;
    if (v && (!as_double(v, &f) || f < 0)) {
        fail(r, "'%s' must be a number >= 0, got %s", key,
             v->kind == JSON_NUMBER ? v->text : "a non-number");
        f = def;
    }
    *c = (HfConst){true, false, 0, f, v ? why : dwhy};
}

/* The mixture of experts of Mixtral (every layer; experts as wide as
 * intermediate_size), Qwen2-MoE and Qwen3-MoE (experts of
 * moe_intermediate_size; layer i is MoE unless listed in mlp_only_layers or
 * (i + 1) % decoder_sparse_step != 0, as their decoder layers decide; the
 * others are dense MLPs of intermediate_size). */
static void read_moe(Rd *r, HfModel *m)
{
    m->moe = true;
    bool oss = m->arch == HF_GPT_OSS;
    bool mixtral = m->arch == HF_MIXTRAL || oss; /* num_local_experts, every layer MoE, d_ff wide */
    const char *ekey = mixtral ? "num_local_experts" : "num_experts";
    int64_t edef = mixtral ? 8 : m->arch == HF_QWEN2_MOE ? 60 : 128;
    if (oss)
        edef = 128;
    int_key(r, ekey, &m->n_experts, false, edef,
            oss ? "absent: 128, GptOssConfig's default"
            : mixtral ? "absent: 8, MixtralConfig's default"
            : m->arch == HF_QWEN2_MOE ? "absent: 60, Qwen2MoeConfig's default"
                                      : "absent: 128, Qwen3MoeConfig's default");
    int_key(r, "num_experts_per_tok", &m->topk, false, oss ? 4 : mixtral ? 2 : m->arch == HF_QWEN2_MOE ? 4 : 8,
            "absent: HF's default");
    const JsonValue *ept = oss ? take(r, "experts_per_token") : NULL; /* OpenAI's name for it */
    int64_t k2;
    if (ept && (json_uint(ept, &k2) != 0 || k2 != m->topk.i))
        fail(r, "'experts_per_token' %s differs from num_experts_per_tok %lld",
             ept->kind == JSON_NUMBER ? ept->text : "(not a number)", (long long)m->topk.i);
    if (r->ok && m->topk.i > m->n_experts.i)
        fail(r, "num_experts_per_tok %lld is more than the %lld experts", (long long)m->topk.i,
             (long long)m->n_experts.i);
    coef_key(r, "router_aux_loss_coef", &m->aux, oss ? 0.9 : 0.001,
             "router_aux_loss_coef (per sequence here: docs/moe.md)",
             oss ? "router_aux_loss_coef absent: 0.9, GptOssConfig's default"
                 : "router_aux_loss_coef absent: 0.001, HF's default");
    const JsonValue *orl = take(r, "output_router_logits");
    if (orl && orl->kind != JSON_BOOL)
        fail(r, "'output_router_logits' must be true or false");
    else
        note(r, m, "output_router_logits %s: ptdc always adds the load-balancing loss, "
             "router_aux_loss_coef x its per-sequence form (docs/moe.md)",
             orl && orl->boolean ? "true" : "false (or absent)");
    if (mixtral) {
        m->d_expert = m->d_ff;
        m->norm_topk = true; /* Mixtral renormalises the two weights; GPT-OSS softmaxes the top-k logits */
        const JsonValue *j = oss ? NULL : take(r, "router_jitter_noise");
        double f = 0;
        if (j && (!as_double(j, &f) || f < 0 || f >= 1))
            fail(r, "'router_jitter_noise' must be a number in [0, 1)");
        else if (f > 0)
            note(r, m, "router_jitter_noise %s: noise is not modelled (ptdc trains without it)",
                 j->text);
    } else {
        int_key(r, "moe_intermediate_size", &m->d_expert, true, 1, NULL);
        if (m->arch == HF_QWEN2_MOE)
            int_key(r, "shared_expert_intermediate_size", &m->d_shared, true, 1, NULL);
        m->norm_topk = bool_key(r, "norm_topk_prob", false);
    }
    int64_t n = m->n_layers.i > 0 ? m->n_layers.i : 1;
    m->moe_layer = ir_alloc(r->a, (size_t)n * sizeof *m->moe_layer);
    for (int64_t i = 0; i < n; i++)
        m->moe_layer[i] = true;
    if (mixtral)
        return;
    HfConst step;
    int_key(r, "decoder_sparse_step", &step, false, 1, NULL);
    const JsonValue *only = take(r, "mlp_only_layers");
    if (only && only->kind != JSON_ARRAY) {
        fail(r, "'mlp_only_layers' must be a list of layer indices");
        only = NULL;
    }
    for (int i = 0; only && i < only->n; i++) {
        int64_t k;
        if (json_uint(&only->items[i], &k) != 0 || k >= n) {
            fail(r, "mlp_only_layers[%d] must be a layer index from 0 to %lld", i,
                 (long long)(n - 1));
            continue;
        }
        m->moe_layer[k] = false;
    }
    for (int64_t i = 0; i < n; i++) {
        if ((i + 1) % step.i != 0)
            m->moe_layer[i] = false;
        m->any_dense |= !m->moe_layer[i];
    }
    if (!m->any_dense)
        note(r, m, "intermediate_size %lld: unused, every layer's MLP is a mixture of experts",
             (long long)m->d_ff.i);
}

static void read_gpt2(Rd *r, HfModel *m)
{
    int_key(r, "n_layer", &m->n_layers, true, 1, NULL);
    int_key(r, "n_embd", &m->d_model, true, 1, NULL);
    int_key(r, "n_head", &m->n_heads, true, 1, NULL);
    int_key(r, "vocab_size", &m->vocab, true, 1, NULL);
    int_key(r, "n_positions", &m->seq, true, 1, NULL);
    m->seq.why = "n_positions: the rows of the position table";
    HfConst ctx;
    int_key(r, "n_ctx", &ctx, false, m->seq.i, NULL);
    if (ctx.i != m->seq.i)
        fail(r, "n_ctx %lld differs from n_positions %lld", (long long)ctx.i, (long long)m->seq.i);
    int_key(r, "n_inner", &m->d_ff, false, 4 * m->d_model.i, "n_inner absent: 4 x n_embd, as HF");
    m->n_kv_heads = m->n_heads;
    m->kv_is_heads = true;
    if (r->ok && m->d_model.i % m->n_heads.i != 0)
        fail(r, "n_embd %lld is not a multiple of n_head %lld", (long long)m->d_model.i,
             (long long)m->n_heads.i);
    m->head_dim = (HfConst){true, true, m->d_model.i / m->n_heads.i, 0, "n_embd / n_head"};
    m->head_dim_derived = true;
    num_key(r, "layer_norm_epsilon", &m->norm_eps, 1e-5, "absent: HF's default");
    num_key(r, "initializer_range", &m->init_std, 0.02, "absent: HF's default");
    const char *act = str_key(r, "activation_function", "gelu_new");
    if (strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0)
        fail(r, "activation_function '%s' is not supported (ptdc's gelu is the tanh "
             "approximation: gelu_new)", act);
    dropout_key(r, m, "resid_pdrop");
    dropout_key(r, m, "embd_pdrop");
    dropout_key(r, m, "attn_pdrop");
    must_bool(r, "scale_attn_weights", true, "ptdc scales scores by 1/sqrt(head_dim)");
    must_bool(r, "scale_attn_by_inverse_layer_idx", false, "ptdc scales every layer alike");
    must_bool(r, "add_cross_attention", false, "GPT2LMHeadModel is a decoder only");
    if (bool_key(r, "reorder_and_upcast_attn", false))
        note(r, m, "reorder_and_upcast_attn true: only the precision of HF's scores; the same math");
    must_bool(r, "tie_word_embeddings", true, "GPT2LMHeadModel's head is the token table");
    m->tied = true;
    m->tied_why = "GPT-2's head is the token table";
}

/* Keys that describe nothing ptdc computes. */
static bool metadata_key(HfArch arch, const char *k)
{
    static const char *const common[] = {
        "_name_or_path", "architectures", "model_type", "transformers_version", "torch_dtype",
        "dtype", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id", "tokenizer_class",
    };
    static const char *const gpt2[] = {
        "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
        "summary_use_proj", "task_specific_params", /* GPT2DoubleHeadsModel's head */
    };
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++)
        if (strcmp(k, common[i]) == 0)
            return true;
    if (arch == HF_GPT2)
        for (size_t i = 0; i < sizeof gpt2 / sizeof gpt2[0]; i++)
            if (strcmp(k, gpt2[i]) == 0)
                return true;
    return false;
}

static const struct {
    const char *name, *model_type;
    HfArch arch;
} archs[] = {
    {"LlamaForCausalLM", "llama", HF_LLAMA},
    {"MistralForCausalLM", "mistral", HF_MISTRAL},
    {"Qwen2ForCausalLM", "qwen2", HF_QWEN2},
    {"GPT2LMHeadModel", "gpt2", HF_GPT2},
    {"MixtralForCausalLM", "mixtral", HF_MIXTRAL},
    {"Qwen2MoeForCausalLM", "qwen2_moe", HF_QWEN2_MOE},
    {"Qwen3MoeForCausalLM", "qwen3_moe", HF_QWEN3_MOE},
    {"GptOssForCausalLM", "gpt_oss", HF_GPT_OSS},
};

#define HF_ARCH_LIST "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, " \
                     "GPT2LMHeadModel, MixtralForCausalLM, Qwen2MoeForCausalLM, " \
                     "Qwen3MoeForCausalLM and GptOssForCausalLM"

static bool read_arch(Rd *r, HfModel *m)
{
    const JsonValue *v = take(r, "architectures");
    if (!v || v->kind != JSON_ARRAY || v->n != 1 || v->items[0].kind != JSON_STRING) {
        fail(r, "'architectures' must name one model class (" HF_ARCH_LIST ")");
        return false;
    }
    const char *name = v->items[0].text;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(name, archs[i].name) == 0) {
            m->arch = archs[i].arch;
            m->arch_name = archs[i].name;
            m->model_type = archs[i].model_type;
            r->arch = archs[i].name;
            const char *mt = str_key(r, "model_type", archs[i].model_type);
            if (strcmp(mt, archs[i].model_type) != 0)
                fail(r, "model_type '%s' does not match %s (model_type '%s')", mt, name,
                     archs[i].model_type);
            return true;
        }
    if (!strcmp(name, "DeepseekV3ForCausalLM") || !strcmp(name, "DeepseekV2ForCausalLM")) {
        const JsonValue *kv = json_get(r->root, "kv_lora_rank");
        fail(r, "architecture '%s' is not supported: multi-head latent attention (DeepSeek-V3's "
             "kv_lora_rank %s, q_lora_rank and decoupled rope dims) is not implemented; "
             "models/deepseek-v3.mdl has its MoE layers with grouped-query attention", name,
             kv && kv->kind == JSON_NUMBER ? kv->text : "(absent)");
        return false;
    }
    fail(r, "architecture '%s' is not supported (ptdc imports " HF_ARCH_LIST ")", name);
    return false;
}

static char *read_file(const char *path, size_t *len)
{
    /* ir_open_regular: a FIFO never blocks, and a FIFO or a directory is
     * refused by what it is (it was "no such file"). */
    FILE *f = ir_open_regular(path, "Hugging Face config", IR_NOLOC);
    struct stat sb;
    if (!f)
        return NULL;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size > HF_MAX_CONFIG) {
        ir_error(IR_NOLOC, "%s: %lld bytes is too large for a config.json", path,
                 (long long)sb.st_size);
        fclose(f);
        return NULL;
    }
    char *text = ir_xmalloc((size_t)sb.st_size + 1);
    size_t n = fread(text, 1, (size_t)sb.st_size, f);
    if (n != (size_t)sb.st_size || ferror(f)) {
        ir_error(IR_NOLOC, "%s: cannot read", path);
        fclose(f);
        free(text);
        return NULL;
    }
    fclose(f);
    text[n] = 0;
    *len = n;
    return text;
}

bool hf_config_read(IrArena *a, const char *path, HfModel *m)
{
    memset(m, 0, sizeof *m);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        path = ir_sprintf(a, "%s/config.json", path);
    m->path = ir_strdup(a, path);
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text)
        return false;
    char jerr[256];
    JsonValue *root = json_parse(text, len, jerr, sizeof jerr);
    free(text);
    if (!root) {
        ir_error(IR_NOLOC, "%s: malformed JSON: %s", path, jerr);
        return false;
    }
    Rd r = {.a = a, .path = m->path, .arch = "the model", .root = root, .ok = true};
    if (root->kind != JSON_OBJECT) {
        fail(&r, "a config.json holds one JSON object");
        json_free(root);
        return false;
    }
    r.used = ir_xcalloc((size_t)(root->n ? root->n : 1), sizeof *r.used);
    if (read_arch(&r, m)) {
        if (m->arch == HF_GPT2)
            read_gpt2(&r, m);
        else
            read_llama_like(&r, m);
        if (m->arch == HF_MIXTRAL || m->arch == HF_QWEN2_MOE || m->arch == HF_QWEN3_MOE ||
            m->arch == HF_GPT_OSS)
            read_moe(&r, m);
        for (int i = 0; i < root->n; i++)
            if (!r.used[i] && !metadata_key(m->arch, root->keys[i]))
                fail(&r, "key '%s' is not supported for %s (ptdc imports only what it "
                     "reproduces exactly)", root->keys[i], m->arch_name);
    }
    free(r.used);
    json_free(root);
    return r.ok;
}
