/* fe_fuzz.c: libFuzzer harness for the frontend (tests/fuzz/build.sh builds
 * it with clang -fsanitize=fuzzer,address,undefined). Each input is a .mdl
 * source compiled by fe_compile_source; leading lines "#set NAME=VALUE"
 * (comments to the parser) become --set overrides, so the fuzzer explores
 * those too. A graph the frontend returns must pass the IR verifier and
 * print; anything else it does must not crash, hang, leak or trip a
 * sanitizer. Imports resolve relative to the working directory, where
 * run.sh puts copies of models/. */
#include "frontend.h"
#include "ir.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SETS = 4 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null;
    if (!null) {
        null = fopen("/dev/null", "w");
        if (!null)
            abort();
        ir_diag_set_stream(null);
    }
    const char *text = (const char *)data;
    FeSet sets[MAX_SETS];
    char *owned[MAX_SETS];
    int nsets = 0;
    size_t at = 0;
    while (nsets < MAX_SETS && size - at > 5 && memcmp(text + at, "#set ", 5) == 0) {
        const char *line = text + at + 5, *end = memchr(line, '\n', size - at - 5);
        if (!end)
            break;
        size_t n = (size_t)(end - line);
        char *s = malloc(n + 1);
        memcpy(s, line, n);
        s[n] = 0;
        char *eq = strchr(s, '=');
        if (!eq || eq == s || strlen(s) != n) {
            free(s);
            break;
        }
        *eq = 0;
        owned[nsets] = s;
        sets[nsets++] = (FeSet){s, eq + 1};
        at = (size_t)(end - text) + 1;
    }
    IrArena *a = ir_arena_new();
    IrGraph *g = fe_compile_source(a, "fuzz.mdl", text, size, sets, nsets, 0);
    if (g) {
        if (!ir_verify(g, "frontend (fuzz)"))
            abort(); /* the frontend returned a graph that breaks an invariant */
        ir_print(null, g);
        ir_print_summary(null, g);
        ir_graph_free(g);
    }
    ir_arena_free(a);
    for (int i = 0; i < nsets; i++)
        free(owned[i]);
    return 0;
}
