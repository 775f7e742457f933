/* frontend.h: exports of frontend/: the .mdl language (flex + bison) lowered
 * to the IR. Requires nothing but ir/. */
#ifndef PTDC_FRONTEND_H
#define PTDC_FRONTEND_H

#include "ir.h"

/* A command-line override of a config constant (--set NAME=VALUE). */
typedef struct FeSet {
    const char *name, *value;
} FeSet;

/* Read, check and lower a model file (and its imports) to a verified-ready IR
 * graph in arena a. Overrides apply after every file's config; global_batch >
 * 0 replaces the model's global_batch. On any user error the diagnostics are
 * printed (file:line:col with source line and caret) and NULL is returned. */
IrGraph *fe_compile_file(IrArena *a, const char *path, const FeSet *sets, int nsets,
                         int64_t global_batch);
/* Same, from text in memory named `path` (imports resolve relative to it).
 * The fuzzer's entry point: must never crash, hang or leak on any input. */
IrGraph *fe_compile_source(IrArena *a, const char *path, const char *text, size_t len,
                           const FeSet *sets, int nsets, int64_t global_batch);

/* Hugging Face models (frontend/hf_*.c). A path names one when it is a
 * directory or a .json file (ptdc DIR/config.json ... compiles it directly). */
bool fe_is_hf_config(const char *path);
/* The config.json at path (or DIR/config.json) as the text of an equivalent
 * .mdl, NUL-terminated in arena a; NULL after reporting what is refused and
 * why (docs/language.md, "Hugging Face models"). */
char *fe_hf_import(IrArena *a, const char *path, size_t *len);

#endif
