/* emit_torchtitan.c: --emit torchtitan, the chosen plan as a torchtitan
 * job file: the [model], [training], [parallelism], [activation_checkpoint]
 * and [compile] sections of the TOML that torchtitan v0.2.2 reads with
 * --job.config_file (torchtitan/config/job_config.py; its main branch
 * replaced the TOML files with Python configurations in February 2026 and
 * has renamed keys since). The model must be one of torchtitan's llama3
 * models; it goes through one handler per property (arch.def) and per
 * operator attribute (ir/attrs.def), which state it as TransformerModelArgs
 * keywords of a flavor to register (printed as a comment) or refuse by name.
 * docs/stacks.md maps every key. */
#include "report.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* torchtitan's FeedForward width (llama3/model/model.py): int(2 * 4 dim / 3),
 * times ffn_dim_multiplier if any, rounded up to a multiple of multiple_of.
 * Finds the two for d_ff: multiple_of 256 (LLaMA's) or the largest power of
 * two that works, without a multiplier if possible. */
static int64_t ffn_width(int64_t dim, double mult, int64_t multiple_of)
{
    int64_t h = (int64_t)(2.0 * (double)(4 * dim) / 3.0);
    if (mult > 0)
        h = (int64_t)(mult * (double)h);
    return multiple_of * ((h + multiple_of - 1) / multiple_of);
}

static bool ffn_args(int64_t dim, int64_t dff, double *mult, int64_t *multiple_of)
{
    int64_t h0 = (int64_t)(2.0 * (double)(4 * dim) / 3.0);
    int64_t cands[16];
    int nc = 0;
    cands[nc++] = 256;
    for (int64_t m = 4096; m >= 1; m /= 2)
        if (m != 256)
            cands[nc++] = m;
    /* No multiplier first, then one with one decimal (LLaMA-3's 1.3, 405B's
     * 1.2), two, and last the exact ratio. */
    for (int pass = 0; pass < 4; pass++) {
        int steps = pass == 0 || pass == 3 ? 1 : pass == 1 ? 36 : 351;
        for (int k = 0; k < steps; k++) {
            double m = pass == 0 ? 0 : pass == 1 ? (5 + k) / 10.0 : pass == 2 ? (50 + k) / 100.0
                                                                        : (double)dff / (double)h0;
            for (int i = 0; i < nc; i++)
                if (dff % cands[i] == 0 && ffn_width(dim, m, cands[i]) == dff) {
                    *mult = m;
                    *multiple_of = cands[i];
                    return true;
                }
        }
    }
    return false;
}

/* The flavor's name: "llama2-13b" from "models/llama2-13b.mdl", and from
 * an imported Hugging Face directory ("Meta-Llama-3.1-8B/" or its
 * config.json) the directory's name; characters a Python string key would
 * not want are replaced by '_'. */
static void flavor_name(const IrGraph *g, char *buf, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", g->path ? g->path : g->name);
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = 0;
    char *s = strrchr(path, '/');
    const char *base = s ? s + 1 : path;
    /* import-hf names the graph's file DIR/config.json.mdl */
    if (!strcmp(base, "config.json") || !strcmp(base, "config.json.mdl")) {
        if (s) { /* name the directory holding it */
            *s = 0;
            s = strrchr(path, '/');
        } else {
            snprintf(path, sizeof path, "%s", g->name);
        }
    }
    s = s ? s + 1 : path;
    size_t k = strlen(s);
    if (k > 4 && !strcmp(s + k - 4, ".mdl"))
        k -= 4;
    if (k >= n)
        k = n - 1;
    for (size_t i = 0; i < k; i++)
        buf[i] = (char)(isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '.' || s[i] == '_' ? s[i] : '_');
    buf[k] = 0;
}

/* ------------------------------------------------ the model, row by row
 * torchtitan's llama3 (torchtitan/models/llama3/model/{args,model}.py at
 * v0.2.2): TransformerModelArgs keywords, or a refusal. */

static bool tt_arch_HYBRID(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (!A->hybrid)
        return true;
    return rep_frame_refuse(g, o, "its layers compute softplus, conv1d and ssd (Mamba-2 layers, the pattern "
                            "%.60s%s), and torchtitan v0.2.2 has no state-space mixer: its models' decoder layers "
                            "are attention and an MLP or experts (Megatron-LM builds it: --emit megatron)",
                            A->pattern, strlen(A->pattern) > 60 ? "..." : "");
}

static bool tt_arch_NORM(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (!A->rmsnorm)
        return rep_frame_refuse(g, o, "it has LayerNorm (llama3 has RMSNorm)");
    return true;
}

/* ptdc emits torchtitan's llama3 model, which has no experts: one sentence
 * for the whole mixture (its router's attributes do not get their own). */
static bool tt_arch_EXPERTS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (!A->moe)
        return true;
    return rep_frame_refuse(g, o, "it is a mixture of experts (route and moe operators), and "
                            "torchtitan's llama3 model, the one ptdc emits, has no router or experts");
}

/* Shared experts and dense layers exist only beside experts, refused above. */
static bool tt_arch_SHARED(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g, (void)A, (void)o;
    return true;
}

/* A latent MoE exists only beside experts, refused above. */
static bool tt_arch_MOE_LATENT(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g, (void)A, (void)o;
    return true;
}

static bool tt_arch_MOE_LAYERS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g, (void)A, (void)o;
    return true;
}

static bool tt_arch_SINKS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (A->sinks)
        /* torchtitan's gpt_oss (models/gpt_oss, v0.2.2) has the sinks, the windows on even layers
         * and the biases, and its experts' mlp1_bias, mlp2_bias and swiglu_limit too (moe.py),
         * as ptdc's models/gpt-oss.mdl; ptdc writes only llama3's job files */
        return rep_frame_refuse(g, o, "its attention has sinks, which among torchtitan's models only gpt_oss has, "
                                "and ptdc writes job files for torchtitan's llama3 model only");
    return true;
}

static bool tt_arch_QK_NORM(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (A->qk_norm)
        return rep_frame_refuse(g, o, "it normalises each head's query and key (llama3 has no q/k norm)");
    return true;
}

static bool tt_arch_MLP(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (!A->swiglu)
        return rep_frame_refuse(g, o, "it has a GELU MLP (llama3 has SwiGLU)");
    return true;
}

static bool tt_arch_POSITIONS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (A->learned_pos)
        return rep_frame_refuse(g, o, "it has a learned position table (llama3 has RoPE)");
    if (!A->rope)
        return rep_frame_refuse(g, o, "it has no rotary embedding (llama3 has RoPE)");
    /* precompute_freqs_cis always applies its RoPEScalingArgs (whose
     * defaults are LLaMA-3.1's factor 8); a factor of 1 leaves every
     * frequency as it is. A model with scaling states it attribute by
     * attribute (tt_attr_ROPE_*). */
    if (!A->has_attr[IR_ATTR_ROPE_SCALING] || (IrRopeKind)A->attr[IR_ATTR_ROPE_SCALING] == IR_ROPE_PLAIN)
        rep_frame_rope(o, "scaling_factor=1.0");
    return true;
}

static bool tt_arch_BIASES(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (A->bias_qkv || A->bias_linear)
        return rep_frame_refuse(g, o, "it has biases on its projections (llama3 has none)");
    return true;
}

static bool tt_arch_TIED(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (A->tied)
        return rep_frame_refuse(g, o, "it has an LM head tied to the token table (llama3's is separate)");
    return true;
}

static bool tt_arch_LAYERS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "n_layers=%d", A->layers);
    return true;
}

static bool tt_arch_D_MODEL(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "dim=%lld", (long long)A->d_model);
    return true;
}

static bool tt_arch_D_FF(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    double mult;
    int64_t mof;
    if (!ffn_args(A->d_model, A->d_ff, &mult, &mof))
        return rep_frame_refuse(g, o, "its FFN width is int(8 dim / 3), times ffn_dim_multiplier, rounded up "
                                "to multiple_of, and no such choice gives d_ff = %lld for dim %lld",
                                (long long)A->d_ff, (long long)A->d_model);
    rep_frame_arg(o, "multiple_of=%lld", (long long)mof);
    if (mult > 0)
        rep_frame_arg(o, "ffn_dim_multiplier=%.17g", mult);
    return true;
}

static bool tt_arch_HEADS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "n_heads=%lld", (long long)A->heads);
    return true;
}

static bool tt_arch_KV_HEADS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "n_kv_heads=%lld", (long long)A->kv_heads);
    return true;
}

/* Attention's head_dim is dim // n_heads (model.py), not an argument. */
static bool tt_arch_HEAD_DIM(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (A->head_dim * A->heads != A->d_model)
        return rep_frame_refuse(g, o, "its heads are %lld wide, and llama3's are dim / n_heads = %lld (it has "
                                "no head_dim argument)", (long long)A->head_dim,
                                (long long)(A->d_model / A->heads));
    return true;
}

static bool tt_arch_SEQ(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g, (void)A, (void)o; /* [training] seq_len, which also sets max_seq_len */
    return true;
}

static bool tt_arch_INIT_STD(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g; /* an initialisation is not a plan's (docs/stacks.md) */
    rep_frame_note(o, "torchtitan initialises the weights its own way (init_weights, depth_init), not with "
                   "ptdc's std %g.", A->init_std);
    return true;
}

static bool tt_arch_DTYPE(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g, (void)A, (void)o; /* [training] mixed_precision_param */
    return true;
}

static bool tt_arch_VOCAB(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "vocab_size=%lld", (long long)A->vocab);
    return true;
}

static bool tt_attr_RMSNORM_GROUPS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)A;
    return rep_frame_refuse(g, o, "an RMSNorm normalises groups apart (group_dims), which torchtitan's "
                            "norms do not");
}

static bool tt_attr_RMSNORM_EPS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "norm_eps=%g", A->attr[IR_ATTR_RMSNORM_EPS]);
    return true;
}

static bool tt_attr_LAYERNORM_EPS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)A; /* tt_arch_NORM refuses LayerNorm first */
    return rep_frame_refuse(g, o, "it has LayerNorm (llama3 has RMSNorm)");
}

static bool tt_attr_ROPE_POS(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if ((int)A->attr[IR_ATTR_ROPE_POS] != g->seq_dim)
        return rep_frame_refuse(g, o, "its rotary embedding counts positions along %s, not the sequence",
                                g->dims[(int)A->attr[IR_ATTR_ROPE_POS]].name);
    return true;
}

static bool tt_attr_ROPE_ROT(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if ((int)A->attr[IR_ATTR_ROPE_ROT] != (A->mla ? A->rope_dim_dim : A->head_dim_dim))
        return rep_frame_refuse(g, o, "its rotary embedding rotates %s, not the whole head dim",
                                g->dims[(int)A->attr[IR_ATTR_ROPE_ROT]].name);
    return true;
}

static bool tt_attr_ROPE_THETA(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_arg(o, "rope_theta=%.17g", A->attr[IR_ATTR_ROPE_THETA]);
    return true;
}

static bool tt_attr_ROPE_SCALING(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g, (void)A, (void)o; /* llama3, the one kind: its parameters are the rows below */
    return true;
}

static bool tt_attr_ROPE_FACTOR(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_rope(o, "scaling_factor=%.17g", A->attr[IR_ATTR_ROPE_FACTOR]);
    return true;
}

static bool tt_attr_ROPE_LOW(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_rope(o, "low_freq_factor=%.17g", A->attr[IR_ATTR_ROPE_LOW]);
    return true;
}

static bool tt_attr_ROPE_HIGH(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_rope(o, "high_freq_factor=%.17g", A->attr[IR_ATTR_ROPE_HIGH]);
    return true;
}

static bool tt_attr_ROPE_ORIGINAL(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)g;
    rep_frame_rope(o, "original_max_position_embeddings=%lld", (long long)A->attr[IR_ATTR_ROPE_ORIGINAL]);
    return true;
}

static bool tt_attr_ATTN_CAUSAL(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (A->attr[IR_ATTR_ATTN_CAUSAL] == 0)
        return rep_frame_refuse(g, o, "its attention is not causal (llama3's attn_mask_type is causal or "
                                "block_causal)");
    return true;
}

static bool tt_attr_ATTN_WINDOW(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    return rep_frame_refuse(g, o, "its attention has a sliding window of %lld positions, and llama3's "
                            "attention masks (causal, block_causal) have none",
                            (long long)A->attr[IR_ATTR_ATTN_WINDOW]);
}

static bool tt_attr_SOFTMAX_DIM(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)A; /* rep_arch_read refuses a layer with a softmax of its own before this */
    return rep_frame_refuse(g, o, "it has a softmax operator outside attention");
}

/* The router's attributes: never reached, tt_arch_EXPERTS refuses first. */
#define TT_MOE(ID)                                                                             \
    static bool tt_attr_##ID(const IrGraph *g, const RepArch *A, RepFrameOut *o)               \
    {                                                                                          \
        (void)A;                                                                               \
        return tt_arch_EXPERTS(g, A, o);                                                       \
    }
TT_MOE(ROUTE_TOPK)
TT_MOE(MOE_ACT)
TT_MOE(ROUTE_SCORE)
TT_MOE(ROUTE_NORM)
TT_MOE(ROUTE_SCALE)
TT_MOE(ROUTE_GROUPS)
TT_MOE(ROUTE_GTOPK)
TT_MOE(ROUTE_CAPACITY)
TT_MOE(ROUTE_AUX)
TT_MOE(ROUTE_ZLOSS)
#undef TT_MOE

/* torchtitan's llama3 TransformerModelArgs has no latent attention (its
 * deepseek_v3 model is another model family, not emitted here). */
static bool tt_arch_LATENT(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    if (A->mla)
        return rep_frame_refuse(g, o, "its attention is multi-head latent attention (DeepSeek-V3's), which "
                                "torchtitan's llama3 model does not build");
    return true;
}

static bool tt_slice_concat(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)A;
    return rep_frame_refuse(g, o, "it slices or joins tensors outside multi-head latent attention");
}
static bool tt_attr_SLICE_DIM(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return tt_slice_concat(g, A, o); }
static bool tt_attr_SLICE_AT(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return tt_slice_concat(g, A, o); }
static bool tt_attr_CONCAT_DIM(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return tt_slice_concat(g, A, o); }

/* Multi-token prediction (shift, a weighted second loss): torchtitan builds
 * it only through its DeepSeek-V3 model registry (num_mtp_layers, the
 * MTPLoss config; torchtitan/models/deepseek_v3/MTP.md), no job-file key,
 * and rejects it with pipeline or context parallelism. */
static bool tt_mtp(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    (void)A;
    return rep_frame_refuse(g, o, "it trains multi-token prediction, which torchtitan builds only through "
                            "its DeepSeek-V3 model registry (num_mtp_layers; models/deepseek_v3/MTP.md), "
                            "not a job-file option, and refuses with pipeline or context parallelism");
}
static bool tt_arch_MTP(const IrGraph *g, const RepArch *A, RepFrameOut *o)
{
    return A->mtp_layers ? tt_mtp(g, A, o) : true;
}
static bool tt_attr_SHIFT_BY(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return tt_mtp(g, A, o); }
static bool tt_attr_SHIFT_TAIL(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return tt_mtp(g, A, o); }
static bool tt_attr_CE_WEIGHT(const IrGraph *g, const RepArch *A, RepFrameOut *o) { return tt_mtp(g, A, o); }

RepFrameFn *const rep_torchtitan_arch[REP_NARCH] = {
#define ARCH(ID, what) [REP_ARCH_##ID] = tt_arch_##ID,
#include "arch.def"
#undef ARCH
};
RepFrameFn *const rep_torchtitan_attr[IR_NATTRS] = {
#define ATTR(ID, op, name, kind, flags, field) [IR_ATTR_##ID] = tt_attr_##ID,
#include "attrs.def"
#undef ATTR
};

static bool tt_model(const IrGraph *g, RepArch *A, RepFrameOut *o, char *why, size_t wn)
{
    char sub[256];
    if (!rep_arch_read(g, A, sub, sizeof sub))
        return rep_refuse(why, wn, "torchtitan's llama3 model cannot express %s: %s", g->name, sub);
    memset(o, 0, sizeof *o);
    o->fw = "torchtitan's llama3 model";
    o->why = why;
    o->wn = wn;
    return rep_frame_model(g, A, rep_torchtitan_arch, rep_torchtitan_attr, o);
}

bool rep_torchtitan_model(const IrGraph *g, RepArch *A, char *why, size_t wn)
{
    RepFrameOut o;
    return tt_model(g, A, &o, why, wn);
}

bool rep_torchtitan_layout(const RepArch *A, const PlanLayout *L, const PassStack *st, PlanAttention att,
                           char *why, size_t wn)
{
    if (L->replicated > 1)
        return rep_refuse(why, wn, "the plan keeps %d replicas along a mesh axis it splits nothing over, "
                      "which torchtitan has no setting for", L->replicated);
    /* torchtitan's zero-bubble schedules are multi-stage (pipeline_parallel.py
     * requires at least 2 stages per rank of a PipelineScheduleMulti): none is
     * ZB-H1's single chunk. */
    if (plan_schedule_split(L->schedule))
        return rep_refuse(why, wn, "the plan's schedule is %s on one model chunk per pipeline rank, and "
                          "torchtitan's zero-bubble schedules (InterleavedZeroBubble, ZBVZeroBubble) run two "
                          "or more stages per rank", plan_schedule_title(L->schedule));
    /* Context parallelism: torchtitan shards the weights with FSDP over
     * dp_shard x cp whatever else runs (parallelize_llama), which is ZeRO-2
     * or -3 over the plan's dp x cp. */
    int cp = L->cp > 1 ? L->cp : 1;
    if (cp > 1 && L->cp_a2a)
        return rep_refuse(why, wn, "the plan's attention splits its heads over the cp ranks (all-to-all), and "
                          "torchtitan's context_parallel() only gathers or rotates keys and values");
    if (cp > 1 && L->zero < 2)
        return rep_refuse(why, wn, "the plan has context parallelism cp %d with ZeRO-%d, and torchtitan shards "
                          "the weights over the context-parallel ranks with FSDP (ZeRO-2 or -3 over dp x cp)",
                          cp, L->zero);
    if (L->dp > 1 && L->zero == 1)
        return rep_refuse(why, wn, "the plan uses ZeRO-1; torchtitan's FSDP shards the gradients with the "
                      "optimizer state (ZeRO-2: fsdp_reshard_after_forward = \"never\") or also the "
                      "weights (ZeRO-3)");
    if (L->dp > 1 && L->zero == 0 && (L->tp > 1 || L->pp > 1))
        return rep_refuse(why, wn, "the plan replicates the weights over data parallelism (ZeRO-0) with "
                      "tensor or pipeline parallelism; torchtitan runs DDP only alone (\"DDP has not "
                      "supported > 1D parallelism\")");
    /* maybe_enable_amp (torchtitan/distributed/utils.py): mixed precision
     * comes from fully_shard, or from autocast when nothing but DDP runs; with
     * tensor or pipeline parallelism and no FSDP it is off, and the model
     * trains in fp32, which the stack does not price. */
    if (L->dp == 1 && cp == 1 && (L->tp > 1 || L->pp > 1))
        return rep_refuse(why, wn, "the plan has no data parallelism beside its %s parallelism, and torchtitan "
                      "then trains in fp32 (mixed precision comes from FSDP, and autocast only without "
                      "TP or PP: maybe_enable_amp); a layout with dp >= 2 and ZeRO-2 or -3 trains in bf16",
                      L->tp > 1 ? "tensor" : "pipeline");
    if (L->tp > 1 && !L->sp)
        return rep_refuse(why, wn, "the plan's tensor parallelism leaves the norms unsplit (--sp off); "
                      "torchtitan's llama3 always shards them over the sequence (SequenceParallel)");
    /* ParallelDims.seq_len_divisor: tp x (2 x cp), asserted by parallelize_llama. */
    if (A->seq % (2 * L->tp * cp))
        return rep_refuse(why, wn, "torchtitan needs seq_len divisible by 2 x tp x cp (= %d here; "
                      "ParallelDims.seq_len_divisor), and the sequence is %lld", 2 * L->tp * cp,
                      (long long)A->seq);
    const char *rc = plan_layout_recompute_name(L);
    if (!strcmp(rc, "mixed"))
        return rep_refuse(why, wn, "the plan recomputes some pipeline stages and not others; torchtitan "
                      "applies one activation checkpointing mode to every layer");
    if (!strcmp(rc, "selective") || !strcmp(rc, "ffn"))
        return rep_refuse(why, wn, "the plan recomputes %s; torchtitan's selective activation checkpointing "
                      "is per-op (it saves matmul and attention outputs) or every n-th layer, neither "
                      "of which recomputes just that", !strcmp(rc, "ffn") ? "the MLP" : "core attention");
    if (st->attn_kernel == PASS_KERNEL_FLASH1 || st->attn_kernel == PASS_KERNEL_FUSED_SOFTMAX ||
        st->attn_kernel == PASS_KERNEL_EAGER ||
        (st->attn_kernel == PASS_KERNEL_AUTO && att == PLAN_ATTN_MATERIALIZED))
        return rep_refuse(why, wn, "the stack prices another attention kernel than the FlashAttention-2 "
                      "that torchtitan's scaled_dot_product_attention runs");
    if (st->grad_bytes == 2 || (st->grad_bytes == 0 && A->bf16))
        return rep_refuse(why, wn, "the stack keeps and reduces gradients in bf16 (grad_bytes = %d); "
                      "torchtitan's mixed_precision_reduce is float32 only", st->grad_bytes);
    return true;
}

/* The plan's precision as a torchtitan v0.2.2 model converter (job_config.py
 * Quantize; components/quantization/float8.py, mx.py): [model] converters
 * names it, its section ([quantize.linear.float8], [quantize.linear.mx])
 * configures it. Both swap every nn.Linear whose dims are multiples of 16
 * but those filter_fqns name: "output" keeps the head in BF16, as Megatron-LM
 * does (float8 filters nothing by default). float8 under FSDP all-gathers the
 * weights in FP8 with their scales precomputed after the optimizer step,
 * torchtitan's recommendation for tensorwise scaling, and then takes no
 * recipe_name (float8.py asserts the two apart; unset is tensorwise). */
typedef struct TtPrecision {
    const char *converter;        /* NULL: BF16, or refused */
    const char *recipe;           /* recipe_name */
    bool fsdp_gather;             /* enable_fsdp_float8_all_gather under FSDP */
    const char *refuse;           /* why torchtitan cannot run it */
} TtPrecision;
static const TtPrecision tt_precisions[PLAN_NPREC] = {
    [PLAN_PREC_BF16] = {NULL, NULL, false, NULL},
    [PLAN_PREC_FP8] = {"quantize.linear.float8", "tensorwise", true, NULL},
    [PLAN_PREC_MXFP8] = {"quantize.linear.mx", "mxfp8_cublas", false, NULL},
    [PLAN_PREC_NVFP4] = {NULL, NULL, false,
                         "torchtitan v0.2.2 has no NVFP4 converter: its quantize converters are float8 "
                         "(tensorwise or rowwise scales) and mx (torchao's MX recipes, a scale per 32 "
                         "elements), not NVFP4's 16-element blocks with a per-tensor scale"},
};

/* The converters swap only the nn.Linear modules whose weight dims are both
 * multiples of 16 (components/quantization/utils.py module_filter_fn, on
 * the whole model before it is parallelised), leaving the others in BF16:
 * then the job would not run the plan's precision. False with a sentence. */
static bool tt_lowp_shapes(const RepArch *A, PlanPrecision p, char *why, size_t wn)
{
    int64_t hq = A->heads * A->head_dim, hkv = A->kv_heads * A->head_dim;
    const struct {
        const char *what;
        int64_t out, in;
    } w[] = {
        {"wq", hq, A->d_model}, {"wk (and wv)", hkv, A->d_model}, {"wo", A->d_model, hq},
        {"w1 (and w3)", A->d_ff, A->d_model}, {"w2", A->d_model, A->d_ff},
    };
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        if (w[i].out % 16 || w[i].in % 16)
            return rep_refuse(why, wn, "torchtitan's %s converter keeps a linear layer in BF16 unless both its dims "
                              "are multiples of 16 (module_filter_fn), and %s is [%lld, %lld]",
                              p == PLAN_PREC_MXFP8 ? "mx" : "float8", w[i].what, (long long)w[i].out,
                              (long long)w[i].in);
    return true;
}

bool rep_emit_torchtitan(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                         char *why, size_t wn)
{
    RepArch A;
    RepFrameOut m;
    char sub[256];
    if (!tt_model(g, &A, &m, why, wn))
        return false;
    const PlanLayout *L = &a->layout;
    const PassStack *st = &c->st;
    int gpn = pass_cluster_domain(c->cl);
    if (!rep_torchtitan_layout(&A, L, st, a->plan.attention, why, wn))
        return false;
    if ((unsigned)a->plan.precision >= PLAN_NPREC)
        return rep_refuse(why, wn, "the plan's precision (%d) is not one ptdc knows", (int)a->plan.precision);
    const TtPrecision *pr = &tt_precisions[a->plan.precision];
    if (pr->refuse)
        return rep_refuse(why, wn, "the plan runs its linear layers in %s, and %s",
                          plan_precision_name(a->plan.precision), pr->refuse);
    if (!rep_precision_gpu(&c->cl->gpu, a->plan.precision, "torchao", why, wn))
        return false;
    if (pr->converter && !tt_lowp_shapes(&A, a->plan.precision, why, wn))
        return false;
    const char *rc = plan_layout_recompute_name(L);
    /* The pipeline: pipeline_parallel_layers_per_stage states even chunks
     * only; an uneven split (torchtitan's module_fqns_per_model_part could
     * state it) is refused by name. */
    for (int c = 0, first = -1; c < a->plan.nstages; c++) {
        const PlanStage *S = &a->plan.stages[c];
        int n = 0;
        for (int q = S->first_piece; q < S->first_piece + S->npieces; q++)
            n += g->pieces[q].rep >= 0;
        if (first < 0)
            first = n;
        if (n != first)
            return rep_refuse(why, wn, "torchtitan cannot express the plan: its model chunks run %d and %d "
                              "layers, and this emitter states only the even split "
                              "(pipeline_parallel_layers_per_stage)", first, n);
    }
    if (!rep_plan_matches_framework(g, &A, a, gpn, sub, sizeof sub))
        return rep_refuse(why, wn, "torchtitan cannot express the plan: %s", sub);

    char flavor[64];
    flavor_name(g, flavor, sizeof flavor);
    int64_t gb = plan_mb_seqs(L->micro_batch, L->dp) * L->num_micro;
    rep_emit_header(f, g, c, a, "torchtitan job file (v0.2.2, --job.config_file)");
    fprintf(f, "# For torchtitan v0.2.2, the last release that reads TOML job files. Its main branch builds\n"
               "#   the job from Python configurations (config_registry.py) with other names: the batch is\n"
               "#   TrainingConfig.num_tokens_per_microbatch_per_dp_rank, the sequence max_context_length.\n");
    fprintf(f, "# Register the model as a llama3 flavor (torchtitan/models/llama3/__init__.py, llama3_args):\n");
    /* The flavor as a Python expression, wrapped at its commas. */
    char tok[64][192]; /* an argument (RepFrameOut.arg, 160) and its comma */
    int nt = 0;
    for (int i = 0; i < m.narg; i++)
        snprintf(tok[nt++], sizeof tok[0], "%s,", m.arg[i]);
    for (int i = 0; i < m.nrope; i++)
        snprintf(tok[nt++], sizeof tok[0], "%s%s%s", i == 0 ? "rope_scaling_args=RoPEScalingArgs(" : "", m.rope[i],
                 i + 1 < m.nrope ? "," : ")),");
    int col = fprintf(f, "#   \"%s\": TransformerModelArgs(", flavor);
    for (int i = 0; i < nt; i++) {
        int w = (int)strlen(tok[i]);
        if (col + 1 + w > 100)
            col = fprintf(f, "\n#       %s", tok[i]) - 1;
        else
            col += fprintf(f, "%s%s", i ? " " : "", tok[i]);
    }
    fprintf(f, "\n");
    rep_frame_print_notes(f, &m);
    if (L->dp > 1 && L->zero == 0)
        fprintf(f, "# Under DDP torchtitan keeps fp32 weights and runs under autocast; the stack prices bf16\n"
                   "#   weights beside fp32 master weights.\n");
    if (L->tp > 1 && (st->tp_overlap == PASS_TP_OVERLAP_UB || st->reshard_overlap > 0))
        fprintf(f, "# The stack hides forward tensor-parallel communication (tp_overlap, reshard_overlap);\n"
                   "#   torchtitan does that with enable_async_tensor_parallel under torch.compile, which\n"
                   "#   this file leaves off, so expect more time than predicted.\n");
    fprintf(f, "\n[model]\nname = \"llama3\"\nflavor = \"%s\"\n", flavor);
    if (pr->converter)
        fprintf(f, "converters = [\"%s\"]\n", pr->converter);
    fprintf(f, "\n[training]\n");
    if (L->pp > 1) /* the pipeline takes the replica's whole batch in micro-batches */
        fprintf(f, "local_batch_size = %lld\n", (long long)(L->micro_batch * L->num_micro));
    else          /* micro-batches are gradient accumulation steps */
        fprintf(f, "local_batch_size = %lld\n", (long long)L->micro_batch);
    fprintf(f, "global_batch_size = %lld\n", (long long)gb);
    fprintf(f, "seq_len = %lld\n", (long long)A.seq);
    fprintf(f, "mixed_precision_param = \"%s\"\n", A.bf16 ? "bfloat16" : "float32");
    fprintf(f, "mixed_precision_reduce = \"float32\"\n");
    fprintf(f, "\n[parallelism]\n");
    bool fsdp = L->dp > 1 && L->zero >= 2;
    int cp = L->cp > 1 ? L->cp : 1;
    fprintf(f, "data_parallel_replicate_degree = %d\n", fsdp || L->dp == 1 ? 1 : L->dp);
    fprintf(f, "data_parallel_shard_degree = %d\n", fsdp ? L->dp : 1);
    if (fsdp || (cp > 1 && L->zero >= 2)) /* FSDP over dp_shard x cp */
        fprintf(f, "fsdp_reshard_after_forward = \"%s\"\n", L->zero == 3 ? "always" : "never");
    fprintf(f, "tensor_parallel_degree = %d\n", L->tp);
    fprintf(f, "pipeline_parallel_degree = %d\n", L->pp);
    if (L->pp > 1) {
        fprintf(f, "pipeline_parallel_schedule = \"%s\"\n", L->v > 1 ? "Interleaved1F1B" : "1F1B");
        fprintf(f, "pipeline_parallel_microbatch_size = %lld\n", (long long)L->micro_batch);
        fprintf(f, "pipeline_parallel_layers_per_stage = %d\n", A.layers / (L->pp * L->v));
        fprintf(f, "pipeline_parallel_first_stage_less_layers = 0\n");
        fprintf(f, "pipeline_parallel_last_stage_less_layers = 0\n");
    }
    /* Context parallelism: torchtitan's context_parallel() runs SDPA over
     * the cp ranks' shards of the sequence; the "allgather" rotate method
     * all-gathers the key and value shards (ptdc's gather), "alltoall"
     * rotates them round the ranks (ptdc's ring). It splits each sequence
     * head-and-tail (the headtail load balancer: two mirrored chunks per
     * rank), as ptdc's load-balanced split does; none of that changes what
     * is computed: CP partitions the same attention, so the job trains the
     * same model and the degree is what must match. */
    fprintf(f, "context_parallel_degree = %d\n", cp);
    if (cp > 1)
        fprintf(f, "context_parallel_rotate_method = \"%s\"\n", L->cp_ring ? "alltoall" : "allgather");
    if (pr->converter) {
        fprintf(f, "\n[%s]\n", pr->converter);
        if (pr->fsdp_gather && fsdp)
            fprintf(f, "enable_fsdp_float8_all_gather = true\nprecompute_float8_dynamic_scale_for_fsdp = true\n");
        else
            fprintf(f, "recipe_name = \"%s\"\n", pr->recipe);
        fprintf(f, "filter_fqns = [\"output\"]\n");
    }
    fprintf(f, "\n[activation_checkpoint]\nmode = \"%s\"\n", !strcmp(rc, "full") ? "full" : "none");
    fprintf(f, "\n[compile]\nenable = false\n");
    return true;
}
