/* watch.c: the CPU backend's watchdog thread: stalls and a dead launcher.
 *
 * The main thread brackets every blocking MPI call with rtcpu_wait_begin /
 * rtcpu_wait_end, which publish what it waits in (operation, communicator,
 * its sequence number on that communicator, peer) through a seqlock: a few
 * stores, no system call, so the collectives keep their speed (blocking MPI
 * calls run unchanged; non-blocking collectives were measured 2-3x slower
 * for large all-reduces, see docs/runtime.md).
 *
 * Every tick (25 ms) the thread
 *   - ends the rank if its launcher died (launcher.c): mpirun killed with
 *     -9 must not leave ranks training on;
 *   - every fourth tick, answers other ranks' watchdogs asking where this
 *     rank is (a private
 *     duplicate of the world, used only by watchdog threads; needs
 *     MPI_THREAD_MULTIPLE);
 *   - when the main thread has waited in one call longer than the timeout,
 *     asks the members of that communicator where they are (for a grace of
 *     a tenth of the timeout, 1 to 5 s), prints one line naming the ranks
 *     that did not arrive and where they are instead (or that they do not
 *     respond: stopped, hung, lost), and aborts every rank (MPI_Abort).
 * A rank whose watchdog does not answer is stopped (SIGSTOP), hung in the
 * kernel or gone: the census tells a stall apart from a deadlock. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "cpu.h"

enum { TAG_ASK = 1, TAG_REPLY = 2, NREPLY = 9, MAX_NAMED = 16 };

static const char *const op_names[RTW_NOPS] = {
    [RTW_NONE] = "nothing",
    [RTW_BARRIER] = "rt_barrier",
    [RTW_ALLREDUCE] = "rt_allreduce",
    [RTW_REDUCE_SCATTER] = "rt_reduce_scatter",
    [RTW_ALLGATHER] = "rt_allgather",
    [RTW_ALLTOALL] = "rt_alltoall",
    [RTW_BCAST] = "rt_bcast",
    [RTW_WAIT_SEND] = "rt_wait for a send",
    [RTW_WAIT_RECV] = "rt_wait for a receive",
    [RTW_SPLIT] = "rt_comm_split",
    [RTW_HOST] = "a control collective (rt_host_*)",
    [RTW_IALLREDUCE] = "rt_wait for rt_iallreduce",
    [RTW_IREDUCE_SCATTER] = "rt_wait for rt_ireduce_scatter",
    [RTW_IALLGATHER] = "rt_wait for rt_iallgather",
};

static bool is_async(int64_t op)
{
    return op == RTW_IALLREDUCE || op == RTW_IREDUCE_SCATTER || op == RTW_IALLGATHER;
}

/* ------------------------------------------------ what the main thread waits in */

static _Atomic unsigned gen; /* odd while the fields below change */
static _Atomic int st_op, st_peer, st_tag;
static _Atomic(RtComm *) st_comm;
static _Atomic int64_t st_seq;

typedef struct {
    unsigned gen;
    int op, peer, tag;
    RtComm *comm;
    int64_t seq;
} Snap;

static void publish(int op, RtComm *c, int64_t seq, int peer, int tag)
{
    unsigned g = atomic_load_explicit(&gen, memory_order_relaxed);
    atomic_store_explicit(&gen, g + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&st_op, op, memory_order_relaxed);
    atomic_store_explicit(&st_comm, c, memory_order_relaxed);
    atomic_store_explicit(&st_seq, seq, memory_order_relaxed);
    atomic_store_explicit(&st_peer, peer, memory_order_relaxed);
    atomic_store_explicit(&st_tag, tag, memory_order_relaxed);
    atomic_store_explicit(&gen, g + 2, memory_order_release);
}

void rtcpu_wait_begin(int op, RtComm *c, int peer_world, int tag)
{
    /* Collectives are entered in the same order on every member, so the
     * count identifies one call across ranks; point-to-point waits not. */
    int64_t seq = 0;
    if (op != RTW_WAIT_SEND && op != RTW_WAIT_RECV && c)
        seq = ++c->seq;
    publish(op, c, seq, peer_world, tag);
}

void rtcpu_wait_begin_async(int op, RtComm *c, int64_t seq)
{
    publish(op, c, seq, -1, 0);
}

void rtcpu_wait_end(void)
{
    publish(RTW_NONE, NULL, 0, -1, 0);
}

static Snap snapshot(void)
{
    Snap s;
    for (;;) {
        s.gen = atomic_load_explicit(&gen, memory_order_acquire);
        if (s.gen & 1)
            continue;
        s.op = atomic_load_explicit(&st_op, memory_order_relaxed);
        s.comm = atomic_load_explicit(&st_comm, memory_order_relaxed);
        s.seq = atomic_load_explicit(&st_seq, memory_order_relaxed);
        s.peer = atomic_load_explicit(&st_peer, memory_order_relaxed);
        s.tag = atomic_load_explicit(&st_tag, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&gen, memory_order_relaxed) == s.gen)
            return s;
    }
}

/* ------------------------------------------------------------- timeout */

static _Atomic double timeout_s = -1; /* < 0: not read from the environment yet */

static double default_timeout(void)
{
    const char *e = getenv("PTDC_TIMEOUT");
    if (!e || !*e)
        return 300;
    char *end;
    double t = strtod(e, &end);
    if (*end || !(t >= 0) || isinf(t))
        rt_fatal("PTDC_TIMEOUT=%s: expected a number of seconds (0: no timeout)", e);
    return t;
}

void rt_set_timeout(double seconds)
{
    if (!(seconds >= 0))
        rt_fatal("rt_set_timeout: %g is not a number of seconds (0: no timeout)", seconds);
    atomic_store(&timeout_s, isinf(seconds) ? 0 : seconds);
}

double rt_timeout(void)
{
    double t = atomic_load(&timeout_s);
    if (t < 0) {
        t = default_timeout();
        atomic_store(&timeout_s, t);
    }
    return t;
}

/* ------------------------------------------------------------ the thread */

static struct {
    pthread_t thread;
    bool running, census; /* census: MPI_THREAD_MULTIPLE and ctl made */
    _Atomic bool stop;
    MPI_Comm ctl;
    int rank, size;
} W;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* How long the current state has lasted: the thread notes when gen changed. */
static unsigned seen_gen = 1; /* odd: never a published value */
static double seen_at;

static double waited(const Snap *s, double now)
{
    if (s->gen != seen_gen) {
        seen_gen = s->gen;
        seen_at = now;
    }
    return now - seen_at;
}

/* Where this rank is, and how many non-blocking collectives it has issued
 * on the asker's communicator (id q; -1 if not a member). */
static void fill_reply(int64_t r[NREPLY], int64_t q, double now)
{
    Snap s = snapshot();
    RtComm *qc = q >= 0 && q <= INT32_MAX ? rtcpu_comm_by_id((int)q) : NULL;
    double w = waited(&s, now);
    r[0] = s.op;
    r[1] = s.comm ? s.comm->id : -1;
    r[2] = s.comm ? s.comm->wranks[0] : -1;
    r[3] = s.seq;
    r[4] = s.peer;
    r[5] = s.tag;
    r[6] = (int64_t)(w * 1000);
    r[7] = 0;
    r[8] = qc ? atomic_load(&qc->aseq) : -1;
}

/* ------------------------------------------------ this rank's own line */

static _Atomic(RtWhereFn) where_fn; /* rt_set_where: the program's words */
static atomic_flag told = ATOMIC_FLAG_INIT;

void rt_set_where(RtWhereFn fn) { atomic_store(&where_fn, fn); }

static void describe_comm(RtcStr *b, const RtComm *c);

/* Once per process, at the first stall report it takes part in (its own
 * or another rank's census): one line with where this rank waits and what
 * the program says of where it is. Every responding rank writes its own,
 * so the log places every rank even when the firing rank's census line
 * names only those that did not arrive. */
static void tell_where(const char *why)
{
    if (atomic_flag_test_and_set(&told))
        return;
    Snap s = snapshot();
    RtcStr b = {0};
    rtc_str_fmt(&b, "where at the stall (%s): ", why);
    if (s.op == RTW_NONE) {
        rtc_str_fmt(&b, "outside any collective");
    } else {
        rtc_str_fmt(&b, "waits in %s", op_names[s.op]);
        if (s.op == RTW_WAIT_SEND || s.op == RTW_WAIT_RECV) {
            rtc_str_fmt(&b, " (rank %d, tag %d)", s.peer, s.tag);
        } else {
            rtc_str_fmt(&b, " #%lld on ", (long long)s.seq);
            describe_comm(&b, s.comm);
        }
    }
    RtWhereFn fn = atomic_load(&where_fn);
    if (fn) {
        char w[256] = "";
        fn(w, sizeof w);
        w[sizeof w - 1] = 0;
        if (w[0])
            rtc_str_fmt(&b, "; %s", w);
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "[rank %d] ", W.rank);
    rtc_write_line(2, prefix, "%s", b.s);
    free(b.s);
}

/* Answer every pending question of other ranks' watchdogs. */
static void answer(void)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_ASK, W.ctl, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        int64_t q, r[NREPLY];
        MPI_Recv(&q, 1, MPI_INT64_T, st.MPI_SOURCE, TAG_ASK, W.ctl, MPI_STATUS_IGNORE);
        fill_reply(r, q, mono());
        MPI_Send(r, NREPLY, MPI_INT64_T, st.MPI_SOURCE, TAG_REPLY, W.ctl);
        char why[48];
        snprintf(why, sizeof why, "asked by rank %d", st.MPI_SOURCE);
        tell_where(why); /* after the reply: the asker's grace is not spent on our line */
    }
}

static void describe_comm(RtcStr *b, const RtComm *c)
{
    if (!c) {
        rtc_str_fmt(b, "no communicator");
        return;
    }
    if (c->id == 0) {
        rtc_str_fmt(b, "the world (%d ranks)", c->size);
        return;
    }
    rtc_str_fmt(b, "a group of %d ranks (", c->size);
    for (int i = 0; i < c->size && i < MAX_NAMED; i++)
        rtc_str_fmt(b, "%s%d", i ? ", " : "", c->wranks[i]);
    rtc_str_fmt(b, "%s)", c->size > MAX_NAMED ? ", ..." : "");
}

static bool is_collective(int64_t op)
{
    return op != RTW_NONE && op != RTW_WAIT_SEND && op != RTW_WAIT_RECV && op > 0 &&
           op < RTW_NOPS;
}

/* Is a replying rank waiting in the same kind of call on the same group
 * (blocking collectives and non-blocking ones are numbered apart)? */
static bool same_group(const int64_t *r, const RtComm *c, int op)
{
    return c && is_collective(r[0]) && is_async(r[0]) == is_async(op) && r[1] == c->id &&
           r[2] == c->wranks[0];
}

/* Where a replying rank is, as a clause. */
static void describe_reply(RtcStr *b, const int64_t *r, const RtComm *c)
{
    int64_t op = r[0] >= 0 && r[0] < RTW_NOPS ? r[0] : RTW_NONE;
    if (op == RTW_NONE) {
        rtc_str_fmt(b, "it has been outside any collective for %.1f s (busy or hung)",
                    (double)r[6] / 1000);
        return;
    }
    rtc_str_fmt(b, "it waits in %s", op_names[op]);
    if (is_collective(op))
        rtc_str_fmt(b, " #%lld on %s", (long long)r[3],
                    r[1] == 0                                        ? "the world"
                    : c && r[1] == c->id && r[2] == c->wranks[0] ? "this group"
                                                                   : "another group");
    else
        rtc_str_fmt(b, " (rank %lld, tag %lld)", (long long)r[4], (long long)r[5]);
    rtc_str_fmt(b, " since %.1f s", (double)r[6] / 1000);
}

_Noreturn static void fire(const Snap *s, double w)
{
    alarm(30); /* should the census or MPI_Abort itself hang, SIGALRM ends us */
    tell_where("this rank's watchdog fired");
    RtComm *c = s->comm;
    bool p2p = s->op == RTW_WAIT_SEND || s->op == RTW_WAIT_RECV;
    int n = p2p ? 1 : c ? c->size : 0;
    /* The group's members, then every other rank of the world: the rank
     * that stopped may be outside this group (it holds up a peer that
     * holds up this one), and the first rank to fire must name it, since
     * its MPI_Abort sends SIGCONT to every rank before others' census. */
    int *who = rtc_xcalloc((size_t)(n + W.size + 1), sizeof *who);
    for (int i = 0; i < n; i++)
        who[i] = p2p ? s->peer : c->wranks[i];
    int all = n;
    for (int r = 0; r < W.size; r++) {
        bool in = r == W.rank;
        for (int i = 0; i < n && !in; i++)
            in = who[i] == r;
        if (!in)
            who[all++] = r;
    }
    int64_t(*rep)[NREPLY] = rtc_xcalloc((size_t)(all + 1), sizeof *rep);
    bool *got = rtc_xcalloc((size_t)(all + 1), sizeof *got);
    int asked = 0, answered = 0;
    double t = rt_timeout();
    if (W.census) {
        int64_t q = c ? c->id : -1;
        for (int i = 0; i < all; i++)
            if (who[i] != W.rank && who[i] >= 0 && who[i] < W.size) {
                MPI_Request req;
                if (MPI_Isend(&q, 1, MPI_INT64_T, who[i], TAG_ASK, W.ctl, &req) == MPI_SUCCESS)
                    MPI_Request_free(&req); /* eager; a stopped peer never receives it */
                asked++;
            }
        double grace = fmin(5, fmax(1, t / 10)), until = mono() + grace;
        const struct timespec ms = {0, 1000 * 1000};
        while (answered < asked && mono() < until) {
            answer(); /* ranks asking us at the same time */
            int flag = 0;
            MPI_Status st;
            if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_REPLY, W.ctl, &flag, &st) == MPI_SUCCESS && flag) {
                int64_t r[NREPLY];
                MPI_Recv(r, NREPLY, MPI_INT64_T, st.MPI_SOURCE, TAG_REPLY, W.ctl,
                         MPI_STATUS_IGNORE);
                for (int i = 0; i < all; i++)
                    if (who[i] == st.MPI_SOURCE && !got[i]) {
                        memcpy(rep[i], r, sizeof r);
                        got[i] = true;
                        answered++;
                        break;
                    }
            } else {
                nanosleep(&ms, NULL);
            }
        }
    }

    RtcStr b = {0};
    rtc_str_fmt(&b, "stalled: %s", op_names[s->op]);
    if (p2p) {
        rtc_str_fmt(&b, " (rank %d, tag %d)", s->peer, s->tag);
    } else {
        rtc_str_fmt(&b, " #%lld on ", (long long)s->seq);
        describe_comm(&b, c);
    }
    rtc_str_fmt(&b, " has not completed in %.1f s (timeout %g s)", w, t);
    /* Name who keeps this wait from completing: first the ranks that do
     * not respond, then those elsewhere (outside any collective, in another
     * group's, or in an earlier one of this group). Ranks in this call or
     * past it (it completed for them) are not named. */
    int named = 0, missing = 0;
    for (int pass = 0; pass < 2 && W.census; pass++)
        for (int i = 0; i < (pass ? n : all); i++) {
            if (who[i] == W.rank || got[i] != (pass == 1))
                continue;
            if (i >= n) { /* outside the group: named only when it does not respond */
                missing++;
                if (named++ < MAX_NAMED)
                    rtc_str_fmt(&b, "%s rank %d, outside this %s, does not respond (stopped, "
                                "hung, or lost with its node; it holds up the ranks this one "
                                "waits for)", named == 1 ? ":" : ";", who[i],
                                p2p ? "exchange" : "group");
                continue;
            }
            bool same = got[i] && same_group(rep[i], c, s->op);
            if (!p2p && same && rep[i][3] >= s->seq)
                continue;
            /* A non-blocking collective: issued there is arrived (its
             * communication thread makes the call). */
            if (is_async(s->op) && got[i] && rep[i][8] >= s->seq)
                continue;
            missing++;
            if (named++ >= MAX_NAMED)
                continue;
            rtc_str_fmt(&b, "%s rank %d %s: ", named == 1 ? ":" : ";", who[i],
                        p2p ? "is the peer" : "did not arrive");
            if (got[i])
                describe_reply(&b, rep[i], c);
            else
                rtc_str_fmt(&b, "it does not respond (stopped, hung, or lost with its node)");
        }
    if (!W.census)
        rtc_str_fmt(&b, " (cannot ask the other ranks where they are: MPI without "
                        "MPI_THREAD_MULTIPLE)");
    else if (named > MAX_NAMED)
        rtc_str_fmt(&b, "; and %d more", named - MAX_NAMED);
    else if (missing == 0)
        rtc_str_fmt(&b, ": every rank arrived, yet it did not complete (MPI or the network "
                        "failed)");
    rtc_str_fmt(&b, "; aborting all ranks");
    char prefix[32];
    snprintf(prefix, sizeof prefix, "[rank %d] ", W.rank);
    fflush(stdout);
    rtc_write_line(2, prefix, "%s", b.s);
    if (W.census)
        MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

static void *loop(void *arg)
{
    (void)arg;
    const struct timespec tick = {0, 25 * 1000 * 1000};
    char what[256];
    for (unsigned ticks = 0; !atomic_load(&W.stop); ticks++) {
        nanosleep(&tick, NULL);
        if (rtc_launcher_gone(what, sizeof what)) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "[rank %d] ", W.rank);
            rtc_write_line(2, prefix, "%s", what);
            _exit(1); /* no MPI_Abort: the runtime that would carry it is gone */
        }
        /* Questions every 100 ms only: each probe takes MPI's progress lock
         * from the main thread, and the asker waits a second or more. */
        if (W.census && ticks % 4 == 0)
            answer();
        Snap s = snapshot();
        double now = mono(), w = waited(&s, now), t = rt_timeout();
        if (s.op != RTW_NONE && t > 0 && w >= t)
            fire(&s, w);
    }
    return NULL;
}

void rtcpu_watch_start(bool thread_multiple)
{
    rt_timeout(); /* PTDC_TIMEOUT is checked now, on the main thread */
    MPI_Comm_rank(MPI_COMM_WORLD, &W.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &W.size);
    W.census = false;
    if (thread_multiple) {
        RT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &W.ctl));
        RT_MPI(MPI_Comm_set_errhandler(W.ctl, MPI_ERRORS_RETURN));
        W.census = true;
    }
    rtc_launcher_init();
    atomic_store(&W.stop, false);
    if (pthread_create(&W.thread, NULL, loop, NULL) != 0)
        rt_fatal("ptdrt: cannot start the watchdog thread");
    W.running = true;
}

void rtcpu_watch_stop(void)
{
    if (!W.running)
        return;
    atomic_store(&W.stop, true);
    pthread_join(W.thread, NULL);
    W.running = false;
    if (W.census)
        RT_MPI(MPI_Comm_free(&W.ctl));
    W.census = false;
}
