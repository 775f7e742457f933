/* main.c: ptdc's pipeline, a straight sequence of passes:
 *   frontend (parse, check, lower) -> ir_verify -> [plan -> codegen]
 * Each stage reports user errors itself; any error exits with status 1
 * before an output file is written. */
#include "driver.h"
#include "frontend.h"
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    DrvOptions o;
    if (!drv_parse_options(argc, argv, &o)) {
        drv_free_options(&o);
        return 1;
    }
    IrArena *arena = ir_arena_new();
    FeSet *sets = ir_alloc(arena, sizeof(FeSet) * (size_t)(o.nsets + 1));
    for (int i = 0; i < o.nsets; i++)
        sets[i] = (FeSet){o.sets[i].name, o.sets[i].value};
    int rc = 1;
    IrGraph *g = fe_compile_file(arena, o.model, sets, o.nsets, o.global_batch);
    if (!g)
        goto out;
    if (!ir_verify(g, "frontend"))
        ir_die("the frontend produced an invalid graph for %s", o.model);
    if (!o.emit || !strcmp(o.emit, "summary")) {
        ir_print_summary(stdout, g);
    } else if (!strcmp(o.emit, "ir")) {
        ir_print(stdout, g);
    } else {
        ir_error(IR_NOLOC, "--emit %s is not available yet", o.emit);
        goto out;
    }
    rc = 0;
out:
    if (g)
        ir_graph_free(g);
    ir_arena_free(arena);
    drv_free_options(&o);
    return rc;
}
