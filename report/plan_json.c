/* plan_json.c: plan.json, the chosen plan for programs, and the JSON answer
 * to a request for one layout (--plan-only --json with every layout flag,
 * a layout or model that does not fit, an emitter's refusal). The keys are
 * a contract (tests/search and tests/stack check them; docs/planner.md lists
 * them): parallel.{dp, tp, pp, sp, zero, micro_batch, num_micro_batches,
 * schedule, virtual_stages, recompute}, stages[].{layers, ranks, mem_bytes,
 * time_s}, predicted.{step_time_s, tokens_per_s, mfu, peak_mem_bytes, fits,
 * memory}, search.{candidates_evaluated, seconds}, and in every answer
 * status and exit_status; with context parallelism also context.{cp,
 * cp_axis, kv, split}, a three-axis mesh and groups.axis2 (additive: a plan
 * without it prints none of them). Bytes are integers, times seconds. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>

void rep_json_str(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fprintf(f, "null");
}

void rep_json_predicted(FILE *f, const PassPrediction *pr, const char *in)
{
    fprintf(f, "{\n");
    struct {
        const char *k;
        double v;
    } kv[] = {{"step_time_s", pr->step_time_s}, {"tokens_per_s", pr->tokens_per_s}, {"mfu", pr->mfu},
              {"hfu", pr->hfu}, {"pipeline_s", pr->pipeline_s}, {"bubble_s", pr->bubble_s},
              {"bubble_fraction", pr->step_time_s > 0 ? pr->bubble_s / pr->step_time_s : 0},
              {"recompute_s", pr->recompute_s}, {"reshard_s", pr->reshard_s}, {"p2p_s", pr->p2p_s},
              {"dp_sync_s", pr->dp_sync_s}, {"dp_exposed_s", pr->dp_exposed_s},
              {"exposed_comm_s", pr->reshard_s + pr->p2p_s + pr->dp_exposed_s},
              {"optimizer_s", pr->optimizer_s}, {"gemm_s", pr->gemm_s}, {"attention_s", pr->attn_s},
              {"kernels_s", pr->kernels_s}, {"host_s", pr->host_s}, {"model_flops", pr->model_flops},
              {"hw_flops", pr->hw_flops}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        fprintf(f, "%s  \"%s\": ", in, kv[i].k);
        num(f, kv[i].v);
        fprintf(f, ",\n");
    }
    if (pr->a2a_s > 0) { /* mixture of experts: the all-to-all exchanges per step */
        fprintf(f, "%s  \"alltoall_s\": ", in);
        num(f, pr->a2a_s);
        fprintf(f, ",\n");
    }
    if (pr->a2a_overlap) { /* stack moe_a2a_overlap, where it applies: the part hidden */
        fprintf(f, "%s  \"alltoall_hidden_s\": ", in);
        num(f, pr->a2a_hidden_s);
        fprintf(f, ",\n");
    }
    if (pr->offload_layers > 0) /* activation offloading: layers, bytes both ways, copy and stall seconds */
        fprintf(f, "%s  \"offload_layers\": %d,\n%s  \"offload_bytes\": %.0f,\n%s  \"offload_copy_s\": %.9g,\n"
                   "%s  \"offload_exposed_s\": %.9g,\n", in, pr->offload_layers, in, pr->offload_bytes, in,
                pr->offload_copy_s, in, pr->offload_s);
    if (pr->host_wait_s > 0) { /* a framework's eager host (passes/cost/host.c) */
        fprintf(f, "%s  \"host_wait_s\": ", in);
        num(f, pr->host_wait_s);
        fprintf(f, ",\n");
    }
    fprintf(f, "%s  \"peak_mem_bytes\": %.0f,\n%s  \"capacity_bytes\": %.0f,\n%s  \"margin_bytes\": %.0f,\n",
            in, pr->peak_mem_bytes, in, pr->capacity_bytes, in, pr->margin_bytes);
    fprintf(f, "%s  \"peak_rank\": %d,\n%s  \"fits\": %s,\n%s  \"memory\": [\n", in, pr->peak_rank, in,
            pr->fits ? "true" : "false", in);
    for (int i = 0; i < pr->npp; i++) {
        const PassRankMem *m = &pr->mem[i];
        fprintf(f, "%s    {\"pp_rank\": %d, \"weights\": %.0f, \"grads\": %.0f, \"optimizer\": %.0f, "
                   "\"activations\": %.0f, \"inflight_micro_batches\": %g, \"recompute\": %.0f, "
                   "\"transient\": %.0f, \"buffers\": %.0f, \"runtime\": %.0f, \"fragmentation\": %.0f, "
                   "\"total\": %.0f}%s\n",
                in, i, m->weights, m->grads, m->optim, m->acts, m->inflight, m->recompute_ws, m->transient,
                m->buffers, m->runtime, m->frag, m->total, i + 1 < pr->npp ? "," : "");
    }
    fprintf(f, "%s  ]\n%s}", in, in);
}

/* The model, its batch and the cluster: the first keys of every answer. */
static void head(FILE *f, const IrGraph *g, const PassCostCtx *c, int64_t gb, int gpus, int used)
{
    const PassCluster *cl = c->cl;
    int gpn = pass_cluster_host(cl);
    fprintf(f, "  \"model\": ");
    rep_json_str(f, g->name);
    fprintf(f, ",\n  \"path\": ");
    rep_json_str(f, g->path);
    fprintf(f, ",\n  \"parameters\": %lld,\n", (long long)ir_param_count(g));
    fprintf(f, "  \"global_batch\": %lld,\n", (long long)gb);
    fprintf(f, "  \"seq\": %lld,\n", (long long)(g->seq_dim >= 0 ? g->dims[g->seq_dim].size : 1));
    fprintf(f, "  \"cluster\": {\"gpu\": ");
    rep_json_str(f, cl->gpu.name);
    /* gpus_per_node: per host; nvlink_domain: the GPUs sharing NVLink the plan
     * was placed and priced with (the same on 8-GPU hosts). */
    fprintf(f, ", \"gpus\": %d, \"gpus_per_node\": %d, \"nvlink_domain\": %d, \"gpus_used\": %d, "
               "\"peak_flops\": %.6g, \"hbm_bytes\": %.0f},\n", gpus, gpn, pass_cluster_domain(cl), used,
            cl->gpu.peak_flops, cl->gpu.hbm_bytes);
    fprintf(f, "  \"stack\": ");
    rep_json_str(f, c->st.name);
    fprintf(f, ",\n");
}

/* The mesh axes of bits `axes` as [{"axis": "dp", "mesh_axis": 1, "degree":
 * 8, "part": "inner"}, ...]: dp split over two axes (parallel folding) is
 * dp_outer x dp_inner, consecutive ranks on the inner one. */
static void axes_json(FILE *f, const Plan *p, const PlanLayout *L, uint8_t axes)
{
    bool split = (L->dp_axes & (L->dp_axes - 1)) != 0, comma = false;
    fputc('[', f);
    for (int a = 0; a < p->mesh.naxes; a++) {
        if (!(axes >> a & 1))
            continue;
        bool dp = L->dp_axes >> a & 1;
        fprintf(f, "%s{\"axis\": \"%s\", \"mesh_axis\": %d, \"degree\": %d, \"part\": \"%s\"}",
                comma ? ", " : "", rep_axis_name(L, a), a, p->mesh.size[a],
                !dp || !split ? "whole" : a == L->dp_axis ? "outer" : "inner");
        comma = true;
    }
    fputc(']', f);
}

static void parallel(FILE *f, const PlanLayout *L, const Plan *p, const PassCostCtx *c)
{
    fprintf(f, "  \"parallel\": {\"dp\": %d, \"tp\": %d, \"pp\": %d, \"sp\": %s, \"zero\": %d, "
               "\"micro_batch\": %lld, \"num_micro_batches\": %d, \"schedule\": \"%s\", "
               "\"virtual_stages\": %d, \"recompute\": \"%s\", \"attention\": \"%s\"},\n",
            L->dp, L->tp, L->pp, L->sp ? "true" : "false", L->zero, (long long)L->micro_batch,
            L->num_micro, plan_schedule_name(L->schedule), L->v,
            plan_layout_recompute_name(L), p->attention == PLAN_ATTN_MATERIALIZED ? "materialized" : "flash");
    /* Context parallelism (only when there is some: the keys above are the
     * schema every plan has): the degree, its mesh axis, and how it runs. */
    if (L->cp > 1)
        fprintf(f, "  \"context\": {\"cp\": %d, \"cp_axis\": %d, \"kv\": \"%s\", "
                   "\"split\": \"%s\"},\n", L->cp, L->cp_axis, L->cp_ring ? "ring" : L->cp_a2a ? "a2a" : "all_gather",
                L->cp_balanced ? "balanced" : "contiguous");
    /* Only when on, like "context". */
    if (p->tp_overlap)
        fprintf(f, "  \"tp_overlap\": {\"chunked\": true, \"rs_splits\": %d},\n", PLAN_TP_RS_SPLITS);
    if (L->moe) {
        uint8_t ea = L->ep > 1 ? L->ep_axes : 0, ta = L->etp > 1 && L->etp_axis >= 0 ? (uint8_t)(1u << L->etp_axis) : 0;
        uint8_t all = 0; /* expert-DP: the mesh's other axes, the ranks holding the same expert shard */
        for (int a = 0; a < p->mesh.naxes; a++)
            all |= (uint8_t)(p->mesh.size[a] > 1 ? 1u << a : 0u);
        const char *first = L->ep > 1 && L->ep_axis >= 0 ? rep_axis_name(L, L->ep_axis) : "none";
        fprintf(f, "  \"experts\": {\"ep\": %d, \"ep_axis\": \"%s\", \"ep_axes\": ", L->ep, first);
        axes_json(f, p, L, ea);
        fprintf(f, ", \"dispatcher\": \"%s\", \"etp\": %d, \"etp_axis\": \"%s\", \"etp_axes\": ",
                !L->ep_exchange                               ? "allgather"
                : c->st.moe_dispatcher == PASS_DISPATCH_FLEX ? "flex" /* priced so (stack moe_dispatcher) */
                                                              : "alltoall",
                L->etp,
                L->etp > 1 ? rep_axis_name(L, L->etp_axis) : "none");
        axes_json(f, p, L, ta);
        fprintf(f, ", \"expert_dp\": %d, \"expert_dp_axes\": ", L->edp);
        axes_json(f, p, L, (uint8_t)(all & ~ea & ~ta));
        fprintf(f, "},\n");
    }
}

void rep_answer_print_json(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a,
                           const char *status, int exit_status, const char *reason,
                           const char *const *notes, int nnotes, const char *emit_name,
                           const char *emit_text)
{
    fprintf(f, "{\n  \"status\": ");
    rep_json_str(f, status);
    fprintf(f, ",\n  \"exit_status\": %d,\n", exit_status);
    int64_t gb = a ? a->plan.mb_seqs * a->plan.num_micro : g->global_batch;
    /* Kept from the first pinned JSON: the GPU name and count at the top. */
    fprintf(f, "  \"gpu\": ");
    rep_json_str(f, c->cl->gpu.name);
    fprintf(f, ",\n  \"gpus\": %d,\n", c->cl->ngpus);
    head(f, g, c, gb, c->cl->ngpus, a ? a->layout.gpus : 0);
    if (a) {
        parallel(f, &a->layout, &a->plan, c);
        fprintf(f, "  \"predicted\": ");
        rep_json_predicted(f, &a->pred, "  ");
        fprintf(f, ",\n");
    } else {
        fprintf(f, "  \"parallel\": null,\n  \"predicted\": null,\n");
    }
    fprintf(f, "  \"reason\": ");
    rep_json_str(f, reason);
    fprintf(f, ",\n  \"notes\": [");
    for (int i = 0; i < nnotes; i++) {
        fprintf(f, "%s", i ? ", " : "");
        rep_json_str(f, notes[i]);
    }
    fprintf(f, "]");
    if (emit_name) {
        fprintf(f, ",\n  \"emit\": {\"framework\": ");
        rep_json_str(f, emit_name);
        fprintf(f, ", \"text\": ");
        rep_json_str(f, emit_text);
        fprintf(f, "}");
    }
    fprintf(f, "\n}\n");
}

/* Groups of ranks: member j of group i is at members[i * size + j]. */
static void rank_groups(FILE *f, const char *key, int n, int size, const int *members, bool comma)
{
    fprintf(f, "    \"%s\": [", key);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s[", i ? ", " : "");
        for (int j = 0; j < size; j++)
            fprintf(f, "%s%d", j ? ", " : "", members[i * size + j]);
        fprintf(f, "]");
    }
    fprintf(f, "]%s\n", comma ? "," : "");
}

/* What the precision buys (rep_prec): the format, the same layout's bf16
 * step, and under --precision auto the best step of every format tried
 * (null: none fitted). */
static void precision(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchResult *r)
{
    RepPrec z;
    rep_prec(c, g, r, &z);
    fprintf(f, "  \"precision\": {\"format\": \"%s\", \"searched\": %s, \"step_time_s\": ",
            plan_precision_name(z.prec), z.searched ? "true" : "false");
    num(f, z.step_s);
    if (z.prec != PLAN_PREC_BF16) {
        fprintf(f, ", \"bf16_step_time_s\": ");
        num(f, z.bf16_step_s);
        fprintf(f, ", \"bf16_fits\": %s, \"gemm_speedup\": ", z.bf16_fits ? "true" : "false");
        num(f, z.gemm_x);
        fprintf(f, ", \"cast_s\": ");
        num(f, z.cast_s);
    }
    fprintf(f, ", \"bf16_layers_first\": %d, \"bf16_layers_last\": %d", z.bf16_first, z.bf16_last);
    if (z.searched) {
        fprintf(f, ", \"tried\": {");
        bool first = true;
        for (int p = 0; p < PLAN_NPREC; p++)
            if (r->prec_tried >> p & 1) {
                fprintf(f, "%s\"%s\": ", first ? "" : ", ", plan_precision_name((PlanPrecision)p));
                if (r->prec_step[p] > 0)
                    num(f, r->prec_step[p]);
                else
                    fprintf(f, "null");
                first = false;
            }
        fprintf(f, "}");
    }
    fprintf(f, ", \"note\": ");
    rep_json_str(f, z.note);
    fprintf(f, "},\n");
}

void rep_plan_print_json(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchResult *r)
{
    const PassSearchAlt *a = &r->alt[0];
    const Plan *p = &a->plan;
    const PlanLayout *L = &a->layout;
    const PassPrediction *pr = &a->pred;
    const PassCluster *cl = c->cl;
    int gpn = pass_cluster_domain(cl);
    int d0 = p->mesh.size[0], d1 = p->mesh.naxes > 1 ? p->mesh.size[1] : 1, dev = d0 * d1;
    int d2 = p->mesh.naxes > 2 ? p->mesh.size[2] : 1; /* dp x cp x tp */
    dev *= d2;
    char buf[1024];

    fprintf(f, "{\n  \"status\": \"fits\",\n  \"exit_status\": 0,\n");
    head(f, g, c, r->global_batch, r->gpus, L->gpus);
    fprintf(f, "  \"idle_note\": ");
    if (rep_search_idle_note(r, gpn, buf, sizeof buf))
        rep_json_str(f, buf);
    else
        fprintf(f, "null");
    fprintf(f, ",\n");
    parallel(f, L, p, c);
    precision(f, g, c, r);
    if (p->mesh.naxes > 2)
        fprintf(f, "  \"mesh\": {\"shape\": [%d, %d, %d], \"axes\": [\"%s\", \"%s\", \"%s\"], "
                   "\"rank\": \"pp_rank * %d + (i0 * %d + i1) * %d + i2\"},\n", d0, d1, d2,
                rep_axis_name(L, 0), rep_axis_name(L, 1), rep_axis_name(L, 2), dev, d1, d2);
    else
        fprintf(f, "  \"mesh\": {\"shape\": [%d, %d], \"axes\": [\"%s\", \"%s\"], "
                   "\"rank\": \"pp_rank * %d + i0 * %d + i1\"},\n", d0, d1, rep_axis_name(L, 0),
                rep_axis_name(L, 1), dev, d1);

    fprintf(f, "  \"stages\": [\n");
    for (int s = 0; s < p->nstages; s++) {
        const PlanStage *S = &p->stages[s];
        fprintf(f, "    {\"stage\": %d, \"pp_rank\": %d, \"pieces\": [", s, S->pp_rank);
        for (int q = 0; q < S->npieces; q++) {
            fprintf(f, "%s", q ? ", " : "");
            rep_json_str(f, g->pieces[S->first_piece + q].name);
        }
        /* Layers numbered in model order over every repeat (DeepSeek-V3's MoE
         * layers after its dense ones, as Megatron-LM and Hugging Face number them). */
        fprintf(f, "], \"layers\": [");
        int k = 0, before = 0;
        for (int q = 0; q < S->first_piece; q++)
            before += g->pieces[q].layer >= 0;
        for (int q = S->first_piece; q < S->first_piece + S->npieces; q++)
            if (g->pieces[q].layer >= 0)
                fprintf(f, "%s%d", k++ ? ", " : "", before++);
        fprintf(f, "], \"ranks\": [");
        for (int i = 0; i < dev; i++)
            fprintf(f, "%s%d", i ? ", " : "", S->pp_rank * dev + i);
        fprintf(f, "], \"recompute\": \"%s\", \"mem_bytes\": %.0f, \"time_s\": ",
                plan_recompute_name(S->recompute), pr->mem[S->pp_rank].total);
        num(f, a->stage_fwd_s[s] + a->stage_bwd_s[s]);
        fprintf(f, ", \"fwd_s\": ");
        num(f, a->stage_fwd_s[s]);
        fprintf(f, ", \"bwd_s\": ");
        num(f, a->stage_bwd_s[s]);
        fprintf(f, "}%s\n", s + 1 < p->nstages ? "," : "");
    }
    fprintf(f, "  ],\n");

    /* Who talks to whom. */
    int total = dev * p->pp, n = 0;
    int *mem = ir_xmalloc(sizeof(int) * (size_t)(total + 1));
    fprintf(f, "  \"groups\": {\n");
    /* Each axis's groups, the inner one first (a third axis only on a
     * dp x cp x tp mesh): member j of a group is its base plus j strides. */
    const int size[3] = {d0, d1, d2}, stride[3] = {d1 * d2, d2, 1};
    for (int x = p->mesh.naxes > 2 ? 2 : 1; x >= 0; x--) {
        char key[16];
        n = 0;
        for (int r2 = 0; r2 < p->pp; r2++)
            for (int b = 0; b < dev; b++)
                if ((b / stride[x]) % size[x] == 0)
                    for (int j = 0; j < size[x]; j++)
                        mem[n++] = r2 * dev + b + j * stride[x];
        snprintf(key, sizeof key, "axis%d", x);
        rank_groups(f, key, total / size[x], size[x], mem, true);
    }
    n = 0;
    for (int i = 0; i < dev; i++)
        for (int r2 = 0; r2 < p->pp; r2++)
            mem[n++] = r2 * dev + i;
    rank_groups(f, "pipeline", dev, p->pp, mem, false);
    fprintf(f, "  },\n");
    free(mem);

    fprintf(f, "  \"predicted\": ");
    rep_json_predicted(f, pr, "  ");
    fprintf(f, ",\n");

    const PassSearchStats *st = &r->stats;
    fprintf(f, "  \"search\": {\"candidates_evaluated\": %ld, \"candidates\": %ld, \"pruned_time\": %ld, "
               "\"pruned_mem\": %ld, \"meshes\": %ld, \"meshes_solved\": %ld, \"ilp_solves\": %d, "
               "\"ilp_cache_hits\": %d, \"seconds\": %.6f}\n",
            st->evaluated, st->candidates, st->pruned_time, st->pruned_mem, st->groups,
            st->groups_solved, st->ilp_solves, st->ilp_hits, st->seconds);
    fprintf(f, "}\n");
}
