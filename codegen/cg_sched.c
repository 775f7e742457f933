/* cg_sched.c: the micro-batch schedule of each pipeline rank.
 *
 * 1F1B (PipeDream-Flush, Megatron's default): pipeline rank r runs
 * min(pp - r - 1, M) forwards to fill the pipeline, then alternates one
 * forward and one backward, then drains the remaining backwards.
 * Interleaved 1F1B (Megatron, Narayanan et al. 2021): each rank runs v model
 * chunks (stage j pp + r is its chunk j); forwards visit the chunks in groups
 * of pp micro-batches, warm-up is (pp - r - 1) 2 + (v - 1) pp forwards.
 *
 * Activations of a chunk live in slots, one per micro-batch in flight; each
 * chunk meets its micro-batches in order in both directions, so micro-batch m
 * uses slot m mod (most in flight). A send is waited for only when its slot
 * is about to be reused (or at the end of the step); cg_check_deadlock plays
 * every rank's schedule with rendezvous sends to prove that cannot hang. */
#include "cg.h"

#include <stdlib.h>
#include <string.h>

static void push(CgRankProg *r, int *cap, int bwd, int chunk, int mb)
{
    if (r->nsched == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        r->sched = ir_xrealloc(r->sched, sizeof *r->sched * (size_t)*cap);
    }
    r->sched[r->nsched++] = (struct CgSchedOp){bwd, chunk, mb};
}

void cg_schedule(Cg *c, CgRankProg *r)
{
    /* The schedule and its slot counts are the planner's (passes/cost/schedule.c):
     * the memory the cost model predicts is the memory allocated here. */
    const PassPlan *p = c->p;
    int pp = p->pp, v = p->v, M = p->num_micro, rank = r->pp_rank, cap = 0;
    for (int k = 0; k < 2 * M * v; k++) {
        PassSchedOp op = pass_schedule_op(pp, v, M, rank, k);
        push(r, &cap, op.bwd, op.chunk, op.mb);
    }
    pass_schedule_slots(pp, v, M, rank, r->nslots);
    for (int j = 0; j < r->nchunks; j++)
        if (r->nslots[j] < 1)
            ir_die("codegen: pipeline rank %d holds no micro-batch of chunk %d", rank, j);
}

/* ------------------------------------------------------ deadlock check */

typedef struct Msg {
    bool sent, recv_posted;
} Msg;

typedef enum { A_RECV, A_WAIT_SEND, A_SEND, A_WAIT_ALL } ActKind;
typedef struct Act {
    ActKind kind;
    int msg;
} Act;

void cg_check_deadlock(Cg *c)
{
    const PassPlan *p = c->p;
    int S = p->nstages, M = p->num_micro;
    /* Message ids: kind (0 activation s -> s+1, 1 gradient s+1 -> s) x boundary s x micro-batch. */
    int nmsg = 2 * S * M;
    Msg *msg = ir_xcalloc((size_t)nmsg, sizeof *msg);
#define ACT_MSG(s, mb) ((0 * S + (s)) * M + (mb))
#define GRAD_MSG(s, mb) ((1 * S + (s)) * M + (mb))
    VEC(Act) *acts = ir_xcalloc((size_t)p->pp, sizeof *acts);
    for (int rank = 0; rank < p->pp; rank++) {
        CgRankProg *r = &c->ranks[rank];
        for (int k = 0; k < r->nsched; k++) {
            int j = r->sched[k].chunk, mb = r->sched[k].mb, s = r->stage[j];
            int prev = mb - r->nslots[j];
            if (!r->sched[k].bwd) {
                if (r->send_act[j].n && prev >= 0)
                    vec_push(acts[rank], ((Act){A_WAIT_SEND, ACT_MSG(s, prev)}));
                if (r->recv_act[j].n)
                    vec_push(acts[rank], ((Act){A_RECV, ACT_MSG(s - 1, mb)}));
                if (r->send_act[j].n)
                    vec_push(acts[rank], ((Act){A_SEND, ACT_MSG(s, mb)}));
            } else {
                if (r->send_grad[j].n && prev >= 0)
                    vec_push(acts[rank], ((Act){A_WAIT_SEND, GRAD_MSG(s - 1, prev)}));
                if (r->recv_grad[j].n)
                    vec_push(acts[rank], ((Act){A_RECV, GRAD_MSG(s, mb)}));
                if (r->send_grad[j].n)
                    vec_push(acts[rank], ((Act){A_SEND, GRAD_MSG(s - 1, mb)}));
            }
        }
        vec_push(acts[rank], ((Act){A_WAIT_ALL, -1}));
    }
    int *pc = ir_xcalloc((size_t)p->pp, sizeof *pc);
    bool progress = true;
    while (progress) {
        progress = false;
        for (int rank = 0; rank < p->pp; rank++) {
            while (pc[rank] < acts[rank].n) {
                Act a = acts[rank].v[pc[rank]];
                bool go = false;
                switch (a.kind) {
                case A_RECV:
                    msg[a.msg].recv_posted = true; /* an irecv is posted before its wait */
                    go = msg[a.msg].sent;
                    break;
                case A_WAIT_SEND: go = msg[a.msg].recv_posted; break;
                case A_SEND:
                    msg[a.msg].sent = true;
                    go = true;
                    break;
                case A_WAIT_ALL:
                    go = true;
                    for (int k = 0; k < pc[rank]; k++)
                        if (acts[rank].v[k].kind == A_SEND && !msg[acts[rank].v[k].msg].recv_posted)
                            go = false;
                    break;
                }
                if (!go)
                    break;
                pc[rank]++;
                progress = true;
            }
        }
    }
    for (int rank = 0; rank < p->pp; rank++)
        if (pc[rank] < acts[rank].n)
            ir_die("codegen: the pipeline schedule deadlocks (pipeline rank %d stops at action %d "
                   "of %d)", rank, pc[rank], acts[rank].n);
#undef ACT_MSG
#undef GRAD_MSG
    for (int rank = 0; rank < p->pp; rank++)
        vec_free(acts[rank]);
    free(acts);
    free(pc);
    free(msg);
}
