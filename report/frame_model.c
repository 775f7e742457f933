/* frame_model.c: the model as a framework states it. Every property of the
 * decoder (arch.def) and every attribute its operators carry (ir/attrs.def)
 * goes through the framework's handler for it, in table order: each handler
 * adds the flags or keywords that state it, or refuses by name. The tables
 * are the emitters' (rep_megatron_arch/attr, rep_torchtitan_arch/attr),
 * indexed by row, and a row without a handler does not compile there. */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void add(char *line, size_t n, int *count, int max, const char *what, const char *fmt, va_list ap)
{
    if (*count == max)
        ir_die("pass_frame_%s: more than %d", what, max);
    vsnprintf(line, n, fmt, ap);
    (*count)++;
}

void rep_frame_arg(RepFrameOut *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(o->arg[o->narg], sizeof o->arg[0], &o->narg, (int)(sizeof o->arg / sizeof o->arg[0]), "arg", fmt, ap);
    va_end(ap);
}

void rep_frame_rope(RepFrameOut *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(o->rope[o->nrope], sizeof o->rope[0], &o->nrope, 6, "rope", fmt, ap);
    va_end(ap);
}

void rep_frame_note(RepFrameOut *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(o->note[o->nnote], sizeof o->note[0], &o->nnote, 8, "note", fmt, ap);
    va_end(ap);
}

bool rep_frame_refuse(const IrGraph *g, RepFrameOut *o, const char *fmt, ...)
{
    char sub[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sub, sizeof sub, fmt, ap);
    va_end(ap);
    snprintf(o->why, o->wn, "%s cannot express %s: %s", o->fw, g->name, sub);
    return false;
}

bool rep_frame_model(const IrGraph *g, const RepArch *a, RepFrameFn *const arch[REP_NARCH],
                     RepFrameFn *const attr[IR_NATTRS], RepFrameOut *o)
{
    for (int i = 0; i < REP_NARCH; i++)
        if (!arch[i](g, a, o))
            return false;
    for (int i = 0; i < IR_NATTRS; i++) {
        bool absent = (ir_attrs[i].flags & IR_ATTRF_OMIT0) && a->attr[i] == 0; /* no window, no scaling */
        if (a->has_attr[i] && !absent && !attr[i](g, a, o))
            return false;
    }
    return true;
}

void rep_frame_print_notes(FILE *f, const RepFrameOut *o)
{
    for (int i = 0; i < o->nnote; i++) {
        const char *s = o->note[i];
        int col = 0;
        fprintf(f, "#");
        while (*s) {
            size_t w = strcspn(s, " ");
            if (col > 0 && col + (int)w > 94) {
                fprintf(f, "\n#  ");
                col = 0;
            }
            fprintf(f, " %.*s", (int)w, s);
            col += (int)w + 1;
            s += w;
            while (*s == ' ')
                s++;
        }
        fprintf(f, "\n");
    }
}
