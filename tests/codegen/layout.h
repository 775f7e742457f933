/* layout.h: a TEST-ONLY plan builder. It turns a layout (dp, tp, sp, pp, v,
 * micro-batches, ZeRO, recomputation) into a complete Plan with
 * Megatron-style strategies chosen by dim name, so codegen can be tested on
 * pinned layouts independently of the search (issues 4 and 5). */
#ifndef PTDC_TEST_LAYOUT_H
#define PTDC_TEST_LAYOUT_H

#include "plan.h"

typedef struct Layout {
    int dp, tp, pp, v, micro, zero;
    int cp;       /* context parallelism: mesh axis 1 splits the sequence of every node */
    bool ring;    /* "ring": attention passes k, v round the cp ranks (else gathers them) */
    bool zb;      /* "zb": the ZB-H1 schedule (backward split into B and W; v 1) */
    bool a2a;     /* "a2a": attention splits its heads over cp, all-to-all (tp 1 only) */
    bool sp;
    bool chunk;   /* "chunk": the plan's tp_overlap (sequence parallelism's gathers and
                     reduce-scatters chunked with their GEMMs, codegen/cg_tpchunk.c) */
    int wslot_pct;  /* "wsN": the plan's moe_wslot N / 100 (ZB-H1's MoE W slots: N% of the expected
                       rows; below 100 forces micro-batches to overflow into B); 0: the worst case */
    PlanRecompute recompute;
    int experts;  /* LAYOUT_EXPERTS_* below: how moe nodes split their experts */
    int ep_fold;  /* "epN" (N > 1): EP of N consecutive dp ranks, Megatron-Core's parallel
                     folding below DP (docs/moe.md): the mesh dp/N x N, every node splitting
                     the batch over both axes (nested), moe exchanging over the inner N;
                     with tp, N = dp_inner x tp (ETP 1): the mesh dp/(N/tp) x N/tp x tp,
                     moe exchanging over the last two (expert-DP dp/(N/tp)) */
    int nsplit, split[64]; /* "c2_1_3_1": pieces of each chunk in model order (0: even) */
    int nlayers, layers[64]; /* "l0_3_2_0": layers of each chunk, the planner's --pp-layers
                                (search-... layouts only; 0 at an end: the embedding or
                                the head alone) */
} Layout;

/* The experts of every moe node (docs/moe.md): by default split like any
 * node (the experts' width d_ff over tp: expert tensor parallelism). */
enum {
    LAYOUT_EXPERTS_TP,   /* default */
    LAYOUT_EXPERTS_EP,   /* "ep": exchange split with the batch over dp (EP = dp) */
    LAYOUT_EXPERTS_EPF,  /* "epf": exchange split with the sequence over tp (EP = tp, folded) */
    LAYOUT_EXPERTS_GATHER, /* "ex": the expert dim over tp, tokens gathered (allgather dispatcher) */
    LAYOUT_EXPERTS_EPX,  /* "epx": exchange over dp x tp at once, the batch over dp and the
                            sequence over tp, the experts nested dp outer (EP = dp x tp,
                            ETP 1: Megatron-Core's parallel folding across dp x tp) */
};

/* Parse "dp2,cp2,ring|a2a,tp2,sp,chunk,pp2,v2|zb,mb4,zero1,full|ffn,ep|epf|epx|ex|ep2,ws50,c2_1_3_1|l0_3_2_0" (any
 * subset, any order). */
bool layout_parse(const char *s, Layout *l);
/* The plan, allocated in g's arena; false (with a message) if the layout
 * does not fit the model. */
bool layout_plan(const IrGraph *g, const Layout *l, Plan *p);

#endif
