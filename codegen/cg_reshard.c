/* cg_reshard.c: buffers for values. Lowering keeps, per op, which buffer
 * holds which tensor in which sharding (Low.av), so every edge gets the
 * collectives plan_reshard prescribes exactly once and conversions are
 * reused until the op ends. */
#include "cg_low.h"

#include <ctype.h>
#include <string.h>

CgType cg_tensor_type(const Cg *c, int t)
{
    const IrTensor *x = &c->g->tensors[t];
    if (x->dtype == IR_I32)
        return CG_I32;
    if (x->role == IR_LOSS)
        return CG_F32;
    if (x->producer >= 0 && x->producer < c->g->nfwd && c->g->nodes[x->producer].out[0] != t)
        return CG_F32; /* rstd, mean, lse: fp32 statistics */
    return CG_ACT;
}

int cg_temp_of(Low *L, CgType type, int t, const PlanSharding *sh, const char *pre, const char *suf,
               const char *what)
{
    Cg *c = L->c;
    const char *comment = cg_fmt(c, "%s%s%s", cg_shape(c, t, sh), what ? ": " : "", what ? what : "");
    return cg_buf_new(c, L->r, CG_B_TEMP, type, cg_numel(c, t, sh), t, pre, suf, comment);
}

int cg_temp(Low *L, int t, const PlanSharding *sh, const char *pre, const char *suf, const char *what)
{
    return cg_temp_of(L, cg_tensor_type(L->c, t), t, sh, pre, suf, what);
}

Avail *cg_find(Low *L, int t, const PlanSharding *sh)
{
    for (int i = L->av.n - 1; i >= 0; i--)
        if (L->av.v[i].t == t && plan_sharding_eq(&L->av.v[i].sh, sh))
            return &L->av.v[i];
    return NULL;
}

void cg_put(Low *L, int t, PlanSharding sh, int buf, bool priv)
{
    Avail *a = cg_find(L, t, &sh);
    if (a) {
        a->buf = buf;
        a->priv = priv;
        return;
    }
    vec_push(L->av, ((Avail){t, sh, buf, priv}));
}

/* A parameter's flat sizes (ZeRO), named after it: "WQ_SHARD". */
CgSize cg_param_size(const Cg *c, int k, const char *what)
{
    const CgParamPlan *pp = &c->params[k];
    const char *n = cg_short_name(c, pp->tensor);
    char *u = (char *)cg_fmt((Cg *)c, "%s_%s", n, what);
    for (char *p = u; *p; p++)
        *p = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
    bool shard = !strcmp(what, "SHARD");
    return cg_sz_named(u, shard ? pp->shard : pp->padded,
                       cg_fmt((Cg *)c, shard ? "%s: elements per ZeRO shard" : "%s: padded to the ZeRO group", n));
}

/* ------------------------------------------------------------ resharding */

/* t's dims under sh as outer x d x inner around dim pos. */
static void around(const Low *L, int t, const PlanSharding *sh, int pos, CgSize s[3])
{
    int r = low_t(L, t)->rank;
    s[0] = cg_sz_sh(L->c, t, sh, 0, pos);
    s[1] = cg_sz_sh(L->c, t, sh, pos, pos + 1);
    s[2] = cg_sz_sh(L->c, t, sh, pos + 1, r);
}

static void need_scratch(Low *L, int64_t n)
{
    if (n > L->r->scratch_size)
        L->r->scratch_size = n;
}

static CgArg bytes(const Cg *c, int t, const PlanSharding *sh)
{
    return cg_a_bytes(cg_sz_numel(c, t, sh), CG_ACT);
}

/* Bring buffer src (tensor t in sharding `from`) to sharding `to`, with the
 * collectives plan_reshard prescribes. priv: src may be overwritten. dest:
 * the buffer to end in, or -1. Returns the buffer holding the result. */
int cg_reshard(Low *L, int t, const char *pre, int src, PlanSharding from, PlanSharding to, bool priv,
               int dest)
{
    Cg *c = L->c;
    PlanColl steps[8];
    int n = plan_reshard(c->g, t, &c->mesh, &from, &to, c->dim, steps, 8);
    if (n == 0) {
        if (dest >= 0 && dest != src) {
            LOW_CALL(L, COPY, BUF(dest), BUF(src), bytes(c, t, &to));
            return dest;
        }
        return src;
    }
    if (cg_tensor_type(c, t) != CG_ACT)
        ir_die("codegen: '%s' (%s) would need a collective", low_t(L, t)->name,
               ir_dtype_name(low_t(L, t)->dtype));
    int cur = src;
    PlanSharding sh = from;
    for (int k = 0; k < n; k++) {
        PlanColl *s = &steps[k];
        bool last = k == n - 1;
        int a = s->axis, pos = s->dim >= 0 ? ir_tensor_dim_pos(c->g, t, s->dim) : -1;
        CgArg comm = cg_a_comm(1 << a), scratch = cg_a_sym("g_scratch");
        const char *ax = c->axis_name[a];
        PlanSharding next = plan_sharding_after(&sh, s); /* the nesting order too */
        int out;
        CgSize d[3];
        switch (s->kind) {
        case PLAN_COLL_ALLREDUCE:
            if (!priv || (last && dest >= 0)) {
                out = last && dest >= 0 ? dest : cg_temp(L, t, &next, pre, "_ar", cg_fmt(c, "summed over %s", ax));
                LOW_CALL(L, COPY, BUF(out), BUF(cur), bytes(c, t, &sh));
                cur = out;
            }
            LOW_CALL(L, ALLREDUCE, comm, BUF(cur), SZ(cg_sz_numel(c, t, &sh)), cg_a_sym("RT_ACT"));
            break;
        case PLAN_COLL_REDUCESCATTER:
            out = last && dest >= 0 ? dest : cg_temp(L, t, &next, pre, "_rs", cg_fmt(c, "reduce-scattered over %s", ax));
            around(L, t, &next, pos, d);
            need_scratch(L, cg_numel(c, t, &sh));
            LOW_CALL(L, REDUCE_SCATTER_DIM, comm, BUF(out), BUF(cur), SZ(d[0]), SZ(d[1]), SZ(d[2]), scratch);
            cur = out;
            break;
        case PLAN_COLL_ALLGATHER:
            out = last && dest >= 0 ? dest : cg_temp(L, t, &next, pre, "_ag", cg_fmt(c, "gathered over %s", ax));
            around(L, t, &sh, pos, d);
            need_scratch(L, cg_numel(c, t, &next));
            LOW_CALL(L, ALLGATHER_DIM, comm, BUF(out), BUF(cur), SZ(d[0]), SZ(d[1]), SZ(d[2]), scratch);
            cur = out;
            break;
        case PLAN_COLL_ALLTOALL: {
            out = last && dest >= 0 ? dest : cg_temp(L, t, &next, pre, "_a2a", cg_fmt(c, "all-to-all over %s", ax));
            int p1 = pos, p2 = ir_tensor_dim_pos(c->g, t, s->dim2);
            bool to_second = p1 < p2;
            if (!to_second) {
                int x = p1;
                p1 = p2, p2 = x;
            }
            PlanSharding whole = sh; /* sizes as if axis a split neither dim */
            whole.dim[a] = -1;
            need_scratch(L, cg_numel(c, t, &sh));
            LOW_CALL(L, ALLTOALL_DIM, comm, BUF(out), BUF(cur), SZ(cg_sz_sh(c, t, &whole, 0, p1)),
                     SZ(cg_sz_sh(c, t, &whole, p1, p1 + 1)), SZ(cg_sz_sh(c, t, &whole, p1 + 1, p2)),
                     SZ(cg_sz_sh(c, t, &whole, p2, p2 + 1)),
                     SZ(cg_sz_sh(c, t, &whole, p2 + 1, low_t(L, t)->rank)), cg_a_bool(to_second), scratch);
            cur = out;
            break;
        }
        case PLAN_COLL_SLICE:
            out = last && dest >= 0 ? dest : cg_temp(L, t, &next, pre, "_sl", cg_fmt(c, "sliced over %s", ax));
            around(L, t, &next, pos, d);
            LOW_CALL(L, SLICE_DIM, BUF(out), BUF(cur), SZ(d[0]), SZ(d[1]), SZ(d[2]), cg_a_mesh(a), cg_a_axis(a));
            cur = out;
            break;
        default: ir_die("codegen: collective %s in a reshard", plan_coll_name(s->kind));
        }
        sh = next;
        priv = true;
    }
    return cur;
}

/* ---------------------------------------------------------------- values */

const CgParamPlan *cg_param_plan(const Low *L, int t)
{
    int k = L->c->param_index[t];
    return k >= 0 ? &L->c->params[k] : NULL;
}

/* The buffer holding forward value t (parameter, input or activation) in
 * sharding `need`, converting from its canonical form if needed. */
int cg_get(Low *L, int t, PlanSharding need)
{
    Cg *c = L->c;
    Avail *a = cg_find(L, t, &need);
    if (a)
        return a->buf;
    const IrTensor *x = low_t(L, t);
    PlanSharding from;
    int src;
    if (x->role == IR_PARAM) {
        const CgParamPlan *pp = cg_param_plan(L, t);
        from = pp->store;
        Avail *s = cg_find(L, t, &from);
        if (s) {
            src = s->buf;
        } else {
            /* ZeRO-3: gather the shards before use (again in backward). */
            int k = c->param_index[t];
            src = cg_temp(L, t, &from, "", "_full", cg_fmt(c, "gathered ZeRO-3 shards"));
            L->r->bufs.v[src]->numel = pp->padded;
            LOW_CALL(L, ALLGATHER, cg_a_comm(pp->pmask), BUF(src), BUF(L->r->pbuf[k]),
                     SZ(cg_param_size(c, k, "SHARD")), cg_a_sym("RT_ACT"));
            cg_put(L, t, from, src, false);
        }
    } else {
        from = c->canon[t];
        Avail *s = cg_find(L, t, &from);
        if (!s)
            ir_die("codegen: '%s' is not available in stage %d's %s", x->name, L->stage,
                   L->op->bwd ? "backward" : "forward");
        src = s->buf;
    }
    int b = cg_reshard(L, t, "", src, from, need, false, -1);
    cg_put(L, t, need, b, false);
    return b;
}
