/* test_plan.c: the plan contract. The verifier accepts what the programs
 * can execute and names what they cannot; the mesh axis of each parallel
 * dimension is recorded once (plan_axes) and everything reads it; the
 * micro-batch converts between its two units in one place. */
#include "frontend.h"
#include "layout.h"
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c, ...)                                                          \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "test_plan:%d: ", __LINE__);                       \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static char *diag;
static size_t diag_len;

/* Verify p with the diagnostics captured; the message (if any) in diag. */
static bool verify(const IrGraph *g, const Plan *p)
{
    free(diag);
    diag = NULL;
    FILE *cap = open_memstream(&diag, &diag_len);
    ir_diag_set_stream(cap);
    bool ok = plan_verify(g, p);
    fflush(cap);
    ir_diag_set_stream(stderr);
    fclose(cap);
    return ok;
}

static void check_layout(const IrGraph *g, const char *spec, int dp, int tp, int dp_axis, int tp_axis,
                         bool sp)
{
    Layout l;
    Plan p;
    CHECK(layout_parse(spec, &l) && layout_plan(g, &l, &p), "%s: no plan", spec);
    CHECK(verify(g, &p), "%s: rejected: %s", spec, diag);
    CHECK(p.axes_set && p.axis[PLAN_DIM_DP] == dp_axis && p.axis[PLAN_DIM_TP] == tp_axis,
          "%s: axes dp %d tp %d, want %d %d", spec, p.axis[PLAN_DIM_DP], p.axis[PLAN_DIM_TP], dp_axis,
          tp_axis);
    CHECK(plan_degree(&p, PLAN_DIM_DP) == dp && plan_degree(&p, PLAN_DIM_TP) == tp,
          "%s: degrees %d %d", spec, plan_degree(&p, PLAN_DIM_DP), plan_degree(&p, PLAN_DIM_TP));
    PlanLayout L;
    plan_layout(g, &p, &L);
    CHECK(L.dp == dp && L.tp == tp && L.dp_axis == dp_axis && L.tp_axis == tp_axis && L.sp == sp &&
              L.replicated == 1,
          "%s: layout dp %d tp %d axes %d %d sp %d replicated %d", spec, L.dp, L.tp, L.dp_axis,
          L.tp_axis, L.sp, L.replicated);
    /* The two units of the micro-batch: per replica x replicas = whole mesh. */
    CHECK(plan_micro_batch(&p) * dp == p.mb_seqs && L.micro_batch == plan_micro_batch(&p) &&
              plan_mb_seqs(L.micro_batch, L.dp) == p.mb_seqs,
          "%s: micro-batch %lld per replica, %lld over the mesh", spec,
          (long long)plan_micro_batch(&p), (long long)p.mb_seqs);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_plan MODEL.mdl\n");
        return 2;
    }
    IrArena *a = ir_arena_new();
    IrGraph *g = fe_compile_file(a, argv[1], NULL, 0, 0);
    if (!g) {
        fprintf(stderr, "test_plan: %s does not compile\n", argv[1]);
        return 1;
    }
    CHECK(!strcmp(plan_dim_name(PLAN_DIM_DP), "dp") && !strcmp(plan_dim_name(PLAN_DIM_TP), "tp"),
          "dimension names");

    /* Axes as the strategies use them. A 1 x tp mesh has no dp axis. */
    check_layout(g, "dp2-tp2", 2, 2, 0, 1, false);
    check_layout(g, "dp2-tp2-sp", 2, 2, 0, 1, true);
    check_layout(g, "tp2-mb2", 1, 2, -1, 1, false);
    check_layout(g, "dp4-mb2", 4, 1, 0, -1, false);
    check_layout(g, "pp2-mb4", 1, 1, -1, -1, false);

    /* Context parallelism: axis 1 where attention splits its queries'
     * sequence, tp the last axis; every node splits the sequence there. */
    IrArena *a8 = ir_arena_new(); /* a second graph, kept to the end: diagnostics quote its source */
    IrGraph *g8 = NULL;
    {
        Layout lc;
        Plan pc;
        CHECK(layout_parse("dp2-cp2-tp2", &lc) && layout_plan(g, &lc, &pc) && verify(g, &pc),
              "dp2-cp2-tp2 rejected: %s", diag);
        CHECK(pc.mesh.naxes == 3 && pc.axis[PLAN_DIM_DP] == 0 && pc.axis[PLAN_DIM_CP] == 1 &&
                  pc.axis[PLAN_DIM_TP] == 2 && plan_degree(&pc, PLAN_DIM_CP) == 2,
              "cp axes %d %d %d", pc.axis[PLAN_DIM_DP], pc.axis[PLAN_DIM_CP], pc.axis[PLAN_DIM_TP]);
        PlanLayout L;
        plan_layout(g, &pc, &L);
        char buf[256];
        CHECK(L.cp == 2 && L.cp_axis == 1 && L.replicated == 1 &&
                  strstr(plan_layout_str(&L, buf, sizeof buf), "dp 2 x cp 2 x tp 2"),
              "cp layout: %s", buf);
        CHECK(strstr(plan_layout_flags(&L, buf, sizeof buf), "--cp 2"), "cp flags: %s", buf);
        CHECK(layout_parse("cp2", &lc) && layout_plan(g, &lc, &pc) && verify(g, &pc) &&
                  pc.mesh.naxes == 2 && pc.axis[PLAN_DIM_CP] == 1 && pc.axis[PLAN_DIM_TP] < 0,
              "cp2 alone: %s", diag);
        /* The all-to-all form beside tp: attention's heads over cp inside
         * tp's (both axes, the exchange on cp). With 2 KV heads over tp 2 x cp
         * 2 the verifier refuses it, naming the heads; with 8 heads and 4 KV
         * heads the layout builder makes it and the verifier accepts it.
         * The heads on both axes without the exchange are refused. */
        CHECK(layout_parse("dp2-cp2-tp2", &lc) && layout_plan(g, &lc, &pc), "dp2-cp2-tp2: no plan");
        int ai = 0;
        while (ai < g->nfwd && g->nodes[ai].op != IR_OP_ATTENTION)
            ai++;
        int h = g->tensors[g->nodes[ai].in[0]].dim[2];
        PlanStrategy *as = &pc.strategy[ai];
        as->dim[1] = as->dim[2] = (int16_t)h, as->xchg = 2;
        for (int i = ai + 1; i < g->nfwd; i++)
            if (g->nodes[i].op == IR_OP_ATTENTION)
                pc.strategy[i] = *as;
        CHECK(!verify(g, &pc) && diag && strstr(diag, "key/value heads must divide over the 4 cp x tp ranks"),
              "a2a beside tp with 2 KV heads: %s", diag ? diag : "accepted");
        FeSet h8[2] = {{"n_heads", "8"}, {"n_kv_heads", "4"}};
        g8 = fe_compile_file(a8, argv[1], h8, 2, 0);
        CHECK(g8 && layout_parse("dp2-cp2-tp2-a2a", &lc) && layout_plan(g8, &lc, &pc) && verify(g8, &pc),
              "dp2-cp2-tp2-a2a with 4 KV heads rejected: %s", diag);
        if (g8) {
            PlanLayout L8;
            plan_layout(g8, &pc, &L8);
            CHECK(L8.cp == 2 && L8.cp_a2a && L8.tp == 2 && L8.dp == 2, "a2a beside tp: layout cp %d a2a %d tp %d",
                  L8.cp, L8.cp_a2a, L8.tp);
            for (int i = 0; i < g8->nfwd; i++)
                if (g8->nodes[i].op == IR_OP_ATTENTION)
                    pc.strategy[i].xchg = 0;
            CHECK(!verify(g8, &pc) && diag && strstr(diag, "one dim split over two mesh axes"),
                  "heads over cp and tp without the exchange: %s", diag ? diag : "accepted");
        }
    }
    /* Attention work per CP rank: one rank's is the whole causal triangle
     * (S^2 / 2) or band (S W - W^2 / 2); the contiguous split leaves the last
     * rank the most (queries [S/2, S) see (S/2)^2 + (S/2)^2 / 2 keys), the
     * load-balanced one gives every rank the same share. */
    CHECK(plan_cp_pairs_max(1024, 1, true, true, 0) == 1024.0 * 1024 / 2, "causal pairs");
    CHECK(plan_cp_pairs_max(1024, 1, true, true, 256) == 1024.0 * 256 - 256.0 * 256 / 2, "band pairs");
    CHECK(plan_cp_pairs_max(1024, 1, true, false, 0) == 1024.0 * 1024, "full pairs");
    CHECK(plan_cp_pairs_max(1024, 2, false, true, 0) == 512.0 * 512 * 1.5, "cp2 contiguous pairs");
    CHECK(plan_cp_pairs(1024, 2, 0, false, true, 0) == 512.0 * 512 / 2, "cp2 contiguous first rank");
    CHECK(plan_cp_pairs_max(1024, 4, false, false, 0) == 256.0 * 1024, "cp4 full pairs");
    for (int cp = 2; cp <= 8; cp *= 2)
        for (int r = 0; r < cp; r++)
            CHECK(plan_cp_pairs(1024, cp, r, true, true, 0) == 1024.0 * 1024 / 2 / cp,
                  "cp%d rank %d: balanced pairs %g", cp, r, plan_cp_pairs(1024, cp, r, true, true, 0));
    int64_t chunk, pos[PLAN_MAX_CP_CHUNKS];
    CHECK(plan_cp_chunks(1024, 4, 1, true, &chunk, pos) == 2 && chunk == 128 && pos[0] == 128 &&
              pos[1] == 6 * 128,
          "cp4 rank 1 chunks");
    for (int bal = 0; bal < 2; bal++) {
        double sum = 0;
        for (int r = 0; r < 4; r++)
            sum += plan_cp_pairs(1024, 4, r, bal, true, 100);
        CHECK(sum == plan_cp_pairs_max(1024, 1, true, true, 100), "cp4 band pairs add up: %g", sum);
    }

    Layout l;
    Plan good, p;
    layout_parse("dp2-tp2-pp2-mb4", &l);
    CHECK(layout_plan(g, &l, &good) && verify(g, &good), "dp2-tp2-pp2-mb4 rejected: %s", diag);

    /* Axes never recorded: the plan is incomplete. */
    p = good;
    p.axes_set = false;
    CHECK(!verify(g, &p) && strstr(diag, "never recorded"), "unrecorded axes: '%s'", diag);
    /* Axes recorded against what the strategies do. */
    p = good;
    p.axis[PLAN_DIM_DP] = 1;
    p.axis[PLAN_DIM_TP] = 0;
    CHECK(!verify(g, &p) && strstr(diag, "records"), "swapped axes: '%s'", diag);
    /* Stages with a gap, and stages that stop short of the head. */
    PlanStage st[2];
    p = good;
    memcpy(st, good.stages, sizeof st);
    st[1].first_piece++;
    p.stages = st;
    CHECK(!verify(g, &p) && strstr(diag, "does not continue"), "stage gap: '%s'", diag);
    memcpy(st, good.stages, sizeof st);
    st[1].npieces--;
    CHECK(!verify(g, &p) && strstr(diag, "cover"), "stages short: '%s'", diag);
    /* Micro-batches that do not make the global batch. */
    p = good;
    p.num_micro = 3;
    CHECK(!verify(g, &p) && strstr(diag, "global batch"), "micro-batches: '%s'", diag);
    /* Interleaving without the interleaved schedule. */
    p = good;
    p.v = 2;
    CHECK(!verify(g, &p), "v 2 on 1F1B accepted");
    /* A split the mesh does not divide: the heads over 3 ranks. */
    p = good;
    plan_mesh_make(&p.mesh, 1, 3, 8);
    CHECK(!verify(g, &p) && strstr(diag, "cannot execute"), "heads over 3: '%s'", diag);

    free(diag);
    ir_graph_free(g);
    if (g8)
        ir_graph_free(g8);
    ir_arena_free(a8);
    ir_arena_free(a);
    if (failures)
        fprintf(stderr, "test_plan: %d failures\n", failures);
    return failures != 0;
}
