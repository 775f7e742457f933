/* test_autodiff.c: the backward graph of every model in models/ (or the
 * files named on the command line) verifies, differentiates every forward node
 * that reaches the loss, gives every parameter exactly one final gradient with
 * its dims, and reads only saved forward tensors (pass_autodiff checks that
 * itself and dies otherwise), and ir_grad_in_place_all agrees with
 * ir_grad_in_place on every tensor. With --print FILE it prints the graph
 * (what `--emit ir-grad` shows). */
#include "frontend.h"
#include "ir.h"
#include "passes.h"

#include <stdlib.h>
#include <string.h>

static int fails;

#define CHECK(c, ...)                                                                         \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fprintf(stderr, "%s: ", path);                                                    \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            fails++;                                                                          \
        }                                                                                     \
    } while (0)

/* Forward nodes whose first output feeds a loss (the model's, or a later
 * weighted one: multi-token prediction's). */
static void reaching(const IrGraph *g, bool *reach)
{
    bool *live = calloc((size_t)g->ntensors, 1);
    for (int t = 0; t < g->ntensors; t++)
        live[t] = g->tensors[t].role == IR_LOSS;
    for (int i = g->nfwd - 1; i >= 0; i--) {
        const IrNode *n = &g->nodes[i];
        reach[i] = live[n->out[0]];
        if (reach[i])
            for (int k = 0; k < n->nin; k++)
                live[n->in[k]] = true;
    }
    free(live);
}

static void check(const char *path, bool print)
{
    IrArena *a = ir_arena_new();
    IrGraph *g = fe_compile_file(a, path, NULL, 0, 0);
    CHECK(g, "does not compile");
    if (!g) {
        ir_arena_free(a);
        return;
    }
    int nfwd = g->nfwd;
    CHECK(pass_autodiff(g), "autodiff failed");
    CHECK(ir_verify(g, "autodiff"), "backward graph does not verify");
    CHECK(g->nfwd == nfwd, "nfwd moved from %d to %d", nfwd, g->nfwd);
    if (print)
        ir_print(stdout, g);

    bool *reach = calloc((size_t)g->nfwd, 1);
    reaching(g, reach);
    int *nbwd = calloc((size_t)g->nfwd, sizeof *nbwd);
    for (int i = g->nfwd; i < g->nnodes; i++)
        if (!pass_is_grad_sum(g, &g->nodes[i]))
            nbwd[g->nodes[i].fwd]++;
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        /* Every node on a path from a parameter to the loss is differentiated;
         * MATMUL with two trained operands twice, ADD once per operand. */
        bool param_path = false;
        for (int k = 0; k < n->nin; k++)
            param_path |= pass_grad_final(g, n->in[k]) >= 0;
        if (reach[i] && param_path)
            CHECK(nbwd[i] >= 1, "node %d (%s) has no backward node", i, ir_ops[n->op].name);
        if (!reach[i])
            CHECK(nbwd[i] == 0, "node %d (%s) does not reach the loss but has a backward", i,
                  ir_ops[n->op].name);
        if (n->op == IR_OP_MATMUL && reach[i]) {
            int want = (pass_grad_final(g, n->in[0]) >= 0) + (pass_grad_final(g, n->in[1]) >= 0);
            CHECK(nbwd[i] == want, "matmul %d has %d backward nodes, want %d", i, nbwd[i], want);
        }
    }
    /* Every parameter has one final gradient with its dims; tied ones sum. */
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        if (x->role != IR_PARAM)
            continue;
        int d = pass_grad_final(g, t);
        CHECK(d >= 0, "param %s has no gradient", x->name);
        if (d < 0)
            continue;
        const IrTensor *y = &g->tensors[d];
        CHECK(y->role == IR_GRAD && y->grad_of == t && y->rank == x->rank &&
                  !memcmp(y->dim, x->dim, sizeof(int) * (size_t)x->rank),
              "gradient %s of %s is malformed", y->name, x->name);
        int uses = ir_consumers(g, t, NULL, 0);
        int sums = 0;
        for (int i = g->nfwd; i < g->nnodes; i++)
            if (pass_is_grad_sum(g, &g->nodes[i]) &&
                g->tensors[g->nodes[i].out[0]].grad_of == t)
                sums++;
        CHECK(sums == uses - 1, "param %s: %d uses but %d gradient sums", x->name, uses, sums);
    }
    /* The loss's gradient is written over the logits (ir_grad_in_place):
     * every model's head is a matmul read by the loss alone. */
    for (int i = 0; i < g->nfwd; i++)
        if (g->nodes[i].op == IR_OP_CROSS_ENTROPY)
            CHECK(ir_grad_in_place(g, g->nodes[i].in[0]), "the logits' gradient is not written over them");
    /* The memory model's one-pass map (ir_grad_in_place_all) says what
     * ir_grad_in_place says of every tensor. */
    bool *over = calloc((size_t)g->ntensors + 1, 1);
    ir_grad_in_place_all(g, over);
    int differ = 0;
    for (int t = 0; t < g->ntensors; t++)
        differ += over[t] != ir_grad_in_place(g, t);
    CHECK(!differ, "ir_grad_in_place_all differs from ir_grad_in_place on %d tensors", differ);
    free(over);
    /* The seed: the loss's gradient, a scalar nothing computes. */
    int seed = pass_grad_final(g, g->loss);
    CHECK(seed >= 0 && g->tensors[seed].producer == -1 && g->tensors[seed].rank == 0,
          "no seed gradient of the loss");
    free(reach);
    free(nbwd);
    ir_graph_free(g);
    ir_arena_free(a);
}

/* ir_grad_in_place on heads written three ways: the logits' gradient goes
 * over them only when nothing else reads them, including a producer that
 * keeps its output for its own backward (softmax). */
static void check_in_place(void)
{
    static const char *const heads[][2] = {
        {"logits = matmul(x, embed)\n  loss = cross_entropy(logits, targets)", "yes"},
        {"logits = matmul(x, embed)\n  p = softmax(logits)\n  loss = cross_entropy(logits, targets)", "no"},
        {"logits = softmax(matmul(x, embed))\n  loss = cross_entropy(logits, targets)", "no"},
    };
    for (size_t k = 0; k < sizeof heads / sizeof heads[0]; k++) {
        char text[1024], path[64];
        snprintf(text, sizeof text,
                 "config {\n  d_model = 16\n  vocab = 64\n  seq = 8\n}\n"
                 "model m {\n  input tokens : i32[batch, seq]\n  input targets : i32[batch, seq]\n"
                 "  param embed : [vocab, d_model] = normal(0.02)\n  x = embedding(tokens, embed)\n"
                 "  %s\n}\n", heads[k][0]);
        snprintf(path, sizeof path, "head-%zu.mdl", k);
        IrArena *a = ir_arena_new();
        IrGraph *g = fe_compile_source(a, path, text, strlen(text), NULL, 0, 0);
        CHECK(g, "does not compile");
        if (g) {
            int logits = ir_tensor_find(g, "logits");
            bool want = !strcmp(heads[k][1], "yes");
            CHECK(logits >= 0 && ir_grad_in_place(g, logits) == want,
                  "ir_grad_in_place(logits) is not %s", heads[k][1]);
            bool *over = calloc((size_t)g->ntensors + 1, 1);
            ir_grad_in_place_all(g, over);
            CHECK(logits >= 0 && over[logits] == want, "ir_grad_in_place_all: logits are not %s", heads[k][1]);
            free(over);
            ir_graph_free(g);
        }
        ir_arena_free(a);
    }
}

int main(int argc, char **argv)
{
    check_in_place();
    bool print = argc > 2 && !strcmp(argv[1], "--print");
    for (int i = print ? 2 : 1; i < argc; i++)
        check(argv[i], print);
    if (fails)
        fprintf(stderr, "test_autodiff: %d failures\n", fails);
    return fails != 0;
}
