/* verify.c: the plan's verifier. Everything a plan must satisfy for the
 * programs to execute it, checked where a plan enters codegen (and wherever
 * one is built by hand): stages that continue one another and cover the
 * model, a schedule that fits the chunks, micro-batches that make the global
 * batch, splits the operators allow on dims the mesh divides, and the
 * recorded mesh axes of the parallel dimensions matching the strategies. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

bool plan_verify(const IrGraph *g, const Plan *p)
{
    bool ok = true;
    if (p->pp < 1 || p->v < 1 || p->nstages != p->pp * p->v || p->pp > PLAN_MAX_PP ||
        p->v > PLAN_MAX_CHUNKS || p->nstages > PLAN_MAX_STAGES) {
        ir_error(IR_NOLOC, "plan: plan has %d pipeline ranks x %d chunks but %d stages (at most "
                 "%d pipeline ranks, %d chunks each, %d stages)", p->pp, p->v, p->nstages, PLAN_MAX_PP,
                 PLAN_MAX_CHUNKS, PLAN_MAX_STAGES);
        return false;
    }
    if (p->v > 1 && (p->schedule != PLAN_SCHED_INTERLEAVED || p->num_micro % p->pp != 0)) {
        ir_error(IR_NOLOC, "plan: %d model chunks per pipeline rank need the interleaved "
                 "schedule and a number of micro-batches (%d) that is a multiple of the %d "
                 "pipeline ranks", p->v, p->num_micro, p->pp);
        return false;
    }
    if (plan_schedule_split(p->schedule) && p->v != 1) {
        ir_error(IR_NOLOC, "plan: the %s schedule runs one model chunk per pipeline rank, not %d",
                 plan_schedule_name(p->schedule), p->v);
        return false;
    }
    int next = 0;
    for (int s = 0; s < p->nstages; s++) {
        const PlanStage *st = &p->stages[s];
        if (st->first_piece != next || st->npieces < 1 || st->pp_rank != s % p->pp) {
            ir_error(IR_NOLOC, "plan: stage %d (pieces %d..%d on pipeline rank %d) does not "
                     "continue the stages before it", s, st->first_piece,
                     st->first_piece + st->npieces - 1, st->pp_rank);
            return false;
        }
        next += st->npieces;
    }
    if (next != g->npieces) {
        ir_error(IR_NOLOC, "plan: the stages cover %d of the model's %d pieces", next, g->npieces);
        return false;
    }
    if (p->num_micro < 1 || p->mb_seqs < 1 || p->mb_seqs * p->num_micro != g->global_batch) {
        ir_error(IR_NOLOC, "plan: %d micro-batches of %lld sequences do not make the global "
                 "batch of %lld", p->num_micro, (long long)p->mb_seqs, (long long)g->global_batch);
        return false;
    }
    if (p->num_micro > PLAN_MAX_MICRO) {
        ir_error(IR_NOLOC, "plan: %d micro-batches per step; the generated schedule tables "
                 "hold at most %d (a larger micro-batch makes fewer)", p->num_micro,
                 PLAN_MAX_MICRO);
        return false;
    }
    if (p->zero < 0 || p->zero > 3) {
        ir_error(IR_NOLOC, "plan: ZeRO stage %d", p->zero);
        return false;
    }
    int64_t *dim = ir_xmalloc(sizeof *dim * (size_t)(g->ndims > 0 ? g->ndims : 1));
    ir_dim_sizes(g, p->mb_seqs, dim);
    for (int i = 0; i < g->nfwd && ok; i++) {
        const PlanStrategy *s = &p->strategy[i];
        for (int a = 0; a < PLAN_MAX_AXES; a++) {
            int d = s->dim[a];
            if (d < 0)
                continue;
            int64_t ways = 1; /* a nested split divides the outer axes' shards */
            for (int b = 0; b <= a && b < p->mesh.naxes; b++)
                ways *= s->dim[b] == d ? p->mesh.size[b] : 1;
            if (a >= p->mesh.naxes || d >= g->ndims || dim[d] % ways != 0 ||
                !plan_dim_splittable(g, &g->nodes[i], d)) {
                ir_error(g->nodes[i].loc, "plan: the plan splits dim '%s' (%lld) of this %s "
                         "over mesh axis %d (%d ways), which it cannot execute",
                         d < g->ndims ? g->dims[d].name : "?", d < g->ndims ? (long long)dim[d] : 0LL,
                         ir_ops[g->nodes[i].op].name, a, a < p->mesh.naxes ? p->mesh.size[a] : 0);
                ok = false;
                break;
            }
        }
        for (int a = 0; a < PLAN_MAX_AXES && ok; a++)
            for (int b = a + 1; b < PLAN_MAX_AXES; b++)
                if (s->dim[a] >= 0 && s->dim[a] == s->dim[b] && plan_cp_a2a(g, &g->nodes[i], s) != a &&
                    !plan_seq_nested(g, &g->nodes[i], &p->mesh, s->dim[a], a, b) &&
                    !plan_batch_nested(g, &g->nodes[i], &p->mesh, s->dim[a], a, b)) {
                    ir_error(g->nodes[i].loc, "plan: one dim split over two mesh axes");
                    ok = false;
                    break;
                }
    }
    /* Context parallelism (docs/context.md): the sequence's rows are in the
     * split's order everywhere, so every attention places its queries and
     * keys by it, split over the one cp axis into whole chunks. */
    int cpa = -1;
    for (int i = 0; i < g->nfwd && ok; i++) {
        const IrNode *n = &g->nodes[i];
        int a = plan_cp_axis(g, n, &p->strategy[i]);
        if (a >= 0 && cpa < 0)
            cpa = a;
        if (a >= 0 && a != cpa) {
            ir_error(n->loc, "plan: attention splits its queries' sequence over mesh axis %d, another "
                     "over axis %d; context parallelism runs over one axis", a, cpa);
            ok = false;
        }
    }
    for (int i = 0; i < g->nfwd && ok && cpa >= 0; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op != IR_OP_ATTENTION)
            continue;
        int64_t S = dim[g->tensors[n->in[0]].dim[1]], cp = p->mesh.size[cpa];
        int64_t unit = plan_cp_balanced(g) ? 2 * cp : cp;
        if (plan_cp_axis(g, n, &p->strategy[i]) != cpa || S % unit || cp > PLAN_MAX_CP) {
            ir_error(n->loc, "plan: with context parallelism over mesh axis %d (%lld ranks, at most %d), "
                     "every attention splits its queries' sequence (or its heads) there, and the sequence (%lld) is "
                     "a multiple of %lld", cpa, (long long)cp, PLAN_MAX_CP, (long long)S,
                     (long long)unit);
            ok = false;
        }
        /* The all-to-all form: the heads over cp, the innermost axis, or
         * inside tp's block (tp splitting them too, outside: the strategy's
         * order, plan_shard_loop), k and v's heads too (GQA). */
        const PlanStrategy *st = &p->strategy[i];
        int ha = plan_cp_a2a(g, n, st);
        const IrTensor *kt = &g->tensors[n->in[1]];
        int64_t ways = cp;
        bool inner = true;
        for (int a = ha + 1; ha >= 0 && a < p->mesh.naxes; a++) {
            if (p->mesh.size[a] > 1 && st->dim[a] == st->dim[ha])
                ways *= p->mesh.size[a];
            else
                inner &= p->mesh.size[a] == 1;
        }
        if (ok && ha >= 0 && (!inner || dim[kt->dim[2]] % ways)) {
            ir_error(n->loc, "plan: attention's all-to-all context parallelism splits its heads over "
                     "the cp axis, the innermost or inside tp's heads, and its %lld key/value heads must "
                     "divide over the %lld cp x tp ranks", (long long)dim[kt->dim[2]], (long long)ways);
            ok = false;
        }
    }
    free(dim);
    if (!ok)
        return false;
    if (!p->axes_set) {
        ir_error(IR_NOLOC, "plan: the mesh axes of its parallel dimensions were never recorded");
        return false;
    }
    Plan q = *p;
    plan_axes(g, &q);
    if (memcmp(q.axis, p->axis, sizeof q.axis) != 0) {
        ir_error(IR_NOLOC, "plan: its strategies run dp along mesh axis %d, tp along %d, ep along "
                 "%d and etp along %d, not the %d, %d, %d and %d it records", q.axis[PLAN_DIM_DP],
                 q.axis[PLAN_DIM_TP], q.axis[PLAN_DIM_EP], q.axis[PLAN_DIM_ETP], p->axis[PLAN_DIM_DP],
                 p->axis[PLAN_DIM_TP], p->axis[PLAN_DIM_EP], p->axis[PLAN_DIM_ETP]);
        return false;
    }
    return true;
}
