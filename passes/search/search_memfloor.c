/* search_memfloor.c: the least memory per GPU that any layout of pp
 * pipeline ranks of `stage` GPUs each, tp of them on the tensor-parallel
 * axis, can need, without searching, so that pass_search_min_gpus can leave
 * out the GPU counts on which nothing can fit (docs/planner.md, "A model
 * that fits nowhere").
 *
 * Why it is a floor of pass_predict's peak:
 * - Model states. pass_predict charges a rank the states of the parameters
 *   its nodes own (pass_param_bytes3 with the plan's strategy and ZeRO
 *   stage z), plus those it reads and another stage owns. An expert's
 *   states are split at most over the stage's n GPUs. Any other parameter's
 *   are split at most tp ways (tensor parallelism; the data-parallel axis
 *   replicates them) but for what ZeRO shards over all n: the optimizer
 *   state from z = 1, the gradients from 2, the weights from 3
 *   (src_states_lb's rule, search_prune.c). Where context parallelism may
 *   split a parameter (GPT's position table along the sequence), it may
 *   take the data-parallel GPUs too: then n.
 * - ZeRO-3's gather buffers (pass_predict's buffers): twice the largest
 *   gathered piece of the rank (its weights before ZeRO's sharding, split
 *   as above), or under Megatron-FSDP's pools (zero3_pools) twice the
 *   largest layer's weights and gradients plus the other pieces' weights:
 *   at least once any piece's gathered weights.
 * - Pieces per rank. Stages are whole pieces and a rank holds pp x v of
 *   them in any order (1F1B: one contiguous run; interleaved: v runs), so
 *   with the pieces' states sorted largest first, s1 >= s2 >= ..., the j
 *   largest are spread over pp ranks and some rank holds ceil(j / pp) of
 *   them: at least s(j - ceil(j / pp) + 1) + ... + s(j), and under ZeRO-3
 *   the buffer of the fullest of its ceil(j / pp), at least the
 *   ceil(j / pp)-th least among the j (pp 1: the largest of all). And some
 *   rank holds at least 1/pp of all, with some piece's buffer.
 *   The floor under z is the largest of these; the layout's, the least over
 *   the ZeRO stages the stack runs (only 0 without data parallelism).
 * - The CUDA context and library workspaces every rank has, and the
 *   communicators every rank belongs to (pass_runtime_bytes: the world's,
 *   the pipeline's when pp > 1, one per mesh axis larger than 1: a stage of
 *   tp x (stage / tp) GPUs has a tensor axis when tp > 1 and a data (or
 *   context, or folded expert) axis when stage / tp > 1).
 * Activations, temporaries and the other buffers are left out (they depend
 * on the strategies and the schedule); what is left is a floor, not an
 * estimate. The exhaustive searches check it against pass_predict's peak of
 * every plan they rank (search.c, check_bounds), test_search memfloor
 * against the plans searches find and the leanest layouts where nothing
 * fits. */
#include "search/search.h"

#include <math.h>
#include <stdlib.h>

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

void pass_mem_floor_init(PassMemFloor *f, const PassCostCtx *c, const IrGraph *g)
{
    PlanMesh one;
    plan_mesh_make(&one, 1, 1, 8);
    PlanStrategy rep = {PLAN_NO_DIMS, 0};
    int P = g->npieces;
    f->npieces = P;
    f->sum = ir_xcalloc((size_t)P + 1, sizeof *f->sum);
    f->w = ir_xcalloc((size_t)P + 1, sizeof *f->w);
    f->gr = ir_xcalloc((size_t)P + 1, sizeof *f->gr);
    f->op = ir_xcalloc((size_t)P + 1, sizeof *f->op);
    f->x = ir_xcalloc((size_t)P + 1, sizeof *f->x);
    f->xw = ir_xcalloc((size_t)P + 1, sizeof *f->xw);
    double *s = ir_xcalloc((size_t)P + 1, sizeof *s);
    bool moe = false, scan = false;
    for (int p = 0; p < P; p++)
        for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
            const IrNode *nd = &g->nodes[n];
            double w, gr, op;
            pass_param_bytes3(c, g, nd, &one, &rep, 0, &w, &gr, &op);
            s[p] += w + gr + op;
            if (plan_expert_dim(g, nd) >= 0)
                f->x[p] += w + gr + op, f->xw[p] += w, moe = true;
            else
                f->w[p] += w, f->gr[p] += gr, f->op[p] += op;
            scan |= nd->op == IR_OP_SSD || nd->op == IR_OP_CONV1D;
        }
    qsort(s, (size_t)P, sizeof *s, cmp_desc);
    for (int p = 0; p < P; p++)
        f->sum[p + 1] = f->sum[p] + s[p];
    free(s);
    for (int z = 0; z < 4; z++)
        f->zero[z] = z == 0 || pass_stack_has_zero(&c->st, z);
    /* The search's rule for context parallelism (search.c, cp_ok): never
     * beside experts, a scan, or a materialised attention kernel. */
    f->cp = !(moe || scan || c->attention == PLAN_ATTN_MATERIALIZED);
    f->zero3_buf = c->st.zero3_pools ? 1 : 2;
    /* Every rank's context and workspaces, and one communicator (the
     * world's: pass_runtime_bytes of one GPU counts just that one). */
    f->comm = c->cl->gpu.runtime_bytes > 0 ? c->cl->gpu.comm_bytes : pass_cost_consts.nccl_comm_bytes;
    f->runtime = pass_runtime_bytes(c, &one, 1);
}

void pass_mem_floor_free(PassMemFloor *f)
{
    free(f->sum);
    free(f->w);
    free(f->gr);
    free(f->op);
    free(f->x);
    free(f->xw);
    f->sum = f->w = f->gr = f->op = f->x = f->xw = NULL;
}

double pass_mem_floor_rank(const PassMemFloor *f, int pp)
{
    int P = f->npieces;
    double t = f->sum[P] / pp;
    for (int j = 1; j <= P; j++) {
        int k = (j + pp - 1) / pp; /* of the j largest, some rank holds k */
        t = fmax(t, f->sum[j] - f->sum[j - k]);
    }
    return t;
}

double pass_mem_floor_even(const PassMemFloor *f, int pp, int stage)
{
    return pass_mem_floor_rank(f, pp) / stage + f->runtime + f->comm * ((pp > 1) + (stage > 1));
}

/* A piece's states per GPU under ZeRO z, and its gathered weights. */
typedef struct Piece {
    double s, fw;
} Piece;

static int cmp_piece(const void *a, const void *b)
{
    const Piece *x = a, *y = b;
    return (x->s < y->s) - (x->s > y->s);
}

/* The states the fullest GPU of a rank of pp holds under ZeRO z, with
 * ZeRO-3's buffer: n GPUs a stage, t the most ways a parameter outside
 * the experts splits without ZeRO. v[npieces], sum[npieces + 1] and
 * fw[npieces]: working arrays. */
static double rank_states(const PassMemFloor *f, int pp, int z, double n, double t, Piece *v, double *sum,
                          double *fw)
{
    int P = f->npieces;
    double buf = z >= 3 ? f->zero3_buf : 0, total = 0, minfw = INFINITY;
    for (int p = 0; p < P; p++) {
        v[p].s = f->w[p] / (z >= 3 ? n : t) + f->gr[p] / (z >= 2 ? n : t) + f->op[p] / (z >= 1 ? n : t) +
                 f->x[p] / n;
        v[p].fw = f->w[p] / t + f->xw[p] / n;
        total += v[p].s;
        minfw = fmin(minfw, v[p].fw);
    }
    qsort(v, (size_t)P, sizeof *v, cmp_piece);
    double best = P > 0 ? total / pp + buf * minfw : 0;
    sum[0] = 0;
    for (int j = 1; j <= P; j++) {
        /* Of the j largest, some rank holds k: at least the k smallest
         * states of them, and (ZeRO-3) the buffer of the one of its k with
         * the most gathered weights: at least the k-th least of the j. fw
         * keeps the j's gathered weights ascending. */
        int k = (j + pp - 1) / pp, i = j - 1;
        sum[j] = sum[j - 1] + v[j - 1].s;
        for (; i > 0 && fw[i - 1] > v[j - 1].fw; i--)
            fw[i] = fw[i - 1];
        fw[i] = v[j - 1].fw;
        best = fmax(best, sum[j] - sum[j - k] + buf * fw[k - 1]);
    }
    return best;
}

double pass_mem_floor_zero(const PassMemFloor *f, int pp, int tp, int stage, int zero)
{
    double n = stage, t = f->cp ? n : tp;
    int P = f->npieces;
    Piece *v = ir_xmalloc(sizeof *v * (size_t)(P + 1));
    double *sum = ir_xmalloc(sizeof *sum * (size_t)(P + 1)), *fw = ir_xmalloc(sizeof *fw * (size_t)(P + 1));
    double states = rank_states(f, pp, zero, n, t, v, sum, fw);
    free(v);
    free(sum);
    free(fw);
    return states + f->runtime + f->comm * ((pp > 1) + (tp > 1) + (stage / tp > 1));
}

double pass_mem_floor(const PassMemFloor *f, int pp, int tp, int stage)
{
    double b = INFINITY;
    for (int z = 0; z < 4; z++)
        if (f->zero[z] && (z == 0 || stage / tp > 1)) /* ZeRO needs data-parallel replicas (search.c) */
            b = fmin(b, pass_mem_floor_zero(f, pp, tp, stage, z));
    return b;
}
