/* test_calib.c: the cost model against published measurements
 * (tests/cost/ref, copies of ../shared/reference).
 *
 * LLaMA-13B layout sweep (141 runs on 64 A100-80GB), every row:
 *   - fits / does not fit matches the run's ok / oom on >= 90% of rows;
 *   - among rows that ran, Spearman rank correlation of predicted vs
 *     measured MFU >= 0.8 within each attention kernel family;
 *   - median relative MFU error <= 15%;
 *   - the PaLM MFU formula with N = every parameter reproduces the table's
 *     mfu column from its tokens/s (to 0.5%).
 * Other tables, as far as they allow (docs/cost-model.md says why):
 *   - every run they report ran, so each must be predicted to fit;
 *   - Megatron SC21: median MFU error <= 5%, Spearman >= 0.8;
 *   - MegaScale (Megatron-LM rows): predicted MFU falls with GPU count at a
 *     fixed batch (strong scaling), median error <= 10%;
 *   - MosaicML: median MFU error <= 15% per GPU type;
 *   - Megatron-Core H100: median MFU error <= 10%, every row within 20%;
 *   - the dense BF16 Megatron tables (MegaScale, Megatron-Core H100)
 *     together: median MFU error <= 10%;
 *   - Megatron-Bridge's tuned dense H100 layouts (measured in FP8) need no
 *     more memory in BF16 than the GPU has (bridge.h).
 * Every comparison is printed, so a failure shows the rows behind it. */
#include "bridge.h"
#include "megatron.h"
#include "refcsv.h"
#include "sweep.h"
#include "tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(bool ok, const char *fmt, double got, double bound)
{
    printf("  %-64s %8.3f (bound %.3f) %s\n", fmt, got, bound, ok ? "ok" : "FAIL");
    if (!ok)
        failures++;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n == 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void sweep(const char *ref, const char *models)
{
    SweepRow *R;
    int n = sweep_run(ref, models, &sweep_stack, &R);
    printf("LLaMA-13B layout sweep, %d runs (tp pp dp mb recompute attention rmsnorm-kernel)\n", n);
    int agree = 0, nok = 0;
    double *err = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) {
        SweepRow *w = &R[i];
        bool good = w->ok == w->pred.fits;
        agree += good;
        printf("  %d %d %2d %d %-4s %-14s %d %-3s  peak %6.2f GiB %-4s%s", w->tp, w->pp, w->dp, w->mb,
               w->recompute == PLAN_RECOMPUTE_FULL ? "full" : "none", w->attn, w->rms_kernel,
               w->ok ? "ok" : "oom", w->pred.peak_mem_bytes / 1073741824.0,
               w->pred.fits ? "fits" : "OOM", good ? "  " : " X");
        if (w->ok) {
            err[nok++] = fabs(w->pred.mfu - w->mfu) / w->mfu;
            printf("  MFU %.3f predicted %.3f", w->mfu, w->pred.mfu);
        }
        printf("\n");
    }
    check((double)agree / n >= 0.90, "fits/does-not-fit agreement", (double)agree / n, 0.90);
    const char *fam[] = {"flash2", "flash1", "megatron_fused", "torch"};
    for (int f = 0; f < 4; f++) {
        double x[256], y[256];
        int k = 0;
        for (int i = 0; i < n; i++)
            if (R[i].ok && !strcmp(R[i].attn, fam[f]))
                x[k] = R[i].pred.mfu, y[k] = R[i].mfu, k++;
        char what[96];
        snprintf(what, sizeof what, "Spearman predicted vs measured MFU, %s (%d runs)", fam[f], k);
        double rho = spearman(x, y, k);
        check(k >= 5 && rho >= 0.8, what, rho, 0.8);
    }
    double med = median(err, nok);
    check(med <= 0.15, "median relative MFU error", med, 0.15);
    free(err);
    sweep_free(R, n);
}

/* The table's mfu from its tokens/s with N = all 13.999e9 parameters. */
static void mfu_formula(const char *ref, const char *models)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/llama2-13b.mdl", models);
    IrArena *a = ir_arena_new();
    IrGraph *g = mega_compile(a, path, "seq=2048,vocab=128000", 2048);
    snprintf(path, sizeof path, "%s/layouts_llama13b_seq2048_64xA100.csv", ref);
    RefCsv *c = ref_load(path);
    double fpt = pass_model_flops_per_token(g), worst = 0;
    printf("PaLM MFU formula: N = %lld parameters, %.4g FLOPs per token\n",
           (long long)ir_param_count(g), fpt);
    for (int r = 0; r < c->nrows; r++) {
        double m = ref_num(c, r, "mfu"), tps = ref_num(c, r, "tokens_per_s");
        if (isnan(m))
            continue;
        double ours = tps * fpt / (64 * 312e12);
        worst = fmax(worst, fabs(ours - m) / m);
    }
    check(ir_param_count(g) == 13998904320LL, "parameter count / 13,998,904,320", (double)ir_param_count(g) / 13998904320.0, 1);
    check(worst <= 0.005, "largest relative difference from the mfu column", worst, 0.005);
    ref_free(c);
    ir_graph_free(g);
    ir_arena_free(a);
}

static void print_table(const Table *t)
{
    printf("%s: %s (%d rows)\n", t->name, t->what, t->n);
    for (int i = 0; i < t->n; i++) {
        const TableRow *w = &t->rows[i];
        printf("  %-36s %-10s MFU %.3f predicted %.3f", w->label, w->group, w->measured, w->predicted);
        if (!isnan(w->step_measured))
            printf("  step %7.2f s predicted %7.2f s", w->step_measured, w->step_predicted);
        printf("  peak %5.1f GiB %s\n", w->peak_gib, w->fits ? "fits" : "OOM");
    }
}

static double table_median_err(const Table *t, const char *group)
{
    double *e = malloc(sizeof(double) * (size_t)(t->n + 1));
    int k = 0;
    for (int i = 0; i < t->n; i++)
        if (!group || !strcmp(t->rows[i].group, group))
            e[k++] = fabs(t->rows[i].predicted - t->rows[i].measured) / t->rows[i].measured;
    double m = median(e, k);
    free(e);
    return m;
}

/* Relative MFU errors of t's rows appended to e[*k]. */
static void errors(const Table *t, double *e, int *k)
{
    for (int i = 0; i < t->n; i++)
        e[(*k)++] = fabs(t->rows[i].predicted - t->rows[i].measured) / t->rows[i].measured;
}

static void all_fit(const Table *t)
{
    int fit = 0;
    for (int i = 0; i < t->n; i++)
        fit += t->rows[i].fits;
    check(fit == t->n, "share of reported runs predicted to fit", (double)fit / t->n, 1);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_calib REF_DIR MODELS_DIR\n");
        return 2;
    }
    const char *ref = argv[1], *models = argv[2];
    sweep(ref, models);
    mfu_formula(ref, models);

    Table t;
    if (!table_sc21(ref, models, &t))
        return 1;
    print_table(&t);
    all_fit(&t);
    check(table_median_err(&t, NULL) <= 0.05, "SC21 median relative MFU error", table_median_err(&t, NULL), 0.05);
    {
        double x[64], y[64];
        for (int i = 0; i < t.n; i++)
            x[i] = t.rows[i].predicted, y[i] = t.rows[i].measured;
        check(spearman(x, y, t.n) >= 0.8, "SC21 Spearman", spearman(x, y, t.n), 0.8);
    }
    table_free(&t);

    if (!table_megascale(ref, models, &t))
        return 1;
    print_table(&t);
    all_fit(&t);
    check(table_median_err(&t, NULL) <= 0.10, "MegaScale median relative MFU error", table_median_err(&t, NULL), 0.10);
    double bf16[64];
    int nbf16 = 0;
    errors(&t, bf16, &nbf16);
    {
        /* Rows come in strong-scaling runs: same model and batch, more GPUs. */
        int bad = 0;
        for (int i = 1; i < t.n; i++) {
            const TableRow *a = &t.rows[i - 1], *b = &t.rows[i];
            int ga, gb, ba, bb;
            char ma[32], mb[32];
            if (sscanf(a->label, "%31s %d GPUs b%d", ma, &ga, &ba) == 3 &&
                sscanf(b->label, "%31s %d GPUs b%d", mb, &gb, &bb) == 3 && !strcmp(ma, mb) &&
                ba == bb && gb > ga && !strcmp(ma, "gpt-175b") && b->predicted >= a->predicted)
                bad++;
        }
        check(bad == 0, "MegaScale strong scaling: MFU rises with GPUs (count)", bad, 0);
    }
    table_free(&t);

    if (!table_mpt(ref, models, &t))
        return 1;
    print_table(&t);
    all_fit(&t);
    const char *gpus[] = {"a100-40gb", "a100-80gb", "h100-80gb"};
    for (int i = 0; i < 3; i++) {
        char what[96];
        snprintf(what, sizeof what, "MosaicML median relative MFU error, %s", gpus[i]);
        check(table_median_err(&t, gpus[i]) <= 0.15, what, table_median_err(&t, gpus[i]), 0.15);
    }
    table_free(&t);

    if (!table_h100(ref, models, &t))
        return 1;
    print_table(&t);
    all_fit(&t);
    check(table_median_err(&t, NULL) <= 0.10, "Megatron-Core H100 median relative MFU error",
          table_median_err(&t, NULL), 0.10);
    {
        double worst = 0, x[64], y[64];
        for (int i = 0; i < t.n; i++) {
            worst = fmax(worst, fabs(t.rows[i].predicted - t.rows[i].measured) / t.rows[i].measured);
            x[i] = t.rows[i].predicted, y[i] = t.rows[i].measured;
        }
        check(worst <= 0.20, "Megatron-Core H100 largest relative MFU error", worst, 0.20);
        /* Printed, not bounded: nine rows within 0.41-0.49 measured. */
        printf("  %-64s %8.3f\n", "Megatron-Core H100 Spearman (not bounded)", spearman(x, y, t.n));
    }
    errors(&t, bf16, &nbf16);
    table_free(&t);
    check(median(bf16, nbf16) <= 0.10, "dense BF16 Megatron tables (MegaScale, H100) median error",
          median(bf16, nbf16), 0.10);

    BridgeRow *B;
    int nb = bridge_bf16(ref, models, &B);
    printf("Megatron-Bridge tuned dense layouts on H100 in BF16 (measured in FP8), %d rows\n", nb);
    int under = 0;
    for (int i = 0; i < nb; i++) {
        const PassPrediction *p = &B[i].pred;
        printf("  %-58s %s run  BF16 peak %5.1f GiB of %5.1f (usable %5.1f) %s\n", B[i].label,
               B[i].precision, p->peak_mem_bytes / 1073741824.0, p->capacity_bytes / 1073741824.0,
               (p->peak_mem_bytes + p->margin_bytes) / 1073741824.0, p->fits ? "fits" : "over the reserve");
        under += p->peak_mem_bytes <= p->capacity_bytes;
    }
    check(nb > 0 && under == nb, "Bridge layouts whose BF16 peak is within the GPU's memory",
          nb ? (double)under / nb : 0, 1);
    bridge_free(B, nb);

    if (failures)
        fprintf(stderr, "%d calibration check(s) failed\n", failures);
    return failures != 0;
}
