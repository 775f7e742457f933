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
 * every rank's schedule with rendezvous sends to prove that cannot hang.
 *
 * ZB-H1 (a split schedule): the plan's op list also holds each micro-batch's
 * weight gradients (W), run after the backward (B) of a later one. W's
 * inputs (the GEMMs' inputs and output gradients) are copied by B into W
 * slots, micro-batch m in slot m mod nwslots; nwslots is the most W that
 * wait at once in the plan's order, checked here never to overwrite one
 * still waiting. W makes no transfer: the deadlock checks skip it. */
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

/* nwslots[j]: the planner's W slots (plan_schedule_wslots, what the cost
 * model counts), checked against the schedule: the most micro-batches of
 * chunk j between their B and their W, each W before the B that reuses
 * its slot. */
static void wslots(const Cg *c, CgRankProg *r, int M)
{
    if (!plan_schedule_split(c->p->schedule))
        return;
    char *wait = ir_xcalloc((size_t)M + 1, 1);
    for (int j = 0; j < r->nchunks; j++) {
        int n = 0, most = plan_schedule_wslots(c->p->schedule, c->p->pp, M, r->pp_rank), need = 0;
        for (int k = 0; k < r->nsched; k++) {
            const struct CgSchedOp *o = &r->sched[k];
            if (o->chunk != j || o->bwd == PLAN_OP_F)
                continue;
            n += o->bwd == PLAN_OP_B ? 1 : -1;
            need = n > need ? n : need;
        }
        if (need > most)
            ir_die("codegen: pipeline rank %d's schedule holds %d weight gradients pending, the plan %d",
                   r->pp_rank, need, most);
        r->nwslots[j] = most;
        memset(wait, 0, (size_t)M + 1);
        for (int k = 0; k < r->nsched; k++) {
            const struct CgSchedOp *o = &r->sched[k];
            if (o->chunk != j || o->bwd == PLAN_OP_F || !most)
                continue;
            bool b = o->bwd == PLAN_OP_B;
            if (b ? wait[o->mb] : !wait[o->mb])
                ir_die("codegen: pipeline rank %d runs %s of micro-batch %d twice or out of order",
                       r->pp_rank, b ? "the backward" : "the weight gradients", o->mb);
            wait[o->mb] = b;
            for (int m = o->mb % most; b && m < M; m += most)
                if (m != o->mb && wait[m])
                    ir_die("codegen: pipeline rank %d: micro-batch %d's weight-gradient inputs would "
                           "overwrite micro-batch %d's, still waiting", r->pp_rank, o->mb, m);
        }
    }
    free(wait);
}

void cg_schedule(Cg *c, CgRankProg *r)
{
    /* The schedule and its slot counts are the planner's (plan/schedule.c):
     * the memory the cost model predicts is the memory allocated here. */
    const Plan *p = c->p;
    int pp = p->pp, v = p->v, M = p->num_micro, rank = r->pp_rank, cap = 0;
    for (int k = 0; k < plan_schedule_nops(p->schedule, v, M); k++) {
        PlanSchedOp op = plan_schedule_op(p->schedule, pp, v, M, rank, k);
        push(r, &cap, op.bwd, op.chunk, op.mb);
    }
    plan_schedule_slots(pp, v, M, rank, r->nslots);
    for (int j = 0; j < r->nchunks; j++)
        if (r->nslots[j] < 1)
            ir_die("codegen: pipeline rank %d holds no micro-batch of chunk %d", rank, j);
    wslots(c, r, M);
}

/* ------------------------------------------------------ deadlock check */

/* The CUDA program's transfers (runtime/cuda/comm.cu, rt_comm_split_p2p):
 * the host never waits for them; each is issued at once on the stream of
 * its channel (cg_p2p_channel: by direction and the sending rank's parity,
 * so that no rank sends and receives on one stream and a receive never
 * waits behind a send that is not yet matched), after everything compute had queued,
 * and blocks that stream until the peer's matching operation runs; compute
 * waits for a receive before the op that reads it and for a send before
 * its slot is written again. NCCL matches the messages of one channel
 * between two ranks in posting order (no tags), so that order must agree
 * on both sides. Played to the end here; a cycle or a mismatch is a bug of
 * the schedule (ir_die). */
enum { Q_COMPUTE, Q_CH0, NQ = Q_CH0 + 4 };

/* comm.cu's channel of a message from pipeline rank `from` to `to`:
 * 0, 1 up the rank order, 2, 3 down, by the sender's parity. A rank sends
 * only on channels of its own parity and receives from its neighbours on
 * the others; the ring's wrap (the last rank to the first and back) joins
 * ranks that neither send down below the first nor up above the last. */
static int channel(int from, int to)
{
    return (from < to ? 0 : 2) + (from & 1);
}

typedef struct SItem {
    int q;       /* Q_COMPUTE or a channel */
    int msg;     /* a transfer's message, else -1 */
    bool send;
    int dep;     /* the compute item queued before it (-1: none) */
    int wait[2]; /* compute: the receive and the slot's previous send it waits for (-1) */
    bool done;
} SItem;

typedef struct Play {
    int S, M, P;
    VEC(SItem) *it;  /* per rank, in the host's issue order */
    int *snd, *rcv;  /* per message: the sender's, the receiver's item */
} Play;

static int msg_id(const Play *pl, bool grad, int s, int mb) { return ((grad ? pl->S : 0) + s) * pl->M + mb; }
/* Stages a message goes from and to (activation s -> s+1, gradient s+1 -> s). */
static int msg_from(const Play *pl, int m) { return m / pl->M % pl->S + (m >= pl->S * pl->M); }
static int msg_to(const Play *pl, int m) { return m / pl->M % pl->S + (m < pl->S * pl->M); }

static int push_item(Play *pl, int rank, SItem x)
{
    vec_push(pl->it[rank], x);
    return pl->it[rank].n - 1;
}

static bool deps_done(const Play *pl, int rank, const SItem *x)
{
    if (x->dep >= 0 && !pl->it[rank].v[x->dep].done)
        return false;
    for (int w = 0; w < 2; w++)
        if (x->wait[w] >= 0 && !pl->it[rank].v[x->wait[w]].done)
            return false;
    return true;
}

static void check_streams(Cg *c)
{
    const Plan *p = c->p;
    Play pl = {p->nstages, p->num_micro, p->pp, NULL, NULL, NULL};
    int nmsg = 2 * pl.S * pl.M;
    pl.it = ir_xcalloc((size_t)pl.P, sizeof *pl.it);
    pl.snd = ir_xcalloc((size_t)nmsg, sizeof(int));
    pl.rcv = ir_xcalloc((size_t)nmsg, sizeof(int));
    for (int m = 0; m < nmsg; m++)
        pl.snd[m] = pl.rcv[m] = -1;
    for (int rank = 0; rank < pl.P; rank++) {
        CgRankProg *r = &c->ranks[rank];
        int last = -1;
        for (int k = 0; k < r->nsched; k++) {
            int j = r->sched[k].chunk, mb = r->sched[k].mb, s = r->stage[j], prev = mb - r->nslots[j];
            if (r->sched[k].bwd == PLAN_OP_W) /* no transfers */
                continue;
            bool bwd = r->sched[k].bwd;
            bool sends = (bwd ? r->send_grad[j].n : r->send_act[j].n) > 0;
            bool recvs = (bwd ? r->recv_grad[j].n : r->recv_act[j].n) > 0;
            SItem op = {Q_COMPUTE, -1, false, last, {-1, -1}, false};
            if (sends && prev >= 0)
                op.wait[0] = pl.snd[bwd ? msg_id(&pl, true, s - 1, prev) : msg_id(&pl, false, s, prev)];
            if (recvs) {
                int m = bwd ? msg_id(&pl, true, s, mb) : msg_id(&pl, false, s - 1, mb);
                int q = Q_CH0 + channel(cg_stage_pp(c, msg_from(&pl, m)), rank);
                op.wait[1] = pl.rcv[m] = push_item(&pl, rank, (SItem){q, m, false, last, {-1, -1}, false});
            }
            last = push_item(&pl, rank, op);
            if (sends) {
                int m = bwd ? msg_id(&pl, true, s - 1, mb) : msg_id(&pl, false, s, mb);
                int q = Q_CH0 + channel(rank, cg_stage_pp(c, msg_to(&pl, m)));
                pl.snd[m] = push_item(&pl, rank, (SItem){q, m, true, last, {-1, -1}, false});
            }
        }
    }
    /* A receive never queued behind this rank's own send. */
    for (int a = 0; a < pl.P; a++)
        for (int i = 0; i < pl.it[a].n; i++)
            for (int k = 0; k < pl.it[a].n && pl.it[a].v[i].q != Q_COMPUTE && !pl.it[a].v[i].send; k++)
                if (pl.it[a].v[k].send && pl.it[a].v[k].q == pl.it[a].v[i].q)
                    ir_die("codegen: pipeline rank %d sends and receives on channel %d", a,
                           pl.it[a].v[i].q - Q_CH0);
    /* The same order of messages on each channel of each pair of ranks. */
    for (int a = 0; a < pl.P; a++)
        for (int b = 0; b < pl.P; b++)
            for (int q = Q_CH0; q < NQ && a != b; q++) {
                VEC(int) sent = {0}, got = {0};
                for (int i = 0; i < pl.it[a].n; i++) {
                    const SItem *x = &pl.it[a].v[i];
                    if (x->q == q && x->send && cg_stage_pp(c, msg_to(&pl, x->msg)) == b)
                        vec_push(sent, x->msg);
                }
                for (int i = 0; i < pl.it[b].n; i++) {
                    const SItem *x = &pl.it[b].v[i];
                    if (x->q == q && !x->send && cg_stage_pp(c, msg_from(&pl, x->msg)) == a)
                        vec_push(got, x->msg);
                }
                bool same = sent.n == got.n;
                for (int i = 0; same && i < sent.n; i++)
                    same = sent.v[i] == got.v[i];
                if (!same)
                    ir_die("codegen: pipeline rank %d sends on channel %d in another order than rank %d "
                           "receives", a, q - Q_CH0, b);
                vec_free(sent);
                vec_free(got);
            }
    /* Each stream's items in order and its first not done (its head): a
     * step is linear in the items, where rescanning each stream from its
     * start made a 1024-micro-batch plan take minutes. */
    VEC(int) *qs = ir_xcalloc((size_t)(pl.P * NQ), sizeof *qs);
    int *head = ir_xcalloc((size_t)(pl.P * NQ), sizeof *head);
    for (int rank = 0; rank < pl.P; rank++)
        for (int i = 0; i < pl.it[rank].n; i++)
            vec_push(qs[rank * NQ + pl.it[rank].v[i].q], i);
    bool progress = true;
    while (progress) {
        progress = false;
        for (int rank = 0; rank < pl.P; rank++)
            for (int q = 0; q < NQ; q++) {
                int *h = &head[rank * NQ + q];
                while (*h < qs[rank * NQ + q].n) {
                    SItem *x = &pl.it[rank].v[qs[rank * NQ + q].v[*h]];
                    if (!deps_done(&pl, rank, x))
                        break;
                    if (x->msg >= 0) { /* a rendezvous: both sides at the head of their streams */
                        int peer = cg_stage_pp(c, x->send ? msg_to(&pl, x->msg) : msg_from(&pl, x->msg));
                        int pi = x->send ? pl.rcv[x->msg] : pl.snd[x->msg];
                        if (pi < 0)
                            ir_die("codegen: pipeline message %d has no partner", x->msg);
                        SItem *y = &pl.it[peer].v[pi];
                        int *ph = &head[peer * NQ + y->q];
                        if (*ph >= qs[peer * NQ + y->q].n || qs[peer * NQ + y->q].v[*ph] != pi ||
                            !deps_done(&pl, peer, y))
                            break;
                        y->done = true;
                        ++*ph;
                    }
                    x->done = true;
                    ++*h;
                    progress = true;
                }
            }
    }
    for (int k = 0; k < pl.P * NQ; k++)
        vec_free(qs[k]);
    free(qs);
    free(head);
    for (int rank = 0; rank < pl.P; rank++)
        for (int i = 0; i < pl.it[rank].n; i++)
            if (!pl.it[rank].v[i].done)
                ir_die("codegen: the pipeline schedule deadlocks on CUDA's per-direction streams "
                       "(pipeline rank %d stops at item %d of %d)", rank, i, pl.it[rank].n);
    for (int rank = 0; rank < pl.P; rank++)
        vec_free(pl.it[rank]);
    free(pl.it);
    free(pl.snd);
    free(pl.rcv);
}

/* The CPU program's transfers: MPI's, non-blocking and matched by tag;
 * the host waits for a receive at once and for a send when its slot is
 * reused or at the end of the step. */
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
    const Plan *p = c->p;
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
            if (r->sched[k].bwd == PLAN_OP_W) /* no transfers */
                continue;
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
    int *wscan = ir_xcalloc((size_t)p->pp, sizeof *wscan);
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
                case A_WAIT_ALL: /* every send matched; recv_posted only turns true */
                    while (wscan[rank] < pc[rank] && (acts[rank].v[wscan[rank]].kind != A_SEND ||
                                                      msg[acts[rank].v[wscan[rank]].msg].recv_posted))
                        wscan[rank]++;
                    go = wscan[rank] == pc[rank];
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
    free(wscan);
    free(msg);
    check_streams(c);
}
