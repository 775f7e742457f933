/* cg_gen.c: test tool. cg_gen MODEL.mdl LAYOUT DIR [--set NAME=VALUE ...]
 * compiles a model, differentiates it, builds the test plan for LAYOUT
 * (layout.h) and writes the training program to DIR with cg_emit. */
#include "codegen.h"
#include "frontend.h"
#include "layout.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: cg_gen MODEL.mdl LAYOUT DIR [--set NAME=VALUE ...] [--cuda]\n");
        return 2;
    }
    FeSet sets[16];
    int nsets = 0;
    CgTarget target = CG_TARGET_CPU;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--cuda")) {
            target = CG_TARGET_CUDA;
            continue;
        }
        if (strcmp(argv[i], "--set") || i + 1 >= argc || nsets == 16) {
            fprintf(stderr, "cg_gen: bad argument '%s'\n", argv[i]);
            return 2;
        }
        char *eq = strchr(argv[++i], '=');
        if (!eq)
            return 2;
        *eq = 0;
        sets[nsets++] = (FeSet){argv[i], eq + 1};
    }
    Layout l;
    if (!layout_parse(argv[2], &l))
        return 2;
    IrArena *a = ir_arena_new();
    int rc = 1;
    IrGraph *g = fe_compile_file(a, argv[1], sets, nsets, 0);
    if (!g)
        goto out;
    if (!ir_verify(g, "frontend") || !pass_autodiff(g) || !ir_verify(g, "autodiff"))
        goto out;
    PassPlan plan;
    if (!layout_plan(g, &l, &plan))
        goto out;
    CgOptions o;
    cg_options_default(&o, target);
    if (cg_emit(g, &plan, &o, argv[3]))
        rc = 0;
out:
    if (g)
        ir_graph_free(g);
    ir_arena_free(a);
    return rc;
}
