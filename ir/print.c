/* print.c: the IR's text form (--emit ir) and summary (--emit summary).
 * The text form is golden-tested, so its format changes only on purpose. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

const char *ir_fmt_count(int64_t n, char *buf, size_t len)
{
    char tmp[32];
    int k = snprintf(tmp, sizeof tmp, "%lld", (long long)(n < 0 ? -n : n));
    size_t o = 0;
    if (n < 0 && o + 1 < len)
        buf[o++] = '-';
    for (int i = 0; i < k && o + 1 < len; i++) {
        buf[o++] = tmp[i];
        if ((k - i - 1) % 3 == 0 && i != k - 1 && o + 1 < len)
            buf[o++] = ',';
    }
    buf[o] = 0;
    return buf;
}

/* The shortest decimal that reads back as exactly d (1e-05, not
 * 1.0000000000000001e-05), so dumps are exact and readable. */
static const char *fmt_double(double d, char *buf, size_t n)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    return buf;
}

static void type_str(const IrGraph *g, int t, char *buf, size_t n)
{
    char shape[256];
    snprintf(buf, n, "%s%s", ir_dtype_name(g->tensors[t].dtype), ir_shape_str(g, t, shape, sizeof shape));
}

static int64_t param_numel(const IrGraph *g, int t)
{
    int64_t k = 1;
    for (int i = 0; i < g->tensors[t].rank; i++)
        k *= g->dims[g->tensors[t].dim[i]].size;
    return k;
}

static void print_attrs(FILE *f, const IrGraph *g, const IrNode *n)
{
    char v[64];
    for (int id = 0; id < IR_NATTRS; id++) {
        const IrAttrInfo *a = &ir_attrs[id];
        if (a->op != n->op || ((a->flags & IR_ATTRF_OMIT0) && ir_attr_get(&n->attr, (IrAttrId)id) == 0))
            continue;
        fprintf(f, " %s=%s", a->name, ir_attr_str(g, &n->attr, (IrAttrId)id, v, sizeof v));
    }
    if (n->op == IR_OP_MATMUL) { /* structural, not an attribute: the contracted dims */
        fprintf(f, " contract=[");
        for (int i = 0; i < n->attr.ncontract; i++)
            fprintf(f, "%s%s", i ? ", " : "", g->dims[n->attr.contract[i]].name);
        fprintf(f, "]");
    }
}

static void print_node(FILE *f, const IrGraph *g, const IrNode *n)
{
    char ty[300];
    fprintf(f, "  ");
    for (int i = 0; i < n->nout; i++)
        fprintf(f, "%s%s", i ? ", " : "", g->tensors[n->out[i]].name);
    fprintf(f, " = %s(", ir_ops[n->op].name);
    for (int i = 0; i < n->nin; i++)
        fprintf(f, "%s%s", i ? ", " : "", g->tensors[n->in[i]].name);
    fprintf(f, ")");
    print_attrs(f, g, n);
    fprintf(f, " :");
    for (int i = 0; i < n->nout; i++) {
        type_str(g, n->out[i], ty, sizeof ty);
        fprintf(f, "%s %s", i ? "," : "", ty);
    }
    if (n->block)
        fprintf(f, "  {%s}", n->block);
    if (n->fwd >= 0)
        fprintf(f, "  <- node %d", n->fwd);
    fprintf(f, "\n");
}

void ir_print(FILE *f, const IrGraph *g)
{
    char ty[300], cnt[40], num[40];
    fprintf(f, "model %s\n", g->name);
    fprintf(f, "config\n");
    for (int i = 0; i < g->nconsts; i++) {
        const IrConst *c = &g->consts[i];
        if (c->is_int)
            fprintf(f, "  %s = %lld\n", c->name, (long long)c->i);
        else
            fprintf(f, "  %s = %s\n", c->name, fmt_double(c->f, num, sizeof num));
    }
    fprintf(f, "dims\n");
    for (int d = 0; d < g->ndims; d++) {
        if (d == g->batch_dim)
            fprintf(f, "  %s = (micro-batch, chosen by the planner; global batch %lld)\n",
                    g->dims[d].name, (long long)g->global_batch);
        else
            fprintf(f, "  %s = %lld%s\n", g->dims[d].name, (long long)g->dims[d].size,
                    d == g->seq_dim ? "  (sequence)" : "");
    }
    fprintf(f, "inputs\n");
    for (int t = 0; t < g->ntensors; t++)
        if (g->tensors[t].role == IR_INPUT) {
            type_str(g, t, ty, sizeof ty);
            fprintf(f, "  %s : %s\n", g->tensors[t].name, ty);
        }
    fprintf(f, "params\n");
    for (int t = 0; t < g->ntensors; t++) {
        const IrTensor *x = &g->tensors[t];
        if (x->role != IR_PARAM)
            continue;
        type_str(g, t, ty, sizeof ty);
        fprintf(f, "  %s : %s = ", x->name, ty);
        switch (x->init) {
        case IR_INIT_NORMAL: fprintf(f, "normal(%g)", x->init_std); break;
        case IR_INIT_ZEROS: fprintf(f, "zeros"); break;
        case IR_INIT_ONES: fprintf(f, "ones"); break;
        case IR_INIT_NONE: fprintf(f, "?"); break;
        }
        fprintf(f, "  # %s", ir_fmt_count(param_numel(g, t), cnt, sizeof cnt));
        if (x->hf_name) {
            fprintf(f, "  hf \"%s\"%s", x->hf_name, x->hf_transposed ? " transposed" : "");
            if (x->hf_nparts > 1)
                fprintf(f, " part %d of %d%s", x->hf_part, x->hf_nparts, x->hf_interleaved ? " interleaved" : "");
        }
        fprintf(f, "\n");
    }
    for (int p = 0; p < g->npieces; p++) {
        const IrPiece *pc = &g->pieces[p];
        fprintf(f, "piece %d: %s\n", p, pc->name);
        for (int i = pc->first; i < pc->first + pc->count; i++)
            print_node(f, g, &g->nodes[i]);
    }
    if (g->nnodes > g->nfwd) {
        fprintf(f, "backward\n");
        for (int i = g->nfwd; i < g->nnodes; i++)
            print_node(f, g, &g->nodes[i]);
    }
    if (g->loss >= 0)
        fprintf(f, "loss %s\n", g->tensors[g->loss].name);
}

void ir_print_summary(FILE *f, const IrGraph *g)
{
    char a[40], b[40];
    int nlayers = 0;
    int64_t in_layers = 0, outside = 0;
    for (int p = 0; p < g->npieces; p++)
        nlayers += g->pieces[p].layer >= 0;
    for (int t = 0; t < g->ntensors; t++) {
        if (g->tensors[t].role != IR_PARAM)
            continue;
        if (g->tensors[t].layer >= 0)
            in_layers += param_numel(g, t);
        else
            outside += param_numel(g, t);
    }
    fprintf(f, "model %s (%s)\n", g->name, g->path ? g->path : "?");
    fprintf(f, "  dims:");
    for (int d = 0; d < g->ndims; d++) {
        if (d == g->batch_dim)
            fprintf(f, " %s=*", g->dims[d].name);
        else
            fprintf(f, " %s=%lld", g->dims[d].name, (long long)g->dims[d].size);
    }
    fprintf(f, "\n  global batch: %lld sequences of %lld tokens\n", (long long)g->global_batch,
            g->seq_dim >= 0 ? (long long)g->dims[g->seq_dim].size : 0LL);
    fprintf(f, "  pieces: %d (%d repeated layers)\n", g->npieces, nlayers);
    int count[IR_NUM_OPS] = {0};
    for (int i = 0; i < g->nfwd; i++)
        count[g->nodes[i].op]++;
    fprintf(f, "  forward nodes: %d (", g->nfwd);
    bool first = true;
    for (int o = 0; o < IR_NUM_OPS; o++)
        if (count[o]) {
            fprintf(f, "%s%s %d", first ? "" : ", ", ir_ops[o].name, count[o]);
            first = false;
        }
    fprintf(f, ")\n  tensors: %d\n", g->ntensors);
    fprintf(f, "  parameters: %s (%s in repeated layers, %s outside)\n",
            ir_fmt_count(ir_param_count(g), a, sizeof a), ir_fmt_count(in_layers, b, sizeof b),
            ir_fmt_count(outside, (char[40]){0}, 40));
    if (count[IR_OP_MOE]) {
        int64_t active = ir_active_param_count(g);
        fprintf(f, "  active parameters: %s a token (%.1f%% of the total: experts count topk / "
                "n_experts)\n", ir_fmt_count(active, a, sizeof a),
                100.0 * (double)active / (double)ir_param_count(g));
    }
    fprintf(f, "  matmul parameters (PaLM N): %s\n", ir_fmt_count(ir_matmul_param_count(g), a, sizeof a));
}
