/* mem_saved.c: activations a forward node keeps for its backward, read off
 * ops.def's saves masks and the tensors' dtypes and local shapes, so the
 * memory model follows the IR rather than a transformer formula.
 *
 * The kernel being modelled changes what is kept: a materialised attention
 * keeps Q, K, V and the S x S probabilities (bf16; an eager fp32 softmax also
 * keeps its fp32 output, as Transformer Engine's unfused path does with
 * sinks: pass_attn_te_sinks) instead of O and the row LSE; unfused norms also keep
 * an fp32 copy of the input and the normalised value; an fp32 loss keeps fp32
 * softmax instead of bf16 logits; Mamba-2's fused kernels (ssm_fused) keep
 * in_proj's output and the ungated y, not the convolved inputs. Recomputation
 * decides which nodes keep anything at all. */
#include "cost/cost.h"

#include <string.h>

static bool materialized(const PassCostCtx *c)
{
    if (c->st.attn_kernel == PASS_KERNEL_AUTO)
        return c->attention == PLAN_ATTN_MATERIALIZED;
    return c->st.attn_kernel == PASS_KERNEL_FUSED_SOFTMAX || c->st.attn_kernel == PASS_KERNEL_EAGER;
}

bool pass_attn_te_sinks(const PassCostCtx *c, const IrNode *n)
{
    /* ops.def: attention's optional last input is the sinks; its backward
     * takes them as its seventh. */
    int sinks = n->op == IR_OP_ATTENTION ? 4 : n->op == IR_OP_ATTENTION_BWD ? 7 : 0;
    return sinks > 0 && n->nin == sinks && c->st.attn_kernel != PASS_KERNEL_AUTO && materialized(c);
}

bool pass_recomputed(const PassCostCtx *c, const IrGraph *g, const IrNode *n, PlanRecompute r)
{
    return plan_recomputed(g, n, r, c && materialized(c));
}

/* Was t made outside n's recomputed region (so the region keeps it)? */
static bool from_outside(const IrGraph *g, const IrNode *n, int t, PlanRecompute r)
{
    int p = g->tensors[t].producer;
    if (p < 0)
        return true;
    const IrNode *pn = &g->nodes[p];
    if (pn->piece != n->piece)
        return true;
    if (plan_recompute_modules(r))
        return !plan_recomputed(g, pn, r, false);
    return r == PLAN_RECOMPUTE_FFN && !plan_is_mlp(pn);
}

/* Megatron's modules discard their outputs (CheckpointWithoutOutput): a
 * reader outside the rerun region does not keep what the region made, the
 * rerun makes it again for that reader's backward. */
static bool discarded(const IrGraph *g, const IrNode *n, int t, PlanRecompute r)
{
    int p = g->tensors[t].producer;
    return plan_recompute_modules(r) && p >= 0 && g->nodes[p].piece == n->piece &&
           plan_recomputed(g, &g->nodes[p], r, false);
}

/* Is n a low-precision GEMM, which keeps its input for the weight gradient
 * as the cast copy the forward made (Transformer Engine saves the FP8
 * columnwise data, not the bf16 input) rather than the bf16 tensor? */
static bool lp_input(const PassCostCtx *c, const IrGraph *g, const IrNode *n)
{
    return n->op == IR_OP_MATMUL && pass_prec_of(c, g, n) != PLAN_PREC_BF16 &&
           g->tensors[n->in[0]].role != IR_PARAM;
}

/* Is n the first low-precision GEMM reading its input (siblings reading one
 * input, q k v or gate and up, share one cast: one fused Linear in
 * Megatron)? */
static bool first_lp_reader(const PassCostCtx *c, const IrGraph *g, const IrNode *n)
{
    int t = n->in[0];
    const IrTensor *x = &g->tensors[t];
    int from = x->producer >= 0 ? x->producer : g->pieces[n->piece].first;
    for (int j = from; j < n->id; j++)
        if (g->nodes[j].nin > 0 && g->nodes[j].in[0] == t && lp_input(c, g, &g->nodes[j]))
            return false;
    return true;
}

/* Does forward node n keep tensor t (its input `in` or output `out` slot)? */
static bool keeps(const PassCostCtx *c, const IrGraph *g, const IrNode *n, int in, int out,
                  PlanRecompute r)
{
    int t = in >= 0 ? n->in[in] : n->out[out];
    if (g->tensors[t].role == IR_PARAM)
        return false;
    if (pass_recomputed(NULL, g, n, r) /* its region reruns */)
        return in >= 0 && from_outside(g, n, t, r);
    if (in >= 0 && discarded(g, n, t, r))
        return false;
    if (n->op == IR_OP_ATTENTION && materialized(c))
        return in >= 0 && in <= 2; /* Q, K, V; the probabilities are counted as extra */
    if (in == 0 && lp_input(c, g, n))
        return false; /* its cast copy instead (pass_saved_list) */
    if (c && c->st.ssm_fused) {
        /* Megatron's mamba_split_conv1d_scan_combined keeps in_proj's
         * output (zxBCdt) and the ungated y, RMSNormGated its input: in the
         * graph conv1d's inputs (x, B, C before the convolution), the gate's
         * z and y, and of the scan's inputs only dt (the size of zxBCdt's
         * dt); the silu, softplus and bias add inside its kernels keep
         * nothing (their inputs are recomputed from zxBCdt). */
        if (n->op == IR_OP_SSD)
            return in == 1;
        if (n->op != IR_OP_SWIGLU && pass_ssm_fused_away(g, n))
            return false;
    }
    unsigned m = ir_ops[n->op].saves;
    return in >= 0 ? (m & IR_SAVE_IN(in)) != 0 : (m & IR_SAVE_OUT(out)) != 0;
}

static bool keeps_tensor(const PassCostCtx *c, const IrGraph *g, const IrNode *n, int t,
                         PlanRecompute r)
{
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] == t && keeps(c, g, n, i, -1, r))
            return true;
    for (int i = 0; i < n->nout; i++)
        if (n->out[i] == t && keeps(c, g, n, -1, i, r))
            return true;
    return false;
}

/* Is n the first node in forward order to keep t? Scans from t's producer
 * (which may keep its own output: attention's O) or the start of the piece
 * that declared an input, to n. */
static bool first_keeper(const PassCostCtx *c, const IrGraph *g, const IrNode *n, int t,
                         PlanRecompute r)
{
    const IrTensor *x = &g->tensors[t];
    int from = x->producer >= 0 ? x->producer : x->piece >= 0 ? g->pieces[x->piece].first : 0;
    for (int j = from; j < n->id; j++)
        if (keeps_tensor(c, g, &g->nodes[j], t, r))
            return false;
    return true;
}

int pass_saved_slots(const PassCostCtx *c, const IrGraph *g, const IrNode *n, PlanRecompute r, int *slots)
{
    int k = 0;
    for (int slot = 0; slot < n->nin + n->nout; slot++) {
        bool isin = slot < n->nin;
        int i = isin ? slot : slot - n->nin;
        int t = isin ? n->in[i] : n->out[i];
        if (!keeps(c, g, n, isin ? i : -1, isin ? -1 : i, r))
            continue;
        bool dup = false; /* the same tensor in two slots of n */
        for (int e = 0; e < slot; e++) {
            int te = e < n->nin ? n->in[e] : n->out[e - n->nin];
            dup |= te == t && keeps(c, g, n, e < n->nin ? e : -1, e < n->nin ? -1 : e - n->nin, r);
        }
        if (dup || !first_keeper(c, g, n, t, r))
            continue;
        slots[k++] = slot;
    }
    return k;
}

int pass_saved_list(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                    const PlanStrategy *s, const int64_t *dim_size, PlanRecompute r,
                    PassSaved *items, int max)
{
    PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
    plan_shard_io(g, n, s, in, out);
    int slots[IR_MAX_IN + IR_MAX_OUT];
    int ns = pass_saved_slots(c, g, n, r, slots);
    return pass_saved_list_at(c, g, n, m, s, in, out, dim_size, r, slots, ns, items, max);
}

int pass_saved_list_at(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                       const PlanStrategy *s, const PlanSharding *in, const PlanSharding *out,
                       const int64_t *dim_size, PlanRecompute r, const int *slots, int nslots,
                       PassSaved *items, int max)
{
    int k = 0;
#define ITEM(t_, slot_, bytes_)                                                               \
    do {                                                                                      \
        if (k < max)                                                                          \
            items[k] = (PassSaved){t_, slot_, bytes_};                                        \
        k++;                                                                                  \
    } while (0)
    for (int j = 0; j < nslots; j++) {
        int slot = slots[j];
        bool isin = slot < n->nin;
        int i = isin ? slot : slot - n->nin;
        int t = isin ? n->in[i] : n->out[i];
        double e = (double)plan_local_numel(g, t, m, isin ? &in[i] : &out[i], dim_size);
        int eb = pass_elem_bytes(c, g->tensors[t].dtype);
        if (n->op == IR_OP_CROSS_ENTROPY && isin && i == 0 && c->st.loss_fp32)
            eb = 4; /* the fp32 softmax replaces the bf16 logits */
        ITEM(t, slot, e * eb);
    }
    if (pass_recomputed(NULL, g, n, r) /* its region reruns */)
        return k < max ? k : max;
    /* A low-precision GEMM's input, cast: the format's bytes, in the layout
     * the GEMM reads it (pass_kept_bytes keeps it as the tensor is kept). */
    if (lp_input(c, g, n) && first_lp_reader(c, g, n))
        ITEM(n->in[0], 0, (double)plan_local_numel(g, n->in[0], m, &in[0], dim_size) *
                              pass_prec_elem_bytes(pass_prec_of(c, g, n)));
    /* Kept values that are not IR tensors. */
    if (n->op == IR_OP_ATTENTION && materialized(c) && r != PLAN_RECOMPUTE_SELECTIVE) {
        int64_t local[256];
        plan_local_sizes(g, n, m, s, dim_size, local);
        const IrTensor *q = &g->tensors[n->in[0]];
        double ss = (double)local[q->dim[0]] * (double)local[q->dim[2]] *
                    (double)local[q->dim[1]] * (double)local[q->dim[1]];
        /* bf16 probabilities (an eager softmax keeps its fp32 output, then the
         * bf16 copy PV reads); with dropout also its mask and output. With
         * sinks (pass_attn_te_sinks): the fp32 softmax output and the bf16
         * probabilities, each with the sink column; p = 0 keeps no mask. */
        bool eager = c->st.attn_kernel == PASS_KERNEL_EAGER;
        double sq = (double)local[q->dim[1]];
        double kept = pass_attn_te_sinks(c, n)
                          ? 6 * ss * (sq + 1) / sq
                          : ss * ((eager ? 4 : 2) + (c->st.attn_dropout ? 3 : eager ? 2 : 0));
        ITEM(-1, -1, kept);
    }
    if ((n->op == IR_OP_RMSNORM || n->op == IR_OP_LAYERNORM) && c->st.norm_unfused)
        ITEM(-1, -1, 6 * (double)plan_local_numel(g, n->in[0], m, &in[0], dim_size));
    if (n->op == IR_OP_MOE && c->st.moe_saves_rows) {
        /* Megatron's grouped MLP: the permuted rows (fc1's input), fc1's
         * (gate and) up output (the activation's input) and the activation
         * (fc2's input), for the busiest rank's rows. */
        int64_t local[256];
        plan_local_sizes(g, n, m, s, dim_size, local);
        double D, F, R = pass_moe_rows(c, g, n, m, s, local, &D, &F);
        /* Low-precision experts keep the two GEMMs' inputs as their cast
         * copies (as lp_input above), fc1's output in bf16. */
        PlanPrecision p = pass_prec_of(c, g, n);
        double lp = p == PLAN_PREC_BF16 ? pass_elem_bytes(c, IR_BF16) : pass_prec_elem_bytes(p);
        /* moe_act discards the activation (fc2's input), rebuilt in backward. */
        double act = plan_recomputes_part(g, n, r) ? 0 : F * lp;
        double fc1 = ir_moe_slots(n).w_gate >= 0 ? 2 : 1; /* gate and up, or up alone (relu2) */
        /* Clamps run as eager ops (moe_clamp_unfused, cost_ops.c): the
         * activation keeps their concatenation, the clamps fc1's output
         * itself; moe_act's checkpoint keeps neither (it runs them without
         * grad and again in backward). TE's op-fuser grouped MLP
         * (moe_fused_mlp) clamps inside its activation: nothing more. */
        int fn = n->attr.moe_act;
        if (c->st.moe_clamp_unfused && !c->st.moe_fused_mlp && fn >= 0 && fn < IR_NMOE_ACTS &&
            ir_moe_acts[fn].clamped && !plan_recomputes_part(g, n, r))
            fc1 *= 2;
        ITEM(-1, -1, R * (D * lp + act + fc1 * F * pass_elem_bytes(c, IR_BF16)));
    }
    if (n->op == IR_OP_SWIGLU && c->st.swiglu_unfused) /* silu(gate), for the product's backward */
        ITEM(-1, -1, (double)plan_local_numel(g, n->out[0], m, &out[0], dim_size) *
                         pass_elem_bytes(c, g->tensors[n->out[0]].dtype));
#undef ITEM
    return k < max ? k : max;
}

double pass_saved_elem_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, int slot)
{
    if (slot == 0 && lp_input(c, g, n))
        return pass_prec_elem_bytes(pass_prec_of(c, g, n));
    return pass_elem_bytes(c, g->tensors[n->in[slot]].dtype);
}

double pass_saved_bytes(const PassCostCtx *c, const IrGraph *g, const IrNode *n, const PlanMesh *m,
                        const PlanStrategy *s, const int64_t *dim_size, PlanRecompute r)
{
    PassSaved it[IR_MAX_IN + IR_MAX_OUT + 2];
    int k = pass_saved_list(c, g, n, m, s, dim_size, r, it, IR_MAX_IN + IR_MAX_OUT + 2);
    double b = 0;
    for (int i = 0; i < k; i++)
        b += it[i].bytes;
    return b;
}

int pass_readers_end(const IrGraph *g, int t)
{
    /* A layer's output feeds the next layer; past that the scans would be the
     * whole graph for every statistic only backward reads (rstd, lse), in the
     * search's loop. */
    int p = g->nodes[g->tensors[t].producer].piece;
    int end = p + 1 < g->npieces ? g->pieces[p + 1].first + g->pieces[p + 1].count : g->nfwd;
    return end < g->nfwd ? end : g->nfwd;
}

PlanSharding pass_kept_sharding(const IrGraph *g, const PlanMesh *m, const PlanStrategy *strat,
                                const int64_t *dim_size, int t)
{
    int pid = g->tensors[t].producer;
    const IrNode *pn = &g->nodes[pid];
    PlanSharding out[IR_MAX_OUT], from = {PLAN_NO_DIMS, 0, 0};
    plan_shard_io(g, pn, &strat[pid], NULL, out);
    for (int j = 0; j < pn->nout; j++)
        if (pn->out[j] == t)
            from = out[j];
    int last = pass_readers_end(g, t);
    for (int i = pid + 1; i < last; i++) {
        const IrNode *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] == t) {
                PlanSharding in[IR_MAX_IN];
                plan_shard_io(g, n, &strat[i], in, NULL);
                return plan_reshard_reduced(g, t, m, from, &in[k], dim_size);
            }
    }
    return from;
}

bool pass_redone(const PassCostCtx *c, PlanCollKind k)
{
    return !plan_coll_reduces(k) && (k == PLAN_COLL_ALLGATHER || !c->st.keeps_exchanged);
}

/* Does n's backward read its input `slot` (n keeps it, or its cast copy)? */
static bool reads_back(const PassCostCtx *c, const IrGraph *g, const IrNode *n, int slot, PlanRecompute r)
{
    return keeps(c, g, n, slot, -1, r) ||
           (slot == 0 && lp_input(c, g, n) && !pass_recomputed(NULL, g, n, r));
}

/* Seconds n's backward spends bringing its kept inputs to the layouts it
 * reads them in. A program keeps a tensor in one layout, its producer's
 * reduced (pass_kept_sharding, cg_analyse.c's canonical form), and each
 * layout a backward reads it in is made again from that copy, once (cg_get):
 * the forward's steps after its reductions, an all-gather of a kept shard or
 * an all-to-all of the same bytes (context parallelism's heads split, the
 * output projection reading attention's output sequence split). Counted at
 * the first reader in forward order that keeps it in that layout, which need
 * not be the node whose bytes count it (attention keeps its own output). A
 * recomputed reader whose producer shares its piece gets it from the rerun,
 * which pass_predict prices as recomputation. */
static double redo_s(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m, const PlanStrategy *strat,
                     const int64_t *dim_size, const IrNode *n, PlanRecompute r, const PlanSharding *in)
{
    double s = 0;
    for (int i = 0; i < n->nin; i++) {
        int t = n->in[i], p = g->tensors[t].producer;
        if (p < 0 || p >= g->nfwd || !reads_back(c, g, n, i, r))
            continue;
        if (pass_recomputed(NULL, g, n, r) && g->nodes[p].piece == n->piece)
            continue;
        PlanSharding keep = pass_kept_sharding(g, m, strat, dim_size, t);
        if (plan_sharding_eq(&keep, &in[i]))
            continue;
        bool done = false; /* an earlier slot or reader made this layout already */
        for (int e = 0; e < i && !done; e++)
            done = n->in[e] == t && plan_sharding_eq(&in[e], &in[i]) && reads_back(c, g, n, e, r);
        for (int j = p + 1; j < n->id && !done; j++) {
            const IrNode *o = &g->nodes[j];
            PlanSharding oi[IR_MAX_IN];
            plan_shard_io(g, o, &strat[j], oi, NULL);
            for (int e = 0; e < o->nin && !done; e++)
                done = o->in[e] == t && plan_sharding_eq(&oi[e], &in[i]) && reads_back(c, g, o, e, r) &&
                       !(pass_recomputed(NULL, g, o, r) && g->nodes[p].piece == o->piece);
        }
        if (done)
            continue;
        PlanColl steps[8];
        int ns = plan_reshard(g, t, m, &keep, &in[i], dim_size, steps, 8);
        int eb = pass_elem_bytes(c, g->tensors[t].dtype);
        for (int j = 0; j < ns; j++)
            s += pass_redone(c, steps[j].kind) ? pass_cost_coll(c, m, &steps[j], eb) : 0;
    }
    return s;
}

/* What keeping a saved item of `bytes` (eu elements as n reads it) in its
 * kept layout (ek elements) adds: an all-gathered input is kept smaller, a
 * sliced one whole (lower_bound: never counted larger). */
static double kept_adjust(double bytes, double eu, double ek, bool lower_bound)
{
    if (eu <= 0 || ek == eu || (lower_bound && ek > eu))
        return 0;
    return bytes * ek / eu - bytes;
}

double pass_kept_bytes(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m,
                       const PlanStrategy *strat, const int64_t *dim_size, const IrNode *n,
                       PlanRecompute r, bool lower_bound, double *regather_s)
{
    PassSaved it[IR_MAX_IN + IR_MAX_OUT + 2];
    int k = pass_saved_list(c, g, n, m, &strat[n->id], dim_size, r, it, IR_MAX_IN + IR_MAX_OUT + 2);
    PlanSharding in[IR_MAX_IN], out[IR_MAX_OUT];
    plan_shard_io(g, n, &strat[n->id], in, out);
    double b = 0;
    if (regather_s)
        *regather_s = redo_s(c, g, m, strat, dim_size, n, r, in);
    for (int i = 0; i < k; i++) {
        b += it[i].bytes;
        int t = it[i].tensor;
        if (t < 0 || g->tensors[t].producer < 0)
            continue;
        bool isin = it[i].slot < n->nin;
        const PlanSharding *used = isin ? &in[it[i].slot] : &out[it[i].slot - n->nin];
        PlanSharding keep = pass_kept_sharding(g, m, strat, dim_size, t);
        double e_used = (double)plan_local_numel(g, t, m, used, dim_size);
        double e_keep = (double)plan_local_numel(g, t, m, &keep, dim_size);
        b += kept_adjust(it[i].bytes, e_used, e_keep, lower_bound);
    }
    return b;
}

void pass_kept_bytes_each(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m,
                          const PlanStrategy *strat, const int64_t *dim_size, const IrNode *n,
                          const bool *on, double *out)
{
    enum { NS = IR_MAX_IN + IR_MAX_OUT };
    int slots[PLAN_RECOMPUTE_COUNT * NS], nslots[PLAN_RECOMPUTE_COUNT];
    for (int r = 0; r < PLAN_RECOMPUTE_COUNT; r++)
        nslots[r] = on[r] ? pass_saved_slots(c, g, n, (PlanRecompute)r, &slots[r * NS]) : 0;
    pass_kept_bytes_each_at(c, g, m, strat, dim_size, n, on, slots, nslots, out);
}

void pass_kept_bytes_each_at(const PassCostCtx *c, const IrGraph *g, const PlanMesh *m,
                             const PlanStrategy *strat, const int64_t *dim_size, const IrNode *n,
                             const bool *on, const int *slots, const int *nslots, double *out)
{
    enum { MAXIT = IR_MAX_IN + IR_MAX_OUT + 2 };
    PlanSharding in[IR_MAX_IN], outs[IR_MAX_OUT];
    plan_shard_io(g, n, &strat[n->id], in, outs);
    /* per slot: its tensor (-2: not yet) and its elements as read and as kept */
    int seen[IR_MAX_IN + IR_MAX_OUT];
    double used_e[IR_MAX_IN + IR_MAX_OUT], keep_e[IR_MAX_IN + IR_MAX_OUT];
    for (int i = 0; i < IR_MAX_IN + IR_MAX_OUT; i++)
        seen[i] = -2;
    for (int r = 0; r < PLAN_RECOMPUTE_COUNT; r++) {
        out[r] = 0;
        if (!on[r])
            continue;
        PassSaved it[MAXIT];
        int k = pass_saved_list_at(c, g, n, m, &strat[n->id], in, outs, dim_size, r,
                                   &slots[r * (IR_MAX_IN + IR_MAX_OUT)], nslots[r], it, MAXIT);
        double b = 0;
        for (int i = 0; i < k; i++) { /* pass_kept_bytes' sum, in its order */
            b += it[i].bytes;
            int t = it[i].tensor, sl = it[i].slot;
            if (t < 0 || g->tensors[t].producer < 0)
                continue;
            bool slot = sl >= 0 && sl < n->nin + n->nout;
            if (!slot || seen[sl] != t) {
                const PlanSharding *used = sl < n->nin ? &in[sl] : &outs[sl - n->nin];
                PlanSharding keep = pass_kept_sharding(g, m, strat, dim_size, t);
                double eu = (double)plan_local_numel(g, t, m, used, dim_size);
                double ek = (double)plan_local_numel(g, t, m, &keep, dim_size);
                if (!slot) {
                    b += kept_adjust(it[i].bytes, eu, ek, true);
                    continue;
                }
                seen[sl] = t, used_e[sl] = eu, keep_e[sl] = ek;
            }
            b += kept_adjust(it[i].bytes, used_e[sl], keep_e[sl], true);
        }
        out[r] = b;
    }
}
