/* cg_bucket.c: gradient buckets of one pipeline rank.
 *
 * A parameter whose gradient is reduced over mesh axes at the end of the
 * step (all-reduce, or ZeRO-1's reduce-scatter) joins a bucket. The backward
 * of each chunk signals when it has made its last contribution to a
 * parameter (cg_grad_ready, cg_lower.c); after the last micro-batch's
 * backward of every chunk holding it, the parameter is complete, and when a
 * bucket's parameters all are, the trainer issues the bucket's reduction
 * (non-blocking, one collective per contiguous run of gradients, or one
 * group of per-tensor reduce-scatters) while the backward goes on; the
 * optimizer waits for it. Buckets are runs of parameters in the order they
 * complete on this rank: the schedule's last backward of each chunk (and,
 * split, its last weight gradients, W), in schedule order, and within one
 * the order of cg_grad_ready. Every rank of
 * a pipeline rank runs the same program, so they issue the same buckets in
 * the same order. The memory plan lays the gradients out bucket by bucket
 * (cg_mem.c), so a bucket's all-reduce covers one span.
 *
 * Size: CUDA buckets hold about 40M elements (Megatron's DDP default of
 * max(40M, 1M x dp); large enough for NCCL's bandwidth, small enough that
 * the first starts early); CPU buckets 1M elements (4 MB), an all-reduce of
 * a few milliseconds between two ranks of this machine. CgOptions.
 * bucket_elems overrides both: tests/codegen's programs use 16384, so a
 * tiny model's step has several buckets issued during its backward. Tied
 * parameters (the same weight on several pipeline ranks) are reduced at the
 * end of the schedule, as before: first over the tied copies, then over the
 * mesh. */
#include "cg.h"

#include <stdlib.h>

int64_t cg_bucket_elems(const Cg *c)
{
    if (c->o->bucket_elems > 0) /* tests: several buckets of a tiny model */
        return c->o->bucket_elems;
    return c->o->target == CG_TARGET_CUDA ? 40 * 1000 * 1000 : 1000 * 1000;
}

void cg_buckets(Cg *c, CgRankProg *r)
{
    int np = c->nparams;
    r->pbucket = ir_alloc(c->arena, sizeof(int) * (size_t)(np + 1));
    r->pready = ir_alloc(c->arena, sizeof(int) * (size_t)(np + 1));
    int *last = ir_alloc(c->arena, sizeof(int) * (size_t)(np + 1)); /* completion position */
    for (int k = 0; k < np; k++) {
        r->pbucket[k] = -1;
        r->pready[k] = 0;
        last[k] = -1;
    }
    /* Completion order: chunks in the order of their last backward. */
    VEC(int) order = {0};
    int M = c->p->num_micro;
    for (int i = 0; i < r->nsched; i++) {
        if (!r->sched[i].bwd || r->sched[i].mb != M - 1)
            continue;
        int j = r->sched[i].chunk;
        /* A split schedule's W completes the GEMMs' weights after its B. */
        bool w = r->sched[i].bwd == PLAN_OP_W;
        const int *rv = w ? r->wready[j].v : r->ready[j].v;
        int rn = w ? r->wready[j].n : r->ready[j].n;
        for (int q = 0; q < rn; q++) {
            int k = rv[q];
            r->pready[k]++;
            last[k] = order.n;
            vec_push(order, k);
        }
    }
    int64_t cap = cg_bucket_elems(c), fill = 0;
    for (int q = 0; q < order.n; q++) {
        int k = order.v[q];
        if (last[k] != q) /* completes later, in another chunk */
            continue;
        if (r->bucket_start.n == 0 || fill >= cap) {
            vec_push(r->bucket_start, r->bucket_params.n);
            fill = 0;
        }
        r->pbucket[k] = r->bucket_start.n - 1;
        vec_push(r->bucket_params, k);
        fill += c->params[k].padded;
    }
    if (r->bucket_start.n)
        vec_push(r->bucket_start, r->bucket_params.n);
    vec_free(order);
}
