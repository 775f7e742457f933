/* ilp_print.c: a stage's sharding plan for people: each operator of each
 * distinct piece with its tensors' shardings in the usual notation
 * (wq[d_model, n_heads/tp, head_dim], x[batch/dp, seq/sp, d_model]), the
 * collectives with their sizes and times, forward and backward, and the
 * objective, memory and size and quality of the ILP solve. */
#include "ilp/ilp.h"

#include <math.h>
#include <string.h>

#define GIB 1073741824.0

/* Axis names for tensor t under sh: a sequence split on a tp axis is "sp"
 * (sequence parallelism), on a cp axis "cp" (context parallelism). */
static const char *shard_str(const IrGraph *g, const PassIlpResult *r, int t, const PlanSharding *sh,
                             char *buf, size_t n)
{
    const char *names[PLAN_MAX_AXES];
    for (int a = 0; a < PLAN_MAX_AXES; a++) {
        names[a] = r->axis_name[a];
        if (sh->dim[a] >= 0 && sh->dim[a] == g->seq_dim && strcmp(names[a], "tp") == 0)
            names[a] = "sp";
    }
    return plan_sharding_str(g, t, sh, names, buf, n);
}

static void print_node(FILE *f, const IrGraph *g, const PassIlpResult *r, int n)
{
    const IrNode *nd = &g->nodes[n];
    const PlanStrategy *s = &r->strategy[n - r->first_node];
    PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
    plan_shard_io(g, nd, s, in, out);
    char buf[256];
    fprintf(f, "    %-13s %s", ir_ops[nd->op].name, shard_str(g, r, nd->out[0], &out[0], buf, sizeof buf));
    fprintf(f, " <-");
    for (int i = 0; i < nd->nin; i++)
        fprintf(f, "%s %s", i ? "," : "", shard_str(g, r, nd->in[i], &in[i], buf, sizeof buf));
    /* Exchanges inside the op: context parallelism's ring (k, v blocks
     * passed round the cp ranks; docs/context.md); its all-to-all form's
     * exchanges are the collectives around the op, named so here. */
    if (plan_cp_ring(g, nd, s))
        fprintf(f, " (k, v round the %s ring)", r->axis_name[plan_cp_axis(g, nd, s)]);
    else if (plan_cp_a2a(g, nd, s) >= 0)
        fprintf(f, " (heads over %s: all-to-all)", r->axis_name[plan_cp_a2a(g, nd, s)]);
    fprintf(f, "\n");
}

static const char *axis_of(const PassIlpResult *r, const PlanColl *c)
{
    return c->axis >= 0 && c->axis < PLAN_MAX_AXES ? r->axis_name[c->axis] : "?";
}

static void print_coll(FILE *f, const IrGraph *g, const PassIlpResult *r, const PassIlpColl *c)
{
    const IrTensor *t = &g->tensors[c->tensor];
    double bytes = (double)c->coll.numel * ir_dtype_bytes(t->dtype);
    char to[96];
    if (c->consumer >= 0)
        snprintf(to, sizeof to, "%s %s", c->bwd ? "from" : "to", ir_ops[g->nodes[c->consumer].op].name);
    else
        snprintf(to, sizeof to, "%s the layer boundary", c->bwd ? "from" : "to");
    fprintf(f, "    %s %-14s %-2s %-12s %9.3f MB %9.4f ms x%-4d %s%s\n", c->bwd ? "bwd" : "fwd",
            plan_coll_name(c->coll.kind), axis_of(r, &c->coll), t->base, bytes / 1e6,
            c->seconds * 1e3, c->count, to, !c->regather                            ? ""
            : c->coll.kind == PLAN_COLL_ALLGATHER ? " (re-gather of the kept shard)"
                                                  : " (again from the kept copy)");
}

void pass_ilp_print(FILE *f, const IrGraph *g, const PassIlpQuery *q, const PassIlpResult *r)
{
    const PlanMesh *m = &q->mesh;
    int p0 = q->first_piece, p1 = q->first_piece + q->npieces;
    if (m->naxes > 2) /* dp x cp x tp */
        fprintf(f, "stage: pieces %d..%d ('%s' .. '%s'), mesh %dx%dx%d (axis 0: %s, axis 1: %s, axis 2: %s)\n",
                p0, p1 - 1, g->pieces[p0].name, g->pieces[p1 - 1].name, m->size[0], m->size[1], m->size[2],
                r->axis_name[0], r->axis_name[1], r->axis_name[2]);
    else
        fprintf(f, "stage: pieces %d..%d ('%s' .. '%s'), mesh %dx%d (axis 0: %s, axis 1: %s)\n", p0,
                p1 - 1, g->pieces[p0].name, g->pieces[p1 - 1].name, m->size[0], m->size[1],
                r->axis_name[0], r->axis_name[1]);
    fprintf(f, "  %lld sequences per micro-batch, %d micro-batches, ZeRO %d, recompute %s, %g in flight\n",
            (long long)q->mb_seqs, q->num_micro, q->zero, plan_recompute_name(q->recompute),
            q->inflight);
    if (r->unique)
        fprintf(f, "  ILP: %d operators, %d after merging; the unique fastest choice by elimination; "
                "built in %.1f ms, solved in %.1f ms: %s, gap %.2g%%\n",
                r->ninst, r->ninst_merged, r->build_s * 1e3, r->solve_s * 1e3, ilp_status_name(r->status),
                r->gap * 100);
    else if (r->frontier_points)
        fprintf(f, "  ILP: %d operators, %d after merging; from the stage's time/memory frontier (%d "
                "points); built in %.1f ms, solved in %.1f ms: %s, gap %.2g%%\n",
                r->ninst, r->ninst_merged, r->frontier_points, r->build_s * 1e3, r->solve_s * 1e3,
                ilp_status_name(r->status), r->gap * 100);
    else
        fprintf(f, "  ILP: %d operators, %d after merging; %d variables (%d binary), %d constraints; "
                "built in %.1f ms, solved in %.1f ms: %s, gap %.2g%%\n",
                r->ninst, r->ninst_merged, r->nvars, r->nbin, r->nrows, r->build_s * 1e3,
                r->solve_s * 1e3, ilp_status_name(r->status), r->gap * 100);
    if (!r->feasible) {
        fprintf(f, "  no plan fits %.2f GiB per device\n", q->budget / GIB);
        return;
    }
    fprintf(f, "  step %.4f s = %d x (fwd %.3f ms + bwd %.3f ms) + sync %.3f ms\n", r->step_s,
            q->num_micro, r->fwd_s * 1e3, r->bwd_s * 1e3, r->sync_s * 1e3);
    fprintf(f, "  memory %.2f GiB per device (parameter state %.2f, activations %.2f)", r->mem_bytes / GIB,
            r->param_bytes / GIB, r->act_bytes / GIB);
    if (q->budget > 0)
        fprintf(f, " of %.2f GiB", q->budget / GIB);
    fprintf(f, "\n");
    /* Each distinct piece once, with how often it occurs. */
    for (int p = p0; p < p1; p++) {
        const IrPiece *pc = &g->pieces[p];
        bool first = true;
        int count = 1;
        for (int k = p0; k < p1; k++)
            if (k != p && pc->rep >= 0 && g->pieces[k].rep == pc->rep) {
                first &= k > p;
                count++;
            }
        if (!first)
            continue;
        fprintf(f, "  piece '%s'%s", pc->name, count > 1 ? "" : ":\n");
        if (count > 1)
            fprintf(f, " (and %d more like it):\n", count - 1);
        for (int n = pc->first; n < pc->first + pc->count; n++)
            print_node(f, g, r, n);
    }
    if (r->has_boundary) {
        char buf[256];
        int t = -1;
        for (int n = r->first_node; n < r->first_node + r->nnodes && t < 0; n++)
            for (int i = 0; i < g->nodes[n].nin && t < 0; i++) {
                int x = g->nodes[n].in[i];
                bool fits = g->tensors[x].role == IR_ACT;
                for (int a = 0; a < PLAN_MAX_AXES; a++)
                    fits &= r->boundary.dim[a] < 0 || ir_tensor_has_dim(g, x, r->boundary.dim[a]);
                if (fits)
                    t = x;
            }
        if (t >= 0)
            fprintf(f, "  layer boundary: %s\n", shard_str(g, r, t, &r->boundary, buf, sizeof buf));
    }
    fprintf(f, "  collectives per micro-batch (xN: times per micro-batch on this stage):\n");
    if (r->ncoll == 0)
        fprintf(f, "    none\n");
    for (int bwd = 0; bwd < 2; bwd++)
        for (int i = 0; i < r->ncoll; i++)
            if (r->coll[i].bwd == bwd)
                print_coll(f, g, r, &r->coll[i]);
}
