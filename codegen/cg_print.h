/* cg_print.h: model.c's printer, shared by its files (private to them):
 *   cg_piece.c   buffer names; one struct and forward/backward pair per kind
 *                of piece (pieces whose statements are equal share a kind)
 *   cg_stage.c   the stage structs and functions (receive, load, call the
 *                pieces, send)
 *   cg_print.c   model.h; model.c's order; the tables of every pipeline rank
 *                (schedule, parameters, buckets, bind functions, cg_ranks) */
#ifndef PTDC_CG_PRINT_H
#define PTDC_CG_PRINT_H

#include "cg.h"

/* Names of buffers in one scope (a struct's fields, a function's locals). */
typedef struct Names {
    int *of; /* buffer id -> index into name, or -1 */
    VEC(const char *) name;
} Names;

typedef struct Piece {
    int piece;
    int rank, chunk;
    CgRankProg *r;
    CgOp *ops[CG_NOPKINDS];   /* the chunk's forward, backward and weight gradients (W) */
    VEC(int) fields;          /* buffer ids, in struct order */
    Names fnames;
    Names locals[CG_NOPKINDS]; /* the forward's, the backward's and W's */
    int kind;
} Piece;

typedef struct Kind {
    const char *type, *fn;
    Piece *first;
    CgConsts consts;
    char *fwd, *bwd, *wgrad;  /* bodies, printed with consts (wgrad: a split schedule's, else NULL) */
} Kind;

/* Runs of consecutive pieces of one kind in a stage become one array field. */
typedef struct Run {
    int kind, first, count; /* pieces [first, first + count) of the stage */
    const char *field;
} Run;

typedef struct StagePrint {
    int rank, chunk, stage;
    Piece *pieces;
    int npieces;
    Run runs[256];
    int nruns;
    Names fields;
    VEC(int) bufs; /* chunk-level fields */
} StagePrint;

typedef struct Out {
    Cg *c;
    FILE *f;
    VEC(Kind) kinds;
} Out;

/* cg_piece.c */
const char *cg_ctype(int t);
void cg_names_init(Cg *c, Names *ns, int nbufs);
const char *cg_uniq(Cg *c, Names *ns, int buf, const char *want);
const char *cg_buf_name(Cg *c, const CgBuf *b, int piece);
const char *cg_wslot_var(int t);                                   /* "g_wslot_act", ... */
const char *cg_wslot_ref(Cg *c, const CgBuf *b, const char *field); /* a W slot's copy at it */
void cg_build_piece(Cg *c, CgRankProg *r, int chunk, Piece *pc);
int cg_find_kind(Out *o, Piece *pc);
void cg_print_kind(Out *o, const Kind *k);

/* cg_stage.c */
void cg_stage_runs(Out *o, StagePrint *st);
void cg_print_stage(Out *o, CgRankProg *r, StagePrint *st);

#endif
