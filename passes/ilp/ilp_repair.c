/* ilp_repair.c: a choice that fits a problem's budget, made from one that
 * does not, to start GLPK from.
 *
 * The search's frontier walk solves a layer again under a budget just below
 * its last point (search_ilp.c); without an incumbent GLPK branches on the
 * memory row until it finds one. From the last point, switch one node at a
 * time to the strategy that saves memory at the least price per byte (a
 * saving that also costs less first) until the choice fits. GLPK takes it
 * as its first incumbent and proves or improves it: the answer is the
 * optimum either way. */
#include "ilp/ilp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int *ilp_repair(const IlpProblem *p, const int *from)
{
    if (!isfinite(p->budget) || p->nnodes < 1)
        return NULL;
    int *c = ir_xmalloc((size_t)p->nnodes * sizeof *c);
    memcpy(c, from, (size_t)p->nnodes * sizeof *c);
    IlpVals tot;
    double obj = ilp_eval(p, c, &tot), mem = ilp_memory(p, &tot);
    double cap = p->budget * (1 - 1e-9); /* as ilp_solve offers a start */
    /* Each step saves memory, so at most as many steps as strategies. */
    int steps = 0;
    for (int u = 0; u < p->nnodes; u++)
        steps += p->nodes[u].k;
    while (mem > cap && steps-- > 0) {
        int bu = -1, bi = -1;
        double best = INFINITY, bobj = 0, bmem = 0;
        for (int u = 0; u < p->nnodes; u++) {
            int was = c[u];
            for (int i = 0; i < p->nodes[u].k; i++) {
                if (i == was)
                    continue;
                c[u] = i;
                double o = ilp_eval(p, c, &tot), m = ilp_memory(p, &tot);
                if (m < mem) {
                    double r = (o - obj) / (mem - m);
                    if (r < best)
                        best = r, bu = u, bi = i, bobj = o, bmem = m;
                }
            }
            c[u] = was;
        }
        if (bu < 0)
            break;
        c[bu] = bi, obj = bobj, mem = bmem;
    }
    if (mem > cap) {
        free(c);
        return NULL;
    }
    return c;
}
