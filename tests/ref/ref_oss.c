/* ref_oss.c: GPT-OSS's experts between Hugging Face's layout and the
 * reference's. transformers stores each layer's experts fused and not
 * transposed (GptOssExperts): gate_up_proj [E, D, 2F] with gate and up
 * alternating column by column (gate_up[..., ::2], gate_up[..., 1::2]),
 * gate_up_proj_bias [E, 2F] likewise, down_proj [E, F, D] and down_proj_bias
 * [E, D]. The reference computes with them stacked apart, layers.L.e_gate,
 * e_up [E, D, F], e_down [E, F, D] and their biases (ref_moe.c); files are
 * read and written in Hugging Face's layout, so the interleaving here is
 * written from transformers' definition, apart from ptdc's runtime. */
#include "ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void drop(RefSt *st, int i)
{
    free(st->t[i].name);
    free(st->t[i].v);
    memmove(&st->t[i], &st->t[i + 1], sizeof *st->t * (size_t)(st->n - i - 1));
    st->n--;
}

/* In place: each layer's fused tensors replaced by the stacked ones. */
void ref_oss_unfuse(RefSt *st)
{
    for (int i = 0; i < st->n;) {
        int layer;
        char what[64], a[96], b[96];
        if (sscanf(st->t[i].name, "model.layers.%d.mlp.experts.%63s", &layer, what) != 2) {
            i++;
            continue;
        }
        bool bias = strstr(what, "_bias") != NULL;
        if (!strncmp(what, "gate_up_proj", 12)) {
            RefTensor t = st->t[i];
            int64_t cols = t.shape[t.ndim - 1], rows = t.n / cols, shape[4];
            memcpy(shape, t.shape, sizeof shape);
            shape[t.ndim - 1] = cols / 2;
            snprintf(a, sizeof a, "layers.%d.%s", layer, bias ? "e_gate_b" : "e_gate");
            snprintf(b, sizeof b, "layers.%d.%s", layer, bias ? "e_up_b" : "e_up");
            double *v = t.v; /* kept while the array grows */
            st->t[i].v = NULL;
            ref_st_add(st, a, t.ndim, shape);
            ref_st_add(st, b, t.ndim, shape); /* may move st->t: both found after */
            RefTensor *g = &st->t[st->n - 2], *u = &st->t[st->n - 1];
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < cols / 2; j++) {
                    g->v[r * (cols / 2) + j] = v[r * cols + 2 * j];
                    u->v[r * (cols / 2) + j] = v[r * cols + 2 * j + 1];
                }
            free(v);
            drop(st, i);
        } else if (!strncmp(what, "down_proj", 9)) {
            snprintf(a, sizeof a, "layers.%d.%s", layer, bias ? "e_down_b" : "e_down");
            free(st->t[i].name);
            st->t[i].name = strdup(a);
            i++;
        } else {
            i++;
        }
    }
}

/* A copy with each layer's stacked tensors fused as Hugging Face stores them. */
RefSt *ref_oss_fuse(const RefSt *st)
{
    RefSt *out = ref_st_new();
    for (int i = 0; i < st->n; i++) {
        const RefTensor *t = &st->t[i];
        int layer;
        char what[64], name[128];
        if (sscanf(t->name, "layers.%d.%63s", &layer, what) != 2 || strncmp(what, "e_", 2)) {
            RefTensor *c = ref_st_add(out, t->name, t->ndim, t->shape);
            memcpy(c->v, t->v, sizeof(double) * (size_t)t->n);
            continue;
        }
        bool bias = strstr(what, "_b") != NULL;
        if (!strncmp(what, "e_down", 6)) {
            snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%s", layer, bias ? "down_proj_bias" : "down_proj");
            RefTensor *c = ref_st_add(out, name, t->ndim, t->shape);
            memcpy(c->v, t->v, sizeof(double) * (size_t)t->n);
            continue;
        }
        if (strncmp(what, "e_gate", 6))
            continue; /* e_up joins e_gate's tensor */
        char up[96];
        snprintf(up, sizeof up, "layers.%d.%s", layer, bias ? "e_up_b" : "e_up");
        const RefTensor *u = ref_st_find(st, up);
        if (!u || u->n != t->n) {
            fprintf(stderr, "ref: %s has no %s beside it\n", t->name, up);
            exit(1);
        }
        int64_t shape[4], cols = t->shape[t->ndim - 1], rows = t->n / cols;
        memcpy(shape, t->shape, sizeof shape);
        shape[t->ndim - 1] = 2 * cols;
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%s", layer, bias ? "gate_up_proj_bias" : "gate_up_proj");
        RefTensor *c = ref_st_add(out, name, t->ndim, shape);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < cols; j++) {
                c->v[r * 2 * cols + 2 * j] = t->v[r * cols + j];
                c->v[r * 2 * cols + 2 * j + 1] = u->v[r * cols + j];
            }
    }
    return out;
}
