/* plan_txt.c: plan.txt, the chosen plan for people (docs/planner.md, "Reading
 * plan.txt"): cluster, layout, stages, rank grid, operator shardings, memory
 * and the prediction. Every number about the whole plan is pass_predict's;
 * per-stage times and the operator section are the ILP's costs. */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0

/* "embedding, layers 0-7" for pieces first..first+n-1. */
static const char *stage_pieces(const IrGraph *g, int first, int n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (int p = first; p < first + n && k < len; p++) {
        const IrPiece *P = &g->pieces[p];
        const char *sep = k ? ", " : "";
        if (P->rep < 0) {
            k += (size_t)snprintf(buf + k, len - k, "%s%s", sep, P->name);
            continue;
        }
        int q = p;
        while (q + 1 < first + n && g->pieces[q + 1].rep == P->rep)
            q++;
        if (q == p)
            k += (size_t)snprintf(buf + k, len - k, "%slayer %d", sep, P->layer);
        else
            k += (size_t)snprintf(buf + k, len - k, "%slayers %d-%d", sep, P->layer, g->pieces[q].layer);
        p = q;
    }
    return buf;
}

/* Print up to `show` groups of `size` ranks: member j of group i is
 * base(i) + j * stride; base enumerates the other coordinates. */
static void groups(FILE *f, const char *what, int ngroups, int size, const int *members, int show)
{
    fprintf(f, "  %s (%d of %d rank%s):", what, ngroups, size, size == 1 ? "" : "s");
    for (int i = 0; i < ngroups && i < show; i++) {
        fprintf(f, " [");
        for (int j = 0; j < size; j++) {
            if (size > 8 && j == 4) {
                fprintf(f, " ... %d", members[i * size + size - 1]);
                break;
            }
            fprintf(f, "%s%d", j ? " " : "", members[i * size + j]);
        }
        fprintf(f, "]");
    }
    if (ngroups > show)
        fprintf(f, " ...");
    fprintf(f, "\n");
}

static void rank_grid(FILE *f, const Plan *p, const PlanLayout *L, int gpn)
{
    const PlanMesh *m = &p->mesh;
    int d0 = m->size[0], d1 = m->naxes > 1 ? m->size[1] : 1, dev = d0 * d1, pp = p->pp;
    const char *a0 = L->dp_axis == 0 ? "dp" : L->tp_axis == 0 ? "tp" : "-";
    const char *a1 = L->dp_axis == 1 ? "dp" : L->tp_axis == 1 ? "tp" : "-";
    fprintf(f, "rank grid\n");
    fprintf(f, "  global rank = pp_rank x %d + i0 x %d + i1, mesh %d x %d per pipeline rank "
               "(axis 0 %s, axis 1 %s); nodes of %d GPUs\n", dev, d1, d0, d1, a0, a1, gpn);
    int total = dev * pp;
    int *mem = ir_xmalloc(sizeof(int) * (size_t)(total + 1));
    /* axis-1 groups: consecutive ranks */
    int n = 0;
    for (int r = 0; r < pp; r++)
        for (int i0 = 0; i0 < d0; i0++)
            for (int i1 = 0; i1 < d1; i1++)
                mem[n++] = r * dev + i0 * d1 + i1;
    char what[96];
    if (d1 > 1) {
        snprintf(what, sizeof what, "%s groups, axis 1", strcmp(a1, "tp") == 0 ? "tensor-parallel"
                 : strcmp(a1, "dp") == 0 ? "data-parallel" : "axis-1");
        groups(f, what, total / d1, d1, mem, 4);
    }
    if (d0 > 1) {
        n = 0;
        for (int r = 0; r < pp; r++)
            for (int i1 = 0; i1 < d1; i1++)
                for (int i0 = 0; i0 < d0; i0++)
                    mem[n++] = r * dev + i0 * d1 + i1;
        snprintf(what, sizeof what, "%s groups, axis 0", strcmp(a0, "dp") == 0 ? "data-parallel"
                 : strcmp(a0, "tp") == 0 ? "tensor-parallel" : "axis-0");
        groups(f, what, total / d0, d0, mem, 4);
    }
    if (pp > 1) {
        n = 0;
        for (int i = 0; i < dev; i++)
            for (int r = 0; r < pp; r++)
                mem[n++] = r * dev + i;
        groups(f, "pipeline groups", dev, pp, mem, 4);
    }
    free(mem);
    /* The full grid when it is small enough to read. */
    if (total <= 64 && dev > 1) {
        for (int r = 0; r < pp; r++) {
            fprintf(f, "  pipeline rank %d:", r);
            for (int i0 = 0; i0 < d0; i0++) {
                fprintf(f, "%s", i0 ? " |" : "");
                for (int i1 = 0; i1 < d1; i1++)
                    fprintf(f, " %d", r * dev + i0 * d1 + i1);
            }
            fprintf(f, "\n");
        }
    }
}

void rep_plan_print_text(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchResult *r)
{
    const PassSearchAlt *a = &r->alt[0];
    const Plan *p = &a->plan;
    const PlanLayout *L = &a->layout;
    const PassPrediction *pr = &a->pred;
    const PassCluster *cl = c->cl;
    int gpn = cl->gpus_per_node > 0 ? cl->gpus_per_node : 8;
    char buf[1024];
    fprintf(f, "ptdc plan for %s (%s)\n\n", g->name, g->path ? g->path : "-");
    /* A calibrated CPU rank sustains a tenth of a TFLOP/s in fp32: printed
     * as "0 TFLOP/s bf16" it read as a broken file. */
    double tf = cl->gpu.peak_flops / 1e12;
    fprintf(f, "cluster\n  %d x %s, %d per node (%d node%s): %.*f TFLOP/s %s, %.1f GiB each\n",
            r->gpus, cl->gpu.name, gpn, (r->gpus + gpn - 1) / gpn, (r->gpus + gpn - 1) / gpn == 1 ? "" : "s",
            tf >= 10 ? 0 : tf >= 1 ? 1 : 3, tf, cl->gpu.act_bytes == 4 ? "fp32" : "bf16", cl->gpu.hbm_bytes / GIB);
    if (rep_search_idle_note(r, gpn, buf, sizeof buf))
        fprintf(f, "  note: %s\n", buf);
    int64_t seq = g->seq_dim >= 0 ? g->dims[g->seq_dim].size : 1;
    fprintf(f, "  model: %s parameters, global batch %lld sequences of %lld tokens\n\n",
            ir_fmt_count(ir_param_count(g), buf, sizeof buf), (long long)r->global_batch, (long long)seq);

    fprintf(f, "layout\n");
    fprintf(f, "  DP %d x TP %d x PP %d", L->dp, L->tp, L->pp);
    if (L->replicated > 1)
        fprintf(f, " x %d replicas (a mesh axis nothing is split over: every GPU of it computes "
                   "the same)", L->replicated);
    fprintf(f, " = %d GPUs", L->gpus);
    if (L->v > 1)
        fprintf(f, ", %d model chunks per pipeline rank", L->v);
    fprintf(f, "\n  sequence parallel  %s\n", L->sp ? "on" : "off");
    if (L->moe) {
        char ex[160];
        fprintf(f, "  experts            %s\n", plan_layout_experts_str(L, ex, sizeof ex));
        fprintf(f, "                     (EP and ETP each fold over a whole mesh axis, dp or tp;\n"
                   "                      expert-dp: the ranks holding the same expert shard,\n"
                   "                      over which ZeRO shards its optimizer state)\n");
    }
    fprintf(f, "  ZeRO               stage %d%s\n", L->zero, L->dp > 1 ? " over the data-parallel group" : " (no data parallelism: no effect)");
    fprintf(f, "  micro-batch        %lld sequence%s per replica (%lld over dp), %d micro-batch%s per step\n",
            (long long)L->micro_batch, L->micro_batch == 1 ? "" : "s", (long long)p->mb_seqs, p->num_micro,
            p->num_micro == 1 ? "" : "es");
    fprintf(f, "  schedule           %s\n", L->schedule == PLAN_SCHED_INTERLEAVED ? "interleaved 1F1B" : "1F1B");
    fprintf(f, "  recomputation      %s\n", plan_layout_recompute_name(L));
    fprintf(f, "  attention          %s\n\n", p->attention == PLAN_ATTN_MATERIALIZED ? "materialized" : "flash");

    if (a->nilp > 0)
        fprintf(f, "stages (times per micro-batch from the ILP costs; memory of the pipeline rank)\n");
    else /* a framework's plan (plan_frame.c): no ILP solve */
        fprintf(f, "stages (times per micro-batch: the pipeline rank's, split evenly over its chunks; "
                   "memory of the pipeline rank)\n");
    fprintf(f, "  %-5s %-7s %-11s %-10s %9s %9s %10s  %s\n", "stage", "pp rank", "ranks", "recompute",
            "fwd ms", "bwd ms", "mem GiB", "pieces");
    int dev = plan_mesh_devices(&p->mesh);
    for (int s = 0; s < p->nstages; s++) {
        const PlanStage *S = &p->stages[s];
        char ranks[32];
        if (dev == 1)
            snprintf(ranks, sizeof ranks, "%d", S->pp_rank);
        else
            snprintf(ranks, sizeof ranks, "%d-%d", S->pp_rank * dev, S->pp_rank * dev + dev - 1);
        fprintf(f, "  %-5d %-7d %-11s %-10s %9.2f %9.2f %10.2f  %s\n", s, S->pp_rank, ranks,
                plan_recompute_name(S->recompute), a->stage_fwd_s[s] * 1e3, a->stage_bwd_s[s] * 1e3,
                pr->mem[S->pp_rank].total / GIB,
                stage_pieces(g, S->first_piece, S->npieces, buf, sizeof buf));
    }
    fprintf(f, "\n");
    rank_grid(f, p, L, gpn);
    fprintf(f, "\n");

    if (a->nilp > 0)
        fprintf(f, "operator shardings and collectives (intra-operator ILP, one layer of each kind)\n");
    else
        fprintf(f, "operator shardings: the %s stack's own tensor parallelism (docs/stacks.md), not an ILP's\n",
                c->st.name);
    for (int i = 0; i < a->nilp; i++)
        pass_ilp_print(f, a->ilp_graph ? a->ilp_graph : g, &a->ilp_q[i], a->ilp_r[i]);
    fprintf(f, "\n");

    fprintf(f, "prediction (cost model)\n");
    pass_prediction_print_text(f, g, p, c, pr);
    fprintf(f, "  bubble fraction   %.1f%% of the step\n",
            pr->step_time_s > 0 ? 100 * pr->bubble_s / pr->step_time_s : 0);
    fprintf(f, "  exposed communication %.3f s: resharding %.3f s and pipeline transfers %.3f s "
               "on the slowest rank, data parallel %.3f s not hidden by backward\n",
            pr->reshard_s + pr->p2p_s + pr->dp_exposed_s, pr->reshard_s, pr->p2p_s, pr->dp_exposed_s);
    fprintf(f, "\n");

    const PassSearchStats *st = &r->stats;
    fprintf(f, "search\n  %ld layouts, %ld ranked with the cost model, %ld pruned by step-time bounds, "
               "%ld by memory bounds; %ld of %ld meshes solved, %d ILP solves, %d cache hits\n",
            st->candidates, st->evaluated, st->pruned_time, st->pruned_mem, st->groups_solved,
            st->groups, st->ilp_solves, st->ilp_hits);
    fprintf(f, "  search time %.2f s\n", st->seconds);
}
