/* search_skel.c: the skeleton the search hands to the ILP: the same model
 * with at most three iterations of each repeat. A stage's ILP depends only
 * on the pieces it covers and the kinds of their neighbours (one layer
 * between layers, the embedding with the first layer, the last layer with
 * the head), so its answers are the full model's; but lowering a query
 * visits every tensor of the graph, and a 96-layer model has 40 times the
 * tensors of its skeleton. Kept pieces keep their names, layer numbers,
 * node order and tmpl numbers; a tensor made in a dropped layer and read by
 * a kept piece (the head reads the last layer's output) is replaced by the
 * same output of the last kept layer of that repeat. */
#include "search/search.h"

#include <stdlib.h>
#include <string.h>

#define KEEP 3

IrGraph *pass_search_skeleton(IrArena *a, const IrGraph *g)
{
    int P = g->npieces;
    bool *keep = ir_xcalloc((size_t)P + 1, sizeof(bool));
    int *last = ir_xmalloc(sizeof(int) * (size_t)(P + 1)); /* last kept piece of its repeat, up to p */
    int dropped = 0, run = 0;
    for (int p = 0; p < P; p++) {
        const IrPiece *pc = &g->pieces[p];
        if (pc->rep < 0) {
            keep[p] = true;
            last[p] = p;
            continue;
        }
        run = p > 0 && g->pieces[p - 1].rep == pc->rep ? run + 1 : 0;
        keep[p] = run < KEEP;
        last[p] = keep[p] ? p : last[p - 1];
        dropped += !keep[p];
    }
    if (!dropped) {
        free(keep);
        free(last);
        return NULL;
    }
    int N = g->nfwd, T = g->ntensors;
    int *pmap = ir_xmalloc(sizeof(int) * (size_t)(P + 1));
    int *nmap = ir_xmalloc(sizeof(int) * (size_t)(N + 1));
    int *tmap = ir_xmalloc(sizeof(int) * (size_t)(T + 1));
    int *subst = ir_xmalloc(sizeof(int) * (size_t)(T + 1));
    for (int i = 0; i < N; i++)
        nmap[i] = -1;
    for (int t = 0; t < T; t++) {
        tmap[t] = -1;
        subst[t] = t;
        int pr = g->tensors[t].producer;
        if (pr < 0 || pr >= N || keep[g->nodes[pr].piece])
            continue;
        /* Made in a dropped layer: the same output of the last kept one. */
        const IrNode *n = &g->nodes[pr];
        int q = last[n->piece];
        const IrNode *m = &g->nodes[g->pieces[q].first + (n->id - g->pieces[n->piece].first)];
        for (int o = 0; o < n->nout; o++)
            if (n->out[o] == t)
                subst[t] = m->out[o];
    }
    /* Which tensors the kept nodes touch, numbered in their original order. */
    bool *used = ir_xcalloc((size_t)T + 1, sizeof(bool));
    int nn = 0, np = 0;
    for (int p = 0; p < P; p++) {
        pmap[p] = keep[p] ? np++ : -1;
        if (!keep[p])
            continue;
        for (int i = g->pieces[p].first; i < g->pieces[p].first + g->pieces[p].count; i++) {
            nmap[i] = nn++;
            for (int k = 0; k < g->nodes[i].nin; k++)
                used[subst[g->nodes[i].in[k]]] = true;
            for (int k = 0; k < g->nodes[i].nout; k++)
                used[g->nodes[i].out[k]] = true;
        }
    }
    if (g->loss >= 0)
        used[subst[g->loss]] = true;
    int nt = 0;
    for (int t = 0; t < T; t++)
        if (used[t])
            tmap[t] = nt++;

    IrGraph *s = ir_alloc(a, sizeof *s);
    *s = *g;
    s->arena = a;
    memset(&s->names, 0, sizeof s->names);
    s->dims = ir_xmalloc(sizeof(IrDim) * (size_t)(g->ndims + 1));
    memcpy(s->dims, g->dims, sizeof(IrDim) * (size_t)g->ndims);
    s->capdims = g->ndims;
    s->consts = NULL;
    s->nconsts = 0;
    s->pieces = ir_xmalloc(sizeof(IrPiece) * (size_t)(np + 1));
    s->npieces = s->cappieces = np;
    s->nodes = ir_xmalloc(sizeof(IrNode) * (size_t)(nn + 1));
    s->nnodes = s->capnodes = s->nfwd = nn;
    s->tensors = ir_xmalloc(sizeof(IrTensor) * (size_t)(nt + 1));
    s->ntensors = s->captensors = nt;
    for (int p = 0; p < P; p++) {
        if (!keep[p])
            continue;
        IrPiece *q = &s->pieces[pmap[p]];
        *q = g->pieces[p];
        q->first = nmap[g->pieces[p].first];
    }
    for (int i = 0; i < N; i++) {
        if (nmap[i] < 0)
            continue;
        IrNode *n = &s->nodes[nmap[i]];
        *n = g->nodes[i];
        n->id = nmap[i];
        n->piece = pmap[n->piece];
        for (int k = 0; k < n->nin; k++)
            n->in[k] = tmap[subst[n->in[k]]];
        for (int k = 0; k < n->nout; k++)
            n->out[k] = tmap[n->out[k]];
    }
    for (int t = 0; t < T; t++) {
        if (tmap[t] < 0)
            continue;
        IrTensor *x = &s->tensors[tmap[t]];
        *x = g->tensors[t];
        x->id = tmap[t];
        x->producer = x->producer >= 0 && x->producer < N ? nmap[x->producer] : -1;
        x->piece = x->piece >= 0 && x->piece < P ? pmap[x->piece] : -1;
        x->grad_of = -1;
    }
    s->loss = g->loss >= 0 ? tmap[subst[g->loss]] : -1;
    for (int t = 0; t < nt; t++)
        ir_map_put(&s->names, s->tensors[t].name, t);
    free(keep);
    free(last);
    free(pmap);
    free(nmap);
    free(tmap);
    free(subst);
    free(used);
    return s;
}

void pass_search_skeleton_free(IrGraph *s)
{
    if (!s)
        return;
    free(s->dims);
    free(s->pieces);
    free(s->nodes);
    free(s->tensors);
    ir_map_free(&s->names);
}
