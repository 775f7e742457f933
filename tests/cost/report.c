/* report.c: regenerates the predicted-vs-measured part of
 * docs/cost-model.md and its scatter plots (the .svg files in docs/cost-model,
 * written by this program: no plotting library) from the reference tables.
 *   usage: cost_report REF_DIR MODELS_DIR DOCS_DIR
 * (cmake --build build-cost --target cost_report_docs runs it). The section
 * between the GENERATED markers of DOCS_DIR/cost-model.md is replaced; the
 * rest of the page is left as written. */
#include "bridge.h"
#include "sweep.h"
#include "tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Pt {
    double x, y;
    int group;
} Pt;

static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

/* A scatter of measured (x) against predicted (y) MFU with y = x and a
 * +-15% band. */
static void scatter(const char *path, const char *title, const Pt *p, int n,
                    const char *const *groups, int ngroups)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    const double W = 520, H = 520, L = 70, R = 20, T = 40, B = 60;
    double lo = 1, hi = 0;
    for (int i = 0; i < n; i++) {
        lo = fmin(lo, fmin(p[i].x, p[i].y));
        hi = fmax(hi, fmax(p[i].x, p[i].y));
    }
    lo = floor(lo * 10 - 0.5) / 10;
    hi = ceil(hi * 10 + 0.5) / 10;
    if (lo < 0)
        lo = 0;
#define X(v) (L + ((v) - lo) / (hi - lo) * (W - L - R))
#define Y(v) (H - B - ((v) - lo) / (hi - lo) * (H - T - B))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<clipPath id=\"plot\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/></clipPath>\n",
            X(lo), Y(hi), X(hi) - X(lo), Y(lo) - Y(hi));
    fprintf(f, "<text x=\"%.0f\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">%s</text>\n", W / 2, title);
    for (double v = lo; v <= hi + 1e-9; v += 0.1) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", X(v), Y(lo), X(v), Y(hi));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", X(lo), Y(v), X(hi), Y(v));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.1f</text>\n", X(v), H - B + 16, v);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", L - 6, Y(v) + 4, v);
    }
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n",
            X(lo), Y(hi), X(hi) - X(lo), Y(lo) - Y(hi));
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", X(lo), Y(lo), X(hi), Y(hi));
    for (int s = -1; s <= 1; s += 2) {
        double k = 1 + 0.15 * s, x1 = hi;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                   "stroke-dasharray=\"4 3\" clip-path=\"url(#plot)\"/>\n",
                X(lo), Y(lo * k), X(x1), Y(x1 * k));
    }
    for (int i = 0; i < n; i++)
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\" fill-opacity=\"0.75\"/>\n",
                X(p[i].x), Y(p[i].y), colors[p[i].group % 6]);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">measured MFU</text>\n", (L + W - R) / 2, H - 18);
    fprintf(f, "<text x=\"18\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.0f)\">predicted MFU</text>\n",
            (T + H - B) / 2, (T + H - B) / 2);
    for (int gi = 0; gi < ngroups; gi++) {
        fprintf(f, "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"4\" fill=\"%s\"/>\n", L + 14, T + 14 + 16.0 * gi, colors[gi % 6]);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n", L + 24, T + 18 + 16.0 * gi, groups[gi]);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#666\">dashed: +-15%%</text>\n", W - R - 110, H - B - 8);
    fprintf(f, "</svg>\n");
#undef X
#undef Y
    fclose(f);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_err(const Pt *p, int n)
{
    double *e = malloc(sizeof(double) * (size_t)(n + 1));
    for (int i = 0; i < n; i++)
        e[i] = fabs(p[i].y - p[i].x) / p[i].x;
    qsort(e, (size_t)n, sizeof *e, cmpd);
    double m = n ? (n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2) : NAN;
    free(e);
    return m;
}

static void sweep_section(FILE *md, const char *ref, const char *models, const char *docs)
{
    SweepRow *R;
    int n = sweep_run(ref, models, &sweep_stack, &R);
    const char *fam[] = {"flash2", "flash1", "megatron_fused", "torch"};
    Pt *p = malloc(sizeof *p * (size_t)n);
    int k = 0, agree = 0;
    for (int i = 0; i < n; i++) {
        agree += R[i].ok == R[i].pred.fits;
        if (!R[i].ok)
            continue;
        int gi = 0;
        for (int f = 0; f < 4; f++)
            if (!strcmp(R[i].attn, fam[f]))
                gi = f;
        p[k++] = (Pt){R[i].mfu, R[i].pred.mfu, gi};
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/cost-model/llama13b_sweep.svg", docs);
    scatter(path, "LLaMA-13B layout sweep, 64 A100-80GB", p, k, fam, 4);
    fprintf(md, "### LLaMA-13B layout sweep (Hagemann et al. 2023), 141 runs\n\n");
    fprintf(md, "![scatter](cost-model/llama13b_sweep.svg)\n\n");
    fprintf(md, "Fits / does not fit agrees with the run's status on %d of %d rows (%.1f%%); "
                "median relative MFU error over the %d runs that ran: %.1f%%. Spearman rank "
                "correlation per attention kernel:", agree, n, 100.0 * agree / n, k, 100 * median_err(p, k));
    for (int f = 0; f < 4; f++) {
        double x[256], y[256];
        int m = 0;
        for (int i = 0; i < k; i++)
            if (p[i].group == f)
                x[m] = p[i].y, y[m] = p[i].x, m++;
        fprintf(md, " %s %.3f (%d)%s", fam[f], spearman(x, y, m), m, f < 3 ? "," : ".\n\n");
    }
    fprintf(md, "| tp | pp | dp | mb | recompute | attention | rmsnorm kernel | status | predicted "
                "peak GiB | predicted | MFU | predicted MFU | step s | predicted step s |\n");
    fprintf(md, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        SweepRow *w = &R[i];
        fprintf(md, "| %d | %d | %d | %d | %s | %s | %d | %s | %.1f | %s%s |", w->tp, w->pp, w->dp,
                w->mb, w->recompute == PLAN_RECOMPUTE_FULL ? "full" : "none", w->attn, w->rms_kernel,
                w->ok ? "ok" : "oom", w->pred.peak_mem_bytes / 1073741824.0,
                w->pred.fits ? "fits" : "OOM", (w->ok == w->pred.fits) ? "" : " **(wrong)**");
        if (w->ok)
            fprintf(md, " %.3f | %.3f | %.1f | %.1f |\n", w->mfu, w->pred.mfu, w->step_s, w->pred.step_time_s);
        else
            fprintf(md, " | %.3f | | %.1f |\n", w->pred.mfu, w->pred.step_time_s);
    }
    fprintf(md, "\n");
    free(p);
    sweep_free(R, n);
}

static void table_section(FILE *md, Table *t, const char *docs)
{
    const char *groups[6];
    int ng = 0;
    Pt *p = malloc(sizeof *p * (size_t)(t->n + 1));
    int fit = 0;
    for (int i = 0; i < t->n; i++) {
        int gi = -1;
        for (int j = 0; j < ng; j++)
            if (!strcmp(groups[j], t->rows[i].group))
                gi = j;
        if (gi < 0 && ng < 6)
            groups[gi = ng++] = t->rows[i].group;
        p[i] = (Pt){t->rows[i].measured, t->rows[i].predicted, gi < 0 ? 5 : gi};
        fit += t->rows[i].fits;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/cost-model/%s.svg", docs, t->file);
    scatter(path, t->name, p, t->n, groups, ng);
    double x[512], y[512];
    for (int i = 0; i < t->n && i < 512; i++)
        x[i] = p[i].y, y[i] = p[i].x;
    fprintf(md, "### %s\n\n%s. ![scatter](cost-model/%s.svg)\n\n", t->name, t->what, t->file);
    fprintf(md, "%d rows; %d predicted to fit (all ran); median relative MFU error %.1f%%; "
                "Spearman %.3f.\n\n", t->n, fit, 100 * median_err(p, t->n), spearman(x, y, t->n));
    bool steps = false;
    for (int i = 0; i < t->n; i++)
        steps |= !isnan(t->rows[i].step_measured);
    fprintf(md, "| run | group | MFU | predicted MFU |%s predicted peak GiB |\n",
            steps ? " step s | predicted step s |" : "");
    fprintf(md, "|---|---|---|---|%s---|\n", steps ? "---|---|" : "");
    for (int i = 0; i < t->n; i++) {
        TableRow *w = &t->rows[i];
        fprintf(md, "| %s | %s | %.3f | %.3f |", w->label, w->group, w->measured, w->predicted);
        if (steps) {
            if (isnan(w->step_measured))
                fprintf(md, " | %.2f |", w->step_predicted);
            else
                fprintf(md, " %.2f | %.2f |", w->step_measured, w->step_predicted);
        }
        fprintf(md, " %.1f |\n", w->peak_gib);
    }
    fprintf(md, "\n");
    free(p);
}

/* Megatron-Bridge's tuned dense layouts in BF16: memory only (bridge.h). */
static void bridge_section(FILE *md, const char *ref, const char *models)
{
    BridgeRow *B;
    int n = bridge_bf16(ref, models, &B);
    fprintf(md, "### Megatron-Bridge tuned dense layouts in BF16 (memory)\n\n");
    fprintf(md, "The dense rows of `megatron_bridge_perf.csv` ptdc can express (H100, no context "
                "parallelism, no Megatron-FSDP), measured in FP8 and priced in BF16 under the megatron "
                "stack with the performance recipes' settings (bf16 gradient reduction, Transformer "
                "Engine's cross-entropy, expandable segments): a sanity check of the memory, not of the "
                "step time.\n\n");
    fprintf(md, "| run | measured precision | measured tokens/s/GPU | BF16 predicted tokens/s/GPU | "
                "BF16 predicted peak GiB | usable GiB | capacity GiB |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const PassPrediction *p = &B[i].pred;
        fprintf(md, "| %s | %s | %.0f | %.0f | %.1f | %.1f | %.1f |\n", B[i].label, B[i].precision,
                B[i].tokens_per_gpu, p->tokens_per_s / B[i].gpus, p->peak_mem_bytes / 1073741824.0,
                (p->peak_mem_bytes + p->margin_bytes) / 1073741824.0, p->capacity_bytes / 1073741824.0);
    }
    fprintf(md, "\n");
    bridge_free(B, n);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = 0;
    fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: cost_report REF_DIR MODELS_DIR DOCS_DIR\n");
        return 2;
    }
    const char *ref = argv[1], *models = argv[2], *docs = argv[3];
    char *gen;
    size_t glen;
    FILE *md = open_memstream(&gen, &glen);
    sweep_section(md, ref, models, docs);
    bool (*fn[])(const char *, const char *, Table *) = {table_sc21, table_megascale, table_mpt,
                                                         table_h100};
    for (int i = 0; i < 4; i++) {
        Table t;
        if (!fn[i](ref, models, &t))
            return 1;
        table_section(md, &t, docs);
        table_free(&t);
    }
    bridge_section(md, ref, models);
    fclose(md);

    char path[1024];
    snprintf(path, sizeof path, "%s/cost-model.md", docs);
    size_t len;
    char *doc = slurp(path, &len);
    const char *B = "<!-- BEGIN GENERATED by cost_report -->\n", *E = "<!-- END GENERATED -->";
    char *b = doc ? strstr(doc, B) : NULL, *e = b ? strstr(b, E) : NULL;
    if (!b || !e) {
        fprintf(stderr, "%s: no GENERATED markers\n", path);
        return 1;
    }
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        perror(tmp);
        return 1;
    }
    fwrite(doc, 1, (size_t)(b - doc) + strlen(B), out);
    fputs("\n", out);
    fwrite(gen, 1, glen, out);
    fputs(E, out);
    fputs(e + strlen(E), out);
    fclose(out);
    if (rename(tmp, path) != 0) {
        perror(path);
        return 1;
    }
    free(gen);
    free(doc);
    printf("wrote %s and %s/cost-model/*.svg\n", path, docs);
    return 0;
}
