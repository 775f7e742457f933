/* test_search.c: the planner's checks (tests/search/CMakeLists.txt runs each
 * subcommand as a ctest):
 *   bounds DIR      the pruning is sound: on small cases the pruned search
 *                   finds exactly the plan the exhaustive one does, and the
 *                   exhaustive one dies if any bound exceeds pass_predict;
 *   sweep REF DIR   the LLaMA-13B sweep: ptdc's plan, looked up among the
 *                   measured runs (flash2 + fused RMSNorm), is within 3 MFU
 *                   points of the best run and did not run out of memory;
 *   megatron REF DIR  every Megatron-LM SC21 row: the published layout is
 *                   predicted within 20% of the published step time and MFU,
 *                   and ptdc's plan at least as fast under the same model;
 *   json DIR        plan.json parses and has the contract's keys;
 *   mingpus DIR     the smallest GPU count for LLaMA-65B: it fits there and on
 *                   no fewer GPUs;
 *   memfloor DIR    the memory floor of pass_search_min_gpus (search_memfloor.c)
 *                   is at most pass_predict's peak of every plan searches find,
 *                   the leanest layouts where nothing fits included. */
#include "frontend.h"
#include "megatron.h"
#include "passes.h"
#include "report.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                          \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

/* ------------------------------------------------------------ helpers */

typedef struct {
    IrArena *arena;
    IrGraph *g, *skel;
    PassCluster cl;
    PassCostCtx ctx;
    PassIlpCache *cache;
} Setup;

/* sets: "a=1,b=2" or NULL */
static bool setup(Setup *s, const char *dir, const char *model, const char *sets, int64_t gb,
                  const char *gpu, int gpus)
{
    memset(s, 0, sizeof *s);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, model);
    FeSet fs[16];
    int n = 0;
    char *copy = sets ? strdup(sets) : NULL;
    for (char *tok = copy ? strtok(copy, ",") : NULL; tok && n < 16; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        *eq = 0;
        fs[n++] = (FeSet){tok, eq + 1};
    }
    s->arena = ir_arena_new();
    s->g = fe_compile_file(s->arena, path, fs, n, gb);
    free(copy);
    if (!s->g || !ir_verify(s->g, "frontend")) {
        fprintf(stderr, "cannot compile %s\n", path);
        exit(1);
    }
    if (!pass_gpu_preset(gpu, &s->cl.gpu)) {
        fprintf(stderr, "unknown GPU %s\n", gpu);
        exit(1);
    }
    s->cl.ngpus = gpus;
    s->cl.gpus_per_node = 8;
    s->ctx.cl = &s->cl;
    s->ctx.attention = PLAN_ATTN_FLASH;
    s->cache = pass_ilp_cache_new();
    s->skel = pass_search_skeleton(s->arena, s->g);
    return true;
}

static void teardown(Setup *s)
{
    pass_ilp_cache_free(s->cache);
    pass_search_skeleton_free(s->skel);
    ir_graph_free(s->g);
    ir_arena_free(s->arena);
}

static void opts_init(PassSearchOpts *o, const Setup *s, int gpus)
{
    memset(o, 0, sizeof *o);
    pass_search_pins_none(&o->pins);
    o->gpus = gpus;
    o->keep = 1;
    o->skeleton = s->skel;
}

/* A tiny CSV reader: header row, comma-separated cells without quotes. */
typedef struct {
    int nrows, ncols;
    char **cell;                  /* [(nrows + 1) * ncols], row 0 the header */
} Csv;

static Csv csv_load(const char *path)
{
    Csv c = {0, 0, NULL};
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    char line[4096];
    int cap = 0, n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0])
            continue;
        int cols = 0;
        for (char *p = line, *q;; p = q + 1) {
            q = strchr(p, ',');
            if (q)
                *q = 0;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                c.cell = realloc(c.cell, sizeof *c.cell * (size_t)cap);
            }
            c.cell[n++] = strdup(p);
            cols++;
            if (!q)
                break;
        }
        if (!c.ncols)
            c.ncols = cols;
        else if (cols != c.ncols) {
            fprintf(stderr, "%s: a row with %d cells, header has %d\n", path, cols, c.ncols);
            exit(1);
        }
    }
    fclose(f);
    c.nrows = n / c.ncols - 1;
    return c;
}

static const char *csv_get(const Csv *c, int row, const char *col)
{
    for (int j = 0; j < c->ncols; j++)
        if (!strcmp(c->cell[j], col))
            return c->cell[(row + 1) * c->ncols + j];
    fprintf(stderr, "no column %s\n", col);
    exit(1);
}

static void csv_free(Csv *c)
{
    for (int i = 0; i < (c->nrows + 1) * c->ncols; i++)
        free(c->cell[i]);
    free(c->cell);
}

/* ------------------------------------------------------------- bounds */

/* The format the bounds cases price the linear layers in (the bounds use
 * the format's rate: docs/precision.md). */
static PlanPrecision bounds_prec = PLAN_PREC_BF16;

static void bounds_case(const char *dir, const char *model, const char *sets, int64_t gb,
                        const char *gpu, int gpus, const PassSearchPins *pins)
{
    Setup s;
    setup(&s, dir, model, sets, gb, gpu, gpus);
    s.ctx.prec = bounds_prec;
    PassSearchOpts o;
    opts_init(&o, &s, gpus);
    if (pins)
        o.pins = *pins;
    PassSearchResult pruned, full;
    bool ok1 = pass_search(&s.ctx, s.g, &o, s.cache, &pruned);
    o.exhaustive = true;
    bool ok2 = pass_search(&s.ctx, s.g, &o, s.cache, &full);
    CHECK(ok1 && ok2, "%s on %d: search refused", model, gpus);
    if (ok1 && ok2) {
        CHECK(pruned.found == full.found, "%s on %d %s: found %d vs exhaustive %d", model, gpus, gpu,
              pruned.found, full.found);
        if (pruned.found && full.found) {
            double a = pruned.alt[0].pred.step_time_s, b = full.alt[0].pred.step_time_s;
            CHECK(fabs(a - b) <= 1e-9 * b, "%s on %d %s: pruned best %.9g s, exhaustive %.9g s",
                  model, gpus, gpu, a, b);
            CHECK(pruned.stats.evaluated <= full.stats.evaluated, "pruning ranked more plans");
            printf("  %-14s %4d x %-9s best %.4f s, ranked %ld of %ld (exhaustive %ld)\n", model, gpus,
                   gpu, a, pruned.stats.evaluated, pruned.stats.candidates, full.stats.evaluated);
        }
        pass_search_result_free(&pruned);
        pass_search_result_free(&full);
    }
    teardown(&s);
}

/* The skeleton gives the ILP the model's answers: the same plan with and
 * without it. */
static void skeleton_case(const char *dir, const char *model, const char *sets, int64_t gb, int gpus)
{
    Setup s;
    setup(&s, dir, model, sets, gb, "a100-80gb", gpus);
    IrGraph *sk = pass_search_skeleton(s.arena, s.g);
    CHECK(sk && ir_verify(sk, "skeleton"), "%s: no valid skeleton", model);
    CHECK(sk && sk->npieces < s.g->npieces, "%s: the skeleton is not smaller", model);
    PassSearchOpts o;
    opts_init(&o, &s, gpus);
    o.skeleton = NULL;
    PassSearchResult a, b;
    bool ok1 = pass_search(&s.ctx, s.g, &o, s.cache, &a);
    o.skeleton = sk;
    bool ok2 = pass_search(&s.ctx, s.g, &o, s.cache, &b);
    CHECK(ok1 && ok2 && a.found && b.found, "%s: no plan", model);
    if (ok1 && ok2 && a.found && b.found) {
        double x = a.alt[0].pred.step_time_s, y = b.alt[0].pred.step_time_s;
        CHECK(fabs(x - y) <= 1e-9 * x, "%s on %d: %.9g s on the model, %.9g s on the skeleton", model,
              gpus, x, y);
        printf("  %-14s %4d GPUs: skeleton of %d pieces, same plan (%.4f s)\n", model, gpus,
               sk ? sk->npieces : 0, y);
    }
    if (ok1)
        pass_search_result_free(&a);
    if (ok2)
        pass_search_result_free(&b);
    pass_search_skeleton_free(sk);
    teardown(&s);
}

/* The ASan build's share of test_bounds (tests/search/CMakeLists.txt): the
 * tiny models' exhaustive searches, which take the bound checks, the
 * floors, the FP8 and MoE prices and the resharding floor
 * (src_edge_floor_at) at a fraction of the big cases' time; the release
 * build runs every case. */
static int test_bounds_small(const char *dir)
{
    PassSearchPins p;
    int sizes[] = {1, 2, 8};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        bounds_case(dir, "tiny-llama.mdl", NULL, 0, "a100-80gb", sizes[i], NULL);
    bounds_case(dir, "tiny-gpt.mdl", NULL, 0, "a100-80gb", 8, NULL);
    bounds_prec = PLAN_PREC_FP8;
    bounds_case(dir, "tiny-llama.mdl", NULL, 0, "h100-80gb", 8, NULL);
    bounds_prec = PLAN_PREC_BF16;
    bounds_case(dir, "tiny-mixtral.mdl", NULL, 0, "a100-80gb", 8, NULL);
    bounds_case(dir, "tiny-deepseek.mdl", NULL, 0, "a100-80gb", 8, NULL);
    pass_search_pins_none(&p);
    p.tp = 16;
    p.sp = 1;
    p.pp = 1;
    bounds_case(dir, "llama2-7b.mdl", "n_layers=2", 8, "a100-80gb", 16, &p);
    return failures;
}

static int test_bounds(const char *dir)
{
    PassSearchPins p;
    skeleton_case(dir, "llama2-7b.mdl", "n_layers=12", 256, 16);
    skeleton_case(dir, "gpt3-1.3b.mdl", NULL, 0, 32);
    int sizes[] = {1, 2, 4, 8, 12, 16, 24};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        bounds_case(dir, "tiny-llama.mdl", NULL, 0, "a100-80gb", sizes[i], NULL);
    bounds_case(dir, "tiny-gpt.mdl", NULL, 0, "a100-80gb", 8, NULL);
    /* Memory-bound: recomputation and ZeRO decide what fits. */
    bounds_case(dir, "llama2-7b.mdl", "n_layers=8", 64, "a100-40gb", 4, NULL);
    bounds_case(dir, "llama2-7b.mdl", "n_layers=8", 64, "a100-80gb", 8, NULL);
    /* Weights fill the GPUs (70B layers on 4): long frontier walks, which
     * the exhaustive search takes to their ends. Its interleaved plans that
     * fit check the recomputation memory forces (search_fitmem.c) against
     * pass_predict: within 0.8% at dp 1 x pp 4 (v 2), micro-batch 4 (7%
     * with memory left out), so the bound overstated by 1% dies here. */
    bounds_case(dir, "llama2-70b.mdl", "n_layers=8", 0, "a100-80gb", 4, NULL);
    pass_search_pins_none(&p);
    p.tp = 2;
    p.schedule = PLAN_SCHED_INTERLEAVED;
    bounds_case(dir, "llama2-7b.mdl", "n_layers=8", 64, "a100-80gb", 16, &p);
    /* In FP8 on H100s: faster GEMMs, weight copies and cast inputs kept. */
    bounds_prec = PLAN_PREC_FP8;
    bounds_case(dir, "tiny-llama.mdl", NULL, 0, "h100-80gb", 8, NULL);
    bounds_case(dir, "llama2-7b.mdl", "n_layers=8", 64, "h100-80gb", 8, NULL);
    bounds_prec = PLAN_PREC_BF16;
    /* Mixtures of experts (issue 31): the floor prices ZeRO 2/3's
     * per-micro-batch traffic with each strategy's kernels (an expert split
     * over dp exchanges tokens, a replicated one is reduced and gathered);
     * weights that fill the GPUs make ZeRO and the experts' split decide. */
    bounds_case(dir, "tiny-mixtral.mdl", NULL, 0, "a100-80gb", 8, NULL);
    bounds_case(dir, "tiny-deepseek.mdl", NULL, 0, "a100-80gb", 8, NULL);
    bounds_case(dir, "mixtral-8x7b.mdl", "n_layers=4", 64, "a100-40gb", 8, NULL);
    bounds_case(dir, "qwen3-235b-a22b.mdl", "n_layers=2", 64, "a100-80gb", 16, NULL);
    /* The bound of the plans that fit (src_floor_fit) leaves out the
     * strategies whose states overflow the layers some rank must hold;
     * every fitting plan ranked is checked against it. Tight here: with the
     * allowance understated by 40% it says nothing fits dp 2 x pp 2 under
     * ZeRO 1, where pass_predict fits a plan, and this case dies. */
    bounds_case(dir, "mixtral-8x7b.mdl", "n_layers=4", 32, "a100-40gb", 4, NULL);
    /* The floor prices the resharding inside each layer (search_edges.c),
     * and every exhaustive search above checks it at each one-stage plan's
     * own strategies against what pass_predict charges (check_bounds: equal
     * on the memory-bound 7B cases, so overstating the edges' prices by 1%
     * dies there). Here a tensor group spanning two nodes (--tp 16 --sp on)
     * makes the gathers and reduce-scatters cross InfiniBand. */
    pass_search_pins_none(&p);
    p.tp = 16;
    p.sp = 1;
    p.pp = 1;
    bounds_case(dir, "llama2-7b.mdl", "n_layers=2", 8, "a100-80gb", 16, &p);
    /* The ILP's least layer (search_layerlb.c) raises every middle layer's
     * floor with the resharding its strategies need; each ranked plan's
     * ranks are checked against pass_predict's per-micro-batch times
     * (check_bounds). Under --tp 4 --sp on the layers' gathers and
     * reduce-scatters are part of that price, pipelined or not. */
    pass_search_pins_none(&p);
    p.tp = 4;
    p.sp = 1;
    bounds_case(dir, "llama2-7b.mdl", "n_layers=6", 32, "a100-80gb", 8, &p);
    return failures;
}

/* -------------------------------------------------------------- sweep */

static int test_sweep(const char *ref, const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/layouts_llama13b_seq2048_64xA100.csv", ref);
    Csv c = csv_load(path);
    Setup s;
    setup(&s, dir, "llama2-13b.mdl", "seq=2048,vocab=128000", 2048, "a100-80gb", 64);
    PassSearchOpts o;
    opts_init(&o, &s, 64);
    PassSearchResult r;
    CHECK(pass_search(&s.ctx, s.g, &o, s.cache, &r), "search refused");
    CHECK(r.found, "no plan fits");
    if (r.found) {
        const PlanLayout *L = &r.alt[0].layout;
        char lay[256];
        printf("ptdc's plan: %s, predicted MFU %.1f%%\n", plan_layout_str(L, lay, sizeof lay),
               100 * r.alt[0].pred.mfu);
        const char *rc = plan_layout_recompute_name(L);
        double best = 0;
        int match = -1;
        for (int i = 0; i < c.nrows; i++) {
            if (strcmp(csv_get(&c, i, "attention_impl"), "flash2") || atoi(csv_get(&c, i, "rmsnorm_kernel")) != 1)
                continue;
            bool ok = !strcmp(csv_get(&c, i, "status"), "ok");
            if (ok)
                best = fmax(best, atof(csv_get(&c, i, "mfu")));
            const char *ck = csv_get(&c, i, "activation_checkpointing");
            bool same_rc = !strcmp(ck, "every_layer") ? !strcmp(rc, "full") : !strcmp(rc, "none");
            if (atoi(csv_get(&c, i, "tp")) == L->tp && atoi(csv_get(&c, i, "pp")) == L->pp &&
                atoi(csv_get(&c, i, "dp")) == L->dp && atoi(csv_get(&c, i, "micro_batch")) == L->micro_batch &&
                same_rc && L->v == 1)
                match = i;
        }
        CHECK(match >= 0, "ptdc's plan is not among the measured flash2 + RMSNorm-kernel runs");
        if (match >= 0) {
            const char *st = csv_get(&c, match, "status");
            CHECK(!strcmp(st, "ok"), "ptdc's plan ran out of memory in the sweep");
            double mfu = !strcmp(st, "ok") ? atof(csv_get(&c, match, "mfu")) : 0;
            printf("measured MFU of that layout %.3f, best measured %.3f\n", mfu, best);
            CHECK(mfu >= best - 0.03, "measured MFU %.3f is more than 3 points below the best %.3f", mfu, best);
        }
    }
    pass_search_result_free(&r);
    teardown(&s);
    csv_free(&c);
    return failures;
}

/* ----------------------------------------------------------- megatron */

/* Megatron-LM SC21, Table 1 (tests/search/ref/megatron_sc21.csv), row by
 * row, under one cost model: the Megatron stack as it ran in 2021
 * (tests/cost/tables.c and docs/cost-model.md: fused scale-mask-softmax
 * attention, fp32 main gradients and loss, no distributed optimizer), on
 * A100-80GB.
 *   1. The published layout (its tp, pp, dp; full recomputation, micro-batch
 *      1, plain 1F1B: what the table does not record is assumed as in
 *      test_calib) is predicted within MEGATRON_TOL of the published step
 *      time (step_time_s_derived: the paper's FLOP formula over its
 *      tflops_per_gpu x GPUs), so its predicted MFU is within the same
 *      factor of the published MFU (the same tokens over either time).
 *   2. ptdc's search under the same model finds a plan at least as fast as
 *      that prediction. */
/* The rows are predicted -1% to +16% off (7.5B on 128 GPUs the worst). */
static const double MEGATRON_TOL = 0.20;

static int test_megatron(const char *ref, const char *dir, int only)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/megatron_sc21.csv", ref);
    Csv c = csv_load(path);
    for (int i = 0; i < c.nrows; i++) {
        if (only >= 0 && i != only)
            continue;
        int layers = atoi(csv_get(&c, i, "layers")), hidden = atoi(csv_get(&c, i, "hidden"));
        int heads = atoi(csv_get(&c, i, "heads")), gpus = atoi(csv_get(&c, i, "n_gpus"));
        int tp = atoi(csv_get(&c, i, "tp")), pp = atoi(csv_get(&c, i, "pp")), dp = atoi(csv_get(&c, i, "dp"));
        int64_t gb = atoll(csv_get(&c, i, "global_batch"));
        double t_meas = atof(csv_get(&c, i, "step_time_s_derived"));
        double mfu_meas = atof(csv_get(&c, i, "mfu_est_no_recompute_derived"));
        char sets[256];
        snprintf(sets, sizeof sets, "n_layers=%d,d_model=%d,n_heads=%d,vocab=%s,seq=%s", layers, hidden,
                 heads, csv_get(&c, i, "vocab"), csv_get(&c, i, "seq_len"));
        Setup s;
        setup(&s, dir, "gpt.mdl", sets, gb, "a100-80gb", gpus);
        if (!pass_stack_preset("megatron", &s.ctx.st))
            ir_die("no megatron stack");
        s.ctx.st.attn_kernel = PASS_KERNEL_FUSED_SOFTMAX;
        s.ctx.attention = PLAN_ATTN_MATERIALIZED;
        MegaLayout ml = {.tp = tp, .pp = pp, .dp = dp, .v = 1, .micro_batch = 1, .global_batch = gb,
                         .sp = false, .zero = 0, .recompute = PLAN_RECOMPUTE_FULL,
                         .attention = PLAN_ATTN_MATERIALIZED, .gpus_per_node = 8};
        Plan pub;
        CHECK(mega_plan(s.g, &ml, &pub), "row %d: the published layout does not divide the model", i);
        PassPrediction pr;
        pass_predict(&s.ctx, s.g, &pub, &pr);
        double t_pub = pr.step_time_s, err = t_pub / t_meas - 1;
        printf("  %6s B on %4d, published tp %d pp %d dp %d: predicted %7.2f s, published %7.2f s "
               "(%+.1f%%); MFU predicted %.1f%%, published %.1f%%%s\n", csv_get(&c, i, "params_b"), gpus,
               tp, pp, dp, t_pub, t_meas, 100 * err, 100 * pr.mfu, 100 * mfu_meas,
               pr.fits ? "" : " (predicted not to fit)");
        CHECK(pr.fits, "row %d: the published layout is predicted not to fit", i);
        CHECK(fabs(err) <= MEGATRON_TOL, "row %d: predicted step %.2f s is %+.1f%% off the published "
              "%.2f s (tolerance %.0f%%)", i, t_pub, 100 * err, t_meas, 100 * MEGATRON_TOL);
        CHECK(fabs(pr.mfu / mfu_meas - 1) <= MEGATRON_TOL, "row %d: predicted MFU %.3f, published %.3f",
              i, pr.mfu, mfu_meas);
        PassSearchOpts o;
        opts_init(&o, &s, gpus);
        PassSearchResult mine;
        bool ok = pass_search(&s.ctx, s.g, &o, s.cache, &mine);
        CHECK(ok && mine.found, "row %d (%s B on %d GPUs): ptdc finds no plan that fits", i,
              csv_get(&c, i, "params_b"), gpus);
        if (ok && mine.found) {
            char lay[256];
            double t_mine = mine.alt[0].pred.step_time_s;
            printf("         ptdc under the same model: %s: %.2f s (%.1f%% MFU) [%.2f s search]\n",
                   plan_layout_str(&mine.alt[0].layout, lay, sizeof lay), t_mine,
                   100 * mine.alt[0].pred.mfu, mine.stats.seconds);
            CHECK(t_mine <= t_pub * (1 + 1e-9), "row %d: ptdc's plan %.4f s is slower than the published "
                  "layout's %.4f s", i, t_mine, t_pub);
        }
        if (ok)
            pass_search_result_free(&mine);
        pass_prediction_free(&pr);
        mega_plan_free(&pub);
        teardown(&s);
    }
    csv_free(&c);
    return failures;
}

/* --------------------------------------------------------------- json */

/* A minimal JSON reader: values are parsed into a tree only as far as the
 * key checks need (objects, arrays, scalars). */
typedef struct Json {
    char kind;                    /* o(bject) a(rray) s(tring) n(umber) t(rue/false) z(null) */
    int n;
    char **keys;                  /* objects */
    struct Json **v;
} Json;

static const char *jp;

static void ws(void)
{
    while (isspace((unsigned char)*jp))
        jp++;
}

static Json *jparse(void);

static char *jstring(void)
{
    if (*jp != '"')
        return NULL;
    const char *b = ++jp;
    while (*jp && *jp != '"')
        jp += *jp == '\\' ? 2 : 1;
    if (*jp != '"')
        return NULL;
    char *s = strndup(b, (size_t)(jp - b));
    jp++;
    return s;
}

static Json *jparse(void)
{
    ws();
    Json *j = calloc(1, sizeof *j);
    if (*jp == '{' || *jp == '[') {
        char close = *jp == '{' ? '}' : ']';
        j->kind = *jp == '{' ? 'o' : 'a';
        jp++;
        ws();
        if (*jp == close) {
            jp++;
            return j;
        }
        for (;;) {
            ws();
            char *k = NULL;
            if (j->kind == 'o') {
                if (!(k = jstring()))
                    return NULL;
                ws();
                if (*jp++ != ':')
                    return NULL;
            }
            Json *v = jparse();
            if (!v)
                return NULL;
            j->keys = realloc(j->keys, sizeof *j->keys * (size_t)(j->n + 1));
            j->v = realloc(j->v, sizeof *j->v * (size_t)(j->n + 1));
            j->keys[j->n] = k;
            j->v[j->n++] = v;
            ws();
            if (*jp == ',') {
                jp++;
                continue;
            }
            if (*jp++ != close)
                return NULL;
            return j;
        }
    }
    if (*jp == '"') {
        j->kind = 's';
        char *s = jstring();
        if (!s)
            return NULL;
        free(s);
        return j;
    }
    if (!strncmp(jp, "true", 4) || !strncmp(jp, "false", 5)) {
        j->kind = 't';
        jp += *jp == 't' ? 4 : 5;
        return j;
    }
    if (!strncmp(jp, "null", 4)) {
        j->kind = 'z';
        jp += 4;
        return j;
    }
    char *end;
    strtod(jp, &end);
    if (end == jp)
        return NULL;
    j->kind = 'n';
    jp = end;
    return j;
}

static Json *jget(const Json *j, const char *k)
{
    for (int i = 0; j && j->kind == 'o' && i < j->n; i++)
        if (!strcmp(j->keys[i], k))
            return j->v[i];
    return NULL;
}

static void jfree(Json *j)
{
    if (!j)
        return;
    for (int i = 0; i < j->n; i++) {
        free(j->keys ? j->keys[i] : NULL);
        jfree(j->v[i]);
    }
    free(j->keys);
    free(j->v);
    free(j);
}

static int test_json(const char *dir)
{
    Setup s;
    setup(&s, dir, "tiny-llama.mdl", NULL, 0, "a100-80gb", 8);
    PassSearchOpts o;
    opts_init(&o, &s, 8);
    o.pins.pp = 2; /* two stages, so stages[] has more than one entry */
    PassSearchResult r;
    CHECK(pass_search(&s.ctx, s.g, &o, s.cache, &r) && r.found, "no plan");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    rep_plan_print_json(f, s.g, &s.ctx, &r);
    fclose(f);
    jp = text;
    Json *j = jparse();
    ws();
    CHECK(j && !*jp, "plan.json does not parse (at '%.40s')", jp ? jp : "");
    static const char *const need[][2] = {
        {"parallel", "dp"}, {"parallel", "tp"}, {"parallel", "pp"}, {"parallel", "sp"},
        {"parallel", "zero"}, {"parallel", "micro_batch"}, {"parallel", "num_micro_batches"},
        {"parallel", "schedule"}, {"parallel", "virtual_stages"}, {"parallel", "recompute"},
        {"predicted", "step_time_s"}, {"predicted", "tokens_per_s"}, {"predicted", "mfu"},
        {"predicted", "peak_mem_bytes"}, {"predicted", "fits"}, {"search", "candidates_evaluated"},
        {"search", "seconds"}};
    for (size_t i = 0; j && i < sizeof need / sizeof need[0]; i++)
        CHECK(jget(jget(j, need[i][0]), need[i][1]), "plan.json lacks %s.%s", need[i][0], need[i][1]);
    const Json *st = jget(j, "stages");
    CHECK(st && st->kind == 'a' && st->n == r.alt[0].plan.nstages, "plan.json stages[]: %d entries",
          st ? st->n : -1);
    for (int i = 0; st && i < st->n; i++) {
        static const char *const sk[] = {"layers", "ranks", "mem_bytes", "time_s"};
        for (int k = 0; k < 4; k++)
            CHECK(jget(st->v[i], sk[k]), "plan.json stages[%d] lacks %s", i, sk[k]);
        const Json *ly = jget(st->v[i], "layers"), *rk = jget(st->v[i], "ranks");
        CHECK(ly && ly->kind == 'a' && rk && rk->kind == 'a' && rk->n == 4, "stages[%d]: layers and "
              "ranks are arrays, 4 ranks per stage", i);
    }
    const Json *pp = jget(jget(j, "parallel"), "pp");
    CHECK(pp && pp->kind == 'n', "parallel.pp is a number");
    const Json *shape = jget(jget(j, "mesh"), "shape");
    CHECK(!jget(j, "context") && shape && shape->n == 2 && !jget(jget(j, "groups"), "axis2"),
          "a plan without context parallelism has no context key and a two-axis mesh");
    jfree(j);
    free(text);
    pass_search_result_free(&r);

    /* Context parallelism: a dp x cp x tp mesh, each axis's groups, the
     * context key. */
    o.pins.pp = 1, o.pins.cp = 2, o.pins.tp = 2;
    CHECK(pass_search(&s.ctx, s.g, &o, s.cache, &r) && r.found, "no plan with --cp 2 --tp 2");
    f = open_memstream(&text, &len);
    rep_plan_print_json(f, s.g, &s.ctx, &r);
    fclose(f);
    jp = text;
    j = jparse();
    ws();
    CHECK(j && !*jp, "plan.json with cp does not parse (at '%.40s')", jp ? jp : "");
    const Json *ctx = jget(j, "context"), *mesh = jget(j, "mesh"), *grp = jget(j, "groups");
    CHECK(ctx && jget(ctx, "cp") && jget(ctx, "cp_axis") && jget(ctx, "kv"), "plan.json lacks context.{cp, cp_axis, kv}");
    CHECK(mesh && jget(mesh, "shape") && jget(mesh, "shape")->n == 3 && jget(mesh, "axes") &&
          jget(mesh, "axes")->n == 3,
          "plan.json's mesh has three axes with cp");
    for (int x = 0; x < 3; x++) {
        static const char *const key[] = {"axis0", "axis1", "axis2"};
        const Json *a = jget(grp, key[x]);
        CHECK(a && a->kind == 'a' && a->n == 4 && a->v[0]->kind == 'a' && a->v[0]->n == 2,
              "groups.%s: 4 groups of 2 ranks on a 2 x 2 x 2 mesh", key[x]);
    }
    jfree(j);
    free(text);
    pass_search_result_free(&r);
    teardown(&s);
    return failures;
}

/* ------------------------------------------------------------ domain */

/* The mesh a plan is placed on counts NVLink domains, not hosts: TP 16 on
 * 32 GB200s (hosts of 4, one NVL72 domain) stays on NVLink; on 32 B200s
 * (hosts of 8, each its own domain) the same group spans two. */
static int test_domain(const char *dir)
{
    static const struct {
        const char *gpu;
        int nodes, per_node;
    } want[] = {{"gb200", 1, 16}, {"b200", 2, 8}};
    for (int i = 0; i < 2; i++) {
        Setup s;
        setup(&s, dir, "tiny-llama.mdl", "d_model=2048,n_heads=32,n_kv_heads=16,d_ff=5632,seq=2048,n_layers=4",
              32, want[i].gpu, 32);
        s.cl.gpus_per_node = s.cl.gpu.host_gpus;
        s.cl.nvlink_domain = s.cl.gpu.domain_gpus;
        PassSearchOpts o;
        opts_init(&o, &s, 32);
        o.pins.tp = 16, o.pins.pp = 1;
        PassSearchResult r;
        CHECK(pass_search(&s.ctx, s.g, &o, s.cache, &r) && r.found, "%s: no plan with --tp 16", want[i].gpu);
        if (r.found) {
            const PassSearchAlt *a = &r.alt[0];
            int x = a->layout.tp_axis;
            CHECK(a->layout.tp == 16 && x >= 0, "%s: tp %d", want[i].gpu, a->layout.tp);
            if (x >= 0)
                CHECK(a->plan.mesh.nodes[x] == want[i].nodes && a->plan.mesh.per_node[x] == want[i].per_node,
                      "%s: the TP group spans %d nodes of %d, want %d of %d", want[i].gpu,
                      a->plan.mesh.nodes[x], a->plan.mesh.per_node[x], want[i].nodes, want[i].per_node);
        }
        pass_search_result_free(&r);
        teardown(&s);
    }
    return failures;
}

/* ------------------------------------------------------------ mingpus */

static int test_mingpus(const char *dir)
{
    Setup s;
    setup(&s, dir, "llama-65b.mdl", NULL, 0, "a100-80gb", 4);
    PassSearchOpts o;
    opts_init(&o, &s, 4);
    PassSearchResult r;
    CHECK(pass_search(&s.ctx, s.g, &o, s.cache, &r), "search refused");
    CHECK(!r.found, "LLaMA-65B fits on 4 GPUs");
    pass_search_result_free(&r);
    PassSearchAlt a;
    int skipped;
    int n = pass_search_min_gpus(&s.ctx, s.g, &o, s.cache, 5, 4096, &a, &skipped);
    CHECK(n > 4, "no GPU count fits LLaMA-65B");
    CHECK(skipped == 0, "counts below %d were skipped (from %d)", n, skipped);
    if (n > 4) {
        CHECK(a.pred.fits && a.layout.gpus <= n, "the plan for %d GPUs does not fit", n);
        pass_search_alt_free(&a);
        /* Independently: exhaustive searches on n - 1 .. n - 2 find nothing. */
        for (int k = n - 1; k >= n - 2 && k > 4; k--) {
            o.gpus = k;
            o.exhaustive = true;
            CHECK(pass_search(&s.ctx, s.g, &o, s.cache, &r), "search refused");
            CHECK(!r.found, "LLaMA-65B fits on %d GPUs, fewer than the smallest count %d", k, n);
            pass_search_result_free(&r);
        }
        printf("LLaMA-65B: smallest count %d\n", n);
    }
    teardown(&s);
    /* DeepSeek-V3 on A100-40GB: its smallest count is 384; on 320 to 368
     * every layout is above its own floor (search_memfloor.c) but for 336's
     * tp 7 ones, so the count walk searches 336 alone of them, and its
     * first-fit search there ranks no candidate whose layout's floor is
     * above the usable HBM (PassSearchOpts.floor): with the mesh floors
     * (mem_lb) that is every one, so it solves no ILP (before: 21 CPU s,
     * the layouts of 168 to 335 GPUs searched again). */
    setup(&s, dir, "deepseek-v3.mdl", NULL, 0, "a100-40gb", 128);
    CHECK(pass_stack_preset("ptdc", &s.ctx.st), "no stack ptdc");
    opts_init(&o, &s, 128);
    n = pass_search_min_gpus(&s.ctx, s.g, &o, s.cache, 129, 8192, &a, &skipped);
    CHECK(n == 384 && skipped == 0, "DeepSeek-V3 on A100-40GB: smallest count %d (skipped from %d), not 384", n,
          skipped);
    if (n > 0) {
        CHECK(a.pred.fits, "DeepSeek-V3 on A100-40GB: the plan on %d does not fit", n);
        pass_search_alt_free(&a);
    }
    PassMemFloor f;
    pass_mem_floor_init(&f, &s.ctx, s.g);
    o.gpus = 336;
    o.first_fit = true;
    o.floor = &f;
    CHECK(pass_search(&s.ctx, s.g, &o, s.cache, &r), "search refused");
    CHECK(!r.found && r.stats.ilp_solves == 0, "DeepSeek-V3 on 336 A100-40GB: found %d, %d ILP solves", r.found,
          r.stats.ilp_solves);
    printf("DeepSeek-V3 on A100-40GB: smallest count %d; the search on 336 solved %d ILPs\n", n, r.stats.ilp_solves);
    pass_search_result_free(&r);
    pass_mem_floor_free(&f);
    teardown(&s);
    return failures;
}

/* ------------------------------------------------------------ memfloor */

/* The floor of a's layout against its predicted peak; the ratio into *ratio. */
static void floor_check(const PassMemFloor *f, const char *what, const PassSearchAlt *a, double *ratio)
{
    /* The mesh less its data-parallel axis (0) as the tensor axis: tp, cp x
     * tp, or a folded expert mesh's inner axis; a floor for each. */
    int pp = a->plan.pp, stage = plan_mesh_devices(&a->plan.mesh), tp = stage / a->plan.mesh.size[0];
    double fl = pass_mem_floor_zero(f, pp, tp, stage, a->plan.zero), peak = a->pred.peak_mem_bytes;
    CHECK(pass_mem_floor(f, pp, tp, stage) <= fl, "%s: the layout's floor above its ZeRO stage's", what);
    CHECK(fl <= peak * (1 + 1e-12), "%s: floor %.4g GiB above the predicted peak %.4g GiB (pp %d, tp %d, %d GPUs a stage)",
          what, fl / 1073741824.0, peak / 1073741824.0, pp, tp, stage);
    *ratio = fl / peak;
}

/* Search model on gpus (keeping `keep` plans): every plan found, and the
 * leanest one evaluated when none fits, is above its floor. */
static void memfloor_case(const char *dir, const char *model, const char *sets, const char *stack, const char *gpu,
                          int gpus, int keep)
{
    Setup s;
    setup(&s, dir, model, sets, 0, gpu, gpus);
    CHECK(pass_stack_preset(stack, &s.ctx.st), "no stack %s", stack);
    PassMemFloor f;
    pass_mem_floor_init(&f, &s.ctx, s.g);
    PassSearchOpts o;
    opts_init(&o, &s, gpus);
    o.keep = keep;
    PassSearchResult r;
    CHECK(pass_search(&s.ctx, s.g, &o, s.cache, &r), "%s: search refused", model);
    char what[256];
    double ratio = 0, lo = INFINITY, hi = 0;
    for (int i = 0; i < r.nalt; i++) {
        snprintf(what, sizeof what, "%s on %d x %s, plan %d", model, gpus, gpu, i);
        floor_check(&f, what, &r.alt[i], &ratio);
        lo = fmin(lo, ratio), hi = fmax(hi, ratio);
    }
    if (r.have_closest) {
        snprintf(what, sizeof what, "%s on %d x %s, the leanest layout", model, gpus, gpu);
        floor_check(&f, what, &r.closest, &ratio);
        lo = fmin(lo, ratio), hi = fmax(hi, ratio);
    }
    CHECK(r.nalt > 0 || r.have_closest, "%s on %d x %s: no plan to check", model, gpus, gpu);
    printf("%s%s%s (%s) on %d x %s: %d plans%s, floor / peak %.3f .. %.3f\n", model, sets ? " " : "",
           sets ? sets : "", stack, gpus, gpu, r.nalt, r.have_closest ? " and the leanest layout" : "", lo, hi);
    pass_search_result_free(&r);
    pass_mem_floor_free(&f);
    teardown(&s);
}

static int test_memfloor(const char *dir)
{
    /* Nothing fits: the leanest layouts, where the floor is tightest. */
    memfloor_case(dir, "deepseek-v3.mdl", NULL, "ptdc", "a100-80gb", 64, 1);
    memfloor_case(dir, "deepseek-v3.mdl", NULL, "megatron", "h100-80gb", 64, 1);
    memfloor_case(dir, "deepseek-v3.mdl", NULL, "ptdc", "a100-40gb", 128, 1);
    memfloor_case(dir, "llama-65b.mdl", NULL, "ptdc", "a100-80gb", 4, 1);
    memfloor_case(dir, "llama-65b.mdl", NULL, "fsdp", "a100-80gb", 4, 1);
    /* The embedding and head as the largest pieces. */
    memfloor_case(dir, "llama.mdl", "vocab=8000000", "ptdc", "a100-80gb", 8, 1);
    /* Plans that fit, near the limit and not. */
    memfloor_case(dir, "llama-65b.mdl", NULL, "ptdc", "a100-80gb", 16, 4);
    memfloor_case(dir, "mixtral-8x7b.mdl", NULL, "ptdc", "h100-80gb", 16, 4);
    memfloor_case(dir, "llama2-7b.mdl", NULL, "megatron", "a100-40gb", 8, 8);
    /* What it is for: DeepSeek-V3 on A100-80GB, whose smallest count is 160
     * (docs/planner.md), has no layout of 148-156 GPUs above the floor: pp
     * x stage 37 x 4, 38 x 4, 19 x 8, 39 x 4 hold 2-4 of its 58 MoE layers
     * on 4-8 GPUs. */
    Setup s;
    setup(&s, dir, "deepseek-v3.mdl", NULL, 0, "a100-80gb", 160);
    CHECK(pass_stack_preset("ptdc", &s.ctx.st), "no stack ptdc");
    PassMemFloor f;
    pass_mem_floor_init(&f, &s.ctx, s.g);
    double usable = pass_usable_bytes(&s.ctx);
    /* pp, tp, GPUs a stage */
    int out[][3] = {{37, 4, 4}, {38, 4, 4}, {19, 8, 8}, {39, 4, 4}, {37, 1, 4}, {19, 2, 8}};
    for (int i = 0; i < 6; i++)
        CHECK(pass_mem_floor(&f, out[i][0], out[i][1], out[i][2]) > usable,
              "DeepSeek-V3: pp %d x tp %d x %d GPUs under the floor", out[i][0], out[i][1], out[i][2]);
    /* The plan the count's first fit finds, dp 1 x tp 8 x pp 20 (it fits) */
    CHECK(pass_mem_floor(&f, 20, 8, 8) <= usable, "DeepSeek-V3: pp 20 x tp 8 x 8 GPUs above the floor");
    pass_mem_floor_free(&f);
    teardown(&s);
    /* On A100-40GB, the layout's own floor (tensor axis, ZeRO stage and
     * ZeRO-3's buffers, a communicator per mesh axis) is what leaves 352
     * and 368 unsearched: their leanest layouts, pp 22 and 23 x tp 8 x dp
     * 2, and 384's first probe, pp 24, are above it where the even floor
     * (38.5 GiB) is not; the plan found on 384, dp 4 x tp 8 x pp 12, fits. */
    setup(&s, dir, "deepseek-v3.mdl", NULL, 0, "a100-40gb", 384);
    CHECK(pass_stack_preset("ptdc", &s.ctx.st), "no stack ptdc");
    pass_mem_floor_init(&f, &s.ctx, s.g);
    usable = pass_usable_bytes(&s.ctx);
    for (int pp = 22; pp <= 24; pp++) {
        CHECK(pass_mem_floor_even(&f, pp, 16) <= usable, "DeepSeek-V3 on A100-40GB: pp %d x 16 GPUs above the even floor",
              pp);
        CHECK(pass_mem_floor(&f, pp, 8, 16) > usable, "DeepSeek-V3 on A100-40GB: pp %d x tp 8 x 16 GPUs under its floor",
              pp);
    }
    CHECK(pass_mem_floor(&f, 12, 8, 32) <= usable, "DeepSeek-V3 on A100-40GB: pp 12 x tp 8 x 32 GPUs above its floor");
    /* Where the layout's mesh cannot split the 256 experts (nor their 7168
     * and 2048 wide dims) over the data-parallel axis (40, 20, 80, 3, 5,
     * 15, 60 GPUs), their states and ZeRO-3's gathers are split only over
     * the tensor axis; a tp 1 stage of 24 or 40 at most 8 ways (a folded
     * dp_inner); with pp 1 the rank holds one micro-batch's activations of
     * every layer (dp x tp 5 x 64: 0.4 GiB short without them). The
     * leanest layouts of 320 and 360 GPUs, under the floor before. */
    int out40[][3] = {{1, 8, 320}, {2, 8, 160}, {2, 4, 160}, {1, 4, 320}, {1, 5, 320}, {2, 2, 160}, {2, 1, 160},
                      {15, 8, 24}, {9, 8, 40}, {3, 8, 120}, {1, 6, 360}, {15, 1, 24}, {9, 1, 40}, {3, 1, 120}};
    for (int i = 0; i < (int)(sizeof out40 / sizeof out40[0]); i++)
        CHECK(pass_mem_floor(&f, out40[i][0], out40[i][1], out40[i][2]) > usable,
              "DeepSeek-V3 on A100-40GB: pp %d x tp %d x %d GPUs under its floor (%.2f GiB)", out40[i][0],
              out40[i][1], out40[i][2], pass_mem_floor(&f, out40[i][0], out40[i][1], out40[i][2]) / 1073741824.0);
    pass_mem_floor_free(&f);
    teardown(&s);
    return failures;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_search bounds|bounds-small|sweep|megatron|json|mingpus|memfloor|domain [REF] MODEL_DIR\n");
        return 2;
    }
    const char *t = argv[1];
    int rc;
    if (!strcmp(t, "bounds"))
        rc = test_bounds(argv[2]);
    else if (!strcmp(t, "bounds-small"))
        rc = test_bounds_small(argv[2]);
    else if (!strcmp(t, "json"))
        rc = test_json(argv[2]);
    else if (!strcmp(t, "mingpus"))
        rc = test_mingpus(argv[2]);
    else if (!strcmp(t, "memfloor"))
        rc = test_memfloor(argv[2]);
    else if (!strcmp(t, "domain"))
        rc = test_domain(argv[2]);
    else if (!strcmp(t, "sweep") && argc >= 4)
        rc = test_sweep(argv[2], argv[3]);
    else if (!strcmp(t, "megatron") && argc >= 4)
        rc = test_megatron(argv[2], argv[3], argc >= 5 ? atoi(argv[4]) : -1);
    else {
        fprintf(stderr, "unknown test %s\n", t);
        return 2;
    }
    if (rc)
        fprintf(stderr, "%d check%s failed\n", rc, rc == 1 ? "" : "s");
    else
        printf("ok\n");
    return rc ? 1 : 0;
}
