/* search_memfloor.c: the least memory per GPU that any layout of pp
 * pipeline ranks of `stage` GPUs each, tp of them on the tensor-parallel
 * axis, can need, without searching, so that pass_search_min_gpus can leave
 * out the GPU counts on which nothing can fit (docs/planner.md, "A model
 * that fits nowhere"), and every search the candidates of a layout above it
 * (search.c, above_floor).
 *
 * Why it is a floor of pass_predict's peak:
 * - Model states. pass_predict charges a rank the states of the parameters
 *   its nodes own (pass_param_bytes3 with the plan's strategy and ZeRO
 *   stage z), plus those it reads and another stage owns. A parameter is
 *   split before ZeRO at most over the mesh axes whose sizes divide one of
 *   its dims (plan_strategies' split_ok; param_ways below): the tensor
 *   axis (tp), and the data-parallel axis only for the experts, which it
 *   may exchange (pass_ilp_pins_cp); a folded tp 1 mesh splits only the
 *   routed experts, over its inner axis. ZeRO shards over all n at most:
 *   the optimizer state from z = 1, the gradients from 2, the weights from
 *   3 (src_states_lb's rule, search_prune.c). Where context parallelism may
 *   split a parameter (GPT's position table along the sequence), it may
 *   take the data-parallel GPUs too: then n. (DeepSeek-V3's 256 experts:
 *   no data-parallel axis of 40 or 20 divides them or their 7168 and 2048
 *   wide dims, so on dp 40 x tp 8 they split 8 ways, not 320.)
 * - Activations. A micro-batch holds at least one sequence per data-
 *   parallel replica (plan_mb_seqs), split at most over the stage's other
 *   tp GPUs; a kept tensor carries the batch dim or not, so it keeps at
 *   least (sequences) x what one sequence more adds, under the policy that
 *   keeps least (pass_saved_bytes, as src_work's bound); every rank holds
 *   at least one micro-batch of each of its chunks (plan_schedule_acts:
 *   a slot each, or under a caching allocator micro-batch 0's chunks until
 *   its backward). None where a stack may offload them.
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
 * Temporaries and the other buffers are left out (they depend on the
 * strategies and the schedule); what is left is a floor, not an estimate.
 * The exhaustive searches check it against pass_predict's peak of every
 * plan they rank (search.c, check_bounds), test_search memfloor against
 * the plans searches find and the leanest layouts where nothing
 * fits. */
#include "search/search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* Whether dim d of g is some node's expert dim (pass_ilp_pins_cp lets the
 * data-parallel axis split those, by exchange). */
static bool expert_dim(const IrGraph *g, int d)
{
    for (int i = 0; i < g->nfwd; i++)
        if (plan_expert_dim(g, &g->nodes[i]) == d)
            return true;
    return false;
}

/* Node nd's parameters (those it owns, each once) into f->param. */
static void add_params(PassMemFloor *f, const PassCostCtx *c, const IrGraph *g, const IrNode *nd, int p,
                       const PlanMesh *one, const PlanStrategy *rep, const int64_t *ds, int *cap)
{
    for (int i = 0; i < nd->nin; i++) {
        int t = nd->in[i];
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= nd->in[j] == t;
        if (dup || g->tensors[t].role != IR_PARAM || !pass_param_owned(g, nd, t))
            continue;
        if (f->nparam == *cap) {
            *cap = *cap ? 2 * *cap : 64;
            f->param = ir_xrealloc(f->param, sizeof *f->param * (size_t)*cap);
        }
        struct PassMemFloorParam *x = &f->param[f->nparam++];
        memset(x, 0, sizeof *x);
        x->piece = p;
        pass_param_bytes_of(c, g, nd, one, rep, 0, t, &x->w, &x->gr, &x->op);
        x->expert = plan_expert_dim(g, nd) >= 0;
        x->rank = g->tensors[t].rank;
        for (int d = 0; d < x->rank; d++) {
            x->size[d] = ds[g->tensors[t].dim[d]];
            x->xdim |= expert_dim(g, g->tensors[t].dim[d]);
        }
    }
}

void pass_mem_floor_init(PassMemFloor *f, const PassCostCtx *c, const IrGraph *g)
{
    PlanMesh one;
    plan_mesh_make(&one, 1, 1, 8);
    PlanStrategy rep = {PLAN_NO_DIMS, 0};
    int P = g->npieces;
    f->npieces = P;
    f->sum = ir_xcalloc((size_t)P + 1, sizeof *f->sum);
    f->act = ir_xcalloc((size_t)P + 1, sizeof *f->act);
    f->nparam = 0;
    f->param = NULL;
    double *s = ir_xcalloc((size_t)P + 1, sizeof *s);
    bool moe = false, scan = false;
    int64_t *d1 = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    int64_t *d2 = ir_xmalloc(sizeof(int64_t) * (size_t)(g->ndims + 1));
    ir_dim_sizes(g, 1, d1); /* parameters never carry the batch dim */
    ir_dim_sizes(g, 2, d2);
    /* A stack that offloads activations (offload_act_layers) may keep
     * fewer than a micro-batch's on the GPU. */
    bool offload = c->st.offload_act_layers > 0;
    int cap = 0;
    for (int p = 0; p < P; p++) {
        double act[PLAN_RECOMPUTE_COUNT] = {0};
        for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++) {
            const IrNode *nd = &g->nodes[n];
            double w, gr, op;
            pass_param_bytes3(c, g, nd, &one, &rep, 0, &w, &gr, &op);
            s[p] += w + gr + op;
            moe |= plan_expert_dim(g, nd) >= 0;
            scan |= nd->op == IR_OP_SSD || nd->op == IR_OP_CONV1D;
            add_params(f, c, g, nd, p, &one, &rep, d1, &cap);
            /* What a sequence more keeps: each kept tensor either carries
             * the batch dim or not, so a micro-batch of k sequences keeps
             * at least k times this. */
            for (int r = 0; r < PLAN_RECOMPUTE_COUNT && !offload; r++)
                act[r] += pass_saved_bytes(c, g, nd, &one, &rep, d2, (PlanRecompute)r) -
                          pass_saved_bytes(c, g, nd, &one, &rep, d1, (PlanRecompute)r);
        }
        f->act[p] = INFINITY;
        for (int r = 0; r < PLAN_RECOMPUTE_COUNT; r++)
            f->act[p] = fmin(f->act[p], fmax(0, act[r]));
    }
    free(d1);
    free(d2);
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
    free(f->act);
    free(f->param);
    f->sum = f->act = NULL;
    f->param = NULL;
    f->nparam = 0;
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

static int cmp_piece(const void *a, const void *b)
{
    const PassMemFloorPiece *x = a, *y = b;
    return (x->s < y->s) - (x->s > y->s);
}

/* The most ways the axes of a mesh (their sizes) split parameter x:
 * plan_strategies splits a dim over an axis only where the axis' size
 * divides it (split_ok), over two axes together only where their product
 * does (the nested splits, the experts' exchange over several axes), so an
 * axis whose size divides none of x's dims leaves it whole. The data-
 * parallel axis (axis[0]) splits only the batch and the experts
 * (pass_ilp_pins_cp): an expert node's parameters, or a parameter with an
 * expert dim. */
static double axis_ways(const struct PassMemFloorParam *x, const int *axis, int naxes)
{
    double ways = 1;
    for (int a = 0; a < naxes; a++) {
        bool divides = false;
        for (int d = 0; d < x->rank && axis[a] > 1 && (a > 0 || x->expert || x->xdim); d++)
            divides |= x->size[d] % axis[a] == 0 && x->size[d] >= axis[a];
        ways *= divides ? axis[a] : 1;
    }
    return ways;
}

/* The most ways any mesh of a stage of n GPUs, tp of them on the tensor
 * axis, splits parameter x before ZeRO shards it: the mesh is dp x tp
 * (search.c, group); with tp 1 it is n x 1, whose one axis is the data-
 * parallel one, or a folded dp_outer x dp_inner whose strategies split
 * only the routed experts, over the inner axis (src_fold_strategy): at
 * most the largest divisor of n (divs: its ndiv divisors) that divides a
 * dim of an expert parameter. (The floor of a folded plan may be asked
 * with its inner axis as tp, test_search's floor_check: dp x tp's rule
 * splits more.) Where context parallelism may take a third axis, any
 * split of n (no experts beside it: cp_ok). */
static double param_ways(const PassMemFloor *f, const struct PassMemFloorParam *x, int tp, int n, const int *divs,
                         int ndiv)
{
    if (f->cp || tp < 1 || n % tp)
        return n;
    if (tp > 1)
        return axis_ways(x, (int[]){n / tp, tp}, 2);
    double best = 1;
    for (int i = 0; i < ndiv; i++)
        best = fmax(best, axis_ways(x, (int[]){divs[i]}, 1));
    return best;
}

void pass_mem_floor_layout(const PassMemFloor *f, int tp, int n, int z, PassMemFloorPiece *v)
{
    int P = f->npieces;
    /* A micro-batch holds at least one sequence per data-parallel replica,
     * split at most over the other n / dp = tp GPUs of the stage; every
     * rank holds at least one micro-batch of each of its chunks
     * (plan_schedule_acts: at least one slot each, or under a caching
     * allocator micro-batch 0's chunks until its backward). */
    for (int p = 0; p < P; p++)
        v[p].s = f->act[p] / (tp > 0 ? tp : 1), v[p].fw = 0;
    int *divs = ir_xmalloc(sizeof(int) * (size_t)(n + 1)), ndiv = 0;
    for (int d = 1; d <= n && tp == 1 && !f->cp; d++)
        if (n % d == 0)
            divs[ndiv++] = d;
    /* What ZeRO shards, over all n at most; the rest over the ways the
     * mesh's axes divide the parameter's dims (ZeRO-3 gathers its weights
     * so). */
    for (int i = 0; i < f->nparam; i++) {
        const struct PassMemFloorParam *x = &f->param[i];
        double e = param_ways(f, x, tp, n, divs, ndiv);
        v[x->piece].s += x->w / (z >= 3 ? n : e) + x->gr / (z >= 2 ? n : e) + x->op / (z >= 1 ? n : e);
        v[x->piece].fw += x->w / e;
    }
    free(divs);
    qsort(v, (size_t)P, sizeof *v, cmp_piece);
}

double pass_mem_floor_pp(const PassMemFloor *f, const PassMemFloorPiece *v, int pp, int tp, int n, int z)
{
    int P = f->npieces;
    double buf = z >= 3 ? f->zero3_buf : 0, total = 0, minfw = INFINITY;
    for (int p = 0; p < P; p++) {
        total += v[p].s;
        minfw = fmin(minfw, v[p].fw);
    }
    /* sum[j]: the j largest states; fw[0..j): their gathered weights,
     * ascending. */
    double *sum = ir_xmalloc(sizeof *sum * (size_t)(P + 1)), *fw = ir_xmalloc(sizeof *fw * (size_t)(P + 1));
    double best = P > 0 ? total / pp + buf * minfw : 0;
    sum[0] = 0;
    for (int j = 1; j <= P; j++) {
        /* Of the j largest, some rank holds k: at least the k smallest
         * states of them, and (ZeRO-3) the buffer of the one of its k with
         * the most gathered weights: at least the k-th least of the j. */
        int k = (j + pp - 1) / pp, i = j - 1;
        sum[j] = sum[j - 1] + v[j - 1].s;
        if (buf > 0) {
            for (; i > 0 && fw[i - 1] > v[j - 1].fw; i--)
                fw[i] = fw[i - 1];
            fw[i] = v[j - 1].fw;
        }
        best = fmax(best, sum[j] - sum[j - k] + (buf > 0 ? buf * fw[k - 1] : 0));
    }
    free(sum);
    free(fw);
    return best + f->runtime + f->comm * ((pp > 1) + (tp > 1) + (n / tp > 1));
}

double pass_mem_floor_zero(const PassMemFloor *f, int pp, int tp, int stage, int zero)
{
    PassMemFloorPiece *v = ir_xmalloc(sizeof *v * (size_t)(f->npieces + 1));
    pass_mem_floor_layout(f, tp, stage, zero, v);
    double b = pass_mem_floor_pp(f, v, pp, tp, stage, zero);
    free(v);
    return b;
}

double pass_mem_floor(const PassMemFloor *f, int pp, int tp, int stage)
{
    double b = INFINITY;
    for (int z = 0; z < 4; z++)
        if (f->zero[z] && (z == 0 || stage / tp > 1)) /* ZeRO needs data-parallel replicas (search.c) */
            b = fmin(b, pass_mem_floor_zero(f, pp, tp, stage, z));
    return b;
}
