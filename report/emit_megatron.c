/* emit_megatron.c: --emit megatron, the chosen plan as Megatron-LM
 * (Megatron-Core) command-line flags for pretrain_gpt.py (pretrain_hybrid.py
 * for a Mamba-2 hybrid: HybridModel). The flags are
 * those of megatron/training/arguments.py and the config dataclasses it
 * builds them from (TransformerConfig, ModelParallelConfig) at Megatron-LM
 * main of August 2026 (d98e8a64ddf3); docs/stacks.md maps them one by one.
 * The model goes through one handler per property (arch.def) and per
 * operator attribute (ir/attrs.def): each states it as flags or refuses by
 * name. What the flags cannot state is refused before anything is printed. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------ the model, row by row */

static bool mg_arch_LAYERS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (A->hybrid) /* validate_args counts them in --hybrid-layer-pattern (mg_hybrid_pattern) */
        return true;
    rep_frame_arg(o, "--num-layers %d", A->layers);
    return true;
}

/* Megatron-Core's MoELayer: --num-experts routed experts of
 * --moe-ffn-hidden-size, run as grouped GEMMs (TEGroupedMLP). Without a
 * load-balancing loss: --moe-router-load-balancing-type none (the default
 * aux_loss would add one). The dispatcher and the expert parallel degrees
 * are the plan's (layout flags). */
static bool mg_arch_EXPERTS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (!A->moe)
        return true;
    rep_frame_arg(o, "--num-experts %lld", (long long)A->n_experts);
    rep_frame_arg(o, "--moe-ffn-hidden-size %lld", (long long)A->d_ff);
    rep_frame_arg(o, "--moe-grouped-gemm");
    if (!A->has_attr[IR_ATTR_ROUTE_AUX])
        rep_frame_arg(o, "--moe-router-load-balancing-type none");
    return true;
}

/* Megatron-Core's SharedExpertMLP (shared_experts.py): an MLP of
 * --moe-shared-expert-intermediate-size with the config's activation
 * (SwiGLU) and no biases (it asserts add_bias_linear off), on every token,
 * its output added to the routed experts' (MoELayer.postprocess). With
 * --moe-shared-expert-gate that output is first multiplied by
 * sigmoid(h . gate_weight), gate_weight [1, hidden]: Qwen2-MoE's
 * shared_expert_gate, which ptdc writes as a one-expert moe gated by
 * route(topk = 1, score = sigmoid, norm = false), the same product.
 * (--moe-shared-expert-overlap only moves it beside the dispatcher's
 * communication; the stacks do not price that.) */
static bool mg_arch_SHARED(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (!A->moe || !A->shared_ff)
        return true;
    rep_frame_arg(o, "--moe-shared-expert-intermediate-size %lld", (long long)A->shared_ff);
    if (A->shared_gate)
        rep_frame_arg(o, "--moe-shared-expert-gate");
    return true;
}

/* MoELayer's latent projections (moe_layer.py: fc1_latent_proj and
 * fc2_latent_proj, TELinear parallel_mode "duplicated", no bias under
 * --disable-bias-linear; experts.py and the dispatcher then work at
 * moe_latent_size). arguments.py asserts it positive and beside
 * --num-experts. */
static bool mg_arch_MOE_LATENT(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (A->moe && A->moe_latent)
        rep_frame_arg(o, "--moe-latent-size %lld", (long long)A->moe_latent);
    return true;
}

/* The layers' pattern as --moe-layer-freq's Python list expression
 * (arguments.py moe_freq_type: digits , [ ] ( ) + * only, no spaces), runs
 * of one kind: "([0]*3+[1]*58)"; a periodic pattern too long that way as
 * its period repeated. False when it does not fit n bytes. */
static bool mg_runs(const RepArch *A, int from, int len, char *buf, size_t n)
{
    size_t k = 0;
    for (int l = from; l < from + len;) {
        bool moe = A->layer_moe[l / 64] >> (l % 64) & 1;
        int r = 1;
        while (l + r < from + len && (bool)(A->layer_moe[(l + r) / 64] >> ((l + r) % 64) & 1) == moe)
            r++;
        int w = r > 1 ? snprintf(buf + k, n - k, "%s[%d]*%d", l > from ? "+" : "", moe, r)
                      : snprintf(buf + k, n - k, "%s[%d]", l > from ? "+" : "", moe);
        if (w < 0 || (size_t)w >= n - k)
            return false;
        k += (size_t)w;
        l += r;
    }
    return true;
}

static bool mg_layer_pattern(const RepArch *A, char *buf, size_t n)
{
    char runs[128];
    if (mg_runs(A, 0, A->layers, runs, sizeof runs))
        return snprintf(buf, n, "(%s)", runs) < (int)n;
    for (int p = 1; p < A->layers; p++) {
        if (A->layers % p)
            continue;
        bool periodic = true;
        for (int l = p; l < A->layers && periodic; l++)
            periodic = (A->layer_moe[l / 64] >> (l % 64) & 1) == (A->layer_moe[(l - p) / 64] >> ((l - p) % 64) & 1);
        if (periodic)
            return mg_runs(A, 0, p, runs, sizeof runs) && snprintf(buf, n, "(%s)*%d", runs, A->layers / p) < (int)n;
    }
    return false;
}

/* Dense layers among the MoE ones (DeepSeek-V3's first three, Qwen's
 * mlp_only_layers): gpt_layer_specs.py builds layer l as an MoE layer where
 * the --moe-layer-freq pattern has a 1, a dense MLP of --ffn-hidden-size
 * (D_FF) where it has a 0. */
static bool mg_arch_MOE_LAYERS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    char pat[140];
    if (!A->moe || !A->n_dense || A->hybrid) /* a hybrid's pattern says which layers are E and - */
        return true;
    if (!mg_layer_pattern(A, pat, sizeof pat))
        return rep_frame_refuse(g, o, "its %d dense and %d MoE layers alternate in a pattern too long for ptdc "
                                "to write as --moe-layer-freq", A->n_dense, A->layers - A->n_dense);
    rep_frame_arg(o, "--moe-layer-freq '%s'", pat);
    return true;
}

static bool mg_arch_D_MODEL(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--hidden-size %lld", (long long)A->d_model);
    return true;
}

static bool mg_arch_D_FF(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g; /* an MoE model's dense layers', else the experts' (then unused) */
    if (A->hybrid && !A->n_dense) /* no '-' layer: no MLP of ffn_hidden_size is built */
        return true;
    rep_frame_arg(o, "--ffn-hidden-size %lld", (long long)(A->moe && A->n_dense ? A->dense_ff : A->d_ff));
    return true;
}

static bool mg_arch_HEADS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--num-attention-heads %lld", (long long)A->heads);
    return true;
}

static bool mg_arch_KV_HEADS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (A->kv_heads != A->heads) {
        rep_frame_arg(o, "--group-query-attention");
        rep_frame_arg(o, "--num-query-groups %lld", (long long)A->kv_heads);
    }
    return true;
}

/* MLASelfAttention (multi_latent_attention.py): its sizes are flags of
 * their own (arguments.py, "multi-latent-attention"), kv_channels unused;
 * the latent norms are --qk-layernorm (mg_arch_QK_NORM). Megatron-Core
 * rotates interleaved pairs in MLA (mla_rotary_interleaved) where ptdc
 * rotates halves: a fixed permutation of the rope rows of the weights,
 * the same model trained from scratch. */
static bool mg_arch_LATENT(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (!A->mla)
        return true;
    rep_frame_arg(o, "--multi-latent-attention");
    rep_frame_arg(o, "--q-lora-rank %lld", (long long)A->q_lora);
    rep_frame_arg(o, "--kv-lora-rank %lld", (long long)A->kv_lora);
    rep_frame_arg(o, "--qk-head-dim %lld", (long long)A->qk_nope);
    rep_frame_arg(o, "--qk-pos-emb-head-dim %lld", (long long)A->qk_rope);
    rep_frame_arg(o, "--v-head-dim %lld", (long long)A->v_head);
    return true;
}

/* TransformerConfig.softmax_type learnable: a [heads] softmax_offset per
 * layer that joins each row's denominator (dot_product_attention.py; TE's
 * FusedAttention takes it too), ptdc's attention sinks. */
static bool mg_arch_SINKS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (A->sinks)
        rep_frame_arg(o, "--softmax-type learnable");
    return true;
}

static bool mg_arch_HEAD_DIM(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g; /* TransformerConfig: kv_channels = hidden_size / heads unless given */
    if (!A->mla && A->head_dim * A->heads != A->d_model)
        rep_frame_arg(o, "--kv-channels %lld", (long long)A->head_dim);
    return true;
}

static bool mg_arch_SEQ(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--seq-length %lld", (long long)A->seq);
    rep_frame_arg(o, "--max-position-embeddings %lld", (long long)A->seq);
    return true;
}

static bool mg_arch_POSITIONS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g; /* the rotary attributes (base, scaling) are rows of their own */
    rep_frame_arg(o, "--position-embedding-type %s", A->rope ? "rope" : A->learned_pos ? "learned_absolute" : "none");
    return true;
}

/* A hybrid is Megatron-Core's HybridModel (pretrain_hybrid.py, which the
 * deprecated pretrain_mamba.py runs): the layer kinds in order as
 * --hybrid-layer-pattern (printed with the pipeline split, mg_hybrid_pattern),
 * the Mamba-2 mixer's sizes as TransformerConfig's mamba_* fields, the layer
 * specs of hybrid_layer_specs.py (--spec; hybrid_builder raises without one).
 * MambaMixer (ssm/mamba_mixer.py) fixes what has no flag: a 4-tap causal
 * convolution with a bias (d_conv 4, conv_bias), no projection biases
 * (asserts not bias), D per head, the gated norm after the gate over groups of
 * d_inner / ngroups with eps 1e-5 (ExtendedRMSNorm), heads split over tp as
 * whole groups (ngroups % tp). --is-hybrid-model is not printed:
 * argument_utils.py sets it whenever the pattern is given. */
static bool mg_arch_HYBRID(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (!A->hybrid)
        return true;
    if (strchr(A->pattern, 'M') && A->m_conv != 4)
        return rep_frame_refuse(g, o, "its Mamba-2 convolution has %lld taps, and Megatron-Core's MambaMixer "
                                "builds 4 (d_conv, no flag)", (long long)A->m_conv);
    if (A->bias_linear)
        return rep_frame_refuse(g, o, "its hybrid layers have projection biases, and Megatron-Core's MambaMixer "
                                "has none (it asserts not bias) where --disable-bias-linear is the only choice");
    if (strchr(A->pattern, 'M') && A->attr[IR_ATTR_RMSNORM_EPS] != 1e-5)
        return rep_frame_refuse(g, o, "its norms' epsilon is %g, one value for all of them, and Megatron-Core's "
                                "Mamba-2 gated norm (ExtendedRMSNorm) fixes 1e-5 where --norm-epsilon sets the "
                                "others", A->attr[IR_ATTR_RMSNORM_EPS]);
    if (!A->heads)
        return rep_frame_refuse(g, o, "its pattern %.60s has no attention layer, and Megatron-LM requires "
                                "--num-attention-heads (TransformerConfig derives kv_channels from it)", A->pattern);
    if (strchr(A->pattern, 'M')) {
        rep_frame_arg(o, "--mamba-num-heads %lld", (long long)A->m_heads);
        rep_frame_arg(o, "--mamba-head-dim %lld", (long long)A->m_head_dim);
        rep_frame_arg(o, "--mamba-num-groups %lld", (long long)A->m_groups);
        rep_frame_arg(o, "--mamba-state-dim %lld", (long long)A->m_state);
    }
    rep_frame_arg(o, "--spec megatron.core.models.hybrid.hybrid_layer_specs hybrid_stack_spec");
    return true;
}

static bool mg_arch_NORM(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--normalization %s", A->rmsnorm ? "RMSNorm" : "LayerNorm");
    return true;
}

/* TransformerConfig.qk_layernorm: q_layernorm and k_layernorm over each
 * head's kv_channels, of the --normalization kind, before the rotary
 * embedding (megatron/core/transformer/attention.py). */
static bool mg_arch_QK_NORM(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (A->qk_norm)
        rep_frame_arg(o, "--qk-layernorm");
    return true;
}

/* Megatron-Core's GELU MLP is F.gelu (the exact, erf form) except where
 * bias_gelu_fusion runs, which is on by default and needs biases: its
 * bias_gelu kernel (megatron/core/fusions/fused_bias_gelu.py) is the tanh
 * form ptdc computes. arguments.py turns the fusion off without biases.
 * (--openai-gelu is read by nothing in Megatron-Core.) */
static bool mg_arch_MLP(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    /* A hybrid's MLPs ('-' layers, shared experts) and experts share the one
     * activation flag; squared ReLU is --squared-relu (mg_attr_MOE_ACT's
     * where there are experts). */
    if (A->hybrid) {
        int act = A->moe ? (int)A->attr[IR_ATTR_MOE_ACT] : -1;
        if (A->mlp_op == IR_OP_GELU)
            return rep_frame_refuse(g, o, "its MLPs compute GELU without biases, which Megatron-Core runs as the "
                                    "exact (erf) GELU, where ptdc's gelu is the tanh form");
        if (A->moe && A->mlp_op >= 0 && (act == IR_MOE_RELU2) != (A->mlp_op == IR_OP_RELU2))
            return rep_frame_refuse(g, o, "its MLPs compute %s and its experts %s, where Megatron's one activation "
                                    "(--squared-relu, --swiglu) sets both", ir_ops[A->mlp_op].name,
                                    act >= 0 && act < IR_NMOE_ACTS ? ir_moe_acts[act].name : "?");
        if (A->mlp_op == IR_OP_RELU2 && !A->moe)
            rep_frame_arg(o, "--squared-relu");
        if ((A->mlp_op == IR_OP_SWIGLU && !A->moe) || act == IR_MOE_SWIGLU)
            rep_frame_arg(o, "--swiglu");
        return true;
    }
    if (A->moe && A->attr[IR_ATTR_MOE_ACT] != IR_MOE_SWIGLU)
        return true; /* the experts' activation is mg_attr_MOE_ACT's */
    if (A->swiglu) {
        rep_frame_arg(o, "--swiglu");
        return true;
    }
    if (!A->bias_linear)
        return rep_frame_refuse(g, o, "its GELU MLP has no biases, and without them Megatron-Core runs the "
                                "exact (erf) GELU, where ptdc's gelu is the tanh form (Megatron-Core's fused "
                                "bias_gelu, which needs the biases)");
    return true;
}

static bool mg_arch_BIASES(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    /* --add-bias-linear (the default) also gives the grouped experts' two
     * projections a bias each (TEGroupedMLP: fc1's before the activation,
     * fc2's scaled by the routing probability), as ptdc's experts have them
     * where the model says so (moe's biases and matmul(gates, e_down_b),
     * models/gpt-oss.mdl); without them Megatron would build another model. */
    if (A->bias_linear && A->moe && !A->expert_bias)
        return rep_frame_refuse(g, o, "its MoE layers have biases on every projection and the router, and "
                                "Megatron-Core's --add-bias-linear gives its experts biases too (%lld x (2 x %lld + "
                                "%lld) a layer), which its experts do not have", (long long)A->n_experts,
                                (long long)A->d_ff, (long long)A->d_model);
    if (A->expert_bias && !A->bias_linear)
        return rep_frame_refuse(g, o, "its experts have biases and its other projections do not; Megatron-Core "
                                "has them on all (--add-bias-linear) or none");
    if (!A->bias_linear) {
        rep_frame_arg(o, "--disable-bias-linear");
        if (A->bias_qkv)
            rep_frame_arg(o, "--add-qkv-bias");
    }
    return true;
}

static bool mg_arch_TIED(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (!A->tied)
        rep_frame_arg(o, "--untie-embeddings-and-output-weights");
    return true;
}

static bool mg_arch_INIT_STD(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--init-method-std %g", A->init_std);
    return true;
}

static bool mg_arch_DTYPE(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (A->bf16)
        rep_frame_arg(o, "--bf16");
    return true;
}

/* Megatron-Core's MTP (multi_token_prediction.py): each depth's loss is
 * scaled by mtp_loss_scaling_factor / mtp_num_layers (process_mtp_loss),
 * and the module sits on the last pipeline stage, as the head's piece does.
 * Depths that run the first depth's layer and weights are
 * mtp_use_repeated_layer (MultiTokenPredictionBlock builds one layer). A
 * hybrid's depths are also its pattern's parts after '/' (mg_hybrid_pattern;
 * validate_args infers --mtp-num-layers from them and keeps this equal
 * count). */
static bool mg_arch_MTP(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    if (A->mtp_layers) {
        rep_frame_arg(o, "--mtp-num-layers %d", A->mtp_layers);
        rep_frame_arg(o, "--mtp-loss-scaling-factor %g", A->mtp_weight * A->mtp_layers);
        if (A->mtp_repeated)
            rep_frame_arg(o, "--mtp-use-repeated-layer");
    }
    return true;
}

static bool mg_arch_VOCAB(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g; /* the tokenizer gives it; Megatron pads it for the vocabulary-parallel layers */
    rep_frame_note(o, "The model's vocabulary is %lld; Megatron-LM pads the tokenizer's to a multiple of "
                   "128 x tp (--make-vocab-size-divisible-by).", (long long)A->vocab);
    return true;
}

static bool mg_eps(const IrGraph *g, const RepArch *A, RepFrameOut *o, IrAttrId id)
{
    (void)g;
    rep_frame_arg(o, "--norm-epsilon %g", A->attr[id]);
    return true;
}

static bool mg_attr_RMSNORM_EPS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    return mg_eps(g, A, o, IR_ATTR_RMSNORM_EPS);
}

/* Megatron's grouped norm is the Mamba mixer's own (MambaMixer's
 * RMSNormGated, --mamba-num-groups); a decoder layer's norms have none. */
static bool mg_attr_RMSNORM_GROUPS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)A;
    return rep_frame_refuse(g, o, "an RMSNorm normalises groups apart (group_dims), which a Megatron-LM "
                            "decoder layer's norms do not");
}

static bool mg_attr_LAYERNORM_EPS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    return mg_eps(g, A, o, IR_ATTR_LAYERNORM_EPS);
}

static bool mg_attr_ROPE_POS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if ((int)A->attr[IR_ATTR_ROPE_POS] != g->seq_dim)
        return rep_frame_refuse(g, o, "its rotary embedding counts positions along %s, not the sequence",
                                g->dims[(int)A->attr[IR_ATTR_ROPE_POS]].name);
    return true;
}

static bool mg_attr_ROPE_ROT(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if ((int)A->attr[IR_ATTR_ROPE_ROT] != (A->mla ? A->rope_dim_dim : A->head_dim_dim))
        return rep_frame_refuse(g, o, "its rotary embedding rotates %s, not the whole head dim",
                                g->dims[(int)A->attr[IR_ATTR_ROPE_ROT]].name);
    return true;
}

static bool mg_attr_ROPE_THETA(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    double t = A->attr[IR_ATTR_ROPE_THETA];
    if (t != floor(t) || t > 2147483647.0)
        return rep_frame_refuse(g, o, "its rotary base %g is not an integer, which --rotary-base (type=int) "
                                "requires", t);
    rep_frame_arg(o, "--rotary-base %.0f", t);
    return true;
}

static bool mg_attr_ROPE_SCALING(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g; /* rotary_pos_embedding.py: RotaryEmbedding(rope_scaling=...) -> _apply_scaling */
    if ((IrRopeKind)A->attr[IR_ATTR_ROPE_SCALING] == IR_ROPE_LLAMA3)
        rep_frame_arg(o, "--use-rope-scaling");
    return true;
}

static bool mg_attr_ROPE_FACTOR(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--rope-scaling-factor %g", A->attr[IR_ATTR_ROPE_FACTOR]);
    return true;
}

/* _apply_scaling's other parameters keep their defaults: RotaryEmbedding
 * passes only the factor (low 1, high 4, original context 8192, LLaMA-3.1's). */
static bool mg_fixed(const IrGraph *g, const RepArch *A, RepFrameOut *o, IrAttrId id, double fixed)
{
    if (A->attr[id] != fixed)
        return rep_frame_refuse(g, o, "its llama3 rope scaling has %s = %g, and Megatron-Core's "
                                "(rotary_pos_embedding.py, _apply_scaling) fixes it at %g; only the factor "
                                "is a flag (--rope-scaling-factor)", ir_attrs[id].name, A->attr[id], fixed);
    return true;
}

static bool mg_attr_ROPE_LOW(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    return mg_fixed(g, A, o, IR_ATTR_ROPE_LOW, 1);
}

static bool mg_attr_ROPE_HIGH(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    return mg_fixed(g, A, o, IR_ATTR_ROPE_HIGH, 4);
}

static bool mg_attr_ROPE_ORIGINAL(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    return mg_fixed(g, A, o, IR_ATTR_ROPE_ORIGINAL, 8192);
}

static bool mg_attr_ATTN_CAUSAL(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (A->attr[IR_ATTR_ATTN_CAUSAL] == 0)
        return rep_frame_refuse(g, o, "its attention is not causal; pretrain_gpt.py trains causal decoders");
    return true;
}

/* --window-size (left, right) as flash-attention and Transformer Engine
 * read it: query i sees keys i - left .. i + right. ptdc's window W lets i
 * see j with i - j < W: left W - 1, right 0. */
static bool mg_attr_ATTN_WINDOW(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--window-size %lld,0", (long long)A->attr[IR_ATTR_ATTN_WINDOW] - 1);
    if (A->window_skip_freq)
        rep_frame_arg(o, "--window-attn-skip-freq %d", A->window_skip_freq);
    return true;
}

static bool mg_attr_SOFTMAX_DIM(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)A; /* rep_arch_read refuses a layer with a softmax of its own before this */
    return rep_frame_refuse(g, o, "it has a softmax operator outside attention");
}

/* The router (docs/moe.md) as Megatron-Core's TopKRouter configures it.
 * An attribute that is one flag of its value: */
#define MG_FLAG(ID, flag, fmt, type)                                                           \
    static bool mg_attr_##ID(const IrGraph *g, const RepArch *A, RepFrameOut *o)               \
    {                                                                                          \
        (void)g;                                                                               \
        rep_frame_arg(o, flag " " fmt, (type)A->attr[IR_ATTR_##ID]);                            \
        return true;                                                                           \
    }
MG_FLAG(ROUTE_TOPK, "--moe-router-topk", "%lld", long long)
MG_FLAG(ROUTE_SCALE, "--moe-router-topk-scaling-factor", "%g", double)
MG_FLAG(ROUTE_GROUPS, "--moe-router-num-groups", "%lld", long long)
MG_FLAG(ROUTE_ZLOSS, "--moe-z-loss-coeff", "%g", double)
#undef MG_FLAG

/* Megatron-Core scores a group by the sum of its topk / group_topk best
 * scores (moe_utils.py, group_limited_topk); ptdc by its best (softmax) or
 * the sum of its two best (sigmoid, DeepSeek-V3): the same where
 * topk / group_topk is that count. */
static bool mg_attr_ROUTE_GTOPK(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    long long k = (long long)A->attr[IR_ATTR_ROUTE_TOPK], gk = (long long)A->attr[IR_ATTR_ROUTE_GTOPK];
    bool sig = A->attr[IR_ATTR_ROUTE_SCORE] == IR_SCORE_SIGMOID;
    if (A->attr[IR_ATTR_ROUTE_GROUPS] > 1 && k / gk != (sig ? 2 : 1))
        return rep_frame_refuse(g, o, "its router scores a group by %s, and Megatron-Core's by the sum of its "
                                "topk / group_topk = %lld best (moe_utils.py, group_limited_topk)",
                                sig ? "the sum of its two best sigmoids" : "its best score", k / gk);
    rep_frame_arg(o, "--moe-router-group-topk %lld", gk);
    return true;
}

/* The experts' activation (ir/moe_acts.def; swiglu, the default, is
 * --swiglu, stated by mg_arch_MLP). GPT-OSS's clamped SwiGLU is
 * Megatron-Core's quick GEGLU, quick_gelu(a) = a sigmoid(1.702 a), with
 * the linear half offset by 1 and both halves clamped at 7 (experts.py's
 * glu: x_glu.clamp(max=7), x_linear.clamp(-7, 7); TransformerConfig
 * glu_linear_offset, activation_func_clamp_value), as examples/gptoss
 * trains it. Squared ReLU is --squared-relu. */
static bool mg_attr_MOE_ACT(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    int act = (int)A->attr[IR_ATTR_MOE_ACT];
    if (act == IR_MOE_SWIGLU_OAI) {
        rep_frame_arg(o, "--quick-geglu");
        rep_frame_arg(o, "--glu-linear-offset 1.0");
        rep_frame_arg(o, "--activation-func-clamp-value 7.0");
        return true;
    }
    /* relu2: --squared-relu, no GLU (argument_utils.py); the experts' fused
     * weighted squared ReLU takes no bias (experts.py asserts it). */
    if (act == IR_MOE_RELU2 && !A->expert_bias) {
        rep_frame_arg(o, "--squared-relu");
        return true;
    }
    return rep_frame_refuse(g, o, "its experts' activation is %s%s, which Megatron-Core's experts do not compute",
                            act >= 0 && act < IR_NMOE_ACTS ? ir_moe_acts[act].name : "?",
                            act == IR_MOE_RELU2 ? " with biases" : "");
}

static bool mg_attr_ROUTE_SCORE(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--moe-router-score-function %s",
                  A->attr[IR_ATTR_ROUTE_SCORE] == IR_SCORE_SIGMOID ? "sigmoid" : "softmax");
    return true;
}

/* Megatron's softmax router takes the softmax of the k chosen logits,
 * which is the renormalised top-k of the full softmax (norm = true); the
 * full softmax's top-k unnormalised is --moe-router-pre-softmax. Its
 * sigmoid router always normalises k > 1 choices. */
static bool mg_attr_ROUTE_NORM(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    bool norm = A->attr[IR_ATTR_ROUTE_NORM] != 0;
    if (A->attr[IR_ATTR_ROUTE_SCORE] == IR_SCORE_SIGMOID) {
        if (!norm && A->attr[IR_ATTR_ROUTE_TOPK] > 1)
            return rep_frame_refuse(g, o, "its sigmoid router does not normalise the top-k "
                                    "weights, and Megatron-Core's (moe_utils.py, "
                                    "topk_routing_with_score_function) always does for k > 1");
        return true;
    }
    if (norm && A->attr[IR_ATTR_ROUTE_TOPK] == 1)
        return rep_frame_refuse(g, o, "its softmax router renormalises one choice to weight 1, and Megatron-Core "
                                "runs a top-1 softmax router only with --moe-router-pre-softmax, the unnormalised "
                                "score (transformer_config.py)");
    if (!norm)
        rep_frame_arg(o, "--moe-router-pre-softmax");
    return true;
}

/* Megatron counts capacity over the tokens a rank routes, ptdc per sequence:
 * equal with one sequence per micro-batch and no sequence split. */
static bool mg_attr_ROUTE_CAPACITY(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--moe-expert-capacity-factor %g", A->attr[IR_ATTR_ROUTE_CAPACITY]);
    rep_frame_arg(o, "--moe-token-drop-policy probs");
    return true;
}

static bool mg_attr_ROUTE_AUX(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "--moe-router-load-balancing-type seq_aux_loss");
    rep_frame_arg(o, "--moe-aux-loss-coeff %g", A->attr[IR_ATTR_ROUTE_AUX]);
    return true;
}

/* slice and concat appear only inside multi-head latent attention, whose
 * sizes read_mla reads (rep_arch_read refuses them anywhere else). */
static bool mg_slice_concat(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)A;
    return rep_frame_refuse(g, o, "it slices or joins tensors outside multi-head latent attention");
}
static bool mg_attr_SLICE_DIM(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return mg_slice_concat(g, A, o); }
static bool mg_attr_SLICE_AT(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return mg_slice_concat(g, A, o); }
static bool mg_attr_CONCAT_DIM(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return mg_slice_concat(g, A, o); }

/* A shift or a weighted loss outside the multi-token prediction read_mtp
 * reads (rep_arch_read's attributes skip that module's). */
static bool mg_mtp(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)A;
    return rep_frame_refuse(g, o, "it shifts its inputs or weighs a loss outside Megatron-Core's multi-token "
                            "prediction module");
}
static bool mg_attr_SHIFT_BY(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return mg_mtp(g, A, o); }
static bool mg_attr_SHIFT_TAIL(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return mg_mtp(g, A, o); }
static bool mg_attr_CE_WEIGHT(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return mg_mtp(g, A, o); }

RepFrameFn *const rep_megatron_arch[REP_NARCH] = {
#define ARCH(ID, what) [REP_ARCH_##ID] = mg_arch_##ID,
#include "arch.def"
#undef ARCH
};
RepFrameFn *const rep_megatron_attr[IR_NATTRS] = {
#define ATTR(ID, op, name, kind, flags, field) [IR_ATTR_##ID] = mg_attr_##ID,
#include "attrs.def"
#undef ATTR
};

static bool mg_model(const IrGraph *g, RepArch *A, RepFrameOut *o, char *why, size_t wn)
{
    char sub[256];
    if (!rep_arch_read(g, A, sub, sizeof sub))
        return rep_refuse(why, wn, "Megatron-LM's %s cannot express %s: %s", /* read_hybrid sets hybrid first */
                          A->hybrid ? "HybridModel" : "GPT model", g->name, sub);
    memset(o, 0, sizeof *o);
    o->fw = A->hybrid ? "Megatron-LM's HybridModel" : "Megatron-LM's GPT model";
    o->why = why;
    o->wn = wn;
    return rep_frame_model(g, A, rep_megatron_arch, rep_megatron_attr, o);
}

bool rep_megatron_model(const IrGraph *g, RepArch *A, char *why, size_t wn)
{
    RepFrameOut o;
    return mg_model(g, A, &o, why, wn);
}

/* -------------------------------------------------------- the command */

/* Megatron-FSDP (ZeRO-3 under the megatron stack; megatron/core/distributed/
 * fsdp): validate_args runs it with Adam or SGD, the fsdp_dtensor checkpoint
 * format, CUDA_DEVICE_MAX_CONNECTIONS other than 1. Its parameter buffers
 * remap plain and Transformer Engine Float8Tensor/MXFP8Tensor weights (the
 * comment on moe_single_grouped_weight there), so the plan's NVFP4 weights
 * are not gathered in NVFP4 under it. The stack offers it on request
 * (zero_stages). Without overlapping the gradient
 * reduction (dp_overlap = no) the stack prices blocking ZeRO-3 traffic,
 * which Megatron-FSDP does not offer. */
static bool mg_fsdp_layout(const PlanLayout *L, const PassStack *st, char *why, size_t wn)
{
    if (L->zero != 3)
        return true;
    if (!pass_stack_has_zero(st, 3))
        return rep_refuse(why, wn, "the plan uses ZeRO-3, which the stack does not offer (Megatron-FSDP: "
                          "zero_stages = 0,1,3)");
    if (!st->dp_overlap)
        return rep_refuse(why, wn, "the plan uses ZeRO-3 with the data-parallel traffic waited for (dp_overlap = "
                          "no); Megatron-FSDP (--use-megatron-fsdp) always runs it beside compute");
    return true;
}

bool rep_megatron_layout(const RepArch *A, const PlanLayout *L, const PassStack *st, PlanAttention att,
                         char *why, size_t wn)
{
    if (L->replicated > 1)
        return rep_refuse(why, wn, "the plan keeps %d replicas along a mesh axis it splits nothing over, "
                      "which Megatron-LM has no flag for", L->replicated);
    if (L->zero == 2)
        return rep_refuse(why, wn, "the plan uses ZeRO-2; Megatron-LM's distributed optimizer "
                      "(--use-distributed-optimizer) shards only the optimizer state (ZeRO-1), and ptdc prices "
                      "Megatron-FSDP as ZeRO-3 (optim_grads_params), not its optim_grads");
    if (!strcmp(plan_layout_recompute_name(L), "mixed"))
        return rep_refuse(why, wn, "the plan recomputes some pipeline stages and not others; Megatron-LM's "
                      "--recompute-method block recomputes the same number of layers on every stage");
    /* Context parallelism runs in Transformer Engine's flash or fused
     * attention only (Megatron's own DotProductAttention asserts cp 1), and
     * Megatron asserts the sequence splits into 2 x cp chunks. */
    if (L->cp > 1 && (st->attn_kernel == PASS_KERNEL_EAGER || st->attn_kernel == PASS_KERNEL_FUSED_SOFTMAX ||
                      (st->attn_kernel == PASS_KERNEL_AUTO && att == PLAN_ATTN_MATERIALIZED)))
        return rep_refuse(why, wn, "the plan has context parallelism cp %d with an unfused attention kernel, and "
                          "Megatron-LM runs context parallelism only in Transformer Engine's flash or fused "
                          "attention", L->cp);
    if (L->cp > 1 && A->seq % (2 * L->cp))
        return rep_refuse(why, wn, "Megatron-LM needs the sequence (%lld) to be a multiple of 2 x cp = %d "
                          "(validate_args)", (long long)A->seq, 2 * L->cp);
    if (st->attn_kernel == PASS_KERNEL_FLASH1)
        return rep_refuse(why, wn, "the stack prices FlashAttention-1 (attention_kernel = flash1); current "
                      "Megatron-LM runs FlashAttention-2 or later (--attention-backend flash)");
    /* megatron/core/pipeline_parallel has 1F1B and the interleaved schedule;
     * --delay-wgrad-compute defers weight gradients only inside an MoE layer
     * overlapping its all-to-all (transformer_config.py), not across stages. */
    if (plan_schedule_split(L->schedule))
        return rep_refuse(why, wn, "the plan's schedule is %s, and Megatron-LM has no zero-bubble pipeline "
                          "schedule (its --delay-wgrad-compute defers weight gradients inside an overlapped MoE "
                          "layer, not across pipeline stages)", plan_schedule_title(L->schedule));
    /* validate_args: the interleaved schedule needs pp > 2 unless p2p
     * communication overlaps (--overlap-p2p-comm, on by default), and the
     * schedule's micro-batch groups (microbatch_group_size_per_vp_stage = pp,
     * schedules.py) need the micro-batches to be a multiple of pp. */
    if (L->v > 1 && L->num_micro % L->pp)
        return rep_refuse(why, wn, "the interleaved schedule runs the micro-batches in groups of pp = %d, and "
                      "%d micro-batches are not a multiple of it", L->pp, L->num_micro);
    if (L->v > 1 && !st->pp_overlap && L->pp <= 2)
        return rep_refuse(why, wn, "the stack waits for each pipeline transfer (pp_overlap = no), and Megatron-LM "
                      "runs the interleaved schedule without --overlap-p2p-comm only with pp > 2");
    /* The weight all-gather's flags (validate_args): --overlap-param-gather
     * needs --overlap-grad-reduce, and running it beside the optimizer
     * (--overlap-param-gather-with-optimizer-step) an interleaved schedule. */
    int dpc = L->dp * (L->cp > 1 ? L->cp : 1); /* Megatron reduces gradients over dp x cp */
    bool gathers = L->zero == 1 && dpc > 1;
    if (gathers && st->param_gather != PASS_GATHER_BLOCKING && !st->dp_overlap)
        return rep_refuse(why, wn, "the stack overlaps the weight all-gather (param_gather) but not the gradient "
                      "reduction (dp_overlap = no), and Megatron-LM's --overlap-param-gather needs "
                      "--overlap-grad-reduce");
    if (gathers && st->param_gather == PASS_GATHER_OPTIMIZER && L->v == 1)
        return rep_refuse(why, wn, "the stack runs the weight all-gather beside the optimizer (param_gather = "
                      "optimizer), which Megatron-LM does only with the interleaved schedule "
                      "(--overlap-param-gather-with-optimizer-step)");
    return mg_fsdp_layout(L, st, why, wn);
}

/* The pipeline split (issue 32). Even chunks: --num-layers-per-virtual-
 * pipeline-stage. The embedding and/or the loss counted as a layer of an
 * even split: --account-for-embedding/loss-in-pipeline-split (end chunks of
 * none included). Chunks even within each pipeline rank and the ranks
 * between the first and the last alike: --decoder-first/last-pipeline-num-
 * layers (per rank, each a multiple of v; with --num-virtual-stages-per-
 * pipeline-rank, which Megatron requires for uneven interleaving). Any other
 * split: --pipeline-model-parallel-layout, chunk by chunk in model order
 * ("Et*3|(t*4|)*30,t*3L": E the embedding, t a layer, L the head and loss;
 * runs of equal chunks in Megatron's repetition syntax, quoted for the shell;
 * m a multi-token prediction depth, in the last chunk with the head as the
 * head's piece holds it: validate_layer_layout counts them against
 * --mtp-num-layers). */
static void mg_pipeline_split(const IrGraph *g, const Plan *p, RepFrameOut *x)
{
    int pp = p->pp, v = p->v > 0 ? p->v : 1, n = p->nstages;
    int lay[PLAN_MAX_STAGES], rank[PLAN_MAX_PP] = {0};
    bool even = true, per_rank = true;
    for (int c = 0; c < n; c++) {
        const PlanStage *S = &p->stages[c];
        lay[c] = 0;
        for (int q = S->first_piece; q < S->first_piece + S->npieces; q++)
            lay[c] += g->pieces[q].rep >= 0;
        even &= lay[c] == lay[0];
        rank[c % pp] += lay[c];
        per_rank &= c < pp || lay[c] == lay[c % pp];
    }
    if (even) {
        if (v > 1)
            rep_frame_arg(x, "--num-layers-per-virtual-pipeline-stage %d", lay[0]);
        return;
    }
    /* Megatron-Bridge's form (--account-for-embedding/loss-in-pipeline-split):
     * the embedding and/or the loss count as a layer each and every chunk
     * gets (layers + 1 or 2) / chunks, so the end chunks one fewer, none
     * when that is 1 (the embedding or the head alone). */
    for (int e = 1; e >= 0; e--)
        for (int l = 1; l >= 0; l--) {
            int tot = e + l;
            for (int c = 0; c < n; c++)
                tot += lay[c];
            bool fits = (e || l) && tot % n == 0;
            for (int c = 0; fits && c < n; c++)
                fits = lay[c] == tot / n - (e && c == 0) - (l && c == n - 1);
            if (!fits)
                continue;
            if (v > 1)
                rep_frame_arg(x, "--num-virtual-stages-per-pipeline-rank %d", v);
            if (e)
                rep_frame_arg(x, "--account-for-embedding-in-pipeline-split");
            if (l)
                rep_frame_arg(x, "--account-for-loss-in-pipeline-split");
            return;
        }
    for (int r = 2; r < pp - 1; r++)
        per_rank &= rank[r] == rank[1];
    int mid = pp > 2 ? rank[1] : -1;
    /* TransformerConfig: each given count at least 1; and middle stages to
     * share the rest (get_transformer_layer_offset divides by their number:
     * pp 2 takes the layout string). */
    if (per_rank && pp > 2 && (rank[0] == mid || rank[0] > 0) && (rank[pp - 1] == mid || rank[pp - 1] > 0)) {
        if (v > 1)
            rep_frame_arg(x, "--num-virtual-stages-per-pipeline-rank %d", v);
        if (rank[0] != mid)
            rep_frame_arg(x, "--decoder-first-pipeline-num-layers %d", rank[0]);
        if (rank[pp - 1] != mid)
            rep_frame_arg(x, "--decoder-last-pipeline-num-layers %d", rank[pp - 1]);
        return;
    }
    /* runs of equal chunks as Megatron's "(t*4|)*30," repetition */
    char buf[8192], one[64];
    size_t k = 0;
    int mtp = -1; /* the losses after the model's: multi-token prediction's depths */
    for (int i = 0; i < g->nfwd; i++)
        mtp += g->nodes[i].op == IR_OP_CROSS_ENTROPY;
    char m[16] = "";
    if (mtp > 0)
        snprintf(m, sizeof m, mtp > 1 ? "m*%d" : "m", mtp);
    for (int c = 0; c < n;) {
        snprintf(one, sizeof one, "%s%s%s%.0d%s%s", c == 0 ? "E" : "", lay[c] ? "t" : "", lay[c] > 1 ? "*" : "",
                 lay[c] > 1 ? lay[c] : 0, c == n - 1 ? m : "", c == n - 1 ? "L" : "");
        int run = 1;
        while (c > 0 && c + run < n - 1 && lay[c + run] == lay[c])
            run++;
        if (k < sizeof buf - 96) {
            if (run > 1)
                k += (size_t)snprintf(buf + k, sizeof buf - k, "(%s|)*%d,", one, run);
            else
                k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", one, c + 1 < n ? "|" : "");
        }
        c += run;
    }
    rep_frame_arg(x, "--pipeline-model-parallel-layout '%s'", buf);
}

/* A hybrid's layers as --hybrid-layer-pattern, a letter a layer, its
 * pipeline split as Megatron-Core reads it (hybrid_layer_allocation.py
 * select_pipeline_segment): one '|'-separated segment per model chunk, in
 * model order (chunk c on pipeline rank c % pp, virtual stage c / pp), the
 * virtual stages derived from their count (validate_args, which refuses
 * the other split flags beside the pattern); quoted for the shell ('*', '|').
 * False when it is longer than ptdc prints. */
static bool mg_hybrid_pattern(const IrGraph *g, const RepArch *A, const Plan *p, RepFrameOut *x)
{
    char buf[REP_MAX_LAYERS + PLAN_MAX_STAGES + 4 * (REP_MAX_MTP + 1) + 1];
    size_t k = 0;
    for (int c = 0; c < p->nstages && p->nstages > 1; c++) {
        const PlanStage *S = &p->stages[c];
        for (int q = S->first_piece; q < S->first_piece + S->npieces; q++)
            if (g->pieces[q].rep >= 0 && q - 1 < A->layers && k < sizeof buf - 2)
                buf[k++] = A->pattern[q - 1];
        if (c + 1 < p->nstages && k < sizeof buf - 2)
            buf[k++] = '|';
    }
    buf[k] = 0;
    if (p->nstages <= 1)
        snprintf(buf, sizeof buf, "%s", A->pattern);
    /* multi-token prediction: '/' and a depth's layers, once a depth
     * (parse_hybrid_pattern: every part alike; on the last stage) */
    for (int d = 0; d < A->mtp_layers; d++) {
        k = strlen(buf);
        if (k + strlen(A->mtp_pattern) + 2 > sizeof buf)
            return false;
        snprintf(buf + k, sizeof buf - k, "/%s", A->mtp_pattern);
    }
    if (strlen(buf) + 40 > sizeof x->arg[0])
        return false;
    rep_frame_arg(x, "--hybrid-layer-pattern '%s'", buf);
    return true;
}

/* The plan's precision as Transformer Engine recipes (TransformerConfig
 * fp8, fp8_recipe, fp4, fp4_recipe: --fp8-format, --fp8-recipe, --fp4-format,
 * --fp4-recipe). The recipe is always given: Megatron's default is delayed
 * scaling, which ptdc does not plan (an amax history, so no
 * --fp8-amax-history-len or --fp8-amax-compute-algo). With the distributed
 * optimizer the weights are kept and all-gathered in the low precision
 * (--fp8-param-gather, --fp4-param-gather), as Megatron-Bridge's recipes
 * do (bf16_with_fp8_current_scaling_mixed, bf16_with_mxfp8_mixed,
 * bf16_with_nvfp4_mixed); validate_args asserts it for --fp8-param-gather.
 * The formats are those recipes': MXFP8 in E4M3 throughout. */
typedef struct MgPrecision {
    const char *format_flag, *format, *recipe_flag, *recipe, *param_gather;
} MgPrecision;
static const MgPrecision mg_precisions[PLAN_NPREC] = {
    [PLAN_PREC_BF16] = {NULL, NULL, NULL, NULL, NULL},
    [PLAN_PREC_FP8] = {"--fp8-format", "hybrid", "--fp8-recipe", "tensorwise", "--fp8-param-gather"},
    [PLAN_PREC_MXFP8] = {"--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--fp8-param-gather"},
    [PLAN_PREC_NVFP4] = {"--fp4-format", "e2m1", "--fp4-recipe", "nvfp4", "--fp4-param-gather"},
};

/* Transformer Engine's quantized GEMMs (any recipe) assert each linear
 * layer's local weight [out, in] has out % 8 and in % 16, and its input
 * rows % 8 (utils.py assert_dim_for_fp8_exec, called by Linear,
 * LayerNormLinear, LayerNormMLP); rows are the micro-batch's tokens over cp,
 * and over tp where sequence parallelism splits them. Grouped experts
 * (GroupedLinear) check nothing. False with a sentence. */
static bool mg_lowp_shapes(const RepArch *A, const PlanLayout *L, PlanPrecision p, char *why, size_t wn)
{
    int tp = L->tp > 0 ? L->tp : 1, cp = L->cp > 1 ? L->cp : 1;
    int64_t glu = (A->hybrid ? A->mlp_op == IR_OP_SWIGLU : A->swiglu) ? 2 : 1;
    int64_t hq = A->heads * A->head_dim, hkv = A->kv_heads * A->head_dim;
    /* a hybrid's Mamba-2 in_proj [z x B C dt] and out_proj (MambaMixer), which
     * also asserts the whole in_proj width a multiple of 16 under FP8 */
    bool mamba = A->hybrid && strchr(A->pattern, 'M');
    int64_t di = A->m_heads * A->m_head_dim, in_w = 2 * di + 2 * A->m_groups * A->m_state + A->m_heads;
    if (mamba && in_w % 16)
        return rep_refuse(why, wn, "Megatron-Core's MambaMixer runs %s only with an in_proj whose width (2 d_inner "
                          "+ 2 groups x state + heads = %lld) is a multiple of 16", plan_precision_name(p),
                          (long long)in_w);
    int64_t ff = A->moe ? (A->n_dense ? A->dense_ff : 0) : A->d_ff;
    int64_t rows = L->micro_batch * A->seq / cp / (L->sp && tp > 1 ? tp : 1);
    const struct {
        const char *what;
        int64_t out, in;
    } w[] = {
        {"the fused query/key/value projection", (hq + 2 * hkv) / tp, A->d_model},
        {"the attention output projection", A->d_model, hq / tp},
        {"the MLP's first projection", glu * ff / tp, A->d_model},
        {"the MLP's second projection", A->d_model, ff / tp},
        {"the shared expert's first projection", glu * (A->moe ? A->shared_ff : 0) / tp, A->d_model},
        {"the shared expert's second projection", A->d_model, (A->moe ? A->shared_ff : 0) / tp},
        {"the Mamba-2 input projection", mamba ? in_w / tp : 0, A->d_model},
        /* duplicated on every tensor-parallel rank: never split */
        {"the latent MoE's down projection", A->moe_latent, A->d_model},
        {"the latent MoE's up projection", A->moe_latent ? A->d_model : 0, A->moe_latent},
        {"the Mamba-2 output projection", mamba ? A->d_model : 0, di / tp},
    };
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        if (w[i].out && w[i].in && (w[i].out % 8 || w[i].in % 16))
            return rep_refuse(why, wn, "Transformer Engine runs %s GEMMs only with weights whose rows are a "
                              "multiple of 8 and columns of 16 (assert_dim_for_fp8_exec), and %s is [%lld, %lld] "
                              "per tensor-parallel rank", plan_precision_name(p), w[i].what, (long long)w[i].out,
                              (long long)w[i].in);
    if (rows % 8)
        return rep_refuse(why, wn, "Transformer Engine runs %s GEMMs only on a multiple of 8 tokens "
                          "(assert_dim_for_fp8_exec), and each rank's micro-batch holds %lld",
                          plan_precision_name(p), (long long)rows);
    return true;
}

bool rep_emit_megatron(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                       char *why, size_t wn)
{
    RepArch A;
    RepFrameOut m;
    char sub[256];
    if (!mg_model(g, &A, &m, why, wn))
        return false;
    const PlanLayout *L = &a->layout;
    const PassStack *st = &c->st;
    int gpn = c->cl->gpus_per_node > 0 ? c->cl->gpus_per_node : 8;
    if (!rep_megatron_layout(&A, L, st, a->plan.attention, why, wn))
        return false;
    if (!rep_plan_matches_framework(g, &A, a, pass_cluster_domain(c->cl), sub, sizeof sub))
        return rep_refuse(why, wn, "Megatron-LM cannot express the plan: %s", sub);

    RepFrameOut x = {.fw = "Megatron-LM", .why = why, .wn = wn};
    /* Parallelism and batch. */
    rep_frame_arg(&x, "--tensor-model-parallel-size %d", L->tp);
    rep_frame_arg(&x, "--pipeline-model-parallel-size %d", L->pp);
    if (!A.hybrid)
        mg_pipeline_split(g, &a->plan, &x);
    else if (!mg_hybrid_pattern(g, &A, &a->plan, &x))
        return rep_refuse(why, wn, "Megatron-LM cannot express the plan: its %d layers with the pipeline split "
                          "make a --hybrid-layer-pattern longer than ptdc prints", A.layers);
    if (L->sp && L->tp > 1)
        rep_frame_arg(&x, "--sequence-parallel");
    /* Context parallelism in the form the plan runs: keys and values
     * gathered along the sequence before attention (TransformerConfig
     * cp_comm_type "all_gather"), passed round the ring ("p2p"), or the
     * heads split over cp by all-to-all ("a2a", DeepSpeed Ulysses), all run
     * by Transformer Engine's attention. Megatron's data-parallel size is
     * then world / (tp x cp x pp), the plan's dp; its distributed optimizer
     * shards over dp x cp, as the plan's ZeRO does. Megatron gives each rank
     * two mirrored chunks of every sequence, as ptdc's load-balanced split
     * does (a model with a learned position table keeps ptdc's split
     * contiguous: which positions a rank holds, not what the model computes). */
    if (L->cp > 1) {
        rep_frame_arg(&x, "--context-parallel-size %d", L->cp);
        rep_frame_arg(&x, "--cp-comm-type %s", L->cp_ring ? "p2p" : L->cp_a2a ? "a2a" : "all_gather");
    }
    /* The experts (docs/moe.md): EP and ETP as the plan folds them; the
     * exchange split is Megatron's alltoall dispatcher, or its flex one with
     * HybridEP where the stack prices that (moe_dispatcher=flex: a token
     * crosses the network once per node; HybridEP is the flex backend that
     * also spans an NVL72 domain, transformer_config.py), experts split over
     * tokens gathered its allgather one. ETP is given even at tp: Megatron
     * defaults it to tp, which the plan may not do. */
    if (L->moe) {
        bool flex = L->ep > 1 && L->ep_exchange && st->moe_dispatcher == PASS_DISPATCH_FLEX;
        rep_frame_arg(&x, "--expert-model-parallel-size %d", L->ep);
        rep_frame_arg(&x, "--expert-tensor-parallel-size %d", L->etp);
        rep_frame_arg(&x, "--moe-token-dispatcher-type %s",
                      L->ep > 1 && !L->ep_exchange ? "allgather" : flex ? "flex" : "alltoall");
        if (flex)
            rep_frame_arg(&x, "--moe-flex-dispatcher-backend hybridep");
    }
    rep_frame_arg(&x, "--micro-batch-size %lld", (long long)L->micro_batch);
    rep_frame_arg(&x, "--global-batch-size %lld", (long long)(plan_mb_seqs(L->micro_batch, L->dp) * L->num_micro));
    /* Recomputation. */
    switch (a->plan.stages[0].recompute) {
    case PLAN_RECOMPUTE_NONE: break;
    case PLAN_RECOMPUTE_SELECTIVE:
        rep_frame_arg(&x, "--recompute-granularity selective");
        rep_frame_arg(&x, "--recompute-modules core_attn");
        break;
    case PLAN_RECOMPUTE_FFN:
        /* ffn reruns `block mlp` and `block moe` (plan_is_mlp); Megatron's
         * "mlp" module is the dense MLP only, "moe" the whole MoE layer. */
        rep_frame_arg(&x, "--recompute-granularity selective");
        rep_frame_arg(&x, "--recompute-modules %s", L->moe ? "mlp moe" : "mlp");
        break;
    case PLAN_RECOMPUTE_FULL:
        rep_frame_arg(&x, "--recompute-granularity full");
        rep_frame_arg(&x, "--recompute-method uniform");
        rep_frame_arg(&x, "--recompute-num-layers 1");
        break;
    default: { /* recompute.def's module sets */
        char mods[256] = "";
        unsigned m = plan_recompute_modules(a->plan.stages[0].recompute);
        for (int i = 0; i < PLAN_RC_MODULE_COUNT; i++)
            if (m >> i & 1)
                snprintf(mods + strlen(mods), sizeof mods - strlen(mods), "%s%s", *mods ? " " : "",
                         plan_rc_module_name((PlanRcModule)i));
        rep_frame_arg(&x, "--recompute-granularity selective");
        rep_frame_arg(&x, "--recompute-modules %s", mods);
        break;
    }
    }
    /* Data parallelism as the stack prices it, over Megatron's dp x cp
     * group (the plan's weight gradients are partial over both). */
    int dpc = L->dp * (L->cp > 1 ? L->cp : 1);
    bool fsdp = L->zero == 3 && dpc > 1;
    if (L->zero == 1 && dpc > 1)
        rep_frame_arg(&x, "--use-distributed-optimizer");
    /* ZeRO-3: Megatron-FSDP sharding weights, gradients and optimizer state
     * (optim_grads_params), the distributed optimizer implied (v1:
     * validate_args turns it on), two layers' gathered weights in its double
     * buffer as ptdc prices them (buffers: 2 x the largest piece's), the
     * checkpoint format it requires. --overlap-param-gather prefetches each
     * layer's all-gather beside the compute before it. */
    if (fsdp) {
        rep_frame_arg(&x, "--use-megatron-fsdp");
        rep_frame_arg(&x, "--data-parallel-sharding-strategy optim_grads_params");
        rep_frame_arg(&x, "--fsdp-double-buffer");
        rep_frame_arg(&x, "--ckpt-format fsdp_dtensor");
    }
    if (st->dp_overlap && dpc > 1)
        rep_frame_arg(&x, "--overlap-grad-reduce");
    if (fsdp)
        rep_frame_arg(&x, "--overlap-param-gather");
    if (L->zero == 1 && dpc > 1 && st->param_gather != PASS_GATHER_BLOCKING) {
        rep_frame_arg(&x, "--overlap-param-gather");
        if (st->param_gather == PASS_GATHER_OPTIMIZER) { /* refused with distributed checkpoints */
            rep_frame_arg(&x, "--overlap-param-gather-with-optimizer-step");
            rep_frame_arg(&x, "--ckpt-format torch");
        }
    }
    if (L->v > 1 && !st->pp_overlap)
        rep_frame_arg(&x, "--no-overlap-p2p-communication");
    if (st->grad_bytes == 2 || (st->grad_bytes == 0 && A.bf16)) /* 0: as the weights */
        rep_frame_arg(&x, "--grad-reduce-in-bf16");
    if (st->grad_accum_unfused)
        rep_frame_arg(&x, "--no-gradient-accumulation-fusion");
    if (st->tp_overlap == PASS_TP_OVERLAP_UB && L->sp && L->tp > 1)
        rep_frame_arg(&x, "--tp-comm-overlap");
    /* Precision (mg_precisions): nothing for BF16. */
    if ((unsigned)a->plan.precision >= PLAN_NPREC)
        return rep_refuse(why, wn, "the plan's precision (%d) is not one ptdc knows", (int)a->plan.precision);
    if (!rep_precision_gpu(&c->cl->gpu, a->plan.precision, "Transformer Engine", why, wn))
        return false;
    if (a->plan.precision != PLAN_PREC_BF16 && !mg_lowp_shapes(&A, L, a->plan.precision, why, wn))
        return false;
    if (fsdp && a->plan.precision == PLAN_PREC_NVFP4)
        return rep_refuse(why, wn, "the plan gathers NVFP4 weights under ZeRO-3, and Megatron-FSDP's parameter "
                          "buffers hold plain, FP8 and MXFP8 weights only (validate_args)");
    const MgPrecision *pr = &mg_precisions[a->plan.precision];
    if (pr->format) {
        rep_frame_arg(&x, "%s %s", pr->format_flag, pr->format);
        rep_frame_arg(&x, "%s %s", pr->recipe_flag, pr->recipe);
        if ((L->zero == 1 || fsdp) && dpc > 1)
            rep_frame_arg(&x, "%s", pr->param_gather);
    }
    /* Activation offloading where the stack asks for it and Megatron runs it
     * (pass_offload_applies: pp 1, no recomputation): TransformerConfig's
     * cpu_offloading_num_layers, which turns cpu_offloading on (activations,
     * not weights). */
    bool offload = pass_offload_applies(c, &a->plan);
    if (offload)
        rep_frame_arg(&x, "--cpu-offloading-num-layers %d", st->offload_act_layers);
    /* The expert all-to-all beside another micro-batch's compute where the
     * plan was priced with it (stack moe_a2a_overlap, pass_a2a_overlap_applies),
     * with the expert weight gradients delayed under the dispatch's backward,
     * as Megatron-Bridge's recipes pair them (_set_moe_a2a_overlap_overrides). */
    bool a2a = a->pred.a2a_overlap;
    if (a2a) {
        rep_frame_arg(&x, "--overlap-moe-expert-parallel-comm");
        rep_frame_arg(&x, "--delay-wgrad-compute");
    }
    /* The model, then what ptdc's programs do not have (dropout). */
    for (int i = 0; i < m.narg; i++)
        rep_frame_arg(&x, "%s", m.arg[i]);
    rep_frame_arg(&x, "--attention-dropout 0.0");
    rep_frame_arg(&x, "--hidden-dropout 0.0");
    /* Kernels as the stack prices them. */
    bool flash = st->attn_kernel == PASS_KERNEL_FLASH2 ||
                 (st->attn_kernel == PASS_KERNEL_AUTO && a->plan.attention == PLAN_ATTN_FLASH);
    rep_frame_arg(&x, "--attention-backend %s", flash ? "flash" : "unfused");
    if (st->attn_kernel == PASS_KERNEL_EAGER)
        rep_frame_arg(&x, "--no-masked-softmax-fusion");
    if (st->rope_unfused) /* as priced: Megatron-Core's unfused RoPE (rope_utils.py) */
        rep_frame_arg(&x, "--no-rope-fusion");

    rep_emit_header(f, g, c, a, "Megatron-LM (Megatron-Core) flags");
    if (st->norm_unfused)
        fprintf(f, "# The stack prices unfused norms (norm_unfused = yes); Megatron-LM with Transformer\n"
                   "#   Engine fuses them, so expect less memory and time than predicted there.\n");
    if (st->swiglu_unfused)
        fprintf(f, "# The stack prices an unfused SwiGLU (swiglu_unfused = yes); Megatron-LM fuses it\n"
                   "#   (bias_swiglu_fusion), so expect less memory and time than predicted there.\n");
    if (!st->loss_fp32)
        fprintf(f, "# The stack prices a loss in bf16 (loss_fp32 = no); Megatron-LM's vocabulary-parallel\n"
                   "#   cross-entropy computes it in fp32.\n");
    if (L->tp > 1 && st->tp_overlap == PASS_TP_OVERLAP_NONE)
        fprintf(f, "# The stack waits for every tensor-parallel collective (tp_overlap = none); Megatron-LM's\n"
                   "#   linear layers overlap the backward ones anyway, so expect less time than predicted.\n");
    if (L->tp > 1 && st->reshard_overlap > 0)
        fprintf(f, "# The stack hides a further %.0f%% of the tensor-parallel communication left exposed\n"
                   "#   (reshard_overlap, an estimate no flag sets).\n", 100 * st->reshard_overlap);
    if (a->plan.precision == PLAN_PREC_MXFP8 || a->plan.precision == PLAN_PREC_NVFP4)
        fprintf(f, "# %s runs on Blackwell GPUs%s.\n", a->plan.precision == PLAN_PREC_MXFP8 ? "--fp8-recipe mxfp8"
                : "--fp4-format", a->plan.precision == PLAN_PREC_NVFP4 ? ", with Transformer Engine 2.7 or later" : "");
    fprintf(f, "# Add your data, tokenizer and training flags (--data-path, --tokenizer-type, --lr,\n"
               "#   --train-iters, ...) and torchrun's rendezvous flags.\n");
    if (offload)
        fprintf(f, "# The first %d layers' saved activations go to host memory and back (%.0f GB a step\n"
                   "#   over the host link, %.3f s of copies of which %.3f s stall compute), priced as\n"
                   "#   Transformer Engine's v1 offload schedules them (NVTE_CPU_OFFLOAD_V1=1 from TE 2.10).\n",
                st->offload_act_layers, a->pred.offload_bytes / 1e9, a->pred.offload_copy_s, a->pred.offload_s);
    rep_frame_print_notes(f, &m);
    /* torchrun starts the same number of ranks on every node: the most a
     * node holds that divides the world (12 on nodes of 8: 2 x 6). */
    int gpus = L->gpus, per = gpus < gpn ? gpus : gpn;
    while (per > 1 && gpus % per)
        per--;
    int nodes = gpus / per;
    /* validate_args asserts it with tensor (or context) parallelism before
     * Blackwell, so that each rank's communication kernels are queued in the
     * order issued; Megatron-LM's example scripts export it. */
    /* The all-to-all overlap's communication stream needs more than one
     * connection (moe/README.md; Megatron-Bridge's recipes export 32), and
     * validate_args only warns then: before Blackwell the tensor-parallel
     * overlap's kernels may no longer run in the order issued. */
    if (a2a) {
        if ((L->tp > 1 || L->cp > 1) && !(c->cl->gpu.peak_fp4_flops > 0)) /* Blackwell-class: an FP4 rate */
            fprintf(f, "# The expert all-to-all overlap needs CUDA_DEVICE_MAX_CONNECTIONS > 1, with which\n"
                       "#   Megatron-LM warns that tensor-parallel communication may queue behind GEMMs before\n"
                       "#   Blackwell (not priced).\n");
        fprintf(f, "export CUDA_DEVICE_MAX_CONNECTIONS=32\n");
    } else if ((L->tp > 1 || L->cp > 1) && !fsdp)
        fprintf(f, "export CUDA_DEVICE_MAX_CONNECTIONS=1\n");
    if (offload)
        fprintf(f, "export NVTE_CPU_OFFLOAD_V1=1\n");
    /* a hybrid's HybridModel is pretrain_hybrid.py's (pretrain_mamba.py is its deprecated alias) */
    fprintf(f, "torchrun --nproc-per-node %d --nnodes %d %s \\\n", per, nodes,
            A.hybrid ? "pretrain_hybrid.py" : "pretrain_gpt.py");
    for (int i = 0; i < x.narg; i++)
        fprintf(f, "    %s%s\n", x.arg[i], i + 1 < x.narg ? " \\" : "");
    return true;
}
