/* fe.h: internals of frontend/ shared by its files (not an export; see
 * frontend.h). The flow is
 *   load.c    read a file, check it is text, parse it (parser.y + lexer.l),
 *             follow its imports
 *   consts.c  collect config constants, apply overrides, evaluate lazily
 *   lower.c   walk the model body, unroll repeats, build the IR
 *   frontend.c  the two entry points, tying the three together
 * The syntax tree lives in a scratch arena freed after lowering; source texts
 * and names the IR keeps live in the caller's arena. */
#ifndef PTDC_FE_H
#define PTDC_FE_H

#include "frontend.h"
#include "ir.h"

#include <stdlib.h> /* vec_free */

/* Limits that keep hostile input from crashing, hanging or exhausting memory. */
#define FE_MAX_NEST 64            /* nested parentheses and braces */
#define FE_MAX_EXPR_DEPTH 256     /* operators in one expression tree, counted along its depth */
#define FE_MAX_NAME 256           /* bytes in a name */
#define FE_MAX_STRING 4096        /* bytes in a string literal */
#define FE_MAX_FILE (64 << 20)    /* bytes in one source file */
#define FE_MAX_IMPORT_DEPTH 64    /* chained imports */
#define FE_MAX_CONST_DEPTH 1000   /* constants referring to constants */
#define FE_MAX_REPEAT 100000      /* one repeat's count */
#define FE_MAX_NUMEL ((int64_t)1 << 48)  /* elements of one tensor, batch not counted */
#define FE_MAX_PARAMS ((int64_t)1 << 52) /* parameters of the model */
/* The fuzzer builds with smaller values (tests/fuzz/build.sh) so that one
 * input cannot spend seconds reaching them. */
#ifndef FE_MAX_NODES
#define FE_MAX_NODES 1000000      /* operators in the unrolled graph */
#endif
#ifndef FE_MAX_STEPS
#define FE_MAX_STEPS 10000000     /* statements and operators while unrolling */
#endif

/* ------------------------------------------------------------ syntax tree */
typedef enum {
    FE_E_INT,   /* integer literal: i */
    FE_E_FLOAT, /* float literal: f */
    FE_E_BOOL,  /* true / false (attribute values only): i */
    FE_E_NAME,  /* name */
    FE_E_NEG,   /* -l */
    FE_E_BIN,   /* l op r; op is one of + - * / % and FE_OP_* below */
    FE_E_CALL,  /* name(args) */
    FE_E_STR,   /* string literal (a layer pattern): name */
} FeExprKind;

enum { FE_OP_IDIV = 256, FE_OP_POW }; /* '//' and '**'; single-char operators are themselves */

typedef struct FeExpr FeExpr;

typedef struct FeArg {
    const char *name; /* attribute name, or NULL for a positional argument */
    IrLoc loc;        /* of the name, or of the expression */
    FeExpr *e;
} FeArg;

struct FeExpr {
    FeExprKind kind;
    IrLoc loc;        /* the operator, the literal, the name, the called name */
    int op;
    int depth;        /* 1 + the deepest operand's depth */
    int64_t i;
    double f;
    const char *name;
    FeExpr *l, *r;
    FeArg *args;
    int nargs;
};

typedef struct FeName {
    const char *name;
    IrLoc loc;
} FeName;

typedef struct FeType {
    IrLoc loc;
    bool has_dtype;
    IrDtype dtype;
    int ndims;
    FeName *dims;
} FeType;

typedef enum {
    FE_S_INPUT,  /* input NAME : type */
    FE_S_PARAM,  /* param NAME : type = init [hf] */
    FE_S_BIND,   /* NAME [: type] = expr */
    FE_S_REPEAT, /* repeat count { body } */
    FE_S_BLOCK,  /* block NAME { body } */
    FE_S_IF,     /* if cexpr { body }: the body when cexpr (an integer) is > 0 */
} FeStmtKind;

typedef enum { FE_INIT_NORMAL, FE_INIT_ZEROS, FE_INIT_ONES } FeInitKind;

typedef struct FeStmt FeStmt;

typedef struct FeBody {
    FeStmt **v;
    int n;
} FeBody;

struct FeStmt {
    FeStmtKind kind;
    IrLoc loc;           /* the keyword, or the bound name */
    const char *name;    /* declared / bound / block name */
    FeType *type;        /* NULL when a binding states none */
    FeInitKind init;
    FeExpr *std;         /* normal(std) */
    const char *hf;      /* hf "..." or NULL */
    IrLoc hf_loc;
    bool hf_transposed, hf_interleaved; /* interleaved: part K is every N-th element from K */
    int64_t hf_part, hf_nparts;
    IrLoc part_loc;
    FeExpr *value;       /* binding's expression; repeat's count or pattern */
    const char *letters; /* block "LETTERS": the pattern letters it is the layer of, or NULL */
    IrLoc letters_loc;
    FeBody body;         /* repeat and block */
};

typedef struct FeConfigEntry {
    const char *name;
    IrLoc loc;
    FeExpr *e;
} FeConfigEntry;

typedef struct FeImport {
    const char *path; /* as written */
    IrLoc loc;
} FeImport;

/* One parsed file. */
typedef struct FeFile {
    const char *path;       /* as opened (in the caller's arena: diagnostics keep it) */
    FeImport *imports; int nimports;
    FeConfigEntry *config; int nconfig;
    bool has_config;
    IrLoc config_loc;
    bool has_model;
    const char *model_name;
    IrLoc model_loc;
    FeBody model;
} FeFile;

/* Growable lists the parser builds; %destructor frees them if error recovery
 * drops one half-built (they become arena arrays once complete). */
typedef VEC(FeStmt *) FeStmtVec;
typedef VEC(FeArg) FeArgVec;
typedef VEC(FeConfigEntry) FeConfigVec;
typedef VEC(FeImport) FeImportVec;
typedef VEC(FeName) FeNameVec;

/* hf "NAME" [transposed] [part K of N [interleaved]], while parsing. */
typedef struct FeHf {
    const char *name; /* NULL: no hf clause */
    IrLoc loc, part_loc;
    bool transposed, interleaved;
    int64_t part, nparts;
} FeHf;

/* What the scanner and parser share for one file. */
typedef struct FeParse {
    IrArena *keep;       /* the caller's arena: strings the IR keeps */
    IrArena *tmp;        /* the scratch arena: the tree */
    const char *path;
    FeFile *file;        /* filled by the parser */
    int line, col;       /* the scanner's position */
    char tok[48];        /* the last token's text, cut short (for syntax errors) */
    int nest;            /* open ( and { */
    IrLoc open[FE_MAX_NEST + 1]; /* where each open one is */
    char open_ch[FE_MAX_NEST + 1];
    FeImportVec imports; /* the file's imports as the parser finds them */
    bool fatal;          /* stop: the scanner now returns end of file, no more syntax errors */
    int errors;
} FeParse;

/* parser.y */
bool fe_parse(FeParse *ps, const char *text, size_t len);

/* suggest.c: the closest of `cands` to `name` within a small edit distance, or NULL. */
const char *fe_suggest(const char *name, const char *const *cands, int ncands);
/* ", did you mean 'x'?" or "" (in arena a). */
const char *fe_did_you_mean(IrArena *a, const char *name, const char *const *cands, int ncands);

/* load.c: read `path` (text given, or read from disk when text is NULL) and
 * everything it imports. Files come back in dependency order (imports before
 * importers; the root last), with the file holding the model body (NULL if
 * none: the caller reports that after checking the constants). Returns false
 * after reporting errors. */
typedef struct FeProgram {
    FeFile **files;
    int nfiles;
    const FeFile *model_file; /* the one with the model body */
} FeProgram;
bool fe_load(IrArena *keep, IrArena *tmp, const char *path, const char *text, size_t len,
             FeProgram *prog);
void fe_program_free(FeProgram *prog);

/* consts.c: the config constants after every override. */
typedef struct FeValue {
    bool ok;     /* false after an error (already reported) */
    bool is_int;
    int64_t i;
    double f;
    const char *s; /* a string constant (a layer pattern), else NULL */
} FeValue;

typedef struct FeConsts FeConsts;
FeConsts *fe_consts_new(IrArena *tmp, const FeProgram *prog, const FeSet *sets, int nsets,
                        bool *ok);
void fe_consts_free(FeConsts *c);
/* Evaluate every constant in definition order (reporting errors), and add
 * each to the graph if g is not NULL. */
bool fe_consts_to_graph(FeConsts *c, IrGraph *g);
/* The value of constant `name` (evaluated on demand), or ok=false if there is
 * no such constant (exists=false) or its evaluation failed (reported). */
FeValue fe_const_value(FeConsts *c, const char *name, bool *exists);
/* Evaluate a constant expression (a repeat count, a std, an attribute): a
 * number (a string is an error). */
FeValue fe_eval(FeConsts *c, const FeExpr *e);
/* A repeat's count or layer pattern: a number or a string. */
FeValue fe_eval_repeat(FeConsts *c, const FeExpr *e);
/* The same where `layer` names the repeat iteration (layer >= 0; -1: none):
 * an attribute that changes with the layer, as GPT-OSS's window on every
 * other layer (`window = sliding * ((layer + 1) % 2)`). A constant named
 * `layer` still wins: constants are looked up first. */
FeValue fe_eval_at_layer(FeConsts *c, const FeExpr *e, int layer);
/* If constant `name` is defined as just another constant's name, the name it
 * finally aliases (a dimension alias: n_kv_heads = n_heads); else name. */
const char *fe_const_alias(FeConsts *c, const char *name);
bool fe_const_exists(FeConsts *c, const char *name);
/* Names of all constants (for suggestions). */
const char *const *fe_const_names(FeConsts *c, int *n);

/* lower.c */
bool fe_lower(IrGraph *g, FeConsts *c, const FeFile *f, IrArena *tmp);

#endif
