/* test_a2a.c: the expert all-to-all overlap's pair of layers
 * (pass_a2a_pair_s, passes/cost/a2a_overlap.c) and its unpaired share of
 * micro-batches (pass_a2a_unpaired) against schedules worked by hand (the
 * comments give each node's end: comp pre_f, dx, dw, mlp_f, pre_b; comm
 * combine_bwd, dispatch_fwd, dispatch_bwd, combine_fwd). */
#include "cost/cost.h"

#include <math.h>
#include <stdio.h>

static int failures;

static void pair(const char *what, PassA2aLayer l, double want, double want_hidden)
{
    double hid, t = pass_a2a_pair_s(&l, &hid);
    bool ok = fabs(t - want) < 1e-12 && fabs(hid - want_hidden) < 1e-12;
    printf("%s %s: pair %g s, %g s of all-to-all hidden (want %g, %g)\n", ok ? "ok  " : "FAIL", what, t, hid,
           want, want_hidden);
    failures += !ok;
}

static void unpaired(const char *what, int pp, int v, int m, int rank, double want)
{
    double u = pass_a2a_unpaired(pp, v, m, rank);
    bool ok = fabs(u - want) < 1e-12;
    printf("%s %s: %g of the micro-batches unpaired (want %g)\n", ok ? "ok  " : "FAIL", what, u, want);
    failures += !ok;
}

int main(void)
{
    /* No all-to-all: the compute stream's 1 + 1 + 1 + 1 + 2. */
    pair("no exchange", (PassA2aLayer){1, 2, 1, 1, 1, 0, 0, 2}, 6, 0);
    /* 0.5 s each: combine_bwd 0-0.5 beside pre_f 0-1; dx 1-2; dispatch_fwd
     * 1-1.5; dw 2-3; dispatch_bwd 2-2.5; mlp_f 3-4; combine_fwd 4-4.5 beside
     * pre_b 4-6: all 2 s hidden, the pair is its compute. */
    pair("hidden under compute", (PassA2aLayer){1, 2, 1, 1, 1, 0.5, 0.5, 2}, 6, 2);
    /* 3 s each, 1 s computes: combine_bwd 0-3; dx 3-4; dispatch_fwd 3-6;
     * dw 4-5; dispatch_bwd 6-9; mlp_f 6-7; combine_fwd 9-12; pre_b 9-10:
     * 12 s, the four all-to-alls back to back; 5 of their 12 s hidden. */
    pair("communication bound", (PassA2aLayer){1, 1, 1, 1, 1, 3, 3, 2}, 12, 5);
    /* A long experts' dx (3 s) holds the dispatch's gradient back:
     * combine_bwd 0-1 beside pre_f 0-1; dx 1-4; dispatch_fwd 1-2;
     * dispatch_bwd 4-5 (it needs dx); mlp_f 4-4.5; combine_fwd 5-6; pre_b
     * 5-5.5: 6 s, 3 of the 4 s hidden. */
    pair("dispatch backward after dx", (PassA2aLayer){1, 0.5, 0.5, 3, 0, 1, 1, 2}, 6, 3);
    /* A recomputed dispatch in backward (3 backward all-to-alls of 1 s):
     * the first two 0-2; dx 2-3; dispatch_fwd 2-3; dw 3-4; dispatch_bwd
     * 3-4; mlp_f 4-5; combine_fwd 5-6 beside pre_b 5-6: 6 s, 4 of 5 hidden. */
    pair("recomputed dispatch", (PassA2aLayer){1, 1, 1, 1, 1, 1, 1, 3}, 6, 4);
    /* Without a pipeline the first forward and the last backward run alone. */
    unpaired("pp 1, 8 micro-batches", 1, 1, 8, 0, 1.0 / 8);
    /* Interleaved (schedules.py): pp 4, v 12, 64 micro-batches; rank 0
     * warms up (4 - 0 - 1) x 2 + 11 x 4 + 1 = 51 of 768, rank 3 45. */
    unpaired("pp 4 v 12, rank 0", 4, 12, 64, 0, 51.0 / 768);
    unpaired("pp 4 v 12, rank 3", 4, 12, 64, 3, 45.0 / 768);
    /* All in warm-up; and a pipeline without interleaving, which Megatron
     * refuses to overlap. */
    unpaired("pp 8 v 2, 4 micro-batches", 8, 2, 4, 0, 1);
    unpaired("pp 2 v 1", 2, 1, 16, 0, 1);
    return failures ? 1 : 0;
}
