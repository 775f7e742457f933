/* predict_out.c: a prediction as text (--plan-only) and as JSON (--json).
 * Bytes print as GiB in text and as exact integers in JSON. */
#include "cost/cost.h"

#include <math.h>

#define GIB 1073741824.0

static const char *attn_name(const PassCostCtx *c)
{
    switch (c->st.attn_kernel) {
    case PASS_KERNEL_FLASH2: return "flash2";
    case PASS_KERNEL_FLASH1: return "flash1";
    case PASS_KERNEL_FUSED_SOFTMAX: return "fused-softmax";
    case PASS_KERNEL_EAGER: return "eager";
    case PASS_KERNEL_AUTO: break;
    }
    return c->attention == PLAN_ATTN_MATERIALIZED ? "materialized" : "flash";
}

void pass_prediction_print_text(FILE *f, const IrGraph *g, const Plan *plan,
                                const PassCostCtx *c, const PassPrediction *p)
{
    const PassGpu *gpu = &c->cl->gpu;
    int dev = plan_mesh_devices(&plan->mesh);
    fprintf(f, "prediction for %s on %d x %s\n", g->name, dev * plan->pp, gpu->name);
    char mesh[48];
    if (plan->mesh.naxes > 2) /* dp x cp x tp */
        snprintf(mesh, sizeof mesh, "%dx%dx%d", plan->mesh.size[0], plan->mesh.size[1], plan->mesh.size[2]);
    else
        snprintf(mesh, sizeof mesh, "%dx%d", plan->mesh.size[0], plan->mesh.naxes > 1 ? plan->mesh.size[1] : 1);
    fprintf(f, "  layout            mesh %s, pp %d (v %d), %d micro-batches of %lld sequences, "
               "zero %d, %s attention\n",
            mesh, plan->pp,
            plan->v > 0 ? plan->v : 1, plan->num_micro, (long long)plan->mb_seqs, plan->zero,
            attn_name(c));
    fprintf(f, "  step time         %.3f s\n", p->step_time_s);
    fprintf(f, "    pipeline        %.3f s (bubble %.3f s, recompute %.3f s, resharding %.3f s, "
               "p2p %.3f s on the slowest rank)\n",
            p->pipeline_s, p->bubble_s, p->recompute_s, p->reshard_s, p->p2p_s);
    fprintf(f, "    per micro-batch forward %.4f s, backward %.4f s (slowest rank)\n", p->stage_fwd_s,
            p->stage_bwd_s);
    fprintf(f, "    data parallel   %.3f s of traffic, %.3f s exposed\n", p->dp_sync_s,
            p->dp_exposed_s);
    fprintf(f, "    optimizer       %.3f s\n", p->optimizer_s);
    if (p->offload_layers > 0) /* stack offload_act_layers, where it applies */
        fprintf(f, "    offload         %d layers' activations to host memory and back: %.0f GB, %.3f s of "
                   "copies beside compute, %.3f s stalled\n",
                p->offload_layers, p->offload_bytes / 1e9, p->offload_copy_s, p->offload_s);
    if (p->a2a_s > 0)
        fprintf(f, "    expert all-to-all %.4g s (dispatch and combine, inside the pipeline's time)\n",
                p->a2a_s);
    if (p->a2a_overlap) /* stack moe_a2a_overlap, where it applies */
        fprintf(f, "    of which hidden %.4g s beside another micro-batch's compute (expert all-to-all "
                   "overlap)\n",
                p->a2a_hidden_s);
    if (p->host_wait_s > 0)
        fprintf(f, "    host wait       %.4g s (the GPU idle while the host launches ops, inside the "
                   "pipeline's time)\n",
                p->host_wait_s);
    fprintf(f, "  throughput        %.0f tokens/s\n", p->tokens_per_s);
    if (c->prec == PLAN_PREC_BF16)
        fprintf(f, "  MFU               %.1f%% (HFU %.1f%%)\n", 100 * p->mfu, 100 * p->hfu);
    else /* against the format's peak; the model's rate too, as published tables give it */
        fprintf(f, "  MFU               %.1f%% of the %s peak (HFU %.1f%%); %.0f model TFLOP/s per GPU\n",
                100 * p->mfu, plan_precision_name(c->prec), 100 * p->hfu,
                p->model_flops / p->step_time_s / (dev * plan->pp) / 1e12);
    double active = pass_active_params(g), all = (double)ir_param_count(g);
    if (active < all) {
        char a[32], b[32];
        fprintf(f, "                    (mixture of experts: model FLOPs count the %s active\n"
                   "                     parameters a token reads, its top-k experts, of %s)\n",
                ir_fmt_count((int64_t)active, a, sizeof a), ir_fmt_count((int64_t)all, b, sizeof b));
    }
    /* The PaLM formula (the reference runs' MFU) counts the full S x S
     * attention product, which a causal kernel halves, and 6 FLOPs per
     * parameter and token for the embedding lookup too: a small model with a
     * large vocabulary on a measured GEMM rate (a CPU cluster file) can show
     * more than 100%. Say why rather than leave it to look like a bug. */
    if (p->mfu > 1)
        fprintf(f, "                    (over 100%%: MFU's formula counts the embedding lookup as a\n"
                   "                     matmul and causal attention in full; HFU counts what runs)\n");
    fprintf(f, "  memory per GPU    peak %.2f GiB on pipeline rank %d of %.2f GiB: %s, margin "
               "%.2f GiB\n",
            p->peak_mem_bytes / GIB, p->peak_rank, p->capacity_bytes / GIB,
            p->fits ? "fits" : "DOES NOT FIT", p->margin_bytes / GIB);
    fprintf(f, "    %-4s %8s %8s %8s %8s %6s %8s %8s %8s %8s %8s %8s  (GiB)\n", "rank", "weights",
            "grads", "optim", "acts", "mbs", "recomp", "transnt", "buffers", "runtime", "frag",
            "total");
    for (int i = 0; i < p->npp; i++) {
        const PassRankMem *m = &p->mem[i];
        fprintf(f, "    %-4d %8.2f %8.2f %8.2f %8.2f %6.0f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", i,
                m->weights / GIB, m->grads / GIB, m->optim / GIB, m->acts / GIB, m->inflight,
                m->recompute_ws / GIB, m->transient / GIB, m->buffers / GIB, m->runtime / GIB,
                m->frag / GIB, m->total / GIB);
    }
}

static void num(FILE *f, const char *k, double v, bool comma)
{
    if (isfinite(v))
        fprintf(f, "    \"%s\": %.9g%s\n", k, v, comma ? "," : "");
    else
        fprintf(f, "    \"%s\": null%s\n", k, comma ? "," : "");
}

void pass_prediction_print_json(FILE *f, const IrGraph *g, const Plan *plan,
                                const PassCostCtx *c, const PassPrediction *p)
{
    int dev = plan_mesh_devices(&plan->mesh);
    fprintf(f, "{\n  \"model\": \"%s\",\n  \"gpu\": \"%s\",\n  \"gpus\": %d,\n", g->name,
            c->cl->gpu.name, dev * plan->pp);
    fprintf(f, "  \"predicted\": {\n");
    num(f, "step_time_s", p->step_time_s, true);
    num(f, "tokens_per_s", p->tokens_per_s, true);
    num(f, "mfu", p->mfu, true);
    num(f, "hfu", p->hfu, true);
    num(f, "pipeline_s", p->pipeline_s, true);
    num(f, "bubble_s", p->bubble_s, true);
    num(f, "recompute_s", p->recompute_s, true);
    num(f, "reshard_s", p->reshard_s, true);
    num(f, "p2p_s", p->p2p_s, true);
    num(f, "dp_sync_s", p->dp_sync_s, true);
    num(f, "dp_exposed_s", p->dp_exposed_s, true);
    num(f, "optimizer_s", p->optimizer_s, true);
    num(f, "gemm_s", p->gemm_s, true);
    num(f, "attention_s", p->attn_s, true);
    num(f, "kernels_s", p->kernels_s, true);
    num(f, "host_s", p->host_s, true);
    if (p->host_wait_s > 0) /* a framework's eager host (host.c) */
        num(f, "host_wait_s", p->host_wait_s, true);
    if (pass_active_params(g) < (double)ir_param_count(g)) { /* mixture of experts */
        num(f, "alltoall_s", p->a2a_s, true);
        if (p->a2a_overlap)
            num(f, "alltoall_hidden_s", p->a2a_hidden_s, true);
        num(f, "active_params", pass_active_params(g), true);
    }
    num(f, "model_flops", p->model_flops, true);
    num(f, "hw_flops", p->hw_flops, true);
    fprintf(f, "    \"peak_mem_bytes\": %.0f,\n", p->peak_mem_bytes);
    fprintf(f, "    \"capacity_bytes\": %.0f,\n", p->capacity_bytes);
    fprintf(f, "    \"margin_bytes\": %.0f,\n", p->margin_bytes);
    fprintf(f, "    \"peak_rank\": %d,\n", p->peak_rank);
    fprintf(f, "    \"fits\": %s,\n", p->fits ? "true" : "false");
    fprintf(f, "    \"memory\": [\n");
    for (int i = 0; i < p->npp; i++) {
        const PassRankMem *m = &p->mem[i];
        fprintf(f,
                "      {\"pp_rank\": %d, \"weights\": %.0f, \"grads\": %.0f, \"optimizer\": %.0f, "
                "\"activations\": %.0f, \"inflight_micro_batches\": %.0f, \"recompute\": %.0f, "
                "\"transient\": %.0f, \"buffers\": %.0f, \"runtime\": %.0f, \"fragmentation\": %.0f, "
                "\"total\": %.0f}%s\n",
                i, m->weights, m->grads, m->optim, m->acts, m->inflight, m->recompute_ws,
                m->transient, m->buffers, m->runtime, m->frag, m->total, i + 1 < p->npp ? "," : "");
    }
    fprintf(f, "    ]\n  }\n}\n");
}
