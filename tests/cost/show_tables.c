#include "tables.h"
#include "sweep.h"
#include <stdio.h>
#include <math.h>
#include <string.h>
int main(int argc, char **argv)
{
    (void)argc;
    bool (*fn[])(const char *, const char *, Table *) = {table_sc21, table_h100, table_megascale, table_mpt};
    for (int i = 0; i < 4; i++) {
        Table t;
        if (!fn[i](argv[1], argv[2], &t)) { printf("fail\n"); return 1; }
        printf("== %s\n", t.name);
        double x[400], y[400];
        for (int r = 0; r < t.n; r++) {
            TableRow *w = &t.rows[r];
            x[r] = w->predicted; y[r] = w->measured;
            printf("%-40s %-10s meas %.3f pred %.3f r %.2f  step %.2f/%.2f  %s %.1f GiB\n", w->label, w->group, w->measured, w->predicted, w->predicted / w->measured, w->step_measured, w->step_predicted, w->fits ? "fit" : "OOM", w->peak_gib);
        }
        printf("spearman %.3f\n", spearman(x, y, t.n));
        table_free(&t);
    }
    return 0;
}
