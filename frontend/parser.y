/* parser.y: the .mdl grammar (docs/language.md), building the syntax tree of
 * one file. A pure parser over a reentrant scanner; syntax errors go through
 * ir_error with the token's location, and `error` rules at config entries and
 * statements let one run report several. Half-built lists live on the heap
 * (FeStmtVec, ...) and %destructor frees them when recovery drops them; the
 * finished tree is in the scratch arena ps->tmp. */
%require "3.7"
%define api.pure full
%define api.prefix {fe_yy}
%define api.value.type union
%define parse.error custom
%define parse.lac full
%locations
%param {yyscan_t scanner}
%parse-param {FeParse *ps}
%expect 0

%code requires {
#include "fe.h"
typedef void *yyscan_t;
}

%code {
#include <stdlib.h>
#include <string.h>

int fe_yylex(FE_YYSTYPE *lval, FE_YYLTYPE *lloc, yyscan_t scanner);
static void fe_yyerror(FE_YYLTYPE *loc, yyscan_t scanner, FeParse *ps, const char *msg);

#define L(yl) ((IrLoc){ps->path, (yl).first_line, (yl).first_column})

static FeExpr *mk(FeParse *ps, FeExprKind kind, IrLoc loc)
{
    FeExpr *e = ir_alloc(ps->tmp, sizeof *e);
    e->kind = kind;
    e->loc = loc;
    e->depth = 1;
    return e;
}

/* An operator node. Expression depth is bounded so evaluation and lowering
 * (both recursive) stay within the stack on any input. */
static FeExpr *mk_op(FeParse *ps, FeExprKind kind, int op, FeExpr *l, FeExpr *r, IrLoc loc)
{
    FeExpr *e = mk(ps, kind, loc);
    e->op = op;
    e->l = l;
    e->r = r;
    int d = l->depth;
    if (r && r->depth > d)
        d = r->depth;
    e->depth = d + 1;
    if (e->depth > FE_MAX_EXPR_DEPTH && !ps->fatal) {
        ir_error(loc, "expression nests more than %d operations deep; split it into parts",
                 FE_MAX_EXPR_DEPTH);
        ps->fatal = true;
    }
    return e;
}

static FeExpr *mk_call(FeParse *ps, const char *name, IrLoc loc, FeArgVec *args)
{
    FeExpr *e = mk(ps, FE_E_CALL, loc);
    e->name = name;
    e->nargs = args->n;
    e->args = ir_alloc(ps->tmp, sizeof(FeArg) * (size_t)(args->n + 1));
    for (int i = 0; i < args->n; i++) {
        e->args[i] = args->v[i];
        if (args->v[i].e && args->v[i].e->depth + 1 > e->depth)
            e->depth = args->v[i].e->depth + 1;
    }
    vec_free(*args);
    if (e->depth > FE_MAX_EXPR_DEPTH && !ps->fatal) {
        ir_error(loc, "expression nests more than %d operations deep; split it into parts",
                 FE_MAX_EXPR_DEPTH);
        ps->fatal = true;
    }
    return e;
}

static FeBody mk_body(FeParse *ps, FeStmtVec *v)
{
    FeBody b = {ir_alloc(ps->tmp, sizeof(FeStmt *) * (size_t)(v->n + 1)), v->n};
    if (v->n)
        memcpy(b.v, v->v, sizeof(FeStmt *) * (size_t)v->n);
    vec_free(*v);
    return b;
}

static FeStmt *mk_stmt(FeParse *ps, FeStmtKind kind, IrLoc loc, const char *name)
{
    FeStmt *s = ir_alloc(ps->tmp, sizeof *s);
    s->kind = kind;
    s->loc = loc;
    s->name = name;
    s->hf_nparts = 1;
    return s;
}

static FeType *mk_type(FeParse *ps, IrLoc loc, int dtype, FeNameVec *dims)
{
    FeType *t = ir_alloc(ps->tmp, sizeof *t);
    t->loc = loc;
    t->has_dtype = dtype >= 0;
    t->dtype = dtype >= 0 ? (IrDtype)dtype : IR_BF16;
    t->ndims = dims->n;
    t->dims = ir_alloc(ps->tmp, sizeof(FeName) * (size_t)(dims->n + 1));
    if (dims->n)
        memcpy(t->dims, dims->v, sizeof(FeName) * (size_t)dims->n);
    vec_free(*dims);
    return t;
}
}

%token <const char *> NAME "name"
%token <const char *> STRING "string"
%token <int64_t> INT "integer"
%token <double> FLOAT "number"
%token MODEL "'model'" CONFIG "'config'" IMPORT "'import'" INPUT "'input'" PARAM "'param'"
%token REPEAT "'repeat'" BLOCK "'block'" IF "'if'" NORMAL "'normal'" ZEROS "'zeros'" ONES "'ones'"
%token HF "'hf'" TRANSPOSED "'transposed'" INTERLEAVED "'interleaved'" PART "'part'" OF "'of'" TRUE "'true'" FALSE "'false'"
%token F32 "'f32'" BF16 "'bf16'" I32 "'i32'"
%token IDIV "'//'" POW "'**'"

%left '+' '-'
%left '*' '/' IDIV '%'
%precedence NEG
%right POW

%type <FeExpr *> cexpr expr attr_value
%type <FeArgVec> args cargs
%type <FeArg> arg
%type <FeType *> type
%type <int> dtype
%type <FeNameVec> dims
%type <FeStmt *> stmt param_head
%type <FeHf> hf
%type <bool> transposed interleaved
%type <FeStmtVec> stmts
%type <FeConfigVec> entries

%destructor { vec_free($$); } <FeStmtVec> <FeArgVec> <FeNameVec> <FeConfigVec>

%%

/* file := { import } [ config ] [ model ] */
file
    : imports config model
    ;

imports
    : %empty
    | imports IMPORT STRING         { vec_push(ps->imports, ((FeImport){$3, L(@3)})); }
    | imports ';'
    | imports error
    ;

/* config := 'config' '{' { NAME '=' cexpr [';'] } '}' */
config
    : %empty
    | CONFIG '{' entries '}' {
        FeFile *f = ps->file;
        f->has_config = true;
        f->config_loc = L(@1);
        f->nconfig = $3.n;
        f->config = ir_alloc(ps->tmp, sizeof(FeConfigEntry) * (size_t)($3.n + 1));
        if ($3.n)
            memcpy(f->config, $3.v, sizeof(FeConfigEntry) * (size_t)$3.n);
        vec_free($3);
    }
    ;

entries
    : %empty                        { $$ = (FeConfigVec){0}; }
    | entries NAME '=' cexpr        { $$ = $1; vec_push($$, ((FeConfigEntry){$2, L(@2), $4})); }
    | entries NAME '=' STRING {
        /* a layer pattern (repeat's pattern form): a string constant */
        FeExpr *e = mk(ps, FE_E_STR, L(@4));
        e->name = $4;
        $$ = $1;
        vec_push($$, ((FeConfigEntry){$2, L(@2), e}));
    }
    | entries ';'                   { $$ = $1; }
    | entries error                 { $$ = $1; }
    ;

/* model := 'model' NAME '{' { stmt } '}' */
model
    : %empty
    | MODEL NAME '{' stmts '}' {
        FeFile *f = ps->file;
        f->has_model = true;
        f->model_name = $2;
        f->model_loc = L(@2);
        f->model = mk_body(ps, &$4);
    }
    ;

stmts
    : %empty                        { $$ = (FeStmtVec){0}; }
    | stmts stmt                    { $$ = $1; vec_push($$, $2); }
    | stmts ';'                     { $$ = $1; }
    | stmts error                   { $$ = $1; }
    ;

stmt
    : INPUT NAME ':' type {
        $$ = mk_stmt(ps, FE_S_INPUT, L(@2), $2);
        $$->type = $4;
    }
    | param_head hf {
        $$ = $1;
        $$->hf = $2.name;
        $$->hf_loc = $2.loc;
        $$->hf_transposed = $2.transposed;
        $$->hf_part = $2.part;
        $$->hf_nparts = $2.nparts;
        $$->hf_interleaved = $2.interleaved;
        $$->part_loc = $2.part_loc;
    }
    | NAME '=' expr {
        $$ = mk_stmt(ps, FE_S_BIND, L(@1), $1);
        $$->value = $3;
    }
    | NAME ':' type '=' expr {
        $$ = mk_stmt(ps, FE_S_BIND, L(@1), $1);
        $$->type = $3;
        $$->value = $5;
    }
    | REPEAT cexpr '{' stmts '}' {
        $$ = mk_stmt(ps, FE_S_REPEAT, L(@1), NULL);
        $$->value = $2;
        $$->body = mk_body(ps, &$4);
    }
    | REPEAT STRING '{' stmts '}' {
        FeExpr *e = mk(ps, FE_E_STR, L(@2));
        e->name = $2;
        $$ = mk_stmt(ps, FE_S_REPEAT, L(@1), NULL);
        $$->value = e;
        $$->body = mk_body(ps, &$4);
    }
    | BLOCK NAME '{' stmts '}' {
        $$ = mk_stmt(ps, FE_S_BLOCK, L(@1), $2);
        $$->body = mk_body(ps, &$4);
    }
    | IF cexpr '{' stmts '}' {
        /* a part of the model a config constant switches (mtp_depth) */
        $$ = mk_stmt(ps, FE_S_IF, L(@1), NULL);
        $$->value = $2;
        $$->body = mk_body(ps, &$4);
    }
    | BLOCK NAME STRING '{' stmts '}' {
        /* the letters of a pattern repeat this block is the layer for */
        $$ = mk_stmt(ps, FE_S_BLOCK, L(@1), $2);
        $$->letters = $3;
        $$->letters_loc = L(@3);
        $$->body = mk_body(ps, &$5);
    }
    ;

/* 'param' NAME ':' type '=' init */
param_head
    : PARAM NAME ':' type '=' NORMAL '(' cexpr ')' {
        $$ = mk_stmt(ps, FE_S_PARAM, L(@2), $2);
        $$->type = $4;
        $$->init = FE_INIT_NORMAL;
        $$->std = $8;
    }
    | PARAM NAME ':' type '=' ZEROS {
        $$ = mk_stmt(ps, FE_S_PARAM, L(@2), $2);
        $$->type = $4;
        $$->init = FE_INIT_ZEROS;
    }
    | PARAM NAME ':' type '=' ONES {
        $$ = mk_stmt(ps, FE_S_PARAM, L(@2), $2);
        $$->type = $4;
        $$->init = FE_INIT_ONES;
    }
    ;

/* hf := 'hf' STRING [ 'transposed' ] [ 'part' INT 'of' INT [ 'interleaved' ] ] */
hf
    : %empty                        { $$ = (FeHf){0}; $$.nparts = 1; }
    | HF STRING transposed {
        $$ = (FeHf){0};
        $$.name = $2;
        $$.loc = L(@2);
        $$.transposed = $3;
        $$.nparts = 1;
    }
    | HF STRING transposed PART INT OF INT interleaved {
        $$ = (FeHf){0};
        $$.name = $2;
        $$.loc = L(@2);
        $$.transposed = $3;
        $$.part = $5;
        $$.nparts = $7;
        $$.interleaved = $8;
        $$.part_loc = L(@4);
    }
    ;

transposed
    : %empty                        { $$ = false; }
    | TRANSPOSED                    { $$ = true; }
    ;

interleaved
    : %empty                        { $$ = false; }
    | INTERLEAVED                   { $$ = true; }
    ;

/* type := [ dtype ] '[' [ NAME { ',' NAME } ] ']' */
type
    : dtype '[' ']' {
        FeNameVec none = {0};
        $$ = mk_type(ps, $1 >= 0 ? L(@1) : L(@2), $1, &none);
    }
    | dtype '[' dims ']'            { $$ = mk_type(ps, $1 >= 0 ? L(@1) : L(@2), $1, &$3); }
    ;

dtype
    : %empty                        { $$ = -1; }
    | F32                           { $$ = IR_F32; }
    | BF16                          { $$ = IR_BF16; }
    | I32                           { $$ = IR_I32; }
    ;

dims
    : NAME                          { $$ = (FeNameVec){0}; vec_push($$, ((FeName){$1, L(@1)})); }
    | dims ',' NAME                 { $$ = $1; vec_push($$, ((FeName){$3, L(@3)})); }
    ;

/* expr := expr '+' expr | expr '*' expr | '(' expr ')' | NAME
 *       | NAME '(' [ arg { ',' arg } ] ')' */
expr
    : expr '+' expr                 { $$ = mk_op(ps, FE_E_BIN, '+', $1, $3, L(@2)); }
    | expr '*' expr                 { $$ = mk_op(ps, FE_E_BIN, '*', $1, $3, L(@2)); }
    | '(' expr ')'                  { $$ = $2; }
    | NAME                          { $$ = mk(ps, FE_E_NAME, L(@1)); $$->name = $1; }
    | NAME '(' ')' {
        FeArgVec none = {0};
        $$ = mk_call(ps, $1, L(@1), &none);
    }
    | NAME '(' args ')'             { $$ = mk_call(ps, $1, L(@1), &$3); }
    ;

args
    : arg                           { $$ = (FeArgVec){0}; vec_push($$, $1); }
    | args ',' arg                  { $$ = $1; vec_push($$, $3); }
    ;

/* arg := expr | NAME '=' ( cexpr | 'true' | 'false' ) */
arg
    : expr                          { $$ = (FeArg){NULL, $1->loc, $1}; }
    | NAME '=' attr_value           { $$ = (FeArg){$1, L(@1), $3}; }
    ;

attr_value
    : cexpr
    | TRUE                          { $$ = mk(ps, FE_E_BOOL, L(@1)); $$->i = 1; }
    | FALSE                         { $$ = mk(ps, FE_E_BOOL, L(@1)); $$->i = 0; }
    ;

/* cexpr: constant arithmetic, evaluated after every override (consts.c) */
cexpr
    : cexpr '+' cexpr               { $$ = mk_op(ps, FE_E_BIN, '+', $1, $3, L(@2)); }
    | cexpr '-' cexpr               { $$ = mk_op(ps, FE_E_BIN, '-', $1, $3, L(@2)); }
    | cexpr '*' cexpr               { $$ = mk_op(ps, FE_E_BIN, '*', $1, $3, L(@2)); }
    | cexpr '/' cexpr               { $$ = mk_op(ps, FE_E_BIN, '/', $1, $3, L(@2)); }
    | cexpr IDIV cexpr              { $$ = mk_op(ps, FE_E_BIN, FE_OP_IDIV, $1, $3, L(@2)); }
    | cexpr '%' cexpr               { $$ = mk_op(ps, FE_E_BIN, '%', $1, $3, L(@2)); }
    | cexpr POW cexpr               { $$ = mk_op(ps, FE_E_BIN, FE_OP_POW, $1, $3, L(@2)); }
    | '-' cexpr %prec NEG           { $$ = mk_op(ps, FE_E_NEG, '-', $2, NULL, L(@1)); }
    | '(' cexpr ')'                 { $$ = $2; }
    | INT                           { $$ = mk(ps, FE_E_INT, L(@1)); $$->i = $1; }
    | FLOAT                         { $$ = mk(ps, FE_E_FLOAT, L(@1)); $$->f = $1; }
    | NAME                          { $$ = mk(ps, FE_E_NAME, L(@1)); $$->name = $1; }
    | NAME '(' cargs ')'            { $$ = mk_call(ps, $1, L(@1), &$3); }
    ;

cargs
    : cexpr                         { $$ = (FeArgVec){0}; vec_push($$, ((FeArg){NULL, $1->loc, $1})); }
    | cargs ',' cexpr               { $$ = $1; vec_push($$, ((FeArg){NULL, $3->loc, $3})); }
    ;

%%

/* The scanner stops (end of file) once a fatal error was reported. */
int fe_scan(FE_YYSTYPE *lval, FE_YYLTYPE *lloc, yyscan_t scanner);
FeParse *fe_yyget_extra(yyscan_t scanner);
int fe_yylex_init_extra(FeParse *extra, yyscan_t *scanner);
int fe_yylex_destroy(yyscan_t scanner);
struct yy_buffer_state *fe_yy_scan_bytes(const char *bytes, int len, yyscan_t scanner);

int fe_yylex(FE_YYSTYPE *lval, FE_YYLTYPE *lloc, yyscan_t scanner)
{
    FeParse *ps = fe_yyget_extra(scanner);
    if (ps->fatal) {
        lloc->first_line = lloc->last_line = ps->line;
        lloc->first_column = lloc->last_column = ps->col;
        return FE_YYEOF;
    }
    return fe_scan(lval, lloc, scanner);
}

/* How a token reads in a message: "name 'x'", "number 3", "'{'". */
static void describe(char *buf, size_t n, yysymbol_kind_t k, const FeParse *ps)
{
    switch (k) {
    case YYSYMBOL_NAME: snprintf(buf, n, "name '%s'", ps->tok); break;
    case YYSYMBOL_INT:
    case YYSYMBOL_FLOAT: snprintf(buf, n, "number %s", ps->tok); break;
    case YYSYMBOL_STRING: snprintf(buf, n, "string %s", ps->tok); break;
    default: snprintf(buf, n, "%s", yysymbol_name(k)); break;
    }
}

/* "expected ':' or '=', found name 'x'"; with many possibilities only what
 * was found; a keyword where a name belongs is said so. At the end of the
 * file, name the brace or parenthesis left open. */
static int yyreport_syntax_error(const yypcontext_t *ctx, yyscan_t scanner, FeParse *ps)
{
    (void)scanner;
    if (ps->fatal)
        return 0;
    enum { MAX_LISTED = 4 };
    yysymbol_kind_t exp[YYNTOKENS];
    int nexp = yypcontext_expected_tokens(ctx, exp, YYNTOKENS);
    if (nexp < 0)
        nexp = 0;
    yysymbol_kind_t got = yypcontext_token(ctx);
    bool want_name = false;
    for (int i = 0; i < nexp; i++)
        want_name |= exp[i] == YYSYMBOL_NAME;
    char found[128], msg[512];
    describe(found, sizeof found, got, ps);
    const FE_YYLTYPE *loc = yypcontext_location(ctx);
    if (want_name && got >= YYSYMBOL_MODEL && got <= YYSYMBOL_I32) {
        ir_error(L(*loc), "%s is a keyword, not a name", found);
        return 0;
    }
    if (nexp > 0 && nexp <= MAX_LISTED) {
        size_t k = (size_t)snprintf(msg, sizeof msg, "expected ");
        for (int i = 0; i < nexp && k < sizeof msg; i++)
            k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s",
                                  i == 0 ? "" : i == nexp - 1 ? " or " : ", ", yysymbol_name(exp[i]));
        if (k < sizeof msg)
            snprintf(msg + k, sizeof msg - k, ", found %s", found);
    } else {
        snprintf(msg, sizeof msg, "unexpected %s", found);
    }
    if (got == YYSYMBOL_YYEOF && ps->nest > 0) {
        IrLoc open = ps->open[ps->nest - 1];
        ir_error(L(*loc), "%s: the '%c' at line %d is not closed", msg, ps->open_ch[ps->nest - 1],
                 open.line);
    } else {
        ir_error(L(*loc), "%s", msg);
    }
    return 0;
}

static void fe_yyerror(FE_YYLTYPE *loc, yyscan_t scanner, FeParse *ps, const char *msg)
{
    (void)scanner;
    if (ps->fatal)
        return;
    /* Only "memory exhausted" reaches here: the parser stack is bounded. */
    ir_error(L(*loc), "the parser's stack is full (%s): the input nests too deeply", msg);
    ps->fatal = true;
}

bool fe_parse(FeParse *ps, const char *text, size_t len)
{
    int before = ir_error_count();
    yyscan_t scanner;
    if (fe_yylex_init_extra(ps, &scanner) != 0)
        ir_die("cannot start the scanner");
    ps->line = ps->col = 1;
    fe_yy_scan_bytes(text, (int)len, scanner);
    int rc = fe_yyparse(scanner, ps);
    fe_yylex_destroy(scanner);
    FeFile *f = ps->file;
    f->nimports = ps->imports.n;
    f->imports = ir_alloc(ps->tmp, sizeof(FeImport) * (size_t)(ps->imports.n + 1));
    if (ps->imports.n)
        memcpy(f->imports, ps->imports.v, sizeof(FeImport) * (size_t)ps->imports.n);
    vec_free(ps->imports);
    return rc == 0 && ir_error_count() == before;
}
