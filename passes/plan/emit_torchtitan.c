/* emit_torchtitan.c: --emit torchtitan, the chosen plan as a torchtitan
 * job file: the [model], [training], [parallelism], [activation_checkpoint]
 * and [compile] sections of the TOML that torchtitan v0.2.2 reads with
 * --job.config_file (torchtitan/config/job_config.py; its main branch
 * replaced the TOML files with Python configurations in February 2026, and
 * keeps the same names as --parallelism.* command-line overrides). The
 * model must be one of torchtitan's llama3 models; its dimensions become a
 * flavor to register, printed as a comment. docs/stacks.md maps every key. */
#include "plan/plan.h"

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
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nc; i++) {
            double m = pass == 0 ? 0 : (double)dff / (double)h0;
            if (dff % cands[i] == 0 && ffn_width(dim, m, cands[i]) == dff) {
                *mult = m;
                *multiple_of = cands[i];
                return true;
            }
        }
    return false;
}

/* "llama2-13b" from "models/llama2-13b.mdl". */
static void flavor_name(const IrGraph *g, char *buf, size_t n)
{
    const char *p = g->path ? g->path : g->name, *s = strrchr(p, '/');
    s = s ? s + 1 : p;
    size_t k = strcspn(s, ".");
    snprintf(buf, n, "%.*s", (int)k, s);
}

bool pass_torchtitan_model(const IrGraph *g, PassArch *A, char *why, size_t wn)
{
    char sub[256];
    if (!pass_arch_read(g, A, sub, sizeof sub))
        return pass_refuse(why, wn, "torchtitan's llama3 model cannot express %s: %s", g->name, sub);
    const char *miss = !A->rmsnorm ? "LayerNorm (llama3 has RMSNorm)"
                     : !A->swiglu ? "a GELU MLP (llama3 has SwiGLU)"
                     : !A->rope ? "no rotary embedding (llama3 has RoPE)"
                     : A->learned_pos ? "a learned position table (llama3 has RoPE)"
                     : A->bias_qkv || A->bias_linear ? "biases on its projections (llama3 has none)"
                     : A->tied ? "an LM head tied to the token table (llama3's is separate)"
                     : NULL;
    if (miss)
        return pass_refuse(why, wn, "torchtitan's llama3 model cannot express %s: it has %s", g->name, miss);
    double mult;
    int64_t mof;
    if (!ffn_args(A->d_model, A->d_ff, &mult, &mof))
        return pass_refuse(why, wn, "torchtitan's llama3 model cannot express %s: its FFN width is int(8 dim "
                      "/ 3), times ffn_dim_multiplier, rounded up to multiple_of, and no such choice gives "
                      "d_ff = %lld for dim %lld", g->name, (long long)A->d_ff, (long long)A->d_model);
    return true;
}

bool pass_emit_torchtitan(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                          char *why, size_t wn)
{
    PassArch A;
    char sub[256];
    if (!pass_torchtitan_model(g, &A, why, wn))
        return false;
    double mult = 0;
    int64_t mof = 0;
    ffn_args(A.d_model, A.d_ff, &mult, &mof);
    const PassLayout *L = &a->layout;
    const PassStack *st = &c->st;
    int gpn = c->cl->gpus_per_node > 0 ? c->cl->gpus_per_node : 8;
    if (L->replicated > 1)
        return pass_refuse(why, wn, "the plan keeps %d replicas along a mesh axis it splits nothing over, "
                      "which torchtitan has no setting for", L->replicated);
    if (L->dp > 1 && L->zero == 1)
        return pass_refuse(why, wn, "the plan uses ZeRO-1; torchtitan's FSDP shards the gradients with the "
                      "optimizer state (ZeRO-2: fsdp_reshard_after_forward = \"never\") or also the "
                      "weights (ZeRO-3)");
    if (L->dp > 1 && L->zero == 0 && (L->tp > 1 || L->pp > 1))
        return pass_refuse(why, wn, "the plan replicates the weights over data parallelism (ZeRO-0) with "
                      "tensor or pipeline parallelism; torchtitan runs DDP only alone (\"DDP has not "
                      "supported > 1D parallelism\")");
    if (L->tp > 1 && !L->sp)
        return pass_refuse(why, wn, "the plan's tensor parallelism leaves the norms unsplit (--sp off); "
                      "torchtitan's llama3 always shards them over the sequence (SequenceParallel)");
    if (L->tp > 1 && A.seq % L->tp)
        return pass_refuse(why, wn, "torchtitan's tensor parallelism needs the sequence (%lld) divisible by "
                      "the degree %d", (long long)A.seq, L->tp);
    const char *rc = pass_layout_recompute_name(L);
    if (!strcmp(rc, "mixed"))
        return pass_refuse(why, wn, "the plan recomputes some pipeline stages and not others; torchtitan "
                      "applies one activation checkpointing mode to every layer");
    if (!strcmp(rc, "selective") || !strcmp(rc, "ffn"))
        return pass_refuse(why, wn, "the plan recomputes %s; torchtitan's selective activation checkpointing "
                      "is per-op (it saves matmul and attention outputs) or every n-th layer, neither "
                      "of which recomputes just that", !strcmp(rc, "ffn") ? "the MLP" : "core attention");
    if (st->attn_kernel == PASS_KERNEL_FLASH1 || st->attn_kernel == PASS_KERNEL_FUSED_SOFTMAX ||
        st->attn_kernel == PASS_KERNEL_EAGER ||
        (st->attn_kernel == PASS_KERNEL_AUTO && a->plan.attention == PASS_ATTN_MATERIALIZED))
        return pass_refuse(why, wn, "the stack prices another attention kernel than the FlashAttention-2 "
                      "that torchtitan's scaled_dot_product_attention runs");
    if (st->grad_bytes == 2 || (st->grad_bytes == 0 && A.bf16))
        return pass_refuse(why, wn, "the stack keeps and reduces gradients in bf16 (grad_bytes = %d); "
                      "torchtitan's mixed_precision_reduce is float32 only", st->grad_bytes);
    if (!pass_plan_matches_framework(g, &A, a, gpn, sub, sizeof sub))
        return pass_refuse(why, wn, "torchtitan cannot express the plan: %s", sub);

    char flavor[64];
    flavor_name(g, flavor, sizeof flavor);
    int64_t gb = L->micro_batch * L->dp * L->num_micro;
    pass_emit_header(f, g, c, a, "torchtitan job file (v0.2.2, --job.config_file)");
    fprintf(f, "# torchtitan's main branch takes the same values as --parallelism.*, --training.* and\n"
               "#   --activation_checkpoint.* overrides of a Python configuration.\n");
    fprintf(f, "# Register the model as a llama3 flavor (torchtitan/models/llama3/__init__.py, llama3_args):\n");
    fprintf(f, "#   \"%s\": TransformerModelArgs(dim=%lld, n_layers=%d, n_heads=%lld, n_kv_heads=%lld,\n",
            flavor, (long long)A.d_model, A.layers, (long long)A.heads, (long long)A.kv_heads);
    fprintf(f, "#       vocab_size=%lld, multiple_of=%lld,", (long long)A.vocab, (long long)mof);
    if (mult > 0)
        fprintf(f, " ffn_dim_multiplier=%.17g,", mult);
    fprintf(f, " norm_eps=%g, rope_theta=%g,\n", A.norm_eps, A.rope_theta);
    fprintf(f, "#       rope_scaling_args=RoPEScalingArgs(scaling_factor=1.0)),  # no Llama 3.1 scaling\n");
    if (L->dp > 1 && L->zero == 0)
        fprintf(f, "# Under DDP torchtitan keeps fp32 weights and runs under autocast; the stack prices bf16\n"
                   "#   weights beside fp32 master weights.\n");
    if (st->reshard_overlap > 0)
        fprintf(f, "# The stack hides tensor-parallel communication (reshard_overlap); torchtitan does that\n"
                   "#   with enable_async_tensor_parallel under torch.compile, which this file leaves off.\n");
    fprintf(f, "\n[model]\nname = \"llama3\"\nflavor = \"%s\"\n", flavor);
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
    fprintf(f, "data_parallel_replicate_degree = %d\n", fsdp || L->dp == 1 ? 1 : L->dp);
    fprintf(f, "data_parallel_shard_degree = %d\n", fsdp ? L->dp : 1);
    if (fsdp)
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
    fprintf(f, "context_parallel_degree = 1\n");
    fprintf(f, "\n[activation_checkpoint]\nmode = \"%s\"\n", !strcmp(rc, "full") ? "full" : "none");
    fprintf(f, "\n[compile]\nenable = false\n");
    return true;
}
