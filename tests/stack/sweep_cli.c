/* sweep_cli.c: the LLaMA-13B layout sweep (141 runs on 64 A100-80GB,
 * tests/cost/ref) through ptdc's command line. Every row becomes
 *
 *   ptdc llama2-13b.mdl --set vocab=128000 --set seq=2048 --gpus 64
 *        --tp T --pp P --dp D --micro-batch B --recompute none|full
 *        --sp S --zero Z --schedule 1f1b --global-batch 2048
 *        --stack megatron --stack-set KEY=VALUE ... --plan-only --json
 *
 * with the code base's differences from the megatron preset that
 * tests/cost/sweep.c assumes (sweep_stack: the --stack-set keys below are
 * written from its fields, so a change there follows here) and the row's
 * attention and norm kernels. Checks:
 *   - every row gets a JSON answer: status "fits" with exit status 0, or
 *     "does_not_fit" with exit status 2 and a reason;
 *   - the command line's prediction is the calibration's (sweep_run, the
 *     model test_calib checks): same fits, same peak bytes, same MFU;
 *   - the figures computed from the JSON (fits agreement, Spearman per
 *     attention family, median MFU error) equal those from sweep_run and
 *     meet test_calib's bounds.
 * usage: sweep_cli PTDC REF_DIR MODELS_DIR */
#include "refcsv.h"
#include "sweep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(bool ok, const char *what, double got, double want)
{
    printf("  %-66s %8.4f (%.4f) %s\n", what, got, want, ok ? "ok" : "FAIL");
    if (!ok)
        failures++;
}

/* What the command line answered for one row. */
typedef struct Answer {
    int exit_status;
    char status[32];
    bool fits, has_reason;
    double mfu, peak;
} Answer;

/* The number after "key": in text (after from), or NAN. */
static double num_after(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(text, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

static bool run(const char *cmd, Answer *a)
{
    memset(a, 0, sizeof *a);
    char *buf = sweep_capture(cmd, &a->exit_status);
    if (!buf)
        return false;
    const char *s = strstr(buf, "\"status\": \"");
    if (s)
        sscanf(s + 11, "%31[^\"]", a->status);
    const char *pr = strstr(buf, "\"predicted\": {");
    if (pr) {
        a->mfu = num_after(pr, "mfu");
        a->peak = num_after(pr, "peak_mem_bytes");
        const char *f = strstr(pr, "\"fits\": ");
        a->fits = f && !strncmp(f + 8, "true", 4);
    }
    const char *r = strstr(buf, "\"reason\": ");
    a->has_reason = r && strncmp(r + 10, "null", 4) != 0;
    free(buf);
    return s && pr;
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* test_calib's figures from per-row verdicts: agreement, Spearman for each
 * family (flash2, flash1, megatron_fused, torch), median MFU error. */
static void figures(const SweepRow *R, int n, const bool *fits, const double *mfu, double out[6])
{
    int agree = 0, nok = 0;
    double *err = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++) {
        agree += R[i].ok == fits[i];
        if (R[i].ok)
            err[nok++] = fabs(mfu[i] - R[i].mfu) / R[i].mfu;
    }
    out[0] = (double)agree / n;
    const char *fam[] = {"flash2", "flash1", "megatron_fused", "torch"};
    for (int f = 0; f < 4; f++) {
        double x[256], y[256];
        int k = 0;
        for (int i = 0; i < n && k < 256; i++)
            if (R[i].ok && !strcmp(R[i].attn, fam[f]))
                x[k] = mfu[i], y[k] = R[i].mfu, k++;
        out[1 + f] = spearman(x, y, k);
    }
    out[5] = median(err, nok);
    free(err);
}

static const char *yes(bool b) { return b ? "yes" : "no"; }

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: sweep_cli PTDC REF_DIR MODELS_DIR\n");
        return 2;
    }
    const char *ptdc = argv[1], *ref = argv[2], *models = argv[3];
    SweepRow *R;
    int n = sweep_run(ref, models, &sweep_stack, &R);
    const SweepStack *S = &sweep_stack;
    /* sweep.c's stack: the megatron preset, then these. */
    char common[1024];
    snprintf(common, sizeof common,
             "'%s' '%s/llama2-13b.mdl' --set vocab=128000 --set seq=2048 --gpus 64 --global-batch 2048 "
             "--schedule 1f1b --sp %s --zero %d --stack megatron --stack-set grad_bytes=%d "
             "--stack-set loss_fp32=%s --stack-set alloc_reserve=%.17g --stack-set frag_act=%.17g "
             "--stack-set grad_accum_unfused=%s --stack-set swiglu_unfused=%s --stack-set attn_dropout=%s "
             "--plan-only --json",
             ptdc, models, S->sp ? "on" : "off", S->zero, S->grad_bytes, yes(S->loss_fp32),
             S->alloc_reserve, S->frag_act, yes(S->grad_accum_unfused), yes(S->swiglu_unfused),
             yes(S->attn_dropout));
    static const char *const kname[] = {"auto", "flash2", "flash1", "fused_softmax", "eager"};
    bool *fits = calloc((size_t)n, sizeof *fits), *lib_fits = calloc((size_t)n, sizeof *lib_fits);
    double *mfu = calloc((size_t)n, sizeof *mfu), *lib_mfu = calloc((size_t)n, sizeof *lib_mfu);
    int answered = 0, same = 0;
    printf("LLaMA-13B sweep through the command line, %d rows:\n  %s ...\n", n, common);
    for (int i = 0; i < n; i++) {
        const SweepRow *w = &R[i];
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s --tp %d --pp %d --dp %d --micro-batch %d --recompute %s "
                 "--stack-set attention_kernel=%s --stack-set norm_unfused=%s%s 2>/dev/null", common,
                 w->tp, w->pp, w->dp, w->mb, w->recompute == PLAN_RECOMPUTE_FULL ? "full" : "none",
                 kname[w->kernel], yes(!w->rms_kernel),
                 w->kernel >= PASS_KERNEL_FUSED_SOFTMAX ? " --attention materialized" : "");
        Answer a;
        bool parsed = run(cmd, &a);
        bool ok = parsed && ((a.fits && !strcmp(a.status, "fits") && a.exit_status == 0) ||
                             (!a.fits && !strcmp(a.status, "does_not_fit") && a.exit_status == 2 &&
                              a.has_reason));
        answered += ok;
        fits[i] = a.fits, mfu[i] = a.mfu;
        lib_fits[i] = w->pred.fits, lib_mfu[i] = w->pred.mfu;
        bool eq = a.fits == w->pred.fits && fabs(a.peak - w->pred.peak_mem_bytes) <= 1 &&
                  fabs(a.mfu - w->pred.mfu) <= 1e-8 * w->pred.mfu;
        same += eq;
        if (!ok || !eq)
            printf("  row %d (tp %d pp %d dp %d mb %d %s %s): %s exit %d, fits %d peak %.0f mfu %.9g; "
                   "calibration fits %d peak %.0f mfu %.9g%s\n", i, w->tp, w->pp, w->dp, w->mb,
                   w->recompute == PLAN_RECOMPUTE_FULL ? "full" : "none", w->attn,
                   parsed ? a.status : "no JSON", a.exit_status, a.fits, a.peak, a.mfu, w->pred.fits,
                   w->pred.peak_mem_bytes, w->pred.mfu, ok ? "" : "  (bad answer)");
    }
    check(answered == n, "rows with a JSON answer and the matching exit status", answered, n);
    check(same == n, "rows predicted exactly as the calibration predicts them", same, n);
    double cli[6], lib[6];
    figures(R, n, fits, mfu, cli);
    figures(R, n, lib_fits, lib_mfu, lib);
    const char *what[6] = {"fits/does-not-fit agreement", "Spearman predicted vs measured MFU, flash2",
                           "Spearman, flash1", "Spearman, megatron_fused", "Spearman, torch",
                           "median relative MFU error"};
    printf("figures from the JSON (from sweep_run in parentheses):\n");
    for (int k = 0; k < 6; k++)
        check(fabs(cli[k] - lib[k]) <= 1e-6, what[k], cli[k], lib[k]);
    printf("bounds (test_calib's):\n");
    check(cli[0] >= 0.90, "agreement >= 0.90", cli[0], 0.90);
    for (int k = 1; k <= 4; k++)
        check(cli[k] >= 0.8, "Spearman >= 0.8", cli[k], 0.8);
    check(cli[5] <= 0.15, "median relative MFU error <= 0.15", cli[5], 0.15);
    free(fits);
    free(lib_fits);
    free(mfu);
    free(lib_mfu);
    sweep_free(R, n);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
