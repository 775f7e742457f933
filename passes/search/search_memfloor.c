/* search_memfloor.c: the least memory per GPU that any layout of pp
 * pipeline ranks of `stage` GPUs each can need, without searching, so that
 * pass_search_min_gpus can leave out the GPU counts on which nothing can
 * fit (docs/planner.md, "A model that fits nowhere").
 *
 * Why it is a floor of pass_predict's peak:
 * - Model states. pass_predict charges a rank the states of the parameters
 *   its nodes own (pass_param_bytes3 with the plan's strategy and ZeRO
 *   stage), plus those it reads and another stage owns. Tensor, expert and
 *   context parallelism and ZeRO divide a parameter's elements among the
 *   stage's GPUs, each element held by one of them at least with its bf16
 *   weight, gradient and optimizer state; so the stage's GPUs together
 *   hold at least the states of its pieces on one GPU (the 1 x 1 mesh,
 *   replicated, ZeRO 0), and the fullest GPU at least 1/stage of that.
 * - Pieces per rank. Stages are whole pieces and a rank holds pp x v of
 *   them in any order (1F1B: one contiguous run; interleaved: v runs), so
 *   with the pieces' states sorted largest first, s1 >= s2 >= ..., the j
 *   largest are spread over pp ranks and some rank holds ceil(j / pp) of
 *   them: at least s(j - ceil(j / pp) + 1) + ... + s(j). And some rank
 *   holds at least 1/pp of all. The floor is the largest of these.
 * - The CUDA context and library workspaces every rank has, and the
 *   communicators every rank of such a layout belongs to: the world's, the
 *   pipeline's when pp > 1, and one mesh axis's at least when the stage
 *   has more than one GPU (its axes multiply to the stage; pass_runtime_bytes
 *   counts one per axis larger than 1).
 * Activations, buffers and temporaries are left out (they depend on the
 * strategies); what is left is a floor, not an estimate. test_search
 * memfloor checks it against pass_predict's peak of the plans searches
 * find and of the leanest layouts where nothing fits. */
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
    f->npieces = g->npieces;
    f->sum = ir_xcalloc((size_t)g->npieces + 1, sizeof *f->sum);
    double *s = ir_xcalloc((size_t)g->npieces + 1, sizeof *s);
    for (int p = 0; p < g->npieces; p++)
        for (int n = g->pieces[p].first; n < g->pieces[p].first + g->pieces[p].count; n++)
            s[p] += pass_param_bytes(c, g, &g->nodes[n], &one, &rep, 0);
    qsort(s, (size_t)g->npieces, sizeof *s, cmp_desc);
    for (int p = 0; p < g->npieces; p++)
        f->sum[p + 1] = f->sum[p] + s[p];
    free(s);
    /* Every rank's context and workspaces, and one communicator (the
     * world's: pass_runtime_bytes of one GPU counts just that one). */
    f->comm = c->cl->gpu.runtime_bytes > 0 ? c->cl->gpu.comm_bytes : pass_cost_consts.nccl_comm_bytes;
    f->runtime = pass_runtime_bytes(c, &one, 1);
}

void pass_mem_floor_free(PassMemFloor *f)
{
    free(f->sum);
    f->sum = NULL;
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

double pass_mem_floor(const PassMemFloor *f, int pp, int stage)
{
    return pass_mem_floor_rank(f, pp) / stage + f->runtime + f->comm * ((pp > 1) + (stage > 1));
}
