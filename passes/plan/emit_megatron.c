/* emit_megatron.c: --emit megatron, the chosen plan as Megatron-LM
 * (Megatron-Core) command-line flags for pretrain_gpt.py. The flags are
 * those of megatron/training/arguments.py and the config dataclasses it
 * builds them from (TransformerConfig, ModelParallelConfig); docs/stacks.md
 * maps them one by one. What the flags cannot state is refused before
 * anything is printed. */
#include "plan/plan.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* One "    --flag [value] \" line; the last line has no backslash, so the
 * flags are collected first. */
typedef struct Args {
    char line[64][96];
    int n;
} Args;

static void arg(Args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(Args *a, const char *fmt, ...)
{
    if (a->n == 64)
        ir_die("emit_megatron: too many flags");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->line[a->n++], sizeof a->line[0], fmt, ap);
    va_end(ap);
}

bool pass_megatron_model(const IrGraph *g, PassArch *A, char *why, size_t wn)
{
    char sub[256];
    if (!pass_arch_read(g, A, sub, sizeof sub))
        return pass_refuse(why, wn, "Megatron-LM's GPT model cannot express %s: %s", g->name, sub);
    if (A->rope && A->rope_theta != floor(A->rope_theta))
        return pass_refuse(why, wn, "Megatron-LM's GPT model cannot express %s: its rotary base %g is not "
                      "an integer, which --rotary-base requires", g->name, A->rope_theta);
    return true;
}

bool pass_emit_megatron(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                        char *why, size_t wn)
{
    PassArch A;
    char sub[256];
    if (!pass_megatron_model(g, &A, why, wn))
        return false;
    const PassLayout *L = &a->layout;
    const PassStack *st = &c->st;
    int gpn = c->cl->gpus_per_node > 0 ? c->cl->gpus_per_node : 8;
    if (L->replicated > 1)
        return pass_refuse(why, wn, "the plan keeps %d replicas along a mesh axis it splits nothing over, "
                      "which Megatron-LM has no flag for", L->replicated);
    if (L->zero >= 2)
        return pass_refuse(why, wn, "the plan uses ZeRO-%d; Megatron-LM's distributed optimizer "
                      "(--use-distributed-optimizer) shards only the optimizer state (ZeRO-1)", L->zero);
    if (!strcmp(pass_layout_recompute_name(L), "mixed"))
        return pass_refuse(why, wn, "the plan recomputes some pipeline stages and not others; Megatron-LM's "
                      "--recompute-method block recomputes the same number of layers on every stage");
    if (!pass_plan_matches_framework(g, &A, a, gpn, sub, sizeof sub))
        return pass_refuse(why, wn, "Megatron-LM cannot express the plan: %s", sub);
    if (st->attn_kernel == PASS_KERNEL_FLASH1)
        return pass_refuse(why, wn, "the stack prices FlashAttention-1 (attention_kernel = flash1); current "
                      "Megatron-LM runs FlashAttention-2 or later (--attention-backend flash)");

    Args x = {.n = 0};
    /* Parallelism and batch. */
    arg(&x, "--tensor-model-parallel-size %d", L->tp);
    arg(&x, "--pipeline-model-parallel-size %d", L->pp);
    if (L->v > 1)
        arg(&x, "--num-layers-per-virtual-pipeline-stage %d", A.layers / (L->pp * L->v));
    if (L->sp && L->tp > 1)
        arg(&x, "--sequence-parallel");
    arg(&x, "--micro-batch-size %lld", (long long)L->micro_batch);
    arg(&x, "--global-batch-size %lld", (long long)(L->micro_batch * L->dp * L->num_micro));
    /* Recomputation. */
    switch (a->plan.stages[0].recompute) {
    case PASS_RECOMPUTE_NONE: break;
    case PASS_RECOMPUTE_SELECTIVE:
        arg(&x, "--recompute-granularity selective");
        arg(&x, "--recompute-modules core_attn");
        break;
    case PASS_RECOMPUTE_FFN:
        arg(&x, "--recompute-granularity selective");
        arg(&x, "--recompute-modules mlp");
        break;
    case PASS_RECOMPUTE_FULL:
        arg(&x, "--recompute-granularity full");
        arg(&x, "--recompute-method uniform");
        arg(&x, "--recompute-num-layers 1");
        break;
    }
    /* Data parallelism as the stack prices it. */
    if (L->zero == 1 && L->dp > 1)
        arg(&x, "--use-distributed-optimizer");
    if (st->dp_overlap && L->dp > 1) {
        arg(&x, "--overlap-grad-reduce");
        if (L->zero == 1)
            arg(&x, "--overlap-param-gather");
    }
    if (st->grad_bytes == 2 || (st->grad_bytes == 0 && A.bf16)) /* 0: as the weights */
        arg(&x, "--grad-reduce-in-bf16");
    if (st->grad_accum_unfused)
        arg(&x, "--no-gradient-accumulation-fusion");
    if (st->reshard_overlap > 0 && L->sp && L->tp > 1)
        arg(&x, "--tp-comm-overlap");
    /* The model. */
    arg(&x, "--num-layers %d", A.layers);
    arg(&x, "--hidden-size %lld", (long long)A.d_model);
    arg(&x, "--ffn-hidden-size %lld", (long long)A.d_ff);
    arg(&x, "--num-attention-heads %lld", (long long)A.heads);
    if (A.kv_heads != A.heads) {
        arg(&x, "--group-query-attention");
        arg(&x, "--num-query-groups %lld", (long long)A.kv_heads);
    }
    if (A.head_dim * A.heads != A.d_model)
        arg(&x, "--kv-channels %lld", (long long)A.head_dim);
    arg(&x, "--seq-length %lld", (long long)A.seq);
    arg(&x, "--max-position-embeddings %lld", (long long)A.seq);
    if (A.rope) {
        arg(&x, "--position-embedding-type rope");
        arg(&x, "--rotary-base %.0f", A.rope_theta);
    } else {
        arg(&x, "--position-embedding-type %s", A.learned_pos ? "learned_absolute" : "none");
    }
    arg(&x, "--normalization %s", A.rmsnorm ? "RMSNorm" : "LayerNorm");
    arg(&x, "--norm-epsilon %g", A.norm_eps);
    if (A.swiglu)
        arg(&x, "--swiglu");
    else
        arg(&x, "--openai-gelu");
    if (!A.bias_linear) {
        arg(&x, "--disable-bias-linear");
        if (A.bias_qkv)
            arg(&x, "--add-qkv-bias");
    }
    if (!A.tied)
        arg(&x, "--untie-embeddings-and-output-weights");
    arg(&x, "--attention-dropout 0.0");
    arg(&x, "--hidden-dropout 0.0");
    arg(&x, "--init-method-std %g", A.init_std);
    if (A.bf16)
        arg(&x, "--bf16");
    /* Kernels as the stack prices them. */
    bool flash = st->attn_kernel == PASS_KERNEL_FLASH2 ||
                 (st->attn_kernel == PASS_KERNEL_AUTO && a->plan.attention == PASS_ATTN_FLASH);
    arg(&x, "--attention-backend %s", flash ? "flash" : "unfused");
    if (st->attn_kernel == PASS_KERNEL_EAGER)
        arg(&x, "--no-masked-softmax-fusion");

    pass_emit_header(f, g, c, a, "Megatron-LM (Megatron-Core) flags");
    if (st->norm_unfused)
        fprintf(f, "# The stack prices unfused norms (norm_unfused = yes); Megatron-LM with Transformer\n"
                   "#   Engine fuses them, so expect less memory and time than predicted there.\n");
    if (st->swiglu_unfused)
        fprintf(f, "# The stack prices an unfused SwiGLU (swiglu_unfused = yes); Megatron-LM fuses it\n"
                   "#   (bias_swiglu_fusion), so expect less memory and time than predicted there.\n");
    if (!st->loss_fp32)
        fprintf(f, "# The stack prices a loss in bf16 (loss_fp32 = no); Megatron-LM's vocabulary-parallel\n"
                   "#   cross-entropy computes it in fp32.\n");
    if (st->reshard_overlap > 0 && !(L->sp && L->tp > 1))
        fprintf(f, "# The stack hides tensor-parallel communication (reshard_overlap), which Megatron-LM's\n"
                   "#   --tp-comm-overlap does only with --sequence-parallel.\n");
    fprintf(f, "# Add your data, tokenizer and training flags (--data-path, --tokenizer-type, --lr,\n"
               "#   --train-iters, ...) and torchrun's rendezvous flags. The model's vocabulary is %lld;\n"
               "#   Megatron-LM pads the tokenizer's to a multiple of 128 x %d (--make-vocab-size-divisible-by).\n",
            (long long)A.vocab, L->tp);
    int gpus = L->gpus, nodes = gpus >= gpn ? gpus / gpn : 1, per = gpus >= gpn ? gpn : gpus;
    fprintf(f, "torchrun --nproc-per-node %d --nnodes %d pretrain_gpt.py \\\n", per, nodes);
    for (int i = 0; i < x.n; i++)
        fprintf(f, "    %s%s\n", x.line[i], i + 1 < x.n ? " \\" : "");
    return true;
}
