#include "sweep.h"
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
int main(int argc, char **argv)
{
    SweepStack st = sweep_stack;
    if (argc > 3) st.sp = atoi(argv[3]);
    SweepRow *R;
    int n = sweep_run(argv[1], argv[2], &st, &R);
    int agree = 0;
    for (int i = 0; i < n; i++) {
        SweepRow *w = &R[i];
        agree += w->ok == w->pred.fits;
        printf("%d %d %d %d %-5s %-14s rms%d %-3s | mem %6.2f GiB %s%s | mfu %.3f pred %.3f r %.2f step %.1f pred %.1f\n",
               w->tp, w->pp, w->dp, w->mb, w->recompute == PASS_RECOMPUTE_FULL ? "full" : "none",
               w->attn, w->rms_kernel, w->ok ? "ok" : "oom", w->pred.peak_mem_bytes / 1073741824.0,
               w->pred.fits ? "fit" : "OOM", (w->ok == w->pred.fits) ? "" : " <-- WRONG",
               w->mfu, w->pred.mfu, w->pred.mfu / w->mfu, w->step_s, w->pred.step_time_s);
    }
    printf("fit agreement %d / %d\n", agree, n);
    for (int i = 0; i < n; i++) {
        SweepRow *w = &R[i];
        if (getenv("SHOW") && strstr(getenv("SHOW"), (char[32]){0}) ) {}
        char key[64]; snprintf(key, sizeof key, "%d%d%d%d%s%d%s", w->tp, w->pp, w->dp, w->mb, w->attn, w->rms_kernel, w->recompute == PASS_RECOMPUTE_FULL ? "f" : "n");
        if (getenv("SHOW") && strstr(getenv("SHOW"), key)) {
            printf("%s:\n", key);
            for (int r = 0; r < w->pred.npp; r++) { PassRankMem *m = &w->pred.mem[r];
              printf("  rank %d w %.2f g %.2f o %.2f acts %.2f (x%.0f) rec %.2f tr %.2f buf %.2f rt %.2f total %.2f\n", r, m->weights/1073741824.0, m->grads/1073741824.0, m->optim/1073741824.0, m->acts/1073741824.0, m->inflight, m->recompute_ws/1073741824.0, m->transient/1073741824.0, m->buffers/1073741824.0, m->runtime/1073741824.0, m->total/1073741824.0); }
        }
    }
    const char *fam[] = {"flash2", "flash1", "megatron_fused", "torch"};
    double errs[200]; int ne = 0;
    for (int f = 0; f < 4; f++) {
        double x[200], y[200]; int k = 0;
        for (int i = 0; i < n; i++)
            if (R[i].ok && !strcmp(R[i].attn, fam[f])) { x[k] = R[i].pred.mfu; y[k] = R[i].mfu; k++; errs[ne++] = fabs(R[i].pred.mfu - R[i].mfu) / R[i].mfu; }
        printf("%-15s n=%2d spearman %.3f\n", fam[f], k, spearman(x, y, k));
    }
    for (int i = 0; i < ne; i++) for (int j = i + 1; j < ne; j++) if (errs[j] < errs[i]) { double t = errs[i]; errs[i] = errs[j]; errs[j] = t; }
    printf("median rel err %.3f\n", ne % 2 ? errs[ne / 2] : (errs[ne / 2 - 1] + errs[ne / 2]) / 2);
    sweep_free(R, n);
    return 0;
}
/* debug: print breakdown of selected rows */
