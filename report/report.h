/* report.h: exports of report/, what ptdc says about a search result: the
 * chosen plan written out (plan.txt, plan.json, plan.svg), --explain, and
 * the model and plan in the frameworks' words (Megatron-LM flags, torchtitan
 * job files, docs/stacks.md). Above the search: they read its result; only
 * --explain and the framework search search again. */
#ifndef PTDC_REPORT_H
#define PTDC_REPORT_H

#include "passes.h"

bool rep_search_idle_note(const PassSearchResult *r, int gpus_per_node, char *buf, size_t n);
/* The parallel dimension mesh axis a serves in the plan files: "dp", "cp",
 * "tp", or "-" (replicas, or no such axis) (plan_txt.c). */
const char *rep_axis_name(const PlanLayout *L, int a);
/* The expert mesh of a plan with experts, each group over its mesh axes:
 * "ep 8 over axis 1 (dp inner, 8); etp 1; expert-dp 4 over axis 0 (dp outer,
 * 4)" (plan_txt.c; plan.json's experts.ep_axes say the same). */
const char *rep_expert_mesh_str(const Plan *p, const PlanLayout *L, char *buf, size_t n);

/* Outputs (plan_txt.c, plan_json.c, plan_svg.c, plan_explain.c). The text is
 * plan.txt (and --emit plan); the JSON plan.json; the SVG plan.svg. */
void rep_plan_print_text(FILE *f, const IrGraph *g, const PassCostCtx *c,
                         const PassSearchResult *r);
void rep_plan_print_json(FILE *f, const IrGraph *g, const PassCostCtx *c,
                         const PassSearchResult *r);
void rep_plan_print_svg(FILE *f, const IrGraph *g, const PassCostCtx *c,
                        const PassSearchResult *r);
/* The pipeline schedule in time (plan_pipe.c). One forward or backward of
 * micro-batch mb on pipeline rank `rank`, chunk: its model chunk on that
 * rank (stage chunk * pp + rank; 0 without interleaving). */
typedef struct RepPipeOp {
    int rank;
    bool bwd;
    bool w;                       /* a split schedule's weight gradients (W; bwd is set too) */
    int mb, chunk;
    double start, end;            /* seconds from the step's start (rep_pipe_simulate) */
    bool done;
} RepPipeOp;
/* Rank r's order of m micro-batches over v chunks under schedule s
 * (plan_schedule_op's); ops gets plan_schedule_nops(s, v, m) entries. */
void rep_pipe_order(PlanSchedule s, int pp, int v, int m, int r, RepPipeOp *ops);
/* Times every op of ops[0..pp) (each in rep_pipe_order's order): it starts
 * when its rank is free and its input is there (the previous virtual
 * stage's forward, the next one's backward; a W only its rank); fwd, bwd:
 * seconds per micro-batch of each virtual stage, of bwd w (NULL: none) the
 * weight gradients a split schedule runs as W. Returns the last op's end. */
/* Each stage's W seconds per micro-batch under a's split schedule (its
 * backward's share the cost model puts in weight-gradient GEMMs, PassRankMem
 * dw_s), heap-allocated; NULL for the other schedules. */
double *rep_pipe_wgrad(const PassSearchAlt *a);
double rep_pipe_simulate(PlanSchedule s, int pp, int v, int m, const double *fwd, const double *bwd,
                         const double *w, RepPipeOp **ops);
/* The predicted timeline of the chosen plan's step as Chrome trace-event
 * JSON, like a PTDC_TRACE trace of its program (plan_trace.c, --trace-plan). */
void rep_plan_print_trace(FILE *f, const IrGraph *g, const PassCostCtx *c,
                          const PassSearchResult *r);

/* What the plan's precision buys (plan_prec.c), for the three plan files:
 * the chosen plan's step against the same layout in bf16, the GEMMs'
 * speed-up, the casts' share, which layers stay bf16, and, when
 * --precision auto kept bf16, why. */
typedef struct RepPrec {
    PlanPrecision prec;
    double step_s;                /* the plan as chosen */
    double bf16_step_s;           /* the same layout in bf16 (low precision only) */
    bool bf16_fits;
    double gemm_x;                /* bf16 GEMM seconds over the chosen format's (slowest rank) */
    double cast_s;                /* casts and amax reductions per step (slowest rank) */
    int nlayers, bf16_first, bf16_last; /* repeated layers; of them kept in bf16 at each end */
    bool searched;                /* --precision auto */
    char note[320];               /* one sentence: what it buys, or why bf16 */
} RepPrec;
void rep_prec(const PassCostCtx *c, const IrGraph *g, const PassSearchResult *r, RepPrec *out);

/* --explain: the ten best alternatives and, for the runner-up of each kind
 * (more TP, more PP, recomputation on, bigger micro-batch), which time
 * terms make it slower; runs the restricted searches it needs. */
void rep_plan_explain(FILE *f, const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                      PassIlpCache *cache, const PassSearchResult *r);

/* ------------------------------------------------ frameworks (issue 11) */
/* A refusal: the sentence into why (n bytes); returns false (plan_arch.c). */
bool rep_refuse(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The model as Megatron-LM and torchtitan describe one (plan_arch.c): a
 * decoder of pre-norm layers (alike but for dense and MoE MLPs) between a
 * token embedding and an LM head. Read back from the graph; dims are global sizes. Its properties are
 * the rows of arch.def (structure) and of ir/attrs.def (the operators'
 * attributes, read generically into attr[]): each framework emitter has a
 * handler for every row of both (report/frame_model.c runs them), so
 * an attribute the IR gains cannot be dropped by an emitter silently. */
typedef enum {
#define ARCH(ID, what) REP_ARCH_##ID,
#include "arch.def"
#undef ARCH
    REP_NARCH
} RepArchId;
extern const char *const rep_arch_what[REP_NARCH];

#define REP_MAX_LAYERS 1024 /* the most layers a mixed dense/MoE model may have */
#define REP_MAX_MTP 16      /* the most layers a hybrid's multi-token prediction depth may hold */
typedef struct RepArch {
    int layers;
    int64_t d_model, heads, kv_heads, head_dim, d_ff, vocab, seq;
    int heads_dim, kv_dim, ff_dim, vocab_dim; /* their dim ids (kv_dim == heads_dim: MHA) */
    int head_dim_dim;             /* dim id of head_dim */
    bool rmsnorm;                 /* RMSNorm; else LayerNorm with weight and bias */
    bool qk_norm;                 /* q and k each normalised per head (over head_dim) by the
                                     layers' norm kind, before the rotary embedding */
    bool rope;                    /* rotary embedding of q and k (attr[] has its attributes) */
    bool sinks;                   /* attention sinks, a [heads] parameter (GPT-OSS) */
    /* Multi-head latent attention (DeepSeek-V3; plan_arch.c read_mla): the
     * latent ranks and per-head sizes; head_dim is then qk_nope + qk_rope
     * and rope_dim_dim the rotated part's dim. */
    bool mla;
    int64_t q_lora, kv_lora, qk_nope, qk_rope, v_head;
    int rope_dim_dim;
    bool learned_pos;             /* a [seq, d_model] position table added to the embedding */
    bool swiglu;                  /* silu(h W_gate) * (h W_up); else gelu(h W_fc) (tanh form) */
    bool moe;                     /* some layers' MLP is routed experts (route, moe): d_ff and
                                     ff_dim are then each expert's width */
    int64_t n_experts;
    int expert_dim;               /* dim id of the experts (-1: dense) */
    /* The MoE layers' shared expert beside the routed ones (DeepSeek-V3's
     * MLP, Qwen2-MoE's gated one-expert moe): its width (0: none) and dim. */
    int64_t shared_ff;
    int shared_ff_dim;
    bool shared_gate;             /* scaled by sigmoid(h . w_g), a [d_model, 1] weight */
    /* A latent MoE (Nemotron 3 Super; Megatron's moe_latent_size): the
     * routed experts and their dispatch on h W_down [d_latent], the
     * combined output taken back by W_up [d_latent, d_model]; the router
     * and the shared expert on h. 0: the experts on the hidden. */
    int64_t moe_latent;
    /* An MoE model with dense layers too: how many, their MLP's width and
     * dim (-1: none), and which layers are MoE (bit l of layer_moe). */
    int n_dense;
    int64_t dense_ff;
    int dense_ff_dim;
    uint64_t layer_moe[REP_MAX_LAYERS / 64];
    bool expert_bias;             /* the routed experts have biases: fc1's inside the activation
                                     (moe's trailing inputs) and fc2's, matmul(gates, b_down)
                                     beside the moe (GPT-OSS; docs/moe.md) */
    bool bias_linear;             /* a bias on every projection */
    bool bias_qkv;                /* a bias on q, k and v (also set with bias_linear) */
    int window_skip_freq;         /* attr[ATTN_WINDOW] on every layer but each f-th (1-based layer
                                     number a multiple of f: full attention), as Megatron's
                                     --window-attn-skip-freq f (GPT-OSS: 2); 0: on every layer */
    bool tied;                    /* the LM head is the token table */
    double init_std;              /* of the query projection */
    /* A hybrid (Megatron's MambaModel, nemotron3.mdl; plan_arch.c read_hybrid):
     * each layer one mixer, its kind in pattern ('M' Mamba-2, '*' attention,
     * 'E' MoE, '-' MLP: --hybrid-override-pattern's letters); the Mamba-2
     * layers' heads, head size, groups (m_group_dim: the dim tensor
     * parallelism splits, Megatron's ngroups / tp), state and conv taps. */
    bool hybrid;
    char pattern[REP_MAX_LAYERS + 1];
    int mlp_op;                   /* a hybrid's MLP activation (its '-' layers' and shared
                                     experts': IR_OP_RELU2, IR_OP_SWIGLU, IR_OP_GELU), -1: none */
    int64_t m_heads, m_head_dim, m_groups, m_state, m_conv;
    int m_group_dim;
    bool bf16;                    /* weights in bf16 */
    /* Every attribute of the layers' and the head's operators: one value
     * each (operators of one kind must agree), has_attr where the model has
     * an operator carrying it. */
    double attr[IR_NATTRS];
    bool has_attr[IR_NATTRS];
    int table;                    /* tensor id of the token table */
    int out;                      /* internal: the last layer's output tensor */
    /* Multi-token prediction after the head (Megatron's --mtp-num-layers;
     * plan_arch.c read_mtp): its depths (0: none), the loss's weight per
     * depth (Megatron's mtp_loss_scaling_factor / mtp_num_layers), and the
     * module's own nodes (the join, the shifts, its loss) read_attrs leaves
     * to it; whether every depth runs the first depth's layer and weights
     * (Megatron's mtp_use_repeated_layer), and a hybrid's layers a depth
     * (--hybrid-layer-pattern after each '/', Megatron's letters). */
    int mtp_layers;
    double mtp_weight;
    bool mtp_repeated;
    char mtp_pattern[REP_MAX_MTP + 1];
    int mtp_first, mtp_last;      /* internal: the head's node range of the module */
} RepArch;
/* False with a sentence in why ("its MLP is neither SwiGLU ...", to follow
 * "<model> cannot be expressed: ") when the graph is not such a decoder. */
bool rep_arch_read(const IrGraph *g, RepArch *a, char *why, size_t n);

/* A framework's statement of one property (frame_model.c): flags, model
 * arguments and comment lines collected for the emitter, or a refusal. */
typedef struct RepFrameOut {
    char arg[64][REP_MAX_LAYERS + 160]; /* Megatron-LM flags (a hybrid's pattern: a letter a layer);
                                     torchtitan TransformerModelArgs keywords */
    int narg;
    char rope[6][64];             /* torchtitan RoPEScalingArgs keywords */
    int nrope;
    char note[8][256];            /* comment lines for the header */
    int nnote;
    const char *fw;               /* "Megatron-LM", "torchtitan" (refusals name it) */
    char *why;
    size_t wn;
} RepFrameOut;
typedef bool RepFrameFn(const IrGraph *g, const RepArch *a, RepFrameOut *o);
/* Each row of arch.def and each attribute the model has, in table order,
 * through the framework's handlers (an attribute flagged IR_ATTRF_OMIT0 at
 * 0 is absent: no window, no scaling); false at the first refusal (o->why). */
bool rep_frame_model(const IrGraph *g, const RepArch *a, RepFrameFn *const arch[REP_NARCH],
                     RepFrameFn *const attr[IR_NATTRS], RepFrameOut *o);
/* The comment lines, wrapped ("# ..." then "#   ..."). */
void rep_frame_print_notes(FILE *f, const RepFrameOut *o);
/* Handler helpers: add a flag / keyword, a RoPEScalingArgs keyword, a
 * comment line; refuse with "<fw> cannot express <model>: <sentence>". */
void rep_frame_arg(RepFrameOut *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rep_frame_rope(RepFrameOut *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rep_frame_note(RepFrameOut *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool rep_frame_refuse(const IrGraph *g, RepFrameOut *o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The handler tables of the two emitters (emit_megatron.c, emit_torchtitan.c). */
extern RepFrameFn *const rep_megatron_arch[REP_NARCH], *const rep_megatron_attr[IR_NATTRS];
extern RepFrameFn *const rep_torchtitan_arch[REP_NARCH], *const rep_torchtitan_attr[IR_NATTRS];

/* The plan a framework runs for a layout (plan_frame.c): Megatron-LM's
 * tensor parallelism (column-parallel q/k/v, gate/up and fc, row-parallel
 * output and down projections, a vocabulary-parallel embedding, LM head and
 * loss; with sp the norms and residual adds split the sequence) and its even
 * pipeline split (layers / (pp x v) per model chunk, the embedding with the
 * first, the head with the last). torchtitan's llama3 plan is the same
 * (ColwiseParallel/RowwiseParallel/SequenceParallel, loss_parallel,
 * pipeline_parallel_{first,last}_stage_less_layers = 0). l gives dp, tp,
 * pp, v, sp, zero, micro_batch, num_micro, schedule and one recompute
 * policy for every stage. False with a sentence when the layout cannot be
 * built that way (layers not splitting evenly, mixed recomputation). */
bool rep_plan_framework(const IrGraph *g, const RepArch *a, const PlanLayout *l, PlanAttention att,
                        int gpus_per_node, Plan *out, char *why, size_t n);
/* Is a's plan exactly the framework's plan for its layout, its pipeline
 * split (even or not: each emitter checks its framework can state it) and
 * every node's strategy? False with a sentence saying where it differs. */
bool rep_plan_matches_framework(const IrGraph *g, const RepArch *a, const PassSearchAlt *alt,
                                int gpus_per_node, char *why, size_t n);
/* The same evaluated: pass_predict's numbers for it as a search alternative
 * (layout re-derived from the strategies, per-stage times from each pipeline
 * rank's, split evenly over its chunks, no ILP solves). False with why as above. */
bool rep_framework_alt(const PassCostCtx *c, const IrGraph *g, const PlanLayout *l, PassSearchAlt *out,
                       char *why, size_t n);
/* The same with the pipeline split pinned: layers[c] layers in chunk c (the
 * embedding joins the first, the head the last); NULL: even. */
bool rep_framework_alt_cut(const PassCostCtx *c, const IrGraph *g, const PlanLayout *l, const int *layers,
                           PassSearchAlt *out, char *why, size_t n);
/* The same for a graph already read (rep_arch_read), as searches that
 * evaluate many layouts of one model call it. */
bool rep_framework_alt_of(const PassCostCtx *c, const IrGraph *g, const RepArch *a, const PlanLayout *l,
                          PassSearchAlt *out, char *why, size_t n);
/* ... and with the split (layers, NULL: even) and the strategies of the
 * meshes already planned kept in memo (NULL: none; rep_frame_memo_new). */
typedef struct RepFrameMemo RepFrameMemo;
RepFrameMemo *rep_frame_memo_new(const IrGraph *g);
void rep_frame_memo_free(RepFrameMemo *m);
bool rep_framework_alt_cut_of(const PassCostCtx *c, const IrGraph *g, const RepArch *a, RepFrameMemo *memo,
                              const PlanLayout *l, const int *layers, PassSearchAlt *out, char *why, size_t n);
/* A framework layout that does not fit, relaxed one pin at a time the way
 * search_nofit.c relaxes a search (recomputation, then the micro-batch, then
 * ZeRO, then sequence parallelism), each as the framework would run it, offered
 * by the stack: the first that fits into *out (true), else false. */
bool rep_framework_relax(const PassCostCtx *c, const IrGraph *g, const PlanLayout *l,
                         PassSearchAlt *out, char *what, size_t n);

/* Can the GPU run precision p at all (its FP8 or FP4 peak)? False with a
 * sentence naming fw ("Transformer Engine", "torchao") (plan_frame.c). */
bool rep_precision_gpu(const PassGpu *gpu, PlanPrecision p, const char *fw, char *why, size_t n);
/* The comment lines both emitters begin with: what, for which model, the
 * plan and what ptdc predicts for it (plan_frame.c). */
void rep_emit_header(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                     const char *what);
/* Can the framework's model be g at all, whatever the plan? Megatron-LM's
 * GPT: any RepArch (an integer rotary base); torchtitan's llama3: RMSNorm,
 * SwiGLU, RoPE, no biases, untied, an FFN width its rule can produce. False
 * with a sentence ("torchtitan's llama3 model cannot express gpt: ..."). */
bool rep_megatron_model(const IrGraph *g, RepArch *a, char *why, size_t n);
bool rep_torchtitan_model(const IrGraph *g, RepArch *a, char *why, size_t n);
/* The layouts the framework can run at all, whatever the model's plan
 * (emit_megatron.c, emit_torchtitan.c): ZeRO stages, recomputation, the
 * schedule's micro-batch rules, the attention kernel and gradient dtype the
 * stack prices, ... False with a sentence. The emitters check them first;
 * rep_framework_search leaves out the layouts they refuse. */
bool rep_megatron_layout(const RepArch *a, const PlanLayout *l, const PassStack *st, PlanAttention att,
                         char *why, size_t n);
bool rep_torchtitan_layout(const RepArch *a, const PlanLayout *l, const PassStack *st, PlanAttention att,
                           char *why, size_t n);
typedef bool RepFrameLayoutFn(const RepArch *a, const PlanLayout *l, const PassStack *st, PlanAttention att,
                              char *why, size_t n);

/* The framework's own space (frame_search.c): every layout of o->gpus GPUs
 * (all of them) that the framework can build for the model (tp dividing
 * the heads, the KV heads and the MLP width and at most a node unless
 * pinned; pp and v splitting the layers evenly; every micro-batch, sequence
 * parallelism, ZeRO stage and recomputation policy the stack offers, within
 * the pins of o) and that `layout_ok` accepts, each evaluated as the framework
 * lays it out (rep_framework_alt). Keeps the o->keep fastest that fit in
 * r->alt (r->found: at least one), the one closest to fitting in r->closest
 * when none does (r->have_closest), and the first refusal of layout_ok in
 * why (r->no_layout when every layout was refused or none exists).
 * Layouts provably slower than one kept (more recomputation at the same
 * micro-batch) or provably too big (a larger micro-batch than one that did
 * not fit with the same policy) are skipped, unless o->exhaustive (tests);
 * r->stats counts them. */
void rep_framework_search(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                          RepFrameLayoutFn *layout_ok, PassSearchResult *r, char *why, size_t n);

/* Emitters (emit_megatron.c, emit_torchtitan.c): the chosen plan as the
 * framework's own configuration, with a comment header saying what ptdc
 * predicts. False with a sentence in why, printing nothing, when the plan
 * uses something the framework cannot express. */
bool rep_emit_megatron(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                       char *why, size_t n);
bool rep_emit_torchtitan(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                         char *why, size_t n);

/* JSON answers (plan_json.c; docs/planner.md, "JSON answers"). A string
 * with JSON escapes; the "predicted" object of plan.json for a prediction. */
void rep_json_str(FILE *f, const char *s);
void rep_json_predicted(FILE *f, const PassPrediction *p, const char *indent);
/* The answer to a request for one layout: status ("fits", "does_not_fit",
 * "cannot_express"), the exit status it goes with, the model, cluster,
 * stack, layout and prediction (a may be NULL: no layout was evaluated),
 * the reason and notes (as ptdc says them on stderr), and what was emitted
 * (emit_name NULL: nothing). */
void rep_answer_print_json(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                           const char *status, int exit_status, const char *reason,
                           const char *const *notes, int nnotes, const char *emit_name,
                           const char *emit_text);

#endif
