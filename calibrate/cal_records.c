/* cal_records.c: read the records ptdc-measure prints (records.h lists
 * them) into arrays, refusing anything malformed with the file and line. */
#include "calibrate.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool num(const char *s, double *out)
{
    char *e;
    errno = 0;
    double d = strtod(s, &e);
    if (e == s || *e || errno || !isfinite(d))
        return false;
    *out = d;
    return true;
}

static int split(char *line, char **tok, int max)
{
    int n = 0;
    for (char *p = strtok(line, " \t\r"); p && n < max; p = strtok(NULL, " \t\r"))
        tok[n++] = p;
    return n;
}

void cal_records_free(CalRecords *r)
{
    vec_free(r->gemm);
    vec_free(r->kern);
    vec_free(r->attn);
    vec_free(r->coll);
    memset(r, 0, sizeof *r);
}

const char *const cal_coll_names[CAL_NCOLL] = CAL_COLL_NAMES;

bool cal_records_parse(const char *name, const char *text, CalRecords *r)
{
    memset(r, 0, sizeof *r);
    char *copy = ir_xstrdup(text);
    bool ok = true, ended = false;
    int lineno = 0;
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line && ok;
         line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *tok[16];
        int n = split(line, tok, 16);
        if (n == 0 || tok[0][0] == '#')
            continue;
        /* Records made of numbers only: gemm, node, host. */
        double v[12] = {0};
        bool numbers = true;
        for (int i = 1; i < n && i < 13; i++)
            numbers &= num(tok[i], &v[i - 1]);
        if (!strcmp(tok[0], CAL_REC_META)) {
            for (int i = 1; i + 1 < n; i += 2) {
                if (!strcmp(tok[i], "backend"))
                    snprintf(r->backend, sizeof r->backend, "%s", tok[i + 1]);
                else if (!strcmp(tok[i], "ranks"))
                    r->ranks = atoi(tok[i + 1]);
                else if (!strcmp(tok[i], "act_bytes"))
                    r->act_bytes = atoi(tok[i + 1]);
                else if (!strcmp(tok[i], "threads"))
                    r->threads = atoi(tok[i + 1]);
                else if (!strcmp(tok[i], "host"))
                    snprintf(r->host, sizeof r->host, "%s", tok[i + 1]);
            }
            if (!r->backend[0] || r->ranks < 1 || (r->act_bytes != 2 && r->act_bytes != 4)) {
                ir_error(IR_NOLOC, "%s:%d: malformed meta record", name, lineno);
                ok = false;
            }
        } else if (!strcmp(tok[0], CAL_REC_GEMM) && n == CAL_NTOK_GEMM && numbers) {
            CalGemm g = {v[0], v[1], v[2], (int)v[3], (int)v[4], v[5]};
            ok = g.M >= 1 && g.N >= 1 && g.K >= 1 && g.s > 0;
            if (ok)
                vec_push(r->gemm, g);
        } else if (!strcmp(tok[0], CAL_REC_KERN) && n == CAL_NTOK_KERN) {
            CalKern k;
            memset(&k, 0, sizeof k);
            snprintf(k.name, sizeof k.name, "%s", tok[1]);
            ok = num(tok[2], &k.rows) && num(tok[3], &k.cols) && num(tok[4], &k.s) && k.s > 0;
            if (ok)
                vec_push(r->kern, k);
        } else if (!strcmp(tok[0], CAL_REC_ATTN) && n == CAL_NTOK_ATTN) {
            CalAttn a;
            memset(&a, 0, sizeof a);
            a.bwd = !strcmp(tok[1], "bwd");
            double c = 0;
            ok = (a.bwd || !strcmp(tok[1], "fwd")) && num(tok[2], &a.B) && num(tok[3], &a.S) &&
                 num(tok[4], &a.H) && num(tok[5], &a.KVH) && num(tok[6], &a.D) && num(tok[7], &c) &&
                 num(tok[8], &a.s) && a.s > 0;
            a.causal = c != 0;
            if (ok)
                vec_push(r->attn, a);
        } else if (!strcmp(tok[0], CAL_REC_COLL) && n == CAL_NTOK_COLL) {
            CalColl c;
            memset(&c, 0, sizeof c);
            c.kind = -1;
            for (int k = 0; k < CAL_NCOLL; k++)
                if (!strcmp(tok[1], cal_coll_names[k]))
                    c.kind = k;
            double g = 0, nodes = 0, per = 0;
            ok = c.kind >= 0 && num(tok[2], &g) && num(tok[3], &nodes) && num(tok[4], &per) &&
                 num(tok[5], &c.bytes) && num(tok[6], &c.s) && c.s > 0 && g >= 2;
            c.group = (int)g, c.nodes = (int)nodes, c.per_node = (int)per;
            if (ok)
                vec_push(r->coll, c);
        } else if (!strcmp(tok[0], CAL_REC_NODE) && n == CAL_NTOK_NODE && numbers) {
            if ((int)v[1] + 1 > r->nodes)
                r->nodes = (int)v[1] + 1;
        } else if (!strcmp(tok[0], CAL_REC_MEM) && n == CAL_NTOK_MEM) {
            double b = 0;
            ok = num(tok[2], &b) && b >= 0;
            if (ok && !strcmp(tok[1], "base"))
                r->mem_base = b;
            else if (ok && !strcmp(tok[1], "comm"))
                r->mem_comm = b;
            else
                ok = false;
        } else if (!strcmp(tok[0], CAL_REC_HOST) && n == CAL_NTOK_HOST && numbers && v[0] >= 1 && v[1] > 0) {
            r->host_seq = v[0];
            r->host_seq_s = v[1];
        } else if (!strcmp(tok[0], CAL_REC_SHARE) && n == CAL_NTOK_SHARE && numbers && v[0] > v[1] && v[1] >= 1 &&
                   v[2] > 0 && v[3] > 0) {
            r->share_ranks = (int)v[0], r->share_cpus = (int)v[1];
            r->share_all_s = v[2], r->share_half_s = v[3];
        } else if (!strcmp(tok[0], CAL_REC_SYNC) && n == CAL_NTOK_SYNC && (!strcmp(tok[3], "gemm") || !strcmp(tok[3], "mem"))) {
            double seg = 0, f = 0;
            ok = num(tok[4], &seg) && num(tok[5], &f) && seg > 0 && f > -1;
            if (ok) {
                r->sync[!strcmp(tok[3], "mem")] = f;
                r->has_sync = true;
            }
        } else if (!strcmp(tok[0], CAL_REC_SHARE_SYNC) && n == CAL_NTOK_SHARE_SYNC && numbers) {
            /* reported by ptdc-measure, not fitted */
        } else if (!strcmp(tok[0], CAL_REC_END) && n == CAL_NTOK_END) {
            ended = true;
        } else {
            ok = false;
        }
        if (!ok)
            ir_error(IR_NOLOC, "%s:%d: malformed calibration record '%s'", name, lineno, tok[0]);
    }
    free(copy);
    if (ok && !ended) {
        ir_error(IR_NOLOC, "%s: the measurement did not finish (no 'end' record)", name);
        ok = false;
    }
    for (int i = 0; ok && i < r->coll.n; i++) /* ranks per node of this run */
        r->coll.v[i].rpn = r->ranks / (r->nodes > 0 ? r->nodes : 1);
    if (ok && !r->backend[0]) {
        ir_error(IR_NOLOC, "%s: no 'meta' record", name);
        ok = false;
    }
    if (!ok)
        cal_records_free(r);
    return ok;
}
