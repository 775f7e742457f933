/* refcsv.c: TEST-ONLY CSV reader (see refcsv.h). */
#include "refcsv.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char **split(const char *line, int *n)
{
    int cap = 8, k = 0;
    char **f = malloc(sizeof *f * (size_t)cap);
    const char *p = line;
    for (;;) {
        char buf[1024];
        size_t b = 0;
        bool q = false;
        while (*p && (q || (*p != ',' && *p != '\n' && *p != '\r'))) {
            if (*p == '"') {
                q = !q;
                p++;
                continue;
            }
            if (b + 1 < sizeof buf)
                buf[b++] = *p;
            p++;
        }
        buf[b] = 0;
        if (k == cap)
            f = realloc(f, sizeof *f * (size_t)(cap *= 2));
        f[k++] = strdup(buf);
        if (*p != ',')
            break;
        p++;
    }
    *n = k;
    return f;
}

RefCsv *ref_load(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "cannot open reference table %s\n", path);
        exit(1);
    }
    RefCsv *c = calloc(1, sizeof *c);
    char line[8192];
    int cap = 0;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '\n' || line[0] == 0)
            continue;
        int n;
        char **f = split(line, &n);
        if (!c->head) {
            c->head = f;
            c->ncols = n;
            continue;
        }
        if (n != c->ncols) {
            fprintf(stderr, "%s: row %d has %d fields, header %d\n", path, c->nrows + 2, n, c->ncols);
            exit(1);
        }
        if (c->nrows == cap)
            c->rows = realloc(c->rows, sizeof *c->rows * (size_t)(cap = cap ? 2 * cap : 64));
        c->rows[c->nrows++] = f;
    }
    fclose(fp);
    return c;
}

void ref_free(RefCsv *c)
{
    for (int r = 0; r < c->nrows; r++) {
        for (int i = 0; i < c->ncols; i++)
            free(c->rows[r][i]);
        free(c->rows[r]);
    }
    for (int i = 0; i < c->ncols; i++)
        free(c->head[i]);
    free(c->head);
    free(c->rows);
    free(c);
}

const char *ref_get(const RefCsv *c, int r, const char *name)
{
    for (int i = 0; i < c->ncols; i++)
        if (strcmp(c->head[i], name) == 0)
            return c->rows[r][i];
    fprintf(stderr, "reference table has no column '%s'\n", name);
    exit(1);
}

double ref_num(const RefCsv *c, int r, const char *name)
{
    const char *s = ref_get(c, r, name);
    return *s ? atof(s) : NAN;
}
