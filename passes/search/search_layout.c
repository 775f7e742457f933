/* search_layout.c: a plan's layout in the usual words (dp, tp, sp, ...),
 * derived from its strategies rather than from the search's intentions, and
 * the pins helpers. */
#include "search/search.h"

#include <stdio.h>
#include <string.h>

void pass_search_pins_none(PassSearchPins *p)
{
    memset(p, 0, sizeof *p);
    p->recompute = p->sp = p->zero = p->schedule = -1;
}

bool pass_search_pinned_fully(const PassSearchPins *p)
{
    bool interleaved = p->schedule == PASS_SCHED_INTERLEAVED || p->v > 1;
    return p->tp > 0 && p->pp > 0 && p->micro_batch > 0 && p->recompute >= 0 &&
           (p->sp >= 0 || p->tp == 1) && p->zero >= 0 && (p->schedule >= 0 || p->v > 1) &&
           (!interleaved || p->v > 1);
}

void pass_plan_layout(const IrGraph *g, const PassPlan *p, PassLayout *out)
{
    memset(out, 0, sizeof *out);
    out->dp = out->tp = out->replicated = 1;
    out->dp_axis = out->tp_axis = -1;
    for (int a = 0; a < p->mesh.naxes; a++) {
        if (p->mesh.size[a] <= 1)
            continue;
        bool batch = false, other = false, seq = false;
        for (int i = 0; i < g->nfwd; i++) {
            int d = p->strategy[i].dim[a];
            batch |= d == g->batch_dim;
            other |= d >= 0 && d != g->batch_dim;
            /* Sequence parallelism as Megatron means it: the norms split the sequence. */
            seq |= d >= 0 && d == g->seq_dim &&
                   (g->nodes[i].op == IR_OP_RMSNORM || g->nodes[i].op == IR_OP_LAYERNORM);
        }
        if (batch && out->dp_axis < 0) {
            out->dp_axis = a;
            out->dp = p->mesh.size[a];
        } else if (other && out->tp_axis < 0) {
            out->tp_axis = a;
            out->tp = p->mesh.size[a];
            out->sp = seq;
        } else {
            out->replicated *= p->mesh.size[a];
        }
    }
    out->pp = p->pp;
    out->v = p->v > 0 ? p->v : 1;
    out->gpus = pass_mesh_devices(&p->mesh) * p->pp;
    out->zero = p->zero;
    out->micro_batch = p->mb_seqs / out->dp;
    out->num_micro = p->num_micro;
    out->schedule = p->schedule;
    for (int i = 0; i < p->nstages; i++)
        out->recompute |= 1u << p->stages[i].recompute;
}

const char *pass_layout_recompute_name(const PassLayout *l)
{
    for (int r = PASS_RECOMPUTE_NONE; r <= PASS_RECOMPUTE_FULL; r++)
        if (l->recompute == 1u << r)
            return pass_recompute_name((PassRecompute)r);
    return "mixed";
}

const char *pass_layout_str(const PassLayout *l, char *buf, size_t n)
{
    char v[32] = "";
    if (l->v > 1)
        snprintf(v, sizeof v, " (v %d)", l->v);
    char rep[32] = "";
    if (l->replicated > 1)
        snprintf(rep, sizeof rep, " x %d replicas", l->replicated);
    snprintf(buf, n, "dp %d x tp %d x pp %d%s%s, sp %s, zero %d, micro-batch %lld x %d, %s, recompute %s",
             l->dp, l->tp, l->pp, rep, v, l->sp ? "on" : "off", l->zero, (long long)l->micro_batch,
             l->num_micro, l->schedule == PASS_SCHED_INTERLEAVED ? "interleaved" : "1f1b",
             pass_layout_recompute_name(l));
    return buf;
}

const char *pass_layout_flags(const PassLayout *l, char *buf, size_t n)
{
    char rc[32] = "", v[32] = "";
    const char *r = pass_layout_recompute_name(l);
    if (strcmp(r, "mixed") != 0)
        snprintf(rc, sizeof rc, " --recompute %s", r);
    if (l->v > 1)
        snprintf(v, sizeof v, " --virtual-stages %d", l->v);
    snprintf(buf, n, "--tp %d --pp %d --dp %d --micro-batch %lld%s --sp %s --zero %d --schedule %s%s",
             l->tp, l->pp, l->dp, (long long)l->micro_batch, rc, l->sp ? "on" : "off", l->zero,
             l->schedule == PASS_SCHED_INTERLEAVED ? "interleaved" : "1f1b", v);
    return buf;
}
