/* cg_buf.c: a rank's buffer table. Every parameter, gradient, slot and
 * temporary the lowering makes is one CgBuf here, which the memory planner
 * (cg_mem.c) places and the printer names; a file of its own at the bottom
 * of the lowering, so the walks and the resharding both call down into it. */
#include "cg.h"

int cg_buf_new(Cg *c, CgRankProg *r, CgBufKind kind, CgType type, int64_t numel, int tensor,
               const char *pre, const char *suf, const char *comment)
{
    CgBuf *b = ir_alloc(c->arena, sizeof *b);
    b->id = r->bufs.n;
    b->kind = kind;
    b->type = type;
    b->numel = numel;
    b->tensor = tensor;
    b->pre = pre;
    b->suf = suf;
    b->name = tensor >= 0 ? cg_fmt(c, "%s%s%s", pre, cg_short_name(c, tensor), suf) : suf;
    b->comment = comment;
    b->op = b->first = b->last = -1;
    b->piece = -1;
    vec_push(r->bufs, b);
    return b->id;
}
