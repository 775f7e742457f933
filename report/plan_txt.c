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
        while (q + 1 < first + n && g->pieces[q + 1].rep >= 0 && g->pieces[q + 1].stmt == P->stmt)
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

const char *rep_axis_name(const PlanLayout *L, int a)
{
    /* dp over two axes (parallel folding): both are dp's */
    return a < 0 ? "-" : a == L->dp_axis || (L->dp_axes >> a & 1) ? "dp" : a == L->tp_axis ? "tp"
           : a == L->cp_axis ? "cp" : "-";
}

/* "axis 1 (dp inner, 8) x axis 2 (tp, 2)", or "" for no axis. */
static size_t axes_str(const Plan *p, const PlanLayout *L, uint8_t axes, char *buf, size_t n)
{
    bool split = (L->dp_axes & (L->dp_axes - 1)) != 0;
    size_t k = 0;
    buf[0] = 0;
    for (int a = 0; a < p->mesh.naxes; a++) {
        if (!(axes >> a & 1))
            continue;
        bool dp = L->dp_axes >> a & 1;
        int w = snprintf(buf + k, k < n ? n - k : 0, "%saxis %d (%s%s, %d)", k ? " x " : "", a, rep_axis_name(L, a),
                         !dp || !split ? "" : a == L->dp_axis ? " outer" : " inner", p->mesh.size[a]);
        k += w > 0 ? (size_t)w : 0;
    }
    return k;
}

const char *rep_expert_mesh_str(const Plan *p, const PlanLayout *L, char *buf, size_t n)
{
    uint8_t ea = L->ep > 1 ? L->ep_axes : 0, ta = L->etp > 1 && L->etp_axis >= 0 ? (uint8_t)(1u << L->etp_axis) : 0;
    uint8_t all = 0; /* expert-DP: the other axes */
    for (int a = 0; a < p->mesh.naxes; a++)
        all |= (uint8_t)(p->mesh.size[a] > 1 ? 1u << a : 0u);
    char e[160], t[96], d[160];
    axes_str(p, L, ea, e, sizeof e);
    axes_str(p, L, ta, t, sizeof t);
    axes_str(p, L, (uint8_t)(all & ~ea & ~ta), d, sizeof d);
    snprintf(buf, n, "ep %d%s%s; etp %d%s%s; expert-dp %d%s%s", L->ep, e[0] ? " over " : "", e, L->etp,
             t[0] ? " over " : "", t, L->edp, d[0] ? " over " : "", d);
    return buf;
}

/* A sentence under a layout line: words wrapped at 96 columns, indented
 * to the values' column. */
static void text_wrap(FILE *f, const char *s)
{
    int col = 0;
    while (*s) {
        const char *e = strchr(s, ' ');
        int w = e ? (int)(e - s) : (int)strlen(s);
        if (col == 0 || col + 1 + w > 96) {
            fprintf(f, "%s                     ", col ? "\n" : "");
            col = 21;
        } else {
            fputc(' ', f), col++;
        }
        fprintf(f, "%.*s", w, s);
        col += w;
        s += w;
        while (*s == ' ')
            s++;
    }
    fputc('\n', f);
}

static const char *axis_role(const PlanLayout *L, int a)
{
    const char *n = rep_axis_name(L, a);
    return !strcmp(n, "dp") ? "data-parallel" : !strcmp(n, "tp") ? "tensor-parallel"
           : !strcmp(n, "cp") ? "context-parallel" : NULL;
}

/* rep_axis_name, dp's two axes under parallel folding told apart. */
static const char *grid_name(const PlanLayout *L, int a)
{
    if ((L->dp_axes & (L->dp_axes - 1)) && (L->dp_axes >> a & 1))
        return a == L->dp_axis ? "dp outer" : "dp inner";
    return rep_axis_name(L, a);
}

/* Global rank = pp_rank x dev + the mesh coordinate, the inner axis fastest:
 * (i0 x d1 + i1) x d2 + i2 on a dp x cp x tp mesh. */
static void rank_grid(FILE *f, const Plan *p, const PlanLayout *L, int gpn, int host)
{
    char nodes[96]; /* where the groups sit: NVLink domains (hosts where they are one) */
    if (gpn == host)
        snprintf(nodes, sizeof nodes, "nodes of %d GPUs", gpn);
    else
        snprintf(nodes, sizeof nodes, "NVLink domains of %d GPUs, hosts of %d", gpn, host);
    const PlanMesh *m = &p->mesh;
    int na = m->naxes > 1 ? m->naxes : 2, d[PLAN_MAX_AXES], stride[PLAN_MAX_AXES];
    for (int a = 0; a < PLAN_MAX_AXES; a++)
        d[a] = a < m->naxes ? m->size[a] : 1;
    int dev = 1;
    for (int a = na - 1; a >= 0; a--)
        stride[a] = dev, dev *= d[a];
    int pp = p->pp;
    fprintf(f, "rank grid\n");
    if (na == 2)
        fprintf(f, "  global rank = pp_rank x %d + i0 x %d + i1, mesh %d x %d per pipeline rank "
                   "(axis 0 %s, axis 1 %s); %s\n", dev, d[1], d[0], d[1],
                grid_name(L, 0), grid_name(L, 1), nodes);
    else
        fprintf(f, "  global rank = pp_rank x %d + (i0 x %d + i1) x %d + i2, mesh %d x %d x %d per pipeline "
                   "rank (axis 0 %s, axis 1 %s, axis 2 %s); %s\n", dev, d[1], d[2], d[0], d[1],
                d[2], grid_name(L, 0), grid_name(L, 1), grid_name(L, 2), nodes);
    int total = dev * pp;
    int *mem = ir_xmalloc(sizeof(int) * (size_t)(total + 1));
    /* Each axis's groups, the inner one (consecutive ranks) first: member j
     * of a group is its base plus j strides, bases in rank order. */
    for (int a = na - 1; a >= 0; a--) {
        if (d[a] <= 1)
            continue;
        int n = 0;
        for (int r = 0; r < pp; r++)
            for (int b = 0; b < dev; b++)
                if ((b / stride[a]) % d[a] == 0)
                    for (int j = 0; j < d[a]; j++)
                        mem[n++] = r * dev + b + j * stride[a];
        char what[96];
        const char *role = axis_role(L, a);
        bool part = (L->dp_axes & (L->dp_axes - 1)) && (L->dp_axes >> a & 1); /* dp folded over two axes */
        if (role && part)
            snprintf(what, sizeof what, "%s groups (dp %s%s), axis %d", role, a == L->dp_axis ? "outer" : "inner",
                     L->ep > 1 && (L->ep_axes >> a & 1) ? ", experts exchanged" : L->moe ? ", expert-dp" : "", a);
        else if (role)
            snprintf(what, sizeof what, "%s groups, axis %d", role, a);
        else
            snprintf(what, sizeof what, "axis-%d groups, axis %d", a, a);
        groups(f, what, total / d[a], d[a], mem, 4);
    }
    if (pp > 1) {
        int n = 0;
        for (int i = 0; i < dev; i++)
            for (int r = 0; r < pp; r++)
                mem[n++] = r * dev + i;
        groups(f, "pipeline groups", dev, pp, mem, 4);
    }
    free(mem);
    /* The full grid when it is small enough to read: '|' between axis-0
     * coordinates (data-parallel replicas), ':' between axis-1 ones on a
     * three-axis mesh. */
    if (total <= 64 && dev > 1) {
        for (int r = 0; r < pp; r++) {
            fprintf(f, "  pipeline rank %d:", r);
            for (int i = 0; i < dev; i++) {
                if (i > 0 && i % stride[0] == 0)
                    fprintf(f, " |");
                else if (i > 0 && na > 2 && i % stride[1] == 0)
                    fprintf(f, " :");
                fprintf(f, " %d", r * dev + i);
            }
            fprintf(f, "\n");
        }
    }
}

/* --save-every N: what a save blocks the step loop for (ckpt_cost.c), with
 * the cluster keys it comes from. */
static void ckpt_lines(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassPrediction *pr,
                       int devices)
{
    PassCkptCost k;
    pass_ckpt_cost(c, g, pr, devices, &k);
    int n = c->save_every;
    fprintf(f, "  checkpoints       every %d step%s (--save-every): %.2f GB a save, %.3f GB on the "
               "busiest rank\n", n, n == 1 ? "" : "s", k.total_bytes / 1e9, k.rank_bytes / 1e9);
    if (k.sync_s < 0 || k.async_s < 0) {
        fprintf(f, "                    not priced: the cluster gives no %s (add it to a --cluster "
                   "file; docs/cost-model.md)\n",
                k.sync_s < 0 && c->cl->gpu.host_copy_bw <= 0 ? "storage_write_gbs nor host_copy_gbs"
                : k.sync_s < 0 ? "storage_write_gbs" : "host_copy_gbs");
        return;
    }
    double step = pr->step_time_s > 0 ? pr->step_time_s : 1;
    fprintf(f, "                    synchronous  %.3f s blocked a save (storage_write_gbs %g): "
               "%.4f s a step, %.2f%% of the step\n", k.sync_s,
            c->cl->gpu.storage_write_bw / 1e9, k.sync_s / n, 100 * k.sync_s / n / step);
    fprintf(f, "                    asynchronous %.3f s blocked a save (host_copy_gbs %g)%s: "
               "%.4f s a step, %.2f%% of the step; written in the background in %.3f s%s\n",
            k.async_s + k.wait_s, c->cl->gpu.host_copy_bw / 1e9,
            k.wait_s > 0 ? " with the wait for the previous write" : "", (k.async_s + k.wait_s) / n,
            100 * (k.async_s + k.wait_s) / n / step, k.write_s,
            k.wait_s > 0 ? ", longer than the steps between saves" : "");
}

void rep_plan_print_text(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchResult *r)
{
    const PassSearchAlt *a = &r->alt[0];
    const Plan *p = &a->plan;
    const PlanLayout *L = &a->layout;
    const PassPrediction *pr = &a->pred;
    const PassCluster *cl = c->cl;
    int gpn = pass_cluster_domain(cl), host = pass_cluster_host(cl);
    char buf[1024];
    fprintf(f, "ptdc plan for %s (%s)\n\n", g->name, g->path ? g->path : "-");
    /* A calibrated CPU rank sustains a tenth of a TFLOP/s in fp32: printed
     * as "0 TFLOP/s bf16" it read as a broken file. */
    double tf = cl->gpu.peak_flops / 1e12;
    /* A node is a host and an NVLink domain; NVL72 racks join hosts of 4
     * into one domain (of 72, or the part of one the GPUs fill evenly). */
    int hosts = (r->gpus + host - 1) / host;
    if (gpn == host)
        fprintf(f, "cluster\n  %d x %s, %d per node (%d node%s)", r->gpus, cl->gpu.name, host, hosts,
                hosts == 1 ? "" : "s");
    else {
        char of[32] = "";
        if (cl->nvlink_domain > gpn)
            snprintf(of, sizeof of, " (of %d)", cl->nvlink_domain);
        fprintf(f, "cluster\n  %d x %s, %d per NVLink domain%s, %d per host (%d host%s)", r->gpus,
                cl->gpu.name, gpn, of, host, hosts, hosts == 1 ? "" : "s");
    }
    fprintf(f, ": %.*f TFLOP/s %s, %.1f GiB each\n", tf >= 10 ? 0 : tf >= 1 ? 1 : 3, tf,
            cl->gpu.act_bytes == 4 ? "fp32" : "bf16", cl->gpu.hbm_bytes / GIB);
    if (rep_search_idle_note(r, gpn, buf, sizeof buf))
        fprintf(f, "  note: %s\n", buf);
    int64_t seq = g->seq_dim >= 0 ? g->dims[g->seq_dim].size : 1;
    fprintf(f, "  model: %s parameters, global batch %lld sequences of %lld tokens\n",
            ir_fmt_count(ir_param_count(g), buf, sizeof buf), (long long)r->global_batch, (long long)seq);
    /* Multi-token prediction: the losses after the model's, priced with the
     * head's piece on the last stage (docs/language.md). */
    int mtp = 0;
    double mtp_w = 0;
    for (int i = 0; i < g->nfwd; i++)
        if (g->nodes[i].op == IR_OP_CROSS_ENTROPY && g->nodes[i].out[0] != g->loss)
            mtp++, mtp_w += ir_loss_weight(&g->nodes[i].attr);
    if (mtp)
        fprintf(f, "  multi-token prediction: %d depth%s (loss weight %g in all), on the last stage with the "
                "head\n", mtp, mtp == 1 ? "" : "s", mtp_w);
    fprintf(f, "\n");

    fprintf(f, "layout\n");
    if (L->cp > 1)
        fprintf(f, "  DP %d x CP %d x TP %d x PP %d", L->dp, L->cp, L->tp, L->pp);
    else
        fprintf(f, "  DP %d x TP %d x PP %d", L->dp, L->tp, L->pp);
    if (L->replicated > 1)
        fprintf(f, " x %d replicas (a mesh axis nothing is split over: every GPU of it computes "
                   "the same)", L->replicated);
    fprintf(f, " = %d GPUs", L->gpus);
    if (L->v > 1)
        fprintf(f, ", %d model chunks per pipeline rank", L->v);
    fprintf(f, "\n  sequence parallel  %s\n", L->sp ? "on" : "off");
    if (p->tp_overlap)
        fprintf(f, "  tp overlap         chunked: each gather runs beside its GEMM's rows of this rank's block,\n"
                   "                     each reduce-scatter in %d pieces beside the GEMM's next piece\n",
                PLAN_TP_RS_SPLITS);
    if (L->cp > 1 && L->cp_balanced) /* docs/context.md (plan/shard.c, plan/context.c) */
        fprintf(f, "  context parallel   cp %d over mesh axis %d: every layer runs on %lld tokens of each\n"
                   "                     sequence, two chunks of %lld (cp rank r holds chunks r and %d - r\n"
                   "                     of %d: the causal work balanced);\n"
                   "                     attention %s\n",
                L->cp, L->cp_axis, (long long)(seq / L->cp), (long long)(seq / (2 * L->cp)), 2 * L->cp - 1,
                2 * L->cp, L->cp_ring ? "passes keys and values round the ring"
                : L->cp_a2a ? "splits its heads, q, k, v and o all-to-all" : "all-gathers keys and values");
    else if (L->cp > 1)
        fprintf(f, "  context parallel   cp %d over mesh axis %d: every layer runs on a contiguous block of\n"
                   "                     the sequence (cp rank r holds positions [r S/%d, (r+1) S/%d), %lld\n"
                   "                     tokens: a parameter runs along the sequence);\n"
                   "                     attention %s\n",
                L->cp, L->cp_axis, L->cp, L->cp, (long long)(seq / L->cp),
                L->cp_ring ? "passes keys and values round the ring"
                : L->cp_a2a ? "splits its heads, q, k, v and o all-to-all" : "all-gathers keys and values");
    if (L->moe) {
        char ex[160];
        char mesh[512];
        fprintf(f, "  experts            %s\n", plan_layout_experts_str(L, ex, sizeof ex));
        fprintf(f, "  expert mesh        %s\n", rep_expert_mesh_str(p, L, mesh, sizeof mesh));
        fprintf(f, "                     (EP over whole mesh axes, or folded: dp split as dp outer x dp inner,\n"
                   "                      EP over dp inner (and tp); expert-dp: the ranks holding the same\n"
                   "                      expert shard, over which ZeRO shards its optimizer state)\n");
    }
    if (L->cp > 1) /* weight gradients are partial over cp too: ZeRO shards over both */
        fprintf(f, "  ZeRO               stage %d over the data- and context-parallel groups (%d ranks)\n",
                L->zero, L->dp * L->cp);
    else
        fprintf(f, "  ZeRO               stage %d%s\n", L->zero, L->dp > 1 ? " over the data-parallel group" : " (no data parallelism: no effect)");
    fprintf(f, "  micro-batch        %lld sequence%s per replica (%lld over dp), %d micro-batch%s per step\n",
            (long long)L->micro_batch, L->micro_batch == 1 ? "" : "s", (long long)p->mb_seqs, p->num_micro,
            p->num_micro == 1 ? "" : "es");
    fprintf(f, "  schedule           %s\n", plan_schedule_title(L->schedule));
    fprintf(f, "  recomputation      %s\n", plan_layout_recompute_name(L));
    fprintf(f, "  attention          %s\n", p->attention == PLAN_ATTN_MATERIALIZED ? "materialized" : "flash");
    RepPrec pz;
    rep_prec(c, g, r, &pz);
    fprintf(f, "  precision          %s%s\n", plan_precision_name(pz.prec), pz.searched ? " (searched)" : "");
    text_wrap(f, pz.note);
    fprintf(f, "\n");

    /* ptdc's own plan without an ILP solve: EP below DP at tp 1, whose
     * strategies the layout fixes (docs/moe.md; passes/search src_folds). */
    bool fixed = a->nilp == 0 && !c->st.ref_stack;
    if (a->nilp > 0)
        fprintf(f, "stages (times per micro-batch from the ILP costs; memory of the pipeline rank)\n");
    else if (fixed)
        fprintf(f, "stages (times per micro-batch from the cost model's kernels, nothing resharded; memory "
                   "of the pipeline rank)\n");
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
    rank_grid(f, p, L, gpn, host);
    fprintf(f, "\n");

    if (a->nilp > 0)
        fprintf(f, "operator shardings and collectives (intra-operator ILP, one layer of each kind)\n");
    else if (fixed)
        fprintf(f, "operator shardings: fixed by the layout, no ILP (EP below DP at tp 1: every node splits "
                   "the batch over both dp axes, the routed experts exchanged over dp inner)\n");
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
    if (c->save_every > 0)
        ckpt_lines(f, g, c, pr, plan_mesh_devices(&p->mesh));
    fprintf(f, "\n");

    const PassSearchStats *st = &r->stats;
    fprintf(f, "search\n  %ld layouts, %ld ranked with the cost model, %ld pruned by step-time bounds, "
               "%ld by memory bounds; %ld of %ld meshes solved, %d ILP solves, %d cache hits\n",
            st->candidates, st->evaluated, st->pruned_time, st->pruned_mem, st->groups_solved,
            st->groups, st->ilp_solves, st->ilp_hits);
    fprintf(f, "  search time %.2f s\n", st->seconds);
}
