/* cal_merge.c: several record sets of one configuration measured at
 * different moments, as one: each measured number the median over the sets.
 *
 * A shared machine's speed moves with its neighbours for minutes at a time,
 * so one calibration can meet it fast or slow and every prediction made from
 * it inherits that offset. `ptdc calibrate --from A --from B ...` fits the
 * medians instead. Records name what they measured in their leading tokens
 * and carry the measurements last (records.h); the naming part must match
 * line for line, so sets of another machine, rank count or --quick are
 * refused rather than mixed. */
#include "calibrate.h"

#include <stdlib.h>
#include <string.h>

/* Trailing tokens of a record that are measurements; 0: the whole record
 * must be the same in every set (meta, node, end). */
static int measured(const char *kind)
{
    if (!strcmp(kind, "share_sync")) /* repetitions, then two times */
        return 3;
    if (!strcmp(kind, "share") || !strcmp(kind, "sync")) /* sync: segment, fraction */
        return 2;
    if (!strcmp(kind, "gemm") || !strcmp(kind, "kern") || !strcmp(kind, "attn") ||
        !strcmp(kind, "coll") || !strcmp(kind, "host") || !strcmp(kind, "mem"))
        return 1;
    return 0;
}

enum { MAXTOK = 16 };

typedef struct Line {
    char *tok[MAXTOK];
    int n, m;       /* tokens; of them measurements */
    bool used;
} Line;

typedef struct Set {
    char *copy;
    Line *v;
    int n;
} Set;

static void load(Set *s, const char *text)
{
    s->copy = ir_xstrdup(text);
    s->n = 0;
    int cap = 64;
    s->v = ir_xmalloc((size_t)cap * sizeof *s->v);
    for (char *save = NULL, *l = strtok_r(s->copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        Line L = {.n = 0};
        for (char *sv = NULL, *t = strtok_r(l, " \t\r", &sv); t && L.n < MAXTOK; t = strtok_r(NULL, " \t\r", &sv))
            L.tok[L.n++] = t;
        if (L.n == 0 || L.tok[0][0] == '#')
            continue;
        L.m = measured(L.tok[0]);
        if (L.m >= L.n)
            L.m = 0; /* malformed: compared whole, cal_records_parse names it */
        if (s->n == cap)
            s->v = ir_xrealloc(s->v, (size_t)(cap *= 2) * sizeof *s->v);
        s->v[s->n++] = L;
    }
}

static bool same_name(const Line *a, const Line *b)
{
    if (a->n != b->n || a->m != b->m)
        return false;
    for (int i = 0; i < a->n - a->m; i++)
        if (strcmp(a->tok[i], b->tok[i]))
            return false;
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

char *cal_records_merge(const char *name, char *const *texts, int nsets)
{
    if (nsets < 1 || nsets > CAL_MAX_SETS) {
        ir_error(IR_NOLOC, "calibrate: %s: %d record sets to merge (1 to %d)", name, nsets, CAL_MAX_SETS);
        return NULL;
    }
    Set *sets = ir_xmalloc((size_t)nsets * sizeof *sets);
    for (int s = 0; s < nsets; s++)
        load(&sets[s], texts[s]);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    bool ok = true;
    double vals[CAL_MAX_SETS];
    for (int s = 1; s < nsets && ok; s++)
        if (sets[s].n != sets[0].n) {
            ir_error(IR_NOLOC, "calibrate: %s: record set %d has %d records, set 1 has %d: sets of "
                     "different runs (another machine, --ranks, --quick) cannot be merged",
                     name, s + 1, sets[s].n, sets[0].n);
            ok = false;
        }
    for (int i = 0; i < sets[0].n && ok; i++) {
        const Line *a = &sets[0].v[i];
        /* The same record in every set: the first unused one of that name
         * (records repeat a name only when a configuration is measured twice). */
        const Line *match[CAL_MAX_SETS];
        match[0] = a;
        for (int s = 1; s < nsets && ok; s++) {
            match[s] = NULL;
            for (int j = 0; j < sets[s].n && !match[s]; j++)
                if (!sets[s].v[j].used && same_name(a, &sets[s].v[j])) {
                    sets[s].v[j].used = true;
                    match[s] = &sets[s].v[j];
                }
            if (!match[s]) {
                ir_error(IR_NOLOC, "calibrate: %s: record '%s %s ...' of set 1 is not in set %d: sets "
                         "of different runs (another machine, --ranks, --quick) cannot be merged",
                         name, a->tok[0], a->n > 1 ? a->tok[1] : "", s + 1);
                ok = false;
            }
        }
        if (!ok)
            break;
        for (int k = 0; k < a->n - a->m; k++)
            fprintf(f, "%s%s", k ? " " : "", a->tok[k]);
        for (int k = a->n - a->m; k < a->n; k++) {
            for (int s = 0; s < nsets; s++)
                vals[s] = strtod(match[s]->tok[k], NULL);
            qsort(vals, (size_t)nsets, sizeof *vals, cmp_double);
            double med = nsets % 2 ? vals[nsets / 2] : 0.5 * (vals[nsets / 2 - 1] + vals[nsets / 2]);
            fprintf(f, " %.17g", med);
        }
        fputc('\n', f);
    }
    fclose(f);
    for (int s = 0; s < nsets; s++)
        free(sets[s].copy), free(sets[s].v);
    free(sets);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}
