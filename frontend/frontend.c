/* frontend.c: the frontend's two entry points (frontend.h): load the files,
 * evaluate the constants, lower the model, and return the graph only if no
 * error was reported. Everything but the graph and the source texts (kept in
 * the caller's arena for later diagnostics) is freed before returning, so the
 * fuzzer can call this in a loop. */
#include "fe.h"

#include <string.h>

/* sequences per step: --global-batch, else the constant global_batch, else 1 */
static void set_global_batch(IrGraph *g, FeConsts *c, int64_t override)
{
    g->global_batch = 1;
    if (override > 0) {
        g->global_batch = override;
        return;
    }
    bool exists;
    FeValue v = fe_const_value(c, "global_batch", &exists);
    if (!exists || !v.ok)
        return;
    const IrConst *k = ir_const_find(g, "global_batch");
    IrLoc loc = k ? k->loc : IR_NOLOC;
    if (!v.is_int)
        ir_error(loc, "global_batch is %g; it must be a positive integer (sequences per step)", v.f);
    else if (v.i < 1)
        ir_error(loc, "global_batch is %lld; it must be a positive integer (sequences per step)",
                 (long long)v.i);
    else if (v.i > ((int64_t)1 << 40)) /* as --global-batch: counts stay far from overflow */
        ir_error(loc, "global_batch is %lld; at most 2^40 sequences per step", (long long)v.i);
    else
        g->global_batch = v.i;
}

static IrGraph *compile(IrArena *a, const char *path, const char *text, size_t len,
                        const FeSet *sets, int nsets, int64_t global_batch)
{
    ir_diag_reset();
    IrArena *tmp = ir_arena_new();
    FeProgram prog;
    FeConsts *c = NULL;
    IrGraph *g = NULL;
    bool ok = fe_load(a, tmp, path, text, len, &prog);
    if (ok)
        c = fe_consts_new(tmp, &prog, sets, nsets, &ok);
    if (ok && !prog.model_file) {
        fe_consts_to_graph(c, NULL); /* still report the constants' mistakes */
        ir_error((IrLoc){prog.files[prog.nfiles - 1]->path, 0, 0},
                 "no model body: neither this file nor its imports has 'model NAME { ... }'");
    } else if (ok) {
        g = ir_graph_new(a, prog.model_file->model_name, path);
        fe_consts_to_graph(c, g);
        set_global_batch(g, c, global_batch);
        /* Lower even after a constant's error: more mistakes are reported, and
         * uses of the failed constant stay quiet. */
        fe_lower(g, c, prog.model_file, tmp);
    }
    if (ir_error_count() > 0) {
        ir_graph_free(g);
        g = NULL;
    }
    fe_consts_free(c);
    fe_program_free(&prog);
    ir_arena_free(tmp);
    return g;
}

IrGraph *fe_compile_file(IrArena *a, const char *path, const FeSet *sets, int nsets,
                         int64_t global_batch)
{
    if (fe_is_hf_config(path)) { /* compiled as the .mdl import-hf would write */
        ir_diag_reset();
        size_t len;
        char *text = fe_hf_import(a, path, &len);
        if (!text)
            return NULL;
        /* Diagnostics name the generated text after its config.json. */
        size_t n = strlen(path);
        const char *cfg = n >= 5 && !strcmp(path + n - 5, ".json") ? path
                        : ir_sprintf(a, "%s/config.json", path);
        return compile(a, ir_sprintf(a, "%s.mdl", cfg), text, len, sets, nsets, global_batch);
    }
    return compile(a, path, NULL, 0, sets, nsets, global_batch);
}

IrGraph *fe_compile_source(IrArena *a, const char *path, const char *text, size_t len,
                           const FeSet *sets, int nsets, int64_t global_batch)
{
    return compile(a, path, text ? text : "", text ? len : 0, sets, nsets, global_batch);
}
