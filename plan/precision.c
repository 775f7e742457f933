/* precision.c: the names and widths of PLAN_PRECISIONS (plan.h), for the
 * flags, the plan files and the frameworks' outputs. */
#include "plan.h"

#include <string.h>

static const struct {
    const char *name;
    int bits;
} precs[PLAN_NPREC] = {
#define X(id, name, bits) {name, bits},
    PLAN_PRECISIONS(X)
#undef X
};

const char *plan_precision_name(PlanPrecision p)
{
    return (unsigned)p < PLAN_NPREC ? precs[p].name : "?";
}

int plan_precision_bits(PlanPrecision p)
{
    return (unsigned)p < PLAN_NPREC ? precs[p].bits : 16;
}

int plan_precision_parse(const char *s)
{
    for (int i = 0; i < PLAN_NPREC; i++)
        if (!strcmp(s, precs[i].name))
            return i;
    return -1;
}
