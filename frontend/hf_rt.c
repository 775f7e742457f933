/* hf_rt.c: config.json is parsed by the runtime's strict JSON reader
 * (runtime/common/json.c, util.c), compiled into the frontend. Its allocation
 * helpers end in rt_fatal, which each runtime backend defines; this weak
 * stand-in serves the compiler, which links no backend. */
#include "rt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((weak)) void rt_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ptdc: internal error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}
