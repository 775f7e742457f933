/* train_trace.c: PTDC_TRACE=FILE, the run as a timeline in the Chrome
 * trace-event JSON format (ui.perfetto.dev, chrome://tracing; docs/trace.md).
 *
 * For the first PTDC_TRACE_STEPS steps (default 3) every rank records, in
 * host memory, spans of rt_time (which synchronises the streams on CUDA, so
 * a span is the device's time, at the cost of the overlap it serialises):
 *   tid 0 "step"           each step;
 *   tid 1 "compute"        forward and backward of each micro-batch and
 *                          chunk (their kernels), the gradient reduction
 *                          after the schedule, the optimizer;
 *   tid 2 "communication"  each blocking collective (bytes, group), each
 *                          pipeline send (its post) and receive (until the
 *                          data is there), each non-blocking collective's
 *                          issue (bytes, group) and the waits for them;
 *   tid 3 "kernels"        with PTDC_TRACE_KERNELS=1, every other call
 *                          trainer.h times (GEMMs, attention, norms, ...),
 *                          off by default: a large model makes many per
 *                          step, and PTDC_TRACE_MAX_MB would cut the trace.
 * Each rank keeps at most its share of PTDC_TRACE_MAX_MB (default 1024 MiB
 * for the whole trace) and counts the spans past it, which the trace and
 * rank 0's log then name. After the last traced step (or at the end of a
 * shorter run) rank 0 gathers every rank's events and writes FILE, one
 * JSON document, pid = world rank. Clocks: rt_time is each host's monotonic clock, so before the
 * first step rank 0 measures every rank's offset from its own by a ping
 * exchange (the round trip with the smallest delay of PING_ROUNDS; the
 * error is at most half of it, written as clock_error_us in the process
 * name's args) and every timestamp is on rank 0's clock, microseconds from
 * that moment. PTDC_TRACE_TEST_SKEW=S (tests) sets rank r's trace clock r S
 * seconds ahead: the offsets must take it out again.
 *
 * Off (PTDC_TRACE unset), each traced place costs the untaken branch on
 * cg_prof_on it shares with PTDC_PROFILE. */
#include "train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PING_ROUNDS = 8, LANE_STEP = 0, LANE_COMPUTE = 1, LANE_COMM = 2, LANE_KERNEL = 3,
       GATHER_BLOCK = 1 << 16 };

static const char *trace_path;   /* PTDC_TRACE, NULL when off */
static long trace_steps = 3;     /* PTDC_TRACE_STEPS */
static int kernels;              /* PTDC_TRACE_KERNELS: every listed call's span too */
static int traced;               /* steps recorded so far */
static int written;
static double offset_s;          /* rank 0's clock minus this rank's */
static double error_s;           /* half the best round trip */
static double origin_s;          /* rank 0's clock at the end of the exchange */
static double step_t0;
static double skew_s;            /* PTDC_TRACE_TEST_SKEW x rank: a clock made wrong on purpose */
static char *text;               /* this rank's events, each followed by ",\n" */
static size_t len, cap;
static size_t max_len;           /* this rank's share of PTDC_TRACE_MAX_MB */
static long dropped;             /* spans not recorded past max_len */

static const char *const call_names[CG_PF_N] = {
#define CG_TR_NAME(f) #f,
    CG_PROFILED(CG_TR_NAME)
#undef CG_TR_NAME
};

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...)
{
    if (!text) { /* (never text + 0 on a null pointer) */
        cap = 1 << 16;
        text = (char *)malloc(cap);
        if (!text)
            rt_fatal("out of host memory (trace)");
    }
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(text + len, cap - len, fmt, ap);
        va_end(ap);
        if (n < 0)
            rt_fatal("trace: formatting an event failed");
        if ((size_t)n < cap - len) {
            len += (size_t)n;
            return;
        }
        cap = 2 * cap + (size_t)n;
        text = (char *)realloc(text, cap);
        if (!text)
            rt_fatal("out of host memory (trace)");
    }
}

/* This rank's trace clock: rt_time, shifted by the test skew (tests show
 * with it that the offsets correct clocks that disagree, as separate hosts'
 * do; one host's ranks share one monotonic clock). */
static double now_s(void) { return rt_time() + skew_s; }

static double us(double t) { return (t + skew_s + offset_s - origin_s) * 1e6; }

/* Nanoseconds as microseconds with three decimals, exactly. */
static const char *trace_us3(char *buf, long long ns)
{
    unsigned long long a = ns < 0 ? (unsigned long long)-ns : (unsigned long long)ns;
    snprintf(buf, 32, "%s%llu.%03llu", ns < 0 ? "-" : "", a / 1000, a % 1000);
    return buf;
}

/* A complete event ("X") on this rank's lane; args: JSON members or "".
 * Both ends are rounded to whole nanoseconds and dur is their difference,
 * so ts + dur is the rounded end exactly: rounding ts and dur apart could
 * push a span 1 ns into the next one. A span ends 1 ns early besides, so
 * that spans which touch stay apart in viewers that add ts and dur in
 * floating point (speedscope, chrome://tracing: report/plan_trace.c). */
static void span(int lane, const char *name, const char *cat, double t0, double t1, const char *args)
{
    if (len >= max_len) {
        dropped++;
        return;
    }
    long long a = llround(us(t0) * 1e3), b = llround(us(t1) * 1e3);
    long long d = b - a > 1 ? b - a - 1 : b > a ? b - a : 0;
    char ts[32], dur[32];
    put("{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,\"name\":\"%s\",\"cat\":\"%s\","
        "\"args\":{%s}},\n", tr_world_rank, lane, trace_us3(ts, a), trace_us3(dur, d), name, cat, args);
}

/* The group a communicator is: which mesh axes, or what else it joins. */
static const char *group_name(const RtComm *c, char *buf, size_t n)
{
    static const char *const axes[3] = {CG_AXIS0, CG_AXIS1, CG_AXIS2};
    if (!c)
        return "self";
    if (c == tr_world)
        return "world";
    if (c == tr_cp_ring)
        return "cp ring";
    for (int m = 1; m < 1 << CG_NAXES; m++)
        if (g_comm[m] == c) {
            size_t k = 0;
            buf[0] = 0;
            for (int a = 0; a < CG_NAXES && k < n; a++)
                if (m >> a & 1)
                    k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? "+" : "", axes[a]);
            return buf;
        }
    for (int i = 0; i < CG_NTIED; i++)
        if (tr_tied[i] == c) {
            snprintf(buf, n, "tied %d", i);
            return buf;
        }
    return "other";
}

static int64_t type_bytes(RtType t) { return t == RT_ACT ? (int64_t)sizeof(rt_act) : 4; }

static void comm_span(const char *name, double t0, double t1, const RtComm *c, int64_t bytes)
{
    char g[64], args[160];
    snprintf(args, sizeof args, "\"bytes\":%lld,\"group\":\"%s\",\"group_size\":%d",
             (long long)bytes, group_name(c, g, sizeof g), c ? rt_comm_size(c) : 1);
    span(LANE_COMM, name, "collective", t0, t1, args);
}

void cg_prof_comm(int call, double t0, const RtComm *c, int64_t elems, RtType t, int scale)
{
    double t1 = rt_time();
    if (cg_prof_on & CG_TIMED_HEALTH)
        tr_health_wait(call, t1 - t0);
    if (cg_prof_on & CG_TIMED_PROFILE)
        cg_prof_add(call, t0);
    if (!(cg_prof_on & CG_TIMED_TRACE))
        return;
    int p = c ? rt_comm_size(c) : 1;
    int64_t e = scale > 0 ? elems * p : scale < 0 ? elems / p : elems;
    comm_span(call_names[call], t0, t1, c, e * type_bytes(t));
}

void tr_trace_call(int call, double t0, double t1)
{
    /* The main thread's waits: for non-blocking collectives, and for the
     * pipeline sends still in flight at a stage's end (the rest is timed
     * where it is issued, with its bytes). */
    switch (call) {
    case CG_PF_rt_wait:
        span(LANE_COMM, "wait (non-blocking collectives)", "wait", t0, t1, "");
        break;
    case CG_PF_cg_wait:
        span(LANE_COMM, "wait (pipeline sends)", "wait", t0, t1, "");
        break;
    /* communication, traced with its bytes where it is issued */
    case CG_PF_rt_allreduce: case CG_PF_rt_reduce_scatter: case CG_PF_rt_allgather:
    case CG_PF_rt_alltoall: case CG_PF_rt_allgather_dim: case CG_PF_rt_reduce_scatter_dim:
    case CG_PF_rt_alltoall_dim: case CG_PF_cg_recv: case CG_PF_cg_issue: case CG_PF_cg_grad_ready:
        break;
    default: /* a kernel, a copy, a token load: one after another on the main thread */
        if (kernels)
            span(LANE_KERNEL, call_names[call], "kernel", t0, t1, "");
    }
}

void tr_trace_issue(const char *name, double t0, const RtComm *c, int64_t elems, RtType t)
{
    comm_span(name, t0, rt_time(), c, elems * type_bytes(t));
}

void tr_trace_p2p(int recv, double t0, int64_t n, RtType t, int pp_peer, int tag)
{
    char args[200];
    int peer = pp_peer * CG_DEVICES + tr_mesh_index;
    snprintf(args, sizeof args, "\"bytes\":%lld,\"group\":\"pipe\",\"peer\":%d,\"src\":%d,\"dst\":%d,"
             "\"tag\":%d", (long long)(n * type_bytes(t)), peer, recv ? peer : tr_world_rank,
             recv ? tr_world_rank : peer, tag);
    span(LANE_COMM, recv ? "recv" : "send", recv ? "recv" : "send", t0, rt_time(), args);
}

void tr_trace_op(const CgSchedOp *op, double t0)
{
    char name[64], args[120];
    /* As the plan's trace names them (report/plan_trace.c). */
    static const char *const what[] = {"forward", "backward", "weight gradients"},
                            *const dir[] = {"fwd", "bwd", "wgrad"};
    int k = op->bwd >= (int)CG_OP_FWD && op->bwd <= (int)CG_OP_WGRAD ? (int)op->bwd : (int)CG_OP_BWD;
    snprintf(name, sizeof name, "%s mb %d chunk %d", what[k], op->mb, op->chunk);
    snprintf(args, sizeof args, "\"pp\":%d,\"chunk\":%d,\"mb\":%d,\"dir\":\"%s\",\"step\":%lld",
             tr_pp_rank, op->chunk, op->mb, dir[k], (long long)tr_step + 1);
    span(LANE_COMPUTE, name, what[k], t0, rt_time(), args);
}

void tr_trace_span(const char *name, double t0)
{
    span(LANE_COMPUTE, name, "compute", t0, rt_time(), "");
}

/* One scalar as two int32 (the p2p calls move device buffers of RtType). */
static void ping(RtComm *w, int32_t *dev, int peer, int send, double *value)
{
    int32_t h[2] = {0, 0};
    if (send) {
        memcpy(h, value, sizeof h);
        rt_to_device(dev, h, sizeof h);
        rt_wait(rt_isend(w, dev, 2, RT_I32, peer, 35));
    } else {
        rt_wait(rt_irecv(w, dev, 2, RT_I32, peer, 35));
        rt_to_host(h, dev, sizeof h);
        memcpy(value, h, sizeof h);
    }
}

/* Every rank's offset from rank 0's clock (see the top). */
static void sync_clocks(void)
{
    RtComm *w = tr_world;
    int32_t *dev = (int32_t *)rt_alloc(2 * sizeof(int32_t));
    rt_barrier(w);
    double best = 1e30;
    for (int r = 1; r < rt_world_size(); r++)
        for (int k = 0; k < PING_ROUNDS; k++) {
            if (ROOT) {
                double x, now;
                ping(w, dev, r, 0, &x);
                now = now_s();
                ping(w, dev, r, 1, &now);
            } else if (tr_world_rank == r) {
                double x = 0, t0 = now_s(), t_root;
                ping(w, dev, 0, 1, &x);
                ping(w, dev, 0, 0, &t_root);
                double t1 = now_s();
                if (t1 - t0 < best) {
                    best = t1 - t0;
                    offset_s = t_root - (t0 + t1) / 2;
                    error_s = best / 2;
                }
            }
        }
    /* The origin: rank 0's clock now, told to every rank. */
    double now = now_s() + offset_s;
    double *all = (double *)malloc(sizeof(double) * (size_t)rt_world_size());
    if (!all)
        rt_fatal("out of host memory (trace)");
    rt_host_allgather(w, all, &now, sizeof now);
    origin_s = all[0];
    free(all);
    rt_free(dev);
}

void tr_trace_init(void)
{
    const char *e = getenv("PTDC_TRACE");
    if (!e || !*e)
        return;
    trace_path = e;
    const char *s = getenv("PTDC_TRACE_STEPS");
    int64_t bad = 0;
    char err[2048];
    if (s) {
        char *end;
        trace_steps = strtol(s, &end, 10);
        if (end == s || *end || trace_steps < 1) {
            if (ROOT)
                rt_log("train: PTDC_TRACE_STEPS expects a positive integer (steps traced), got '%s'",
                       s);
            bad = 1;
        }
    }
    const char *mb = getenv("PTDC_TRACE_MAX_MB");
    double total_mb = 1024;
    if (mb) {
        char *end;
        total_mb = strtod(mb, &end);
        if (end == mb || *end || !(total_mb > 0)) {
            if (ROOT)
                rt_log("train: PTDC_TRACE_MAX_MB expects a number of MiB > 0 (the whole trace's "
                       "size), got '%s'", mb);
            bad = 1;
        }
    }
    max_len = (size_t)(total_mb * 1048576.0 / rt_world_size());
    const char *kn = getenv("PTDC_TRACE_KERNELS");
    kernels = kn && *kn && strcmp(kn, "0") != 0;
    const char *skew = getenv("PTDC_TRACE_TEST_SKEW");
    if (skew)
        skew_s = atof(skew) * tr_world_rank;
    if (ROOT && !bad && rt_output_check(trace_path, false, err, sizeof err)) {
        rt_log("train: PTDC_TRACE %s", err);
        bad = 1;
    }
    if (rt_host_max(tr_world, bad)) {
        rt_finalize();
        exit(2);
    }
    sync_clocks();
    static const char *const axes[3] = {CG_AXIS0, CG_AXIS1, CG_AXIS2};
    char where[160];
    size_t k = (size_t)snprintf(where, sizeof where, "rank %d (pp %d", tr_world_rank, tr_pp_rank);
    for (int a = 0; a < CG_NAXES && k < sizeof where; a++)
        k += (size_t)snprintf(where + k, sizeof where - k, ", %s %d", axes[a], g_coord[a]);
    if (k < sizeof where)
        snprintf(where + k, sizeof where - k, ")");
    put("{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"ts\":0,\"name\":\"process_name\",\"args\":{\"name\":\"%s\","
        "\"pp\":%d,\"clock_offset_us\":%.3f,\"clock_error_us\":%.3f}},\n", tr_world_rank, where,
        tr_pp_rank, offset_s * 1e6, error_s * 1e6);
    put("{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"ts\":0,\"name\":\"process_sort_index\",\"args\":"
        "{\"sort_index\":%d}},\n", tr_world_rank, tr_world_rank);
    static const char *const lanes[4] = {"step", "compute", "communication", "kernels"};
    for (int l = 0; l < (kernels ? 4 : 3); l++)
        put("{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"ts\":0,\"name\":\"thread_name\",\"args\":"
            "{\"name\":\"%s\"}},\n", tr_world_rank, l, lanes[l]);
}

void tr_trace_step_begin(void)
{
    if (!trace_path || traced >= trace_steps)
        return;
    cg_prof_on |= CG_TIMED_TRACE;
    step_t0 = rt_time();
}

/* Rank 0 receives every rank's events in rounds of whole events (a block
 * each, its length first), writing them as they come: its memory is the
 * world's blocks of one round, not the whole trace. */
static void write_trace(void)
{
    written = 1;
    int world = rt_world_size();
    /* A rank past its share says so on its row (Perfetto shows the label);
     * rank 0 says how many spans were left out. */
    if (dropped)
        put("{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"ts\":0,\"name\":\"process_labels\",\"args\":"
            "{\"labels\":\"truncated: %ld spans past PTDC_TRACE_MAX_MB left out\"}},\n",
            tr_world_rank, dropped);
    int64_t all_dropped = rt_host_max(tr_world, dropped);
    if (ROOT && all_dropped)
        rt_log("warning: PTDC_TRACE: a rank left out %lld spans past its share of PTDC_TRACE_MAX_MB; "
               "the trace is incomplete (fewer PTDC_TRACE_STEPS, or a larger PTDC_TRACE_MAX_MB)",
               (long long)all_dropped);
    size_t blk = GATHER_BLOCK;
    char *mine = (char *)malloc(blk), *all = (char *)malloc(blk * (size_t)world);
    if (!mine || !all)
        rt_fatal("out of host memory (trace)");
    FILE *f = NULL;
    if (ROOT) {
        f = fopen(trace_path, "w");
        if (!f)
            rt_log("train: PTDC_TRACE %s cannot be written now; no trace", trace_path);
        else
            fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":\"%s\",\"world\":%d,"
                    "\"steps_traced\":%d,\"clock\":\"rank 0's monotonic clock; other ranks' "
                    "offsets by ping exchange (min of %d round trips)\"},\"traceEvents\":[\n",
                    CG_MODEL, world, traced, PING_ROUNDS);
    }
    size_t sent = 0, total = 0;
    for (;;) {
        size_t n = len - sent, room = blk - sizeof(int64_t);
        if (n > room) { /* end the block after a whole event */
            n = room;
            while (n > 0 && text[sent + n - 1] != '\n')
                n--;
            if (n == 0)
                rt_fatal("trace: an event longer than %zu bytes", room);
        }
        int64_t n64 = (int64_t)n;
        memcpy(mine, &n64, sizeof n64);
        memcpy(mine + sizeof n64, text + sent, n);
        sent += n;
        rt_host_allgather(tr_world, all, mine, blk);
        int any = 0;
        for (int r = 0; r < world; r++) {
            memcpy(&n64, all + (size_t)r * blk, sizeof n64);
            any |= n64 > 0;
            if (f && n64 > 0)
                fwrite(all + (size_t)r * blk + sizeof n64, 1, (size_t)n64, f);
            total += (size_t)n64;
        }
        if (!any)
            break;
    }
    if (f) {
        /* the last event: the trace's own name, with no comma after it */
        fprintf(f, "{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"ts\":0,\"name\":\"trace_name\","
                "\"args\":{\"name\":\"measured\"}}\n]}\n");
        if (fclose(f) != 0)
            rt_log("train: PTDC_TRACE %s: writing failed; the trace is incomplete", trace_path);
        else
            printf("trace: wrote %s (%zu bytes of events, %d ranks, the first %d steps of this run)\n",
                   trace_path, total, world, traced);
        fflush(stdout);
    }
    free(mine);
    free(all);
    free(text);
    text = NULL;
    len = cap = 0;
}

void tr_trace_step_end(void)
{
    if (!(cg_prof_on & CG_TIMED_TRACE))
        return;
    char name[48];
    snprintf(name, sizeof name, "step %lld", (long long)tr_step);
    span(LANE_STEP, name, "step", step_t0, rt_time(), "");
    cg_prof_on &= ~CG_TIMED_TRACE;
    if (++traced == trace_steps)
        write_trace();
}

void tr_trace_finish(void)
{
    if (trace_path && !written)
        write_trace();
}
