/* ref.h: an independent reference for the LLaMA, GPT, Mixtral and DeepSeek-V3
 * families (DeepSeek's from the DeepSeek-V2/V3 papers' equations), written
 * apart from ptdc's runtime and generated code (tests/ref/README in
 * docs/codegen.md's test section): plain double-precision C, forward by the
 * Hugging Face definitions (LlamaForCausalLM, GPT2LMHeadModel with
 * gelu_new), backward by hand-written derivatives, weights and gradients
 * under Hugging Face names and layouts in safetensors files this directory
 * reads and writes itself. Only the model's sizes come from ptdc (its
 * frontend reads the .mdl). */
#ifndef PTDC_TESTS_REF_H
#define PTDC_TESTS_REF_H

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------ ref_st.c */
/* A tensor of a safetensors file, held in double. */
typedef struct RefTensor {
    char *name;
    int ndim;
    int64_t shape[4];
    int64_t n;
    double *v;
} RefTensor;

typedef struct RefSt {
    int n;
    RefTensor *t;
} RefSt;

/* Read a file whose tensors are all F32 (NULL with a message on stderr). */
RefSt *ref_st_read(const char *path);
/* Write every tensor as F32, names sorted; false with a message. */
bool ref_st_write(const char *path, const RefSt *st);
RefTensor *ref_st_find(const RefSt *st, const char *name);
/* Add a zero tensor (returns it). */
RefTensor *ref_st_add(RefSt *st, const char *name, int ndim, const int64_t *shape);
RefSt *ref_st_new(void);
/* Same names and shapes, zeros. */
RefSt *ref_st_zeros_like(const RefSt *st);
void ref_st_free(RefSt *st);

/* ----------------------------------------------------------- ref_oss.c */
/* GPT-OSS's experts: Hugging Face's fused tensors (model.layers.L.mlp.experts.
 * gate_up_proj, gate and up interleaved, ...) replaced in place by the
 * reference's stacked ones (layers.L.e_gate, e_up, e_down and biases);
 * nothing else changes. ref_oss_fuse: the inverse, as a copy. */
void ref_oss_unfuse(RefSt *st);
RefSt *ref_oss_fuse(const RefSt *st);

/* ----------------------------------------------------------- ref_ops.c */
/* n doubles, zero-filled (at least one); exits on out of memory. */
double *ref_zeros(int64_t n);
/* C[M,N] (+)= op(A) op(B): A [M,K] ([K,M] if ta), B [K,N] ([N,K] if tb). */
void ref_mm(double *c, const double *a, const double *b, int64_t M, int64_t N, int64_t K, bool ta,
            bool tb, bool acc);
void ref_rmsnorm_fwd(double *y, double *rstd, const double *x, const double *w, int64_t rows,
                     int64_t cols, double eps);
/* dx = (overwritten), dw += */
void ref_rmsnorm_bwd(double *dx, double *dw, const double *dy, const double *x, const double *w,
                     const double *rstd, int64_t rows, int64_t cols);
void ref_layernorm_fwd(double *y, double *xhat, double *rstd, const double *x, const double *w,
                       const double *b, int64_t rows, int64_t cols, double eps);
void ref_layernorm_bwd(double *dx, double *dw, double *db, const double *dy, const double *xhat,
                       const double *w, const double *rstd, int64_t rows, int64_t cols);
/* Rotate-half rotary embedding of x [B*S, heads, dim] at positions r % S,
 * in place; inverse: the transposed rotation (its backward). */
void ref_rope(double *x, int64_t rows, int64_t S, int64_t heads, int64_t dim, double theta,
              bool inverse);
/* Causal grouped-query attention, one sequence at a time: q [B*S, H*D], k, v
 * [B*S, KVH*D], o [B*S, H*D]; p [B, H, S, S] keeps the probabilities. */
void ref_attention_fwd(double *o, double *p, const double *q, const double *k, const double *v,
                       int64_t B, int64_t S, int64_t H, int64_t KVH, int64_t D);
/* With a sliding window (0: none) and sinks [H] (NULL: none), p the keys' share. */
void ref_attention_sw_fwd(double *o, double *p, const double *q, const double *k, const double *v,
                          const double *sinks, int64_t window, int64_t B, int64_t S, int64_t H, int64_t KVH,
                          int64_t D);
/* dq, dk, dv overwritten (masked and sink entries have p 0 and take no gradient here). */
void ref_attention_bwd(double *dq, double *dk, double *dv, const double *dout, const double *p,
                       const double *q, const double *k, const double *v, int64_t B, int64_t S,
                       int64_t H, int64_t KVH, int64_t D);
double ref_silu(double x);
double ref_silu_grad(double x);
double ref_gelu(double x); /* tanh approximation */
double ref_gelu_grad(double x);
/* Mean cross-entropy of rows logits [rows, V]; dlogits (may be NULL) = its gradient. */
double ref_cross_entropy(const double *logits, const int32_t *targets, int64_t rows, int64_t V,
                         double *dlogits);
/* weight x the mean cross-entropy of the rows whose target is >= 0 (a target of -1 adds no loss
 * and no gradient: multi-token prediction's rolled-off positions); dlogits (may be NULL) is
 * allocated [rows, V], zero on the rows without a target; the caller frees it. */
double ref_masked_cross_entropy(const double *logits, const int32_t *targets, int64_t rows, int64_t V,
                                double weight, double **dlogits);

/* --------------------------------------------------------- ref_model.c */
/* REF_MIXTRAL: LLaMA's attention, every MLP a sparse MoE block (ref_moe.c). */
/* REF_DEEPSEEK: DeepSeek-V3 (models/deepseek-v3.mdl): multi-head latent
 * attention (ref_mla.c), the first first_dense layers' MLPs dense (width Fd),
 * the others MoE blocks with sigmoid group-limited routing and a shared expert. */
/* REF_GPTOSS: GPT-OSS (models/gpt-oss.mdl): Mixtral with q/k/v/o biases,
 * head_dim its own, attention sinks, a window on the layers listed in win[],
 * a router bias and ptdc's stacked expert tensors (ref_moe.c). */
/* REF_HYBRID: models/hybrid.mdl, Mamba-2 layers (ref_mamba.c) then attention
 * layers without positions, alternating (Nemotron-H's M and *); and
 * nemotron3.mdl's patterns, with squared-ReLU MLP layers and MoE layers
 * (plain, E, or latent, L: ref_moe.c). */
typedef enum { REF_LLAMA, REF_GPT, REF_MIXTRAL, REF_DEEPSEEK, REF_GPTOSS,
              REF_HYBRID } RefFamily;

typedef struct RefConfig {
    RefFamily fam;
    int64_t L, D, H, KVH, Dh, F, V, S, B; /* B: sequences per step; F: an expert's width */
    double eps, theta;
    /* Mixtral: experts, chosen per token, the route's normalisation and
     * regularisers (docs/moe.md), read from the graph's route and moe nodes */
    int64_t E, K;
    bool moe_norm;
    int moe_act; /* the experts' activation, IrMoeAct (ir/moe_acts.def) */
    double aux, zloss;
    /* ref_step returns the objective the programs minimise and print (the
     * cross entropy plus the routers' regularisers) instead of the cross
     * entropy alone: selftest's finite differences and check's loss */
    bool objective;
    /* DeepSeek: the router's scores (sigmoid or softmax), groups kept of
     * groups, the chosen weights' scale; the latent ranks and head parts of
     * MLA; the dense layers and their width, the shared expert's width */
    bool sigmoid;
    int64_t G, Gk;
    double scale;
    int64_t QR, KR, Dn, Dr, Dv, first_dense, Fd, Fs;
    /* GPT-OSS: each layer's attention window (0: full), read from the graph */
    int64_t win[64];
    /* The hybrid's Mamba-2 layers: heads, head size, state, convolution taps,
     * groups of heads (each with its B, C and gated-norm weights; 1:
     * hybrid.mdl); each layer's kind in order ('M' Mamba-2, '*' attention,
     * '-' a squared-ReLU MLP of width Fd: nemotron3.mdl's pattern) */
    int64_t MH, MP, MN, MK, MG;
    char kinds[128];
    /* nemotron3.mdl's MoE layers ('E', and 'L' latent: Nemotron 3 Super's,
     * the routed experts on a DL-wide projection of the hidden, ref_moe.c) */
    int64_t DL;
    /* Multi-token prediction (the DeepSeek-V3 report, section 2.2): depths
     * (DeepSeek: 0 or 1, mtp_depth; a hybrid: any, every depth running one
     * layer of the kinds mkinds, Megatron's mtp_use_repeated_layer) and
     * each depth's loss weight (lambda) */
    int64_t mtp;
    double mtp_w;
    char mkinds[16];
    int64_t nmk;
} RefConfig;

/* Sizes of MODEL.mdl through ptdc's frontend (false with a message). */
bool ref_config(const char *mdl, RefConfig *c);
/* The model's Hugging Face tensors with weights drawn from seed: matrices
 * N(0, 0.08^2), norm weights 1 + N(0, 0.2^2), biases and GPT's positions
 * N(0, 0.1^2): larger than the models' initialisation so every
 * nonlinearity, bias and norm weight matters. */
RefSt *ref_weights(const RefConfig *c, uint64_t seed);
/* One step on tokens and targets [B*S]: returns the mean loss; fills logits
 * [B*S*V] when not NULL and, when grads is not NULL (ref_st_zeros_like
 * weights), the gradient of the loss in every tensor. */
double ref_step(const RefConfig *c, const RefSt *w, const int32_t *tokens, const int32_t *targets,
                double *logits, RefSt *grads);

/* ---------------------------------------------------------- ref_moe.c */
/* The MoE block of the layer whose tensors start with prefix
 * ("model.layers.3."): y [B*S, D] from h; returns the regularisers' value. */
double ref_moe_fwd(const RefConfig *c, const RefSt *w, const char *prefix, const double *h, double *y);
/* dh overwritten; the block's gradients (router and experts) accumulate into gr. */
void ref_moe_bwd(const RefConfig *c, const RefSt *w, RefSt *gr, const char *prefix, const double *h,
                 const double *dy, double *dh);

/* -------------------------------------------------------- ref_mamba.c */
void ref_hybrid_weights(const RefConfig *c, RefSt *st, uint64_t *s);
double ref_hybrid_step(const RefConfig *c, const RefSt *w, const int32_t *tokens, const int32_t *targets,
                       double *logits, RefSt *grads);

/* ---------------------------------------------------------- ref_mla.c */
/* Multi-head latent attention of the layer under prefix: out [B*S, D] from
 * the normalised h; what it returns keeps the forward for ref_mla_bwd. */
typedef struct RefMla RefMla;
RefMla *ref_mla_fwd(const RefConfig *c, const RefSt *w, const char *prefix, const double *h, double *out);
/* dh overwritten; the attention's weight gradients accumulate into gr. */
void ref_mla_bwd(const RefConfig *c, const RefSt *w, RefSt *gr, const char *prefix, const RefMla *m,
                 const double *h, const double *dout, double *dh);
void ref_mla_free(RefMla *m);

/* The routers' choices held, as the programs' --grad-check holds them
 * (rt_route_freeze): 1 records every router call's top-k in call order,
 * 2 replays them (weights from the current scores), 0 chooses. */
void ref_moe_freeze(int mode);

/* A deterministic generator (splitmix64) for weights and tokens. */
uint64_t ref_rand(uint64_t *s);
double ref_normal(uint64_t *s);

#endif
