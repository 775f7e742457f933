/* megatron.c: TEST-ONLY Megatron-style strategies (see megatron.h). */
#include "megatron.h"

#include "frontend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Dims tensor parallelism splits, by name, in order of preference: the
 * attention heads, the FFN width, the vocabulary. A node whose loop dims
 * include one of them splits it (column-parallel when it is an output dim,
 * row-parallel when contracted). */
static const char *const tp_dims[] = {"n_heads", "n_kv_heads", "d_ff", "vocab"};

static int tp_dim(const IrGraph *g, const IrNode *n, bool sp)
{
    for (size_t k = 0; k < sizeof tp_dims / sizeof tp_dims[0]; k++) {
        int d = ir_dim_find(g, tp_dims[k]);
        if (d >= 0 && ir_node_has_dim(g, n, d) && plan_dim_splittable(g, n, d))
            return d;
    }
    if (sp && ir_node_has_dim(g, n, g->seq_dim) && plan_dim_splittable(g, n, g->seq_dim))
        return g->seq_dim;
    return -1;
}

bool mega_plan(const IrGraph *g, const MegaLayout *L, Plan *p)
{
    memset(p, 0, sizeof *p);
    int v = L->v > 0 ? L->v : 1, gpn = L->gpus_per_node > 0 ? L->gpus_per_node : 8;
    int nlayers = 0;
    for (int i = 0; i < g->npieces; i++)
        nlayers += g->pieces[i].layer >= 0;
    int chunks = L->pp * v;
    if (nlayers % chunks || g->npieces != nlayers + 2) {
        fprintf(stderr, "mega_plan: %d layers in %d chunks\n", nlayers, chunks);
        return false;
    }
    if (L->global_batch % ((int64_t)L->micro_batch * L->dp)) {
        fprintf(stderr, "mega_plan: global batch %lld not a multiple of %d x %d\n",
                (long long)L->global_batch, L->micro_batch, L->dp);
        return false;
    }
    plan_mesh_make(&p->mesh, L->dp, L->tp, gpn);
    p->pp = L->pp;
    p->v = v;
    p->nstages = chunks;
    p->stages = calloc((size_t)chunks, sizeof *p->stages);
    int per = nlayers / chunks;
    for (int c = 0; c < chunks; c++) {
        PlanStage *s = &p->stages[c];
        s->first_piece = c == 0 ? 0 : 1 + c * per;
        s->npieces = per + (c == 0) + (c == chunks - 1);
        s->pp_rank = c % L->pp;
        s->recompute = L->recompute;
    }
    p->strategy = calloc((size_t)g->nfwd + 1, sizeof *p->strategy);
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        PlanStrategy *s = &p->strategy[i];
        *s = (PlanStrategy){PLAN_NO_DIMS, 0};
        s->dim[0] = (int16_t)(L->dp > 1 && ir_node_has_dim(g, n, g->batch_dim) ? g->batch_dim : -1);
        s->dim[1] = (int16_t)(L->tp > 1 ? tp_dim(g, n, L->sp) : -1);
        if (L->dp == 1 && L->tp > 1) { /* mesh 1 x tp: axis 0 is unused */
            s->dim[0] = -1;
        }
    }
    p->num_micro = (int)(L->global_batch / ((int64_t)L->micro_batch * L->dp));
    p->mb_seqs = plan_mb_seqs(L->micro_batch, L->dp);
    p->zero = L->zero;
    p->schedule = v > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B;
    p->attention = L->attention;
    plan_axes(g, p);
    return true;
}

void mega_plan_free(Plan *p)
{
    free(p->stages);
    free(p->strategy);
    p->stages = NULL;
    p->strategy = NULL;
}

IrGraph *mega_compile(IrArena *a, const char *path, const char *sets, int64_t global_batch)
{
    FeSet fs[16];
    int n = 0;
    char buf[512];
    if (sets) {
        snprintf(buf, sizeof buf, "%s", sets);
        for (char *tok = strtok(buf, ","); tok && n < 16; tok = strtok(NULL, ",")) {
            char *eq = strchr(tok, '=');
            if (!eq)
                continue;
            *eq = 0;
            fs[n].name = ir_strdup(a, tok);
            fs[n].value = ir_strdup(a, eq + 1);
            n++;
        }
    }
    return fe_compile_file(a, path, fs, n, global_batch);
}
