/* test_corpus.c: the search is never beaten by a layout the user could pin
 * (tests/search/CMakeLists.txt runs each subcommand as a ctest):
 *   corpus DIR SET        for every case of SET (a model, a GPU, a GPU
 *                         count), the search's plan against every layout
 *                         of its own space the user could pin in full
 *                         (--tp --pp --dp --micro-batch --recompute --sp
 *                         --zero --schedule [--virtual-stages]), each
 *                         priced as ptdc prices a pinned layout: no pinned
 *                         layout that fits may be faster than the search's
 *                         plan by more than float noise (0.1%). Prints one
 *                         row per case, and the layouts that beat it;
 *   gpt3-175b DIR GPUS    the case on H100s: the search's plan is at
 *                         least as fast as the published TP4 x PP8 x v6
 *                         with the rest searched.
 *
 * The layouts priced per case: tp a power of two up to a node, every pp
 * whose stage size is whole nodes or a divisor of one, dp = GPUs / (tp pp)
 * (a pinned layout uses every GPU) dividing the global batch, 1F1B and every
 * v of the interleaved schedule (equal chunks, a micro-batch count that is
 * a multiple of pp), micro-batches of 1 to 4 sequences per replica, every
 * recomputation policy that reruns something (selective under flash
 * attention reruns nothing: it is none), with sequence parallelism wherever
 * tp > 1 and ZeRO 1 wherever dp > 1 (Megatron-LM's usual settings, which keep
 * the count to seconds; the search tries the others too). tp beyond a node
 * is outside the search's space by design (docs/planner.md) and not priced. */
#include "frontend.h"
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Float noise between two routes to the same number. */
static const double TOL = 1e-3;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One compilation as the driver sets it up: the cluster finished for the
 * GPU count, the default (ptdc) stack, flash attention, the skeleton. */
typedef struct {
    IrArena *arena;
    IrGraph *g, *skel;
    PassCluster cl;
    PassCostCtx ctx;
    PassIlpCache *cache;
} Setup;

static void setup(Setup *s, const char *dir, const char *model, const char *gpu, int gpus)
{
    memset(s, 0, sizeof *s);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, model);
    s->arena = ir_arena_new();
    s->g = fe_compile_file(s->arena, path, NULL, 0, 0);
    if (!s->g || !ir_verify(s->g, "frontend"))
        ir_die("cannot compile %s", path);
    if (!pass_gpu_preset(gpu, &s->cl.gpu) || !pass_cluster_finish(&s->cl, gpus, 0, false))
        ir_die("no cluster of %d %s", gpus, gpu);
    s->ctx.cl = &s->cl;
    if (!pass_stack_setup(&s->ctx.st, NULL))
        ir_die("no default stack");
    s->ctx.attention = PLAN_ATTN_FLASH;
    s->cache = pass_ilp_cache_new();
    s->skel = pass_search_skeleton(s->arena, s->g);
}

static void teardown(Setup *s)
{
    pass_ilp_cache_free(s->cache);
    pass_search_skeleton_free(s->skel);
    ir_graph_free(s->g);
    ir_arena_free(s->arena);
}

static void opts(const Setup *s, PassSearchOpts *o)
{
    memset(o, 0, sizeof *o);
    pass_search_pins_none(&o->pins);
    o->gpus = s->cl.ngpus;
    o->keep = 1;
    o->skeleton = s->skel;
}

/* The search's best step time and layout, or false. */
static bool search(Setup *s, const PassSearchPins *pins, double *step, char *lay, size_t n)
{
    PassSearchOpts o;
    opts(s, &o);
    if (pins)
        o.pins = *pins;
    PassSearchResult r;
    if (!pass_search(&s->ctx, s->g, &o, s->cache, &r))
        return false;
    bool ok = r.found;
    if (ok) {
        *step = r.alt[0].pred.step_time_s;
        plan_layout_str(&r.alt[0].layout, lay, n);
    }
    pass_search_result_free(&r);
    return ok;
}

static int layers(const IrGraph *g)
{
    int n = 0;
    for (int p = 0; p < g->npieces; p++)
        n += g->pieces[p].rep >= 0;
    return n;
}

/* Does policy r rerun any node (selective under flash attention does not)? */
static bool reruns(const Setup *s, int r)
{
    for (int i = 0; i < s->g->nfwd; i++)
        if (pass_recomputed(&s->ctx, s->g, &s->g->nodes[i], (PlanRecompute)r))
            return true;
    return false;
}

typedef struct {
    const char *model, *gpu;
    int gpus;
} Case;

typedef struct {
    double step, best, seconds;
    char plan[256], best_plan[256];
    long priced, fit, refused, beaten;
} Row;

/* Every pinned layout of the case (the set in the header), priced. */
static void pinned_all(Setup *s, Row *row)
{
    const IrGraph *g = s->g;
    const PassStack *st = &s->ctx.st;
    int N = s->cl.ngpus, gpn = s->cl.gpus_per_node, nl = layers(g);
    int64_t gb = g->global_batch;
    FILE *null = fopen("/dev/null", "w");
    FILE *was = ir_diag_set_stream(null); /* refusals are counted, not printed */
    for (int tp = 1; tp <= gpn; tp *= 2)
        for (int pp = 1; pp <= PLAN_MAX_PP && pp <= g->npieces; pp++) {
            if (N % (tp * pp))
                continue;
            int dp = N / (tp * pp), n = N / pp;
            if ((n % gpn && gpn % n) || gb % dp)
                continue;
            for (int v = 1; v <= PLAN_PROG_MAX_CHUNKS; v++) {
                if (v > 1 && (pp < 2 || nl % (pp * v) || pp * v > PLAN_MAX_STAGES ||
                              !pass_stack_has_schedule(st, PLAN_SCHED_INTERLEAVED)))
                    continue;
                if (v == 1 && pp > 1 && !pass_stack_has_schedule(st, PLAN_SCHED_1F1B))
                    continue;
                for (int mb = 1; mb <= 4; mb++) {
                    if ((gb / dp) % mb || gb / dp / mb > PLAN_MAX_MICRO)
                        continue;
                    int64_t m = gb / dp / mb;
                    if (v > 1 && m % pp)
                        continue;
                    for (int rc = 0; rc < 4; rc++) {
                        if ((rc && !reruns(s, rc)) || !pass_stack_has_recompute(st, rc))
                            continue;
                        int zero = dp > 1 ? 1 : 0;
                        if (!pass_stack_has_zero(st, zero))
                            continue;
                        PassSearchPins p = {.tp = tp, .pp = pp, .dp = dp, .micro_batch = mb, .recompute = rc,
                                            .sp = tp > 1 && !st->no_sp, .zero = zero,
                                            .schedule = v > 1 ? PLAN_SCHED_INTERLEAVED : PLAN_SCHED_1F1B,
                                            .v = v > 1 ? v : 0};
                        double t;
                        char lay[256];
                        PassSearchOpts o;
                        opts(s, &o);
                        o.pins = p;
                        if (!pass_search_check_pins(&s->ctx, g, &o)) {
                            row->refused++;
                            continue;
                        }
                        row->priced++;
                        if (!search(s, &p, &t, lay, sizeof lay))
                            continue;
                        row->fit++;
                        if (t < row->best) {
                            row->best = t;
                            snprintf(row->best_plan, sizeof row->best_plan, "%s", lay);
                        }
                        if (t < row->step * (1 - TOL)) {
                            if (!row->beaten++)
                                ir_diag_set_stream(was), printf("\n");
                            printf("    beaten by %s: %.4f s (%+.2f%%)\n", lay, t, 100 * (t / row->step - 1));
                            ir_diag_set_stream(null);
                        }
                    }
                }
            }
        }
    ir_diag_set_stream(was);
    fclose(null);
}

static bool run_case(const char *dir, const Case *c, Row *row)
{
    memset(row, 0, sizeof *row);
    row->best = INFINITY;
    double t0 = now_s();
    Setup s;
    setup(&s, dir, c->model, c->gpu, c->gpus);
    printf("  %-16s %-9s %5d", c->model, c->gpu, c->gpus);
    fflush(stdout);
    bool ok = search(&s, NULL, &row->step, row->plan, sizeof row->plan);
    if (ok)
        pinned_all(&s, row);
    teardown(&s);
    row->seconds = now_s() - t0;
    if (!ok) {
        printf("  the search found no plan\n");
        return false;
    }
    printf("  %-62s %8.3f s  best pinned %8.3f s  %5ld priced, %5ld fit, %ld refused  %5.1f s%s\n",
           row->plan, row->step, row->best, row->priced, row->fit, row->refused, row->seconds,
           row->beaten ? "  BEATEN" : "");
    return row->beaten == 0;
}

/* The corpus, in sets: "small" runs in every build (ASan too); the others
 * in the release build only (label release-only: minutes under ASan). */
typedef struct {
    const char *set;
    Case c;
} Entry;

static const Entry CORPUS[] = {
    {"small", {"gpt3-1.3b.mdl", "a100-80gb", 8}},
    {"small", {"llama2-7b.mdl", "h100-80gb", 8}},
    {"small", {"llama3-8b.mdl", "a100-80gb", 16}},
    {"gpt3", {"gpt3-1.3b.mdl", "h100-80gb", 64}},
    {"gpt3", {"gpt3-13b.mdl", "h100-80gb", 128}},
    {"gpt3", {"gpt3-13b.mdl", "a100-80gb", 512}},
    {"gpt3-175b", {"gpt3-175b.mdl", "h100-80gb", 512}},
    {"gpt3-175b", {"gpt3-175b.mdl", "a100-80gb", 1024}},
    {"gpt3-175b", {"gpt3-175b.mdl", "h100-80gb", 2048}},
    {"llama2", {"llama2-7b.mdl", "a100-80gb", 64}},
    {"llama2", {"llama2-13b.mdl", "a100-80gb", 64}},
    {"llama2", {"llama2-70b.mdl", "a100-80gb", 64}},
    {"llama2", {"llama2-70b.mdl", "h100-80gb", 1024}},
    {"llama3", {"llama3-8b.mdl", "h100-80gb", 128}},
    {"llama3", {"llama3-70b.mdl", "h100-80gb", 256}},
    {"llama3", {"llama3-405b.mdl", "h100-80gb", 1024}},
    {"llama3", {"llama3-405b.mdl", "a100-80gb", 2048}},
};

static int test_corpus(const char *dir, const char *set)
{
    int n = 0;
    Case cs[sizeof CORPUS / sizeof *CORPUS];
    for (size_t i = 0; i < sizeof CORPUS / sizeof *CORPUS; i++)
        if (!strcmp(CORPUS[i].set, set))
            cs[n++] = CORPUS[i].c;
    if (!n) {
        fprintf(stderr, "no corpus set '%s'\n", set);
        return 1;
    }
    printf("corpus %s: the search's plan against every pinned layout of its space\n", set);
    int bad = 0;
    long priced = 0;
    double t0 = now_s();
    Row *rows = calloc((size_t)n, sizeof *rows);
    for (int i = 0; i < n; i++) {
        bad += !run_case(dir, &cs[i], &rows[i]);
        priced += rows[i].priced;
    }
    printf("%d cases, %ld layouts priced, %.1f s\n", n, priced, now_s() - t0);
    if (bad) {
        printf("FAIL: %d case%s where a pinned layout beats the search:\n", bad,
               bad == 1 ? "" : "s");
        printf("  %-16s %-9s %5s  %-62s %9s  %-62s %9s\n", "model", "gpu", "gpus", "search", "step s",
               "best pinned", "step s");
        for (int i = 0; i < n; i++)
            if (rows[i].beaten)
                printf("  %-16s %-9s %5d  %-62s %9.3f  %-62s %9.3f\n", cs[i].model, cs[i].gpu,
                       cs[i].gpus, rows[i].plan, rows[i].step, rows[i].best_plan, rows[i].best);
    }
    free(rows);
    return bad;
}

/* GPT-3 175B on H100s: the search returned TP4 x PP32 x v3 (14.976 s on
 * 512) where its own model priced the published TP4 x PP8 x v6 at 14.401 s
 * (the candidate was there, but its strategies came from the unconstrained
 * ILP and one budget at 60% of their memory; it needed full recomputation
 * to fit). */
static int test_175b(const char *dir, int gpus)
{
    Setup s;
    setup(&s, dir, "gpt3-175b.mdl", "h100-80gb", gpus);
    double t_search = INFINITY, t_pin = INFINITY;
    char a[256] = "none", b[256] = "none";
    PassSearchPins p;
    pass_search_pins_none(&p);
    p.tp = 4, p.pp = 8, p.v = 6;
    bool ok1 = search(&s, NULL, &t_search, a, sizeof a), ok2 = search(&s, &p, &t_pin, b, sizeof b);
    printf("GPT-3 175B on %d H100: search %s, %.3f s; --tp 4 --pp 8 --virtual-stages 6: %s, %.3f s\n",
           gpus, a, t_search, b, t_pin);
    int bad = !ok1 || !ok2 || t_search > t_pin * (1 + 1e-9);
    if (bad)
        printf("FAIL: the search's plan is slower than the pinned layout\n");
    teardown(&s);
    return bad;
}

int main(int argc, char **argv)
{
    int rc = 2;
    if (argc >= 4 && !strcmp(argv[1], "corpus"))
        rc = test_corpus(argv[2], argv[3]) ? 1 : 0;
    else if (argc >= 4 && !strcmp(argv[1], "gpt3-175b"))
        rc = test_175b(argv[2], atoi(argv[3])) ? 1 : 0;
    else
        fprintf(stderr, "usage: test_corpus corpus MODEL_DIR small|full | gpt3-175b MODEL_DIR GPUS\n");
    if (rc == 0)
        printf("ok\n");
    return rc;
}
