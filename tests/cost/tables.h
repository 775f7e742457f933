/* tables.h: TEST-ONLY: the Megatron SC21, Megatron H100, MegaScale and
 * MosaicML tables through the cost model, with the layout details the
 * tables do not record filled in by stated assumptions (docs/cost-model.md). */
#ifndef PTDC_TESTS_COST_TABLES_H
#define PTDC_TESTS_COST_TABLES_H

#include <stdbool.h>

typedef struct TableRow {
    char label[128];
    char group[48];               /* rows compared among themselves (a GPU type, a system) */
    double measured, predicted;   /* MFU (PaLM convention, as the table reports it) */
    double step_measured, step_predicted; /* seconds; NaN when the table has none */
    bool fits;
    double peak_gib;
} TableRow;

typedef struct Table {
    const char *name, *file, *what;
    int n;
    TableRow *rows;
} Table;

/* ref_dir holds the CSVs, model_dir the .mdl files. Returns false if a row
 * cannot be built (a bug). */
bool table_sc21(const char *ref_dir, const char *model_dir, Table *t);
bool table_h100(const char *ref_dir, const char *model_dir, Table *t);
bool table_megascale(const char *ref_dir, const char *model_dir, Table *t);
bool table_mpt(const char *ref_dir, const char *model_dir, Table *t);
void table_free(Table *t);

#endif
