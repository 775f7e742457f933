/* plan_svg.c: plan.svg, the plan as a picture (hand-written SVG):
 *   1. the devices, node by node, coloured by pipeline rank, with every
 *      tensor-parallel group outlined;
 *   2. the pipeline schedule as a timeline: forward and backward of each
 *      micro-batch on each pipeline rank, laid out by simulating the
 *      schedule (1F1B, or Megatron's interleaved order) with the stages'
 *      per-micro-batch times (plan_pipe.c), then the exposed data-parallel traffic and the
 *      optimizer step;
 *   3. memory per pipeline rank, itemised, against the capacity. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0
#define W 1000.0                  /* picture width */
#define MARGIN 20.0

static void color(int pp_rank, int pp, double light, char *buf, size_t n)
{
    double hue = pp > 1 ? 360.0 * pp_rank / pp : 210;
    snprintf(buf, n, "hsl(%.0f,65%%,%.0f%%)", hue, light);
}

static void text(FILE *f, double x, double y, double size, const char *anchor, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"%s\">", x, y, size, anchor);
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
    fputs("</text>\n", f);
}

/* ------------------------------------------------------------ devices */

/* gpn: GPUs per NVLink domain, drawn as one box; host: GPUs per host. */
static double devices(FILE *f, const Plan *p, const PlanLayout *L, int gpus, int gpn, int host, double y)
{
    /* inner: the ranks of one data-parallel replica (d1, or cp x tp on a
     * dp x cp x tp mesh); tpn: a tensor-parallel group, the innermost axis. */
    int dev = plan_mesh_devices(&p->mesh), inner = dev / p->mesh.size[0];
    int tpx = p->mesh.naxes - 1, d1 = L->tp_axis == tpx && tpx > 0 ? p->mesh.size[tpx] : 1;
    int cpb = L->cp > 1 ? L->cp * (L->tp_axis == tpx && tpx > 1 ? d1 : 1) : 0;
    int nodes = (gpus + gpn - 1) / gpn;
    int per_row = nodes;
    double cell = (W - 2 * MARGIN) / ((double)per_row * gpn + per_row);
    while (cell < 6 && per_row > 1) {
        per_row = (per_row + 1) / 2;
        cell = (W - 2 * MARGIN) / ((double)per_row * gpn + per_row);
    }
    if (cell > 36)
        cell = 36;
    int rows = (nodes + per_row - 1) / per_row;
    char buf[256]; /* room for both sentences at any int (-Wformat-truncation once inlined) */
    int k = snprintf(buf, sizeof buf, "Devices: %d GPUs in %d %s%s of %d, coloured by pipeline rank; "
                     "outlines: tensor-parallel groups of %d", gpus, nodes, gpn == host ? "node" : "NVLink domain",
                     nodes == 1 ? "" : "s", gpn, L->tp);
    if (cpb > 0 && k > 0 && (size_t)k < sizeof buf)
        snprintf(buf + k, sizeof buf - (size_t)k, "; dashed: context-parallel blocks of %d (cp %d x tp %d)",
                 cpb, L->cp, cpb / L->cp);
    text(f, MARGIN, y + 14, 14, "start", buf);
    y += 24;
    for (int r = 0; r < gpus; r++) {
        int node = r / gpn, slot = r % gpn;
        double x = MARGIN + (node % per_row) * (gpn + 1) * cell + slot * cell;
        double yy = y + (node / per_row) * (cell + 4);
        int used = dev * p->pp;
        char c[48];
        if (r < used) {
            int pr = r / dev, i = r % dev;
            /* alternate shades between data-parallel replicas */
            color(pr, p->pp, (i / inner) % 2 ? 62 : 52, c, sizeof c);
        } else {
            snprintf(c, sizeof c, "#dddddd");
        }
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                   "stroke=\"white\" stroke-width=\"0.5\"><title>rank %d%s</title></rect>\n",
                x, yy, cell, cell, c, r, r < used ? "" : " (idle)");
    }
    /* Tensor groups: d1 consecutive ranks on the inner axis. */
    if (L->tp > 1 && L->tp_axis == tpx && tpx > 0 && d1 <= gpn)
        for (int g0 = 0; g0 < dev * p->pp; g0 += d1) {
            int node = g0 / gpn, slot = g0 % gpn;
            double x = MARGIN + (node % per_row) * (gpn + 1) * cell + slot * cell;
            double yy = y + (node / per_row) * (cell + 4);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                       "stroke=\"black\" stroke-width=\"%.1f\"/>\n",
                    x + 0.5, yy + 0.5, d1 * cell - 1, cell - 1, cell > 12 ? 1.5 : 0.7);
        }
    /* Context parallelism: the cp x tp consecutive ranks whose cp groups
     * (every tp-th rank) split one replica's sequences, dashed, where a node
     * holds whole blocks. */
    if (cpb > 0 && gpn % cpb == 0)
        for (int g0 = 0; g0 < dev * p->pp; g0 += cpb) {
            int node = g0 / gpn, slot = g0 % gpn;
            double x = MARGIN + (node % per_row) * (gpn + 1) * cell + slot * cell;
            double yy = y + (node / per_row) * (cell + 4);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                       "stroke=\"black\" stroke-dasharray=\"3,2\" stroke-width=\"%.1f\"/>\n",
                    x - 1, yy - 1, cpb * cell + 2, cell + 2, cell > 12 ? 1.0 : 0.5);
        }
    y += rows * (cell + 4) + 6;
    /* Legend. */
    double x = MARGIN;
    for (int r = 0; r < p->pp && r < 16; r++) {
        char c[48], lbl[32];
        color(r, p->pp, 55, c, sizeof c);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", x, y, c);
        snprintf(lbl, sizeof lbl, "pp %d", r);
        text(f, x + 16, y + 10, 11, "start", lbl);
        x += 60;
    }
    if (p->pp > 16)
        text(f, x, y + 10, 11, "start", "...");
    return y + 24;
}

/* ----------------------------------------------------------- schedule */

static double schedule(FILE *f, const PassSearchAlt *a, double y)
{
    const Plan *p = &a->plan;
    int pp = p->pp, v = p->v > 1 ? p->v : 1, m = p->num_micro;
    /* Keep the picture readable: at most 4 * pp (and 64) micro-batches. */
    int shown = m;
    int cap = 4 * pp > 64 ? 4 * pp : 64;
    if (shown > cap)
        shown = cap - cap % pp;
    if (v > 1 && shown % pp)
        shown -= shown % pp;
    if (shown < 1)
        shown = m;
    int nvs = pp * v;
    double *fwd = ir_xcalloc((size_t)nvs, sizeof(double)), *bwd = ir_xcalloc((size_t)nvs, sizeof(double));
    /* stage c runs on rank c % pp as its chunk c / pp */
    for (int c = 0; c < p->nstages && c < nvs; c++) {
        fwd[c] = a->stage_fwd_s[c];
        bwd[c] = a->stage_bwd_s[c];
    }
    double *wg = rep_pipe_wgrad(a);
    int nops = plan_schedule_nops(p->schedule, v, shown);
    RepPipeOp **ops = ir_xmalloc(sizeof(RepPipeOp *) * (size_t)pp);
    for (int r = 0; r < pp; r++) {
        ops[r] = ir_xmalloc(sizeof(RepPipeOp) * (size_t)nops);
        rep_pipe_order(p->schedule, pp, v, shown, r, ops[r]);
    }
    double end = rep_pipe_simulate(p->schedule, pp, v, shown, fwd, bwd, wg, ops);
    free(wg);
    double tail = a->pred.dp_exposed_s + a->pred.optimizer_s;
    /* the tail scales with the micro-batches shown */
    double total = end + tail;
    char buf[256], mbs[64], sched[48];
    if (shown < m)
        snprintf(mbs, sizeof mbs, "the first %d of %d micro-batches", shown, m);
    else
        snprintf(mbs, sizeof mbs, "%d micro-batches", m);
    if (v > 1)
        snprintf(sched, sizeof sched, "interleaved, v = %d", v);
    else if (plan_schedule_split(p->schedule))
        snprintf(sched, sizeof sched, "%s, weight gradients darkest", plan_schedule_title(p->schedule));
    else
        snprintf(sched, sizeof sched, "1F1B");
    snprintf(buf, sizeof buf, "Pipeline schedule (%s), %s: forward light, backward dark, "
             "grey: exposed data-parallel traffic and optimizer", sched, mbs);
    text(f, MARGIN, y + 14, 14, "start", buf);
    y += 24;
    double left = MARGIN + 50, width = W - left - MARGIN;
    double row = pp <= 16 ? 22 : pp <= 64 ? 8 : 4;
    double sx = total > 0 ? width / total : 0;
    for (int r = 0; r < pp; r++) {
        double yy = y + r * row;
        if (row >= 8) {
            snprintf(buf, sizeof buf, "pp %d", r);
            text(f, MARGIN, yy + row * 0.7, row >= 16 ? 11 : 7, "start", buf);
        }
        /* the rank's five shades, made once (tens of thousands of rects) */
        char shade[5][48];
        static const double light[5] = {26, 38, 46, 70, 78};
        for (int j = 0; j < 5; j++)
            color(r, pp, light[j], shade[j], sizeof shade[j]);
        for (int i = 0; i < nops; i++) {
            const RepPipeOp *o = &ops[r][i];
            const char *c = shade[o->w ? 0 : o->bwd ? 1 + o->chunk % 2 : 3 + o->chunk % 2];
            double x = left + o->start * sx, w = (o->end - o->start) * sx;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" "
                       "stroke=\"white\" stroke-width=\"0.3\"><title>%s micro-batch %d%s</title></rect>\n",
                    x, yy, w > 0.2 ? w : 0.2, row - 1, c,
                    o->w ? "weight gradients" : o->bwd ? "backward" : "forward", o->mb,
                    v > 1 ? (o->chunk ? " (later chunk)" : " (first chunk)") : "");
            if (w > 14 && row >= 14) {
                snprintf(buf, sizeof buf, "%d", o->mb);
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" text-anchor=\"middle\" "
                           "fill=\"%s\">%s</text>\n", x + w / 2, yy + row * 0.62,
                        o->bwd ? "white" : "black", buf);
            }
        }
        if (tail > 0)
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"#999999\">"
                       "<title>exposed data-parallel traffic and optimizer</title></rect>\n",
                    left + end * sx, yy, tail * sx, row - 1);
    }
    y += pp * row + 4;
    snprintf(buf, sizeof buf, "time: %.3f s shown (the step: %.3f s, bubble %.1f%%)", total,
             a->pred.step_time_s, a->pred.step_time_s > 0 ? 100 * a->pred.bubble_s / a->pred.step_time_s : 0);
    text(f, left, y + 12, 11, "start", buf);
    for (int r = 0; r < pp; r++)
        free(ops[r]);
    free(ops);
    free(fwd);
    free(bwd);
    return y + 26;
}

/* ------------------------------------------------------------- memory */

static double memory(FILE *f, const PassSearchAlt *a, double y)
{
    const PassPrediction *pr = &a->pred;
    int pp = pr->npp;
    char buf[200];
    double usable = pr->peak_mem_bytes + pr->margin_bytes;
    snprintf(buf, sizeof buf, "Memory per GPU by pipeline rank (GiB): capacity %.1f (black line), "
             "usable %.1f (dashed)", pr->capacity_bytes / GIB, usable / GIB);
    text(f, MARGIN, y + 14, 14, "start", buf);
    y += 24;
    static const char *const names[] = {"weights", "gradients", "optimizer", "activations", "other"};
    static const char *const fills[] = {"#4c72b0", "#55a868", "#c44e52", "#dd8452", "#8c8c8c"};
    double left = MARGIN + 50, width = W - left - MARGIN - 10;
    double scale = width / fmax(pr->capacity_bytes, pr->peak_mem_bytes);
    double row = pp <= 16 ? 18 : pp <= 64 ? 6 : 3;
    for (int r = 0; r < pp; r++) {
        const PassRankMem *m = &pr->mem[r];
        double items[5] = {m->weights, m->grads, m->optim, m->acts,
                           m->recompute_ws + m->transient + m->buffers + m->runtime + m->frag};
        double x = left, yy = y + r * row;
        if (row >= 8) {
            snprintf(buf, sizeof buf, "pp %d", r);
            text(f, MARGIN, yy + row * 0.75, row >= 14 ? 11 : 7, "start", buf);
        }
        for (int i = 0; i < 5; i++) {
            double w = items[i] * scale;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">"
                       "<title>%s %.2f GiB</title></rect>\n",
                    x, yy, w, row - 2, fills[i], names[i], items[i] / GIB);
            x += w;
        }
    }
    double h = pp * row;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-width=\"2\"/>\n",
            left + pr->capacity_bytes * scale, y - 2, left + pr->capacity_bytes * scale, y + h);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
               "stroke-dasharray=\"4 3\"/>\n", left + usable * scale, y - 2, left + usable * scale, y + h);
    y += h + 6;
    double x = left;
    for (int i = 0; i < 5; i++) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", x, y, fills[i]);
        text(f, x + 16, y + 10, 11, "start", names[i]);
        x += 110;
    }
    return y + 24;
}

void rep_plan_print_svg(FILE *f, const IrGraph *g, const PassCostCtx *c, const PassSearchResult *r)
{
    const PassSearchAlt *a = &r->alt[0];
    int gpn = pass_cluster_domain(c->cl);
    /* Render the body first to learn the height. */
    char *body = NULL;
    size_t len = 0;
    FILE *b = open_memstream(&body, &len);
    if (!b)
        ir_die("plan_svg: open_memstream failed");
    char buf[800], lay[512];
    snprintf(buf, sizeof buf, "%s on %d x %s: %s, %s", g->name, r->gpus, c->cl->gpu.name,
             plan_layout_str(&a->layout, lay, sizeof lay), plan_precision_name(a->plan.precision));
    text(b, MARGIN, 24, 16, "start", buf);
    snprintf(buf, sizeof buf, "predicted step %.3f s, %.0f tokens/s, MFU %.1f%%, peak memory %.1f of %.1f GiB",
             a->pred.step_time_s, a->pred.tokens_per_s, 100 * a->pred.mfu, a->pred.peak_mem_bytes / GIB,
             a->pred.capacity_bytes / GIB);
    text(b, MARGIN, 44, 12, "start", buf);
    double y = 56;
    if (a->layout.moe) {
        char ex[160], mesh[512];
        snprintf(buf, sizeof buf, "experts: %s; all-to-all %.3g s per step",
                 plan_layout_experts_str(&a->layout, ex, sizeof ex), a->pred.a2a_s);
        text(b, MARGIN, 62, 12, "start", buf);
        snprintf(buf, sizeof buf, "expert mesh: %s", rep_expert_mesh_str(&a->plan, &a->layout, mesh, sizeof mesh));
        text(b, MARGIN, 76, 12, "start", buf);
        y = 88;
    }
    if (a->layout.cp > 1) {
        snprintf(buf, sizeof buf, "context parallel: cp %d over mesh axis %d, each rank %s of the "
                 "sequence; attention %s", a->layout.cp, a->layout.cp_axis,
                 a->layout.cp_balanced ? "two mirrored chunks" : "a contiguous block",
                 a->layout.cp_ring ? "passes keys and values round the ring"
                 : a->layout.cp_a2a ? "splits its heads, q, k, v and o all-to-all" : "all-gathers keys and values");
        text(b, MARGIN, y + 6, 12, "start", buf);
        y += 18;
    }
    y = devices(b, &a->plan, &a->layout, r->gpus, gpn, pass_cluster_host(c->cl), y);
    y = schedule(b, a, y + 8);
    y = memory(b, a, y + 8);
    fclose(b);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n", W, y + MARGIN, W, y + MARGIN);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fwrite(body, 1, len, f);
    fprintf(f, "</svg>\n");
    free(body);
}
