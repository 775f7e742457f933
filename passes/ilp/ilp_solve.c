/* ilp_solve.c: an IlpProblem as a GLPK mixed-integer program.
 *
 *   x[u,i] binary     node u takes strategy i; sum_i x[u,i] = 1
 *   e[uv,I,J] in 0..1 edge uv sits at class pair (I, J):
 *                     sum_J e[I,J] = sum_{i in I} x[u,i], sum_I e[I,J] = sum_{j in J} x[v,j]
 *                     (with x integral this forces e to the chosen pair)
 *   z[g] >= 0         max-group g: z >= sum ind * e for each item
 *   memory            sum of memory prices <= budget
 *   minimise          sum of prices + sum_g w_g z_g
 * solved by glp_intopt (branch and cut), its root LP by the dual simplex
 * (IlpOpts.presolve: glp_intopt's own presolver and root LP instead).
 * An edge with one class on a side is a function of the other node alone and
 * becomes x coefficients (no e); a group with one item is its item. The
 * objective is scaled so its largest coefficient is 1 and the memory row so
 * the budget is 1, which keeps GLPK's absolute tolerances meaningful. */
#include "ilp/ilp.h"

#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int n, cap;
    int *col;
    double *val;
} Terms;

static void term(Terms *t, int col, double v)
{
    if (v == 0)
        return;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->col = ir_xrealloc(t->col, (size_t)t->cap * sizeof *t->col);
        t->val = ir_xrealloc(t->val, (size_t)t->cap * sizeof *t->val);
    }
    t->col[t->n] = col;
    t->val[t->n] = v;
    t->n++;
}

typedef struct {
    glp_prob *lp;
    int ncols;
    double *obj, *mem;        /* per column (1-based), unscaled */
    double obj_const, mem_const;
    int *xbase;               /* first x column of each node */
    int *ebase;               /* first e column of each edge, 0 if folded */
    int *zcol;                /* z column of each group, 0 if none */
    int mem_row;              /* the memory row, 0: none (no budget) */
    /* the sparse matrix, 1-based as glp_load_matrix wants */
    int nz, capz;
    int *ia, *ja;
    double *ar;
} Model;

static int add_cols(Model *m, int n, int kind, double ub)
{
    int first = glp_add_cols(m->lp, n);
    for (int c = first; c < first + n; c++) {
        if (kind == GLP_BV)
            glp_set_col_kind(m->lp, c, GLP_BV);
        else if (isfinite(ub))
            glp_set_col_bnds(m->lp, c, GLP_DB, 0, ub);
        else
            glp_set_col_bnds(m->lp, c, GLP_LO, 0, 0);
    }
    m->ncols = first + n - 1;
    m->obj = ir_xrealloc(m->obj, (size_t)(m->ncols + 1) * sizeof *m->obj);
    m->mem = ir_xrealloc(m->mem, (size_t)(m->ncols + 1) * sizeof *m->mem);
    for (int c = first; c <= m->ncols; c++)
        m->obj[c] = m->mem[c] = 0;
    return first;
}

static void nz(Model *m, int row, int col, double v)
{
    if (v == 0)
        return;
    if (m->nz + 1 >= m->capz) {
        m->capz = m->capz ? 2 * m->capz : 1024;
        m->ia = ir_xrealloc(m->ia, (size_t)m->capz * sizeof *m->ia);
        m->ja = ir_xrealloc(m->ja, (size_t)m->capz * sizeof *m->ja);
        m->ar = ir_xrealloc(m->ar, (size_t)m->capz * sizeof *m->ar);
    }
    m->nz++;
    m->ia[m->nz] = row;
    m->ja[m->nz] = col;
    m->ar[m->nz] = v;
}

static double dot(const double *w, const IlpVals *v)
{
    double s = 0;
    for (int q = 0; q < ILP_NQ; q++)
        s += w[q] * v->q[q];
    return s;
}

/* The linear form of "value of edge i's class pair" with per-pair numbers
 * f[I * nJ + J]: e columns, or x columns of the side with several classes, or
 * a constant (returned). */
static double edge_form(const Model *m, const IlpProblem *p, int i, const double *f, Terms *t)
{
    const IlpEdge *e = &p->edges[i];
    if (m->ebase[i]) {
        for (int k = 0; k < e->nI * e->nJ; k++)
            term(t, m->ebase[i] + k, f[k]);
        return 0;
    }
    if (e->nI == 1 && e->nJ == 1)
        return f[0];
    if (e->nI == 1) {
        for (int j = 0; j < p->nodes[e->v].k; j++)
            term(t, m->xbase[e->v] + j, f[e->cv[j]]);
    } else {
        for (int i2 = 0; i2 < p->nodes[e->u].k; i2++)
            term(t, m->xbase[e->u] + i2, f[e->cu[i2]]);
    }
    return 0;
}

/* The full column vector of a choice: x one-hot, e at the chosen class
 * pairs, z at its group's largest item (1-based, as GLPK wants). */
static double *start_vector(const Model *m, const IlpProblem *p, const int *choice)
{
    double *v = ir_xcalloc((size_t)m->ncols + 1, sizeof *v);
    for (int u = 0; u < p->nnodes; u++)
        v[m->xbase[u] + choice[u]] = 1;
    for (int i = 0; i < p->nedges; i++) {
        const IlpEdge *e = &p->edges[i];
        if (m->ebase[i])
            v[m->ebase[i] + e->cu[choice[e->u]] * e->nJ + e->cv[choice[e->v]]] = 1;
    }
    for (int g = 0; g < p->ngroups; g++) {
        if (!m->zcol[g])
            continue;
        double mx = 0;
        for (int k = 0; k < p->groups[g].nitems; k++) {
            const IlpItem *it = &p->groups[g].items[k];
            const IlpEdge *e = &p->edges[it->edge];
            double x = it->ind[e->cu[choice[e->u]] * e->nJ + e->cv[choice[e->v]]];
            mx = x > mx ? x : mx;
        }
        v[m->zcol[g]] = mx;
    }
    return v;
}

typedef struct {
    double bound;   /* best bound seen in the tree, GLPK's (scaled) units */
    bool have;
    double *start;  /* a full column vector to offer as incumbent, once */
    int nodes;      /* branch-and-bound nodes created so far */
} CbInfo;

static void callback(glp_tree *tree, void *info)
{
    CbInfo *cb = info;
    int r = glp_ios_reason(tree);
    int a, n, t;
    glp_ios_tree_size(tree, &a, &n, &t);
    cb->nodes = t > cb->nodes ? t : cb->nodes;
    if (r == GLP_IHEUR && cb->start) {
        glp_ios_heur_sol(tree, cb->start); /* rejected by GLPK if it does not fit */
        cb->start = NULL;
    }
    if (r != GLP_ISELECT && r != GLP_IBINGO && r != GLP_IBRANCH)
        return;
    int best = glp_ios_best_node(tree);
    double b = best ? glp_ios_node_bound(tree, best) : -INFINITY;
    if (isfinite(b) && fabs(b) < 1e300) { /* -DBL_MAX: the node's LP is not solved yet */
        cb->bound = b;
        cb->have = true;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One-hot rows: node u's x columns, priced by its strategies. */
static void model_nodes(Model *m, const IlpProblem *p)
{
    for (int u = 0; u < p->nnodes; u++) {
        const IlpNode *n = &p->nodes[u];
        m->xbase[u] = add_cols(m, n->k, GLP_BV, 1);
        int row = glp_add_rows(m->lp, 1);
        glp_set_row_bnds(m->lp, row, GLP_FX, 1, 1);
        for (int i = 0; i < n->k; i++) {
            nz(m, row, m->xbase[u] + i, 1);
            m->obj[m->xbase[u] + i] += dot(p->obj_w, &n->val[i]);
            m->mem[m->xbase[u] + i] += dot(p->mem_w, &n->val[i]);
        }
    }
}

/* Edge i's e columns and their marginal rows (both sides with several
 * classes): e is tied to the x of both ends. */
static void model_edge_cols(Model *m, const IlpProblem *p, int i)
{
    const IlpEdge *e = &p->edges[i];
    m->ebase[i] = add_cols(m, e->nI * e->nJ, GLP_CV, 1);
    int rows = glp_add_rows(m->lp, e->nI + e->nJ);
    for (int r = rows; r < rows + e->nI + e->nJ; r++)
        glp_set_row_bnds(m->lp, r, GLP_FX, 0, 0);
    for (int I = 0; I < e->nI; I++)
        for (int J = 0; J < e->nJ; J++) {
            nz(m, rows + I, m->ebase[i] + I * e->nJ + J, 1);
            nz(m, rows + e->nI + J, m->ebase[i] + I * e->nJ + J, 1);
        }
    for (int a = 0; a < p->nodes[e->u].k; a++)
        nz(m, rows + e->cu[a], m->xbase[e->u] + a, -1);
    for (int b = 0; b < p->nodes[e->v].k; b++)
        nz(m, rows + e->nI + e->cv[b], m->xbase[e->v] + b, -1);
}

/* Edges: e columns and their marginal rows, or folded into x; their prices
 * into the objective and the memory row. */
static void model_edges(Model *m, const IlpProblem *p, Terms *t)
{
    double *fo = NULL, *fm = NULL;
    for (int i = 0; i < p->nedges; i++) {
        const IlpEdge *e = &p->edges[i];
        int n = e->nI * e->nJ;
        fo = ir_xrealloc(fo, (size_t)n * sizeof *fo);
        fm = ir_xrealloc(fm, (size_t)n * sizeof *fm);
        for (int k = 0; k < n; k++) {
            fo[k] = dot(p->obj_w, &e->val[k]);
            fm[k] = dot(p->mem_w, &e->val[k]);
        }
        if (e->nI > 1 && e->nJ > 1)
            model_edge_cols(m, p, i);
        t->n = 0;
        m->obj_const += edge_form(m, p, i, fo, t);
        for (int k = 0; k < t->n; k++)
            m->obj[t->col[k]] += t->val[k];
        t->n = 0;
        m->mem_const += edge_form(m, p, i, fm, t);
        for (int k = 0; k < t->n; k++)
            m->mem[t->col[k]] += t->val[k];
    }
    free(fo);
    free(fm);
}

/* Max-groups: z >= each item; a lone item is priced directly. */
static void model_groups(Model *m, const IlpProblem *p, Terms *t)
{
    for (int gi = 0; gi < p->ngroups; gi++) {
        const IlpGroup *gr = &p->groups[gi];
        double wo = dot(p->obj_w, &gr->w), wm = dot(p->mem_w, &gr->w);
        if (gr->nitems == 0 || (wo == 0 && wm == 0))
            continue;
        if (gr->nitems == 1) {
            const IlpItem *it = &gr->items[0];
            t->n = 0;
            double c = edge_form(m, p, it->edge, it->ind, t);
            m->obj_const += wo * c;
            m->mem_const += wm * c;
            for (int k = 0; k < t->n; k++) {
                m->obj[t->col[k]] += wo * t->val[k];
                m->mem[t->col[k]] += wm * t->val[k];
            }
            continue;
        }
        int z = add_cols(m, 1, GLP_CV, INFINITY);
        m->zcol[gi] = z;
        m->obj[z] += wo;
        m->mem[z] += wm;
        double lb = 0;
        for (int k = 0; k < gr->nitems; k++) {
            t->n = 0;
            double c = edge_form(m, p, gr->items[k].edge, gr->items[k].ind, t);
            if (t->n == 0) {
                lb = c > lb ? c : lb;
                continue;
            }
            int row = glp_add_rows(m->lp, 1);
            glp_set_row_bnds(m->lp, row, GLP_LO, c, 0);
            nz(m, row, z, 1);
            for (int j = 0; j < t->n; j++)
                nz(m, row, t->col[j], -t->val[j]);
        }
        if (lb > 0)
            glp_set_col_bnds(m->lp, z, GLP_LO, lb, 0);
    }
}

/* The objective scaled to a largest coefficient of 1 and the memory row to
 * a budget of 1 (GLPK's absolute tolerances stay meaningful); loads the
 * matrix. Returns the objective's scale. */
static double model_load(Model *m, const IlpProblem *p)
{
    double big = 0;
    for (int c = 1; c <= m->ncols; c++)
        big = fabs(m->obj[c]) > big ? fabs(m->obj[c]) : big;
    double oscale = big > 0 ? 1 / big : 1;
    glp_set_obj_coef(m->lp, 0, m->obj_const * oscale);
    for (int c = 1; c <= m->ncols; c++)
        glp_set_obj_coef(m->lp, c, m->obj[c] * oscale);
    if (isfinite(p->budget)) {
        double ms = p->budget > 0 ? 1 / p->budget : 1;
        int row = glp_add_rows(m->lp, 1);
        glp_set_row_bnds(m->lp, row, GLP_UP, 0, (p->budget - m->mem_const) * ms);
        for (int c = 1; c <= m->ncols; c++)
            nz(m, row, c, m->mem[c] * ms);
        m->mem_row = row;
    }
    glp_load_matrix(m->lp, m->nz, m->ia, m->ja, m->ar);
    return oscale;
}

/* The whole problem as GLPK's: columns, rows, the scaled objective. */
static double model_build(Model *m, const IlpProblem *p)
{
    m->lp = glp_create_prob();
    glp_set_obj_dir(m->lp, GLP_MIN);
    m->xbase = ir_xcalloc((size_t)p->nnodes + 1, sizeof *m->xbase);
    m->ebase = ir_xcalloc((size_t)p->nedges + 1, sizeof *m->ebase);
    m->zcol = ir_xcalloc((size_t)p->ngroups + 1, sizeof *m->zcol);
    Terms t = {0};
    model_nodes(m, p);
    model_edges(m, p, &t);
    model_groups(m, p, &t);
    free(t.col);
    free(t.val);
    return model_load(m, p);
}

static void model_free(Model *m)
{
    if (!m->lp)
        return;
    glp_delete_prob(m->lp);
    free(m->zcol);
    free(m->obj);
    free(m->mem);
    free(m->xbase);
    free(m->ebase);
    free(m->ia);
    free(m->ja);
    free(m->ar);
    memset(m, 0, sizeof *m);
}

struct IlpWarm {
    const IlpProblem *src;    /* the problem it serves (by address), NULL: empty */
    int nnodes;
    int **dom, **map;         /* the reduction of src (ilp_dominance, ilp_restrict) */
    int pruned;
    IlpProblem *r;            /* src reduced; its budget set per solve */
    Model m;                  /* GLPK's model of r, m.lp NULL: none yet */
    double oscale;
    int *stat;                /* the root LP's optimal basis: rows 1..nrow, columns 1..ncol */
    int nrow, ncol;           /* 0: no basis saved */
    IlpFrontier *front;       /* r's frontier (IlpOpts.frontier), NULL: none (yet) */
    bool front_tried;         /* made, or found too wide for the program */
    int npts;                 /* front's points' memories and totals (ilp_frontier_totals), */
    double *pm;               /* made when first asked (ilp_warm_least), NULL before */
    IlpVals *ptot;
    IlpLocal loc;             /* r's adjacency for ilp_canon, loc.p NULL: not made yet (a
                                 walk canonicalises an answer per budget of one problem) */
};

IlpWarm *ilp_warm_new(void) { return ir_xcalloc(1, sizeof(IlpWarm)); }

static void warm_clear(IlpWarm *w)
{
    for (int u = 0; u < w->nnodes; u++) {
        free(w->dom[u]);
        free(w->map[u]);
    }
    free(w->dom);
    free(w->map);
    ilp_free(w->r);
    model_free(&w->m);
    free(w->stat);
    ilp_frontier_free(w->front);
    free(w->pm);
    free(w->ptot);
    if (w->loc.p)
        ilp_local_free(&w->loc);
    memset(w, 0, sizeof *w);
}

void ilp_warm_free(IlpWarm *w)
{
    if (!w)
        return;
    warm_clear(w);
    free(w);
}

/* The memory row of a kept model set to p's budget, with the coefficients
 * and bound model_load would give it (added last, as model_load adds it). */
static void warm_budget(Model *m, const IlpProblem *p)
{
    double ms = p->budget > 0 ? 1 / p->budget : 1;
    int *ind = ir_xmalloc((size_t)(m->ncols + 1) * sizeof *ind), n = 0;
    double *val = ir_xmalloc((size_t)(m->ncols + 1) * sizeof *val);
    for (int c = 1; c <= m->ncols; c++)
        if (m->mem[c] * ms != 0) {
            n++;
            ind[n] = c;
            val[n] = m->mem[c] * ms;
        }
    if (!m->mem_row)
        m->mem_row = glp_add_rows(m->lp, 1); /* basic: the old basis stays one */
    glp_set_mat_row(m->lp, m->mem_row, n, ind, val);
    glp_set_row_bnds(m->lp, m->mem_row, GLP_UP, 0, (p->budget - m->mem_const) * ms);
    free(ind);
    free(val);
}

/* The saved root basis back into the model (a row added since is basic);
 * false when there is none. */
static bool warm_basis(IlpWarm *w)
{
    glp_prob *lp = w->m.lp;
    if (!w->nrow || w->ncol != glp_get_num_cols(lp))
        return false;
    int nrow = glp_get_num_rows(lp);
    for (int i = 1; i <= nrow; i++)
        glp_set_row_stat(lp, i, i <= w->nrow ? w->stat[i - 1] : GLP_BS);
    for (int j = 1; j <= w->ncol; j++)
        glp_set_col_stat(lp, j, w->stat[w->nrow + j - 1]);
    return true;
}

static void warm_save(IlpWarm *w)
{
    glp_prob *lp = w->m.lp;
    w->nrow = glp_get_num_rows(lp);
    w->ncol = glp_get_num_cols(lp);
    w->stat = ir_xrealloc(w->stat, (size_t)(w->nrow + w->ncol + 1) * sizeof *w->stat);
    for (int i = 1; i <= w->nrow; i++)
        w->stat[i - 1] = glp_get_row_stat(lp, i);
    for (int j = 1; j <= w->ncol; j++)
        w->stat[w->nrow + j - 1] = glp_get_col_stat(lp, j);
}

/* The root LP by dual simplex from the all-slack basis, which is dual
 * feasible because every price is non-negative; then branch and cut from
 * that basis. Measured 4x faster than glp_intopt's presolver path on LLaMA
 * layers (docs/sharding.md). *rc stays -1 where the LP failed numerically. */
static void run_dual_path(Model *m, glp_iocp *parm, double t0, IlpWarm *w, bool basis, int *rc,
                          int *st)
{
    glp_smcp sp;
    glp_init_smcp(&sp);
    sp.msg_lev = GLP_MSG_OFF;
    sp.meth = GLP_DUALP;
    sp.tm_lim = parm->tm_lim;
    /* A kept model holds the basis its last solve ended on: from slack
     * again (as a new model starts), unless asked to restart from it. */
    bool warm = basis && warm_basis(w);
    if (w && !warm)
        glp_std_basis(m->lp);
    int lrc = glp_simplex(m->lp, &sp);
    if (warm && lrc != 0 && lrc != GLP_ETMLIM) { /* the old basis did not serve: from slack */
        glp_std_basis(m->lp);
        lrc = glp_simplex(m->lp, &sp);
    }
    int lst = glp_get_status(m->lp);
    if (lrc == GLP_ETMLIM) {
        *rc = GLP_ETMLIM;
        *st = GLP_UNDEF;
    } else if (lrc == 0 && (lst == GLP_NOFEAS || glp_get_prim_stat(m->lp) == GLP_NOFEAS)) {
        *rc = GLP_ENOPFS;
        *st = GLP_NOFEAS;
    } else if (lrc == 0 && lst == GLP_OPT) {
        if (basis)
            warm_save(w);
        int used = (int)((now_s() - t0) * 1000);
        parm->tm_lim = parm->tm_lim > used + 1 ? parm->tm_lim - used : 1;
        parm->presolve = GLP_OFF;
        *rc = glp_intopt(m->lp, parm);
        *st = glp_mip_status(m->lp);
    }
}

/* Branch and cut under o's limits (the dual simplex path, or GLPK's
 * presolver when asked or when that path fails); *rc, *st are GLPK's. The
 * start (o->start) is offered to GLPK through cb; *start_buf is to free. */
static void run_glpk(Model *m, const IlpProblem *p, const IlpOpts *o, double t0, IlpWarm *w,
                     CbInfo *cb, double **start_buf, int *rc, int *st)
{
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    double tl = o && o->time_limit_s > 0 ? o->time_limit_s : 10;
    parm.tm_lim = tl * 1000 > 2e9 ? 2000000000 : (int)(tl * 1000);
    parm.tol_obj = o && o->tol_obj > 0 ? o->tol_obj : 1e-9;
    parm.mip_gap = 0;
    parm.cb_func = callback;
    parm.cb_info = cb;
    /* GLPK takes a heuristic solution without checking rows, and under its
     * presolver the columns are not ours: offer only a start that fits, and
     * only on the dual simplex path. */
    if (o && o->start && !o->presolve) {
        IlpVals tot;
        ilp_eval(p, o->start, &tot);
        if (!isfinite(p->budget) || ilp_memory(p, &tot) <= p->budget * (1 - 1e-9))
            cb->start = start_vector(m, p, o->start);
    }
    *start_buf = cb->start;
    *rc = -1;
    *st = 0;
    if (!(o && o->presolve))
        run_dual_path(m, &parm, t0, w, w && o->warm_basis, rc, st);
    if (*rc < 0) { /* asked for, or the dual simplex path failed numerically */
        parm.presolve = GLP_ON;
        *rc = glp_intopt(m->lp, &parm);
        *st = glp_mip_status(m->lp);
    }
}

/* GLPK's return code and MIP status as ours; true when a solution is there
 * to read. Anything else GLPK returns is a bug: die. */
static bool glpk_status(int rc, int st, IlpStatus *status)
{
    if (rc == 0 && st == GLP_OPT) {
        *status = ILP_OPTIMAL;
        return true;
    }
    if ((rc == 0 || rc == GLP_ETMLIM) && st == GLP_FEAS) {
        *status = ILP_FEASIBLE;
        return true;
    }
    if (rc == GLP_ENOPFS || (rc == 0 && st == GLP_NOFEAS))
        *status = ILP_INFEASIBLE;
    else if (rc == GLP_ETMLIM)
        *status = ILP_UNKNOWN;
    else
        ir_die("ilp: glp_intopt returned %d (status %d)", rc, st);
    return false;
}

/* The solution GLPK found: each node's largest x, its exact objective
 * (ilp_eval), GLPK's bound and the gap between them. */
static void read_solution(const Model *m, const IlpProblem *p, const CbInfo *cb, double oscale, IlpSolution *s)
{
    s->choice = ir_xmalloc((size_t)(p->nnodes ? p->nnodes : 1) * sizeof *s->choice);
    for (int u = 0; u < p->nnodes; u++) {
        int best = 0;
        double bv = -1;
        for (int i = 0; i < p->nodes[u].k; i++) {
            double v = glp_mip_col_val(m->lp, m->xbase[u] + i);
            if (v > bv) {
                bv = v;
                best = i;
            }
        }
        s->choice[u] = best;
    }
    s->objective = ilp_eval(p, s->choice, &s->total);
    s->glpk_obj = glp_mip_obj_val(m->lp) / oscale;
    if (s->status == ILP_OPTIMAL || !cb->have)
        s->bound = s->status == ILP_OPTIMAL ? s->objective : -INFINITY;
    else
        s->bound = cb->bound / oscale;
    if (s->bound > s->objective)
        s->bound = s->objective;
    s->gap = s->status == ILP_OPTIMAL ? 0 : (s->objective - s->bound) / fmax(fabs(s->objective), 1e-30);
}

/* p on GLPK: on w's kept model when w holds one of the right kind (its
 * memory row set to p's budget), else on a model built now (and kept in w
 * when there is one). */
static IlpStatus solve_glpk(const IlpProblem *p, const IlpOpts *o, IlpWarm *w, IlpSolution *s)
{
    double t0 = now_s();
    memset(s, 0, sizeof *s);
    glp_term_out(GLP_OFF);
    Model cold = {0}, *m = w ? &w->m : &cold;
    double oscale;
    /* A kept model with a memory row serves only budgets: without one,
     * the model_build of an unbudgeted problem has no row at all. */
    if (w && m->lp && (isfinite(p->budget) || !m->mem_row)) {
        if (isfinite(p->budget))
            warm_budget(m, p);
        oscale = w->oscale;
        s->warm = true;
    } else {
        if (w) {
            model_free(m);
            w->nrow = w->ncol = 0;
        }
        oscale = model_build(m, p);
        if (w)
            w->oscale = oscale;
    }
    s->nvars = glp_get_num_cols(m->lp);
    s->nbin = glp_get_num_bin(m->lp);
    s->nrows = glp_get_num_rows(m->lp);
    CbInfo cb = {0};
    double *start_buf;
    int rc, st;
    run_glpk(m, p, o, t0, w, &cb, &start_buf, &rc, &st);
    s->nodes = cb.nodes;
    if (glpk_status(rc, st, &s->status)) {
        read_solution(m, p, &cb, oscale, s);
    } else {
        s->objective = s->glpk_obj = INFINITY;
        s->bound = s->status == ILP_INFEASIBLE ? INFINITY : (cb.have ? cb.bound / oscale : -INFINITY);
        s->gap = INFINITY;
    }
    model_free(&cold);
    free(start_buf);
    s->solve_s = now_s() - t0;
    return s->status;
}

/* The dominance reduction of p into w (kept for p's next budget). */
static void warm_reduce(IlpWarm *w, const IlpProblem *p)
{
    w->src = p;
    w->nnodes = p->nnodes;
    w->dom = ir_xmalloc((size_t)(p->nnodes + 1) * sizeof *w->dom);
    w->map = ir_xmalloc((size_t)(p->nnodes + 1) * sizeof *w->map);
    for (int u = 0; u < p->nnodes; u++) {
        w->dom[u] = ir_xmalloc((size_t)p->nodes[u].k * sizeof **w->dom);
        for (int i = 0; i < p->nodes[u].k; i++)
            w->dom[u][i] = -1;
    }
    w->pruned = ilp_dominance(p, w->dom);
    w->r = ilp_restrict(p, w->dom, w->map);
}

/* w->r's frontier, made now if not yet (ilp_pareto.c; NULL: too wide for
 * the program); under check, against the one made the long way. */
static const IlpFrontier *warm_frontier(IlpWarm *w, bool check)
{
    if (!w->front_tried) {
        w->front = ilp_frontier(w->r);
        w->front_tried = true;
        if (check) {
            IlpFrontier *ref = ilp_frontier_ref(w->r);
            if (!ref != !w->front || (ref && !ilp_frontier_same(w->front, ref)))
                ir_die("ilp: the frontier differs from the one made the long way (PTDC_SEARCH_CHECK)");
            ilp_frontier_free(ref);
        }
    }
    return w->front;
}

double ilp_warm_least(IlpWarm *w, const IlpProblem *p, bool check, int q, double mlo, double mhi)
{
    if (w->src != p)
        warm_clear(w);
    if (!w->r)
        warm_reduce(w, p);
    const IlpFrontier *F = warm_frontier(w, check);
    if (!F)
        return NAN;
    if (!w->pm)
        w->npts = ilp_frontier_totals(F, w->r, &w->pm, &w->ptot);
    double least = INFINITY;
    for (int i = 0; i < w->npts; i++)
        if (w->pm[i] >= mlo && w->pm[i] <= mhi)
            least = fmin(least, q < 0 ? w->pm[i] : w->ptot[i].q[q]);
    return least;
}

/* The reduced problem w->r under its budget from its frontier
 * (warm_frontier): false where it has none, or where the choice read
 * back, priced by ilp_eval (which sums in another order), is over the
 * budget: GLPK answers then. */
static bool solve_frontier(IlpWarm *w, bool check, IlpSolution *s)
{
    warm_frontier(w, check);
    if (!w->front)
        return false;
    memset(s, 0, sizeof *s);
    s->choice = ir_xmalloc((size_t)(w->r->nnodes + 1) * sizeof *s->choice);
    if (!ilp_frontier_choice(w->front, w->r->budget, s->choice, NULL, NULL)) {
        ilp_solution_free(s);
        s->status = ILP_INFEASIBLE;
        s->objective = s->glpk_obj = s->bound = s->gap = INFINITY;
        s->frontier_points = ilp_frontier_points(w->front);
        return true;
    }
    s->objective = ilp_eval(w->r, s->choice, &s->total);
    if (!(ilp_memory(w->r, &s->total) <= w->r->budget)) {
        ilp_solution_free(s);
        return false;
    }
    s->status = ILP_OPTIMAL;
    s->glpk_obj = s->bound = s->objective;
    s->frontier_points = ilp_frontier_points(w->front);
    return true;
}

/* How far above the fastest choice's objective the second must be for the
 * fastest to be GLPK's answer too: GLPK proves an optimum only up to its
 * tolerances (1e-7 on reduced costs of an objective scaled to a largest
 * coefficient of 1, 1e-9 on the objective), so a second choice closer than
 * this could be what it returns. The closest seen in bench/plan-time's 18
 * cases: 3.6e-6 (Qwen3-235B on 512), which GLPK then answers. */
#define UNIQUE_MARGIN 1e-5

/* The reduced problem w->r without a budget, as its unique fastest choice
 * (ilp_unique_best): false where the fastest is tied within UNIQUE_MARGIN
 * (GLPK answers then, its ties as its path resolves them). */
static bool solve_unique(IlpWarm *w, bool check, IlpSolution *s)
{
    int *c = ir_xmalloc((size_t)(w->r->nnodes + 1) * sizeof *c);
    double b1 = 0, b2 = 0;
    bool ok = ilp_unique_best(w->r, UNIQUE_MARGIN, c, &b1, &b2);
    if (check) {
        int *d = ir_xmalloc((size_t)(w->r->nnodes + 1) * sizeof *d);
        double d1 = 0, d2 = 0;
        bool ok2 = ilp_unique_best_ref(w->r, UNIQUE_MARGIN, d, &d1, &d2);
        if (ok != ok2 || memcmp(&b1, &d1, sizeof b1) || memcmp(&b2, &d2, sizeof b2) ||
            (ok && memcmp(c, d, (size_t)w->r->nnodes * sizeof *c)))
            ir_die("ilp: the fastest choice by elimination differs from the one made the long way "
                   "(PTDC_SEARCH_CHECK)");
        free(d);
    }
    if (!ok) {
        free(c);
        return false;
    }
    memset(s, 0, sizeof *s);
    s->choice = c;
    s->status = ILP_OPTIMAL;
    s->objective = ilp_eval(w->r, c, &s->total);
    s->glpk_obj = s->bound = s->objective;
    s->unique = true;
    return true;
}

/* PTDC_SEARCH_CHECK: the answer a (frontier or unique, in w->r's
 * strategies) against GLPK's b on the same problem: the same choice
 * without a budget (the fastest is unique), the same feasibility and
 * objective (1e-9) under one, where GLPK's answer fits (a fitting answer no
 * faster than GLPK's where GLPK's is over the budget by its tolerance). */
static void check_answer(const IlpProblem *r, const IlpSolution *a, const IlpSolution *b)
{
    bool same = (a->choice != NULL) == (b->choice != NULL);
    if (same && a->choice && !isfinite(r->budget))
        same = memcmp(a->choice, b->choice, (size_t)r->nnodes * sizeof *a->choice) == 0;
    if (same && a->choice && isfinite(r->budget)) {
        /* GLPK keeps rows only within its feasibility tolerance: an answer
         * of its over the budget by that (seen: 82 KB of 21.5 GB, DeepSeek-V3
         * on 2048) is a relaxed problem's, no slower than the exact one the
         * frontier answers, which must fit. */
        IlpVals ta, tb;
        ilp_eval(r, a->choice, &ta);
        ilp_eval(r, b->choice, &tb);
        double tol = 1e-9 * fmax(fabs(b->objective), 1e-30);
        same = ilp_memory(r, &ta) <= r->budget &&
               (ilp_memory(r, &tb) <= r->budget ? fabs(a->objective - b->objective) <= tol
                                                 : a->objective >= b->objective - tol);
    }
    if (!same)
        ir_die("ilp: the %s answers %.17g (%s), GLPK %.17g (%s) (PTDC_SEARCH_CHECK)",
               a->unique ? "unique fastest choice" : "frontier", a->objective, ilp_status_name(a->status),
               b->objective, ilp_status_name(b->status));
}

IlpStatus ilp_solve(const IlpProblem *p, const IlpOpts *o, IlpSolution *s)
{
    if (o && o->no_reduce) {
        solve_glpk(p, o, NULL, s);
        if (s->choice && !o->no_canon && isfinite(p->budget)) {
            s->canon_moves = ilp_canon(p, s->choice);
            s->objective = ilp_eval(p, s->choice, &s->total);
        }
        return s->status;
    }
    double t0 = now_s();
    /* Cold: a warm state of this solve only, cleared after it. */
    IlpWarm own = {0}, *w = o && o->warm && !o->presolve ? o->warm : &own;
    if (w->src != p)
        warm_clear(w);
    bool kept = w->r != NULL;
    if (!w->r)
        warm_reduce(w, p);
    w->r->budget = p->budget;
    IlpOpts ro = o ? *o : (IlpOpts){0};
    int *start = NULL, *repaired = NULL;
    bool check = o && o->check;
    bool front = w != &own && o && o->frontier && isfinite(p->budget) && solve_frontier(w, check, s);
    if (front)
        s->warm = kept;
    if (!front && o && o->frontier && !isfinite(p->budget))
        front = solve_unique(w, check, s);
    if (front && o->check) {
        IlpOpts co = *o;
        co.frontier = false;
        co.warm = NULL;
        co.start = NULL;
        IlpSolution g;
        solve_glpk(w->r, &co, NULL, &g);
        if (g.choice && isfinite(p->budget))
            ilp_canon(w->r, g.choice);
        check_answer(w->r, s, &g);
        ilp_solution_free(&g);
    }
    if (!front && o && !o->start && o->repair_from && isfinite(p->budget))
        repaired = ilp_repair(p, o->repair_from);
    const int *from = o && o->start ? o->start : repaired;
    if (!front && from) {
        /* A dropped strategy's dominator is no worse: start from it. */
        start = ir_xmalloc((size_t)(p->nnodes + 1) * sizeof *start);
        for (int u = 0; u < p->nnodes; u++) {
            int i = from[u];
            while (w->dom[u][i] >= 0)
                i = w->dom[u][i];
            int k = 0;
            while (w->map[u][k] != i)
                k++;
            start[u] = k;
        }
        ro.start = start;
    }
    if (!front)
        solve_glpk(w->r, &ro, w == &own ? NULL : w, s);
    /* Only a budgeted solve can start from another path (a kept basis, a
     * start); without a budget GLPK's path is always the same, from the
     * slack basis, and its answer is left as it was (ties as before; the
     * first variants are most of the solves). The map keeps the order of
     * strategies. */
    if (s->choice && !(o && o->no_canon) && isfinite(p->budget)) {
        if (!w->loc.p)
            ilp_local_init(&w->loc, w->r);
        int *ref = check ? ir_xmalloc((size_t)(p->nnodes + 1) * sizeof *ref) : NULL;
        if (ref)
            memcpy(ref, s->choice, (size_t)p->nnodes * sizeof *ref);
        s->canon_moves = ilp_canon_local(&w->loc, s->choice, &s->total); /* ilp_eval(w->r, choice) */
        if (ref && (ilp_canon_ref(w->r, ref) != s->canon_moves ||
                    memcmp(ref, s->choice, (size_t)p->nnodes * sizeof *ref)))
            ir_die("ilp: ilp_canon's answer differs from the one with every move priced whole "
                   "(PTDC_SEARCH_CHECK)");
        free(ref);
    }
    if (s->choice) {
        for (int u = 0; u < p->nnodes; u++)
            s->choice[u] = w->map[u][s->choice[u]];
        double glpk_obj = s->glpk_obj, bound = s->bound;
        s->objective = ilp_eval(p, s->choice, &s->total);
        s->glpk_obj = glpk_obj;
        s->bound = bound < s->objective ? bound : s->objective;
    }
    s->pruned = w->pruned;
    warm_clear(&own);
    free(start);
    free(repaired);
    s->solve_s = now_s() - t0;
    return s->status;
}

void ilp_solution_free(IlpSolution *s)
{
    free(s->choice);
    s->choice = NULL;
}
