/* stcmp.c: test tool. stcmp REF OTHER [--tol X] [--subset]
 * REF and OTHER are safetensors files or Hugging Face model directories. Both
 * must hold the same tensors (with --subset: OTHER may hold more) with the
 * same shapes; every element must agree within X (default 1e-5) relative to
 * the tensor's scale (its largest magnitude in REF), or exactly with --tol 0.
 * Prints the worst tensor; exits 1 on a mismatch. */
#include "rt.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *load(RtSt *st, int i, int *ndim, int64_t *shape, int64_t *n)
{
    char err[1024];
    const char *name = rt_st_name(st, i);
    rt_st_find(st, name, ndim, shape, NULL);
    *n = 1;
    for (int d = 0; d < *ndim; d++)
        *n *= shape[d];
    float *v = malloc(sizeof(float) * (size_t)(*n ? *n : 1));
    int64_t zero[RT_ST_MAXDIM] = {0};
    if (rt_st_read(st, name, false, 0, 1, *ndim, shape, zero, shape, v, err, sizeof err)) {
        fprintf(stderr, "stcmp: %s\n", err);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: stcmp REF OTHER [--tol X]\n");
        return 2;
    }
    double tol = 1e-5;
    bool subset = false;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--tol") && i + 1 < argc)
            tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--subset"))
            subset = true;
    }
    char err[1024];
    RtSt *a = rt_st_open(argv[1], err, sizeof err), *b = a ? rt_st_open(argv[2], err, sizeof err) : NULL;
    if (!a || !b) {
        fprintf(stderr, "stcmp: %s\n", err);
        return 2;
    }
    int bad = 0, n = rt_st_count(a);
    if (subset ? n > rt_st_count(b) : n != rt_st_count(b)) {
        fprintf(stderr, "stcmp: %d tensors in %s, %d in %s\n", n, argv[1], rt_st_count(b), argv[2]);
        return 1;
    }
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < n; i++) {
        const char *name = rt_st_name(a, i);
        int na, nb;
        int64_t sa[RT_ST_MAXDIM], sb[RT_ST_MAXDIM], ca, cb;
        int j = rt_st_find(b, name, &nb, sb, NULL);
        if (j < 0) {
            fprintf(stderr, "stcmp: %s has no tensor %s\n", argv[2], name);
            bad = 1;
            continue;
        }
        float *x = load(a, i, &na, sa, &ca), *y = load(b, j, &nb, sb, &cb);
        if (na != nb || memcmp(sa, sb, sizeof(int64_t) * (size_t)na)) {
            fprintf(stderr, "stcmp: %s has different shapes\n", name);
            bad = 1;
        } else {
            double scale = 0, err_max = 0;
            for (int64_t k = 0; k < ca; k++)
                if (fabs(x[k]) > scale)
                    scale = fabs(x[k]);
            for (int64_t k = 0; k < ca; k++) {
                double e = fabs((double)x[k] - (double)y[k]);
                if (!(e <= err_max))
                    err_max = e;
            }
            double rel = scale > 0 ? err_max / scale : err_max;
            if (!(rel <= tol)) {
                fprintf(stderr, "stcmp: %s differs: max |a-b| = %.3g, %.3g of its scale %.3g\n", name,
                        err_max, rel, scale);
                bad = 1;
            }
            if (!(rel <= worst)) {
                worst = rel;
                worst_name = name;
            }
        }
        free(x);
        free(y);
    }
    printf("stcmp: %d tensors, worst relative difference %.3g (%s)\n", n, worst, worst_name);
    rt_st_close(a);
    rt_st_close(b);
    return bad;
}
