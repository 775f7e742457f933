/* fe_api_test.c: the frontend through its C API (frontend.h): constant
 * arithmetic as docs/language.md defines it, pieces, blocks, names, HF names,
 * dimension aliases, the global batch, errors, and repeated compilation
 * (under ASan/LSan a leak or a stale pointer fails this test).
 * usage: fe_api_test MODELS_DIR */
#include "frontend.h"
#include "ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

static const char *models;

static IrGraph *compile_model(IrArena *a, const char *name, const FeSet *sets, int nsets,
                              int64_t gb)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", models, name);
    return fe_compile_file(a, path, sets, nsets, gb);
}

/* A minimal complete model after a config block under test. */
static IrGraph *compile_config(IrArena *a, const char *config)
{
    char src[8192];
    snprintf(src, sizeof src,
             "config {\n%s\n  seq = 4\n  vocab = 8\n  d = 2\n}\n"
             "model t {\n  input tokens : i32[batch, seq]\n  param e : [vocab, d] = ones\n"
             "  loss = cross_entropy(matmul(embedding(tokens, e), e), tokens)\n}\n",
             config);
    return fe_compile_source(a, "consts.mdl", src, strlen(src), NULL, 0, 0);
}

static void check_int(const IrGraph *g, const char *name, int64_t want)
{
    const IrConst *c = ir_const_find(g, name);
    CHECK(c && c->is_int && c->i == want, "%s: want integer %lld, got %s %lld / %g", name,
          (long long)want, c ? (c->is_int ? "int" : "float") : "missing", c ? (long long)c->i : 0LL,
          c ? c->f : 0.0);
}

static void check_float(const IrGraph *g, const char *name, double want)
{
    const IrConst *c = ir_const_find(g, name);
    CHECK(c && !c->is_int && c->f == want, "%s: want float %.17g, got %s %lld / %.17g", name, want,
          c ? (c->is_int ? "int" : "float") : "missing", c ? (long long)c->i : 0LL, c ? c->f : 0.0);
}

static void test_arithmetic(void)
{
    IrArena *a = ir_arena_new();
    IrGraph *g = compile_config(a,
        "  exact = 8 / 2\n"         /* divides evenly: an integer */
        "  inexact = 7 / 2\n"       /* does not: a float */
        "  fdiv = 9.0 / 3\n"        /* a float operand: a float */
        "  floordiv = -7 // 2\n"    /* floors toward -infinity, like Python */
        "  fmod = -7 % 2\n"         /* the sign of the divisor */
        "  fmod2 = 7 % -2\n"
        "  ffloordiv = 7.5 // 2\n"
        "  ffmod = -7.5 % 2\n"
        "  pow = 2 ** 10\n"
        "  negpow = 2 ** -1\n"
        "  right = 2 ** 3 ** 2\n"   /* right-associative: 2 ** 9 */
        "  neg = -2 ** 2\n"         /* ** binds tighter than unary minus */
        "  prec = 1 + 2 * 3 - 4 // 3\n"
        "  root = sqrt(16)\n"
        "  lo = min(3, 2)\n"
        "  hi = max(3, 2.5)\n"
        "  up = ceil(2.1)\n"
        "  down = floor(-2.1)\n"
        "  lazy = later * 2\n"      /* order of definition does not matter */
        "  later = 21\n"
        "  big = 9223372036854775807\n"
        "  small = -9223372036854775807 - 1\n"
        "  eps = 1e-5\n");
    CHECK(g != NULL, "the arithmetic model compiles");
    if (g) {
        check_int(g, "exact", 4);
        check_float(g, "inexact", 3.5);
        check_float(g, "fdiv", 3.0);
        check_int(g, "floordiv", -4);
        check_int(g, "fmod", 1);
        check_int(g, "fmod2", -1);
        check_float(g, "ffloordiv", 3.0);
        check_float(g, "ffmod", 0.5);
        check_int(g, "pow", 1024);
        check_float(g, "negpow", 0.5);
        check_int(g, "right", 512);
        check_int(g, "neg", -4);
        check_int(g, "prec", 6);
        check_float(g, "root", 4.0);
        check_int(g, "lo", 2);
        check_float(g, "hi", 3.0);
        check_int(g, "up", 3);
        check_int(g, "down", -3);
        check_int(g, "lazy", 42);
        check_int(g, "big", INT64_MAX);
        check_int(g, "small", INT64_MIN);
        check_float(g, "eps", 1e-5);
        /* Constants are recorded in definition order. */
        CHECK(g->nconsts > 0 && strcmp(g->consts[0].name, "exact") == 0, "first constant");
    }
    ir_graph_free(g);
    ir_arena_free(a);
}

/* Every error leaves no graph behind; the message goes to the diagnostics stream. */
static void expect_error(const char *config, const char *needle)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ir_diag_set_stream(f);
    IrArena *a = ir_arena_new();
    IrGraph *g = compile_config(a, config);
    ir_diag_set_stream(NULL);
    fclose(f);
    CHECK(g == NULL, "'%s' must fail", config);
    CHECK(buf && strstr(buf, needle), "'%s': want '%s' in:\n%s", config, needle, buf ? buf : "");
    ir_graph_free(g);
    ir_arena_free(a);
    free(buf);
}

static void test_errors(void)
{
    expect_error("  x = 1 / 0", "division by zero: 1 / 0");
    expect_error("  x = 5 % 0", "modulo by zero");
    expect_error("  x = 1.0 / 0.0", "division by zero");
    expect_error("  x = 9223372036854775807 + 1", "integer overflow");
    expect_error("  x = -9223372036854775807 - 2", "integer overflow");
    expect_error("  x = 3037000500 * 3037000500", "integer overflow");
    expect_error("  x = 3 ** 41", "integer overflow: 3 ** 41");
    expect_error("  x = y\n  y = x", "depends on itself: x -> y -> x");
    expect_error("  x = x", "depends on itself: x -> x");
    expect_error("  x = min(1, 2, 3)", "min takes 2 arguments, got 3");
    expect_error("  x = sqrt(-4)", "sqrt of a negative number");
    expect_error("  x = 1e308 * 1e308", "overflows a float");
    expect_error("  x = ceil(1e30)", "does not fit");
}

static const IrPiece *piece(const IrGraph *g, int i) { return i < g->npieces ? &g->pieces[i] : NULL; }

static void test_tiny_llama(void)
{
    IrArena *a = ir_arena_new();
    IrGraph *g = compile_model(a, "tiny-llama.mdl", NULL, 0, 0);
    CHECK(g != NULL, "tiny-llama compiles");
    if (!g) {
        ir_arena_free(a);
        return;
    }
    CHECK(ir_verify(g, "frontend test"), "tiny-llama verifies");
    CHECK(strcmp(g->name, "llama") == 0, "model name %s", g->name);
    CHECK(g->global_batch == 16, "global batch %lld", (long long)g->global_batch);
    CHECK(g->seq_dim >= 0 && strcmp(g->dims[g->seq_dim].name, "seq") == 0, "seq dim");
    CHECK(g->dims[g->seq_dim].size == 32, "seq 32");
    CHECK(g->loss >= 0 && strcmp(g->tensors[g->loss].name, "loss") == 0 &&
          g->tensors[g->loss].role == IR_LOSS, "loss tensor");
    /* Pieces: embedding, one per layer, head. */
    CHECK(g->npieces == 4, "%d pieces", g->npieces);
    if (g->npieces == 4) {
        CHECK(strcmp(piece(g, 0)->name, "embedding") == 0 && piece(g, 0)->layer == -1, "piece 0");
        CHECK(strcmp(piece(g, 1)->name, "layer 0") == 0 && piece(g, 1)->layer == 0 &&
              piece(g, 1)->rep == 0, "piece 1");
        CHECK(strcmp(piece(g, 2)->name, "layer 1") == 0 && piece(g, 2)->layer == 1, "piece 2");
        CHECK(strcmp(piece(g, 3)->name, "head") == 0 && piece(g, 3)->rep == -1, "piece 3");
        /* Corresponding nodes of the two layers: same op, block and template index. */
        const IrPiece *l0 = piece(g, 1), *l1 = piece(g, 2);
        CHECK(l0->count == l1->count && l0->count > 0, "layer sizes %d %d", l0->count, l1->count);
        for (int k = 0; k < l0->count && k < l1->count; k++) {
            const IrNode *x = &g->nodes[l0->first + k], *y = &g->nodes[l1->first + k];
            CHECK(x->op == y->op && x->tmpl == k && y->tmpl == k && x->layer == 0 && y->layer == 1,
                  "node %d of the layers", k);
            CHECK(x->block && y->block && strcmp(x->block, y->block) == 0, "block of node %d", k);
        }
        CHECK(g->nodes[l0->first].block && strcmp(g->nodes[l0->first].block, "attn") == 0,
              "first layer node in block attn");
        CHECK(g->nodes[l0->first + l0->count - 1].block &&
              strcmp(g->nodes[l0->first + l0->count - 1].block, "mlp") == 0,
              "last layer node in block mlp");
        CHECK(g->nodes[0].block == NULL, "embedding outside blocks");
    }
    /* Per-layer names and Hugging Face names. */
    int wq = ir_tensor_find(g, "layers.1.wq");
    CHECK(wq >= 0, "layers.1.wq exists");
    if (wq >= 0) {
        const IrTensor *t = &g->tensors[wq];
        CHECK(t->role == IR_PARAM && t->layer == 1 && t->init == IR_INIT_NORMAL &&
              t->init_std == 0.02, "wq param");
        CHECK(t->hf_name && strcmp(t->hf_name, "model.layers.1.self_attn.q_proj.weight") == 0 &&
              t->hf_transposed && t->hf_nparts == 1, "wq hf %s", t->hf_name ? t->hf_name : "-");
    }
    int norm = ir_tensor_find(g, "final_norm");
    CHECK(norm >= 0 && g->tensors[norm].init == IR_INIT_ONES && !g->tensors[norm].hf_transposed &&
          strcmp(g->tensors[norm].hf_name, "model.norm.weight") == 0, "final_norm");
    /* Grouped-query attention: k has the kv-heads dim. */
    int k = ir_tensor_find(g, "layers.0.k");
    CHECK(k >= 0 && strcmp(g->dims[g->tensors[k].dim[2]].name, "n_kv_heads") == 0, "k dims");
    ir_graph_free(g);
    ir_arena_free(a);
}

/* n_kv_heads = n_heads (LLaMA-2 7B) is the same dimension, not two of one size. */
static void test_dim_alias(void)
{
    IrArena *a = ir_arena_new();
    IrGraph *g = compile_model(a, "llama2-7b.mdl", NULL, 0, 0);
    CHECK(g != NULL, "llama2-7b compiles");
    if (g) {
        int q = ir_tensor_find(g, "layers.0.q"), k = ir_tensor_find(g, "layers.0.k");
        CHECK(q >= 0 && k >= 0 && g->tensors[q].dim[2] == g->tensors[k].dim[2], "MHA: one heads dim");
        CHECK(ir_dim_find(g, "n_kv_heads") < 0, "no separate n_kv_heads dim");
        CHECK(g->global_batch == 1024, "global batch %lld", (long long)g->global_batch);
        CHECK(g->npieces == 34 && strcmp(g->pieces[33].name, "head") == 0, "pieces");
        CHECK(ir_param_count(g) == 6738415616LL, "7B count %lld", (long long)ir_param_count(g));
    }
    ir_graph_free(g);
    ir_arena_free(a);
    /* 70B sets n_kv_heads = 8: its own dim. */
    a = ir_arena_new();
    g = compile_model(a, "llama2-70b.mdl", NULL, 0, 0);
    CHECK(g && ir_dim_find(g, "n_kv_heads") >= 0 &&
          g->dims[ir_dim_find(g, "n_kv_heads")].size == 8, "70B kv heads");
    ir_graph_free(g);
    ir_arena_free(a);
}

static void test_overrides(void)
{
    IrArena *a = ir_arena_new();
    FeSet sets[] = {{"n_layers", "3"}, {"d_model", "128"}, {"norm_eps", "1e-6"}};
    IrGraph *g = compile_model(a, "tiny-llama.mdl", sets, 3, 64);
    CHECK(g != NULL, "tiny-llama with overrides compiles");
    if (g) {
        CHECK(g->global_batch == 64, "--global-batch wins: %lld", (long long)g->global_batch);
        CHECK(g->npieces == 5, "3 layers: %d pieces", g->npieces);
        check_int(g, "d_model", 128);
        check_int(g, "head_dim", 32); /* evaluated after the override: 128 / 4 */
        check_float(g, "norm_eps", 1e-6);
        CHECK(g->nodes[1].op == IR_OP_RMSNORM && g->nodes[1].attr.eps == 1e-6, "eps reaches the node");
    }
    ir_graph_free(g);
    ir_arena_free(a);
}

static void test_pieces(void)
{
    /* No embedding before the repeat: "pre"; code between two repeats: "between". */
    const char *src =
        "config {\n  seq = 4\n  d = 2\n  d2 = 3\n  v = 8\n}\n"
        "model p {\n  input tokens : i32[batch, seq]\n  input x : f32[batch, seq, d]\n"
        "  param w : [d, d2] = ones\n  h = matmul(x, w)\n"
        "  repeat 2 {\n    h = h + h\n  }\n"
        "  h = h * h\n"
        "  repeat 1 {\n    param u : [d2, d] = zeros hf \"u.{layer}\"\n    h = matmul(h, u)\n  }\n"
        "  param e : [d, v] = ones\n  loss = cross_entropy(matmul(h, e), tokens)\n}\n";
    IrArena *a = ir_arena_new();
    IrGraph *g = fe_compile_source(a, "pieces.mdl", src, strlen(src), NULL, 0, 0);
    CHECK(g != NULL, "pieces model compiles");
    if (g) {
        const char *want[] = {"pre", "layer 0", "layer 1", "between", "layer 1.0", "head"};
        CHECK(g->npieces == 6, "%d pieces", g->npieces);
        for (int i = 0; i < 6 && i < g->npieces; i++)
            CHECK(strcmp(g->pieces[i].name, want[i]) == 0, "piece %d is %s", i, g->pieces[i].name);
        CHECK(g->npieces == 6 && g->pieces[4].rep == 1 && g->pieces[4].layer == 0, "second repeat");
        int u = ir_tensor_find(g, "layers1.0.u");
        CHECK(u >= 0 && strcmp(g->tensors[u].hf_name, "u.0") == 0, "second repeat's param");
        CHECK(strcmp(g->dims[g->seq_dim].name, "seq") == 0, "seq");
        CHECK(ir_verify(g, "frontend test"), "verifies");
        CHECK(g->global_batch == 1, "default global batch");
    }
    ir_graph_free(g);
    ir_arena_free(a);
}

/* The fuzzer's pattern: many compilations, good and bad, one after another. */
static void test_repeated(void)
{
    FILE *null = fopen("/dev/null", "w");
    ir_diag_set_stream(null);
    const char *bad = "model m { x = ) }";
    for (int i = 0; i < 20; i++) {
        IrArena *a = ir_arena_new();
        IrGraph *g = i % 2 ? fe_compile_source(a, "bad.mdl", bad, strlen(bad), NULL, 0, 0)
                           : compile_model(a, "tiny-gpt.mdl", NULL, 0, 0);
        CHECK((g != NULL) == (i % 2 == 0), "compilation %d", i);
        CHECK(i % 2 == 1 || ir_error_count() == 0, "error count reset");
        ir_graph_free(g);
        ir_arena_free(a);
    }
    ir_diag_set_stream(NULL);
    fclose(null);
}

int main(int argc, char **argv)
{
    models = argc > 1 ? argv[1] : "models";
    test_arithmetic();
    test_errors();
    test_tiny_llama();
    test_dim_alias();
    test_overrides();
    test_pieces();
    test_repeated();
    if (failures) {
        fprintf(stderr, "fe_api_test: %d checks failed\n", failures);
        return 1;
    }
    printf("fe_api_test: all checks passed\n");
    return 0;
}
