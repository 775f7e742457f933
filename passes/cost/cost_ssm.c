/* cost_ssm.c: the kernels Megatron-Core runs for one Mamba-2 mixer's scan
 * (stack key ssm_fused; docs/hybrid.md, "Cost and memory"), one row each,
 * with the bytes each moves through HBM and the FLOPs of its tensor-core
 * dots, so cost_ops.c prices every row as a roofline and the test
 * (tests/cost/test_ssd_cost.c) checks each row against a hand count.
 *
 * What runs (Megatron-LM megatron/core/ssm/mamba_mixer.py _ssm_training,
 * use_mamba_mem_eff_path, the training default): in_proj's [s, b, d] output
 * made [b, s, d] contiguous, then mamba_ssm's mamba_split_conv1d_scan_combined
 * (ops/triton/ssd_combined.py MambaSplitConv1dScanCombinedFn) without
 * rmsnorm_weight and outproj_weight: causal_conv1d_fwd with the silu
 * activation over xBC, then _mamba_chunk_scan_combined_fwd with z (the gate
 * silu(z) * y inside _chunk_scan_fwd, which also writes the ungated y for
 * backward), dt_softplus and dt_bias inside _chunk_cumsum_fwd, and the
 * inter-chunk states in the parameters' type (state_dtype = params_dtype);
 * then y made [s, b, d] contiguous again and RMSNormGated (z None) over
 * groups, priced by its own rmsnorm node. Backward recomputes the
 * convolution, the chunk cumsum, C B^T, the chunk states and their passing
 * (in fp32), then _mamba_chunk_scan_combined_bwd's kernels and
 * causal_conv1d_bwd; dzxBCdt goes back to in_proj's layout with a copy (TE's
 * Linear reshapes the permuted gradient). The [s, b] <-> [b, s] copies are
 * no-ops at one sequence a micro-batch (a size-1 dim).
 *
 * Conventions: compulsory traffic, each tensor once per kernel that reads or
 * writes it; B, C and C B^T, which every head of a group reads, come from L2
 * after the group's first head (a chunk's group data is 64-96 KiB, the
 * whole micro-batch's C B^T 4 MiB a sequence). fp32: dt and dA_cumsum
 * (_chunk_cumsum_fwd), the chunk states before passing, C B^T, dC, dB before
 * their bf16 sum, ddA and ddt. Dots: bf16 operands on tensor cores (Triton's
 * tl.dot), a causal product counting the triangle (Q^2 / 2 of Q^2). */
#include "cost/cost.h"

#include <math.h>
#include <string.h>

static PassSsdKernel *row(PassSsdKernel *k, int *n, const char *name, bool bwd, double bytes)
{
    if (*n >= PASS_SSD_MAX_KERNELS)
        ir_die("pass_ssd_kernels: more than %d rows", PASS_SSD_MAX_KERNELS);
    PassSsdKernel *r = &k[(*n)++];
    memset(r, 0, sizeof *r);
    r->name = name;
    r->bwd = bwd;
    r->bytes = bytes;
    return r;
}

/* One tl.dot of r: batch products M x N over K, frac of them computed
 * (1/2 for a causal triangle). */
static void dot(PassSsdKernel *r, double M, double N, double K, double batch, double frac)
{
    int i = r->ndots++;
    r->dot[i][0] = M, r->dot[i][1] = N, r->dot[i][2] = K, r->dot[i][3] = batch * frac;
    r->flops += 2 * M * N * K * batch * frac;
}

int pass_ssd_kernels(const PassSsdShape *s, PassSsdKernel *k)
{
    double e = s->e, T = s->batch * s->seq, Q = s->seq < s->chunk ? s->seq : s->chunk;
    double c = ceil(s->seq / Q), bc = s->batch * c;
    double X = T * s->heads * s->hdim;                      /* x, z, y, dy: elements */
    double BN = T * s->groups * s->state;                   /* B or C */
    double Hd = T * s->heads;                               /* dt, dA_cumsum, ddt */
    double S = bc * s->heads * s->hdim * s->state;          /* one state a chunk and head */
    double CB = bc * s->groups * Q * Q;                     /* C B^T, fp32 */
    double hb = bc * s->heads, gb = bc * s->groups;         /* GEMM batches */
    double P = s->hdim, N = s->state;
    bool tr = s->batch > 1;
    int n = 0;
    PassSsdKernel *r;
    /* forward */
    if (tr)
        row(k, &n, "zxBCdt [s,b]->[b,s] copy", false, 2 * e * (2 * X + 2 * BN + Hd));
    row(k, &n, "_chunk_cumsum_fwd", false, e * Hd + 2 * 4 * Hd);
    r = row(k, &n, "_chunk_state_fwd", false, e * X + e * BN + 2 * 4 * Hd + 4 * S);
    dot(r, P, N, Q, hb, 1); /* x^T (B decayed) */
    row(k, &n, "_state_passing_fwd", false, 4 * S + e * S);
    r = row(k, &n, "_bmm_chunk_fwd", false, 2 * e * BN + 4 * CB);
    dot(r, Q, Q, N, gb, 1); /* C B^T */
    r = row(k, &n, "_chunk_scan_fwd", false, 4 * CB + 2 * e * X + 2 * 4 * Hd + e * BN + e * S + 2 * e * X);
    dot(r, Q, P, N, hb, 1);   /* C S_in */
    dot(r, Q, P, Q, hb, 0.5); /* (C B^T decayed, causal) x */
    if (tr)
        row(k, &n, "y [b,s]->[s,b] copy", false, 2 * e * X);
    /* backward */
    if (tr)
        row(k, &n, "dzxBCdt [b,s]->[s,b] copy", true, 2 * e * (2 * X + 2 * BN + Hd));
    row(k, &n, "_chunk_cumsum_fwd (again)", true, e * Hd + 2 * 4 * Hd);
    r = row(k, &n, "_bmm_chunk_fwd (again)", true, 2 * e * BN + 4 * CB);
    dot(r, Q, Q, N, gb, 1);
    r = row(k, &n, "_chunk_state_fwd (again)", true, e * X + e * BN + 2 * 4 * Hd + 4 * S);
    dot(r, P, N, Q, hb, 1);
    row(k, &n, "_state_passing_fwd (again, fp32)", true, 4 * S + 4 * S);
    row(k, &n, "_chunk_scan_bwd_dz", true, 4 * e * X + 2 * e * X); /* z, y, dy, x in; dz, dy_x out */
    r = row(k, &n, "_chunk_scan_bwd_dstates", true, e * BN + e * X + 4 * Hd + 4 * S);
    dot(r, P, N, Q, hb, 1); /* dy^T C */
    row(k, &n, "_state_passing_bwd", true, 2 * 4 * S + 2 * e * S);
    r = row(k, &n, "_chunk_scan_chunk_state_bwd_dx", true,
            e * X + 2 * 4 * Hd + e * BN + 4 * CB + e * X + e * S + e * X + 4 * Hd);
    dot(r, Q, P, N, hb, 1);   /* B dstates */
    dot(r, Q, P, Q, hb, 0.5); /* (C B^T)^T dy, causal */
    r = row(k, &n, "_chunk_state_bwd_db", true, e * X + e * S + e * BN + 2 * 4 * Hd + 4 * BN + 4 * Hd);
    dot(r, Q, N, P, hb, 1); /* x dstates^T */
    row(k, &n, "dB.sum over splits", true, 2 * 4 * BN);
    row(k, &n, "ddA_next cumsum", true, 2 * 4 * Hd);
    r = row(k, &n, "_chunk_scan_bwd_dC", true, e * S + e * X + e * BN + 4 * Hd + 4 * BN + 4 * Hd);
    dot(r, Q, N, P, hb, 1); /* dy S_in^T */
    row(k, &n, "dC.sum over splits", true, 2 * 4 * BN);
    r = row(k, &n, "_chunk_scan_bwd_dcb", true, 2 * e * X + 2 * 4 * Hd + 4 * CB);
    dot(r, Q, Q, P, hb, 0.5); /* dy x^T, causal */
    r = row(k, &n, "_bmm_chunk_bwd (dB)", true, e * BN + 4 * CB + 4 * BN + e * BN);
    dot(r, Q, N, Q, gb, 1);
    r = row(k, &n, "_bmm_chunk_bwd (dC)", true, e * BN + 4 * CB + 4 * BN + e * BN);
    dot(r, Q, N, Q, gb, 1);
    r = row(k, &n, "_chunk_scan_bwd_ddAcs_stable", true, 2 * e * X + 2 * 4 * Hd + 4 * CB + 4 * Hd);
    dot(r, Q, Q, P, hb, 0.5); /* dy x^T again, causal */
    /* ddA_prev = flip, cumsum, flip (two fp32 passes each); ddA += ddA_next
     * + ddA_prev (an add and an add_, three passes each): six kernels. */
    r = row(k, &n, "ddA flip/cumsum/flip/add (torch)", true, 12 * 4 * Hd);
    r->kernels = 6;
    row(k, &n, "_chunk_cumsum_bwd", true, 2 * 4 * Hd + 2 * e * Hd);
    for (int i = 0; i < n; i++)
        if (k[i].kernels == 0)
            k[i].kernels = 1;
    return n;
}

/* The single forward reader of t, or -1. */
static int only_reader(const IrGraph *g, int t)
{
    int r[2];
    return ir_consumers(g, t, r, 2) == 1 ? r[0] : -1;
}

static bool is_op(const IrGraph *g, int node, IrOp op) { return node >= 0 && g->nodes[node].op == op; }

bool pass_ssm_fused_away(const IrGraph *g, const IrNode *n)
{
    int out = n->out[0], rd;
    switch (n->op) {
    case IR_OP_SILU: /* causal_conv1d's activation */
        return is_op(g, g->tensors[n->in[0]].producer, IR_OP_CONV1D) && is_op(g, only_reader(g, out), IR_OP_SSD);
    case IR_OP_SOFTPLUS: /* _chunk_cumsum's dt_softplus */
        rd = only_reader(g, out);
        return is_op(g, rd, IR_OP_SSD) && g->nodes[rd].in[1] == out;
    case IR_OP_ADD: /* dt + dt_bias, also in _chunk_cumsum */
        if (g->tensors[n->in[0]].role != IR_PARAM && g->tensors[n->in[1]].role != IR_PARAM)
            return false;
        rd = only_reader(g, out);
        return is_op(g, rd, IR_OP_SOFTPLUS) && pass_ssm_fused_away(g, &g->nodes[rd]);
    case IR_OP_SWIGLU: /* silu(z) * y inside _chunk_scan_fwd, _chunk_scan_bwd_dz backward */
        return is_op(g, g->tensors[n->in[1]].producer, IR_OP_SSD);
    default:
        return false;
    }
}
