/* search_pins.c: the requests the search cannot satisfy, each refused with a
 * sentence saying why: pinned layouts that cannot work (before searching),
 * layouts and models that do not fit (after: the item that overflows and by
 * how much, then what would fit), and idle GPUs. */
#include "search/src.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0

/* "34 pieces: embedding, 32 layers, head" */
static const char *pieces_str(const IrGraph *g, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%d pieces:", g->npieces);
    for (int p = 0; p < g->npieces && k < n; p++) {
        const IrPiece *P = &g->pieces[p];
        if (P->rep < 0) {
            k += (size_t)snprintf(buf + k, n - k, "%s %s", p ? "," : "", P->name);
            continue;
        }
        if (p > 0 && g->pieces[p - 1].rep == P->rep)
            continue;
        int c = 0;
        for (int q = p; q < g->npieces && g->pieces[q].rep == P->rep; q++)
            c++;
        k += (size_t)snprintf(buf + k, n - k, "%s %d layer%s", p ? "," : "", c, c == 1 ? "" : "s");
    }
    return buf;
}

/* The first attention node's query and key/value head dims, or false. */
static bool heads(const IrGraph *g, int *hq, int *hkv)
{
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op != IR_OP_ATTENTION)
            continue;
        *hq = g->tensors[n->in[0]].dim[2];
        *hkv = g->tensors[n->in[1]].dim[2];
        return true;
    }
    return false;
}

bool src_check_pins(Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    const IrGraph *g = s->g;
    int N = s->gpus, tp = p->tp, pp = p->pp, dp = p->dp;
    long long gb = (long long)s->gb;
    char buf[256];
    if (tp > N) {
        ir_error(IR_NOLOC, "--tp %d needs more GPUs than the %d given", tp, N);
        return false;
    }
    int hq, hkv;
    if (tp > 1 && heads(g, &hq, &hkv)) {
        const IrDim *Q = &g->dims[hq], *K = &g->dims[hkv];
        if (Q->size % tp) {
            ir_error(IR_NOLOC, "--tp %d does not divide the %lld attention heads of %s (%s = %lld)",
                     tp, (long long)Q->size, g->name, Q->name, (long long)Q->size);
            return false;
        }
        if (hkv != hq && K->size % tp) {
            ir_error(IR_NOLOC, "--tp %d does not divide the %lld key/value heads of %s (%s = %lld)",
                     tp, (long long)K->size, g->name, K->name, (long long)K->size);
            return false;
        }
    }
    int v = p->v > 1 ? p->v : 1;
    if (pp * v > g->npieces) {
        if (v > 1)
            ir_error(IR_NOLOC, "--pp %d with --virtual-stages %d asks for %d model chunks, more than "
                     "%s has pieces to give them (%s)", pp, v, pp * v, g->name, pieces_str(g, buf, sizeof buf));
        else
            ir_error(IR_NOLOC, "--pp %d asks for more pipeline stages than %s has pieces to give "
                     "them (%s)", pp, g->name, pieces_str(g, buf, sizeof buf));
        return false;
    }
    if (pp > N) {
        ir_error(IR_NOLOC, "--pp %d needs more GPUs than the %d given", pp, N);
        return false;
    }
    if (dp && tp && pp && dp * tp * pp != N) {
        ir_error(IR_NOLOC, "--dp %d x --tp %d x --pp %d = %d GPUs, but --gpus is %d", dp, tp, pp,
                 dp * tp * pp, N);
        return false;
    }
    int fixed = (tp ? tp : 1) * (pp ? pp : 1) * (dp ? dp : 1);
    if (N % fixed) {
        char what[96] = "";
        size_t k = 0;
        if (dp)
            k += (size_t)snprintf(what + k, sizeof what - k, "--dp %d", dp);
        if (tp)
            k += (size_t)snprintf(what + k, sizeof what - k, "%s--tp %d", k ? " x " : "", tp);
        if (pp)
            k += (size_t)snprintf(what + k, sizeof what - k, "%s--pp %d", k ? " x " : "", pp);
        if ((dp != 0) + (tp != 0) + (pp != 0) > 1)
            snprintf(what + k, sizeof what - k, " = %d", fixed);
        ir_error(IR_NOLOC, "--gpus %d is not divisible by %s", N, what);
        return false;
    }
    if (pp) {
        int n = N / pp;
        if (n % s->gpn && s->gpn % n) {
            ir_error(IR_NOLOC, "with --pp %d each pipeline stage gets %d GPUs, which is neither whole "
                     "nodes of %d GPUs nor a divisor of one", pp, n, s->gpn);
            return false;
        }
    }
    if (p->sp == 1 && tp == 1) {
        ir_error(IR_NOLOC, "--sp on needs --tp of at least 2: sequence parallelism splits the "
                 "tensor-parallel group's work along the sequence");
        return false;
    }
    /* The data-parallel degree, when the pins determine it. */
    int d = dp ? dp : tp && pp ? N / (tp * pp) : 0;
    if (d && gb % d) {
        if (dp)
            ir_error(IR_NOLOC, "--dp %d does not divide the global batch of %lld sequences", d, gb);
        else
            ir_error(IR_NOLOC, "dp %d (%d GPUs / (tp %d x pp %d)) does not divide the global batch "
                     "of %lld sequences", d, N, tp, pp, gb);
        return false;
    }
    if (p->micro_batch) {
        long long mb = (long long)p->micro_batch * (d ? d : 1);
        if (gb % mb) {
            if (d)
                ir_error(IR_NOLOC, "--micro-batch %d x dp %d = %lld sequences per micro-batch do not "
                         "divide the global batch of %lld sequences", p->micro_batch, d, mb, gb);
            else
                ir_error(IR_NOLOC, "--micro-batch %d does not divide the global batch of %lld "
                         "sequences", p->micro_batch, gb);
            return false;
        }
    }
    bool inter = p->schedule == PASS_SCHED_INTERLEAVED || p->v > 1;
    if (inter) {
        if (s->rep0 < 0) {
            ir_error(IR_NOLOC, "the interleaved schedule needs a model whose layers form one repeat; "
                     "%s has %s", g->name, pieces_str(g, buf, sizeof buf));
            return false;
        }
        if (pp == 1) {
            ir_error(IR_NOLOC, "the interleaved schedule needs --pp of at least 2");
            return false;
        }
        bool any = false;
        for (int q = pp ? pp : 2; q <= (pp ? pp : s->rep_count) && !any; q++)
            for (int w = p->v > 1 ? p->v : 2; w <= (p->v > 1 ? p->v : s->rep_count) && !any; w++)
                any = s->rep_count % (q * w) == 0;
        if (!any && !pp) {
            if (p->v > 1)
                ir_error(IR_NOLOC, "--virtual-stages %d needs the %d layers to split into pp x %d "
                         "equal chunks for some pp of at least 2", p->v, s->rep_count, p->v);
            else
                ir_error(IR_NOLOC, "the interleaved schedule needs the %d layers to split into "
                         "pp x v equal chunks with pp and v at least 2", s->rep_count);
            return false;
        }
        if (pp && v > 1 && s->rep_count % (pp * v)) {
            ir_error(IR_NOLOC, "--virtual-stages %d with --pp %d needs the %d layers to split into "
                     "%d equal chunks", v, pp, s->rep_count, pp * v);
            return false;
        }
        if (pp && d && p->micro_batch) {
            long long m = gb / ((long long)p->micro_batch * d);
            if (m % pp) {
                ir_error(IR_NOLOC, "the interleaved schedule needs the number of micro-batches "
                         "(%lld) to be a multiple of --pp %d", m, pp);
                return false;
            }
        }
    }
    return true;
}

/* ------------------------------------------------------------ not fitting */

static double states_total(const PassCostCtx *c, const IrGraph *g)
{
    PassMesh one;
    pass_mesh_make(&one, 1, 1, 8);
    PassStrategy rep = {{-1, -1}};
    double t = 0;
    for (int n = 0; n < g->nfwd; n++)
        t += pass_param_bytes(c, g, &g->nodes[n], &one, &rep, 0);
    return t;
}

static bool try_search(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *q,
                       PassIlpCache *cache, PassSearchAlt *a);

int pass_search_min_gpus(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                         PassIlpCache *cache, int from, int limit, PassSearchAlt *best)
{
    double reserve = c->alloc_reserve > 0 ? c->alloc_reserve : PASS_MEM_RESERVE;
    double usable = c->cl->gpu.hbm_bytes * (1 - reserve);
    double runtime = pass_cost_consts.cuda_ctx_bytes + pass_cost_consts.workspace_bytes;
    double states = states_total(c, g);
    PassSearchOpts q = *o;
    q.pins.dp = 0;
    q.keep = 1;
    q.first_fit = true;
    memset(&q.filter, 0, sizeof q.filter);
    for (int n = from > 0 ? from : 1; n <= limit; n++) {
        /* Fully sharded model states over n GPUs must fit at least. */
        if (states / n + runtime > usable)
            continue;
        if ((q.pins.tp && n % q.pins.tp) || (q.pins.pp && n % q.pins.pp))
            continue;
        q.gpus = n;
        PassSearchResult r;
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull)
            ir_diag_set_stream(devnull);
        bool ok = pass_search(c, g, &q, cache, &r);
        if (devnull) {
            ir_diag_set_stream(stderr);
            fclose(devnull);
        }
        if (ok && r.found) {
            /* The first plan that fits shows the count; report the best one. */
            pass_search_result_free(&r);
            q.first_fit = false;
            if (!try_search(c, g, &q, cache, best))
                ir_die("search: a plan fits on %d GPUs, then none does", n);
            return n;
        }
        if (ok)
            pass_search_result_free(&r);
    }
    return 0;
}

/* The largest item of a rank's memory. */
static const char *largest(const PassRankMem *m, double *v, char *buf, size_t n)
{
    struct {
        const char *name;
        double v;
    } it[] = {{"weights", m->weights}, {"gradients", m->grads}, {"optimizer state", m->optim},
              {"activations", m->acts}, {"recomputation working set", m->recompute_ws},
              {"backward temporaries", m->transient}, {"communication buffers", m->buffers},
              {"CUDA and NCCL runtime", m->runtime}, {"allocator fragmentation", m->frag}};
    int b = 0;
    for (int i = 1; i < (int)(sizeof it / sizeof it[0]); i++)
        if (it[i].v > it[b].v)
            b = i;
    *v = it[b].v;
    if (it[b].v == m->acts)
        snprintf(buf, n, "activations (%g micro-batch%s in flight)", m->inflight, m->inflight == 1 ? "" : "es");
    else
        snprintf(buf, n, "%s", it[b].name);
    return buf;
}

static void breakdown(const PassRankMem *m, char *buf, size_t n)
{
    snprintf(buf, n, "weights %.1f, gradients %.1f, optimizer state %.1f, activations %.1f "
             "(%g in flight), recomputation %.1f, temporaries %.1f, buffers %.1f, runtime %.1f GiB",
             m->weights / GIB, m->grads / GIB, m->optim / GIB, m->acts / GIB, m->inflight,
             m->recompute_ws / GIB, m->transient / GIB, m->buffers / GIB, m->runtime / GIB);
}

static bool any_pin(const PassSearchPins *p)
{
    return p->tp || p->pp || p->dp || p->micro_batch || p->recompute >= 0 || p->sp >= 0 ||
           p->zero >= 0 || p->schedule >= 0 || p->v;
}

/* Search again with opts q (quietly); the best plan into a, or false. */
static bool try_search(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *q,
                       PassIlpCache *cache, PassSearchAlt *a)
{
    PassSearchResult r;
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull)
        ir_diag_set_stream(devnull);
    bool ok = pass_search(c, g, q, cache, &r);
    if (devnull) {
        ir_diag_set_stream(stderr);
        fclose(devnull);
    }
    if (!ok)
        return false;
    bool found = r.found;
    if (found) {
        *a = r.alt[0];
        r.alt[0] = (PassSearchAlt){0};
        r.nalt = 0;
    }
    pass_search_result_free(&r);
    return found;
}

void pass_search_explain_nofit(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o,
                               PassIlpCache *cache, const PassSearchResult *r)
{
    const PassGpu *gpu = &c->cl->gpu;
    int N = r->gpus;
    const PassSearchPins *pin = &o->pins;
    char buf[512], lay[256], flags[256];
    if (r->no_layout) {
        ir_error(IR_NOLOC, "no layout of %d GPUs satisfies the pins: pipeline stages must be whole "
                 "nodes of %d GPUs or a divisor of one, and dp x micro-batch must divide the global "
                 "batch of %lld sequences", N, c->cl->gpus_per_node > 0 ? c->cl->gpus_per_node : 8,
                 (long long)r->global_batch);
        return;
    }
    double reserve = c->alloc_reserve > 0 ? c->alloc_reserve : PASS_MEM_RESERVE;
    double usable = gpu->hbm_bytes * (1 - reserve);
    if (r->have_closest) {
        const PassSearchAlt *a = &r->closest;
        const PassRankMem *m = &a->pred.mem[a->pred.peak_rank];
        double big;
        char item[128];
        largest(m, &big, item, sizeof item);
        pass_layout_str(&a->layout, lay, sizeof lay);
        if (any_pin(pin))
            ir_error(IR_NOLOC, "the layout does not fit in memory: pipeline rank %d needs %.1f GiB "
                     "per GPU, %.1f GiB more than the %.1f GiB usable of %.1f GiB; its largest item "
                     "is %s, %.1f GiB", a->pred.peak_rank, m->total / GIB, (m->total - usable) / GIB,
                     usable / GIB, gpu->hbm_bytes / GIB, item, big / GIB);
        else
            ir_error(IR_NOLOC, "%s does not fit on %d x %s: the leanest layout (%s) needs %.1f GiB "
                     "per GPU on pipeline rank %d, %.1f GiB more than the %.1f GiB usable; its "
                     "largest item is %s, %.1f GiB", g->name, N, gpu->name, lay, m->total / GIB,
                     a->pred.peak_rank, (m->total - usable) / GIB, usable / GIB, item, big / GIB);
        breakdown(m, buf, sizeof buf);
        ir_note(IR_NOLOC, "%s on pipeline rank %d: %s", any_pin(pin) ? lay : "that layout",
                a->pred.peak_rank, buf);
    } else {
        ir_error(IR_NOLOC, "%s does not fit on %d x %s: its model states alone need more than the "
                 "%.1f GiB usable per GPU", g->name, N, gpu->name, usable / GIB);
    }

    /* What would fit: one pin relaxed at a time, then none, then more GPUs. */
    if (any_pin(pin)) {
        static const char *const what[] = {"--recompute", "--micro-batch", "--zero", "--sp",
                                           "--schedule", "--tp, --pp and --dp"};
        for (int i = 0; i < 6; i++) {
            PassSearchOpts q = *o;
            q.keep = 1;
            q.first_fit = false;
            memset(&q.filter, 0, sizeof q.filter);
            bool had = true;
            switch (i) {
            case 0: had = pin->recompute >= 0; q.pins.recompute = -1; break;
            case 1: had = pin->micro_batch > 0; q.pins.micro_batch = 0; break;
            case 2: had = pin->zero >= 0; q.pins.zero = -1; break;
            case 3: had = pin->sp >= 0; q.pins.sp = -1; break;
            case 4: had = pin->schedule >= 0 || pin->v; q.pins.schedule = -1; q.pins.v = 0; break;
            case 5: had = pin->tp || pin->pp || pin->dp; q.pins.tp = q.pins.pp = q.pins.dp = 0; break;
            }
            if (!had)
                continue;
            PassSearchAlt a;
            if (try_search(c, g, &q, cache, &a)) {
                ir_note(IR_NOLOC, "without %s it fits: %s (step %.2f s, peak %.1f GiB): %s", what[i],
                        pass_layout_str(&a.layout, lay, sizeof lay), a.pred.step_time_s,
                        a.pred.peak_mem_bytes / GIB, pass_layout_flags(&a.layout, flags, sizeof flags));
                pass_search_alt_free(&a);
                return;
            }
        }
        PassSearchOpts q = *o;
        pass_search_pins_none(&q.pins);
        q.keep = 1;
        memset(&q.filter, 0, sizeof q.filter);
        PassSearchAlt a;
        if (try_search(c, g, &q, cache, &a)) {
            ir_note(IR_NOLOC, "without any pins it fits: %s (step %.2f s, peak %.1f GiB): %s",
                    pass_layout_str(&a.layout, lay, sizeof lay), a.pred.step_time_s,
                    a.pred.peak_mem_bytes / GIB, pass_layout_flags(&a.layout, flags, sizeof flags));
            pass_search_alt_free(&a);
            return;
        }
    }
    PassSearchOpts q = *o;
    pass_search_pins_none(&q.pins);
    PassSearchAlt a;
    int limit = N * 64 > 65536 ? N * 64 : 65536;
    int n = pass_search_min_gpus(c, g, &q, cache, N + 1, limit, &a);
    if (n > 0) {
        ir_note(IR_NOLOC, "the smallest number of %s GPUs on which %s fits is %d: %s (step %.2f s, "
                "peak %.1f GiB)", gpu->name, g->name, n, pass_layout_str(&a.layout, lay, sizeof lay),
                a.pred.step_time_s, a.pred.peak_mem_bytes / GIB);
        pass_search_alt_free(&a);
    } else {
        ir_note(IR_NOLOC, "%s fits on no number of %s GPUs up to %d", g->name, gpu->name, limit);
    }
}

bool pass_search_idle_note(const PassSearchResult *r, int gpn, char *buf, size_t n)
{
    if (!r->found || r->alt[0].layout.gpus >= r->gpus)
        return false;
    int used = r->alt[0].layout.gpus, idle = r->gpus - used;
    if (!r->full_valid)
        snprintf(buf, n, "the plan uses %d of the %d GPUs; %d stay idle: no layout uses all %d "
                 "(pipeline stages must be whole nodes of %d GPUs or a divisor of one, and dp must "
                 "divide the global batch of %lld sequences)", used, r->gpus, idle, r->gpus, gpn,
                 (long long)r->global_batch);
    else if (r->full_ranked)
        snprintf(buf, n, "the plan uses %d of the %d GPUs; %d stay idle: layouts using all %d are "
                 "predicted slower (the best one ranked takes %.3f s per step against %.3f s)", used,
                 r->gpus, idle, r->gpus, r->best_full_step_s, r->alt[0].pred.step_time_s);
    else
        snprintf(buf, n, "the plan uses %d of the %d GPUs; %d stay idle: every layout using all %d "
                 "is predicted slower or does not fit", used, r->gpus, idle, r->gpus);
    return true;
}
