/* attrs.c: the attribute table (attrs.def) and access to an attribute by
 * its id, so the frontend, the printer and the framework emitters walk one
 * list instead of naming fields. */
#include "ir.h"

#include <stdio.h>

const IrAttrInfo ir_attrs[IR_NATTRS] = {
#define ATTR(ID, op, name, kind, flags, field) [IR_ATTR_##ID] = {IR_OP_##op, name, kind, flags},
#include "attrs.def"
#undef ATTR
};

const char *const *ir_attr_words(IrAttrId id)
{
    switch (id) {
#define WORDS(ID, ...)                                                                        \
    case IR_ATTR_##ID: {                                                                      \
        static const char *const w[] = {__VA_ARGS__, NULL};                                   \
        return w;                                                                             \
    }
#define ATTR(ID, op, name, kind, flags, field)
#include "attrs.def"
#undef ATTR
#undef WORDS
    case IR_ATTR_MOE_ACT: {
        static const char *const w[] = {
#define MOE_ACT(ID, name, gated, clamped) name,
#include "moe_acts.def"
#undef MOE_ACT
            NULL};
        return w;
    }
    default: return NULL;
    }
}

double ir_attr_get(const IrAttrs *a, IrAttrId id)
{
    switch (id) {
#define ATTR(ID, op, name, kind, flags, field) \
    case IR_ATTR_##ID: return (double)a->field;
#include "attrs.def"
#undef ATTR
    case IR_NATTRS: break;
    }
    ir_die("ir_attr_get: attribute %d", (int)id);
}

void ir_attr_set(IrAttrs *a, IrAttrId id, double v)
{
    switch (id) {
#define ATTR(ID, op, name, kind, flags, field) \
    case IR_ATTR_##ID: a->field = v; return;
#include "attrs.def"
#undef ATTR
    case IR_NATTRS: break;
    }
    ir_die("ir_attr_set: attribute %d", (int)id);
}

const char *ir_attr_str(const IrGraph *g, const IrAttrs *a, IrAttrId id, char *buf, size_t n)
{
    double v = ir_attr_get(a, id);
    switch (ir_attrs[id].kind) {
    case IR_AK_NUM: snprintf(buf, n, "%g", v); break;
    case IR_AK_BOOL: snprintf(buf, n, "%s", v != 0 ? "true" : "false"); break;
    case IR_AK_DIM: snprintf(buf, n, "%s", v >= 0 && v < g->ndims ? g->dims[(int)v].name : "?"); break;
    case IR_AK_COUNT: snprintf(buf, n, "%lld", (long long)v); break;
    case IR_AK_WORD: {
        const char *const *w = ir_attr_words(id);
        int k = 0;
        while (w && w[k] && k < (int)v)
            k++;
        snprintf(buf, n, "%s", w && w[k] && k == (int)v ? w[k] : "?");
        break;
    }
    }
    return buf;
}
