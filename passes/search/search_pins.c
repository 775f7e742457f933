/* search_pins.c: pinned layouts that cannot work, each refused before
 * searching with a sentence saying why (src_check_pins). What is said after a
 * search that finds nothing is search_nofit.c's. */
#include "search/src.h"

#include <stdio.h>
#include <string.h>

/* "34 pieces: embedding, 32 layers, head" */
static const char *pieces_str(const IrGraph *g, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%d pieces:", g->npieces);
    for (int p = 0; p < g->npieces && k < n; p++) {
        const IrPiece *P = &g->pieces[p];
        if (P->rep < 0) {
            k += (size_t)snprintf(buf + k, n - k, "%s %s", p ? "," : "", P->name);
            continue;
        }
        if (p > 0 && g->pieces[p - 1].rep == P->rep)
            continue;
        int c = 0;
        for (int q = p; q < g->npieces && g->pieces[q].rep == P->rep; q++)
            c++;
        k += (size_t)snprintf(buf + k, n - k, "%s %d layer%s", p ? "," : "", c, c == 1 ? "" : "s");
    }
    return buf;
}

/* The first attention node's query and key/value head dims, or false. */
static bool heads(const IrGraph *g, int *hq, int *hkv)
{
    for (int i = 0; i < g->nfwd; i++) {
        const IrNode *n = &g->nodes[i];
        if (n->op != IR_OP_ATTENTION)
            continue;
        *hq = g->tensors[n->in[0]].dim[2];
        *hkv = g->tensors[n->in[1]].dim[2];
        return true;
    }
    return false;
}

/* What the stack offers (PassStack): a pin it lacks is refused by name. */
static bool check_stack_pins(const Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    const PassStack *st = &s->c->st;
    if (p->zero >= 0 && !pass_stack_has_zero(st, p->zero)) {
        ir_error(IR_NOLOC, "--zero %d: the %s stack has no ZeRO stage %d (stack key zero_stages%s)", p->zero,
                 st->name, p->zero,
                 p->zero == 3 && !strcmp(st->name, "megatron") ? "; Megatron-FSDP is --stack-set zero_stages=0,1,3" : "");
        return false;
    }
    int none_of = p->recompute >= 0 ? plan_recompute_unused(s->g, (PlanRecompute)p->recompute) : -1;
    if (none_of >= 0) { /* Megatron refuses it too (transformer_config.py __post_init__) */
        ir_error(IR_NOLOC, "--recompute %s: Megatron's module %s reruns nothing of %s (Megatron takes mla_up_proj "
                 "only with multi-latent attention, moe_act only with grouped experts)",
                 plan_recompute_name((PlanRecompute)p->recompute), plan_rc_module_name((PlanRcModule)none_of),
                 s->g->name ? s->g->name : "the model");
        return false;
    }
    if (p->recompute >= 0 && !pass_stack_has_recompute(st, p->recompute)) {
        ir_error(IR_NOLOC, "--recompute %s: the %s stack does not offer it%s",
                 plan_recompute_name((PlanRecompute)p->recompute), st->name,
                 plan_recompute_modules((PlanRecompute)p->recompute)
                     ? " (Megatron's recompute modules are priced for --stack megatron; ptdc's own programs "
                       "recompute none, selective, ffn or full)"
                     : "");
        return false;
    }
    if (p->schedule >= 0 && !pass_stack_has_schedule(st, p->schedule)) {
        /* What the frameworks the reference stacks stand for run instead
         * (Megatron-LM's mainline, torchtitan's job config; docs/stacks.md). */
        ir_error(IR_NOLOC, "--schedule %s: the %s stack does not offer it%s", plan_schedule_name(p->schedule),
                 st->name,
                 plan_schedule_split(p->schedule)
                     ? " (ZB-H1 splits each backward into input and weight gradients on one model chunk "
                       "per pipeline rank: Megatron-LM has no such schedule, its --delay-wgrad-compute "
                       "defers weight gradients inside an overlapped MoE layer, and torchtitan's zero-bubble "
                       "schedules, InterleavedZeroBubble and ZBVZeroBubble, run two or more stages per rank)"
                     : "");
        return false;
    }
    if (p->sp == 1 && st->no_sp) {
        ir_error(IR_NOLOC, "--sp on: the %s stack has no sequence parallelism", st->name);
        return false;
    }
    return true;
}

/* --tp against the GPUs and the attention heads it splits. */
static bool check_tp_pin(const Src *s)
{
    const IrGraph *g = s->g;
    int N = s->gpus, tp = s->o->pins.tp;
    if (tp > N) {
        ir_error(IR_NOLOC, "--tp %d needs more GPUs than the %d given", tp, N);
        return false;
    }
    int hq, hkv;
    if (tp > 1 && heads(g, &hq, &hkv)) {
        const IrDim *Q = &g->dims[hq], *K = &g->dims[hkv];
        if (Q->size % tp) {
            ir_error(IR_NOLOC, "--tp %d does not divide the %lld attention heads of %s (%s = %lld)",
                     tp, (long long)Q->size, g->name, Q->name, (long long)Q->size);
            return false;
        }
        if (hkv != hq && K->size % tp) {
            ir_error(IR_NOLOC, "--tp %d does not divide the %lld key/value heads of %s (%s = %lld)",
                     tp, (long long)K->size, g->name, K->name, (long long)K->size);
            return false;
        }
    }
    return true;
}

/* --pp and --virtual-stages against the model's pieces, the programs'
 * limits and the GPUs. */
static bool check_pp_pin(const Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    const IrGraph *g = s->g;
    int pp = p->pp, v = p->v > 1 ? p->v : 1;
    char buf[256];
    if (pp * v > g->npieces) {
        if (v > 1)
            ir_error(IR_NOLOC, "--pp %d with --virtual-stages %d asks for %d model chunks, more than "
                     "%s has pieces to give them (%s)", pp, v, pp * v, g->name, pieces_str(g, buf, sizeof buf));
        else
            ir_error(IR_NOLOC, "--pp %d asks for more pipeline stages than %s has pieces to give "
                     "them (%s)", pp, g->name, pieces_str(g, buf, sizeof buf));
        return false;
    }
    /* A framework stack's plan is only priced: the programs' limit on chunks
     * per rank is not its (plan.h). */
    int vmax = s->c->st.ref_stack ? PLAN_MAX_CHUNKS : PLAN_PROG_MAX_CHUNKS;
    if (pp > PLAN_MAX_PP || v > vmax || pp * v > PLAN_MAX_STAGES) {
        ir_error(IR_NOLOC, "--pp %d --virtual-stages %d: %s at most %d pipeline stages of at most %d "
                 "model chunks each, %d chunks in all", pp, v,
                 s->c->st.ref_stack ? "a plan has" : "ptdc's programs run", PLAN_MAX_PP, vmax, PLAN_MAX_STAGES);
        return false;
    }
    if (pp > s->gpus) {
        ir_error(IR_NOLOC, "--pp %d needs more GPUs than the %d given", pp, s->gpus);
        return false;
    }
    return true;
}

/* The degrees pinned together must multiply into (or divide) the GPUs,
 * a pipeline stage must be whole nodes or part of one, and sequence
 * parallelism needs a tensor-parallel group. */
static bool check_mesh_pins(const Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    int N = s->gpus, tp = p->tp, pp = p->pp, dp = p->dp, cp = p->cp ? p->cp : 1;
    if (dp && tp && pp && dp * cp * tp * pp != N) {
        char cps[32] = "";
        if (cp > 1)
            snprintf(cps, sizeof cps, " x --cp %d", cp);
        ir_error(IR_NOLOC, "--dp %d%s x --tp %d x --pp %d = %d GPUs, but --gpus is %d", dp, cps, tp,
                 pp, dp * cp * tp * pp, N);
        return false;
    }
    int fixed = (tp ? tp : 1) * (pp ? pp : 1) * (dp ? dp : 1) * cp;
    if (N % fixed) {
        char what[96] = "";
        size_t k = 0;
        if (dp)
            k += (size_t)snprintf(what + k, sizeof what - k, "--dp %d", dp);
        if (tp)
            k += (size_t)snprintf(what + k, sizeof what - k, "%s--tp %d", k ? " x " : "", tp);
        if (pp)
            k += (size_t)snprintf(what + k, sizeof what - k, "%s--pp %d", k ? " x " : "", pp);
        if (cp > 1)
            k += (size_t)snprintf(what + k, sizeof what - k, "%s--cp %d", k ? " x " : "", cp);
        if ((dp != 0) + (tp != 0) + (pp != 0) + (cp > 1) > 1)
            snprintf(what + k, sizeof what - k, " = %d", fixed);
        ir_error(IR_NOLOC, "--gpus %d is not divisible by %s", N, what);
        return false;
    }
    if (pp) {
        int n = N / pp;
        if (n % s->gpn && s->gpn % n) {
            ir_error(IR_NOLOC, "with --pp %d each pipeline stage gets %d GPUs, which is neither whole "
                     "nodes of %d GPUs nor a divisor of one", pp, n, s->gpn);
            return false;
        }
    }
    if (p->sp == 1 && tp == 1) {
        ir_error(IR_NOLOC, "--sp on needs --tp of at least 2: sequence parallelism splits the "
                 "tensor-parallel group's work along the sequence");
        return false;
    }
    return true;
}

/* The data-parallel degree, when the pins determine it (else 0). */
static int pinned_dp(const Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    int cp = p->cp ? p->cp : 1;
    return p->dp ? p->dp : p->tp && p->pp ? s->gpus / (p->tp * p->pp * cp) : 0;
}

/* The global batch must split over the data-parallel replicas and into
 * micro-batches, not too many of them. */
static bool check_batch_pins(const Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    int N = s->gpus, tp = p->tp, pp = p->pp, dp = p->dp, d = pinned_dp(s);
    long long gb = (long long)s->gb;
    if (d && gb % d) {
        if (dp)
            ir_error(IR_NOLOC, "--dp %d does not divide the global batch of %lld sequences", d, gb);
        else
            ir_error(IR_NOLOC, "dp %d (%d GPUs / (tp %d x pp %d)) does not divide the global batch "
                     "of %lld sequences", d, N, tp, pp, gb);
        return false;
    }
    if (p->micro_batch) {
        long long mb = (long long)p->micro_batch * (d ? d : 1);
        if (gb % mb) {
            if (d)
                ir_error(IR_NOLOC, "--micro-batch %d x dp %d = %lld sequences per micro-batch do not "
                         "divide the global batch of %lld sequences", p->micro_batch, d, mb, gb);
            else
                ir_error(IR_NOLOC, "--micro-batch %d does not divide the global batch of %lld "
                         "sequences", p->micro_batch, gb);
            return false;
        }
    }
    if (p->micro_batch && d && gb / ((long long)p->micro_batch * d) > PLAN_MAX_MICRO) {
        ir_error(IR_NOLOC, "--micro-batch %d x dp %d cuts the global batch of %lld sequences into "
                 "%lld micro-batches per step; a plan has at most %d (raise --micro-batch)",
                 p->micro_batch, d, gb, gb / ((long long)p->micro_batch * d),
                 PLAN_MAX_MICRO);
        return false;
    }
    return true;
}

int src_split_empty_ends(const Src *s)
{
    const PassSearchOpts *o = s->o;
    if (o->pp_nlayers)
        return (o->pp_layers[0] == 0) + (o->pp_nlayers > 1 && o->pp_layers[o->pp_nlayers - 1] == 0);
    if (o->pp_first || o->pp_last || s->rep0 < 0)
        return 0;
    return (s->rep_first > 0) + (s->rep_first + s->rep_count < s->npieces);
}

int src_split_pin(const Src *s, int pp, int v, int *layers, char *why, size_t wn)
{
    const PassSearchOpts *o = s->o;
    int chunks = pp * v, L = s->rep_count;
    char dummy[256];
    if (!why)
        why = dummy, wn = sizeof dummy;
    if (!o->pp_nlayers && !o->pp_first && !o->pp_last)
        return 0;
    if (s->rep0 < 0) {
        snprintf(why, wn, "--pp-layers needs a model whose layers form one repeat");
        return -1;
    }
    if (o->pp_nlayers) {
        if (o->pp_nlayers != chunks) {
            snprintf(why, wn, "--pp-layers gives %d model chunks, and pp %d x v %d makes %d", o->pp_nlayers,
                     pp, v, chunks);
            return -1;
        }
        long long sum = 0;
        for (int c = 0; c < chunks; c++)
            sum += o->pp_layers[c];
        if (sum != L) {
            snprintf(why, wn, "--pp-layers gives %lld layers, and the model has %d", sum, L);
            return -1;
        }
        /* An end chunk without layers still runs the pieces before (or
         * after) the repeat: there must be some. */
        if (!o->pp_layers[0] && s->rep_first == 0) {
            snprintf(why, wn, "--pp-layers gives the first model chunk no layers, and %s has no "
                     "embedding before its layers for it to hold", s->g->name);
            return -1;
        }
        if (!o->pp_layers[chunks - 1] && s->rep_first + L >= s->npieces) {
            snprintf(why, wn, "--pp-layers gives the last model chunk no layers, and %s has no head "
                     "after its layers for it to hold", s->g->name);
            return -1;
        }
        for (int c = 0; c < chunks; c++)
            layers[c] = o->pp_layers[c];
        return 1;
    }
    /* Megatron's --decoder-first/last-pipeline-num-layers: per pipeline
     * rank, each rank's layers split evenly over its v chunks, the ranks
     * between them evenly (TransformerConfig's rules). */
    int F = o->pp_first, Z = o->pp_last, given = (F > 0) + (Z > 0);
    if (pp < 2 || pp < given) {
        snprintf(why, wn, "--pp-layers first=/last= needs --pp of at least %d", given > 2 ? given : 2);
        return -1;
    }
    if ((F && F % v) || (Z && Z % v)) {
        snprintf(why, wn, "--pp-layers gives the %s pipeline rank %d layers, which its %d model chunks "
                 "cannot share evenly", F % v ? "first" : "last", F % v ? F : Z, v);
        return -1;
    }
    int mid = pp - given, rest = L - F - Z;
    if (rest < 0 || (rest > 0) != (mid > 0) || (mid && (rest % mid || (rest / mid) % v || rest / mid < v))) {
        snprintf(why, wn, "--pp-layers leaves %d layers for the %d pipeline ranks between the first and "
                 "the last, which cannot take them evenly%s", rest, mid,
                 v > 1 ? " in whole layers per model chunk" : "");
        return -1;
    }
    for (int c = 0; c < chunks; c++) {
        int r = c % pp, n = r == 0 && F ? F : r == pp - 1 && Z ? Z : rest / mid;
        layers[c] = n / v;
    }
    return 1;
}

/* The interleaved schedule (or --virtual-stages) needs one repeat of
 * layers with at least one per chunk (chunks may differ: the search cuts
 * them by cost, or --pp-layers pins them), and whole rounds of pp
 * micro-batches. */
static bool check_interleaved_pins(const Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    const IrGraph *g = s->g;
    int pp = p->pp, v = p->v > 1 ? p->v : 1, d = pinned_dp(s);
    long long gb = (long long)s->gb;
    char buf[256];
    if (s->rep0 < 0) {
        ir_error(IR_NOLOC, "the interleaved schedule needs a model whose layers form one repeat; "
                 "%s has %s", g->name, pieces_str(g, buf, sizeof buf));
        return false;
    }
    if (pp == 1) {
        ir_error(IR_NOLOC, "the interleaved schedule needs --pp of at least 2");
        return false;
    }
    int lo = pp ? pp : 2, w = v > 1 ? v : 2;
    int ends = src_split_empty_ends(s);
    if (lo * w > s->rep_count + ends) {
        char what[64];
        if (pp && p->v > 1)
            snprintf(what, sizeof what, "--virtual-stages %d with --pp %d", v, pp);
        else if (pp)
            snprintf(what, sizeof what, "the interleaved schedule with --pp %d", pp);
        else if (p->v > 1)
            snprintf(what, sizeof what, "--virtual-stages %d", v);
        else
            snprintf(what, sizeof what, "the interleaved schedule");
        ir_error(IR_NOLOC, "%s needs at least %d x %d - %d = %d layers (pp x v model chunks of at least one "
                 "layer each, but for %d end chunk%s holding the embedding or the head alone), and %s has %d",
                 what, lo, w, ends, lo * w - ends, ends, ends == 1 ? "" : "s", g->name, s->rep_count);
        return false;
    }
    if (pp && v > 1 && pp * v > PLAN_MAX_STAGES) {
        ir_error(IR_NOLOC, "--virtual-stages %d with --pp %d makes %d model chunks; a plan has at most %d",
                 v, pp, pp * v, PLAN_MAX_STAGES);
        return false;
    }
    if (pp && d && p->micro_batch) {
        long long m = gb / ((long long)p->micro_batch * d);
        if (m % pp) {
            ir_error(IR_NOLOC, "the interleaved schedule needs the number of micro-batches "
                     "(%lld) to be a multiple of --pp %d", m, pp);
            return false;
        }
    }
    return true;
}

/* --pp-layers 0 at an end leaves the embedding or the head alone there
 * (Megatron's account_for_*_in_pipeline_split); a chunk between them would
 * run nothing. */
static bool check_empty_chunks(const Src *s)
{
    const PassSearchOpts *o = s->o;
    for (int c = 1; c + 1 < o->pp_nlayers; c++)
        if (o->pp_layers[c] < 1) {
            ir_error(IR_NOLOC, "--pp-layers gives model chunk %d no layers; only the first and the last "
                     "chunk may have none (they hold the embedding or the head), a chunk between them "
                     "would run nothing", c);
            return false;
        }
    return true;
}

/* --pp-layers: a split some pinned pp x v takes. */
static bool check_split_pins(const Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    const PassSearchOpts *o = s->o;
    if (!o->pp_nlayers && !o->pp_first && !o->pp_last)
        return true;
    bool inter = p->schedule == PLAN_SCHED_INTERLEAVED || p->v > 1;
    char why[256] = "";
    int layers[PLAN_MAX_STAGES];
    if (o->pp_nlayers > PLAN_MAX_STAGES) {
        ir_error(IR_NOLOC, "--pp-layers gives %d model chunks; a plan has at most %d", o->pp_nlayers,
                 PLAN_MAX_STAGES);
        return false;
    }
    /* Every pinned (pp, v) the schedule allows; the first reason if none takes the split. */
    int vlo = inter ? (p->v > 1 ? p->v : 2) : 1;
    int vhi = p->schedule >= 0 && !plan_schedule_chunked(p->schedule) ? 1 : p->v > 1 ? p->v : PLAN_PROG_MAX_CHUNKS;
    for (int pp = p->pp ? p->pp : 2; pp <= (p->pp ? p->pp : PLAN_MAX_PP); pp++)
        for (int v = vlo; v <= vhi && pp * v <= PLAN_MAX_STAGES; v++) {
            char w[256];
            if (src_split_pin(s, pp, v, layers, w, sizeof w) > 0)
                return true;
            /* the pinned v's reason, else the v whose chunks --pp-layers counts */
            if (!why[0] || (p->pp && (p->v ? p->v == v : o->pp_nlayers == pp * v)))
                snprintf(why, sizeof why, "%s", w);
        }
    ir_error(IR_NOLOC, "%s", why);
    return false;
}

/* Does EP `ep` fold over tp-wide groups of consecutive dp ranks (ETP 1,
 * ep / tp dividing dp) or over consecutive dp ranks (ETP tp, ep dividing
 * dp), ETP as pinned or at Megatron's default (tp)? */
static bool folded_fits(const PassSearchOpts *o, int ep, int tp, int dp)
{
    int etp = o->etp > 0 ? o->etp : tp;
    if (etp == 1)
        return ep % tp == 0 && dp % (ep / tp) == 0;
    return etp == tp && dp % ep == 0;
}

/* ... and may this request use it (a framework stack: its pinned layout, or
 * its search with --ep pinned, report/frame_search.c)? */
static bool folded(const Src *s, int ep, int tp, int dp)
{
    return s->c->st.ref_stack && folded_fits(s->o, ep, tp, dp);
}

/* ... or ptdc's own search: EP below DP at tp 1 (src_folds; tests/codegen's
 * tiny-mixtral-fold) or across all of dp x tp with ETP 1 (the ILP's
 * exchange over both axes; tiny-mixtral's epx layouts)? */
static bool own_folded(const Src *s, int ep, int tp, int dp)
{
    if (s->c->st.ref_stack || s->o->etp > 1)
        return false;
    return (tp == 1 && ep < dp && dp % ep == 0) || (tp > 1 && dp > 1 && ep == dp * tp);
}

/* --ep and --etp: a model with experts, degrees dividing the experts and
 * their width, each a whole mesh axis (1, dp or tp), on different axes when
 * both split. A framework's pinned layout also takes Megatron-Core's
 * parallel folding (report/plan_frame.c): EP of ep / tp consecutive dp
 * ranks with every tp rank of each (ETP 1: EP below DP at tp 1, across
 * dp x tp), or of ep consecutive dp ranks with ETP tp. ptdc's own search
 * plans EP below DP at tp 1 and across all of dp x tp with sp (not tp with
 * part of dp, which its ILP cannot lay out and its programs run only from
 * hand-built plans, nor ETP tp), so its own stack refuses the others. */
static bool check_moe_pins(const Src *s)
{
    const IrGraph *g = s->g;
    const PassSearchOpts *o = s->o;
    if (!o->ep && !o->etp)
        return true;
    const IrNode *moe = NULL;
    for (int i = 0; i < g->nfwd && !moe; i++)
        if (plan_routed_expert_dim(g, &g->nodes[i]) >= 0)
            moe = &g->nodes[i];
    const char *flag = o->ep ? "--ep" : "--etp";
    if (!moe) {
        ir_error(IR_NOLOC, "%s: %s has no routed experts (no moe operator of several experts); "
                 "leave it out", flag, g->name);
        return false;
    }
    const IrDim *E = &g->dims[plan_expert_dim(g, moe)];
    const IrDim *F = &g->dims[g->tensors[moe->in[2]].dim[2]];
    const struct {
        const char *flag;
        int deg;
        const IrDim *d;
        const char *what;
    } pin[2] = {{"--ep", o->ep, E, "experts"}, {"--etp", o->etp, F, "expert width"}};
    for (int i = 0; i < 2; i++) {
        int deg = pin[i].deg;
        if (deg <= 1)
            continue;
        if (pin[i].d->size % deg) {
            char ok[128] = "1";
            size_t k = 1;
            for (int64_t d = 2; d <= pin[i].d->size && k < sizeof ok - 12; d++)
                if (pin[i].d->size % d == 0)
                    k += (size_t)snprintf(ok + k, sizeof ok - k, ", %lld", (long long)d);
            ir_error(IR_NOLOC, "%s %d does not divide the %lld %s of %s (%s); it could be %s",
                     pin[i].flag, deg, (long long)pin[i].d->size, pin[i].what, g->name, pin[i].d->name, ok);
            return false;
        }
        int tp = o->pins.tp, dp = o->pins.dp, pp = o->pins.pp;
        if (!dp && tp && pp && s->gpus % (tp * pp) == 0)
            dp = s->gpus / (tp * pp);
        if (i == 1 && tp && deg != tp) {
            ir_error(IR_NOLOC, "--etp %d: each expert's width splits over the tensor-parallel axis "
                     "(the data-parallel one splits the batch), here tp %d; --etp must be 1 or %d",
                     deg, tp, tp);
            return false;
        }
        if (i == 0 && tp && dp && deg != tp && deg != dp && own_folded(s, deg, tp, dp) && tp > 1 &&
            o->pins.sp == 0) {
            ir_error(IR_NOLOC, "--ep %d across dp %d x tp %d exchanges the tokens of each sequence over tp, "
                     "which only sequence parallelism splits there: use --sp on (Megatron-Core warns that EP with "
                     "tp > 1 must use sequence parallelism, model_parallel_config.py)", deg, dp, tp);
            return false;
        }
        if (i == 0 && tp && dp && deg != tp && deg != dp && (folded(s, deg, tp, dp) || own_folded(s, deg, tp, dp)))
            continue;
        if (tp && dp && deg != tp && deg != dp) {
            if (i == 0 && !s->c->st.ref_stack && folded_fits(o, deg, tp, dp))
                ir_error(IR_NOLOC, "--ep %d: EP over tp and part of dp or with ETP tp (Megatron-Core's parallel "
                         "folding) is priced under a framework stack (--stack megatron); ptdc's own search folds "
                         "EP below DP at tp 1 only (a divisor of dp), across all of dp x tp or over a whole mesh "
                         "axis: --ep 1, %d (over tp), %d (over dp) or %d (across dp x tp)", deg, tp, dp, dp * tp);
            else if (i == 0 && s->c->st.ref_stack)
                ir_error(IR_NOLOC, "--ep %d: the experts fold over a whole mesh axis or, as Megatron-Core's "
                         "parallel folding, over whole tp groups of consecutive dp ranks (--etp 1: a multiple "
                         "of tp %d dividing %d) or over consecutive dp ranks (--etp %d: a divisor of dp %d); "
                         "this mesh is dp %d x tp %d", deg, tp, dp * tp, tp, dp, dp, tp);
            else
                ir_error(IR_NOLOC, "%s %d: the experts fold over a whole mesh axis, and this mesh is "
                         "dp %d x tp %d; %s must be 1, %d (over tp) or %d (over dp)", pin[i].flag, deg,
                         dp, tp, pin[i].flag, tp, dp);
            return false;
        }
        if (deg > s->gpus) {
            ir_error(IR_NOLOC, "%s %d needs more GPUs than the %d given", pin[i].flag, deg, s->gpus);
            return false;
        }
    }
    if (o->ep > 1 && o->etp > 1 && o->pins.tp && o->pins.dp &&
        !(o->ep == o->pins.dp && o->etp == o->pins.tp) && !folded(s, o->ep, o->pins.tp, o->pins.dp)) {
        ir_error(IR_NOLOC, "--ep %d --etp %d: EP and ETP each take a whole mesh axis, EP dp and ETP "
                 "tp (here dp %d, tp %d); keep one of them 1", o->ep, o->etp, o->pins.dp, o->pins.tp);
        return false;
    }
    return true;
}

/* Context parallelism splits the sequence of a model with attention into
 * two chunks per rank (docs/context.md); MoE layers do not fold over it yet. */
static bool check_cp_pin(const Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    const IrGraph *g = s->g;
    if (p->cp <= 1)
        return true;
    int64_t seq = g->seq_dim >= 0 ? g->dims[g->seq_dim].size : 0;
    bool attn = false, moe = false;
    const IrNode *scan = NULL;
    for (int i = 0; i < g->nfwd; i++) {
        attn |= g->nodes[i].op == IR_OP_ATTENTION;
        moe |= plan_expert_dim(g, &g->nodes[i]) >= 0;
        if (!scan && (g->nodes[i].op == IR_OP_SSD || g->nodes[i].op == IR_OP_CONV1D))
            scan = &g->nodes[i];
    }
    if (scan) {
        ir_error(scan->loc, "--cp %d: context parallelism would split the sequence of %s, which carries "
                 "its state along the sequence (each shard needs the state its predecessor ends with, an "
                 "exchange ptdc does not have); use --cp 1", p->cp, ir_ops[scan->op].name);
        return false;
    }
    if (!attn || seq <= 0) {
        ir_error(IR_NOLOC, "--cp %d: context parallelism splits the sequence of attention, and this "
                 "model has %s", p->cp, attn ? "no sequence dim" : "no attention");
        return false;
    }
    if (moe) {
        ir_error(IR_NOLOC, "--cp %d: context parallelism with mixture-of-experts layers is not "
                 "supported yet; use --cp 1", p->cp);
        return false;
    }
    if (s->c->attention == PLAN_ATTN_MATERIALIZED) {
        ir_error(IR_NOLOC, "--cp %d: context parallelism runs inside a fused attention kernel, and "
                 "--attention materialized asks for the scores in memory; use --attention flash or --cp 1",
                 p->cp);
        return false;
    }
    if (p->cp > PLAN_MAX_CP) {
        ir_error(IR_NOLOC, "--cp %d is more than the %d context-parallel ranks the programs support",
                 p->cp, PLAN_MAX_CP);
        return false;
    }
    if (seq % (2 * p->cp)) {
        ir_error(IR_NOLOC, "--cp %d needs a sequence length divisible by 2 x %d = %d (two chunks per "
                 "rank); the sequence is %lld", p->cp, p->cp, 2 * p->cp, (long long)seq);
        return false;
    }
    return true;
}

/* A format the GPU has no tensor cores for, asked for by name. */
static bool check_precision(const Src *s)
{
    const PassGpu *gpu = &s->c->cl->gpu;
    if (pass_prec_peak(gpu, s->c->prec) > 0)
        return true;
    char have[64];
    ir_error(IR_NOLOC, "--precision %s: the %s has no %s tensor cores%s (it runs %s); use one of those, "
             "or --precision auto for the fastest", plan_precision_name(s->c->prec), gpu->name,
             plan_precision_name(s->c->prec),
             s->c->prec == PLAN_PREC_MXFP8 ? ": MXFP8's block scales need a Blackwell-class GPU" : "",
             pass_prec_names(gpu, have, sizeof have));
    return false;
}

bool src_check_pins(Src *s)
{
    const PassSearchPins *p = &s->o->pins;
    bool inter = p->schedule == PLAN_SCHED_INTERLEAVED || p->v > 1;
    return check_precision(s) && check_stack_pins(s) && check_tp_pin(s) && check_cp_pin(s) && check_pp_pin(s) &&
           check_mesh_pins(s) &&
           check_batch_pins(s) && check_empty_chunks(s) && (!inter || check_interleaved_pins(s)) &&
           check_split_pins(s) && check_moe_pins(s);
}

static void pins_src(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o, Src *s);

bool pass_search_split_pin(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o, int pp, int v,
                           int *layers)
{
    Src s;
    pins_src(c, g, o, &s);
    return pp * v <= PLAN_MAX_STAGES && src_split_pin(&s, pp, v, layers, NULL, 0) > 0;
}

bool pass_search_check_pins(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o)
{
    Src s;
    pins_src(c, g, o, &s);
    return src_check_pins(&s);
}

static void pins_src(const PassCostCtx *c, const IrGraph *g, const PassSearchOpts *o, Src *out)
{
    /* The fields src_check_pins reads, as pass_search sets them. */
    Src s;
    memset(&s, 0, sizeof s);
    s.c = c, s.g = g, s.o = o;
    s.gpus = o->gpus > 0 ? o->gpus : c->cl->ngpus;
    s.gpn = pass_cluster_domain_at(c->cl, s.gpus);
    s.gb = o->global_batch > 0 ? o->global_batch : g->global_batch;
    s.npieces = g->npieces;
    src_layer_run(g, &s);
    *out = s;
}

/* The layers interleaving and --pp-layers cut: one run of repeat pieces, of
 * one repeat or of several back to back (DeepSeek-V3's dense layers, then
 * its MoE ones: Megatron numbers them as one list); rep0 -1 without one. */
void src_layer_run(const IrGraph *g, Src *s)
{
    int nruns = 0;
    s->rep0 = -1;
    for (int p = 0; p < g->npieces; p++) {
        const IrPiece *P = &g->pieces[p];
        if (P->rep < 0)
            continue;
        if (p == 0 || g->pieces[p - 1].rep < 0) {
            nruns++;
            s->rep0 = P->rep, s->rep_first = p, s->rep_count = 0;
        }
        s->rep_count++;
    }
    if (nruns != 1)
        s->rep0 = -1, s->rep_count = 0;
}

void pass_search_pins_none(PassSearchPins *p)
{
    memset(p, 0, sizeof *p);
    p->recompute = p->sp = p->zero = p->schedule = -1;
    p->precision = PLAN_PREC_BF16; /* ptdc's default: bf16 unless asked */
}

bool pass_search_pinned_fully(const PassSearchPins *p)
{
    bool interleaved = p->schedule == PLAN_SCHED_INTERLEAVED || p->v > 1;
    return p->tp > 0 && p->pp > 0 && p->micro_batch > 0 && p->recompute >= 0 &&
           (p->sp >= 0 || p->tp == 1) && p->zero >= 0 && (p->schedule >= 0 || p->v > 1) &&
           (!interleaved || p->v > 1);
}
