/* refcsv.h: TEST-ONLY reader for the reference tables (the .csv files in tests/cost/ref,
 * copies of ../shared/reference): a header row, then rows of fields; quoted
 * fields may hold commas. */
#ifndef PTDC_TESTS_COST_REFCSV_H
#define PTDC_TESTS_COST_REFCSV_H

typedef struct RefCsv {
    int ncols, nrows;
    char **head;                  /* [ncols] */
    char ***rows;                 /* [nrows][ncols] */
} RefCsv;

/* Load or die with a message (a missing reference file is a test failure). */
RefCsv *ref_load(const char *path);
void ref_free(RefCsv *c);
/* Field of row r in column `name` ("" if empty); dies on an unknown column. */
const char *ref_get(const RefCsv *c, int r, const char *name);
double ref_num(const RefCsv *c, int r, const char *name); /* NaN if empty */

#endif
