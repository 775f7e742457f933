/* comm_check.cu: PTDC_NCCL_CHECK=1, the collective order checked on GPUs.
 *
 * NCCL requires every rank of a communicator to issue the same collectives
 * in the same order; when they do not it hangs or mixes data, silently.
 in a non-blocking MPI all-gather on a duplicate of the
 * communicator's MPI group, made for this only (so its order never mixes
 * with rt_barrier's or the host collectives'). Fingerprints are compared as
 * they arrive: tested at each later collective, waited for at rt_time and
 * every full synchronisation (the host waits there for the collectives
 * anyway). A difference ends every rank with
 *   PTDC_NCCL_CHECK: NCCL calls differ on a communicator of N ranks:
 *   rank r call #k X vs rank s call #k Y
 * (world ranks), instead of a hang. Communicators sharing one NCCL
 * communicator (rt_comm_split of an existing group) share its sequence.
 * Point-to-point transfers are not fingerprinted (their pairs differ by
 * rank). Cost: one small all-gather per collective on the host, and the
 * waits at synchronisation points; off, one untaken branch per collective. */
#include "cu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

typedef struct {
    char call[24];
    int64_t b1, b2, slot;
    int32_t world, pad; /* world: who, not compared */
} Fp;

struct RtcuFpSeq {
    MPI_Comm mpi;
    int size;
    int64_t slot;
};

typedef struct {
    RtcuFpSeq *seq;
    Fp *mine; /* [1 + size]: this rank's, then every rank's */
    MPI_Request req;
} Outstanding;

static int enabled = -1;
static std::vector<Outstanding> out;

static bool on(void)
{
    if (enabled < 0) {
        const char *e = getenv("PTDC_NCCL_CHECK");
        enabled = e && *e && strcmp(e, "0") != 0;
    }
    return enabled;
}

void rtcu_check_own(RtComm *c)
{
    if (!on() || !c->nccl) return;
    RtcuFpSeq *s = (RtcuFpSeq *)calloc(1, sizeof *s);
    if (!s) rt_fatal("out of host memory");
    MPI_Comm_dup(c->mpi, &s->mpi);
    s->size = c->size;
    c->fp = s;
}

static void text(const Fp *f, char *b, size_t n)
{
    snprintf(b, n, "%.*s(%lld bytes, %lld bytes)", (int)sizeof f->call, f->call, (long long)f->b1,
             (long long)f->b2);
}

static void compare(const Outstanding *o)
{
    const Fp *me = o->mine, *all = o->mine + 1;
    for (int r = 0; r < o->seq->size; r++) {
        Fp a = all[r], m = *me;
        a.world = m.world = 0;
        if (memcmp(&a, &m, sizeof a) == 0) continue;
        char x[128], y[128];
        text(me, x, sizeof x);
        text(&all[r], y, sizeof y);
        rt_fatal("PTDC_NCCL_CHECK: NCCL calls differ on a communicator of %d ranks: rank %d call #%lld %s vs "
                 "rank %d call #%lld %s",
                 o->seq->size, me->world, (long long)me->slot, x, all[r].world, (long long)all[r].slot, y);
    }
}

/* Compare what has arrived; wait for the rest when `wait`. */
void rtcu_check_poll(bool wait)
{
    if (out.empty()) return;
    if (wait) rtcu_block_begin("MPI_Wait (PTDC_NCCL_CHECK fingerprints)", __FILE__, __LINE__);
    size_t m = 0;
    for (size_t i = 0; i < out.size(); i++) {
        int flag = 0;
        if (wait)
            MPI_Wait(&out[i].req, MPI_STATUS_IGNORE), flag = 1;
        else
            MPI_Test(&out[i].req, &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            out[m++] = out[i];
            continue;
        }
        compare(&out[i]);
        free(out[i].mine);
    }
    out.resize(m);
    if (wait) rtcu_block_end();
}

void rtcu_check_call(const RtComm *c, const char *call, size_t b1, size_t b2)
{
    if (!on()) return;
    RtcuFpSeq *s = c->fp;
    if (!s) return; /* made before PTDC_NCCL_CHECK was read: never */
    Outstanding o;
    o.seq = s;
    o.mine = (Fp *)calloc((size_t)s->size + 1, sizeof(Fp));
    if (!o.mine) rt_fatal("out of host memory");
    snprintf(o.mine->call, sizeof o.mine->call, "%s", call); /* calloc'd: the rest stays zero */
    o.mine->b1 = (int64_t)b1;
    o.mine->b2 = (int64_t)b2;
    o.mine->slot = s->slot++;
    o.mine->world = rtcu.rank;
    MPI_Iallgather(o.mine, (int)sizeof(Fp), MPI_BYTE, o.mine + 1, (int)sizeof(Fp), MPI_BYTE, s->mpi, &o.req);
    out.push_back(o);
    rtcu_check_poll(false);
}

void rtcu_check_free(RtComm *c)
{
    if (!c->fp) return;
    rtcu_check_poll(true);
    MPI_Comm_free(&c->fp->mpi);
    free(c->fp);
    c->fp = NULL;
}
