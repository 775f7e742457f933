/* search_nodestates.c: a node's model states, their ZeRO traffic per
 * micro-batch and their step end under one strategy, for the per-mesh
 * floor (search_prune.c, src_group_floor) and the variants' pieces
 * (search_ilp.c), remembered across one search.
 *
 * The whole floor prices them for every strategy of every node with
 * parameters under four ZeRO stages (pass_param_bytes; src_mb_sync:
 * pass_param_sync_s twice and pass_param_mb_s), ten passes over the node's
 * parameters each: 5% of planning DeepSeek-V3 on 2048 A100s, where its
 * 1,152 whole floors are made on 78 meshes (groups differ in the sequences
 * per replica and sequence parallelism on one mesh too).
 *
 * What they read (mem_param.c, read_params and what calls it): the node,
 * the layout the strategy gives each parameter input (plan_shard_io) and
 * its gradient's (plan_shard_grad_in; its partial axes are the parameter's
 * data-parallel group), the parameter's global sizes (parameters never
 * carry the batch dim: read_params sizes them at one sequence, so the
 * group's micro-batch is not read), the node's format (pass_prec_of), and
 * the mesh: each axis's size and members per node (the collectives'
 * groups, group_of in cost_coll.c); the cost context is the search's. So
 * the key is the node, the strategy and the whole mesh (sizes, nodes,
 * members per node): exactly what they read, or more.
 *
 * The mesh enters the key as its place among the meshes seen (a few
 * hundred), so a slot is two words and its answer, looked up in a table of
 * keys alone: the lookups, most of them answered, were half this memo's
 * cost with the whole mesh in every slot.
 *
 * PTDC_SEARCH_CHECK (src_check) prices every remembered answer again and
 * dies on a difference in any bit. */
#include "search/src.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MESHW = 1 + 3 * PLAN_MAX_AXES };

struct SrcStatesMemo {
    SrcKeyTab tab;                /* k[0]: the node and the mesh's place + 1, k[1]: the strategy;
                                     SRC_NSTATES answers */
    uint64_t *mesh;               /* [nmesh * MESHW] the meshes seen */
    int nmesh, capmesh, last;     /* last: the mesh asked last */
    long asked, hits;
};

/* src_mb_sync for a node whose model states under z are `bytes`
 * (pass_param_bytes): the floor has them already. */
static double mb_sync_bytes(const Src *s, const IrNode *n, const PlanMesh *m, const PlanStrategy *st, int z,
                            double bytes)
{
    /* As pass_predict's node_states and add_piece (passes/cost/predict.c)
     * price it: a node with parameters pays sync(z, 2 micro-batches) -
     * sync(z, 1) per micro-batch (ZeRO 2: the gradients' reduce-scatter,
     * ZeRO 3: that and two weight all-gathers), inside its stage's forward
     * and backward where the stack waits for it (ptdc's programs always, a
     * framework without dp_overlap), and ptdc's trainer runs its
     * per-micro-batch shard kernels (pass_param_mb_s) in backward. Below
     * ZeRO 2 nothing is paid per micro-batch. */
    const PassCostCtx *c = s->c;
    const IrGraph *g = s->g;
    if (z < 2 || bytes <= 0)
        return 0;
    double t = 0;
    if (!c->st.dp_overlap || !c->st.ref_stack)
        t += pass_param_sync_s(c, g, n, m, st, z, 2) - pass_param_sync_s(c, g, n, m, st, z, 1);
    if (!c->st.ref_stack)
        t += pass_param_mb_s(c, g, n, m, st, z);
    return t;
}

double src_mb_sync(const Src *s, const IrNode *n, const PlanMesh *m, const PlanStrategy *st, int z)
{
    if (z < 2)
        return 0;
    double w, gr, op;
    pass_param_bytes3(s->c, s->g, n, m, st, z, &w, &gr, &op);
    return mb_sync_bytes(s, n, m, st, z, w + gr + op);
}

/* The step end of a node with parameters under ptdc's programs, as
 * pass_predict's node_states and dp_traffic sum it: its reduction after the
 * last backward (the per-step collectives but the per-micro-batch part and
 * the weights' gather; no per-bucket latency) and its optimizer's kernels.
 * 0 under a reference stack (the search's step-end bound is ptdc's). */
static void step_end(const Src *s, const IrNode *n, const PlanMesh *m, const PlanStrategy *st, int z, double bytes,
                     double *red, double *opt)
{
    const PassCostCtx *c = s->c;
    const IrGraph *g = s->g;
    *red = *opt = 0;
    if (c->st.ref_stack || bytes <= 0)
        return;
    double s1 = pass_param_sync_s(c, g, n, m, st, z, 1);
    double s2 = z >= 2 ? pass_param_sync_s(c, g, n, m, st, z, 2) : s1;
    *red = s1 - (s2 - s1) - pass_param_gather_s(c, g, n, m, st, z);
    *opt = pass_param_step_s(c, g, n, m, st, z);
}

static void price_end(const Src *s, const IrNode *nd, const PlanMesh *m, const PlanStrategy *st, double *v)
{
    for (int z = 0; z < 4; z++)
        step_end(s, nd, m, st, z, v[z], &v[8 + z], &v[12 + z]);
}

/* The long way: v[z] pass_param_bytes under ZeRO z, v[4 + z] src_mb_sync
 * (of those bytes: pass_param_bytes is pass_param_bytes3's sum), and where
 * asked (`end`; NAN otherwise) v[8 + z] and v[12 + z] the step end's
 * reduction and optimizer (step_end): the floor has no use for them. */
static void price(const Src *s, const IrNode *nd, const PlanMesh *m, const PlanStrategy *st, bool end, double *v)
{
    for (int z = 0; z < 4; z++)
        v[z] = pass_param_bytes(s->c, s->g, nd, m, st, z);
    for (int z = 0; z < 4; z++)
        v[4 + z] = mb_sync_bytes(s, nd, m, st, z, v[z]);
    if (end)
        price_end(s, nd, m, st, v);
    else
        for (int i = 8; i < SRC_NSTATES; i++)
            v[i] = NAN;
}

/* m's place among the meshes seen (added when new): its axis count, and
 * per axis its size, the nodes a group spans and members per node. */
static int mesh_id(struct SrcStatesMemo *M, const PlanMesh *m)
{
    uint64_t w[MESHW];
    w[0] = (uint64_t)(uint32_t)m->naxes;
    for (int a = 0; a < PLAN_MAX_AXES; a++) {
        bool on = a < m->naxes;
        w[1 + 3 * a] = on ? (uint64_t)(uint32_t)m->size[a] : 0;
        w[2 + 3 * a] = on ? (uint64_t)(uint32_t)m->nodes[a] : 0;
        w[3 + 3 * a] = on ? (uint64_t)(uint32_t)m->per_node[a] : 0;
    }
    if (M->last < M->nmesh && memcmp(&M->mesh[(size_t)M->last * MESHW], w, sizeof w) == 0)
        return M->last;
    for (int i = 0; i < M->nmesh; i++)
        if (memcmp(&M->mesh[(size_t)i * MESHW], w, sizeof w) == 0)
            return M->last = i;
    if (M->nmesh == M->capmesh) {
        M->capmesh = M->capmesh ? 2 * M->capmesh : 64;
        M->mesh = ir_xrealloc(M->mesh, sizeof(uint64_t) * MESHW * (size_t)M->capmesh);
    }
    memcpy(&M->mesh[(size_t)M->nmesh * MESHW], w, sizeof w);
    return M->last = M->nmesh++;
}

bool src_reads_param(const IrGraph *g, const IrNode *nd)
{
    for (int i = 0; i < nd->nin; i++)
        if (nd->in[i] >= 0 && g->tensors[nd->in[i]].role == IR_PARAM)
            return true;
    return false;
}

void src_node_states(Src *s, const IrNode *nd, const PlanMesh *m, const PlanStrategy *st, bool end, double *v)
{
    struct SrcStatesMemo *M = s->states_memo;
    if (!M)
        M = s->states_memo = ir_xcalloc(1, sizeof *M);
    uint64_t k[2] = {(uint64_t)(uint32_t)nd->id | (uint64_t)(uint32_t)(mesh_id(M, m) + 1) << 32,
                     src_strategy_word(st)};
    bool found;
    double *ev = src_keytab_slot(&M->tab, k, SRC_NSTATES, &found);
    if (found) {
        if (end && isnan(ev[8]))
            price_end(s, nd, m, st, ev);
        memcpy(v, ev, SRC_NSTATES * sizeof *v);
        if (src_check(s)) {
            double x[SRC_NSTATES];
            price(s, nd, m, st, !isnan(ev[8]), x);
            if (memcmp(x, ev, sizeof x) != 0)
                ir_die("search: the remembered model states of node %d (%s) differ from those priced again on a "
                       "mesh of %d x %d x %d", nd->id, ir_ops[nd->op].name, m->size[0],
                       m->naxes > 1 ? m->size[1] : 1, m->naxes > 2 ? m->size[2] : 1);
        }
        return;
    }
    price(s, nd, m, st, end, v);
    memcpy(ev, v, SRC_NSTATES * sizeof *v);
}

void src_states_memo_counts(const Src *s, long *asked, long *hits)
{
    const struct SrcStatesMemo *M = s->states_memo;
    *asked = M ? M->tab.asked : 0, *hits = M ? M->tab.hits : 0;
}

void src_states_memo_free(Src *s)
{
    struct SrcStatesMemo *M = s->states_memo;
    if (M) {
        src_keytab_free(&M->tab);
        free(M->mesh);
    }
    free(M);
    s->states_memo = NULL;
}
