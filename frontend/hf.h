/* hf.h: internals of the Hugging Face import (frontend/hf_*.c; the export is
 * fe_hf_import in frontend.h).
 *   hf_config.c  read config.json strictly into an HfModel: every key is
 *                used, checked to have a value ptdc reproduces, known to be
 *                metadata, or refused by name
 *   hf_mdl.c     write the HfModel as a readable .mdl, each constant with a
 *                comment naming the key it came from */
#ifndef PTDC_HF_H
#define PTDC_HF_H

#include "ir.h"

typedef enum {
    HF_LLAMA,   /* LlamaForCausalLM */
    HF_MISTRAL, /* MistralForCausalLM */
    HF_QWEN2,   /* Qwen2ForCausalLM */
    HF_GPT2,    /* GPT2LMHeadModel */
    HF_MIXTRAL, /* MixtralForCausalLM: every layer MoE */
    HF_QWEN2_MOE, /* Qwen2MoeForCausalLM: biases, a gated shared expert */
    HF_QWEN3_MOE, /* Qwen3MoeForCausalLM: q/k norms */
    HF_GPT_OSS,   /* GptOssForCausalLM: sinks, alternating windows, biases, experts with
                     biases and the clamped SwiGLU, gate and up interleaved in gate_up_proj */
} HfArch;

enum { HF_MAX_NOTES = 24 };

/* One config constant of the generated .mdl and its provenance. */
typedef struct HfConst {
    bool set;
    bool is_int;
    int64_t i;
    double f;
    const char *why;   /* the comment: "num_attention_heads", "absent: HF's default" */
} HfConst;

typedef struct HfModel {
    const char *path;  /* the config.json read */
    HfArch arch;
    const char *arch_name, *model_type;
    HfConst n_layers, d_model, n_heads, n_kv_heads, head_dim, d_ff, vocab, seq;
    HfConst norm_eps, rope_theta, init_std;
    bool kv_is_heads;  /* n_kv_heads == n_heads: one dim (an alias) */
    bool head_dim_derived; /* head_dim = d_model / n_heads */
    bool tied;         /* the LM head is the token table */
    const char *tied_why;
    bool qkv_bias;     /* Qwen2 */
    HfConst window;    /* sliding window (Mistral), unset: none */
    bool llama3;       /* rope_scaling of type llama3 */
    HfConst rope_factor, rope_low, rope_high, rope_orig;
    /* mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE) */
    bool moe;
    HfConst n_experts, topk, d_expert, d_shared, aux;
    bool norm_topk;    /* renormalise the top-k weights */
    bool qk_norm;      /* Qwen3: RMSNorm of q and k per head */
    bool *moe_layer;   /* [n_layers]: the layer's MLP is MoE (else dense, d_ff) */
    bool any_dense;    /* some layer is dense (decoder_sparse_step, mlp_only_layers) */
    /* keys accepted that change nothing ptdc computes, said in the header */
    const char *notes[HF_MAX_NOTES];
    int nnotes;
} HfModel;

/* Read DIR/config.json or a config file; false after reporting each problem
 * with ir_error ("ptdc: error: PATH: ..."). Strings live in arena a. */
bool hf_config_read(IrArena *a, const char *path, HfModel *m);
/* The .mdl text (NUL-terminated, in arena a) and its length. */
char *hf_mdl_write(IrArena *a, const HfModel *m, size_t *len);

#endif
